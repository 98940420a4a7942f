/* test_pyframes: collectors/gmp_pyframes on CPython 3.14's structures laid out in memory as 3.14's
 * headers say, since no 3.14 interpreter is installed here (ctest python_pyframes).
 *
 * A fake interpreter: _PyRuntime starting with a _Py_DebugOffsets written member by member in the
 * order of the 3.14 header, type objects with their tp_basicsize, a thread state, a chain of
 * _PyInterpreterFrame with tagged f_executable references and every kind of owner, code objects,
 * str and bytes objects; gmp_pyframes_init gets its symbols from this test. The offsets are the
 * headers' (3.14 branch at 3.14.0b4+, read in a fork that renames Py to Ty: johndoe6345789/typthon;
 * python/cpython for 3.15-dev), computed by hand from the declarations cited at each use:
 *   Include/internal/pycore_debug_offsets.h:67-236     _Py_DebugOffsets (members, order)
 *   Include/internal/pycore_interpframe_structs.h:22-50 enum _frameowner, _PyInterpreterFrame
 *   Include/internal/pycore_stackref.h ("With GIL")    Py_TAG_BITS 3, Py_TAG_REFCNT 1, Py_INT_TAG 3
 *   Include/cpython/code.h (_PyCode_DEF)               PyCodeObject
 *   Include/cpython/pystate.h (struct _ts)             PyThreadState.current_frame
 * Then the same checks on 3.13's header (3.13.0 Include/internal/pycore_runtime.h:62-195), whose
 * layout must equal the table printed from 3.13's headers, and the refusals: another cookie, a
 * version that is not the interpreter's, a free-threaded build, an unknown minor version, a debug
 * offsets that do not describe a default build, types whose sizes disagree. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmp_pyframes.h"

static int failures;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

/* ---------- the fake interpreter's memory ---------- */

#define TYPE_BYTES 416
static _Alignas(16) unsigned char type_type[TYPE_BYTES], code_type[TYPE_BYTES],
    str_type[TYPE_BYTES], bytes_type[TYPE_BYTES];
static _Alignas(16) unsigned char runtime[4096];
static _Alignas(16) unsigned char tstate[1024];
static _Alignas(16) unsigned char frames[8][96];
static _Alignas(16) unsigned char codes[3][512];
static _Alignas(16) unsigned char strs[6][128];
static _Alignas(16) unsigned char tables[3][256];

static void put64(unsigned char *base, size_t off, uint64_t v)
{
    memcpy(base + off, &v, sizeof v);
}

static void put32(unsigned char *base, size_t off, uint32_t v)
{
    memcpy(base + off, &v, sizeof v);
}

static void *sym(const char *name)
{
    if (!strcmp(name, "_PyRuntime"))
        return runtime;
    if (!strcmp(name, "PyType_Type"))
        return type_type;
    if (!strcmp(name, "PyCode_Type"))
        return code_type;
    if (!strcmp(name, "PyUnicode_Type"))
        return str_type;
    if (!strcmp(name, "PyBytes_Type"))
        return bytes_type;
    return NULL;
}

/* PyTypeObject: ob_type at 8 (PyObject_VAR_HEAD), tp_basicsize at 32 (after tp_name, 24) */
static void make_type(unsigned char *t, uint64_t basicsize)
{
    memset(t, 0, TYPE_BYTES);
    put64(t, 8, (uint64_t)(uintptr_t)type_type);
    put64(t, 32, basicsize);
}

/* ---------- _Py_DebugOffsets, member by member in the header's order ---------- */

static size_t pos;
static void m(uint64_t v)
{
    put64(runtime, pos, v);
    pos += 8;
}

