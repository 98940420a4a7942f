/* gmp_pyframes: Python frames read from CPython's structures without the GIL (see gmp_pyframes.h).
 *
 * The offsets of the table were printed by offsetof()/sizeof on each version's own headers
 * (Include/, Include/cpython/, Include/internal/ of CPython 3.9.18, 3.10.13, 3.11.7, 3.12.1,
 * 3.13.0, built with Py_BUILD_CORE); from 3.13 the running interpreter's _Py_DebugOffsets gives
 * them. The line-table decoders follow Objects/codeobject.c of each version (PyCode_Addr2Line:
 * 3.9 co_lnotab, 3.10 co_linetable (PEP 626), 3.11+ the location table of Objects/locations.md)
 * and the frame walk follows PyThreadState_GetFrame/PyFrame_GetBack (incomplete frames and, 3.12+,
 * the interpreter's own entry frames are skipped). */
#include "gmp_pyframes.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

enum { LT_LNOTAB = 1, LT_PEP626 = 2, LT_LOCATIONS = 3 };

typedef gmp_pyframes_layout layout;

/* Owners of _PyInterpreterFrame (enum _frameowner). 3.12 and 3.13: THREAD 0, GENERATOR 1,
 * FRAME_OBJECT 2, CSTACK 3 (3.13.0 Include/internal/pycore_frame.h:54-59), CSTACK being the entry
 * frame _PyEval_EvalFrameDefault pushes. 3.14: THREAD 0, GENERATOR 1, FRAME_OBJECT 2,
 * INTERPRETER 3, CSTACK 4 (3.14 Include/internal/pycore_interpframe_structs.h:22-28), the entry
 * frame being INTERPRETER's and _PyFrame_IsIncomplete testing `owner >= INTERPRETER`. 3.15-dev
 * replaces CSTACK by THREAD_STATE 4, the thread state's sentinel base frame (python/cpython
 * 111e70cb, same file, :22-28). From 3.12, owner >= 3 is never a Python function's frame. */
#define OWNER_GENERATOR 1
#define OWNER_INTERP 3
#define OWNER_NONE 127 /* 3.11: no such frames */

/* Tagged references in f_executable (3.14, default build: _PyStackRef, Py_TAG_BITS 3, the low bit
 * Py_TAG_REFCNT; 3.14 Include/internal/pycore_stackref.h, the "With GIL" branch; a code object
 * is 8-aligned). */
#define EXEC_TAG_314 3

#define OB_TYPE 8       /* PyObject: ob_type (default build) */
#define OB_SIZE 16      /* PyVarObject: ob_size */
#define BYTES_SVAL 32   /* PyBytesObject: ob_sval */
#define TP_BASICSIZE 32 /* PyTypeObject: tp_basicsize (PyVarObject header, tp_name) */
#define STR_LENGTH 16   /* PyASCIIObject: length */

static const layout layouts[] = {
    /* minor, ts_frame, cf_frame, f_code, f_back, f_instr, f_owner, f_lasti, f_lineno, f_trace,
       exec_tag, owner_skip, co_filename, co_name, co_qualname, co_firstlineno, co_table,
       co_firsttraceable, co_code, s_ascii, s_compact, s_state, s_utf8, s_length, ob_type,
       b_size, b_sval, table_kind, bs_code, bs_str, bs_frame */
    {9,          24,         -1,      32,      24,         -1,        -1,  104, 108, 80, 0,
     OWNER_NONE, 104,        112,     -1,      40,         120,       -1,  -1,  48,  72, 32,
     56,         STR_LENGTH, OB_TYPE, OB_SIZE, BYTES_SVAL, LT_LNOTAB, 176, 80,  368},
    {10,         24,         -1,      32,      24,         -1,        -1,  96, 100, 72, 0,
     OWNER_NONE, 104,        112,     -1,      40,         120,       -1,  -1, 48,  72, 32,
     56,         STR_LENGTH, OB_TYPE, OB_SIZE, BYTES_SVAL, LT_PEP626, 176, 80, 360},
    {11,         56,         8,       32,      48,         56,           69,  -1,  -1, -1, 0,
     OWNER_NONE, 112,        120,     128,     72,         136,          168, 184, 48, 72, 32,
     56,         STR_LENGTH, OB_TYPE, OB_SIZE, BYTES_SVAL, LT_LOCATIONS, 184, 80,  -1},
    {12,           56,         0,       0,       8,          56,           70,  -1,  -1, -1, 0,
     OWNER_INTERP, 112,        120,     128,     68,         136,          176, 192, 40, 56, 32,
     48,           STR_LENGTH, OB_TYPE, OB_SIZE, BYTES_SVAL, LT_LOCATIONS, 192, 64,  -1},
    /* 3.13: not used to read (the interpreter's _Py_DebugOffsets is); gmp_pyframes_table_layout
       gives it to the test that compares both */
    {13,           72,         -1,      0,       8,          56,           70,  -1,  -1, -1, 0,
     OWNER_INTERP, 112,        120,     128,     68,         136,          184, 200, 40, 56, 32,
     48,           STR_LENGTH, OB_TYPE, OB_SIZE, BYTES_SVAL, LT_LOCATIONS, 200, 64,  -1},
};

