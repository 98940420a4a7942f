/* gmp_report_build_analysis: the blocks of the report's analyses (gmp_analysis.h, computed in the
 * replay) for one trace: growth over iterations (the iteration found, a verdict per probable leak
 * at its owner with its growing sites; per repeating range the series of exits, as data), temporary
 * allocations (per range path and the hottest sites), allocator overhead (per device at the two
 * peaks and at the end) and why each out-of-memory error happened. What is said and which rows
 * (--top, --device) is decided here, once for every format.
 *
 * JSON: everything lives in the trace's "analysis" object, with today's member names
 * (docs/report.md): options, ranges_checked, iterations, leaks[], growth[], temporary_totals,
 * temporary[],
 * temporary_sites[], overhead[], ooms[]. The growth rows that are no leak, and the numbers the
 * wording leaves out, are data only (GMP_DOC_DATA); an array with no element is still written
 * (an empty table of that key) so that its member is always there. */
#include <stdint.h>
#include <stdio.h>

#include "gmp_analysis.h"
#include "gmp_doc.h"
#include "gmp_report.h"
#include "gmp_report_build_analysis.h"
#include "gmp_report_values.h"
#include "gmp_report_whatif.h"

static const char *verdict_advice(gmp_analysis_oom_verdict v)
{
    switch (v) {
    case GMP_ANALYSIS_OOM_FRAGMENTATION:
        return "PyTorch: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or a lower "
               "max_split_size_mb); torch.cuda.empty_cache() between phases; allocate the "
               "largest tensors first. Stream-ordered pools: a lower release threshold";
    case GMP_ANALYSIS_OOM_OUTSIDE:
        return "find what holds the memory the allocator does not: other processes "
               "(nvidia-smi), cuBLAS/cuDNN workspaces (CUBLAS_WORKSPACE_CONFIG, "
               "torch.backends.cudnn.benchmark=False), NCCL buffers (NCCL_BUFFSIZE), the CUDA "
               "context (fewer loaded kernels: lazy loading, CUDA_MODULE_LOADING=LAZY)";
    default:
        return "make the live set smaller: the sites below hold the most; a smaller batch, "
               "activation checkpointing, lower precision, sharding the model or the optimizer "
               "state (FSDP, ZeRO), or offloading";
    }
}

