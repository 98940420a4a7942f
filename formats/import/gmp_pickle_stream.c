/* gmp_pickle_stream: the streaming pickle reader. See gmp_pickle_stream.h and docs/pickle.md.
 *
 * Two passes over the input. The first (scan) decodes only opcode lengths and the memo: for each
 * memo index it counts the fetches (GET) that follow its definition, saturating at 127 ("keep for
 * ever"); it stops quietly at the first fault, which the second pass then reports with its
 * offset. The second pass (parse) follows CPython's Unpickler for the opcodes gmp_pickle accepts:
 * a stack of values split by MARKs; values are reference counted (stack slots, container items,
 * memo slots each hold one); the memo keeps only the indices the scan saw fetched, in a dense
 * array addressed through a rank over a bitmap of those indices, and drops each after its last
 * fetch. Streamed lists hand over their items and keep only their count.
 *
 * Also (docs/pickle.md): one pass instead of two, keeping in the memo only what a snapshot fetches
 * again (gmp_pkstream_one_pass); trace entries read flat, without a dict (fast_entry); items handed
 * over in batches (submit). */
#include "gmp_pickle_stream.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

__attribute__((format(printf, 3, 4))) static int fail(gmp_pkstream *P, gmp_err code,
                                                      const char *fmt, ...)
{
    if (P->code != GMP_OK)
        return -1;
    P->code = code;
    if (P->err && P->errlen) {
        int k = snprintf(P->err, P->errlen, "pickle: offset %zu: ", P->op_off);
        if (k >= 0 && (size_t)k < P->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(P->err + k, P->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

/* ---- memory ---- */

static int charge(gmp_pkstream *P, size_t add)
{
    if (add > P->lim.max_memory || P->mem > P->lim.max_memory - add)
        return fail(P, GMP_ERR_LIMIT, "more than %zu bytes of memory needed (limit)",
                    P->lim.max_memory);
    P->mem += add;
    if (P->mem > P->peak)
        P->peak = P->mem;
    return 0;
}

static void uncharge(gmp_pkstream *P, size_t n)
{
    P->mem -= n < P->mem ? n : P->mem;
}

static void *xalloc(gmp_pkstream *P, size_t n)
{
    if (charge(P, n) < 0)
        return NULL;
    void *r = malloc(n ? n : 1);
    if (!r) {
        uncharge(P, n);
        fail(P, GMP_ERR_NOMEM, "out of memory");
    }
    return r;
}

static void xfree(gmp_pkstream *P, void *p, size_t n)
{
    if (p) {
        free(p);
        uncharge(P, n);
    }
}

/* The objects and small arrays of the free lists are carved from slabs of SLAB bytes, freed
 * together with the reader: no free() per value (the free lists never give memory back; memory
 * is still counted a value at a time). A slab's first SLAB_HEAD bytes link it to the next one;
 * every value carved is a multiple of 64 bytes from a 64-byte aligned start, so none straddles a
 * cache line it does not need. */
#define SLAB ((size_t)64 << 10)
#define SLAB_HEAD ((size_t)64)
_Static_assert(sizeof(gmp_pkobj) == 64 && (4 * sizeof(gmp_pkv)) % 64 == 0,
               "every slab value is a multiple of 64 bytes");

static void *slab_get(gmp_pkstream *P, size_t size)
{
    if (P->slab_left < size) {
        char *s = aligned_alloc(64, SLAB);
        if (!s)
            return NULL;
        *(void **)s = P->slabs;
        P->slabs = s;
        P->slab_at = s + SLAB_HEAD;
        P->slab_left = SLAB - SLAB_HEAD;
    }
    void *r = P->slab_at;
    P->slab_at += size;
    P->slab_left -= size;
    return r;
}

static void *fl_get(gmp_pkstream *P, freelist *f, size_t size)
{
    void *r = f->head;
    if (charge(P, size) < 0)
        return NULL;
    if (r) {
        f->head = *(void **)r;
        return r;
    }
    r = slab_get(P, (size + 63) & ~(size_t)63);
    if (!r) {
        uncharge(P, size);
        fail(P, GMP_ERR_NOMEM, "out of memory");
    }
    return r;
}

static void fl_put(gmp_pkstream *P, freelist *f, void *p, size_t size)
{
    *(void **)p = f->head;
    f->head = p;
    uncharge(P, size);
}

static void slabs_free(gmp_pkstream *P)
{
    while (P->slabs) {
        void *n = *(void **)P->slabs;
        free(P->slabs);
        P->slabs = n;
    }
}

static int arr_class(size_t cap)
{
    for (int c = 0; c < 5; c++)
        if (cap == (size_t)4 << c)
            return c;
    return -1;
}

static gmp_pkv *arr_alloc(gmp_pkstream *P, size_t cap)
{
    int c = arr_class(cap);
    if (cap > SIZE_MAX / sizeof(gmp_pkv)) {
        fail(P, GMP_ERR_LIMIT, "too many values");
        return NULL;
    }
    return c >= 0 ? fl_get(P, &P->arrs[c], cap * sizeof(gmp_pkv))
                  : xalloc(P, cap * sizeof(gmp_pkv));
}

static void arr_free(gmp_pkstream *P, gmp_pkv *a, size_t cap)
{
    if (!a)
        return;
    int c = arr_class(cap);
    if (c >= 0)
        fl_put(P, &P->arrs[c], a, cap * sizeof(gmp_pkv));
    else
        xfree(P, a, cap * sizeof(gmp_pkv));
}

static gmp_pkobj *obj_new(gmp_pkstream *P, uint8_t type)
{
    gmp_pkobj *o = fl_get(P, &P->objs, sizeof *o);
    if (!o)
        return NULL;
    memset(o, 0, sizeof *o);
    o->type = type;
    o->refs = 1;
    return o;
}

static void unref(gmp_pkstream *P, const gmp_pkv *v);

static void obj_free(gmp_pkstream *P, gmp_pkobj *o)
{
    if (o->type == GMP_PK_STR || o->type == GMP_PK_BYTES) {
        xfree(P, o->d.s, (size_t)o->n + 1);
    } else {
        size_t k = o->type == GMP_PK_DICT ? 2 * (size_t)o->n : o->n;
        if (!o->d.items) /* a streamed list: its items were passed on */
            k = 0;
        for (size_t i = 0; i < k; i++)
            unref(P, &o->d.items[i]);
        arr_free(P, o->d.items, o->type == GMP_PK_DICT ? 2 * (size_t)o->cap : o->cap);
    }
    if (o->pred_key) {
        gmp_pkv kv = {.type = GMP_PK_STR, .v.o = o->pred_key};
        unref(P, &kv);
    }
    fl_put(P, &P->objs, o, sizeof *o);
}

static int is_obj(const gmp_pkv *v)
{
    return v->type >= GMP_PK_STR;
}

static void ref(const gmp_pkv *v)
{
    if (is_obj(v))
        v->v.o->refs++;
}

static void unref(gmp_pkstream *P, const gmp_pkv *v)
{
    if (is_obj(v) && --v->v.o->refs == 0)
        obj_free(P, v->v.o);
}

static void slot_unref(gmp_pkstream *P, const mslot *m)
{
    if (m->type >= GMP_PK_STR && --m->v.o->refs == 0)
        obj_free(P, m->v.o);
}

/* ---- input ---- */

/* Puts what is left of the window (have bytes at p) at the start of P->buf, grown first (doubling)
 * to hold at least need bytes. */
static int buf_keep(gmp_pkstream *P, size_t need, size_t have)
{
    if (need > P->bufcap) {
        size_t nc = P->bufcap;
        while (nc < need)
            nc *= 2;
        if (charge(P, nc - P->bufcap) < 0)
            return -1;
        unsigned char *nb = malloc(nc);
        if (!nb) {
            uncharge(P, nc - P->bufcap);
            return fail(P, GMP_ERR_NOMEM, "out of memory");
        }
        memcpy(nb, P->p, have);
        free(P->buf);
        P->buf = nb;
        P->bufcap = nc;
    } else if (have && P->p != P->buf) {
        memmove(P->buf, P->p, have);
    }
    return 0;
}

/* Makes at least k bytes available at p; -1 (truncated, or an I/O error) when the input has
 * fewer. */
static int fill_slow(gmp_pkstream *P, size_t k)
{
    if (P->fd < 0)
        return -1;
    uint64_t off = P->base + (uint64_t)(P->p - P->start);
    if (k > P->size - off)
        return -1;
    size_t have = (size_t)(P->end - P->p);
    if (buf_keep(P, k, have) < 0)
        return -1;
    P->start = P->p = P->buf;
    P->end = P->buf + have;
    P->base = off;
    while ((size_t)(P->end - P->p) < k) {
        size_t room = P->bufcap - (size_t)(P->end - P->buf);
        ssize_t r = pread(P->fd, (void *)P->end, room, (off_t)(off + (uint64_t)(P->end - P->p)));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail(P, GMP_ERR_IO, "cannot read the input: %s", strerror(errno));
        if (r == 0)
            return -1;
        P->end += r;
    }
    return 0;
}

static inline int fill(gmp_pkstream *P, size_t k)
{
    return (size_t)(P->end - P->p) >= k ? 0 : fill_slow(P, k);
}

static void input_reset(gmp_pkstream *P)
{
    if (P->fd >= 0) {
        P->start = P->p = P->end = P->buf;
    } else {
        P->start = P->p = P->data;
        P->end = P->data + P->size;
    }
    P->base = 0;
}

static size_t offset(const gmp_pkstream *P)
{
    return (size_t)(P->base + (uint64_t)(P->p - P->start));
}

static uint64_t le(const unsigned char *b, size_t n)
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

static uint64_t left_in_input(const gmp_pkstream *P)
{
    return P->size - offset(P);
}

/* ---- pass 1: count the fetches of each memo index ---- */

static int cnt_at(gmp_pkstream *P, uint64_t k, uint8_t **out)
{
    if (k >= P->lim.max_memo)
        return -1;
    if (k >= P->cnt_len) {
        if (k >= P->cnt_cap) {
            size_t nc = P->cnt_cap ? P->cnt_cap : 4096;
            while (nc <= k)
                nc *= 2;
            if (charge(P, nc - P->cnt_cap) < 0)
                return -1;
            uint8_t *n = realloc(P->cnt, nc);
            if (!n)
                return fail(P, GMP_ERR_NOMEM, "out of memory");
            P->cnt = n;
            P->cnt_cap = nc;
        }
        memset(P->cnt + P->cnt_len, 0, (size_t)k + 1 - P->cnt_len);
        P->cnt_len = (size_t)k + 1;
    }
    *out = &P->cnt[k];
    return 0;
}

/* Skips an argument of w length bytes then that many bytes; -1 when it runs past the end. */
static int skip_len(gmp_pkstream *P, size_t w)
{
    if (fill(P, w) < 0)
        return -1;
    uint64_t n = le(P->p, w);
    P->p += w;
    if (n > left_in_input(P) || n >= UINT32_MAX)
        return -1;
    while (n) {
        size_t have = (size_t)(P->end - P->p);
        if (!have) {
            if (fill(P, 1) < 0)
                return -1;
            have = (size_t)(P->end - P->p);
        }
        size_t k = have < n ? have : (size_t)n;
        P->p += k;
        n -= k;
    }
    return 0;
}

/* One opcode of the scan, from P->p, refilling the window as needed: -1 to stop (at STOP, or at
 * the first fault, which the parse then reports). Arguments are skipped as the table of opcodes
 * says; the memo's opcodes are counted. */
static int scan_step(gmp_pkstream *P, uint64_t *ndef, int first)
{
    if (fill(P, 1) < 0)
        return -1;
    unsigned op = *P->p++;
    const gmp_pickle_opinfo *in = &gmp_pickle_ops[op];
    if ((first && op != PK_PROTO) || in->verdict != GMP_PKOP_ACCEPTED || op == PK_STOP)
        return -1; /* refused or unknown: the parse says which */
    size_t w = in->width;
    if (in->counted) {
        if (op == PK_LONG4 && (fill(P, 4) < 0 || (P->p[3] & 0x80)))
            return -1;
        return skip_len(P, w);
    }
    if (fill(P, w) < 0)
        return -1;
    uint64_t key = le(P->p, w);
    P->p += w;
    uint8_t *c = NULL;
    switch (op) {
    case PK_FRAME: return key > left_in_input(P) ? -1 : 0;
    case PK_MEMOIZE:
        key = *ndef;
        /* fall through */
    case PK_BINPUT:
    case PK_LONG_BINPUT:
        if (cnt_at(P, key, &c) < 0)
            return -1;
        if (!(*c & 0x80)) {
            *c |= 0x80;
            (*ndef)++;
        }
        return 0;
    case PK_BINGET:
    case PK_LONG_BINGET:
        if (key >= P->cnt_len || !(P->cnt[key] & 0x80))
            return -1; /* not defined: the parse says so */
        if ((P->cnt[key] & KEEP) != KEEP)
            P->cnt[key]++;
        return 0;
    default: return 0;
    }
}

/* Pass 1: the fetches of each memo index counted, up to STOP or the first fault. */
static void scan(gmp_pkstream *P)
{
    uint64_t ndef = 0;
    for (int first = 1; scan_step(P, &ndef, first) == 0; first = 0)
        ;
}

/* The memo of the parse: a dense slot per fetched index. */
static int memo_prepare(gmp_pkstream *P)
{
    P->nwords = (P->cnt_len + 63) / 64;
    size_t nref = 0;
    for (size_t i = 0; i < P->cnt_len; i++)
        nref += (P->cnt[i] & KEEP) != 0;
    size_t bytes = P->nwords * (sizeof(mword) + sizeof(uint64_t)) + nref * sizeof(mslot);
    if (charge(P, bytes) < 0)
        return -1;
    P->mw = calloc(P->nwords ? P->nwords : 1, sizeof *P->mw);
    P->defined = calloc(P->nwords ? P->nwords : 1, sizeof *P->defined);
    P->slots = calloc(nref ? nref : 1, sizeof *P->slots);
    if (!P->mw || !P->defined || !P->slots)
        return fail(P, GMP_ERR_NOMEM, "out of memory");
    P->nslots = nref;
    size_t r = 0;
    for (size_t w = 0; w < P->nwords; w++) {
        P->mw[w].rank = r;
        for (size_t b = 0; b < 64 && w * 64 + b < P->cnt_len; b++) {
            uint8_t c = P->cnt[w * 64 + b] & KEEP;
            if (c) {
                P->mw[w].bits |= (uint64_t)1 << b;
                P->slots[r++].left = c;
            }
        }
    }
    free(P->cnt);
    uncharge(P, P->cnt_cap);
    P->cnt = NULL;
    P->cnt_cap = 0;
    return 0;
}

/* One pass, sparse or not: the words of mw and defined (64 indices each) that index key needs,
 * doubling from 1024. */
static size_t words_for(const gmp_pkstream *P, uint64_t key)
{
    size_t nw = P->nwords ? P->nwords : 1024;
    while ((uint64_t)nw * 64 <= key)
        nw *= 2;
    return nw;
}

/* mw and defined grown to nw words (charged; the new words are the caller's to set). */
static int words_grow(gmp_pkstream *P, size_t nw)
{
    if (charge(P, (nw - P->nwords) * (sizeof(mword) + sizeof(uint64_t))) < 0)
        return -1;
    mword *mw = realloc(P->mw, nw * sizeof *mw);
    if (mw)
        P->mw = mw;
    uint64_t *def = realloc(P->defined, nw * sizeof *def);
    if (def)
        P->defined = def;
    if (!mw || !def)
        return fail(P, GMP_ERR_NOMEM, "out of memory");
    return 0;
}

/* One pass (gmp_pkstream_one_pass): the memo keeps, of what is memoized, only the
 * strings and the containers guessed to be fetched again (F_KEEP: stored under keep_key, the
 * "frames" lists of a snapshot, and their items), kept for ever; the rest is only counted as
 * defined, so a fetch of it fails, and so does the run (the caller reads it again in two passes).
 * Indices must come in order (MEMOIZE, and BINPUT as CPython's pickler writes it: the memo's
 * length): slots are appended, mw's bits mark the kept indices and its ranks count the slots
 * before each word, so slot_of works unchanged. Grows mw and defined for index key. */
static int sparse_grow(gmp_pkstream *P, uint64_t key)
{
    size_t nw = words_for(P, key);
    if (nw == P->nwords)
        return 0;
    if (words_grow(P, nw) < 0)
        return -1;
    memset(P->mw + P->nwords, 0, (nw - P->nwords) * sizeof *P->mw);
    memset(P->defined + P->nwords, 0, (nw - P->nwords) * sizeof *P->defined);
    P->nwords = nw;
    return 0;
}

static inline int sparse_keeps(const gmp_pkv *v)
{
    return v->type == GMP_PK_STR || (v->type >= GMP_PK_LIST && (v->v.o->flags & F_KEEP));
}

/* memo_put in one pass: top (the stack's top) memoized at key. */
static int sparse_put(gmp_pkstream *P, uint64_t key)
{
    if (key != P->ndefined)
        return fail(P, GMP_ERR_FORMAT, "memo index %llu out of order (one pass)",
                    (unsigned long long)key);
    if (key >= (uint64_t)P->nwords * 64 && sparse_grow(P, key) < 0)
        return -1;
    P->defined[key >> 6] |= (uint64_t)1 << (key & 63);
    P->ndefined++;
    gmp_pkv *top = &P->stack[P->sn - 1];
    if (!sparse_keeps(top))
        return 0;
    if (P->mem > P->budget)
        return fail(P, GMP_ERR_LIMIT, "more than %zu bytes held (one pass)", P->budget);
    if (P->nslots == P->slots_cap) {
        size_t nc = P->slots_cap ? 2 * P->slots_cap : 1024;
        if (charge(P, (nc - P->slots_cap) * sizeof(mslot)) < 0)
            return -1;
        mslot *sl = realloc(P->slots, nc * sizeof *sl);
        if (!sl)
            return fail(P, GMP_ERR_NOMEM, "out of memory");
        P->slots = sl;
        P->slots_cap = nc;
    }
    size_t w = (size_t)(key >> 6);
    for (; P->rank_words <= w; P->rank_words++)
        P->mw[P->rank_words].rank = P->nslots;
    P->mw[w].bits |= (uint64_t)1 << (key & 63);
    ref(top);
    mslot *m = &P->slots[P->nslots++];
    m->type = top->type;
    m->big = top->big;
    m->plain = 0;
    m->left = KEEP;
    m->v.u = top->v.u;
    return 0;
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

/* ---- parse ---- */

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

static int push_slow(gmp_pkstream *P, gmp_pkv v)
{
    {
        size_t nc = P->scap ? P->scap * 2 : 64;
        if (charge(P, (nc - P->scap) * sizeof *P->stack) < 0) {
            unref(P, &v);
            return -1;
        }
        gmp_pkv *n = realloc(P->stack, nc * sizeof *n);
        if (!n) {
            unref(P, &v);
            return fail(P, GMP_ERR_NOMEM, "out of memory");
        }
        P->stack = n;
        P->scap = nc;
    }
    P->stack[P->sn++] = v;
    return 0;
}

static inline int push(gmp_pkstream *P, gmp_pkv v)
{
    if (P->sn < P->scap) {
        P->stack[P->sn++] = v;
        return 0;
    }
    return push_slow(P, v);
}

static size_t mark_base(const gmp_pkstream *P)
{
    return P->mn ? P->marks[P->mn - 1] : 0;
}

static int pop_mark(gmp_pkstream *P, size_t *first)
{
    if (!P->mn)
        return fail(P, GMP_ERR_FORMAT, "no MARK on the stack");
    *first = P->marks[--P->mn];
    return 0;
}

static const char *tname(const gmp_pkv *v)
{
    return gmp_pkv_type_name(v);
}

static int str_eq_obj(const gmp_pkobj *o, const char *s)
{
    size_t n = strlen(s);
    return o && o->type == GMP_PK_STR && o->n == n && memcmp(o->d.s, s, n) == 0;
}

/* The role of a list about to be pushed at stack index j, predicted from what is below it. */
static void predict(gmp_pkstream *P, gmp_pkobj *o)
{
    size_t j = P->sn;
    if (j == 0 && P->mn == 0) {
        if (!P->root) {
            o->role = R_ROOT;
            o->refs++;
            P->root = o;
        }
        return;
    }
    gmp_pkobj *parent = NULL, *key = NULL;
    size_t index = 0;
    size_t m = mark_base(P);
    if (P->mn && m >= 1 && m <= j && is_obj(&P->stack[m - 1])) {
        gmp_pkobj *c = P->stack[m - 1].v.o;
        if (c->type == GMP_PK_LIST) {
            parent = c;
            index = (size_t)c->n + (j - m);
        } else if (c->type == GMP_PK_DICT && ((j - m) & 1) && is_obj(&P->stack[j - 1])) {
            parent = c;
            key = P->stack[j - 1].v.o;
        }
    }
    if (!parent && j >= 1 && j - 1 >= m && is_obj(&P->stack[j - 1])) {
        gmp_pkobj *q = P->stack[j - 1].v.o;
        if (q->type == GMP_PK_LIST) {
            parent = q;
            index = q->n;
        } else if (q->type == GMP_PK_STR && j >= 2 && j - 2 >= m && is_obj(&P->stack[j - 2]) &&
                   P->stack[j - 2].v.o->type == GMP_PK_DICT) {
            parent = P->stack[j - 2].v.o;
            key = q;
        }
    }
    if (!parent)
        return;
    if (P->sparse && ((key && P->keep_key && str_eq_obj(key, P->keep_key)) ||
                      (!key && parent->type == GMP_PK_LIST && (parent->flags & F_KEEP))))
        o->flags |= F_KEEP; /* stored under keep_key, or an item of such a list */
    uint8_t role = R_NONE;
    if (parent->role == R_ROOT && parent->type == GMP_PK_DICT && key) {
        if (P->cb.list_key && str_eq_obj(key, P->cb.list_key))
            role = R_SEGS;
        else if (P->cb.lists_key && str_eq_obj(key, P->cb.lists_key))
            role = R_TRACES;
    } else if (parent->role == R_TRACES && !key && index <= UINT32_MAX) {
        role = R_DEV;
    }
    if (role == R_NONE)
        return;
    o->role = role;
    o->pred_parent = parent;
    o->role_index = (uint32_t)index;
    if (key) {
        key->refs++;
        o->pred_key = key;
    }
    P->roles_pending++;
}

static int streams(const gmp_pkobj *c)
{
    return c->role == R_SEGS || c->role == R_DEV || (c->role == R_ROOT && c->type == GMP_PK_LIST);
}

/* Checks that child (a value about to be stored in parent, under key or at index) may be: it is
 * sealed, the nesting bound holds, and a streamed list goes where it was predicted. */
__attribute__((noinline)) static int attach_all(gmp_pkstream *P, gmp_pkobj *parent,
                                                const gmp_pkv *child, const gmp_pkv *key,
                                                size_t index)
{
    uint32_t h = 1;
    if (is_obj(child)) {
        gmp_pkobj *c = child->v.o;
        if (c == parent)
            return fail(P, GMP_ERR_FORMAT, "a %s contains itself", tname(child));
        if (c->type >= GMP_PK_LIST && !c->sealed)
            c->sealed = 1;
        h = c->height + 1;
        if (c->role && c->role != R_ROOT) {
            int ok = !(c->flags & F_ATTACHED) && c->pred_parent == parent;
            if (ok && c->pred_key)
                ok = key && is_obj(key) && key->v.o->type == GMP_PK_STR &&
                     key->v.o->n == c->pred_key->n &&
                     memcmp(key->v.o->d.s, c->pred_key->d.s, c->pred_key->n) == 0;
            else if (ok)
                ok = !key && index == c->role_index;
            if (!ok)
                return fail(P, GMP_ERR_FORMAT,
                            "a list whose items were read as they came is stored elsewhere than "
                            "its place in the stack said (a pickle shaped unlike a snapshot)");
            c->flags |= F_ATTACHED;
            P->roles_pending--;
        } else if (c->role == R_ROOT) {
            return fail(P, GMP_ERR_FORMAT, "the first value of the pickle is stored in another");
        }
    }
    if (h > parent->height) {
        parent->height = h;
        if (h > P->lim.max_depth)
            return fail(P, GMP_ERR_LIMIT, "containers nested deeper than %zu", P->lim.max_depth);
    }
    if (parent->role == R_ROOT && parent->type == GMP_PK_DICT && key && is_obj(key)) {
        unsigned f = P->cb.list_key && str_eq_obj(key->v.o, P->cb.list_key)     ? F_SEGS_SET
                     : P->cb.lists_key && str_eq_obj(key->v.o, P->cb.lists_key) ? F_TRACES_SET
                                                                                : 0;
        if (f && (parent->flags & f))
            return fail(P, GMP_ERR_FORMAT, "the key '%s' is set twice", key->v.o->d.s);
        parent->flags |= (uint8_t)f;
    }
    return 0;
}

/* attach, for what nearly every store is: into a container that is not the root, of a scalar or
 * of a value with no streaming role, within the nesting bound. The rest: attach_all. */
static inline int attach(gmp_pkstream *P, gmp_pkobj *parent, const gmp_pkv *child,
                         const gmp_pkv *key, size_t index)
{
    if (parent->role != R_ROOT) {
        gmp_pkobj *c = NULL;
        uint32_t h = 1;
        if (child->type >= GMP_PK_LIST) { /* a string has no role and no height: not read */
            c = child->v.o;
            if (c == parent || c->role)
                return attach_all(P, parent, child, key, index);
            h = c->height + 1;
        }
        if (h > parent->height) {
            if (h > P->lim.max_depth)
                return attach_all(P, parent, child, key, index);
            parent->height = h;
        }
        if (c && !c->sealed) /* once sealed, never written */
            c->sealed = 1;
        return 0;
    }
    return attach_all(P, parent, child, key, index);
}

static int modifiable(gmp_pkstream *P, const gmp_pkobj *c)
{
    if (c->sealed)
        return fail(P, GMP_ERR_FORMAT,
                    "a %s is changed after it was stored in another container (not accepted: "
                    "the streaming reader takes each value as complete once stored)",
                    c->type == GMP_PK_DICT ? "dict" : "list");
    return 0;
}

/* ---- handing items over ----
 *
 * A streamed list's items are checked and counted as APPENDS stores them (hand, hand_flat), then
 * put in a batch, which the consumer reads (batch_read) once the APPENDS is done (submit); its
 * values are released after (batch_release), on the calling thread, with the husks the consumer
 * asked for meanwhile. So the consumer sees the same items in the same order as if each were
 * handed over when stored: everything a batch refers to holds a reference until it is released.
 * A consumer that stops stops the parse; its message wins over any error of the parse after the
 * item it stopped at (the parse would not have got there). */

/* Room for one more item in b (its pairs and records grow in flat_room). */
static int batch_room(gmp_pkstream *P, pk_batch *b)
{
    if (b->n < b->cap)
        return 0;
    size_t nc = b->cap ? 2 * b->cap : 256;
    if (charge(P, (nc - b->cap) * sizeof *b->it) < 0)
        return -1;
    pk_item *it = realloc(b->it, nc * sizeof *it);
    if (!it)
        return fail(P, GMP_ERR_NOMEM, "out of memory");
    b->it = it;
    b->cap = nc;
    return 0;
}

/* The consumer reads the batch's items in order, up to one it stops at. */
static void batch_read(gmp_pkstream *P, pk_batch *b)
{
    P->cur = b;
    for (size_t i = 0; i < b->n && P->cb.item && !b->failed; i++) {
        const pk_item *x = &b->it[i];
        if (!x->flat) {
            b->msg[0] = 0;
            b->failed = P->cb.item(P->cb.ctx, x->kind, x->index, &x->v, b->msg, sizeof b->msg) != 0;
            continue;
        }
        /* each record as a dict that lives for the call: sealed, with a role (husk leaves it) */
        gmp_pkobj o;
        memset(&o, 0, sizeof o);
        o.type = GMP_PK_DICT;
        o.sealed = 1;
        o.role = R_FLAT;
        gmp_pkv item = {.type = GMP_PK_DICT, .v.o = &o};
        for (uint32_t k = 0; k < x->n; k++) {
            const flat_rec *r = &b->recs[x->off + k];
            if (k + 4 < x->n) { /* written on the parse's thread: fetched ahead */
                const char *ahead = (const char *)(b->pairs + r[4].off);
                __builtin_prefetch(ahead);
                __builtin_prefetch(ahead + 64);
                __builtin_prefetch(ahead + 128);
                __builtin_prefetch(ahead + 192);
            }
            o.n = o.cap = r->n;
            o.height = r->height;
            o.d.items = b->pairs + r->off;
            o.tag = 0;
            b->msg[0] = 0;
            if (P->cb.item(P->cb.ctx, x->kind, x->index, &item, b->msg, sizeof b->msg) != 0) {
                b->failed = 1;
                break;
            }
        }
    }
    P->cur = NULL;
}

static void husk_now(gmp_pkstream *P, gmp_pkobj *o);

/* After it was read: the husks asked for, then the values' references. */
static void batch_release(gmp_pkstream *P, pk_batch *b)
{
    for (size_t i = 0; i < b->hn; i++)
        husk_now(P, b->husks[i]);
    for (size_t i = 0; i < b->n; i++) {
        const pk_item *x = &b->it[i];
        if (!x->flat)
            unref(P, &x->v);
        else
            for (uint32_t k = 0; k < x->n; k++) {
                const flat_rec *r = &b->recs[x->off + k];
                for (uint64_t m = r->owned; m; m &= m - 1)
                    unref(P, &b->pairs[r->off + (unsigned)__builtin_ctzll(m)]);
            }
    }
    b->n = b->pn = b->rn = b->hn = 0;
}

/* A batch that was read and released: a consumer that stopped stops the parse, whatever it
 * failed on later (0, or -1). */
static int batch_outcome(gmp_pkstream *P, pk_batch *b)
{
    if (!b->failed)
        return 0;
    b->failed = 0;
    P->code = GMP_ERR_FORMAT;
    P->consumer_stop = 1;
    if (P->err && P->errlen)
        snprintf(P->err, P->errlen, "%s", b->msg);
    return -1;
}

/* Hands the batch being filled to the consumer, then releases it. -1 when the consumer stopped. */
static int submit(gmp_pkstream *P)
{
    pk_batch *b = P->fill;
    if (!b->n)
        return 0;
    batch_read(P, b);
    batch_release(P, b);
    return batch_outcome(P, b);
}

/* At the end of a run, or when it fails: every item stored so far is read (the consumer's stop
 * winning over the run's failure). */
static void flat_drop(gmp_pkstream *P);

static void flush(gmp_pkstream *P)
{
    flat_drop(P);
    submit(P);
    batch_release(P, P->fill); /* what a stop left unread */
}

/* Stores a streamed item in its list (checked as any store) and puts it in the batch. */
static int hand(gmp_pkstream *P, gmp_pkobj *list, gmp_pkv *item)
{
    if (attach(P, list, item, NULL, list->n) < 0) {
        unref(P, item);
        return -1;
    }
    if (list->n >= MAX_ITEMS) {
        unref(P, item);
        return fail(P, GMP_ERR_LIMIT, "container with more than %u entries", (unsigned)MAX_ITEMS);
    }
    if (batch_room(P, P->fill) < 0) {
        unref(P, item);
        return -1;
    }
    list->n++;
    pk_item *x = &P->fill->it[P->fill->n++];
    memset(x, 0, sizeof *x);
    x->v = *item; /* its reference moves into the batch */
    x->kind = list->role == R_DEV ? GMP_PKS_LISTS : GMP_PKS_LIST;
    x->index = list->role_index;
    return 0;
}

static int reserve(gmp_pkstream *P, gmp_pkobj *c, size_t add)
{
    size_t per = c->type == GMP_PK_DICT ? 2 : 1;
    if (add > MAX_ITEMS || c->n + add > MAX_ITEMS)
        return fail(P, GMP_ERR_LIMIT, "container with more than %u entries", (unsigned)MAX_ITEMS);
    size_t need = c->n + add;
    if (need <= c->cap)
        return 0;
    size_t nc = c->cap ? c->cap : 4;
    while (nc < need)
        nc *= 2;
    if (nc > MAX_ITEMS)
        nc = MAX_ITEMS;
    gmp_pkv *ni = arr_alloc(P, nc * per);
    if (!ni)
        return -1;
    if (c->n)
        memcpy(ni, c->d.items, (size_t)c->n * per * sizeof *ni);
    arr_free(P, c->d.items, (size_t)c->cap * per);
    c->d.items = ni;
    c->cap = (uint32_t)nc;
    return 0;
}

/* ---- flat entries ----
 *
 * Nearly all of a large snapshot is trace entries: dicts of a few scalars and memo references
 * (keys, action, frames list), each built, then stored in its device's list by APPENDS and handed
 * over. fast_entry reads such a dict straight from the input into a record of its pairs and
 * pushes a placeholder (NONE with big = 1 and the record's index) instead of an object: no dict,
 * no item array, no per-pair checks later. Nothing else may see a placeholder: the streamed list's
 * APPENDS hands the record over (hand_flat), read as a dict; any other opcode that would read one
 * (flat_neutral says which do not) first turns every placeholder back into the dict it stands for
 * (materialize), so every outcome is the one without placeholders. fast_entry takes only what it
 * can take whole (a dict of MEMOIZE, MARK, string keys and scalar or fetched values, SETITEMS, in
 * the window, not kept by the memo), and leaves anything else to the usual path untouched. */

#define FLAT_PAIRS_MAX 32  /* pairs of a dict read flat */
#define FLAT_RECS_MAX 8192 /* records in a batch */

static inline int is_flat(const gmp_pkv *v)
{
    return v->type == GMP_PK_NONE && v->big;
}

/* Room for one more record of up to n pairs, counted as memory held; 0, or -1 (then nothing is
 * said: the dict is read the usual way, which reports what is wrong). */
static int flat_room(gmp_pkstream *P, size_t n)
{
    pk_batch *b = P->fill;
    if (b->rn < b->rcap && b->pn + 2 * n <= b->pcap)
        return 0;
    if (b->rn == FLAT_RECS_MAX)
        return -1;
    size_t add = 0, rc = b->rcap, pc = b->pcap;
    if (b->rn == rc)
        rc = rc ? 2 * rc : 256, add += (rc - b->rcap) * sizeof *b->recs;
    while (b->pn + 2 * n > pc)
        pc = pc ? 2 * pc : 4096;
    add += (pc - b->pcap) * sizeof *b->pairs;
    if (add > P->lim.max_memory || P->mem > P->lim.max_memory - add)
        return -1;
    if (rc != b->rcap) {
        flat_rec *r = realloc(b->recs, rc * sizeof *r);
        if (!r)
            return -1;
        b->recs = r;
        P->mem += (rc - b->rcap) * sizeof *r;
        b->rcap = rc;
    }
    if (pc != b->pcap) {
        gmp_pkv *q = realloc(b->pairs, pc * sizeof *q);
        if (!q)
            return -1;
        b->pairs = q;
        P->mem += (pc - b->pcap) * sizeof *q;
        b->pcap = pc;
    }
    if (P->mem > P->peak)
        P->peak = P->mem;
    return 0;
}

/* A placeholder is gone (its record handed over, or made a dict). */
static void flat_done(gmp_pkstream *P)
{
    if (--P->nflat == 0)
        P->flat_top = 0;
}

/* At p, '}' (EMPTY_DICT) with sn values on the stack: when it begins a trace entry that can be
 * read flat (the top MARK is on a device's streamed list, and the dict is as said above), reads
 * it, pushes its placeholder at stack[sn] and returns where the input goes on; else NULL, with
 * nothing changed. Every check comes before the first change. Out of the parse loop (noinline):
 * inlined there, its counters would live on the stack (the loop holds too many values for the
 * registers). */
__attribute__((noinline)) static const unsigned char *
fast_entry(gmp_pkstream *P, const unsigned char *p, const unsigned char *end, size_t sn)
{
    size_t m = P->marks[P->mn - 1];
    if (m == 0 || m > sn || sn == P->scap)
        return NULL;
    const gmp_pkv *lv = &P->stack[m - 1];
    if (lv->type != GMP_PK_LIST || lv->v.o->role != R_DEV || lv->v.o->sealed ||
        (lv->v.o->flags & F_KEEP))
        return NULL;
    const unsigned char *q = p + 1;
    if (end - q < 2 || q[0] != PK_MEMOIZE || q[1] != PK_MARK)
        return NULL;
    q += 2;
    /* the dict's MEMOIZE: only when the memo does not keep it (it is fetched again: a dict) */
    uint64_t key = P->ndefined;
    if (key >= P->lim.max_memo)
        return NULL;
    if (key < (uint64_t)P->nwords * 64) {
        const mword *w = &P->mw[key >> 6];
        uint64_t bit = (uint64_t)1 << (key & 63);
        if ((w->bits & bit) && P->slots[w->rank + rank_pop(w->bits & (bit - 1))].left)
            return NULL;
    } else if (P->sparse) {
        return NULL; /* the memo grows there: sparse_put */
    }
    if (flat_room(P, FLAT_PAIRS_MAX) < 0)
        return NULL;
    gmp_pkv *kv = P->fill->pairs + P->fill->pn; /* written in place, kept only when committed */
    mslot *counted[4];      /* fetches whose count goes down: distinct slots, a few at most */
    mslot *plain[4];        /* containers fetched that their slots do not know sealed yet */
    gmp_pkobj *unsealed[4]; /* and those containers (a slot's last fetch empties it) */
    unsigned nplain = 0;
    unsigned counted_at[4], nc = 0;
    unsigned n = 0;
    uint32_t h = 0;
    for (;;) {
        if (q == end)
            return NULL;
        if (*q == PK_SETITEMS) {
            if (n & 1)
                return NULL;
            q++;
            break;
        }
        if (n == 2 * FLAT_PAIRS_MAX)
            return NULL;
        gmp_pkv *d = &kv[n];
        uint64_t k, u = 0;
        unsigned t = GMP_PK_INT, big = 0;
        size_t room = (size_t)(end - q);
#define NEED(x)                                                                                    \
    if (room < (x))                                                                                \
    return NULL
        switch (*q) {
        case PK_BINGET:
            NEED(2);
            k = q[1], q += 2;
            goto get;
        case PK_LONG_BINGET:
            NEED(5);
            k = le(q + 1, 4), q += 5;
            goto get;
        case PK_BININT1:
            NEED(2);
            u = q[1], q += 2;
            break;
        case PK_BININT2:
            NEED(3);
            u = le(q + 1, 2), q += 3;
            break;
        case PK_BININT:
            NEED(5);
            u = (uint64_t)(int64_t)(int32_t)(uint32_t)le(q + 1, 4), q += 5;
            break;
        case PK_NONE: t = GMP_PK_NONE, q++; break;
        case PK_NEWTRUE:
        case PK_NEWFALSE: t = GMP_PK_BOOL, u = *q == PK_NEWTRUE, q++; break;
        case PK_LONG1: {
            NEED(2);
            size_t len = q[1];
            if (len > 8)
                return NULL;
            NEED(2 + len);
            big = long1_short(q + 2, len, &u);
            q += 2 + len;
            break;
        }
        default: return NULL;
        }
#undef NEED
        if (!(n & 1))
            return NULL; /* a key that is not a string */
        pkv_put(d, t, big, u);
        if (h < 1)
            h = 1;
        n++;
        continue;
    get:
        if (k >= (uint64_t)P->nwords * 64)
            return NULL;
        {
            const mword *w = &P->mw[k >> 6];
            uint64_t bit = (uint64_t)1 << (k & 63);
            if (!(w->bits & bit))
                return NULL;
            mslot *s = &P->slots[w->rank + rank_pop(w->bits & (bit - 1))];
            if (!s->left || s->type == GMP_PK_NONE)
                return NULL;
            if (!(n & 1) && s->type != GMP_PK_STR)
                return NULL;
            if (s->left != KEEP) {
                if (nc == 4)
                    return NULL;
                for (unsigned i = 0; i < nc; i++)
                    if (counted[i] == s)
                        return NULL;
                counted[nc] = s;
                counted_at[nc++] = n;
            }
            uint32_t hh = 1;
            if (s->type >= GMP_PK_LIST) {
                if (s->plain) {
                    hh = s->height + 1;
                } else {
                    if (s->v.o->role)
                        return NULL;
                    hh = s->v.o->height + 1;
                    if (nplain == 4)
                        return NULL;
                    plain[nplain] = s;
                    unsealed[nplain++] = s->v.o;
                }
            }
            if (hh > h)
                h = hh;
            pkv_put(d, s->type, s->big, s->v.u);
            n++;
        }
    }
    if (h > P->lim.max_depth)
        return NULL;
    /* commit: the fetches, the stores, the MEMOIZE, the record, the placeholder */
    /* A value the memo keeps to the end (KEEP) is borrowed: no reference is taken, so the
     * parse writes nothing into it (a consumer on another thread reads it meanwhile). */
    uint64_t owned = 0;
    for (unsigned i = 0, c = 0; i < n; i++) {
        if (c < nc && i == counted_at[c]) {
            owned |= (uint64_t)1 << i;
            if (counted[c]->left == 1) {
                counted[c]->left = 0;
                counted[c]->type = GMP_PK_NONE; /* the last fetch: the memo's reference moves */
            } else {
                counted[c]->left--;
                if (kv[i].type >= GMP_PK_STR)
                    kv[i].v.o->refs++;
            }
            c++;
        }
    }
    /* stored: sealed (those their slots know as such are; the object is not read: a consumer on
     * another thread writes its tag), and then neither their height nor their role changes
     * again (a slot emptied by its last fetch is left as it is) */
    for (unsigned i = 0; i < nplain; i++) {
        if (!unsealed[i]->sealed)
            unsealed[i]->sealed = 1;
        if (plain[i]->type >= GMP_PK_LIST) {
            plain[i]->height = plain[i]->v.o->height;
            plain[i]->plain = 1;
        }
    }
    if (key < (uint64_t)P->nwords * 64) {
        uint64_t bit = (uint64_t)1 << (key & 63);
        if (!(P->defined[key >> 6] & bit)) {
            P->defined[key >> 6] |= bit;
            P->ndefined++;
        }
    } else {
        P->ndefined++; /* never fetched: only its count matters */
    }
    flat_rec *r = &P->fill->recs[P->fill->rn];
    r->off = (uint32_t)P->fill->pn;
    r->n = n / 2;
    r->height = h;
    r->owned = owned;
    P->fill->pn += n;
    pkv_put(&P->stack[sn], GMP_PK_NONE, 1, P->fill->rn++);
    P->nflat++;
    P->nflat_total++;
    P->flat_top = sn + 1;
    return q;
}

/* hand, for the record of a placeholder (in the batch already): it joins the run of records
 * handed over just before it, or starts one. */
static int hand_flat(gmp_pkstream *P, gmp_pkobj *list, uint64_t idx)
{
    pk_batch *b = P->fill;
    flat_rec *r = &b->recs[idx];
    int rc = 0;
    uint32_t h = r->height + 1;
    if (h > list->height) {
        list->height = h;
        if (h > P->lim.max_depth)
            rc = fail(P, GMP_ERR_LIMIT, "containers nested deeper than %zu", P->lim.max_depth);
    }
    if (rc == 0 && list->n >= MAX_ITEMS)
        rc = fail(P, GMP_ERR_LIMIT, "container with more than %u entries", (unsigned)MAX_ITEMS);
    uint8_t kind = list->role == R_DEV ? GMP_PKS_LISTS : GMP_PKS_LIST;
    pk_item *x = b->n ? &b->it[b->n - 1] : NULL;
    int joins =
        x && x->flat && x->off + x->n == idx && x->kind == kind && x->index == list->role_index;
    if (rc == 0 && !joins && b->n == b->cap)
        rc = batch_room(P, b);
    if (rc < 0) {
        for (uint64_t m = r->owned; m; m &= m - 1)
            unref(P, &b->pairs[r->off + (unsigned)__builtin_ctzll(m)]);
        flat_done(P);
        return -1;
    }
    list->n++;
    if (joins) {
        x->n++;
    } else {
        x = &b->it[b->n++];
        memset(x, 0, sizeof *x);
        x->flat = 1;
        x->off = (uint32_t)idx;
        x->n = 1;
        x->kind = kind;
        x->index = list->role_index;
    }
    flat_done(P); /* the references move to the item */
    return 0;
}

/* Turns every placeholder on the stack into the dict it stands for. */
static int materialize(gmp_pkstream *P)
{
    for (size_t i = 0; i < P->sn && P->nflat; i++) {
        if (!is_flat(&P->stack[i]))
            continue;
        flat_rec *r = &P->fill->recs[P->stack[i].v.u];
        gmp_pkobj *o = obj_new(P, GMP_PK_DICT);
        if (!o)
            return -1;
        if (r->n && reserve(P, o, r->n) < 0) {
            fl_put(P, &P->objs, o, sizeof *o);
            return -1;
        }
        if (r->n)
            memcpy(o->d.items, P->fill->pairs + r->off, 2 * (size_t)r->n * sizeof(gmp_pkv));
        for (uint32_t j = 0; j < 2 * r->n; j++) /* a dict holds a reference to each value */
            if (!(r->owned >> j & 1))
                ref(&o->d.items[j]);
        o->n = r->n;
        o->height = r->height;
        pkv_put_obj(&P->stack[i], GMP_PK_DICT, o);
        flat_done(P);
    }
    return 0;
}

/* Non-zero when predict, for a container pushed at stack[j], decides as it would with the dicts in
 * place of the placeholders. It reads the value under the top MARK, then (for a dict there) the
 * value at j - 1, and only when neither gives a parent, the values at j - 1 and j - 2. A
 * placeholder reads as None where the dict would be an object; at j - 1 after a list under the
 * MARK (the next entry of a batch) that changes nothing. */
static int flat_predicts(const gmp_pkstream *P, size_t j)
{
    const gmp_pkv *st = P->stack;
    size_t m = P->mn ? P->marks[P->mn - 1] : 0;
    int parent = 0;
    if (P->mn && m >= 1 && m <= j) {
        if (is_flat(&st[m - 1]))
            return 0;
        if (is_obj(&st[m - 1])) {
            const gmp_pkobj *c = st[m - 1].v.o;
            if (c->type == GMP_PK_LIST) {
                parent = 1;
            } else if (c->type == GMP_PK_DICT && ((j - m) & 1)) {
                if (is_flat(&st[j - 1]))
                    return 0;
                parent = is_obj(&st[j - 1]);
            }
        }
    }
    return parent || !(j >= 2 && is_flat(&st[j - 2]));
}

/* Non-zero when the opcode op, about to run with placeholders on the stack, cannot read one (it
 * pushes, or reads values above every placeholder, or APPENDS to a streamed list, which hands
 * them over); then they stay. */
static int flat_neutral(const gmp_pkstream *P, unsigned op)
{
    switch (op) {
    case PK_FRAME:
    case PK_MARK:
    case PK_BINGET:
    case PK_LONG_BINGET:
    case PK_NONE:
    case PK_NEWTRUE:
    case PK_NEWFALSE:
    case PK_BININT:
    case PK_BININT1:
    case PK_BININT2:
    case PK_LONG1:
    case PK_LONG4:
    case PK_BINFLOAT:
    case PK_SHORT_BINUNICODE:
    case PK_BINUNICODE:
    case PK_BINUNICODE8:
    case PK_SHORT_BINBYTES:
    case PK_BINBYTES:
    case PK_BINBYTES8: return 1;
    case PK_MEMOIZE:
    case PK_BINPUT:
    case PK_LONG_BINPUT: return P->sn > P->flat_top;
    case PK_EMPTY_LIST:
    case PK_EMPTY_DICT:
    case PK_EMPTY_TUPLE: return flat_predicts(P, P->sn);
    case PK_SETITEMS: return P->mn && P->marks[P->mn - 1] > P->flat_top;
    case PK_APPENDS: {
        size_t m = P->mn ? P->marks[P->mn - 1] : 0;
        return m >= 1 && m <= P->sn && P->stack[m - 1].type == GMP_PK_LIST &&
               streams(P->stack[m - 1].v.o);
    }
    default: return 0;
    }
}

/* Releases the records that were never handed over (a parse that stopped: their placeholders
 * are left on the stack, as None, for the stack's release). */
static void flat_drop(gmp_pkstream *P)
{
    for (size_t i = 0; i < P->sn && P->nflat; i++) {
        if (!is_flat(&P->stack[i]))
            continue;
        const flat_rec *r = &P->fill->recs[P->stack[i].v.u];
        for (uint64_t m = r->owned; m; m &= m - 1)
            unref(P, &P->fill->pairs[r->off + (unsigned)__builtin_ctzll(m)]);
        pkv_put(&P->stack[i], GMP_PK_NONE, 0, 0);
        P->nflat--;
    }
    P->nflat = P->flat_top = 0;
}

/* Appends stack[first..sn) to the list c (the values move: their references with them). */
static int append_items(gmp_pkstream *P, gmp_pkobj *c, size_t first)
{
    size_t n = P->sn - first;
    if (streams(c)) {
        for (size_t i = first; i < P->sn; i++) {
            /* APPENDS hands over up to 1,000 entries built long before: their objects, then
             * their dicts' items, loaded ahead (N=100: ~70 ms less of 0.8 s, alternated) */
            if (i + 12 < P->sn && P->stack[i + 12].type >= GMP_PK_STR)
                __builtin_prefetch(P->stack[i + 12].v.o);
            if (i + 4 < P->sn && P->stack[i + 4].type == GMP_PK_DICT &&
                P->stack[i + 4].v.o->d.items) {
                const gmp_pkobj *o = P->stack[i + 4].v.o;
                const char *d = (const char *)o->d.items;
                size_t bytes = 2 * (size_t)o->cap * sizeof(gmp_pkv);
                for (size_t k = 0; k < bytes && k < 256; k += 64)
                    __builtin_prefetch(d + k);
            }
            gmp_pkv it = P->stack[i];
            pkv_put(&P->stack[i], GMP_PK_NONE, 0, 0);
            if (is_flat(&it) ? hand_flat(P, c, it.v.u) < 0 : hand(P, c, &it) < 0)
                return -1;
        }
        P->sn = first;
        /* not while placeholders wait on the stack: their pairs are in this batch */
        return P->nflat ? 0 : submit(P);
    }
    if (reserve(P, c, n) < 0)
        return -1;
    gmp_pkv *st = P->stack;
    for (size_t i = first; i < P->sn; i++) {
        if (attach(P, c, &st[i], NULL, c->n) < 0) {
            for (size_t j = first; j < i; j++) /* moved already */
                st[j].type = GMP_PK_NONE;
            return -1;
        }
        c->d.items[c->n++] = st[i];
    }
    P->sn = first;
    return 0;
}

static int is_scalar(const gmp_pkv *k)
{
    return k->type <= GMP_PK_BYTES;
}

static inline int check_key(gmp_pkstream *P, const gmp_pkv *k)
{
    if (is_scalar(k))
        return 0;
    if (k->type == GMP_PK_TUPLE) {
        for (uint32_t i = 0; i < k->v.o->n; i++)
            if (!is_scalar(&k->v.o->d.items[i]))
                goto bad;
        return 0;
    }
bad:
    return fail(P, GMP_ERR_FORMAT, "dict key of type %s not accepted", tname(k));
}

/* Sets pairs stack[first..sn) in the dict c. */
static int set_items(gmp_pkstream *P, gmp_pkobj *c, size_t first)
{
    size_t n = P->sn - first;
    if (n % 2)
        return fail(P, GMP_ERR_FORMAT, "SETITEMS with an odd number of items");
    if (reserve(P, c, n / 2) < 0)
        return -1;
    gmp_pkv *st = P->stack, *it = n ? c->d.items + 2 * (size_t)c->n : NULL; /* none: no array */
    for (size_t i = first; i < P->sn; i += 2) {
        if (check_key(P, &st[i]) < 0 || attach(P, c, &st[i], NULL, 0) < 0 ||
            attach(P, c, &st[i + 1], &st[i], 0) < 0) {
            for (size_t j = first; j < i; j++) /* moved already */
                st[j].type = GMP_PK_NONE;
            return -1;
        }
        *it++ = st[i];
        *it++ = st[i + 1];
        c->n++;
    }
    P->sn = first;
    return 0;
}

static void drop_from(gmp_pkstream *P, size_t first)
{
    while (P->sn > first)
        unref(P, &P->stack[--P->sn]);
}

/* A new LIST or TUPLE from stack[first..sn). */
static int build_seq(gmp_pkstream *P, uint8_t t, size_t first)
{
    gmp_pkobj *c = obj_new(P, t);
    if (!c)
        return -1;
    gmp_pkv v = {.type = t, .v.o = c};
    if (t == GMP_PK_LIST)
        predict(P, c); /* before the items are counted: the list's place is at first */
    size_t n = P->sn - first;
    if (t == GMP_PK_LIST && streams(c)) {
        int rc = append_items(P, c, first);
        if (rc < 0) {
            unref(P, &v);
            return -1;
        }
        return push(P, v);
    }
    if (n) {
        if (reserve(P, c, n) < 0) {
            unref(P, &v);
            return -1;
        }
        for (size_t i = first; i < P->sn; i++) {
            if (attach(P, c, &P->stack[i], NULL, c->n) < 0) {
                unref(P, &v);
                return -1;
            }
            c->d.items[c->n++] = P->stack[i];
            P->stack[i].type = GMP_PK_NONE;
        }
    }
    P->sn = first;
    return push(P, v);
}

static int take(gmp_pkstream *P, size_t n, const unsigned char **b)
{
    if (fill(P, n) < 0) {
        if (P->code == GMP_OK)
            fail(P, GMP_ERR_TRUNCATED, "input ends inside an opcode's argument");
        return -1;
    }
    *b = P->p;
    P->p += n;
    return 0;
}

static int take_len(gmp_pkstream *P, size_t w, size_t *len)
{
    const unsigned char *b;
    if (take(P, w, &b) < 0)
        return -1;
    uint64_t n = le(b, w);
    if (n > left_in_input(P))
        return fail(P, GMP_ERR_TRUNCATED, "length %llu runs past the end of the input",
                    (unsigned long long)n);
    if (n >= UINT32_MAX)
        return fail(P, GMP_ERR_LIMIT, "string of %llu bytes (limit 4 GiB)", (unsigned long long)n);
    *len = (size_t)n;
    return 0;
}

static int push_int(gmp_pkstream *P, int64_t i)
{
    gmp_pkv v = {.type = GMP_PK_INT, .v.i = i};
    return push(P, v);
}

static int push_long(gmp_pkstream *P, const unsigned char *b, size_t n)
{
    gmp_pkv v = {.type = GMP_PK_INT};
    int big = 0;
    if (gmp_pickle_decode_long(b, n, &v.v.i, &v.v.u, &big) < 0)
        return fail(P, GMP_ERR_FORMAT, "integer outside [-2^63, 2^64)");
    v.big = big;
    return push(P, v);
}

static int push_bytes(gmp_pkstream *P, uint8_t t, size_t len)
{
    const unsigned char *b;
    if (take(P, len, &b) < 0)
        return -1;
    gmp_pkobj *o = obj_new(P, t);
    if (!o)
        return -1;
    o->d.s = xalloc(P, len + 1);
    if (!o->d.s) {
        fl_put(P, &P->objs, o, sizeof *o);
        return -1;
    }
    memcpy(o->d.s, b, len);
    o->d.s[len] = 0;
    o->n = (uint32_t)len;
    gmp_pkv v = {.type = t, .v.o = o};
    return push(P, v);
}

static int memo_put(gmp_pkstream *P, uint64_t key)
{
    if (P->sn <= mark_base(P))
        return fail(P, GMP_ERR_FORMAT, "stack underflow");
    if (key >= P->lim.max_memo)
        return fail(P, GMP_ERR_LIMIT, "memo index %llu (limit %zu)", (unsigned long long)key,
                    P->lim.max_memo);
    if (P->sparse)
        return sparse_put(P, key);
    if (key < (uint64_t)P->nwords * 64) {
        uint64_t bit = (uint64_t)1 << (key & 63);
        if (!(P->defined[key >> 6] & bit)) {
            P->defined[key >> 6] |= bit;
            P->ndefined++;
        }
    } else {
        P->ndefined++; /* never fetched (the scan stopped before): only its count matters */
    }
    long s = slot_of(P, key);
    if (s < 0 || !P->slots[s].left)
        return 0; /* never fetched again: not kept */
    gmp_pkv *top = &P->stack[P->sn - 1];
    ref(top);
    mslot *m = &P->slots[s];
    slot_unref(P, m);
    m->type = top->type;
    m->big = top->big;
    m->plain = 0;
    m->v.u = top->v.u;
    return 0;
}

static inline int memo_get(gmp_pkstream *P, uint64_t key)
{
    long s = slot_of(P, key);
    if (key >= (uint64_t)P->nwords * 64 || !(P->defined[key >> 6] & ((uint64_t)1 << (key & 63))) ||
        s < 0 || !P->slots[s].left)
        return fail(P, GMP_ERR_FORMAT, "memo key %llu not defined", (unsigned long long)key);
    mslot *m = &P->slots[s];
    gmp_pkv v = {.type = m->type, .big = m->big, .v.u = m->v.u};
    if (m->left != KEEP && --m->left == 0) {
        m->type = GMP_PK_NONE; /* the last fetch: the memo's reference moves */
        return push(P, v);
    }
    ref(&v);
    return push(P, v);
}

static int step(gmp_pkstream *P)
{
    P->op_off = offset(P);
    if (fill(P, 1) < 0) {
        if (P->code == GMP_OK)
            fail(P, GMP_ERR_TRUNCATED, "input ends before STOP");
        return -1;
    }
    unsigned op = *P->p++;
    const unsigned char *b;
    size_t len = 0, first = 0;
    gmp_pkv v;
    gmp_pkobj *c;
    if (P->nflat && !flat_neutral(P, op) && materialize(P) < 0)
        return -1;
    if (P->op_off == 0 && op != PK_PROTO)
        return fail(P, GMP_ERR_FORMAT, "not a pickle of protocol 2 or later (no PROTO opcode)");
    switch (op) {
    case PK_PROTO:
        if (take(P, 1, &b) < 0)
            return -1;
        if (P->op_off != 0)
            return fail(P, GMP_ERR_FORMAT, "PROTO after the first opcode");
        if (b[0] < 2 || b[0] > 5)
            return fail(P, GMP_ERR_FORMAT, "pickle protocol %u not accepted (2 to 5)", b[0]);
        return 0;
    case PK_FRAME:
        if (take(P, 8, &b) < 0)
            return -1;
        if (le(b, 8) > left_in_input(P))
            return fail(P, GMP_ERR_TRUNCATED, "frame runs past the end of the input");
        return 0;
    case PK_STOP:
        if (P->mn)
            return fail(P, GMP_ERR_FORMAT, "STOP with an open MARK");
        if (P->sn != 1)
            return fail(P, GMP_ERR_FORMAT, "STOP with %zu values on the stack (1 expected)", P->sn);
        P->done = 1;
        return 0;
    case PK_MARK:
        if (P->mn == P->mcap) {
            size_t nc = P->mcap ? P->mcap * 2 : 64;
            if (charge(P, (nc - P->mcap) * sizeof *P->marks) < 0)
                return -1;
            size_t *n = realloc(P->marks, nc * sizeof *n);
            if (!n)
                return fail(P, GMP_ERR_NOMEM, "out of memory");
            P->marks = n;
            P->mcap = nc;
        }
        P->marks[P->mn++] = P->sn;
        return 0;
    case PK_POP:
        if (P->sn > mark_base(P)) {
            unref(P, &P->stack[--P->sn]);
            return 0;
        }
        return pop_mark(P, &first);
    case PK_POP_MARK:
        if (pop_mark(P, &first) < 0)
            return -1;
        drop_from(P, first);
        return 0;
    case PK_DUP:
        if (P->sn <= mark_base(P))
            return fail(P, GMP_ERR_FORMAT, "stack underflow");
        v = P->stack[P->sn - 1];
        ref(&v);
        return push(P, v);
    case PK_NONE: v = (gmp_pkv){.type = GMP_PK_NONE}; return push(P, v);
    case PK_NEWTRUE:
    case PK_NEWFALSE:
        v = (gmp_pkv){.type = GMP_PK_BOOL, .v.i = op == PK_NEWTRUE};
        return push(P, v);
    case PK_BININT:
        if (take(P, 4, &b) < 0)
            return -1;
        return push_int(P, (int64_t)(int32_t)(uint32_t)le(b, 4));
    case PK_BININT1:
        if (take(P, 1, &b) < 0)
            return -1;
        return push_int(P, b[0]);
    case PK_BININT2:
        if (take(P, 2, &b) < 0)
            return -1;
        return push_int(P, (int64_t)le(b, 2));
    case PK_LONG1:
        if (take_len(P, 1, &len) < 0 || take(P, len, &b) < 0)
            return -1;
        return push_long(P, b, len);
    case PK_LONG4:
        if (take(P, 4, &b) < 0)
            return -1;
        if (b[3] & 0x80)
            return fail(P, GMP_ERR_FORMAT, "LONG4 with a negative length");
        P->p -= 4;
        if (take_len(P, 4, &len) < 0 || take(P, len, &b) < 0)
            return -1;
        return push_long(P, b, len);
    case PK_BINFLOAT: {
        if (take(P, 8, &b) < 0)
            return -1;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = (u << 8) | b[i];
        v = (gmp_pkv){.type = GMP_PK_FLOAT};
        memcpy(&v.v.f, &u, sizeof u);
        return push(P, v);
    }
    case PK_SHORT_BINUNICODE:
    case PK_BINUNICODE:
    case PK_BINUNICODE8:
        if (take_len(P, gmp_pickle_ops[op].width, &len) < 0)
            return -1;
        return push_bytes(P, GMP_PK_STR, len);
    case PK_SHORT_BINBYTES:
    case PK_BINBYTES:
    case PK_BINBYTES8:
        if (take_len(P, gmp_pickle_ops[op].width, &len) < 0)
            return -1;
        return push_bytes(P, GMP_PK_BYTES, len);
    case PK_EMPTY_LIST:
    case PK_EMPTY_DICT:
    case PK_EMPTY_TUPLE: {
        uint8_t t = op == PK_EMPTY_LIST   ? GMP_PK_LIST
                    : op == PK_EMPTY_DICT ? GMP_PK_DICT
                                          : GMP_PK_TUPLE;
        if (!(c = obj_new(P, t)))
            return -1;
        if (t != GMP_PK_TUPLE)
            predict(P, c);
        v = (gmp_pkv){.type = t, .v.o = c};
        return push(P, v);
    }
    case PK_APPEND:
        if (P->sn < mark_base(P) + 2)
            return fail(P, GMP_ERR_FORMAT, "stack underflow");
        v = P->stack[P->sn - 2];
        if (v.type != GMP_PK_LIST)
            return fail(P, GMP_ERR_FORMAT, "APPEND to a %s", tname(&v));
        if (modifiable(P, v.v.o) < 0)
            return -1;
        return append_items(P, v.v.o, P->sn - 1);
    case PK_APPENDS:
        if (pop_mark(P, &first) < 0)
            return -1;
        if (first <= mark_base(P) || first == 0) {
            drop_from(P, first);
            return fail(P, GMP_ERR_FORMAT, "stack underflow");
        }
        v = P->stack[first - 1];
        if (v.type != GMP_PK_LIST)
            return fail(P, GMP_ERR_FORMAT, "APPENDS to a %s", tname(&v));
        if (modifiable(P, v.v.o) < 0)
            return -1;
        return append_items(P, v.v.o, first);
    case PK_LIST:
    case PK_TUPLE:
        if (pop_mark(P, &first) < 0)
            return -1;
        return build_seq(P, op == PK_LIST ? GMP_PK_LIST : GMP_PK_TUPLE, first);
    case PK_TUPLE1:
    case PK_TUPLE2:
    case PK_TUPLE3:
        len = op - PK_TUPLE1 + 1u;
        if (P->sn < mark_base(P) + len)
            return fail(P, GMP_ERR_FORMAT, "stack underflow");
        return build_seq(P, GMP_PK_TUPLE, P->sn - len);
    case PK_DICT: {
        if (pop_mark(P, &first) < 0)
            return -1;
        if ((P->sn - first) % 2)
            return fail(P, GMP_ERR_FORMAT, "DICT with an odd number of items");
        /* the dict takes the pairs' place: it is pushed after them, so move them aside */
        if (!(c = obj_new(P, GMP_PK_DICT)))
            return -1;
        v = (gmp_pkv){.type = GMP_PK_DICT, .v.o = c};
        if (set_items(P, c, first) < 0) {
            unref(P, &v);
            return -1;
        }
        if (P->sn == 0 && P->mn == 0 && !P->root) {
            c->role = R_ROOT;
            c->refs++;
            P->root = c;
        }
        return push(P, v);
    }
    case PK_SETITEM:
        if (P->sn < mark_base(P) + 3)
            return fail(P, GMP_ERR_FORMAT, "stack underflow");
        v = P->stack[P->sn - 3];
        if (v.type != GMP_PK_DICT)
            return fail(P, GMP_ERR_FORMAT, "SETITEM on a %s", tname(&v));
        if (modifiable(P, v.v.o) < 0)
            return -1;
        return set_items(P, v.v.o, P->sn - 2);
    case PK_SETITEMS:
        if (pop_mark(P, &first) < 0)
            return -1;
        if (first <= mark_base(P) || first == 0) {
            drop_from(P, first);
            return fail(P, GMP_ERR_FORMAT, "stack underflow");
        }
        v = P->stack[first - 1];
        if (v.type != GMP_PK_DICT)
            return fail(P, GMP_ERR_FORMAT, "SETITEMS on a %s", tname(&v));
        if (modifiable(P, v.v.o) < 0)
            return -1;
        return set_items(P, v.v.o, first);
    case PK_MEMOIZE: return memo_put(P, P->ndefined);
    case PK_BINPUT: return take(P, 1, &b) < 0 ? -1 : memo_put(P, b[0]);
    case PK_LONG_BINPUT: return take(P, 4, &b) < 0 ? -1 : memo_put(P, le(b, 4));
    case PK_BINGET: return take(P, 1, &b) < 0 ? -1 : memo_get(P, b[0]);
    case PK_LONG_BINGET: return take(P, 4, &b) < 0 ? -1 : memo_get(P, le(b, 4));
    default: {
        const char *why, *name = gmp_pickle_refused_name(op, &why);
        if (name)
            return fail(P, GMP_ERR_FORMAT, "opcode %s (0x%02x) %s", name, op, why);
        return fail(P, GMP_ERR_FORMAT, "unknown opcode 0x%02x", op);
    }
    }
}

/* The parse loop. The opcodes snapshots are made of are decoded here in place, while the window
 * holds all their bytes and nothing can go wrong; everything else (the first opcode, the rare
 * ones, the end of the window, anything that would fail) goes through step() from the opcode's
 * first byte, which then does all the checks and says what is wrong. Where a helper can fail
 * (memory, a limit, the streaming rules), op_off is set first. */
__attribute__((noinline)) static void parse(gmp_pkstream *P)
{
    if (step(P) < 0 || P->done)
        return;
    for (;;) {
        /* the window and the stack in locals (written back before anything else uses them) */
        const unsigned char *p = P->p, *end = P->end;
        gmp_pkv *stk = P->stack;
        size_t sn = P->sn, scap = P->scap;
#define SYNC_OUT() (P->sn = sn)
#define SYNC_IN() (stk = P->stack, sn = P->sn, scap = P->scap)
        while (end - p >= 9) {
            const unsigned char *op = p;
            uint64_t key, vu;
            unsigned vt, vb = 0;
            switch (*p) {
            case PK_BINGET:
                key = p[1];
                p += 2;
                goto get;
            case PK_LONG_BINGET:
                key = le(p + 1, 4);
                p += 5;
                goto get;
            case PK_MEMOIZE: {
                key = P->ndefined;
                if (sn <= (P->mn ? P->marks[P->mn - 1] : 0) || key >= P->lim.max_memo ||
                    (P->nflat && sn <= P->flat_top))
                    goto slow; /* step says what is wrong (or makes the dicts first) */
                if (P->sparse && (key >= (uint64_t)P->nwords * 64 || sparse_keeps(&stk[sn - 1])))
                    goto slow; /* sparse_put keeps it, or grows the memo */
                if (key < (uint64_t)P->nwords * 64) {
                    uint64_t bit = (uint64_t)1 << (key & 63);
                    if (!(P->defined[key >> 6] & bit)) {
                        P->defined[key >> 6] |= bit;
                        P->ndefined++;
                    }
                    const mword *w = &P->mw[key >> 6];
                    if (w->bits & bit) {
                        mslot *m = &P->slots[w->rank + rank_pop(w->bits & (bit - 1))];
                        if (m->left) {
                            const gmp_pkv *top = &stk[sn - 1];
                            ref(top);
                            slot_unref(P, m);
                            m->type = top->type;
                            m->big = top->big;
                            m->plain = 0;
                            m->v.u = top->v.u;
                        }
                    }
                } else {
                    P->ndefined++; /* never fetched: only its count matters */
                }
                p++;
                continue;
            }
            case PK_MARK:
                if (P->mn == P->mcap)
                    goto slow;
                P->marks[P->mn++] = sn;
                p++;
                continue;
            case PK_BININT1: vt = GMP_PK_INT, vu = p[1], p += 2; goto push_v;
            case PK_BININT2: vt = GMP_PK_INT, vu = le(p + 1, 2), p += 3; goto push_v;
            case PK_BININT:
                vt = GMP_PK_INT, vu = (uint64_t)(int64_t)(int32_t)(uint32_t)le(p + 1, 4), p += 5;
                goto push_v;
            case PK_NONE: vt = GMP_PK_NONE, vu = 0, p++; goto push_v;
            case PK_NEWTRUE:
            case PK_NEWFALSE: vt = GMP_PK_BOOL, vu = *p == PK_NEWTRUE, p++; goto push_v;
            case PK_LONG1: {
                /* as gmp_pickle_decode_long, for up to 8 bytes (longer ones: step) */
                size_t n = p[1];
                if (n > 8 || (size_t)(end - p) < 2 + n)
                    goto slow;
                vt = GMP_PK_INT;
                vb = long1_short(p + 2, n, &vu);
                p += 2 + n;
                goto push_v;
            }
            case PK_SHORT_BINUNICODE: {
                size_t n = p[1];
                if ((size_t)(end - p) < 2 + n || sn == scap)
                    goto slow;
                P->op_off = (size_t)(P->base + (uint64_t)(op - P->start));
                gmp_pkobj *o = obj_new(P, GMP_PK_STR);
                if (!o)
                    goto bail;
                o->d.s = xalloc(P, n + 1);
                if (!o->d.s) {
                    fl_put(P, &P->objs, o, sizeof *o);
                    goto bail;
                }
                memcpy(o->d.s, p + 2, n);
                o->d.s[n] = 0;
                o->n = (uint32_t)n;
                pkv_put_obj(&stk[sn++], GMP_PK_STR, o);
                p += 2 + n;
                continue;
            }
            case PK_EMPTY_LIST:
            case PK_EMPTY_DICT: {
                if (*p == PK_EMPTY_DICT && P->mn && !P->no_flat) {
                    const unsigned char *np = fast_entry(P, p, end, sn);
                    if (np) {
                        p = np;
                        sn++;
                        continue;
                    }
                }
                if (sn == scap || (P->nflat && !flat_predicts(P, sn)))
                    goto slow;
                uint8_t t = *p == PK_EMPTY_LIST ? GMP_PK_LIST : GMP_PK_DICT;
                P->op_off = (size_t)(P->base + (uint64_t)(op - P->start));
                gmp_pkobj *c = obj_new(P, t);
                if (!c)
                    goto bail;
                SYNC_OUT();
                predict(P, c);
                pkv_put_obj(&stk[sn++], t, c);
                p++;
                continue;
            }
            case PK_SETITEMS:
            case PK_APPENDS: {
                if (!P->mn)
                    goto slow;
                size_t first = P->marks[P->mn - 1];
                size_t below = P->mn >= 2 ? P->marks[P->mn - 2] : 0;
                if (first <= below || first == 0)
                    goto slow;
                gmp_pkv *c = &stk[first - 1];
                if (c->type != (*p == PK_SETITEMS ? GMP_PK_DICT : GMP_PK_LIST) || c->v.o->sealed)
                    goto slow;
                if (P->nflat && first <= P->flat_top && (*p == PK_SETITEMS || !streams(c->v.o)))
                    goto slow; /* step makes the dicts first */
                P->mn--;
                P->op_off = (size_t)(P->base + (uint64_t)(op - P->start));
                SYNC_OUT();
                int rc = *p == PK_SETITEMS ? set_items(P, c->v.o, first)
                                           : append_items(P, c->v.o, first);
                SYNC_IN();
                if (rc < 0)
                    goto bail;
                p++;
                continue;
            }
            default: goto slow;
            }
        get:
            if (key >= (uint64_t)P->nwords * 64 || sn == scap)
                goto slow;
            {
                /* no check of P->defined: the scan counted only fetches of defined indices and
                 * stopped at the first other one, where the parse fails (through step) */
                const mword *w = &P->mw[key >> 6];
                uint64_t bit = (uint64_t)1 << (key & 63);
                if (!(w->bits & bit))
                    goto slow;
                mslot *m = &P->slots[w->rank + rank_pop(w->bits & (bit - 1))];
                if (!m->left || m->type == GMP_PK_NONE) /* one pass: not kept */
                    goto slow;
                vt = m->type, vb = m->big, vu = m->v.u;
                if (m->left != KEEP && --m->left == 0)
                    m->type = GMP_PK_NONE; /* the last fetch: the memo's reference moves */
                else if (vt >= GMP_PK_STR)
                    m->v.o->refs++;
                pkv_put(&stk[sn++], vt, vb, vu);
                continue;
            }
        push_v:
            if (sn == scap) {
                p = op;
                goto slow;
            }
            pkv_put(&stk[sn++], vt, vb, vu);
            continue;
        slow:
            p = op;
            break;
        }
        SYNC_OUT();
        P->p = p;
        if (step(P) < 0 || P->done)
            return;
        continue;
    bail: /* a helper failed (P->code says why): the values pushed meanwhile are the stack's */
        SYNC_OUT();
        return;
    }
#undef SYNC_OUT
#undef SYNC_IN
}

/* After STOP: the root must be the value predicted, every streamed list where it was predicted;
 * lists that could not be streamed (a root made by DICT, say) are handed over now. */
static int finish(gmp_pkstream *P)
{
    gmp_pkv root = P->stack[0];
    if (P->root && (!is_obj(&root) || root.v.o != P->root) && P->root->n)
        return fail(P, GMP_ERR_FORMAT,
                    "the pickle's result is not its first value, whose items were read already");
    if (P->roles_pending)
        return fail(P, GMP_ERR_FORMAT,
                    "a list whose items were read as they came is not part of the result (a "
                    "pickle shaped unlike a snapshot)");
    if (!is_obj(&root))
        return 0;
    gmp_pkobj *r = root.v.o;
    char msg[512];
    if (r->type == GMP_PK_LIST && !streams(r)) {
        /* the items are already stored: hand them over in order */
        for (uint32_t i = 0; i < r->n; i++) {
            msg[0] = 0;
            if (P->cb.item &&
                P->cb.item(P->cb.ctx, GMP_PKS_LIST, 0, &r->d.items[i], msg, sizeof msg) != 0)
                goto stopped;
        }
        return 0;
    }
    if (r->type != GMP_PK_DICT)
        return 0;
    for (uint32_t i = 0; i < r->n; i++) {
        gmp_pkv *k = &r->d.items[2 * (size_t)i], *val = &r->d.items[2 * (size_t)i + 1];
        if (!is_obj(k) || val->type != GMP_PK_LIST || streams(val->v.o))
            continue;
        gmp_pkobj *l = val->v.o;
        if (P->cb.list_key && str_eq_obj(k->v.o, P->cb.list_key)) {
            for (uint32_t j = 0; j < l->n; j++) {
                msg[0] = 0;
                if (P->cb.item &&
                    P->cb.item(P->cb.ctx, GMP_PKS_LIST, 0, &l->d.items[j], msg, sizeof msg) != 0)
                    goto stopped;
            }
        } else if (P->cb.lists_key && str_eq_obj(k->v.o, P->cb.lists_key) && l->role != R_TRACES) {
            for (uint32_t d = 0; d < l->n; d++) {
                gmp_pkv *dl = &l->d.items[d];
                if (dl->type != GMP_PK_LIST || streams(dl->v.o))
                    continue;
                for (uint32_t j = 0; j < dl->v.o->n; j++) {
                    msg[0] = 0;
                    if (P->cb.item && P->cb.item(P->cb.ctx, GMP_PKS_LISTS, d, &dl->v.o->d.items[j],
                                                 msg, sizeof msg) != 0)
                        goto stopped;
                }
            }
        }
    }
    for (uint32_t i = 0; i < r->n; i++) {
        gmp_pkv *k = &r->d.items[2 * (size_t)i], *val = &r->d.items[2 * (size_t)i + 1];
        if (!is_obj(k) || val->type != GMP_PK_LIST || val->v.o->role != R_TRACES)
            continue;
        for (uint32_t d = 0; d < val->v.o->n; d++) {
            gmp_pkv *dl = &val->v.o->d.items[d];
            if (dl->type != GMP_PK_LIST || streams(dl->v.o))
                continue;
            for (uint32_t j = 0; j < dl->v.o->n; j++) {
                msg[0] = 0;
                if (P->cb.item && P->cb.item(P->cb.ctx, GMP_PKS_LISTS, d, &dl->v.o->d.items[j], msg,
                                             sizeof msg) != 0)
                    goto stopped;
            }
        }
    }
    return 0;
stopped:
    P->code = GMP_ERR_FORMAT;
    P->consumer_stop = 1;
    if (P->err && P->errlen)
        snprintf(P->err, P->errlen, "%s", msg);
    return -1;
}

gmp_pkstream *gmp_pkstream_new(const gmp_pickle_limits *lim, const gmp_pkstream_cb *cb)
{
    gmp_pkstream *P = calloc(1, sizeof *P);
    if (!P)
        return NULL;
    if (lim)
        P->lim = *lim;
    else
        gmp_pickle_limits_default(&P->lim);
    if (cb)
        P->cb = *cb;
    P->fd = -1;
    return P;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static gmp_err run(gmp_pkstream *P, char *err, size_t errlen)
{
    P->err = err;
    P->errlen = errlen;
    if (err && errlen)
        err[0] = 0;
    if (P->done || P->code != GMP_OK || P->sn)
        return fail(P, GMP_ERR_ARG, "bad argument"), GMP_ERR_ARG;
    double t0 = now_s();
    input_reset(P);
    if (P->sparse) {
        sparse_grow(P, 0);
    } else {
        scan(P);
        if (P->code == GMP_OK)
            memo_prepare(P);
    }
    double t1 = now_s();
    input_reset(P);
    P->fill = &P->bat;
    if (P->code == GMP_OK)
        parse(P);
    flush(P);
    if (P->code == GMP_OK && P->done && finish(P) == 0) {
        P->result = P->stack[0];
        P->sn = 0;
    }
    P->scan_s = t1 - t0;
    P->parse_s = now_s() - t1;
    free(P->buf);
    P->buf = NULL;
    return P->code != GMP_OK ? P->code : GMP_OK;
}

gmp_err gmp_pkstream_run_fd(gmp_pkstream *P, int fd, char *err, size_t errlen)
{
    if (!P)
        return GMP_ERR_ARG;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0) {
        if (err && errlen)
            snprintf(err, errlen, "cannot read the input: %s", strerror(errno));
        return GMP_ERR_IO;
    }
    P->fd = fd;
    P->size = (uint64_t)end;
    P->bufcap = INBUF;
    P->buf = malloc(P->bufcap);
    if (!P->buf) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return GMP_ERR_NOMEM;
    }
    P->mem += P->bufcap;
    return run(P, err, errlen);
}

gmp_err gmp_pkstream_run_mem(gmp_pkstream *P, const void *data, size_t n, char *err, size_t errlen)
{
    if (!P || (!data && n))
        return GMP_ERR_ARG;
    P->fd = -1;
    P->size = n;
    P->data = data ? data : (const void *)"";
    return run(P, err, errlen);
}

static void husk_now(gmp_pkstream *P, gmp_pkobj *o)
{
    if (!o || o->type < GMP_PK_LIST || !o->d.items || o->role)
        return;
    size_t k = o->type == GMP_PK_DICT ? 2 * (size_t)o->n : o->n;
    for (size_t i = 0; i < k; i++)
        unref(P, &o->d.items[i]);
    arr_free(P, o->d.items, o->type == GMP_PK_DICT ? 2 * (size_t)o->cap : o->cap);
    o->d.items = NULL;
    o->n = o->cap = 0;
    o->flags |= GMP_PKOBJ_HUSKED;
}

/* While a batch is read, husks wait for its release (a later item of the batch may refer to the
 * same container: it finds it whole, with its tag). A husk that cannot be recorded (out of memory)
 * is dropped: it only saves memory. */
void gmp_pkstream_husk(gmp_pkstream *P, gmp_pkobj *o)
{
    if (!P || !o)
        return;
    pk_batch *b = P->cur;
    if (!b) {
        husk_now(P, o);
        return;
    }
    if (b->hn == b->hcap) {
        size_t nc = b->hcap ? 2 * b->hcap : 64;
        gmp_pkobj **h = realloc(b->husks, nc * sizeof *h);
        if (!h)
            return;
        b->husks = h;
        b->hcap = nc;
    }
    b->husks[b->hn++] = o;
}

void gmp_pkstream_one_pass(gmp_pkstream *P, const char *keep_key, size_t budget)
{
    if (P) {
        P->sparse = 1;
        P->keep_key = keep_key;
        P->budget = budget;
    }
}

int gmp_pkstream_stopped_by_consumer(const gmp_pkstream *P)
{
    return P && P->consumer_stop;
}

const gmp_pkv *gmp_pkstream_root(const gmp_pkstream *P)
{
    return P && P->done && P->code == GMP_OK ? &P->result : NULL;
}

size_t gmp_pkstream_peak_memory(const gmp_pkstream *P)
{
    return P ? P->peak : 0;
}

void gmp_pkstream_times(const gmp_pkstream *P, double *scan_s, double *parse_s)
{
    if (scan_s)
        *scan_s = P ? P->scan_s : 0;
    if (parse_s)
        *parse_s = P ? P->parse_s : 0;
}

void gmp_pkstream_no_flat(gmp_pkstream *P)
{
    if (P)
        P->no_flat = 1;
}

size_t gmp_pkstream_flat_entries(const gmp_pkstream *P)
{
    return P ? P->nflat_total : 0;
}

void gmp_pkstream_free(gmp_pkstream *P)
{
    if (!P)
        return;
    unref(P, &P->result);
    drop_from(P, 0);
    for (size_t i = 0; i < P->nslots; i++) {
        slot_unref(P, &P->slots[i]);
    }
    if (P->root) {
        gmp_pkv r = {.type = P->root->type, .v.o = P->root};
        unref(P, &r);
    }
    free(P->bat.it);
    free(P->bat.pairs);
    free(P->bat.recs);
    free(P->bat.husks);
    free(P->stack);
    free(P->marks);
    free(P->cnt);
    free(P->mw);
    free(P->slots);
    free(P->defined);
    free(P->buf);
    slabs_free(P);
    free(P);
}

/* ---- accessors ---- */

const char *gmp_pkv_type_name(const gmp_pkv *v)
{
    switch (v ? v->type : GMP_PK_NONE) {
    case GMP_PK_NONE: return "None";
    case GMP_PK_BOOL: return "bool";
    case GMP_PK_INT: return "int";
    case GMP_PK_FLOAT: return "float";
    case GMP_PK_STR: return "str";
    case GMP_PK_BYTES: return "bytes";
    case GMP_PK_LIST: return "list";
    case GMP_PK_TUPLE: return "tuple";
    case GMP_PK_DICT: return "dict";
    }
    return "?";
}

const gmp_pkv *gmp_pkv_dict_get(const gmp_pkv *d, const char *key)
{
    if (!d || d->type != GMP_PK_DICT || !key)
        return NULL;
    size_t kl = strlen(key);
    const gmp_pkobj *o = d->v.o;
    const gmp_pkv *r = NULL;
    for (uint32_t i = 0; i < o->n; i++) {
        const gmp_pkv *k = &o->d.items[2 * (size_t)i];
        if (k->type == GMP_PK_STR && k->v.o->n == kl && memcmp(k->v.o->d.s, key, kl) == 0)
            r = &o->d.items[2 * (size_t)i + 1];
    }
    return r;
}

const gmp_pkv *gmp_pkv_item(const gmp_pkv *v, size_t i)
{
    if (!v || (v->type != GMP_PK_LIST && v->type != GMP_PK_TUPLE) || streams(v->v.o) ||
        i >= v->v.o->n)
        return NULL;
    return &v->v.o->d.items[i];
}

size_t gmp_pkv_len(const gmp_pkv *v)
{
    if (!v || (v->type != GMP_PK_LIST && v->type != GMP_PK_TUPLE && v->type != GMP_PK_DICT))
        return 0;
    return v->v.o->n;
}

int gmp_pkv_get_u64(const gmp_pkv *v, uint64_t *out)
{
    if (!v || (v->type != GMP_PK_INT && v->type != GMP_PK_BOOL))
        return -1;
    if (v->big) {
        *out = v->v.u;
        return 0;
    }
    if (v->v.i < 0)
        return -1;
    *out = (uint64_t)v->v.i;
    return 0;
}

int gmp_pkv_get_i64(const gmp_pkv *v, int64_t *out)
{
    if (!v || (v->type != GMP_PK_INT && v->type != GMP_PK_BOOL) || v->big)
        return -1;
    *out = v->v.i;
    return 0;
}

int gmp_pkv_get_bool(const gmp_pkv *v, int *out)
{
    if (!v || v->type != GMP_PK_BOOL)
        return -1;
    *out = v->v.i != 0;
    return 0;
}

const char *gmp_pkv_str(const gmp_pkv *v, size_t *len)
{
    if (!v || v->type != GMP_PK_STR)
        return NULL;
    if (len)
        *len = v->v.o->n;
    return v->v.o->d.s;
}

int gmp_pkv_str_eq(const gmp_pkv *v, const char *s)
{
    return v && v->type == GMP_PK_STR && str_eq_obj(v->v.o, s);
}
