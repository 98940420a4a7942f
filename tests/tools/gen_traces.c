/* gen_traces: writes every synthetic trace the tests read, with the project's writer
 * (formats/trace/gmp_writer.h, without its thread) and the trace builder of
 * tests/replay/replay_tb.h. Every time is fixed, so a trace is the same bytes on every run and
 * every number a test derives from it is known.
 *
 *   gen_traces cli OUT [--steps N] [--complete]
 *       a short PyTorch-like training job with every record type (tests/cli, tests/view,
 *       tests/torch, scripts/demo)
 *   gen_traces report fixture OUT | report secrets OUT (the fixture, secrets on its command line)
 *       the report fixture (tests/replay, tests/report, tests/diagnose, docs/report.md)
 *   gen_traces report ranges|hostile|noalloc|killed|alike OUT | report rank N OUT
 *       the crafted traces of the report formats tests (tests/report)
 *   gen_traces convert basic|hostile|empty OUT | convert rank R OUT | convert big N OUT
 *       the traces of the convert tests and benchmark (tests/convert/data comes from here)
 *   gen_traces diff A B
 *       the before and after traces of the diff tests (tests/diff, docs/diff.md)
 *
 * Each family keeps its own header (producer, pid, options) and clock macro, because tests and
 * golden files depend on them byte for byte. A failure exits with 99 (tb_die), a usage error
 * with 2. */
#include "replay_tb.h"

#define T0 1000000000ull /* start_trace_ns of every header but cli's */

static gmp_str gs_n(const char *s, size_t n)
{
    gmp_str r = {s, (uint32_t)n};
    return r;
}

static gmp_str gs(const char *s)
{
    return gs_n(s, strlen(s));
}

/* Strings given with their length (they may hold NUL bytes): S("a\0b") expands to two arguments. */
#define S(x) x, sizeof(x) - 1

/* ---------- cli: a short training job with every record type ----------
 *
 * Two devices and three threads: nested NVTX ranges (train/step/forward|backward), allocations
 * and frees of every memory kind, a stream-ordered pool, VMM, a failed allocation and an
 * out-of-memory error, device samples, context and stream events, an alert, a NOTICE and a LOST
 * record (left out with --complete: the only reason for a reader to call the trace incomplete).
 * Strings include non-ASCII UTF-8, an invalid byte, quotes and control characters so that every
 * output's escaping is exercised. Each training step ends with a SYNC and becomes its own zstd
 * frame, so a cut file loses whole steps. Events are 1.5 us apart from 2 ms on. */

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

typedef struct cli_gen {
    tb b;
    uint64_t now;         /* the time of the last event */
    uint64_t correlation; /* of the last API call */
} cli_gen;

/* Appends an event on thread i (0 main, 1 autograd, 2 loader), 1.5 us after the previous one. */
static void cli_ev(cli_gen *g, int i, gmp_rec *r)
{
    g->now += 1500;
    r->time_ns = g->now;
    tb_event(&g->b, i, r);
}

static void cli_range_ev(cli_gen *g, int i, unsigned type, uint32_t range, uint64_t handle)
{
    gmp_rec r = {.type = type};
    r.u.rev.range = range;
    r.u.rev.handle = handle;
    cli_ev(g, i, &r);
}

static void cli_mem(cli_gen *g, int i, unsigned type, int32_t device, unsigned kind, unsigned flags,
                    uint32_t api, uint64_t address, uint64_t size, uint64_t stream, uint32_t stack,
                    uint32_t range, int32_t result, uint64_t handle)
{
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
    r.u.mem.correlation = (flags & GMP_MEMF_ACTIVITY) ? 0 : ++g->correlation;
    r.u.mem.result = result;
    r.u.mem.handle = handle;
    cli_ev(g, i, &r);
}

static int cli_usage(void)
{
    fprintf(stderr, "usage: gen_traces cli OUT.zst [--steps N] [--complete]\n");
    return 2;
}

