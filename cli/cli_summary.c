/* cli_summary: the summary `gpumemprof run` prints on stderr when the command ends (cli_summary.h),
 * built as a report document (formats/report/gmp_doc.h) and written by the text renderer: per
 * trace a section headed "gpumemprof: PATH (pid N: COMMAND)" with the trace's notices, one line per
 * device with the ranges that held most of its peak under it, OOMs, lost events and completeness;
 * then the commands to run next. Colours only on a terminal without NO_COLOR. Tests parse these
 * lines (tests/agent, tests/reliability): keep their wording. */
#include "cli_summary.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_report_ranks.h"
#include "gmp_doc.h"
#include "gmp_reader.h"
#include "gmp_render.h"
#include "gmp_replay.h"
#include "gmp_report_ranks.h"

typedef struct range_total {
    uint32_t range;
    uint64_t bytes;
} range_total;

static int by_bytes_desc(const void *a, const void *b)
{
    const range_total *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* A copy of s (a path, a message) in the document, as a trace string. */
static gmp_doc_val str(gmp_doc *d, const char *s)
{
    return gmp_dv_str(gmp_doc_strdup(d, s, strlen(s)), NULL);
}

/* The ranges that held most of a device's memory at its peak: a table under the device's line. */
static void top_ranges(gmp_doc *d, gmp_doc_block *parent, gmp_replay *rp, int32_t dev)
{
    static const gmp_doc_col cols[] = {{"bytes", NULL, GMP_DOC_BYTES, 0},
                                       {"range", NULL, GMP_DOC_STR, 0}};
    size_t ns = gmp_replay_site_count(rp);
    range_total *t = calloc(ns ? ns : 1, sizeof *t);
    size_t nt = 0;
    if (!t)
        return;
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(rp, i);
        if (s->device != dev || !s->peak_bytes)
            continue;
        size_t j = 0;
        while (j < nt && t[j].range != s->range)
            j++;
        if (j == nt)
            t[nt++] = (range_total){s->range, 0};
        t[j].bytes += s->peak_bytes;
    }
    qsort(t, nt, sizeof *t, by_bytes_desc);
    gmp_reader *r = gmp_replay_reader(rp);
    gmp_doc_block *tab = gmp_doc_table(d, parent, NULL, cols, 2);
    gmp_doc_linef(d, &tab->title, "at the peak:");
    for (size_t i = 0; i < nt && i < 3; i++) {
        char path[512] = "";
        if (t[i].range)
            gmp_reader_range_path(r, t[i].range, path, sizeof path);
        gmp_doc_val *row = gmp_doc_row(d, tab);
        row[0] = gmp_dv_bytes(t[i].bytes);
        row[1] = gmp_dv_str(gmp_doc_strdup(d, path, strlen(path)), "(no range)");
    }
    free(t);
}

/* The command line of a trace's header: arguments (NUL-separated) and other control bytes as
 * spaces, at most 199 bytes. */
static gmp_doc_val cmdline(gmp_doc *d, gmp_str c)
{
    size_t n = c.len < 199 ? c.len : 199;
    gmp_str s = gmp_doc_strdup(d, c.ptr ? c.ptr : "", c.ptr ? n : 0);
    for (size_t i = 0; i < s.len; i++)
        if ((unsigned char)s.ptr[i] < 0x20)
            ((char *)s.ptr)[i] = ' ';
    return gmp_dv_str(s, NULL);
}

/* A trace's section. Returns 1 when it recorded something worth a report (not a trace the agent
 * could only write its error into). */
