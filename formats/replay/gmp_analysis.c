/* gmp_analysis: growth, temporary allocations, allocator overhead and OOM verdicts computed in the
 * one replay pass (see gmp_analysis.h and docs/report.md). */
#include "gmp_map.h"
#include "gmp_analysis.h"

#include <stdlib.h>
#include <string.h>

#include "gmp_reader.h"
#include "gmp_trace.h"

#define MAX_DEVICES 64 /* device ids -1 .. 62 get overhead numbers */
#define MAX_OOMS 64
#define NO_SLOT (-1)

/* ---- small containers ---- */

static int agrow(void **p, size_t *cap, size_t n, size_t sz)
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

/* A range path (key: id, + 2^32 for start/end ranges, + 2^33 for MARK names), all devices
 * together. */
typedef struct rinfo {
    uint64_t key;
    uint32_t depth;
    uint64_t exits;
    int slot;           /* tracking slot, NO_SLOT none */
    uint64_t base_exit; /* exit number (1-based) at which its slot began */
} rinfo;

/* Exits of a range path on one device. */
typedef struct gstat {
    uint64_t key;
    int32_t device;
    uint64_t n;
    long double sx, sy, sxx, sxy; /* x: exit index from 0; y: allocated - y0 */
    uint64_t y0, ylast, ymin, ymax;
    uint64_t rises, falls;
    uint64_t stride;
    size_t nseries;
    uint64_t series[GMP_ANALYSIS_SERIES];
} gstat;

/* Allocations of a range path on one device. */
typedef struct tstat {
    uint32_t range;
    int32_t device;
    uint64_t allocs, bytes, temp_count, temp_bytes, temp_life;
} tstat;

/* The growth window starts at slot exit 2^(r - LEVELS + 1) (r = floor(log2 of the slot's
 * exits); 1 when that is below 1): the warm-up left out is at most a quarter of the iterations,
 * and at least an eighth (docs/report.md, "Growth over iterations"). */
#define LEVELS 3

/* What a site knows of one tracked range (a slot), in that range's exits counted from the slot's
 * start (1 = its first exit): the windows start at exits 2^(r-2), 2^(r-1) and 2^r (each at least
 * 1), a site's values there, its value at the last exit it was seen at, and the rises and falls
 * between seen exits inside each window. The first (level 0) is the growth window; the others
 * become it as the slot's exits double. */
typedef struct strack {
    uint32_t gen;        /* the slot's generation this belongs to */
    uint32_t r;          /* the slot's window index it has caught up with */
    uint64_t v[LEVELS];  /* values at the windows' starts */
    uint64_t ev;         /* value at exit ei */
    uint64_t ei;         /* the last exit caught up with */
    uint32_t ri[LEVELS]; /* rises since each window's start */
    uint32_t fa[LEVELS]; /* falls since each window's start */
} strack;

/* The exit at which window level j starts when the slot is at window index r. */
static inline uint64_t level_start(uint32_t r, unsigned j)
{
    unsigned back = LEVELS - 1 - j;
    return r >= back ? 1ull << (r - back) : 1;
}

/* An allocation site (index as the replay's). */
typedef struct sstat {
    uint64_t live;  /* live bytes of device kinds */
    uint64_t epoch; /* the slots' epoch when tr last caught up with them (site_change) */
    uint64_t allocs, temp_count, temp_bytes, temp_life;
    strack tr[GMP_ANALYSIS_SLOTS];
} sstat;

typedef struct slot {
    int used;
    size_t range; /* index in rinfo */
    uint32_t gen; /* unique over the pass */
    uint64_t exits;
    uint32_t r; /* floor(log2(exits)): the window index */
} slot;

/* A reserved segment (a POOL record's pool), for the free blocks inside it at an OOM. */
typedef struct pool { /* 24 bytes: a snapshot has a pool per segment (100,000 and more) */
    uint64_t handle;
    uint64_t size;
    int32_t device;
    int alive;
} pool;

typedef struct devstate {
    int used, has_peak, has_res;
    uint64_t max_res;
    gmp_analysis_point peak, res;
} devstate;

struct gmp_analysis {
    gmp_analysis_opts opts;
    gmp_replay *rp;
    gmp_omap rmap; /* range key -> rinfo index */
    rinfo *r;
    size_t nr, capr;
    gmp_omap gmap; /* (range key, device) -> gstat index */
    gstat *g;
    size_t ng, capg;
    gmp_omap tmap; /* (range id, device) -> tstat index */
    tstat *t;
    size_t nt, capt;
    sstat *s;
    size_t ns, caps;
    gmp_omap thread_dev; /* tid -> device + 2 */
    gmp_omap range_exit; /* range path | tid << 32 -> time of its last POP on that thread + 1 */
    uint32_t td_tid;     /* the (tid, value) written last to thread_dev (td_val 0: none) */
    uint64_t td_val;
    uint64_t t_key; /* tstat_get's last key and its index + 1 (0: none) */
    size_t t_ix;
    int32_t first_dev;
    int has_dev;
    slot slots[GMP_ANALYSIS_SLOTS];
    uint64_t slot_epoch; /* changes whenever a slot does (slot_exit): from 1 */
    uint32_t gen;
    devstate dev[MAX_DEVICES];
    gmp_analysis_oom ooms[MAX_OOMS];
    size_t nooms;
    int blocks_known; /* the trace is a PyTorch snapshot: pools are segments at their address */
    pool *pools;      /* by the replay's pool number (gmp_replay_pool_number) */
    size_t npools, cappools;
    int nomem;
    const gmp_analysis_resolver *res; /* during gmp_analysis_finish */
};

typedef struct gmp_analysis ana;

/* gmp_mem_kind_is_device inline (bit k: kind k), for the callbacks of every event */
#define KINDS_DEVICE                                                                               \
    ((1u << GMP_MEM_DEVICE) | (1u << GMP_MEM_ASYNC_POOL) | (1u << GMP_MEM_VMM_PHYSICAL) |          \
     (1u << GMP_MEM_ARRAY) | (1u << GMP_MEM_STATIC))