static int gen_cli(int argc, char **argv)
{
    const char *outpath = NULL;
    long steps = 3;
    int complete = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            char *end;
            steps = strtol(argv[++i], &end, 10);
            if (*end || steps < 1 || steps > 100000)
                return cli_usage();
        } else if (strcmp(argv[i], "--complete") == 0) {
            complete = 1;
        } else if (argv[i][0] == '-' || outpath) {
            return cli_usage();
        } else {
            outpath = argv[i];
        }
    }
    if (!outpath)
        return cli_usage();

    static const char cmdline[] = "python\0train.py\0--name\0r\xc3\xa9sum\xc3\xa9 \"v1\"";
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.format_version = GMP_FORMAT_VERSION;
    h.min_reader_version = GMP_FORMAT_MIN_READER;
    h.producer = gs("gmp_gen_trace (gpumemprof tests)");
    h.pid = 4242;
    h.ppid = 4200;
    h.hostname = gs("gen-host");
    h.cmdline = gs_n(S(cmdline));
    h.rank = 0;
    h.start_wall_ns = 1700000000000000000ull;
    h.start_trace_ns = 1000000;
    h.clock = gs("CLOCK_MONOTONIC");
    h.options = gs("stacks=native,python ranges=nvtx");
    static const struct {
        uint32_t tid;
        const char *name;
    } threads[3] = {{1001, "python"}, {1002, "pt_autograd_0"}, {1003, "loader \"w0\"\t\x01\xff"}};
    const uint32_t tids[3] = {threads[0].tid, threads[1].tid, threads[2].tid};
    cli_gen g = {.now = 2000000, .correlation = 100};
    tb_open_header(&g.b, outpath, &h, tids, 3);
    tb *b = &g.b;

    /* definitions: devices, threads, a module */
    gmp_rec d = {.type = GMP_REC_DEVICE};
    d.u.device.id = 0;
    d.u.device.name = gs("NVIDIA H100 80GB HBM3");
    for (int i = 0; i < 16; i++)
        d.u.device.uuid[i] = (uint8_t)(0x10 + i);
    d.u.device.total_bytes = 80 * GiB;
    d.u.device.cc_major = 9;
    d.u.device.cc_minor = 0;
    tb_define(b, &d);
    d.u.device.id = 1;
    d.u.device.name = gs("NVIDIA A100-SXM4-40GB");
    for (int i = 0; i < 16; i++)
        d.u.device.uuid[i] = (uint8_t)(0xa0 + i);
    d.u.device.total_bytes = 40 * GiB;
    d.u.device.cc_major = 8;
    tb_define(b, &d);
    for (int i = 0; i < 3; i++) {
        gmp_rec t = {.type = GMP_REC_THREAD};
        t.u.thread.tid = threads[i].tid;
        t.u.thread.name = gs(threads[i].name);
        tb_define(b, &t);
    }
    static const char build_id[] = "\x5e\x1f\x00\x42\xab\xcd\xef\x01";
    gmp_rec m = {.type = GMP_REC_MODULE};
    m.u.module.id = 1;
    m.u.module.path = gs("/usr/lib/python3/site-packages/torch/lib/libtorch_cuda.so");
    m.u.module.base = 0x7f0000000000ull;
    m.u.module.lo = 0x7f0000001000ull;
    m.u.module.size = 0x2000000;
    m.u.module.build_id = gs_n(S(build_id));
    tb_define(b, &m);

    /* strings, stacks and ranges */
    uint32_t api_malloc = tb_str(b, "cudaMalloc"), api_free = tb_str(b, "cudaFree");
    uint32_t api_async = tb_str(b, "cudaMallocAsync"), api_free_async = tb_str(b, "cudaFreeAsync");
    uint32_t api_host = tb_str(b, "cudaMallocHost"), api_managed = tb_str(b, "cudaMallocManaged");
    uint32_t api_create = tb_str(b, "cuMemCreate"), api_map = tb_str(b, "cuMemMap");
    uint32_t api_reserve = tb_str(b, "cuMemAddressReserve");
    uint32_t api_reg = tb_str(b, "cudaHostRegister");
    uint32_t api_array = tb_str(b, "cudaMallocArray");
    /* static memory's api as traces written before "module load" say it: readers read it so */
    uint32_t api_mem2 = tb_str(b, "MEMORY2");
    uint32_t api_nvtx = tb_str(b, "nvtxMemRegionsRegister");
    uint32_t dom = tb_str(b, "pytorch");
    uint32_t n_train = tb_str(b, "train"), n_step = tb_str(b, "step");
    uint32_t n_fwd = tb_str(b, "forward"), n_bwd = tb_str(b, "backward");
    uint32_t n_load = tb_str(b, "load batch");
    uint32_t n_odd = tb_str(b, "na\xc3\xafve \"q\"\\\x7f\xfe");
    uint32_t n_ckpt = tb_str(b, "checkpoint");
    uint32_t f_py = tb_str(b, "train.py"), fn_main = tb_str(b, "main");
    uint32_t fn_fwd = tb_str(b, "forward");
    uint32_t r_train = gmp_writer_range(b->w, 0, dom, n_train);
    uint32_t r_step = gmp_writer_range(b->w, r_train, dom, n_step);
    uint32_t r_fwd = gmp_writer_range(b->w, r_step, dom, n_fwd);
    uint32_t r_bwd = gmp_writer_range(b->w, r_step, dom, n_bwd);
    uint32_t r_odd = gmp_writer_range(b->w, r_fwd, 0, n_odd);
    uint32_t r_load = gmp_writer_range(b->w, 0, 0, n_load);
    uint32_t r_ckpt = gmp_writer_range(b->w, 0, 0, n_ckpt);
    uint32_t s_py1 = gmp_writer_stack_python(b->w, 0, f_py, fn_main, 120);
    uint32_t s_py2 = gmp_writer_stack_python(b->w, s_py1, f_py, fn_fwd, 42);
    uint32_t s_n1 = gmp_writer_stack_native(b->w, 0, 0x7f0000123456ull);
    uint32_t s_n2 = gmp_writer_stack_native(b->w, s_n1, 0x7f0000234567ull);
    if (!r_train || !r_step || !r_fwd || !r_bwd || !r_odd || !r_load || !r_ckpt || !s_py2 || !s_n2)
        tb_die("a range or stack was refused");

    const uint64_t pool = 0x5000;
    const uint64_t stream = 7;
    for (long step = 0; step < steps; step++) {
        uint64_t off = (uint64_t)step * 0x10000000ull;
        /* main thread: the step's ranges and device allocations */
        if (step == 0) {
            cli_range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_train, 0);
            gmp_rec rs = {.type = GMP_REC_RESOURCE};
            rs.u.resource.device = 0;
            rs.u.resource.op = GMP_RES_CONTEXT_CREATE;
            rs.u.resource.handle = 1;
            cli_ev(&g, 0, &rs);
            rs.u.resource.op = GMP_RES_STREAM_CREATE;
            rs.u.resource.handle = stream;
            cli_ev(&g, 0, &rs);
            gmp_rec p = {.type = GMP_REC_POOL};
            p.u.pool.device = 0;
            p.u.pool.op = GMP_POOL_CREATE;
            p.u.pool.pool = pool;
            cli_ev(&g, 0, &p);
            p.u.pool.op = GMP_POOL_THRESHOLD;
            p.u.pool.value = 1 * GiB;
            cli_ev(&g, 0, &p);
            /* static memory of a loaded module, seen only through an activity record */
            cli_mem(&g, 0, GMP_REC_ALLOC, 0, GMP_MEM_STATIC, GMP_MEMF_ACTIVITY, api_mem2,
                    0x7e0000000000ull, 64 * 1024, 0, 0, 0, 0, 0);
        }
        cli_range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_step, 0);
        cli_range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_fwd, 0);
        cli_mem(&g, 0, GMP_REC_ALLOC, 0, GMP_MEM_DEVICE, 0, api_malloc, 0x7f1000000000ull + off,
                256 * MiB, 0, s_py2, r_fwd, 0, 0);
        cli_range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_odd, 0);
        cli_mem(&g, 0, GMP_REC_ALLOC, 0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, api_async,
                0x7f2000000000ull + off, 3 * MiB + 512, stream, s_n2, r_odd, 0, pool);
        gmp_rec p = {.type = GMP_REC_POOL};
        p.u.pool.device = 0;
        p.u.pool.op = GMP_POOL_RESERVED;
        p.u.pool.pool = pool;
        p.u.pool.value = 32 * MiB;
        cli_ev(&g, 0, &p);
        cli_range_ev(&g, 0, GMP_REC_MARK, r_ckpt, 0);
        cli_range_ev(&g, 0, GMP_REC_RANGE_POP, r_odd, 0);
        cli_range_ev(&g, 0, GMP_REC_RANGE_POP, r_fwd, 0);
        cli_range_ev(&g, 0, GMP_REC_RANGE_PUSH, r_bwd, 0);

        /* autograd thread: host, managed and VMM memory on device 1 */
        cli_mem(&g, 1, GMP_REC_ALLOC, -1, GMP_MEM_PINNED_HOST, 0, api_host, 0x200000000ull + off,
                2 * MiB, 0, s_n1, 0, 0, 0);
        cli_mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_VA_RESERVE, 0, api_reserve,
                0x7f8000000000ull + off, 1 * GiB, 0, s_n1, 0, 0, 0);
        cli_mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_VMM_PHYSICAL, 0, api_create, 0, 2 * MiB, 0, s_n2,
                r_bwd, 0, 0x9000 + (uint64_t)step);
        cli_mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_VMM_MAPPING, 0, api_map, 0x7f8000000000ull + off,
                2 * MiB, 0, s_n2, r_bwd, 0, 0x9000 + (uint64_t)step);
        cli_mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_MANAGED, 0, api_managed, 0x7f3000000000ull + off,
                10 * MiB, 0, s_py1, r_bwd, 0, 0);
        cli_mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_ARRAY, 0, api_array, 0x7f4000000000ull + off,
                4 * MiB, 0, 0, 0, 0, 0);
        cli_mem(&g, 1, GMP_REC_ALLOC, 1, GMP_MEM_NVTX_REGION, 0, api_nvtx, 0x7f4000001000ull + off,
                4096, 0, 0, r_bwd, 0, 0xbeef);

        /* loader thread: registered host memory, a start/end range, a sample */
        cli_range_ev(&g, 2, GMP_REC_RANGE_START, r_load, 77 + (uint64_t)step);
        cli_mem(&g, 2, GMP_REC_ALLOC, -1, GMP_MEM_REGISTERED_HOST, 0, api_reg, 0x300000000ull + off,
                8 * MiB, 0, 0, 0, 0, 0);
        gmp_rec s = {.type = GMP_REC_SAMPLE};
        s.u.sample.device = 0;
        s.u.sample.total_bytes = 80 * GiB;
        s.u.sample.free_bytes = 80 * GiB - 300 * MiB - (uint64_t)step * MiB;
        s.u.sample.process_used = step % 2 ? UINT64_MAX : 290 * MiB;
        cli_ev(&g, 2, &s);
        cli_range_ev(&g, 2, GMP_REC_RANGE_END, 0, 77 + (uint64_t)step);

        /* the frees of the step */
        cli_mem(&g, 0, GMP_REC_FREE, 0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, api_free_async,
                0x7f2000000000ull + off, 3 * MiB + 512, stream, s_n2, r_bwd, 0, pool);
        cli_mem(&g, 0, GMP_REC_FREE, 0, GMP_MEM_DEVICE, 0, api_free, 0x7f1000000000ull + off, 0, 0,
                s_py1, r_bwd, 0, 0);
        cli_mem(&g, 1, GMP_REC_FREE, 1, GMP_MEM_MANAGED, 0, api_free, 0x7f3000000000ull + off,
                10 * MiB, 0, 0, 0, 0, 0);
        cli_mem(&g, 2, GMP_REC_FREE, -1, GMP_MEM_REGISTERED_HOST, 0,
                tb_str(b, "cudaHostUnregister"), 0x300000000ull + off, 8 * MiB, 0, 0, 0, 0, 0);
        cli_range_ev(&g, 0, GMP_REC_RANGE_POP, r_bwd, 0);
        cli_range_ev(&g, 0, GMP_REC_RANGE_POP, r_step, 0);

        if (step == steps - 1) {
            /* a failed allocation and an out-of-memory error, then an alert and lost events */
            cli_mem(&g, 0, GMP_REC_ALLOC, 0, GMP_MEM_DEVICE, GMP_MEMF_FAILED, api_malloc, 0,
                    100 * GiB, 0, s_py2, r_train, 2, 0);
            gmp_rec oom = {.type = GMP_REC_OOM};
            oom.u.oom.device = 0;
            oom.u.oom.api = api_malloc;
            oom.u.oom.requested = 100 * GiB;
            oom.u.oom.stack = s_py2;
            oom.u.oom.range = r_train;
            oom.u.oom.result = 2;
            oom.u.oom.free_bytes = 79 * GiB;
            cli_ev(&g, 0, &oom);
            gmp_rec al = {.type = GMP_REC_ALERT};
            al.u.alert.device = 0;
            al.u.alert.threshold = 200 * MiB;
            al.u.alert.live_bytes = 256 * MiB + 64 * 1024;
            al.u.alert.range = r_train;
            cli_ev(&g, 0, &al);
            gmp_rec nt = {.type = GMP_REC_NOTICE};
            nt.u.notice.severity = GMP_NOTICE_WARNING;
            nt.u.notice.message = gs("activity records disabled: CUPTI 12.4 \xe2\x89\xa0 13.0");
            cli_ev(&g, 1, &nt);
            gmp_rec lost = {.type = GMP_REC_LOST};
            lost.u.lost.count = 3;
            lost.u.lost.reason = GMP_LOST_CUPTI_DROPPED;
            if (!complete)
                cli_ev(&g, 2, &lost);
            cli_range_ev(&g, 0, GMP_REC_RANGE_POP, r_train, 0);
            gmp_rec rs = {.type = GMP_REC_RESOURCE};
            rs.u.resource.device = 0;
            rs.u.resource.op = GMP_RES_STREAM_DESTROY;
            rs.u.resource.handle = stream;
            cli_ev(&g, 0, &rs);
            p.u.pool.op = GMP_POOL_TRIM;
            p.u.pool.value = 0;
            cli_ev(&g, 0, &p);
            p.u.pool.op = GMP_POOL_DESTROY;
            cli_ev(&g, 0, &p);
        }
        /* every event of this step is written: promise it, and close the frame */
        gmp_writer_sync(b->w, g.now);
        if (gmp_writer_flush(b->w, 1000) != GMP_OK)
            tb_die("gmp_writer_flush failed");
    }
    tb_close(b);
    return 0;
}

