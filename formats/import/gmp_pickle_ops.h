/* gmp_pickle_ops: the pickle opcodes, named once (CPython's names, Lib/pickletools.py) for the
 * pickle readers: the streaming one (gmp_pickle_stream.h) and the whole-tree oracle of the tests.
 * For each opcode a table says what its argument is and whether it is accepted; the decoders
 * that both readers share are here too. Accepted: the opcodes of plain data in protocols 2 to 5
 * (docs/pickle.md). Refused, with a message that names the opcode: every opcode that would look
 * up or call a Python object, every one that builds another type, and the text opcodes of
 * protocols 0 and 1. */
#ifndef GMP_PICKLE_OPS_H
#define GMP_PICKLE_OPS_H

#include <stddef.h>
#include <stdint.h>

enum gmp_pickle_op {
    PK_MARK = '(',
    PK_EMPTY_TUPLE = ')',
    PK_STOP = '.',
    PK_POP = '0',
    PK_POP_MARK = '1',
    PK_DUP = '2',
    PK_BINBYTES = 'B',
    PK_SHORT_BINBYTES = 'C',
    PK_FLOAT = 'F',
    PK_BINFLOAT = 'G',
    PK_INT = 'I',
    PK_BININT = 'J',
    PK_BININT1 = 'K',
    PK_LONG = 'L',
    PK_BININT2 = 'M',
    PK_NONE = 'N',
    PK_PERSID = 'P',
    PK_BINPERSID = 'Q',
    PK_REDUCE = 'R',
    PK_STRING = 'S',
    PK_BINSTRING = 'T',
    PK_SHORT_BINSTRING = 'U',
    PK_UNICODE = 'V',
    PK_BINUNICODE = 'X',
    PK_EMPTY_LIST = ']',
    PK_APPEND = 'a',
    PK_BUILD = 'b',
    PK_GLOBAL = 'c',
    PK_DICT = 'd',
    PK_APPENDS = 'e',
    PK_GET = 'g',
    PK_BINGET = 'h',
    PK_INST = 'i',
    PK_LONG_BINGET = 'j',
    PK_LIST = 'l',
    PK_OBJ = 'o',
    PK_PUT = 'p',
    PK_BINPUT = 'q',
    PK_LONG_BINPUT = 'r',
    PK_SETITEM = 's',
    PK_TUPLE = 't',
    PK_SETITEMS = 'u',
    PK_EMPTY_DICT = '}',
    PK_PROTO = 0x80,
    PK_NEWOBJ = 0x81,
    PK_EXT1 = 0x82,
    PK_EXT2 = 0x83,
    PK_EXT4 = 0x84,
    PK_TUPLE1 = 0x85,
    PK_TUPLE2 = 0x86,
    PK_TUPLE3 = 0x87,
    PK_NEWTRUE = 0x88,
    PK_NEWFALSE = 0x89,
    PK_LONG1 = 0x8a,
    PK_LONG4 = 0x8b,
    PK_SHORT_BINUNICODE = 0x8c,
    PK_BINUNICODE8 = 0x8d,
    PK_BINBYTES8 = 0x8e,
    PK_EMPTY_SET = 0x8f,
    PK_ADDITEMS = 0x90,
    PK_FROZENSET = 0x91,
    PK_NEWOBJ_EX = 0x92,
    PK_STACK_GLOBAL = 0x93,
    PK_MEMOIZE = 0x94,
    PK_FRAME = 0x95,
    PK_BYTEARRAY8 = 0x96,
    PK_NEXT_BUFFER = 0x97,
    PK_READONLY_BUFFER = 0x98,
};

/* What an opcode is: accepted, refused (and why), or unknown (GMP_PKOP_UNKNOWN: 0). */
enum { GMP_PKOP_UNKNOWN = 0, GMP_PKOP_ACCEPTED, GMP_PKOP_CALLS, GMP_PKOP_TYPE, GMP_PKOP_TEXT };

typedef struct gmp_pickle_opinfo {
    const char *name; /* "BINGET"; NULL for a byte that is no opcode */
    uint8_t verdict;  /* GMP_PKOP_* */
    uint8_t width;    /* accepted: bytes of its argument, little-endian (0, 1, 2, 4 or 8) */
    uint8_t counted;  /* accepted: the argument is a length; that many bytes follow it */
} gmp_pickle_opinfo;

/* Indexed by the opcode's byte. */
extern const gmp_pickle_opinfo gmp_pickle_ops[256];

/* LONG1/LONG4's argument: n bytes of little-endian two's complement. Returns 0 with *i set (or,
 * for values in (INT64_MAX, 2^64), *big = 1 and *u set), -1 when the value is outside
 * [-2^63, 2^64). */
int gmp_pickle_decode_long(const unsigned char *b, size_t n, int64_t *i, uint64_t *u, int *big);

/* The name of an opcode that is refused (GLOBAL, EMPTY_SET, INT, ...) and in *why the reason
 * ("would look up or call a Python object: refused"); NULL for an opcode accepted or unknown. */
const char *gmp_pickle_refused_name(unsigned op, const char **why);

#endif
