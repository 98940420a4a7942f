/* trace_build: builds gpumemprof traces in memory for the reader's tests and fuzz seeds.
 * Records (gmp_rec, encoded with gmp_encode) and raw bytes are appended to the current chunk;
 * tb_frame() compresses the chunk into one zstd frame (content checksum on) and appends it to the
 * file. Raw file bytes (skippable frames, garbage) can be appended between frames, so tests can
 * craft any valid or corrupt input. */
#ifndef TRACE_BUILD_H
#define TRACE_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_trace.h"

typedef struct tb {
    uint8_t *file; /* the trace file */
    size_t len, cap;
    uint8_t *raw; /* the chunk being built (decompressed bytes of the next frame) */
    size_t rlen, rcap;
    uint64_t prev_ns;  /* delta base of the current BUFFER */
    size_t *frame_end; /* file offset after each frame */
    size_t nframes, fcap;
    int level;           /* zstd level (default 1) */
    int no_checksum;     /* write frames without the checksum flag */
    int no_content_size; /* write frames that do not declare their decompressed size */
} tb;

void tb_init(tb *b);
void tb_free(tb *b);
/* A typical HEADER record (format 1, min reader 1). */
gmp_rec tb_header(void);
/* Appends the magic and h (the default header when NULL) to the chunk. */
void tb_start(tb *b, const gmp_rec *h);
/* Encodes r into the chunk; aborts when it cannot be encoded. */
void tb_rec(tb *b, const gmp_rec *r);
/* Shorthands. */
void tb_buffer(tb *b, uint32_t tid, uint64_t base_ns);
void tb_sync(tb *b, uint64_t t);
void tb_string(tb *b, uint32_t id, const char *s);
/* Raw bytes into the chunk. */
void tb_raw(tb *b, const void *p, size_t n);
/* Compresses the chunk into one frame (also when it is empty). */
void tb_frame(tb *b);
/* Raw bytes into the file, between frames. */
void tb_file_bytes(tb *b, const void *p, size_t n);
/* Writes the file; 0 on success. */
int tb_write(const tb *b, const char *path);

/* Compares two records field by field, strings by content; 1 when equal. On a difference,
 * prints what differs to stderr. */
int tb_rec_equal(const gmp_rec *a, const gmp_rec *b);
/* Fills r with a random record of the given type (ids in 1..max_id, strings from a fixed set). */
void tb_random_rec(gmp_rec *r, unsigned type, uint64_t *rng, uint32_t max_id);
uint64_t tb_rand(uint64_t *state);

/* Reading helpers for tests (need gmp_reader). */
#include "gmp_reader.h"

typedef struct tb_out {
    gmp_rec *recs; /* copies; definitions' strings stay valid until the reader is closed, event
                      strings (NOTICE) are copied into strs */
    size_t n, cap;
    char **strs;
    size_t ns, scap;
} tb_out;

/* Reads every record until GMP_END or an error; returns the last gmp_reader_next result. */
gmp_err tb_read_all(gmp_reader *r, tb_out *o);
void tb_out_free(tb_out *o);
/* Opens b's file (first n bytes; all when n == SIZE_MAX) over memory. */
gmp_err tb_open(gmp_reader **r, const tb *b, size_t n, int file_order, size_t window);

/* The whole file at path (malloc'd, *n bytes); NULL when it cannot be read. */
uint8_t *tb_read_file(const char *path, size_t *n);
/* The content of every zstd frame of f[0..n) concatenated (malloc'd, *out_n bytes), decoded by
 * libzstd's one-shot decoder, an outside decoder that verifies each frame's content checksum;
 * *frames counts them. NULL for a frame libzstd refuses, or one without its content size. */
uint8_t *tb_zstd_content(const uint8_t *f, size_t n, size_t *out_n, size_t *frames);
#endif
