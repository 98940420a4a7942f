/* report_traces: the fixed traces behind the report tests (tests/report/check_report_formats.py).
 *
 *   report_traces ranges OUT.zst         nested ranges with known allocations (exact ranges[])
 *   report_traces hostile OUT.zst        hostile strings everywhere a trace has strings
 *   report_traces rank N OUT.zst         a small training step as rank N (several traces)
 *   report_traces noalloc OUT.zst        a device, a range and driver samples, no allocation
 *   report_traces killed OUT.zst         rank 0 with its events in frames before END's (cut it)
 *   report_traces alike OUT.zst          four stacks that look alike when cut or folded
 *
 * Times are microseconds after start_trace_ns (T(x)). */
#include "replay_tb.h"

#define T0 1000000000ull
#define T(x) (T0 + (uint64_t)((x)*1000.0))

static void pool(tb *b, double t, uint64_t reserved)
{
    tb_pool(b, 0, T(t), 0, GMP_POOL_CREATE, 0x5000, 0);
    tb_pool(b, 0, T(t + 0.1), 0, GMP_POOL_RESERVED, 0x5000, reserved);
}

/* Thread 0: outer [1,12] { inner [3,7] { B, C; frees A }, inner [9,11] { D } }, A before inner;
 * thread 1 frees B at 6.5 (inside inner, another thread) and has a start/end range "phase"
 * [3.5, 9.5]. A pool holds 200 MiB reserved from 1.5 on (fragmentation 200 MiB). */
static void ranges(const char *out)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t outer = tb_range(&b, "outer"), inner = tb_range(&b, "outer/inner");
    uint32_t phase = tb_range(&b, "phase");
    const uint64_t A = 0x10000000, B = 0x20000000, C = 0x30000000, D = 0x40000000;
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T(1), outer, 0);
    pool(&b, 1.4, 200 * TB_MiB);
    tb_alloc(&b, 0, T(2), 0, GMP_MEM_DEVICE, A, 100 * TB_MiB, m, outer, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T(3), inner, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_START, T(3.5), phase, 7);
    tb_alloc(&b, 0, T(4), 0, GMP_MEM_DEVICE, B, 50 * TB_MiB, m, inner, 0);
    tb_free(&b, 0, T(5), 0, GMP_MEM_DEVICE, A, 0, f);
    tb_alloc(&b, 0, T(6), 0, GMP_MEM_DEVICE, C, 30 * TB_MiB, m, inner, 0);
    tb_free(&b, 1, T(6.5), 0, GMP_MEM_DEVICE, B, 0, f);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T(7), inner, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T(9), inner, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_END, T(9.5), 0, 7);
    tb_alloc(&b, 0, T(10), 0, GMP_MEM_DEVICE, D, 10 * TB_MiB, m, inner, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T(11), inner, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T(12), outer, 0);
    tb_free(&b, 1, T(13), 0, GMP_MEM_DEVICE, C, 0, f);
    tb_close(&b);
}

#define EVIL_SCRIPT "\"><script>alert(1)</script>"
#define EVIL_IMG "\xff\xfe<img src=x onerror=alert(1)>"

static void hostile(const char *out)
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
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T(1), r1, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T(2), r2, 0);
    tb_alloc(&b, 0, T(3), 0, GMP_MEM_DEVICE, 0x1000000, 64 * TB_MiB, m, r2, s_nat);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T(4), r2, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T(5), r1, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, T(6), r3, 0);
    tb_alloc(&b, 1, T(7), 0, GMP_MEM_DEVICE, 0x2000000, 32 * TB_MiB, m, r3, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_POP, T(8), r3, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, T(9), r4, 0);
    tb_alloc(&b, 1, T(10), 0, GMP_MEM_DEVICE, 0x3000000, 16 * TB_MiB, m, r4, 0);
    tb_free(&b, 1, T(11), 0, GMP_MEM_DEVICE, 0x2000000, 0, f);
    tb_oom(&b, 1, T(11.5), 0, m, 64 * TB_GiB, r4, s_nat);
    tb_range_ev(&b, 1, GMP_REC_RANGE_POP, T(12), r4, 0);
    gmp_rec n;
    memset(&n, 0, sizeof n);
    n.type = GMP_REC_NOTICE;
    n.time_ns = T(13);
    n.u.notice.severity = GMP_NOTICE_WARNING;
    static const char msg[] = "notice <script>alert(3)</script>\n\x80";
    n.u.notice.message = (gmp_str){msg, sizeof msg - 1};
    tb_event(&b, 0, &n);
    tb_close(&b);
}

/* Rank r: allocates (r + 1) * 100 MiB in "step/forward", frees half. killed: the events end with
 * a SYNC (a frame of their own), so that cutting the file's last bytes loses only the END record,
 * as when the program is killed before it exits. */
