/* gmp_report: the report model (see gmp_report.h). The pass state (struct gmp_report_live) lives
 * only during the replay; gmp_report_trace holds the frozen result. */
#include "gmp_array.h"
#include "gmp_hash.h"
#include "gmp_map.h"
#include "gmp_report.h"
#include "gmp_report_whatif.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gmp_reader.h"

#define NODEV INT32_MIN /* a frame whose device is not known yet */

/* ---- small containers ---- */

/* Grows *p (n elements of size sz, capacity *cap) to hold one more; 0 when out of memory. */
static int grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 1;
    size_t nc = *cap ? *cap * 2 : 8;
    void *q = realloc(*p, nc * sz);
    if (!q)
        return 0;
    *p = q;
    *cap = nc;
    return 1;
}

/* ---- pass state ---- */

typedef struct bucket {
    uint64_t amin, amax, alast, rmin, rmax, rlast, fmax, umax;
    uint64_t clast[GMP_CAT_COUNT]; /* allocated per category at the bucket's last event */
    uint64_t cmax[GMP_CAT_COUNT];  /* ... at its first event of the most allocated (amax) */
    uint8_t has, has_used;
} bucket;

#define F_PENDING 32 /* terms of F kept before they are added (see slot_F) */

typedef struct devslot {
    int used;
    uint64_t allocated, reserved;
    long double F; /* integral of reserved - allocated over time, up to last_t, once the pending
                      terms frag_p[i] * dt_p[i] are added to it (in order: slot_F) */
    uint64_t frag_p[F_PENDING], dt_p[F_PENDING];
    unsigned np;
    uint64_t last_t; /* time of the last state change (0: none yet) */
    uint64_t frag;   /* reserved - allocated now */
    uint64_t frag_max, frag_max_t;
    long double unexpl_sum;
    uint64_t unexpl_n, unexpl_last;
    uint64_t hist_count[GMP_REPORT_HIST], hist_bytes[GMP_REPORT_HIST];
    uint64_t cat[GMP_CAT_COUNT]; /* allocated now per category (gmp_frames_category) */
    bucket *b;                   /* GMP_REPORT_BUCKETS */
    /* with several traces: the allocated bytes after each change, (time, bytes) pairs, for the
     * combined figure of the processes that share a device (GMP_REPORT_MAX_STEPS at most) */
    uint64_t *steps;
    size_t nsteps, capsteps;
    int steps_cut;
} devslot;

typedef struct rframe {
    uint32_t range;
    int32_t device;
    uint32_t tid;
    uint64_t handle; /* START/END */
    uint64_t begin, dev_t;
    long double F_begin;
    uint64_t allocs, abytes, frees, fbytes;
    int64_t inside; /* allocated inside (by this range) and still live */
    uint64_t peak, peak_inside, peak_time;
} rframe;

typedef struct rthread {
    uint32_t tid;
    int32_t last_device; /* NODEV: none yet */
    size_t n, cap;
    rframe *f;
    size_t active_pos; /* index in live->active + 1, 0 when not active */
} rthread;

typedef struct rstat {
    uint32_t range;
    int32_t device;
    int thread_bound;
    uint64_t entered, closed, open_at_end, total_ns, max_ns;
    uint64_t allocs, abytes, frees, fbytes, left;
    uint64_t peak, peak_inside, peak_time;
    int has_peak;
    long double frag_int;
    uint64_t frag_t;
} rstat;

typedef struct lanebuf {
    uint32_t tid, depth;
    uint32_t *id;
    uint64_t *cov;
} lanebuf;

typedef struct heapent {
    gmp_report_alloc a; /* api/range/stack hold trace ids until the freeze */
} heapent;

/* A Python frame of the trace's stack trie as copied into the report (stack_copy): its strings
 * interned and its class, once per node however many stacks share it. */
typedef struct pynode {
    uint32_t function, file;
    uint8_t facts, known; /* gmp_frame_facts_memo */
} pynode;

struct gmp_report_live {
    gmp_report_doc *doc;
    gmp_report_trace *t;
    gmp_replay *rp;
    gmp_reader *r;
    char path[4096];
    char label[256];
    int steps_on; /* several traces: keep each device's steps (devslot) */
    /* timeline axis */
    int axis_started;
    uint64_t t0, w;
    uint64_t last_idx;
    uint64_t fast_lo, fast_hi; /* [lo, hi): the times of bucket fast_i (axis_index) */
    size_t fast_i;
    devslot dev[GMP_REPORT_MAX_DEVICES];
    /* ranges */
    gmp_omap threads; /* tid -> index + 1 */
    rthread *th;
    size_t nth, capth;
    size_t last_th; /* index + 1 of the thread thread_get returned last, 0 none */
    size_t *active; /* threads with open ranges */
    size_t nactive, capactive;
    rframe *se; /* open START/END ranges */
    size_t nse, capse;
    gmp_omap stats; /* range id (+ 2^32 for start/end) -> index */
    rstat *st;
    size_t nst, capst;
    lanebuf lanes[GMP_REPORT_MAX_LANES];
    size_t nlanes;
    /* largest allocations (min-heap by size) */
    heapent *heap;
    size_t nheap, kheap;
    /* freeze */
    gmp_omap rangemap, apimap, stackmap;
    gmp_omap stackbody; /* hash of a stack's frames -> its index (stack_copy) */
    size_t capstacks;
    char *buf;
    size_t bufcap;
    void *symstate; /* the symbolizer's, for this trace */
    gmp_analysis *ana;
    pynode *nodes; /* Python stack nodes by the reader's stack index (stack_copy) */
    size_t capnodes;
    gmp_report_frame *fbuf; /* MAX_FRAMES: a stack being copied */
    uint8_t *sfacts;        /* report stack index -> its frames' facts (gmp_frame_facts_memo) */
    uint32_t *strix;        /* the reader's string index -> index in t->strs + 1 (str_of_id) */
    size_t capstrix;
    size_t capsfacts;
    gmp_omap catmap;  /* stack id | range id << 32 -> gmp_category + 1, during the pass */
    uint8_t *sitecat; /* replay site index -> gmp_category + 1 (0: not known yet) */
    size_t capsitecat;
};

typedef struct gmp_report_live live;

/* gmp_mem_kind_is_device and gmp_report_kind_holds_memory inline, for the callbacks of every
 * event (calls into another file otherwise): bit k of each mask is kind k's answer. */
#define KINDS_DEVICE                                                                               \
    ((1u << GMP_MEM_DEVICE) | (1u << GMP_MEM_ASYNC_POOL) | (1u << GMP_MEM_VMM_PHYSICAL) |          \
     (1u << GMP_MEM_ARRAY) | (1u << GMP_MEM_STATIC))
#define KINDS_NO_MEMORY                                                                            \
    ((1u << GMP_MEM_VMM_MAPPING) | (1u << GMP_MEM_NVTX_REGION) | (1u << GMP_MEM_VA_RESERVE))
static inline int kind_is_device(uint32_t kind)
{
    return kind < 32 && ((KINDS_DEVICE >> kind) & 1u);
}
static inline int kind_holds_memory(uint32_t kind)
{
    return kind >= 32 || !((KINDS_NO_MEMORY >> kind) & 1u);
}

/* The helpers below that run for every event are split: the usual case inline (always_inline:
 * GCC left them out of line, and their calls, prologues and epilogues cost more than their work),
 * the rest in a function of its own. */
#define HOT static inline __attribute__((always_inline))
#define COLD static __attribute__((noinline))

COLD devslot *slot_first(live *L, devslot *s)
{
    s->b = calloc(GMP_REPORT_BUCKETS, sizeof *s->b);
    if (!s->b)
        return NULL;
    s->used = 1;
    return s;
}

HOT devslot *slot_of(live *L, int32_t id)
{
    if (id < -1 || id >= GMP_REPORT_MAX_DEVICES - 1)
        return NULL;
    devslot *s = &L->dev[id + 1];
    return s->used ? s : slot_first(L, s);
}

/* ---- timeline axis ---- */

static void merge_bucket(bucket *o, const bucket *a, const bucket *b)
{
    if (!a->has && !b->has) {
        memset(o, 0, sizeof *o);
    } else if (!a->has || !b->has) {
        *o = a->has ? *a : *b;
        if (a->has_used && !o->has_used) {
            o->has_used = 1;
            o->umax = a->umax;
        }
    } else {
        bucket m = *b;
        m.amin = a->amin < b->amin ? a->amin : b->amin;
        m.amax = a->amax > b->amax ? a->amax : b->amax;
        if (a->amax >= b->amax) /* the first moment of the maximum: a's when they tie */
            memcpy(m.cmax, a->cmax, sizeof m.cmax);
        m.rmin = a->rmin < b->rmin ? a->rmin : b->rmin;
        m.rmax = a->rmax > b->rmax ? a->rmax : b->rmax;
        m.fmax = a->fmax > b->fmax ? a->fmax : b->fmax;
        *o = m;
    }
    if (a->has_used && b->has_used) {
        o->has_used = 1;
        o->umax = a->umax > b->umax ? a->umax : b->umax;
    } else if (a->has_used || b->has_used) {
        o->has_used = 1;
        o->umax = a->has_used ? a->umax : b->umax;
    }
}

