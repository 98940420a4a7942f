/* pickle_tree: the tests' whole-tree pickle reader (the oracle of the streaming reader,
 * formats/import/gmp_pickle_stream.h): it parses a pickle into a graph of values, accepting and
 * refusing the same opcodes (gmp_pickle_ops.h).
 *
 * The memo lets one value appear in several places (PyTorch snapshots share their frame lists that
 * way), so walking the result as a tree may visit a shared value many times; it never has cycles
 * (refused) and its depth is at most max_depth. Dict lookups by string key are O(log n). The
 * values stay valid until gmp_pickle_free of the root. */
#ifndef PICKLE_TREE_H
#define PICKLE_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_pickle.h"

typedef struct gmp_pickle_value gmp_pickle_value;

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

/* Non-zero when the streaming reader's refusal (e, err) of what this reader accepts is one of the
 * streaming reader's own rules (docs/pickle.md, "Complete when stored" and the predicted lists) or
 * a limit (the two readers hold different things): the only disagreements the tests allow. */
int gmp_pickle_stream_rule(gmp_err e, const char *err);

#endif
