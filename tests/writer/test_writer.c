/* Writer tests: decode the file with zstd + gmp_decode only (independent of gmp_reader) and check
 * the promises of gmp_writer.h: every event written once, per-thread order, SYNC exactness, END
 * totals, definitions before use, losses counted when buffers run out, the magic and header. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include <cmocka.h>

#include "gmp_codec.h"
#include "gmp_writer.h"

typedef struct decoded {
    gmp_rec *recs;
    size_t n;
    uint8_t *raw; /* decompressed stream: strings of recs point into it */
    size_t frames;
} decoded;

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)sz + 1);
    assert_int_equal(fread(p, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return p;
}

static void decode_file(const char *path, decoded *d)
{
    size_t n;
    uint8_t *src = read_file(path, &n);
    size_t cap = 1 << 20, len = 0;
    uint8_t *raw = malloc(cap);
    size_t off = 0;
    d->frames = 0;
    while (off < n) {
        size_t fs = ZSTD_findFrameCompressedSize(src + off, n - off);
        assert_false(ZSTD_isError(fs));
        unsigned long long cs = ZSTD_getFrameContentSize(src + off, fs);
        assert_true(cs != ZSTD_CONTENTSIZE_ERROR && cs != ZSTD_CONTENTSIZE_UNKNOWN);
        while (cap - len < cs) {
            cap *= 2;
            raw = realloc(raw, cap);
        }
        size_t k = ZSTD_decompress(raw + len, cap - len, src + off, fs);
        assert_false(ZSTD_isError(k));
        /* every frame ends at a record boundary: decode this frame's records alone */
        len += k;
        off += fs;
        d->frames++;
    }
    free(src);
    assert_true(len >= GMP_TRACE_MAGIC_LEN);
    assert_memory_equal(raw, GMP_TRACE_MAGIC, GMP_TRACE_MAGIC_LEN);
    size_t rcap = 1024;
    d->recs = malloc(rcap * sizeof *d->recs);
    d->n = 0;
    uint64_t prev = 0;
    uint32_t tid = UINT32_MAX;
    for (size_t pos = GMP_TRACE_MAGIC_LEN; pos < len;) {
        if (d->n == rcap) {
            rcap *= 2;
            d->recs = realloc(d->recs, rcap * sizeof *d->recs);
        }
        size_t used;
        const char *msg;
        gmp_rec *r = &d->recs[d->n];
        assert_int_equal(gmp_decode(raw + pos, len - pos, r, &prev, &used, &msg), GMP_OK);
        if (r->type == GMP_REC_BUFFER)
            tid = r->u.buffer.tid;
        r->tid = tid;
        pos += used;
        d->n++;
    }
    d->raw = raw;
}

static void decoded_free(decoded *d)
{
    free(d->recs);
    free(d->raw);
}

static int tmp_fd(char *path)
{
    strcpy(path, "/tmp/gmp_test_writer_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    return fd;
}

static gmp_rec_header test_header(void)
{
    gmp_rec_header h = {0};
    h.producer = (gmp_str){"test", 4};
    h.pid = 42;
    h.hostname = (gmp_str){"host", 4};
    h.cmdline = (gmp_str){"a\0b", 3};
    h.rank = -1;
    h.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    return h;
}

typedef struct prod {
    gmp_writer *w;
    int idx, n;
    uint32_t api;
    int lost;
} prod;

static void *producer(void *arg)
{
    prod *p = arg;
    gmp_wthread *t = gmp_writer_thread(p->w, 1000 + (uint32_t)p->idx);
    char name[32];
    snprintf(name, sizeof name, "range%d", p->idx);
    uint32_t sid = gmp_writer_string(p->w, name, strlen(name));
    uint32_t rid = gmp_writer_range(p->w, 0, 0, sid);
    for (int i = 0; i < p->n; i++) {
        gmp_rec r = {.type = (i & 1) ? GMP_REC_FREE : GMP_REC_ALLOC};
        r.u.mem.device = 0;
        r.u.mem.kind = GMP_MEM_DEVICE;
        r.u.mem.api = p->api;
        r.u.mem.address =
            0x7f0000000000ull + (uint64_t)p->idx * 0x100000000ull + (uint64_t)(i / 2) * 256;
        r.u.mem.size = 256;
        r.u.mem.range = rid;
        r.u.mem.correlation = (uint64_t)i;
        if (gmp_wthread_event(t, &r) < 0)
            p->lost++;
    }
    gmp_wthread_release(t);
    return NULL;
}

static void run_threads(gmp_writer *w, prod *ps, int nthreads, int per_thread, uint32_t api)
{
    pthread_t th[16];
    for (int i = 0; i < nthreads; i++) {
        ps[i] = (prod){w, i, per_thread, api, 0};
        pthread_create(&th[i], NULL, producer, &ps[i]);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
}

/* Checks the structural promises; returns the number of events per thread in counts[]. */
static void check_stream(decoded *d, uint64_t *events_out, uint64_t *allocs_out, uint64_t *lost_out)
{
    /* definitions before use */
    uint8_t *str_def = calloc(1 << 16, 1);
    uint8_t *rng_def = calloc(1 << 16, 1);
    uint64_t events = 0, allocs = 0, frees = 0, lost = 0;
    uint64_t last_sync = 0;
    int saw_end = 0;
    assert_int_equal(d->recs[0].type, GMP_REC_HEADER);
    for (size_t i = 0; i < d->n; i++) {
        gmp_rec *r = &d->recs[i];
        assert_false(saw_end); /* END is last */
        switch (r->type) {
        case GMP_REC_STRING: str_def[r->u.string.id & 0xffff] = 1; break;
        case GMP_REC_RANGE:
            assert_true(str_def[r->u.range.name]);
            rng_def[r->u.range.id & 0xffff] = 1;
            break;
        case GMP_REC_SYNC:
            assert_true(r->u.sync.time_ns >= last_sync);
            last_sync = r->u.sync.time_ns;
            break;
        case GMP_REC_ALLOC:
        case GMP_REC_FREE:
            assert_true(r->u.mem.api == 0 || str_def[r->u.mem.api]);
            assert_true(r->u.mem.range == 0 || rng_def[r->u.mem.range]);
            break;
        default: break;
        }
        if (gmp_rec_is_event(r->type)) {
            /* SYNC promise: no event after a SYNC is older than it */
            assert_true(r->time_ns > last_sync || last_sync == 0);
            if (r->type == GMP_REC_END) {
                saw_end = 1;
                assert_int_equal(r->u.end.events, events);
                assert_int_equal(r->u.end.allocs, allocs);
                assert_int_equal(r->u.end.frees, frees);
                assert_int_equal(r->u.end.lost, lost);
                continue;
            }
            events++;
            allocs += r->type == GMP_REC_ALLOC;
            frees += r->type == GMP_REC_FREE;
            if (r->type == GMP_REC_LOST)
                lost += r->u.lost.count;
        }
    }
    assert_true(saw_end);
    /* per-thread order: times never go back within one thread */
    uint64_t last[2048] = {0};
    for (size_t i = 0; i < d->n; i++) {
        gmp_rec *r = &d->recs[i];
        if (!gmp_rec_is_event(r->type) || r->tid == 0)
            continue;
        assert_true(r->time_ns >= last[r->tid & 2047]);
        last[r->tid & 2047] = r->time_ns;
    }
    free(str_def);
    free(rng_def);
    *events_out = events;
    *allocs_out = allocs;
    *lost_out = lost;
}

static void test_threaded_roundtrip(void **state)
{
    (void)state;
    char path[64];
    int fd = tmp_fd(path);
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.buffer_bytes = 4096; /* many buffers, many frames */
    o.flush_interval_ms = 5;
    o.wait_us = 200000; /* generous: nothing must be lost here */
    gmp_rec_header h = test_header();
    gmp_writer *w;
    assert_int_equal(gmp_writer_open(&w, fd, &o, &h), GMP_OK);
    uint32_t api = gmp_writer_string(w, "cudaMalloc", 10);
    assert_int_equal(gmp_writer_string(w, "cudaMalloc", 10), api); /* deduplicated */
    prod ps[8];
    run_threads(w, ps, 8, 20000, api);
    gmp_writer_stats st;
    assert_int_equal(gmp_writer_close(w, &st), GMP_OK);
    for (int i = 0; i < 8; i++)
        assert_int_equal(ps[i].lost, 0);
    assert_int_equal(st.events, 8 * 20000);
    assert_int_equal(st.lost, 0);

    decoded d;
    decode_file(path, &d);
    assert_true(d.frames > 1);
    assert_int_equal(d.recs[0].u.header.pid, 42);
    assert_int_equal(d.recs[0].u.header.format_version, GMP_FORMAT_VERSION);
    uint64_t events, allocs, lost;
    check_stream(&d, &events, &allocs, &lost);
    assert_int_equal(events, 8 * 20000);
    assert_int_equal(allocs, 8 * 10000);
    assert_int_equal(lost, 0);
    /* each (thread, correlation) exactly once */
    uint8_t *seen = calloc(8 * 20000, 1);
    for (size_t i = 0; i < d.n; i++) {
        gmp_rec *r = &d.recs[i];
        if (r->type != GMP_REC_ALLOC && r->type != GMP_REC_FREE)
            continue;
        size_t k = (size_t)(r->tid - 1000) * 20000 + r->u.mem.correlation;
        assert_true(k < 8 * 20000);
        assert_int_equal(seen[k], 0);
        seen[k] = 1;
    }
    free(seen);
    decoded_free(&d);
    unlink(path);
}

static void test_bounded_memory_counts_losses(void **state)
{
    (void)state;
    char path[64];
    int fd = tmp_fd(path);
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.buffer_bytes = 4096;
    o.max_buffered_bytes = 8192; /* two buffers for everyone */
    o.flush_interval_ms = 0;
    o.wait_us = 0; /* never wait: lose at once */
    o.level = 19;  /* slow writer */
    gmp_rec_header h = test_header();
    gmp_writer *w;
    assert_int_equal(gmp_writer_open(&w, fd, &o, &h), GMP_OK);
    uint32_t api = gmp_writer_string(w, "cudaMalloc", 10);
    prod ps[4];
    run_threads(w, ps, 4, 50000, api);
    int lost_calls = 0;
    for (int i = 0; i < 4; i++)
        lost_calls += ps[i].lost;
    gmp_writer_stats st;
    assert_int_equal(gmp_writer_close(w, &st), GMP_OK);
    assert_true(lost_calls > 0);
    assert_int_equal(st.lost, (uint64_t)lost_calls);
    assert_int_equal(st.events + st.lost, 4 * 50000);

    decoded d;
    decode_file(path, &d);
    uint64_t events, allocs, lost;
    check_stream(&d, &events, &allocs, &lost);
    /* every lost event is in a LOST record; accepted ones are all there */
    assert_int_equal(lost, (uint64_t)lost_calls);
    uint64_t mem = 0;
    for (size_t i = 0; i < d.n; i++)
        mem += d.recs[i].type == GMP_REC_ALLOC || d.recs[i].type == GMP_REC_FREE;
    assert_int_equal(mem, st.events);
    decoded_free(&d);
    unlink(path);
}

static void test_sync_mode_and_external_losses(void **state)
{
    (void)state;
    char path[64];
    int fd = tmp_fd(path);
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    o.buffer_bytes = 4096;
    o.max_buffered_bytes = 8192;
    gmp_rec_header h = test_header();
    gmp_writer *w;
    assert_int_equal(gmp_writer_open(&w, fd, &o, &h), GMP_OK);
    gmp_rec dev = {.type = GMP_REC_DEVICE};
    dev.u.device.id = 0;
    dev.u.device.name = (gmp_str){"Sim", 3};
    dev.u.device.total_bytes = 1ull << 30;
    assert_int_equal(gmp_writer_define(w, &dev), GMP_OK);
    gmp_wthread *t = gmp_writer_thread(w, 7);
    uint32_t api = gmp_writer_string(w, "cuMemCreate", 11);
    for (uint64_t i = 1; i <= 30000; i++) {
        gmp_rec r = {.type = GMP_REC_ALLOC, .time_ns = i * 10};
        r.u.mem.kind = GMP_MEM_VMM_PHYSICAL;
        r.u.mem.api = api;
        r.u.mem.size = 2 << 20;
        r.u.mem.handle = i;
        assert_int_equal(gmp_wthread_event(t, &r), 0); /* never lost without a thread */
        if (i % 10000 == 0)
            gmp_writer_sync(w, i * 10);
    }
    gmp_writer_lost(w, 5, GMP_LOST_CUPTI_DROPPED);
    gmp_writer_stats st;
    assert_int_equal(gmp_writer_close(w, &st), GMP_OK);
    assert_int_equal(st.events, 30000);
    decoded d;
    decode_file(path, &d);
    uint64_t events, allocs, lost;
    check_stream(&d, &events, &allocs, &lost);
    assert_int_equal(allocs, 30000);
    assert_int_equal(lost, 5);
    int syncs = 0, devices = 0;
    for (size_t i = 0; i < d.n; i++) {
        syncs += d.recs[i].type == GMP_REC_SYNC;
        devices += d.recs[i].type == GMP_REC_DEVICE;
    }
    assert_int_equal(syncs, 3);
    assert_int_equal(devices, 1);
    decoded_free(&d);
    unlink(path);
}

static void test_write_error_is_reported(void **state)
{
    (void)state;
    int fd = open("/dev/full", O_WRONLY);
    if (fd < 0)
        skip();
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    gmp_rec_header h = test_header();
    gmp_writer *w;
    assert_int_equal(gmp_writer_open(&w, fd, &o, &h), GMP_OK);
    gmp_wthread *t = gmp_writer_thread(w, 1);
    gmp_rec r = {.type = GMP_REC_MARK};
    for (int i = 0; i < 1000; i++)
        gmp_wthread_event(t, &r);
    gmp_writer_stats st;
    assert_int_equal(gmp_writer_close(w, &st), GMP_ERR_IO);
    assert_int_not_equal(st.io_errno, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threaded_roundtrip),
        cmocka_unit_test(test_bounded_memory_counts_losses),
        cmocka_unit_test(test_sync_mode_and_external_losses),
        cmocka_unit_test(test_write_error_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
