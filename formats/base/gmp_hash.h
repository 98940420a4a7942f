/* gmp_hash: a fast, non-cryptographic hash of a byte string, 8 bytes at a time, for the offline
 * tools' in-memory tables that key on content (interned strings, the frames memo). Only where an
 * entry is placed depends on it: callers compare the bytes themselves, so a collision costs a
 * probe, never a wrong answer. Not for anything that ends up in a file. */
#ifndef GMP_HASH_H
#define GMP_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Continues hash h over p[0..n) (p may be NULL when n is 0). */
static inline uint64_t gmp_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    h ^= (uint64_t)n * 0x9e3779b97f4a7c15ull;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n)
        memcpy(&w, s, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

#endif
