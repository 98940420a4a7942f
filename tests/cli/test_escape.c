/* Unit tests of formats/base/gmp_escape: JSON and HTML escaping of arbitrary bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_escape.h"

static void check_json(const char *in, size_t n, const char *want)
{
    char buf[256];
    size_t len = gmp_json_escape(buf, sizeof buf, in, n);
    assert_int_equal(len, strlen(want));
    assert_string_equal(buf, want);
}

static void check_html(const char *in, size_t n, const char *want)
{
    char buf[256];
    size_t len = gmp_html_escape(buf, sizeof buf, in, n);
    assert_int_equal(len, strlen(want));
    assert_string_equal(buf, want);
}

#define J(lit, want) check_json(lit, sizeof(lit) - 1, want)
#define H(lit, want) check_html(lit, sizeof(lit) - 1, want)

static void test_json(void **state)
{
    (void)state;
    J("", "");
    J("cudaMalloc", "cudaMalloc");
    J("a\"b\\c", "a\\\"b\\\\c");
    J("\n\r\t\b\f", "\\n\\r\\t\\b\\f");
    J("\x01\x1f\x7f", "\\u0001\\u001f\\u007f");
    J("nul\0byte", "nul\\u0000byte");
    J("na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80", "na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80");
    /* invalid UTF-8: each byte of a bad sequence becomes \u00XX */
    J("\xff", "\\u00ff");
    J("\xc3", "\\u00c3");                                  /* truncated sequence at the end */
    J("\xc3(", "\\u00c3(");                                /* bad continuation */
    J("\xc0\xaf", "\\u00c0\\u00af");                       /* overlong '/' */
    J("\xe0\x80\xaf", "\\u00e0\\u0080\\u00af");            /* overlong 3-byte */
    J("\xed\xa0\x80", "\\u00ed\\u00a0\\u0080");            /* UTF-16 surrogate */
    J("\xf4\x90\x80\x80", "\\u00f4\\u0090\\u0080\\u0080"); /* > U+10FFFF */
    J("\x80x", "\\u0080x");                                /* lone continuation byte */
}

static void test_json_truncation(void **state)
{
    (void)state;
    char buf[6];
    size_t len = gmp_json_escape(buf, sizeof buf, "ab\"cdef", 7);
    assert_int_equal(len, 8);
    assert_string_equal(buf, "ab\\\"c");
    len = gmp_json_escape(NULL, 0, "\xff", 1); /* size query */
    assert_int_equal(len, 6);
}

static void test_json_fputs(void **state)
{
    (void)state;
    char *p = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&p, &n);
    assert_non_null(f);
    assert_int_equal(gmp_json_fputs(f, "x\"\xff", 3), 0);
    fclose(f);
    assert_string_equal(p, "\"x\\\"\\u00ff\"");
    free(p);
}

static void test_json_random_is_valid_utf8(void **state)
{
    (void)state;
    /* whatever the input, the output is valid UTF-8 without raw control characters */
    unsigned seed = 12345;
    char in[64], out[64 * 6 + 1];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = (size_t)(iter % 64);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            in[i] = (char)(seed >> 16);
        }
        size_t len = gmp_json_escape(out, sizeof out, in, n);
        assert_true(len < sizeof out);
        assert_true(gmp_utf8_valid(out, len));
        for (size_t i = 0; i < len; i++)
            assert_true((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
    }
}

static void test_html(void **state)
{
    (void)state;
    H("", "");
    H("<script>alert('x')&\"</script>",
      "&lt;script&gt;alert(&#39;x&#39;)&amp;&quot;&lt;/script&gt;");
    H("a\tb\nc", "a\tb\nc");
    H("\x01\x7f", "&#x01;&#x7f;");
    H("nul\0", "nul&#xFFFD;");
    H("na\xc3\xafve", "na\xc3\xafve");
    H("\xff\xc3", "&#xFFFD;&#xFFFD;");
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(gmp_utf8_valid("", 0));
    assert_true(gmp_utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
    assert_false(gmp_utf8_valid("\xc3", 1));
    assert_false(gmp_utf8_valid("\xf5\x80\x80\x80", 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json),       cmocka_unit_test(test_json_truncation),
        cmocka_unit_test(test_json_fputs), cmocka_unit_test(test_json_random_is_valid_utf8),
        cmocka_unit_test(test_html),       cmocka_unit_test(test_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
