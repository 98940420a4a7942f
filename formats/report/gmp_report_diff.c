/* gmp_report_diff: builds the document of `gpumemprof diff` (gmp_report_diff.h) from a comparison
 * (gmp_diff.h) of two profiles taken from report models: the two traces, per device the peaks,
 * leaks and allocation counts of A and B with the change B - A, then per device each compared
 * table, biggest changes first. What the comparison says is decided here; gmp_render.h writes it
 * in every format. Stacks are document stacks of the report (gmp_report_values.h): one frame
 * format, one separator and one folding in report and diff.
 *
 * The JSON (schema gpumemprof-diff/3, docs/diff.md) is not shaped like the text: it keeps each
 * table as one array over all devices and each side of a device as an object, so those parts are
 * data-only blocks (GMP_DOC_DATA) beside the blocks the markups show (without JSON keys). */
#include "gmp_report_diff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_report_values.h"
#include "gmp_strbuf.h"
#include "gmp_trace.h"

#define SCHEMA "gpumemprof-diff/3"

/* ---- profiles from report models ---- */

/* A stack's key: every frame as the report names it, innermost first, one per line (folding
 * aside: two stacks that differ only in internal frames stay two rows, as in the report). */
static char *stack_key(const gmp_report_trace *t, uint32_t stack, size_t *len)
{
    gmp_strbuf sb = {0};
    if (stack < t->nstacks) {
        const gmp_report_stack *st = &t->stacks[stack];
        char name[1024];
        for (size_t i = 0; i < st->nframes; i++) {
            size_t n = gmp_report_frame_text(t, &st->frames[i], name, sizeof name);
            if (i)
                gmp_strbuf_add(&sb, "\n", 1);
            gmp_strbuf_add(&sb, name, n);
        }
    }
    if (sb.oom) {
        free(sb.p);
        return NULL;
    }
    *len = sb.n;
    return sb.p ? sb.p : calloc(1, 1);
}

static gmp_err add_group(gmp_diff_profile *p, const gmp_report_trace *t, gmp_diff_table tab,
                         gmp_report_what what, unsigned by)
{
    gmp_report_view v;
    memset(&v, 0, sizeof v);
    v.device = INT64_MIN;
    size_t n = 0;
    gmp_report_row *a = gmp_report_group(t, &v, what, by, &n);
    if (!a)
        return GMP_ERR_NOMEM;
    gmp_err e = GMP_OK;
    for (size_t i = 0; i < n && e == GMP_OK; i++) {
        const gmp_report_row *g = &a[i];
        int32_t kind = by & GMP_REPORT_BY_KIND ? (int32_t)g->kind : -1;
        if (by & GMP_REPORT_BY_STACK) {
            size_t len = 0;
            char *key = stack_key(t, g->stack, &len);
            if (!key) {
                e = GMP_ERR_NOMEM;
                break;
            }
            e = gmp_diff_profile_add(p, tab, g->device, kind, key, len, g->bytes, g->count,
                                     g->stack < t->nstacks ? g->stack : UINT32_MAX);
            free(key);
        } else {
            /* a range path, or the first frame a stack shows (BY_FRAME) */
            gmp_str k = gmp_report_str(t, g->range);
            e = gmp_diff_profile_add(p, tab, g->device, kind, k.ptr, k.len, g->bytes, g->count,
                                     UINT32_MAX);
        }
    }
    free(a);
    return e;
}