static void axis_double(live *L)
{
    const size_t N = GMP_REPORT_BUCKETS;
    for (size_t d = 0; d < GMP_REPORT_MAX_DEVICES; d++) {
        bucket *b = L->dev[d].b;
        if (!b)
            continue;
        for (size_t i = 0; i < N / 2; i++) {
            bucket m;
            merge_bucket(&m, &b[2 * i], &b[2 * i + 1]);
            b[i] = m;
        }
        memset(b + N / 2, 0, N / 2 * sizeof *b);
    }
    for (size_t l = 0; l < L->nlanes; l++) {
        lanebuf *lb = &L->lanes[l];
        for (size_t i = 0; i < N / 2; i++) {
            uint32_t ia = lb->id[2 * i], ib = lb->id[2 * i + 1];
            uint64_t ca = lb->cov[2 * i], cb = lb->cov[2 * i + 1];
            if (ia == ib) {
                lb->id[i] = ia;
                lb->cov[i] = ca + cb;
            } else if (cb > ca || !ia) {
                lb->id[i] = ib;
                lb->cov[i] = cb;
            } else {
                lb->id[i] = ia;
                lb->cov[i] = ca;
            }
        }
        memset(lb->id + N / 2, 0, N / 2 * sizeof *lb->id);
        memset(lb->cov + N / 2, 0, N / 2 * sizeof *lb->cov);
    }
    L->w *= 2;
    L->last_idx /= 2;
    L->fast_lo = L->fast_hi = 0; /* axis_index's bucket moved */
}

/* axis_index's other cases. */
COLD size_t axis_index_slow(live *L, uint64_t t)
{
    if (!L->axis_started) {
        L->axis_started = 1;
        L->t0 = t;
        L->w = 1024;
    }
    if (t < L->t0)
        return 0;
    while ((t - L->t0) / L->w >= GMP_REPORT_BUCKETS)
        axis_double(L);
    size_t i = (size_t)((t - L->t0) / L->w);
    if (i > L->last_idx)
        L->last_idx = i;
    L->fast_i = i;
    L->fast_lo = L->t0 + i * L->w;
    L->fast_hi = L->fast_lo + L->w < L->fast_lo ? UINT64_MAX : L->fast_lo + L->w;
    return i;
}

/* The bucket of time t, widening the buckets until t fits. */
HOT size_t axis_index(live *L, uint64_t t)
{
    if (t >= L->fast_lo && t < L->fast_hi) /* the bucket of the last event, mostly */
        return L->fast_i;
    return axis_index_slow(L, t);
}

/* ---- devices ---- */

/* Adds F's pending terms, in order. The same additions as one per event, in the same order, so
 * the same long double; kept in a register here instead of stored and loaded back each event,
 * which made every event wait (an x87 80-bit load of the 80-bit value just stored). */
static void f_settle(devslot *s)
{
    long double F = s->F;
    for (unsigned i = 0; i < s->np; i++)
        F += (long double)s->frag_p[i] * (long double)s->dt_p[i];
    s->F = F;
    s->np = 0;
}

static long double slot_F(devslot *s, uint64_t t)
{
    if (s && s->np)
        f_settle(s);
    if (!s || !s->last_t || t <= s->last_t)
        return s ? s->F : 0;
    return s->F + (long double)s->frag * (long double)(t - s->last_t);
}

/* Keeps the allocated bytes after a change at time t: one pair per time, and only changes. */
COLD void step_add(devslot *s, uint64_t t)
{
    if (s->steps_cut)
        return;
    if (s->nsteps && s->steps[2 * s->nsteps - 1] == s->allocated)
        return;
    if (s->nsteps && s->steps[2 * s->nsteps - 2] >= t) { /* the same moment: its last value */
        s->steps[2 * s->nsteps - 1] = s->allocated;
        return;
    }
    if (s->nsteps == s->capsteps) {
        size_t cap = s->capsteps ? 2 * s->capsteps : 1024;
        uint64_t *n = NULL;
        if (cap <= GMP_REPORT_MAX_STEPS)
            n = realloc(s->steps, cap * 2 * sizeof *n);
        if (!n) { /* too many, or no memory: no combined figure for this device */
            free(s->steps);
            s->steps = NULL;
            s->nsteps = s->capsteps = 0;
            s->steps_cut = 1;
            return;
        }
        s->steps = n;
        s->capsteps = cap;
    }
    s->steps[2 * s->nsteps] = t;
    s->steps[2 * s->nsteps + 1] = s->allocated;
    s->nsteps++;
}

static void dev_update(live *L, const gmp_replay_device *dev, uint64_t t)
{
    if (!dev)
        return;
    devslot *s = slot_of(L, dev->id);
    if (!s)
        return;
    if (s->last_t && t > s->last_t) { /* F += frag * (t - last_t), soon */
        s->frag_p[s->np] = s->frag;
        s->dt_p[s->np] = t - s->last_t;
        if (++s->np == F_PENDING)
            f_settle(s);
    }
    if (!s->last_t || t > s->last_t)
        s->last_t = t;
    uint64_t al = dev->allocated, re = dev->reserved; /* just stored by the replay, each */
    __asm__("" : "+r"(al), "+r"(re));                 /* as a word: see the categories below */
    s->allocated = al;
    s->reserved = re;
    s->frag = re > al ? re - al : 0;
    if (s->frag > s->frag_max) {
        s->frag_max = s->frag;
        s->frag_max_t = t;
    }
    bucket *b = &s->b[axis_index(L, t)];
    int newmax = 0; /* the categories are kept at the bucket's maximum too */
    if (!b->has) {
        b->has = 1;
        b->amin = b->amax = s->allocated;
        b->rmin = b->rmax = s->reserved;
        b->fmax = s->frag;
        newmax = 1;
    } else {
        if (s->allocated < b->amin)
            b->amin = s->allocated;
        if (s->allocated > b->amax) {
            b->amax = s->allocated;
            newmax = 1;
        }
        if (s->reserved < b->rmin)
            b->rmin = s->reserved;
        if (s->reserved > b->rmax)
            b->rmax = s->reserved;
        if (s->frag > b->fmax)
            b->fmax = s->frag;
    }
    b->alast = s->allocated;
    b->rlast = s->reserved;
#pragma GCC unroll 8
    for (unsigned c = 0; c < GMP_CAT_COUNT; c++) {
        /* word by word: cat_update has just stored one of them, and a wider load of it (memcpy)
         * waits until that store has left for the cache (no store forwarding) */
        uint64_t v = s->cat[c];
        __asm__("" : "+r"(v)); /* keeps the compiler from merging the loads */
        b->clast[c] = v;
    }
    if (newmax)
        memcpy(b->cmax, b->clast, sizeof b->cmax);
    if (L->steps_on)
        step_add(s, t);
}

/* The category of an allocation during the pass (gmp_frames_category), from the frames the
 * trace names (Python frames; native frames by their module only: symbols come at the end) and
 * the range path; cached per (stack, range). The peak's table uses the symbolized frames and the
 * lifetimes (gmp_report_trace's sites), so it can say more than the timeline. */
static gmp_category pass_category(live *L, uint32_t stack, uint32_t range)
{
    uint64_t key = (uint64_t)stack | (uint64_t)range << 32;
    uint64_t *v = gmp_omap_get(&L->catmap, key);
    if (v)
        return (gmp_category)(*v - 1);
    gmp_category c = gmp_replay_category(L->rp, stack, range);
    int fresh;
    v = gmp_omap_put(&L->catmap, key, &fresh);
    if (v)
        *v = (uint64_t)c + 1;
    return c;
}

/* The category of a site seen for the first time (then kept per site). */
COLD gmp_category site_category_first(live *L, const gmp_replay_alloc *a)
{
    gmp_category c = pass_category(L, a->stack, a->range);
    (void)gmp_array_cover((void **)&L->sitecat, &L->capsitecat, a->site, 1); /* per site */
    if (a->site < L->capsitecat)
        L->sitecat[a->site] = (uint8_t)(c + 1);
    return c;
}

HOT void cat_update(live *L, const gmp_replay_alloc *a, int add)
{
    devslot *s = slot_of(L, a->device);
    if (!s)
        return;
    gmp_category c;
    if (a->site < L->capsitecat && L->sitecat[a->site])
        c = (gmp_category)(L->sitecat[a->site] - 1);
    else
        c = site_category_first(L, a);
    if (add)
        s->cat[c] += a->size;
    else
        s->cat[c] = s->cat[c] > a->size ? s->cat[c] - a->size : 0;
}

/* ---- ranges ---- */

COLD rthread *thread_get_slow(live *L, uint32_t tid)
{
    int fresh;
    uint64_t *v = gmp_omap_put(&L->threads, tid, &fresh);
    if (!v)
        return NULL;
    if (fresh) {
        if (!grow((void **)&L->th, &L->capth, L->nth, sizeof *L->th))
            return NULL;
        rthread *t = &L->th[L->nth];
        memset(t, 0, sizeof *t);
        t->tid = tid;
        t->last_device = NODEV;
        *v = ++L->nth;
    }
    L->last_th = (size_t)*v;
    return &L->th[*v - 1];
}

HOT rthread *thread_get(live *L, uint32_t tid)
{
    if (L->last_th && L->th[L->last_th - 1].tid == tid) /* the same thread, mostly */
        return &L->th[L->last_th - 1];
    return thread_get_slow(L, tid);
}

static rstat *stat_get(live *L, uint32_t range, int thread_bound)
{
    int fresh;
    uint64_t key = (uint64_t)range | (thread_bound ? 0 : (1ull << 32));
    uint64_t *v = gmp_omap_put(&L->stats, key, &fresh);
    if (!v)
        return NULL;
    if (fresh) {
        if (!grow((void **)&L->st, &L->capst, L->nst, sizeof *L->st))
            return NULL;
        rstat *s = &L->st[L->nst];
        memset(s, 0, sizeof *s);
        s->range = range;
        s->device = NODEV;
        s->thread_bound = thread_bound;
        *v = ++L->nst;
    }
    return &L->st[*v - 1];
}

