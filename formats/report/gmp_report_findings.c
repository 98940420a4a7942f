/* gmp_report_findings: the report's "Findings" block, the first thing every format shows under
 * the trace's header (docs/report.md, "Findings"): each out-of-memory error with its verdict and
 * device, each probable leak, memory still allocated at exit, memory that grows over the
 * iterations without a leak verdict, and device memory no allocation explains; problems (OOMs,
 * leaks) first, then warnings, each group largest first. Each finding names the section that holds
 * its detail (a link in HTML: the sections are anchored by the builders) and, in the JSON, the
 * member that does (json_path). The figures are the ones the detailed sections show: nothing is
 * computed here that they do not say.
 *
 * JSON: a "findings" array in the object of the trace (the top-level object for one trace), or of
 * the whole report with a "process" member per finding (several traces); each element
 * {severity, text, kind, device, bytes, time_ns, section, anchor, json_path[, verdict][, process]}.
 */
#include "gmp_report_findings.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_report_build_analysis.h"
#include "gmp_report_values.h"
#include "gmp_report_whatif.h"

/* Memory no allocation explains is a finding from this much, and this share of the device's
 * peak reserved memory (a CUDA context alone is a few hundred MiB on a real GPU). */
#define UNEXPLAINED_MIN ((uint64_t)64 << 20)
#define UNEXPLAINED_SHARE 0.10
/* OOMs listed per trace; the others are counted in one line. */
#define MAX_OOMS 5

typedef enum fkind { F_OOM, F_LEAK, F_EXIT, F_GROWTH, F_UNEXPLAINED } fkind;

static const char *const kind_names[] = {"oom", "leak", "live_at_exit", "growth", "unexplained"};

typedef struct finding {
    fkind kind;
    gmp_doc_severity sev;
    uint64_t bytes;
    size_t trace; /* index in the report */
    size_t item;  /* index in its source: analysis ooms/leaks/growth, trace devices */
    size_t json;  /* its index in the JSON array json_path names; SIZE_MAX: not listed there */
    size_t order; /* collection order: ties */
} finding;

/* The findings, in the document's arena (a failed allocation is the document's error). */
typedef struct flist {
    gmp_doc *d;
    finding *f;
    size_t n, cap;
} flist;

static void add(flist *l, finding f)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        finding *nf = gmp_doc_alloc(l->d, nc * sizeof *nf);
        if (!nf)
            return;
        if (l->n)
            memcpy(nf, l->f, l->n * sizeof *nf);
        l->f = nf;
        l->cap = nc;
    }
    f.order = l->n;
    l->f[l->n++] = f;
}

static int fcmp(const void *a, const void *b)
{
    const finding *x = a, *y = b;
    if (x->sev != y->sev)
        return x->sev > y->sev ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Index of device id among the devices the report lists (its "devices" array); SIZE_MAX when it
 * is not listed. */
static size_t device_index(const gmp_report_trace *t, const gmp_report_view *v, int32_t id)
{
    size_t j = 0;
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_report_device *o = &t->devices[i];
        if (!gmp_report_wanted(v, o->id) || !o->listed)
            continue;
        if (o->id == id)
            return j;
        j++;
    }
    return SIZE_MAX;
}