gmp_err gmp_report_diff_profile(gmp_diff_profile **out, const gmp_report_trace *t, const char *name)
{
    *out = NULL;
    gmp_diff_profile *p = gmp_diff_profile_new(name);
    if (!p)
        return GMP_ERR_NOMEM;
    p->complete = t->sum.complete;
    snprintf(p->completeness, sizeof p->completeness, "%s", t->sum.completeness);
    p->end = (int)t->end;
    p->has_ranges = t->has_ranges;
    gmp_err e = GMP_OK;
    p->dev = calloc(t->ndevices ? t->ndevices : 1, sizeof *p->dev);
    if (!p->dev)
        e = GMP_ERR_NOMEM;
    for (size_t i = 0; e == GMP_OK && i < t->ndevices; i++) {
        const gmp_report_device *d = &t->devices[i];
        if (!d->listed)
            continue; /* the host slot only when it has device memory, as in the report */
        gmp_diff_devinfo *o = &p->dev[p->ndev];
        gmp_str nm = d->has_def ? gmp_report_str(t, d->name) : (gmp_str){"", 0};
        if (!(o->name = malloc(nm.len + 1))) {
            e = GMP_ERR_NOMEM;
            break;
        }
        memcpy(o->name, nm.ptr, nm.len);
        o->name[nm.len] = 0;
        p->ndev++;
        o->id = d->id;
        o->total_bytes = d->total_bytes;
        o->peak_allocated = d->d.peak_allocated;
        o->peak_time_ns = d->d.peak_time_ns;
        o->peak_reserved = d->d.peak_reserved;
        o->allocs = d->d.allocs;
        o->leaked_bytes = d->leaked_bytes;
        o->leaked_allocations = d->leaked_count;
    }
    if (e == GMP_OK)
        e = add_group(p, t, GMP_DIFF_BY_RANGE, GMP_REPORT_PEAK, GMP_REPORT_BY_RANGE);
    if (e == GMP_OK)
        e = add_group(p, t, GMP_DIFF_BY_STACK, GMP_REPORT_PEAK, GMP_REPORT_BY_STACK);
    if (e == GMP_OK)
        e = add_group(p, t, GMP_DIFF_BY_FRAME, GMP_REPORT_PEAK, GMP_REPORT_BY_FRAME);
    if (e == GMP_OK)
        e = add_group(p, t, GMP_DIFF_LEAKS, GMP_REPORT_LEAKS,
                      GMP_REPORT_BY_KIND | GMP_REPORT_BY_RANGE);
    if (e == GMP_OK)
        e = add_group(p, t, GMP_DIFF_LEAKS_BY_FRAME, GMP_REPORT_LEAKS,
                      GMP_REPORT_BY_KIND | GMP_REPORT_BY_FRAME);
    if (e != GMP_OK) {
        gmp_diff_profile_free(p);
        return e;
    }
    gmp_diff_profile_finish(p);
    *out = p;
    return GMP_OK;
}

/* ---- the document ---- */

typedef struct dctx {
    gmp_doc *d;
    const gmp_diff *D;
    const gmp_diff_profile *a, *b;
    const gmp_report_trace *ta, *tb;
    size_t top;
    int all_frames;
    int leaks;  /* both traces end at the program's exit: what is live then is leaked */
    int ranges; /* either trace has ranges */
} dctx;

/* A string of a trace (a path, a device name, a range path, a stack), copied into the document. */
static gmp_doc_val str(gmp_doc *d, const char *s, const char *none)
{
    return gmp_dv_str(gmp_doc_strdup(d, s, strlen(s)), none);
}

static gmp_doc_val change_count(int64_t n)
{
    return gmp_dv_f(gmp_dv_int(n), GMP_DOC_SIGN);
}

/* The change in percent of a: "+23.8%", "new" (a is 0), "gone" (b is 0), nothing when equal. */
static gmp_doc_val change_pct(uint64_t a, uint64_t b)
{
    if (a == b)
        return gmp_dv_none();
    if (a == 0)
        return gmp_dv_lit("new");
    if (b == 0)
        return gmp_dv_lit("gone");
    return gmp_dv_f(gmp_dv_pct(((double)b - (double)a) * 100.0 / (double)a), GMP_DOC_SIGN);
}

/* "device 0: NAME (A: OTHER NAME)" or "Device host" */
static void device_line(gmp_doc *d, gmp_doc_line *l, const gmp_diff_dev *dev)
{
    const gmp_diff_devinfo *x = dev->b ? dev->b : dev->a;
    gmp_doc_line_add(d, l, gmp_dv_device(dev->id));
    if (dev->id < 0)
        return;
    if (x->name[0])
        gmp_doc_linef(d, l, ": %v", str(d, x->name, NULL));
    if (dev->a && dev->b && dev->a->name[0] && strcmp(dev->a->name, dev->b->name) != 0)
        gmp_doc_linef(d, l, " (A: %v)", str(d, dev->a->name, NULL));
}

static const char *end_name(int end)
{
    return end == 0 ? "exit" : end == 1 ? "snapshot" : "cut";
}

/* JSON only: "a"/"b": {path, complete, completeness, end} */
static void trace_data(gmp_doc *d, gmp_doc_block *parent, const char *key,
                       const gmp_diff_profile *p)
{
    gmp_doc_block *kv = gmp_doc_kv(d, gmp_doc_section(d, parent, key, GMP_DOC_DATA, NULL));
    gmp_doc_item_add(d, kv, "path", GMP_DOC_DATA, "%v", gmp_dv_k(str(d, p->path, NULL), "path"));
    gmp_doc_item_add(d, kv, "complete", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_bool(p->complete), "complete"));
    gmp_doc_item_add(d, kv, "completeness", GMP_DOC_DATA, "%v",
                     gmp_dv_k(str(d, p->completeness, NULL), "completeness"));
    gmp_doc_item_add(d, kv, "end", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_lit(end_name(p->end)), "end"));
}

