/* gmp_report_values: the report model's strings and stacks as document values (gmp_doc.h), for
 * every builder of the report (gmp_report_build.c, gmp_report_build_analysis.c). */
#include "gmp_report_values.h"

#include <stdlib.h>
#include <string.h>

gmp_doc_val gmp_report_dv_str(const gmp_report_trace *t, uint32_t i, const char *none)
{
    return gmp_dv_str(gmp_report_str(t, i), none);
}

const gmp_doc_stack *gmp_report_doc_stack(gmp_doc *d, const gmp_report_trace *t, uint32_t stack,
                                          int all_frames)
{
    if (stack == GMP_REPORT_NO_STACK || stack == GMP_REPORT_ALL || stack >= t->nstacks)
        return NULL;
    const gmp_report_stack *s = &t->stacks[stack];
    if (!s->nframes)
        return NULL;
    gmp_doc_stack *ds = gmp_doc_alloc(d, sizeof *ds);
    if (!ds)
        return NULL;
    /* several tables show one stack: its frames are made once (each table marks its own copy of
     * the stack: min_items, show_all) */
    uint64_t key = (uint64_t)stack << 1 | (all_frames != 0);
    const gmp_doc_frame *known = gmp_doc_memo_get(d, t, key);
    if (known) {
        ds->n = s->nframes;
        ds->frames = known;
        return ds;
    }
    gmp_doc_frame *fr = gmp_doc_alloc(d, s->nframes * sizeof *fr);
    uint8_t *cls = gmp_doc_alloc(d, 2 * s->nframes);
    if (!fr || !cls)
        return NULL;
    uint8_t *hide = cls + s->nframes;
    for (size_t i = 0; i < s->nframes; i++)
        cls[i] = s->frames[i].cls;
    if (!all_frames)
        gmp_frames_fold(cls, s->nframes, hide);
    else
        memset(hide, 0, s->nframes);
    for (size_t i = 0; i < s->nframes; i++) {
        const gmp_report_frame *x = &s->frames[i];
        gmp_doc_frame *y = &fr[i];
        char name[1024];
        size_t n = gmp_report_frame_text(t, x, name, sizeof name);
        y->display = gmp_doc_strdup(d, name, n);
        y->python = x->kind == GMP_FRAME_PYTHON;
        y->function = gmp_report_str(t, x->function);
        y->file = gmp_report_str(t, x->file);
        y->line = x->line;
        y->internal = hide[i];
        if (y->python)
            continue;
        y->module = gmp_report_str(t, x->module);
        y->offset = x->offset;
        y->address = x->address;
        y->inlined = x->inlined;
        if (x->outside)
            y->unknown = (gmp_str){"no module", 9};
        else if (x->unknown)
            y->unknown = gmp_report_str(t, x->unknown);
        else if (!x->symbolized)
            y->unknown = (gmp_str){"not symbolized", 14};
    }
    ds->n = s->nframes;
    ds->frames = fr;
    gmp_doc_memo_put(d, t, key, fr);
    return ds;
}

