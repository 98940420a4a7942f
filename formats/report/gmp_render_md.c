/* gmp_render_md: the report document (gmp_doc.h) as GitHub-flavoured Markdown, for pull requests,
 * issues and wikis. Trace strings (STR, frames) are escaped so that they cannot break a table,
 * start a construct or inject HTML: & < > " as entities, Markdown punctuation and | backslash-
 * escaped, control characters and invalid UTF-8 as U+FFFD; inside a code span (CODE values) ` and
 * control characters become '?'. Our own wording (LIT, labels, titles) has only | < > & escaped.
 *
 * Layout, the same for every document:
 *  - Headings by depth (gmp_doc_depth): the root's title (or gmp_render_opts.title) "#", depth 1
 *    (a trace) "##", depth 2 (a device, a section of a trace) "###", deeper ones a bold line.
 *    Untitled sections write nothing of their own. Blocks are separated by a blank line.
 *  - "(top N of M)" as the text renderer places it (gmp_render_heading_table): on the heading,
 *    after a caption, or as a paragraph under the table.
 *  - Key/value list: a two-column table with an empty header; without labels, a paragraph whose
 *    lines end with two spaces (a line break). Items and values flagged DATA are not shown.
 *  - Table: a GFM table, numeric columns right-aligned (---:), DATA columns not shown, a stack as
 *    its 6 innermost frames joined by " < "; a caption as a paragraph before it.
 *  - Series: a paragraph, per column flagged STRONG a line: the caption ("over time" when none),
 *    the sparkline in a code span, "(column, 0 .. max)".
 *  - Stack: its caption, then a list of frames.
 *  - Verdict: a paragraph ("**Problem:**" or "**Warning:**" before the line), then its blocks.
 *    Notices: a paragraph; consecutive notices are lines of one paragraph.
 *  - STRONG values in bold; empty STR shows its `none` in italics; blocks flagged DATA are not
 *    shown. */
#include <string.h>

#include "gmp_escape.h"
#include "gmp_render.h"

#define STACK_FRAMES 6

typedef struct mw {
    FILE *f;
    int started;    /* a block has been written: the next one starts after a blank line */
    int in_notices; /* the last block was a notice followed by another: same paragraph */
    int bold;       /* inside ** **: no nested emphasis */
    int table;      /* inside a table: '|' escaped in code spans too */
} mw;

static void m_begin(mw *w)
{
    if (w->started)
        fputc('\n', w->f);
    w->started = 1;
}

/* Trace bytes, escaped as the header says. */
static void md_bytes(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = gmp_utf8_seq_len(p + i, n - i);
        if (l == 0 || (l == 1 && (p[i] < 0x20 || p[i] == 0x7f))) {
            fputs("\xef\xbf\xbd", f); /* U+FFFD */
            i++;
            continue;
        }
        if (l == 1) {
            switch (p[i]) {
            case '&': fputs("&amp;", f); break;
            case '<': fputs("&lt;", f); break;
            case '>': fputs("&gt;", f); break;
            case '"': fputs("&quot;", f); break;
            case '\\':
            case '`':
            case '*':
            case '_':
            case '[':
            case ']':
            case '|':
            case '#':
            case '~':
                fputc('\\', f);
                fputc(p[i], f);
                break;
            default: fputc(p[i], f);
            }
        } else {
            fwrite(p + i, 1, l, f);
        }
        i += l;
    }
}

/* Our wording: only what could break a table or open HTML is escaped. */
static void m_lit(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '|': fputs("\\|", f); break;
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        default: fputc(s[i], f);
        }
    }
}

static void m_lits(FILE *f, const char *s)
{
    if (s)
        m_lit(f, s, strlen(s));
}

/* Trace bytes in a code span: no backtick or control character can end or break it. */
static void m_code(const mw *w, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('`', w->f);
    for (size_t i = 0; i < n;) {
        size_t l = gmp_utf8_seq_len(p + i, n - i);
        if (l == 0)
            fputs("\xef\xbf\xbd", w->f);
        else if (l == 1 && (p[i] < 0x20 || p[i] == 0x7f || p[i] == '`'))
            fputc('?', w->f);
        else if (l == 1 && p[i] == '|' && w->table)
            fputs("\\|", w->f);
        else
            fwrite(p + i, 1, l, w->f);
        i += l ? l : 1;
    }
    fputc('`', w->f);
}

static void m_frame(FILE *f, const gmp_doc_frame *fr)
{
    if (fr->display.len)
        md_bytes(f, fr->display.ptr, fr->display.len);
    else
        fputs("*(unknown frame)*", f);
}

