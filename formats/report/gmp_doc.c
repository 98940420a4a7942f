/* gmp_doc: building the report document (see gmp_doc.h): an arena that owns every block, value
 * and string, the value constructors, the `%v` line builder, and the one formatting of values
 * that every renderer shares (gmp_doc_fmt). */
#include "gmp_doc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_units.h"

#define ARENA_CHUNK ((size_t)64 << 10)

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} arena_chunk;

typedef struct memo_ent {
    const void *owner, *val; /* val NULL: empty */
    uint64_t key;
} memo_ent;

struct gmp_doc {
    arena_chunk *chunks;
    gmp_err err;
    gmp_doc_block root;
    memo_ent *memo; /* gmp_doc_memo_get: open addressing, power-of-two capacity */
    size_t memo_cap, memo_n;
};

gmp_doc *gmp_doc_new(void)
{
    gmp_doc *d = calloc(1, sizeof *d);
    if (d)
        d->root.kind = GMP_DOC_SECTION;
    return d;
}

void gmp_doc_free(gmp_doc *d)
{
    if (!d)
        return;
    for (arena_chunk *c = d->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(d->memo);
    free(d);
}

static size_t memo_slot(const void *owner, uint64_t key, size_t mask)
{
    uint64_t h = ((uint64_t)(uintptr_t)owner ^ key * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
    return (size_t)(h ^ (h >> 31)) & mask;
}

const void *gmp_doc_memo_get(const gmp_doc *d, const void *owner, uint64_t key)
{
    if (!d->memo_cap)
        return NULL;
    size_t mask = d->memo_cap - 1;
    for (size_t i = memo_slot(owner, key, mask); d->memo[i].val; i = (i + 1) & mask)
        if (d->memo[i].owner == owner && d->memo[i].key == key)
            return d->memo[i].val;
    return NULL;
}

void gmp_doc_memo_put(gmp_doc *d, const void *owner, uint64_t key, const void *val)
{
    if (!val)
        return;
    if ((d->memo_n + 1) * 2 > d->memo_cap) {
        size_t nc = d->memo_cap ? d->memo_cap * 2 : 64;
        memo_ent *nm = calloc(nc, sizeof *nm);
        if (!nm)
            return;
        for (size_t i = 0; i < d->memo_cap; i++) {
            if (!d->memo[i].val)
                continue;
            size_t j = memo_slot(d->memo[i].owner, d->memo[i].key, nc - 1);
            while (nm[j].val)
                j = (j + 1) & (nc - 1);
            nm[j] = d->memo[i];
        }
        free(d->memo);
        d->memo = nm;
        d->memo_cap = nc;
    }
    size_t mask = d->memo_cap - 1, i = memo_slot(owner, key, mask);
    while (d->memo[i].val) {
        if (d->memo[i].owner == owner && d->memo[i].key == key) {
            d->memo[i].val = val;
            return;
        }
        i = (i + 1) & mask;
    }
    d->memo[i] = (memo_ent){owner, val, key};
    d->memo_n++;
}

gmp_doc_block *gmp_doc_root(gmp_doc *d)
{
    return &d->root;
}

const gmp_doc_block *gmp_doc_root_c(const gmp_doc *d)
{
    return &d->root;
}

gmp_err gmp_doc_error(const gmp_doc *d)
{
    return d ? d->err : GMP_ERR_NOMEM;
}

void *gmp_doc_alloc(gmp_doc *d, size_t n)
{
    if (d->err)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    arena_chunk *c = d->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c) {
            d->err = GMP_ERR_NOMEM;
            return NULL;
        }
        c->used = 0;
        c->cap = cap;
        c->next = d->chunks;
        d->chunks = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

gmp_str gmp_doc_strdup(gmp_doc *d, const char *s, size_t n)
{
    char *p = gmp_doc_alloc(d, n + 1);
    if (!p)
        return (gmp_str){"", 0};
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return (gmp_str){p, (uint32_t)n};
}

const char *gmp_doc_cstr(gmp_doc *d, const char *s)
{
    return gmp_doc_strdup(d, s, strlen(s)).ptr;
}

/* Grows the array *pp (elem bytes each, *cap of them) to hold at least need. Growable arrays
 * (lines, items, rows, spans) live in the arena too: a grown array is a new piece of it, and the
 * old one stays unused until the document is freed (at most as much again as the arrays hold,
 * since each size doubles). 0, or -1 (error set). */
static int grow(gmp_doc *d, void *pp, size_t *cap, size_t need, size_t elem)
{
    if (d->err)
        return -1;
    if (need <= *cap)
        return 0;
    void **p = pp;
    size_t nc = *cap ? *cap * 2 : 4;
    while (nc < need)
        nc *= 2;
    void *q = gmp_doc_alloc(d, nc * elem);
    if (!q)
        return -1;
    if (*cap)
        memcpy(q, *p, *cap * elem);
    *p = q;
    *cap = nc;
    return 0;
}

/* ---- values ---- */

gmp_doc_val gmp_dv_none(void)
{
    return (gmp_doc_val){.type = GMP_DOC_NONE};
}

gmp_doc_val gmp_dv_lit(const char *s)
{
    return (gmp_doc_val){.type = GMP_DOC_LIT, .s = {s ? s : "", s ? (uint32_t)strlen(s) : 0}};
}

gmp_doc_val gmp_dv_ref(const char *s, const char *anchor)
{
    gmp_doc_val v = gmp_dv_lit(s);
    v.ref = anchor;
    return v;
}

gmp_doc_val gmp_dv_str(gmp_str s, const char *none)
{
    return (gmp_doc_val){.type = GMP_DOC_STR, .s = s.ptr ? s : (gmp_str){"", 0}, .none = none};
}

gmp_doc_val gmp_dv_bytes(uint64_t b)
{
    return (gmp_doc_val){.type = GMP_DOC_BYTES, .u = b};
}

gmp_doc_val gmp_dv_sbytes(int64_t b)
{
    return (gmp_doc_val){.type = GMP_DOC_SBYTES, .i = b};
}

gmp_doc_val gmp_dv_count(uint64_t n)
{
    return (gmp_doc_val){.type = GMP_DOC_COUNT, .u = n};
}

gmp_doc_val gmp_dv_int(int64_t n)
{
    return (gmp_doc_val){.type = GMP_DOC_INT, .i = n};
}

gmp_doc_val gmp_dv_time(uint64_t ns, uint64_t t0)
{
    return (gmp_doc_val){.type = GMP_DOC_TIME, .u = ns, .i = (int64_t)t0};
}

gmp_doc_val gmp_dv_dur(uint64_t ns)
{
    return (gmp_doc_val){.type = GMP_DOC_DUR, .u = ns};
}

gmp_doc_val gmp_dv_pct(double p)
{
    return (gmp_doc_val){.type = GMP_DOC_PCT, .d = p};
}

gmp_doc_val gmp_dv_real(double r)
{
    return (gmp_doc_val){.type = GMP_DOC_REAL, .d = r};
}

gmp_doc_val gmp_dv_bool(int b)
{
    return (gmp_doc_val){.type = GMP_DOC_BOOL, .u = b != 0};
}

gmp_doc_val gmp_dv_device(int64_t id)
{
    return (gmp_doc_val){.type = GMP_DOC_DEVICE, .i = id};
}

gmp_doc_val gmp_dv_hex(uint64_t x)
{
    return (gmp_doc_val){.type = GMP_DOC_HEX, .u = x};
}

gmp_doc_val gmp_dv_stack(const gmp_doc_stack *s)
{
    if (!s || !s->n)
        return gmp_dv_none();
    return (gmp_doc_val){.type = GMP_DOC_STACK, .stack = s};
}

gmp_doc_val gmp_dv_k(gmp_doc_val v, const char *key)
{
    v.key = key;
    return v;
}

gmp_doc_val gmp_dv_f(gmp_doc_val v, unsigned flags)
{
    v.flags |= flags;
    return v;
}

/* ---- lines ---- */

void gmp_doc_line_add(gmp_doc *d, gmp_doc_line *l, gmp_doc_val v)
{
    if (grow(d, &l->v, &l->cap, l->n + 1, sizeof *l->v) < 0)
        return;
    l->v[l->n++] = v;
}

static void add_lit(gmp_doc *d, gmp_doc_line *l, const char *s, size_t n)
{
    if (!n)
        return;
    gmp_doc_val v = {.type = GMP_DOC_LIT, .s = gmp_doc_strdup(d, s, n)};
    gmp_doc_line_add(d, l, v);
}

void gmp_doc_vlinef(gmp_doc *d, gmp_doc_line *l, const char *fmt, va_list ap)
{
    if (!fmt)
        return;
    const char *run = fmt;
    for (const char *p = fmt; *p;) {
        if (p[0] == '%' && p[1] == 'v') {
            add_lit(d, l, run, (size_t)(p - run));
            gmp_doc_line_add(d, l, va_arg(ap, gmp_doc_val));
            p += 2;
            run = p;
        } else if (p[0] == '%' && p[1] == '%') {
            add_lit(d, l, run, (size_t)(p - run) + 1);
            p += 2;
            run = p;
        } else {
            p++;
        }
    }
    add_lit(d, l, run, strlen(run));
}

void gmp_doc_linef(gmp_doc *d, gmp_doc_line *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gmp_doc_vlinef(d, l, fmt, ap);
    va_end(ap);
}

/* ---- blocks ---- */

static gmp_doc_block *block(gmp_doc *d, gmp_doc_block *parent, gmp_doc_kind kind, const char *key)
{
    gmp_doc_block *b = gmp_doc_alloc(d, sizeof *b);
    if (!b)
        return NULL;
    b->kind = kind;
    b->key = key;
    if (!parent)
        parent = &d->root;
    b->parent = parent;
    if (parent->last)
        parent->last->next = b;
    else
        parent->first = b;
    parent->last = b;
    return b;
}

gmp_doc_block *gmp_doc_section(gmp_doc *d, gmp_doc_block *parent, const char *key, unsigned flags,
                               const char *fmt, ...)
{
    gmp_doc_block *b = block(d, parent, GMP_DOC_SECTION, key);
    if (!b)
        return &d->root; /* error set: whatever is added now is never rendered */
    b->flags = flags;
    va_list ap;
    va_start(ap, fmt);
    gmp_doc_vlinef(d, &b->title, fmt, ap);
    va_end(ap);
    return b;
}

gmp_doc_block *gmp_doc_kv(gmp_doc *d, gmp_doc_block *parent)
{
    gmp_doc_block *b = block(d, parent, GMP_DOC_KV, NULL);
    return b ? b : &d->root;
}

void gmp_doc_anchor(gmp_doc *d, gmp_doc_block *s, const char *anchor)
{
    /* a failed block is the root (see block()): it gets no anchor */
    if (s->kind == GMP_DOC_SECTION && s != &d->root && anchor)
        s->anchor = gmp_doc_cstr(d, anchor);
}

void gmp_doc_item_add(gmp_doc *d, gmp_doc_block *kv, const char *label, unsigned flags,
                      const char *fmt, ...)
{
    if (kv->kind != GMP_DOC_KV ||
        grow(d, &kv->items, &kv->items_cap, kv->nitems + 1, sizeof *kv->items) < 0)
        return;
    gmp_doc_item *it = &kv->items[kv->nitems++];
    it->label = label;
    it->flags = flags;
    va_list ap;
    va_start(ap, fmt);
    gmp_doc_vlinef(d, &it->value, fmt, ap);
    va_end(ap);
}

gmp_doc_block *gmp_doc_table(gmp_doc *d, gmp_doc_block *parent, const char *key,
                             const gmp_doc_col *cols, size_t ncols)
{
    gmp_doc_block *b = block(d, parent, GMP_DOC_TABLE, key);
    if (!b)
        return &d->root;
    b->cols = gmp_doc_alloc(d, ncols * sizeof *cols);
    if (b->cols) {
        if (ncols)
            memcpy(b->cols, cols, ncols * sizeof *cols);
        b->ncols = ncols;
    }
    return b;
}

gmp_doc_val *gmp_doc_row(gmp_doc *d, gmp_doc_block *t)
{
    static gmp_doc_val sink[64]; /* after a failure: written to, never read */
    if (t->kind != GMP_DOC_TABLE || !t->ncols ||
        grow(d, &t->cells, &t->rows_cap, (t->nrows + 1) * t->ncols, sizeof *t->cells) < 0)
        return t->ncols <= 64 ? memset(sink, 0, sizeof sink) : NULL;
    gmp_doc_val *r = &t->cells[t->nrows * t->ncols];
    t->nrows++;
    return r;
}

gmp_doc_block *gmp_doc_series(gmp_doc *d, gmp_doc_block *parent, const char *key,
                              const gmp_doc_scol *cols, size_t ncols, size_t npoints)
{
    gmp_doc_block *b = block(d, parent, GMP_DOC_SERIES, key);
    if (!b)
        return &d->root;
    b->scols = gmp_doc_alloc(d, ncols * sizeof *cols);
    b->x = gmp_doc_alloc(d, (npoints ? npoints : 1) * sizeof *b->x);
    size_t ny = npoints * ncols;
    b->y = gmp_doc_alloc(d, (ny ? ny : 1) * sizeof *b->y);
    if (b->scols && b->x && b->y) {
        if (ncols)
            memcpy(b->scols, cols, ncols * sizeof *cols);
        b->nscols = ncols;
        b->npoints = npoints;
    }
    return b;
}

gmp_doc_lane *gmp_doc_lane_add(gmp_doc *d, gmp_doc_block *s, const char *label)
{
    static gmp_doc_lane sink;
    if (s->kind != GMP_DOC_SERIES ||
        grow(d, &s->lanes, &s->lanes_cap, s->nlanes + 1, sizeof *s->lanes) < 0) {
        memset(&sink, 0, sizeof sink);
        return &sink;
    }
    gmp_doc_lane *l = &s->lanes[s->nlanes++];
    l->label = label;
    return l;
}

void gmp_doc_span_add(gmp_doc *d, gmp_doc_lane *l, uint64_t t0, uint64_t t1, gmp_str label)
{
    if (gmp_doc_error(d) || grow(d, &l->spans, &l->cap, l->n + 1, sizeof *l->spans) < 0)
        return;
    l->spans[l->n++] = (gmp_doc_span){t0, t1, label};
}

void gmp_doc_mark_add(gmp_doc *d, gmp_doc_block *s, uint64_t t, const char *label, unsigned flags)
{
    if (s->kind != GMP_DOC_SERIES ||
        grow(d, &s->marks, &s->marks_cap, s->nmarks + 1, sizeof *s->marks) < 0)
        return;
    s->marks[s->nmarks++] = (gmp_doc_mark){t, label, flags};
}

gmp_doc_block *gmp_doc_stack_block(gmp_doc *d, gmp_doc_block *parent, const char *key,
                                   const gmp_doc_stack *s)
{
    gmp_doc_block *b = block(d, parent, GMP_DOC_STACKB, key);
    if (!b)
        return &d->root;
    if (s)
        b->stack = *s;
    return b;
}

static gmp_doc_block *said(gmp_doc *d, gmp_doc_block *parent, gmp_doc_kind kind, const char *key,
                           gmp_doc_severity sev, const char *fmt, va_list ap)
{
    gmp_doc_block *b = block(d, parent, kind, key);
    if (!b)
        return &d->root;
    b->severity = sev;
    gmp_doc_vlinef(d, &b->title, fmt, ap);
    return b;
}

gmp_doc_block *gmp_doc_verdict(gmp_doc *d, gmp_doc_block *parent, const char *key,
                               gmp_doc_severity sev, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gmp_doc_block *b = said(d, parent, GMP_DOC_VERDICT, key, sev, fmt, ap);
    va_end(ap);
    return b;
}

gmp_doc_block *gmp_doc_notice(gmp_doc *d, gmp_doc_block *parent, const char *key,
                              gmp_doc_severity sev, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gmp_doc_block *b = said(d, parent, GMP_DOC_NOTICE, key, sev, fmt, ap);
    va_end(ap);
    return b;
}

/* ---- for renderers ---- */

const char *gmp_doc_fmt(const gmp_doc_val *v, char *buf, size_t n)
{
    if (!n)
        return buf;
    buf[0] = 0;
    switch (v->type) {
    case GMP_DOC_BYTES:
        gmp_fmt_bytes(v->u, buf, n);
        if (v->flags & GMP_DOC_RAW) {
            size_t l = strlen(buf);
            snprintf(buf + l, n - l, " (%" PRIu64 " bytes)", v->u);
        }
        break;
    case GMP_DOC_SBYTES: {
        uint64_t m = v->i < 0 ? (uint64_t)0 - (uint64_t)v->i : (uint64_t)v->i;
        char b[32];
        snprintf(buf, n, "%s%s", v->i < 0 ? "-" : "+", gmp_fmt_bytes(m, b, sizeof b));
        break;
    }
    case GMP_DOC_COUNT: snprintf(buf, n, "%" PRIu64, v->u); break;
    case GMP_DOC_INT:
        snprintf(buf, n, v->flags & GMP_DOC_SIGN ? "%+" PRId64 : "%" PRId64, v->i);
        break;
    case GMP_DOC_TIME: gmp_fmt_reltime(v->u, (uint64_t)v->i, buf, n); break;
    case GMP_DOC_DUR: gmp_fmt_duration(v->u, buf, n); break;
    case GMP_DOC_PCT: snprintf(buf, n, v->flags & GMP_DOC_SIGN ? "%+.1f%%" : "%.1f%%", v->d); break;
    case GMP_DOC_REAL: snprintf(buf, n, "%.2f", v->d); break;
    case GMP_DOC_BOOL: snprintf(buf, n, "%s", v->u ? "yes" : "no"); break;
    case GMP_DOC_DEVICE:
        if (v->i < 0)
            snprintf(buf, n, "host");
        else
            snprintf(buf, n, "%" PRId64, v->i);
        break;
    case GMP_DOC_HEX: snprintf(buf, n, "0x%" PRIx64, v->u); break;
    default: break;
    }
    return buf;
}

const char *gmp_doc_severity_name(gmp_doc_severity s)
{
    switch (s) {
    case GMP_DOC_OK: return "ok";
    case GMP_DOC_WARNING: return "warning";
    case GMP_DOC_PROBLEM: return "problem";
    default: return "info";
    }
}

int gmp_doc_depth(const gmp_doc_block *b)
{
    int n = 0;
    for (const gmp_doc_block *p = b ? b->parent : NULL; p; p = p->parent)
        n += !(p->kind == GMP_DOC_SECTION && !p->title.n && p->parent); /* a mere grouping */
    return n;
}

uint64_t gmp_doc_series_max(const gmp_doc_block *s)
{
    uint64_t m = 0;
    for (size_t c = 0; c < s->nscols; c++) {
        if (s->scols[c].role == GMP_DOC_S_HIDDEN)
            continue;
        for (size_t p = 0; p < s->npoints; p++)
            if (s->y[p * s->nscols + c] > m)
                m = s->y[p * s->nscols + c];
    }
    return m;
}