/* 3.14 (pycore_debug_offsets.h:67-236). Values: a default 64-bit build. */
static void write_debug_offsets_314(const char *cookie, uint64_t version, uint64_t free_threaded,
                                    uint64_t ob_type)
{
    memset(runtime, 0, sizeof runtime);
    memcpy(runtime, cookie, 8);
    pos = 8;
    m(version);
    m(free_threaded);
    /* runtime_state: size, finalizing, interpreters_head (:72-76) */
    m(2000), m(40), m(56);
    /* interpreter_state (:79-96): size id next threads_head threads_main gc imports_modules
       sysdict builtins ceval_gil gil_runtime_state gil_runtime_state_enabled
       gil_runtime_state_locked gil_runtime_state_holder code_object_generation tlbc_generation */
    for (int i = 0; i < 16; i++)
        m(i == 0 ? 100000 : (uint64_t)(8 * i));
    /* thread_state (:99-109): size prev next interp current_frame thread_id native_thread_id
       datastack_chunk status. struct _ts: prev 0, next 8, interp 16, eval_breaker 24, _status 32,
       holds_gil 36, _whence 40, state 44, py_recursion_remaining 48, py_recursion_limit 52,
       recursion_headroom 56, tracing 60, what_event 64, current_frame 72 ... */
    m(824), m(0), m(8), m(16), m(72), m(152), m(160), m(232), m(32);
    /* interpreter_frame (:112-121): size previous executable instr_ptr localsplus owner
       stackpointer tlbc_index. _PyInterpreterFrame: f_executable 0, previous 8, f_funcobj 16,
       f_globals 24, f_builtins 32, f_locals 40, frame_obj 48, instr_ptr 56, stackpointer 64,
       return_offset 72, owner 74, visited 75, localsplus 80 */
    m(88), m(8), m(0), m(56), m(80), m(74), m(64), m(0);
    /* code_object (:124-136): size filename name qualname linetable firstlineno argcount
       localsplusnames localspluskinds co_code_adaptive co_tlbc. PyCodeObject: VAR_HEAD 24,
       co_consts 24, co_names 32, co_exceptiontable 40, co_flags 48, co_argcount 52, ...,
       co_firstlineno 68, ..., co_version 92, co_localsplusnames 96, co_localspluskinds 104,
       co_filename 112, co_name 120, co_qualname 128, co_linetable 136, co_weakreflist 144,
       co_executors 152, _co_cached 160, _co_instrumentation_version 168, _co_monitoring 176,
       _co_unique_id 184, _co_firsttraceable 192, co_extra 200, co_code_adaptive 208 */
    m(216), m(112), m(120), m(128), m(136), m(68), m(52), m(96), m(104), m(208), m(0);
    m(16), m(ob_type);            /* pyobject: size ob_type (:139-142) */
    m(416), m(24), m(88), m(168); /* type_object: size tp_name tp_repr tp_flags */
    m(32), m(24), m(16);          /* tuple_object */
    m(40), m(24), m(16);          /* list_object */
    m(200), m(32), m(40), m(48);  /* set_object: size used table mask */
    m(48), m(32), m(40);          /* dict_object */
    m(24), m(16);                 /* float_object */
    m(32), m(16), m(24);          /* long_object: size lv_tag ob_digit */
    m(40), m(16), m(32);          /* bytes_object: size ob_size ob_sval (:195-199) */
    m(64), m(32), m(16), m(40);   /* unicode_object: size state length asciiobject_size */
    m(1000), m(12);               /* gc: size collecting */
    m(200), m(24), m(96), m(90);  /* gen_object */
    m(0), m(8);                   /* llist_node */
    for (int i = 0; i < 6; i++)   /* debugger_support */
        m(i == 5 ? 512 : (uint64_t)(16 * i));
}

/* 3.13 (3.13.0 pycore_runtime.h:62-195): the offsets of the table printed from 3.13.0's headers */
static void write_debug_offsets_313(void)
{
    memset(runtime, 0, sizeof runtime);
    memcpy(runtime, "xdebugpy", 8);
    pos = 8;
    m(0x030D00F0), m(0);
    m(2000), m(40), m(56);
    for (int i = 0; i < 13; i++) /* interpreter_state: 13 members */
        m(i == 0 ? 100000 : (uint64_t)(8 * i));
    m(300), m(0), m(8), m(16), m(72), m(152), m(160), m(232), m(32); /* thread_state */
    m(80), m(8), m(0), m(56), m(72), m(70);                          /* interpreter_frame: 6 */
    m(208), m(112), m(120), m(128), m(136), m(68), m(52), m(96), m(104), m(200); /* code: 10 */
    m(16), m(8);                                                                 /* pyobject */
    m(416), m(24), m(88), m(168);                                                /* type_object */
    m(32), m(24), m(16);                                                         /* tuple */
    m(40), m(24), m(16);                                                         /* list */
    m(48), m(32), m(40);                                                         /* dict */
    m(24), m(16);                                                                /* float */
    m(32), m(16), m(24);                                                         /* long */
    m(40), m(16), m(32);                                                         /* bytes */
    m(64), m(32), m(16), m(40);                                                  /* unicode */
    m(1000), m(12);                                                              /* gc */
}

