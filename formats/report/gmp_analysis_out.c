/* gmp_analysis_out: the report's "Analyses" sections (growth over repetitions, temporary
 * allocations, allocator overhead, out-of-memory verdicts) in every report format, written from
 * gmp_report_trace.analysis with the report's view. The renderers call one function each; trace
 * strings and stacks go through the renderers' own writers (gmp_report_*_str/_stack), so escaping
 * is the same as in the rest of the report. See docs/report.md. */
#include <inttypes.h>
#include <string.h>

#include "gmp_analysis.h"
#include "gmp_escape.h"
#include "gmp_report.h"

#define B(v, buf) gmp_report_fmt_bytes((v), (buf), sizeof(buf))

static const char *verdict_name(gmp_analysis_oom_verdict v)
{
    switch (v) {
    case GMP_ANALYSIS_OOM_FRAGMENTED: return "fragmented";
    case GMP_ANALYSIS_OOM_CACHE: return "cache";
    default: return "exhausted";
    }
}

static const char *verdict_text(gmp_analysis_oom_verdict v)
{
    switch (v) {
    case GMP_ANALYSIS_OOM_FRAGMENTED:
        return "the process already held enough free memory (reserved - allocated), not in one "
               "piece: fragmentation";
    case GMP_ANALYSIS_OOM_CACHE:
        return "the cache (reserved - allocated) plus what the driver reported free was enough: "
               "releasing cached memory could have made room";
    default: return "not enough memory even counting the cache and the driver's free memory";
    }
}

