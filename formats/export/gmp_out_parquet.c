/* Parquet output (`convert --parquet DIR`): the recording as tables for the engines people already
 * run over many ranks (DuckDB, Spark, Dask, pandas), written by the Parquet writer gmp_parquet.h.
 * Tables (docs/fleet.md gives their columns and the questions they answer):
 *
 *   allocations  one row per allocation: when it was made and freed (null: live at the end), size,
 *                device, kind, API, stack and range ids, category, thread, the order of its events
 *   stacks       stack id -> its frame ids, innermost first (internal frames folded as in every
 *                output, unless --all-frames)
 *   frames       frame id -> function, file, line, module
 *   ranges       range id -> name, parent, path
 *   samples      the driver's memory samples, with the replayed allocated and reserved then
 *   summary      one row per device: peaks, allocations, OOMs, live and leaked at the end
 *
 * One input: DIR/TABLE.parquet, each with a `rank` column. Several inputs: one directory per
 * rank, DIR/rank=R/TABLE.parquet (Hive partitioning: the rank is the directory's, as engines that
 * read partitioned tables expect, not a column of the files). Ids (stack, frame, range) are those
 * of one trace: join within a rank. Times are nanoseconds from the start of the earliest input,
 * aligned on the wall clock, as in every convert output (gmp_output_time).
 *
 * Rows are written as the replay goes (an allocation when it is freed, the live ones at the end),
 * so memory grows with the live set, the stacks used and one row group per table, never with the
 * length of the trace. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmp_export.h"
#include "gmp_frames.h"
#include "gmp_intern.h"
#include "gmp_output.h"
#include "gmp_parquet.h"
#include "gmp_reader.h"

enum { T_ALLOC, T_STACKS, T_FRAMES, T_RANGES, T_SAMPLES, T_SUMMARY, NTABLES };

static const char *const table_name[NTABLES] = {"allocations", "stacks",  "frames",
                                                "ranges",      "samples", "summary"};

#define C(name, type, opt, dict)                                                                   \
    {                                                                                              \
        name, type, opt, dict                                                                      \
    }
#define I64 GMP_PQ_INT64
#define I32 GMP_PQ_INT32
#define STR GMP_PQ_STRING
#define BOOL GMP_PQ_BOOL

/* Each table's columns after `rank` (which only a single input's files have). */
static const gmp_pq_column alloc_cols[] = {
    C("alloc_ns", I64, 0, 0),  C("free_ns", I64, 1, 0),        C("size", I64, 0, 0),
    C("device", I32, 0, 1),    C("kind", STR, 0, 1),           C("api", STR, 1, 1),
    C("address", I64, 0, 0),   C("stack_id", I64, 1, 1),       C("range_id", I64, 1, 1),
    C("category", STR, 0, 1),  C("device_memory", BOOL, 0, 0), C("tid", I64, 0, 1),
    C("alloc_seq", I64, 0, 0), C("free_seq", I64, 1, 0),
};
static const gmp_pq_column stack_cols[] = {
    C("stack_id", I64, 0, 0),
    C("depth", I32, 0, 0),
    C("frame_id", I64, 0, 0),
};
static const gmp_pq_column frame_cols[] = {
    C("frame_id", I64, 0, 0), C("kind", STR, 0, 1), C("function", STR, 0, 0),
    C("file", STR, 1, 1),     C("line", I32, 1, 0), C("module", STR, 1, 1),
};
static const gmp_pq_column range_cols[] = {
    C("range_id", I64, 0, 0), C("parent_id", I64, 1, 0), C("name", STR, 0, 1),
    C("path", STR, 0, 0),     C("domain", STR, 1, 1),
};
static const gmp_pq_column sample_cols[] = {
    C("time_ns", I64, 0, 0),         C("device", I32, 0, 1),
    C("total_bytes", I64, 0, 0),     C("free_bytes", I64, 0, 0),
    C("used_bytes", I64, 0, 0),      C("process_used_bytes", I64, 1, 0),
    C("allocated_bytes", I64, 0, 0), C("reserved_bytes", I64, 0, 0),
};
static const gmp_pq_column summary_cols[] = {
    C("device", I32, 1, 0),
    C("device_name", STR, 1, 0),
    C("total_bytes", I64, 1, 0),
    C("peak_allocated_bytes", I64, 0, 0),
    C("peak_allocated_ns", I64, 1, 0),
    C("peak_reserved_bytes", I64, 0, 0),
    C("peak_reserved_ns", I64, 1, 0),
    C("allocations", I64, 0, 0),
    C("frees", I64, 0, 0),
    C("allocated_bytes_total", I64, 0, 0),
    C("failed_allocations", I64, 0, 0),
    C("ooms", I64, 0, 0),
    C("live_at_end_bytes", I64, 0, 0),
    C("live_at_end_allocations", I64, 0, 0),
    C("leaked_bytes", I64, 1, 0),
    C("recording_end", STR, 0, 0),
    C("rank_from", STR, 0, 0),
    C("local_rank", I64, 1, 0),
    C("world_size", I64, 1, 0),
    C("host", STR, 1, 0),
    C("pid", I64, 0, 0),
    C("input", STR, 0, 0),
    C("start_unix_ns", I64, 1, 0),
};

