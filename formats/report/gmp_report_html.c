/* gmp_report_html: the report as one self-contained HTML file: inline CSS and inline SVG plots, no
 * script, no external reference (works offline, can be attached to a ticket). Plots: memory over
 * time per device (allocated with its min/max per bucket, reserved, driver-reported use, the peak,
 * OOMs) with the NVTX ranges under it, the layers live at the peak as bars, fragmentation over
 * time, an allocation-size histogram. Every string from a trace goes through gmp_html_fputs. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_escape.h"
#include "gmp_report.h"

#define W 960.0 /* plot width */
#define H 200.0 /* plot height */
#define ML 70.0 /* left margin (axis labels) */
#define LANE 16.0

typedef struct hw {
    FILE *f;
    const gmp_report_trace *t;
    const gmp_report_view *v;
} hw;

static void h_bytes(FILE *f, const char *s, size_t n)
{
    gmp_html_fputs(f, s ? s : "", s ? n : 0);
}

static void h_idx(const hw *w, uint32_t i, const char *none)
{
    gmp_str s = gmp_report_str(w->t, i);
    if (!s.len)
        fputs(none, w->f);
    else
        h_bytes(w->f, s.ptr, s.len);
}

static const char *B(uint64_t v, char *b)
{
    return gmp_report_fmt_bytes(v, b, 32);
}

static void h_stack(const hw *w, uint32_t stack)
{
    if (stack >= w->t->nstacks) {
        fputs("<i>(no stack)</i>", w->f);
        return;
    }
    const gmp_report_stack *s = &w->t->stacks[stack];
    fputs("<span class=st>", w->f);
    for (size_t i = 0; i < s->nframes && i < 8; i++) {
        char name[1024];
        size_t n = gmp_report_frame_text(w->t, &s->frames[i], name, sizeof name);
        if (i)
            fputs("<br>", w->f);
        h_bytes(w->f, name, n);
    }
    if (s->nframes > 8)
        fputs("<br>…", w->f);
    fputs("</span>", w->f);
}

static void dev_label(char *buf, size_t n, int32_t id)
{
    if (id < 0)
        snprintf(buf, n, "host");
    else
        snprintf(buf, n, "%" PRId32, id);
}

/* A colour for a range path: a hue from its hash. */
static unsigned hue(gmp_str s)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < s.len; i++)
        h = (h ^ (unsigned char)s.ptr[i]) * 16777619u;
    return h % 360u;
}

static const char *const css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}"
    "h1{font-size:22px}h2{font-size:19px;border-bottom:2px solid #ccc;margin-top:32px}"
    "h3{font-size:16px;margin-top:24px}h4{font-size:14px;margin:16px 0 4px}"
    "table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 8px;"
    "vertical-align:top}th{background:#f4f4f4;text-align:left}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums;white-space:nowrap}.st{font-family:monospace;font-size:12px}"
    ".warn{color:#a40}.bad{color:#c00;font-weight:bold}svg{display:block;margin:6px 0}"
    "svg text{font:11px system-ui,sans-serif}.note{color:#666;font-size:12px}";

static void more(const hw *w, size_t total)
{
    if (w->v->top && total > w->v->top)
        fprintf(w->f, " <span class=note>(top %zu of %zu)</span>", w->v->top, total);
}

static double xpos(uint64_t t, uint64_t t0, uint64_t t1)
{
    if (t1 <= t0 || t <= t0)
        return ML;
    double x = ML + (W - ML) * (double)(t - t0) / (double)(t1 - t0);
    return x > W ? W : x;
}

/* Memory over time with the ranges under it. */
static void svg_timeline(const hw *w, const gmp_report_device *o)
{
    FILE *f = w->f;
    const gmp_report_trace *t = w->t;
    if (o->npoints < 1)
        return;
    uint64_t t0 = o->points[0].t0_ns, t1 = o->points[o->npoints - 1].t1_ns;
    uint64_t ymax =
        o->d.peak_reserved > o->d.peak_allocated ? o->d.peak_reserved : o->d.peak_allocated;
    for (size_t i = 0; i < o->npoints; i++)
        if (o->points[i].has_used && o->points[i].used_max > ymax)
            ymax = o->points[i].used_max;
    if (!ymax)
        ymax = 1;
    size_t nl = t->nlanes;
    double hh = H + 24 + (nl ? 8 + LANE * (double)nl : 0);
    fprintf(f, "<svg width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">",
            W + 10, hh, W + 10, hh);
    fputs("<title>memory over time</title>", f);
    /* grid and axis labels */
    for (int k = 0; k <= 4; k++) {
        double y = H - H * k / 4.0 + 4;
        char b[32];
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#eee\"/>", ML, y,
                W, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", ML - 4, y + 4,
                B((uint64_t)((double)ymax * k / 4.0), b));
    }
    for (int k = 0; k <= 5; k++) {
        uint64_t tt = t0 + (uint64_t)((double)(t1 - t0) * k / 5.0);
        double x = xpos(tt, t0, t1);
        char b[32];
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"4\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#f2f2f2\"/>"
                "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"%s\">%s</text>",
                x, x, H + 4, x, H + 18,
                k == 5 ? "end"
                : k    ? "middle"
                       : "start",
                gmp_report_fmt_time(t, tt, b, sizeof b));
    }
