/* speedscope output (the file format of jlfwong/speedscope, https://www.speedscope.app):
 *
 *   {"$schema":"https://www.speedscope.app/file-format-schema.json","exporter":..,"name":..,
 *    "profiles":[...],"shared":{"frames":[...]},"activeProfileIndex":N}
 *
 * speedscope opens on profile N: the first of the device of the first out-of-memory error (the
 * first trace's that has one), else the first.
 *
 * Per trace and device, sampled profiles whose samples are allocation sites: frames are the NVTX
 * range path (outermost first), then the call stack (outermost first), weights in bytes (unit
 * "bytes") and in allocations (unit "none"): what was live at the device's peak, what was
 * allocated over the whole run, what was still live at exit (leaked; "live at end (not leaks)" when
 * the recording ends before the program: a snapshot, a killed process). Per thread, an evented
 * profile (unit "nanoseconds") of its NVTX push/pop ranges. Frames are shared by every profile and
 * deduplicated by their text; stack frames carry file and line when the trace knows them (Python
 * frames "function (file:line)", native frames "module+0xoffset" or "0xaddress"). Stacks start at
 * the user's code: internal frames (formats/replay/gmp_frames.h, the report's rules) are left out
 * unless opts.all_frames.
 *
 * Streaming: profiles are written when their trace ends and the frames at the very end (JSON does
 * not order keys). A thread's range events go to a temporary spool file in chunks while the trace
 * is replayed; memory holds the open ranges, the frames, the allocation sites and a chunk per
 * thread. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gmp_export.h"
#include "gmp_frames.h"
#include "gmp_intern.h"
#include "gmp_output.h"
#include "gmp_reader.h"

#define CHUNK_EVENTS 512
#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

typedef struct sev {
    int64_t at;
    uint32_t frame;
    uint32_t open; /* 1: "O", 0: "C" */
} sev;

typedef struct chunk_hdr {
    int64_t prev; /* offset of the thread's previous chunk in the spool, -1 */
    uint32_t n;
    uint32_t pad;
} chunk_hdr;

typedef struct sthread {
    uint32_t tid;
    uint32_t *stack; /* frames of the open ranges */
    size_t depth, cap;
    sev buf[CHUNK_EVENTS];
    size_t nbuf;
    int64_t last_chunk;
    int64_t last_at;
    uint64_t nevents;
} sthread;

typedef struct strace {
    gmp_output_trace info;
    gmp_replay *rp;
    gmp_reader *r;
    gmp_omap tmap; /* tid -> index + 1 in th */
    sthread **th;
    size_t nth, capth;
    gmp_omap rframe; /* range node -> frame + 1 */
    gmp_omap sframe; /* stack node -> frame + 1 */
    gmp_omap scls;   /* stack node -> gmp_frame_class + 1 (gmp_frames.h) */
    gmp_obuf tmp;
} strace;

struct gmp_output_ctx {
    gmp_jw w;
    gmp_output_opts o;
    size_t nprof;
    size_t active;     /* the profile speedscope opens on */
    int active_set;    /* an OOM's device chose it */
    gmp_intern frames; /* the frames' JSON objects: frame i is string i */
    FILE *spool;
    int64_t spool_end;
    strace *t;
};

/* ---- frames ---- */

/* Frame of a JSON name built in t->tmp plus optional file/line: its index (equal frame objects
 * share one), or UINT32_MAX when out of memory. */
static uint32_t frame_make(gmp_output_ctx *c, strace *t, const char *name, size_t n,
                           const char *file, size_t fn, uint32_t line)
{
    gmp_obuf *b = &t->tmp;
    b->len = 0;
    gmp_obuf_add(b, "{\"name\":", 8);
    gmp_obuf_json(b, name, n);
    if (file && fn) {
        gmp_obuf_add(b, ",\"file\":", 8);
        gmp_obuf_json(b, file, fn);
        if (line)
            gmp_obuf_printf(b, ",\"line\":%" PRIu32, line);
    }
    gmp_obuf_add(b, "}", 1);
    if (b->oom)
        return UINT32_MAX;
    return gmp_intern_add(&c->frames, b->p, b->len);
}

