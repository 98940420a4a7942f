/* gmp_writer: per-thread buffers, deduplicated definitions, zstd frames (see gmp_writer.h).
 *
 * Locks, from outermost to innermost:
 *   w->wlock   wake-ups and flush requests (never held while compressing or writing)
 *   w->olock   the output: one collection/compression/write cycle at a time
 *   w->listlock the list of producer threads
 *   t->lock    one producer's buffers (a spin flag; contended only by the writer)
 *   w->qlock   the free-buffer list and the full-buffer wake-up
 *   w->dlock   definitions (intern tables and the pending definition bytes)
 *   w->clk     the frames handed to the compression helpers (compress_async; inside olock)
 * A producer holds t->lock, and takes qlock or dlock inside it; it never waits for a buffer while
 * holding t->lock. The writer takes t->lock of each thread in turn to collect its buffers. */
#include "gmp_writer.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

#include "gmp_clock.h"
#include "gmp_codec.h"
#include "gmp_hash.h"
#include "gmp_tq.h"

#define FRAME_TARGET (4u << 20) /* raw bytes per frame before starting a new one */
#define MAX_INTERNED (1u << 24) /* entries per intern table */
#define RECORD_SLACK 64         /* BUFFER + LOST records written before an event */

typedef struct gmp_buf {
    struct gmp_buf *next;
    size_t len, cap;
    uint64_t events, allocs, frees, lost; /* records encoded in this buffer */
    uint8_t data[];
} gmp_buf;

struct gmp_wthread {
    gmp_writer *w;
    atomic_flag lock;
    uint32_t tid;
    int released;
    gmp_buf *cur;              /* buffer being filled, NULL when none */
    gmp_buf *full, *full_tail; /* filled buffers waiting for the writer, oldest first */
    uint64_t prev_ns;          /* time of the last event in cur */
    uint64_t lost_pending;     /* lost events not yet written as a LOST record */
    uint64_t accepted, lost;   /* totals */
    uint64_t max_ns;           /* latest event time accepted */
    struct gmp_wthread *next;
};

/* Byte vector */
typedef struct bvec {
    uint8_t *p;
    size_t len, cap;
} bvec;

static int bvec_reserve(bvec *v, size_t extra)
{
    if (v->cap - v->len >= extra)
        return 0;
    size_t nc = v->cap ? v->cap : 4096;
    while (nc - v->len < extra)
        nc *= 2;
    uint8_t *np = realloc(v->p, nc);
    if (!np)
        return -1;
    v->p = np;
    v->cap = nc;
    return 0;
}

/* Intern table: the entries in id order (entry i has id i + 1), found through an open-addressing
 * index of their positions (4 bytes a slot: growing it moves no entries); strings keep a copy of
 * their bytes. */
typedef struct ientry {
    uint64_t hash;
    uint64_t k[4];
    char *str; /* strings only */
    uint32_t len;
    uint32_t id;
} ientry;

typedef struct itable {
    ientry *e;      /* n entries (room for ecap) */
    uint32_t *slot; /* cap slots: entry index + 1, 0 = empty */
    size_t cap, n, ecap;
    uint32_t next_id;
} itable;

struct gmp_writer {
    gmp_writer_opts o;
    int fd;
    atomic_int closed; /* no more events accepted */
    int forgotten;     /* after fork in a child */
    pthread_t thread;
    int has_thread;

    pthread_mutex_t wlock, olock, listlock;
    int finished;
    int abandoned;           /* the writer thread did not stop in time: nothing may be freed */
    pthread_cond_t wcond;    /* writer thread waits here */
    pthread_cond_t donecond; /* flush requesters wait here */
    int stop;
    uint64_t flush_req, flush_done;
    atomic_int full_pending;
    gmp_wthread *threads;
    uint64_t released_accepted, released_lost;
    uint64_t max_ns; /* latest event time seen when collecting (writer side) */

    pthread_mutex_t qlock;
    pthread_cond_t freecond;
    gmp_buf *free;
    size_t nbufs, maxbufs;

    pthread_mutex_t dlock;
    bvec defs; /* encoded definition records not yet written */
    itable strings, ranges, stacks;
    uint64_t sync_req; /* importers: SYNC time to write at the next cycle */

    /* writer-thread-only state */
    int can_write; /* the output is set up (a zstd context, or o.store): finish writes END */
    ZSTD_CCtx *cctx;
    bvec stage, out;
    gmp_buf *own; /* the writer's own buffer (tid 0): LOST and END records */
    uint64_t own_prev;
    atomic_ullong ext_lost[8]; /* gmp_writer_lost counts by reason, not yet written */
    int io_failed;
    uint64_t frames_out;     /* frames handed to compression (SYNC follows a cycle with one) */
    gmp_writer_stats st;     /* written totals (events/allocs/frees/lost in the file) */
    uint64_t lost_io;        /* events dropped because the file could not be written */
    atomic_ullong ext_taken; /* gmp_writer_lost counts already taken into LOST records */

    /* o.compress_async: helper k compresses the frames handed to it in cs[k] (in turn: frame
     * number seq goes to helper seq % ncs) and writes each when c_turn reaches its number, while
     * the caller stages the next frames; what they did (c_st, c_failed) is taken over by the
     * caller when it waits for one (c* and cs[].busy, .seq under clk) */
    struct cslot {
        gmp_writer *w;
        pthread_t th;
        ZSTD_CCtx *cctx;
        bvec raw, out;
        int busy;
        uint64_t seq;
    } cs[GMP_WRITER_MAX_HELPERS];
    int ncs, cstop, c_failed;
    uint64_t c_submit, c_turn;
    pthread_mutex_t clk;
    pthread_cond_t ccond;
    gmp_writer_stats c_st;
};

void gmp_writer_opts_default(gmp_writer_opts *o)
{
    o->buffer_bytes = 64u << 10;
    o->max_buffered_bytes = 64u << 20;
    o->flush_interval_ms = 200;
    o->wait_us = 2000;
    o->level = 1;
    o->threaded = 1;
    o->sync_lag_ns = 0;
    o->compress_async = 0;
    o->store = 0;
    o->queue = NULL;
}

/* ---------- intern tables ---------- */

/* The same for the four words of a node's key, a word at a time (byte-wise FNV was most of the
 * cost of interning a stack). Only places entries in the table: ids and bytes do not depend on
 * it. */
