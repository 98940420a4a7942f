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
    /* HTML: markup placed once before the first "timeline" SERIES (the interactive view, composed
     * by cli/cmd_report.c); NULL: none. The static SVGs stay (lanes, marks; no script needed). */
    const char *timeline_html;
} gmp_render_opts;

gmp_err gmp_render_text(const gmp_doc *d, FILE *f, const gmp_render_opts *o);
gmp_err gmp_render_md(const gmp_doc *d, FILE *f, const gmp_render_opts *o);
gmp_err gmp_render_html(const gmp_doc *d, FILE *f, const gmp_render_opts *o);
gmp_err gmp_render_json(const gmp_doc *d, FILE *f, const gmp_render_opts *o);

typedef gmp_err (*gmp_render_fn)(const gmp_doc *d, FILE *f, const gmp_render_opts *o);
/* "text", "markdown" (or "md"), "html", "json"; NULL when unknown. */
gmp_render_fn gmp_render_by_name(const char *name);

/* ---- for renderers (gmp_render.c): rules every markup applies the same way ---- */

/* Most block characters in a sparkline. */
#define GMP_RENDER_SPARK 60
/* Non-zero for the types written as numbers (right-aligned in a table). */
int gmp_render_numeric(gmp_doc_type t);
/* Non-zero when v writes nothing at all (NONE, empty LIT, STR empty with no `none`, no frames). */
int gmp_render_val_empty(const gmp_doc_val *v);

/* The items a markup shows of a stack, from frame *i on: the next frame (returned, *folded = 0),
 * or a run of internal frames (NULL returned, *folded = how many: shown as "+N internal frames",
 * gmp_render_folded_text). Advances *i; call while *i < s->n. The run a stack begins with (the
 * recorder, the allocator) is not an item of its own: the first frame shown is the first that is
 * not folded, and *inside says how many were folded inside it (0 otherwise): a stack starts at
 * the user's frame. */
const gmp_doc_frame *gmp_render_stack_next(const gmp_doc_stack *s, size_t *i, size_t *folded,
                                           size_t *inside);
/* The frames folded inside the first frame shown that are shown to tell the stack apart from
 * another (gmp_frames_apart: internal 2), nearest the first frame first: start with *j = the
 * first frame's index (*i - 1 after gmp_render_stack_next returned it), call until NULL. Markups
 * write them after the count: " [+22 inside, via at::_ops::neg::call]". */
const gmp_doc_frame *gmp_render_via(const gmp_doc_stack *s, size_t *j);
/* "+1 internal frame", "+8 internal frames" into buf (n >= 48). */
const char *gmp_render_folded_text(size_t folded, char *buf, size_t n);
/* " [+25 inside]" after the first frame shown (nothing when inside is 0), into buf (n >= 48). */
const char *gmp_render_inside_text(size_t inside, char *buf, size_t n);
/* The first child of b that is shown (not flagged GMP_DOC_DATA); NULL when none. */
const gmp_doc_block *gmp_render_first(const gmp_doc_block *b);
/* The table whose "(top N of M)" goes on section's heading: its first block shown, when that is a
 * TABLE without a caption that shows fewer rows than there were (total > nrows); else NULL. A table
 * cut by --top that is not that one says it under itself (or after its caption). */
const gmp_doc_block *gmp_render_heading_table(const gmp_doc_block *section);
/* Column col of SERIES s as a line of block characters (" ▁▂▃▄▅▆▇█", UTF-8, NUL-terminated in
 * buf): at most GMP_RENDER_SPARK characters, each the largest of its share of the points, scaled
 * to the column's largest value (*max; 0: nothing drawn, returns 0). Returns the bytes written. */
size_t gmp_render_spark(const gmp_doc_block *s, size_t col, char *buf, size_t cap, uint64_t *max);

#endif