static void rank(const char *out, int r, int killed)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t step = tb_range(&b, "step"), fwd = tb_range(&b, "step/forward");
    uint64_t sz = (uint64_t)(r + 1) * 50 * TB_MiB;
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T(1), step, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T(2), fwd, 0);
    tb_alloc(&b, 0, T(3), 0, GMP_MEM_DEVICE, 0x1000000, sz, m, fwd, 0);
    tb_alloc(&b, 0, T(4), 0, GMP_MEM_DEVICE, 0x9000000, sz, m, fwd, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T(5), fwd, 0);
    tb_free(&b, 0, T(6), 0, GMP_MEM_DEVICE, 0x1000000, 0, f);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T(7), step, 0);
    if (killed)
        gmp_writer_sync(b.w, T(7));
    tb_close(&b);
}

/* Two devices that are known (DEVICE records, samples of the driver: device 1's show 1 GiB that no
 * allocation explains, device 0's nothing) and a range, but no allocation: the report has no peak
 * to give a time for. */
static void noalloc(const char *out)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    uint32_t step = tb_range(&b, "step");
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, T(300000), step, 0);
    tb_device(&b, 1, "Test GPU", 16 * TB_GiB);
    tb_sample(&b, 0, T(300001), 0, 15 * TB_GiB, 16 * TB_GiB, 0);
    tb_sample(&b, 0, T(300001.5), 1, 15 * TB_GiB, 16 * TB_GiB, UINT64_MAX);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, T(300002), step, 0);
    tb_close(&b);
}

/* Stacks that would look alike in a table (docs/stacks.md, "Frames from user code": two different
 * call sites never render the same): A and B share their four innermost frames and differ in the
 * fifth; C and D differ only in an internal frame folded inside the same user frame. */
static void alike(const char *out)
{
    tb b;
    tb_open(&b, out);
    tb_device(&b, 0, "Test GPU", 16 * TB_GiB);
    uint32_t m = tb_str(&b, "cudaMalloc");
    uint32_t f = tb_str(&b, "x.py"), g = tb_str(&b, "run");
    uint32_t outer[2];
    for (int k = 0; k < 2; k++) {
        uint32_t s = gmp_writer_stack_python(b.w, 0, f, g, 5 + (uint32_t)k); /* the fifth */
        static const char *const names[] = {"d", "c", "b", "a"};
        for (int i = 0; i < 4; i++)
            s = gmp_writer_stack_python(b.w, s, tb_str(&b, "m.py"), tb_str(&b, names[i]),
                                        (uint32_t)(10 + i));
        outer[k] = s;
    }
    uint32_t u = gmp_writer_stack_python(b.w, 0, tb_str(&b, "u.py"), tb_str(&b, "user"), 9);
    uint32_t e = tb_str(&b, "");
    uint32_t sc = gmp_writer_stack_python(
        b.w, u, e, tb_str(&b, "c10::cuda::CUDACachingAllocator::malloc(unsigned long)"), 0);
    uint32_t sd = gmp_writer_stack_python(
        b.w, u, e, tb_str(&b, "c10::cuda::CUDACachingAllocator::allocate(unsigned long)"), 0);
    tb_alloc(&b, 0, T(1), 0, GMP_MEM_DEVICE, 0x1000000, 40 * TB_MiB, m, 0, outer[0]);
    tb_alloc(&b, 0, T(2), 0, GMP_MEM_DEVICE, 0x5000000, 30 * TB_MiB, m, 0, outer[1]);
    tb_alloc(&b, 0, T(3), 0, GMP_MEM_DEVICE, 0x9000000, 20 * TB_MiB, m, 0, sc);
    tb_alloc(&b, 0, T(4), 0, GMP_MEM_DEVICE, 0xd000000, 10 * TB_MiB, m, 0, sd);
    tb_close(&b);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "ranges") == 0)
        ranges(argv[2]);
    else if (argc == 3 && strcmp(argv[1], "hostile") == 0)
        hostile(argv[2]);
    else if (argc == 3 && strcmp(argv[1], "noalloc") == 0)
        noalloc(argv[2]);
    else if (argc == 4 && strcmp(argv[1], "rank") == 0)
        rank(argv[3], atoi(argv[2]), 0);
    else if (argc == 3 && strcmp(argv[1], "alike") == 0)
        alike(argv[2]);
    else if (argc == 3 && strcmp(argv[1], "killed") == 0)
        rank(argv[2], 0, 1);
    else {
        fprintf(
            stderr,
            "usage: report_traces ranges|hostile|noalloc|killed|alike OUT.zst | rank N OUT.zst\n");
        return 2;
    }
    return 0;
}
