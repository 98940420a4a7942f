/* gmp_report_diff: builds the document of `gpumemprof diff` (gmp_report_diff.h) from a comparison
 * (gmp_diff.h): the two traces, per device the peaks, leaks and allocation counts of A and B with
 * the change B - A, then per device each compared table, biggest changes first. What the
 * comparison says is decided here; gmp_render.h writes it in every format.
 *
 * The JSON (schema gpumemprof-diff/2, docs/diff.md) is not shaped like the text: it keeps each
 * table as one array over all devices and each side of a device as an object, so those parts are
 * data-only blocks (GMP_DOC_DATA) beside the blocks the markups show (without JSON keys). */
#include "gmp_report_diff.h"

#include <string.h>

#include "gmp_trace.h"

#define SCHEMA "gpumemprof-diff/2"

static const char *const table_title[GMP_DIFF_NTABLES] = {
    "live at the peak, by range", "live at the peak, by stack",
    "leaks (live at exit), by kind and range"};
static const char *const table_key[GMP_DIFF_NTABLES] = {"live_at_peak_by_range",
                                                        "live_at_peak_by_stack", "leaks"};

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

/* JSON only: "a"/"b": {path, complete, completeness} */
static void trace_data(gmp_doc *d, gmp_doc_block *parent, const char *key,
                       const gmp_diff_profile *p)
{
    gmp_doc_block *kv = gmp_doc_kv(d, gmp_doc_section(d, parent, key, GMP_DOC_DATA, NULL));
    gmp_doc_item_add(d, kv, "path", GMP_DOC_DATA, "%v", gmp_dv_k(str(d, p->path, NULL), "path"));
    gmp_doc_item_add(d, kv, "complete", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_bool(p->complete), "complete"));
    gmp_doc_item_add(d, kv, "completeness", GMP_DOC_DATA, "%v",
                     gmp_dv_k(str(d, p->completeness, NULL), "completeness"));
}

/* JSON only: one side of a device ("a", "b"), null when the trace has no such device */
static void side_data(gmp_doc *d, gmp_doc_block *parent, const char *key, const gmp_diff_devinfo *x)
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
    gmp_doc_item_add(d, kv, "leaked", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_bytes(x->leaked_bytes), "leaked_bytes"));
    gmp_doc_item_add(d, kv, "leaked allocations", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_count(x->leaked_allocations), "leaked_allocations"));
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

static void device_block(gmp_doc *d, gmp_doc_block *parent, const gmp_diff_dev *dev)
{
    static const gmp_doc_col cols[] = {
        {"", NULL, GMP_DOC_LIT, 0},    {"A", NULL, GMP_DOC_BYTES, 0},
        {"B", NULL, GMP_DOC_BYTES, 0}, {"change", NULL, GMP_DOC_SBYTES, 0},
        {"%", NULL, GMP_DOC_PCT, 0},
    };
    const gmp_diff_devinfo *x = dev->b ? dev->b : dev->a;
    gmp_doc_block *s = gmp_doc_section(d, parent, "devices", GMP_DOC_ITEM, NULL);

    gmp_doc_block *kv = gmp_doc_kv(d, s);
    gmp_doc_item_add(d, kv, "id", GMP_DOC_DATA, "%v", gmp_dv_k(gmp_dv_int(dev->id), "id"));
    gmp_doc_item_add(d, kv, "name", GMP_DOC_DATA, "%v", gmp_dv_k(str(d, x->name, NULL), "name"));
    gmp_doc_item_add(d, kv, "total", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_bytes(x->total_bytes), "total_bytes"));
    side_data(d, s, "a", dev->a);
    side_data(d, s, "b", dev->b);
    uint64_t pa = dev->a ? dev->a->peak_allocated : 0, pb = dev->b ? dev->b->peak_allocated : 0;
    uint64_t ra = dev->a ? dev->a->peak_reserved : 0, rb = dev->b ? dev->b->peak_reserved : 0;
    uint64_t la = dev->a ? dev->a->leaked_bytes : 0, lb = dev->b ? dev->b->leaked_bytes : 0;
    uint64_t ca = dev->a ? dev->a->allocs : 0, cb = dev->b ? dev->b->allocs : 0;
    kv = gmp_doc_kv(d, gmp_doc_section(d, s, "delta", GMP_DOC_DATA, NULL));
    gmp_doc_item_add(d, kv, "peak allocated", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_sbytes(gmp_diff_delta(pa, pb)), "peak_allocated_bytes"));
    gmp_doc_item_add(d, kv, "peak reserved", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_sbytes(gmp_diff_delta(ra, rb)), "peak_reserved_bytes"));
    gmp_doc_item_add(d, kv, "leaked", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_sbytes(gmp_diff_delta(la, lb)), "leaked_bytes"));
    gmp_doc_item_add(d, kv, "allocations", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_int(gmp_diff_delta(ca, cb)), "allocations"));

    gmp_doc_block *t = gmp_doc_table(d, s, NULL, cols, sizeof cols / sizeof *cols);
    gmp_doc_linef(d, &t->title, "device ");
    device_line(d, &t->title, dev);
    figure_row(d, t, "peak allocated", dev, pa, pb, 0);
    figure_row(d, t, "peak reserved", dev, ra, rb, 0);
    figure_row(d, t, "leaked at exit", dev, la, lb, 0);
    figure_row(d, t, "allocations", dev, ca, cb, 1);
}

