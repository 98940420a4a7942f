/* Reader unit tests: every record type through codec and reader, lookups, unknown types, bad
 * references, versions, non-traces, merge of three threads with SYNCs, late events, look-ahead
 * (peek_mem), the window bound, skippable frames, completeness lines, and reading from a file in
 * chunks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmp_codec.h"
#include "gmp_reader.h"
#include "trace_build.h"

static gmp_rec mk(unsigned type)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = type;
    return r;
}

/* One record of every type, in an order that defines before use. */
static size_t all_types(gmp_rec *v)
{
    size_t n = 0;
    gmp_rec r;
    static const char *const names[] = {"",     "cudaMalloc", "train", "step",
                                        "nccl", "frame.py",   "fwd"};
    for (uint32_t i = 1; i <= 6; i++) {
        r = mk(GMP_REC_STRING);
        r.u.string.id = i;
        r.u.string.value = (gmp_str){names[i], (uint32_t)strlen(names[i])};
        v[n++] = r;
    }
    r = mk(GMP_REC_DEVICE);
    r.u.device.id = 0;
    r.u.device.name = (gmp_str){"NVIDIA H100 80GB HBM3", 21};
    for (int i = 0; i < 16; i++)
        r.u.device.uuid[i] = (uint8_t)(0xa0 + i);
    r.u.device.total_bytes = 85899345920ull;
    r.u.device.cc_major = 9;
    r.u.device.cc_minor = 0;
    v[n++] = r;
    r = mk(GMP_REC_THREAD);
    r.u.thread.tid = 12345;
    r.u.thread.name = (gmp_str){"python3", 7};
    v[n++] = r;
    r = mk(GMP_REC_MODULE);
    r.u.module.id = 1;
    r.u.module.path = (gmp_str){"/usr/lib/libtorch_cuda.so", 25};
    r.u.module.base = 0x7f0000000000ull;
    r.u.module.lo = 0x7f0000001000ull;
    r.u.module.size = 123456789;
    r.u.module.build_id = (gmp_str){"\x01\x02\x00\xff", 4};
    v[n++] = r;
    r = mk(GMP_REC_STACK);
    r.u.stack.id = 1;
    r.u.stack.kind = GMP_FRAME_NATIVE;
    r.u.stack.address = 0x7f0000123456ull;
    v[n++] = r;
    r = mk(GMP_REC_STACK);
    r.u.stack.id = 2;
    r.u.stack.parent = 1;
    r.u.stack.kind = GMP_FRAME_PYTHON;
    r.u.stack.file = 5;
    r.u.stack.function = 6;
    r.u.stack.line = 77;
    v[n++] = r;
    r = mk(GMP_REC_RANGE);
    r.u.range.id = 1;
    r.u.range.name = 2;
    v[n++] = r;
    r = mk(GMP_REC_RANGE);
    r.u.range.id = 2;
    r.u.range.parent = 1;
    r.u.range.domain = 4;
    r.u.range.name = 3;
    v[n++] = r;
    r = mk(GMP_REC_BUFFER);
    r.u.buffer.tid = 12345;
    r.u.buffer.base_ns = 1000000;
    v[n++] = r;
    uint64_t t = 1000000;
    unsigned evs[] = {GMP_REC_RANGE_PUSH, GMP_REC_RANGE_POP, GMP_REC_RANGE_START, GMP_REC_RANGE_END,
                      GMP_REC_MARK,       GMP_REC_ALLOC,     GMP_REC_FREE,        GMP_REC_OOM,
                      GMP_REC_POOL,       GMP_REC_SAMPLE,    GMP_REC_RESOURCE,    GMP_REC_ALERT,
                      GMP_REC_NOTICE,     GMP_REC_LOST};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
        r = mk(evs[i]);
        r.time_ns = t += 17 * (i + 1);
        r.tid = 12345;
        switch (evs[i]) {
        case GMP_REC_RANGE_PUSH:
        case GMP_REC_RANGE_POP:
        case GMP_REC_MARK: r.u.rev.range = 2; break;
        case GMP_REC_RANGE_START:
            r.u.rev.handle = 99;
            r.u.rev.range = 1;
            break;
        case GMP_REC_RANGE_END: r.u.rev.handle = 99; break;
        case GMP_REC_ALLOC:
        case GMP_REC_FREE:
            r.u.mem = (gmp_rec_mem){.device = 0,
                                    .kind = GMP_MEM_ASYNC_POOL,
                                    .flags = GMP_MEMF_ASYNC,
                                    .api = 1,
                                    .address = 0x7f1234560000ull,
                                    .size = 1 << 20,
                                    .stream = 7,
                                    .stack = 2,
                                    .range = 2,
                                    .correlation = 123456,
                                    .result = evs[i] == GMP_REC_FREE ? -3 : 0,
                                    .handle = 0xdead};
            break;
        case GMP_REC_OOM: r.u.oom = (gmp_rec_oom){0, 1, 1ull << 40, 2, 2, 2, 12345}; break;
        case GMP_REC_POOL: r.u.pool = (gmp_rec_pool){-1, GMP_POOL_RESERVED, 0xbeef, 1 << 30}; break;
        case GMP_REC_SAMPLE: r.u.sample = (gmp_rec_sample){0, 1000, 2000, UINT64_MAX}; break;
        case GMP_REC_RESOURCE:
            r.u.resource = (gmp_rec_resource){0, GMP_RES_STREAM_CREATE, 7};
            break;
        case GMP_REC_ALERT: r.u.alert = (gmp_rec_alert){0, 1ull << 33, 1ull << 34, 2}; break;
        case GMP_REC_NOTICE:
            r.u.notice = (gmp_rec_notice){GMP_NOTICE_WARNING, {"activity records disabled", 26}};
            break;
        case GMP_REC_LOST: r.u.lost = (gmp_rec_lost){5, GMP_LOST_CUPTI_DROPPED}; break;
        }
        v[n++] = r;
    }
    r = mk(GMP_REC_SYNC);
    r.u.sync.time_ns = t;
    v[n++] = r;
    r = mk(GMP_REC_END);
    r.time_ns = t + 1;
    r.tid = 12345;
    r.u.end = (gmp_rec_end){14, 1, 1, 5};
    /* END goes in a buffer of its own */
    gmp_rec b = mk(GMP_REC_BUFFER);
    b.u.buffer.tid = 12345;
    b.u.buffer.base_ns = t;
    v[n++] = b;
    v[n++] = r;
    return n;
}