/* The frame of one range node (its own name). */
static uint32_t range_frame(gmp_output_ctx *c, strace *t, uint32_t id)
{
    uint64_t *v = gmp_omap_get(&t->rframe, id);
    if (v)
        return (uint32_t)(*v - 1);
    const gmp_rec_range *rr = gmp_reader_range(t->r, id);
    gmp_str name = rr ? gmp_reader_string(t->r, rr->name) : (gmp_str){"", 0};
    gmp_str dom = rr && rr->domain ? gmp_reader_string(t->r, rr->domain) : (gmp_str){"", 0};
    uint32_t f;
    if (dom.len) { /* "name (domain)" */
        gmp_obuf s = {0};
        gmp_obuf_add(&s, name.ptr, name.len);
        gmp_obuf_add(&s, " (", 2);
        gmp_obuf_add(&s, dom.ptr, dom.len);
        gmp_obuf_add(&s, ")", 1);
        f = s.oom ? UINT32_MAX : frame_make(c, t, s.p, s.len, NULL, 0, 0);
        gmp_obuf_free(&s);
    } else {
        f = frame_make(c, t, name.ptr, name.len, NULL, 0, 0);
    }
    if (f == UINT32_MAX)
        return f;
    int fresh;
    v = gmp_omap_put(&t->rframe, id, &fresh);
    if (!v)
        return UINT32_MAX;
    *v = (uint64_t)f + 1;
    return f;
}

/* The frame of one stack node (its innermost frame). */
static uint32_t stack_frame(gmp_output_ctx *c, strace *t, uint32_t id)
{
    uint64_t *v = gmp_omap_get(&t->sframe, id);
    if (v)
        return (uint32_t)(*v - 1);
    gmp_replay_frame fr;
    uint32_t f;
    if (gmp_replay_stack_frames(t->rp, id, &fr, 1) == 0) {
        f = frame_make(c, t, "(unknown frame)", 15, NULL, 0, 0);
    } else {
        gmp_obuf s = {0}, file = {0};
        uint32_t line = 0;
        gmp_output_frame(&c->o, t->r, &fr, &s, &file, &line);
        if (s.oom || file.oom)
            f = UINT32_MAX;
        else
            f = frame_make(c, t, s.p ? s.p : "", s.len, file.p, file.len, line);
        gmp_obuf_free(&s);
        gmp_obuf_free(&file);
    }
    if (f == UINT32_MAX)
        return f;
    int fresh;
    v = gmp_omap_put(&t->sframe, id, &fresh);
    if (!v)
        return UINT32_MAX;
    *v = (uint64_t)f + 1;
    return f;
}

/* The class of one stack node's frame (gmp_frames.h), as the report classifies it. */
static int stack_class(gmp_output_ctx *c, strace *t, uint32_t id)
{
    return gmp_output_stack_class(&c->o, t->rp, &t->scls, id);
}

/* ---- threads and their range events ---- */

static gmp_err nomem(gmp_replay *rp)
{
    return gmp_replay_fail(rp, GMP_ERR_NOMEM, "speedscope output: out of memory");
}

static sthread *thread_get(strace *t, uint32_t tid)
{
    int fresh;
    uint64_t *v = gmp_omap_put(&t->tmap, tid, &fresh);
    if (!v)
        return NULL;
    if (!fresh)
        return t->th[*v - 1];
    if (t->nth == t->capth) {
        size_t nc = t->capth ? t->capth * 2 : 16;
        sthread **nt = realloc(t->th, nc * sizeof *nt);
        if (!nt)
            return NULL;
        t->th = nt;
        t->capth = nc;
    }
    sthread *th = calloc(1, sizeof *th);
    if (!th)
        return NULL;
    th->tid = tid;
    th->last_chunk = -1;
    th->last_at = INT64_MIN;
    t->th[t->nth++] = th;
    *v = t->nth;
    return th;
}

