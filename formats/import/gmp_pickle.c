/* gmp_pickle: what the pickle readers share (gmp_pickle.h, gmp_pickle_ops.h): the default limits,
 * the table of opcodes and the decoders of their arguments. */
#include "gmp_pickle.h"

void gmp_pickle_limits_default(gmp_pickle_limits *l)
{
    l->max_depth = 64;
    l->max_memo = (size_t)4 << 20;
    l->max_memory = (size_t)1 << 30;
}

const gmp_pickle_opinfo gmp_pickle_ops[256] = {
    [PK_MARK] = {"MARK", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_EMPTY_TUPLE] = {"EMPTY_TUPLE", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_STOP] = {"STOP", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_POP] = {"POP", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_POP_MARK] = {"POP_MARK", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_DUP] = {"DUP", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_BINBYTES] = {"BINBYTES", GMP_PKOP_ACCEPTED, 4, 1},
    [PK_SHORT_BINBYTES] = {"SHORT_BINBYTES", GMP_PKOP_ACCEPTED, 1, 1},
    [PK_FLOAT] = {"FLOAT", GMP_PKOP_TEXT, 0, 0},
    [PK_BINFLOAT] = {"BINFLOAT", GMP_PKOP_ACCEPTED, 8, 0},
    [PK_INT] = {"INT", GMP_PKOP_TEXT, 0, 0},
    [PK_BININT] = {"BININT", GMP_PKOP_ACCEPTED, 4, 0},
    [PK_BININT1] = {"BININT1", GMP_PKOP_ACCEPTED, 1, 0},
    [PK_LONG] = {"LONG", GMP_PKOP_TEXT, 0, 0},
    [PK_BININT2] = {"BININT2", GMP_PKOP_ACCEPTED, 2, 0},
    [PK_NONE] = {"NONE", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_PERSID] = {"PERSID", GMP_PKOP_CALLS, 0, 0},
    [PK_BINPERSID] = {"BINPERSID", GMP_PKOP_CALLS, 0, 0},
    [PK_REDUCE] = {"REDUCE", GMP_PKOP_CALLS, 0, 0},
    [PK_STRING] = {"STRING", GMP_PKOP_TEXT, 0, 0},
    [PK_BINSTRING] = {"BINSTRING", GMP_PKOP_TEXT, 0, 0},
    [PK_SHORT_BINSTRING] = {"SHORT_BINSTRING", GMP_PKOP_TEXT, 0, 0},
    [PK_UNICODE] = {"UNICODE", GMP_PKOP_TEXT, 0, 0},
    [PK_BINUNICODE] = {"BINUNICODE", GMP_PKOP_ACCEPTED, 4, 1},
    [PK_EMPTY_LIST] = {"EMPTY_LIST", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_APPEND] = {"APPEND", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_BUILD] = {"BUILD", GMP_PKOP_CALLS, 0, 0},
    [PK_GLOBAL] = {"GLOBAL", GMP_PKOP_CALLS, 0, 0},
    [PK_DICT] = {"DICT", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_APPENDS] = {"APPENDS", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_GET] = {"GET", GMP_PKOP_TEXT, 0, 0},
    [PK_BINGET] = {"BINGET", GMP_PKOP_ACCEPTED, 1, 0},
    [PK_INST] = {"INST", GMP_PKOP_CALLS, 0, 0},
    [PK_LONG_BINGET] = {"LONG_BINGET", GMP_PKOP_ACCEPTED, 4, 0},
    [PK_LIST] = {"LIST", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_OBJ] = {"OBJ", GMP_PKOP_CALLS, 0, 0},
    [PK_PUT] = {"PUT", GMP_PKOP_TEXT, 0, 0},
    [PK_BINPUT] = {"BINPUT", GMP_PKOP_ACCEPTED, 1, 0},
    [PK_LONG_BINPUT] = {"LONG_BINPUT", GMP_PKOP_ACCEPTED, 4, 0},
    [PK_SETITEM] = {"SETITEM", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_TUPLE] = {"TUPLE", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_SETITEMS] = {"SETITEMS", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_EMPTY_DICT] = {"EMPTY_DICT", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_PROTO] = {"PROTO", GMP_PKOP_ACCEPTED, 1, 0},
    [PK_NEWOBJ] = {"NEWOBJ", GMP_PKOP_CALLS, 0, 0},
    [PK_EXT1] = {"EXT1", GMP_PKOP_CALLS, 0, 0},
    [PK_EXT2] = {"EXT2", GMP_PKOP_CALLS, 0, 0},
    [PK_EXT4] = {"EXT4", GMP_PKOP_CALLS, 0, 0},
    [PK_TUPLE1] = {"TUPLE1", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_TUPLE2] = {"TUPLE2", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_TUPLE3] = {"TUPLE3", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_NEWTRUE] = {"NEWTRUE", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_NEWFALSE] = {"NEWFALSE", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_LONG1] = {"LONG1", GMP_PKOP_ACCEPTED, 1, 1},
    [PK_LONG4] = {"LONG4", GMP_PKOP_ACCEPTED, 4, 1},
    [PK_SHORT_BINUNICODE] = {"SHORT_BINUNICODE", GMP_PKOP_ACCEPTED, 1, 1},
    [PK_BINUNICODE8] = {"BINUNICODE8", GMP_PKOP_ACCEPTED, 8, 1},
    [PK_BINBYTES8] = {"BINBYTES8", GMP_PKOP_ACCEPTED, 8, 1},
    [PK_EMPTY_SET] = {"EMPTY_SET", GMP_PKOP_TYPE, 0, 0},
    [PK_ADDITEMS] = {"ADDITEMS", GMP_PKOP_TYPE, 0, 0},
    [PK_FROZENSET] = {"FROZENSET", GMP_PKOP_TYPE, 0, 0},
    [PK_NEWOBJ_EX] = {"NEWOBJ_EX", GMP_PKOP_CALLS, 0, 0},
    [PK_STACK_GLOBAL] = {"STACK_GLOBAL", GMP_PKOP_CALLS, 0, 0},
    [PK_MEMOIZE] = {"MEMOIZE", GMP_PKOP_ACCEPTED, 0, 0},
    [PK_FRAME] = {"FRAME", GMP_PKOP_ACCEPTED, 8, 0},
    [PK_BYTEARRAY8] = {"BYTEARRAY8", GMP_PKOP_TYPE, 0, 0},
    [PK_NEXT_BUFFER] = {"NEXT_BUFFER", GMP_PKOP_TYPE, 0, 0},
    [PK_READONLY_BUFFER] = {"READONLY_BUFFER", GMP_PKOP_TYPE, 0, 0},
};

