/* gmp_out_pytorch: `gpumemprof convert --pytorch-snapshot FILE`: a trace as a PyTorch CUDA memory
 * snapshot (the pickle torch.cuda.memory._dump_snapshot writes), which pytorch.org/memory_viz and
 * torch.cuda._memory_viz open: {segments: [...], device_traces: [[entry, ...] per device],
 * allocator_settings: {}, external_annotations: [...]}. The mapping (docs/import.md, "Export"):
 *
 *  - a block of a pool (kind async-pool: PyTorch's own blocks after an import, cudaMallocAsync
 *    otherwise) is alloc / free_requested + free_completed;
 *  - any other allocation that counts on a device (cudaMalloc, cuMemCreate, arrays, static) is a
 *    segment holding one block: segment_alloc + alloc, free_requested + free_completed +
 *    segment_free;
 *  - a pool's reserved size (POOL records) is a segment at the pool's handle (segment_alloc, or
 *    segment_free + segment_alloc when the size changes, segment_free when destroyed); the pool
 *    of an imported snapshot's expandable segments, and pool blocks beyond what POOL records
 *    report, are one expandable segment per device (segment_map / segment_unmap at its end;
 *    in the final segments, its blocks are in segments at their own addresses for memory_viz);
 *  - OOM records are oom entries; stacks are frames (innermost first; native frames as
 *    module+offset); time_us is the wall clock when the trace has one;
 *  - a range pushed / popped (NVTX, --layers, an imported snapshot's record_function
 *    annotations; not the ranges an import made of user_metadata or compile_context) is an
 *    external_annotations START / END of its last name; those two are the alloc entries'
 *    user_metadata (the path) and compile_context (the region) again.
 * So the snapshot's reserved (its segments) and allocated (its active blocks) follow the replay's
 * reserved and allocated at every step, and importing it again gives the same peaks (tested).
 * Per-device entries are spooled to temporary files (memory grows with the live set and the
 * distinct stacks, not with the trace); the final `segments` (the state at the end) come from the
 * replay's live set. One trace per snapshot (a snapshot describes one process). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_export.h"
#include "gmp_escape.h"
#include "gmp_output.h"
#include "gmp_reader.h"
#include "gmp_torch_layout.h"

#define MAX_DEVICES GMP_TORCH_MAX_DEVICES
#define MAX_FRAMES 256
#define BATCH 1000 /* items per APPENDS, as Python's pickler */
/* Where the synthetic expandable segment of device d starts (no real address is known). */
#define EXP_BASE(d) (0x7e0000000000ull + ((uint64_t)(d) << 36))

/* ---- a pickle writer (protocol 4, the opcodes gmp_pickle reads) ---- */

typedef struct pw {
    FILE *f;
    int err;
} pw;

static void pw_raw(pw *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n)
        w->err = 1;
}

static void pw_op(pw *w, unsigned char op)
{
    if (putc(op, w->f) == EOF)
        w->err = 1;
}

static void pw_le(pw *w, uint64_t v, int n)
{
    unsigned char b[8];
    for (int i = 0; i < n; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    pw_raw(w, b, (size_t)n);
}

static void pw_u64(pw *w, uint64_t v)
{
    if (v < 256) {
        pw_op(w, 'K');
        pw_le(w, v, 1);
    } else if (v < 65536) {
        pw_op(w, 'M');
        pw_le(w, v, 2);
    } else if (v < 0x80000000ull) {
        pw_op(w, 'J');
        pw_le(w, v, 4);
    } else { /* LONG1: little-endian two's complement, a 0 byte on top when the sign bit is set */
        int n = 8;
        while (n > 1 && !((v >> (8 * (n - 1))) & 0xff))
            n--;
        int extra = (v >> (8 * n - 1)) & 1;
        pw_op(w, 0x8a);
        pw_op(w, (unsigned char)(n + extra));
        pw_le(w, v, n);
        if (extra)
            pw_op(w, 0);
    }
}

/* A str: invalid UTF-8 bytes become U+FFFD (Python refuses invalid UTF-8 in a pickle). */
static void pw_str(pw *w, const char *s, size_t n)
{
    if (!s)
        n = 0;
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        size_t l = gmp_utf8_seq_len((const unsigned char *)s + i, n - i);
        out += l ? l : 3;
        i += l ? l : 1;
    }
    if (out < 256) {
        pw_op(w, 0x8c);
        pw_le(w, out, 1);
    } else {
        pw_op(w, 'X');
        pw_le(w, out > UINT32_MAX ? UINT32_MAX : out, 4);
    }
    for (size_t i = 0; i < n;) {
        size_t l = gmp_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (l) {
            pw_raw(w, s + i, l);
            i += l;
        } else {
            pw_raw(w, "\xef\xbf\xbd", 3);
            i++;
        }
    }
}

