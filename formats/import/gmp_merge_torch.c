/* gmp_merge_torch: a trace and PyTorch's memory history of the same process on one timeline. See
 * gmp_merge_torch.h for the rules and docs/python.md for the user's view.
 *
 * Two passes over the two inputs: (1) the snapshot's segments (POOL reserved records whose handle
 * is an address) and times, then the trace's allocations that are those segments and its times,
 * which decide whether the two are one timeline; (2) both read again in time order and merged into
 * the output, one event at a time (ties: the trace's first), with explicit times (gmp_writer,
 * threaded = 0). Strings, stacks and ranges are defined in the output when an event first needs
 * them (looked up in the reader that gave the event). */
#include "gmp_merge_torch.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_map.h"
#include "gmp_reader.h"
#include "gmp_torch_layout.h"
#include "gmp_trace.h"
#include "gmp_writer.h"

#define TORCH_TID 1 /* the thread the snapshot's blocks are written on (as the importer's) */
#define NOT_ADDRESS 0xd000000000000000ull /* importer's pool handles from here on: no address */
#define EXPANDABLE 0xe000000000000000ull  /* its expandable segments' pools (gmp_torch_layout.h) */
#define SYNC_EVERY 8192
#define MAX_DEPTH 4096         /* stack and range chains followed at most */
#define SLACK_NS 10000000000ll /* snapshot times may lie this far outside the trace's */
#define PREFIX "PyTorch memory history: "

typedef struct seg {
    uint64_t addr, size;
    int32_t dev;
    int matched;
    uint64_t t_alloc; /* trace time of its first allocation in the trace */
} seg;

/* ids of one input mapped to the output's */
typedef struct idmap {
    gmp_omap str, stack, range;
} idmap;

/* A thread of the trace with the ranges open on it (output ids, outermost first), as the replay
 * keeps them (push; a pop closes the innermost range of its path and what is inside it). */
typedef struct tranges {
    uint32_t tid;
    uint32_t n, cap;
    uint32_t *st;     /* output ids */
    uint32_t *in;     /* the same ranges' ids in the trace */
    uint64_t *at;     /* when each was pushed (M->range_tick) */
    uint64_t changed; /* when its stack last changed (M->range_tick) */
} tranges;

typedef struct mrg {
    char *msg;
    size_t msglen;
    gmp_err err;
    gmp_omap segidx; /* snapshot segment address -> index + 1 into segs */
    seg *segs;
    size_t nsegs, capsegs;
    seg **byaddr; /* matched segments by address (for the segment of a block) */
    size_t nbyaddr;
    gmp_omap live;  /* trace: address of a segment turned into a pool -> 1 */
    gmp_omap thidx; /* tid -> index + 1 into ths */
    gmp_wthread **ths;
    size_t nths, capths;
    gmp_writer *w;
    idmap mt, ms; /* the trace's, the snapshot's */
    uint64_t last_t, written;
    /* the snapshot's blocks ready to write, in time order (a block put later than its clocks say,
     * so that it is not before its segment, waits here while the snapshot's next events go on) */
    struct pend {
        gmp_rec r;
        uint64_t t, seq;
    } * pend; /* a binary heap by (t, seq) */
    size_t npend, cappend;
    uint64_t pseq;
    gmp_omap alloc_t; /* block address -> time of its latest ALLOC queued */
    gmp_omap tridx;   /* trace tid -> index + 1 into trs */
    tranges *trs;
    size_t ntrs, captrs;
    uint64_t range_tick;
    gmp_reader *rt; /* the trace (pass 2): its ranges' names */
    struct {        /* the last user_metadata path matched against the trace's open ranges */
        uint32_t sid;
        uint64_t tick;
        size_t th; /* index into trs + 1; 0: no match */
        uint32_t k;
    } mcache;
    uint32_t dom_meta, dom_ann; /* the snapshot's string ids of the importer's domains (0: none) */
    uint32_t dom_other[8];      /* other domains seen (compile_context's) */
    unsigned ndom_other;
    gmp_merge_torch_stats st;
} mrg;

__attribute__((format(printf, 3, 4))) static gmp_err failf(mrg *M, gmp_err e, const char *fmt, ...)
{
    if (M->err != GMP_OK)
        return M->err;
    M->err = e;
    if (M->msg && M->msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(M->msg, M->msglen, fmt, ap);
        va_end(ap);
    }
    return e;
}

static gmp_err open_reader(mrg *M, gmp_reader **r, const char *path, const char *what)
{
    gmp_err e = gmp_reader_open(r, path, NULL);
    if (e != GMP_OK)
        failf(M, e, "%s: %s", what, gmp_reader_open_error());
    return e;
}

/* The next record of r; 0 at the end, -1 on an error (M->err set). */
static int next(mrg *M, gmp_reader *r, const gmp_rec **rec, const char *what)
{
    gmp_err e = gmp_reader_next(r, rec);
    if (e == GMP_OK)
        return 1;
    if (e == GMP_END)
        return 0;
    failf(M, e, "%s: %s", what, gmp_reader_error(r));
    return -1;
}

/* ---- pass 1 ---- */