static void frame_set_device(live *L, rframe *f, int32_t dev, uint64_t t)
{
    devslot *s = slot_of(L, dev);
    f->device = dev;
    f->F_begin = slot_F(s, t);
    f->dev_t = t;
    f->peak = s ? s->allocated : 0;
    f->peak_inside = 0;
    f->peak_time = t;
}

static void frame_open(live *L, rframe *f, uint32_t range, uint32_t tid, int32_t dev, uint64_t t)
{
    memset(f, 0, sizeof *f);
    f->range = range;
    f->tid = tid;
    f->begin = t;
    f->device = NODEV;
    if (dev != NODEV) {
        frame_set_device(L, f, dev, t);
        return;
    }
    /* until its device is known: the largest device */
    for (size_t i = 0; i < GMP_REPORT_MAX_DEVICES; i++)
        if (L->dev[i].used && L->dev[i].allocated > f->peak)
            f->peak = L->dev[i].allocated;
    f->peak_time = t;
}

static lanebuf *lane_get(live *L, uint32_t tid, uint32_t depth)
{
    for (size_t i = 0; i < L->nlanes; i++)
        if (L->lanes[i].tid == tid && L->lanes[i].depth == depth)
            return &L->lanes[i];
    if (L->nlanes >= GMP_REPORT_MAX_LANES)
        return NULL;
    lanebuf *lb = &L->lanes[L->nlanes];
    lb->id = calloc(GMP_REPORT_BUCKETS, sizeof *lb->id);
    lb->cov = calloc(GMP_REPORT_BUCKETS, sizeof *lb->cov);
    if (!lb->id || !lb->cov) {
        free(lb->id);
        free(lb->cov);
        lb->id = NULL;
        lb->cov = NULL;
        return NULL;
    }
    lb->tid = tid;
    lb->depth = depth;
    L->nlanes++;
    return lb;
}

static void lane_add(live *L, uint32_t tid, uint32_t depth, uint32_t range, uint64_t b, uint64_t e)
{
    if (depth >= GMP_REPORT_LANE_DEPTH)
        return;
    size_t i1 = axis_index(L, e), i0 = axis_index(L, b); /* e first: it may widen the buckets */
    lanebuf *lb = lane_get(L, tid, depth);
    if (!lb)
        return;
    for (size_t i = i0; i <= i1 && i < GMP_REPORT_BUCKETS; i++) {
        uint64_t bs = L->t0 + i * L->w, be = bs + L->w;
        uint64_t lo = b > bs ? b : bs, hi = e < be ? e : be;
        uint64_t cov = hi > lo ? hi - lo : 0;
        if (!lb->id[i] || cov > lb->cov[i] || (lb->id[i] == range && cov)) {
            if (lb->id[i] == range)
                lb->cov[i] += cov;
            else
                lb->cov[i] = cov;
            lb->id[i] = range;
        }
    }
}

/* Closes a frame into its range's statistics. */
static void frame_close(live *L, rframe *f, uint64_t end, int thread_bound, int at_end)
{
    rstat *s = stat_get(L, f->range, thread_bound);
    if (!s)
        return;
    uint64_t dur = end > f->begin ? end - f->begin : 0;
    if (at_end)
        s->open_at_end++;
    else
        s->closed++;
    s->total_ns += dur;
    if (dur > s->max_ns)
        s->max_ns = dur;
    s->allocs += f->allocs;
    s->abytes += f->abytes;
    s->frees += f->frees;
    s->fbytes += f->fbytes;
    s->left += f->inside > 0 ? (uint64_t)f->inside : 0;
    if (!s->has_peak || f->peak > s->peak) {
        s->has_peak = 1;
        s->peak = f->peak;
        s->peak_inside = f->peak_inside;
        s->peak_time = f->peak_time;
        if (f->device != NODEV || s->device == NODEV)
            s->device = f->device;
    }
    if (f->device != NODEV) {
        devslot *ds = slot_of(L, f->device);
        if (ds && end > f->dev_t) {
            s->frag_int += slot_F(ds, end) - f->F_begin;
            s->frag_t += end - f->dev_t;
        }
    }
}

static void thread_active(live *L, rthread *t, size_t ti)
{
    if (t->n && !t->active_pos) {
        if (!grow((void **)&L->active, &L->capactive, L->nactive, sizeof *L->active))
            return;
        L->active[L->nactive++] = ti;
        t->active_pos = L->nactive;
    } else if (!t->n && t->active_pos) {
        size_t p = t->active_pos - 1, last = L->active[--L->nactive];
        L->active[p] = last;
        L->th[last].active_pos = p + 1;
        t->active_pos = 0;
    }
}

static void thread_pop(live *L, rthread *t, uint64_t end, int at_end)
{
    rframe *f = &t->f[--t->n];
    lane_add(L, t->tid, (uint32_t)t->n, f->range, f->begin, end);
    frame_close(L, f, end, 1, at_end);
    if (t->n) { /* the parent takes what happened inside its child */
        rframe *p = &t->f[t->n - 1];
        p->allocs += f->allocs;
        p->abytes += f->abytes;
        p->frees += f->frees;
        p->fbytes += f->fbytes;
        p->inside += f->inside;
    }
}

static gmp_err on_range(void *ctx, gmp_replay *rp, const gmp_replay_range *ev)
{
    live *L = ((gmp_report_trace *)ctx)->live;
    axis_index(L, ev->end_ns);
    if (ev->op == GMP_REPLAY_PUSH) {
        rthread *t = thread_get(L, ev->tid);
        if (!t || !grow((void **)&t->f, &t->cap, t->n, sizeof *t->f))
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "report: out of memory");
        rstat *s = stat_get(L, ev->range, 1);
        if (!s)
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "report: out of memory");
        s->entered++;
        /* the device of the thread's last allocation; else the first one allocated inside */
        frame_open(L, &t->f[t->n++], ev->range, ev->tid, t->last_device, ev->end_ns);
        thread_active(L, t, (size_t)(t - L->th));
    } else if (ev->op == GMP_REPLAY_POP) {
        rthread *t = thread_get(L, ev->tid);
        if (!t)
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "report: out of memory");
        while (t->n > ev->depth)
            thread_pop(L, t, ev->end_ns, 0);
        thread_active(L, t, (size_t)(t - L->th));
    } else if (ev->op == GMP_REPLAY_START) {
        if (L->nse >= 4096) /* open START ranges followed at most */
            return GMP_OK;
        if (!grow((void **)&L->se, &L->capse, L->nse, sizeof *L->se))
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "report: out of memory");
        rstat *s = stat_get(L, ev->range, 0);
        if (!s)
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "report: out of memory");
        s->entered++;
        rframe *f = &L->se[L->nse++];
        frame_open(L, f, ev->range, ev->tid, NODEV, ev->end_ns);
        f->handle = ev->rec->u.rev.handle;
    } else if (ev->op == GMP_REPLAY_END) {
        for (size_t i = L->nse; i-- > 0;) {
            if (L->se[i].handle != ev->rec->u.rev.handle)
                continue;
            frame_close(L, &L->se[i], ev->end_ns, 0, 0);
            L->se[i] = L->se[--L->nse];
            break;
        }
    }
    return GMP_OK;
}

/* ---- memory events ---- */

static int hist_bucket(uint64_t size)
{
    int b = size > 1 ? 63 - __builtin_clzll(size) : 0; /* floor(log2(size)) */
    return b < GMP_REPORT_HIST - 1 ? b : GMP_REPORT_HIST - 1;
}

static void heap_down(heapent *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].a.size < h[m].a.size)
            m = l;
        if (r < n && h[r].a.size < h[m].a.size)
            m = r;
        if (m == i)
            return;
        heapent x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
}

static void heap_up(heapent *h, size_t i)
{
    while (i) {
        size_t p = (i - 1) / 2;
        if (h[p].a.size <= h[i].a.size)
            return;
        heapent x = h[i];
        h[i] = h[p];
        h[p] = x;
        i = p;
    }
}

static void largest_add(live *L, const gmp_replay_alloc *a)
{
    if (!L->kheap || !L->heap || (L->nheap == L->kheap && a->size <= L->heap[0].a.size))
        return; /* (most allocations, once the heap is full: nothing copied) */
    heapent e;
    memset(&e, 0, sizeof e);
    e.a.device = a->device;
    e.a.kind = a->kind;
    e.a.api = a->api;
    e.a.range = a->range;
    e.a.stack = a->stack;
    e.a.tid = a->tid;
    e.a.address = a->address;
    e.a.size = a->size;
    e.a.time_ns = a->time_ns;
    if (L->nheap < L->kheap) {
        L->heap[L->nheap] = e;
        heap_up(L->heap, L->nheap++);
    } else {
        L->heap[0] = e;
        heap_down(L->heap, L->nheap, 0);
    }
}

static void largest_free(live *L, const gmp_replay_alloc *a, uint64_t t)
{
    if (!L->nheap || a->size < L->heap[0].a.size)
        return;
    for (size_t i = 0; i < L->nheap; i++) {
        gmp_report_alloc *x = &L->heap[i].a;
        if (x->address == a->address && x->time_ns == a->time_ns && x->size == a->size &&
            x->device == a->device && !x->free_ns) {
            x->free_ns = t;
            return;
        }
    }
}

/* A new device value v on device d: the peaks of the open ranges on d. */
static void ranges_peak(live *L, int32_t d, uint64_t v, uint64_t t)
{
    for (size_t k = 0; k < L->nactive; k++) {
        rthread *th = &L->th[L->active[k]];
        int64_t sum = 0;
        for (size_t i = th->n; i-- > 0;) {
            rframe *f = &th->f[i];
            sum += f->inside;
            if (f->device != d && f->device != NODEV)
                continue;
            if (v <= f->peak) {
                if (f->device == d)
                    break; /* the frames below on d have seen at least as much */
                continue;
            }
            f->peak = v;
            f->peak_inside = sum > 0 ? (uint64_t)sum : 0;
            f->peak_time = t;
        }
    }
    for (size_t i = 0; i < L->nse; i++) {
        rframe *f = &L->se[i];
        if ((f->device == d || f->device == NODEV) && v > f->peak) {
            f->peak = v;
            f->peak_inside = f->inside > 0 ? (uint64_t)f->inside : 0;
            f->peak_time = t;
        }
    }
}

