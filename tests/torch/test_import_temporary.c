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
#include "trace_build.h"

/* Frames of f[0..n) made of Raw blocks only (walked by their 3-byte block headers after the 9-byte
 * frame header the writer uses: 4-byte size, single segment, checksum). */
static size_t raw_frames(const uint8_t *f, size_t n)
{
    size_t raws = 0;
    for (size_t pos = 0; pos < n;) {
        size_t fs = ZSTD_findFrameCompressedSize(f + pos, n - pos);
        assert_false(ZSTD_isError(fs));
        if (f[pos + 4] == (0x80 | 0x20 | 0x04)) {
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
                raws++;
            }
        }
        pos += fs;
    }
    return raws;
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
        size_t na, nb, ca, cb, fra, frb;
        uint8_t *pa = tb_read_file(a, &na), *pb = tb_read_file(b, &nb);
        assert_true(pa && pb);
        uint8_t *xa = tb_zstd_content(pa, na, &ca, &fra), *xb = tb_zstd_content(pb, nb, &cb, &frb);
        assert_true(xa && xb);
        size_t rawa = raw_frames(pa, na), rawb = raw_frames(pb, nb);
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
