/* Writer -> reader round trips: every record type through gmp_writer (unthreaded) and back, field
 * by field; and four producer threads through the threaded writer, read back in time order with
 * nothing late, per-thread order kept, END totals matching the writer's own counts. The unthreaded
 * writer's compression helpers (compress_async, what importers use) write the same bytes as none,
 * and a file that cannot be written fails with them too, without hanging (also run under TSan).
 * Stored frames (o.store, gmp_writer_stored_frame): checked against libzstd's decoder and the zstd
 * command-line tool (outside oracles of the frame format and of its XXH64 checksum), at block
 * boundaries (128 KiB exactly, empty content); a stored trace holds the same bytes as a compressed
 * one and reads back with our reader. A trace through a queue (gmp_tq.h, no file) reads back as
 * the same trace from a file, record by record; a reader that stops early does not hang the
 * writer; the queue's order, bound, end and closing. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "gmp_reader.h"
#include "gmp_tq.h"
#include "gmp_writer.h"
#include "trace_build.h"

static int tmpfile_fd(char *path)
{
    strcpy(path, "/tmp/gmp_rw_testXXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    return fd;
}

/* A writer without its thread (records written by the caller) into a new file at path. */
static gmp_writer *open_unthreaded(char *path)
{
    int fd = tmpfile_fd(path);
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    gmp_rec h = tb_header();
    gmp_writer *w;
    assert_int_equal(gmp_writer_open(&w, fd, &o, &h.u.header), GMP_OK);
    return w;
}

