/* bench_report: throughput of the report (formats/report/gmp_report*.c) on a large generated trace.
 *
 *   bench_report [EVENTS] [--keep] [--threads 1]   (default 10,000,000 events; --threads 1:
 *                                                   the replay reads in the calling thread)
 *
 * Writes a trace with the writer (no thread): two threads with nested NVTX ranges (step, layer
 * 0..7, forward/backward), cudaMalloc/cudaFree with a rolling live set of 20,000 allocations over
 * 64 stacks, a stream-ordered pool with its reserved size, a driver sample every 4096 events, a
 * SYNC every 65,536 events. Then
 * reads it with the replay alone, and once per report format (replay + report model + renderer),
 * each in a fresh child process, and prints `name: value unit` lines:
 *   trace_events, replay_events_per_s, report_text_events_per_s, report_markdown_events_per_s,
 *   report_html_events_per_s, report_json_events_per_s, report_<fmt>_peak_rss_kib,
 *   report_<fmt>_bytes. A figure, not a test: nothing is asserted about time. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_trace.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_report.h"
#include "gmp_writer.h"

static gmp_replay_opts g_ropts; /* --threads */

/* In a child: replays path (with the report model and renderer fmt unless fmt is NULL); writes
 * "events seconds bytes rss_kib" to the pipe. */
static void child(const char *path, const char *fmt, int fd)
{
    double t0 = gmp_bench_now_s();
    gmp_reader *r;
    gmp_replay *rp;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK || gmp_replay_new(&rp, r, &g_ropts) != GMP_OK)
        gmp_bench_die("cannot open the trace");
    gmp_report_doc *doc = NULL;
    if (fmt && (gmp_report_doc_new(&doc, NULL) != GMP_OK ||
                gmp_report_doc_add(doc, rp, path, "") != GMP_OK))
        gmp_bench_die("report model failed");
    if (gmp_replay_run(rp) != GMP_OK)
        gmp_bench_die(gmp_replay_error(rp));
    uint64_t events = gmp_replay_get_summary(rp)->events;
    long bytes = 0;
    if (fmt) {
        FILE *f = tmpfile(); /* a real file: /dev/null cannot tell how much was written */
        gmp_report_view v = {10, INT64_MIN, 0, GMP_REPORT_SORT_PATH, 0, 0};
        if (strcmp(fmt, "json") == 0)
            v.top = 0;
        if (!f || gmp_report_writer_by_name(fmt)(doc, f, &v) != GMP_OK)
            gmp_bench_die("render failed");
        bytes = ftell(f);
        fclose(f);
    }
    double dt = gmp_bench_now_s() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char line[128];
    int n =
        snprintf(line, sizeof line, "%" PRIu64 " %.6f %ld %ld\n", events, dt, bytes, ru.ru_maxrss);
    if (write(fd, line, (size_t)n) != n)
        gmp_bench_die("write failed");
    gmp_report_doc_free(doc);
    gmp_replay_free(rp);
    gmp_reader_close(r);
}

static void measure(const char *path, const char *fmt)
{
    int p[2];
    if (pipe(p) != 0)
        gmp_bench_die("pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        child(path, fmt, p[1]);
        _exit(0);
    }
    close(p[1]);
    char buf[128] = {0};
    ssize_t k = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    uint64_t events;
    double dt;
    long bytes, rss;
    if (k <= 0 || sscanf(buf, "%" SCNu64 " %lf %ld %ld", &events, &dt, &bytes, &rss) != 4)
        gmp_bench_die("child failed");
    if (!fmt) {
        printf("replay_events_per_s: %.0f events/s\n", (double)events / dt);
        printf("replay_peak_rss_kib: %ld KiB\n", rss);
        return;
    }
    printf("report_%s_events_per_s: %.0f events/s\n", fmt, (double)events / dt);
    printf("report_%s_peak_rss_kib: %ld KiB\n", fmt, rss);
    printf("report_%s_bytes: %ld bytes\n", fmt, bytes);
}

int main(int argc, char **argv)
{
    g_bench_name = "bench_report";
    uint64_t nevents = 10000000;
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            g_ropts.threads = atoi(argv[++i]);
        else
            nevents = strtoull(argv[i], NULL, 10);
    }
    char path[] = "/tmp/gmp_bench_report_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        gmp_bench_die("mkstemp failed");
    close(fd);
    uint64_t n = gmp_bench_generate(path, nevents);
    printf("trace_events: %" PRIu64 " events\n", n);
    fflush(stdout);
    measure(path, NULL);
    static const char *const fmts[] = {"text", "markdown", "html", "json"};
    for (int i = 0; i < 4; i++) {
        measure(path, fmts[i]);
        fflush(stdout);
    }
    if (keep)
        fprintf(stderr, "trace kept: %s\n", path);
    else
        unlink(path);
    return 0;
}