#define MAX_VISIT 4096             /* frames looked at per walk, skipped ones included */
#define MAX_TABLE (1u << 20)       /* bytes of a line table read (no sum can overflow an int) */
#define MAX_STR (1u << 20)         /* code points of a name */
#define MAX_CODE_BYTES (64u << 20) /* offset of an instruction in its code */

static layout cur; /* the layout in use, when L is set */
static const layout *L;
static const void *t_code, *t_str, *t_bytes, *t_frame;

/* ---------- reading ---------- */

/* A plausible user-space object address: non-null, aligned, below the 47-bit user space. */
static int ok(uintptr_t p)
{
    return p >= 4096 && !(p & 7) && p < ((uintptr_t)1 << 47);
}

static uintptr_t ptr_at(uintptr_t base, int off)
{
    uintptr_t v;
    memcpy(&v, (const void *)(base + (uintptr_t)off), sizeof v);
    return v;
}

static int int_at(uintptr_t base, int off)
{
    int v;
    memcpy(&v, (const void *)(base + (uintptr_t)off), sizeof v);
    return v;
}

static int is_a(uintptr_t obj, const void *type)
{
    return ok(obj) && type && ptr_at(obj, L ? L->ob_type : OB_TYPE) == (uintptr_t)type;
}

/* ---------- CPython's _Py_DebugOffsets (3.13+) ----------
 * Only the fields read are named; the others are counted. Every member is a uint64_t. */

typedef struct dbg_thread { /* thread_state */
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
        status;
} dbg_thread;
typedef struct dbg_code { /* code_object (3.13: 10 members, 3.14: co_tlbc after them) */
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive;
} dbg_code;
typedef struct dbg_obj { /* pyobject */
    uint64_t size, ob_type;
} dbg_obj;
typedef struct dbg_type { /* type_object */
    uint64_t size, tp_name, tp_repr, tp_flags;
} dbg_type;
typedef struct dbg_bytes { /* bytes_object */
    uint64_t size, ob_size, ob_sval;
} dbg_bytes;
typedef struct dbg_str { /* unicode_object */
    uint64_t size, state, length, asciiobject_size;
} dbg_str;

/* CPython 3.13 (3.13.0 Include/internal/pycore_runtime.h:62-195) */
typedef struct dbg313 {
    char cookie[8];
    uint64_t version, free_threaded;
    uint64_t runtime_state[3];      /* :67-71 */
    uint64_t interpreter_state[13]; /* :74-88 */
    dbg_thread thread_state;        /* :91-101 */
    struct {                        /* :104-111 */
        uint64_t size, previous, executable, instr_ptr, localsplus, owner;
    } interpreter_frame;
    dbg_code code_object; /* :114-125 */
    dbg_obj pyobject;     /* :128-131 */
    dbg_type type_object; /* :134-139 */
    uint64_t tuple_object[3], list_object[3], dict_object[3], float_object[2], long_object[3];
    dbg_bytes bytes_object; /* :176-180 */
    dbg_str unicode_object; /* :183-188 */
    uint64_t gc[2];
} dbg313;

/* CPython 3.14 (Include/internal/pycore_debug_offsets.h of the 3.14 branch at 3.14.0b4+, read in
 * johndoe6345789/typthon 71cf7bf, a fork of it that renames Py to Ty; lines 67-236:
 * interpreter_state gained threads_main, code_object_generation and tlbc_generation;
 * interpreter_frame stackpointer and tlbc_index; code_object co_tlbc; set_object after
 * list_object; gen_object, llist_node and debugger_support at the end) */
