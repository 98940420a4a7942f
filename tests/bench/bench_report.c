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

#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_report.h"
#include "gmp_writer.h"

static gmp_replay_opts g_ropts; /* --threads */

#define LIVE 20000
#define NSTACKS 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

_Noreturn static void die(const char *m)
{
    fprintf(stderr, "bench_report: %s\n", m);
    exit(1);
}

static void ev(gmp_wthread *th, gmp_rec *r)
{
    if (gmp_wthread_event(th, r) != 0)
        die("gmp_wthread_event failed");
}

static uint64_t generate(const char *path, uint64_t nevents)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        die("cannot create the trace");
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = (gmp_str){"bench_report", 12};
    h.hostname = (gmp_str){"bench", 5};
    h.rank = -1;
    h.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    o.level = 1;
    gmp_writer *w;
    if (gmp_writer_open(&w, fd, &o, &h) != GMP_OK)
        die("gmp_writer_open failed");
    gmp_wthread *th[2] = {gmp_writer_thread(w, 1000), gmp_writer_thread(w, 1001)};
    uint32_t api_m = gmp_writer_string(w, "cudaMalloc", 10);
    uint32_t api_f = gmp_writer_string(w, "cudaFree", 8);
    uint32_t step = gmp_writer_range(w, 0, 0, gmp_writer_string(w, "step", 4));
    uint32_t layer[8], fb[8][2];
    for (int i = 0; i < 8; i++) {
        char b[16];
        int n = snprintf(b, sizeof b, "layer%d", i);
        layer[i] = gmp_writer_range(w, step, 0, gmp_writer_string(w, b, (size_t)n));
        fb[i][0] = gmp_writer_range(w, layer[i], 0, gmp_writer_string(w, "forward", 7));
        fb[i][1] = gmp_writer_range(w, layer[i], 0, gmp_writer_string(w, "backward", 8));
    }
    uint32_t stacks[NSTACKS];
    for (int i = 0; i < NSTACKS; i++)
        stacks[i] = gmp_writer_stack_native(
            w, gmp_writer_stack_native(w, 0, 0x400000 + (uint64_t)(i % 8) * 0x100),
            0x500000 + (uint64_t)i * 0x40);
    static uint64_t live[LIVE];
    uint64_t nlive = 0, head = 0, next_addr = 0x700000000000ull, t = 1000000000ull, n = 0;
    uint64_t rng = 88172645463325252ull;
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_POOL;
    r.time_ns = t;
    r.u.pool.op = GMP_POOL_CREATE;
    r.u.pool.pool = 0x5000;
    ev(th[0], &r);
    int depth = 0, li = 0, phase = 0;
    while (n < nevents) {
        gmp_wthread *T = th[n % 7 == 0];
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        t += 100 + rng % 400;
        memset(&r, 0, sizeof r);
        r.time_ns = t;
        if (n % 50 == 0) { /* ranges on thread 0: step > layerN > forward|backward */
            r.type = depth < 3 ? GMP_REC_RANGE_PUSH : GMP_REC_RANGE_POP;
            if (depth == 0)
                r.u.rev.range = step;
            else if (depth == 1)
                r.u.rev.range = layer[li];
            else if (depth == 2)
                r.u.rev.range = fb[li][phase];
            ev(th[0], &r);
            if (depth < 3) {
                depth++;
            } else {
                depth = 1; /* pop the forward/backward, then the next layer after two pops */
                memset(&r, 0, sizeof r);
                r.type = GMP_REC_RANGE_POP;
                r.time_ns = t;
                ev(th[0], &r);
                phase ^= 1;
                if (!phase && ++li == 8) {
                    li = 0;
                    memset(&r, 0, sizeof r);
                    r.type = GMP_REC_RANGE_POP;
                    r.time_ns = t;
                    ev(th[0], &r);
                    depth = 0;
                }
                n += 2;
            }
            n++;
            continue;
        }
        if (n % 4096 == 0) {
            r.type = GMP_REC_SAMPLE;
            r.u.sample.total_bytes = 80ull << 30;
            r.u.sample.free_bytes = 60ull << 30;
            r.u.sample.process_used = UINT64_MAX;
            ev(T, &r);
            n++;
            continue;
        }
        if (n % 1024 == 1) {
            r.type = GMP_REC_POOL;
            r.u.pool.op = GMP_POOL_RESERVED;
            r.u.pool.pool = 0x5000;
            r.u.pool.value = (rng % 64) << 20;
            ev(T, &r);
            n++;
            continue;
        }
        if (nlive < LIVE && (nlive < LIVE / 2 || rng % 2)) {
            r.type = GMP_REC_ALLOC;
            r.u.mem.kind = GMP_MEM_DEVICE;
            r.u.mem.api = api_m;
            r.u.mem.address = next_addr;
            r.u.mem.size = 256 + (rng >> 20) % (4 << 20);
            r.u.mem.stack = stacks[rng % NSTACKS];
            r.u.mem.range = depth == 3 ? fb[li][phase] : 0;
            live[(head + nlive) % LIVE] = next_addr;
            next_addr += 8 << 20;
            nlive++;
        } else {
            r.type = GMP_REC_FREE;
            r.u.mem.kind = GMP_MEM_DEVICE;
            r.u.mem.api = api_f;
            r.u.mem.address = live[head];
            head = (head + 1) % LIVE;
            nlive--;
        }
        ev(T, &r);
        n++;
        if (n % 65536 == 0)
            gmp_writer_sync(w, t);
    }
    gmp_wthread_release(th[0]);
    gmp_wthread_release(th[1]);
    if (gmp_writer_close(w, NULL) != GMP_OK)
        die("gmp_writer_close failed");
    return n;
}

/* In a child: replays path (with the report model and renderer fmt unless fmt is NULL); writes
 * "events seconds bytes rss_kib" to the pipe. */
static void child(const char *path, const char *fmt, int fd)
{
    double t0 = now_s();
    gmp_reader *r;
    gmp_replay *rp;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK || gmp_replay_new(&rp, r, &g_ropts) != GMP_OK)
        die("cannot open the trace");
    gmp_report_doc *doc = NULL;
    if (fmt && (gmp_report_doc_new(&doc, NULL) != GMP_OK ||
                gmp_report_doc_add(doc, rp, path, "") != GMP_OK))
        die("report model failed");
    if (gmp_replay_run(rp) != GMP_OK)
        die(gmp_replay_error(rp));
    uint64_t events = gmp_replay_get_summary(rp)->events;
    long bytes = 0;
    if (fmt) {
        FILE *f = tmpfile(); /* a real file: /dev/null cannot tell how much was written */
        gmp_report_view v = {10, INT64_MIN, 0, GMP_REPORT_SORT_PATH, 0, 0};
        if (strcmp(fmt, "json") == 0)
            v.top = 0;
        if (!f || gmp_report_writer_by_name(fmt)(doc, f, &v) != GMP_OK)
            die("render failed");
        bytes = ftell(f);
        fclose(f);
    }
    double dt = now_s() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char line[128];
    int n =
        snprintf(line, sizeof line, "%" PRIu64 " %.6f %ld %ld\n", events, dt, bytes, ru.ru_maxrss);
    if (write(fd, line, (size_t)n) != n)
        die("write failed");
    gmp_report_doc_free(doc);
    gmp_replay_free(rp);
    gmp_reader_close(r);
}

static void measure(const char *path, const char *fmt)
{
    int p[2];
    if (pipe(p) != 0)
        die("pipe failed");
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
        die("child failed");
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
        die("mkstemp failed");
    close(fd);
    uint64_t n = generate(path, nevents);
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
