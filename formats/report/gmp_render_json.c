/* gmp_render_json: the report document (gmp_doc.h) as JSON for programs (schema
 * gpumemprof-report/3, docs/report.md). JSON follows keys: the root SECTION is the top-level
 * object; a keyed SECTION (or KV) is a member object, a keyless one gives its members to the
 * enclosing object; blocks with GMP_DOC_ITEM are the elements of one array per key in their
 * object; a TABLE is an array of row objects, a SERIES an object {bucket_ns, columns, points,
 * lanes, marks}, a STACK an array of frames, a VERDICT or NOTICE an object {severity, text, keyed
 * values, children}. What has no key, or has GMP_DOC_VIEW, is not written.
 *
 * Layout (deterministic): objects and arrays indented by two spaces, one member or element a
 * line, except the rows of tables, the frames of stacks, the points, lanes and marks of series,
 * which are each written on one line with no spaces. Strings from a trace go through
 * gmp_json_fputs (valid UTF-8 whatever the bytes); numbers that are not finite are null. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_escape.h"
#include "gmp_render.h"

typedef struct jw {
    FILE *f;
    int indent;  /* depth of the container being written */
    int compact; /* inside an element written on one line */
    int first;   /* nothing written yet in the current container */
    gmp_err err; /* GMP_ERR_NOMEM when a text could not be assembled */
} jw;

/* ---- layout ---- */

/* Before a member or an element: the comma, and the line break of indented containers. */
static void j_sep(jw *J)
{
    if (!J->first)
        fputc(',', J->f);
    J->first = 0;
    if (!J->compact)
        fprintf(J->f, "\n%*s", 2 * J->indent, "");
}

static int j_open(jw *J, int c)
{
    fputc(c, J->f);
    int was = J->first;
    J->first = 1;
    J->indent++;
    return was;
}

static void j_close(jw *J, int c, int was)
{
    J->indent--;
    if (!J->first && !J->compact)
        fprintf(J->f, "\n%*s", 2 * J->indent, "");
    fputc(c, J->f);
    J->first = was;
}

static void j_str(jw *J, const char *s, size_t n)
{
    gmp_json_fputs(J->f, s ? s : "", s ? n : 0);
}

static void j_cstr(jw *J, const char *s)
{
    j_str(J, s, s ? strlen(s) : 0);
}

static void j_key(jw *J, const char *key)
{
    j_sep(J);
    j_cstr(J, key);
    fputs(J->compact ? ":" : ": ", J->f);
}

/* An element written on one line ('{' or '['), closed by j_close_line. */
typedef struct jline {
    int compact, first;
} jline;

static jline j_open_line(jw *J, int c)
{
    j_sep(J);
    jline was = {.compact = J->compact};
    J->compact = 1;
    was.first = j_open(J, c);
    return was;
}

static void j_close_line(jw *J, int c, jline was)
{
    j_close(J, c, was.first);
    J->compact = was.compact;
}

/* ---- values ---- */

static void j_u64(jw *J, uint64_t u)
{
    fprintf(J->f, "%" PRIu64, u);
}

static void j_i64(jw *J, int64_t i)
{
    fprintf(J->f, "%" PRId64, i);
}

static void j_hex(jw *J, uint64_t x)
{
    fprintf(J->f, "\"0x%" PRIx64 "\"", x);
}

/* The shortest of %.15g, %.16g, %.17g that reads back exactly, always with a fraction or an
 * exponent (a reader that types numbers gets a float for every PCT and REAL); null when not
 * finite. */
static void j_real(jw *J, double d)
{
    if (!isfinite(d)) {
        fputs("null", J->f);
        return;
    }
    char b[40];
    for (int p = 15; p <= 17; p++) {
        snprintf(b, sizeof b, "%.*g", p, d);
        if (strtod(b, NULL) == d)
            break;
    }
    fputs(b, J->f);
    if (!strpbrk(b, ".e"))
        fputs(".0", J->f); /* a number with a fraction whatever its value: "100.0" */
}

static void j_stack(jw *J, const gmp_doc_stack *s);

