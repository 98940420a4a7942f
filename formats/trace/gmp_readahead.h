/* gmp_readahead: the reader's read-ahead thread (internal to gmp_reader; see
 * gmp_reader_readahead in gmp_reader.h).
 *
 * A second thread runs a decoder of its own (a gmp_reader that owns the input, the zstd context and
 * the reorder window): it reads, decompresses, validates and sorts while the caller's thread does
 * something with the records decoded before. What crosses between the threads is a queue of items,
 * in the order the records are to be returned:
 *  - windows: each time the decoder releases part of its reorder window (at a SYNC, when the window
 *    is full, at the end), it hands over the slot array itself with the released events' order,
 *    and goes on with another array; the caller's thread returns the events from it and gives it
 *    back. No event is copied on the way: copying them cost more than it saved (every line crossed
 *    between the cores, and a copy ring big enough to overlap a window pushed the working set out
 *    of the caches);
 *  - records, copied in chunks: everything the decoder returns at once (definitions, late events,
 *    records in file order, NOTICE messages included);
 *  - the decoder's final status (GMP_END or an error).
 * The layout of a window's slots is the reader's; this module only moves them. It knows the
 * decoder only through gmp_ra_source (the reader hands in its functions): the reader uses this
 * module, never the other way round. */
#ifndef GMP_READAHEAD_H
#define GMP_READAHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_trace.h"

typedef struct gmp_ra gmp_ra;

/* A released part of the decoder's reorder window: n events in the order to return them, as
 * indexes into an array of slots (the reader's wslot). Owned by whichever side holds it. */
typedef struct gmp_ra_window {
    void *slots;
    size_t slots_cap; /* in slots */
    uint32_t *order;
    size_t order_cap, n;
    size_t bytes; /* memory it holds, set by the decoder before gmp_ra_window_put */
} gmp_ra_window;

/* What the decoder had read when an item was queued (for progress while the thread runs). */
typedef struct gmp_ra_progress {
    uint64_t bytes_read, frames, events;
} gmp_ra_progress;

/* One item for the caller: a record (rec), or a window (win), or, with status != GMP_OK, the end.
 */
typedef struct gmp_ra_item {
    const gmp_rec *rec;
    gmp_ra_window *win;
    gmp_err status;
    gmp_ra_progress prog;
} gmp_ra_item;

/* What the thread runs: the decoder (a gmp_reader, opaque here) and its functions. */
typedef struct gmp_ra_source {
    void *dec;
    /* The next record, as gmp_reader_next; the record is valid until the next call. */
    gmp_err (*next)(void *dec, const gmp_rec **rec);
    /* What the decoder has read so far. */
    void (*progress)(void *dec, gmp_ra_progress *p);
} gmp_ra_source;

/* Creates the read-ahead over src->dec (which it owns until gmp_ra_finish); nothing runs yet.
 * batch: records per chunk (>= 1). NULL when out of memory. */
gmp_ra *gmp_ra_new(const gmp_ra_source *src, size_t batch);
/* Starts the thread. -1 when it cannot be started (then gmp_ra_finish gives dec back). */
int gmp_ra_run(gmp_ra *ra);

/* ---- the decoder's side (in the thread) ---- */

/* A window to fill (a free one, waiting for the caller to give one back if need be; its arrays
 * are whatever they were). NULL when the caller has asked the thread to stop. */
gmp_ra_window *gmp_ra_window_get(gmp_ra *ra);
/* Queues a window after the records queued before. */
void gmp_ra_window_put(gmp_ra *ra, gmp_ra_window *w, const gmp_ra_progress *prog);

/* ---- the caller's side ---- */

/* The next item. A record is valid until the next call; a window is the caller's until it gives
 * it back with gmp_ra_window_done (before the next call). After an item with a status, the thread
 * has ended and only gmp_ra_finish may be called. */
void gmp_ra_next(gmp_ra *ra, gmp_ra_item *it);
void gmp_ra_window_done(gmp_ra *ra, gmp_ra_window *w);

/* Stops the thread and gives the decoder back: a thread still reading stops at its next chunk or
 * window (it may finish decoding the window it is in). Windows still queued are passed to drop(w)
 * first (to free what their slots own); frees the rest. */
void *gmp_ra_finish(gmp_ra *ra, void (*drop)(gmp_ra_window *w));

#endif
