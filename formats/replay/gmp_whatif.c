/* gmp_whatif: the replay of a recording's tensor allocations through caching-allocator models
 * (gmp_whatif.h). One open-addressing map per device from a tensor's recorded address to the
 * block id of each config's model; it holds only the live tensors. */
#include "gmp_whatif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_torch_layout.h"
#include "gmp_trace.h"

#define NOID UINT32_MAX

typedef struct dev {
    int present;
    gmp_cca **models; /* ncfg; NULL: not modelled */
    uint64_t *keys;   /* address + 1; 0 = empty slot */
    uint32_t *ids;    /* cap * ncfg */
    size_t cap, used;
} dev;

static size_t slot_of(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

static int grow(dev *d, size_t ncfg)
{
    size_t ncap = d->cap ? d->cap * 2 : 1024;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    uint32_t *ni = malloc(ncap * ncfg * sizeof *ni);
    if (!nk || !ni) {
        free(nk);
        free(ni);
        return -1;
    }
    for (size_t i = 0; i < d->cap; i++) {
        if (!d->keys[i])
            continue;
        size_t s = slot_of(d->keys[i], ncap);
        while (nk[s])
            s = (s + 1) & (ncap - 1);
        nk[s] = d->keys[i];
        memcpy(ni + s * ncfg, d->ids + i * ncfg, ncfg * sizeof *ni);
    }
    free(d->keys);
    free(d->ids);
    d->keys = nk;
    d->ids = ni;
    d->cap = ncap;
    return 0;
}

/* The slot of address a, or where it would go (cap > used always). */
static size_t find(const dev *d, uint64_t a)
{
    uint64_t k = a + 1;
    size_t s = slot_of(k, d->cap);
    while (d->keys[s] && d->keys[s] != k)
        s = (s + 1) & (d->cap - 1);
    return s;
}

/* Deletion with backward shift, so that no tombstone lengthens the probes. */
static void erase(dev *d, size_t s, size_t ncfg)
{
    size_t i = s;
    for (;;) {
        d->keys[i] = 0;
        size_t j = i;
        for (;;) {
            j = (j + 1) & (d->cap - 1);
            if (!d->keys[j])
                return;
            size_t h = slot_of(d->keys[j], d->cap);
            /* move j to i unless h lies cyclically in (i, j] */
            if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
                continue;
            d->keys[i] = d->keys[j];
            memcpy(d->ids + i * ncfg, d->ids + j * ncfg, ncfg * sizeof *d->ids);
            i = j;
            break;
        }
    }
}

/* Exactly the main pool's API: blocks of a CUDA graph's private pool or a MemPool carry
 * "CUDACachingAllocator.malloc (private pool A,B)" and are left out (not modelled). */
static int is_cca(const gmp_reader *r, uint32_t api, const char *what)
{
    gmp_str s = gmp_reader_string(r, api);
    size_t n = strlen(what);
    return s.ptr && s.len == n && memcmp(s.ptr, what, n) == 0;
}

/* A stream-ordered allocation (or its free) that stands for a tensor: on a device whose
 * recording has no caching-allocator tensor (PyTorch's cudaMallocAsync backend calls
 * cudaMallocAsync once per tensor: c10/cuda/CUDAMallocAsyncAllocator.cpp, mallocAsync). */
static int is_async_api(const gmp_reader *r, uint32_t api, int is_alloc)
{
    return is_alloc ? is_cca(r, api, "cudaMallocAsync") || is_cca(r, api, "cudaMallocFromPoolAsync")
                    : is_cca(r, api, "cudaFreeAsync");
}

static int async_tensor(const gmp_reader *r, const gmp_rec_mem *m, int is_alloc,
                        const gmp_whatif_recorded *recorded)
{
    return recorded && m->device >= 0 && m->device < GMP_WHATIF_MAX_DEVICES &&
           !recorded[m->device].cca_allocs && is_async_api(r, m->api, is_alloc);
}

/* ---- the reserve over time (gmp_whatif_series) ---- */

static gmp_whatif_series *series_new(void)
{
    gmp_whatif_series *s = calloc(1, sizeof *s);
    if (s && !(s->max = malloc(GMP_WHATIF_SERIES_BUCKETS * sizeof *s->max))) {
        free(s);
        return NULL;
    }
    return s;
}

void gmp_whatif_series_free(gmp_whatif_series *s)
{
    if (s)
        free(s->max);
    free(s);
}

/* The model held `before` until time t, then `after`. */
static void series_add(gmp_whatif_series *s, uint64_t t, uint64_t before, uint64_t after)
{
    if (s->n == 0) {
        s->t0_ns = t;
        s->width_ns = 1024;
        s->max[0] = before;
        s->n = 1;
    }
    uint64_t i = t > s->t0_ns ? (t - s->t0_ns) / s->width_ns : 0;
    while (i >= GMP_WHATIF_SERIES_BUCKETS) { /* merge pairs: the width doubles */
        size_t k = 0;
        for (; 2 * k < s->n; k++)
            s->max[k] = 2 * k + 1 < s->n && s->max[2 * k + 1] > s->max[2 * k] ? s->max[2 * k + 1]
                                                                              : s->max[2 * k];
        s->n = k;
        s->width_ns *= 2;
        i = (t - s->t0_ns) / s->width_ns;
    }
    for (; s->n <= i; s->n++) /* buckets nothing happened in hold what was reserved */
        s->max[s->n] = before;
    if (after > s->max[i])
        s->max[i] = after;
    if (after > s->peak)
        s->peak = after;
}

uint64_t gmp_whatif_series_max(const gmp_whatif_series *s, uint64_t t0, uint64_t t1)
{
    if (!s || !s->n || t1 < s->t0_ns || t1 < t0)
        return 0;
    uint64_t a = t0 > s->t0_ns ? (t0 - s->t0_ns) / s->width_ns : 0;
    uint64_t b = (t1 - s->t0_ns) / s->width_ns;
    if (a >= s->n)
        return s->max[s->n - 1];
    if (b >= s->n)
        b = s->n - 1;
    uint64_t m = 0;
    for (uint64_t i = a; i <= b; i++)
        if (s->max[i] > m)
            m = s->max[i];
    return m;
}

void gmp_whatif_free(gmp_whatif *w)
{
    for (size_t i = 0; i < w->ndevices; i++) {
        free(w->devices[i].rows);
        gmp_whatif_series_free(w->devices[i].series);
    }
    free(w->devices);
    memset(w, 0, sizeof *w);
}

gmp_err gmp_whatif_scan(gmp_reader *r, gmp_whatif_recorded *rec, char *msg, size_t msglen)
{
    return gmp_whatif_scan_series(r, rec, NULL, msg, msglen);
}

gmp_err gmp_whatif_scan_series(gmp_reader *r, gmp_whatif_recorded *rec, gmp_whatif_series **series,
                               char *msg, size_t msglen)
{
    memset(rec, 0, GMP_WHATIF_MAX_DEVICES * sizeof *rec);
    if (series)
        memset(series, 0, GMP_WHATIF_MAX_DEVICES * sizeof *series);
    uint64_t *cur = calloc(GMP_WHATIF_MAX_DEVICES, sizeof *cur);
    dev pools; /* handle -> its reserved value, in two 32-bit halves */
    memset(&pools, 0, sizeof pools);
    if (!cur || grow(&pools, 2) != 0) {
        free(cur);
        snprintf(msg, msglen, "out of memory");
        return GMP_ERR_NOMEM;
    }
    gmp_err e;
    const gmp_rec *x;
    uint64_t first_ns = 0; /* the first timed record: neither a definition nor LOST/END */
    while ((e = gmp_reader_next(r, &x)) == GMP_OK) {
        if (!first_ns && x->type > GMP_REC_RANGE && x->type != GMP_REC_LOST &&
            x->type != GMP_REC_END)
            first_ns = x->time_ns;
        if (x->type == GMP_REC_OOM) {
            const gmp_rec_oom *o = &x->u.oom;
            if (o->device >= 0 && o->device < GMP_WHATIF_MAX_DEVICES &&
                !rec[o->device].oom_capacity && o->free_bytes)
                rec[o->device].oom_capacity = cur[o->device] + o->free_bytes;
            continue;
        }
        if (x->type == GMP_REC_ALLOC && !(x->u.mem.flags & GMP_MEMF_FAILED) &&
            x->u.mem.device >= 0 && x->u.mem.device < GMP_WHATIF_MAX_DEVICES) {
            if (is_cca(r, x->u.mem.api, "CUDACachingAllocator.malloc"))
                rec[x->u.mem.device].cca_allocs++;
            else if (is_async_api(r, x->u.mem.api, 1))
                rec[x->u.mem.device].async_allocs++;
            continue;
        }
        if (x->type != GMP_REC_POOL)
            continue;
        const gmp_rec_pool *p = &x->u.pool;
        if (p->device < 0 || p->device >= GMP_WHATIF_MAX_DEVICES)
            continue;
        gmp_whatif_recorded *d = &rec[p->device];
        d->present = 1;
        if ((pools.used + 1) * 2 > pools.cap && grow(&pools, 2) != 0) {
            e = GMP_ERR_NOMEM;
            break;
        }
        size_t s = find(&pools, p->pool);
        uint64_t old =
            pools.keys[s] ? ((uint64_t)pools.ids[2 * s] << 32 | pools.ids[2 * s + 1]) : 0;
        uint64_t was = cur[p->device];
        if (p->op == GMP_POOL_CREATE) {
            if (p->pool != GMP_TORCH_EXPANDABLE_POOL(p->device))
                d->segments++;
        } else if (p->op == GMP_POOL_RESERVED) {
            /* a map of the expandable segments (the import's expandable pool grows once per
             * segment_map; memory mapped before the window counts as one): PyTorch counts it in
             * num_device_alloc, as the model does (gmp_cca_stats.segments_alloc) */
            if (p->pool == GMP_TORCH_EXPANDABLE_POOL(p->device) && p->value > old)
                d->segments++;
            if (!pools.keys[s]) {
                pools.keys[s] = p->pool + 1;
                pools.used++;
            }
            pools.ids[2 * s] = (uint32_t)(p->value >> 32);
            pools.ids[2 * s + 1] = (uint32_t)p->value;
            cur[p->device] += p->value - old;
        } else if (p->op == GMP_POOL_DESTROY && pools.keys[s]) {
            cur[p->device] -= old;
            erase(&pools, s, 2);
            pools.used--;
        }
        if (series && p->op != GMP_POOL_CREATE) {
            gmp_whatif_series **ps = &series[p->device];
            if (!*ps && !(*ps = series_new())) {
                e = GMP_ERR_NOMEM;
                break;
            }
            series_add(*ps, x->time_ns, was, cur[p->device]);
        }
        if (cur[p->device] > d->peak_reserved)
            d->peak_reserved = cur[p->device];
    }
    free(cur);
    free(pools.keys);
    free(pools.ids);
    uint64_t t0 = gmp_trace_zero(gmp_reader_header(r), first_ns);
    for (size_t i = 0; i < GMP_WHATIF_MAX_DEVICES; i++)
        rec[i].t0_ns = t0;
    if (e == GMP_END)
        return GMP_OK;
    snprintf(msg, msglen, "%s", e == GMP_ERR_NOMEM ? "out of memory" : gmp_reader_error(r));
    return e;
}

gmp_err gmp_whatif_run(gmp_reader *r, const gmp_cca_config *cfgs, size_t ncfg, uint64_t capacity,
                       const gmp_whatif_recorded *recorded, gmp_whatif *out, char *msg,
                       size_t msglen)
{
    return gmp_whatif_run_series(r, cfgs, ncfg, capacity, recorded, SIZE_MAX, out, msg, msglen);
}

gmp_err gmp_whatif_run_series(gmp_reader *r, const gmp_cca_config *cfgs, size_t ncfg,
                              uint64_t capacity, const gmp_whatif_recorded *recorded,
                              size_t series_cfg, gmp_whatif *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    out->nconfigs = ncfg;
    dev *ds = NULL;
    size_t nd = 0;
    gmp_err e;
    const gmp_rec *rec;
    while ((e = gmp_reader_next(r, &rec)) == GMP_OK) {
        if (rec->type != GMP_REC_ALLOC && rec->type != GMP_REC_FREE)
            continue;
        const gmp_rec_mem *m = &rec->u.mem;
        int is_alloc = rec->type == GMP_REC_ALLOC;
        if (m->device < 0 || m->device >= GMP_TORCH_MAX_DEVICES ||
            (!is_cca(r, m->api,
                     is_alloc ? "CUDACachingAllocator.malloc" : "CUDACachingAllocator.free") &&
             !async_tensor(r, m, is_alloc, recorded)))
            continue;
        size_t di = (size_t)m->device;
        if (di >= nd) {
            dev *n = realloc(ds, (di + 1) * sizeof *n);
            gmp_whatif_device *o = realloc(out->devices, (di + 1) * sizeof *o);
            if (o)
                out->devices = o;
            if (!n || !o) {
                if (n)
                    ds = n;
                e = GMP_ERR_NOMEM;
                break;
            }
            ds = n;
            memset(ds + nd, 0, (di + 1 - nd) * sizeof *ds);
            memset(out->devices + nd, 0, (di + 1 - nd) * sizeof *o);
            nd = out->ndevices = di + 1;
        }
        dev *d = &ds[di];
        gmp_whatif_device *od = &out->devices[di];
        if (!d->present) {
            d->present = 1;
            od->id = m->device;
            const gmp_rec_device *rd = gmp_reader_device(r, (uint32_t)m->device);
            od->total_bytes = rd ? rd->total_bytes : 0;
            d->models = calloc(ncfg, sizeof *d->models);
            od->rows = calloc(ncfg, sizeof *od->rows);
            if (!d->models || !od->rows || grow(d, ncfg) != 0) {
                e = GMP_ERR_NOMEM;
                break;
            }
            uint64_t cap = capacity ? capacity : od->total_bytes;
            if (!cap && recorded)
                cap = recorded[di].oom_capacity;
            for (size_t c = 0; c < ncfg; c++) {
                gmp_cca_config cc = cfgs[c];
                cc.capacity = cap;
                d->models[c] = gmp_cca_create(&cc);
                od->rows[c].modelled = d->models[c] != NULL;
                od->rows[c].capacity = cap;
            }
            if (series_cfg < ncfg && d->models[series_cfg] && !(od->series = series_new())) {
                e = GMP_ERR_NOMEM;
                break;
            }
        }
        if (is_alloc) {
            if (m->flags & GMP_MEMF_FAILED) {
                /* the recorded OOM's request: each config tries it (nothing frees it later) */
            } else if (m->size == 0) {
                continue;
            }
            if ((d->used + 1) * 2 > d->cap && grow(d, ncfg) != 0) {
                e = GMP_ERR_NOMEM;
                break;
            }
            size_t s = (m->flags & GMP_MEMF_FAILED) ? (size_t)-1 : find(d, m->address);
            int fresh = s != (size_t)-1 && !d->keys[s];
            od->allocs++;
            for (size_t c = 0; c < ncfg; c++) {
                uint32_t id = NOID;
                gmp_cca *mo = d->models[c];
                if (mo && m->size) {
                    /* an address allocated again without its free: the old block is freed first */
                    if (s != (size_t)-1 && !fresh && d->ids[s * ncfg + c] != NOID)
                        gmp_cca_free(mo, d->ids[s * ncfg + c]);
                    gmp_whatif_series *ser = c == series_cfg ? od->series : NULL;
                    uint64_t before = ser ? gmp_cca_get_stats(mo)->reserved : 0;
                    int rc = gmp_cca_alloc(mo, m->size, m->stream, &id);
                    gmp_whatif_row *w = &od->rows[c];
                    if (ser)
                        series_add(ser, rec->time_ns, before, gmp_cca_get_stats(mo)->reserved);
                    if (rc == GMP_CCA_ENOMEM) {
                        e = GMP_ERR_NOMEM;
                        break;
                    }
                    if (rc != GMP_CCA_OK) {
                        id = NOID;
                        if (rc == GMP_CCA_OOM && !w->failed) {
                            w->failed = 1;
                            w->fail_time_ns = rec->time_ns;
                            w->fail_size = m->size;
                            w->fail_stack = m->stack;
                        }
                    } else {
                        const gmp_cca_stats *st = gmp_cca_get_stats(mo);
                        if (st->reserved == st->peak_reserved && st->reserved > w->peak_reserved)
                            w->frag_at_peak = st->reserved - st->allocated;
                        w->peak_reserved = st->peak_reserved;
                        w->peak_allocated = st->peak_allocated;
                        w->segments = st->segments_alloc;
                    }
                }
                if (s != (size_t)-1)
                    d->ids[s * ncfg + c] = id;
            }
            if (e != GMP_OK)
                break;
            if (fresh) {
                d->keys[s] = m->address + 1;
                d->used++;
            }
        } else {
            if (m->flags & GMP_MEMF_FAILED)
                continue;
            size_t s = find(d, m->address);
            if (!d->keys[s])
                continue; /* a tensor whose allocation the recording lacks */
            for (size_t c = 0; c < ncfg; c++)
                if (d->models[c] && d->ids[s * ncfg + c] != NOID)
                    gmp_cca_free(d->models[c], d->ids[s * ncfg + c]);
            erase(d, s, ncfg);
            d->used--;
        }
    }
    if (e == GMP_END)
        e = GMP_OK;
    else if (e == GMP_ERR_NOMEM)
        snprintf(msg, msglen, "out of memory");
    else if (e != GMP_OK)
        snprintf(msg, msglen, "%s", gmp_reader_error(r));
    for (size_t i = 0; i < nd; i++) {
        for (size_t c = 0; ds[i].models && c < ncfg; c++) {
            gmp_whatif_row *w = &out->devices[i].rows[c];
            w->fits =
                w->modelled && !w->failed && (!w->capacity || w->peak_reserved <= w->capacity);
            gmp_cca_destroy(ds[i].models[c]);
        }
        free(ds[i].models);
        free(ds[i].keys);
        free(ds[i].ids);
    }
    free(ds);
    if (e != GMP_OK)
        gmp_whatif_free(out);
    return e;
}

/* ---- both reserves for the views ---- */

void gmp_whatif_reserve_free(gmp_whatif_reserve *rs)
{
    gmp_whatif_free(&rs->w);
    for (size_t i = 0; rs->recorded && i < GMP_WHATIF_MAX_DEVICES; i++)
        gmp_whatif_series_free(rs->recorded[i]);
    free(rs->recorded);
    free(rs->rec);
    memset(rs, 0, sizeof *rs);
}

gmp_err gmp_whatif_reserve_of(const char *path, const gmp_cca_config *cfg, uint64_t capacity,
                              gmp_whatif_reserve *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    out->rec = calloc(GMP_WHATIF_MAX_DEVICES, sizeof *out->rec);
    out->recorded = calloc(GMP_WHATIF_MAX_DEVICES, sizeof *out->recorded);
    if (!out->rec || !out->recorded) {
        gmp_whatif_reserve_free(out);
        snprintf(msg, msglen, "out of memory");
        return GMP_ERR_NOMEM;
    }
    gmp_err e = GMP_OK;
    for (int pass = 0; pass < 2 && e == GMP_OK; pass++) {
        gmp_reader *r = NULL;
        if ((e = gmp_reader_open(&r, path, NULL)) != GMP_OK) {
            const char *m = gmp_reader_open_error();
            snprintf(msg, msglen, "%s", m && *m ? m : gmp_err_str(e));
            break;
        }
        e = pass == 0
                ? gmp_whatif_scan_series(r, out->rec, out->recorded, msg, msglen)
                : gmp_whatif_run_series(r, cfg, 1, capacity, out->rec, 0, &out->w, msg, msglen);
        gmp_reader_close(r);
    }
    if (e != GMP_OK)
        gmp_whatif_reserve_free(out);
    return e;
}

const gmp_whatif_series *gmp_whatif_reserve_replayed(const gmp_whatif_reserve *rs, int32_t id)
{
    if (!rs || id < 0 || (size_t)id >= rs->w.ndevices)
        return NULL;
    return rs->w.devices[id].series;
}

const gmp_whatif_series *gmp_whatif_reserve_recorded(const gmp_whatif_reserve *rs, int32_t id)
{
    if (!rs || !rs->recorded || id < 0 || id >= GMP_WHATIF_MAX_DEVICES)
        return NULL;
    return rs->recorded[id];
}
