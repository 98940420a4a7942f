/* gmp_pkstream_impl: the streaming pickle reader's own header, shared by its files and by
 * nothing else: the reader's state (struct gmp_pkstream), the memo's slots, the batches of items
 * handed over, the helpers every part inlines (memory charged, references, the input window,
 * the stack, the memo's rank) and the functions one part calls in another (gmp_pks_*).
 *
 * The parts, each calling only those listed after it: gmp_pkstream_parse.c (the opcode
 * interpreter and the API), gmp_pkstream_flat.c (trace entries read flat), gmp_pkstream_hand.c
 * (items handed over to the consumer), gmp_pkstream_memo.c (the scan pass and the memo),
 * gmp_pkstream_impl.c (what the helpers here call: memory, errors, the input window's refill,
 * the stack's and containers' growth, the checks of a store). */
#ifndef GMP_PKSTREAM_IMPL_H
#define GMP_PKSTREAM_IMPL_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gmp_pickle_stream.h"

#define MAX_ITEMS (UINT32_MAX / 2)
#ifndef GMP_PKSTREAM_INBUF /* a test builds the reader with a small window */
#define GMP_PKSTREAM_INBUF (1u << 20)
#endif
#define INBUF GMP_PKSTREAM_INBUF
#define KEEP 0x7f /* a fetch count that is never decremented */

enum { R_NONE = 0, R_ROOT, R_SEGS, R_TRACES, R_DEV, R_FLAT /* batch_read's dict */ };
#define F_ATTACHED 1u /* a role object stored where it was predicted */
#define F_SEGS_SET 2u /* root: list_key set */
#define F_TRACES_SET 4u
#define F_KEEP 16u /* one pass: a container the memo keeps (set by predict) */
/* GMP_PKOBJ_HUSKED (8): the items were released (gmp_pkstream_husk) */

/* The reader's own fields of an object: gmp_pkobj's reader_ bytes, reached through px(). */
typedef struct pkx {
    uint8_t sealed; /* a container stored in another one: never changed again */
    uint8_t role;   /* R_*: its place as predicted when it was made */
    uint32_t cap;   /* LIST/TUPLE: items allocated; DICT: pairs */
    uint32_t height;
    uint32_t role_index;    /* with role R_DEV: the device list's index */
    uint32_t refs;          /* references held (stack, containers, memo, batches) */
    gmp_pkobj *pred_parent; /* with a role: the container it must be stored in */
    gmp_pkobj *pred_key;    /* and the key (a string, a reference held), or NULL: an item */
} pkx;
_Static_assert(sizeof(pkx) <= sizeof(((gmp_pkobj *)0)->reader_), "pkx fits in reader_");

static inline pkx *px(const gmp_pkobj *o)
{
    return (pkx *)(void *)(uintptr_t)o->reader_;
}

typedef struct freelist {
    void *head;
} freelist;

/* The memo's rank over the fetched indices: word w of the bitmap and the fetched indices before
 * it, side by side (one cache line per lookup). */
typedef struct mword {
    uint64_t bits;
    uint64_t rank;
} mword;

/* A memo slot: the value (as gmp_pkv) and the fetches left, in one 16-byte slot. */
typedef struct mslot {
    uint8_t type, big, left;
    uint8_t plain;   /* a container known sealed, without a role, of height `height` (fast_entry
                        reads that here instead of in the object; set by it, cleared on a store) */
    uint32_t height; /* when plain */
    union {
        int64_t i;
        uint64_t u;
        double f;
        gmp_pkobj *o;
    } v;
} mslot;

/* A trace entry read by fast_entry: pairs fill->pairs[off .. off + 2n), the dict's height. */
typedef struct flat_rec {
    uint32_t off, n, height;
    uint64_t owned; /* bit i: value i holds a reference (others: kept by the memo to the end) */
} flat_rec;

/* Items handed over: a value (an object holding a reference), or (flat) the run of n flat
 * records recs[off .. off + n) of the batch, handed over one after the other. */
typedef struct pk_item {
    gmp_pkv v;
    uint32_t off, n, index;
    uint8_t kind, flat;
} pk_item;

/* Items handed over in order, then released together (see submit). */
typedef struct pk_batch {
    pk_item *it;
    size_t n, cap;
    gmp_pkv *pairs;
    size_t pn, pcap;
    flat_rec *recs; /* the flat records read into it (a placeholder names one by index) */
    size_t rn, rcap;
    gmp_pkobj **husks; /* husks the consumer asked for while the batch was read */
    size_t hn, hcap;
    int failed; /* the consumer stopped at an item: msg says why */
    char msg[512];
} pk_batch;

