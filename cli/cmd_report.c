/* gpumemprof report: what a trace says about memory, for a terminal (text) or for programs (JSON):
 * per device the peak allocated and reserved with their times, what was live at the peak by range
 * (and stack), leaks at exit, OOMs, totals per memory kind, anomalies and the trace's completeness.
 * Built on the shared replay (formats/gmp_replay.h). See docs/report.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_cmds.h"
#include "cli_opts.h"
#include "gmp_escape.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_symbolize.h"
#include "gmp_trace.h"

#define DEFAULT_TOP_TEXT 10

typedef struct report {
    FILE *f;
    gmp_replay *rp;
    gmp_reader *r;
    const char *path;
    int64_t device; /* --device, or INT64_MIN for all */
    size_t top;     /* rows per device in tables; 0 = all */
    uint64_t t0;    /* base of relative times in text */
    char *buf;      /* scratch for range paths */
    size_t cap;
    gmp_symbolizer *sym;   /* native frames, made on first use (after the replay: all modules) */
    const char *debug_dir; /* --debug-dir */
    struct agg *by_stack;  /* text: live at the peak by (device, stack) */
    size_t nby_stack;
} report;

/* ---- aggregation of sites ---- */

typedef struct agg {
    int32_t device;
    uint32_t kind; /* UINT32_MAX when merged over kinds */
    uint32_t range, stack;
    uint64_t bytes, count;
} agg;

static int agg_by_key(const void *a, const void *b)
{
    const agg *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->range != y->range)
        return x->range < y->range ? -1 : 1;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    return 0;
}

static int agg_by_bytes(const void *a, const void *b)
{
    const agg *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return agg_by_key(a, b);
}

static int wanted_device(const report *R, int32_t dev)
{
    return R->device == INT64_MIN || R->device == dev;
}

/* Kinds that hold memory of their own (leaks are reported for them). */
static int kind_holds_memory(uint32_t kind)
{
    return kind != GMP_MEM_VMM_MAPPING && kind != GMP_MEM_NVTX_REGION && kind != GMP_MEM_VA_RESERVE;
}

/* Groups sites: peak = 1: live at the device's peak (device kinds), by (device, range, stack);
 * peak = 0: live at the end (kinds that hold memory), by (device, kind, range, stack).
 * Returns the rows sorted by device then bytes (largest first); *n receives their count. */
static agg *group_sites(const report *R, int peak, size_t *n)
{
    size_t ns = gmp_replay_site_count(R->rp), k = 0;
    agg *a = calloc(ns ? ns : 1, sizeof *a);
    if (!a)
        return NULL;
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(R->rp, i);
        if (!wanted_device(R, s->device))
            continue;
        uint64_t bytes = peak ? s->peak_bytes : s->live_bytes;
        uint64_t count = peak ? s->peak_count : s->live_count;
        if (!count)
            continue;
        if (peak ? !gmp_mem_kind_is_device(s->kind) : !kind_holds_memory(s->kind))
            continue;
        agg *g = &a[k++];
        g->device = s->device;
        g->kind = peak ? UINT32_MAX : s->kind;
        g->range = s->range;
        g->stack = s->stack;
        g->bytes = bytes;
        g->count = count;
    }
    qsort(a, k, sizeof *a, agg_by_key);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && agg_by_key(&a[m - 1], &a[i]) == 0) {
            a[m - 1].bytes += a[i].bytes;
            a[m - 1].count += a[i].count;
        } else {
            a[m++] = a[i];
        }
    }
    qsort(a, m, sizeof *a, agg_by_bytes);
    *n = m;
    return a;
}

/* Merges rows that differ only by stack (text shows ranges). Input sorted by bytes per device. */
static size_t merge_stacks(agg *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i].stack = 0;
    qsort(a, n, sizeof *a, agg_by_key);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && agg_by_key(&a[m - 1], &a[i]) == 0) {
            a[m - 1].bytes += a[i].bytes;
            a[m - 1].count += a[i].count;
        } else {
            a[m++] = a[i];
        }
    }
    qsort(a, m, sizeof *a, agg_by_bytes);
    return m;
}

/* ---- strings ---- */

static const char *range_path(report *R, uint32_t id, size_t *len)
{
    size_t n = gmp_reader_range_path(R->r, id, R->buf, R->cap);
    if (n >= R->cap) {
        char *p = realloc(R->buf, n + 1);
        if (p) {
            R->buf = p;
            R->cap = n + 1;
            n = gmp_reader_range_path(R->r, id, R->buf, R->cap);
        } else {
            n = R->cap - 1;
        }
    }
    *len = n;
    return R->buf;
}

/* Trace bytes on a terminal: valid UTF-8 kept, control characters and invalid bytes as \xNN. */
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

