/* gmp_report_ranks_oom: the failing rank beside the healthy ones at the same iteration (see
 * gmp_report_ranks_oom.h). */
#include "gmp_report_ranks_oom.h"

#include <stdlib.h>
#include <string.h>

#include "gmp_analysis.h"
#include "gmp_intern.h"
#include "gmp_reader.h"
#include "gmp_replay.h"
#include "gmp_report_ranks.h"
#include "gmp_report_values.h"

#define MAX_MATCH_IDS 64 /* range ids whose path is the iteration's (one per domain at most) */

/* One range path's live bytes on the device at a moment. */
typedef struct rbytes {
    uint32_t range; /* in a pass: the trace's range id; afterwards: its path's id in paths */
    uint64_t bytes;
} rbytes;

/* The device at one moment of one rank: allocated, reserved and outside exact at that moment;
 * the live bytes per range taken when allocated last passed `taken` by more than 1/64 of it
 * (window_peak), so that a window whose maximum rises a little at a time costs a bounded number
 * of tables. */
typedef struct snap {
    int has;
    uint64_t time_ns;
    uint64_t allocated, reserved, outside;
    int has_outside;
    uint64_t taken; /* allocated when the ranges were taken */
    size_t n;
    rbytes *v; /* sorted by range */
} snap;

/* One rank as compared. */
typedef struct rank_row {
    size_t trace;
    int by_wall; /* aligned by the wall clock (no such iteration in it) */
    snap s;      /* ranges as ids of paths */
    char *label; /* as the report labels the trace (owned) */
} rank_row;

typedef struct range_diff {
    uint32_t path; /* id in paths */
    uint64_t failing, median;
} range_diff;

struct gmp_ranks_oom {
    size_t failing;               /* the trace that ran out of memory first */
    char *fail_label, *fail_path; /* its label and path (owned): the section needs no model */
    uint64_t fail_t0;             /* its base of relative times */
    size_t nfailing;              /* traces with an OOM */
    gmp_analysis_oom oom;
    char *iter_name;    /* the iteration's path or MARK name; NULL: none */
    uint64_t iteration; /* the failing rank's iteration at the OOM (1 = the first); 0: none */
    uint64_t healthy;   /* healthy traces (no OOM) */
    int reread_failed;  /* the failing trace could not be read again */
    rank_row fail;      /* the failing rank at its OOM */
    size_t nrows;       /* healthy ranks compared */
    rank_row *rows;
    size_t nby_wall;  /* of them, aligned by the wall clock */
    gmp_intern paths; /* range paths of every rank compared, each once */
    snap median;      /* allocated, reserved, outside: medians of the rows */
    size_t heaviest;  /* row with the largest allocated */
    size_t ndiffs;
    range_diff *diffs; /* ranges where the failing rank holds more than the median, most first */
};

/* ---- one pass over a trace ---- */

typedef struct pass {
    gmp_replay *rp;
    int failing;
    int32_t device;
    gmp_analysis_iter_kind kind;
    const char *name;
    size_t nmatch;
    uint32_t match[MAX_MATCH_IDS];
    uint64_t starts, iter_start_ns;
    uint64_t k; /* healthy: the iteration to look at (0: none) */
    int wall;   /* healthy: a wall-clock window [wa, wb] */
    uint64_t wa, wb;
    uint64_t fail_wall, span; /* healthy: the failing OOM on the wall clock (UINT64_MAX: none) and
                               * how long before it the window opens; run_pass makes [wa, wb]
                               * from them and the trace header's anchor */
    uint64_t outside;         /* the last sample's use beyond the reserved bytes */
    int has_outside;
    snap it, wl, oom; /* iteration k's peak, the wall window's peak, the failing rank's OOM */
    uint64_t oom_k, oom_iter_start;
    gmp_err err;
} pass;

static void snap_free(snap *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int rb_cmp(const void *a, const void *b)
{
    const rbytes *x = a, *y = b;
    return x->range < y->range ? -1 : x->range > y->range;
}

/* s := the device's state now: allocated/reserved given, live bytes per range summed over the
 * replay's sites of device kinds on the device. */
static gmp_err take(pass *P, snap *s, uint64_t t, uint64_t allocated, uint64_t reserved)
{
    size_t ns = gmp_replay_site_count(P->rp), n = 0;
    rbytes *v = ns ? malloc(ns * sizeof *v) : NULL;
    if (ns && !v)
        return GMP_ERR_NOMEM;
    for (size_t i = 0; i < ns; i++) {
        const gmp_replay_site *st = gmp_replay_site_at(P->rp, i);
        if (st->device == P->device && st->live_bytes && gmp_mem_kind_is_device(st->kind))
            v[n++] = (rbytes){st->range, st->live_bytes};
    }
    qsort(v, n, sizeof *v, rb_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && v[m - 1].range == v[i].range)
            v[m - 1].bytes += v[i].bytes;
        else
            v[m++] = v[i];
    }
    free(s->v);
    *s = (snap){1, t, allocated, reserved, P->outside, P->has_outside, allocated, m, v};
    return GMP_OK;
}

static int matches(const pass *P, uint32_t range)
{
    for (size_t i = 0; i < P->nmatch; i++)
        if (P->match[i] == range)
            return 1;
    return 0;
}

static gmp_err on_def(void *ctx, gmp_replay *rp, const gmp_rec *rec)
{
    pass *P = ctx;
    if (rec->type != GMP_REC_RANGE || !P->name || P->nmatch == MAX_MATCH_IDS)
        return GMP_OK;
    char buf[1024];
    size_t l = gmp_reader_range_path(gmp_replay_reader(rp), rec->u.range.id, buf, sizeof buf);
    if (l < sizeof buf && !strcmp(buf, P->name))
        P->match[P->nmatch++] = rec->u.range.id;
    return GMP_OK;
}