static void test_every_record_through_writer(void **state)
{
    (void)state;
    char path[64];
    gmp_writer *w = open_unthreaded(path);
    gmp_rec h = tb_header(); /* what open_unthreaded wrote */
    uint32_t api = gmp_writer_string(w, "cudaMalloc", 10);
    uint32_t s_train = gmp_writer_string(w, "train", 5);
    uint32_t s_fwd = gmp_writer_string(w, "forward", 7);
    uint32_t s_file = gmp_writer_string(w, "model.py", 8);
    assert_int_equal(gmp_writer_string(w, "train", 5), s_train);
    uint32_t r1 = gmp_writer_range(w, 0, 0, s_train);
    uint32_t r2 = gmp_writer_range(w, r1, 0, s_fwd);
    uint32_t k1 = gmp_writer_stack_native(w, 0, 0x401234);
    uint32_t k2 = gmp_writer_stack_python(w, k1, s_file, s_fwd, 42);
    gmp_rec defs[3];
    memset(defs, 0, sizeof defs);
    defs[0].type = GMP_REC_DEVICE;
    defs[0].u.device.id = 1;
    defs[0].u.device.name = (gmp_str){"GPU 1", 5};
    defs[0].u.device.uuid[3] = 7;
    defs[0].u.device.total_bytes = 1ull << 34;
    defs[0].u.device.cc_major = 8;
    defs[0].u.device.cc_minor = 6;
    defs[1].type = GMP_REC_THREAD;
    defs[1].u.thread.tid = 77;
    defs[1].u.thread.name = (gmp_str){"worker", 6};
    defs[2].type = GMP_REC_MODULE;
    defs[2].u.module.id = 1;
    defs[2].u.module.path = (gmp_str){"/lib/x.so", 9};
    defs[2].u.module.base = 0x7000;
    defs[2].u.module.lo = 0x8000;
    defs[2].u.module.size = 0x1000;
    defs[2].u.module.build_id = (gmp_str){"\xab\xcd", 2};
    for (int i = 0; i < 3; i++)
        assert_int_equal(gmp_writer_define(w, &defs[i]), GMP_OK);

    static const unsigned types[] = {
        GMP_REC_RANGE_PUSH, GMP_REC_RANGE_START, GMP_REC_MARK,     GMP_REC_ALLOC,    GMP_REC_FREE,
        GMP_REC_OOM,        GMP_REC_POOL,        GMP_REC_SAMPLE,   GMP_REC_RESOURCE, GMP_REC_ALERT,
        GMP_REC_NOTICE,     GMP_REC_RANGE_END,   GMP_REC_RANGE_POP};
    enum { NT = sizeof types / sizeof types[0] };
    gmp_rec evs[NT];
    gmp_wthread *t = gmp_writer_thread(w, 77);
    assert_non_null(t);
    uint64_t rng = 3;
    for (size_t i = 0; i < NT; i++) {
        tb_random_rec(&evs[i], types[i], &rng, 0);
        switch (types[i]) {
        case GMP_REC_RANGE_PUSH:
        case GMP_REC_RANGE_POP:
        case GMP_REC_MARK: evs[i].u.rev.range = r2; break;
        case GMP_REC_RANGE_START: evs[i].u.rev.range = r1; break;
        case GMP_REC_ALLOC:
        case GMP_REC_FREE:
            evs[i].u.mem.api = api;
            evs[i].u.mem.stack = k2;
            evs[i].u.mem.range = r2;
            break;
        case GMP_REC_OOM:
            evs[i].u.oom.api = api;
            evs[i].u.oom.stack = k1;
            evs[i].u.oom.range = r1;
            break;
        case GMP_REC_ALERT: evs[i].u.alert.range = r1; break;
        default: break;
        }
        evs[i].time_ns = 1000 + 10 * i;
        evs[i].tid = 77;
        gmp_rec copy = evs[i];
        assert_int_equal(gmp_wthread_event(t, &copy), 0);
    }
    gmp_writer_lost(w, 4, GMP_LOST_CUPTI_DROPPED);
    gmp_wthread_release(t);
    gmp_writer_stats ws;
    assert_int_equal(gmp_writer_close(w, &ws), GMP_OK);

    gmp_reader *r;
    gmp_reader_opts ro = {0, 0};
    assert_int_equal(gmp_reader_open(&r, path, &ro), GMP_OK);
    tb_out out = {0};
    assert_int_equal(tb_read_all(r, &out), GMP_END);
    size_t ei = 0;
    int saw_lost = 0, saw_end = 0;
    for (size_t i = 0; i < out.n; i++) {
        const gmp_rec *x = &out.recs[i];
        if (x->type == GMP_REC_HEADER)
            assert_true(tb_rec_equal(x, &h));
        else if (x->type == GMP_REC_DEVICE)
            assert_true(tb_rec_equal(x, &defs[0]));
        else if (x->type == GMP_REC_THREAD)
            assert_true(tb_rec_equal(x, &defs[1]));
        else if (x->type == GMP_REC_MODULE)
            assert_true(tb_rec_equal(x, &defs[2]));
        else if (x->type == GMP_REC_LOST) {
            assert_int_equal(x->u.lost.count, 4);
            assert_int_equal(x->u.lost.reason, GMP_LOST_CUPTI_DROPPED);
            saw_lost = 1;
        } else if (x->type == GMP_REC_END) {
            saw_end = 1;
        } else if (gmp_rec_is_event(x->type)) {
            assert_true(ei < NT);
            assert_true(tb_rec_equal(x, &evs[ei]));
            ei++;
        }
    }
    assert_int_equal(ei, NT);
    assert_true(saw_lost && saw_end);
    char pathbuf[64];
    gmp_reader_range_path(r, r2, pathbuf, sizeof pathbuf);
    assert_string_equal(pathbuf, "train/forward");
    assert_int_equal(gmp_reader_stack(r, k2)->line, 42);
    assert_int_equal(gmp_reader_stack(r, k2)->parent, k1);
    char line[512];
    assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 0); /* 4 lost */
    assert_non_null(strstr(line, "END totals match"));
    assert_non_null(strstr(line, "4 events lost"));
    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    assert_int_equal(ws.events, NT);
    assert_int_equal(st->end.events, NT + 1); /* and the LOST record */
    assert_int_equal(st->late_events, 0);
    tb_out_free(&out);
    gmp_reader_close(r);
    unlink(path);
}

#define THREADS 4
#define PER_THREAD 50000

typedef struct prod {
    gmp_writer *w;
    uint32_t tid, api, range;
    uint64_t written;
} prod;

