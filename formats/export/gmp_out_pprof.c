/* pprof output: a gzip-compressed profile.proto (github.com/google/pprof, proto/profile.proto), the
 * format of Go's pprof, JAX's device memory profiles and the tools that read them.
 *
 * One sample per allocation site (device, kind, API, range path, stack) with four values:
 *
 *   inuse_space   bytes   live at the moment of the site's device's peak allocated
 *   inuse_objects count   allocations live then
 *   alloc_space   bytes   allocated over the whole run
 *   alloc_objects count   allocations made over the run
 *
 * (default_sample_type inuse_space), so that per device the inuse_space of its samples adds up to
 * the report's peak_allocated_bytes. Labels: "device" ("Device 0", "host"), "kind" ("device",
 * "pool", ...), "api", "range" (the NVTX path "train/step/forward", when there is one) and, with
 * several traces, "process" (the trace's label). One Location per stack frame (leaf first in each
 * sample), each with its Function (name, file) and line; a native frame with inlined functions is
 * one Location with a Line per function (innermost first, as profile.proto orders them). Internal
 * frames are folded as in every other output (gmp_frames.h) unless the conversion shows all frames.
 * No Mapping is written (frames are symbolized already); native Locations keep their address.
 *
 * The message is built in memory (it grows with the sites and distinct frames, never with the
 * length of a trace) and compressed with zlib at the end. Protobuf is written by hand: varints and
 * length-delimited fields, repeated scalars packed. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gmp_escape.h"
#include "gmp_export.h"
#include "gmp_frames.h"
#include "gmp_intern.h"
#include "gmp_output.h"
#include "gmp_reader.h"

/* ---- protobuf encoding ---- */

static void pb_varint(gmp_obuf *b, uint64_t v)
{
    gmp_obuf_varint(b, v);
}

static void pb_key(gmp_obuf *b, uint32_t field, uint32_t wire)
{
    pb_varint(b, ((uint64_t)field << 3) | wire);
}

/* a varint field, left out when 0 (proto3 default) */
static void pb_u64(gmp_obuf *b, uint32_t field, uint64_t v)
{
    if (!v)
        return;
    pb_key(b, field, 0);
    pb_varint(b, v);
}

static void pb_bytes(gmp_obuf *b, uint32_t field, const char *p, size_t n)
{
    pb_key(b, field, 2);
    pb_varint(b, n);
    gmp_obuf_add(b, p ? p : "", n);
}

/* ---- the output ---- */

typedef struct ptrace {
    gmp_output_trace info;
    gmp_replay *rp;
    gmp_reader *r;
    gmp_omap loc;  /* stack node -> location id */
    gmp_omap cls;  /* stack node -> gmp_frame_class + 1 */
    gmp_omap path; /* range node -> string index + 1 of its path */
} ptrace;

struct gmp_output_ctx {
    FILE *out;
    gmp_output_opts o;
    gmp_intern strs;  /* string_table (index 0 is "") */
    gmp_intern funcs; /* a Function's fields without id: (name, filename) */
    gmp_intern locs;  /* a Location's fields without id: address and lines */
    gmp_obuf samps;   /* the Sample messages, each with its field key */
    gmp_obuf tmp, tmp2;
    uint64_t time_nanos, duration_nanos;
    int oom;
    ptrace *t;
};

/* The string table index of s[0..n). Protobuf strings must be UTF-8: each byte of an invalid
 * sequence is written as the character of its Latin-1 reading, as the JSON outputs do. */
