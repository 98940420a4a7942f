/* py_lines: collectors/gmp_pyframes' readers called from a Python process through ctypes
 * (tests/python, mode `lines`): each code object's line at every instruction offset and its
 * names, compared by py_lines.py with what the interpreter itself says (co_lines, co_positions,
 * dis.findlinestarts, co_filename, co_qualname); and the line-table decoders on random tables, in
 * buffers of their exact size (AddressSanitizer builds catch any read outside them). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_pyframes.h"

int lines_init(int minor);
void lines_of(const void *code, const int *addrs, int *lines, int n);
int names_of(const void *code, char *file, int filecap, char *name, int namecap);
long fuzz_tables(int minor, unsigned seed, int iters);

static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* 1 when the running interpreter's layouts check out. */
int lines_init(int minor)
{
    return gmp_pyframes_init(minor, sym, NULL, 0);
}

/* lines[i]: the line of byte offset addrs[i] in code. */
void lines_of(const void *code, const int *addrs, int *lines, int n)
{
    for (int i = 0; i < n; i++)
        lines[i] = gmp_pyframes_line(code, addrs[i]);
}

static int copy(const char *s, size_t len, char *out, int cap)
{
    if (!s || cap <= 0 || len >= (size_t)cap)
        return -1;
    memcpy(out, s, len);
    out[len] = 0;
    return (int)len;
}

/* The code object's file and function name as UTF-8, NUL-terminated; 0, or -1 when either
 * cannot be read. */
int names_of(const void *code, char *file, int filecap, char *name, int namecap)
{
    char buf[4096];
    size_t len = 0;
    const char *f = gmp_pyframes_code_file(code, buf, sizeof buf, &len);
    if (copy(f, len, file, filecap) < 0)
        return -1;
    const char *n = gmp_pyframes_code_name(code, buf, sizeof buf, &len);
    if (copy(n, len, name, namecap) < 0)
        return -1;
    return 0;
}

/* Random tables (0 to 299 bytes, each in a buffer of its own size) and offsets: every answer must
 * be a line >= 0. Returns the number of lookups, or -1 on a wrong answer. */
long fuzz_tables(int minor, unsigned seed, int iters)
{
    long calls = 0;
    for (int it = 0; it < iters; it++) {
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 8) % 300;
        uint8_t *t = malloc(n ? n : 1);
        if (!t)
            return -1;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            t[i] = (uint8_t)(seed >> 16);
        }
        seed = seed * 1103515245u + 12345u;
        int first = (int)(seed >> 12) % 100000 - 10;
        for (int a = -2; a < 700; a += 1 + (a & 3)) {
            if (gmp_pyframes_table_line(minor, t, n, first, a) < 0) {
                free(t);
                return -1;
            }
            calls++;
        }
        free(t);
    }
    return calls;
}
