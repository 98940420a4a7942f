/* gmp_codec: the byte encoding of one trace record (docs/trace-format.md, "Records").
 * Pure functions over memory: no allocation, no I/O. Every record is
 *     type (1 byte) | payload length (varint) | payload
 * and event payloads begin with the time as a zigzag varint delta from the previous event time of
 * the same BUFFER. Decoding validates lengths and field ranges; references between records (ids)
 * are checked by the reader, which knows what has been defined. */
#ifndef GMP_CODEC_H
#define GMP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_trace.h"

/* Upper bound of the encoded size of r (header included). */
size_t gmp_encode_bound(const gmp_rec *r);

/* Encodes r at dst (capacity cap). For events, the time is written as r->time_ns - *prev_ns and
 * *prev_ns becomes r->time_ns; for BUFFER, *prev_ns becomes its base time. Returns the number of
 * bytes written, or 0 when cap is too small or a field is out of range (nothing is written then).
 */
size_t gmp_encode(uint8_t *dst, size_t cap, const gmp_rec *r, uint64_t *prev_ns);

/* Decodes one record from src[0..n). On GMP_OK, *used is the record's full size and r holds it;
 * strings in r point into src. For a type this code does not know, r->type is set, the payload is
 * skipped and GMP_OK is returned (the caller decides what to do with it). For events, r->time_ns =
 * *prev_ns + delta and *prev_ns is updated; for BUFFER, *prev_ns becomes its base time.
 * Errors: GMP_ERR_TRUNCATED when src ends inside the record, GMP_ERR_FORMAT for a malformed one
 * (msg, if not NULL, then points at a static description). */
gmp_err gmp_decode(const uint8_t *src, size_t n, gmp_rec *r, uint64_t *prev_ns, size_t *used,
                   const char **msg);

/* LEB128 helpers, exposed for tests and for other formats of the project. */
size_t gmp_put_uvarint(uint8_t *dst, uint64_t v); /* writes 1..10 bytes */
size_t gmp_uvarint_len(uint64_t v);
/* Returns bytes read (1..10), or 0 when src ends first or the varint is over-long. Inline: the
 * reader calls it for every field. */
static inline size_t gmp_get_uvarint(const uint8_t *src, size_t n, uint64_t *v)
{
    if (n && src[0] < 0x80) { /* one byte: the common case */
        *v = src[0];
        return 1;
    }
    uint64_t r = 0;
    for (size_t i = 0; i < n && i < 10; i++) {
        uint8_t b = src[i];
        if (i == 9 && b > 1)
            return 0; /* more than 64 bits */
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            return i + 1;
        }
    }
    return 0;
}
static inline uint64_t gmp_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t gmp_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif
