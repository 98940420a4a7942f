/* Unit tests of formats/base/gmp_map: gmp_omap against a plain array as the reference, through
 * insertions and backward-shift deletions in a table kept crowded (keys that share home slots). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_map.h"

#define NKEYS 4096

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static void test_put_get_del(void **state)
{
    (void)state;
    static uint64_t val[NKEYS]; /* key i: 0 absent, else its value */
    gmp_omap m = {0};
    assert_null(gmp_omap_get(&m, 1));
    assert_int_equal(gmp_omap_del(&m, 1), 0);
    size_t n = 0;
    for (int step = 0; step < 400000; step++) {
        uint64_t i = rnd() % NKEYS;
        uint64_t key = i * 0x100000000ull; /* many keys, few distinct home slots at first */
        if (rnd() % 3) {
            int fresh;
            uint64_t *v = gmp_omap_put(&m, key, &fresh);
            assert_non_null(v);
            assert_int_equal(fresh, val[i] == 0);
            if (fresh) {
                assert_int_equal(*v, 0);
                n++;
            } else {
                assert_int_equal(*v, val[i]);
            }
            *v = val[i] = (uint64_t)step + 1;
        } else {
            assert_int_equal(gmp_omap_del(&m, key), val[i] != 0);
            n -= val[i] != 0;
            val[i] = 0;
        }
        assert_int_equal(m.n, n);
        if (step % 50000 == 0) /* every key, present or not, is found as the reference says */
            for (uint64_t k = 0; k < NKEYS; k++) {
                uint64_t *v = gmp_omap_get(&m, k * 0x100000000ull);
                if (val[k])
                    assert_true(v && *v == val[k]);
                else
                    assert_null(v);
            }
    }
    for (uint64_t k = 0; k < NKEYS; k++)
        if (val[k])
            assert_int_equal(gmp_omap_del(&m, k * 0x100000000ull), 1);
    assert_int_equal(m.n, 0);
    gmp_omap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_del),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