static int one_trace(gmp_doc *d, const char *path)
{
    gmp_doc_block *root = gmp_doc_root(d);
    gmp_reader *r = NULL;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK) {
        gmp_doc_notice(d, root, NULL, GMP_DOC_PROBLEM, "gpumemprof: %v: %v", str(d, path),
                       str(d, gmp_reader_open_error()));
        return 0;
    }
    gmp_replay *rp = NULL;
    if (gmp_replay_new(&rp, r, NULL) != GMP_OK) {
        gmp_reader_close(r);
        return 0;
    }
    gmp_err rc = gmp_replay_run(rp);
    const gmp_rec_header *h = gmp_reader_header(r);
    gmp_doc_block *sec =
        gmp_doc_section(d, root, NULL, 0, "gpumemprof: %v (pid %v: %v)", str(d, path),
                        gmp_dv_count(h->pid), cmdline(d, h->cmdline));
    if (rc != GMP_OK) {
        gmp_doc_notice(d, sec, NULL, GMP_DOC_PROBLEM, "cannot read it: %v",
                       str(d, gmp_replay_error(rp)));
        gmp_replay_free(rp);
        gmp_reader_close(r);
        return 0;
    }
    const gmp_replay_summary *s = gmp_replay_get_summary(rp);
    int fatal = 0;
    for (size_t i = 0; i < gmp_replay_notice_count(rp); i++) {
        uint32_t sev = 0;
        const char *msg = gmp_replay_notice_at(rp, i, &sev, NULL);
        int err = sev >= GMP_NOTICE_ERROR;
        fatal |= err;
        gmp_doc_notice(d, sec, NULL, err ? GMP_DOC_PROBLEM : GMP_DOC_INFO, "%v: %v",
                       gmp_dv_lit(err ? "error" : "note"), str(d, msg));
    }
    int shown = 0;
    for (size_t i = 0; i < gmp_replay_device_count(rp); i++) {
        const gmp_replay_device *dv = gmp_replay_device_at(rp, i);
        if (dv->id < 0)
            continue;
        /* static __device__ memory lives as long as its module, which CUDA unloads after the
         * trace ends: not a leak */
        const gmp_replay_kind_stats *st = &dv->kind[GMP_MEM_STATIC];
        uint64_t leaked = dv->allocated - st->live_bytes;
        uint64_t leaked_n = dv->live_count - st->live_count;
        uint64_t at = dv->peak_time_ns >= h->start_trace_ns ? dv->peak_time_ns : h->start_trace_ns;
        gmp_doc_block *line =
            gmp_doc_notice(d, sec, NULL, GMP_DOC_INFO, "device %v", gmp_dv_device(dv->id));
        if (dv->def)
            gmp_doc_linef(
                d, &line->title, " (%v)",
                gmp_dv_str(gmp_doc_strdup(d, dv->def->name.ptr, dv->def->name.len), NULL));
        gmp_doc_linef(d, &line->title,
                      ": peak allocated %v at %v, peak reserved %v, %v allocations, leaked %v in "
                      "%v",
                      gmp_dv_f(gmp_dv_bytes(dv->peak_allocated), GMP_DOC_STRONG),
                      gmp_dv_time(at, h->start_trace_ns), gmp_dv_bytes(dv->peak_reserved),
                      gmp_dv_count(dv->allocs),
                      gmp_dv_f(gmp_dv_bytes(leaked), leaked ? GMP_DOC_WARN : 0),
                      gmp_dv_count(leaked_n));
        if (dv->peak_allocated)
            top_ranges(d, line, rp, dv->id);
        shown++;
    }
    int useful = !(fatal && !s->alloc_records);
    if (!useful)
        gmp_doc_notice(d, sec, NULL, GMP_DOC_PROBLEM,
                       "nothing was recorded (see the error above); the program ran unprofiled");
    else if (!shown)
        gmp_doc_notice(d, sec, NULL, GMP_DOC_INFO, "no device memory was allocated");
    if (s->ooms)
        gmp_doc_notice(d, sec, NULL, GMP_DOC_PROBLEM, "out of memory: %v time%v",
                       gmp_dv_count(s->ooms), gmp_dv_lit(s->ooms == 1 ? "" : "s"));
    if (s->lost_events)
        gmp_doc_notice(d, sec, NULL, GMP_DOC_WARNING, "lost events: %v",
                       gmp_dv_count(s->lost_events));
    if (!s->complete)
        gmp_doc_notice(d, sec, NULL, GMP_DOC_WARNING, "%v", str(d, s->completeness));
    gmp_replay_free(rp);
    gmp_reader_close(r);
    return useful;
}

/* s[0..n) followed by suffix as one shell word (single-quoted when it needs quoting). */
static void shell_word(FILE *f, const char *s, size_t n, const char *suffix)
{
    int plain = n > 0;
    for (size_t i = 0; i < n && plain; i++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-+=:,@%",
                       s[i]) != NULL &&
                s[i] != '\0';
    if (plain) {
        fwrite(s, 1, n, f);
        fputs(suffix, f);
        return;
    }
    fputc('\'', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'')
            fputs("'\\''", f);
        else
            fputc(s[i], f);
    }
    fputs(suffix, f);
    fputc('\'', f);
}

/* The processes whose agent could not record them (the run log's "lost" lines), one line each. */
static size_t lost_lines(gmp_doc *d, const gmp_cli_run_proc *procs, size_t nprocs)
{
    gmp_doc_block *root = gmp_doc_root(d);
    size_t nlost = 0;
    for (size_t i = 0; i < nprocs; i++) {
        const gmp_cli_run_proc *p = &procs[i];
        if (p->recorded)
            continue;
        nlost++;
        gmp_doc_notice(d, root, NULL, GMP_DOC_PROBLEM,
                       "gpumemprof: pid %v (%v) used CUDA and was not recorded: %v",
                       gmp_dv_count((uint64_t)p->pid),
                       cmdline(d, (gmp_str){p->cmd, (uint32_t)strlen(p->cmd)}), str(d, p->what));
    }
    return nlost;
}

/* The summary as a document. many: more traces than the cross-rank view's threshold: a trace
 * that recorded something gets no section (the short cross-rank view, printed before, stands for
 * them), one that did not keeps its section saying why; useful_out: those that did. */