static void j_val(jw *J, const gmp_doc_val *v)
{
    switch (v->type) {
    case GMP_DOC_LIT: j_str(J, v->s.ptr, v->s.len); break;
    case GMP_DOC_STR:
        if (v->s.len)
            j_str(J, v->s.ptr, v->s.len);
        else
            fputs("null", J->f);
        break;
    case GMP_DOC_BYTES:
    case GMP_DOC_COUNT:
    case GMP_DOC_TIME:
    case GMP_DOC_DUR: j_u64(J, v->u); break;
    case GMP_DOC_SBYTES:
    case GMP_DOC_INT:
    case GMP_DOC_DEVICE: j_i64(J, v->i); break;
    case GMP_DOC_PCT:
    case GMP_DOC_REAL: j_real(J, v->d); break;
    case GMP_DOC_BOOL: fputs(v->u ? "true" : "false", J->f); break;
    case GMP_DOC_HEX: j_hex(J, v->u); break;
    case GMP_DOC_STACK:
        if (v->stack && v->stack->n)
            j_stack(J, v->stack);
        else
            fputs("null", J->f);
        break;
    case GMP_DOC_NONE:
    default: fputs("null", J->f); break;
    }
}

/* A value of a line or an item is a member when it has a key and is not VIEW. */
static int keyed(const gmp_doc_val *v)
{
    return v->key && !(v->flags & GMP_DOC_VIEW);
}

static void j_line_members(jw *J, const gmp_doc_line *l)
{
    for (size_t i = 0; i < l->n; i++) {
        if (!keyed(&l->v[i]))
            continue;
        j_key(J, l->v[i].key);
        j_val(J, &l->v[i]);
    }
}

/* ---- stacks ---- */

static int has(gmp_str s)
{
    return s.ptr && s.len;
}

static void j_str_or_null(jw *J, gmp_str s)
{
    if (has(s))
        j_str(J, s.ptr, s.len);
    else
        fputs("null", J->f);
}

/* "PATH+0xOFF" */
static void j_module(jw *J, const gmp_doc_frame *x)
{
    char off[32];
    int ol = snprintf(off, sizeof off, "+0x%" PRIx64, x->offset);
    char *b = malloc((size_t)x->module.len + (size_t)ol + 1);
    if (!b) {
        J->err = GMP_ERR_NOMEM;
        j_str(J, x->module.ptr, x->module.len);
        return;
    }
    memcpy(b, x->module.ptr, x->module.len);
    memcpy(b + x->module.len, off, (size_t)ol + 1);
    j_str(J, b, x->module.len + (size_t)ol);
    free(b);
}

/* Python: {function, file, line}; native: {function, file (null: unknown), line, module
 * ("PATH+0xOFF" or null), address, inlined (when set), unknown (why function is unknown)}. */
static void j_frame(jw *J, const gmp_doc_frame *x)
{
    jline was = j_open_line(J, '{');
    j_key(J, "function");
    if (x->python)
        j_str(J, x->function.ptr, x->function.len);
    else
        j_str_or_null(J, x->function);
    j_key(J, "file");
    if (x->python)
        j_str(J, x->file.ptr, x->file.len);
    else
        j_str_or_null(J, x->file);
    j_key(J, "line");
    j_u64(J, x->line);
    if (!x->python) {
        j_key(J, "module");
        if (has(x->module))
            j_module(J, x);
        else
            fputs("null", J->f);
        j_key(J, "address");
        j_hex(J, x->address);
        if (x->inlined) {
            j_key(J, "inlined");
            fputs("true", J->f);
        }
        if (has(x->unknown)) {
            j_key(J, "unknown");
            j_str(J, x->unknown.ptr, x->unknown.len);
        }
    }
    if (x->internal) {
        j_key(J, "internal");
        fputs("true", J->f);
    }
    j_close_line(J, '}', was);
}

static void j_stack(jw *J, const gmp_doc_stack *s)
{
    int wo = j_open(J, '[');
    for (size_t i = 0; i < s->n; i++)
        j_frame(J, &s->frames[i]);
    j_close(J, ']', wo);
}

/* ---- the text of a verdict or notice: the line as a markup shows it, unescaped ---- */

/* The line's text into dst (NULL: only its length). DATA values are not shown; an empty STR shows
 * its `none`; a stack shows nothing. */
static size_t line_text(const gmp_doc_line *l, char *dst)
{
    size_t n = 0;
    char b[64];
    for (size_t i = 0; i < l->n; i++) {
        const gmp_doc_val *v = &l->v[i];
        const char *p = "";
        size_t len = 0;
        if (v->flags & GMP_DOC_DATA)
            continue;
        if (v->type == GMP_DOC_LIT || (v->type == GMP_DOC_STR && v->s.len)) {
            p = v->s.ptr;
            len = v->s.len;
        } else if (v->type == GMP_DOC_STR && v->none) {
            p = v->none;
            len = strlen(p);
        } else if (v->type != GMP_DOC_STR && v->type != GMP_DOC_STACK) {
            p = gmp_doc_fmt(v, b, sizeof b);
            len = strlen(p);
        }
        if (dst && len)
            memcpy(dst + n, p, len);
        n += len;
    }
    return n;
}

