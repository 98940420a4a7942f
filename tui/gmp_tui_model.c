/* gmp_tui_model: the viewer's index over one replay pass (see gmp_tui_model.h). */
#include "gmp_tui_model.h"

#include "gmp_analysis.h"
#include "gmp_units.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WBUF_EVENTS 16384    /* events buffered before a write */
#define CK_MIN_EVENTS 65536u /* at least this many logged events between checkpoints */
#define MAX_DEVS 64          /* device ids -1 .. 62 get a timeline */
#define MAX_RARE 65536       /* indices of rare events (OOMs, failures, ...) kept for jumps */
#define FIRST_BUCKET_SHIFT                                                                         \
    10 /* bucket width at the start, 1 << 10 ns; doubles as the trace grows */

typedef struct ckpt {
    uint64_t index; /* the state after logged events [0, index) */
    uint64_t off;   /* offset in the checkpoint file */
    uint64_t n;     /* live allocations */
} ckpt;

struct gmp_tui_model {
    gmp_reader *r;
    gmp_replay *rp;
    int evfd, ckfd;
    gmp_tui_ev *wbuf;
    size_t nwbuf;
    uint64_t nev;
    uint64_t *chunk_t; /* time of logged event k * GMP_TUI_CHUNK */
    size_t nchunk, capchunk;
    ckpt *ck;
    size_t nck, capck;
    uint64_t ck_off, since_ck;
    gmp_tui_live *ckbuf; /* filled by the live_foreach callback */
    size_t nckbuf, capckbuf;
    uint64_t t0, t1, bucket_ns;
    unsigned bucket_shift; /* bucket_ns = 1 << bucket_shift */
    int have_t0;
    uint64_t nooms, nnotices;
    /* per device (by id + 1): its last failed allocation not yet followed by an OOM (an OOM that
     * reports it marks it GMP_TUI_EVF_REPORTED), and how many OOMs reported one */
    struct {
        uint64_t index, size;
        uint32_t api, stack, tid;
        int has;
    } last_failed[MAX_DEVS];
    uint64_t reported[MAX_DEVS];
    gmp_tui_dev slot[MAX_DEVS]; /* by id + 1 */
    uint64_t cur_alloc[MAX_DEVS], cur_res[MAX_DEVS];
    uint64_t *rare; /* indices of the events that are not ALLOC, FREE or POOL, in order */
    size_t nrare;
    int rare_full;     /* more than MAX_RARE: jumps scan the log */
    gmp_tui_dev *devs; /* listed, by id */
    size_t ndevs;
    gmp_err werr;
    gmp_tui_verdict *verd; /* the report's verdicts, by index (the verdict thread's) */
    size_t nverd;
    atomic_int vstate, vstop; /* GMP_TUI_VERDICTS_*; 1: the verdict thread should stop */
    pthread_t vth;
    int vthread;
    char *vpath;
};

/* ---- temporary files ---- */