/* ---------- the step trace: the report fixture and the convert tests' basic and hostile ----------
 *
 * Two devices and two threads: nested ranges (train/step/forward|backward on thread 0, eval on
 * thread 1), native and Python stacks, a stream-ordered pool, VMM, managed and pinned memory, a
 * failed allocation with its OOM, a free of an unknown address, a driver sample, a notice, and
 * leaks. Times are ms after start_trace_ns; each millisecond step ends a frame, so a cut file loses
 * whole steps.
 *
 * The report fixture is this shape with the plain names. The convert variant (extras) adds thread
 * names, a second Python frame, eval in its own domain, a start/end range, a mark, lost events and
 * a range left open, and rounds its times to the nanosecond where the fixture truncates them
 * (both tests' golden files hold these nanoseconds). */

#define FIX_MS(x) (T0 + (uint64_t)((x)*1000000.0))
#define CONV_MS(x) (T0 + (uint64_t)((x)*1000000.0 + 0.5))

/* The names of the step trace (plain or hostile). */
typedef struct names {
    const char *s[16];
    size_t n[16];
} names;

enum {
    N_TRAIN,
    N_STEP,
    N_FWD,
    N_BWD,
    N_EVAL,
    N_DOMAIN,
    N_THREAD0,
    N_THREAD1,
    N_DEVICE,
    N_API,
    N_PYFILE,
    N_PYFUNC,
    N_MODULE,
    N_NOTICE,
    N_MARK,
    N_LOAD
};

#define NM(i) nm->s[i], nm->n[i]

static void plain_names(names *nm)
{
    static const char *const v[16] = {"train",
                                      "step",
                                      "forward",
                                      "backward",
                                      "eval",
                                      "eval-domain",
                                      "MainThread",
                                      "loader",
                                      "NVIDIA H100 80GB HBM3",
                                      "cudaMalloc",
                                      "train.py",
                                      "model_forward",
                                      "/opt/app/libtrain.so",
                                      "stacks: native frames not symbolized",
                                      "checkpoint",
                                      "load_batch"};
    for (int i = 0; i < 16; i++) {
        nm->s[i] = v[i];
        nm->n[i] = strlen(v[i]);
    }
}

