/* gmp_intern: the string-intern table (gmp_intern.h). */
#include "gmp_intern.h"

#include <stdlib.h>
#include <string.h>

#include "gmp_hash.h"

/* The slot that holds s[0..n)'s id (h its hash), or the empty slot where it would go. */
static size_t probe(const gmp_intern *t, uint64_t h, const void *s, size_t n)
{
    size_t mask = t->nslot - 1;
    size_t k = (size_t)h & mask;
    for (; t->slot[k]; k = (k + 1) & mask) {
        size_t l;
        const char *p = gmp_intern_get(t, t->slot[k] - 1, &l);
        if (l == n && (n == 0 || memcmp(p, s, n) == 0))
            break;
    }
    return k;
}

/* Keeps the load at most 1/2 with one more string. 0, or -1 when out of memory. */
static int slots_room(gmp_intern *t)
{
    if ((size_t)(t->n + 1) * 2 <= t->nslot)
        return 0;
    size_t nc = t->nslot ? t->nslot * 2 : 1024;
    uint32_t *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    for (uint32_t i = 0; i < t->n; i++) {
        size_t l;
        const char *p = gmp_intern_get(t, i, &l);
        size_t k = (size_t)gmp_hash_bytes(0, p, l) & (nc - 1);
        while (ns[k])
            k = (k + 1) & (nc - 1);
        ns[k] = i + 1;
    }
    free(t->slot);
    t->slot = ns;
    t->nslot = nc;
    return 0;
}

uint32_t gmp_intern_find(const gmp_intern *t, const void *s, size_t n)
{
    if (!t->n)
        return UINT32_MAX;
    size_t k = probe(t, gmp_hash_bytes(0, s, n), s, n);
    return t->slot[k] ? t->slot[k] - 1 : UINT32_MAX;
}

uint32_t gmp_intern_add(gmp_intern *t, const void *s, size_t n)
{
    uint64_t h = gmp_hash_bytes(0, s, n);
    if (t->n) {
        size_t k = probe(t, h, s, n);
        if (t->slot[k])
            return t->slot[k] - 1;
    }
    /* new: s is not inside data (it would have been found), so data may move */
    if (t->n >= UINT32_MAX - 1 || n > SIZE_MAX / 4 - t->len || slots_room(t) < 0)
        goto oom;
    if (t->n + 1 >= t->capoff) { /* off holds n + 1 offsets */
        uint32_t nc = t->capoff ? (t->capoff > UINT32_MAX / 2 ? UINT32_MAX : t->capoff * 2) : 256;
        uint64_t *no = realloc(t->off, (size_t)nc * sizeof *no);
        if (!no)
            goto oom;
        t->off = no;
        t->capoff = nc;
    }
    if (t->cap - t->len < n + 1) {
        size_t nc = t->cap ? t->cap : 4096;
        while (nc - t->len < n + 1)
            nc *= 2;
        char *nd = realloc(t->data, nc);
        if (!nd)
            goto oom;
        t->data = nd;
        t->cap = nc;
    }
    size_t k = probe(t, h, s, n); /* the empty slot (the slots may have grown) */
    if (!t->n)
        t->off[0] = 0;
    if (n)
        memcpy(t->data + t->len, s, n);
    t->data[t->len + n] = 0;
    t->len += n + 1;
    t->off[t->n + 1] = t->len;
    t->slot[k] = ++t->n;
    return t->n - 1;
oom:
    t->oom = 1;
    return UINT32_MAX;
}

void gmp_intern_free(gmp_intern *t)
{
    free(t->data);
    free(t->off);
    free(t->slot);
    memset(t, 0, sizeof *t);
}
