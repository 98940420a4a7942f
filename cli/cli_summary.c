#include "cli_summary.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_units.h"

typedef struct range_total {
    uint32_t range;
    uint64_t bytes;
} range_total;

static int by_bytes_desc(const void *a, const void *b)
{
    const range_total *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* The ranges that held most of a device's memory at its peak. */
static void top_ranges(FILE *f, gmp_replay *rp, int32_t dev)
{
    size_t ns = gmp_replay_site_count(rp);
    range_total *t = calloc(ns ? ns : 1, sizeof *t);
    size_t nt = 0;
    if (!t)
        return;
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(rp, i);
        if (s->device != dev || !s->peak_bytes)
            continue;
        size_t j = 0;
        while (j < nt && t[j].range != s->range)
            j++;
        if (j == nt)
            t[nt++] = (range_total){s->range, 0};
        t[j].bytes += s->peak_bytes;
    }
    qsort(t, nt, sizeof *t, by_bytes_desc);
    gmp_reader *r = gmp_replay_reader(rp);
    for (size_t i = 0; i < nt && i < 3; i++) {
        char path[512], b[32];
        if (t[i].range)
            gmp_reader_range_path(r, t[i].range, path, sizeof path);
        else
            snprintf(path, sizeof path, "(no range)");
        fprintf(f, "      %-10s %s\n", gmp_fmt_bytes(t[i].bytes, b, sizeof b), path);
    }
    free(t);
}

static void one_trace(FILE *f, const char *path)
{
    gmp_reader *r = NULL;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK) {
        fprintf(f, "gpumemprof: %s: %s\n", path, gmp_reader_open_error());
        return;
    }
    gmp_replay *rp = NULL;
    if (gmp_replay_new(&rp, r, NULL) != GMP_OK) {
        gmp_reader_close(r);
        return;
    }
    gmp_err rc = gmp_replay_run(rp);
    const gmp_rec_header *h = gmp_reader_header(r);
    char cmd[200];
    size_t cl = h->cmdline.len < sizeof cmd - 1 ? h->cmdline.len : sizeof cmd - 1;
    memcpy(cmd, h->cmdline.ptr, cl);
    cmd[cl] = 0;
    for (size_t i = 0; i < cl; i++)
        if ((unsigned char)cmd[i] < 0x20)
            cmd[i] = ' ';
    fprintf(f, "gpumemprof: %s (pid %u: %s)\n", path, h->pid, cmd);
    if (rc != GMP_OK) {
        fprintf(f, "  cannot read it: %s\n", gmp_replay_error(rp));
        gmp_replay_free(rp);
        gmp_reader_close(r);
        return;
    }
    const gmp_replay_summary *s = gmp_replay_get_summary(rp);
    for (size_t i = 0; i < gmp_replay_notice_count(rp); i++) {
        uint32_t sev = 0;
        const char *msg = gmp_replay_notice_at(rp, i, &sev, NULL);
        fprintf(f, "  %s: %s\n", sev >= GMP_NOTICE_ERROR ? "error" : "note", msg);
    }
    int shown = 0;
    for (size_t i = 0; i < gmp_replay_device_count(rp); i++) {
        const gmp_replay_device *d = gmp_replay_device_at(rp, i);
        if (d->id < 0)
            continue;
        char b1[32], b2[32], b3[32];
        /* static __device__ memory lives as long as its module, which CUDA unloads after the
         * trace ends: not a leak */
        const gmp_replay_kind_stats *st = &d->kind[GMP_MEM_STATIC];
        uint64_t leaked = d->allocated - st->live_bytes, leaked_n = d->live_count - st->live_count;
        double at = d->peak_time_ns >= h->start_trace_ns
                        ? (double)(d->peak_time_ns - h->start_trace_ns) / 1e9
                        : 0.0;
        fprintf(f,
                "  device %d%s%.*s%s: peak allocated %s at %.3f s, peak reserved %s, %llu "
                "allocations, leaked %s in %llu\n",
                d->id, d->def ? " (" : "", d->def ? (int)d->def->name.len : 0,
                d->def ? d->def->name.ptr : "", d->def ? ")" : "",
                gmp_fmt_bytes(d->peak_allocated, b1, sizeof b1), at,
                gmp_fmt_bytes(d->peak_reserved, b2, sizeof b2), (unsigned long long)d->allocs,
                gmp_fmt_bytes(leaked, b3, sizeof b3), (unsigned long long)leaked_n);
        if (d->peak_allocated) {
            fprintf(f, "    at the peak:\n");
            top_ranges(f, rp, d->id);
        }
        shown++;
    }
    int fatal = 0;
    for (size_t i = 0; i < gmp_replay_notice_count(rp); i++) {
        uint32_t sev = 0;
        gmp_replay_notice_at(rp, i, &sev, NULL);
        fatal |= sev >= GMP_NOTICE_ERROR;
    }
    if (fatal && !s->alloc_records)
        fprintf(f, "  nothing was recorded (see the error above); the program ran unprofiled\n");
    else if (!shown)
        fprintf(f, "  no device memory was allocated\n");
    if (s->ooms)
        fprintf(f, "  out of memory: %llu time%s\n", (unsigned long long)s->ooms,
                s->ooms == 1 ? "" : "s");
    if (s->lost_events)
        fprintf(f, "  lost events: %llu\n", (unsigned long long)s->lost_events);
    if (!s->complete)
        fprintf(f, "  %s\n", s->completeness);
    gmp_replay_free(rp);
    gmp_reader_close(r);
}

/* s[0..n) followed by suffix as one shell word (single-quoted when it needs quoting). */
static void shell_word(FILE *f, const char *s, size_t n, const char *suffix)
{
    int plain = n > 0;
    for (size_t i = 0; i < n && plain; i++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-+=:,@%",
                       s[i]) != NULL &&
                s[i] != '\0';
    if (plain) {
        fwrite(s, 1, n, f);
        fputs(suffix, f);
        return;
    }
    fputc('\'', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'')
            fputs("'\\''", f);
        else
            fputc(s[i], f);
    }
    fputs(suffix, f);
    fputc('\'', f);
}

void gmp_cli_print_run_summary(FILE *f, const char *const *traces, size_t n)
{
    if (n == 0) {
        fprintf(f, "gpumemprof: no trace was written: no process of the command initialized CUDA "
                   "(or the agent could not start; see its messages above)\n");
        return;
    }
    for (size_t i = 0; i < n; i++)
        one_trace(f, traces[i]);
    /* outputs named after the first trace without ".zst" (and, for several, without its pid) */
    const char *t0 = traces[0];
    size_t bl = strlen(t0);
    if (bl > 4 && strcmp(t0 + bl - 4, ".zst") == 0)
        bl -= 4;
    if (n > 1) {
        size_t d = bl;
        while (d > 0 && t0[d - 1] >= '0' && t0[d - 1] <= '9')
            d--;
        if (d < bl && d > 1 && t0[d - 1] == '.' && t0[d - 2] != '/')
            bl = d - 1;
    }
    fprintf(f, "gpumemprof: next: gpumemprof convert");
    for (size_t i = 0; i < n; i++) {
        fputc(' ', f);
        shell_word(f, traces[i], strlen(traces[i]), "");
    }
    fputs(" --speedscope ", f);
    shell_word(f, t0, bl, ".speedscope.json");
    fputs(" --chrome ", f);
    shell_word(f, t0, bl, ".chrome.json");
    fputs("\ngpumemprof:   or: gpumemprof report ", f);
    shell_word(f, t0, strlen(t0), "");
    fputc('\n', f);
}