static void build_all(tb *b, gmp_rec *v, size_t n)
{
    tb_init(b);
    tb_start(b, NULL);
    for (size_t i = 0; i < n; i++)
        tb_rec(b, &v[i]);
    tb_frame(b);
}

/* The rank identity appended to HEADER (docs/trace-format.md): read back as written; a HEADER
 * written before those fields (its payload ends after options) reads as "unknown"; a payload that
 * goes on after them (a later version's fields) is read all the same. */
static void test_header_rank_fields(void **state)
{
    (void)state;
    gmp_rec h = tb_header();
    h.u.header.rank = 37;
    h.u.header.local_rank = 5;
    h.u.header.world_size = 64;
    h.u.header.rank_var = (gmp_str){"SLURM_PROCID", 12};
    uint8_t enc[512];
    uint64_t prev = 0;
    size_t n = gmp_encode(enc, sizeof enc, &h, &prev);
    assert_true(n > 20 && enc[1] < 0x80); /* a one-byte length */
    for (int variant = 0; variant < 3; variant++) {
        uint8_t rec[600];
        size_t len = n;
        memcpy(rec, enc, n);
        if (variant == 1) { /* as written before: local_rank, world_size, rank_var cut off */
            len = n - (1 + 1 + 1 + 12);
            rec[1] = (uint8_t)(len - 2);
        } else if (variant == 2) { /* two bytes of a later field */
            rec[n] = 0x07;
            rec[n + 1] = 0x2a;
            len = n + 2;
            rec[1] = (uint8_t)(len - 2);
        }
        tb b;
        tb_init(&b);
        tb_raw(&b, GMP_TRACE_MAGIC, GMP_TRACE_MAGIC_LEN);
        tb_raw(&b, rec, len);
        tb_frame(&b);
        gmp_reader *r;
        assert_int_equal(tb_open(&r, &b, SIZE_MAX, 1, 0), GMP_OK);
        const gmp_rec_header *g = gmp_reader_header(r);
        assert_non_null(g);
        assert_int_equal(g->rank, 37);
        assert_int_equal(g->pid, 4242);
        assert_int_equal(g->options.len, 17);
        if (variant == 1) {
            assert_int_equal(g->local_rank, -1);
            assert_int_equal(g->world_size, 0);
            assert_int_equal(g->rank_var.len, 0);
        } else {
            assert_int_equal(g->local_rank, 5);
            assert_int_equal(g->world_size, 64);
            assert_int_equal(g->rank_var.len, 12);
            assert_memory_equal(g->rank_var.ptr, "SLURM_PROCID", 12);
        }
        gmp_reader_close(r);
        tb_free(&b);
    }
}

static void test_every_record_file_order(void **state)
{
    (void)state;
    gmp_rec v[64];
    size_t n = all_types(v);
    tb b;
    build_all(&b, v, n);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 1, 0), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(o.n, n + 1);
    gmp_rec h = tb_header();
    assert_true(tb_rec_equal(&o.recs[0], &h));
    assert_true(tb_rec_equal(gmp_reader_header(r) ? &o.recs[0] : NULL, &h));
    for (size_t i = 0; i < n; i++)
        assert_true(tb_rec_equal(&o.recs[i + 1], &v[i]));

    /* lookups */
    gmp_str s = gmp_reader_string(r, 5);
    assert_int_equal(s.len, 8);
    assert_memory_equal(s.ptr, "frame.py", 8);
    assert_int_equal(s.ptr[8], 0);
    assert_int_equal(gmp_reader_string(r, 99).len, 0);
    assert_non_null(gmp_reader_string(r, 99).ptr);
    assert_int_equal(gmp_reader_stack(r, 2)->line, 77);
    assert_null(gmp_reader_stack(r, 3));
    assert_int_equal(gmp_reader_range(r, 2)->parent, 1);
    assert_int_equal(gmp_reader_device(r, 0)->cc_major, 9);
    assert_null(gmp_reader_device(r, 1));
    assert_int_equal(gmp_reader_device_count(r), 1);
    assert_int_equal(gmp_reader_device_at(r, 0)->total_bytes, 85899345920ull);
    assert_null(gmp_reader_device_at(r, 1));
    assert_memory_equal(gmp_reader_thread(r, 12345)->name.ptr, "python3", 7);
    assert_int_equal(gmp_reader_module_count(r), 1);
    assert_int_equal(gmp_reader_module_at(r, 0)->build_id.len, 4);
    assert_int_equal(gmp_reader_module(r, 1)->size, 123456789);
    char path[64];
    assert_int_equal(gmp_reader_range_path(r, 2, path, sizeof path), 10);
    assert_string_equal(path, "train/step");
    assert_int_equal(gmp_reader_range_path(r, 2, path, 4), 10);
    assert_string_equal(path, "tra");
    assert_int_equal(gmp_reader_range_path(r, 2, path, 8), 10);
    assert_string_equal(path, "train/s");
    assert_int_equal(gmp_reader_range_path(r, 0, path, sizeof path), 0);
    assert_string_equal(path, "");
    assert_int_equal(gmp_reader_range_path(r, 2, NULL, 0), 10);

    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    assert_int_equal(st->frames, 1);
    assert_int_equal(st->bytes_read, b.len);
    assert_int_equal(st->truncated, 0);
    assert_int_equal(st->has_end, 1);
    assert_int_equal(st->lost_events, 5);
    assert_int_equal(st->records[GMP_REC_ALLOC], 1);
    assert_int_equal(st->records[GMP_REC_BUFFER], 2);
    assert_int_equal(st->records[GMP_REC_HEADER], 1);
    char line[512];
    assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 0);
    assert_non_null(strstr(line, "END totals match"));
    assert_non_null(strstr(line, "5 events lost"));
    assert_non_null(strstr(line, "cupti dropped: 5"));
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

