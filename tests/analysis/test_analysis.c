/* Tests of the report's analyses (formats/replay/gmp_analysis.c): traces written with the writer
 * (no thread, explicit times, tests/replay/replay_tb.h), replayed once through the report model,
 * with exact expected numbers. `test_analysis write-leak PATH` writes the leaking trace for the CLI
 * checks (check_analysis.py); `write-analyses PATH` and `write-steady PATH` the fixtures of its
 * golden files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmp_analysis.h"
#include "gmp_doc.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_report.h"
#include "gmp_report_build.h"
#include "gmp_report_build_analysis.h"
#include "replay_tb.h"

#define MS 1000000ull
#define US 1000ull
#define T0 1000000000ull

/* Replays the trace at path through a report (opts may be NULL); the caller frees the doc. */
/* Makes an empty file from a mkstemp template (the test writes its trace there). */
static void tmp_file(char *path)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

static gmp_report_doc *report_of(const char *path, const gmp_report_opts *opts)
{
    gmp_reader *r = NULL;
    assert_int_equal(gmp_reader_open(&r, path, NULL), GMP_OK);
    gmp_replay *rp = NULL;
    assert_int_equal(gmp_replay_new(&rp, r, NULL), GMP_OK);
    gmp_report_doc *doc = NULL;
    assert_int_equal(gmp_report_doc_new(&doc, opts), GMP_OK);
    assert_int_equal(gmp_report_doc_add(doc, rp, path, ""), GMP_OK);
    assert_int_equal(gmp_replay_run(rp), GMP_OK);
    gmp_replay_free(rp);
    gmp_reader_close(r);
    assert_non_null(doc->traces[0]->analysis);
    return doc;
}

static int str_is(const gmp_report_trace *t, uint32_t i, const char *s)
{
    gmp_str x = gmp_report_str(t, i);
    return x.len == strlen(s) && memcmp(x.ptr, s, x.len) == 0;
}

static const gmp_analysis_growth *growth_of(const gmp_report_trace *t, const char *range,
                                            int32_t dev)
{
    const gmp_analysis_result *R = t->analysis;
    for (size_t i = 0; i < R->ngrowth; i++)
        if (R->growth[i].device == dev && str_is(t, R->growth[i].range, range))
            return &R->growth[i];
    return NULL;
}

/* The leak verdict owned by range (NULL: the one outside any range) on device dev. */
static const gmp_analysis_leak *leak_of(const gmp_report_trace *t, const char *range, int32_t dev)
{
    const gmp_analysis_result *R = t->analysis;
    for (size_t i = 0; i < R->nleaks; i++)
        if (R->leaks[i].device == dev &&
            (range ? str_is(t, R->leaks[i].range, range) : R->leaks[i].range == 0))
            return &R->leaks[i];
    return NULL;
}

static const gmp_analysis_temp *temp_of(const gmp_report_trace *t, const char *range, int32_t dev)
{
    const gmp_analysis_result *R = t->analysis;
    for (size_t i = 0; i < R->ntemp; i++)
        if (R->temp[i].device == dev && str_is(t, R->temp[i].range, range))
            return &R->temp[i];
    return NULL;
}

/* A step range repeated n times on thread 0 and device 0; in each step: a 4 MiB temporary
 * (freed after 100 us) and the bytes of leak[i] allocated in "step/opt" and never freed, and
 * free_prev[i]: free the previous step's leak allocation first. Before the steps, 64 MiB of
 * weights outside any range. The last step ends at T0 + n * 10 ms + 5 ms. */
static void steps(tb *b, int n, const uint64_t *leak, const int *free_prev)
{
    uint32_t api = tb_str(b, "cudaMalloc");
    uint32_t api_f = tb_str(b, "cudaFree");
    uint32_t r_step = tb_range(b, "step");
    uint32_t r_opt = tb_range(b, "step/opt");
    uint32_t s_leak =
        gmp_writer_stack_python(b->w, 0, tb_str(b, "train.py"), tb_str(b, "optimizer_step"), 77);
    uint32_t s_tmp =
        gmp_writer_stack_python(b->w, 0, tb_str(b, "train.py"), tb_str(b, "forward"), 12);
    uint64_t t = T0;
    tb_alloc(b, 0, t, 0, GMP_MEM_DEVICE, 0x100000000ull, 64 * TB_MiB, api, 0, 0);
    for (int i = 0; i < n; i++) {
        t = T0 + (uint64_t)(i + 1) * 10 * MS;
        tb_range_ev(b, 0, GMP_REC_RANGE_PUSH, t, r_step, 0);
        uint64_t tmp = 0x100000000000ull + (uint64_t)i * 0x10000000ull;
        tb_alloc(b, 0, t + 1 * MS, 0, GMP_MEM_DEVICE, tmp, 4 * TB_MiB, api, r_step, s_tmp);
        tb_free(b, 0, t + 1 * MS + 100 * US, 0, GMP_MEM_DEVICE, tmp, 0, api_f);
        tb_range_ev(b, 0, GMP_REC_RANGE_PUSH, t + 2 * MS, r_opt, 0);
        if (free_prev && free_prev[i] && i > 0)
            tb_free(b, 0, t + 2 * MS + 10 * US, 0, GMP_MEM_DEVICE,
                    0x200000000000ull + (uint64_t)(i - 1) * 0x10000000ull, 0, api_f);
        if (leak[i])
            tb_alloc(b, 0, t + 3 * MS, 0, GMP_MEM_DEVICE,
                     0x200000000000ull + (uint64_t)i * 0x10000000ull, leak[i], api, r_opt, s_leak);
        tb_range_ev(b, 0, GMP_REC_RANGE_POP, t + 4 * MS, 0, 0);
        tb_range_ev(b, 0, GMP_REC_RANGE_POP, t + 5 * MS, 0, 0);
    }
}

static void write_steps(const char *path, int n, const uint64_t *leak, const int *free_prev)
{
    tb b;
    tb_open(&b, path);
    tb_device(&b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    steps(&b, n, leak, free_prev);
    tb_close(&b);
}

static void write_leak(const char *path)
{
    uint64_t leak[10];
    for (int i = 0; i < 10; i++)
        leak[i] = TB_MiB;
    write_steps(path, 10, leak, NULL);
}

/* The "no range grows" trace of the goldens (and of test_steady): each of 12 steps frees the
 * previous step's 2 MiB. */
static void write_steady(const char *path)
{
    uint64_t leak[12];
    int fp[12];
    for (int i = 0; i < 12; i++) {
        leak[i] = 2 * TB_MiB;
        fp[i] = 1;
    }
    write_steps(path, 12, leak, fp);
}

/* Growth without a leak (docs/report.md, "Findings"): 12 steps, each keeping 1 MiB allocated in
 * step/opt from a stack of its own (a cache filled from a new code path each time): the device's
 * memory at the step's exits rises every step, but each site rises once, so no site is a leak. */
static void write_growth(const char *path)
{
    tb b;
    tb_open(&b, path);
    tb_device(&b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    uint32_t api = tb_str(&b, "cudaMalloc");
    uint32_t r_step = tb_range(&b, "step");
    uint32_t r_opt = tb_range(&b, "step/opt");
    uint32_t file = tb_str(&b, "cache.py"), fn = tb_str(&b, "fill");
    for (int i = 0; i < 12; i++) {
        uint64_t t = T0 + (uint64_t)(i + 1) * 10 * MS;
        uint32_t st = gmp_writer_stack_python(b.w, 0, file, fn, 100 + (uint32_t)i);
        tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, t, r_step, 0);
        tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, t + 2 * MS, r_opt, 0);
        tb_alloc(&b, 0, t + 3 * MS, 0, GMP_MEM_DEVICE,
                 0x200000000000ull + (uint64_t)i * 0x10000000ull, TB_MiB, api, r_opt, st);
        tb_range_ev(&b, 0, GMP_REC_RANGE_POP, t + 4 * MS, 0, 0);
        tb_range_ev(&b, 0, GMP_REC_RANGE_POP, t + 5 * MS, 0, 0);
    }
    tb_close(&b);
}

