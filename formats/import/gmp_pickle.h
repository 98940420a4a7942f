/* gmp_pickle: what the pickle readers share: the types of the values, the limits of a parse and
 * the opcodes (gmp_pickle_ops.h). The product's reader is the streaming one
 * (gmp_pickle_stream.h); the tests hold a whole-tree reader as its oracle
 * (tests/torch/pickle_tree.h). Both read Python pickles (protocols 2 to 5) restricted to plain
 * data, for PyTorch memory snapshots (torch.cuda.memory._dump_snapshot) and any other pickle of
 * dicts, lists, tuples, strings, bytes, integers, floats, booleans and None.
 *
 * It never executes anything: every opcode that would look up or call a Python object (GLOBAL,
 * STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT*, PERSID, BINPERSID) and every
 * opcode that builds another type (sets, bytearrays, out-of-band buffers) is refused with a message
 * that names it. The accepted opcodes and why are listed in docs/pickle.md.
 *
 * Every byte is untrusted: lengths are checked against the input, integers must fit in int64 or
 * uint64, and a parse is bounded in nesting depth, memo size and total memory (gmp_pickle_limits).
 */
#ifndef GMP_PICKLE_H
#define GMP_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_pickle_ops.h"

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

#endif
