/* gmp_report_text: the report for a terminal (ANSI colours when the view asks for them). Trace
 * strings are printed as they are when they are valid UTF-8; control characters and invalid bytes
 * appear as \xNN. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_escape.h"
#include "gmp_report.h"

#define STACK_FRAMES 4
#define SPARK 60

typedef struct tw {
    FILE *f;
    const gmp_report_trace *t;
    const gmp_report_view *v;
} tw;

static void c_on(const tw *w, const char *code)
{
    if (w->v->color)
        fprintf(w->f, "\033[%sm", code);
}

static void c_off(const tw *w)
{
    if (w->v->color)
        fputs("\033[0m", w->f);
}

static void text_bytes(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = gmp_utf8_seq_len(p + i, n - i);
        if (l == 0 || (l == 1 && (p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\'))) {
            if (p[i] == '\\')
                fputs("\\\\", f);
            else
                fprintf(f, "\\x%02x", p[i]);
            i++;
            continue;
        }
        fwrite(p + i, 1, l, f);
        i += l;
    }
}

static void t_idx(const tw *w, uint32_t i, const char *none)
{
    gmp_str s = gmp_report_str(w->t, i);
    if (!s.len)
        fputs(none, w->f);
    else
        text_bytes(w->f, s.ptr, s.len);
}

static void t_stack(const tw *w, uint32_t stack)
{
    if (stack >= w->t->nstacks) {
        fputs("(no stack)", w->f);
        return;
    }
    const gmp_report_stack *s = &w->t->stacks[stack];
    for (size_t i = 0; i < s->nframes && i < STACK_FRAMES; i++) {
        char name[1024];
        size_t n = gmp_report_frame_text(w->t, &s->frames[i], name, sizeof name);
        if (i)
            fputs(" < ", w->f);
        text_bytes(w->f, name, n);
    }
    if (s->nframes > STACK_FRAMES)
        fputs(" < ...", w->f);
}

static void heading(const tw *w, const char *fmt, const char *what, size_t top, size_t total)
{
    fputs("\n", w->f);
    c_on(w, "1");
    fprintf(w->f, fmt, what);
    if (top && total > top)
        fprintf(w->f, " (top %zu of %zu)", top, total);
    fputc(':', w->f);
    c_off(w);
    fputc('\n', w->f);
}

static void t_header(const tw *w)
{
    const gmp_report_trace *t = w->t;
    FILE *f = w->f;
    c_on(w, "1");
    fputs("gpumemprof report: ", f);
    t_idx(w, t->path, "");
    c_off(w);
    fputc('\n', f);
    if (t->has_header) {
        fprintf(f, "  process %" PRIu32 " on ", t->pid);
        t_idx(w, t->hostname, "");
        if (t->rank >= 0)
            fprintf(f, ", rank %" PRId64, t->rank);
        gmp_str c = gmp_report_str(t, t->cmdline);
        if (c.len) {
            fputs(": ", f);
            for (uint32_t i = 0; i < c.len;) {
                uint32_t j = i;
                while (j < c.len && c.ptr[j])
                    j++;
                if (i)
                    fputc(' ', f);
                text_bytes(f, c.ptr + i, j - i);
                i = j + 1;
            }
        }
        fputc('\n', f);
    }
    const gmp_replay_summary *s = &t->sum;
    uint64_t span = s->last_ns > s->first_ns ? s->last_ns - s->first_ns : 0;
    fprintf(f, "  %" PRIu64 " events over %" PRIu64 ".%06" PRIu64 " s, %" PRIu64 " lost\n",
            s->events, span / 1000000000u, span % 1000000000u / 1000u, s->lost_events);
    fputs("  ", f);
    if (!s->complete)
        c_on(w, "33");
    text_bytes(f, s->completeness, strlen(s->completeness));
    c_off(w);
    fputc('\n', f);
}

/* A line of block characters: the maximum of each column of points, scaled to max. */
static void sparkline(FILE *f, const gmp_report_device *d, int frag, uint64_t max)
{
    static const char *const blocks[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    size_t n = d->npoints, cols = n < SPARK ? n : SPARK;
    for (size_t c = 0; c < cols; c++) {
        size_t a = c * n / cols, b = (c + 1) * n / cols;
        uint64_t v = 0;
        for (size_t i = a; i < b; i++) {
            uint64_t x = frag ? d->points[i].frag_max : d->points[i].alloc_max;
            if (x > v)
                v = x;
        }
        int k = max ? (int)((v * 8 + max - 1) / max) : 0;
        fputs(blocks[k < 0 ? 0 : k > 8 ? 8 : k], f);
    }
}

static void t_group(const tw *w, const gmp_report_device *d, unsigned bit)
{
    size_t n = 0;
    gmp_report_row *a = gmp_report_group(w->t, w->v, GMP_REPORT_PEAK, bit, &n);
    if (!a)
        return;
    size_t total = 0, shown = 0;
    for (size_t i = 0; i < n; i++)
        total += a[i].device == d->id &&
                 (bit != GMP_REPORT_BY_STACK || a[i].stack != GMP_REPORT_NO_STACK);
    static const char *const titles[] = {"range", "call stack", "kind", "API"};
    static const char *const cols[] = {"range", "stack (innermost first)", "kind", "API"};
    int bi = bit == 1 ? 0 : bit == 2 ? 1 : bit == 4 ? 2 : 3;
    if (total) {
        heading(w, "  Live at the peak, by %s", titles[bi], w->v->top, total);
        fprintf(w->f, "  %12s %7s %8s  %s\n", "bytes", "share", "count", cols[bi]);
    }
    for (size_t i = 0; i < n && total; i++) {
        const gmp_report_row *g = &a[i];
        if (g->device != d->id || (w->v->top && shown >= w->v->top))
            continue;
        if (bit == GMP_REPORT_BY_STACK && g->stack == GMP_REPORT_NO_STACK)
            continue;
        shown++;
        char b1[32];
        double pct =
            d->d.peak_allocated ? 100.0 * (double)g->bytes / (double)d->d.peak_allocated : 0.0;
        fprintf(w->f, "  %12s %6.1f%% %8" PRIu64 "  ",
                gmp_report_fmt_bytes(g->bytes, b1, sizeof b1), pct, g->count);
        if (bit == GMP_REPORT_BY_RANGE)
            t_idx(w, g->range, "(no range)");
        else if (bit == GMP_REPORT_BY_STACK)
            t_stack(w, g->stack);
        else if (bit == GMP_REPORT_BY_KIND)
            fputs(gmp_mem_kind_name(g->kind), w->f);
        else
            t_idx(w, g->api, "(unknown API)");
        fputc('\n', w->f);
    }
    free(a);
}

static void t_device(const tw *w, const gmp_report_device *o, const gmp_report_row *leaks,
                     size_t nleaks)
{
    FILE *f = w->f;
    const gmp_replay_device *d = &o->d;
    char b1[32], b2[32];
    fputc('\n', f);
    c_on(w, "1");
    fputs("Device ", f);
    if (o->id < 0) {
        fputs("host", f);
    } else {
        fprintf(f, "%" PRId32, o->id);
        gmp_str nm = gmp_report_str(w->t, o->name);
        if (nm.len) {
            fputs(": ", f);
            text_bytes(f, nm.ptr, nm.len);
        }
        if (o->total_bytes)
            fprintf(f, " (%s)", gmp_report_fmt_bytes(o->total_bytes, b1, sizeof b1));
    }
    c_off(w);
    fputc('\n', f);
    fprintf(f, "  peak allocated  %-12s at %s  (%" PRIu64 " bytes)\n",
            gmp_report_fmt_bytes(d->peak_allocated, b1, sizeof b1),
            gmp_report_fmt_time(w->t, d->peak_time_ns, b2, sizeof b2), d->peak_allocated);
    fprintf(f, "  peak reserved   %-12s at %s  (%" PRIu64 " bytes)\n",
            gmp_report_fmt_bytes(d->peak_reserved, b1, sizeof b1),
            gmp_report_fmt_time(w->t, d->peak_reserved_time_ns, b2, sizeof b2), d->peak_reserved);
    fprintf(f, "  allocations     %" PRIu64 " (%" PRIu64 " freed, %" PRIu64 " failed), %s in all\n",
            d->allocs, d->frees, d->failed_allocs,
            gmp_report_fmt_bytes(d->alloc_bytes, b1, sizeof b1));
    fputs("  leaked at exit  ", f);
    if (o->leaked_bytes)
        c_on(w, "31");
    fprintf(f, "%s in %" PRIu64 " allocation%s",
            gmp_report_fmt_bytes(o->leaked_bytes, b1, sizeof b1), o->leaked_count,
            o->leaked_count == 1 ? "" : "s");
    c_off(w);
    fputc('\n', f);
    if (d->ooms) {
        c_on(w, "31");
        fprintf(f, "  out of memory   %" PRIu64 " time%s", d->ooms, d->ooms == 1 ? "" : "s");
        c_off(w);
        fputc('\n', f);
    }
    if (d->samples && d->max_unexplained)
        fprintf(f, "  not explained   %s of driver-reported use at %s\n",
                gmp_report_fmt_bytes(d->max_unexplained, b1, sizeof b1),
                gmp_report_fmt_time(w->t, d->max_unexplained_time_ns, b2, sizeof b2));
    if (o->frag_max) {
        char b3[32];
        fprintf(f, "  fragmentation   max %s at %s, mean %s (reserved - allocated)\n",
                gmp_report_fmt_bytes(o->frag_max, b1, sizeof b1),
                gmp_report_fmt_time(w->t, o->frag_max_time_ns, b2, sizeof b2),
                gmp_report_fmt_bytes((uint64_t)(o->frag_mean + 0.5), b3, sizeof b3));
    }
    if (o->npoints > 1 && d->peak_allocated) {
        fputs("  over time       ", f);
        sparkline(f, o, 0, d->peak_allocated);
        fprintf(f, "  (allocated, 0 .. %s)\n",
                gmp_report_fmt_bytes(d->peak_allocated, b1, sizeof b1));
        if (o->frag_max) {
            fputs("  fragmentation   ", f);
            sparkline(f, o, 1, o->frag_max);
            fprintf(f, "  (0 .. %s)\n", gmp_report_fmt_bytes(o->frag_max, b1, sizeof b1));
        }
    }

    unsigned by =
        w->v->by ? w->v->by : GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK | GMP_REPORT_BY_KIND;
    for (unsigned bit = 1; bit <= 8; bit <<= 1)
        if (by & bit)
            t_group(w, o, bit);

    size_t total = 0, shown = 0;
    for (size_t i = 0; i < nleaks; i++)
        total += leaks[i].device == o->id;
    if (total) {
        heading(w, "  Live at exit (leaks)%s", "", w->v->top, total);
        fprintf(f, "  %12s %8s  %-16s %s\n", "bytes", "count", "kind", "range");
        for (size_t i = 0; i < nleaks; i++) {
            const gmp_report_row *g = &leaks[i];
            if (g->device != o->id || (w->v->top && shown >= w->v->top))
                continue;
            shown++;
            fprintf(f, "  %12s %8" PRIu64 "  %-16s ", gmp_report_fmt_bytes(g->bytes, b1, sizeof b1),
                    g->count, gmp_mem_kind_name(g->kind));
            t_idx(w, g->range, "(no range)");
            fputc('\n', f);
        }
    }
}

static void t_kinds(const tw *w)
{
    FILE *f = w->f;
    int any = 0;
    char b1[32], b2[32], b3[32];
    for (size_t i = 0; i < w->t->ndevices; i++) {
        const gmp_replay_device *d = &w->t->devices[i].d;
        if (!gmp_report_wanted(w->v, d->id))
            continue;
        for (unsigned k = 0; k < GMP_MEM_KIND_COUNT; k++) {
            const gmp_replay_kind_stats *ks = &d->kind[k];
            if (!ks->allocs)
                continue;
            if (!any) {
                heading(w, "Memory by kind (* counts in the device peak)%s", "", 0, 0);
                fprintf(f, "  %-6s %-17s %10s %12s %12s %12s\n", "device", "kind", "allocs", "peak",
                        "at exit", "largest");
                any = 1;
            }
            char dv[16];
            if (d->id < 0)
                snprintf(dv, sizeof dv, "host");
            else
                snprintf(dv, sizeof dv, "%" PRId32, d->id);
            char kn[32];
            snprintf(kn, sizeof kn, "%s%s", gmp_mem_kind_name(k),
                     gmp_mem_kind_is_device(k) ? " *" : "");
            fprintf(f, "  %-6s %-17s %10" PRIu64 " %12s %12s %12s\n", dv, kn, ks->allocs,
                    gmp_report_fmt_bytes(ks->peak_bytes, b1, sizeof b1),
                    gmp_report_fmt_bytes(ks->live_bytes, b2, sizeof b2),
                    gmp_report_fmt_bytes(ks->max_alloc_bytes, b3, sizeof b3));
        }
    }
}

static void dev_label(char *buf, size_t n, int32_t id)
{
    if (id < 0)
        snprintf(buf, n, "host");
    else
        snprintf(buf, n, "%" PRId32, id);
}

static void t_largest(const tw *w)
{
    FILE *f = w->f;
    size_t total = 0, shown = 0;
    for (size_t i = 0; i < w->t->nlargest; i++)
        total += gmp_report_wanted(w->v, w->t->largest[i].device);
    if (!total)
        return;
    heading(w, "Largest allocations%s", "", w->v->top, total);
    fprintf(f, "  %12s %-6s %-16s %-14s %-14s %-20s %s\n", "bytes", "device", "kind", "at",
            "freed at", "API", "range");
    for (size_t i = 0; i < w->t->nlargest; i++) {
        const gmp_report_alloc *a = &w->t->largest[i];
        if (!gmp_report_wanted(w->v, a->device) || (w->v->top && shown >= w->v->top))
            continue;
        shown++;
        char b1[32], b2[32], b3[32], dv[16];
        dev_label(dv, sizeof dv, a->device);
        fprintf(f, "  %12s %-6s %-16s %-14s %-14s ", gmp_report_fmt_bytes(a->size, b1, sizeof b1),
                dv, gmp_mem_kind_name(a->kind),
                gmp_report_fmt_time(w->t, a->time_ns, b2, sizeof b2),
                a->free_ns ? gmp_report_fmt_time(w->t, a->free_ns, b3, sizeof b3) : "never");
        gmp_str api = gmp_report_str(w->t, a->api);
        text_bytes(f, api.ptr, api.len);
        fprintf(f, "%*s ", api.len < 20 ? (int)(20 - api.len) : 0, "");
        t_idx(w, a->range, "(no range)");
        fputc('\n', f);
    }
}

static void t_sites(const tw *w)
{
    FILE *f = w->f;
    size_t n = 0;
    gmp_report_row *a =
        gmp_report_group(w->t, w->v, GMP_REPORT_SITES,
                         GMP_REPORT_BY_API | GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &n);
    if (!a || !n) {
        free(a);
        return;
    }
    size_t total = w->v->top && n > w->v->top ? n : 0;
    heading(w, "Most frequent allocation sites%s", "", w->v->top, total);
    fprintf(f, "  %-6s %10s %12s %12s  %-20s %s\n", "device", "allocs", "bytes", "mean", "API",
            "range / stack");
    for (size_t i = 0; i < n && (!w->v->top || i < w->v->top); i++) {
        const gmp_report_row *g = &a[i];
        char b1[32], b2[32], dv[16];
        dev_label(dv, sizeof dv, g->device);
        fprintf(f, "  %-6s %10" PRIu64 " %12s %12s  ", dv, g->count,
                gmp_report_fmt_bytes(g->bytes, b1, sizeof b1),
                gmp_report_fmt_bytes(g->count ? g->bytes / g->count : 0, b2, sizeof b2));
        gmp_str api = gmp_report_str(w->t, g->api);
        text_bytes(f, api.ptr, api.len);
        fprintf(f, "%*s ", api.len < 20 ? (int)(20 - api.len) : 0, "");
        t_idx(w, g->range, "(no range)");
        if (g->stack != GMP_REPORT_NO_STACK) {
            fputs(" @ ", f);
            t_stack(w, g->stack);
        }
        fputc('\n', f);
    }
    free(a);
}

static void t_ranges(const tw *w)
{
    FILE *f = w->f;
    size_t n = 0;
    gmp_report_range *r = gmp_report_sorted_ranges(w->t, w->v, &n);
    if (!r || !n) {
        free(r);
        return;
    }
    char title[96];
    snprintf(title, sizeof title, "Ranges, sorted by %s", gmp_report_sort_name(w->v->sort));
    heading(w, "%s", title, w->v->top, n);
    fprintf(f, "  %7s %11s %11s %11s %11s %11s %11s %11s %11s  %s\n", "calls", "total", "mean",
            "allocated", "freed", "left", "peak", "inside", "frag", "range");
    for (size_t i = 0; i < n && (!w->v->top || i < w->v->top); i++) {
        const gmp_report_range *x = &r[i];
        char b[8][32];
        uint64_t inst = x->closed + x->open_at_end;
        fprintf(f, "  %7" PRIu64 " %11s %11s %11s %11s %11s %11s %11s %11s  ", x->entered,
                gmp_report_fmt_dur(x->total_ns, b[0], 32),
                gmp_report_fmt_dur(inst ? x->total_ns / inst : 0, b[1], 32),
                gmp_report_fmt_bytes(x->alloc_bytes, b[2], 32),
                gmp_report_fmt_bytes(x->free_bytes, b[3], 32),
                gmp_report_fmt_bytes(x->left_bytes, b[4], 32),
                gmp_report_fmt_bytes(x->peak_bytes, b[5], 32),
                gmp_report_fmt_bytes(x->peak_inside_bytes, b[6], 32),
                gmp_report_fmt_bytes((uint64_t)(x->frag_mean_bytes + 0.5), b[7], 32));
        t_idx(w, x->path, "(no name)");
        if (!x->thread_bound)
            fputs(" (start/end)", f);
        if (x->open_at_end)
            fprintf(f, " (%" PRIu64 " open at the end)", x->open_at_end);
        fputc('\n', f);
    }
    free(r);
}

static void t_ooms(const tw *w)
{
    FILE *f = w->f;
    size_t shown = 0;
    char b1[32], b2[32], b3[32];
    for (size_t i = 0; i < w->t->nooms; i++) {
        const gmp_replay_oom *o = &w->t->ooms[i].o;
        if (!gmp_report_wanted(w->v, o->device))
            continue;
        if (!shown++)
            heading(w, "Out of memory%s", "", 0, 0);
        c_on(w, "31");
        fprintf(f, "  %s  device %" PRId32 "  ",
                gmp_report_fmt_time(w->t, o->time_ns, b1, sizeof b1), o->device);
        t_idx(w, o->api, "(unknown API)");
        fprintf(f, " of %s with %s allocated  ", gmp_report_fmt_bytes(o->requested, b2, sizeof b2),
                gmp_report_fmt_bytes(o->live_bytes, b3, sizeof b3));
        t_idx(w, o->range, "(no range)");
        c_off(w);
        fputc('\n', f);
    }
    if (w->v->device == INT64_MIN && w->t->sum.ooms > w->t->nooms)
        fprintf(f, "  ... and %" PRIu64 " more\n", w->t->sum.ooms - w->t->nooms);
}

static void t_anomalies(const tw *w)
{
    const gmp_replay_summary *s = &w->t->sum;
    FILE *f = w->f;
    struct {
        uint64_t v;
        const char *what;
    } items[] = {
        {s->failed_allocs, "failed allocation"},
        {s->failed_frees, "failed free"},
        {s->unknown_frees, "free of an unknown address"},
        {s->double_frees, "double free"},
        {s->replaced_allocs, "allocation at a live address (its free was lost)"},
        {s->duplicate_allocs, "duplicate allocation record"},
        {s->unmatched_pops, "range pop without a push"},
        {s->unmatched_ends, "range end without a start"},
        {s->late_events, "event out of time order"},
    };
    int any = 0;
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        if (!items[i].v)
            continue;
        if (!any++)
            heading(w, "Anomalies%s", "", 0, 0);
        fprintf(f, "  %" PRIu64 " %s%s\n", items[i].v, items[i].what, items[i].v == 1 ? "" : "(s)");
    }
    for (size_t i = 0; i < w->t->nnotices; i++) {
        const gmp_report_notice *n = &w->t->notices[i];
        if (!i)
            heading(w, "Notices from the profiler%s", "", 0, 0);
        fprintf(f, "  %s: ",
                n->severity >= GMP_NOTICE_ERROR     ? "error"
                : n->severity == GMP_NOTICE_WARNING ? "warning"
                                                    : "info");
        t_idx(w, n->message, "");
        fputc('\n', f);
    }
}