/* An OOM whose driver-reported free memory is free_bytes (0: unknown). */
static void oom_free(tb *b, int th, uint64_t t, int32_t dev, uint32_t api, uint64_t req,
                     uint64_t free_bytes, uint32_t range)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_OOM;
    r.time_ns = t;
    r.u.oom.device = dev;
    r.u.oom.api = api;
    r.u.oom.requested = req;
    r.u.oom.range = range;
    r.u.oom.result = 2;
    r.u.oom.free_bytes = free_bytes;
    tb_event(b, th, &r);
}

/* The fixture of the analysis goldens (check_analysis.py golden_*): every analysis section at
 * once. Device 0, thread 0: the leaking steps of write_leak (a probable leak with its site, the
 * temporaries), then a stream-ordered pool (allocator overhead with pools) and three OOMs, one
 * per verdict (fragmented, cache, exhausted). Device 1, thread 1: 1 GiB of weights, a range
 * "eval" repeated 4 times that does not grow (2 MiB freed after 2 ms: not temporary) with a
 * pinned host temporary (device "host"), and an OOM whose free memory is unknown. Written in
 * time order: the steps end at 105 ms, eval runs from 110 ms, the pool from 160 ms. */
static void write_analyses(const char *path)
{
    tb b;
    tb_open(&b, path);
    tb_device(&b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    tb_device(&b, 1, "NVIDIA A100-SXM4-40GB", 40 * TB_GiB);
    uint64_t leak[10];
    for (int i = 0; i < 10; i++)
        leak[i] = TB_MiB;
    steps(&b, 10, leak, NULL);
    uint32_t api = tb_str(&b, "cudaMalloc");
    uint32_t api_f = tb_str(&b, "cudaFree");
    uint32_t api_a = tb_str(&b, "cudaMallocAsync");
    uint32_t api_h = tb_str(&b, "cudaHostAlloc");
    uint32_t api_hf = tb_str(&b, "cudaFreeHost");
    uint32_t r_eval = tb_range(&b, "eval");
    uint32_t s_eval =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "eval.py"), tb_str(&b, "evaluate"), 31);
    /* device 1 */
    tb_alloc(&b, 1, T0 + 110 * MS, 1, GMP_MEM_DEVICE, 0x300000000ull, TB_GiB, api, 0, 0);
    for (int i = 0; i < 4; i++) {
        uint64_t t = T0 + (uint64_t)(i + 12) * 10 * MS;
        uint64_t a = 0x310000000ull + (uint64_t)i * 0x1000000ull;
        uint64_t h = 0x7000000ull + (uint64_t)i * 0x10000ull;
        tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, t, r_eval, 0);
        tb_alloc(&b, 1, t + 1 * MS, 1, GMP_MEM_DEVICE, a, 2 * TB_MiB, api, r_eval, s_eval);
        tb_alloc(&b, 1, t + 2 * MS, -1, GMP_MEM_PINNED_HOST, h, 64 * TB_KiB, api_h, r_eval, s_eval);
        tb_free(&b, 1, t + 2 * MS + 10 * US, -1, GMP_MEM_PINNED_HOST, h, 0, api_hf);
        tb_free(&b, 1, t + 3 * MS, 1, GMP_MEM_DEVICE, a, 0, api_f);
        tb_range_ev(&b, 1, GMP_REC_RANGE_POP, t + 4 * MS, 0, 0);
    }
    /* device 0 after the steps: a pool, then the OOMs */
    const uint64_t pool = 0x77;
    uint64_t t = T0 + 160 * MS;
    tb_pool(&b, 0, t, 0, GMP_POOL_CREATE, pool, 0);
    tb_pool(&b, 0, t + 1 * MS, 0, GMP_POOL_RESERVED, pool, 128 * TB_MiB);
    tb_mem m = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, api_a, 0,
                0, 0x400000000ull,     64 * TB_MiB,    pool,  0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, t + 2 * MS, &m);
    m.address = 0x500000000ull;
    m.size = 32 * TB_MiB;
    tb_memrec(&b, 0, GMP_REC_ALLOC, t + 3 * MS, &m);
    m.size = 0;
    tb_memrec(&b, 0, GMP_REC_FREE, t + 4 * MS, &m);
    tb_pool(&b, 0, t + 5 * MS, 0, GMP_POOL_RESERVED, pool, 256 * TB_MiB);
    /* held free: 256 - 64 = 192 MiB */
    oom_free(&b, 0, t + 6 * MS, 0, api_a, 100 * TB_MiB, 1 * TB_MiB, 0);   /* fragmented */
    oom_free(&b, 0, t + 7 * MS, 0, api_a, 300 * TB_MiB, 200 * TB_MiB, 0); /* cache */
    oom_free(&b, 0, t + 8 * MS, 0, api, 8 * TB_GiB, 1 * TB_MiB, 0);       /* exhausted */
    oom_free(&b, 1, t + 9 * MS, 1, api, 64 * TB_GiB, 0, r_eval);          /* free unknown */
    tb_pool(&b, 0, t + 10 * MS, 0, GMP_POOL_RESERVED, pool, 96 * TB_MiB);
    tb_close(&b);
}

/* 1 MiB leaked per step over 10 steps, in step/opt: the iteration is "step" (step/opt repeats as
 * often but is nested in it), growth is measured from the end of iteration 2 (the window of the
 * later iterations: 2^(floor(log2 10) - 2)) to 10, and one verdict, at step/opt, the range the
 * leaking allocations were made in: 8 MiB over 8 iterations, exactly 1 MiB per iteration. */
