/* Property tests: random record streams written the way the writer does (per-thread buffers
 * flushed in random thread order, SYNC after a flush, definitions before use, frames at buffer
 * boundaries), read back in file order (exactly what was written) and in time order (a stable sort
 * of the events by time, definitions in file order). Variants: producer times that break the SYNC
 * promise (late events counted, every event returned once), small reorder windows, and corrupted
 * record bytes inside valid frames (an error with an offset, never a crash). Seeded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_codec.h"
#include "gmp_reader.h"
#include "trace_build.h"

/* Streams per property: 3000 in a plain build, which checks every one of them. A sanitizer build
 * looks for memory and thread errors on the same code paths, runs each stream several times slower
 * (TSan most: every iteration starts reader threads) and has to fit its stage's timeout, so it runs
 * the first 1000 (ASan) or 600 (TSan). GMP_PROP_ITERATIONS=N sets the count by hand (seeds past
 * 3000 are streams no stage runs). */
/* test_long_streams: events per stream, enough that the reorder window's storage is compacted and
 * grown many times over; under TSan fewer (it checks the reader threads' hand-offs, which every
 * window repeats, and each event costs it most) */
#if defined(__SANITIZE_THREAD__)
#define DEFAULT_ITERATIONS 600
#define LONG_STEPS 40000
#elif defined(__SANITIZE_ADDRESS__)
#define DEFAULT_ITERATIONS 1000
#else
#define DEFAULT_ITERATIONS 3000
#endif
#ifndef LONG_STEPS
#define LONG_STEPS 150000
#endif
static uint64_t iterations = DEFAULT_ITERATIONS;

typedef struct vec {
    gmp_rec *v;
    size_t n, cap;
} vec;

static void push(vec *x, const gmp_rec *r)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 256;
        x->v = realloc(x->v, x->cap * sizeof *x->v);
        assert_non_null(x->v);
    }
    x->v[x->n++] = *r;
}

typedef struct gen {
    tb b;
    vec written; /* every record in file order (header first) */
    vec events;  /* events in file order */
    uint64_t rng;
    int jitter;  /* producer times may go backwards */
    int corrupt; /* flip bytes in raw chunks (not the first) */
    int flipped;
} gen;

static void emit(gen *g, const gmp_rec *r)
{
    tb_rec(&g->b, r);
    push(&g->written, r);
    if (gmp_rec_is_event(r->type))
        push(&g->events, r);
}

static void frame(gen *g)
{
    if (g->corrupt && g->b.nframes && g->b.rlen && tb_rand(&g->rng) % 3 == 0) {
        g->b.raw[tb_rand(&g->rng) % g->b.rlen] ^= (uint8_t)(1 + tb_rand(&g->rng) % 255);
        g->flipped = 1;
    }
    tb_frame(&g->b);
}

static const unsigned ev_types[] = {
    GMP_REC_RANGE_PUSH, GMP_REC_RANGE_POP, GMP_REC_RANGE_START, GMP_REC_RANGE_END,
    GMP_REC_MARK,       GMP_REC_ALLOC,     GMP_REC_FREE,        GMP_REC_OOM,
    GMP_REC_POOL,       GMP_REC_SAMPLE,    GMP_REC_RESOURCE,    GMP_REC_ALERT,
    GMP_REC_LOST,       GMP_REC_ALLOC,     GMP_REC_FREE,        GMP_REC_NOTICE};

static const char *const names[] = {"a", "bb", "forward", "backward", "cudaMalloc", "step"};

