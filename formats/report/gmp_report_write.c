/* gmp_report_write: a report in one format: the document is built once from the model and the
 * view (gmp_report_build.h) and written by that format's renderer (gmp_render.h). */
#include <stdio.h>
#include <string.h>

#include "gmp_render.h"
#include "gmp_report.h"
#include "gmp_report_build.h"

static gmp_err write_with(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v,
                          gmp_render_fn render, const char *timeline_html)
{
    gmp_doc *d = gmp_report_build(doc, v);
    if (!d)
        return GMP_ERR_NOMEM;
    /* the page's title: "gpumemprof report: PATH" for one trace (the document's own title is
     * "gpumemprof report") */
    char title[512] = "";
    if (doc->title[0]) {
        snprintf(title, sizeof title, "%s", doc->title);
    } else if (doc->ntraces == 1) {
        gmp_str p = gmp_report_str(doc->traces[0], doc->traces[0]->path);
        snprintf(title, sizeof title, "gpumemprof report: %.*s", (int)p.len, p.ptr);
    }
    gmp_render_opts o = {
        .color = v->color, .title = title[0] ? title : NULL, .timeline_html = timeline_html};
    gmp_err e = render(d, f, &o);
    gmp_doc_free(d);
    if (e == GMP_OK && ferror(f))
        e = GMP_ERR_IO;
    return e;
}

gmp_err gmp_report_write_text(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v)
{
    return write_with(doc, f, v, gmp_render_text, NULL);
}

gmp_err gmp_report_write_md(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v)
{
    return write_with(doc, f, v, gmp_render_md, NULL);
}

gmp_err gmp_report_write_html(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v)
{
    return write_with(doc, f, v, gmp_render_html, NULL);
}

gmp_err gmp_report_write_html_timeline(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v,
                                       const char *timeline_html)
{
    return write_with(doc, f, v, gmp_render_html, timeline_html);
}

gmp_err gmp_report_write_json(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v)
{
    return write_with(doc, f, v, gmp_render_json, NULL);
}

gmp_report_writer gmp_report_writer_by_name(const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "text") == 0 || strcmp(name, "txt") == 0)
        return gmp_report_write_text;
    if (strcmp(name, "markdown") == 0 || strcmp(name, "md") == 0)
        return gmp_report_write_md;
    if (strcmp(name, "html") == 0)
        return gmp_report_write_html;
    if (strcmp(name, "json") == 0)
        return gmp_report_write_json;
    return NULL;
}
