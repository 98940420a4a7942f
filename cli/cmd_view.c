/* gpumemprof view: an interactive full-screen terminal viewer of recordings (tui/, docs/view.md).
 * Opens each recording through cli_input (traces where they are; PyTorch snapshots and nsys
 * exports imported into temporary traces) and hands the traces to the viewer. --follow reads
 * traces that are still being written again as they grow. Also `run --view` (cmd_run.c calls the
 * gmp_cli_run_view_* functions below): the program's output goes to a log file, the viewer follows
 * every trace the run writes as it appears, and the program's end is noticed without blocking. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cli_opts.h"
#include "gmp_cca_model.h"
#include "gmp_tui.h"
#include "gmp_whatif_advice.h"

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n"
           "Opens at the peak of the first device: a timeline of allocated and reserved bytes\n"
           "with a cursor; what is live at the cursor as a tree by range, stack or kind, with\n"
           "sizes; the allocation in focus (size, stack, lifetime); the events around the\n"
           "cursor. Press ? for the keys, q to quit. Works from 80x24 up; colours when the\n"
           "terminal has them, none when NO_COLOR is set or with --color never.\n\n"
           "--follow: the traces are still being written (gpumemprof run flushes every\n"
           "200 ms); the viewer reads them again as they grow and keeps the cursor at the\n"
           "end until you move it (End: back to the end). A trace that does not exist yet\n"
           "is waited for.\n\n"
           "--whatif CONF: the timeline also draws the reserve PyTorch's caching allocator would\n"
           "have had under that PYTORCH_CUDA_ALLOC_CONF (as `gpumemprof whatif --alloc-conf`\n"
           "replays it; docs/whatif.md) beside the recorded one.\n\n" GMP_CLI_INPUT_HELP "\n",
           cmd->summary);
    gmp_cli_print_options(stdout, opts);
    printf("\nExit status: 0 after q, 1 when a recording cannot be read or the terminal cannot\n"
           "be used, 2 for bad arguments. See docs/view.md.\n");
}

int gmp_cmd_view(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    int follow = 0, npos = 0;
    const char *color_s = "auto", *whatif_s = NULL;
    const gmp_cli_opt opts[] = {
        {"follow", 'F', GMP_CLI_FLAG, &follow, NULL, "follow traces that are still being written",
         0},
        {"color", 0, GMP_CLI_STRING, &color_s, "WHEN", "colours: auto, always, never", 0},
        {"whatif", 0, GMP_CLI_STRING, &whatif_s, "CONF",
         "draw the reserve PyTorch's allocator would have had under this setting", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc != GMP_CLI_GO)
        return rc;
    int color;
    if (strcmp(color_s, "always") == 0)
        color = 1;
    else if (strcmp(color_s, "never") == 0)
        color = 0;
    else if (strcmp(color_s, "auto") == 0)
        color = !getenv("NO_COLOR");
    else
        return gmp_cli_usage_error(cmd, "--color: '%s' is not auto, always or never", color_s);
    if (npos == 0)
        return gmp_cli_usage_error(cmd, "missing FILE");
    gmp_cca_config wcfg;
    if (whatif_s) {
        char err[256];
        if (follow)
            return gmp_cli_usage_error(cmd, "--whatif: not with --follow");
        if (gmp_whatif_parse_conf(whatif_s, &wcfg, err, sizeof err) != 0)
            return gmp_cli_usage_error(cmd, "--whatif %s: %s", whatif_s, err);
    }
    size_t n = (size_t)npos;
    const char **names = calloc(n, sizeof *names), **paths = calloc(n, sizeof *paths);
    gmp_cli_input *in = NULL;
    if (!names || !paths) {
        fprintf(stderr, "gpumemprof view: out of memory\n");
        free(names);
        free(paths);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = paths[i] = argv[1 + i];
    if (!follow) {
        /* recordings of any kind, by content */
        if (gmp_cli_inputs_open(cmd->name, argv + 1, n, &in)) {
            free(names);
            free(paths);
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            if (in[i].trace_path[0])
                paths[i] = in[i].trace_path;
    }
    gmp_tui_opts o;
    memset(&o, 0, sizeof o);
    o.ntraces = n;
    o.names = names;
    o.paths = paths;
    o.follow = follow;
    o.color = color;
    o.whatif = whatif_s ? &wcfg : NULL;
    o.whatif_name = whatif_s;
    char msg[512] = "";
    rc = gmp_tui_run(&o, msg, sizeof msg);
    if (rc != 0)
        fprintf(stderr, "gpumemprof view: %s\n", msg[0] ? msg : "failed");
    if (in)
        gmp_cli_inputs_close(in, n);
    free(names);
    free(paths);
    return rc;
}