static int tmp_file(void)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
#ifdef O_TMPFILE
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
#endif
    char path[4096];
    snprintf(path, sizeof path, "%s/gpumemprof-view-XXXXXX", dir);
    fd = mkstemp(path);
    if (fd >= 0)
        unlink(path);
    return fd;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static size_t read_at(int fd, void *p, size_t n, uint64_t off)
{
    char *c = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, c + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void flush_events(gmp_tui_model *m)
{
    if (m->nwbuf && write_all(m->evfd, m->wbuf, m->nwbuf * sizeof *m->wbuf) != 0)
        m->werr = GMP_ERR_IO;
    m->nwbuf = 0;
}

/* ---- the pass ---- */

static unsigned space_of(unsigned kind)
{
    switch (kind) {
    case GMP_MEM_VMM_PHYSICAL: return 1;
    case GMP_MEM_VMM_MAPPING: return 2;
    case GMP_MEM_VA_RESERVE: return 3;
    case GMP_MEM_NVTX_REGION: return 4;
    default: return 0;
    }
}

static gmp_tui_dev *slot_of(gmp_tui_model *m, int32_t id)
{
    if (id < -1 || id >= MAX_DEVS - 1)
        return NULL;
    gmp_tui_dev *d = &m->slot[id + 1];
    if (!d->buckets) {
        d->buckets = calloc(GMP_TUI_BUCKETS, sizeof *d->buckets);
        if (!d->buckets)
            return NULL;
        d->id = id;
    }
    return d;
}

static void merge_buckets(gmp_tui_model *m)
{
    for (int s = 0; s < MAX_DEVS; s++) {
        gmp_tui_bucket *b = m->slot[s].buckets;
        if (!b)
            continue;
        for (size_t j = 0; j < GMP_TUI_BUCKETS / 2; j++) {
            gmp_tui_bucket x = b[2 * j], y = b[2 * j + 1];
            if (x.has && y.has) {
                x.amin = x.amin < y.amin ? x.amin : y.amin;
                x.amax = x.amax > y.amax ? x.amax : y.amax;
                x.rmax = x.rmax > y.rmax ? x.rmax : y.rmax;
                x.alast = y.alast;
                x.rlast = y.rlast;
            } else if (y.has) {
                x = y;
            }
            b[j] = x;
        }
        memset(b + GMP_TUI_BUCKETS / 2, 0, GMP_TUI_BUCKETS / 2 * sizeof *b);
    }
    m->bucket_ns *= 2;
    m->bucket_shift++;
}

static void note_time(gmp_tui_model *m, uint64_t t)
{
    if (!m->have_t0) {
        m->have_t0 = 1;
        m->t0 = m->t1 = t;
    }
    if (t > m->t1)
        m->t1 = t;
}

/* The device's allocated and reserved after an event, into its timeline. */
static void bucket_put(gmp_tui_model *m, int32_t id, uint64_t t, uint64_t alloc, uint64_t res)
{
    gmp_tui_dev *d = slot_of(m, id);
    if (!d)
        return;
    note_time(m, t);
    uint64_t off = t > m->t0 ? t - m->t0 : 0;
    while (off >> m->bucket_shift >= GMP_TUI_BUCKETS)
        merge_buckets(m);
    gmp_tui_bucket *b = &d->buckets[off >> m->bucket_shift];
    uint64_t pa = m->cur_alloc[id + 1], pr = m->cur_res[id + 1];
    if (!b->has) {
        b->has = 1;
        b->amin = pa < alloc ? pa : alloc;
        b->amax = pa > alloc ? pa : alloc;
        b->rmax = pr > res ? pr : res;
    } else {
        if (alloc < b->amin)
            b->amin = alloc;
        if (alloc > b->amax)
            b->amax = alloc;
        if (res > b->rmax)
            b->rmax = res;
    }
    b->alast = alloc;
    b->rlast = res;
    m->cur_alloc[id + 1] = alloc;
    m->cur_res[id + 1] = res;
}

static gmp_err ck_collect(void *ctx, const gmp_replay_alloc *a)
{
    gmp_tui_model *m = ctx;
    if (m->nckbuf == m->capckbuf) {
        size_t nc = m->capckbuf ? m->capckbuf * 2 : 1024;
        gmp_tui_live *nb = realloc(m->ckbuf, nc * sizeof *nb);
        if (!nb)
            return GMP_ERR_NOMEM;
        m->ckbuf = nb;
        m->capckbuf = nc;
    }
    gmp_tui_live *l = &m->ckbuf[m->nckbuf++];
    memset(l, 0, sizeof *l);
    l->key = a->address ? a->address : a->handle;
    if (a->kind == GMP_MEM_VMM_PHYSICAL)
        l->key = a->handle;
    l->size = a->size;
    l->time_ns = a->time_ns;
    l->site = (uint32_t)a->site;
    l->device = a->device;
    l->space = (uint8_t)space_of(a->kind);
    return GMP_OK;
}

static gmp_err checkpoint(gmp_tui_model *m, gmp_replay *rp)
{
    m->nckbuf = 0;
    gmp_err e = gmp_replay_live_foreach(rp, ck_collect, m);
    if (e != GMP_OK)
        return gmp_replay_fail(rp, e, "out of memory while indexing the trace");
    if (m->nck == m->capck) {
        size_t nc = m->capck ? m->capck * 2 : 64;
        ckpt *n = realloc(m->ck, nc * sizeof *n);
        if (!n)
            return gmp_replay_fail(rp, GMP_ERR_NOMEM, "out of memory while indexing the trace");
        m->ck = n;
        m->capck = nc;
    }
    if (write_all(m->ckfd, m->ckbuf, m->nckbuf * sizeof *m->ckbuf) != 0)
        return gmp_replay_fail(rp, GMP_ERR_IO, "cannot write the viewer's index: %s",
                               strerror(errno));
    m->ck[m->nck++] = (ckpt){m->nev, m->ck_off, m->nckbuf};
    m->ck_off += m->nckbuf * sizeof *m->ckbuf;
    m->since_ck = 0;
    return GMP_OK;
}

static gmp_err log_ev(gmp_tui_model *m, gmp_replay *rp, const gmp_tui_ev *ev)
{
    if (m->nev % GMP_TUI_CHUNK == 0) {
        if (m->nchunk == m->capchunk) {
            size_t nc = m->capchunk ? m->capchunk * 2 : 256;
            uint64_t *n = realloc(m->chunk_t, nc * sizeof *n);
            if (!n)
                return gmp_replay_fail(rp, GMP_ERR_NOMEM, "out of memory while indexing the trace");
            m->chunk_t = n;
            m->capchunk = nc;
        }
        m->chunk_t[m->nchunk++] = ev->time_ns;
    }
    note_time(m, ev->time_ns);
    if (ev->op != GMP_TUI_EV_ALLOC && ev->op != GMP_TUI_EV_FREE && ev->op != GMP_TUI_EV_POOL &&
        !m->rare_full) {
        if (!m->rare)
            m->rare = malloc(MAX_RARE * sizeof *m->rare);
        if (m->rare && m->nrare < MAX_RARE)
            m->rare[m->nrare++] = m->nev;
        else
            m->rare_full = 1;
    }
    m->wbuf[m->nwbuf++] = *ev;
    m->nev++;
    m->since_ck++;
    if (m->nwbuf == WBUF_EVENTS)
        flush_events(m);
    if (m->werr != GMP_OK)
        return gmp_replay_fail(rp, m->werr, "cannot write the viewer's index: %s", strerror(errno));
    return GMP_OK;
}

static gmp_err maybe_checkpoint(gmp_tui_model *m, gmp_replay *rp)
{
    uint64_t live = gmp_replay_get_summary(rp)->max_live_allocs;
    uint64_t every = CK_MIN_EVENTS > 2 * live ? CK_MIN_EVENTS : 2 * live;
    return m->since_ck >= every ? checkpoint(m, rp) : GMP_OK;
}

static void fill_mem(gmp_tui_ev *ev, const gmp_rec *rec, const gmp_replay_alloc *a,
                     const gmp_replay_device *dev, unsigned op, int counted)
{
    memset(ev, 0, sizeof *ev);
    ev->time_ns = rec->time_ns;
    ev->op = (uint8_t)op;
    ev->key = a->kind == GMP_MEM_VMM_PHYSICAL || !a->address ? a->handle : a->address;
    ev->size = a->size;
    ev->site = (uint32_t)a->site;
    ev->device = (int16_t)a->device;
    ev->allocated = dev ? dev->allocated : 0;
    ev->reserved = dev ? dev->reserved : 0;
    ev->flags = (uint8_t)((counted ? GMP_TUI_EVF_COUNTED : 0) | space_of(a->kind) << 4);
}

static gmp_err on_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *mev)
{
    gmp_tui_model *m = ctx;
    gmp_tui_ev ev;
    const gmp_rec_mem *rm = &mev->rec->u.mem;
    if (mev->status == GMP_REPLAY_FAILED) {
        memset(&ev, 0, sizeof ev);
        ev.time_ns = mev->rec->time_ns;
        ev.op = GMP_TUI_EV_FAILED;
        ev.size = rm->size;
        ev.site = rm->api;
        ev.key = (uint64_t)rm->range << 32 | rm->stack; /* the request's range and stack */
        ev.flags = (uint8_t)(rm->kind <= GMP_TUI_EVF_KIND ? rm->kind : 0);
        ev.device = (int16_t)rm->device;
        ev.allocated = mev->dev ? mev->dev->allocated : 0;
        ev.reserved = mev->dev ? mev->dev->reserved : 0;
        if (rm->device >= -1 && rm->device < MAX_DEVS - 1) {
            int k = rm->device + 1;
            m->last_failed[k].index = m->nev;
            m->last_failed[k].size = rm->size;
            m->last_failed[k].api = rm->api;
            m->last_failed[k].stack = rm->stack;
            m->last_failed[k].tid = mev->rec->tid;
            m->last_failed[k].has = 1;
        }
        return log_ev(m, rp, &ev);
    }
    if ((mev->status != GMP_REPLAY_OK && mev->status != GMP_REPLAY_REPLACED) || !mev->alloc)
        return GMP_OK;
    fill_mem(&ev, mev->rec, mev->alloc, mev->dev, GMP_TUI_EV_ALLOC, mev->counted);
    gmp_err e = log_ev(m, rp, &ev);
    if (e == GMP_OK && mev->dev)
        bucket_put(m, mev->dev->id, ev.time_ns, mev->dev->allocated, mev->dev->reserved);
    return e == GMP_OK ? maybe_checkpoint(m, rp) : e;
}