int gmp_pickle_decode_long(const unsigned char *b, size_t n, int64_t *i, uint64_t *u, int *big)
{
    *big = 0;
    *i = 0;
    if (n == 0)
        return 0;
    int neg = (b[n - 1] & 0x80) != 0;
    if (n > 8) {
        for (size_t k = 8; k < n; k++)
            if (b[k] != (neg ? 0xff : 0x00))
                return -1;
        if (neg && !(b[7] & 0x80))
            return -1;
    }
    size_t m = n < 8 ? n : 8;
    uint64_t x = 0;
    for (size_t k = m; k-- > 0;)
        x = (x << 8) | b[k];
    if (neg) {
        if (m < 8)
            x |= ~(uint64_t)0 << (8 * m);
        *i = (int64_t)x;
    } else if (x > (uint64_t)INT64_MAX) {
        *big = 1;
        *u = x;
    } else {
        *i = (int64_t)x;
    }
    return 0;
}

const char *gmp_pickle_refused_name(unsigned op, const char **why)
{
    static const char *const whys[] = {
        [GMP_PKOP_CALLS] = "would look up or call a Python object: refused",
        [GMP_PKOP_TYPE] = "builds a type these files do not use: not accepted",
        [GMP_PKOP_TEXT] = "is a protocol 0/1 opcode: not accepted",
    };
    *why = whys[GMP_PKOP_CALLS];
    if (op > 0xff)
        return NULL;
    const gmp_pickle_opinfo *in = &gmp_pickle_ops[op];
    if (in->verdict < GMP_PKOP_CALLS)
        return NULL;
    *why = whys[in->verdict];
    return in->name;
}