/* A rate per repetition rounded to whole bytes. */
static int64_t rate_int(double r)
{
    return r >= 0 ? (int64_t)(r + 0.5) : -(int64_t)(-r + 0.5);
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Rows of a device-sorted list shown under the view: the device filter and --top. */
static int shown_ok(const gmp_report_view *v, int32_t device, size_t *shown)
{
    if (!gmp_report_wanted(v, device))
        return 0;
    if (v->top && *shown >= v->top)
        return 0;
    (*shown)++;
    return 1;
}

/* Rows of a per-device list that --top cut (0: none): the table's total. */
static uint64_t cut_total(const gmp_report_view *v, size_t wanted)
{
    return v->top && wanted > v->top ? wanted : 0;
}

/* A member of the enclosing JSON object that no format shows. */
static void data_member(gmp_doc *d, gmp_doc_block *kv, const char *key, gmp_doc_val val)
{
    gmp_doc_item_add(d, kv, key, GMP_DOC_DATA, "%v", gmp_dv_k(val, key));
}

static gmp_doc_val data_val(gmp_doc_val val, const char *key)
{
    return gmp_dv_f(gmp_dv_k(val, key), GMP_DOC_DATA);
}

/* `key: []` in the JSON where no block of that key was added (an empty table, shown nowhere). */
static void empty_array(gmp_doc *d, gmp_doc_block *parent, const char *key)
{
    gmp_doc_block *b = gmp_doc_table(d, parent, key, NULL, 0);
    b->flags |= GMP_DOC_DATA;
}

/* ---- growth over iterations ---- */

/* The growing sites of a leak: a table in its verdict. */
static void leak_sites(gmp_doc *d, gmp_doc_block *b, const gmp_report_trace *t,
                       const gmp_report_view *v, const gmp_analysis_leak *L)
{
    static const gmp_doc_col own[] = {
        {"first", "first_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"last", "last_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"grew", "growth_bytes", GMP_DOC_BYTES, 0},
        {"per iteration", "rate_bytes_per_iteration", GMP_DOC_BYTES, 0},
        {"rises", "rises", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"falls", "falls", GMP_DOC_COUNT, GMP_DOC_DATA},
    };
    gmp_doc_col cols[6 + GMP_REPORT_SITE_COLS];
    size_t nc = gmp_report_site_table(cols, own, 6);
    gmp_doc_block *tb = gmp_doc_table(d, b, "sites", cols, nc);
    size_t ns = L->nsites;
    if (v->top && ns > v->top)
        ns = v->top;
    tb->total = cut_total(v, L->nsites);
    for (size_t k = 0; k < ns; k++) {
        const gmp_analysis_growth_site *s = &L->sites[k];
        gmp_doc_val *r = gmp_doc_row(d, tb);
        r[0] = gmp_dv_bytes(s->first_bytes);
        r[1] = gmp_dv_bytes(s->last_bytes);
        r[2] = gmp_dv_bytes(s->growth_bytes);
        r[3] = gmp_dv_bytes(s->rate_bytes > 0 ? (uint64_t)rate_int(s->rate_bytes) : 0);
        r[4] = gmp_dv_count(s->rises);
        r[5] = gmp_dv_count(s->falls);
        gmp_report_site_cells(d, t, v, &s->site, r + 6);
    }
}

/* The device's allocated bytes at the range's exits, for the JSON only. A SERIES has times, and
 * these are exits: x is the exit number (1 = the first; point i is exit i * stride + 1, as in the
 * analysis, written as starting there: x0 = 1, each x the next point's start) and bucket_ns the
 * stride (exits per point); its x is named "exit" (xkey). A drawn series has a time axis, so
 * this one is data only. */
static void growth_series(gmp_doc *d, gmp_doc_block *b, const gmp_analysis_growth *g)
{
    static const gmp_doc_scol cols[] = {
        {"allocated at the exit", "bytes", GMP_DOC_S_LINE, GMP_DOC_STRONG},
    };
    gmp_doc_block *s = gmp_doc_series(d, b, "series", cols, 1, g->nseries);
    s->flags |= GMP_DOC_DATA;
    s->x0 = 1;
    s->t0 = 0;
    s->bucket_ns = g->series_stride; /* exits per point */
    s->xkey = "exit";
    for (size_t i = 0; i < s->npoints; i++) {
        s->x[i] = (uint64_t)(i + 1) * g->series_stride + 1;
        s->y[i] = g->series[i];
    }
}

/* One repeating range: data only (the device's allocated bytes at its exits), an element of
 * `growth`; the verdicts are the leaks. */
static void growth_row(gmp_doc *d, gmp_doc_block *sec, const gmp_report_trace *t,
                       const gmp_analysis_growth *g)
{
    gmp_doc_block *b = gmp_doc_verdict(
        d, sec, "growth", GMP_DOC_OK,
        "%v on device %v: %v per repetition over %v repetitions (%v -> %v, %v; rising %v of %v)",
        gmp_dv_k(gmp_report_dv_str(t, g->range, "(no name)"), "range"),
        gmp_dv_k(gmp_dv_device(g->device), "device"),
        gmp_dv_k(gmp_dv_sbytes(rate_int(g->rate_bytes)), "rate_bytes_per_repetition"),
        gmp_dv_k(gmp_dv_count(g->repetitions), "repetitions"),
        gmp_dv_k(gmp_dv_bytes(g->first_bytes), "first_bytes"),
        gmp_dv_k(gmp_dv_bytes(g->last_bytes), "last_bytes"),
        gmp_dv_k(gmp_dv_sbytes(g->total_bytes), "total_growth_bytes"),
        gmp_dv_k(gmp_dv_count(g->rises), "rises"), gmp_dv_count(g->repetitions - 1));
    b->flags |= GMP_DOC_ITEM | GMP_DOC_DATA;
    gmp_doc_line *l = &b->title;
    gmp_doc_line_add(d, l, data_val(gmp_dv_bool(g->thread_bound), "thread_bound"));
    gmp_doc_line_add(d, l, data_val(gmp_dv_bool(g->leak), "owns_leak"));
    gmp_doc_line_add(d, l, data_val(gmp_dv_bytes(g->min_bytes), "min_bytes"));
    gmp_doc_line_add(d, l, data_val(gmp_dv_bytes(g->max_bytes), "max_bytes"));
    gmp_doc_line_add(d, l, data_val(gmp_dv_bytes(g->mid_bytes), "middle_bytes"));
    gmp_doc_line_add(d, l, data_val(gmp_dv_count(g->falls), "falls"));
    gmp_doc_line_add(d, l, data_val(gmp_dv_count(g->series_stride), "series_stride"));
    growth_series(d, b, g);
}

static const char *iter_kind(gmp_analysis_iter_kind k)
{
    switch (k) {
    case GMP_ANALYSIS_ITER_PUSH: return "range";
    case GMP_ANALYSIS_ITER_START: return "start/end range";
    case GMP_ANALYSIS_ITER_MARK: return "mark";
    default: return "none";
    }
}

gmp_doc_val gmp_report_leak_owner(const gmp_report_trace *t, const gmp_analysis_leak *L)
{
    if (L->range)
        return gmp_report_dv_str(t, L->range, "");
    if (L->stack < t->nstacks)
        return gmp_report_dv_str(t, t->stacks[L->stack].user_name, "(no stack recorded)");
    return gmp_dv_str((gmp_str){"", 0}, "(no range, no stack)");
}

/* One probable leak: a verdict at its owner (range, else the first frame its stack shows). */
static void leak_verdict(gmp_doc *d, gmp_doc_block *sec, const gmp_report_trace *t,
                         const gmp_report_view *v, const gmp_analysis_leak *L, uint64_t last)
{
    gmp_doc_val owner = gmp_report_leak_owner(t, L);
    gmp_doc_block *b = gmp_doc_verdict(
        d, sec, "leaks", GMP_DOC_PROBLEM,
        "probable leak %v %v on device %v: +%v per iteration over iterations %v-%v (+%v; rising %v "
        "of %v)",
        gmp_dv_lit(L->range ? "in" : "at"), gmp_dv_k(owner, L->range ? "range" : "frame"),
        gmp_dv_k(gmp_dv_device(L->device), "device"),
        gmp_dv_k(gmp_dv_f(gmp_dv_bytes((uint64_t)rate_int(L->rate_bytes)), GMP_DOC_STRONG),
                 "rate_bytes_per_iteration"),
        gmp_dv_k(gmp_dv_count(last - L->iterations), "from_iteration"), gmp_dv_count(last),
        gmp_dv_k(gmp_dv_bytes(L->growth_bytes), "growth_bytes"),
        gmp_dv_k(gmp_dv_count(L->rises), "rises"),
        gmp_dv_k(gmp_dv_count(L->iterations), "iterations"));
    b->flags |= GMP_DOC_ITEM;
    gmp_doc_line *l = &b->title;
    gmp_doc_line_add(d, l, data_val(gmp_dv_count(L->falls), "falls"));
    if (!L->range)
        gmp_doc_line_add(
            d, l,
            data_val(gmp_dv_stack(gmp_report_doc_stack(d, t, L->stack, v->all_frames)), "stack"));
    leak_sites(d, b, t, v, L);
}

/* An anchor of this trace's (pfx: gmp_report_anchor_prefix) on section s. */
static void anchor(gmp_doc *d, gmp_doc_block *s, const char *pfx, const char *name)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s%s", pfx ? pfx : "", name);
    gmp_doc_anchor(d, s, buf);
}

