/* gmp_report_md: the report as Markdown (GitHub-flavoured tables), for pull requests, issues and
 * wikis. Trace strings are escaped so that they cannot break a table or inject HTML: & < > as
 * entities, Markdown punctuation and | backslash-escaped, control characters and invalid UTF-8 as
 * U+FFFD. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_escape.h"
#include "gmp_report.h"

typedef struct mw {
    FILE *f;
    const gmp_report_trace *t;
    const gmp_report_view *v;
} mw;

static void md_bytes(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = gmp_utf8_seq_len(p + i, n - i);
        if (l == 0 || (l == 1 && (p[i] < 0x20 || p[i] == 0x7f))) {
            fputs("\xef\xbf\xbd", f); /* U+FFFD */
            i++;
            continue;
        }
        if (l == 1) {
            switch (p[i]) {
            case '&': fputs("&amp;", f); break;
            case '<': fputs("&lt;", f); break;
            case '>': fputs("&gt;", f); break;
            case '"': fputs("&quot;", f); break;
            case '\\':
            case '`':
            case '*':
            case '_':
            case '[':
            case ']':
            case '|':
            case '#':
            case '~':
                fputc('\\', f);
                fputc(p[i], f);
                break;
            default: fputc(p[i], f);
            }
        } else {
            fwrite(p + i, 1, l, f);
        }
        i += l;
    }
}

static void dev_label(char *buf, size_t n, int32_t id)
{
    if (id < 0)
        snprintf(buf, n, "host");
    else
        snprintf(buf, n, "%" PRId32, id);
}

static void m_idx(const mw *w, uint32_t i, const char *none)
{
    gmp_str s = gmp_report_str(w->t, i);
    if (!s.len)
        fputs(none, w->f);
    else
        md_bytes(w->f, s.ptr, s.len);
}

static void m_stack(const mw *w, uint32_t stack)
{
    if (stack >= w->t->nstacks) {
        fputs("*(no stack)*", w->f);
        return;
    }
    const gmp_report_stack *s = &w->t->stacks[stack];
    for (size_t i = 0; i < s->nframes && i < 6; i++) {
        char name[1024];
        size_t n = gmp_report_frame_text(w->t, &s->frames[i], name, sizeof name);
        if (i)
            fputs(" &lt; ", w->f);
        md_bytes(w->f, name, n);
    }
    if (s->nframes > 6)
        fputs(" &lt; …", w->f);
}

static const char *B(uint64_t v, char *b)
{
    return gmp_report_fmt_bytes(v, b, 32);
}

static void m_more(const mw *w, size_t total)
{
    if (w->v->top && total > w->v->top)
        fprintf(w->f, " (top %zu of %zu)", w->v->top, total);
}

