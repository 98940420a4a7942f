/* gmp_report_build: the report document (gmp_doc.h) of one or several traces, built from the
 * report model (gmp_report.h) and a view. This file decides what the report says and in which
 * order, once for every format; docs/report.md describes the result (the JSON's members are the
 * keys given here).
 *
 * Shape (headings by depth):
 *   root "gpumemprof report": schema (JSON only)
 *     [several traces] "Across the N processes": a table, the largest and smallest peaks
 *     trace "PATH" (several: "process I of N: LABEL: PATH"; JSON "processes")
 *       the trace's header (process, events, completeness; the JSON's "trace" object)
 *       "Device D: NAME (TOTAL)" per listed device (JSON "devices"): figures, the timeline, the
 *         fragmentation over time, live at the peak by range/stack/kind/API, leaks, sizes
 *       memory by kind, largest allocations, frequent sites, ranges, OOMs
 *       the analyses (gmp_report_build_analysis.c)
 *       anomalies, notices from the profiler */
#include "gmp_report_build.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_report_build_analysis.h"
#include "gmp_report_findings.h"
#include "gmp_report_ranks_oom.h"
#include "gmp_report_values.h"

#define SCHEMA "gpumemprof-report/3"

typedef struct bld {
    gmp_doc *d;
    const gmp_report_trace *t;
    const gmp_report_view *v;
    char pfx[32]; /* the trace's anchor prefix (gmp_report_findings.h) */
} bld;

/* Anchors section s as name (printf-like), after the trace's prefix. */
static void anchor(const bld *b, gmp_doc_block *s, const char *fmt, int32_t dev)
{
    char name[64], buf[96];
    snprintf(name, sizeof name, fmt, dev);
    snprintf(buf, sizeof buf, "%s%s", b->pfx, name);
    gmp_doc_anchor(b->d, s, buf);
}

static gmp_doc_val str(const bld *b, uint32_t i, const char *none)
{
    return gmp_report_dv_str(b->t, i, none);
}

static gmp_doc_val stk(const bld *b, uint32_t stack)
{
    return gmp_dv_stack(gmp_report_doc_stack(b->d, b->t, stack, b->v->all_frames));
}

static gmp_doc_val tm(const bld *b, uint64_t ns)
{
    return gmp_dv_time(ns, b->t->t0_ns);
}

#define K(v, key) gmp_dv_k((v), (key))
#define KF(v, key, fl) gmp_dv_f(gmp_dv_k((v), (key)), (fl))

static const char *plural(uint64_t n, const char *s)
{
    return n == 1 ? "" : s;
}

/* Rows of a device-ordered list under the view: device filter and --top. */
static int shown_ok(const bld *b, int32_t device, size_t *shown)
{
    if (!gmp_report_wanted(b->v, device))
        return 0;
    if (b->v->top && *shown >= b->v->top)
        return 0;
    (*shown)++;
    return 1;
}

/* ---- the trace's header ---- */

static void header(const bld *b, gmp_doc_block *sec)
{
    const gmp_report_trace *t = b->t;
    gmp_doc *d = b->d;
    const gmp_replay_summary *s = &t->sum;

    /* the JSON's "trace" object: where the recording comes from */
    gmp_doc_block *tr = gmp_doc_section(d, sec, "trace", GMP_DOC_DATA, "trace");
    gmp_doc_block *tk = gmp_doc_kv(d, tr);
    gmp_doc_item_add(d, tk, "path", GMP_DOC_DATA, "%v", K(str(b, t->path, ""), "path"));
    gmp_doc_item_add(d, tk, "label", GMP_DOC_DATA, "%v", K(str(b, t->label, ""), "label"));
    if (t->has_header) {
        gmp_doc_item_add(d, tk, "producer", GMP_DOC_DATA, "%v",
                         K(str(b, t->producer, ""), "producer"));
        gmp_doc_item_add(d, tk, "pid", GMP_DOC_DATA, "%v%v", K(gmp_dv_count(t->pid), "pid"),
                         K(gmp_dv_count(t->ppid), "ppid"));
        gmp_doc_item_add(d, tk, "hostname", GMP_DOC_DATA, "%v",
                         K(str(b, t->hostname, ""), "hostname"));
        gmp_doc_item_add(d, tk, "rank", GMP_DOC_DATA, "%v", K(gmp_dv_int(t->rank), "rank"));
        gmp_doc_item_add(d, tk, "start", GMP_DOC_DATA, "%v%v",
                         K(gmp_dv_count(t->start_wall_ns), "start_wall_ns"),
                         K(gmp_dv_count(t->start_trace_ns), "start_trace_ns"));
    }

    gmp_doc_block *kv = gmp_doc_kv(d, sec);
    if (t->has_header) {
        /* the command line: arguments separated by NUL bytes, shown joined by spaces; the JSON
         * has the arguments as one string joined the same way */
        gmp_str c = gmp_report_str(t, t->cmdline);
        char *joined = gmp_doc_alloc(d, (size_t)c.len + 1);
        if (joined) {
            memcpy(joined, c.ptr, c.len);
            for (uint32_t i = 0; i + 1 < c.len; i++)
                if (!joined[i])
                    joined[i] = ' ';
        }
        uint32_t jl = c.len && joined && !joined[c.len - 1] ? c.len - 1 : c.len;
        gmp_doc_val cmd = KF(gmp_dv_str((gmp_str){joined ? joined : "", joined ? jl : 0}, ""),
                             "cmdline", GMP_DOC_CODE);
        gmp_str host = gmp_report_str(t, t->hostname);
        if (!t->pid && !host.len) /* a PyTorch snapshot names no process (pid 0, no host) */
            gmp_doc_item_add(d, kv, "process", 0, "%v%v%v",
                             gmp_dv_lit(t->end == GMP_REPORT_END_SNAPSHOT
                                            ? "PyTorch snapshot (no process recorded)"
                                            : "not recorded"),
                             gmp_dv_lit(c.len ? ": " : ""), cmd);
        else if (t->rank >= 0)
            /* "rank 3 of 64 (local 3)": the parts the launcher named */
            gmp_doc_item_add(d, kv, "process", 0, "%v on %v, rank %v%v%v%v%v%v%v%v",
                             gmp_dv_count(t->pid), str(b, t->hostname, "?"), gmp_dv_int(t->rank),
                             gmp_dv_lit(t->world_size > 0 ? " of " : ""),
                             t->world_size > 0 ? gmp_dv_int(t->world_size) : gmp_dv_lit(""),
                             gmp_dv_lit(t->local_rank >= 0 ? " (local " : ""),
                             t->local_rank >= 0 ? gmp_dv_int(t->local_rank) : gmp_dv_lit(""),
                             gmp_dv_lit(t->local_rank >= 0 ? ")" : ""),
                             gmp_dv_lit(c.len ? ": " : ""), cmd);
        else
            gmp_doc_item_add(d, kv, "process", 0, "%v on %v%v%v", gmp_dv_count(t->pid),
                             str(b, t->hostname, "?"), gmp_dv_lit(c.len ? ": " : ""), cmd);
    }
    uint64_t span = s->last_ns > s->first_ns ? s->last_ns - s->first_ns : 0;
    gmp_doc_item_add(d, kv, "events", 0, "%v over %v, %v lost",
                     K(gmp_dv_count(s->events), "events"), gmp_dv_dur(span),
                     K(gmp_dv_count(s->lost_events), "lost_events"));
    gmp_doc_item_add(
        d, kv, "completeness", 0, "%v",
        KF(gmp_dv_str((gmp_str){s->completeness, (uint32_t)strlen(s->completeness)}, ""),
           "completeness", s->complete ? 0 : GMP_DOC_WARN));
    static const char *const ends[] = {"exit", "snapshot", "cut"};
    if (t->end == GMP_REPORT_END_EXIT)
        gmp_doc_item_add(d, kv, "recording ends", GMP_DOC_DATA, "%v",
                         K(gmp_dv_lit(ends[t->end]), "recording_end"));
    else
        gmp_doc_item_add(
            d, kv, "recording ends", 0, "%v%v",
            KF(gmp_dv_lit(ends[t->end]), "recording_end", GMP_DOC_DATA),
            gmp_dv_lit(t->end == GMP_REPORT_END_SNAPSHOT
                           ? "before the program: a PyTorch snapshot, taken while it ran (what is "
                             "live at its end is in use, not leaked)"
                           : "before the program: no END record, the program was killed or the "
                             "file cut (what is live at its end is not a leak)"));
    if (t->torch_figures) /* the figure is memory_viz's, not torch.cuda.memory_allocated()'s */
        gmp_doc_item_add(d, kv, "allocated", 0, "%v",
                         K(gmp_dv_lit("PyTorch's requested bytes, freed at free_completed, as "
                                      "memory_viz counts them (torch.cuda.memory_allocated() "
                                      "counts rounded blocks, freed at free_requested)"),
                           "allocated_counts"));
    gmp_doc_item_add(
        d, kv, "complete", GMP_DOC_DATA, "%v%v%v", K(gmp_dv_bool(s->complete), "complete"),
        K(gmp_dv_bool(s->truncated), "truncated"), K(gmp_dv_bool(t->has_end), "has_end"));
    gmp_doc_item_add(
        d, kv, "times", GMP_DOC_DATA, "%v%v%v", K(gmp_dv_count(s->late_events), "late_events"),
        K(gmp_dv_count(s->first_ns), "first_time_ns"), K(gmp_dv_count(s->last_ns), "last_time_ns"));
    gmp_doc_item_add(d, kv, "sort", GMP_DOC_DATA, "%v",
                     K(gmp_dv_lit(gmp_report_sort_name(b->v->sort)), "sort"));
}

