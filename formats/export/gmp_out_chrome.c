/* Chrome trace output (the JSON object form that chrome://tracing and Perfetto load):
 *
 *   {"traceEvents":[ ...one event per line... ],"displayTimeUnit":"ns","otherData":{...}}
 *
 * Per process (one per trace): process and thread names ("M"); per device counter tracks
 * "Device n memory" (allocated, reserved) and "Device n driver" (used, from samples); NVTX push/pop
 * ranges as B/E slices on their thread, start/end ranges as async spans, marks as instants; every
 * allocation's lifetime as an async span (b/e, both written when it is freed, or at the end for
 * what was never freed) on the track "Device n allocations" (capped by max_spans; the rest is
 * counted); OOMs and each device's peaks as instants; with chrome_torch_compat, a
 * PyTorch-profiler-style
 * "[memory]" instant per allocation and free of device memory (the form Kineto writes:
 * ph "i", cat "cpu_instant_event", s "t", args Device Type / Device Id / Addr / Bytes /
 * Total Allocated / Total Reserved). Times ("ts") are microseconds with three decimals (ns kept)
 * from the start of the earliest trace. Events are written as they come: memory holds the open
 * ranges per thread, the devices and cached strings of distinct ranges, APIs and stacks. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_export.h"
#include "gmp_frames.h"
#include "gmp_out_counters.h"
#include "gmp_output.h"
#include "gmp_reader.h"

#define MAX_STACK_FRAMES 32 /* frames of a stack written in args */

typedef struct dev_state {
    int32_t id;
    int counted; /* a counter was written */
    uint64_t last_alloc, last_res;
    uint64_t cat[GMP_CAT_COUNT]; /* allocated per category (gmp_frames.h) */
    int cat_on;                  /* a category other than `other` has had bytes: the category
                                    counter is written from then on */
    gmp_ctr_track mem, bycat;    /* the counter tracks, bounded (gmp_out_counters.h) */
    char label[24];              /* "Device 0" */
    char span_name[GMP_MEM_KIND_COUNT][48]; /* "Device 0 allocations", "host managed" */
} dev_state;

typedef struct ctrace {
    gmp_output_trace info;
    gmp_replay *rp;
    gmp_reader *r;
    gmp_omap threads; /* tid -> open B slices */
    gmp_omap devmap;  /* device id -> index + 1 into devs */
    dev_state *devs;
    size_t ndevs, capdevs;
    gmp_omap cats;  /* stack id | range id << 32 -> gmp_category + 1 */
    gmp_omap cache; /* key -> offset + 1 of a cached JSON fragment in frag */
    gmp_obuf frag;  /* fragments: u32 length, then the bytes */
    gmp_obuf tmp;
    uint64_t spans, dropped;
} ctrace;

struct gmp_output_ctx {
    gmp_jw w;
    gmp_output_opts o;
    int any;          /* an event was written */
    uint64_t next_id; /* async span ids */
    uint64_t spans, dropped;
    uint64_t merged; /* counter changes gathered into time buckets (gmp_out_counters.h) */
    gmp_obuf traces; /* otherData.traces entries */
    int64_t rank;    /* rank of the single trace, -1 */
    int64_t world;   /* its world size, 0 unknown */
    ctrace *t;
};

enum { K_RANGE_PATH = 1, K_RANGE_NAME, K_STRING, K_STACK };

/* ---- events ---- */

static void ev_open(gmp_output_ctx *c, const char *ph, uint32_t pid, uint32_t tid, int64_t ts)
{
    gmp_jw *w = &c->w;
    if (c->any)
        gmp_jw_lit(w, ",\n{\"ph\":\"");
    else
        gmp_jw_lit(w, "\n{\"ph\":\"");
    c->any = 1;
    gmp_jw_cstr_raw(w, ph);
    gmp_jw_lit(w, "\",\"pid\":");
    gmp_jw_u64(w, pid);
    gmp_jw_lit(w, ",\"tid\":");
    gmp_jw_u64(w, tid);
    gmp_jw_lit(w, ",\"ts\":");
    gmp_jw_us(w, ts);
}

static void ev_meta(gmp_output_ctx *c, uint32_t pid, uint32_t tid, const char *what,
                    const char *key, const char *val, size_t n)
{
    ev_open(c, "M", pid, tid, 0);
    gmp_jw_lit(&c->w, ",\"name\":\"");
    gmp_jw_cstr_raw(&c->w, what);
    gmp_jw_lit(&c->w, "\",\"args\":{\"");
    gmp_jw_cstr_raw(&c->w, key);
    gmp_jw_lit(&c->w, "\":");
    if (val)
        gmp_jw_str(&c->w, val, n);
    else
        gmp_jw_u64(&c->w, n);
    gmp_jw_lit(&c->w, "}}");
}

/* ---- cached fragments (escaped strings of distinct ids) ---- */

static const char *frag_get(ctrace *t, uint64_t key, size_t *len)
{
    uint64_t *v = gmp_omap_get(&t->cache, key);
    if (!v)
        return NULL;
    uint32_t n;
    memcpy(&n, t->frag.p + *v - 1, sizeof n);
    *len = n;
    return t->frag.p + *v - 1 + sizeof n;
}

