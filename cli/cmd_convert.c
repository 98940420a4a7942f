/* gpumemprof convert: turns traces into the files people open elsewhere (speedscope, Chrome trace /
 * Perfetto, ...). Each output format implements formats/replay/gmp_output.h; the table below lists
 * them (adding a format is one line there). Each trace is replayed once for every output together
 * (cli_replay.h); several traces (the ranks of one job) go into the same output files, one process
 * per trace. Everything that can fail early fails before any work: the traces are opened and their
 * headers checked, then every output file is opened for writing. See docs/convert.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_cmds.h"
#include "cli_input.h"
#include "cli_opts.h"
#include "cli_replay.h"
#include "gmp_export.h"
#include "cli_whatif.h"
#include "gmp_out_report.h"
#include "gmp_report.h"
#include "gmp_output.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_whatif.h"
#include "gmp_whatif_advice.h"
#include "cli_report_sym.h"

#define DEFAULT_MAX_SPANS 200000
#define WHATIF_MAX_INPUTS 8 /* --whatif: inputs shared (cli_input.c keeps 8) */

/* The outputs: --OPTION FILE writes FILE with the format. One line per format. */
static const struct conv_output {
    const char *option;
    const char *help;
    const gmp_output *fmt;
    void (*remove_dir)(const char *path); /* the output writes a directory: how to remove it */
} outputs[] = {
    {"speedscope", "speedscope JSON: flame graphs of memory by range and stack, ranges per thread",
     &gmp_out_speedscope, NULL},
    {"chrome",
     "Chrome trace JSON (Perfetto, chrome://tracing): counters (a long run's merged into 2048 "
     "time buckets keeping their extremes), ranges, allocations",
     &gmp_out_chrome, NULL},
    {"pytorch-snapshot", "PyTorch memory snapshot pickle (pytorch.org/memory_viz)",
     &gmp_out_pytorch, NULL},
    {"report", "report: text, Markdown or HTML by the extension (.txt, .md, .html)",
     &gmp_out_report, NULL},
    {"json", "report as JSON (schema gpumemprof-report/3)", &gmp_out_report_json, NULL},
    {"pprof", "pprof profile.proto, gzip: inuse_space/objects at the peak, alloc_* over the run",
     &gmp_out_pprof, NULL},
    {"html-view", "one offline HTML page: memory timeline (hover, zoom), breakdown at the peak",
     &gmp_out_htmlview, NULL},
    {"parquet",
     "Parquet tables in DIR (new or empty): allocations, stacks, frames, ranges, samples, "
     "summary; several inputs: DIR/rank=R/ (DuckDB, Spark, Dask; docs/fleet.md)",
     &gmp_out_parquet, gmp_out_parquet_remove},
};
#define NOUTPUTS (sizeof outputs / sizeof outputs[0])

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
           "  gpumemprof convert rank*.zst --parquet mem.parquet/\n"
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

typedef struct out_file {
    const struct conv_output *def;
    const char *path;
    FILE *f; /* NULL for an output that writes a directory */
    gmp_output_ctx *ctx;
    int started; /* a directory output's start succeeded (it has created the directory) */
} out_file;

static void abandon(out_file *of, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (of[i].ctx)
            of[i].def->fmt->discard(of[i].ctx);
        of[i].ctx = NULL;
        if (of[i].def->remove_dir && of[i].started)
            of[i].def->remove_dir(of[i].path);
        of[i].started = 0;
        if (of[i].f && of[i].f != stdout) {
            fclose(of[i].f);
            unlink(of[i].path);
        }
        of[i].f = NULL;
    }
}

/* One conversion: the outputs asked for, then what open_outputs opened. */
typedef struct convert_run {
    const gmp_cli_cmd_info *cmd;
    const char *const *paths; /* per entry of outputs[]: the file, or NULL */
    out_file of[NOUTPUTS];
    size_t nof;
    int static_html;
    gmp_output_opts oo;
    gmp_cli_symctx sym;
    char title[512];
} convert_run;