/* ---- a device ---- */

static void device_figures(const bld *b, gmp_doc_block *sec, const gmp_report_device *o)
{
    gmp_doc *d = b->d;
    const gmp_replay_device *r = &o->d;
    gmp_doc_block *kv = gmp_doc_kv(d, sec);
    gmp_doc_item_add(d, kv, "device", GMP_DOC_DATA, "%v%v%v", K(gmp_dv_device(o->id), "id"),
                     K(o->has_def ? str(b, o->name, "") : gmp_dv_none(), "name"),
                     K(gmp_dv_bytes(o->total_bytes), "total_bytes"));
    /* a device with no allocation has no peak and no time for it (null in the JSON) */
    if (r->peak_allocated)
        gmp_doc_item_add(d, kv, "peak allocated", 0, "%v at %v",
                         KF(gmp_dv_bytes(r->peak_allocated), "peak_allocated_bytes",
                            GMP_DOC_STRONG | GMP_DOC_RAW),
                         K(tm(b, r->peak_time_ns), "peak_time_ns"));
    else
        gmp_doc_item_add(d, kv, "peak allocated", 0, "%v%v (no device memory allocated)",
                         KF(gmp_dv_bytes(0), "peak_allocated_bytes", GMP_DOC_STRONG),
                         K(gmp_dv_none(), "peak_time_ns"));
    if (r->peak_reserved)
        gmp_doc_item_add(d, kv, "peak reserved", 0, "%v at %v",
                         KF(gmp_dv_bytes(r->peak_reserved), "peak_reserved_bytes", GMP_DOC_RAW),
                         K(tm(b, r->peak_reserved_time_ns), "peak_reserved_time_ns"));
    else
        gmp_doc_item_add(d, kv, "peak reserved", 0, "%v%v",
                         K(gmp_dv_bytes(0), "peak_reserved_bytes"),
                         K(gmp_dv_none(), "peak_reserved_time_ns"));
    gmp_doc_item_add(d, kv, "allocations", 0, "%v (%v freed, %v failed), %v in all",
                     K(gmp_dv_count(r->allocs), "allocations"), K(gmp_dv_count(r->frees), "frees"),
                     K(gmp_dv_count(r->failed_allocs), "failed_allocations"),
                     K(gmp_dv_bytes(r->alloc_bytes), "allocated_bytes_total"));
    if (b->t->end == GMP_REPORT_END_EXIT) {
        gmp_doc_item_add(
            d, kv, "leaked at exit", 0, "%v in %v allocation%v",
            KF(gmp_dv_bytes(o->leaked_bytes), "leaked_bytes", o->leaked_bytes ? GMP_DOC_WARN : 0),
            K(gmp_dv_count(o->leaked_count), "leaked_allocations"),
            gmp_dv_lit(plural(o->leaked_count, "s")));
        gmp_doc_item_add(d, kv, "live at end", GMP_DOC_DATA, "%v%v",
                         K(gmp_dv_bytes(o->leaked_bytes), "live_at_end_bytes"),
                         K(gmp_dv_count(o->leaked_count), "live_at_end_allocations"));
    } else {
        /* the recording ended before the program: what was live then was in use, not leaked */
        gmp_doc_item_add(d, kv, "live at end of recording", 0, "%v in %v allocation%v (%v)",
                         K(gmp_dv_bytes(o->leaked_bytes), "live_at_end_bytes"),
                         K(gmp_dv_count(o->leaked_count), "live_at_end_allocations"),
                         gmp_dv_lit(plural(o->leaked_count, "s")),
                         gmp_dv_lit(b->t->end == GMP_REPORT_END_SNAPSHOT
                                        ? "a snapshot: in use when it was taken, not leaks"
                                        : "the program did not exit in the recording: not leaks"));
        gmp_doc_item_add(d, kv, "leaked", GMP_DOC_DATA, "%v%v", K(gmp_dv_none(), "leaked_bytes"),
                         K(gmp_dv_none(), "leaked_allocations"));
    }
    gmp_doc_item_add(d, kv, "out of memory", r->ooms ? 0 : GMP_DOC_DATA, "%v time%v",
                     KF(gmp_dv_count(r->ooms), "ooms", GMP_DOC_BAD),
                     gmp_dv_lit(plural(r->ooms, "s")));
    gmp_doc_item_add(
        d, kv, "not explained by allocations", r->samples ? 0 : GMP_DOC_DATA,
        r->max_unexplained ? "max %v at %v, mean %v, last %v (%v sample%v)"
                           : "max %v%v, mean %v, last %v (%v sample%v)",
        K(gmp_dv_bytes(r->max_unexplained), "max_unexplained_bytes"),
        K(r->max_unexplained ? tm(b, r->max_unexplained_time_ns) : gmp_dv_none(),
          "max_unexplained_time_ns"),
        K(gmp_dv_bytes((uint64_t)(o->unexplained_mean + 0.5)), "unexplained_mean_bytes"),
        K(gmp_dv_bytes(o->unexplained_last), "unexplained_last_bytes"),
        K(gmp_dv_count(r->samples), "samples"), gmp_dv_lit(plural(r->samples, "s")));
    gmp_doc_item_add(d, kv, "fragmentation (reserved - allocated)", o->frag_max ? 0 : GMP_DOC_DATA,
                     "max %v at %v, mean %v",
                     K(gmp_dv_bytes(o->frag_max), "fragmentation_max_bytes"),
                     K(tm(b, o->frag_max_time_ns), "fragmentation_max_time_ns"),
                     K(gmp_dv_bytes((uint64_t)(o->frag_mean + 0.5)), "fragmentation_mean_bytes"));
    gmp_doc_item_add(d, kv, "other", GMP_DOC_DATA, "%v%v%v%v",
                     K(gmp_dv_count(r->failed_frees), "failed_frees"),
                     K(gmp_dv_bytes(r->reserved), "reserved_at_exit_bytes"),
                     K(gmp_dv_count(r->unknown_frees), "unknown_frees"),
                     K(gmp_dv_count(r->double_frees), "double_frees"));
}

/* The device's memory over time: allocated (a band from the minimum to the maximum of each
 * bucket), reserved, driver-reported use; the peak and the OOMs marked; range lanes under it. */
static void device_timeline(const bld *b, gmp_doc_block *sec, const gmp_report_device *o)
{
    static const gmp_doc_scol cols[] = {
        {"the minimum within a bucket", "allocated_min", GMP_DOC_S_LOW, 0},
        {"allocated", "allocated_max", GMP_DOC_S_HIGH, GMP_DOC_STRONG},
        {"allocated at the bucket's end", "allocated", GMP_DOC_S_HIDDEN, 0},
        {"reserved", "reserved_max", GMP_DOC_S_LINE, 0},
        {"reserved at the bucket's end", "reserved", GMP_DOC_S_HIDDEN, 0},
        {"fragmentation", "fragmentation_max", GMP_DOC_S_HIDDEN, 0},
        {"driver-reported use", "driver_used", GMP_DOC_S_DOTS, 0},
    };
    enum { NC = sizeof cols / sizeof cols[0] };
    const gmp_report_trace *t = b->t;
    if (!o->npoints)
        return;
    gmp_doc_block *s = gmp_doc_series(b->d, sec, "timeline", cols, NC, o->npoints);
    if (s->kind != GMP_DOC_SERIES || s->npoints != o->npoints)
        return;
    s->x0 = o->points[0].t0_ns;
    s->t0 = t->t0_ns;
    s->bucket_ns = t->bucket_ns;
    for (size_t i = 0; i < o->npoints; i++) {
        const gmp_report_point *p = &o->points[i];
        uint64_t *y = &s->y[i * NC];
        s->x[i] = p->t1_ns;
        y[0] = p->alloc_min;
        y[1] = p->alloc_max;
        y[2] = p->alloc_last;
        y[3] = p->res_max;
        y[4] = p->res_last;
        y[5] = p->frag_max;
        y[6] = p->has_used ? p->used_max : 0;
    }
    if (o->d.peak_allocated)
        gmp_doc_mark_add(b->d, s, o->d.peak_time_ns, "peak", 0);
    for (size_t i = 0; i < t->nooms; i++)
        if (t->ooms[i].o.device == o->id)
            gmp_doc_mark_add(b->d, s, t->ooms[i].o.time_ns, "out of memory", GMP_DOC_BAD);
    for (size_t l = 0; l < t->nlanes; l++) {
        const gmp_report_lane *ln = &t->lanes[l];
        char lab[64];
        snprintf(lab, sizeof lab, "tid %" PRIu32 ", depth %" PRIu32, ln->tid, ln->depth + 1);
        gmp_doc_lane *dl = gmp_doc_lane_add(b->d, s, gmp_doc_cstr(b->d, lab));
        for (size_t k = 0; k < ln->nspans; k++)
            gmp_doc_span_add(b->d, dl, ln->spans[k].t0_ns, ln->spans[k].t1_ns,
                             gmp_report_str(t, ln->spans[k].path));
    }
    if (o->frag_max) {
        static const gmp_doc_scol fc[] = {
            {"reserved - allocated", NULL, GMP_DOC_S_LINE, GMP_DOC_STRONG},
        };
        gmp_doc_block *sf = gmp_doc_series(b->d, sec, NULL, fc, 1, o->npoints);
        if (sf->kind != GMP_DOC_SERIES || sf->npoints != o->npoints)
            return;
        gmp_doc_linef(b->d, &sf->title, "fragmentation over time");
        sf->x0 = s->x0;
        sf->t0 = s->t0;
        sf->bucket_ns = s->bucket_ns;
        for (size_t i = 0; i < o->npoints; i++) {
            sf->x[i] = s->x[i];
            sf->y[i] = o->points[i].frag_max;
        }
    }
}

