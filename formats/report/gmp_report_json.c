/* gmp_report_json: the report as JSON for programs (schema gpumemprof-report/1, docs/report.md).
 * One trace: one report object. Several: {"schema": "gpumemprof-report-multi/1", "processes":
 * [report objects], "summary": {...}}. Sizes in bytes, times in trace-clock nanoseconds; every
 * string from a trace goes through gmp_escape. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_escape.h"
#include "gmp_report.h"

static void j_str(FILE *f, const char *s, size_t n)
{
    gmp_json_fputs(f, s ? s : "", s ? n : 0);
}

static void j_idx(FILE *f, const gmp_report_trace *t, uint32_t i)
{
    gmp_str s = gmp_report_str(t, i);
    j_str(f, s.ptr, s.len);
}

static void j_idx_or_null(FILE *f, const gmp_report_trace *t, uint32_t i)
{
    if (!i || i == GMP_REPORT_ALL)
        fputs("null", f);
    else
        j_idx(f, t, i);
}

/* ,"stack":[frames] */
static void j_stack(FILE *f, const gmp_report_trace *t, uint32_t stack)
{
    if (stack == GMP_REPORT_NO_STACK || stack == GMP_REPORT_ALL || stack >= t->nstacks)
        return;
    const gmp_report_stack *s = &t->stacks[stack];
    fputs(",\"stack\":[", f);
    for (size_t i = 0; i < s->nframes; i++) {
        const gmp_report_frame *x = &s->frames[i];
        fputs(i ? ",{" : "{", f);
        if (x->kind == GMP_FRAME_PYTHON) {
            fputs("\"function\":", f);
            j_idx(f, t, x->function);
            fputs(",\"file\":", f);
            j_idx(f, t, x->file);
            fprintf(f, ",\"line\":%" PRIu32 "}", x->line);
            continue;
        }
        fputs("\"function\":", f);
        j_idx_or_null(f, t, x->function);
        fputs(",\"file\":", f);
        j_idx_or_null(f, t, x->file);
        fprintf(f, ",\"line\":%" PRIu32 ",\"module\":", x->line);
        if (x->module) {
            gmp_str m = gmp_report_str(t, x->module);
            char off[32];
            int ol = snprintf(off, sizeof off, "+0x%" PRIx64, x->offset);
            char *b = malloc((size_t)m.len + (size_t)ol + 1);
            if (b) {
                memcpy(b, m.ptr, m.len);
                memcpy(b + m.len, off, (size_t)ol + 1);
                j_str(f, b, m.len + (size_t)ol);
                free(b);
            } else {
                j_str(f, m.ptr, m.len);
            }
        } else {
            fputs("null", f);
        }
        fprintf(f, ",\"address\":\"0x%" PRIx64 "\"", x->address);
        if (x->inlined)
            fputs(",\"inlined\":true", f);
        if (x->unknown) {
            fputs(",\"unknown\":", f);
            j_idx(f, t, x->unknown);
        } else if (!x->symbolized) {
            fputs(",\"unknown\":\"not symbolized\"", f);
        }
        fputc('}', f);
    }
    fputc(']', f);
}

static void j_header(FILE *f, const gmp_report_trace *t)
{
    fputs("  \"trace\": {\"path\":", f);
    j_idx(f, t, t->path);
    if (t->has_header) {
        fputs(",\"producer\":", f);
        j_idx(f, t, t->producer);
        fprintf(f, ",\"pid\":%" PRIu32 ",\"ppid\":%" PRIu32 ",\"hostname\":", t->pid, t->ppid);
        j_idx(f, t, t->hostname);
        fputs(",\"cmdline\":[", f);
        gmp_str c = gmp_report_str(t, t->cmdline);
        int first = 1;
        for (uint32_t i = 0; i < c.len;) {
            uint32_t j = i;
            while (j < c.len && c.ptr[j])
                j++;
            if (!first)
                fputc(',', f);
            j_str(f, c.ptr + i, j - i);
            first = 0;
            i = j + 1;
        }
        fprintf(f,
                "],\"rank\":%" PRId64 ",\"start_wall_ns\":%" PRIu64 ",\"start_trace_ns\":%" PRIu64,
                t->rank, t->start_wall_ns, t->start_trace_ns);
    }
    fputs("},\n", f);
}