static void test_every_record_time_order(void **state)
{
    (void)state;
    gmp_rec v[64];
    size_t n = all_types(v);
    tb b;
    build_all(&b, v, n);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    size_t j = 1;
    for (size_t i = 0; i < n; i++) {
        if (v[i].type == GMP_REC_BUFFER || v[i].type == GMP_REC_SYNC)
            continue;
        assert_true(j < o.n);
        assert_true(tb_rec_equal(&o.recs[j++], &v[i]));
    }
    assert_int_equal(j, o.n);
    assert_int_equal(gmp_reader_get_stats(r)->events, 15);
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

static gmp_rec ev_mark(uint64_t t, uint32_t range)
{
    gmp_rec r = mk(GMP_REC_MARK);
    r.time_ns = t;
    r.u.rev.range = range;
    return r;
}

static gmp_rec ev_alloc(uint64_t t, uint64_t addr)
{
    gmp_rec r = mk(GMP_REC_ALLOC);
    r.time_ns = t;
    r.u.mem.kind = GMP_MEM_DEVICE;
    r.u.mem.address = addr;
    r.u.mem.size = 256;
    return r;
}

static gmp_rec end_rec(uint64_t t, uint64_t events, uint64_t allocs, uint64_t frees, uint64_t lost)
{
    gmp_rec r = mk(GMP_REC_END);
    r.time_ns = t;
    r.u.end = (gmp_rec_end){events, allocs, frees, lost};
    return r;
}

static void test_unknown_types(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    static const uint8_t unk_def[] = {0x50, 3, 1, 2, 3};        /* not an event */
    static const uint8_t unk_ev[] = {0x28, 3, 2 * 40, 0x7f, 0}; /* future event: dt = +40 */
    tb_raw(&b, unk_def, sizeof unk_def);
    tb_buffer(&b, 7, 1000);
    gmp_rec a = ev_alloc(1010, 1);
    tb_rec(&b, &a);                    /* prev 1010 */
    tb_raw(&b, unk_ev, sizeof unk_ev); /* 1050 */
    /* an ALLOC with two extra bytes of a newer version: dt from 1050 */
    gmp_rec a2 = ev_alloc(1060, 2);
    uint8_t tmp[128];
    uint64_t prev = 1050;
    size_t k = gmp_encode(tmp, sizeof tmp, &a2, &prev);
    assert_true(k > 2 && tmp[1] < 120);
    tmp[1] = (uint8_t)(tmp[1] + 2);
    tmp[k] = 0xaa;
    tmp[k + 1] = 0xbb;
    tb_raw(&b, tmp, k + 2);
    b.prev_ns = 1060;
    gmp_rec e = end_rec(1070, 3, 2, 0, 0);
    tb_rec(&b, &e);
    tb_frame(&b);

    for (int fo = 0; fo <= 1; fo++) {
        gmp_reader *r;
        assert_int_equal(tb_open(&r, &b, SIZE_MAX, fo, 0), GMP_OK);
        tb_out o = {0};
        assert_int_equal(tb_read_all(r, &o), GMP_END);
        const gmp_reader_stats *st = gmp_reader_get_stats(r);
        assert_int_equal(st->unknown_records, 2);
        assert_int_equal(st->records[0x50], 1);
        assert_int_equal(st->records[0x28], 1);
        size_t allocs = 0;
        for (size_t i = 0; i < o.n; i++) {
            if (o.recs[i].type == GMP_REC_ALLOC) {
                assert_int_equal(o.recs[i].time_ns, allocs ? 1060 : 1010);
                assert_int_equal(o.recs[i].u.mem.address, allocs + 1);
                assert_int_equal(o.recs[i].tid, 7);
                allocs++;
            }
            if (o.recs[i].type == 0x28) {
                assert_true(fo);
                assert_int_equal(o.recs[i].time_ns, 1050);
            }
        }
        assert_int_equal(allocs, 2);
        assert_int_equal(o.n, fo ? 7 : 4); /* header, [0x50, buffer,] 2 allocs, [0x28,] end */
        char line[256];
        assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 1);
        assert_string_equal(line, "complete: 3 events, END totals match");
        tb_out_free(&o);
        gmp_reader_close(r);
    }
    tb_free(&b);
}

/* Each case builds a trace whose last record is bad. */
typedef void (*bad_fn)(tb *b);

static void defs(tb *b)
{
    tb_string(b, 1, "cudaMalloc");
    tb_string(b, 2, "train");
    gmp_rec g = mk(GMP_REC_RANGE);
    g.u.range.id = 1;
    g.u.range.name = 2;
    tb_rec(b, &g);
    gmp_rec s = mk(GMP_REC_STACK);
    s.u.stack.id = 1;
    s.u.stack.address = 42;
    tb_rec(b, &s);
}

