/* gmp_diff: profiles of two traces and their comparison (see gmp_diff.h). */
#include "gmp_diff.h"

#include <stdlib.h>
#include <string.h>

int64_t gmp_diff_delta(uint64_t a, uint64_t b)
{
    if (b >= a)
        return b - a > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(b - a);
    return a - b > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)(a - b);
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
            if (e[i].bytes > e[m - 1].bytes)
                e[m - 1].ref = e[i].ref;
            e[m - 1].bytes += e[i].bytes;
            e[m - 1].count += e[i].count;
            free(e[i].key);
        } else {
            e[m++] = e[i];
        }
    }
    return m;
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

gmp_diff_profile *gmp_diff_profile_new(const char *name)
{
    const char *path = name ? name : "";
    gmp_diff_profile *p = calloc(1, sizeof *p);
    if (p && !(p->path = dup_n(path, strlen(path)))) {
        free(p);
        p = NULL;
    }
    return p;
}

gmp_err gmp_diff_profile_add(gmp_diff_profile *p, gmp_diff_table tab, int32_t device, int32_t kind,
                             const char *key, size_t n, uint64_t bytes, uint64_t count,
                             uint32_t ref)
{
    if ((unsigned)tab >= GMP_DIFF_NTABLES)
        return GMP_ERR_ARG;
    if (p->n[tab] == p->cap[tab]) {
        size_t nc = p->cap[tab] ? 2 * p->cap[tab] : 64;
        gmp_diff_entry *q = realloc(p->tab[tab], nc * sizeof *q);
        if (!q)
            return GMP_ERR_NOMEM;
        p->tab[tab] = q;
        p->cap[tab] = nc;
    }
    gmp_diff_entry *e = &p->tab[tab][p->n[tab]];
    if (!(e->key = dup_n(key ? key : "", key ? n : 0)))
        return GMP_ERR_NOMEM;
    e->device = device;
    e->kind = kind;
    e->bytes = bytes;
    e->count = count;
    e->ref = ref;
    p->n[tab]++;
    return GMP_OK;
}

void gmp_diff_profile_finish(gmp_diff_profile *p)
{
    for (int t = 0; t < GMP_DIFF_NTABLES; t++)
        p->n[t] = merge_entries(p->tab[t], p->n[t]);
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
            r->a_ref = r->b_ref = UINT32_MAX;
            if (c <= 0) {
                r->a_bytes = ea[i].bytes;
                r->a_count = ea[i].count;
                r->a_ref = ea[i].ref;
                i++;
            }
            if (c >= 0) {
                r->b_bytes = eb[j].bytes;
                r->b_count = eb[j].count;
                r->b_ref = eb[j].ref;
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