static int64_t rate_int(double r)
{
    return r >= 0 ? (int64_t)(r + 0.5) : -(int64_t)(-r + 0.5);
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Rows of a device-sorted list shown under the view: device filter and --top. */
static int shown_ok(const gmp_report_view *v, int32_t device, size_t *shown)
{
    if (!gmp_report_wanted(v, device))
        return 0;
    if (v->top && *shown >= v->top)
        return 0;
    (*shown)++;
    return 1;
}

static size_t count_leaks(const gmp_analysis_result *R, const gmp_report_view *v)
{
    size_t n = 0;
    for (size_t i = 0; i < R->ngrowth; i++)
        n += R->growth[i].leak && gmp_report_wanted(v, R->growth[i].device);
    return n;
}

static int any_overhead(const gmp_analysis_result *R, const gmp_report_view *v)
{
    for (size_t i = 0; i < R->noverhead; i++) {
        const gmp_analysis_overhead *o = &R->overhead[i];
        if (gmp_report_wanted(v, o->device) &&
            (o->at_peak_allocated.overhead || o->at_peak_reserved.overhead || o->at_end.overhead))
            return 1;
    }
    return 0;
}

static void dev_name(char *b, size_t n, int32_t d)
{
    if (d < 0)
        snprintf(b, n, "host");
    else
        snprintf(b, n, "%" PRId32, d);
}

/* ---- text ---- */

void gmp_analysis_write_text(FILE *f, const struct gmp_report_trace *t,
                             const struct gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    if (!R)
        return;
    char b1[32], b2[32], b3[32], b4[32], dv[16];
    if (R->ranges_checked) {
        size_t nl = count_leaks(R, v);
        fputs("\nGrowth over repetitions:\n", f);
        if (!nl)
            fprintf(f,
                    "  no range grows over its repetitions (%" PRIu64
                    " repeating range%s checked)\n",
                    R->ranges_checked, R->ranges_checked == 1 ? "" : "s");
        size_t shown = 0;
        for (size_t i = 0; i < R->ngrowth; i++) {
            const gmp_analysis_growth *g = &R->growth[i];
            if (!g->leak || !shown_ok(v, g->device, &shown))
                continue;
            dev_name(dv, sizeof dv, g->device);
            fputs("  probable leak: ", f);
            gmp_report_text_str(f, t, g->range, "(no name)");
            fprintf(f, " on device %s: +%s per repetition over %" PRIu64 " repetitions (%s -> %s,",
                    dv, B((uint64_t)(g->rate_bytes > 0 ? g->rate_bytes + 0.5 : 0), b1),
                    g->repetitions, B(g->first_bytes, b2), B(g->last_bytes, b3));
            fprintf(f, " +%s; rising %" PRIu64 " of %" PRIu64 ")\n",
                    B((uint64_t)(g->total_bytes > 0 ? g->total_bytes : 0), b4), g->rises,
                    g->repetitions - 1);
            size_t ns = g->nsites;
            if (v->top && ns > v->top)
                ns = v->top;
            for (size_t k = 0; k < ns; k++) {
                const gmp_analysis_growth_site *s = &g->sites[k];
                fprintf(f, "    +%-11s %11s/rep  %-14s ", B(s->growth_bytes, b1),
                        B((uint64_t)(s->rate_bytes + 0.5), b2), gmp_mem_kind_name(s->site.kind));
                gmp_report_text_str(f, t, s->site.range, "(no range)");
                fputs("  ", f);
                gmp_report_text_stack(f, t, s->site.stack);
                fputc('\n', f);
            }
        }
    }
    if (R->temp_count) {
        fprintf(f,
                "\nTemporary allocations (freed within %s): %" PRIu64 " of %" PRIu64
                " allocations (%.1f%%), %s\n",
                gmp_report_fmt_dur(R->opts.temp_ns, b1, sizeof b1), R->temp_count, R->allocs,
                pct(R->temp_count, R->allocs), B(R->temp_bytes, b2));
        fprintf(f, "  %8s %12s %7s %11s %6s  %s\n", "count", "bytes", "share", "mean life",
                "device", "range");
        size_t shown = 0;
        for (size_t i = 0; i < R->ntemp; i++) {
            const gmp_analysis_temp *x = &R->temp[i];
            if (!shown_ok(v, x->device, &shown))
                continue;
            dev_name(dv, sizeof dv, x->device);
            fprintf(f, "  %8" PRIu64 " %12s %6.1f%% %11s %6s  ", x->temp_count,
                    B(x->temp_bytes, b1), pct(x->temp_count, x->allocs),
                    gmp_report_fmt_dur(x->temp_life_ns / x->temp_count, b2, sizeof b2), dv);
            gmp_report_text_str(f, t, x->range, "(no range)");
            fputc('\n', f);
        }
        fputs("  hottest sites:\n", f);
        shown = 0;
        for (size_t i = 0; i < R->ntemp_sites; i++) {
            const gmp_analysis_temp_site *x = &R->temp_sites[i];
            if (!shown_ok(v, x->site.device, &shown))
                continue;
            fprintf(f, "  %8" PRIu64 " %12s  ", x->temp_count, B(x->temp_bytes, b1));
            gmp_report_text_str(f, t, x->site.range, "(no range)");
            fputs("  ", f);
            gmp_report_text_stack(f, t, x->site.stack);
            fputc('\n', f);
        }
    }
    if (any_overhead(R, v)) {
        fputs("\nAllocator overhead (reserved - allocated):\n", f);
        for (size_t i = 0; i < R->noverhead; i++) {
            const gmp_analysis_overhead *o = &R->overhead[i];
            if (!gmp_report_wanted(v, o->device))
                continue;
            dev_name(dv, sizeof dv, o->device);
            const gmp_analysis_point *p[3] = {&o->at_peak_allocated, &o->at_peak_reserved,
                                              &o->at_end};
            const char *what[3] = {"at the allocated peak", "at the reserved peak", "at exit"};
            fprintf(f, "  device %s:\n", dv);
            for (int k = 0; k < 3; k++) {
                fprintf(f, "    %-22s %11s of %11s reserved (%5.1f%%)", what[k],
                        B(p[k]->overhead, b1), B(p[k]->reserved, b2),
                        pct(p[k]->overhead, p[k]->reserved));
                if (p[k]->pool_reserved)
                    fprintf(f, "; pools hold %s, %s of it allocated", B(p[k]->pool_reserved, b3),
                            B(p[k]->pool_allocated, b4));
                if (p[k]->vmm_physical || p[k]->va_reserved)
                    fprintf(f, "; VMM %s physical, %s mapped, %s address space",
                            B(p[k]->vmm_physical, b3), B(p[k]->vmm_mapped, b4),
                            B(p[k]->va_reserved, (char[32]){0}));
                fputc('\n', f);
            }
        }
    }
    size_t shown = 0;
    for (size_t i = 0; i < R->nooms; i++) {
        const gmp_analysis_oom *o = &R->ooms[i];
        if (!gmp_report_wanted(v, o->device))
            continue;
        if (!shown++)
            fputs("\nOut of memory, why:\n", f);
        fprintf(f,
                "  %s  device %" PRId32 ": %s requested, %s held free (reserved - allocated), %s",
                gmp_report_fmt_time(t, o->time_ns, b1, sizeof b1), o->device, B(o->requested, b2),
                B(o->cached, b3), o->free_bytes ? B(o->free_bytes, b4) : "unknown");
        fprintf(f, " free on the device: %s\n", verdict_text(o->verdict));
    }
}

/* ---- Markdown ---- */

void gmp_analysis_write_md(FILE *f, const struct gmp_report_trace *t,
                           const struct gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    if (!R)
        return;
    char b1[32], b2[32], b3[32], b4[32], dv[16];
    if (R->ranges_checked) {
        size_t nl = count_leaks(R, v);
        fputs("\n### Growth over repetitions\n\n", f);
        if (!nl)
            fprintf(
                f, "No range grows over its repetitions (%" PRIu64 " repeating range%s checked).\n",
                R->ranges_checked, R->ranges_checked == 1 ? "" : "s");
        size_t shown = 0;
        for (size_t i = 0; i < R->ngrowth; i++) {
            const gmp_analysis_growth *g = &R->growth[i];
            if (!g->leak || !shown_ok(v, g->device, &shown))
                continue;
            dev_name(dv, sizeof dv, g->device);
            fputs("**Probable leak:** ", f);
            gmp_report_md_str(f, t, g->range, "*(no name)*");
            fprintf(f,
                    " on device %s: **+%s per repetition** over %" PRIu64
                    " repetitions (%s → %s, +%s; rising %" PRIu64 " of %" PRIu64 ").\n\n",
                    dv, B((uint64_t)(g->rate_bytes > 0 ? g->rate_bytes + 0.5 : 0), b1),
                    g->repetitions, B(g->first_bytes, b2), B(g->last_bytes, b3),
                    B((uint64_t)(g->total_bytes > 0 ? g->total_bytes : 0), b4), g->rises,
                    g->repetitions - 1);
            if (!g->nsites)
                continue;
            fputs("| grew | per repetition | kind | range | stack |\n|---:|---:|---|---|---|\n", f);
            size_t ns = g->nsites;
            if (v->top && ns > v->top)
                ns = v->top;
            for (size_t k = 0; k < ns; k++) {
                const gmp_analysis_growth_site *s = &g->sites[k];
                fprintf(f, "| %s | %s | %s | ", B(s->growth_bytes, b1),
                        B((uint64_t)(s->rate_bytes + 0.5), b2), gmp_mem_kind_name(s->site.kind));
                gmp_report_md_str(f, t, s->site.range, "*(no range)*");
                fputs(" | ", f);
                gmp_report_md_stack(f, t, s->site.stack);
                fputs(" |\n", f);
            }
            fputc('\n', f);
        }
    }
    if (R->temp_count) {
        fprintf(f,
                "\n### Temporary allocations\n\nFreed within %s: %" PRIu64 " of %" PRIu64
                " allocations (%.1f%%), %s.\n\n",
                gmp_report_fmt_dur(R->opts.temp_ns, b1, sizeof b1), R->temp_count, R->allocs,
                pct(R->temp_count, R->allocs), B(R->temp_bytes, b2));
        fputs("| range | device | temporary | bytes | share of its allocations | mean lifetime "
              "|\n|---|---|---:|---:|---:|---:|\n",
              f);
        size_t shown = 0;
        for (size_t i = 0; i < R->ntemp; i++) {
            const gmp_analysis_temp *x = &R->temp[i];
            if (!shown_ok(v, x->device, &shown))
                continue;
            dev_name(dv, sizeof dv, x->device);
            fputs("| ", f);
            gmp_report_md_str(f, t, x->range, "*(no range)*");
            fprintf(f, " | %s | %" PRIu64 " | %s | %.1f%% | %s |\n", dv, x->temp_count,
                    B(x->temp_bytes, b1), pct(x->temp_count, x->allocs),
                    gmp_report_fmt_dur(x->temp_life_ns / x->temp_count, b2, sizeof b2));
        }
        fputs("\nHottest sites:\n\n| temporary | bytes | range | stack |\n|---:|---:|---|---|\n",
              f);
        shown = 0;
        for (size_t i = 0; i < R->ntemp_sites; i++) {
            const gmp_analysis_temp_site *x = &R->temp_sites[i];
            if (!shown_ok(v, x->site.device, &shown))
                continue;
            fprintf(f, "| %" PRIu64 " | %s | ", x->temp_count, B(x->temp_bytes, b1));
            gmp_report_md_str(f, t, x->site.range, "*(no range)*");
            fputs(" | ", f);
            gmp_report_md_stack(f, t, x->site.stack);
            fputs(" |\n", f);
        }
    }
    if (any_overhead(R, v)) {
        fputs("\n### Allocator overhead\n\nReserved − allocated.\n\n| device | when | overhead | "
              "reserved | share | pools reserved | pools allocated | VMM physical | VMM "
              "mapped |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
              f);
        for (size_t i = 0; i < R->noverhead; i++) {
            const gmp_analysis_overhead *o = &R->overhead[i];
            if (!gmp_report_wanted(v, o->device))
                continue;
            dev_name(dv, sizeof dv, o->device);
            const gmp_analysis_point *p[3] = {&o->at_peak_allocated, &o->at_peak_reserved,
                                              &o->at_end};
            const char *what[3] = {"allocated peak", "reserved peak", "exit"};
            for (int k = 0; k < 3; k++)
                fprintf(f, "| %s | %s | %s | %s | %.1f%% | %s | %s | %s | %s |\n", dv, what[k],
                        B(p[k]->overhead, b1), B(p[k]->reserved, b2),
                        pct(p[k]->overhead, p[k]->reserved), B(p[k]->pool_reserved, b3),
                        B(p[k]->pool_allocated, b4), B(p[k]->vmm_physical, (char[32]){0}),
                        B(p[k]->vmm_mapped, (char[32]){0}));
        }
    }
    size_t shown = 0;
    for (size_t i = 0; i < R->nooms; i++) {
        const gmp_analysis_oom *o = &R->ooms[i];
        if (!gmp_report_wanted(v, o->device))
            continue;
        if (!shown++)
            fputs("\n### Out of memory, why\n\n| at | device | requested | held free | "
                  "driver free | verdict |\n|---|---|---:|---:|---:|---|\n",
                  f);
        fprintf(f, "| %s | %" PRId32 " | %s | %s | %s | %s: %s |\n",
                gmp_report_fmt_time(t, o->time_ns, b1, sizeof b1), o->device, B(o->requested, b2),
                B(o->cached, b3), o->free_bytes ? B(o->free_bytes, b4) : "unknown",
                verdict_name(o->verdict), verdict_text(o->verdict));
    }
}

/* ---- HTML ---- */

static void h_spark(FILE *f, const gmp_analysis_growth *g)
{
    if (g->nseries < 2 || g->max_bytes <= g->min_bytes)
        return;
    const double W = 160.0, H = 28.0;
    fprintf(f,
            "<svg width=%d height=%d viewBox=\"0 0 %d %d\" role=img><path fill=none "
            "stroke=\"#c00\" stroke-width=1.5 d=\"",
            (int)W, (int)H, (int)W, (int)H);
    double span = (double)(g->max_bytes - g->min_bytes);
    for (size_t i = 0; i < g->nseries; i++) {
        double x = 2.0 + (W - 4.0) * (double)i / (double)(g->nseries - 1);
        double y = H - 2.0 - (H - 4.0) * (double)(g->series[i] - g->min_bytes) / span;
        fprintf(f, "%s%.1f %.1f", i ? " L" : "M", x, y);
    }
    fputs("\"/></svg>", f);
}

void gmp_analysis_write_html(FILE *f, const struct gmp_report_trace *t,
                             const struct gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    if (!R)
        return;
    char b1[32], b2[32], b3[32], b4[32], dv[16];
    if (R->ranges_checked) {
        size_t nl = count_leaks(R, v);
        fputs("<h3>Growth over repetitions <span class=note>(device memory allocated at each "
              "exit of a repeating range)</span></h3>\n",
              f);
        if (!nl)
            fprintf(f,
                    "<p>No range grows over its repetitions (%" PRIu64 " repeating range%s "
                    "checked).</p>\n",
                    R->ranges_checked, R->ranges_checked == 1 ? "" : "s");
        size_t shown = 0;
        for (size_t i = 0; i < R->ngrowth; i++) {
            const gmp_analysis_growth *g = &R->growth[i];
            if (!g->leak || !shown_ok(v, g->device, &shown))
                continue;
            dev_name(dv, sizeof dv, g->device);
            fputs("<h4 class=bad>Probable leak: ", f);
            gmp_report_html_str(f, t, g->range, "<i>(no name)</i>");
            fprintf(f,
                    " on device %s: +%s per repetition</h4>\n<p>%" PRIu64
                    " repetitions, %s → %s (+%s), rising %" PRIu64 " of %" PRIu64 " times. ",
                    dv, B((uint64_t)(g->rate_bytes > 0 ? g->rate_bytes + 0.5 : 0), b1),
                    g->repetitions, B(g->first_bytes, b2), B(g->last_bytes, b3),
                    B((uint64_t)(g->total_bytes > 0 ? g->total_bytes : 0), b4), g->rises,
                    g->repetitions - 1);
            h_spark(f, g);
            fputs("</p>\n", f);
            if (!g->nsites)
                continue;
            fputs("<table><tr><th>grew</th><th>per repetition</th><th>kind</th><th>range</th>"
                  "<th>stack</th></tr>\n",
                  f);
            size_t ns = g->nsites;
            if (v->top && ns > v->top)
                ns = v->top;
            for (size_t k = 0; k < ns; k++) {
                const gmp_analysis_growth_site *s = &g->sites[k];
                fprintf(f, "<tr><td class=n>%s</td><td class=n>%s</td><td>%s</td><td>",
                        B(s->growth_bytes, b1), B((uint64_t)(s->rate_bytes + 0.5), b2),
                        gmp_mem_kind_name(s->site.kind));
                gmp_report_html_str(f, t, s->site.range, "<i>(no range)</i>");
                fputs("</td><td>", f);
                gmp_report_html_stack(f, t, s->site.stack);
                fputs("</td></tr>\n", f);
            }
            fputs("</table>\n", f);
        }
    }
    if (R->temp_count) {
        fprintf(f,
                "<h3>Temporary allocations <span class=note>(freed within %s)</span></h3>\n"
                "<p>%" PRIu64 " of %" PRIu64 " allocations (%.1f%%), %s.</p>\n",
                gmp_report_fmt_dur(R->opts.temp_ns, b1, sizeof b1), R->temp_count, R->allocs,
                pct(R->temp_count, R->allocs), B(R->temp_bytes, b2));
        fputs("<table><tr><th>range</th><th>device</th><th>temporary</th><th>bytes</th>"
              "<th>share of its allocations</th><th>mean lifetime</th></tr>\n",
              f);
        size_t shown = 0;
        for (size_t i = 0; i < R->ntemp; i++) {
            const gmp_analysis_temp *x = &R->temp[i];
            if (!shown_ok(v, x->device, &shown))
                continue;
            dev_name(dv, sizeof dv, x->device);
            fputs("<tr><td>", f);
            gmp_report_html_str(f, t, x->range, "<i>(no range)</i>");
            fprintf(f,
                    "</td><td>%s</td><td class=n>%" PRIu64 "</td><td class=n>%s</td><td "
                    "class=n>%.1f%%</td><td class=n>%s</td></tr>\n",
                    dv, x->temp_count, B(x->temp_bytes, b1), pct(x->temp_count, x->allocs),
                    gmp_report_fmt_dur(x->temp_life_ns / x->temp_count, b2, sizeof b2));
        }
        fputs("</table>\n<h4>Hottest sites</h4>\n<table><tr><th>temporary</th><th>bytes</th>"
              "<th>range</th><th>stack</th></tr>\n",
              f);
        shown = 0;
        for (size_t i = 0; i < R->ntemp_sites; i++) {
            const gmp_analysis_temp_site *x = &R->temp_sites[i];
            if (!shown_ok(v, x->site.device, &shown))
                continue;
            fprintf(f, "<tr><td class=n>%" PRIu64 "</td><td class=n>%s</td><td>", x->temp_count,
                    B(x->temp_bytes, b1));
            gmp_report_html_str(f, t, x->site.range, "<i>(no range)</i>");
            fputs("</td><td>", f);
            gmp_report_html_stack(f, t, x->site.stack);
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    if (any_overhead(R, v)) {
        fputs("<h3>Allocator overhead <span class=note>(reserved − allocated)</span></h3>\n"
              "<table><tr><th>device</th><th>when</th><th>overhead</th><th>reserved</th>"
              "<th>share</th><th>pools reserved</th><th>pools allocated</th><th>VMM "
              "physical</th><th>VMM mapped</th></tr>\n",
              f);
        for (size_t i = 0; i < R->noverhead; i++) {
            const gmp_analysis_overhead *o = &R->overhead[i];
            if (!gmp_report_wanted(v, o->device))
                continue;
            dev_name(dv, sizeof dv, o->device);
            const gmp_analysis_point *p[3] = {&o->at_peak_allocated, &o->at_peak_reserved,
                                              &o->at_end};
            const char *what[3] = {"allocated peak", "reserved peak", "exit"};
            for (int k = 0; k < 3; k++)
                fprintf(f,
                        "<tr><td>%s</td><td>%s</td><td class=n>%s</td><td class=n>%s</td><td "
                        "class=n>%.1f%%</td><td class=n>%s</td><td class=n>%s</td><td "
                        "class=n>%s</td><td class=n>%s</td></tr>\n",
                        dv, what[k], B(p[k]->overhead, b1), B(p[k]->reserved, b2),
                        pct(p[k]->overhead, p[k]->reserved), B(p[k]->pool_reserved, b3),
                        B(p[k]->pool_allocated, b4), B(p[k]->vmm_physical, (char[32]){0}),
                        B(p[k]->vmm_mapped, (char[32]){0}));
        }
        fputs("</table>\n", f);
    }
    size_t shown = 0;
    for (size_t i = 0; i < R->nooms; i++) {
        const gmp_analysis_oom *o = &R->ooms[i];
        if (!gmp_report_wanted(v, o->device))
            continue;
        if (!shown++)
            fputs("<h3>Out of memory, why</h3>\n<table><tr><th>at</th><th>device</th>"
                  "<th>requested</th><th>held free</th><th>driver free</th><th>verdict</th>"
                  "</tr>\n",
                  f);
        fprintf(f,
                "<tr><td class=n>%s</td><td>%" PRId32 "</td><td class=n>%s</td><td "
                "class=n>%s</td><td class=n>%s</td><td>%s: %s</td></tr>\n",
                gmp_report_fmt_time(t, o->time_ns, b1, sizeof b1), o->device, B(o->requested, b2),
                B(o->cached, b3), o->free_bytes ? B(o->free_bytes, b4) : "unknown",
                verdict_name(o->verdict), verdict_text(o->verdict));
    }
    if (shown)
        fputs("</table>\n", f);
}

/* ---- JSON ---- */

static void j_idx(FILE *f, const gmp_report_trace *t, uint32_t i)
{
    gmp_str s = gmp_report_str(t, i);
    gmp_json_fputs(f, s.ptr ? s.ptr : "", s.ptr ? s.len : 0);
}

static void j_site(FILE *f, const gmp_report_trace *t, const gmp_analysis_site *s)
{
    fprintf(f, "\"device\":%" PRId32 ",\"kind\":\"%s\",\"api\":", s->device,
            gmp_mem_kind_name(s->kind));
    j_idx(f, t, s->api);
    fputs(",\"range\":", f);
    j_idx(f, t, s->range);
}

static void j_point(FILE *f, const char *name, const gmp_analysis_point *p)
{
    fprintf(f,
            "\"%s\":{\"time_ns\":%" PRIu64 ",\"allocated_bytes\":%" PRIu64
            ",\"reserved_bytes\":%" PRIu64 ",\"overhead_bytes\":%" PRIu64
            ",\"pool_reserved_bytes\":%" PRIu64 ",\"pool_allocated_bytes\":%" PRIu64
            ",\"vmm_physical_bytes\":%" PRIu64 ",\"vmm_mapped_bytes\":%" PRIu64
            ",\"va_reserved_bytes\":%" PRIu64 "}",
            name, p->time_ns, p->allocated, p->reserved, p->overhead, p->pool_reserved,
            p->pool_allocated, p->vmm_physical, p->vmm_mapped, p->va_reserved);
}

void gmp_analysis_write_json(FILE *f, const struct gmp_report_trace *t,
                             const struct gmp_report_view *v)
{
    const gmp_analysis_result *R = t->analysis;
    if (!R)
        return;
    fprintf(f,
            "  \"analysis\": {\n   \"options\": {\"temporary_ns\":%" PRIu64
            ",\"min_repetitions\":%" PRIu32 ",\"rise_fraction\":%.3g},\n",
            R->opts.temp_ns, R->opts.min_reps, R->opts.rise_frac);
    fprintf(f, "   \"ranges_checked\": %" PRIu64 ",\n   \"growth\": [", R->ranges_checked);
    size_t shown = 0;
    int first = 1;
    for (size_t i = 0; i < R->ngrowth; i++) {
        const gmp_analysis_growth *g = &R->growth[i];
        if (!shown_ok(v, g->device, &shown))
            continue;
        fputs(first ? "\n    {" : ",\n    {", f);
        first = 0;
        fputs("\"range\":", f);
        j_idx(f, t, g->range);
        fprintf(f,
                ",\"thread_bound\":%s,\"device\":%" PRId32 ",\"repetitions\":%" PRIu64
                ",\"probable_leak\":%s,\"rate_bytes_per_repetition\":%" PRId64
                ",\"total_growth_bytes\":%" PRId64 ",\"first_bytes\":%" PRIu64
                ",\"last_bytes\":%" PRIu64 ",\"min_bytes\":%" PRIu64 ",\"max_bytes\":%" PRIu64
                ",\"middle_bytes\":%" PRIu64 ",\"rises\":%" PRIu64 ",\"falls\":%" PRIu64
                ",\"series_stride\":%" PRIu64 ",\"series\":[",
                g->thread_bound ? "true" : "false", g->device, g->repetitions,
                g->leak ? "true" : "false", rate_int(g->rate_bytes), g->total_bytes, g->first_bytes,
                g->last_bytes, g->min_bytes, g->max_bytes, g->mid_bytes, g->rises, g->falls,
                g->series_stride);
        for (size_t k = 0; k < g->nseries; k++)
            fprintf(f, "%s%" PRIu64, k ? "," : "", g->series[k]);
        fprintf(f, "],\"sites_from_repetition\":%" PRIu64 ",\"sites\":[", g->base_rep);
        size_t ns = g->nsites;
        if (v->top && ns > v->top)
            ns = v->top;
        for (size_t k = 0; k < ns; k++) {
            const gmp_analysis_growth_site *s = &g->sites[k];
            fputs(k ? ",{" : "{", f);
            j_site(f, t, &s->site);
            fprintf(f,
                    ",\"first_bytes\":%" PRIu64 ",\"last_bytes\":%" PRIu64
                    ",\"growth_bytes\":%" PRIu64 ",\"rate_bytes_per_repetition\":%" PRId64,
                    s->first_bytes, s->last_bytes, s->growth_bytes, rate_int(s->rate_bytes));
            gmp_report_json_stack(f, t, s->site.stack);
            fputc('}', f);
        }
        fputs("]}", f);
    }
    fputs(first ? "],\n" : "\n   ],\n", f);

    fprintf(f,
            "   \"temporary_totals\": {\"threshold_ns\":%" PRIu64 ",\"allocations\":%" PRIu64
            ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "},\n   \"temporary\": [",
            R->opts.temp_ns, R->allocs, R->temp_count, R->temp_bytes);
    shown = 0;
    first = 1;
    for (size_t i = 0; i < R->ntemp; i++) {
        const gmp_analysis_temp *x = &R->temp[i];
        if (!shown_ok(v, x->device, &shown))
            continue;
        fputs(first ? "\n    {" : ",\n    {", f);
        first = 0;
        fputs("\"range\":", f);
        j_idx(f, t, x->range);
        fprintf(f,
                ",\"device\":%" PRId32 ",\"allocations\":%" PRIu64 ",\"allocated_bytes\":%" PRIu64
                ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"mean_lifetime_ns\":%" PRIu64 "}",
                x->device, x->allocs, x->alloc_bytes, x->temp_count, x->temp_bytes,
                x->temp_life_ns / x->temp_count);
    }
    fputs(first ? "],\n" : "\n   ],\n", f);
    fputs("   \"temporary_sites\": [", f);
    shown = 0;
    first = 1;
    for (size_t i = 0; i < R->ntemp_sites; i++) {
        const gmp_analysis_temp_site *x = &R->temp_sites[i];
        if (!shown_ok(v, x->site.device, &shown))
            continue;
        fputs(first ? "\n    {" : ",\n    {", f);
        first = 0;
        j_site(f, t, &x->site);
        fprintf(f,
                ",\"allocations\":%" PRIu64 ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64
                ",\"mean_lifetime_ns\":%" PRIu64,
                x->allocs, x->temp_count, x->temp_bytes, x->temp_life_ns / x->temp_count);
        gmp_report_json_stack(f, t, x->site.stack);
        fputc('}', f);
    }
    fputs(first ? "],\n" : "\n   ],\n", f);

    fputs("   \"overhead\": [", f);
    first = 1;
    for (size_t i = 0; i < R->noverhead; i++) {
        const gmp_analysis_overhead *o = &R->overhead[i];
        if (!gmp_report_wanted(v, o->device))
            continue;
        fputs(first ? "\n    {" : ",\n    {", f);
        first = 0;
        fprintf(f, "\"device\":%" PRId32 ",", o->device);
        j_point(f, "at_peak_allocated", &o->at_peak_allocated);
        fputc(',', f);
        j_point(f, "at_peak_reserved", &o->at_peak_reserved);
        fputc(',', f);
        j_point(f, "at_end", &o->at_end);
        fputc('}', f);
    }
    fputs(first ? "],\n" : "\n   ],\n", f);

    fputs("   \"ooms\": [", f);
    first = 1;
    for (size_t i = 0; i < R->nooms; i++) {
        const gmp_analysis_oom *o = &R->ooms[i];
        if (!gmp_report_wanted(v, o->device))
            continue;
        fputs(first ? "\n    {" : ",\n    {", f);
        first = 0;
        fprintf(f,
                "\"device\":%" PRId32 ",\"time_ns\":%" PRIu64 ",\"requested_bytes\":%" PRIu64
                ",\"allocated_bytes\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64
                ",\"cached_bytes\":%" PRIu64 ",\"free_bytes\":%" PRIu64 ",\"verdict\":\"%s\"}",
                o->device, o->time_ns, o->requested, o->allocated, o->reserved, o->cached,
                o->free_bytes, verdict_name(o->verdict));
    }
    fputs(first ? "]\n" : "\n   ]\n", f);
    fputs("  },\n", f);
}
