/* gmp_writer: writes a gpumemprof trace (docs/trace-format.md) from many threads at once.
 *
 * Producers append event records to their own thread's buffer (gmp_wthread) under a per-thread lock
 * that only the writer ever contends for; whole buffers are compressed into independent zstd
 * frames. gmp_writer_open writes the first frame (magic and HEADER) itself, so that a file that
 * exists is always a readable trace; after that, in threaded mode, all compression and I/O happens
 * on the writer's own thread (created with every signal blocked), which wakes when a buffer fills
 * and every flush interval; producers never wait for I/O. Memory is bounded: when no buffer is
 * free, a producer waits at most wait_us, then counts the event as lost; the next LOST record says
 * how many. Definitions (strings, ranges, stacks, devices, threads, modules) are deduplicated and
 * always written before the events that refer to them. Without a thread (threaded = 0) the caller's
 * thread compresses and writes: for tools and importers. With store = 1 the frames are zstd frames
 * of Raw blocks (not compressed; any zstd reader reads them): for a temporary trace that the same
 * process reads back at once. */
#ifndef GMP_WRITER_H
#define GMP_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_trace.h"

typedef struct gmp_writer gmp_writer;
typedef struct gmp_wthread gmp_wthread;

#define GMP_WRITER_MAX_HELPERS 4

typedef struct gmp_writer_opts {
    size_t buffer_bytes;        /* per-thread buffer (default 64 KiB, at least 4 KiB) */
    size_t max_buffered_bytes;  /* all buffers together (default 64 MiB) */
    unsigned flush_interval_ms; /* periodic flush in threaded mode (default 200; 0: none) */
    unsigned wait_us;           /* producer wait for a free buffer before losing (default 2000) */
    int level;                  /* zstd level (default 1: the writer thread must keep up) */
    int threaded;               /* default 1 */
    uint64_t sync_lag_ns;       /* threaded: SYNC records promise only what is older than this
                                   (for producers that add events with past times, e.g. activity
                                   records delivered up to a flush interval late); default 0 */
    int compress_async;         /* unthreaded (importers): frames are compressed and written on this
                                   many helper threads (at most GMP_WRITER_MAX_HELPERS) while the caller
                                   stages the next ones; the file is the same. Default 0: none */
    int store;                  /* unthreaded: frames are written stored, not compressed (zstd
                                   frames of Raw blocks, with their content checksum: any zstd
                                   reader reads them; level is ignored; compress_async: their
                                   checksums and writes are done on the helpers). For
                                   a temporary trace read back at once by the same process, where
                                   compressing and decompressing cost more than the bytes saved.
                                   Default 0 */
    struct gmp_tq *queue;       /* unthreaded: frames go to this queue (gmp_tq.h) instead of a file
                                   (gmp_writer_open's fd is then -1), unframed: for a reader of
                                   this process (gmp_reader_open_queue). store is implied and
                                   compress_async ignored; gmp_writer_close closes the queue's
                                   writing side (the caller keeps its reference). Default NULL */
} gmp_writer_opts;

typedef struct gmp_writer_stats {
    uint64_t events;        /* event records accepted */
    uint64_t allocs, frees; /* among them */
    uint64_t lost;          /* events lost, all reasons */
    uint64_t bytes_raw;     /* uncompressed bytes handed to zstd */
    uint64_t bytes_written; /* bytes written to the file */
    uint64_t frames;
    int io_errno; /* errno of the first failed write, 0 if none */
} gmp_writer_stats;

void gmp_writer_opts_default(gmp_writer_opts *o);

/* Starts a trace on fd (the writer owns fd from now on and closes it), or into o->queue (fd -1).
 * Writes the magic and h. */
gmp_err gmp_writer_open(gmp_writer **out, int fd, const gmp_writer_opts *o,
                        const gmp_rec_header *h);

/* Definitions. Thread-safe; the same value always gets the same id; 0 means failure (out of
 * memory or a bound reached): refer to "unknown" then. */