static void define_triple(gen *g, uint32_t id)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_STRING;
    r.u.string.id = id;
    const char *s = names[tb_rand(&g->rng) % 6];
    r.u.string.value = (gmp_str){s, (uint32_t)strlen(s)};
    emit(g, &r);
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_RANGE;
    r.u.range.id = id;
    r.u.range.parent = (uint32_t)(tb_rand(&g->rng) % id);
    r.u.range.domain = (uint32_t)(tb_rand(&g->rng) % (id + 1));
    r.u.range.name = id;
    emit(g, &r);
    memset(&r, 0, sizeof r);
    r.type = GMP_REC_STACK;
    r.u.stack.id = id;
    r.u.stack.parent = (uint32_t)(tb_rand(&g->rng) % id);
    r.u.stack.kind = tb_rand(&g->rng) % 2;
    r.u.stack.address = tb_rand(&g->rng);
    r.u.stack.file = (uint32_t)(tb_rand(&g->rng) % (id + 1));
    r.u.stack.function = id;
    r.u.stack.line = (uint32_t)tb_rand(&g->rng);
    if (r.u.stack.kind == GMP_FRAME_NATIVE)
        r.u.stack.file = r.u.stack.function = r.u.stack.line = 0;
    else
        r.u.stack.address = 0;
    emit(g, &r);
    if (tb_rand(&g->rng) % 4 == 0) {
        gmp_rec d;
        tb_random_rec(&d, tb_rand(&g->rng) % 2 ? GMP_REC_DEVICE : GMP_REC_THREAD, &g->rng, 0);
        emit(g, &d);
    }
}

#define MAXT 4
typedef struct pend {
    gmp_rec ev[64];
    size_t n;
} pend;

