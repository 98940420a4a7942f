/* gpumemprof convert: turns traces into the files people open elsewhere (speedscope, Chrome trace /
 * Perfetto, ...). Each output format implements formats/replay/gmp_output.h; the table below lists
 * them (adding a format is one line there). Each trace is replayed once for every output together;
 * several traces (the ranks of one job) go into the same output files, one process per trace.
 * Everything that can fail early fails before any work: the traces are opened and their headers
 * checked, then every output file is opened for writing. See docs/convert.md. */
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
#include "cli_progress.h"
#include "gmp_export.h"
#include "gmp_out_report.h"
#include "gmp_report.h"
#include "gmp_output.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "cli_report_sym.h"

#define DEFAULT_MAX_SPANS 200000

/* The outputs: --OPTION FILE writes FILE with the format. One line per format. */
static const struct conv_output {
    const char *option;
    const char *help;
    const gmp_output *fmt;
} outputs[] = {
    {"speedscope", "speedscope JSON: flame graphs of memory by range and stack, ranges per thread",
     &gmp_out_speedscope},
    {"chrome", "Chrome trace JSON (Perfetto, chrome://tracing): counters, ranges, allocations",
     &gmp_out_chrome},
    {"pytorch-snapshot", "PyTorch memory snapshot pickle (pytorch.org/memory_viz)",
     &gmp_out_pytorch},
    {"report", "report: text, Markdown or HTML by the extension (.txt, .md, .html)",
     &gmp_out_report},
    {"json", "report as JSON (schema gpumemprof-report/3)", &gmp_out_report_json},
    {"pprof", "pprof profile.proto, gzip: inuse_space/objects at the peak, alloc_* over the run",
     &gmp_out_pprof},
    {"html-view", "one offline HTML page: memory timeline (hover, zoom), breakdown at the peak",
     &gmp_out_htmlview},
};
#define NOUTPUTS (sizeof outputs / sizeof outputs[0])

/* What is known about a trace before its replay (from its header). */
typedef struct trace_in {
    const char *path;        /* as given */
    const gmp_cli_input *in; /* the recording, imported when it is no trace */
    uint32_t pid, trace_pid;
    int64_t rank;
    uint64_t start_wall_ns, start_trace_ns;
    uint64_t bytes;
    char label[128];
} trace_in;

/* ---- command ---- */

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n"
           "Replays each FILE once and writes every output asked for. Several traces (the\n"
           "ranks or processes of one job) go into the same files: one process per trace in the\n"
           "Chrome trace, profiles per trace in speedscope; their times are aligned on the wall\n"
           "clock.\n\n" GMP_CLI_INPUT_HELP "\nOutputs:\n\n",
           cmd->summary);
    for (size_t i = 0; i < NOUTPUTS; i++)
        printf("  --%-12s %s\n", outputs[i].option, outputs[i].help);
    printf("\n");
    gmp_cli_print_options(stdout, opts);
    printf("\nExamples:\n"
           "  gpumemprof convert trace.zst --speedscope mem.speedscope.json\n"
           "  gpumemprof convert rank*.zst --chrome mem.chrome.json --chrome-torch-compat\n"
           "\nOpen speedscope files at https://www.speedscope.app or with the speedscope npm\n"
           "package; Chrome traces in https://ui.perfetto.dev or chrome://tracing.\n"
           "\nExit status: 0 when every output was written (also for a cut trace: a warning says\n"
           "what is missing), 1 when a trace cannot be read or an output cannot be written (no\n"
           "output is left behind then), 2 for bad arguments. See docs/convert.md.\n");
}

static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (strcmp(a, b) == 0)
        return 1;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Reads each trace's header: fails (1) with one message for a trace that cannot be opened. */