static void bad_api(tb *b)
{
    tb_buffer(b, 1, 0);
    gmp_rec a = ev_alloc(5, 1);
    a.u.mem.api = 3;
    tb_rec(b, &a);
}
static void bad_stack(tb *b)
{
    tb_buffer(b, 1, 0);
    gmp_rec a = ev_alloc(5, 1);
    a.u.mem.stack = 2;
    tb_rec(b, &a);
}
static void bad_range(tb *b)
{
    tb_buffer(b, 1, 0);
    gmp_rec a = ev_alloc(5, 1);
    a.type = GMP_REC_FREE;
    a.u.mem.range = 9;
    tb_rec(b, &a);
}
static void bad_oom(tb *b)
{
    tb_buffer(b, 1, 0);
    gmp_rec a = mk(GMP_REC_OOM);
    a.u.oom.api = 1;
    a.u.oom.stack = 77;
    tb_rec(b, &a);
}
static void bad_push(tb *b)
{
    tb_buffer(b, 1, 0);
    gmp_rec a = mk(GMP_REC_RANGE_PUSH);
    a.u.rev.range = 2;
    tb_rec(b, &a);
}
static void bad_alert(tb *b)
{
    tb_buffer(b, 1, 0);
    gmp_rec a = mk(GMP_REC_ALERT);
    a.u.alert.range = 5;
    tb_rec(b, &a);
}
static void bad_range_parent(tb *b)
{
    gmp_rec g = mk(GMP_REC_RANGE);
    g.u.range.id = 2;
    g.u.range.parent = 3;
    g.u.range.name = 2;
    tb_rec(b, &g);
}
static void bad_range_name(tb *b)
{
    gmp_rec g = mk(GMP_REC_RANGE);
    g.u.range.id = 2;
    g.u.range.parent = 1;
    g.u.range.name = 3;
    tb_rec(b, &g);
}
static void bad_range_domain(tb *b)
{
    gmp_rec g = mk(GMP_REC_RANGE);
    g.u.range.id = 2;
    g.u.range.domain = 4000000000u;
    g.u.range.name = 1;
    tb_rec(b, &g);
}
static void bad_stack_parent(tb *b)
{
    gmp_rec s = mk(GMP_REC_STACK);
    s.u.stack.id = 2;
    s.u.stack.parent = 2;
    tb_rec(b, &s);
}
static void bad_python_file(tb *b)
{
    gmp_rec s = mk(GMP_REC_STACK);
    s.u.stack.id = 2;
    s.u.stack.kind = GMP_FRAME_PYTHON;
    s.u.stack.file = 1;
    s.u.stack.function = 3;
    tb_rec(b, &s);
}
static void bad_dup_string(tb *b)
{
    tb_string(b, 2, "again");
}
static void bad_dup_range(tb *b)
{
    gmp_rec g = mk(GMP_REC_RANGE);
    g.u.range.id = 1;
    tb_rec(b, &g);
}
static void bad_no_buffer(tb *b)
{
    tb_buffer(b, 1, 0);
    tb_frame(b); /* the BUFFER of the previous frame does not carry over */
    gmp_rec a = ev_alloc(5, 1);
    tb_rec(b, &a);
}
static void bad_second_header(tb *b)
{
    gmp_rec h = tb_header();
    tb_rec(b, &h);
}
static void bad_span(tb *b)
{
    gmp_rec a = ev_alloc(5, 1);
    tb_buffer(b, 1, 0);
    tb_rec(b, &a);
    b->rlen -= 3; /* the record's last bytes go to the next frame */
    tb_frame(b);
    tb_buffer(b, 1, 0);
}
static void bad_kind(tb *b)
{
    tb_buffer(b, 1, 0);
    static const uint8_t rec[] = {GMP_REC_ALLOC, 14, 0, 0, 30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    tb_raw(b, rec, sizeof rec);
}
static void bad_varint(tb *b)
{
    tb_buffer(b, 1, 0);
    static const uint8_t rec[] = {GMP_REC_MARK, 11,   0,    0xff, 0xff, 0xff, 0xff,
                                  0xff,         0xff, 0xff, 0xff, 0xff, 0xff};
    tb_raw(b, rec, sizeof rec);
}
static void bad_u32(tb *b)
{
    tb_buffer(b, 1, 0);
    static const uint8_t rec[] = {GMP_REC_MARK, 6, 0, 0x80, 0x80, 0x80, 0x80, 0x10};
    tb_raw(b, rec, sizeof rec);
}
static void bad_dup_module(tb *b)
{
    gmp_rec m = mk(GMP_REC_MODULE);
    m.u.module.id = 3;
    tb_rec(b, &m);
    tb_rec(b, &m);
}
static void bad_unknown_event_no_dt(tb *b)
{
    static const uint8_t rec[] = {0x2b, 0};
    tb_buffer(b, 1, 0);
    tb_raw(b, rec, sizeof rec);
}
static void bad_unknown_event_before_buffer(tb *b)
{
    static const uint8_t rec[] = {0x2a, 1, 0};
    tb_frame(b);
    tb_raw(b, rec, sizeof rec);
}

static void test_bad_input(void **state)
{
    (void)state;
    static const struct {
        bad_fn fn;
        const char *needle;
    } cases[] = {
        {bad_api, "undefined string 3"},
        {bad_stack, "undefined stack 2"},
        {bad_range, "undefined range 9"},
        {bad_oom, "undefined stack 77"},
        {bad_push, "undefined range 2"},
        {bad_alert, "undefined range 5"},
        {bad_range_parent, "range parent refers to undefined range 3"},
        {bad_range_name, "range name refers to undefined string 3"},
        {bad_range_domain, "undefined string 4000000000"},
        {bad_stack_parent, "stack parent refers to undefined stack 2"},
        {bad_python_file, "undefined string 3"},
        {bad_dup_string, "string id 2 defined twice"},
        {bad_dup_range, "range id 1 defined twice"},
        {bad_no_buffer, "before any BUFFER"},
        {bad_second_header, "second HEADER"},
        {bad_span, "span frames"},
        {bad_kind, "memory kind"},
        {bad_varint, "varint"},
        {bad_u32, "32-bit"},
        {bad_unknown_event_before_buffer, "before any BUFFER"},
        {bad_dup_module, "module id 3 defined twice"},
        {bad_unknown_event_no_dt, "no time delta"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int fo = 0; fo <= 1; fo++) {
            tb b;
            tb_init(&b);
            tb_start(&b, NULL);
            defs(&b);
            cases[c].fn(&b);
            tb_frame(&b);
            gmp_reader *r;
            assert_int_equal(tb_open(&r, &b, SIZE_MAX, fo, 0), GMP_OK);
            tb_out o = {0};
            gmp_err e = tb_read_all(r, &o);
            if (e != GMP_ERR_FORMAT || !strstr(gmp_reader_error(r), cases[c].needle) ||
                !strstr(gmp_reader_error(r), "at byte"))
                fail_msg("case %zu: %s: \"%s\"", c, gmp_err_name(e), gmp_reader_error(r));
            const gmp_rec *x;
            assert_int_equal(gmp_reader_next(r, &x), GMP_ERR_FORMAT); /* sticky */
            char line[1024];
            assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 0);
            assert_non_null(strstr(line, "incomplete"));
            tb_out_free(&o);
            gmp_reader_close(r);
            tb_free(&b);
        }
    }
}

static void test_version_too_new(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    gmp_rec h = tb_header();
    h.u.header.format_version = 3;
    h.u.header.min_reader_version = GMP_READER_VERSION + 1;
    tb_start(&b, &h);
    tb_frame(&b);
    gmp_reader *r = (gmp_reader *)1;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_ERR_VERSION);
    assert_null(r);
    assert_non_null(strstr(gmp_reader_open_error(), "newer gpumemprof"));
    tb_free(&b);

    /* a newer format that an old reader may read: accepted */
    tb_init(&b);
    h.u.header.min_reader_version = GMP_READER_VERSION;
    tb_start(&b, &h);
    tb_frame(&b);
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    assert_int_equal(gmp_reader_header(r)->format_version, 3);
    gmp_reader_close(r);
    tb_free(&b);
}