static const struct {
    const gmp_pq_column *cols;
    size_t n;
} table_cols[NTABLES] = {
    {alloc_cols, sizeof alloc_cols / sizeof alloc_cols[0]},
    {stack_cols, sizeof stack_cols / sizeof stack_cols[0]},
    {frame_cols, sizeof frame_cols / sizeof frame_cols[0]},
    {range_cols, sizeof range_cols / sizeof range_cols[0]},
    {sample_cols, sizeof sample_cols / sizeof sample_cols[0]},
    {summary_cols, sizeof summary_cols / sizeof summary_cols[0]},
};

#define MAX_COLS 32

typedef struct ptable {
    gmp_pq_column cols[MAX_COLS]; /* rank (single input) then the table's */
    FILE *f;
    gmp_pq_writer *w;
} ptable;

typedef struct ptrace {
    gmp_output_trace info;
    gmp_replay *rp;
    gmp_reader *r;
    int64_t rank;
    int rank_from_trace; /* the trace recorded its rank (else: its position among the inputs) */
    ptable t[NTABLES];
    gmp_omap live_seq;   /* live allocation (key of alloc_key) -> its alloc_seq */
    gmp_omap stacks;     /* stack ids of allocations -> 1 */
    gmp_omap cat;        /* (stack << 32 | range) -> category + 1 */
    gmp_omap ranges;     /* range ids written -> 1 */
    gmp_omap cls;        /* stack node -> frame class + 1 (gmp_output_stack_class) */
    gmp_omap node_frame; /* stack node -> frame id + 1 */
    gmp_intern frames;   /* a frame's fields -> frame id */
    uint64_t seq;        /* memory events so far */
    gmp_obuf s1, s2, key;
} ptrace;

struct gmp_output_ctx {
    char *dir;
    gmp_output_opts o;
    int partitioned; /* several inputs: DIR/rank=R/ */
    gmp_omap ranks;  /* rank -> index of its input + 1 */
    ptrace *t;
    char err[256];
};

/* ---- the rank of an input: the one place that decides it ----
 * The rank the trace's header records (the agent reads RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID or
 * PMI_RANK when the recording starts), else the input's position among the inputs (snapshots and
 * nsys exports record none). */
static int64_t trace_rank(const gmp_output_trace *t, int *from_trace)
{
    *from_trace = t->header && t->header->rank >= 0;
    return *from_trace ? t->header->rank : (int64_t)t->index;
}

