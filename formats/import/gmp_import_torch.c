/* gmp_import_torch: PyTorch memory snapshot -> gpumemprof trace. See gmp_import_torch.h for the
 * mapping and docs/import.md for the user's view.
 *
 * Three steps: (1) read the pickle (gmp_pickle: plain data only) and turn every trace entry into a
 * small op with its device and time; (2) reconstruct what existed before the window from the
 * final `segments`; (3) write the pre-window state at the start, then the ops in time order (ties:
 * device, then entry order), with one thread and explicit times (gmp_writer, threaded = 0). */
#include "gmp_map.h"
#include "gmp_import_torch.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmp_pickle.h"
#include "gmp_trace.h"
#include "gmp_writer.h"

#ifndef GMP_VERSION_STRING
#define GMP_VERSION_STRING "?"
#endif

#define MAX_SIZE ((uint64_t)1 << 60)      /* larger sizes are refused as corrupt */
#define MAX_FRAMES 256                    /* innermost frames kept per stack */
#define TID 1                             /* the one thread of an imported trace */
#define FILLER_ADDR 0xf000000000000000ull /* + device: pre-window bytes with no address */
#define FILLER_POOL 0xd000000000000000ull /* + device: pre-window segments with no address */
#define SYNC_EVERY 8192
#define TRACE_BASE 1000000ull          /* trace time of the state before the window (1 ms) */
#define CUDA_ERROR_MEMORY_ALLOCATION 2 /* cudaErrorMemoryAllocation */

/* ---- a small map from 64-bit keys to 64-bit values ---- */

/* ---- state ---- */

enum op_type { OP_SEG_ALLOC, OP_SEG_FREE, OP_MAP, OP_UNMAP, OP_ALLOC, OP_FREE, OP_OOM };

typedef struct op {
    uint64_t t, addr, size, stream, extra; /* extra: OOM: device_free */
    const gmp_pickle_value *frames;
    uint32_t seq;
    int32_t dev;
    uint8_t type;
} op;

/* First event of an address in the window: FIRST_ALLOC, or FIRST_FREE with the freed size. */
#define FIRST_ALLOC 1u
#define FIRST_FREE 2u
#define FIRST_VAL(type, size) (((uint64_t)(size) << 2) | (type))

typedef struct pre_block {
    uint64_t addr, size;
    const gmp_pickle_value *frames;
} pre_block;

typedef struct device {
    int present;
    gmp_omap seg_first, blk_first; /* address -> FIRST_VAL of the window's first event */
    uint64_t seg_in, seg_out;      /* window: segment_alloc / segment_free bytes */
    uint64_t map_in, map_out;      /* window: segment_map / segment_unmap bytes */
    uint64_t blk_in, blk_out;      /* window: alloc / free_completed bytes */
    uint64_t final_seg, final_exp; /* at the dump: non-expandable and expandable segment bytes */
    uint64_t final_alloc;          /* at the dump: requested bytes of active blocks */
    uint64_t pre_seg_sum, pre_blk_sum; /* reconstructed by address */
    uint64_t exp_mapped;               /* while writing: mapped bytes of expandable segments */
    int has_exp;
} device;

typedef struct imp {
    gmp_import_torch_stats st;
    char *msg;
    size_t msglen;
    gmp_err err;
    device *dev; /* GMP_TORCH_MAX_DEVICES */
    op *ops;
    size_t nops, capops;
    pre_block *pre_segs, *pre_blks;
    size_t npre_segs, npre_blks, cap_pre_segs, cap_pre_blks;
    int32_t *pre_seg_dev, *pre_blk_dev;
    /* writing */
    gmp_writer *w;
    gmp_wthread *th;
    gmp_omap stacks; /* frames list (pointer) -> stack id + 1 */
    uint32_t api_malloc, api_free;
    uint64_t written, last_t;
    char notice[512];
    const char *ctx; /* for messages: what is being read (a static string) */
} imp;

__attribute__((format(printf, 3, 4))) static gmp_err failf(imp *I, gmp_err e, const char *fmt, ...)
{
    if (I->err != GMP_OK)
        return I->err;
    I->err = e;
    if (I->msg && I->msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(I->msg, I->msglen, fmt, ap);
        va_end(ap);
    }
    return e;
}

static gmp_err nomem(imp *I)
{
    return failf(I, GMP_ERR_NOMEM, "out of memory");
}

static device *dev_get(imp *I, int64_t d)
{
    if (d < 0 || d >= GMP_TORCH_MAX_DEVICES) {
        failf(I, GMP_ERR_FORMAT,
              "not a valid PyTorch memory snapshot: device %" PRId64 " (expected 0 to %d)", d,
              GMP_TORCH_MAX_DEVICES - 1);
        return NULL;
    }
    device *v = &I->dev[d];
    if (!v->present) {
        v->present = 1;
        I->st.devices++;
    }
    return v;
}

/* ---- reading fields ---- */

static int field_u64(imp *I, const gmp_pickle_value *d, const char *key, int required,
                     uint64_t *out)
{
    const gmp_pickle_value *v = gmp_pickle_dict_get(d, key);
    if (!v || gmp_pickle_type_of(v) == GMP_PK_NONE) {
        if (required) {
            failf(I, GMP_ERR_FORMAT, "not a valid PyTorch memory snapshot: %s without '%s'", I->ctx,
                  key);
            return -1;
        }
        return 0;
    }
    if (gmp_pickle_get_u64(v, out) < 0) {
        int64_t s;
        if (gmp_pickle_get_i64(v, &s) == 0 && strcmp(key, "stream") == 0) {
            *out = (uint64_t)s; /* a stream is a pointer: any bits */
            return 1;
        }
        failf(I, GMP_ERR_FORMAT,
              "not a valid PyTorch memory snapshot: %s: '%s' is a %s, expected a non-negative "
              "int",
              I->ctx, key, gmp_pickle_type_name(v));
        return -1;
    }
    return 1;
}