static uint32_t str_idx(gmp_output_ctx *c, const char *s, size_t n)
{
    if (s && n && !gmp_utf8_valid(s, n)) {
        gmp_obuf u = {0};
        for (size_t i = 0; i < n;) {
            size_t k = gmp_utf8_seq_len((const unsigned char *)s + i, n - i);
            if (k) {
                gmp_obuf_add(&u, s + i, k);
                i += k;
            } else {
                unsigned char b = (unsigned char)s[i++];
                char two[2] = {(char)(0xc0 | (b >> 6)), (char)(0x80 | (b & 0x3f))};
                gmp_obuf_add(&u, two, 2);
            }
        }
        uint32_t i = u.oom ? UINT32_MAX : gmp_intern_add(&c->strs, u.p ? u.p : "", u.len);
        gmp_obuf_free(&u);
        if (i == UINT32_MAX)
            c->oom = 1;
        return i;
    }
    uint32_t i = gmp_intern_add(&c->strs, s ? s : "", s ? n : 0);
    if (i == UINT32_MAX)
        c->oom = 1;
    return i;
}

static uint32_t cstr_idx(gmp_output_ctx *c, const char *s)
{
    return str_idx(c, s, s ? strlen(s) : 0);
}

static uint32_t func_id(gmp_output_ctx *c, const char *name, size_t nn, const char *file, size_t fn)
{
    uint32_t ni = str_idx(c, name, nn), fi = str_idx(c, file, fn);
    if (c->oom)
        return 0;
    char key[32]; /* the pair as two varints */
    size_t k = 0;
    for (uint64_t v = ni;; v >>= 7) {
        key[k++] = (char)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
        if (!(v >> 7))
            break;
    }
    for (uint64_t v = fi;; v >>= 7) {
        key[k++] = (char)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
        if (!(v >> 7))
            break;
    }
    uint32_t i = gmp_intern_add(&c->funcs, key, k);
    if (i == UINT32_MAX) {
        c->oom = 1;
        return 0;
    }
    return i + 1;
}

/* Reads a decimal line number s[0..n); 0 when it is not one. */
static uint32_t parse_line(const char *s, size_t n)
{
    if (!n || n > 9)
        return 0;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    return v;
}

/* One function of a native frame's display name "fn (base.c:42)": the function and, when the name
 * ends in "(FILE:LINE)", that file and line. */
typedef struct nfunc {
    const char *fn, *file;
    size_t fnn, filen;
    uint32_t line;
} nfunc;

static nfunc split_one(const char *s, size_t n)
{
    nfunc r = {s, NULL, n, 0, 0};
    if (n < 6 || s[n - 1] != ')')
        return r;
    size_t open = n - 1;
    while (open > 0 && s[open] != '(')
        open--;
    if (open < 2 || s[open - 1] != ' ')
        return r;
    size_t colon = n - 1;
    while (colon > open && s[colon] != ':')
        colon--;
    uint32_t line = colon > open + 1 ? parse_line(s + colon + 1, n - 2 - colon) : 0;
    if (!line)
        return r;
    r.fnn = open - 1;
    r.file = s + open + 1;
    r.filen = colon - open - 1;
    r.line = line;
    return r;
}

/* The Line messages of a native frame's display name: the symbolizer joins inlined functions
 * outermost first as "caller (a.c:3) > inlined (a.h:7)"; the name is cut only after a
 * "(file:line)" (so a C++ name with " > " in its template arguments stays whole). The innermost
 * function gets the full file path. Lines are written innermost first. */
static void native_lines(gmp_output_ctx *c, gmp_obuf *lb, const char *name, size_t n,
                         const char *file, size_t fn, uint32_t line)
{
    nfunc part[64];
    size_t np = 0, start = 0;
    for (size_t i = 0; i + 3 <= n && np + 1 < 64; i++) {
        if (name[i] == ' ' && name[i + 1] == '>' && name[i + 2] == ' ' && i > 0 &&
            name[i - 1] == ')') {
            nfunc f = split_one(name + start, i - start);
            if (f.line) {
                part[np++] = f;
                start = i + 3;
            }
        }
    }
    part[np++] = split_one(name + start, n - start);
    for (size_t k = np; k-- > 0;) {
        nfunc *f = &part[k];
        const char *ff = f->file;
        size_t ffn = f->filen;
        uint32_t fl = f->line;
        if (k == np - 1 && fn) { /* innermost: the symbolizer's file and line */
            ff = file;
            ffn = fn;
            fl = line;
        }
        uint32_t id = func_id(c, f->fn, f->fnn, ff, ffn);
        gmp_obuf *m = &c->tmp2;
        m->len = 0;
        pb_u64(m, 1, id);
        pb_u64(m, 2, fl);
        pb_bytes(lb, 4, m->p, m->len);
    }
}