static void text_range(report *R, uint32_t id)
{
    size_t n;
    const char *p = range_path(R, id, &n);
    if (!id || !n)
        fputs("(no range)", R->f);
    else
        text_bytes(R->f, p, n);
}

static void text_strid(report *R, uint32_t id, const char *none)
{
    gmp_str s = gmp_reader_string(R->r, id);
    if (!id || !s.len)
        fputs(none, R->f);
    else
        text_bytes(R->f, s.ptr, s.len);
}

static gmp_symbolizer *symbolizer(report *R);

#define TEXT_STACK_FRAMES 4

/* A stack on one line, innermost first (inlined functions as frames of their own):
 * "f (a.c:12) < g (b.c:40) < ...". */
static void text_stack(report *R, uint32_t stack)
{
    gmp_replay_frame fr[TEXT_STACK_FRAMES];
    size_t n = gmp_replay_stack_frames(R->rp, stack, fr, TEXT_STACK_FRAMES);
    gmp_symbolizer *sym = symbolizer(R);
    size_t shown = 0;
    int more = n > TEXT_STACK_FRAMES;
    for (size_t i = 0; i < n && i < TEXT_STACK_FRAMES && shown < TEXT_STACK_FRAMES; i++) {
        char name[512];
        const gmp_sym_frame *sf = NULL;
        size_t ns = 0;
        if (fr[i].kind == GMP_FRAME_NATIVE && sym)
            ns = gmp_symbolize(sym, fr[i].address, &sf);
        for (size_t k = 0; k < (ns ? ns : 1); k++) {
            if (shown == TEXT_STACK_FRAMES) {
                more = 1;
                break;
            }
            if (fr[i].kind == GMP_FRAME_PYTHON)
                snprintf(name, sizeof name, "%.*s (%.*s:%" PRIu32 ")", (int)fr[i].function.len,
                         fr[i].function.ptr, (int)fr[i].file.len, fr[i].file.ptr, fr[i].line);
            else if (!ns)
                snprintf(name, sizeof name, "0x%" PRIx64, fr[i].address);
            else if (sf[k].function && sf[k].file && sf[k].line) {
                const char *b = strrchr(sf[k].file, '/');
                snprintf(name, sizeof name, "%s (%s:%" PRIu32 ")", sf[k].function,
                         b ? b + 1 : sf[k].file, sf[k].line);
            } else
                gmp_symbolize_frame(sym, fr[i].address, 1, name, sizeof name);
            if (shown++)
                fputs(" < ", R->f);
            text_bytes(R->f, name, strlen(name));
        }
    }
    if (more)
        fputs(" < ...", R->f);
}

static const char *fmt_bytes(uint64_t b, char *buf, size_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (b < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", b);
        return buf;
    }
    double v = (double)b;
    int u = -1;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.2f %s", v, units[u]);
    return buf;
}

static const char *fmt_time(const report *R, uint64_t t, char *buf, size_t n)
{
    if (t >= R->t0)
        snprintf(buf, n, "+%" PRIu64 ".%06" PRIu64 " s", (t - R->t0) / 1000000000u,
                 (t - R->t0) % 1000000000u / 1000u);
    else
        snprintf(buf, n, "-%" PRIu64 ".%06" PRIu64 " s", (R->t0 - t) / 1000000000u,
                 (R->t0 - t) % 1000000000u / 1000u);
    return buf;
}

static void text_devname(report *R, const gmp_replay_device *d)
{
    if (d->id < 0) {
        fputs("host", R->f);
        return;
    }
    fprintf(R->f, "%" PRId32, d->id);
    if (d->def && d->def->name.len) {
        fputs(": ", R->f);
        text_bytes(R->f, d->def->name.ptr, d->def->name.len);
    }
    if (d->def && d->def->total_bytes) {
        char b[32];
        fprintf(R->f, " (%s)", fmt_bytes(d->def->total_bytes, b, sizeof b));
    }
}

/* Devices the report lists: real devices, and the host slot only when it has device memory. */
static int listed_device(const report *R, const gmp_replay_device *d)
{
    if (!wanted_device(R, d->id))
        return 0;
    return d->id >= 0 || d->allocs > 0;
}

/* ---- text ---- */

static void text_cmdline(report *R, gmp_str c)
{
    for (uint32_t i = 0; i < c.len;) {
        uint32_t j = i;
        while (j < c.len && c.ptr[j])
            j++;
        if (i)
            fputc(' ', R->f);
        text_bytes(R->f, c.ptr + i, j - i);
        i = j + 1;
    }
}