/* ---- run --view ---- */

struct gmp_cli_run_view {
    char gpat[8192];
    long long t0_sec;
    char log[4096];
    int pid, reaped, status;
    char **traces;
    size_t ntraces, cap;
};

gmp_cli_run_view *gmp_cli_run_view_new(const char *glob_pattern, long long t0_sec)
{
    gmp_cli_run_view *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    snprintf(v->gpat, sizeof v->gpat, "%s", glob_pattern);
    v->t0_sec = t0_sec;
    char cwd[2048];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, ".");
    snprintf(v->log, sizeof v->log, "%s/gpumemprof-run.%d.log", cwd, (int)getpid());
    return v;
}

void gmp_cli_run_view_child(const gmp_cli_run_view *v)
{
    int fd = open(v->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
    }
    if (in >= 0)
        dup2(in, STDIN_FILENO);
}

/* The viewer's poll: notices the program's end, adds the traces that appeared (in the order they
 * are found; never one twice). */
static int run_poll(void *ctx, size_t *n, const char *const **names, const char *const **paths)
{
    gmp_cli_run_view *v = ctx;
    if (!v->reaped) {
        int st;
        pid_t r = waitpid((pid_t)v->pid, &st, WNOHANG);
        if (r == (pid_t)v->pid) {
            v->reaped = 1;
            v->status = st;
        }
    }
    glob_t g;
    memset(&g, 0, sizeof g);
    if (glob(v->gpat, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            if (lstat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
                (long long)st.st_mtim.tv_sec < v->t0_sec)
                continue;
            size_t k = 0;
            while (k < v->ntraces && strcmp(v->traces[k], g.gl_pathv[i]) != 0)
                k++;
            if (k < v->ntraces)
                continue;
            if (v->ntraces == v->cap) {
                size_t nc = v->cap ? v->cap * 2 : 8;
                char **nt = realloc(v->traces, nc * sizeof *nt);
                if (!nt)
                    break;
                v->traces = nt;
                v->cap = nc;
            }
            char *c = strdup(g.gl_pathv[i]);
            if (!c)
                break;
            v->traces[v->ntraces++] = c;
        }
    }
    globfree(&g);
    if (n) {
        *n = v->ntraces;
        *names = (const char *const *)v->traces;
        *paths = (const char *const *)v->traces;
    }
    return !v->reaped;
}

int gmp_cli_run_view_wait(gmp_cli_run_view *v, int pid, int *status)
{
    v->pid = pid;
    run_poll(v, NULL, NULL, NULL);
    gmp_tui_opts o;
    memset(&o, 0, sizeof o);
    o.ntraces = v->ntraces;
    o.names = (const char *const *)v->traces;
    o.paths = (const char *const *)v->traces;
    o.follow = 1;
    o.color = !getenv("NO_COLOR");
    o.log_path = v->log;
    o.poll = run_poll;
    o.poll_ctx = v;
    char msg[512] = "";
    if (gmp_tui_run(&o, msg, sizeof msg) != 0)
        fprintf(stderr, "gpumemprof run: --view: %s\n", msg);
    if (!v->reaped)
        fprintf(stderr, "gpumemprof run: waiting for the program to end (its output goes to %s)\n",
                v->log);
    *status = v->status;
    return v->reaped;
}

void gmp_cli_run_view_free(gmp_cli_run_view *v)
{
    if (!v)
        return;
    fprintf(stderr, "gpumemprof run: the program's output is in %s\n", v->log);
    for (size_t i = 0; i < v->ntraces; i++)
        free(v->traces[i]);
    free(v->traces);
    free(v);
}