struct gmp_pkstream {
    gmp_pickle_limits lim;
    gmp_pkstream_cb cb;
    /* input */
    int fd;
    const unsigned char *data; /* the input in memory (fd < 0) */
    unsigned char *buf;
    size_t bufcap;
    const unsigned char *start, *p, *end; /* window: start is at file offset base */
    uint64_t base, size;
    size_t op_off;
    /* scan */
    uint8_t *cnt; /* per memo index: bit 7 defined, bits 0-6 fetches (KEEP: many) */
    size_t cnt_len, cnt_cap;
    /* parse: memo */
    mword *mw; /* bit i: index i is fetched at least once; rank */
    size_t nwords;
    mslot *slots; /* per fetched index, in index order */
    size_t nslots;
    uint64_t *defined; /* bit i: index i defined so far (for MEMOIZE's len(memo)) */
    size_t ndefined;
    /* parse: stacks */
    gmp_pkv *stack;
    size_t sn, scap;
    size_t *marks;
    size_t mn, mcap;
    /* values */
    freelist objs, arrs[5]; /* arrays of 4, 8, 16, 32, 64 values */
    void *slabs;            /* the slabs the free lists carve from (see slab_get) */
    char *slab_at;
    size_t slab_left;
    size_t mem, peak;
    gmp_pkobj *root; /* the claimed root (a reference is held) */
    size_t roles_pending;
    gmp_pkv result;
    int done, consumer_stop;
    int sparse;  /* gmp_pkstream_one_pass: no first pass, the memo keeps a guess (sparse_put) */
    int no_flat; /* gmp_pkstream_no_flat: fast_entry never runs */
    const char *keep_key;
    size_t budget;     /* sparse: most bytes held */
    size_t slots_cap;  /* sparse: slots allocated (nslots in use, in index order) */
    size_t rank_words; /* sparse: words of mw whose rank is set */
    /* flat entries (fast_entry): trace entries read without a dict, until their list takes them */
    /* their keys and values are written into the batch being filled (fill->pairs), where they
     * stay when handed over */
    size_t nflat;       /* placeholders on the stack */
    size_t nflat_total; /* records made (gmp_pkstream_flat_entries) */
    size_t flat_top;    /* while nflat: the stack index above the highest placeholder */
    /* items handed over in a batch, read by the consumer once the APPENDS is done */
    pk_batch bat;
    pk_batch *fill; /* the batch being filled: &bat */
    pk_batch *cur;  /* the batch whose items the consumer is reading (husks go there) */
    double scan_s, parse_s;
    /* errors */
    char *err;
    size_t errlen;
    gmp_err code;
};

/* gmp_pkstream_impl.c: memory, errors, the input window, the stack, containers, stores */
__attribute__((format(printf, 3, 4))) int gmp_pks_fail(gmp_pkstream *P, gmp_err code,
                                                       const char *fmt, ...);
void *gmp_pks_xalloc(gmp_pkstream *P, size_t n);
void gmp_pks_xfree(gmp_pkstream *P, void *p, size_t n);
void *gmp_pks_fl_get(gmp_pkstream *P, freelist *f, size_t size);
void gmp_pks_fl_put(gmp_pkstream *P, freelist *f, void *p, size_t size);
void gmp_pks_slabs_free(gmp_pkstream *P);
gmp_pkv *gmp_pks_arr_alloc(gmp_pkstream *P, size_t cap);
void gmp_pks_arr_free(gmp_pkstream *P, gmp_pkv *a, size_t cap);
gmp_pkobj *gmp_pks_obj_new(gmp_pkstream *P, uint8_t type);
void gmp_pks_obj_free(gmp_pkstream *P, gmp_pkobj *o);
int gmp_pks_fill_slow(gmp_pkstream *P, size_t k);
void gmp_pks_input_reset(gmp_pkstream *P);
int gmp_pks_push_slow(gmp_pkstream *P, gmp_pkv v);
__attribute__((noinline)) int gmp_pks_attach_all(gmp_pkstream *P, gmp_pkobj *parent,
                                                 const gmp_pkv *child, const gmp_pkv *key,
                                                 size_t index);
int gmp_pks_reserve(gmp_pkstream *P, gmp_pkobj *c, size_t add);

/* gmp_pkstream_memo.c: the scan pass and the memo */
void gmp_pks_scan(gmp_pkstream *P);
int gmp_pks_memo_prepare(gmp_pkstream *P);
int gmp_pks_sparse_grow(gmp_pkstream *P, uint64_t key);
int gmp_pks_memo_put(gmp_pkstream *P, uint64_t key);
int gmp_pks_memo_get(gmp_pkstream *P, uint64_t key);

/* gmp_pkstream_hand.c: items handed over */
int gmp_pks_batch_room(gmp_pkstream *P, pk_batch *b);
int gmp_pks_submit(gmp_pkstream *P);
void gmp_pks_flush(gmp_pkstream *P);
void gmp_pks_husk_now(gmp_pkstream *P, gmp_pkobj *o);

