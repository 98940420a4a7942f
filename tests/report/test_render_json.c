/* test_render_json: the JSON renderer (formats/report/gmp_render_json.c) on small documents, each
 * compared with its exact output: ITEM arrays gathered across other blocks and keyless sections,
 * what is left out (no key, GMP_DOC_VIEW, keyless verdicts and their children), DATA included,
 * every value type (numbers that read back exactly, no NaN), verdict text, series, stacks in
 * indented and one-line places, an empty document, a stream error. The sample document with every
 * block kind is checked by check_render.py (json_golden, json_valid). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_doc.h"
#include "gmp_render.h"

#define S(lit) ((gmp_str){(lit), (uint32_t)(sizeof(lit) - 1)})

/* The document as JSON (malloc'd, NUL-terminated). */
static char *render(const gmp_doc *d)
{
    assert_int_equal(gmp_doc_error(d), GMP_OK);
    FILE *f = tmpfile();
    assert_non_null(f);
    gmp_render_opts o = {0};
    assert_int_equal(gmp_render_json(d, f, &o), GMP_OK);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    return b;
}

static void expect(gmp_doc *d, const char *want)
{
    char *got = render(d);
    if (strcmp(got, want))
        print_error("got:\n%s\nexpected:\n%s\n", got, want);
    assert_string_equal(got, want);
    free(got);
    gmp_doc_free(d);
}

static void kv1(gmp_doc *d, gmp_doc_block *parent, const char *key, uint64_t n)
{
    gmp_doc_item_add(d, gmp_doc_kv(d, parent), "n", 0, "%v", gmp_dv_k(gmp_dv_count(n), key));
}

static void test_empty(void **state)
{
    (void)state;
    expect(gmp_doc_new(), "{}\n");
}

/* Siblings with one key make one array where the first is, through other blocks and keyless
 * sections; a keyed section is an object; a keyless one gives its heading's keyed values and its
 * children to the enclosing object. */
static void test_items(void **state)
{
    (void)state;
    gmp_doc *d = gmp_doc_new();
    gmp_doc_block *r = gmp_doc_root(d);
    gmp_doc_block *a =
        gmp_doc_section(d, r, "a", GMP_DOC_ITEM, "A %v", gmp_dv_k(gmp_dv_int(1), "i"));
    kv1(d, a, "x", 1);
    kv1(d, r, "y", 2);
    gmp_doc_block *m = gmp_doc_section(d, r, NULL, 0, "M %v", gmp_dv_k(gmp_dv_lit("m"), "m"));
    gmp_doc_block *b = gmp_doc_section(d, m, "b", GMP_DOC_ITEM, "B");
    kv1(d, b, "x", 4);
    a = gmp_doc_section(d, m, "a", GMP_DOC_ITEM, "A");
    kv1(d, a, "x", 2);
    gmp_doc_block *o = gmp_doc_section(d, r, "o", 0, "O");
    a = gmp_doc_section(d, o, "a", GMP_DOC_ITEM, "A in o");
    kv1(d, o, "z", 5);
    a = gmp_doc_section(d, r, "a", GMP_DOC_ITEM, "A");
    kv1(d, a, "x", 3);
    gmp_doc_section(d, r, "e", 0, "E");
    expect(d, "{\n"
              "  \"a\": [\n"
              "    {\n"
              "      \"i\": 1,\n"
              "      \"x\": 1\n"
              "    },\n"
              "    {\n"
              "      \"x\": 2\n"
              "    },\n"
              "    {\n"
              "      \"x\": 3\n"
              "    }\n"
              "  ],\n"
              "  \"y\": 2,\n"
              "  \"m\": \"m\",\n"
              "  \"b\": [\n"
              "    {\n"
              "      \"x\": 4\n"
              "    }\n"
              "  ],\n"
              "  \"o\": {\n"
              "    \"a\": [\n"
              "      {}\n"
              "    ],\n"
              "    \"z\": 5\n"
              "  },\n"
              "  \"e\": {}\n"
              "}\n");
}

/* What is not in the JSON: no key, VIEW items, values, columns and blocks, keyless verdicts with
 * their children; DATA is. A keyed KV is an object. */
