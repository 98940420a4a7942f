/* gen_convert_traces: writes the traces behind the `gpumemprof convert` tests (tests/convert) and
 * benchmark, with the project's writer and fixed times (ms after the header's start_trace_ns).
 *
 *   gen_convert_traces basic OUT      two devices, two named threads, nested ranges (one domain),
 *                                     a start/end range, a mark, native and Python stacks, a pool,
 *                                     VMM, managed and pinned memory, an OOM, a sample, a notice,
 *                                     lost events and leaks
 *   gen_convert_traces hostile OUT    the same shapes with hostile strings everywhere (quotes,
 *                                     backslashes, <script>, newlines, control bytes, invalid
 *                                     UTF-8)
 *   gen_convert_traces rank R OUT     a small job rank (pid 5000 + R, started R ms after rank 0)
 *   gen_convert_traces empty OUT      a header and nothing else
 *   gen_convert_traces big N OUT      about N events: allocations and frees inside ranges on four
 *                                     threads and two devices (benchmarks, --max-spans, memory)
 *
 * The checked-in traces (tests/convert/data) come from here; `GMP_REGEN=1` in the tests rewrites
 * them and the golden outputs. */
#include "replay_tb.h"

#define T0 1000000000ull /* start_trace_ns of the header */
#define MS(x) (T0 + (uint64_t)((x)*1000000.0 + 0.5))

static void open_trace(tb *b, const char *path, uint32_t pid, int64_t rank, const char *host,
                       const char *cmdline, size_t cmdlen, uint64_t wall)
{
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s", path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        tb_die("cannot create the trace file");
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = (gmp_str){"convert-tests", 13};
    h.pid = pid;
    h.ppid = 1;
    h.hostname = (gmp_str){host, (uint32_t)strlen(host)};
    h.cmdline = (gmp_str){cmdline, (uint32_t)cmdlen};
    h.rank = rank;
    h.start_wall_ns = wall;
    h.start_trace_ns = T0;
    h.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    h.options = (gmp_str){"stacks=native", 13};
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    if (gmp_writer_open(&b->w, fd, &o, &h) != GMP_OK)
        tb_die("gmp_writer_open failed");
    for (int i = 0; i < TB_THREADS; i++) {
        b->tids[i] = 100 + (uint32_t)i;
        b->th[i] = gmp_writer_thread(b->w, b->tids[i]);
        if (!b->th[i])
            tb_die("gmp_writer_thread failed");
    }
}

static void thread_name(tb *b, uint32_t tid, const char *name, size_t n)
{
    gmp_rec d;
    memset(&d, 0, sizeof d);
    d.type = GMP_REC_THREAD;
    d.u.thread.tid = tid;
    d.u.thread.name = (gmp_str){name, (uint32_t)n};
    if (gmp_writer_define(b->w, &d) != GMP_OK)
        tb_die("gmp_writer_define failed");
}

static void device_n(tb *b, uint32_t id, const char *name, size_t n, uint64_t total)
{
    gmp_rec d;
    memset(&d, 0, sizeof d);
    d.type = GMP_REC_DEVICE;
    d.u.device.id = id;
    d.u.device.name = (gmp_str){name, (uint32_t)n};
    d.u.device.total_bytes = total;
    d.u.device.cc_major = 9;
    if (gmp_writer_define(b->w, &d) != GMP_OK)
        tb_die("gmp_writer_define failed");
}

static uint32_t str_n(tb *b, const char *s, size_t n)
{
    uint32_t id = gmp_writer_string(b->w, s, n);
    if (!id)
        tb_die("gmp_writer_string failed");
    return id;
}

static void notice(tb *b, int th, uint64_t t, const char *msg, size_t n)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_NOTICE;
    r.time_ns = t;
    r.u.notice.severity = GMP_NOTICE_INFO;
    r.u.notice.message = (gmp_str){msg, (uint32_t)n};
    tb_event(b, th, &r);
}

/* The shapes of the basic trace; names come from the caller (plain or hostile). */
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

