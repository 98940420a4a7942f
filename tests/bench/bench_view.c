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

#include "bench_trace.h"
#include "gmp_reader.h"
#include "gmp_tui_model.h"
#include "gmp_tui_tree.h"
#include "gmp_writer.h"

static double cpu_s(void) /* this process's CPU time, every thread (the read-ahead's too) */
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void child(const char *path, int fd)
{
    double t0 = gmp_bench_now_s(), c0 = cpu_s();
    gmp_reader *r = NULL;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK)
        gmp_bench_die("cannot open the trace");
    gmp_tui_model *m = NULL;
    char msg[256];
    if (gmp_tui_model_build(&m, r, msg, sizeof msg) != GMP_OK)
        gmp_bench_die(msg);
    double t_index = gmp_bench_now_s() - t0;
    /* as the viewer does once the index is built: the report's verdicts in a thread of their own,
     * beside the first screen and the cursor moves measured below */
    gmp_tui_model_verdicts_start(m, path);
    const gmp_tui_dev *d = gmp_tui_model_dev(m, 0);
    if (!d)
        gmp_bench_die("no device");
    gmp_tui_tree *tree = gmp_tui_tree_new();
    gmp_tui_tree_set_model(tree, m);
    gmp_tui_live *live = NULL;
    size_t nlive = 0;
    if (gmp_tui_model_live(m, d->peak_index, &live, &nlive) != GMP_OK ||
        gmp_tui_tree_build(tree, live, nlive, d->id, GMP_TUI_BY_RANGE, 0) != GMP_OK)
        gmp_bench_die("live set at the peak");
    (void)gmp_tui_model_reserved_at(m, d, d->peak_index);
    const gmp_tui_row *row0 = gmp_tui_tree_row(tree, 0);
    if (row0 && row0->best < nlive) {
        int searched;
        (void)gmp_tui_model_free_time(m, d->peak_index, live[row0->best].key,
                                      live[row0->best].device, 1u << 20, &searched);
    }
    double t_first = gmp_bench_now_s() - t0, c_first = cpu_s() - c0;
    if (gmp_tui_tree_total(tree) != d->d->peak_allocated)
        gmp_bench_die("the live set at the peak is not the peak");
    free(live);
    uint64_t n = gmp_tui_model_events(m), rng = 0x9e3779b97f4a7c15ull;
    double sum = 0, max = 0;
    int moves = 200;
    for (int i = 0; i < moves; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        double a = gmp_bench_now_s();
        uint64_t at = rng % n;
        if (gmp_tui_model_live(m, at, &live, &nlive) != GMP_OK ||
            gmp_tui_tree_build(tree, live, nlive, d->id, GMP_TUI_BY_RANGE, 0) != GMP_OK)
            gmp_bench_die("live set");
        /* what the screen also does: reserved at the cursor, when the focus is freed */
        (void)gmp_tui_model_reserved_at(m, d, at);
        const gmp_tui_row *row = gmp_tui_tree_row(tree, 0);
        if (row && row->best < nlive) {
            int searched;
            (void)gmp_tui_model_free_time(m, at, live[row->best].key, live[row->best].device,
                                          1u << 20, &searched);
        }
        free(live);
        double dt = gmp_bench_now_s() - a;
        sum += dt;
        if (dt > max)
            max = dt;
    }
    while (gmp_tui_model_verdicts_state(m) == GMP_TUI_VERDICTS_RUNNING)
        usleep(10000);
    double t_verdicts = gmp_bench_now_s() - t0;
    if (gmp_tui_model_verdicts_state(m) != GMP_TUI_VERDICTS_READY)
        gmp_bench_die("the verdicts' pass failed");
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char out[256];
    int k = snprintf(out, sizeof out, "%" PRIu64 " %f %f %f %f %ld %f %f %zu\n", n, t_index,
                     t_first, sum / moves * 1e3, max * 1e3, ru.ru_maxrss, c_first, t_verdicts,
                     gmp_tui_model_nverdicts(m));
    if (write(fd, out, (size_t)k) != k)
        gmp_bench_die("pipe");
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
    double t0 = gmp_bench_now_s();
    if (system(cmd) != 0)
        return -1;
    double t = -1;
    while (gmp_bench_now_s() - t0 < 60) {
        snprintf(cmd, sizeof cmd,
                 "tmux -L bench_view_%d capture-pane -p | grep -q 'Live at cursor'", (int)getpid());
        if (system(cmd) == 0) {
            t = gmp_bench_now_s() - t0;
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
    g_bench_name = "bench_view";
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
        gmp_bench_die("mkstemp");
    close(tfd);
    uint64_t n = gmp_bench_generate(path, nevents);
    printf("trace_events: %" PRIu64 "\n", n);
    fflush(stdout);
    int p[2];
    if (pipe(p) != 0)
        gmp_bench_die("pipe");
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
        gmp_bench_die("the child failed");
    buf[got] = 0;
    uint64_t logged;
    double t_index, t_first, mean_ms, max_ms, c_first, t_verdicts;
    long rss;
    size_t nverdicts;
    if (sscanf(buf, "%" SCNu64 " %lf %lf %lf %lf %ld %lf %lf %zu", &logged, &t_index, &t_first,
               &mean_ms, &max_ms, &rss, &c_first, &t_verdicts, &nverdicts) != 9)
        gmp_bench_die("bad child output");
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
        double r0 = gmp_bench_now_s();
        if (system(cmd) == 0)
            printf("report_s: %.3f\n", gmp_bench_now_s() - r0);
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