static uint64_t hash_words(const uint64_t k[4])
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4; i++) {
        h ^= k[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static int itable_grow(itable *t)
{
    size_t nc = t->cap ? t->cap * 2 : 1024;
    uint32_t *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < t->n; i++) {
        if (t->e[i].k[3] == UINT64_MAX) /* no lookup finds it (see its makers) */
            continue;
        size_t j = t->e[i].hash & (nc - 1);
        while (ns[j])
            j = (j + 1) & (nc - 1);
        ns[j] = (uint32_t)i + 1;
    }
    free(t->slot);
    t->slot = ns;
    t->cap = nc;
    return 0;
}

/* Room for one more entry. */
static int itable_reserve(itable *t)
{
    size_t nc = t->ecap ? t->ecap * 2 : 256;
    ientry *ne = realloc(t->e, nc * sizeof *ne);
    if (!ne)
        return -1;
    t->e = ne;
    t->ecap = nc;
    return 0;
}

/* Finds or inserts; returns the entry, *is_new set when inserted (id assigned). NULL on failure.
 * The entry may move at the next insertion. */
static ientry *itable_get(itable *t, uint64_t h, const uint64_t k[4], const char *s, uint32_t len,
                          int *is_new)
{
    *is_new = 0;
    if ((t->n + 1) * 2 > t->cap && itable_grow(t) < 0)
        return NULL;
    size_t j = h & (t->cap - 1);
    for (uint32_t x; (x = t->slot[j]) != 0; j = (j + 1) & (t->cap - 1)) {
        ientry *e = &t->e[x - 1];
        if (e->hash == h && memcmp(e->k, k, sizeof e->k) == 0 &&
            (!s || (e->len == len && memcmp(e->str, s, len) == 0)))
            return e;
    }
    if (t->n >= MAX_INTERNED)
        return NULL;
    if (t->n == t->ecap && itable_reserve(t) < 0)
        return NULL;
    ientry *e = &t->e[t->n];
    e->str = NULL;
    if (s) {
        e->str = malloc(len ? len : 1);
        if (!e->str)
            return NULL;
        memcpy(e->str, s, len);
    }
    e->hash = h;
    memcpy(e->k, k, sizeof e->k);
    e->len = len;
    e->id = ++t->next_id;
    t->slot[j] = (uint32_t)++t->n;
    *is_new = 1;
    return e;
}

static void itable_free(itable *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->e[i].str);
    free(t->e);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

/* Appends an encoded definition to w->defs; dlock held. */
static int defs_append(gmp_writer *w, const gmp_rec *r)
{
    uint64_t prev = 0;
    size_t bound = gmp_encode_bound(r);
    if (bvec_reserve(&w->defs, bound) < 0)
        return -1;
    size_t n = gmp_encode(w->defs.p + w->defs.len, w->defs.cap - w->defs.len, r, &prev);
    if (!n)
        return -1;
    w->defs.len += n;
    return 0;
}

uint32_t gmp_writer_string(gmp_writer *w, const char *s, size_t n)
{
    if (!w || (!s && n) || n > GMP_MAX_STRING_BYTES)
        return 0;
    uint64_t k[4] = {0, 0, 0, 0};
    uint64_t h = gmp_hash_bytes(0, s, n);
    pthread_mutex_lock(&w->dlock);
    int is_new;
    ientry *e = itable_get(&w->strings, h, k, s ? s : "", (uint32_t)n, &is_new);
    uint32_t id = e ? e->id : 0;
    if (e && is_new) {
        gmp_rec r = {.type = GMP_REC_STRING};
        r.u.string.id = id;
        r.u.string.value.ptr = e->str;
        r.u.string.value.len = (uint32_t)n;
        if (defs_append(w, &r) < 0) {
            /* cannot define it: forget it so that nothing refers to an undefined id */
            free(e->str);
            e->str = NULL;
            e->k[3] = UINT64_MAX; /* unreachable key: never matches again */
            id = 0;
        }
    }
    pthread_mutex_unlock(&w->dlock);
    return id;
}

static uint32_t intern_node(gmp_writer *w, itable *t, const uint64_t k[4], gmp_rec *r)
{
    uint64_t h = hash_words(k);
    pthread_mutex_lock(&w->dlock);
    int is_new;
    ientry *e = itable_get(t, h, k, NULL, 0, &is_new);
    uint32_t id = e ? e->id : 0;
    if (e && is_new) {
        if (r->type == GMP_REC_RANGE)
            r->u.range.id = id;
        else
            r->u.stack.id = id;
        if (defs_append(w, r) < 0) {
            e->k[3] = UINT64_MAX;
            id = 0;
        }
    }
    pthread_mutex_unlock(&w->dlock);
    return id;
}

uint32_t gmp_writer_range(gmp_writer *w, uint32_t parent, uint32_t domain, uint32_t name)
{
    if (!w)
        return 0;
    uint64_t k[4] = {parent, domain, name, 0};
    gmp_rec r = {.type = GMP_REC_RANGE};
    r.u.range.parent = parent;
    r.u.range.domain = domain;
    r.u.range.name = name;
    return intern_node(w, &w->ranges, k, &r);
}

uint32_t gmp_writer_stack_native(gmp_writer *w, uint32_t parent, uint64_t address)
{
    if (!w)
        return 0;
    uint64_t k[4] = {parent, GMP_FRAME_NATIVE, address, 0};
    gmp_rec r = {.type = GMP_REC_STACK};
    r.u.stack.parent = parent;
    r.u.stack.kind = GMP_FRAME_NATIVE;
    r.u.stack.address = address;
    return intern_node(w, &w->stacks, k, &r);
}

uint32_t gmp_writer_stack_python(gmp_writer *w, uint32_t parent, uint32_t file, uint32_t function,
                                 uint32_t line)
{
    if (!w)
        return 0;
    uint64_t k[4] = {parent, GMP_FRAME_PYTHON, ((uint64_t)file << 32) | function, line};
    gmp_rec r = {.type = GMP_REC_STACK};
    r.u.stack.parent = parent;
    r.u.stack.kind = GMP_FRAME_PYTHON;
    r.u.stack.file = file;
    r.u.stack.function = function;
    r.u.stack.line = line;
    return intern_node(w, &w->stacks, k, &r);
}

uint32_t gmp_writer_stack_python_new(gmp_writer *w, uint32_t parent, uint32_t file,
                                     uint32_t function, uint32_t line)
{
    if (!w)
        return 0;
    itable *t = &w->stacks;
    gmp_rec r = {.type = GMP_REC_STACK};
    r.u.stack.parent = parent;
    r.u.stack.kind = GMP_FRAME_PYTHON;
    r.u.stack.file = file;
    r.u.stack.function = function;
    r.u.stack.line = line;
    uint32_t id = 0;
    pthread_mutex_lock(&w->dlock);
    /* an entry (ids stay entry positions) that no slot leads to */
    if (t->n < MAX_INTERNED && (t->n < t->ecap || itable_reserve(t) == 0)) {
        ientry *e = &t->e[t->n];
        memset(e, 0, sizeof *e);
        e->k[3] = UINT64_MAX; /* a key no lookup asks for */
        e->id = ++t->next_id;
        t->n++;
        r.u.stack.id = e->id;
        id = defs_append(w, &r) < 0 ? 0 : e->id;
    }
    pthread_mutex_unlock(&w->dlock);
    return id;
}

static const ientry *find_id(const itable *t, uint32_t id)
{
    return id && id <= t->n ? &t->e[id - 1] : NULL;
}

void gmp_writer_range_path(gmp_writer *w, uint32_t range, char *buf, size_t n)
{
    if (!n)
        return;
    buf[0] = 0;
    if (!w)
        return;
    uint32_t chain[64];
    size_t depth = 0;
    pthread_mutex_lock(&w->dlock);
    for (uint32_t r = range; r && depth < 64;) {
        const ientry *e = find_id(&w->ranges, r);
        if (!e)
            break;
        chain[depth++] = (uint32_t)e->k[2]; /* name string id */
        r = (uint32_t)e->k[0];              /* parent */
    }
    size_t o = 0;
    for (size_t i = depth; i-- > 0;) {
        const ientry *s = find_id(&w->strings, chain[i]);
        const char *name = s && s->str ? s->str : "?";
        size_t len = s && s->str ? s->len : 1;
        if (o && o + 1 < n)
            buf[o++] = '/';
        size_t take = len < n - 1 - o ? len : n - 1 - o;
        memcpy(buf + o, name, take);
        o += take;
    }
    buf[o] = 0;
    pthread_mutex_unlock(&w->dlock);
}

static void copy_str(const itable *strings, uint32_t id, char *buf, size_t n)
{
    if (!buf || !n)
        return;
    const ientry *s = find_id(strings, id);
    size_t len = s && s->str ? s->len : 0;
    if (len > n - 1)
        len = n - 1;
    if (len)
        memcpy(buf, s->str, len);
    buf[len] = 0;
}

int gmp_writer_stack_node(gmp_writer *w, uint32_t id, gmp_rec_stack *out, char *file,
                          size_t filelen, char *function, size_t funclen)
{
    if (!w || !out)
        return -1;
    int rc = -1;
    pthread_mutex_lock(&w->dlock);
    const ientry *e = find_id(&w->stacks, id);
    /* entries made by gmp_writer_stack_python_new keep no key (k[3] is UINT64_MAX) */
    if (e && e->k[3] != UINT64_MAX) {
        memset(out, 0, sizeof *out);
        out->id = id;
        out->parent = (uint32_t)e->k[0];
        out->kind = (uint32_t)e->k[1];
        if (out->kind == GMP_FRAME_PYTHON) {
            out->file = (uint32_t)(e->k[2] >> 32);
            out->function = (uint32_t)e->k[2];
            out->line = (uint32_t)e->k[3];
            copy_str(&w->strings, out->file, file, filelen);
            copy_str(&w->strings, out->function, function, funclen);
        } else {
            out->address = e->k[2];
        }
        rc = 0;
    }
    pthread_mutex_unlock(&w->dlock);
    return rc;
}

gmp_err gmp_writer_define(gmp_writer *w, const gmp_rec *def)
{
    if (!w || !def ||
        (def->type != GMP_REC_DEVICE && def->type != GMP_REC_THREAD && def->type != GMP_REC_MODULE))
        return GMP_ERR_ARG;
    pthread_mutex_lock(&w->dlock);
    int rc = defs_append(w, def);
    pthread_mutex_unlock(&w->dlock);
    return rc < 0 ? GMP_ERR_NOMEM : GMP_OK;
}

/* ---------- buffers ---------- */

static void tlock(gmp_wthread *t)
{
    unsigned spins = 0;
    while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire)) {
        if (++spins > 64)
            sched_yield();
    }
}