static void test_not_a_trace(void **state)
{
    (void)state;
    gmp_reader *r;
    assert_int_equal(gmp_reader_open_mem(&r, "", 0, NULL), GMP_ERR_TRUNCATED);
    assert_non_null(strstr(gmp_reader_open_error(), "empty"));
    assert_int_equal(gmp_reader_open_mem(&r, "hello world, not zstd", 21, NULL), GMP_ERR_FORMAT);
    assert_non_null(strstr(gmp_reader_open_error(), "byte 0"));

    tb b;
    tb_init(&b);
    tb_raw(&b, "GMPTRACX", 8);
    gmp_rec h = tb_header();
    tb_rec(&b, &h);
    tb_frame(&b);
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_ERR_FORMAT);
    assert_non_null(strstr(gmp_reader_open_error(), "magic"));
    tb_free(&b);

    tb_init(&b);
    tb_raw(&b, GMP_TRACE_MAGIC, 8);
    tb_string(&b, 1, "x");
    tb_frame(&b);
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_ERR_FORMAT);
    assert_non_null(strstr(gmp_reader_open_error(), "not a HEADER"));
    /* cut in the first frame */
    assert_int_equal(tb_open(&r, &b, b.len - 1, 0, 0), GMP_ERR_TRUNCATED);
    assert_non_null(strstr(gmp_reader_open_error(), "first frame"));
    tb_free(&b);

    /* a HEADER cut short, and one with format version 0 */
    tb_init(&b);
    tb_raw(&b, GMP_TRACE_MAGIC, 8);
    static const uint8_t short_header[] = {GMP_REC_HEADER, 2, 1, 1};
    tb_raw(&b, short_header, sizeof short_header);
    tb_frame(&b);
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_ERR_FORMAT);
    assert_non_null(strstr(gmp_reader_open_error(), "bad HEADER"));
    tb_free(&b);
    tb_init(&b);
    h.u.header.format_version = 0;
    tb_start(&b, &h);
    tb_frame(&b);
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_ERR_FORMAT);
    assert_non_null(strstr(gmp_reader_open_error(), "format version 0"));
    tb_free(&b);

    /* frames without checksums are refused */
    tb_init(&b);
    b.no_checksum = 1;
    tb_start(&b, NULL);
    tb_frame(&b);
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_ERR_FORMAT);
    assert_non_null(strstr(gmp_reader_open_error(), "checksum"));
    tb_free(&b);

    assert_int_equal(gmp_reader_open(&r, "/nonexistent/trace.zst", NULL), GMP_ERR_IO);
    assert_non_null(strstr(gmp_reader_open_error(), "/nonexistent/trace.zst"));
    assert_int_equal(gmp_reader_open(&r, "/", NULL), GMP_ERR_IO);
}

/* Three threads, buffers interleaved across frames, SYNCs. Definitions (returned at once, in file
 * order) placed after each SYNC show exactly when the window was released. */