/* JSON only: one side of a device ("a", "b"), null when the trace has no such device */
static void side_data(gmp_doc *d, gmp_doc_block *parent, const char *key, const gmp_diff_devinfo *x,
                      int leaks)
{
    if (!x) {
        gmp_doc_item_add(d, gmp_doc_kv(d, parent), key, GMP_DOC_DATA, "%v",
                         gmp_dv_k(gmp_dv_none(), key));
        return;
    }
    gmp_doc_block *kv = gmp_doc_kv(d, gmp_doc_section(d, parent, key, GMP_DOC_DATA, NULL));
    gmp_doc_item_add(d, kv, "peak allocated", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_bytes(x->peak_allocated), "peak_allocated_bytes"));
    gmp_doc_item_add(d, kv, "peak time", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_time(x->peak_time_ns, 0), "peak_time_ns"));
    gmp_doc_item_add(d, kv, "peak reserved", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_bytes(x->peak_reserved), "peak_reserved_bytes"));
    gmp_doc_item_add(d, kv, "allocations", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_count(x->allocs), "allocations"));
    /* what is live at the end is leaked only when the recording ends at the program's exit
     * (null otherwise, as in the report's JSON) */
    gmp_doc_item_add(d, kv, "live at end", GMP_DOC_DATA, "%v%v",
                     gmp_dv_k(gmp_dv_bytes(x->leaked_bytes), "live_at_end_bytes"),
                     gmp_dv_k(gmp_dv_count(x->leaked_allocations), "live_at_end_allocations"));
    gmp_doc_item_add(
        d, kv, "leaked", GMP_DOC_DATA, "%v",
        gmp_dv_k(leaks ? gmp_dv_bytes(x->leaked_bytes) : gmp_dv_none(), "leaked_bytes"));
    gmp_doc_item_add(d, kv, "leaked allocations", GMP_DOC_DATA, "%v",
                     gmp_dv_k(leaks ? gmp_dv_count(x->leaked_allocations) : gmp_dv_none(),
                              "leaked_allocations"));
}

/* One figure of a device in A and B ("-" for a trace without the device; counts when
 * count, else bytes), the change B - A and, for bytes, the change in percent. */
static void figure_row(gmp_doc *d, gmp_doc_block *t, const char *label, const gmp_diff_dev *dev,
                       uint64_t a, uint64_t b, int count)
{
    gmp_doc_val *r = gmp_doc_row(d, t);
    a = dev->a ? a : 0;
    b = dev->b ? b : 0;
    r[0] = gmp_dv_lit(label);
    r[1] = !dev->a ? gmp_dv_lit("-") : count ? gmp_dv_count(a) : gmp_dv_bytes(a);
    r[2] = !dev->b ? gmp_dv_lit("-") : count ? gmp_dv_count(b) : gmp_dv_bytes(b);
    r[3] = count ? change_count(gmp_diff_delta(a, b)) : gmp_dv_sbytes(gmp_diff_delta(a, b));
    if (!count)
        r[4] = change_pct(a, b);
}