static void text_header(report *R)
{
    FILE *f = R->f;
    const gmp_rec_header *h = gmp_reader_header(R->r);
    const gmp_replay_summary *s = gmp_replay_get_summary(R->rp);
    fputs("gpumemprof report: ", f);
    text_bytes(f, R->path, strlen(R->path));
    fputc('\n', f);
    if (h) {
        fprintf(f, "  process %" PRIu32 " on ", h->pid);
        text_bytes(f, h->hostname.ptr, h->hostname.len);
        if (h->rank >= 0)
            fprintf(f, ", rank %" PRId64, h->rank);
        if (h->cmdline.len) {
            fputs(": ", f);
            text_cmdline(R, h->cmdline);
        }
        fputc('\n', f);
    }
    uint64_t span = s->last_ns > s->first_ns ? s->last_ns - s->first_ns : 0;
    fprintf(f, "  %" PRIu64 " events over %" PRIu64 ".%06" PRIu64 " s, %" PRIu64 " lost\n",
            s->events, span / 1000000000u, span % 1000000000u / 1000u, s->lost_events);
    fputs("  ", f);
    text_bytes(f, s->completeness, strlen(s->completeness));
    fputc('\n', f);
}

static void text_device(report *R, const gmp_replay_device *d, const agg *live, size_t nlive,
                        const agg *leaks, size_t nleaks)
{
    FILE *f = R->f;
    char b1[32], b2[32];
    fputs("\nDevice ", f);
    text_devname(R, d);
    fputc('\n', f);
    fprintf(f, "  peak allocated  %-12s at %s  (%" PRIu64 " bytes)\n",
            fmt_bytes(d->peak_allocated, b1, sizeof b1),
            fmt_time(R, d->peak_time_ns, b2, sizeof b2), d->peak_allocated);
    fprintf(f, "  peak reserved   %-12s at %s  (%" PRIu64 " bytes)\n",
            fmt_bytes(d->peak_reserved, b1, sizeof b1),
            fmt_time(R, d->peak_reserved_time_ns, b2, sizeof b2), d->peak_reserved);
    fprintf(f, "  allocations     %" PRIu64 " (%" PRIu64 " freed, %" PRIu64 " failed), %s in all\n",
            d->allocs, d->frees, d->failed_allocs, fmt_bytes(d->alloc_bytes, b1, sizeof b1));
    fprintf(f, "  leaked at exit  %s in %" PRIu64 " allocation%s\n",
            fmt_bytes(d->allocated, b1, sizeof b1), d->live_count, d->live_count == 1 ? "" : "s");
    if (d->ooms)
        fprintf(f, "  out of memory   %" PRIu64 " time%s\n", d->ooms, d->ooms == 1 ? "" : "s");
    if (d->samples && d->max_unexplained)
        fprintf(f, "  not explained   %s of driver-reported use at %s\n",
                fmt_bytes(d->max_unexplained, b1, sizeof b1),
                fmt_time(R, d->max_unexplained_time_ns, b2, sizeof b2));

    size_t total = 0, shown = 0;
    for (size_t i = 0; i < nlive; i++)
        total += live[i].device == d->id;
    if (total) {
        fprintf(f, "\n  Live at the peak, by range");
        if (R->top && total > R->top)
            fprintf(f, " (top %zu of %zu)", R->top, total);
        fprintf(f, ":\n  %12s %7s %8s  %s\n", "bytes", "share", "count", "range");
        for (size_t i = 0; i < nlive; i++) {
            const agg *g = &live[i];
            if (g->device != d->id || (R->top && shown >= R->top))
                continue;
            shown++;
            double pct =
                d->peak_allocated ? 100.0 * (double)g->bytes / (double)d->peak_allocated : 0.0;
            fprintf(f, "  %12s %6.1f%% %8" PRIu64 "  ", fmt_bytes(g->bytes, b1, sizeof b1), pct,
                    g->count);
            text_range(R, g->range);
            fputc('\n', f);
        }
    }
    total = shown = 0;
    for (size_t i = 0; i < R->nby_stack; i++)
        total += R->by_stack[i].device == d->id && R->by_stack[i].stack;
    if (total) {
        fprintf(f, "\n  Live at the peak, by call stack");
        if (R->top && total > R->top)
            fprintf(f, " (top %zu of %zu)", R->top, total);
        fprintf(f, ":\n  %12s %7s %8s  %s\n", "bytes", "share", "count", "stack (innermost first)");
        for (size_t i = 0; i < R->nby_stack; i++) {
            const agg *g = &R->by_stack[i];
            if (g->device != d->id || !g->stack || (R->top && shown >= R->top))
                continue;
            shown++;
            double pct =
                d->peak_allocated ? 100.0 * (double)g->bytes / (double)d->peak_allocated : 0.0;
            fprintf(f, "  %12s %6.1f%% %8" PRIu64 "  ", fmt_bytes(g->bytes, b1, sizeof b1), pct,
                    g->count);
            text_stack(R, g->stack);
            fputc('\n', f);
        }
    }
    total = shown = 0;
    for (size_t i = 0; i < nleaks; i++)
        total += leaks[i].device == d->id;
    if (total) {
        fprintf(f, "\n  Live at exit (leaks)");
        if (R->top && total > R->top)
            fprintf(f, " (top %zu of %zu)", R->top, total);
        fprintf(f, ":\n  %12s %8s  %-16s %s\n", "bytes", "count", "kind", "range");
        for (size_t i = 0; i < nleaks; i++) {
            const agg *g = &leaks[i];
            if (g->device != d->id || (R->top && shown >= R->top))
                continue;
            shown++;
            fprintf(f, "  %12s %8" PRIu64 "  %-16s ", fmt_bytes(g->bytes, b1, sizeof b1), g->count,
                    gmp_mem_kind_name(g->kind));
            text_range(R, g->range);
            fputc('\n', f);
        }
    }
}

