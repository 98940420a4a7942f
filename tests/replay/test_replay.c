/* Replay tests: traces written with the writer (no thread, explicit times), replayed, and every
 * number checked exactly. Run all: test_replay; one: test_replay NAME (a cmocka filter). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_reader.h"
#include "gmp_replay.h"
#include "replay_tb.h"

/* ---- what the callbacks saw ---- */

typedef struct range_log {
    gmp_replay_range_op op;
    uint32_t tid, range, depth;
    uint64_t begin, end;
    int implicit;
} range_log;

typedef struct seen {
    int allocs, frees, peaks, pools, samples, ooms, events, defs, begins, ends;
    int status[8];
    uint64_t last_t;
    int out_of_order;
    size_t last_free_n;
    uint64_t last_free_bytes;
    range_log ranges[64];
    int nranges;
} seen;

static void see_time(seen *s, uint64_t t)
{
    if (t < s->last_t)
        s->out_of_order++;
    s->last_t = t;
}

static gmp_err cb_begin(void *ctx, gmp_replay *rp)
{
    ((seen *)ctx)->begins++;
    return GMP_OK;
}

static gmp_err cb_def(void *ctx, gmp_replay *rp, const gmp_rec *rec)
{
    ((seen *)ctx)->defs++;
    return GMP_OK;
}

static gmp_err cb_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    seen *s = ctx;
    s->allocs++;
    s->status[ev->status]++;
    see_time(s, ev->rec->time_ns);
    return GMP_OK;
}

static gmp_err cb_free(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    seen *s = ctx;
    s->frees++;
    s->status[ev->status]++;
    s->last_free_n = ev->nalloc;
    s->last_free_bytes = 0;
    for (size_t i = 0; i < ev->nalloc; i++)
        s->last_free_bytes += ev->alloc[i].size;
    see_time(s, ev->rec->time_ns);
    return GMP_OK;
}

static gmp_err cb_range(void *ctx, gmp_replay *rp, const gmp_replay_range *ev)
{
    seen *s = ctx;
    if (s->nranges < 64) {
        range_log *l = &s->ranges[s->nranges++];
        l->op = ev->op;
        l->tid = ev->tid;
        l->range = ev->range;
        l->depth = ev->depth;
        l->begin = ev->begin_ns;
        l->end = ev->end_ns;
        l->implicit = ev->implicit;
    }
    see_time(s, ev->end_ns);
    return GMP_OK;
}

static gmp_err cb_pool(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *d)
{
    ((seen *)ctx)->pools++;
    return GMP_OK;
}

static gmp_err cb_sample(void *ctx, gmp_replay *rp, const gmp_replay_sample *ev)
{
    ((seen *)ctx)->samples++;
    return GMP_OK;
}

static gmp_err cb_oom(void *ctx, gmp_replay *rp, const gmp_replay_oom *ev)
{
    ((seen *)ctx)->ooms++;
    return GMP_OK;
}

static gmp_err cb_peak(void *ctx, gmp_replay *rp, const gmp_replay_device *d, uint64_t t)
{
    seen *s = ctx;
    s->peaks++;
    assert_int_equal(d->peak_time_ns, t);
    assert_int_equal(d->peak_allocated, d->allocated);
    return GMP_OK;
}

static gmp_err cb_event(void *ctx, gmp_replay *rp, const gmp_rec *rec)
{
    ((seen *)ctx)->events++;
    return GMP_OK;
}

static gmp_err cb_end(void *ctx, gmp_replay *rp)
{
    ((seen *)ctx)->ends++;
    return GMP_OK;
}

static const gmp_replay_ops seen_ops = {cb_begin,  cb_def, cb_alloc, cb_free,  cb_range, cb_pool,
                                        cb_sample, cb_oom, cb_peak,  cb_event, cb_end};

typedef struct run {
    gmp_reader *r;
    gmp_replay *rp;
    seen s, s2;
} run;

/* Replays b's file with two identical outputs (both must see the same). opts: NULL for the
 * defaults; ra_batch: read-ahead asked for by the caller (0: not). */
static void replay_with(tb *b, run *x, const gmp_replay_opts *opts, size_t ra_batch)
{
    memset(x, 0, sizeof *x);
    assert_int_equal(gmp_reader_open(&x->r, b->path, NULL), GMP_OK);
    if (ra_batch)
        assert_int_equal(gmp_reader_readahead(x->r, ra_batch), GMP_OK);
    assert_int_equal(gmp_replay_new(&x->rp, x->r, opts), GMP_OK);
    assert_int_equal(gmp_replay_add(x->rp, &seen_ops, &x->s), GMP_OK);
    assert_int_equal(gmp_replay_add(x->rp, &seen_ops, &x->s2), GMP_OK);
    gmp_err e = gmp_replay_run(x->rp);
    if (e != GMP_OK)
        fprintf(stderr, "replay: %s\n", gmp_replay_error(x->rp));
    assert_int_equal(e, GMP_OK);
    assert_memory_equal(&x->s, &x->s2, sizeof x->s);
    assert_int_equal(x->s.begins, 1);
    assert_int_equal(x->s.ends, 1);
    assert_int_equal(x->s.out_of_order, 0);
    assert_true(gmp_replay_get_summary(x->rp)->complete);
}

/* Both replays saw and counted the same. */
static void same_replay(const run *a, const run *b)
{
    assert_memory_equal(&a->s, &b->s, sizeof a->s);
    assert_memory_equal(gmp_replay_get_summary(a->rp), gmp_replay_get_summary(b->rp),
                        sizeof(gmp_replay_summary));
    assert_int_equal(gmp_replay_device_count(a->rp), gmp_replay_device_count(b->rp));
    for (size_t i = 0; i < gmp_replay_device_count(a->rp); i++) {
        gmp_replay_device x = *gmp_replay_device_at(a->rp, i);
        gmp_replay_device y = *gmp_replay_device_at(b->rp, i);
        assert_int_equal(x.def != NULL, y.def != NULL);
        x.def = y.def = NULL; /* each reader has its own copy */
        assert_memory_equal(&x, &y, sizeof x);
    }
    assert_int_equal(gmp_replay_site_count(a->rp), gmp_replay_site_count(b->rp));
    for (size_t i = 0; i < gmp_replay_site_count(a->rp); i++)
        assert_memory_equal(gmp_replay_site_at(a->rp, i), gmp_replay_site_at(b->rp, i),
                            sizeof(gmp_replay_site));
}

/* Replays b's file as the tools do (x, kept for the checks), and checks that everything in the
 * calling thread, and read-ahead asked for by the caller in small chunks (with the replay's own
 * choice on or off), give the same. */
static void replay(tb *b, run *x)
{
    replay_with(b, x, NULL, 0);
    gmp_replay_opts one;
    memset(&one, 0, sizeof one);
    one.threads = 1;
    for (int m = 0; m < 3; m++) {
        run y;
        replay_with(b, &y, m == 2 ? NULL : &one, m ? 3 : 0);
        same_replay(x, &y);
        gmp_replay_free(y.rp);
        gmp_reader_close(y.r);
    }
}

static void run_done(tb *b, run *x)
{
    gmp_replay_free(x->rp);
    gmp_reader_close(x->r);
    unlink(b->path);
}