static void pw_cstr(pw *w, const char *s)
{
    pw_str(w, s, strlen(s));
}

static void pw_key(pw *w, const char *k)
{
    pw_cstr(w, k);
}

/* ---- state ---- */

typedef struct pool {
    int32_t dev;
    uint64_t value; /* reported reserved size (its segment's size) */
} pool;

typedef struct dev {
    FILE *spool;         /* entries of this device: pickled items */
    uint64_t nentries;   /* in the current APPENDS batch */
    uint64_t pool_sum;   /* sum of reported sizes of the device's pools */
    uint64_t exp_value;  /* the imported expandable-segments pool */
    uint64_t exp_mapped; /* mapped bytes of the synthetic expandable segment */
    int used;
} dev;

struct gmp_output_ctx {
    FILE *f;
    gmp_output_opts o;
    gmp_replay *rp;
    gmp_output_trace tr;
    int have_trace;
    dev *devs;      /* MAX_DEVICES */
    gmp_omap pools; /* pool handle -> index + 1 in pool_v */
    pool *pool_v;
    size_t npools, cap_pools;
    gmp_omap memo; /* (device, stack) -> memo index + 1 of its frames list */
    uint32_t next_memo;
    gmp_replay_frame *frames;
    gmp_obuf text;
    /* the state at the end, collected in the end callback */
    gmp_replay_alloc *live;
    size_t nlive, cap_live;
    uint64_t wall_base; /* added to trace times for time_us; 0: trace time as is */
    int ended;
    FILE *segspool; /* the pickled segments list, written at the end of the replay */
    FILE *annspool; /* external_annotations: pickled items (NULL until the first) */
    uint64_t nann;
    gmp_omap tid_dev; /* thread -> device + 1 of its last device allocation */
    /* the next alloc entry's user_metadata and compile_context (set around its entry call) */
    gmp_obuf umeta;
    gmp_str cctx;
};

static gmp_err fail_nomem(gmp_output_ctx *c)
{
    return gmp_replay_fail(c->rp, GMP_ERR_NOMEM, "out of memory writing the PyTorch snapshot");
}

static dev *dev_at(gmp_output_ctx *c, int32_t d)
{
    if (d < 0 || d >= MAX_DEVICES)
        return NULL;
    dev *v = &c->devs[d];
    if (!v->used) {
        v->spool = tmpfile();
        if (!v->spool)
            return NULL;
        v->used = 1;
        pw w = {v->spool, 0};
        pw_op(&w, ']');
        pw_op(&w, '(');
        if (w.err)
            return NULL;
    }
    return v;
}

/* The frames of a stack as a list; each distinct list is written once per device and memoized. */
static void write_frames(gmp_output_ctx *c, pw *w, int32_t d, uint32_t stack)
{
    if (!stack) {
        pw_op(w, ']');
        return;
    }
    /* a memo index is defined where the list is first written: per device spool, and once more
     * in the segments (which precede the spools in the file) */
    uint64_t key = ((uint64_t)c->ended << 62) | ((uint64_t)(uint32_t)d << 32) | stack;
    uint64_t *m = gmp_omap_get(&c->memo, key);
    if (m) {
        pw_op(w, 'j');
        pw_le(w, *m - 1, 4);
        return;
    }
    size_t n = gmp_replay_stack_frames(c->rp, stack, c->frames, MAX_FRAMES);
    if (n > MAX_FRAMES)
        n = MAX_FRAMES;
    pw_op(w, ']');
    pw_op(w, '(');
    for (size_t i = 0; i < n; i++) {
        const gmp_replay_frame *fr = &c->frames[i];
        pw_op(w, '}');
        pw_op(w, '(');
        pw_key(w, "name");
        if (fr->kind == GMP_FRAME_PYTHON) {
            pw_str(w, fr->function.ptr, fr->function.len);
            pw_key(w, "filename");
            pw_str(w, fr->file.ptr, fr->file.len);
            pw_key(w, "line");
            pw_u64(w, fr->line);
        } else {
            c->text.len = 0;
            gmp_output_frame_text(&c->text, fr);
            pw_str(w, c->text.p, c->text.len);
            pw_key(w, "filename");
            if (fr->module)
                pw_str(w, fr->module->path.ptr, fr->module->path.len);
            else
                pw_cstr(w, "??");
            pw_key(w, "line");
            pw_u64(w, 0);
        }
        pw_op(w, 'u');
    }
    pw_op(w, 'e');
    int fresh;
    uint64_t *slot = gmp_omap_put(&c->memo, key, &fresh);
    if (slot) {
        *slot = ++c->next_memo;
        pw_op(w, 'r');
        pw_le(w, *slot - 1, 4);
    }
}