static void text_kinds(report *R)
{
    FILE *f = R->f;
    int any = 0;
    char b1[32], b2[32], b3[32];
    for (size_t i = 0; i < gmp_replay_device_count(R->rp); i++) {
        const gmp_replay_device *d = gmp_replay_device_at(R->rp, i);
        if (!wanted_device(R, d->id))
            continue;
        for (unsigned k = 0; k < GMP_MEM_KIND_COUNT; k++) {
            const gmp_replay_kind_stats *ks = &d->kind[k];
            if (!ks->allocs)
                continue;
            if (!any) {
                fprintf(f, "\nMemory by kind (* counts in the device peak):\n");
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
                    fmt_bytes(ks->peak_bytes, b1, sizeof b1),
                    fmt_bytes(ks->live_bytes, b2, sizeof b2),
                    fmt_bytes(ks->max_alloc_bytes, b3, sizeof b3));
        }
    }
}

static void text_ooms(report *R)
{
    FILE *f = R->f;
    size_t n = gmp_replay_oom_count(R->rp), shown = 0;
    char b1[32], b2[32], b3[32];
    for (size_t i = 0; i < n; i++) {
        const gmp_replay_oom *o = gmp_replay_oom_at(R->rp, i);
        if (!wanted_device(R, o->device))
            continue;
        if (!shown++)
            fprintf(f, "\nOut of memory:\n");
        fprintf(f, "  %s  device %" PRId32 "  ", fmt_time(R, o->time_ns, b1, sizeof b1), o->device);
        text_strid(R, o->api, "(unknown API)");
        fprintf(f, " of %s with %s allocated  ", fmt_bytes(o->requested, b2, sizeof b2),
                fmt_bytes(o->live_bytes, b3, sizeof b3));
        text_range(R, o->range);
        fputc('\n', f);
    }
    const gmp_replay_summary *s = gmp_replay_get_summary(R->rp);
    if (R->device == INT64_MIN && s->ooms > n)
        fprintf(f, "  ... and %" PRIu64 " more\n", s->ooms - n);
}

static void text_anomalies(report *R)
{
    const gmp_replay_summary *s = gmp_replay_get_summary(R->rp);
    FILE *f = R->f;
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
            fprintf(f, "\nAnomalies:\n");
        fprintf(f, "  %" PRIu64 " %s%s\n", items[i].v, items[i].what, items[i].v == 1 ? "" : "(s)");
    }
    size_t nn = gmp_replay_notice_count(R->rp);
    for (size_t i = 0; i < nn; i++) {
        uint32_t sev;
        const char *m = gmp_replay_notice_at(R->rp, i, &sev, NULL);
        if (!i)
            fprintf(f, "\nNotices from the profiler:\n");
        fprintf(f, "  %s: ",
                sev >= GMP_NOTICE_ERROR     ? "error"
                : sev == GMP_NOTICE_WARNING ? "warning"
                                            : "info");
        text_bytes(f, m, strlen(m));
        fputc('\n', f);
    }
}