/* ---------- objects ---------- */

/* A compact ASCII str: PyASCIIObject (ob_type 8, length 16, state 32: kind 1 << 2, compact
   1 << 5, ascii 1 << 6), its text right after (40) */
static void *ascii_str(unsigned char *s, const char *text)
{
    memset(s, 0, 128);
    put64(s, 8, (uint64_t)(uintptr_t)str_type);
    put64(s, 16, strlen(text));
    put32(s, 32, 1u << 2 | 1u << 5 | 1u << 6);
    memcpy(s + 40, text, strlen(text) + 1);
    return s;
}

/* A compact 2-byte str without its UTF-8 copy (utf8 at 48 NULL): code points at 56 */
static void *ucs2_str(unsigned char *s, const uint16_t *cp, size_t n)
{
    memset(s, 0, 128);
    put64(s, 8, (uint64_t)(uintptr_t)str_type);
    put64(s, 16, n);
    put32(s, 32, 2u << 2 | 1u << 5);
    memcpy(s + 56, cp, 2 * n);
    return s;
}

/* A location table whose every code unit is one line after the previous one: ONE_LINE1 entries
   (code 11, one unit: 0x80 | 11 << 3 | 0) with their two column bytes (Objects/locations.md) */
static void *line_table(unsigned char *b, int units)
{
    memset(b, 0, sizeof tables[0]);
    if (32 + 3 * units > (int)sizeof tables[0])
        units = 0;
    put64(b, 8, (uint64_t)(uintptr_t)bytes_type);
    put64(b, 16, (uint64_t)(3 * units));
    for (int i = 0; i < units; i++) {
        b[32 + 3 * i] = 0x80 | 11 << 3;
        b[33 + 3 * i] = 1;
        b[34 + 3 * i] = 2;
    }
    return b;
}

/* PyCodeObject of 3.14 (offsets above) */
static unsigned char *code314(int i, void *file, void *qualname, int firstlineno, int firsttr)
{
    unsigned char *c = codes[i];
    memset(c, 0, sizeof codes[i]);
    put64(c, 8, (uint64_t)(uintptr_t)code_type);
    put64(c, 112, (uint64_t)(uintptr_t)file);
    put64(c, 120, (uint64_t)(uintptr_t)qualname);
    put64(c, 128, (uint64_t)(uintptr_t)qualname);
    put64(c, 136, (uint64_t)(uintptr_t)line_table(tables[i], 40));
    put32(c, 68, (uint32_t)firstlineno);
    put32(c, 192, (uint32_t)firsttr);
    return c;
}

enum { THREAD = 0, GENERATOR = 1, FRAME_OBJECT = 2, INTERPRETER = 3, CSTACK = 4 };

/* _PyInterpreterFrame of 3.14: f_executable (a _PyStackRef's bits) 0, previous 8, instr_ptr 56,
   owner 74 */
static void frame314(int i, uint64_t executable, unsigned char *previous, const unsigned char *code,
                     int unit, int owner)
{
    unsigned char *f = frames[i];
    memset(f, 0, sizeof frames[i]);
    put64(f, 0, executable);
    put64(f, 8, (uint64_t)(uintptr_t)previous);
    put64(f, 56, code ? (uint64_t)(uintptr_t)(code + 208 + 2 * unit) : 0);
    f[74] = (unsigned char)owner;
}

