/* Frame rules through their caches (formats/replay/gmp_frames.h): the memo of frame facts
 * (gmp_frame_facts_memo, read through gmp_frame_facts_class and gmp_frames_category_of) and the
 * replay's per-node cache (gmp_replay_category, gmp_replay_frame_facts) must answer exactly what
 * the rules answer without them (gmp_frame_classify, gmp_frames_category), over frames made from
 * the rule table's own patterns and random ones, after the memo starts afresh at its bound, and
 * during a replay whose stacks share frames (a trie), are deeper than the 128 frames the category
 * looks at, and whose modules are defined while it runs. The glob is checked against a plain
 * recursive one. Run all: test_frames; one: test_frames NAME (a cmocka filter). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_frames.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "replay_tb.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* Pieces that the rules' patterns are made of, and others. */
static const char *const pieces[] = {
    "",           "a",        "/",          "::",         "_",
    "*",          "torch",    "optim",      "forward",    "backward",
    "Backward",   ".py",      "lib",        ".so",        "Py",
    "at::",       "c10::",    "std::",      "__",         "site-",
    "packages",   "python3",  "(",          ")",          "<",
    ">",          " ",        "Accumulate", "Grad",       "apply",
    "to",         "cuda",     "__init__",   "_foreach_",  "module.py",
    "nn/",        "modules/", "Engine::",   "autograd::", "fused",
    "_adam",      "x",        "<frozen ",   "importlib",  "(anonymous namespace)",
    "operator()", "-3",       "dist-",
};
#define NPIECES (sizeof pieces / sizeof pieces[0])

/* A string made from pattern p (a rule's glob): each `*` replaced by random pieces. */
static size_t from_pattern(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    for (; *p && n + 64 < cap; p++) {
        if (*p != '*') {
            out[n++] = *p;
            continue;
        }
        for (uint32_t k = rnd(4); k-- > 0;) {
            const char *s = pieces[rnd(NPIECES)];
            size_t l = strlen(s);
            if (n + l + 64 < cap) {
                memcpy(out + n, s, l);
                n += l;
            }
        }
    }
    out[n] = 0;
    return n;
}

static size_t random_string(char *out, size_t cap)
{
    size_t n = 0;
    for (uint32_t k = rnd(6); k-- > 0;) {
        const char *s = pieces[rnd(NPIECES)];
        size_t l = strlen(s);
        if (n + l + 1 < cap) {
            memcpy(out + n, s, l);
            n += l;
        }
    }
    out[n] = 0;
    return n;
}

/* A field: from one of the rules' patterns (any field of any rule: the rules also test fields
 * they do not name), or random, or empty. */
static size_t random_field(char *out, size_t cap)
{
    uint32_t c = rnd(8);
    if (c == 0) {
        out[0] = 0;
        return 0;
    }
    if (c <= 4) {
        const gmp_frame_rule *r = gmp_frame_rule_at(rnd((uint32_t)gmp_frame_rule_count()));
        const char *p = rnd(3) == 0 ? r->module : rnd(2) ? r->function : r->file;
        if (p)
            return from_pattern(p, out, cap);
    }
    return random_string(out, cap);
}

typedef struct frame_buf {
    char fn[512], file[512], mod[512];
    gmp_frame_info fi;
} frame_buf;

static void random_frame(frame_buf *b)
{
    size_t a = random_field(b->fn, sizeof b->fn);
    size_t f = random_field(b->file, sizeof b->file);
    size_t m = random_field(b->mod, sizeof b->mod);
    if (rnd(4) == 0 && a + 12 < sizeof b->fn) { /* parameters, a return type */
        memcpy(b->fn + a, "(int, long)", 12);
        a += 11;
    }
    if (rnd(10) == 0) { /* a Python method that the categories name */
        static const char *const py[] = {"to", "cuda", "_apply", "__init__", "forward", "step"};
        a = (size_t)snprintf(b->fn, sizeof b->fn, "%s", py[rnd(6)]);
        f = (size_t)snprintf(b->file, sizeof b->file, "%s", rnd(2) ? "/w/model.py" : "m.py");
    }
    b->fi.function = (gmp_str){b->fn, (uint32_t)a};
    b->fi.file = (gmp_str){b->file, (uint32_t)f};
    b->fi.module = (gmp_str){b->mod, (uint32_t)m};
}

