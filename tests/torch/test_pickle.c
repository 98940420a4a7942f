/* Unit tests of the pickle readers: the tests' whole-tree reader (pickle_tree.h) and, on every
 * hostile input, the product's streaming reader (gmp_pickle_stream.h), which must say the same: a
 * real-format sample (every value type these files use),
 * pickles of protocols 2 and 4, and hostile inputs: globals and other refused opcodes, deep
 * nesting (on the stack and through the memo), cycles, huge lengths, memo abuse, integers out of
 * range, bad stacks, every truncation of a valid pickle, the memory bound, and random mutations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_pickle_stream.h"
#include "pickle_tree.h"

/* pickle.dumps({segments: [...], device_traces: [[...]], x: [None, True, False, 1.5, -1, 255,
 * 65535, -2**31, 2**31, 2**63, 2**64-1, -2**63, b'by\0tes', 'été']}, protocol=4) */
static const unsigned char sample[] = {
    0x80, 0x04, 0x95, 0xb7, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7d, 0x94, 0x28, 0x8c, 0x08,
    0x73, 0x65, 0x67, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x94, 0x5d, 0x94, 0x7d, 0x94, 0x28, 0x8c, 0x06,
    0x64, 0x65, 0x76, 0x69, 0x63, 0x65, 0x94, 0x4b, 0x00, 0x8c, 0x07, 0x61, 0x64, 0x64, 0x72, 0x65,
    0x73, 0x73, 0x94, 0x8a, 0x07, 0x00, 0x10, 0x00, 0x00, 0x00, 0x80, 0x00, 0x8c, 0x0a, 0x74, 0x6f,
    0x74, 0x61, 0x6c, 0x5f, 0x73, 0x69, 0x7a, 0x65, 0x94, 0x4a, 0x00, 0x00, 0x20, 0x00, 0x8c, 0x0d,
    0x69, 0x73, 0x5f, 0x65, 0x78, 0x70, 0x61, 0x6e, 0x64, 0x61, 0x62, 0x6c, 0x65, 0x94, 0x89, 0x8c,
    0x06, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x73, 0x94, 0x5d, 0x94, 0x7d, 0x94, 0x28, 0x68, 0x05, 0x8a,
    0x07, 0x00, 0x10, 0x00, 0x00, 0x00, 0x80, 0x00, 0x8c, 0x04, 0x73, 0x69, 0x7a, 0x65, 0x94, 0x4d,
    0x00, 0x02, 0x8c, 0x0e, 0x72, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x65, 0x64, 0x5f, 0x73, 0x69,
    0x7a, 0x65, 0x94, 0x4d, 0xf4, 0x01, 0x8c, 0x05, 0x73, 0x74, 0x61, 0x74, 0x65, 0x94, 0x8c, 0x10,
    0x61, 0x63, 0x74, 0x69, 0x76, 0x65, 0x5f, 0x61, 0x6c, 0x6c, 0x6f, 0x63, 0x61, 0x74, 0x65, 0x64,
    0x94, 0x8c, 0x06, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x73, 0x94, 0x5d, 0x94, 0x7d, 0x94, 0x28, 0x8c,
    0x04, 0x6e, 0x61, 0x6d, 0x65, 0x94, 0x8c, 0x01, 0x66, 0x94, 0x8c, 0x08, 0x66, 0x69, 0x6c, 0x65,
    0x6e, 0x61, 0x6d, 0x65, 0x94, 0x8c, 0x04, 0x61, 0x2e, 0x70, 0x79, 0x94, 0x8c, 0x04, 0x6c, 0x69,
    0x6e, 0x65, 0x94, 0x4b, 0x03, 0x75, 0x61, 0x75, 0x61, 0x8c, 0x0f, 0x73, 0x65, 0x67, 0x6d, 0x65,
    0x6e, 0x74, 0x5f, 0x70, 0x6f, 0x6f, 0x6c, 0x5f, 0x69, 0x64, 0x94, 0x4b, 0x00, 0x4b, 0x00, 0x86,
    0x94, 0x75, 0x61, 0x8c, 0x0d, 0x64, 0x65, 0x76, 0x69, 0x63, 0x65, 0x5f, 0x74, 0x72, 0x61, 0x63,
    0x65, 0x73, 0x94, 0x5d, 0x94, 0x5d, 0x94, 0x7d, 0x94, 0x28, 0x8c, 0x06, 0x61, 0x63, 0x74, 0x69,
    0x6f, 0x6e, 0x94, 0x8c, 0x05, 0x61, 0x6c, 0x6c, 0x6f, 0x63, 0x94, 0x8c, 0x04, 0x61, 0x64, 0x64,
    0x72, 0x94, 0x8a, 0x07, 0x00, 0x10, 0x00, 0x00, 0x00, 0x80, 0x00, 0x68, 0x0b, 0x4d, 0xf4, 0x01,
    0x8c, 0x06, 0x73, 0x74, 0x72, 0x65, 0x61, 0x6d, 0x94, 0x4b, 0x00, 0x8c, 0x07, 0x74, 0x69, 0x6d,
    0x65, 0x5f, 0x75, 0x73, 0x94, 0x8a, 0x07, 0x00, 0x40, 0x1e, 0x18, 0x24, 0x0a, 0x06, 0x68, 0x0f,
    0x5d, 0x94, 0x75, 0x61, 0x61, 0x8c, 0x01, 0x78, 0x94, 0x5d, 0x94, 0x28, 0x4e, 0x88, 0x89, 0x47,
    0x3f, 0xf8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x4a, 0xff, 0xff, 0xff, 0xff, 0x4b, 0xff, 0x4d,
    0xff, 0xff, 0x4a, 0x00, 0x00, 0x00, 0x80, 0x8a, 0x05, 0x00, 0x00, 0x00, 0x80, 0x00, 0x8a, 0x09,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x8a, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0x00, 0x8a, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x43, 0x06,
    0x62, 0x79, 0x00, 0x74, 0x65, 0x73, 0x94, 0x8c, 0x05, 0xc3, 0xa9, 0x74, 0xc3, 0xa9, 0x94, 0x65,
    0x75, 0x2e,
};