static void device_block(const dctx *c, gmp_doc_block *parent, const gmp_diff_dev *dev)
{
    static const gmp_doc_col cols[] = {
        {"", NULL, GMP_DOC_LIT, 0},    {"A", NULL, GMP_DOC_BYTES, 0},
        {"B", NULL, GMP_DOC_BYTES, 0}, {"change", NULL, GMP_DOC_SBYTES, 0},
        {"%", NULL, GMP_DOC_PCT, 0},
    };
    gmp_doc *d = c->d;
    const gmp_diff_devinfo *x = dev->b ? dev->b : dev->a;
    gmp_doc_block *s = gmp_doc_section(d, parent, "devices", GMP_DOC_ITEM, NULL);

    gmp_doc_block *kv = gmp_doc_kv(d, s);
    gmp_doc_item_add(d, kv, "id", GMP_DOC_DATA, "%v", gmp_dv_k(gmp_dv_int(dev->id), "id"));
    gmp_doc_item_add(d, kv, "name", GMP_DOC_DATA, "%v", gmp_dv_k(str(d, x->name, NULL), "name"));
    gmp_doc_item_add(d, kv, "total", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_bytes(x->total_bytes), "total_bytes"));
    side_data(d, s, "a", dev->a, c->a->end == 0);
    side_data(d, s, "b", dev->b, c->b->end == 0);
    uint64_t pa = dev->a ? dev->a->peak_allocated : 0, pb = dev->b ? dev->b->peak_allocated : 0;
    uint64_t ra = dev->a ? dev->a->peak_reserved : 0, rb = dev->b ? dev->b->peak_reserved : 0;
    uint64_t la = dev->a ? dev->a->leaked_bytes : 0, lb = dev->b ? dev->b->leaked_bytes : 0;
    uint64_t ca = dev->a ? dev->a->allocs : 0, cb = dev->b ? dev->b->allocs : 0;
    kv = gmp_doc_kv(d, gmp_doc_section(d, s, "delta", GMP_DOC_DATA, NULL));
    gmp_doc_item_add(d, kv, "peak allocated", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_sbytes(gmp_diff_delta(pa, pb)), "peak_allocated_bytes"));
    gmp_doc_item_add(d, kv, "peak reserved", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_sbytes(gmp_diff_delta(ra, rb)), "peak_reserved_bytes"));
    gmp_doc_item_add(d, kv, "live at end", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_sbytes(gmp_diff_delta(la, lb)), "live_at_end_bytes"));
    gmp_doc_item_add(
        d, kv, "leaked", GMP_DOC_DATA, "%v",
        gmp_dv_k(c->leaks ? gmp_dv_sbytes(gmp_diff_delta(la, lb)) : gmp_dv_none(), "leaked_bytes"));
    gmp_doc_item_add(d, kv, "allocations", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_int(gmp_diff_delta(ca, cb)), "allocations"));

    gmp_doc_block *t = gmp_doc_table(d, s, NULL, cols, sizeof cols / sizeof *cols);
    gmp_doc_linef(d, &t->title, "device ");
    device_line(d, &t->title, dev);
    figure_row(d, t, "peak allocated", dev, pa, pb, 0);
    figure_row(d, t, "peak reserved", dev, ra, rb, 0);
    /* the report's words: leaked only when both recordings end at the program's exit */
    figure_row(d, t, c->leaks ? "leaked at exit" : "live at end (not leaks)", dev, la, lb, 0);
    figure_row(d, t, "allocations", dev, ca, cb, 1);
}

/* How each table is shown. */
static const char *table_title(const dctx *c, int tab)
{
    switch (tab) {
    case GMP_DIFF_BY_RANGE: return "live at the peak, by range";
    case GMP_DIFF_BY_STACK: return "live at the peak, by call stack";
    case GMP_DIFF_BY_FRAME: return "live at the peak, by user frame";
    case GMP_DIFF_LEAKS:
        return c->leaks ? "leaks (live at exit), by kind and range"
                        : "live at the end of the recording (not leaks), by kind and range";
    default:
        return c->leaks ? "leaks (live at exit), by kind and user frame"
                        : "live at the end of the recording (not leaks), by kind and user frame";
    }
}

static const char *table_key(const dctx *c, int tab)
{
    switch (tab) {
    case GMP_DIFF_BY_RANGE: return "live_at_peak_by_range";
    case GMP_DIFF_BY_STACK: return "live_at_peak_by_stack";
    case GMP_DIFF_BY_FRAME: return "live_at_peak_by_frame";
    case GMP_DIFF_LEAKS: return c->leaks ? "leaks" : "live_at_end";
    default: return c->leaks ? "leaks_by_frame" : "live_at_end_by_frame";
    }
}

/* The key column: its title and JSON key, and its value for row x. */
static const char *key_title(int tab)
{
    return tab == GMP_DIFF_BY_STACK ? "stack (innermost first)"
           : tab == GMP_DIFF_BY_FRAME || tab == GMP_DIFF_LEAKS_BY_FRAME
               ? "frame (innermost user frame)"
               : "range";
}

static const char *key_json(int tab)
{
    return tab == GMP_DIFF_BY_STACK                                     ? "stack"
           : tab == GMP_DIFF_BY_FRAME || tab == GMP_DIFF_LEAKS_BY_FRAME ? "frame"
                                                                        : "range";
}

static gmp_doc_type key_type(int tab)
{
    return tab == GMP_DIFF_BY_STACK ? GMP_DOC_STACK : GMP_DOC_STR;
}