/* Stores tmp as the fragment of key; returns it (NULL when out of memory). */
static const char *frag_put(ctrace *t, uint64_t key, size_t *len)
{
    int fresh;
    size_t off = t->frag.len;
    uint32_t n = (uint32_t)t->tmp.len;
    gmp_obuf_add(&t->frag, (const char *)&n, sizeof n);
    gmp_obuf_add(&t->frag, t->tmp.p ? t->tmp.p : "", t->tmp.len);
    uint64_t *v = t->frag.oom ? NULL : gmp_omap_put(&t->cache, key, &fresh);
    if (!v)
        return NULL;
    *v = off + 1;
    *len = n;
    return t->frag.p + off + sizeof n;
}

/* Writes the JSON string of a string id (API names). */
static void w_strid(gmp_output_ctx *c, ctrace *t, uint32_t id)
{
    size_t n;
    const char *p = frag_get(t, ((uint64_t)K_STRING << 32) | id, &n);
    if (!p) {
        gmp_str s = gmp_reader_string(t->r, id);
        t->tmp.len = 0;
        gmp_obuf_json(&t->tmp, s.ptr, s.len);
        p = frag_put(t, ((uint64_t)K_STRING << 32) | id, &n);
    }
    if (p)
        gmp_jw_raw(&c->w, p, n);
    else
        gmp_jw_lit(&c->w, "\"\"");
}

/* Writes the JSON string of a range path ("train/step") or of its last name only. */
static void w_range(gmp_output_ctx *c, ctrace *t, uint32_t id, int leaf)
{
    uint64_t key = ((uint64_t)(leaf ? K_RANGE_NAME : K_RANGE_PATH) << 32) | id;
    size_t n;
    const char *p = frag_get(t, key, &n);
    if (!p) {
        t->tmp.len = 0;
        if (leaf) {
            const gmp_rec_range *rr = gmp_reader_range(t->r, id);
            gmp_str s = rr ? gmp_reader_string(t->r, rr->name) : (gmp_str){"", 0};
            gmp_obuf_json(&t->tmp, s.ptr, s.len);
        } else {
            char small[256];
            size_t k = gmp_reader_range_path(t->r, id, small, sizeof small);
            if (k < sizeof small) {
                gmp_obuf_json(&t->tmp, small, k);
            } else {
                char *big = malloc(k + 1);
                if (big) {
                    gmp_reader_range_path(t->r, id, big, k + 1);
                    gmp_obuf_json(&t->tmp, big, k);
                    free(big);
                } else {
                    gmp_obuf_json(&t->tmp, small, sizeof small - 1);
                }
            }
        }
        p = frag_put(t, key, &n);
    }
    if (p)
        gmp_jw_raw(&c->w, p, n);
    else
        gmp_jw_lit(&c->w, "\"\"");
}

/* Writes a stack as a JSON array of frame strings, innermost first. */
static void w_stack(gmp_output_ctx *c, ctrace *t, uint32_t id)
{
    uint64_t key = ((uint64_t)K_STACK << 32) | id;
    size_t n;
    const char *p = frag_get(t, key, &n);
    if (!p) {
        gmp_replay_frame fr[MAX_STACK_FRAMES];
        size_t depth = gmp_replay_stack_frames(t->rp, id, fr, MAX_STACK_FRAMES);
        size_t k = depth < MAX_STACK_FRAMES ? depth : MAX_STACK_FRAMES;
        gmp_obuf one = {0}, file = {0};
        uint32_t line;
        t->tmp.len = 0;
        gmp_obuf_add(&t->tmp, "[", 1);
        for (size_t i = 0; i < k; i++) {
            one.len = file.len = 0;
            gmp_output_frame(&c->o, t->r, &fr[i], &one, &file, &line);
            if (i)
                gmp_obuf_add(&t->tmp, ",", 1);
            gmp_obuf_json(&t->tmp, one.p, one.len);
        }
        if (depth > k)
            gmp_obuf_printf(&t->tmp, ",\"... %zu more\"", depth - k);
        gmp_obuf_add(&t->tmp, "]", 1);
        gmp_obuf_free(&one);
        gmp_obuf_free(&file);
        p = frag_put(t, key, &n);
    }
    if (p)
        gmp_jw_raw(&c->w, p, n);
    else
        gmp_jw_lit(&c->w, "[]");
}

/* ---- devices ---- */

static dev_state *dev_get(ctrace *t, int32_t id)
{
    int fresh;
    uint64_t *v = gmp_omap_put(&t->devmap, (uint64_t)(int64_t)id, &fresh);
    if (!v)
        return NULL;
    if (!fresh)
        return &t->devs[*v - 1];
    if (t->ndevs == t->capdevs) {
        size_t nc = t->capdevs ? t->capdevs * 2 : 8;
        dev_state *nd = realloc(t->devs, nc * sizeof *nd);
        if (!nd)
            return NULL;
        t->devs = nd;
        t->capdevs = nc;
    }
    dev_state *d = &t->devs[t->ndevs++];
    *v = t->ndevs;
    memset(d, 0, sizeof *d);
    d->id = id;
    gmp_ctr_init(&d->mem, 2, 1);
    gmp_ctr_init(&d->bycat, GMP_CTR_VALUES, 0); /* the six categories of cat_order */
    gmp_output_device_label(id, d->label, sizeof d->label);
    for (unsigned k = 0; k < GMP_MEM_KIND_COUNT; k++) {
        if (gmp_mem_kind_is_device(k))
            snprintf(d->span_name[k], sizeof d->span_name[k], "%s allocations", d->label);
        else
            snprintf(d->span_name[k], sizeof d->span_name[k], "%s %s", d->label,
                     gmp_mem_kind_name(k));
    }
    return d;
}