static uint64_t time_us(const gmp_output_ctx *c, uint64_t t)
{
    return (c->wall_base + t) / 1000;
}

/* One trace entry of device d. addr is written unless has_addr is 0 (oom). */
static gmp_err entry(gmp_output_ctx *c, int32_t d, const char *action, int has_addr, uint64_t addr,
                     uint64_t size, uint64_t stream, uint32_t stack, uint64_t t, int oom,
                     uint64_t device_free)
{
    dev *v = dev_at(c, d);
    if (!v)
        return d < 0 || d >= MAX_DEVICES ? GMP_OK : fail_nomem(c);
    pw w = {v->spool, 0};
    pw_op(&w, '}');
    pw_op(&w, '(');
    pw_key(&w, "action");
    pw_cstr(&w, action);
    if (has_addr) {
        pw_key(&w, "addr");
        pw_u64(&w, addr);
    }
    pw_key(&w, "size");
    pw_u64(&w, size);
    pw_key(&w, "stream");
    pw_u64(&w, stream);
    pw_key(&w, "time_us");
    pw_u64(&w, time_us(c, t));
    if (oom) {
        pw_key(&w, "device_free");
        pw_u64(&w, device_free);
    }
    if (c->umeta.len) {
        pw_key(&w, "user_metadata");
        pw_str(&w, c->umeta.p, c->umeta.len);
    }
    if (c->cctx.len) {
        pw_key(&w, "compile_context");
        pw_str(&w, c->cctx.ptr, c->cctx.len);
    }
    pw_key(&w, "frames");
    write_frames(c, &w, d, stack);
    pw_op(&w, 'u');
    if (++v->nentries % BATCH == 0) {
        pw_op(&w, 'e');
        pw_op(&w, '(');
    }
    if (w.err)
        return gmp_replay_fail(c->rp, GMP_ERR_IO, "cannot write a temporary file");
    return GMP_OK;
}

/* The synthetic expandable segment of device d follows what the device's pools hold beyond the
 * segments written for them: the imported expandable pool, and pool blocks no POOL record
 * covers (reserved = max(reported, allocated from pools) in the replay). grow: 0 only shrinks,
 * 1 only grows, 2 both; shrinking before and growing after the other entries of an event keeps
 * every intermediate state at or below the larger of the states before and after it. */
static gmp_err sync_expandable(gmp_output_ctx *c, int32_t d, const gmp_replay_device *dv,
                               uint64_t t, int grow)
{
    if (d < 0 || d >= MAX_DEVICES || !dv)
        return GMP_OK;
    dev *v = &c->devs[d];
    uint64_t excess = dv->pool_reserved > v->pool_sum ? dv->pool_reserved - v->pool_sum : 0;
    uint64_t want = v->exp_value + excess;
    gmp_err e = GMP_OK;
    if (want > v->exp_mapped && grow) {
        e = entry(c, d, "segment_map", 1, EXP_BASE(d) + v->exp_mapped, want - v->exp_mapped, 0, 0,
                  t, 0, 0);
        v->exp_mapped = want;
    } else if (want < v->exp_mapped && grow != 1) {
        e = entry(c, d, "segment_unmap", 1, EXP_BASE(d) + want, v->exp_mapped - want, 0, 0, t, 0,
                  0);
        v->exp_mapped = want;
    }
    return e;
}

static int is_expandable_pool(uint64_t h)
{
    return (h & ~(uint64_t)(MAX_DEVICES - 1)) == GMP_TORCH_EXPANDABLE_POOL(0);
}

/* ---- replay callbacks ---- */

static uint64_t seg_addr(const gmp_replay_alloc *a)
{
    return a->address ? a->address : a->handle; /* VMM physical memory has no address */
}

static int dom_is(gmp_reader *r, uint32_t id, const char *name)
{
    gmp_str d = gmp_reader_string(r, id);
    return d.ptr && d.len == strlen(name) && memcmp(d.ptr, name, d.len) == 0;
}

/* The entry fields an import made ranges of, back from an allocation's range: a compiled region
 * (the innermost node, domain GMP_TORCH_DOMAIN_COMPILE) is compile_context; a path of domain
 * GMP_TORCH_DOMAIN_METADATA is user_metadata, its names joined by "/". */