static void m_device(const mw *w, const gmp_report_device *o, const gmp_report_row *leaks,
                     size_t nleaks)
{
    FILE *f = w->f;
    const gmp_replay_device *d = &o->d;
    char b1[32], b2[32];
    if (o->id < 0) {
        fputs("\n### Host\n\n", f);
    } else {
        fprintf(f, "\n### Device %" PRId32, o->id);
        gmp_str nm = gmp_report_str(w->t, o->name);
        if (nm.len) {
            fputs(": ", f);
            md_bytes(f, nm.ptr, nm.len);
        }
        if (o->total_bytes)
            fprintf(f, " (%s)", B(o->total_bytes, b1));
        fputs("\n\n", f);
    }
    fputs("| | |\n|---|---|\n", f);
    fprintf(f, "| peak allocated | **%s** at %s (%" PRIu64 " bytes) |\n", B(d->peak_allocated, b1),
            gmp_report_fmt_time(w->t, d->peak_time_ns, b2, sizeof b2), d->peak_allocated);
    fprintf(f, "| peak reserved | %s at %s (%" PRIu64 " bytes) |\n", B(d->peak_reserved, b1),
            gmp_report_fmt_time(w->t, d->peak_reserved_time_ns, b2, sizeof b2), d->peak_reserved);
    fprintf(f, "| allocations | %" PRIu64 " (%" PRIu64 " freed, %" PRIu64 " failed), %s in all |\n",
            d->allocs, d->frees, d->failed_allocs, B(d->alloc_bytes, b1));
    fprintf(f, "| leaked at exit | %s in %" PRIu64 " allocation%s |\n", B(o->leaked_bytes, b1),
            o->leaked_count, o->leaked_count == 1 ? "" : "s");
    if (d->ooms)
        fprintf(f, "| out of memory | %" PRIu64 " time%s |\n", d->ooms, d->ooms == 1 ? "" : "s");
    if (d->samples)
        fprintf(f, "| not explained by allocations | max %s at %s, mean %s, last %s |\n",
                B(d->max_unexplained, b1),
                gmp_report_fmt_time(w->t, d->max_unexplained_time_ns, b2, sizeof b2),
                B((uint64_t)(o->unexplained_mean + 0.5), (char[32]){0}),
                B(o->unexplained_last, (char[32]){0}));
    if (o->frag_max)
        fprintf(f, "| fragmentation (reserved − allocated) | max %s at %s, mean %s |\n",
                B(o->frag_max, b1), gmp_report_fmt_time(w->t, o->frag_max_time_ns, b2, sizeof b2),
                B((uint64_t)(o->frag_mean + 0.5), (char[32]){0}));

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
            fprintf(f, "\n**Live at the peak, by %s**", titles[bi]);
            m_more(w, total);
            fprintf(f, "\n\n| bytes | share | count | %s |\n|---:|---:|---:|---|\n", titles[bi]);
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
            fprintf(f, "| %s | %.1f%% | %" PRIu64 " | ", B(g->bytes, b1), pct, g->count);
            if (bit == GMP_REPORT_BY_RANGE)
                m_idx(w, g->range, "*(no range)*");
            else if (bit == GMP_REPORT_BY_STACK)
                m_stack(w, g->stack);
            else if (bit == GMP_REPORT_BY_KIND)
                fputs(gmp_mem_kind_name(g->kind), f);
            else
                m_idx(w, g->api, "*(unknown)*");
            fputs(" |\n", f);
        }
        free(a);
    }
    size_t total = 0, shown = 0;
    for (size_t i = 0; i < nleaks; i++)
        total += leaks[i].device == o->id;
    if (total) {
        fputs("\n**Live at exit (leaks)**", f);
        m_more(w, total);
        fputs("\n\n| bytes | count | kind | range | stack |\n|---:|---:|---|---|---|\n", f);
        for (size_t i = 0; i < nleaks; i++) {
            const gmp_report_row *g = &leaks[i];
            if (g->device != o->id || (w->v->top && shown >= w->v->top))
                continue;
            shown++;
            fprintf(f, "| %s | %" PRIu64 " | %s | ", B(g->bytes, b1), g->count,
                    gmp_mem_kind_name(g->kind));
            m_idx(w, g->range, "*(no range)*");
            fputs(" | ", f);
            if (g->stack != GMP_REPORT_NO_STACK)
                m_stack(w, g->stack);
            fputs(" |\n", f);
        }
    }
}