static void m_val(mw *w, const gmp_doc_val *v, unsigned colflags)
{
    if ((v->flags & GMP_DOC_DATA) || gmp_render_val_empty(v))
        return;
    int strong = (v->flags & GMP_DOC_STRONG) && !w->bold;
    if (strong) {
        fputs("**", w->f);
        w->bold = 1;
    }
    switch (v->type) {
    case GMP_DOC_LIT: m_lit(w->f, v->s.ptr, v->s.len); break;
    case GMP_DOC_STR:
        if (!v->s.len) {
            fputc('*', w->f);
            m_lits(w->f, v->none);
            fputc('*', w->f);
        } else if (v->flags & GMP_DOC_CODE) {
            m_code(w, v->s.ptr, v->s.len);
        } else {
            md_bytes(w->f, v->s.ptr, v->s.len);
        }
        break;
    case GMP_DOC_STACK: {
        size_t i = 0, shown = 0, folded, inside;
        char fb[48];
        size_t cap = v->stack->min_items > STACK_FRAMES ? v->stack->min_items : STACK_FRAMES;
        while (i < v->stack->n && shown < cap) {
            const gmp_doc_frame *fr = gmp_render_stack_next(v->stack, &i, &folded, &inside);
            if (shown++)
                fputs(" &lt; ", w->f);
            if (fr) {
                m_frame(w->f, fr);
                if (inside) {
                    fprintf(w->f, " *\\[+%zu inside", inside);
                    size_t j = i - 1;
                    for (const gmp_doc_frame *via; (via = gmp_render_via(v->stack, &j));) {
                        fputs(", via* ", w->f);
                        m_frame(w->f, via);
                        fputs(" *", w->f);
                    }
                    fputs("\\]*", w->f);
                }
            } else
                fprintf(w->f, "*%s*", gmp_render_folded_text(folded, fb, sizeof fb));
        }
        if (i < v->stack->n)
            fputs(" &lt; …", w->f);
        break;
    }
    default: {
        char buf[128];
        gmp_doc_val x = *v;
        x.flags |= colflags & GMP_DOC_RAW;
        fputs(gmp_doc_fmt(&x, buf, sizeof buf), w->f);
    }
    }
    if (strong) {
        fputs("**", w->f);
        w->bold = 0;
    }
}

static void m_line(mw *w, const gmp_doc_line *l)
{
    for (size_t i = 0; i < l->n; i++)
        m_val(w, &l->v[i], 0);
}

/* A line in bold (its STRONG values not emphasised again). */
static void m_bold_line(mw *w, const gmp_doc_line *l)
{
    fputs("**", w->f);
    w->bold = 1;
    m_line(w, l);
    w->bold = 0;
    fputs("**", w->f);
}

static void m_top(FILE *f, const char *lead, const gmp_doc_block *t)
{
    fprintf(f, "%s(top %zu of %llu)", lead, t->nrows, (unsigned long long)t->total);
}

/* ---- blocks ---- */

static void m_block(mw *w, const gmp_doc_block *b, const gmp_render_opts *o);

static void m_section(mw *w, const gmp_doc_block *s, const gmp_render_opts *o)
{
    int depth = gmp_doc_depth(s);
    if (s->title.n || (!s->parent && o && o->title)) {
        m_begin(w);
        if (depth >= 3) {
            m_bold_line(w, &s->title);
        } else {
            fprintf(w->f, "%.*s ", depth + 1, "###");
            if (s->title.n)
                m_line(w, &s->title);
            else
                m_lits(w->f, o->title);
        }
        const gmp_doc_block *top = s->title.n ? gmp_render_heading_table(s) : NULL;
        if (top)
            m_top(w->f, " ", top);
        fputc('\n', w->f);
    }
    for (const gmp_doc_block *c = s->first; c; c = c->next)
        m_block(w, c, o);
}

static void m_kv(mw *w, const gmp_doc_block *kv)
{
    int labels = 0, any = 0;
    for (size_t i = 0; i < kv->nitems; i++) {
        if (kv->items[i].flags & GMP_DOC_DATA)
            continue;
        any = 1;
        labels |= kv->items[i].label && *kv->items[i].label;
    }
    if (!any)
        return;
    m_begin(w);
    if (labels) {
        fputs("| | |\n|---|---|\n", w->f);
        w->table = 1;
    }
    const char *sep = "";
    for (size_t i = 0; i < kv->nitems; i++) {
        const gmp_doc_item *it = &kv->items[i];
        if (it->flags & GMP_DOC_DATA)
            continue;
        fputs(sep, w->f);
        if (labels) {
            fputs("| ", w->f);
            m_lits(w->f, it->label);
            fputs(" | ", w->f);
        }
        if (it->flags & GMP_DOC_STRONG)
            m_bold_line(w, &it->value);
        else
            m_line(w, &it->value);
        sep = labels ? " |\n" : "  \n";
    }
    fputs(labels ? " |\n" : "\n", w->f);
    w->table = 0;
}

/* A paragraph with the caption of a table, series or stack (and "(top N of M)" for a table). */
static void m_caption(mw *w, const gmp_doc_block *b)
{
    if (!b->title.n)
        return;
    m_begin(w);
    m_line(w, &b->title);
    if (b->kind == GMP_DOC_TABLE && b->total > b->nrows)
        m_top(w->f, " ", b);
    fputc('\n', w->f);
}