static void j_text(jw *J, const gmp_doc_line *l)
{
    size_t n = line_text(l, NULL);
    char *p = malloc(n + 1);
    if (!p) {
        J->err = GMP_ERR_NOMEM;
        n = 0;
    } else {
        line_text(l, p);
    }
    j_str(J, p, n);
    free(p);
}

/* ---- blocks ---- */

/* A keyless SECTION: its heading's keyed values and its children belong to the enclosing
 * object. */
static int merged(const gmp_doc_block *b)
{
    return b->kind == GMP_DOC_SECTION && !b->key;
}

static int is_item(const gmp_doc_block *b)
{
    return b->key && (b->flags & GMP_DOC_ITEM) && !merged(b) && !(b->flags & GMP_DOC_VIEW);
}

/* The members of an object, in order: its children, with the contents of keyless sections in
 * their place (a pre-order walk that enters keyless sections only). */
static const gmp_doc_block *m_next(const gmp_doc_block *b, const gmp_doc_block *scope)
{
    if (merged(b) && !(b->flags & GMP_DOC_VIEW) && b->first)
        return b->first;
    while (b != scope && !b->next)
        b = b->parent;
    return b == scope ? NULL : b->next;
}

static void j_members(jw *J, const gmp_doc_block *scope);

static void j_block(jw *J, const gmp_doc_block *b);

static void j_object(jw *J, const gmp_doc_block *b)
{
    int wo = j_open(J, '{');
    if (b->kind == GMP_DOC_VERDICT || b->kind == GMP_DOC_NOTICE) {
        j_key(J, "severity");
        j_cstr(J, gmp_doc_severity_name(b->severity));
        j_key(J, "text");
        j_text(J, &b->title);
    }
    j_line_members(J, &b->title);
    j_members(J, b);
    j_close(J, '}', wo);
}

static void j_kv_members(jw *J, const gmp_doc_block *b)
{
    for (size_t i = 0; i < b->nitems; i++)
        if (!(b->items[i].flags & GMP_DOC_VIEW))
            j_line_members(J, &b->items[i].value);
}

/* An array of n elements, each written on one line by fn (inside its '{' or '['). */
typedef void (*j_elem_fn)(jw *J, const gmp_doc_block *b, size_t i);

static void j_lines(jw *J, const gmp_doc_block *b, size_t n, int c, j_elem_fn fn)
{
    int wo = j_open(J, '[');
    for (size_t i = 0; i < n; i++) {
        jline was = j_open_line(J, c);
        fn(J, b, i);
        j_close_line(J, c == '{' ? '}' : ']', was);
    }
    j_close(J, ']', wo);
}

static void j_row(jw *J, const gmp_doc_block *b, size_t r)
{
    for (size_t c = 0; c < b->ncols; c++) {
        const gmp_doc_col *col = &b->cols[c];
        if (!col->key || (col->flags & GMP_DOC_VIEW))
            continue;
        j_key(J, col->key);
        j_val(J, &b->cells[r * b->ncols + c]);
    }
}

/* A point: its start (the previous point's end; x0 for the first), as schema 1 wrote it, then
 * the values of the keyed columns; a value of a DOTS column is null where it is 0 (no value). */
static void j_point(jw *J, const gmp_doc_block *b, size_t k)
{
    j_sep(J);
    j_u64(J, k ? b->x[k - 1] : b->x0);
    for (size_t c = 0; c < b->nscols; c++) {
        if (!b->scols[c].key)
            continue;
        uint64_t y = b->y[k * b->nscols + c];
        j_sep(J);
        if (b->scols[c].role == GMP_DOC_S_DOTS && !y)
            fputs("null", J->f);
        else
            j_u64(J, y);
    }
}

/* {label, spans: [{start_ns, end_ns, label}]} */
static void j_lane(jw *J, const gmp_doc_block *b, size_t i)
{
    const gmp_doc_lane *L = &b->lanes[i];
    j_key(J, "label");
    j_cstr(J, L->label);
    j_key(J, "spans");
    int ws = j_open(J, '[');
    for (size_t s = 0; s < L->n; s++) {
        j_sep(J);
        int wsp = j_open(J, '{');
        j_key(J, "start_ns");
        j_u64(J, L->spans[s].t0);
        j_key(J, "end_ns");
        j_u64(J, L->spans[s].t1);
        j_key(J, "label");
        j_str_or_null(J, L->spans[s].label);
        j_close(J, '}', wsp);
    }
    j_close(J, ']', ws);
}

