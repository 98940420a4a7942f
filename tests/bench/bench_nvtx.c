/* bench_nvtx: the NVTX collector's cost per nvtxRangePushA + nvtxRangePop pair, measured in two
 * child processes of this program (NVTX initializes once per process): one without an injection
 * library (NVTX's own no-op path) and one with NVTX_INJECTION64_PATH naming the test injection
 * library (tests/nvtx/nvtx_shim), which records into a trace file. Prints figures, not a test:
 *
 *   nvtx_push_pop_ns: N ns                 added cost per pair (injected - baseline)
 *   nvtx_push_pop_ns_injected: N ns
 *   nvtx_push_pop_ns_baseline: N ns
 *   nvtx_push_pop_nested_ns: N ns          added cost per pair, 3 levels of nesting
 *
 * Usage: bench_nvtx [SHIM_PATH]   (default: the shim of this build) */
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

extern char **environ;

#define PAIRS 2000000

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Child: the best of several rounds, ns per pair, flat and nested. */
static int child(void)
{
    nvtxRangePushA("warmup");
    nvtxRangePop();
    double best_flat = 1e30, best_nested = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = now_ns();
        for (int i = 0; i < PAIRS; i++) {
            nvtxRangePushA("step");
            nvtxRangePop();
        }
        double t1 = now_ns();
        for (int i = 0; i < PAIRS / 3; i++) {
            nvtxRangePushA("train");
            nvtxRangePushA("step");
            nvtxRangePushA("forward");
            nvtxRangePop();
            nvtxRangePop();
            nvtxRangePop();
        }
        double t2 = now_ns();
        double flat = (t1 - t0) / PAIRS, nested = (t2 - t1) / (PAIRS / 3 * 3);
        if (flat < best_flat)
            best_flat = flat;
        if (nested < best_nested)
            best_nested = nested;
    }
    printf("%.2f %.2f\n", best_flat, best_nested);
    return 0;
}

static int run_child(const char *self, const char *shim, const char *trace, double *flat,
                     double *nested)
{
    int fds[2];
    if (pipe(fds) < 0)
        return -1;
    /* environment: ours minus any NVTX_INJECTION64_PATH, plus the shim when given */
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "NVTX_INJECTION64_PATH=", 22) != 0 &&
            strncmp(environ[i], "GMP_NVTX_TEST_TRACE=", 20) != 0)
            env[k++] = environ[i];
    }
    char e1[4096], e2[4096];
    if (shim) {
        snprintf(e1, sizeof e1, "NVTX_INJECTION64_PATH=%s", shim);
        snprintf(e2, sizeof e2, "GMP_NVTX_TEST_TRACE=%s", trace);
        env[k++] = e1;
        env[k++] = e2;
    }
    env[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char *argv[] = {(char *)self, "--child", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return -1;
    }
    char buf[128] = {0};
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return sscanf(buf, "%lf %lf", flat, nested) == 2 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child();
    const char *shim = argc > 1 ? argv[1] : GMP_NVTX_SHIM_PATH;
    char self[4096];
    ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sn <= 0) {
        fprintf(stderr, "bench_nvtx: cannot find its own path\n");
        return 1;
    }
    self[sn] = '\0';
    char trace[] = "/tmp/gmp_bench_nvtx_XXXXXX";
    int fd = mkstemp(trace);
    if (fd < 0) {
        perror("bench_nvtx: mkstemp");
        return 1;
    }
    close(fd);
    double bf, bn, jf, jn;
    if (run_child(self, NULL, trace, &bf, &bn) < 0 || run_child(self, shim, trace, &jf, &jn) < 0) {
        fprintf(stderr, "bench_nvtx: a measuring child failed\n");
        unlink(trace);
        return 1;
    }
    unlink(trace);
    printf("nvtx_push_pop_ns: %.1f ns\n", jf - bf);
    printf("nvtx_push_pop_ns_injected: %.1f ns\n", jf);
    printf("nvtx_push_pop_ns_baseline: %.1f ns\n", bf);
    printf("nvtx_push_pop_nested_ns: %.1f ns\n", jn - bn);
    return 0;
}