static void m_table(mw *w, const gmp_doc_block *t)
{
    m_caption(w, t);
    size_t shown = 0;
    for (size_t j = 0; j < t->ncols; j++)
        shown += !(t->cols[j].flags & GMP_DOC_DATA);
    if (t->nrows && shown) {
        m_begin(w);
        w->table = 1;
        for (size_t r = 0; r < t->nrows + 2; r++) {
            for (size_t j = 0; j < t->ncols; j++) {
                const gmp_doc_col *c = &t->cols[j];
                if (c->flags & GMP_DOC_DATA)
                    continue;
                if (r == 0) {
                    fputs("| ", w->f);
                    m_lits(w->f, c->title);
                    fputc(' ', w->f);
                } else if (r == 1) {
                    fputs(gmp_render_numeric(c->type) ? "|---:" : "|---", w->f);
                } else {
                    fputs("| ", w->f);
                    m_val(w, &t->cells[(r - 2) * t->ncols + j], c->flags);
                    fputc(' ', w->f);
                }
            }
            fputs("|\n", w->f);
        }
        w->table = 0;
    }
    const gmp_doc_block *p = t->parent;
    if (!t->title.n && t->total > t->nrows &&
        !(p && p->title.n && gmp_render_heading_table(p) == t)) {
        m_begin(w);
        m_top(w->f, "", t);
        fputc('\n', w->f);
    }
}

/* A paragraph: per column flagged STRONG, the caption ("over time" when none), the sparkline in a
 * code span, "(column, 0 .. max)". */
static void m_series(mw *w, const gmp_doc_block *s)
{
    const char *sep = NULL;
    for (size_t c = 0; c < s->nscols; c++) {
        char spark[GMP_RENDER_SPARK * 4 + 1], mb[64];
        uint64_t max = 0;
        if (!(s->scols[c].flags & GMP_DOC_STRONG) ||
            !gmp_render_spark(s, c, spark, sizeof spark, &max))
            continue;
        if (!sep)
            m_begin(w);
        fputs(sep ? sep : "", w->f);
        if (s->title.n)
            m_line(w, &s->title);
        else
            fputs("over time", w->f);
        fprintf(w->f, ": `%s` (", spark);
        m_lits(w->f, s->scols[c].title);
        gmp_doc_val m = gmp_dv_bytes(max);
        fprintf(w->f, ", 0 .. %s)", gmp_doc_fmt(&m, mb, sizeof mb));
        sep = "  \n";
    }
    if (sep)
        fputc('\n', w->f);
}

static void m_stackb(mw *w, const gmp_doc_block *s)
{
    m_caption(w, s);
    if (s->stack.n)
        m_begin(w);
    size_t i = 0, folded, inside;
    char fb[48];
    while (i < s->stack.n) {
        const gmp_doc_frame *fr = gmp_render_stack_next(&s->stack, &i, &folded, &inside);
        fputs("- ", w->f);
        if (fr) {
            m_frame(w->f, fr);
            if (inside)
                fprintf(w->f, " *\\[+%zu inside\\]*", inside);
        } else
            fprintf(w->f, "*%s*", gmp_render_folded_text(folded, fb, sizeof fb));
        fputc('\n', w->f);
    }
}

static void m_verdict(mw *w, const gmp_doc_block *b, const gmp_render_opts *o)
{
    if (b->kind == GMP_DOC_NOTICE && w->in_notices)
        w->in_notices = 0;
    else
        m_begin(w);
    fputs(b->severity == GMP_DOC_PROBLEM   ? "**Problem:** "
          : b->severity == GMP_DOC_WARNING ? "**Warning:** "
                                           : "",
          w->f);
    m_line(w, &b->title);
    if (b->kind == GMP_DOC_NOTICE && b->next && b->next->kind == GMP_DOC_NOTICE) {
        fputs("  \n", w->f);
        w->in_notices = 1;
    } else {
        fputc('\n', w->f);
    }
    for (const gmp_doc_block *c = b->first; c; c = c->next)
        m_block(w, c, o);
}

static void m_block(mw *w, const gmp_doc_block *b, const gmp_render_opts *o)
{
    if (b->flags & GMP_DOC_DATA)
        return;
    switch (b->kind) {
    case GMP_DOC_SECTION: m_section(w, b, o); break;
    case GMP_DOC_KV: m_kv(w, b); break;
    case GMP_DOC_TABLE: m_table(w, b); break;
    case GMP_DOC_SERIES: m_series(w, b); break;
    case GMP_DOC_STACKB: m_stackb(w, b); break;
    case GMP_DOC_VERDICT:
    case GMP_DOC_NOTICE: m_verdict(w, b, o); break;
    }
}

gmp_err gmp_render_md(const gmp_doc *d, FILE *f, const gmp_render_opts *o)
{
    mw w = {.f = f};
    m_block(&w, gmp_doc_root_c(d), o);
    return ferror(f) ? GMP_ERR_IO : GMP_OK;
}