static int size_ok(imp *I, uint64_t s)
{
    if (s > MAX_SIZE) {
        failf(I, GMP_ERR_FORMAT, "not a valid PyTorch memory snapshot: %s: size %" PRIu64, I->ctx,
              s);
        return 0;
    }
    return 1;
}

static int add_checked(imp *I, uint64_t *sum, uint64_t v)
{
    if (*sum > UINT64_MAX - v) {
        failf(I, GMP_ERR_FORMAT, "not a valid PyTorch memory snapshot: sizes add up past 2^64");
        return -1;
    }
    *sum += v;
    return 0;
}

static int push_op(imp *I, const op *o)
{
    if (I->nops == I->capops) {
        size_t nc = I->capops ? I->capops * 2 : 1024;
        op *n = realloc(I->ops, nc * sizeof *n);
        if (!n)
            return nomem(I), -1;
        I->ops = n;
        I->capops = nc;
    }
    I->ops[I->nops++] = *o;
    return 0;
}

static int push_pre(imp *I, int seg, int32_t d, uint64_t addr, uint64_t size,
                    const gmp_pickle_value *frames)
{
    pre_block **arr = seg ? &I->pre_segs : &I->pre_blks;
    int32_t **devs = seg ? &I->pre_seg_dev : &I->pre_blk_dev;
    size_t *n = seg ? &I->npre_segs : &I->npre_blks;
    size_t *cap = seg ? &I->cap_pre_segs : &I->cap_pre_blks;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        pre_block *na = realloc(*arr, nc * sizeof *na);
        if (!na)
            return nomem(I), -1;
        *arr = na;
        int32_t *nd = realloc(*devs, nc * sizeof *nd);
        if (!nd)
            return nomem(I), -1;
        *devs = nd;
        *cap = nc;
    }
    (*arr)[*n] = (pre_block){addr, size, frames};
    (*devs)[*n] = d;
    (*n)++;
    return 0;
}

/* Records the first event of addr in the window. */
static int first_event(imp *I, gmp_omap *m, uint64_t addr, unsigned type, uint64_t size)
{
    int fresh;
    uint64_t *v = gmp_omap_put(m, addr, &fresh);
    if (!v)
        return nomem(I), -1;
    if (fresh)
        *v = FIRST_VAL(type, size);
    return 0;
}

/* ---- step 1: the trace entries ---- */

static int read_entry(imp *I, int32_t d, device *dv, const gmp_pickle_value *e, uint32_t seq,
                      uint64_t *prev_t)
{
    I->ctx = "a trace entry";
    if (gmp_pickle_type_of(e) != GMP_PK_DICT)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a trace entry is a %s, expected a dict",
                     gmp_pickle_type_name(e)),
               -1;
    I->st.entries++;
    const gmp_pickle_value *a = gmp_pickle_dict_get(e, "action");
    size_t alen;
    const char *action = gmp_pickle_type_of(a) == GMP_PK_STR ? gmp_pickle_get_str(a, &alen) : NULL;
    if (!action)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a trace entry without an 'action'"),
               -1;
    op o;
    memset(&o, 0, sizeof o);
    o.dev = d;
    o.seq = seq;
    if (strcmp(action, "alloc") == 0)
        o.type = OP_ALLOC;
    else if (strcmp(action, "free_completed") == 0)
        o.type = OP_FREE;
    else if (strcmp(action, "segment_alloc") == 0)
        o.type = OP_SEG_ALLOC;
    else if (strcmp(action, "segment_free") == 0)
        o.type = OP_SEG_FREE;
    else if (strcmp(action, "segment_map") == 0)
        o.type = OP_MAP;
    else if (strcmp(action, "segment_unmap") == 0)
        o.type = OP_UNMAP;
    else if (strcmp(action, "oom") == 0)
        o.type = OP_OOM;
    else {
        I->st.ignored++; /* free_requested, snapshot, and what a newer PyTorch may add */
        return 0;
    }
    /* time: time_us when present, else 1 us after the previous entry; never backwards */
    uint64_t us, t = *prev_t + 1000;
    int ht = field_u64(I, e, "time_us", 0, &us);
    if (ht < 0)
        return -1;
    if (ht > 0 && us <= UINT64_MAX / 1000 - 1) {
        t = us * 1000;
        I->st.has_time = 1;
    }
    if (t < *prev_t)
        t = *prev_t;
    *prev_t = t;
    o.t = t;
    if (field_u64(I, e, "size", 1, &o.size) < 0 || !size_ok(I, o.size))
        return -1;
    if (field_u64(I, e, "stream", 0, &o.stream) < 0)
        return -1;
    const gmp_pickle_value *fr = gmp_pickle_dict_get(e, "frames");
    o.frames = gmp_pickle_type_of(fr) == GMP_PK_LIST ? fr : NULL;
    if (o.type == OP_OOM) {
        if (field_u64(I, e, "device_free", 0, &o.extra) < 0)
            return -1;
        I->st.ooms++;
        return push_op(I, &o);
    }
    if (field_u64(I, e, "addr", 1, &o.addr) < 0)
        return -1;
    switch (o.type) {
    case OP_ALLOC:
        I->st.allocs++;
        if (add_checked(I, &dv->blk_in, o.size) < 0 ||
            first_event(I, &dv->blk_first, o.addr, FIRST_ALLOC, 0) < 0)
            return -1;
        break;
    case OP_FREE:
        I->st.frees++;
        if (add_checked(I, &dv->blk_out, o.size) < 0 ||
            first_event(I, &dv->blk_first, o.addr, FIRST_FREE, o.size) < 0)
            return -1;
        break;
    case OP_SEG_ALLOC:
        I->st.segments++;
        if (add_checked(I, &dv->seg_in, o.size) < 0 ||
            first_event(I, &dv->seg_first, o.addr, FIRST_ALLOC, 0) < 0)
            return -1;
        break;
    case OP_SEG_FREE:
        I->st.segment_frees++;
        if (add_checked(I, &dv->seg_out, o.size) < 0 ||
            first_event(I, &dv->seg_first, o.addr, FIRST_FREE, o.size) < 0)
            return -1;
        break;
    case OP_MAP:
        I->st.segments++;
        dv->has_exp = 1;
        if (add_checked(I, &dv->map_in, o.size) < 0)
            return -1;
        break;
    case OP_UNMAP:
        I->st.segment_frees++;
        dv->has_exp = 1;
        if (add_checked(I, &dv->map_out, o.size) < 0)
            return -1;
        break;
    default: break;
    }
    return push_op(I, &o);
}