/* The location id of one stack node's frame. */
static uint64_t stack_loc(gmp_output_ctx *c, ptrace *t, uint32_t node)
{
    uint64_t *v = gmp_omap_get(&t->loc, node);
    if (v)
        return *v;
    gmp_replay_frame fr;
    gmp_obuf *lb = &c->tmp;
    lb->len = 0;
    if (gmp_replay_stack_frames(t->rp, node, &fr, 1) == 0) {
        uint32_t id = func_id(c, "(unknown frame)", 15, NULL, 0);
        gmp_obuf *m = &c->tmp2;
        m->len = 0;
        pb_u64(m, 1, id);
        pb_bytes(lb, 4, m->p, m->len);
    } else if (fr.kind == GMP_FRAME_PYTHON) {
        uint32_t id = func_id(c, fr.function.ptr, fr.function.len, fr.file.ptr, fr.file.len);
        gmp_obuf *m = &c->tmp2;
        m->len = 0;
        pb_u64(m, 1, id);
        pb_u64(m, 2, fr.line);
        pb_bytes(lb, 4, m->p, m->len);
    } else {
        gmp_obuf name = {0}, file = {0};
        uint32_t line = 0;
        gmp_output_frame(&c->o, t->r, &fr, &name, &file, &line);
        if (name.oom || file.oom)
            c->oom = 1;
        pb_u64(lb, 3, fr.address);
        native_lines(c, lb, name.p ? name.p : "", name.p ? name.len : 0, file.p,
                     file.p ? file.len : 0, line);
        gmp_obuf_free(&name);
        gmp_obuf_free(&file);
    }
    if (lb->oom || c->tmp2.oom)
        c->oom = 1;
    if (c->oom)
        return 0;
    uint32_t i = gmp_intern_add(&c->locs, lb->p, lb->len);
    if (i == UINT32_MAX) {
        c->oom = 1;
        return 0;
    }
    int fresh;
    v = gmp_omap_put(&t->loc, node, &fresh);
    if (!v) {
        c->oom = 1;
        return 0;
    }
    *v = (uint64_t)i + 1;
    return *v;
}

/* The class of one stack node's frame (gmp_frames.h), as the report classifies it. */
static int stack_class(gmp_output_ctx *c, ptrace *t, uint32_t node)
{
    return gmp_output_stack_class(&c->o, t->rp, &t->cls, node);
}

/* The string index of a range path "outer/inner" (cached per node); 0 for none. */
static uint64_t range_path(gmp_output_ctx *c, ptrace *t, uint32_t id)
{
    if (!id)
        return 0;
    uint64_t *v = gmp_omap_get(&t->path, id);
    if (v)
        return *v - 1;
    uint32_t nodes[256];
    size_t n = 0;
    for (uint32_t node = id; node && n < 256;) {
        nodes[n++] = node;
        const gmp_rec_range *r = gmp_reader_range(t->r, node);
        node = r ? r->parent : 0;
    }
    gmp_obuf s = {0};
    for (size_t k = n; k-- > 0;) {
        const gmp_rec_range *r = gmp_reader_range(t->r, nodes[k]);
        gmp_str name = r ? gmp_reader_string(t->r, r->name) : (gmp_str){"", 0};
        if (k != n - 1)
            gmp_obuf_add(&s, "/", 1);
        gmp_obuf_add(&s, name.ptr, name.len);
    }
    uint32_t i = s.oom ? UINT32_MAX : str_idx(c, s.p ? s.p : "", s.len);
    gmp_obuf_free(&s);
    if (i == UINT32_MAX) {
        c->oom = 1;
        return 0;
    }
    int fresh;
    v = gmp_omap_put(&t->path, id, &fresh);
    if (!v) {
        c->oom = 1;
        return 0;
    }
    *v = (uint64_t)i + 1;
    return i;
}