static void device_n(tb *b, uint32_t id, const char *name, size_t n, uint64_t total)
{
    gmp_rec d;
    memset(&d, 0, sizeof d);
    d.type = GMP_REC_DEVICE;
    d.u.device.id = id;
    d.u.device.name = gs_n(name, n);
    d.u.device.total_bytes = total;
    d.u.device.cc_major = 9;
    tb_define(b, &d);
}

static void thread_name(tb *b, uint32_t tid, const char *name, size_t n)
{
    gmp_rec d;
    memset(&d, 0, sizeof d);
    d.type = GMP_REC_THREAD;
    d.u.thread.tid = tid;
    d.u.thread.name = gs_n(name, n);
    tb_define(b, &d);
}

/* Writes the step trace into b (opened by the caller, whose header it keeps) and closes it. */
static void write_step_trace(tb *b, const names *nm, int extras)
{
#define MS(x) (extras ? CONV_MS(x) : FIX_MS(x))
    device_n(b, 0, NM(N_DEVICE), 80 * TB_GiB);
    device_n(b, 1, S("NVIDIA H100 80GB HBM3"), 80 * TB_GiB);
    if (extras) {
        thread_name(b, b->tids[0], NM(N_THREAD0));
        thread_name(b, b->tids[1], NM(N_THREAD1));
    }
    tb_module(b, 1, nm->s[N_MODULE], 0x7f0000000000ull, 0x7f0000001000ull, 0x200000);
    uint32_t s_outer = gmp_writer_stack_native(b->w, 0, 0x7f0000012340ull);
    uint32_t s_native = gmp_writer_stack_native(b->w, s_outer, 0x401000);
    uint32_t s_py =
        gmp_writer_stack_python(b->w, 0, tb_str_n(b, NM(N_PYFILE)), tb_str_n(b, NM(N_PYFUNC)), 42);
    uint32_t s_py2 = s_py;
    if (extras)
        s_py2 = gmp_writer_stack_python(b->w, s_py, tb_str_n(b, S("model.py")),
                                        tb_str_n(b, S("Linear.forward")), 7);
    uint32_t m = tb_str_n(b, NM(N_API)), f = tb_str(b, "cudaFree");
    uint32_t ma = tb_str(b, "cudaMallocAsync"), fa = tb_str(b, "cudaFreeAsync");
    uint32_t mm = tb_str(b, "cudaMallocManaged"), mh = tb_str(b, "cudaMallocHost");
    uint32_t res = tb_str(b, "cuMemAddressReserve"), cr = tb_str(b, "cuMemCreate");
    uint32_t mp = tb_str(b, "cuMemMap"), um = tb_str(b, "cuMemUnmap");
    uint32_t rl = tb_str(b, "cuMemRelease");
    uint32_t n_train = tb_str_n(b, NM(N_TRAIN));
    uint32_t r_train = gmp_writer_range(b->w, 0, 0, n_train);
    uint32_t r_step = gmp_writer_range(b->w, r_train, 0, tb_str_n(b, NM(N_STEP)));
    uint32_t r_fwd = gmp_writer_range(b->w, r_step, 0, tb_str_n(b, NM(N_FWD)));
    uint32_t r_bwd = gmp_writer_range(b->w, r_step, 0, tb_str_n(b, NM(N_BWD)));
    uint32_t dom = extras ? tb_str_n(b, NM(N_DOMAIN)) : 0;
    uint32_t r_eval = gmp_writer_range(b->w, 0, dom, tb_str_n(b, NM(N_EVAL)));
    uint32_t r_load = 0, r_mark = 0;
    if (extras) {
        r_load = gmp_writer_range(b->w, 0, 0, tb_str_n(b, NM(N_LOAD)));
        r_mark = gmp_writer_range(b->w, 0, 0, tb_str_n(b, NM(N_MARK)));
    }
    if (!r_train || !r_step || !r_fwd || !r_bwd || !r_eval || (extras && (!r_load || !r_mark)))
        tb_die("gmp_writer_range failed");
    const uint64_t P = 0x5000, H = 0x21, VA = 0x7e0000000000ull;

    tb_notice(b, 0, MS(0.5), GMP_NOTICE_INFO, NM(N_NOTICE));
    tb_range_ev(b, 0, GMP_REC_RANGE_PUSH, MS(1), r_train, 0);
    tb_range_ev(b, 0, GMP_REC_RANGE_PUSH, MS(2), r_step, 0);
    if (extras)
        tb_range_ev(b, 1, GMP_REC_RANGE_START, MS(2.5), r_load, 77);
    tb_range_ev(b, 0, GMP_REC_RANGE_PUSH, MS(3), r_fwd, 0);
    tb_range_ev(b, 1, GMP_REC_RANGE_PUSH, MS(3.5), r_eval, 0);
    gmp_writer_flush(b->w, 0);
    tb_alloc(b, 0, MS(4), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, m, r_fwd, s_native);
    tb_alloc(b, 0, MS(5), 0, GMP_MEM_DEVICE, 0x7f1040000000ull, 512 * TB_MiB, m, r_fwd, s_py2);
    tb_alloc(b, 1, MS(5.5), 1, GMP_MEM_VA_RESERVE, VA, 1 * TB_GiB, res, r_eval, 0);
    tb_mem phys = {1, GMP_MEM_VMM_PHYSICAL, 0, cr, r_eval, 0, 0, 256 * TB_MiB, H, 0};
    tb_memrec(b, 1, GMP_REC_ALLOC, MS(5.6), &phys);
    tb_mem map = {1, GMP_MEM_VMM_MAPPING, 0, mp, r_eval, 0, VA, 256 * TB_MiB, H, 0};
    tb_memrec(b, 1, GMP_REC_ALLOC, MS(5.7), &map);
    if (extras)
        tb_range_ev(b, 1, GMP_REC_MARK, MS(5.8), r_mark, 0);
    gmp_writer_flush(b->w, 0);
    tb_range_ev(b, 0, GMP_REC_RANGE_POP, MS(6), r_fwd, 0);
    tb_range_ev(b, 0, GMP_REC_RANGE_PUSH, MS(6.2), r_bwd, 0);
    tb_alloc(b, 1, MS(6.5), 1, GMP_MEM_DEVICE, 0x7e1000000000ull, 100 * TB_MiB, m, r_eval,
             extras ? s_py : 0);
    tb_alloc(b, 0, MS(7), 0, GMP_MEM_DEVICE, 0x7f1060000000ull, 256 * TB_MiB, m, r_bwd, 0);
    tb_pool(b, 0, MS(8), 0, GMP_POOL_CREATE, P, 0);
    tb_pool(b, 0, MS(8.1), 0, GMP_POOL_RESERVED, P, 128 * TB_MiB);
    if (extras)
        tb_range_ev(b, 1, GMP_REC_RANGE_END, MS(8.2), 0, 77);
    gmp_writer_flush(b->w, 0);
    tb_mem fv = {1, GMP_MEM_VMM_MAPPING, 0, um, 0, 0, VA, 256 * TB_MiB, H, 0};
    tb_memrec(b, 1, GMP_REC_FREE, MS(8.5), &fv);
    tb_mem fr = {1, GMP_MEM_VMM_PHYSICAL, 0, rl, 0, 0, 0, 0, H, 0};
    tb_memrec(b, 1, GMP_REC_FREE, MS(8.6), &fr);
    tb_mem aa = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, ma, r_bwd,
                 0, 0x7f2000000000ull,  64 * TB_MiB,    P,  7};
    tb_memrec(b, 0, GMP_REC_ALLOC, MS(9), &aa);
    tb_range_ev(b, 1, GMP_REC_RANGE_POP, MS(9.5), r_eval, 0);
    gmp_writer_flush(b->w, 0);
    tb_free(b, 0, MS(10), 0, GMP_MEM_DEVICE, 0x7f1040000000ull, 0, f);
    tb_mem af = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, fa, 0, 0, 0x7f2000000000ull, 0, P, 7};
    tb_memrec(b, 0, GMP_REC_FREE, MS(11), &af);
    tb_range_ev(b, 0, GMP_REC_RANGE_POP, MS(12), r_bwd, 0);
    tb_range_ev(b, 0, GMP_REC_RANGE_POP, MS(12.1), r_step, 0);
    gmp_writer_flush(b->w, 0);
    tb_alloc(b, 0, MS(13), 0, GMP_MEM_MANAGED, 0x7f3000000000ull, 32 * TB_MiB, mm, r_train, 0);
    tb_alloc(b, 0, MS(14), -1, GMP_MEM_PINNED_HOST, 0x600000, 16 * TB_MiB, mh, r_train, 0);
    tb_mem failed = {0, GMP_MEM_DEVICE, GMP_MEMF_FAILED, m, r_train, s_native, 0, 8 * TB_GiB, 0, 0};
    tb_memrec(b, 0, GMP_REC_ALLOC, MS(15), &failed);
    tb_oom(b, 0, MS(15), 0, m, 8 * TB_GiB, r_train, s_native);
    gmp_writer_flush(b->w, 0);
    tb_free(b, 0, MS(16), 0, GMP_MEM_DEVICE, 0xdead00, 0, f);
    tb_free(b, 0, MS(17), 0, GMP_MEM_DEVICE, 0x7f1060000000ull, 0, f);
    tb_sample(b, 0, MS(18), 0, 78 * TB_GiB, 80 * TB_GiB, UINT64_MAX);
    if (extras) {
        gmp_rec lost;
        memset(&lost, 0, sizeof lost);
        lost.type = GMP_REC_LOST;
        lost.time_ns = MS(18.2);
        lost.u.lost.count = 3;
        lost.u.lost.reason = GMP_LOST_BUFFER_FULL;
        tb_event(b, 1, &lost);
        tb_range_ev(b, 1, GMP_REC_RANGE_PUSH, MS(18.5), r_eval, 0); /* still open at the end */
    }
    tb_range_ev(b, 0, GMP_REC_RANGE_POP, MS(19), r_train, 0);
    tb_close(b);
