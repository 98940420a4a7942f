/* gmp_out_report: the report as outputs of `gpumemprof convert` (formats/replay/gmp_output.h):
 * --report FILE (text, Markdown, HTML or JSON by FILE's extension: .txt, .md, .html, .json; text
 * otherwise) and --json FILE (the JSON report). The model (gmp_report.h) registers on each trace's
 * replay; the renderer writes the document at finish. An HTML report can be given a view
 * (gmp_out_report_set_view: cli/cmd_convert.c hands it the HTML view's fragment output, which
 * formats/report does not know): it runs into memory in the same replay pass, is finished first and
 * placed before the report's first timeline (gmp_report_write_html_timeline). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_out_report.h"
#include "gmp_output.h"
#include "gmp_report.h"

struct gmp_output_ctx {
    FILE *out;
    gmp_report_writer writer;
    gmp_report_doc *doc;
    gmp_report_view view;
    /* the view (gmp_out_report_set_view): its output, context and memory stream */
    const gmp_output *vfmt;
    gmp_output_ctx *vctx;
    FILE *vf;
    char *vbuf;
    size_t vlen;
};

static gmp_err start_as(gmp_output_ctx **ctx, FILE *out, gmp_report_writer writer,
                        const gmp_output_opts *opts)
{
    gmp_output_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return GMP_ERR_NOMEM;
    gmp_err e = gmp_report_doc_new(&c->doc, NULL);
    if (e != GMP_OK) {
        free(c);
        return e;
    }
    c->out = out;
    c->writer = writer;
    c->view.top = writer == gmp_report_write_json ? 0 : 10;
    c->view.device = INT64_MIN;
    c->view.all_frames = opts && opts->all_frames;
    *ctx = c;
    return GMP_OK;
}

static gmp_err start_report(gmp_output_ctx **ctx, FILE *out, const char *path,
                            const gmp_output_opts *opts)
{
    const char *fmt = gmp_report_format_for_path(path);
    gmp_report_writer w = gmp_report_writer_by_name(fmt ? fmt : "text");
    if (w == gmp_report_write_json) /* --report r.json: the JSON report too */
        w = gmp_report_write_json;
    return start_as(ctx, out, w, opts);
}

static gmp_err start_json(gmp_output_ctx **ctx, FILE *out, const char *path,
                          const gmp_output_opts *opts)
{
    return start_as(ctx, out, gmp_report_write_json, opts);
}

gmp_err gmp_out_report_set_view(gmp_output_ctx *c, const gmp_output *view,
                                const gmp_output_opts *opts)
{
    if (!c || !view || c->vfmt || c->writer != gmp_report_write_html)
        return GMP_OK; /* only an HTML report has a view, and one */
    c->vf = open_memstream(&c->vbuf, &c->vlen);
    if (!c->vf)
        return GMP_ERR_NOMEM;
    gmp_err e = view->start(&c->vctx, c->vf, NULL, opts);
    if (e != GMP_OK) {
        fclose(c->vf);
        free(c->vbuf);
        c->vf = NULL;
        c->vbuf = NULL;
        c->vctx = NULL;
        return e;
    }
    c->vfmt = view;
    return GMP_OK;
}

static gmp_err add_trace(gmp_output_ctx *c, gmp_replay *rp, const gmp_output_trace *t)
{
    gmp_err e = gmp_report_doc_add(c->doc, rp, t->path, t->label ? t->label : "");
    if (e == GMP_OK && c->vctx)
        e = c->vfmt->add_trace(c->vctx, rp, t);
    return e;
}

static void discard(gmp_output_ctx *c)
{
    if (!c)
        return;
    if (c->vctx)
        c->vfmt->discard(c->vctx);
    if (c->vf)
        fclose(c->vf);
    free(c->vbuf);
    gmp_report_doc_free(c->doc);
    free(c);
}

static gmp_err finish(gmp_output_ctx *c, gmp_output_result *res)
{
    gmp_err e = GMP_OK;
    if (c->vctx) { /* the view first: its markup goes into the report */
        gmp_output_ctx *v = c->vctx;
        c->vctx = NULL;
        e = c->vfmt->finish(v, res);
        int ce = fclose(c->vf);
        c->vf = NULL;
        if (e == GMP_OK && ce != 0)
            e = GMP_ERR_NOMEM;
        if (e != GMP_OK) {
            if (!res->error[0])
                snprintf(res->error, sizeof res->error, "cannot make the report's view");
            discard(c);
            return e;
        }
    }
    if (c->vbuf)
        e = gmp_report_write_html_timeline(c->doc, c->out, &c->view, c->vbuf);
    else
        e = c->writer(c->doc, c->out, &c->view);
    if (e == GMP_OK && (fflush(c->out) != 0 || ferror(c->out)))
        e = GMP_ERR_IO;
    if (e != GMP_OK)
        snprintf(res->error, sizeof res->error, "cannot write the report");
    discard(c);
    return e;
}

const gmp_output gmp_out_report = {"report", start_report, add_trace, finish, discard};
const gmp_output gmp_out_report_json = {"json", start_json, add_trace, finish, discard};

struct gmp_report_trace *gmp_out_report_last_trace(const gmp_output *fmt, gmp_output_ctx *c)
{
    if ((fmt != &gmp_out_report && fmt != &gmp_out_report_json) || !c || !c->doc ||
        !c->doc->ntraces)
        return NULL;
    return c->doc->traces[c->doc->ntraces - 1];
}
