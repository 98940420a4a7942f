/* bench_pickle_stream: how fast the streaming pickle reader (formats/import/gmp_pickle_stream.h)
 * reads a PyTorch memory snapshot, without the importer: its two passes timed apart.
 *
 *     bench_pickle_stream FILE.pickle [RUNS] [sparse]
 *
 * With "sparse": in one pass (gmp_pkstream_one_pass, as the importer reads snapshots) with a budget
 * of 1 GiB, so that peak_held says what that pass holds (the importer gives it max(16 MiB, file/16)
 * and reads the file again in two passes past that).
 *
 * Prints figures (`name: value unit`, the median of RUNS, default 5), asserts nothing: the CPU
 * time of the calling thread in each pass (a busy machine disturbs it less) and the wall time of
 * a run. The consumer here does what the importer does with the values, cheaply: it looks at each
 * item's values once, caches a mark on every container it has seen (tag) and releases the items of
 * the lists the memo keeps (gmp_pkstream_husk), so the reader's memory behaves as under the
 * importer. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gmp_pickle_stream.h"

typedef struct ctx {
    gmp_pkstream *ps;
    uint64_t items, values;
} ctx;

static void walk(ctx *c, const gmp_pkv *v, int depth)
{
    if (!v)
        return;
    c->values++;
    if (v->type < GMP_PK_LIST || depth > 64)
        return;
    gmp_pkobj *o = v->v.o;
    if (o->tag)
        return;
    size_t n = gmp_pkv_len(v);
    if (v->type == GMP_PK_DICT) {
        for (size_t i = 0; i < n; i++)
            walk(c, &o->d.items[2 * i + 1], depth + 1);
    } else {
        for (size_t i = 0; i < n; i++)
            walk(c, gmp_pkv_item(v, i), depth + 1);
    }
    o->tag = 1;
    if (v->type == GMP_PK_LIST)
        gmp_pkstream_husk(c->ps, o);
}

static int on_item(void *vc, int kind, uint32_t index, const gmp_pkv *item, char *err,
                   size_t errlen)
{
    (void)kind, (void)index, (void)err, (void)errlen;
    ctx *c = vc;
    c->items++;
    walk(c, item, 0);
    return 0;
}

static double now(clockid_t clk)
{
    struct timespec t;
    clock_gettime(clk, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_pickle_stream FILE.pickle [RUNS] [sparse]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (runs < 1 || runs > 1000)
        runs = 5;
    double *total = calloc((size_t)runs, sizeof *total), *scan = calloc((size_t)runs, sizeof *scan);
    double *wall = calloc((size_t)runs, sizeof *wall);
    if (!total || !scan || !wall)
        return 1;
    ctx c = {0};
    size_t peak = 0;
    off_t size = 0;
    for (int r = 0; r < runs; r++) {
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0) {
            perror(argv[1]);
            return 1;
        }
        size = lseek(fd, 0, SEEK_END);
        memset(&c, 0, sizeof c);
        gmp_pkstream_cb cb = {"segments", "device_traces", on_item, &c};
        gmp_pickle_limits lim;
        gmp_pickle_limits_default(&lim);
        lim.max_memo = (size_t)size + 16;
        c.ps = gmp_pkstream_new(&lim, &cb);
        if (argc > 3 && strcmp(argv[3], "sparse") == 0)
            gmp_pkstream_one_pass(c.ps, "frames", (size_t)1 << 30);
        char err[512];
        double w0 = now(CLOCK_MONOTONIC), t0 = now(CLOCK_THREAD_CPUTIME_ID);
        gmp_err e = gmp_pkstream_run_fd(c.ps, fd, err, sizeof err);
        total[r] = now(CLOCK_THREAD_CPUTIME_ID) - t0;
        wall[r] = now(CLOCK_MONOTONIC) - w0;
        double s = 0, p = 0;
        gmp_pkstream_times(c.ps, &s, &p);
        scan[r] = s;
        if (e != GMP_OK) {
            fprintf(stderr, "%s: %s\n", argv[1], err);
            return 1;
        }
        peak = gmp_pkstream_peak_memory(c.ps);
        gmp_pkstream_free(c.ps);
        close(fd);
    }
    qsort(total, (size_t)runs, sizeof *total, cmp_d);
    qsort(scan, (size_t)runs, sizeof *scan, cmp_d);
    qsort(wall, (size_t)runs, sizeof *wall, cmp_d);
    double t = total[runs / 2], s = scan[runs / 2];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("pickle_stream_file: %.1f MB\n", (double)size / 1e6);
    printf("pickle_stream_items: %llu\n", (unsigned long long)c.items);
    printf("pickle_stream_scan_ms: %.2f ms\n", s * 1e3);
    printf("pickle_stream_parse_ms: %.2f ms (with this bench's consumer)\n", (t - s) * 1e3);
    printf("pickle_stream_total_ms: %.2f ms (CPU of the calling thread)\n", t * 1e3);
    printf("pickle_stream_wall_ms: %.2f ms\n", wall[runs / 2] * 1e3);
    printf("pickle_stream_mb_per_s: %.0f MB/s\n", (double)size / 1e6 / t);
    printf("pickle_stream_peak_held: %.1f MB (the reader's own count)\n", (double)peak / 1e6);
    printf("pickle_stream_max_rss: %.1f MB\n", (double)ru.ru_maxrss / 1e3);
    free(total);
    free(scan);
    free(wall);
    return 0;
}