static gmp_err on_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    live *L = ((gmp_report_trace *)ctx)->live;
    uint64_t t = ev->rec->time_ns;
    axis_index(L, t);
    const gmp_replay_alloc *a = ev->alloc;
    if ((ev->status != GMP_REPLAY_OK && ev->status != GMP_REPLAY_REPLACED) || !a) {
        dev_update(L, ev->dev, t);
        return GMP_OK;
    }
    if (kind_holds_memory(a->kind)) {
        devslot *s = slot_of(L, a->device);
        if (s) {
            int b = hist_bucket(a->size);
            s->hist_count[b]++;
            s->hist_bytes[b] += a->size;
        }
        largest_add(L, a);
    }
    if (kind_is_device(a->kind)) {
        rthread *th = thread_get(L, ev->rec->tid);
        if (!th)
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "report: out of memory");
        th->last_device = a->device;
        /* frames that learn their device now start from the value before this allocation */
        for (size_t i = th->n; i-- > 0 && th->f[i].device == NODEV;)
            frame_set_device(L, &th->f[i], a->device, t);
        for (size_t i = 0; i < L->nse; i++)
            if (L->se[i].device == NODEV)
                frame_set_device(L, &L->se[i], a->device, t);
        if (ev->counted)
            cat_update(L, a, 1);
        dev_update(L, ev->dev, t);
        if (th->n) {
            rframe *f = &th->f[th->n - 1];
            f->allocs++;
            f->abytes += a->size;
            f->inside += (int64_t)a->size;
        }
        for (size_t i = 0; i < L->nse; i++) {
            rframe *f = &L->se[i];
            f->allocs++;
            f->abytes += a->size;
            f->inside += (int64_t)a->size;
        }
        if (ev->counted && ev->dev)
            ranges_peak(L, ev->dev->id, ev->dev->allocated, t);
        return GMP_OK;
    }
    dev_update(L, ev->dev, t);
    return GMP_OK;
}

static gmp_err on_free(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    live *L = ((gmp_report_trace *)ctx)->live;
    uint64_t t = ev->rec->time_ns;
    axis_index(L, t);
    if (ev->status == GMP_REPLAY_OK && ev->alloc && ev->counted)
        for (size_t k = 0; k < ev->nalloc; k++)
            if (kind_is_device(ev->alloc[k].kind))
                cat_update(L, &ev->alloc[k], 0);
    dev_update(L, ev->dev, t);
    if (ev->status != GMP_REPLAY_OK || !ev->alloc)
        return GMP_OK;
    for (size_t k = 0; k < ev->nalloc; k++) {
        const gmp_replay_alloc *a = &ev->alloc[k];
        if (kind_holds_memory(a->kind))
            largest_free(L, a, t);
        if (!kind_is_device(a->kind))
            continue;
        rthread *th = thread_get(L, ev->rec->tid);
        if (!th)
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "report: out of memory");
        if (th->n) {
            rframe *f = &th->f[th->n - 1];
            f->frees++;
            f->fbytes += a->size;
        }
        /* what the ranges open on the allocating thread had allocated inside them */
        rthread *owner = a->tid == ev->rec->tid ? th : thread_get(L, a->tid);
        if (!owner)
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "report: out of memory");
        for (size_t i = owner->n; i-- > 0;) {
            if (owner->f[i].begin <= a->time_ns) {
                owner->f[i].inside -= (int64_t)a->size;
                break;
            }
        }
        for (size_t i = 0; i < L->nse; i++) {
            rframe *f = &L->se[i];
            f->frees++;
            f->fbytes += a->size;
            if (f->begin <= a->time_ns)
                f->inside -= (int64_t)a->size;
        }
    }
    return GMP_OK;
}

static gmp_err on_pool(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *dev)
{
    live *L = ((gmp_report_trace *)ctx)->live;
    axis_index(L, rec->time_ns);
    dev_update(L, dev, rec->time_ns);
    return GMP_OK;
}

static gmp_err on_sample(void *ctx, gmp_replay *rp, const gmp_replay_sample *ev)
{
    live *L = ((gmp_report_trace *)ctx)->live;
    uint64_t t = ev->rec->time_ns;
    size_t i = axis_index(L, t);
    if (!ev->dev)
        return GMP_OK;
    devslot *s = slot_of(L, ev->dev->id);
    if (!s)
        return GMP_OK;
    s->unexpl_sum += (long double)ev->unexplained;
    s->unexpl_n++;
    s->unexpl_last = ev->unexplained;
    bucket *b = &s->b[i];
    if (!b->has_used || ev->used > b->umax)
        b->umax = ev->used;
    b->has_used = 1;
    return GMP_OK;
}

static gmp_err on_event(void *ctx, gmp_replay *rp, const gmp_rec *rec)
{
    live *L = ((gmp_report_trace *)ctx)->live;
    if (rec->type != GMP_REC_END && rec->time_ns)
        axis_index(L, rec->time_ns);
    if (rec->type == GMP_REC_END && rec->time_ns > L->t->end_ns)
        L->t->end_ns = rec->time_ns; /* the process's exit */
    return GMP_OK;
}

static gmp_err on_oom(void *ctx, gmp_replay *rp, const gmp_replay_oom *ev)
{
    live *L = ((gmp_report_trace *)ctx)->live;
    axis_index(L, ev->time_ns);
    return GMP_OK;
}

/* ---- freeze: copy what the builder needs ---- */

/* Index of s[0..n) in t->strs (equal strings share one index); UINT32_MAX when out of memory
 * (shown as ""; freeze then fails). A gmp_str read from t->strs is valid until the next intern. */
static uint32_t intern(live *L, const char *s, size_t n)
{
    if (n > UINT32_MAX) { /* gmp_str's length */
        L->t->strs.oom = 1;
        return UINT32_MAX;
    }
    return gmp_intern_add(&L->t->strs, s, n);
}

static uint32_t intern_cstr(live *L, const char *s)
{
    return intern(L, s, s ? strlen(s) : 0);
}

static uint32_t range_str(live *L, uint32_t id)
{
    if (!id)
        return 0;
    int fresh;
    uint64_t *v = gmp_omap_put(&L->rangemap, id, &fresh);
    if (!v)
        return 0;
    if (!fresh)
        return (uint32_t)*v;
    size_t n = gmp_reader_range_path(L->r, id, L->buf, L->bufcap);
    if (n >= L->bufcap) {
        char *p = realloc(L->buf, n + 1);
        if (!p)
            return 0;
        L->buf = p;
        L->bufcap = n + 1;
        n = gmp_reader_range_path(L->r, id, L->buf, L->bufcap);
    }
    uint32_t s = intern(L, L->buf, n);
    *v = s == UINT32_MAX ? 0 : s;
    return (uint32_t)*v;
}

static uint32_t api_str(live *L, uint32_t id)
{
    if (!id)
        return 0;
    int fresh;
    uint64_t *v = gmp_omap_put(&L->apimap, id, &fresh);
    if (!v)
        return 0;
    if (fresh) {
        gmp_str s = gmp_reader_string(L->r, id);
        uint32_t i = intern(L, s.ptr, s.len);
        *v = i == UINT32_MAX ? 0 : i;
    }
    return (uint32_t)*v;
}

static const gmp_report_symbolizer *g_symbolizer;

void gmp_report_set_symbolizer(const gmp_report_symbolizer *s)
{
    g_symbolizer = s;
}

#define MAX_FRAMES 256

/* The one place where native frames get their names: the symbolizer plugged in with
 * gmp_report_set_symbolizer, else module+offset from the trace's module map. Appends to fr. */
static size_t native_frame(live *L, const gmp_replay_frame *x, gmp_report_frame *out, size_t max)
{
    const gmp_report_symbolizer *sy = g_symbolizer;
    if (sy && sy->resolve && max) {
        gmp_report_sym sf[16];
        size_t want = max < 16 ? max : 16;
        size_t n = sy->resolve(&L->symstate, L->r, x->address, sf, want);
        if (n > want)
            n = want;
        for (size_t k = 0; k < n; k++) {
            gmp_report_frame *o = &out[k];
            memset(o, 0, sizeof *o);
            o->kind = GMP_FRAME_NATIVE;
            o->address = x->address;
            o->symbolized = 1;
            o->function = intern_cstr(L, sf[k].function);
            o->file = intern_cstr(L, sf[k].file);
            o->line = sf[k].line;
            o->module = intern_cstr(L, sf[k].module);
            o->offset = sf[k].offset;
            o->inlined = sf[k].inlined;
            o->unknown = intern_cstr(L, sf[k].unknown);
            o->display = intern_cstr(L, sf[k].display);
        }
        if (n)
            return n;
    }
    gmp_report_frame *o = &out[0];
    memset(o, 0, sizeof *o);
    o->kind = GMP_FRAME_NATIVE;
    o->address = x->address;
    if (x->module) {
        o->module = intern(L, x->module->path.ptr, x->module->path.len);
        o->offset = x->offset;
    }
    return 1;
}

