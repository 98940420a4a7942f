/* gmp_pystack: Python call stacks through CPython's public C API with the GIL, through
 * gmp_pyframes without it (see gmp_pystack.h). */
#include "gmp_pystack.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "gmp_pyframes.h"
#include "gmp_stack.h"

#define CODE_SLOTS 1024 /* per-thread code object cache (direct mapped, power of two) */
#define STK_SLOTS 256   /* per-thread whole-stack cache (direct mapped, power of two) */
#define MAX_NODES (2 * GMP_STACK_MAX_DEPTH)

typedef void *pyobj; /* PyObject *, PyFrameObject *, PyThreadState *: opaque here */
typedef ssize_t py_ssize;

/* The CPython functions used, all exported by libpython (or by a python executable linked with it
 * statically). Entries marked "3.9+" etc. are NULL on older versions. */
static struct {
    int (*is_initialized)(void);
    pyobj (*this_thread_state)(void); /* PyGILState_GetThisThreadState */
    pyobj (*unchecked_get)(void);     /* _PyThreadState_UncheckedGet, PyThreadState_GetUnchecked */
    pyobj (*thread_frame)(pyobj);     /* 3.9+ PyThreadState_GetFrame: new reference */
    pyobj (*frame_back)(pyobj);       /* 3.9+ PyFrame_GetBack: new reference */
    pyobj (*frame_code)(pyobj);       /* 3.9+ PyFrame_GetCode: new reference */
    pyobj (*eval_frame)(void);        /* 3.8: PyEval_GetFrame: borrowed */
    int (*frame_line)(pyobj);         /* PyFrame_GetLineNumber */
    int (*frame_lasti)(pyobj);        /* 3.11+ PyFrame_GetLasti: caches lines by instruction */
    pyobj (*getattr)(pyobj, const char *);
    pyobj (*getattr_obj)(pyobj, pyobj); /* 3.8: PyObject_GetAttr with ... */
    pyobj (*intern)(const char *);      /* ... names interned once */
    pyobj s_code, s_back;               /* "f_code", "f_back" (3.8; GIL held) */
    const char *(*utf8)(pyobj, py_ssize *);
    void (*incref)(pyobj);
    void (*decref)(pyobj);
    void (*err_fetch)(pyobj *, pyobj *, pyobj *);
    void (*err_restore)(pyobj, pyobj, pyobj);
    void (*err_clear)(void);
    int (*gc_disable)(void); /* 3.11 only: see hook() */
    int (*gc_enable)(void);
    int (*finalizing)(void); /* _Py_IsFinalizing (3.9 - 3.12), Py_IsFinalizing (3.13) */
    pyobj none;
    uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault: (lo, hi] holds its return addresses */
    int minor;
} P;

/* Frames of threads without the GIL read by gmp_pyframes: set at start when the layouts check
 * out; turned off for good when the first stacks walked both ways with the GIL differ. */
static atomic_int direct;
static atomic_int verified; /* stacks walked both ways that agreed */
/* Why the reader without the GIL is off (NULL: on, or no Python): the reason found at start
 * (dwhy_buf), or the self-check's, set once by the thread whose check failed. */
static char dwhy_buf[200];
static _Atomic(const char *) direct_off;
#define VERIFY_STACKS 8
static int test_skew; /* GPUMEMPROF_TEST_PYFRAMES_SKEW: the direct reader's lines off by one */

static void *py_lib; /* the privately loaded libpython, when that is where CPython is */

static atomic_int on;
static atomic_uint_fast64_t generation;
static atomic_uint_fast64_t st_python, st_no_gil, st_misses, st_direct, st_mismatch;

#define LINE_SLOTS 4 /* per code object: instruction offset -> line (3.11+) */

typedef struct code_ent {
    pyobj code; /* a strong reference while cached */
    uint32_t file, func;
    int lasti[LINE_SLOTS], line[LINE_SLOTS]; /* lasti -1: empty */
    unsigned next;
} code_ent;

/* A code object seen without the GIL: no reference is held (none can be taken without the GIL),
 * so a hit is checked against the object's names and line table (gmp_pycode_key). */