typedef struct dbg314 {
    char cookie[8];
    uint64_t version, free_threaded;
    uint64_t runtime_state[3];      /* :72-76 */
    uint64_t interpreter_state[16]; /* :79-96 */
    dbg_thread thread_state;        /* :99-109 */
    struct {                        /* :112-121 */
        uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
    } interpreter_frame;
    dbg_code code_object; /* :124-136 */
    uint64_t co_tlbc;
    dbg_obj pyobject;     /* :139-142 */
    dbg_type type_object; /* :145-150 */
    uint64_t tuple_object[3], list_object[3], set_object[4], dict_object[3], float_object[2],
        long_object[3];
    dbg_bytes bytes_object; /* :195-199 */
    dbg_str unicode_object; /* :202-207 */
    uint64_t gc[2], gen_object[4], llist_node[2], debugger_support[6];
} dbg314;

/* The members read, wherever a minor version puts them. */
typedef struct dbg_view {
    uint64_t version, free_threaded;
    dbg_thread ts;
    uint64_t fr_size, fr_previous, fr_executable, fr_instr_ptr, fr_owner;
    dbg_code co;
    dbg_obj ob;
    dbg_type ty;
    dbg_bytes by;
    dbg_str st;
    int exec_tag;
} dbg_view;

#define VIEW(T, p, v, tag)                                                                         \
    do {                                                                                           \
        T d_;                                                                                      \
        memcpy(&d_, p, sizeof d_);                                                                 \
        (v)->version = d_.version;                                                                 \
        (v)->free_threaded = d_.free_threaded;                                                     \
        (v)->ts = d_.thread_state;                                                                 \
        (v)->fr_size = d_.interpreter_frame.size;                                                  \
        (v)->fr_previous = d_.interpreter_frame.previous;                                          \
        (v)->fr_executable = d_.interpreter_frame.executable;                                      \
        (v)->fr_instr_ptr = d_.interpreter_frame.instr_ptr;                                        \
        (v)->fr_owner = d_.interpreter_frame.owner;                                                \
        (v)->co = d_.code_object;                                                                  \
        (v)->ob = d_.pyobject;                                                                     \
        (v)->ty = d_.type_object;                                                                  \
        (v)->by = d_.bytes_object;                                                                 \
        (v)->st = d_.unicode_object;                                                               \
        (v)->exec_tag = (tag);                                                                     \
    } while (0)

#define MAX_STRUCT 65536u /* no structure read here is this large */

/* off is a field of size n inside a structure of size size, aligned to n */
static int fits(uint64_t off, uint64_t n, uint64_t size)
{
    return size <= MAX_STRUCT && off + n <= size && off % n == 0;
}