static void tunlock(gmp_wthread *t)
{
    atomic_flag_clear_explicit(&t->lock, memory_order_release);
}

/* Takes a free buffer or makes one within the bound; NULL when none. qlock held. */
static gmp_buf *buf_take_locked(gmp_writer *w)
{
    gmp_buf *b = w->free;
    if (b) {
        w->free = b->next;
    } else if (w->nbufs < w->maxbufs) {
        b = malloc(sizeof *b + w->o.buffer_bytes);
        if (!b)
            return NULL;
        b->cap = w->o.buffer_bytes;
        w->nbufs++;
    } else {
        return NULL;
    }
    b->next = NULL;
    b->len = 0;
    b->events = b->allocs = b->frees = b->lost = 0;
    return b;
}

static void buf_give_back(gmp_writer *w, gmp_buf *list)
{
    if (!list)
        return;
    pthread_mutex_lock(&w->qlock);
    while (list) {
        gmp_buf *n = list->next;
        list->next = w->free;
        w->free = list;
        list = n;
    }
    pthread_cond_broadcast(&w->freecond);
    pthread_mutex_unlock(&w->qlock);
}

static void add_deadline(struct timespec *ts, unsigned us)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_nsec += (long)(us % 1000000u) * 1000;
    ts->tv_sec += us / 1000000u;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_nsec -= 1000000000L;
        ts->tv_sec++;
    }
}

static void wake_writer(gmp_writer *w)
{
    atomic_store(&w->full_pending, 1);
    if (w->has_thread) {
        pthread_mutex_lock(&w->wlock);
        pthread_cond_signal(&w->wcond);
        pthread_mutex_unlock(&w->wlock);
    }
}

static void run_cycle(gmp_writer *w, int final);

/* Ensures t->cur has room for need bytes. Called with t->lock held; may release and retake it.
 * Returns 0 on success, -1 when no buffer could be had in time. */
static int ensure_room(gmp_wthread *t, size_t need)
{
    gmp_writer *w = t->w;
    if (t->cur && t->cur->cap - t->cur->len >= need)
        return 0;
    if (need > w->o.buffer_bytes)
        return -1;
    int queued = 0;
    if (t->cur) {
        if (t->cur->len) {
            if (t->full_tail)
                t->full_tail->next = t->cur;
            else
                t->full = t->cur;
            t->full_tail = t->cur;
            queued = 1;
        } else {
            buf_give_back(w, t->cur);
        }
        t->cur = NULL;
    }
    pthread_mutex_lock(&w->qlock);
    gmp_buf *b = buf_take_locked(w);
    pthread_mutex_unlock(&w->qlock);
    if (queued)
        wake_writer(w);
    if (!b && !w->has_thread) {
        /* no writer thread: the caller writes what is full, then reuses its buffers */
        tunlock(t);
        run_cycle(w, 0);
        tlock(t);
        pthread_mutex_lock(&w->qlock);
        b = buf_take_locked(w);
        pthread_mutex_unlock(&w->qlock);
    }
    if (!b && w->has_thread && w->o.wait_us) {
        tunlock(t);
        struct timespec dl;
        add_deadline(&dl, w->o.wait_us);
        pthread_mutex_lock(&w->qlock);
        while (!(b = buf_take_locked(w))) {
            if (pthread_cond_timedwait(&w->freecond, &w->qlock, &dl) == ETIMEDOUT) {
                b = buf_take_locked(w);
                break;
            }
        }
        pthread_mutex_unlock(&w->qlock);
        tlock(t);
    }
    if (!b)
        return -1;
    if (t->cur) { /* cannot happen: only this thread sets cur */
        buf_give_back(w, b);
        return t->cur->cap - t->cur->len >= need ? 0 : -1;
    }
    t->cur = b;
    return 0;
}

/* (always inline: gmp_wthread_event calls it for every event, and a call cost as much as the
 * bookkeeping below) */
static inline __attribute__((always_inline)) void buf_encode(gmp_buf *b, uint64_t *prev,
                                                             const gmp_rec *r)
{
    size_t n = gmp_encode(b->data + b->len, b->cap - b->len, r, prev);
    b->len += n;
    if (n && r->type != GMP_REC_BUFFER && r->type != GMP_REC_SYNC) { /* every other is an event */
        b->events++;
        if (r->type == GMP_REC_ALLOC)
            b->allocs++;
        else if (r->type == GMP_REC_FREE)
            b->frees++;
        else if (r->type == GMP_REC_LOST)
            b->lost += r->u.lost.count;
    }
}