static void write_basic(const char *out, const names *nm, const char *host, const char *cmd,
                        size_t cmdlen)
{
    tb b;
    open_trace(&b, out, 4242, -1, host, cmd, cmdlen, 1700000000000000000ull);
    device_n(&b, 0, nm->s[N_DEVICE], nm->n[N_DEVICE], 80 * TB_GiB);
    device_n(&b, 1, "NVIDIA H100 80GB HBM3", 21, 80 * TB_GiB);
    thread_name(&b, b.tids[0], nm->s[N_THREAD0], nm->n[N_THREAD0]);
    thread_name(&b, b.tids[1], nm->s[N_THREAD1], nm->n[N_THREAD1]);
    tb_module(&b, 1, nm->s[N_MODULE], 0x7f0000000000ull, 0x7f0000001000ull, 0x200000);
    uint32_t s_outer = gmp_writer_stack_native(b.w, 0, 0x7f0000012340ull);
    uint32_t s_native = gmp_writer_stack_native(b.w, s_outer, 0x401000);
    uint32_t s_py = gmp_writer_stack_python(b.w, 0, str_n(&b, nm->s[N_PYFILE], nm->n[N_PYFILE]),
                                            str_n(&b, nm->s[N_PYFUNC], nm->n[N_PYFUNC]), 42);
    uint32_t s_py2 = gmp_writer_stack_python(b.w, s_py, str_n(&b, "model.py", 8),
                                             str_n(&b, "Linear.forward", 14), 7);
    uint32_t m = str_n(&b, nm->s[N_API], nm->n[N_API]), f = tb_str(&b, "cudaFree");
    uint32_t ma = tb_str(&b, "cudaMallocAsync"), fa = tb_str(&b, "cudaFreeAsync");
    uint32_t mm = tb_str(&b, "cudaMallocManaged"), mh = tb_str(&b, "cudaMallocHost");
    uint32_t res = tb_str(&b, "cuMemAddressReserve"), cr = tb_str(&b, "cuMemCreate");
    uint32_t mp = tb_str(&b, "cuMemMap"), um = tb_str(&b, "cuMemUnmap");
    uint32_t rl = tb_str(&b, "cuMemRelease");
    uint32_t n_train = str_n(&b, nm->s[N_TRAIN], nm->n[N_TRAIN]);
    uint32_t r_train = gmp_writer_range(b.w, 0, 0, n_train);
    uint32_t r_step = gmp_writer_range(b.w, r_train, 0, str_n(&b, nm->s[N_STEP], nm->n[N_STEP]));
    uint32_t r_fwd = gmp_writer_range(b.w, r_step, 0, str_n(&b, nm->s[N_FWD], nm->n[N_FWD]));
    uint32_t r_bwd = gmp_writer_range(b.w, r_step, 0, str_n(&b, nm->s[N_BWD], nm->n[N_BWD]));
    uint32_t dom = str_n(&b, nm->s[N_DOMAIN], nm->n[N_DOMAIN]);
    uint32_t r_eval = gmp_writer_range(b.w, 0, dom, str_n(&b, nm->s[N_EVAL], nm->n[N_EVAL]));
    uint32_t r_load = gmp_writer_range(b.w, 0, 0, str_n(&b, nm->s[N_LOAD], nm->n[N_LOAD]));
    uint32_t r_mark = gmp_writer_range(b.w, 0, 0, str_n(&b, nm->s[N_MARK], nm->n[N_MARK]));
    const uint64_t P = 0x5000, H = 0x21, VA = 0x7e0000000000ull;

    notice(&b, 0, MS(0.5), nm->s[N_NOTICE], nm->n[N_NOTICE]);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(1), r_train, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(2), r_step, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_START, MS(2.5), r_load, 77);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(3), r_fwd, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, MS(3.5), r_eval, 0);
    gmp_writer_flush(b.w, 0);
    tb_alloc(&b, 0, MS(4), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, m, r_fwd, s_native);
    tb_alloc(&b, 0, MS(5), 0, GMP_MEM_DEVICE, 0x7f1040000000ull, 512 * TB_MiB, m, r_fwd, s_py2);
    tb_alloc(&b, 1, MS(5.5), 1, GMP_MEM_VA_RESERVE, VA, 1 * TB_GiB, res, r_eval, 0);
    tb_mem phys = {1, GMP_MEM_VMM_PHYSICAL, 0, cr, r_eval, 0, 0, 256 * TB_MiB, H, 0};
    tb_memrec(&b, 1, GMP_REC_ALLOC, MS(5.6), &phys);
    tb_mem map = {1, GMP_MEM_VMM_MAPPING, 0, mp, r_eval, 0, VA, 256 * TB_MiB, H, 0};
    tb_memrec(&b, 1, GMP_REC_ALLOC, MS(5.7), &map);
    tb_range_ev(&b, 1, GMP_REC_MARK, MS(5.8), r_mark, 0);
    gmp_writer_flush(b.w, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, MS(6), r_fwd, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(6.2), r_bwd, 0);
    tb_alloc(&b, 1, MS(6.5), 1, GMP_MEM_DEVICE, 0x7e1000000000ull, 100 * TB_MiB, m, r_eval, s_py);
    tb_alloc(&b, 0, MS(7), 0, GMP_MEM_DEVICE, 0x7f1060000000ull, 256 * TB_MiB, m, r_bwd, 0);
    tb_pool(&b, 0, MS(8), 0, GMP_POOL_CREATE, P, 0);
    tb_pool(&b, 0, MS(8.1), 0, GMP_POOL_RESERVED, P, 128 * TB_MiB);
    tb_range_ev(&b, 1, GMP_REC_RANGE_END, MS(8.2), 0, 77);
    gmp_writer_flush(b.w, 0);
    tb_mem fv = {1, GMP_MEM_VMM_MAPPING, 0, um, 0, 0, VA, 256 * TB_MiB, H, 0};
    tb_memrec(&b, 1, GMP_REC_FREE, MS(8.5), &fv);
    tb_mem fr = {1, GMP_MEM_VMM_PHYSICAL, 0, rl, 0, 0, 0, 0, H, 0};
    tb_memrec(&b, 1, GMP_REC_FREE, MS(8.6), &fr);
    tb_mem aa = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, ma, r_bwd,
                 0, 0x7f2000000000ull,  64 * TB_MiB,    P,  7};
    tb_memrec(&b, 0, GMP_REC_ALLOC, MS(9), &aa);
    tb_range_ev(&b, 1, GMP_REC_RANGE_POP, MS(9.5), r_eval, 0);
    gmp_writer_flush(b.w, 0);
    tb_free(&b, 0, MS(10), 0, GMP_MEM_DEVICE, 0x7f1040000000ull, 0, f);
    tb_mem af = {0, GMP_MEM_ASYNC_POOL, GMP_MEMF_ASYNC, fa, 0, 0, 0x7f2000000000ull, 0, P, 7};
    tb_memrec(&b, 0, GMP_REC_FREE, MS(11), &af);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, MS(12), r_bwd, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, MS(12.1), r_step, 0);
    gmp_writer_flush(b.w, 0);
    tb_alloc(&b, 0, MS(13), 0, GMP_MEM_MANAGED, 0x7f3000000000ull, 32 * TB_MiB, mm, r_train, 0);
    tb_alloc(&b, 0, MS(14), -1, GMP_MEM_PINNED_HOST, 0x600000, 16 * TB_MiB, mh, r_train, 0);
    tb_mem failed = {0, GMP_MEM_DEVICE, GMP_MEMF_FAILED, m, r_train, s_native, 0, 8 * TB_GiB, 0, 0};
    tb_memrec(&b, 0, GMP_REC_ALLOC, MS(15), &failed);
    tb_oom(&b, 0, MS(15), 0, m, 8 * TB_GiB, r_train, s_native);
    gmp_writer_flush(b.w, 0);
    tb_free(&b, 0, MS(16), 0, GMP_MEM_DEVICE, 0xdead00, 0, f);
    tb_free(&b, 0, MS(17), 0, GMP_MEM_DEVICE, 0x7f1060000000ull, 0, f);
    tb_sample(&b, 0, MS(18), 0, 78 * TB_GiB, 80 * TB_GiB, UINT64_MAX);
    gmp_rec lost;
    memset(&lost, 0, sizeof lost);
    lost.type = GMP_REC_LOST;
    lost.time_ns = MS(18.2);
    lost.u.lost.count = 3;
    lost.u.lost.reason = GMP_LOST_BUFFER_FULL;
    tb_event(&b, 1, &lost);
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, MS(18.5), r_eval, 0); /* still open at the end */
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, MS(19), r_train, 0);
    tb_close(&b);
}