static void *producer(void *arg)
{
    prod *p = arg;
    gmp_wthread *t = gmp_writer_thread(p->w, p->tid);
    for (uint64_t i = 0; i < PER_THREAD; i++) {
        gmp_rec e;
        memset(&e, 0, sizeof e);
        e.type = i % 2 ? GMP_REC_FREE : GMP_REC_ALLOC;
        e.u.mem.kind = GMP_MEM_DEVICE;
        e.u.mem.api = p->api;
        e.u.mem.range = p->range;
        e.u.mem.address = 0x7f0000000000ull + (i / 2) * 4096;
        e.u.mem.size = 4096;
        e.u.mem.correlation = i + 1; /* per-thread sequence */
        if (gmp_wthread_event(t, &e) == 0)
            p->written++;
    }
    gmp_wthread_release(t);
    return NULL;
}

static void test_threaded_writer_time_order(void **state)
{
    (void)state;
    char path[64];
    int fd = tmpfile_fd(path);
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.buffer_bytes = 4096;
    o.flush_interval_ms = 2;
    o.wait_us = 200000;
    o.level = 1;
    gmp_rec h = tb_header();
    gmp_writer *w;
    assert_int_equal(gmp_writer_open(&w, fd, &o, &h.u.header), GMP_OK);
    prod p[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].w = w;
        p[i].tid = 5000 + (uint32_t)i;
        char name[16];
        snprintf(name, sizeof name, "layer%d", i);
        p[i].api = gmp_writer_string(w, "cudaMalloc", 10);
        p[i].range = gmp_writer_range(w, 0, 0, gmp_writer_string(w, name, strlen(name)));
        assert_int_equal(pthread_create(&th[i], NULL, producer, &p[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    gmp_writer_stats ws;
    assert_int_equal(gmp_writer_close(w, &ws), GMP_OK);

    gmp_reader *r;
    gmp_reader_opts ro = {0, 0};
    assert_int_equal(gmp_reader_open(&r, path, &ro), GMP_OK);
    const gmp_rec *x;
    gmp_err e;
    uint64_t last_t = 0, seq[THREADS] = {0}, n = 0;
    while ((e = gmp_reader_next(r, &x)) == GMP_OK) {
        if (x->type != GMP_REC_ALLOC && x->type != GMP_REC_FREE)
            continue;
        assert_true(x->time_ns >= last_t);
        last_t = x->time_ns;
        assert_true(x->tid >= 5000 && x->tid < 5000 + THREADS);
        uint64_t *s = &seq[x->tid - 5000];
        assert_true(x->u.mem.correlation > *s); /* per-thread order kept */
        *s = x->u.mem.correlation;
        n++;
    }
    assert_int_equal(e, GMP_END);
    uint64_t written = 0;
    for (int i = 0; i < THREADS; i++)
        written += p[i].written;
    assert_int_equal(n, written);
    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    assert_int_equal(st->late_events, 0);
    assert_int_equal(st->has_end, 1);
    assert_int_equal(st->end.allocs + st->end.frees, written);
    assert_int_equal(st->bytes_read, ws.bytes_written);
    assert_true(st->records[GMP_REC_SYNC] > 0);
    char line[512];
    int complete = gmp_reader_completeness(r, line, sizeof line);
    assert_int_equal(complete, ws.lost == 0);
    if (!complete)
        assert_non_null(strstr(line, "END totals match"));
    gmp_reader_close(r);
    unlink(path);
}

/* Writes n events with explicit times through an unthreaded writer with `helpers` compression
 * helpers into fd (closed); returns what gmp_writer_close returned, with its stats. Enough events
 * for several frames (the writer starts a new one every 4 MiB of raw bytes). */
static gmp_err write_unthreaded_q(int fd, gmp_tq *q, int helpers, int store, uint64_t n,
                                  gmp_writer_stats *ws)
{
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    o.level = 1;
    o.compress_async = helpers;
    o.store = store;
    o.queue = q;
    gmp_rec h = tb_header();
    gmp_writer *w;
    if (gmp_writer_open(&w, fd, &o, &h.u.header) != GMP_OK)
        return GMP_ERR_IO;
    uint32_t api = gmp_writer_string(w, "cudaMalloc", 10);
    gmp_wthread *t = gmp_writer_thread(w, 1);
    uint64_t x = 88172645463325252ull; /* xorshift: sizes and addresses that do not compress away */
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        gmp_rec e;
        memset(&e, 0, sizeof e);
        e.type = i % 2 ? GMP_REC_FREE : GMP_REC_ALLOC;
        e.time_ns = 1000 + i * 10;
        e.u.mem.kind = GMP_MEM_DEVICE;
        e.u.mem.api = api;
        e.u.mem.address = 0x7f0000000000ull + (x & 0xffffff00u);
        e.u.mem.size = (x >> 40) & 0xfffff;
        e.u.mem.correlation = i + 1;
        (void)gmp_wthread_event(t, &e);
        if (i % 8192 == 8191)
            gmp_writer_sync(w, e.time_ns);
    }
    gmp_wthread_release(t);
    return gmp_writer_close(w, ws);
}

static gmp_err write_unthreaded_opt(int fd, int helpers, int store, uint64_t n,
                                    gmp_writer_stats *ws)
{
    return write_unthreaded_q(fd, NULL, helpers, store, n, ws);
}

static gmp_err write_unthreaded(int fd, int helpers, uint64_t n, gmp_writer_stats *ws)
{
    return write_unthreaded_opt(fd, helpers, 0, n, ws);
}

static void test_compress_helpers_same_bytes(void **state)
{
    (void)state;
    enum { N = 400000 };
    char base[64], path[64];
    gmp_writer_stats ws0, ws;
    assert_int_equal(write_unthreaded(tmpfile_fd(base), 0, N, &ws0), GMP_OK);
    assert_true(ws0.frames >= 3); /* several frames, or the helpers would have nothing to share */
    FILE *f0 = fopen(base, "rb");
    assert_non_null(f0);
    static const int helpers[] = {1, 2, 4};
    for (size_t k = 0; k < sizeof helpers / sizeof helpers[0]; k++) {
        assert_int_equal(write_unthreaded(tmpfile_fd(path), helpers[k], N, &ws), GMP_OK);
        assert_int_equal(ws.frames, ws0.frames);
        assert_int_equal(ws.bytes_written, ws0.bytes_written);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        rewind(f0);
        int a, b;
        do {
            a = fgetc(f0);
            b = fgetc(f);
            assert_int_equal(a, b);
        } while (a != EOF);
        fclose(f);
        unlink(path);
    }
    fclose(f0);
    unlink(base);
}

static void test_compress_helpers_write_failure(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* writes to the closed pipe fail with EPIPE */
    for (int store = 0; store <= 1; store++) {
        for (int helpers = 0; helpers <= 2; helpers += 2) {
            int p[2];
            assert_int_equal(pipe(p), 0);
            close(p[0]);
            gmp_writer_stats ws;
            memset(&ws, 0, sizeof ws);
            assert_int_equal(write_unthreaded_opt(p[1], helpers, store, 400000, &ws), GMP_ERR_IO);
            assert_int_equal(ws.io_errno, EPIPE);
        }
    }
}

static uint8_t *read_whole(const char *path, size_t *n)
{
    uint8_t *p = tb_read_file(path, n);
    assert_non_null(p);
    return p;
}

/* The content of every zstd frame of f[0..n) concatenated, by libzstd (tb_zstd_content). */
static uint8_t *zstd_content(const uint8_t *f, size_t n, size_t *out_n, size_t *frames)
{
    uint8_t *c = tb_zstd_content(f, n, out_n, frames);
    assert_non_null(c);
    return c;
}

/* `zstd -t -q path` exits 0 (the zstd command-line tool, an outside decoder), when it is
 * installed (it is a dependency: scripts/install-deps.sh). */
static void zstd_cli_ok(const char *path, int want_ok)
{
    if (system("command -v zstd >/dev/null 2>&1") != 0) {
        fprintf(stderr, "zstd command not found: checked with libzstd only\n");
        return;
    }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "zstd -t -q %s 2>/dev/null", path);
    int rc = system(cmd);
    if (want_ok)
        assert_int_equal(rc, 0);
    else
        assert_int_not_equal(rc, 0);
}

static void test_stored_frames_by_zstd(void **state)
{
    (void)state;
    enum { B = 128 << 10 };
    static const size_t lens[] = {0,  1,  3,   4,     7, 8,     31,    32,        33,
                                  63, 64, 100, B - 1, B, B + 1, 2 * B, 2 * B + 5, 40 * B + 17};
    size_t maxlen = 40 * B + 17;
    uint8_t *src = malloc(maxlen);
    assert_non_null(src);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < maxlen; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        src[i] = (uint8_t)(x >> 24);
    }
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        char path[64];
        int fd = tmpfile_fd(path);
        assert_int_equal(gmp_writer_stored_frame(fd, src, lens[k]), 0);
        assert_int_equal(gmp_writer_stored_frame(fd, src + 1, lens[k] / 2), 0);
        close(fd);
        size_t n, cn, frames;
        uint8_t *f = read_whole(path, &n);
        size_t nb0 = lens[k] ? (lens[k] + B - 1) / B : 1;
        size_t nb1 = lens[k] / 2 ? (lens[k] / 2 + B - 1) / B : 1;
        /* header 9, 3 per block, the bytes as they are, checksum 4 */
        assert_int_equal(n, 9 + 3 * nb0 + lens[k] + 4 + 9 + 3 * nb1 + lens[k] / 2 + 4);
        uint8_t *c = zstd_content(f, n, &cn, &frames);
        assert_int_equal(frames, 2);
        assert_int_equal(cn, lens[k] + lens[k] / 2);
        assert_memory_equal(c, src, lens[k]);
        if (lens[k] / 2)
            assert_memory_equal(c + lens[k], src + 1, lens[k] / 2);
        zstd_cli_ok(path, 1);
        /* a wrong checksum is noticed by both: ours is the one they compute */
        f[9 + 3 * nb0 + lens[k]] ^= 0x40;
        assert_true(ZSTD_isError(ZSTD_decompress(c, lens[k] + 1, f, 9 + 3 * nb0 + lens[k] + 4)));
        fd = open(path, O_WRONLY | O_TRUNC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, f, n), (ssize_t)n);
        close(fd);
        zstd_cli_ok(path, 0);
        free(c);
        free(f);
        unlink(path);
    }
    free(src);
}