/* Starts t->cur with a BUFFER record when empty and writes pending losses; t->lock held. */
static void buf_prologue(gmp_buf *b, uint32_t tid, uint64_t *prev, uint64_t ts,
                         uint64_t *lost_pending, unsigned reason)
{
    if (b->len == 0) {
        gmp_rec br = {.type = GMP_REC_BUFFER};
        br.u.buffer.tid = tid;
        br.u.buffer.base_ns = ts;
        buf_encode(b, prev, &br);
    }
    if (*lost_pending) {
        gmp_rec lr = {.type = GMP_REC_LOST, .time_ns = ts};
        lr.u.lost.count = *lost_pending;
        lr.u.lost.reason = reason;
        buf_encode(b, prev, &lr);
        *lost_pending = 0;
    }
}

int gmp_wthread_event(gmp_wthread *t, gmp_rec *ev)
{
    if (!t || !ev)
        return -1;
    gmp_writer *w = t->w;
    if (w->forgotten)
        return -1;
    tlock(t);
    if (atomic_load_explicit(&w->closed, memory_order_relaxed) || t->released) {
        tunlock(t);
        return -1;
    }
    size_t need = (ev->type == GMP_REC_ALLOC || ev->type == GMP_REC_FREE)
                      ? 160 + RECORD_SLACK /* fixed fields only: no strings to measure */
                      : gmp_encode_bound(ev) + RECORD_SLACK;
    int room = t->cur && t->cur->cap - t->cur->len >= need; /* ensure_room's first test */
    if ((!room && ensure_room(t, need) < 0) ||
        atomic_load_explicit(&w->closed, memory_order_relaxed)) {
        t->lost_pending++;
        t->lost++;
        tunlock(t);
        return -1;
    }
    if (!ev->time_ns)
        ev->time_ns = gmp_clock_ns();
    gmp_buf *b = t->cur;
    if (b->len == 0 || t->lost_pending) /* (the test buf_prologue makes, without its call) */
        buf_prologue(b, t->tid, &t->prev_ns, ev->time_ns, &t->lost_pending, GMP_LOST_BUFFER_FULL);
    size_t before = b->len;
    buf_encode(b, &t->prev_ns, ev);
    int ok = b->len > before;
    if (ok) {
        t->accepted++;
        if (ev->time_ns > t->max_ns)
            t->max_ns = ev->time_ns;
    } else {
        t->lost++; /* a record the codec refused (out-of-range field): counted, not written */
    }
    tunlock(t);
    return ok ? 0 : -1;
}

gmp_wthread *gmp_writer_thread(gmp_writer *w, uint32_t tid)
{
    if (!w || w->forgotten)
        return NULL;
    gmp_wthread *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->w = w;
    atomic_flag_clear(&t->lock);
    t->tid = tid;
    pthread_mutex_lock(&w->listlock);
    t->next = w->threads;
    w->threads = t;
    pthread_mutex_unlock(&w->listlock);
    return t;
}

void gmp_wthread_release(gmp_wthread *t)
{
    if (!t || t->w->forgotten)
        return;
    tlock(t);
    t->released = 1;
    tunlock(t);
}

void gmp_writer_lost(gmp_writer *w, uint64_t count, unsigned reason)
{
    if (!w || !count)
        return;
    if (reason >= 8)
        reason = GMP_LOST_OTHER;
    atomic_fetch_add(&w->ext_lost[reason], count);
}

/* ---------- output ---------- */

/* write(2), not writev_all below: the agent's traces go through here, and the reliability tests
 * slow or fail exactly this call (tests/reliability: an LD_PRELOAD shim of write) */