static inline int kind_is_device(uint32_t kind)
{
    return kind < 32 && ((KINDS_DEVICE >> kind) & 1u);
}

static inline int temp_kind(uint32_t kind)
{
    return kind < 32 &&
           (((KINDS_DEVICE | 1u << GMP_MEM_PINNED_HOST | 1u << GMP_MEM_MANAGED) >> kind) & 1u);
}

/* The helpers below that run for every event are split: the usual case inline (always_inline:
 * GCC left them out of line, and their calls, prologues and epilogues cost more than their work),
 * the rest in a function of its own. */
#define HOT static inline __attribute__((always_inline))
#define COLD static __attribute__((noinline))

static devstate *dev_of(ana *A, int32_t id)
{
    if (id < -1 || id >= MAX_DEVICES - 1)
        return NULL;
    return &A->dev[id + 1];
}

static void snap(gmp_analysis_point *p, const gmp_replay_device *d, uint64_t t)
{
    p->time_ns = t;
    p->allocated = d->allocated;
    p->reserved = d->reserved;
    p->overhead = d->reserved > d->allocated ? d->reserved - d->allocated : 0;
    p->pool_reserved = d->pool_reserved;
    p->pool_allocated = d->kind[GMP_MEM_ASYNC_POOL].live_bytes;
    p->vmm_physical = d->kind[GMP_MEM_VMM_PHYSICAL].live_bytes;
    p->vmm_mapped = d->kind[GMP_MEM_VMM_MAPPING].live_bytes;
    p->va_reserved = d->kind[GMP_MEM_VA_RESERVE].live_bytes;
}

HOT void dev_seen(ana *A, const gmp_replay_device *d, uint64_t t)
{
    if (!d)
        return;
    devstate *s = dev_of(A, d->id);
    if (!s)
        return;
    s->used = 1;
    if (d->reserved > s->max_res) {
        s->max_res = d->reserved;
        s->has_res = 1;
        snap(&s->res, d, t);
    }
}

COLD sstat *site_add(ana *A, size_t i)
{
    while (A->ns <= i) {
        if (!agrow((void **)&A->s, &A->caps, A->ns, sizeof *A->s))
            return NULL;
        memset(&A->s[A->ns++], 0, sizeof *A->s);
    }
    return &A->s[i];
}

HOT sstat *site_get(ana *A, size_t i)
{
    return i < A->ns ? &A->s[i] : site_add(A, i);
}

/* A site's value v has held since its last change, through the slot's latest exit: brings what
 * it knows of the slot up to that exit (docs/report.md, "Growth over iterations"). */
static void track_catch_up(strack *x, const slot *sl, uint64_t v)
{
    if (x->gen != sl->gen) { /* unchanged since the slot began */
        memset(x, 0, sizeof *x);
        x->gen = sl->gen;
        x->r = sl->r;
        for (unsigned j = 0; j < LEVELS; j++)
            x->v[j] = v;
        x->ev = v;
        x->ei = sl->exits;
        return;
    }
    if (x->ei == sl->exits)
        return;
    /* one change between exit ei and ei + 1: from ev to v */
    for (unsigned j = 0; j < LEVELS; j++) {
        int in = x->ei >= level_start(x->r, j);
        if (v > x->ev)
            x->ri[j] += in;
        else if (v < x->ev)
            x->fa[j] += in;
    }
    /* windows that started since (at exits after ei: the value there was v); a level clamped
     * to exit 1 moves on to the same start (level_start), so the shift holds for small r too */
    uint32_t d = sl->r - x->r;
    if (d >= LEVELS) {
        for (unsigned j = 0; j < LEVELS; j++) {
            x->v[j] = v;
            x->ri[j] = x->fa[j] = 0;
        }
    } else if (d) {
        for (unsigned j = 0; j < LEVELS; j++) {
            if (j + d < LEVELS) {
                x->v[j] = x->v[j + d];
                x->ri[j] = x->ri[j + d];
                x->fa[j] = x->fa[j + d];
            } else {
                x->v[j] = v;
                x->ri[j] = x->fa[j] = 0;
            }
        }
    }
    x->r = sl->r;
    x->ev = v;
    x->ei = sl->exits;
}

/* A site's live bytes are about to change: the tracked ranges save its value first. Once a site
 * has caught up with every slot, doing it again before a slot changes does nothing (each
 * track_catch_up returns at once: same generation, same exit), so it is skipped until then. */
HOT void site_change(ana *A, sstat *s, int64_t delta)
{
    if (s->epoch != A->slot_epoch) {
        for (int k = 0; k < GMP_ANALYSIS_SLOTS; k++) {
            const slot *sl = &A->slots[k];
            if (sl->used)
                track_catch_up(&s->tr[k], sl, s->live);
        }
        s->epoch = A->slot_epoch;
    }
    if (delta < 0 && (uint64_t)-delta > s->live)
        s->live = 0;
    else
        s->live = (uint64_t)((int64_t)s->live + delta);
}

COLD tstat *tstat_find(ana *A, uint64_t key, uint32_t range, int32_t device)
{
    int fresh;
    uint64_t *v = gmp_omap_put(&A->tmap, key, &fresh);
    if (!v)
        return NULL;
    if (fresh) {
        if (!agrow((void **)&A->t, &A->capt, A->nt, sizeof *A->t))
            return NULL;
        tstat *x = &A->t[A->nt];
        memset(x, 0, sizeof *x);
        x->range = range;
        x->device = device;
        *v = A->nt++;
    }
    A->t_key = key;
    A->t_ix = (size_t)*v + 1;
    return &A->t[*v];
}

HOT tstat *tstat_get(ana *A, uint32_t range, int32_t device)
{
    uint64_t key = (uint64_t)range | ((uint64_t)(uint32_t)(device + 1) << 32);
    if (A->t_ix && A->t_key == key) /* consecutive allocations mostly share one */
        return &A->t[A->t_ix - 1];
    return tstat_find(A, key, range, device);
}