static gmp_err nomem(gmp_replay *rp)
{
    return gmp_replay_fail(rp, GMP_ERR_NOMEM, "chrome output: out of memory");
}

static void w_mem(gmp_output_ctx *c, ctrace *t, const dev_state *s, uint64_t time,
                  uint64_t allocated, uint64_t reserved)
{
    ev_open(c, "C", t->info.pid, 0, gmp_output_time(&t->info, time));
    gmp_jw_lit(&c->w, ",\"name\":\"");
    gmp_jw_cstr_raw(&c->w, s->label);
    gmp_jw_lit(&c->w, " memory\",\"args\":{\"allocated\":");
    gmp_jw_u64(&c->w, allocated);
    gmp_jw_lit(&c->w, ",\"reserved\":");
    gmp_jw_u64(&c->w, reserved);
    gmp_jw_lit(&c->w, "}}");
}

/* the categories in the order of the counter's args (and of the report's table) */
static const gmp_category cat_order[] = {GMP_CAT_PARAMETER,  GMP_CAT_GRADIENT,  GMP_CAT_OPTIMIZER,
                                         GMP_CAT_ACTIVATION, GMP_CAT_TEMPORARY, GMP_CAT_OTHER};
#define NCAT_ORDER (sizeof cat_order / sizeof cat_order[0])
_Static_assert(NCAT_ORDER == GMP_CTR_VALUES, "a category track's point holds every category");

static void w_cat(gmp_output_ctx *c, ctrace *t, const dev_state *s, uint64_t time,
                  const uint64_t *v)
{
    ev_open(c, "C", t->info.pid, 0, gmp_output_time(&t->info, time));
    gmp_jw_lit(&c->w, ",\"name\":\"");
    gmp_jw_cstr_raw(&c->w, s->label);
    gmp_jw_lit(&c->w, " by category\",\"args\":{");
    for (size_t k = 0; k < NCAT_ORDER; k++) {
        if (k)
            gmp_jw_lit(&c->w, ",");
        gmp_jw_lit(&c->w, "\"");
        gmp_jw_cstr_raw(&c->w, gmp_category_name(cat_order[k]));
        gmp_jw_lit(&c->w, "\":");
        gmp_jw_u64(&c->w, v[k]);
    }
    gmp_jw_lit(&c->w, "}}");
}

/* A counter event when the device's allocated or reserved bytes changed (bounded: past the
 * track's first changes, gathered into time buckets and written at the trace's end). */
static gmp_err counter(gmp_output_ctx *c, ctrace *t, const gmp_replay_device *d, uint64_t time)
{
    dev_state *s = dev_get(t, d->id);
    if (!s)
        return nomem(t->rp);
    if (s->counted ? s->last_alloc == d->allocated && s->last_res == d->reserved
                   : !d->allocated && !d->reserved)
        return GMP_OK; /* unchanged (or still nothing) */
    s->counted = 1;
    s->last_alloc = d->allocated;
    s->last_res = d->reserved;
    uint64_t v[2] = {d->allocated, d->reserved};
    int now = gmp_ctr_add(&s->mem, time, v);
    if (now < 0)
        return nomem(t->rp);
    if (now)
        w_mem(c, t, s, time, d->allocated, d->reserved);
    return GMP_OK;
}

/* Memory by category (docs/report.md, "Memory by category"): a second counter track per device,
 * "Device 0 by category", written once a category other than `other` appears (a trace without
 * PyTorch's frames or phase ranges gets none); bounded as the memory track is. */
static gmp_err cat_counter(gmp_output_ctx *c, ctrace *t, const gmp_replay_alloc *a, int add,
                           uint64_t time)
{
    if (!gmp_mem_kind_is_device(a->kind))
        return GMP_OK;
    dev_state *s = dev_get(t, a->device);
    if (!s)
        return nomem(t->rp);
    uint64_t key = (uint64_t)a->stack | (uint64_t)a->range << 32;
    uint64_t *v = gmp_omap_get(&t->cats, key);
    gmp_category cat;
    if (v) {
        cat = (gmp_category)(*v - 1);
    } else {
        cat = gmp_replay_category(t->rp, a->stack, a->range);
        int fresh;
        v = gmp_omap_put(&t->cats, key, &fresh);
        if (!v)
            return nomem(t->rp);
        *v = (uint64_t)cat + 1;
    }
    if (add)
        s->cat[cat] += a->size;
    else
        s->cat[cat] = s->cat[cat] > a->size ? s->cat[cat] - a->size : 0;
    if (cat != GMP_CAT_OTHER && add)
        s->cat_on = 1;
    if (!s->cat_on)
        return GMP_OK;
    uint64_t vals[NCAT_ORDER];
    for (size_t k = 0; k < NCAT_ORDER; k++)
        vals[k] = s->cat[cat_order[k]];
    int now = gmp_ctr_add(&s->bycat, time, vals);
    if (now < 0)
        return nomem(t->rp);
    if (now)
        w_cat(c, t, s, time, vals);
    return GMP_OK;
}

