/* gpumemprof run: profiles a command. Validates every option first, points CUDA_INJECTION64_PATH
 * and NVTX_INJECTION64_PATH at the agent, passes the options as GPUMEMPROF_* variables, runs the
 * command, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to gpumemprof, and exits with the command's
 * status (128+N when signal N ended it). Then it finds every trace the run wrote (one per process
 * that initialized CUDA) and prints a summary of each on stderr. One function per phase:
 * run_parse_opts, run_build_env, run_child, run_summarize.
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
#include "cli_runout.h"
#include "cli_summary.h"
#include "gmp_run_defaults.h"

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

/* 1 when the allocator configuration variable name selects backend:cudaMallocAsync. */
static int alloc_conf_async(const char *name)
{
    const char *v = getenv(name);
    for (const char *p = v; p && *p;) {
        size_t len = strcspn(p, ",");
        const char *k = p;
        while (k < p + len && (*k == ' ' || *k == '\t'))
            k++;
        const char *e = p + len;
        while (e > k && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e - k == 23 && !strncmp(k, "backend:cudaMallocAsync", 23))
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static int valid_pattern(const char *pat)
{
    for (const char *p = pat; *p; p++) {
        if (*p != '%')
            continue;
        p++;
        if (!*p || !strchr("phrln%", *p))
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

#define STR_(x) #x
#define STR(x) STR_(x)
#define MS 1000000ull /* ns */

/* What run was asked, its options checked. */
typedef struct run_opts {
    const char *output, *stacks, *torch_alloc, *unwind, *cupti, *alert;
    int layers, torch_history, force, quiet, no_nvtx, no_activity, view;
    int64_t depth;
    uint64_t sample_ns, flush_ns, buffer;
    char **command;            /* the program and its arguments (NULL-terminated) */
    char pattern[4096];        /* --output, absolute (run_build_env) */
    char runlog[4200];         /* the run log (cli_runout.h); "" when none */
    int started;               /* the command was started (exec succeeded) */
    struct timespec t0;        /* the run's start, one second early (run_child) */
    gmp_cli_run_view *view_ui; /* --view (cmd_view.c) */
} run_opts;

/* --output's default; the pointer (not the text) tells that no --output was given. */
static const char default_output[] = GMP_RUN_OUTPUT;

/* The options, up to the program's name, checked. Returns GMP_CLI_GO or the exit status. */
static int run_parse_opts(const gmp_cli_cmd_info *cmd, int argc, char **argv, run_opts *o)
{
    o->output = default_output;
    o->stacks = "auto";
    o->unwind = "libunwind";
    o->depth = GMP_RUN_STACK_DEPTH;
    o->sample_ns = GMP_RUN_SAMPLE_MS * MS;
    o->flush_ns = GMP_RUN_FLUSH_MS * MS;
    o->buffer = GMP_RUN_BUFFER_BYTES;
    gmp_cli_opt opts[] = {
        {"output", 'o', GMP_CLI_STRING, &o->output, "PATH",
         "trace file; %p pid, %h host, %r rank, %l local rank, %n counter (default " GMP_RUN_OUTPUT
         ", or " GMP_RUN_OUTPUT_RANK " in a rank of torchrun, srun or mpirun); its directory "
         "must exist; a name shared by several processes gives NAME.2.zst ...",
         0},
        {"force", 0, GMP_CLI_FLAG, &o->force, NULL, "overwrite existing trace files", 0},
        {"quiet", 'q', GMP_CLI_FLAG, &o->quiet, NULL, "no summary; the agent reports errors only",
         0},
        {"stacks", 0, GMP_CLI_STRING, &o->stacks, "KIND",
         "call stacks at each allocation: auto (default: native, with Python frames "
         "spliced in when the program runs CPython), native, python, all or none",
         0},
        {"stack-unwind", 0, GMP_CLI_STRING, &o->unwind, "HOW",
         "native unwinder: libunwind (default), glibc or fp (frame pointers)", 0},
        {"stack-depth", 0, GMP_CLI_INT, &o->depth, "N",
         "deepest stack recorded, " STR(GMP_RUN_STACK_DEPTH_MIN) "-" STR(
             GMP_RUN_STACK_DEPTH_MAX) " (default " STR(GMP_RUN_STACK_DEPTH) ")",
         0},
        {"sample-interval", 0, GMP_CLI_DURATION, &o->sample_ns, "MS",
         "device memory sample period in ms, 0 disables (default " STR(GMP_RUN_SAMPLE_MS) ")", MS},
        {"buffer-size", 0, GMP_CLI_SIZE, &o->buffer, "SIZE",
         "memory for trace buffers, 1M-4G (default 64M)", 0},
        {"flush-interval", 0, GMP_CLI_DURATION, &o->flush_ns, "MS",
         "write buffered events at least this often, " STR(GMP_RUN_FLUSH_MS_MIN) "-" STR(
             GMP_RUN_FLUSH_MS_MAX) " ms (default " STR(GMP_RUN_FLUSH_MS) ")",
         MS},
        {"cupti", 0, GMP_CLI_STRING, &o->cupti, "PATH", "libcupti to use instead of the one found",
         0},
        {"no-nvtx", 0, GMP_CLI_FLAG, &o->no_nvtx, NULL, "do not record NVTX ranges", 0},
        {"layers", 0, GMP_CLI_FLAG, &o->layers, NULL,
         "PyTorch: a range per nn.Module call (forward and backward), named by its qualified name",
         0},
        {"torch-history", 0, GMP_CLI_FLAG, &o->torch_history, NULL,
         "PyTorch 2.1+: record its own memory history (tensors, stacks) and dump it beside the "
         "trace (TRACE.torch.pickle) at exit, SIGTERM and out of memory",
         0},
        {"torch-alloc", 0, GMP_CLI_STRING, &o->torch_alloc, "BACKEND",
         "PyTorch's CUDA allocator: async (cudaMallocAsync: every tensor visible) or native "
         "(the caching allocator: segments only)",
         0},
        {"alert-threshold", 0, GMP_CLI_STRING, &o->alert, "BYTES|PCT%",
         "say once on stderr (and in the trace) when a device's allocated memory reaches this", 0},
        {"no-activity", 0, GMP_CLI_FLAG, &o->no_activity, NULL,
         "do not enable CUPTI activity records (static memory, pool sizes)", 0},
        {"view", 0, GMP_CLI_FLAG, &o->view, NULL,
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
        for (const gmp_cli_opt *c = opts; c->name; c++) {
            int takes = c->kind != GMP_CLI_FLAG;
            if (takes && ((a[1] == '-' && strcmp(a + 2, c->name) == 0) ||
                          (a[1] != '-' && a[1] == c->short_name && a[2] == 0))) {
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
    o->command = argv + cmd_start;
    const char *stacks = o->stacks, *unwind = o->unwind, *alert = o->alert;
    if (!*o->output || !valid_pattern(o->output))
        return gmp_cli_usage_error(cmd, "--output %s: use %%p, %%h, %%r, %%l, %%n or %%%% only",
                                   o->output);
    if (strcmp(stacks, "none") != 0 && strcmp(stacks, "native") != 0 &&
        strcmp(stacks, "python") != 0 && strcmp(stacks, "all") != 0 && strcmp(stacks, "auto") != 0)
        return gmp_cli_usage_error(cmd, "--stacks %s: expected auto, native, python, all or none",
                                   stacks);
    if (o->torch_alloc && strcmp(o->torch_alloc, "async") != 0 &&
        strcmp(o->torch_alloc, "native") != 0)
        return gmp_cli_usage_error(cmd, "--torch-alloc %s: expected async or native",
                                   o->torch_alloc);
    if (o->layers && o->no_nvtx)
        return gmp_cli_usage_error(cmd, "--layers records ranges: it cannot go with --no-nvtx");
    if (strcmp(unwind, "libunwind") != 0 && strcmp(unwind, "glibc") != 0 &&
        strcmp(unwind, "fp") != 0)
        return gmp_cli_usage_error(cmd, "--stack-unwind %s: expected libunwind, glibc or fp",
                                   unwind);
    if (o->depth < GMP_RUN_STACK_DEPTH_MIN || o->depth > GMP_RUN_STACK_DEPTH_MAX)
        return gmp_cli_usage_error(cmd, "--stack-depth %lld: expected %d to %d",
                                   (long long)o->depth, GMP_RUN_STACK_DEPTH_MIN,
                                   GMP_RUN_STACK_DEPTH_MAX);
    if (o->sample_ns > GMP_RUN_SAMPLE_MS_MAX * MS || (o->sample_ns && o->sample_ns < MS))
        return gmp_cli_usage_error(cmd, "--sample-interval: expected 0 or 1 ms to 1 hour");
    if (o->flush_ns < GMP_RUN_FLUSH_MS_MIN * MS || o->flush_ns > GMP_RUN_FLUSH_MS_MAX * MS)
        return gmp_cli_usage_error(cmd, "--flush-interval: expected 1 ms to 60 s");
    if (o->buffer < GMP_RUN_BUFFER_BYTES_MIN || o->buffer > GMP_RUN_BUFFER_BYTES_MAX)
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
    if (o->cupti && access(o->cupti, R_OK) != 0)
        return gmp_cli_usage_error(cmd, "--cupti %s: %s", o->cupti, strerror(errno));
    return GMP_CLI_GO;
}

/* python/sitecustomize.py beside the agent, first on PYTHONPATH (--layers, --torch-history). */
static int python_env(const run_opts *o, const char *agent)
{
    char dir[4200];
    const char *slash = strrchr(agent, '/');
    int dl = slash ? (int)(slash - agent) : 1;
    snprintf(dir, sizeof dir, "%.*s/python", dl, slash ? agent : ".");
    char site[4300];
    snprintf(site, sizeof site, "%s/sitecustomize.py", dir);
    if (access(site, R_OK) != 0) {
        fprintf(stderr, "gpumemprof run: --%s: %s is missing; reinstall gpumemprof\n",
                o->layers ? "layers" : "torch-history", site);
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
    if (o->layers)
        setenv("GPUMEMPROF_LAYERS", "1", 1);
    if (o->torch_history)
        setenv("GPUMEMPROF_TORCH_HISTORY", "1", 1);
    return 0;
}

/* o->pattern: --output made absolute, so that processes that change directory still write beside
 * each other; its directory checked now, before anything starts. A fixed name (no %p, %n or %r)
 * that exists is refused now rather than in the agent; with --force, an old regular file there is
 * removed now, and every process of the command then creates its own file (the first the name,
 * the others NAME.2.zst ...: GPUMEMPROF_OUTPUT_SUFFIX). Returns GMP_CLI_GO or the exit status. */
static int output_pattern(const gmp_cli_cmd_info *cmd, run_opts *o)
{
    char *pattern = o->pattern;
    if (o->output[0] == '/') {
        snprintf(pattern, sizeof o->pattern, "%s", o->output);
    } else {
        char cwd[2048];
        if (!getcwd(cwd, sizeof cwd)) {
            fprintf(stderr, "gpumemprof run: cannot read the current directory: %s\n",
                    strerror(errno));
            return 1;
        }
        if ((size_t)snprintf(pattern, sizeof o->pattern, "%s/%s", cwd, o->output) >=
            sizeof o->pattern)
            return gmp_cli_usage_error(cmd, "--output: path too long");
    }
    char msg[1200];
    if (gmp_cli_run_check_dir(pattern, msg, sizeof msg) != 0)
        return gmp_cli_usage_error(cmd, "%s", msg);
    char fixed[4096];
    if (!gmp_cli_run_fixed_name(pattern, fixed, sizeof fixed)) {
        unsetenv("GPUMEMPROF_OUTPUT_SUFFIX");
        return GMP_CLI_GO;
    }
    setenv("GPUMEMPROF_OUTPUT_SUFFIX", "1", 1);
    struct stat st;
    if (lstat(fixed, &st) != 0)
        return GMP_CLI_GO;
    if (!o->force) {
        fprintf(stderr, "gpumemprof run: %s exists; use --force to overwrite it\n", fixed);
        return 1;
    }
    /* anything else (a symbolic link, a FIFO) stays: the agent refuses it */
    if (S_ISREG(st.st_mode) && unlink(fixed) != 0) {
        fprintf(stderr, "gpumemprof run: --force: cannot remove %s: %s\n", fixed, strerror(errno));
        return 1;
    }
    return GMP_CLI_GO;
}

/* The program's environment: the agent injected (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH),
 * the options as GPUMEMPROF_* variables, PyTorch's settings; the output pattern checked. Returns
 * GMP_CLI_GO or the exit status. */
static int run_build_env(const gmp_cli_cmd_info *cmd, run_opts *o)
{
    char agent[4096];
    if (gmp_cli_agent_path(agent, sizeof agent) != GMP_OK) {
        fprintf(stderr,
                "gpumemprof run: the agent library is missing (looked for %s); reinstall "
                "gpumemprof or set GPUMEMPROF_AGENT\n",
                agent);
        return 1;
    }
    if ((o->layers || o->torch_history) && python_env(o, agent) != 0)
        return 1;
    if (o->torch_alloc) {
        /* PyTorch parses only one of PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF, and which one
         * it tries first depends on its version (c10/cuda/CUDAAllocatorConfig.h,
         * CUDAAllocatorConfig::instance()). A variable the user set alone is copied to the other
         * before the backend goes into both, so that no version reads a bare backend:X in place
         * of the user's options. */
        const char *b = strcmp(o->torch_alloc, "async") == 0 ? "cudaMallocAsync" : "native";
        const char *cu = getenv("PYTORCH_CUDA_ALLOC_CONF"), *al = getenv("PYTORCH_ALLOC_CONF");
        if ((cu && !al && setenv("PYTORCH_ALLOC_CONF", cu, 1) != 0) ||
            (al && !cu && setenv("PYTORCH_CUDA_ALLOC_CONF", al, 1) != 0) ||
            merge_alloc_conf("PYTORCH_CUDA_ALLOC_CONF", b) != 0 ||
            merge_alloc_conf("PYTORCH_ALLOC_CONF", b) != 0) {
            fprintf(stderr, "gpumemprof run: out of memory\n");
            return 1;
        }
    }
    /* PyTorch's cudaMallocAsync backend refuses to record history
     * (c10/cuda/CUDAMallocAsyncAllocator.cpp: recordHistory is TORCH_CHECK(false, ...)): say so
     * now, once; the sitecustomize then stays silent about the refusal (GPUMEMPROF_TORCH_ASYNC) */
    if (o->torch_history &&
        (alloc_conf_async("PYTORCH_CUDA_ALLOC_CONF") || alloc_conf_async("PYTORCH_ALLOC_CONF"))) {
        fprintf(stderr,
                "gpumemprof run: --torch-history: PyTorch keeps no memory history with "
                "its cudaMallocAsync backend; the trace records each tensor as a CUDA "
                "allocation (cudaMallocAsync) instead, with its stack (and layer with --layers)\n");
        setenv("GPUMEMPROF_TORCH_ASYNC", "1", 1);
    } else {
        unsetenv("GPUMEMPROF_TORCH_ASYNC");
    }
    int rc = output_pattern(cmd, o);
    if (rc != GMP_CLI_GO)
        return rc;
    const char *prev = getenv("CUDA_INJECTION64_PATH");
    if (prev && *prev && strcmp(prev, agent) != 0)
        fprintf(stderr, "gpumemprof run: replacing CUDA_INJECTION64_PATH=%s\n", prev);
    setenv("CUDA_INJECTION64_PATH", agent, 1);
    if (!o->no_nvtx)
        setenv("NVTX_INJECTION64_PATH", agent, 1);
    setenv("GPUMEMPROF_OUTPUT", o->pattern, 1);
    /* no --output: a process whose environment names a rank takes the rank's default name
     * instead, in the same directory (the agent chooses: only it sees its launcher's variables) */
    char rpat[sizeof o->pattern];
    size_t pl = strlen(o->pattern), dl = pl - sizeof GMP_RUN_OUTPUT + 1; /* the directory's */
    if (o->output == default_output && pl >= sizeof GMP_RUN_OUTPUT - 1 &&
        (size_t)snprintf(rpat, sizeof rpat, "%.*s%s", (int)dl, o->pattern, GMP_RUN_OUTPUT_RANK) <
            sizeof rpat)
        setenv("GPUMEMPROF_OUTPUT_RANK", rpat, 1);
    else
        unsetenv("GPUMEMPROF_OUTPUT_RANK");
    if (gmp_cli_runlog_create(o->runlog, sizeof o->runlog) == 0)
        setenv("GPUMEMPROF_RUN_LOG", o->runlog, 1);
    else
        unsetenv("GPUMEMPROF_RUN_LOG"); /* the summary then finds the traces by the pattern */
    setenv("GPUMEMPROF_FORCE", o->force ? "1" : "0", 1);
    setenv("GPUMEMPROF_STACKS", o->stacks, 1);
    setenv_u("GPUMEMPROF_STACK_DEPTH", (unsigned long long)o->depth);
    setenv("GPUMEMPROF_STACK_UNWIND", o->unwind, 1);
    setenv_u("GPUMEMPROF_SAMPLE_INTERVAL_MS", o->sample_ns / MS);
    setenv_u("GPUMEMPROF_BUFFER_SIZE", o->buffer);
    setenv_u("GPUMEMPROF_FLUSH_INTERVAL_MS", o->flush_ns / MS);
    if (o->cupti)
        setenv("GPUMEMPROF_CUPTI", o->cupti, 1);
    else
        unsetenv("GPUMEMPROF_CUPTI");
    setenv("GPUMEMPROF_NVTX", o->no_nvtx ? "0" : "1", 1);
    setenv("GPUMEMPROF_ACTIVITY", o->no_activity ? "0" : "1", 1);
    setenv("GPUMEMPROF_QUIET", o->quiet ? "1" : "0", 1);
    if (o->alert) {
        /* the agent parses sizes in whole units: pass bytes (or the percentage) */
        size_t al = strlen(o->alert);
        if (o->alert[al - 1] == '%') {
            setenv("GPUMEMPROF_ALERT_THRESHOLD", o->alert, 1);
        } else {
            uint64_t v = 0;
            gmp_cli_parse_size(o->alert, &v);
            setenv_u("GPUMEMPROF_ALERT_THRESHOLD", v);
        }
    } else {
        unsetenv("GPUMEMPROF_ALERT_THRESHOLD");
    }
    return GMP_CLI_GO;
}

/* Starts the program (and --view's viewer), forwards the signals sent to gpumemprof while it runs,
 * and waits for its end. Returns GMP_CLI_GO with its wait status in *status, or the exit status
 * when it could not be started. */
static int run_child(run_opts *o, int *status)
{
    clock_gettime(CLOCK_REALTIME, &o->t0);
    o->t0.tv_sec -= 1; /* file systems with coarse timestamps */

    struct sigaction sa, old[5];
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    const int sigs[5] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1};
    for (int i = 0; i < 5; i++)
        sigaction(sigs[i], &sa, &old[i]);

    if (o->view) {
        char vpat[8192];
        if (glob_pattern(o->pattern, vpat, sizeof vpat) != 0 ||
            !(o->view_ui = gmp_cli_run_view_new(vpat, (long long)o->t0.tv_sec))) {
            fprintf(stderr, "gpumemprof run: --view: cannot start the viewer\n");
            return 1;
        }
    }
    fflush(NULL);
    /* closed by a successful exec: a byte read from it says the exec failed */
    int ex[2] = {-1, -1};
    if (pipe2(ex, O_CLOEXEC) != 0)
        ex[0] = ex[1] = -1;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gpumemprof run: cannot start %s: %s\n", o->command[0], strerror(errno));
        if (ex[0] >= 0) {
            close(ex[0]);
            close(ex[1]);
        }
        return 1;
    }
    if (pid == 0) {
        for (int i = 0; i < 5; i++)
            sigaction(sigs[i], &old[i], NULL);
        if (o->view_ui)
            gmp_cli_run_view_child(o->view_ui);
        execvp(o->command[0], o->command);
        int e = errno;
        fprintf(stderr, "gpumemprof run: cannot run %s: %s\n", o->command[0], strerror(e));
        if (ex[1] >= 0 && write(ex[1], "x", 1) < 0)
            e = errno;
        _exit(e == ENOENT ? 127 : 126);
    }
    child_pid = pid; /* signals are forwarded from now on, the exec's outcome known or not */
    o->started = 1;
    if (ex[1] >= 0) {
        close(ex[1]);
        char b;
        ssize_t r;
        while ((r = read(ex[0], &b, 1)) < 0 && errno == EINTR)
            ;
        o->started = r != 1;
        close(ex[0]);
    }
    *status = 0;
    int reaped = o->view_ui ? gmp_cli_run_view_wait(o->view_ui, (int)pid, status) : 0;
    while (!reaped && waitpid(pid, status, 0) < 0) {
        if (errno != EINTR) {
            *status = 1 << 8;
            break;
        }
    }
    child_pid = 0;
    for (int i = 0; i < 5; i++)
        sigaction(sigs[i], &old[i], NULL);
    return GMP_CLI_GO;
}

/* The program's end, then the traces this run wrote (the pattern's files written since its start)
 * with a summary of each, on stderr (not with --quiet). */
static void run_summarize(run_opts *o, int status)
{
    char gpat[8192];
    glob_t g;
    memset(&g, 0, sizeof g);
    size_t ntraces = 0;
    gmp_cli_run_proc *procs = NULL;
    size_t nprocs = o->runlog[0] ? gmp_cli_runlog_read(o->runlog, &procs) : 0;
    if (o->runlog[0])
        unlink(o->runlog);
    int globbed = glob_pattern(o->pattern, gpat, sizeof gpat) == 0 && glob(gpat, 0, NULL, &g) == 0;
    char **traces = calloc((globbed ? g.gl_pathc : 0) + nprocs + 1, sizeof *traces);
    for (size_t i = 0; globbed && traces && i < g.gl_pathc; i++) {
        struct stat st;
        if (lstat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid())
            continue;
        if (st.st_mtim.tv_sec < o->t0.tv_sec)
            continue;
        traces[ntraces++] = g.gl_pathv[i];
    }
    /* the traces the pattern does not find (NAME.2.zst ...), as the run log names them */
    for (size_t i = 0; traces && i < nprocs; i++) {
        if (!procs[i].recorded)
            continue;
        size_t k = 0;
        while (k < ntraces && strcmp(traces[k], procs[i].what) != 0)
            k++;
        if (k == ntraces)
            traces[ntraces++] = procs[i].what;
    }
    if (!o->quiet) {
        if (WIFSIGNALED(status))
            fprintf(stderr, "gpumemprof: %s was ended by signal %d (%s)\n", o->command[0],
                    WTERMSIG(status), strsignal(WTERMSIG(status)));
        gmp_cli_print_run_summary(stderr, (const char *const *)traces, ntraces, procs, nprocs,
                                  o->started);
    }
    globfree(&g);
    free(traces);
    gmp_cli_runlog_free(procs, nprocs);
    gmp_cli_run_view_free(o->view_ui);
}

int gmp_cmd_run(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    int rc = run_parse_opts(cmd, argc, argv, &o);
    if (rc == GMP_CLI_GO)
        rc = run_build_env(cmd, &o);
    int status = 0;
    if (rc == GMP_CLI_GO)
        rc = run_child(&o, &status);
    if (rc != GMP_CLI_GO) {
        if (o.runlog[0])
            unlink(o.runlog);
        return rc;
    }
    run_summarize(&o, status);
    return WIFEXITED(status) ? WEXITSTATUS(status)
                             : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
}