static void test_merge_three_threads(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    tb_string(&b, 1, "r");
    gmp_rec g = mk(GMP_REC_RANGE);
    g.u.range.id = 1;
    g.u.range.name = 1;
    tb_rec(&b, &g);
    /* times: thread t (1..3) has events at 10*k + t for k = 0..29, in buffers of 5 */
    uint64_t expect_order[90];
    size_t ne = 0;
    uint32_t next_str = 2;
    uint64_t sync_at[6];
    size_t nsync = 0;
    for (int round = 0; round < 6; round++) {
        for (uint32_t t = 3; t >= 1; t--) {
            tb_buffer(&b, 100 + t, (uint64_t)round * 50);
            for (int k = 0; k < 5; k++) {
                uint64_t time = 10 * (uint64_t)(round * 5 + k) + t;
                gmp_rec m = ev_mark(time, 1);
                tb_rec(&b, &m);
            }
            if (t == 2)
                tb_frame(&b);
        }
        uint64_t T = 10 * (uint64_t)(round * 5 + 4) + 3;
        if (round % 2 == 1 || round == 5) {
            tb_sync(&b, T);
            char s[16];
            snprintf(s, sizeof s, "s%d", round);
            tb_string(&b, next_str++, s); /* a marker */
            sync_at[nsync++] = T;
        }
        tb_frame(&b);
    }
    for (int k = 0; k < 30; k++)
        for (uint32_t t = 1; t <= 3; t++)
            expect_order[ne++] = 10 * (uint64_t)k + t;
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    size_t ei = 0, si = 0;
    for (size_t i = 0; i < o.n; i++) {
        const gmp_rec *x = &o.recs[i];
        if (x->type == GMP_REC_MARK) {
            assert_true(ei < ne);
            assert_int_equal(x->time_ns, expect_order[ei]);
            assert_int_equal(x->tid, 100 + x->time_ns % 10);
            ei++;
        } else if (x->type == GMP_REC_STRING && x->u.string.id >= 2) {
            /* every event up to the SYNC was returned before this marker, none after it */
            assert_true(si < nsync);
            assert_true(ei > 0 && expect_order[ei - 1] <= sync_at[si]);
            assert_true(ei == ne || expect_order[ei] > sync_at[si]);
            si++;
        }
    }
    assert_int_equal(ei, ne);
    assert_int_equal(si, nsync);
    assert_int_equal(gmp_reader_get_stats(r)->late_events, 0);
    assert_int_equal(gmp_reader_get_stats(r)->events, 90);
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

/* gmp_reader_peek_mem: whenever it answers, it answers with the ALLOC/FREE that gmp_reader_next
 * returns `ahead` calls later; it answers for most events of a merged trace; never in file order.
 * The same with read-ahead. gmp_reader_peek: the same for every event type (POOL records here). */
static void test_peek_mem(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    /* two threads, interleaved times; ALLOCs, FREEs and MARKs (which peek must skip) */
    for (int round = 0; round < 8; round++) {
        for (uint32_t t = 1; t <= 2; t++) {
            tb_buffer(&b, t, (uint64_t)round * 1000);
            for (int k = 0; k < 40; k++) {
                uint64_t time = (uint64_t)round * 1000 + (uint64_t)k * 20 + t;
                uint64_t addr = 0x10000 + ((uint64_t)round * 80 + (uint64_t)k * 2 + t) * 256;
                gmp_rec r = k % 5 == 4 ? ev_mark(time, 0) : ev_alloc(time, addr);
                if (k % 3 == 1)
                    r.type = GMP_REC_FREE;
                if (k % 7 == 6) {
                    r = mk(GMP_REC_POOL);
                    r.time_ns = time;
                    r.u.pool.op = GMP_POOL_RESERVED;
                    r.u.pool.pool = addr;
                    r.u.pool.value = addr * 3;
                }
                tb_rec(&b, &r);
            }
        }
        tb_sync(&b, (uint64_t)round * 1000 + 999);
        tb_frame(&b);
    }
    for (int mode = 0; mode < 4; mode++) {
        int file_order = mode & 1, readahead = mode >> 1;
        gmp_reader *r;
        assert_int_equal(tb_open(&r, &b, SIZE_MAX, file_order, 0), GMP_OK);
        if (readahead) /* peeks look into the window being returned */
            assert_int_equal(gmp_reader_readahead(r, 0), GMP_OK);
        tb_out o = {0};
        /* peeks taken before each next: (index of the record it names, its copy) */
        enum { MAXP = 4096 };
        static size_t at[MAXP];
        static gmp_rec_mem pm[MAXP];
        static size_t gat[MAXP]; /* gmp_reader_peek: index, type, payload */
        static unsigned gtype[MAXP];
        static gmp_rec_pool gpool[MAXP];
        static uint64_t gaddr[MAXP];
        size_t np = 0, ng = 0, calls = 0;
        const gmp_rec *rec;
        gmp_err e;
        for (;;) {
            for (size_t ahead = 1; ahead <= 20; ahead += 3) {
                const gmp_rec_mem *m = gmp_reader_peek_mem(r, ahead);
                if (m && np < MAXP) {
                    at[np] = calls + ahead - 1;
                    pm[np++] = *m;
                }
                unsigned ty = 99;
                const void *g = gmp_reader_peek(r, ahead, &ty);
                assert_true((g == NULL) == (ty == 0));
                assert_true(!m ||
                            (g == (const void *)m && (ty == GMP_REC_ALLOC || ty == GMP_REC_FREE)));
                if (g && ng < MAXP) {
                    gat[ng] = calls + ahead - 1;
                    gtype[ng] = ty;
                    if (ty == GMP_REC_POOL)
                        gpool[ng] = *(const gmp_rec_pool *)g;
                    else if (ty == GMP_REC_ALLOC || ty == GMP_REC_FREE)
                        gaddr[ng] = ((const gmp_rec_mem *)g)->address;
                    ng++;
                }
            }
            assert_null(gmp_reader_peek_mem(r, 0));
            unsigned t0 = 99;
            assert_null(gmp_reader_peek(r, 0, &t0));
            assert_int_equal(t0, 0);
            if ((e = gmp_reader_next(r, &rec)) != GMP_OK)
                break;
            calls++;
            if (o.n == o.cap) {
                o.cap = o.cap ? 2 * o.cap : 256;
                o.recs = realloc(o.recs, o.cap * sizeof *o.recs);
                assert_non_null(o.recs);
            }
            o.recs[o.n++] = *rec;
        }
        assert_int_equal(e, GMP_END);
        if (file_order) {
            assert_int_equal(np, 0);
        } else {
            assert_true(np > 8 * 80 * 4 / 5); /* most events were announced ahead */
            for (size_t i = 0; i < np; i++) {
                assert_true(at[i] < o.n);
                const gmp_rec *x = &o.recs[at[i]];
                assert_true(x->type == GMP_REC_ALLOC || x->type == GMP_REC_FREE);
                assert_int_equal(pm[i].address, x->u.mem.address);
                assert_int_equal(pm[i].size, x->u.mem.size);
                assert_int_equal(pm[i].kind, x->u.mem.kind);
            }
        }
        if (file_order) {
            assert_int_equal(ng, 0);
        } else {
            size_t npool = 0;
            assert_true(ng >= np);
            for (size_t i = 0; i < ng; i++) {
                assert_true(gat[i] < o.n);
                const gmp_rec *x = &o.recs[gat[i]];
                assert_int_equal(gtype[i], x->type);
                if (x->type == GMP_REC_POOL) {
                    npool++;
                    assert_int_equal(gpool[i].pool, x->u.pool.pool);
                    assert_int_equal(gpool[i].value, x->u.pool.value);
                    assert_int_equal(gpool[i].op, x->u.pool.op);
                } else if (x->type == GMP_REC_ALLOC || x->type == GMP_REC_FREE) {
                    assert_int_equal(gaddr[i], x->u.mem.address);
                }
            }
            assert_true(npool > 8 * 2 * 5 / 2); /* POOL records were announced too */
        }
        free(o.recs);
        gmp_reader_close(r);
    }
    tb_free(&b);
}

static void test_ties_file_order(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    for (uint32_t t = 1; t <= 3; t++) {
        tb_buffer(&b, t, 0);
        for (int k = 0; k < 4; k++) {
            gmp_rec a = ev_alloc(100 + (k / 2) * 10, t * 10 + (uint64_t)k);
            tb_rec(&b, &a);
        }
    }
    tb_frame(&b);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    static const uint64_t want[] = {10, 11, 20, 21, 30, 31, 12, 13, 22, 23, 32, 33};
    assert_int_equal(o.n, 13);
    for (size_t i = 0; i < 12; i++)
        assert_int_equal(o.recs[i + 1].u.mem.address, want[i]);
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

static void test_late_events(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    tb_buffer(&b, 1, 0);
    gmp_rec a = ev_alloc(100, 1);
    tb_rec(&b, &a);
    a = ev_alloc(200, 2);
    tb_rec(&b, &a);
    tb_sync(&b, 200);
    tb_frame(&b);
    /* activity records with producer times: 150 is before 200 which was returned */
    tb_buffer(&b, 2, 0);
    a = ev_alloc(150, 3);
    a.u.mem.flags = GMP_MEMF_ACTIVITY;
    tb_rec(&b, &a);
    a = ev_alloc(250, 4);
    tb_rec(&b, &a);
    a = ev_alloc(120, 5); /* late too */
    tb_rec(&b, &a);
    tb_frame(&b);
    tb_buffer(&b, 1, 210);
    a = ev_alloc(210, 6);
    tb_rec(&b, &a);
    tb_frame(&b);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    static const uint64_t want[] = {1, 2, 3, 5, 6, 4};
    assert_int_equal(o.n, 7);
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(o.recs[i + 1].u.mem.address, want[i]);
    assert_int_equal(gmp_reader_get_stats(r)->late_events, 2);
    assert_int_equal(gmp_reader_get_stats(r)->events, 6);
    char line[512];
    assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 0);
    assert_non_null(strstr(line, "no END record after 6 events"));
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

static void test_window_bound(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    tb_buffer(&b, 1, 0);
    for (uint32_t i = 0; i < 100; i++) {
        if (i == 50)
            tb_string(&b, 1, "marker");
        gmp_rec a = ev_alloc(1000 - i, i); /* decreasing: each is its own run */
        tb_rec(&b, &a);
    }
    tb_frame(&b);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 10), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(o.n, 102);
    size_t marker = 0;
    for (size_t i = 0; i < o.n; i++)
        if (o.recs[i].type == GMP_REC_STRING)
            marker = i;
    /* the window never held more than 11 events: the marker came after at least 40 events */
    assert_true(marker >= 41 && marker <= 52);
    /* all returned; everything after the first window is late (times decrease) */
    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    assert_int_equal(st->events, 100);
    assert_true(st->late_events >= 80);
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);

    /* increasing times, no SYNC, small window: all returned in order, nothing late */
    tb_init(&b);
    tb_start(&b, NULL);
    for (uint32_t t = 1; t <= 3; t++) {
        tb_buffer(&b, t, 0);
        for (uint32_t i = 0; i < 30; i++) {
            gmp_rec a = ev_alloc(10 * i + t, i);
            tb_rec(&b, &a);
        }
        tb_frame(&b);
    }
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 1000), GMP_OK);
    memset(&o, 0, sizeof o);
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(o.n, 91);
    for (size_t i = 2; i < o.n; i++)
        assert_true(o.recs[i].time_ns > o.recs[i - 1].time_ns);
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