/* The index of the reader's string id in t->strs (intern), kept per id. */
static uint32_t str_of_id(live *L, uint32_t id)
{
    uint32_t ix = gmp_reader_string_index(L->r, id);
    if (ix)
        (void)gmp_array_cover((void **)&L->strix, &L->capstrix, ix, sizeof *L->strix);
    if (ix && ix < L->capstrix && L->strix[ix])
        return L->strix[ix] - 1;
    gmp_str s = gmp_reader_string(L->r, id);
    uint32_t v = intern(L, s.ptr, s.len);
    if (ix && ix < L->capstrix && v != UINT32_MAX)
        L->strix[ix] = v + 1;
    return v;
}

/* The cached copy of the Python frame at stack node `node` (x its frame); NULL when it cannot be
 * kept (out of memory, unknown node): the caller computes it. */
static pynode *pynode_of(live *L, uint32_t node, const gmp_replay_frame *x)
{
    uint32_t ix = gmp_reader_stack_index(L->r, node);
    if (!ix)
        return NULL;
    if (gmp_array_cover((void **)&L->nodes, &L->capnodes, ix, sizeof *L->nodes) < 0)
        return NULL;
    pynode *pn = &L->nodes[ix];
    if (!pn->known) {
        const gmp_rec_stack *s = gmp_reader_stack(L->r, node);
        pn->function = s ? str_of_id(L, s->function) : intern(L, x->function.ptr, x->function.len);
        pn->file = s ? str_of_id(L, s->file) : intern(L, x->file.ptr, x->file.len);
        /* the frame as the pass classified it: its function and file */
        pn->facts = (uint8_t)gmp_replay_frame_facts(L->rp, node);
        pn->known = 1;
    }
    return pn;
}

static uint32_t stack_copy(live *L, uint32_t id)
{
    if (!id)
        return GMP_REPORT_NO_STACK;
    int fresh;
    uint64_t *v = gmp_omap_put(&L->stackmap, id, &fresh);
    if (!v)
        return GMP_REPORT_NO_STACK;
    if (!fresh)
        return (uint32_t)*v;
    *v = GMP_REPORT_NO_STACK;
    gmp_report_trace *t = L->t;
    gmp_replay_frame fr[MAX_FRAMES];
    size_t n = gmp_replay_stack_frames(L->rp, id, fr, MAX_FRAMES);
    if (n > MAX_FRAMES)
        n = MAX_FRAMES;
    if (!grow((void **)&t->stacks, &L->capstacks, t->nstacks, sizeof *t->stacks))
        return GMP_REPORT_NO_STACK;
    if (!L->fbuf && !(L->fbuf = malloc(MAX_FRAMES * sizeof *L->fbuf)))
        return GMP_REPORT_NO_STACK;
    gmp_report_frame *out = L->fbuf;
    uint8_t known[MAX_FRAMES]; /* the frame's facts are known (a cached Python node) */
    uint8_t facts[MAX_FRAMES]; /* gmp_frame_facts_memo */
    size_t k = 0;
    int raw = 0;        /* a frame at an address inside no loaded module, left out */
    uint32_t node = id; /* the trie node of fr[i] (as gmp_replay_stack_frames walks) */
    for (size_t i = 0; i < n && k < MAX_FRAMES; i++) {
        const gmp_replay_frame *x = &fr[i];
        const gmp_rec_stack *sn = gmp_reader_stack(L->r, node);
        if (x->kind == GMP_FRAME_PYTHON) {
            gmp_report_frame *o = &out[k];
            memset(o, 0, sizeof *o);
            o->kind = x->kind;
            o->line = x->line;
            const pynode *pn = sn ? pynode_of(L, node, x) : NULL;
            if (pn) {
                o->function = pn->function;
                o->file = pn->file;
                facts[k] = pn->facts;
                known[k] = 1;
            } else {
                o->function = intern(L, x->function.ptr, x->function.len);
                o->file = intern(L, x->file.ptr, x->file.len);
                known[k] = 0;
            }
            k++;
        } else if (!x->module) {
            /* an address inside no loaded module (a frame-pointer walk reads data words as
             * return addresses: device pointers; JIT code): left out, so that one call site is
             * one stack whatever those words held */
            raw = 1;
        } else {
            size_t m = native_frame(L, x, out + k, MAX_FRAMES - k);
            memset(known + k, 0, m);
            k += m;
        }
        node = sn && sn->parent != node ? sn->parent : 0;
    }

    if (raw && !k) { /* nothing else: one "?" frame (folded), rather than no stack */
        memset(out, 0, sizeof *out);
        out->kind = GMP_FRAME_NATIVE;
        out->outside = 1;
        facts[0] = GMP_FRAME_INTERNAL;
        known[0] = 1;
        k = 1;
    }
    gmp_report_frame *frames = malloc((k ? k : 1) * sizeof *frames);
    if (!frames)
        return GMP_REPORT_NO_STACK;
    if (t->nstacks >= L->capsfacts) {
        size_t nc = L->capsfacts ? L->capsfacts * 2 : 256;
        uint8_t *p = realloc(L->sfacts, nc);
        if (!p) {
            free(frames);
            return GMP_REPORT_NO_STACK;
        }
        L->sfacts = p;
        L->capsfacts = nc;
    }
    gmp_report_stack *s = &t->stacks[t->nstacks];
    s->nframes = k;
    s->frames = frames;
    s->user = k;
    unsigned all = 0;                /* what the frames say for the categories (site_category) */
    for (size_t i = 0; i < k; i++) { /* which frames are the user's code (gmp_frames.h) */
        gmp_report_frame *o = &out[i];
        if (!known[i]) {
            gmp_frame_info fi = {gmp_report_str(t, o->function), gmp_report_str(t, o->file),
                                 gmp_report_str(t, o->module)};
            facts[i] = (uint8_t)gmp_frame_facts_memo(gmp_replay_frame_memo(L->rp), &fi);
        }
        all |= facts[i];
        o->cls = (uint8_t)gmp_frame_facts_class(facts[i]);
        if (o->cls == GMP_FRAME_USER && s->user == k)
            s->user = i;
    }
    L->sfacts[t->nstacks] = (uint8_t)all;
    memcpy(frames, out, k * sizeof *frames);
    s->user_name = 0;
    if (k) { /* the first frame shown when folded: what a breakdown by frame groups by */
        uint8_t cls[MAX_FRAMES], hide[MAX_FRAMES];
        for (size_t i = 0; i < k; i++)
            cls[i] = out[i].cls;
        gmp_frames_fold(cls, k, hide);
        size_t first = 0;
        while (first < k && hide[first])
            first++;
        char name[1024];
        size_t nn = gmp_report_frame_text(t, &out[first < k ? first : 0], name, sizeof name);
        s->user_name = intern(L, name, nn);
        if (s->user_name == UINT32_MAX)
            s->user_name = 0;
    }
    /* a stack whose addresses inside no loaded module were left out may have the frames of a
     * stack copied before: that stack (every stack is kept by its frames for this) */
    uint64_t body = gmp_hash_bytes(0x9e3779b97f4a7c15ull ^ k, frames, k * sizeof *frames);
    int first;
    uint64_t *b = gmp_omap_put(&L->stackbody, body, &first);
    if (raw && b && !first && *b < t->nstacks && t->stacks[*b].nframes == k &&
        memcmp(t->stacks[*b].frames, frames, k * sizeof *frames) == 0) {
        free(frames);
        s->frames = NULL;
        s->nframes = 0;
        *v = *b;
        return (uint32_t)*v;
    }
    if (b && first)
        *b = t->nstacks;
    *v = t->nstacks++;
    return (uint32_t)*v;
}

static uint32_t depth_of(const gmp_str s)
{
    uint32_t d = s.len ? 1 : 0;
    for (uint32_t i = 0; i < s.len; i++)
        d += s.ptr[i] == '/';
    return d;
}

static int range_by_path(const void *a, const void *b)
{
    const gmp_report_range *x = a, *y = b;
    if (x->path != y->path)
        return x->path < y->path ? -1 : 1;
    return x->thread_bound - y->thread_bound;
}

static gmp_err freeze_ranges(live *L)
{
    gmp_report_trace *t = L->t;
    t->ranges = calloc(L->nst ? L->nst : 1, sizeof *t->ranges);
    if (!t->ranges)
        return GMP_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < L->nst; i++) {
        const rstat *s = &L->st[i];
        gmp_report_range *o = &t->ranges[n++];
        o->path = range_str(L, s->range);
        o->thread_bound = s->thread_bound;
        o->device = s->device == NODEV ? -2 : s->device;
        o->entered = s->entered;
        o->closed = s->closed;
        o->open_at_end = s->open_at_end;
        o->total_ns = s->total_ns;
        o->max_ns = s->max_ns;
        o->allocs = s->allocs;
        o->alloc_bytes = s->abytes;
        o->frees = s->frees;
        o->free_bytes = s->fbytes;
        o->left_bytes = s->left;
        o->peak_bytes = s->peak;
        o->peak_time_ns = s->peak_time;
        o->peak_inside_bytes = s->peak_inside;
        o->frag_mean_bytes = s->frag_t ? (double)(s->frag_int / (long double)s->frag_t) : 0.0;
        o->depth = depth_of(gmp_report_str(t, o->path));
        /* weight for merging below */
        o->net_bytes = (int64_t)s->frag_t;
    }
    qsort(t->ranges, n, sizeof *t->ranges, range_by_path);
    /* several ids with one path (domains, or a path defined twice): one row */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        gmp_report_range *x = &t->ranges[i];
        if (m && t->ranges[m - 1].path == x->path &&
            t->ranges[m - 1].thread_bound == x->thread_bound) {
            gmp_report_range *o = &t->ranges[m - 1];
            double wo = (double)o->net_bytes, wx = (double)x->net_bytes;
            if (wo + wx > 0)
                o->frag_mean_bytes =
                    (o->frag_mean_bytes * wo + x->frag_mean_bytes * wx) / (wo + wx);
            o->net_bytes += x->net_bytes;
            o->entered += x->entered;
            o->closed += x->closed;
            o->open_at_end += x->open_at_end;
            o->total_ns += x->total_ns;
            if (x->max_ns > o->max_ns)
                o->max_ns = x->max_ns;
            o->allocs += x->allocs;
            o->alloc_bytes += x->alloc_bytes;
            o->frees += x->frees;
            o->free_bytes += x->free_bytes;
            o->left_bytes += x->left_bytes;
            if (x->peak_bytes > o->peak_bytes) {
                o->peak_bytes = x->peak_bytes;
                o->peak_time_ns = x->peak_time_ns;
                o->peak_inside_bytes = x->peak_inside_bytes;
                o->device = x->device;
            }
        } else {
            t->ranges[m++] = *x;
        }
    }
    for (size_t i = 0; i < m; i++) {
        gmp_report_range *o = &t->ranges[i];
        o->net_bytes = (int64_t)o->alloc_bytes - (int64_t)o->free_bytes;
    }
    t->nranges = m;
    return GMP_OK;
}