typedef struct flush_ctx {
    gmp_output_ctx *c;
    ctrace *t;
    const dev_state *s;
    int cat;
} flush_ctx;

static gmp_err flush_point(void *ctx, const gmp_ctr_point *p)
{
    flush_ctx *f = ctx;
    if (f->cat)
        w_cat(f->c, f->t, f->s, p->t, p->v);
    else
        w_mem(f->c, f->t, f->s, p->t, p->v[0], p->v[1]);
    return GMP_OK;
}

/* The counter changes kept in time buckets, written (each device's tracks in turn). */
static gmp_err flush_counters(gmp_output_ctx *c, ctrace *t)
{
    gmp_err e = GMP_OK;
    for (size_t i = 0; i < t->ndevs && e == GMP_OK; i++) {
        dev_state *s = &t->devs[i];
        c->merged += s->mem.merged + s->bycat.merged;
        flush_ctx fm = {c, t, s, 0}, fc = {c, t, s, 1};
        e = gmp_ctr_flush(&s->mem, flush_point, &fm);
        if (e == GMP_OK)
            e = gmp_ctr_flush(&s->bycat, flush_point, &fc);
    }
    return e;
}

static void torch_memory(gmp_output_ctx *c, ctrace *t, const gmp_replay_alloc *a, uint32_t tid,
                         uint64_t time, int64_t bytes, const gmp_replay_device *d)
{
    ev_open(c, "i", t->info.pid, tid, gmp_output_time(&t->info, time));
    gmp_jw_lit(&c->w, ",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\","
                      "\"args\":{\"Device Type\":");
    gmp_jw_u64(&c->w, a->device >= 0 ? 1 : 0); /* c10::DeviceType: CUDA 1, CPU 0 */
    gmp_jw_lit(&c->w, ",\"Device Id\":");
    gmp_jw_i64(&c->w, a->device);
    gmp_jw_lit(&c->w, ",\"Addr\":");
    gmp_jw_u64(&c->w, a->address);
    gmp_jw_lit(&c->w, ",\"Bytes\":");
    gmp_jw_i64(&c->w, bytes);
    gmp_jw_lit(&c->w, ",\"Total Allocated\":");
    gmp_jw_u64(&c->w, d ? d->allocated : 0);
    gmp_jw_lit(&c->w, ",\"Total Reserved\":");
    gmp_jw_u64(&c->w, d ? d->reserved : 0);
    gmp_jw_lit(&c->w, "}}");
}

/* The lifetime of one allocation: b at its allocation, e at end_ns. */
static gmp_err span(gmp_output_ctx *c, ctrace *t, const gmp_replay_alloc *a, uint64_t end_ns,
                    int leaked)
{
    if (c->o.max_spans && c->spans >= c->o.max_spans) {
        c->dropped++;
        t->dropped++;
        return GMP_OK;
    }
    dev_state *d = dev_get(t, a->device);
    if (!d)
        return nomem(t->rp);
    c->spans++;
    t->spans++;
    uint64_t id = ++c->next_id;
    const char *name = d->span_name[a->kind < GMP_MEM_KIND_COUNT ? a->kind : 0];
    gmp_jw *w = &c->w;
    ev_open(c, "b", t->info.pid, a->tid, gmp_output_time(&t->info, a->time_ns));
    gmp_jw_lit(w, ",\"cat\":\"memory\",\"name\":\"");
    gmp_jw_cstr_raw(w, name);
    gmp_jw_lit(w, "\",\"id\":");
    gmp_jw_u64(w, id);
    gmp_jw_lit(w, ",\"args\":{\"bytes\":");
    gmp_jw_u64(w, a->size);
    gmp_jw_lit(w, ",\"kind\":\"");
    gmp_jw_cstr_raw(w, gmp_mem_kind_name(a->kind));
    gmp_jw_lit(w, "\",\"api\":");
    w_strid(c, t, a->api);
    gmp_jw_lit(w, ",\"address\":");
    gmp_jw_hex(w, a->address);
    if (a->range) {
        gmp_jw_lit(w, ",\"range\":");
        w_range(c, t, a->range, 0);
    }
    if (a->stack) {
        gmp_jw_lit(w, ",\"stack\":");
        w_stack(c, t, a->stack);
    }
    if (leaked)
        gmp_jw_lit(w, ",\"leaked\":true");
    gmp_jw_lit(w, "}}");
    ev_open(c, "e", t->info.pid, a->tid, gmp_output_time(&t->info, end_ns));
    gmp_jw_lit(w, ",\"cat\":\"memory\",\"name\":\"");
    gmp_jw_cstr_raw(w, name);
    gmp_jw_lit(w, "\",\"id\":");
    gmp_jw_u64(w, id);
    gmp_jw_lit(w, "}");
    return GMP_OK;
}

/* ---- replay callbacks ---- */