static uint32_t range_depth(ana *A, uint32_t id)
{
    gmp_reader *r = gmp_replay_reader(A->rp);
    uint32_t d = 0;
    while (id && d < 4096) {
        const gmp_rec_range *x = gmp_reader_range(r, id);
        d++;
        if (!x)
            break;
        id = x->parent;
    }
    return d;
}

static rinfo *rinfo_get(ana *A, uint64_t key)
{
    int fresh;
    uint64_t *v = gmp_omap_put(&A->rmap, key, &fresh);
    if (!v)
        return NULL;
    if (fresh) {
        if (!agrow((void **)&A->r, &A->capr, A->nr, sizeof *A->r))
            return NULL;
        rinfo *x = &A->r[A->nr];
        memset(x, 0, sizeof *x);
        x->key = key;
        x->depth = key >> 33 ? 0 : range_depth(A, (uint32_t)key); /* a MARK: outermost */
        x->slot = NO_SLOT;
        *v = A->nr++;
    }
    return &A->r[*v];
}

static gstat *gstat_get(ana *A, uint64_t key, int32_t device)
{
    uint64_t k = key | ((uint64_t)(uint32_t)(device + 1) << 34);
    int fresh;
    uint64_t *v = gmp_omap_put(&A->gmap, k, &fresh);
    if (!v)
        return NULL;
    if (fresh) {
        if (!agrow((void **)&A->g, &A->capg, A->ng, sizeof *A->g))
            return NULL;
        gstat *x = &A->g[A->ng];
        memset(x, 0, sizeof *x);
        x->key = key;
        x->device = device;
        x->stride = 1;
        *v = A->ng++;
    }
    return &A->g[*v];
}

static void gstat_add(gstat *g, uint64_t y)
{
    uint64_t i = g->n;
    if (i == 0) {
        g->y0 = g->ymin = g->ymax = y;
    } else {
        if (y > g->ylast)
            g->rises++;
        else if (y < g->ylast)
            g->falls++;
        if (y < g->ymin)
            g->ymin = y;
        if (y > g->ymax)
            g->ymax = y;
    }
    g->ylast = y;
    long double x = (long double)i;
    long double dy = (long double)y - (long double)g->y0;
    g->sx += x;
    g->sy += dy;
    g->sxx += x * x;
    g->sxy += x * dy;
    g->n++;
    if (i % g->stride == 0) {
        if (g->nseries == GMP_ANALYSIS_SERIES) {
            for (size_t k = 0; k < GMP_ANALYSIS_SERIES / 2; k++)
                g->series[k] = g->series[2 * k];
            g->nseries = GMP_ANALYSIS_SERIES / 2;
            g->stride *= 2;
        }
        if (i % g->stride == 0)
            g->series[g->nseries++] = y;
    }
}

/* Priority of a range for a tracking slot: lower is better (repeating, then outermost). */
static uint64_t slot_prio(const rinfo *r)
{
    return ((uint64_t)(r->exits < 2) << 32) | r->depth;
}

static void slot_exit(ana *A, size_t ri)
{
    rinfo *r = &A->r[ri];
    A->slot_epoch++; /* a slot changes below, or none does: either way, sites catch up */
    if (r->slot != NO_SLOT) {
        slot *s = &A->slots[r->slot];
        s->exits++;
        if ((s->exits & (s->exits - 1)) == 0) /* a power of two: the windows move on */
            s->r++;
        return;
    }
    int k = NO_SLOT;
    for (int i = 0; i < GMP_ANALYSIS_SLOTS; i++)
        if (!A->slots[i].used) {
            k = i;
            break;
        }
    if (k == NO_SLOT && r->exits >= 2) {
        uint64_t worst = slot_prio(r);
        for (int i = 0; i < GMP_ANALYSIS_SLOTS; i++) {
            uint64_t p = slot_prio(&A->r[A->slots[i].range]);
            if (p > worst) {
                worst = p;
                k = i;
            }
        }
        if (k != NO_SLOT)
            A->r[A->slots[k].range].slot = NO_SLOT;
    }
    if (k == NO_SLOT)
        return;
    slot *s = &A->slots[k];
    s->used = 1;
    s->range = ri;
    s->gen = ++A->gen;
    s->exits = 1;
    s->r = 0;
    r->slot = k;
    r->base_exit = r->exits;
}

/* ---- callbacks ---- */

static gmp_err nomem(ana *A)
{
    A->nomem = 1;
    return gmp_replay_fail(A->rp, GMP_ERR_NOMEM, "analysis: out of memory");
}

static gmp_err on_range(void *ctx, gmp_replay *rp, const gmp_replay_range *ev)
{
    ana *A = ctx;
    if (ev->op == GMP_REPLAY_POP && ev->range) { /* for outlived_range */
        int fresh;
        uint64_t *v = gmp_omap_put(&A->range_exit, ev->range | (uint64_t)ev->tid << 32, &fresh);
        if (!v)
            return nomem(A);
        *v = ev->end_ns + 1;
    }
    if (ev->op != GMP_REPLAY_POP && ev->op != GMP_REPLAY_END && ev->op != GMP_REPLAY_MARK)
        return GMP_OK;
    if (ev->op == GMP_REPLAY_MARK && !ev->range)
        return GMP_OK;
    uint64_t key = (uint64_t)ev->range | (ev->op == GMP_REPLAY_END    ? 1ull << 32
                                          : ev->op == GMP_REPLAY_MARK ? 1ull << 33
                                                                      : 0);
    rinfo *r = rinfo_get(A, key);
    if (!r)
        return nomem(A);
    r->exits++;
    slot_exit(A, (size_t)(r - A->r));
    /* the device: that of the thread's last allocation, else the first one that had memory */
    int32_t dev = A->first_dev;
    int fresh;
    uint64_t *v = gmp_omap_put(&A->thread_dev, ev->tid, &fresh);
    if (!v)
        return nomem(A);
    if (*v)
        dev = (int32_t)((int64_t)*v - 2);
    else if (!A->has_dev)
        return GMP_OK;
    const gmp_replay_device *d = gmp_replay_device_find(rp, dev);
    gstat *g = gstat_get(A, key, dev);
    if (!g)
        return nomem(A);
    gstat_add(g, d ? d->allocated : 0);
    return GMP_OK;
}

