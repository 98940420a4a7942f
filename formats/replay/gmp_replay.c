/* gmp_replay: one pass over a trace, shared by every output. See gmp_replay.h and docs/replay.md.
 *
 * Data structures (all open addressing, linear probing, backward-shift deletion, power-of-two
 * capacity, grown at 3/4 load): one live-allocation table per address space (ordinary memory, VMM
 * physical handles, VMM mappings, VA reservations, NVTX regions: the same address can be live in
 * several at once), the site table; pools, threads and START/END handles are gmp_omap maps
 * (formats/base) from their key to their entry's index in an array of their own. The live set at
 * the peak is kept per site with an epoch stamp: each device counts its new peaks (epoch); a site
 * remembers its live bytes as of the last peak the first time it changes after that peak, so the
 * value at the final peak is known at the end without any copy at peak time and without a log. */
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_array.h"
#include "gmp_frames.h"
#include "gmp_livetab.h"
#include "gmp_map.h"
#include "gmp_replay.h"

#define MAX_OUTPUTS 16
/* Files up to this size (compressed) are read in the calling thread: a second thread, its
 * buffers and hand-overs cost more than the overlap gains (docs/replay.md, "Two threads"). */
#define READAHEAD_MIN_BYTES ((uint64_t)512 << 10)
#define FREED_CACHE 16384 /* recently freed addresses kept for double-free detection */

enum { SP_MEM, SP_VMM_PHYS, SP_VMM_MAP, SP_VA, SP_REGION, NSPACE };

/* ---- state ---- */

typedef gmp_live_ent live_ent;

typedef struct site_int {
    gmp_replay_site pub;
    uint64_t epoch; /* device peak epoch of snap_* */
    uint64_t snap_bytes, snap_count;
    struct dev_int *dev;
} site_int;

typedef struct dev_int {
    gmp_replay_device pub;
    uint64_t epoch;         /* number of new peaks of allocated so far */
    uint64_t nonpool;       /* live bytes of device kinds other than ASYNC_POOL */
    uint64_t async_live;    /* live bytes of ASYNC_POOL */
    uint64_t pool_reported; /* sum of the pools' last reported reserved sizes */
} dev_int;

typedef struct pool_ent { /* by gmp_replay_pool_number: a snapshot has a pool per segment */
    uint64_t key;         /* pool handle */
    uint64_t reported;
    int32_t dev; /* the device's id (dev_get) */
} pool_ent;
#define POOL_NUMS ((uint32_t)1 << 24) /* pools alive at once (a 4 GiB table before that) */

typedef struct open_range {
    uint32_t range;
    uint64_t begin;
} open_range;

typedef struct thread_ent {
    open_range *st;
    uint32_t depth, cap;
} thread_ent;

typedef struct handle_ent {
    uint64_t begin;
    uint32_t range, tid;
} handle_ent;

typedef struct freed_ent {
    uint64_t key;
    uint32_t space1; /* space + 1; 0 = empty */
} freed_ent;

/* The last frees, in a small ring written in order (cheap), so that a failed-free record, which
 * follows its call's first record closely, can undo it (see on_free). */
#define UNDO_RING 256
typedef struct undo_ent {
    uint64_t key, size, correlation, handle;
    uint32_t site;
    int32_t space;
} undo_ent;

typedef struct notice {
    char *msg;
    uint32_t severity;
    uint64_t time_ns;
} notice;

typedef struct output {
    const gmp_replay_ops *ops;
    void *ctx;
} output;

/* The outputs' callbacks of the events met most, listed apart (those that are set, in the order
 * of the outputs): no test of the member per output and event. */
typedef struct mem_cb {
    gmp_err (*fn)(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev);
    void *ctx;
} mem_cb;
typedef struct pool_cb {
    gmp_err (*fn)(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *dev);
    void *ctx;
} pool_cb;

/* A hash computed ahead for the record numbered seq (see prefetch_live). */
typedef struct pf_hint {
    uint64_t seq, h;
    int space;
} pf_hint;
#define PF_ENT 8    /* records ahead: prefetch the entry */
#define PF_META 16  /* records ahead: hash, prefetch the slot descriptors */
#define PF_RING 32  /* hints kept: more than PF_META */
#define PF_MIN 4096 /* live allocations or pools from which the replay looks ahead */
_Static_assert(PF_META < PF_RING && PF_ENT < PF_META, "look-ahead distances");

#define SITE_CACHE 256 /* site_get's cache: allocations alternate between a few sites */

struct gmp_replay {
    gmp_reader *r;
    gmp_replay_opts o;
    output outs[MAX_OUTPUTS];
    size_t nouts;
    mem_cb alloc_cbs[MAX_OUTPUTS], free_cbs[MAX_OUTPUTS];
    pool_cb pool_cbs[MAX_OUTPUTS];
    size_t nalloc_cbs, nfree_cbs, npool_cbs;
    int ran;
    char err[512];

    dev_int **devs; /* sorted by id */
    size_t ndevs, devcap;
    dev_int *last_dev;

    site_int *sites;
    size_t nsites, sitecap;
    uint32_t *sitemap; /* site index + 1; 0 empty */
    size_t sitemap_cap;
    size_t last_site;
    uint32_t site_cache[SITE_CACHE]; /* site index + 1 by its stack and range (site_get) */

    gmp_livetab live[NSPACE];
    uint64_t nlive;
    pf_hint pf[PF_RING]; /* see prefetch_live */
    uint64_t pf_seq;
    uint64_t pool_ahead, pool_ahead_seq; /* gmp_replay_pool_ahead: the pool seen at pf_seq */
    gmp_omap pools;                      /* pool handle -> its number + 1 (its entry in pool_tab) */
    pool_ent *pool_tab;                  /* by pool number */
    size_t cap_pool_tab;
    pool_ent *last_pool; /* the pool of the last POOL record (NULL after a removal): on_pool is
                            the only place that adds or removes pools */
    gmp_omap threads;    /* tid -> index + 1 in thread_tab */
    thread_ent *thread_tab;
    size_t nthread_tab, cap_thread_tab;
    gmp_omap handles; /* START/END handle -> index + 1 in handle_tab */
    handle_ent *handle_tab;
    uint32_t *handle_free; /* indexes of handle_tab free again */
    size_t nhandle_tab, cap_handle_tab, nhandle_free, cap_handle_free;
    uint32_t *pool_free; /* numbers of destroyed pools, for the next new ones */
    size_t npool_free, cap_pool_free;
    uint32_t pool_nums;    /* numbers given so far (the next new one when none is free) */
    uint32_t cur_pool_num; /* gmp_replay_pool_number during a pool callback */
    int cur_pool_fresh;
    freed_ent *freed;
    undo_ent undo[UNDO_RING];
    size_t undo_pos;

    gmp_replay_oom *ooms;
    size_t nooms;
    notice *notices;
    size_t nnotices;

    gmp_replay_alloc *scratch; /* allocations freed by one unmap */
    size_t scratch_cap;

    gmp_replay_summary sum;
    gmp_frame_memo *fmemo; /* gmp_replay_frame_memo */
    /* gmp_replay_category: per stack node (the reader's stack index), what the frames from it
     * outwards say (NODE_*); dropped when a module is defined (native frames are matched by
     * their module) */
    uint32_t *nodecat;
    size_t nodecat_cap, nodecat_mods;
    gmp_omap pyframes; /* function string id << 32 | file string id -> the frame's facts + 1 */
};

/* ---- errors ---- */

gmp_err gmp_replay_fail(gmp_replay *rp, gmp_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rp->err, sizeof rp->err, fmt, ap);
    va_end(ap);
    return e;
}

const char *gmp_replay_error(const gmp_replay *rp)
{
    return rp ? rp->err : "";
}

/* ---- creation ---- */

