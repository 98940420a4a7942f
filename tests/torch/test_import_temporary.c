/* gmp_import_torch_flags with GMP_IMPORT_TORCH_TEMPORARY (the commands' imported inputs): on every
 * real snapshot of tests/data/torch-snapshots the trace is written stored (every block of every
 * frame a Raw block) and holds byte for byte what the compressed trace of `gpumemprof import`
 * holds, as libzstd's decoder (an outside oracle: it also checks each frame's checksum) gives
 * both; without the flag the frames are compressed. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "gmp_import_torch.h"

static uint8_t *read_whole(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    uint8_t *p = malloc((size_t)len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* Every frame's content, concatenated (libzstd); *raw_frames counts frames made of Raw blocks only
 * (walked by their 3-byte block headers after the 9-byte frame header the writer uses). */
static uint8_t *content(const uint8_t *f, size_t n, size_t *out_n, size_t *frames,
                        size_t *raw_frames)
{
    size_t cap = 1, len = 0;
    uint8_t *out = malloc(cap);
    assert_non_null(out);
    *frames = *raw_frames = 0;
    for (size_t pos = 0; pos < n;) {
        size_t fs = ZSTD_findFrameCompressedSize(f + pos, n - pos);
        assert_false(ZSTD_isError(fs));
        unsigned long long cs = ZSTD_getFrameContentSize(f + pos, fs);
        assert_true(cs != ZSTD_CONTENTSIZE_ERROR && cs != ZSTD_CONTENTSIZE_UNKNOWN);
        if (len + cs + 1 > cap) {
            cap = len + (size_t)cs + 1;
            out = realloc(out, cap);
            assert_non_null(out);
        }
        size_t got = ZSTD_decompress(out + len, (size_t)cs, f + pos, fs);
        assert_false(ZSTD_isError(got));
        len += got;
        if (f[pos + 4] == (0x80 | 0x20 | 0x04)) { /* 4-byte size, single segment, checksum */
            int raw = 1;
            size_t b = pos + 9, end = pos + fs - 4;
            for (;;) {
                assert_true(b + 3 <= end);
                uint32_t h = f[b] | (uint32_t)f[b + 1] << 8 | (uint32_t)f[b + 2] << 16;
                raw &= ((h >> 1) & 3) == 0;
                b += 3 + (raw ? (h >> 3) : 0);
                if (!raw || (h & 1))
                    break;
            }
            if (raw) {
                assert_int_equal(b, end);
                (*raw_frames)++;
            }
        }
        pos += fs;
        (*frames)++;
    }
    *out_n = len;
    return out;
}

static void import_to(const char *snap, unsigned flags, const char *out)
{
    FILE *f = fopen(out, "wb");
    assert_non_null(f);
    int fd = dup(fileno(f));
    fclose(f);
    char msg[512];
    gmp_import_torch_stats st;
    gmp_err e = gmp_import_torch_flags(snap, fd, flags, &st, msg, sizeof msg);
    if (e != GMP_OK)
        fail_msg("%s: %s", snap, msg);
}

static void test_temporary_is_stored_same_content(void **state)
{
    (void)state;
    DIR *d = opendir(GMP_TORCH_DATA);
    assert_non_null(d);
    struct dirent *de;
    int seen = 0;
    char a[] = "/tmp/gmp_imptmp_aXXXXXX", b[] = "/tmp/gmp_imptmp_bXXXXXX";
    int fa = mkstemp(a), fb = mkstemp(b);
    assert_true(fa >= 0 && fb >= 0);
    close(fa);
    close(fb);
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 8 || strcmp(de->d_name + l - 7, ".pickle") != 0)
            continue;
        char snap[4096];
        snprintf(snap, sizeof snap, "%s/%s", GMP_TORCH_DATA, de->d_name);
        import_to(snap, 0, a);
        import_to(snap, GMP_IMPORT_TORCH_TEMPORARY, b);
        size_t na, nb, ca, cb, fra, frb, rawa, rawb;
        uint8_t *pa = read_whole(a, &na), *pb = read_whole(b, &nb);
        uint8_t *xa = content(pa, na, &ca, &fra, &rawa), *xb = content(pb, nb, &cb, &frb, &rawb);
        assert_int_equal(fra, frb);
        assert_int_equal(rawb, frb); /* all stored */
        assert_true(rawa < fra);     /* compressed (a tiny frame may be stored by zstd itself) */
        assert_true(nb > na);
        assert_int_equal(ca, cb);
        assert_memory_equal(xa, xb, ca);
        free(pa);
        free(pb);
        free(xa);
        free(xb);
        seen++;
    }
    closedir(d);
    unlink(a);
    unlink(b);
    assert_true(seen >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temporary_is_stored_same_content),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