int gmp_pyframes_debug_layout(const void *dbg, int minor, layout *out, char *why, size_t whylen)
{
    char cookie[8];
    uint64_t version, ft;
    memcpy(cookie, dbg, sizeof cookie);
    memcpy(&version, (const char *)dbg + 8, sizeof version);
    memcpy(&ft, (const char *)dbg + 16, sizeof ft);
    if (memcmp(cookie, "xdebugpy", 8)) {
        snprintf(why, whylen, "no \"xdebugpy\" cookie at _PyRuntime.debug_offsets");
        return 0;
    }
    unsigned vmaj = (unsigned)(version >> 24 & 0xff), vmin = (unsigned)(version >> 16 & 0xff);
    if (vmaj != 3 || (int)vmin != minor) {
        snprintf(why, whylen,
                 "_PyRuntime.debug_offsets says version %u.%u, the interpreter 3.%d: not read",
                 vmaj, vmin, minor);
        return 0;
    }
    if (ft) {
        snprintf(why, whylen, "a free-threaded build (3.%dt): objects have another header", minor);
        return 0;
    }
    dbg_view v;
    if (minor == 13)
        VIEW(dbg313, dbg, &v, 0);
    else if (minor == 14)
        VIEW(dbg314, dbg, &v, EXEC_TAG_314);
    else {
        snprintf(why, whylen,
                 "the layout of 3.%d's _Py_DebugOffsets is not known (3.13 and 3.14 are)", minor);
        return 0;
    }
    /* what a default 64-bit build has: an 8-byte ob_refcnt then ob_type (no Py_TRACE_REFS),
       tp_basicsize right after the PyVarObject header and tp_name */
    int sane = v.ob.ob_type == OB_TYPE && v.ty.tp_name == 24 &&
               fits(v.ts.current_frame, 8, v.ts.size) && fits(v.fr_previous, 8, v.fr_size) &&
               fits(v.fr_executable, 8, v.fr_size) && fits(v.fr_instr_ptr, 8, v.fr_size) &&
               fits(v.fr_owner, 1, v.fr_size) && fits(v.co.filename, 8, v.co.size) &&
               fits(v.co.name, 8, v.co.size) && fits(v.co.qualname, 8, v.co.size) &&
               fits(v.co.linetable, 8, v.co.size) && fits(v.co.firstlineno, 4, v.co.size) &&
               fits(v.co.co_code_adaptive, 8, v.co.size) && v.co.co_code_adaptive >= 24 &&
               fits(v.by.ob_size, 8, v.by.size) && fits(v.by.ob_sval, 8, v.by.size) &&
               fits(v.st.state, 4, v.st.asciiobject_size) &&
               fits(v.st.length, 8, v.st.asciiobject_size) &&
               fits(v.st.asciiobject_size + 8, 8, v.st.size);
    if (!sane) {
        snprintf(why, whylen, "3.%d's _Py_DebugOffsets does not describe a default 64-bit build",
                 minor);
        return 0;
    }
    memset(out, 0, sizeof *out);
    out->minor = minor;
    out->ts_frame = (int)v.ts.current_frame;
    out->cf_frame = -1;
    out->f_code = (int)v.fr_executable;
    out->f_back = (int)v.fr_previous;
    out->f_instr = (int)v.fr_instr_ptr;
    out->f_owner = (int)v.fr_owner;
    out->f_lasti = out->f_lineno = out->f_trace = -1;
    out->exec_tag = v.exec_tag;
    out->owner_skip = OWNER_INTERP;
    out->co_filename = (int)v.co.filename;
    out->co_name = (int)v.co.name;
    out->co_qualname = (int)v.co.qualname;
    out->co_firstlineno = (int)v.co.firstlineno;
    out->co_table = (int)v.co.linetable;
    /* `int _co_firsttraceable; void *co_extra;` right before co_code_adaptive in a default build
       (3.13.0 Include/cpython/code.h:131-136; 3.14 the same, co_tlbc being free-threaded only) */
    out->co_firsttraceable = (int)v.co.co_code_adaptive - 16;
    out->co_code = (int)v.co.co_code_adaptive;
    /* PyCompactUnicodeObject: PyASCIIObject then utf8_length, utf8 (3.13.0 and 3.14
       Include/cpython/unicodeobject.h) */
    out->s_ascii = (int)v.st.asciiobject_size;
    out->s_utf8 = out->s_ascii + 8;
    out->s_compact = out->s_ascii + 16;
    out->s_state = (int)v.st.state;
    out->s_length = (int)v.st.length;
    out->ob_type = (int)v.ob.ob_type;
    out->b_size = (int)v.by.ob_size;
    out->b_sval = (int)v.by.ob_sval;
    out->table_kind = LT_LOCATIONS;
    /* PyCode_Type's tp_basicsize is offsetof(PyCodeObject, co_code_adaptive), PyUnicode_Type's
       sizeof(PyUnicodeObject) (Objects/codeobject.c, Objects/unicodeobject.c) */
    out->bs_code = out->co_code;
    out->bs_str = (int)v.st.size;
    out->bs_frame = -1;
    return 1;
}

int gmp_pyframes_table_layout(int minor, layout *out)
{
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
        if (layouts[i].minor == minor) {
            *out = layouts[i];
            return 1;
        }
    return 0;
}

int gmp_pyframes_layout_in_use(layout *out)
{
    if (!L)
        return 0;
    *out = *L;
    return 1;
}

/* ---------- start ---------- */

