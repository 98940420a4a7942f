/* trace_build: see trace_build.h. */
#include "trace_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "gmp_codec.h"

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "trace_build: out of memory\n");
        abort();
    }
    return q;
}

static void grow(uint8_t **p, size_t *cap, size_t len, size_t extra)
{
    if (*cap - len >= extra)
        return;
    size_t nc = *cap ? *cap : 4096;
    while (nc - len < extra)
        nc *= 2;
    *p = xrealloc(*p, nc);
    *cap = nc;
}

void tb_init(tb *b)
{
    memset(b, 0, sizeof *b);
    b->level = 1;
}

void tb_free(tb *b)
{
    free(b->file);
    free(b->raw);
    free(b->frame_end);
    memset(b, 0, sizeof *b);
}

gmp_rec tb_header(void)
{
    static const char cmd[] = "python\0train.py\0--epochs=1";
    gmp_rec h;
    memset(&h, 0, sizeof h);
    h.type = GMP_REC_HEADER;
    h.u.header.format_version = GMP_FORMAT_VERSION;
    h.u.header.min_reader_version = GMP_FORMAT_MIN_READER;
    h.u.header.producer = (gmp_str){"gpumemprof test", 15};
    h.u.header.pid = 4242;
    h.u.header.ppid = 1;
    h.u.header.hostname = (gmp_str){"node-7", 6};
    h.u.header.cmdline = (gmp_str){cmd, sizeof cmd - 1};
    h.u.header.rank = -1;
    h.u.header.start_wall_ns = 1700000000000000000ull;
    h.u.header.start_trace_ns = 1000;
    h.u.header.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    h.u.header.options = (gmp_str){"stacks=1 python=0", 17};
    h.u.header.local_rank = -1;
    return h;
}

void tb_raw(tb *b, const void *p, size_t n)
{
    grow(&b->raw, &b->rcap, b->rlen, n);
    if (n)
        memcpy(b->raw + b->rlen, p, n);
    b->rlen += n;
}

void tb_rec(tb *b, const gmp_rec *r)
{
    size_t bound = gmp_encode_bound(r);
    grow(&b->raw, &b->rcap, b->rlen, bound);
    size_t n = gmp_encode(b->raw + b->rlen, bound, r, &b->prev_ns);
    if (!n) {
        fprintf(stderr, "trace_build: cannot encode a record of type 0x%02x\n", r->type);
        abort();
    }
    b->rlen += n;
}

void tb_start(tb *b, const gmp_rec *h)
{
    gmp_rec dh = tb_header();
    tb_raw(b, GMP_TRACE_MAGIC, GMP_TRACE_MAGIC_LEN);
    tb_rec(b, h ? h : &dh);
}

void tb_buffer(tb *b, uint32_t tid, uint64_t base_ns)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_BUFFER;
    r.u.buffer.tid = tid;
    r.u.buffer.base_ns = base_ns;
    tb_rec(b, &r);
}

void tb_sync(tb *b, uint64_t t)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_SYNC;
    r.u.sync.time_ns = t;
    tb_rec(b, &r);
}

void tb_string(tb *b, uint32_t id, const char *s)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_STRING;
    r.u.string.id = id;
    r.u.string.value.ptr = s;
    r.u.string.value.len = (uint32_t)strlen(s);
    tb_rec(b, &r);
}

void tb_frame(tb *b)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, b->level);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, b->no_checksum ? 0 : 1);
    size_t bound = ZSTD_compressBound(b->rlen);
    grow(&b->file, &b->cap, b->len, bound);
    size_t n;
    if (b->no_content_size) {
        /* streamed in two steps: the frame header cannot know the size */
        ZSTD_outBuffer out = {b->file + b->len, bound, 0};
        ZSTD_inBuffer in = {b->raw, b->rlen / 2, 0};
        n = ZSTD_compressStream2(c, &out, &in, ZSTD_e_flush);
        in.size = b->rlen;
        do
            n = ZSTD_isError(n) ? n : ZSTD_compressStream2(c, &out, &in, ZSTD_e_end);
        while (!ZSTD_isError(n) && n != 0);
        if (!ZSTD_isError(n))
            n = out.pos;
    } else {
        n = ZSTD_compress2(c, b->file + b->len, bound, b->raw, b->rlen);
    }
    ZSTD_freeCCtx(c);
    if (ZSTD_isError(n)) {
        fprintf(stderr, "trace_build: %s\n", ZSTD_getErrorName(n));
        abort();
    }
    b->len += n;
    b->rlen = 0;
    if (b->nframes == b->fcap) {
        b->fcap = b->fcap ? 2 * b->fcap : 16;
        b->frame_end = xrealloc(b->frame_end, b->fcap * sizeof *b->frame_end);
    }
    b->frame_end[b->nframes++] = b->len;
}