/* "Live at the peak, by range" and the others the view asks for. */
static void device_live(const bld *b, gmp_doc_block *sec, const gmp_report_device *o)
{
    static const char *const titles[] = {"range", "call stack", "kind", "API", "user frame"};
    static const char *const keys[] = {"live_at_peak_by_range", "live_at_peak_by_stack",
                                       "live_at_peak_by_kind", "live_at_peak_by_api",
                                       "live_at_peak_by_frame"};
    static const char *const ckeys[] = {"range", "stack", "kind", "api", "frame"};
    static const gmp_doc_type types[] = {GMP_DOC_STR, GMP_DOC_STACK, GMP_DOC_LIT, GMP_DOC_STR,
                                         GMP_DOC_STR};
    unsigned by =
        b->v->by ? b->v->by : GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK | GMP_REPORT_BY_KIND;
    for (unsigned bit = 1, bi = 0; bit <= GMP_REPORT_BY_FRAME; bit <<= 1, bi++) {
        if (!(by & bit))
            continue;
        /* a recording without ranges (a PyTorch snapshot without annotations) groups by the
         * first frame its stacks show, the innermost user frame, instead of one "(no range)" row;
         * --by frame asks for that table whatever the ranges (once) */
        int byframe =
            (bit == GMP_REPORT_BY_RANGE && !b->t->has_ranges) || bit == GMP_REPORT_BY_FRAME;
        if (bit == GMP_REPORT_BY_FRAME && (by & GMP_REPORT_BY_RANGE) && !b->t->has_ranges)
            continue; /* already shown in the range table's place */
        size_t n = 0;
        gmp_report_row *a =
            gmp_report_group(b->t, b->v, GMP_REPORT_PEAK, byframe ? GMP_REPORT_BY_FRAME : bit, &n);
        size_t total = 0, shown = 0;
        for (size_t i = 0; a && i < n; i++)
            total += a[i].device == o->id &&
                     (bit != GMP_REPORT_BY_STACK || a[i].stack != GMP_REPORT_NO_STACK);
        if (!total) {
            free(a);
            continue;
        }
        gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, 0, "Live at the peak, by %v",
                                           gmp_dv_lit(byframe ? "user frame" : titles[bi]));
        gmp_doc_col cols[] = {
            {"bytes", "bytes", GMP_DOC_BYTES, bit == GMP_REPORT_BY_RANGE ? GMP_DOC_BAR : 0},
            {"share", "share", GMP_DOC_PCT, 0},
            {"count", "count", GMP_DOC_COUNT, 0},
            {bit == GMP_REPORT_BY_STACK ? "stack (innermost first)"
             : byframe                  ? "frame (innermost user frame)"
                                        : titles[bi],
             byframe ? "frame" : ckeys[bi], types[bi], 0},
        };
        gmp_doc_block *tb =
            gmp_doc_table(b->d, s, byframe ? "live_at_peak_by_frame" : keys[bi], cols, 4);
        tb->total = total;
        for (size_t i = 0; i < n; i++) {
            const gmp_report_row *g = &a[i];
            if (g->device != o->id || (b->v->top && shown >= b->v->top))
                continue;
            if (bit == GMP_REPORT_BY_STACK && g->stack == GMP_REPORT_NO_STACK)
                continue;
            shown++;
            gmp_doc_val *r = gmp_doc_row(b->d, tb);
            r[0] = gmp_dv_bytes(g->bytes);
            r[1] = gmp_dv_pct(
                o->d.peak_allocated ? 100.0 * (double)g->bytes / (double)o->d.peak_allocated : 0.0);
            r[2] = gmp_dv_count(g->count);
            if (byframe)
                r[3] = str(b, g->range, "(no stack recorded)");
            else if (bit == GMP_REPORT_BY_RANGE)
                r[3] = str(b, g->range, "(no range)");
            else if (bit == GMP_REPORT_BY_STACK)
                r[3] = stk(b, g->stack);
            else if (bit == GMP_REPORT_BY_KIND)
                r[3] = gmp_dv_lit(gmp_mem_kind_name(g->kind));
            else
                r[3] = str(b, g->api, "(unknown API)");
        }
        if (shown == total)
            tb->total = 0;
        free(a);
    }
}

/* "Live at the peak, by category" (gmp_frames.h's categories of the sites' stacks and ranges),
 * when anything on the device is not `other`: every category that holds something, in their
 * order, summing to the peak. */
static void device_categories(const bld *b, gmp_doc_block *sec, const gmp_report_device *o)
{
    static const gmp_doc_col cols[] = {
        {"category", "category", GMP_DOC_LIT, 0},
        {"bytes", "bytes", GMP_DOC_BYTES, GMP_DOC_BAR},
        {"share", "share", GMP_DOC_PCT, 0},
        {"count", "count", GMP_DOC_COUNT, 0},
    };
    uint64_t bytes[GMP_CAT_COUNT] = {0}, count[GMP_CAT_COUNT] = {0};
    const gmp_report_trace *t = b->t;
    for (size_t i = 0; i < t->nsites; i++) {
        const gmp_report_row *s = &t->sites[i];
        if (s->device != o->id || !s->peak_count || !gmp_mem_kind_is_device(s->kind))
            continue;
        uint32_t c = s->category < GMP_CAT_COUNT ? s->category : GMP_CAT_OTHER;
        bytes[c] += s->peak_bytes;
        count[c] += s->peak_count;
    }
    uint64_t known = 0;
    for (unsigned c = 1; c < GMP_CAT_COUNT; c++)
        known += bytes[c];
    if (!known)
        return;
    gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, 0, "Live at the peak, by category");
    gmp_doc_block *tb = gmp_doc_table(b->d, s, "live_at_peak_by_category", cols, 4);
    static const unsigned order[] = {GMP_CAT_PARAMETER,  GMP_CAT_GRADIENT,  GMP_CAT_OPTIMIZER,
                                     GMP_CAT_ACTIVATION, GMP_CAT_TEMPORARY, GMP_CAT_OTHER};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        unsigned c = order[k];
        if (!bytes[c] && !count[c])
            continue; /* a category with nothing live (a program without PyTorch has no
                         parameters): no row; the rows still sum to the peak */
        gmp_doc_val *r = gmp_doc_row(b->d, tb);
        r[0] = gmp_dv_lit(gmp_category_name((gmp_category)c));
        r[1] = gmp_dv_bytes(bytes[c]);
        r[2] = gmp_dv_pct(
            o->d.peak_allocated ? 100.0 * (double)bytes[c] / (double)o->d.peak_allocated : 0.0);
        r[3] = gmp_dv_count(count[c]);
    }
    /* over time, stacked: each line the sum of the categories up to it, in the table's order, at
     * the moment of each bucket's most allocated memory (the top line is the timeline's) */
    static const gmp_doc_scol scols[] = {
        {"parameter", "parameter", GMP_DOC_S_LINE, 0},
        {"+ gradient", "gradient", GMP_DOC_S_LINE, 0},
        {"+ optimizer", "optimizer", GMP_DOC_S_LINE, 0},
        {"+ activation", "activation", GMP_DOC_S_LINE, 0},
        {"+ temporary", "temporary", GMP_DOC_S_LINE, 0},
        {"+ other (all allocated)", "other", GMP_DOC_S_LINE, 0},
    };
    enum { NS = sizeof scols / sizeof scols[0] };
    if (!o->npoints)
        return;
    gmp_doc_block *sr = gmp_doc_series(b->d, s, "timeline_by_category", scols, NS, o->npoints);
    if (sr->kind != GMP_DOC_SERIES || sr->npoints != o->npoints)
        return;
    gmp_doc_linef(
        b->d, &sr->title,
        "by category over time (stacked, at each bucket's most allocated; from the frames "
        "only)");
    sr->x0 = o->points[0].t0_ns;
    sr->t0 = t->t0_ns;
    sr->bucket_ns = t->bucket_ns;
    for (size_t i = 0; i < o->npoints; i++) {
        uint64_t sum = 0;
        sr->x[i] = o->points[i].t1_ns;
        for (size_t k = 0; k < NS; k++) {
            sum += o->points[i].cat_max[order[k]];
            sr->y[i * NS + k] = sum;
        }
    }
}