static gmp_err spool_chunk(gmp_output_ctx *c, sthread *th)
{
    if (!c->spool) {
        c->spool = tmpfile();
        if (!c->spool)
            return GMP_ERR_IO;
        c->spool_end = 0;
    }
    chunk_hdr h = {th->last_chunk, (uint32_t)th->nbuf, 0};
    if (fseeko(c->spool, c->spool_end, SEEK_SET) != 0 || fwrite(&h, sizeof h, 1, c->spool) != 1 ||
        fwrite(th->buf, sizeof th->buf[0], th->nbuf, c->spool) != th->nbuf)
        return GMP_ERR_IO;
    th->last_chunk = c->spool_end;
    c->spool_end += (int64_t)(sizeof h + th->nbuf * sizeof th->buf[0]);
    th->nbuf = 0;
    return GMP_OK;
}

static gmp_err add_event(gmp_output_ctx *c, sthread *th, int64_t at, uint32_t frame, int open)
{
    if (at < th->last_at) /* an event out of time order (late): speedscope needs them sorted */
        at = th->last_at;
    th->last_at = at;
    if (th->nbuf == CHUNK_EVENTS) {
        gmp_err e = spool_chunk(c, th);
        if (e != GMP_OK)
            return gmp_replay_fail(c->t->rp, e, "speedscope output: cannot write a temporary file");
    }
    th->buf[th->nbuf++] = (sev){at, frame, (uint32_t)open};
    th->nevents++;
    return GMP_OK;
}

static gmp_err on_range(void *ctx, gmp_replay *rp, const gmp_replay_range *ev)
{
    gmp_output_ctx *c = ctx;
    strace *t = c->t;
    if (ev->op != GMP_REPLAY_PUSH && ev->op != GMP_REPLAY_POP)
        return GMP_OK;
    sthread *th = ev->op == GMP_REPLAY_PUSH ? thread_get(t, ev->tid) : NULL;
    if (ev->op == GMP_REPLAY_POP) {
        uint64_t *v = gmp_omap_get(&t->tmap, ev->tid);
        if (!v)
            return GMP_OK;
        th = t->th[*v - 1];
        if (!th->depth)
            return GMP_OK;
        uint32_t f = th->stack[--th->depth];
        return add_event(c, th, gmp_output_time(&t->info, ev->end_ns), f, 0);
    }
    if (!th)
        return nomem(rp);
    uint32_t f = range_frame(c, t, ev->range);
    if (f == UINT32_MAX)
        return nomem(rp);
    if (th->depth == th->cap) {
        size_t nc = th->cap ? th->cap * 2 : 16;
        uint32_t *ns = realloc(th->stack, nc * sizeof *ns);
        if (!ns)
            return nomem(rp);
        th->stack = ns;
        th->cap = nc;
    }
    th->stack[th->depth++] = f;
    return add_event(c, th, gmp_output_time(&t->info, ev->end_ns), f, 1);
}

/* ---- profiles ---- */

static void profile_sep(gmp_output_ctx *c)
{
    gmp_jw_cstr_raw(&c->w, c->nprof ? ",\n" : "\n");
    c->nprof++;
}

/* Writes the name of a profile: "<label>: <what>" */
static void profile_name(gmp_output_ctx *c, strace *t, const char *what, const char *detail,
                         size_t dn)
{
    gmp_obuf s = {0};
    if (t->info.label && *t->info.label) {
        gmp_obuf_add(&s, t->info.label, strlen(t->info.label));
        gmp_obuf_add(&s, ": ", 2);
    }
    gmp_obuf_add(&s, what, strlen(what));
    if (detail)
        gmp_obuf_add(&s, detail, dn);
    gmp_jw_str(&c->w, s.p ? s.p : "", s.len);
    gmp_obuf_free(&s);
}

static void write_events(gmp_jw *w, const sev *e, size_t n, int *first)
{
    for (size_t i = 0; i < n; i++) {
        gmp_jw_cstr_raw(w, *first ? "{\"type\":\"" : ",{\"type\":\"");
        *first = 0;
        gmp_jw_char(w, e[i].open ? 'O' : 'C');
        gmp_jw_lit(w, "\",\"frame\":");
        gmp_jw_u64(w, e[i].frame);
        gmp_jw_lit(w, ",\"at\":");
        gmp_jw_i64(w, e[i].at);
        gmp_jw_char(w, '}');
    }
}