/* Every output file opened, and every output started, before any work. */
static int open_outputs(void *ctx, gmp_cli_trace *tr, size_t ntr)
{
    convert_run *C = ctx;
    for (size_t i = 0; i < NOUTPUTS; i++) {
        if (!C->paths[i])
            continue;
        out_file *o = &C->of[C->nof++];
        o->def = &outputs[i];
        o->path = C->paths[i];
        if (outputs[i].remove_dir)
            continue; /* its start creates the directory */
        o->f = strcmp(C->paths[i], "-") == 0 ? stdout : fopen(C->paths[i], "w");
        if (!o->f) {
            fprintf(stderr, "gpumemprof %s: --%s %s: %s\n", C->cmd->name, outputs[i].option,
                    C->paths[i], strerror(errno));
            return 1;
        }
    }
    size_t tl = 0;
    C->title[0] = '\0';
    for (size_t i = 0; i < ntr && tl + 1 < sizeof C->title; i++) {
        const char *b = strrchr(tr[i].path, '/');
        b = b ? b + 1 : tr[i].path;
        int k = snprintf(C->title + tl, sizeof C->title - tl, "%s%s", i ? " " : "", b);
        if (k < 0)
            break;
        tl += (size_t)k;
        if (tl >= sizeof C->title)
            tl = sizeof C->title - 1;
    }
    gmp_cli_report_symbolizer_install(NULL); /* native frames of --report and --json */
    C->oo.title = C->title;
    C->oo.ntraces = ntr;
    C->oo.symbolize = gmp_cli_symbolize_frame;
    C->oo.symbolize_ctx = &C->sym;
    for (size_t i = 0; i < C->nof; i++) {
        out_file *o = &C->of[i];
        gmp_err e = o->def->fmt->start(&o->ctx, o->f, o->path, &C->oo);
        o->started = e == GMP_OK;
        if (e == GMP_ERR_EXISTS && o->def->remove_dir) {
            fprintf(stderr,
                    "gpumemprof %s: --%s %s: exists and is not an empty directory (the tables "
                    "of two exports are never mixed)\n",
                    C->cmd->name, o->def->option, o->path);
            return 1;
        }
        if (e == GMP_OK && o->def->fmt == &gmp_out_report && !C->static_html)
            e = gmp_out_report_set_view(o->ctx, &gmp_out_htmlview_fragment, &C->oo);
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", C->cmd->name, o->path, gmp_err_str(e));
            return 1;
        }
    }
    return 0;
}

static gmp_err attach(void *ctx, gmp_cli_trace *t)
{
    convert_run *C = ctx;
    gmp_cli_symctx_reset(&C->sym); /* a fresh one per trace: a reader's address may be reused */
    gmp_output_trace ot = {
        .path = t->path,
        .index = t->index,
        .header = t->header,
        .pid = t->pid,
        .label = t->label,
        .t0_ns = t->header->start_trace_ns,
        .offset_ns = t->offset_ns,
    };
    gmp_err e = GMP_OK;
    for (size_t k = 0; k < C->nof && e == GMP_OK; k++)
        e = C->of[k].def->fmt->add_trace(C->of[k].ctx, t->replay, &ot);
    return e;
}

/* A report output's trace that ran out of memory gets the what-if `report` gives it
 * (cli_whatif.h): --report and --json write what `report` writes. */
static gmp_err replayed(void *ctx, gmp_cli_trace *t, char *msg, size_t msglen)
{
    convert_run *C = ctx;
    (void)msg;
    (void)msglen;
    for (size_t k = 0; k < C->nof; k++) {
        gmp_report_trace *rt = gmp_out_report_last_trace(C->of[k].def->fmt, C->of[k].ctx);
        if (rt)
            gmp_cli_whatif_report(rt, t);
    }
    return GMP_OK;
}