static const gmp_replay_device *dev(run *x, int32_t id)
{
    const gmp_replay_device *d = gmp_replay_device_find(x->rp, id);
    assert_non_null(d);
    return d;
}

/* Sum of a site field over the sites of a device and range (kind: any when UINT32_MAX). */
typedef enum { F_PEAK, F_PEAKN, F_LIVE, F_LIVEN, F_ALLOCS } site_field;

static uint64_t site_sum(run *x, int32_t device, uint32_t range, uint32_t kind, site_field f)
{
    uint64_t v = 0;
    for (size_t i = 0; i < gmp_replay_site_count(x->rp); i++) {
        const gmp_replay_site *s = gmp_replay_site_at(x->rp, i);
        if (s->device != device || s->range != range || (kind != UINT32_MAX && s->kind != kind))
            continue;
        switch (f) {
        case F_PEAK: v += s->peak_bytes; break;
        case F_PEAKN: v += s->peak_count; break;
        case F_LIVE: v += s->live_bytes; break;
        case F_LIVEN: v += s->live_count; break;
        case F_ALLOCS: v += s->allocs; break;
        }
    }
    return v;
}

#define ANY UINT32_MAX

/* ---- tests ---- */

/* Peaks per device, counts and leaks, with events from two threads interleaved in time. */
static void test_peaks(void **state)
{
    tb b;
    tb_open(&b, NULL);
    tb_device(&b, 0, "GPU-A", 80 * TB_GiB);
    tb_device(&b, 1, "GPU-B", 40 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    tb_alloc(&b, 0, 1000, 0, GMP_MEM_DEVICE, 0xA000, 100, m, 0, 0);
    tb_alloc(&b, 1, 2000, 1, GMP_MEM_DEVICE, 0xB000, 1000, m, 0, 0);
    tb_alloc(&b, 0, 3000, 0, GMP_MEM_DEVICE, 0xA100, 200, m, 0, 0);
    tb_free(&b, 0, 4000, 0, GMP_MEM_DEVICE, 0xA000, 0, f);
    tb_alloc(&b, 0, 5000, 0, GMP_MEM_DEVICE, 0xA200, 50, m, 0, 0);
    tb_alloc(&b, 1, 6000, 1, GMP_MEM_DEVICE, 0xB100, 500, m, 0, 0);
    tb_free(&b, 1, 7000, 1, GMP_MEM_DEVICE, 0xB000, 1000, f);
    tb_free(&b, 0, 8000, 0, GMP_MEM_DEVICE, 0xA100, 200, f);
    tb_close(&b);
    run x;
    replay(&b, &x);

    assert_int_equal(gmp_replay_device_count(x.rp), 2);
    const gmp_replay_device *d0 = dev(&x, 0), *d1 = dev(&x, 1);
    assert_non_null(d0->def);
    assert_int_equal(d0->def->name.len, 5);
    assert_memory_equal(d0->def->name.ptr, "GPU-A", 5);
    assert_int_equal(d0->peak_allocated, 300);
    assert_int_equal(d0->peak_time_ns, 3000);
    assert_int_equal(d0->peak_reserved, 300);
    assert_int_equal(d0->peak_reserved_time_ns, 3000);
    assert_int_equal(d0->allocs, 3);
    assert_int_equal(d0->frees, 2);
    assert_int_equal(d0->alloc_bytes, 350);
    assert_int_equal(d0->allocated, 50);
    assert_int_equal(d0->live_count, 1);
    assert_int_equal(d1->peak_allocated, 1500);
    assert_int_equal(d1->peak_time_ns, 6000);
    assert_int_equal(d1->allocs, 2);
    assert_int_equal(d1->frees, 1);
    assert_int_equal(d1->allocated, 500);
    assert_int_equal(d0->kind[GMP_MEM_DEVICE].peak_bytes, 300);

    const gmp_replay_summary *s = gmp_replay_get_summary(x.rp);
    assert_int_equal(s->alloc_records, 5);
    assert_int_equal(s->free_records, 3);
    assert_int_equal(s->first_ns, 1000);
    assert_int_equal(s->last_ns, 8000);
    assert_int_equal(s->events, 8); /* END excluded */
    assert_int_equal(s->unknown_frees, 0);
    assert_int_equal(x.s.allocs, 5);
    assert_int_equal(x.s.frees, 3);
    assert_int_equal(x.s.peaks, 4);  /* d0: 100, 300; d1: 1000, 1500 */
    assert_int_equal(x.s.defs, 4);   /* 2 DEVICE, 2 STRING (the HEADER is not passed) */
    assert_int_equal(x.s.events, 1); /* END */
    run_done(&b, &x);
}

/* The live set at the peak: allocations made and freed after the peak do not count, those freed
 * after it do; a later, lower maximum changes nothing; each device has its own peak. */
static void test_live_at_peak(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t r1 = tb_range(&b, "train/fwd"), r2 = tb_range(&b, "train/bwd");
    uint32_t r3 = tb_range(&b, "eval");
    tb_alloc(&b, 0, 10, 0, GMP_MEM_DEVICE, 0xA0, 100, m, r1, 0);
    tb_alloc(&b, 0, 20, 0, GMP_MEM_DEVICE, 0xB0, 200, m, r2, 0);
    tb_alloc(&b, 0, 30, 0, GMP_MEM_DEVICE, 0xC0, 300, m, r1, 0);  /* 600: first peak */
    tb_free(&b, 0, 40, 0, GMP_MEM_DEVICE, 0xA0, 0, f);            /* 500 */
    tb_alloc(&b, 1, 45, 1, GMP_MEM_DEVICE, 0x10A0, 10, m, r3, 0); /* device 1 */
    tb_alloc(&b, 0, 50, 0, GMP_MEM_DEVICE, 0xD0, 400, m, r2, 0);  /* 900: the peak */
    tb_free(&b, 0, 60, 0, GMP_MEM_DEVICE, 0xB0, 0, f);            /* 700: B freed after */
    tb_alloc(&b, 0, 70, 0, GMP_MEM_DEVICE, 0xE0, 150, m, r1, 0);  /* 850: made after */
    tb_free(&b, 0, 80, 0, GMP_MEM_DEVICE, 0xE0, 0, f);            /* 700: and freed */
    tb_alloc(&b, 0, 90, 0, GMP_MEM_DEVICE, 0xF0, 100, m, r3, 0);  /* 800: live at the end */
    tb_free(&b, 0, 100, 0, GMP_MEM_DEVICE, 0xC0, 0, f);           /* 500 */
    tb_free(&b, 1, 110, 1, GMP_MEM_DEVICE, 0x10A0, 0, f);
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    assert_int_equal(d0->peak_allocated, 900);
    assert_int_equal(d0->peak_time_ns, 50);
    assert_int_equal(site_sum(&x, 0, r1, ANY, F_PEAK), 300);
    assert_int_equal(site_sum(&x, 0, r1, ANY, F_PEAKN), 1);
    assert_int_equal(site_sum(&x, 0, r2, ANY, F_PEAK), 600);
    assert_int_equal(site_sum(&x, 0, r2, ANY, F_PEAKN), 2);
    assert_int_equal(site_sum(&x, 0, r3, ANY, F_PEAK), 0);
    assert_int_equal(site_sum(&x, 1, r3, ANY, F_PEAK), 10);
    assert_int_equal(site_sum(&x, 1, r3, ANY, F_PEAKN), 1);
    /* leaks: D (r2) and F (r3) on device 0, nothing on device 1 */
    assert_int_equal(d0->allocated, 500);
    assert_int_equal(d0->live_count, 2);
    assert_int_equal(site_sum(&x, 0, r2, ANY, F_LIVE), 400);
    assert_int_equal(site_sum(&x, 0, r3, ANY, F_LIVE), 100);
    assert_int_equal(site_sum(&x, 0, r1, ANY, F_LIVE), 0);
    assert_int_equal(site_sum(&x, 0, r1, ANY, F_ALLOCS), 3);
    assert_int_equal(dev(&x, 1)->allocated, 0);
    run_done(&b, &x);
}

/* Peak reached several times in a row by the same site (growth), then the same value again. */
static void test_peak_ties(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t r1 = tb_range(&b, "grow");
    for (int i = 0; i < 10; i++)
        tb_alloc(&b, 0, 100 + (uint64_t)i, 0, GMP_MEM_DEVICE, 0x1000 + (uint64_t)i * 0x100, 64, m,
                 r1, 0);
    for (int i = 0; i < 5; i++)
        tb_free(&b, 0, 200 + (uint64_t)i, 0, GMP_MEM_DEVICE, 0x1000 + (uint64_t)i * 0x100, 0, f);
    for (int i = 0; i < 5; i++) /* back to the same maximum: the first time stays the peak */
        tb_alloc(&b, 0, 300 + (uint64_t)i, 0, GMP_MEM_DEVICE, 0x9000 + (uint64_t)i * 0x100, 64, m,
                 0, 0);
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    assert_int_equal(d0->peak_allocated, 640);
    assert_int_equal(d0->peak_time_ns, 109);
    assert_int_equal(x.s.peaks, 10);
    assert_int_equal(site_sum(&x, 0, r1, ANY, F_PEAK), 640);
    assert_int_equal(site_sum(&x, 0, r1, ANY, F_PEAKN), 10);
    assert_int_equal(site_sum(&x, 0, 0, ANY, F_PEAK), 0);
    run_done(&b, &x);
}

/* Failed allocations, frees of unknown addresses, double frees, size-0 frees, duplicates from
 * activity records and allocations at a live address. */
static void test_anomalies(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    tb_mem failed = {0, GMP_MEM_DEVICE, GMP_MEMF_FAILED, m, 0, 0, 0, 1 * TB_GiB, 0, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 1, &failed);
    tb_alloc(&b, 0, 2, 0, GMP_MEM_DEVICE, 0xA000, 100, m, 0, 0);
    tb_free(&b, 0, 3, 0, GMP_MEM_DEVICE, 0xA000, 0, f); /* size from the live set */
    tb_free(&b, 0, 4, 0, GMP_MEM_DEVICE, 0xA000, 0, f); /* double free */
    tb_free(&b, 0, 5, 0, GMP_MEM_DEVICE, 0xDEAD, 0, f); /* never allocated */
    tb_mem ffail = {0, GMP_MEM_DEVICE, GMP_MEMF_FAILED, f, 0, 0, 0xBEEF, 0, 0, 0};
    tb_memrec(&b, 0, GMP_REC_FREE, 6, &ffail);
    tb_alloc(&b, 0, 7, 0, GMP_MEM_DEVICE, 0xB000, 64, m, 0, 0);
    tb_mem act = {0, GMP_MEM_DEVICE, GMP_MEMF_ACTIVITY, m, 0, 0, 0xB000, 64, 0, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 8, &act); /* the same allocation from an activity record */
    tb_alloc(&b, 0, 9, 0, GMP_MEM_DEVICE, 0xC000, 32, m, 0, 0);
    tb_alloc(&b, 0, 10, 0, GMP_MEM_DEVICE, 0xC000, 48, m, 0, 0); /* its free was lost */
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    const gmp_replay_summary *s = gmp_replay_get_summary(x.rp);
    assert_int_equal(d0->failed_allocs, 1);
    assert_int_equal(d0->failed_frees, 1);
    assert_int_equal(d0->double_frees, 1);
    assert_int_equal(d0->unknown_frees, 1);
    assert_int_equal(s->failed_allocs, 1);
    assert_int_equal(s->failed_frees, 1);
    assert_int_equal(s->double_frees, 1);
    assert_int_equal(s->unknown_frees, 1);
    assert_int_equal(s->duplicate_allocs, 1);
    assert_int_equal(s->replaced_allocs, 1);
    assert_int_equal(d0->allocs, 4); /* A, B, C, C' */
    assert_int_equal(d0->frees, 1);
    assert_int_equal(d0->allocated, 64 + 48);
    assert_int_equal(d0->peak_allocated, 112);
    assert_int_equal(d0->peak_time_ns, 10);
    assert_int_equal(x.s.status[GMP_REPLAY_FAILED], 2);
    assert_int_equal(x.s.status[GMP_REPLAY_DOUBLE_FREE], 1);
    assert_int_equal(x.s.status[GMP_REPLAY_UNKNOWN_FREE], 1);
    assert_int_equal(x.s.status[GMP_REPLAY_DUPLICATE], 1);
    assert_int_equal(x.s.status[GMP_REPLAY_REPLACED], 1);
    assert_int_equal(x.s.last_free_bytes, 0);
    run_done(&b, &x);
}

/* OOM: requested size, API, range and the replayed live bytes at that moment. */
static void test_oom(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc");
    uint32_t r = tb_range(&b, "train/step");
    tb_alloc(&b, 0, 100, 0, GMP_MEM_DEVICE, 0xA000, 3 * TB_GiB, m, r, 0);
    tb_mem failed = {0, GMP_MEM_DEVICE, GMP_MEMF_FAILED, m, r, 0, 0, 2 * TB_GiB, 0, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 200, &failed);
    tb_oom(&b, 0, 200, 0, m, 2 * TB_GiB, r, 0);
    tb_close(&b);
    run x;
    replay(&b, &x);
    assert_int_equal(gmp_replay_oom_count(x.rp), 1);
    const gmp_replay_oom *o = gmp_replay_oom_at(x.rp, 0);
    assert_int_equal(o->device, 0);
    assert_int_equal(o->time_ns, 200);
    assert_int_equal(o->requested, 2 * TB_GiB);
    assert_int_equal(o->live_bytes, 3 * TB_GiB);
    assert_int_equal(o->reserved_bytes, 3 * TB_GiB);
    assert_int_equal(o->api, m);
    assert_int_equal(o->range, r);
    assert_int_equal(o->free_bytes, TB_MiB);
    assert_int_equal(o->tid, 100);
    assert_int_equal(dev(&x, 0)->ooms, 1);
    assert_int_equal(dev(&x, 0)->failed_allocs, 1);
    assert_int_equal(gmp_replay_get_summary(x.rp)->ooms, 1);
    assert_int_equal(x.s.ooms, 1);
    run_done(&b, &x);
}

/* Stream-ordered pools: reserved = allocated outside pools + max(pools' reported reserved,
 * allocated from pools). */
static void test_pools(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t ma = tb_str(&b, "cudaMallocAsync"), fa = tb_str(&b, "cudaFreeAsync");
    const uint64_t P = 0x5000;
    tb_pool(&b, 0, 1, 0, GMP_POOL_CREATE, P, 0);
    tb_alloc(&b, 0, 2, 0, GMP_MEM_DEVICE, 0x1000, 100 * TB_MiB, m, 0, 0);
    tb_pool(&b, 0, 3, 0, GMP_POOL_RESERVED, P, 64 * TB_MiB);
    tb_mem a1 = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, ma, 0, 0, 0x2000, 32 * TB_MiB, P, 7};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 4, &a1);
    tb_mem a2 = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, ma, 0, 0, 0x3000, 48 * TB_MiB, P, 7};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 5, &a2);
    tb_pool(&b, 0, 6, 0, GMP_POOL_RESERVED, P, 96 * TB_MiB);
    tb_mem f1 = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, fa, 0, 0, 0x2000, 0, P, 7};
    tb_memrec(&b, 0, GMP_REC_FREE, 7, &f1);
    tb_pool(&b, 0, 8, 0, GMP_POOL_TRIM, P, 0);
    tb_pool(&b, 0, 8, 0, GMP_POOL_RESERVED, P, 64 * TB_MiB);
    tb_free(&b, 0, 9, 0, GMP_MEM_DEVICE, 0x1000, 0, f);
    tb_pool(&b, 0, 10, 0, GMP_POOL_DESTROY, P, 0);
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    assert_int_equal(d0->peak_allocated, 180 * TB_MiB);
    assert_int_equal(d0->peak_time_ns, 5);
    assert_int_equal(d0->peak_reserved, 196 * TB_MiB);
    assert_int_equal(d0->peak_reserved_time_ns, 6);
    assert_int_equal(d0->allocated, 48 * TB_MiB);
    assert_int_equal(d0->reserved, 48 * TB_MiB); /* the pool is gone: what is still allocated */
    assert_int_equal(d0->pool_reserved, 48 * TB_MiB);
    assert_int_equal(d0->kind[GMP_MEM_ASYNC_POOL].peak_bytes, 80 * TB_MiB);
    assert_int_equal(d0->kind[GMP_MEM_ASYNC_POOL].allocs, 2);
    assert_int_equal(d0->kind[GMP_MEM_ASYNC_POOL].frees, 1);
    assert_int_equal(d0->allocs, 3);
    assert_int_equal(x.s.pools, 6);
    run_done(&b, &x);
}