static void write_text(report *R, agg *live, size_t nlive, const agg *leaks, size_t nleaks)
{
    text_header(R);
    /* by stack: the same rows merged over ranges instead */
    R->by_stack = malloc((nlive ? nlive : 1) * sizeof *R->by_stack);
    if (R->by_stack) {
        memcpy(R->by_stack, live, nlive * sizeof *live);
        for (size_t i = 0; i < nlive; i++)
            R->by_stack[i].range = 0;
        qsort(R->by_stack, nlive, sizeof *live, agg_by_key);
        size_t m = 0;
        for (size_t i = 0; i < nlive; i++) {
            if (m && agg_by_key(&R->by_stack[m - 1], &R->by_stack[i]) == 0) {
                R->by_stack[m - 1].bytes += R->by_stack[i].bytes;
                R->by_stack[m - 1].count += R->by_stack[i].count;
            } else {
                R->by_stack[m++] = R->by_stack[i];
            }
        }
        qsort(R->by_stack, m, sizeof *live, agg_by_bytes);
        R->nby_stack = m;
    }
    nlive = merge_stacks(live, nlive);
    int any = 0;
    for (size_t i = 0; i < gmp_replay_device_count(R->rp); i++) {
        const gmp_replay_device *d = gmp_replay_device_at(R->rp, i);
        if (!listed_device(R, d))
            continue;
        text_device(R, d, live, nlive, leaks, nleaks);
        any = 1;
    }
    if (!any)
        fprintf(R->f, "\nNo device memory was recorded.\n");
    /* host memory (device -1) still live at exit, when the host is not listed as a device */
    const gmp_replay_device *h = gmp_replay_device_find(R->rp, -1);
    if (h && !listed_device(R, h) && wanted_device(R, -1)) {
        size_t shown = 0;
        char b1[32];
        for (size_t i = 0; i < nleaks; i++) {
            const agg *g = &leaks[i];
            if (g->device != -1 || (R->top && shown >= R->top))
                continue;
            if (!shown++)
                fprintf(R->f, "\nHost memory live at exit:\n  %12s %8s  %-16s %s\n", "bytes",
                        "count", "kind", "range");
            fprintf(R->f, "  %12s %8" PRIu64 "  %-16s ", fmt_bytes(g->bytes, b1, sizeof b1),
                    g->count, gmp_mem_kind_name(g->kind));
            text_range(R, g->range);
            fputc('\n', R->f);
        }
    }
    text_kinds(R);
    text_ooms(R);
    text_anomalies(R);
}

/* ---- JSON ---- */

static void j_str(FILE *f, const char *s, size_t n)
{
    gmp_json_fputs(f, s ? s : "", s ? n : 0);
}

static void j_range(report *R, uint32_t id)
{
    size_t n;
    const char *p = range_path(R, id, &n);
    j_str(R->f, p, n);
}

static void j_strid(report *R, uint32_t id)
{
    gmp_str s = gmp_reader_string(R->r, id);
    j_str(R->f, s.ptr, s.len);
}

static gmp_symbolizer *symbolizer(report *R)
{
    if (!R->sym) {
        gmp_sym_opts so = {R->debug_dir, 0};
        if (gmp_symbolizer_new(&R->sym, &so) != GMP_OK)
            return NULL;
    }
    gmp_symbolizer_add_reader_modules(R->sym, R->r); /* modules defined since the last call */
    return R->sym;
}

/* JSON frames of a stack, innermost first: {function, file, line, module, address} for native
 * frames (a native address gives several frames when functions were inlined there; "inlined":
 * true marks them; "unknown" says why a frame has no function), {function, file, line} for
 * Python frames. */
static void j_stack(report *R, uint32_t stack)
{
    FILE *f = R->f;
    gmp_replay_frame fr[256];
    size_t n = gmp_replay_stack_frames(R->rp, stack, fr, 256);
    if (n > 256)
        n = 256;
    gmp_symbolizer *sym = symbolizer(R);
    fputs(",\"stack\":[", f);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        const gmp_replay_frame *x = &fr[i];
        if (x->kind == GMP_FRAME_PYTHON) {
            fputs(first ? "{" : ",{", f);
            first = 0;
            fputs("\"function\":", f);
            j_str(f, x->function.ptr, x->function.len);
            fputs(",\"file\":", f);
            j_str(f, x->file.ptr, x->file.len);
            fprintf(f, ",\"line\":%" PRIu32 "}", x->line);
            continue;
        }
        const gmp_sym_frame *sf = NULL;
        size_t ns = sym ? gmp_symbolize(sym, x->address, &sf) : 0;
        gmp_sym_frame plain = {.address = x->address, .status = GMP_SYM_NO_MODULE};
        if (!ns) {
            sf = &plain;
            ns = 1;
        }
        for (size_t k = 0; k < ns; k++) {
            const gmp_sym_frame *y = &sf[k];
            fputs(first ? "{" : ",{", f);
            first = 0;
            fputs("\"function\":", f);
            if (y->function)
                j_str(f, y->function, strlen(y->function));
            else
                fputs("null", f);
            fputs(",\"file\":", f);
            if (y->file)
                j_str(f, y->file, strlen(y->file));
            else
                fputs("null", f);
            fprintf(f, ",\"line\":%" PRIu32, y->line);
            if (y->module) {
                char off[32];
                snprintf(off, sizeof off, "+0x%" PRIx64, y->offset);
                size_t pl = strlen(y->module), ol = strlen(off);
                char *m = malloc(pl + ol + 1);
                fputs(",\"module\":", f);
                if (m) {
                    memcpy(m, y->module, pl);
                    memcpy(m + pl, off, ol + 1);
                    j_str(f, m, pl + ol);
                    free(m);
                } else {
                    j_str(f, y->module, pl);
                }
            } else {
                fputs(",\"module\":null", f);
            }
            fprintf(f, ",\"address\":\"0x%" PRIx64 "\"", y->address);
            if (y->inlined)
                fputs(",\"inlined\":true", f);
            if (y->status != GMP_SYM_OK) {
                const char *why = gmp_sym_status_name(y->status);
                fputs(",\"unknown\":", f);
                j_str(f, why, strlen(why));
            }
            fputc('}', f);
        }
    }
    fputc(']', f);
}

