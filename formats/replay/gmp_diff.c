/* gmp_diff: profiles of two traces and their comparison (see gmp_diff.h). */
#include "gmp_diff.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_trace.h"

#define MAX_FRAMES 64 /* frames of a stack kept in its key */

int64_t gmp_diff_delta(uint64_t a, uint64_t b)
{
    if (b >= a)
        return b - a > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(b - a);
    return a - b > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)(a - b);
}

/* ---- growable string ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *s, const char *p, size_t n)
{
    if (s->oom)
        return;
    if (s->len + n + 1 > s->cap) {
        size_t nc = s->cap ? s->cap : 128;
        while (s->len + n + 1 > nc)
            nc *= 2;
        char *q = realloc(s->p, nc);
        if (!q) {
            s->oom = 1;
            return;
        }
        s->p = q;
        s->cap = nc;
    }
    memcpy(s->p + s->len, p, n);
    s->len += n;
    s->p[s->len] = 0;
}

static void sb_str(sbuf *s, const char *p)
{
    sb_add(s, p, strlen(p));
}

static char *sb_take(sbuf *s)
{
    if (!s->p && !s->oom)
        sb_add(s, "", 0);
    if (s->oom) {
        free(s->p);
        return NULL;
    }
    return s->p;
}

/* ---- profile ---- */

static char *dup_n(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        if (n)
            memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

static char *range_key(gmp_reader *r, uint32_t id)
{
    if (!id)
        return dup_n("", 0);
    size_t n = gmp_reader_range_path(r, id, NULL, 0);
    char *s = malloc(n + 1);
    if (s)
        gmp_reader_range_path(r, id, s, n + 1);
    return s;
}

/* "libtrain.so+0x1234 <- train.py:forward:42 <- 0x401000", innermost frame first. */
static char *stack_key(gmp_replay *rp, uint32_t id)
{
    sbuf s = {0};
    if (!id)
        return sb_take(&s);
    gmp_replay_frame fr[MAX_FRAMES];
    size_t n = gmp_replay_stack_frames(rp, id, fr, MAX_FRAMES);
    size_t shown = n < MAX_FRAMES ? n : MAX_FRAMES;
    char num[64];
    for (size_t i = 0; i < shown; i++) {
        const gmp_replay_frame *f = &fr[i];
        if (i)
            sb_str(&s, " <- ");
        if (f->kind == GMP_FRAME_PYTHON) {
            sb_add(&s, f->file.ptr, f->file.len);
            sb_str(&s, ":");
            sb_add(&s, f->function.ptr, f->function.len);
            snprintf(num, sizeof num, ":%" PRIu32, f->line);
            sb_str(&s, num);
        } else if (f->module) {
            const char *mp = f->module->path.ptr;
            size_t ml = f->module->path.len, b = ml;
            while (b > 0 && mp[b - 1] != '/')
                b--;
            sb_add(&s, mp + b, ml - b);
            snprintf(num, sizeof num, "+0x%" PRIx64, f->offset);
            sb_str(&s, num);
        } else {
            snprintf(num, sizeof num, "0x%" PRIx64, f->address);
            sb_str(&s, num);
        }
    }
    if (n > shown) {
        snprintf(num, sizeof num, " <- ... (%zu more)", n - shown);
        sb_str(&s, num);
    }
    return sb_take(&s);
}

static int entry_cmp(const void *x, const void *y)
{
    const gmp_diff_entry *a = x, *b = y;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return strcmp(a->key, b->key);
}

/* Sorts and merges equal keys (freeing the duplicates' strings); returns the new count. */
static size_t merge_entries(gmp_diff_entry *e, size_t n)
{
    if (!n)
        return 0;
    qsort(e, n, sizeof *e, entry_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && entry_cmp(&e[m - 1], &e[i]) == 0) {
            e[m - 1].bytes += e[i].bytes;
            e[m - 1].count += e[i].count;
            free(e[i].key);
        } else {
            e[m++] = e[i];
        }
    }
    return m;
}

static int holds_memory(uint32_t kind)
{
    return kind != GMP_MEM_VMM_MAPPING && kind != GMP_MEM_NVTX_REGION && kind != GMP_MEM_VA_RESERVE;
}