static gmp_err on_def(void *ctx, gmp_replay *rp, const gmp_rec *rec)
{
    gmp_output_ctx *c = ctx;
    if (rec->type == GMP_REC_THREAD) {
        const gmp_rec_thread *th = &rec->u.thread;
        ev_meta(c, c->t->info.pid, th->tid, "thread_name", "name", th->name.ptr, th->name.len);
    }
    return GMP_OK;
}

static gmp_err on_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    gmp_output_ctx *c = ctx;
    ctrace *t = c->t;
    if (ev->status != GMP_REPLAY_OK && ev->status != GMP_REPLAY_REPLACED)
        return GMP_OK;
    if (ev->dev) {
        gmp_err e = counter(c, t, ev->dev, ev->rec->time_ns);
        if (e == GMP_OK && ev->counted && ev->alloc)
            e = cat_counter(c, t, ev->alloc, 1, ev->rec->time_ns);
        if (e != GMP_OK)
            return e;
    }
    if (c->o.chrome_torch_compat && ev->alloc && gmp_mem_kind_is_device(ev->alloc->kind))
        torch_memory(c, t, ev->alloc, ev->rec->tid, ev->rec->time_ns, (int64_t)ev->alloc->size,
                     ev->dev);
    return GMP_OK;
}

static gmp_err on_free(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    gmp_output_ctx *c = ctx;
    ctrace *t = c->t;
    if (ev->status != GMP_REPLAY_OK || !ev->alloc)
        return GMP_OK;
    for (size_t i = 0; i < ev->nalloc; i++) {
        gmp_err e = span(c, t, &ev->alloc[i], ev->rec->time_ns, 0);
        if (e != GMP_OK)
            return e;
        if (c->o.chrome_torch_compat && gmp_mem_kind_is_device(ev->alloc[i].kind))
            torch_memory(c, t, &ev->alloc[i], ev->rec->tid, ev->rec->time_ns,
                         -(int64_t)ev->alloc[i].size, ev->dev);
    }
    if (!ev->dev)
        return GMP_OK;
    gmp_err e = counter(c, t, ev->dev, ev->rec->time_ns);
    for (size_t i = 0; e == GMP_OK && ev->counted && i < ev->nalloc; i++)
        e = cat_counter(c, t, &ev->alloc[i], 0, ev->rec->time_ns);
    return e;
}

static gmp_err on_range(void *ctx, gmp_replay *rp, const gmp_replay_range *ev)
{
    gmp_output_ctx *c = ctx;
    ctrace *t = c->t;
    gmp_jw *w = &c->w;
    switch (ev->op) {
    case GMP_REPLAY_PUSH: {
        int fresh;
        uint64_t *open = gmp_omap_put(&t->threads, ev->tid, &fresh);
        if (!open)
            return nomem(rp);
        (*open)++;
        ev_open(c, "B", t->info.pid, ev->tid, gmp_output_time(&t->info, ev->end_ns));
        gmp_jw_lit(w, ",\"cat\":\"nvtx\",\"name\":");
        w_range(c, t, ev->range, 1);
        gmp_jw_lit(w, ",\"args\":{\"path\":");
        w_range(c, t, ev->range, 0);
        gmp_jw_lit(w, "}}");
        return GMP_OK;
    }
    case GMP_REPLAY_POP: {
        uint64_t *open = gmp_omap_get(&t->threads, ev->tid);
        if (!open || !*open)
            return GMP_OK;
        (*open)--;
        ev_open(c, "E", t->info.pid, ev->tid, gmp_output_time(&t->info, ev->end_ns));
        if (ev->implicit)
            gmp_jw_lit(w, ",\"args\":{\"closed_implicitly\":true}");
        gmp_jw_char(w, '}');
        return GMP_OK;
    }
    case GMP_REPLAY_START: return GMP_OK; /* written at its end, with its beginning */
    case GMP_REPLAY_END: {
        uint64_t id = ++c->next_id;
        for (int end = 0; end < 2; end++) {
            ev_open(c, end ? "e" : "b", t->info.pid, ev->tid,
                    gmp_output_time(&t->info, end ? ev->end_ns : ev->begin_ns));
            gmp_jw_lit(w, ",\"cat\":\"nvtx\",\"name\":");
            w_range(c, t, ev->range, 1);
            gmp_jw_lit(w, ",\"id\":");
            gmp_jw_u64(w, id);
            gmp_jw_char(w, '}');
        }
        return GMP_OK;
    }
    case GMP_REPLAY_MARK:
        ev_open(c, "i", t->info.pid, ev->tid, gmp_output_time(&t->info, ev->end_ns));
        gmp_jw_lit(w, ",\"s\":\"t\",\"cat\":\"nvtx\",\"name\":");
        w_range(c, t, ev->range, 1);
        gmp_jw_char(w, '}');
        return GMP_OK;
    }
    return GMP_OK;
}

static gmp_err on_pool(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *d)
{
    gmp_output_ctx *c = ctx;
    return d ? counter(c, c->t, d, rec->time_ns) : GMP_OK;
}

