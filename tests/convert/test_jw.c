/* The JSON writer's numbers (formats/replay/gmp_output.h): gmp_jw_u64, gmp_jw_i64, gmp_jw_us and
 * gmp_jw_hex against snprintf, on the edges of every digit count and of the 32-bit and 10^8
 * splits, and on 200,000 random values of every size. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_output.h"

/* One writer for every call: its buffer (256 KiB) never fills with one number, so what a call
 * wrote is buf[0..len) (nothing reaches the FILE). */
static gmp_jw jw;

static void written(void (*fn)(gmp_jw *, uint64_t), uint64_t v, char *out, size_t n)
{
    jw.len = 0;
    fn(&jw, v);
    assert_true(jw.len < n);
    assert_int_equal(jw.written, 0);
    memcpy(out, jw.buf, jw.len);
    out[jw.len] = 0;
}

static void u64(gmp_jw *w, uint64_t v)
{
    gmp_jw_u64(w, v);
}
static void i64(gmp_jw *w, uint64_t v)
{
    gmp_jw_i64(w, (int64_t)v);
}
static void us(gmp_jw *w, uint64_t v)
{
    gmp_jw_us(w, (int64_t)v);
}
static void hex(gmp_jw *w, uint64_t v)
{
    gmp_jw_hex(w, v);
}

static void check(uint64_t v)
{
    char got[64], want[64];
    written(u64, v, got, sizeof got);
    snprintf(want, sizeof want, "%" PRIu64, v);
    if (strcmp(got, want))
        fail_msg("u64 %s: wrote %s", want, got);
    written(i64, v, got, sizeof got);
    snprintf(want, sizeof want, "%" PRId64, (int64_t)v);
    assert_string_equal(got, want);
    written(us, v, got, sizeof got);
    int64_t s = (int64_t)v;
    uint64_t a = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    snprintf(want, sizeof want, "%s%" PRIu64 ".%03u", s < 0 ? "-" : "", a / 1000,
             (unsigned)(a % 1000));
    assert_string_equal(got, want);
    written(hex, v, got, sizeof got);
    snprintf(want, sizeof want, "\"0x%" PRIx64 "\"", v);
    assert_string_equal(got, want);
}

static void test_edges(void **state)
{
    (void)state;
    uint64_t p = 1;
    for (int d = 0; d < 20; d++) { /* 10^d - 1, 10^d, 10^d + 1 */
        check(p - 1);
        check(p);
        check(p + 1);
        if (d < 19)
            p *= 10;
    }
    static const uint64_t more[] = {UINT32_MAX - 1,
                                    UINT32_MAX,
                                    (uint64_t)UINT32_MAX + 1,
                                    100000000ull * UINT32_MAX,
                                    100000000ull * UINT32_MAX + 99999999ull,
                                    100000000ull * ((uint64_t)UINT32_MAX + 1),
                                    UINT64_MAX - 1,
                                    UINT64_MAX,
                                    (uint64_t)INT64_MAX,
                                    (uint64_t)INT64_MIN,
                                    0x7f0000001200ull};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        check(more[i]);
}

static void test_random(void **state)
{
    (void)state;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13; /* xorshift64 */
        x ^= x >> 7;
        x ^= x << 17;
        check(x >> (x % 64)); /* every size */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_random),
    };
    FILE *devnull = fopen("/dev/null", "w");
    if (!devnull || gmp_jw_init(&jw, devnull) != GMP_OK)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    gmp_jw_free(&jw);
    fclose(devnull);
    return rc;
}
