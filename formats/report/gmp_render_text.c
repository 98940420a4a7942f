/* gmp_render_text: the report document (gmp_doc.h) for a terminal, with ANSI colours on request
 * (gmp_render_opts.color): headings bold; values and items flagged STRONG bold, WARN yellow, BAD
 * red; verdicts and notices by severity (PROBLEM red, WARNING yellow). Without colour not one
 * escape sequence is written, and with it every sequence is closed on its line (a reset only after
 * an opener). Trace strings (STR, frames) are printed as they are when valid UTF-8; control
 * characters, DEL, invalid bytes and the backslash appear as \xNN and \\, so a trace cannot move
 * the cursor, colour the terminal or break a line.
 *
 * Layout, the same for every document:
 *  - A section's heading is its title in bold, after a blank line (none at the very start),
 *    followed by ':' when its content follows it directly: no titled section below it, and its
 *    first block is not a key/value list (a trace or a device: a title over facts and
 *    sub-sections). Untitled sections write no heading and do not indent.
 *  - Headings of depth 1 and 2 (gmp_doc_depth: a trace; a device or a section of a trace)
 *    start at column 0, deeper ones at their parent's content; a section's content is indented 2
 *    from its heading.
 *  - "(top N of M)", when a table shows N of M rows: on the section's heading when the table is the
 *    section's first block and has no caption; after the caption when it has one; else on a line of
 *    its own under the table.
 *  - Key/value list: one line per item, labels padded to the longest label + 2 spaces; items and
 *    values flagged DATA are not shown.
 *  - Table: columns as wide as their widest cell or title, two spaces apart; numbers right-aligned,
 *    text left-aligned, the last column not padded; DATA columns not shown; a stack shows its 4
 *    innermost frames joined by " < "; a TAIL column's text its last 47 characters after "…";
 *    a table without rows writes only its caption.
 *  - Series: one sparkline per column flagged STRONG, after the caption ("over time" when none)
 *    padded as the labels of the key/value list before it, then "(column, 0 .. max)"; lanes and
 *    marks are not drawn.
 *  - Stack: its caption, then one frame a line.
 *  - Verdict: its line, its blocks indented 2 more. Notice: its line.
 *  - Blocks flagged DATA are not shown. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_escape.h"
#include "gmp_render.h"
#include "gmp_strbuf.h"

#define STACK_FRAMES 4
#define TAIL_COLS 48 /* columns a GMP_DOC_TAIL cell shows at most, "…" included */

/* A growing string (gmp_strbuf.h): a failed allocation is remembered and later writes do
 * nothing. */
typedef gmp_strbuf sb;

static void sb_pad(sb *b, size_t n)
{
    static const char sp[] = "                                ";
    for (; n > sizeof sp - 1; n -= sizeof sp - 1)
        gmp_strbuf_add(b, sp, sizeof sp - 1);
    gmp_strbuf_add(b, sp, n);
}

/* Columns s[0..n) takes on a terminal: one per UTF-8 character, none for our colour codes. */
static size_t width(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\033') {
            while (i < n && s[i] != 'm')
                i++;
            continue;
        }
        w += ((unsigned char)s[i] & 0xc0) != 0x80;
    }
    return w;
}

typedef struct tw {
    FILE *f;
    int color;
    int started; /* a line has been written */
    sb line;     /* the line being built */
    sb cells;    /* a table's cells */
} tw;

/* Writes the line built in w->line, indented, and empties it. */
static void emit(tw *w, int indent)
{
    while (w->line.n && w->line.p[w->line.n - 1] == ' ') /* an empty last cell */
        w->line.n--;
    for (int i = 0; i < indent && w->line.n; i++)
        fputc(' ', w->f);
    fwrite(w->line.p ? w->line.p : "", 1, w->line.n, w->f);
    fputc('\n', w->f);
    w->line.n = 0;
    w->started = 1;
}

/* ---- colours ---- */

/* The SGR code of flags STRONG, WARN, BAD; NULL: none. */
static const char *flag_code(unsigned fl)
{
    int strong = (fl & GMP_DOC_STRONG) != 0;
    if (fl & GMP_DOC_BAD)
        return strong ? "1;31" : "31";
    if (fl & GMP_DOC_WARN)
        return strong ? "1;33" : "33";
    return strong ? "1" : NULL;
}

static const char *sev_code(gmp_doc_severity s)
{
    return s == GMP_DOC_PROBLEM ? "31" : s == GMP_DOC_WARNING ? "33" : NULL;
}

/* Opens code; returns where the text after it starts (to close only what wrote something). */
static size_t c_open(const tw *w, sb *b, const char *code)
{
    if (w->color && code)
        gmp_strbuf_printf(b, "\033[%sm", code);
    return b->n;
}