gmp_err gmp_replay_new(gmp_replay **out, gmp_reader *r, const gmp_replay_opts *opts)
{
    *out = NULL;
    if (!r)
        return GMP_ERR_ARG;
    gmp_replay *rp = calloc(1, sizeof *rp);
    if (!rp)
        return GMP_ERR_NOMEM;
    rp->r = r;
    if (opts)
        rp->o = *opts;
    if (!rp->o.max_ooms)
        rp->o.max_ooms = 1024;
    if (!rp->o.max_notices)
        rp->o.max_notices = 64;
    rp->freed = calloc(FREED_CACHE, sizeof *rp->freed);
    rp->last_site = SIZE_MAX;
    rp->fmemo = gmp_frame_memo_new(); /* NULL: classified every time */
    if (!rp->freed) {
        gmp_replay_free(rp);
        return GMP_ERR_NOMEM;
    }
    *out = rp;
    return GMP_OK;
}

void gmp_replay_free(gmp_replay *rp)
{
    if (!rp)
        return;
    for (size_t i = 0; i < rp->ndevs; i++)
        free(rp->devs[i]);
    free(rp->devs);
    free(rp->sites);
    free(rp->sitemap);
    for (int i = 0; i < NSPACE; i++)
        gmp_livetab_free(&rp->live[i]);
    gmp_omap_free(&rp->pools);
    free(rp->pool_tab);
    free(rp->pool_free);
    for (size_t i = 0; i < rp->nthread_tab; i++)
        free(rp->thread_tab[i].st);
    free(rp->thread_tab);
    gmp_omap_free(&rp->threads);
    gmp_omap_free(&rp->handles);
    free(rp->handle_tab);
    free(rp->handle_free);
    free(rp->freed);
    free(rp->ooms);
    for (size_t i = 0; i < rp->nnotices; i++)
        free(rp->notices[i].msg);
    free(rp->notices);
    free(rp->scratch);
    gmp_frame_memo_free(rp->fmemo);
    free(rp->nodecat);
    gmp_omap_free(&rp->pyframes);
    free(rp);
}

gmp_frame_memo *gmp_replay_frame_memo(const gmp_replay *rp)
{
    return rp ? rp->fmemo : NULL;
}

gmp_err gmp_replay_add(gmp_replay *rp, const gmp_replay_ops *ops, void *ctx)
{
    if (!rp || !ops || rp->ran)
        return GMP_ERR_ARG;
    if (rp->nouts == MAX_OUTPUTS)
        return GMP_ERR_LIMIT;
    rp->outs[rp->nouts].ops = ops;
    rp->outs[rp->nouts].ctx = ctx;
    rp->nouts++;
    if (ops->alloc)
        rp->alloc_cbs[rp->nalloc_cbs++] = (mem_cb){ops->alloc, ctx};
    if (ops->free)
        rp->free_cbs[rp->nfree_cbs++] = (mem_cb){ops->free, ctx};
    if (ops->pool)
        rp->pool_cbs[rp->npool_cbs++] = (pool_cb){ops->pool, ctx};
    return GMP_OK;
}

/* ---- devices ---- */

/* dev_get's other cases: out of line, dev_get itself is inlined (every event). */
static __attribute__((noinline)) dev_int *dev_find(gmp_replay *rp, int32_t id)
{
    size_t lo = 0, hi = rp->ndevs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rp->devs[mid]->pub.id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < rp->ndevs && rp->devs[lo]->pub.id == id)
        return rp->last_dev = rp->devs[lo];
    if (rp->ndevs == rp->devcap) {
        size_t nc = rp->devcap ? rp->devcap * 2 : 8;
        dev_int **nd = realloc(rp->devs, nc * sizeof *nd);
        if (!nd)
            return NULL;
        rp->devs = nd;
        rp->devcap = nc;
    }
    dev_int *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->pub.id = id;
    if (id >= 0)
        d->pub.def = gmp_reader_device(rp->r, (uint32_t)id);
    memmove(rp->devs + lo + 1, rp->devs + lo, (rp->ndevs - lo) * sizeof *rp->devs);
    rp->devs[lo] = d;
    rp->ndevs++;
    return rp->last_dev = d;
}

static inline __attribute__((always_inline)) dev_int *dev_get(gmp_replay *rp, int32_t id)
{
    if (rp->last_dev && rp->last_dev->pub.id == id)
        return rp->last_dev;
    return dev_find(rp, id);
}

/* ---- sites ---- */

static inline size_t site_hash(int32_t dev, uint32_t kind, uint32_t api, uint32_t range,
                               uint32_t stack)
{
    uint64_t h = (uint64_t)(uint32_t)dev * 0x9e3779b97f4a7c15ULL;
    h = (h ^ kind) * 0xff51afd7ed558ccdULL;
    h = (h ^ api) * 0xc4ceb9fe1a85ec53ULL;
    h = (h ^ range) * 0x9e3779b97f4a7c15ULL;
    h = (h ^ stack) * 0xff51afd7ed558ccdULL;
    return (size_t)(h ^ (h >> 29));
}

static int site_match(const site_int *s, int32_t dev, uint32_t kind, uint32_t api, uint32_t range,
                      uint32_t stack)
{
    return s->pub.device == dev && s->pub.kind == kind && s->pub.api == api &&
           s->pub.range == range && s->pub.stack == stack;
}

static int sitemap_grow(gmp_replay *rp)
{
    size_t ncap = rp->sitemap_cap ? rp->sitemap_cap * 2 : 256;
    uint32_t *nm = calloc(ncap, sizeof *nm);
    if (!nm)
        return -1;
    for (size_t i = 0; i < rp->nsites; i++) {
        const gmp_replay_site *p = &rp->sites[i].pub;
        size_t j = site_hash(p->device, p->kind, p->api, p->range, p->stack) & (ncap - 1);
        while (nm[j])
            j = (j + 1) & (ncap - 1);
        nm[j] = (uint32_t)i + 1;
    }
    free(rp->sitemap);
    rp->sitemap = nm;
    rp->sitemap_cap = ncap;
    return 0;
}

/* The site's index, created when new; SIZE_MAX when out of memory. */
static size_t site_get(gmp_replay *rp, dev_int *d, uint32_t kind, uint32_t api, uint32_t range,
                       uint32_t stack)
{
    int32_t dv = d->pub.id;
    if (rp->last_site != SIZE_MAX &&
        site_match(&rp->sites[rp->last_site], dv, kind, api, range, stack))
        return rp->last_site;
    /* a small cache by stack and range (what mostly tells sites apart) before the hashed map */
    uint32_t *c = &rp->site_cache[(stack ^ range * 0x9e3779b9u) % SITE_CACHE];
    if (*c && site_match(&rp->sites[*c - 1], dv, kind, api, range, stack))
        return rp->last_site = *c - 1;
    if ((rp->nsites + 1) * 4 > rp->sitemap_cap * 3 && sitemap_grow(rp) < 0)
        return SIZE_MAX;
    size_t mask = rp->sitemap_cap - 1;
    size_t j = site_hash(dv, kind, api, range, stack) & mask;
    for (; rp->sitemap[j]; j = (j + 1) & mask) {
        size_t i = rp->sitemap[j] - 1;
        if (site_match(&rp->sites[i], dv, kind, api, range, stack)) {
            *c = (uint32_t)i + 1;
            return rp->last_site = i;
        }
    }
    if (rp->nsites >= UINT32_MAX - 1)
        return SIZE_MAX;
    if (rp->nsites == rp->sitecap) {
        size_t nc = rp->sitecap ? rp->sitecap * 2 : 256;
        site_int *ns = realloc(rp->sites, nc * sizeof *ns);
        if (!ns)
            return SIZE_MAX;
        rp->sites = ns;
        rp->sitecap = nc;
    }
    site_int *s = &rp->sites[rp->nsites];
    memset(s, 0, sizeof *s);
    s->pub.device = dv;
    s->pub.kind = kind;
    s->pub.api = api;
    s->pub.range = range;
    s->pub.stack = stack;
    s->epoch = d->epoch;
    s->dev = d;
    rp->sitemap[j] = (uint32_t)rp->nsites + 1;
    *c = (uint32_t)rp->nsites + 1;
    return rp->last_site = rp->nsites++;
}