typedef struct dcode_ent {
    const void *code;
    gmp_pycode_key key;
    uint32_t file, func;
    int addr[LINE_SLOTS], line[LINE_SLOTS]; /* addr -2: empty */
    unsigned next;
} dcode_ent;

typedef struct node {
    uint64_t a; /* native: address; Python: file << 32 | function */
    uint32_t line;
    uint32_t kind; /* GMP_FRAME_* */
} node;

typedef struct stk_ent {
    uint64_t hash;
    node *nodes;
    uint32_t id, n, cap;
} stk_ent;

typedef struct pytls {
    code_ent *codes;
    dcode_ent *dcodes;
    stk_ent *stacks;
    uint64_t gen;
    int codes_stale; /* codes hold references of an older trace: dropped when the GIL is held */
} pytls;

static pthread_key_t tls_key;
static int tls_key_ok;
static _Thread_local pytls *T;

static uint32_t hook(void *ctx, gmp_writer *w, int kinds, const uint64_t *native, unsigned n,
                     unsigned depth);
static void tls_free(void *p);

/* ---------- start ---------- */

typedef struct find_ctx {
    char path[4096];
} find_ctx;

static int find_libpython(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    find_ctx *c = arg;
    const char *n = info->dlpi_name ? info->dlpi_name : "";
    const char *b = strrchr(n, '/');
    b = b ? b + 1 : n;
    if (!strncmp(b, "libpython3.", 11) && strstr(b, ".so")) {
        snprintf(c->path, sizeof c->path, "%s", n);
        return 1;
    }
    return 0;
}

/* A symbol of the process's global scope, else of a libpython loaded privately (RTLD_LOCAL, as an
 * embedding program or a plugin host may do). */
static void *sym(void *lib, const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p && lib)
        p = dlsym(lib, name);
    return p;
}

static void *sym1(const char *name)
{
    return sym(py_lib, name);
}

#define LOAD(field, name) (*(void **)&P.field = sym(lib, name))

