/* gmp_intern: a string-intern table for the offline tools: byte strings -> dense uint32_t ids
 * (0, 1, 2, ... in the order strings are first added), so that an output can write each distinct
 * string once (pprof's string table, speedscope's frames, the report's strings) and refer to it by
 * id. The bytes are kept back to back in one buffer, each followed by a NUL (a string without NUL
 * bytes of its own can be used as a C string), and string i is found by its offset (the next one's
 * offset gives its length). Lookups hash with gmp_hash_bytes (gmp_hash.h) and compare the bytes, so
 * a collision costs a probe, never a wrong id; ids never depend on the hash.
 *
 * Zero-initialize a gmp_intern to start. Pointers from gmp_intern_get stay valid until the next
 * gmp_intern_add (the buffer may move when it grows) or gmp_intern_free. */
#ifndef GMP_INTERN_H
#define GMP_INTERN_H

#include <stddef.h>
#include <stdint.h>

typedef struct gmp_intern {
    char *data;         /* the strings back to back, each followed by a NUL */
    size_t len, cap;    /* bytes of data used, allocated */
    uint64_t *off;      /* string i is data[off[i] .. off[i + 1] - 1); off[n] == len */
    uint32_t n, capoff; /* strings; entries of off allocated */
    uint32_t *slot;     /* open addressing over the ids: id + 1, 0 empty */
    size_t nslot;       /* a power of two, at least twice n */
    int oom;            /* an addition failed for want of memory (sticky) */
} gmp_intern;

/* The id of s[0..n) (s may be NULL when n is 0), added when new; UINT32_MAX when out of memory. */
uint32_t gmp_intern_add(gmp_intern *t, const void *s, size_t n);

/* The id of s[0..n) if it was added, else UINT32_MAX. */
uint32_t gmp_intern_find(const gmp_intern *t, const void *s, size_t n);

/* String id (id < gmp_intern_count(t)): its bytes, NUL-terminated, and its length in *n. */
static inline const char *gmp_intern_get(const gmp_intern *t, uint32_t id, size_t *n)
{
    *n = (size_t)(t->off[id + 1] - t->off[id] - 1);
    return t->data + t->off[id];
}

/* How many distinct strings were added: the ids are 0 .. count - 1. */
static inline uint32_t gmp_intern_count(const gmp_intern *t)
{
    return t->n;
}

/* Frees the table's memory and leaves it empty (zeroed). */
void gmp_intern_free(gmp_intern *t);

#endif