static gmp_err freeze_lanes(live *L)
{
    gmp_report_trace *t = L->t;
    t->lanes = calloc(L->nlanes ? L->nlanes : 1, sizeof *t->lanes);
    if (!t->lanes)
        return GMP_ERR_NOMEM;
    for (size_t l = 0; l < L->nlanes; l++) {
        const lanebuf *lb = &L->lanes[l];
        gmp_report_lane *o = &t->lanes[t->nlanes++];
        o->tid = lb->tid;
        o->depth = lb->depth;
        o->spans = calloc(GMP_REPORT_BUCKETS, sizeof *o->spans);
        if (!o->spans)
            return GMP_ERR_NOMEM;
        for (size_t i = 0; i < GMP_REPORT_BUCKETS; i++) {
            if (!lb->id[i])
                continue;
            uint64_t bs = L->t0 + i * L->w;
            uint32_t p = range_str(L, lb->id[i]);
            gmp_report_span *last = o->nspans ? &o->spans[o->nspans - 1] : NULL;
            if (last && last->path == p && last->t1_ns == bs) {
                last->t1_ns = bs + L->w;
                continue;
            }
            o->spans[o->nspans++] = (gmp_report_span){bs, bs + L->w, p};
        }
    }
    /* lanes ordered by thread (first seen) and depth */
    for (size_t i = 1; i < t->nlanes; i++) {
        gmp_report_lane x = t->lanes[i];
        size_t j = i;
        while (j > 0 && (t->lanes[j - 1].tid > x.tid ||
                         (t->lanes[j - 1].tid == x.tid && t->lanes[j - 1].depth > x.depth))) {
            t->lanes[j] = t->lanes[j - 1];
            j--;
        }
        t->lanes[j] = x;
    }
    return GMP_OK;
}

static gmp_err freeze_devices(live *L)
{
    gmp_report_trace *t = L->t;
    gmp_replay *rp = L->rp;
    size_t nd = gmp_replay_device_count(rp);
    t->devices = calloc(nd ? nd : 1, sizeof *t->devices);
    if (!t->devices)
        return GMP_ERR_NOMEM;
    const gmp_replay_summary *sum = gmp_replay_get_summary(rp);
    uint64_t last = sum->last_ns;
    for (size_t i = 0; i < nd; i++) {
        const gmp_replay_device *d = gmp_replay_device_at(rp, i);
        gmp_report_device *o = &t->devices[t->ndevices++];
        o->id = d->id;
        o->d = *d;
        o->d.def = NULL;
        o->leaked_bytes = d->allocated - d->kind[GMP_MEM_STATIC].live_bytes;
        o->leaked_count = d->live_count - d->kind[GMP_MEM_STATIC].live_count;
        if (d->def) {
            o->has_def = 1;
            o->name = intern(L, d->def->name.ptr, d->def->name.len);
            o->total_bytes = d->def->total_bytes;
        }
        o->listed = d->id >= 0 || d->allocs > 0;
        if (d->def) {
            static const uint8_t zero[16];
            memcpy(o->uuid, d->def->uuid, sizeof o->uuid);
            o->has_uuid = memcmp(o->uuid, zero, sizeof zero) != 0;
        }
        devslot *s = d->id >= -1 && d->id < GMP_REPORT_MAX_DEVICES - 1 ? &L->dev[d->id + 1] : NULL;
        if (!s || !s->used)
            continue;
        o->steps = s->steps; /* moved */
        o->nsteps = s->nsteps;
        o->steps_cut = s->steps_cut;
        s->steps = NULL;
        s->nsteps = s->capsteps = 0;
        o->frag_max = s->frag_max;
        o->frag_max_time_ns = s->frag_max_t;
        uint64_t span = last > sum->first_ns ? last - sum->first_ns : 0;
        if (span)
            o->frag_mean = (double)(slot_F(s, last) / (long double)span);
        if (s->unexpl_n)
            o->unexplained_mean = (double)(s->unexpl_sum / (long double)s->unexpl_n);
        o->unexplained_last = s->unexpl_last;
        memcpy(o->hist_count, s->hist_count, sizeof o->hist_count);
        memcpy(o->hist_bytes, s->hist_bytes, sizeof o->hist_bytes);
        size_t np = L->axis_started ? (size_t)L->last_idx + 1 : 0;
        o->points = calloc(np ? np : 1, sizeof *o->points);
        if (!o->points)
            return GMP_ERR_NOMEM;
        gmp_report_point cur;
        memset(&cur, 0, sizeof cur);
        for (size_t k = 0; k < np; k++) {
            const bucket *b = &s->b[k];
            gmp_report_point *p = &o->points[k];
            if (b->has) {
                p->alloc_min = b->amin;
                p->alloc_max = b->amax;
                p->alloc_last = b->alast;
                p->res_min = b->rmin;
                p->res_max = b->rmax;
                p->res_last = b->rlast;
                p->frag_max = b->fmax;
                memcpy(p->cat_last, b->clast, sizeof p->cat_last);
                memcpy(p->cat_max, b->cmax, sizeof p->cat_max);
                p->has = 1;
                cur = *p;
            } else {
                p->alloc_min = p->alloc_max = p->alloc_last = cur.alloc_last;
                p->res_min = p->res_max = p->res_last = cur.res_last;
                p->frag_max = cur.res_last > cur.alloc_last ? cur.res_last - cur.alloc_last : 0;
                memcpy(p->cat_last, cur.cat_last, sizeof p->cat_last);
                memcpy(p->cat_max, cur.cat_last, sizeof p->cat_max); /* nothing changed */
            }
            p->t0_ns = L->t0 + k * L->w;
            p->t1_ns = p->t0_ns + L->w;
            p->has_used = b->has_used;
            p->used_max = b->umax;
        }
        o->npoints = np;
    }
    t->bucket_ns = L->w;
    return GMP_OK;
}

static int largest_cmp(const void *a, const void *b)
{
    const heapent *x = a, *y = b;
    if (x->a.size != y->a.size)
        return x->a.size > y->a.size ? -1 : 1;
    if (x->a.time_ns != y->a.time_ns)
        return x->a.time_ns < y->a.time_ns ? -1 : 1;
    return 0;
}

static uint32_t ana_range(void *c, uint32_t id)
{
    return range_str(c, id);
}
static uint32_t ana_api(void *c, uint32_t id)
{
    return api_str(c, id);
}
static uint32_t ana_stack(void *c, uint32_t id)
{
    return stack_copy(c, id);
}

/* The category of a site (gmp_frames_category) from its stack's frames and its range path. */
static uint32_t site_category(live *L, const gmp_report_row *o)
{
    const gmp_report_trace *t = L->t;
    unsigned f = o->stack < t->nstacks ? L->sfacts[o->stack] : 0;
    gmp_category c = gmp_frames_category_of(f, gmp_report_str(t, o->range));
    /* lifetimes: made by the backward pass and still live at the end (as at the peak), it was
     * kept past the backward: a gradient (AccumulateGrad keeps the incoming buffer as .grad) */
    if (c == GMP_CAT_TEMPORARY && o->peak_bytes && o->live_bytes >= o->peak_bytes)
        c = GMP_CAT_GRADIENT;
    return (uint32_t)c;
}