/* gmp_pkstream_flat.c: trace entries read flat */
__attribute__((noinline)) const unsigned char *
gmp_pks_fast_entry(gmp_pkstream *P, const unsigned char *p, const unsigned char *end, size_t sn);
int gmp_pks_hand_flat(gmp_pkstream *P, gmp_pkobj *list, uint64_t idx);
int gmp_pks_materialize(gmp_pkstream *P);
int gmp_pks_flat_predicts(const gmp_pkstream *P, size_t j);
int gmp_pks_flat_neutral(const gmp_pkstream *P, unsigned op);
void gmp_pks_flat_drop(gmp_pkstream *P);

static inline int charge(gmp_pkstream *P, size_t add)
{
    if (add > P->lim.max_memory || P->mem > P->lim.max_memory - add)
        return gmp_pks_fail(P, GMP_ERR_LIMIT, "more than %zu bytes of memory needed (limit)",
                            P->lim.max_memory);
    P->mem += add;
    if (P->mem > P->peak)
        P->peak = P->mem;
    return 0;
}

static inline void uncharge(gmp_pkstream *P, size_t n)
{
    P->mem -= n < P->mem ? n : P->mem;
}

static inline int is_obj(const gmp_pkv *v)
{
    return v->type >= GMP_PK_STR;
}

static inline void ref(const gmp_pkv *v)
{
    if (is_obj(v))
        px(v->v.o)->refs++;
}

static inline void unref(gmp_pkstream *P, const gmp_pkv *v)
{
    if (is_obj(v) && --px(v->v.o)->refs == 0)
        gmp_pks_obj_free(P, v->v.o);
}

static inline void slot_unref(gmp_pkstream *P, const mslot *m)
{
    if (m->type >= GMP_PK_STR && --px(m->v.o)->refs == 0)
        gmp_pks_obj_free(P, m->v.o);
}

static inline int fill(gmp_pkstream *P, size_t k)
{
    return (size_t)(P->end - P->p) >= k ? 0 : gmp_pks_fill_slow(P, k);
}

static inline size_t offset(const gmp_pkstream *P)
{
    return (size_t)(P->base + (uint64_t)(P->p - P->start));
}

static inline uint64_t le(const unsigned char *b, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n == 4) {
        uint32_t x;
        memcpy(&x, b, 4);
        return x;
    }
    if (n == 8) {
        uint64_t x;
        memcpy(&x, b, 8);
        return x;
    }
#endif
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | b[i];
    return v;
}

/* A LONG1 of n <= 8 bytes at b, as gmp_pickle_decode_long: its value in *u; 1 when it is >= 2^63
 * (then held as unsigned), else 0. */
static inline unsigned long1_short(const unsigned char *b, size_t n, uint64_t *u)
{
    *u = 0;
    if (!n)
        return 0;
    *u = le(b, n);
    if (b[n - 1] & 0x80) {
        if (n < 8)
            *u |= ~(uint64_t)0 << (8 * n);
        return 0;
    }
    return *u > (uint64_t)INT64_MAX;
}

/* The opcode at p, when it is one of the scalars a trace entry's values are made of (NONE,
 * NEWTRUE, NEWFALSE, BININT, BININT1, BININT2, a LONG1 of up to 8 bytes) and all its bytes lie
 * before end: its length, its value in *type, *big and *u; else 0. Shared by the fast paths
 * (parse, fast_entry); step decodes the same opcodes with every check. */
static inline size_t op_scalar(const unsigned char *p, const unsigned char *end, unsigned *type,
                               unsigned *big, uint64_t *u)
{
    size_t room = (size_t)(end - p), w;
    *big = 0;
    switch (*p) {
    case PK_NONE: *type = GMP_PK_NONE, *u = 0; return 1;
    case PK_NEWTRUE:
    case PK_NEWFALSE: *type = GMP_PK_BOOL, *u = *p == PK_NEWTRUE; return 1;
    case PK_BININT:
        if (room < 5)
            return 0;
        *type = GMP_PK_INT, *u = (uint64_t)(int64_t)(int32_t)(uint32_t)le(p + 1, 4);
        return 5;
    case PK_BININT1:
    case PK_BININT2:
        w = gmp_pickle_ops[*p].width;
        if (room < 1 + w)
            return 0;
        *type = GMP_PK_INT, *u = le(p + 1, w);
        return 1 + w;
    case PK_LONG1:
        if (room < 2 || p[1] > 8 || room < 2u + p[1])
            return 0;
        *type = GMP_PK_INT, *big = long1_short(p + 2, p[1], u);
        return 2u + p[1];
    default: return 0;
    }
}

