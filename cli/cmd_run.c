/* gpumemprof run: profiles a command. Validates every option first, points CUDA_INJECTION64_PATH
 * and NVTX_INJECTION64_PATH at the agent, passes the options as GPUMEMPROF_* variables, runs the
 * command, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to gpumemprof, and exits with the command's
 * status (128+N when signal N ended it). Then it finds every trace the run wrote (one per process
 * that initialized CUDA) and prints a summary of each on stderr.
 *
 * For Python programs: --layers puts the agent's sitecustomize (python/ beside the agent) first on
 * PYTHONPATH (it runs any sitecustomize found after it, then hooks torch.nn modules into ranges);
 * --torch-alloc picks PyTorch's CUDA allocator backend in PYTORCH_CUDA_ALLOC_CONF (docs/python.md);
 * --torch-history has the same sitecustomize turn on PyTorch's memory history and dump it beside
 * the trace.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_cmds.h"
#include "cli_opts.h"
#include "cli_paths.h"
#include "cli_summary.h"

static volatile sig_atomic_t child_pid;

static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    /* A signal from the terminal already reached the command (same process group); forward only
     * what was sent to gpumemprof itself (kill, timeout, a batch system). */
    if (child_pid > 0 && si && si->si_code <= 0)
        kill((pid_t)child_pid, sig);
}

static int setenv_u(const char *name, unsigned long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", v);
    return setenv(name, buf, 1);
}

/* The pattern with %p %n %r replaced by '*' and %h by the host name, for finding the traces. */
static int glob_pattern(const char *pat, char *out, size_t n)
{
    size_t o = 0;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    for (const char *p = pat; *p; p++) {
        const char *add;
        char one[2] = {0, 0};
        if (*p == '%' && p[1]) {
            p++;
            if (*p == 'h')
                add = host;
            else if (*p == '%')
                add = "%";
            else
                add = "*";
        } else {
            /* glob metacharacters of the user's path are matched literally */
            if (*p == '*' || *p == '?' || *p == '[' || *p == '\\') {
                if (o + 2 >= n)
                    return -1;
                out[o++] = '\\';
            }
            one[0] = *p;
            add = one;
        }
        size_t l = strlen(add);
        if (o + l + 1 > n)
            return -1;
        memcpy(out + o, add, l);
        o += l;
    }
    out[o] = 0;
    return 0;
}

/* Sets backend:B in the comma-separated allocator configuration variable name, keeping the other
 * keys of an existing value. */
static int merge_alloc_conf(const char *name, const char *backend)
{
    const char *old = getenv(name);
    size_t cap = (old ? strlen(old) : 0) + strlen(backend) + 16;
    char *v = malloc(cap);
    if (!v)
        return -1;
    size_t o = (size_t)snprintf(v, cap, "backend:%s", backend);
    for (const char *p = old; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *k = p;
        while (k < p + len && (*k == ' ' || *k == '\t'))
            k++;
        if (len && !(p + len - k >= 8 && !strncmp(k, "backend:", 8)) && k < p + len) {
            v[o++] = ',';
            memcpy(v + o, p, len);
            o += len;
            v[o] = 0;
        }
        p = e ? e + 1 : p + len;
    }
    int rc = setenv(name, v, 1);
    free(v);
    return rc;
}

static int valid_pattern(const char *pat)
{
    for (const char *p = pat; *p; p++) {
        if (*p != '%')
            continue;
        p++;
        if (!*p || !strchr("phrn%", *p))
            return 0;
    }
    return 1;
}

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\nRuns COMMAND with the gpumemprof agent injected into every process that "
           "uses CUDA, writes\none trace per process, and prints a summary on stderr when the "
           "command ends. Exits with\nthe command's exit status (128+N when signal N ended "
           "it).\n\n",
           cmd->summary);
    gmp_cli_print_options(stdout, opts);
}

