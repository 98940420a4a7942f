/* test_pickle_stream_window: the streaming pickle reader (formats/import/gmp_pickle_stream.c)
 * reading a file through a small window, against the same bytes in memory.
 *
 * A file is read through a window that is refilled whenever an opcode does not fit in what is
 * left of it; the in-place loops of both passes stop short of its end and hand over to the
 * opcode-by-opcode code. This test builds the reader with a window of 4097 bytes (instead of
 * 1 MiB), so that its ends fall inside every kind of opcode of the real snapshots
 * (tests/data/torch-snapshots), and checks that a file gives the same items (digests), or the
 * same error, as the same bytes in memory: whole, cut at many places, and with a byte changed.
 *
 * Built a second time as test_pickle_stream_ra (ctest torch_pickle_stream_ra): files read whole
 * by the read-ahead thread in pieces of 4 KiB, the first pass on that thread and the parse
 * overlapping it (keeping every memoized value until the counts arrive); there it also checks
 * the same outcome under tight memory limits and with a consumer that stops the parse. */
#ifndef GMP_PKSTREAM_RA_TEST
#define GMP_PKSTREAM_INBUF 4097u
#define GMP_PKSTREAM_RA_MAX 0 /* through the window, never whole */
#endif
#include "gmp_pickle_stream.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

typedef struct rec {
    uint64_t digest;
    size_t items;
    gmp_pkstream *ps;
} rec;

#ifdef GMP_PKSTREAM_RA_TEST /* fewer: a thread per run (the TSan stage runs this one) */
#define CUT_STEP 19
#define CHANGE_STEP 1009
#else
#define CUT_STEP 97
#define CHANGE_STEP 211
#endif

static const gmp_pickle_limits *g_lim; /* NULL: the defaults */
static size_t g_stop_at;               /* the consumer stops at this item (1-based; 0: never) */

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
}

static uint64_t dig(const gmp_pkv *v, int depth)
{
    uint64_t h = mix(0, v->type);
    switch (v->type) {
    case GMP_PK_NONE: break;
    case GMP_PK_BOOL:
    case GMP_PK_INT:
    case GMP_PK_FLOAT: h = mix(mix(h, v->big), v->v.u); break;
    case GMP_PK_STR:
    case GMP_PK_BYTES:
        for (uint32_t i = 0; i < v->v.o->n; i++)
            h = mix(h, (unsigned char)v->v.o->d.s[i]);
        break;
    default:
        if (depth > 8 || !v->v.o->d.items)
            break;
        for (size_t i = 0; i < (v->type == GMP_PK_DICT ? 2 : 1) * (size_t)v->v.o->n; i++)
            h = mix(h, dig(&v->v.o->d.items[i], depth + 1));
    }
    return h;
}

static int on_item(void *ctx, int kind, uint32_t index, const gmp_pkv *item, char *err,
                   size_t errlen)
{
    rec *r = ctx;
    r->digest = mix(mix(mix(r->digest, (uint64_t)kind), index), dig(item, 0));
    r->items++;
    if (r->items == g_stop_at) {
        snprintf(err, errlen, "stopped at item %zu", r->items);
        return 1;
    }
    /* as the importer: a frames list made into a tag, its items released */
    const gmp_pkv *fr = gmp_pkv_dict_get(item, "frames");
    if (fr && fr->type == GMP_PK_LIST && !fr->v.o->tag) {
        fr->v.o->tag = 1;
        gmp_pkstream_husk(r->ps, fr->v.o);
    }
    return 0;
}

static gmp_err run_one(const unsigned char *b, size_t n, int fd, rec *r, char *err, size_t errlen)
{
    gmp_pkstream_cb cb = {"segments", "device_traces", on_item, r};
    r->ps = gmp_pkstream_new(g_lim, &cb);
    assert_non_null(r->ps);
    if (fd < 0)
        return gmp_pkstream_run_mem(r->ps, b, n, err, errlen);
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, b, n, 0), (ssize_t)n);
    return gmp_pkstream_run_fd(r->ps, fd, err, errlen);
}