static gmp_err on_sample(void *ctx, gmp_replay *rp, const gmp_replay_sample *ev)
{
    gmp_output_ctx *c = ctx;
    ctrace *t = c->t;
    dev_state *d = dev_get(t, ev->rec->u.sample.device);
    if (!d)
        return nomem(rp);
    ev_open(c, "C", t->info.pid, 0, gmp_output_time(&t->info, ev->rec->time_ns));
    gmp_jw_lit(&c->w, ",\"name\":\"");
    gmp_jw_cstr_raw(&c->w, d->label);
    gmp_jw_lit(&c->w, " driver\",\"args\":{\"used\":");
    gmp_jw_u64(&c->w, ev->used);
    gmp_jw_lit(&c->w, "}}");
    return GMP_OK;
}

static gmp_err on_oom(void *ctx, gmp_replay *rp, const gmp_replay_oom *o)
{
    gmp_output_ctx *c = ctx;
    ctrace *t = c->t;
    gmp_jw *w = &c->w;
    char label[24];
    ev_open(c, "i", t->info.pid, o->tid, gmp_output_time(&t->info, o->time_ns));
    gmp_jw_lit(w, ",\"s\":\"p\",\"cat\":\"oom\",\"name\":\"out of memory (");
    gmp_jw_cstr_raw(w, gmp_output_device_label(o->device, label, sizeof label));
    gmp_jw_lit(w, ")\",\"args\":{\"requested\":");
    gmp_jw_u64(w, o->requested);
    gmp_jw_lit(w, ",\"api\":");
    w_strid(c, t, o->api);
    gmp_jw_lit(w, ",\"allocated\":");
    gmp_jw_u64(w, o->live_bytes);
    gmp_jw_lit(w, ",\"reserved\":");
    gmp_jw_u64(w, o->reserved_bytes);
    gmp_jw_lit(w, ",\"driver_free\":");
    gmp_jw_u64(w, o->free_bytes);
    gmp_jw_lit(w, ",\"result\":");
    gmp_jw_i64(w, o->result);
    if (o->range) {
        gmp_jw_lit(w, ",\"range\":");
        w_range(c, t, o->range, 0);
    }
    if (o->stack) {
        gmp_jw_lit(w, ",\"stack\":");
        w_stack(c, t, o->stack);
    }
    gmp_jw_lit(w, "}}");
    return GMP_OK;
}

static gmp_err on_event(void *ctx, gmp_replay *rp, const gmp_rec *rec)
{
    gmp_output_ctx *c = ctx;
    ctrace *t = c->t;
    gmp_jw *w = &c->w;
    if (rec->type == GMP_REC_NOTICE) {
        ev_open(c, "i", t->info.pid, rec->tid, gmp_output_time(&t->info, rec->time_ns));
        gmp_jw_lit(w,
                   ",\"s\":\"p\",\"cat\":\"notice\",\"name\":\"notice\",\"args\":{\"severity\":");
        gmp_jw_u64(w, rec->u.notice.severity);
        gmp_jw_lit(w, ",\"message\":");
        gmp_jw_str(w, rec->u.notice.message.ptr, rec->u.notice.message.len);
        gmp_jw_lit(w, "}}");
    } else if (rec->type == GMP_REC_LOST) {
        ev_open(c, "i", t->info.pid, rec->tid, gmp_output_time(&t->info, rec->time_ns));
        gmp_jw_lit(w,
                   ",\"s\":\"p\",\"cat\":\"lost\",\"name\":\"lost events\",\"args\":{\"count\":");
        gmp_jw_u64(w, rec->u.lost.count);
        gmp_jw_lit(w, ",\"reason\":\"");
        gmp_jw_cstr_raw(w, gmp_lost_reason_name(rec->u.lost.reason));
        gmp_jw_lit(w, "\"}}");
    }
    return GMP_OK;
}

typedef struct leak_walk {
    gmp_output_ctx *c;
    uint64_t end;
} leak_walk;

static gmp_err leak_span(void *ctx, const gmp_replay_alloc *a)
{
    leak_walk *lw = ctx;
    return span(lw->c, lw->c->t, a, lw->end, 1);
}

static int by_time(const void *x, const void *y)
{
    const gmp_replay_alloc *a = x, *b = y;
    if (a->time_ns != b->time_ns)
        return a->time_ns < b->time_ns ? -1 : 1;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    return a->address < b->address ? -1 : a->address > b->address;
}

typedef struct live_list {
    gmp_replay_alloc *a; /* copies: the replay passes a temporary */
    size_t n, cap;
} live_list;

static gmp_err collect_live(void *ctx, const gmp_replay_alloc *a)
{
    live_list *l = ctx;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        gmp_replay_alloc *p = realloc(l->a, nc * sizeof *p);
        if (!p)
            return GMP_ERR_NOMEM;
        l->a = p;
        l->cap = nc;
    }
    l->a[l->n++] = *a;
    return GMP_OK;
}

static void trace_free(ctrace *t)
{
    if (!t)
        return;
    gmp_omap_free(&t->threads);
    gmp_omap_free(&t->devmap);
    gmp_omap_free(&t->cache);
    gmp_omap_free(&t->cats);
    gmp_obuf_free(&t->frag);
    gmp_obuf_free(&t->tmp);
    for (size_t i = 0; i < t->ndevs; i++) {
        gmp_ctr_free(&t->devs[i].mem);
        gmp_ctr_free(&t->devs[i].bycat);
    }
    free(t->devs);
    free(t);
}