static int write_all(gmp_writer *w, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Compresses src into one frame in out (with cctx); 0 with a failure in *failed and
 * st->io_errno. */
static size_t compress_frame(ZSTD_CCtx *cctx, bvec *out, const bvec *src, int *failed,
                             gmp_writer_stats *st)
{
    if (bvec_reserve(out, ZSTD_compressBound(src->len)) < 0) {
        *failed = 1;
        st->io_errno = ENOMEM;
        return 0;
    }
    size_t n = ZSTD_compress2(cctx, out->p, out->cap, src->p, src->len);
    if (ZSTD_isError(n)) {
        *failed = 1;
        st->io_errno = EIO;
        return 0;
    }
    return n;
}

/* Writes a compressed frame of n bytes made of raw bytes. */
static void write_frame(gmp_writer *w, const bvec *out, size_t n, size_t raw, int *failed,
                        gmp_writer_stats *st)
{
    if (write_all(w, out->p, n) < 0) {
        *failed = 1;
        st->io_errno = errno ? errno : EIO;
    } else {
        st->bytes_written += n;
        st->bytes_raw += raw;
        st->frames++;
    }
}

static void write_stored(gmp_writer *w, const bvec *raw, int *failed, gmp_writer_stats *st);

static void *compress_main(void *arg)
{
    struct cslot *c = arg;
    gmp_writer *w = c->w;
    pthread_mutex_lock(&w->clk);
    for (;;) {
        while (!c->busy && !w->cstop)
            pthread_cond_wait(&w->ccond, &w->clk);
        if (!c->busy)
            break;
        int failed = w->c_failed;
        pthread_mutex_unlock(&w->clk);
        gmp_writer_stats st = {0};
        size_t n =
            failed || w->o.store ? 0 : compress_frame(c->cctx, &c->out, &c->raw, &failed, &st);
        pthread_mutex_lock(&w->clk);
        while (w->c_turn != c->seq) /* the frames before this one are written first */
            pthread_cond_wait(&w->ccond, &w->clk);
        failed |= w->c_failed;
        pthread_mutex_unlock(&w->clk);
        if (!failed && w->o.store)
            write_stored(w, &c->raw, &failed, &st);
        else if (!failed)
            write_frame(w, &c->out, n, c->raw.len, &failed, &st);
        pthread_mutex_lock(&w->clk);
        if (failed && !w->c_failed) {
            w->c_failed = 1;
            w->c_st.io_errno = st.io_errno;
        }
        w->c_st.bytes_written += st.bytes_written;
        w->c_st.bytes_raw += st.bytes_raw;
        w->c_st.frames += st.frames;
        c->raw.len = 0;
        c->busy = 0;
        w->c_turn++;
        pthread_cond_broadcast(&w->ccond);
    }
    pthread_mutex_unlock(&w->clk);
    return NULL;
}

/* Takes over what the helpers did (once slot k is free, k >= 0; all of them, k < 0); clk held. */
static void compress_wait_locked(gmp_writer *w, int k)
{
    for (int i = k < 0 ? 0 : k; i < (k < 0 ? w->ncs : k + 1); i++)
        while (w->cs[i].busy)
            pthread_cond_wait(&w->ccond, &w->clk);
    if (w->c_failed && !w->io_failed) {
        w->io_failed = 1;
        w->st.io_errno = w->c_st.io_errno;
    }
    w->st.bytes_written += w->c_st.bytes_written;
    w->st.bytes_raw += w->c_st.bytes_raw;
    w->st.frames += w->c_st.frames;
    w->c_st.bytes_written = w->c_st.bytes_raw = w->c_st.frames = 0;
}

static void compress_wait(gmp_writer *w)
{
    if (!w->ncs)
        return;
    pthread_mutex_lock(&w->clk);
    compress_wait_locked(w, -1);
    pthread_mutex_unlock(&w->clk);
}

/* ---------- stored frames (o.store) ---------- */

/* XXH64 (seed 0), which the zstd format uses for a frame's content checksum: its low 4 bytes.
 * Written from the xxHash specification (doc/xxhash_spec.md: XXH64); zstd -t and libzstd's
 * decoder verify it (tests/formats/test_reader_writer.c). */
#define XP1 0x9E3779B185EBCA87ull
#define XP2 0xC2B2AE3D27D4EB4Full
#define XP3 0x165667B19E3779F9ull
#define XP4 0x85EBCA77C2B2AE63ull
#define XP5 0x27D4EB2F165667C5ull

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t xxh_round(uint64_t acc, uint64_t in)
{
    acc += in * XP2;
    return rotl64(acc, 31) * XP1;
}

static inline uint64_t xxh_merge(uint64_t acc, uint64_t v)
{
    acc ^= xxh_round(0, v);
    return acc * XP1 + XP4;
}

static uint64_t xxh64(const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    uint64_t h;
    if (len >= 32) {
        uint64_t v1 = XP1 + XP2, v2 = XP2, v3 = 0, v4 = 0 - XP1;
        const uint8_t *limit = end - 32;
        do {
            v1 = xxh_round(v1, rd64(p));
            v2 = xxh_round(v2, rd64(p + 8));
            v3 = xxh_round(v3, rd64(p + 16));
            v4 = xxh_round(v4, rd64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xxh_merge(h, v1);
        h = xxh_merge(h, v2);
        h = xxh_merge(h, v3);
        h = xxh_merge(h, v4);
    } else {
        h = XP5;
    }
    h += (uint64_t)len;
    for (; end - p >= 8; p += 8)
        h = rotl64(h ^ xxh_round(0, rd64(p)), 27) * XP1 + XP4;
    if (end - p >= 4) {
        h = rotl64(h ^ (uint64_t)rd32(p) * XP1, 23) * XP2 + XP3;
        p += 4;
    }
    for (; p < end; p++)
        h = rotl64(h ^ *p * XP5, 11) * XP1;
    h ^= h >> 33;
    h *= XP2;
    h ^= h >> 29;
    h *= XP3;
    h ^= h >> 32;
    return h;
}

#define STORED_BLOCK (128u << 10) /* Block_Maximum_Size: the largest a block may be */

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes iov[0..n) whole (after partial writes too). */
static int writev_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t k = writev(fd, iov, n > 512 ? 512 : n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        size_t left = (size_t)k;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

/* src[0..len) as one zstd frame of Raw blocks, written to fd with writev (the content is not
 * copied). What this assumes of the format (RFC 8878, section 3.1.1):
 *  - Magic_Number 0xFD2FB528, little-endian;
 *  - Frame_Header_Descriptor: Frame_Content_Size_flag (bits 7-6) 2, a 4-byte content size (3 and
 *    8 bytes past 4 GiB); Single_Segment_flag (bit 5) 1, so there is no Window_Descriptor and the
 *    window is the content size; Content_Checksum_flag (bit 2) 1; no dictionary (bits 1-0 0);
 *  - blocks: a 3-byte little-endian header, Last_Block (bit 0), Block_Type (bits 2-1: 0 = Raw)
 *    and Block_Size (bits 23-3), then Block_Size bytes taken as they are; Block_Size at most
 *    Block_Maximum_Size = min(Window_Size, 128 KiB); a frame has at least one block, so an empty
 *    content is one empty last block;
 *  - Content_Checksum: the low 4 bytes of XXH64(content, seed 0), little-endian.
 * 0 when written, -1 with errno. */
int gmp_writer_stored_frame(int fd, const void *data, size_t len)
{
    const uint8_t *src = data ? data : (const void *)"";
    uint8_t head[13], sum[4];
    size_t hl = 0;
    put_le(head, 0xFD2FB528u, 4);
    hl = 4;
    if (len <= UINT32_MAX) {
        head[hl++] = 0x80 | 0x20 | 0x04;
        put_le(head + hl, len, 4);
        hl += 4;
    } else {
        head[hl++] = 0xC0 | 0x20 | 0x04;
        put_le(head + hl, len, 8);
        hl += 8;
    }
    size_t nblocks = len ? (len + STORED_BLOCK - 1) / STORED_BLOCK : 1;
    struct iovec small[2 * 40 + 2];
    uint8_t small_bh[3 * 40];
    struct iovec *iov = small;
    uint8_t *bh = small_bh;
    if (nblocks > 40) {
        iov = malloc((2 * nblocks + 2) * sizeof *iov);
        bh = malloc(3 * nblocks);
        if (!iov || !bh) {
            if (iov != small)
                free(iov);
            if (bh != small_bh)
                free(bh);
            errno = ENOMEM;
            return -1;
        }
    }
    int n = 0;
    iov[n++] = (struct iovec){head, hl};
    for (size_t b = 0; b < nblocks; b++) {
        size_t off = b * STORED_BLOCK;
        size_t bl = len - off < STORED_BLOCK ? len - off : STORED_BLOCK;
        put_le(bh + 3 * b, ((uint64_t)bl << 3) | (b + 1 == nblocks ? 1u : 0u), 3);
        iov[n++] = (struct iovec){bh + 3 * b, 3};
        if (bl)
            iov[n++] = (struct iovec){(void *)(src + off), bl};
    }
    put_le(sum, xxh64(src, len), 4);
    iov[n++] = (struct iovec){sum, 4};
    int rc = writev_all(fd, iov, n);
    int saved = errno;
    if (iov != small)
        free(iov);
    if (bh != small_bh)
        free(bh);
    errno = saved;
    return rc;
}

/* The size of the frame gmp_writer_stored_frame writes for len bytes. */
static size_t stored_size(size_t len)
{
    size_t nblocks = len ? (len + STORED_BLOCK - 1) / STORED_BLOCK : 1;
    return (len <= UINT32_MAX ? 9 : 13) + 3 * nblocks + len + 4;
}

/* Writes raw as a stored frame (o.store). */
static void write_stored(gmp_writer *w, const bvec *raw, int *failed, gmp_writer_stats *st)
{
    if (gmp_writer_stored_frame(w->fd, raw->p, raw->len) < 0) {
        *failed = 1;
        st->io_errno = errno ? errno : EIO;
    } else {
        st->bytes_written += stored_size(raw->len);
        st->bytes_raw += raw->len;
        st->frames++;
    }
}

/* Compresses w->stage into one frame and writes it (or hands it to the helper: stored frames
 * too, their checksum and write). Writer side only. */
static void emit_frame(gmp_writer *w)
{
    if (!w->stage.len)
        return;
    w->frames_out++;
    if (w->o.queue) {
        /* the staged bytes themselves go, with room for the reader's padding after them */
        if (!w->io_failed && bvec_reserve(&w->stage, 16) == 0) {
            size_t len = w->stage.len;
            int rc = gmp_tq_put(w->o.queue, w->stage.p, len, w->stage.cap);
            if (rc < 0) { /* (as a write into a pipe with no reader, or out of memory) */
                w->io_failed = 1;
                w->st.io_errno = rc == -1 ? EPIPE : ENOMEM;
            } else {
                w->st.bytes_written += len;
                w->st.bytes_raw += len;
                w->st.frames++;
            }
            w->stage = (bvec){NULL, 0, 0};
        } else if (!w->io_failed) {
            w->io_failed = 1;
            w->st.io_errno = ENOMEM;
        }
        w->stage.len = 0;
        return;
    }
    if (w->ncs) {
        pthread_mutex_lock(&w->clk);
        struct cslot *c = &w->cs[w->c_submit % (uint64_t)w->ncs];
        compress_wait_locked(w, (int)(c - w->cs));
        if (!w->io_failed) {
            bvec t = c->raw;
            c->raw = w->stage;
            w->stage = t;
            c->seq = w->c_submit++;
            c->busy = 1;
            pthread_cond_broadcast(&w->ccond);
        }
        pthread_mutex_unlock(&w->clk);
    } else if (w->o.store && !w->io_failed) {
        write_stored(w, &w->stage, &w->io_failed, &w->st);
    } else if (!w->io_failed) {
        size_t n = compress_frame(w->cctx, &w->out, &w->stage, &w->io_failed, &w->st);
        if (!w->io_failed)
            write_frame(w, &w->out, n, w->stage.len, &w->io_failed, &w->st);
    }
    w->stage.len = 0;
}

/* Adds bytes to the frame being staged, starting a new frame first when this one is big. */
static void stage_bytes(gmp_writer *w, const uint8_t *p, size_t n)
{
    if (w->stage.len && w->stage.len + n > FRAME_TARGET)
        emit_frame(w);
    if (bvec_reserve(&w->stage, n) < 0) {
        w->io_failed = 1;
        w->st.io_errno = ENOMEM;
        return;
    }
    memcpy(w->stage.p + w->stage.len, p, n);
    w->stage.len += n;
}

/* Stages definition bytes, split at record boundaries so that no frame grows past the target. */
static void stage_defs(gmp_writer *w, const uint8_t *p, size_t n)
{
    size_t start = 0, i = 0;
    /* The first definitions begin with the file's magic, which is not a record: walk the records
     * after it (definition types are 01-07, so a buffer starting with 'G' is the magic). */
    if (n >= GMP_TRACE_MAGIC_LEN && memcmp(p, GMP_TRACE_MAGIC, GMP_TRACE_MAGIC_LEN) == 0)
        i = GMP_TRACE_MAGIC_LEN;
    while (i < n) {
        uint64_t plen = 0;
        size_t lw = gmp_get_uvarint(p + i + 1, n - i - 1, &plen);
        size_t rl = 1 + lw + (size_t)plen;
        if (i + rl - start > FRAME_TARGET && i > start) {
            stage_bytes(w, p + start, i - start);
            emit_frame(w);
            start = i;
        }
        i += rl;
    }
    if (n > start)
        stage_bytes(w, p + start, n - start);
}

/* Stages one event buffer and accounts for what it holds. */
static void stage_buf(gmp_writer *w, gmp_buf *b)
{
    if (!b->len)
        return;
    stage_bytes(w, b->data, b->len);
    if (w->io_failed) {
        w->lost_io += b->events;
        return;
    }
    /* Counted as written once staged: a failure of the frame's write sets io_failed, and the END
     * record (which these totals feed) is then never written. */
    w->st.events += b->events;
    w->st.allocs += b->allocs;
    w->st.frees += b->frees;
    w->st.lost += b->lost;
}

static uint32_t own_tid(void)
{
    return 0; /* records of the profiler itself */
}

/* One collection: definitions, then every thread's buffers, then the writer's own records, then
 * SYNC. final: also LOST for what is pending and END. Called with wlock held (or single-threaded).
 */
static void run_cycle(gmp_writer *w, int final)
{
    pthread_mutex_lock(&w->olock);
    uint64_t frames_before = w->frames_out;
    uint64_t t_sync = gmp_clock_ns();
    gmp_buf *batch = NULL, *batch_tail = NULL;
    pthread_mutex_lock(&w->listlock);
    gmp_wthread **pp = &w->threads;
    uint64_t pend_lost = 0;
    while (*pp) {
        gmp_wthread *t = *pp;
        tlock(t);
        gmp_buf *list = t->full;
        gmp_buf *tail = t->full_tail;
        if (t->cur && t->cur->len) {
            if (tail)
                tail->next = t->cur;
            else
                list = t->cur;
            tail = t->cur;
            t->cur = NULL;
        }
        t->full = t->full_tail = NULL;
        int gone = t->released;
        if (t->max_ns > w->max_ns)
            w->max_ns = t->max_ns;
        if (final || gone) {
            pend_lost += t->lost_pending;
            t->lost_pending = 0;
        }
        tunlock(t);
        if (list) {
            if (batch_tail)
                batch_tail->next = list;
            else
                batch = list;
            batch_tail = tail;
        }
        if (gone) {
            *pp = t->next;
            w->released_accepted += t->accepted;
            w->released_lost += t->lost;
            if (t->cur)
                buf_give_back(w, t->cur);
            free(t);
        } else {
            pp = &t->next;
        }
    }
    pthread_mutex_unlock(&w->listlock);
    atomic_store(&w->full_pending, 0);

    pthread_mutex_lock(&w->dlock);
    bvec defs = w->defs;
    w->defs = (bvec){0};
    uint64_t sync_req = w->sync_req;
    w->sync_req = 0;
    pthread_mutex_unlock(&w->dlock);

    if (defs.len)
        stage_defs(w, defs.p, defs.len);
    free(defs.p);
    for (gmp_buf *b = batch; b; b = b->next)
        stage_buf(w, b);
    buf_give_back(w, batch);

    /* the writer's own records: losses reported by others, and END */
    uint64_t ext[8];
    int any_ext = 0;
    for (int i = 0; i < 8; i++) {
        ext[i] = atomic_exchange(&w->ext_lost[i], 0);
        atomic_fetch_add(&w->ext_taken, ext[i]);
        any_ext |= ext[i] != 0;
    }
    if (any_ext || pend_lost || final) {
        if (!w->own) {
            pthread_mutex_lock(&w->qlock);
            w->own = buf_take_locked(w);
            pthread_mutex_unlock(&w->qlock);
            if (!w->own) { /* every buffer is in use: make one outside the bound for the END */
                w->own = malloc(sizeof(gmp_buf) + 4096);
                if (w->own) {
                    memset(w->own, 0, sizeof(gmp_buf));
                    w->own->cap = 4096;
                    w->nbufs++;
                }
            }
        }
        gmp_buf *b = w->own;
        if (b) {
            /* the writer's own records follow every event: with callers' own times (importers,
             * tests) the clock may be earlier than their last event */
            uint64_t now = w->has_thread ? gmp_clock_ns() : 0;
            if (now <= w->max_ns)
                now = w->max_ns + 1; /* after a SYNC at the last event's time too */
            if (!now)
                now = gmp_clock_ns();
            uint64_t zero = 0;
            buf_prologue(b, own_tid(), &w->own_prev, now, &zero, 0);
            if (pend_lost) {
                gmp_rec lr = {.type = GMP_REC_LOST, .time_ns = now};
                lr.u.lost.count = pend_lost;
                lr.u.lost.reason = GMP_LOST_BUFFER_FULL;
                buf_encode(b, &w->own_prev, &lr);
            }
            for (unsigned i = 0; i < 8; i++) {
                if (!ext[i])
                    continue;
                gmp_rec lr = {.type = GMP_REC_LOST, .time_ns = now};
                lr.u.lost.count = ext[i];
                lr.u.lost.reason = i;
                buf_encode(b, &w->own_prev, &lr);
            }
            if (final) {
                stage_buf(w, b);
                gmp_rec er = {.type = GMP_REC_END, .time_ns = now};
                er.u.end.events = w->st.events;
                er.u.end.allocs = w->st.allocs;
                er.u.end.frees = w->st.frees;
                er.u.end.lost = w->st.lost;
                b->len = 0;
                b->events = b->allocs = b->frees = b->lost = 0;
                buf_prologue(b, own_tid(), &w->own_prev, now, &zero, 0);
                buf_encode(b, &w->own_prev, &er);
            }
            stage_buf(w, b);
            b->len = 0;
            b->events = b->allocs = b->frees = b->lost = 0;
        }
    }

    uint64_t sync_t =
        w->has_thread ? (t_sync > w->o.sync_lag_ns ? t_sync - w->o.sync_lag_ns : 0) : sync_req;
    if (sync_t && !final && (w->stage.len || w->frames_out != frames_before)) {
        gmp_rec sr = {.type = GMP_REC_SYNC};
        sr.u.sync.time_ns = sync_t;
        uint8_t tmp[16];
        uint64_t prev = 0;
        size_t n = gmp_encode(tmp, sizeof tmp, &sr, &prev);
        stage_bytes(w, tmp, n);
    }
    emit_frame(w);
    pthread_mutex_unlock(&w->olock);
}

static void *writer_main(void *arg)
{
    gmp_writer *w = arg;
    pthread_mutex_lock(&w->wlock);
    for (;;) {
        if (!w->stop && !atomic_load(&w->full_pending) && w->flush_req == w->flush_done) {
            if (w->o.flush_interval_ms) {
                struct timespec dl;
                add_deadline(&dl, w->o.flush_interval_ms * 1000u);
                pthread_cond_timedwait(&w->wcond, &w->wlock, &dl);
            } else {
                pthread_cond_wait(&w->wcond, &w->wlock);
            }
        }
        int stop = w->stop;
        uint64_t req = w->flush_req;
        pthread_mutex_unlock(&w->wlock);
        run_cycle(w, stop);
        pthread_mutex_lock(&w->wlock);
        w->flush_done = req;
        pthread_cond_broadcast(&w->donecond);
        if (stop)
            break;
    }
    pthread_mutex_unlock(&w->wlock);
    return NULL;
}

gmp_err gmp_writer_open(gmp_writer **out, int fd, const gmp_writer_opts *o, const gmp_rec_header *h)
{
    *out = NULL;
    if (!h || (fd < 0) == !(o && o->queue) || (o && o->queue && o->threaded))
        return GMP_ERR_ARG;
    gmp_writer *w = calloc(1, sizeof *w);
    if (!w)
        return GMP_ERR_NOMEM;
    if (o)
        w->o = *o;
    else
        gmp_writer_opts_default(&w->o);
    if (w->o.queue) { /* unframed: nothing to compress or checksum (emit_frame) */
        w->o.store = 1;
        w->o.compress_async = 0;
    }
    if (w->o.buffer_bytes < 4096)
        w->o.buffer_bytes = 4096;
    if (w->o.buffer_bytes > (16u << 20))
        w->o.buffer_bytes = 16u << 20;
    if (w->o.max_buffered_bytes < 2 * w->o.buffer_bytes)
        w->o.max_buffered_bytes = 2 * w->o.buffer_bytes;
    w->maxbufs = w->o.max_buffered_bytes / w->o.buffer_bytes;
    w->fd = fd;
    pthread_mutex_init(&w->wlock, NULL);
    pthread_mutex_init(&w->olock, NULL);
    pthread_mutex_init(&w->listlock, NULL);
    pthread_mutex_init(&w->qlock, NULL);
    pthread_mutex_init(&w->dlock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wcond, &ca);
    pthread_cond_init(&w->donecond, &ca);
    pthread_cond_init(&w->freecond, &ca);
    pthread_condattr_destroy(&ca);

    if (!w->o.store) { /* stored: nothing to compress, no zstd context */
        w->cctx = ZSTD_createCCtx();
        if (!w->cctx)
            goto nomem;
        ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, w->o.level);
        ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
        ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1);
    }
    w->can_write = 1;

    /* magic + HEADER open the definitions: the first frame starts with them */
    gmp_rec hr = {.type = GMP_REC_HEADER};
    hr.u.header = *h;
    if (!hr.u.header.format_version)
        hr.u.header.format_version = GMP_FORMAT_VERSION;
    if (!hr.u.header.min_reader_version)
        hr.u.header.min_reader_version = GMP_FORMAT_MIN_READER;
    if (bvec_reserve(&w->defs, GMP_TRACE_MAGIC_LEN) < 0)
        goto nomem;
    memcpy(w->defs.p, GMP_TRACE_MAGIC, GMP_TRACE_MAGIC_LEN);
    w->defs.len = GMP_TRACE_MAGIC_LEN;
    if (defs_append(w, &hr) < 0) {
        gmp_writer_close(w, NULL);
        return GMP_ERR_ARG;
    }

    /* The first frame (magic, HEADER) is written now, on the caller's thread: one small write at
     * start, so that a file that exists is always a readable trace, even when the program is
     * killed a moment later (before the writer thread's first cycle). */
    run_cycle(w, 0);
    if (!w->o.threaded && w->o.compress_async > 0) {
        pthread_mutex_init(&w->clk, NULL);
        pthread_cond_init(&w->ccond, NULL);
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_t ta; /* zstd works on the heap: a small stack, not 8 MB of address space */
        pthread_attr_init(&ta);
        pthread_attr_setstacksize(&ta, 256u << 10);
        for (int k = 0; k < w->o.compress_async && k < GMP_WRITER_MAX_HELPERS; k++) {
            struct cslot *c = &w->cs[k];
            c->w = w;
            c->cctx = w->o.store ? NULL : ZSTD_createCCtx();
            if (!c->cctx && !w->o.store)
                break;
            if (c->cctx) {
                ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, w->o.level);
                ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 1);
                ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 1);
            }
            if (pthread_create(&c->th, &ta, compress_main, c) != 0) {
                ZSTD_freeCCtx(c->cctx);
                c->cctx = NULL;
                break;
            }
            w->ncs++;
        }
        pthread_attr_destroy(&ta);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!w->ncs) { /* compressed on the caller's thread */
            pthread_mutex_destroy(&w->clk);
            pthread_cond_destroy(&w->ccond);
        }
    }
    if (w->o.threaded) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&w->thread, NULL, writer_main, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            w->o.threaded = 0;
        } else {
            w->has_thread = 1;
        }
    }
    *out = w;
    return GMP_OK;