/* What the markups show of table tab for one device: its first top rows. */
static void device_table(gmp_doc *d, gmp_doc_block *parent, const gmp_diff *D,
                         const gmp_diff_dev *dev, int tab, size_t top)
{
    const gmp_doc_col cols[] = {
        {"A", NULL, GMP_DOC_BYTES, 0},
        {"B", NULL, GMP_DOC_BYTES, 0},
        {"change", NULL, GMP_DOC_SBYTES, 0},
        {"%", NULL, GMP_DOC_PCT, 0},
        {"count", NULL, GMP_DOC_INT, 0},
        {"kind", NULL, GMP_DOC_LIT, 0},
        {tab == GMP_DIFF_BY_STACK ? "stack" : "range", NULL, GMP_DOC_STR, 0},
    };
    const char *none = tab == GMP_DIFF_BY_STACK ? "(no stack)" : "(no range)";
    size_t n = 0;
    for (size_t k = 0; k < D->nrows[tab]; k++)
        n += D->rows[tab][k].device == dev->id;
    if (!n)
        return;
    gmp_doc_block *s = gmp_doc_section(d, parent, NULL, 0, "Device ");
    device_line(d, &s->title, dev);
    gmp_doc_linef(d, &s->title, ": %v, biggest changes first", gmp_dv_lit(table_title[tab]));
    gmp_doc_block *t = NULL;
    if (tab == GMP_DIFF_LEAKS) {
        t = gmp_doc_table(d, s, NULL, cols, 7);
    } else {
        gmp_doc_col c[6];
        memcpy(c, cols, 5 * sizeof *c);
        c[5] = cols[6];
        t = gmp_doc_table(d, s, NULL, c, 6);
    }
    size_t shown = 0;
    for (size_t k = 0; k < D->nrows[tab]; k++) {
        const gmp_diff_row *x = &D->rows[tab][k];
        if (x->device != dev->id || (top && shown >= top))
            continue;
        shown++;
        gmp_doc_val *r = gmp_doc_row(d, t);
        r[0] = gmp_dv_bytes(x->a_bytes);
        r[1] = gmp_dv_bytes(x->b_bytes);
        r[2] = gmp_dv_sbytes(x->delta_bytes);
        r[3] = change_pct(x->a_bytes, x->b_bytes);
        r[4] = change_count(x->delta_count);
        if (tab == GMP_DIFF_LEAKS)
            r[5] = gmp_dv_lit(gmp_mem_kind_name((unsigned)x->kind));
        r[tab == GMP_DIFF_LEAKS ? 6 : 5] = str(d, x->key, none);
    }
    if (shown < n)
        t->total = n;
}

