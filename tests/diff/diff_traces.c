/* diff_traces: writes the two traces behind the diff tests (tests/diff/check_diff.py) and the
 * examples of docs/diff.md: A (before) and B (after) of the same program.
 *
 *   diff_traces A.zst B.zst
 *
 * Device 0 in both; device 1 only in B. Sizes and times are fixed, so every delta is known:
 *   A: train/step 1 GiB (native stack), train 256 MiB (kept), no range 64 MiB (freed at the end)
 *   B: train/step 1 GiB (same stack), train 512 MiB (kept), eval 128 MiB (Python stack, kept),
 *      device 1: 100 MiB (kept). */
#include "replay_tb.h"

#define T0 1000000000ull
#define MS(x) (T0 + (uint64_t)(x)*1000000ull)

static void common(tb *b, uint32_t *m, uint32_t *f, uint32_t *step, uint32_t *train,
                   uint32_t *stack)
{
    tb_device(b, 0, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    tb_module(b, 1, "/opt/app/libtrain.so", 0x7f0000000000ull, 0x7f0000001000ull, 0x200000);
    *m = tb_str(b, "cudaMalloc");
    *f = tb_str(b, "cudaFree");
    *train = tb_range(b, "train");
    *step = tb_range(b, "train/step");
    uint32_t outer = gmp_writer_stack_native(b->w, 0, 0x401000);
    *stack = gmp_writer_stack_native(b->w, outer, 0x7f0000012340ull);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: diff_traces A.zst B.zst\n");
        return 2;
    }
    uint32_t m, f, step, train, s1;
    tb a;
    tb_open(&a, argv[1]);
    common(&a, &m, &f, &step, &train, &s1);
    tb_alloc(&a, 0, MS(1), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, m, step, s1);
    tb_alloc(&a, 0, MS(2), 0, GMP_MEM_DEVICE, 0x7f1100000000ull, 256 * TB_MiB, m, train, 0);
    tb_alloc(&a, 1, MS(3), 0, GMP_MEM_DEVICE, 0x7f1200000000ull, 64 * TB_MiB, m, 0, 0);
    tb_free(&a, 0, MS(4), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, f);
    tb_free(&a, 1, MS(5), 0, GMP_MEM_DEVICE, 0x7f1200000000ull, 64 * TB_MiB, f);
    tb_close(&a);

    tb b;
    tb_open(&b, argv[2]);
    common(&b, &m, &f, &step, &train, &s1);
    tb_device(&b, 1, "NVIDIA H100 80GB HBM3", 80 * TB_GiB);
    uint32_t eval = tb_range(&b, "eval");
    uint32_t py =
        gmp_writer_stack_python(b.w, 0, tb_str(&b, "train.py"), tb_str(&b, "evaluate"), 7);
    tb_alloc(&b, 0, MS(1), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, m, step, s1);
    tb_alloc(&b, 0, MS(2), 0, GMP_MEM_DEVICE, 0x7f1100000000ull, 512 * TB_MiB, m, train, 0);
    tb_alloc(&b, 1, MS(3), 0, GMP_MEM_DEVICE, 0x7f1300000000ull, 128 * TB_MiB, m, eval, py);
    tb_alloc(&b, 2, MS(4), 1, GMP_MEM_DEVICE, 0x7e1000000000ull, 100 * TB_MiB, m, 0, 0);
    tb_free(&b, 0, MS(5), 0, GMP_MEM_DEVICE, 0x7f1000000000ull, 1 * TB_GiB, f);
    tb_close(&b);
    return 0;
}