static void t_trace(const tw *w)
{
    t_header(w);
    size_t nleaks = 0;
    gmp_report_row *leaks = gmp_report_group(w->t, w->v, GMP_REPORT_LEAKS,
                                             GMP_REPORT_BY_KIND | GMP_REPORT_BY_RANGE, &nleaks);
    int any = 0;
    for (size_t i = 0; i < w->t->ndevices; i++) {
        const gmp_report_device *d = &w->t->devices[i];
        if (!gmp_report_wanted(w->v, d->id) || !d->listed)
            continue;
        t_device(w, d, leaks, nleaks);
        any = 1;
    }
    if (!any)
        fprintf(w->f, "\nNo device memory was recorded.\n");
    const gmp_report_device *h = NULL;
    for (size_t i = 0; i < w->t->ndevices; i++)
        if (w->t->devices[i].id == -1)
            h = &w->t->devices[i];
    if (h && !h->listed && gmp_report_wanted(w->v, -1)) {
        size_t shown = 0;
        char b1[32];
        for (size_t i = 0; i < nleaks; i++) {
            const gmp_report_row *g = &leaks[i];
            if (g->device != -1 || (w->v->top && shown >= w->v->top))
                continue;
            if (!shown++) {
                heading(w, "Host memory live at exit%s", "", 0, 0);
                fprintf(w->f, "  %12s %8s  %-16s %s\n", "bytes", "count", "kind", "range");
            }
            fprintf(w->f, "  %12s %8" PRIu64 "  %-16s ",
                    gmp_report_fmt_bytes(g->bytes, b1, sizeof b1), g->count,
                    gmp_mem_kind_name(g->kind));
            t_idx(w, g->range, "(no range)");
            fputc('\n', w->f);
        }
    }
    free(leaks);
    t_kinds(w);
    t_largest(w);
    t_sites(w);
    t_ranges(w);
    t_ooms(w);
    gmp_analysis_write_text(w->f, w->t, w->v);
    t_anomalies(w);
}