static gmp_err on_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    ana *A = ctx;
    uint64_t t = ev->rec->time_ns;
    dev_seen(A, ev->dev, t);
    const gmp_replay_alloc *a = ev->alloc;
    if ((ev->status != GMP_REPLAY_OK && ev->status != GMP_REPLAY_REPLACED) || !a)
        return GMP_OK;
    if (kind_is_device(a->kind)) {
        if (!A->has_dev) {
            A->has_dev = 1;
            A->first_dev = a->device;
        }
        uint64_t val = (uint64_t)((int64_t)a->device + 2);
        if (A->td_val != val || A->td_tid != ev->rec->tid) { /* else written already */
            int fresh;
            uint64_t *v = gmp_omap_put(&A->thread_dev, ev->rec->tid, &fresh);
            if (!v)
                return nomem(A);
            *v = val;
            A->td_tid = ev->rec->tid;
            A->td_val = val;
        }
    }
    if (!temp_kind(a->kind))
        return GMP_OK;
    sstat *s = site_get(A, a->site);
    tstat *x = tstat_get(A, a->range, a->device);
    if (!s || !x)
        return nomem(A);
    s->allocs++;
    x->allocs++;
    x->bytes += a->size;
    if (ev->counted && kind_is_device(a->kind))
        site_change(A, s, (int64_t)a->size);
    return GMP_OK;
}

/* The range an allocation was made in (the push/pop range open on its thread) was closed after
 * it was made: the allocation outlived it. Such memory is kept past the work that made it (an
 * optimizer's state, activations kept for the backward pass), not a temporary, however fast the
 * run (docs/report.md, "Temporary allocations"). */
static int outlived_range(const ana *A, const gmp_replay_alloc *a)
{
    if (!a->range)
        return 0;
    const uint64_t *v = gmp_omap_get(&A->range_exit, a->range | (uint64_t)a->tid << 32);
    return v && *v - 1 >= a->time_ns;
}

static gmp_err on_free(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    ana *A = ctx;
    uint64_t t = ev->rec->time_ns;
    dev_seen(A, ev->dev, t);
    if (ev->status != GMP_REPLAY_OK || !ev->alloc)
        return GMP_OK;
    int implicit = (ev->rec->u.mem.flags & GMP_MEMF_IMPLICIT) != 0;
    for (size_t k = 0; k < ev->nalloc; k++) {
        const gmp_replay_alloc *a = &ev->alloc[k];
        if (!temp_kind(a->kind))
            continue;
        sstat *s = site_get(A, a->site);
        if (!s)
            return nomem(A);
        if (ev->counted && kind_is_device(a->kind))
            site_change(A, s, -(int64_t)a->size);
        uint64_t life = t > a->time_ns ? t - a->time_ns : 0;
        if (implicit || life > A->opts.temp_ns || outlived_range(A, a))
            continue;
        tstat *x = tstat_get(A, a->range, a->device);
        if (!x)
            return nomem(A);
        x->temp_count++;
        x->temp_bytes += a->size;
        x->temp_life += life;
        s->temp_count++;
        s->temp_bytes += a->size;
        s->temp_life += life;
    }
    return GMP_OK;
}

static gmp_err on_begin(void *ctx, gmp_replay *rp)
{
    ana *A = ctx;
    const gmp_rec_header *h = gmp_reader_header(gmp_replay_reader(rp));
    static const char tag[] = "import=pytorch-snapshot";
    A->blocks_known = h && h->options.len >= sizeof tag - 1 &&
                      memmem(h->options.ptr, h->options.len, tag, sizeof tag - 1) != NULL;
    return GMP_OK;
}

static gmp_err on_pool(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *dev)
{
    ana *A = ctx;
    dev_seen(A, dev, rec->time_ns);
    if (!A->blocks_known)
        return GMP_OK;
    const gmp_rec_pool *p = &rec->u.pool;
    /* the pool's entry by the replay's number for it (no lookup of our own; a number given back
     * by a destroyed pool comes back fresh for a new one) */
    int fresh;
    size_t n = gmp_replay_pool_number(rp, &fresh);
    while (A->npools <= n) {
        if (!agrow((void **)&A->pools, &A->cappools, A->npools, sizeof *A->pools))
            return nomem(A);
        memset(&A->pools[A->npools++], 0, sizeof *A->pools);
    }
    pool *x = &A->pools[n];
    if (fresh) {
        memset(x, 0, sizeof *x);
        x->handle = p->pool;
        x->device = p->device;
    }
    if (p->op == GMP_POOL_CREATE) {
        x->alive = 1;
        x->size = 0;
        x->device = p->device;
    } else if (p->op == GMP_POOL_RESERVED) {
        x->alive = 1;
        x->size = p->value;
    } else if (p->op == GMP_POOL_DESTROY) {
        x->alive = 0;
        x->size = 0;
    }
    return GMP_OK;
}

static gmp_err on_peak(void *ctx, gmp_replay *rp, const gmp_replay_device *dev, uint64_t time_ns)
{
    ana *A = ctx;
    devstate *s = dev_of(A, dev->id);
    if (s) {
        s->used = 1;
        s->has_peak = 1;
        snap(&s->peak, dev, time_ns);
    }
    return GMP_OK;
}

/* Live pool blocks of one device, gathered at an OOM (gmp_replay_live_foreach). */
typedef struct blockset {
    int32_t device;
    uint64_t *addr, *end;
    size_t n, cap;
    int oom;
} blockset;