/* Closes code opened at b->n == body (drops the opener when nothing was written after it), then
 * opens base again (the colour of the enclosing line), if any. */
static void c_close(const tw *w, sb *b, const char *code, size_t body, const char *base)
{
    if (!w->color || !code || b->oom)
        return;
    if (b->n == body) {
        b->n -= strlen(code) + 3;
        return;
    }
    gmp_strbuf_puts(b, "\033[0m");
    if (base)
        gmp_strbuf_printf(b, "\033[%sm", base);
}

/* ---- values ---- */

/* Trace bytes: valid UTF-8 as is; controls, DEL, invalid bytes as \xNN; backslash as \\. */
static void t_esc(sb *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = gmp_utf8_seq_len(p + i, n - i);
        if (l == 0 || (l == 1 && (p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\'))) {
            if (p[i] == '\\')
                gmp_strbuf_puts(b, "\\\\");
            else
                gmp_strbuf_printf(b, "\\x%02x", p[i]);
            i++;
            continue;
        }
        gmp_strbuf_add(b, s + i, l);
        i += l;
    }
}

static void t_frame(sb *b, const gmp_doc_frame *fr)
{
    if (fr->display.len)
        t_esc(b, fr->display.ptr, fr->display.len);
    else
        gmp_strbuf_puts(b, "(unknown frame)");
}

static void t_plain(sb *b, const gmp_doc_val *v, unsigned colflags)
{
    switch (v->type) {
    case GMP_DOC_LIT: gmp_strbuf_add(b, v->s.ptr, v->s.len); break;
    case GMP_DOC_STR:
        if (v->s.len) {
            size_t at = b->n;
            t_esc(b, v->s.ptr, v->s.len);
            if ((colflags & GMP_DOC_TAIL) && !b->oom && width(b->p + at, b->n - at) > TAIL_COLS) {
                /* keep the last TAIL_COLS - 1 characters (whole UTF-8 sequences) after "…" */
                size_t k = b->n, kept = 0;
                while (k > at && kept < TAIL_COLS - 1) {
                    k--;
                    kept += ((unsigned char)b->p[k] & 0xc0) != 0x80;
                }
                char tail[4 * TAIL_COLS]; /* a character is at most 4 bytes */
                size_t tn = b->n - k;
                memcpy(tail, b->p + k, tn);
                b->n = at;
                gmp_strbuf_puts(b, "\xe2\x80\xa6"); /* … */
                gmp_strbuf_add(b, tail, tn);
            }
        } else if (v->none)
            gmp_strbuf_puts(b, v->none);
        break;
    case GMP_DOC_STACK: {
        size_t i = 0, shown = 0, folded, inside;
        char fb[48];
        size_t cap =
            v->stack && v->stack->min_items > STACK_FRAMES ? v->stack->min_items : STACK_FRAMES;
        while (v->stack && i < v->stack->n && shown < cap) {
            const gmp_doc_frame *fr = gmp_render_stack_next(v->stack, &i, &folded, &inside);
            if (shown++)
                gmp_strbuf_puts(b, " < ");
            if (fr) {
                t_frame(b, fr);
                if (inside) {
                    gmp_strbuf_printf(b, " [+%zu inside", inside);
                    size_t j = i - 1;
                    for (const gmp_doc_frame *via; (via = gmp_render_via(v->stack, &j));) {
                        gmp_strbuf_puts(b, ", via ");
                        t_frame(b, via);
                    }
                    gmp_strbuf_puts(b, "]");
                }
            } else
                gmp_strbuf_puts(b, gmp_render_folded_text(folded, fb, sizeof fb));
        }
        if (v->stack && i < v->stack->n)
            gmp_strbuf_puts(b, " < ...");
        break;
    }
    default: {
        char buf[128];
        gmp_doc_val x = *v;
        x.flags |= colflags & GMP_DOC_RAW;
        gmp_strbuf_puts(b, gmp_doc_fmt(&x, buf, sizeof buf));
    }
    }
}

/* A value in its colours, inside a line coloured base. */
static void t_val(const tw *w, sb *b, const gmp_doc_val *v, unsigned colflags, const char *base)
{
    if (v->flags & GMP_DOC_DATA)
        return;
    const char *code = flag_code(v->flags);
    size_t body = c_open(w, b, code);
    t_plain(b, v, colflags);
    c_close(w, b, code, body, base);
}

/* A line in colour code (NULL: none). */
static void t_line(const tw *w, sb *b, const gmp_doc_line *l, const char *code)
{
    size_t body = c_open(w, b, code);
    for (size_t i = 0; i < l->n; i++)
        t_val(w, b, &l->v[i], 0, code);
    c_close(w, b, code, body, NULL);
}

/* ---- blocks ---- */

static void t_block(tw *w, const gmp_doc_block *b, int indent);

/* "(top N of M)" after lead (" " on a heading or caption, "" on a line of its own). */
static void t_top(sb *b, const char *lead, const gmp_doc_block *t)
{
    gmp_strbuf_printf(b, "%s(top %zu of %llu)", lead, t->nrows, (unsigned long long)t->total);
}

/* Non-zero when a titled section is shown below s (through untitled ones). */
static int has_heading(const gmp_doc_block *s)
{
    for (const gmp_doc_block *c = gmp_render_first(s); c; c = c->next)
        if (c->kind == GMP_DOC_SECTION && !(c->flags & GMP_DOC_DATA) &&
            (c->title.n || has_heading(c)))
            return 1;
    return 0;
}

static void t_section(tw *w, const gmp_doc_block *s, int indent)
{
    if (s->title.n) {
        if (gmp_doc_depth(s) <= 2)
            indent = 0;
        if (w->started)
            fputc('\n', w->f);
        size_t body = c_open(w, &w->line, "1");
        for (size_t i = 0; i < s->title.n; i++)
            t_val(w, &w->line, &s->title.v[i], 0, "1");
        const gmp_doc_block *top = gmp_render_heading_table(s);
        if (top)
            t_top(&w->line, " ", top);
        const gmp_doc_block *first = gmp_render_first(s);
        if (!has_heading(s) && !(first && first->kind == GMP_DOC_KV))
            gmp_strbuf_puts(&w->line, ":");
        c_close(w, &w->line, "1", body, NULL);
        emit(w, indent);
        indent += 2;
    }
    for (const gmp_doc_block *c = s->first; c; c = c->next)
        t_block(w, c, indent);
}

/* The width of a key/value list's labels (those shown). */
static size_t kv_width(const gmp_doc_block *kv)
{
    size_t lw = 0;
    for (size_t i = 0; i < kv->nitems; i++) {
        const gmp_doc_item *it = &kv->items[i];
        size_t n = it->label ? width(it->label, strlen(it->label)) : 0;
        if (!(it->flags & GMP_DOC_DATA) && n > lw)
            lw = n;
    }
    return lw;
}

static void t_kv(tw *w, const gmp_doc_block *kv, int indent)
{
    size_t lw = kv_width(kv);
    for (size_t i = 0; i < kv->nitems; i++) {
        const gmp_doc_item *it = &kv->items[i];
        if (it->flags & GMP_DOC_DATA)
            continue;
        if (lw) {
            const char *l = it->label ? it->label : "";
            gmp_strbuf_puts(&w->line, l);
            sb_pad(&w->line, lw + 2 - width(l, strlen(l)));
        }
        t_line(w, &w->line, &it->value, flag_code(it->flags));
        emit(w, indent);
    }
}

/* A caption line, with "(top N of M)" when t is a table cut by --top. Nothing when empty. */
static void t_caption(tw *w, const gmp_doc_block *b, int indent)
{
    if (!b->title.n)
        return;
    t_line(w, &w->line, &b->title, NULL);
    if (b->kind == GMP_DOC_TABLE && b->total > b->nrows)
        t_top(&w->line, " ", b);
    emit(w, indent);
}

static void t_table(tw *w, const gmp_doc_block *t, int indent)
{
    t_caption(w, t, indent);
    size_t nc = t->ncols, n = (t->nrows + 1) * nc;
    size_t *off = t->nrows ? malloc((n + 1) * sizeof *off) : NULL;
    size_t *cw = t->nrows ? calloc(nc ? nc : 1, sizeof *cw) : NULL;
    size_t last = 0; /* the last column shown, + 1 */
    if (!off || !cw) {
        w->line.oom |= t->nrows != 0 && nc != 0;
        free(off);
        free(cw);
        return;
    }
    sb *c = &w->cells;
    c->n = 0;
    for (size_t k = 0; k < n; k++) {
        size_t r = k / nc, j = k % nc;
        const gmp_doc_col *col = &t->cols[j];
        off[k] = c->n;
        if (col->flags & GMP_DOC_DATA)
            continue;
        if (r == 0)
            gmp_strbuf_puts(c, col->title ? col->title : "");
        else
            t_val(w, c, &t->cells[(r - 1) * nc + j], col->flags, NULL);
        size_t cwid = width(c->p + off[k], c->n - off[k]);
        if (cwid > cw[j])
            cw[j] = cwid;
        last = j + 1;
    }
    off[n] = c->n;
    for (size_t r = 0; r <= t->nrows && last && !c->oom; r++) {
        for (size_t j = 0, any = 0; j < nc; j++) {
            if (t->cols[j].flags & GMP_DOC_DATA)
                continue;
            size_t k = r * nc + j, len = off[k + 1] - off[k],
                   pad = cw[j] - width(c->p + off[k], len);
            int right = gmp_render_numeric(t->cols[j].type);
            if (any++)
                gmp_strbuf_puts(&w->line, "  ");
            if (right)
                sb_pad(&w->line, pad);
            gmp_strbuf_add(&w->line, c->p + off[k], len);
            if (!right && j + 1 < last)
                sb_pad(&w->line, pad);
        }
        emit(w, indent);
    }
    w->line.oom |= c->oom;
    free(off);
    free(cw);
    const gmp_doc_block *p = t->parent;
    if (!t->title.n && t->total > t->nrows &&
        !(p && p->title.n && gmp_render_heading_table(p) == t)) {
        t_top(&w->line, "", t);
        emit(w, indent);
    }
}

/* One line per column flagged STRONG: the caption ("over time" when none) padded as the labels of
 * the key/value list before it, the sparkline, "(column, 0 .. max)". */
static void t_series(tw *w, const gmp_doc_block *s, int indent)
{
    size_t lw = 0, lab;
    for (const gmp_doc_block *c = s->parent ? s->parent->first : NULL; c && c != s; c = c->next)
        if (c->kind == GMP_DOC_KV && !(c->flags & GMP_DOC_DATA))
            lw = kv_width(c);
    /* several lines: the sparklines under the first one, aligned with it */
    for (size_t c = 0, any = 0; c < s->nscols; c++) {
        const gmp_doc_scol *sc = &s->scols[c];
        char spark[GMP_RENDER_SPARK * 4 + 1], mb[64];
        uint64_t max = 0;
        if (!(sc->flags & GMP_DOC_STRONG) || !gmp_render_spark(s, c, spark, sizeof spark, &max))
            continue;
        if (!any++) {
            if (s->title.n)
                t_line(w, &w->line, &s->title, NULL);
            else
                gmp_strbuf_puts(&w->line, "over time");
        }
        lab = width(w->line.p, w->line.n);
        sb_pad(&w->line, (lab > lw ? lab : lw) + 2 - lab);
        if (lab > lw)
            lw = lab; /* the next lines start where this one's sparkline does */
        gmp_strbuf_puts(&w->line, spark);
        gmp_doc_val m = gmp_dv_bytes(max);
        gmp_strbuf_printf(&w->line, "  (%s, 0 .. %s)", sc->title ? sc->title : "",
                          gmp_doc_fmt(&m, mb, sizeof mb));
        emit(w, indent);
    }
}

static void t_stackb(tw *w, const gmp_doc_block *s, int indent)
{
    t_caption(w, s, indent);
    int in = indent + (s->title.n ? 2 : 0);
    size_t i = 0, folded, inside;
    char fb[48];
    while (i < s->stack.n) {
        const gmp_doc_frame *fr = gmp_render_stack_next(&s->stack, &i, &folded, &inside);
        if (fr) {
            t_frame(&w->line, fr);
            gmp_strbuf_puts(&w->line, gmp_render_inside_text(inside, fb, sizeof fb));
        } else
            gmp_strbuf_puts(&w->line, gmp_render_folded_text(folded, fb, sizeof fb));
        emit(w, in);
    }
}

static void t_block(tw *w, const gmp_doc_block *b, int indent)
{
    if (b->flags & GMP_DOC_DATA)
        return;
    switch (b->kind) {
    case GMP_DOC_SECTION: t_section(w, b, indent); break;
    case GMP_DOC_KV: t_kv(w, b, indent); break;
    case GMP_DOC_TABLE: t_table(w, b, indent); break;
    case GMP_DOC_SERIES: t_series(w, b, indent); break;
    case GMP_DOC_STACKB: t_stackb(w, b, indent); break;
    case GMP_DOC_VERDICT:
    case GMP_DOC_NOTICE:
        if (b->title.n) {
            t_line(w, &w->line, &b->title, sev_code(b->severity));
            emit(w, indent);
        }
        for (const gmp_doc_block *c = b->first; c; c = c->next)
            t_block(w, c, indent + 2);
        break;
    }
}

gmp_err gmp_render_text(const gmp_doc *d, FILE *f, const gmp_render_opts *o)
{
    tw w = {.f = f, .color = o && o->color};
    t_block(&w, gmp_doc_root_c(d), 0);
    int oom = w.line.oom || w.cells.oom;
    free(w.line.p);
    free(w.cells.p);
    return ferror(f) ? GMP_ERR_IO : oom ? GMP_ERR_NOMEM : GMP_OK;
}