static void t_summary(FILE *f, const gmp_report_doc *doc, const gmp_report_view *v)
{
    tw w0 = {f, doc->traces[0], v};
    heading(&w0, "Across %s", "the processes", 0, 0);
    fprintf(f, "  %-30s %14s %14s %6s %12s %5s %10s\n", "process", "peak allocated", "at", "device",
            "leaked", "OOMs", "events");
    uint64_t maxp = 0, minp = UINT64_MAX;
    size_t imax = 0, imin = 0;
    for (size_t i = 0; i < doc->ntraces; i++) {
        const gmp_report_trace *t = doc->traces[i];
        tw w = {f, t, v};
        uint64_t peak = 0, pt = 0, leaked = 0, ooms = 0;
        int32_t pd = -1;
        for (size_t k = 0; k < t->ndevices; k++) {
            const gmp_report_device *d = &t->devices[k];
            if (!gmp_report_wanted(v, d->id) || !d->listed)
                continue;
            if (d->d.peak_allocated > peak) {
                peak = d->d.peak_allocated;
                pt = d->d.peak_time_ns;
                pd = d->id;
            }
            leaked += d->leaked_bytes;
            ooms += d->d.ooms;
        }
        if (peak > maxp || i == 0) {
            maxp = peak > maxp || i == 0 ? peak : maxp;
            imax = i;
        }
        if (peak < minp) {
            minp = peak;
            imin = i;
        }
        char b1[32], b2[32], b3[32], dv[16], lab[40];
        dev_label(dv, sizeof dv, pd);
        gmp_str l = gmp_report_str(t, t->label);
        snprintf(lab, sizeof lab, "%.*s", (int)l.len, l.ptr);
        fputs("  ", f);
        text_bytes(f, lab, strlen(lab));
        fprintf(f, "%*s %14s %14s %6s %12s %5" PRIu64 " %10" PRIu64 "\n",
                strlen(lab) < 30 ? (int)(30 - strlen(lab)) : 0, "",
                gmp_report_fmt_bytes(peak, b1, sizeof b1),
                gmp_report_fmt_time(t, pt, b2, sizeof b2), dv,
                gmp_report_fmt_bytes(leaked, b3, sizeof b3), ooms, t->sum.events);
        (void)w;
    }
    char b1[32], b2[32];
    fprintf(f, "  largest peak %s (", gmp_report_fmt_bytes(maxp, b1, sizeof b1));
    t_idx(&(tw){f, doc->traces[imax], v}, doc->traces[imax]->label, "?");
    fprintf(f, "), smallest %s (", gmp_report_fmt_bytes(minp, b2, sizeof b2));
    t_idx(&(tw){f, doc->traces[imin], v}, doc->traces[imin]->label, "?");
    fputs(")", f);
    if (minp)
        fprintf(f, ", ratio %.2f", (double)maxp / (double)minp);
    fputc('\n', f);
}

gmp_err gmp_report_write_text(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v)
{
    for (size_t i = 0; i < doc->ntraces; i++) {
        tw w = {f, doc->traces[i], v};
        if (doc->ntraces > 1) {
            if (i)
                fputc('\n', f);
            c_on(&w, "1;7");
            fprintf(f, "=== process %zu of %zu: ", i + 1, doc->ntraces);
            t_idx(&w, w.t->label, "");
            fputs(" ===", f);
            c_off(&w);
            fputc('\n', f);
        }
        t_trace(&w);
    }
    if (doc->ntraces > 1)
        t_summary(f, doc, v);
    return ferror(f) ? GMP_ERR_IO : GMP_OK;
}

/* For sections written outside this file (gmp_analysis_out.c). */
void gmp_report_text_str(FILE *f, const gmp_report_trace *t, uint32_t i, const char *none)
{
    tw w = {f, t, NULL};
    t_idx(&w, i, none);
}

void gmp_report_text_stack(FILE *f, const gmp_report_trace *t, uint32_t stack)
{
    tw w = {f, t, NULL};
    t_stack(&w, stack);
}