/* A new maximum of s's window: the exact figures, and the ranges again when allocated has grown
 * by more than 1/64 since they were taken (the first time always). */
static void window_peak(pass *P, snap *s, uint64_t t, const gmp_replay_device *dev)
{
    if (s->has && dev->allocated <= s->allocated)
        return;
    if (!s->has || dev->allocated - s->taken > s->taken / 64) {
        P->err = take(P, s, t, dev->allocated, dev->reserved);
        return;
    }
    s->time_ns = t;
    s->allocated = dev->allocated;
    s->reserved = dev->reserved;
    s->outside = P->outside;
    s->has_outside = P->has_outside;
}

static void window_state(pass *P, uint64_t t, const gmp_replay_device *dev)
{
    if (P->err || P->failing || !dev)
        return;
    /* a window's first event takes the state even when no maximum follows inside it */
    if (P->k && P->starts == P->k)
        window_peak(P, &P->it, t, dev);
    if (!P->err && P->wall && t >= P->wa && (!P->wl.has || t <= P->wb))
        window_peak(P, &P->wl, t, dev);
}

static gmp_err on_range(void *ctx, gmp_replay *rp, const gmp_replay_range *ev)
{
    pass *P = ctx;
    (void)rp;
    int start = (P->kind == GMP_ANALYSIS_ITER_PUSH && ev->op == GMP_REPLAY_PUSH) ||
                (P->kind == GMP_ANALYSIS_ITER_START && ev->op == GMP_REPLAY_START) ||
                (P->kind == GMP_ANALYSIS_ITER_MARK && ev->op == GMP_REPLAY_MARK);
    if (start && matches(P, ev->range)) {
        P->starts++;
        P->iter_start_ns = ev->end_ns;
        window_state(P, ev->end_ns, gmp_replay_device_find(rp, P->device));
    }
    return P->err;
}

static gmp_err on_mem(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    pass *P = ctx;
    (void)rp;
    if (ev->dev && ev->dev->id == P->device)
        window_state(P, ev->rec->time_ns, ev->dev);
    return P->err;
}

static gmp_err on_sample(void *ctx, gmp_replay *rp, const gmp_replay_sample *ev)
{
    pass *P = ctx;
    (void)rp;
    if (ev->dev && ev->dev->id == P->device) {
        P->outside = ev->unexplained;
        P->has_outside = 1;
    }
    return GMP_OK;
}

/* The replay stops at the failing rank's first OOM: this code says it was on purpose. */
#define STOPPED GMP_ERR_LIMIT

static gmp_err on_oom(void *ctx, gmp_replay *rp, const gmp_replay_oom *ev)
{
    pass *P = ctx;
    if (!P->failing || ev->device != P->device)
        return GMP_OK;
    (void)rp;
    P->oom_k = P->starts;
    P->oom_iter_start = P->iter_start_ns;
    gmp_err e = take(P, &P->oom, ev->time_ns, ev->live_bytes, ev->reserved_bytes);
    return e != GMP_OK ? e : STOPPED;
}

static const gmp_replay_ops pass_ops = {
    .def = on_def,
    .alloc = on_mem,
    .free = on_mem,
    .range = on_range,
    .sample = on_sample,
    .oom = on_oom,
};

/* The snapshot's range ids made ids of R->paths (path text read from the trace). */
static gmp_err resolve(gmp_ranks_oom *R, gmp_reader *r, snap *s)
{
    char buf[1024];
    for (size_t i = 0; i < s->n; i++) {
        size_t l = gmp_reader_range_path(r, s->v[i].range, buf, sizeof buf);
        if (l >= sizeof buf)
            buf[sizeof buf - 1] = 0;
        uint32_t id = gmp_intern_add(&R->paths, buf, strlen(buf));
        if (id == UINT32_MAX)
            return GMP_ERR_NOMEM;
        s->v[i].range = id;
    }
    qsort(s->v, s->n, sizeof *s->v, rb_cmp);
    return GMP_OK;
}

/* Replays the trace at path with P and moves the snapshot `which` (NULL: iteration k's peak when
 * the trace reached iteration k, else the wall window's) into out_row, its range ids made paths
 * while the reader is open. GMP_OK also when the trace cannot be read (out_row stays empty: the
 * rank is left out); GMP_ERR_NOMEM when memory ran out. */
