/* gmp_gen_trace: writes a small, deterministic gpumemprof trace that holds every record type.
 *
 *   gmp_gen_trace OUT.zst [--steps N] [--complete]
 *
 * --complete leaves out the LOST record (and so the only reason for a reader to call the trace
 * incomplete).
 * Uses the trace writer (formats/trace/gmp_writer.h) without its thread. The content stands for a
 * short PyTorch-like training job on two devices and three threads: nested NVTX ranges
 * (train/step/forward|backward), allocations and frees of every memory kind, a stream-ordered
 * pool, VMM, a failed allocation and an out-of-memory error, device samples, context and stream
 * events, an alert, a NOTICE and a LOST record. Strings include non-ASCII UTF-8, an invalid byte,
 * quotes and control characters so that every output's escaping is exercised. Each training step
 * ends with a SYNC and becomes its own zstd frame, so a cut file loses whole steps.
 *
 * Every time in the trace is fixed, except the writer's END record, which carries the time at
 * which the writer closed the file (it is the only event of thread 0). Used by the CLI tests
 * (tests/cli) and by scripts/demo until the agent exists. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_writer.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

#define TID_MAIN 1001
#define TID_AUTOGRAD 1002
#define TID_LOADER 1003

typedef struct gen {
    gmp_writer *w;
    gmp_wthread *th[3];
    uint64_t now; /* the time of the next event */
    int failed;
} gen;

static gmp_str mkstr(const char *s, size_t n)
{
    gmp_str r = {s, (uint32_t)n};
    return r;
}

static gmp_str cstr(const char *s)
{
    return mkstr(s, strlen(s));
}

static uint32_t S(gen *g, const char *s)
{
    uint32_t id = gmp_writer_string(g->w, s, strlen(s));
    if (!id)
        g->failed = 1;
    return id;
}

static void define(gen *g, const gmp_rec *r)
{
    if (gmp_writer_define(g->w, r) != GMP_OK)
        g->failed = 1;
}

/* Appends an event on thread i (0 main, 1 autograd, 2 loader), 1.5 us after the previous one. */
static void ev(gen *g, int i, gmp_rec *r)
{
    g->now += 1500;
    r->time_ns = g->now;
    if (gmp_wthread_event(g->th[i], r) != 0)
        g->failed = 1;
}

static void range_ev(gen *g, int i, unsigned type, uint32_t range, uint64_t handle)
{
    gmp_rec r = {.type = type};
    r.u.rev.range = range;
    r.u.rev.handle = handle;
    ev(g, i, &r);
}

static void mem(gen *g, int i, unsigned type, int32_t device, unsigned kind, unsigned flags,
                uint32_t api, uint64_t address, uint64_t size, uint64_t stream, uint32_t stack,
                uint32_t range, int32_t result, uint64_t handle)
{
    static uint64_t correlation = 100;
    gmp_rec r = {.type = type};
    r.u.mem.device = device;
    r.u.mem.kind = kind;
    r.u.mem.flags = flags;
    r.u.mem.api = api;
    r.u.mem.address = address;
    r.u.mem.size = size;
    r.u.mem.stream = stream;
    r.u.mem.stack = stack;
    r.u.mem.range = range;
    r.u.mem.correlation = (flags & GMP_MEMF_ACTIVITY) ? 0 : ++correlation;
    r.u.mem.result = result;
    r.u.mem.handle = handle;
    ev(g, i, &r);
}