/* A stored trace holds what the compressed one holds (libzstd's decoding of both), and our reader
 * reads it to its END with the writer's totals. */
static void test_stored_trace_same_content(void **state)
{
    (void)state;
    enum { N = 300000 };
    char zpath[64], spath[64], hpath[64];
    gmp_writer_stats wz, ws, wh;
    assert_int_equal(write_unthreaded_opt(tmpfile_fd(zpath), 0, 0, N, &wz), GMP_OK);
    assert_int_equal(write_unthreaded_opt(tmpfile_fd(spath), 0, 1, N, &ws), GMP_OK);
    /* stored frames written by helpers (compress_async): the same file */
    assert_int_equal(write_unthreaded_opt(tmpfile_fd(hpath), 2, 1, N, &wh), GMP_OK);
    assert_int_equal(wh.bytes_written, ws.bytes_written);
    assert_int_equal(wh.frames, ws.frames);
    assert_true(ws.frames >= 3);
    assert_int_equal(ws.frames, wz.frames);
    assert_int_equal(ws.bytes_raw, wz.bytes_raw);
    assert_true(ws.bytes_written > ws.bytes_raw && ws.bytes_written > 2 * wz.bytes_written);
    size_t zn, sn, zc, sc, zf, sf, hn;
    uint8_t *z = read_whole(zpath, &zn), *s = read_whole(spath, &sn), *h = read_whole(hpath, &hn);
    assert_int_equal(sn, ws.bytes_written);
    assert_int_equal(hn, sn);
    assert_memory_equal(h, s, sn);
    free(h);
    unlink(hpath);
    uint8_t *zcont = zstd_content(z, zn, &zc, &zf), *scont = zstd_content(s, sn, &sc, &sf);
    assert_int_equal(zf, sf);
    assert_int_equal(zc, sc);
    assert_int_equal(sc, ws.bytes_raw);
    assert_memory_equal(zcont, scont, zc);
    zstd_cli_ok(spath, 1);
    free(z);
    free(s);
    free(zcont);
    free(scont);

    gmp_reader *r;
    gmp_reader_opts ro = {0, 0};
    assert_int_equal(gmp_reader_open(&r, spath, &ro), GMP_OK);
    const gmp_rec *x;
    gmp_err e;
    uint64_t events = 0, prev_t = 0;
    while ((e = gmp_reader_next(r, &x)) == GMP_OK) {
        if (x->type != GMP_REC_ALLOC && x->type != GMP_REC_FREE)
            continue;
        assert_int_equal(x->u.mem.correlation, events + 1);
        assert_true(x->time_ns >= prev_t);
        prev_t = x->time_ns;
        events++;
    }
    assert_int_equal(e, GMP_END);
    assert_int_equal(events, N);
    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    assert_int_equal(st->has_end, 1);
    assert_int_equal(st->end.events, N);
    assert_int_equal(st->bytes_read, ws.bytes_written);
    gmp_reader_close(r);
    unlink(zpath);
    unlink(spath);
}