static int add_seg(mrg *M, uint64_t addr, uint64_t size, int32_t dev)
{
    int fresh;
    uint64_t *v = gmp_omap_put(&M->segidx, addr, &fresh);
    if (!v)
        return failf(M, GMP_ERR_NOMEM, "out of memory"), -1;
    if (!fresh) { /* the address again (freed and made again): the latest size wins */
        M->segs[*v - 1].size = size;
        M->segs[*v - 1].dev = dev;
        return 0;
    }
    if (M->nsegs == M->capsegs) {
        size_t nc = M->capsegs ? M->capsegs * 2 : 64;
        seg *n = realloc(M->segs, nc * sizeof *n);
        if (!n)
            return failf(M, GMP_ERR_NOMEM, "out of memory"), -1;
        M->segs = n;
        M->capsegs = nc;
    }
    M->segs[M->nsegs] = (seg){addr, size, dev, 0, 0};
    *v = ++M->nsegs;
    return 0;
}

static seg *seg_of(mrg *M, uint64_t addr)
{
    uint64_t *v = gmp_omap_get(&M->segidx, addr);
    return v ? &M->segs[*v - 1] : NULL;
}

/* The trace allocation that is a snapshot segment, or NULL. */
static seg *segment_alloc(mrg *M, const gmp_rec_mem *m)
{
    if (m->kind != GMP_MEM_DEVICE || (m->flags & (GMP_MEMF_FAILED | GMP_MEMF_ACTIVITY)) ||
        m->result != 0)
        return NULL;
    seg *s = seg_of(M, m->address);
    return s && s->size == m->size && s->dev == m->device ? s : NULL;
}

static int cmp_seg(const void *a, const void *b)
{
    uint64_t x = (*(seg *const *)a)->addr, y = (*(seg *const *)b)->addr;
    return x < y ? -1 : x > y;
}