static int64_t clamp64(uint64_t v) /* sizes and counts: above INT64_MAX only in damaged traces */
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static gmp_err tables_open(gmp_output_ctx *c, ptrace *t, char *msg, size_t msglen)
{
    char dir[4096];
    if (c->partitioned) {
        int n = snprintf(dir, sizeof dir, "%s/rank=%" PRId64, c->dir, t->rank);
        if (n < 0 || (size_t)n >= sizeof dir) {
            snprintf(msg, msglen, "parquet output: the directory name is too long");
            return GMP_ERR_ARG;
        }
        if (mkdir(dir, 0777) != 0) {
            snprintf(msg, msglen, "parquet output: %.200s: %s", dir, strerror(errno));
            return GMP_ERR_IO;
        }
    } else {
        snprintf(dir, sizeof dir, "%s", c->dir);
    }
    for (int k = 0; k < NTABLES; k++) {
        ptable *pt = &t->t[k];
        size_t n = 0;
        if (!c->partitioned)
            pt->cols[n++] = (gmp_pq_column){"rank", GMP_PQ_INT64, 0, 1};
        for (size_t i = 0; i < table_cols[k].n && n < MAX_COLS; i++)
            pt->cols[n++] = table_cols[k].cols[i];
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.parquet", dir, table_name[k]);
        pt->f = fopen(path, "wb");
        if (!pt->f) {
            snprintf(msg, msglen, "parquet output: %.200s: %s", path, strerror(errno));
            return GMP_ERR_IO;
        }
        /* key_value_metadata: the table's name (static: the writer keeps the pointers) */
        static const char *const kv[NTABLES][4] = {
            {"gpumemprof.table", "allocations", NULL, NULL},
            {"gpumemprof.table", "stacks", NULL, NULL},
            {"gpumemprof.table", "frames", NULL, NULL},
            {"gpumemprof.table", "ranges", NULL, NULL},
            {"gpumemprof.table", "samples", NULL, NULL},
            {"gpumemprof.table", "summary", NULL, NULL},
        };
        gmp_pq_opts po = {.created_by = c->o.exporter, .kv = kv[k]};
        pt->w = gmp_pq_open(pt->f, pt->cols, n, &po);
        if (!pt->w) {
            snprintf(msg, msglen, "parquet output: out of memory");
            return GMP_ERR_NOMEM;
        }
    }
    return GMP_OK;
}

/* Starts a row of table k: its rank first for a single input. */
static gmp_pq_writer *row(gmp_output_ctx *c, ptrace *t, int k)
{
    gmp_pq_writer *w = t->t[k].w;
    if (!c->partitioned)
        gmp_pq_i64(w, t->rank);
    return w;
}

static void opt_i64(gmp_pq_writer *w, int has, int64_t v)
{
    if (has)
        gmp_pq_i64(w, v);
    else
        gmp_pq_null(w);
}

/* ---- allocations ---- */

/* A live allocation's identity for live_seq: what the replay matches a free with (the address, or
 * the handle of VMM physical memory), with its kind and device. A clash of two live allocations
 * (64-bit hash) could only swap their alloc_seq. */
static uint64_t alloc_key(const gmp_replay_alloc *a)
{
    uint64_t k = a->address ^ (a->handle * 0x9e3779b97f4a7c15ULL);
    k ^= ((uint64_t)a->kind << 48) ^ ((uint64_t)(uint32_t)a->device << 32);
    return gmp_omap_hash(k) ^ (k << 1);
}

static const char *category(ptrace *t, uint32_t stack, uint32_t range)
{
    uint64_t key = (uint64_t)stack << 32 | range;
    uint64_t *v = gmp_omap_get(&t->cat, key);
    if (v)
        return gmp_category_name((gmp_category)(*v - 1));
    gmp_category cat = gmp_replay_category(t->rp, stack, range);
    int fresh;
    v = gmp_omap_put(&t->cat, key, &fresh);
    if (v)
        *v = (uint64_t)cat + 1;
    return gmp_category_name(cat);
}

static gmp_err alloc_row(gmp_output_ctx *c, ptrace *t, const gmp_replay_alloc *a, int freed,
                         uint64_t free_ns, uint64_t free_seq)
{
    uint64_t *sv = gmp_omap_get(&t->live_seq, alloc_key(a));
    uint64_t aseq = sv ? *sv : 0;
    if (sv)
        gmp_omap_del(&t->live_seq, alloc_key(a));
    gmp_pq_writer *w = row(c, t, T_ALLOC);
    gmp_pq_i64(w, gmp_output_time(&t->info, a->time_ns));
    opt_i64(w, freed, gmp_output_time(&t->info, free_ns));
    gmp_pq_i64(w, clamp64(a->size));
    gmp_pq_i32(w, a->device);
    gmp_pq_cstr(w, gmp_mem_kind_name(a->kind));
    gmp_str api = gmp_reader_string(t->r, a->api);
    if (a->api && api.len)
        gmp_pq_str(w, api.ptr, api.len);
    else
        gmp_pq_null(w);
    gmp_pq_i64(w, (int64_t)a->address);
    opt_i64(w, a->stack != 0, a->stack);
    opt_i64(w, a->range != 0, a->range);
    gmp_pq_cstr(w, category(t, a->stack, a->range));
    gmp_pq_bool(w, gmp_mem_kind_is_device(a->kind));
    gmp_pq_i64(w, a->tid);
    gmp_pq_i64(w, (int64_t)aseq);
    opt_i64(w, freed, (int64_t)free_seq);
    if (a->stack) {
        int fresh;
        uint64_t *v = gmp_omap_put(&t->stacks, a->stack, &fresh);
        if (!v)
            return GMP_ERR_NOMEM;
        *v = 1;
    }
    return gmp_pq_row(w);
}