/* gmp_writer_stack_python_new defines a node without a lookup: the next id, among those of
 * gmp_writer_stack_python; a record with its fields; a later lookup of the same key does not find
 * it (a new node), while the nodes defined with lookups are still found. */
static void test_stack_python_new(void **state)
{
    (void)state;
    char path[64];
    gmp_writer *w = open_unthreaded(path);
    uint32_t f = gmp_writer_string(w, "m.py", 4), fn = gmp_writer_string(w, "run", 3);
    uint32_t a = gmp_writer_stack_python(w, 0, f, fn, 1);
    uint32_t b = gmp_writer_stack_python_new(w, a, f, fn, 2);
    uint32_t c = gmp_writer_stack_python_new(w, b, fn, f, 3);
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(c, 3);
    assert_int_equal(gmp_writer_stack_python(w, 0, f, fn, 1), a);     /* still found */
    assert_int_equal(gmp_writer_stack_python(w, a, f, fn, 2), 4);     /* not found: a new node */
    assert_int_equal(gmp_writer_stack_python(w, a, f, fn, 2), 4);     /* which is found */
    assert_int_equal(gmp_writer_stack_python_new(w, 0, f, fn, 9), 5); /* ids go on */
    gmp_wthread *t = gmp_writer_thread(w, 1);
    gmp_rec e;
    memset(&e, 0, sizeof e);
    e.type = GMP_REC_ALLOC;
    e.time_ns = 5000;
    e.u.mem.kind = GMP_MEM_DEVICE;
    e.u.mem.address = 0x1000;
    e.u.mem.size = 64;
    e.u.mem.stack = c;
    assert_int_equal(gmp_wthread_event(t, &e), 0);
    gmp_wthread_release(t);
    assert_int_equal(gmp_writer_close(w, NULL), GMP_OK);

    gmp_reader *r;
    gmp_reader_opts ro = {0, 0};
    assert_int_equal(gmp_reader_open(&r, path, &ro), GMP_OK);
    const gmp_rec *x;
    gmp_err err;
    int stacks = 0, allocs = 0;
    while ((err = gmp_reader_next(r, &x)) == GMP_OK) {
        if (x->type == GMP_REC_ALLOC) {
            assert_int_equal(x->u.mem.stack, c);
            allocs++;
        }
    }
    assert_int_equal(err, GMP_END);
    assert_int_equal(allocs, 1);
    for (uint32_t id = 1; id <= 5; id++) {
        const gmp_rec_stack *k = gmp_reader_stack(r, id);
        assert_non_null(k);
        stacks++;
        if (id == 3) {
            assert_int_equal(k->parent, b);
            assert_int_equal(k->kind, GMP_FRAME_PYTHON);
            assert_int_equal(k->file, fn);
            assert_int_equal(k->function, f);
            assert_int_equal(k->line, 3);
        }
    }
    assert_int_equal(stacks, 5);
    assert_null(gmp_reader_stack(r, 6));
    gmp_reader_close(r);
    unlink(path);
}