static void flush_all(gen *g, pend *p, int nthreads, uint64_t now)
{
    int order[MAXT];
    for (int i = 0; i < nthreads; i++)
        order[i] = i;
    for (int i = nthreads - 1; i > 0; i--) {
        int j = (int)(tb_rand(&g->rng) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < nthreads; i++) {
        pend *q = &p[order[i]];
        if (!q->n)
            continue;
        gmp_rec br;
        memset(&br, 0, sizeof br);
        br.type = GMP_REC_BUFFER;
        br.u.buffer.tid = 1000 + (uint32_t)order[i];
        uint64_t base = q->ev[0].time_ns;
        br.u.buffer.base_ns = base - (tb_rand(&g->rng) % 2 ? 0 : (base < 5 ? base : 5));
        emit(g, &br);
        for (size_t k = 0; k < q->n; k++)
            emit(g, &q->ev[k]);
        q->n = 0;
        if (tb_rand(&g->rng) % 3 == 0)
            frame(g);
    }
    if (tb_rand(&g->rng) % 2) {
        gmp_rec s;
        memset(&s, 0, sizeof s);
        s.type = GMP_REC_SYNC;
        s.u.sync.time_ns = now;
        emit(g, &s);
    }
}

static int big_steps; /* > 0: this many events instead of a random few */

static void generate(gen *g, uint64_t seed, int jitter, int corrupt)
{
    memset(g, 0, sizeof *g);
    tb_init(&g->b);
    g->rng = seed;
    g->jitter = jitter;
    g->corrupt = corrupt;
    gmp_rec h = tb_header();
    tb_start(&g->b, &h);
    push(&g->written, &h);
    int nthreads = 1 + (int)(tb_rand(&g->rng) % MAXT);
    pend p[MAXT];
    memset(p, 0, sizeof p);
    uint32_t ndef = 0;
    uint64_t now = tb_rand(&g->rng) % 1000000;
    int steps = big_steps ? big_steps : (int)(tb_rand(&g->rng) % 200);
    uint64_t evs = 0, allocs = 0, frees = 0, lost = 0;
    if (tb_rand(&g->rng) % 2)
        frame(g);
    for (int s = 0; s < steps; s++) {
        if (ndef < 40 && tb_rand(&g->rng) % 8 == 0)
            define_triple(g, ++ndef);
        now += tb_rand(&g->rng) % 3 ? tb_rand(&g->rng) % 50 : 0;
        int t = (int)(tb_rand(&g->rng) % (uint64_t)nthreads);
        if (p[t].n == 64)
            flush_all(g, p, nthreads, now);
        gmp_rec e;
        tb_random_rec(&e, ev_types[tb_rand(&g->rng) % 16], &g->rng, ndef);
        e.time_ns = now;
        if (jitter && tb_rand(&g->rng) % 4 == 0)
            e.time_ns = now - tb_rand(&g->rng) % (now + 1 < 300 ? now + 1 : 300);
        e.tid = 1000 + (uint32_t)t;
        p[t].ev[p[t].n++] = e;
        evs++;
        allocs += e.type == GMP_REC_ALLOC;
        frees += e.type == GMP_REC_FREE;
        if (e.type == GMP_REC_LOST)
            lost += e.u.lost.count;
        if (tb_rand(&g->rng) % 20 == 0)
            flush_all(g, p, nthreads, now);
    }
    flush_all(g, p, nthreads, now);
    if (tb_rand(&g->rng) % 8) {
        gmp_rec br, er;
        memset(&br, 0, sizeof br);
        br.type = GMP_REC_BUFFER;
        br.u.buffer.base_ns = now;
        emit(g, &br);
        memset(&er, 0, sizeof er);
        er.type = GMP_REC_END;
        er.time_ns = now + 1;
        er.u.end = (gmp_rec_end){evs, allocs, frees, lost};
        emit(g, &er);
    }
    frame(g);
}

static void gen_free(gen *g)
{
    tb_free(&g->b);
    free(g->written.v);
    free(g->events.v);
}

/* Canonical key of an event for multiset comparison. */
typedef struct evkey {
    uint64_t time;
    uint32_t tid;
    uint8_t bytes[128];
    size_t n;
} evkey;

static void key_of(evkey *k, const gmp_rec *r)
{
    memset(k, 0, sizeof *k);
    k->time = r->time_ns;
    k->tid = r->tid;
    uint64_t prev = r->time_ns;
    k->n = gmp_encode(k->bytes, sizeof k->bytes, r, &prev);
    assert_true(k->n > 0);
}

static int key_cmp(const void *pa, const void *pb)
{
    const evkey *a = pa, *b = pb;
    if (a->time != b->time)
        return a->time < b->time ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    return memcmp(a->bytes, b->bytes, a->n);
}

static void check_multiset(const vec *want, const gmp_rec *got, size_t ngot)
{
    assert_int_equal(want->n, ngot);
    evkey *a = calloc(ngot + 1, sizeof *a), *b = calloc(ngot + 1, sizeof *b);
    for (size_t i = 0; i < ngot; i++) {
        key_of(&a[i], &want->v[i]);
        key_of(&b[i], &got[i]);
    }
    qsort(a, ngot, sizeof *a, key_cmp);
    qsort(b, ngot, sizeof *b, key_cmp);
    for (size_t i = 0; i < ngot; i++)
        assert_int_equal(key_cmp(&a[i], &b[i]), 0);
    free(a);
    free(b);
}

/* Stable sort of events by time (insertion sort over indexes: streams are small). */
static void stable_sort(vec *v)
{
    for (size_t i = 1; i < v->n; i++) {
        gmp_rec x = v->v[i];
        size_t j = i;
        while (j > 0 && v->v[j - 1].time_ns > x.time_ns) {
            v->v[j] = v->v[j - 1];
            j--;
        }
        v->v[j] = x;
    }
}

static void check_time_order(gen *g, size_t window, int strict)
{
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &g->b, SIZE_MAX, 0, window), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    /* definitions: in file order */
    size_t di = 0;
    vec got = {0};
    uint64_t maxt = 0, late = 0;
    int any = 0;
    for (size_t i = 0; i < o.n; i++) {
        const gmp_rec *x = &o.recs[i];
        if (gmp_rec_is_event(x->type)) {
            if (any && x->time_ns < maxt)
                late++;
            else
                maxt = x->time_ns;
            any = 1;
            push(&got, x);
            continue;
        }
        while (di < g->written.n &&
               (gmp_rec_is_event(g->written.v[di].type) ||
                g->written.v[di].type == GMP_REC_BUFFER || g->written.v[di].type == GMP_REC_SYNC))
            di++;
        assert_true(di < g->written.n);
        assert_true(tb_rec_equal(x, &g->written.v[di]));
        di++;
    }
    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    assert_int_equal(st->late_events, late);
    assert_int_equal(st->events, got.n);
    check_multiset(&g->events, got.v, got.n);
    if (strict) {
        assert_int_equal(late, 0);
        vec want = {0};
        for (size_t i = 0; i < g->events.n; i++)
            push(&want, &g->events.v[i]);
        stable_sort(&want);
        for (size_t i = 0; i < got.n; i++)
            assert_true(tb_rec_equal(&got.v[i], &want.v[i]));
        free(want.v);
    }
    if (st->has_end && !g->jitter)
        assert_int_equal(gmp_reader_completeness(r, NULL, 0),
                         st->lost_events == 0 && !st->truncated);
    free(got.v);
    tb_out_free(&o);
    gmp_reader_close(r);
}