static const gmp_doc_col leak_cols[] = {
    {"bytes", "bytes", GMP_DOC_BYTES, 0}, {"count", "count", GMP_DOC_COUNT, 0},
    {"kind", "kind", GMP_DOC_LIT, 0},     {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
    {"stack", "stack", GMP_DOC_STACK, 0},
};

/* What was still allocated at the end on device id (leaks: grouped by kind, range and stack). */
static void leaks(const bld *b, gmp_doc_block *sec, int32_t id, const gmp_report_row *a, size_t n,
                  const char *title)
{
    size_t total = 0, shown = 0;
    for (size_t i = 0; i < n; i++)
        total += a[i].device == id;
    if (!total)
        return;
    gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, 0, "%v", gmp_dv_lit(title));
    if (id >= 0)
        anchor(b, s, "device-%" PRId32 "-leaks", id);
    gmp_doc_block *tb = gmp_doc_table(
        b->d, s, b->t->end == GMP_REPORT_END_EXIT ? "leaks" : "live_at_end", leak_cols, 5);
    for (size_t i = 0; i < n; i++) {
        const gmp_report_row *g = &a[i];
        if (g->device != id || (b->v->top && shown >= b->v->top))
            continue;
        shown++;
        gmp_doc_val *r = gmp_doc_row(b->d, tb);
        r[0] = gmp_dv_bytes(g->bytes);
        r[1] = gmp_dv_count(g->count);
        r[2] = gmp_dv_lit(gmp_mem_kind_name(g->kind));
        r[3] = str(b, g->range, "(no range)");
        r[4] = stk(b, g->stack);
    }
    tb->total = shown < total ? total : 0;
}

/* The allocation-size histogram: one row per power-of-two bucket that has allocations. */
static void sizes(const bld *b, gmp_doc_block *sec, const gmp_report_device *o)
{
    static const gmp_doc_col cols[] = {
        {"from", "min_bytes", GMP_DOC_BYTES, 0},
        {"allocations", "count", GMP_DOC_COUNT, GMP_DOC_BAR},
        {"bytes", "bytes", GMP_DOC_BYTES, 0},
    };
    gmp_doc_block *s = NULL, *tb = NULL;
    for (int i = 0; i < GMP_REPORT_HIST; i++) {
        if (!o->hist_count[i])
            continue;
        if (!s) {
            s = gmp_doc_section(b->d, sec, NULL, 0, "Allocation sizes");
            tb = gmp_doc_table(b->d, s, "size_histogram", cols, 3);
        }
        gmp_doc_val *r = gmp_doc_row(b->d, tb);
        r[0] = gmp_dv_bytes((uint64_t)1 << i);
        r[1] = gmp_dv_count(o->hist_count[i]);
        r[2] = gmp_dv_bytes(o->hist_bytes[i]);
    }
}

static void device(const bld *b, gmp_doc_block *parent, const gmp_report_device *o,
                   const gmp_report_row *lk, size_t nlk)
{
    gmp_doc_block *sec;
    if (o->id < 0)
        sec = gmp_doc_section(b->d, parent, "devices", GMP_DOC_ITEM, "Host");
    else if (o->total_bytes)
        sec = gmp_doc_section(b->d, parent, "devices", GMP_DOC_ITEM, "Device %v%v%v (%v)",
                              gmp_dv_device(o->id), gmp_dv_lit(o->name ? ": " : ""),
                              str(b, o->name, ""), gmp_dv_bytes(o->total_bytes));
    else
        sec = gmp_doc_section(b->d, parent, "devices", GMP_DOC_ITEM, "Device %v%v%v",
                              gmp_dv_device(o->id), gmp_dv_lit(o->name ? ": " : ""),
                              str(b, o->name, ""));
    if (o->id >= 0)
        anchor(b, sec, "device-%" PRId32, o->id);
    else
        anchor(b, sec, "host", o->id);
    device_figures(b, sec, o);
    device_timeline(b, sec, o);
    device_live(b, sec, o);
    if (!b->v->by || (b->v->by & GMP_REPORT_BY_CATEGORY))
        device_categories(b, sec, o);
    leaks(b, sec, o->id, lk, nlk,
          b->t->end == GMP_REPORT_END_EXIT
              ? "Live at exit (leaks)"
              : "Live at the end of the recording (not leaks: the recording ended first)");
    sizes(b, sec, o);
}

/* ---- the trace's other sections ---- */

/* An empty table in the JSON only: its member is there ([]) when there is nothing to list. */
static void empty_table(const bld *b, gmp_doc_block *sec, const char *key, const gmp_doc_col *cols,
                        size_t n)
{
    gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, GMP_DOC_DATA, "%v", gmp_dv_lit(key));
    gmp_doc_table(b->d, s, key, cols, n);
}

static void kinds(const bld *b, gmp_doc_block *sec)
{
    static const gmp_doc_col cols[] = {
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"kind", "kind", GMP_DOC_LIT, 0},
        {"in device peak", "counts_in_device_peak", GMP_DOC_BOOL, 0},
        {"allocations", "allocations", GMP_DOC_COUNT, 0},
        {"frees", "frees", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"allocated", "allocated_bytes_total", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"peak", "peak_bytes", GMP_DOC_BYTES, 0},
        {"peak at", "peak_time_ns", GMP_DOC_TIME, GMP_DOC_DATA},
        {"at exit", "live_bytes_at_exit", GMP_DOC_BYTES, 0},
        {"live at exit", "live_allocations_at_exit", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"largest", "largest_bytes", GMP_DOC_BYTES, 0},
    };
    gmp_doc_block *tb = NULL;
    for (size_t i = 0; i < b->t->ndevices; i++) {
        const gmp_replay_device *d = &b->t->devices[i].d;
        if (!gmp_report_wanted(b->v, d->id))
            continue;
        for (unsigned k = 0; k < GMP_MEM_KIND_COUNT; k++) {
            const gmp_replay_kind_stats *ks = &d->kind[k];
            if (!ks->allocs)
                continue;
            if (!tb) {
                gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, 0, "Memory by kind");
                tb = gmp_doc_table(b->d, s, "kinds", cols, sizeof cols / sizeof cols[0]);
            }
            gmp_doc_val *r = gmp_doc_row(b->d, tb);
            r[0] = gmp_dv_device(d->id);
            r[1] = gmp_dv_lit(gmp_mem_kind_name(k));
            r[2] = gmp_dv_bool(gmp_mem_kind_is_device(k));
            r[3] = gmp_dv_count(ks->allocs);
            r[4] = gmp_dv_count(ks->frees);
            r[5] = gmp_dv_bytes(ks->alloc_bytes);
            r[6] = gmp_dv_bytes(ks->peak_bytes);
            r[7] = ks->peak_bytes ? tm(b, ks->peak_time_ns) : gmp_dv_none();
            r[8] = gmp_dv_bytes(ks->live_bytes);
            r[9] = gmp_dv_count(ks->live_count);
            r[10] = gmp_dv_bytes(ks->max_alloc_bytes);
        }
    }
    if (!tb)
        empty_table(b, sec, "kinds", cols, sizeof cols / sizeof cols[0]);
}

static void largest(const bld *b, gmp_doc_block *sec)
{
    static const gmp_doc_col cols[] = {
        {"bytes", "bytes", GMP_DOC_BYTES, 0},
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"kind", "kind", GMP_DOC_LIT, 0},
        {"at", "time_ns", GMP_DOC_TIME, 0},
        {"freed at", "free_time_ns", GMP_DOC_TIME, 0},
        {"thread", "thread", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"address", "address", GMP_DOC_HEX, GMP_DOC_DATA},
        {"API", "api", GMP_DOC_STR, 0},
        {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
        {"stack", "stack", GMP_DOC_STACK, 0},
    };
    const gmp_report_trace *t = b->t;
    size_t total = 0, shown = 0;
    for (size_t i = 0; i < t->nlargest; i++)
        total += gmp_report_wanted(b->v, t->largest[i].device);
    if (!total) {
        empty_table(b, sec, "largest_allocations", cols, sizeof cols / sizeof cols[0]);
        return;
    }
    gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, 0, "Largest allocations");
    gmp_doc_block *tb =
        gmp_doc_table(b->d, s, "largest_allocations", cols, sizeof cols / sizeof cols[0]);
    for (size_t i = 0; i < t->nlargest; i++) {
        const gmp_report_alloc *a = &t->largest[i];
        if (!shown_ok(b, a->device, &shown))
            continue;
        gmp_doc_val *r = gmp_doc_row(b->d, tb);
        r[0] = gmp_dv_bytes(a->size);
        r[1] = gmp_dv_device(a->device);
        r[2] = gmp_dv_lit(gmp_mem_kind_name(a->kind));
        r[3] = tm(b, a->time_ns);
        /* never freed: an empty string says "never" in markups and is null in the JSON */
        r[4] = a->free_ns ? tm(b, a->free_ns) : gmp_dv_str((gmp_str){"", 0}, "never");
        r[5] = gmp_dv_count(a->tid);
        r[6] = gmp_dv_hex(a->address);
        r[7] = str(b, a->api, "");
        r[8] = str(b, a->range, "(no range)");
        r[9] = stk(b, a->stack);
    }
    tb->total = shown < total ? total : 0;
}

