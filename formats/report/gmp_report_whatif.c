/* gmp_report_whatif: the what-if result a report holds for a trace with an OOM, and its blocks
 * (gmp_report_whatif.h). */
#include "gmp_report_whatif.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gmp_report_whatif *gmp_report_whatif_new(void)
{
    return calloc(1, sizeof(gmp_report_whatif));
}

int gmp_report_whatif_set_names(gmp_report_whatif *x, const char *const *names, size_t n)
{
    x->names = calloc(n ? n : 1, sizeof *x->names);
    if (!x->names)
        return -1;
    x->nconfigs = n;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (!(x->names[i] = malloc(len + 1)))
            return -1;
        memcpy(x->names[i], names[i], len + 1);
    }
    return 0;
}

void gmp_report_whatif_free(gmp_report_whatif *x)
{
    if (!x)
        return;
    for (size_t i = 0; x->names && i < x->nconfigs; i++)
        free(x->names[i]);
    free(x->names);
    gmp_whatif_free(&x->w);
    if (x->has_open)
        gmp_whatif_free(&x->open);
    free(x);
}

/* The device's replay (and its replay without a capacity), NULL when it has none. */
static const gmp_whatif_device *device(const gmp_report_whatif *x, int32_t dev,
                                       const gmp_whatif_device **open)
{
    *open = NULL;
    if (!x || x->why_not[0] || dev < 0 || (size_t)dev >= x->w.ndevices || !x->w.devices[dev].rows ||
        !x->w.devices[dev].allocs)
        return NULL;
    if (x->has_open && (size_t)dev < x->open.ndevices && x->open.devices[dev].rows)
        *open = &x->open.devices[dev];
    return &x->w.devices[dev];
}

/* Text that holds a setting's name: the recording's own settings come from the snapshot, untrusted
 * (a STR value: every renderer escapes it as trace text). */
static gmp_doc_val untrusted(gmp_doc *d, const char *s)
{
    return gmp_dv_str((gmp_str){gmp_doc_cstr(d, s), (uint32_t)strlen(s)}, "");
}

static double gib(uint64_t b)
{
    return (double)b / (1024.0 * 1024 * 1024);
}

/* The verdict in words, into buf. */
static void verdict_text(char *buf, size_t n, const gmp_report_whatif *x,
                         const gmp_whatif_device *d, const gmp_whatif_advice *a)
{
    const gmp_whatif_row *own = &d->rows[0];
    uint64_t cap = own->capacity;
    size_t k = 0;
    switch (a->verdict) {
    case GMP_WHATIF_FRAGMENTATION:
        k = (size_t)snprintf(buf, n,
                             "fragmentation: %s would have avoided it (peak reserved %.2f GiB "
                             "within %.2f GiB",
                             x->names[a->best], gib(a->peak_reserved), gib(cap));
        if (own->modelled && own->failed && k < n)
            k += (size_t)snprintf(buf + k, n - k, "; the recorded settings fail on %.2f MiB",
                                  (double)own->fail_size / 1048576.0);
        if (k < n)
            snprintf(buf + k, n - k, ")");
        break;
    case GMP_WHATIF_CAPACITY:
        k = (size_t)snprintf(buf, n, "capacity: no allocator setting fits %.2f GiB", gib(cap));
        if (a->best != SIZE_MAX && k < n) {
            k += (size_t)snprintf(buf + k, n - k,
                                  " (without that limit %s reserves at least %.2f GiB: ",
                                  x->names[a->best], gib(a->peak_reserved));
            if (k < n && a->card)
                snprintf(buf + k, n - k, "smallest card %s class, %s)", a->card->cls,
                         a->card->cards);
            else if (k < n)
                snprintf(buf + k, n - k, "more than any card of the table)");
        }
        break;
    case GMP_WHATIF_NOT_REPRODUCED:
        snprintf(buf, n,
                 "not reproduced: replayed under the recorded settings, the tensors fit %.2f GiB "
                 "(peak reserved %.2f GiB); the failure depends on memory the recording does not "
                 "show",
                 gib(cap), gib(own->peak_reserved));
        break;
    default:
        snprintf(buf, n, "no verdict: %s",
                 cap ? "no setting of the replay is modelled"
                     : "the device's memory is not known (no DEVICE record, no free memory at "
                       "the OOM)");
        break;
    }
}

gmp_doc_val gmp_report_whatif_phrase(gmp_doc *d, const gmp_report_whatif *x, int32_t dev)
{
    const gmp_whatif_device *open, *wd = device(x, dev, &open);
    if (!wd)
        return gmp_dv_none();
    gmp_whatif_advice a;
    gmp_whatif_advise(wd, open, x->nconfigs, &a);
    char buf[512], out[560];
    verdict_text(buf, sizeof buf, x, wd, &a);
    snprintf(out, sizeof out, "; what if: %s", buf);
    return untrusted(d, out);
}

