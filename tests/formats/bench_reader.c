/* bench_reader: reader throughput on a large generated trace, written the way the writer does
 * (8 threads, 64 KiB buffers of ALLOC/FREE events, a SYNC after each round of buffers, ~4 MiB
 * frames, zstd level 3). Prints `name: value unit` lines (figures, not a test).
 *   bench_reader [EVENTS] [FILE]   (default 10000000 events; FILE: also read it from a file) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "gmp_reader.h"
#include "trace_build.h"

static double clock_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of this thread: steadier than wall time on a shared machine. */
static double cpu_s(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static uint64_t run(gmp_reader *r, double *secs)
{
    const gmp_rec *x;
    uint64_t n = 0, sum = 0;
    double t0 = cpu_s();
    while (gmp_reader_next(r, &x) == GMP_OK) {
        n++;
        sum += x->time_ns;
    }
    *secs = cpu_s() - t0;
    if (sum == 42)
        printf("#\n");
    return n;
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
    const char *file = argc > 2 ? argv[2] : NULL;
    tb b;
    tb_init(&b);
    b.level = 3;
    tb_start(&b, NULL);
    tb_string(&b, 1, "cudaMalloc");
    tb_string(&b, 2, "cudaFree");
    for (uint32_t i = 1; i <= 64; i++) {
        gmp_rec g;
        memset(&g, 0, sizeof g);
        g.type = GMP_REC_RANGE;
        g.u.range.id = i;
        g.u.range.parent = i > 8 ? i - 8 : 0;
        g.u.range.name = 1;
        tb_rec(&b, &g);
        g.type = GMP_REC_STACK;
        g.u.stack.id = i;
        g.u.stack.parent = i > 1 ? i - 1 : 0;
        g.u.stack.kind = GMP_FRAME_NATIVE;
        g.u.stack.address = 0x400000 + i * 64;
        tb_rec(&b, &g);
    }
    double g0 = now_s();
    const int threads = 8, per_buffer = 2500;
    uint64_t t = 1000000, written = 0, seed = 1;
    uint64_t thread_t[8];
    while (written < events) {
        for (int th = 0; th < threads && written < events; th++) {
            thread_t[th] = t + (uint64_t)th * 13;
            tb_buffer(&b, 100 + (uint32_t)th, thread_t[th]);
            for (int i = 0; i < per_buffer && written < events; i++, written++) {
                gmp_rec e;
                memset(&e, 0, sizeof e);
                e.type = i % 2 ? GMP_REC_FREE : GMP_REC_ALLOC;
                thread_t[th] += 200 + tb_rand(&seed) % 3000;
                e.time_ns = thread_t[th];
                e.u.mem.kind = GMP_MEM_DEVICE;
                e.u.mem.api = 1 + (uint32_t)(i % 2);
                e.u.mem.address = 0x7f3a00000000ull + (tb_rand(&seed) % 65536) * 512;
                e.u.mem.size = 512 + tb_rand(&seed) % (2u << 20);
                e.u.mem.stack = 1 + (uint32_t)(tb_rand(&seed) % 64);
                e.u.mem.range = 1 + (uint32_t)(tb_rand(&seed) % 64);
                e.u.mem.correlation = written + 100000;
                tb_rec(&b, &e);
            }
            if (b.rlen > (4u << 20))
                tb_frame(&b);
        }
        uint64_t sync = UINT64_MAX;
        for (int th = 0; th < threads; th++)
            if (thread_t[th] < sync)
                sync = thread_t[th];
        tb_sync(&b, sync);
        t = sync + 1;
    }
    tb_frame(&b);
    double gen = now_s() - g0;
    printf("reader_trace_events: %llu events\n", (unsigned long long)events);
    printf("reader_trace_bytes: %zu bytes (%.2f bytes/event; generated in %.1f s)\n", b.len,
           (double)b.len / (double)events, gen);

    for (int mode = 0; mode < 2; mode++) {
        double best = 1e9;
        uint64_t n = 0, late = 0;
        for (int rep = 0; rep < 3; rep++) {
            gmp_reader *r;
            if (tb_open(&r, &b, SIZE_MAX, mode, 0) != GMP_OK) {
                fprintf(stderr, "open: %s\n", gmp_reader_open_error());
                return 1;
            }
            double s;
            n = run(r, &s);
            late = gmp_reader_get_stats(r)->late_events;
            gmp_reader_close(r);
            if (s < best)
                best = s;
        }
        printf("reader_%s_mem: %.1f Mevents/s (%llu records in %.3f s of CPU, %llu late)\n",
               mode ? "file_order" : "time_order", (double)events / best / 1e6,
               (unsigned long long)n, best, (unsigned long long)late);
    }
    if (file) {
        if (tb_write(&b, file)) {
            fprintf(stderr, "cannot write %s\n", file);
            return 1;
        }
        gmp_reader *r;
        gmp_reader_opts o = {0, 0};
        if (gmp_reader_open(&r, file, &o) != GMP_OK) {
            fprintf(stderr, "open: %s\n", gmp_reader_open_error());
            return 1;
        }
        double s;
        run(r, &s);
        gmp_reader_close(r);
        printf("reader_time_order_file: %.1f Mevents/s (%.3f s of CPU)\n", (double)events / s / 1e6,
               s);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("reader_peak_rss: %ld KiB (the generated trace itself included)\n", ru.ru_maxrss);
    tb_free(&b);
    return 0;
}