static void test_skippable_frames(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    static const uint8_t skip[] = {0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'};
    tb_file_bytes(&b, skip, sizeof skip);
    tb_start(&b, NULL);
    tb_frame(&b);
    tb_file_bytes(&b, skip, sizeof skip);
    tb_buffer(&b, 1, 0);
    gmp_rec e = end_rec(5, 0, 0, 0, 0);
    tb_rec(&b, &e);
    tb_frame(&b);
    tb_file_bytes(&b, skip, sizeof skip);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(o.n, 2);
    const gmp_reader_stats *st = gmp_reader_get_stats(r);
    assert_int_equal(st->frames, 5);
    assert_int_equal(st->bytes_read, b.len);
    assert_int_equal(gmp_reader_completeness(r, NULL, 0), 1);
    tb_out_free(&o);
    gmp_reader_close(r);
    /* cut inside the last skippable frame */
    assert_int_equal(tb_open(&r, &b, b.len - 2, 0, 0), GMP_OK);
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(gmp_reader_get_stats(r)->truncated, 1);
    assert_int_equal(gmp_reader_get_stats(r)->bytes_discarded, sizeof skip - 2);
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

static void test_completeness_lines(void **state)
{
    (void)state;
    char line[512];
    tb b;
    gmp_reader *r;
    tb_out o = {0};
    /* END totals disagree */
    tb_init(&b);
    tb_start(&b, NULL);
    tb_buffer(&b, 1, 0);
    for (int i = 0; i < 90; i++) {
        gmp_rec a = ev_alloc(10 + (uint64_t)i, (uint64_t)i);
        tb_rec(&b, &a);
    }
    gmp_rec e = end_rec(500, 100, 95, 3, 0);
    tb_rec(&b, &e);
    tb_frame(&b);
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 0);
    assert_string_equal(line, "incomplete: END says 100 events, 90 read; 95 allocs, 90 read; 3 "
                              "frees, 0 read");
    gmp_reader_close(r);
    tb_out_free(&o);
    /* a small buffer gets a NUL-terminated prefix */
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(gmp_reader_completeness(r, line, 11), 0);
    assert_string_equal(line, "incomplete");
    gmp_reader_close(r);
    tb_out_free(&o);
    tb_free(&b);

    /* cut file */
    tb_init(&b);
    tb_start(&b, NULL);
    tb_frame(&b);
    size_t first = b.len;
    tb_buffer(&b, 1, 0);
    gmp_rec a = ev_alloc(10, 1);
    tb_rec(&b, &a);
    tb_frame(&b);
    assert_int_equal(tb_open(&r, &b, b.len - 5, 0, 0), GMP_OK);
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 0);
    char want[512];
    snprintf(want, sizeof want,
             "incomplete: file cut at byte %zu of %zu (%zu bytes after the last whole frame "
             "discarded); no END record — the program was killed or the disk filled; 0 events "
             "read",
             first, b.len - 5, b.len - 5 - first);
    assert_string_equal(line, want);
    gmp_reader_close(r);
    tb_out_free(&o);
    tb_free(&b);
}