static void j_header(report *R)
{
    FILE *f = R->f;
    const gmp_rec_header *h = gmp_reader_header(R->r);
    fputs("  \"trace\": {\"path\":", f);
    j_str(f, R->path, strlen(R->path));
    if (h) {
        fputs(",\"producer\":", f);
        j_str(f, h->producer.ptr, h->producer.len);
        fprintf(f, ",\"pid\":%" PRIu32 ",\"ppid\":%" PRIu32 ",\"hostname\":", h->pid, h->ppid);
        j_str(f, h->hostname.ptr, h->hostname.len);
        fputs(",\"cmdline\":[", f);
        int first = 1;
        for (uint32_t i = 0; i < h->cmdline.len;) {
            uint32_t j = i;
            while (j < h->cmdline.len && h->cmdline.ptr[j])
                j++;
            if (!first)
                fputc(',', f);
            j_str(f, h->cmdline.ptr + i, j - i);
            first = 0;
            i = j + 1;
        }
        fprintf(f,
                "],\"rank\":%" PRId64 ",\"start_wall_ns\":%" PRIu64 ",\"start_trace_ns\":%" PRIu64,
                h->rank, h->start_wall_ns, h->start_trace_ns);
    }
    fputs("},\n", f);
}

static void write_json(report *R, const agg *live, size_t nlive, const agg *leaks, size_t nleaks)
{
    FILE *f = R->f;
    const gmp_replay_summary *s = gmp_replay_get_summary(R->rp);
    const gmp_reader_stats *st = gmp_reader_get_stats(R->r);
    fputs("{\n  \"schema\": \"gpumemprof-report/1\",\n", f);
    j_header(R);
    fprintf(f, "  \"complete\": %s,\n  \"truncated\": %s,\n  \"has_end\": %s,\n",
            s->complete ? "true" : "false", s->truncated ? "true" : "false",
            st->has_end ? "true" : "false");
    fputs("  \"completeness\": ", f);
    j_str(f, s->completeness, strlen(s->completeness));
    fprintf(f,
            ",\n  \"events\": %" PRIu64 ",\n  \"lost_events\": %" PRIu64
            ",\n  \"late_events\": %" PRIu64 ",\n  \"first_time_ns\": %" PRIu64
            ",\n  \"last_time_ns\": %" PRIu64 ",\n",
            s->events, s->lost_events, s->late_events, s->first_ns, s->last_ns);

    fputs("  \"devices\": [", f);
    int first = 1;
    for (size_t i = 0; i < gmp_replay_device_count(R->rp); i++) {
        const gmp_replay_device *d = gmp_replay_device_at(R->rp, i);
        if (!listed_device(R, d))
            continue;
        fputs(first ? "\n    {" : ",\n    {", f);
        first = 0;
        fprintf(f, "\"id\":%" PRId32 ",\"name\":", d->id);
        if (d->def)
            j_str(f, d->def->name.ptr, d->def->name.len);
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
                ",\"max_unexplained_bytes\":%" PRIu64 ",\"max_unexplained_time_ns\":%" PRIu64 "}",
                d->def ? d->def->total_bytes : 0, d->peak_allocated, d->peak_time_ns,
                d->peak_reserved, d->peak_reserved_time_ns, d->allocs, d->frees, d->failed_allocs,
                d->failed_frees, d->alloc_bytes, d->allocated, d->live_count, d->reserved, d->ooms,
                d->unknown_frees, d->double_frees, d->samples, d->max_unexplained,
                d->max_unexplained_time_ns);
    }
    fputs(first ? "],\n" : "\n  ],\n", f);

    fputs("  \"kinds\": [", f);
    first = 1;
    for (size_t i = 0; i < gmp_replay_device_count(R->rp); i++) {
        const gmp_replay_device *d = gmp_replay_device_at(R->rp, i);
        if (!wanted_device(R, d->id))
            continue;
        for (unsigned k = 0; k < GMP_MEM_KIND_COUNT; k++) {
            const gmp_replay_kind_stats *ks = &d->kind[k];
            if (!ks->allocs)
                continue;
            fputs(first ? "\n    {" : ",\n    {", f);
            first = 0;
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
    fputs(first ? "],\n" : "\n  ],\n", f);

    for (int pass = 0; pass < 2; pass++) {
        const agg *a = pass ? leaks : live;
        size_t n = pass ? nleaks : nlive;
        fputs(pass ? "  \"leaks\": [" : "  \"live_at_peak\": [", f);
        first = 1;
        size_t shown = 0;
        for (size_t i = 0; i < n; i++) {
            if (i && a[i].device != a[i - 1].device)
                shown = 0;
            if (R->top && shown >= R->top)
                continue;
            shown++;
            fputs(first ? "\n    {" : ",\n    {", f);
            first = 0;
            fprintf(f, "\"device\":%" PRId32, a[i].device);
            if (pass)
                fprintf(f, ",\"kind\":\"%s\"", gmp_mem_kind_name(a[i].kind));
            fprintf(f, ",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64 ",\"range\":", a[i].bytes,
                    a[i].count);
            j_range(R, a[i].range);
            if (a[i].stack)
                j_stack(R, a[i].stack);
            fputc('}', f);
        }
        fputs(first ? "],\n" : "\n  ],\n", f);
    }

    fputs("  \"ooms\": [", f);
    first = 1;
    for (size_t i = 0; i < gmp_replay_oom_count(R->rp); i++) {
        const gmp_replay_oom *o = gmp_replay_oom_at(R->rp, i);
        if (!wanted_device(R, o->device))
            continue;
        fputs(first ? "\n    {" : ",\n    {", f);
        first = 0;
        fprintf(f,
                "\"device\":%" PRId32 ",\"time_ns\":%" PRIu64 ",\"thread\":%" PRIu32
                ",\"requested_bytes\":%" PRIu64 ",\"api\":",
                o->device, o->time_ns, o->tid, o->requested);
        j_strid(R, o->api);
        fputs(",\"range\":", f);
        j_range(R, o->range);
        fprintf(f,
                ",\"live_bytes\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64 ",\"free_bytes\":%" PRIu64
                ",\"result\":%" PRId32,
                o->live_bytes, o->reserved_bytes, o->free_bytes, o->result);
        if (o->stack)
            j_stack(R, o->stack);
        fputc('}', f);
    }
    fputs(first ? "],\n" : "\n  ],\n", f);

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
    size_t nn = gmp_replay_notice_count(R->rp);
    for (size_t i = 0; i < nn; i++) {
        uint32_t sev;
        uint64_t t;
        const char *m = gmp_replay_notice_at(R->rp, i, &sev, &t);
        fprintf(f, "%s{\"severity\":%" PRIu32 ",\"time_ns\":%" PRIu64 ",\"message\":",
                i ? ",\n    " : "\n    ", sev, t);
        j_str(f, m, strlen(m));
        fputc('}', f);
    }
    fputs(nn ? "\n  ]\n}\n" : "]\n}\n", f);
}

/* ---- command ---- */

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n"
           "Replays TRACE once and prints, per device: the peak of allocated device memory and\n"
           "when it happened, the peak reserved (pools and VMM included), allocation counts,\n"
           "what was live at the peak by NVTX range and by call stack (native frames symbolized\n"
           "from the binaries' DWARF or ELF symbols), what was still live at\n"
           "exit (leaks); then totals per memory kind (managed and pinned/registered host memory\n"
           "are reported there, not in the device peak), out-of-memory errors, anomalies (frees\n"
           "of unknown addresses, double frees, ...) and whether the trace is complete.\n\n",
           cmd->summary);
    gmp_cli_print_options(stdout, opts);
    printf(
        "\nTimes in text are seconds from the start of the trace; JSON has absolute trace-clock\n"
        "nanoseconds and exact byte counts. --top applies per device (text default %d, JSON\n"
        "default all; 0 = all).\n\n"
        "Exit status: 0 when the report was written (also for a cut trace: a warning says\n"
        "what is missing), 1 when the trace cannot be read or the output cannot be written,\n"
        "2 for bad arguments. See docs/report.md for the JSON schema.\n",
        DEFAULT_TOP_TEXT);
}