static void m_trace(const mw *w)
{
    FILE *f = w->f;
    const gmp_report_trace *t = w->t;
    char b1[32], b2[32], b3[32];
    fputs("## ", f);
    m_idx(w, t->label, "");
    if (gmp_report_str(t, t->label).len)
        fputs(": ", f);
    fputc('`', f);
    gmp_str p = gmp_report_str(t, t->path);
    for (uint32_t i = 0; i < p.len; i++) /* inside a code span: no backticks, no controls */
        fputc(p.ptr[i] == '`' || (unsigned char)p.ptr[i] < 0x20 ? '?' : p.ptr[i], f);
    fputs("`\n\n", f);
    if (t->has_header) {
        fprintf(f, "Process %" PRIu32 " on ", t->pid);
        m_idx(w, t->hostname, "?");
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
                md_bytes(f, c.ptr + i, j - i);
                i = j + 1;
            }
        }
        fputs("  \n", f);
    }
    const gmp_replay_summary *s = &t->sum;
    uint64_t span = s->last_ns > s->first_ns ? s->last_ns - s->first_ns : 0;
    fprintf(f, "%" PRIu64 " events over %s, %" PRIu64 " lost  \n", s->events,
            gmp_report_fmt_dur(span, b1, sizeof b1), s->lost_events);
    fputs(s->complete ? "" : "**Warning:** ", f);
    md_bytes(f, s->completeness, strlen(s->completeness));
    fputs("\n", f);

    size_t nleaks = 0;
    gmp_report_row *leaks =
        gmp_report_group(t, w->v, GMP_REPORT_LEAKS,
                         GMP_REPORT_BY_KIND | GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &nleaks);
    for (size_t i = 0; i < t->ndevices; i++) {
        const gmp_report_device *d = &t->devices[i];
        if (gmp_report_wanted(w->v, d->id) && d->listed)
            m_device(w, d, leaks, leaks ? nleaks : 0);
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
                fputs("\n### Memory by kind\n\n| device | kind | in device peak | allocations "
                      "| peak | at exit | largest |\n|---|---|---|---:|---:|---:|---:|\n",
                      f);
            char dv[16];
            dev_label(dv, sizeof dv, d->id);
            fprintf(f, "| %s | %s | %s | %" PRIu64 " | %s | %s | %s |\n", dv, gmp_mem_kind_name(k),
                    gmp_mem_kind_is_device(k) ? "yes" : "no", ks->allocs, B(ks->peak_bytes, b1),
                    B(ks->live_bytes, b2), B(ks->max_alloc_bytes, b3));
        }
    }

    size_t shown = 0;
    for (size_t i = 0; i < t->nlargest; i++) {
        const gmp_report_alloc *a = &t->largest[i];
        if (!gmp_report_wanted(w->v, a->device) || (w->v->top && shown >= w->v->top))
            continue;
        if (!shown++)
            fputs("\n### Largest allocations\n\n| bytes | device | kind | at | freed at | API | "
                  "range |\n|---:|---|---|---|---|---|---|\n",
                  f);
        char dv[16];
        dev_label(dv, sizeof dv, a->device);
        fprintf(f, "| %s | %s | %s | %s | %s | ", B(a->size, b1), dv, gmp_mem_kind_name(a->kind),
                gmp_report_fmt_time(t, a->time_ns, b2, sizeof b2),
                a->free_ns ? gmp_report_fmt_time(t, a->free_ns, b3, sizeof b3) : "never");
        m_idx(w, a->api, "");
        fputs(" | ", f);
        m_idx(w, a->range, "*(no range)*");
        fputs(" |\n", f);
    }

    size_t n = 0;
    gmp_report_row *a =
        gmp_report_group(t, w->v, GMP_REPORT_SITES,
                         GMP_REPORT_BY_API | GMP_REPORT_BY_RANGE | GMP_REPORT_BY_STACK, &n);
    if (a && n) {
        fputs("\n### Most frequent allocation sites", f);
        m_more(w, n);
        fputs("\n\n| device | allocations | bytes | mean | API | range | stack |\n"
              "|---|---:|---:|---:|---|---|---|\n",
              f);
        for (size_t i = 0; i < n && (!w->v->top || i < w->v->top); i++) {
            char dv[16];
            dev_label(dv, sizeof dv, a[i].device);
            fprintf(f, "| %s | %" PRIu64 " | %s | %s | ", dv, a[i].count, B(a[i].bytes, b1),
                    B(a[i].count ? a[i].bytes / a[i].count : 0, b2));
            m_idx(w, a[i].api, "");
            fputs(" | ", f);
            m_idx(w, a[i].range, "*(no range)*");
            fputs(" | ", f);
            if (a[i].stack != GMP_REPORT_NO_STACK)
                m_stack(w, a[i].stack);
            fputs(" |\n", f);
        }
    }
    free(a);

    gmp_report_range *r = gmp_report_sorted_ranges(t, w->v, &n);
    if (r && n) {
        fprintf(f, "\n### Ranges (sorted by %s)", gmp_report_sort_name(w->v->sort));
        m_more(w, n);
        fputs("\n\n| range | calls | total time | mean time | allocated | freed | left behind "
              "| peak inside | of it allocated inside | mean fragmentation |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
              f);
        for (size_t i = 0; i < n && (!w->v->top || i < w->v->top); i++) {
            const gmp_report_range *x = &r[i];
            uint64_t inst = x->closed + x->open_at_end;
            char b[8][32];
            fputs("| ", f);
            m_idx(w, x->path, "*(no name)*");
            if (!x->thread_bound)
                fputs(" (start/end)", f);
            fprintf(f,
                    " | %" PRIu64 " | %s | %s | %s (%" PRIu64 ") | %s (%" PRIu64
                    ") | %s | %s | %s | %s |\n",
                    x->entered, gmp_report_fmt_dur(x->total_ns, b[0], 32),
                    gmp_report_fmt_dur(inst ? x->total_ns / inst : 0, b[1], 32),
                    B(x->alloc_bytes, b[2]), x->allocs, B(x->free_bytes, b[3]), x->frees,
                    B(x->left_bytes, b[4]), B(x->peak_bytes, b[5]), B(x->peak_inside_bytes, b[6]),
                    B((uint64_t)(x->frag_mean_bytes + 0.5), b[7]));
        }
    }
    free(r);

    shown = 0;
    for (size_t i = 0; i < t->nooms; i++) {
        const gmp_replay_oom *o = &t->ooms[i].o;
        if (!gmp_report_wanted(w->v, o->device))
            continue;
        if (!shown++)
            fputs("\n### Out of memory\n\n| at | device | API | requested | allocated | reserved | "
                  "range |\n|---|---|---|---:|---:|---:|---|\n",
                  f);
        fprintf(f, "| %s | %" PRId32 " | ", gmp_report_fmt_time(t, o->time_ns, b1, sizeof b1),
                o->device);
        m_idx(w, o->api, "");
        fprintf(f, " | %s | %s | %s | ", B(o->requested, b2), B(o->live_bytes, b3),
                B(o->reserved_bytes, (char[32]){0}));
        m_idx(w, o->range, "*(no range)*");
        fputs(" |\n", f);
    }
    gmp_analysis_write_md(f, t, w->v);
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
            fputs("\n### Anomalies\n\n", f);
        fprintf(f, "- %s: %" PRIu64 "\n", items[i].what, items[i].v);
    }
    for (size_t i = 0; i < t->nnotices; i++) {
        if (!i)
            fputs("\n### Notices from the profiler\n\n", f);
        const gmp_report_notice *no = &t->notices[i];
        fprintf(f, "- %s: ",
                no->severity >= GMP_NOTICE_ERROR     ? "error"
                : no->severity == GMP_NOTICE_WARNING ? "warning"
                                                     : "info");
        m_idx(w, no->message, "");
        fputc('\n', f);
    }
}