/* The findings of trace ti. */
static void collect(flist *l, const gmp_report_trace *t, size_t ti, const gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    if (R) {
        size_t k = 0, listed = 0;
        for (size_t i = 0; i < R->nooms; i++) {
            if (!gmp_report_wanted(v, R->ooms[i].device))
                continue;
            /* the first MAX_OOMS of the trace, in time order (the table's order) */
            if (listed++ < MAX_OOMS)
                add(l, (finding){F_OOM, GMP_DOC_PROBLEM, R->ooms[i].requested, ti, i, k, 0});
            k++;
        }
        /* a leak's index in analysis.leaks: as the analysis builder shows them (--top) */
        size_t shown = 0;
        for (size_t i = 0; i < R->nleaks; i++) {
            if (!gmp_report_wanted(v, R->leaks[i].device))
                continue;
            size_t j = !v->top || shown < v->top ? shown : SIZE_MAX;
            shown++;
            add(l, (finding){F_LEAK, GMP_DOC_PROBLEM, R->leaks[i].growth_bytes, ti, i, j, 0});
        }
        /* growth of the iterations without a leak on that device: the iteration range's device
         * memory rose over the later half of the iterations, at most exits */
        const gmp_analysis_iter *it = &R->iter;
        shown = 0;
        for (size_t i = 0; it->kind && it->kind != GMP_ANALYSIS_ITER_MARK && i < R->ngrowth; i++) {
            const gmp_analysis_growth *g = &R->growth[i];
            if (!gmp_report_wanted(v, g->device))
                continue;
            size_t j = !v->top || shown < v->top ? shown : SIZE_MAX;
            shown++;
            if (g->range != it->range || g->last_bytes <= g->mid_bytes ||
                g->repetitions < R->opts.min_reps ||
                (double)g->rises < R->opts.rise_frac * (double)(g->rises + g->falls))
                continue;
            int leak = 0;
            for (size_t k2 = 0; k2 < R->nleaks; k2++)
                leak |= R->leaks[k2].device == g->device;
            if (!leak)
                add(l, (finding){F_GROWTH, GMP_DOC_WARNING, g->last_bytes - g->mid_bytes, ti, i, j,
                                 0});
        }
    }
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_report_device *o = &t->devices[i];
        if (!gmp_report_wanted(v, o->id) || !o->listed)
            continue;
        size_t j = device_index(t, v, o->id);
        if (t->end == GMP_REPORT_END_EXIT && o->leaked_bytes && o->id >= 0)
            add(l, (finding){F_EXIT, GMP_DOC_WARNING, o->leaked_bytes, ti, i, j, 0});
        uint64_t un = o->d.max_unexplained, res = o->d.peak_reserved;
        if (o->id >= 0 && un >= UNEXPLAINED_MIN && (double)un >= UNEXPLAINED_SHARE * (double)res)
            add(l, (finding){F_UNEXPLAINED, GMP_DOC_WARNING, un, ti, i, j, 0});
    }
}

/* "p2-" before every anchor of trace i of a report of several (anchors are unique in a page). */
static void prefix(char *buf, size_t n, const gmp_report_doc *doc, size_t i)
{
    if (doc->ntraces > 1)
        snprintf(buf, n, "p%zu-", i + 1);
    else if (n)
        buf[0] = 0;
}

void gmp_report_anchor_prefix(char *buf, size_t n, const gmp_report_doc *doc, size_t trace)
{
    prefix(buf, n, doc, trace);
}

static gmp_doc_val data(gmp_doc_val v, const char *key)
{
    return gmp_dv_f(gmp_dv_k(v, key), GMP_DOC_DATA);
}