/* pickle.dumps({'a': [1, 2], 'b': 'x'}, protocol=2): BINPUT, BINUNICODE, no frames */
static const unsigned char proto2[] = {
    0x80, 0x02, 0x7d, 0x71, 0x00, 0x28, 0x58, 0x01, 0x00, 0x00, 0x00, 0x61, 0x71, 0x01,
    0x5d, 0x71, 0x02, 0x28, 0x4b, 0x01, 0x4b, 0x02, 0x65, 0x58, 0x01, 0x00, 0x00, 0x00,
    0x62, 0x71, 0x03, 0x58, 0x01, 0x00, 0x00, 0x00, 0x78, 0x71, 0x04, 0x75, 0x2e};

/* The product's streaming reader on p[0..n) (a snapshot's keys, no consumer): in two passes, or
 * in one (gmp_pkstream_one_pass keeping "frames" lists). */
static gmp_err stream_load(const void *p, size_t n, const gmp_pickle_limits *lim, int one,
                           char *err, size_t errlen)
{
    gmp_pkstream_cb cb = {"segments", "device_traces", NULL, NULL};
    gmp_pkstream *ps = gmp_pkstream_new(lim, &cb);
    assert_non_null(ps);
    if (one)
        gmp_pkstream_one_pass(ps, "frames", (size_t)1 << 30);
    gmp_err e = gmp_pkstream_run_mem(ps, p, n, err, errlen);
    gmp_pkstream_free(ps);
    return e;
}

/* A message without its "pickle: offset N: " (the tree reader finds cycles and nesting after STOP,
 * the streaming one where they are made). */
static const char *body(const char *err)
{
    const char *c = strncmp(err, "pickle: offset ", 15) == 0 ? strstr(err + 15, ": ") : NULL;
    return c ? c + 2 : err;
}

/* Loads p[0..n) with the tree reader, and checks that the streaming reader agrees: the same code
 * (and, on failure, the same message but for its offset) in two passes; one pass accepts only
 * what two passes accept (the importer reads again in two passes after a failed one). */