static gmp_doc_val key_val(const dctx *c, int tab, const gmp_diff_row *x)
{
    if (tab == GMP_DIFF_BY_STACK) {
        /* the stack as the report shows it, from the trace that has it (A first) */
        const gmp_doc_stack *st = NULL;
        if (x->a_ref != UINT32_MAX && c->ta)
            st = gmp_report_doc_stack(c->d, c->ta, x->a_ref, c->all_frames);
        else if (x->b_ref != UINT32_MAX && c->tb)
            st = gmp_report_doc_stack(c->d, c->tb, x->b_ref, c->all_frames);
        if (st)
            return gmp_dv_stack(st);
        return str(c->d, "", "(no stack recorded)");
    }
    if (tab == GMP_DIFF_BY_FRAME || tab == GMP_DIFF_LEAKS_BY_FRAME)
        return str(c->d, x->key, "(no stack recorded)");
    return str(c->d, x->key, "(no range)");
}

static int is_leaks(int tab)
{
    return tab == GMP_DIFF_LEAKS || tab == GMP_DIFF_LEAKS_BY_FRAME;
}

/* What the markups show of table tab for one device: its first top rows. */
static void device_table(const dctx *c, gmp_doc_block *parent, const gmp_diff_dev *dev, int tab)
{
    gmp_doc *d = c->d;
    const gmp_diff *D = c->D;
    const gmp_doc_col cols[] = {
        {"A", NULL, GMP_DOC_BYTES, 0},
        {"B", NULL, GMP_DOC_BYTES, 0},
        {"change", NULL, GMP_DOC_SBYTES, 0},
        {"%", NULL, GMP_DOC_PCT, 0},
        {"count", NULL, GMP_DOC_INT, 0},
        {"kind", NULL, GMP_DOC_LIT, 0},
        {key_title(tab), NULL, key_type(tab), 0},
    };
    size_t n = 0, keyed = 0;
    for (size_t k = 0; k < D->nrows[tab]; k++) {
        n += D->rows[tab][k].device == dev->id;
        keyed += D->rows[tab][k].device == dev->id && D->rows[tab][k].key[0];
    }
    /* a table by stack or frame where nothing has a stack says nothing (the report leaves it
     * out too) */
    if (!n || (!keyed && tab != GMP_DIFF_BY_RANGE && tab != GMP_DIFF_LEAKS))
        return;
    gmp_doc_block *s = gmp_doc_section(d, parent, NULL, 0, "Device ");
    device_line(d, &s->title, dev);
    gmp_doc_linef(d, &s->title, ": %v, biggest changes first", gmp_dv_lit(table_title(c, tab)));
    gmp_doc_block *t = NULL;
    int leaks = is_leaks(tab);
    if (leaks) {
        t = gmp_doc_table(d, s, NULL, cols, 7);
    } else {
        gmp_doc_col cc[6];
        memcpy(cc, cols, 5 * sizeof *cc);
        cc[5] = cols[6];
        t = gmp_doc_table(d, s, NULL, cc, 6);
    }
    size_t shown = 0;
    for (size_t k = 0; k < D->nrows[tab]; k++) {
        const gmp_diff_row *x = &D->rows[tab][k];
        if (x->device != dev->id || (c->top && shown >= c->top))
            continue;
        shown++;
        gmp_doc_val *r = gmp_doc_row(d, t);
        r[0] = gmp_dv_bytes(x->a_bytes);
        r[1] = gmp_dv_bytes(x->b_bytes);
        r[2] = gmp_dv_sbytes(x->delta_bytes);
        r[3] = change_pct(x->a_bytes, x->b_bytes);
        r[4] = change_count(x->delta_count);
        if (leaks)
            r[5] = gmp_dv_lit(gmp_mem_kind_name((unsigned)x->kind));
        r[leaks ? 6 : 5] = key_val(c, tab, x);
    }
    if (shown < n)
        t->total = n;
}

