/* gpumemprof diff: compares two traces, A (before) and B (after): per device the peak of allocated
 * memory, what was live at the peak by range and by stack, and leaks, side by side with the change
 * B - A, biggest changes first. Each trace is replayed once (formats/replay/gmp_diff.h). See
 * docs/diff.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_cmds.h"
#include "gmp_units.h"
#include "cli_opts.h"
#include "gmp_diff.h"
#include "gmp_escape.h"
#include "gmp_trace.h"

#define DEFAULT_TOP_TEXT 10

static const char *const table_title[GMP_DIFF_NTABLES] = {
    "live at the peak, by range", "live at the peak, by stack",
    "leaks (live at exit), by kind and range"};
static const char *const table_json[GMP_DIFF_NTABLES] = {"live_at_peak_by_range",
                                                         "live_at_peak_by_stack", "leaks"};

static const char *fmt_delta(int64_t d, char *buf, size_t n)
{
    char b[32];
    if (d == 0) {
        snprintf(buf, n, "0");
        return buf;
    }
    uint64_t m = d < 0 ? (uint64_t)(-(d + 1)) + 1 : (uint64_t)d;
    snprintf(buf, n, "%c%s", d < 0 ? '-' : '+', gmp_fmt_bytes(m, b, sizeof b));
    return buf;
}

/* "+12.5%", "new", "gone" or "" (no change) */
static const char *fmt_pct(uint64_t a, uint64_t b, char *buf, size_t n)
{
    if (a == b)
        buf[0] = 0;
    else if (a == 0)
        snprintf(buf, n, "new");
    else if (b == 0)
        snprintf(buf, n, "gone");
    else
        snprintf(buf, n, "%+.1f%%", ((double)b - (double)a) * 100.0 / (double)a);
    return buf;
}

/* Trace strings on a terminal: valid UTF-8 kept, control bytes and invalid bytes as \xNN. */
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

static void text_dev(FILE *f, const gmp_diff_dev *d)
{
    const gmp_diff_devinfo *x = d->b ? d->b : d->a;
    if (d->id < 0) {
        fputs("host", f);
        return;
    }
    fprintf(f, "%" PRId32, d->id);
    if (x->name[0]) {
        fputs(": ", f);
        text_bytes(f, x->name, strlen(x->name));
    }
    if (d->a && d->b && strcmp(d->a->name, d->b->name) != 0 && d->a->name[0]) {
        fputs(" (A: ", f);
        text_bytes(f, d->a->name, strlen(d->a->name));
        fputc(')', f);
    }
}

static void text_pair(FILE *f, uint64_t a, uint64_t b, int in_a, int in_b)
{
    char x[32], y[32], z[32], p[32];
    fprintf(f, "%14s %14s %15s %7s", in_a ? gmp_fmt_bytes(a, x, sizeof x) : "-",
            in_b ? gmp_fmt_bytes(b, y, sizeof y) : "-",
            fmt_delta(gmp_diff_delta(in_a ? a : 0, in_b ? b : 0), z, sizeof z),
            fmt_pct(in_a ? a : 0, in_b ? b : 0, p, sizeof p));
}

static void write_text(FILE *f, const gmp_diff_profile *A, const gmp_diff_profile *B,
                       const gmp_diff *D, size_t top)
{
    fputs("gpumemprof diff\n  A: ", f);
    text_bytes(f, A->path, strlen(A->path));
    fputs("\n  B: ", f);
    text_bytes(f, B->path, strlen(B->path));
    fputs("\n\nPer device (B - A):\n", f);
    fprintf(f, "  %-22s %14s %14s %15s\n", "", "A", "B", "change");
    for (size_t i = 0; i < D->ndev; i++) {
        const gmp_diff_dev *d = &D->dev[i];
        fputs("  device ", f);
        text_dev(f, d);
        fputc('\n', f);
        int ia = d->a != NULL, ib = d->b != NULL;
        fprintf(f, "  %-22s ", "  peak allocated");
        text_pair(f, ia ? d->a->peak_allocated : 0, ib ? d->b->peak_allocated : 0, ia, ib);
        fprintf(f, "\n  %-22s ", "  peak reserved");
        text_pair(f, ia ? d->a->peak_reserved : 0, ib ? d->b->peak_reserved : 0, ia, ib);
        fprintf(f, "\n  %-22s ", "  leaked at exit");
        text_pair(f, ia ? d->a->leaked_bytes : 0, ib ? d->b->leaked_bytes : 0, ia, ib);
        fprintf(f, "\n  %-22s %14" PRIu64 " %14" PRIu64 " %+15" PRId64 "\n", "  allocations",
                ia ? d->a->allocs : 0, ib ? d->b->allocs : 0,
                gmp_diff_delta(ia ? d->a->allocs : 0, ib ? d->b->allocs : 0));
    }
    for (size_t i = 0; i < D->ndev; i++) {
        int32_t dev = D->dev[i].id;
        for (int t = 0; t < GMP_DIFF_NTABLES; t++) {
            const gmp_diff_row *rows = D->rows[t];
            size_t n = D->nrows[t], shown = 0, hidden = 0, first = 1;
            for (size_t k = 0; k < n; k++) {
                if (rows[k].device != dev)
                    continue;
                if (top && shown >= top) {
                    hidden++;
                    continue;
                }
                if (first) {
                    fputs("\nDevice ", f);
                    text_dev(f, &D->dev[i]);
                    fprintf(f, ": %s, biggest changes first\n", table_title[t]);
                    fprintf(f, "  %14s %14s %15s %7s %7s  %s\n", "A", "B", "change", "", "count",
                            t == GMP_DIFF_BY_STACK ? "stack" : "range");
                    first = 0;
                }
                shown++;
                const gmp_diff_row *r = &rows[k];
                fputs("  ", f);
                text_pair(f, r->a_bytes, r->b_bytes, 1, 1);
                char cnt[32];
                snprintf(cnt, sizeof cnt, "%+" PRId64, r->delta_count);
                fprintf(f, " %7s  ", r->delta_count ? cnt : "0");
                if (t == GMP_DIFF_LEAKS)
                    fprintf(f, "%s: ", gmp_mem_kind_name((unsigned)r->kind));
                if (r->key[0])
                    text_bytes(f, r->key, strlen(r->key));
                else
                    fputs(t == GMP_DIFF_BY_STACK ? "(no stack)" : "(no range)", f);
                fputc('\n', f);
            }
            if (hidden)
                fprintf(f, "  ... %zu more (--top 0 shows all)\n", hidden);
        }
    }
}