static gmp_err run_pass(const char *path, pass *P, rank_row *out_row, snap *which, gmp_ranks_oom *R)
{
    gmp_reader *r = NULL;
    gmp_replay *rp = NULL;
    if (gmp_reader_open(&r, path, NULL) != GMP_OK)
        return GMP_OK;
    const gmp_rec_header *h = gmp_reader_header(r);
    if (!P->failing && P->fail_wall != UINT64_MAX && h->start_wall_ns &&
        h->start_wall_ns >= h->start_trace_ns) {
        /* the failing rank's OOM on this trace's clock (its anchor: start_wall_ns paired with
         * start_trace_ns), and as much before it as the failing iteration had run */
        uint64_t base = h->start_wall_ns - h->start_trace_ns;
        if (P->fail_wall >= base) {
            P->wall = 1;
            P->wb = P->fail_wall - base;
            P->wa = P->wb > P->span ? P->wb - P->span : 0;
        }
    }
    if (!P->failing && !P->k && !P->wall) { /* nothing to align this rank by */
        gmp_reader_close(r);
        return GMP_OK;
    }
    gmp_err e = gmp_replay_new(&rp, r, NULL);
    if (e == GMP_OK) {
        P->rp = rp;
        e = gmp_replay_add(rp, &pass_ops, P);
    }
    if (e == GMP_OK) {
        e = gmp_replay_run(rp);
        if (e == STOPPED || (e != GMP_OK && e != GMP_ERR_NOMEM))
            e = GMP_OK; /* a trace cut or corrupt: what was read stands */
    }
    snap *s = which ? which : (P->it.has && P->k && P->starts >= P->k) ? &P->it : &P->wl;
    if (e == GMP_OK && s->has) {
        e = resolve(R, r, s);
        if (e == GMP_OK) {
            out_row->s = *s;
            out_row->by_wall = s == &P->wl;
            memset(s, 0, sizeof *s);
        }
    }
    snap_free(&P->it);
    snap_free(&P->wl);
    snap_free(&P->oom);
    gmp_replay_free(rp);
    gmp_reader_close(r);
    P->rp = NULL;
    return e == GMP_ERR_NOMEM ? e : GMP_OK;
}

/* ---- the comparison ---- */

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorted in place); 0 when n is 0. */
static uint64_t median(uint64_t *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, u64_cmp);
    return n % 2 ? v[n / 2]
                 : v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2;
}

static uint64_t bytes_of(const snap *s, uint32_t path)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->v[mid].range < path)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->v[lo].range == path ? s->v[lo].bytes : 0;
}

static int diff_cmp(const void *a, const void *b)
{
    const range_diff *x = a, *y = b;
    uint64_t dx = x->failing - x->median, dy = y->failing - y->median;
    return dx > dy ? -1 : dx < dy ? 1 : (x->path > y->path) - (x->path < y->path);
}

static gmp_err compare(gmp_ranks_oom *R)
{
    size_t n = R->nrows;
    uint64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return GMP_ERR_NOMEM;
    uint64_t *fields[3] = {&R->median.allocated, &R->median.reserved, &R->median.outside};
    for (int f = 0; f < 3; f++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            const snap *s = &R->rows[i].s;
            if (f == 2 && !s->has_outside)
                continue;
            v[m++] = f == 0 ? s->allocated : f == 1 ? s->reserved : s->outside;
        }
        *fields[f] = median(v, m);
        if (f == 2)
            R->median.has_outside = m > 0;
    }
    for (size_t i = 1; i < n; i++)
        if (R->rows[i].s.allocated > R->rows[R->heaviest].s.allocated)
            R->heaviest = i;
    /* every range the failing rank holds bytes in, against the healthy ranks' median */
    R->diffs = malloc((R->fail.s.n ? R->fail.s.n : 1) * sizeof *R->diffs);
    if (!R->diffs) {
        free(v);
        return GMP_ERR_NOMEM;
    }
    for (size_t k = 0; k < R->fail.s.n; k++) {
        uint32_t p = R->fail.s.v[k].range;
        for (size_t i = 0; i < n; i++)
            v[i] = bytes_of(&R->rows[i].s, p);
        uint64_t med = median(v, n);
        if (R->fail.s.v[k].bytes > med)
            R->diffs[R->ndiffs++] = (range_diff){p, R->fail.s.v[k].bytes, med};
    }
    qsort(R->diffs, R->ndiffs, sizeof *R->diffs, diff_cmp);
    free(v);
    return GMP_OK;
}

/* The device of a healthy trace: the one with the highest peak of allocated bytes. */
static int32_t main_device(const gmp_report_trace *t)
{
    int32_t dev = 0;
    uint64_t best = 0;
    for (size_t i = 0; i < t->ndevices; i++)
        if (t->devices[i].id >= 0 && t->devices[i].d.peak_allocated > best) {
            best = t->devices[i].d.peak_allocated;
            dev = t->devices[i].id;
        }
    return dev;
}

static char *dup_str(gmp_str s)
{
    char *p = malloc((size_t)s.len + 1);
    if (p) {
        if (s.len)
            memcpy(p, s.ptr, s.len);
        p[s.len] = 0;
    }
    return p;
}

static int has_anchor(const gmp_report_trace *t)
{
    return t->has_header && t->start_wall_ns && t->start_wall_ns >= t->start_trace_ns;
}

void gmp_report_ranks_oom_free(gmp_ranks_oom *R)
{
    if (!R)
        return;
    snap_free(&R->fail.s);
    for (size_t i = 0; i < R->nrows; i++) {
        snap_free(&R->rows[i].s);
        free(R->rows[i].label);
    }
    free(R->rows);
    gmp_intern_free(&R->paths);
    free(R->diffs);
    free(R->iter_name);
    free(R->fail_label);
    free(R->fail_path);
    free(R);
}

/* One trace of the job as the comparison sees it: from a report model (the per-process report) or
 * from a per-rank summary (the cross-rank view). */
typedef struct cand {
    gmp_str path, label;
    int oom;        /* it recorded an OOM */
    int32_t device; /* the device it is looked at on when healthy */
    char lbuf[160];
} cand;
typedef void (*cand_fn)(const void *ctx, size_t i, cand *c);

/* The comparison of the n traces get() describes, fail the one that ran out first (its model ft:
 * its first OOM, its clock), nfail those with an OOM, `it` the model whose iteration is used (NULL:
 * none). Leaves R NULL-equivalent (nrows 0) when no healthy rank could be compared. */