/* Finishes every output (the inputs are closed); after a failure none is left behind. */
static int finish(void *ctx, int status)
{
    convert_run *C = ctx;
    gmp_cli_symctx_reset(&C->sym);
    if (status) {
        abandon(C->of, C->nof);
        return 1;
    }
    for (size_t i = 0; i < C->nof; i++) {
        out_file *o = &C->of[i];
        gmp_output_result res;
        memset(&res, 0, sizeof res);
        gmp_err e = o->def->fmt->finish(o->ctx, &res);
        o->ctx = NULL;
        int ce = !o->f ? 0 : o->f == stdout ? fflush(stdout) : fclose(o->f);
        o->f = NULL;
        if (e == GMP_OK && ce != 0)
            e = GMP_ERR_IO;
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", C->cmd->name, o->path,
                    res.error[0] ? res.error : gmp_err_str(e));
            status = 1;
        } else if (res.note[0]) {
            fprintf(stderr, "gpumemprof %s: note: %s: %s\n", C->cmd->name, o->path, res.note);
        }
    }
    if (status) { /* no output is left behind when one failed */
        for (size_t i = 0; i < C->nof; i++) {
            if (C->of[i].def->remove_dir)
                C->of[i].def->remove_dir(C->of[i].path);
            else if (strcmp(C->of[i].path, "-") != 0)
                unlink(C->of[i].path);
        }
    }
    return status;
}

/* An output asked for twice would keep only its last file: refused (before the parser, which
 * keeps the last value, sees them). Returns GMP_CLI_GO or the exit status. */
static int outputs_once(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *first[NOUTPUTS] = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (a[0] != '-' || a[1] != '-')
            continue;
        for (size_t k = 0; k < NOUTPUTS; k++) {
            size_t l = strlen(outputs[k].option);
            if (strncmp(a + 2, outputs[k].option, l) != 0 || (a[2 + l] && a[2 + l] != '='))
                continue;
            const char *v = a[2 + l] == '=' ? a + 3 + l : i + 1 < argc ? argv[++i] : "";
            if (first[k])
                return gmp_cli_usage_error(cmd,
                                           "--%s given twice (%s, %s): each output is written "
                                           "to one file",
                                           outputs[k].option, first[k], v);
            first[k] = v;
        }
    }
    return GMP_CLI_GO;
}