static void sites(const bld *b, gmp_doc_block *sec)
{
    static const gmp_doc_col cols[] = {
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"allocations", "allocations", GMP_DOC_COUNT, 0},
        {"bytes", "allocated_bytes", GMP_DOC_BYTES, 0},
        {"mean", NULL, GMP_DOC_BYTES, 0},
        {"API", "api", GMP_DOC_STR, 0},
        {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
        {"stack", "stack", GMP_DOC_STACK, 0},
    };
    size_t n = 0;
    gmp_report_row *a =
        gmp_report_group(b->t, b->v, GMP_REPORT_SITES,
                         GMP_REPORT_BY_API | GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &n);
    if (a && n) {
        gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, 0, "Most frequent allocation sites");
        gmp_doc_block *tb =
            gmp_doc_table(b->d, s, "frequent_sites", cols, sizeof cols / sizeof cols[0]);
        for (size_t i = 0; i < n && (!b->v->top || i < b->v->top); i++) {
            gmp_doc_val *r = gmp_doc_row(b->d, tb);
            r[0] = gmp_dv_device(a[i].device);
            r[1] = gmp_dv_count(a[i].count);
            r[2] = gmp_dv_bytes(a[i].bytes);
            r[3] = gmp_dv_bytes(a[i].count ? a[i].bytes / a[i].count : 0);
            r[4] = str(b, a[i].api, "");
            r[5] = str(b, a[i].range, "(no range)");
            r[6] = stk(b, a[i].stack);
        }
        tb->total = b->v->top && n > b->v->top ? n : 0;
    } else {
        empty_table(b, sec, "frequent_sites", cols, sizeof cols / sizeof cols[0]);
    }
    free(a);
}

static void ranges(const bld *b, gmp_doc_block *sec)
{
    static const gmp_doc_col cols[] = {
        {"range", "path", GMP_DOC_STR, GMP_DOC_TAIL},
        {"kind", NULL, GMP_DOC_LIT, 0},
        {"kind", "kind", GMP_DOC_LIT, GMP_DOC_DATA},
        {"depth", "depth", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"device", "device", GMP_DOC_DEVICE, GMP_DOC_DATA},
        {"calls", "entered", GMP_DOC_COUNT, 0},
        {"open at the end", "open_at_end", GMP_DOC_COUNT, 0},
        {"total time", "total_ns", GMP_DOC_DUR, 0},
        {"mean time", "mean_ns", GMP_DOC_DUR, 0},
        {"longest", "max_ns", GMP_DOC_DUR, GMP_DOC_DATA},
        {"allocations", "allocations", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"allocated", "allocated_bytes", GMP_DOC_BYTES, 0},
        {"frees", "frees", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"freed", "freed_bytes", GMP_DOC_BYTES, 0},
        {"net", "net_bytes", GMP_DOC_SBYTES, GMP_DOC_DATA},
        {"left behind", "left_bytes", GMP_DOC_BYTES, 0},
        {"peak inside", "peak_bytes", GMP_DOC_BYTES, 0},
        {"peak at", "peak_time_ns", GMP_DOC_TIME, GMP_DOC_DATA},
        {"of it allocated inside", "peak_inside_bytes", GMP_DOC_BYTES, 0},
        {"mean fragmentation", "fragmentation_mean_bytes", GMP_DOC_BYTES, 0},
    };
    size_t n = 0;
    gmp_report_range *x = gmp_report_sorted_ranges(b->t, b->v, &n);
    if (x && n) {
        gmp_doc_block *s = gmp_doc_section(
            b->d, sec, NULL, 0,
            "Ranges, sorted by %v (device memory inside each range, nested ranges included)",
            gmp_dv_lit(gmp_report_sort_name(b->v->sort)));
        gmp_doc_block *tb = gmp_doc_table(b->d, s, "ranges", cols, sizeof cols / sizeof cols[0]);
        for (size_t i = 0; i < n && (!b->v->top || i < b->v->top); i++) {
            const gmp_report_range *g = &x[i];
            uint64_t inst = g->closed + g->open_at_end;
            gmp_doc_val *r = gmp_doc_row(b->d, tb);
            r[0] = str(b, g->path, "(no name)");
            r[1] = gmp_dv_lit(g->thread_bound ? "push/pop" : "start/end");
            r[2] = gmp_dv_lit(g->thread_bound ? "push" : "start");
            r[3] = gmp_dv_count(g->depth);
            r[4] = gmp_dv_device(g->device);
            r[5] = gmp_dv_count(g->entered);
            r[6] = gmp_dv_count(g->open_at_end);
            r[7] = gmp_dv_dur(g->total_ns);
            r[8] = gmp_dv_dur(inst ? g->total_ns / inst : 0);
            r[9] = gmp_dv_dur(g->max_ns);
            r[10] = gmp_dv_count(g->allocs);
            r[11] = gmp_dv_bytes(g->alloc_bytes);
            r[12] = gmp_dv_count(g->frees);
            r[13] = gmp_dv_bytes(g->free_bytes);
            r[14] = gmp_dv_sbytes(g->net_bytes);
            r[15] = gmp_dv_bytes(g->left_bytes);
            r[16] = gmp_dv_bytes(g->peak_bytes);
            r[17] = g->peak_bytes ? tm(b, g->peak_time_ns) : gmp_dv_none();
            r[18] = gmp_dv_bytes(g->peak_inside_bytes);
            r[19] = gmp_dv_bytes((uint64_t)(g->frag_mean_bytes + 0.5));
        }
        tb->total = b->v->top && n > b->v->top ? n : 0;
    } else {
        empty_table(b, sec, "ranges", cols, sizeof cols / sizeof cols[0]);
    }
    free(x);
}

static void ooms(const bld *b, gmp_doc_block *sec)
{
    static const gmp_doc_col cols[] = {
        {"at", "time_ns", GMP_DOC_TIME, 0},
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"thread", "thread", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"API", "api", GMP_DOC_STR, 0},
        {"requested", "requested_bytes", GMP_DOC_BYTES, 0},
        {"allocated", "live_bytes", GMP_DOC_BYTES, 0},
        {"reserved", "reserved_bytes", GMP_DOC_BYTES, 0},
        {"driver free", "free_bytes", GMP_DOC_BYTES, GMP_DOC_DATA},
        {"result", "result", GMP_DOC_INT, GMP_DOC_DATA},
        {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
        {"stack", "stack", GMP_DOC_STACK, 0},
    };
    const gmp_report_trace *t = b->t;
    gmp_doc_block *s = NULL, *tb = NULL;
    for (size_t i = 0; i < t->nooms; i++) {
        const gmp_replay_oom *o = &t->ooms[i].o;
        if (!gmp_report_wanted(b->v, o->device))
            continue;
        if (!s) {
            s = gmp_doc_section(b->d, sec, NULL, 0, "Out of memory");
            tb = gmp_doc_table(b->d, s, "ooms", cols, sizeof cols / sizeof cols[0]);
        }
        gmp_doc_val *r = gmp_doc_row(b->d, tb);
        r[0] = tm(b, o->time_ns);
        r[1] = gmp_dv_device(o->device);
        r[2] = gmp_dv_count(o->tid);
        r[3] = str(b, o->api, "(unknown API)");
        r[4] = gmp_dv_bytes(o->requested);
        r[5] = gmp_dv_bytes(o->live_bytes);
        r[6] = gmp_dv_bytes(o->reserved_bytes);
        r[7] = gmp_dv_bytes(o->free_bytes);
        r[8] = gmp_dv_int(o->result);
        r[9] = str(b, o->range, "(no range)");
        r[10] = stk(b, o->stack);
    }
    if (!s)
        empty_table(b, sec, "ooms", cols, sizeof cols / sizeof cols[0]);
    if (s && b->v->device == INT64_MIN && t->sum.ooms > t->nooms)
        gmp_doc_notice(b->d, s, NULL, GMP_DOC_INFO, "... and %v more",
                       gmp_dv_count(t->sum.ooms - t->nooms));
}

static void anomalies(const bld *b, gmp_doc_block *sec)
{
    const gmp_replay_summary *s = &b->t->sum;
    const struct {
        uint64_t v;
        const char *what, *key;
    } items[] = {
        {s->failed_allocs, "failed allocations", "failed_allocations"},
        {s->failed_frees, "failed frees", "failed_frees"},
        {s->unknown_frees, "frees of an unknown address", "unknown_frees"},
        {s->double_frees, "double frees", "double_frees"},
        {s->replaced_allocs, "allocations at a live address (their free was lost)",
         "replaced_allocations"},
        {s->duplicate_allocs, "duplicate allocation records", "duplicate_allocations"},
        {s->unmatched_pops, "range pops without a push", "unmatched_range_pops"},
        {s->implicit_pops, "ranges closed implicitly", "implicit_range_pops"},
        {s->unmatched_ends, "range ends without a start", "unmatched_range_ends"},
        {s->late_events, "events out of time order", "late_events"},
    };
    enum { N = sizeof items / sizeof items[0] };
    int any = 0;
    for (size_t i = 0; i < N; i++)
        any |= items[i].v && i != 7; /* implicit pops are normal: not an anomaly */
    gmp_doc_block *a = gmp_doc_section(b->d, sec, "anomalies", any ? 0 : GMP_DOC_DATA, "Anomalies");
    gmp_doc_block *kv = gmp_doc_kv(b->d, a);
    for (size_t i = 0; i < N; i++) {
        if (i == N - 1) /* late_events is a member of the trace's object */
            gmp_doc_item_add(b->d, kv, items[i].what, items[i].v ? GMP_DOC_VIEW : GMP_DOC_DATA,
                             "%v", gmp_dv_count(items[i].v));
        else
            gmp_doc_item_add(b->d, kv, items[i].what, items[i].v && i != 7 ? 0 : GMP_DOC_DATA, "%v",
                             K(gmp_dv_count(items[i].v), items[i].key));
    }
}

