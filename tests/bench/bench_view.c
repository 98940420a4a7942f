/* bench_view: how fast `gpumemprof view` opens and moves on a big trace (tui/gmp_tui_model.c and
 * gmp_tui_tree.c), on the generated trace of bench_report (10,000,000 events by default:
 * cudaMalloc/cudaFree with a rolling live set of 20,000 over 64 stacks, nested NVTX ranges, a pool,
 * driver samples).
 *
 *   bench_view [EVENTS] [--keep] [--gpumemprof PATH]
 *
 * In a fresh child process: the index (one replay pass, event log and checkpoints written to
 * temporary files), then the live set and its tree at the first device's peak (what the first
 * screen needs); then 200 cursor moves to random events (live set from the nearest checkpoint plus
 * the tree, reserved at the cursor, the search for the focus's free as the screen does it). Prints
 * `name: value unit` lines: trace_events, index_events_per_s, first_screen_s (wall) and
 * first_screen_cpu_s (CPU time of every thread: a figure that a busy machine changes less),
 * load_average (of the machine, after the run), cursor_move_mean_ms, cursor_move_max_ms,
 * verdicts_ready_s (from the start until the report's verdicts, computed in a thread of their own
 * started after the index as the viewer does, are ready: the first screen and the cursor moves are
 * measured while it runs) and verdicts (how many), peak_rss_kib, index_file_bytes. With
 * --gpumemprof, also the first screen in a real terminal: `gpumemprof view` in tmux at 80x24, timed
 * until capture-pane shows the live tree (terminal_first_screen_s), and as a yardstick of what the
 * machine does at that moment, `gpumemprof report` on the same trace (report_s). A figure, not a
 * test: nothing is asserted about time. */
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
#include "gmp_tui_model.h"
#include "gmp_tui_tree.h"
#include "gmp_writer.h"

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
    fprintf(stderr, "bench_view: %s\n", m);
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
    h.producer = (gmp_str){"bench_view", 12};
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

static double cpu_s(void) /* this process's CPU time, every thread (the read-ahead's too) */
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void child(const char *path, int fd)
{
    double t0 = now_s(), c0 = cpu_s();
    gmp_reader *r = NULL;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK)
        die("cannot open the trace");
    gmp_tui_model *m = NULL;
    char msg[256];
    if (gmp_tui_model_build(&m, r, msg, sizeof msg) != GMP_OK)
        die(msg);
    double t_index = now_s() - t0;
    /* as the viewer does once the index is built: the report's verdicts in a thread of their own,
     * beside the first screen and the cursor moves measured below */
    gmp_tui_model_verdicts_start(m, path);
    const gmp_tui_dev *d = gmp_tui_model_dev(m, 0);
    if (!d)
        die("no device");
    gmp_tui_tree *tree = gmp_tui_tree_new();
    gmp_tui_tree_set_model(tree, m);
    gmp_tui_live *live = NULL;
    size_t nlive = 0;
    if (gmp_tui_model_live(m, d->peak_index, &live, &nlive) != GMP_OK ||
        gmp_tui_tree_build(tree, live, nlive, d->id, GMP_TUI_BY_RANGE, 0) != GMP_OK)
        die("live set at the peak");
    (void)gmp_tui_model_reserved_at(m, d, d->peak_index);
    const gmp_tui_row *row0 = gmp_tui_tree_row(tree, 0);
    if (row0 && row0->best < nlive) {
        int searched;
        (void)gmp_tui_model_free_time(m, d->peak_index, live[row0->best].key,
                                      live[row0->best].device, 1u << 20, &searched);
    }
    double t_first = now_s() - t0, c_first = cpu_s() - c0;
    if (gmp_tui_tree_total(tree) != d->d->peak_allocated)
        die("the live set at the peak is not the peak");
    free(live);
    uint64_t n = gmp_tui_model_events(m), rng = 0x9e3779b97f4a7c15ull;
    double sum = 0, max = 0;
    int moves = 200;
    for (int i = 0; i < moves; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        double a = now_s();
        uint64_t at = rng % n;
        if (gmp_tui_model_live(m, at, &live, &nlive) != GMP_OK ||
            gmp_tui_tree_build(tree, live, nlive, d->id, GMP_TUI_BY_RANGE, 0) != GMP_OK)
            die("live set");
        /* what the screen also does: reserved at the cursor, when the focus is freed */
        (void)gmp_tui_model_reserved_at(m, d, at);
        const gmp_tui_row *row = gmp_tui_tree_row(tree, 0);
        if (row && row->best < nlive) {
            int searched;
            (void)gmp_tui_model_free_time(m, at, live[row->best].key, live[row->best].device,
                                          1u << 20, &searched);
        }
        free(live);
        double dt = now_s() - a;
        sum += dt;
        if (dt > max)
            max = dt;
    }
    while (gmp_tui_model_verdicts_state(m) == GMP_TUI_VERDICTS_RUNNING)
        usleep(10000);
    double t_verdicts = now_s() - t0;
    if (gmp_tui_model_verdicts_state(m) != GMP_TUI_VERDICTS_READY)
        die("the verdicts' pass failed");
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char out[256];
    int k = snprintf(out, sizeof out, "%" PRIu64 " %f %f %f %f %ld %f %f %zu\n", n, t_index,
                     t_first, sum / moves * 1e3, max * 1e3, ru.ru_maxrss, c_first, t_verdicts,
                     gmp_tui_model_nverdicts(m));
    if (write(fd, out, (size_t)k) != k)
        die("pipe");
    gmp_tui_tree_free(tree);
    gmp_tui_model_free(m);
}