/* ---- JSON ---- */

static void j_str(FILE *f, const char *s)
{
    gmp_json_fputs(f, s, strlen(s));
}

static void j_side(FILE *f, const gmp_diff_devinfo *x)
{
    if (!x) {
        fputs("null", f);
        return;
    }
    fprintf(f,
            "{\"peak_allocated_bytes\":%" PRIu64 ",\"peak_time_ns\":%" PRIu64
            ",\"peak_reserved_bytes\":%" PRIu64 ",\"allocations\":%" PRIu64
            ",\"leaked_bytes\":%" PRIu64 ",\"leaked_allocations\":%" PRIu64 "}",
            x->peak_allocated, x->peak_time_ns, x->peak_reserved, x->allocs, x->leaked_bytes,
            x->leaked_allocations);
}

static void j_trace(FILE *f, const gmp_diff_profile *p)
{
    fputs("{\"path\":", f);
    j_str(f, p->path);
    fprintf(f, ",\"complete\":%s,\"completeness\":", p->complete ? "true" : "false");
    j_str(f, p->completeness);
    fputc('}', f);
}

static void write_json(FILE *f, const gmp_diff_profile *A, const gmp_diff_profile *B,
                       const gmp_diff *D, size_t top)
{
    fputs("{\n  \"schema\": \"gpumemprof-diff/1\",\n  \"a\": ", f);
    j_trace(f, A);
    fputs(",\n  \"b\": ", f);
    j_trace(f, B);
    fputs(",\n  \"devices\": [", f);
    for (size_t i = 0; i < D->ndev; i++) {
        const gmp_diff_dev *d = &D->dev[i];
        const gmp_diff_devinfo *x = d->b ? d->b : d->a;
        fprintf(f, "%s{\"id\":%" PRId32 ",\"name\":", i ? ",\n    " : "\n    ", d->id);
        j_str(f, x->name);
        fprintf(f, ",\"total_bytes\":%" PRIu64 ",\"a\":", x->total_bytes);
        j_side(f, d->a);
        fputs(",\"b\":", f);
        j_side(f, d->b);
        uint64_t pa = d->a ? d->a->peak_allocated : 0, pb = d->b ? d->b->peak_allocated : 0;
        uint64_t ra = d->a ? d->a->peak_reserved : 0, rb = d->b ? d->b->peak_reserved : 0;
        uint64_t la = d->a ? d->a->leaked_bytes : 0, lb = d->b ? d->b->leaked_bytes : 0;
        uint64_t ca = d->a ? d->a->allocs : 0, cb = d->b ? d->b->allocs : 0;
        fprintf(f,
                ",\"delta\":{\"peak_allocated_bytes\":%" PRId64 ",\"peak_reserved_bytes\":%" PRId64
                ",\"leaked_bytes\":%" PRId64 ",\"allocations\":%" PRId64 "}}",
                gmp_diff_delta(pa, pb), gmp_diff_delta(ra, rb), gmp_diff_delta(la, lb),
                gmp_diff_delta(ca, cb));
    }
    fputs(D->ndev ? "\n  ]" : "]", f);
    for (int t = 0; t < GMP_DIFF_NTABLES; t++) {
        fprintf(f, ",\n  \"%s\": [", table_json[t]);
        int first = 1;
        size_t shown = 0;
        for (size_t k = 0; k < D->nrows[t]; k++) {
            const gmp_diff_row *r = &D->rows[t][k];
            if (k && r->device != D->rows[t][k - 1].device)
                shown = 0;
            if (top && shown >= top)
                continue;
            shown++;
            fprintf(f, "%s{\"device\":%" PRId32, first ? "\n    " : ",\n    ", r->device);
            first = 0;
            if (t == GMP_DIFF_LEAKS)
                fprintf(f, ",\"kind\":\"%s\"", gmp_mem_kind_name((unsigned)r->kind));
            fputs(t == GMP_DIFF_BY_STACK ? ",\"stack\":" : ",\"range\":", f);
            j_str(f, r->key);
            fprintf(f,
                    ",\"a_bytes\":%" PRIu64 ",\"a_count\":%" PRIu64 ",\"b_bytes\":%" PRIu64
                    ",\"b_count\":%" PRIu64 ",\"delta_bytes\":%" PRId64 ",\"delta_count\":%" PRId64
                    "}",
                    r->a_bytes, r->a_count, r->b_bytes, r->b_count, r->delta_bytes, r->delta_count);
        }
        fputs(first ? "]" : "\n  ]", f);
    }
    fputs("\n}\n", f);
}

