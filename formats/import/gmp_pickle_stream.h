/* gmp_pickle_stream: a streaming reader of Python pickles of plain data, for PyTorch memory
 * snapshots of any size (torch.cuda.memory._dump_snapshot). It accepts and refuses the opcodes
 * that gmp_pickle_ops.h says (docs/pickle.md): it never executes anything. Its parts are listed
 * in gmp_pkstream_impl.h.
 *
 * Instead of building the whole object tree it hands the consumer, one by one, the items of the
 * big lists as each one is complete, and then forgets them:
 *  - the items of root[list_key] ("segments"), or of the root itself when it is a list (PyTorch's
 *    legacy format): kind GMP_PKS_LIST;
 *  - the items of every list root[lists_key][i] ("device_traces"): kind GMP_PKS_LISTS, index i.
 * Those lists keep only their length. What later opcodes can refer to is kept: the input is read
 * twice, first to count how often each memo entry is fetched again (BINGET/LONG_BINGET), then to
 * parse; a value is memoized only when it is fetched later, and released after its last fetch. So
 * memory follows what is alive (frames lists, strings, the item being built), not the file.
 *
 * Rules that the streaming needs and that CPython's pickler always follows (a pickle that breaks
 * one is refused with a message that says so, never misread):
 *  - a container is complete when it is first stored in another one: one that is changed after
 *    that is refused ("changed after it was stored"; this also refuses every cycle);
 *  - each streamed list ends up exactly where it was predicted from the stack when it was created
 *    (root[list_key], root[lists_key][i]), once; the root is the first value pushed.
 * Every byte is untrusted: lengths are checked against the input, and the parse is bounded by
 * gmp_pickle_limits (nesting, memo index, memory held). The input is read through a bounded buffer
 * (a file descriptor, read twice: it must be a regular file), or from memory. */
#ifndef GMP_PICKLE_STREAM_H
#define GMP_PICKLE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_pickle.h"

typedef struct gmp_pkobj gmp_pkobj;

/* A value: scalars inline, strings and containers in an object. */
typedef struct gmp_pkv {
    uint8_t type; /* gmp_pickle_type */
    uint8_t big;  /* INT: the value is >= 2^63 and held in v.u */
    union {
        int64_t i;
        uint64_t u;
        double f;
        gmp_pkobj *o; /* STR, BYTES, LIST, TUPLE, DICT */
    } v;
} gmp_pkv;

/* A string or a container. Read-only for consumers, except tag. */
struct gmp_pkobj {
    uint8_t type;
    uint8_t flags; /* GMP_PKOBJ_HUSKED; the other bits are the reader's */
    uint32_t n;    /* STR/BYTES: bytes; LIST/TUPLE: items (a streamed list: items passed on); DICT:
                      pairs (keys as set: a key set twice appears twice, the last one counts) */
    uint64_t tag;  /* the consumer's: 0 until it sets one (for example what it made of it) */
    union {
        char *s;        /* STR/BYTES: NUL-terminated */
        gmp_pkv *items; /* LIST/TUPLE: n items; DICT: key0, value0, key1, value1, ... */
    } d;
    _Alignas(8) unsigned char reader_[40]; /* the reader's own (gmp_pkstream_impl.h: pkx) */
};

enum { GMP_PKS_LIST = 0, GMP_PKS_LISTS = 1 };
#define GMP_PKOBJ_HUSKED 8u /* flags: its items were released by gmp_pkstream_husk */

typedef struct gmp_pkstream_cb {
    const char *list_key;  /* "segments" */
    const char *lists_key; /* "device_traces" */
    /* One streamed item. Returns 0, or non-zero to stop (then err holds one line). */
    int (*item)(void *ctx, int kind, uint32_t index, const gmp_pkv *item, char *err, size_t errlen);
    void *ctx;
} gmp_pkstream_cb;

typedef struct gmp_pkstream gmp_pkstream;