static void test_leak(void **state)
{
    char path[] = "/tmp/gmp_ana_leak_XXXXXX";
    tmp_file(path);
    write_leak(path);
    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *t = doc->traces[0];
    const gmp_analysis_result *R = t->analysis;
    assert_int_equal(R->iter.kind, GMP_ANALYSIS_ITER_PUSH);
    assert_true(str_is(t, R->iter.range, "step"));
    assert_int_equal(R->iter.depth, 1);
    assert_int_equal(R->iter.iterations, 10);
    assert_int_equal(R->iter.tracked_from, 1);
    assert_int_equal(R->iter.window_from, 2);
    assert_int_equal(R->nleaks, 1);
    const gmp_analysis_leak *L = leak_of(t, "step/opt", 0);
    assert_non_null(L);
    assert_int_equal(L->iterations, 8);
    assert_int_equal(L->growth_bytes, 8 * TB_MiB);
    assert_true(L->rate_bytes == (double)TB_MiB);
    assert_int_equal(L->rises, 8);
    assert_int_equal(L->falls, 0);
    /* the sites that grow: only the leaking one (the temporary and the weights do not) */
    assert_int_equal(L->nsites, 1);
    const gmp_analysis_growth_site *s = &L->sites[0];
    assert_true(str_is(t, s->site.range, "step/opt"));
    assert_true(str_is(t, s->site.api, "cudaMalloc"));
    assert_int_equal(s->site.kind, GMP_MEM_DEVICE);
    assert_int_equal(s->first_bytes, 2 * TB_MiB);
    assert_int_equal(s->last_bytes, 10 * TB_MiB);
    assert_int_equal(s->growth_bytes, 8 * TB_MiB);
    assert_true(s->rate_bytes == (double)TB_MiB);
    assert_true(s->site.stack < t->nstacks);
    const gmp_report_stack *st = &t->stacks[s->site.stack];
    assert_int_equal(st->nframes, 1);
    assert_true(str_is(t, st->frames[0].function, "optimizer_step"));
    /* the repeating ranges, as data: the device's allocated bytes at their exits */
    assert_int_equal(R->ranges_checked, 2);
    const gmp_analysis_growth *g = growth_of(t, "step", 0);
    assert_non_null(g);
    assert_false(g->leak); /* it only contains the owner */
    assert_true(g->thread_bound);
    assert_int_equal(g->repetitions, 10);
    assert_true(g->rate_bytes == (double)TB_MiB);
    assert_int_equal(g->total_bytes, 9 * TB_MiB);
    assert_int_equal(g->first_bytes, 65 * TB_MiB);
    assert_int_equal(g->last_bytes, 74 * TB_MiB);
    assert_int_equal(g->rises, 9);
    assert_int_equal(g->nseries, 10);
    assert_int_equal(g->series[4], 69 * TB_MiB);
    assert_int_equal(g->mid_bytes, 69 * TB_MiB);
    const gmp_analysis_growth *o = growth_of(t, "step/opt", 0);
    assert_non_null(o);
    assert_true(o->leak); /* the owner */
    assert_true(R->growth[0].leak && !R->growth[1].leak);
    /* the temporaries of the same trace: 10 of 4 MiB in "step" */
    const gmp_analysis_temp *x = temp_of(t, "step", 0);
    assert_non_null(x);
    assert_int_equal(x->temp_count, 10);
    assert_int_equal(x->temp_bytes, 40 * TB_MiB);
    assert_int_equal(x->allocs, 10);
    assert_int_equal(x->temp_life_ns, 10 * 100 * US);
    assert_int_equal(R->ntemp, 1);
    assert_int_equal(R->temp_count, 10);
    assert_int_equal(R->allocs, 21);
    assert_int_equal(R->ntemp_sites, 1);
    assert_true(str_is(t, R->temp_sites[0].site.range, "step"));
    gmp_report_doc_free(doc);
    unlink(path);
}

/* A training loop: "train" once around 12 iterations of train/step, each with
 * forward, backward and optimizer inside. Weights (64 MiB) before; on step 1 only, gradients
 * (64 MiB, in backward) and optimizer state (128 MiB, in optimizer: as Adam creates exp_avg and
 * exp_avg_sq on its first step); every step a 4 MiB activation (forward, freed in backward), a
 * 2 MiB temporary in the optimizer, and a 1 MiB leak in forward (a loss kept on the GPU).
 * use_marks: no ranges at all, a MARK "step" at the end of each iteration instead. */
static void write_train(const char *path, int use_marks)
{
    tb b;
    tb_open(&b, path);
    tb_device(&b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    uint32_t api = tb_str(&b, "cudaMalloc"), api_f = tb_str(&b, "cudaFree");
    uint32_t r_train = tb_range(&b, "train"), r_step = tb_range(&b, "train/step");
    uint32_t r_fwd = tb_range(&b, "train/step/forward");
    uint32_t r_bwd = tb_range(&b, "train/step/backward");
    uint32_t r_opt = tb_range(&b, "train/step/optimizer");
    uint32_t m_step = tb_range(&b, "step"); /* a MARK's name */
    uint32_t s_leak =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "train.py"), tb_str(&b, "forward"), 20);
    uint32_t s_act =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "model.py"), tb_str(&b, "forward"), 8);
    uint32_t s_grad =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "train.py"), tb_str(&b, "backward"), 30);
    uint32_t s_state =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "adam.py"), tb_str(&b, "step"), 90);
    uint32_t s_tmp = gmp_writer_stack_python(b.w, 0, tb_str(&b, "adam.py"), tb_str(&b, "step"), 95);
    if (use_marks)
        r_train = r_step = r_fwd = r_bwd = r_opt = 0;
    tb_alloc(&b, 0, T0, 0, GMP_MEM_DEVICE, 0x100000000ull, 64 * TB_MiB, api, 0, 0);
    if (!use_marks)
        tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T0 + 1 * MS, r_train, 0);
    for (int i = 0; i < 12; i++) {
        uint64_t t = T0 + (uint64_t)(i + 1) * 10 * MS;
        uint64_t act = 0x200000000000ull + (uint64_t)i * 0x10000000ull;
        if (!use_marks) {
            tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, t, r_step, 0);
            tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, t + 1 * MS, r_fwd, 0);
        }
        tb_alloc(&b, 0, t + 1 * MS + 10 * US, 0, GMP_MEM_DEVICE, act, 4 * TB_MiB, api, r_fwd,
                 s_act);
        tb_alloc(&b, 0, t + 1 * MS + 20 * US, 0, GMP_MEM_DEVICE, act + 0x8000000ull, TB_MiB, api,
                 r_fwd, s_leak);
        if (!use_marks) {
            tb_range_ev(&b, 0, GMP_REC_RANGE_POP, t + 2 * MS, 0, 0);
            tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, t + 3 * MS, r_bwd, 0);
        }
        if (i == 0)
            tb_alloc(&b, 0, t + 3 * MS + 10 * US, 0, GMP_MEM_DEVICE, 0x300000000ull, 64 * TB_MiB,
                     api, r_bwd, s_grad);
        tb_free(&b, 0, t + 3 * MS + 20 * US, 0, GMP_MEM_DEVICE, act, 0, api_f);
        if (!use_marks) {
            tb_range_ev(&b, 0, GMP_REC_RANGE_POP, t + 4 * MS, 0, 0);
            tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, t + 5 * MS, r_opt, 0);
        }
        if (i == 0)
            tb_alloc(&b, 0, t + 5 * MS + 10 * US, 0, GMP_MEM_DEVICE, 0x400000000ull, 128 * TB_MiB,
                     api, r_opt, s_state);
        uint64_t tmp = 0x500000000000ull + (uint64_t)i * 0x10000000ull;
        tb_alloc(&b, 0, t + 5 * MS + 20 * US, 0, GMP_MEM_DEVICE, tmp, 2 * TB_MiB, api, r_opt,
                 s_tmp);
        tb_free(&b, 0, t + 5 * MS + 30 * US, 0, GMP_MEM_DEVICE, tmp, 0, api_f);
        if (!use_marks) {
            tb_range_ev(&b, 0, GMP_REC_RANGE_POP, t + 6 * MS, 0, 0);
            tb_range_ev(&b, 0, GMP_REC_RANGE_POP, t + 7 * MS, 0, 0);
        } else {
            tb_range_ev(&b, 0, GMP_REC_MARK, t + 7 * MS, m_step, 0);
        }
    }
    if (!use_marks)
        tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T0 + 200 * MS, 0, 0);
    tb_close(&b);
}

/* The training loop (docs/report.md, "Growth over iterations"): exactly one verdict, at the leaking
 * range, at its true rate; the one-time state of step 1 (gradients, optimizer state) is no growth,
 * the enclosing ranges get none. */