/* gmp_replay_pool_ahead: what an output hears during a callback is the pool of a POOL record it
 * gets within the next 16 events; it says nothing while few pools are known (no look-ahead),
 * then says it for most POOL records; the same with read-ahead. */
typedef struct ahead_seen {
    size_t n;                  /* callbacks so far */
    size_t npool;              /* POOL records */
    uint64_t pool_at[12000];   /* the pool of the POOL record at callback i, else 0 */
    size_t said;               /* hints */
    size_t said_at[12000];     /* callback index of each hint */
    uint64_t said_pool[12000]; /* its pool */
} ahead_seen;

static void ahead_note(ahead_seen *a, const gmp_replay *rp)
{
    uint64_t p = 0;
    if (gmp_replay_pool_ahead(rp, &p) && a->said < 12000) {
        a->said_at[a->said] = a->n;
        a->said_pool[a->said++] = p;
    }
    a->n++;
}

static gmp_err ahead_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    ahead_seen *a = ctx;
    if (a->n < 12000)
        a->pool_at[a->n] = 0;
    ahead_note(a, rp);
    return GMP_OK;
}

static gmp_err ahead_pool(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *d)
{
    ahead_seen *a = ctx;
    if (a->n < 12000)
        a->pool_at[a->n] = rec->u.pool.pool;
    a->npool++;
    ahead_note(a, rp);
    return GMP_OK;
}

