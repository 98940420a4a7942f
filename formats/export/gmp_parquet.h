/* gmp_parquet: a small writer of Apache Parquet files (the subset `convert --parquet` needs),
 * written from the specification (github.com/apache/parquet-format: src/main/thrift/parquet.thrift
 * for the metadata, Encodings.md for the encodings); no Parquet library is packaged in Debian 12.
 *
 * A file is flat (a root and one primitive column per field): INT32, INT64, BOOLEAN and UTF-8
 * strings (BYTE_ARRAY with the STRING logical type), each REQUIRED or OPTIONAL (definition levels
 * 0/1, RLE/bit-packed hybrid). Values are PLAIN encoded, or dictionary encoded (a PLAIN dictionary
 * page, then RLE_DICTIONARY data pages) for the columns that ask for it while a row group's
 * dictionary stays small (else that column chunk falls back to PLAIN). Data pages are v1 and
 * compressed with zstd. Every column chunk carries statistics: null_count, and min_value/max_value
 * (signed order for integers, unsigned bytes for strings, false < true; column_orders says
 * TYPE_ORDER) when there is a value (strings over 256 bytes leave min/max out).
 *
 * Rows are added one value per column (in the order of the columns), then gmp_pq_row. Memory is
 * bounded: the rows of the current row group are kept (encoded) until they reach a size limit,
 * then the row group is compressed and written; only its metadata (a few hundred bytes per column)
 * stays until the footer. Strings are untrusted bytes: an invalid UTF-8 byte is written as the
 * character of its Latin-1 reading (as the JSON outputs do), and a string is cut (at a character)
 * after GMP_PQ_MAX_STRING bytes. Errors are sticky: gmp_pq_close reports the first. */
#ifndef GMP_PARQUET_H
#define GMP_PARQUET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gmp_error.h"

#define GMP_PQ_MAX_STRING (64u * 1024) /* bytes kept of one string value */

typedef enum gmp_pq_type {
    GMP_PQ_BOOL,
    GMP_PQ_INT32,
    GMP_PQ_INT64,
    GMP_PQ_STRING,
} gmp_pq_type;

typedef struct gmp_pq_column {
    const char *name;
    gmp_pq_type type;
    int optional; /* may be null (gmp_pq_null) */
    int dict;     /* dictionary encoded (low-cardinality columns); not for BOOL */
} gmp_pq_column;

typedef struct gmp_pq_writer gmp_pq_writer;

typedef struct gmp_pq_opts {
    size_t row_group_bytes; /* encoded bytes buffered before a row group is written (default
                               32 MiB); the memory the writer holds grows with it */
    size_t page_values;     /* values per data page at most (default 65536) */
    int zstd_level;         /* default 3 */
    const char *created_by; /* FileMetaData.created_by: "gpumemprof version 0.1.0" */
    const char *const *kv;  /* key_value_metadata: key, value, key, value, ..., NULL */
} gmp_pq_opts;

/* Starts a file on f (which the caller opened for writing and closes after gmp_pq_close): writes
 * the magic "PAR1". cols (ncols >= 1) and the strings of opts must outlive the writer. NULL when
 * out of memory. */
gmp_pq_writer *gmp_pq_open(FILE *f, const gmp_pq_column *cols, size_t ncols,
                           const gmp_pq_opts *opts);

/* The values of one row, column by column in their order (a value of the wrong kind for its
 * column, or a null for a required one, is refused: the writer fails with GMP_ERR_ARG). */
void gmp_pq_i64(gmp_pq_writer *w, int64_t v);
void gmp_pq_i32(gmp_pq_writer *w, int32_t v);
void gmp_pq_bool(gmp_pq_writer *w, int v);
void gmp_pq_str(gmp_pq_writer *w, const char *s, size_t n);
static inline void gmp_pq_cstr(gmp_pq_writer *w, const char *s)
{
    size_t n = 0;
    while (s && s[n])
        n++;
    gmp_pq_str(w, s, n);
}
void gmp_pq_null(gmp_pq_writer *w);
/* Ends the row (every column had its value); writes a row group when the buffer is full. */
gmp_err gmp_pq_row(gmp_pq_writer *w);

uint64_t gmp_pq_rows(const gmp_pq_writer *w); /* rows ended so far */
/* the first error ("" when none) */
const char *gmp_pq_error(const gmp_pq_writer *w);

/* Writes the last row group and the footer (FileMetaData, its length, "PAR1") and frees w; GMP_OK
 * when every write succeeded (the caller still checks fclose), else the first error, with its
 * message in msg (when not NULL). */
gmp_err gmp_pq_close(gmp_pq_writer *w, char *msg, size_t msglen);
/* Frees w without writing anything more (after a failure). NULL is accepted. */
void gmp_pq_abort(gmp_pq_writer *w);

#endif