static int kind_holds_memory(uint32_t kind)
{
    return kind != GMP_MEM_VMM_MAPPING && kind != GMP_MEM_NVTX_REGION && kind != GMP_MEM_VA_RESERVE;
}

static void label(gmp_obuf *b, gmp_obuf *m, uint64_t key, uint64_t str)
{
    m->len = 0;
    pb_u64(m, 1, key);
    pb_u64(m, 2, str);
    pb_bytes(b, 3, m->p, m->len);
}

/* One site's Sample (appended to c->samps); nothing when all its values are 0. */
static void write_sample(gmp_output_ctx *c, ptrace *t, const gmp_replay_site *s)
{
    uint64_t val[4] = {0, 0, 0, 0};
    if (gmp_mem_kind_is_device(s->kind)) {
        val[0] = s->peak_bytes;
        val[1] = s->peak_count;
    }
    if (kind_holds_memory(s->kind)) {
        val[2] = s->alloc_bytes;
        val[3] = s->allocs;
    }
    if (!val[0] && !val[1] && !val[2] && !val[3])
        return;
    /* the stack's locations, leaf first, internal frames folded */
    uint64_t locs[1024];
    uint8_t cls[1024], hide[1024];
    size_t n = 0;
    for (uint32_t node = s->stack; node && n < 1024;) {
        locs[n] = stack_loc(c, t, node);
        cls[n] = (uint8_t)stack_class(c, t, node);
        n++;
        const gmp_rec_stack *st = gmp_reader_stack(t->r, node);
        node = st ? st->parent : 0;
    }
    if (c->oom)
        return;
    if (!c->o.all_frames && n && gmp_frames_fold(cls, n, hide)) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!hide[i])
                locs[k++] = locs[i];
        n = k;
    }
    gmp_obuf *m = &c->tmp, *l = &c->tmp2;
    m->len = 0;
    if (n) {
        gmp_obuf packed = {0};
        for (size_t i = 0; i < n; i++)
            pb_varint(&packed, locs[i]);
        pb_bytes(m, 1, packed.p, packed.len);
        packed.len = 0;
        for (int i = 0; i < 4; i++)
            pb_varint(&packed, val[i]);
        pb_bytes(m, 2, packed.p, packed.len);
        if (packed.oom)
            c->oom = 1;
        gmp_obuf_free(&packed);
    } else {
        gmp_obuf packed = {0};
        for (int i = 0; i < 4; i++)
            pb_varint(&packed, val[i]);
        pb_bytes(m, 2, packed.p, packed.len);
        if (packed.oom)
            c->oom = 1;
        gmp_obuf_free(&packed);
    }
    char dev[32];
    gmp_output_device_label(s->device, dev, sizeof dev);
    label(m, l, cstr_idx(c, "device"), cstr_idx(c, dev));
    label(m, l, cstr_idx(c, "kind"), cstr_idx(c, gmp_mem_kind_name(s->kind)));
    gmp_str api = gmp_reader_string(t->r, s->api);
    if (api.len)
        label(m, l, cstr_idx(c, "api"), str_idx(c, api.ptr, api.len));
    if (s->range)
        label(m, l, cstr_idx(c, "range"), range_path(c, t, s->range));
    if (t->info.label && *t->info.label)
        label(m, l, cstr_idx(c, "process"), cstr_idx(c, t->info.label));
    pb_bytes(&c->samps, 2, m->p, m->len);
    if (m->oom || l->oom || c->samps.oom)
        c->oom = 1;
}

static void trace_free(ptrace *t)
{
    if (!t)
        return;
    gmp_omap_free(&t->loc);
    gmp_omap_free(&t->cls);
    gmp_omap_free(&t->path);
    free(t);
}