/* ---- the queue between a writer and a reader of one process (gmp_tq.h) ---- */

typedef struct qwriter {
    gmp_tq *q;
    uint64_t n;
    gmp_err rc;
    gmp_writer_stats ws;
} qwriter;

static void *qwriter_main(void *arg)
{
    qwriter *a = arg;
    a->rc = write_unthreaded_q(-1, a->q, 0, 1, a->n, &a->ws);
    return NULL;
}

/* The records of a trace written into a queue (small: the writer waits for the reader, on its
 * thread) and read from it, with read-ahead, are those of the same trace written stored into a
 * file and read from there: every record, field by field, the stats and the completeness line. */
static void test_queue_same_records(void **state)
{
    (void)state;
    enum { N = 300000 };
    char spath[64];
    gmp_writer_stats ws;
    assert_int_equal(write_unthreaded_opt(tmpfile_fd(spath), 0, 1, N, &ws), GMP_OK);
    gmp_tq *q = gmp_tq_new(64 << 10);
    assert_non_null(q);
    qwriter a = {q, N, GMP_ERR_ARG, {0}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, qwriter_main, &a), 0);
    gmp_reader *rf, *rq;
    gmp_reader_opts ro = {0, 0};
    assert_int_equal(gmp_reader_open(&rf, spath, &ro), GMP_OK);
    assert_int_equal(gmp_reader_open_queue(&rq, q, &ro), GMP_OK);
    gmp_tq_unref(q); /* the reader and the writer's thread hold it */
    assert_int_equal(gmp_reader_readahead(rq, 0), GMP_OK);
    const gmp_rec *x, *y;
    gmp_err ef, eq;
    uint64_t n = 0, events = 0;
    for (;;) {
        ef = gmp_reader_next(rf, &x);
        eq = gmp_reader_next(rq, &y);
        assert_int_equal(eq, ef);
        if (ef != GMP_OK)
            break;
        n++;
        assert_int_equal(y->type, x->type);
        assert_int_equal(y->time_ns, x->time_ns);
        assert_int_equal(y->tid, x->tid);
        if (x->type == GMP_REC_ALLOC || x->type == GMP_REC_FREE) {
            assert_memory_equal(&y->u.mem, &x->u.mem, sizeof x->u.mem);
            events++;
        } else if (x->type == GMP_REC_STRING) {
            assert_int_equal(y->u.string.id, x->u.string.id);
            assert_int_equal(y->u.string.value.len, x->u.string.value.len);
            assert_memory_equal(y->u.string.value.ptr, x->u.string.value.ptr,
                                x->u.string.value.len);
        }
    }
    assert_int_equal(ef, GMP_END);
    assert_int_equal(events, N);
    assert_true(n > N);
    const gmp_reader_stats *sf = gmp_reader_get_stats(rf), *sq = gmp_reader_get_stats(rq);
    assert_memory_equal(sq->records, sf->records, sizeof sf->records);
    assert_int_equal(sq->events, sf->events);
    assert_int_equal(sq->frames, sf->frames);
    assert_int_equal(sq->has_end, 1);
    assert_int_equal(sq->end.events, N);
    assert_int_equal(sq->bytes_read, ws.bytes_raw); /* the records' bytes, no framing */
    assert_int_equal(sq->file_bytes, 0);
    char cf[1024], cq[1024];
    assert_int_equal(gmp_reader_completeness(rq, cq, sizeof cq),
                     gmp_reader_completeness(rf, cf, sizeof cf));
    assert_string_equal(cq, cf);
    assert_int_equal(gmp_reader_header(rq)->start_trace_ns, gmp_reader_header(rf)->start_trace_ns);
    assert_string_equal(gmp_reader_header(rq)->producer.ptr, gmp_reader_header(rf)->producer.ptr);
    gmp_reader_close(rq);
    gmp_reader_close(rf);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(a.rc, GMP_OK);
    assert_int_equal(a.ws.frames, ws.frames);
    assert_int_equal(a.ws.bytes_raw, ws.bytes_raw);
    unlink(spath);
}