static void entry_fields(gmp_output_ctx *c, gmp_replay *rp, uint32_t range)
{
    gmp_reader *r = gmp_replay_reader(rp);
    const gmp_rec_range *g = range ? gmp_reader_range(r, range) : NULL;
    c->umeta.len = 0;
    c->cctx.len = 0;
    if (g && dom_is(r, g->domain, GMP_TORCH_DOMAIN_COMPILE)) {
        gmp_str n = gmp_reader_string(r, g->name);
        if (n.ptr)
            c->cctx = n;
        range = g->parent;
        g = range ? gmp_reader_range(r, range) : NULL;
    }
    if (!g || !dom_is(r, g->domain, GMP_TORCH_DOMAIN_METADATA))
        return;
    char small[512];
    size_t k = gmp_reader_range_path(r, range, small, sizeof small);
    if (k < sizeof small) {
        gmp_obuf_add(&c->umeta, small, k);
        return;
    }
    char *big = malloc(k + 1);
    if (big) {
        gmp_reader_range_path(r, range, big, k + 1);
        gmp_obuf_add(&c->umeta, big, k);
        free(big);
    }
}

static gmp_err on_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    gmp_output_ctx *c = ctx;
    if ((ev->status != GMP_REPLAY_OK && ev->status != GMP_REPLAY_REPLACED) || !ev->alloc)
        return GMP_OK;
    const gmp_replay_alloc *a = ev->alloc;
    const gmp_rec_mem *m = &ev->rec->u.mem;
    uint64_t t = ev->rec->time_ns;
    gmp_err e = GMP_OK;
    if (a->device >= 0 && a->device < MAX_DEVICES) {
        int fresh;
        uint64_t *dv = gmp_omap_put(&c->tid_dev, ev->rec->tid, &fresh);
        if (!dv)
            return fail_nomem(c);
        *dv = (uint64_t)a->device + 1;
    }
    if (a->kind == GMP_MEM_ASYNC_POOL) {
        e = sync_expandable(c, a->device, ev->dev, t, 2);
        if (e == GMP_OK) {
            entry_fields(c, rp, a->range);
            e = entry(c, a->device, "alloc", 1, a->address, a->size, m->stream, a->stack, t, 0, 0);
            c->umeta.len = 0;
            c->cctx.len = 0;
        }
    } else if (gmp_mem_kind_is_device(a->kind)) {
        e = entry(c, a->device, "segment_alloc", 1, seg_addr(a), a->size, m->stream, a->stack, t, 0,
                  0);
        if (e == GMP_OK)
            e = entry(c, a->device, "alloc", 1, seg_addr(a), a->size, m->stream, a->stack, t, 0, 0);
    }
    return e;
}

static gmp_err on_free(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    gmp_output_ctx *c = ctx;
    if (ev->status != GMP_REPLAY_OK)
        return GMP_OK;
    uint64_t t = ev->rec->time_ns;
    uint64_t stream = ev->rec->u.mem.stream;
    uint32_t stack = ev->rec->u.mem.stack;
    for (size_t i = 0; i < ev->nalloc; i++) {
        const gmp_replay_alloc *a = &ev->alloc[i];
        gmp_err e = GMP_OK;
        if (a->kind == GMP_MEM_ASYNC_POOL) {
            e = entry(c, a->device, "free_requested", 1, a->address, a->size, stream, stack, t, 0,
                      0);
            if (e == GMP_OK)
                e = entry(c, a->device, "free_completed", 1, a->address, a->size, stream, stack, t,
                          0, 0);
            if (e == GMP_OK)
                e = sync_expandable(c, a->device, ev->dev, t, 2);
        } else if (gmp_mem_kind_is_device(a->kind)) {
            static const char *const acts[3] = {"free_requested", "free_completed", "segment_free"};
            for (int k = 0; k < 3 && e == GMP_OK; k++)
                e = entry(c, a->device, acts[k], 1, seg_addr(a), a->size, stream, stack, t, 0, 0);
        }
        if (e != GMP_OK)
            return e;
    }
    return GMP_OK;
}

