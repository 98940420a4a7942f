/* report_trace: writes the fixed trace behind the report tests (tests/replay/check_report.py) and
 * the examples of docs/report.md.
 *
 *   report_trace OUT.zst
 *
 * Two devices and two threads: nested NVTX ranges, native and Python stacks, a stream-ordered
 * pool, VMM, managed and pinned memory, a failed allocation with its OOM, a free of an unknown
 * address, a driver sample, a notice, and leaks. Every time is fixed (ms after start_trace_ns),
 * except the END record's. Each millisecond ends a frame, so a cut file loses whole steps. */
#include "replay_tb.h"

#define T0 1000000000ull /* start_trace_ns of replay_tb's header */
#define MS(x) (T0 + (uint64_t)((x)*1000000.0))

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: report_trace OUT.zst\n");
        return 2;
    }
    tb b;
    tb_open(&b, argv[1]);
    tb_device(&b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    tb_device(&b, 1, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    tb_module(&b, 1, "/opt/app/libtrain.so", 0x7f0000000000ull, 0x7f0000001000ull, 0x200000);
    uint32_t s_outer = gmp_writer_stack_native(b.w, 0, 0x7f0000012340ull);
    uint32_t s_native = gmp_writer_stack_native(b.w, s_outer, 0x401000);
    uint32_t s_py =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "train.py"), tb_str(&b, "model_forward"), 42);
    uint32_t m = tb_str(&b, "cudaMalloc"), f = tb_str(&b, "cudaFree");
    uint32_t ma = tb_str(&b, "cudaMallocAsync"), fa = tb_str(&b, "cudaFreeAsync");
    uint32_t mm = tb_str(&b, "cudaMallocManaged"), mh = tb_str(&b, "cudaMallocHost");
    uint32_t res = tb_str(&b, "cuMemAddressReserve"), cr = tb_str(&b, "cuMemCreate");
    uint32_t mp = tb_str(&b, "cuMemMap"), um = tb_str(&b, "cuMemUnmap");
    uint32_t rl = tb_str(&b, "cuMemRelease");
    uint32_t r_train = tb_range(&b, "train"), r_step = tb_range(&b, "train/step");
    uint32_t r_fwd = tb_range(&b, "train/step/forward");
    uint32_t r_bwd = tb_range(&b, "train/step/backward");
    uint32_t r_eval = tb_range(&b, "eval");
    const uint64_t P = 0x5000, H = 0x21, VA = 0x7e0000000000ull;

    gmp_rec n;
    memset(&n, 0, sizeof n);
    n.type = GMP_REC_NOTICE;
    n.time_ns = MS(0.5);
    n.u.notice.severity = GMP_NOTICE_INFO;
    n.u.notice.message = (gmp_str){"stacks: native frames not symbolized", 36};
    tb_event(&b, 0, &n);

    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(1), r_train, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(2), r_step, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(3), r_fwd, 0);
    tb_range_ev(&b, 1, GMP_REC_RANGE_PUSH, MS(3.5), r_eval, 0);
    gmp_writer_flush(b.w, 0);
    tb_alloc(&b, 0, MS(4), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, m, r_fwd, s_native);
    tb_alloc(&b, 0, MS(5), 0, GMP_MEM_DEVICE, 0x7f1040000000ull, 512 * TB_MiB, m, r_fwd, s_py);
    tb_alloc(&b, 1, MS(5.5), 1, GMP_MEM_VA_RESERVE, VA, 1 * TB_GiB, res, r_eval, 0);
    tb_mem phys = {1, GMP_MEM_VMM_PHYSICAL, 0, cr, r_eval, 0, 0, 256 * TB_MiB, H, 0};
    tb_memrec(&b, 1, GMP_REC_ALLOC, MS(5.6), &phys);
    tb_mem map = {1, GMP_MEM_VMM_MAPPING, 0, mp, r_eval, 0, VA, 256 * TB_MiB, H, 0};
    tb_memrec(&b, 1, GMP_REC_ALLOC, MS(5.7), &map);
    gmp_writer_flush(b.w, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, MS(6), r_fwd, 0);
    tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, MS(6.2), r_bwd, 0);
    tb_alloc(&b, 1, MS(6.5), 1, GMP_MEM_DEVICE, 0x7e1000000000ull, 100 * TB_MiB, m, r_eval, 0);
    tb_alloc(&b, 0, MS(7), 0, GMP_MEM_DEVICE, 0x7f1060000000ull, 256 * TB_MiB, m, r_bwd, 0);
    tb_pool(&b, 0, MS(8), 0, GMP_POOL_CREATE, P, 0);
    tb_pool(&b, 0, MS(8.1), 0, GMP_POOL_RESERVED, P, 128 * TB_MiB);
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
    tb_range_ev(&b, 0, GMP_REC_RANGE_POP, MS(19), r_train, 0);
    tb_close(&b);
    return 0;
}