int gmp_pystack_start(char *why, size_t whylen)
{
    if (why && whylen)
        why[0] = 0;
    atomic_store(&on, 0);
    gmp_stack_set_hook(NULL, NULL);
    memset(&P, 0, sizeof P);
    void *lib = NULL;
    if (!dlsym(RTLD_DEFAULT, "Py_IsInitialized")) {
        find_ctx c = {{0}};
        dl_iterate_phdr(find_libpython, &c);
        if (c.path[0])
            lib = dlopen(c.path, RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
    }
    LOAD(is_initialized, "Py_IsInitialized");
    const char *(*version)(void) = NULL;
    *(void **)&version = sym(lib, "Py_GetVersion");
    if (!P.is_initialized || !version) {
        if (why)
            snprintf(why, whylen, "no Python interpreter in this process");
        return 0;
    }
    const char *v = version();
    int major = 0, minor = 0;
    if (!v || sscanf(v, "%d.%d", &major, &minor) != 2 || major != 3 || minor < 8) {
        if (why)
            snprintf(why, whylen, "Python %.16s: Python stacks need CPython 3.8 or later",
                     v ? v : "?");
        return -1;
    }
    P.minor = minor;
    LOAD(this_thread_state, "PyGILState_GetThisThreadState");
    LOAD(unchecked_get, "PyThreadState_GetUnchecked"); /* 3.13 */
    if (!P.unchecked_get)
        LOAD(unchecked_get, "_PyThreadState_UncheckedGet"); /* 3.5 - 3.12 (3.13: alias) */
    if (minor >= 9) {
        LOAD(thread_frame, "PyThreadState_GetFrame");
        LOAD(frame_back, "PyFrame_GetBack");
        LOAD(frame_code, "PyFrame_GetCode");
    } else {
        LOAD(eval_frame, "PyEval_GetFrame");
        LOAD(getattr_obj, "PyObject_GetAttr");
        LOAD(intern, "PyUnicode_InternFromString");
    }
    LOAD(frame_line, "PyFrame_GetLineNumber");
    LOAD(getattr, "PyObject_GetAttrString");
    LOAD(utf8, "PyUnicode_AsUTF8AndSize");
    LOAD(incref, "Py_IncRef");
    LOAD(decref, "Py_DecRef");
    LOAD(err_fetch, "PyErr_Fetch");
    LOAD(err_restore, "PyErr_Restore");
    LOAD(err_clear, "PyErr_Clear");
    if (minor >= 11)
        LOAD(frame_lasti, "PyFrame_GetLasti");
    if (minor == 11) {
        LOAD(gc_disable, "PyGC_Disable");
        LOAD(gc_enable, "PyGC_Enable");
    }
    P.none = sym(lib, "_Py_NoneStruct");
    LOAD(finalizing, "Py_IsFinalizing"); /* 3.13 */
    if (!P.finalizing)
        LOAD(finalizing, "_Py_IsFinalizing");
    const char *missing = NULL;
#define NEED(f, name)                                                                              \
    if (!missing && !P.f)                                                                          \
    missing = name
    NEED(this_thread_state, "PyGILState_GetThisThreadState");
    NEED(unchecked_get, "_PyThreadState_UncheckedGet");
    if (minor >= 9) {
        NEED(thread_frame, "PyThreadState_GetFrame");
        NEED(frame_back, "PyFrame_GetBack");
        NEED(frame_code, "PyFrame_GetCode");
    } else {
        NEED(eval_frame, "PyEval_GetFrame");
        NEED(getattr_obj, "PyObject_GetAttr");
        NEED(intern, "PyUnicode_InternFromString");
        NEED(none, "_Py_NoneStruct");
    }
    NEED(frame_line, "PyFrame_GetLineNumber");
    NEED(getattr, "PyObject_GetAttrString");
    NEED(utf8, "PyUnicode_AsUTF8AndSize");
    NEED(incref, "Py_IncRef");
    NEED(decref, "Py_DecRef");
    NEED(err_fetch, "PyErr_Fetch");
    NEED(err_restore, "PyErr_Restore");
    NEED(err_clear, "PyErr_Clear");
    if (minor == 11) {
        NEED(gc_disable, "PyGC_Disable");
        NEED(gc_enable, "PyGC_Enable");
    }
#undef NEED
    if (missing) {
        if (why)
            snprintf(why, whylen, "Python 3.%d: %s not found: no Python stacks", minor, missing);
        return -1;
    }
    /* the evaluation loop's extent, for splicing */
    void *ev = sym(lib, "_PyEval_EvalFrameDefault");
    Dl_info di;
    const ElfW(Sym) *es = NULL;
    if (ev && dladdr1(ev, &di, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
        P.eval_lo = (uintptr_t)ev;
        P.eval_hi = (uintptr_t)ev + es->st_size;
    }
    if (!tls_key_ok && pthread_key_create(&tls_key, tls_free) == 0)
        tls_key_ok = 1;
    /* frames of threads that released the GIL: read directly when this version's layouts are
     * known and the interpreter's objects check out against them */
    char dwhy[160] = "";
    py_lib = lib;
    int d = minor >= 9 && P.finalizing && gmp_pyframes_init(minor, sym1, dwhy, sizeof dwhy);
    atomic_store(&direct, d);
    atomic_store(&verified, 0);
    const char *skew = getenv("GPUMEMPROF_TEST_PYFRAMES_SKEW");
    test_skew = skew && *skew == '1';
    if (minor < 9)
        snprintf(dwhy, sizeof dwhy, "Python 3.%d: the reader needs 3.9 or later", minor);
    else if (!P.finalizing)
        snprintf(dwhy, sizeof dwhy, "Python 3.%d: _Py_IsFinalizing not found", minor);
    snprintf(dwhy_buf, sizeof dwhy_buf, "%s", d ? "" : dwhy);
    atomic_store(&direct_off, d ? NULL : dwhy_buf);
    atomic_fetch_add(&generation, 1);
    if (why) {
        if (d)
            snprintf(why, whylen, "Python 3.%d", minor);
        else
            snprintf(why, whylen, "Python 3.%d (threads without the GIL: no Python frames: %s)",
                     minor, dwhy);
    }
    atomic_store(&on, 1);
    gmp_stack_set_hook(hook, NULL);
    return 1;
}

int gmp_pystack_minor(void)
{
    return P.minor;
}

const char *gmp_pystack_direct_off(void)
{
    return atomic_load(&direct_off);
}

/* ---------- the walk ---------- */

static void tls_free(void *p)
{
    pytls *t = p;
    if (!t)
        return;
    /* The code references stay (no GIL here to drop them): bounded by CODE_SLOTS. */
    free(t->codes);
    free(t->dcodes);
    if (t->stacks)
        for (unsigned i = 0; i < STK_SLOTS; i++)
            free(t->stacks[i].nodes);
    free(t->stacks);
    free(t);
}

/* Drops the code references of an older trace. GIL held. */
static void codes_drop(pytls *t)
{
    for (unsigned i = 0; i < CODE_SLOTS; i++) {
        if (t->codes[i].code)
            P.decref(t->codes[i].code);
        t->codes[i].code = NULL;
    }
    t->codes_stale = 0;
}

/* The thread's caches, reset when the trace changed (string ids of another writer). gil: whether
 * the thread holds the GIL (the code references of an older trace are dropped only then). */
static pytls *tls_get(int gil)
{
    uint64_t g = atomic_load_explicit(&generation, memory_order_acquire);
    pytls *t = T;
    if (t && t->gen == g) {
        if (gil && t->codes_stale)
            codes_drop(t);
        return t;
    }
    if (!t) {
        if (!tls_key_ok)
            return NULL;
        t = calloc(1, sizeof *t);
        if (!t)
            return NULL;
        t->codes = calloc(CODE_SLOTS, sizeof *t->codes);
        t->dcodes = calloc(CODE_SLOTS, sizeof *t->dcodes);
        t->stacks = calloc(STK_SLOTS, sizeof *t->stacks);
        if (!t->codes || !t->dcodes || !t->stacks) {
            free(t->codes);
            free(t->dcodes);
            free(t->stacks);
            free(t);
            return NULL;
        }
        /* tls_free frees the arrays and t itself */
        pthread_setspecific(tls_key, t);
        T = t;
    } else {
        t->codes_stale = 1;
        if (gil)
            codes_drop(t);
        for (unsigned i = 0; i < CODE_SLOTS; i++)
            t->dcodes[i].code = NULL;
        for (unsigned i = 0; i < STK_SLOTS; i++)
            t->stacks[i].id = 0;
    }
    t->gen = g;
    return t;
}

/* A Python str as a trace string id; 0 when it is not a str. */
static uint32_t str_id(gmp_writer *w, pyobj s)
{
    if (!s)
        return 0;
    py_ssize n = 0;
    const char *u = P.utf8(s, &n);
    if (!u || n < 0)
        return 0;
    if ((size_t)n > GMP_MAX_STRING_BYTES)
        n = GMP_MAX_STRING_BYTES;
    return gmp_writer_string(w, u, (size_t)n);
}

/* (file, function) string ids of a code object, through the thread's cache. GIL held. */
static code_ent *code_info(pytls *t, gmp_writer *w, pyobj code)
{
    uintptr_t k = (uintptr_t)code;
    code_ent *e = &t->codes[((k >> 4) * 0x9E3779B97F4A7C15ull) >> 54 & (CODE_SLOTS - 1)];
    if (e->code == code)
        return e;
    pyobj file = P.getattr(code, "co_filename");
    pyobj func = P.getattr(code, P.minor >= 11 ? "co_qualname" : "co_name");
    uint32_t fid = str_id(w, file), nid = str_id(w, func);
    if (file)
        P.decref(file);
    if (func)
        P.decref(func);
    if (!fid || !nid)
        return NULL;
    if (e->code)
        P.decref(e->code);
    P.incref(code);
    e->code = code;
    e->file = fid;
    e->func = nid;
    for (unsigned i = 0; i < LINE_SLOTS; i++)
        e->lasti[i] = -1;
    e->next = 0;
    return e;
}

/* The calling thread's Python frames, innermost first, at most max. GIL held. */
static unsigned walk(pytls *t, gmp_writer *w, pyobj ts, node *out, unsigned max)
{
    unsigned n = 0;
    pyobj f;
    if (P.minor >= 9) {
        f = P.thread_frame(ts);
    } else {
        if (!P.s_code)
            P.s_code = P.intern("f_code"); /* kept for the life of the process */
        if (!P.s_back)
            P.s_back = P.intern("f_back");
        if (!P.s_code || !P.s_back)
            return 0;
        f = P.eval_frame();
        if (f)
            P.incref(f);
    }
    while (f && n < max) {
        pyobj code = P.minor >= 9 ? P.frame_code(f) : P.getattr_obj(f, P.s_code);
        if (code) {
            code_ent *e = code_info(t, w, code);
            if (e) {
                /* PyFrame_GetLineNumber scans the code's line table from its start: cache the
                 * lines of the last few instruction offsets of this code object */
                int line = -1;
                int lasti = P.frame_lasti ? P.frame_lasti(f) : -1;
                if (lasti >= 0) {
                    for (unsigned i = 0; i < LINE_SLOTS; i++)
                        if (e->lasti[i] == lasti) {
                            line = e->line[i];
                            break;
                        }
                }
                if (line < 0) {
                    line = P.frame_line(f);
                    if (lasti >= 0) {
                        unsigned i = e->next++ % LINE_SLOTS;
                        e->lasti[i] = lasti;
                        e->line[i] = line;
                    }
                }
                out[n].kind = GMP_FRAME_PYTHON;
                out[n].a = (uint64_t)e->file << 32 | e->func;
                out[n].line = line > 0 ? (uint32_t)line : 0;
                n++;
            }
            P.decref(code);
        }
        pyobj back = P.minor >= 9 ? P.frame_back(f) : P.getattr_obj(f, P.s_back);
        if (back == P.none && back) {
            P.decref(back);
            back = NULL;
        }
        P.decref(f);
        f = back;
    }
    if (f)
        P.decref(f);
    return n;
}

/* (file, function) string ids of a code object met without the GIL, through the thread's cache:
 * a hit must still have the cached names and line table (no reference keeps the object). */
static dcode_ent *dcode_info(pytls *t, gmp_writer *w, const void *code)
{
    gmp_pycode_key k;
    if (!gmp_pyframes_code_key(code, &k))
        return NULL;
    uintptr_t a = (uintptr_t)code;
    dcode_ent *e = &t->dcodes[((a >> 4) * 0x9E3779B97F4A7C15ull) >> 54 & (CODE_SLOTS - 1)];
    if (e->code == code && e->key.file == k.file && e->key.name == k.name &&
        e->key.table == k.table && e->key.firstlineno == k.firstlineno)
        return e;
    char fb[1024], nb[512];
    size_t fl = 0, nl = 0;
    const char *f = gmp_pyframes_code_file(code, fb, sizeof fb, &fl);
    const char *nm = gmp_pyframes_code_name(code, nb, sizeof nb, &nl);
    if (!f || !nm)
        return NULL;
    if (fl > GMP_MAX_STRING_BYTES)
        fl = GMP_MAX_STRING_BYTES;
    if (nl > GMP_MAX_STRING_BYTES)
        nl = GMP_MAX_STRING_BYTES;
    uint32_t fid = gmp_writer_string(w, f, fl), nid = gmp_writer_string(w, nm, nl);
    if (!fid || !nid)
        return NULL;
    e->code = code;
    e->key = k;
    e->file = fid;
    e->func = nid;
    for (unsigned i = 0; i < LINE_SLOTS; i++)
        e->addr[i] = -2;
    e->next = 0;
    return e;
}

/* The calling thread's Python frames read from its thread state ts without the GIL (the thread
 * released it: its frames cannot change until it is back), innermost first, at most max. */
static unsigned walk_direct(pytls *t, gmp_writer *w, const void *ts, node *out, unsigned max)
{
    gmp_pyframe fr[GMP_STACK_MAX_DEPTH];
    unsigned nf = gmp_pyframes_walk(ts, fr, max), n = 0;
    for (unsigned i = 0; i < nf; i++) {
        dcode_ent *e = dcode_info(t, w, fr[i].code);
        if (!e)
            continue;
        int line = fr[i].line;
        if (!line) {
            line = -1;
            for (unsigned j = 0; j < LINE_SLOTS; j++)
                if (e->addr[j] == fr[i].addr) {
                    line = e->line[j];
                    break;
                }
            if (line < 0) {
                line = gmp_pyframes_line(fr[i].code, fr[i].addr);
                unsigned j = e->next++ % LINE_SLOTS;
                e->addr[j] = fr[i].addr;
                e->line[j] = line;
            }
        }
        if (test_skew && line > 0)
            line++;
        out[n].kind = GMP_FRAME_PYTHON;
        out[n].a = (uint64_t)e->file << 32 | e->func;
        out[n].line = line > 0 ? (uint32_t)line : 0;
        n++;
    }
    return n;
}

/* One stack read through the C API (py, np frames) read again directly and compared. Out of
 * line: its buffer stays off the hook's stack frame. */
static __attribute__((noinline)) void verify_direct(pytls *t, gmp_writer *w, const void *ts,
                                                    const node *py, unsigned np, unsigned max)
{
    node d[GMP_STACK_MAX_DEPTH];
    unsigned nd = walk_direct(t, w, ts, d, max);
    if (nd == np && !memcmp(d, py, np * sizeof *py)) {
        atomic_fetch_add(&verified, 1);
    } else {
        atomic_store(&direct, 0);
        if (atomic_fetch_add(&st_mismatch, 1) == 0)
            atomic_store(&direct_off, "its self-check failed: a stack read without the GIL "
                                      "differed from the same stack read through CPython's C API");
    }
}

static int is_eval(uint64_t pc)
{
    return pc > P.eval_lo && pc <= P.eval_hi;
}

/* Native frames with the Python frames spliced in where the evaluation loop runs them. */
static unsigned splice(const uint64_t *pcs, unsigned n, const node *py, unsigned np, node *out)
{
    unsigned nev = 0, k = 0, pi = 0, ei = 0;
    if (P.eval_lo)
        for (unsigned i = 0; i < n; i++)
            nev += is_eval(pcs[i]);
    for (unsigned i = 0; i < n; i++) {
        if (P.eval_lo && pi < np && is_eval(pcs[i])) {
            unsigned take = ++ei == nev ? np - pi : 1;
            for (unsigned j = 0; j < take; j++)
                out[k++] = py[pi++];
            continue;
        }
        out[k].kind = GMP_FRAME_NATIVE;
        out[k].a = pcs[i];
        out[k].line = 0;
        k++;
    }
    while (pi < np)
        out[k++] = py[pi++];
    return k;
}

static uint64_t hash_nodes(const node *x, unsigned n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= x[i].a + ((uint64_t)x[i].line << 40 | x[i].kind);
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 31;
    }
    return h;
}

static uint32_t intern(gmp_writer *w, const node *x, unsigned n)
{
    uint32_t id = 0;
    for (unsigned i = n; i-- > 0;) {
        if (x[i].kind == GMP_FRAME_NATIVE)
            id = gmp_writer_stack_native(w, id, x[i].a);
        else
            id = gmp_writer_stack_python(w, id, (uint32_t)(x[i].a >> 32), (uint32_t)x[i].a,
                                         x[i].line);
        if (!id)
            return 0;
    }
    return id;
}

static uint32_t lookup_or_intern(pytls *t, gmp_writer *w, int kinds, node *x, unsigned n,
                                 const node *py, unsigned np, unsigned depth)
{
    uint64_t h = hash_nodes(x, n);
    stk_ent *e = &t->stacks[h & (STK_SLOTS - 1)];
    if (e->id && e->hash == h && e->n == n && !memcmp(e->nodes, x, n * sizeof *x))
        return e->id;
    atomic_fetch_add_explicit(&st_misses, 1, memory_order_relaxed);
    uint64_t h0 = h;
    if (kinds & GMP_STACK_NATIVE) {
        /* a stack not seen on this thread: the module map first (new objects, new exclusions) */
        uint64_t pcs[GMP_STACK_MAX_DEPTH];
        unsigned m = gmp_stack_refresh(pcs, depth);
        n = splice(pcs, m, py, np, x);
        h = hash_nodes(x, n);
    }
    uint32_t id = intern(w, x, n);
    if (!id || h != h0)
        return id; /* the frames changed under the refresh: the next call caches them */
    if (e->cap < n) {
        node *nn = realloc(e->nodes, n * sizeof *nn);
        if (!nn) {
            e->id = 0;
            return id;
        }
        e->nodes = nn;
        e->cap = n;
    }
    memcpy(e->nodes, x, n * sizeof *x);
    e->n = n;
    e->hash = h;
    e->id = id;
    return id;
}

static uint32_t hook(void *ctx, gmp_writer *w, int kinds, const uint64_t *native, unsigned n,
                     unsigned depth)
{
    (void)ctx;
    if (!atomic_load_explicit(&on, memory_order_acquire) || !w)
        return 0;
    if (!P.is_initialized())
        return 0;
    /* this thread's own state (PyGILState's thread-specific value; no GIL needed), and whether
     * it is the one running now, i.e. this thread holds the GIL */
    pyobj mine = P.this_thread_state();
    if (!mine)
        return 0; /* a thread Python does not know */
    int gil = P.unchecked_get() == mine;
    if (!gil && (!atomic_load_explicit(&direct, memory_order_relaxed) || P.finalizing())) {
        atomic_fetch_add_explicit(&st_no_gil, 1, memory_order_relaxed);
        return 0;
    }
    pytls *t = tls_get(gil);
    if (!t)
        return 0;
    node py[GMP_STACK_MAX_DEPTH], x[MAX_NODES];
    unsigned max = depth < GMP_STACK_MAX_DEPTH ? depth : GMP_STACK_MAX_DEPTH, np;
    if (gil) {
        pyobj et = NULL, ev = NULL, etb = NULL;
        P.err_fetch(&et, &ev, &etb); /* the program's pending exception, if any, is kept */
        /* 3.11 materializes frame objects, and an allocation there may run a collection at once
           (3.11 Modules/gcmodule.c _PyObject_GC_Link): finalizers inside a CUDA call. The GC is
           held off around the walk, and turned back on only when it was on (PyGC_Disable
           returns the previous state): the GIL is held, so no other thread can change it in
           between. From 3.12 an allocation only schedules a collection for the evaluation
           loop's next check (_Py_ScheduleGC, 3.12 Modules/gcmodule.c, 3.13+ Python/gc.c and
           gc_free_threading.c), which the walk never reaches: the interpreter-wide switch is
           not touched, so a gc.disable() of another thread (free-threaded builds run threads
           side by side) is never undone. */
        int gc_was = P.gc_disable ? P.gc_disable() : 0;
        np = walk(t, w, mine, py, max);
        if (gc_was)
            P.gc_enable();
        P.err_clear();
        P.err_restore(et, ev, etb);
        /* the direct reader checked against the C API on the first stacks: a build or a patch
         * release whose structures differ from the layouts read turns it off (native frames only
         * without the GIL, counted in no_gil) instead of giving wrong frames */
        if (np && atomic_load_explicit(&direct, memory_order_relaxed) &&
            atomic_load_explicit(&verified, memory_order_relaxed) < VERIFY_STACKS)
            verify_direct(t, w, mine, py, np, max);
    } else {
        np = walk_direct(t, w, mine, py, max);
        if (np)
            atomic_fetch_add_explicit(&st_direct, 1, memory_order_relaxed);
    }
    if (!np)
        return 0;
    atomic_fetch_add_explicit(&st_python, 1, memory_order_relaxed);
    unsigned nx;
    if (kinds & GMP_STACK_NATIVE) {
        nx = splice(native, n, py, np, x);
    } else {
        memcpy(x, py, np * sizeof *py);
        nx = np;
    }
    return lookup_or_intern(t, w, kinds, x, nx, py, np, depth);
}

void gmp_pystack_stop(void)
{
    atomic_store(&on, 0);
    gmp_stack_set_hook(NULL, NULL);
}

void gmp_pystack_get_stats(gmp_pystack_stats *out)
{
    out->python = atomic_load(&st_python);
    out->no_gil = atomic_load(&st_no_gil);
    out->misses = atomic_load(&st_misses);
    out->direct = atomic_load(&st_direct);
    out->mismatch = atomic_load(&st_mismatch);
}