static gmp_err on_end(void *ctx, gmp_replay *rp)
{
    gmp_output_ctx *c = ctx;
    ctrace *t = c->t;
    gmp_jw *w = &c->w;
    const gmp_replay_summary *s = gmp_replay_get_summary(rp);
    uint64_t last = s->last_ns;
    int64_t ts_last = gmp_output_time(&t->info, last);
    if (flush_counters(c, t) != GMP_OK)
        return nomem(rp);
    /* ranges still open: closed at the last event */
    for (size_t i = 0; i < t->threads.cap; i++) {
        if (!t->threads.used[i])
            continue;
        for (uint64_t k = 0; k < t->threads.vals[i]; k++) {
            ev_open(c, "E", t->info.pid, (uint32_t)t->threads.keys[i], ts_last);
            gmp_jw_lit(w, ",\"args\":{\"open_at_end\":true}}");
        }
    }
    /* allocations never freed: spans to the last event, oldest first (a stable order) */
    live_list l = {0};
    gmp_err e = gmp_replay_live_foreach(rp, collect_live, &l);
    if (e != GMP_OK) {
        free(l.a);
        return nomem(rp);
    }
    if (l.n)
        qsort(l.a, l.n, sizeof *l.a, by_time);
    leak_walk lw = {c, last};
    for (size_t i = 0; i < l.n && e == GMP_OK; i++)
        e = leak_span(&lw, &l.a[i]);
    free(l.a);
    if (e != GMP_OK)
        return e;
    /* the devices' peaks */
    for (size_t i = 0; i < gmp_replay_device_count(rp); i++) {
        const gmp_replay_device *d = gmp_replay_device_at(rp, i);
        char label[24];
        gmp_output_device_label(d->id, label, sizeof label);
        for (int res = 0; res < 2; res++) {
            uint64_t v = res ? d->peak_reserved : d->peak_allocated;
            uint64_t at = res ? d->peak_reserved_time_ns : d->peak_time_ns;
            if (!v)
                continue;
            ev_open(c, "i", t->info.pid, 0, gmp_output_time(&t->info, at));
            gmp_jw_lit(w, ",\"s\":\"p\",\"cat\":\"peak\",\"name\":\"");
            gmp_jw_cstr_raw(w, res ? "peak reserved (" : "peak allocated (");
            gmp_jw_cstr_raw(w, label);
            gmp_jw_lit(w, ")\",\"args\":{\"bytes\":");
            gmp_jw_u64(w, v);
            gmp_jw_lit(w, "}}");
        }
    }
    /* what otherData says about this trace */
    gmp_obuf *b = &c->traces;
    const char *sep = b->len ? ",\n  {\"path\":" : "\n  {\"path\":";
    gmp_obuf_add(b, sep, strlen(sep));
    gmp_obuf_json(b, t->info.path, strlen(t->info.path));
    const gmp_rec_header *h = t->info.header;
    gmp_obuf_printf(b, ",\"pid\":%" PRIu32 ",\"trace_pid\":%" PRIu32 ",\"rank\":%" PRId64,
                    t->info.pid, h ? h->pid : 0, h ? h->rank : -1);
    gmp_obuf_add(b, ",\"hostname\":", 12);
    gmp_obuf_json(b, h ? h->hostname.ptr : "", h ? h->hostname.len : 0);
    gmp_obuf_printf(b,
                    ",\"start_wall_ns\":%" PRIu64 ",\"complete\":%s,\"events\":%" PRIu64
                    ",\"allocation_spans\":%" PRIu64 ",\"allocation_spans_dropped\":%" PRIu64
                    ",\"completeness\":",
                    h ? h->start_wall_ns : 0, s->complete ? "true" : "false", s->events, t->spans,
                    t->dropped);
    gmp_obuf_json(b, s->completeness, strlen(s->completeness));
    gmp_obuf_add(b, "}", 1);
    if (b->oom)
        return nomem(rp);
    c->t = NULL;
    trace_free(t);
    return gmp_jw_flush(w) == GMP_OK
               ? GMP_OK
               : gmp_replay_fail(rp, GMP_ERR_IO, "chrome output: cannot write the file");
}

static const gmp_replay_ops chrome_ops = {
    .def = on_def,
    .alloc = on_alloc,
    .free = on_free,
    .range = on_range,
    .pool = on_pool,
    .sample = on_sample,
    .oom = on_oom,
    .event = on_event,
    .end = on_end,
};

/* ---- the output ---- */

static gmp_err chrome_start(gmp_output_ctx **out, FILE *f, const char *path,
                            const gmp_output_opts *o)
{
    gmp_output_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return GMP_ERR_NOMEM;
    if (gmp_jw_init(&c->w, f) != GMP_OK) {
        free(c);
        return GMP_ERR_NOMEM;
    }
    c->o = *o;
    c->rank = -1;
    gmp_jw_lit(&c->w, "{\"traceEvents\":[");
    *out = c;
    return GMP_OK;
}