/* Before a device-kind site changes: remember its value at the device's last peak. */
static inline void site_touch(site_int *s, const dev_int *d)
{
    if (s->epoch != d->epoch) {
        s->snap_bytes = s->pub.live_bytes;
        s->snap_count = s->pub.live_count;
        s->epoch = d->epoch;
    }
}

/* ---- accounting ---- */

/* gmp_mem_kind_is_device for kinds < GMP_MEM_KIND_COUNT, inline: DEVICE, ASYNC_POOL,
 * VMM_PHYSICAL, ARRAY, STATIC. */
#define DEVICE_KINDS                                                                               \
    ((1u << GMP_MEM_DEVICE) | (1u << GMP_MEM_ASYNC_POOL) | (1u << GMP_MEM_VMM_PHYSICAL) |          \
     (1u << GMP_MEM_ARRAY) | (1u << GMP_MEM_STATIC))
static inline int is_dev_kind(unsigned kind)
{
    return (DEVICE_KINDS >> kind) & 1u;
}

static inline unsigned kind_slot(uint32_t kind)
{
    return kind < GMP_MEM_KIND_COUNT ? kind : GMP_MEM_UNKNOWN;
}

static inline int space_of(uint32_t kind)
{
    switch (kind) {
    case GMP_MEM_VMM_PHYSICAL: return SP_VMM_PHYS;
    case GMP_MEM_VMM_MAPPING: return SP_VMM_MAP;
    case GMP_MEM_VA_RESERVE: return SP_VA;
    case GMP_MEM_NVTX_REGION: return SP_REGION;
    default: return SP_MEM;
    }
}

static void update_reserved(dev_int *d, uint64_t t)
{
    uint64_t pool = d->pool_reported > d->async_live ? d->pool_reported : d->async_live;
    d->pub.pool_reserved = pool;
    d->pub.reserved = d->nonpool + pool;
    if (d->pub.reserved > d->pub.peak_reserved) {
        d->pub.peak_reserved = d->pub.reserved;
        d->pub.peak_reserved_time_ns = t;
    }
}

/* Adds an allocation of size bytes to its site, kind and device. Returns 1 on a new peak of the
 * device's allocated bytes. */
static int account_add(dev_int *d, site_int *s, unsigned kind, uint64_t size, uint64_t t)
{
    int dk = is_dev_kind(kind);
    if (dk)
        site_touch(s, d);
    gmp_replay_site *p = &s->pub;
    p->live_bytes += size;
    p->live_count++;
    p->allocs++;
    p->alloc_bytes += size;
    if (size > p->max_alloc_bytes)
        p->max_alloc_bytes = size;
    gmp_replay_kind_stats *k = &d->pub.kind[kind];
    k->allocs++;
    k->alloc_bytes += size;
    k->live_bytes += size;
    k->live_count++;
    if (size > k->max_alloc_bytes)
        k->max_alloc_bytes = size;
    if (k->live_bytes > k->peak_bytes) {
        k->peak_bytes = k->live_bytes;
        k->peak_time_ns = t;
    }
    if (!dk)
        return 0;
    gmp_replay_device *dp = &d->pub;
    dp->allocated += size;
    dp->allocs++;
    dp->alloc_bytes += size;
    dp->live_count++;
    if (kind == GMP_MEM_ASYNC_POOL)
        d->async_live += size;
    else
        d->nonpool += size;
    update_reserved(d, t);
    if (dp->allocated > dp->peak_allocated) {
        dp->peak_allocated = dp->allocated;
        dp->peak_time_ns = t;
        d->epoch++;
        return 1;
    }
    return 0;
}

/* Removes an allocation; counted: a real free (not a replaced allocation). */
static void account_sub(dev_int *d, site_int *s, unsigned kind, uint64_t size, uint64_t t,
                        int counted)
{
    int dk = is_dev_kind(kind);
    if (dk)
        site_touch(s, d);
    gmp_replay_site *p = &s->pub;
    p->live_bytes -= size;
    p->live_count--;
    gmp_replay_kind_stats *k = &d->pub.kind[kind];
    k->live_bytes -= size;
    k->live_count--;
    if (counted) {
        p->frees++;
        p->free_bytes += size;
        k->frees++;
    }
    if (!dk)
        return;
    gmp_replay_device *dp = &d->pub;
    dp->allocated -= size;
    dp->live_count--;
    if (counted)
        dp->frees++;
    if (kind == GMP_MEM_ASYNC_POOL)
        d->async_live -= size;
    else
        d->nonpool -= size;
    update_reserved(d, t);
}

static void fill_alloc(const gmp_replay *rp, int space, const live_ent *e, gmp_replay_alloc *a)
{
    const site_int *s = &rp->sites[e->site];
    a->address = space == SP_VMM_PHYS ? 0 : e->key;
    a->size = e->size;
    a->time_ns = e->time_ns;
    a->handle = e->handle;
    a->tid = e->tid;
    a->flags = e->flags;
    a->device = s->pub.device;
    a->kind = s->pub.kind;
    a->api = s->pub.api;
    a->range = s->pub.range;
    a->stack = s->pub.stack;
    a->site = e->site;
}

/* Removes a live entry and its accounting. */
static void live_remove(gmp_replay *rp, int space, live_ent *e, uint64_t t, int counted)
{
    site_int *s = &rp->sites[e->site];
    dev_int *d = s->dev;
    account_sub(d, s, s->pub.kind, e->size, t, counted);
    gmp_livetab_del(&rp->live[space], e);
    rp->nlive--;
}

static inline size_t freed_slot(int space, uint64_t key)
{
    return gmp_omap_hash(key ^ ((uint64_t)space << 56)) & (FREED_CACHE - 1);
}

static inline void freed_remember(gmp_replay *rp, int space, uint64_t key)
{
    freed_ent *f = &rp->freed[freed_slot(space, key)];
    f->key = key;
    f->space1 = (uint32_t)space + 1;
}

static inline int freed_seen(const gmp_replay *rp, int space, uint64_t key)
{
    const freed_ent *f = &rp->freed[freed_slot(space, key)];
    return f->space1 == (uint32_t)space + 1 && f->key == key;
}

/* ---- dispatch ---- */

#define DISPATCH(rp, member, ...)                                                                  \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < (rp)->nouts; i_++) {                                              \
            const gmp_replay_ops *o_ = (rp)->outs[i_].ops;                                         \
            if (o_->member) {                                                                      \
                gmp_err e_ = o_->member((rp)->outs[i_].ctx, (rp), __VA_ARGS__);                    \
                if (e_ != GMP_OK)                                                                  \
                    return e_;                                                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* The same over a list of mem_cb or pool_cb (alloc, free, pool). */
#define DISPATCH_CBS(rp, list, n, ...)                                                             \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < (rp)->n; i_++) {                                                  \
            gmp_err e_ = (rp)->list[i_].fn((rp)->list[i_].ctx, (rp), __VA_ARGS__);                 \
            if (e_ != GMP_OK)                                                                      \
                return e_;                                                                         \
        }                                                                                          \
    } while (0)

