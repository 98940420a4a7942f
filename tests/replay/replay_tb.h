/* replay_tb: a small trace builder for the replay tests and the report fixture. Writes a trace
 * with gmp_writer (no thread, explicit times) so that every number the replay derives from it is
 * known exactly. Header-only (static functions); failures abort the test program. */
#ifndef GMP_REPLAY_TB_H
#define GMP_REPLAY_TB_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_writer.h"

#define TB_KiB 1024ull
#define TB_MiB (1024ull * 1024)
#define TB_GiB (1024ull * TB_MiB)
#define TB_THREADS 4

typedef struct tb {
    gmp_writer *w;
    gmp_wthread *th[TB_THREADS];
    uint32_t tids[TB_THREADS];
    char path[256];
} tb;

static inline void tb_die(const char *what)
{
    fprintf(stderr, "trace builder: %s\n", what);
    exit(99);
}

/* Opens path (NULL: a temporary file) and starts a trace with header h, and nthreads writer
 * threads (at most TB_THREADS) with these tids (NULL: 100, 101, ...). */
static inline void tb_open_header(tb *b, const char *path, const gmp_rec_header *h,
                                  const uint32_t *tids, int nthreads)
{
    memset(b, 0, sizeof *b);
    int fd;
    if (path) {
        snprintf(b->path, sizeof b->path, "%s", path);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    } else {
        snprintf(b->path, sizeof b->path, "/tmp/gmp_test_replay_XXXXXX");
        fd = mkstemp(b->path);
    }
    if (fd < 0)
        tb_die("cannot create the trace file");
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    if (gmp_writer_open(&b->w, fd, &o, h) != GMP_OK)
        tb_die("gmp_writer_open failed");
    if (nthreads > TB_THREADS)
        tb_die("too many threads");
    for (int i = 0; i < nthreads; i++) {
        b->tids[i] = tids ? tids[i] : 100 + (uint32_t)i;
        b->th[i] = gmp_writer_thread(b->w, b->tids[i]);
        if (!b->th[i])
            tb_die("gmp_writer_thread failed");
    }
}

/* A trace at path (NULL: a temporary file) whose header has these options ("stacks=none" for
 * tb_open; "import=pytorch-snapshot" imitates an imported snapshot). */
static inline void tb_open_opts(tb *b, const char *path, const char *options)
{
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = (gmp_str){"replay-tests", 12};
    h.pid = 4242;
    h.ppid = 1;
    h.hostname = (gmp_str){"testhost", 8};
    h.cmdline = (gmp_str){"python\0train.py", 15};
    h.rank = -1;
    h.start_wall_ns = 1700000000000000000ull;
    h.start_trace_ns = 1000000000ull;
    h.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    h.options = (gmp_str){options, (uint32_t)strlen(options)};
    tb_open_header(b, path, &h, NULL, TB_THREADS);
}

static inline void tb_open(tb *b, const char *path)
{
    tb_open_opts(b, path, "stacks=none");
}

/* The id of the n bytes at s (they may hold any byte, NUL included). */
static inline uint32_t tb_str_n(tb *b, const char *s, size_t n)
{
    uint32_t id = gmp_writer_string(b->w, s, n);
    if (!id)
        tb_die("gmp_writer_string failed");
    return id;
}

static inline uint32_t tb_str(tb *b, const char *s)
{
    return tb_str_n(b, s, strlen(s));
}

static inline void tb_define(tb *b, const gmp_rec *d)
{
    if (gmp_writer_define(b->w, d) != GMP_OK)
        tb_die("gmp_writer_define failed");
}

/* The range path id of "a/b/c" (every node defined). "" gives 0. */
static inline uint32_t tb_range(tb *b, const char *path)
{
    uint32_t id = 0;
    const char *p = path;
    while (*p) {
        const char *q = strchr(p, '/');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        uint32_t name = gmp_writer_string(b->w, p, n);
        id = gmp_writer_range(b->w, id, 0, name);
        if (!id)
            tb_die("gmp_writer_range failed");
        p += n;
        if (*p == '/')
            p++;
    }
    return id;
}

static inline void tb_device(tb *b, uint32_t id, const char *name, uint64_t total)
{
    gmp_rec d;
    memset(&d, 0, sizeof d);
    d.type = GMP_REC_DEVICE;
    d.u.device.id = id;
    d.u.device.name = (gmp_str){name, (uint32_t)strlen(name)};
    d.u.device.total_bytes = total;
    d.u.device.cc_major = 9;
    tb_define(b, &d);
}

