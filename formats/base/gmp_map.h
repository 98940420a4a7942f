/* gmp_map: an open-addressing hash map from 64-bit keys to 64-bit values (ids, addresses, tids,
 * indexes into arrays of the caller's records), for the offline tools: outputs, report, importers.
 * Zero-initialize a gmp_omap to start; it grows by doubling (load at most 3/4). */
#ifndef GMP_MAP_H
#define GMP_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct gmp_omap {
    uint64_t *keys, *vals;
    uint8_t *used;
    size_t cap, n;
} gmp_omap;

/* Where key's probe starts (its home slot is gmp_omap_hash(key) & (cap - 1)). */
static inline size_t gmp_omap_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

/* A hint for tables larger than the caches: fetches key's home slot ahead of a lookup. */
static inline void gmp_omap_prefetch(const gmp_omap *m, uint64_t key)
{
    if (!m->cap)
        return;
    size_t i = gmp_omap_hash(key) & (m->cap - 1);
    __builtin_prefetch(&m->used[i]);
    __builtin_prefetch(&m->keys[i]);
    __builtin_prefetch(&m->vals[i]);
}

/* Pointer to the value of key, or NULL. */
uint64_t *gmp_omap_get(const gmp_omap *m, uint64_t key);
/* Pointer to the value of key, inserted as 0 when absent (*fresh = 1); NULL when out of memory.
 * Pointers stay valid until the next insertion. */
uint64_t *gmp_omap_put(gmp_omap *m, uint64_t key, int *fresh);
/* Removes key (backward-shift deletion: no tombstones); 1 when it was there, else 0. Pointers
 * from get or put are invalid afterwards. */
int gmp_omap_del(gmp_omap *m, uint64_t key);
void gmp_omap_free(gmp_omap *m);

#endif
