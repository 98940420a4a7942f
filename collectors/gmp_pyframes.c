/* gmp_pyframes: Python frames read from CPython's structures without the GIL (see gmp_pyframes.h).
 *
 * The offsets below were printed by offsetof()/sizeof on each version's own headers (Include/,
 * Include/cpython/, Include/internal/ of CPython 3.9.18, 3.10.13, 3.11.7, 3.12.1, 3.13.0, built
 * with Py_BUILD_CORE); the line-table decoders follow Objects/codeobject.c of each version
 * (PyCode_Addr2Line: 3.9 co_lnotab, 3.10 co_linetable (PEP 626), 3.11+ the location table of
 * Objects/locations.md) and the frame walk follows PyThreadState_GetFrame/PyFrame_GetBack
 * (incomplete frames and, 3.12+, the C stack's entry frames are skipped). */
#include "gmp_pyframes.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

enum { LT_LNOTAB = 1, LT_PEP626 = 2, LT_LOCATIONS = 3 };

typedef struct layout {
    int minor;
    int ts_frame; /* PyThreadState: frame (3.9-3.10), cframe (3.11-3.12), current_frame (3.13) */
    int cf_frame; /* _PyCFrame: current_frame (3.11-3.12), else -1 */
    /* frame: PyFrameObject (3.9-3.10) or _PyInterpreterFrame (3.11+) */
    int f_code, f_back, f_instr, f_owner, f_lasti, f_lineno, f_trace;
    /* PyCodeObject */
    int co_filename, co_name, co_qualname, co_firstlineno, co_table, co_firsttraceable, co_code;
    /* str: sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject), offsetof state, utf8 */
    int s_ascii, s_compact, s_state, s_utf8;
    int table_kind;
    /* tp_basicsize of the code, str and (3.9-3.10) frame types: the fingerprint checked */
    int bs_code, bs_str, bs_frame;
} layout;

static const layout layouts[] = {
    {9,  24,  -1, 32, 24, -1, -1, 104, 108,       80,  104, 112, -1,
     40, 120, -1, -1, 48, 72, 32, 56,  LT_LNOTAB, 176, 80,  368},
    {10, 24,  -1, 32, 24, -1, -1, 96, 100,       72,  104, 112, -1,
     40, 120, -1, -1, 48, 72, 32, 56, LT_PEP626, 176, 80,  360},
    {11, 56,  8,   32,  48, 56, 69, -1, -1,           -1,  112, 120, 128,
     72, 136, 168, 184, 48, 72, 32, 56, LT_LOCATIONS, 184, 80,  -1},
    {12, 56,  0,   0,   8,  56, 70, -1, -1,           -1,  112, 120, 128,
     68, 136, 176, 192, 40, 56, 32, 48, LT_LOCATIONS, 192, 64,  -1},
    {13, 72,  -1,  0,   8,  56, 70, -1, -1,           -1,  112, 120, 128,
     68, 136, 184, 200, 40, 56, 32, 48, LT_LOCATIONS, 200, 64,  -1},
};

/* PyObject header (default build): ob_refcnt, ob_type; PyVarObject: ob_size. PyBytesObject's
 * ob_sval; PyTypeObject's tp_basicsize. */
#define OB_TYPE 8
#define OB_SIZE 16
#define BYTES_SVAL 32
#define TP_BASICSIZE 32
#define STR_LENGTH 16

enum { OWNED_BY_GENERATOR = 1, OWNED_BY_CSTACK = 3 };

#define MAX_VISIT 4096             /* frames looked at per walk, skipped ones included */
#define MAX_TABLE (1u << 20)       /* bytes of a line table read (no sum can overflow an int) */
#define MAX_STR (1u << 20)         /* code points of a name */
#define MAX_CODE_BYTES (64u << 20) /* offset of an instruction in its code */

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
    return ok(obj) && type && ptr_at(obj, OB_TYPE) == (uintptr_t)type;
}

/* ---------- start ---------- */

int gmp_pyframes_init(int minor, void *(*sym)(const char *name), char *why, size_t whylen)
{
    L = NULL;
    if (why && whylen)
        why[0] = 0;
    const layout *l = NULL;
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
        if (layouts[i].minor == minor)
            l = &layouts[i];
    if (!l) {
        if (why)
            snprintf(why, whylen, "no frame layout for Python 3.%d (3.9 to 3.13 are known)", minor);
        return 0;
    }
    t_code = sym("PyCode_Type");
    t_str = sym("PyUnicode_Type");
    t_bytes = sym("PyBytes_Type");
    t_frame = l->bs_frame > 0 ? sym("PyFrame_Type") : NULL;
    const void *t_type = sym("PyType_Type");
    if (!t_code || !t_str || !t_bytes || !t_type || (l->bs_frame > 0 && !t_frame)) {
        if (why)
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
        bs_code != l->bs_code || bs_str != l->bs_str || bs_bytes != BYTES_SVAL + 1 ||
        (t_frame && bs_frame != l->bs_frame)) {
        if (why)
            snprintf(why, whylen,
                     "Python 3.%d: the interpreter's objects do not have the layout of a default "
                     "build (debug or free-threaded build?)",
                     minor);
        return 0;
    }
    L = l;
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
        char owner = ((const char *)f)[l->f_owner];
        if (owner == OWNED_BY_CSTACK && l->minor >= 12) {
            f = back; /* the C stack's entry frame (3.12+): never a Python function */
            continue;
        }
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
        if (owner != OWNED_BY_GENERATOR && firsttr >= 0 && instr < first + 2 * (uintptr_t)firsttr) {
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
    memcpy(&n, (const void *)(s + STR_LENGTH), sizeof n);
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
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
        if (layouts[i].minor == minor)
            return table_line(layouts[i].table_kind, table, n, firstlineno, addr);
    return -1;
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
    memcpy(&n, (const void *)(t + OB_SIZE), sizeof n);
    if (n < 0 || (size_t)n > MAX_TABLE)
        return 0;
    return table_line(l->table_kind, (const uint8_t *)(t + BYTES_SVAL), (size_t)n, first, addr);
}