#undef MS
}

/* ---------- report: the traces of the report tests ----------
 *
 * fixture: the step trace with the plain names, under tb_open's header (the report tests,
 * tests/diagnose, docs/report.md). The others are crafted for tests/report; their times are
 * microseconds after start_trace_ns (US(x)). */

static void report_fixture(const char *out)
{
    tb b;
    names nm;
    plain_names(&nm);
    tb_open(&b, out);
    write_step_trace(&b, &nm, 0);
}

/* secrets: the fixture recorded from a command line that holds secrets in the forms diagnose
 * redacts in its reports (tests/diagnose: --NAME=VALUE, --NAME VALUE, a URL's credentials) and
 * one it does not (a short option's value). */
static void report_secrets(const char *out)
{
    static const char cmdline[] = "train_sim\0002\0--password=hunter3-cmd-pw\0--api-token\0"
                                  "tok-7781-xyz\0--data\0https://bob:pw-5512@data.example/x\0"
                                  "-p\0port-8080\0--secret-key=q\"uo\\\"te-991";
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = (gmp_str){"replay-tests", 12};
    h.pid = 4242;
    h.ppid = 1;
    h.hostname = (gmp_str){"testhost", 8};
    h.cmdline = (gmp_str){cmdline, (uint32_t)(sizeof cmdline - 1)};
    h.rank = -1;
    h.start_wall_ns = 1700000000000000000ull;
    h.start_trace_ns = 1000000000ull;
    h.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    h.options = (gmp_str){"stacks=none", 11};
    tb b;
    names nm;
    plain_names(&nm);
    tb_open_header(&b, out, &h, NULL, TB_THREADS);
    write_step_trace(&b, &nm, 0);
}

#define US(x) (T0 + (uint64_t)((x)*1000.0))

static void pool(tb *b, double t, uint64_t reserved)
{
    tb_pool(b, 0, US(t), 0, GMP_POOL_CREATE, 0x5000, 0);
    tb_pool(b, 0, US(t + 0.1), 0, GMP_POOL_RESERVED, 0x5000, reserved);
}

/* Thread 0: outer [1,12] { inner [3,7] { B, C; frees A }, inner [9,11] { D } }, A before inner;
 * thread 1 frees B at 6.5 (inside inner, another thread) and has a start/end range "phase"
 * [3.5, 9.5]. A pool holds 200 MiB reserved from 1.5 on (fragmentation 200 MiB). */
static void report_ranges(const char *out)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t outer = tb_range(&b, "outer"), inner = tb_range(&b, "outer/inner");
    uint32_t phase = tb_range(&b, "phase");
    const uint64_t A = 0x10000000, B = 0x20000000, C = 0x30000000, D = 0x40000000;
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(1), outer, 0);
    pool(&b, 1.4, 200 * TB_MiB);
    tb_alloc(&b, 0, US(2), 0, GMP_MEM_DEVICE, A, 100 * TB_MiB, m, outer, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(3), inner, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_START, US(3.5), phase, 7);
    tb_alloc(&b, 0, US(4), 0, GMP_MEM_DEVICE, B, 50 * TB_MiB, m, inner, 0);
    tb_free(&b, 0, US(5), 0, GMP_MEM_DEVICE, A, 0, f);
    tb_alloc(&b, 0, US(6), 0, GMP_MEM_DEVICE, C, 30 * TB_MiB, m, inner, 0);
    tb_free(&b, 1, US(6.5), 0, GMP_MEM_DEVICE, B, 0, f);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(7), inner, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(9), inner, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_END, US(9.5), 0, 7);
    tb_alloc(&b, 0, US(10), 0, GMP_MEM_DEVICE, D, 10 * TB_MiB, m, inner, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(11), inner, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(12), outer, 0);
    tb_free(&b, 1, US(13), 0, GMP_MEM_DEVICE, C, 0, f);
    tb_close(&b);
}

