/* gmp_render: the renderers of the report document (gmp_doc.h), one file per format:
 * gmp_render_text.c (a terminal, ANSI colours on request), gmp_render_md.c (GitHub-flavoured
 * Markdown), gmp_render_html.c (one self-contained page with plots) and gmp_render_json.c (for
 * programs; docs/report.md has the schema). A renderer walks the blocks and knows nothing of what
 * they are about; what a report says is decided by its builder. Each returns GMP_ERR_IO when the
 * stream reports an error. */
#ifndef GMP_RENDER_H
#define GMP_RENDER_H

#include <stdio.h>

#include "gmp_doc.h"
#include "gmp_error.h"

typedef struct gmp_render_opts {
    int color;         /* text: ANSI colours (bold headings, yellow warnings, red problems) */
    const char *title; /* HTML: the page's <title> (NULL: the first heading) */
} gmp_render_opts;

gmp_err gmp_render_text(const gmp_doc *d, FILE *f, const gmp_render_opts *o);
gmp_err gmp_render_md(const gmp_doc *d, FILE *f, const gmp_render_opts *o);
gmp_err gmp_render_html(const gmp_doc *d, FILE *f, const gmp_render_opts *o);
gmp_err gmp_render_json(const gmp_doc *d, FILE *f, const gmp_render_opts *o);

typedef gmp_err (*gmp_render_fn)(const gmp_doc *d, FILE *f, const gmp_render_opts *o);
/* "text", "markdown" (or "md"), "html", "json"; NULL when unknown. */
gmp_render_fn gmp_render_by_name(const char *name);

#endif