nomem:
    gmp_writer_close(w, NULL);
    return GMP_ERR_NOMEM;
}

gmp_err gmp_writer_flush(gmp_writer *w, unsigned timeout_ms)
{
    if (!w || w->forgotten)
        return GMP_ERR_ARG;
    pthread_mutex_lock(&w->wlock);
    if (w->has_thread) {
        uint64_t want = ++w->flush_req;
        pthread_cond_signal(&w->wcond);
        struct timespec dl;
        add_deadline(&dl, timeout_ms * 1000u);
        while (w->flush_done < want && !w->stop) {
            if (pthread_cond_timedwait(&w->donecond, &w->wlock, &dl) == ETIMEDOUT)
                break;
        }
        pthread_mutex_unlock(&w->wlock);
    } else {
        pthread_mutex_unlock(&w->wlock);
        run_cycle(w, 0);
        pthread_mutex_lock(&w->olock);
        compress_wait(w);
        pthread_mutex_unlock(&w->olock);
    }
    pthread_mutex_lock(&w->olock);
    int failed = w->io_failed;
    pthread_mutex_unlock(&w->olock);
    return failed ? GMP_ERR_IO : GMP_OK;
}

void gmp_writer_sync(gmp_writer *w, uint64_t time_ns)
{
    if (!w || w->forgotten)
        return;
    pthread_mutex_lock(&w->dlock);
    if (time_ns > w->sync_req)
        w->sync_req = time_ns;
    pthread_mutex_unlock(&w->dlock);
    if (!w->has_thread)
        run_cycle(w, 0);
}

