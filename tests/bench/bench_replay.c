/* bench_replay: throughput and memory of the replay (formats/replay/gmp_replay.h) on a large trace.
 *
 *   bench_replay [EVENTS] [--live N] [--sync N] [--passes N] [--keep]
 *       (default 10,000,000 events, 50,000 live, a SYNC every 65,536 events, 1 pass)
 *
 * Writes a trace of EVENTS events to /tmp with the writer (no thread): four threads, nested NVTX
 * ranges, cudaMalloc/cudaFree with a rolling live set of N allocations (FIFO) over 64 sites, async
 * pool allocations, a SYNC every 65,536 events (--sync). Then, in a fresh process (so that the
 * memory figure is the replay's alone), reads it with the reader only, through the replay as the
 * tools run it (read-ahead in a second thread when there are two CPUs) and through the replay in
 * one thread (gmp_replay_opts.threads = 1), N times each, interleaved (--passes: the best of each
 * is printed; more passes take out some of a noisy machine's noise), and prints `name: value
 * unit` lines: trace_events, trace_bytes, reader_events_per_s, replay_events_per_s,
 * replay_cpu_ns_per_event (both threads' CPU time), replay_1thread_events_per_s,
 * replay_peak_rss_kib. A figure, not a test: nothing is asserted about time. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_writer.h"

#define NTHREADS 4
static uint64_t LIVE = 50000;       /* --live N */
static uint64_t SYNC_EVERY = 65536; /* --sync N */
#define NSITES 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void) /* the process's CPU time, every thread */
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

_Noreturn static void die(const char *m)
{
    fprintf(stderr, "bench_replay: %s\n", m);
    exit(1);
}

static int generate(const char *path, uint64_t nevents)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        die("cannot create the trace");
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = (gmp_str){"bench_replay", 12};
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
    gmp_wthread *th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        th[i] = gmp_writer_thread(w, 1000 + (uint32_t)i);
    uint32_t api_m = gmp_writer_string(w, "cudaMalloc", 10);
    uint32_t api_f = gmp_writer_string(w, "cudaFree", 8);
    uint32_t api_ma = gmp_writer_string(w, "cudaMallocAsync", 15);
    uint32_t root = gmp_writer_range(w, 0, 0, gmp_writer_string(w, "train", 5));
    uint32_t ranges[8];
    for (int i = 0; i < 8; i++) {
        char b[16];
        int n = snprintf(b, sizeof b, "layer%d", i);
        ranges[i] = gmp_writer_range(w, root, 0, gmp_writer_string(w, b, (size_t)n));
    }
    uint32_t stacks[NSITES];
    for (int i = 0; i < NSITES; i++) {
        uint32_t outer = gmp_writer_stack_native(w, 0, 0x400000 + (uint64_t)(i % 8) * 0x100);
        stacks[i] = gmp_writer_stack_native(w, outer, 0x500000 + (uint64_t)i * 0x40);
    }
    uint64_t *ring = calloc(LIVE, sizeof *ring);
    uint8_t *ring_kind = calloc(LIVE, 1);
    if (!ring || !ring_kind)
        die("out of memory");
    uint64_t t = 1000000, seq = 0, n = 0, rpos = 0, filled = 0, next_sync = SYNC_EVERY;
    gmp_rec ev;
    while (n < nevents) {
        int ti = (int)(seq % NTHREADS);
        uint32_t rg = ranges[seq % 8];
        memset(&ev, 0, sizeof ev);
        ev.type = GMP_REC_RANGE_PUSH;
        ev.time_ns = t += 100;
        ev.u.rev.range = rg;
        gmp_wthread_event(th[ti], &ev);
        n++;
        for (int k = 0; k < 30 && n < nevents; k++) {
            /* free the oldest when the live set is full, then allocate */
            if (filled == LIVE) {
                memset(&ev, 0, sizeof ev);
                ev.type = GMP_REC_FREE;
                ev.time_ns = t += 100;
                ev.u.mem.device = (int32_t)(ring[rpos] >> 9) & 1;
                ev.u.mem.kind = ring_kind[rpos];
                ev.u.mem.api = api_f;
                ev.u.mem.address = ring[rpos];
                gmp_wthread_event(th[ti], &ev);
                n++;
                filled--;
            }
            seq++;
            uint64_t addr = 0x7f0000000000ull + (seq << 9);
            unsigned kind = (seq % 5 == 0) ? GMP_MEM_ASYNC_POOL : GMP_MEM_DEVICE;
            memset(&ev, 0, sizeof ev);
            ev.type = GMP_REC_ALLOC;
            ev.time_ns = t += 100;
            ev.u.mem.device = (int32_t)(addr >> 9) & 1;
            ev.u.mem.kind = kind;
            ev.u.mem.flags = kind == GMP_MEM_ASYNC_POOL ? GMP_MEMF_ASYNC : 0;
            ev.u.mem.api = kind == GMP_MEM_ASYNC_POOL ? api_ma : api_m;
            ev.u.mem.address = addr;
            ev.u.mem.size = 512 + (seq % 97) * 4096;
            ev.u.mem.stack = stacks[seq % NSITES];
            ev.u.mem.range = rg;
            ev.u.mem.correlation = seq;
            ev.u.mem.handle = kind == GMP_MEM_ASYNC_POOL ? 0x5000 : 0;
            gmp_wthread_event(th[ti], &ev);
            n++;
            ring[rpos] = addr;
            ring_kind[rpos] = (uint8_t)kind;
            rpos = (rpos + 1) % LIVE;
            filled++;
            if (n >= next_sync) {
                gmp_writer_sync(w, t);
                next_sync += SYNC_EVERY;
            }
        }
        memset(&ev, 0, sizeof ev);
        ev.type = GMP_REC_RANGE_POP;
        ev.time_ns = t += 100;
        ev.u.rev.range = rg;
        gmp_wthread_event(th[ti], &ev);
        n++;
    }
    free(ring);
    free(ring_kind);
    for (int i = 0; i < NTHREADS; i++)
        gmp_wthread_release(th[i]);
    gmp_writer_stats st;
    if (gmp_writer_close(w, &st) != GMP_OK)
        die("writing the trace failed");
    if (st.lost)
        die("the writer lost events");
    return 0;
}

