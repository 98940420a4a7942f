/* bench_store: re-writes a trace with every zstd frame stored (Raw blocks, not compressed), as
 * gmp_writer_opts.store writes them, so that the report of a stored trace can be timed against the
 * compressed one (the importer's temporary trace is written stored). Each frame's content is kept
 * byte for byte (decompressed, then written with gmp_writer_stored_frame); skippable frames are
 * copied as they are. Not a test: it prints the sizes.
 *
 *   bench_store IN.zst OUT.zst */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "gmp_writer.h"

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_store IN.zst OUT.zst\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    size_t cap = 1 << 20, n = 0;
    unsigned char *in = malloc(cap);
    size_t k;
    while (in && (k = fread(in + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            unsigned char *m = realloc(in, cap *= 2);
            if (!m) {
                free(in);
                in = NULL;
            }
            in = m;
        }
    }
    fclose(f);
    if (!in) {
        fprintf(stderr, "bench_store: out of memory\n");
        return 1;
    }
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    size_t pos = 0, frames = 0, outcap = 0;
    unsigned char *out = NULL;
    int rc = 0;
    while (pos < n && !rc) {
        size_t fl = ZSTD_findFrameCompressedSize(in + pos, n - pos);
        if (ZSTD_isError(fl)) {
            fprintf(stderr, "bench_store: bad frame at byte %zu: %s\n", pos, ZSTD_getErrorName(fl));
            rc = 1;
            break;
        }
        uint32_t magic = (uint32_t)in[pos] | (uint32_t)in[pos + 1] << 8 |
                         (uint32_t)in[pos + 2] << 16 | (uint32_t)in[pos + 3] << 24;
        if ((magic & 0xFFFFFFF0u) == 0x184D2A50u) { /* a skippable frame */
            rc = write_all(fd, in + pos, fl) ? 1 : 0;
        } else {
            unsigned long long cs = ZSTD_getFrameContentSize(in + pos, fl);
            if (cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR ||
                cs > ((size_t)1 << 34)) {
                fprintf(stderr, "bench_store: frame at byte %zu has no content size\n", pos);
                rc = 1;
                break;
            }
            if (cs > outcap) {
                free(out);
                outcap = cs ? (size_t)cs : 1;
                out = malloc(outcap);
            }
            size_t got = out ? ZSTD_decompressDCtx(dc, out, outcap, in + pos, fl) : 0;
            if (!out || ZSTD_isError(got) || got != cs ||
                gmp_writer_stored_frame(fd, out, got) < 0) {
                fprintf(stderr, "bench_store: frame at byte %zu not re-written\n", pos);
                rc = 1;
            }
        }
        pos += fl;
        frames++;
    }
    if (close(fd) < 0)
        rc = 1;
    struct stat st;
    if (!rc && stat(argv[2], &st) == 0)
        printf("frames: %zu\nin: %zu bytes\nout: %lld bytes\n", frames, n, (long long)st.st_size);
    ZSTD_freeDCtx(dc);
    free(out);
    free(in);
    return rc;
}