static int read_headers(const gmp_cli_cmd_info *cmd, trace_in *tr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gmp_reader *r = NULL;
        char m[512];
        gmp_err e = gmp_cli_input_reader(tr[i].in, &r, NULL, m, sizeof m);
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, tr[i].path, m);
            return 1;
        }
        const gmp_rec_header *h = gmp_reader_header(r);
        tr[i].trace_pid = h ? h->pid : 0;
        tr[i].rank = h ? h->rank : -1;
        tr[i].start_wall_ns = h ? h->start_wall_ns : 0;
        tr[i].start_trace_ns = h ? h->start_trace_ns : 0;
        const gmp_reader_stats *st = gmp_reader_get_stats(r);
        tr[i].bytes = st->file_bytes;
        gmp_reader_close(r);
    }
    /* shown pids: the traces' own, made unique */
    for (size_t i = 0; i < n; i++) {
        uint32_t pid = tr[i].trace_pid;
        for (int again = 1; again;) {
            again = 0;
            for (size_t j = 0; j < i; j++)
                if (tr[j].pid == pid) {
                    pid += 1000000;
                    again = 1;
                }
        }
        tr[i].pid = pid;
        if (n == 1)
            tr[i].label[0] = '\0';
        else if (tr[i].rank >= 0)
            snprintf(tr[i].label, sizeof tr[i].label, "rank %" PRId64 ", pid %" PRIu32, tr[i].rank,
                     tr[i].trace_pid);
        else
            snprintf(tr[i].label, sizeof tr[i].label, "pid %" PRIu32, tr[i].trace_pid);
    }
    return 0;
}

typedef struct out_file {
    const struct conv_output *def;
    const char *path;
    FILE *f;
    gmp_output_ctx *ctx;
} out_file;

static void abandon(out_file *of, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (of[i].ctx)
            of[i].def->fmt->discard(of[i].ctx);
        of[i].ctx = NULL;
        if (of[i].f && of[i].f != stdout) {
            fclose(of[i].f);
            unlink(of[i].path);
        }
        of[i].f = NULL;
    }
}