static const char *open_row(FILE *f, int *first)
{
    fputs(*first ? "\n    {" : ",\n    {", f);
    *first = 0;
    return "";
}

static void close_list(FILE *f, int first, int last)
{
    fputs(first ? "]" : "\n  ]", f);
    fputs(last ? "\n" : ",\n", f);
}

static void j_rows(FILE *f, const gmp_report_trace *t, const gmp_report_view *v,
                   const gmp_report_row *a, size_t n, int with_kind, int sites)
{
    int first = 1;
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && a[i].device != a[i - 1].device)
            shown = 0;
        if (v->top && shown >= v->top)
            continue;
        shown++;
        open_row(f, &first);
        fprintf(f, "\"device\":%" PRId32, a[i].device);
        if (with_kind && a[i].kind != GMP_REPORT_ALL)
            fprintf(f, ",\"kind\":\"%s\"", gmp_mem_kind_name(a[i].kind));
        if (sites)
            fprintf(f, ",\"allocations\":%" PRIu64 ",\"allocated_bytes\":%" PRIu64, a[i].count,
                    a[i].bytes);
        else
            fprintf(f, ",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64, a[i].bytes, a[i].count);
        if (a[i].api != GMP_REPORT_ALL) {
            fputs(",\"api\":", f);
            j_idx(f, t, a[i].api);
        }
        if (a[i].range != GMP_REPORT_ALL) {
            fputs(",\"range\":", f);
            j_idx(f, t, a[i].range);
        }
        j_stack(f, t, a[i].stack);
        fputc('}', f);
    }
    close_list(f, first, 0);
}

static int listed(const gmp_report_view *v, const gmp_report_device *d)
{
    return gmp_report_wanted(v, d->id) && d->listed;
}

static void j_ranges(FILE *f, const gmp_report_trace *t, const gmp_report_view *v)
{
    size_t n = 0;
    gmp_report_range *r = gmp_report_sorted_ranges(t, v, &n);
    fputs("  \"ranges\": [", f);
    int first = 1;
    for (size_t i = 0; r && i < n && (!v->top || i < v->top); i++) {
        const gmp_report_range *x = &r[i];
        open_row(f, &first);
        fputs("\"path\":", f);
        j_idx(f, t, x->path);
        fprintf(f, ",\"kind\":\"%s\",\"depth\":%" PRIu32 ",\"device\":",
                x->thread_bound ? "push" : "start", x->depth);
        if (x->device >= -1)
            fprintf(f, "%" PRId32, x->device);
        else
            fputs("null", f);
        uint64_t inst = x->closed + x->open_at_end;
        fprintf(f,
                ",\"entered\":%" PRIu64 ",\"open_at_end\":%" PRIu64 ",\"total_ns\":%" PRIu64
                ",\"mean_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"allocations\":%" PRIu64
                ",\"allocated_bytes\":%" PRIu64 ",\"frees\":%" PRIu64 ",\"freed_bytes\":%" PRIu64
                ",\"net_bytes\":%" PRId64 ",\"left_bytes\":%" PRIu64 ",\"peak_bytes\":%" PRIu64
                ",\"peak_time_ns\":%" PRIu64 ",\"peak_inside_bytes\":%" PRIu64
                ",\"fragmentation_mean_bytes\":%.0f}",
                x->entered, x->open_at_end, x->total_ns, inst ? x->total_ns / inst : 0, x->max_ns,
                x->allocs, x->alloc_bytes, x->frees, x->free_bytes, x->net_bytes, x->left_bytes,
                x->peak_bytes, x->peak_time_ns, x->peak_inside_bytes, x->frag_mean_bytes);
    }
    close_list(f, first, 0);
    free(r);
}