static void test_train(void **state)
{
    char path[] = "/tmp/gmp_ana_train_XXXXXX";
    tmp_file(path);
    write_train(path, 0);
    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *t = doc->traces[0];
    const gmp_analysis_result *R = t->analysis;
    /* the iteration: train/step (train runs once; forward & co. are nested in step) */
    assert_int_equal(R->iter.kind, GMP_ANALYSIS_ITER_PUSH);
    assert_true(str_is(t, R->iter.range, "train/step"));
    assert_int_equal(R->iter.depth, 2);
    assert_int_equal(R->iter.iterations, 12);
    assert_int_equal(R->iter.window_from, 2); /* 2^(floor(log2 12) - 2) */
    assert_int_equal(R->nleaks, 1);
    const gmp_analysis_leak *L = &R->leaks[0];
    assert_true(str_is(t, L->range, "train/step/forward"));
    assert_int_equal(L->device, 0);
    assert_int_equal(L->iterations, 10);
    assert_int_equal(L->growth_bytes, 10 * TB_MiB);
    assert_true(L->rate_bytes == (double)TB_MiB);
    assert_int_equal(L->rises, 10);
    assert_int_equal(L->nsites, 1);
    const gmp_report_stack *st = &t->stacks[L->sites[0].site.stack];
    assert_true(str_is(t, st->frames[0].file, "train.py"));
    assert_int_equal(st->frames[0].line, 20);
    /* the device's total at each range's exits stays as data; only the owner is flagged */
    const gmp_analysis_growth *o = growth_of(t, "train/step/optimizer", 0);
    assert_non_null(o);
    assert_false(o->leak);
    assert_true(growth_of(t, "train/step/forward", 0)->leak);
    assert_false(growth_of(t, "train/step", 0)->leak);
    gmp_report_doc_free(doc);

    /* the same loop marked by MARK "step" instead of ranges: the iterations are the marks, and the
     * leak, outside any range, is owned by its stack */
    write_train(path, 1);
    doc = report_of(path, NULL);
    t = doc->traces[0];
    R = t->analysis;
    assert_int_equal(R->iter.kind, GMP_ANALYSIS_ITER_MARK);
    assert_true(str_is(t, R->iter.range, "step"));
    assert_int_equal(R->iter.depth, 0);
    assert_int_equal(R->iter.iterations, 12);
    assert_int_equal(R->nleaks, 1);
    L = &R->leaks[0];
    assert_int_equal(L->range, 0);
    assert_true(L->stack < t->nstacks);
    assert_int_equal(t->stacks[L->stack].frames[0].line, 20);
    assert_true(L->rate_bytes == (double)TB_MiB);
    assert_int_equal(R->ngrowth, 0); /* MARKs are no ranges */
    gmp_report_doc_free(doc);
    unlink(path);
}

/* A fragmentation OOM as a PyTorch snapshot records it (segments are pools at their address, blocks
 * inside): one 1 GiB segment with eight 96 MiB blocks 128 MiB apart (256 MiB free in 32 MiB
 * holes), then 200 MiB requested with 10 MiB free on a 16 GiB device; and a second device whose
 * live set is simply too big (capacity), and one where memory outside the allocator is the cause.
 */
static void write_frag_oom(const char *path)
{
    tb b;
    tb_open_opts(&b, path, "import=pytorch-snapshot");
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    tb_device(&b, 1, "Test GPU", 16 * TB_GiB);
    tb_device(&b, 2, "Test GPU", 16 * TB_GiB);
    uint32_t api = tb_str(&b, "CUDACachingAllocator.malloc");
    uint32_t r_fwd = tb_range(&b, "forward");
    uint32_t s_act =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "model.py"), tb_str(&b, "forward"), 8);
    const uint64_t seg = 0x7f0000000000ull;
    tb_pool(&b, 0, T0, 0, GMP_POOL_CREATE, seg, 0);
    tb_pool(&b, 0, T0 + 1 * US, 0, GMP_POOL_RESERVED, seg, TB_GiB);
    for (int i = 0; i < 8; i++)
        tb_alloc(&b, 0, T0 + (uint64_t)(2 + i) * US, 0, GMP_MEM_ASYNC_POOL,
                 seg + (uint64_t)i * 128 * TB_MiB, 96 * TB_MiB, api, r_fwd, s_act);
    oom_free(&b, 0, T0 + 20 * US, 0, api, 200 * TB_MiB, 10 * TB_MiB, r_fwd);
    /* device 1: 15 GiB live in a 15 GiB segment, 2 GiB asked, 512 MiB free: capacity */
    const uint64_t seg1 = 0x7f1000000000ull;
    tb_pool(&b, 0, T0 + 30 * US, 1, GMP_POOL_CREATE, seg1, 0);
    tb_pool(&b, 0, T0 + 31 * US, 1, GMP_POOL_RESERVED, seg1, 15 * TB_GiB);
    tb_alloc(&b, 0, T0 + 32 * US, 1, GMP_MEM_ASYNC_POOL, seg1, 15 * TB_GiB, api, r_fwd, s_act);
    oom_free(&b, 0, T0 + 33 * US, 1, api, 2 * TB_GiB, 512 * TB_MiB, r_fwd);
    /* device 2: 4 GiB live, 100 MiB free: 11.9 GiB is held outside the allocator */
    const uint64_t seg2 = 0x7f2000000000ull;
    tb_pool(&b, 0, T0 + 40 * US, 2, GMP_POOL_CREATE, seg2, 0);
    tb_pool(&b, 0, T0 + 41 * US, 2, GMP_POOL_RESERVED, seg2, 4 * TB_GiB);
    tb_alloc(&b, 0, T0 + 42 * US, 2, GMP_MEM_ASYNC_POOL, seg2, 4 * TB_GiB, api, r_fwd, s_act);
    oom_free(&b, 0, T0 + 43 * US, 2, api, 2 * TB_GiB, 100 * TB_MiB, r_fwd);
    tb_close(&b);
}