static gmp_err write_thread(gmp_output_ctx *c, strace *t, sthread *th, int64_t start, int64_t end)
{
    gmp_jw *w = &c->w;
    const gmp_rec_thread *td = gmp_reader_thread(t->r, th->tid);
    char what[64];
    snprintf(what, sizeof what, "thread %" PRIu32, th->tid);
    profile_sep(c);
    gmp_jw_lit(w, "{\"type\":\"evented\",\"name\":");
    gmp_obuf d = {0};
    if (td && td->name.len) {
        gmp_obuf_add(&d, " (", 2);
        gmp_obuf_add(&d, td->name.ptr, td->name.len);
        gmp_obuf_add(&d, ")", 1);
    }
    gmp_obuf_add(&d, ": NVTX ranges", 13);
    profile_name(c, t, what, d.p, d.len);
    gmp_obuf_free(&d);
    gmp_jw_lit(w, ",\"unit\":\"nanoseconds\",\"startValue\":");
    gmp_jw_i64(w, start);
    gmp_jw_lit(w, ",\"endValue\":");
    gmp_jw_i64(w, end > th->last_at ? end : th->last_at);
    gmp_jw_lit(w, ",\"events\":[");
    /* the spooled chunks, oldest first: follow the back links, then read forward */
    size_t nch = 0, cap = 0;
    int64_t *offs = NULL;
    for (int64_t o = th->last_chunk; o >= 0;) {
        chunk_hdr h;
        if (nch == cap) {
            size_t nc = cap ? cap * 2 : 64;
            int64_t *no = realloc(offs, nc * sizeof *no);
            if (!no) {
                free(offs);
                return GMP_ERR_NOMEM;
            }
            offs = no;
            cap = nc;
        }
        offs[nch++] = o;
        if (fseeko(c->spool, o, SEEK_SET) != 0 || fread(&h, sizeof h, 1, c->spool) != 1) {
            free(offs);
            return GMP_ERR_IO;
        }
        o = h.prev;
    }
    int first = 1;
    sev buf[CHUNK_EVENTS];
    for (size_t k = nch; k > 0; k--) {
        chunk_hdr h;
        if (fseeko(c->spool, offs[k - 1], SEEK_SET) != 0 || fread(&h, sizeof h, 1, c->spool) != 1 ||
            h.n > CHUNK_EVENTS || fread(buf, sizeof buf[0], h.n, c->spool) != h.n) {
            free(offs);
            return GMP_ERR_IO;
        }
        write_events(w, buf, h.n, &first);
    }
    write_events(w, th->buf, th->nbuf, &first); /* the tail, still in memory */
    th->nbuf = 0;
    free(offs);
    gmp_jw_lit(w, "]}");
    return GMP_OK;
}

/* One allocation site's frames, computed once per trace. */
typedef struct site_frames {
    uint32_t *f; /* all sites' frames back to back */
    size_t *off; /* site i: f[off[i] .. off[i + 1]) */
    size_t n, cap;
} site_frames;

static int sf_push(site_frames *sf, uint32_t v)
{
    if (sf->n == sf->cap) {
        size_t nc = sf->cap ? sf->cap * 2 : 1024;
        uint32_t *nf = realloc(sf->f, nc * sizeof *nf);
        if (!nf)
            return 0;
        sf->f = nf;
        sf->cap = nc;
    }
    sf->f[sf->n++] = v;
    return 1;
}

/* Frames of a path (range or stack trie) from its innermost node, appended outermost first. A
 * stack's internal frames are left out unless the conversion shows all frames (gmp_frames.h: the
 * same rules as the report's; a flame graph has no place for a "+N internal frames" marker, so the
 * folded frames are dropped). */