/* gmp_frame_glob against a plain recursive glob (`*` any run of bytes, nothing else special). */
static int glob_ref(const char *p, const char *s, size_t n)
{
    if (!*p)
        return n == 0;
    if (*p == '*') {
        for (size_t i = 0; i <= n; i++)
            if (glob_ref(p + 1, s + i, n - i))
                return 1;
        return 0;
    }
    return n && *p == *s && glob_ref(p + 1, s + 1, n - 1);
}

static void test_glob(void **state)
{
    static const char alpha[] = "ab*/";
    char p[16], s[24];
    int matched = 0;
    for (int it = 0; it < 200000; it++) {
        size_t pn = rnd(10), sn = rnd(20);
        for (size_t i = 0; i < pn; i++)
            p[i] = alpha[rnd(4)];
        p[pn] = 0;
        for (size_t i = 0; i < sn; i++) /* mostly a, b, /; now and then a literal `*` */
            s[i] = alpha[rnd(2) ? rnd(2) : rnd(8) ? 3 : 2];
        s[sn] = 0;
        int want = glob_ref(p, s, sn);
        matched += want;
        if (gmp_frame_glob(p, s, sn) != want) {
            fprintf(stderr, "glob(\"%s\", \"%s\"): %d, expected %d\n", p, s, !want, want);
            fail();
        }
    }
    assert_true(matched > 1000); /* both answers were exercised */
    /* an empty subject (whose pointer may be NULL) matches only stars */
    assert_true(gmp_frame_glob("", NULL, 0) && gmp_frame_glob("**", NULL, 0));
    assert_false(gmp_frame_glob("*a*", NULL, 0) || gmp_frame_glob("a", "", 0));
    /* literals between stars are found in order, not overlapping the prefix or the suffix */
    assert_true(gmp_frame_glob("ab*b*ba", "abba", 4) == 0 &&
                gmp_frame_glob("ab*ba", "aba", 3) == 0);
    assert_true(gmp_frame_glob("a*b*a*b", "aabab", 5) && !gmp_frame_glob("*ba*ab*", "abba", 4));
    /* the rules' own patterns on strings made from them */
    char buf[512];
    for (size_t i = 0; i < gmp_frame_rule_count(); i++) {
        const gmp_frame_rule *r = gmp_frame_rule_at(i);
        const char *pats[3] = {r->function, r->file, r->module};
        for (int k = 0; k < 3; k++) {
            if (!pats[k])
                continue;
            for (int it = 0; it < 50; it++) {
                size_t n =
                    it & 1 ? from_pattern(pats[k], buf, sizeof buf) : random_field(buf, sizeof buf);
                assert_int_equal(gmp_frame_glob(pats[k], buf, n), glob_ref(pats[k], buf, n));
            }
            assert_true(gmp_frame_glob(pats[k], buf, from_pattern(pats[k], buf, sizeof buf)));
        }
    }
}

/* One frame through the memo m (twice: computed, then remembered) and without it. */
static void check_frame(gmp_frame_memo *m, const gmp_frame_info *f, int *classes)
{
    gmp_frame_class want = gmp_frame_classify(f, NULL);
    classes[want]++;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(gmp_frame_facts_class(gmp_frame_facts_memo(m, f)), want);
    }
}