static gmp_err on_pool(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *dv)
{
    gmp_output_ctx *c = ctx;
    const gmp_rec_pool *p = &rec->u.pool;
    uint64_t t = rec->time_ns;
    int fresh;
    uint64_t *slot = gmp_omap_put(&c->pools, p->pool, &fresh);
    if (!slot)
        return fail_nomem(c);
    if (fresh) {
        if (c->npools == c->cap_pools) {
            size_t nc = c->cap_pools ? c->cap_pools * 2 : 64;
            pool *np = realloc(c->pool_v, nc * sizeof *np);
            if (!np)
                return fail_nomem(c);
            c->pool_v = np;
            c->cap_pools = nc;
        }
        c->pool_v[c->npools] = (pool){p->device, 0};
        *slot = ++c->npools;
    }
    pool *pl = &c->pool_v[*slot - 1];
    if (pl->dev == INT32_MIN) /* destroyed before: a new pool with the same handle */
        pl->dev = p->device;
    int32_t d = pl->dev; /* a pool stays on the device it was first seen on, as in the replay */
    if (d < 0 || d >= MAX_DEVICES)
        return GMP_OK;
    dev *v = &c->devs[d];
    uint64_t nv = pl->value;
    if (p->op == GMP_POOL_RESERVED)
        nv = p->value;
    else if (p->op == GMP_POOL_DESTROY)
        nv = 0;
    else
        return sync_expandable(c, d, dv, t, 2);
    v->pool_sum = v->pool_sum - pl->value + nv;
    if (is_expandable_pool(p->pool))
        v->exp_value = v->exp_value - pl->value + nv;
    gmp_err e = sync_expandable(c, d, dv, t, 0);
    if (e == GMP_OK && !is_expandable_pool(p->pool) && nv != pl->value) {
        if (pl->value)
            e = entry(c, d, "segment_free", 1, p->pool, pl->value, 0, 0, t, 0, 0);
        if (e == GMP_OK && nv)
            e = entry(c, d, "segment_alloc", 1, p->pool, nv, 0, 0, t, 0, 0);
    }
    pl->value = nv;
    if (p->op == GMP_POOL_DESTROY) /* the replay forgets it too: a handle may be reused */
        pl->dev = INT32_MIN;
    if (e == GMP_OK)
        e = sync_expandable(c, d, dv, t, 1);
    return e;
}

static gmp_err on_oom(void *ctx, gmp_replay *rp, const gmp_replay_oom *ev)
{
    gmp_output_ctx *c = ctx;
    return entry(c, ev->device, "oom", 0, 0, ev->requested, 0, ev->stack, ev->time_ns, 1,
                 ev->free_bytes);
}

static gmp_err collect_live(void *ctx, const gmp_replay_alloc *a)
{
    gmp_output_ctx *c = ctx;
    if (a->device < 0 || a->device >= MAX_DEVICES ||
        (a->kind != GMP_MEM_ASYNC_POOL && !gmp_mem_kind_is_device(a->kind)))
        return GMP_OK;
    if (c->nlive == c->cap_live) {
        size_t nc = c->cap_live ? c->cap_live * 2 : 256;
        gmp_replay_alloc *nl = realloc(c->live, nc * sizeof *nl);
        if (!nl)
            return GMP_ERR_NOMEM;
        c->live = nl;
        c->cap_live = nc;
    }
    c->live[c->nlive++] = *a;
    return GMP_OK;
}

static gmp_err write_segments(gmp_output_ctx *c, pw *w);

/* The final segments need the replay (stacks), which is gone by finish: spool them now. */
static gmp_err on_end(void *ctx, gmp_replay *rp)
{
    gmp_output_ctx *c = ctx;
    gmp_err e = gmp_replay_live_foreach(rp, collect_live, c);
    if (e != GMP_OK)
        return fail_nomem(c);
    c->ended = 1;
    c->segspool = tmpfile();
    if (!c->segspool)
        return gmp_replay_fail(rp, GMP_ERR_IO, "cannot create a temporary file");
    pw w = {c->segspool, 0};
    e = write_segments(c, &w);
    if (e == GMP_OK && (w.err || fflush(c->segspool) != 0))
        e = GMP_ERR_IO;
    if (e != GMP_OK)
        return gmp_replay_fail(rp, e, "cannot write the snapshot's segments");
    return GMP_OK;
}

/* The range path's last name, and whether the path is one an import made of user_metadata or
 * compile_context (those are the entries' own fields in PyTorch, not annotations). */
static gmp_str range_leaf(gmp_replay *rp, uint32_t id, int *entry_field)
{
    gmp_reader *r = gmp_replay_reader(rp);
    const gmp_rec_range *g = gmp_reader_range(r, id);
    gmp_str none = {"", 0};
    *entry_field = 0;
    if (!g)
        return none;
    gmp_str dom = gmp_reader_string(r, g->domain);
    *entry_field = dom.ptr && ((dom.len == strlen(GMP_TORCH_DOMAIN_METADATA) &&
                                memcmp(dom.ptr, GMP_TORCH_DOMAIN_METADATA, dom.len) == 0) ||
                               (dom.len == strlen(GMP_TORCH_DOMAIN_COMPILE) &&
                                memcmp(dom.ptr, GMP_TORCH_DOMAIN_COMPILE, dom.len) == 0));
    gmp_str n = gmp_reader_string(r, g->name);
    return n.ptr ? n : none;
}

/* A range pushed or popped: an external_annotations item {name, stage START|END, device, time_us}
 * (as memory_snapshot.cpp writes one; the device: that of the thread's last device allocation, 0
 * before any), which memory_viz shows and the import reads back as ranges. */
