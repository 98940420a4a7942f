/* gpumemprof view: an interactive full-screen terminal viewer of recordings (tui/, docs/view.md).
 * Opens each recording through cli_input (traces where they are; PyTorch snapshots and nsys
 * exports imported into temporary traces) and hands the traces to the viewer. --follow reads
 * traces that are still being written again as they grow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cli_opts.h"
#include "gmp_tui.h"

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
           "is waited for.\n\n" GMP_CLI_INPUT_HELP "\n",
           cmd->summary);
    gmp_cli_print_options(stdout, opts);
    printf("\nExit status: 0 after q, 1 when a recording cannot be read or the terminal cannot\n"
           "be used, 2 for bad arguments. See docs/view.md.\n");
}

int gmp_cmd_view(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    int follow = 0, npos = 0;
    const char *color_s = "auto";
    const gmp_cli_opt opts[] = {
        {"follow", 'F', GMP_CLI_FLAG, &follow, NULL, "follow traces that are still being written",
         0},
        {"color", 0, GMP_CLI_STRING, &color_s, "WHEN", "colours: auto, always, never", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse(cmd, opts, argc, argv, &npos);
    if (rc == GMP_CLI_PARSE_HELP) {
        print_help(cmd, opts);
        return 0;
    }
    if (rc != GMP_CLI_PARSE_OK)
        return 2;
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