static void check_stack(gmp_frame_memo *m, const frame_buf *fb, size_t n, int *cats)
{
    gmp_frame_info fi[8];
    for (size_t i = 0; i < n; i++)
        fi[i] = fb[i].fi;
    char rbuf[256];
    size_t rl = rnd(3) ? 0 : random_field(rbuf, sizeof rbuf);
    gmp_str range = {rbuf, (uint32_t)rl};
    gmp_category want = gmp_frames_category(fi, n, range);
    cats[want]++;
    unsigned all = 0;
    for (size_t i = 0; i < n; i++)
        all |= gmp_frame_facts_memo(m, &fi[i]);
    assert_int_equal(gmp_frames_category_of(all, range), want);
}

static void test_memo_same(void **state)
{
    gmp_frame_memo *m = gmp_frame_memo_new();
    assert_non_null(m);
    int classes[3] = {0}, cats[GMP_CAT_COUNT] = {0};
    frame_buf *fb = calloc(8, sizeof *fb);
    assert_non_null(fb);
    for (int it = 0; it < 20000; it++) {
        size_t n = 1 + rnd(8);
        for (size_t i = 0; i < n; i++) {
            if (it > 100 && rnd(3) == 0 && i > 0) { /* frames repeat, as in real stacks */
                fb[i] = fb[i - 1];
                fb[i].fi.function.ptr = fb[i].fn;
                fb[i].fi.file.ptr = fb[i].file;
                fb[i].fi.module.ptr = fb[i].mod;
            } else {
                random_frame(&fb[i]);
            }
            check_frame(m, &fb[i].fi, classes);
            check_frame(NULL, &fb[i].fi, classes); /* no memo (out of memory) */
        }
        check_stack(m, fb, n, cats);
    }
    /* every answer was seen */
    for (int c = 0; c < 3; c++)
        assert_true(classes[c] > 100);
    for (int c = 0; c < GMP_CAT_COUNT; c++)
        assert_true(cats[c] > 20);
    free(fb);
    gmp_frame_memo_free(m);
}

/* Frames whose keys add up past the memo's 32 MiB bound: it starts afresh (more than once), and
 * the frames it forgot, asked again, still get the rules' answers. */
static void test_memo_restart(void **state)
{
    gmp_frame_memo *m = gmp_frame_memo_new();
    assert_non_null(m);
    enum { N = 1000, LEN = 100000 }; /* 100 MB of keys */
    char *big = malloc(LEN + 64);
    assert_non_null(big);
    int classes[3] = {0};
    static const char *const heads[] = {"at::native::", "std::", "user_code_", "_Py", "c10::"};
    gmp_frame_class want[N];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            const char *h = heads[i % 5];
            size_t hl = strlen(h);
            memcpy(big, h, hl);
            memset(big + hl, 'a' + (i % 26), LEN - hl);
            snprintf(big + LEN - 16, 16, "%015d", i); /* distinct keys */
            gmp_frame_info f = {{big, LEN}, {i % 3 ? "x.py" : "", i % 3 ? 4u : 0u}, {"", 0}};
            if (!round)
                want[i] = gmp_frame_classify(&f, NULL);
            classes[want[i]]++;
            for (int k = 0; k < 2; k++) /* computed, then remembered */
                assert_int_equal(gmp_frame_facts_class(gmp_frame_facts_memo(m, &f)), want[i]);
        }
    }
    assert_true(classes[GMP_FRAME_USER] && classes[GMP_FRAME_FRAMEWORK] &&
                classes[GMP_FRAME_INTERNAL]);
    free(big);
    gmp_frame_memo_free(m);
}

/* ---- the replay's cache ---- */

typedef struct cat_check {
    int checked, mismatches, deep;
    int cats[GMP_CAT_COUNT];
} cat_check;

/* What the rules say without any cache: the first 128 frames of the stack as
 * gmp_replay_stack_frames gives them (Python frames by name and file, native ones by their
 * module), and the range's names innermost first joined by '|'. */