/* ---- command ---- */

static void print_help(const gmp_cli_cmd_info *cmd, const gmp_cli_opt *opts)
{
    gmp_cli_print_usage(stdout, cmd);
    printf("\n%s.\n\n"
           "Replays A (before) and B (after) once each and prints, per device: the peak of\n"
           "allocated and reserved memory, leaked bytes and allocation counts of both with the\n"
           "change B - A; then what was live at each trace's peak by NVTX range and by stack,\n"
           "and what was still live at exit by kind and range, matched by name across the two\n"
           "traces, biggest changes first.\n\n",
           cmd->summary);
    gmp_cli_print_options(stdout, opts);
    printf("\n--top applies per device and table (text default %d, JSON default all; 0 = all).\n"
           "Exit status: 0 when the comparison was written (a warning names a trace that was\n"
           "cut short), 1 when a trace cannot be read or the output cannot be written, 2 for\n"
           "bad arguments. See docs/diff.md.\n",
           DEFAULT_TOP_TEXT);
}

int gmp_cmd_diff(const gmp_cli_cmd_info *cmd, int argc, char **argv)
{
    const char *format = "text", *out_path = NULL;
    int64_t top = -1;
    int npos = 0;
    const gmp_cli_opt opts[] = {
        {"format", 'f', GMP_CLI_STRING, &format, "FMT", "text (default) or json", 0},
        {"top", 'n', GMP_CLI_INT, &top, "N", "rows per device in each table (0: all)", 0},
        {"output", 'o', GMP_CLI_STRING, &out_path, "FILE", "write to FILE instead of stdout", 0},
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
    if (npos < 2)
        return gmp_cli_usage_error(cmd, "expected two traces, A and B");
    if (npos > 2)
        return gmp_cli_usage_error(cmd, "%s: unexpected argument (two traces only)", argv[3]);

    gmp_diff_profile *P[2] = {NULL, NULL};
    char msg[512];
    for (int i = 0; i < 2; i++) {
        if (gmp_diff_profile_load(&P[i], argv[1 + i], msg, sizeof msg) != GMP_OK) {
            fprintf(stderr, "gpumemprof diff: %s: %s\n", argv[1 + i], msg);
            gmp_diff_profile_free(P[0]);
            return 1;
        }
    }
    gmp_diff *D = NULL;
    if (gmp_diff_compute(&D, P[0], P[1]) != GMP_OK) {
        fprintf(stderr, "gpumemprof diff: %s\n", gmp_err_str(GMP_ERR_NOMEM));
        gmp_diff_profile_free(P[0]);
        gmp_diff_profile_free(P[1]);
        return 1;
    }
    FILE *f = stdout;
    int status = 0;
    if (out_path && strcmp(out_path, "-") != 0) {
        f = fopen(out_path, "w");
        if (!f) {
            fprintf(stderr, "gpumemprof diff: %s: %s\n", out_path, strerror(errno));
            status = 1;
        }
    }
    if (f) {
        size_t t = top >= 0 ? (size_t)top : json ? 0 : DEFAULT_TOP_TEXT;
        if (json)
            write_json(f, P[0], P[1], D, t);
        else
            write_text(f, P[0], P[1], D, t);
        if (fflush(f) != 0 || ferror(f)) {
            fprintf(stderr, "gpumemprof diff: cannot write the output\n");
            status = 1;
        }
        if (f != stdout && fclose(f) != 0 && !status) {
            fprintf(stderr, "gpumemprof diff: %s: cannot be written\n", out_path);
            status = 1;
        }
        for (int i = 0; i < 2 && !status; i++)
            if (!P[i]->complete)
                fprintf(stderr, "gpumemprof diff: warning: %s: %s\n", P[i]->path,
                        P[i]->completeness);
    }
    gmp_diff_free(D);
    gmp_diff_profile_free(P[0]);
    gmp_diff_profile_free(P[1]);
    return status;
}
