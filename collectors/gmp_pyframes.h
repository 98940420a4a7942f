/* gmp_pyframes: a thread's own Python frames read straight from CPython's structures, without the
 * GIL and without calling the interpreter (CPython 3.9 to 3.14, see docs/python.md).
 *
 * gmp_pystack uses it on a thread that released the GIL (ctypes.CDLL, a C extension's
 * Py_BEGIN_ALLOW_THREADS, PyTorch's operators): the thread's PyThreadState (PyGILState's
 * thread-specific value, read without the GIL) and the frames it points to cannot change while
 * the thread is inside the CUDA call, because only the thread itself pushes and pops them.
 *
 * Where the offsets come from (offsets in PyThreadState, the frame, the code object, str and
 * bytes; the line-table format):
 * - 3.9 to 3.12: a table per minor version, taken from CPython's headers of each version (3.9.18,
 *   3.10.13, 3.11.7, 3.12.1: offsetof on the real structures; x86-64 and aarch64 LP64, default
 *   build);
 * - 3.13 and later: CPython's own description of its structures, `_PyRuntime.debug_offsets`
 *   (_Py_DebugOffsets, cookie "xdebugpy"), the first member of _PyRuntime, written for
 *   out-of-process debuggers. Its own layout changes with each minor version (CPython says so:
 *   3.13.0 Include/internal/pycore_runtime.h:209-221), so the positions of the dozen fields read
 *   in it are known per minor version (3.13, 3.14); a later version is refused with its reason.
 *   The 3.13 table is kept as the check of that reading (tests/python, mode lines).
 * gmp_pyframes_init checks the running interpreter before anything is read through a pointer:
 * the debug offsets' cookie, version (= the interpreter's), free-threaded flag and sizes; then
 * PyCode_Type's own object header (type at offset 8: no Py_TRACE_REFS or free-threaded header)
 * and the tp_basicsize of the code, str, bytes (and 3.9-3.10 frame) types against the offsets.
 * Every object met in a walk is then checked by its exact type (ob_type == &PyCode_Type, ...
 * found by dlsym) before its fields are used; sizes, lengths and depths are bounded. Nothing here
 * allocates, takes a lock or calls into the interpreter. */
#ifndef GMP_PYFRAMES_H
#define GMP_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

/* Checks the layouts of CPython 3.<minor> against the running interpreter. sym looks a symbol up
 * in the interpreter (dlsym: the type objects, and _PyRuntime from 3.13). Returns 1 when frames
 * can be read, 0 (why says why, in a few words) otherwise. */
int gmp_pyframes_init(int minor, void *(*sym)(const char *name), char *why, size_t whylen);

/* The offsets (bytes) and formats a walk uses. */
typedef struct gmp_pyframes_layout {
    int minor;
    int ts_frame; /* PyThreadState: frame (3.9-3.10), cframe (3.11-3.12), current_frame (3.13+) */
    int cf_frame; /* _PyCFrame: current_frame (3.11-3.12), else -1 */
    /* frame: PyFrameObject (3.9-3.10) or _PyInterpreterFrame (3.11+) */
    int f_code, f_back, f_instr, f_owner, f_lasti, f_lineno, f_trace;
    int exec_tag;   /* low bits of f_executable that tag the reference (3.14: _PyStackRef) */
    int owner_skip; /* frames whose owner is this or more are the interpreter's own (3.12+) */
    /* PyCodeObject */
    int co_filename, co_name, co_qualname, co_firstlineno, co_table, co_firsttraceable, co_code;
    /* str: sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject), offsetof state, utf8, length */
    int s_ascii, s_compact, s_state, s_utf8, s_length;
    int ob_type;        /* PyObject: ob_type */
    int b_size, b_sval; /* PyBytesObject: ob_size, ob_sval */
    int table_kind;     /* 1: co_lnotab (3.9), 2: PEP 626 (3.10), 3: locations (3.11+) */
    /* tp_basicsize of the code, str and (3.9-3.10) frame types: the fingerprint checked */
    int bs_code, bs_str, bs_frame;
} gmp_pyframes_layout;

/* The table's layout of CPython 3.<minor> (3.9 to 3.13); 0 when there is none. */
int gmp_pyframes_table_layout(int minor, gmp_pyframes_layout *out);

/* The layout of CPython 3.<minor> (3.13+) read from its _Py_DebugOffsets at dbg (the start of
 * _PyRuntime) and checked: cookie, version, free-threaded flag, sizes and offsets. Returns 1, or
 * 0 with why. Reads nothing past the end of that minor version's _Py_DebugOffsets. */
int gmp_pyframes_debug_layout(const void *dbg, int minor, gmp_pyframes_layout *out, char *why,
                              size_t whylen);

/* The layout gmp_pyframes_init chose; 0 when none is in use. */
int gmp_pyframes_layout_in_use(gmp_pyframes_layout *out);

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