static void test_left_out(void **state)
{
    (void)state;
    gmp_doc *d = gmp_doc_new();
    gmp_doc_block *r = gmp_doc_root(d);
    gmp_doc_block *kv = gmp_doc_kv(d, r);
    gmp_doc_item_add(d, kv, "shown", 0, "%v of %v (%v)", gmp_dv_k(gmp_dv_count(1), "a"),
                     gmp_dv_count(2), gmp_dv_k(gmp_dv_f(gmp_dv_count(3), GMP_DOC_VIEW), "v"));
    gmp_doc_item_add(d, kv, "view", GMP_DOC_VIEW, "%v", gmp_dv_k(gmp_dv_count(4), "w"));
    gmp_doc_item_add(d, kv, "data", GMP_DOC_DATA, "%v", gmp_dv_k(gmp_dv_count(5), "b"));
    gmp_doc_block *k = gmp_doc_kv(d, r);
    k->key = "kv";
    gmp_doc_item_add(d, k, "c", 0, "%v", gmp_dv_k(gmp_dv_count(6), "c"));
    static const gmp_doc_col cols[] = {
        {"t", NULL, GMP_DOC_COUNT, 0},
        {"u", "u", GMP_DOC_COUNT, GMP_DOC_VIEW},
        {"v", "v", GMP_DOC_COUNT, GMP_DOC_DATA},
    };
    gmp_doc_val *row = gmp_doc_row(d, gmp_doc_table(d, r, NULL, cols, 3));
    row[2] = gmp_dv_count(7);
    gmp_doc_block *t = gmp_doc_table(d, r, "t", cols, 3);
    row = gmp_doc_row(d, t);
    row[0] = gmp_dv_count(8);
    row[1] = gmp_dv_count(9);
    row[2] = gmp_dv_count(10);
    gmp_doc_row(d, t);
    gmp_doc_block *hid = gmp_doc_section(d, r, "hidden", GMP_DOC_VIEW, "H");
    kv1(d, hid, "h", 11);
    hid = gmp_doc_section(d, r, NULL, GMP_DOC_VIEW, "H");
    kv1(d, hid, "h2", 12);
    gmp_doc_block *v =
        gmp_doc_verdict(d, r, NULL, GMP_DOC_PROBLEM, "bad %v", gmp_dv_k(gmp_dv_count(13), "n"));
    kv1(d, v, "inside", 14);
    gmp_doc_notice(d, r, NULL, GMP_DOC_INFO, "and %v more", gmp_dv_count(3));
    expect(d, "{\n"
              "  \"a\": 1,\n"
              "  \"b\": 5,\n"
              "  \"kv\": {\n"
              "    \"c\": 6\n"
              "  },\n"
              "  \"t\": [\n"
              "    {\"v\":10},\n"
              "    {\"v\":null}\n"
              "  ]\n"
              "}\n");
}

/* Every value type. Numbers read back exactly with the fewest of 15, 16, 17 digits; not finite:
 * null (1/3: 16 digits, 0.1 + 0.2: 17); integral values keep a fraction (3.0). */