static gmp_err load_ex(const void *p, size_t n, const gmp_pickle_limits *lim, gmp_pickle_value **v,
                       char *err, size_t errlen)
{
    gmp_err e = gmp_pickle_load_ex(p, n, lim, v, err, errlen);
    if (e == GMP_OK)
        assert_non_null(*v);
    else
        assert_null(*v);
    char serr[256];
    gmp_err se = stream_load(p, n, lim, 0, serr, sizeof serr);
    if (se != e || (e != GMP_OK && errlen && strcmp(body(serr), body(err)) != 0))
        fail_msg("tree: %s (%s), stream: %s (%s)", gmp_err_name(e), errlen ? err : "",
                 gmp_err_name(se), serr);
    if (stream_load(p, n, lim, 1, serr, sizeof serr) == GMP_OK && e != GMP_OK)
        fail_msg("one pass accepts what two passes refuse (%s)", err);
    return e;
}

static gmp_err load(const void *p, size_t n, gmp_pickle_value **v, char *err, size_t errlen)
{
    return load_ex(p, n, NULL, v, err, errlen);
}

/* Loads p[0..n) with both readers and expects failure with code e and a message containing
 * what. */
static void expect_fail(const void *p, size_t n, gmp_err e, const char *what)
{
    gmp_pickle_value *v = (gmp_pickle_value *)1;
    char err[256];
    gmp_err got = load(p, n, &v, err, sizeof err);
    if (got != e || !strstr(err, what))
        fail_msg("expected %s with '%s', got %s: %s", gmp_err_name(e), what, gmp_err_name(got),
                 err);
}