static void build_growth(gmp_doc *d, gmp_doc_block *a, const gmp_report_trace *t,
                         const gmp_report_view *v, const char *pfx)
{
    const gmp_analysis_result *R = t->analysis;
    const gmp_analysis_iter *it = &R->iter;
    /* nothing repeats: nothing to say in the markups (the JSON keeps its members) */
    gmp_doc_block *sec =
        gmp_doc_section(d, a, NULL, it->kind ? 0 : GMP_DOC_DATA, "Growth over iterations");
    anchor(d, sec, pfx, "growth");
    gmp_doc_block *ik = gmp_doc_section(d, sec, "iterations", GMP_DOC_DATA, "iterations");
    gmp_doc_block *kv = gmp_doc_kv(d, ik);
    data_member(d, kv, "kind", gmp_dv_lit(iter_kind(it->kind)));
    data_member(d, kv, "range",
                it->kind ? gmp_report_dv_str(t, it->range, "(no name)") : gmp_dv_none());
    data_member(d, kv, "depth", gmp_dv_count(it->depth));
    data_member(d, kv, "count", gmp_dv_count(it->iterations));
    data_member(d, kv, "tracked_from", gmp_dv_count(it->tracked_from));
    data_member(d, kv, "window_from", gmp_dv_count(it->window_from));
    if (!it->kind) {
        gmp_doc_notice(d, sec, NULL, GMP_DOC_INFO,
                       "no range or mark repeats %v times: no iterations to compare",
                       gmp_dv_count(R->opts.min_reps));
    } else if (!it->tracked_from) {
        gmp_doc_notice(d, sec, NULL, GMP_DOC_INFO,
                       "iterations: %v %v, %v seen; its allocations were not followed (more than "
                       "%v repeating ranges)",
                       gmp_dv_lit(iter_kind(it->kind)),
                       gmp_report_dv_str(t, it->range, "(no name)"), gmp_dv_count(it->iterations),
                       gmp_dv_count(GMP_ANALYSIS_SLOTS));
    } else {
        gmp_doc_notice(d, sec, NULL, GMP_DOC_INFO,
                       "iterations: %v %v, %v seen; growth is measured from the end of iteration "
                       "%v to the last (warm-up and state allocated once before it are not "
                       "growth)",
                       gmp_dv_lit(iter_kind(it->kind)),
                       gmp_report_dv_str(t, it->range, "(no name)"), gmp_dv_count(it->iterations),
                       gmp_dv_count(it->window_from));
    }
    size_t shown = 0;
    uint64_t last = it->iterations; /* the window ends at the last iteration */
    for (size_t i = 0; i < R->nleaks; i++)
        if (shown_ok(v, R->leaks[i].device, &shown))
            leak_verdict(d, sec, t, v, &R->leaks[i], last);
    if (!shown) {
        empty_array(d, sec, "leaks");
        if (it->kind && it->tracked_from)
            gmp_doc_notice(d, sec, NULL, GMP_DOC_OK,
                           "no allocation grows over the later iterations");
    }
    shown = 0;
    for (size_t i = 0; i < R->ngrowth; i++)
        if (shown_ok(v, R->growth[i].device, &shown))
            growth_row(d, sec, t, &R->growth[i]);
    if (!shown)
        empty_array(d, sec, "growth");
}