static gmp_err collect_block(void *ctx, const gmp_replay_alloc *a)
{
    blockset *b = ctx;
    if (a->device != b->device || a->kind != GMP_MEM_ASYNC_POOL)
        return GMP_OK;
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        uint64_t *na = realloc(b->addr, nc * sizeof *na);
        if (!na) {
            b->oom = 1;
            return GMP_ERR_NOMEM;
        }
        b->addr = na;
        uint64_t *ne = realloc(b->end, nc * sizeof *ne);
        if (!ne) {
            b->oom = 1;
            return GMP_ERR_NOMEM;
        }
        b->end = ne;
        b->cap = nc;
    }
    b->addr[b->n] = a->address;
    b->end[b->n] = a->address + a->size;
    b->n++;
    return GMP_OK;
}

typedef struct span {
    uint64_t a, e;
} span;

static int span_cmp(const void *x, const void *y)
{
    const span *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* The largest free run inside the device's live segments (pools at their address), from the live
 * blocks; sets o->blocks. O(live) per OOM, and OOMs are few (MAX_OOMS analysed). */
static int largest_free(ana *A, gmp_analysis_oom *o)
{
    o->blocks = GMP_ANALYSIS_BLOCKS_UNKNOWN;
    if (!A->blocks_known)
        return 1;
    o->blocks = GMP_ANALYSIS_BLOCKS_KNOWN;
    for (size_t i = 0; i < A->npools; i++) {
        const pool *p = &A->pools[i];
        if (p->alive && p->device == o->device && p->size &&
            (p->handle & 0xf000000000000000ull) == 0xe000000000000000ull)
            o->blocks = GMP_ANALYSIS_BLOCKS_EXPANDABLE; /* gmp_torch_layout.h's expandable pool */
    }
    if (o->blocks != GMP_ANALYSIS_BLOCKS_KNOWN)
        return 1;
    blockset b = {o->device, NULL, NULL, 0, 0, 0};
    gmp_replay_live_foreach(A->rp, collect_block, &b);
    if (b.oom) {
        free(b.addr);
        free(b.end);
        return 0;
    }
    span *s = malloc((b.n ? b.n : 1) * sizeof *s);
    if (!s) {
        free(b.addr);
        free(b.end);
        return 0;
    }
    for (size_t i = 0; i < b.n; i++)
        s[i] = (span){b.addr[i], b.end[i]};
    free(b.addr);
    free(b.end);
    qsort(s, b.n, sizeof *s, span_cmp);
    uint64_t best = 0;
    for (size_t i = 0; i < A->npools; i++) {
        const pool *p = &A->pools[i];
        if (!p->alive || p->device != o->device || !p->size || p->handle + p->size < p->handle)
            continue;
        uint64_t lo = p->handle, hi = p->handle + p->size, at = lo;
        /* the first block that ends after lo (binary search on starts, then walk) */
        size_t k0 = 0, k1 = b.n;
        while (k0 < k1) {
            size_t m = (k0 + k1) / 2;
            if (s[m].a < lo)
                k0 = m + 1;
            else
                k1 = m;
        }
        for (size_t k = k0; k < b.n && s[k].a < hi; k++) {
            if (s[k].a > at && s[k].a - at > best)
                best = s[k].a - at;
            if (s[k].e > at)
                at = s[k].e;
        }
        if (hi > at && hi - at > best)
            best = hi - at;
    }
    free(s);
    o->largest_free = best;
    return 1;
}

static gmp_err on_oom(void *ctx, gmp_replay *rp, const gmp_replay_oom *ev)
{
    ana *A = ctx;
    if (A->nooms >= MAX_OOMS)
        return GMP_OK;
    gmp_analysis_oom *o = &A->ooms[A->nooms++];
    memset(o, 0, sizeof *o);
    o->time_ns = ev->time_ns;
    o->device = ev->device;
    o->requested = ev->requested;
    o->allocated = ev->live_bytes;
    o->reserved = ev->reserved_bytes;
    o->free_bytes = ev->free_bytes;
    o->cached = ev->reserved_bytes > ev->live_bytes ? ev->reserved_bytes - ev->live_bytes : 0;
    const gmp_replay_device *d = gmp_replay_device_find(rp, ev->device);
    if (d && d->def)
        o->total_bytes = d->def->total_bytes;
    if (o->total_bytes && o->free_bytes) {
        o->has_outside = 1;
        uint64_t held = o->free_bytes + o->reserved;
        o->outside = o->total_bytes > held ? o->total_bytes - held : 0;
    }
    if (!largest_free(A, o))
        return nomem(A);
    /* what was live: the device's largest sites now (device kinds) */
    size_t ns = gmp_replay_site_count(rp);
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(rp, i);
        if (s->device != o->device || !s->live_bytes || !gmp_mem_kind_is_device(s->kind))
            continue;
        o->live_total += s->live_bytes;
        size_t k = o->nlive;
        if (k == GMP_ANALYSIS_OOM_LIVE) {
            if (s->live_bytes <= o->live[k - 1].bytes)
                continue;
            k--;
        } else {
            o->nlive++;
        }
        while (k > 0 && o->live[k - 1].bytes < s->live_bytes) {
            o->live[k] = o->live[k - 1];
            k--;
        }
        o->live[k].bytes = s->live_bytes;
        o->live[k].count = s->live_count;
        o->live[k].site.api = (uint32_t)i; /* the replay's site index until resolved */
    }
    /* the verdict */
    uint64_t free_known = o->free_bytes;
    if (o->cached >= o->requested || o->cached + free_known >= o->requested)
        o->verdict = GMP_ANALYSIS_OOM_FRAGMENTATION;
    else if (o->has_outside && o->outside && o->cached + free_known + o->outside >= o->requested)
        o->verdict = GMP_ANALYSIS_OOM_OUTSIDE;
    else
        o->verdict = GMP_ANALYSIS_OOM_CAPACITY;
    return GMP_OK;
}