static void process_name(gmp_output_ctx *c, const gmp_output_trace *tr)
{
    const gmp_rec_header *h = tr->header;
    gmp_obuf n = {0};
    if (tr->label && *tr->label) {
        gmp_obuf_add(&n, tr->label, strlen(tr->label));
        gmp_obuf_add(&n, ": ", 2);
    }
    size_t start = n.len;
    if (h) {
        for (uint32_t i = 0; i < h->cmdline.len && n.len - start < 160; i++)
            gmp_obuf_add(&n, h->cmdline.ptr[i] ? &h->cmdline.ptr[i] : " ", 1);
        while (n.len > start && n.p[n.len - 1] == ' ')
            n.len--;
    }
    if (n.len == start)
        gmp_obuf_add(&n, "process", 7);
    ev_meta(c, tr->pid, 0, "process_name", "name", n.p ? n.p : "", n.p ? n.len : 0);
    if (h && h->hostname.len)
        ev_meta(c, tr->pid, 0, "process_labels", "labels", h->hostname.ptr, h->hostname.len);
    ev_meta(c, tr->pid, 0, "process_sort_index", "sort_index", NULL, tr->index);
    gmp_obuf_free(&n);
}

static gmp_err chrome_add_trace(gmp_output_ctx *c, gmp_replay *rp, const gmp_output_trace *tr)
{
    trace_free(c->t); /* a previous trace whose replay failed */
    ctrace *t = calloc(1, sizeof *t);
    if (!t)
        return GMP_ERR_NOMEM;
    t->info = *tr;
    t->rp = rp;
    t->r = gmp_replay_reader(rp);
    gmp_err e = gmp_replay_add(rp, &chrome_ops, c);
    if (e != GMP_OK) {
        trace_free(t);
        return e;
    }
    c->t = t;
    if (c->o.ntraces == 1 && tr->header) {
        c->rank = tr->header->rank;
        c->world = tr->header->world_size;
    }
    process_name(c, tr);
    return GMP_OK;
}

static void chrome_discard(gmp_output_ctx *c)
{
    if (!c)
        return;
    trace_free(c->t);
    gmp_obuf_free(&c->traces);
    gmp_jw_free(&c->w);
    free(c);
}

static gmp_err chrome_finish(gmp_output_ctx *c, gmp_output_result *res)
{
    gmp_jw *w = &c->w;
    gmp_jw_lit(w, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"exporter\":");
    gmp_jw_cstr(w, c->o.exporter ? c->o.exporter : "gpumemprof");
    gmp_jw_lit(w, ",\"title\":");
    gmp_jw_cstr(w, c->o.title ? c->o.title : "");
    gmp_jw_lit(w, ",\"time_unit\":\"ts in microseconds from the start of the earliest trace\""
                  ",\"allocation_spans\":");
    gmp_jw_u64(w, c->spans);
    gmp_jw_lit(w, ",\"allocation_spans_dropped\":");
    gmp_jw_u64(w, c->dropped);
    gmp_jw_lit(w, ",\"max_spans\":");
    gmp_jw_u64(w, c->o.max_spans);
    if (c->merged) { /* only then: files of shorter runs stay as they were */
        gmp_jw_lit(w, ",\"counter_changes_merged\":");
        gmp_jw_u64(w, c->merged);
    }
    gmp_jw_lit(w, ",\"traces\":[");
    gmp_jw_raw(w, c->traces.p ? c->traces.p : "", c->traces.len);
    gmp_jw_lit(w, "\n]}");
    if (c->o.chrome_torch_compat && c->rank >= 0) {
        gmp_jw_lit(w, ",\n\"distributedInfo\":{\"rank\":"); /* as Kineto writes it (HTA reads it) */
        gmp_jw_i64(w, c->rank);
        if (c->world > 0) { /* torch/profiler/profiler.py, _get_distributed_info: "world_size" */
            gmp_jw_lit(w, ",\"world_size\":");
            gmp_jw_i64(w, c->world);
        }
        gmp_jw_char(w, '}');
    }
    gmp_jw_lit(w, "\n}\n");
    if (res && c->dropped)
        snprintf(res->note, sizeof res->note,
                 "%" PRIu64 " of %" PRIu64
                 " allocation spans were not written (--max-spans %" PRIu64
                 "); the [memory] events are complete; use --max-spans 0 for all%s",
                 c->dropped, c->dropped + c->spans, c->o.max_spans,
                 c->merged ? "; the counters keep each track's lowest and highest values per "
                             "time bucket"
                           : "; the counters are complete");
    else if (res && c->merged)
        snprintf(res->note, sizeof res->note,
                 "%" PRIu64 " counter changes were merged into time buckets (each track: its "
                 "first %d changes, then %d buckets keeping their lowest and highest values)",
                 c->merged, GMP_CTR_EXACT, GMP_CTR_BUCKETS);
    gmp_err e = gmp_jw_flush(w);
    if (e == GMP_OK && fflush(w->f) != 0)
        e = GMP_ERR_IO;
    if (e != GMP_OK && res)
        snprintf(res->error, sizeof res->error, "cannot write the file");
    chrome_discard(c);
    return e;
}

const gmp_output gmp_out_chrome = {
    .name = "chrome",
    .start = chrome_start,
    .add_trace = chrome_add_trace,
    .finish = chrome_finish,
    .discard = chrome_discard,
};
