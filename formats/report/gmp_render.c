/* gmp_render: what the renderers of the report document share (gmp_render.h): the few rules every
 * markup applies the same way (which columns are numbers, the first block shown, where a table's
 * "(top N of M)" goes, a series as a line of block characters), so that each renderer holds only
 * how its markup looks. Knows nothing of what a document is about, and uses no renderer
 * (gmp_render_by_name, which names them all, is in gmp_render_by_name.c: no cycle). */
#include <stdio.h>
#include <string.h>

#include "gmp_render.h"

int gmp_render_numeric(gmp_doc_type t)
{
    switch (t) {
    case GMP_DOC_BYTES:
    case GMP_DOC_SBYTES:
    case GMP_DOC_COUNT:
    case GMP_DOC_INT:
    case GMP_DOC_TIME:
    case GMP_DOC_DUR:
    case GMP_DOC_PCT:
    case GMP_DOC_REAL:
    case GMP_DOC_DEVICE:
    case GMP_DOC_HEX: return 1;
    default: return 0;
    }
}

int gmp_render_val_empty(const gmp_doc_val *v)
{
    switch (v->type) {
    case GMP_DOC_NONE: return 1;
    case GMP_DOC_LIT: return v->s.len == 0;
    case GMP_DOC_STR: return v->s.len == 0 && (!v->none || !*v->none);
    case GMP_DOC_STACK: return !v->stack || !v->stack->n;
    default: return 0;
    }
}

const gmp_doc_block *gmp_render_first(const gmp_doc_block *b)
{
    const gmp_doc_block *c = b ? b->first : NULL;
    while (c && (c->flags & GMP_DOC_DATA))
        c = c->next;
    return c;
}

const gmp_doc_block *gmp_render_heading_table(const gmp_doc_block *section)
{
    const gmp_doc_block *t = gmp_render_first(section);
    if (!t || t->kind != GMP_DOC_TABLE || t->title.n || t->total <= t->nrows)
        return NULL;
    return t;
}

size_t gmp_render_spark(const gmp_doc_block *s, size_t col, char *buf, size_t cap, uint64_t *max)
{
    static const char *const blocks[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    size_t n = s->npoints, cols = n < GMP_RENDER_SPARK ? n : GMP_RENDER_SPARK, len = 0;
    uint64_t m = 0;
    for (size_t i = 0; i < n && col < s->nscols; i++)
        if (s->y[i * s->nscols + col] > m)
            m = s->y[i * s->nscols + col];
    *max = m;
    if (cap)
        buf[0] = '\0';
    if (!m || col >= s->nscols)
        return 0;
    unsigned shift = 0; /* values scaled down so that v * 8 cannot overflow */
    while ((m >> shift) > UINT64_MAX / 16)
        shift += 4;
    for (size_t c = 0; c < cols; c++) {
        size_t a = c * n / cols, b = (c + 1) * n / cols;
        uint64_t v = 0;
        for (size_t i = a; i < b; i++)
            if (s->y[i * s->nscols + col] > v)
                v = s->y[i * s->nscols + col];
        uint64_t ms = m >> shift, k = ((v >> shift) * 8 + ms - 1) / ms; /* 0..8 */
        const char *ch = blocks[k > 8 ? 8 : k];
        size_t l = strlen(ch);
        if (len + l + 1 > cap)
            break;
        memcpy(buf + len, ch, l);
        len += l;
        buf[len] = '\0';
    }
    return len;
}

const gmp_doc_frame *gmp_render_stack_next(const gmp_doc_stack *s, size_t *i, size_t *folded,
                                           size_t *inside)
{
    *folded = 0;
    *inside = 0;
    if (!s || *i >= s->n)
        return NULL;
    if (s->show_all)
        return &s->frames[(*i)++];
    if (*i == 0) {
        size_t k = 0;
        while (k < s->n && s->frames[k].internal)
            k++;
        if (k < s->n) { /* the first frame shown, with what was folded inside it */
            *inside = k;
            *i = k + 1;
            return &s->frames[k];
        }
    }
    if (s->frames[*i].internal != 1) /* shown, or shown to tell it apart (2) */
        return &s->frames[(*i)++];
    while (*i < s->n && s->frames[*i].internal == 1) {
        (*folded)++;
        (*i)++;
    }
    return NULL;
}

const gmp_doc_frame *gmp_render_via(const gmp_doc_stack *s, size_t *j)
{
    while (s && *j > 0 && *j <= s->n) {
        --*j;
        if (s->frames[*j].internal == 2)
            return &s->frames[*j];
    }
    return NULL;
}

const char *gmp_render_folded_text(size_t folded, char *buf, size_t n)
{
    snprintf(buf, n, "+%zu internal frame%s", folded, folded == 1 ? "" : "s");
    return buf;
}

const char *gmp_render_inside_text(size_t inside, char *buf, size_t n)
{
    if (inside)
        snprintf(buf, n, " [+%zu inside]", inside);
    else if (n)
        buf[0] = 0;
    return buf;
}