static gmp_err on_end(void *ctx, gmp_replay *rp)
{
    gmp_output_ctx *c = ctx;
    ptrace *t = c->t;
    const gmp_replay_summary *sum = gmp_replay_get_summary(rp);
    const gmp_rec_header *h = gmp_reader_header(t->r);
    if (t->info.index == 0 && h)
        c->time_nanos = h->start_wall_ns;
    if (sum->last_ns > sum->first_ns) {
        uint64_t d = (uint64_t)(gmp_output_time(&t->info, sum->last_ns));
        if (d > c->duration_nanos)
            c->duration_nanos = d;
    }
    size_t ns = gmp_replay_site_count(rp);
    for (size_t i = 0; i < ns && !c->oom; i++)
        write_sample(c, t, gmp_replay_site_at(rp, i));
    c->t = NULL;
    trace_free(t);
    if (c->oom)
        return gmp_replay_fail(rp, GMP_ERR_NOMEM, "pprof output: out of memory");
    return GMP_OK;
}

static const gmp_replay_ops pprof_ops = {
    .end = on_end,
};

static void ctx_free(gmp_output_ctx *c)
{
    if (!c)
        return;
    trace_free(c->t);
    gmp_intern_free(&c->strs);
    gmp_intern_free(&c->funcs);
    gmp_intern_free(&c->locs);
    gmp_obuf_free(&c->samps);
    gmp_obuf_free(&c->tmp);
    gmp_obuf_free(&c->tmp2);
    free(c);
}

static gmp_err pp_start(gmp_output_ctx **out, FILE *f, const char *path, const gmp_output_opts *o)
{
    (void)path;
    gmp_output_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return GMP_ERR_NOMEM;
    c->out = f;
    c->o = *o;
    if (str_idx(c, "", 0) != 0) { /* string_table[0] must be "" */
        ctx_free(c);
        return GMP_ERR_NOMEM;
    }
    *out = c;
    return GMP_OK;
}

static gmp_err pp_add_trace(gmp_output_ctx *c, gmp_replay *rp, const gmp_output_trace *tr)
{
    trace_free(c->t);
    ptrace *t = calloc(1, sizeof *t);
    if (!t)
        return GMP_ERR_NOMEM;
    t->info = *tr;
    t->rp = rp;
    t->r = gmp_replay_reader(rp);
    c->t = t;
    return gmp_replay_add(rp, &pprof_ops, c);
}

static void value_type(gmp_output_ctx *c, gmp_obuf *b, uint32_t field, const char *type,
                       const char *unit)
{
    gmp_obuf *m = &c->tmp2;
    m->len = 0;
    pb_u64(m, 1, cstr_idx(c, type));
    pb_u64(m, 2, cstr_idx(c, unit));
    pb_bytes(b, field, m->p, m->len);
}

/* Compresses msg as gzip onto f. */
static int write_gzip(FILE *f, const char *msg, size_t n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    /* windowBits 15 + 16: a gzip header and trailer; the header's time stays 0 (same input, same
     * bytes) */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    unsigned char buf[1 << 16];
    size_t done = 0;
    int rc = Z_OK, ok = 1;
    while (ok && rc != Z_STREAM_END) {
        size_t chunk = n - done > (1u << 30) ? (1u << 30) : n - done;
        z.next_in = (unsigned char *)(uintptr_t)(msg + done);
        z.avail_in = (uInt)chunk;
        int flush = done + chunk == n ? Z_FINISH : Z_NO_FLUSH;
        do {
            z.next_out = buf;
            z.avail_out = sizeof buf;
            rc = deflate(&z, flush);
            if (rc == Z_STREAM_ERROR) {
                ok = 0;
                break;
            }
            size_t have = sizeof buf - z.avail_out;
            if (have && fwrite(buf, 1, have, f) != have)
                ok = 0;
        } while (ok && z.avail_out == 0);
        done += chunk - z.avail_in;
        if (flush != Z_FINISH && z.avail_in)
            ok = 0;
    }
    deflateEnd(&z);
    return ok ? 0 : -1;
}