void gmp_report_whatif_build(gmp_doc *d, gmp_doc_block *b, gmp_doc_block *kv,
                             const gmp_report_whatif *x, int32_t dev, int table)
{
    if (x && x->why_not[0]) {
        gmp_doc_item_add(d, kv, "what if", 0, "%v",
                         gmp_dv_k(gmp_dv_lit(gmp_doc_cstr(d, x->why_not)), "whatif_text"));
        return;
    }
    const gmp_whatif_device *open, *wd = device(x, dev, &open);
    if (!wd)
        return;
    gmp_whatif_advice a;
    gmp_whatif_advise(wd, open, x->nconfigs, &a);
    char buf[512];
    verdict_text(buf, sizeof buf, x, wd, &a);
    const char *vn = gmp_whatif_verdict_name(a.verdict);
    gmp_doc_item_add(d, kv, "what if", 0, "%v%v", gmp_dv_k(untrusted(d, buf), "whatif_text"),
                     gmp_dv_lit(x->async ? " (the cudaMallocAsync tensors replayed through the "
                                           "native caching allocator)"
                                         : ""));
    gmp_doc_item_add(d, kv, "what-if verdict", GMP_DOC_DATA, "%v",
                     gmp_dv_k(vn ? gmp_dv_lit(vn) : gmp_dv_none(), "whatif_verdict"));
    gmp_doc_item_add(d, kv, "what-if setting", GMP_DOC_DATA, "%v",
                     gmp_dv_k(a.best != SIZE_MAX ? untrusted(d, x->names[a.best]) : gmp_dv_none(),
                              "whatif_setting"));
    gmp_doc_item_add(d, kv, "what-if peak reserved", GMP_DOC_DATA, "%v",
                     gmp_dv_k(a.best != SIZE_MAX ? gmp_dv_bytes(a.peak_reserved) : gmp_dv_none(),
                              "whatif_peak_reserved_bytes"));
    gmp_doc_item_add(
        d, kv, "what-if capacity", GMP_DOC_DATA, "%v",
        gmp_dv_k(wd->rows[0].capacity ? gmp_dv_bytes(wd->rows[0].capacity) : gmp_dv_none(),
                 "whatif_capacity_bytes"));
    gmp_doc_item_add(
        d, kv, "what-if smallest card", GMP_DOC_DATA, "%v",
        gmp_dv_k(a.card ? gmp_dv_lit(a.card->cls) : gmp_dv_none(), "whatif_smallest_card"));
    if (!table)
        return;
    static const gmp_doc_col cols[] = {
        {"setting", NULL, GMP_DOC_STR, GMP_DOC_VIEW},
        {"setting", "alloc_conf", GMP_DOC_STR, GMP_DOC_DATA},
        {"modelled", "modelled", GMP_DOC_BOOL, GMP_DOC_DATA},
        {"peak reserved", "peak_reserved_bytes", GMP_DOC_BYTES, 0},
        {"peak allocated", "peak_allocated_bytes", GMP_DOC_BYTES, 0},
        {"segments", "segments", GMP_DOC_COUNT, 0},
        {"frag at peak", "fragmentation_at_peak_bytes", GMP_DOC_BYTES, 0},
        {"fits", "fits", GMP_DOC_BOOL, 0},
        {"first failure", "first_failure_bytes", GMP_DOC_BYTES, 0},
    };
    gmp_doc_block *tb = gmp_doc_table(d, b, "whatif", cols, sizeof cols / sizeof *cols);
    gmp_doc_linef(d, &tb->title,
                  "What if: the tensors replayed under each allocator setting (gpumemprof whatif; "
                  "capacity %v)",
                  wd->rows[0].capacity ? gmp_dv_bytes(wd->rows[0].capacity)
                                       : gmp_dv_lit("unknown"));
    for (size_t c = 0; c < x->nconfigs; c++) {
        const gmp_whatif_row *r = &wd->rows[c];
        gmp_doc_val *row = gmp_doc_row(d, tb);
        char nm[640];
        snprintf(nm, sizeof nm, "%s%s", x->names[c], r->modelled ? "" : " (not modelled yet)");
        row[0] = untrusted(d, nm);
        row[1] = untrusted(d, x->names[c]);
        row[2] = gmp_dv_bool(r->modelled);
        if (!r->modelled)
            continue;
        row[3] = gmp_dv_bytes(r->peak_reserved);
        row[4] = gmp_dv_bytes(r->peak_allocated);
        row[5] = gmp_dv_count(r->segments);
        row[6] = gmp_dv_bytes(r->frag_at_peak);
        row[7] = !r->capacity && !r->failed
                     ? gmp_dv_none()
                     : gmp_dv_f(gmp_dv_bool(r->fits), r->fits ? 0 : GMP_DOC_BAD);
        row[8] = r->failed ? gmp_dv_bytes(r->fail_size) : gmp_dv_none();
    }
}