#define DISPATCH0(rp, member)                                                                      \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < (rp)->nouts; i_++) {                                              \
            const gmp_replay_ops *o_ = (rp)->outs[i_].ops;                                         \
            if (o_->member) {                                                                      \
                gmp_err e_ = o_->member((rp)->outs[i_].ctx, (rp));                                 \
                if (e_ != GMP_OK)                                                                  \
                    return e_;                                                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static gmp_err nomem(gmp_replay *rp)
{
    return gmp_replay_fail(rp, GMP_ERR_NOMEM, "out of memory while replaying the trace");
}

/* ---- events ---- */

static gmp_err on_alloc(gmp_replay *rp, const gmp_rec *rec)
{
    const gmp_rec_mem *m = &rec->u.mem;
    rp->sum.alloc_records++;
    dev_int *d = dev_get(rp, m->device);
    if (!d)
        return nomem(rp);
    gmp_replay_mem ev = {rec, GMP_REPLAY_OK, NULL, 0, &d->pub, 0, NULL};
    gmp_replay_alloc a, dropped;
    if (m->flags & GMP_MEMF_FAILED) {
        d->pub.failed_allocs++;
        rp->sum.failed_allocs++;
        ev.status = GMP_REPLAY_FAILED;
        DISPATCH_CBS(rp, alloc_cbs, nalloc_cbs, &ev);
        return GMP_OK;
    }
    unsigned kind = kind_slot(m->kind);
    int sp = space_of(kind);
    uint64_t key = sp == SP_VMM_PHYS ? m->handle : m->address;
    int fresh;
    live_ent *e = gmp_livetab_put(&rp->live[sp], key, &fresh);
    if (!e)
        return nomem(rp);
    if (!fresh) {
        live_ent *old = e;
        const site_int *os = &rp->sites[old->site];
        if (old->size == m->size && os->pub.kind == kind &&
            ((old->flags ^ m->flags) & GMP_MEMF_ACTIVITY)) {
            /* the same allocation seen by a callback and an activity record */
            rp->sum.duplicate_allocs++;
            ev.status = GMP_REPLAY_DUPLICATE;
            fill_alloc(rp, sp, old, &a);
            ev.alloc = &a;
            ev.nalloc = 1;
            DISPATCH_CBS(rp, alloc_cbs, nalloc_cbs, &ev);
            return GMP_OK;
        }
        rp->sum.replaced_allocs++;
        ev.status = GMP_REPLAY_REPLACED;
        fill_alloc(rp, sp, old, &dropped); /* before its entry is reused */
        ev.replaced = &dropped;
        live_remove(rp, sp, old, rec->time_ns, 0);
        e = gmp_livetab_put(&rp->live[sp], key, &fresh); /* fresh now */
        if (!e)
            return nomem(rp);
    }
    /* (the freed-address cache keeps key: it is consulted only for a key that is not live, and a
     * key stops being live only by a free, which remembers it anew) */
    size_t si = site_get(rp, d, kind, m->api, m->range, m->stack);
    if (si == SIZE_MAX) {
        gmp_livetab_del(&rp->live[sp], e);
        return nomem(rp);
    }
    e->size = m->size;
    e->time_ns = rec->time_ns;
    e->handle = m->handle;
    e->site = (uint32_t)si;
    e->tid = rec->tid;
    e->flags = (uint8_t)m->flags;
    if (++rp->nlive > rp->sum.max_live_allocs)
        rp->sum.max_live_allocs = rp->nlive;
    int peak = account_add(d, &rp->sites[si], kind, m->size, rec->time_ns);
    ev.counted = is_dev_kind(kind);
    fill_alloc(rp, sp, e, &a);
    ev.alloc = &a;
    ev.nalloc = 1;
    DISPATCH_CBS(rp, alloc_cbs, nalloc_cbs, &ev);
    if (peak)
        DISPATCH(rp, peak, &d->pub, rec->time_ns);
    return GMP_OK;
}

static gmp_replay_alloc *scratch_slot(gmp_replay *rp, size_t i)
{
    if (i >= rp->scratch_cap) {
        size_t nc = rp->scratch_cap ? rp->scratch_cap * 2 : 16;
        gmp_replay_alloc *ns = realloc(rp->scratch, nc * sizeof *ns);
        if (!ns)
            return NULL;
        rp->scratch = ns;
        rp->scratch_cap = nc;
    }
    return &rp->scratch[i];
}

/* cuMemUnmap of a range that covers several mappings. Returns the number removed, or -1. */
static long unmap_range(gmp_replay *rp, uint64_t lo, uint64_t size, uint64_t t,
                        const gmp_replay_device **devp)
{
    gmp_livetab *m = &rp->live[SP_VMM_MAP];
    uint64_t hi = lo + size < lo ? UINT64_MAX : lo + size;
    long n = 0;
    for (size_t i = 0; i < m->cap;) {
        if (gmp_livetab_used(m, i)) {
            live_ent *e = &m->ent[i];
            if (e->key >= lo && e->key < hi) {
                gmp_replay_alloc *a = scratch_slot(rp, (size_t)n);
                if (!a)
                    return -1;
                fill_alloc(rp, SP_VMM_MAP, e, a);
                *devp = &rp->sites[e->site].dev->pub;
                live_remove(rp, SP_VMM_MAP, e, t, 1);
                freed_remember(rp, SP_VMM_MAP, a->address);
                n++;
                continue; /* slot i now holds a shifted entry (or is empty): look again */
            }
        }
        i++;
    }
    return n;
}

static gmp_err on_free(gmp_replay *rp, const gmp_rec *rec)
{
    const gmp_rec_mem *m = &rec->u.mem;
    rp->sum.free_records++;
    gmp_replay_mem ev = {rec, GMP_REPLAY_OK, NULL, 0, NULL, 0, NULL};
    gmp_replay_alloc a;
    unsigned kind = kind_slot(m->kind);
    int sp = space_of(kind);
    uint64_t key = sp == SP_VMM_PHYS ? m->handle : m->address;
    if (m->flags & GMP_MEMF_FAILED) {
        dev_int *d = dev_get(rp, m->device);
        if (!d)
            return nomem(rp);
        d->pub.failed_frees++;
        rp->sum.failed_frees++;
        ev.status = GMP_REPLAY_FAILED;
        ev.dev = &d->pub;
        DISPATCH_CBS(rp, free_cbs, nfree_cbs, &ev);
        /* The agent records a free at the API's entry (before the memory is released, so that an
         * address reused by another thread is freed before it is allocated again) and, when the
         * call then fails, this second record with the same correlation id: the free did not
         * happen, so what the first record freed is live again (an ALLOC event for the outputs). */
        undo_ent *fe = NULL;
        for (size_t i = 0; m->correlation && i < UNDO_RING; i++) {
            undo_ent *u = &rp->undo[(rp->undo_pos - 1 - i) % UNDO_RING];
            if (u->correlation == m->correlation && u->space == sp && u->key == key) {
                fe = u;
                break;
            }
        }
        if (fe && !gmp_livetab_find(&rp->live[sp], key)) {
            const site_int *st = &rp->sites[fe->site];
            gmp_rec back;
            memset(&back, 0, sizeof back);
            back.type = GMP_REC_ALLOC;
            back.time_ns = rec->time_ns;
            back.tid = rec->tid;
            back.u.mem.device = st->pub.device;
            back.u.mem.kind = st->pub.kind;
            back.u.mem.api = st->pub.api;
            back.u.mem.range = st->pub.range;
            back.u.mem.stack = st->pub.stack;
            back.u.mem.address = sp == SP_VMM_PHYS ? 0 : key;
            back.u.mem.handle = fe->handle;
            back.u.mem.size = fe->size;
            back.u.mem.correlation = m->correlation;
            fe->correlation = 0; /* undone once */
            rp->sum.undone_frees++;
            gmp_err ue = on_alloc(rp, &back);
            rp->sum.alloc_records--; /* not a record of the trace */
            return ue;
        }
        return GMP_OK;
    }
    live_ent *e = gmp_livetab_find(&rp->live[sp], key);
    if (e && sp == SP_VMM_MAP && m->size > e->size)
        e = NULL; /* one unmap over several mappings */
    if (!e && sp == SP_VMM_MAP && m->size) {
        const gmp_replay_device *dv = NULL;
        long n = unmap_range(rp, m->address, m->size, rec->time_ns, &dv);
        if (n < 0)
            return nomem(rp);
        if (n > 0) {
            ev.alloc = rp->scratch;
            ev.nalloc = (size_t)n;
            ev.dev = dv;
            DISPATCH_CBS(rp, free_cbs, nfree_cbs, &ev);
            return GMP_OK;
        }
    }
    if (!e) {
        dev_int *d = dev_get(rp, m->device);
        if (!d)
            return nomem(rp);
        if (freed_seen(rp, sp, key)) {
            d->pub.double_frees++;
            rp->sum.double_frees++;
            ev.status = GMP_REPLAY_DOUBLE_FREE;
        } else {
            d->pub.unknown_frees++;
            rp->sum.unknown_frees++;
            ev.status = GMP_REPLAY_UNKNOWN_FREE;
        }
        ev.dev = &d->pub;
        DISPATCH_CBS(rp, free_cbs, nfree_cbs, &ev);
        return GMP_OK;
    }
    fill_alloc(rp, sp, e, &a);
    dev_int *d = rp->sites[e->site].dev;
    ev.counted = is_dev_kind(a.kind);
    live_remove(rp, sp, e, rec->time_ns, 1);
    freed_remember(rp, sp, key);
    if (m->correlation) {
        undo_ent *u = &rp->undo[rp->undo_pos++ % UNDO_RING];
        *u = (undo_ent){key, a.size, m->correlation, a.handle, (uint32_t)a.site, sp};
    }
    ev.alloc = &a;
    ev.nalloc = 1;
    ev.dev = &d->pub;
    DISPATCH_CBS(rp, free_cbs, nfree_cbs, &ev);
    return GMP_OK;
}

static gmp_err on_pool(gmp_replay *rp, const gmp_rec *rec)
{
    const gmp_rec_pool *p = &rec->u.pool;
    dev_int *d = dev_get(rp, p->device);
    if (!d)
        return nomem(rp);
    int fresh = 0;
    pool_ent *pe = rp->last_pool; /* a pool's records mostly follow each other */
    if (!pe || pe->key != p->pool) {
        uint64_t *v = gmp_omap_put(&rp->pools, p->pool, &fresh);
        if (!v)
            return nomem(rp);
        if (fresh) {
            uint32_t n;
            if (rp->npool_free)
                n = rp->pool_free[--rp->npool_free];
            else if (rp->pool_nums < POOL_NUMS &&
                     gmp_array_cover((void **)&rp->pool_tab, &rp->cap_pool_tab, rp->pool_nums,
                                     sizeof *rp->pool_tab) == 0)
                n = rp->pool_nums++;
            else if (rp->pool_nums < POOL_NUMS) {
                gmp_omap_del(&rp->pools, p->pool);
                return nomem(rp);
            } else
                return gmp_replay_fail(rp, GMP_ERR_LIMIT, "more than %" PRIu32 " pools at once",
                                       POOL_NUMS);
            *v = (uint64_t)n + 1;
            pe = &rp->pool_tab[n];
            pe->key = p->pool;
            pe->reported = 0;
            pe->dev = d->pub.id;
        } else
            pe = &rp->pool_tab[*v - 1];
    }
    rp->last_pool = pe; /* valid until the next new pool or removal, made here only */
    rp->cur_pool_fresh = fresh;
    if (!fresh && pe->dev != d->pub.id && !(d = dev_get(rp, pe->dev)))
        return nomem(rp); /* a pool belongs to the device it was first seen on */
    rp->cur_pool_num = (uint32_t)(pe - rp->pool_tab); /* (pe is gone after a DESTROY) */
    switch (p->op) {
    case GMP_POOL_RESERVED:
        d->pool_reported = d->pool_reported - pe->reported + p->value;
        pe->reported = p->value;
        break;
    case GMP_POOL_DESTROY:
        if (rp->npool_free == rp->cap_pool_free) { /* its number goes back for a new pool */
            size_t nc = rp->cap_pool_free ? rp->cap_pool_free * 2 : 64;
            uint32_t *nf = realloc(rp->pool_free, nc * sizeof *nf);
            if (!nf)
                return nomem(rp);
            rp->pool_free = nf;
            rp->cap_pool_free = nc;
        }
        rp->pool_free[rp->npool_free++] = rp->cur_pool_num;
        d->pool_reported -= pe->reported;
        gmp_omap_del(&rp->pools, p->pool);
        rp->last_pool = NULL;
        break;
    default: break;
    }
    update_reserved(d, rec->time_ns);
    DISPATCH_CBS(rp, pool_cbs, npool_cbs, rec, &d->pub);
    return GMP_OK;
}

/* A destroyed context (cudaDeviceReset, cuCtxDestroy, cuDevicePrimaryCtxReset) frees the memory
 * it owns without a free call: CUPTI reports no MEMORY2 release and the program makes no free.
 * What it owns is what the headers list (CUDA 13):
 *   cuda.h, cuCtxDestroy (lines 6287-6291): CUarray, CUmipmappedArray, ... and "memory allocations
 *   by cuMemAlloc(), cuMemAllocHost(), cuMemAllocManaged() and cuMemAllocPitch()"; and
 *   cuda.h 6299-6301: "cuCtxDestroy() will not destroy memory allocations by cuMemCreate(),
 *   cuMemAllocAsync() and cuMemAllocFromPoolAsync(). These memory allocations are not associated
 *   with any CUDA context and need to be destroyed explicitly."
 *   cuda_runtime_api.h, cudaDeviceReset (lines 306-311 and 317-318): the same list for the runtime,
 *   and "cudaDeviceReset() will not destroy memory allocations by cudaMallocAsync() and
 *   cudaMallocFromPoolAsync()".
 * So the live allocations of the device in the ordinary space (device, pitch/3D, arrays, managed,
 * static module variables) are freed here as if by a FREE record flagged GMP_MEMF_IMPLICIT, so the
 * outputs see ordinary free events; stream-ordered pool blocks (GMP_MEM_ASYNC_POOL, graph memory
 * included: it comes from the device's graph memory pool, not from the context) stay live, and so
 * does everything of the VMM family (cuMemCreate physical memory, its mappings and the address
 * reservations: none belongs to a context). Pools are not emptied: their reserve survives with
 * their blocks, and their own POOL records (trim, destroy) change it. Host memory and NVTX regions
 * are not matched (host memory has no device; a region lives inside another allocation). Assumes
 * the destroyed context is the device's only one (the primary context), as in almost every program.
 */
static gmp_err on_context_destroy(gmp_replay *rp, const gmp_rec *rec)
{
    int32_t dev = rec->u.resource.device;
    if (dev < 0)
        return GMP_OK;
    const gmp_livetab *m = &rp->live[SP_MEM];
    size_t n = 0, cap = 0;
    gmp_rec *frees = NULL;
    for (size_t i = 0; i < m->cap; i++) {
        if (!gmp_livetab_used(m, i))
            continue;
        const live_ent *e = &m->ent[i];
        const site_int *st = &rp->sites[e->site];
        if (st->pub.device != dev || st->pub.kind == GMP_MEM_ASYNC_POOL)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            gmp_rec *nf = realloc(frees, cap * sizeof *nf);
            if (!nf) {
                free(frees);
                return nomem(rp);
            }
            frees = nf;
        }
        gmp_rec *f = &frees[n++];
        memset(f, 0, sizeof *f);
        f->type = GMP_REC_FREE;
        f->time_ns = rec->time_ns;
        f->tid = rec->tid;
        f->u.mem.device = dev;
        f->u.mem.kind = st->pub.kind;
        f->u.mem.flags = GMP_MEMF_IMPLICIT;
        f->u.mem.address = e->key;
    }
    gmp_err ce = GMP_OK;
    for (size_t i = 0; i < n && ce == GMP_OK; i++)
        ce = on_free(rp, &frees[i]);
    free(frees);
    return ce;
}

