/* Unit tests of formats/import/gmp_pickle_stream (the streaming pickle reader): against the
 * whole-tree reader (gmp_pickle) on the four real snapshots of tests/data/torch-snapshots (every
 * segment and trace entry handed over equals the tree's, in order), memo values fetched after the
 * entry that defined them was released, the rules streaming needs (a container changed after it
 * was stored, a streamed list stored elsewhere than predicted or dropped, a key set twice), a
 * root built by DICT (handed over at STOP), every truncation of a snapshot (one error, no crash),
 * a consumer that stops the parse, husked frames lists, and the memory bound. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pickle_tree.h"
#include "gmp_pickle_stream.h"

#ifndef GMP_TORCH_DATA
#error "GMP_TORCH_DATA (tests/data/torch-snapshots) must be defined"
#endif

/* ---- a digest of a value, the same for both readers ---- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0x100000001b3ull;
}

static uint64_t mix_bytes(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = mix(h, (unsigned char)s[i]);
    return mix(h, n);
}

static uint64_t dig_tree(const gmp_pickle_value *v)
{
    uint64_t h = mix(0, gmp_pickle_type_of(v));
    int64_t i;
    uint64_t u;
    size_t n;
    const char *s;
    switch (gmp_pickle_type_of(v)) {
    case GMP_PK_INT:
    case GMP_PK_BOOL:
        if (gmp_pickle_get_i64(v, &i) == 0)
            return mix(h, (uint64_t)i);
        gmp_pickle_get_u64(v, &u);
        return mix(h, u);
    case GMP_PK_STR:
    case GMP_PK_BYTES: s = gmp_pickle_get_str(v, &n); return mix_bytes(h, s, n);
    case GMP_PK_LIST:
    case GMP_PK_TUPLE:
        for (size_t k = 0; k < gmp_pickle_len(v); k++)
            h = mix(h, dig_tree(gmp_pickle_item(v, k)));
        return mix(h, gmp_pickle_len(v));
    case GMP_PK_DICT:
        for (size_t k = 0; k < gmp_pickle_len(v); k++) {
            const gmp_pickle_value *val;
            const gmp_pickle_value *key = gmp_pickle_dict_at(v, k, &val);
            h = mix(h, dig_tree(key) ^ (dig_tree(val) * 31));
        }
        return mix(h, gmp_pickle_len(v));
    default: return h;
    }
}

/* The streaming reader's dicts keep every SETITEM (the last one counts): these files set each
 * key once, so the digests agree. */
static uint64_t dig_pkv(const gmp_pkv *v)
{
    uint64_t h = mix(0, v->type);
    switch (v->type) {
    case GMP_PK_INT:
    case GMP_PK_BOOL: return mix(h, v->big ? v->v.u : (uint64_t)v->v.i);
    case GMP_PK_STR:
    case GMP_PK_BYTES: return mix_bytes(h, v->v.o->d.s, v->v.o->n);
    case GMP_PK_LIST:
    case GMP_PK_TUPLE:
        for (size_t k = 0; k < gmp_pkv_len(v); k++)
            h = mix(h, dig_pkv(gmp_pkv_item(v, k)));
        return mix(h, gmp_pkv_len(v));
    case GMP_PK_DICT:
        for (size_t k = 0; k < v->v.o->n; k++)
            h = mix(h,
                    dig_pkv(&v->v.o->d.items[2 * k]) ^ (dig_pkv(&v->v.o->d.items[2 * k + 1]) * 31));
        return mix(h, gmp_pkv_len(v));
    default: return h;
    }
}

/* ---- a consumer that records what it is given ---- */

typedef struct rec {
    uint64_t seg_digest, ent_digest;
    size_t segs, ents, stop_at;
    uint32_t max_index;
    gmp_pkstream *ps;
    int husk;
    int noflat;         /* gmp_pkstream_no_flat */
    const char *sparse; /* gmp_pkstream_one_pass with this keep_key */
    size_t budget;      /* its budget (0: 1 GiB) */
    pthread_t caller;   /* the thread that runs the parse */
    size_t elsewhere;   /* items handed over on another thread */
} rec;