/* PyTorch records the last trace_alloc_max_entries entries of each device in a ring buffer and,
 * since it can say so, sets allocator_settings.trace_alloc_overflowed when older ones were
 * overwritten. Either may be one value or a list with one per device; a value at the top level
 * of the snapshot is read too. Never fails: a value of another type is ignored. */
static void flag_at(const gmp_pickle_value *v, size_t d, int *flag, uint64_t *num)
{
    if (gmp_pickle_type_of(v) == GMP_PK_LIST || gmp_pickle_type_of(v) == GMP_PK_TUPLE)
        v = gmp_pickle_item(v, d);
    int b;
    uint64_t u;
    if (flag && gmp_pickle_get_bool(v, &b) == 0)
        *flag = b;
    else if (gmp_pickle_get_u64(v, &u) == 0) {
        if (flag)
            *flag = u != 0;
        if (num)
            *num = u;
    }
}

static void read_overflow(imp *I, const gmp_pickle_value *root)
{
    const gmp_pickle_value *where[2] = {gmp_pickle_dict_get(root, "allocator_settings"), root};
    for (int k = 0; k < 2; k++) {
        const gmp_pickle_value *of = gmp_pickle_dict_get(where[k], "trace_alloc_overflowed");
        const gmp_pickle_value *mx = gmp_pickle_dict_get(where[k], "trace_alloc_max_entries");
        if (!of && !mx)
            continue;
        size_t n = 1;
        if (gmp_pickle_type_of(of) == GMP_PK_LIST || gmp_pickle_type_of(of) == GMP_PK_TUPLE)
            n = gmp_pickle_len(of);
        for (size_t d = 0; d < n && d < 32; d++) {
            int flag = 0;
            flag_at(of, d, &flag, NULL);
            if (flag) {
                I->st.overflowed = 1;
                I->st.overflowed_devices |= n > 1 ? 1u << d : 0;
            }
        }
        uint64_t m = 0;
        flag_at(mx, 0, NULL, &m);
        I->st.trace_max_entries = m;
        return;
    }
}

static int read_traces(imp *I, const gmp_pickle_value *traces)
{
    if (gmp_pickle_type_of(traces) != GMP_PK_LIST)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: 'device_traces' is a %s, expected a "
                     "list",
                     gmp_pickle_type_name(traces)),
               -1;
    size_t nd = gmp_pickle_len(traces);
    for (size_t d = 0; d < nd; d++) {
        const gmp_pickle_value *t = gmp_pickle_item(traces, d);
        if (gmp_pickle_type_of(t) != GMP_PK_LIST)
            return failf(I, GMP_ERR_FORMAT,
                         "not a valid PyTorch memory snapshot: device_traces[%zu] is a %s, "
                         "expected a list",
                         d, gmp_pickle_type_name(t)),
                   -1;
        size_t n = gmp_pickle_len(t);
        if (!n)
            continue;
        device *dv = dev_get(I, (int64_t)d);
        if (!dv)
            return -1;
        uint64_t prev_t = 1000000000ull; /* without times: 1 s, then 1 us per entry */
        for (size_t i = 0; i < n; i++)
            if (read_entry(I, (int32_t)d, dv, gmp_pickle_item(t, i), (uint32_t)i, &prev_t) < 0)
                return -1;
    }
    return 0;
}

/* ---- step 2: the state at the dump, and what existed before the window ---- */