static gmp_err freeze(live *L)
{
    gmp_report_trace *t = L->t;
    gmp_replay *rp = L->rp;
    gmp_err e;
    L->r = gmp_replay_reader(rp);
    if (intern(L, "", 0) != 0) /* index 0 is "" */
        return GMP_ERR_NOMEM;
    t->path = intern_cstr(L, L->path);
    t->label = intern_cstr(L, L->label);
    const gmp_rec_header *h = gmp_reader_header(L->r);
    t->sum = *gmp_replay_get_summary(rp);
    t->has_end = gmp_reader_get_stats(L->r)->has_end;
    if (h) {
        t->has_header = 1;
        t->producer = intern(L, h->producer.ptr, h->producer.len);
        t->hostname = intern(L, h->hostname.ptr, h->hostname.len);
        t->cmdline = intern(L, h->cmdline.ptr, h->cmdline.len);
        t->pid = h->pid;
        t->ppid = h->ppid;
        t->rank = h->rank;
        t->local_rank = h->local_rank;
        t->world_size = h->world_size;
        t->start_wall_ns = h->start_wall_ns;
        t->start_trace_ns = h->start_trace_ns;
    } else {
        t->rank = -1;
        t->local_rank = -1;
    }
    /* how the recording ends: a snapshot (the importer's header options) or a trace without END
     * ends before the program (docs/report.md) */
    t->end = GMP_REPORT_END_EXIT;
    if (h && h->options.len >= 23 &&
        memmem(h->options.ptr, h->options.len, "import=pytorch-snapshot", 23) != NULL)
        t->end = GMP_REPORT_END_SNAPSHOT;
    else if (!t->has_end || t->sum.truncated)
        t->end = GMP_REPORT_END_CUT;
    t->torch_figures =
        t->end == GMP_REPORT_END_SNAPSHOT ||
        (h && h->options.len >= 22 &&
         memmem(h->options.ptr, h->options.len, "merged=pytorch-history", 22) != NULL);
    t->t0_ns = gmp_trace_zero(h, t->sum.first_ns);

    if ((e = freeze_devices(L)) != GMP_OK)
        return e;
    size_t ns = gmp_replay_site_count(rp);
    t->sites = calloc(ns ? ns : 1, sizeof *t->sites);
    if (!t->sites)
        return GMP_ERR_NOMEM;
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(rp, i);
        gmp_report_row *o = &t->sites[t->nsites++];
        o->device = s->device;
        o->kind = s->kind;
        o->api = api_str(L, s->api);
        o->range = range_str(L, s->range);
        /* ranges entered around no allocation (a snapshot's annotations) do not count: such a
         * recording groups by user frame, as `view` and `diff` group it */
        t->has_ranges |= s->range != 0;
        o->stack = stack_copy(L, s->stack);
        o->allocs = s->allocs;
        o->alloc_bytes = s->alloc_bytes;
        o->frees = s->frees;
        o->live_bytes = s->live_bytes;
        o->live_count = s->live_count;
        o->peak_bytes = s->peak_bytes;
        o->peak_count = s->peak_count;
        o->max_alloc_bytes = s->max_alloc_bytes;
        o->category = site_category(L, o);
    }
    if ((e = freeze_ranges(L)) != GMP_OK || (e = freeze_lanes(L)) != GMP_OK)
        return e;
    qsort(L->heap, L->nheap, sizeof *L->heap, largest_cmp);
    t->largest = calloc(L->nheap ? L->nheap : 1, sizeof *t->largest);
    if (!t->largest)
        return GMP_ERR_NOMEM;
    for (size_t i = 0; i < L->nheap; i++) {
        gmp_report_alloc a = L->heap[i].a;
        a.api = api_str(L, a.api);
        a.range = range_str(L, a.range);
        a.stack = stack_copy(L, a.stack);
        t->largest[t->nlargest++] = a;
    }
    size_t no = gmp_replay_oom_count(rp);
    t->ooms = calloc(no ? no : 1, sizeof *t->ooms);
    if (!t->ooms)
        return GMP_ERR_NOMEM;
    for (size_t i = 0; i < no; i++) {
        gmp_report_oom *o = &t->ooms[t->nooms++];
        o->o = *gmp_replay_oom_at(rp, i);
        o->o.api = api_str(L, o->o.api);
        o->o.range = range_str(L, o->o.range);
        o->o.stack = stack_copy(L, o->o.stack);
    }
    size_t nn = gmp_replay_notice_count(rp);
    t->notices = calloc(nn ? nn : 1, sizeof *t->notices);
    if (!t->notices)
        return GMP_ERR_NOMEM;
    for (size_t i = 0; i < nn; i++) {
        gmp_report_notice *o = &t->notices[t->nnotices++];
        const char *m = gmp_replay_notice_at(rp, i, &o->severity, &o->time_ns);
        o->message = intern_cstr(L, m);
    }
    gmp_analysis_resolver res = {L, ana_range, ana_api, ana_stack};
    if (!(t->analysis = gmp_analysis_finish(L->ana, &res)))
        return GMP_ERR_NOMEM;
    if (t->strs.oom) /* out of memory while interning */
        return GMP_ERR_NOMEM;
    return GMP_OK;
}

static void live_free(live *L)
{
    if (!L)
        return;
    for (size_t i = 0; i < GMP_REPORT_MAX_DEVICES; i++) {
        free(L->dev[i].b);
        free(L->dev[i].steps);
    }
    for (size_t i = 0; i < L->nth; i++)
        free(L->th[i].f);
    free(L->th);
    free(L->active);
    free(L->se);
    free(L->st);
    for (size_t i = 0; i < L->nlanes; i++) {
        free(L->lanes[i].id);
        free(L->lanes[i].cov);
    }
    free(L->heap);
    free(L->buf);
    free(L->nodes);
    free(L->fbuf);
    free(L->sfacts);
    free(L->strix);
    gmp_analysis_free(L->ana);
    gmp_omap_free(&L->threads);
    gmp_omap_free(&L->stats);
    gmp_omap_free(&L->rangemap);
    gmp_omap_free(&L->apimap);
    gmp_omap_free(&L->stackmap);
    gmp_omap_free(&L->stackbody);
    gmp_omap_free(&L->catmap);
    free(L->sitecat);
    if (L->symstate && g_symbolizer && g_symbolizer->free_state)
        g_symbolizer->free_state(L->symstate);
    free(L);
}

static gmp_err on_end(void *ctx, gmp_replay *rp)
{
    gmp_report_trace *t = ctx;
    live *L = t->live;
    const gmp_replay_summary *s = gmp_replay_get_summary(rp);
    uint64_t end = s->last_ns;
    /* ranges still open at the end: closed at the last event */
    for (size_t i = 0; i < L->nth; i++) {
        rthread *th = &L->th[i];
        while (th->n)
            thread_pop(L, th, end > th->f[th->n - 1].begin ? end : th->f[th->n - 1].begin, 1);
    }
    for (size_t i = 0; i < L->nse; i++)
        frame_close(L, &L->se[i], end > L->se[i].begin ? end : L->se[i].begin, 0, 1);
    L->nse = 0;
    gmp_err e = freeze(L);
    live_free(L);
    t->live = NULL;
    if (e != GMP_OK)
        return gmp_replay_fail(rp, e, "report: out of memory");
    return GMP_OK;
}

static const gmp_replay_ops report_ops = {
    .alloc = on_alloc,
    .free = on_free,
    .range = on_range,
    .pool = on_pool,
    .sample = on_sample,
    .oom = on_oom,
    .event = on_event,
    .end = on_end,
};

/* ---- document ---- */

gmp_err gmp_report_doc_new(gmp_report_doc **out, const gmp_report_opts *opts)
{
    gmp_report_doc *d = calloc(1, sizeof *d);
    if (!d)
        return GMP_ERR_NOMEM;
    if (opts)
        d->opts = *opts;
    if (!d->opts.max_largest)
        d->opts.max_largest = 20;
    if (d->opts.max_largest > 1000)
        d->opts.max_largest = 1000;
    *out = d;
    return GMP_OK;
}

static void trace_free(gmp_report_trace *t)
{
    if (!t)
        return;
    live_free(t->live);
    for (size_t i = 0; i < t->ndevices; i++) {
        free(t->devices[i].points);
        free(t->devices[i].steps);
    }
    free(t->devices);
    free(t->sites);
    free(t->ranges);
    for (size_t i = 0; i < t->nlanes; i++)
        free(t->lanes[i].spans);
    free(t->lanes);
    free(t->largest);
    free(t->ooms);
    free(t->notices);
    gmp_analysis_result_free(t->analysis);
    gmp_report_whatif_free(t->whatif);
    for (size_t i = 0; i < t->nstacks; i++)
        free(t->stacks[i].frames);
    free(t->stacks);
    gmp_intern_free(&t->strs);
    free(t);
}

void gmp_report_doc_free(gmp_report_doc *doc)
{
    if (!doc)
        return;
    for (size_t i = 0; i < doc->ntraces; i++)
        trace_free(doc->traces[i]);
    free(doc->traces);
    if (doc->ranks_oom_free)
        doc->ranks_oom_free(doc->ranks_oom);
    free(doc);
}

gmp_err gmp_report_doc_add(gmp_report_doc *doc, gmp_replay *rp, const char *path, const char *label)
{
    gmp_report_trace **tv = realloc(doc->traces, (doc->ntraces + 1) * sizeof *tv);
    if (!tv)
        return GMP_ERR_NOMEM;
    doc->traces = tv;
    gmp_report_trace *t = calloc(1, sizeof *t);
    live *L = calloc(1, sizeof *L);
    if (!t || !L) {
        free(t);
        free(L);
        return GMP_ERR_NOMEM;
    }
    t->live = L;
    L->doc = doc;
    L->t = t;
    L->rp = rp;
    snprintf(L->path, sizeof L->path, "%s", path ? path : "");
    snprintf(L->label, sizeof L->label, "%s", label ? label : "");
    L->steps_on = label && *label; /* one of several traces */
    L->kheap = doc->opts.max_largest;
    L->heap = calloc(L->kheap, sizeof *L->heap);
    gmp_err e = L->heap ? gmp_replay_add(rp, &report_ops, t) : GMP_ERR_NOMEM;
    if (e == GMP_OK && (e = gmp_analysis_new(&L->ana, &doc->opts.analysis)) == GMP_OK)
        e = gmp_analysis_attach(L->ana, rp);
    if (e != GMP_OK) {
        trace_free(t);
        return e;
    }
    doc->traces[doc->ntraces++] = t;
    return GMP_OK;
}

/* ---- views ---- */

/* bit i of a --by mask is by_names[i] (GMP_REPORT_BY_*) */
static const char *const by_names[] = {"range", "stack", "kind", "api", "frame", "category"};