static int on_item(void *ctx, int kind, uint32_t index, const gmp_pkv *item, char *err,
                   size_t errlen)
{
    rec *r = ctx;
    if (!pthread_equal(pthread_self(), r->caller))
        r->elsewhere++;
    /* husked lists are not read again (their items go once the batch is released): no digest
     * then */
    if (kind == GMP_PKS_LIST) {
        r->seg_digest = mix(r->seg_digest, r->husk ? 0 : dig_pkv(item));
        r->segs++;
    } else {
        r->ent_digest = mix(mix(r->ent_digest, index), r->husk ? 0 : dig_pkv(item));
        r->ents++;
        if (index > r->max_index)
            r->max_index = index;
        const gmp_pkv *fr = gmp_pkv_dict_get(item, "frames");
        if (r->husk && fr && fr->type == GMP_PK_LIST) {
            fr->v.o->tag = 1;
            gmp_pkstream_husk(r->ps, fr->v.o);
        }
    }
    if (r->stop_at && r->segs + r->ents == r->stop_at) {
        snprintf(err, errlen, "consumer: stop");
        return 1;
    }
    return 0;
}

static gmp_err stream(const void *p, size_t n, rec *r, const gmp_pickle_limits *lim, char *err,
                      size_t errlen)
{
    gmp_pkstream_cb cb = {"segments", "device_traces", on_item, r};
    r->ps = gmp_pkstream_new(lim, &cb);
    assert_non_null(r->ps);
    if (r->noflat)
        gmp_pkstream_no_flat(r->ps);
    if (r->sparse)
        gmp_pkstream_one_pass(r->ps, r->sparse, r->budget ? r->budget : (size_t)1 << 30);
    r->caller = pthread_self();
    gmp_err e = gmp_pkstream_run_mem(r->ps, p, n, err, errlen);
    return e;
}

static unsigned char *slurp(const char *name, size_t *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", GMP_TORCH_DATA, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static const char *const real[] = {"small-step.pickle", "transformer-forward-bf16.pickle",
                                   "transformer-train-step-adamw.pickle",
                                   "qwen3-expandable-3gpu-oom.pickle"};

/* Every item handed over equals the whole tree's, in order, with its device; the root keeps the
 * other keys, and the streamed lists their lengths. */