static void test_pool_ahead(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc");
    enum { NP = 5000 };
    for (uint64_t i = 0; i < NP; i++) { /* a pool per segment, as in an imported snapshot */
        tb_pool(&b, 0, 10 + 2 * i, 0, GMP_POOL_RESERVED, 0x100000 + i * 0x1000, 2 * TB_MiB);
        tb_alloc(&b, 0, 11 + 2 * i, 0, GMP_MEM_DEVICE, 0x10000000 + i * 0x1000, 64, m, 0, 0);
    }
    tb_close(&b);
    static const gmp_replay_ops ops = {.alloc = ahead_alloc, .pool = ahead_pool};
    for (int ra = 0; ra < 2; ra++) {
        static ahead_seen a;
        memset(&a, 0, sizeof a);
        gmp_reader *r;
        gmp_replay *rp;
        assert_int_equal(gmp_reader_open(&r, b.path, NULL), GMP_OK);
        if (ra)
            assert_int_equal(gmp_reader_readahead(r, 0), GMP_OK);
        gmp_replay_opts one;
        memset(&one, 0, sizeof one);
        one.threads = 1; /* the read-ahead is the one asked for here */
        assert_int_equal(gmp_replay_new(&rp, r, &one), GMP_OK);
        assert_int_equal(gmp_replay_add(rp, &ops, &a), GMP_OK);
        assert_int_equal(gmp_replay_run(rp), GMP_OK);
        assert_int_equal(a.n, 2 * NP);
        assert_int_equal(a.npool, NP);
        assert_true(a.said > (NP - 4096) / 2); /* after the 4,096th pool, most POOL records */
        for (size_t i = 0; i < a.said; i++) {
            size_t k = a.said_at[i];
            assert_true(k > 2 * 4000); /* not while few pools are known */
            int found = 0;
            for (size_t j = k + 1; j <= k + 16 && j < a.n && !found; j++)
                found = a.pool_at[j] == a.said_pool[i];
            assert_true(found);
        }
        gmp_replay_free(rp);
        gmp_reader_close(r);
    }
    unlink(b.path);
}

/* gmp_replay_pool_number: one number per live pool, the same for each of its records, fresh at
 * its first; a destroyed pool's number goes to the next new pool; numbers stay below the most
 * pools alive at once however many pools come and go. */
typedef struct num_seen {
    size_t n;
    uint64_t pool[64];
    uint32_t num[64];
    int fresh[64];
    uint32_t max_num;
} num_seen;

static gmp_err num_pool(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *d)
{
    num_seen *a = ctx;
    int fresh = -1;
    uint32_t k = gmp_replay_pool_number(rp, &fresh);
    assert_true(fresh == 0 || fresh == 1);
    assert_int_equal(gmp_replay_pool_number(rp, NULL), k);
    if (k > a->max_num)
        a->max_num = k;
    if (a->n < 64) {
        a->pool[a->n] = rec->u.pool.pool;
        a->num[a->n] = k;
        a->fresh[a->n] = fresh;
    }
    a->n++;
    return GMP_OK;
}

