/* py_lines: collectors/gmp_pyframes' readers called from a Python process through ctypes
 * (tests/python, mode `lines`): each code object's line at every instruction offset and its
 * names, compared by py_lines.py with what the interpreter itself says (co_lines, co_positions,
 * dis.findlinestarts, co_filename, co_qualname); the line-table decoders on random tables, in
 * buffers of their exact size (AddressSanitizer builds catch any read outside them); and, from
 * 3.13, the offsets read from the interpreter's _PyRuntime.debug_offsets against the table
 * printed from the same version's headers (layout_vs_table). */
#include <stdio.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_pyframes.h"

int lines_init(int minor);
void lines_of(const void *code, const int *addrs, int *lines, int n);
int names_of(const void *code, char *file, int filecap, char *name, int namecap);
long fuzz_tables(int minor, unsigned seed, int iters);
int layout_vs_table(int minor, char *out, int cap);

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

/* The layout in use (3.13+: read from _PyRuntime.debug_offsets by gmp_pyframes_init) against the
 * table's for this minor version: the number of fields that differ (each "name got/want" in out),
 * -1 when there is no table or no layout in use. */
int layout_vs_table(int minor, char *out, int cap)
{
    gmp_pyframes_layout got, want;
    if (!gmp_pyframes_layout_in_use(&got) || !gmp_pyframes_table_layout(minor, &want))
        return -1;
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {
#define F(x) {#x, offsetof(gmp_pyframes_layout, x)}
        F(minor),          F(ts_frame), F(cf_frame),
        F(f_code),         F(f_back),   F(f_instr),
        F(f_owner),        F(f_lasti),  F(f_lineno),
        F(f_trace),        F(exec_tag), F(owner_skip),
        F(co_filename),    F(co_name),  F(co_qualname),
        F(co_firstlineno), F(co_table), F(co_firsttraceable),
        F(co_code),        F(s_ascii),  F(s_compact),
        F(s_state),        F(s_utf8),   F(s_length),
        F(ob_type),        F(b_size),   F(b_sval),
        F(table_kind),     F(bs_code),  F(bs_str),
        F(bs_frame),
#undef F
    };
    int diff = 0, k = 0;
    if (cap > 0)
        out[0] = 0;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        int g, w;
        memcpy(&g, (const char *)&got + fields[i].off, sizeof g);
        memcpy(&w, (const char *)&want + fields[i].off, sizeof w);
        if (g != w) {
            diff++;
            if (k >= 0 && k < cap)
                k += snprintf(out + k, (size_t)(cap - k), "%s %d/%d ", fields[i].name, g, w);
        }
    }
    if (sizeof fields / sizeof *fields * sizeof(int) != sizeof got)
        return -1; /* a field of the layout is not compared */
    return diff;
}