/* ---- temporary allocations ---- */

static void temp_ranges(gmp_doc *d, gmp_doc_block *sec, unsigned hide, const gmp_report_trace *t,
                        const gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    static const gmp_doc_col cols[] = {
        {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"allocations", "allocations", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"allocated", "allocated_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"temporary", "count", GMP_DOC_COUNT, 0},
        {"bytes", "bytes", GMP_DOC_BYTES, 0},
        {"share of its allocations", NULL, GMP_DOC_PCT, 0},
        {"mean lifetime", "mean_lifetime_ns", GMP_DOC_DUR, 0},
    };
    gmp_doc_block *tb = gmp_doc_table(d, sec, "temporary", cols, sizeof cols / sizeof cols[0]);
    tb->flags |= hide;
    size_t shown = 0, wanted = 0;
    for (size_t i = 0; i < R->ntemp; i++) {
        const gmp_analysis_temp *x = &R->temp[i];
        wanted += gmp_report_wanted(v, x->device);
        if (!shown_ok(v, x->device, &shown))
            continue;
        gmp_doc_val *r = gmp_doc_row(d, tb);
        r[0] = gmp_report_dv_str(t, x->range, "(no range)");
        r[1] = gmp_dv_device(x->device);
        r[2] = gmp_dv_count(x->allocs);
        r[3] = gmp_dv_bytes(x->alloc_bytes);
        r[4] = gmp_dv_count(x->temp_count);
        r[5] = gmp_dv_bytes(x->temp_bytes);
        r[6] = gmp_dv_pct(pct(x->temp_count, x->allocs));
        r[7] = gmp_dv_dur(x->temp_count ? x->temp_life_ns / x->temp_count : 0);
    }
    tb->total = cut_total(v, wanted);
}

static void temp_sites(gmp_doc *d, gmp_doc_block *sec, unsigned hide, const gmp_report_trace *t,
                       const gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    static const gmp_doc_col own[] = {
        {"temporary", "count", GMP_DOC_COUNT, 0},
        {"bytes", "bytes", GMP_DOC_BYTES, 0},
        {"allocations", "allocations", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"mean lifetime", "mean_lifetime_ns", GMP_DOC_DUR, GMP_DOC_DATA},
    };
    gmp_doc_col cols[4 + GMP_REPORT_SITE_COLS];
    size_t nc = gmp_report_site_table(cols, own, 4);
    gmp_doc_block *tb = gmp_doc_table(d, sec, "temporary_sites", cols, nc);
    tb->flags |= hide;
    gmp_doc_linef(d, &tb->title, "Hottest sites");
    size_t shown = 0, wanted = 0;
    for (size_t i = 0; i < R->ntemp_sites; i++) {
        const gmp_analysis_temp_site *x = &R->temp_sites[i];
        wanted += gmp_report_wanted(v, x->site.device);
        if (!shown_ok(v, x->site.device, &shown))
            continue;
        gmp_doc_val *r = gmp_doc_row(d, tb);
        r[0] = gmp_dv_count(x->temp_count);
        r[1] = gmp_dv_bytes(x->temp_bytes);
        r[2] = gmp_dv_count(x->allocs);
        r[3] = gmp_dv_dur(x->temp_count ? x->temp_life_ns / x->temp_count : 0);
        gmp_report_site_cells(d, t, v, &x->site, r + 4);
    }
    tb->total = cut_total(v, wanted);
}

/* Shown when some allocation was temporary; the JSON has its members always. The totals are the
 * shown device's under --device. */
static void build_temporary(gmp_doc *d, gmp_doc_block *a, const gmp_report_trace *t,
                            const gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    uint64_t allocs = R->allocs, count = R->temp_count, bytes = R->temp_bytes;
    if (v->device != INT64_MIN) {
        allocs = count = bytes = 0;
        for (size_t i = 0; i < R->ntemp_devices; i++)
            if (gmp_report_wanted(v, R->temp_devices[i].device)) {
                allocs += R->temp_devices[i].allocs;
                count += R->temp_devices[i].temp_count;
                bytes += R->temp_devices[i].temp_bytes;
            }
    }
    unsigned hide = count ? 0 : GMP_DOC_DATA;
    gmp_doc_block *sec =
        hide ? a
             : gmp_doc_section(d, a, NULL, 0,
                               "Temporary allocations (freed within %v, before the range that "
                               "made them closed): %v of %v allocations (%v), %v",
                               gmp_dv_dur(R->opts.temp_ns), gmp_dv_count(count),
                               gmp_dv_count(allocs), gmp_dv_pct(pct(count, allocs)),
                               gmp_dv_bytes(bytes));
    gmp_doc_block *kv =
        gmp_doc_kv(d, gmp_doc_section(d, sec, "temporary_totals", GMP_DOC_DATA, ""));
    data_member(d, kv, "threshold_ns", gmp_dv_dur(R->opts.temp_ns));
    data_member(d, kv, "allocations", gmp_dv_count(allocs));
    data_member(d, kv, "count", gmp_dv_count(count));
    data_member(d, kv, "bytes", gmp_dv_bytes(bytes));
    temp_ranges(d, sec, hide, t, v);
    temp_sites(d, sec, hide, t, v);
}

/* ---- allocator overhead ---- */

enum { NPOINT = 9 };

/* A device's state at one moment as the members of its JSON object, in that object's order. */
static void point_values(const gmp_report_trace *t, const gmp_analysis_point *p,
                         gmp_doc_val out[NPOINT])
{
    out[0] = gmp_dv_k(gmp_dv_time(p->time_ns, t->t0_ns), "time_ns");
    out[1] = gmp_dv_k(gmp_dv_bytes(p->allocated), "allocated_bytes");
    out[2] = gmp_dv_k(gmp_dv_bytes(p->reserved), "reserved_bytes");
    out[3] = gmp_dv_k(gmp_dv_bytes(p->overhead), "overhead_bytes");
    out[4] = gmp_dv_k(gmp_dv_bytes(p->pool_reserved), "pool_reserved_bytes");
    out[5] = gmp_dv_k(gmp_dv_bytes(p->pool_allocated), "pool_allocated_bytes");
    out[6] = gmp_dv_k(gmp_dv_bytes(p->vmm_physical), "vmm_physical_bytes");
    out[7] = gmp_dv_k(gmp_dv_bytes(p->vmm_mapped), "vmm_mapped_bytes");
    out[8] = gmp_dv_k(gmp_dv_bytes(p->va_reserved), "va_reserved_bytes");
}

/* One device: a table of its three moments, and for the JSON an element of `overhead`
 * {device, at_peak_allocated: {...}, at_peak_reserved: {...}, at_end: {...}}. */
static void overhead_device(gmp_doc *d, gmp_doc_block *sec, unsigned hide,
                            const gmp_report_trace *t, const gmp_analysis_overhead *o)
{
    static const gmp_doc_col cols[] = {
        {"when", NULL, GMP_DOC_LIT, 0},
        {"at", NULL, GMP_DOC_TIME, 0},
        {"allocated", NULL, GMP_DOC_BYTES, 0},
        {"reserved", NULL, GMP_DOC_BYTES, 0},
        {"overhead", NULL, GMP_DOC_BYTES, 0},
        {"share", NULL, GMP_DOC_PCT, 0},
        {"pools reserved", NULL, GMP_DOC_BYTES, 0},
        {"pools allocated", NULL, GMP_DOC_BYTES, 0},
        {"VMM physical", NULL, GMP_DOC_BYTES, 0},
        {"VMM mapped", NULL, GMP_DOC_BYTES, 0},
        {"address space", NULL, GMP_DOC_BYTES, 0},
    };
    static const char *const when[3] = {"at the allocated peak", "at the reserved peak", "at exit"};
    static const char *const key[3] = {"at_peak_allocated", "at_peak_reserved", "at_end"};
    const gmp_analysis_point *p[3] = {&o->at_peak_allocated, &o->at_peak_reserved, &o->at_end};

    /* untitled: the device is the table's caption, so that the heading reads as the others
     * ("...:" over its content) */
    gmp_doc_block *dev = gmp_doc_section(d, sec, "overhead", GMP_DOC_ITEM | hide, "");
    gmp_doc_block *tb = gmp_doc_table(d, dev, NULL, cols, sizeof cols / sizeof cols[0]);
    gmp_doc_linef(d, &tb->title, "device %v", gmp_dv_device(o->device));
    data_member(d, gmp_doc_kv(d, dev), "device", gmp_dv_device(o->device));
    for (int k = 0; k < 3; k++) {
        gmp_doc_val pv[NPOINT];
        point_values(t, p[k], pv);
        gmp_doc_val *r = gmp_doc_row(d, tb);
        r[0] = gmp_dv_lit(when[k]);
        for (int j = 0; j < 4; j++)
            r[1 + j] = gmp_dv_k(pv[j], NULL);
        r[5] = gmp_dv_pct(pct(p[k]->overhead, p[k]->reserved));
        for (int j = 4; j < NPOINT; j++)
            r[2 + j] = gmp_dv_k(pv[j], NULL);
        gmp_doc_block *kv = gmp_doc_kv(d, gmp_doc_section(d, dev, key[k], GMP_DOC_DATA, ""));
        for (int j = 0; j < NPOINT; j++)
            gmp_doc_item_add(d, kv, pv[j].key, GMP_DOC_DATA, "%v", pv[j]);
    }
}

/* Shown when some wanted device had any overhead; the JSON lists every wanted device. */
static void build_overhead(gmp_doc *d, gmp_doc_block *a, const gmp_report_trace *t,
                           const gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    int any = 0;
    for (size_t i = 0; i < R->noverhead; i++) {
        const gmp_analysis_overhead *o = &R->overhead[i];
        any |=
            gmp_report_wanted(v, o->device) &&
            (o->at_peak_allocated.overhead || o->at_peak_reserved.overhead || o->at_end.overhead);
    }
    gmp_doc_block *sec =
        any ? gmp_doc_section(d, a, NULL, 0, "Allocator overhead (reserved - allocated)") : a;
    size_t n = 0;
    for (size_t i = 0; i < R->noverhead; i++) {
        if (!gmp_report_wanted(v, R->overhead[i].device))
            continue;
        overhead_device(d, sec, any ? 0 : GMP_DOC_DATA, t, &R->overhead[i]);
        n++;
    }
    if (!n)
        empty_array(d, sec, "overhead");
}

/* ---- out of memory, why ---- */

/* The largest free block inside reserved segments, as the recording allows. */
static gmp_doc_val largest_val(const gmp_analysis_oom *o)
{
    switch (o->blocks) {
    case GMP_ANALYSIS_BLOCKS_KNOWN: return gmp_dv_bytes(o->largest_free);
    case GMP_ANALYSIS_BLOCKS_EXPANDABLE:
        return gmp_dv_lit("not known (expandable segments: their mapped pages are not recorded)");
    default:
        return gmp_dv_lit("not known (the recording has no block layout: a PyTorch snapshot or "
                          "--torch-history has)");
    }
}

static void build_ooms(gmp_doc *d, gmp_doc_block *a, const gmp_report_trace *t,
                       const gmp_report_view *v, const char *pfx)
{
    static const char *const blocks[] = {"unknown", "known", "expandable"};
    static const gmp_doc_col own[] = {
        {"bytes", "bytes", GMP_DOC_BYTES, 0},
        {"count", "count", GMP_DOC_COUNT, 0},
    };
    const gmp_analysis_result *R = t->analysis;
    gmp_doc_block *sec = NULL;
    for (size_t i = 0; i < R->nooms; i++) {
        const gmp_analysis_oom *o = &R->ooms[i];
        if (!gmp_report_wanted(v, o->device))
            continue;
        if (!sec) {
            sec = gmp_doc_section(d, a, NULL, 0, "Out of memory, why");
            anchor(d, sec, pfx, "oom-why");
        }
        gmp_doc_val when = gmp_dv_k(gmp_dv_time(o->time_ns, t->t0_ns), "time_ns");
        gmp_doc_val dev = gmp_dv_k(gmp_dv_device(o->device), "device");
        gmp_doc_val req = gmp_dv_k(gmp_dv_bytes(o->requested), "requested_bytes");
        gmp_doc_val why = gmp_dv_lit(gmp_analysis_oom_verdict_text(o->verdict));
        gmp_doc_val fr = o->free_bytes ? gmp_dv_bytes(o->free_bytes) : gmp_dv_lit("unknown");
        gmp_doc_block *b;
        if (o->verdict == GMP_ANALYSIS_OOM_FRAGMENTATION)
            b = gmp_doc_verdict(d, sec, "ooms", GMP_DOC_PROBLEM,
                                "%v  device %v: %v requested: %v (%v free inside reserved "
                                "segments, %v on the device; largest free block %v)",
                                when, dev, req, why, gmp_dv_bytes(o->cached), fr,
                                o->blocks == GMP_ANALYSIS_BLOCKS_KNOWN
                                    ? gmp_dv_bytes(o->largest_free)
                                    : gmp_dv_lit("not known"));
        else if (o->verdict == GMP_ANALYSIS_OOM_OUTSIDE)
            b = gmp_doc_verdict(d, sec, "ooms", GMP_DOC_PROBLEM,
                                "%v  device %v: %v requested: %v (%v used outside the allocator "
                                "= %v device memory - %v free - %v reserved)",
                                when, dev, req, why, gmp_dv_bytes(o->outside),
                                gmp_dv_bytes(o->total_bytes), fr, gmp_dv_bytes(o->reserved));
        else
            b = gmp_doc_verdict(d, sec, "ooms", GMP_DOC_PROBLEM,
                                "%v  device %v: %v requested: %v (%v allocated; %v free inside "
                                "reserved segments, %v on the device)",
                                when, dev, req, why, gmp_dv_bytes(o->allocated),
                                gmp_dv_bytes(o->cached), fr);
        b->flags |= GMP_DOC_ITEM;
        gmp_doc_line_add(
            d, &b->title,
            data_val(gmp_dv_lit(gmp_analysis_oom_verdict_name(o->verdict)), "verdict"));
        gmp_doc_block *kv = gmp_doc_kv(d, b);
        gmp_doc_item_add(d, kv, "allocated", 0, "%v",
                         gmp_dv_k(gmp_dv_bytes(o->allocated), "allocated_bytes"));
        gmp_doc_item_add(d, kv, "reserved", 0, "%v",
                         gmp_dv_k(gmp_dv_bytes(o->reserved), "reserved_bytes"));
        gmp_doc_item_add(d, kv, "free inside reserved segments", 0, "%v (reserved - allocated)",
                         gmp_dv_k(gmp_dv_bytes(o->cached), "cached_bytes"));
        gmp_doc_item_add(
            d, kv, "largest free block", 0, "%v%v",
            gmp_dv_k(o->blocks == GMP_ANALYSIS_BLOCKS_KNOWN ? largest_val(o) : gmp_dv_none(),
                     "largest_free_block_bytes"),
            o->blocks == GMP_ANALYSIS_BLOCKS_KNOWN ? gmp_dv_lit("")
                                                   : gmp_dv_k(gmp_dv_f(largest_val(o), 0), NULL));
        gmp_doc_item_add(d, kv, "blocks", GMP_DOC_DATA, "%v",
                         gmp_dv_k(gmp_dv_lit(blocks[o->blocks]), "blocks"));
        gmp_doc_item_add(d, kv, "free on the device", 0, "%v",
                         gmp_dv_k(o->free_bytes ? gmp_dv_bytes(o->free_bytes)
                                                : gmp_dv_str((gmp_str){"", 0}, "not known"),
                                  "free_bytes"));
        gmp_doc_item_add(
            d, kv, "device memory", o->total_bytes ? 0 : GMP_DOC_DATA, "%v",
            gmp_dv_k(o->total_bytes ? gmp_dv_bytes(o->total_bytes) : gmp_dv_none(), "total_bytes"));
        gmp_doc_item_add(
            d, kv, "outside the allocator", 0, "%v%v",
            gmp_dv_k(o->has_outside ? gmp_dv_bytes(o->outside) : gmp_dv_none(),
                     "outside_allocator_bytes"),
            gmp_dv_lit(o->has_outside
                           ? " (device memory - free - reserved: the CUDA context, libraries' "
                             "workspaces, other processes)"
                           : "not known (needs the device's total and the driver's free memory)"));
        gmp_doc_item_add(d, kv, "what to try", 0, "%v",
                         gmp_dv_k(gmp_dv_lit(verdict_advice(o->verdict)), "advice"));
        /* the what-if replay: its verdict on every OOM, its table under the device's first */
        int first = 1;
        for (size_t k = 0; k < i; k++)
            first &= R->ooms[k].device != o->device || !gmp_report_wanted(v, R->ooms[k].device);
        gmp_report_whatif_build(d, b, kv, t->whatif, o->device, first);
        gmp_doc_col cols[2 + GMP_REPORT_SITE_COLS];
        size_t nc = gmp_report_site_table(cols, own, 2);
        gmp_doc_block *tb = gmp_doc_table(d, b, "live", cols, nc);
        gmp_doc_linef(d, &tb->title, "Live on the device then (%v in all), largest first",
                      gmp_dv_k(gmp_dv_bytes(o->live_total), "live_bytes"));
        for (size_t k = 0; k < o->nlive; k++) {
            gmp_doc_val *r = gmp_doc_row(d, tb);
            r[0] = gmp_dv_bytes(o->live[k].bytes);
            r[1] = gmp_dv_count(o->live[k].count);
            gmp_report_site_cells(d, t, v, &o->live[k].site, r + 2);
        }
    }
    if (!sec)
        empty_array(d, a, "ooms");
}

void gmp_report_build_analysis(gmp_doc *d, gmp_doc_block *parent, const gmp_report_trace *t,
                               const gmp_report_view *v, const char *pfx)
{
    const gmp_analysis_result *R = t->analysis;
    if (!R)
        return;
    /* No heading of its own: the analyses' sections are the trace's, as before. */
    gmp_doc_block *a = gmp_doc_section(d, parent, "analysis", 0, "");
    gmp_doc_block *data = gmp_doc_section(d, a, NULL, GMP_DOC_DATA, "");
    gmp_doc_block *opt = gmp_doc_kv(d, gmp_doc_section(d, data, "options", GMP_DOC_DATA, ""));
    data_member(d, opt, "temporary_ns", gmp_dv_dur(R->opts.temp_ns));
    data_member(d, opt, "min_repetitions", gmp_dv_count(R->opts.min_reps));
    data_member(d, opt, "rise_fraction", gmp_dv_real(R->opts.rise_frac));
    data_member(d, gmp_doc_kv(d, data), "ranges_checked", gmp_dv_count(R->ranges_checked));
    build_growth(d, a, t, v, pfx);
    build_temporary(d, a, t, v);
    build_overhead(d, a, t, v);
    build_ooms(d, a, t, v, pfx);
}
