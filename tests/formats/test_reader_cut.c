/* Cut and damaged files: a trace cut at every frame boundary and at a few hundred random bytes
 * reads exactly the records of its whole frames, with the truncated flag and the discarded byte
 * count exact; random byte flips in compressed frames give GMP_ERR_FORMAT with an offset (or, where
 * the flip makes the frame look longer than the file, a cut), and never a record that was not
 * written. */
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

#define NFRAMES 60

typedef struct built {
    tb b;
    size_t cum[NFRAMES]; /* records (file order) in frames 0..k */
    size_t nrec;
} built;

static void build(built *t)
{
    memset(t, 0, sizeof *t);
    tb_init(&t->b);
    uint64_t rng = 99;
    tb_start(&t->b, NULL);
    size_t nrec = 1;
    uint32_t nstr = 0;
    uint64_t now = 1000, evs = 0, allocs = 0, frees = 0;
    for (int f = 0; f < NFRAMES; f++) {
        if (f > 0) {
            int nd = (int)(tb_rand(&rng) % 3);
            for (int i = 0; i < nd; i++, nrec++)
                tb_string(&t->b, ++nstr, "name");
            uint32_t tid = (uint32_t)(tb_rand(&rng) % 4);
            tb_buffer(&t->b, tid, now);
            nrec++;
            int ne = (int)(tb_rand(&rng) % 200);
            if (f == NFRAMES - 1)
                ne = 0;
            for (int i = 0; i < ne; i++, nrec++) {
                gmp_rec e;
                tb_random_rec(&e, i % 2 ? GMP_REC_ALLOC : GMP_REC_FREE, &rng, nstr);
                e.u.mem.stack = e.u.mem.range = 0;
                e.time_ns = now += tb_rand(&rng) % 100;
                tb_rec(&t->b, &e);
                evs++;
                allocs += i % 2;
                frees += 1 - i % 2;
            }
            if (f == NFRAMES - 1) {
                gmp_rec er;
                memset(&er, 0, sizeof er);
                er.type = GMP_REC_END;
                er.time_ns = now;
                er.u.end = (gmp_rec_end){evs, allocs, frees, 0};
                tb_rec(&t->b, &er);
                nrec++;
            } else {
                tb_sync(&t->b, now);
                nrec++;
            }
        }
        tb_frame(&t->b);
        t->cum[f] = nrec;
    }
    t->nrec = nrec;
}

static void read_prefix(const built *t, size_t n, int file_order, tb_out *o, gmp_err *e,
                        const gmp_reader_stats **st, gmp_reader **rp)
{
    gmp_reader *r;
    *e = tb_open(&r, &t->b, n, file_order, 0);
    *rp = NULL;
    if (*e)
        return;
    *e = tb_read_all(r, o);
    *st = gmp_reader_get_stats(r);
    *rp = r;
}

static void test_cut_at_frame_boundaries(void **state)
{
    (void)state;
    built t;
    build(&t);
    gmp_reader *r;
    tb_out full = {0};
    gmp_err e;
    const gmp_reader_stats *st = NULL;
    gmp_reader *rfull;
    read_prefix(&t, SIZE_MAX, 1, &full, &e, &st, &rfull);
    assert_int_equal(e, GMP_END);
    assert_int_equal(full.n, t.nrec);
    assert_int_equal(gmp_reader_completeness(rfull, NULL, 0), 1);
    for (int k = 0; k < NFRAMES; k++) {
        for (int fo = 0; fo <= 1; fo++) {
            tb_out o = {0};
            read_prefix(&t, t.b.frame_end[k], fo, &o, &e, &st, &r);
            assert_int_equal(e, GMP_END);
            assert_int_equal(st->truncated, 0);
            assert_int_equal(st->bytes_discarded, 0);
            assert_int_equal(st->frames, (uint64_t)k + 1);
            assert_int_equal(st->bytes_read, t.b.frame_end[k]);
            assert_int_equal(st->has_end, k == NFRAMES - 1);
            if (fo) {
                assert_int_equal(o.n, t.cum[k]);
                for (size_t i = 0; i < o.n; i++)
                    assert_true(tb_rec_equal(&o.recs[i], &full.recs[i]));
            } else {
                size_t want = 0;
                for (size_t i = 0; i < t.cum[k]; i++)
                    want +=
                        full.recs[i].type != GMP_REC_BUFFER && full.recs[i].type != GMP_REC_SYNC;
                assert_int_equal(o.n, want);
            }
            char line[512];
            assert_int_equal(gmp_reader_completeness(r, line, sizeof line), k == NFRAMES - 1);
            if (k < NFRAMES - 1)
                assert_non_null(strstr(line, "no END record"));
            tb_out_free(&o);
            gmp_reader_close(r);
        }
    }
    tb_out_free(&full);
    gmp_reader_close(rfull);
    tb_free(&t.b);
}

