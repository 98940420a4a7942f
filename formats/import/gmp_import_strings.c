/* gmp_import_strings: the snapshot importer's string table (see gmp_import_strings.h). */
#include "gmp_import_strings.h"

#include <stdlib.h>
#include <string.h>

#include "gmp_hash.h"

/* Doubles a table of slots (index + 1) whose entries' hashes are hash_of(ctx, index); -1 when out
 * of memory. */
int gmp_import_slots_grow(uint32_t **slot, size_t *cap, size_t n,
                          uint64_t (*hash_of)(void *, size_t), void *ctx)
{
    size_t nc = *cap ? *cap * 2 : 1024;
    uint32_t *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t j = hash_of(ctx, i) & (nc - 1);
        while (ns[j])
            j = (j + 1) & (nc - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(*slot);
    *slot = ns;
    *cap = nc;
    return 0;
}

static uint64_t str_hash_at(void *ctx, size_t i)
{
    return ((const gmp_import_strtab *)ctx)->hash[i];
}

/* The index + 1 of the string bytes[0..n) in t, added when new: equal bytes get one index
 * (strings are deduplicated by content, so that equal frames are one frame and the trie's nodes
 * are the writer's stack nodes one for one: stack_of defines them without a lookup). 0: out of
 * memory. */
uint32_t gmp_import_str_intern(gmp_import_strtab *t, const char *bytes, uint32_t n)
{
    if ((t->n + 1) * 2 > t->hcap &&
        gmp_import_slots_grow(&t->slot, &t->hcap, t->n, str_hash_at, t) < 0)
        return 0;
    uint64_t h = gmp_hash_bytes(0, bytes, n);
    size_t j = h & (t->hcap - 1);
    for (uint32_t x; (x = t->slot[j]) != 0; j = (j + 1) & (t->hcap - 1))
        if (t->hash[x - 1] == h && t->len[x - 1] == n && memcmp(t->s[x - 1], bytes, n) == 0)
            return x;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 1024;
        char **ns = realloc(t->s, nc * sizeof *ns);
        if (ns)
            t->s = ns;
        uint32_t *nl = realloc(t->len, nc * sizeof *nl);
        if (nl)
            t->len = nl;
        uint32_t *nw = realloc(t->wid, nc * sizeof *nw);
        if (nw)
            t->wid = nw;
        uint64_t *nh = realloc(t->hash, nc * sizeof *nh);
        if (nh)
            t->hash = nh;
        if (!ns || !nl || !nw || !nh || t->n >= UINT32_MAX - 1)
            return 0;
        t->cap = nc;
    }
    char *c = malloc((size_t)n + 1);
    if (!c)
        return 0;
    memcpy(c, bytes, n);
    c[n] = 0;
    t->s[t->n] = c;
    t->len[t->n] = n;
    t->wid[t->n] = 0;
    t->hash[t->n] = h;
    t->n++;
    t->slot[j] = (uint32_t)t->n;
    return (uint32_t)t->n;
}