static gmp_err fail_pq(gmp_output_ctx *c, gmp_replay *rp, gmp_err e)
{
    if (e == GMP_ERR_NOMEM)
        return gmp_replay_fail(rp, e, "parquet output: out of memory");
    return gmp_replay_fail(rp, e, "parquet output: cannot write the tables (%s)",
                           c->t && c->t->t[T_ALLOC].w ? gmp_pq_error(c->t->t[T_ALLOC].w) : "");
}

static gmp_err on_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    gmp_output_ctx *c = ctx;
    ptrace *t = c->t;
    if (ev->status != GMP_REPLAY_OK && ev->status != GMP_REPLAY_REPLACED)
        return GMP_OK;
    gmp_err e = GMP_OK;
    if (ev->replaced) { /* its free was lost: it ends when its address is allocated again */
        uint64_t s = t->seq++;
        e = alloc_row(c, t, ev->replaced, 1, ev->rec->time_ns, s);
    }
    if (e == GMP_OK && ev->alloc) {
        int fresh;
        uint64_t *v = gmp_omap_put(&t->live_seq, alloc_key(ev->alloc), &fresh);
        if (!v)
            e = GMP_ERR_NOMEM;
        else
            *v = t->seq++;
    }
    return e == GMP_OK ? GMP_OK : fail_pq(c, rp, e);
}

static gmp_err on_free(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    gmp_output_ctx *c = ctx;
    ptrace *t = c->t;
    if (ev->status != GMP_REPLAY_OK || !ev->alloc)
        return GMP_OK;
    gmp_err e = GMP_OK;
    for (size_t i = 0; i < ev->nalloc && e == GMP_OK; i++)
        e = alloc_row(c, t, &ev->alloc[i], 1, ev->rec->time_ns, t->seq++);
    return e == GMP_OK ? GMP_OK : fail_pq(c, rp, e);
}

/* ---- ranges, as their definitions come ---- */

static gmp_err on_def(void *ctx, gmp_replay *rp, const gmp_rec *rec)
{
    gmp_output_ctx *c = ctx;
    ptrace *t = c->t;
    if (rec->type != GMP_REC_RANGE || !rec->u.range.id)
        return GMP_OK;
    const gmp_rec_range *rg = &rec->u.range;
    int fresh;
    uint64_t *v = gmp_omap_put(&t->ranges, rg->id, &fresh);
    if (!v)
        return fail_pq(c, rp, GMP_ERR_NOMEM);
    if (!fresh)
        return GMP_OK;
    *v = 1;
    gmp_obuf *p = &t->s1;
    p->len = 0;
    char small[256];
    size_t n = gmp_reader_range_path(t->r, rg->id, small, sizeof small);
    if (n < sizeof small) {
        gmp_obuf_add(p, small, n);
    } else {
        char *big = malloc(n + 1);
        if (!big)
            return fail_pq(c, rp, GMP_ERR_NOMEM);
        gmp_reader_range_path(t->r, rg->id, big, n + 1);
        gmp_obuf_add(p, big, n);
        free(big);
    }
    gmp_pq_writer *w = row(c, t, T_RANGES);
    gmp_pq_i64(w, rg->id);
    opt_i64(w, rg->parent != 0, rg->parent);
    gmp_str name = gmp_reader_string(t->r, rg->name);
    gmp_pq_str(w, name.ptr, name.len);
    gmp_pq_str(w, p->p, p->len);
    gmp_str dom = gmp_reader_string(t->r, rg->domain);
    if (rg->domain && dom.len)
        gmp_pq_str(w, dom.ptr, dom.len);
    else
        gmp_pq_null(w);
    gmp_err e = p->oom ? GMP_ERR_NOMEM : gmp_pq_row(w);
    return e == GMP_OK ? GMP_OK : fail_pq(c, rp, e);
}