static const gmp_doc_col site_cols[GMP_REPORT_SITE_COLS] = {
    {"kind", "kind", GMP_DOC_LIT, 0},          {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
    {"stack", "stack", GMP_DOC_STACK, 0},      {"device", "device", GMP_DOC_DEVICE, GMP_DOC_DATA},
    {"API", "api", GMP_DOC_STR, GMP_DOC_DATA},
};

size_t gmp_report_site_table(gmp_doc_col *out, const gmp_doc_col *own, size_t n)
{
    memcpy(out, own, n * sizeof *own);
    memcpy(out + n, site_cols, sizeof site_cols);
    return n + GMP_REPORT_SITE_COLS;
}

void gmp_report_site_cells(gmp_doc *d, const gmp_report_trace *t, const gmp_report_view *v,
                           const gmp_analysis_site *s, gmp_doc_val *out)
{
    out[0] = gmp_dv_lit(gmp_mem_kind_name(s->kind));
    out[1] = gmp_report_dv_str(t, s->range, "(no range)");
    out[2] = gmp_dv_stack(gmp_report_doc_stack(d, t, s->stack, v->all_frames));
    out[3] = gmp_dv_device(s->device);
    out[4] = gmp_report_dv_str(t, s->api, "(no API)");
}

/* ---- stacks told apart ---- */

/* The k-th item a markup shows of s (as gmp_render_stack_next walks it): a frame, with the count
 * folded inside it for the first, a frame shown inside the first to tell it apart (via), or a
 * run of internal frames. base: as if nothing were shown to tell it apart (how it looks folded). */
typedef struct item {
    const gmp_doc_frame *f;
    size_t folded, inside;
    int via;
} item;

static size_t items_of(const gmp_doc_stack *s, item *out, size_t max, int base)
{
    size_t i = 0, n = 0;
    if (!s)
        return 0;
    if (s->show_all) {
        for (; i < s->n && n < max; i++)
            out[n++] = (item){&s->frames[i], 0, 0, 0};
        return n;
    }
    size_t k = 0;
    while (k < s->n && s->frames[k].internal)
        k++;
    if (k == s->n) /* all internal: shown whole */
        k = 0;
    else if (n < max) {
        out[n++] = (item){&s->frames[k], 0, k, 0};
        for (size_t j = k; j-- > 0 && n < max && !base;)
            if (s->frames[j].internal == 2)
                out[n++] = (item){&s->frames[j], 0, 0, 1};
        i = k + 1;
    }
    while (i < s->n && n < max) {
        if (!s->frames[i].internal || (s->frames[i].internal == 2 && !base)) {
            out[n++] = (item){&s->frames[i], 0, 0, 0};
            i++;
            continue;
        }
        size_t r = 0;
        while (i < s->n && (s->frames[i].internal == 1 || (s->frames[i].internal && base))) {
            r++;
            i++;
        }
        out[n++] = (item){NULL, r, 0, 0};
    }
    return n;
}

static int item_eq(const item *a, const item *b)
{
    if (!a->f || !b->f)
        return !a->f && !b->f && a->folded == b->folded;
    return a->inside == b->inside && a->via == b->via && a->f->display.len == b->f->display.len &&
           memcmp(a->f->display.ptr, b->f->display.ptr, a->f->display.len) == 0;
}

enum { MAXI = 64 };   /* items compared: stacks alike further than this are alike enough */
enum { MAXF = 1024 }; /* frames of a stack told apart (the report keeps at most 256) */

/* Tells apart a and b, alike even whole once folded, by the frame that differs
 * (gmp_frames_apart): each gets its own copy of its frames, that frame marked 2 (shown). */
static int tell_apart(gmp_doc *d, gmp_doc_stack *a, gmp_doc_stack *b)
{
    if (a->n != b->n || a->n > MAXF || a->show_all || b->show_all)
        return 0;
    gmp_str *na = malloc(2 * a->n * sizeof *na);
    uint8_t *h = malloc(2 * a->n);
    int done = 0;
    if (na && h) {
        gmp_str *nb = na + a->n;
        uint8_t *ha = h, *hb = h + a->n;
        for (size_t i = 0; i < a->n; i++) {
            na[i] = a->frames[i].display;
            nb[i] = b->frames[i].display;
            ha[i] = (uint8_t)a->frames[i].internal;
            hb[i] = (uint8_t)b->frames[i].internal;
        }
        gmp_doc_frame *ca = gmp_frames_apart(na, ha, a->n, nb, hb, b->n)
                                ? gmp_doc_alloc(d, 2 * a->n * sizeof *ca)
                                : NULL;
        if (ca) {
            gmp_doc_frame *cb = ca + a->n;
            memcpy(ca, a->frames, a->n * sizeof *ca);
            memcpy(cb, b->frames, b->n * sizeof *cb);
            for (size_t i = 0; i < a->n; i++) {
                ca[i].internal = ha[i];
                cb[i].internal = hb[i];
            }
            a->frames = ca;
            b->frames = cb;
            done = 1;
        }
    }
    free(na);
    free(h);
    return done;
}

/* The items of each row's stack, computed once per table (rows x MAXI). */
typedef struct rowitems {
    size_t n;
    item it[MAXI];
} rowitems;

static size_t common_prefix(const rowitems *a, const rowitems *b, int *same)
{
    size_t k = 0;
    while (k < a->n && k < b->n && item_eq(&a->it[k], &b->it[k]))
        k++;
    *same = k == a->n && k == b->n;
    return k;
}

static void table_apart(gmp_doc *d, gmp_doc_block *tb)
{
    if (tb->nrows < 2 || tb->nrows > 2000)
        return;
    rowitems *ri = NULL, *rb = NULL; /* as shown; as folded (base) */
    for (size_t c = 0; c < tb->ncols; c++) {
        if (tb->cols[c].type != GMP_DOC_STACK)
            continue;
        if (!ri && !(ri = malloc(2 * tb->nrows * sizeof *ri)))
            return;
        rb = ri + tb->nrows;
        for (size_t i = 0; i < tb->nrows; i++) {
            const gmp_doc_val *v = &tb->cells[i * tb->ncols + c];
            int st = v->type == GMP_DOC_STACK;
            ri[i].n = st ? items_of(v->stack, ri[i].it, MAXI, 0) : 0;
            rb[i].n = st ? items_of(v->stack, rb[i].it, MAXI, 1) : 0;
        }
        for (size_t i = 0; i < tb->nrows; i++) {
            gmp_doc_val *vi = &tb->cells[i * tb->ncols + c];
            if (!ri[i].n)
                continue;
            for (size_t j = i + 1; j < tb->nrows; j++) {
                gmp_doc_val *vj = &tb->cells[j * tb->ncols + c];
                if (!ri[j].n || !item_eq(&rb[i].it[0], &rb[j].it[0]))
                    continue; /* the usual case: different from the first item on */
                int same;
                gmp_doc_stack *a = (gmp_doc_stack *)vi->stack, *b = (gmp_doc_stack *)vj->stack;
                /* alike even whole once folded: told apart by the frame that differs, for each
                 * other stack it looks like (a frame shown for another pair may not differ) */
                common_prefix(&rb[i], &rb[j], &same);
                if (same && tell_apart(d, a, b)) {
                    ri[i].n = items_of(a, ri[i].it, MAXI, 0);
                    ri[j].n = items_of(b, ri[j].it, MAXI, 0);
                }
                size_t k = common_prefix(&ri[i], &ri[j], &same);
                if (same)
                    continue; /* the same names (the same call site, e.g. in two kinds) */
                if (a->min_items < k + 1)
                    a->min_items = k + 1;
                if (b->min_items < k + 1)
                    b->min_items = k + 1;
            }
        }
    }
    free(ri);
}

static void blocks_apart(gmp_doc *d, gmp_doc_block *b)
{
    for (gmp_doc_block *c = b->first; c; c = c->next) {
        if (c->kind == GMP_DOC_TABLE)
            table_apart(d, c);
        blocks_apart(d, c);
    }
}

void gmp_report_stacks_apart(gmp_doc *d)
{
    blocks_apart(d, gmp_doc_root(d));
}