#define Y(v) (H + 4 - H * (double)(v) / (double)ymax)
    /* allocated: the area under its maximum, then the min..max envelope of each bucket */
    fprintf(f, "<path fill=\"#dbe8f6\" stroke=\"none\" d=\"M%.1f %.1f", ML, Y(0));
    for (size_t i = 0; i < o->npoints; i++) {
        const gmp_report_point *p = &o->points[i];
        fprintf(f, "L%.1f %.1fL%.1f %.1f", xpos(p->t0_ns, t0, t1), Y(p->alloc_max),
                xpos(p->t1_ns, t0, t1), Y(p->alloc_max));
    }
    fprintf(f, "L%.1f %.1fZ\"/>", xpos(o->points[o->npoints - 1].t1_ns, t0, t1), Y(0));
    fputs("<path fill=\"#9cc3ea\" stroke=\"none\" d=\"", f);
    for (size_t i = 0; i < o->npoints; i++) {
        const gmp_report_point *p = &o->points[i];
        fprintf(f, "%c%.1f %.1fL%.1f %.1f", i ? 'L' : 'M', xpos(p->t0_ns, t0, t1), Y(p->alloc_max),
                xpos(p->t1_ns, t0, t1), Y(p->alloc_max));
    }
    for (size_t i = o->npoints; i-- > 0;) {
        const gmp_report_point *p = &o->points[i];
        fprintf(f, "L%.1f %.1fL%.1f %.1f", xpos(p->t1_ns, t0, t1), Y(p->alloc_min),
                xpos(p->t0_ns, t0, t1), Y(p->alloc_min));
    }
    fputs("Z\"><title>allocated (min-max per bucket)</title></path>", f);
    /* allocated after each bucket, reserved */
    for (int which = 0; which < 2; which++) {
        fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" d=\"",
                which ? "#e08a1e" : "#1f5fa8");
        for (size_t i = 0; i < o->npoints; i++) {
            const gmp_report_point *p = &o->points[i];
            uint64_t v = which ? p->res_max : p->alloc_last;
            fprintf(f, "%c%.1f %.1fL%.1f %.1f", i ? 'L' : 'M', xpos(p->t0_ns, t0, t1), Y(v),
                    xpos(p->t1_ns, t0, t1), Y(v));
        }
        fprintf(f, "\"><title>%s</title></path>", which ? "reserved" : "allocated");
    }
    for (size_t i = 0; i < o->npoints; i++) {
        const gmp_report_point *p = &o->points[i];
        if (p->has_used)
            fprintf(f,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"#777\"><title>driver-reported "
                    "use %" PRIu64 " bytes</title></circle>",
                    xpos(p->t0_ns + (p->t1_ns - p->t0_ns) / 2, t0, t1), Y(p->used_max),
                    p->used_max);
    }
    for (size_t i = 0; i < t->nooms; i++) {
        const gmp_replay_oom *oo = &t->ooms[i].o;
        if (oo->device != o->id)
            continue;
        double x = xpos(oo->time_ns, t0, t1);
        char b[32];
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"4\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#c00\" "
                "stroke-dasharray=\"3 2\"><title>out of memory: %s requested</title></line>",
                x, x, H + 4, B(oo->requested, b));
    }
    {
        char b[32], c[32];
        fprintf(f,
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#c00\"><title>peak %s at "
                "%s</title></circle>",
                xpos(o->d.peak_time_ns, t0, t1), Y(o->d.peak_allocated), B(o->d.peak_allocated, b),
                gmp_report_fmt_time(t, o->d.peak_time_ns, c, sizeof c));
    }