static gmp_doc *summary_doc(const char *const *traces, size_t n, const gmp_cli_run_proc *procs,
                            size_t nprocs, int started, int many, const char ***useful_out,
                            size_t *nuseful_out)
{
    gmp_doc *d = gmp_doc_new();
    if (!d)
        return NULL;
    gmp_doc_block *root = gmp_doc_root(d);
    /* the traces worth a report: the "next" commands name them all, and only them */
    const char **useful = calloc(n ? n : 1, sizeof *useful);
    if (!useful) {
        gmp_doc_free(d);
        return NULL;
    }
    size_t nu = 0;
    for (size_t i = 0; i < n; i++) {
        gmp_doc *scratch = many ? gmp_doc_new() : NULL;
        if (one_trace(scratch ? scratch : d, traces[i]))
            useful[nu++] = traces[i];
        else if (scratch) /* its section says why nothing was recorded */
            one_trace(d, traces[i]);
        gmp_doc_free(scratch);
    }
    size_t nlost = lost_lines(d, procs, nprocs);
    if (n == 0 && nlost == 0 && started)
        gmp_doc_notice(d, root, NULL, GMP_DOC_WARNING,
                       "gpumemprof: no trace was written: no process of the command initialized "
                       "CUDA (or the agent could not start; see its messages above)");
    if (nu == 0) {
        free(useful);
        return d;
    }
    /* outputs named after the first trace without ".zst" (and, for several, without its pid or
     * its suffix) */
    const char *t0 = useful[0];
    size_t bl = strlen(t0);
    if (bl > 4 && strcmp(t0 + bl - 4, ".zst") == 0)
        bl -= 4;
    if (nu > 1) {
        size_t k = bl;
        while (k > 0 && t0[k - 1] >= '0' && t0[k - 1] <= '9')
            k--;
        if (k < bl && k > 1 && t0[k - 1] == '.' && t0[k - 2] != '/')
            bl = k - 1;
    }
    char *cmd = NULL;
    size_t cl = 0;
    FILE *f = open_memstream(&cmd, &cl);
    if (f) {
        fputs("gpumemprof convert", f);
        for (size_t i = 0; i < nu; i++) {
            fputc(' ', f);
            shell_word(f, useful[i], strlen(useful[i]), "");
        }
        fputs(" --speedscope ", f);
        shell_word(f, t0, bl, ".speedscope.json");
        fputs(" --chrome ", f);
        shell_word(f, t0, bl, ".chrome.json");
        fputc(0, f);
        fputs("gpumemprof report", f);
        for (size_t i = 0; i < nu; i++) {
            fputc(' ', f);
            shell_word(f, useful[i], strlen(useful[i]), "");
        }
    }
    if (useful_out) {
        *useful_out = useful;
        *nuseful_out = nu;
    } else {
        free(useful);
    }
    if (!f || fclose(f) != 0 || !cmd) {
        free(cmd);
        gmp_doc_free(d);
        return NULL;
    }
    size_t l1 = strlen(cmd);
    gmp_doc_notice(d, root, NULL, GMP_DOC_INFO, "gpumemprof: next: %v",
                   gmp_dv_f(gmp_dv_str(gmp_doc_strdup(d, cmd, l1), NULL), GMP_DOC_CODE));
    gmp_doc_notice(
        d, root, NULL, GMP_DOC_INFO, "gpumemprof:   or: %v",
        gmp_dv_f(gmp_dv_str(gmp_doc_strdup(d, cmd + l1 + 1, cl - l1 - 1), NULL), GMP_DOC_CODE));
    free(cmd);
    return d;
}

void gmp_cli_print_run_summary(FILE *f, const char *const *traces, size_t n,
                               const gmp_cli_run_proc *procs, size_t nprocs, int started)
{
    /* many processes (the ranks of a job): the cross-rank view's short form instead of a block
     * per process */
    int many = n > GMP_RANKS_AUTO_ABOVE;
    const char **useful = NULL;
    size_t nu = 0;
    gmp_doc *d = summary_doc(traces, n, procs, nprocs, started, many, many ? &useful : NULL, &nu);
    if (!d || gmp_doc_error(d) != GMP_OK) {
        fprintf(f, "gpumemprof: the summary: %s\n", gmp_err_str(GMP_ERR_NOMEM));
        gmp_doc_free(d);
        free(useful);
        return;
    }
    if (many && nu) {
        gmp_cli_ranks_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.cmd = "run";
        ro.format = "text";
        ro.color = isatty(fileno(f)) && !getenv("NO_COLOR");
        ro.view.top = 10;
        ro.view.device = INT64_MIN;
        ro.out = f;
        ro.brief = 1;
        fprintf(f, "gpumemprof: %zu processes recorded: the ranks side by side\n", nu);
        gmp_cli_report_ranks((char **)useful, nu, &ro);
    }
    free(useful);
    gmp_render_opts o = {.color = isatty(fileno(f)) && !getenv("NO_COLOR"), .title = NULL};
    gmp_render_text(d, f, &o);
    gmp_doc_free(d);
}
