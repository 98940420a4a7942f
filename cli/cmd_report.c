/* gpumemprof report: what one or several traces say about memory, for a terminal (text, colour on a
 * TTY), Markdown, one self-contained HTML file, or JSON for programs. The report model
 * (formats/report/gmp_report.h) is computed in the one replay pass of each trace; it is built
 * into one report document and written by the renderer of the format
 * (formats/report/gmp_render_{text,md,html,json}.c). An HTML report's timeline is also the HTML
 * view unless --static (formats/export/gmp_out_htmlview.c as a fragment, made in the same replay
 * pass and handed to the renderer: formats/report does not know formats/export). See
 * docs/report.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cli_opts.h"
#include "cli_replay.h"
#include "gmp_report_ranks_oom.h"
#include "cli_report_ranks.h"
#include "cli_report_sym.h"
#include "cli_whatif.h"
#include "gmp_export.h"
#include "gmp_output.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_report.h"
#include "gmp_report_ranks.h"

#define DEFAULT_TOP 10

/* ---- command ---- */

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n"
           "Replays each FILE once and reports, per device: the peak of allocated device memory\n"
           "and when it happened, the peak reserved (pools and VMM included), allocation counts,\n"
           "what was live at the peak by NVTX range, by call stack (native frames symbolized\n"
           "from the binaries' DWARF or ELF symbols), by memory kind or by API, what was still\n"
           "live at exit (leaks), fragmentation (reserved - allocated) and driver-reported use\n"
           "that no allocation explains; then totals per memory kind, the largest allocations,\n"
           "the most frequent allocation sites, per-range statistics (time inside, bytes\n"
           "allocated and freed inside, what the range left behind, the peak while inside),\n"
           "out-of-memory errors and anomalies; then analyses: allocations that keep growing\n"
           "over the iterations (probable leaks: one verdict at the range that owns each, bytes\n"
           "per iteration, the sites that grow),\n"
           "temporary allocations per range, allocator overhead at the peaks, why each OOM\n"
           "happened. Several traces (the ranks of one job): a section\n"
           "per process and a summary across them; more than %d traces (or --cross-rank): the\n"
           "cross-rank view instead (the outliers, a table of the ranks, each range's spread\n"
           "across the ranks), the traces read in parallel, each reduced to a small summary;\n"
           "--per-process gives the sections of every process instead.\n"
           "--summary-only writes the per-trace summaries (JSON) that --reduce turns into the\n"
           "cross-rank view, as if made from the traces (each trace summarized where it "
           "is).\n\n" GMP_CLI_INPUT_HELP "\n",
           cmd->summary, GMP_RANKS_AUTO_ABOVE);
    gmp_cli_print_options(stdout, opts);
    printf("\nFormats: text (a terminal; colour when it is one, unless NO_COLOR is set),\n"
           "markdown, html (one file, plots inline, no network), json (schema\n"
           "gpumemprof-report/3). --top applies per device (default %d; JSON: all; 0 = all).\n"
           "--by takes a comma-separated list (range, stack, kind, api, frame, category;\n"
           "default range,stack,kind,category: category only for PyTorch's frames or phase\n"
           "ranges; frame: by the innermost user frame, shown instead of range when a\n"
           "recording has no ranges).\n"
           "--sort orders the ranges table: path (default), time, count,\n"
           "alloc, freed, net, left, peak, frag. Stacks start at the user's code: frames of\n"
           "the recorder, the allocators, the Python interpreter, libc (and a framework's own\n"
           "code when user code called it) are folded as \"+N internal frames\"; the JSON keeps\n"
           "them, marked \"internal\"; --all-frames shows every frame.\n\n"
           "Exit status: 0 when the report was written (also for a cut trace: a warning says\n"
           "what is missing), 1 when a trace cannot be read or the output cannot be written,\n"
           "2 for bad arguments. See docs/report.md.\n",
           DEFAULT_TOP);
}