static void test_real_equal_tree(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof real / sizeof real[0]; f++) {
        size_t n;
        unsigned char *b = slurp(real[f], &n);
        gmp_pickle_value *root;
        char err[256];
        assert_int_equal(gmp_pickle_load(b, n, &root, err, sizeof err), GMP_OK);
        rec want = {0};
        const gmp_pickle_value *segs = gmp_pickle_dict_get(root, "segments");
        for (size_t i = 0; i < gmp_pickle_len(segs); i++) {
            want.seg_digest = mix(want.seg_digest, dig_tree(gmp_pickle_item(segs, i)));
            want.segs++;
        }
        const gmp_pickle_value *tr = gmp_pickle_dict_get(root, "device_traces");
        for (size_t d = 0; d < gmp_pickle_len(tr); d++)
            for (size_t i = 0; i < gmp_pickle_len(gmp_pickle_item(tr, d)); i++) {
                want.ent_digest = mix(mix(want.ent_digest, d),
                                      dig_tree(gmp_pickle_item(gmp_pickle_item(tr, d), i)));
                want.ents++;
            }
        rec got = {0};
        assert_int_equal(stream(b, n, &got, NULL, err, sizeof err), GMP_OK);
        assert_int_equal(got.segs, want.segs);
        assert_int_equal(got.ents, want.ents);
        assert_true(got.seg_digest == want.seg_digest);
        assert_true(got.ent_digest == want.ent_digest);
        const gmp_pkv *r = gmp_pkstream_root(got.ps);
        assert_non_null(r);
        assert_int_equal(gmp_pkv_len(gmp_pkv_dict_get(r, "segments")), want.segs);
        assert_true(dig_pkv(gmp_pkv_dict_get(r, "allocator_settings")) ==
                    dig_tree(gmp_pickle_dict_get(root, "allocator_settings")));
        /* far less held than the tree: the memo keeps frames, not entries */
        assert_true(gmp_pkstream_peak_memory(got.ps) < 4 * n + (1u << 21));
        gmp_pkstream_free(got.ps);
        /* husking frames lists changes nothing the consumer sees first */
        rec h = {0};
        h.husk = 1;
        assert_int_equal(stream(b, n, &h, NULL, err, sizeof err), GMP_OK);
        assert_int_equal(h.ents, want.ents);
        gmp_pkstream_free(h.ps);
        /* in two passes without flat entries, and in one pass (strings and "frames" lists
         * kept, nothing else): the same items, husked or not, and far less held than the tree */
        for (int k = 0; k < 4; k++) {
            int sparse = (k >> 1) & 1, hk = k & 1;
            rec o = {0};
            o.noflat = !sparse;
            o.sparse = sparse ? "frames" : NULL;
            o.husk = hk;
            assert_int_equal(stream(b, n, &o, NULL, err, sizeof err), GMP_OK);
            assert_int_equal(o.segs, want.segs);
            assert_int_equal(o.ents, want.ents);
            assert_int_equal(o.elsewhere, 0); /* on the calling thread */
            if (!hk) {
                assert_true(o.seg_digest == want.seg_digest);
                assert_true(o.ent_digest == want.ent_digest);
            }
            assert_true(dig_pkv(gmp_pkv_dict_get(gmp_pkstream_root(o.ps), "allocator_settings")) ==
                        dig_tree(gmp_pickle_dict_get(root, "allocator_settings")));
            if (sparse)
                assert_true(gmp_pkstream_peak_memory(o.ps) < 4 * n + (1u << 21));
            gmp_pkstream_free(o.ps);
        }
        gmp_pickle_free(root);
        free(b);
    }
}

/* Every prefix of a real snapshot: one error (truncated, mostly), never a crash; a consumer that
 * stops is reported as such. */
static void test_truncations_and_stop(void **state)
{
    (void)state;
    size_t n;
    unsigned char *b = slurp("small-step.pickle", &n);
    char err[256];
    for (size_t k = 0; k < n; k += 1 + k / 64) {
        rec r = {0};
        gmp_err e = stream(b, k, &r, NULL, err, sizeof err);
        assert_int_not_equal(e, GMP_OK);
        assert_true(strncmp(err, "pickle: offset ", 15) == 0);
        gmp_pkstream_free(r.ps);
    }
    rec r = {0};
    r.stop_at = 5;
    assert_int_not_equal(stream(b, n, &r, NULL, err, sizeof err), GMP_OK);
    assert_true(gmp_pkstream_stopped_by_consumer(r.ps));
    assert_string_equal(err, "consumer: stop");
    gmp_pkstream_free(r.ps);
    gmp_pickle_limits lim;
    gmp_pickle_limits_default(&lim);
    lim.max_memory = 1u << 16;
    rec m = {0};
    assert_int_equal(stream(b, n, &m, &lim, err, sizeof err), GMP_ERR_LIMIT);
    gmp_pkstream_free(m.ps);
    free(b);
}

static void expect(const char *p, size_t n, gmp_err want, const char *what, size_t items)
{
    rec r = {0};
    char err[256];
    gmp_err e = stream(p, n, &r, NULL, err, sizeof err);
    if (e != want || (what && !strstr(err, what)) || r.segs + r.ents != items)
        fail_msg("got %d (%s) with %zu items, expected %d (%s) with %zu", e, err, r.segs + r.ents,
                 want, what ? what : "", items);
    gmp_pkstream_free(r.ps);
}

#define P(s) s, sizeof s - 1