static int usage(void)
{
    fprintf(stderr, "usage: gmp_gen_trace OUT.zst [--steps N] [--complete]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *outpath = NULL;
    long steps = 3;
    int complete = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            char *end;
            steps = strtol(argv[++i], &end, 10);
            if (*end || steps < 1 || steps > 100000)
                return usage();
        } else if (strcmp(argv[i], "--complete") == 0) {
            complete = 1;
        } else if (argv[i][0] == '-' || outpath) {
            return usage();
        } else {
            outpath = argv[i];
        }
    }
    if (!outpath)
        return usage();
    int fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "gmp_gen_trace: %s: %s\n", outpath, strerror(errno));
        return 1;
    }

    static const char cmdline[] = "python\0train.py\0--name\0r\xc3\xa9sum\xc3\xa9 \"v1\"";
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.format_version = GMP_FORMAT_VERSION;
    h.min_reader_version = GMP_FORMAT_MIN_READER;
    h.producer = cstr("gmp_gen_trace (gpumemprof tests)");
    h.pid = 4242;
    h.ppid = 4200;
    h.hostname = cstr("gen-host");
    h.cmdline = mkstr(cmdline, sizeof cmdline - 1);
    h.rank = 0;
    h.start_wall_ns = 1700000000000000000ull;
    h.start_trace_ns = 1000000;
    h.clock = cstr("CLOCK_MONOTONIC");
    h.options = cstr("stacks=native,python ranges=nvtx");

    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    gen g = {.now = 2000000};
    gmp_err e = gmp_writer_open(&g.w, fd, &o, &h);
    if (e != GMP_OK) {
        fprintf(stderr, "gmp_gen_trace: %s: %s\n", outpath, gmp_err_str(e));
        return 1;
    }

    /* definitions: devices, threads, a module */
    gmp_rec d = {.type = GMP_REC_DEVICE};
    d.u.device.id = 0;
    d.u.device.name = cstr("NVIDIA H100 80GB HBM3");
    for (int i = 0; i < 16; i++)
        d.u.device.uuid[i] = (uint8_t)(0x10 + i);
    d.u.device.total_bytes = 80 * GiB;
    d.u.device.cc_major = 9;
    d.u.device.cc_minor = 0;
    define(&g, &d);
    d.u.device.id = 1;
    d.u.device.name = cstr("NVIDIA A100-SXM4-40GB");
    for (int i = 0; i < 16; i++)
        d.u.device.uuid[i] = (uint8_t)(0xa0 + i);
    d.u.device.total_bytes = 40 * GiB;
    d.u.device.cc_major = 8;
    define(&g, &d);

    static const struct {
        uint32_t tid;
        const char *name;
    } threads[3] = {{TID_MAIN, "python"},
                    {TID_AUTOGRAD, "pt_autograd_0"},
                    {TID_LOADER, "loader \"w0\"\t\x01\xff"}};
    for (int i = 0; i < 3; i++) {
        gmp_rec t = {.type = GMP_REC_THREAD};
        t.u.thread.tid = threads[i].tid;
        t.u.thread.name = cstr(threads[i].name);
        define(&g, &t);
        g.th[i] = gmp_writer_thread(g.w, threads[i].tid);
        if (!g.th[i])
            g.failed = 1;
    }
    static const char build_id[] = "\x5e\x1f\x00\x42\xab\xcd\xef\x01";
    gmp_rec m = {.type = GMP_REC_MODULE};
    m.u.module.id = 1;
    m.u.module.path = cstr("/usr/lib/python3/site-packages/torch/lib/libtorch_cuda.so");
    m.u.module.base = 0x7f0000000000ull;
    m.u.module.lo = 0x7f0000001000ull;
    m.u.module.size = 0x2000000;
    m.u.module.build_id = mkstr(build_id, sizeof build_id - 1);
    define(&g, &m);

    /* strings, stacks and ranges */
    uint32_t api_malloc = S(&g, "cudaMalloc"), api_free = S(&g, "cudaFree");
    uint32_t api_async = S(&g, "cudaMallocAsync"), api_free_async = S(&g, "cudaFreeAsync");
    uint32_t api_host = S(&g, "cudaMallocHost"), api_managed = S(&g, "cudaMallocManaged");
    uint32_t api_create = S(&g, "cuMemCreate"), api_map = S(&g, "cuMemMap");
    uint32_t api_reserve = S(&g, "cuMemAddressReserve"), api_reg = S(&g, "cudaHostRegister");
    uint32_t api_array = S(&g, "cudaMallocArray"), api_mem2 = S(&g, "MEMORY2");
    uint32_t api_nvtx = S(&g, "nvtxMemRegionsRegister");
    uint32_t dom = S(&g, "pytorch");
    uint32_t n_train = S(&g, "train"), n_step = S(&g, "step"), n_fwd = S(&g, "forward");
    uint32_t n_bwd = S(&g, "backward"), n_load = S(&g, "load batch");
    uint32_t n_odd = S(&g, "na\xc3\xafve \"q\"\\\x7f\xfe");
    uint32_t n_ckpt = S(&g, "checkpoint");
    uint32_t f_py = S(&g, "train.py"), fn_main = S(&g, "main"), fn_fwd = S(&g, "forward");
    uint32_t r_train = gmp_writer_range(g.w, 0, dom, n_train);
    uint32_t r_step = gmp_writer_range(g.w, r_train, dom, n_step);
    uint32_t r_fwd = gmp_writer_range(g.w, r_step, dom, n_fwd);
    uint32_t r_bwd = gmp_writer_range(g.w, r_step, dom, n_bwd);
    uint32_t r_odd = gmp_writer_range(g.w, r_fwd, 0, n_odd);
    uint32_t r_load = gmp_writer_range(g.w, 0, 0, n_load);
    uint32_t r_ckpt = gmp_writer_range(g.w, 0, 0, n_ckpt);
    uint32_t s_py1 = gmp_writer_stack_python(g.w, 0, f_py, fn_main, 120);
    uint32_t s_py2 = gmp_writer_stack_python(g.w, s_py1, f_py, fn_fwd, 42);
    uint32_t s_n1 = gmp_writer_stack_native(g.w, 0, 0x7f0000123456ull);
    uint32_t s_n2 = gmp_writer_stack_native(g.w, s_n1, 0x7f0000234567ull);
    if (!r_train || !r_step || !r_fwd || !r_bwd || !r_odd || !r_load || !r_ckpt || !s_py2 || !s_n2)
        g.failed = 1;

    const uint64_t pool = 0x5000;
    const uint64_t stream = 7;
    for (long step = 0; step < steps; step++) {
        uint64_t off = (uint64_t)step * 0x10000000ull;
        /* main thread: the step's ranges and device allocations */
        if (step == 0) {
            range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_train, 0);
            gmp_rec rs = {.type = GMP_REC_RESOURCE};
            rs.u.resource.device = 0;
            rs.u.resource.op = GMP_RES_CONTEXT_CREATE;
            rs.u.resource.handle = 1;
            ev(&g, 0, &rs);
            rs.u.resource.op = GMP_RES_STREAM_CREATE;
            rs.u.resource.handle = stream;
            ev(&g, 0, &rs);
            gmp_rec p = {.type = GMP_REC_POOL};
            p.u.pool.device = 0;
            p.u.pool.op = GMP_POOL_CREATE;
            p.u.pool.pool = pool;
            ev(&g, 0, &p);
            p.u.pool.op = GMP_POOL_THRESHOLD;
            p.u.pool.value = 1 * GiB;
            ev(&g, 0, &p);
            /* static memory of a loaded module, seen only through an activity record */
            mem(&g, 0, GMP_REC_ALLOC, 0, GMP_MEM_STATIC, GMP_MEMF_ACTIVITY, api_mem2,
                0x7e0000000000ull, 64 * 1024, 0, 0, 0, 0, 0);
        }
        range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_step, 0);
        range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_fwd, 0);
        mem(&g, 0, GMP_REC_ALLOC, 0, GMP_MEM_DEVICE, 0, api_malloc, 0x7f1000000000ull + off,
            256 * MiB, 0, s_py2, r_fwd, 0, 0);
        range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_odd, 0);
        mem(&g, 0, GMP_REC_ALLOC, 0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, api_async,
            0x7f2000000000ull + off, 3 * MiB + 512, stream, s_n2, r_odd, 0, pool);
        gmp_rec p = {.type = GMP_REC_POOL};
        p.u.pool.device = 0;
        p.u.pool.op = GMP_POOL_RESERVED;
        p.u.pool.pool = pool;
        p.u.pool.value = 32 * MiB;
        ev(&g, 0, &p);
        range_ev(&g, 0, GMP_REC_MARK, r_ckpt, 0);
        range_ev(&g, 0, GMP_REC_RANGE_POP, r_odd, 0);
        range_ev(&g, 0, GMP_REC_RANGE_POP, r_fwd, 0);
        range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_bwd, 0);

        /* autograd thread: host, managed and VMM memory on device 1 */
        mem(&g, 1, GMP_REC_ALLOC, -1, GMP_MEM_PINNED_HOST, 0, api_host, 0x200000000ull + off,
            2 * MiB, 0, s_n1, 0, 0, 0);
        mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_VA_RESERVE, 0, api_reserve, 0x7f8000000000ull + off,
            1 * GiB, 0, s_n1, 0, 0, 0);
        mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_VMM_PHYSICAL, 0, api_create, 0, 2 * MiB, 0, s_n2,
            r_bwd, 0, 0x9000 + (uint64_t)step);
        mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_VMM_MAPPING, 0, api_map, 0x7f8000000000ull + off,
            2 * MiB, 0, s_n2, r_bwd, 0, 0x9000 + (uint64_t)step);
        mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_MANAGED, 0, api_managed, 0x7f3000000000ull + off,
            10 * MiB, 0, s_py1, r_bwd, 0, 0);
        mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_ARRAY, 0, api_array, 0x7f4000000000ull + off, 4 * MiB,
            0, 0, 0, 0, 0);
        mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_NVTX_REGION, 0, api_nvtx, 0x7f4000001000ull + off,
            4096, 0, 0, r_bwd, 0, 0xbeef);

        /* loader thread: registered host memory, a start/end range, a sample */
        range_ev(&g, 2, GMP_REC_RANGE_START, r_load, 77 + (uint64_t)step);
        mem(&g, 2, GMP_REC_ALLOC, -1, GMP_MEM_REGISTERED_HOST, 0, api_reg, 0x300000000ull + off,
            8 * MiB, 0, 0, 0, 0, 0);
        gmp_rec s = {.type = GMP_REC_SAMPLE};
        s.u.sample.device = 0;
        s.u.sample.total_bytes = 80 * GiB;
        s.u.sample.free_bytes = 80 * GiB - 300 * MiB - (uint64_t)step * MiB;
        s.u.sample.process_used = step % 2 ? UINT64_MAX : 290 * MiB;
        ev(&g, 2, &s);
        range_ev(&g, 2, GMP_REC_RANGE_END, 0, 77 + (uint64_t)step);

        /* the frees of the step */
        mem(&g, 0, GMP_REC_FREE, 0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, api_free_async,
            0x7f2000000000ull + off, 3 * MiB + 512, stream, s_n2, r_bwd, 0, pool);
        mem(&g, 0, GMP_REC_FREE, 0, GMP_MEM_DEVICE, 0, api_free, 0x7f1000000000ull + off, 0, 0,
            s_py1, r_bwd, 0, 0);
        mem(&g, 1, GMP_REC_FREE, 1, GMP_MEM_MANAGED, 0, api_free, 0x7f3000000000ull + off, 10 * MiB,
            0, 0, 0, 0, 0);
        mem(&g, 2, GMP_REC_FREE, -1, GMP_MEM_REGISTERED_HOST, 0, S(&g, "cudaHostUnregister"),
            0x300000000ull + off, 8 * MiB, 0, 0, 0, 0, 0);
        range_ev(&g, 0, GMP_REC_RANGE_POP, r_bwd, 0);
        range_ev(&g, 0, GMP_REC_RANGE_POP, r_step, 0);

        if (step == steps - 1) {
            /* a failed allocation and an out-of-memory error, then an alert and lost events */
            mem(&g, 0, GMP_REC_ALLOC, 0, GMP_MEM_DEVICE, GMP_MEMF_FAILED, api_malloc, 0, 100 * GiB,
                0, s_py2, r_train, 2, 0);
            gmp_rec oom = {.type = GMP_REC_OOM};
            oom.u.oom.device = 0;
            oom.u.oom.api = api_malloc;
            oom.u.oom.requested = 100 * GiB;
            oom.u.oom.stack = s_py2;
            oom.u.oom.range = r_train;
            oom.u.oom.result = 2;
            oom.u.oom.free_bytes = 79 * GiB;
            ev(&g, 0, &oom);
            gmp_rec al = {.type = GMP_REC_ALERT};
            al.u.alert.device = 0;
            al.u.alert.threshold = 200 * MiB;
            al.u.alert.live_bytes = 256 * MiB + 64 * 1024;
            al.u.alert.range = r_train;
            ev(&g, 0, &al);
            gmp_rec nt = {.type = GMP_REC_NOTICE};
            nt.u.notice.severity = GMP_NOTICE_WARNING;
            nt.u.notice.message = cstr("activity records disabled: CUPTI 12.4 \xe2\x89\xa0 13.0");
            ev(&g, 1, &nt);
            gmp_rec lost = {.type = GMP_REC_LOST};
            lost.u.lost.count = 3;
            lost.u.lost.reason = GMP_LOST_CUPTI_DROPPED;
            if (!complete)
                ev(&g, 2, &lost);
            range_ev(&g, 0, GMP_REC_RANGE_POP, r_train, 0);
            gmp_rec rs = {.type = GMP_REC_RESOURCE};
            rs.u.resource.device = 0;
            rs.u.resource.op = GMP_RES_STREAM_DESTROY;
            rs.u.resource.handle = stream;
            ev(&g, 0, &rs);
            p.u.pool.op = GMP_POOL_TRIM;
            p.u.pool.value = 0;
            ev(&g, 0, &p);
            p.u.pool.op = GMP_POOL_DESTROY;
            ev(&g, 0, &p);
        }
        /* every event of this step is written: promise it, and close the frame */
        gmp_writer_sync(g.w, g.now);
        if (gmp_writer_flush(g.w, 1000) != GMP_OK)
            g.failed = 1;
    }
    for (int i = 0; i < 3; i++)
        gmp_wthread_release(g.th[i]);
    gmp_writer_stats st;
    e = gmp_writer_close(g.w, &st);
    if (e != GMP_OK || g.failed) {
        fprintf(stderr, "gmp_gen_trace: %s: writing failed (%s)\n", outpath,
                e != GMP_OK ? gmp_err_str(e) : "an event was refused");
        return 1;
    }
    return 0;
}