/* ---- read-ahead: the same records, lookups, errors and stats as without it ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    return fnv(h, &v, sizeof v);
}

/* A digest of what a caller sees at this record: the record and what the lookups answer. */
static uint64_t digest(gmp_reader *r, const gmp_rec *rec)
{
    uint64_t h = fnv_u64(0xcbf29ce484222325ull, rec->type);
    uint8_t buf[4096];
    uint64_t prev = rec->time_ns;
    size_t n = gmp_rec_type_name(rec->type) ? gmp_encode(buf, sizeof buf, rec, &prev) : 0;
    h = fnv(h, buf, n);
    h = fnv_u64(fnv_u64(h, rec->time_ns), rec->tid);
    h = fnv_u64(h, gmp_reader_device_count(r));
    h = fnv_u64(h, gmp_reader_module_count(r));
    char path[256];
    if (rec->type == GMP_REC_ALLOC || rec->type == GMP_REC_FREE) {
        gmp_str s = gmp_reader_string(r, rec->u.mem.api);
        h = fnv(h, s.ptr, s.len);
        size_t pl = gmp_reader_range_path(r, rec->u.mem.range, path, sizeof path);
        h = fnv(h, path, pl < sizeof path ? pl : sizeof path - 1);
        h = fnv_u64(h, gmp_reader_stack(r, rec->u.mem.stack) != NULL);
        const gmp_rec_device *d = gmp_reader_device(r, (uint32_t)rec->u.mem.device);
        if (d)
            h = fnv(fnv_u64(h, d->total_bytes), d->name.ptr, d->name.len);
    }
    if (rec->type == GMP_REC_DEVICE || rec->type == GMP_REC_THREAD) {
        const gmp_str *nm = rec->type == GMP_REC_DEVICE
                                ? &gmp_reader_device(r, rec->u.device.id)->name
                                : &gmp_reader_thread(r, rec->u.thread.tid)->name;
        h = fnv(h, nm->ptr, nm->len);
    }
    if (rec->type == GMP_REC_NOTICE)
        h = fnv(h, rec->u.notice.message.ptr, rec->u.notice.message.len);
    return h;
}

typedef struct transcript {
    uint64_t *d;
    size_t n, cap;
    gmp_err end;
    char msg[512], complete[1024];
    gmp_reader_stats st;
} transcript;

/* Reads r to its end (or `stop_after` records, then closes), turning read-ahead on before record
 * number ra_at when ra_batch is not 0 (GMP_READER_READAHEAD_DEFAULT for the default). */
