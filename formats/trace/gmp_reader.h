/* gmp_reader: streaming reader of gpumemprof traces (docs/trace-format.md).
 *
 * Reads the file frame by frame: a frame's records are returned only once the whole frame has been
 * decompressed and its checksum verified, so a file cut at any byte yields exactly the records of
 * its whole frames. Every length, id and reference is validated; bad input gives an error code and
 * a message (gmp_reader_error), never a crash. Definitions are returned in file order as they are
 * read; events are merged across threads into one time order using the SYNC records (a bounded
 * reorder window). Memory grows with the number of distinct definitions and with the events of one
 * window (three with read-ahead), not with the length of the trace. */
#ifndef GMP_READER_H
#define GMP_READER_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_trace.h"

typedef struct gmp_reader gmp_reader;

typedef struct gmp_reader_opts {
    int file_order;           /* 1: return records in file order, framing records (BUFFER, SYNC)
                                 and unknown types included; 0 (default): merged time order */
    size_t max_window_events; /* reorder window bound; 0: default (4 Mi events) */
} gmp_reader_opts;

typedef struct gmp_reader_stats {
    uint64_t file_bytes;      /* size of the input when known, else 0 */
    uint64_t bytes_read;      /* compressed bytes of the whole frames decoded */
    uint64_t bytes_discarded; /* bytes after the last whole frame (a cut file) */
    uint64_t frames;          /* whole frames decoded (skippable frames included) */
    uint64_t records[256];    /* records read, by type byte (unknown types included) */
    uint64_t unknown_records; /* records of types this reader does not know */
    uint64_t events;          /* event records returned */
    uint64_t late_events;     /* events returned after a later time (producer broke SYNC order) */
    uint64_t lost_events;     /* sum of LOST record counts */
    int truncated;            /* the input ends inside a frame */
    int has_end;              /* an END record was read */
    gmp_rec_end end;          /* the END record's totals when has_end */
} gmp_reader_stats;

/* Opens a trace file. Reads and validates the magic and the HEADER record. */
gmp_err gmp_reader_open(gmp_reader **out, const char *path, const gmp_reader_opts *opts);
/* Same over memory; data must outlive the reader. */
gmp_err gmp_reader_open_mem(gmp_reader **out, const void *data, size_t n,
                            const gmp_reader_opts *opts);
/* Same over the frames a writer of this process puts into q (gmp_writer_opts.queue, gmp_tq.h):
 * waits for its first frame. The reader takes a reference to q and closes its reading side when
 * it is closed (the writer's puts then fail). The records are those of the trace written to a
 * file; file_bytes is 0 (as for a pipe) and bytes_read counts the frames' record bytes. */
struct gmp_tq;
gmp_err gmp_reader_open_queue(gmp_reader **out, struct gmp_tq *q, const gmp_reader_opts *opts);
void gmp_reader_close(gmp_reader *r);
/* Non-zero when the n bytes at head (the first bytes of a file, 4 are enough) can begin a trace: a
 * zstd frame or a zstd skippable frame. Only the framing is checked, so the reader may still refuse
 * the file (another zstd file has no GMPTRACE magic); other formats never pass. */
int gmp_reader_probe(const void *head, size_t n);

/* Last error message (with the byte offset where it applies); "" when none. Valid until the
 * next call. After a failed open, gmp_reader_open_error() gives the message instead. */
const char *gmp_reader_error(const gmp_reader *r);
const char *gmp_reader_open_error(void); /* thread-local; message of the last failed open */

/* The HEADER record (strings owned by the reader). */
const gmp_rec_header *gmp_reader_header(const gmp_reader *r);

/* Next record; the first one is the HEADER (as in the file; also gmp_reader_header()), and in
 * time order the events held in the reorder window are returned at each SYNC and at the end.
 * GMP_OK: *rec points at it (valid until the next call). GMP_END: no more records in
 * the readable part of the input (check gmp_reader_stats for a cut file). Errors: GMP_ERR_FORMAT,
 * GMP_ERR_VERSION, GMP_ERR_IO, GMP_ERR_NOMEM, GMP_ERR_LIMIT; the reader cannot continue after one.
 */
gmp_err gmp_reader_next(gmp_reader *r, const gmp_rec **rec);