static void test_rules(void **state)
{
    (void)state;
    /* {'segments': [1, 2], 'device_traces': [[3], [4, 5]]}: kinds, devices, memo */
    expect(P("\x80\x04}\x94(\x8c\x08segments\x94](K\x01K\x02"
             "e\x8c\x0d"
             "device_traces\x94](]K\x03"
             "a](K\x04K\x05"
             "eeu."),
           GMP_OK, NULL, 5);
    /* a list changed after it was stored in another one */
    expect(P("\x80\x04(]\x94]h\x00"
             "ah\x00K\x01"
             "a0."),
           GMP_ERR_FORMAT, "changed after it was stored", 0);
    /* a list that contains itself */
    expect(P("\x80\x04]\x94h\x00"
             "a."),
           GMP_ERR_FORMAT, "contains itself", 0);
    /* root['segments'] streamed (1 item), then dropped and root['x'] set instead */
    expect(P("\x80\x04}(\x8c\x08segments]K\x01"
             "a00\x8c\x01xK\x02u."),
           GMP_ERR_FORMAT, "not part of the result", 1);
    /* 'segments' set twice */
    expect(P("\x80\x04}(\x8c\x08segments]K\x01"
             "a\x8c\x08segments]K\x02"
             "au."),
           GMP_ERR_FORMAT, "set twice", 2);
    /* a root built by DICT: its lists are handed over at STOP */
    expect(P("\x80\x02(X\x08\x00\x00\x00segments](K\x01K\x02"
             "eX\x0d\x00\x00\x00"
             "device_traces]]"
             "K\x03"
             "aad."),
           GMP_OK, NULL, 3);
    /* a memo value fetched after the entry that defined it was handed over and released */
    expect(P("\x80\x04}(\x8c\x0d"
             "device_traces](](}(\x8c\x01"
             "f](K\x07"
             "e\x94u}(\x8c\x01"
             "fh\x00ueeu."),
           GMP_OK, NULL, 2);
    /* a fetch of a memo index never defined, and refused opcodes, as the tree reader says */
    expect(P("\x80\x04h\x05."), GMP_ERR_FORMAT, "memo key 5 not defined", 0);
    expect(P("\x80\x04\x8c\x05posix\x8c\x06system\x93."), GMP_ERR_FORMAT, "STACK_GLOBAL", 0);
}

/* p[0..n) is read by two passes (items handed over) and refused by a sparse pass keeping
 * "frames" lists, with a message that says why. */
static void two_only(const char *p, size_t n, size_t items, const char *why)
{
    char err[256];
    rec two = {0};
    assert_int_equal(stream(p, n, &two, NULL, err, sizeof err), GMP_OK);
    assert_int_equal(two.segs + two.ents, items);
    rec one = {0};
    one.sparse = "frames";
    assert_int_not_equal(stream(p, n, &one, NULL, err, sizeof err), GMP_OK);
    assert_non_null(strstr(err, why));
    gmp_pkstream_free(two.ps);
    gmp_pkstream_free(one.ps);
}

/* A sparse pass fails (so that the importer reads the file again in two passes) where the
 * pickle fetches what it did not keep, memoizes out of order, or holds more than its budget; it
 * reads what it kept as two passes do. */