/* One report being made: the options, then what open_outputs opened. */
typedef struct report_run {
    const char *out_path, *debug_dir;
    gmp_report_writer writer;
    gmp_report_view view;
    gmp_report_opts ropts;
    int color; /* -1: when the output is a terminal */
    int interactive;
    int64_t device; /* INT64_MIN: all */
    FILE *f;
    gmp_report_doc *doc;
    /* HTML (not --static): the HTML view as a fragment, into memory, from the same replay
     * passes */
    char *vbuf;
    size_t vlen;
    FILE *vf;
    gmp_output_ctx *vctx;
    gmp_cli_symctx sym;
    char vtitle[512]; /* the traces' base names, as convert's title: the same page */
} report_run;

static int open_outputs(void *ctx, gmp_cli_trace *tr, size_t ntr)
{
    report_run *R = ctx;
    R->f = stdout;
    if (R->out_path && strcmp(R->out_path, "-") != 0) {
        R->f = fopen(R->out_path, "w");
        if (!R->f) {
            fprintf(stderr, "gpumemprof report: %s: %s\n", R->out_path, strerror(errno));
            return 1;
        }
    }
    int color = R->color;
    if (color < 0) {
        const char *term = getenv("TERM");
        color = R->writer == gmp_report_write_text && isatty(fileno(R->f)) && !getenv("NO_COLOR") &&
                !(term && strcmp(term, "dumb") == 0);
    }
    R->view.color = color && R->writer == gmp_report_write_text;
    gmp_cli_report_symbolizer_install(R->debug_dir);
    gmp_err e = gmp_report_doc_new(&R->doc, &R->ropts);
    if (e != GMP_OK) {
        fprintf(stderr, "gpumemprof report: %s\n", gmp_err_str(e));
        return 1;
    }
    for (size_t i = 0, tl = 0; i < ntr && tl + 1 < sizeof R->vtitle; i++) {
        const char *b = strrchr(tr[i].path, '/');
        int k = snprintf(R->vtitle + tl, sizeof R->vtitle - tl, "%s%s", i ? " " : "",
                         b ? b + 1 : tr[i].path);
        if (k < 0)
            break;
        tl = (size_t)k >= sizeof R->vtitle - tl ? sizeof R->vtitle - 1 : tl + (size_t)k;
    }
    if (R->interactive) {
        gmp_output_opts oo = {.exporter = "gpumemprof " GMP_VERSION_STRING,
                              .title = R->vtitle,
                              .ntraces = ntr,
                              .symbolize = gmp_cli_symbolize_frame,
                              .symbolize_ctx = &R->sym,
                              .all_frames = R->view.all_frames};
        R->vf = open_memstream(&R->vbuf, &R->vlen);
        e = R->vf ? gmp_out_htmlview_fragment.start(&R->vctx, R->vf, NULL, &oo) : GMP_ERR_NOMEM;
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof report: %s\n", gmp_err_str(e));
            return 1;
        }
    }
    return 0;
}

static gmp_err attach(void *ctx, gmp_cli_trace *t)
{
    report_run *R = ctx;
    gmp_err e = gmp_report_doc_add(R->doc, t->replay, t->path, t->label);
    if (e == GMP_OK && R->vctx) {
        gmp_output_trace ot = {.path = t->path,
                               .index = t->index,
                               .header = t->header,
                               .pid = t->header->pid,
                               .label = t->label,
                               .t0_ns = t->header->start_trace_ns};
        e = gmp_out_htmlview_fragment.add_trace(R->vctx, t->replay, &ot);
    }
    return e;
}

static gmp_err replayed(void *ctx, gmp_cli_trace *t, char *msg, size_t msglen)
{
    const report_run *R = ctx;
    (void)msg;
    (void)msglen;
    /* an OOM's verdict says whether an allocator setting would have avoided it: the what-if
     * replay, run only for a trace that ran out of memory (cli_whatif.h) */
    if (R->doc->ntraces)
        gmp_cli_whatif_report(R->doc->traces[R->doc->ntraces - 1], t);
    if (R->device != INT64_MIN && !gmp_replay_device_find(t->replay, (int32_t)R->device))
        fprintf(stderr, "gpumemprof report: warning: %s: no device %" PRId64 " in the trace\n",
                t->path, R->device);
    return GMP_OK;
}