static gmp_err on_range(void *ctx, gmp_replay *rp, const gmp_replay_range *ev)
{
    gmp_output_ctx *c = ctx;
    if (ev->op != GMP_REPLAY_PUSH && ev->op != GMP_REPLAY_POP)
        return GMP_OK;
    int field;
    gmp_str name = range_leaf(rp, ev->range, &field);
    if (field)
        return GMP_OK;
    if (!c->annspool) {
        if (!(c->annspool = tmpfile()))
            return gmp_replay_fail(rp, GMP_ERR_IO, "cannot write a temporary file");
        pw w0 = {c->annspool, 0};
        pw_op(&w0, '(');
    }
    uint64_t *dv = gmp_omap_get(&c->tid_dev, ev->tid);
    pw w = {c->annspool, 0};
    pw_op(&w, '}');
    pw_op(&w, '(');
    pw_key(&w, "name");
    pw_str(&w, name.ptr, name.len);
    pw_key(&w, "stage");
    pw_cstr(&w, ev->op == GMP_REPLAY_PUSH ? "START" : "END");
    pw_key(&w, "device");
    pw_u64(&w, dv ? *dv - 1 : 0);
    pw_key(&w, "time_us");
    pw_u64(&w, time_us(c, ev->end_ns));
    pw_op(&w, 'u');
    if (++c->nann % BATCH == 0) {
        pw_op(&w, 'e');
        pw_op(&w, '(');
    }
    if (w.err)
        return gmp_replay_fail(rp, GMP_ERR_IO, "cannot write a temporary file");
    return GMP_OK;
}

static const gmp_replay_ops pytorch_ops = {
    .range = on_range,
    .alloc = on_alloc,
    .free = on_free,
    .pool = on_pool,
    .oom = on_oom,
    .end = on_end,
};

/* ---- the final segments ---- */

static int cmp_live(const void *a, const void *b)
{
    const gmp_replay_alloc *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->address < y->address ? -1 : x->address > y->address;
}

static void write_block(gmp_output_ctx *c, pw *w, int32_t d, uint64_t addr, uint64_t size,
                        uint64_t requested, const char *state, uint32_t stack)
{
    pw_op(w, '}');
    pw_op(w, '(');
    pw_key(w, "address");
    pw_u64(w, addr);
    pw_key(w, "size");
    pw_u64(w, size);
    pw_key(w, "requested_size");
    pw_u64(w, requested);
    pw_key(w, "state");
    pw_cstr(w, state);
    pw_key(w, "frames");
    write_frames(c, w, d, stack);
    pw_op(w, 'u');
}

/* A segment [addr, addr + total) with the pool blocks of live[lo..hi) inside it (sorted), the
 * gaps as inactive blocks. */
static void write_segment(gmp_output_ctx *c, pw *w, int32_t d, uint64_t addr, uint64_t total,
                          int expandable, const gmp_replay_alloc *blocks, size_t nb,
                          uint32_t seg_stack)
{
    uint64_t allocated = 0;
    for (size_t i = 0; i < nb; i++)
        allocated += blocks[i].size;
    pw_op(w, '}');
    pw_op(w, '(');
    pw_key(w, "device");
    pw_u64(w, (uint64_t)d);
    pw_key(w, "address");
    pw_u64(w, addr);
    pw_key(w, "total_size");
    pw_u64(w, total);
    pw_key(w, "allocated_size");
    pw_u64(w, allocated);
    pw_key(w, "active_size");
    pw_u64(w, allocated);
    pw_key(w, "requested_size");
    pw_u64(w, allocated);
    pw_key(w, "stream");
    pw_u64(w, 0);
    pw_key(w, "segment_type");
    pw_cstr(w, total >= (1u << 20) ? "large" : "small");
    pw_key(w, "segment_pool_id");
    pw_u64(w, 0);
    pw_u64(w, 0);
    pw_op(w, 0x86);
    pw_key(w, "is_expandable");
    pw_op(w, expandable ? 0x88 : 0x89);
    pw_key(w, "frames");
    write_frames(c, w, d, seg_stack);
    pw_key(w, "blocks");
    pw_op(w, ']');
    pw_op(w, '(');
    uint64_t at = addr, end = addr + total;
    for (size_t i = 0; i < nb; i++) {
        const gmp_replay_alloc *b = &blocks[i];
        if (!expandable && b->address > at) {
            write_block(c, w, d, at, b->address - at, 0, "inactive", 0);
            at = b->address;
        }
        /* blocks keep their own addresses (the trace's entries name them), also when the
         * expandable segment's address is synthetic */
        write_block(c, w, d, b->address, b->size, b->size, "active_allocated", b->stack);
        at += b->size;
    }
    if (at < end)
        write_block(c, w, d, at, end - at, 0, "inactive", 0);
    pw_op(w, 'e');
    pw_op(w, 'u');
}