static void test_sparse(void **state)
{
    (void)state;
    char err[256];
    /* {'device_traces': [[{K: [7]}, {K: <the same list>}]]}: the list is kept when K is the
     * keep key */
    static const char shared[] = "\x80\x04}(\x8c\x0d"
                                 "device_traces](](}(\x8c\x06"
                                 "frames](K\x07"
                                 "e\x94u}(\x8c\x06"
                                 "framesh\x00ueeu.";
    rec two = {0};
    assert_int_equal(stream(shared, sizeof shared - 1, &two, NULL, err, sizeof err), GMP_OK);
    assert_int_equal(two.ents, 2);
    rec kept = {0};
    kept.sparse = "frames";
    assert_int_equal(stream(shared, sizeof shared - 1, &kept, NULL, err, sizeof err), GMP_OK);
    assert_int_equal(kept.ents, 2);
    assert_true(kept.ent_digest == two.ent_digest);
    rec other = {0};
    other.sparse = "stack"; /* another keep key: the list is not kept, its fetch fails */
    assert_int_not_equal(stream(shared, sizeof shared - 1, &other, NULL, err, sizeof err), GMP_OK);
    assert_non_null(strstr(err, "not defined"));
    assert_int_equal(other.ents, 0); /* both are handed over at APPENDS, after it */
    gmp_pkstream_free(two.ps);
    gmp_pkstream_free(kept.ps);
    gmp_pkstream_free(other.ps);
    /* a tuple memoized and fetched again (tuples are never kept) */
    static const char tuple[] =
        "\x80\x04}(\x8c\x08segments](}(\x8c\x01pK\x01K\x02\x86\x94u}(\x8c\x01"
        "ph\x00ueu.";
    two_only(tuple, sizeof tuple - 1, 2, "not defined");
    /* BINPUT out of order (index 5 first) */
    static const char order[] = "\x80\x02}q\x05(X\x08\x00\x00\x00segments]u.";
    two_only(order, sizeof order - 1, 0, "out of order");
    /* a memo index far past those defined */
    static const char far[] = "\x80\x04}(\x8c\x0d"
                              "device_traces]r\x00\x00\x10\x00u.";
    two_only(far, sizeof far - 1, 0, "out of order");
    /* {'device_traces': [[d, d]]}, d = {'a': 1} fetched after it was appended (handed over) */
    static const char again[] = "\x80\x04}(\x8c\x0d"
                                "device_traces](](}\x94(\x8c\x01"
                                "aK\x01ueh\x00"
                                "aeu.";
    two_only(again, sizeof again - 1, 2, "not defined");
    /* the budget: a real snapshot within 64 KiB fails, with the limit's code */
    size_t n;
    unsigned char *b = slurp("transformer-train-step-adamw.pickle", &n);
    rec small = {0};
    small.sparse = "frames";
    small.budget = 1u << 16;
    assert_int_equal(stream(b, n, &small, NULL, err, sizeof err), GMP_ERR_LIMIT);
    assert_non_null(strstr(err, "(one pass)"));
    gmp_pkstream_free(small.ps);
    free(b);
}

/* ---- trace entries read flat (without a dict until their list takes them) ---- */

/* {'segments': [], 'device_traces': [[e_0, ..., e_{n-1}]]}, e_i = {'action': 'alloc', 'addr': i,
 * 'size': 32, 'frames': F} with the keys, 'alloc' and F memoized in e_0 and fetched after, and
 * ins[0..insn) inserted after e_{at-1} (before the APPENDS). The length written into b. */
static size_t flat_snapshot(char *b, size_t n, size_t at, const char *ins, size_t insn)
{
    size_t k = 0;
#define PUT(s, len) (memcpy(b + k, s, len), k += (len))
#define PS(s) PUT(s, sizeof s - 1)
    /* memo 0 root, 1 'segments', 2 [], 3 'device_traces', 4 the traces, 5 device 0's list */
    PS("\x80\x04}\x94(\x8c\x08segments\x94]\x94\x8c\x0d"
       "device_traces\x94]\x94(]\x94(");
    for (size_t i = 0; i < n; i++) {
        char addr[5] = {'J', (char)(i & 0xff), (char)(i >> 8), 0, 0};
        if (i ==
            0) { /* 6 the dict, 7 'action', 8 'alloc', 9 'addr', 10 'size', 11 'frames', 12 F */
            PS("}\x94(\x8c\x06"
               "action\x94\x8c\x05"
               "alloc\x94\x8c\x04"
               "addr\x94");
            PUT(addr, 5);
            PS("\x8c\x04size\x94K\x20\x8c\x06"
               "frames\x94](K\x01K\x02"
               "e\x94u");
        } else {
            PS("}\x94(h\x07h\x08h\x09");
            PUT(addr, 5);
            PS("h\x0aK\x20h\x0bh\x0cu");
        }
        if (i + 1 == at)
            PUT(ins, insn);
    }
    PS("eeu.");
#undef PS
#undef PUT
    return k;
}

typedef struct outcome {
    gmp_err e;
    char err[256];
    size_t ents;
    uint64_t digest;
    size_t flat;
} outcome;