int gmp_cmd_convert(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *paths[NOUTPUTS] = {0};
    int torch = 0, no_progress = 0, all_frames = 0, static_html = 0;
    uint64_t max_spans = DEFAULT_MAX_SPANS;
    const char *whatif_s = NULL;
    gmp_cli_opt opts[NOUTPUTS + 7];
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
    opts[no++] = (gmp_cli_opt){"whatif",
                               0,
                               GMP_CLI_STRING,
                               &whatif_s,
                               "CONF",
                               "HTML view: the reserve PyTorch's allocator would have had under "
                               "this PYTORCH_CUDA_ALLOC_CONF beside the recorded one",
                               0};
    opts[no] = (gmp_cli_opt){NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0};
    for (size_t i = 0; i < NOUTPUTS; i++) {
        opts[i].help = "write this output to FILE (see above; - is stdout)";
        if (outputs[i].remove_dir) {
            opts[i].metavar = "DIR";
            opts[i].help = "write these tables into DIR (see above)";
        }
    }

    int npos = 0;
    int rc = outputs_once(cmd, argc, argv);
    if (rc == GMP_CLI_GO)
        rc = gmp_cli_parse_or_help(cmd, opts, print_help, argc, argv, &npos);
    if (rc != GMP_CLI_GO)
        return rc;
    if (npos == 0)
        return gmp_cli_usage_error(cmd, "missing FILE");
    size_t nout = 0, nstdout = 0;
    for (size_t i = 0; i < NOUTPUTS; i++) {
        if (!paths[i])
            continue;
        if (!*paths[i])
            return gmp_cli_usage_error(cmd, "--%s: empty file name", outputs[i].option);
        nout++;
        if (outputs[i].remove_dir && strcmp(paths[i], "-") == 0)
            return gmp_cli_usage_error(cmd, "--%s writes a directory, not stdout",
                                       outputs[i].option);
        nstdout += strcmp(paths[i], "-") == 0;
        for (size_t j = 0; j < i; j++)
            if (paths[j] && strcmp(paths[j], "-") != 0 && same_file(paths[i], paths[j]))
                return gmp_cli_usage_error(cmd, "--%s and --%s name the same file",
                                           outputs[j].option, outputs[i].option);
    }
    if (!nout)
        return gmp_cli_usage_error(cmd,
                                   "no output asked for (--speedscope, --chrome, "
                                   "--pytorch-snapshot, --report, --json, --pprof or --html-view "
                                   "FILE, --parquet DIR)");
    if (nstdout > 1)
        return gmp_cli_usage_error(cmd, "only one output can go to stdout (-)");

    for (int i = 1; i <= npos; i++)
        for (size_t k = 0; k < NOUTPUTS; k++)
            if (paths[k] && strcmp(paths[k], "-") != 0 && same_file(paths[k], argv[i]))
                return gmp_cli_usage_error(cmd, "--%s would overwrite the input %s",
                                           outputs[k].option, argv[i]);

    gmp_cca_config wcfg;
    if (whatif_s) {
        char err[256];
        size_t hv = 0;
        while (hv < NOUTPUTS && outputs[hv].fmt != &gmp_out_htmlview)
            hv++;
        if (hv == NOUTPUTS || !paths[hv])
            return gmp_cli_usage_error(cmd, "--whatif: only with --html-view");
        if (gmp_whatif_parse_conf(whatif_s, &wcfg, err, sizeof err) != 0)
            return gmp_cli_usage_error(cmd, "--whatif %s: %s", whatif_s, err);
        gmp_cca *probe = gmp_cca_create(&wcfg);
        if (!probe)
            return gmp_cli_usage_error(cmd, "--whatif %s: not modelled yet", whatif_s);
        gmp_cca_destroy(probe);
        if ((size_t)npos > WHATIF_MAX_INPUTS)
            return gmp_cli_usage_error(cmd, "--whatif: at most %d recordings", WHATIF_MAX_INPUTS);
    }
    /* --whatif: each input is opened here (imported once), replayed through the model, and
     * shared, so that the conversion reads the same import */
    gmp_cli_input win[WHATIF_MAX_INPUTS];
    gmp_whatif_reserve wres[WHATIF_MAX_INPUTS];
    const gmp_whatif_reserve *wptr[WHATIF_MAX_INPUTS];
    size_t nwin = 0;
    for (size_t i = 0; whatif_s && i < (size_t)npos; i++) {
        char msg[1024];
        const char *path = argv[1 + i];
        gmp_err e = gmp_cli_input_open(&win[i], path, msg, sizeof msg);
        if (e == GMP_OK) {
            nwin++;
            e = gmp_whatif_reserve_of(win[i].trace_path[0] ? win[i].trace_path : path, &wcfg, 0,
                                      &wres[i], msg, sizeof msg);
        }
        if (e != GMP_OK) {
            fprintf(stderr, "gpumemprof %s: %s: %s\n", cmd->name, path, msg);
            for (size_t k = 0; k < i; k++)
                gmp_whatif_reserve_free(&wres[k]);
            for (size_t k = 0; k < nwin; k++)
                gmp_cli_input_close(&win[k]);
            return 1;
        }
        wptr[i] = &wres[i];
        gmp_cli_input_share(&win[i]);
    }

    convert_run C;
    memset(&C, 0, sizeof C);
    C.cmd = cmd;
    C.paths = paths;
    C.static_html = static_html;
    C.oo = (gmp_output_opts){
        .exporter = "gpumemprof " GMP_VERSION_STRING,
        .chrome_torch_compat = torch,
        .max_spans = max_spans,
        .all_frames = all_frames,
        .whatif = whatif_s ? wptr : NULL,
        .whatif_name = whatif_s,
    };
    gmp_cli_replay_spec spec = {
        .cmd = cmd->name,
        .progress = !no_progress,
        .warn_incomplete = 1,
        .ctx = &C,
        .open_outputs = open_outputs,
        .attach = attach,
        .replayed = replayed,
        .finish = finish,
    };
    rc = gmp_cli_replay_all(argv + 1, (size_t)npos, &spec);
    for (size_t k = 0; k < nwin; k++) {
        gmp_cli_input_unshare(&win[k]);
        gmp_cli_input_close(&win[k]);
        gmp_whatif_reserve_free(&wres[k]);
    }
    return rc;
}