static gmp_category category_ref(gmp_replay *rp, uint32_t stack, uint32_t range)
{
    enum { NF = 128 };
    static gmp_replay_frame fr[NF];
    static gmp_frame_info fi[NF];
    size_t n = stack ? gmp_replay_stack_frames(rp, stack, fr, NF) : 0;
    if (n > NF)
        n = NF;
    for (size_t i = 0; i < n; i++) {
        memset(&fi[i], 0, sizeof fi[i]);
        if (fr[i].kind == GMP_FRAME_PYTHON) {
            fi[i].function = fr[i].function;
            fi[i].file = fr[i].file;
        } else if (fr[i].module) {
            fi[i].module = fr[i].module->path;
        }
    }
    char path[1024];
    size_t pl = 0;
    gmp_reader *r = gmp_replay_reader(rp);
    for (uint32_t id = range; id;) {
        const gmp_rec_range *x = gmp_reader_range(r, id);
        if (!x)
            break;
        gmp_str nm = gmp_reader_string(r, x->name);
        if (pl)
            path[pl++] = '|';
        memcpy(path + pl, nm.ptr, nm.len);
        pl += nm.len;
        id = x->parent;
    }
    return gmp_frames_category(fi, n, (gmp_str){path, (uint32_t)pl});
}

/* The class of the innermost frame of stack through gmp_replay_frame_facts is the rules'. */
static int frame_facts_ok(gmp_replay *rp, uint32_t stack)
{
    gmp_replay_frame fr[1];
    if (!gmp_replay_stack_frames(rp, stack, fr, 1))
        return gmp_replay_frame_facts(rp, stack) == 0;
    gmp_frame_info fi;
    memset(&fi, 0, sizeof fi);
    if (fr[0].kind == GMP_FRAME_PYTHON) {
        fi.function = fr[0].function;
        fi.file = fr[0].file;
    } else if (fr[0].module) {
        fi.module = fr[0].module->path;
    }
    return gmp_frame_facts_class(gmp_replay_frame_facts(rp, stack)) ==
           gmp_frame_classify(&fi, NULL);
}

static gmp_err cat_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    cat_check *c = ctx;
    const gmp_rec_mem *m = &ev->rec->u.mem;
    gmp_category want = category_ref(rp, m->stack, m->range);
    gmp_category got = gmp_replay_category(rp, m->stack, m->range);
    c->checked++;
    c->cats[want]++;
    c->mismatches += got != want;
    gmp_replay_frame fr[1];
    if (m->stack && gmp_replay_stack_frames(rp, m->stack, fr, 1) > 128)
        c->deep++;
    if (m->stack)
        c->mismatches += !frame_facts_ok(rp, m->stack);
    return GMP_OK;
}

static const gmp_replay_ops cat_ops = {.alloc = cat_alloc};

