/* gmp_livetab: the replay's table of live allocations, keyed by address (or by handle for VMM
 * physical memory), built for lookups that miss the cache. A replay looks up every ALLOC and FREE
 * by a hashed address, so once the live set holds tens of thousands of allocations each lookup of
 * a plain hash table is a cache miss. Here a small array of 2-byte slot descriptors (an 8-bit tag
 * of the hash and the slot's distance from its home) is kept apart from the entries: an ALLOC of
 * an address that is not live reads only descriptors (a few hundred KiB that stay in the cache),
 * a FREE reads one entry, and gmp_livetab_prefetch() fetches both ahead of use.
 *
 * Linear probing, at most 3/4 full, deletion by backward shift (no tombstones, so the table never
 * needs rebuilding while its size is steady). Distances of 254 and more are stored as "far" and
 * worked out from the key when needed, so that a trace built to collide is slow, never wrong. */
#ifndef GMP_LIVETAB_H
#define GMP_LIVETAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct gmp_live_ent { /* 48 bytes */
    uint64_t key;             /* address, or handle for VMM physical memory */
    uint64_t size, time_ns, handle;
    uint32_t site; /* index into the replay's sites */
    uint32_t tid;
    uint8_t flags; /* GMP_MEMF_* (the low 8 bits) */
} gmp_live_ent;

typedef struct gmp_livetab {
    uint16_t *meta; /* per slot: 0 empty, else tag << 8 | min(distance, 254) + 1 */
    gmp_live_ent *ent;
    size_t cap, n; /* cap: 0 or a power of two */
} gmp_livetab;

#define GMP_LIVETAB_FAR 255 /* meta's low byte for a distance of 254 or more */

/* Half of murmur3's finalizer (one multiply), a bijection. Addresses from an allocator are
 * regular (a stride, a few bases), and one multiply spreads such keys over the slots more evenly
 * than chance, which keeps clusters short; the full finalizer (two multiplies, random-like
 * spreading) would add a multiply to the replay's hottest path for no shorter clusters. Adversarial
 * keys only make clusters long (see GMP_LIVETAB_FAR), never wrong. */
static inline uint64_t gmp_livetab_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

/* The entry of key, or NULL. Valid until the next put or del. */
static inline gmp_live_ent *gmp_livetab_find(const gmp_livetab *t, uint64_t key)
{
    if (!t->n)
        return NULL;
    uint64_t h = gmp_livetab_hash(key);
    size_t mask = t->cap - 1;
    unsigned tag = (unsigned)(h >> 56);
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        unsigned m = t->meta[i];
        if (!m)
            return NULL;
        if ((m >> 8) == tag && t->ent[i].key == key)
            return &t->ent[i];
    }
}

/* Hints: fetch into the cache what a find, put or del of a key will read, for a key looked up
 * a few events from now; h is gmp_livetab_hash(key). prefetch_meta: its slot descriptors.
 * prefetch: its entry, found through the descriptors (call it after prefetch_meta had time to
 * work, or it waits for them). */
/* always_inline: GCC otherwise deems a function that only prefetches pure, and drops its calls */
#define GMP_LIVETAB_HINT static inline __attribute__((always_inline)) void

GMP_LIVETAB_HINT gmp_livetab_prefetch_meta(const gmp_livetab *t, uint64_t h)
{
    if (t->cap)
        __builtin_prefetch(&t->meta[(size_t)h & (t->cap - 1)]);
}

GMP_LIVETAB_HINT gmp_livetab_prefetch(const gmp_livetab *t, uint64_t h)
{
    if (!t->cap)
        return;
    size_t mask = t->cap - 1, i = (size_t)h & mask;
    unsigned tag = (unsigned)(h >> 56);
    for (unsigned d = 0; d < 8; d++, i = (i + 1) & mask) {
        unsigned m = t->meta[i];
        if (!m || (m >> 8) == tag)
            break; /* where the key is, or where it would go */
    }
    const char *p = (const char *)&t->ent[i];
    __builtin_prefetch(p);
    __builtin_prefetch(p + sizeof(gmp_live_ent) - 1);
}

/* The entry of key: the one in the table (*fresh = 0), or a new one (*fresh = 1, zeroed but for
 * its key), found and placed in one probe; NULL when out of memory. Valid until the next put or
 * del. */
gmp_live_ent *gmp_livetab_put(gmp_livetab *t, uint64_t key, int *fresh);

/* Removes e (a pointer from find or put); entries after it may move (an iteration by slot index
 * looks at the same index again). */
void gmp_livetab_del(gmp_livetab *t, gmp_live_ent *e);

/* Slot i (i < cap) holds an entry. */
static inline int gmp_livetab_used(const gmp_livetab *t, size_t i)
{
    return t->meta[i] != 0;
}

void gmp_livetab_free(gmp_livetab *t);

#endif