static void j_extras(FILE *f, const gmp_report_trace *t, const gmp_report_view *v)
{
    /* the live set at the peak by each grouping */
    unsigned by = v->by ? v->by : 15u;
    fputs("  \"live_at_peak_by\": {", f);
    int firstg = 1;
    for (unsigned bit = 1; bit <= 8; bit <<= 1) {
        if (!(by & bit))
            continue;
        size_t n = 0;
        gmp_report_row *a = gmp_report_group(t, v, GMP_REPORT_PEAK, bit, &n);
        fprintf(f, "%s\n   \"%s\": [", firstg ? "" : ",", gmp_report_by_name(bit));
        firstg = 0;
        int first = 1;
        size_t shown = 0;
        for (size_t i = 0; a && i < n; i++) {
            if (i && a[i].device != a[i - 1].device)
                shown = 0;
            if (v->top && shown >= v->top)
                continue;
            shown++;
            open_row(f, &first);
            fprintf(f, "\"device\":%" PRId32 ",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64,
                    a[i].device, a[i].bytes, a[i].count);
            if (bit == GMP_REPORT_BY_RANGE) {
                fputs(",\"range\":", f);
                j_idx(f, t, a[i].range);
            } else if (bit == GMP_REPORT_BY_KIND) {
                fprintf(f, ",\"kind\":\"%s\"", gmp_mem_kind_name(a[i].kind));
            } else if (bit == GMP_REPORT_BY_API) {
                fputs(",\"api\":", f);
                j_idx(f, t, a[i].api);
            } else {
                if (a[i].stack == GMP_REPORT_NO_STACK)
                    fputs(",\"stack\":null", f);
                j_stack(f, t, a[i].stack);
            }
            fputc('}', f);
        }
        fputs(first ? "]" : "\n   ]", f);
        free(a);
    }
    fputs("\n  },\n", f);

    size_t n = 0;
    gmp_report_row *a = gmp_report_group(
        t, v, GMP_REPORT_SITES, GMP_REPORT_BY_API | GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &n);
    fputs("  \"frequent_sites\": [", f);
    if (a)
        j_rows(f, t, v, a, n, 0, 1);
    else
        close_list(f, 1, 0);
    free(a);

    fputs("  \"largest_allocations\": [", f);
    int first = 1;
    size_t shown = 0;
    for (size_t i = 0; i < t->nlargest; i++) {
        const gmp_report_alloc *x = &t->largest[i];
        if (!gmp_report_wanted(v, x->device) || (v->top && shown >= v->top))
            continue;
        shown++;
        open_row(f, &first);
        fprintf(f,
                "\"device\":%" PRId32 ",\"kind\":\"%s\",\"bytes\":%" PRIu64 ",\"time_ns\":%" PRIu64
                ",\"free_time_ns\":",
                x->device, gmp_mem_kind_name(x->kind), x->size, x->time_ns);
        if (x->free_ns)
            fprintf(f, "%" PRIu64, x->free_ns);
        else
            fputs("null", f);
        fprintf(f, ",\"thread\":%" PRIu32 ",\"address\":\"0x%" PRIx64 "\",\"api\":", x->tid,
                x->address);
        j_idx(f, t, x->api);
        fputs(",\"range\":", f);
        j_idx(f, t, x->range);
        j_stack(f, t, x->stack);
        fputc('}', f);
    }
    close_list(f, first, 0);

    j_ranges(f, t, v);

    fputs("  \"size_histogram\": [", f);
    first = 1;
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_report_device *d = &t->devices[i];
        if (!gmp_report_wanted(v, d->id))
            continue;
        int any = 0;
        for (int b = 0; b < GMP_REPORT_HIST; b++)
            any |= d->hist_count[b] != 0;
        if (!any)
            continue;
        open_row(f, &first);
        fprintf(f, "\"device\":%" PRId32 ",\"buckets\":[", d->id);
        int fb = 1;
        for (int b = 0; b < GMP_REPORT_HIST; b++) {
            if (!d->hist_count[b])
                continue;
            fprintf(f, "%s{\"min_bytes\":%" PRIu64 ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
                    fb ? "" : ",", b ? (uint64_t)1 << b : 0, d->hist_count[b], d->hist_bytes[b]);
            fb = 0;
        }
        fputs("]}", f);
    }
    close_list(f, first, 0);

    fputs("  \"timeline\": [", f);
    first = 1;
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_report_device *d = &t->devices[i];
        if (!listed(v, d) || !d->npoints)
            continue;
        open_row(f, &first);
        fprintf(f,
                "\"device\":%" PRId32 ",\"bucket_ns\":%" PRIu64
                ",\"columns\":[\"time_ns\",\"allocated_min\",\"allocated_max\",\"allocated\","
                "\"reserved_max\",\"reserved\",\"fragmentation_max\",\"driver_used\"],\"points\":[",
                d->id, t->bucket_ns);
        for (size_t k = 0; k < d->npoints; k++) {
            const gmp_report_point *p = &d->points[k];
            fprintf(f,
                    "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                    ",%" PRIu64 ",",
                    k ? "," : "", p->t0_ns, p->alloc_min, p->alloc_max, p->alloc_last, p->res_max,
                    p->res_last, p->frag_max);
            if (p->has_used)
                fprintf(f, "%" PRIu64 "]", p->used_max);
            else
                fputs("null]", f);
        }
        fputs("]}", f);
    }
    close_list(f, first, 0);
}

