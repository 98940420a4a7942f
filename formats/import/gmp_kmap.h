/* gmp_kmap: the snapshot importer's map of 64-bit keys to non-zero values (0: an empty slot), all
 * in this header, its functions static: gmp_import_torch.c, which includes it, is compiled as when
 * they were its own (their lookups are on the importer's hot path). */
#ifndef GMP_KMAP_H
#define GMP_KMAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Open addressing with linear probing, one array of slots (a lookup touches one cache line). It
 * places keys exactly as gmp_omap does (the same hash, first size 64, doubling past a load of 3/4,
 * moved in slot order), so a walk of the slots visits the keys in the same order as before: the
 * pre-window blocks found by pre_from_first_frees are written in that order. */
typedef struct kslot {
    uint64_t key, val;
} kslot;

typedef struct kmap {
    kslot *s;
    size_t cap, n;
} kmap;

static inline size_t kmap_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static const kslot *kmap_get(const kmap *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = kmap_hash(key) & mask;; i = (i + 1) & mask) {
        const kslot *e = &m->s[i];
        if (!e->val)
            return NULL;
        if (e->key == key)
            return e;
    }
}

/* Starts loading the first slot of key (a map much larger than the caches misses on most
 * lookups; the entry's other fields are read meanwhile). */
static inline void kmap_prefetch(const kmap *m, uint64_t key)
{
    if (m->cap) {
        /* through a volatile: GCC 12 at -O2 drops this prefetch when the address is hashed */
        const kslot *volatile slot = &m->s[kmap_hash(key) & (m->cap - 1)];
        __builtin_prefetch(slot);
    }
}

static int kmap_grow(kmap *m)
{
    size_t nc = m->cap ? m->cap * 2 : 64;
    kslot *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->s[i].val)
            continue;
        size_t j = kmap_hash(m->s[i].key) & (nc - 1);
        while (ns[j].val)
            j = (j + 1) & (nc - 1);
        ns[j] = m->s[i];
    }
    free(m->s);
    m->s = ns;
    m->cap = nc;
    return 0;
}

/* The slot of key; when absent, inserted with val (non-zero) and *fresh set. NULL: out of memory.
 */
static kslot *kmap_put(kmap *m, uint64_t key, uint64_t val, int *fresh)
{
    *fresh = 0;
    size_t mask = m->cap - 1, i = 0;
    if (m->cap) {
        for (i = kmap_hash(key) & mask; m->s[i].val; i = (i + 1) & mask)
            if (m->s[i].key == key)
                return &m->s[i];
    }
    if ((m->n + 1) * 4 > m->cap * 3) {
        if (kmap_grow(m) < 0)
            return NULL;
        mask = m->cap - 1;
        for (i = kmap_hash(key) & mask; m->s[i].val;)
            i = (i + 1) & mask;
    }
    m->s[i].key = key;
    m->s[i].val = val;
    m->n++;
    *fresh = 1;
    return &m->s[i];
}

static void kmap_free(kmap *m)
{
    free(m->s);
    memset(m, 0, sizeof *m);
}

#endif