static gmp_err core(gmp_ranks_oom *R, size_t n, cand_fn get, const void *ctx, size_t fail,
                    size_t nfail, const gmp_report_trace *ft, const gmp_report_trace *it)
{
    cand c;
    R->failing = fail;
    R->nfailing = nfail;
    R->oom = ft->analysis->ooms[0];
    R->oom.nlive = 0; /* its sites are the failing trace's: not kept here */
    R->healthy = n - nfail;
    R->fail_t0 = ft->t0_ns;
    uint64_t fail_wall =
        has_anchor(ft) ? ft->start_wall_ns - ft->start_trace_ns + ft->analysis->ooms[0].time_ns
                       : UINT64_MAX;
    get(ctx, fail, &c);
    if (!(R->fail_label = dup_str(c.label)) || !(R->fail_path = dup_str(c.path)))
        return GMP_ERR_NOMEM;
    gmp_analysis_iter_kind kind =
        it && it->analysis ? it->analysis->iter.kind : GMP_ANALYSIS_ITER_NONE;
    if (kind != GMP_ANALYSIS_ITER_NONE &&
        !(R->iter_name = dup_str(gmp_report_str(it, it->analysis->iter.range))))
        return GMP_ERR_NOMEM;
    /* the failing rank up to its OOM */
    pass P;
    memset(&P, 0, sizeof P);
    P.failing = 1;
    P.device = R->oom.device;
    P.kind = R->iter_name ? kind : GMP_ANALYSIS_ITER_NONE;
    P.name = R->iter_name;
    gmp_err e = run_pass(R->fail_path, &P, &R->fail, &P.oom, R);
    R->fail.trace = fail;
    R->reread_failed = !R->fail.s.has;
    if (e != GMP_OK || R->reread_failed) /* not a trace file (a snapshot): nothing to compare */
        return e;
    R->iteration = P.oom_k;
    uint64_t oom_ns = R->oom.time_ns;
    /* the wall window: as long before the OOM as the failing iteration had run; 1 s without one */
    uint64_t span = !R->iteration               ? 1000000000ull
                    : oom_ns > P.oom_iter_start ? oom_ns - P.oom_iter_start
                                                : 0;
    /* the healthy ranks: every one up to GMP_RANKS_OOM_MAX_COMPARED, else as many evenly spaced
     * over the inputs' order (the same ones whatever order the traces were read in) */
    size_t want =
        R->healthy < GMP_RANKS_OOM_MAX_COMPARED ? (size_t)R->healthy : GMP_RANKS_OOM_MAX_COMPARED;
    R->rows = calloc(want ? want : 1, sizeof *R->rows);
    if (!R->rows)
        return GMP_ERR_NOMEM;
    size_t h = 0;
    for (size_t i = 0; i < n && e == GMP_OK && R->nrows < want; i++) {
        get(ctx, i, &c);
        if (c.oom)
            continue;
        size_t hi = h++; /* this healthy trace's number: take hi when it falls on the spacing */
        if ((hi * want) / R->healthy == ((hi + 1) * want) / R->healthy)
            continue;
        memset(&P, 0, sizeof P);
        P.device = c.device;
        P.kind = R->iter_name && R->iteration ? kind : GMP_ANALYSIS_ITER_NONE;
        P.name = R->iter_name;
        P.k = R->iteration;
        P.fail_wall = fail_wall;
        P.span = span;
        rank_row *row = &R->rows[R->nrows];
        char *path = dup_str(c.path);
        e = path ? run_pass(path, &P, row, NULL, R) : GMP_ERR_NOMEM;
        free(path);
        if (e == GMP_OK && row->s.has) {
            row->trace = i;
            if (!(row->label = dup_str(c.label))) {
                snap_free(&row->s);
                return GMP_ERR_NOMEM;
            }
            R->nby_wall += (size_t)row->by_wall;
            R->nrows++;
        }
    }
    if (e == GMP_OK && R->nrows)
        e = compare(R);
    return e;
}

static void doc_cand(const void *ctx, size_t i, cand *c)
{
    const gmp_report_trace *t = ((const gmp_report_doc *)ctx)->traces[i];
    c->path = gmp_report_str(t, t->path);
    c->label = gmp_report_str(t, t->label);
    c->oom = t->analysis && t->analysis->nooms;
    c->device = main_device(t);
}

gmp_err gmp_report_ranks_oom_compute(gmp_report_doc *doc)
{
    gmp_report_ranks_oom_free(doc->ranks_oom);
    doc->ranks_oom = NULL;
    doc->ranks_oom_free = gmp_report_ranks_oom_free;
    if (doc->ntraces < 2)
        return GMP_OK;
    /* the first OOM of the job: of the traces with one, the earliest on the wall clock (the
     * trace's order when a trace has no anchor) */
    size_t fail = SIZE_MAX, nfail = 0;
    uint64_t fail_wall = 0;
    for (size_t i = 0; i < doc->ntraces; i++) {
        const gmp_report_trace *t = doc->traces[i];
        if (!t->analysis || !t->analysis->nooms)
            continue;
        nfail++;
        uint64_t w = has_anchor(t)
                         ? t->start_wall_ns - t->start_trace_ns + t->analysis->ooms[0].time_ns
                         : UINT64_MAX;
        if (fail == SIZE_MAX || w < fail_wall) {
            fail = i;
            fail_wall = w;
        }
    }
    if (fail == SIZE_MAX || nfail == doc->ntraces)
        return GMP_OK;
    const gmp_report_trace *ft = doc->traces[fail];
    /* the iteration: the failing trace's, else the first healthy trace's that has one */
    const gmp_report_trace *it = ft;
    for (size_t i = 0; it->analysis->iter.kind == GMP_ANALYSIS_ITER_NONE && i < doc->ntraces; i++) {
        const gmp_report_trace *t = doc->traces[i];
        if (t->analysis && !t->analysis->nooms && t->analysis->iter.kind != GMP_ANALYSIS_ITER_NONE)
            it = t;
    }
    gmp_ranks_oom *R = calloc(1, sizeof *R);
    if (!R)
        return GMP_ERR_NOMEM;
    gmp_err e = core(R, doc->ntraces, doc_cand, doc, fail, nfail, ft, it);
    if (e != GMP_OK || R->reread_failed || !R->nrows) {
        gmp_report_ranks_oom_free(R);
        return e;
    }
    doc->ranks_oom = R;
    return GMP_OK;
}