#undef Y
    /* the ranges under it: one lane per thread and depth */
    double y = H + 30;
    uint32_t prev_tid = UINT32_MAX;
    for (size_t l = 0; l < nl; l++) {
        const gmp_report_lane *ln = &t->lanes[l];
        if (ln->tid != prev_tid)
            fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">tid %" PRIu32 "</text>",
                    ML - 4, y + 12, ln->tid);
        prev_tid = ln->tid;
        for (size_t k = 0; k < ln->nspans; k++) {
            const gmp_report_span *s = &ln->spans[k];
            double x0 = xpos(s->t0_ns, t0, t1), x1 = xpos(s->t1_ns, t0, t1);
            if (x1 - x0 < 0.5)
                x1 = x0 + 0.5;
            gmp_str p = gmp_report_str(t, s->path);
            fprintf(f,
                    "<g><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" "
                    "fill=\"hsl(%u,55%%,72%%)\" stroke=\"#fff\" stroke-width=\"0.5\"/><title>",
                    x0, y, x1 - x0, LANE - 2, hue(p));
            h_bytes(f, p.ptr, p.len);
            fputs("</title>", f);
            const char *last = p.ptr;
            for (uint32_t i = 0; i < p.len; i++)
                if (p.ptr[i] == '/')
                    last = p.ptr + i + 1;
            size_t ln_len = p.len - (size_t)(last - p.ptr);
            size_t fit = (size_t)((x1 - x0 - 4) / 6.5);
            if (fit >= 3) {
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" clip-path=\"inset(0)\">", x0 + 2, y + 11);
                size_t k2 = ln_len < fit ? ln_len : fit;
                while (k2 < ln_len && k2 > 0 && ((unsigned char)last[k2] & 0xc0) == 0x80)
                    k2--; /* do not cut inside a UTF-8 sequence */
                h_bytes(f, last, k2);
                fputs("</text>", f);
            }
            fputs("</g>", f);
        }
        y += LANE;
    }
    fputs("</svg>\n", f);
    fputs("<div class=note><span style=\"color:#1f5fa8\">&#9632;</span> allocated "
          "(band: min–max within a bucket) <span style=\"color:#e08a1e\">&#9632;</span> reserved "
          "<span style=\"color:#777\">&#9679;</span> driver-reported use "
          "<span style=\"color:#c00\">&#9679;</span> peak, dashed: out of memory",
          f);
    if (nl)
        fputs("; below: NVTX ranges per thread and depth", f);
    fprintf(f, "; %zu buckets of %s</div>\n", o->npoints,
            gmp_report_fmt_dur(t->bucket_ns, (char[32]){0}, 32));
}

static void svg_frag(const hw *w, const gmp_report_device *o)
{
    FILE *f = w->f;
    if (!o->frag_max || o->npoints < 1)
        return;
    uint64_t t0 = o->points[0].t0_ns, t1 = o->points[o->npoints - 1].t1_ns;
    double h = 80;
    char b[32];
    fprintf(f, "<h4>Fragmentation over time (reserved − allocated)</h4>");
    fprintf(f, "<svg width=\"%.0f\" height=\"%.0f\" role=\"img\"><title>fragmentation</title>",
            W + 10, h + 10);
    fprintf(f, "<text x=\"%.0f\" y=\"12\" text-anchor=\"end\">%s</text>", ML - 4,
            B(o->frag_max, b));
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>", ML - 4, h + 4);
    fprintf(f, "<path fill=\"#f3c48a\" stroke=\"#e08a1e\" d=\"M%.1f %.1f", ML, h + 4);
    for (size_t i = 0; i < o->npoints; i++) {
        const gmp_report_point *p = &o->points[i];
        double y = h + 4 - h * (double)p->frag_max / (double)o->frag_max;
        fprintf(f, "L%.1f %.1fL%.1f %.1f", xpos(p->t0_ns, t0, t1), y, xpos(p->t1_ns, t0, t1), y);
    }
    fprintf(f, "L%.1f %.1fZ\"/></svg>\n", W, h + 4);
}