static void test_314(void)
{
    make_type(type_type, TYPE_BYTES);
    make_type(code_type, 208); /* offsetof(PyCodeObject, co_code_adaptive) */
    make_type(str_type, 64);   /* sizeof(PyUnicodeObject) */
    make_type(bytes_type, 33); /* PyBytesObject_SIZE: offsetof(ob_sval) + 1 */
    write_debug_offsets_314("xdebugpy", 0x030E00F0, 0, 8);

    char why[200] = "";
    CHECK(gmp_pyframes_init(14, sym, why, sizeof why) == 1, "3.14 refused: %s", why);
    gmp_pyframes_layout l;
    CHECK(gmp_pyframes_layout_in_use(&l) && l.minor == 14, "no 3.14 layout in use");
    CHECK(l.ts_frame == 72 && l.f_code == 0 && l.f_back == 8 && l.f_instr == 56 &&
              l.f_owner == 74 && l.co_filename == 112 && l.co_qualname == 128 &&
              l.co_table == 136 && l.co_firstlineno == 68 && l.co_code == 208 &&
              l.co_firsttraceable == 192 && l.exec_tag == 3 && l.owner_skip == 3,
          "3.14 layout read: ts %d code %d back %d instr %d owner %d file %d qual %d table %d "
          "first %d code %d firsttr %d tag %d skip %d",
          l.ts_frame, l.f_code, l.f_back, l.f_instr, l.f_owner, l.co_filename, l.co_qualname,
          l.co_table, l.co_firstlineno, l.co_code, l.co_firsttraceable, l.exec_tag, l.owner_skip);

    static const uint16_t greek[] = {0x039a, 0x03bb, 0x03ac, 0x03c3, 0x03b7, 0x002e, 0x0066};
    unsigned char *c1 = code314(0, ascii_str(strs[0], "/src/train.py"),
                                ascii_str(strs[1], "Model.forward"), 100, 3);
    unsigned char *c2 = code314(1, ascii_str(strs[2], "/src/data.py"),
                                ucs2_str(strs[3], greek, sizeof greek / 2), 200, 5);
    unsigned char *c3 =
        code314(2, ascii_str(strs[4], "/src/main.py"), ascii_str(strs[5], "main"), 300, 2);
    uint64_t c1b = (uint64_t)(uintptr_t)c1, c2b = (uint64_t)(uintptr_t)c2,
             c3b = (uint64_t)(uintptr_t)c3;
    /* innermost first: frames[0] is the thread state's current_frame */
    frame314(7, c3b, NULL, c3, 9, FRAME_OBJECT);       /* main: a frame object's, line 300 + 10 */
    frame314(6, 3 | 4 << 2, frames[7], c3, 4, THREAD); /* a tagged int: not an object */
    frame314(5, c2b | 1, frames[6], c2, 1, CSTACK);    /* 3.14's CSTACK (4): skipped */
    frame314(4, c3b | 1, frames[5], c3, 0, THREAD);    /* incomplete: before _co_firsttraceable */
    frame314(3, c2b, frames[4], c2, 1, GENERATOR);     /* a generator: never incomplete */
    frame314(2, (uint64_t)(uintptr_t)strs[0] | 1, frames[3], NULL, 0, THREAD); /* not code */
    frame314(1, 0, frames[2], NULL, 0, INTERPRETER); /* the entry frame (3.14 ceval.c): skipped */
    frame314(0, c1b | 1, frames[1], c1, 7, THREAD);  /* deferred reference: Py_TAG_REFCNT */
    memset(tstate, 0, sizeof tstate);
    put64(tstate, 72, (uint64_t)(uintptr_t)frames[0]);

    gmp_pyframe fr[16];
    unsigned n = gmp_pyframes_walk(tstate, fr, 16);
    CHECK(n == 3, "3.14 walk: %u frames, want 3", n);
    if (n == 3) {
        CHECK(fr[0].code == c1 && fr[0].addr == 14, "frame 0: %p %d", fr[0].code, fr[0].addr);
        CHECK(fr[1].code == c2 && fr[1].addr == 2, "frame 1: %p %d", fr[1].code, fr[1].addr);
        CHECK(fr[2].code == c3 && fr[2].addr == 18, "frame 2: %p %d", fr[2].code, fr[2].addr);
        CHECK(gmp_pyframes_line(fr[0].code, fr[0].addr) == 108, "line of frame 0: %d",
              gmp_pyframes_line(fr[0].code, fr[0].addr));
        CHECK(gmp_pyframes_line(fr[1].code, fr[1].addr) == 202, "line of frame 1: %d",
              gmp_pyframes_line(fr[1].code, fr[1].addr));
        CHECK(gmp_pyframes_line(fr[2].code, fr[2].addr) == 310, "line of frame 2: %d",
              gmp_pyframes_line(fr[2].code, fr[2].addr));
    }
    CHECK(gmp_pyframes_walk(tstate, fr, 2) == 2, "the walk stops at max");
    char buf[256];
    size_t len = 0;
    const char *t = gmp_pyframes_code_file(c1, buf, sizeof buf, &len);
    CHECK(t && len == 13 && !memcmp(t, "/src/train.py", 13), "file of code 1: %p %zu %.20s",
          (const void *)t, len, t ? t : "");
    t = gmp_pyframes_code_name(c1, buf, sizeof buf, &len);
    CHECK(t && len == 13 && !memcmp(t, "Model.forward", 13), "qualname of code 1");
    t = gmp_pyframes_code_name(c2, buf, sizeof buf, &len);
    const char want[] = "\xce\x9a\xce\xbb\xce\xac\xcf\x83\xce\xb7.f"; /* Κλάση.f */
    CHECK(t && len == sizeof want - 1 && !memcmp(t, want, len), "UCS-2 qualname of code 2");
    gmp_pycode_key k;
    CHECK(gmp_pyframes_code_key(c2, &k) && k.firstlineno == 200 && k.file == strs[2],
          "code key of code 2");
    CHECK(!gmp_pyframes_code_key(strs[0], &k), "a str is not a code object");

    /* a damaged chain: a frame pointer that is not one */
    put64(frames[3], 8, 12345);
    CHECK(gmp_pyframes_walk(tstate, fr, 16) == 0, "a bad previous pointer: nothing trusted");
}