/* ---- from per-rank summaries ---- */

/* One trace replayed into a one-trace report model (its analysis: the OOM's verdict, the
 * iteration). GMP_ERR_FORMAT when it cannot be read as a gpumemprof trace. */
typedef struct model {
    gmp_reader *r;
    gmp_replay *rp;
    gmp_report_doc *doc;
} model;

static void model_free(model *m)
{
    gmp_report_doc_free(m->doc);
    gmp_replay_free(m->rp);
    gmp_reader_close(m->r);
    memset(m, 0, sizeof *m);
}

static gmp_err model_read(model *m, const char *path, const gmp_report_opts *ropts)
{
    memset(m, 0, sizeof *m);
    if (gmp_reader_open(&m->r, path, NULL) != GMP_OK)
        return GMP_ERR_FORMAT;
    gmp_err e = gmp_replay_new(&m->rp, m->r, NULL);
    if (e == GMP_OK)
        e = gmp_report_doc_new(&m->doc, ropts);
    if (e == GMP_OK) /* no label: no per-change steps (only a shared time axis needs them) */
        e = gmp_report_doc_add(m->doc, m->rp, path, "");
    if (e == GMP_OK)
        e = gmp_replay_run(m->rp);
    if (e == GMP_OK && (m->doc->ntraces != 1 || !m->doc->traces[0]->analysis))
        e = GMP_ERR_FORMAT;
    if (e != GMP_OK) {
        model_free(m);
        return e == GMP_ERR_NOMEM ? e : GMP_ERR_FORMAT;
    }
    return GMP_OK;
}

static void sum_cand(const void *ctx, size_t i, cand *c)
{
    const gmp_rank_summary *s = &((const gmp_rank_summary *)ctx)[i];
    c->path = s->path;
    gmp_rank_summary_label(s, i, c->lbuf, sizeof c->lbuf);
    c->label = (gmp_str){c->lbuf, (uint32_t)strlen(c->lbuf)};
    c->oom = s->ooms != 0;
    /* as main_device: the device with the highest allocated peak */
    c->device = 0;
    uint64_t best = 0;
    for (size_t k = 0; k < s->ndevices; k++)
        if (s->devices[k].id >= 0 && s->devices[k].peak_allocated_bytes > best) {
            best = s->devices[k].peak_allocated_bytes;
            c->device = s->devices[k].id;
        }
}

gmp_err gmp_ranks_oom_from_summaries(const gmp_rank_summary *s, size_t n,
                                     const gmp_report_opts *ropts, gmp_ranks_oom **out,
                                     gmp_ranks_oom_status *status)
{
    *out = NULL;
    *status = GMP_RANKS_OOM_NONE;
    /* the first OOM of the job: the earliest on the wall clock (start_wall_ns + first_oom_ns; a
     * summary without a wall clock after those with one), ties and no clock by the inputs' order */
    size_t fail = SIZE_MAX, nfail = 0;
    uint64_t fail_wall = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s[i].ooms)
            continue;
        nfail++;
        uint64_t w = s[i].start_wall_ns ? s[i].start_wall_ns + s[i].first_oom_ns : UINT64_MAX;
        if (fail == SIZE_MAX || w < fail_wall) {
            fail = i;
            fail_wall = w;
        }
    }
    if (n < 2 || fail == SIZE_MAX || nfail == n)
        return GMP_OK;
    *status = GMP_RANKS_OOM_NO_FAILING_TRACE;
    model fm, hm;
    memset(&hm, 0, sizeof hm);
    gmp_err e = model_read(&fm, s[fail].path.ptr, ropts);
    if (e != GMP_OK)
        return e == GMP_ERR_NOMEM ? e : GMP_OK;
    const gmp_report_trace *ft = fm.doc->traces[0];
    if (!ft->analysis->nooms) { /* not the trace the summary was made from */
        model_free(&fm);
        return GMP_OK;
    }
    /* the iteration: the failing trace's, else the first healthy trace's (one trace more read,
     * not every one: the ranks of a job run the same loop) */
    const gmp_report_trace *it = ft;
    if (ft->analysis->iter.kind == GMP_ANALYSIS_ITER_NONE) {
        it = NULL;
        for (size_t i = 0; i < n; i++)
            if (!s[i].ooms) {
                e = model_read(&hm, s[i].path.ptr, ropts);
                if (e == GMP_OK)
                    it = hm.doc->traces[0];
                break;
            }
        if (e == GMP_ERR_NOMEM) {
            model_free(&fm);
            return e;
        }
        e = GMP_OK;
    }
    gmp_ranks_oom *R = calloc(1, sizeof *R);
    e = R ? core(R, n, sum_cand, s, fail, nfail, ft, it) : GMP_ERR_NOMEM;
    model_free(&hm);
    model_free(&fm);
    if (e == GMP_OK && !R->reread_failed && !R->nrows)
        *status = GMP_RANKS_OOM_NO_HEALTHY_TRACE;
    if (e != GMP_OK || R->reread_failed || !R->nrows) {
        gmp_report_ranks_oom_free(R);
        return e;
    }
    *status = GMP_RANKS_OOM_DONE;
    *out = R;
    return GMP_OK;
}

