#include "gmp_map.h"

#include <stdlib.h>
#include <string.h>

uint64_t *gmp_omap_get(const gmp_omap *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = gmp_omap_hash(key) & mask;; i = (i + 1) & mask) {
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
        size_t j = gmp_omap_hash(m->keys[i]) & (nc - 1);
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
    size_t mask = m->cap - 1, i = gmp_omap_hash(key) & mask;
    while (m->used[i])
        i = (i + 1) & mask;
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = 0;
    m->n++;
    *fresh = 1;
    return &m->vals[i];
}

int gmp_omap_del(gmp_omap *m, uint64_t key)
{
    uint64_t *v = gmp_omap_get(m, key);
    if (!v)
        return 0;
    size_t mask = m->cap - 1;
    size_t i = (size_t)(v - m->vals), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->used[j])
            break;
        size_t k = gmp_omap_hash(m->keys[j]) & mask;
        /* move j into the hole at i unless its home k lies cyclically in (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
    m->used[i] = 0;
    m->n--;
    return 1;
}

void gmp_omap_free(gmp_omap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}