/* JSON only: table tab over all devices, the first top rows of each device. */
static void table_data(const dctx *c, gmp_doc_block *parent, int tab)
{
    gmp_doc *d = c->d;
    const gmp_diff *D = c->D;
    const char *key = key_json(tab);
    const gmp_doc_col cols[] = {
        {"device", "device", GMP_DOC_DEVICE, GMP_DOC_DATA},
        {"kind", "kind", GMP_DOC_LIT, GMP_DOC_DATA},
        {key, key, key_type(tab), GMP_DOC_DATA},
        {"A", "a_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"A count", "a_count", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"B", "b_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"B count", "b_count", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"change", "delta_bytes", GMP_DOC_SBYTES, GMP_DOC_DATA},
        {"count change", "delta_count", GMP_DOC_INT, GMP_DOC_DATA},
    };
    int kind = is_leaks(tab);
    gmp_doc_col cc[9];
    size_t nc = 0;
    for (size_t i = 0; i < 9; i++)
        if (kind || i != 1)
            cc[nc++] = cols[i];
    gmp_doc_block *t = gmp_doc_table(d, parent, table_key(c, tab), cc, nc);
    t->flags |= GMP_DOC_DATA;
    size_t shown = 0;
    for (size_t k = 0; k < D->nrows[tab]; k++) {
        const gmp_diff_row *x = &D->rows[tab][k];
        if (k && x->device != D->rows[tab][k - 1].device)
            shown = 0;
        if (c->top && shown >= c->top)
            continue;
        shown++;
        gmp_doc_val *r = gmp_doc_row(d, t), *p = r;
        *p++ = gmp_dv_device(x->device);
        if (kind)
            *p++ = gmp_dv_lit(gmp_mem_kind_name((unsigned)x->kind));
        gmp_doc_val kv = key_val(c, tab, x);
        /* JSON: null where there is no key (no range, no stack) */
        *p++ = kv.type == GMP_DOC_STR && !kv.s.len ? gmp_dv_str(kv.s, NULL) : kv;
        *p++ = gmp_dv_bytes(x->a_bytes);
        *p++ = gmp_dv_count(x->a_count);
        *p++ = gmp_dv_bytes(x->b_bytes);
        *p++ = gmp_dv_count(x->b_count);
        *p++ = gmp_dv_sbytes(x->delta_bytes);
        *p = gmp_dv_int(x->delta_count);
    }
}

gmp_doc *gmp_report_diff_doc(const gmp_diff *D, const gmp_diff_profile *a,
                             const gmp_diff_profile *b, const gmp_report_trace *ta,
                             const gmp_report_trace *tb, size_t top, int all_frames)
{
    gmp_doc *d = gmp_doc_new();
    if (!d)
        return NULL;
    dctx c = {d,
              D,
              a,
              b,
              ta,
              tb,
              top,
              all_frames,
              a->end == 0 && b->end == 0,
              a->has_ranges || b->has_ranges};
    gmp_doc_block *root = gmp_doc_root(d);
    gmp_doc_item_add(d, gmp_doc_kv(d, root), "schema", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_lit(SCHEMA), "schema"));
    gmp_doc_block *kv = gmp_doc_kv(d, gmp_doc_section(d, root, NULL, 0, "gpumemprof diff"));
    static const char *const ends[] = {"", " (a snapshot: what is live at its end is not leaked)",
                                       " (cut short: what is live at its end is not leaked)"};
    gmp_doc_item_add(d, kv, "A", 0, "%v%v", str(d, a->path, NULL),
                     gmp_dv_lit(ends[a->end >= 0 && a->end <= 2 ? a->end : 2]));
    gmp_doc_item_add(d, kv, "B", 0, "%v%v", str(d, b->path, NULL),
                     gmp_dv_lit(ends[b->end >= 0 && b->end <= 2 ? b->end : 2]));
    trace_data(d, root, "a", a);
    trace_data(d, root, "b", b);

    gmp_doc_block *per = gmp_doc_section(d, root, NULL, 0, "Per device (B - A)");
    for (size_t i = 0; i < D->ndev; i++)
        device_block(&c, per, &D->dev[i]);
    /* the report's order: by range (by user frame instead when neither trace has ranges), by
     * user frame, by call stack, then what is live at the end */
    int order[4], no = 0;
    if (c.ranges)
        order[no++] = GMP_DIFF_BY_RANGE;
    order[no++] = GMP_DIFF_BY_FRAME;
    order[no++] = GMP_DIFF_BY_STACK;
    order[no++] = c.ranges ? GMP_DIFF_LEAKS : GMP_DIFF_LEAKS_BY_FRAME;
    for (size_t i = 0; i < D->ndev; i++)
        for (int k = 0; k < no; k++)
            device_table(&c, root, &D->dev[i], order[k]);
    for (int tab = 0; tab < GMP_DIFF_NTABLES; tab++)
        table_data(&c, root, tab);
    /* two rows whose stacks differ never look the same (as in the report) */
    gmp_report_stacks_apart(d);

    if (gmp_doc_error(d) != GMP_OK) {
        gmp_doc_free(d);
        return NULL;
    }
    return d;
}