static const gmp_replay_ops analysis_ops = {
    .begin = on_begin,
    .alloc = on_alloc,
    .free = on_free,
    .range = on_range,
    .pool = on_pool,
    .peak = on_peak,
    .oom = on_oom,
};

/* ---- public ---- */

gmp_err gmp_analysis_new(gmp_analysis **out, const gmp_analysis_opts *opts)
{
    ana *A = calloc(1, sizeof *A);
    if (!A)
        return GMP_ERR_NOMEM;
    A->slot_epoch = 1; /* new sites (0) catch up first */
    if (opts)
        A->opts = *opts;
    if (!A->opts.temp_ns)
        A->opts.temp_ns = 1000000;
    if (!A->opts.min_reps)
        A->opts.min_reps = 4;
    if (A->opts.min_reps < GMP_ANALYSIS_MIN_SAMPLES)
        A->opts.min_reps = GMP_ANALYSIS_MIN_SAMPLES;
    if (!(A->opts.rise_frac > 0.0) || A->opts.rise_frac > 1.0)
        A->opts.rise_frac = 0.8;
    if (!A->opts.max_sites)
        A->opts.max_sites = 20;
    if (!A->opts.max_growth)
        A->opts.max_growth = 1000;
    *out = A;
    return GMP_OK;
}

void gmp_analysis_free(gmp_analysis *A)
{
    if (!A)
        return;
    gmp_omap_free(&A->rmap);
    gmp_omap_free(&A->gmap);
    gmp_omap_free(&A->tmap);
    gmp_omap_free(&A->thread_dev);
    gmp_omap_free(&A->range_exit);
    free(A->pools);
    free(A->r);
    free(A->g);
    free(A->t);
    free(A->s);
    free(A);
}

gmp_err gmp_analysis_attach(gmp_analysis *A, gmp_replay *rp)
{
    A->rp = rp;
    return gmp_replay_add(rp, &analysis_ops, A);
}

int gmp_analysis_site_leaks(const gmp_analysis_growth_site *s, uint64_t w,
                            const gmp_analysis_opts *o)
{
    double frac = o && o->rise_frac > 0.0 ? o->rise_frac : 0.8;
    if (!s->growth_bytes || !w)
        return 0;
    if ((double)s->rises < frac * (double)(s->rises + s->falls))
        return 0;
    return 2 * s->rises >= w;
}

void gmp_analysis_result_free(gmp_analysis_result *R)
{
    if (!R)
        return;
    for (size_t i = 0; i < R->nleaks; i++)
        free(R->leaks[i].sites);
    free(R->leaks);
    free(R->growth);
    free(R->temp);
    free(R->temp_sites);
    free(R->temp_devices);
    free(R->overhead);
    free(R->ooms);
    free(R);
}

static uint32_t res_range(const ana *A, uint32_t id)
{
    return A->res && A->res->range ? A->res->range(A->res->ctx, id) : id;
}

static uint32_t res_api(const ana *A, uint32_t id)
{
    return A->res && A->res->api ? A->res->api(A->res->ctx, id) : id;
}

static uint32_t res_stack(const ana *A, uint32_t id)
{
    return A->res && A->res->stack ? A->res->stack(A->res->ctx, id) : id;
}

static gmp_analysis_site site_key(const ana *A, const gmp_replay_site *s)
{
    gmp_analysis_site k = {s->device, s->kind, res_api(A, s->api), res_range(A, s->range),
                           res_stack(A, s->stack)};
    return k;
}

static int growth_cmp(const void *a, const void *b)
{
    const gmp_analysis_growth *x = a, *y = b;
    if (x->leak != y->leak)
        return x->leak ? -1 : 1;
    if (x->rate_bytes != y->rate_bytes)
        return x->rate_bytes > y->rate_bytes ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->range < y->range ? -1 : x->range > y->range;
}

static int gsite_cmp(const void *a, const void *b)
{
    const gmp_analysis_growth_site *x = a, *y = b;
    if (x->growth_bytes != y->growth_bytes)
        return x->growth_bytes > y->growth_bytes ? -1 : 1;
    return x->site.stack < y->site.stack ? -1 : x->site.stack > y->site.stack;
}

static int temp_cmp(const void *a, const void *b)
{
    const gmp_analysis_temp *x = a, *y = b;
    if (x->temp_bytes != y->temp_bytes)
        return x->temp_bytes > y->temp_bytes ? -1 : 1;
    if (x->temp_count != y->temp_count)
        return x->temp_count > y->temp_count ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->range < y->range ? -1 : x->range > y->range;
}

static int tsite_cmp(const void *a, const void *b)
{
    const gmp_analysis_temp_site *x = a, *y = b;
    if (x->temp_count != y->temp_count)
        return x->temp_count > y->temp_count ? -1 : 1;
    if (x->temp_bytes != y->temp_bytes)
        return x->temp_bytes > y->temp_bytes ? -1 : 1;
    return 0;
}

static int leak_cmp(const void *a, const void *b)
{
    const gmp_analysis_leak *x = a, *y = b;
    if (x->rate_bytes != y->rate_bytes)
        return x->rate_bytes > y->rate_bytes ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->range != y->range)
        return x->range < y->range ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The iteration (gmp_analysis_iter) and, over its later iterations, the sites that keep growing,
 * one verdict per owner (device and range, or stack outside any range). Ids are the replay's
 * until the end, where they are resolved. */
