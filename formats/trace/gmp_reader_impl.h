/* gmp_reader_impl: the reader's state (private to formats/trace/gmp_reader.c and gmp_reader_ra.c;
 * the interface is gmp_reader.h, which is to be included before this header): the definitions'
 * arena and id tables, the reorder window, the reader itself, and the few functions both files
 * use. gmp_reader_ra.c uses gmp_reader.c; gmp_reader.c reaches it only through the functions in
 * r->ra_ops (tests/arch/check_deps.py allows no cycle between the two). */
#ifndef GMP_READER_IMPL_H
#define GMP_READER_IMPL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "gmp_readahead.h"
#include "gmp_tq.h"

/* How far ahead of the event returned the reorder window's slots are prefetched (farther than
 * callers look ahead with gmp_reader_peek_mem). */
#define SLOT_AHEAD 24

/* ---- arena: stable storage for definitions, freed at close ---- */

typedef struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_blk;

typedef struct arena {
    arena_blk *head;
} arena;

/* ---- id tables: id -> definition, dense for ids near the count, hashed beyond ---- */

typedef struct hslot {
    uint32_t key, val; /* val 0: empty */
} hslot;

typedef struct deftab {
    uint32_t *dense; /* dense[id] = index + 1, 0 when undefined */
    size_t dense_cap;
    hslot *hash;
    size_t hcap, hcount;
    void **items; /* definition order */
    size_t n, cap;
} deftab;

static inline void deftab_free(deftab *t)
{
    free(t->dense);
    free(t->hash);
    free(t->items);
}

/* ---- the reorder window ---- */

typedef union ev_payload {
    gmp_rec_range_ev rev;
    gmp_rec_mem mem;
    gmp_rec_oom oom;
    gmp_rec_pool pool;
    gmp_rec_sample sample;
    gmp_rec_resource resource;
    gmp_rec_alert alert;
    gmp_rec_notice notice; /* the message is a malloc'd copy owned by the slot */
    gmp_rec_lost lost;
    gmp_rec_end end;
} ev_payload;

typedef struct wslot {
    uint64_t time;
    uint32_t tid, type;
    ev_payload u;
} wslot;

typedef struct wkey {
    uint64_t time;
    uint64_t slot;
} wkey;

/* The read-ahead's side of the reader (gmp_reader_ra.c): start it (it may not start: r->ra stays
 * NULL), take the next record from it, end it (the decoder's state comes back). */
typedef struct gmp_reader_ra_ops {
    void (*begin)(gmp_reader *r);
    gmp_err (*next)(gmp_reader *r, const gmp_rec **rec);
    void (*end)(gmp_reader *r);
} gmp_reader_ra_ops;

/* ---- the reader ---- */

struct gmp_reader {
    int file_order;
    size_t max_window;

    /* input: bytes in[ipos..ilen) are buffered; in_off is the file offset of in[ipos] */
    int fd; /* -1 over memory */
    const uint8_t *in;
    uint8_t *ibuf; /* file mode: owned buffer (in == ibuf) */
    size_t icap, ipos, ilen;
    uint64_t in_off;
    int in_eof;
    gmp_tq *q; /* frames from a writer of this process instead (gmp_reader_open_queue) */

    ZSTD_DCtx *dctx;
    uint8_t *fbuf; /* the current frame, decompressed */
    size_t fcap, flen, fpos;
    uint64_t frame_off; /* file offset of the current frame */
    uint64_t good_end;  /* file offset just after the last whole frame */
    int in_buffer;      /* a BUFFER record was read in this frame */
    uint32_t cur_tid;
    uint64_t prev_ns;
    int eof;      /* no more frames */
    int draining; /* an error is pending: the window is being returned first */
    int header_pending;

    gmp_err err;
    char msg[512];

    arena ar;
    gmp_rec_header header;
    deftab strings, stacks, ranges, modules, devices, threads;

    /* window */
    wslot *slots; /* appended in file order; type 0 once returned */
    size_t slots_n, slots_cap;
    uint32_t *remap; /* scratch for compacting slots (remap_cap entries) */
    size_t remap_cap;
    wkey *keys, *tmp;
    size_t keys_n, keys_cap, sorted_n;
    size_t rel_pos, rel_n; /* keys[rel_pos..rel_n) are being returned */
    uint64_t watermark;    /* the latest time returned in order */
    char *notice_out;      /* message of the NOTICE returned last (freed at the next call) */

    /* counts for completeness (file order; frozen at END) */
    uint64_t ev_read, allocs_read, frees_read;
    uint64_t end_ev, end_allocs, end_frees, end_lost;
    uint64_t lost_by_reason[6];

    uint8_t cls[256]; /* CLS_* of each type byte */
    gmp_reader_stats stats;
    gmp_rec dec; /* the record being decoded */
    gmp_rec out; /* the record returned */

    /* read-ahead (gmp_reader_readahead): while ra runs, a decoder of its own (a copy of this
     * reader that took over the input, the frame and the window) reads in another thread; this
     * reader keeps the definitions returned so far, for the lookups, and its arena */
    gmp_ra *ra;
    size_t ra_batch;                        /* wanted: records per chunk; 0: off */
    gmp_ra_window *rwin;                    /* the window being returned (this reader's side) */
    size_t rwin_pos;                        /* its next event */
    gmp_ra *pkg_ra;                         /* the decoder's side: where released windows go */
    const struct gmp_reader_ra_ops *ra_ops; /* gmp_reader_ra.c (set with ra_batch) */
};

/* Record classes by type byte. */
enum { CLS_UNKNOWN = 0, CLS_UNKNOWN_EVENT, CLS_DEF, CLS_FRAMING, CLS_EVENT };

static inline gmp_err fail(gmp_reader *r, gmp_err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline gmp_err fail(gmp_reader *r, gmp_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    r->err = e;
    return e;
}

static inline gmp_err nomem(gmp_reader *r)
{
    return fail(r, GMP_ERR_NOMEM, "out of memory reading the trace");
}

static inline void emit(gmp_reader *r, const wslot *s)
{
    r->out.type = s->type;
    r->out.time_ns = s->time;
    r->out.tid = s->tid;
    memcpy(&r->out.u, &s->u, sizeof s->u);
    if (s->type == GMP_REC_NOTICE)
        r->notice_out = (char *)s->u.notice.message.ptr;
}

/* Defines r->dec, a definition the read-ahead's decoder validated, in r (gmp_reader.c). */
gmp_err gmp_reader_define_decoded(gmp_reader *r);

#endif