static void test_oom_verdicts(void **state)
{
    char path[] = "/tmp/gmp_ana_frag_XXXXXX";
    tmp_file(path);
    write_frag_oom(path);
    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *t = doc->traces[0];
    const gmp_analysis_result *R = t->analysis;
    assert_int_equal(R->nooms, 3);
    const gmp_analysis_oom *o = &R->ooms[0];
    assert_int_equal(o->verdict, GMP_ANALYSIS_OOM_FRAGMENTATION);
    assert_int_equal(o->blocks, GMP_ANALYSIS_BLOCKS_KNOWN);
    assert_int_equal(o->allocated, 768 * TB_MiB);
    assert_int_equal(o->reserved, TB_GiB);
    assert_int_equal(o->cached, 256 * TB_MiB);
    assert_int_equal(o->largest_free, 32 * TB_MiB);
    assert_int_equal(o->free_bytes, 10 * TB_MiB);
    assert_int_equal(o->total_bytes, 16 * TB_GiB);
    assert_true(o->has_outside);
    assert_int_equal(o->outside, 16 * TB_GiB - 10 * TB_MiB - TB_GiB);
    assert_int_equal(o->nlive, 1);
    assert_int_equal(o->live[0].bytes, 768 * TB_MiB);
    assert_int_equal(o->live[0].count, 8);
    assert_true(str_is(t, o->live[0].site.range, "forward"));
    assert_int_equal(o->live_total, 768 * TB_MiB);
    o = &R->ooms[1];
    assert_int_equal(o->verdict, GMP_ANALYSIS_OOM_CAPACITY);
    assert_int_equal(o->largest_free, 0);
    assert_int_equal(o->cached, 0);
    assert_int_equal(o->outside, 512 * TB_MiB); /* 16 - 0.5 - 15 GiB: not enough either */
    o = &R->ooms[2];
    assert_int_equal(o->verdict, GMP_ANALYSIS_OOM_OUTSIDE);
    assert_int_equal(o->outside, 12 * TB_GiB - 100 * TB_MiB);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* Each step frees the previous step's allocation: the exits stay flat, no growth. */
static void test_steady(void **state)
{
    char path[] = "/tmp/gmp_ana_steady_XXXXXX";
    tmp_file(path);
    write_steady(path);
    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *t = doc->traces[0];
    const gmp_analysis_growth *g = growth_of(t, "step", 0);
    assert_non_null(g);
    assert_false(g->leak);
    assert_int_equal(g->repetitions, 12);
    assert_true(g->rate_bytes == 0.0);
    assert_int_equal(g->total_bytes, 0);
    assert_int_equal(g->rises, 0);
    assert_int_equal(g->falls, 0);
    assert_int_equal(g->first_bytes, 66 * TB_MiB);
    for (size_t i = 0; i < t->analysis->ngrowth; i++)
        assert_false(t->analysis->growth[i].leak);
    assert_int_equal(t->analysis->iter.iterations, 12);
    assert_int_equal(t->analysis->iter.window_from, 2);
    assert_int_equal(t->analysis->nleaks, 0);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* Rising with noise: one step frees more than it leaks. */
static void test_noisy(void **state)
{
    char path[] = "/tmp/gmp_ana_noisy_XXXXXX";
    tmp_file(path);
    /* exits (above 64 MiB + the live leak allocations): cumulative sums of these, except step 4
     * frees step 3's allocation (2 MiB) and leaks 1 MiB: a fall */
    const uint64_t K = 256 * TB_KiB;
    uint64_t leak[10] = {4 * K, 5 * K, 3 * K, 8 * K, 4 * K, 4 * K, 5 * K, 3 * K, 4 * K, 4 * K};
    int fp[10] = {0, 0, 0, 0, 1, 0, 0, 0, 0, 0};
    write_steps(path, 10, leak, fp);
    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *t = doc->traces[0];
    /* the range's exits, as data */
    const gmp_analysis_growth *g = growth_of(t, "step", 0);
    assert_non_null(g);
    assert_int_equal(g->repetitions, 10);
    assert_int_equal(g->rises, 8);
    assert_int_equal(g->falls, 1);
    /* live at the exits: 4,9,12,20,16,20,25,28,32,36 (x K) */
    assert_int_equal(g->first_bytes, 64 * TB_MiB + 4 * K);
    assert_int_equal(g->last_bytes, 64 * TB_MiB + 36 * K);
    assert_int_equal(g->total_bytes, 32 * K);
    /* least-squares slope of 4,9,12,20,16,20,25,28,32,36 over 0..9: 274/82.5 K */
    double want = 274.0 / 82.5 * (double)K;
    assert_true(g->rate_bytes > want - 1.0 && g->rate_bytes < want + 1.0);
    /* the verdict, over iterations 2 to 10: 9 -> 36 K, one fall (20 -> 16) and 7 rises: a leak
     * (7 of 8 changes rise, >= 80%) */
    assert_int_equal(t->analysis->nleaks, 1);
    const gmp_analysis_leak *L = leak_of(t, "step/opt", 0);
    assert_non_null(L);
    assert_int_equal(L->growth_bytes, 27 * K);
    assert_int_equal(L->rises, 7);
    assert_int_equal(L->falls, 1);
    assert_int_equal(L->iterations, 8);
    assert_true(L->rate_bytes > 27.0 * (double)K / 8 - 1 &&
                L->rate_bytes < 27.0 * (double)K / 8 + 1);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* Grows during the first steps (warm-up), then flat: not a leak. */
static void test_warmup(void **state)
{
    char path[] = "/tmp/gmp_ana_warm_XXXXXX";
    tmp_file(path);
    uint64_t leak[10] = {TB_MiB, TB_MiB, TB_MiB, 0, 0, 0, 0, 0, 0, 0};
    write_steps(path, 10, leak, NULL);
    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *t = doc->traces[0];
    const gmp_analysis_growth *g = growth_of(t, "step", 0);
    assert_non_null(g);
    assert_true(g->rate_bytes > 0.0);
    assert_int_equal(g->rises, 2);
    assert_int_equal(g->total_bytes, 2 * TB_MiB);
    assert_false(g->leak);
    /* over iterations 2 to 10: one rise (step 3), then flat: rising less than every other
     * iteration, no leak */
    assert_int_equal(t->analysis->nleaks, 0);
    assert_int_equal(t->analysis->iter.window_from, 2);
    /* too few repetitions: 3 rising steps are listed but not a leak */
    gmp_report_doc_free(doc);
    write_steps(path, 3, leak, NULL);
    doc = report_of(path, NULL);
    g = growth_of(doc->traces[0], "step", 0);
    assert_non_null(g);
    assert_int_equal(g->repetitions, 3);
    assert_int_equal(g->rises, 2);
    assert_false(g->leak);
    assert_int_equal(doc->traces[0]->analysis->iter.kind, GMP_ANALYSIS_ITER_NONE);
    assert_int_equal(doc->traces[0]->analysis->nleaks, 0);
    gmp_report_doc_free(doc);
    /* two repetitions: not analysed */
    write_steps(path, 2, leak, NULL);
    doc = report_of(path, NULL);
    assert_null(growth_of(doc->traces[0], "step", 0));
    assert_int_equal(doc->traces[0]->analysis->ranges_checked, 0);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* Temporary allocations per range, exact; the threshold is an option. */
static void test_temporary(void **state)
{
    char path[] = "/tmp/gmp_ana_temp_XXXXXX";
    tmp_file(path);
    tb b;
    tb_open(&b, path);
    uint32_t api = tb_str(&b, "cudaMalloc");
    uint32_t fwd = tb_range(&b, "fwd");
    uint32_t bwd = tb_range(&b, "bwd");
    uint64_t t = T0;
    /* fwd: 3 x 2 MiB freed after 0.5 ms, 1 x 8 MiB freed after 2 ms, 1 x 1 MiB never freed */
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, t, fwd, 0);
    for (int i = 0; i < 3; i++) {
        uint64_t a = 0x1000000ull * (uint64_t)(i + 1);
        tb_alloc(&b, 0, t + 1 * MS, 0, GMP_MEM_DEVICE, a, 2 * TB_MiB, api, fwd, 0);
        tb_free(&b, 0, t + 1 * MS + 500 * US, 0, GMP_MEM_DEVICE, a, 0, api);
        t += 1 * MS;
    }
    tb_alloc(&b, 0, t + 1 * MS, 0, GMP_MEM_DEVICE, 0x9000000ull, 8 * TB_MiB, api, fwd, 0);
    tb_free(&b, 0, t + 3 * MS, 0, GMP_MEM_DEVICE, 0x9000000ull, 0, api);
    tb_alloc(&b, 0, t + 4 * MS, 0, GMP_MEM_DEVICE, 0xa000000ull, 1 * TB_MiB, api, fwd, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, t + 5 * MS, 0, 0);
    t += 10 * MS;
    /* bwd on device 1: 2 x 1 MiB freed after exactly 1 ms (temporary: within) and a pinned host
     * buffer freed after 10 us */
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, t, bwd, 0);
    tb_alloc(&b, 1, t + 1 * MS, 1, GMP_MEM_DEVICE, 0xb000000ull, TB_MiB, api, bwd, 0);
    tb_alloc(&b, 1, t + 1 * MS, 1, GMP_MEM_DEVICE, 0xc000000ull, TB_MiB, api, bwd, 0);
    tb_free(&b, 1, t + 2 * MS, 1, GMP_MEM_DEVICE, 0xb000000ull, 0, api);
    tb_free(&b, 1, t + 2 * MS, 1, GMP_MEM_DEVICE, 0xc000000ull, 0, api);
    tb_alloc(&b, 1, t + 3 * MS, 1, GMP_MEM_PINNED_HOST, 0xd000000ull, 4096, api, bwd, 0);
    tb_free(&b, 1, t + 3 * MS + 10 * US, 1, GMP_MEM_PINNED_HOST, 0xd000000ull, 0, api);
    tb_range_ev(&b, 1, GMP_REC_RANGE_POP, t + 4 * MS, 0, 0);
    tb_close(&b);

    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *tr = doc->traces[0];
    const gmp_analysis_result *R = tr->analysis;
    assert_int_equal(R->opts.temp_ns, 1 * MS);
    const gmp_analysis_temp *x = temp_of(tr, "fwd", 0);
    assert_non_null(x);
    assert_int_equal(x->allocs, 5);
    assert_int_equal(x->alloc_bytes, 15 * TB_MiB);
    assert_int_equal(x->temp_count, 3);
    assert_int_equal(x->temp_bytes, 6 * TB_MiB);
    assert_int_equal(x->temp_life_ns, 3 * 500 * US);
    const gmp_analysis_temp *y = temp_of(tr, "bwd", 1);
    assert_non_null(y);
    assert_int_equal(y->allocs, 3);
    assert_int_equal(y->temp_count, 3);
    assert_int_equal(y->temp_bytes, 2 * TB_MiB + 4096);
    assert_int_equal(y->temp_life_ns, 2 * MS + 10 * US);
    assert_int_equal(R->ntemp, 2);
    assert_ptr_equal(&R->temp[0], x); /* most temporary bytes first */
    assert_int_equal(R->temp_count, 6);
    assert_int_equal(R->temp_bytes, 8 * TB_MiB + 4096);
    assert_int_equal(R->allocs, 8);
    /* sites: (dev 0, device, fwd), (dev 1, device, bwd), (dev 1, pinned, bwd) */
    assert_int_equal(R->ntemp_sites, 3);
    assert_int_equal(R->temp_sites[0].temp_count, 3);
    assert_int_equal(R->temp_sites[0].allocs, 5);
    assert_int_equal(R->temp_sites[1].temp_count, 2);
    assert_int_equal(R->temp_sites[2].temp_count, 1);
    assert_int_equal(R->temp_sites[2].site.kind, GMP_MEM_PINNED_HOST);
    gmp_report_doc_free(doc);

    gmp_report_opts o;
    memset(&o, 0, sizeof o);
    o.analysis.temp_ns = 3 * MS;
    doc = report_of(path, &o);
    x = temp_of(doc->traces[0], "fwd", 0);
    assert_non_null(x);
    assert_int_equal(x->temp_count, 4);
    assert_int_equal(x->temp_bytes, 14 * TB_MiB);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* What outlives the range that made it is not temporary, however fast: the demo's optimizer
 * state (made in the optimizer range, kept after it) on a simulated device that runs a step in
 * microseconds. The range is the push/pop range of the allocating thread: another thread leaving
 * a range of the same path changes nothing; an allocation outside any range keeps the time rule
 * alone. */
static void test_temporary_outlives_range(void **state)
{
    char path[] = "/tmp/gmp_ana_tempr_XXXXXX";
    tmp_file(path);
    tb b;
    tb_open(&b, path);
    uint32_t api = tb_str(&b, "cudaMalloc");
    uint32_t opt = tb_range(&b, "opt");
    uint64_t t = T0;
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, t, opt, 0);
    /* freed inside opt: temporary */
    tb_alloc(&b, 0, t + 1 * US, 0, GMP_MEM_DEVICE, 0x1000000ull, 1 * TB_MiB, api, opt, 0);
    tb_free(&b, 0, t + 2 * US, 0, GMP_MEM_DEVICE, 0x1000000ull, 0, api);
    /* kept after opt closes, freed 100 us after it was made: not temporary */
    tb_alloc(&b, 0, t + 3 * US, 0, GMP_MEM_DEVICE, 0x2000000ull, 2 * TB_MiB, api, opt, 0);
    /* thread 1 closes its own opt: thread 0's is still open */
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, t + 4 * US, opt, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_POP, t + 5 * US, 0, 0);
    tb_alloc(&b, 0, t + 6 * US, 0, GMP_MEM_DEVICE, 0x3000000ull, 4 * TB_MiB, api, opt, 0);
    tb_free(&b, 0, t + 7 * US, 0, GMP_MEM_DEVICE, 0x3000000ull, 0, api);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, t + 10 * US, 0, 0);
    tb_free(&b, 0, t + 103 * US, 0, GMP_MEM_DEVICE, 0x2000000ull, 0, api);
    /* no range: the time rule alone */
    tb_alloc(&b, 0, t + 200 * US, 0, GMP_MEM_DEVICE, 0x4000000ull, 8 * TB_MiB, api, 0, 0);
    tb_free(&b, 0, t + 300 * US, 0, GMP_MEM_DEVICE, 0x4000000ull, 0, api);
    tb_close(&b);

    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *tr = doc->traces[0];
    const gmp_analysis_result *R = tr->analysis;
    const gmp_analysis_temp *x = temp_of(tr, "opt", 0);
    assert_non_null(x);
    assert_int_equal(x->allocs, 3);
    assert_int_equal(x->temp_count, 2);
    assert_int_equal(x->temp_bytes, 5 * TB_MiB);
    assert_int_equal(R->temp_count, 3);
    assert_int_equal(R->temp_bytes, 13 * TB_MiB);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* Overhead for a stream-ordered pool, and an OOM explained by fragmentation. */
static void test_overhead_pool(void **state)
{
    char path[] = "/tmp/gmp_ana_pool_XXXXXX";
    tmp_file(path);
    tb b;
    tb_open(&b, path);
    tb_device(&b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    uint32_t api = tb_str(&b, "cudaMallocAsync");
    uint32_t api_m = tb_str(&b, "cudaMalloc");
    uint64_t pool = 0x77;
    uint64_t t = T0;
    tb_pool(&b, 0, t, 0, GMP_POOL_CREATE, pool, 0);
    tb_pool(&b, 0, t + 1 * MS, 0, GMP_POOL_RESERVED, pool, 128 * TB_MiB);
    tb_alloc(&b, 0, t + 2 * MS, 0, GMP_MEM_DEVICE, 0x10000000ull, 16 * TB_MiB, api_m, 0, 0);
    tb_mem m = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, api,  0,
                0, 0x20000000ull,      64 * TB_MiB,    pool, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, t + 3 * MS, &m);
    m.address = 0x30000000ull;
    m.size = 32 * TB_MiB;
    tb_memrec(&b, 0, GMP_REC_ALLOC, t + 4 * MS, &m); /* peak allocated: 112 MiB */
    m.size = 0;
    tb_memrec(&b, 0, GMP_REC_FREE, t + 5 * MS, &m);                       /* 80 MiB */
    tb_pool(&b, 0, t + 6 * MS, 0, GMP_POOL_RESERVED, pool, 256 * TB_MiB); /* reserved 272 MiB */
    tb_oom(&b, 0, t + 7 * MS, 0, api, 100 * TB_MiB, 0, 0);
    tb_pool(&b, 0, t + 8 * MS, 0, GMP_POOL_RESERVED, pool, 96 * TB_MiB);
    tb_close(&b);

    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *tr = doc->traces[0];
    const gmp_analysis_result *R = tr->analysis;
    assert_int_equal(R->noverhead, 1);
    const gmp_analysis_overhead *o = &R->overhead[0];
    assert_int_equal(o->device, 0);
    const gmp_analysis_point *p = &o->at_peak_allocated;
    assert_int_equal(p->time_ns, t + 4 * MS);
    assert_int_equal(p->allocated, 112 * TB_MiB);
    assert_int_equal(p->reserved, 144 * TB_MiB);
    assert_int_equal(p->overhead, 32 * TB_MiB);
    assert_int_equal(p->pool_reserved, 128 * TB_MiB);
    assert_int_equal(p->pool_allocated, 96 * TB_MiB);
    p = &o->at_peak_reserved;
    assert_int_equal(p->time_ns, t + 6 * MS);
    assert_int_equal(p->allocated, 80 * TB_MiB);
    assert_int_equal(p->reserved, 272 * TB_MiB);
    assert_int_equal(p->overhead, 192 * TB_MiB);
    assert_int_equal(p->pool_reserved, 256 * TB_MiB);
    assert_int_equal(p->pool_allocated, 64 * TB_MiB);
    /* the report's own peaks agree */
    assert_int_equal(tr->devices[0].d.peak_reserved, 272 * TB_MiB);
    assert_int_equal(tr->devices[0].d.peak_reserved_time_ns, t + 6 * MS);
    p = &o->at_end;
    assert_int_equal(p->time_ns, t + 8 * MS);
    assert_int_equal(p->allocated, 80 * TB_MiB);
    assert_int_equal(p->reserved, 112 * TB_MiB);
    assert_int_equal(p->overhead, 32 * TB_MiB);
    /* OOM of 100 MiB with 192 MiB held free: fragmentation */
    assert_int_equal(R->nooms, 1);
    assert_int_equal(R->ooms[0].requested, 100 * TB_MiB);
    assert_int_equal(R->ooms[0].cached, 192 * TB_MiB);
    assert_int_equal(R->ooms[0].verdict, GMP_ANALYSIS_OOM_FRAGMENTATION);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* The leak criterion of a site on its own, over a window of 10 iterations. */
static void test_criterion(void **state)
{
    gmp_analysis_opts o = {0};
    o.min_reps = 4;
    o.rise_frac = 0.8;
    gmp_analysis_growth_site g;
    memset(&g, 0, sizeof g);
    g.growth_bytes = 1000;
    g.rises = 10;
    assert_true(gmp_analysis_site_leaks(&g, 10, &o));
    g.rises = 7, g.falls = 2; /* 7/9 < 0.8 */
    assert_false(gmp_analysis_site_leaks(&g, 10, &o));
    g.rises = 5, g.falls = 0; /* every other iteration leaks */
    assert_true(gmp_analysis_site_leaks(&g, 10, &o));
    g.rises = 4; /* rising less often than every other iteration: e.g. allocated once */
    assert_false(gmp_analysis_site_leaks(&g, 10, &o));
    g.rises = 1; /* one allocation in the window (lazily created state) */
    assert_false(gmp_analysis_site_leaks(&g, 10, &o));
    g.rises = 10;
    g.growth_bytes = 0; /* rose and fell back */
    assert_false(gmp_analysis_site_leaks(&g, 10, &o));
    g.growth_bytes = 1000;
    assert_false(gmp_analysis_site_leaks(&g, 0, &o));
}

/* Many exits of a range: the series stays bounded and the regression exact. */
static void test_many(void **state)
{
    char path[] = "/tmp/gmp_ana_many_XXXXXX";
    tmp_file(path);
    enum { N = 1000 };
    static uint64_t leak[N];
    for (int i = 0; i < N; i++)
        leak[i] = 4096;
    write_steps(path, N, leak, NULL);
    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_analysis_growth *g = growth_of(doc->traces[0], "step", 0);
    assert_non_null(g);
    assert_false(g->leak); /* step/opt owns it */
    assert_int_equal(g->repetitions, N);
    /* the window: from iteration 128 (2^(floor(log2 1000) - 2)) to 1000 */
    const gmp_analysis_result *R = doc->traces[0]->analysis;
    assert_int_equal(R->iter.window_from, 128);
    assert_true(R->iter.window_from * 4 <= N); /* the warm-up left out: at most a quarter */
    assert_int_equal(R->nleaks, 1);
    assert_int_equal(R->leaks[0].iterations, N - 128);
    assert_int_equal(R->leaks[0].growth_bytes, (N - 128) * 4096ull);
    assert_true(R->leaks[0].rate_bytes == 4096.0);
    assert_true(g->rate_bytes > 4095.99 && g->rate_bytes < 4096.01);
    assert_true(g->nseries <= GMP_ANALYSIS_SERIES && g->nseries >= GMP_ANALYSIS_SERIES / 2);
    assert_int_equal(g->series_stride, 16);
    assert_int_equal(g->series[1], 64 * TB_MiB + 17 * 4096);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* The n-th block (depth first, 0 the first) of a kind and key (NULL: any) under b. */
static const gmp_doc_block *doc_find(const gmp_doc_block *b, gmp_doc_kind kind, const char *key,
                                     size_t *n)
{
    for (const gmp_doc_block *c = b->first; c; c = c->next) {
        if (c->kind == kind && (!key || (c->key && strcmp(c->key, key) == 0)) && (*n)-- == 0)
            return c;
        const gmp_doc_block *f = doc_find(c, kind, key, n);
        if (f)
            return f;
    }
    return NULL;
}

static const gmp_doc_block *doc_nth(const gmp_doc *d, gmp_doc_kind kind, const char *key, size_t n)
{
    return doc_find(gmp_doc_root_c(d), kind, key, &n);
}

static const gmp_doc_val *line_val(const gmp_doc_line *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].key && strcmp(l->v[i].key, key) == 0)
            return &l->v[i];
    return NULL;
}

/* The section whose title begins with s (our wording), or NULL. */
static const gmp_doc_block *doc_section(const gmp_doc *d, const char *s)
{
    const gmp_doc_block *b;
    for (size_t n = 0; (b = doc_nth(d, GMP_DOC_SECTION, NULL, n)); n++)
        if (b->title.n && b->title.v[0].type == GMP_DOC_LIT && b->title.v[0].s.len >= strlen(s) &&
            memcmp(b->title.v[0].s.ptr, s, strlen(s)) == 0)
            return b;
    return NULL;
}

/* The analyses' blocks of the leaking trace (gmp_report_build_analysis), asserted on the document
 * itself: the leak is a PROBLEM verdict whose rate is typed bytes, with its growing site; every
 * section is built; --device filters them. */
static void test_doc_blocks(void **state)
{
    char path[] = "/tmp/gmp_ana_doc_XXXXXX";
    tmp_file(path);
    write_leak(path);
    gmp_report_doc *doc = report_of(path, NULL);
    const gmp_report_trace *t = doc->traces[0];
    gmp_report_view v = {.device = INT64_MIN};

    gmp_doc *d = gmp_doc_new();
    assert_non_null(d);
    gmp_doc_block *tr = gmp_doc_section(d, gmp_doc_root(d), NULL, 0, "trace");
    gmp_report_build_analysis(d, tr, t, &v, NULL);
    assert_int_equal(gmp_doc_error(d), GMP_OK);
    const gmp_doc_block *a = doc_nth(d, GMP_DOC_SECTION, "analysis", 0);
    assert_non_null(a);
    assert_ptr_equal(a->parent, tr);

    /* growth: one verdict, at step/opt, 1 MiB per iteration; the repeating ranges as data */
    assert_non_null(doc_section(d, "Growth over iterations"));
    const gmp_doc_block *g = doc_nth(d, GMP_DOC_VERDICT, "leaks", 0);
    assert_non_null(g);
    assert_null(doc_nth(d, GMP_DOC_VERDICT, "leaks", 1));
    assert_int_equal(g->severity, GMP_DOC_PROBLEM);
    assert_true(g->flags & GMP_DOC_ITEM);
    assert_false(g->flags & GMP_DOC_DATA);
    const gmp_doc_val *rv = line_val(&g->title, "range");
    assert_non_null(rv);
    assert_int_equal(rv->type, GMP_DOC_STR);
    assert_int_equal(rv->s.len, 8);
    assert_memory_equal(rv->s.ptr, "step/opt", 8);
    const gmp_doc_val *rate = line_val(&g->title, "rate_bytes_per_iteration");
    assert_non_null(rate);
    assert_int_equal(rate->type, GMP_DOC_BYTES);
    assert_int_equal(rate->u, TB_MiB);
    assert_int_equal(line_val(&g->title, "growth_bytes")->u, 8 * TB_MiB);
    assert_int_equal(line_val(&g->title, "iterations")->u, 8);
    assert_int_equal(line_val(&g->title, "from_iteration")->u, 2);
    const gmp_doc_block *sites = doc_find(g, GMP_DOC_TABLE, "sites", &(size_t){0});
    assert_non_null(sites);
    assert_int_equal(sites->nrows, 1);
    size_t grown = 0;
    for (size_t c = 0; c < sites->ncols; c++)
        if (sites->cols[c].key && strcmp(sites->cols[c].key, "growth_bytes") == 0) {
            assert_int_equal(sites->cols[c].type, GMP_DOC_BYTES);
            assert_int_equal(sites->cells[c].u, 8 * TB_MiB);
            grown++;
        }
    assert_int_equal(grown, 1);
    const gmp_doc_block *g2 = doc_nth(d, GMP_DOC_VERDICT, "growth", 0);
    assert_non_null(g2);
    assert_true(g2->flags & GMP_DOC_DATA);
    const gmp_doc_block *ser = doc_find(g2, GMP_DOC_SERIES, "series", &(size_t){0});
    assert_non_null(ser);
    assert_int_equal(ser->npoints, 10);
    assert_int_equal(ser->nscols, 1);
    assert_true(ser->flags & GMP_DOC_DATA);
    assert_int_equal(ser->x[0], 2); /* exit 1 is [1, 2) */
    assert_int_equal(ser->y[9], 74 * TB_MiB);
    assert_non_null(doc_nth(d, GMP_DOC_SECTION, "iterations", 0));

    /* temporaries: 10 of 21 allocations, one range, one site */
    assert_non_null(doc_section(d, "Temporary allocations (freed within "));
    const gmp_doc_block *tt = doc_nth(d, GMP_DOC_TABLE, "temporary", 0);
    assert_non_null(tt);
    assert_int_equal(tt->nrows, 1);
    assert_false(tt->flags & GMP_DOC_DATA);
    assert_non_null(doc_nth(d, GMP_DOC_TABLE, "temporary_sites", 0));
    assert_non_null(doc_nth(d, GMP_DOC_SECTION, "temporary_totals", 0));
    /* overhead: device 0 never had any: in the JSON only */
    const gmp_doc_block *ov = doc_nth(d, GMP_DOC_SECTION, "overhead", 0);
    assert_non_null(ov);
    assert_true(ov->flags & GMP_DOC_DATA);
    assert_null(doc_section(d, "Allocator overhead"));
    /* no OOM: no verdict, an empty `ooms` */
    assert_null(doc_nth(d, GMP_DOC_VERDICT, "ooms", 0));
    assert_non_null(doc_nth(d, GMP_DOC_TABLE, "ooms", 0));
    gmp_doc_free(d);

    /* another device: no leak, and a notice says so */
    v.device = 1;
    d = gmp_doc_new();
    assert_non_null(d);
    gmp_report_build_analysis(d, gmp_doc_root(d), t, &v, NULL);
    assert_int_equal(gmp_doc_error(d), GMP_OK);
    assert_null(doc_nth(d, GMP_DOC_VERDICT, "leaks", 0));
    const gmp_doc_block *no = doc_nth(d, GMP_DOC_NOTICE, NULL, 1);
    assert_non_null(no);
    assert_int_equal(no->severity, GMP_DOC_OK);
    assert_int_equal(doc_nth(d, GMP_DOC_TABLE, "temporary", 0)->nrows, 0);
    gmp_doc_free(d);
    gmp_report_doc_free(doc);
    unlink(path);
}

/* The fixture with every section: one PROBLEM verdict per OOM, with its verdict's name as data
 * and the wording of why. */
static void test_doc_ooms(void **state)
{
    char path[] = "/tmp/gmp_ana_docoom_XXXXXX";
    tmp_file(path);
    write_analyses(path);
    gmp_report_doc *doc = report_of(path, NULL);
    gmp_report_view v = {.device = INT64_MIN};
    gmp_doc *d = gmp_doc_new();
    assert_non_null(d);
    gmp_report_build_analysis(d, gmp_doc_root(d), doc->traces[0], &v, NULL);
    assert_int_equal(gmp_doc_error(d), GMP_OK);
    assert_non_null(doc_section(d, "Out of memory, why"));
    static const char *const names[] = {"fragmentation", "fragmentation", "outside_allocator",
                                        "capacity"};
    for (size_t i = 0; i < 4; i++) {
        const gmp_doc_block *o = doc_nth(d, GMP_DOC_VERDICT, "ooms", i);
        assert_non_null(o);
        assert_int_equal(o->severity, GMP_DOC_PROBLEM);
        const gmp_doc_val *vn = line_val(&o->title, "verdict");
        assert_non_null(vn);
        assert_true(vn->flags & GMP_DOC_DATA);
        assert_int_equal(vn->s.len, strlen(names[i]));
        assert_memory_equal(vn->s.ptr, names[i], vn->s.len);
        assert_int_equal(line_val(&o->title, "requested_bytes")->type, GMP_DOC_BYTES);
    }
    assert_null(doc_nth(d, GMP_DOC_VERDICT, "ooms", 4));

    /* overhead: both devices, three moments each; device 0 had some: shown */
    assert_non_null(doc_section(d, "Allocator overhead"));
    const gmp_doc_block *ov = doc_nth(d, GMP_DOC_SECTION, "overhead", 0);
    assert_non_null(ov);
    assert_false(ov->flags & GMP_DOC_DATA);
    assert_non_null(doc_nth(d, GMP_DOC_SECTION, "overhead", 1));
    const gmp_doc_block *ot = doc_find(ov, GMP_DOC_TABLE, NULL, &(size_t){0});
    assert_non_null(ot);
    assert_int_equal(ot->nrows, 3);
    assert_non_null(doc_find(ov, GMP_DOC_SECTION, "at_peak_reserved", &(size_t){0}));
    gmp_doc_free(d);
    gmp_report_doc_free(doc);
    unlink(path);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "write-leak") == 0) {
        write_leak(argv[2]);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "write-train") == 0) {
        write_train(argv[2], 0);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "write-frag-oom") == 0) {
        write_frag_oom(argv[2]);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "write-growth") == 0) {
        write_growth(argv[2]);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "write-steady") == 0) {
        write_steady(argv[2]);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "write-analyses") == 0) {
        write_analyses(argv[2]);
        return 0;
    }
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_leak),          cmocka_unit_test(test_steady),
        cmocka_unit_test(test_noisy),         cmocka_unit_test(test_warmup),
        cmocka_unit_test(test_temporary),     cmocka_unit_test(test_temporary_outlives_range),
        cmocka_unit_test(test_overhead_pool), cmocka_unit_test(test_criterion),
        cmocka_unit_test(test_many),          cmocka_unit_test(test_doc_blocks),
        cmocka_unit_test(test_doc_ooms),      cmocka_unit_test(test_train),
        cmocka_unit_test(test_oom_verdicts),
    };
    if (argc == 2) {
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (strcmp(all[i].name, argv[1]) == 0)
                return _cmocka_run_group_tests(argv[1], &all[i], 1, NULL, NULL);
        fprintf(stderr, "no test %s\n", argv[1]);
        return 2;
    }
    return cmocka_run_group_tests(all, NULL, NULL);
}