static double terminal_first_screen(const char *gmp, const char *path)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "tmux -L bench_view_%d -f /dev/null new-session -d -x 80 -y 24 "
             "'env LANG=C.UTF-8 TERM=screen-256color %s view %s; sleep 60'",
             (int)getpid(), gmp, path);
    double t0 = now_s();
    if (system(cmd) != 0)
        return -1;
    double t = -1;
    while (now_s() - t0 < 60) {
        snprintf(cmd, sizeof cmd,
                 "tmux -L bench_view_%d capture-pane -p | grep -q 'Live at cursor'", (int)getpid());
        if (system(cmd) == 0) {
            t = now_s() - t0;
            break;
        }
        usleep(20000);
    }
    snprintf(cmd, sizeof cmd, "tmux -L bench_view_%d kill-server", (int)getpid());
    if (system(cmd) != 0)
        return -1;
    return t;
}

int main(int argc, char **argv)
{
    uint64_t nevents = 10000000;
    int keep = 0;
    const char *gmp = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else if (strcmp(argv[i], "--gpumemprof") == 0 && i + 1 < argc)
            gmp = argv[++i];
        else
            nevents = strtoull(argv[i], NULL, 10);
    }
    char path[] = "/tmp/bench_view_XXXXXX";
    int tfd = mkstemp(path);
    if (tfd < 0)
        die("mkstemp");
    close(tfd);
    uint64_t n = generate(path, nevents);
    printf("trace_events: %" PRIu64 "\n", n);
    fflush(stdout);
    int p[2];
    if (pipe(p) != 0)
        die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        child(path, p[1]);
        _exit(0);
    }
    close(p[1]);
    char buf[256] = "";
    ssize_t got = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        die("the child failed");
    buf[got] = 0;
    uint64_t logged;
    double t_index, t_first, mean_ms, max_ms, c_first, t_verdicts;
    long rss;
    size_t nverdicts;
    if (sscanf(buf, "%" SCNu64 " %lf %lf %lf %lf %ld %lf %lf %zu", &logged, &t_index, &t_first,
               &mean_ms, &max_ms, &rss, &c_first, &t_verdicts, &nverdicts) != 9)
        die("bad child output");
    printf("logged_events: %" PRIu64 "\n", logged);
    printf("index_events_per_s: %.0f\n", (double)n / t_index);
    printf("first_screen_s: %.3f\n", t_first);
    printf("first_screen_cpu_s: %.3f\n", c_first);
    double la[1];
    if (getloadavg(la, 1) == 1)
        printf("load_average: %.2f\n", la[0]);
    printf("cursor_move_mean_ms: %.2f\n", mean_ms);
    printf("cursor_move_max_ms: %.2f\n", max_ms);
    printf("verdicts_ready_s: %.3f\n", t_verdicts);
    printf("verdicts: %zu\n", nverdicts);
    printf("peak_rss_kib: %ld\n", rss);
    printf("index_file_bytes: %" PRIu64 "\n", logged * (uint64_t)sizeof(gmp_tui_ev));
    if (gmp) {
        /* the same machine at the same moment: `gpumemprof report` on the trace (text) */
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "%s report --no-progress %s > /dev/null", gmp, path);
        double r0 = now_s();
        if (system(cmd) == 0)
            printf("report_s: %.3f\n", now_s() - r0);
        double t = terminal_first_screen(gmp, path);
        if (t >= 0)
            printf("terminal_first_screen_s: %.3f\n", t);
        else
            printf("terminal_first_screen_s: failed\n");
    }
    if (keep)
        printf("trace: %s\n", path);
    else
        unlink(path);
    return 0;
}