/* ---- the section ---- */

static const char *path_of(const gmp_ranks_oom *R, uint32_t id)
{
    size_t n;
    return gmp_intern_get(&R->paths, id, &n);
}

#define K(v, key) gmp_dv_k((v), (key))

static const char *ordinal_suffix(uint64_t n)
{
    if (n % 100 >= 11 && n % 100 <= 13)
        return "th";
    return n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
}

/* A label or path kept by the comparison, as a value of d ("none" shown when empty). */
static gmp_doc_val own_str(gmp_doc *d, const char *p, const char *none)
{
    return gmp_dv_str(gmp_doc_strdup(d, p, strlen(p)), none);
}

/* What differs on the failing rank: its own allocations above the median (own), what its pool
 * held free (fc) and that above the median's (frag), its memory outside the allocator above the
 * median's (out); returns the cause's JSON name, as the section's verdict decides it. */
static const char *cause_of(const gmp_ranks_oom *R, uint64_t *own, uint64_t *fc, uint64_t *frag,
                            uint64_t *out)
{
    const snap *fs = &R->fail.s, *m = &R->median;
    uint64_t f_out = fs->has_outside ? fs->outside : R->oom.outside;
    int f_has_out = R->oom.has_outside || fs->has_outside;
    *own = fs->allocated > m->allocated ? fs->allocated - m->allocated : 0;
    *fc = fs->reserved > fs->allocated ? fs->reserved - fs->allocated : 0;
    uint64_t mc = m->reserved > m->allocated ? m->reserved - m->allocated : 0;
    *frag = *fc > mc ? *fc - mc : 0;
    *out = f_has_out && m->has_outside && f_out > m->outside ? f_out - m->outside : 0;
    if (*out > *own && *out >= *frag)
        return "outside_allocator";
    if (*frag > *own)
        return "fragmentation";
    if (R->ndiffs && *own && path_of(R, R->diffs[0].path)[0])
        return "range_grew";
    return *own ? "allocations" : "capacity";
}

void gmp_ranks_oom_finding(gmp_doc *d, gmp_doc_block *parent, const gmp_ranks_oom *R)
{
    if (!R || R->reread_failed)
        return;
    uint64_t own, fc, frag, out;
    const char *cause = cause_of(R, &own, &fc, &frag, &out);
    gmp_doc_block *b =
        gmp_doc_verdict(d, parent, "findings", GMP_DOC_PROBLEM, "%v ran out of memory first, ",
                        own_str(d, R->fail_label, "?"));
    if (R->iteration && R->iter_name)
        gmp_doc_linef(d, &b->title, "in the %v%v %v; ", gmp_dv_count(R->iteration),
                      gmp_dv_lit(ordinal_suffix(R->iteration)), own_str(d, R->iter_name, ""));
    else
        gmp_doc_linef(d, &b->title, "%v; ", gmp_dv_lit("compared by the wall clock"));
    if (!strcmp(cause, "range_grew"))
        gmp_doc_linef(d, &b->title, "beside %v other ranks, %v grew (%v against their median %v)",
                      gmp_dv_count(R->nrows), own_str(d, path_of(R, R->diffs[0].path), ""),
                      gmp_dv_bytes(R->diffs[0].failing), gmp_dv_bytes(R->diffs[0].median));
    else if (!strcmp(cause, "outside_allocator"))
        gmp_doc_linef(d, &b->title,
                      "beside %v other ranks, %v more memory outside the allocator than their "
                      "median",
                      gmp_dv_count(R->nrows), gmp_dv_bytes(out));
    else if (!strcmp(cause, "fragmentation"))
        gmp_doc_linef(d, &b->title,
                      "beside %v other ranks, fragmentation: %v more free in its pool",
                      gmp_dv_count(R->nrows), gmp_dv_bytes(frag));
    else if (!strcmp(cause, "allocations"))
        gmp_doc_linef(d, &b->title,
                      "beside %v other ranks, %v more of its own allocations, outside any range",
                      gmp_dv_count(R->nrows), gmp_dv_bytes(own));
    else
        gmp_doc_linef(d, &b->title,
                      "it held no more than the %v other ranks: the job needs more than the device "
                      "has",
                      gmp_dv_count(R->nrows));
    gmp_doc_linef(d, &b->title, " (details: \"%v\")",
                  gmp_dv_ref("An OOM across ranks", "ranks-oom"));
    b->flags |= GMP_DOC_ITEM;
    gmp_doc_line *l = &b->title;
    gmp_doc_line_add(d, l, gmp_dv_f(gmp_dv_k(gmp_dv_lit("ranks_oom"), "kind"), GMP_DOC_DATA));
    gmp_doc_line_add(d, l, gmp_dv_f(gmp_dv_k(gmp_dv_lit(cause), "differs_by"), GMP_DOC_DATA));
    gmp_doc_line_add(d, l, gmp_dv_f(gmp_dv_k(gmp_dv_lit("ranks_oom"), "json_path"), GMP_DOC_DATA));
}

static void section(gmp_doc *d, gmp_doc_block *parent, const gmp_ranks_oom *R, int anchored);

