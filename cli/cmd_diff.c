/* gpumemprof diff: compares two traces, A (before) and B (after): per device the peak of allocated
 * memory, what was live at the peak by range, by user frame and by stack, and leaks, side by side
 * with the change B - A, biggest changes first. Each trace is replayed once (cli_replay.h) into the
 * report's model (formats/report/gmp_report.h, with the report's symbolizer: cli_report_sym.h), of
 * which a profile is taken (gmp_report_diff.h), so that diff says what `report` says; the
 * comparison is a report document written by the renderer of --format, or of -o's extension
 * (gmp_render.h). This file only parses options, runs the comparison and renders it. See
 * docs/diff.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cli_opts.h"
#include "cli_replay.h"
#include "cli_report_sym.h"
#include "gmp_diff.h"
#include "gmp_render.h"
#include "gmp_report.h"
#include "gmp_report_diff.h"

#define DEFAULT_TOP_TEXT 10

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n"
           "Replays A (before) and B (after) once each and prints, per device: the peak of\n"
           "allocated and reserved memory, leaked bytes and allocation counts of both with the\n"
           "change B - A; then what was live at each trace's peak by NVTX range, by user frame\n"
           "and by call stack, and what was still live at exit by kind and range (or user\n"
           "frame), matched by name across the two traces, biggest changes first. Figures,\n"
           "frames and leaks are the report's: native frames symbolized, internal frames\n"
           "folded, static __device__ memory and a snapshot's memory not "
           "leaked.\n\n" GMP_CLI_INPUT_HELP
           "(diff a snapshot against a trace: A and B need not be of the same kind).\n\n",
           cmd->summary);
    gmp_cli_print_options(stdout, opts);
    printf("\n--top applies per device and table (default %d, JSON default all; 0 = all).\n"
           "Exit status: 0 when the comparison was written (a warning names a trace that was\n"
           "cut short), 1 when a trace cannot be read or the output cannot be written, 2 for\n"
           "bad arguments. See docs/diff.md.\n",
           DEFAULT_TOP_TEXT);
}

/* Each trace's report model (kept: the document shows its stacks) and its profile. */
typedef struct diff_run {
    gmp_report_doc *doc[2];
    gmp_diff_profile *P[2];
} diff_run;

static gmp_err attach(void *ctx, gmp_cli_trace *t)
{
    diff_run *R = ctx;
    gmp_err e = gmp_report_doc_new(&R->doc[t->index], NULL);
    return e == GMP_OK ? gmp_report_doc_add(R->doc[t->index], t->replay, t->path, "") : e;
}

/* The profile of trace t, once replayed (the report's model is complete). */
static gmp_err keep_profile(void *ctx, gmp_cli_trace *t, char *msg, size_t msglen)
{
    diff_run *R = ctx;
    (void)msg;
    (void)msglen;
    const gmp_report_doc *doc = R->doc[t->index];
    if (!doc || doc->ntraces != 1)
        return GMP_ERR_NOMEM;
    return gmp_report_diff_profile(&R->P[t->index], doc->traces[0], t->path);
}

static void run_free(diff_run *R)
{
    for (int i = 0; i < 2; i++) {
        gmp_diff_profile_free(R->P[i]);
        gmp_report_doc_free(R->doc[i]);
    }
}