static void test_pool_number(void **state)
{
    tb b;
    tb_open(&b, NULL);
    const uint64_t P1 = 0x1000, P2 = 0x2000, P3 = 0x3000;
    tb_pool(&b, 0, 1, 0, GMP_POOL_CREATE, P1, 0);     /* 0: P1 new */
    tb_pool(&b, 0, 2, 0, GMP_POOL_RESERVED, P1, 64);  /* 1: P1 again */
    tb_pool(&b, 0, 3, 0, GMP_POOL_RESERVED, P2, 128); /* 2: P2 new */
    tb_pool(&b, 0, 4, 0, GMP_POOL_DESTROY, P1, 0);    /* 3: P1 gone, still its number */
    tb_pool(&b, 0, 5, 0, GMP_POOL_CREATE, P3, 0);     /* 4: P3 takes P1's number */
    tb_pool(&b, 0, 6, 0, GMP_POOL_RESERVED, P2, 256); /* 5: P2 as before */
    tb_pool(&b, 0, 7, 0, GMP_POOL_RESERVED, P1, 32);  /* 6: P1 back: a new number */
    for (uint64_t round = 0; round < 3; round++) {    /* 7..: 1,000 pools come and go */
        for (uint64_t i = 0; i < 1000; i++)
            tb_pool(&b, 0, 10 + round * 4000 + i, 0, GMP_POOL_RESERVED, 0x100000 + i, 64);
        for (uint64_t i = 0; i < 1000; i++)
            tb_pool(&b, 0, 2000 + round * 4000 + i, 0, GMP_POOL_DESTROY, 0x100000 + i, 0);
    }
    tb_close(&b);
    static const gmp_replay_ops ops = {.pool = num_pool};
    static num_seen a;
    memset(&a, 0, sizeof a);
    gmp_reader *r;
    gmp_replay *rp;
    assert_int_equal(gmp_reader_open(&r, b.path, NULL), GMP_OK);
    assert_int_equal(gmp_replay_new(&rp, r, NULL), GMP_OK);
    assert_int_equal(gmp_replay_add(rp, &ops, &a), GMP_OK);
    assert_int_equal(gmp_replay_run(rp), GMP_OK);
    assert_int_equal(a.n, 7 + 3 * 2000);
    assert_int_equal(a.fresh[0], 1);
    assert_int_equal(a.fresh[1], 0);
    assert_int_equal(a.num[1], a.num[0]);
    assert_int_equal(a.fresh[2], 1);
    assert_int_not_equal(a.num[2], a.num[0]);
    assert_int_equal(a.fresh[3], 0);
    assert_int_equal(a.num[3], a.num[0]);
    assert_int_equal(a.fresh[4], 1);
    assert_int_equal(a.num[4], a.num[0]); /* P1's number, given back */
    assert_int_equal(a.fresh[5], 0);
    assert_int_equal(a.num[5], a.num[2]);
    assert_int_equal(a.fresh[6], 1);
    assert_int_not_equal(a.num[6], a.num[4]);
    assert_int_not_equal(a.num[6], a.num[5]);
    assert_true(a.max_num < 3 + 1000); /* P2, P3, P1 and 1,000 at once at most */
    const gmp_replay_device *d0 = gmp_replay_device_find(rp, 0);
    assert_non_null(d0);
    assert_int_equal(d0->pool_reserved, 256 + 32);
    gmp_replay_free(rp);
    gmp_reader_close(r);
    unlink(b.path);
}

/* A free is recorded at the API's entry; when the call fails, a second FREE flagged failed with
 * the same correlation id follows: the replay undoes the first. */
static void test_failed_free_undone(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    tb_alloc(&b, 0, 1, 0, GMP_MEM_DEVICE, 0x1000, 10 * TB_MiB, m, 0, 0);
    gmp_rec fr = {.type = GMP_REC_FREE, .time_ns = 2};
    fr.u.mem.kind = GMP_MEM_DEVICE;
    fr.u.mem.api = f;
    fr.u.mem.address = 0x1000;
    fr.u.mem.correlation = 9;
    tb_event(&b, 0, &fr);
    gmp_rec ff = fr;
    ff.time_ns = 3;
    ff.u.mem.flags = GMP_MEMF_FAILED;
    ff.u.mem.result = 1;
    tb_event(&b, 0, &ff);
    /* a failed free of another call (other correlation id) undoes nothing */
    tb_alloc(&b, 0, 4, 0, GMP_MEM_DEVICE, 0x2000, 1 * TB_MiB, m, 0, 0);
    fr.time_ns = 5;
    fr.u.mem.address = 0x2000;
    fr.u.mem.correlation = 11;
    tb_event(&b, 0, &fr);
    ff.time_ns = 6;
    ff.u.mem.address = 0x2000;
    ff.u.mem.correlation = 12;
    tb_event(&b, 0, &ff);
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    assert_int_equal(d0->allocated, 10 * TB_MiB); /* the first is live again, the second freed */
    assert_int_equal(d0->live_count, 1);
    assert_int_equal(d0->failed_frees, 2);
    assert_int_equal(gmp_replay_get_summary(x.rp)->undone_frees, 1);
    run_done(&b, &x);
}

/* A destroyed context (cudaDeviceReset) frees the memory its context owns without free calls
 * (cuda.h cuCtxDestroy, lines 6287-6291: cuMemAlloc, pitch, arrays, managed, ...) and keeps what
 * cuda.h 6299-6301 and cuda_runtime_api.h 317-318 say survives it: stream-ordered pool blocks
 * (cuMemAllocAsync / cudaMallocAsync) and cuMemCreate memory (with its mappings and the address
 * reservation). The replay frees the first implicitly, leaves the second live and the device's
 * pools as they were, and leaves the other devices and host memory alone. With survivors_freed,
 * the program then frees the survivors itself: those frees must match (none unknown or double). */
static const uint64_t CD_VA = 0x7000000000ull, CD_H = 0x11, CD_POOL = 0x5000;