/* The opcode at p, when it is a memo fetch (BINGET, LONG_BINGET) with all its bytes before end:
 * its length, the memo index in *key; else 0. */
static inline size_t op_get(const unsigned char *p, const unsigned char *end, uint64_t *key)
{
    size_t w = *p == PK_BINGET ? 1 : *p == PK_LONG_BINGET ? 4 : 0;
    if (!w || (size_t)(end - p) < 1 + w)
        return 0;
    *key = le(p + 1, w);
    return 1 + w;
}

static inline uint64_t left_in_input(const gmp_pkstream *P)
{
    return P->size - offset(P);
}

static inline int sparse_keeps(const gmp_pkv *v)
{
    return v->type == GMP_PK_STR || (v->type >= GMP_PK_LIST && (v->v.o->flags & F_KEEP));
}

static inline uint32_t popcount64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

/* The bits set in x: the instruction where the build may assume it, else popcount64. */
static inline uint32_t rank_pop(uint64_t x)
{
#if defined(__POPCNT__) || !defined(__x86_64__)
    return (uint32_t)__builtin_popcountll(x);
#else
    return popcount64(x);
#endif
}

/* The slot of index k, or -1 when k is never fetched. */
static inline long slot_of(const gmp_pkstream *P, uint64_t k)
{
    if (k >= (uint64_t)P->nwords * 64)
        return -1;
    const mword *w = &P->mw[k >> 6];
    uint64_t bit = (uint64_t)1 << (k & 63);
    if (!(w->bits & bit))
        return -1;
    return (long)(w->rank + popcount64(w->bits & (bit - 1)));
}

/* Writes a value as two 8-byte stores. (A value built in pieces in memory and then copied whole
 * is read back by one 16-byte load across stores of other sizes, which waits for them to reach
 * the cache: that was a good part of the parse's time.) */
static inline void pkv_put(gmp_pkv *d, unsigned type, unsigned big, uint64_t u)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t h = type | (uint64_t)big << 8;
    memcpy(d, &h, sizeof h);
    memcpy(&d->v, &u, sizeof u);
#else
    d->type = (uint8_t)type;
    d->big = (uint8_t)big;
    d->v.u = u;
#endif
}

static inline void pkv_put_obj(gmp_pkv *d, unsigned type, gmp_pkobj *o)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t h = type;
    memcpy(d, &h, sizeof h);
#else
    d->type = (uint8_t)type;
    d->big = 0;
#endif
    d->v.o = o;
}

static inline int push(gmp_pkstream *P, gmp_pkv v)
{
    if (P->sn < P->scap) {
        P->stack[P->sn++] = v;
        return 0;
    }
    return gmp_pks_push_slow(P, v);
}

static inline size_t mark_base(const gmp_pkstream *P)
{
    return P->mn ? P->marks[P->mn - 1] : 0;
}

static inline const char *tname(const gmp_pkv *v)
{
    return gmp_pkv_type_name(v);
}

static inline int str_eq_obj(const gmp_pkobj *o, const char *s)
{
    size_t n = strlen(s);
    return o && o->type == GMP_PK_STR && o->n == n && memcmp(o->d.s, s, n) == 0;
}

static inline int streams(const gmp_pkobj *c)
{
    return px(c)->role == R_SEGS || px(c)->role == R_DEV ||
           (px(c)->role == R_ROOT && c->type == GMP_PK_LIST);
}

/* attach, for what nearly every store is: into a container that is not the root, of a scalar or
 * of a value with no streaming role, within the nesting bound. The rest: attach_all. */
static inline int attach(gmp_pkstream *P, gmp_pkobj *parent, const gmp_pkv *child,
                         const gmp_pkv *key, size_t index)
{
    if (px(parent)->role != R_ROOT) {
        gmp_pkobj *c = NULL;
        uint32_t h = 1;
        if (child->type >= GMP_PK_LIST) { /* a string has no role and no height: not read */
            c = child->v.o;
            if (c == parent || px(c)->role)
                return gmp_pks_attach_all(P, parent, child, key, index);
            h = px(c)->height + 1;
        }
        if (h > px(parent)->height) {
            if (h > P->lim.max_depth)
                return gmp_pks_attach_all(P, parent, child, key, index);
            px(parent)->height = h;
        }
        if (c && !px(c)->sealed) /* once sealed, never written */
            px(c)->sealed = 1;
        return 0;
    }
    return gmp_pks_attach_all(P, parent, child, key, index);
}

#define FLAT_PAIRS_MAX 32  /* pairs of a dict read flat */
#define FLAT_RECS_MAX 8192 /* records in a batch */

static inline int is_flat(const gmp_pkv *v)
{
    return v->type == GMP_PK_NONE && v->big;
}

#endif