static int read_block(imp *I, int32_t d, device *dv, const gmp_pickle_value *b, uint64_t *offset)
{
    I->ctx = "a block";
    if (gmp_pickle_type_of(b) != GMP_PK_DICT)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: a block is a %s, expected a dict",
                     gmp_pickle_type_name(b)),
               -1;
    uint64_t size, addr = *offset, req;
    if (field_u64(I, b, "size", 1, &size) < 0 || !size_ok(I, size))
        return -1;
    int has_addr = field_u64(I, b, "address", 0, &addr);
    if (has_addr < 0)
        return -1;
    *offset = addr + size;
    const gmp_pickle_value *st = gmp_pickle_dict_get(b, "state");
    if (!gmp_pickle_str_eq(st, "active_allocated") && !gmp_pickle_str_eq(st, "active_pending_free"))
        return 0;
    /* what the trace counts for a block is the size requested (alloc entries carry it); the
     * legacy format keeps it in history[0].real_size */
    const gmp_pickle_value *frames = gmp_pickle_dict_get(b, "frames");
    int hr = field_u64(I, b, "requested_size", 0, &req);
    if (hr < 0)
        return -1;
    if (hr == 0) {
        req = size;
        const gmp_pickle_value *h = gmp_pickle_item(gmp_pickle_dict_get(b, "history"), 0);
        if (gmp_pickle_type_of(h) == GMP_PK_DICT) {
            I->ctx = "a block's history";
            if (field_u64(I, h, "real_size", 0, &req) < 0)
                return -1;
            if (!frames)
                frames = gmp_pickle_dict_get(h, "frames");
        }
    }
    if (!size_ok(I, req) || add_checked(I, &dv->final_alloc, req) < 0)
        return -1;
    if (gmp_pickle_type_of(frames) != GMP_PK_LIST)
        frames = NULL;
    if (!gmp_omap_get(&dv->blk_first, addr)) { /* alive at the dump, untouched by the window */
        if (push_pre(I, 0, d, addr, req, frames) < 0 || add_checked(I, &dv->pre_blk_sum, req) < 0)
            return -1;
    }
    return 0;
}

static int read_segments(imp *I, const gmp_pickle_value *segs)
{
    if (gmp_pickle_type_of(segs) != GMP_PK_LIST)
        return failf(I, GMP_ERR_FORMAT,
                     "not a valid PyTorch memory snapshot: 'segments' is a %s, expected a list",
                     gmp_pickle_type_name(segs)),
               -1;
    for (size_t i = 0; i < gmp_pickle_len(segs); i++) {
        const gmp_pickle_value *s = gmp_pickle_item(segs, i);
        I->ctx = "a segment";
        if (gmp_pickle_type_of(s) != GMP_PK_DICT)
            return failf(I, GMP_ERR_FORMAT,
                         "not a valid PyTorch memory snapshot: a segment is a %s, expected a dict",
                         gmp_pickle_type_name(s)),
                   -1;
        uint64_t d, addr, size;
        if (field_u64(I, s, "device", 1, &d) < 0 || field_u64(I, s, "address", 1, &addr) < 0 ||
            field_u64(I, s, "total_size", 1, &size) < 0 || !size_ok(I, size))
            return -1;
        device *dv = dev_get(I, d > INT32_MAX ? -1 : (int64_t)d);
        if (!dv)
            return -1;
        int exp = 0;
        (void)gmp_pickle_get_bool(gmp_pickle_dict_get(s, "is_expandable"), &exp);
        if (exp) {
            dv->has_exp = 1;
            if (add_checked(I, &dv->final_exp, size) < 0)
                return -1;
        } else {
            if (add_checked(I, &dv->final_seg, size) < 0)
                return -1;
            if (!gmp_omap_get(&dv->seg_first, addr)) {
                if (push_pre(I, 1, (int32_t)d, addr, size, NULL) < 0 ||
                    add_checked(I, &dv->pre_seg_sum, size) < 0)
                    return -1;
            }
        }
        const gmp_pickle_value *blocks = gmp_pickle_dict_get(s, "blocks");
        if (blocks && gmp_pickle_type_of(blocks) != GMP_PK_LIST)
            return failf(I, GMP_ERR_FORMAT,
                         "not a valid PyTorch memory snapshot: a segment's 'blocks' is a %s",
                         gmp_pickle_type_name(blocks)),
                   -1;
        uint64_t off = addr;
        for (size_t j = 0; j < gmp_pickle_len(blocks); j++)
            if (read_block(I, (int32_t)d, dv, gmp_pickle_item(blocks, j), &off) < 0)
                return -1;
    }
    return 0;
}

/* Addresses whose first event in the window is a free existed before it. */
static int pre_from_first_frees(imp *I, int seg)
{
    for (int32_t d = 0; d < GMP_TORCH_MAX_DEVICES; d++) {
        device *dv = &I->dev[d];
        if (!dv->present)
            continue;
        gmp_omap *m = seg ? &dv->seg_first : &dv->blk_first;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->used[i] || (m->vals[i] & 3u) != FIRST_FREE)
                continue;
            uint64_t size = m->vals[i] >> 2;
            if (push_pre(I, seg, d, m->keys[i], size, NULL) < 0 ||
                add_checked(I, seg ? &dv->pre_seg_sum : &dv->pre_blk_sum, size) < 0)
                return -1;
        }
    }
    return 0;
}