static void svg_bars(const hw *w, const gmp_report_device *o, const gmp_report_row *a, size_t n)
{
    FILE *f = w->f;
    size_t rows = 0;
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i].device != o->id || rows >= (w->v->top ? w->v->top : 20))
            continue;
        rows++;
        if (a[i].bytes > max)
            max = a[i].bytes;
    }
    if (!rows || !max)
        return;
    double rh = 20, lw = 300;
    fprintf(f,
            "<svg width=\"%.0f\" height=\"%.0f\" role=\"img\"><title>layers live at the "
            "peak</title>",
            W + 10, rh * (double)rows + 6);
    size_t r = 0;
    for (size_t i = 0; i < n && r < rows; i++) {
        if (a[i].device != o->id)
            continue;
        gmp_str p = gmp_report_str(w->t, a[i].range);
        double y = 3 + rh * (double)r++, bw = (W - lw - 90) * (double)a[i].bytes / (double)max;
        char b[32];
        fprintf(f, "<g><title>");
        if (p.len)
            h_bytes(f, p.ptr, p.len);
        else
            fputs("(no range)", f);
        fprintf(f, ": %" PRIu64 " bytes in %" PRIu64 " allocations</title>", a[i].bytes,
                a[i].count);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", lw - 6, y + 13);
        size_t k = p.len;
        const char *s = p.ptr;
        if (k > 44) { /* keep the end of a long path */
            s = p.ptr + p.len - 43;
            k = 43;
            while (k > 0 && ((unsigned char)*s & 0xc0) == 0x80) {
                s++;
                k--;
            }
            fputs("…", f);
        }
        if (p.len)
            h_bytes(f, s, k);
        else
            fputs("(no range)", f);
        fprintf(f,
                "</text><rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" "
                "fill=\"hsl(%u,55%%,62%%)\"/><text x=\"%.1f\" y=\"%.1f\">%s</text></g>",
                lw, y, bw < 1 ? 1 : bw, rh - 4, hue(p), lw + (bw < 1 ? 1 : bw) + 4, y + 13,
                B(a[i].bytes, b));
    }
    fputs("</svg>\n", f);
}

static void svg_hist(const hw *w, const gmp_report_device *o)
{
    FILE *f = w->f;
    int lo = -1, hi = -1;
    uint64_t max = 0;
    for (int b = 0; b < GMP_REPORT_HIST; b++) {
        if (!o->hist_count[b])
            continue;
        if (lo < 0)
            lo = b;
        hi = b;
        if (o->hist_count[b] > max)
            max = o->hist_count[b];
    }
    if (lo < 0)
        return;
    int nb = hi - lo + 1;
    double bw = (W - ML) / (nb < 8 ? 8 : nb), h = 120;
    fputs("<h4>Allocation sizes</h4>", f);
    fprintf(f,
            "<svg width=\"%.0f\" height=\"%.0f\" role=\"img\"><title>allocation-size "
            "histogram</title>",
            W + 10, h + 40);
    fprintf(f, "<text x=\"%.0f\" y=\"12\" text-anchor=\"end\">%" PRIu64 "</text>", ML - 4, max);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>", ML - 4, h + 4);
    for (int b = lo; b <= hi; b++) {
        double x = ML + bw * (b - lo), bh = h * (double)o->hist_count[b] / (double)max;
        char s1[32], s2[32];
        uint64_t lo_b = b ? (uint64_t)1 << b : 0;
        fprintf(f,
                "<g><title>%s to %s: %" PRIu64 " allocations, %s</title>"
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#6a9fd4\"/>"
                "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text></g>",
                B(lo_b, s1), B(b < 63 ? ((uint64_t)1 << (b + 1)) - 1 : UINT64_MAX, s2),
                o->hist_count[b], B(o->hist_bytes[b], (char[32]){0}), x + 1, h + 4 - bh, bw - 2, bh,
                x + bw / 2, h + 18, B(lo_b, (char[32]){0}));
    }
    fputs("</svg>\n", f);
}