/* ---- samples ---- */

static gmp_err on_sample(void *ctx, gmp_replay *rp, const gmp_replay_sample *ev)
{
    gmp_output_ctx *c = ctx;
    ptrace *t = c->t;
    const gmp_rec_sample *s = &ev->rec->u.sample;
    gmp_pq_writer *w = row(c, t, T_SAMPLES);
    gmp_pq_i64(w, gmp_output_time(&t->info, ev->rec->time_ns));
    gmp_pq_i32(w, s->device);
    gmp_pq_i64(w, clamp64(s->total_bytes));
    gmp_pq_i64(w, clamp64(s->free_bytes));
    gmp_pq_i64(w, clamp64(ev->used));
    opt_i64(w, s->process_used != UINT64_MAX, clamp64(s->process_used));
    gmp_pq_i64(w, clamp64(ev->dev ? ev->dev->allocated : 0));
    gmp_pq_i64(w, clamp64(ev->dev ? ev->dev->reserved : 0));
    gmp_err e = gmp_pq_row(w);
    return e == GMP_OK ? GMP_OK : fail_pq(c, rp, e);
}

/* ---- stacks and frames, at the end ---- */

/* The frame id of one stack node's frame (a frames row when it is new). */
static int64_t node_frame(gmp_output_ctx *c, ptrace *t, uint32_t node, gmp_err *err)
{
    uint64_t *v = gmp_omap_get(&t->node_frame, node);
    if (v)
        return (int64_t)*v - 1;
    gmp_replay_frame fr;
    gmp_obuf *name = &t->s1, *file = &t->s2, *key = &t->key;
    name->len = file->len = key->len = 0;
    uint32_t line = 0;
    const char *kind = "native", *fn = "", *fl = NULL, *mod = NULL;
    size_t fnn = 0, fln = 0, modn = 0;
    if (gmp_replay_stack_frames(t->rp, node, &fr, 1) == 0) {
        kind = "unknown";
    } else if (fr.kind == GMP_FRAME_PYTHON) {
        kind = "python";
        fn = fr.function.ptr;
        fnn = fr.function.len;
        fl = fr.file.ptr;
        fln = fr.file.len;
        line = fr.line;
    } else {
        gmp_output_frame(&c->o, t->r, &fr, name, file, &line);
        fn = name->p ? name->p : "";
        fnn = name->p ? name->len : 0;
        /* "function (file.c:42)": the function alone (inlined chains "a (x.c:1) > b (y.h:2)"
         * stay whole) */
        if (line && fnn > 2 && fn[fnn - 1] == ')' && !memmem(fn, fnn, " > ", 3)) {
            for (size_t i = fnn - 1; i-- > 1;)
                if (fn[i] == '(' && fn[i - 1] == ' ') {
                    fnn = i - 1;
                    break;
                }
        }
        if (file->p && file->len) {
            fl = file->p;
            fln = file->len;
        }
        if (fr.module) {
            mod = fr.module->path.ptr;
            modn = fr.module->path.len;
        }
    }
    /* the key: kind, function, file, line, module, NUL-separated (a name holding NUL bytes can
     * only merge two frames of a damaged trace) */
    char lb[16];
    int ln = snprintf(lb, sizeof lb, "%" PRIu32, line);
    gmp_obuf_add(key, kind, strlen(kind) + 1);
    gmp_obuf_add(key, fn, fnn);
    gmp_obuf_add(key, "", 1);
    gmp_obuf_add(key, fl ? fl : "", fl ? fln : 0);
    gmp_obuf_add(key, "", 1);
    gmp_obuf_add(key, lb, (size_t)ln + 1);
    gmp_obuf_add(key, mod ? mod : "", mod ? modn : 0);
    if (key->oom || name->oom || file->oom) {
        *err = GMP_ERR_NOMEM;
        return 0;
    }
    uint32_t before = gmp_intern_count(&t->frames);
    uint32_t id = gmp_intern_add(&t->frames, key->p, key->len);
    if (id == UINT32_MAX) {
        *err = GMP_ERR_NOMEM;
        return 0;
    }
    if (id == before) {
        gmp_pq_writer *w = row(c, t, T_FRAMES);
        gmp_pq_i64(w, id);
        gmp_pq_cstr(w, kind);
        gmp_pq_str(w, fn, fnn);
        if (fl && fln)
            gmp_pq_str(w, fl, fln);
        else
            gmp_pq_null(w);
        if (line)
            gmp_pq_i32(w, (int32_t)(line > INT32_MAX ? INT32_MAX : line));
        else
            gmp_pq_null(w);
        if (mod && modn)
            gmp_pq_str(w, mod, modn);
        else
            gmp_pq_null(w);
        gmp_err e = gmp_pq_row(w);
        if (e != GMP_OK) {
            *err = e;
            return 0;
        }
    }
    int fresh;
    v = gmp_omap_put(&t->node_frame, node, &fresh);
    if (!v) {
        *err = GMP_ERR_NOMEM;
        return 0;
    }
    *v = (uint64_t)id + 1;
    return id;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

#define MAX_DEPTH 1024

static gmp_err write_stacks(gmp_output_ctx *c, ptrace *t)
{
    size_t n = t->stacks.n, k = 0;
    uint64_t *ids = malloc((n ? n : 1) * sizeof *ids);
    uint32_t *nodes = malloc(MAX_DEPTH * sizeof *nodes);
    uint8_t *cls = malloc(MAX_DEPTH), *hide = malloc(MAX_DEPTH);
    gmp_err e = ids && nodes && cls && hide ? GMP_OK : GMP_ERR_NOMEM;
    for (size_t i = 0; e == GMP_OK && i < t->stacks.cap; i++)
        if (t->stacks.used[i])
            ids[k++] = t->stacks.keys[i];
    if (e == GMP_OK)
        qsort(ids, k, sizeof *ids, cmp_u64);
    for (size_t s = 0; e == GMP_OK && s < k; s++) {
        size_t d = 0;
        for (uint32_t node = (uint32_t)ids[s]; node && d < MAX_DEPTH;) {
            nodes[d] = node;
            cls[d] = (uint8_t)gmp_output_stack_class(&c->o, t->rp, &t->cls, node);
            d++;
            const gmp_rec_stack *st = gmp_reader_stack(t->r, node);
            node = st ? st->parent : 0;
        }
        memset(hide, 0, d);
        if (!c->o.all_frames && d)
            gmp_frames_fold(cls, d, hide);
        int32_t depth = 0;
        for (size_t i = 0; i < d && e == GMP_OK; i++) {
            if (hide[i])
                continue;
            int64_t fid = node_frame(c, t, nodes[i], &e);
            if (e != GMP_OK)
                break;
            gmp_pq_writer *w = row(c, t, T_STACKS);
            gmp_pq_i64(w, (int64_t)ids[s]);
            gmp_pq_i32(w, depth++);
            gmp_pq_i64(w, fid);
            e = gmp_pq_row(w);
        }
    }
    free(ids);
    free(nodes);
    free(cls);
    free(hide);
    return e;
}

/* ---- the summary and the end of a trace ---- */

static gmp_err live_row(void *ctx, const gmp_replay_alloc *a)
{
    gmp_output_ctx *c = ctx;
    return alloc_row(c, c->t, a, 0, 0, 0);
}

static gmp_err write_summary(gmp_output_ctx *c, ptrace *t)
{
    const gmp_replay_summary *sum = gmp_replay_get_summary(t->rp);
    const gmp_rec_header *h = gmp_reader_header(t->r);
    /* how the recording ends, as the report says it (docs/report.md) */
    const char *end = "exit";
    if (h && h->options.len >= 23 &&
        memmem(h->options.ptr, h->options.len, "import=pytorch-snapshot", 23) != NULL)
        end = "snapshot";
    else if (!gmp_reader_get_stats(t->r)->has_end || sum->truncated)
        end = "cut";
    int exited = strcmp(end, "exit") == 0;
    size_t nd = gmp_replay_device_count(t->rp);
    gmp_err e = GMP_OK;
    for (size_t i = 0; i < (nd ? nd : 1) && e == GMP_OK; i++) {
        const gmp_replay_device *d = nd ? gmp_replay_device_at(t->rp, i) : NULL;
        gmp_pq_writer *w = row(c, t, T_SUMMARY);
        if (d) {
            gmp_pq_i32(w, d->id);
            if (d->def)
                gmp_pq_str(w, d->def->name.ptr, d->def->name.len);
            else
                gmp_pq_null(w);
            opt_i64(w, d->def != NULL, d->def ? clamp64(d->def->total_bytes) : 0);
            gmp_pq_i64(w, clamp64(d->peak_allocated));
            opt_i64(w, d->peak_allocated != 0, gmp_output_time(&t->info, d->peak_time_ns));
            gmp_pq_i64(w, clamp64(d->peak_reserved));
            opt_i64(w, d->peak_reserved != 0, gmp_output_time(&t->info, d->peak_reserved_time_ns));
            gmp_pq_i64(w, clamp64(d->allocs));
            gmp_pq_i64(w, clamp64(d->frees));
            gmp_pq_i64(w, clamp64(d->alloc_bytes));
            gmp_pq_i64(w, clamp64(d->failed_allocs));
            gmp_pq_i64(w, clamp64(d->ooms));
            uint64_t live = d->allocated - d->kind[GMP_MEM_STATIC].live_bytes;
            uint64_t livec = d->live_count - d->kind[GMP_MEM_STATIC].live_count;
            gmp_pq_i64(w, clamp64(live));
            gmp_pq_i64(w, clamp64(livec));
            opt_i64(w, exited, clamp64(live));
        } else { /* a recording without any device: the rank still has its row */
            gmp_pq_null(w);
            gmp_pq_null(w);
            gmp_pq_null(w);
            gmp_pq_i64(w, 0);
            gmp_pq_null(w);
            gmp_pq_i64(w, 0);
            gmp_pq_null(w);
            for (int k = 0; k < 7; k++)
                gmp_pq_i64(w, 0);
            opt_i64(w, exited, 0);
        }
        gmp_pq_cstr(w, end);
        gmp_pq_cstr(w, t->rank_from_trace ? "trace" : "input order");
        /* the header's rank identity, with its rank: null when not recorded (local_rank -1,
         * world_size 0), as the per-rank summary of the report (gmp_rank_summary_from_trace) */
        int ident = h && h->rank >= 0;
        opt_i64(w, ident && h->local_rank >= 0, ident ? h->local_rank : 0);
        opt_i64(w, ident && h->world_size > 0, ident ? h->world_size : 0);
        if (h && h->hostname.len)
            gmp_pq_str(w, h->hostname.ptr, h->hostname.len);
        else
            gmp_pq_null(w);
        gmp_pq_i64(w, h ? h->pid : 0);
        gmp_pq_cstr(w, t->info.path);
        opt_i64(w, h && h->start_wall_ns, h ? clamp64(h->start_wall_ns) : 0);
        e = gmp_pq_row(w);
    }
    return e;
}

static void ptrace_free(ptrace *t)
{
    if (!t)
        return;
    for (int k = 0; k < NTABLES; k++) {
        gmp_pq_abort(t->t[k].w);
        if (t->t[k].f)
            fclose(t->t[k].f);
    }
    gmp_omap_free(&t->live_seq);
    gmp_omap_free(&t->stacks);
    gmp_omap_free(&t->cat);
    gmp_omap_free(&t->ranges);
    gmp_omap_free(&t->cls);
    gmp_omap_free(&t->node_frame);
    gmp_intern_free(&t->frames);
    gmp_obuf_free(&t->s1);
    gmp_obuf_free(&t->s2);
    gmp_obuf_free(&t->key);
    free(t);
}

static gmp_err on_end(void *ctx, gmp_replay *rp)
{
    gmp_output_ctx *c = ctx;
    ptrace *t = c->t;
    gmp_err e = gmp_replay_live_foreach(rp, live_row, c);
    if (e == GMP_OK)
        e = write_stacks(c, t);
    if (e == GMP_OK)
        e = write_summary(c, t);
    if (e != GMP_OK)
        return fail_pq(c, rp, e);
    char msg[160] = "";
    for (int k = 0; k < NTABLES; k++) {
        gmp_err ek = gmp_pq_close(t->t[k].w, msg, sizeof msg);
        t->t[k].w = NULL;
        int ce = fclose(t->t[k].f);
        t->t[k].f = NULL;
        if (e == GMP_OK && (ek != GMP_OK || ce != 0))
            e = ek != GMP_OK ? ek : GMP_ERR_IO;
    }
    c->t = NULL;
    ptrace_free(t);
    if (e != GMP_OK)
        return gmp_replay_fail(rp, e, "parquet output: cannot write the tables%s%s%s",
                               *msg ? " (" : "", msg, *msg ? ")" : "");
    return GMP_OK;
}

static const gmp_replay_ops parquet_ops = {
    .def = on_def,
    .alloc = on_alloc,
    .free = on_free,
    .sample = on_sample,
    .end = on_end,
};

/* ---- the output ---- */

void gmp_out_parquet_remove(const char *dir)
{
    char path[4200];
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strncmp(de->d_name, "rank=", 5) != 0)
                continue;
            for (int k = 0; k < NTABLES; k++) {
                snprintf(path, sizeof path, "%s/%s/%s.parquet", dir, de->d_name, table_name[k]);
                unlink(path);
            }
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            rmdir(path); /* only when nothing else is left in it */
        }
        closedir(d);
    }
    for (int k = 0; k < NTABLES; k++) {
        snprintf(path, sizeof path, "%s/%s.parquet", dir, table_name[k]);
        unlink(path);
    }
    rmdir(dir);
}

