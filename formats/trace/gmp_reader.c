/* gmp_reader: streaming reader of gpumemprof traces (see gmp_reader.h, docs/trace-format.md).
 *
 * Input is read in chunks; a zstd frame is decompressed only once it is wholly buffered
 * (ZSTD_findFrameCompressedSize), into one bounded buffer (<= GMP_MAX_FRAME_BYTES), and its
 * records are then decoded one at a time as the caller asks for them. Definitions are validated,
 * copied into an arena (valid until close) and returned at once. Events are validated, copied into
 * a reorder window (a slot pool plus an array of (time, slot) keys) and returned in time order when
 * a SYNC record allows it: the window is sorted by a stable natural merge sort (per-thread buffers
 * are already sorted runs; the part kept from the previous SYNC is one more run), so ties keep file
 * order. Memory: the definitions, one frame, and one window.
 *
 * Read-ahead (gmp_reader_readahead): a copy of the reader, the decoder, takes over the input, the
 * frame and the window and runs in a thread of gmp_readahead; when it releases part of its window
 * it hands the slots over (package) instead of returning them, and the reader returns them from
 * there (ra_next). Definitions come back through the same queue and are defined again in this
 * reader, so that its lookups answer exactly as without read-ahead. At the end (or at close) the
 * decoder's state comes back into the reader (decoder_join). Memory: up to three windows. The
 * reader's side of this is gmp_reader_ra.c, reached through r->ra_ops (set by
 * gmp_reader_readahead); the state both files read is in gmp_reader_impl.h.
 *
 * Over a queue (gmp_reader_open_queue, gmp_tq.h), frames come from a writer of this process as the
 * record bytes it staged, without zstd framing: the rest is the same. */
#include "gmp_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "gmp_codec.h"
#include "gmp_reader_impl.h"

#define DEFAULT_WINDOW ((size_t)4 << 20)
#define READ_CHUNK ((size_t)1 << 20)
#define SKIPPABLE_MAGIC 0x184D2A50u
#define SKIPPABLE_MASK 0xFFFFFFF0u
#define ZSTD_MAGIC 0xFD2FB528u
#define BLOCK_MAX ((size_t)128 << 10)
/* Bytes after each decompressed frame that may be read (as zeros) by fast_u's 8-byte loads. */
#define FBUF_PAD 16
/* The largest compressed size of a frame that decompresses to at most GMP_MAX_FRAME_BYTES. */
#define MAX_FRAME_CSIZE (ZSTD_COMPRESSBOUND(GMP_MAX_FRAME_BYTES) + 64)
#define ARENA_BLOCK ((size_t)64 << 10)

/* ---- arena: stable storage for definitions, freed at close ---- */