static gmp_err on_free(void *ctx, gmp_replay *rp, const gmp_replay_mem *mev)
{
    gmp_tui_model *m = ctx;
    gmp_tui_ev ev;
    if (mev->status == GMP_REPLAY_UNKNOWN_FREE || mev->status == GMP_REPLAY_DOUBLE_FREE) {
        memset(&ev, 0, sizeof ev);
        ev.time_ns = mev->rec->time_ns;
        ev.op = GMP_TUI_EV_BADFREE;
        ev.key = mev->rec->u.mem.address;
        ev.device = (int16_t)mev->rec->u.mem.device;
        ev.site = mev->rec->u.mem.api;
        ev.flags = mev->status == GMP_REPLAY_DOUBLE_FREE ? GMP_TUI_EVF_DOUBLE : 0;
        ev.allocated = mev->dev ? mev->dev->allocated : 0;
        ev.reserved = mev->dev ? mev->dev->reserved : 0;
        return log_ev(m, rp, &ev);
    }
    if (mev->status != GMP_REPLAY_OK || !mev->alloc)
        return GMP_OK;
    for (size_t i = 0; i < mev->nalloc; i++) {
        fill_mem(&ev, mev->rec, &mev->alloc[i], mev->dev, GMP_TUI_EV_FREE, mev->counted);
        gmp_err e = log_ev(m, rp, &ev);
        if (e != GMP_OK)
            return e;
    }
    if (mev->dev)
        bucket_put(m, mev->dev->id, mev->rec->time_ns, mev->dev->allocated, mev->dev->reserved);
    return maybe_checkpoint(m, rp);
}

static gmp_err on_pool(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *dev)
{
    gmp_tui_model *m = ctx;
    if (!dev || rec->u.pool.op != GMP_POOL_RESERVED)
        return GMP_OK;
    bucket_put(m, dev->id, rec->time_ns, dev->allocated, dev->reserved);
    gmp_tui_ev ev;
    memset(&ev, 0, sizeof ev);
    ev.time_ns = rec->time_ns;
    ev.op = GMP_TUI_EV_POOL;
    ev.key = rec->u.pool.pool;
    ev.size = rec->u.pool.value;
    ev.device = (int16_t)dev->id;
    ev.allocated = dev->allocated;
    ev.reserved = dev->reserved;
    return log_ev(m, rp, &ev);
}

static gmp_err on_peak(void *ctx, gmp_replay *rp, const gmp_replay_device *dev, uint64_t t)
{
    gmp_tui_model *m = ctx;
    (void)rp;
    (void)t;
    gmp_tui_dev *d = slot_of(m, dev->id);
    if (d && m->nev) {
        d->peak_index = m->nev - 1;
        d->has_peak = 1;
    }
    return GMP_OK;
}

/* Sets flag on logged event i (still in the write buffer, else in the file). */
static void mark_event(gmp_tui_model *m, uint64_t i, uint8_t flag)
{
    uint64_t first = m->nev - m->nwbuf; /* the buffer's first event */
    if (i >= first) {
        m->wbuf[i - first].flags |= flag;
        return;
    }
    gmp_tui_ev ev;
    if (read_at(m->evfd, &ev, sizeof ev, i * sizeof ev) != sizeof ev)
        return; /* (then it stays a failure of its own) */
    ev.flags |= flag;
    if (pwrite(m->evfd, &ev, sizeof ev, (off_t)(i * sizeof ev)) != (ssize_t)sizeof ev)
        m->werr = GMP_ERR_IO;
}

static gmp_err on_oom(void *ctx, gmp_replay *rp, const gmp_replay_oom *o)
{
    gmp_tui_model *m = ctx;
    gmp_tui_ev ev;
    if (o->device >= -1 && o->device < MAX_DEVS - 1) {
        /* the failed allocation of the same request, just before it (GMP_TUI_EVF_REPORTED) */
        int k = o->device + 1;
        if (m->last_failed[k].has && m->last_failed[k].size == o->requested &&
            m->last_failed[k].api == o->api && m->last_failed[k].stack == o->stack &&
            m->last_failed[k].tid == o->tid) {
            mark_event(m, m->last_failed[k].index, GMP_TUI_EVF_REPORTED);
            m->reported[k]++;
        }
        m->last_failed[k].has = 0;
    }
    memset(&ev, 0, sizeof ev);
    ev.time_ns = o->time_ns;
    ev.op = GMP_TUI_EV_OOM;
    ev.size = o->requested;
    ev.key = m->nooms++;
    ev.device = (int16_t)o->device;
    ev.site = o->api;
    ev.allocated = o->live_bytes;
    ev.reserved = o->reserved_bytes;
    return log_ev(m, rp, &ev);
}