/* Writes the report (the inputs are closed), or leaves nothing behind after a failure. */
static int finish(void *ctx, int status)
{
    report_run *R = ctx;
    if (R->vctx && status) {
        gmp_out_htmlview_fragment.discard(R->vctx);
    } else if (R->vctx) {
        gmp_output_result res;
        memset(&res, 0, sizeof res);
        if (gmp_out_htmlview_fragment.finish(R->vctx, &res) != GMP_OK) {
            fprintf(stderr, "gpumemprof report: %s\n", res.error);
            status = 1;
        }
    }
    gmp_cli_symctx_reset(&R->sym);
    if (R->vf && fclose(R->vf) != 0 && !status) {
        fprintf(stderr, "gpumemprof report: %s\n", gmp_err_str(GMP_ERR_NOMEM));
        status = 1;
    }
    if (status) {
        free(R->vbuf);
        gmp_report_doc_free(R->doc);
        if (R->f && R->f != stdout) {
            fclose(R->f);
            unlink(R->out_path);
        }
        return 1;
    }
    /* an OOM across ranks: the failing rank beside the healthy ones (reads those traces again) */
    gmp_err e = gmp_report_ranks_oom_compute(R->doc);
    if (e == GMP_OK)
        e = R->vbuf ? gmp_report_write_html_timeline(R->doc, R->f, &R->view, R->vbuf)
                    : R->writer(R->doc, R->f, &R->view);
    gmp_report_doc_free(R->doc);
    free(R->vbuf);
    if (e != GMP_OK || fflush(R->f) != 0 || ferror(R->f)) {
        fprintf(stderr, "gpumemprof report: cannot write the output\n");
        status = 1;
    }
    if (R->f != stdout && fclose(R->f) != 0 && !status) {
        fprintf(stderr, "gpumemprof report: %s: cannot be written\n", R->out_path);
        status = 1;
    }
    return status;
}

/* --debug-dir must name a directory. An input named twice is read twice (each is a process of
 * its own in the comparison), but said: its rows will be identical. Returns GMP_CLI_GO or the exit
 * status. */
static int check_inputs_and_dirs(const gmp_cli_cmd_info *cmd, char **in, int n,
                                 const char *debug_dir)
{
    struct stat st;
    if (debug_dir && stat(debug_dir, &st) != 0)
        return gmp_cli_usage_error(cmd, "--debug-dir %s: %s", debug_dir, strerror(errno));
    if (debug_dir && !S_ISDIR(st.st_mode))
        return gmp_cli_usage_error(cmd, "--debug-dir %s: not a directory", debug_dir);
    for (int i = 0; i < n; i++) {
        struct stat a, b;
        if (strcmp(in[i], "-") == 0 || stat(in[i], &a) != 0)
            continue;
        for (int j = 0; j < i; j++)
            if (strcmp(in[j], "-") != 0 && stat(in[j], &b) == 0 && a.st_dev == b.st_dev &&
                a.st_ino == b.st_ino) {
                fprintf(stderr,
                        "gpumemprof report: warning: %s is given twice (also as %s): it is read "
                        "once for each, and their rows are the same\n",
                        in[i], in[j]);
                break;
            }
    }
    return GMP_CLI_GO;
}

