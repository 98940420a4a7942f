/* gmp_out_counters: bounds a counter track of the Chrome output (a device's memory, its memory by
 * category) while keeping the curve's shape. The first GMP_CTR_EXACT changes of a track are
 * written as they come; the later ones are gathered into at most GMP_CTR_BUCKETS time buckets
 * (their width doubles, adjacent buckets merging, whenever the run outgrows them), and each bucket
 * is written at the trace's end as at most 2 + 2 x keys points: its first and last values and, for
 * each key, the points where it was lowest and highest. A track thus holds at most
 * GMP_CTR_EXACT + GMP_CTR_BUCKETS x (2 + 2 x keys) events, and every peak and trough survives. */
#ifndef GMP_OUT_COUNTERS_H
#define GMP_OUT_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"

#define GMP_CTR_EXACT 4096   /* changes written as they come */
#define GMP_CTR_BUCKETS 2048 /* time buckets after them: about a pixel each on a wide screen */
#define GMP_CTR_VALUES 6     /* values of a point, at most */
#define GMP_CTR_KEYS 2       /* keys whose extremes a bucket keeps, at most */

typedef struct gmp_ctr_point {
    uint64_t t;
    uint64_t v[GMP_CTR_VALUES];
} gmp_ctr_point;

typedef struct gmp_ctr_bucket gmp_ctr_bucket;

/* One track. keys: 0 (the sum of the values is the one key) or nv (each value is a key). */
typedef struct gmp_ctr_track {
    unsigned nv, nkeys;
    uint64_t seen;   /* changes offered */
    uint64_t merged; /* changes that went into buckets (not written as they came) */
    uint64_t t0, w;  /* the buckets' origin and width (ns) */
    gmp_ctr_bucket *b;
} gmp_ctr_track;

/* A fresh track of nv values whose extremes are kept per value (per_value) or for their sum. */
void gmp_ctr_init(gmp_ctr_track *k, unsigned nv, int per_value);

/* Offers a change at time t (not before the previous one). Returns 1 when the caller writes it
 * now, 0 when it was kept for gmp_ctr_flush, -1 when out of memory. */
int gmp_ctr_add(gmp_ctr_track *k, uint64_t t, const uint64_t *v);

/* Writes the kept points, in time order, through emit; then the track is empty again (its exact
 * budget spent). */
gmp_err gmp_ctr_flush(gmp_ctr_track *k, gmp_err (*emit)(void *ctx, const gmp_ctr_point *p),
                      void *ctx);

void gmp_ctr_free(gmp_ctr_track *k);

#endif