int gmp_cmd_report(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *format = "text", *out_path = NULL, *debug_dir = NULL;
    int64_t top = -1, device = INT64_MIN;
    int npos = 0;
    const gmp_cli_opt opts[] = {
        {"format", 'f', GMP_CLI_STRING, &format, "FMT", "text (default) or json", 0},
        {"top", 'n', GMP_CLI_INT, &top, "N", "rows per device in each table (0: all)", 0},
        {"device", 'd', GMP_CLI_INT, &device, "N", "only this device (ordinal; -1: host)", 0},
        {"output", 'o', GMP_CLI_STRING, &out_path, "FILE", "write to FILE instead of stdout", 0},
        {"debug-dir", 0, GMP_CLI_STRING, &debug_dir, "DIR",
         "separate debug files (default /usr/lib/debug)", 0},
        {NULL, 0, GMP_CLI_FLAG, NULL, NULL, NULL, 0},
    };
    int rc = gmp_cli_parse(cmd, opts, argc, argv, &npos);
    if (rc == GMP_CLI_PARSE_HELP) {
        print_help(cmd, opts);
        return 0;
    }
    if (rc != GMP_CLI_PARSE_OK)
        return 2;
    int json;
    if (strcmp(format, "text") == 0)
        json = 0;
    else if (strcmp(format, "json") == 0)
        json = 1;
    else
        return gmp_cli_usage_error(cmd, "--format: '%s' is not text or json", format);
    if (top < -1 || top > 1000000000)
        return gmp_cli_usage_error(cmd, "--top: must be 0 or more");
    if (device != INT64_MIN && (device < -1 || device > INT32_MAX))
        return gmp_cli_usage_error(cmd, "--device: not a device ordinal");
    if (npos == 0)
        return gmp_cli_usage_error(cmd, "missing TRACE");
    if (npos > 1)
        return gmp_cli_usage_error(cmd, "%s: unexpected argument (one TRACE only)", argv[2]);
    const char *path = argv[1];

    gmp_reader *r = NULL;
    gmp_err e = gmp_reader_open(&r, path, NULL);
    if (e != GMP_OK) {
        const char *m = gmp_reader_open_error();
        fprintf(stderr, "gpumemprof report: %s: %s\n", path, m && *m ? m : gmp_err_str(e));
        return 1;
    }
    FILE *f = stdout;
    if (out_path && strcmp(out_path, "-") != 0) {
        f = fopen(out_path, "w");
        if (!f) {
            fprintf(stderr, "gpumemprof report: %s: %s\n", out_path, strerror(errno));
            gmp_reader_close(r);
            return 1;
        }
    }
    gmp_replay *rp = NULL;
    e = gmp_replay_new(&rp, r, NULL);
    if (e == GMP_OK)
        e = gmp_replay_run(rp);
    if (e != GMP_OK) {
        const char *m = rp ? gmp_replay_error(rp) : "";
        fprintf(stderr, "gpumemprof report: %s: %s\n", path, m && *m ? m : gmp_err_str(e));
        if (f != stdout) {
            fclose(f);
            unlink(out_path);
        }
        gmp_replay_free(rp);
        gmp_reader_close(r);
        return 1;
    }

    report R;
    memset(&R, 0, sizeof R);
    R.f = f;
    R.rp = rp;
    R.r = r;
    R.path = path;
    R.device = device;
    R.debug_dir = debug_dir;
    R.top = top >= 0 ? (size_t)top : json ? 0 : DEFAULT_TOP_TEXT;
    const gmp_rec_header *h = gmp_reader_header(r);
    const gmp_replay_summary *s = gmp_replay_get_summary(rp);
    R.t0 = s->first_ns;
    if (h && h->start_trace_ns && h->start_trace_ns <= s->first_ns)
        R.t0 = h->start_trace_ns;
    R.cap = 256;
    R.buf = malloc(R.cap);
    size_t nlive = 0, nleaks = 0;
    agg *live = R.buf ? group_sites(&R, 1, &nlive) : NULL;
    agg *leaks = live ? group_sites(&R, 0, &nleaks) : NULL;
    int status = 0;
    if (!leaks) {
        fprintf(stderr, "gpumemprof report: %s\n", gmp_err_str(GMP_ERR_NOMEM));
        status = 1;
    } else {
        if (device != INT64_MIN && !gmp_replay_device_find(rp, (int32_t)device))
            fprintf(stderr, "gpumemprof report: warning: %s: no device %" PRId64 " in the trace\n",
                    path, device);
        if (json)
            write_json(&R, live, nlive, leaks, nleaks);
        else
            write_text(&R, live, nlive, leaks, nleaks);
        if (!s->complete) {
            fflush(f);
            fprintf(stderr, "gpumemprof report: warning: %s: %s\n", path, s->completeness);
        }
    }
    free(live);
    free(leaks);
    free(R.buf);
    free(R.by_stack);
    gmp_symbolizer_free(R.sym);
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "gpumemprof report: cannot write the output\n");
        status = 1;
    }
    if (f != stdout && fclose(f) != 0 && !status) {
        fprintf(stderr, "gpumemprof report: %s: cannot be written\n", out_path);
        status = 1;
    }
    gmp_replay_free(rp);
    gmp_reader_close(r);
    return status;
}
