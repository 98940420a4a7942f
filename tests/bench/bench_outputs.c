/* bench_outputs: throughput of the `gpumemprof convert` outputs (formats/replay/gmp_output.h) on a
 * large trace generated with the writer: allocations and frees (with stacks) inside NVTX ranges on
 * four threads and two devices, SYNC every few thousand events.
 *
 *   bench_outputs [EVENTS] [--threads 1]      (default 5000000; --threads 1: the replay reads
 *                                              in the calling thread, gmp_replay_opts.threads)
 *
 * Prints `name: value unit` lines: the replay alone, then the replay with one output (speedscope;
 * Chrome with every allocation span; Chrome with the default --max-spans; Chrome with every span
 * and --chrome-torch-compat), as events per second of
 * the whole pass and of the output's share (the pass minus the replay alone). Best of three runs.
 * Figures, not a test (docs/performance.md). */
#include <time.h>

#include "../replay/replay_tb.h"
#include "gmp_export.h"
#include "gmp_output.h"
#include "gmp_reader.h"
#include "gmp_replay.h"

#define T0 1000000000ull

static gmp_replay_opts g_ropts; /* --threads */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t gen(const char *path, uint64_t n)
{
    tb b;
    tb_open(&b, path);
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
    while (ev < n) {
        for (int th = 0; th < TB_THREADS && ev < n; th++) {
            int layer = (int)(step % 8);
            int32_t dev = th & 1;
            tb_range_ev(&b, th, GMP_REC_RANGE_PUSH, ++t, layers[layer], 0);
            ev++;
            for (int k = 0; k < 16; k++) {
                uint64_t slot = (step / 8 * 16 + (uint64_t)k) % 32;
                uint64_t addr = 0x7f0000000000ull + ((uint64_t)th << 36) + ((uint64_t)layer << 32) +
                                (slot << 22);
                if (step >= 16) {
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
        if (++step % 64 == 0)
            gmp_writer_sync(b.w, t);
    }
    tb_close(&b);
    return ev;
}

/* One pass over the trace with the given output (NULL: the replay alone). Returns seconds. */
static double pass(const char *trace, const gmp_output *fmt, const gmp_output_opts *o,
                   uint64_t *events, uint64_t *bytes_out)
{
    gmp_reader *r = NULL;
    gmp_replay *rp = NULL;
    if (gmp_reader_open(&r, trace, NULL) != GMP_OK || gmp_replay_new(&rp, r, &g_ropts) != GMP_OK)
        tb_die("cannot open the trace");
    char out[] = "/tmp/gmp_bench_out_XXXXXX";
    int fd = mkstemp(out);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f)
        tb_die("cannot create the output");
    gmp_output_ctx *ctx = NULL;
    gmp_output_trace tr = {trace, 0, gmp_reader_header(r), 4242, "", T0, 0};
    double t = now();
    if (fmt && (fmt->start(&ctx, f, out, o) != GMP_OK || fmt->add_trace(ctx, rp, &tr) != GMP_OK))
        tb_die("cannot start the output");
    if (gmp_replay_run(rp) != GMP_OK)
        tb_die(gmp_replay_error(rp));
    gmp_output_result res;
    if (fmt && fmt->finish(ctx, &res) != GMP_OK)
        tb_die("cannot finish the output");
    fflush(f);
    t = now() - t;
    *events = gmp_replay_get_summary(rp)->events;
    *bytes_out = (uint64_t)ftell(f);
    fclose(f);
    unlink(out);
    gmp_replay_free(rp);
    gmp_reader_close(r);
    return t;
}

static double best(const char *trace, const gmp_output *fmt, const gmp_output_opts *o,
                   uint64_t *events, uint64_t *bytes)
{
    double b = 1e30;
    for (int i = 0; i < 3; i++) {
        double t = pass(trace, fmt, o, events, bytes);
        if (t < b)
            b = t;
    }
    return b;
}

int main(int argc, char **argv)
{
    uint64_t n = 5000000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            g_ropts.threads = atoi(argv[++i]);
        else
            n = strtoull(argv[i], NULL, 10);
    }
    char trace[] = "/tmp/gmp_bench_outputs_XXXXXX";
    int fd = mkstemp(trace);
    if (fd < 0)
        tb_die("mkstemp");
    close(fd);
    gen(trace, n);
    gmp_output_opts o = {.exporter = "gpumemprof bench", .title = "bench", .ntraces = 1};
    uint64_t ev, bytes;
    double base = best(trace, NULL, &o, &ev, &bytes);
    printf("outputs_trace_events: %llu events\n", (unsigned long long)ev);
    printf("outputs_replay_alone_events_per_s: %.0f events/s\n", (double)ev / base);
    struct {
        const char *name;
        const gmp_output *fmt;
        int torch;
        uint64_t max_spans;
    } runs[] = {
        {"speedscope", &gmp_out_speedscope, 0, 0},
        {"chrome", &gmp_out_chrome, 0, 0}, /* every allocation span (--max-spans 0) */
        {"chrome_default_max_spans", &gmp_out_chrome, 0, 200000},
        {"chrome_torch_compat", &gmp_out_chrome, 1, 0},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        o.chrome_torch_compat = runs[i].torch;
        o.max_spans = runs[i].max_spans;
        double t = best(trace, runs[i].fmt, &o, &ev, &bytes);
        printf("%s_events_per_s: %.0f events/s (replay and output, %.2f s, %.1f MiB written)\n",
               runs[i].name, (double)ev / t, t, (double)bytes / 1048576.0);
        if (t > base)
            printf("%s_output_only_events_per_s: %.0f events/s\n", runs[i].name,
                   (double)ev / (t - base));
    }
    unlink(trace);
    return 0;
}