static gmp_err on_sample(gmp_replay *rp, const gmp_rec *rec)
{
    const gmp_rec_sample *s = &rec->u.sample;
    dev_int *d = dev_get(rp, s->device);
    if (!d)
        return nomem(rp);
    rp->sum.samples++;
    gmp_replay_sample ev = {rec, &d->pub, 0, 0};
    if (s->process_used != UINT64_MAX)
        ev.used = s->process_used;
    else
        ev.used = s->total_bytes >= s->free_bytes ? s->total_bytes - s->free_bytes : 0;
    ev.unexplained = ev.used > d->pub.reserved ? ev.used - d->pub.reserved : 0;
    d->pub.samples++;
    d->pub.sample_used = ev.used;
    d->pub.sample_total = s->total_bytes;
    if (ev.unexplained > d->pub.max_unexplained) {
        d->pub.max_unexplained = ev.unexplained;
        d->pub.max_unexplained_time_ns = rec->time_ns;
    }
    DISPATCH(rp, sample, &ev);
    return GMP_OK;
}

static gmp_err on_oom(gmp_replay *rp, const gmp_rec *rec)
{
    const gmp_rec_oom *o = &rec->u.oom;
    dev_int *d = dev_get(rp, o->device);
    if (!d)
        return nomem(rp);
    d->pub.ooms++;
    rp->sum.ooms++;
    gmp_replay_oom ev = {rec->time_ns,    rec->tid,      o->device,    o->api,
                         o->range,        o->stack,      o->requested, d->pub.allocated,
                         d->pub.reserved, o->free_bytes, o->result};
    if (rp->nooms < rp->o.max_ooms) {
        if (!rp->ooms) {
            rp->ooms = calloc(rp->o.max_ooms, sizeof *rp->ooms);
            if (!rp->ooms)
                return nomem(rp);
        }
        rp->ooms[rp->nooms++] = ev;
    }
    DISPATCH(rp, oom, &ev);
    return GMP_OK;
}