static void write_trace(FILE *f, const gmp_report_trace *t, const gmp_report_view *v)
{
    const gmp_replay_summary *s = &t->sum;
    fputs("{\n  \"schema\": \"gpumemprof-report/1\",\n", f);
    j_header(f, t);
    fprintf(f, "  \"complete\": %s,\n  \"truncated\": %s,\n  \"has_end\": %s,\n",
            s->complete ? "true" : "false", s->truncated ? "true" : "false",
            t->has_end ? "true" : "false");
    fputs("  \"completeness\": ", f);
    j_str(f, s->completeness, strlen(s->completeness));
    fprintf(f,
            ",\n  \"events\": %" PRIu64 ",\n  \"lost_events\": %" PRIu64
            ",\n  \"late_events\": %" PRIu64 ",\n  \"first_time_ns\": %" PRIu64
            ",\n  \"last_time_ns\": %" PRIu64 ",\n",
            s->events, s->lost_events, s->late_events, s->first_ns, s->last_ns);

    fputs("  \"devices\": [", f);
    int first = 1;
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_report_device *o = &t->devices[i];
        const gmp_replay_device *d = &o->d;
        if (!listed(v, o))
            continue;
        open_row(f, &first);
        fprintf(f, "\"id\":%" PRId32 ",\"name\":", d->id);
        if (o->has_def)
            j_idx(f, t, o->name);
        else
            fputs("null", f);
        fprintf(f,
                ",\"total_bytes\":%" PRIu64 ",\"peak_allocated_bytes\":%" PRIu64
                ",\"peak_time_ns\":%" PRIu64 ",\"peak_reserved_bytes\":%" PRIu64
                ",\"peak_reserved_time_ns\":%" PRIu64 ",\"allocations\":%" PRIu64
                ",\"frees\":%" PRIu64 ",\"failed_allocations\":%" PRIu64
                ",\"failed_frees\":%" PRIu64 ",\"allocated_bytes_total\":%" PRIu64
                ",\"leaked_bytes\":%" PRIu64 ",\"leaked_allocations\":%" PRIu64
                ",\"reserved_at_exit_bytes\":%" PRIu64 ",\"ooms\":%" PRIu64
                ",\"unknown_frees\":%" PRIu64 ",\"double_frees\":%" PRIu64 ",\"samples\":%" PRIu64
                ",\"max_unexplained_bytes\":%" PRIu64 ",\"max_unexplained_time_ns\":%" PRIu64,
                o->total_bytes, d->peak_allocated, d->peak_time_ns, d->peak_reserved,
                d->peak_reserved_time_ns, d->allocs, d->frees, d->failed_allocs, d->failed_frees,
                d->alloc_bytes, o->leaked_bytes, o->leaked_count, d->reserved, d->ooms,
                d->unknown_frees, d->double_frees, d->samples, d->max_unexplained,
                d->max_unexplained_time_ns);
        fprintf(f,
                ",\"fragmentation_max_bytes\":%" PRIu64 ",\"fragmentation_max_time_ns\":%" PRIu64
                ",\"fragmentation_mean_bytes\":%.0f,\"unexplained_mean_bytes\":%.0f"
                ",\"unexplained_last_bytes\":%" PRIu64 "}",
                o->frag_max, o->frag_max_time_ns, o->frag_mean, o->unexplained_mean,
                o->unexplained_last);
    }
    close_list(f, first, 0);

    fputs("  \"kinds\": [", f);
    first = 1;
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_replay_device *d = &t->devices[i].d;
        if (!gmp_report_wanted(v, d->id))
            continue;
        for (unsigned k = 0; k < GMP_MEM_KIND_COUNT; k++) {
            const gmp_replay_kind_stats *ks = &d->kind[k];
            if (!ks->allocs)
                continue;
            open_row(f, &first);
            fprintf(f,
                    "\"device\":%" PRId32 ",\"kind\":\"%s\",\"counts_in_device_peak\":%s"
                    ",\"allocations\":%" PRIu64 ",\"frees\":%" PRIu64
                    ",\"allocated_bytes_total\":%" PRIu64 ",\"peak_bytes\":%" PRIu64
                    ",\"peak_time_ns\":%" PRIu64 ",\"live_bytes_at_exit\":%" PRIu64
                    ",\"live_allocations_at_exit\":%" PRIu64 ",\"largest_bytes\":%" PRIu64 "}",
                    d->id, gmp_mem_kind_name(k), gmp_mem_kind_is_device(k) ? "true" : "false",
                    ks->allocs, ks->frees, ks->alloc_bytes, ks->peak_bytes, ks->peak_time_ns,
                    ks->live_bytes, ks->live_count, ks->max_alloc_bytes);
        }
    }
    close_list(f, first, 0);

    for (int pass = 0; pass < 2; pass++) {
        size_t n = 0;
        unsigned by = GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK | (pass ? GMP_REPORT_BY_KIND : 0);
        gmp_report_row *a =
            gmp_report_group(t, v, pass ? GMP_REPORT_LEAKS : GMP_REPORT_PEAK, by, &n);
        fputs(pass ? "  \"leaks\": [" : "  \"live_at_peak\": [", f);
        if (a)
            j_rows(f, t, v, a, n, pass, 0);
        else
            close_list(f, 1, 0);
        free(a);
    }

    fputs("  \"ooms\": [", f);
    first = 1;
    for (size_t i = 0; i < t->nooms; i++) {
        const gmp_replay_oom *o = &t->ooms[i].o;
        if (!gmp_report_wanted(v, o->device))
            continue;
        open_row(f, &first);
        fprintf(f,
                "\"device\":%" PRId32 ",\"time_ns\":%" PRIu64 ",\"thread\":%" PRIu32
                ",\"requested_bytes\":%" PRIu64 ",\"api\":",
                o->device, o->time_ns, o->tid, o->requested);
        j_idx(f, t, o->api);
        fputs(",\"range\":", f);
        j_idx(f, t, o->range);
        fprintf(f,
                ",\"live_bytes\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64 ",\"free_bytes\":%" PRIu64
                ",\"result\":%" PRId32,
                o->live_bytes, o->reserved_bytes, o->free_bytes, o->result);
        j_stack(f, t, o->stack);
        fputc('}', f);
    }
    close_list(f, first, 0);

    fprintf(f,
            "  \"anomalies\": {\"failed_allocations\":%" PRIu64 ",\"failed_frees\":%" PRIu64
            ",\"unknown_frees\":%" PRIu64 ",\"double_frees\":%" PRIu64
            ",\"replaced_allocations\":%" PRIu64 ",\"duplicate_allocations\":%" PRIu64
            ",\"unmatched_range_pops\":%" PRIu64 ",\"implicit_range_pops\":%" PRIu64
            ",\"unmatched_range_ends\":%" PRIu64 "},\n",
            s->failed_allocs, s->failed_frees, s->unknown_frees, s->double_frees,
            s->replaced_allocs, s->duplicate_allocs, s->unmatched_pops, s->implicit_pops,
            s->unmatched_ends);

    fputs("  \"notices\": [", f);
    first = 1;
    for (size_t i = 0; i < t->nnotices; i++) {
        const gmp_report_notice *o = &t->notices[i];
        open_row(f, &first);
        fprintf(f, "\"severity\":%" PRIu32 ",\"time_ns\":%" PRIu64 ",\"message\":", o->severity,
                o->time_ns);
        j_idx(f, t, o->message);
        fputc('}', f);
    }
    close_list(f, first, 0);

    j_extras(f, t, v);
    gmp_analysis_write_json(f, t, v);
    fprintf(f, "  \"sort\": \"%s\"\n}", gmp_report_sort_name(v->sort));
}