void gmp_diff_profile_free(gmp_diff_profile *p)
{
    if (!p)
        return;
    for (int t = 0; t < GMP_DIFF_NTABLES; t++) {
        for (size_t i = 0; i < p->n[t]; i++)
            free(p->tab[t][i].key);
        free(p->tab[t]);
    }
    for (size_t i = 0; i < p->ndev; i++)
        free(p->dev[i].name);
    free(p->dev);
    free(p->path);
    free(p);
}

static gmp_err collect(gmp_diff_profile *p, gmp_replay *rp, gmp_reader *r)
{
    size_t nd = gmp_replay_device_count(rp);
    p->dev = calloc(nd ? nd : 1, sizeof *p->dev);
    if (!p->dev)
        return GMP_ERR_NOMEM;
    for (size_t i = 0; i < nd; i++) {
        const gmp_replay_device *d = gmp_replay_device_at(rp, i);
        if (d->id < 0 && d->allocs == 0)
            continue; /* the host slot only when it has device memory */
        gmp_diff_devinfo *o = &p->dev[p->ndev];
        o->id = d->id;
        o->name = d->def ? dup_n(d->def->name.ptr, d->def->name.len) : dup_n("", 0);
        if (!o->name)
            return GMP_ERR_NOMEM;
        p->ndev++;
        o->total_bytes = d->def ? d->def->total_bytes : 0;
        o->peak_allocated = d->peak_allocated;
        o->peak_time_ns = d->peak_time_ns;
        o->peak_reserved = d->peak_reserved;
        o->allocs = d->allocs;
        o->leaked_bytes = d->allocated;
        o->leaked_allocations = d->live_count;
    }
    size_t ns = gmp_replay_site_count(rp);
    for (int t = 0; t < GMP_DIFF_NTABLES; t++) {
        p->tab[t] = calloc(ns ? ns : 1, sizeof *p->tab[t]);
        if (!p->tab[t])
            return GMP_ERR_NOMEM;
    }
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(rp, i);
        if (s->peak_count && gmp_mem_kind_is_device(s->kind)) {
            gmp_diff_entry *a = &p->tab[GMP_DIFF_BY_RANGE][p->n[GMP_DIFF_BY_RANGE]];
            a->key = range_key(r, s->range);
            if (!a->key)
                return GMP_ERR_NOMEM;
            p->n[GMP_DIFF_BY_RANGE]++;
            a->device = s->device;
            a->kind = -1;
            a->bytes = s->peak_bytes;
            a->count = s->peak_count;
            gmp_diff_entry *b = &p->tab[GMP_DIFF_BY_STACK][p->n[GMP_DIFF_BY_STACK]];
            b->key = stack_key(rp, s->stack);
            if (!b->key)
                return GMP_ERR_NOMEM;
            p->n[GMP_DIFF_BY_STACK]++;
            b->device = s->device;
            b->kind = -1;
            b->bytes = s->peak_bytes;
            b->count = s->peak_count;
        }
        if (s->live_count && holds_memory(s->kind)) {
            gmp_diff_entry *c = &p->tab[GMP_DIFF_LEAKS][p->n[GMP_DIFF_LEAKS]];
            c->key = range_key(r, s->range);
            if (!c->key)
                return GMP_ERR_NOMEM;
            p->n[GMP_DIFF_LEAKS]++;
            c->device = s->device;
            c->kind = (int32_t)s->kind;
            c->bytes = s->live_bytes;
            c->count = s->live_count;
        }
    }
    for (int t = 0; t < GMP_DIFF_NTABLES; t++)
        p->n[t] = merge_entries(p->tab[t], p->n[t]);
    return GMP_OK;
}

gmp_err gmp_diff_profile_load_reader(gmp_diff_profile **out, gmp_reader *r, const char *name,
                                     char *msg, size_t msglen)
{
    *out = NULL;
    if (msg && msglen)
        msg[0] = 0;
    const char *path = name ? name : "";
    gmp_replay *rp = NULL;
    gmp_err e = gmp_replay_new(&rp, r, NULL);
    if (e == GMP_OK)
        e = gmp_replay_run(rp);
    if (e != GMP_OK) {
        const char *m = rp ? gmp_replay_error(rp) : "";
        snprintf(msg, msglen, "%s", m && *m ? m : gmp_err_str(e));
        gmp_replay_free(rp);
        gmp_reader_close(r);
        return e;
    }
    gmp_diff_profile *p = calloc(1, sizeof *p);
    if (p) {
        p->path = dup_n(path, strlen(path));
        const gmp_replay_summary *s = gmp_replay_get_summary(rp);
        p->complete = s->complete;
        snprintf(p->completeness, sizeof p->completeness, "%s", s->completeness);
    }
    e = p && p->path ? collect(p, rp, r) : GMP_ERR_NOMEM;
    gmp_replay_free(rp);
    gmp_reader_close(r);
    if (e != GMP_OK) {
        snprintf(msg, msglen, "%s", gmp_err_str(e));
        gmp_diff_profile_free(p);
        return e;
    }
    *out = p;
    return GMP_OK;
}