/* The thread's entry, added when new; NULL when out of memory. Valid until the next new thread. */
static thread_ent *thread_get(gmp_replay *rp, uint32_t tid)
{
    int fresh;
    uint64_t *v = gmp_omap_put(&rp->threads, tid, &fresh);
    if (!v)
        return NULL;
    if (fresh) {
        if (gmp_array_cover((void **)&rp->thread_tab, &rp->cap_thread_tab, rp->nthread_tab,
                            sizeof *rp->thread_tab) < 0) {
            gmp_omap_del(&rp->threads, tid);
            return NULL;
        }
        memset(&rp->thread_tab[rp->nthread_tab], 0, sizeof *rp->thread_tab);
        *v = ++rp->nthread_tab;
    }
    return &rp->thread_tab[*v - 1];
}

static thread_ent *thread_find(gmp_replay *rp, uint32_t tid)
{
    uint64_t *v = gmp_omap_get(&rp->threads, tid);
    return v ? &rp->thread_tab[*v - 1] : NULL;
}

static gmp_err on_range(gmp_replay *rp, const gmp_rec *rec)
{
    uint32_t range = rec->u.rev.range;
    gmp_replay_range ev = {rec, GMP_REPLAY_MARK, rec->tid, range, rec->time_ns, rec->time_ns, 0, 0};
    switch (rec->type) {
    case GMP_REC_RANGE_PUSH: {
        thread_ent *t = thread_get(rp, rec->tid);
        if (!t)
            return nomem(rp);
        if (t->depth == t->cap) {
            uint32_t nc = t->cap ? t->cap * 2 : 16;
            open_range *ns = nc > t->cap ? realloc(t->st, nc * sizeof *ns) : NULL;
            if (!ns)
                return nomem(rp);
            t->st = ns;
            t->cap = nc;
        }
        t->st[t->depth].range = range;
        t->st[t->depth].begin = rec->time_ns;
        t->depth++;
        rp->sum.range_pushes++;
        ev.op = GMP_REPLAY_PUSH;
        ev.depth = t->depth;
        DISPATCH(rp, range, &ev);
        return GMP_OK;
    }
    case GMP_REC_RANGE_POP: {
        thread_ent *t = thread_find(rp, rec->tid);
        uint32_t k = t ? t->depth : 0;
        if (range) {
            while (k > 0 && t->st[k - 1].range != range)
                k--;
        }
        if (k == 0) {
            rp->sum.unmatched_pops++;
            return GMP_OK;
        }
        /* close what is above the matched range (implicitly), then the range itself */
        ev.op = GMP_REPLAY_POP;
        while (t->depth >= k) {
            open_range o = t->st[t->depth - 1];
            t->depth--;
            ev.range = o.range;
            ev.begin_ns = o.begin;
            ev.depth = t->depth;
            ev.implicit = t->depth >= k;
            if (ev.implicit)
                rp->sum.implicit_pops++;
            DISPATCH(rp, range, &ev);
            if (t->depth == 0)
                break;
        }
        return GMP_OK;
    }
    case GMP_REC_RANGE_START: {
        int fresh;
        uint64_t *v = gmp_omap_put(&rp->handles, rec->u.rev.handle, &fresh);
        if (!v)
            return nomem(rp);
        if (fresh) { /* a free entry, else a new one */
            if (rp->nhandle_free)
                *v = (uint64_t)rp->handle_free[--rp->nhandle_free] + 1;
            else if (rp->nhandle_tab < UINT32_MAX &&
                     gmp_array_cover((void **)&rp->handle_tab, &rp->cap_handle_tab, rp->nhandle_tab,
                                     sizeof *rp->handle_tab) == 0)
                *v = ++rp->nhandle_tab;
            else {
                gmp_omap_del(&rp->handles, rec->u.rev.handle);
                return nomem(rp);
            }
        }
        handle_ent *h = &rp->handle_tab[*v - 1];
        h->range = range;
        h->begin = rec->time_ns;
        h->tid = rec->tid;
        rp->sum.range_starts++;
        ev.op = GMP_REPLAY_START;
        DISPATCH(rp, range, &ev);
        return GMP_OK;
    }
    case GMP_REC_RANGE_END: {
        uint64_t *v = gmp_omap_get(&rp->handles, rec->u.rev.handle);
        if (!v) {
            rp->sum.unmatched_ends++;
            return GMP_OK;
        }
        uint32_t i = (uint32_t)(*v - 1);
        if (rp->nhandle_free == rp->cap_handle_free) { /* its entry goes back for a new handle */
            size_t nc = rp->cap_handle_free ? rp->cap_handle_free * 2 : 64;
            uint32_t *nf = realloc(rp->handle_free, nc * sizeof *nf);
            if (!nf)
                return nomem(rp);
            rp->handle_free = nf;
            rp->cap_handle_free = nc;
        }
        rp->handle_free[rp->nhandle_free++] = i;
        ev.op = GMP_REPLAY_END;
        ev.range = rp->handle_tab[i].range;
        ev.begin_ns = rp->handle_tab[i].begin;
        gmp_omap_del(&rp->handles, rec->u.rev.handle);
        DISPATCH(rp, range, &ev);
        return GMP_OK;
    }
    default: /* MARK */ DISPATCH(rp, range, &ev); return GMP_OK;
    }
}

static gmp_err on_notice(gmp_replay *rp, const gmp_rec *rec)
{
    rp->sum.notices++;
    if (rp->nnotices >= rp->o.max_notices)
        return GMP_OK;
    if (!rp->notices) {
        rp->notices = calloc(rp->o.max_notices, sizeof *rp->notices);
        if (!rp->notices)
            return nomem(rp);
    }
    const gmp_rec_notice *n = &rec->u.notice;
    char *s = gmp_str_dup(n->message);
    if (!s)
        return nomem(rp);
    notice *nt = &rp->notices[rp->nnotices++];
    nt->msg = s;
    nt->severity = n->severity;
    nt->time_ns = rec->time_ns;
    return GMP_OK;
}

static void finish(gmp_replay *rp)
{
    for (size_t i = 0; i < rp->nsites; i++) {
        site_int *s = &rp->sites[i];
        const dev_int *d = s->dev;
        if (!is_dev_kind(s->pub.kind) || d->epoch == 0) {
            s->pub.peak_bytes = s->pub.peak_count = 0;
        } else if (s->epoch == d->epoch) {
            s->pub.peak_bytes = s->snap_bytes;
            s->pub.peak_count = s->snap_count;
        } else {
            s->pub.peak_bytes = s->pub.live_bytes;
            s->pub.peak_count = s->pub.live_count;
        }
    }
    const gmp_reader_stats *st = gmp_reader_get_stats(rp->r);
    rp->sum.lost_events = st->lost_events;
    rp->sum.late_events = st->late_events;
    rp->sum.truncated = st->truncated;
    rp->sum.complete =
        gmp_reader_completeness(rp->r, rp->sum.completeness, sizeof rp->sum.completeness);
}

/* The live-table lookups of ALLOC and FREE miss the cache once the live set outgrows it (tens of
 * thousands of allocations): their keys are addresses, hashed. The reader has the next events
 * decoded already (gmp_reader_peek), so the table is fetched ahead of use in two steps: the
 * slot descriptors of the event PF_META events ahead, then, PF_ENT events ahead (when the
 * descriptors have arrived), its entry. The hash is computed once, at the first step, and kept in
 * a small ring under the number the event will have when the reader returns it; a mismatch (a
 * definition returned in between) only loses the hint. */