static void refused(const char *label, int minor, const char *want)
{
    char why[200] = "";
    int rc = gmp_pyframes_init(minor, sym, why, sizeof why);
    CHECK(rc == 0 && strstr(why, want), "%s: rc %d, why \"%s\", want \"%s\"", label, rc, why, want);
    gmp_pyframes_layout l;
    CHECK(!gmp_pyframes_layout_in_use(&l), "%s: a layout stays in use", label);
}

static void test_refusals(void)
{
    write_debug_offsets_314("xdebugpX", 0x030E00F0, 0, 8);
    refused("cookie", 14, "no \"xdebugpy\" cookie");
    write_debug_offsets_314("xdebugpy", 0x030E00F0, 0, 8);
    refused("version", 13, "says version 3.14, the interpreter 3.13");
    write_debug_offsets_314("xdebugpy", 0x030E00F0, 1, 24);
    refused("free-threaded", 14, "a free-threaded build (3.14t)");
    write_debug_offsets_314("xdebugpy", 0x030F00A0, 0, 8);
    refused("3.15", 15, "the layout of 3.15's _Py_DebugOffsets is not known");
    write_debug_offsets_314("xdebugpy", 0x030E00F0, 0, 24); /* Py_TRACE_REFS-like header */
    refused("header", 14, "does not describe a default 64-bit build");
    write_debug_offsets_314("xdebugpy", 0x030E00F0, 0, 8);
    make_type(code_type, 200); /* 3.13's code objects with 3.14's offsets */
    refused("fingerprint", 14, "do not have the layout of a default build");
    make_type(code_type, 208);
    refused("3.8", 8, "no frame layout for Python 3.8");
    unsigned char saved[8];
    memcpy(saved, runtime, 8);
    CHECK(gmp_pyframes_init(14, sym, NULL, 0) == 1, "3.14 again, no why buffer");
    memcpy(runtime, saved, 8);
}

static void test_313(void)
{
    make_type(code_type, 200);
    write_debug_offsets_313();
    char why[200] = "";
    CHECK(gmp_pyframes_init(13, sym, why, sizeof why) == 1, "3.13 refused: %s", why);
    gmp_pyframes_layout got, want;
    CHECK(gmp_pyframes_layout_in_use(&got) && gmp_pyframes_table_layout(13, &want), "3.13 layouts");
    CHECK(!memcmp(&got, &want, sizeof got), "3.13: the debug offsets' layout is not the table's");
}

int main(void)
{
    test_314();
    test_refusals();
    test_313();
    if (failures) {
        printf("%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