int gmp_pyframes_init(int minor, void *(*sym)(const char *name), char *why, size_t whylen)
{
    L = NULL;
    char dummy[8];
    if (!why || !whylen) {
        why = dummy;
        whylen = sizeof dummy;
    }
    why[0] = 0;
    layout l;
    if (minor >= 13) {
        const void *rt = sym("_PyRuntime");
        if (!rt) {
            snprintf(why, whylen, "Python 3.%d: _PyRuntime not found", minor);
            return 0;
        }
        char w[160];
        if (!gmp_pyframes_debug_layout(rt, minor, &l, w, sizeof w)) {
            snprintf(why, whylen, "Python 3.%d: %s", minor, w);
            return 0;
        }
    } else if (minor < 9 || !gmp_pyframes_table_layout(minor, &l)) {
        snprintf(why, whylen, "no frame layout for Python 3.%d (3.9 and later are read)", minor);
        return 0;
    }
    t_code = sym("PyCode_Type");
    t_str = sym("PyUnicode_Type");
    t_bytes = sym("PyBytes_Type");
    t_frame = l.bs_frame > 0 ? sym("PyFrame_Type") : NULL;
    const void *t_type = sym("PyType_Type");
    if (!t_code || !t_str || !t_bytes || !t_type || (l.bs_frame > 0 && !t_frame)) {
        snprintf(why, whylen, "Python 3.%d: a type object was not found", minor);
        return 0;
    }
    /* statically allocated type objects inside the interpreter: readable */
    uintptr_t c = (uintptr_t)t_code, s = (uintptr_t)t_str, b = (uintptr_t)t_bytes;
    long bs_code, bs_str, bs_bytes, bs_frame = -1;
    memcpy(&bs_code, (const void *)(c + TP_BASICSIZE), sizeof bs_code);
    memcpy(&bs_str, (const void *)(s + TP_BASICSIZE), sizeof bs_str);
    memcpy(&bs_bytes, (const void *)(b + TP_BASICSIZE), sizeof bs_bytes);
    if (t_frame)
        memcpy(&bs_frame, (const void *)((uintptr_t)t_frame + TP_BASICSIZE), sizeof bs_frame);
    if (ptr_at(c, OB_TYPE) != (uintptr_t)t_type || ptr_at(s, OB_TYPE) != (uintptr_t)t_type ||
        bs_code != l.bs_code || bs_str != l.bs_str || bs_bytes != l.b_sval + 1 ||
        (t_frame && bs_frame != l.bs_frame)) {
        snprintf(why, whylen,
                 "Python 3.%d: the interpreter's objects do not have the layout of a default "
                 "build (debug or free-threaded build?)",
                 minor);
        return 0;
    }
    cur = l;
    L = &cur;
    return 1;
}

/* ---------- frames ---------- */

unsigned gmp_pyframes_walk(const void *tstate, gmp_pyframe *out, unsigned max)
{
    const layout *l = L;
    uintptr_t ts = (uintptr_t)tstate;
    if (!l || !ok(ts) || !max)
        return 0;
    uintptr_t f = ptr_at(ts, l->ts_frame);
    if (l->cf_frame >= 0)
        f = ok(f) ? ptr_at(f, l->cf_frame) : 0;
    unsigned n = 0;
    for (unsigned visit = 0; f && visit < MAX_VISIT && n < max; visit++) {
        if (!ok(f))
            return 0; /* not a frame: trust nothing read so far */
        uintptr_t back = ptr_at(f, l->f_back);
        uintptr_t code = ptr_at(f, l->f_code);
        if (l->minor <= 10) {
            if (!is_a(f, t_frame) || !is_a(code, t_code))
                return 0;
            int lasti = int_at(f, l->f_lasti);
            int lineno = int_at(f, l->f_lineno);
            int use_lineno = l->minor == 9 ? ptr_at(f, l->f_trace) != 0 : lineno != 0;
            out[n].code = (const void *)code;
            out[n].line = use_lineno && lineno > 0 ? lineno : 0;
            /* 3.9: f_lasti in bytes; 3.10: in code units (PyFrame_GetLineNumber) */
            out[n].addr = lasti < 0 ? -1 : l->minor == 9 ? lasti : lasti * 2;
            n++;
            f = back;
            continue;
        }
        unsigned char owner = ((const unsigned char *)f)[l->f_owner];
        if (owner >= (unsigned)l->owner_skip) {
            f = back; /* the interpreter's own entry frame (3.12+): never a Python function */
            continue;
        }
        /* 3.14: a tagged reference; a tagged int (both bits) is not an object */
        if (l->exec_tag && (code & (uintptr_t)l->exec_tag) == (uintptr_t)l->exec_tag)
            code = 0;
        code &= ~(uintptr_t)l->exec_tag;
        if (!is_a(code, t_code)) {
            if (l->minor >= 13) { /* f_executable: a code object or None */
                f = back;
                continue;
            }
            return 0;
        }
        uintptr_t instr = ptr_at(f, l->f_instr);
        uintptr_t first = code + (uintptr_t)l->co_code;
        int firsttr = int_at(code, l->co_firsttraceable);
        if (owner != OWNER_GENERATOR && firsttr >= 0 && instr < first + 2 * (uintptr_t)firsttr) {
            f = back; /* incomplete: not started yet (_PyFrame_IsIncomplete) */
            continue;
        }
        out[n].code = (const void *)code;
        out[n].line = 0;
        /* _PyInterpreterFrame_LASTI * sizeof(_Py_CODEUNIT) */
        out[n].addr = instr >= first && instr - first < MAX_CODE_BYTES ? (int)(instr - first) : -1;
        n++;
        f = back;
    }
    return n;
}