static inline void prefetch_live(gmp_replay *rp)
{
    uint64_t seq = ++rp->pf_seq; /* the number of the record just returned */
    if (rp->nlive < PF_MIN && rp->pools.n < PF_MIN)
        return; /* tables this small stay in the caches: looking ahead only costs */
    unsigned type;
    const void *p = gmp_reader_peek(rp->r, PF_META, &type);
    if (type == GMP_REC_ALLOC || type == GMP_REC_FREE) {
        const gmp_rec_mem *m = p;
        if (!(m->flags & GMP_MEMF_FAILED)) {
            int sp = space_of(kind_slot(m->kind));
            uint64_t h = gmp_livetab_hash(sp == SP_VMM_PHYS ? m->handle : m->address);
            gmp_livetab_prefetch_meta(&rp->live[sp], h);
            rp->pf[(seq + PF_META) % PF_RING] = (pf_hint){seq + PF_META, h, sp};
        }
    } else if (type == GMP_REC_POOL && rp->pools.cap) {
        /* a POOL record's pool: its slot in the map, fetched in one step; the table of a trace
         * with many segments (a PyTorch snapshot: a pool per segment) is large */
        const gmp_rec_pool *pr = p;
        rp->pool_ahead = pr->pool;
        rp->pool_ahead_seq = seq;
        gmp_omap_prefetch(&rp->pools, pr->pool);
    }
    const pf_hint *ph = &rp->pf[(seq + PF_ENT) % PF_RING];
    if (ph->seq == seq + PF_ENT)
        gmp_livetab_prefetch(&rp->live[ph->space], ph->h);
}

/* CPUs this process may run on (its affinity mask), at least 1. */
static int cpus_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

static int is_definition(unsigned type)
{
    return type >= GMP_REC_HEADER && type <= GMP_REC_RANGE;
}

gmp_err gmp_replay_run(gmp_replay *rp)
{
    if (!rp || rp->ran)
        return GMP_ERR_ARG;
    rp->ran = 1;
    /* reading (zstd, decoding, the time-order merge) is about half of a replay's work: in a
     * second thread it overlaps with the rest, once the file is large enough to pay for the
     * thread (READAHEAD_MIN_BYTES) */
    const gmp_reader_stats *rs = gmp_reader_get_stats(rp->r);
    if (rp->o.threads != 1 && cpus_available() > 1 &&
        (!rs->file_bytes || rs->file_bytes > READAHEAD_MIN_BYTES))
        gmp_reader_readahead(rp->r, 0);
    DISPATCH0(rp, begin);
    const gmp_rec *rec;
    gmp_err e;
    while ((e = gmp_reader_next(rp->r, &rec)) == GMP_OK) {
        unsigned type = rec->type;
        prefetch_live(rp);
        if (is_definition(type)) {
            if (type == GMP_REC_HEADER)
                continue;
            if (type == GMP_REC_DEVICE) {
                dev_int *d = dev_get(rp, (int32_t)rec->u.device.id);
                if (!d)
                    return nomem(rp);
                d->pub.def = gmp_reader_device(rp->r, rec->u.device.id);
            }
            DISPATCH(rp, def, rec);
            continue;
        }
        if (type != GMP_REC_END)
            rp->sum.events++;
        if (type != GMP_REC_END && type != GMP_REC_LOST) {
            if (!rp->sum.first_ns || rec->time_ns < rp->sum.first_ns)
                rp->sum.first_ns = rec->time_ns;
            if (rec->time_ns > rp->sum.last_ns)
                rp->sum.last_ns = rec->time_ns;
        }
        gmp_err ce = GMP_OK;
        switch (type) {
        case GMP_REC_ALLOC: ce = on_alloc(rp, rec); break;
        case GMP_REC_FREE: ce = on_free(rp, rec); break;
        case GMP_REC_RANGE_PUSH:
        case GMP_REC_RANGE_POP:
        case GMP_REC_RANGE_START:
        case GMP_REC_RANGE_END:
        case GMP_REC_MARK: ce = on_range(rp, rec); break;
        case GMP_REC_POOL: ce = on_pool(rp, rec); break;
        case GMP_REC_SAMPLE: ce = on_sample(rp, rec); break;
        case GMP_REC_OOM: ce = on_oom(rp, rec); break;
        case GMP_REC_NOTICE:
            ce = on_notice(rp, rec);
            if (ce == GMP_OK)
                DISPATCH(rp, event, rec);
            break;
        case GMP_REC_RESOURCE:
            if (rec->u.resource.op == GMP_RES_CONTEXT_DESTROY)
                ce = on_context_destroy(rp, rec);
            if (ce == GMP_OK)
                DISPATCH(rp, event, rec);
            break;
        default: DISPATCH(rp, event, rec); break;
        }
        if (ce != GMP_OK)
            return ce;
    }
    if (e != GMP_END) {
        const char *m = gmp_reader_error(rp->r);
        return gmp_replay_fail(rp, e, "%s", m && *m ? m : gmp_err_str(e));
    }
    finish(rp);
    DISPATCH0(rp, end);
    return GMP_OK;
}

/* ---- categories (gmp_frames.h) ---- */

#define CAT_FRAMES 128 /* frames of a stack that gmp_replay_category looks at, innermost first */
/* nodecat entries: the facts (gmp_frame_facts_memo) of the node's own frame, those of the frames
 * from the node outwards (ORed), the number of those frames (capped), and a known bit */
#define NODE_KNOWN (1u << 31)
#define NODE_OWN_SHIFT 8
#define NODE_LEN_SHIFT 16
#define NODE_LEN_MAX 0x7fffu
#define NODE_ALL 0xffu

/* The range path's names, innermost first, joined by '|' (at most n - 1 bytes). */
static gmp_str range_names(const gmp_reader *r, uint32_t range, char *path, size_t n)
{
    size_t pl = 0;
    for (uint32_t id = range, d = 0; id && d < 64; d++) { /* components, innermost first */
        const gmp_rec_range *x = gmp_reader_range(r, id);
        if (!x)
            break;
        gmp_str nm = gmp_reader_string(r, x->name);
        if (pl + nm.len + 1 < n) {
            if (pl)
                path[pl++] = '|';
            memcpy(path + pl, nm.ptr, nm.len);
            pl += nm.len;
        }
        id = x->parent;
    }
    return (gmp_str){path, (uint32_t)pl};
}

/* The facts of one stack node's frame as the pass knows it: Python frames by name and file (kept
 * per pair of string ids), native frames by their module only. */
static unsigned node_facts(gmp_replay *rp, const gmp_rec_stack *s)
{
    gmp_frame_info fi;
    memset(&fi, 0, sizeof fi);
    if (s->kind == GMP_FRAME_PYTHON) {
        uint64_t key = (uint64_t)s->function << 32 | s->file;
        uint64_t *v = gmp_omap_get(&rp->pyframes, key);
        if (v)
            return (unsigned)(*v - 1);
        fi.function = gmp_reader_string(rp->r, s->function);
        fi.file = gmp_reader_string(rp->r, s->file);
        /* not through the memo of texts: the pair of string ids is the key already (the memo
         * would hash and copy the texts of each pair once more, for no hit) */
        unsigned f = gmp_frame_facts_memo(NULL, &fi);
        int fresh;
        if ((v = gmp_omap_put(&rp->pyframes, key, &fresh)) != NULL) /* else: computed again */
            *v = (uint64_t)f + 1;
        return f;
    }
    if (s->kind == GMP_FRAME_NATIVE) {
        size_t nmod = gmp_reader_module_count(rp->r);
        for (size_t i = 0; i < nmod; i++) {
            const gmp_rec_module *m = gmp_reader_module_at(rp->r, i);
            if (m && s->address >= m->lo && s->address - m->lo < m->size) {
                fi.module = m->path;
                break;
            }
        }
    }
    return gmp_frame_facts_memo(rp->fmemo, &fi);
}