static void read_transcript(gmp_reader *r, size_t ra_batch, size_t ra_at, size_t stop_after,
                            transcript *t)
{
    memset(t, 0, sizeof *t);
    for (size_t k = 0;; k++) {
        if (ra_batch && k == ra_at)
            assert_int_equal(gmp_reader_readahead(r, ra_batch), GMP_OK);
        if (k == stop_after) {
            gmp_reader_close(r); /* with the thread still reading: no hang, no leak (ASan) */
            return;
        }
        const gmp_rec *rec;
        gmp_err e = gmp_reader_next(r, &rec);
        if (e != GMP_OK) {
            t->end = e;
            break;
        }
        if (t->n == t->cap) {
            t->cap = t->cap ? 2 * t->cap : 256;
            t->d = realloc(t->d, t->cap * sizeof *t->d);
            assert_non_null(t->d);
        }
        t->d[t->n++] = digest(r, rec);
    }
    /* after the end, another call says the same */
    const gmp_rec *rec;
    assert_int_equal(gmp_reader_next(r, &rec), t->end);
    snprintf(t->msg, sizeof t->msg, "%s", gmp_reader_error(r));
    gmp_reader_completeness(r, t->complete, sizeof t->complete);
    t->st = *gmp_reader_get_stats(r);
    gmp_reader_close(r);
}

static void same_transcript(const transcript *a, const transcript *b, const char *what)
{
    if (a->n != b->n)
        fail_msg("%s: %zu records without read-ahead, %zu with", what, a->n, b->n);
    for (size_t i = 0; i < a->n; i++)
        if (a->d[i] != b->d[i])
            fail_msg("%s: record %zu differs", what, i);
    assert_int_equal(a->end, b->end);
    assert_string_equal(a->msg, b->msg);
    assert_string_equal(a->complete, b->complete);
    const gmp_reader_stats *x = &a->st, *y = &b->st;
    assert_int_equal(x->file_bytes, y->file_bytes);
    assert_int_equal(x->bytes_read, y->bytes_read);
    assert_int_equal(x->bytes_discarded, y->bytes_discarded);
    assert_int_equal(x->frames, y->frames);
    assert_memory_equal(x->records, y->records, sizeof x->records);
    assert_int_equal(x->unknown_records, y->unknown_records);
    assert_int_equal(x->events, y->events);
    assert_int_equal(x->late_events, y->late_events);
    assert_int_equal(x->lost_events, y->lost_events);
    assert_int_equal(x->truncated, y->truncated);
    assert_int_equal(x->has_end, y->has_end);
    assert_memory_equal(&x->end, &y->end, sizeof x->end);
}

/* Reads g's trace without read-ahead, then with it (a random chunk size, turned on at a random
 * record) and compares; then once more with read-ahead, closed before the end. */
static void check_readahead(gen *g, size_t window, int file_order)
{
    gmp_reader *r;
    if (tb_open(&r, &g->b, SIZE_MAX, file_order, window) != GMP_OK)
        return; /* an unreadable start: read-ahead never begins */
    transcript a, b;
    read_transcript(r, 0, 0, SIZE_MAX, &a);
    assert_int_equal(tb_open(&r, &g->b, SIZE_MAX, file_order, window), GMP_OK);
    size_t batch = tb_rand(&g->rng) % 4 ? 1 + tb_rand(&g->rng) % 9 : GMP_READER_READAHEAD_DEFAULT;
    size_t at = tb_rand(&g->rng) % 3 ? 0 : tb_rand(&g->rng) % (a.n + 2);
    read_transcript(r, batch, at, SIZE_MAX, &b);
    same_transcript(&a, &b, file_order ? "file order" : "time order");
    free(b.d);
    assert_int_equal(tb_open(&r, &g->b, SIZE_MAX, file_order, window), GMP_OK);
    read_transcript(r, batch, 0, tb_rand(&g->rng) % (a.n + 1), &b);
    free(b.d);
    free(a.d);
}