static int same(const unsigned char *b, size_t n, int fd)
{
    rec m = {0}, f = {0};
    char em[256], ef[256];
    gmp_err a = run_one(b, n, -1, &m, em, sizeof em);
    gmp_err c = run_one(b, n, fd, &f, ef, sizeof ef);
    if (a != c || (a != GMP_OK && strcmp(em, ef) != 0) || m.items != f.items ||
        m.digest != f.digest)
        fail_msg("%zu bytes: memory %d (%s) %zu items, file %d (%s) %zu items", n, a, em, m.items,
                 c, ef, f.items);
    gmp_pkstream_free(m.ps);
    gmp_pkstream_free(f.ps);
    return a == GMP_OK;
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

static void test_window(void **state)
{
    (void)state;
    static const char *const real[] = {"small-step.pickle", "transformer-forward-bf16.pickle",
                                       "transformer-train-step-adamw.pickle",
                                       "qwen3-expandable-3gpu-oom.pickle"};
    char path[] = "/tmp/gmp-test-pkwindow-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        size_t n;
        unsigned char *b = slurp(real[i], &n);
        assert_true(same(b, n, fd));
        if (i == 0) { /* the small one: cut and changed at many places */
            for (size_t k = 0; k < n; k += 1 + k / CUT_STEP)
                assert_false(same(b, k, fd));
            for (size_t k = 2; k < n; k += CHANGE_STEP) {
                unsigned char keep = b[k];
                b[k] = (unsigned char)(keep ^ (k & 0xff ? k & 0xff : 1));
                same(b, n, fd);
                b[k] = keep;
            }
        }
        free(b);
    }
    close(fd);
}

#ifdef GMP_PKSTREAM_RA_TEST
/* The file read whole (first pass overlapping the parse) and through the window: the same
 * outcome (memory is not compared: only a file's window counts in the memory held). */
static int same_file(const unsigned char *b, size_t n, int fd)
{
    rec w = {0}, f = {0};
    char ew[256], ef[256];
    g_ra_off = 1;
    gmp_err a = run_one(b, n, fd, &w, ew, sizeof ew);
    g_ra_off = 0;
    gmp_err c = run_one(b, n, fd, &f, ef, sizeof ef);
    if (a != c || (a != GMP_OK && strcmp(ew, ef) != 0) || w.items != f.items ||
        w.digest != f.digest)
        fail_msg("%zu bytes: window %d (%s) %zu items, whole %d (%s) %zu items", n, a, ew, w.items,
                 c, ef, f.items);
    gmp_pkstream_free(w.ps);
    gmp_pkstream_free(f.ps);
    return a == GMP_OK;
}

/* The first pass on the read-ahead thread while the parse keeps every memoized value: under
 * memory limits from far too small to enough, the file fails (GMP_ERR_LIMIT, same line) or
 * passes exactly where memory does; and a consumer that stops at item k gets its line, with the
 * file whole and cut after item k (a fault later in the input). */
static void test_overlap(void **state)
{
    (void)state;
    char path[] = "/tmp/gmp-test-pkra-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    size_t n;
    unsigned char *b = slurp("transformer-forward-bf16.pickle", &n);
    gmp_pickle_limits lim;
    gmp_pickle_limits_default(&lim);
    lim.max_memo = 20000; /* small enough that the first pass may overlap under these limits */
    size_t lo = 0, hi = 0;
    for (size_t m = 1u << 20; m <= (6u << 20); m += 192u << 10) {
        lim.max_memory = m;
        g_lim = &lim;
        if (same_file(b, n, fd))
            hi = hi ? hi : m;
        else
            lo = m;
    }
    g_lim = NULL;
    assert_true(lo > 0 && hi > lo); /* both outcomes were seen */
    /* the limit reached while the parse still kept everything: counted as without */
    assert_true((uint64_t)lo >= INBUF + 20 * (uint64_t)lim.max_memo + ((uint64_t)1 << 16));
    size_t items = 0;
    {
        rec r = {0};
        char err[256];
        assert_int_equal(run_one(b, n, -1, &r, err, sizeof err), GMP_OK);
        items = r.items;
        gmp_pkstream_free(r.ps);
    }
    assert_true(items > 100);
    for (size_t k = 1; k < items; k += 1 + k) {
        g_stop_at = k;
        assert_false(same(b, n, fd));
        rec r = {0};
        char err[256];
        assert_int_equal(run_one(b, n, fd, &r, err, sizeof err), GMP_ERR_FORMAT);
        char want[64];
        snprintf(want, sizeof want, "stopped at item %zu", k);
        assert_string_equal(err, want);
        assert_true(gmp_pkstream_stopped_by_consumer(r.ps));
        gmp_pkstream_free(r.ps);
        /* cut far after item k: the consumer's line still */
        assert_false(same(b, n - n / 8, fd));
    }
    g_stop_at = 0;
    free(b);
    close(fd);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),
#ifdef GMP_PKSTREAM_RA_TEST
        cmocka_unit_test(test_overlap),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