static int finish_leaks(ana *A, gmp_analysis_result *R)
{
    const rinfo *it = NULL;
    for (size_t i = 0; i < A->nr; i++) {
        const rinfo *r = &A->r[i];
        if (r->exits < A->opts.min_reps)
            continue;
        if (!it || r->depth < it->depth || (r->depth == it->depth && r->exits > it->exits))
            it = r;
    }
    if (!it)
        return 1;
    R->iter.kind = (it->key >> 33)   ? GMP_ANALYSIS_ITER_MARK
                   : (it->key >> 32) ? GMP_ANALYSIS_ITER_START
                                     : GMP_ANALYSIS_ITER_PUSH;
    R->iter.range = res_range(A, (uint32_t)it->key);
    R->iter.depth = it->depth;
    R->iter.iterations = it->exits;
    if (it->slot == NO_SLOT)
        return 1;
    const slot *sl = &A->slots[it->slot];
    uint64_t prev = level_start(sl->r, 0); /* the window starts at this slot exit */
    R->iter.tracked_from = it->base_exit;
    R->iter.window_from = it->base_exit + prev - 1;
    uint64_t w = sl->exits - prev; /* iterations in the window */
    if (sl->exits < A->opts.min_reps || !w)
        return 1;
    size_t cap = 0;
    for (size_t i = 0; i < A->ns; i++) {
        strack x = A->s[i].tr[it->slot];
        track_catch_up(&x, sl, A->s[i].live); /* as of the last exit */
        gmp_analysis_growth_site gs;
        memset(&gs, 0, sizeof gs);
        gs.first_bytes = x.v[0];
        gs.last_bytes = x.ev;
        gs.growth_bytes = x.ev > x.v[0] ? x.ev - x.v[0] : 0;
        gs.rate_bytes = (double)gs.growth_bytes / (double)w;
        gs.rises = x.ri[0];
        gs.falls = x.fa[0];
        if (!gmp_analysis_site_leaks(&gs, w, &A->opts))
            continue;
        const gmp_replay_site *rs = gmp_replay_site_at(A->rp, i);
        if (!rs)
            continue;
        gs.site.device = rs->device;
        gs.site.api = (uint32_t)i; /* the replay's site index until resolved */
        gmp_analysis_leak *L = NULL;
        for (size_t k = 0; k < R->nleaks && !L; k++)
            if (R->leaks[k].device == rs->device && R->leaks[k].range == rs->range &&
                (rs->range || R->leaks[k].stack == rs->stack))
                L = &R->leaks[k];
        if (!L) {
            if (!agrow((void **)&R->leaks, &cap, R->nleaks, sizeof *R->leaks))
                return 0;
            L = &R->leaks[R->nleaks++];
            memset(L, 0, sizeof *L);
            L->device = rs->device;
            L->range = rs->range;
            L->stack = rs->range ? 0 : rs->stack;
            L->iterations = w;
        }
        L->growth_bytes += gs.growth_bytes;
        gmp_analysis_growth_site *ns = realloc(L->sites, (L->nsites + 1) * sizeof *ns);
        if (!ns)
            return 0;
        L->sites = ns;
        L->sites[L->nsites++] = gs;
    }
    for (size_t k = 0; k < R->nleaks; k++) {
        gmp_analysis_leak *L = &R->leaks[k];
        L->rate_bytes = (double)L->growth_bytes / (double)w;
        qsort(L->sites, L->nsites, sizeof *L->sites, gsite_cmp);
        L->rises = L->sites[0].rises;
        L->falls = L->sites[0].falls;
        if (L->nsites > A->opts.max_sites)
            L->nsites = A->opts.max_sites;
        for (size_t j = 0; j < L->nsites; j++) {
            uint32_t si = L->sites[j].site.api;
            gmp_analysis_growth_site *gs = &L->sites[j];
            gs->site = site_key(A, gmp_replay_site_at(A->rp, si));
        }
    }
    if (R->nleaks)
        qsort(R->leaks, R->nleaks, sizeof *R->leaks, leak_cmp);
    return 1;
}

/* After finish_growth (which matches raw range ids): the leaks' ids resolved. */
static void resolve_leaks(ana *A, gmp_analysis_result *R)
{
    for (size_t k = 0; k < R->nleaks; k++) {
        R->leaks[k].range = res_range(A, R->leaks[k].range);
        if (!R->leaks[k].range)
            R->leaks[k].stack = res_stack(A, R->leaks[k].stack);
    }
}

static int finish_growth(ana *A, gmp_analysis_result *R)
{
    R->growth = calloc(A->ng ? A->ng : 1, sizeof *R->growth);
    if (!R->growth)
        return 0;
    for (size_t i = 0; i < A->ng; i++) {
        const gstat *g = &A->g[i];
        if (g->n < GMP_ANALYSIS_MIN_SAMPLES || (g->key >> 33))
            continue; /* MARKs are iterations, not ranges */
        R->ranges_checked++;
        gmp_analysis_growth *o = &R->growth[R->ngrowth++];
        o->range = (uint32_t)g->key; /* resolved after the sort */
        o->thread_bound = !(g->key >> 32);
        o->device = g->device;
        o->repetitions = g->n;
        o->first_bytes = g->y0;
        o->last_bytes = g->ylast;
        o->min_bytes = g->ymin;
        o->max_bytes = g->ymax;
        long double n = (long double)g->n;
        long double den = n * g->sxx - g->sx * g->sx;
        o->rate_bytes = den > 0 ? (double)((n * g->sxy - g->sx * g->sy) / den) : 0.0;
        o->total_bytes = (int64_t)(g->ylast - g->y0);
        o->rises = g->rises;
        o->falls = g->falls;
        uint64_t mid = (g->n - 1) / 2;
        size_t mi = (size_t)((mid + g->stride / 2) / g->stride);
        if (mi >= g->nseries)
            mi = g->nseries - 1;
        o->mid_bytes = g->series[mi];
        o->nseries = g->nseries;
        o->series_stride = g->stride;
        memcpy(o->series, g->series, g->nseries * sizeof *g->series);
        o->leak = 0;
        for (size_t k = 0; k < R->nleaks; k++) /* the owner of a verdict (ids not yet resolved) */
            o->leak |= R->leaks[k].range && R->leaks[k].range == (uint32_t)g->key &&
                       R->leaks[k].device == g->device && o->thread_bound;
    }
    if (R->ngrowth)
        qsort(R->growth, R->ngrowth, sizeof *R->growth, growth_cmp);
    if (R->ngrowth > A->opts.max_growth)
        R->ngrowth = A->opts.max_growth;
    for (size_t i = 0; i < R->ngrowth; i++)
        R->growth[i].range = res_range(A, R->growth[i].range);
    return 1;
}