/* One finding: a verdict, keyed for the JSON. */
static void put(gmp_doc *d, gmp_doc_block *sec, const gmp_report_doc *doc, const finding *f)
{
    const gmp_report_trace *t = doc->traces[f->trace];
    const gmp_analysis_result *R = t->analysis;
    char pfx[32], anchor[96], path[128], title[160], proc[48];
    prefix(pfx, sizeof pfx, doc, f->trace);
    if (doc->ntraces > 1)
        snprintf(proc, sizeof proc, "processes[%zu].", f->trace);
    else
        proc[0] = 0;
    int32_t dev = 0;
    uint64_t when = 0;
    int has_when = 0;
    const char *verdict = NULL;
    const char *sect;
    gmp_doc_val ref;
    gmp_doc_block *b = gmp_doc_verdict(d, sec, "findings", f->sev, "");
    if (doc->ntraces > 1)
        gmp_doc_linef(d, &b->title, "%v (%v): ", gmp_report_dv_str(t, t->label, "?"),
                      gmp_report_dv_str(t, t->path, ""));
    switch (f->kind) {
    case F_OOM: {
        const gmp_analysis_oom *o = &R->ooms[f->item];
        dev = o->device;
        when = o->time_ns;
        has_when = 1;
        sect = "Out of memory, why";
        snprintf(anchor, sizeof anchor, "%soom-why", pfx);
        snprintf(path, sizeof path, "%sanalysis.ooms[%zu]", proc, f->json);
        ref = gmp_dv_ref(gmp_doc_cstr(d, sect), gmp_doc_cstr(d, anchor));
        gmp_doc_val wi = gmp_report_whatif_phrase(d, t->whatif, dev);
        gmp_doc_linef(d, &b->title,
                      "out of memory on device %v at %v: %v requested; %v%v (details: \"%v\")",
                      gmp_dv_device(dev), gmp_dv_time(when, t->t0_ns),
                      gmp_dv_f(gmp_dv_bytes(o->requested), GMP_DOC_STRONG),
                      gmp_dv_lit(gmp_analysis_oom_verdict_text(o->verdict)),
                      wi.type == GMP_DOC_NONE ? gmp_dv_lit("") : wi, ref);
        verdict = gmp_analysis_oom_verdict_name(o->verdict);
        break;
    }
    case F_LEAK: {
        const gmp_analysis_leak *L = &R->leaks[f->item];
        dev = L->device;
        gmp_doc_val owner = gmp_report_leak_owner(t, L);
        sect = "Growth over iterations";
        snprintf(anchor, sizeof anchor, "%sgrowth", pfx);
        if (f->json != SIZE_MAX)
            snprintf(path, sizeof path, "%sanalysis.leaks[%zu]", proc, f->json);
        else
            snprintf(path, sizeof path, "%sanalysis.leaks", proc);
        ref = gmp_dv_ref(gmp_doc_cstr(d, sect), gmp_doc_cstr(d, anchor));
        uint64_t last = R->iter.iterations;
        gmp_doc_linef(
            d, &b->title,
            "probable leak %v %v on device %v: %v over iterations %v-%v (+%v per iteration; "
            "details: \"%v\")",
            gmp_dv_lit(L->range ? "in" : "at"), owner, gmp_dv_device(dev),
            gmp_dv_f(gmp_dv_sbytes((int64_t)L->growth_bytes), GMP_DOC_STRONG),
            gmp_dv_count(last - L->iterations), gmp_dv_count(last),
            gmp_dv_bytes(L->rate_bytes > 0 ? (uint64_t)(L->rate_bytes + 0.5) : 0), ref);
        break;
    }
    case F_GROWTH: {
        const gmp_analysis_growth *g = &R->growth[f->item];
        dev = g->device;
        sect = "Growth over iterations";
        snprintf(anchor, sizeof anchor, "%sgrowth", pfx);
        if (f->json != SIZE_MAX)
            snprintf(path, sizeof path, "%sanalysis.growth[%zu]", proc, f->json);
        else
            snprintf(path, sizeof path, "%sanalysis.growth", proc);
        ref = gmp_dv_ref(gmp_doc_cstr(d, sect), gmp_doc_cstr(d, anchor));
        gmp_doc_linef(
            d, &b->title,
            "device %v's memory grows over the iterations of %v: %v from the "
            "middle iteration to the last (%v -> %v; no single allocation site "
            "grows enough for a leak verdict; details: \"%v\")",
            gmp_dv_device(dev), gmp_report_dv_str(t, g->range, "(no name)"),
            gmp_dv_f(gmp_dv_sbytes((int64_t)(g->last_bytes - g->mid_bytes)), GMP_DOC_STRONG),
            gmp_dv_bytes(g->mid_bytes), gmp_dv_bytes(g->last_bytes), ref);
        break;
    }
    case F_EXIT: {
        const gmp_report_device *o = &t->devices[f->item];
        dev = o->id;
        snprintf(title, sizeof title, "Device %" PRId32 ": Live at exit (leaks)", dev);
        sect = title;
        snprintf(anchor, sizeof anchor, "%sdevice-%" PRId32 "-leaks", pfx, dev);
        snprintf(path, sizeof path, "%sdevices[%zu].leaks", proc, f->json);
        ref = gmp_dv_ref(gmp_doc_cstr(d, sect), gmp_doc_cstr(d, anchor));
        gmp_doc_linef(d, &b->title,
                      "%v still allocated at exit on device %v, in %v allocation%v "
                      "(details: \"%v\")",
                      gmp_dv_f(gmp_dv_bytes(o->leaked_bytes), GMP_DOC_STRONG), gmp_dv_device(dev),
                      gmp_dv_count(o->leaked_count), gmp_dv_lit(o->leaked_count == 1 ? "" : "s"),
                      ref);
        break;
    }
    default: { /* F_UNEXPLAINED */
        const gmp_report_device *o = &t->devices[f->item];
        dev = o->id;
        when = o->d.max_unexplained_time_ns;
        has_when = 1;
        snprintf(title, sizeof title, "Device %" PRId32, dev);
        sect = title;
        snprintf(anchor, sizeof anchor, "%sdevice-%" PRId32, pfx, dev);
        snprintf(path, sizeof path, "%sdevices[%zu].max_unexplained_bytes", proc, f->json);
        ref = gmp_dv_ref(gmp_doc_cstr(d, sect), gmp_doc_cstr(d, anchor));
        gmp_doc_linef(
            d, &b->title,
            "%v of device %v's memory not explained by allocations, at %v (the driver counts it "
            "used, the allocator does not hold it: the CUDA context, libraries' workspaces, other "
            "processes; details: \"%v\")",
            gmp_dv_f(gmp_dv_bytes(o->d.max_unexplained), GMP_DOC_STRONG), gmp_dv_device(dev),
            gmp_dv_time(when, t->t0_ns), ref);
        break;
    }
    }
    /* the JSON's members, in one order for every kind */
    b->flags |= GMP_DOC_ITEM;
    gmp_doc_line *l = &b->title;
    gmp_doc_line_add(d, l, data(gmp_dv_lit(kind_names[f->kind]), "kind"));
    gmp_doc_line_add(d, l, data(gmp_dv_device(dev), "device"));
    gmp_doc_line_add(d, l, data(gmp_dv_bytes(f->bytes), "bytes"));
    gmp_doc_line_add(d, l, data(has_when ? gmp_dv_time(when, t->t0_ns) : gmp_dv_none(), "time_ns"));
    gmp_doc_line_add(d, l, data(gmp_dv_lit(gmp_doc_cstr(d, sect)), "section"));
    gmp_doc_line_add(d, l, data(gmp_dv_lit(gmp_doc_cstr(d, anchor)), "anchor"));
    gmp_doc_line_add(d, l, data(gmp_dv_lit(gmp_doc_cstr(d, path)), "json_path"));
    gmp_doc_line_add(d, l, data(verdict ? gmp_dv_lit(verdict) : gmp_dv_none(), "verdict"));
    if (doc->ntraces > 1)
        gmp_doc_line_add(d, l, data(gmp_dv_count(f->trace + 1), "process"));
}

