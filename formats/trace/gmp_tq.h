/* gmp_tq: a trace handed from a writer to a reader of the same process, frame by frame, with no
 * file between them.
 *
 * A trace made to be read at once by the process that makes it (`gpumemprof report` of a large
 * PyTorch snapshot: the importer writes it on a thread while the report reads it) went through a
 * pipe: each frame was checksummed and framed as zstd (stored), written, read back, unframed and
 * checked again. Here the writer (gmp_writer_opts.queue) hands over the frame's record bytes as
 * they are, in the buffer it staged them in, and the reader (gmp_reader_open_queue) decodes them
 * from that buffer: the records, their order and everything the reader makes of them are those of
 * the same trace written to a file; only the framing is left out.
 *
 * The queue holds at most max_bytes of frames (at least one frame): the writer waits while it is
 * full, the reader while it is empty. Either side may stop: after gmp_tq_close_write the reader
 * gets the end once the queue is empty; after gmp_tq_close_read the writer's puts fail (as writes
 * into a pipe with no reader). Thread-safe; reference counted (the creator holds one). */
#ifndef GMP_TQ_H
#define GMP_TQ_H

#include <stddef.h>
#include <stdint.h>

typedef struct gmp_tq gmp_tq;

/* A queue holding at most max_bytes of frames (0: 1 MiB); NULL when out of memory. */
gmp_tq *gmp_tq_new(size_t max_bytes);
void gmp_tq_ref(gmp_tq *q);
/* Drops a reference; the last one frees the queue and the frames still in it. */
void gmp_tq_unref(gmp_tq *q);

/* Writer: queues a frame, buf[0..len) of a malloc'd buffer of cap bytes, which the queue owns from
 * now on. Waits while the queue is full. 0; -1 when the reading side has closed, -2 when out of
 * memory (buf is freed then). */
int gmp_tq_put(gmp_tq *q, uint8_t *buf, size_t len, size_t cap);
/* Writer: no more frames. */
void gmp_tq_close_write(gmp_tq *q);

/* Reader: the next frame (the caller owns *buf, of *cap bytes, *len used, and frees it). Waits
 * while the queue is empty and the writer goes on. 1: a frame; 0: the end (the writer closed). */
int gmp_tq_get(gmp_tq *q, uint8_t **buf, size_t *len, size_t *cap);
/* Reader: stops reading; the frames queued are dropped and the writer's puts fail from now on. */
void gmp_tq_close_read(gmp_tq *q);

#endif