static void test_sample(void **state)
{
    (void)state;
    gmp_pickle_value *root;
    char err[256];
    assert_int_equal(load(sample, sizeof sample, &root, err, sizeof err), GMP_OK);
    assert_int_equal(gmp_pickle_type_of(root), GMP_PK_DICT);
    assert_int_equal(gmp_pickle_len(root), 3);
    const gmp_pickle_value *segs = gmp_pickle_dict_get(root, "segments");
    assert_int_equal(gmp_pickle_type_of(segs), GMP_PK_LIST);
    const gmp_pickle_value *s0 = gmp_pickle_item(segs, 0);
    uint64_t u;
    assert_int_equal(gmp_pickle_get_u64(gmp_pickle_dict_get(s0, "address"), &u), 0);
    assert_true(u == (1ull << 47) + 4096);
    assert_int_equal(gmp_pickle_get_u64(gmp_pickle_dict_get(s0, "total_size"), &u), 0);
    assert_true(u == 2097152);
    int b = -1;
    assert_int_equal(gmp_pickle_get_bool(gmp_pickle_dict_get(s0, "is_expandable"), &b), 0);
    assert_int_equal(b, 0);
    const gmp_pickle_value *pool = gmp_pickle_dict_get(s0, "segment_pool_id");
    assert_int_equal(gmp_pickle_type_of(pool), GMP_PK_TUPLE);
    assert_int_equal(gmp_pickle_len(pool), 2);
    const gmp_pickle_value *blk = gmp_pickle_item(gmp_pickle_dict_get(s0, "blocks"), 0);
    assert_true(gmp_pickle_str_eq(gmp_pickle_dict_get(blk, "state"), "active_allocated"));
    const gmp_pickle_value *fr = gmp_pickle_item(gmp_pickle_dict_get(blk, "frames"), 0);
    assert_true(gmp_pickle_str_eq(gmp_pickle_dict_get(fr, "filename"), "a.py"));
    /* a key repeated through the memo (BINGET of "address") */
    const gmp_pickle_value *tr = gmp_pickle_item(gmp_pickle_dict_get(root, "device_traces"), 0);
    const gmp_pickle_value *e0 = gmp_pickle_item(tr, 0);
    assert_int_equal(gmp_pickle_get_u64(gmp_pickle_dict_get(e0, "size"), &u), 0);
    assert_true(u == 500);
    assert_int_equal(gmp_pickle_get_u64(gmp_pickle_dict_get(e0, "time_us"), &u), 0);
    assert_true(u == 1700000000000000ull);

    const gmp_pickle_value *x = gmp_pickle_dict_get(root, "x");
    assert_int_equal(gmp_pickle_len(x), 14);
    assert_int_equal(gmp_pickle_type_of(gmp_pickle_item(x, 0)), GMP_PK_NONE);
    assert_int_equal(gmp_pickle_get_bool(gmp_pickle_item(x, 1), &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(gmp_pickle_get_bool(gmp_pickle_item(x, 2), &b), 0);
    assert_int_equal(b, 0);
    double f;
    assert_int_equal(gmp_pickle_get_f64(gmp_pickle_item(x, 3), &f), 0);
    assert_true(f == 1.5);
    int64_t i;
    static const int64_t ints[] = {-1, 255, 65535, -2147483648ll, 2147483648ll};
    for (int k = 0; k < 5; k++) {
        assert_int_equal(gmp_pickle_get_i64(gmp_pickle_item(x, 4 + (size_t)k), &i), 0);
        assert_true(i == ints[k]);
    }
    assert_int_equal(gmp_pickle_get_u64(gmp_pickle_item(x, 4), &u), -1); /* negative */
    assert_int_equal(gmp_pickle_get_i64(gmp_pickle_item(x, 9), &i), -1); /* 2^63 */
    assert_int_equal(gmp_pickle_get_u64(gmp_pickle_item(x, 9), &u), 0);
    assert_true(u == 1ull << 63);
    assert_int_equal(gmp_pickle_get_u64(gmp_pickle_item(x, 10), &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(gmp_pickle_get_i64(gmp_pickle_item(x, 11), &i), 0);
    assert_true(i == INT64_MIN);
    size_t n;
    const char *s = gmp_pickle_get_str(gmp_pickle_item(x, 12), &n);
    assert_int_equal(gmp_pickle_type_of(gmp_pickle_item(x, 12)), GMP_PK_BYTES);
    assert_int_equal(n, 6);
    assert_memory_equal(s, "by\0tes", 6);
    assert_true(gmp_pickle_str_eq(gmp_pickle_item(x, 13), "\xc3\xa9t\xc3\xa9"));
    /* accessors on the wrong types */
    assert_null(gmp_pickle_item(root, 0));
    assert_null(gmp_pickle_dict_get(x, "a"));
    assert_null(gmp_pickle_get_str(x, &n));
    assert_int_equal(gmp_pickle_get_i64(x, &i), -1);
    assert_null(gmp_pickle_dict_get(NULL, "a"));
    assert_int_equal(gmp_pickle_len(NULL), 0);
    gmp_pickle_free(root);
    gmp_pickle_free(NULL);
}

static void test_proto2(void **state)
{
    (void)state;
    gmp_pickle_value *root;
    char err[256];
    assert_int_equal(load(proto2, sizeof proto2, &root, err, sizeof err), GMP_OK);
    const gmp_pickle_value *a = gmp_pickle_dict_get(root, "a");
    assert_int_equal(gmp_pickle_len(a), 2);
    assert_true(gmp_pickle_str_eq(gmp_pickle_dict_get(root, "b"), "x"));
    const gmp_pickle_value *val;
    const gmp_pickle_value *k = gmp_pickle_dict_at(root, 1, &val);
    assert_true(gmp_pickle_str_eq(k, "b"));
    assert_true(gmp_pickle_str_eq(val, "x"));
    assert_null(gmp_pickle_dict_at(root, 2, &val));
    gmp_pickle_free(root);
}

/* Hostile or malformed pickles and what both readers must say: the error code and a part of the
 * message (refused opcodes, protocol, stack and structure faults, integers out of range, cycles,
 * lengths past the end). */
typedef struct hostile {
    const char *p;
    size_t n;
    gmp_err e;
    const char *what;
} hostile;

#define H(lit, e, what)                                                                            \
    {                                                                                              \
        lit, sizeof(lit) - 1, e, what                                                              \
    }
static const hostile hostiles[] = {
    H("\x80\x04"
      "cos\nsystem\n"
      "\x8c\x02id\x85R.",
      GMP_ERR_FORMAT, "GLOBAL"),
    H("\x80\x04\x8c\x02os\x8c\x06system\x93.", GMP_ERR_FORMAT, "STACK_GLOBAL"),
    H("\x80\x04N)R.", GMP_ERR_FORMAT, "REDUCE"),
    H("\x80\x04}}b.", GMP_ERR_FORMAT, "BUILD"),
    H("\x80\x04N)\x81.", GMP_ERR_FORMAT, "NEWOBJ"),
    H("\x80\x04N)}\x92.", GMP_ERR_FORMAT, "NEWOBJ_EX"),
    H("\x80\x04(io\nx\n.", GMP_ERR_FORMAT, "INST"),
    H("\x80\x04(No.", GMP_ERR_FORMAT, "OBJ"),
    H("\x80\x04\x82\x01.", GMP_ERR_FORMAT, "EXT1"),
    H("\x80\x04Pid\n.", GMP_ERR_FORMAT, "PERSID"),
    H("\x80\x04NQ.", GMP_ERR_FORMAT, "BINPERSID"),
    H("\x80\x04\x8f.", GMP_ERR_FORMAT, "EMPTY_SET"),
    H("\x80\x04(\x91.", GMP_ERR_FORMAT, "FROZENSET"),
    H("\x80\x05\x96\x00\x00\x00\x00\x00\x00\x00\x00.", GMP_ERR_FORMAT, "BYTEARRAY8"),
    H("\x80\x05\x97.", GMP_ERR_FORMAT, "NEXT_BUFFER"),
    H("\x80\x04I1\n.", GMP_ERR_FORMAT, "INT"),
    H("\x80\x04S'a'\n.", GMP_ERR_FORMAT, "STRING"),
    H("\x80\x04Vabc\n.", GMP_ERR_FORMAT, "UNICODE"),
    H("\x80\x04U\x01"
      "a.",
      GMP_ERR_FORMAT, "SHORT_BINSTRING"),
    H("\x80\x04\xff.", GMP_ERR_FORMAT, "unknown opcode 0xff"),
    /* protocol */
    H("}.", GMP_ERR_FORMAT, "no PROTO"),
    H("\x80\x01}.", GMP_ERR_FORMAT, "protocol 1"),
    H("\x80\x06}.", GMP_ERR_FORMAT, "protocol 6"),
    H("\x80\x04\x80\x04}.", GMP_ERR_FORMAT, "PROTO after"),
    H("", GMP_ERR_TRUNCATED, "before STOP"),
    H("\x80\x04N}}.", GMP_ERR_FORMAT, "STOP with 3 values"),
    H("\x80\x04(}.", GMP_ERR_FORMAT, "open MARK"),
    H("\x80\x04.", GMP_ERR_FORMAT, "STOP with 0 values"),
    H("\x80\x04}Na.", GMP_ERR_FORMAT, "APPEND to a dict"),
    H("\x80\x04}(Ne.", GMP_ERR_FORMAT, "APPENDS to a dict"),
    H("\x80\x04]NNs.", GMP_ERR_FORMAT, "SETITEM on a list"),
    H("\x80\x04}(Nu.", GMP_ERR_FORMAT, "odd number"),
    H("\x80\x04(Nd.", GMP_ERR_FORMAT, "odd number"),
    H("\x80\x04}]Ns.", GMP_ERR_FORMAT, "key of type list"),
    H("\x80\x04}]\x85Ns.", GMP_ERR_FORMAT, "key of type tuple"),
    H("\x80\x04"
      "a.",
      GMP_ERR_FORMAT, "underflow"),
    H("\x80\x04N(a.", GMP_ERR_FORMAT, "underflow"),
    /* a MARK hides what is below it */
    H("\x80\x04N(\x86.", GMP_ERR_FORMAT, "underflow"),
    H("\x80\x04"
      "e.",
      GMP_ERR_FORMAT, "no MARK"),
    H("\x80\x04h\x00.", GMP_ERR_FORMAT, "memo key 0 not defined"),
    H("\x80\x04\x94.", GMP_ERR_FORMAT, "underflow"),
    H("\x80\x04]r\xff\xff\xff\xff.", GMP_ERR_LIMIT, "memo index 4294967295"),
    H("\x80\x04\x8b\x00\x00\x00\x80.", GMP_ERR_FORMAT, "negative length"),
    /* integers: 2^64 and -2^63-1 do not fit */
    H("\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", GMP_ERR_FORMAT, "integer"),
    H("\x80\x04\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\xff.", GMP_ERR_FORMAT, "integer"),
    /* a cycle: l = []; l.append(l) */
    H("\x80\x04]\x94h\x00"
      "a.",
      GMP_ERR_FORMAT, "contains itself"),
    H("\x80\x04}\x94(\x8c\x01"
      "ah\x00"
      "u.",
      GMP_ERR_FORMAT, "contains itself"),
    H("\x80\x04X\xff\xff\xff\xff", GMP_ERR_TRUNCATED, "runs past the end"),
    H("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f", GMP_ERR_TRUNCATED, "runs past the end"),
    H("\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x80", GMP_ERR_TRUNCATED, "runs past the end"),
    H("\x80\x04\x8b\xff\xff\xff\x7f", GMP_ERR_TRUNCATED, "runs past the end"),
    H("\x80\x04\x8c\x05"
      "abc",
      GMP_ERR_TRUNCATED, "runs past the end"),
    H("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff}.", GMP_ERR_TRUNCATED, "frame"),
    H("\x80\x04J\x01\x02", GMP_ERR_TRUNCATED, "ends inside"),
    H("\x80\x04G\x01\x02", GMP_ERR_TRUNCATED, "ends inside"),
};
#undef H

static void test_hostile(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof hostiles / sizeof hostiles[0]; i++)
        expect_fail(hostiles[i].p, hostiles[i].n, hostiles[i].e, hostiles[i].what);
}

static void test_ok_small(void **state)
{
    (void)state;
    gmp_pickle_value *v;
    char err[256];
    /* APPENDS with items, POP, POP_MARK, DUP, TUPLE3, LIST, DICT, LONG4, SHORT_BINBYTES, FRAME */
    static const char p[] = "\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00("
                            "](K\x01K\x02"
                            "e(NNN1N0K\x07\x32\x86K\x01K\x02K\x03\x87\x87"
                            "(K\x05l(\x8c\x01kK\x09"
                            "d\x8b\x02\x00\x00\x00\x00\x01\x87"
                            "C\x02hi\x8c\x01z\x8e\x01\x00\x00\x00\x00\x00\x00\x00q\x87t.";
    gmp_err e = load(p, sizeof p - 1, &v, err, sizeof err);
    if (e != GMP_OK)
        fail_msg("%s", err);
    int64_t i;
    /* ( [1,2], (7,7), (1,2,3) ), ( [5], {k:9}, 256 ), ( b'hi', 'z', b'q' ) */
    assert_int_equal(gmp_pickle_type_of(v), GMP_PK_TUPLE);
    assert_int_equal(gmp_pickle_len(v), 3);
    const gmp_pickle_value *t0 = gmp_pickle_item(v, 0), *t1 = gmp_pickle_item(v, 1);
    const gmp_pickle_value *t2 = gmp_pickle_item(v, 2);
    assert_int_equal(gmp_pickle_len(gmp_pickle_item(t0, 0)), 2);
    assert_int_equal(gmp_pickle_len(gmp_pickle_item(t0, 1)), 2);
    assert_int_equal(gmp_pickle_get_i64(gmp_pickle_item(gmp_pickle_item(t0, 1), 1), &i), 0);
    assert_int_equal(i, 7);
    assert_int_equal(gmp_pickle_len(gmp_pickle_item(t0, 2)), 3);
    assert_int_equal(gmp_pickle_get_i64(gmp_pickle_dict_get(gmp_pickle_item(t1, 1), "k"), &i), 0);
    assert_int_equal(i, 9);
    assert_int_equal(gmp_pickle_get_i64(gmp_pickle_item(t1, 2), &i), 0);
    assert_int_equal(i, 256);
    assert_int_equal(gmp_pickle_type_of(gmp_pickle_item(t2, 0)), GMP_PK_BYTES);
    assert_int_equal(gmp_pickle_type_of(gmp_pickle_item(t2, 2)), GMP_PK_BYTES);
    gmp_pickle_free(v);
}

/* {k0: 0, ..., k19: 19, k3: 99} built with SETITEMS: a key set twice keeps its place and takes
 * its last value; 20 keys use the sorted index. */
static void test_dict_dups(void **state)
{
    (void)state;
    char buf[1024];
    size_t n = 0;
    memcpy(buf, "\x80\x04}(", 4);
    n = 4;
    for (int k = 0; k < 20; k++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "\x8c%ck%02dK%c", 3, k, k);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "\x8c%ck03K%c", 3, 99);
    memcpy(buf + n, "u.", 2);
    n += 2;
    gmp_pickle_value *v;
    char err[256];
    gmp_err e = load(buf, n, &v, err, sizeof err);
    if (e != GMP_OK)
        fail_msg("%s", err);
    assert_int_equal(gmp_pickle_len(v), 20);
    int64_t i;
    assert_int_equal(gmp_pickle_get_i64(gmp_pickle_dict_get(v, "k03"), &i), 0);
    assert_int_equal(i, 99);
    for (int k = 0; k < 20; k++) {
        char key[8];
        snprintf(key, sizeof key, "k%02d", k);
        assert_int_equal(gmp_pickle_get_i64(gmp_pickle_dict_get(v, key), &i), 0);
        assert_int_equal(i, k == 3 ? 99 : k);
        const gmp_pickle_value *val;
        assert_true(gmp_pickle_str_eq(gmp_pickle_dict_at(v, (size_t)k, &val), key));
    }
    assert_null(gmp_pickle_dict_get(v, "k20"));
    assert_null(gmp_pickle_dict_get(v, "k0"));
    assert_null(gmp_pickle_dict_get(v, ""));
    gmp_pickle_free(v);
}

static void test_depth(void **state)
{
    (void)state;
    /* 200 nested lists on the stack: ]]]...]aaa...a. */
    unsigned char buf[4096];
    size_t n = 0;
    buf[n++] = 0x80;
    buf[n++] = 4;
    for (int k = 0; k < 200; k++)
        buf[n++] = ']';
    for (int k = 0; k < 199; k++)
        buf[n++] = 'a';
    buf[n++] = '.';
    expect_fail(buf, n, GMP_ERR_LIMIT, "nested deeper than 64");
    /* the same depth through the memo with a stack of 3 above a MARK in a list (the first value,
     * which the streaming reader takes as the root): ](]\x94 then (0 ] h k a \x94) x 200, e */
    n = 0;
    buf[n++] = 0x80;
    buf[n++] = 4;
    buf[n++] = ']';
    buf[n++] = '(';
    buf[n++] = ']';
    buf[n++] = 0x94;
    for (int k = 0; k < 200; k++) {
        buf[n++] = '0'; /* POP the previous list: only the memo keeps it */
        buf[n++] = ']';
        buf[n++] = 'h';
        buf[n++] = (unsigned char)k;
        buf[n++] = 'a';
        buf[n++] = 0x94;
    }
    buf[n++] = 'e';
    buf[n++] = '.';
    expect_fail(buf, n, GMP_ERR_LIMIT, "nested deeper than 64");
    /* 60 levels are fine */
    gmp_pickle_value *v;
    char err[256];
    n = 0;
    buf[n++] = 0x80;
    buf[n++] = 4;
    for (int k = 0; k < 60; k++)
        buf[n++] = ']';
    for (int k = 0; k < 59; k++)
        buf[n++] = 'a';
    buf[n++] = '.';
    assert_int_equal(load(buf, n, &v, err, sizeof err), GMP_OK);
    gmp_pickle_free(v);
    /* a shared value many times over is no cycle: x = [[]]; [x, x, x] */
    static const char shared[] = "\x80\x04]\x94"
                                 "0](h\x00"
                                 "h\x00"
                                 "h\x00"
                                 "e.";
    assert_int_equal(gmp_pickle_load(shared, sizeof shared - 1, &v, err, sizeof err), GMP_OK);
    /* (the streaming reader refuses it: its first value is the root, never stored in another) */
    char serr[256];
    assert_int_equal(stream_load(shared, sizeof shared - 1, NULL, 0, serr, sizeof serr),
                     GMP_ERR_FORMAT);
    assert_non_null(strstr(serr, "first value of the pickle is stored in another"));
    assert_int_equal(gmp_pickle_len(v), 3);
    assert_ptr_equal(gmp_pickle_item(v, 0), gmp_pickle_item(v, 2));
    gmp_pickle_free(v);
}

/* Every proper prefix of a valid pickle fails cleanly; the whole one loads. */
static void test_truncation(void **state)
{
    (void)state;
    char err[256];
    for (size_t n = 0; n < sizeof sample; n++) {
        gmp_pickle_value *v = (gmp_pickle_value *)1;
        gmp_err e = load(sample, n, &v, err, sizeof err);
        if (e != GMP_ERR_TRUNCATED && e != GMP_ERR_FORMAT)
            fail_msg("prefix %zu: %s", n, gmp_err_name(e));
        assert_true(err[0] != 0);
    }
}

static void test_memory_bound(void **state)
{
    (void)state;
    gmp_pickle_limits lim;
    gmp_pickle_limits_default(&lim);
    lim.max_memory = 32 << 10; /* less than one arena chunk */
    gmp_pickle_value *v = (gmp_pickle_value *)1;
    char err[256];
    assert_int_equal(gmp_pickle_load_ex(sample, sizeof sample, &lim, &v, err, sizeof err),
                     GMP_ERR_LIMIT);
    assert_null(v);
    assert_non_null(strstr(err, "memory"));
    lim.max_memory = 1 << 20;
    assert_int_equal(gmp_pickle_load_ex(sample, sizeof sample, &lim, &v, err, sizeof err), GMP_OK);
    gmp_pickle_free(v);
    /* many empty lists grow the stack until the bound */
    size_t n = 4 << 20;
    unsigned char *big = malloc(n + 3);
    assert_non_null(big);
    big[0] = 0x80;
    big[1] = 4;
    memset(big + 2, ']', n);
    big[n + 2] = '.';
    lim.max_memory = 16 << 20;
    assert_int_equal(gmp_pickle_load_ex(big, n + 3, &lim, &v, err, sizeof err), GMP_ERR_LIMIT);
    assert_int_equal(stream_load(big, n + 3, &lim, 0, err, sizeof err), GMP_ERR_LIMIT);
    /* and a bound on memo indices */
    lim.max_memory = 1 << 30;
    lim.max_memo = 4;
    static const char memo[] = "\x80\x04]\x94\x94\x94\x94\x94.";
    assert_int_equal(load_ex(memo, sizeof memo - 1, &lim, &v, err, sizeof err), GMP_ERR_LIMIT);
    free(big);
    assert_int_equal(gmp_pickle_load_ex(NULL, 3, NULL, &v, err, sizeof err), GMP_ERR_ARG);
    assert_int_equal(stream_load(NULL, 3, NULL, 0, err, sizeof err), GMP_ERR_ARG);
}

/* Random byte changes of the sample never crash (ASan/UBSan builds check the rest), and the two
 * readers agree on what they accept, but for the streaming reader's own rules and limits. */
static void test_mutations(void **state)
{
    (void)state;
    unsigned char buf[sizeof sample];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char err[256];
    int ok = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(buf, sample, sizeof sample);
        int changes = 1 + (int)(x % 4);
        for (int c = 0; c < changes; c++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[x % sizeof buf] = (unsigned char)(x >> 32);
        }
        gmp_pickle_value *v;
        gmp_err e = gmp_pickle_load(buf, sizeof buf, &v, err, sizeof err);
        char serr[256];
        gmp_err se = stream_load(buf, sizeof buf, NULL, 0, serr, sizeof serr);
        if ((se == GMP_OK && e != GMP_OK) ||
            (e == GMP_OK && se != GMP_OK && !gmp_pickle_stream_rule(se, serr)))
            fail_msg("mutation %d: tree %s (%s), stream %s (%s)", it, gmp_err_name(e), e ? err : "",
                     gmp_err_name(se), se ? serr : "");
        if (e == GMP_OK) {
            ok++;
            (void)gmp_pickle_dict_get(v, "segments");
            gmp_pickle_free(v);
        }
    }
    assert_true(ok > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample),     cmocka_unit_test(test_proto2),
        cmocka_unit_test(test_hostile),    cmocka_unit_test(test_ok_small),
        cmocka_unit_test(test_dict_dups),  cmocka_unit_test(test_depth),
        cmocka_unit_test(test_truncation), cmocka_unit_test(test_memory_bound),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