static void context_destroy_trace(tb *b, int survivors_freed)
{
    tb_open(b, NULL);
    uint32_t m = tb_str(b, "cudaMalloc"), ma = tb_str(b, "cudaMallocAsync");
    uint32_t h = tb_str(b, "cudaMallocHost"), ar = tb_str(b, "cudaMallocArray");
    uint32_t res = tb_str(b, "cuMemAddressReserve"), cr = tb_str(b, "cuMemCreate");
    uint32_t mp = tb_str(b, "cuMemMap");
    tb_alloc(b, 0, 1, 0, GMP_MEM_DEVICE, 0x1000, 10 * TB_MiB, m, 0, 0);
    tb_alloc(b, 0, 2, 1, GMP_MEM_DEVICE, 0x9000, 20 * TB_MiB, m, 0, 0);
    tb_alloc(b, 0, 3, -1, GMP_MEM_PINNED_HOST, 0x7000, 1 * TB_MiB, h, 0, 0);
    tb_mem a1 = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, ma, 0, 0, 0x2000, 4 * TB_MiB, CD_POOL, 7};
    tb_memrec(b, 0, GMP_REC_ALLOC, 4, &a1);
    tb_pool(b, 0, 5, 0, GMP_POOL_RESERVED, CD_POOL, 8 * TB_MiB);
    tb_alloc(b, 0, 6, 0, GMP_MEM_ARRAY, 0x3000, 2 * TB_MiB, ar, 0, 0);
    tb_alloc(b, 0, 7, 0, GMP_MEM_VA_RESERVE, CD_VA, 1 * TB_GiB, res, 0, 0);
    tb_mem p1 = {0, GMP_MEM_VMM_PHYSICAL, 0, cr, 0, 0, 0, 6 * TB_MiB, CD_H, 0};
    tb_memrec(b, 0, GMP_REC_ALLOC, 8, &p1);
    tb_mem m1 = {0, GMP_MEM_VMM_MAPPING, 0, mp, 0, 0, CD_VA, 6 * TB_MiB, CD_H, 0};
    tb_memrec(b, 0, GMP_REC_ALLOC, 9, &m1);
    gmp_rec rd = {.type = GMP_REC_RESOURCE, .time_ns = 10};
    rd.u.resource.device = 0;
    rd.u.resource.op = GMP_RES_CONTEXT_DESTROY;
    tb_event(b, 0, &rd);
    if (survivors_freed) {
        uint32_t fa = tb_str(b, "cudaFreeAsync"), um = tb_str(b, "cuMemUnmap");
        uint32_t rl = tb_str(b, "cuMemRelease"), fr = tb_str(b, "cuMemAddressFree");
        tb_mem f1 = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, fa, 0, 0, 0x2000, 0, CD_POOL, 7};
        tb_memrec(b, 0, GMP_REC_FREE, 11, &f1);
        tb_free(b, 0, 12, 0, GMP_MEM_VMM_MAPPING, CD_VA, 6 * TB_MiB, um);
        tb_mem r1 = {0, GMP_MEM_VMM_PHYSICAL, 0, rl, 0, 0, 0, 0, CD_H, 0};
        tb_memrec(b, 0, GMP_REC_FREE, 13, &r1);
        tb_free(b, 0, 14, 0, GMP_MEM_VA_RESERVE, CD_VA, 1 * TB_GiB, fr);
    }
    tb_close(b);
}

static void test_context_destroy(void **state)
{
    tb b;
    context_destroy_trace(&b, 0);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0), *d1 = dev(&x, 1), *host = dev(&x, -1);
    assert_int_equal(d0->peak_allocated, 22 * TB_MiB); /* 10 + 4 + 2 + 6 */
    assert_int_equal(d0->allocated, 10 * TB_MiB);      /* the pool block and the VMM memory */
    assert_int_equal(d0->kind[GMP_MEM_DEVICE].live_count, 0);
    assert_int_equal(d0->kind[GMP_MEM_ARRAY].live_count, 0);
    assert_int_equal(d0->kind[GMP_MEM_ASYNC_POOL].live_bytes, 4 * TB_MiB);
    assert_int_equal(d0->kind[GMP_MEM_VMM_PHYSICAL].live_bytes, 6 * TB_MiB);
    assert_int_equal(d0->kind[GMP_MEM_VMM_MAPPING].live_bytes, 6 * TB_MiB);
    assert_int_equal(d0->kind[GMP_MEM_VA_RESERVE].live_bytes, 1 * TB_GiB);
    assert_int_equal(d0->pool_reserved, 8 * TB_MiB); /* the pool is not emptied */
    assert_int_equal(d0->reserved, 14 * TB_MiB);     /* pool reserve + VMM physical */
    assert_int_equal(d0->frees, 2);                  /* the cudaMalloc block and the array */
    assert_int_equal(d1->allocated, 20 * TB_MiB);    /* another device: untouched */
    assert_int_equal(host->kind[GMP_MEM_PINNED_HOST].live_bytes, 1 * TB_MiB);
    assert_int_equal(x.s.frees, 2); /* outputs saw two ordinary free events */
    run_done(&b, &x);
}

static void test_context_destroy_survivors_freed(void **state)
{
    tb b;
    context_destroy_trace(&b, 1);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    assert_int_equal(d0->allocated, 0);
    assert_int_equal(d0->live_count, 0);
    assert_int_equal(d0->unknown_frees, 0);
    assert_int_equal(d0->double_frees, 0);
    assert_int_equal(d0->kind[GMP_MEM_ASYNC_POOL].frees, 1);
    assert_int_equal(d0->kind[GMP_MEM_VMM_PHYSICAL].frees, 1);
    assert_int_equal(d0->kind[GMP_MEM_VMM_MAPPING].frees, 1);
    assert_int_equal(d0->kind[GMP_MEM_VA_RESERVE].frees, 1);
    assert_int_equal(d0->kind[GMP_MEM_VA_RESERVE].live_bytes, 0);
    assert_int_equal(d0->frees, 4); /* device kinds: two at the reset, two after */
    run_done(&b, &x);
}

/* VMM: physical memory counts (matched by handle), mappings and reservations do not; one unmap
 * covers two mappings. */
static void test_vmm(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t res = tb_str(&b, "cuMemAddressReserve"), cr = tb_str(&b, "cuMemCreate");
    uint32_t mp = tb_str(&b, "cuMemMap"), um = tb_str(&b, "cuMemUnmap");
    uint32_t rl = tb_str(&b, "cuMemRelease"), fr = tb_str(&b, "cuMemAddressFree");
    const uint64_t VA = 0x7000000000ull, H1 = 0x11, H2 = 0x12;
    tb_alloc(&b, 0, 1, 0, GMP_MEM_VA_RESERVE, VA, 1 * TB_GiB, res, 0, 0);
    tb_mem p1 = {0, GMP_MEM_VMM_PHYSICAL, 0, cr, 0, 0, 0, 2 * TB_MiB, H1, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 2, &p1);
    tb_mem p2 = {0, GMP_MEM_VMM_PHYSICAL, 0, cr, 0, 0, 0, 2 * TB_MiB, H2, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 3, &p2);
    tb_mem m1 = {0, GMP_MEM_VMM_MAPPING, 0, mp, 0, 0, VA, 2 * TB_MiB, H1, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 4, &m1);
    tb_mem m2 = {0, GMP_MEM_VMM_MAPPING, 0, mp, 0, 0, VA + 2 * TB_MiB, 2 * TB_MiB, H2, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 5, &m2);
    tb_free(&b, 0, 6, 0, GMP_MEM_VMM_MAPPING, VA, 4 * TB_MiB, um); /* both mappings */
    tb_mem r1 = {0, GMP_MEM_VMM_PHYSICAL, 0, rl, 0, 0, 0, 0, H1, 0};
    tb_memrec(&b, 0, GMP_REC_FREE, 7, &r1);
    tb_mem r2 = {0, GMP_MEM_VMM_PHYSICAL, 0, rl, 0, 0, 0, 0, H2, 0};
    tb_memrec(&b, 0, GMP_REC_FREE, 8, &r2);
    tb_free(&b, 0, 9, 0, GMP_MEM_VA_RESERVE, VA, 1 * TB_GiB, fr);
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    assert_int_equal(d0->peak_allocated, 4 * TB_MiB);
    assert_int_equal(d0->peak_time_ns, 3);
    assert_int_equal(d0->peak_reserved, 4 * TB_MiB);
    assert_int_equal(d0->allocated, 0);
    assert_int_equal(d0->reserved, 0);
    assert_int_equal(d0->allocs, 2);
    assert_int_equal(d0->frees, 2);
    assert_int_equal(d0->kind[GMP_MEM_VMM_MAPPING].peak_bytes, 4 * TB_MiB);
    assert_int_equal(d0->kind[GMP_MEM_VMM_MAPPING].frees, 2);
    assert_int_equal(d0->kind[GMP_MEM_VMM_MAPPING].live_count, 0);
    assert_int_equal(d0->kind[GMP_MEM_VA_RESERVE].peak_bytes, 1 * TB_GiB);
    assert_int_equal(d0->kind[GMP_MEM_VA_RESERVE].live_bytes, 0);
    assert_int_equal(d0->kind[GMP_MEM_VMM_PHYSICAL].peak_bytes, 4 * TB_MiB);
    assert_int_equal(d0->unknown_frees, 0);
    assert_int_equal(x.s.frees, 4);
    assert_int_equal(x.s.status[GMP_REPLAY_OK], 9);
    run_done(&b, &x);
}