/* Read-ahead: from the next call of gmp_reader_next on (once the HEADER has been returned), the
 * trace is read, decompressed, validated and put in time order by a second thread, so that what
 * the caller does with the records overlaps with reading them. The thread runs at most two
 * released parts of the reorder window (a SYNC interval each; one when they are large) and four
 * chunks of `batch` other records (definitions, late events, file order) ahead of the caller.
 * What gmp_reader_next returns, and what the lookups below answer, stay exactly as without it: a
 * definition becomes visible to the lookups when gmp_reader_next returns it. While the thread
 * runs, gmp_reader_get_stats is updated as the caller gets there (bytes_read, frames, events) and
 * is complete again once gmp_reader_next has returned GMP_END or an error. The thread ends there,
 * or at gmp_reader_close. batch: records per chunk (0: the size asked for before, else the
 * default); GMP_ERR_ARG above
 * GMP_READER_READAHEAD_MAX. When the thread cannot be started the reader goes on in the calling
 * thread. The reader is still to be used from one thread at a time. */
#define GMP_READER_READAHEAD_DEFAULT 1024
#define GMP_READER_READAHEAD_MAX ((size_t)1 << 20)
gmp_err gmp_reader_readahead(gmp_reader *r, size_t batch);

/* A look-ahead hint for callers that want to prefetch: the event `ahead` (>= 1) places after the
 * record gmp_reader_next returned last, when that event is already decoded and waiting in the
 * reorder window (with read-ahead: `ahead` records after it, within the batch being returned): its
 * type and its payload; 0 and NULL otherwise (not decoded yet, or file order). The pointer is
 * valid until the next call to gmp_reader_next. Reading it never changes what gmp_reader_next
 * returns. */
const void *gmp_reader_peek(const gmp_reader *r, size_t ahead, unsigned *type);

const gmp_reader_stats *gmp_reader_get_stats(const gmp_reader *r);

/* Writes one line that says whether the trace is complete and, if not, what is missing (cut file,
 * no END record, END totals that disagree, lost events). Returns 1 when complete, 0 otherwise.
 * Meaningful after gmp_reader_next returned GMP_END. */
int gmp_reader_completeness(const gmp_reader *r, char *buf, size_t n);

/* Lookups of definitions read so far; NULL (or an empty string) for an unknown id. Strings and
 * records returned here stay valid until gmp_reader_close. */
gmp_str gmp_reader_string(const gmp_reader *r, uint32_t id);
const gmp_rec_stack *gmp_reader_stack(const gmp_reader *r, uint32_t id);
const gmp_rec_range *gmp_reader_range(const gmp_reader *r, uint32_t id);
const gmp_rec_device *gmp_reader_device(const gmp_reader *r, uint32_t ordinal);
const gmp_rec_thread *gmp_reader_thread(const gmp_reader *r, uint32_t tid);
const gmp_rec_module *gmp_reader_module(const gmp_reader *r, uint32_t id);
/* Number of devices / modules defined so far, and the i-th of them (0-based, definition order). */
size_t gmp_reader_device_count(const gmp_reader *r);
const gmp_rec_device *gmp_reader_device_at(const gmp_reader *r, size_t i);
size_t gmp_reader_module_count(const gmp_reader *r);
const gmp_rec_module *gmp_reader_module_at(const gmp_reader *r, size_t i);

/* Dense numbers of definitions, for callers that keep something per stack node or string in an
 * array instead of a map: the id's place in definition order plus one (1 .. the count defined so
 * far; gmp_reader_stack_count for stacks), 0 for an id not defined (yet). */
uint32_t gmp_reader_stack_index(const gmp_reader *r, uint32_t id);
size_t gmp_reader_stack_count(const gmp_reader *r);
uint32_t gmp_reader_string_index(const gmp_reader *r, uint32_t id);

/* The range path of a RANGE id, names joined with "/" ("train/step/forward"). Writes at most n
 * bytes including the NUL; returns the full length. "" for id 0. */
size_t gmp_reader_range_path(const gmp_reader *r, uint32_t id, char *buf, size_t n);

/* ---- for tests and benchmarks: the product does not call these ---- */

/* gmp_reader_peek for ALLOC and FREE events only: their memory payload, NULL for any other event
 * or none to peek at (tests/formats/test_reader.c checks the look-ahead with it). */
const gmp_rec_mem *gmp_reader_peek_mem(const gmp_reader *r, size_t ahead);

#endif