void gmp_report_ranks_oom_build(gmp_doc *d, gmp_doc_block *parent, const gmp_report_doc *doc)
{
    section(d, parent, doc->ranks_oom, 0); /* the per-process report's HTML numbers its sections */
}

void gmp_ranks_oom_section(gmp_doc *d, gmp_doc_block *parent, const gmp_ranks_oom *R)
{
    section(d, parent, R, 1); /* the view's finding refers to it */
}

static void section(gmp_doc *d, gmp_doc_block *parent, const gmp_ranks_oom *R, int anchored)
{
    if (!R || R->reread_failed)
        return;
    gmp_doc_block *s = gmp_doc_section(d, parent, "ranks_oom", 0, "An OOM across ranks");
    if (anchored)
        gmp_doc_anchor(d, s, "ranks-oom");
    gmp_doc_block *kv = gmp_doc_kv(d, s);
    if (R->iteration && R->iter_name) {
        gmp_doc_item_add(d, kv, "iteration", 0, "the %v%v %v, on every rank",
                         K(gmp_dv_count(R->iteration), "iteration"),
                         gmp_dv_lit(ordinal_suffix(R->iteration)),
                         K(gmp_dv_str(gmp_doc_strdup(d, R->iter_name, strlen(R->iter_name)), ""),
                           "iteration_name"));
    } else {
        gmp_doc_item_add(d, kv, "iteration", 0, "%v",
                         gmp_dv_lit("none found before the OOM: ranks are put side by side by "
                                    "the wall clock (each trace's start anchor)"));
        gmp_doc_item_add(d, kv, "iteration", GMP_DOC_DATA, "%v%v", K(gmp_dv_count(0), "iteration"),
                         K(gmp_dv_str((gmp_str){"", 0}, ""), "iteration_name"));
    }
    gmp_doc_verdict(d, s, "failing", GMP_DOC_PROBLEM,
                    "%v (%v) ran out of memory first: %v asked on device %v at %v%v; %v",
                    K(own_str(d, R->fail_label, "?"), "label"),
                    K(own_str(d, R->fail_path, ""), "path"),
                    K(gmp_dv_bytes(R->oom.requested), "requested_bytes"),
                    K(gmp_dv_device(R->oom.device), "device"),
                    K(gmp_dv_time(R->oom.time_ns, R->fail_t0), "time_ns"),
                    gmp_dv_lit(R->iteration ? ", during that iteration" : ""),
                    K(gmp_dv_lit(gmp_analysis_oom_verdict_text(R->oom.verdict)), "oom_verdict"));
    if (R->nfailing > 1)
        gmp_doc_notice(d, s, "other_failing", GMP_DOC_WARNING,
                       "%v other ranks ran out of memory too",
                       K(gmp_dv_count(R->nfailing - 1), "other_failing_ranks"));
    gmp_doc_item_add(d, kv, "compared with", 0,
                     "%v of the %v healthy ranks, %v by the iteration, %v by the wall clock",
                     K(gmp_dv_count(R->nrows), "compared_ranks"),
                     K(gmp_dv_count(R->healthy), "healthy_ranks"),
                     K(gmp_dv_count(R->nrows - R->nby_wall), "aligned_by_iteration"),
                     K(gmp_dv_count(R->nby_wall), "aligned_by_wall_clock"));

    /* the failing rank, the healthy median and the heaviest healthy rank */
    static const gmp_doc_col cols[] = {
        {"rank", "label", GMP_DOC_STR, 0},
        {"at", "at", GMP_DOC_LIT, 0},
        {"allocated", "allocated_bytes", GMP_DOC_BYTES, GMP_DOC_BAR},
        {"reserved", "reserved_bytes", GMP_DOC_BYTES, 0},
        {"free in the pool", "cached_bytes", GMP_DOC_BYTES, 0},
        {"outside the allocator", "outside_bytes", GMP_DOC_BYTES, 0},
    };
    gmp_doc_block *tb = gmp_doc_table(d, s, "ranks", cols, sizeof cols / sizeof cols[0]);
    const snap *fs = &R->fail.s;
    /* outside the allocator: from the driver's samples on every rank alike; the OOM's own
     * reading only when the failing rank has no sample */
    uint64_t f_out = fs->has_outside ? fs->outside : R->oom.outside;
    int f_has_out = R->oom.has_outside || fs->has_outside;
    gmp_doc_val *r = gmp_doc_row(d, tb);
    r[0] = own_str(d, R->fail_label, "?");
    r[1] = gmp_dv_lit("its OOM");
    r[2] = gmp_dv_f(gmp_dv_bytes(fs->allocated), GMP_DOC_BAD);
    r[3] = gmp_dv_bytes(fs->reserved);
    r[4] = gmp_dv_bytes(fs->reserved > fs->allocated ? fs->reserved - fs->allocated : 0);
    r[5] = f_has_out ? gmp_dv_bytes(f_out) : gmp_dv_none();
    const snap *m = &R->median;
    r = gmp_doc_row(d, tb);
    r[0] = gmp_dv_str(gmp_doc_strdup(d, "median of the others", 20), "");
    r[1] = gmp_dv_lit(R->iteration ? "peak of the same iteration" : "peak before the same moment");
    r[2] = gmp_dv_bytes(m->allocated);
    r[3] = gmp_dv_bytes(m->reserved);
    r[4] = gmp_dv_bytes(m->reserved > m->allocated ? m->reserved - m->allocated : 0);
    r[5] = m->has_outside ? gmp_dv_bytes(m->outside) : gmp_dv_none();
    const rank_row *hv = &R->rows[R->heaviest];
    r = gmp_doc_row(d, tb);
    r[0] = own_str(d, hv->label, "?");
    r[1] = gmp_dv_lit(hv->by_wall ? "peak before the same moment (heaviest other)"
                                  : "peak of the same iteration (heaviest other)");
    r[2] = gmp_dv_bytes(hv->s.allocated);
    r[3] = gmp_dv_bytes(hv->s.reserved);
    r[4] = gmp_dv_bytes(hv->s.reserved > hv->s.allocated ? hv->s.reserved - hv->s.allocated : 0);
    r[5] = hv->s.has_outside ? gmp_dv_bytes(hv->s.outside) : gmp_dv_none();

    /* the ranges that hold more on the failing rank */
    static const gmp_doc_col rcols[] = {
        {"range", "range", GMP_DOC_STR, GMP_DOC_TAIL},
        {"failing rank", "failing_bytes", GMP_DOC_BYTES, GMP_DOC_BAR},
        {"median of the others", "median_bytes", GMP_DOC_BYTES, 0},
        {"more", "more_bytes", GMP_DOC_BYTES, 0},
    };
    size_t shown = R->ndiffs < GMP_RANKS_OOM_MAX_RANGES ? R->ndiffs : GMP_RANKS_OOM_MAX_RANGES;
    if (shown) {
        gmp_doc_block *rt = gmp_doc_table(d, s, "ranges", rcols, sizeof rcols / sizeof rcols[0]);
        for (size_t i = 0; i < shown; i++) {
            const range_diff *x = &R->diffs[i];
            const char *p = path_of(R, x->path);
            r = gmp_doc_row(d, rt);
            r[0] = gmp_dv_str(gmp_doc_strdup(d, p, strlen(p)), "(no range)");
            r[1] = gmp_dv_bytes(x->failing);
            r[2] = gmp_dv_bytes(x->median);
            r[3] = gmp_dv_bytes(x->failing - x->median);
        }
        rt->total = R->ndiffs;
    } else {
        gmp_doc_block *e = gmp_doc_table(d, s, "ranges", NULL, 0);
        e->flags |= GMP_DOC_DATA; /* `ranges: []` */
    }

    /* what differs: the largest of the three excesses over the median */
    uint64_t own, fc, frag, out;
    cause_of(R, &own, &fc, &frag, &out);
    if (out > own && out >= frag) {
        gmp_doc_verdict(d, s, "differs", GMP_DOC_PROBLEM,
                        "what differs on %v: %v more memory outside the allocator than the "
                        "median of the others (%v against %v), while its own allocations are %v "
                        "above it",
                        own_str(d, R->fail_label, "?"), K(gmp_dv_bytes(out), "outside_more_bytes"),
                        gmp_dv_bytes(f_out), gmp_dv_bytes(m->outside),
                        K(gmp_dv_bytes(own), "allocated_more_bytes"));
        gmp_doc_item_add(d, kv, "cause", GMP_DOC_DATA, "%v",
                         K(gmp_dv_lit("outside_allocator"), "differs_by"));
    } else if (frag > own) {
        gmp_doc_verdict(d, s, "differs", GMP_DOC_PROBLEM,
                        "what differs on %v: fragmentation: its pool held %v free (%v more than "
                        "the median of the others) and no block of %v",
                        own_str(d, R->fail_label, "?"), gmp_dv_bytes(fc),
                        K(gmp_dv_bytes(frag), "cached_more_bytes"), gmp_dv_bytes(R->oom.requested));
        gmp_doc_item_add(d, kv, "cause", GMP_DOC_DATA, "%v",
                         K(gmp_dv_lit("fragmentation"), "differs_by"));
    } else if (shown && own && path_of(R, R->diffs[0].path)[0]) {
        const range_diff *x = &R->diffs[0];
        const char *p = path_of(R, x->path);
        gmp_doc_verdict(d, s, "differs", GMP_DOC_PROBLEM,
                        "what differs on %v: its own allocations, %v above the median of the "
                        "others; most of it in %v (%v against %v): the range that grew",
                        own_str(d, R->fail_label, "?"),
                        K(gmp_dv_bytes(own), "allocated_more_bytes"),
                        K(gmp_dv_str(gmp_doc_strdup(d, p, strlen(p)), "(no range)"), "range"),
                        K(gmp_dv_bytes(x->failing), "range_bytes"),
                        K(gmp_dv_bytes(x->median), "range_median_bytes"));
        gmp_doc_item_add(d, kv, "cause", GMP_DOC_DATA, "%v",
                         K(gmp_dv_lit("range_grew"), "differs_by"));
    } else if (own) {
        /* what grew was allocated outside every range: no range to name */
        gmp_doc_verdict(d, s, "differs", GMP_DOC_PROBLEM,
                        "what differs on %v: its own allocations, %v above the median of the "
                        "others, made outside any NVTX range",
                        own_str(d, R->fail_label, "?"),
                        K(gmp_dv_bytes(own), "allocated_more_bytes"));
        gmp_doc_item_add(d, kv, "cause", GMP_DOC_DATA, "%v",
                         K(gmp_dv_lit("allocations"), "differs_by"));
    } else {
        gmp_doc_verdict(d, s, "differs", GMP_DOC_WARNING,
                        "%v held no more than the other ranks: the job as a whole needs more "
                        "than the device has (capacity)",
                        own_str(d, R->fail_label, "?"));
        gmp_doc_item_add(d, kv, "cause", GMP_DOC_DATA, "%v",
                         K(gmp_dv_lit("capacity"), "differs_by"));
    }
}