static int finish_temp(ana *A, gmp_analysis_result *R)
{
    R->temp = calloc(A->nt ? A->nt : 1, sizeof *R->temp);
    R->temp_sites = calloc(A->ns ? A->ns : 1, sizeof *R->temp_sites);
    R->temp_devices = calloc(A->nt ? A->nt : 1, sizeof *R->temp_devices);
    if (!R->temp || !R->temp_sites || !R->temp_devices)
        return 0;
    for (size_t i = 0; i < A->nt; i++) {
        const tstat *x = &A->t[i];
        R->allocs += x->allocs;
        R->temp_count += x->temp_count;
        R->temp_bytes += x->temp_bytes;
        size_t k = 0;
        while (k < R->ntemp_devices && R->temp_devices[k].device != x->device)
            k++;
        if (k == R->ntemp_devices) {
            /* kept in id order: insert */
            while (k > 0 && R->temp_devices[k - 1].device > x->device) {
                R->temp_devices[k] = R->temp_devices[k - 1];
                k--;
            }
            R->temp_devices[k] = (gmp_analysis_temp_device){x->device, 0, 0, 0};
            R->ntemp_devices++;
        }
        R->temp_devices[k].allocs += x->allocs;
        R->temp_devices[k].temp_count += x->temp_count;
        R->temp_devices[k].temp_bytes += x->temp_bytes;
        if (!x->temp_count)
            continue;
        gmp_analysis_temp *o = &R->temp[R->ntemp++];
        o->range = x->range;
        o->device = x->device;
        o->allocs = x->allocs;
        o->alloc_bytes = x->bytes;
        o->temp_count = x->temp_count;
        o->temp_bytes = x->temp_bytes;
        o->temp_life_ns = x->temp_life;
    }
    if (R->ntemp)
        qsort(R->temp, R->ntemp, sizeof *R->temp, temp_cmp);
    for (size_t i = 0; i < R->ntemp; i++)
        R->temp[i].range = res_range(A, R->temp[i].range);
    for (size_t i = 0; i < A->ns; i++) {
        const sstat *s = &A->s[i];
        if (!s->temp_count)
            continue;
        gmp_analysis_temp_site *o = &R->temp_sites[R->ntemp_sites++];
        o->site.api = (uint32_t)i;
        o->allocs = s->allocs;
        o->temp_count = s->temp_count;
        o->temp_bytes = s->temp_bytes;
        o->temp_life_ns = s->temp_life;
    }
    if (R->ntemp_sites)
        qsort(R->temp_sites, R->ntemp_sites, sizeof *R->temp_sites, tsite_cmp);
    if (R->ntemp_sites > A->opts.max_sites)
        R->ntemp_sites = A->opts.max_sites;
    for (size_t i = 0; i < R->ntemp_sites; i++)
        R->temp_sites[i].site = site_key(A, gmp_replay_site_at(A->rp, R->temp_sites[i].site.api));
    return 1;
}

static int finish_overhead(ana *A, gmp_analysis_result *R)
{
    R->overhead = calloc(MAX_DEVICES, sizeof *R->overhead);
    R->ooms = calloc(A->nooms ? A->nooms : 1, sizeof *R->ooms);
    if (!R->overhead || !R->ooms)
        return 0;
    uint64_t end = gmp_replay_get_summary(A->rp)->last_ns;
    for (int i = 0; i < MAX_DEVICES; i++) {
        const devstate *s = &A->dev[i];
        if (!s->used || (!s->has_peak && !s->has_res))
            continue;
        const gmp_replay_device *d = gmp_replay_device_find(A->rp, i - 1);
        gmp_analysis_overhead *o = &R->overhead[R->noverhead++];
        o->device = i - 1;
        o->at_peak_allocated = s->peak;
        o->at_peak_reserved = s->res;
        if (d)
            snap(&o->at_end, d, end);
    }
    memcpy(R->ooms, A->ooms, A->nooms * sizeof *A->ooms);
    R->nooms = A->nooms;
    for (size_t i = 0; i < R->nooms; i++)
        for (size_t k = 0; k < R->ooms[i].nlive; k++)
            R->ooms[i].live[k].site =
                site_key(A, gmp_replay_site_at(A->rp, R->ooms[i].live[k].site.api));
    return 1;
}

gmp_analysis_result *gmp_analysis_finish(gmp_analysis *A, const gmp_analysis_resolver *res)
{
    if (A->nomem || !A->rp)
        return NULL;
    gmp_analysis_result *R = calloc(1, sizeof *R);
    if (!R)
        return NULL;
    R->opts = A->opts;
    A->res = res;
    int ok =
        finish_leaks(A, R) && finish_growth(A, R) && finish_temp(A, R) && finish_overhead(A, R);
    if (ok)
        resolve_leaks(A, R);
    A->res = NULL;
    if (!ok) {
        gmp_analysis_result_free(R);
        return NULL;
    }
    return R;
}

/* ---- words ---- */

const char *gmp_analysis_oom_verdict_name(gmp_analysis_oom_verdict v)
{
    switch (v) {
    case GMP_ANALYSIS_OOM_FRAGMENTATION: return "fragmentation";
    case GMP_ANALYSIS_OOM_OUTSIDE: return "outside_allocator";
    default: return "capacity";
    }
}

const char *gmp_analysis_oom_verdict_text(gmp_analysis_oom_verdict v)
{
    switch (v) {
    case GMP_ANALYSIS_OOM_FRAGMENTATION:
        return "fragmentation: enough memory was free, not in one block";
    case GMP_ANALYSIS_OOM_OUTSIDE:
        return "memory outside the allocator: without it the request would have fit";
    default: return "capacity: what was live leaves no room for it";
    }
}
