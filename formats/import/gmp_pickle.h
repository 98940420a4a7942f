/* gmp_pickle: a reader of Python pickles (protocols 2 to 5) restricted to plain data, for PyTorch
 * memory snapshots (torch.cuda.memory._dump_snapshot) and any other pickle of dicts, lists, tuples,
 * strings, bytes, integers, floats, booleans and None.
 *
 * It never executes anything: every opcode that would look up or call a Python object (GLOBAL,
 * STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT*, PERSID, BINPERSID) and every
 * opcode that builds another type (sets, bytearrays, out-of-band buffers) is refused with a message
 * that names it. The accepted opcodes and why are listed in docs/pickle.md.
 *
 * Every byte is untrusted: lengths are checked against the input, integers must fit in int64 or
 * uint64, and the parse is bounded in nesting depth, memo size and total memory
 * (gmp_pickle_limits). The result is a graph of values: the memo lets one value appear in several
 * places (PyTorch snapshots share their frame lists that way), so walking it as a tree may visit a
 * shared value many times; it never has cycles (refused) and its depth is at most max_depth. Dict
 * lookups by string key are O(log n). The values stay valid until gmp_pickle_free of the root. */
#ifndef GMP_PICKLE_H
#define GMP_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"

typedef struct gmp_pickle_value gmp_pickle_value;

typedef enum gmp_pickle_type {
    GMP_PK_NONE = 0,
    GMP_PK_BOOL,
    GMP_PK_INT, /* within [-2^63, 2^64) */
    GMP_PK_FLOAT,
    GMP_PK_STR,   /* UTF-8 as the pickle says (bytes, not validated), NUL-terminated copy */
    GMP_PK_BYTES, /* NUL-terminated copy as well */
    GMP_PK_LIST,
    GMP_PK_TUPLE,
    GMP_PK_DICT,
} gmp_pickle_type;

typedef struct gmp_pickle_limits {
    size_t max_depth;  /* nesting of containers in the result (default 64) */
    size_t max_memo;   /* memo entries and largest memo index + 1 (default 4 Mi) */
    size_t max_memory; /* bytes held by the parser and the result together (default 1 GiB) */
} gmp_pickle_limits;

void gmp_pickle_limits_default(gmp_pickle_limits *l);

/* LONG1/LONG4's argument: n bytes of little-endian two's complement. Returns 0 with *i set (or,
 * for values in (INT64_MAX, 2^64), *big = 1 and *u set), -1 when the value is outside
 * [-2^63, 2^64). Shared by both readers. */
int gmp_pickle_decode_long(const unsigned char *b, size_t n, int64_t *i, uint64_t *u, int *big);

/* Parses data[0..n). On success *out is the root value (free it with gmp_pickle_free) and GMP_OK
 * is returned; otherwise *out is NULL, err receives a one-line message with the byte offset (when
 * errlen > 0), and the result is GMP_ERR_FORMAT (malformed or refused content), GMP_ERR_TRUNCATED
 * (input ends early), GMP_ERR_LIMIT (a bound of limits) or GMP_ERR_NOMEM. Bytes after STOP are
 * ignored. gmp_pickle_load uses the default limits; lim may be NULL. */
gmp_err gmp_pickle_load(const void *data, size_t n, gmp_pickle_value **out, char *err,
                        size_t errlen);
gmp_err gmp_pickle_load_ex(const void *data, size_t n, const gmp_pickle_limits *lim,
                           gmp_pickle_value **out, char *err, size_t errlen);
/* Frees everything a load returned; root must be what gmp_pickle_load gave (or NULL). */
void gmp_pickle_free(gmp_pickle_value *root);

/* Accessors. All accept NULL (and then answer "none", 0 or -1). */
gmp_pickle_type gmp_pickle_type_of(const gmp_pickle_value *v);
/* Name of the value's type as Python says it: "dict", "list", "str", ... */
const char *gmp_pickle_type_name(const gmp_pickle_value *v);
/* Integers (booleans count as 0 and 1). Return 0, or -1 when v is not an integer or does not fit.
 */
int gmp_pickle_get_i64(const gmp_pickle_value *v, int64_t *out);
int gmp_pickle_get_u64(const gmp_pickle_value *v, uint64_t *out);
/* Floats, and integers converted. Returns 0 or -1. */
int gmp_pickle_get_f64(const gmp_pickle_value *v, double *out);
/* Returns 0 or -1 (not a bool). */
int gmp_pickle_get_bool(const gmp_pickle_value *v, int *out);
/* STR and BYTES: the bytes (NUL-terminated) and their length; NULL for other types. */
const char *gmp_pickle_get_str(const gmp_pickle_value *v, size_t *len);
/* Non-zero when v is a STR equal to s. */
int gmp_pickle_str_eq(const gmp_pickle_value *v, const char *s);
/* LIST, TUPLE: number of items; DICT: number of pairs; 0 for other types. */
size_t gmp_pickle_len(const gmp_pickle_value *v);
/* LIST, TUPLE: item i; NULL out of range or for other types. */
const gmp_pickle_value *gmp_pickle_item(const gmp_pickle_value *v, size_t i);
/* DICT: pair i in insertion order (a string key set twice appears once, at its first place, with
 * its last value, as in Python); returns the key and writes the value; NULL out of range. */
const gmp_pickle_value *gmp_pickle_dict_at(const gmp_pickle_value *v, size_t i,
                                           const gmp_pickle_value **value);
/* DICT: the value of string key; NULL when absent or v is not a dict. */
const gmp_pickle_value *gmp_pickle_dict_get(const gmp_pickle_value *v, const char *key);

/* The name of an opcode that is refused (GLOBAL, EMPTY_SET, INT, ...) and in *why the reason
 * ("would look up or call a Python object: refused"); NULL for an opcode accepted or unknown.
 * Shared with the streaming reader (gmp_pickle_stream.h). */
const char *gmp_pickle_refused_name(unsigned op, const char **why);

#endif