static int cmp_op(const void *a, const void *b)
{
    const op *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* ---- step 3: writing ---- */

static uint32_t str_id(imp *I, const gmp_pickle_value *v)
{
    size_t n;
    const char *s = gmp_pickle_get_str(v, &n);
    if (!s)
        return gmp_writer_string(I->w, "", 0);
    return gmp_writer_string(I->w, s, n);
}

/* The stack of a frames list (innermost first, as PyTorch writes it), interned once per list. */
static uint32_t stack_of(imp *I, const gmp_pickle_value *frames)
{
    size_t n = gmp_pickle_len(frames);
    if (!frames || !n)
        return 0;
    int fresh;
    uint64_t *cached = gmp_omap_put(&I->stacks, (uint64_t)(uintptr_t)frames, &fresh);
    if (!cached) {
        nomem(I);
        return 0;
    }
    if (!fresh)
        return (uint32_t)*cached;
    if (n > MAX_FRAMES)
        n = MAX_FRAMES;
    uint32_t parent = 0;
    for (size_t i = n; i-- > 0;) {
        const gmp_pickle_value *f = gmp_pickle_item(frames, i);
        if (gmp_pickle_type_of(f) != GMP_PK_DICT)
            continue;
        uint64_t line = 0;
        if (gmp_pickle_get_u64(gmp_pickle_dict_get(f, "line"), &line) < 0 || line > UINT32_MAX)
            line = 0;
        uint32_t file = str_id(I, gmp_pickle_dict_get(f, "filename"));
        uint32_t fn = str_id(I, gmp_pickle_dict_get(f, "name"));
        uint32_t id = gmp_writer_stack_python(I->w, parent, file, fn, (uint32_t)line);
        if (id)
            parent = id;
    }
    *cached = parent;
    return parent;
}

static void emit(imp *I, gmp_rec *r, uint64_t t)
{
    r->time_ns = t;
    if (gmp_wthread_event(I->th, r) < 0)
        failf(I, GMP_ERR_IO, "the trace could not be written");
    I->last_t = t;
    if (++I->written % SYNC_EVERY == 0)
        gmp_writer_sync(I->w, t);
}

static void emit_pool(imp *I, int32_t d, uint32_t opn, uint64_t pool, uint64_t value, uint64_t t)
{
    gmp_rec r = {.type = GMP_REC_POOL};
    r.u.pool.device = d;
    r.u.pool.op = opn;
    r.u.pool.pool = pool;
    r.u.pool.value = value;
    emit(I, &r, t);
}

static void emit_mem(imp *I, unsigned type, int32_t d, uint32_t api, uint64_t addr, uint64_t size,
                     uint64_t stream, uint32_t stack, uint64_t t)
{
    gmp_rec r = {.type = type};
    r.u.mem.device = d;
    r.u.mem.kind = GMP_MEM_ASYNC_POOL;
    r.u.mem.api = api;
    r.u.mem.address = addr;
    r.u.mem.size = size;
    r.u.mem.stream = stream;
    r.u.mem.stack = stack;
    emit(I, &r, t);
}

static void emit_notice(imp *I, uint32_t severity, const char *text, uint64_t t)
{
    gmp_rec r = {.type = GMP_REC_NOTICE};
    r.u.notice.severity = severity;
    r.u.notice.message.ptr = text;
    r.u.notice.message.len = (uint32_t)strlen(text);
    emit(I, &r, t);
}

/* The state before the window, at time t0. */
static void write_pre(imp *I, uint64_t t0)
{
    for (size_t i = 0; i < I->npre_segs && I->err == GMP_OK; i++) {
        emit_pool(I, I->pre_seg_dev[i], GMP_POOL_CREATE, I->pre_segs[i].addr, 0, t0);
        emit_pool(I, I->pre_seg_dev[i], GMP_POOL_RESERVED, I->pre_segs[i].addr, I->pre_segs[i].size,
                  t0);
        I->st.pre_segments++;
        I->st.pre_reserved += I->pre_segs[i].size;
    }
    for (int32_t d = 0; d < GMP_TORCH_MAX_DEVICES && I->err == GMP_OK; d++) {
        device *dv = &I->dev[d];
        if (!dv->present)
            continue;
        /* reserved before the window, by the rule: at the dump minus the window's change */
        uint64_t in = dv->seg_in, out = dv->seg_out;
        uint64_t pre_seg = dv->final_seg + out >= in ? dv->final_seg + out - in : 0;
        if (dv->final_seg + out < in)
            I->st.inconsistencies++;
        if (pre_seg > dv->pre_seg_sum) {
            /* segments the window frees without a trace of them, or an inconsistent dump */
            emit_pool(I, d, GMP_POOL_CREATE, FILLER_POOL + (uint64_t)d, 0, t0);
            emit_pool(I, d, GMP_POOL_RESERVED, FILLER_POOL + (uint64_t)d, pre_seg - dv->pre_seg_sum,
                      t0);
            I->st.pre_reserved += pre_seg - dv->pre_seg_sum;
            I->st.inconsistencies++;
        } else if (pre_seg < dv->pre_seg_sum) {
            I->st.inconsistencies++;
        }
        if (dv->has_exp) {
            uint64_t mapped = dv->final_exp + dv->map_out >= dv->map_in
                                  ? dv->final_exp + dv->map_out - dv->map_in
                                  : 0;
            if (dv->final_exp + dv->map_out < dv->map_in)
                I->st.inconsistencies++;
            dv->exp_mapped = mapped;
            emit_pool(I, d, GMP_POOL_CREATE, GMP_TORCH_EXPANDABLE_POOL(d), 0, t0);
            emit_pool(I, d, GMP_POOL_RESERVED, GMP_TORCH_EXPANDABLE_POOL(d), mapped, t0);
            if (mapped)
                I->st.pre_segments++;
            I->st.pre_reserved += mapped;
        }
    }
    for (size_t i = 0; i < I->npre_blks && I->err == GMP_OK; i++) {
        emit_mem(I, GMP_REC_ALLOC, I->pre_blk_dev[i], I->api_malloc, I->pre_blks[i].addr,
                 I->pre_blks[i].size, 0, stack_of(I, I->pre_blks[i].frames), t0);
        I->st.pre_blocks++;
        I->st.pre_allocated += I->pre_blks[i].size;
    }
    for (int32_t d = 0; d < GMP_TORCH_MAX_DEVICES && I->err == GMP_OK; d++) {
        device *dv = &I->dev[d];
        if (!dv->present)
            continue;
        uint64_t in = dv->blk_in, out = dv->blk_out;
        uint64_t pre = dv->final_alloc + out >= in ? dv->final_alloc + out - in : 0;
        if (dv->final_alloc + out < in)
            I->st.inconsistencies++;
        if (pre > dv->pre_blk_sum) {
            emit_mem(I, GMP_REC_ALLOC, d, I->api_malloc, FILLER_ADDR + (uint64_t)d,
                     pre - dv->pre_blk_sum, 0, 0, t0);
            I->st.pre_allocated += pre - dv->pre_blk_sum;
            I->st.inconsistencies++;
        } else if (pre < dv->pre_blk_sum) {
            I->st.inconsistencies++;
        }
    }
}

static void write_op(imp *I, const op *o)
{
    device *dv = &I->dev[o->dev];
    switch (o->type) {
    case OP_SEG_ALLOC:
        emit_pool(I, o->dev, GMP_POOL_CREATE, o->addr, 0, o->t);
        emit_pool(I, o->dev, GMP_POOL_RESERVED, o->addr, o->size, o->t);
        break;
    case OP_SEG_FREE: emit_pool(I, o->dev, GMP_POOL_DESTROY, o->addr, 0, o->t); break;
    case OP_MAP:
    case OP_UNMAP:
        if (o->type == OP_MAP) {
            dv->exp_mapped += o->size;
        } else if (o->size > dv->exp_mapped) {
            dv->exp_mapped = 0;
            I->st.inconsistencies++;
        } else {
            dv->exp_mapped -= o->size;
        }
        emit_pool(I, o->dev, GMP_POOL_RESERVED, GMP_TORCH_EXPANDABLE_POOL(o->dev), dv->exp_mapped,
                  o->t);
        break;
    case OP_ALLOC:
        emit_mem(I, GMP_REC_ALLOC, o->dev, I->api_malloc, o->addr, o->size, o->stream,
                 stack_of(I, o->frames), o->t);
        break;
    case OP_FREE:
        emit_mem(I, GMP_REC_FREE, o->dev, I->api_free, o->addr, o->size, o->stream,
                 stack_of(I, o->frames), o->t);
        break;
    case OP_OOM: {
        gmp_rec r = {.type = GMP_REC_OOM};
        r.u.oom.device = o->dev;
        r.u.oom.api = I->api_malloc;
        r.u.oom.requested = o->size;
        r.u.oom.stack = stack_of(I, o->frames);
        r.u.oom.result = CUDA_ERROR_MEMORY_ALLOCATION;
        r.u.oom.free_bytes = o->extra;
        emit(I, &r, o->t);
        break;
    }
    default: break;
    }
}

static gmp_str cstr(const char *s)
{
    gmp_str r = {s, (uint32_t)strlen(s)};
    return r;
}

static void write_trace(imp *I, const char *source, int fd)
{
    /* The trace clock starts at TRACE_BASE (the pre-window state), the first entry 1 us later;
     * the header maps it to the wall clock when the snapshot has time_us. (Small trace times
     * also keep the END record, which the writer stamps with its own clock, after the events.) */
    uint64_t t0 = TRACE_BASE, wall0 = 0;
    if (I->nops) {
        uint64_t first = I->ops[0].t;
        wall0 = first - 1000;
        for (size_t i = 0; i < I->nops; i++)
            I->ops[i].t = I->ops[i].t - first + TRACE_BASE + 1000;
    }
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.format_version = GMP_FORMAT_VERSION;
    h.min_reader_version = GMP_FORMAT_MIN_READER;
    h.producer = cstr("gpumemprof " GMP_VERSION_STRING " import (PyTorch memory snapshot)");
    h.hostname = cstr("");
    h.cmdline = cstr(source ? source : "");
    h.rank = -1;
    h.start_wall_ns = I->st.has_time ? wall0 : 0;
    h.start_trace_ns = t0;
    h.clock = cstr(I->st.has_time ? "PyTorch time_us" : "PyTorch entry order (1 us apart)");
    h.options =
        cstr(I->st.legacy ? "import=pytorch-snapshot format=legacy" : "import=pytorch-snapshot");
    gmp_writer_opts wo;
    gmp_writer_opts_default(&wo);
    wo.threaded = 0;
    wo.level = 3;
    gmp_err e = gmp_writer_open(&I->w, fd, &wo, &h);
    if (e != GMP_OK) {
        failf(I, e, "cannot start the trace: %s", gmp_err_str(e));
        return;
    }
    gmp_rec th = {.type = GMP_REC_THREAD};
    th.u.thread.tid = TID;
    th.u.thread.name = cstr("pytorch snapshot");
    gmp_writer_define(I->w, &th);
    I->th = gmp_writer_thread(I->w, TID);
    I->api_malloc = gmp_writer_string(I->w, "CUDACachingAllocator.malloc", 27);
    I->api_free = gmp_writer_string(I->w, "CUDACachingAllocator.free", 25);
    if (!I->th || !I->api_malloc || !I->api_free) {
        nomem(I);
    } else {
        write_pre(I, t0);
        for (size_t i = 0; i < I->nops && I->err == GMP_OK; i++)
            write_op(I, &I->ops[i]);
        if (I->err == GMP_OK) {
            snprintf(I->notice, sizeof I->notice,
                     "imported from a PyTorch memory snapshot%s: %" PRIu64
                     " trace entries; before the recorded window: %" PRIu64 " segments (%" PRIu64
                     " bytes), %" PRIu64 " blocks (%" PRIu64 " bytes)",
                     I->st.legacy ? " (legacy format: segments only)" : "", I->st.entries,
                     I->st.pre_segments, I->st.pre_reserved, I->st.pre_blocks, I->st.pre_allocated);
            emit_notice(I, GMP_NOTICE_INFO, I->notice, I->last_t);
        }
        if (I->err == GMP_OK && I->st.overflowed) {
            char devs[160] = "";
            size_t o = 0;
            for (unsigned d = 0; d < 32 && o < sizeof devs; d++)
                if (I->st.overflowed_devices & (1u << d))
                    o += (size_t)snprintf(devs + o, sizeof devs - o, "%s%u",
                                          o ? ", " : " of device ", d);
            char cap[64] = "";
            if (I->st.trace_max_entries)
                snprintf(cap, sizeof cap, " (trace_alloc_max_entries %" PRIu64 ")",
                         I->st.trace_max_entries);
            snprintf(I->notice, sizeof I->notice,
                     "incomplete: PyTorch's ring buffer of trace entries%s%s overflowed "
                     "(trace_alloc_overflowed): the allocations, frees and segment changes before "
                     "the first recorded entry were overwritten and are missing, so peaks before "
                     "the window are unknown and stacks of memory allocated before it are lost; "
                     "memory alive at the window's start is reconstructed from the final segments",
                     devs, cap);
            emit_notice(I, GMP_NOTICE_WARNING, I->notice, I->last_t);
        }
        if (I->err == GMP_OK && I->st.inconsistencies) {
            snprintf(I->notice, sizeof I->notice,
                     "the snapshot contradicts itself in %" PRIu64
                     " places (its final segments and its trace do not add up); memory before "
                     "the window follows the final state minus the trace's net change",
                     I->st.inconsistencies);
            emit_notice(I, GMP_NOTICE_WARNING, I->notice, I->last_t);
        }
        gmp_writer_sync(I->w, I->last_t);
        gmp_wthread_release(I->th);
    }
    gmp_writer_stats ws;
    e = gmp_writer_close(I->w, &ws);
    I->w = NULL;
    if (e != GMP_OK || ws.lost)
        failf(I, e != GMP_OK ? e : GMP_ERR_IO, "the trace could not be written (%s)",
              ws.io_errno ? strerror(ws.io_errno) : "events lost");
}

/* ---- entry points ---- */

int gmp_import_torch_probe(const unsigned char *head, size_t n)
{
    return n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;
}

/* ---- the memory this process may use ---- */

static uint64_t read_limit_file(const char *path)
{
    uint64_t v = UINT64_MAX;
    FILE *f = fopen(path, "re");
    if (f) {
        unsigned long long x;
        if (fscanf(f, "%llu", &x) == 1 && x > 0)
            v = (uint64_t)x; /* "max" (cgroup v2: no limit) does not scan */
        fclose(f);
    }
    return v;
}

/* "3.1 MiB", "24.0 GiB" */
static const char *fmt_size(uint64_t b, char *buf, size_t n)
{
    if (b >= ((uint64_t)1 << 30))
        snprintf(buf, n, "%.1f GiB", (double)b / (double)((uint64_t)1 << 30));
    else
        snprintf(buf, n, "%.1f MiB", (double)b / (double)((uint64_t)1 << 20));
    return buf;
}

uint64_t gmp_import_torch_usable_memory(void)
{
    uint64_t m = UINT64_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0)
        m = (uint64_t)pages * (uint64_t)psz;
    uint64_t c = read_limit_file("/sys/fs/cgroup/memory.max"); /* cgroup v2 */
    if (c < m)
        m = c;
    c = read_limit_file("/sys/fs/cgroup/memory/memory.limit_in_bytes"); /* cgroup v1 */
    if (c < m)
        m = c;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < m)
        m = rl.rlim_cur;
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < m)
        m = rl.rlim_cur;
    return m;
}