static gmp_err on_event(void *ctx, gmp_replay *rp, const gmp_rec *rec)
{
    gmp_tui_model *m = ctx;
    gmp_tui_ev ev;
    memset(&ev, 0, sizeof ev);
    ev.time_ns = rec->time_ns;
    switch (rec->type) {
    case GMP_REC_ALERT:
        ev.op = GMP_TUI_EV_ALERT;
        ev.device = (int16_t)rec->u.alert.device;
        ev.size = rec->u.alert.live_bytes;
        ev.key = rec->u.alert.threshold;
        ev.site = rec->u.alert.range;
        break;
    case GMP_REC_NOTICE:
        ev.op = GMP_TUI_EV_NOTICE;
        ev.key = m->nnotices++;
        ev.site = rec->u.notice.severity;
        ev.device = -1;
        break;
    case GMP_REC_LOST:
        ev.op = GMP_TUI_EV_LOST;
        ev.size = rec->u.lost.count;
        ev.device = -1;
        break;
    default: return GMP_OK;
    }
    return log_ev(m, rp, &ev);
}

static const gmp_replay_ops model_ops = {
    .alloc = on_alloc,
    .free = on_free,
    .pool = on_pool,
    .peak = on_peak,
    .oom = on_oom,
    .event = on_event,
};

static int dev_listed(const gmp_tui_dev *d)
{
    if (!d->d)
        return 0;
    if (d->id >= 0)
        return 1;
    return d->d->peak_allocated > 0 || d->d->peak_reserved > 0;
}

/* ---- the report's verdicts (gmp_analysis) ---- */

static void range_path(gmp_reader *r, uint32_t id, char *buf, size_t n)
{
    uint32_t ids[32];
    size_t nr = 0;
    for (; id && nr < 32;) {
        const gmp_rec_range *rr = gmp_reader_range(r, id);
        if (!rr)
            break;
        ids[nr++] = rr->name;
        id = rr->parent;
    }
    size_t pl = 0;
    buf[0] = 0;
    for (size_t i = 0; i < nr; i++) {
        gmp_str nm = gmp_reader_string(r, ids[nr - 1 - i]);
        int w = snprintf(buf + pl, n - pl, "%s%.*s", i ? "/" : "", (int)(nm.len < 64 ? nm.len : 64),
                         nm.len ? nm.ptr : "?");
        if (w < 0 || (size_t)w >= n - pl)
            break;
        pl += (size_t)w;
    }
    for (char *c = buf; *c; c++) /* a terminal line: no control characters from the trace */
        if ((unsigned char)*c < 32 || *c == 127)
            *c = '?';
}

/* A leak outside any range is named by its stack (the report: its first user frame, symbolized):
 * here its innermost Python frame's function; a native stack is shown in the focus pane. */
static void owner_frame(gmp_replay *rp, uint32_t stack, char *buf, size_t n)
{
    gmp_replay_frame fr[64];
    size_t nf = stack ? gmp_replay_stack_frames(rp, stack, fr, 64) : 0;
    if (nf > 64)
        nf = 64;
    snprintf(buf, n, "%s", stack ? "(no range, a native stack)" : "(no range, no stack)");
    for (size_t i = 0; i < nf; i++)
        if (fr[i].kind == GMP_FRAME_PYTHON && fr[i].function.len) {
            snprintf(buf, n, "%.*s", (int)(fr[i].function.len < 128 ? fr[i].function.len : 128),
                     fr[i].function.ptr);
            break;
        }
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 32 || *c == 127)
            *c = '?';
}

typedef struct leak_span {
    uint64_t first, last; /* times of the first and last allocation still live at the end */
    int has;
} leak_span;

typedef struct leak_scan {
    const uint32_t *site_leak; /* per replay site: leak index + 1, 0 none */
    size_t nsites;
    leak_span *span;
} leak_scan;

static gmp_err leak_live(void *ctx, const gmp_replay_alloc *a)
{
    leak_scan *ls = ctx;
    if (a->site >= ls->nsites || !ls->site_leak[a->site])
        return GMP_OK;
    leak_span *sp = &ls->span[ls->site_leak[a->site] - 1];
    if (!sp->has || a->time_ns < sp->first)
        sp->first = a->time_ns;
    if (!sp->has || a->time_ns > sp->last)
        sp->last = a->time_ns;
    sp->has = 1;
    return GMP_OK;
}

static uint32_t find_replay_site(gmp_replay *rp, const gmp_analysis_site *s)
{
    size_t n = gmp_replay_site_count(rp);
    for (size_t i = 0; i < n && i < UINT32_MAX; i++) {
        const gmp_replay_site *r = gmp_replay_site_at(rp, i);
        if (r && r->device == s->device && r->kind == s->kind && r->api == s->api &&
            r->range == s->range && r->stack == s->stack)
            return (uint32_t)i;
    }
    return UINT32_MAX;
}

static void add_verdict(gmp_tui_model *m, uint64_t index, uint64_t t, int32_t dev, uint32_t site,
                        const char *text)
{
    if (index == UINT64_MAX || m->nverd >= GMP_TUI_VERDICTS)
        return;
    if (!m->verd && !(m->verd = calloc(GMP_TUI_VERDICTS, sizeof *m->verd)))
        return;
    gmp_tui_verdict *v = &m->verd[m->nverd++];
    v->index = index;
    v->time_ns = t;
    v->device = dev;
    v->site = site;
    size_t n = strlen(text);
    if (n >= sizeof v->text)
        n = sizeof v->text - 1;
    memcpy(v->text, text, n);
    v->text[n] = 0;
}

