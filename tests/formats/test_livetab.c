/* gmp_livetab unit tests: random puts, finds and deletes checked against a plain array
 * (model), with keys that all share one home slot (distances past 254, stored as "far"), with
 * keys clustered at the end of the table (wrap-around), iteration by slot index while deleting,
 * and the prefetch hints (which must not change anything). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_livetab.h"

/* put of a key that must be new */
static gmp_live_ent *ins(gmp_livetab *t, uint64_t key)
{
    int fresh = -1;
    gmp_live_ent *e = gmp_livetab_put(t, key, &fresh);
    assert_non_null(e);
    assert_int_equal(fresh, 1);
    return e;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Checks the whole table: n, every stored descriptor against its entry, every entry findable,
 * no key twice, and the linear-probing invariant (no empty slot between home and slot). */
static void check_table(const gmp_livetab *t, const uint64_t *model, size_t nm)
{
    assert_int_equal(t->n, nm);
    size_t used = 0;
    for (size_t i = 0; i < t->cap; i++) {
        if (!gmp_livetab_used(t, i))
            continue;
        used++;
        uint64_t h = gmp_livetab_hash(t->ent[i].key);
        size_t home = (size_t)h & (t->cap - 1), dist = (i - home) & (t->cap - 1);
        assert_int_equal(t->meta[i] >> 8, h >> 56);
        unsigned d = t->meta[i] & 0xff;
        if (dist < GMP_LIVETAB_FAR - 1)
            assert_int_equal(d, dist + 1);
        else
            assert_int_equal(d, GMP_LIVETAB_FAR);
        for (size_t j = home; j != i; j = (j + 1) & (t->cap - 1))
            assert_true(gmp_livetab_used(t, j));
        assert_ptr_equal(gmp_livetab_find(t, t->ent[i].key), &t->ent[i]);
    }
    assert_int_equal(used, nm);
    for (size_t k = 0; k < nm; k++) {
        gmp_live_ent *e = gmp_livetab_find(t, model[k]);
        assert_non_null(e);
        assert_int_equal(e->key, model[k]);
        assert_int_equal(e->size, model[k] ^ 0x5555);
    }
}

/* Random operations over the keys in pool (each key present at most once). */
static void run_ops(const uint64_t *pool, size_t npool, size_t ops, uint64_t seed, int hints)
{
    gmp_livetab t = {0};
    uint64_t *model = malloc(npool * sizeof *model);
    assert_non_null(model);
    size_t nm = 0;
    uint64_t s = seed;
    for (size_t op = 0; op < ops; op++) {
        uint64_t key = pool[rnd(&s) % npool];
        if (hints) {
            gmp_livetab_prefetch_meta(&t, gmp_livetab_hash(key));
            gmp_livetab_prefetch(&t, gmp_livetab_hash(key));
        }
        gmp_live_ent *e = gmp_livetab_find(&t, key);
        size_t k = 0;
        while (k < nm && model[k] != key)
            k++;
        if (k < nm) {
            assert_non_null(e);
            assert_int_equal(e->size, key ^ 0x5555);
            if (rnd(&s) % 4 == 0) { /* put of a present key: the same entry, untouched */
                int fresh = -1;
                size_t n0 = t.n;
                e = gmp_livetab_put(&t, key, &fresh);
                assert_int_equal(fresh, 0);
                assert_ptr_equal(e, gmp_livetab_find(&t, key));
                assert_int_equal(e->size, key ^ 0x5555);
                assert_int_equal(t.n, n0);
            }
            if (rnd(&s) % 3) { /* delete two in three of the present keys looked up */
                gmp_livetab_del(&t, e);
                model[k] = model[--nm];
                assert_null(gmp_livetab_find(&t, key));
            }
        } else {
            assert_null(e);
            e = ins(&t, key);
            assert_non_null(e);
            assert_int_equal(e->key, key);
            assert_int_equal(e->size, 0); /* zeroed */
            assert_int_equal(e->site, 0);
            e->size = key ^ 0x5555;
            model[nm++] = key;
        }
        if (op % 97 == 0 || op + 1 == ops)
            check_table(&t, model, nm);
    }
    /* drain */
    while (nm) {
        gmp_live_ent *e = gmp_livetab_find(&t, model[nm - 1]);
        assert_non_null(e);
        gmp_livetab_del(&t, e);
        nm--;
    }
    check_table(&t, model, 0);
    gmp_livetab_free(&t);
    assert_null(t.meta);
    assert_int_equal(t.cap, 0);
    free(model);
}

static void test_random_addresses(void **state)
{
    (void)state;
    enum { N = 3000 };
    uint64_t pool[N];
    uint64_t s = 42;
    for (size_t i = 0; i < N; i++) /* aligned addresses in a 64 GiB range, as allocators give */
        pool[i] = 0x7f0000000000ull + (rnd(&s) % (1ull << 36) & ~0xffull);
    for (size_t i = 0; i < N; i++) /* make them distinct */
        pool[i] += (uint64_t)i << 40;
    run_ops(pool, N, 60000, 7, 0);
    run_ops(pool, N, 60000, 9, 1);
}

/* Keys whose hashes agree in their low `bits` bits: in any table of up to 2^bits slots they all
 * start probing at the same slot. The hash is a bijection, so a search finds them. */
static size_t same_home_keys(uint64_t *out, size_t n, unsigned bits, uint64_t home)
{
    size_t k = 0;
    for (uint64_t key = 1; k < n; key++)
        if ((gmp_livetab_hash(key) & ((1ull << bits) - 1)) == home)
            out[k++] = key;
    return k;
}

static void test_colliding_far(void **state)
{
    (void)state;
    /* 400 keys with one home: up to 400 slots from home, past the 254 the descriptor holds */
    enum { N = 400 };
    static uint64_t pool[N];
    same_home_keys(pool, N, 12, 5);
    gmp_livetab t = {0};
    uint64_t model[N];
    for (size_t i = 0; i < N; i++) {
        gmp_live_ent *e = ins(&t, pool[i]);
        assert_non_null(e);
        e->size = pool[i] ^ 0x5555;
        model[i] = pool[i];
    }
    assert_true(t.cap <= 4096);
    size_t far = 0;
    for (size_t i = 0; i < t.cap; i++)
        far += gmp_livetab_used(&t, i) && (t.meta[i] & 0xff) == GMP_LIVETAB_FAR;
    assert_true(far > 100);
    check_table(&t, model, N);
    /* delete from the front of the cluster: every later entry shifts back, far ones included */
    size_t nm = N;
    for (size_t i = 0; i < N / 2; i++) {
        gmp_live_ent *e = gmp_livetab_find(&t, pool[i]);
        assert_non_null(e);
        gmp_livetab_del(&t, e);
        for (size_t k = 0; k < nm; k++)
            if (model[k] == pool[i]) {
                model[k] = model[--nm];
                break;
            }
        if (i % 16 == 0)
            check_table(&t, model, nm);
    }
    check_table(&t, model, nm);
    gmp_livetab_free(&t);
    /* and at random, mixed with keys of other homes */
    static uint64_t mixed[N + 600];
    memcpy(mixed, pool, sizeof pool);
    for (size_t i = 0; i < 600; i++)
        mixed[N + i] = 0x100000000ull + i * 4096;
    run_ops(mixed, N + 600, 40000, 3, 1);
}

static void test_wrap_around(void **state)
{
    (void)state;
    /* homes in the last slots of a 4096-slot table: clusters wrap to slot 0, and deletions
     * must shift entries back across the end */
    enum { N = 600 };
    static uint64_t pool[N];
    size_t k = 0;
    for (uint64_t home = 4090; home < 4096; home++)
        k += same_home_keys(pool + k, N / 6, 12, home);
    assert_int_equal(k, N);
    gmp_livetab t = {0};
    for (size_t i = 0; i < N; i++)
        ins(&t, pool[i])->size = pool[i] ^ 0x5555;
    assert_int_equal(t.cap, 1024); /* 600 entries: 1024 slots; homes 4090.. are 1018.. here */
    assert_true(gmp_livetab_used(&t, 0));
    check_table(&t, pool, N);
    run_ops(pool, N, 30000, 11, 0);
    gmp_livetab_free(&t);
}

/* The iteration the replay does (unmap_range): by slot index, deleting some entries as it goes;
 * a deletion may move a later entry into the current slot, so the index is looked at again. Every
 * entry is seen, and every entry to delete is deleted, also when a cluster wraps past the end
 * (a deletion near the end then pulls back entries from slot 0 on, seen already). */
static void iterate_delete(const uint64_t *pool, size_t n)
{
    gmp_livetab t = {0};
    for (size_t i = 0; i < n; i++)
        ins(&t, pool[i])->size = 1;
    size_t seen = 0, deleted = 0, to_delete = 0;
    for (size_t i = 0; i < n; i++)
        to_delete += pool[i] % 2 == 0;
    for (size_t i = 0; i < t.cap;) {
        if (gmp_livetab_used(&t, i) && t.ent[i].size == 1) {
            seen++;
            t.ent[i].size = 2; /* seen */
            if (t.ent[i].key % 2 == 0) {
                gmp_livetab_del(&t, &t.ent[i]);
                deleted++;
                continue; /* look at slot i again */
            }
        }
        i++;
    }
    assert_int_equal(seen, n);
    assert_int_equal(deleted, to_delete);
    assert_int_equal(t.n, n - to_delete);
    for (size_t i = 0; i < n; i++)
        if (pool[i] % 2 == 0)
            assert_null(gmp_livetab_find(&t, pool[i]));
        else
            assert_non_null(gmp_livetab_find(&t, pool[i]));
    gmp_livetab_free(&t);
}

static void test_iterate_delete(void **state)
{
    (void)state;
    enum { N = 2000 };
    static uint64_t pool[N];
    for (size_t i = 0; i < N; i++)
        pool[i] = 0x7f0000000000ull + i * 512 + (i / 7 % 2); /* odd and even keys */
    iterate_delete(pool, N);
    /* clusters at the end of a 1024-slot table, wrapping to slot 0 */
    size_t k = 0;
    for (uint64_t home = 1018; home < 1024; home++)
        k += same_home_keys(pool + k, 100, 10, home);
    iterate_delete(pool, k);
}

static void test_empty(void **state)
{
    (void)state;
    gmp_livetab t = {0};
    assert_null(gmp_livetab_find(&t, 0));
    assert_null(gmp_livetab_find(&t, 123));
    gmp_livetab_prefetch_meta(&t, gmp_livetab_hash(1));
    gmp_livetab_prefetch(&t, gmp_livetab_hash(1));
    gmp_live_ent *e = ins(&t, 0); /* key 0 is a key like any other */
    assert_non_null(e);
    assert_ptr_equal(gmp_livetab_find(&t, 0), e);
    gmp_livetab_del(&t, e);
    assert_null(gmp_livetab_find(&t, 0));
    assert_int_equal(t.n, 0);
    gmp_livetab_free(&t);
    gmp_livetab_free(&t); /* twice: harmless */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),          cmocka_unit_test(test_random_addresses),
        cmocka_unit_test(test_colliding_far),  cmocka_unit_test(test_wrap_around),
        cmocka_unit_test(test_iterate_delete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