static void test_random_streams(void **state)
{
    (void)state;
    for (uint64_t it = 0; it < iterations; it++) {
        gen g;
        generate(&g, 0x5eed0000 + it, 0, 0);
        /* file order: exactly what was written */
        gmp_reader *r;
        assert_int_equal(tb_open(&r, &g.b, SIZE_MAX, 1, 0), GMP_OK);
        tb_out o = {0};
        assert_int_equal(tb_read_all(r, &o), GMP_END);
        assert_int_equal(o.n, g.written.n);
        for (size_t i = 0; i < o.n; i++)
            if (!tb_rec_equal(&o.recs[i], &g.written.v[i]))
                fail_msg("iteration %llu, record %zu", (unsigned long long)it, i);
        tb_out_free(&o);
        gmp_reader_close(r);
        /* time order: stable sort by time */
        check_time_order(&g, 0, 1);
        /* small windows: every event once, late ones counted */
        check_time_order(&g, 1 + tb_rand(&g.rng) % 16, 0);
        if (it % 3 == 0) { /* a third of the streams is plenty, and keeps TSan's stage short */
            check_readahead(&g, 0, 0);
            check_readahead(&g, 1 + tb_rand(&g.rng) % 16, 0);
            check_readahead(&g, 0, 1);
        }
        gen_free(&g);
    }
}

static void test_random_streams_jitter(void **state)
{
    (void)state;
    for (uint64_t it = 0; it < iterations / 2; it++) {
        gen g;
        generate(&g, 0x71770000 + it, 1, 0);
        check_time_order(&g, 0, 0);
        check_time_order(&g, 1 + tb_rand(&g.rng) % 8, 0);
        if (it % 3 == 0) {
            check_readahead(&g, 0, 0);
            check_readahead(&g, 1 + tb_rand(&g.rng) % 8, 0);
        }
        gen_free(&g);
    }
}

/* Bytes flipped inside frames with a valid checksum: decoding must fail cleanly or succeed. */
static void test_random_corrupt_records(void **state)
{
    (void)state;
    int errors = 0, runs = 0;
    for (uint64_t it = 0; it < iterations; it++) {
        gen g;
        generate(&g, 0xbad00000 + it, (int)(it % 2), 1);
        for (int fo = 0; fo <= 1; fo++) {
            gmp_reader *r;
            gmp_err e = tb_open(&r, &g.b, SIZE_MAX, fo, 1 + it % 32);
            if (e != GMP_OK) {
                assert_true(e == GMP_ERR_FORMAT || e == GMP_ERR_VERSION);
                assert_non_null(strstr(gmp_reader_open_error(), "byte"));
                errors++;
                continue;
            }
            tb_out o = {0};
            e = tb_read_all(r, &o);
            runs++;
            if (e != GMP_END) {
                assert_int_equal(e, GMP_ERR_FORMAT);
                assert_non_null(strstr(gmp_reader_error(r), "at byte"));
                errors++;
            }
            char line[1024];
            gmp_reader_completeness(r, line, sizeof line);
            tb_out_free(&o);
            gmp_reader_close(r);
            if (it % 3 == 0)
                check_readahead(&g, 1 + it % 32, fo);
        }
        gen_free(&g);
    }
    assert_true(errors > runs / 4);
}

/* Long streams: the reorder window's storage is compacted and grown many times over. */
static void test_long_streams(void **state)
{
    (void)state;
    big_steps = LONG_STEPS;
    for (uint64_t it = 0; it < 4; it++) {
        gen g;
        generate(&g, 0x10000 + it, (int)(it % 2), 0);
        check_time_order(&g, 0, !(it % 2));
        check_time_order(&g, 1000 + it * 3000, 0);
        check_readahead(&g, 0, 0);
        check_readahead(&g, 1000 + it * 3000, 0);
        gen_free(&g);
    }
    big_steps = 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_streams),
        cmocka_unit_test(test_random_streams_jitter),
        cmocka_unit_test(test_random_corrupt_records),
        cmocka_unit_test(test_long_streams),
    };
    const char *n = getenv("GMP_PROP_ITERATIONS");
    if (n && strtoull(n, NULL, 10) > 0)
        iterations = strtoull(n, NULL, 10);
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test: test_reader_prop NAME */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