static int verdict_cmp(const void *a, const void *b)
{
    const gmp_tui_verdict *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The first logged event at or after t. */
static uint64_t first_at(const gmp_tui_model *m, uint64_t t)
{
    return t ? gmp_tui_model_count_until(m, t - 1) : 0;
}

/* R: the analysis of the replay arp (a second pass over the same file: its string, range and stack
 * ids are the file's, as the model's are; its site numbers are its own). */
static void build_verdicts(gmp_tui_model *m, const gmp_analysis_result *R, gmp_replay *arp)
{
    size_t ns = gmp_replay_site_count(m->rp), nas = gmp_replay_site_count(arp);
    char path[256], line[256], b1[32], b2[32];
    if (R->nleaks && ns && nas) {
        uint32_t *site_leak = calloc(nas, sizeof *site_leak); /* arp's sites */
        uint32_t *top = calloc(R->nleaks, sizeof *top);       /* the model's sites */
        leak_span *span = calloc(R->nleaks, sizeof *span);
        unsigned char *mask = calloc(ns, 1);
        if (site_leak && top && span && mask) {
            for (size_t l = 0; l < R->nleaks; l++) {
                top[l] = UINT32_MAX;
                for (size_t k = 0; k < R->leaks[l].nsites; k++) {
                    uint32_t si = find_replay_site(arp, &R->leaks[l].sites[k].site);
                    if (si != UINT32_MAX && !site_leak[si])
                        site_leak[si] = (uint32_t)l + 1;
                    if (top[l] == UINT32_MAX)
                        top[l] = find_replay_site(m->rp, &R->leaks[l].sites[k].site);
                }
            }
            leak_scan ls = {site_leak, nas, span};
            gmp_replay_live_foreach(arp, leak_live, &ls);
            for (size_t l = 0; l < R->nleaks; l++) {
                const gmp_analysis_leak *lk = &R->leaks[l];
                if (!span[l].has)
                    continue;
                memset(mask, 0, ns);
                for (size_t k = 0; k < lk->nsites; k++) {
                    uint32_t si = find_replay_site(m->rp, &lk->sites[k].site);
                    if (si != UINT32_MAX)
                        mask[si] = 1;
                }
                if (lk->range)
                    range_path(m->r, lk->range, path, sizeof path);
                else
                    owner_frame(m->rp, lk->stack, path, sizeof path);
                gmp_fmt_bytes(lk->growth_bytes, b1, sizeof b1);
                gmp_fmt_bytes((uint64_t)(lk->rate_bytes + 0.5), b2, sizeof b2);
                for (int end = 0; end < 2; end++) {
                    uint64_t t = end ? span[l].last : span[l].first;
                    uint64_t from = first_at(m, t); /* find_site looks after its index */
                    uint64_t i =
                        gmp_tui_model_find_site(m, from ? from - 1 : UINT64_MAX, 1, mask, ns);
                    uint64_t last = R->iter.iterations;
                    if (snprintf(line, sizeof line, /* a long path is cut: that is fine */
                                 "probable leak %s %s on device %d: +%s per iteration over "
                                 "iterations %" PRIu64 "-%" PRIu64 " (+%s); %s leaked allocation",
                                 lk->range ? "in" : "at", path, (int)lk->device, b2,
                                 last - lk->iterations, last, b1, end ? "last" : "first") < 0)
                        line[0] = 0;
                    add_verdict(m, i, t, lk->device, top[l], line);
                }
            }
        }
        free(site_leak);
        free(top);
        free(span);
        free(mask);
    }
    static const char *const why[] = {
        "capacity: what was live leaves no room for it",
        "fragmentation: enough memory was free, not in one block",
        "memory outside the allocator: without it the request would have fit",
    };
    for (size_t k = 0; k < R->nooms; k++) {
        const gmp_analysis_oom *o = &R->ooms[k];
        uint64_t from = first_at(m, o->time_ns);
        uint64_t i = gmp_tui_model_find(m, from ? from - 1 : UINT64_MAX, 1,
                                        1u << GMP_TUI_EV_OOM | 1u << GMP_TUI_EV_FAILED, o->device);
        gmp_fmt_bytes(o->requested, b1, sizeof b1);
        snprintf(line, sizeof line, "out of memory on device %d, %s requested: %s", (int)o->device,
                 b1, (unsigned)o->verdict < 3 ? why[o->verdict] : "?");
        add_verdict(m, i, o->time_ns, o->device, UINT32_MAX, line);
    }
    if (m->nverd)
        qsort(m->verd, m->nverd, sizeof *m->verd, verdict_cmp);
}

/* Stops the analysis pass when the model is freed (checked at every allocation). */
static gmp_err verdict_stop(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    (void)ev;
    gmp_tui_model *m = ctx;
    return atomic_load_explicit(&m->vstop, memory_order_relaxed)
               ? gmp_replay_fail(rp, GMP_ERR_ARG, "stopped")
               : GMP_OK;
}

static void *verdict_thread(void *arg)
{
    gmp_tui_model *m = arg;
    gmp_reader *r = NULL;
    gmp_replay *rp = NULL;
    gmp_analysis *an = NULL;
    gmp_replay_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.threads = 1; /* this thread only: the screen keeps the other core */
    static const gmp_replay_ops stop_ops = {.alloc = verdict_stop};
    /* below the screen's thread: cursor moves keep the CPU on a busy machine (Linux: a thread's
     * own nice value) */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    gmp_err e = gmp_reader_open(&r, m->vpath, NULL);
    if (e == GMP_OK)
        e = gmp_replay_new(&rp, r, &ro);
    if (e == GMP_OK)
        e = gmp_analysis_new(&an, NULL);
    if (e == GMP_OK)
        e = gmp_analysis_attach(an, rp);
    if (e == GMP_OK)
        e = gmp_replay_add(rp, &stop_ops, m);
    if (e == GMP_OK)
        e = gmp_replay_run(rp);
    int ok = 0;
    if (e == GMP_OK) {
        gmp_analysis_result *R = gmp_analysis_finish(an, NULL); /* ids stay the file's */
        if (R) {
            build_verdicts(m, R, rp);
            ok = 1;
        }
        gmp_analysis_result_free(R);
    }
    gmp_analysis_free(an);
    gmp_replay_free(rp);
    if (r)
        gmp_reader_close(r);
    atomic_store(&m->vstate, ok ? GMP_TUI_VERDICTS_READY : GMP_TUI_VERDICTS_FAILED);
    return NULL;
}

void gmp_tui_model_verdicts_start(gmp_tui_model *m, const char *path)
{
    if (atomic_load(&m->vstate) != GMP_TUI_VERDICTS_NONE)
        return;
    m->vpath = strdup(path);
    if (!m->vpath) {
        atomic_store(&m->vstate, GMP_TUI_VERDICTS_FAILED);
        return;
    }
    atomic_store(&m->vstate, GMP_TUI_VERDICTS_RUNNING);
    if (pthread_create(&m->vth, NULL, verdict_thread, m) == 0)
        m->vthread = 1;
    else
        verdict_thread(m); /* no thread: here */
}

int gmp_tui_model_verdicts_state(const gmp_tui_model *m)
{
    return atomic_load((atomic_int *)&m->vstate);
}

size_t gmp_tui_model_nverdicts(const gmp_tui_model *m)
{
    return gmp_tui_model_verdicts_state(m) == GMP_TUI_VERDICTS_READY ? m->nverd : 0;
}

const gmp_tui_verdict *gmp_tui_model_verdict(const gmp_tui_model *m, size_t i)
{
    return i < gmp_tui_model_nverdicts(m) ? &m->verd[i] : NULL;
}

gmp_err gmp_tui_model_build(gmp_tui_model **out, gmp_reader *r, char *msg, size_t msglen)
{
    *out = NULL;
    gmp_tui_model *m = calloc(1, sizeof *m);
    if (!m) {
        gmp_reader_close(r);
        snprintf(msg, msglen, "%s", gmp_err_str(GMP_ERR_NOMEM));
        return GMP_ERR_NOMEM;
    }
    m->r = r;
    m->evfd = m->ckfd = -1;
    m->bucket_shift = FIRST_BUCKET_SHIFT;
    m->bucket_ns = (uint64_t)1 << FIRST_BUCKET_SHIFT;
    m->werr = GMP_OK;
    gmp_err e = GMP_OK;
    m->wbuf = malloc(WBUF_EVENTS * sizeof *m->wbuf);
    m->evfd = tmp_file();
    m->ckfd = tmp_file();
    if (!m->wbuf || m->evfd < 0 || m->ckfd < 0) {
        e = m->wbuf ? GMP_ERR_IO : GMP_ERR_NOMEM;
        snprintf(msg, msglen, "cannot make the viewer's temporary index: %s",
                 m->wbuf ? strerror(errno) : gmp_err_str(GMP_ERR_NOMEM));
        gmp_tui_model_free(m);
        return e;
    }
    e = gmp_replay_new(&m->rp, r, NULL);
    if (e == GMP_OK)
        e = gmp_replay_add(m->rp, &model_ops, m);
    if (e == GMP_OK)
        e = gmp_replay_run(m->rp);
    if (e == GMP_OK) {
        flush_events(m);
        e = m->werr;
    }
    if (e != GMP_OK) {
        const char *rm = m->rp ? gmp_replay_error(m->rp) : "";
        snprintf(msg, msglen, "%s", rm && *rm ? rm : gmp_err_str(e));
        gmp_tui_model_free(m);
        return e;
    }
    free(m->ckbuf);
    m->ckbuf = NULL;
    m->capckbuf = m->nckbuf = 0;
    /* the devices: the replay's numbers, timelines filled forward over buckets without events */
    size_t nlisted = 0;
    for (int s = 0; s < MAX_DEVS; s++) {
        gmp_tui_dev *d = &m->slot[s];
        d->id = s - 1;
        d->d = gmp_replay_device_find(m->rp, s - 1);
        if (dev_listed(d) && !d->buckets && !slot_of(m, s - 1)) {
            snprintf(msg, msglen, "%s", gmp_err_str(GMP_ERR_NOMEM));
            gmp_tui_model_free(m);
            return GMP_ERR_NOMEM;
        }
        nlisted += dev_listed(d);
        if (!d->buckets)
            continue;
        gmp_tui_bucket prev;
        memset(&prev, 0, sizeof prev);
        for (size_t i = 0; i < GMP_TUI_BUCKETS; i++) {
            gmp_tui_bucket *b = &d->buckets[i];
            if (b->has) {
                prev = *b;
            } else {
                b->amin = b->amax = b->alast = prev.alast;
                b->rmax = b->rlast = prev.rlast;
            }
        }
    }
    m->devs = calloc(nlisted ? nlisted : 1, sizeof *m->devs);
    if (!m->devs) {
        snprintf(msg, msglen, "%s", gmp_err_str(GMP_ERR_NOMEM));
        gmp_tui_model_free(m);
        return GMP_ERR_NOMEM;
    }
    for (int s = 0; s < MAX_DEVS; s++) {
        gmp_tui_dev *d = &m->slot[s];
        if (d->d)
            d->failures = d->d->ooms + d->d->failed_allocs - m->reported[s];
        if (dev_listed(d))
            m->devs[m->ndevs++] = *d;
    }
    *out = m;
    return GMP_OK;
}

void gmp_tui_model_free(gmp_tui_model *m)
{
    if (!m)
        return;
    if (m->vthread) {
        atomic_store(&m->vstop, 1);
        pthread_join(m->vth, NULL);
    }
    free(m->vpath);
    gmp_replay_free(m->rp);
    gmp_reader_close(m->r);
    if (m->evfd >= 0)
        close(m->evfd);
    if (m->ckfd >= 0)
        close(m->ckfd);
    for (int s = 0; s < MAX_DEVS; s++)
        free(m->slot[s].buckets);
    free(m->devs);
    free(m->wbuf);
    free(m->chunk_t);
    free(m->rare);
    free(m->ck);
    free(m->ckbuf);
    free(m->verd);
    free(m);
}

gmp_reader *gmp_tui_model_reader(const gmp_tui_model *m)
{
    return m->r;
}

gmp_replay *gmp_tui_model_replay(const gmp_tui_model *m)
{
    return m->rp;
}

uint64_t gmp_tui_model_events(const gmp_tui_model *m)
{
    return m->nev;
}

uint64_t gmp_tui_model_zero(const gmp_tui_model *m)
{
    uint64_t t0 = gmp_replay_get_summary(m->rp)->first_ns;
    if (!t0 || t0 > m->t0)
        t0 = m->t0; /* no record before the first logged event */
    return gmp_trace_zero(gmp_reader_header(m->r), t0);
}

uint64_t gmp_tui_model_t0(const gmp_tui_model *m)
{
    return m->t0;
}

uint64_t gmp_tui_model_t1(const gmp_tui_model *m)
{
    return m->t1;
}

size_t gmp_tui_model_ndevs(const gmp_tui_model *m)
{
    return m->ndevs;
}

const gmp_tui_dev *gmp_tui_model_dev(const gmp_tui_model *m, size_t i)
{
    return i < m->ndevs ? &m->devs[i] : NULL;
}

size_t gmp_tui_model_read(const gmp_tui_model *m, uint64_t first, gmp_tui_ev *out, size_t n)
{
    if (first >= m->nev)
        return 0;
    if (n > m->nev - first)
        n = (size_t)(m->nev - first);
    size_t got = read_at(m->evfd, out, n * sizeof *out, first * sizeof *out);
    return got / sizeof *out;
}

uint64_t gmp_tui_model_count_until(const gmp_tui_model *m, uint64_t t)
{
    if (!m->nchunk || m->chunk_t[0] > t)
        return 0;
    size_t lo = 0, hi = m->nchunk; /* the last chunk whose first time is <= t */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->chunk_t[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    gmp_tui_ev buf[512];
    uint64_t i = (uint64_t)lo * GMP_TUI_CHUNK;
    for (;;) {
        size_t n = gmp_tui_model_read(m, i, buf, sizeof buf / sizeof buf[0]);
        if (!n)
            return i;
        for (size_t k = 0; k < n; k++)
            if (buf[k].time_ns > t)
                return i + k;
        i += n;
    }
}

/* ---- the live set after an event ---- */

typedef struct live_set {
    gmp_tui_live *e;
    unsigned char *used;
    size_t cap, n;
} live_set;

static size_t live_hash(uint64_t key, unsigned space, size_t mask)
{
    uint64_t k = key ^ ((uint64_t)space << 60);
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & mask;
}

static gmp_tui_live *live_slot(live_set *s, uint64_t key, unsigned space)
{
    for (size_t i = live_hash(key, space, s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->used[i] || (s->e[i].key == key && s->e[i].space == space))
            return &s->e[i];
    }
}

static void live_del(live_set *s, gmp_tui_live *e)
{
    size_t mask = s->cap - 1, i = (size_t)(e - s->e);
    s->used[i] = 0;
    s->n--;
    for (size_t j = (i + 1) & mask; s->used[j]; j = (j + 1) & mask) {
        size_t h = live_hash(s->e[j].key, s->e[j].space, mask);
        /* j's entry may move into the hole at i when its home is not in (i, j] */
        if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
            s->e[i] = s->e[j];
            s->used[i] = 1;
            s->used[j] = 0;
            i = j;
        }
    }
}

gmp_err gmp_tui_model_live(const gmp_tui_model *m, uint64_t index, gmp_tui_live **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    uint64_t upto = index == UINT64_MAX ? 0 : index + 1; /* events applied: [0, upto) */
    if (upto > m->nev)
        upto = m->nev;
    ckpt c = {0, 0, 0};
    size_t lo = 0, hi = m->nck; /* the last checkpoint with index <= upto */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->ck[mid].index <= upto)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0)
        c = m->ck[lo - 1];
    uint64_t nev = upto - c.index;
    live_set s;
    s.cap = 64;
    while (s.cap < 2 * (c.n + nev) + 16)
        s.cap *= 2;
    s.n = 0;
    s.e = malloc(s.cap * sizeof *s.e);
    s.used = calloc(s.cap, 1);
    gmp_tui_live *tmp = malloc((c.n ? c.n : 1) * sizeof *tmp);
    gmp_tui_ev *evb = malloc(4096 * sizeof *evb);
    if (!s.e || !s.used || !tmp || !evb) {
        free(s.e);
        free(s.used);
        free(tmp);
        free(evb);
        return GMP_ERR_NOMEM;
    }
    if (c.n && read_at(m->ckfd, tmp, c.n * sizeof *tmp, c.off) != c.n * sizeof *tmp)
        c.n = 0;
    for (size_t i = 0; i < c.n; i++) {
        gmp_tui_live *e = live_slot(&s, tmp[i].key, tmp[i].space);
        if (!s.used[e - s.e]) {
            s.used[e - s.e] = 1;
            s.n++;
        }
        *e = tmp[i];
    }
    for (uint64_t i = c.index; i < upto;) {
        size_t k = gmp_tui_model_read(m, i, evb, upto - i < 4096 ? (size_t)(upto - i) : 4096);
        if (!k)
            break;
        for (size_t j = 0; j < k; j++) {
            const gmp_tui_ev *ev = &evb[j];
            unsigned space = ev->flags >> 4;
            if (ev->op == GMP_TUI_EV_ALLOC) {
                gmp_tui_live *e = live_slot(&s, ev->key, space);
                if (!s.used[e - s.e]) {
                    s.used[e - s.e] = 1;
                    s.n++;
                }
                e->key = ev->key;
                e->size = ev->size;
                e->time_ns = ev->time_ns;
                e->site = ev->site;
                e->device = ev->device;
                e->space = (uint8_t)space;
            } else if (ev->op == GMP_TUI_EV_FREE) {
                gmp_tui_live *e = live_slot(&s, ev->key, space);
                if (s.used[e - s.e])
                    live_del(&s, e);
            }
        }
        i += k;
    }
    free(evb);
    gmp_tui_live *res = realloc(tmp, (s.n ? s.n : 1) * sizeof *res);
    if (!res) {
        free(tmp);
        free(s.e);
        free(s.used);
        return GMP_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < s.cap; i++)
        if (s.used[i])
            res[k++] = s.e[i];
    free(s.e);
    free(s.used);
    *out = res;
    *n = k;
    return GMP_OK;
}