static void test_redefine_device_thread(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    gmp_rec t = mk(GMP_REC_THREAD);
    t.u.thread.tid = 5;
    t.u.thread.name = (gmp_str){"main", 4};
    tb_rec(&b, &t);
    t.u.thread.name = (gmp_str){"worker", 6};
    tb_rec(&b, &t);
    gmp_rec d = mk(GMP_REC_DEVICE);
    for (uint32_t i = 0; i < 3; i++) {
        d.u.device.id = 2 - i;
        d.u.device.name = (gmp_str){"gpu", 3};
        tb_rec(&b, &d);
    }
    d.u.device.id = 1;
    d.u.device.name = (gmp_str){"gpu1b", 5};
    tb_rec(&b, &d);
    tb_frame(&b);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    const gmp_rec *x;
    assert_int_equal(gmp_reader_next(r, &x), GMP_OK); /* header */
    assert_int_equal(gmp_reader_next(r, &x), GMP_OK);
    const gmp_rec_thread *first = gmp_reader_thread(r, 5);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_memory_equal(gmp_reader_thread(r, 5)->name.ptr, "worker", 6);
    assert_memory_equal(first->name.ptr, "main", 4); /* still valid */
    assert_int_equal(gmp_reader_device_count(r), 3);
    assert_int_equal(gmp_reader_device_at(r, 0)->id, 2);
    assert_memory_equal(gmp_reader_device_at(r, 1)->name.ptr, "gpu1b", 5);
    assert_memory_equal(gmp_reader_device(r, 1)->name.ptr, "gpu1b", 5);
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

/* Large ids (hashed) and many ids (dense) side by side. */
static void test_sparse_ids(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    static const uint32_t big[] = {4294967295u, 4294967294u, 3000000000u, 70000, 1u << 31};
    for (size_t i = 0; i < 5; i++)
        tb_string(&b, big[i], "big");
    for (uint32_t i = 1; i <= 20000; i++)
        tb_string(&b, i, "small");
    tb_buffer(&b, 1, 0);
    for (size_t i = 0; i < 5; i++) {
        gmp_rec a = ev_alloc(10, 1);
        a.u.mem.api = big[i];
        tb_rec(&b, &a);
    }
    tb_frame(&b);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_END);
    assert_int_equal(o.n, 1 + 20005 + 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(gmp_reader_string(r, big[i]).len, 3);
    assert_int_equal(gmp_reader_string(r, 20000).len, 5);
    assert_int_equal(gmp_reader_string(r, 20001).len, 0);
    assert_int_equal(gmp_reader_string(r, 69999).len, 0);
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

/* A file bigger than the reader's chunk, with frames spanning chunk boundaries; the same records
 * as over memory. */
static void test_file_chunks(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    b.level = -5; /* fast, poor compression: a big file */
    tb_start(&b, NULL);
    tb_frame(&b);
    uint64_t rng = 7;
    for (int f = 0; f < 40; f++) {
        tb_buffer(&b, (uint32_t)f % 3, 0);
        for (int i = 0; i < 5000; i++) {
            gmp_rec a = ev_alloc((uint64_t)f * 10000 + (uint64_t)i, tb_rand(&rng));
            a.u.mem.size = tb_rand(&rng);
            a.u.mem.correlation = tb_rand(&rng);
            tb_rec(&b, &a);
        }
        tb_sync(&b, (uint64_t)f * 10000 + 4999);
        tb_frame(&b);
    }
    assert_true(b.len > 3 * (1u << 20));
    char path[] = "/tmp/gmp_reader_testXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tb_write(&b, path), 0);
    gmp_reader *rm, *rf;
    gmp_reader_opts opts = {0, 0};
    assert_int_equal(tb_open(&rm, &b, SIZE_MAX, 0, 0), GMP_OK);
    assert_int_equal(gmp_reader_open(&rf, path, &opts), GMP_OK);
    tb_out om = {0}, of = {0};
    assert_int_equal(tb_read_all(rm, &om), GMP_END);
    assert_int_equal(tb_read_all(rf, &of), GMP_END);
    assert_int_equal(om.n, 200001);
    assert_int_equal(of.n, om.n);
    for (size_t i = 0; i < om.n; i++)
        assert_true(tb_rec_equal(&om.recs[i], &of.recs[i]));
    assert_int_equal(gmp_reader_get_stats(rf)->file_bytes, b.len);
    assert_int_equal(gmp_reader_get_stats(rf)->bytes_read, b.len);
    gmp_reader_close(rf);
    tb_out_free(&of);
    /* cut through the file: the same as cutting the memory */
    assert_int_equal(truncate(path, (off_t)(b.frame_end[20] + 1000)), 0);
    assert_int_equal(gmp_reader_open(&rf, path, &opts), GMP_OK);
    assert_int_equal(tb_read_all(rf, &of), GMP_END);
    assert_int_equal(of.n, 1 + 20 * 5000);
    assert_int_equal(gmp_reader_get_stats(rf)->truncated, 1);
    assert_int_equal(gmp_reader_get_stats(rf)->bytes_discarded, 1000);
    gmp_reader_close(rf);
    gmp_reader_close(rm);
    tb_out_free(&of);
    tb_out_free(&om);
    unlink(path);
    tb_free(&b);
}

/* Frames bigger than the reader's first input buffer (read from a file), and frames that do not
 * declare their decompressed size. */
static void test_big_frames_unknown_size(void **state)
{
    (void)state;
    for (int unknown = 0; unknown <= 1; unknown++) {
        tb b;
        tb_init(&b);
        b.no_content_size = unknown;
        tb_start(&b, NULL);
        tb_frame(&b);
        uint64_t rng = 5;
        static char junk[60000];
        uint32_t id = 0;
        for (int f = 0; f < 3; f++) {
            for (int i = 0; i < 60; i++) { /* ~3.6 MB of incompressible strings */
                for (size_t k = 0; k < sizeof junk; k++)
                    junk[k] = (char)(1 + tb_rand(&rng) % 255);
                gmp_rec s = mk(GMP_REC_STRING);
                s.u.string.id = ++id;
                s.u.string.value = (gmp_str){junk, sizeof junk};
                tb_rec(&b, &s);
            }
            tb_frame(&b);
        }
        assert_true(b.frame_end[1] - b.frame_end[0] > (2u << 20));
        char path[] = "/tmp/gmp_reader_bigXXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(tb_write(&b, path), 0);
        gmp_reader *r;
        gmp_reader_opts o = {1, 0};
        assert_int_equal(gmp_reader_open(&r, path, &o), GMP_OK);
        tb_out out = {0};
        assert_int_equal(tb_read_all(r, &out), GMP_END);
        assert_int_equal(out.n, 1 + 180);
        assert_int_equal(gmp_reader_string(r, 180).len, sizeof junk);
        assert_int_equal(gmp_reader_get_stats(r)->bytes_read, b.len);
        tb_out_free(&out);
        gmp_reader_close(r);
        /* cut in the middle of the big last frame */
        assert_int_equal(truncate(path, (off_t)(b.frame_end[2] + 3000000)), 0);
        assert_int_equal(gmp_reader_open(&r, path, &o), GMP_OK);
        assert_int_equal(tb_read_all(r, &out), GMP_END);
        assert_int_equal(out.n, 1 + 120);
        assert_int_equal(gmp_reader_get_stats(r)->bytes_discarded, 3000000);
        tb_out_free(&out);
        gmp_reader_close(r);
        unlink(path);
        tb_free(&b);
    }
}

/* Bad input after events still held in the window: they are returned first, then the error. */
static void test_window_before_error(void **state)
{
    (void)state;
    tb b;
    tb_init(&b);
    tb_start(&b, NULL);
    tb_frame(&b);
    tb_buffer(&b, 1, 0);
    for (int i = 0; i < 3; i++) {
        gmp_rec a = ev_alloc(30 - 10 * (uint64_t)i, (uint64_t)i);
        tb_rec(&b, &a);
    }
    tb_frame(&b);
    tb_file_bytes(&b, "garbage!", 8);
    gmp_reader *r;
    assert_int_equal(tb_open(&r, &b, SIZE_MAX, 0, 0), GMP_OK);
    tb_out o = {0};
    assert_int_equal(tb_read_all(r, &o), GMP_ERR_FORMAT);
    assert_int_equal(o.n, 4);
    assert_int_equal(o.recs[1].time_ns, 10);
    assert_int_equal(o.recs[3].time_ns, 30);
    const gmp_rec *x;
    assert_int_equal(gmp_reader_next(r, &x), GMP_ERR_FORMAT);
    assert_non_null(strstr(gmp_reader_error(r), "byte"));
    char line[512];
    assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 0);
    assert_non_null(strstr(line, "incomplete: 3 events read, then: corrupt trace"));
    tb_out_free(&o);
    gmp_reader_close(r);
    tb_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_record_file_order),
        cmocka_unit_test(test_every_record_time_order),
        cmocka_unit_test(test_unknown_types),
        cmocka_unit_test(test_header_rank_fields),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_version_too_new),
        cmocka_unit_test(test_not_a_trace),
        cmocka_unit_test(test_merge_three_threads),
        cmocka_unit_test(test_peek_mem),
        cmocka_unit_test(test_ties_file_order),
        cmocka_unit_test(test_late_events),
        cmocka_unit_test(test_window_bound),
        cmocka_unit_test(test_skippable_frames),
        cmocka_unit_test(test_completeness_lines),
        cmocka_unit_test(test_redefine_device_thread),
        cmocka_unit_test(test_sparse_ids),
        cmocka_unit_test(test_file_chunks),
        cmocka_unit_test(test_big_frames_unknown_size),
        cmocka_unit_test(test_window_before_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