/* ---- comparison ---- */

static uint64_t absdelta(const gmp_diff_row *r)
{
    int64_t d = r->delta_bytes;
    return d < 0 ? (d == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)-d) : (uint64_t)d;
}

static int row_cmp(const void *x, const void *y)
{
    const gmp_diff_row *a = x, *b = y;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    uint64_t da = absdelta(a), db = absdelta(b);
    if (da != db)
        return da > db ? -1 : 1;
    uint64_t ma = a->a_bytes > a->b_bytes ? a->a_bytes : a->b_bytes;
    uint64_t mb = b->a_bytes > b->b_bytes ? b->a_bytes : b->b_bytes;
    if (ma != mb)
        return ma > mb ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return strcmp(a->key, b->key);
}

void gmp_diff_free(gmp_diff *d)
{
    if (!d)
        return;
    for (int t = 0; t < GMP_DIFF_NTABLES; t++)
        free(d->rows[t]);
    free(d->dev);
    free(d);
}

gmp_err gmp_diff_compute(gmp_diff **out, const gmp_diff_profile *a, const gmp_diff_profile *b)
{
    *out = NULL;
    gmp_diff *d = calloc(1, sizeof *d);
    if (!d)
        return GMP_ERR_NOMEM;
    d->dev = calloc(a->ndev + b->ndev + 1, sizeof *d->dev);
    if (!d->dev) {
        gmp_diff_free(d);
        return GMP_ERR_NOMEM;
    }
    for (size_t i = 0, j = 0; i < a->ndev || j < b->ndev;) {
        gmp_diff_dev *o = &d->dev[d->ndev++];
        if (j == b->ndev || (i < a->ndev && a->dev[i].id < b->dev[j].id)) {
            *o = (gmp_diff_dev){a->dev[i].id, &a->dev[i], NULL};
            i++;
        } else if (i == a->ndev || b->dev[j].id < a->dev[i].id) {
            *o = (gmp_diff_dev){b->dev[j].id, NULL, &b->dev[j]};
            j++;
        } else {
            *o = (gmp_diff_dev){a->dev[i].id, &a->dev[i], &b->dev[j]};
            i++;
            j++;
        }
    }
    for (int t = 0; t < GMP_DIFF_NTABLES; t++) {
        const gmp_diff_entry *ea = a->tab[t], *eb = b->tab[t];
        size_t na = a->n[t], nb = b->n[t];
        gmp_diff_row *rows = calloc(na + nb + 1, sizeof *rows);
        if (!rows) {
            gmp_diff_free(d);
            return GMP_ERR_NOMEM;
        }
        size_t k = 0;
        for (size_t i = 0, j = 0; i < na || j < nb;) {
            gmp_diff_row *r = &rows[k++];
            int c = i == na ? 1 : j == nb ? -1 : entry_cmp(&ea[i], &eb[j]);
            const gmp_diff_entry *src = c <= 0 ? &ea[i] : &eb[j];
            r->device = src->device;
            r->kind = src->kind;
            r->key = src->key;
            if (c <= 0) {
                r->a_bytes = ea[i].bytes;
                r->a_count = ea[i].count;
                i++;
            }
            if (c >= 0) {
                r->b_bytes = eb[j].bytes;
                r->b_count = eb[j].count;
                j++;
            }
            r->delta_bytes = gmp_diff_delta(r->a_bytes, r->b_bytes);
            r->delta_count = gmp_diff_delta(r->a_count, r->b_count);
        }
        qsort(rows, k, sizeof *rows, row_cmp);
        d->rows[t] = rows;
        d->nrows[t] = k;
    }
    *out = d;
    return GMP_OK;
}