/* ---- searches ---- */

static uint64_t scan(const gmp_tui_model *m, uint64_t index, int forward,
                     int (*match)(const gmp_tui_ev *ev, const void *arg), const void *arg)
{
    gmp_tui_ev buf[1024];
    if (forward) {
        uint64_t i = index == UINT64_MAX ? 0 : index + 1;
        while (i < m->nev) {
            size_t n = gmp_tui_model_read(m, i, buf, 1024);
            if (!n)
                break;
            for (size_t k = 0; k < n; k++)
                if (match(&buf[k], arg))
                    return i + k;
            i += n;
        }
        return UINT64_MAX;
    }
    uint64_t end = index == UINT64_MAX ? 0 : index; /* search [0, end) backward */
    if (end > m->nev)
        end = m->nev;
    while (end > 0) {
        uint64_t first = end > 1024 ? end - 1024 : 0;
        size_t n = gmp_tui_model_read(m, first, buf, (size_t)(end - first));
        for (size_t k = n; k-- > 0;)
            if (match(&buf[k], arg))
                return first + k;
        end = first;
    }
    return UINT64_MAX;
}

typedef struct op_arg {
    unsigned mask;
    int32_t dev;
} op_arg;

static int match_op(const gmp_tui_ev *ev, const void *arg)
{
    const op_arg *a = arg;
    if (ev->op == GMP_TUI_EV_FAILED && (ev->flags & GMP_TUI_EVF_REPORTED) &&
        (a->mask >> GMP_TUI_EV_OOM & 1u))
        return 0; /* one failure: its OOM is the stop */
    return (a->mask >> ev->op & 1u) && (a->dev == INT32_MIN || ev->device == a->dev);
}