static int path_frames(gmp_output_ctx *c, strace *t, site_frames *sf, uint32_t id, int stack)
{
    size_t start = sf->n;
    uint8_t cls[256], hide[256];
    size_t ncls = 0;
    for (uint32_t node = id; node;) {
        uint32_t f = stack ? stack_frame(c, t, node) : range_frame(c, t, node);
        if (f == UINT32_MAX || !sf_push(sf, f))
            return 0;
        if (stack && ncls < sizeof cls)
            cls[ncls++] = (uint8_t)stack_class(c, t, node);
        if (stack) {
            const gmp_rec_stack *s = gmp_reader_stack(t->r, node);
            node = s ? s->parent : 0;
        } else {
            const gmp_rec_range *r = gmp_reader_range(t->r, node);
            node = r ? r->parent : 0;
        }
        if (sf->n - start > (1u << 20))
            break; /* a pathological depth */
    }
    if (stack && !c->o.all_frames && ncls == sf->n - start && gmp_frames_fold(cls, ncls, hide)) {
        size_t k = start;
        for (size_t i = 0; i < ncls; i++)
            if (!hide[i])
                sf->f[k++] = sf->f[start + i];
        sf->n = k;
    }
    for (size_t i = start, j = sf->n; i + 1 < j; i++, j--) {
        uint32_t x = sf->f[i];
        sf->f[i] = sf->f[j - 1];
        sf->f[j - 1] = x;
    }
    return 1;
}

enum { M_PEAK, M_TOTAL, M_LEAK };

static int kind_holds_memory(uint32_t kind)
{
    return kind != GMP_MEM_VMM_MAPPING && kind != GMP_MEM_NVTX_REGION && kind != GMP_MEM_VA_RESERVE;
}

static uint64_t site_weight(const gmp_replay_site *s, int metric, int bytes)
{
    switch (metric) {
    case M_PEAK:
        if (!gmp_mem_kind_is_device(s->kind))
            return 0;
        return bytes ? s->peak_bytes : s->peak_count;
    case M_TOTAL:
        if (!kind_holds_memory(s->kind))
            return 0;
        return bytes ? s->alloc_bytes : s->allocs;
    default:
        if (!kind_holds_memory(s->kind))
            return 0;
        return bytes ? s->live_bytes : s->live_count;
    }
}

static void write_sampled(gmp_output_ctx *c, strace *t, const gmp_replay_device *d,
                          const site_frames *sf, int metric, int bytes)
{
    gmp_replay *rp = t->rp;
    size_t ns = gmp_replay_site_count(rp);
    uint64_t total = 0;
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(rp, i);
        if (s->device == d->id)
            total += site_weight(s, metric, bytes);
    }
    if (!total)
        return;
    gmp_jw *w = &c->w;
    char what[64];
    gmp_output_device_label(d->id, what, sizeof what);
    /* what is live at the end is leaked only when the recording ends at the program's exit: a
     * PyTorch snapshot (the importer's header options) is taken while the program runs, a trace
     * without END (killed, cut) ends before it; the report and diff say the same */
    const gmp_rec_header *h = gmp_reader_header(t->r);
    const gmp_reader_stats *rs = gmp_reader_get_stats(t->r);
    int exited = !(h && h->options.len >= 23 &&
                   memmem(h->options.ptr, h->options.len, "import=pytorch-snapshot", 23)) &&
                 rs && rs->has_end && !rs->truncated;
    const char *const metric_names[] = {"live at the peak", "allocated in all",
                                        exited ? "leaked at exit" : "live at end (not leaks)"};
    gmp_obuf det = {0};
    if (d->def && d->def->name.len) {
        gmp_obuf_add(&det, " (", 2);
        gmp_obuf_add(&det, d->def->name.ptr, d->def->name.len);
        gmp_obuf_add(&det, ")", 1);
    }
    gmp_obuf_printf(&det, ": %s, %s", metric_names[metric], bytes ? "bytes" : "allocations");
    profile_sep(c);
    gmp_jw_lit(w, "{\"type\":\"sampled\",\"name\":");
    profile_name(c, t, what, det.p, det.len);
    gmp_obuf_free(&det);
    gmp_jw_cstr_raw(w, bytes ? ",\"unit\":\"bytes\"" : ",\"unit\":\"none\"");
    gmp_jw_lit(w, ",\"startValue\":0,\"endValue\":");
    gmp_jw_u64(w, total);
    gmp_jw_lit(w, ",\"samples\":[");
    int first = 1;
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(rp, i);
        if (s->device != d->id || !site_weight(s, metric, bytes))
            continue;
        gmp_jw_cstr_raw(w, first ? "\n[" : ",\n[");
        first = 0;
        for (size_t k = sf->off[i]; k < sf->off[i + 1]; k++) {
            if (k > sf->off[i])
                gmp_jw_char(w, ',');
            gmp_jw_u64(w, sf->f[k]);
        }
        gmp_jw_char(w, ']');
    }
    gmp_jw_lit(w, "],\"weights\":[");
    first = 1;
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *s = gmp_replay_site_at(rp, i);
        uint64_t v = s->device == d->id ? site_weight(s, metric, bytes) : 0;
        if (!v)
            continue;
        if (!first)
            gmp_jw_char(w, ',');
        first = 0;
        gmp_jw_u64(w, v);
    }
    gmp_jw_lit(w, "]}");
}