static void ctx_free(gmp_output_ctx *c)
{
    if (!c)
        return;
    ptrace_free(c->t);
    gmp_omap_free(&c->ranks);
    free(c->dir);
    free(c);
}

/* DIR is created, or must be an empty directory: the tables of another export are never mixed
 * with these. */
static gmp_err pq_start(gmp_output_ctx **out, FILE *f, const char *path, const gmp_output_opts *o)
{
    (void)f;
    if (!path || !*path)
        return GMP_ERR_ARG;
    if (mkdir(path, 0777) != 0) {
        if (errno != EEXIST)
            return GMP_ERR_IO;
        DIR *d = opendir(path);
        if (!d)
            return GMP_ERR_IO;
        struct dirent *de;
        int empty = 1;
        while ((de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                empty = 0;
        closedir(d);
        if (!empty)
            return GMP_ERR_EXISTS;
    }
    gmp_output_ctx *c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(path))) {
        free(c);
        return GMP_ERR_NOMEM;
    }
    c->o = *o;
    c->partitioned = o->ntraces > 1;
    *out = c;
    return GMP_OK;
}

static gmp_err pq_add_trace(gmp_output_ctx *c, gmp_replay *rp, const gmp_output_trace *tr)
{
    ptrace_free(c->t);
    c->t = NULL;
    ptrace *t = calloc(1, sizeof *t);
    if (!t)
        return GMP_ERR_NOMEM;
    t->info = *tr;
    t->rp = rp;
    t->r = gmp_replay_reader(rp);
    t->rank = trace_rank(tr, &t->rank_from_trace);
    c->t = t;
    int fresh;
    uint64_t *v = gmp_omap_put(&c->ranks, (uint64_t)t->rank, &fresh);
    if (!v)
        return GMP_ERR_NOMEM;
    if (!fresh)
        return gmp_replay_fail(rp, GMP_ERR_ARG,
                               "parquet output: rank %" PRId64 " again (input %" PRIu64
                               " has it too): one directory per rank; "
                               "convert these inputs into different directories",
                               t->rank, *v);
    *v = tr->index + 1;
    char msg[256];
    gmp_err e = tables_open(c, t, msg, sizeof msg);
    if (e != GMP_OK)
        return gmp_replay_fail(rp, e, "%s", msg);
    return gmp_replay_add(rp, &parquet_ops, c);
}

static gmp_err pq_finish(gmp_output_ctx *c, gmp_output_result *res)
{
    (void)res;
    ctx_free(c);
    return GMP_OK;
}

static void pq_discard(gmp_output_ctx *c)
{
    ctx_free(c);
}

const gmp_output gmp_out_parquet = {
    .name = "parquet",
    .start = pq_start,
    .add_trace = pq_add_trace,
    .finish = pq_finish,
    .discard = pq_discard,
};