#define S(x) x, sizeof(x) - 1

static void gen_basic(const char *out)
{
    names nm = {{"train", "step", "forward", "backward", "eval", "eval-domain", "MainThread",
                 "loader", "NVIDIA H100 80GB HBM3", "cudaMalloc", "train.py", "model_forward",
                 "/opt/app/libtrain.so", "stacks: native frames not symbolized", "checkpoint",
                 "load_batch"},
                {0}};
    for (int i = 0; i < 16; i++)
        nm.n[i] = strlen(nm.s[i]);
    write_basic(out, &nm, "testhost", S("python\0train.py\0--epochs=1"));
}

static void gen_hostile(const char *out)
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
    write_basic(out, &h, "host\"<x>\n\xff", S("py\"thon\0<script>\0\xff\xfe"));
}

static void gen_rank(const char *out, int rank)
{
    tb b;
    char cmd[] = "python\0train.py";
    /* rank r started r ms after rank 0 (wall clock); its trace clock is unrelated */
    open_trace(&b, out, 5000 + (uint32_t)rank, rank, "node1", cmd, sizeof cmd - 1,
               1700000000000000000ull + (uint64_t)rank * 1000000ull);
    tb_device(&b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t r_step = tb_range(&b, "step"), r_fwd = tb_range(&b, "step/forward");
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(1), r_step, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(2), r_fwd, 0);
    tb_alloc(&b, 0, MS(3), 0, GMP_MEM_DEVICE, 0x1000000, (uint64_t)(rank + 1) * TB_MiB, m, r_fwd,
             0);
    tb_alloc(&b, 0, MS(4), 0, GMP_MEM_DEVICE, 0x2000000, 2 * TB_MiB, m, r_fwd, 0);
    tb_free(&b, 0, MS(5), 0, GMP_MEM_DEVICE, 0x1000000, 0, f);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, MS(6), r_fwd, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, MS(7), r_step, 0);
    tb_close(&b);
}

static void gen_empty(const char *out)
{
    tb b;
    open_trace(&b, out, 7, -1, "h", "x", 1, 1700000000000000000ull);
    tb_close(&b);
}

/* About n events: per step on each thread, a push, allocations and frees, a pop. */
static void gen_big(const char *out, uint64_t n)
{
    tb b;
    open_trace(&b, out, 9000, -1, "bench", "bench", 5, 1700000000000000000ull);
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

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "basic") == 0)
        gen_basic(argv[2]);
    else if (argc == 3 && strcmp(argv[1], "hostile") == 0)
        gen_hostile(argv[2]);
    else if (argc == 3 && strcmp(argv[1], "empty") == 0)
        gen_empty(argv[2]);
    else if (argc == 4 && strcmp(argv[1], "rank") == 0)
        gen_rank(argv[3], atoi(argv[2]));
    else if (argc == 4 && strcmp(argv[1], "big") == 0)
        gen_big(argv[3], strtoull(argv[2], NULL, 10));
    else {
        fprintf(stderr, "usage: gen_convert_traces basic|hostile|empty OUT | rank R OUT | "
                        "big N OUT\n");
        return 2;
    }
    return 0;
}
