/* Unit test of collectors/gmp_handles (the agent's table of VMM handles, mappings, pools,
 * streams, captures): 200,000 random puts, gets and deletions over a small key space (so probe runs
 * collide and wrap around the table's end; keys chosen so that many share a home slot), checked
 * against a plain array after every operation batch; then every key deleted and the table empty.
 * Exit 0 when the table and the reference agree throughout. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_handles.h"

#define NKEYS 3000

static uint64_t key_of(unsigned i)
{
    /* multiples of a large power of two collide often in a power-of-two table */
    return ((uint64_t)(i % 37) << 40) | ((uint64_t)(i / 37) << 12) | 1;
}

int main(void)
{
    gmp_handles t;
    memset(&t, 0, sizeof t);
    static int present[NKEYS];
    static uint64_t value[NKEYS];
    uint64_t rng = 88172645463325252ull;
    size_t n = 0;
    for (int op = 0; op < 200000; op++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        unsigned k = (unsigned)(rng % NKEYS);
        unsigned what = (unsigned)(rng >> 40) % 3;
        if (what == 0) {
            gmp_handle_ent *e = gmp_handles_put(&t, key_of(k));
            if (!e) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
            if (!present[k]) {
                present[k] = 1;
                n++;
            }
            e->size = value[k] = rng;
        } else if (what == 1) {
            gmp_handles_del(&t, key_of(k));
            if (present[k]) {
                present[k] = 0;
                n--;
            }
        } else {
            const gmp_handle_ent *e = gmp_handles_get(&t, key_of(k));
            if (!!e != present[k] || (e && e->size != value[k])) {
                fprintf(stderr, "op %d: key %u: %s\n", op, k, e ? "wrong" : "missing");
                return 1;
            }
        }
        if (t.n != n) {
            fprintf(stderr, "op %d: %zu entries, want %zu\n", op, t.n, n);
            return 1;
        }
        if (op % 10000 == 0)
            for (unsigned i = 0; i < NKEYS; i++) {
                const gmp_handle_ent *e = gmp_handles_get(&t, key_of(i));
                if (!!e != present[i] || (e && e->size != value[i])) {
                    fprintf(stderr, "sweep at op %d: key %u disagrees\n", op, i);
                    return 1;
                }
            }
    }
    for (unsigned i = 0; i < NKEYS; i++)
        gmp_handles_del(&t, key_of(i));
    if (t.n != 0) {
        fprintf(stderr, "%zu entries left\n", t.n);
        return 1;
    }
    for (size_t i = 0; i < t.cap; i++)
        if (t.ent[i].used) {
            fprintf(stderr, "slot %zu still used\n", i);
            return 1;
        }
    gmp_handles_free(&t);
    printf("handles: ok\n");
    return 0;
}