/* The facts of the first CAT_FRAMES frames of stack, frame by frame. */
static unsigned stack_facts_direct(gmp_replay *rp, uint32_t stack)
{
    unsigned f = 0;
    size_t k = 0;
    for (uint32_t id = stack; id && k < CAT_FRAMES; k++) {
        const gmp_rec_stack *s = gmp_reader_stack(rp->r, id);
        if (!s)
            break;
        f |= node_facts(rp, s);
        if (s->parent == id)
            break;
        id = s->parent;
    }
    return f & NODE_ALL;
}

/* The nodecat entry of stack (NODE_*), computed for the nodes from it outwards that are not known
 * yet; 0 when the cache cannot hold it (out of memory, or deeper than CAT_FRAMES without a known
 * node). */
static uint32_t node_entry(gmp_replay *rp, uint32_t stack)
{
    size_t nmod = gmp_reader_module_count(rp->r);
    if (nmod != rp->nodecat_mods) { /* a module defined since: native frames may say more */
        if (rp->nodecat)
            memset(rp->nodecat, 0, rp->nodecat_cap * sizeof *rp->nodecat);
        rp->nodecat_mods = nmod;
    }
    (void)gmp_array_cover((void **)&rp->nodecat, &rp->nodecat_cap, gmp_reader_stack_count(rp->r),
                          sizeof *rp->nodecat);
    /* the nodes from stack outwards up to the first known one (or the outermost) */
    uint32_t chain[CAT_FRAMES + 1];
    const gmp_rec_stack *cs[CAT_FRAMES + 1];
    size_t c = 0;
    uint32_t base = 0; /* the known node's entry */
    for (uint32_t id = stack; id;) {
        uint32_t ix = gmp_reader_stack_index(rp->r, id);
        const gmp_rec_stack *s = ix ? gmp_reader_stack(rp->r, id) : NULL;
        if (!s)
            break;
        if (ix >= rp->nodecat_cap)
            return 0;
        if (rp->nodecat[ix] & NODE_KNOWN) {
            base = rp->nodecat[ix];
            break;
        }
        if (c == CAT_FRAMES + 1)
            return 0;
        chain[c] = ix;
        cs[c++] = s;
        if (s->parent == id)
            break;
        id = s->parent;
    }
    for (size_t k = c; k-- > 0;) {
        unsigned own = node_facts(rp, cs[k]) & NODE_ALL;
        uint32_t len = ((base >> NODE_LEN_SHIFT) & NODE_LEN_MAX) + 1;
        if (len > NODE_LEN_MAX)
            len = NODE_LEN_MAX;
        base =
            NODE_KNOWN | len << NODE_LEN_SHIFT | own << NODE_OWN_SHIFT | ((own | base) & NODE_ALL);
        rp->nodecat[chain[k]] = base;
    }
    return base;
}

gmp_category gmp_replay_category(gmp_replay *rp, uint32_t stack, uint32_t range)
{
    char path[1024];
    unsigned f = 0;
    if (stack) {
        uint32_t e = node_entry(rp, stack);
        if (e && ((e >> NODE_LEN_SHIFT) & NODE_LEN_MAX) <= CAT_FRAMES)
            f = e & NODE_ALL;
        else /* deeper than CAT_FRAMES (only its innermost frames count), or not kept */
            f = stack_facts_direct(rp, stack);
    }
    return gmp_frames_category_of(f, range_names(rp->r, range, path, sizeof path));
}

unsigned gmp_replay_frame_facts(gmp_replay *rp, uint32_t stack)
{
    uint32_t e = stack ? node_entry(rp, stack) : 0;
    if (e)
        return (e >> NODE_OWN_SHIFT) & NODE_ALL;
    const gmp_rec_stack *s = stack ? gmp_reader_stack(rp->r, stack) : NULL;
    return s ? node_facts(rp, s) & NODE_ALL : 0; /* no frame: no rule matches */
}

/* ---- queries ---- */

int gmp_replay_pool_ahead(const gmp_replay *rp, uint64_t *pool)
{
    if (!rp->pf_seq || rp->pool_ahead_seq != rp->pf_seq)
        return 0;
    *pool = rp->pool_ahead;
    return 1;
}

uint32_t gmp_replay_pool_number(const gmp_replay *rp, int *fresh)
{
    if (fresh)
        *fresh = rp->cur_pool_fresh;
    return rp->cur_pool_num;
}

gmp_reader *gmp_replay_reader(const gmp_replay *rp)
{
    return rp->r;
}

const gmp_replay_summary *gmp_replay_get_summary(const gmp_replay *rp)
{
    return &rp->sum;
}

size_t gmp_replay_device_count(const gmp_replay *rp)
{
    return rp->ndevs;
}

const gmp_replay_device *gmp_replay_device_at(const gmp_replay *rp, size_t i)
{
    return i < rp->ndevs ? &rp->devs[i]->pub : NULL;
}

const gmp_replay_device *gmp_replay_device_find(const gmp_replay *rp, int32_t id)
{
    for (size_t i = 0; i < rp->ndevs; i++)
        if (rp->devs[i]->pub.id == id)
            return &rp->devs[i]->pub;
    return NULL;
}

size_t gmp_replay_site_count(const gmp_replay *rp)
{
    return rp->nsites;
}

const gmp_replay_site *gmp_replay_site_at(const gmp_replay *rp, size_t i)
{
    return i < rp->nsites ? &rp->sites[i].pub : NULL;
}

size_t gmp_replay_oom_count(const gmp_replay *rp)
{
    return rp->nooms;
}

const gmp_replay_oom *gmp_replay_oom_at(const gmp_replay *rp, size_t i)
{
    return i < rp->nooms ? &rp->ooms[i] : NULL;
}

size_t gmp_replay_notice_count(const gmp_replay *rp)
{
    return rp->nnotices;
}

const char *gmp_replay_notice_at(const gmp_replay *rp, size_t i, uint32_t *severity,
                                 uint64_t *time_ns)
{
    if (i >= rp->nnotices)
        return NULL;
    if (severity)
        *severity = rp->notices[i].severity;
    if (time_ns)
        *time_ns = rp->notices[i].time_ns;
    return rp->notices[i].msg;
}

gmp_err gmp_replay_live_foreach(const gmp_replay *rp,
                                gmp_err (*fn)(void *ctx, const gmp_replay_alloc *a), void *ctx)
{
    gmp_replay_alloc a;
    for (int sp = 0; sp < NSPACE; sp++) {
        const gmp_livetab *m = &rp->live[sp];
        for (size_t i = 0; i < m->cap; i++) {
            if (!gmp_livetab_used(m, i))
                continue;
            fill_alloc(rp, sp, &m->ent[i], &a);
            gmp_err e = fn(ctx, &a);
            if (e != GMP_OK)
                return e;
        }
    }
    return GMP_OK;
}

size_t gmp_replay_stack_frames(const gmp_replay *rp, uint32_t stack, gmp_replay_frame *out,
                               size_t max)
{
    size_t n = 0;
    size_t nmod = gmp_reader_module_count(rp->r);
    for (uint32_t id = stack; id && n < 65536;) {
        const gmp_rec_stack *s = gmp_reader_stack(rp->r, id);
        if (!s)
            break;
        if (n < max) {
            gmp_replay_frame *f = &out[n];
            memset(f, 0, sizeof *f);
            f->kind = s->kind;
            if (s->kind == GMP_FRAME_NATIVE) {
                f->address = s->address;
                for (size_t i = 0; i < nmod; i++) {
                    const gmp_rec_module *m = gmp_reader_module_at(rp->r, i);
                    if (m && s->address >= m->lo && s->address - m->lo < m->size) {
                        f->module = m;
                        f->offset = s->address - m->base;
                        break;
                    }
                }
            } else {
                f->function = gmp_reader_string(rp->r, s->function);
                f->file = gmp_reader_string(rp->r, s->file);
                f->line = s->line;
            }
        }
        n++;
        if (s->parent == id)
            break;
        id = s->parent;
    }
    return n;
}