int gmp_cmd_report(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *format = NULL, *out_path = NULL, *debug_dir = NULL, *by_s = NULL, *sort_s = NULL;
    const char *color_s = "auto";
    int64_t top = INT64_MIN, device = INT64_MIN, temp_us = INT64_MIN;
    int no_progress = 0, npos = 0, all_frames = 0, interactive = 0, static_html = 0;
    int per_process = 0, cross_rank = 0, summary_only = 0, reduce = 0;
    int64_t jobs = 0;
    const gmp_cli_opt opts[] = {
        {"format", 'f', GMP_CLI_STRING, &format, "FMT",
         "text, markdown, html or json (default: text, or from -o's extension)", 0},
        {"top", 'n', GMP_CLI_INT, &top, "N", "rows per device in each table (0: all)", 0},
        {"device", 'd', GMP_CLI_INT, &device, "N", "only this device (ordinal; -1: host)", 0},
        {"by", 'b', GMP_CLI_STRING, &by_s, "KEYS",
         "live at the peak grouped by range, stack, kind, api, frame, category (comma-separated)",
         0},
        {"sort", 's', GMP_CLI_STRING, &sort_s, "KEY", "order of the ranges table", 0},
        {"output", 'o', GMP_CLI_STRING, &out_path, "FILE", "write to FILE instead of stdout", 0},
        {"color", 0, GMP_CLI_STRING, &color_s, "WHEN", "text colours: auto, always, never", 0},
        {"temporary-us", 0, GMP_CLI_INT, &temp_us, "US",
         "allocations freed within US microseconds (default 1000), and before the range they "
         "were made in closed, are temporary",
         0},
        {"all-frames", 0, GMP_CLI_FLAG, &all_frames, NULL,
         "show every frame of a stack (default: internal frames folded, docs/stacks.md)", 0},
        {"static", 0, GMP_CLI_FLAG, &static_html, NULL,
         "html: SVG timelines only, no script (default: also the interactive view)", 0},
        {"interactive", 0, GMP_CLI_FLAG, &interactive, NULL,
         "html: the interactive view (the default; kept for older scripts)", 0},
        {"per-process", 0, GMP_CLI_FLAG, &per_process, NULL,
         "several traces: every process's whole report, however many (default: the "
         "cross-rank view above " GMP_RANKS_AUTO_ABOVE_S " traces)",
         0},
        {"cross-rank", 0, GMP_CLI_FLAG, &cross_rank, NULL,
         "the cross-rank view, however few traces", 0},
        {"summary-only", 0, GMP_CLI_FLAG, &summary_only, NULL,
         "write each trace's per-rank summary (JSON), for --reduce", 0},
        {"reduce", 0, GMP_CLI_FLAG, &reduce, NULL,
         "the inputs are --summary-only files: their cross-rank view", 0},
        {"jobs", 'j', GMP_CLI_INT, &jobs, "N",
         "cross-rank view: traces read at once (default: one per CPU, at most 8)", 0},
        {"no-progress", 0, GMP_CLI_FLAG, &no_progress, NULL, "no progress bar on a terminal", 0},
        {"debug-dir", 0, GMP_CLI_STRING, &debug_dir, "DIR",
         "separate debug files (default /usr/lib/debug)", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc != GMP_CLI_GO)
        return rc;
    if (summary_only && format && strcmp(format, "json") != 0)
        return gmp_cli_usage_error(cmd, "--summary-only writes JSON (--format json)");
    if (summary_only)
        format = "json";
    if (!format && out_path && strcmp(out_path, "-") != 0)
        format = gmp_report_format_for_path(out_path);
    if (!format)
        format = "text";
    gmp_report_writer writer = gmp_report_writer_by_name(format);
    if (!writer)
        return gmp_cli_usage_error(cmd, "--format: '%s' is not text, markdown, html or json",
                                   format);
    int json = writer == gmp_report_write_json;
    if (interactive && writer != gmp_report_write_html)
        return gmp_cli_usage_error(cmd, "--interactive: only for --format html");
    if (static_html && writer != gmp_report_write_html)
        return gmp_cli_usage_error(cmd, "--static: only for --format html");
    if (static_html && interactive)
        return gmp_cli_usage_error(cmd, "--static and --interactive contradict each other");
    interactive = writer == gmp_report_write_html && !static_html;
    if (top != INT64_MIN && (top < 0 || top > 1000000000))
        return gmp_cli_usage_error(cmd, "--top %" PRId64 ": expected 0 (all) to 1000000000", top);
    if (temp_us != INT64_MIN && (temp_us < 1 || temp_us > INT64_MAX / 1000))
        return gmp_cli_usage_error(cmd, "--temporary-us %" PRId64 ": expected 1 or more", temp_us);
    if (device != INT64_MIN && (device < -1 || device > INT32_MAX))
        return gmp_cli_usage_error(cmd,
                                   "--device %" PRId64 ": expected a device ordinal (0, 1, ...) "
                                   "or -1 (host)",
                                   device);
    gmp_report_view view;
    memset(&view, 0, sizeof view);
    if (by_s && !(view.by = gmp_report_parse_by(by_s)))
        return gmp_cli_usage_error(
            cmd, "--by: '%s' is not a list of range, stack, kind, api, frame, category", by_s);
    if (sort_s && !gmp_report_parse_sort(sort_s, &view.sort))
        return gmp_cli_usage_error(
            cmd, "--sort: '%s' is not path, time, count, alloc, freed, net, left, peak or frag",
            sort_s);
    int color;
    if (strcmp(color_s, "always") == 0)
        color = 1;
    else if (strcmp(color_s, "never") == 0)
        color = 0;
    else if (strcmp(color_s, "auto") == 0)
        color = -1;
    else
        return gmp_cli_usage_error(cmd, "--color: '%s' is not auto, always or never", color_s);
    if (npos == 0)
        return gmp_cli_usage_error(cmd, "missing TRACE");
    if (jobs < 0 || jobs > 64)
        return gmp_cli_usage_error(cmd, "--jobs %" PRId64 ": expected 1 to 64 (0: one per CPU)",
                                   jobs);
    if (per_process && (cross_rank || summary_only || reduce))
        return gmp_cli_usage_error(cmd, "--per-process: not with --cross-rank, --summary-only "
                                        "or --reduce");
    if (summary_only && reduce)
        return gmp_cli_usage_error(cmd, "--summary-only and --reduce contradict each other");
    view.top = top >= 0 ? (size_t)top : json ? 0 : DEFAULT_TOP;
    view.device = device;
    view.all_frames = all_frames;
    if (summary_only || reduce || cross_rank || (npos > GMP_RANKS_AUTO_ABOVE && !per_process)) {
        if (!reduce) {
            rc = check_inputs_and_dirs(cmd, argv + 1, npos, debug_dir);
            if (rc != GMP_CLI_GO)
                return rc;
        }
        gmp_cli_ranks_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.cmd = cmd->name;
        ro.out_path = out_path;
        ro.format = summary_only                      ? "json"
                    : writer == gmp_report_write_text ? "text"
                    : writer == gmp_report_write_md   ? "markdown"
                    : writer == gmp_report_write_html ? "html"
                                                      : "json";
        ro.color = color;
        ro.view = view;
        if (temp_us > 0)
            ro.ropts.analysis.temp_ns = (uint64_t)temp_us * 1000u;
        ro.debug_dir = debug_dir;
        ro.summary_only = summary_only;
        ro.reduce = reduce;
        ro.jobs = (int)jobs;
        return gmp_cli_report_ranks(argv + 1, (size_t)npos, &ro);
    }
    rc = check_inputs_and_dirs(cmd, argv + 1, npos, debug_dir);
    if (rc != GMP_CLI_GO)
        return rc;

    report_run R;
    memset(&R, 0, sizeof R);
    R.out_path = out_path;
    R.debug_dir = debug_dir;
    R.writer = writer;
    R.view = view;
    R.color = color;
    R.interactive = interactive;
    R.device = device;
    if (temp_us > 0)
        R.ropts.analysis.temp_ns = (uint64_t)temp_us * 1000u;
    R.sym.debug_dir = debug_dir;
    gmp_cli_replay_spec spec = {
        .cmd = cmd->name,
        /* one snapshot's trace is written by a thread while the replay reads it (each input is
         * read once, to the end, by one reader); not with several inputs, which are all opened
         * before the first is replayed: each would hold its importer's state meanwhile */
        .open_flags = npos == 1 ? GMP_CLI_INPUT_STREAM : 0,
        .progress = !no_progress,
        .warn_incomplete = 1,
        .ctx = &R,
        .open_outputs = open_outputs,
        .attach = attach,
        .replayed = replayed,
        .finish = finish,
    };
    return gmp_cli_replay_all(argv + 1, (size_t)npos, &spec);
}