static void trace_free(strace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nth; i++) {
        free(t->th[i]->stack);
        free(t->th[i]);
    }
    free(t->th);
    gmp_omap_free(&t->tmap);
    gmp_omap_free(&t->rframe);
    gmp_omap_free(&t->sframe);
    gmp_omap_free(&t->scls);
    gmp_obuf_free(&t->tmp);
    free(t);
}

static gmp_err on_end(void *ctx, gmp_replay *rp)
{
    gmp_output_ctx *c = ctx;
    strace *t = c->t;
    const gmp_replay_summary *s = gmp_replay_get_summary(rp);
    int64_t start = s->first_ns ? gmp_output_time(&t->info, s->first_ns) : 0;
    int64_t end = s->last_ns ? gmp_output_time(&t->info, s->last_ns) : start;

    /* every site's frames: range path, then stack, outermost first */
    size_t ns = gmp_replay_site_count(rp);
    site_frames sf = {0};
    sf.off = malloc((ns + 1) * sizeof *sf.off);
    if (!sf.off)
        return nomem(rp);
    uint32_t none = frame_make(c, t, "(no range)", 10, NULL, 0, 0);
    int ok = none != UINT32_MAX;
    for (size_t i = 0; i < ns && ok; i++) {
        const gmp_replay_site *st = gmp_replay_site_at(rp, i);
        sf.off[i] = sf.n;
        ok = path_frames(c, t, &sf, st->range, 0) && path_frames(c, t, &sf, st->stack, 1);
        if (ok && sf.n == sf.off[i])
            ok = sf_push(&sf, none);
    }
    sf.off[ns] = sf.n;
    if (!ok) {
        free(sf.f);
        free(sf.off);
        return nomem(rp);
    }
    size_t nd = gmp_replay_device_count(rp);
    for (size_t j = 0; j < nd; j++) { /* GPUs first, the host (first in the replay's order) last */
        const gmp_replay_device *d = gmp_replay_device_at(rp, (j + 1) % nd);
        if (gmp_replay_device_at(rp, 0)->id >= 0)
            d = gmp_replay_device_at(rp, j);
        /* the first OOM's device: its first profile is the one speedscope opens on */
        size_t before = c->nprof;
        for (int bytes = 1; bytes >= 0; bytes--)
            for (int m = M_PEAK; m <= M_LEAK; m++)
                write_sampled(c, t, d, &sf, m, bytes);
        if (!c->active_set && c->nprof > before && gmp_replay_oom_count(rp) &&
            gmp_replay_oom_at(rp, 0)->device == d->id) {
            c->active = before;
            c->active_set = 1;
        }
    }
    free(sf.f);
    free(sf.off);

    /* the threads' ranges; those still open close at the end */
    gmp_err e = GMP_OK;
    for (size_t i = 0; i < t->nth && e == GMP_OK; i++) {
        sthread *th = t->th[i];
        while (th->depth && e == GMP_OK)
            e = add_event(c, th, end, th->stack[--th->depth], 0);
        if (e == GMP_OK && th->nevents)
            e = write_thread(c, t, th, start, end);
        if (e != GMP_OK && e != GMP_ERR_NOMEM && e != GMP_ERR_IO)
            return e; /* add_event set the message */
        if (e != GMP_OK)
            return gmp_replay_fail(rp, e, "speedscope output: %s",
                                   e == GMP_ERR_IO ? "cannot read the temporary file"
                                                   : "out of memory");
    }
    c->spool_end = 0;
    c->t = NULL;
    trace_free(t);
    if (gmp_jw_flush(&c->w) != GMP_OK)
        return gmp_replay_fail(rp, GMP_ERR_IO, "speedscope output: cannot write the file");
    return GMP_OK;
}

