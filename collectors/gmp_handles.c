/* gmp_handles: see gmp_handles.h. */
#include "gmp_handles.h"

#include <stdlib.h>

static size_t slot(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

gmp_handle_ent *gmp_handles_get(const gmp_handles *t, uint64_t key)
{
    if (!t->cap)
        return NULL;
    for (size_t i = slot(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        gmp_handle_ent *e = &t->ent[i];
        if (!e->used)
            return NULL;
        if (e->key == key)
            return e;
    }
}

static int grow(gmp_handles *t)
{
    size_t ncap = t->cap ? 2 * t->cap : 64;
    gmp_handle_ent *ne = calloc(ncap, sizeof *ne);
    if (!ne)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->ent[i].used)
            continue;
        size_t j = slot(t->ent[i].key, ncap);
        while (ne[j].used)
            j = (j + 1) & (ncap - 1);
        ne[j] = t->ent[i];
    }
    free(t->ent);
    t->ent = ne;
    t->cap = ncap;
    return 0;
}

gmp_handle_ent *gmp_handles_put(gmp_handles *t, uint64_t key)
{
    gmp_handle_ent *e = gmp_handles_get(t, key);
    if (e)
        return e;
    if ((t->n + 1) * 2 > t->cap && grow(t) < 0)
        return NULL;
    size_t i = slot(key, t->cap);
    while (t->ent[i].used)
        i = (i + 1) & (t->cap - 1);
    e = &t->ent[i];
    *e = (gmp_handle_ent){.key = key, .device = -1, .used = 1};
    t->n++;
    return e;
}

void gmp_handles_del(gmp_handles *t, uint64_t key)
{
    gmp_handle_ent *e = gmp_handles_get(t, key);
    if (!e)
        return;
    size_t i = (size_t)(e - t->ent);
    t->ent[i].used = 0;
    t->n--;
    /* backward shift: move later entries of the probe run into the hole */
    for (size_t j = (i + 1) & (t->cap - 1); t->ent[j].used; j = (j + 1) & (t->cap - 1)) {
        size_t home = slot(t->ent[j].key, t->cap);
        /* the entry at j may move to i when its home is not in (i, j] (cyclically) */
        int between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (between)
            continue;
        t->ent[i] = t->ent[j];
        t->ent[j].used = 0;
        i = j;
    }
}

void gmp_handles_free(gmp_handles *t)
{
    free(t->ent);
    t->ent = NULL;
    t->cap = t->n = 0;
}