void tb_file_bytes(tb *b, const void *p, size_t n)
{
    grow(&b->file, &b->cap, b->len, n);
    if (n)
        memcpy(b->file + b->len, p, n);
    b->len += n;
}

int tb_write(const tb *b, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(b->file, 1, b->len, f);
    return (fclose(f) == 0 && w == b->len) ? 0 : -1;
}

/* ---- comparison ---- */

static int str_eq(gmp_str a, gmp_str b)
{
    return a.len == b.len && (!a.len || memcmp(a.ptr, b.ptr, a.len) == 0);
}

#define FIELD(f)                                                                                   \
    do {                                                                                           \
        if (a->f != b->f) {                                                                        \
            fprintf(stderr, "record 0x%02x: %s differs: %llu != %llu\n", a->type, #f,              \
                    (unsigned long long)a->f, (unsigned long long)b->f);                           \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)
#define SFIELD(f)                                                                                  \
    do {                                                                                           \
        if (!str_eq(a->f, b->f)) {                                                                 \
            fprintf(stderr, "record 0x%02x: %s differs\n", a->type, #f);                           \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

int tb_rec_equal(const gmp_rec *a, const gmp_rec *b)
{
    FIELD(type);
    if (gmp_rec_is_event(a->type)) {
        FIELD(time_ns);
        FIELD(tid);
    }
    switch (a->type) {
    case GMP_REC_HEADER:
        FIELD(u.header.format_version);
        FIELD(u.header.min_reader_version);
        SFIELD(u.header.producer);
        FIELD(u.header.pid);
        FIELD(u.header.ppid);
        SFIELD(u.header.hostname);
        SFIELD(u.header.cmdline);
        FIELD(u.header.rank);
        FIELD(u.header.start_wall_ns);
        FIELD(u.header.start_trace_ns);
        SFIELD(u.header.clock);
        SFIELD(u.header.options);
        FIELD(u.header.local_rank);
        FIELD(u.header.world_size);
        SFIELD(u.header.rank_var);
        break;
    case GMP_REC_STRING:
        FIELD(u.string.id);
        SFIELD(u.string.value);
        break;
    case GMP_REC_DEVICE:
        FIELD(u.device.id);
        SFIELD(u.device.name);
        if (memcmp(a->u.device.uuid, b->u.device.uuid, 16)) {
            fprintf(stderr, "device uuid differs\n");
            return 0;
        }
        FIELD(u.device.total_bytes);
        FIELD(u.device.cc_major);
        FIELD(u.device.cc_minor);
        break;
    case GMP_REC_THREAD:
        FIELD(u.thread.tid);
        SFIELD(u.thread.name);
        break;
    case GMP_REC_MODULE:
        FIELD(u.module.id);
        SFIELD(u.module.path);
        FIELD(u.module.base);
        FIELD(u.module.lo);
        FIELD(u.module.size);
        SFIELD(u.module.build_id);
        break;
    case GMP_REC_STACK:
        FIELD(u.stack.id);
        FIELD(u.stack.parent);
        FIELD(u.stack.kind);
        if (a->u.stack.kind == GMP_FRAME_NATIVE) {
            FIELD(u.stack.address);
        } else {
            FIELD(u.stack.file);
            FIELD(u.stack.function);
            FIELD(u.stack.line);
        }
        break;
    case GMP_REC_RANGE:
        FIELD(u.range.id);
        FIELD(u.range.parent);
        FIELD(u.range.domain);
        FIELD(u.range.name);
        break;
    case GMP_REC_BUFFER:
        FIELD(u.buffer.tid);
        FIELD(u.buffer.base_ns);
        break;
    case GMP_REC_SYNC: FIELD(u.sync.time_ns); break;
    case GMP_REC_RANGE_PUSH:
    case GMP_REC_RANGE_POP:
    case GMP_REC_MARK: FIELD(u.rev.range); break;
    case GMP_REC_RANGE_START:
        FIELD(u.rev.handle);
        FIELD(u.rev.range);
        break;
    case GMP_REC_RANGE_END: FIELD(u.rev.handle); break;
    case GMP_REC_ALLOC:
    case GMP_REC_FREE:
        FIELD(u.mem.device);
        FIELD(u.mem.kind);
        FIELD(u.mem.flags);
        FIELD(u.mem.api);
        FIELD(u.mem.address);
        FIELD(u.mem.size);
        FIELD(u.mem.stream);
        FIELD(u.mem.stack);
        FIELD(u.mem.range);
        FIELD(u.mem.correlation);
        FIELD(u.mem.result);
        FIELD(u.mem.handle);
        break;
    case GMP_REC_OOM:
        FIELD(u.oom.device);
        FIELD(u.oom.api);
        FIELD(u.oom.requested);
        FIELD(u.oom.stack);
        FIELD(u.oom.range);
        FIELD(u.oom.result);
        FIELD(u.oom.free_bytes);
        break;
    case GMP_REC_POOL:
        FIELD(u.pool.device);
        FIELD(u.pool.op);
        FIELD(u.pool.pool);
        FIELD(u.pool.value);
        break;
    case GMP_REC_SAMPLE:
        FIELD(u.sample.device);
        FIELD(u.sample.free_bytes);
        FIELD(u.sample.total_bytes);
        FIELD(u.sample.process_used);
        break;
    case GMP_REC_RESOURCE:
        FIELD(u.resource.device);
        FIELD(u.resource.op);
        FIELD(u.resource.handle);
        break;
    case GMP_REC_ALERT:
        FIELD(u.alert.device);
        FIELD(u.alert.threshold);
        FIELD(u.alert.live_bytes);
        FIELD(u.alert.range);
        break;
    case GMP_REC_NOTICE:
        FIELD(u.notice.severity);
        SFIELD(u.notice.message);
        break;
    case GMP_REC_LOST:
        FIELD(u.lost.count);
        FIELD(u.lost.reason);
        break;
    case GMP_REC_END:
        FIELD(u.end.events);
        FIELD(u.end.allocs);
        FIELD(u.end.frees);
        FIELD(u.end.lost);
        break;
    default: break;
    }
    return 1;
}

/* ---- random records ---- */

uint64_t tb_rand(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A value with a random bit width, so that every varint length is exercised. */
static uint64_t rval(uint64_t *s)
{
    unsigned bits = (unsigned)(tb_rand(s) % 65);
    uint64_t v = tb_rand(s);
    return bits == 64 ? v : v & ((1ull << bits) - 1);
}

static uint32_t rid(uint64_t *s, uint32_t max_id)
{
    return max_id ? (uint32_t)(tb_rand(s) % (max_id + 1)) : 0;
}

static gmp_str rstr(uint64_t *s)
{
    static const char *const pool[] = {"",
                                       "cudaMalloc",
                                       "train/step",
                                       "x",
                                       "a string with \"quotes\" and \n newline",
                                       "\xff\xfe binary \0 bytes"};
    unsigned i = (unsigned)(tb_rand(s) % 6);
    gmp_str r = {pool[i], (uint32_t)strlen(pool[i])};
    if (i == 5)
        r.len = 18;
    return r;
}

void tb_random_rec(gmp_rec *r, unsigned type, uint64_t *s, uint32_t max_id)
{
    memset(r, 0, sizeof *r);
    r->type = type;
    int32_t dev = (int32_t)(tb_rand(s) % 9) - 1;
    switch (type) {
    case GMP_REC_STRING:
        r->u.string.id = 1 + (uint32_t)(tb_rand(s) % UINT32_MAX);
        r->u.string.value = rstr(s);
        break;
    case GMP_REC_DEVICE:
        r->u.device.id = (uint32_t)(tb_rand(s) % 8);
        r->u.device.name = rstr(s);
        for (int i = 0; i < 16; i++)
            r->u.device.uuid[i] = (uint8_t)tb_rand(s);
        r->u.device.total_bytes = rval(s);
        r->u.device.cc_major = (uint32_t)rval(s);
        r->u.device.cc_minor = (uint32_t)rval(s);
        break;
    case GMP_REC_THREAD:
        r->u.thread.tid = (uint32_t)rval(s);
        r->u.thread.name = rstr(s);
        break;
    case GMP_REC_MODULE:
        r->u.module.id = 1 + (uint32_t)(tb_rand(s) % UINT32_MAX);
        r->u.module.path = rstr(s);
        r->u.module.base = rval(s);
        r->u.module.lo = rval(s);
        r->u.module.size = rval(s);
        r->u.module.build_id = rstr(s);
        break;
    case GMP_REC_RANGE_PUSH:
    case GMP_REC_RANGE_POP:
    case GMP_REC_MARK: r->u.rev.range = rid(s, max_id); break;
    case GMP_REC_RANGE_START:
        r->u.rev.handle = rval(s);
        r->u.rev.range = rid(s, max_id);
        break;
    case GMP_REC_RANGE_END: r->u.rev.handle = rval(s); break;
    case GMP_REC_ALLOC:
    case GMP_REC_FREE:
        r->u.mem.device = dev;
        r->u.mem.kind = (uint32_t)(tb_rand(s) % GMP_MEM_KIND_COUNT);
        r->u.mem.flags = (uint32_t)(tb_rand(s) % 16);
        r->u.mem.api = rid(s, max_id);
        r->u.mem.address = rval(s);
        r->u.mem.size = rval(s);
        r->u.mem.stream = rval(s);
        r->u.mem.stack = rid(s, max_id);
        r->u.mem.range = rid(s, max_id);
        r->u.mem.correlation = rval(s);
        r->u.mem.result = (int32_t)(uint32_t)rval(s);
        r->u.mem.handle = rval(s);
        break;
    case GMP_REC_OOM:
        r->u.oom.device = dev;
        r->u.oom.api = rid(s, max_id);
        r->u.oom.requested = rval(s);
        r->u.oom.stack = rid(s, max_id);
        r->u.oom.range = rid(s, max_id);
        r->u.oom.result = (int32_t)(uint32_t)rval(s);
        r->u.oom.free_bytes = rval(s);
        break;
    case GMP_REC_POOL:
        r->u.pool.device = dev;
        r->u.pool.op = 1 + (uint32_t)(tb_rand(s) % 5);
        r->u.pool.pool = rval(s);
        r->u.pool.value = rval(s);
        break;
    case GMP_REC_SAMPLE:
        r->u.sample.device = dev;
        r->u.sample.free_bytes = rval(s);
        r->u.sample.total_bytes = rval(s);
        r->u.sample.process_used = rval(s);
        break;
    case GMP_REC_RESOURCE:
        r->u.resource.device = dev;
        r->u.resource.op = 1 + (uint32_t)(tb_rand(s) % 6);
        r->u.resource.handle = rval(s);
        break;
    case GMP_REC_ALERT:
        r->u.alert.device = dev;
        r->u.alert.threshold = rval(s);
        r->u.alert.live_bytes = rval(s);
        r->u.alert.range = rid(s, max_id);
        break;
    case GMP_REC_NOTICE:
        r->u.notice.severity = 1 + (uint32_t)(tb_rand(s) % 3);
        r->u.notice.message = rstr(s);
        break;
    case GMP_REC_LOST:
        r->u.lost.count = rval(s) >> 8;
        r->u.lost.reason = 1 + (uint32_t)(tb_rand(s) % 5);
        break;
    default: break;
    }
}

/* ---- reading ---- */

gmp_err tb_read_all(gmp_reader *r, tb_out *o)
{
    for (;;) {
        const gmp_rec *rec = NULL;
        gmp_err e = gmp_reader_next(r, &rec);
        if (e != GMP_OK)
            return e;
        if (o->n == o->cap) {
            o->cap = o->cap ? 2 * o->cap : 256;
            o->recs = xrealloc(o->recs, o->cap * sizeof *o->recs);
        }
        o->recs[o->n++] = *rec;
        if (rec->type == GMP_REC_NOTICE) {
            gmp_str *m = &o->recs[o->n - 1].u.notice.message;
            char *c = xrealloc(NULL, m->len + 1);
            if (m->len)
                memcpy(c, m->ptr, m->len);
            m->ptr = c;
            if (o->ns == o->scap) {
                o->scap = o->scap ? 2 * o->scap : 16;
                o->strs = xrealloc(o->strs, o->scap * sizeof *o->strs);
            }
            o->strs[o->ns++] = c;
        }
    }
}

void tb_out_free(tb_out *o)
{
    for (size_t i = 0; i < o->ns; i++)
        free(o->strs[i]);
    free(o->strs);
    free(o->recs);
    memset(o, 0, sizeof *o);
}

gmp_err tb_open(gmp_reader **r, const tb *b, size_t n, int file_order, size_t window)
{
    gmp_reader_opts o = {file_order, window};
    return gmp_reader_open_mem(r, b->file, n == SIZE_MAX ? b->len : n, &o);
}

uint8_t *tb_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    uint8_t *p = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (p) {
        rewind(f);
        if (fread(p, 1, (size_t)len, f) != (size_t)len) {
            free(p);
            p = NULL;
        }
    }
    fclose(f);
    *n = p ? (size_t)len : 0;
    return p;
}

uint8_t *tb_zstd_content(const uint8_t *f, size_t n, size_t *out_n, size_t *frames)
{
    size_t cap = 1, len = 0;
    uint8_t *out = malloc(cap);
    *frames = 0;
    for (size_t pos = 0; out && pos < n;) {
        size_t fs = ZSTD_findFrameCompressedSize(f + pos, n - pos);
        unsigned long long cs =
            ZSTD_isError(fs) ? ZSTD_CONTENTSIZE_ERROR : ZSTD_getFrameContentSize(f + pos, fs);
        if (cs == ZSTD_CONTENTSIZE_ERROR || cs == ZSTD_CONTENTSIZE_UNKNOWN)
            goto bad;
        if (len + cs + 1 > cap) {
            cap = len + (size_t)cs + 1;
            uint8_t *o = realloc(out, cap);
            if (!o)
                goto bad;
            out = o;
        }
        size_t got = ZSTD_decompress(out + len, (size_t)cs, f + pos, fs);
        if (ZSTD_isError(got) || got != cs)
            goto bad;
        len += got;
        pos += fs;
        (*frames)++;
    }
    *out_n = len;
    return out;
bad:
    free(out);
    return NULL;
}