static void test_cut_at_random_bytes(void **state)
{
    (void)state;
    built t;
    build(&t);
    tb_out full = {0};
    gmp_err e;
    const gmp_reader_stats *st = NULL;
    gmp_reader *rfull, *r;
    read_prefix(&t, SIZE_MAX, 1, &full, &e, &st, &rfull);
    uint64_t rng = 12345;
    for (int i = 0; i < 400; i++) {
        size_t cut = (size_t)(tb_rand(&rng) % t.b.len);
        if (i < 8)
            cut = t.b.frame_end[0] * (size_t)i / 8; /* inside the first frame */
        if (cut < t.b.frame_end[0]) {
            assert_int_equal(tb_open(&r, &t.b, cut, 0, 0), GMP_ERR_TRUNCATED);
            assert_non_null(strstr(gmp_reader_open_error(), cut ? "first frame" : "empty"));
            continue;
        }
        int k = 0;
        while (k + 1 < NFRAMES && t.b.frame_end[k + 1] <= cut)
            k++;
        int fo = i % 2;
        tb_out o = {0};
        read_prefix(&t, cut, fo, &o, &e, &st, &r);
        assert_int_equal(e, GMP_END);
        size_t lost = cut - t.b.frame_end[k];
        assert_int_equal(st->truncated, lost != 0);
        assert_int_equal(st->bytes_discarded, lost);
        assert_int_equal(st->bytes_read, t.b.frame_end[k]);
        assert_int_equal(st->file_bytes, cut);
        if (fo) {
            assert_int_equal(o.n, t.cum[k]);
            for (size_t j = 0; j < o.n; j++)
                assert_true(tb_rec_equal(&o.recs[j], &full.recs[j]));
        }
        char line[512];
        assert_int_equal(gmp_reader_completeness(r, line, sizeof line), 0);
        if (lost) {
            char want[128];
            snprintf(want, sizeof want, "file cut at byte %zu of %zu (%zu bytes after",
                     t.b.frame_end[k], cut, lost);
            assert_non_null(strstr(line, want));
            assert_non_null(strstr(line, "no END record"));
        }
        tb_out_free(&o);
        gmp_reader_close(r);
    }
    tb_out_free(&full);
    gmp_reader_close(rfull);
    tb_free(&t.b);
}

static void test_flipped_bytes(void **state)
{
    (void)state;
    built t;
    build(&t);
    tb_out full = {0};
    gmp_err e;
    const gmp_reader_stats *st = NULL;
    gmp_reader *rfull, *r;
    read_prefix(&t, SIZE_MAX, 1, &full, &e, &st, &rfull);
    uint8_t *orig = malloc(t.b.len);
    memcpy(orig, t.b.file, t.b.len);
    uint64_t rng = 777;
    int format = 0, cuts = 0;
    for (int i = 0; i < 600; i++) {
        memcpy(t.b.file, orig, t.b.len);
        int nflip = 1 + (int)(tb_rand(&rng) % 3);
        size_t first = SIZE_MAX;
        for (int f = 0; f < nflip; f++) {
            size_t pos = t.b.frame_end[0] + (size_t)(tb_rand(&rng) % (t.b.len - t.b.frame_end[0]));
            t.b.file[pos] ^= (uint8_t)(1u << (tb_rand(&rng) % 8));
            if (pos < first)
                first = pos;
        }
        int fo = i % 2;
        tb_out o = {0};
        read_prefix(&t, SIZE_MAX, fo, &o, &e, &st, &r);
        assert_non_null(r);
        int k = 0; /* the damaged frame */
        while (t.b.frame_end[k] <= first)
            k++;
        if (e == GMP_ERR_FORMAT) {
            format++;
            assert_non_null(strstr(gmp_reader_error(r), "at byte"));
        } else {
            /* a damaged size field can make a frame look longer than the file */
            assert_int_equal(e, GMP_END);
            assert_int_equal(st->truncated, 1);
            cuts++;
        }
        /* nothing from the damaged frame or after it */
        if (fo) {
            assert_true(o.n <= t.cum[k - 1]);
            for (size_t j = 0; j < o.n; j++)
                assert_true(tb_rec_equal(&o.recs[j], &full.recs[j]));
        }
        tb_out_free(&o);
        gmp_reader_close(r);
    }
    print_message("flips: %d format errors, %d read as cut\n", format, cuts);
    assert_true(format > 500);
    free(orig);
    tb_out_free(&full);
    gmp_reader_close(rfull);
    tb_free(&t.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_at_frame_boundaries),
        cmocka_unit_test(test_cut_at_random_bytes),
        cmocka_unit_test(test_flipped_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