gmp_err gmp_import_torch_mem(const void *data, size_t n, const char *source, int out_fd,
                             gmp_import_torch_stats *stats, char *msg, size_t msglen)
{
    imp I;
    memset(&I, 0, sizeof I);
    I.msg = msg;
    I.msglen = msglen;
    if (msg && msglen)
        msg[0] = 0;
    gmp_pickle_limits lim;
    gmp_pickle_limits_default(&lim);
    /* The parse tree takes several times the file (docs/import.md): up to 1 GiB + 48 bytes per
     * byte of input, but never more than this process may use, so that a snapshot too large for
     * the machine fails with a message instead of being killed. Memo entries are bounded by the
     * input (each needs an opcode) and by the memory bound. */
    uint64_t want = ((uint64_t)1 << 30) + (n > UINT64_MAX / 64 ? UINT64_MAX / 2 : (uint64_t)n * 48);
    uint64_t usable = gmp_import_torch_usable_memory(), margin = usable / 8;
    if (margin > ((uint64_t)64 << 20))
        margin = (uint64_t)64 << 20; /* the rest of the process: the input, the writer */
    uint64_t room = usable > n + margin ? usable - n - margin : 0;
    if (room < want)
        want = room;
    lim.max_memory = want > SIZE_MAX ? SIZE_MAX : (size_t)want;
    if (n > lim.max_memo)
        lim.max_memo = n;
    gmp_pickle_value *root = NULL;
    char perr[256];
    gmp_err e = gmp_pickle_load_ex(data, n, &lim, &root, perr, sizeof perr);
    if (e != GMP_OK) {
        if (e == GMP_ERR_LIMIT)
            failf(&I, e, "cannot read this PyTorch memory snapshot within its limits: %s", perr);
        else
            failf(&I, e, "not a readable PyTorch memory snapshot: %s", perr);
        goto out;
    }
    I.dev = calloc(GMP_TORCH_MAX_DEVICES, sizeof *I.dev);
    if (!I.dev) {
        nomem(&I);
        goto out;
    }
    const gmp_pickle_value *segs = NULL, *traces = NULL;
    if (gmp_pickle_type_of(root) == GMP_PK_LIST) {
        segs = root; /* legacy: a bare list of segments */
        I.st.legacy = 1;
    } else if (gmp_pickle_type_of(root) == GMP_PK_DICT) {
        segs = gmp_pickle_dict_get(root, "segments");
        traces = gmp_pickle_dict_get(root, "device_traces");
        if (!segs) {
            failf(&I, GMP_ERR_FORMAT,
                  "not a PyTorch memory snapshot: a dict without 'segments' (the snapshot of "
                  "torch.cuda.memory._snapshot() has 'segments' and 'device_traces')");
            goto out;
        }
    } else {
        failf(&I, GMP_ERR_FORMAT,
              "not a PyTorch memory snapshot: the pickle holds a %s, expected a dict with "
              "'segments' and 'device_traces' or a list of segments",
              gmp_pickle_type_name(root));
        goto out;
    }
    if (gmp_pickle_type_of(root) == GMP_PK_DICT)
        read_overflow(&I, root);
    if (traces && read_traces(&I, traces) < 0)
        goto out;
    if (read_segments(&I, segs) < 0 || pre_from_first_frees(&I, 1) < 0 ||
        pre_from_first_frees(&I, 0) < 0)
        goto out;
    if (I.nops)
        qsort(I.ops, I.nops, sizeof *I.ops, cmp_op);
    write_trace(&I, source, out_fd);
    out_fd = -1;
out:
    if (out_fd >= 0)
        close(out_fd);
    if (I.dev) {
        for (int i = 0; i < GMP_TORCH_MAX_DEVICES; i++) {
            gmp_omap_free(&I.dev[i].seg_first);
            gmp_omap_free(&I.dev[i].blk_first);
        }
    }
    free(I.dev);
    free(I.ops);
    free(I.pre_segs);
    free(I.pre_blks);
    free(I.pre_seg_dev);
    free(I.pre_blk_dev);
    gmp_omap_free(&I.stacks);
    gmp_pickle_free(root);
    if (stats)
        *stats = I.st;
    return I.err;
}