typedef struct segref {
    int32_t dev;
    uint64_t addr, size;
} segref;

static int cmp_seg(const void *a, const void *b)
{
    const segref *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The segments list: the state at the end of the trace. */
static gmp_err write_segments(gmp_output_ctx *c, pw *w)
{
    if (c->nlive) /* qsort takes no NULL array, even empty */
        qsort(c->live, c->nlive, sizeof *c->live, cmp_live);
    /* pool segments, sorted */
    segref *segs = malloc((c->npools ? c->npools : 1) * sizeof *segs);
    if (!segs)
        return GMP_ERR_NOMEM;
    size_t ns = 0;
    for (size_t i = 0; i < c->pools.cap; i++) {
        if (!c->pools.used[i] || !c->pools.vals[i])
            continue;
        const pool *pl = &c->pool_v[c->pools.vals[i] - 1];
        if (pl->value && !is_expandable_pool(c->pools.keys[i]))
            segs[ns++] = (segref){pl->dev, c->pools.keys[i], pl->value};
    }
    qsort(segs, ns, sizeof *segs, cmp_seg);
    unsigned char *placed = calloc(c->nlive ? c->nlive : 1, 1);
    gmp_replay_alloc *tmp = malloc((c->nlive ? c->nlive : 1) * sizeof *tmp);
    if (!placed || !tmp) {
        free(segs);
        free(placed);
        free(tmp);
        return GMP_ERR_NOMEM;
    }
    pw_op(w, ']');
    pw_op(w, '(');
    size_t li = 0;
    for (size_t s = 0; s < ns; s++) {
        /* pool blocks inside [addr, addr + size) of the same device */
        while (li < c->nlive &&
               (c->live[li].device < segs[s].dev ||
                (c->live[li].device == segs[s].dev && c->live[li].address < segs[s].addr)))
            li++;
        size_t nb = 0;
        for (size_t j = li; j < c->nlive && c->live[j].device == segs[s].dev &&
                            c->live[j].address < segs[s].addr + segs[s].size;
             j++) {
            if (c->live[j].kind != GMP_MEM_ASYNC_POOL || placed[j] ||
                c->live[j].address + c->live[j].size > segs[s].addr + segs[s].size)
                continue;
            placed[j] = 1;
            tmp[nb++] = c->live[j];
        }
        write_segment(c, w, segs[s].dev, segs[s].addr, segs[s].size, 0, tmp, nb, 0);
    }
    /* allocations that are segments of their own */
    for (size_t j = 0; j < c->nlive; j++) {
        const gmp_replay_alloc *a = &c->live[j];
        if (a->kind == GMP_MEM_ASYNC_POOL)
            continue;
        gmp_replay_alloc b = *a;
        b.address = seg_addr(a);
        write_segment(c, w, a->device, b.address, a->size, 0, &b, 1, a->stack);
    }
    /* per device: the pool blocks no segment holds, in expandable segments. A reader finds a
     * block's address by adding the sizes of the blocks before it to its segment's address
     * (memory_viz does; it ignores the blocks' own addresses), so each run of contiguous blocks
     * is an expandable segment at its first block's address, and the mapped bytes they leave
     * over are one more, without blocks, at the synthetic address: reserved bytes are the same
     * (the larger of the mapped bytes and the blocks'), and every block is where the trace's
     * entries name it. */
    for (int32_t d = 0; d < MAX_DEVICES; d++) {
        dev *v = &c->devs[d];
        size_t nb = 0;
        for (size_t j = 0; j < c->nlive; j++)
            if (c->live[j].device == d && c->live[j].kind == GMP_MEM_ASYNC_POOL && !placed[j])
                tmp[nb++] = c->live[j]; /* by address: live is sorted */
        uint64_t sum = 0;
        for (size_t lo = 0, hi; lo < nb; lo = hi) {
            uint64_t run = tmp[lo].size;
            for (hi = lo + 1; hi < nb && tmp[hi].address == tmp[hi - 1].address + tmp[hi - 1].size;
                 hi++)
                run += tmp[hi].size;
            write_segment(c, w, d, tmp[lo].address, run, 1, tmp + lo, hi - lo, 0);
            sum += run;
        }
        if (v->exp_mapped > sum)
            write_segment(c, w, d, EXP_BASE(d), v->exp_mapped - sum, 1, NULL, 0, 0);
    }
    pw_op(w, 'e');
    free(segs);
    free(placed);
    free(tmp);
    return w->err ? GMP_ERR_IO : GMP_OK;
}

/* ---- the output ---- */

static void pt_discard(gmp_output_ctx *c)
{
    if (!c)
        return;
    if (c->devs)
        for (int d = 0; d < MAX_DEVICES; d++)
            if (c->devs[d].spool)
                fclose(c->devs[d].spool);
    free(c->devs);
    if (c->segspool)
        fclose(c->segspool);
    if (c->annspool)
        fclose(c->annspool);
    gmp_omap_free(&c->tid_dev);
    gmp_obuf_free(&c->umeta);
    gmp_omap_free(&c->pools);
    gmp_omap_free(&c->memo);
    free(c->pool_v);
    free(c->frames);
    free(c->live);
    gmp_obuf_free(&c->text);
    free(c);
}

static gmp_err pt_start(gmp_output_ctx **out, FILE *f, const char *path, const gmp_output_opts *o)
{
    gmp_output_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return GMP_ERR_NOMEM;
    c->f = f;
    c->o = *o;
    c->devs = calloc(MAX_DEVICES, sizeof *c->devs);
    c->frames = malloc(MAX_FRAMES * sizeof *c->frames);
    if (!c->devs || !c->frames) {
        pt_discard(c);
        return GMP_ERR_NOMEM;
    }
    *out = c;
    return GMP_OK;
}

static gmp_err pt_add_trace(gmp_output_ctx *c, gmp_replay *rp, const gmp_output_trace *tr)
{
    if (c->have_trace)
        return gmp_replay_fail(rp, GMP_ERR_UNSUPPORTED,
                               "a PyTorch snapshot describes one process: convert one trace "
                               "at a time with --pytorch-snapshot");
    c->have_trace = 1;
    c->rp = rp;
    c->tr = *tr;
    const gmp_rec_header *h = tr->header;
    if (h && h->start_wall_ns)
        c->wall_base = h->start_wall_ns - h->start_trace_ns; /* modulo 2^64: wall = t + base */
    return gmp_replay_add(rp, &pytorch_ops, c);
}

static gmp_err pt_finish(gmp_output_ctx *c, gmp_output_result *res)
{
    pw w = {c->f, 0};
    gmp_err e = GMP_OK;
    pw_op(&w, 0x80);
    pw_op(&w, 4);
    pw_op(&w, '}');
    pw_op(&w, '(');
    pw_key(&w, "segments");
    char buf[65536];
    size_t n;
    if (c->segspool && fseek(c->segspool, 0, SEEK_SET) == 0) {
        while ((n = fread(buf, 1, sizeof buf, c->segspool)) > 0)
            pw_raw(&w, buf, n);
        if (ferror(c->segspool))
            e = GMP_ERR_IO;
    } else {
        pw_op(&w, ']');
    }
    pw_key(&w, "device_traces");
    pw_op(&w, ']');
    pw_op(&w, '(');
    int last = -1;
    for (int d = 0; d < MAX_DEVICES; d++)
        if (c->devs[d].used)
            last = d;
    for (int d = 0; d <= last && e == GMP_OK; d++) {
        dev *v = &c->devs[d];
        if (!v->used) {
            pw_op(&w, ']');
            continue;
        }
        pw sp = {v->spool, 0};
        pw_op(&sp, 'e');
        if (sp.err || fflush(v->spool) != 0 || fseek(v->spool, 0, SEEK_SET) != 0) {
            e = GMP_ERR_IO;
            break;
        }
        while ((n = fread(buf, 1, sizeof buf, v->spool)) > 0)
            pw_raw(&w, buf, n);
        if (ferror(v->spool))
            e = GMP_ERR_IO;
    }
    pw_op(&w, 'e');
    pw_key(&w, "allocator_settings");
    pw_op(&w, '}');
    pw_key(&w, "external_annotations");
    pw_op(&w, ']');
    if (c->annspool && e == GMP_OK) {
        pw sp = {c->annspool, 0};
        pw_op(&sp, 'e');
        if (sp.err || fflush(c->annspool) != 0 || fseek(c->annspool, 0, SEEK_SET) != 0)
            e = GMP_ERR_IO;
        while (e == GMP_OK && (n = fread(buf, 1, sizeof buf, c->annspool)) > 0)
            pw_raw(&w, buf, n);
        if (ferror(c->annspool))
            e = GMP_ERR_IO;
    }
    pw_op(&w, 'u');
    pw_op(&w, '.');
    if (e == GMP_OK && (w.err || fflush(c->f) != 0))
        e = GMP_ERR_IO;
    if (e != GMP_OK && res)
        snprintf(res->error, sizeof res->error, "%s",
                 e == GMP_ERR_NOMEM ? "out of memory" : "cannot write the file");
    pt_discard(c);
    return e;
}

const gmp_output gmp_out_pytorch = {
    .name = "pytorch-snapshot",
    .start = pt_start,
    .add_trace = pt_add_trace,
    .finish = pt_finish,
    .discard = pt_discard,
};