static void test_values(void **state)
{
    (void)state;
    gmp_doc *d = gmp_doc_new();
    gmp_doc_block *kv = gmp_doc_kv(d, gmp_doc_root(d));
    static const gmp_doc_frame fr[] = {
        {.python = 1, .function = S("f\"\n"), .line = 3},
        {.module = S("m.so"), .offset = 16, .address = 0x1010, .unknown = S("no symbol")},
    };
    static const gmp_doc_stack st = {2, fr, 0, 0};
    gmp_doc_item_add(
        d, kv, "v", 0, "%v%v%v%v%v%v%v%v%v%v%v%v%v%v%v", gmp_dv_k(gmp_dv_none(), "none"),
        gmp_dv_k(gmp_dv_lit("lit"), "lit"), gmp_dv_k(gmp_dv_str(S(""), "(none)"), "str_empty"),
        gmp_dv_k(gmp_dv_str(S("\x01\xc3\xa9\xff"), ""), "str"),
        gmp_dv_k(gmp_dv_bytes(UINT64_MAX), "bytes"), gmp_dv_k(gmp_dv_sbytes(INT64_MIN), "sbytes"),
        gmp_dv_k(gmp_dv_count(0), "count"), gmp_dv_k(gmp_dv_int(-1), "int"),
        gmp_dv_k(gmp_dv_time(5, 10), "time"), gmp_dv_k(gmp_dv_dur(7), "dur"),
        gmp_dv_k(gmp_dv_bool(1), "bool"), gmp_dv_k(gmp_dv_device(-1), "device"),
        gmp_dv_k(gmp_dv_hex(0xbeef), "hex"), gmp_dv_k(gmp_dv_stack(&st), "stack"),
        gmp_dv_k(gmp_dv_stack(NULL), "no_stack"));
    gmp_doc_item_add(d, kv, "r", 0, "%v%v%v%v%v%v%v%v%v", gmp_dv_k(gmp_dv_pct(82.8), "pct"),
                     gmp_dv_k(gmp_dv_real(3.0), "three"), gmp_dv_k(gmp_dv_real(0.1 + 0.2), "sum"),
                     gmp_dv_k(gmp_dv_real(1.0 / 3), "third"), gmp_dv_k(gmp_dv_real(1e300), "big"),
                     gmp_dv_k(gmp_dv_real(-0.0), "mzero"), gmp_dv_k(gmp_dv_real(NAN), "nan"),
                     gmp_dv_k(gmp_dv_pct(INFINITY), "inf"),
                     gmp_dv_k(gmp_dv_real(-INFINITY), "minf"));
    expect(d, "{\n"
              "  \"none\": null,\n"
              "  \"lit\": \"lit\",\n"
              "  \"str_empty\": null,\n"
              "  \"str\": \"\\u0001\xc3\xa9\\u00ff\",\n"
              "  \"bytes\": 18446744073709551615,\n"
              "  \"sbytes\": -9223372036854775808,\n"
              "  \"count\": 0,\n"
              "  \"int\": -1,\n"
              "  \"time\": 5,\n"
              "  \"dur\": 7,\n"
              "  \"bool\": true,\n"
              "  \"device\": -1,\n"
              "  \"hex\": \"0xbeef\",\n"
              "  \"stack\": [\n"
              "    {\"function\":\"f\\\"\\n\",\"file\":\"\",\"line\":3},\n"
              "    {\"function\":null,\"file\":null,\"line\":0,\"module\":\"m.so+0x10\","
              "\"address\":\"0x1010\",\"unknown\":\"no symbol\"}\n"
              "  ],\n"
              "  \"no_stack\": null,\n"
              "  \"pct\": 82.8,\n"
              "  \"three\": 3.0,\n"
              "  \"sum\": 0.30000000000000004,\n"
              "  \"third\": 0.3333333333333333,\n"
              "  \"big\": 1e+300,\n"
              "  \"mzero\": -0.0,\n"
              "  \"nan\": null,\n"
              "  \"inf\": null,\n"
              "  \"minf\": null\n"
              "}\n");
}

/* A verdict: severity, the line as shown (DATA values left out, an empty STR as its `none`,
 * numbers formatted, trace bytes escaped once), its keyed values and its children's members; a
 * keyed notice in an ITEM array; a stack block. */
static void test_verdict(void **state)
{
    (void)state;
    gmp_doc *d = gmp_doc_new();
    gmp_doc_block *r = gmp_doc_root(d);
    gmp_doc_block *v = gmp_doc_verdict(d, r, "finding", GMP_DOC_WARNING, "%v grew by %v in %v%v",
                                       gmp_dv_k(gmp_dv_str(S("a\"<b>\n"), "?"), "range"),
                                       gmp_dv_k(gmp_dv_bytes(1536), "bytes"),
                                       gmp_dv_k(gmp_dv_str(S(""), "(no range)"), "parent"),
                                       gmp_dv_k(gmp_dv_f(gmp_dv_count(9), GMP_DOC_DATA), "hidden"));
    kv1(d, v, "reps", 4);
    static const gmp_doc_frame fr[] = {{.python = 1, .function = S("g"), .file = S("x.py")}};
    static const gmp_doc_stack st = {1, fr, 0, 0};
    gmp_doc_stack_block(d, v, "stack", &st);
    gmp_doc_block *n = gmp_doc_notice(d, r, "notes", GMP_DOC_INFO, "one");
    n->flags |= GMP_DOC_ITEM;
    n = gmp_doc_notice(d, r, "notes", GMP_DOC_OK, "two %v", gmp_dv_pct(50));
    n->flags |= GMP_DOC_ITEM;
    expect(d, "{\n"
              "  \"finding\": {\n"
              "    \"severity\": \"warning\",\n"
              "    \"text\": \"a\\\"<b>\\n grew by 1.50 KiB in (no range)\",\n"
              "    \"range\": \"a\\\"<b>\\n\",\n"
              "    \"bytes\": 1536,\n"
              "    \"parent\": null,\n"
              "    \"hidden\": 9,\n"
              "    \"reps\": 4,\n"
              "    \"stack\": [\n"
              "      {\"function\":\"g\",\"file\":\"x.py\",\"line\":0}\n"
              "    ]\n"
              "  },\n"
              "  \"notes\": [\n"
              "    {\n"
              "      \"severity\": \"info\",\n"
              "      \"text\": \"one\"\n"
              "    },\n"
              "    {\n"
              "      \"severity\": \"ok\",\n"
              "      \"text\": \"two 50.0%\"\n"
              "    }\n"
              "  ]\n"
              "}\n");
}