gmp_err gmp_import_torch(const char *in_path, int out_fd, gmp_import_torch_stats *stats, char *msg,
                         size_t msglen)
{
    if (msg && msglen)
        msg[0] = 0;
    int fd = open(in_path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(msg, msglen, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        close(out_fd);
        return GMP_ERR_IO;
    }
    uint64_t usable = gmp_import_torch_usable_memory();
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > usable ||
        (uint64_t)sb.st_size > SIZE_MAX / 2) {
        if (!S_ISREG(sb.st_mode))
            snprintf(msg, msglen, "not a regular file");
        else {
            char fb[32], ub[32];
            snprintf(msg, msglen,
                     "%s: larger than the memory this process may use (%s); the snapshot reader "
                     "holds the whole file and its objects in memory",
                     fmt_size((uint64_t)sb.st_size, fb, sizeof fb),
                     fmt_size(usable, ub, sizeof ub));
        }
        close(fd);
        close(out_fd);
        return S_ISREG(sb.st_mode) ? GMP_ERR_LIMIT : GMP_ERR_IO;
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        snprintf(msg, msglen, "out of memory");
        close(fd);
        close(out_fd);
        return GMP_ERR_NOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    gmp_err e = gmp_import_torch_mem(buf, got, in_path, out_fd, stats, msg, msglen);
    free(buf);
    return e;
}

gmp_err gmp_import_torch_run(const char *in_path, int out_fd, char *msg, size_t msglen)
{
    gmp_import_torch_stats st;
    gmp_err e = gmp_import_torch(in_path, out_fd, &st, msg, msglen);
    if (e == GMP_OK)
        snprintf(msg, msglen,
                 "%s%" PRIu64 " trace entries (%" PRIu64 " allocations, %" PRIu64 " frees, %" PRIu64
                 " segment maps/allocs, %" PRIu64 " OOMs) on %" PRIu32
                 " device%s; before the window: %" PRIu64 " segments, %" PRIu64 " blocks%s%s",
                 st.legacy ? "legacy snapshot (segments only): " : "", st.entries, st.allocs,
                 st.frees, st.segments, st.ooms, st.devices, st.devices == 1 ? "" : "s",
                 st.pre_segments, st.pre_blocks,
                 st.inconsistencies ? "; the snapshot contradicts itself (see the trace's notices)"
                                    : "",
                 st.overflowed ? "; incomplete: PyTorch's trace ring buffer overflowed, the "
                                 "entries before the window are missing"
                               : "");
    return e;
}