/* A reader that stops early (closed after a few records, read-ahead running): the writer's next
 * frame fails as a write into a closed pipe would (an I/O error, events lost), without waiting
 * forever for room in the queue. */
static void test_queue_reader_closes_early(void **state)
{
    (void)state;
    gmp_tq *q = gmp_tq_new(16 << 10);
    assert_non_null(q);
    qwriter a = {q, 200000, GMP_OK, {0}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, qwriter_main, &a), 0);
    gmp_reader *r;
    assert_int_equal(gmp_reader_open_queue(&r, q, NULL), GMP_OK);
    assert_int_equal(gmp_reader_readahead(r, 0), GMP_OK);
    const gmp_rec *x;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(gmp_reader_next(r, &x), GMP_OK);
    gmp_reader_close(r);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(a.rc, GMP_ERR_IO);
    assert_int_equal(a.ws.io_errno, EPIPE);
    gmp_tq_unref(q);
}

/* The queue itself: frames come out in order, whole; the end after the writer closes (once the
 * frames queued are read); a put after the reader closed fails and frees its buffer (ASan: no
 * leak); a reader waiting on an empty queue is woken by close_write; a put that does not fit
 * waits for a get. */
static void *tq_late_close(void *arg)
{
    usleep(20000);
    gmp_tq_close_write(arg);
    return NULL;
}

