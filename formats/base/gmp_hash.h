/* gmp_hash: fast, non-cryptographic hashes for in-memory tables that key on content (interned
 * strings, the frames memo, the collectors' dedup tables). Only where an entry is placed depends on
 * them: callers compare the keys themselves, so a collision costs a probe, never a wrong answer.
 * Not for anything that ends up in a file.
 *  - gmp_hash_bytes: 8 bytes at a time, for the offline tools;
 *  - gmp_fnv1a, gmp_fnv1a_word: FNV-1a (64-bit), a byte or a word at a time: short keys, and code
 *    inside the profiled program, where it needs nothing but this header. */
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

#define GMP_FNV1A_OFFSET 14695981039346656037ull /* the FNV-1a 64-bit offset basis */
#define GMP_FNV1A_PRIME 1099511628211ull         /* the FNV 64-bit prime */

/* Continues FNV-1a hash h over the bytes p[0..n) (start with GMP_FNV1A_OFFSET). */
static inline uint64_t gmp_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= GMP_FNV1A_PRIME;
    }
    return h;
}

/* One FNV-1a step over a whole 64-bit word (keys made of integers). */
static inline uint64_t gmp_fnv1a_word(uint64_t h, uint64_t w)
{
    return (h ^ w) * GMP_FNV1A_PRIME;
}

#endif