void gmp_report_build_findings(gmp_doc *d, gmp_doc_block *parent, const gmp_report_doc *doc,
                               size_t trace, const gmp_report_view *v)
{
    flist l = {d, NULL, 0, 0};
    size_t from = trace == SIZE_MAX ? 0 : trace, to = trace == SIZE_MAX ? doc->ntraces : trace + 1;
    uint64_t more = 0; /* OOMs not listed */
    for (size_t i = from; i < to; i++) {
        const gmp_report_trace *t = doc->traces[i];
        collect(&l, t, i, v);
        size_t wanted = 0;
        for (size_t k = 0; t->analysis && k < t->analysis->nooms; k++)
            wanted += gmp_report_wanted(v, t->analysis->ooms[k].device);
        if (v->device == INT64_MIN && t->sum.ooms > wanted)
            wanted = t->sum.ooms; /* the analysis keeps the first 64 */
        if (wanted > MAX_OOMS)
            more += wanted - MAX_OOMS;
    }
    /* one Findings block per page: for several traces it is the report's, above them */
    gmp_doc_block *sec = gmp_doc_section(d, parent, NULL, 0, "Findings");
    gmp_doc_anchor(d, sec, "findings");
    if (l.n)
        qsort(l.f, l.n, sizeof *l.f, fcmp);
    for (size_t i = 0; i < l.n; i++)
        put(d, sec, doc, &l.f[i]);
    if (more)
        gmp_doc_notice(d, sec, NULL, GMP_DOC_INFO,
                       "... and %v more out-of-memory error%v (the table \"Out of memory\")",
                       gmp_dv_count(more), gmp_dv_lit(more == 1 ? "" : "s"));
    if (!l.n) {
        gmp_doc_block *e = gmp_doc_table(d, sec, "findings", NULL, 0);
        e->flags |= GMP_DOC_DATA; /* `findings: []` */
        /* say what was looked for: only what the recordings allow */
        int iters = 0, exits = 0, samples = 0;
        for (size_t i = from; i < to; i++) {
            const gmp_report_trace *t = doc->traces[i];
            iters |= t->analysis && t->analysis->iter.kind && t->analysis->iter.tracked_from;
            exits |= t->end == GMP_REPORT_END_EXIT;
            for (size_t k = 0; k < t->ndevices; k++)
                samples |= t->devices[k].d.samples != 0;
        }
        gmp_doc_notice(d, sec, NULL, GMP_DOC_OK, "nothing to report: no out-of-memory error%v%v%v",
                       gmp_dv_lit(iters ? ", no probable leak or growth over the iterations" : ""),
                       gmp_dv_lit(exits ? ", nothing left allocated at exit" : ""),
                       gmp_dv_lit(samples ? ", no large memory outside the allocations" : ""));
    }
}