uint64_t gmp_tui_model_find(const gmp_tui_model *m, uint64_t index, int forward, unsigned opmask,
                            int32_t dev)
{
    op_arg a = {opmask, dev};
    unsigned common = 1u << GMP_TUI_EV_ALLOC | 1u << GMP_TUI_EV_FREE | 1u << GMP_TUI_EV_POOL;
    if (!(opmask & common) && !m->rare_full) { /* rare events only: their list, not the log */
        gmp_tui_ev ev;
        if (forward) {
            for (size_t k = 0; k < m->nrare; k++)
                if ((index == UINT64_MAX || m->rare[k] > index) &&
                    gmp_tui_model_read(m, m->rare[k], &ev, 1) == 1 && match_op(&ev, &a))
                    return m->rare[k];
        } else {
            for (size_t k = m->nrare; k-- > 0;)
                if (index != UINT64_MAX && m->rare[k] < index &&
                    gmp_tui_model_read(m, m->rare[k], &ev, 1) == 1 && match_op(&ev, &a))
                    return m->rare[k];
        }
        return UINT64_MAX;
    }
    return scan(m, index, forward, match_op, &a);
}

typedef struct site_arg {
    const unsigned char *sites;
    size_t n;
} site_arg;

static int match_site(const gmp_tui_ev *ev, const void *arg)
{
    const site_arg *a = arg;
    return ev->op == GMP_TUI_EV_ALLOC && ev->site < a->n && a->sites[ev->site];
}

