/* gmp_pyframes: a thread's own Python frames read straight from CPython's structures, without the
 * GIL and without calling the interpreter (CPython 3.9 to 3.13, see docs/python.md).
 *
 * gmp_pystack uses it on a thread that released the GIL (ctypes.CDLL, a C extension's
 * Py_BEGIN_ALLOW_THREADS, PyTorch's operators): the thread's PyThreadState (PyGILState's
 * thread-specific value, read without the GIL) and the frames it points to cannot change while
 * the thread is inside the CUDA call, because only the thread itself pushes and pops them.
 *
 * Layouts (offsets in PyThreadState, the frame, the code object, str and bytes; the line-table
 * format) are per minor version, taken from CPython's headers of each version (3.9.18, 3.10.13,
 * 3.11.7, 3.12.1, 3.13.0: offsetof on the real structures; x86-64 and aarch64 LP64, default
 * build). gmp_pyframes_init checks the running interpreter against them before anything is read
 * through a pointer: PyCode_Type's own object header (type at offset 8: no Py_TRACE_REFS or
 * free-threaded header) and the tp_basicsize of the code, str, bytes (and 3.9-3.10 frame) types.
 * Every object met in a walk is then checked by its exact type (ob_type == &PyCode_Type, ...
 * found by dlsym) before its fields are used; sizes, lengths and depths are bounded. Nothing here
 * allocates, takes a lock or calls into the interpreter. */
#ifndef GMP_PYFRAMES_H
#define GMP_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

/* Checks the layouts of CPython 3.<minor> against the running interpreter. sym looks a symbol up
 * in the interpreter (dlsym). Returns 1 when frames can be read, 0 (why says why) otherwise. */
int gmp_pyframes_init(int minor, void *(*sym)(const char *name), char *why, size_t whylen);

/* One Python frame: its code object and the byte offset of its current instruction in the code
 * (-1: not started), or its line when the interpreter already knows it (tracing; else 0). */
typedef struct gmp_pyframe {
    const void *code;
    int addr;
    int line;
} gmp_pyframe;

/* The frames of tstate (a PyThreadState * of the calling thread), innermost first, at most max.
 * Returns how many; 0 when there are none or the structures do not check out. */
unsigned gmp_pyframes_walk(const void *tstate, gmp_pyframe *out, unsigned max);

/* What identifies a code object's names and line table: compared on a cache hit, so that a code
 * object freed and another made at the same address is not taken for the cached one. */
typedef struct gmp_pycode_key {
    const void *file, *name, *table;
    int firstlineno;
} gmp_pycode_key;
int gmp_pyframes_code_key(const void *code, gmp_pycode_key *out); /* 0 when not a code object */

/* The UTF-8 text of a code object's co_filename / co_qualname (3.11+) or co_name: a pointer into
 * the str object, or into buf (size buflen) when the text had to be encoded; *len its length.
 * NULL when the object is not a str that can be read. */
const char *gmp_pyframes_code_file(const void *code, char *buf, size_t buflen, size_t *len);
const char *gmp_pyframes_code_name(const void *code, char *buf, size_t buflen, size_t *len);

/* The line of byte offset addr in code (the interpreter's own computation, from the code's line
 * table); 0 when it has none. */
int gmp_pyframes_line(const void *code, int addr);

/* The line of byte offset addr in a line table (table, n bytes) of CPython 3.<minor>, as
 * PyCode_Addr2Line computes it from co_firstlineno; 0 when it has none (-1 for no such minor).
 * Reads nothing outside table[0..n). */
int gmp_pyframes_table_line(int minor, const uint8_t *table, size_t n, int firstlineno, int addr);

#endif