void gmp_writer_get_stats(gmp_writer *w, gmp_writer_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!w || w->forgotten)
        return;
    pthread_mutex_lock(&w->olock);
    pthread_mutex_lock(&w->listlock);
    uint64_t acc = w->released_accepted, lost = w->released_lost;
    for (gmp_wthread *t = w->threads; t; t = t->next) {
        tlock(t);
        acc += t->accepted;
        lost += t->lost;
        tunlock(t);
    }
    pthread_mutex_unlock(&w->listlock);
    *out = w->st;
    out->events = acc;
    out->lost = lost + w->lost_io + atomic_load(&w->ext_taken);
    for (int i = 0; i < 8; i++)
        out->lost += atomic_load(&w->ext_lost[i]);
    pthread_mutex_unlock(&w->olock);
}

gmp_err gmp_writer_finish(gmp_writer *w, gmp_writer_stats *stats_out)
{
    if (!w)
        return GMP_ERR_ARG;
    if (stats_out)
        memset(stats_out, 0, sizeof *stats_out);
    if (w->forgotten)
        return GMP_OK;
    pthread_mutex_lock(&w->wlock);
    int already = w->finished;
    w->finished = 1;
    pthread_mutex_unlock(&w->wlock);
    if (already)
        return GMP_ERR_ARG;
    gmp_err rc = GMP_OK;
    if (w->can_write) {
        atomic_store(&w->closed, 1);
        if (w->has_thread) {
            pthread_mutex_lock(&w->wlock);
            w->stop = 1;
            pthread_cond_signal(&w->wcond);
            pthread_mutex_unlock(&w->wlock);
            /* Bounded: a writer stuck on a hung file system must not hang the program's exit. */
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += 10;
            if (pthread_timedjoin_np(w->thread, NULL, &dl) != 0) {
                pthread_detach(w->thread);
                w->has_thread = 0;
                w->abandoned = 1;
                if (stats_out) {
                    gmp_writer_get_stats(w, stats_out);
                    stats_out->io_errno = ETIMEDOUT;
                }
                return GMP_ERR_IO; /* the END record may be missing; memory is kept */
            }
            w->has_thread = 0;
        } else {
            run_cycle(w, 1);
            if (w->ncs) {
                pthread_mutex_lock(&w->clk);
                compress_wait_locked(w, -1);
                w->cstop = 1;
                pthread_cond_broadcast(&w->ccond);
                pthread_mutex_unlock(&w->clk);
                for (int k = 0; k < w->ncs; k++) {
                    pthread_join(w->cs[k].th, NULL);
                    ZSTD_freeCCtx(w->cs[k].cctx);
                    free(w->cs[k].raw.p);
                    free(w->cs[k].out.p);
                    memset(&w->cs[k], 0, sizeof w->cs[k]);
                }
                w->ncs = 0;
                pthread_mutex_destroy(&w->clk);
                pthread_cond_destroy(&w->ccond);
            }
        }
        if (stats_out)
            gmp_writer_get_stats(w, stats_out);
        if (w->io_failed)
            rc = GMP_ERR_IO;
    }
    if (w->fd >= 0 && close(w->fd) < 0 && rc == GMP_OK)
        rc = GMP_ERR_IO;
    w->fd = -1;
    if (w->o.queue)
        gmp_tq_close_write(w->o.queue); /* the reader gets the end after the last frame */
    return rc;
}