static void *tq_late_get(void *arg)
{
    usleep(20000);
    uint8_t *b;
    size_t len, cap;
    if (gmp_tq_get(arg, &b, &len, &cap) == 1)
        free(b);
    return NULL;
}

static void test_queue_basics(void **state)
{
    (void)state;
    gmp_tq *q = gmp_tq_new(100);
    for (int i = 0; i < 3; i++) {
        uint8_t *b = malloc(40);
        memset(b, 'a' + i, 40);
        assert_int_equal(gmp_tq_put(q, b, 30 + (size_t)i, 40), 0);
    }
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, tq_late_get, q), 0);
    uint8_t *b = malloc(40); /* 93 + 30 > 100: waits until tq_late_get takes the first */
    memset(b, 'd', 40);
    assert_int_equal(gmp_tq_put(q, b, 30, 40), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    for (int i = 1; i < 4; i++) {
        size_t len, cap;
        assert_int_equal(gmp_tq_get(q, &b, &len, &cap), 1);
        assert_int_equal(len, i < 3 ? 30 + (size_t)i : 30);
        assert_int_equal(cap, 40);
        assert_int_equal(b[0], 'a' + i);
        free(b);
    }
    assert_int_equal(pthread_create(&th, NULL, tq_late_close, q), 0);
    size_t len, cap;
    assert_int_equal(gmp_tq_get(q, &b, &len, &cap), 0); /* woken by the close */
    assert_int_equal(pthread_join(th, NULL), 0);
    gmp_tq_close_read(q);
    assert_int_equal(gmp_tq_put(q, malloc(8), 8, 8), -1);
    gmp_tq_unref(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_record_through_writer),
        cmocka_unit_test(test_threaded_writer_time_order),
        cmocka_unit_test(test_compress_helpers_same_bytes),
        cmocka_unit_test(test_compress_helpers_write_failure),
        cmocka_unit_test(test_stored_frames_by_zstd),
        cmocka_unit_test(test_stored_trace_same_content),
        cmocka_unit_test(test_stack_python_new),
        cmocka_unit_test(test_queue_same_records),
        cmocka_unit_test(test_queue_reader_closes_early),
        cmocka_unit_test(test_queue_basics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
