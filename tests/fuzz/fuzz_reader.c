/* libFuzzer target for gmp_reader: every byte of a trace is untrusted.
 *
 * Two input modes, chosen by the first byte:
 *  - 0x00: "records" mode. data[1] picks the reorder window; the rest is split at each "FRME" into
 *    chunks, and each chunk is compressed into one valid zstd frame (with its checksum). This takes
 *    the fuzzer past zstd's checksums into record decoding, validation and the merge.
 *  - anything else: the bytes are the trace file itself (zstd framing, cut files, skippable
 * frames). Each input is read in time order and in file order; the lookups are called on what was
 * read; each read is done twice, with and without read-ahead (gmp_reader_readahead), and what the
 * caller saw must be the same (abort otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "gmp_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads the input once; returns what the caller saw (the records, what the lookups answered, the
 * end and the reader's verdict) folded into a sum, to compare a read with read-ahead (ra_batch
 * records per chunk) with one without. */
static size_t exercise(const uint8_t *data, size_t size, int file_order, size_t window,
                       size_t ra_batch)
{
    gmp_reader_opts o = {file_order, window};
    gmp_reader *r = NULL;
    if (gmp_reader_open_mem(&r, data, size, &o) != GMP_OK) {
        volatile size_t n = strlen(gmp_reader_open_error());
        (void)n;
        return 0;
    }
    if (ra_batch && gmp_reader_readahead(r, ra_batch) != GMP_OK)
        abort();
    const gmp_rec *rec;
    char path[64];
    size_t sink = 0;
    gmp_err e;
    while ((e = gmp_reader_next(r, &rec)) == GMP_OK) {
        sink = sink * 31 + rec->type + (size_t)rec->time_ns + rec->tid;
        if (gmp_rec_is_event(rec->type) && rec->type != GMP_REC_NOTICE)
            for (size_t i = 0; i < sizeof rec->u.mem; i++) /* every event payload fits in mem's */
                sink = sink * 3 + ((const unsigned char *)&rec->u)[i];
        switch (rec->type) {
        case GMP_REC_ALLOC:
        case GMP_REC_FREE:
            sink += gmp_reader_string(r, rec->u.mem.api).len;
            sink += gmp_reader_range_path(r, rec->u.mem.range, path, sizeof path);
            sink += gmp_reader_stack(r, rec->u.mem.stack) != NULL;
            break;
        case GMP_REC_RANGE:
            sink += gmp_reader_range_path(r, rec->u.range.id, path, 1 + rec->u.range.id % 40);
            break;
        case GMP_REC_STACK: {
            const gmp_rec_stack *s = gmp_reader_stack(r, rec->u.stack.id);
            while (s && sink < 100000) {
                sink++;
                s = gmp_reader_stack(r, s->parent);
            }
            break;
        }
        case GMP_REC_NOTICE:
            for (uint32_t i = 0; i < rec->u.notice.message.len; i++)
                sink += (unsigned char)rec->u.notice.message.ptr[i];
            break;
        case GMP_REC_DEVICE: sink += gmp_reader_device(r, rec->u.device.id) != NULL; break;
        case GMP_REC_THREAD: sink += gmp_reader_thread(r, rec->u.thread.tid)->name.len; break;
        case GMP_REC_MODULE: sink += gmp_reader_module(r, rec->u.module.id)->path.len; break;
        case GMP_REC_STRING:
            sink += gmp_reader_string(r, rec->u.string.id).ptr[rec->u.string.value.len] == 0;
            break;
        default: break;
        }
    }
    for (size_t i = 0; i < gmp_reader_device_count(r); i++)
        sink += gmp_reader_device_at(r, i)->name.len;
    for (size_t i = 0; i < gmp_reader_module_count(r); i++)
        sink += gmp_reader_module_at(r, i)->build_id.len;
    char line[512];
    sink += (size_t)gmp_reader_completeness(r, line, sizeof line) + (size_t)(e + 100);
    for (const char *c = line; *c; c++)
        sink = sink * 7 + (unsigned char)*c;
    for (const char *c = gmp_reader_error(r); *c; c++)
        sink = sink * 7 + (unsigned char)*c;
    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    sink += st->events + st->late_events * 3 + st->bytes_read * 5 + st->frames * 7;
    sink += gmp_reader_header(r)->producer.len;
    gmp_reader_close(r);
    return sink;
}

/* Read-ahead must not change anything a caller sees. */
static void exercise_both(const uint8_t *data, size_t size, int file_order, size_t window)
{
    size_t a = exercise(data, size, file_order, window, 0);
    size_t b = exercise(data, size, file_order, window, 1 + size % 5);
    if (a != b)
        abort();
}

/* Records mode: builds a trace of valid frames from the chunks. */
static void records_mode(const uint8_t *data, size_t size)
{
    static ZSTD_CCtx *cc;
    if (!cc) {
        cc = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    }
    size_t window = size > 1 ? data[1] % 16 : 0; /* 0: default */
    const uint8_t *p = size > 2 ? data + 2 : data + size, *end = data + size;
    size_t cap = ZSTD_compressBound(size) + 64 * (size / 4 + 1), len = 0;
    uint8_t *file = malloc(cap);
    if (!file)
        return;
    for (;;) {
        const uint8_t *q = p;
        while (q + 4 <= end && memcmp(q, "FRME", 4))
            q++;
        if (q + 4 > end)
            q = end;
        size_t n = ZSTD_compress2(cc, file + len, cap - len, p, (size_t)(q - p));
        if (ZSTD_isError(n))
            break;
        len += n;
        if (q == end)
            break;
        p = q + 4;
    }
    exercise_both(file, len, 0, window);
    exercise_both(file, len, 1, 0);
    free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 0 && data[0] == 0) {
        records_mode(data, size);
        return 0;
    }
    exercise_both(data, size, 0, size % 7);
    exercise_both(data, size, 1, 0);
    return 0;
}