#define EVIL_SCRIPT "\"><script>alert(1)</script>"
#define EVIL_IMG "\xff\xfe<img src=x onerror=alert(1)>"

/* Hostile strings everywhere a trace has strings (HTML and Markdown escaping). */
static void report_hostile(const char *out)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "GPU</title><script>alert('d')</script>", 16 * TB_GiB);
    tb_module(&b, 1, "/opt/<b>evil</b>/lib\"x\".so", 0x7f0000000000ull, 0x7f0000001000ull,
              0x200000);
    uint32_t m = tb_str(&b, "cuda<Malloc>&\"'"), f = tb_str(&b, "cudaFree");
    uint32_t r1 = tb_range(&b, EVIL_SCRIPT);
    uint32_t r2 = tb_range(&b, EVIL_SCRIPT "/a'b\"c&d|e*f_g`h");
    uint32_t r3 = tb_range(&b, "line1\nline2\r\t<x>");
    uint32_t r4 = tb_range(&b, EVIL_IMG);
    uint32_t s_py = gmp_writer_stack_python(b.w, 0, tb_str(&b, "<script>x.py</script>"),
                                            tb_str(&b, "fn\"><svg onload=alert(2)>"), 7);
    uint32_t s_nat = gmp_writer_stack_native(b.w, s_py, 0x7f0000012340ull);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(1), r1, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(2), r2, 0);
    tb_alloc(&b, 0, US(3), 0, GMP_MEM_DEVICE, 0x1000000, 64 * TB_MiB, m, r2, s_nat);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(4), r2, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(5), r1, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, US(6), r3, 0);
    tb_alloc(&b, 1, US(7), 0, GMP_MEM_DEVICE, 0x2000000, 32 * TB_MiB, m, r3, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_POP, US(8), r3, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, US(9), r4, 0);
    tb_alloc(&b, 1, US(10), 0, GMP_MEM_DEVICE, 0x3000000, 16 * TB_MiB, m, r4, 0);
    tb_free(&b, 1, US(11), 0, GMP_MEM_DEVICE, 0x2000000, 0, f);
    tb_oom(&b, 1, US(11.5), 0, m, 64 * TB_GiB, r4, s_nat);
    tb_range_ev(&b, 1, GMP_REC_RANGE_POP, US(12), r4, 0);
    tb_notice(&b, 0, US(13), GMP_NOTICE_WARNING, S("notice <script>alert(3)</script>\n\x80"));
    tb_close(&b);
}

/* Rank r: allocates (r + 1) * 100 MiB in "step/forward", frees half. killed: the events end with
 * a SYNC (a frame of their own), so that cutting the file's last bytes loses only the END record,
 * as when the program is killed before it exits. */
static void report_rank(const char *out, int r, int killed)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t step = tb_range(&b, "step"), fwd = tb_range(&b, "step/forward");
    uint64_t sz = (uint64_t)(r + 1) * 50 * TB_MiB;
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(1), step, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(2), fwd, 0);
    tb_alloc(&b, 0, US(3), 0, GMP_MEM_DEVICE, 0x1000000, sz, m, fwd, 0);
    tb_alloc(&b, 0, US(4), 0, GMP_MEM_DEVICE, 0x9000000, sz, m, fwd, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(5), fwd, 0);
    tb_free(&b, 0, US(6), 0, GMP_MEM_DEVICE, 0x1000000, 0, f);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(7), step, 0);
    if (killed)
        gmp_writer_sync(b.w, US(7));
    tb_close(&b);
}

/* Two devices that are known (DEVICE records, samples of the driver: device 1's show 1 GiB that no
 * allocation explains, device 0's nothing) and a range, but no allocation: the report has no peak
 * to give a time for. */
static void report_noalloc(const char *out)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    uint32_t step = tb_range(&b, "step");
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(300000), step, 0);
    tb_device(&b, 1, "Test GPU", 16 * TB_GiB);
    tb_sample(&b, 0, US(300001), 0, 15 * TB_GiB, 16 * TB_GiB, 0);
    tb_sample(&b, 0, US(300001.5), 1, 15 * TB_GiB, 16 * TB_GiB, UINT64_MAX);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(300002), step, 0);
    tb_close(&b);
}

/* Stacks that would look alike in a table (docs/stacks.md, "Frames from user code": two different
 * call sites never render the same): A and B share their four innermost frames and differ in the
 * fifth; C and D differ only in an internal frame folded inside the same user frame. E and F are
 * one call site whose outer "frames" are addresses inside no loaded module (what a frame-pointer
 * walk reads off the stack: device pointers): one stack. G and H have nothing but such addresses
 * (different ones): one stack of one "?" frame. */
static void report_alike(const char *out)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc");
    uint32_t f = tb_str(&b, "x.py"), g = tb_str(&b, "run");
    uint32_t outer[2];
    for (int k = 0; k < 2; k++) {
        uint32_t s = gmp_writer_stack_python(b.w, 0, f, g, 5 + (uint32_t)k); /* the fifth */
        static const char *const fns[] = {"d", "c", "b", "a"};
        for (int i = 0; i < 4; i++)
            s = gmp_writer_stack_python(b.w, s, tb_str(&b, "m.py"), tb_str(&b, fns[i]),
                                        (uint32_t)(10 + i));
        outer[k] = s;
    }
    uint32_t u = gmp_writer_stack_python(b.w, 0, tb_str(&b, "u.py"), tb_str(&b, "user"), 9);
    uint32_t e = tb_str(&b, "");
    uint32_t sc = gmp_writer_stack_python(
        b.w, u, e, tb_str(&b, "c10::cuda::CUDACachingAllocator::malloc(unsigned long)"), 0);
    uint32_t sd = gmp_writer_stack_python(
        b.w, u, e, tb_str(&b, "c10::cuda::CUDACachingAllocator::allocate(unsigned long)"), 0);
    tb_alloc(&b, 0, US(1), 0, GMP_MEM_DEVICE, 0x1000000, 40 * TB_MiB, m, 0, outer[0]);
    tb_alloc(&b, 0, US(2), 0, GMP_MEM_DEVICE, 0x5000000, 30 * TB_MiB, m, 0, outer[1]);
    tb_alloc(&b, 0, US(3), 0, GMP_MEM_DEVICE, 0x9000000, 20 * TB_MiB, m, 0, sc);
    tb_alloc(&b, 0, US(4), 0, GMP_MEM_DEVICE, 0xd000000, 10 * TB_MiB, m, 0, sd);
    tb_module(&b, 1, "/opt/app/libx.so", 0x7f0000000000ull, 0x7f0000000000ull, 0x100000);
    for (int k = 0; k < 2; k++) {
        uint32_t raw = gmp_writer_stack_native(b.w, 0, k ? 0x120009000000ull : 0x100001000000ull);
        uint32_t site = gmp_writer_stack_native(b.w, raw, 0x7f0000000010ull);
        tb_alloc(&b, 0, US(5 + k), 0, GMP_MEM_DEVICE, 0x11000000 + (uint64_t)k * 0x1000000,
                 4 * TB_MiB, m, 0, site);
    }
    for (int k = 0; k < 2; k++) {
        uint32_t raw = gmp_writer_stack_native(b.w, 0, k ? 0x130005000000ull : 0x100002000000ull);
        raw = gmp_writer_stack_native(b.w, raw, 0x3000 + (uint64_t)k * 0x10);
        tb_alloc(&b, 0, US(7 + k), 0, GMP_MEM_DEVICE, 0x15000000 + (uint64_t)k * 0x1000000,
                 2 * TB_MiB, m, 0, raw);
    }
    tb_close(&b);
}

/* ---------- convert: the traces of the convert tests and benchmark ----------
 *
 * basic and hostile are the step trace (above); the others' times are ms after start_trace_ns,
 * rounded to the nanosecond (CONV_MS). */

static void conv_open(tb *b, const char *path, uint32_t pid, int64_t rank, const char *host,
                      const char *cmdline, size_t cmdlen, uint64_t wall)
{
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = gs("convert-tests");
    h.pid = pid;
    h.ppid = 1;
    h.hostname = gs(host);
    h.cmdline = gs_n(cmdline, cmdlen);
    h.rank = rank;
    h.start_wall_ns = wall;
    h.start_trace_ns = T0;
    h.clock = gs("CLOCK_MONOTONIC");
    h.options = gs("stacks=native");
    tb_open_header(b, path, &h, NULL, TB_THREADS);
}

/* The step trace with thread names, lost events, a mark and more (see above). */
static void conv_basic(const char *out)
{
    tb b;
    names nm;
    plain_names(&nm);
    conv_open(&b, out, 4242, -1, "testhost", S("python\0train.py\0--epochs=1"),
              1700000000000000000ull);
    write_step_trace(&b, &nm, 1);
}

/* The basic trace with hostile strings everywhere (quotes, backslashes, <script>, newlines,
 * control bytes, invalid UTF-8). */
static void conv_hostile(const char *out)
{
    static const char *const v[16] = {"tr\"ain",
                                      "st\\ep",
                                      "<script>alert(1)</script>",
                                      "new\nline\ttab\r",
                                      "bad \xff\xfe utf8 \xc3",
                                      "dom\"ain\x01",
                                      "Main\"Thread</title>",
                                      "\xe2\x82 cut euro",
                                      "GPU \"0\" <b>&amp;</b>",
                                      "cuda\"Malloc\\",
                                      "/tmp/\"evil\".py\n",
                                      "fn<\x80>",
                                      "/opt/\"lib\"\\x.so",
                                      "notice \"quoted\"\n<script>\xff",
                                      "\x7f\x1b[31mmark",
                                      "load\"\"\\\\"};
    names h;
    for (int i = 0; i < 16; i++) {
        h.s[i] = v[i];
        h.n[i] = strlen(v[i]);
    }
    tb b;
    conv_open(&b, out, 4242, -1, "host\"<x>\n\xff", S("py\"thon\0<script>\0\xff\xfe"),
              1700000000000000000ull);
    write_step_trace(&b, &h, 1);
}

/* A small job rank (pid 5000 + R, started R ms after rank 0). */
static void conv_rank(const char *out, int rank)
{
    tb b;
    char cmd[] = "python\0train.py";
    /* rank r started r ms after rank 0 (wall clock); its trace clock is unrelated */
    conv_open(&b, out, 5000 + (uint32_t)rank, rank, "node1", S(cmd),
              1700000000000000000ull + (uint64_t)rank * 1000000ull);
    tb_device(&b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t r_step = tb_range(&b, "step"), r_fwd = tb_range(&b, "step/forward");
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, CONV_MS(1), r_step, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, CONV_MS(2), r_fwd, 0);
    tb_alloc(&b, 0, CONV_MS(3), 0, GMP_MEM_DEVICE, 0x1000000, (uint64_t)(rank + 1) * TB_MiB, m,
             r_fwd, 0);
    tb_alloc(&b, 0, CONV_MS(4), 0, GMP_MEM_DEVICE, 0x2000000, 2 * TB_MiB, m, r_fwd, 0);
    tb_free(&b, 0, CONV_MS(5), 0, GMP_MEM_DEVICE, 0x1000000, 0, f);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, CONV_MS(6), r_fwd, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, CONV_MS(7), r_step, 0);
    tb_close(&b);
}

/* A header and nothing else. */
static void conv_empty(const char *out)
{
    tb b;
    conv_open(&b, out, 7, -1, "h", "x", 1, 1700000000000000000ull);
    tb_close(&b);
}

/* About n events: allocations and frees inside ranges on four threads and two devices
 * (benchmarks, --max-spans, memory). Per step on each thread: a push, allocations and frees, a
 * pop. */
static void conv_big(const char *out, uint64_t n)
{
    tb b;
    conv_open(&b, out, 9000, -1, "bench", "bench", 5, 1700000000000000000ull);
    tb_device(&b, 0, "GPU zero", 80 * TB_GiB);
    tb_device(&b, 1, "GPU one", 80 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t layers[8];
    char name[64];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "train/step/layer%d", i);
        layers[i] = tb_range(&b, name);
    }
    uint32_t st[16];
    for (int i = 0; i < 16; i++)
        st[i] = gmp_writer_stack_native(b.w, i ? st[i / 2] : 0, 0x400000 + (uint64_t)i * 0x40);
    uint64_t t = T0, ev = 0, step = 0;
    const int live = 32; /* allocations kept per thread and layer */
    while (ev < n) {
        for (int th = 0; th < TB_THREADS && ev < n; th++) {
            int layer = (int)(step % 8);
            int32_t dev = th & 1;
            tb_range_ev(&b, th, GMP_REC_RANGE_PUSH, ++t, layers[layer], 0);
            ev++;
            for (int k = 0; k < 16; k++) {
                uint64_t slot = (step / 8 * 16 + (uint64_t)k) % (uint64_t)live;
                uint64_t addr = 0x7f0000000000ull + ((uint64_t)th << 36) + ((uint64_t)layer << 32) +
                                (slot << 22);
                if (step >= 8 * 2) {
                    tb_free(&b, th, ++t, dev, GMP_MEM_DEVICE, addr, 0, f);
                    ev++;
                }
                tb_alloc(&b, th, ++t, dev, GMP_MEM_DEVICE, addr, (1 + slot) << 16, m, layers[layer],
                         st[8 + (k & 7)]);
                ev++;
            }
            tb_range_ev(&b, th, GMP_REC_RANGE_POP, ++t, layers[layer], 0);
            ev++;
        }
        step++;
        if (step % 64 == 0)
            gmp_writer_sync(b.w, t); /* writes the buffers, then SYNC: the reader's window stays
                                        small */
    }
    tb_close(&b);
}

