/* Unit tests of formats/base/gmp_intern: dense ids in the order strings are first added, equal
 * bytes share an id, every string comes back whole and NUL-terminated through the table's growth.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_intern.h"

static void expect_str(const gmp_intern *t, uint32_t id, const void *s, size_t n)
{
    size_t l = 0;
    const char *p = gmp_intern_get(t, id, &l);
    assert_int_equal(l, n);
    if (n)
        assert_memory_equal(p, s, n);
    assert_int_equal(p[n], 0);
}

static void test_order_and_equality(void **state)
{
    (void)state;
    gmp_intern t = {0};
    assert_int_equal(gmp_intern_count(&t), 0);
    assert_int_equal(gmp_intern_find(&t, "a", 1), UINT32_MAX);
    assert_int_equal(gmp_intern_add(&t, "", 0), 0);
    assert_int_equal(gmp_intern_add(&t, "alpha", 5), 1);
    assert_int_equal(gmp_intern_add(&t, "beta", 4), 2);
    assert_int_equal(gmp_intern_add(&t, "alpha", 5), 1);
    assert_int_equal(gmp_intern_add(&t, NULL, 0), 0);
    /* a prefix, the same bytes with a NUL after them, bytes with NULs inside are all distinct */
    assert_int_equal(gmp_intern_add(&t, "alp", 3), 3);
    assert_int_equal(gmp_intern_add(&t, "alpha\0", 6), 4);
    assert_int_equal(gmp_intern_add(&t, "a\0b", 3), 5);
    assert_int_equal(gmp_intern_add(&t, "a\0c", 3), 6);
    assert_int_equal(gmp_intern_add(&t, "a\0b", 3), 5);
    assert_int_equal(gmp_intern_count(&t), 7);
    assert_int_equal(gmp_intern_find(&t, "beta", 4), 2);
    assert_int_equal(gmp_intern_find(&t, "bet", 3), UINT32_MAX);
    assert_int_equal(gmp_intern_find(&t, "", 0), 0);
    expect_str(&t, 0, "", 0);
    expect_str(&t, 1, "alpha", 5);
    expect_str(&t, 2, "beta", 4);
    expect_str(&t, 4, "alpha\0", 6);
    expect_str(&t, 6, "a\0c", 3);
    assert_string_equal(gmp_intern_get(&t, 1, &(size_t){0}), "alpha");
    assert_int_equal(t.oom, 0);
    gmp_intern_free(&t);
    assert_int_equal(gmp_intern_count(&t), 0);
    assert_null(t.data);
    assert_int_equal(gmp_intern_add(&t, "again", 5), 0); /* usable after free */
    gmp_intern_free(&t);
}

/* Far past the first sizes of the slots (1024), offsets (256) and bytes (4096); a string larger
 * than all the bytes before it. */
static void test_growth(void **state)
{
    (void)state;
    enum { N = 100000 };
    gmp_intern t = {0};
    char buf[64];
    for (uint32_t i = 0; i < N; i++) {
        int n = snprintf(buf, sizeof buf, "frame %u of %s", i, i % 2 ? "odd" : "even");
        assert_int_equal(gmp_intern_add(&t, buf, (size_t)n), i);
        if (i % 7 == 0) /* an earlier one again: no new id */
            assert_int_equal(gmp_intern_add(&t, "frame 0 of even", 15), 0);
    }
    size_t big = 1u << 20;
    char *b = malloc(big);
    assert_non_null(b);
    for (size_t i = 0; i < big; i++)
        b[i] = (char)('a' + i % 26);
    assert_int_equal(gmp_intern_add(&t, b, big), N);
    assert_int_equal(gmp_intern_add(&t, b, big - 1), N + 1);
    assert_int_equal(gmp_intern_count(&t), N + 2);
    for (uint32_t i = 0; i < N; i++) {
        int n = snprintf(buf, sizeof buf, "frame %u of %s", i, i % 2 ? "odd" : "even");
        expect_str(&t, i, buf, (size_t)n);
        assert_int_equal(gmp_intern_find(&t, buf, (size_t)n), i);
    }
    expect_str(&t, N, b, big);
    expect_str(&t, N + 1, b, big - 1);
    assert_int_equal(gmp_intern_find(&t, b, big), N);
    assert_int_equal(t.oom, 0);
    free(b);
    gmp_intern_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_equality),
        cmocka_unit_test(test_growth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