static gmp_err pp_finish(gmp_output_ctx *c, gmp_output_result *res)
{
    gmp_obuf msg = {0};
    /* strings first, so that every index exists before the table is written */
    uint32_t inuse = cstr_idx(c, "inuse_space");
    value_type(c, &msg, 1, "inuse_space", "bytes");
    value_type(c, &msg, 1, "inuse_objects", "count");
    value_type(c, &msg, 1, "alloc_space", "bytes");
    value_type(c, &msg, 1, "alloc_objects", "count");
    gmp_obuf_add(&msg, c->samps.p, c->samps.len);
    gmp_obuf *m = &c->tmp;
    for (uint32_t i = 0; i < gmp_intern_count(&c->locs); i++) { /* Location: id, then its fields */
        size_t l;
        const char *p = gmp_intern_get(&c->locs, i, &l);
        m->len = 0;
        pb_u64(m, 1, (uint64_t)i + 1);
        gmp_obuf_add(m, p, l);
        pb_bytes(&msg, 4, m->p, m->len);
    }
    for (uint32_t i = 0; i < gmp_intern_count(&c->funcs);
         i++) { /* Function: id, name, system_name, filename */
        size_t l;
        const char *p = gmp_intern_get(&c->funcs, i, &l);
        /* the key is two varints: name and filename */
        uint64_t v[2] = {0, 0};
        size_t k = 0;
        for (int j = 0; j < 2; j++)
            for (unsigned sh = 0; k < l; sh += 7) {
                uint8_t b = (uint8_t)p[k++];
                v[j] |= (uint64_t)(b & 0x7f) << sh;
                if (!(b & 0x80))
                    break;
            }
        m->len = 0;
        pb_u64(m, 1, (uint64_t)i + 1);
        pb_u64(m, 2, v[0]);
        pb_u64(m, 3, v[0]);
        pb_u64(m, 4, v[1]);
        pb_bytes(&msg, 5, m->p, m->len);
    }
    uint32_t exporter = cstr_idx(c, c->o.exporter ? c->o.exporter : "gpumemprof");
    uint32_t title = c->o.title && *c->o.title ? cstr_idx(c, c->o.title) : 0;
    uint32_t note = cstr_idx(c, "inuse_*: live at each device's peak allocated; alloc_*: over "
                                "the whole run (gpumemprof docs/convert.md)");
    gmp_obuf *p2 = &c->tmp2;
    p2->len = 0;
    pb_u64(&msg, 9, c->time_nanos);
    pb_u64(&msg, 10, c->duration_nanos);
    m->len = 0;
    pb_u64(m, 1, cstr_idx(c, "space"));
    pb_u64(m, 2, cstr_idx(c, "bytes"));
    pb_bytes(&msg, 11, m->p, m->len);
    pb_u64(&msg, 12, 1); /* period: every allocation is counted (no sampling) */
    pb_varint(p2, exporter);
    if (title)
        pb_varint(p2, title);
    pb_varint(p2, note);
    pb_bytes(&msg, 13, p2->p, p2->len);
    pb_u64(&msg, 14, inuse);
    for (uint32_t i = 0; i < gmp_intern_count(&c->strs); i++) { /* string_table, "" first */
        size_t l;
        const char *p = gmp_intern_get(&c->strs, i, &l);
        pb_bytes(&msg, 6, p, l);
    }
    gmp_err e = GMP_OK;
    if (c->oom || msg.oom || m->oom || p2->oom || c->strs.oom) {
        snprintf(res->error, sizeof res->error, "pprof output: out of memory");
        e = GMP_ERR_NOMEM;
    } else if (write_gzip(c->out, msg.p ? msg.p : "", msg.len) != 0 || fflush(c->out) != 0) {
        snprintf(res->error, sizeof res->error, "pprof output: cannot write the file");
        e = GMP_ERR_IO;
    }
    gmp_obuf_free(&msg);
    ctx_free(c);
    return e;
}

static void pp_discard(gmp_output_ctx *c)
{
    ctx_free(c);
}

const gmp_output gmp_out_pprof = {
    .name = "pprof",
    .start = pp_start,
    .add_trace = pp_add_trace,
    .finish = pp_finish,
    .discard = pp_discard,
};