uint64_t gmp_tui_model_find_site(const gmp_tui_model *m, uint64_t index, int forward,
                                 const unsigned char *sites, size_t nsites)
{
    site_arg a = {sites, nsites};
    return scan(m, index, forward, match_site, &a);
}

uint64_t gmp_tui_model_free_time(const gmp_tui_model *m, uint64_t index, uint64_t key,
                                 int32_t device, uint64_t limit, int *searched)
{
    gmp_tui_ev buf[1024];
    uint64_t i = index == UINT64_MAX ? 0 : index + 1, end = m->nev;
    *searched = 1;
    if (limit && end - i > limit) {
        end = i + limit;
        *searched = 0;
    }
    while (i < end) {
        size_t n = gmp_tui_model_read(m, i, buf, end - i < 1024 ? (size_t)(end - i) : 1024);
        if (!n)
            break;
        for (size_t k = 0; k < n; k++)
            if (buf[k].op == GMP_TUI_EV_FREE && buf[k].key == key && buf[k].device == device)
                return buf[k].time_ns;
        i += n;
    }
    return 0;
}

void gmp_tui_model_span(const gmp_tui_model *m, const gmp_tui_dev *d, uint64_t t0, uint64_t t1,
                        uint64_t *amax, uint64_t *rmax)
{
    *amax = *rmax = 0;
    if (!d->buckets || t1 < m->t0)
        return;
    uint64_t a = t0 > m->t0 ? (t0 - m->t0) / m->bucket_ns : 0;
    uint64_t b = t1 > m->t0 ? (t1 - m->t0) / m->bucket_ns : 0;
    uint64_t last = (m->t1 - m->t0) / m->bucket_ns;
    if (b > last)
        b = last;
    if (a > b)
        a = b;
    for (uint64_t i = a; i <= b && i < GMP_TUI_BUCKETS; i++) {
        if (d->buckets[i].amax > *amax)
            *amax = d->buckets[i].amax;
        if (d->buckets[i].rmax > *rmax)
            *rmax = d->buckets[i].rmax;
    }
}

static uint64_t bucket_of(const gmp_tui_model *m, uint64_t t)
{
    return t > m->t0 ? (t - m->t0) >> m->bucket_shift : 0;
}

uint64_t gmp_tui_model_reserved_at(const gmp_tui_model *m, const gmp_tui_dev *d, uint64_t index)
{
    if (!d->buckets || index == UINT64_MAX || !m->nev)
        return 0;
    if (index >= m->nev)
        index = m->nev - 1;
    gmp_tui_ev buf[256];
    uint64_t b = 0;
    for (uint64_t end = index + 1;;) { /* backward over [.., end) */
        uint64_t first = end > 256 ? end - 256 : 0;
        size_t n = gmp_tui_model_read(m, first, buf, (size_t)(end - first));
        if (!n)
            break;
        if (end == index + 1)
            b = bucket_of(m, buf[n - 1].time_ns);
        for (size_t k = n; k-- > 0;) {
            if (bucket_of(m, buf[k].time_ns) < b)
                goto before;
            if (buf[k].device == d->id &&
                (buf[k].op == GMP_TUI_EV_ALLOC || buf[k].op == GMP_TUI_EV_FREE ||
                 buf[k].op == GMP_TUI_EV_POOL))
                return buf[k].reserved;
        }
        if (!first)
            break;
        end = first;
    }
before: /* the device had no event in the cursor's bucket before it: the value it entered with */
    return b > 0 && b - 1 < GMP_TUI_BUCKETS ? d->buckets[b - 1].rlast : 0;
}
