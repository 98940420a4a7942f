#include "gmp_map.h"

#include <stdlib.h>
#include <string.h>

static inline size_t omap_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

uint64_t *gmp_omap_get(const gmp_omap *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = omap_hash(key) & mask;; i = (i + 1) & mask) {
        if (!m->used[i])
            return NULL;
        if (m->keys[i] == key)
            return &m->vals[i];
    }
}

static int omap_grow(gmp_omap *m)
{
    size_t nc = m->cap ? m->cap * 2 : 64;
    uint64_t *k = calloc(nc, sizeof *k), *v = calloc(nc, sizeof *v);
    uint8_t *u = calloc(nc, 1);
    if (!k || !v || !u) {
        free(k);
        free(v);
        free(u);
        return 0;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i])
            continue;
        size_t j = omap_hash(m->keys[i]) & (nc - 1);
        while (u[j])
            j = (j + 1) & (nc - 1);
        u[j] = 1;
        k[j] = m->keys[i];
        v[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    free(m->used);
    m->keys = k;
    m->vals = v;
    m->used = u;
    m->cap = nc;
    return 1;
}

uint64_t *gmp_omap_put(gmp_omap *m, uint64_t key, int *fresh)
{
    *fresh = 0;
    uint64_t *v = gmp_omap_get(m, key);
    if (v)
        return v;
    if ((m->n + 1) * 4 > m->cap * 3 && !omap_grow(m))
        return NULL;
    size_t mask = m->cap - 1, i = omap_hash(key) & mask;
    while (m->used[i])
        i = (i + 1) & mask;
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = 0;
    m->n++;
    *fresh = 1;
    return &m->vals[i];
}

void gmp_omap_free(gmp_omap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}