gmp_err gmp_report_write_md(const gmp_report_doc *doc, FILE *f, const gmp_report_view *v)
{
    fputs("# gpumemprof report\n\n", f);
    if (doc->ntraces > 1) {
        fprintf(f,
                "%zu processes.\n\n## Across the processes\n\n| process | trace | peak "
                "allocated | device | at | leaked | OOMs | events |\n"
                "|---|---|---:|---|---|---:|---:|---:|\n",
                doc->ntraces);
        for (size_t i = 0; i < doc->ntraces; i++) {
            const gmp_report_trace *t = doc->traces[i];
            mw w = {f, t, v};
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
            char b1[32], b2[32], b3[32];
            fputs("| ", f);
            m_idx(&w, t->label, "");
            fputs(" | ", f);
            m_idx(&w, t->path, "");
            fprintf(f, " | %s | %" PRId32 " | %s | %s | %" PRIu64 " | %" PRIu64 " |\n", B(peak, b1),
                    pd, gmp_report_fmt_time(t, pt, b2, sizeof b2), B(leaked, b3), ooms,
                    t->sum.events);
        }
        fputc('\n', f);
    }
    for (size_t i = 0; i < doc->ntraces; i++) {
        mw w = {f, doc->traces[i], v};
        if (i)
            fputc('\n', f);
        m_trace(&w);
    }
    return ferror(f) ? GMP_ERR_IO : GMP_OK;
}

/* For sections written outside this file (gmp_analysis_out.c). */
void gmp_report_md_str(FILE *f, const gmp_report_trace *t, uint32_t i, const char *none)
{
    mw w = {f, t, NULL};
    m_idx(&w, i, none);
}

void gmp_report_md_stack(FILE *f, const gmp_report_trace *t, uint32_t stack)
{
    mw w = {f, t, NULL};
    m_stack(&w, stack);
}