static void *arena_alloc(arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_blk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

static void arena_free(arena *a)
{
    while (a->head) {
        arena_blk *n = a->head->next;
        free(a->head);
        a->head = n;
    }
}

/* Copies s (plus a NUL) into the arena. */
static int arena_str(arena *a, gmp_str *s)
{
    char *p = arena_alloc(a, (size_t)s->len + 1);
    if (!p)
        return -1;
    if (s->len)
        memcpy(p, s->ptr, s->len);
    p[s->len] = 0;
    s->ptr = p;
    return 0;
}

/* ---- id tables: id -> definition, dense for ids near the count, hashed beyond ---- */

static inline size_t hash_u32(uint32_t k, size_t mask)
{
    return (size_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

static inline uint32_t deftab_index(const deftab *t, uint32_t id)
{
    if (id < t->dense_cap)
        return t->dense[id]; /* ids below dense_cap are never hashed */
    if (!t->hcount)
        return 0;
    size_t mask = t->hcap - 1;
    for (size_t i = hash_u32(id, mask);; i = (i + 1) & mask) {
        if (!t->hash[i].val)
            return 0;
        if (t->hash[i].key == id)
            return t->hash[i].val;
    }
}

static inline void *deftab_get(const deftab *t, uint32_t id)
{
    uint32_t i = deftab_index(t, id);
    return i ? t->items[i - 1] : NULL;
}

static int hash_put(deftab *t, uint32_t key, uint32_t val)
{
    if ((t->hcount + 1) * 2 > t->hcap) {
        size_t nc = t->hcap ? t->hcap * 2 : 64;
        hslot *nh = calloc(nc, sizeof *nh);
        if (!nh)
            return -1;
        for (size_t i = 0; i < t->hcap; i++) {
            if (!t->hash[i].val)
                continue;
            size_t j = hash_u32(t->hash[i].key, nc - 1);
            while (nh[j].val)
                j = (j + 1) & (nc - 1);
            nh[j] = t->hash[i];
        }
        free(t->hash);
        t->hash = nh;
        t->hcap = nc;
    }
    size_t mask = t->hcap - 1, j = hash_u32(key, mask);
    while (t->hash[j].val)
        j = (j + 1) & mask;
    t->hash[j].key = key;
    t->hash[j].val = val;
    t->hcount++;
    return 0;
}

/* Adds a new id (not yet defined) for item. */
static int deftab_add(deftab *t, uint32_t id, void *item)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 64;
        if (nc > UINT32_MAX - 1)
            return -1;
        void **ni = realloc(t->items, nc * sizeof *ni);
        if (!ni)
            return -1;
        t->items = ni;
        t->cap = nc;
    }
    uint32_t val = (uint32_t)(t->n + 1);
    /* Dense while the id stays within a bound proportional to the count: hostile ids near 2^32
     * never size an array. Ids already hashed stay hashed (dense lookups of them find 0 and the
     * hash is only consulted above dense_cap), so only grow over ids not in the hash. */
    if (id >= t->dense_cap && (uint64_t)id <= 2 * (uint64_t)t->n + 4096 && !t->hcount) {
        size_t nc = t->dense_cap ? t->dense_cap * 2 : 1024;
        while (nc <= id)
            nc *= 2;
        uint32_t *nd = realloc(t->dense, nc * sizeof *nd);
        if (!nd)
            return -1;
        memset(nd + t->dense_cap, 0, (nc - t->dense_cap) * sizeof *nd);
        t->dense = nd;
        t->dense_cap = nc;
    }
    if (id < t->dense_cap)
        t->dense[id] = val;
    else if (hash_put(t, id, val))
        return -1;
    t->items[t->n++] = item;
    return 0;
}

static _Thread_local char open_err[512];

/* An error inside a record of the current frame, with both offsets. */
static gmp_err fail_rec(gmp_reader *r, size_t rec_off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static gmp_err fail_rec(gmp_reader *r, size_t rec_off, const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fail(r, GMP_ERR_FORMAT,
                "corrupt trace: record at offset %zu of the frame at byte %llu: %s", rec_off,
                (unsigned long long)r->frame_off, what);
}

/* ---- input ---- */

static inline size_t in_avail(const gmp_reader *r)
{
    return r->ilen - r->ipos;
}

static inline void in_consume(gmp_reader *r, size_t n)
{
    r->ipos += n;
    r->in_off += n;
}

/* Makes more input available. Returns 1 when bytes were added, 0 at the end of the input,
 * -1 on an error (set). Keeps the buffered bytes; grows the buffer up to MAX_FRAME_CSIZE. */
static int in_more(gmp_reader *r)
{
    if (r->fd < 0 || r->in_eof)
        return 0;
    if (r->ipos > 0) {
        size_t a = in_avail(r);
        memmove(r->ibuf, r->ibuf + r->ipos, a);
        r->ipos = 0;
        r->ilen = a;
    }
    if (r->ilen == r->icap) {
        size_t nc = r->icap * 2;
        if (nc > MAX_FRAME_CSIZE + READ_CHUNK)
            nc = MAX_FRAME_CSIZE + READ_CHUNK;
        if (nc <= r->icap)
            return 0; /* the caller reports the frame as too large */
        uint8_t *nb = realloc(r->ibuf, nc);
        if (!nb) {
            nomem(r);
            return -1;
        }
        r->ibuf = nb;
        r->in = nb;
        r->icap = nc;
    }
    for (;;) {
        ssize_t got = read(r->fd, r->ibuf + r->ilen, r->icap - r->ilen);
        if (got > 0) {
            r->ilen += (size_t)got;
            return 1;
        }
        if (got == 0) {
            r->in_eof = 1;
            return 0;
        }
        if (errno == EINTR)
            continue;
        fail(r, GMP_ERR_IO, "cannot read the trace at byte %llu: %s",
             (unsigned long long)(r->in_off + in_avail(r)), strerror(errno));
        return -1;
    }
}

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The input ends inside a frame that started at the current position. */
static gmp_err cut(gmp_reader *r, uint64_t partial)
{
    r->stats.truncated = 1;
    r->stats.bytes_discarded = partial;
    return GMP_END;
}

/* Skips a skippable frame of total size total (header included) at the current position. */
static gmp_err skip_frame(gmp_reader *r, uint64_t total)
{
    uint64_t done = 0;
    for (;;) {
        size_t a = in_avail(r);
        uint64_t take = total - done < a ? total - done : a;
        in_consume(r, (size_t)take);
        done += take;
        if (done == total)
            break;
        int m = in_more(r);
        if (m < 0)
            return r->err;
        if (m == 0)
            return cut(r, done);
    }
    r->stats.frames++;
    r->stats.bytes_read += total;
    r->good_end = r->in_off;
    return GMP_OK;
}

/* next_frame over a queue: the frame's record bytes come as the writer staged them (no zstd
 * framing, no checksum: nothing crossed a file); the records are decoded and checked as ever. */
static gmp_err queue_frame(gmp_reader *r)
{
    free(r->fbuf);
    r->fbuf = NULL;
    r->fcap = r->flen = r->fpos = 0;
    uint8_t *buf;
    size_t len, cap;
    if (!gmp_tq_get(r->q, &buf, &len, &cap))
        return GMP_END;
    if (cap < len + FBUF_PAD) { /* (the writer leaves room: gmp_writer's emit_frame) */
        uint8_t *nb = realloc(buf, len + FBUF_PAD);
        if (!nb) {
            free(buf);
            return nomem(r);
        }
        buf = nb;
        cap = len + FBUF_PAD;
    }
    memset(buf + len, 0, FBUF_PAD); /* read by fast_u's 8-byte loads */
    r->fbuf = buf;
    r->fcap = cap;
    r->frame_off = r->in_off;
    r->in_off += len;
    r->good_end = r->in_off;
    r->stats.frames++;
    r->stats.bytes_read += len;
    r->flen = len;
    r->in_buffer = 0;
    r->prev_ns = 0;
    return GMP_OK;
}

/* Reads the next whole data frame into fbuf. GMP_END at the end of the input (a cut file sets the
 * stats), an error otherwise. */
static gmp_err next_frame(gmp_reader *r)
{
    if (r->q)
        return queue_frame(r);
    size_t fsize = 0;
    for (;;) {
        size_t a = in_avail(r);
        const uint8_t *p = r->in + r->ipos;
        if (a >= 4 && (le32(p) & SKIPPABLE_MASK) == SKIPPABLE_MAGIC) {
            if (a >= 8) {
                gmp_err e = skip_frame(r, 8 + (uint64_t)le32(p + 4));
                if (e)
                    return e;
                continue;
            }
        } else if (a > 0) {
            size_t ret = ZSTD_findFrameCompressedSize(p, a);
            if (!ZSTD_isError(ret)) {
                fsize = ret;
                break;
            }
            if (ZSTD_getErrorCode(ret) != ZSTD_error_srcSize_wrong)
                return fail(r, GMP_ERR_FORMAT,
                            "corrupt trace: no valid zstd frame at byte %llu (%s)",
                            (unsigned long long)r->in_off, ZSTD_getErrorName(ret));
            if (a >= MAX_FRAME_CSIZE)
                return fail(r, GMP_ERR_FORMAT,
                            "corrupt trace: the frame at byte %llu is larger than the format "
                            "allows",
                            (unsigned long long)r->in_off);
        }
        int m = in_more(r);
        if (m < 0)
            return r->err;
        if (m == 0) {
            if (in_avail(r) == 0)
                return GMP_END;
            if (r->fd >= 0 && !r->in_eof) /* the buffer cannot grow: frame too large */
                return fail(r, GMP_ERR_FORMAT,
                            "corrupt trace: the frame at byte %llu is larger than the format "
                            "allows",
                            (unsigned long long)r->in_off);
            uint64_t partial = in_avail(r);
            return cut(r, partial);
        }
    }

    const uint8_t *p = r->in + r->ipos;
    /* Frame_Header_Descriptor: bit 2 is Content_Checksum_flag. */
    if (fsize < 5 || le32(p) != ZSTD_MAGIC || !(p[4] & 0x4))
        return fail(r, GMP_ERR_FORMAT,
                    "corrupt trace: the frame at byte %llu has no content checksum",
                    (unsigned long long)r->in_off);
    unsigned long long csize = ZSTD_getFrameContentSize(p, fsize);
    size_t cap;
    if (csize == ZSTD_CONTENTSIZE_ERROR)
        return fail(r, GMP_ERR_FORMAT, "corrupt trace: bad frame header at byte %llu",
                    (unsigned long long)r->in_off);
    if (csize == ZSTD_CONTENTSIZE_UNKNOWN) {
        /* at most one block of BLOCK_MAX bytes per 3 compressed bytes */
        uint64_t bound = ((uint64_t)fsize / 3 + 1) * BLOCK_MAX;
        cap = bound < GMP_MAX_FRAME_BYTES ? (size_t)bound : GMP_MAX_FRAME_BYTES;
    } else if (csize > GMP_MAX_FRAME_BYTES) {
        return fail(r, GMP_ERR_FORMAT,
                    "corrupt trace: the frame at byte %llu decompresses to %llu bytes, more than "
                    "the format allows",
                    (unsigned long long)r->in_off, csize);
    } else {
        cap = (size_t)csize;
    }
    if (cap + FBUF_PAD > r->fcap) {
        uint8_t *nb = malloc(cap + FBUF_PAD);
        if (!nb)
            return nomem(r);
        free(r->fbuf);
        r->fbuf = nb;
        r->fcap = cap + FBUF_PAD;
    }
    size_t got = ZSTD_decompressDCtx(r->dctx, r->fbuf, cap, p, fsize);
    if (ZSTD_isError(got)) {
        if (ZSTD_getErrorCode(got) == ZSTD_error_dstSize_tooSmall && cap == GMP_MAX_FRAME_BYTES)
            return fail(r, GMP_ERR_FORMAT,
                        "corrupt trace: the frame at byte %llu decompresses to more than the "
                        "format allows",
                        (unsigned long long)r->in_off);
        return fail(r, GMP_ERR_FORMAT, "corrupt trace: the frame at byte %llu is damaged (%s)",
                    (unsigned long long)r->in_off, ZSTD_getErrorName(got));
    }
    memset(r->fbuf + got, 0, FBUF_PAD); /* read by fast_u's 8-byte loads */
    r->frame_off = r->in_off;
    in_consume(r, fsize);
    r->good_end = r->in_off;
    r->stats.frames++;
    r->stats.bytes_read += fsize;
    r->flen = got;
    r->fpos = 0;
    r->in_buffer = 0;
    r->prev_ns = 0;
    return GMP_OK;
}

/* ---- window ---- */

static int window_grow(gmp_reader *r)
{
    size_t nc = r->keys_cap ? r->keys_cap * 2 : 4096;
    if (nc > r->max_window + 1)
        nc = r->max_window + 1;
    if (nc <= r->keys_cap)
        return -1;
    wkey *nk = realloc(r->keys, nc * sizeof *nk);
    if (!nk)
        return -1;
    r->keys = nk;
    wkey *nt = realloc(r->tmp, nc * sizeof *nt);
    if (!nt)
        return -1;
    r->tmp = nt;
    r->keys_cap = nc;
    return 0;
}

static int cmp_key_time(const void *a, const void *b)
{
    uint64_t x = ((const wkey *)a)->time, y = ((const wkey *)b)->time;
    return x < y ? -1 : x > y;
}

/* Makes room to append a slot. Slots are written in file order, so that both the writes and the
 * reads of a merge (a few sequential runs) stay friendly to caches; returned slots are dead. When
 * the array is full, the live slots slide down in place (their order kept), or the array doubles
 * when more than half of it is live: amortized O(1) per event, at most ~2 slots per window event.
 */
static int slot_room(gmp_reader *r)
{
    if (r->slots_n < r->slots_cap)
        return 0;
    if (!r->slots_cap || r->keys_n * 2 > r->slots_cap) {
        size_t nc = r->slots_cap ? r->slots_cap * 2 : 4096;
        wslot *ns = realloc(r->slots, nc * sizeof *ns);
        if (!ns)
            return -1;
        r->slots = ns;
        uint32_t *nm = realloc(r->remap, nc * sizeof *nm);
        if (!nm)
            return -1;
        r->remap = nm;
        r->remap_cap = nc;
        r->slots_cap = nc;
        return 0;
    }
    if (r->keys_n * 8 < r->slots_n) {
        /* few live slots (the usual case): find them through the keys rather than scanning */
        wkey *t = r->tmp;
        for (size_t k = 0; k < r->keys_n; k++) {
            t[k].time = r->keys[k].slot;
            t[k].slot = k;
        }
        qsort(t, r->keys_n, sizeof *t, cmp_key_time);
        for (size_t j = 0; j < r->keys_n; j++) {
            if (t[j].time != j)
                r->slots[j] = r->slots[t[j].time];
            r->keys[t[j].slot].slot = j;
        }
        r->slots_n = r->keys_n;
        return 0;
    }
    size_t j = 0;
    for (size_t i = 0; i < r->slots_n; i++) {
        if (!r->slots[i].type)
            continue;
        if (i != j)
            r->slots[j] = r->slots[i];
        r->remap[i] = (uint32_t)j++;
    }
    for (size_t k = 0; k < r->keys_n; k++)
        r->keys[k].slot = r->remap[r->keys[k].slot];
    r->slots_n = j;
    return 0;
}

/* Stable natural merge sort of keys[0..keys_n) by time: adjacent non-decreasing runs are merged
 * pairwise until one run is left. keys[0..sorted_n) is known to be one run. */
static void window_sort(gmp_reader *r)
{
    size_t n = r->keys_n;
    if (r->sorted_n >= n)
        return;
    size_t m = r->sorted_n ? r->sorted_n : 1;
    for (;;) {
        wkey *a = r->keys, *t = r->tmp;
        while (m < n && a[m - 1].time <= a[m].time)
            m++;
        if (m >= n)
            break; /* one run */
        size_t i = 0;
        while (i < n) {
            /* a[i..m) is a run */
            if (m >= n) {
                memcpy(t + i, a + i, (n - i) * sizeof *a);
                break;
            }
            size_t e = m + 1;
            while (e < n && a[e - 1].time <= a[e].time)
                e++;
            size_t x = i, y = m, o = i;
            while (x < m && y < e) { /* branch-free: the runs of threads interleave at random */
                int right = a[y].time < a[x].time;
                t[o++] = *(right ? &a[y] : &a[x]);
                y += (size_t)right;
                x += (size_t)!right;
            }
            if (x < m)
                memcpy(t + o, a + x, (m - x) * sizeof *a);
            else
                memcpy(t + o, a + y, (e - y) * sizeof *a);
            i = e;
            m = i + 1;
            while (m < n && a[m - 1].time <= a[m].time)
                m++;
        }
        r->keys = t;
        r->tmp = a;
        m = 1;
    }
    r->sorted_n = n;
}

/* Starts returning the first k keys of the sorted window. */
static void window_release(gmp_reader *r, size_t k)
{
    r->rel_pos = 0;
    r->rel_n = k;
}

/* Number of keys with time <= t in the sorted window. */
static size_t window_upto(const gmp_reader *r, uint64_t t)
{
    size_t lo = 0, hi = r->keys_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->keys[mid].time <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- definitions ---- */

static gmp_err need(gmp_reader *r, size_t off, const deftab *t, uint32_t id, const char *what,
                    const char *field)
{
    if (id && !deftab_index(t, id))
        return fail_rec(r, off, "%s refers to undefined %s %u", field, what, id);
    return GMP_OK;
}

#define NEED(t, id, what, field)                                                                   \
    do {                                                                                           \
        if ((id) && !deftab_index(&r->t, (id)))                                                    \
            return need(r, off, &r->t, (id), what, field);                                         \
    } while (0)

static gmp_err define(gmp_reader *r, size_t off)
{
    gmp_rec *d = &r->dec;
    const char *name = gmp_rec_type_name(d->type);
    switch (d->type) {
    case GMP_REC_STRING: {
        if (deftab_index(&r->strings, d->u.string.id))
            return fail_rec(r, off, "string id %u defined twice", d->u.string.id);
        gmp_str *s = arena_alloc(&r->ar, sizeof *s);
        if (!s)
            return nomem(r);
        *s = d->u.string.value;
        /* traces written before the name existed: static memory's api was the activity kind */
        if (s->len == sizeof GMP_API_MEMORY2_OLD - 1 && s->ptr &&
            memcmp(s->ptr, GMP_API_MEMORY2_OLD, s->len) == 0)
            *s = (gmp_str){GMP_API_MODULE_LOAD, sizeof GMP_API_MODULE_LOAD - 1};
        if (arena_str(&r->ar, s) || deftab_add(&r->strings, d->u.string.id, s))
            return nomem(r);
        d->u.string.value = *s;
        break;
    }
    case GMP_REC_DEVICE:
    case GMP_REC_THREAD: {
        int dev = d->type == GMP_REC_DEVICE;
        deftab *t = dev ? &r->devices : &r->threads;
        uint32_t key = dev ? d->u.device.id : d->u.thread.tid;
        size_t sz = dev ? sizeof(gmp_rec_device) : sizeof(gmp_rec_thread);
        void *item = arena_alloc(&r->ar, sz);
        if (!item)
            return nomem(r);
        memcpy(item, &d->u, sz);
        gmp_str *s = dev ? &((gmp_rec_device *)item)->name : &((gmp_rec_thread *)item)->name;
        if (arena_str(&r->ar, s))
            return nomem(r);
        uint32_t i = deftab_index(t, key);
        if (i)
            t->items[i - 1] = item; /* replaces the earlier definition */
        else if (deftab_add(t, key, item))
            return nomem(r);
        memcpy(&d->u, item, sz);
        break;
    }
    case GMP_REC_MODULE: {
        if (deftab_index(&r->modules, d->u.module.id))
            return fail_rec(r, off, "module id %u defined twice", d->u.module.id);
        gmp_rec_module *m = arena_alloc(&r->ar, sizeof *m);
        if (!m)
            return nomem(r);
        *m = d->u.module;
        if (arena_str(&r->ar, &m->path) || arena_str(&r->ar, &m->build_id) ||
            deftab_add(&r->modules, m->id, m))
            return nomem(r);
        d->u.module = *m;
        break;
    }
    case GMP_REC_STACK: {
        gmp_rec_stack *s = &d->u.stack;
        if (deftab_index(&r->stacks, s->id))
            return fail_rec(r, off, "stack id %u defined twice", s->id);
        NEED(stacks, s->parent, "stack", "stack parent");
        if (s->kind == GMP_FRAME_PYTHON) {
            NEED(strings, s->file, "string", "python frame file");
            NEED(strings, s->function, "string", "python frame function");
        }
        gmp_rec_stack *c = arena_alloc(&r->ar, sizeof *c);
        if (!c)
            return nomem(r);
        *c = *s;
        if (deftab_add(&r->stacks, c->id, c))
            return nomem(r);
        break;
    }
    case GMP_REC_RANGE: {
        gmp_rec_range *g = &d->u.range;
        if (deftab_index(&r->ranges, g->id))
            return fail_rec(r, off, "range id %u defined twice", g->id);
        NEED(ranges, g->parent, "range", "range parent");
        NEED(strings, g->domain, "string", "range domain");
        NEED(strings, g->name, "string", "range name");
        gmp_rec_range *c = arena_alloc(&r->ar, sizeof *c);
        if (!c)
            return nomem(r);
        *c = *g;
        if (deftab_add(&r->ranges, c->id, c))
            return nomem(r);
        break;
    }
    default: return fail_rec(r, off, "unexpected %s record", name ? name : "unknown");
    }
    return GMP_OK;
}

/* Checks the references of an event and counts it. */
static gmp_err check_event(gmp_reader *r, size_t off)
{
    gmp_rec *d = &r->dec;
    switch (d->type) {
    case GMP_REC_RANGE_PUSH:
    case GMP_REC_RANGE_POP:
    case GMP_REC_RANGE_START:
    case GMP_REC_MARK: NEED(ranges, d->u.rev.range, "range", "range event"); break;
    case GMP_REC_ALLOC:
    case GMP_REC_FREE:
        NEED(strings, d->u.mem.api, "string", "api");
        NEED(stacks, d->u.mem.stack, "stack", "stack");
        NEED(ranges, d->u.mem.range, "range", "range");
        if (d->type == GMP_REC_ALLOC)
            r->allocs_read++;
        else
            r->frees_read++;
        break;
    case GMP_REC_OOM:
        NEED(strings, d->u.oom.api, "string", "api");
        NEED(stacks, d->u.oom.stack, "stack", "stack");
        NEED(ranges, d->u.oom.range, "range", "range");
        break;
    case GMP_REC_ALERT: NEED(ranges, d->u.alert.range, "range", "range"); break;
    case GMP_REC_LOST: {
        uint64_t c = d->u.lost.count;
        r->stats.lost_events = r->stats.lost_events + c < c ? UINT64_MAX : r->stats.lost_events + c;
        unsigned why = d->u.lost.reason >= 1 && d->u.lost.reason <= 5 ? d->u.lost.reason : 0;
        r->lost_by_reason[why] =
            r->lost_by_reason[why] + c < c ? UINT64_MAX : r->lost_by_reason[why] + c;
        break;
    }
    case GMP_REC_END:
        if (!r->stats.has_end) {
            r->stats.has_end = 1;
            r->stats.end = d->u.end;
            r->end_ev = r->ev_read;
            r->end_allocs = r->allocs_read;
            r->end_frees = r->frees_read;
            r->end_lost = r->stats.lost_events;
        }
        return GMP_OK;
    default: break;
    }
    r->ev_read++;
    return GMP_OK;
}

/* ---- open / close ---- */

static gmp_reader *reader_new(const gmp_reader_opts *opts)
{
    gmp_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->fd = -1;
    if (opts) {
        r->file_order = opts->file_order;
        r->max_window = opts->max_window_events;
    }
    if (!r->max_window)
        r->max_window = DEFAULT_WINDOW;
    if (r->max_window > ((size_t)1 << 30))
        r->max_window = (size_t)1 << 30;
    for (unsigned t = 0; t < 256; t++) {
        if (!gmp_rec_type_name(t))
            r->cls[t] = t >= 0x10 && t <= 0x3f ? CLS_UNKNOWN_EVENT : CLS_UNKNOWN;
        else if (gmp_rec_is_event(t))
            r->cls[t] = CLS_EVENT;
        else if (t == GMP_REC_BUFFER || t == GMP_REC_SYNC)
            r->cls[t] = CLS_FRAMING;
        else
            r->cls[t] = CLS_DEF;
    }
    r->dctx = ZSTD_createDCtx();
    if (!r->dctx) {
        free(r);
        return NULL;
    }
    return r;
}

/* Reads the first frame: magic and HEADER. */
static gmp_err read_start(gmp_reader *r)
{
    gmp_err e = next_frame(r);
    if (e == GMP_END) {
        if (r->stats.truncated)
            return fail(r, GMP_ERR_TRUNCATED,
                        "trace is cut inside its first frame (%llu bytes, no whole frame): the "
                        "program was killed before the trace was first written",
                        (unsigned long long)r->stats.bytes_discarded);
        return fail(r, GMP_ERR_TRUNCATED, "trace is empty: the program wrote no frame");
    }
    if (e)
        return e;
    if (r->flen < GMP_TRACE_MAGIC_LEN || memcmp(r->fbuf, GMP_TRACE_MAGIC, GMP_TRACE_MAGIC_LEN))
        return fail(r, GMP_ERR_FORMAT,
                    "not a gpumemprof trace: the first frame (at byte %llu) does not start with "
                    "the GMPTRACE magic",
                    (unsigned long long)r->frame_off);
    r->fpos = GMP_TRACE_MAGIC_LEN;
    size_t used = 0;
    const char *msg = NULL;
    uint64_t prev = 0;
    e = gmp_decode(r->fbuf + r->fpos, r->flen - r->fpos, &r->dec, &prev, &used, &msg);
    if (e)
        return fail_rec(r, r->fpos, "bad HEADER record: %s", msg ? msg : gmp_err_str(e));
    if (r->dec.type != GMP_REC_HEADER)
        return fail_rec(r, r->fpos, "the first record is not a HEADER");
    gmp_rec_header *h = &r->dec.u.header;
    if (h->min_reader_version > GMP_READER_VERSION)
        return fail(r, GMP_ERR_VERSION,
                    "trace needs a newer gpumemprof: it was written by \"%.*s\" (format version "
                    "%u) and needs reader version %u; this reader is version %u",
                    (int)(h->producer.len > 100 ? 100 : h->producer.len),
                    h->producer.ptr ? h->producer.ptr : "", h->format_version,
                    h->min_reader_version, GMP_READER_VERSION);
    if (h->format_version == 0)
        return fail_rec(r, r->fpos, "HEADER has format version 0");
    r->header = *h;
    if (arena_str(&r->ar, &r->header.producer) || arena_str(&r->ar, &r->header.hostname) ||
        arena_str(&r->ar, &r->header.cmdline) || arena_str(&r->ar, &r->header.clock) ||
        arena_str(&r->ar, &r->header.options) || arena_str(&r->ar, &r->header.rank_var))
        return nomem(r);
    r->fpos += used;
    r->stats.records[GMP_REC_HEADER]++;
    r->header_pending = 1;
    return GMP_OK;
}

static gmp_err finish_open(gmp_reader **out, gmp_reader *r)
{
    gmp_err e = read_start(r);
    if (e) {
        snprintf(open_err, sizeof open_err, "%s", r->msg);
        gmp_reader_close(r);
        *out = NULL;
        return e;
    }
    open_err[0] = 0;
    *out = r;
    return GMP_OK;
}

int gmp_reader_probe(const void *head, size_t n)
{
    if (!head || n < 4)
        return 0;
    uint32_t m = le32(head);
    return m == ZSTD_MAGIC || (m & SKIPPABLE_MASK) == SKIPPABLE_MAGIC;
}

gmp_err gmp_reader_open(gmp_reader **out, const char *path, const gmp_reader_opts *opts)
{
    if (!out || !path) {
        snprintf(open_err, sizeof open_err, "gmp_reader_open: invalid argument");
        return GMP_ERR_ARG;
    }
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(open_err, sizeof open_err, "cannot open %s: %s", path, strerror(errno));
        return GMP_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(open_err, sizeof open_err, "cannot read %s: it is a directory", path);
        close(fd);
        return GMP_ERR_IO;
    }
    gmp_reader *r = reader_new(opts);
    if (r)
        r->ibuf = malloc(READ_CHUNK);
    if (!r || !r->ibuf) {
        if (r)
            gmp_reader_close(r);
        close(fd);
        snprintf(open_err, sizeof open_err, "out of memory opening %s", path);
        return GMP_ERR_NOMEM;
    }
    r->fd = fd;
    r->in = r->ibuf;
    r->icap = READ_CHUNK;
    if (S_ISREG(st.st_mode))
        r->stats.file_bytes = (uint64_t)st.st_size;
    return finish_open(out, r);
}

/* The start of gmp_reader_open_mem and _queue: the arguments checked (ok), a new reader; NULL with
 * *e and the open error set when not. */
static gmp_reader *open_begin(gmp_reader **out, int ok, const char *fn, const gmp_reader_opts *opts,
                              gmp_err *e)
{
    if (!out || !ok) {
        snprintf(open_err, sizeof open_err, "%s: invalid argument", fn);
        *e = GMP_ERR_ARG;
        return NULL;
    }
    *out = NULL;
    gmp_reader *r = reader_new(opts);
    if (!r) {
        snprintf(open_err, sizeof open_err, "out of memory opening a trace");
        *e = GMP_ERR_NOMEM;
    }
    return r;
}

gmp_err gmp_reader_open_mem(gmp_reader **out, const void *data, size_t n,
                            const gmp_reader_opts *opts)
{
    gmp_err e;
    gmp_reader *r = open_begin(out, data || !n, "gmp_reader_open_mem", opts, &e);
    if (!r)
        return e;
    static const uint8_t none[1];
    r->in = n ? data : none;
    r->ilen = n;
    r->in_eof = 1;
    r->stats.file_bytes = n;
    return finish_open(out, r);
}

gmp_err gmp_reader_open_queue(gmp_reader **out, gmp_tq *q, const gmp_reader_opts *opts)
{
    gmp_err e;
    gmp_reader *r = open_begin(out, q != NULL, "gmp_reader_open_queue", opts, &e);
    if (!r)
        return e;
    gmp_tq_ref(q);
    r->q = q;
    return finish_open(out, r);
}

void gmp_reader_close(gmp_reader *r)
{
    if (!r)
        return;
    if (r->ra)
        r->ra_ops->end(r);
    if (r->q) {
        gmp_tq_close_read(r->q);
        gmp_tq_unref(r->q);
    }
    if (r->fd >= 0)
        close(r->fd);
    free(r->ibuf);
    free(r->fbuf);
    ZSTD_freeDCtx(r->dctx);
    deftab_free(&r->strings);
    deftab_free(&r->stacks);
    deftab_free(&r->ranges);
    deftab_free(&r->modules);
    deftab_free(&r->devices);
    deftab_free(&r->threads);
    for (size_t i = r->rel_pos; i < r->keys_n; i++) {
        const wslot *s = &r->slots[r->keys[i].slot];
        if (s->type == GMP_REC_NOTICE)
            free((char *)s->u.notice.message.ptr);
    }
    free(r->notice_out);
    free(r->slots);
    free(r->remap);
    free(r->keys);
    free(r->tmp);
    arena_free(&r->ar);
    free(r);
}

const char *gmp_reader_error(const gmp_reader *r)
{
    return r ? r->msg : "";
}

const char *gmp_reader_open_error(void)
{
    return open_err;
}

const gmp_rec_header *gmp_reader_header(const gmp_reader *r)
{
    return &r->header;
}

const gmp_reader_stats *gmp_reader_get_stats(const gmp_reader *r)
{
    return &r->stats;
}

/* ---- next ---- */

/* A fast path for ALLOC and FREE, the bulk of every trace: for a well-formed record it gives what
 * gmp_decode gives (checked by the fuzz build, GMP_READER_VERIFY_FAST); for anything unusual (a
 * cut or malformed record, a field out of range, a record of 128 bytes or more) it returns 0 and
 * gmp_decode decides, with its message. */
static inline int fast_u(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {
        *v = *p;
        *pp = p + 1;
        return 1;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Without a branch on the length: the 8 bytes at p (fbuf has FBUF_PAD readable bytes past
     * every record, and p < end) hold any varint of up to 56 bits; the lowest byte with its top
     * bit clear ends it, and the 7-bit groups are packed in three steps. A varint that ends past
     * the record is caught by the caller (p > end; no later field is read then); one of 9 or 10
     * bytes takes the loop below. */
    if (__builtin_expect(p < end, 1)) {
        uint64_t w;
        memcpy(&w, p, sizeof w);
        uint64_t stop = ~w & 0x8080808080808080ull;
        if (__builtin_expect(stop != 0, 1)) {
            uint64_t x = w & (stop ^ (stop - 1)) & 0x7f7f7f7f7f7f7f7full;
            x = (x & 0x007f007f007f007full) | (x & 0x7f007f007f007f00ull) >> 1;
            x = (x & 0x00003fff00003fffull) | (x & 0x3fff00003fff0000ull) >> 2;
            x = (x & 0x000000000fffffffull) | (x & 0x0fffffff00000000ull) >> 4;
            *v = x;
            *pp = p + (__builtin_ctzll(stop) >> 3) + 1;
            return 1;
        }
    }
#endif
    uint64_t x = 0;
    for (unsigned i = 0; i < 10 && p + i < end; i++) {
        uint8_t b = p[i];
        if (i == 9 && b > 1)
            return 0;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            *pp = p + i + 1;
            return 1;
        }
    }
    return 0;
}

static inline int fits_s32(uint64_t z)
{
    int64_t v = gmp_unzigzag(z);
    return v >= INT32_MIN && v <= INT32_MAX;
}

static int fast_mem(const uint8_t *src, size_t n, gmp_rec *d, uint64_t *prev_ns, size_t *used)
{
    if (n < 2 || src[1] >= 0x80 || src[1] > n - 2)
        return 0;
    const uint8_t *p = src + 2, *end = p + src[1];
    uint64_t f[13]; /* dt, device, kind, flags, api, address, size, stream, stack, range,
                       correlation, result, handle */
    int ok = 1;
    for (int i = 0; i < 13; i++)
        ok &= fast_u(&p, end, &f[i]);
    if (!ok || p > end)
        return 0;
    if (!fits_s32(f[1]) || f[2] >= GMP_MEM_KIND_COUNT || f[3] > UINT32_MAX || f[4] > UINT32_MAX ||
        f[8] > UINT32_MAX || f[9] > UINT32_MAX || !fits_s32(f[11]))
        return 0;
    d->type = src[0];
    d->time_ns = *prev_ns + (uint64_t)gmp_unzigzag(f[0]);
    d->tid = 0;
    gmp_rec_mem *m = &d->u.mem;
    m->device = (int32_t)gmp_unzigzag(f[1]);
    m->kind = (uint32_t)f[2];
    m->flags = (uint32_t)f[3];
    m->api = (uint32_t)f[4];
    m->address = f[5];
    m->size = f[6];
    m->stream = f[7];
    m->stack = (uint32_t)f[8];
    m->range = (uint32_t)f[9];
    m->correlation = f[10];
    m->result = (int32_t)gmp_unzigzag(f[11]);
    m->handle = f[12];
    *prev_ns = d->time_ns;
    *used = 2 + (size_t)src[1];
    return 1;
}

#ifdef GMP_READER_VERIFY_FAST
static void verify_fast(const uint8_t *src, size_t n, const gmp_rec *d, uint64_t prev, size_t used)
{
    gmp_rec x;
    size_t u = 0;
    if (gmp_decode(src, n, &x, &prev, &u, NULL) != GMP_OK || u != used || x.type != d->type ||
        x.time_ns != d->time_ns || prev != d->time_ns || x.u.mem.device != d->u.mem.device ||
        x.u.mem.kind != d->u.mem.kind || x.u.mem.flags != d->u.mem.flags ||
        x.u.mem.api != d->u.mem.api || x.u.mem.address != d->u.mem.address ||
        x.u.mem.size != d->u.mem.size || x.u.mem.stream != d->u.mem.stream ||
        x.u.mem.stack != d->u.mem.stack || x.u.mem.range != d->u.mem.range ||
        x.u.mem.correlation != d->u.mem.correlation || x.u.mem.result != d->u.mem.result ||
        x.u.mem.handle != d->u.mem.handle)
        abort();
}
#endif

static inline void emit_slot(gmp_reader *r, uint64_t slot)
{
    emit(r, &r->slots[slot]);
    r->slots[slot].type = 0; /* returned: dead for slot_room */
}

/* With read-ahead, in the decoder: hands the released part of the window over (gmp_readahead.h):
 * the slot array goes with it, the events kept for later move to another array. */
__attribute__((noinline)) /* out of next_inner's loop */
static gmp_err
package(gmp_reader *r)
{
    size_t first = r->rel_pos, n = r->rel_n - r->rel_pos;
    gmp_ra_window *w = gmp_ra_window_get(r->pkg_ra);
    if (!w)
        return fail(r, GMP_ERR_ARG, "reading stopped"); /* the reader is being closed */
    if (w->order_cap < n) {
        uint32_t *no = realloc(w->order, n * sizeof *no);
        if (!no) {
            gmp_ra_window_done(r->pkg_ra, w);
            return nomem(r);
        }
        w->order = no;
        w->order_cap = n;
    }
    for (size_t i = 0; i < n; i++)
        w->order[i] = (uint32_t)r->keys[first + i].slot;
    /* the decoder goes on with the window's old array, made at least as large as the one given */
    wslot *full = r->slots, *spare = w->slots;
    size_t full_cap = r->slots_cap, spare_cap = w->slots_cap;
    if (spare_cap < full_cap) {
        free(spare);
        w->slots = NULL;
        w->slots_cap = 0;
        spare = malloc(full_cap * sizeof *spare);
        if (!spare) {
            gmp_ra_window_done(r->pkg_ra, w);
            return nomem(r);
        }
        spare_cap = full_cap;
    }
    if (r->remap_cap < spare_cap) {
        uint32_t *nm = realloc(r->remap, spare_cap * sizeof *nm);
        if (!nm) {
            w->slots = spare;
            w->slots_cap = spare_cap;
            gmp_ra_window_done(r->pkg_ra, w);
            return nomem(r);
        }
        r->remap = nm;
        r->remap_cap = spare_cap;
    }
    size_t kept = r->keys_n - r->rel_n;
    for (size_t j = 0; j < kept; j++) {
        wkey *k = &r->keys[r->rel_n + j];
        spare[j] = full[k->slot]; /* a NOTICE's message goes with its slot */
        k->slot = j;
    }
    r->slots = spare;
    r->slots_cap = spare_cap;
    r->slots_n = kept;
    w->slots = full;
    w->slots_cap = full_cap;
    w->n = n;
    w->bytes = full_cap * sizeof *full + w->order_cap * sizeof *w->order;
    r->watermark = r->keys[r->rel_n - 1].time;
    r->stats.events += n;
    r->rel_pos = r->rel_n;
    gmp_ra_progress p = {r->stats.bytes_read, r->stats.frames, r->stats.events};
    gmp_ra_window_put(r->pkg_ra, w, &p);
    return GMP_OK;
}

static gmp_err next_inner(gmp_reader *r, const gmp_rec **rec)
{
    if (r->err && !r->draining)
        return r->err;
    if (r->notice_out) {
        free(r->notice_out);
        r->notice_out = NULL;
    }
    if (r->header_pending) {
        r->header_pending = 0;
        memset(&r->out, 0, sizeof r->out);
        r->out.type = GMP_REC_HEADER;
        r->out.u.header = r->header;
        *rec = &r->out;
        return GMP_OK;
    }
    for (;;) {
        if (r->rel_pos < r->rel_n) {
            if (__builtin_expect(r->pkg_ra != NULL, 0)) {
                /* read-ahead's decoder: the released part goes as a whole (then the keys kept
                 * move down, below) */
                gmp_err e = package(r);
                if (e)
                    return e;
                goto released;
            }
            /* keys are in time order and slots in file order: the slots read next are scattered
             * over a few runs, which the hardware does not prefetch */
            if (r->rel_pos + SLOT_AHEAD < r->rel_n) {
                const char *ps = (const char *)&r->slots[r->keys[r->rel_pos + SLOT_AHEAD].slot];
                __builtin_prefetch(ps);
                __builtin_prefetch(ps + sizeof(wslot) - 1);
            }
            uint64_t slot = r->keys[r->rel_pos].slot;
            r->watermark = r->keys[r->rel_pos].time;
            r->rel_pos++;
            emit_slot(r, slot);
            r->stats.events++;
            *rec = &r->out;
            return GMP_OK;
        }
    released:
        if (r->rel_n) {
            size_t left = r->keys_n - r->rel_n;
            memmove(r->keys, r->keys + r->rel_n, left * sizeof *r->keys);
            r->keys_n = left;
            r->sorted_n = left;
            r->rel_n = r->rel_pos = 0;
        }
        if (r->fpos >= r->flen) {
            if (r->eof) {
                if (r->keys_n) {
                    window_sort(r);
                    window_release(r, r->keys_n);
                    continue;
                }
                return GMP_END;
            }
            gmp_err e = next_frame(r);
            if (e == GMP_END) {
                r->eof = 1;
                continue;
            }
            if (e)
                return e;
            continue;
        }

        /* decode one record */
        size_t off = r->fpos, used = 0;
        const char *msg = NULL;
        gmp_rec *d = &r->dec;
        const uint8_t *src = r->fbuf + off;
        gmp_err e = GMP_OK;
        if (src[0] == GMP_REC_ALLOC || src[0] == GMP_REC_FREE) {
#ifdef GMP_READER_VERIFY_FAST
            uint64_t prev0 = r->prev_ns;
#endif
            if (!fast_mem(src, r->flen - off, d, &r->prev_ns, &used))
                e = gmp_decode(src, r->flen - off, d, &r->prev_ns, &used, &msg);
#ifdef GMP_READER_VERIFY_FAST
            else
                verify_fast(src, r->flen - off, d, prev0, used);
#endif
        } else {
            e = gmp_decode(src, r->flen - off, d, &r->prev_ns, &used, &msg);
        }
        if (e == GMP_ERR_TRUNCATED)
            return fail_rec(r, off, "%s (a record must not span frames)",
                            msg ? msg : "record cut short");
        if (e)
            return fail_rec(r, off, "%s", msg ? msg : gmp_err_str(e));
        r->fpos += used;
        unsigned type = d->type;
        r->stats.records[type]++;

        unsigned cls = r->cls[type];
        if (cls <= CLS_UNKNOWN_EVENT) {
            r->stats.unknown_records++;
            if (cls == CLS_UNKNOWN_EVENT) {
                /* A future event: its payload starts with dt, which keeps the time chain. */
                if (!r->in_buffer)
                    return fail_rec(r, off,
                                    "event (type 0x%02x) before any BUFFER record "
                                    "in its frame",
                                    type);
                uint64_t plen = 0, z = 0;
                const uint8_t *p = r->fbuf + off;
                size_t lw = gmp_get_uvarint(p + 1, used - 1, &plen);
                size_t zw = lw ? gmp_get_uvarint(p + 1 + lw, (size_t)plen, &z) : 0;
                if (!zw)
                    return fail_rec(r, off, "event of unknown type 0x%02x has no time delta", type);
                r->prev_ns += (uint64_t)gmp_unzigzag(z);
                d->time_ns = r->prev_ns;
                d->tid = r->cur_tid;
                r->ev_read++;
            }
            if (r->file_order) {
                r->out = *d;
                *rec = &r->out;
                return GMP_OK;
            }
            continue;
        }

        if (cls == CLS_EVENT) {
            if (!r->in_buffer)
                return fail_rec(r, off, "%s event before any BUFFER record in its frame",
                                gmp_rec_type_name(type));
            d->tid = r->cur_tid;
            e = check_event(r, off);
            if (e)
                return e;
            if (r->file_order || d->time_ns < r->watermark) {
                if (!r->file_order)
                    r->stats.late_events++;
                r->stats.events++;
                r->out = *d;
                *rec = &r->out;
                return GMP_OK;
            }
            if ((r->keys_n == r->keys_cap && window_grow(r)) || slot_room(r))
                return fail(r, GMP_ERR_NOMEM, "out of memory for the reorder window (%zu events)",
                            r->keys_n);
            uint64_t slot = r->slots_n++;
            wslot *s = &r->slots[slot];
            s->time = d->time_ns;
            s->tid = d->tid;
            s->type = type;
            memcpy(&s->u, &d->u, sizeof s->u);
            if (type == GMP_REC_NOTICE) {
                gmp_str *m = &s->u.notice.message;
                char *c = gmp_str_dup(*m);
                if (!c) {
                    s->type = 0; /* owns nothing */
                    return nomem(r);
                }
                m->ptr = c;
            }
            r->keys[r->keys_n].time = d->time_ns;
            r->keys[r->keys_n].slot = slot;
            r->keys_n++;
            if (r->keys_n > r->max_window) {
                window_sort(r);
                size_t k = r->keys_n - r->max_window / 2;
                window_release(r, k ? k : 1);
            }
            continue;
        }

        switch (type) {
        case GMP_REC_HEADER: return fail_rec(r, off, "a second HEADER record");
        case GMP_REC_BUFFER:
            r->in_buffer = 1;
            r->cur_tid = d->u.buffer.tid;
            break;
        case GMP_REC_SYNC:
            if (!r->file_order && r->keys_n) {
                window_sort(r);
                window_release(r, window_upto(r, d->u.sync.time_ns));
            }
            break;
        default:
            e = define(r, off);
            if (e)
                return e;
            r->out = *d;
            *rec = &r->out;
            return GMP_OK;
        }
        if (r->file_order) {
            r->out = *d;
            *rec = &r->out;
            return GMP_OK;
        }
    }
}

const void *gmp_reader_peek(const gmp_reader *r, size_t ahead, unsigned *type)
{
    const wslot *s;
    if (r->ra) {
        const gmp_ra_window *w = r->rwin;
        size_t k = r->rwin_pos + ahead - 1; /* rwin_pos is the next to return */
        if (!w || !ahead || k >= w->n)
            goto none;
        s = &((const wslot *)w->slots)[w->order[k]];
    } else {
        size_t k = r->rel_pos + ahead - 1; /* rel_pos is the next to return */
        if (!ahead || k >= r->rel_n)
            goto none;
        s = &r->slots[r->keys[k].slot];
    }
    *type = s->type;
    return &s->u;
none:
    *type = 0;
    return NULL;
}

const gmp_rec_mem *gmp_reader_peek_mem(const gmp_reader *r, size_t ahead)
{
    unsigned type;
    const void *p = gmp_reader_peek(r, ahead, &type);
    return type == GMP_REC_ALLOC || type == GMP_REC_FREE ? p : NULL;
}

/* ---- next (the read-ahead's side is gmp_reader_ra.c) ---- */

gmp_err gmp_reader_define_decoded(gmp_reader *r)
{
    return define(r, 0);
}

gmp_err gmp_reader_next(gmp_reader *r, const gmp_rec **rec)
{
    if (!r || !rec)
        return GMP_ERR_ARG;
    if (r->ra_batch && !r->ra)
        r->ra_ops->begin(r);
    if (r->ra) {
        /* the next event of the window being returned, as ra_ops->next would (inline: every
         * record) */
        gmp_ra_window *w = r->rwin;
        if (w && r->rwin_pos < w->n && !r->notice_out) {
            const wslot *ws = w->slots;
            size_t i = r->rwin_pos++;
            if (i + SLOT_AHEAD < w->n) { /* as in next_inner */
                const char *ps = (const char *)&ws[w->order[i + SLOT_AHEAD]];
                __builtin_prefetch(ps);
                __builtin_prefetch(ps + sizeof(wslot) - 1);
            }
            emit(r, &ws[w->order[i]]);
            *rec = &r->out;
            return GMP_OK;
        }
        return r->ra_ops->next(r, rec);
    }
    gmp_err e = next_inner(r, rec);
    if (e < 0 && !r->draining && !r->file_order && r->keys_n) {
        /* bad input: first return the events the window holds (all read before the error) */
        r->draining = 1;
        r->eof = 1;
        r->fpos = r->flen;
        e = next_inner(r, rec);
    }
    if (r->draining && e == GMP_END) {
        r->draining = 0;
        return r->err;
    }
    return e;
}

/* ---- completeness ---- */

static const char *reason_short(unsigned i)
{
    static const char *const n[6] = {"other",         "buffers full", "write failed",
                                     "cupti dropped", "reentrant",    "other"};
    return n[i];
}

int gmp_reader_completeness(const gmp_reader *r, char *buf, size_t n)
{
    char lost[256] = "";
    const gmp_reader_stats *s = &r->stats;
    if (s->lost_events) {
        size_t o = (size_t)snprintf(lost, sizeof lost, "; %llu events lost by the producer (",
                                    (unsigned long long)s->lost_events);
        int first = 1;
        for (unsigned i = 1; i <= 6 && o < sizeof lost; i++) {
            unsigned k = i % 6; /* reasons 1..5, then unknown reasons last */
            if (!r->lost_by_reason[k])
                continue;
            o += (size_t)snprintf(lost + o, sizeof lost - o, "%s%s: %llu", first ? "" : ", ",
                                  reason_short(k), (unsigned long long)r->lost_by_reason[k]);
            first = 0;
        }
        if (o < sizeof lost)
            snprintf(lost + o, sizeof lost - o, ")");
    }
    char tmp[1024];
    int complete = 0;
    if (r->err) {
        snprintf(tmp, sizeof tmp, "incomplete: %llu events read, then: %s%s",
                 (unsigned long long)r->ev_read, r->msg, lost);
    } else if (s->truncated) {
        unsigned long long total = s->file_bytes ? s->file_bytes : r->good_end + s->bytes_discarded;
        snprintf(tmp, sizeof tmp,
                 "incomplete: file cut at byte %llu of %llu (%llu bytes after the last whole frame "
                 "discarded); %s; %llu events read%s",
                 (unsigned long long)r->good_end, total, (unsigned long long)s->bytes_discarded,
                 s->has_end ? "the END record was read"
                            : "no END record — the program was killed or the disk filled",
                 (unsigned long long)r->ev_read, lost);
    } else if (!s->has_end) {
        snprintf(tmp, sizeof tmp,
                 "incomplete: no END record after %llu events — the program was killed or the "
                 "trace was not closed%s",
                 (unsigned long long)r->ev_read, lost);
    } else if (s->end.events != r->end_ev || s->end.allocs != r->end_allocs ||
               s->end.frees != r->end_frees || s->end.lost != r->end_lost) {
        size_t o = (size_t)snprintf(tmp, sizeof tmp, "incomplete: END says");
        const char *sep = " ";
        if (s->end.events != r->end_ev) {
            o += (size_t)snprintf(tmp + o, sizeof tmp - o, "%s%llu events, %llu read", sep,
                                  (unsigned long long)s->end.events, (unsigned long long)r->end_ev);
            sep = "; ";
        }
        if (s->end.allocs != r->end_allocs) {
            o += (size_t)snprintf(tmp + o, sizeof tmp - o, "%s%llu allocs, %llu read", sep,
                                  (unsigned long long)s->end.allocs,
                                  (unsigned long long)r->end_allocs);
            sep = "; ";
        }
        if (s->end.frees != r->end_frees) {
            o += (size_t)snprintf(tmp + o, sizeof tmp - o, "%s%llu frees, %llu read", sep,
                                  (unsigned long long)s->end.frees,
                                  (unsigned long long)r->end_frees);
            sep = "; ";
        }
        if (s->end.lost != r->end_lost)
            o += (size_t)snprintf(tmp + o, sizeof tmp - o, "%s%llu lost, %llu in LOST records", sep,
                                  (unsigned long long)s->end.lost, (unsigned long long)r->end_lost);
        if (o < sizeof tmp)
            snprintf(tmp + o, sizeof tmp - o, "%s", lost);
    } else if (s->lost_events) {
        snprintf(tmp, sizeof tmp, "incomplete: %llu events, END totals match%s",
                 (unsigned long long)r->end_ev, lost);
    } else {
        snprintf(tmp, sizeof tmp, "complete: %llu events, END totals match",
                 (unsigned long long)r->end_ev);
        complete = 1;
    }
    if (buf && n)
        snprintf(buf, n, "%s", tmp);
    return complete;
}

/* ---- lookups ---- */

gmp_str gmp_reader_string(const gmp_reader *r, uint32_t id)
{
    const gmp_str *s = deftab_get(&r->strings, id);
    if (s)
        return *s;
    gmp_str none = {"", 0};
    return none;
}

const gmp_rec_stack *gmp_reader_stack(const gmp_reader *r, uint32_t id)
{
    return deftab_get(&r->stacks, id);
}

uint32_t gmp_reader_stack_index(const gmp_reader *r, uint32_t id)
{
    return deftab_index(&r->stacks, id);
}

size_t gmp_reader_stack_count(const gmp_reader *r)
{
    return r->stacks.n;
}

uint32_t gmp_reader_string_index(const gmp_reader *r, uint32_t id)
{
    return deftab_index(&r->strings, id);
}

const gmp_rec_range *gmp_reader_range(const gmp_reader *r, uint32_t id)
{
    return deftab_get(&r->ranges, id);
}

const gmp_rec_device *gmp_reader_device(const gmp_reader *r, uint32_t ordinal)
{
    return deftab_get(&r->devices, ordinal);
}

const gmp_rec_thread *gmp_reader_thread(const gmp_reader *r, uint32_t tid)
{
    return deftab_get(&r->threads, tid);
}

const gmp_rec_module *gmp_reader_module(const gmp_reader *r, uint32_t id)
{
    return deftab_get(&r->modules, id);
}

size_t gmp_reader_device_count(const gmp_reader *r)
{
    return r->devices.n;
}

const gmp_rec_device *gmp_reader_device_at(const gmp_reader *r, size_t i)
{
    return i < r->devices.n ? r->devices.items[i] : NULL;
}

size_t gmp_reader_module_count(const gmp_reader *r)
{
    return r->modules.n;
}

const gmp_rec_module *gmp_reader_module_at(const gmp_reader *r, size_t i)
{
    return i < r->modules.n ? r->modules.items[i] : NULL;
}

size_t gmp_reader_range_path(const gmp_reader *r, uint32_t id, char *buf, size_t n)
{
    size_t total = 0;
    const gmp_rec_range *g;
    for (g = deftab_get(&r->ranges, id); g; g = deftab_get(&r->ranges, g->parent)) {
        total += gmp_reader_string(r, g->name).len;
        if (g->parent)
            total++;
    }
    if (buf && n) {
        size_t lim = n - 1, pos = total; /* bytes at index >= lim are not written */
        for (g = deftab_get(&r->ranges, id); g; g = deftab_get(&r->ranges, g->parent)) {
            gmp_str s = gmp_reader_string(r, g->name);
            pos -= s.len;
            if (pos < lim)
                memcpy(buf + pos, s.ptr, s.len < lim - pos ? s.len : lim - pos);
            if (g->parent) {
                pos--;
                if (pos < lim)
                    buf[pos] = '/';
            }
        }
        buf[total < lim ? total : lim] = 0;
    }
    return total;
}