/* mode 0: two passes, never flat, 1: two passes, 2: one pass keeping "frames" */
static outcome flat_run(const char *b, size_t len, int mode, const gmp_pickle_limits *lim,
                        size_t stop_at, int husk)
{
    outcome o;
    memset(&o, 0, sizeof o);
    rec r = {0};
    r.noflat = mode == 0;
    r.sparse = mode == 2 ? "frames" : NULL;
    r.stop_at = stop_at;
    r.husk = husk;
    o.e = stream(b, len, &r, lim, o.err, sizeof o.err);
    o.ents = r.ents;
    o.digest = r.ent_digest;
    o.flat = gmp_pkstream_flat_entries(r.ps);
    gmp_pkstream_free(r.ps);
    return o;
}

/* The same outcome (code, message, entries handed over and their digest) in the three modes,
 * whatever comes between the entries and their APPENDS (but a sparse pass's refusal of a fetch it
 * did not keep, after which the importer reads the file again in two passes); returns the
 * two-pass run's. */
static outcome flat_same(const char *b, size_t len, const gmp_pickle_limits *lim, size_t stop_at,
                         int husk)
{
    outcome ref = flat_run(b, len, 0, lim, stop_at, husk);
    assert_int_equal(ref.flat, 0);
    outcome two = {0};
    for (int mode = 1; mode <= 2; mode++) {
        outcome o = flat_run(b, len, mode, lim, stop_at, husk);
        if (mode == 2 && o.e != GMP_OK && strstr(o.err, "not defined"))
            continue; /* a fetch of what a sparse pass does not keep: read again in two passes */
        if (o.e != ref.e || strcmp(o.err, ref.err) != 0 || o.ents != ref.ents ||
            (!husk && o.digest != ref.digest))
            fail_msg("mode %d: %d '%s' %zu entries, expected %d '%s' %zu", mode, o.e, o.err, o.ents,
                     ref.e, ref.err, ref.ents);
        if (mode == 1)
            two = o;
    }
    return two;
}

static void test_flat(void **state)
{
    (void)state;
    static const struct {
        const char *ins;
        size_t len;
    } ins[] = {
#define I(s) {s, sizeof s - 1}
        I(""),
        I("0"),
        I("1"),
        I("\x8c\x01k\x94K\x05s"),
        I("2"),
        I("\x94"
          "0"),
        I("(t"),
        I("\x85"),
        I("]\x94"),
        I("N"),
        I("."),
        I("h\x04"),
        I("(\x8c\x01kK\x01u"),
        I("(K\x01e"),
        I("a"),
        I("(]\x94K\x01"
          "e"),
        I("\x8c\x06"
          "frames]\x94s"),
        I("}\x94(K\x01K\x02u"),
#undef I
    };
    static char b[1 << 16];
    for (size_t n = 3; n <= 200; n += 197) {
        /* most entries are read flat (not the first, which defines the keys, nor one that
         * the parser's stack grows for), in two passes too once the keys' counts pass 127 (then
         * kept for ever) */
        size_t len = flat_snapshot(b, n, 0, "", 0);
        outcome all = flat_same(b, len, NULL, 0, 0);
        assert_int_equal(all.e, GMP_OK);
        assert_int_equal(all.ents, n);
        assert_true(flat_run(b, len, 2, NULL, 0, 0).flat + 4 >= n);
        if (n == 200)
            assert_true(all.flat + 4 >= n);
        for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
            for (size_t at = 1; at <= n; at += at < 3 ? 1 : n / 2) {
                len = flat_snapshot(b, n, at, ins[i].ins, ins[i].len);
                flat_same(b, len, NULL, 0, 0);
                flat_same(b, len, NULL, 0, 1);
            }
        /* a consumer that stops, the nesting bound */
        len = flat_snapshot(b, n, 0, "", 0);
        for (size_t stop = 1; stop <= n; stop += 1 + stop * 3)
            assert_int_equal(flat_same(b, len, NULL, stop, 0).ents, stop);
        gmp_pickle_limits lim;
        for (size_t depth = 1; depth <= 5; depth++) {
            gmp_pickle_limits_default(&lim);
            lim.max_depth = depth;
            flat_same(b, len, &lim, 0, 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_equal_tree),
        cmocka_unit_test(test_truncations_and_stop),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_sparse),
        cmocka_unit_test(test_flat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
