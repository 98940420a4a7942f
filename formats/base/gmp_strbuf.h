/* gmp_strbuf: a growing byte string, always NUL-terminated, for text built piece by piece (a
 * renderer's line, a file assembled in memory). A failed allocation is remembered (oom) and later
 * additions do nothing, so callers check once at the end. Zero-initialise it; free p when done. */
#ifndef GMP_STRBUF_H
#define GMP_STRBUF_H

#include <stddef.h>

typedef struct gmp_strbuf {
    char *p; /* NULL until something is added; then NUL-terminated */
    size_t n, cap;
    int oom;
} gmp_strbuf;

void gmp_strbuf_add(gmp_strbuf *b, const void *s, size_t n);
void gmp_strbuf_puts(gmp_strbuf *b, const char *s);
void gmp_strbuf_printf(gmp_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
