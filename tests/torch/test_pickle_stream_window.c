/* test_pickle_stream_window: the streaming pickle reader (formats/import/gmp_pkstream_*.c)
 * reading a file through a small window, against the same bytes in memory.
 *
 * A file is read through a window that is refilled whenever an opcode does not fit in what is
 * left of it; the parse's in-place loop stops short of its end and hands over to the
 * opcode-by-opcode code. This test builds the reader with a window of 4097 bytes (instead of
 * 1 MiB), so that its ends fall inside every kind of opcode of the real snapshots
 * (tests/data/torch-snapshots), and checks that a file gives the same items (digests), or the
 * same error, as the same bytes in memory: whole, cut at many places, and with a byte changed. */
#define GMP_PKSTREAM_INBUF 4097u
/* the reader's files, built here with that window */
#include "gmp_pkstream_flat.c"
#include "gmp_pkstream_hand.c"
#include "gmp_pkstream_impl.c"
#include "gmp_pkstream_memo.c"
#include "gmp_pkstream_parse.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

typedef struct rec {
    uint64_t digest;
    size_t items;
    gmp_pkstream *ps;
} rec;

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
    (void)err, (void)errlen;
    rec *r = ctx;
    r->digest = mix(mix(mix(r->digest, (uint64_t)kind), index), dig(item, 0));
    r->items++;
    return 0;
}

static gmp_err run_one(const unsigned char *b, size_t n, int fd, rec *r, char *err, size_t errlen)
{
    gmp_pkstream_cb cb = {"segments", "device_traces", on_item, r};
    r->ps = gmp_pkstream_new(NULL, &cb);
    assert_non_null(r->ps);
    if (fd < 0)
        return gmp_pkstream_run_mem(r->ps, b, n, err, errlen);
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, b, n, 0), (ssize_t)n);
    return gmp_pkstream_run_fd(r->ps, fd, err, errlen);
}

static int same(const unsigned char *b, size_t n, int fd)
{
    rec m = {0};
    char em[256];
    gmp_err a = run_one(b, n, -1, &m, em, sizeof em);
    rec f = {0};
    char ef[256];
    gmp_err c = run_one(b, n, fd, &f, ef, sizeof ef);
    if (a != c || (a != GMP_OK && strcmp(em, ef) != 0) || m.items != f.items ||
        m.digest != f.digest)
        fail_msg("%zu bytes: memory %d (%s) %zu items, file %d (%s) %zu items", n, a, em, m.items,
                 c, ef, f.items);
    gmp_pkstream_free(f.ps);
    gmp_pkstream_free(m.ps);
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
            for (size_t k = 0; k < n; k += 1 + k / 97)
                assert_false(same(b, k, fd));
            for (size_t k = 2; k < n; k += 211) {
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