/* {time_ns, label, problem} */
static void j_mark(jw *J, const gmp_doc_block *b, size_t i)
{
    const gmp_doc_mark *m = &b->marks[i];
    j_key(J, "time_ns");
    j_u64(J, m->t);
    j_key(J, "label");
    j_cstr(J, m->label);
    j_key(J, "problem");
    fputs(m->flags & GMP_DOC_BAD ? "true" : "false", J->f);
}

/* {bucket_ns, columns: [time_ns, keys...], points: [[time, values...]], lanes, marks} */
static void j_series(jw *J, const gmp_doc_block *b)
{
    int wo = j_open(J, '{');
    j_key(J, "bucket_ns");
    j_u64(J, b->bucket_ns);

    j_key(J, "columns");
    int was = J->compact;
    J->compact = 1;
    int wa = j_open(J, '[');
    j_sep(J);
    j_cstr(J, b->xkey ? b->xkey : "time_ns");
    for (size_t c = 0; c < b->nscols; c++) {
        if (!b->scols[c].key)
            continue;
        j_sep(J);
        j_cstr(J, b->scols[c].key);
    }
    j_close(J, ']', wa);
    J->compact = was;

    j_key(J, "points");
    j_lines(J, b, b->npoints, '[', j_point);
    if (b->nlanes) {
        j_key(J, "lanes");
        j_lines(J, b, b->nlanes, '{', j_lane);
    }
    if (b->nmarks) {
        j_key(J, "marks");
        j_lines(J, b, b->nmarks, '{', j_mark);
    }
    j_close(J, '}', wo);
}

/* The JSON value of a keyed block. */
static void j_block(jw *J, const gmp_doc_block *b)
{
    switch (b->kind) {
    case GMP_DOC_TABLE: j_lines(J, b, b->nrows, '{', j_row); break;
    case GMP_DOC_SERIES: j_series(J, b); break;
    case GMP_DOC_STACKB:
        if (b->stack.n)
            j_stack(J, &b->stack);
        else
            fputs("[]", J->f);
        break;
    case GMP_DOC_KV: {
        int wo = j_open(J, '{');
        j_kv_members(J, b);
        j_close(J, '}', wo);
        break;
    }
    case GMP_DOC_SECTION:
    case GMP_DOC_VERDICT:
    case GMP_DOC_NOTICE:
    default: j_object(J, b); break;
    }
}

/* The keys of the ITEM arrays already written in one object (a few per object). */
typedef struct keyset {
    const char **k;
    size_t n, cap;
} keyset;

/* 1 when key is in the set; else adds it (0). */
static int key_seen(jw *J, keyset *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->k[i], key))
            return 1;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        const char **k = realloc(s->k, cap * sizeof *k);
        if (!k) {
            J->err = GMP_ERR_NOMEM;
            return 0;
        }
        s->k = k;
        s->cap = cap;
    }
    s->k[s->n++] = key;
    return 0;
}

static void j_members(jw *J, const gmp_doc_block *scope)
{
    keyset done = {0};
    for (const gmp_doc_block *b = scope->first; b; b = m_next(b, scope)) {
        if (b->flags & GMP_DOC_VIEW)
            continue;
        if (merged(b)) {
            j_line_members(J, &b->title); /* its children follow in the walk */
            continue;
        }
        if (b->kind == GMP_DOC_KV && !b->key) {
            j_kv_members(J, b);
            continue;
        }
        if (!b->key)
            continue;
        if (!is_item(b)) {
            j_key(J, b->key);
            j_block(J, b);
            continue;
        }
        if (key_seen(J, &done, b->key))
            continue;
        /* the whole array: b and every later ITEM member of scope with its key */
        j_key(J, b->key);
        int wo = j_open(J, '[');
        for (const gmp_doc_block *x = b; x; x = m_next(x, scope)) {
            if (x != b && (!is_item(x) || strcmp(x->key, b->key)))
                continue;
            j_sep(J);
            j_block(J, x);
        }
        j_close(J, ']', wo);
    }
    free(done.k);
}

gmp_err gmp_render_json(const gmp_doc *d, FILE *f, const gmp_render_opts *o)
{
    (void)o;
    jw J = {.f = f, .first = 1};
    const gmp_doc_block *root = gmp_doc_root_c(d);
    j_object(&J, root);
    fputc('\n', f);
    if (ferror(f))
        return GMP_ERR_IO;
    return J.err;
}
