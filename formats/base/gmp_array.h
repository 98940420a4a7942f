/* gmp_array: growing an array indexed by dense ids (string, stack node and site indexes of a trace)
 * so that an index fits, the new elements zeroed (zero meaning "not computed yet"), for the
 * offline tools' per-id caches. */
#ifndef GMP_ARRAY_H
#define GMP_ARRAY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Makes *arr (of *cap elements of esz bytes) hold index i: its capacity doubles from 1024 until i
 * fits; the new elements are zeroed. 0, or -1 when out of memory or too big (then *arr and *cap
 * are unchanged and still valid). */
static inline int gmp_array_cover(void **arr, size_t *cap, size_t i, size_t esz)
{
    if (i < *cap)
        return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc <= i) {
        if (nc > SIZE_MAX / 2)
            return -1;
        nc *= 2;
    }
    if (nc > SIZE_MAX / esz)
        return -1;
    unsigned char *p = realloc(*arr, nc * esz);
    if (!p)
        return -1;
    memset(p + *cap * esz, 0, (nc - *cap) * esz);
    *arr = p;
    *cap = nc;
    return 0;
}

#endif