int gmp_pyframes_code_key(const void *code, gmp_pycode_key *out)
{
    const layout *l = L;
    uintptr_t c = (uintptr_t)code;
    if (!l || !is_a(c, t_code))
        return 0;
    out->file = (const void *)ptr_at(c, l->co_filename);
    out->name = (const void *)ptr_at(c, l->co_qualname >= 0 ? l->co_qualname : l->co_name);
    out->table = (const void *)ptr_at(c, l->co_table);
    out->firstlineno = int_at(c, l->co_firstlineno);
    return 1;
}

/* ---------- strings ---------- */

static size_t put_utf8(char *b, uint32_t cp)
{
    if (cp < 0x80) {
        b[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (char)(0xC0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        if (cp >= 0xD800 && cp < 0xE000)
            cp = 0xFFFD; /* a lone surrogate (surrogateescape): U+FFFD */
        b[0] = (char)(0xE0 | cp >> 12);
        b[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF)
        cp = 0xFFFD;
    if (cp < 0x10000)
        return put_utf8(b, cp);
    b[0] = (char)(0xF0 | cp >> 18);
    b[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    b[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A str object's text as UTF-8: compact ASCII in place; compact non-ASCII through its cached
 * UTF-8 copy when it has one, else encoded into buf from its 1-, 2- or 4-byte code points. */
static const char *str_text(uintptr_t s, char *buf, size_t buflen, size_t *len)
{
    const layout *l = L;
    if (!l || !is_a(s, t_str))
        return NULL;
    uint32_t state;
    memcpy(&state, (const void *)(s + (uintptr_t)l->s_state), sizeof state);
    unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
    ssize_t n;
    memcpy(&n, (const void *)(s + (uintptr_t)l->s_length), sizeof n);
    if (!compact || n < 0 || (size_t)n > MAX_STR)
        return NULL;
    if (ascii) {
        *len = (size_t)n;
        return (const char *)(s + (uintptr_t)l->s_ascii);
    }
    uintptr_t u8 = ptr_at(s, l->s_utf8);
    ssize_t u8n;
    memcpy(&u8n, (const void *)(s + (uintptr_t)l->s_utf8 - 8), sizeof u8n);
    if (u8 >= 4096 && u8n >= 0 && (size_t)u8n <= 4 * MAX_STR) {
        *len = (size_t)u8n;
        return (const char *)u8;
    }
    if (kind != 1 && kind != 2 && kind != 4)
        return NULL;
    const unsigned char *d = (const unsigned char *)(s + (uintptr_t)l->s_compact);
    size_t k = 0;
    for (ssize_t i = 0; i < n && k + 4 <= buflen; i++) {
        uint32_t cp;
        if (kind == 1)
            cp = d[i];
        else if (kind == 2) {
            uint16_t v;
            memcpy(&v, d + 2 * i, 2);
            cp = v;
        } else
            memcpy(&cp, d + 4 * i, 4);
        k += put_utf8(buf + k, cp);
    }
    *len = k;
    return buf;
}

const char *gmp_pyframes_code_file(const void *code, char *buf, size_t buflen, size_t *len)
{
    const layout *l = L;
    if (!l || !is_a((uintptr_t)code, t_code))
        return NULL;
    return str_text(ptr_at((uintptr_t)code, l->co_filename), buf, buflen, len);
}

const char *gmp_pyframes_code_name(const void *code, char *buf, size_t buflen, size_t *len)
{
    const layout *l = L;
    if (!l || !is_a((uintptr_t)code, t_code))
        return NULL;
    return str_text(ptr_at((uintptr_t)code, l->co_qualname >= 0 ? l->co_qualname : l->co_name), buf,
                    buflen, len);
}

/* ---------- line tables ---------- */

/* 3.9: (bytecode delta, line delta) pairs (Objects/lnotab_notes.txt; PyCode_Addr2Line). */
static int line_lnotab(const uint8_t *p, size_t n, int line, int addrq)
{
    int addr = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        addr += p[i];
        if (addr > addrq)
            break;
        line += (signed char)p[i + 1];
    }
    return line;
}

/* 3.10: PEP 626 (start delta, line delta) pairs, -128: no line (_PyCode_CheckLineNumber). */
static int line_pep626(const uint8_t *p, size_t n, int line, int addrq)
{
    size_t i = 0;
    int ar_start = -1, ar_end = 0, ar_line = -1;
    while (ar_end <= addrq) {
        do {
            if (i + 2 > n)
                return -1;
            ar_start = ar_end;
            ar_end += p[i];
            int ld = (signed char)p[i + 1];
            i += 2;
            if (ld == -128)
                ar_line = -1;
            else
                ar_line = line += ld;
        } while (ar_start == ar_end);
    }
    return ar_line;
}

static unsigned varint(const uint8_t *p, size_t n, size_t *i)
{
    if (*i >= n)
        return 0;
    unsigned read = p[(*i)++], val = read & 63, shift = 0;
    while (read & 64 && *i < n && shift < 26) {
        read = p[(*i)++];
        shift += 6;
        val |= (read & 63) << shift;
    }
    return val;
}

/* 3.11+: the location table (Objects/locations.md; codeobject.c advance/get_line_delta). */
static int line_locations(const uint8_t *p, size_t n, int first, int addrq)
{
    size_t i = 0;
    long long line = first, ar_line = -1; /* a damaged table may add up past INT_MAX */
    int ar_end = 0;
    while (ar_end <= addrq) {
        if (i >= n)
            return -1;
        uint8_t b = p[i];
        int code = b >> 3 & 15, delta = 0;
        if (code == 13 || code == 14) { /* NO_COLUMNS, LONG: a signed varint */
            size_t j = i + 1;
            unsigned u = varint(p, n, &j);
            delta = u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
        } else if (code >= 10 && code <= 12) { /* ONE_LINE0..2 */
            delta = code - 10;
        }
        line += delta;
        ar_line = (b >> 3) == 0x1f ? -1 : line;
        ar_end += ((b & 7) + 1) * 2;
        do
            i++;
        while (i < n && !(p[i] & 128));
    }
    return ar_line > 0 && ar_line <= INT_MAX ? (int)ar_line : -1;
}

static int table_line(int kind, const uint8_t *p, size_t n, int first, int addr)
{
    if (addr < 0)
        return first > 0 ? first : 0;
    if (n > MAX_TABLE)
        n = MAX_TABLE;
    int line;
    switch (kind) {
    case LT_LNOTAB: line = line_lnotab(p, n, first, addr); break;
    case LT_PEP626: line = line_pep626(p, n, first, addr); break;
    default: line = line_locations(p, n, first, addr); break;
    }
    return line > 0 ? line : 0;
}

int gmp_pyframes_table_line(int minor, const uint8_t *table, size_t n, int firstlineno, int addr)
{
    if (minor < 9 || minor > 99)
        return -1;
    int kind = minor == 9 ? LT_LNOTAB : minor == 10 ? LT_PEP626 : LT_LOCATIONS;
    return table_line(kind, table, n, firstlineno, addr);
}

int gmp_pyframes_line(const void *code, int addr)
{
    const layout *l = L;
    uintptr_t c = (uintptr_t)code;
    if (!l || !is_a(c, t_code))
        return 0;
    int first = int_at(c, l->co_firstlineno);
    if (addr < 0)
        return first > 0 ? first : 0;
    uintptr_t t = ptr_at(c, l->co_table);
    if (!is_a(t, t_bytes))
        return 0;
    ssize_t n;
    memcpy(&n, (const void *)(t + (uintptr_t)l->b_size), sizeof n);
    if (n < 0 || (size_t)n > MAX_TABLE)
        return 0;
    return table_line(l->table_kind, (const uint8_t *)(t + (uintptr_t)l->b_sval), (size_t)n, first,
                      addr);
}