/* lim may be NULL (defaults). NULL when out of memory. */
gmp_pkstream *gmp_pkstream_new(const gmp_pickle_limits *lim, const gmp_pkstream_cb *cb);
/* Parses the regular file open as fd (from its offset 0; read twice) or data[0..n). On success the
 * root is available until gmp_pkstream_free. Errors: GMP_ERR_FORMAT,
 * GMP_ERR_TRUNCATED, GMP_ERR_LIMIT, GMP_ERR_NOMEM, GMP_ERR_IO, with one line in err: "pickle:
 * offset N: ..." for the pickle's own faults, the consumer's line when it stopped the parse. */
gmp_err gmp_pkstream_run_fd(gmp_pkstream *ps, int fd, char *err, size_t errlen);
gmp_err gmp_pkstream_run_mem(gmp_pkstream *ps, const void *data, size_t n, char *err,
                             size_t errlen);
/* Releases the items of a container the consumer has made what it needs of (its tag), for one
 * that the memo keeps for later fetches: it stays an empty list/dict/tuple with GMP_PKOBJ_HUSKED
 * in its flags, so a later fetch finds the tag, never a changed value. For the consumer's item
 * callback only. */
void gmp_pkstream_husk(gmp_pkstream *ps, gmp_pkobj *o);
/* Before a run: one pass instead of two (no first pass counting the memo's fetches), which keeps,
 * of the memoized values, only strings and the containers stored under keep_key ("frames": a
 * snapshot's frames lists) and their items, which is what a PyTorch snapshot fetches again; the
 * rest is not kept, so a fetch of it fails the run, as does holding more than budget bytes or memo
 * indices out of order (any failure may be one of these: the caller runs it again in two passes,
 * with a new gmp_pkstream, for the real outcome). Memory like the two passes'. */
void gmp_pkstream_one_pass(gmp_pkstream *ps, const char *keep_key, size_t budget);
/* Non-zero when the parse stopped because the consumer said so. */
int gmp_pkstream_stopped_by_consumer(const gmp_pkstream *ps);
const gmp_pkv *gmp_pkstream_root(const gmp_pkstream *ps);
/* Bytes held at most by values, memo and parser stacks during the parse. */
size_t gmp_pkstream_peak_memory(const gmp_pkstream *ps);
/* CPU seconds the last run spent in its first pass (scan; in one pass, only setting up the memo)
 * and in its second (parse, the consumer's callbacks included): for benchmarks. */
void gmp_pkstream_times(const gmp_pkstream *ps, double *scan_s, double *parse_s);
/* Trace entries of the last run read flat: straight from the input into a record of their pairs,
 * made a dict only for the consumer's call (docs/pickle.md): for tests and benchmarks. */
size_t gmp_pkstream_flat_entries(const gmp_pkstream *ps);
/* Before a run: every trace entry built as a dict, none read flat: the reference the tests
 * compare the flat entries with. */
void gmp_pkstream_no_flat(gmp_pkstream *ps);
void gmp_pkstream_free(gmp_pkstream *ps);

/* Accessors over values (NULL-safe). */
const char *gmp_pkv_type_name(const gmp_pkv *v);
/* DICT: the value of the string key (the last one set); NULL when absent. */
const gmp_pkv *gmp_pkv_dict_get(const gmp_pkv *d, const char *key);
/* LIST/TUPLE item i, NULL out of range; LIST/TUPLE/DICT length. */
const gmp_pkv *gmp_pkv_item(const gmp_pkv *v, size_t i);
size_t gmp_pkv_len(const gmp_pkv *v);
int gmp_pkv_get_u64(const gmp_pkv *v, uint64_t *out);
int gmp_pkv_get_i64(const gmp_pkv *v, int64_t *out);
int gmp_pkv_get_bool(const gmp_pkv *v, int *out);
/* STR only. */
const char *gmp_pkv_str(const gmp_pkv *v, size_t *len);
int gmp_pkv_str_eq(const gmp_pkv *v, const char *s);

#endif