static void notices(const bld *b, gmp_doc_block *sec)
{
    static const gmp_doc_col cols[] = {
        {"severity", "severity", GMP_DOC_LIT, 0},
        {"at", "time_ns", GMP_DOC_TIME, GMP_DOC_DATA},
        {"message", "message", GMP_DOC_STR, 0},
    };
    const gmp_report_trace *t = b->t;
    gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, t->nnotices ? 0 : GMP_DOC_DATA,
                                       "Notices from the profiler");
    gmp_doc_block *tb = gmp_doc_table(b->d, s, "notices", cols, 3);
    for (size_t i = 0; i < t->nnotices; i++) {
        const gmp_report_notice *n = &t->notices[i];
        gmp_doc_val *r = gmp_doc_row(b->d, tb);
        r[0] = gmp_dv_lit(n->severity >= GMP_NOTICE_ERROR     ? "error"
                          : n->severity == GMP_NOTICE_WARNING ? "warning"
                                                              : "info");
        r[1] = tm(b, n->time_ns);
        r[2] = str(b, n->message, "");
    }
}

/* For programs: what was live at each device's peak by range and stack together (the markups show
 * each grouping on its own, per device). */
static void live_at_peak(const bld *b, gmp_doc_block *sec)
{
    static const gmp_doc_col cols[] = {
        {"device", "device", GMP_DOC_DEVICE, 0}, {"bytes", "bytes", GMP_DOC_BYTES, 0},
        {"count", "count", GMP_DOC_COUNT, 0},    {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
        {"stack", "stack", GMP_DOC_STACK, 0},
    };
    size_t n = 0;
    gmp_report_row *a = gmp_report_group(b->t, b->v, GMP_REPORT_PEAK,
                                         GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &n);
    gmp_doc_block *s = gmp_doc_section(b->d, sec, NULL, GMP_DOC_DATA, "live at the peak");
    gmp_doc_block *tb = gmp_doc_table(b->d, s, "live_at_peak", cols, 5);
    size_t shown = 0;
    int32_t dev = INT32_MIN;
    for (size_t i = 0; a && i < n; i++) {
        if (a[i].device != dev) {
            dev = a[i].device;
            shown = 0;
        }
        if (b->v->top && shown >= b->v->top)
            continue;
        shown++;
        gmp_doc_val *r = gmp_doc_row(b->d, tb);
        r[0] = gmp_dv_device(a[i].device);
        r[1] = gmp_dv_bytes(a[i].bytes);
        r[2] = gmp_dv_count(a[i].count);
        r[3] = str(b, a[i].range, "(no range)");
        r[4] = stk(b, a[i].stack);
    }
    free(a);
}

static void trace(bld *b, gmp_doc_block *sec, const gmp_report_doc *doc, size_t ti)
{
    const gmp_report_trace *t = b->t;
    header(b, sec);
    /* the findings first, right under the header (several traces: above them, for all) */
    if (doc->ntraces == 1)
        gmp_report_build_findings(b->d, sec, doc, ti, b->v);
    size_t nlk = 0;
    gmp_report_row *lk =
        gmp_report_group(t, b->v, GMP_REPORT_LEAKS,
                         GMP_REPORT_BY_KIND | GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &nlk);
    if (!lk)
        nlk = 0;
    int any = 0;
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_report_device *o = &t->devices[i];
        if (!gmp_report_wanted(b->v, o->id) || !o->listed)
            continue;
        device(b, sec, o, lk, nlk);
        any = 1;
    }
    if (!any) {
        /* the JSON's "devices": [] (an array of device sections cannot be empty) */
        static const gmp_doc_col none[] = {{"id", "id", GMP_DOC_DEVICE, 0}};
        gmp_doc_notice(b->d, sec, NULL, GMP_DOC_INFO, "No device memory was recorded.");
        empty_table(b, sec, "devices", none, 1);
    }
    /* host memory when the host is not listed as a device (no device-kind memory there) */
    for (size_t i = 0; i < t->ndevices; i++)
        if (t->devices[i].id == -1 && !t->devices[i].listed && gmp_report_wanted(b->v, -1))
            leaks(b, sec, -1, lk, nlk,
                  t->end == GMP_REPORT_END_EXIT ? "Host memory live at exit"
                                                : "Host memory live at the end of the recording");
    free(lk);
    live_at_peak(b, sec);
    kinds(b, sec);
    largest(b, sec);
    sites(b, sec);
    ranges(b, sec);
    ooms(b, sec);
    gmp_report_build_analysis(b->d, sec, t, b->v, b->pfx);
    anomalies(b, sec);
    notices(b, sec);
}

/* ---- several traces ---- */

/* A trace's peak (the largest of its listed devices in the view), and what held most of it: the
 * range (or, without ranges, the first user frame of the stacks) with the most bytes live at that
 * device's peak. */
typedef struct peak_of {
    uint64_t peak, time, leaked, ooms;
    int32_t device;
    uint32_t top; /* string index: range path or frame, 0 none */
    uint64_t top_bytes;
    int top_is_frame;
} peak_of;