int gmp_cmd_convert(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *paths[NOUTPUTS] = {0};
    int torch = 0, no_progress = 0, all_frames = 0, static_html = 0;
    uint64_t max_spans = DEFAULT_MAX_SPANS;
    gmp_cli_opt opts[NOUTPUTS + 6];
    size_t no = 0;
    for (size_t i = 0; i < NOUTPUTS; i++)
        opts[no++] =
            (gmp_cli_opt){outputs[i].option, 0, GMP_CLI_STRING, &paths[i], "FILE", NULL, 0};
    opts[no++] =
        (gmp_cli_opt){"chrome-torch-compat",
                      0,
                      GMP_CLI_FLAG,
                      &torch,
                      NULL,
                      "Chrome: add PyTorch-profiler \"[memory]\" events (HTA, TensorBoard)",
                      0};
    opts[no++] = (gmp_cli_opt){"max-spans",
                               0,
                               GMP_CLI_UINT,
                               &max_spans,
                               "N",
                               "Chrome: allocation spans written at most (default 200000; 0: all)",
                               0};
    opts[no++] = (gmp_cli_opt){"all-frames",
                               0,
                               GMP_CLI_FLAG,
                               &all_frames,
                               NULL,
                               "stacks keep every frame (default: internal ones folded)",
                               0};
    opts[no++] = (gmp_cli_opt){"static",
                               0,
                               GMP_CLI_FLAG,
                               &static_html,
                               NULL,
                               "HTML report: SVG timelines only, no script (default: the view too)",
                               0};
    opts[no++] = (gmp_cli_opt){
        "no-progress", 0, GMP_CLI_FLAG, &no_progress, NULL, "no progress bar on a terminal", 0};
    opts[no] = (gmp_cli_opt){NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0};
    for (size_t i = 0; i < NOUTPUTS; i++)
        opts[i].help = "write this output to FILE (see above; - is stdout)";

    int npos = 0;
    int rc = gmp_cli_parse(cmd, opts, argc, argv, &npos);
    if (rc == GMP_CLI_PARSE_HELP) {
        print_help(cmd, opts);
        return 0;
    }
    if (rc != GMP_CLI_PARSE_OK)
        return 2;
    if (npos == 0)
        return gmp_cli_usage_error(cmd, "missing FILE");
    size_t nout = 0, nstdout = 0;
    for (size_t i = 0; i < NOUTPUTS; i++) {
        if (!paths[i])
            continue;
        if (!*paths[i])
            return gmp_cli_usage_error(cmd, "--%s: empty file name", outputs[i].option);
        nout++;
        nstdout += strcmp(paths[i], "-") == 0;
        for (size_t j = 0; j < i; j++)
            if (paths[j] && strcmp(paths[j], "-") != 0 && same_file(paths[i], paths[j]))
                return gmp_cli_usage_error(cmd, "--%s and --%s name the same file",
                                           outputs[j].option, outputs[i].option);
    }
    if (!nout)
        return gmp_cli_usage_error(cmd, "no output asked for (--speedscope FILE, --chrome FILE)");
    if (nstdout > 1)
        return gmp_cli_usage_error(cmd, "only one output can go to stdout (-)");

    size_t ntr = (size_t)npos;
    trace_in *tr = calloc(ntr, sizeof *tr);
    out_file of[NOUTPUTS];
    memset(of, 0, sizeof of);
    if (!tr) {
        fprintf(stderr, "gpumemprof %s: %s\n", cmd->name, gmp_err_str(GMP_ERR_NOMEM));
        return 1;
    }
    for (size_t i = 0; i < ntr; i++) {
        tr[i].path = argv[1 + i];
        for (size_t k = 0; k < NOUTPUTS; k++)
            if (paths[k] && strcmp(paths[k], "-") != 0 && same_file(paths[k], tr[i].path)) {
                free(tr);
                return gmp_cli_usage_error(cmd, "--%s would overwrite the input %s",
                                           outputs[k].option, argv[1 + i]);
            }
    }
    gmp_cli_input *ins = NULL;
    if (gmp_cli_inputs_open(cmd->name, argv + 1, ntr, &ins)) {
        free(tr);
        return 1;
    }
    for (size_t i = 0; i < ntr; i++)
        tr[i].in = &ins[i];
    if (read_headers(cmd, tr, ntr) != 0) {
        gmp_cli_inputs_close(ins, ntr);
        free(tr);
        return 1;
    }

    /* Every output file opened before any work. */
    size_t nof = 0;
    for (size_t i = 0; i < NOUTPUTS; i++) {
        if (!paths[i])
            continue;
        out_file *o = &of[nof++];
        o->def = &outputs[i];
        o->path = paths[i];
        o->f = strcmp(paths[i], "-") == 0 ? stdout : fopen(paths[i], "w");
        if (!o->f) {
            fprintf(stderr, "gpumemprof %s: --%s %s: %s\n", cmd->name, outputs[i].option, paths[i],
                    strerror(errno));
            abandon(of, nof);
            gmp_cli_inputs_close(ins, ntr);
            free(tr);
            return 1;
        }
    }

    /* Times: from the start of the earliest trace, on the wall clock when every trace has it. */
    uint64_t wall0 = UINT64_MAX;
    int walls = 1;
    for (size_t i = 0; i < ntr; i++) {
        if (!tr[i].start_wall_ns || !tr[i].start_trace_ns)
            walls = 0;
        else if (tr[i].start_wall_ns < wall0)
            wall0 = tr[i].start_wall_ns;
    }
    char title[512];
    size_t tl = 0;
    title[0] = '\0';
    for (size_t i = 0; i < ntr && tl + 1 < sizeof title; i++) {
        const char *b = strrchr(tr[i].path, '/');
        b = b ? b + 1 : tr[i].path;
        int k = snprintf(title + tl, sizeof title - tl, "%s%s", i ? " " : "", b);
        if (k < 0)
            break;
        tl += (size_t)k;
        if (tl >= sizeof title)
            tl = sizeof title - 1;
    }
    gmp_cli_symctx sym = {NULL, NULL, NULL, 0};
    gmp_cli_report_symbolizer_install(NULL); /* native frames of --report and --json */
    gmp_output_opts oo = {
        .exporter = "gpumemprof " GMP_VERSION_STRING,
        .title = title,
        .ntraces = ntr,
        .chrome_torch_compat = torch,
        .max_spans = max_spans,
        .symbolize = gmp_cli_symbolize_frame,
        .symbolize_ctx = &sym,
        .all_frames = all_frames,
    };
    for (size_t i = 0; i < nof; i++) {
        gmp_err e = of[i].def->fmt->start(&of[i].ctx, of[i].f, of[i].path, &oo);
        if (e == GMP_OK && of[i].def->fmt == &gmp_out_report && !static_html)
            e = gmp_out_report_set_view(of[i].ctx, &gmp_out_htmlview_fragment, &oo);
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, of[i].path, gmp_err_str(e));
            abandon(of, nof);
            gmp_cli_inputs_close(ins, ntr);
            free(tr);
            return 1;
        }
    }

    gmp_cli_progress pg;
    gmp_cli_progress_start(&pg, "convert", !no_progress, ntr);
    for (size_t i = 0; i < ntr; i++)
        pg.total_bytes += tr[i].bytes;

    int status = 0;
    for (size_t i = 0; i < ntr && !status; i++) {
        gmp_cli_symctx_reset(&sym); /* a fresh one per trace: a reader's address may be reused */
        gmp_reader *r = NULL;
        gmp_replay *rp = NULL;
        char omsg[512];
        gmp_err e = gmp_cli_input_reader(tr[i].in, &r, NULL, omsg, sizeof omsg);
        const char *msg = NULL;
        if (e != GMP_OK)
            msg = omsg;
        if (e == GMP_OK)
            e = gmp_replay_new(&rp, r, NULL);
        gmp_output_trace ot = {
            .path = tr[i].path,
            .index = i,
            .header = r ? gmp_reader_header(r) : NULL,
            .pid = tr[i].pid,
            .label = tr[i].label,
            .t0_ns = tr[i].start_trace_ns,
            .offset_ns = walls ? (int64_t)(tr[i].start_wall_ns - wall0) : 0,
        };
        for (size_t k = 0; k < nof && e == GMP_OK; k++)
            e = of[k].def->fmt->add_trace(of[k].ctx, rp, &ot);
        if (e == GMP_OK && pg.enabled) {
            pg.index = i;
            pg.r = r;
            e = gmp_replay_add(rp, &gmp_cli_progress_ops, &pg);
        }
        if (e == GMP_OK)
            e = gmp_replay_run(rp);
        gmp_cli_progress_clear(&pg);
        if (e != GMP_OK) {
            if (!msg)
                msg = rp ? gmp_replay_error(rp) : "";
            fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, tr[i].path,
                    msg && *msg ? msg : gmp_err_str(e));
            status = 1;
        } else {
            const gmp_replay_summary *s = gmp_replay_get_summary(rp);
            if (!s->complete)
                fprintf(stderr, "gpumemprof %s: warning: %s: %s\n", cmd->name, tr[i].path,
                        s->completeness);
        }
        pg.done_bytes += tr[i].bytes;
        gmp_replay_free(rp);
        gmp_reader_close(r);
    }
    gmp_cli_symctx_reset(&sym);
    gmp_cli_inputs_close(ins, ntr);
    if (status) {
        abandon(of, nof);
        free(tr);
        return 1;
    }
    for (size_t i = 0; i < nof; i++) {
        gmp_output_result res;
        memset(&res, 0, sizeof res);
        gmp_err e = of[i].def->fmt->finish(of[i].ctx, &res);
        of[i].ctx = NULL;
        int ce = of[i].f == stdout ? fflush(stdout) : fclose(of[i].f);
        of[i].f = NULL;
        if (e == GMP_OK && ce != 0)
            e = GMP_ERR_IO;
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, of[i].path,
                    res.error[0] ? res.error : gmp_err_str(e));
            status = 1;
        } else if (res.note[0]) {
            fprintf(stderr, "gpumemprof %s: note: %s: %s\n", cmd->name, of[i].path, res.note);
        }
    }
    if (status) /* no output is left behind when one failed */
        for (size_t i = 0; i < nof; i++)
            if (strcmp(of[i].path, "-") != 0)
                unlink(of[i].path);
    free(tr);
    return status;
}