/* ---------- diff: A (before) and B (after) of the same program ----------
 *
 * Device 0 in both; device 1 only in B. Sizes and times are fixed, so every delta is known:
 *   A: train/step 1 GiB (native stack), train 256 MiB (kept), no range 64 MiB (freed at the end)
 *   B: train/step 1 GiB (same stack), train 512 MiB (kept), eval 128 MiB (Python stack, kept),
 *      device 1: 100 MiB (kept).
 * Both: a module's static __device__ variables, 256 KiB on device 0, live at the end (not a leak).
 * `gen_traces diff A B MODULE OFFSET`: the native frame of train/step's stack is at OFFSET in
 * MODULE, a real file (for the symbolizer), instead of /opt/app/libtrain.so+0x12340. */

#define DIFF_MS(x) (T0 + (uint64_t)(x)*1000000ull)

static const char *diff_module = "/opt/app/libtrain.so";
static uint64_t diff_offset = 0x12340;

static void diff_common(tb *b, uint32_t *m, uint32_t *f, uint32_t *step, uint32_t *train,
                        uint32_t *stack)
{
    tb_device(b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    tb_module(b, 1, diff_module, 0x7f0000000000ull, 0x7f0000000000ull, 0x4000000);
    *m = tb_str(b, "cudaMalloc");
    *f = tb_str(b, "cudaFree");
    *train = tb_range(b, "train");
    *step = tb_range(b, "train/step");
    uint32_t outer = gmp_writer_stack_native(b->w, 0, 0x401000);
    *stack = gmp_writer_stack_native(b->w, outer, 0x7f0000000000ull + diff_offset);
    /* static __device__ variables: allocated when the module loads, live until it unloads */
    tb_alloc(b, 0, DIFF_MS(0), 0, GMP_MEM_STATIC, 0x7e0000000000ull, 256 * TB_KiB,
             tb_str(b, "cuModuleLoad"), 0, 0);
}

static void gen_diff(const char *path_a, const char *path_b)
{
    uint32_t m, f, step, train, s1;
    tb a;
    tb_open(&a, path_a);
    diff_common(&a, &m, &f, &step, &train, &s1);
    tb_alloc(&a, 0, DIFF_MS(1), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, m, step, s1);
    tb_alloc(&a, 0, DIFF_MS(2), 0, GMP_MEM_DEVICE, 0x7f1100000000ull, 256 * TB_MiB, m, train, 0);
    tb_alloc(&a, 1, DIFF_MS(3), 0, GMP_MEM_DEVICE, 0x7f1200000000ull, 64 * TB_MiB, m, 0, 0);
    tb_free(&a, 0, DIFF_MS(4), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, f);
    tb_free(&a, 1, DIFF_MS(5), 0, GMP_MEM_DEVICE, 0x7f1200000000ull, 64 * TB_MiB, f);
    tb_close(&a);

    tb b;
    tb_open(&b, path_b);
    diff_common(&b, &m, &f, &step, &train, &s1);
    tb_device(&b, 1, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    uint32_t eval = tb_range(&b, "eval");
    uint32_t py =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "train.py"), tb_str(&b, "evaluate"), 7);
    tb_alloc(&b, 0, DIFF_MS(1), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, m, step, s1);
    tb_alloc(&b, 0, DIFF_MS(2), 0, GMP_MEM_DEVICE, 0x7f1100000000ull, 512 * TB_MiB, m, train, 0);
    tb_alloc(&b, 1, DIFF_MS(3), 0, GMP_MEM_DEVICE, 0x7f1300000000ull, 128 * TB_MiB, m, eval, py);
    tb_alloc(&b, 2, DIFF_MS(4), 1, GMP_MEM_DEVICE, 0x7e1000000000ull, 100 * TB_MiB, m, 0, 0);
    tb_free(&b, 0, DIFF_MS(5), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, f);
    tb_close(&b);
}

/* ---------- main ---------- */

static int usage(void)
{
    fprintf(stderr,
            "usage: gen_traces cli OUT [--steps N] [--complete]\n"
            "       gen_traces report fixture|secrets|ranges|hostile|noalloc|killed|alike OUT\n"
            "       gen_traces report rank N OUT\n"
            "       gen_traces convert basic|hostile|empty OUT\n"
            "       gen_traces convert rank R OUT | convert big N OUT\n"
            "       gen_traces diff A B [MODULE OFFSET]\n");
    return 2;
}

static int gen_report(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[0], "fixture") == 0)
        report_fixture(argv[1]);
    else if (argc == 2 && strcmp(argv[0], "secrets") == 0)
        report_secrets(argv[1]);
    else if (argc == 2 && strcmp(argv[0], "ranges") == 0)
        report_ranges(argv[1]);
    else if (argc == 2 && strcmp(argv[0], "hostile") == 0)
        report_hostile(argv[1]);
    else if (argc == 2 && strcmp(argv[0], "noalloc") == 0)
        report_noalloc(argv[1]);
    else if (argc == 2 && strcmp(argv[0], "alike") == 0)
        report_alike(argv[1]);
    else if (argc == 2 && strcmp(argv[0], "killed") == 0)
        report_rank(argv[1], 0, 1);
    else if (argc == 3 && strcmp(argv[0], "rank") == 0)
        report_rank(argv[2], atoi(argv[1]), 0);
    else
        return usage();
    return 0;
}

static int gen_convert(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[0], "basic") == 0)
        conv_basic(argv[1]);
    else if (argc == 2 && strcmp(argv[0], "hostile") == 0)
        conv_hostile(argv[1]);
    else if (argc == 2 && strcmp(argv[0], "empty") == 0)
        conv_empty(argv[1]);
    else if (argc == 3 && strcmp(argv[0], "rank") == 0)
        conv_rank(argv[2], atoi(argv[1]));
    else if (argc == 3 && strcmp(argv[0], "big") == 0)
        conv_big(argv[2], strtoull(argv[1], NULL, 10));
    else
        return usage();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    int n = argc - 2;
    char **args = argv + 2;
    if (strcmp(cmd, "cli") == 0)
        return gen_cli(n, args);
    if (strcmp(cmd, "report") == 0)
        return gen_report(n, args);
    if (strcmp(cmd, "convert") == 0)
        return gen_convert(n, args);
    if (strcmp(cmd, "diff") == 0 && (n == 2 || n == 4)) {
        if (n == 4) {
            diff_module = args[2];
            diff_offset = strtoull(args[3], NULL, 0);
        }
        gen_diff(args[0], args[1]);
        return 0;
    }
    return usage();
}
