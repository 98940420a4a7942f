#include "gmp_livetab.h"

#include <stdlib.h>
#include <string.h>

static inline unsigned meta_of(unsigned tag, size_t dist)
{
    return tag << 8 | (unsigned)(dist < GMP_LIVETAB_FAR - 1 ? dist + 1 : GMP_LIVETAB_FAR);
}

/* Distance of slot i from its home. */
static inline size_t dist_of(const gmp_livetab *t, size_t i)
{
    unsigned d = t->meta[i] & 0xff;
    if (d != GMP_LIVETAB_FAR)
        return d - 1;
    size_t home = (size_t)gmp_livetab_hash(t->ent[i].key) & (t->cap - 1);
    return (i - home) & (t->cap - 1);
}

/* Places an entry known to be absent (when the table grows); the table has room. Returns its
 * slot. */
static size_t place(gmp_livetab *t, uint64_t key)
{
    uint64_t h = gmp_livetab_hash(key);
    size_t mask = t->cap - 1, home = (size_t)h & mask, i = home;
    while (t->meta[i])
        i = (i + 1) & mask;
    t->meta[i] = (uint16_t)meta_of((unsigned)(h >> 56), (i - home) & mask);
    return i;
}

static int grow(gmp_livetab *t)
{
    size_t nc = t->cap ? t->cap * 2 : 64;
    if (nc > SIZE_MAX / sizeof(gmp_live_ent))
        return -1;
    gmp_livetab nt = {calloc(nc, sizeof *nt.meta), malloc(nc * sizeof *nt.ent), nc, t->n};
    if (!nt.meta || !nt.ent) {
        free(nt.meta);
        free(nt.ent);
        return -1;
    }
    for (size_t i = 0; i < t->cap; i++)
        if (t->meta[i])
            nt.ent[place(&nt, t->ent[i].key)] = t->ent[i];
    free(t->meta);
    free(t->ent);
    *t = nt;
    return 0;
}

gmp_live_ent *gmp_livetab_put(gmp_livetab *t, uint64_t key, int *fresh)
{
    if ((t->n + 1) * 4 > t->cap * 3 && grow(t) < 0)
        return NULL;
    uint64_t h = gmp_livetab_hash(key);
    size_t mask = t->cap - 1, home = (size_t)h & mask, i = home;
    unsigned tag = (unsigned)(h >> 56);
    for (unsigned m; (m = t->meta[i]) != 0; i = (i + 1) & mask)
        if ((m >> 8) == tag && t->ent[i].key == key) {
            *fresh = 0;
            return &t->ent[i];
        }
    t->meta[i] = (uint16_t)meta_of(tag, (i - home) & mask);
    gmp_live_ent *e = &t->ent[i];
    memset(e, 0, sizeof *e);
    e->key = key;
    t->n++;
    *fresh = 1;
    return e;
}

void gmp_livetab_del(gmp_livetab *t, gmp_live_ent *e)
{
    size_t mask = t->cap - 1, i = (size_t)(e - t->ent), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!t->meta[j])
            break;
        size_t d = dist_of(t, j);
        if (!d)
            continue; /* at its home: stays */
        size_t home = (j - d) & mask;
        /* move j into the hole at i unless its home lies cyclically in (i, j] */
        int stay = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stay)
            continue;
        t->ent[i] = t->ent[j];
        t->meta[i] = (uint16_t)meta_of(t->meta[j] >> 8, (i - home) & mask);
        i = j;
    }
    t->meta[i] = 0;
    t->n--;
}

void gmp_livetab_free(gmp_livetab *t)
{
    free(t->meta);
    free(t->ent);
    memset(t, 0, sizeof *t);
}