static gmp_err count_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    ++*(uint64_t *)ctx;
    return GMP_OK;
}

/* One pass of the reader alone; returns its time. */
static double reader_pass(const char *path, uint64_t *nev)
{
    gmp_reader *r;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK)
        die(gmp_reader_open_error());
    double t0 = now_s();
    const gmp_rec *rec;
    gmp_err e;
    *nev = 0;
    while ((e = gmp_reader_next(r, &rec)) == GMP_OK)
        *nev += gmp_rec_is_event(rec->type) != 0;
    double t = now_s() - t0;
    if (e != GMP_END)
        die(gmp_reader_error(r));
    gmp_reader_close(r);
    return t;
}

/* One pass of the replay, with one output that counts allocations; returns its time and, in
 *cpu, the CPU time it took. threads: gmp_replay_opts.threads. */
static double replay_pass(const char *path, int threads, uint64_t *events, uint64_t *max_live,
                          size_t *sites, double *cpu)
{
    gmp_reader *r;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK)
        die(gmp_reader_open_error());
    gmp_replay *rp;
    gmp_replay_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.threads = threads;
    if (gmp_replay_new(&rp, r, &ro) != GMP_OK)
        die("gmp_replay_new failed");
    uint64_t allocs = 0;
    gmp_replay_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.alloc = count_alloc;
    gmp_replay_add(rp, &ops, &allocs);
    double t0 = now_s(), c0 = cpu_s();
    if (gmp_replay_run(rp) != GMP_OK)
        die(gmp_replay_error(rp));
    double t = now_s() - t0;
    *cpu = cpu_s() - c0;
    const gmp_replay_summary *s = gmp_replay_get_summary(rp);
    if (!s->complete || allocs != s->alloc_records)
        die("the replay did not see the whole trace");
    *events = s->events;
    *max_live = s->max_live_allocs;
    *sites = gmp_replay_site_count(rp);
    gmp_replay_free(rp);
    gmp_reader_close(r);
    return t;
}

static int replay_mode(const char *path, int passes)
{
    double t_reader = 1e30, t_replay = 1e30, t_one = 1e30, cpu_replay = 0, cpu;
    uint64_t nev = 0, events = 0, max_live = 0;
    size_t sites = 0;
    for (int i = 0; i < passes; i++) { /* interleaved, best of each */
        double t = reader_pass(path, &nev);
        if (t < t_reader)
            t_reader = t;
        t = replay_pass(path, 0, &events, &max_live, &sites, &cpu);
        if (t < t_replay) {
            t_replay = t;
            cpu_replay = cpu;
        }
        t = replay_pass(path, 1, &events, &max_live, &sites, &cpu);
        if (t < t_one)
            t_one = t;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("trace_events: %" PRIu64 " events\n", nev);
    printf("passes: %d (best of each)\n", passes);
    printf("reader_events_per_s: %.0f events/s\n", (double)nev / t_reader);
    printf("replay_events_per_s: %.0f events/s\n", (double)events / t_replay);
    printf("replay_cpu_ns_per_event: %.1f ns (both threads)\n", cpu_replay * 1e9 / (double)events);
    printf("replay_1thread_events_per_s: %.0f events/s\n", (double)events / t_one);
    printf("replay_peak_rss_kib: %ld KiB\n", ru.ru_maxrss);
    printf("replay_max_live_allocs: %" PRIu64 " allocations\n", max_live);
    printf("replay_sites: %zu sites\n", sites);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--replay") == 0)
        return replay_mode(argv[2], atoi(argv[3]));
    uint64_t nevents = 10000000;
    int keep = 0, passes = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else if (strcmp(argv[i], "--live") == 0 && i + 1 < argc)
            LIVE = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--sync") == 0 && i + 1 < argc)
            SYNC_EVERY = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--passes") == 0 && i + 1 < argc)
            passes = atoi(argv[++i]);
        else
            nevents = strtoull(argv[i], NULL, 10);
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/gmp_bench_replay_%ld.zst", (long)getpid());
    double t0 = now_s();
    generate(path, nevents);
    struct stat sb;
    if (stat(path, &sb) != 0)
        die("no trace");
    printf("trace_generate_s: %.2f s\n", now_s() - t0);
    printf("trace_bytes: %lld bytes\n", (long long)sb.st_size);
    printf("trace_live_allocs: %" PRIu64 " allocations\n", LIVE);
    fflush(stdout);
    /* a fresh process, so that peak RSS is the replay's own */
    pid_t pid = fork();
    if (pid == 0) {
        char np[16];
        snprintf(np, sizeof np, "%d", passes < 1 ? 1 : passes);
        char *args[] = {argv[0], "--replay", path, np, NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 1;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        die("cannot start the replay process");
    if (!keep)
        unlink(path);
    else
        printf("trace_path: %s\n", path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
