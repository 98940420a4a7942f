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

/* Pointer to the value of key, or NULL. */
uint64_t *gmp_omap_get(const gmp_omap *m, uint64_t key);
/* Pointer to the value of key, inserted as 0 when absent (*fresh = 1); NULL when out of memory.
 * Pointers stay valid until the next insertion. */
uint64_t *gmp_omap_put(gmp_omap *m, uint64_t key, int *fresh);
void gmp_omap_free(gmp_omap *m);

#endif