unsigned gmp_report_parse_by(const char *s)
{
    unsigned m = 0;
    while (s && *s) {
        const char *c = strchr(s, ',');
        size_t n = c ? (size_t)(c - s) : strlen(s);
        unsigned bit = 0;
        for (unsigned i = 0; i < sizeof by_names / sizeof by_names[0]; i++)
            if (n && strlen(by_names[i]) == n && memcmp(by_names[i], s, n) == 0)
                bit = 1u << i;
        if (!bit)
            return 0;
        m |= bit;
        s += n;
        if (*s == ',')
            s++;
    }
    return m;
}

static const char *const sort_names[] = {"path", "time", "count", "alloc", "freed",
                                         "net",  "left", "peak",  "frag"};

int gmp_report_parse_sort(const char *s, gmp_report_sort *out)
{
    for (int i = 0; i < (int)(sizeof sort_names / sizeof *sort_names); i++) {
        if (s && strcmp(s, sort_names[i]) == 0) {
            *out = (gmp_report_sort)i;
            return 1;
        }
    }
    return 0;
}

const char *gmp_report_sort_name(gmp_report_sort s)
{
    return (unsigned)s < sizeof sort_names / sizeof *sort_names ? sort_names[s] : "path";
}

int gmp_report_wanted(const gmp_report_view *v, int32_t device)
{
    return v->device == INT64_MIN || v->device == device;
}

int gmp_report_kind_holds_memory(uint32_t kind)
{
    return kind != GMP_MEM_VMM_MAPPING && kind != GMP_MEM_NVTX_REGION && kind != GMP_MEM_VA_RESERVE;
}

/* string order for ties: by content, so that outputs do not depend on interning order. The
 * comparator's trace is per thread: traces are reported by several threads at once
 * (cli/cli_report_ranks.c). */
static _Thread_local const gmp_report_trace *cmp_trace;

static int strcmp_idx(uint32_t a, uint32_t b)
{
    if (a == b)
        return 0;
    gmp_str x = gmp_report_str(cmp_trace, a), y = gmp_report_str(cmp_trace, b);
    size_t n = x.len < y.len ? x.len : y.len;
    int c = n ? memcmp(x.ptr, y.ptr, n) : 0;
    if (c)
        return c;
    return x.len < y.len ? -1 : x.len > y.len ? 1 : 0;
}

static int row_key(const void *a, const void *b)
{
    const gmp_report_row *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    int c = strcmp_idx(x->range, y->range);
    if (c)
        return c;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    return strcmp_idx(x->api, y->api);
}

static int row_value(const void *a, const void *b)
{
    const gmp_report_row *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return row_key(a, b);
}

/* The frequent sites are one table over every device, cut by --top as a whole: most allocations
 * first whatever the device (device first would lead with the host's one pinned buffer and could
 * cut a later device out). */
static int row_sites(const void *a, const void *b)
{
    const gmp_report_row *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return row_key(a, b);
}

gmp_report_row *gmp_report_group(const gmp_report_trace *t, const gmp_report_view *v,
                                 gmp_report_what what, unsigned by, size_t *n)
{
    gmp_report_row *a = calloc(t->nsites ? t->nsites : 1, sizeof *a);
    if (!a)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < t->nsites; i++) {
        const gmp_report_row *s = &t->sites[i];
        if (!gmp_report_wanted(v, s->device))
            continue;
        gmp_report_row g = *s;
        if (what == GMP_REPORT_PEAK) {
            if (!s->peak_count || !gmp_mem_kind_is_device(s->kind))
                continue;
            g.bytes = s->peak_bytes;
            g.count = s->peak_count;
        } else if (what == GMP_REPORT_LEAKS) {
            /* static __device__ variables live as long as their module: not leaks (as in the
             * devices' leaked_bytes) */
            if (!s->live_count || !gmp_report_kind_holds_memory(s->kind) ||
                s->kind == GMP_MEM_STATIC)
                continue;
            g.bytes = s->live_bytes;
            g.count = s->live_count;
        } else {
            if (!s->allocs || !gmp_report_kind_holds_memory(s->kind))
                continue;
            g.bytes = s->alloc_bytes;
            g.count = s->allocs;
        }
        if (!(by & GMP_REPORT_BY_KIND))
            g.kind = GMP_REPORT_ALL;
        if (!(by & GMP_REPORT_BY_API))
            g.api = GMP_REPORT_ALL;
        if (by & GMP_REPORT_BY_FRAME)
            g.range = s->stack < t->nstacks ? t->stacks[s->stack].user_name : 0;
        else if (!(by & GMP_REPORT_BY_RANGE))
            g.range = GMP_REPORT_ALL;
        if (!(by & GMP_REPORT_BY_STACK))
            g.stack = GMP_REPORT_ALL;
        a[k++] = g;
    }
    cmp_trace = t;
    qsort(a, k, sizeof *a, row_key);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && row_key(&a[m - 1], &a[i]) == 0) {
            gmp_report_row *o = &a[m - 1];
            o->bytes += a[i].bytes;
            o->count += a[i].count;
            o->allocs += a[i].allocs;
            o->alloc_bytes += a[i].alloc_bytes;
            o->frees += a[i].frees;
            o->live_bytes += a[i].live_bytes;
            o->live_count += a[i].live_count;
            o->peak_bytes += a[i].peak_bytes;
            o->peak_count += a[i].peak_count;
            if (a[i].max_alloc_bytes > o->max_alloc_bytes)
                o->max_alloc_bytes = a[i].max_alloc_bytes;
        } else {
            a[m++] = a[i];
        }
    }
    qsort(a, m, sizeof *a, what == GMP_REPORT_SITES ? row_sites : row_value);
    cmp_trace = NULL;
    *n = m;
    return a;
}

static _Thread_local gmp_report_sort cmp_sort; /* per thread, as cmp_trace */

static int range_cmp(const void *a, const void *b)
{
    const gmp_report_range *x = a, *y = b;
    double vx = 0, vy = 0;
    switch (cmp_sort) {
    case GMP_REPORT_SORT_PATH: break;
    case GMP_REPORT_SORT_TIME: vx = (double)x->total_ns, vy = (double)y->total_ns; break;
    case GMP_REPORT_SORT_COUNT: vx = (double)x->entered, vy = (double)y->entered; break;
    case GMP_REPORT_SORT_ALLOC: vx = (double)x->alloc_bytes, vy = (double)y->alloc_bytes; break;
    case GMP_REPORT_SORT_FREED: vx = (double)x->free_bytes, vy = (double)y->free_bytes; break;
    case GMP_REPORT_SORT_NET: vx = (double)x->net_bytes, vy = (double)y->net_bytes; break;
    case GMP_REPORT_SORT_LEFT: vx = (double)x->left_bytes, vy = (double)y->left_bytes; break;
    case GMP_REPORT_SORT_PEAK: vx = (double)x->peak_bytes, vy = (double)y->peak_bytes; break;
    case GMP_REPORT_SORT_FRAG: vx = x->frag_mean_bytes, vy = y->frag_mean_bytes; break;
    }
    if (vx != vy)
        return vx > vy ? -1 : 1;
    int c = strcmp_idx(x->path, y->path);
    if (c)
        return c;
    return y->thread_bound - x->thread_bound;
}

gmp_report_range *gmp_report_sorted_ranges(const gmp_report_trace *t, const gmp_report_view *v,
                                           size_t *n)
{
    gmp_report_range *a = calloc(t->nranges ? t->nranges : 1, sizeof *a);
    if (!a)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < t->nranges; i++)
        if (v->device == INT64_MIN || t->ranges[i].device == v->device)
            a[k++] = t->ranges[i];
    cmp_trace = t;
    cmp_sort = v->sort;
    qsort(a, k, sizeof *a, range_cmp);
    cmp_trace = NULL;
    *n = k;
    return a;
}

/* ---- formatting ---- */

size_t gmp_report_frame_text(const gmp_report_trace *t, const gmp_report_frame *f, char *buf,
                             size_t n)
{
    gmp_str fn = gmp_report_str(t, f->function), disp = gmp_report_str(t, f->display);
    gmp_frame_info fi = {fn, gmp_report_str(t, f->file), gmp_report_str(t, f->module)};
    if (!n)
        return 0;
    if (disp.len && !(fn.len && disp.len >= fn.len && memcmp(disp.ptr, fn.ptr, fn.len) == 0)) {
        int k = snprintf(buf, n, "%.*s", (int)disp.len, disp.ptr); /* the symbolizer's name */
        return k < 0 ? 0 : (size_t)k < n ? (size_t)k : n - 1;
    }
    if (disp.len) { /* the symbolizer's "function (file:line)": its function shortened */
        size_t k = gmp_frame_short_name(fn, buf, n);
        int r = snprintf(buf + k, n - k, "%.*s", (int)(disp.len - fn.len), disp.ptr + fn.len);
        return r < 0 ? k : k + (size_t)r < n ? k + (size_t)r : n - 1;
    }
    if (f->kind != GMP_FRAME_PYTHON && !fn.len && !f->module && !f->outside) {
        int k = snprintf(buf, n, "0x%" PRIx64, f->address); /* not symbolized, no module */
        return k < 0 ? 0 : (size_t)k < n ? (size_t)k : n - 1;
    }
    return gmp_frame_text(&fi, f->kind == GMP_FRAME_PYTHON, f->line, f->offset, buf, n);
}

const char *gmp_report_format_for_path(const char *path)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot || strchr(dot, '/'))
        return NULL;
    if (strcasecmp(dot, ".txt") == 0 || strcasecmp(dot, ".text") == 0)
        return "text";
    if (strcasecmp(dot, ".md") == 0 || strcasecmp(dot, ".markdown") == 0)
        return "markdown";
    if (strcasecmp(dot, ".html") == 0 || strcasecmp(dot, ".htm") == 0)
        return "html";
    if (strcasecmp(dot, ".json") == 0)
        return "json";
    return NULL;
}