static void test_replay_category(void **state)
{
    tb b;
    tb_open(&b, NULL);
    static const char *const files[] = {"train.py", "/usr/lib/python3/site-packages/torch/x.py",
                                        "/opt/torch/optim/adamw.py", "model.py", "??"};
    static const char *const fns[] = {
        "forward",    "main", "step",     "torch::autograd::Engine::run",
        "_call_impl", "to",   "__init__", "AccumulateGrad::apply",
        "loss_fn"};
    uint32_t fstr[5], nstr[9];
    for (int i = 0; i < 5; i++)
        fstr[i] = tb_str(&b, files[i]);
    for (int i = 0; i < 9; i++)
        nstr[i] = tb_str(&b, fns[i]);
    uint32_t ranges[5] = {0, tb_range(&b, "train/optimizer"), tb_range(&b, "train/forward"),
                          tb_range(&b, "train/backward"), tb_range(&b, "eval")};
    uint32_t api = tb_str(&b, "cudaMalloc");
    /* a trie: each new stack extends a random earlier one (or starts one) */
    enum { NS = 3000 };
    static uint32_t st[NS];
    uint32_t nst = 0;
    uint64_t t = 1000, addr = 0x100000;
    for (int i = 0; i < NS; i++) {
        uint32_t parent = nst && rnd(8) ? st[rnd(nst)] : 0;
        uint32_t id;
        if (rnd(4) == 0)
            id = gmp_writer_stack_native(b.w, parent,
                                         0x7f0000000000ull + rnd(4) * 0x100000 + rnd(64));
        else
            id = gmp_writer_stack_python(b.w, parent, fstr[rnd(5)], nstr[rnd(9)], rnd(100));
        assert_true(id != 0);
        st[nst++] = id;
        if (i == NS / 2 || i == NS / 2 + 500) { /* events so far read before the module */
            gmp_writer_sync(b.w, t);            /* written with the events of this cycle */
        }
        if (i == NS / 2) /* modules defined while the trace runs */
            tb_module(&b, 1, "/usr/lib/libtorch_cuda.so", 0x7f0000000000ull, 0x7f0000000000ull,
                      0x100000);
        if (i == NS / 2 + 500)
            tb_module(&b, 2, "/usr/lib/libc10_cuda.so", 0x7f0000100000ull, 0x7f0000100000ull,
                      0x100000);
        tb_alloc(&b, 0, t++, 0, GMP_MEM_DEVICE, addr, 256, api, ranges[rnd(5)], id);
        tb_free(&b, 0, t++, 0, GMP_MEM_DEVICE, addr, 256, api);
        addr += 256;
    }
    /* a chain deeper than the 128 frames the category looks at: the category is decided by a
     * frame near the top (forward) below one past the 128th (optimizer) */
    uint32_t deep = gmp_writer_stack_python(b.w, 0, fstr[2], nstr[2], 1);
    for (int i = 0; i < 200; i++) {
        deep = gmp_writer_stack_python(b.w, deep, fstr[i == 199 ? 0 : 3], nstr[i == 199 ? 0 : 8],
                                       (uint32_t)i);
        tb_alloc(&b, 0, t++, 0, GMP_MEM_DEVICE, addr, 256, api, 0, deep);
        tb_free(&b, 0, t++, 0, GMP_MEM_DEVICE, addr, 256, api);
    }
    tb_close(&b);

    gmp_reader *r;
    gmp_replay *rp;
    cat_check c;
    memset(&c, 0, sizeof c);
    assert_int_equal(gmp_reader_open(&r, b.path, NULL), GMP_OK);
    assert_int_equal(gmp_replay_new(&rp, r, NULL), GMP_OK);
    assert_int_equal(gmp_replay_add(rp, &cat_ops, &c), GMP_OK);
    assert_int_equal(gmp_replay_run(rp), GMP_OK);
    assert_int_equal(c.checked, NS + 200);
    assert_int_equal(c.mismatches, 0);
    assert_true(c.deep > 50);
    for (int k = 0; k < GMP_CAT_COUNT; k++)
        assert_true(c.cats[k] > 0);
    /* after the run, every (stack, range), the deep one included, in another order */
    for (int i = NS; i-- > 0;)
        for (int k = 0; k < 5; k++)
            assert_int_equal(gmp_replay_category(rp, st[i], ranges[k]),
                             category_ref(rp, st[i], ranges[k]));
    for (int i = 0; i < NS; i++) /* native frames cached before their module was defined */
        assert_true(frame_facts_ok(rp, st[i]));
    assert_int_equal(gmp_replay_category(rp, deep, 0), category_ref(rp, deep, 0));
    assert_int_equal(gmp_replay_category(rp, deep, 0), GMP_CAT_ACTIVATION);
    assert_int_equal(gmp_replay_category(rp, 0, ranges[1]), GMP_CAT_OPTIMIZER);
    assert_int_equal(gmp_replay_category(rp, 999999, 0), GMP_CAT_OTHER); /* unknown stack */
    gmp_replay_free(rp);
    gmp_reader_close(r);
    unlink(b.path);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob),
        cmocka_unit_test(test_memo_same),
        cmocka_unit_test(test_memo_restart),
        cmocka_unit_test(test_replay_category),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