/* JSON only: table tab over all devices, the first top rows of each device. */
static void table_data(gmp_doc *d, gmp_doc_block *parent, const gmp_diff *D, int tab, size_t top)
{
    const char *key = tab == GMP_DIFF_BY_STACK ? "stack" : "range";
    const gmp_doc_col cols[] = {
        {"device", "device", GMP_DOC_DEVICE, GMP_DOC_DATA},
        {"kind", "kind", GMP_DOC_LIT, GMP_DOC_DATA},
        {key, key, GMP_DOC_STR, GMP_DOC_DATA},
        {"A", "a_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"A count", "a_count", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"B", "b_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"B count", "b_count", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"change", "delta_bytes", GMP_DOC_SBYTES, GMP_DOC_DATA},
        {"count change", "delta_count", GMP_DOC_INT, GMP_DOC_DATA},
    };
    int kind = tab == GMP_DIFF_LEAKS;
    gmp_doc_col c[9];
    size_t nc = 0;
    for (size_t i = 0; i < 9; i++)
        if (kind || i != 1)
            c[nc++] = cols[i];
    gmp_doc_block *t = gmp_doc_table(d, parent, table_key[tab], c, nc);
    t->flags |= GMP_DOC_DATA;
    size_t shown = 0;
    for (size_t k = 0; k < D->nrows[tab]; k++) {
        const gmp_diff_row *x = &D->rows[tab][k];
        if (k && x->device != D->rows[tab][k - 1].device)
            shown = 0;
        if (top && shown >= top)
            continue;
        shown++;
        gmp_doc_val *r = gmp_doc_row(d, t), *p = r;
        *p++ = gmp_dv_device(x->device);
        if (kind)
            *p++ = gmp_dv_lit(gmp_mem_kind_name((unsigned)x->kind));
        *p++ = str(d, x->key, NULL);
        *p++ = gmp_dv_bytes(x->a_bytes);
        *p++ = gmp_dv_count(x->a_count);
        *p++ = gmp_dv_bytes(x->b_bytes);
        *p++ = gmp_dv_count(x->b_count);
        *p++ = gmp_dv_sbytes(x->delta_bytes);
        *p = gmp_dv_int(x->delta_count);
    }
}

gmp_doc *gmp_report_diff_doc(const gmp_diff *D, const gmp_diff_profile *a,
                             const gmp_diff_profile *b, size_t top)
{
    gmp_doc *d = gmp_doc_new();
    if (!d)
        return NULL;
    gmp_doc_block *root = gmp_doc_root(d);
    gmp_doc_item_add(d, gmp_doc_kv(d, root), "schema", GMP_DOC_DATA, "%v",
                     gmp_dv_k(gmp_dv_lit(SCHEMA), "schema"));
    gmp_doc_block *kv = gmp_doc_kv(d, gmp_doc_section(d, root, NULL, 0, "gpumemprof diff"));
    gmp_doc_item_add(d, kv, "A", 0, "%v", str(d, a->path, NULL));
    gmp_doc_item_add(d, kv, "B", 0, "%v", str(d, b->path, NULL));
    trace_data(d, root, "a", a);
    trace_data(d, root, "b", b);

    gmp_doc_block *per = gmp_doc_section(d, root, NULL, 0, "Per device (B - A)");
    for (size_t i = 0; i < D->ndev; i++)
        device_block(d, per, &D->dev[i]);
    for (size_t i = 0; i < D->ndev; i++)
        for (int tab = 0; tab < GMP_DIFF_NTABLES; tab++)
            device_table(d, root, D, &D->dev[i], tab, top);
    for (int tab = 0; tab < GMP_DIFF_NTABLES; tab++)
        table_data(d, root, D, tab, top);

    if (gmp_doc_error(d) != GMP_OK) {
        gmp_doc_free(d);
        return NULL;
    }
    return d;
}
