/* gmp_out_counters: a counter track bounded by time buckets that keep extremes (see
 * gmp_out_counters.h). */
#include "gmp_out_counters.h"

#include <stdlib.h>
#include <string.h>

struct gmp_ctr_bucket {
    int used;
    gmp_ctr_point first, last;
    gmp_ctr_point mn[GMP_CTR_KEYS], mx[GMP_CTR_KEYS];
};

void gmp_ctr_init(gmp_ctr_track *k, unsigned nv, int per_value)
{
    memset(k, 0, sizeof *k);
    k->nv = nv > GMP_CTR_VALUES ? GMP_CTR_VALUES : nv;
    k->nkeys = per_value ? (k->nv < GMP_CTR_KEYS ? k->nv : GMP_CTR_KEYS) : 0;
}

static uint64_t key_of(const gmp_ctr_track *k, const gmp_ctr_point *p, unsigned j)
{
    if (k->nkeys)
        return p->v[j];
    uint64_t s = 0;
    for (unsigned i = 0; i < k->nv; i++)
        s += p->v[i];
    return s;
}

static unsigned nkeys(const gmp_ctr_track *k)
{
    return k->nkeys ? k->nkeys : 1;
}

/* b += later bucket c (everything in c is at or after everything in b) */
static void merge(const gmp_ctr_track *k, gmp_ctr_bucket *b, const gmp_ctr_bucket *c)
{
    if (!c->used)
        return;
    if (!b->used) {
        *b = *c;
        return;
    }
    b->last = c->last;
    for (unsigned j = 0; j < nkeys(k); j++) {
        /* ties keep the earlier point: the curve reaches the extreme there first */
        if (key_of(k, &c->mn[j], j) < key_of(k, &b->mn[j], j))
            b->mn[j] = c->mn[j];
        if (key_of(k, &c->mx[j], j) > key_of(k, &b->mx[j], j))
            b->mx[j] = c->mx[j];
    }
}

int gmp_ctr_add(gmp_ctr_track *k, uint64_t t, const uint64_t *v)
{
    k->seen++;
    if (k->seen <= GMP_CTR_EXACT)
        return 1;
    if (!k->b) {
        k->b = calloc(GMP_CTR_BUCKETS, sizeof *k->b);
        if (!k->b)
            return -1;
        k->t0 = t;
        k->w = 1; /* 1 ns: doubled as the run grows */
    }
    if (t < k->t0)
        t = k->t0; /* times never go back on one track; a late one joins the first bucket */
    uint64_t idx = (t - k->t0) / k->w;
    while (idx >= GMP_CTR_BUCKETS) {
        /* twice as wide: bucket i is the old buckets 2i and 2i+1 */
        for (size_t i = 0; i < GMP_CTR_BUCKETS / 2; i++) {
            gmp_ctr_bucket a = k->b[2 * i];
            merge(k, &a, &k->b[2 * i + 1]);
            k->b[i] = a;
        }
        memset(k->b + GMP_CTR_BUCKETS / 2, 0, GMP_CTR_BUCKETS / 2 * sizeof *k->b);
        k->w *= 2;
        idx = (t - k->t0) / k->w;
    }
    gmp_ctr_point p;
    memset(&p, 0, sizeof p);
    p.t = t;
    memcpy(p.v, v, k->nv * sizeof *v);
    gmp_ctr_bucket one = {1, p, p, {p, p}, {p, p}};
    merge(k, &k->b[idx], &one);
    k->merged++;
    return 0;
}

static int by_time(const void *a, const void *b)
{
    const gmp_ctr_point *x = *(const gmp_ctr_point *const *)a,
                        *y = *(const gmp_ctr_point *const *)b;
    return x->t < y->t ? -1 : x->t > y->t;
}

gmp_err gmp_ctr_flush(gmp_ctr_track *k, gmp_err (*emit)(void *ctx, const gmp_ctr_point *p),
                      void *ctx)
{
    gmp_err e = GMP_OK;
    for (size_t i = 0; k->b && i < GMP_CTR_BUCKETS && e == GMP_OK; i++) {
        gmp_ctr_bucket *b = &k->b[i];
        if (!b->used)
            continue;
        const gmp_ctr_point *pts[2 + 2 * GMP_CTR_KEYS];
        size_t n = 0;
        pts[n++] = &b->first;
        for (unsigned j = 0; j < nkeys(k); j++) {
            pts[n++] = &b->mn[j];
            pts[n++] = &b->mx[j];
        }
        pts[n++] = &b->last;
        qsort(pts, n, sizeof *pts, by_time);
        for (size_t j = 0; j < n && e == GMP_OK; j++) {
            /* one point per time: the same change kept for several reasons is written once */
            if (j && pts[j]->t == pts[j - 1]->t)
                continue;
            e = emit(ctx, pts[j]);
        }
    }
    free(k->b);
    k->b = NULL;
    return e;
}

void gmp_ctr_free(gmp_ctr_track *k)
{
    free(k->b);
    k->b = NULL;
}