/* Managed, pinned and registered host memory per kind, outside the device peak; NVTX regions
 * attributed but not counted; the same address live as a block and as a region inside it. */
static void test_kinds(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t mm = tb_str(&b, "cudaMallocManaged"), mh = tb_str(&b, "cudaMallocHost");
    uint32_t hr = tb_str(&b, "cudaHostRegister"), rr = tb_str(&b, "nvtxMemRegionsRegister");
    uint32_t sub = tb_range(&b, "alloc/sub");
    tb_alloc(&b, 0, 1, 0, GMP_MEM_MANAGED, 0x100000, 10 * TB_MiB, mm, 0, 0);
    tb_alloc(&b, 0, 2, -1, GMP_MEM_PINNED_HOST, 0x200000, 20 * TB_MiB, mh, 0, 0);
    tb_alloc(&b, 0, 3, -1, GMP_MEM_REGISTERED_HOST, 0x300000, 5 * TB_MiB, hr, 0, 0);
    tb_alloc(&b, 0, 4, 0, GMP_MEM_DEVICE, 0x1000, 1 * TB_MiB, m, 0, 0);
    tb_mem reg = {0, GMP_MEM_NVTX_REGION, 0, rr, sub, 0, 0x1000, 256 * TB_KiB, 0x77, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 5, &reg);
    tb_free(&b, 0, 6, 0, GMP_MEM_DEVICE, 0x1000, 0, f);
    tb_free(&b, 0, 7, 0, GMP_MEM_UNKNOWN, 0x100000, 0, f); /* cudaFree of managed memory */
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0), *h = dev(&x, -1);
    assert_int_equal(gmp_replay_device_at(x.rp, 0)->id, -1); /* host first */
    assert_int_equal(d0->peak_allocated, 1 * TB_MiB);
    assert_int_equal(d0->allocated, 0);
    assert_int_equal(d0->allocs, 1);
    assert_int_equal(d0->kind[GMP_MEM_MANAGED].peak_bytes, 10 * TB_MiB);
    assert_int_equal(d0->kind[GMP_MEM_MANAGED].live_bytes, 0);
    assert_int_equal(d0->kind[GMP_MEM_MANAGED].frees, 1);
    assert_int_equal(h->kind[GMP_MEM_PINNED_HOST].peak_bytes, 20 * TB_MiB);
    assert_int_equal(h->kind[GMP_MEM_PINNED_HOST].live_count, 1);
    assert_int_equal(h->kind[GMP_MEM_REGISTERED_HOST].live_bytes, 5 * TB_MiB);
    assert_int_equal(h->peak_allocated, 0);
    assert_int_equal(d0->kind[GMP_MEM_NVTX_REGION].live_bytes, 256 * TB_KiB);
    assert_int_equal(site_sum(&x, 0, sub, GMP_MEM_NVTX_REGION, F_LIVE), 256 * TB_KiB);
    assert_int_equal(site_sum(&x, 0, sub, GMP_MEM_NVTX_REGION, F_PEAK), 0);
    assert_int_equal(d0->unknown_frees, 0);
    run_done(&b, &x);
}

/* NVTX ranges per thread: nesting, a POP that closes an inner range too, START/END across
 * threads, unmatched POP and END. */
static void test_ranges(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t a = tb_range(&b, "a"), ab = tb_range(&b, "a/b"), ac = tb_range(&b, "a/c");
    uint32_t xr = tb_range(&b, "x");
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, 10, a, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_START, 15, xr, 7);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, 20, ab, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, 30, ab, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, 40, ac, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, 50, a, 0); /* the POP of a/c was lost */
    tb_range_ev(&b, 2, GMP_REC_RANGE_END, 60, 0, 7); /* another thread ends x */
    tb_range_ev(&b, 1, GMP_REC_RANGE_POP, 70, a, 0); /* nothing open on thread 1 */
    tb_range_ev(&b, 1, GMP_REC_RANGE_END, 80, 0, 99);
    tb_range_ev(&b, 1, GMP_REC_MARK, 90, xr, 0);
    tb_close(&b);
    run x;
    replay(&b, &x);
    static const range_log want[] = {
        {GMP_REPLAY_PUSH, 100, 1, 1, 10, 10, 0}, {GMP_REPLAY_START, 101, 5, 0, 15, 15, 0},
        {GMP_REPLAY_PUSH, 100, 2, 2, 20, 20, 0}, {GMP_REPLAY_POP, 100, 2, 1, 20, 30, 0},
        {GMP_REPLAY_PUSH, 100, 3, 2, 40, 40, 0}, {GMP_REPLAY_POP, 100, 3, 1, 40, 50, 1},
        {GMP_REPLAY_POP, 100, 1, 0, 10, 50, 0},  {GMP_REPLAY_END, 102, 5, 0, 15, 60, 0},
        {GMP_REPLAY_MARK, 101, 5, 0, 90, 90, 0},
    };
    (void)a;
    (void)ab;
    (void)ac;
    (void)xr;
    assert_int_equal(x.s.nranges, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < x.s.nranges; i++) {
        const range_log *g = &x.s.ranges[i], *w = &want[i];
        uint32_t wr = w->range == 1 ? a : w->range == 2 ? ab : w->range == 3 ? ac : xr;
        assert_int_equal(g->op, w->op);
        assert_int_equal(g->tid, w->tid);
        assert_int_equal(g->range, wr);
        assert_int_equal(g->depth, w->depth);
        assert_int_equal(g->begin, w->begin);
        assert_int_equal(g->end, w->end);
        assert_int_equal(g->implicit, w->implicit);
    }
    const gmp_replay_summary *s = gmp_replay_get_summary(x.rp);
    assert_int_equal(s->range_pushes, 3);
    assert_int_equal(s->implicit_pops, 1);
    assert_int_equal(s->unmatched_pops, 1);
    assert_int_equal(s->range_starts, 1);
    assert_int_equal(s->unmatched_ends, 1);
    run_done(&b, &x);
}