static void h_device(const hw *w, const gmp_report_device *o, const gmp_report_row *leaks,
                     size_t nleaks)
{
    FILE *f = w->f;
    const gmp_replay_device *d = &o->d;
    char b1[32], b2[32];
    if (o->id < 0) {
        fputs("<h3>Host</h3>\n", f);
    } else {
        fprintf(f, "<h3>Device %" PRId32, o->id);
        gmp_str nm = gmp_report_str(w->t, o->name);
        if (nm.len) {
            fputs(": ", f);
            h_bytes(f, nm.ptr, nm.len);
        }
        if (o->total_bytes)
            fprintf(f, " (%s)", B(o->total_bytes, b1));
        fputs("</h3>\n", f);
    }
    fputs("<table>", f);
    fprintf(f, "<tr><th>peak allocated</th><td><b>%s</b> at %s (%" PRIu64 " bytes)</td></tr>",
            B(d->peak_allocated, b1), gmp_report_fmt_time(w->t, d->peak_time_ns, b2, sizeof b2),
            d->peak_allocated);
    fprintf(f, "<tr><th>peak reserved</th><td>%s at %s (%" PRIu64 " bytes)</td></tr>",
            B(d->peak_reserved, b1),
            gmp_report_fmt_time(w->t, d->peak_reserved_time_ns, b2, sizeof b2), d->peak_reserved);
    fprintf(f,
            "<tr><th>allocations</th><td>%" PRIu64 " (%" PRIu64 " freed, %" PRIu64
            " failed), %s in all</td></tr>",
            d->allocs, d->frees, d->failed_allocs, B(d->alloc_bytes, b1));
    fprintf(f, "<tr><th>leaked at exit</th><td%s>%s in %" PRIu64 " allocation%s</td></tr>",
            o->leaked_bytes ? " class=warn" : "", B(o->leaked_bytes, b1), o->leaked_count,
            o->leaked_count == 1 ? "" : "s");
    if (d->ooms)
        fprintf(f, "<tr><th>out of memory</th><td class=bad>%" PRIu64 " time%s</td></tr>", d->ooms,
                d->ooms == 1 ? "" : "s");
    if (d->samples)
        fprintf(f,
                "<tr><th>driver-reported use not explained by allocations</th><td>max %s at %s, "
                "mean %s, last %s (%" PRIu64 " samples)</td></tr>",
                B(d->max_unexplained, b1),
                gmp_report_fmt_time(w->t, d->max_unexplained_time_ns, b2, sizeof b2),
                B((uint64_t)(o->unexplained_mean + 0.5), (char[32]){0}),
                B(o->unexplained_last, (char[32]){0}), d->samples);
    if (o->frag_max)
        fprintf(f,
                "<tr><th>fragmentation (reserved − allocated)</th><td>max %s at %s, mean "
                "%s</td></tr>",
                B(o->frag_max, b1), gmp_report_fmt_time(w->t, o->frag_max_time_ns, b2, sizeof b2),
                B((uint64_t)(o->frag_mean + 0.5), (char[32]){0}));
    fputs("</table>\n", f);
    svg_timeline(w, o);
    svg_frag(w, o);

    unsigned by =
        w->v->by ? w->v->by : GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK | GMP_REPORT_BY_KIND;
    static const char *const titles[] = {"range", "call stack", "kind", "API"};
    for (unsigned bit = 1, bi = 0; bit <= 8; bit <<= 1, bi++) {
        if (!(by & bit))
            continue;
        size_t n = 0, total = 0, shown = 0;
        gmp_report_row *a = gmp_report_group(w->t, w->v, GMP_REPORT_PEAK, bit, &n);
        for (size_t i = 0; a && i < n; i++)
            total += a[i].device == o->id &&
                     (bit != GMP_REPORT_BY_STACK || a[i].stack != GMP_REPORT_NO_STACK);
        if (total) {
            fprintf(f, "<h4>Live at the peak, by %s", titles[bi]);
            more(w, total);
            fputs("</h4>\n", f);
            if (bit == GMP_REPORT_BY_RANGE)
                svg_bars(w, o, a, n);
            fprintf(f, "<table><tr><th>bytes</th><th>share</th><th>count</th><th>%s</th></tr>\n",
                    titles[bi]);
        }
        for (size_t i = 0; total && i < n; i++) {
            const gmp_report_row *g = &a[i];
            if (g->device != o->id || (w->v->top && shown >= w->v->top))
                continue;
            if (bit == GMP_REPORT_BY_STACK && g->stack == GMP_REPORT_NO_STACK)
                continue;
            shown++;
            double pct =
                d->peak_allocated ? 100.0 * (double)g->bytes / (double)d->peak_allocated : 0.0;
            fprintf(
                f, "<tr><td class=n>%s</td><td class=n>%.1f%%</td><td class=n>%" PRIu64 "</td><td>",
                B(g->bytes, b1), pct, g->count);
            if (bit == GMP_REPORT_BY_RANGE)
                h_idx(w, g->range, "<i>(no range)</i>");
            else if (bit == GMP_REPORT_BY_STACK)
                h_stack(w, g->stack);
            else if (bit == GMP_REPORT_BY_KIND)
                fputs(gmp_mem_kind_name(g->kind), f);
            else
                h_idx(w, g->api, "<i>(unknown)</i>");
            fputs("</td></tr>\n", f);
        }
        if (total)
            fputs("</table>\n", f);
        free(a);
    }
    size_t total = 0, shown = 0;
    for (size_t i = 0; i < nleaks; i++)
        total += leaks[i].device == o->id;
    if (total) {
        fputs("<h4>Live at exit (leaks)", f);
        more(w, total);
        fputs("</h4>\n<table><tr><th>bytes</th><th>count</th><th>kind</th><th>range</th>"
              "<th>stack</th></tr>\n",
              f);
        for (size_t i = 0; i < nleaks; i++) {
            const gmp_report_row *g = &leaks[i];
            if (g->device != o->id || (w->v->top && shown >= w->v->top))
                continue;
            shown++;
            fprintf(f, "<tr><td class=n>%s</td><td class=n>%" PRIu64 "</td><td>%s</td><td>",
                    B(g->bytes, b1), g->count, gmp_mem_kind_name(g->kind));
            h_idx(w, g->range, "<i>(no range)</i>");
            fputs("</td><td>", f);
            if (g->stack != GMP_REPORT_NO_STACK)
                h_stack(w, g->stack);
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    svg_hist(w, o);
}

static void h_trace(const hw *w)
{
    FILE *f = w->f;
    const gmp_report_trace *t = w->t;
    char b1[32], b2[32], b3[32];
    fputs("<section>\n<h2>", f);
    if (gmp_report_str(t, t->label).len) {
        h_idx(w, t->label, "");
        fputs(": ", f);
    }
    h_idx(w, t->path, "");
    fputs("</h2>\n<p>", f);
    if (t->has_header) {
        fprintf(f, "Process %" PRIu32 " on ", t->pid);
        h_idx(w, t->hostname, "?");
        if (t->rank >= 0)
            fprintf(f, ", rank %" PRId64, t->rank);
        gmp_str c = gmp_report_str(t, t->cmdline);
        if (c.len) {
            fputs(": <code>", f);
            for (uint32_t i = 0; i < c.len;) {
                uint32_t j = i;
                while (j < c.len && c.ptr[j])
                    j++;
                if (i)
                    fputc(' ', f);
                h_bytes(f, c.ptr + i, j - i);
                i = j + 1;
            }
            fputs("</code>", f);
        }
        fputs("<br>", f);
    }
    const gmp_replay_summary *s = &t->sum;
    uint64_t span = s->last_ns > s->first_ns ? s->last_ns - s->first_ns : 0;
    fprintf(f, "%" PRIu64 " events over %s, %" PRIu64 " lost<br><span%s>", s->events,
            gmp_report_fmt_dur(span, b1, sizeof b1), s->lost_events,
            s->complete ? "" : " class=warn");
    h_bytes(f, s->completeness, strlen(s->completeness));
    fputs("</span></p>\n", f);

    size_t nleaks = 0;
    gmp_report_row *leaks =
        gmp_report_group(t, w->v, GMP_REPORT_LEAKS,
                         GMP_REPORT_BY_KIND | GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &nleaks);
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_report_device *d = &t->devices[i];
        if (gmp_report_wanted(w->v, d->id) && d->listed)
            h_device(w, d, leaks, leaks ? nleaks : 0);
    }
    free(leaks);

    int any = 0;
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_replay_device *d = &t->devices[i].d;
        if (!gmp_report_wanted(w->v, d->id))
            continue;
        for (unsigned k = 0; k < GMP_MEM_KIND_COUNT; k++) {
            const gmp_replay_kind_stats *ks = &d->kind[k];
            if (!ks->allocs)
                continue;
            if (!any++)
                fputs("<h3>Memory by kind</h3>\n<table><tr><th>device</th><th>kind</th><th>in "
                      "device peak</th><th>allocations</th><th>peak</th><th>at exit</th>"
                      "<th>largest</th></tr>\n",
                      f);
            char dv[16];
            dev_label(dv, sizeof dv, d->id);
            fprintf(f,
                    "<tr><td>%s</td><td>%s</td><td>%s</td><td class=n>%" PRIu64
                    "</td><td class=n>%s</td><td class=n>%s</td><td class=n>%s</td></tr>\n",
                    dv, gmp_mem_kind_name(k), gmp_mem_kind_is_device(k) ? "yes" : "no", ks->allocs,
                    B(ks->peak_bytes, b1), B(ks->live_bytes, b2), B(ks->max_alloc_bytes, b3));
        }
    }
    if (any)
        fputs("</table>\n", f);

    size_t shown = 0;
    for (size_t i = 0; i < t->nlargest; i++) {
        const gmp_report_alloc *a = &t->largest[i];
        if (!gmp_report_wanted(w->v, a->device) || (w->v->top && shown >= w->v->top))
            continue;
        if (!shown++)
            fputs("<h3>Largest allocations</h3>\n<table><tr><th>bytes</th><th>device</th>"
                  "<th>kind</th><th>at</th><th>freed at</th><th>API</th><th>range</th>"
                  "<th>stack</th></tr>\n",
                  f);
        char dv[16];
        dev_label(dv, sizeof dv, a->device);
        fprintf(f,
                "<tr><td class=n>%s</td><td>%s</td><td>%s</td><td class=n>%s</td>"
                "<td class=n>%s</td><td>",
                B(a->size, b1), dv, gmp_mem_kind_name(a->kind),
                gmp_report_fmt_time(t, a->time_ns, b2, sizeof b2),
                a->free_ns ? gmp_report_fmt_time(t, a->free_ns, b3, sizeof b3) : "never");
        h_idx(w, a->api, "");
        fputs("</td><td>", f);
        h_idx(w, a->range, "<i>(no range)</i>");
        fputs("</td><td>", f);
        if (a->stack != GMP_REPORT_NO_STACK)
            h_stack(w, a->stack);
        fputs("</td></tr>\n", f);
    }
    if (shown)
        fputs("</table>\n", f);

    size_t n = 0;
    gmp_report_row *a =
        gmp_report_group(t, w->v, GMP_REPORT_SITES,
                         GMP_REPORT_BY_API | GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &n);
    if (a && n) {
        fputs("<h3>Most frequent allocation sites", f);
        more(w, n);
        fputs("</h3>\n<table><tr><th>device</th><th>allocations</th><th>bytes</th><th>mean</th>"
              "<th>API</th><th>range</th><th>stack</th></tr>\n",
              f);
        for (size_t i = 0; i < n && (!w->v->top || i < w->v->top); i++) {
            char dv[16];
            dev_label(dv, sizeof dv, a[i].device);
            fprintf(f,
                    "<tr><td>%s</td><td class=n>%" PRIu64
                    "</td><td class=n>%s</td><td class=n>%s</td><td>",
                    dv, a[i].count, B(a[i].bytes, b1),
                    B(a[i].count ? a[i].bytes / a[i].count : 0, b2));
            h_idx(w, a[i].api, "");
            fputs("</td><td>", f);
            h_idx(w, a[i].range, "<i>(no range)</i>");
            fputs("</td><td>", f);
            if (a[i].stack != GMP_REPORT_NO_STACK)
                h_stack(w, a[i].stack);
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    free(a);

    gmp_report_range *r = gmp_report_sorted_ranges(t, w->v, &n);
    if (r && n) {
        fprintf(f,
                "<h3>Ranges <span class=note>(sorted by %s; device memory inside each range, "
                "nested ranges included)</span>",
                gmp_report_sort_name(w->v->sort));
        more(w, n);
        fputs("</h3>\n<table><tr><th>range</th><th>calls</th><th>total time</th><th>mean "
              "time</th><th>allocated</th><th>freed</th><th>left behind</th><th>peak "
              "inside</th><th>of it allocated inside</th><th>mean fragmentation</th></tr>\n",
              f);
        for (size_t i = 0; i < n && (!w->v->top || i < w->v->top); i++) {
            const gmp_report_range *x = &r[i];
            uint64_t inst = x->closed + x->open_at_end;
            char b[8][32];
            fputs("<tr><td>", f);
            h_idx(w, x->path, "<i>(no name)</i>");
            if (!x->thread_bound)
                fputs(" <span class=note>(start/end)</span>", f);
            fprintf(f,
                    "</td><td class=n>%" PRIu64 "</td><td class=n>%s</td><td class=n>%s</td>"
                    "<td class=n>%s (%" PRIu64 ")</td><td class=n>%s (%" PRIu64 ")</td>"
                    "<td class=n>%s</td><td class=n>%s</td><td class=n>%s</td><td "
                    "class=n>%s</td></tr>\n",
                    x->entered, gmp_report_fmt_dur(x->total_ns, b[0], 32),
                    gmp_report_fmt_dur(inst ? x->total_ns / inst : 0, b[1], 32),
                    B(x->alloc_bytes, b[2]), x->allocs, B(x->free_bytes, b[3]), x->frees,
                    B(x->left_bytes, b[4]), B(x->peak_bytes, b[5]), B(x->peak_inside_bytes, b[6]),
                    B((uint64_t)(x->frag_mean_bytes + 0.5), b[7]));
        }
        fputs("</table>\n", f);
    }
    free(r);

    shown = 0;
    for (size_t i = 0; i < t->nooms; i++) {
        const gmp_replay_oom *o = &t->ooms[i].o;
        if (!gmp_report_wanted(w->v, o->device))
            continue;
        if (!shown++)
            fputs("<h3 class=bad>Out of memory</h3>\n<table><tr><th>at</th><th>device</th>"
                  "<th>API</th><th>requested</th><th>allocated</th><th>reserved</th>"
                  "<th>range</th><th>stack</th></tr>\n",
                  f);
        fprintf(f, "<tr><td class=n>%s</td><td>%" PRId32 "</td><td>",
                gmp_report_fmt_time(t, o->time_ns, b1, sizeof b1), o->device);
        h_idx(w, o->api, "");
        fprintf(f, "</td><td class=n>%s</td><td class=n>%s</td><td class=n>%s</td><td>",
                B(o->requested, b2), B(o->live_bytes, b3), B(o->reserved_bytes, (char[32]){0}));
        h_idx(w, o->range, "<i>(no range)</i>");
        fputs("</td><td>", f);
        if (o->stack != GMP_REPORT_NO_STACK)
            h_stack(w, o->stack);
        fputs("</td></tr>\n", f);
    }
    if (shown)
        fputs("</table>\n", f);
    gmp_analysis_write_html(f, t, w->v);

    struct {
        uint64_t v;
        const char *what;
    } items[] = {
        {s->failed_allocs, "failed allocations"},
        {s->failed_frees, "failed frees"},
        {s->unknown_frees, "frees of an unknown address"},
        {s->double_frees, "double frees"},
        {s->replaced_allocs, "allocations at a live address (their free was lost)"},
        {s->duplicate_allocs, "duplicate allocation records"},
        {s->unmatched_pops, "range pops without a push"},
        {s->unmatched_ends, "range ends without a start"},
        {s->late_events, "events out of time order"},
    };
    any = 0;
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        if (!items[i].v)
            continue;
        if (!any++)
            fputs("<h3>Anomalies</h3>\n<ul>\n", f);
        fprintf(f, "<li>%s: %" PRIu64 "</li>\n", items[i].what, items[i].v);
    }
    if (any)
        fputs("</ul>\n", f);
    for (size_t i = 0; i < t->nnotices; i++) {
        if (!i)
            fputs("<h3>Notices from the profiler</h3>\n<ul>\n", f);
        const gmp_report_notice *no = &t->notices[i];
        fprintf(f, "<li>%s: ",
                no->severity >= GMP_NOTICE_ERROR     ? "error"
                : no->severity == GMP_NOTICE_WARNING ? "warning"
                                                     : "info");
        h_idx(w, no->message, "");
        fputs("</li>\n", f);
    }
    if (t->nnotices)
        fputs("</ul>\n", f);
    fputs("</section>\n", f);
}

gmp_err gmp_report_write_html(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
          "gpumemprof report",
          f);
    if (doc->ntraces == 1) {
        hw w = {f, doc->traces[0], v};
        fputs(": ", f);
        h_idx(&w, w.t->path, "");
    }
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>gpumemprof report</h1>\n", css);
    if (doc->ntraces > 1) {
        fprintf(f,
                "<h2>Across the %zu processes</h2>\n<table><tr><th>process</th><th>trace</th>"
                "<th>peak allocated</th><th>device</th><th>at</th><th>leaked</th>"
                "<th>OOMs</th><th>events</th></tr>\n",
                doc->ntraces);
        for (size_t i = 0; i < doc->ntraces; i++) {
            const gmp_report_trace *t = doc->traces[i];
            hw w = {f, t, v};
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
            char b1[32], b2[32], b3[32], dv[16];
            dev_label(dv, sizeof dv, pd);
            fputs("<tr><td>", f);
            h_idx(&w, t->label, "");
            fputs("</td><td>", f);
            h_idx(&w, t->path, "");
            fprintf(f,
                    "</td><td class=n>%s</td><td>%s</td><td class=n>%s</td><td class=n>%s</td>"
                    "<td class=n>%" PRIu64 "</td><td class=n>%" PRIu64 "</td></tr>\n",
                    B(peak, b1), dv, gmp_report_fmt_time(t, pt, b2, sizeof b2), B(leaked, b3), ooms,
                    t->sum.events);
        }
        fputs("</table>\n", f);
    }
    for (size_t i = 0; i < doc->ntraces; i++) {
        hw w = {f, doc->traces[i], v};
        h_trace(&w);
    }
    fputs("<p class=note>Written by gpumemprof. Times are seconds after the start of each trace; "
          "plots are downsampled into buckets that keep the minimum and maximum.</p>\n"
          "</body>\n</html>\n",
          f);
    return ferror(f) ? GMP_ERR_IO : GMP_OK;
}

/* For sections written outside this file (gmp_analysis_out.c). */
void gmp_report_html_str(FILE *f, const gmp_report_trace *t, uint32_t i, const char *none)
{
    hw w = {f, t, NULL};
    h_idx(&w, i, none);
}

void gmp_report_html_stack(FILE *f, const gmp_report_trace *t, uint32_t stack)
{
    hw w = {f, t, NULL};
    h_stack(&w, stack);
}