/* The matched segment that holds addr, or NULL. */
static const seg *seg_holding(const mrg *M, uint64_t addr)
{
    size_t lo = 0, hi = M->nbyaddr;
    while (lo < hi) { /* the first segment above addr */
        size_t mid = lo + (hi - lo) / 2;
        if (M->byaddr[mid]->addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return NULL;
    const seg *s = M->byaddr[lo - 1];
    return addr - s->addr < s->size ? s : NULL;
}

typedef struct span {
    uint64_t first, last;
    int any;
} span;

static void span_add(span *s, uint64_t t)
{
    if (!s->any || t < s->first)
        s->first = t;
    if (!s->any || t > s->last)
        s->last = t;
    s->any = 1;
}

/* ---- the output ---- */

static uint32_t map_string(mrg *M, idmap *im, gmp_reader *r, uint32_t id)
{
    if (!id)
        return 0;
    uint64_t *v = gmp_omap_get(&im->str, id);
    if (v)
        return (uint32_t)*v;
    gmp_str s = gmp_reader_string(r, id);
    uint32_t n = gmp_writer_string(M->w, s.ptr ? s.ptr : "", s.ptr ? s.len : 0);
    int fresh;
    v = gmp_omap_put(&im->str, id, &fresh);
    if (v)
        *v = n;
    return n;
}

static uint32_t map_stack(mrg *M, idmap *im, gmp_reader *r, uint32_t id)
{
    uint32_t chain[MAX_DEPTH];
    size_t n = 0;
    uint32_t parent = 0;
    while (id && n < MAX_DEPTH) { /* innermost to the first node already defined */
        uint64_t *v = gmp_omap_get(&im->stack, id);
        if (v) {
            parent = (uint32_t)*v;
            break;
        }
        const gmp_rec_stack *s = gmp_reader_stack(r, id);
        if (!s)
            break;
        chain[n++] = id;
        id = s->parent;
    }
    while (n--) { /* outermost first */
        const gmp_rec_stack *s = gmp_reader_stack(r, chain[n]);
        uint32_t nid = s->kind == GMP_FRAME_PYTHON
                           ? gmp_writer_stack_python(M->w, parent, map_string(M, im, r, s->file),
                                                     map_string(M, im, r, s->function), s->line)
                           : gmp_writer_stack_native(M->w, parent, s->address);
        int fresh;
        uint64_t *v = gmp_omap_put(&im->stack, chain[n], &fresh);
        if (v)
            *v = nid;
        parent = nid;
    }
    return parent;
}

static uint32_t map_range(mrg *M, idmap *im, gmp_reader *r, uint32_t id)
{
    uint32_t chain[MAX_DEPTH];
    size_t n = 0;
    uint32_t parent = 0;
    while (id && n < MAX_DEPTH) {
        uint64_t *v = gmp_omap_get(&im->range, id);
        if (v) {
            parent = (uint32_t)*v;
            break;
        }
        const gmp_rec_range *g = gmp_reader_range(r, id);
        if (!g)
            break;
        chain[n++] = id;
        id = g->parent;
    }
    while (n--) {
        const gmp_rec_range *g = gmp_reader_range(r, chain[n]);
        uint32_t nid = gmp_writer_range(M->w, parent, map_string(M, im, r, g->domain),
                                        map_string(M, im, r, g->name));
        int fresh;
        uint64_t *v = gmp_omap_put(&im->range, chain[n], &fresh);
        if (v)
            *v = nid;
        parent = nid;
    }
    return parent;
}

static gmp_wthread *thread_of(mrg *M, uint32_t tid)
{
    uint64_t *v = gmp_omap_get(&M->thidx, tid);
    if (v)
        return M->ths[*v - 1];
    if (M->nths == M->capths) {
        size_t nc = M->capths ? M->capths * 2 : 16;
        gmp_wthread **n = realloc(M->ths, nc * sizeof *n);
        if (!n)
            return NULL;
        M->ths = n;
        M->capths = nc;
    }
    gmp_wthread *t = gmp_writer_thread(M->w, tid);
    int fresh;
    if (!t || !(v = gmp_omap_put(&M->thidx, tid, &fresh)))
        return NULL;
    M->ths[M->nths] = t;
    *v = ++M->nths;
    return t;
}

static void emit(mrg *M, uint32_t tid, gmp_rec *r, uint64_t t)
{
    if (M->err != GMP_OK)
        return;
    if (t < M->last_t)
        t = M->last_t; /* one order: a late event of an input is written at the latest time */
    if (!t)
        t = 1;
    r->time_ns = t;
    gmp_wthread *th = thread_of(M, tid);
    if (!th) {
        failf(M, GMP_ERR_NOMEM, "out of memory");
        return;
    }
    if (gmp_wthread_event(th, r) < 0)
        failf(M, GMP_ERR_IO, "the merged trace could not be written");
    M->last_t = t;
    if (++M->written % SYNC_EVERY == 0)
        gmp_writer_sync(M->w, t);
}

static void emit_pool(mrg *M, uint32_t tid, int32_t dev, uint32_t op, uint64_t pool, uint64_t value,
                      uint64_t t)
{
    gmp_rec r = {.type = GMP_REC_POOL};
    r.u.pool.device = dev;
    r.u.pool.op = op;
    r.u.pool.pool = pool;
    r.u.pool.value = value;
    emit(M, tid, &r, t);
}

static void emit_notice(mrg *M, uint32_t tid, uint32_t severity, const char *text, uint64_t t)
{
    gmp_rec r = {.type = GMP_REC_NOTICE};
    r.u.notice.severity = severity;
    r.u.notice.message.ptr = text;
    r.u.notice.message.len = (uint32_t)strlen(text);
    emit(M, tid, &r, t);
}

/* The trace's ranges as they are merged: a PUSH or POP of thread tid (range: the output id, in:
 * the trace's). */
static void track_range(mrg *M, uint32_t tid, unsigned type, uint32_t range, uint32_t in)
{
    uint64_t *v = gmp_omap_get(&M->tridx, tid);
    if (!v) {
        if (type != GMP_REC_RANGE_PUSH)
            return;
        int fresh;
        if (M->ntrs == M->captrs) {
            size_t nc = M->captrs ? M->captrs * 2 : 16;
            tranges *n = realloc(M->trs, nc * sizeof *n);
            if (!n) {
                failf(M, GMP_ERR_NOMEM, "out of memory");
                return;
            }
            M->trs = n;
            M->captrs = nc;
        }
        if (!(v = gmp_omap_put(&M->tridx, tid, &fresh))) {
            failf(M, GMP_ERR_NOMEM, "out of memory");
            return;
        }
        M->trs[M->ntrs] = (tranges){tid, 0, 0, NULL, NULL, NULL, 0};
        *v = ++M->ntrs;
    }
    tranges *t = &M->trs[*v - 1];
    if (type == GMP_REC_RANGE_PUSH) {
        if (t->n >= MAX_DEPTH)
            return;
        if (t->n == t->cap) {
            uint32_t nc = t->cap ? t->cap * 2 : 16;
            uint32_t *n = realloc(t->st, nc * sizeof *n);
            if (n)
                t->st = n;
            uint32_t *ni = n ? realloc(t->in, nc * sizeof *ni) : NULL;
            if (ni)
                t->in = ni;
            uint64_t *na = ni ? realloc(t->at, nc * sizeof *na) : NULL;
            if (!na) {
                failf(M, GMP_ERR_NOMEM, "out of memory");
                return;
            }
            t->at = na;
            t->cap = nc;
        }
        t->in[t->n] = in;
        t->at[t->n] = M->range_tick + 1;
        t->st[t->n++] = range;
    } else {
        uint32_t k = t->n;
        if (range)
            while (k > 0 && t->st[k - 1] != range)
                k--;
        if (!k)
            return;
        t->n = k - 1;
    }
    t->changed = ++M->range_tick;
}

/* The trace's thread whose ranges changed last among those with one open; NULL: none. */
static const tranges *trace_ranges_now(const mrg *M)
{
    const tranges *best = NULL;
    for (size_t i = 0; i < M->ntrs; i++)
        if (M->trs[i].n && (!best || M->trs[i].changed > best->changed))
            best = &M->trs[i];
    return best;
}

static int str_is(gmp_str s, const char *c)
{
    return s.ptr && s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0;
}

/* 1: the string id of the snapshot is GMP_TORCH_DOMAIN_METADATA, 2: GMP_TORCH_DOMAIN_ANNOTATION,
 * 0: another (each id looked at once, then known by its id). */
static int domain_class(mrg *M, gmp_reader *r, uint32_t id)
{
    if (!id)
        return 0;
    if (id == M->dom_meta)
        return 1;
    if (id == M->dom_ann)
        return 2;
    for (unsigned i = 0; i < M->ndom_other; i++)
        if (M->dom_other[i] == id)
            return 0;
    gmp_str s = gmp_reader_string(r, id);
    if (!M->dom_meta && str_is(s, GMP_TORCH_DOMAIN_METADATA))
        return M->dom_meta = id, 1;
    if (!M->dom_ann && str_is(s, GMP_TORCH_DOMAIN_ANNOTATION))
        return M->dom_ann = id, 2;
    if (M->ndom_other < sizeof M->dom_other / sizeof M->dom_other[0])
        M->dom_other[M->ndom_other++] = id;
    return 0;
}

/* Where a snapshot range (an id of the snapshot) came from, by the domains on its path:
 * GMP_TORCH_DOMAIN_METADATA anywhere: user_metadata (1); GMP_TORCH_DOMAIN_ANNOTATION: a
 * record_function annotation (2); else a compiled region alone (3); 0 for no range. */
static int snap_range_source(mrg *M, gmp_reader *r, uint32_t id)
{
    int src = id ? 3 : 0;
    for (unsigned d = 0; id && d < MAX_DEPTH; d++) {
        const gmp_rec_range *g = gmp_reader_range(r, id);
        if (!g)
            break;
        int c = domain_class(M, r, g->domain);
        if (c == 1)
            return 1;
        if (c == 2)
            src = 2;
        id = g->parent;
    }
    return src;
}

static int same_name(gmp_reader *ra, uint32_t a, gmp_reader *rb, uint32_t b)
{
    gmp_str x = gmp_reader_string(ra, a), y = gmp_reader_string(rb, b);
    return x.len == y.len && (!x.len || (x.ptr && y.ptr && memcmp(x.ptr, y.ptr, x.len) == 0));
}

/* 1 when the path of the trace's range tin ends with the snapshot's range path sid (a
 * user_metadata path: from the root), name for name, the domains aside. */
static int path_ends_with(const mrg *M, gmp_reader *rs, uint32_t tin, uint32_t sid)
{
    for (unsigned d = 0; sid && d < MAX_DEPTH; d++) {
        const gmp_rec_range *gs = gmp_reader_range(rs, sid);
        const gmp_rec_range *gt = tin ? gmp_reader_range(M->rt, tin) : NULL;
        if (!gs || !gt || !same_name(M->rt, gt->name, rs, gs->name))
            return 0;
        sid = gs->parent;
        tin = gt->parent;
    }
    return !sid;
}

/* The trace's open range whose path ends with the snapshot's user_metadata path sid: the hooks
 * set user_metadata to the path of the ranges they opened (agent/python/sitecustomize.py), which
 * the trace may have under the program's own outer ranges (`train/model/...` for `model/...`).
 * On any thread; of several, the one pushed last. 1 with *th (index into trs) and *k (its
 * depth), 0 when none. */
static int trace_range_ending(mrg *M, gmp_reader *rs, uint32_t sid, size_t *th, uint32_t *k)
{
    if (!M->rt || !sid)
        return 0;
    if (M->mcache.sid != sid || M->mcache.tick != M->range_tick) {
        size_t bt = 0;
        uint32_t bk = 0;
        uint64_t best = 0;
        for (size_t i = 0; i < M->ntrs; i++)
            for (uint32_t j = M->trs[i].n; j-- > 0;)
                if (M->trs[i].at[j] > best && path_ends_with(M, rs, M->trs[i].in[j], sid)) {
                    best = M->trs[i].at[j];
                    bt = i + 1;
                    bk = j;
                }
        M->mcache.sid = sid;
        M->mcache.tick = M->range_tick;
        M->mcache.th = bt;
        M->mcache.k = bk;
    }
    if (!M->mcache.th)
        return 0;
    *th = M->mcache.th - 1;
    *k = M->mcache.k;
    return 1;
}

/* The output range of a snapshot block whose range rid (the snapshot's) holds a user_metadata
 * path: that path's range of the trace, open at this time (trace_range_ending), with what the
 * snapshot has inside the path (a compiled region) under it; 0 when the trace has none open. The
 * block is written on that range's thread (*tid). */
static uint32_t metadata_in_trace(mrg *M, gmp_reader *rs, uint32_t rid, uint32_t *tid)
{
    uint32_t inner[8];
    unsigned ni = 0;
    uint32_t sid = rid;
    const gmp_rec_range *g;
    while ((g = sid ? gmp_reader_range(rs, sid) : NULL) != NULL &&
           domain_class(M, rs, g->domain) != 1) { /* to the path's innermost range */
        if (ni == sizeof inner / sizeof inner[0])
            return 0;
        inner[ni++] = sid;
        sid = g->parent;
    }
    if (!g)
        return 0;
    size_t th;
    uint32_t k;
    if (!trace_range_ending(M, rs, sid, &th, &k))
        return 0;
    uint32_t out = M->trs[th].st[k];
    *tid = M->trs[th].tid;
    while (ni--) {
        g = gmp_reader_range(rs, inner[ni]);
        out = gmp_writer_range(M->w, out, map_string(M, &M->ms, rs, g->domain),
                               map_string(M, &M->ms, rs, g->name));
    }
    return out;
}

/* An event of the trace, its ids renumbered; a segment's allocation and free become a pool. */
static void put_trace(mrg *M, gmp_reader *r, const gmp_rec *in)
{
    gmp_rec o = *in;
    idmap *im = &M->mt;
    switch (in->type) {
    case GMP_REC_RANGE_PUSH:
    case GMP_REC_RANGE_POP:
    case GMP_REC_RANGE_START:
    case GMP_REC_RANGE_END:
    case GMP_REC_MARK:
        o.u.rev.range = map_range(M, im, r, in->u.rev.range);
        if (in->type == GMP_REC_RANGE_PUSH || in->type == GMP_REC_RANGE_POP)
            track_range(M, in->tid, in->type, o.u.rev.range, in->u.rev.range);
        break;
    case GMP_REC_ALLOC:
    case GMP_REC_FREE: {
        const gmp_rec_mem *m = &in->u.mem;
        if (in->type == GMP_REC_ALLOC && segment_alloc(M, m)) {
            int fresh;
            uint64_t *v = gmp_omap_put(&M->live, m->address, &fresh);
            if (!v) {
                failf(M, GMP_ERR_NOMEM, "out of memory");
                return;
            }
            *v = 1;
            M->st.pools++;
            emit_pool(M, in->tid, m->device, GMP_POOL_CREATE, m->address, 0, in->time_ns);
            emit_pool(M, in->tid, m->device, GMP_POOL_RESERVED, m->address, m->size, in->time_ns);
            return;
        }
        if (in->type == GMP_REC_FREE && !(m->flags & GMP_MEMF_FAILED) && m->result == 0) {
            uint64_t *v = gmp_omap_get(&M->live, m->address);
            if (v && *v) {
                *v = 0;
                emit_pool(M, in->tid, m->device, GMP_POOL_DESTROY, m->address, 0, in->time_ns);
                return;
            }
        }
        o.u.mem.api = map_string(M, im, r, m->api);
        o.u.mem.stack = map_stack(M, im, r, m->stack);
        o.u.mem.range = map_range(M, im, r, m->range);
        break;
    }
    case GMP_REC_OOM:
        o.u.oom.api = map_string(M, im, r, in->u.oom.api);
        o.u.oom.stack = map_stack(M, im, r, in->u.oom.stack);
        o.u.oom.range = map_range(M, im, r, in->u.oom.range);
        break;
    case GMP_REC_ALERT: o.u.alert.range = map_range(M, im, r, in->u.alert.range); break;
    case GMP_REC_POOL:
    case GMP_REC_SAMPLE:
    case GMP_REC_RESOURCE:
    case GMP_REC_NOTICE:
    case GMP_REC_LOST: break;
    default: return; /* END (the writer writes its own), types this code does not know */
    }
    emit(M, in->tid, &o, in->time_ns);
}

static int pend_less(const struct pend *x, const struct pend *y)
{
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

/* Queues a block of the snapshot for time t, after those queued for the same time; a FREE never
 * before its ALLOC. */
static void pend_push(mrg *M, const gmp_rec *r, uint64_t t)
{
    int fresh;
    uint64_t *at = gmp_omap_put(&M->alloc_t, r->u.mem.address, &fresh);
    if (!at) {
        failf(M, GMP_ERR_NOMEM, "out of memory");
        return;
    }
    if (r->type == GMP_REC_ALLOC)
        *at = t;
    else if (*at > t)
        t = *at;
    if (M->npend == M->cappend) {
        size_t nc = M->cappend ? M->cappend * 2 : 64;
        struct pend *n = realloc(M->pend, nc * sizeof *n);
        if (!n) {
            failf(M, GMP_ERR_NOMEM, "out of memory");
            return;
        }
        M->pend = n;
        M->cappend = nc;
    }
    struct pend x = {*r, t, M->pseq++};
    size_t i = M->npend++;
    while (i > 0 && pend_less(&x, &M->pend[(i - 1) / 2])) {
        M->pend[i] = M->pend[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    M->pend[i] = x;
}

/* Writes the first queued block, on its thread (r.tid). */
static void pend_pop(mrg *M)
{
    struct pend top = M->pend[0], last = M->pend[--M->npend];
    size_t i = 0, n = M->npend;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && pend_less(&M->pend[c + 1], &M->pend[c]))
            c++;
        if (!pend_less(&M->pend[c], &last))
            break;
        M->pend[i] = M->pend[c];
        i = c;
    }
    if (n)
        M->pend[i] = last;
    emit(M, top.r.tid ? top.r.tid : TORCH_TID, &top.r, top.t);
}

/* An event of the snapshot at trace time t: blocks (queued) and notices; its pools and OOMs are
 * not merged (see the header). */
static void put_snap(mrg *M, gmp_reader *r, const gmp_rec *in, uint64_t t)
{
    gmp_rec o = *in;
    idmap *im = &M->ms;
    switch (in->type) {
    case GMP_REC_RANGE_PUSH:
    case GMP_REC_RANGE_POP:
        /* the snapshot's ranges, on its threads (one per device), around its blocks */
        o.u.rev.range = map_range(M, im, r, in->u.rev.range);
        emit(M, in->tid, &o, t);
        return;
    case GMP_REC_ALLOC:
    case GMP_REC_FREE:
        if (in->u.mem.flags & GMP_MEMF_FAILED)
            return; /* the snapshot's OOM (its failed request): not merged, as its OOMs */
        o.u.mem.api = map_string(M, im, r, in->u.mem.api);
        o.u.mem.stack = map_stack(M, im, r, in->u.mem.stack);
        o.u.mem.range = 0;
        o.tid = in->tid;
        if (in->type == GMP_REC_ALLOC) {
            /* its range: the snapshot's (user_metadata, then record_function, then a compiled
             * region), else the trace's open at this time, on the thread it is open on; a
             * user_metadata path is the trace's range whose path ends with it when one is open
             * (metadata_in_trace), else the path alone */
            int src = snap_range_source(M, r, in->u.mem.range);
            const tranges *tr;
            uint32_t mr = src == 1 ? metadata_in_trace(M, r, in->u.mem.range, &o.tid) : 0;
            if (mr) {
                o.u.mem.range = mr;
                M->st.range_metadata++;
                M->st.range_metadata_trace++;
            } else if (src) {
                o.u.mem.range = map_range(M, im, r, in->u.mem.range);
                if (src == 1)
                    M->st.range_metadata++;
                else if (src == 2)
                    M->st.range_annotation++;
                else
                    M->st.range_compile++;
            } else if ((tr = trace_ranges_now(M)) != NULL) {
                o.u.mem.range = tr->st[tr->n - 1];
                o.tid = tr->tid;
                M->st.range_trace++;
            } else {
                M->st.range_none++;
            }
            M->st.blocks++;
            /* a block never before its segment (the two clocks agree to a few microseconds; a
             * block from before the history window is put at the window's start) */
            const seg *sg = seg_holding(M, in->u.mem.address);
            if (sg && t < sg->t_alloc)
                t = sg->t_alloc;
        } else {
            M->st.block_frees++;
        }
        pend_push(M, &o, t);
        return;
    case GMP_REC_NOTICE: {
        char text[1024];
        snprintf(text, sizeof text, PREFIX "%.*s", (int)in->u.notice.message.len,
                 in->u.notice.message.ptr ? in->u.notice.message.ptr : "");
        emit_notice(M, TORCH_TID, in->u.notice.severity, text, t);
        return;
    }
    case GMP_REC_OOM: M->st.ooms_dropped++; return;
    default: return;
    }
}

/* The next event of r (definitions of devices, threads and modules of the trace go to the output
 * as they come; other definitions are looked up when needed); 0 at the end, -1 on an error. */
static int next_event(mrg *M, gmp_reader *r, const gmp_rec **rec, int is_trace, const char *what)
{
    for (;;) {
        int k = next(M, r, rec, what);
        if (k <= 0)
            return k;
        unsigned ty = (*rec)->type;
        if (gmp_rec_is_event(ty))
            return 1;
        if (is_trace && (ty == GMP_REC_DEVICE || ty == GMP_REC_THREAD || ty == GMP_REC_MODULE)) {
            if (ty == GMP_REC_THREAD && (*rec)->u.thread.tid == TORCH_TID)
                continue; /* the name is the history's (below) */
            gmp_writer_define(M->w, *rec);
        }
    }
}

static void free_idmap(idmap *im)
{
    gmp_omap_free(&im->str);
    gmp_omap_free(&im->stack);
    gmp_omap_free(&im->range);
}

/* Pass 1 over the snapshot: its segments (the pools' RESERVED records with an address) and the span
 * of its allocations' times. 0, or -1 with M's error set. */
static int snap_pass1(mrg *M, gmp_reader *rs, span *ss)
{
    const gmp_rec *rec;
    uint64_t expandable = 0;
    int k;
    while ((k = next(M, rs, &rec, "the snapshot")) > 0) {
        if (!gmp_rec_is_event(rec->type))
            continue;
        if (rec->type == GMP_REC_ALLOC || rec->type == GMP_REC_FREE)
            span_add(ss, rec->time_ns);
        if (rec->type == GMP_REC_POOL && rec->u.pool.op == GMP_POOL_RESERVED) {
            if (rec->u.pool.pool >= NOT_ADDRESS) {
                M->st.other_pools++;
                expandable += (rec->u.pool.pool & 0xf000000000000000ull) == EXPANDABLE;
                continue;
            }
            if (!seg_of(M, rec->u.pool.pool))
                M->st.snap_segments++;
            if (add_seg(M, rec->u.pool.pool, rec->u.pool.value, rec->u.pool.device) < 0)
                return -1;
        }
    }
    if (k < 0)
        return -1;
    if (M->nsegs == 0) {
        if (expandable)
            failf(M, GMP_ERR_UNSUPPORTED,
                  "the snapshot's segments are expandable (expandable_segments:True), which "
                  "are not merged yet (the trace has them as cuMemCreate/cuMemMap)");
        else
            failf(M, GMP_ERR_FORMAT, "the snapshot has no segment with an address to match");
        return -1;
    }
    return 0;
}

/* Pass 1 over the trace: which of its allocations are the snapshot's segments (same device,
 * address and size), and the span of its events' times. 0, or -1 with M's error set. */
static int trace_pass1(mrg *M, gmp_reader *rt, span *ts)
{
    const gmp_rec *rec;
    int k;
    while ((k = next(M, rt, &rec, "the trace")) > 0) {
        if (!gmp_rec_is_event(rec->type) || rec->type == GMP_REC_END)
            continue;
        span_add(ts, rec->time_ns);
        seg *s;
        if (rec->type == GMP_REC_ALLOC && (s = segment_alloc(M, &rec->u.mem)) && !s->matched) {
            s->matched = 1;
            s->t_alloc = rec->time_ns;
        }
    }
    if (k < 0)
        return -1;
    for (size_t i = 0; i < M->nsegs; i++)
        M->st.matched_segments += M->segs[i].matched != 0;
    M->st.unmatched_segments = M->nsegs - M->st.matched_segments;
    if (!(M->byaddr = calloc(M->nsegs, sizeof *M->byaddr))) {
        failf(M, GMP_ERR_NOMEM, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < M->nsegs; i++)
        if (M->segs[i].matched)
            M->byaddr[M->nbyaddr++] = &M->segs[i];
    qsort(M->byaddr, M->nbyaddr, sizeof *M->byaddr, cmp_seg);
    if (M->st.matched_segments == 0) {
        failf(M, GMP_ERR_FORMAT,
              "none of the snapshot's %zu segments is an allocation of the trace (same device, "
              "address and size): a snapshot of another process?",
              M->nsegs);
        return -1;
    }
    return 0;
}

/* The offset that puts the snapshot's times on the trace's clock (snapshot time + offset = trace
 * time, through the wall clock of both headers), checked against the two spans of times. 0, or
 * -1 with M's error set. */
static int align_clocks(mrg *M, const gmp_rec_header *sh, const gmp_rec_header *th, const span *ss,
                        const span *ts, int64_t *offset)
{
    __int128 off =
        (__int128)sh->start_wall_ns - sh->start_trace_ns - th->start_wall_ns + th->start_trace_ns;
    if (off > INT64_MAX / 2 || off < -(INT64_MAX / 2)) {
        failf(M, GMP_ERR_FORMAT, "the snapshot's clock is decades away from the trace's");
        return -1;
    }
    *offset = (int64_t)off;
    M->st.offset_ns = *offset;
    if (ss->any && ts->any) {
        __int128 a = (__int128)ss->first + *offset, b = (__int128)ss->last + *offset;
        if (a < (__int128)ts->first - SLACK_NS || b > (__int128)ts->last + SLACK_NS) {
            failf(M, GMP_ERR_FORMAT,
                  "the snapshot's times (%.3f s to %.3f s on the trace's clock) are not within "
                  "the trace's (%.3f s to %.3f s): another run?",
                  (double)a / 1e9, (double)b / 1e9, (double)ts->first / 1e9,
                  (double)ts->last / 1e9);
            return -1;
        }
    }
    return 0;
}

/* Pass 2: the merged trace, written to out_fd (*out_fd is -1 once the writer owns it): the trace's
 * records and the snapshot's blocks in time order, then the notices that say what was not merged.
 * M's error says how it went. */
static void merge_pass2(mrg *M, gmp_reader *rt, gmp_reader *rs, int *out_fd, int64_t offset,
                        uint64_t s_t0, const char *snap_name)
{
    char text[1024];
    {
        gmp_rec_header h = *gmp_reader_header(rt);
        /* the options say it is merged: readers name the figures (allocated: PyTorch's requested
         * bytes, docs/report.md) */
        char opts[1024];
        int on = snprintf(opts, sizeof opts, "%.*s%smerged=pytorch-history", (int)h.options.len,
                          h.options.ptr ? h.options.ptr : "", h.options.len ? " " : "");
        if (on > 0 && (size_t)on < sizeof opts) {
            h.options.ptr = opts;
            h.options.len = (uint32_t)on;
        }
        gmp_writer_opts wo;
        gmp_writer_opts_default(&wo);
        wo.threaded = 0;
        wo.level = 1;
        gmp_err e = gmp_writer_open(&M->w, *out_fd, &wo, &h);
        *out_fd = -1;
        if (e != GMP_OK) {
            failf(M, e, "cannot start the merged trace: %s", gmp_err_str(e));
            return;
        }
    }
    {
        gmp_rec thr = {.type = GMP_REC_THREAD};
        thr.u.thread.tid = TORCH_TID;
        thr.u.thread.name.ptr = "PyTorch memory history";
        thr.u.thread.name.len = (uint32_t)strlen(thr.u.thread.name.ptr);
        gmp_writer_define(M->w, &thr);
    }
    const gmp_rec *et = NULL, *es = NULL;
    int kt = next_event(M, rt, &et, 1, "the trace");
    int ks = next_event(M, rs, &es, 0, "the snapshot");
    int said = 0;
    while (M->err == GMP_OK && kt >= 0 && ks >= 0 && (kt > 0 || ks > 0 || M->npend)) {
        /* the earliest of: the trace's next event, the snapshot's next, the first queued block
         * (ties: the trace first, then queued blocks) */
        uint64_t st_t = 0;
        if (ks > 0) {
            __int128 v = (__int128)es->time_ns + offset;
            st_t = v < 1 ? 1 : (uint64_t)v;
        }
        int which = 0; /* 0: trace, 1: queued block, 2: snapshot */
        uint64_t best = kt > 0 ? et->time_ns : UINT64_MAX;
        if (M->npend && (kt == 0 || M->pend[0].t < best))
            which = 1, best = M->pend[0].t;
        if (ks > 0 && ((kt == 0 && !M->npend) || st_t < best))
            which = 2, best = st_t;
        if (!said) { /* the notice first, at the first event's time */
            snprintf(text, sizeof text,
                     "merged with PyTorch's memory history %s: %" PRIu64
                     " of the trace's allocations are its segments (reserved memory of the "
                     "caching allocator), its blocks (tensors) are allocations inside them",
                     snap_name, M->st.matched_segments);
            emit_notice(M, TORCH_TID, GMP_NOTICE_INFO, text, best);
            said = 1;
        }
        if (which == 0) {
            put_trace(M, rt, et);
            kt = next_event(M, rt, &et, 1, "the trace");
        } else if (which == 1) {
            pend_pop(M);
        } else {
            if (es->type == GMP_REC_ALLOC && es->time_ns == s_t0)
                M->st.pre_blocks++;
            put_snap(M, rs, es, st_t);
            ks = next_event(M, rs, &es, 0, "the snapshot");
        }
    }
    if (M->err != GMP_OK)
        return;
    if (M->st.unmatched_segments || M->st.other_pools) {
        snprintf(text, sizeof text,
                 PREFIX "%" PRIu64 " of its segments are not allocations of the trace%s: their "
                        "blocks are shown, their reserved memory is the trace's own records",
                 M->st.unmatched_segments,
                 M->st.other_pools ? " (and expandable or pre-window segments)" : "");
        emit_notice(M, TORCH_TID, GMP_NOTICE_WARNING, text, M->last_t);
    }
    if (M->st.pre_blocks) {
        snprintf(text, sizeof text,
                 PREFIX "%" PRIu64 " blocks existed before its history window: shown from the "
                        "window's start",
                 M->st.pre_blocks);
        emit_notice(M, TORCH_TID, GMP_NOTICE_INFO, text, M->last_t);
    }
    if (M->st.blocks) {
        snprintf(text, sizeof text,
                 PREFIX "the tensors' ranges: %" PRIu64 " from PyTorch's user_metadata (range "
                        "paths the program set; %" PRIu64 " of them the trace's open range "
                        "whose path ends with it), %" PRIu64 " from its record_function "
                        "annotations, %" PRIu64 " from a compiled region alone, %" PRIu64
                        " from the trace's range open at the time (by thread), %" PRIu64 " none",
                 M->st.range_metadata, M->st.range_metadata_trace, M->st.range_annotation,
                 M->st.range_compile, M->st.range_trace, M->st.range_none);
        emit_notice(M, TORCH_TID, GMP_NOTICE_INFO, text, M->last_t);
    }
    if (M->st.ooms_dropped) {
        snprintf(text, sizeof text,
                 PREFIX "%" PRIu64 " out-of-memory entries not merged (the trace records CUDA's)",
                 M->st.ooms_dropped);
        emit_notice(M, TORCH_TID, GMP_NOTICE_INFO, text, M->last_t);
    }
    {
        char line[512];
        if (!gmp_reader_completeness(rt, line, sizeof line)) {
            snprintf(text, sizeof text, "the trace merged is incomplete: %s", line);
            emit_notice(M, TORCH_TID, GMP_NOTICE_WARNING, text, M->last_t);
        }
    }
    if (M->err == GMP_OK) {
        gmp_writer_sync(M->w, M->last_t);
        gmp_writer_stats ws;
        gmp_err e = gmp_writer_close(M->w, &ws);
        M->w = NULL;
        if (e != GMP_OK)
            failf(M, e, "the merged trace could not be written");
    }
}

gmp_err gmp_merge_torch(const char *trace_path, const char *snap_trace_path, const char *snap_name,
                        int out_fd, gmp_merge_torch_stats *stats, char *msg, size_t msglen)
{
    mrg M;
    memset(&M, 0, sizeof M);
    M.msg = msg;
    M.msglen = msglen;
    if (msg && msglen)
        msg[0] = 0;
    gmp_reader *rt = NULL, *rs = NULL;
    span ts = {0}, ss = {0};
    int64_t offset = 0;
    uint64_t s_t0 = 0;
    if (!snap_name)
        snap_name = "the snapshot";

    if (open_reader(&M, &rs, snap_trace_path, "the snapshot") != GMP_OK)
        goto out;
    const gmp_rec_header *sh = gmp_reader_header(rs);
    s_t0 = sh->start_trace_ns;
    if (sh->start_wall_ns == 0) {
        failf(&M, GMP_ERR_FORMAT,
              "the snapshot has no times (no time_us): it cannot be put on the trace's timeline");
        goto out;
    }
    if (snap_pass1(&M, rs, &ss) < 0)
        goto out;
    if (open_reader(&M, &rt, trace_path, "the trace") != GMP_OK)
        goto out;
    const gmp_rec_header *th = gmp_reader_header(rt);
    if (th->start_wall_ns == 0) {
        failf(&M, GMP_ERR_FORMAT, "the trace has no wall-clock time in its header");
        goto out;
    }
    if (trace_pass1(&M, rt, &ts) < 0 || align_clocks(&M, sh, th, &ss, &ts, &offset) < 0)
        goto out;
    gmp_reader_close(rt);
    gmp_reader_close(rs);
    rt = rs = NULL;

    if (open_reader(&M, &rt, trace_path, "the trace") != GMP_OK ||
        open_reader(&M, &rs, snap_trace_path, "the snapshot") != GMP_OK)
        goto out;
    M.rt = rt;
    merge_pass2(&M, rt, rs, &out_fd, offset, s_t0, snap_name);
out:
    if (M.w)
        gmp_writer_close(M.w, NULL);
    if (out_fd >= 0)
        close(out_fd);
    gmp_reader_close(rt);
    gmp_reader_close(rs);
    gmp_omap_free(&M.segidx);
    gmp_omap_free(&M.live);
    gmp_omap_free(&M.thidx);
    free_idmap(&M.mt);
    free_idmap(&M.ms);
    free(M.segs);
    free(M.byaddr);
    free(M.pend);
    gmp_omap_free(&M.alloc_t);
    gmp_omap_free(&M.tridx);
    for (size_t i = 0; i < M.ntrs; i++) {
        free(M.trs[i].st);
        free(M.trs[i].in);
        free(M.trs[i].at);
    }
    free(M.trs);
    free(M.ths);
    if (stats)
        *stats = M.st;
    return M.err;
}
