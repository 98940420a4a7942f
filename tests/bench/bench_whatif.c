/* bench_whatif: throughput of the what-if replay (formats/replay/gmp_whatif.h: the recording's
 * tensor allocations and frees through one caching-allocator model per setting) on an imported
 * PyTorch snapshot.
 *
 *   bench_whatif [SNAPSHOT.pickle | TRACE] [--runs N]
 *                (default the real train-step snapshot of tests/data; N = 3)
 *
 * A snapshot is imported first (gmp_import_torch, into a temporary file; not timed). Then, in this
 * process, interleaved, best of N: the trace read alone (counting the tensor events: the ALLOC and
 * FREE records of the main pool that gmp_whatif_run replays), gmp_whatif_scan (the recorded
 * reserve), gmp_whatif_run with one setting (PyTorch's defaults), and gmp_whatif_run with
 * `gpumemprof whatif`'s standard set (the recording's defaults and the five default --alloc-conf).
 * Prints `name: value unit` lines: tensor_events, read_s, scan_s, run_<set>_s and
 * run_<set>_tensor_events_per_s (the tensor events over the run's time, reading included), and
 * model_<set>_tensor_events_per_s (over the run's time less the read's). A figure, not a test:
 * nothing is asserted about time. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_trace.h"
#include "gmp_import_torch.h"
#include "gmp_reader.h"
#include "gmp_whatif.h"
#include "gmp_whatif_advice.h"

#ifndef GMP_BENCH_SOURCE_DIR
#define GMP_BENCH_SOURCE_DIR "."
#endif

/* CPU seconds of this process: on a shared machine the wall time also counts the waits for a core
 */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static gmp_reader *open_trace(const char *path)
{
    gmp_reader *r;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK)
        gmp_bench_die("cannot open the trace");
    return r;
}

/* The trace read alone; returns the tensor events (what gmp_whatif_run replays). */
static uint64_t read_only(const char *path)
{
    gmp_reader *r = open_trace(path);
    const gmp_rec *x;
    uint64_t n = 0;
    gmp_err e;
    while ((e = gmp_reader_next(r, &x)) == GMP_OK) {
        if (x->type != GMP_REC_ALLOC && x->type != GMP_REC_FREE)
            continue;
        const char *want =
            x->type == GMP_REC_ALLOC ? "CUDACachingAllocator.malloc" : "CUDACachingAllocator.free";
        gmp_str s = gmp_reader_string(r, x->u.mem.api);
        if (s.ptr && s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0)
            n++;
    }
    if (e != GMP_END)
        gmp_bench_die(gmp_reader_error(r));
    gmp_reader_close(r);
    return n;
}

static void scan(const char *path, gmp_whatif_recorded *rec)
{
    char msg[256];
    gmp_reader *r = open_trace(path);
    if (gmp_whatif_scan(r, rec, msg, sizeof msg) != GMP_OK)
        gmp_bench_die(msg);
    gmp_reader_close(r);
}

static void run(const char *path, const gmp_cca_config *cfgs, size_t n,
                const gmp_whatif_recorded *rec)
{
    char msg[256];
    gmp_whatif w;
    gmp_reader *r = open_trace(path);
    if (gmp_whatif_run(r, cfgs, n, 0, rec, &w, msg, sizeof msg) != GMP_OK)
        gmp_bench_die(msg);
    gmp_whatif_free(&w);
    gmp_reader_close(r);
}

int main(int argc, char **argv)
{
    const char *in =
        GMP_BENCH_SOURCE_DIR "/tests/data/torch-snapshots/transformer-train-step-adamw.pickle";
    int runs = 3;
    g_bench_name = "bench_whatif";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else
            in = argv[i];
    }
    if (runs < 1)
        runs = 1;
    char path[] = "/tmp/bench_whatif.XXXXXX";
    const char *trace = in;
    FILE *f = fopen(in, "rb");
    int first = f ? fgetc(f) : EOF;
    if (f)
        fclose(f);
    if (first == EOF)
        gmp_bench_die("cannot read the input");
    if (first == 0x80) { /* a pickle: imported as `gpumemprof whatif` imports it */
        int fd = mkstemp(path);
        char msg[512];
        gmp_import_torch_stats st;
        if (fd < 0 || gmp_import_torch_flags(in, fd, GMP_IMPORT_TORCH_TEMPORARY, &st, msg,
                                             sizeof msg) != GMP_OK)
            gmp_bench_die("cannot import the snapshot");
        trace = path;
    }

    /* the standard set of `gpumemprof whatif`: the recording's defaults, then gmp_whatif_standard
     * (formats/replay/gmp_whatif_advice.c), parsed as whatif parses it */
    gmp_cca_config std[1 + GMP_WHATIF_NSTANDARD];
    memset(std, 0, sizeof std);
    for (size_t i = 0; i < GMP_WHATIF_NSTANDARD; i++) {
        char err[256];
        if (gmp_whatif_parse_conf(gmp_whatif_standard[i], &std[1 + i], err, sizeof err) != 0)
            gmp_bench_die("the standard set does not parse");
    }
    gmp_whatif_recorded *rec = calloc(GMP_WHATIF_MAX_DEVICES, sizeof *rec);
    if (!rec)
        gmp_bench_die("out of memory");

    double best[4] = {1e30, 1e30, 1e30, 1e30}, bestc[4] = {1e30, 1e30, 1e30, 1e30};
    uint64_t events = 0;
    for (int k = 0; k < runs; k++) {
        double t[5], c[5];
        t[0] = gmp_bench_now_s(), c[0] = cpu_s();
        events = read_only(trace);
        t[1] = gmp_bench_now_s(), c[1] = cpu_s();
        scan(trace, rec);
        t[2] = gmp_bench_now_s(), c[2] = cpu_s();
        run(trace, std, 1, rec);
        t[3] = gmp_bench_now_s(), c[3] = cpu_s();
        run(trace, std, 1 + GMP_WHATIF_NSTANDARD, rec);
        t[4] = gmp_bench_now_s(), c[4] = cpu_s();
        for (int j = 0; j < 4; j++) {
            if (t[j + 1] - t[j] < best[j])
                best[j] = t[j + 1] - t[j];
            if (c[j + 1] - c[j] < bestc[j])
                bestc[j] = c[j + 1] - c[j];
        }
    }
    if (trace == path)
        unlink(path);
    free(rec);
    printf("tensor_events: %" PRIu64 "\n", events);
    printf("read_s: %.4f s (CPU %.4f s)\n", best[0], bestc[0]);
    printf("scan_s: %.4f s (CPU %.4f s)\n", best[1], bestc[1]);
    const char *names[2] = {"defaults", "standard_set"};
    for (int j = 0; j < 2; j++) {
        double s = best[2 + j], cs = bestc[2 + j];
        printf("run_%s_s: %.4f s (CPU %.4f s)\n", names[j], s, cs);
        printf("run_%s_tensor_events_per_s: %.2f M (per CPU second: %.2f M)\n", names[j],
               events / s / 1e6, events / cs / 1e6);
        if (cs > bestc[0])
            printf("model_%s_tensor_events_per_cpu_s: %.2f M\n", names[j],
                   events / (cs - bestc[0]) / 1e6);
    }
    return 0;
}
