/* gen_ranks_oom: the traces of a four-rank job in which rank 2 runs out of memory, for the
 * verdicts of "An OOM across ranks" that the simulated device does not produce
 * (tests/report/check_ranks_oom_causes.py; docs/report.md). Written with the project's writer and
 * tests/replay/replay_tb.h, every time fixed.
 *
 *   gen_ranks_oom frag|outside|capacity RANK OUT
 *
 * Every rank (pid 5000 + RANK, its header's rank, local rank and world size 4; started RANK ms
 * after rank 0 on the wall clock) runs six iterations of the push/pop range "step", 1 ms apart,
 * on a 1 GiB device 0, with a driver sample at the start of each step (the driver's use is the
 * device's reserved bytes plus 100 MiB of context). In each step, inside "step/forward", it takes
 * 80 MiB from a stream-ordered pool whose reserved size is 100 MiB, and gives them back at the
 * step's end. Rank 2 differs in its 3rd step and runs out of memory there (a 200 MiB request):
 *   frag     its pool has grown to 900 MiB while it holds 300 MiB (600 MiB free inside the pool,
 *            no block large enough): fragmentation;
 *   outside  its allocations are the others' plus 10 MiB, but the driver counts 600 MiB more in
 *            use than its pool reserved (a library's own cudaMalloc outside the trace's view):
 *            memory outside the allocator;
 *   capacity its 3rd step is every other rank's, and it asks for 2 GiB more: no rank holds more
 *            than the others, the device is too small for what the job asks. */
#include "replay_tb.h"

#define T0 1000000000ull
#define US(x) (T0 + (uint64_t)((x)*1000.0))
#define POOL 0x5000ull
#define GIB (1024ull * TB_MiB)

static void event_rank(const char *kind, int rank, const char *out)
{
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = (gmp_str){"ranks-oom-tests", 15};
    h.pid = 5000 + (uint32_t)rank;
    h.ppid = 1;
    h.hostname = (gmp_str){"testhost", 8};
    h.cmdline = (gmp_str){"python\0train.py", 15};
    h.rank = rank;
    h.local_rank = rank;
    h.world_size = 4;
    h.rank_var = (gmp_str){"RANK", 4};
    h.start_wall_ns = 1700000000000000000ull + (uint64_t)rank * 1000000ull;
    h.start_trace_ns = T0;
    h.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    h.options = (gmp_str){"stacks=none", 11};
    tb b;
    tb_open_header(&b, out, &h, NULL, TB_THREADS);
    tb_device(&b, 0, "Test GPU", GIB);
    uint32_t m = tb_str(&b, "cudaMallocAsync"), f = tb_str(&b, "cudaFreeAsync");
    uint32_t step = tb_range(&b, "step"), fwd = tb_range(&b, "step/forward");
    int frag = !strcmp(kind, "frag"), cap = !strcmp(kind, "capacity"), failing = rank == 2;
    tb_pool(&b, 0, US(1), 0, GMP_POOL_CREATE, POOL, 0);
    tb_pool(&b, 0, US(2), 0, GMP_POOL_RESERVED, POOL, 100 * TB_MiB);
    for (int s = 1; s <= 6; s++) {
        double t = 1000.0 * s;
        int bad = failing && s == 3, odd = bad && !cap; /* the failing step differs */
        uint64_t reserved = odd && frag ? 900 * TB_MiB : 100 * TB_MiB;
        uint64_t outside = 100 * TB_MiB + (odd && !frag ? 600 * TB_MiB : 0);
        uint64_t held = odd && frag ? 300 * TB_MiB : odd ? 90 * TB_MiB : 80 * TB_MiB;
        tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(t), step, 0);
        if (reserved != 100 * TB_MiB)
            tb_pool(&b, 0, US(t + 1), 0, GMP_POOL_RESERVED, POOL, reserved);
        tb_sample(&b, 0, US(t + 2), 0, GIB - reserved - outside, GIB, UINT64_MAX);
        tb_range_ev(&b, 0, GMP_REC_RANGE_PUSH, US(t + 3), fwd, 0);
        tb_mem a = {0,
                    GMP_MEM_ASYNC_POOL,
                    GMP_MEMF_ASYNC,
                    m,
                    fwd,
                    0,
                    0x7f0000000000ull + (uint64_t)s * 0x40000000ull,
                    held,
                    POOL,
                    7};
        tb_memrec(&b, 0, GMP_REC_ALLOC, US(t + 4), &a);
        if (bad) {
            tb_oom(&b, 0, US(t + 5), 0, m, cap ? 2 * GIB : 200 * TB_MiB, fwd, 0);
            break; /* the rank dies with its error */
        }
        tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(t + 6), fwd, 0);
        tb_mem fr = a;
        fr.api = f;
        fr.range = 0;
        tb_memrec(&b, 0, GMP_REC_FREE, US(t + 7), &fr);
        tb_range_ev(&b, 0, GMP_REC_RANGE_POP, US(t + 8), step, 0);
    }
    tb_close(&b);
}

int main(int argc, char **argv)
{
    if (argc != 4 ||
        (strcmp(argv[1], "frag") && strcmp(argv[1], "outside") && strcmp(argv[1], "capacity"))) {
        fprintf(stderr, "usage: gen_ranks_oom frag|outside|capacity RANK OUT\n");
        return 2;
    }
    event_rank(argv[1], atoi(argv[2]), argv[3]);
    return 0;
}