/* SAMPLE: driver-reported use versus what the replay explains. */
static void test_samples(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc");
    tb_alloc(&b, 0, 1, 0, GMP_MEM_DEVICE, 0x1000, 100 * TB_MiB, m, 0, 0);
    tb_sample(&b, 0, 2, 0, 1000 * TB_MiB, 1200 * TB_MiB, UINT64_MAX); /* used 200 MiB */
    tb_sample(&b, 0, 3, 0, 1000 * TB_MiB, 1200 * TB_MiB, 150 * TB_MiB);
    tb_sample(&b, 0, 4, 0, 1150 * TB_MiB, 1200 * TB_MiB, 50 * TB_MiB); /* below: 0 */
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    assert_int_equal(d0->samples, 3);
    assert_int_equal(d0->max_unexplained, 100 * TB_MiB);
    assert_int_equal(d0->max_unexplained_time_ns, 2);
    assert_int_equal(d0->sample_used, 50 * TB_MiB);
    assert_int_equal(d0->sample_total, 1200 * TB_MiB);
    assert_int_equal(x.s.samples, 3);
    run_done(&b, &x);
}

/* Stacks: native frames resolved to module + offset, Python frames to file/function/line. */
static void test_stacks(void **state)
{
    tb b;
    tb_open(&b, NULL);
    tb_module(&b, 1, "/usr/lib/libtorch_cuda.so", 0x7f0000000000ull, 0x7f0000001000ull, 0x100000);
    uint32_t outer = gmp_writer_stack_native(b.w, 0, 0x7f0000002345ull);
    uint32_t inner = gmp_writer_stack_native(b.w, outer, 0x400123);
    uint32_t py = gmp_writer_stack_python(b.w, 0, tb_str(&b, "train.py"), tb_str(&b, "main"), 42);
    uint32_t m = tb_str(&b, "cudaMalloc");
    tb_alloc(&b, 0, 1, 0, GMP_MEM_DEVICE, 0x1000, 10, m, 0, inner);
    tb_alloc(&b, 0, 2, 0, GMP_MEM_DEVICE, 0x2000, 20, m, 0, py);
    tb_close(&b);
    run x;
    replay(&b, &x);
    gmp_replay_frame fr[4];
    assert_int_equal(gmp_replay_stack_frames(x.rp, inner, fr, 4), 2);
    assert_int_equal(fr[0].kind, GMP_FRAME_NATIVE);
    assert_int_equal(fr[0].address, 0x400123);
    assert_null(fr[0].module);
    assert_int_equal(fr[1].address, 0x7f0000002345ull);
    assert_non_null(fr[1].module);
    assert_int_equal(fr[1].offset, 0x2345);
    assert_int_equal(gmp_replay_stack_frames(x.rp, inner, fr, 1), 2); /* depth, one written */
    assert_int_equal(gmp_replay_stack_frames(x.rp, py, fr, 4), 1);
    assert_int_equal(fr[0].kind, GMP_FRAME_PYTHON);
    assert_int_equal(fr[0].line, 42);
    assert_memory_equal(fr[0].function.ptr, "main", 4);
    assert_memory_equal(fr[0].file.ptr, "train.py", 8);
    assert_int_equal(gmp_replay_stack_frames(x.rp, 0, fr, 4), 0);
    assert_int_equal(dev(&x, 0)->peak_allocated, 30);
    run_done(&b, &x);
}

/* The live set at the end through gmp_replay_live_foreach. */
static gmp_err count_live(void *ctx, const gmp_replay_alloc *a)
{
    uint64_t *v = ctx;
    v[0]++;
    v[1] += a->size;
    if (a->kind == GMP_MEM_VMM_PHYSICAL)
        v[2] = a->handle;
    return GMP_OK;
}

static void test_live_foreach(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc");
    tb_alloc(&b, 0, 1, 0, GMP_MEM_DEVICE, 0x1000, 10, m, 0, 0);
    tb_alloc(&b, 0, 2, 0, GMP_MEM_DEVICE, 0x2000, 20, m, 0, 0);
    tb_mem p = {0, GMP_MEM_VMM_PHYSICAL, 0, m, 0, 0, 0, 30, 0x99, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, 3, &p);
    tb_free(&b, 0, 4, 0, GMP_MEM_DEVICE, 0x1000, 0, m);
    tb_close(&b);
    run x;
    replay(&b, &x);
    uint64_t v[3] = {0, 0, 0};
    assert_int_equal(gmp_replay_live_foreach(x.rp, count_live, v), GMP_OK);
    assert_int_equal(v[0], 2);
    assert_int_equal(v[1], 50);
    assert_int_equal(v[2], 0x99);
    assert_int_equal(gmp_replay_get_summary(x.rp)->max_live_allocs, 3);
    run_done(&b, &x);
}

/* A callback error stops the replay and is returned with its message. */
static gmp_err fail_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    return gmp_replay_fail(rp, GMP_ERR_IO, "cannot write %s", "out.json");
}

static void test_callback_error(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc");
    tb_alloc(&b, 0, 1, 0, GMP_MEM_DEVICE, 0x1000, 10, m, 0, 0);
    tb_close(&b);
    gmp_reader *r;
    gmp_replay *rp;
    assert_int_equal(gmp_reader_open(&r, b.path, NULL), GMP_OK);
    assert_int_equal(gmp_replay_new(&rp, r, NULL), GMP_OK);
    gmp_replay_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.alloc = fail_alloc;
    assert_int_equal(gmp_replay_add(rp, &ops, NULL), GMP_OK);
    assert_int_equal(gmp_replay_run(rp), GMP_ERR_IO);
    assert_string_equal(gmp_replay_error(rp), "cannot write out.json");
    assert_int_equal(gmp_replay_run(rp), GMP_ERR_ARG); /* once only */
    gmp_replay_free(rp);
    gmp_reader_close(r);
    unlink(b.path);
}

/* Many allocations: the tables grow and shrink (deletion by backward shift) without losing one. */
static void test_many(void **state)
{
    tb b;
    tb_open(&b, NULL);
    uint32_t m = tb_str(&b, "cudaMalloc");
    uint64_t t = 1;
    const int N = 20000;
    for (int i = 0; i < N; i++)
        tb_alloc(&b, 0, t++, 0, GMP_MEM_DEVICE, 0x10000000ull + (uint64_t)i * 512, 512, m, 0, 0);
    for (int i = 0; i < N; i += 2)
        tb_free(&b, 0, t++, 0, GMP_MEM_DEVICE, 0x10000000ull + (uint64_t)i * 512, 0, m);
    for (int i = 1; i < N; i += 4)
        tb_free(&b, 0, t++, 0, GMP_MEM_DEVICE, 0x10000000ull + (uint64_t)i * 512, 0, m);
    tb_close(&b);
    run x;
    replay(&b, &x);
    const gmp_replay_device *d0 = dev(&x, 0);
    assert_int_equal(d0->peak_allocated, (uint64_t)N * 512);
    assert_int_equal(d0->frees, N / 2 + N / 4);
    assert_int_equal(d0->live_count, N / 4);
    assert_int_equal(d0->allocated, (uint64_t)(N / 4) * 512);
    assert_int_equal(d0->unknown_frees, 0);
    run_done(&b, &x);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peaks),
        cmocka_unit_test(test_live_at_peak),
        cmocka_unit_test(test_peak_ties),
        cmocka_unit_test(test_anomalies),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_failed_free_undone),
        cmocka_unit_test(test_context_destroy),
        cmocka_unit_test(test_context_destroy_survivors_freed),
        cmocka_unit_test(test_vmm),
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_stacks),
        cmocka_unit_test(test_live_foreach),
        cmocka_unit_test(test_callback_error),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_pool_ahead),
        cmocka_unit_test(test_pool_number),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