static inline void tb_module(tb *b, uint32_t id, const char *path, uint64_t base, uint64_t lo,
                             uint64_t size)
{
    gmp_rec d;
    memset(&d, 0, sizeof d);
    d.type = GMP_REC_MODULE;
    d.u.module.id = id;
    d.u.module.path = (gmp_str){path, (uint32_t)strlen(path)};
    d.u.module.base = base;
    d.u.module.lo = lo;
    d.u.module.size = size;
    tb_define(b, &d);
}

static inline void tb_event(tb *b, int th, gmp_rec *r)
{
    if (!r->time_ns)
        tb_die("events need an explicit time");
    if (gmp_wthread_event(b->th[th], r) != 0)
        tb_die("gmp_wthread_event failed");
}

typedef struct tb_mem {
    int32_t device;
    uint32_t kind, flags, api, range, stack;
    uint64_t address, size, handle, stream;
} tb_mem;

static inline void tb_memrec(tb *b, int th, uint32_t type, uint64_t t, const tb_mem *m)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.time_ns = t;
    r.u.mem.device = m->device;
    r.u.mem.kind = m->kind;
    r.u.mem.flags = m->flags;
    r.u.mem.api = m->api;
    r.u.mem.address = m->address;
    r.u.mem.size = m->size;
    r.u.mem.stream = m->stream;
    r.u.mem.stack = m->stack;
    r.u.mem.range = m->range;
    r.u.mem.handle = m->handle;
    r.u.mem.result = (m->flags & GMP_MEMF_FAILED) ? 2 : 0;
    tb_event(b, th, &r);
}

/* Shorthands: ALLOC / FREE of a kind on a device at address. */
static inline void tb_alloc(tb *b, int th, uint64_t t, int32_t dev, uint32_t kind, uint64_t addr,
                            uint64_t size, uint32_t api, uint32_t range, uint32_t stack)
{
    tb_mem m = {dev, kind, 0, api, range, stack, addr, size, 0, 0};
    tb_memrec(b, th, GMP_REC_ALLOC, t, &m);
}

static inline void tb_free(tb *b, int th, uint64_t t, int32_t dev, uint32_t kind, uint64_t addr,
                           uint64_t size, uint32_t api)
{
    tb_mem m = {dev, kind, 0, api, 0, 0, addr, size, 0, 0};
    tb_memrec(b, th, GMP_REC_FREE, t, &m);
}

static inline void tb_range_ev(tb *b, int th, uint32_t type, uint64_t t, uint32_t range,
                               uint64_t handle)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.time_ns = t;
    r.u.rev.range = range;
    r.u.rev.handle = handle;
    tb_event(b, th, &r);
}

static inline void tb_pool(tb *b, int th, uint64_t t, int32_t dev, uint32_t op, uint64_t pool,
                           uint64_t value)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_POOL;
    r.time_ns = t;
    r.u.pool.device = dev;
    r.u.pool.op = op;
    r.u.pool.pool = pool;
    r.u.pool.value = value;
    tb_event(b, th, &r);
}

static inline void tb_oom(tb *b, int th, uint64_t t, int32_t dev, uint32_t api, uint64_t req,
                          uint32_t range, uint32_t stack)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_OOM;
    r.time_ns = t;
    r.u.oom.device = dev;
    r.u.oom.api = api;
    r.u.oom.requested = req;
    r.u.oom.range = range;
    r.u.oom.stack = stack;
    r.u.oom.result = 2;
    r.u.oom.free_bytes = 1 * TB_MiB;
    tb_event(b, th, &r);
}

static inline void tb_sample(tb *b, int th, uint64_t t, int32_t dev, uint64_t free_bytes,
                             uint64_t total, uint64_t process_used)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_SAMPLE;
    r.time_ns = t;
    r.u.sample.device = dev;
    r.u.sample.free_bytes = free_bytes;
    r.u.sample.total_bytes = total;
    r.u.sample.process_used = process_used;
    tb_event(b, th, &r);
}

/* A NOTICE of n bytes (any byte, NUL included). */
static inline void tb_notice(tb *b, int th, uint64_t t, uint32_t severity, const char *msg,
                             size_t n)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_NOTICE;
    r.time_ns = t;
    r.u.notice.severity = severity;
    r.u.notice.message = (gmp_str){msg, (uint32_t)n};
    tb_event(b, th, &r);
}

static inline void tb_close(tb *b)
{
    for (int i = 0; i < TB_THREADS; i++)
        gmp_wthread_release(b->th[i]);
    if (gmp_writer_close(b->w, NULL) != GMP_OK)
        tb_die("gmp_writer_close failed");
    b->w = NULL;
}

#endif