uint32_t gmp_writer_string(gmp_writer *w, const char *s, size_t n);
uint32_t gmp_writer_range(gmp_writer *w, uint32_t parent, uint32_t domain, uint32_t name);
uint32_t gmp_writer_stack_native(gmp_writer *w, uint32_t parent, uint64_t address);
uint32_t gmp_writer_stack_python(gmp_writer *w, uint32_t parent, uint32_t file, uint32_t function,
                                 uint32_t line);
/* gmp_writer_stack_python for a caller that knows this node was never defined (an importer that
 * deduplicates its frames itself, and is the only one to define stacks): no lookup. The node is
 * not found by later calls of gmp_writer_stack_python either. */
uint32_t gmp_writer_stack_python_new(gmp_writer *w, uint32_t parent, uint32_t file,
                                     uint32_t function, uint32_t line);
/* The display form of a range path defined with gmp_writer_range ("train/step/forward"), for
 * messages of the producer itself. Slow (scans the tables): not for hot paths. Writes at most n
 * bytes including the NUL; "" for an unknown id. */
void gmp_writer_range_path(gmp_writer *w, uint32_t range, char *buf, size_t n);

/* The node id of a stack defined with gmp_writer_stack_native or gmp_writer_stack_python, for
 * the producer itself (the agent's own reports): its parent and frame in *out; for a Python
 * frame, the file and function names in file and function (cut to their sizes, NUL-terminated).
 * O(1) under the definitions' lock. 0, or -1 for an unknown id. */
int gmp_writer_stack_node(gmp_writer *w, uint32_t id, gmp_rec_stack *out, char *file,
                          size_t filelen, char *function, size_t funclen);

/* DEVICE, THREAD or MODULE records, written as given (no deduplication). */
gmp_err gmp_writer_define(gmp_writer *w, const gmp_rec *def);

/* The producer handle of one thread; the caller keeps it (thread-local) and uses it from that
 * thread only. gmp_wthread_release hands what is left to the writer when the thread ends. */
gmp_wthread *gmp_writer_thread(gmp_writer *w, uint32_t tid);
void gmp_wthread_release(gmp_wthread *t);

/* Appends an event. ev->time_ns == 0 means "now" (the trace clock read under the buffer lock,
 * which is what makes SYNC exact); ev->tid is ignored. Returns 0 when written, -1 when lost. */
int gmp_wthread_event(gmp_wthread *t, gmp_rec *ev);

/* Counts events lost elsewhere (for example records CUPTI dropped); written as a LOST record. */
void gmp_writer_lost(gmp_writer *w, uint64_t count, unsigned reason);

/* Writes everything appended so far. Threaded: asks the writer thread and waits for it at most
 * timeout_ms. Returns GMP_ERR_IO when the file can no longer be written. */
gmp_err gmp_writer_flush(gmp_writer *w, unsigned timeout_ms);

/* Writes a SYNC record for time_ns: the caller promises that no event written later has an earlier
 * time. For callers that supply their own times (importers); in threaded mode the writer thread
 * writes SYNC records itself at every flush. */
void gmp_writer_sync(gmp_writer *w, uint64_t time_ns);

/* Writes what is pending, the END record, stops the writer thread and closes the file, but keeps
 * the memory: producers that still hold a gmp_wthread get -1 from then on instead of touching
 * freed memory (for the agent, whose other threads may run on during exit). Once only; stats_out
 * may be NULL. Returns GMP_ERR_IO when some of the trace could not be written. */
gmp_err gmp_writer_finish(gmp_writer *w, gmp_writer_stats *stats_out);

/* gmp_writer_finish (unless done already), then frees everything. Only when no thread can call
 * gmp_wthread_event any more. */
gmp_err gmp_writer_close(gmp_writer *w, gmp_writer_stats *stats_out);

/* In a child after fork(): stop using w without writing, locking or freeing anything the parent
 * owns (the writer thread does not exist in the child). */
void gmp_writer_forget_after_fork(gmp_writer *w);

void gmp_writer_get_stats(gmp_writer *w, gmp_writer_stats *out);

/* Writes data[0..n) to fd as one stored zstd frame: Raw blocks of at most 128 KiB, the content
 * size and its checksum (what o.store writes for each frame). 0 when written, -1 with errno. */
int gmp_writer_stored_frame(int fd, const void *data, size_t n);

#endif
