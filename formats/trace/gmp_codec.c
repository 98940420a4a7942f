#include "gmp_codec.h"

#include <string.h>

size_t gmp_uvarint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

size_t gmp_put_uvarint(uint8_t *dst, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        dst[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (uint8_t)v;
    return n;
}

/* ---- encoding ---- */

typedef struct enc {
    uint8_t *p, *end;
    int bad;
} enc;

static inline void put_u(enc *e, uint64_t v)
{
    /* 10 bytes is the longest varint: one comparison instead of measuring v first */
    if (e->bad || (size_t)(e->end - e->p) < 10) {
        if (e->bad || (size_t)(e->end - e->p) < gmp_uvarint_len(v)) {
            e->bad = 1;
            return;
        }
    }
    uint8_t *p = e->p;
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    e->p = p;
}

static void put_s(enc *e, int64_t v)
{
    put_u(e, gmp_zigzag(v));
}

static void put_bytes(enc *e, const void *b, size_t n)
{
    if (e->bad || (size_t)(e->end - e->p) < n) {
        e->bad = 1;
        return;
    }
    if (n)
        memcpy(e->p, b, n);
    e->p += n;
}

static void put_str(enc *e, gmp_str s)
{
    if (s.len > GMP_MAX_STRING_BYTES || (s.len && !s.ptr)) {
        e->bad = 1;
        return;
    }
    put_u(e, s.len);
    put_bytes(e, s.ptr, s.len);
}

static size_t str_bound(gmp_str s)
{
    return 3 + (size_t)s.len;
}

size_t gmp_encode_bound(const gmp_rec *r)
{
    size_t b = 1 + 4 + 16 * 10 + 16; /* type, length, up to 16 varints, a uuid */
    switch (r->type) {
    case GMP_REC_HEADER:
        b += str_bound(r->u.header.producer) + str_bound(r->u.header.hostname) +
             str_bound(r->u.header.cmdline) + str_bound(r->u.header.clock) +
             str_bound(r->u.header.options) + str_bound(r->u.header.rank_var);
        break;
    case GMP_REC_STRING: b += str_bound(r->u.string.value); break;
    case GMP_REC_DEVICE: b += str_bound(r->u.device.name); break;
    case GMP_REC_THREAD: b += str_bound(r->u.thread.name); break;
    case GMP_REC_MODULE: b += str_bound(r->u.module.path) + str_bound(r->u.module.build_id); break;
    case GMP_REC_NOTICE: b += str_bound(r->u.notice.message); break;
    default: break;
    }
    return b;
}

static void enc_payload(enc *e, const gmp_rec *r, uint64_t *prev_ns)
{
    if (gmp_rec_is_event(r->type)) {
        put_s(e, (int64_t)(r->time_ns - *prev_ns));
        *prev_ns = r->time_ns;
    }
    switch (r->type) {
    case GMP_REC_HEADER: {
        const gmp_rec_header *h = &r->u.header;
        put_u(e, h->format_version);
        put_u(e, h->min_reader_version);
        put_str(e, h->producer);
        put_u(e, h->pid);
        put_u(e, h->ppid);
        put_str(e, h->hostname);
        put_str(e, h->cmdline);
        put_s(e, h->rank);
        put_u(e, h->start_wall_ns);
        put_u(e, h->start_trace_ns);
        put_str(e, h->clock);
        put_str(e, h->options);
        /* appended fields: a reader that predates them skips them as a longer payload */
        put_u(e, h->local_rank >= 0 ? (uint64_t)h->local_rank + 1 : 0);
        put_u(e, h->world_size > 0 ? (uint64_t)h->world_size : 0);
        put_str(e, h->rank_var);
        break;
    }
    case GMP_REC_STRING:
        put_u(e, r->u.string.id);
        put_str(e, r->u.string.value);
        break;
    case GMP_REC_DEVICE:
        put_u(e, r->u.device.id);
        put_str(e, r->u.device.name);
        put_bytes(e, r->u.device.uuid, 16);
        put_u(e, r->u.device.total_bytes);
        put_u(e, r->u.device.cc_major);
        put_u(e, r->u.device.cc_minor);
        break;
    case GMP_REC_THREAD:
        put_u(e, r->u.thread.tid);
        put_str(e, r->u.thread.name);
        break;
    case GMP_REC_MODULE:
        put_u(e, r->u.module.id);
        put_str(e, r->u.module.path);
        put_u(e, r->u.module.base);
        put_u(e, r->u.module.lo);
        put_u(e, r->u.module.size);
        put_str(e, r->u.module.build_id);
        break;
    case GMP_REC_STACK:
        put_u(e, r->u.stack.id);
        put_u(e, r->u.stack.parent);
        put_u(e, r->u.stack.kind);
        if (r->u.stack.kind == GMP_FRAME_NATIVE) {
            put_u(e, r->u.stack.address);
        } else if (r->u.stack.kind == GMP_FRAME_PYTHON) {
            put_u(e, r->u.stack.file);
            put_u(e, r->u.stack.function);
            put_u(e, r->u.stack.line);
        } else {
            e->bad = 1;
        }
        break;
    case GMP_REC_RANGE:
        put_u(e, r->u.range.id);
        put_u(e, r->u.range.parent);
        put_u(e, r->u.range.domain);
        put_u(e, r->u.range.name);
        break;
    case GMP_REC_BUFFER:
        put_u(e, r->u.buffer.tid);
        put_u(e, r->u.buffer.base_ns);
        *prev_ns = r->u.buffer.base_ns;
        break;
    case GMP_REC_SYNC: put_u(e, r->u.sync.time_ns); break;
    case GMP_REC_RANGE_PUSH:
    case GMP_REC_RANGE_POP:
    case GMP_REC_MARK: put_u(e, r->u.rev.range); break;
    case GMP_REC_RANGE_START:
        put_u(e, r->u.rev.handle);
        put_u(e, r->u.rev.range);
        break;
    case GMP_REC_RANGE_END: put_u(e, r->u.rev.handle); break;
    case GMP_REC_ALLOC:
    case GMP_REC_FREE: {
        const gmp_rec_mem *m = &r->u.mem;
        put_s(e, m->device);
        put_u(e, m->kind);
        put_u(e, m->flags);
        put_u(e, m->api);
        put_u(e, m->address);
        put_u(e, m->size);
        put_u(e, m->stream);
        put_u(e, m->stack);
        put_u(e, m->range);
        put_u(e, m->correlation);
        put_s(e, m->result);
        put_u(e, m->handle);
        break;
    }
    case GMP_REC_OOM: {
        const gmp_rec_oom *o = &r->u.oom;
        put_s(e, o->device);
        put_u(e, o->api);
        put_u(e, o->requested);
        put_u(e, o->stack);
        put_u(e, o->range);
        put_s(e, o->result);
        put_u(e, o->free_bytes);
        break;
    }
    case GMP_REC_POOL:
        put_s(e, r->u.pool.device);
        put_u(e, r->u.pool.op);
        put_u(e, r->u.pool.pool);
        put_u(e, r->u.pool.value);
        break;
    case GMP_REC_SAMPLE:
        put_s(e, r->u.sample.device);
        put_u(e, r->u.sample.free_bytes);
        put_u(e, r->u.sample.total_bytes);
        /* 0 encodes "unknown" so that the common case stays short */
        put_u(e, r->u.sample.process_used == UINT64_MAX ? 0 : r->u.sample.process_used + 1);
        break;
    case GMP_REC_RESOURCE:
        put_s(e, r->u.resource.device);
        put_u(e, r->u.resource.op);
        put_u(e, r->u.resource.handle);
        break;
    case GMP_REC_ALERT:
        put_s(e, r->u.alert.device);
        put_u(e, r->u.alert.threshold);
        put_u(e, r->u.alert.live_bytes);
        put_u(e, r->u.alert.range);
        break;
    case GMP_REC_NOTICE:
        put_u(e, r->u.notice.severity);
        put_str(e, r->u.notice.message);
        break;
    case GMP_REC_LOST:
        put_u(e, r->u.lost.count);
        put_u(e, r->u.lost.reason);
        break;
    case GMP_REC_END:
        put_u(e, r->u.end.events);
        put_u(e, r->u.end.allocs);
        put_u(e, r->u.end.frees);
        put_u(e, r->u.end.lost);
        break;
    default: e->bad = 1; break;
    }
}

/* Unchecked varint store: the caller guarantees 10 bytes of room. */
static inline uint8_t *fast_u(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

#define MEM_FAST_ROOM (2 + 13 * 10) /* type, one-byte length, 13 varints at most */

/* ALLOC and FREE, the records of the agent's hot path, without per-field checks. */
static size_t encode_mem_fast(uint8_t *dst, const gmp_rec *r, uint64_t *prev_ns)
{
    const gmp_rec_mem *m = &r->u.mem;
    uint8_t *p = dst + 2;
    p = fast_u(p, gmp_zigzag((int64_t)(r->time_ns - *prev_ns)));
    p = fast_u(p, gmp_zigzag(m->device));
    p = fast_u(p, m->kind);
    p = fast_u(p, m->flags);
    p = fast_u(p, m->api);
    p = fast_u(p, m->address);
    p = fast_u(p, m->size);
    p = fast_u(p, m->stream);
    p = fast_u(p, m->stack);
    p = fast_u(p, m->range);
    p = fast_u(p, m->correlation);
    p = fast_u(p, gmp_zigzag(m->result));
    p = fast_u(p, m->handle);
    size_t plen = (size_t)(p - (dst + 2));
    if (plen >= 0x80) { /* two length bytes */
        memmove(dst + 3, dst + 2, plen);
        dst[1] = (uint8_t)(plen | 0x80);
        dst[2] = (uint8_t)(plen >> 7);
        dst[0] = (uint8_t)r->type;
        *prev_ns = r->time_ns;
        return 3 + plen;
    }
    dst[0] = (uint8_t)r->type;
    dst[1] = (uint8_t)plen;
    *prev_ns = r->time_ns;
    return 2 + plen;
}

size_t gmp_encode(uint8_t *dst, size_t cap, const gmp_rec *r, uint64_t *prev_ns)
{
    if ((r->type == GMP_REC_ALLOC || r->type == GMP_REC_FREE) && cap >= MEM_FAST_ROOM + 1 &&
        r->u.mem.kind < GMP_MEM_KIND_COUNT)
        return encode_mem_fast(dst, r, prev_ns);
    if (cap < 2 || !gmp_rec_type_name(r->type))
        return 0;
    uint64_t prev = *prev_ns;
    /* Encode the payload after a one-byte length, then widen the length if needed. */
    enc e = {dst + 2, dst + cap, 0};
    enc_payload(&e, r, &prev);
    if (e.bad)
        return 0;
    size_t plen = (size_t)(e.p - (dst + 2));
    if (plen > GMP_MAX_RECORD_BYTES)
        return 0;
    size_t lw = gmp_uvarint_len(plen);
    if (lw > 1) {
        if (2 + plen + (lw - 1) > cap)
            return 0;
        memmove(dst + 1 + lw, dst + 2, plen);
    }
    dst[0] = (uint8_t)r->type;
    gmp_put_uvarint(dst + 1, plen);
    *prev_ns = prev;
    return 1 + lw + plen;
}

/* ---- decoding ---- */

typedef struct dec {
    const uint8_t *p, *end;
    const char *bad;
} dec;

static uint64_t get_u(dec *d)
{
    uint64_t v = 0;
    if (d->bad)
        return 0;
    size_t n = gmp_get_uvarint(d->p, (size_t)(d->end - d->p), &v);
    if (!n) {
        d->bad = "malformed or missing varint field";
        return 0;
    }
    d->p += n;
    return v;
}

static uint32_t get_u32(dec *d)
{
    uint64_t v = get_u(d);
    if (v > UINT32_MAX && !d->bad)
        d->bad = "32-bit field out of range";
    return (uint32_t)v;
}

static int64_t get_s(dec *d)
{
    return gmp_unzigzag(get_u(d));
}

static int32_t get_s32(dec *d)
{
    int64_t v = get_s(d);
    if ((v < INT32_MIN || v > INT32_MAX) && !d->bad)
        d->bad = "signed 32-bit field out of range";
    return (int32_t)v;
}

static gmp_str get_str(dec *d)
{
    gmp_str s = {"", 0};
    uint64_t n = get_u(d);
    if (d->bad)
        return s;
    if (n > GMP_MAX_STRING_BYTES) {
        d->bad = "string longer than the format allows";
        return s;
    }
    if (n > (uint64_t)(d->end - d->p)) {
        d->bad = "string runs past the end of its record";
        return s;
    }
    s.ptr = (const char *)d->p;
    s.len = (uint32_t)n;
    d->p += n;
    return s;
}

static void get_bytes(dec *d, void *out, size_t n)
{
    if (d->bad)
        return;
    if (n > (size_t)(d->end - d->p)) {
        d->bad = "field runs past the end of its record";
        return;
    }
    memcpy(out, d->p, n);
    d->p += n;
}

gmp_err gmp_decode(const uint8_t *src, size_t n, gmp_rec *r, uint64_t *prev_ns, size_t *used,
                   const char **msg)
{
    static const char *dummy;
    if (!msg)
        msg = &dummy;
    *msg = NULL;
    if (n < 2) {
        *msg = "record header cut short";
        return GMP_ERR_TRUNCATED;
    }
    uint64_t plen = 0;
    size_t lw = gmp_get_uvarint(src + 1, n - 1, &plen);
    if (!lw) {
        if (n - 1 >= 10) {
            *msg = "malformed record length";
            return GMP_ERR_FORMAT;
        }
        *msg = "record header cut short";
        return GMP_ERR_TRUNCATED;
    }
    if (plen > GMP_MAX_RECORD_BYTES) {
        *msg = "record longer than the format allows";
        return GMP_ERR_FORMAT;
    }
    if (plen > n - 1 - lw) {
        *msg = "record runs past the end of its frame";
        return GMP_ERR_TRUNCATED;
    }
    memset(r, 0, sizeof *r);
    r->type = src[0];
    *used = 1 + lw + (size_t)plen;
    if (!gmp_rec_type_name(r->type))
        return GMP_OK; /* unknown type: skipped by its length */

    dec d = {src + 1 + lw, src + 1 + lw + plen, NULL};
    uint64_t prev = *prev_ns;
    if (gmp_rec_is_event(r->type)) {
        int64_t delta = get_s(&d);
        r->time_ns = prev + (uint64_t)delta;
        prev = r->time_ns;
    }
    switch (r->type) {
    case GMP_REC_HEADER: {
        gmp_rec_header *h = &r->u.header;
        h->format_version = get_u32(&d);
        h->min_reader_version = get_u32(&d);
        h->producer = get_str(&d);
        h->pid = get_u32(&d);
        h->ppid = get_u32(&d);
        h->hostname = get_str(&d);
        h->cmdline = get_str(&d);
        h->rank = get_s(&d);
        h->start_wall_ns = get_u(&d);
        h->start_trace_ns = get_u(&d);
        h->clock = get_str(&d);
        h->options = get_str(&d);
        /* appended fields, absent from traces written before them: all or none */
        h->local_rank = -1;
        if (!d.bad && d.p < d.end) {
            uint64_t lr = get_u(&d);
            uint64_t ws = get_u(&d);
            h->rank_var = get_str(&d);
            if (!d.bad && (lr > INT32_MAX || ws > INT32_MAX))
                d.bad = "local rank or world size out of range";
            h->local_rank = lr ? (int64_t)lr - 1 : -1;
            h->world_size = (int64_t)ws;
        }
        break;
    }
    case GMP_REC_STRING:
        r->u.string.id = get_u32(&d);
        r->u.string.value = get_str(&d);
        if (!d.bad && r->u.string.id == 0)
            d.bad = "string id 0 is reserved";
        break;
    case GMP_REC_DEVICE:
        r->u.device.id = get_u32(&d);
        r->u.device.name = get_str(&d);
        get_bytes(&d, r->u.device.uuid, 16);
        r->u.device.total_bytes = get_u(&d);
        r->u.device.cc_major = get_u32(&d);
        r->u.device.cc_minor = get_u32(&d);
        break;
    case GMP_REC_THREAD:
        r->u.thread.tid = get_u32(&d);
        r->u.thread.name = get_str(&d);
        break;
    case GMP_REC_MODULE:
        r->u.module.id = get_u32(&d);
        r->u.module.path = get_str(&d);
        r->u.module.base = get_u(&d);
        r->u.module.lo = get_u(&d);
        r->u.module.size = get_u(&d);
        r->u.module.build_id = get_str(&d);
        if (!d.bad && r->u.module.id == 0)
            d.bad = "module id 0 is reserved";
        break;
    case GMP_REC_STACK:
        r->u.stack.id = get_u32(&d);
        r->u.stack.parent = get_u32(&d);
        r->u.stack.kind = get_u32(&d);
        if (r->u.stack.kind == GMP_FRAME_NATIVE) {
            r->u.stack.address = get_u(&d);
        } else if (r->u.stack.kind == GMP_FRAME_PYTHON) {
            r->u.stack.file = get_u32(&d);
            r->u.stack.function = get_u32(&d);
            r->u.stack.line = get_u32(&d);
        } else if (!d.bad) {
            d.bad = "unknown stack frame kind";
        }
        if (!d.bad && r->u.stack.id == 0)
            d.bad = "stack id 0 is reserved";
        break;
    case GMP_REC_RANGE:
        r->u.range.id = get_u32(&d);
        r->u.range.parent = get_u32(&d);
        r->u.range.domain = get_u32(&d);
        r->u.range.name = get_u32(&d);
        if (!d.bad && r->u.range.id == 0)
            d.bad = "range id 0 is reserved";
        break;
    case GMP_REC_BUFFER:
        r->u.buffer.tid = get_u32(&d);
        r->u.buffer.base_ns = get_u(&d);
        prev = r->u.buffer.base_ns;
        break;
    case GMP_REC_SYNC: r->u.sync.time_ns = get_u(&d); break;
    case GMP_REC_RANGE_PUSH:
    case GMP_REC_RANGE_POP:
    case GMP_REC_MARK: r->u.rev.range = get_u32(&d); break;
    case GMP_REC_RANGE_START:
        r->u.rev.handle = get_u(&d);
        r->u.rev.range = get_u32(&d);
        break;
    case GMP_REC_RANGE_END: r->u.rev.handle = get_u(&d); break;
    case GMP_REC_ALLOC:
    case GMP_REC_FREE: {
        gmp_rec_mem *m = &r->u.mem;
        m->device = get_s32(&d);
        m->kind = get_u32(&d);
        m->flags = get_u32(&d);
        m->api = get_u32(&d);
        m->address = get_u(&d);
        m->size = get_u(&d);
        m->stream = get_u(&d);
        m->stack = get_u32(&d);
        m->range = get_u32(&d);
        m->correlation = get_u(&d);
        m->result = get_s32(&d);
        m->handle = get_u(&d);
        if (!d.bad && m->kind >= GMP_MEM_KIND_COUNT)
            d.bad = "unknown memory kind";
        break;
    }
    case GMP_REC_OOM: {
        gmp_rec_oom *o = &r->u.oom;
        o->device = get_s32(&d);
        o->api = get_u32(&d);
        o->requested = get_u(&d);
        o->stack = get_u32(&d);
        o->range = get_u32(&d);
        o->result = get_s32(&d);
        o->free_bytes = get_u(&d);
        break;
    }
    case GMP_REC_POOL:
        r->u.pool.device = get_s32(&d);
        r->u.pool.op = get_u32(&d);
        r->u.pool.pool = get_u(&d);
        r->u.pool.value = get_u(&d);
        break;
    case GMP_REC_SAMPLE: {
        r->u.sample.device = get_s32(&d);
        r->u.sample.free_bytes = get_u(&d);
        r->u.sample.total_bytes = get_u(&d);
        uint64_t pu = get_u(&d);
        r->u.sample.process_used = pu ? pu - 1 : UINT64_MAX;
        break;
    }
    case GMP_REC_RESOURCE:
        r->u.resource.device = get_s32(&d);
        r->u.resource.op = get_u32(&d);
        r->u.resource.handle = get_u(&d);
        break;
    case GMP_REC_ALERT:
        r->u.alert.device = get_s32(&d);
        r->u.alert.threshold = get_u(&d);
        r->u.alert.live_bytes = get_u(&d);
        r->u.alert.range = get_u32(&d);
        break;
    case GMP_REC_NOTICE:
        r->u.notice.severity = get_u32(&d);
        r->u.notice.message = get_str(&d);
        break;
    case GMP_REC_LOST:
        r->u.lost.count = get_u(&d);
        r->u.lost.reason = get_u32(&d);
        break;
    case GMP_REC_END:
        r->u.end.events = get_u(&d);
        r->u.end.allocs = get_u(&d);
        r->u.end.frees = get_u(&d);
        r->u.end.lost = get_u(&d);
        break;
    default: break;
    }
    if (d.bad) {
        *msg = d.bad;
        return GMP_ERR_FORMAT;
    }
    /* Bytes left in the payload are fields added by a newer format version: ignored. */
    *prev_ns = prev;
    return GMP_OK;
}