/* A series: the time of a point is its start; keyless columns left out; a DOTS value of 0 is null;
 * no lanes or marks: no members for them. A table cell's stack is on the row's line. */
static void test_series_and_rows(void **state)
{
    (void)state;
    gmp_doc *d = gmp_doc_new();
    gmp_doc_block *r = gmp_doc_root(d);
    static const gmp_doc_scol sc[] = {
        {"a", "a", GMP_DOC_S_LINE, 0},
        {"b", NULL, GMP_DOC_S_LINE, 0},
        {"c", "c", GMP_DOC_S_DOTS, 0},
    };
    gmp_doc_block *s = gmp_doc_series(d, r, "s", sc, 3, 2);
    s->x0 = 100;
    s->bucket_ns = 10;
    s->x[0] = 110;
    s->x[1] = 120;
    const uint64_t y[] = {1, 2, 0, 4, 5, 6};
    memcpy(s->y, y, sizeof y);
    gmp_doc_series(d, r, "empty", sc, 0, 0);
    static const gmp_doc_col cols[] = {{"s", "stack", GMP_DOC_STACK, 0}};
    static const gmp_doc_frame fr[] = {{.python = 1, .function = S("g"), .file = S("x.py")},
                                       {.python = 1, .function = S("h"), .file = S("y.py")}};
    static const gmp_doc_stack st = {2, fr, 0, 0};
    gmp_doc_block *t = gmp_doc_table(d, r, "rows", cols, 1);
    gmp_doc_row(d, t)[0] = gmp_dv_stack(&st);
    gmp_doc_row(d, t)[0] = gmp_dv_stack(NULL);
    expect(d, "{\n"
              "  \"s\": {\n"
              "    \"bucket_ns\": 10,\n"
              "    \"columns\": [\"time_ns\",\"a\",\"c\"],\n"
              "    \"points\": [\n"
              "      [100,1,null],\n"
              "      [110,4,6]\n"
              "    ]\n"
              "  },\n"
              "  \"empty\": {\n"
              "    \"bucket_ns\": 0,\n"
              "    \"columns\": [\"time_ns\"],\n"
              "    \"points\": []\n"
              "  },\n"
              "  \"rows\": [\n"
              "    {\"stack\":[{\"function\":\"g\",\"file\":\"x.py\",\"line\":0},"
              "{\"function\":\"h\",\"file\":\"y.py\",\"line\":0}]},\n"
              "    {\"stack\":null}\n"
              "  ]\n"
              "}\n");
}

/* A stream that fails: GMP_ERR_IO. */
static void test_io_error(void **state)
{
    (void)state;
    FILE *f = fopen("/dev/null", "r");
    assert_non_null(f);
    gmp_doc *d = gmp_doc_new();
    kv1(d, gmp_doc_root(d), "x", 1);
    gmp_render_opts o = {0};
    assert_int_equal(gmp_render_json(d, f, &o), GMP_ERR_IO);
    fclose(f);
    gmp_doc_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),    cmocka_unit_test(test_items),
        cmocka_unit_test(test_left_out), cmocka_unit_test(test_values),
        cmocka_unit_test(test_verdict),  cmocka_unit_test(test_series_and_rows),
        cmocka_unit_test(test_io_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