gmp_err gmp_report_write_json(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v)
{
    if (doc->ntraces == 1) {
        write_trace(f, doc->traces[0], v);
        fputc('\n', f);
    } else {
        fputs("{\"schema\": \"gpumemprof-report-multi/1\",\n\"processes\": [\n", f);
        for (size_t i = 0; i < doc->ntraces; i++) {
            if (i)
                fputs(",\n", f);
            write_trace(f, doc->traces[i], v);
        }
        fputs("\n],\n\"summary\": [", f);
        for (size_t i = 0; i < doc->ntraces; i++) {
            const gmp_report_trace *t = doc->traces[i];
            uint64_t peak = 0, peak_t = 0, leaked = 0, ooms = 0;
            int32_t pdev = -1;
            for (size_t k = 0; k < t->ndevices; k++) {
                const gmp_report_device *d = &t->devices[k];
                if (!listed(v, d))
                    continue;
                if (d->d.peak_allocated > peak) {
                    peak = d->d.peak_allocated;
                    peak_t = d->d.peak_time_ns;
                    pdev = d->id;
                }
                leaked += d->leaked_bytes;
                ooms += d->d.ooms;
            }
            fprintf(f, "%s\n  {\"path\":", i ? "," : "");
            j_idx(f, t, t->path);
            fputs(",\"label\":", f);
            j_idx(f, t, t->label);
            fprintf(f,
                    ",\"pid\":%" PRIu32 ",\"rank\":%" PRId64 ",\"events\":%" PRIu64
                    ",\"peak_allocated_bytes\":%" PRIu64 ",\"peak_device\":%" PRId32
                    ",\"peak_time_ns\":%" PRIu64 ",\"leaked_bytes\":%" PRIu64 ",\"ooms\":%" PRIu64
                    ",\"complete\":%s}",
                    t->pid, t->rank, t->sum.events, peak, pdev, peak_t, leaked, ooms,
                    t->sum.complete ? "true" : "false");
        }
        fputs("\n]}\n", f);
    }
    return ferror(f) ? GMP_ERR_IO : GMP_OK;
}

/* For sections written outside this file (gmp_analysis_out.c). */
void gmp_report_json_stack(FILE *f, const gmp_report_trace *t, uint32_t stack)
{
    j_stack(f, t, stack);
}