int gmp_cmd_run(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *output = "gpumemprof.%p.zst";
    const char *stacks = "auto";
    const char *torch_alloc = NULL;
    int layers = 0, torch_history = 0;
    const char *unwind = "libunwind";
    const char *cupti = NULL;
    const char *alert = NULL;
    int force = 0, quiet = 0, no_nvtx = 0, no_activity = 0, view = 0;
    int64_t depth = 64;
    uint64_t sample_ns = 50000000ull, flush_ns = 200000000ull, buffer = 64ull << 20;
    const uint64_t ms = 1000000ull;
    gmp_cli_opt opts[] = {
        {"output", 'o', GMP_CLI_STRING, &output, "PATH",
         "trace file; %p pid, %h host, %r rank, %n counter (default gpumemprof.%p.zst)", 0},
        {"force", 0, GMP_CLI_FLAG, &force, NULL, "overwrite existing trace files", 0},
        {"quiet", 'q', GMP_CLI_FLAG, &quiet, NULL, "no summary; the agent reports errors only", 0},
        {"stacks", 0, GMP_CLI_STRING, &stacks, "KIND",
         "call stacks at each allocation: auto (default: native, with Python frames "
         "spliced in when the program runs CPython), native, python, all or none",
         0},
        {"stack-unwind", 0, GMP_CLI_STRING, &unwind, "HOW",
         "native unwinder: libunwind (default), glibc or fp (frame pointers)", 0},
        {"stack-depth", 0, GMP_CLI_INT, &depth, "N", "deepest stack recorded, 1-256 (default 64)",
         0},
        {"sample-interval", 0, GMP_CLI_DURATION, &sample_ns, "MS",
         "device memory sample period in ms, 0 disables (default 50)", 1000000},
        {"buffer-size", 0, GMP_CLI_SIZE, &buffer, "SIZE",
         "memory for trace buffers, 1M-4G (default 64M)", 0},
        {"flush-interval", 0, GMP_CLI_DURATION, &flush_ns, "MS",
         "write buffered events at least this often, 1-60000 ms (default 200)", 1000000},
        {"cupti", 0, GMP_CLI_STRING, &cupti, "PATH", "libcupti to use instead of the one found", 0},
        {"no-nvtx", 0, GMP_CLI_FLAG, &no_nvtx, NULL, "do not record NVTX ranges", 0},
        {"layers", 0, GMP_CLI_FLAG, &layers, NULL,
         "PyTorch: a range per nn.Module call (forward and backward), named by its qualified name",
         0},
        {"torch-history", 0, GMP_CLI_FLAG, &torch_history, NULL,
         "PyTorch 2.1+: record its own memory history (tensors, stacks) and dump it beside the "
         "trace (TRACE.torch.pickle) at exit, SIGTERM and out of memory",
         0},
        {"torch-alloc", 0, GMP_CLI_STRING, &torch_alloc, "BACKEND",
         "PyTorch's CUDA allocator: async (cudaMallocAsync: every tensor visible) or native "
         "(the caching allocator: segments only)",
         0},
        {"alert-threshold", 0, GMP_CLI_STRING, &alert, "BYTES|PCT%",
         "say once on stderr (and in the trace) when a device's allocated memory reaches this", 0},
        {"no-activity", 0, GMP_CLI_FLAG, &no_activity, NULL,
         "do not enable CUPTI activity records (static memory, pool sizes)", 0},
        {"view", 0, GMP_CLI_FLAG, &view, NULL,
         "watch the run in gpumemprof view (the program's output goes to a log file)", 0},
        {NULL, 0, 0, NULL, NULL, NULL, 0},
    };
    /* Our options end at "--" or at the first argument that is not an option: the rest is the
     * command with its own arguments, never parsed here. */
    int split = argc, cmd_start = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            split = i;
            cmd_start = i + 1;
            break;
        }
        if (a[0] != '-' || a[1] == 0) {
            split = i;
            cmd_start = i;
            break;
        }
        if (strchr(a, '='))
            continue;
        for (const gmp_cli_opt *o = opts; o->name; o++) {
            int takes = o->kind != GMP_CLI_FLAG;
            if (takes && ((a[1] == '-' && strcmp(a + 2, o->name) == 0) ||
                          (a[1] != '-' && a[1] == o->short_name && a[2] == 0))) {
                i++;
                break;
            }
        }
    }
    int npos = 0;
    int prc = gmp_cli_parse_or_help(cmd, opts, print_help, split, argv, &npos);
    if (prc != GMP_CLI_GO)
        return prc;
    if (npos > 0)
        return gmp_cli_usage_error(cmd, "%s: unexpected argument before the command", argv[1]);
    if (cmd_start >= argc)
        return gmp_cli_usage_error(cmd, "no command to run");
    if (!*output || !valid_pattern(output))
        return gmp_cli_usage_error(cmd, "--output %s: use %%p, %%h, %%r, %%n or %%%% only", output);
    if (strcmp(stacks, "none") != 0 && strcmp(stacks, "native") != 0 &&
        strcmp(stacks, "python") != 0 && strcmp(stacks, "all") != 0 && strcmp(stacks, "auto") != 0)
        return gmp_cli_usage_error(cmd, "--stacks %s: expected auto, native, python, all or none",
                                   stacks);
    if (torch_alloc && strcmp(torch_alloc, "async") != 0 && strcmp(torch_alloc, "native") != 0)
        return gmp_cli_usage_error(cmd, "--torch-alloc %s: expected async or native", torch_alloc);
    if (layers && no_nvtx)
        return gmp_cli_usage_error(cmd, "--layers records ranges: it cannot go with --no-nvtx");
    if (strcmp(unwind, "libunwind") != 0 && strcmp(unwind, "glibc") != 0 &&
        strcmp(unwind, "fp") != 0)
        return gmp_cli_usage_error(cmd, "--stack-unwind %s: expected libunwind, glibc or fp",
                                   unwind);
    if (depth < 1 || depth > 256)
        return gmp_cli_usage_error(cmd, "--stack-depth %lld: expected 1 to 256", (long long)depth);
    if (sample_ns > 3600000ull * ms || (sample_ns && sample_ns < ms))
        return gmp_cli_usage_error(cmd, "--sample-interval: expected 0 or 1 ms to 1 hour");
    if (flush_ns < ms || flush_ns > 60000ull * ms)
        return gmp_cli_usage_error(cmd, "--flush-interval: expected 1 ms to 60 s");
    if (buffer < (1ull << 20) || buffer > (4ull << 30))
        return gmp_cli_usage_error(cmd, "--buffer-size: expected 1M to 4G");
    if (alert) {
        size_t al = strlen(alert);
        uint64_t v = 0;
        int ok;
        if (al > 1 && alert[al - 1] == '%') {
            char num[16] = "";
            ok = al - 1 < sizeof num;
            if (ok) {
                memcpy(num, alert, al - 1);
                ok = gmp_cli_parse_uint(num, &v) == 0 && v >= 1 && v <= 100;
            }
        } else {
            ok = gmp_cli_parse_size(alert, &v) == 0 && v > 0;
        }
        if (!ok)
            return gmp_cli_usage_error(cmd,
                                       "--alert-threshold %s: expected a size (40G) or a "
                                       "percentage of device memory (90%%)",
                                       alert);
    }
    if (cupti && access(cupti, R_OK) != 0)
        return gmp_cli_usage_error(cmd, "--cupti %s: %s", cupti, strerror(errno));

    char agent[4096];
    if (gmp_cli_agent_path(agent, sizeof agent) != GMP_OK) {
        fprintf(stderr,
                "gpumemprof run: the agent library is missing (looked for %s); reinstall "
                "gpumemprof or set GPUMEMPROF_AGENT\n",
                agent);
        return 1;
    }
    if (layers || torch_history) {
        /* python/sitecustomize.py beside the agent, first on PYTHONPATH */
        char dir[4200];
        const char *slash = strrchr(agent, '/');
        int dl = slash ? (int)(slash - agent) : 1;
        snprintf(dir, sizeof dir, "%.*s/python", dl, slash ? agent : ".");
        char site[4300];
        snprintf(site, sizeof site, "%s/sitecustomize.py", dir);
        if (access(site, R_OK) != 0) {
            fprintf(stderr, "gpumemprof run: --%s: %s is missing; reinstall gpumemprof\n",
                    layers ? "layers" : "torch-history", site);
            return 1;
        }
        const char *pp = getenv("PYTHONPATH");
        size_t cap = strlen(dir) + (pp ? strlen(pp) : 0) + 2;
        char *v = malloc(cap);
        if (!v)
            return 1;
        if (pp && *pp)
            snprintf(v, cap, "%s:%s", dir, pp);
        else
            snprintf(v, cap, "%s", dir);
        setenv("PYTHONPATH", v, 1);
        free(v);
        if (layers)
            setenv("GPUMEMPROF_LAYERS", "1", 1);
        if (torch_history)
            setenv("GPUMEMPROF_TORCH_HISTORY", "1", 1);
    }
    if (torch_alloc) {
        const char *b = strcmp(torch_alloc, "async") == 0 ? "cudaMallocAsync" : "native";
        if (merge_alloc_conf("PYTORCH_CUDA_ALLOC_CONF", b) != 0 ||
            (getenv("PYTORCH_ALLOC_CONF") && merge_alloc_conf("PYTORCH_ALLOC_CONF", b) != 0)) {
            fprintf(stderr, "gpumemprof run: out of memory\n");
            return 1;
        }
    }
    /* an absolute pattern: processes that change directory still write beside each other */
    char pattern[4096];
    if (output[0] == '/') {
        snprintf(pattern, sizeof pattern, "%s", output);
    } else {
        char cwd[2048];
        if (!getcwd(cwd, sizeof cwd)) {
            fprintf(stderr, "gpumemprof run: cannot read the current directory: %s\n",
                    strerror(errno));
            return 1;
        }
        if ((size_t)snprintf(pattern, sizeof pattern, "%s/%s", cwd, output) >= sizeof pattern)
            return gmp_cli_usage_error(cmd, "--output: path too long");
    }
    /* a fixed name (no %p/%n) that exists: refuse now rather than in the agent */
    if (!force && !strstr(pattern, "%p") && !strstr(pattern, "%n") && !strstr(pattern, "%r")) {
        struct stat st;
        char fixed[4096];
        size_t o = 0;
        for (const char *p = pattern; *p && o + 1 < sizeof fixed; p++) {
            if (p[0] == '%' && p[1] == '%')
                p++;
            fixed[o++] = *p;
        }
        fixed[o] = 0;
        if (!strstr(pattern, "%h") && lstat(fixed, &st) == 0) {
            fprintf(stderr, "gpumemprof run: %s exists; use --force to overwrite it\n", fixed);
            return 1;
        }
    }
    const char *prev = getenv("CUDA_INJECTION64_PATH");
    if (prev && *prev && strcmp(prev, agent) != 0)
        fprintf(stderr, "gpumemprof run: replacing CUDA_INJECTION64_PATH=%s\n", prev);
    setenv("CUDA_INJECTION64_PATH", agent, 1);
    if (!no_nvtx)
        setenv("NVTX_INJECTION64_PATH", agent, 1);
    setenv("GPUMEMPROF_OUTPUT", pattern, 1);
    setenv("GPUMEMPROF_FORCE", force ? "1" : "0", 1);
    setenv("GPUMEMPROF_STACKS", stacks, 1);
    setenv_u("GPUMEMPROF_STACK_DEPTH", (unsigned long long)depth);
    setenv("GPUMEMPROF_STACK_UNWIND", unwind, 1);
    setenv_u("GPUMEMPROF_SAMPLE_INTERVAL_MS", sample_ns / ms);
    setenv_u("GPUMEMPROF_BUFFER_SIZE", buffer);
    setenv_u("GPUMEMPROF_FLUSH_INTERVAL_MS", flush_ns / ms);
    if (cupti)
        setenv("GPUMEMPROF_CUPTI", cupti, 1);
    else
        unsetenv("GPUMEMPROF_CUPTI");
    setenv("GPUMEMPROF_NVTX", no_nvtx ? "0" : "1", 1);
    setenv("GPUMEMPROF_ACTIVITY", no_activity ? "0" : "1", 1);
    setenv("GPUMEMPROF_QUIET", quiet ? "1" : "0", 1);
    if (alert) {
        /* the agent parses sizes in whole units: pass bytes (or the percentage) */
        size_t al = strlen(alert);
        if (alert[al - 1] == '%') {
            setenv("GPUMEMPROF_ALERT_THRESHOLD", alert, 1);
        } else {
            uint64_t v = 0;
            gmp_cli_parse_size(alert, &v);
            setenv_u("GPUMEMPROF_ALERT_THRESHOLD", v);
        }
    } else {
        unsetenv("GPUMEMPROF_ALERT_THRESHOLD");
    }

    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    t0.tv_sec -= 1; /* file systems with coarse timestamps */

    struct sigaction sa, old[5];
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    const int sigs[5] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1};
    for (int i = 0; i < 5; i++)
        sigaction(sigs[i], &sa, &old[i]);

    gmp_cli_run_view *rv = NULL; /* --view: cmd_view.c */
    if (view) {
        char vpat[8192];
        if (glob_pattern(pattern, vpat, sizeof vpat) != 0 ||
            !(rv = gmp_cli_run_view_new(vpat, (long long)t0.tv_sec))) {
            fprintf(stderr, "gpumemprof run: --view: cannot start the viewer\n");
            return 1;
        }
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gpumemprof run: cannot start %s: %s\n", argv[cmd_start], strerror(errno));
        return 1;
    }
    if (pid == 0) {
        for (int i = 0; i < 5; i++)
            sigaction(sigs[i], &old[i], NULL);
        if (rv)
            gmp_cli_run_view_child(rv);
        execvp(argv[cmd_start], argv + cmd_start);
        int e = errno;
        fprintf(stderr, "gpumemprof run: cannot run %s: %s\n", argv[cmd_start], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    child_pid = pid;
    int status = 0, reaped = rv ? gmp_cli_run_view_wait(rv, (int)pid, &status) : 0;
    while (!reaped && waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            status = 1 << 8;
            break;
        }
    }
    child_pid = 0;
    for (int i = 0; i < 5; i++)
        sigaction(sigs[i], &old[i], NULL);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status)
                               : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);

    /* the traces this run wrote */
    char gpat[8192];
    glob_t g;
    memset(&g, 0, sizeof g);
    size_t ntraces = 0;
    char **traces = NULL;
    if (glob_pattern(pattern, gpat, sizeof gpat) == 0 && glob(gpat, 0, NULL, &g) == 0) {
        traces = calloc(g.gl_pathc + 1, sizeof *traces);
        for (size_t i = 0; traces && i < g.gl_pathc; i++) {
            struct stat st;
            if (lstat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid())
                continue;
            if (st.st_mtim.tv_sec < t0.tv_sec)
                continue;
            traces[ntraces++] = g.gl_pathv[i];
        }
    }
    if (!quiet) {
        if (WIFSIGNALED(status))
            fprintf(stderr, "gpumemprof: %s was ended by signal %d (%s)\n", argv[cmd_start],
                    WTERMSIG(status), strsignal(WTERMSIG(status)));
        gmp_cli_print_run_summary(stderr, (const char *const *)traces, ntraces);
    }
    globfree(&g);
    free(traces);
    gmp_cli_run_view_free(rv);
    return rc;
}