gmp_err gmp_writer_close(gmp_writer *w, gmp_writer_stats *stats_out)
{
    if (!w)
        return GMP_ERR_ARG;
    if (w->forgotten)
        return GMP_OK;
    gmp_err rc = GMP_OK;
    if (!w->finished)
        rc = gmp_writer_finish(w, stats_out);
    else if (stats_out)
        gmp_writer_get_stats(w, stats_out);
    if (w->abandoned)
        return GMP_ERR_IO; /* its thread may still run: leak rather than free under it */
    /* free everything */
    gmp_wthread *t = w->threads;
    while (t) {
        gmp_wthread *n = t->next;
        free(t->cur);
        for (gmp_buf *b = t->full; b;) {
            gmp_buf *bn = b->next;
            free(b);
            b = bn;
        }
        free(t);
        t = n;
    }
    for (gmp_buf *b = w->free; b;) {
        gmp_buf *bn = b->next;
        free(b);
        b = bn;
    }
    free(w->own);
    itable_free(&w->strings);
    itable_free(&w->ranges);
    itable_free(&w->stacks);
    free(w->defs.p);
    free(w->stage.p);
    free(w->out.p);
    ZSTD_freeCCtx(w->cctx);
    pthread_mutex_destroy(&w->wlock);
    pthread_mutex_destroy(&w->olock);
    pthread_mutex_destroy(&w->listlock);
    pthread_mutex_destroy(&w->qlock);
    pthread_mutex_destroy(&w->dlock);
    pthread_cond_destroy(&w->wcond);
    pthread_cond_destroy(&w->donecond);
    pthread_cond_destroy(&w->freecond);
    free(w);
    return rc;
}

void gmp_writer_forget_after_fork(gmp_writer *w)
{
    if (!w)
        return;
    w->forgotten = 1;
    w->has_thread = 0;
    w->ncs = 0;
    /* the parent's file descriptor stays open in the child but is never written */
}