static const gmp_replay_ops speedscope_ops = {
    .range = on_range,
    .end = on_end,
};

/* ---- the output ---- */

static gmp_err ss_start(gmp_output_ctx **out, FILE *f, const char *path, const gmp_output_opts *o)
{
    gmp_output_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return GMP_ERR_NOMEM;
    if (gmp_jw_init(&c->w, f) != GMP_OK) {
        free(c);
        return GMP_ERR_NOMEM;
    }
    c->o = *o;
    gmp_jw *w = &c->w;
    gmp_jw_lit(w, "{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\n\"exporter\":");
    gmp_jw_cstr(w, o->exporter ? o->exporter : "gpumemprof");
    gmp_jw_lit(w, ",\n\"name\":");
    gmp_jw_cstr(w, o->title && *o->title ? o->title : "gpumemprof");
    gmp_jw_lit(w, ",\n\"profiles\":[");
    *out = c;
    return GMP_OK;
}

static gmp_err ss_add_trace(gmp_output_ctx *c, gmp_replay *rp, const gmp_output_trace *tr)
{
    trace_free(c->t);
    c->t = NULL;
    c->spool_end = 0;
    strace *t = calloc(1, sizeof *t);
    if (!t)
        return GMP_ERR_NOMEM;
    t->info = *tr;
    t->rp = rp;
    t->r = gmp_replay_reader(rp);
    gmp_err e = gmp_replay_add(rp, &speedscope_ops, c);
    if (e != GMP_OK) {
        trace_free(t);
        return e;
    }
    c->t = t;
    return GMP_OK;
}

static void ss_discard(gmp_output_ctx *c)
{
    if (!c)
        return;
    trace_free(c->t);
    if (c->spool)
        fclose(c->spool);
    gmp_intern_free(&c->frames);
    gmp_jw_free(&c->w);
    free(c);
}

static gmp_err ss_finish(gmp_output_ctx *c, gmp_output_result *res)
{
    gmp_jw *w = &c->w;
    if (!c->nprof) { /* speedscope refuses a file without profiles */
        profile_sep(c);
        gmp_jw_lit(w, "{\"type\":\"evented\",\"name\":\"no allocations or ranges were recorded\","
                      "\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":0,\"events\":[]}");
    }
    gmp_jw_lit(w, "\n],\n\"shared\":{\"frames\":[");
    for (uint32_t i = 0; i < gmp_intern_count(&c->frames); i++) {
        size_t n;
        const char *p = gmp_intern_get(&c->frames, i, &n);
        gmp_jw_cstr_raw(w, i ? ",\n" : "\n");
        gmp_jw_raw(w, p, n);
    }
    gmp_jw_lit(w, "\n]},\n\"activeProfileIndex\":");
    gmp_jw_u64(w, c->active);
    gmp_jw_lit(w, "}\n");
    gmp_err e = gmp_jw_flush(w);
    if (e == GMP_OK && fflush(w->f) != 0)
        e = GMP_ERR_IO;
    if (e != GMP_OK && res)
        snprintf(res->error, sizeof res->error, "cannot write the file");
    ss_discard(c);
    return e;
}

const gmp_output gmp_out_speedscope = {
    .name = "speedscope",
    .start = ss_start,
    .add_trace = ss_add_trace,
    .finish = ss_finish,
    .discard = ss_discard,
};