int gmp_cmd_diff(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *format = NULL, *out_path = NULL, *debug_dir = NULL;
    int64_t top = INT64_MIN; /* not given (a value given is checked: -1 is an error) */
    int npos = 0, all_frames = 0;
    const gmp_cli_opt opts[] = {
        {"format", 'f', GMP_CLI_STRING, &format, "FMT",
         "text, markdown, html or json (default: text, or from -o's extension)", 0},
        {"top", 'n', GMP_CLI_INT, &top, "N", "rows per device in each table (0: all)", 0},
        {"output", 'o', GMP_CLI_STRING, &out_path, "FILE", "write to FILE instead of stdout", 0},
        {"all-frames", 0, GMP_CLI_FLAG, &all_frames, NULL,
         "show every frame of a stack (default: internal frames folded, docs/stacks.md)", 0},
        {"debug-dir", 0, GMP_CLI_STRING, &debug_dir, "DIR",
         "separate debug files (default /usr/lib/debug)", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc != GMP_CLI_GO)
        return rc;
    /* as `report`: -o's extension picks the format unless --format says */
    if (!format && out_path && strcmp(out_path, "-") != 0)
        format = gmp_report_format_for_path(out_path);
    if (!format)
        format = "text";
    gmp_render_fn render = gmp_render_by_name(format);
    if (!render)
        return gmp_cli_usage_error(cmd, "--format: '%s' is not text, markdown, html or json",
                                   format);
    int json = render == gmp_render_json;
    if (top != INT64_MIN && (top < 0 || top > 1000000000))
        return gmp_cli_usage_error(cmd, "--top %" PRId64 ": expected 0 (all) to 1000000000", top);
    if (npos < 2)
        return gmp_cli_usage_error(cmd, "expected two recordings, A and B");
    if (npos > 2)
        return gmp_cli_usage_error(cmd, "%s: unexpected argument (two recordings only)", argv[3]);

    /* one recording at a time: an imported one is gone before the next is imported (the report
     * model keeps what it needs of it: strings and stacks copied, native frames symbolized) */
    gmp_cli_report_symbolizer_install(debug_dir);
    diff_run R;
    memset(&R, 0, sizeof R);
    gmp_diff_profile **P = R.P;
    gmp_cli_replay_spec spec = {.cmd = cmd->name,
                                .one_at_a_time = 1,
                                .ctx = &R,
                                .attach = attach,
                                .replayed = keep_profile};
    if (gmp_cli_replay_all(argv + 1, 2, &spec) != 0) {
        run_free(&R);
        return 1;
    }
    gmp_diff *D = NULL;
    if (gmp_diff_compute(&D, P[0], P[1]) != GMP_OK) {
        fprintf(stderr, "gpumemprof diff: %s\n", gmp_err_str(GMP_ERR_NOMEM));
        run_free(&R);
        return 1;
    }
    size_t t = top >= 0 ? (size_t)top : json ? 0 : DEFAULT_TOP_TEXT;
    gmp_doc *doc =
        gmp_report_diff_doc(D, P[0], P[1], R.doc[0]->traces[0], R.doc[1]->traces[0], t, all_frames);
    FILE *f = stdout;
    int status = 0;
    if (!doc) {
        fprintf(stderr, "gpumemprof diff: %s\n", gmp_err_str(GMP_ERR_NOMEM));
        status = 1;
        f = NULL;
    } else if (out_path && strcmp(out_path, "-") != 0) {
        f = fopen(out_path, "w");
        if (!f) {
            fprintf(stderr, "gpumemprof diff: %s: %s\n", out_path, strerror(errno));
            status = 1;
        }
    }
    if (f) {
        gmp_render_opts ro = {.color = 0, .title = NULL};
        gmp_err werr = render(doc, f, &ro);
        if (werr == GMP_ERR_NOMEM) {
            fprintf(stderr, "gpumemprof diff: %s\n", gmp_err_str(werr));
            status = 1;
        } else if (werr != GMP_OK || fflush(f) != 0 || ferror(f)) {
            fprintf(stderr, "gpumemprof diff: cannot write the output\n");
            status = 1;
        }
        if (f != stdout && fclose(f) != 0 && !status) {
            fprintf(stderr, "gpumemprof diff: %s: cannot be written\n", out_path);
            status = 1;
        }
        for (int i = 0; i < 2 && !status; i++)
            if (!P[i]->complete)
                fprintf(stderr, "gpumemprof diff: warning: %s: %s\n", P[i]->path,
                        P[i]->completeness);
    }
    gmp_doc_free(doc);
    gmp_diff_free(D);
    run_free(&R);
    return status;
}