static peak_of trace_peak(const gmp_report_trace *t, const gmp_report_view *v)
{
    peak_of p = {0, 0, 0, 0, -1, 0, 0, 0};
    for (size_t k = 0; k < t->ndevices; k++) {
        const gmp_report_device *o = &t->devices[k];
        if (!gmp_report_wanted(v, o->id) || !o->listed)
            continue;
        if (o->d.peak_allocated > p.peak) {
            p.peak = o->d.peak_allocated;
            p.time = o->d.peak_time_ns;
            p.device = o->id;
        }
        p.leaked += o->leaked_bytes;
        p.ooms += o->d.ooms;
    }
    if (!p.peak)
        return p;
    p.top_is_frame = !t->has_ranges;
    size_t n = 0;
    gmp_report_row *a = gmp_report_group(
        t, v, GMP_REPORT_PEAK, p.top_is_frame ? GMP_REPORT_BY_FRAME : GMP_REPORT_BY_RANGE, &n);
    for (size_t i = 0; a && i < n; i++)
        if (a[i].device == p.device) { /* largest first within a device */
            p.top = a[i].range;
            p.top_bytes = a[i].bytes;
            break;
        }
    free(a);
    return p;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The processes' allocated memory (each on the device of its peak) on one time axis, the wall
 * clock (each trace's own start when it has none): a line per process, 128 points, each the most
 * allocated in that stretch (the last value carried through a stretch without a point, 0 before a
 * trace starts and after it ends). */
static void rank_timelines(gmp_doc *d, gmp_doc_block *s, const gmp_report_doc *doc,
                           const peak_of *pk)
{
    enum { NB = 128 };
    size_t nt = doc->ntraces, nc = 0;
    const gmp_report_device **dev = calloc(nt, sizeof *dev);
    uint64_t *base = calloc(nt, sizeof *base);
    gmp_doc_scol *cols = calloc(nt ? nt : 1, sizeof *cols);
    uint64_t lo = UINT64_MAX, hi = 0;
    if (!dev || !base || !cols)
        goto out;
    for (size_t i = 0; i < nt; i++) {
        const gmp_report_trace *t = doc->traces[i];
        for (size_t k = 0; k < t->ndevices && pk[i].peak; k++)
            if (t->devices[k].id == pk[i].device && t->devices[k].npoints)
                dev[i] = &t->devices[k];
        if (!dev[i])
            continue;
        /* wall = trace time + base; without a wall clock, each trace from its own start */
        int wall = t->start_wall_ns && t->start_wall_ns >= t->start_trace_ns;
        /* unsigned arithmetic wraps: without a wall clock, t + base = t - t0 */
        base[i] = wall ? t->start_wall_ns - t->start_trace_ns : (uint64_t)0 - t->t0_ns;
        uint64_t a = dev[i]->points[0].t0_ns + base[i];
        uint64_t b = dev[i]->points[dev[i]->npoints - 1].t1_ns + base[i];
        if (a < lo)
            lo = a;
        if (b > hi)
            hi = b;
        gmp_str lab = gmp_report_str(t, t->label), path = gmp_report_str(t, t->path);
        char key[32], title[512];
        snprintf(key, sizeof key, "process_%zu", i + 1);
        snprintf(title, sizeof title, "%.*s (%.*s)", (int)lab.len, lab.ptr, (int)path.len,
                 path.ptr);
        cols[nc].title = gmp_doc_cstr(d, title);
        cols[nc].key = gmp_doc_cstr(d, key);
        cols[nc].role = GMP_DOC_S_LINE;
        cols[nc].flags = GMP_DOC_STRONG;
        nc++;
    }
    if (nc < 2 || hi <= lo)
        goto out;
    gmp_doc_block *sr = gmp_doc_series(d, s, "timelines", cols, nc, NB);
    if (sr->kind != GMP_DOC_SERIES || sr->npoints != NB)
        goto out;
    gmp_doc_linef(d, &sr->title, "each process's allocated memory, one time axis");
    uint64_t w = (hi - lo + NB - 1) / NB;
    sr->x0 = lo;
    sr->t0 = lo;
    sr->bucket_ns = w;
    for (size_t k = 0; k < NB; k++)
        sr->x[k] = lo + (uint64_t)(k + 1) * w;
    size_t c = 0;
    for (size_t i = 0; i < nt; i++) {
        const gmp_report_device *o = dev[i];
        if (!o)
            continue;
        size_t p = 0;
        uint64_t last = 0;
        uint64_t end = o->points[o->npoints - 1].t1_ns + base[i];
        for (size_t k = 0; k < NB; k++) {
            uint64_t b0 = lo + (uint64_t)k * w, b1 = b0 + w, best = 0;
            int any = 0;
            while (p < o->npoints && o->points[p].t1_ns + base[i] <= b0) {
                last = o->points[p].alloc_last;
                p++;
            }
            for (size_t q = p; q < o->npoints && o->points[q].t0_ns + base[i] < b1; q++) {
                if (o->points[q].alloc_max > best)
                    best = o->points[q].alloc_max;
                any = 1;
            }
            if (!any)
                best = b0 >= end || b1 <= o->points[0].t0_ns + base[i] ? 0 : last;
            sr->y[k * nc + c] = best;
        }
        c++;
    }
out:
    free(dev);
    free(base);
    free(cols);
}

/* One process's device in a group of processes that share it (shared_devices). */
typedef struct share_member {
    size_t trace;
    const gmp_report_device *dev;
    uint64_t base; /* wall = trace time + base */
} share_member;

typedef struct share_ev {
    uint64_t t;      /* wall clock */
    uint64_t value;  /* the member's allocated bytes from then on */
    uint32_t member; /* index in the group */
} share_ev;

static int share_ev_cmp(const void *a, const void *b)
{
    const share_ev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->member < y->member ? -1 : x->member > y->member;
}

/* Whether two processes' devices are the same GPU: the same UUID, or (neither knowing its UUID)
 * the same ordinal on the same host. */
static int same_gpu(const gmp_report_trace *ta, const gmp_report_device *a,
                    const gmp_report_trace *tb, const gmp_report_device *b)
{
    if (a->has_uuid || b->has_uuid)
        return a->has_uuid && b->has_uuid && memcmp(a->uuid, b->uuid, sizeof a->uuid) == 0;
    gmp_str ha = gmp_report_str(ta, ta->hostname), hb = gmp_report_str(tb, tb->hostname);
    return a->id == b->id && ha.len && ha.len == hb.len && memcmp(ha.ptr, hb.ptr, ha.len) == 0;
}

/* The devices that several of the processes used: their allocated memory summed on the wall
 * clock (the one time axis of the timelines), its peak and when. Each process's allocated bytes
 * are its steps (every change, gmp_report_device); before its first event and after its exit (its
 * END record, else its last event) a process holds nothing there (its memory goes with it). Only
 * processes with a wall clock take part: without one, their times cannot be put on one axis. */
static void shared_devices(gmp_doc *d, gmp_doc_block *s, const gmp_report_doc *doc,
                           const gmp_report_view *v)
{
    static const gmp_doc_col cols[] = {
        {"device", "device", GMP_DOC_DEVICE, 0},
        {"same GPU by", "matched_by", GMP_DOC_LIT, 0},
        {"processes", "processes", GMP_DOC_STR, 0},
        {"combined peak", "combined_peak_bytes", GMP_DOC_BYTES, GMP_DOC_BAR},
        {"at", "combined_peak_time_ns", GMP_DOC_TIME, 0},
        {"from the first start", "first_start_ns", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"sum of their own peaks", "sum_of_peaks_bytes", GMP_DOC_BYTES, 0},
    };
    size_t nt = doc->ntraces;
    size_t cap = 0;
    for (size_t i = 0; i < nt; i++)
        cap += doc->traces[i]->ndevices;
    share_member *m = calloc(cap ? cap : 1, sizeof *m);
    int *grouped = calloc(cap ? cap : 1, sizeof *grouped);
    share_member *g = calloc(nt ? nt : 1, sizeof *g);
    gmp_doc_block *tb = NULL;
    if (!m || !grouped || !g)
        goto out;
    size_t nm = 0;
    for (size_t i = 0; i < nt; i++) {
        const gmp_report_trace *t = doc->traces[i];
        if (!(t->start_wall_ns && t->start_wall_ns >= t->start_trace_ns))
            continue;
        for (size_t k = 0; k < t->ndevices; k++)
            if (t->devices[k].id >= 0 && t->devices[k].d.allocs &&
                gmp_report_wanted(v, t->devices[k].id))
                m[nm++] = (share_member){i, &t->devices[k], t->start_wall_ns - t->start_trace_ns};
    }
    for (size_t a = 0; a < nm; a++) {
        if (grouped[a])
            continue;
        size_t ng = 0;
        g[ng++] = m[a];
        for (size_t b = a + 1; b < nm; b++)
            if (!grouped[b] && m[b].trace != m[a].trace &&
                same_gpu(doc->traces[m[a].trace], m[a].dev, doc->traces[m[b].trace], m[b].dev)) {
                int again = 0; /* one device per process in a group */
                for (size_t j = 0; j < ng; j++)
                    again |= g[j].trace == m[b].trace;
                if (again)
                    continue;
                grouped[b] = 1;
                g[ng++] = m[b];
            }
        if (ng < 2)
            continue;
        size_t nev = 0, cut = 0;
        uint64_t own = 0, first = UINT64_MAX;
        for (size_t j = 0; j < ng; j++) {
            nev += g[j].dev->nsteps + 1;
            cut |= (size_t)g[j].dev->steps_cut;
            own += g[j].dev->d.peak_allocated;
            const gmp_report_trace *t = doc->traces[g[j].trace];
            if (t->t0_ns + g[j].base < first)
                first = t->t0_ns + g[j].base;
        }
        if (cut)
            continue; /* too many changes to keep: no figure rather than a wrong one */
        share_ev *ev = malloc(nev * sizeof *ev);
        uint64_t *cur = calloc(ng, sizeof *cur);
        if (!ev || !cur) {
            free(ev);
            free(cur);
            goto out;
        }
        size_t n = 0;
        for (size_t j = 0; j < ng; j++) {
            const gmp_report_device *o = g[j].dev;
            const gmp_report_trace *t = doc->traces[g[j].trace];
            for (size_t k = 0; k < o->nsteps; k++)
                ev[n++] = (share_ev){o->steps[2 * k] + g[j].base, o->steps[2 * k + 1], (uint32_t)j};
            /* the process's memory goes at its exit (END), else after its last event */
            uint64_t end = t->sum.last_ns > t->sum.first_ns ? t->sum.last_ns : t->sum.first_ns;
            if (t->end_ns > end)
                end = t->end_ns;
            if (o->nsteps && o->steps[2 * (o->nsteps - 1)] > end)
                end = o->steps[2 * (o->nsteps - 1)];
            ev[n++] = (share_ev){end + g[j].base + 1, 0, (uint32_t)j}; /* the process is gone */
        }
        qsort(ev, n, sizeof *ev, share_ev_cmp);
        uint64_t sum = 0, best = 0, best_t = 0;
        for (size_t k = 0; k < n; k++) {
            sum = sum - cur[ev[k].member] + ev[k].value;
            cur[ev[k].member] = ev[k].value;
            if ((k + 1 == n || ev[k + 1].t != ev[k].t) && sum > best) {
                best = sum;
                best_t = ev[k].t;
            }
        }
        free(ev);
        free(cur);
        if (!tb) {
            gmp_doc_block *sec = gmp_doc_section(
                d, s, NULL, 0,
                "Devices shared by several processes (allocated memory summed on one time axis)");
            tb = gmp_doc_table(d, sec, "shared_devices", cols, sizeof cols / sizeof cols[0]);
        }
        char who[1024];
        size_t w = 0;
        who[0] = 0;
        for (size_t j = 0; j < ng && w + 1 < sizeof who; j++) {
            gmp_str lab = gmp_report_str(doc->traces[g[j].trace], doc->traces[g[j].trace]->label);
            int k =
                snprintf(who + w, sizeof who - w, "%s%.*s", j ? ", " : "", (int)lab.len, lab.ptr);
            w += k > 0 ? (size_t)k : 0;
        }
        gmp_doc_val *r = gmp_doc_row(d, tb);
        r[0] = gmp_dv_device(g[0].dev->id);
        r[1] = gmp_dv_lit(g[0].dev->has_uuid ? "UUID" : "ordinal and host");
        r[2] = gmp_dv_str((gmp_str){gmp_doc_cstr(d, who), (uint32_t)strnlen(who, sizeof who)}, "");
        r[3] = gmp_dv_bytes(best);
        r[4] = gmp_dv_time(best_t, first);
        r[5] = gmp_dv_count(first);
        r[6] = gmp_dv_bytes(own);
    }
out:
    free(m);
    free(grouped);
    free(g);
}

/* A rank is heavy when its peak is more than this much above the median of the peaks. */
#define HEAVY_FACTOR 1.5

static void summary(gmp_doc *d, const gmp_report_doc *doc, const gmp_report_view *v)
{
    static const gmp_doc_col cols[] = {
        {"process", "label", GMP_DOC_STR, 0},
        {"trace", "path", GMP_DOC_STR, 0},
        {"pid", "pid", GMP_DOC_COUNT, GMP_DOC_DATA},
        {"rank", "rank", GMP_DOC_INT, GMP_DOC_DATA},
        {"peak allocated", "peak_allocated_bytes", GMP_DOC_BYTES, GMP_DOC_BAR},
        {"vs median", "vs_median_pct", GMP_DOC_PCT, GMP_DOC_SIGN},
        {"device", "peak_device", GMP_DOC_DEVICE, 0},
        {"at", "peak_time_ns", GMP_DOC_TIME, 0},
        {"most of it", "top", GMP_DOC_STR, 0},
        {"bytes", "top_bytes", GMP_DOC_BYTES, 0},
        {"top is", "top_kind", GMP_DOC_LIT, GMP_DOC_DATA},
        {"heavy", "heavy", GMP_DOC_BOOL, GMP_DOC_DATA},
        {"leaked", "leaked_bytes", GMP_DOC_BYTES, 0},
        {"OOMs", "ooms", GMP_DOC_COUNT, 0},
        {"events", "events", GMP_DOC_COUNT, 0},
        {"complete", "complete", GMP_DOC_BOOL, GMP_DOC_DATA},
    };
    gmp_doc_block *s = gmp_doc_section(d, gmp_doc_root(d), NULL, 0, "Across the %v processes",
                                       gmp_dv_count(doc->ntraces));
    gmp_doc_block *tb = gmp_doc_table(d, s, "summary", cols, sizeof cols / sizeof cols[0]);
    peak_of *pk = calloc(doc->ntraces, sizeof *pk);
    uint64_t *sorted = calloc(doc->ntraces, sizeof *sorted);
    if (!pk || !sorted) {
        free(pk);
        free(sorted);
        return;
    }
    for (size_t i = 0; i < doc->ntraces; i++) {
        pk[i] = trace_peak(doc->traces[i], v);
        sorted[i] = pk[i].peak;
    }
    qsort(sorted, doc->ntraces, sizeof *sorted, u64_cmp);
    size_t nt = doc->ntraces;
    double median = nt % 2 ? (double)sorted[nt / 2]
                           : ((double)sorted[nt / 2 - 1] + (double)sorted[nt / 2]) / 2.0;
    free(sorted);
    uint64_t maxp = 0, minp = UINT64_MAX;
    size_t imax = 0, imin = 0;
    for (size_t i = 0; i < doc->ntraces; i++) {
        const gmp_report_trace *t = doc->traces[i];
        const peak_of *p = &pk[i];
        if (p->peak > maxp || i == 0) {
            maxp = p->peak;
            imax = i;
        }
        if (p->peak < minp) {
            minp = p->peak;
            imin = i;
        }
        int heavy = nt >= 2 && median > 0 && (double)p->peak > HEAVY_FACTOR * median;
        gmp_doc_val *r = gmp_doc_row(d, tb);
        r[0] = gmp_report_dv_str(t, t->label, "");
        r[1] = gmp_report_dv_str(t, t->path, "");
        r[2] = gmp_dv_count(t->pid);
        r[3] = gmp_dv_int(t->rank);
        r[4] = gmp_dv_bytes(p->peak);
        r[5] = median > 0 ? gmp_dv_f(gmp_dv_pct(100.0 * ((double)p->peak - median) / median),
                                     heavy ? GMP_DOC_BAD | GMP_DOC_SIGN : GMP_DOC_SIGN)
                          : gmp_dv_none();
        r[6] = gmp_dv_device(p->device);
        r[7] = p->peak ? gmp_dv_time(p->time, t->t0_ns) : gmp_dv_none();
        r[8] = p->top ? gmp_report_dv_str(t, p->top, "")
                      : gmp_dv_str((gmp_str){"", 0},
                                   p->top_is_frame ? "(no stack recorded)" : "(no range)");
        r[9] = p->peak ? gmp_dv_bytes(p->top_bytes) : gmp_dv_none();
        r[10] = gmp_dv_lit(p->top_is_frame ? "frame" : "range");
        r[11] = gmp_dv_bool(heavy);
        r[12] = t->end == GMP_REPORT_END_EXIT ? gmp_dv_bytes(p->leaked) : gmp_dv_none();
        r[13] = gmp_dv_count(p->ooms);
        r[14] = gmp_dv_count(t->sum.events);
        r[15] = gmp_dv_bool(t->sum.complete);
    }
    const gmp_report_trace *a = doc->traces[imax], *z = doc->traces[imin];
    if (minp)
        gmp_doc_notice(d, s, NULL, GMP_DOC_INFO,
                       "largest peak %v (%v, %v), smallest %v (%v, %v), ratio %v; median %v",
                       gmp_dv_bytes(maxp), gmp_report_dv_str(a, a->label, "?"),
                       gmp_report_dv_str(a, a->path, ""), gmp_dv_bytes(minp),
                       gmp_report_dv_str(z, z->label, "?"), gmp_report_dv_str(z, z->path, ""),
                       gmp_dv_real((double)maxp / (double)minp),
                       gmp_dv_k(gmp_dv_bytes((uint64_t)(median + 0.5)), "median_peak_bytes"));
    else
        gmp_doc_notice(d, s, NULL, GMP_DOC_INFO,
                       "largest peak %v (%v, %v), smallest %v (%v, %v); median %v",
                       gmp_dv_bytes(maxp), gmp_report_dv_str(a, a->label, "?"),
                       gmp_report_dv_str(a, a->path, ""), gmp_dv_bytes(minp),
                       gmp_report_dv_str(z, z->label, "?"), gmp_report_dv_str(z, z->path, ""),
                       gmp_dv_k(gmp_dv_bytes((uint64_t)(median + 0.5)), "median_peak_bytes"));
    gmp_doc_item_add(d, gmp_doc_kv(d, s), "median", GMP_DOC_DATA, "%v",
                     K(gmp_dv_bytes((uint64_t)(median + 0.5)), "median_peak_bytes"));
    /* the heavy ranks, one finding each */
    size_t nheavy = 0;
    for (size_t i = 0; i < doc->ntraces; i++) {
        const gmp_report_trace *t = doc->traces[i];
        const peak_of *p = &pk[i];
        if (!(nt >= 2 && median > 0 && (double)p->peak > HEAVY_FACTOR * median))
            continue;
        nheavy++;
        gmp_doc_block *b = gmp_doc_verdict(
            d, s, "heavy", GMP_DOC_WARNING,
            "heavy: %v (%v) peaks at %v, %vx the median %v; most of it %v %v (%v)",
            gmp_dv_k(gmp_report_dv_str(t, t->label, "?"), "label"),
            gmp_dv_k(gmp_report_dv_str(t, t->path, ""), "path"),
            gmp_dv_k(gmp_dv_bytes(p->peak), "peak_allocated_bytes"),
            gmp_dv_k(gmp_dv_real((double)p->peak / median), "times_median"),
            gmp_dv_bytes((uint64_t)(median + 0.5)), gmp_dv_lit(p->top_is_frame ? "at" : "in"),
            gmp_dv_k(p->top ? gmp_report_dv_str(t, p->top, "")
                            : gmp_dv_str((gmp_str){"", 0},
                                         p->top_is_frame ? "(no stack recorded)" : "(no range)"),
                     "top"),
            gmp_dv_k(gmp_dv_bytes(p->top_bytes), "top_bytes"));
        b->flags |= GMP_DOC_ITEM;
    }
    if (!nheavy) {
        gmp_doc_block *e = gmp_doc_table(d, s, "heavy", NULL, 0);
        e->flags |= GMP_DOC_DATA; /* `heavy: []` */
    }
    rank_timelines(d, s, doc, pk);
    shared_devices(d, gmp_doc_root(d), doc, v); /* a section of its own, after the summary's */
    free(pk);
}

gmp_doc *gmp_report_build(const gmp_report_doc *doc, const gmp_report_view *v)
{
    gmp_doc *d = gmp_doc_new();
    if (!d)
        return NULL;
    gmp_doc_block *root = gmp_doc_root(d);
    gmp_doc_linef(d, &root->title, "gpumemprof report");
    gmp_doc_item_add(d, gmp_doc_kv(d, root), "schema", GMP_DOC_DATA, "%v",
                     K(gmp_dv_lit(SCHEMA), "schema"));
    if (doc->ntraces > 1) {
        gmp_report_build_findings(d, root, doc, SIZE_MAX, v);
        summary(d, doc, v);
        gmp_report_ranks_oom_build(d, root, doc);
    }
    for (size_t i = 0; i < doc->ntraces; i++) {
        bld b = {d, doc->traces[i], v, {0}};
        gmp_report_anchor_prefix(b.pfx, sizeof b.pfx, doc, i);
        const gmp_report_trace *t = b.t;
        gmp_doc_block *sec;
        if (doc->ntraces == 1)
            sec = gmp_doc_section(d, root, NULL, 0, "%v", gmp_report_dv_str(t, t->path, ""));
        else
            sec = gmp_doc_section(d, root, "processes", GMP_DOC_ITEM, "process %v of %v: %v (%v)",
                                  gmp_dv_count(i + 1), gmp_dv_count(doc->ntraces),
                                  gmp_report_dv_str(t, t->label, ""),
                                  gmp_report_dv_str(t, t->path, ""));
        trace(&b, sec, doc, i);
    }
    gmp_report_stacks_apart(d);
    if (gmp_doc_error(d) != GMP_OK) {
        gmp_doc_free(d);
        return NULL;
    }
    return d;
}
