/* The model of PyTorch's CUDA caching allocator (formats/replay/gmp_cca_model.h): one hand-worked
 * case per rule of c10/cuda/CUDACachingAllocator.cpp (PyTorch commit 001074d2), each built so that
 * it fails if the rule it names were taken out of the model; and a random sequence checked
 * against invariants any allocator keeps (live blocks never overlap, the counters add up).
 * Run all: test_cca_model; one: test_cca_model NAME (a cmocka filter). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_cca_model.h"

#define MiB ((uint64_t)1 << 20)

static gmp_cca *mk(uint64_t max_split, uint64_t capacity, uint32_t div)
{
    gmp_cca_config c;
    memset(&c, 0, sizeof c);
    c.max_split_size = max_split;
    c.capacity = capacity;
    c.roundup_power2_divisions = div;
    gmp_cca *m = gmp_cca_create(&c);
    assert_non_null(m);
    return m;
}

static uint32_t take(gmp_cca *m, uint64_t size, uint64_t stream)
{
    uint32_t id = 0;
    assert_int_equal(gmp_cca_alloc(m, size, stream, &id), GMP_CCA_OK);
    return id;
}

static uint64_t addr_of(gmp_cca *m, uint32_t id)
{
    uint64_t a = 0;
    assert_true(gmp_cca_block(m, id, &a, NULL));
    return a;
}

static uint64_t size_of(gmp_cca *m, uint32_t id)
{
    uint64_t s = 0;
    assert_true(gmp_cca_block(m, id, NULL, &s));
    return s;
}

/* round_size (512 B), get_pool / get_allocation_size (<= kSmallSize: a kSmallBuffer segment),
 * should_split in the small pool (remaining >= kMinBlockSize): 1 byte takes a 2 MiB segment and
 * 512 B of it; the next byte is cut from the same segment, right after. */
static void test_small_one_byte(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 0, 0);
    uint32_t a = take(m, 1, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    assert_int_equal(st->reserved, 2 * MiB);
    assert_int_equal(st->allocated, 512);
    assert_int_equal(size_of(m, a), 512);
    assert_int_equal(st->segments_alloc, 1);
    uint32_t b = take(m, 1, 0);
    assert_int_equal(st->segments_alloc, 1);
    assert_int_equal(addr_of(m, b), addr_of(m, a) + 512);
    assert_int_equal(st->allocated, 1024);
    /* 1 MiB exactly is still small (<= kSmallSize); 1 MiB + 1 is large (a 20 MiB segment) */
    take(m, MiB, 0);
    assert_int_equal(st->reserved, 2 * MiB);
    take(m, MiB + 1, 0);
    assert_int_equal(st->reserved, 22 * MiB);
    assert_int_equal(gmp_cca_round_size(m, 513), 1024);
    /* NativeCachingAllocator::allocate: size 0 never reaches malloc; 1 EiB is refused */
    uint32_t id;
    assert_int_equal(gmp_cca_alloc(m, 0, 0, &id), GMP_CCA_EINVAL);
    assert_int_equal(gmp_cca_alloc(m, (uint64_t)1 << 60, 0, &id), GMP_CCA_OOM);
    assert_int_equal(st->reserved, 22 * MiB);
    gmp_cca_destroy(m);
}

/* get_allocation_size (kSmallSize < size < kMinLargeAlloc: kLargeBuffer), should_split in the
 * large pool (remaining > kSmallSize), get_free_block (best fit in the pool): 3 MiB takes a
 * 20 MiB segment, the next 3 MiB is cut from its remainder. */
static void test_large_split(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 0, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    uint32_t a = take(m, 3 * MiB, 0);
    assert_int_equal(st->reserved, 20 * MiB);
    assert_int_equal(size_of(m, a), 3 * MiB);
    uint32_t b = take(m, 3 * MiB, 0);
    assert_int_equal(st->segments_alloc, 1);
    assert_int_equal(addr_of(m, b), addr_of(m, a) + 3 * MiB);
    assert_int_equal(st->allocated, 6 * MiB);
    uint64_t largest = 0;
    assert_int_equal(gmp_cca_free_blocks(m, &largest), 1);
    assert_int_equal(largest, 14 * MiB);
    gmp_cca_destroy(m);
}

/* get_allocation_size (>= kMinLargeAlloc: rounded up to kRoundLarge) and should_split (a large
 * remainder of 1 MiB or less is not split off: the block keeps it, and allocated_bytes counts it).
 */
static void test_large_round(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 0, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    uint32_t a = take(m, 12 * MiB, 0);
    assert_int_equal(st->reserved, 12 * MiB);
    assert_int_equal(size_of(m, a), 12 * MiB);
    uint32_t b = take(m, 13 * MiB - 100, 0); /* rounds to 13 MiB; segment 14 MiB */
    assert_int_equal(st->reserved, 26 * MiB);
    assert_int_equal(size_of(m, b), 14 * MiB);
    assert_int_equal(st->allocated, 26 * MiB);
    assert_int_equal(gmp_cca_free_blocks(m, NULL), 0);
    gmp_cca_destroy(m);
}

/* get_free_block with max_split_size: a cached block at or above it is not handed to a smaller
 * request (so it is not split), and serves a request at or above it only within kLargeBuffer. */
static void test_max_split(void **state)
{
    (void)state;
    /* without max_split_size the cached 100 MiB block is split for a 3 MiB request */
    gmp_cca *m = mk(0, 0, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    assert_int_equal(gmp_cca_free(m, take(m, 100 * MiB, 0)), GMP_CCA_OK);
    take(m, 3 * MiB, 0);
    assert_int_equal(st->segments_alloc, 1);
    gmp_cca_destroy(m);

    m = mk(64 * MiB, 0, 0);
    st = gmp_cca_get_stats(m);
    assert_int_equal(gmp_cca_free(m, take(m, 100 * MiB, 0)), GMP_CCA_OK);
    uint32_t s = take(m, 3 * MiB, 0); /* refused the oversize block: a new 20 MiB segment */
    assert_int_equal(st->segments_alloc, 2);
    assert_int_equal(st->reserved, 120 * MiB);
    uint64_t largest = 0;
    gmp_cca_free_blocks(m, &largest);
    assert_int_equal(largest, 100 * MiB); /* still whole */
    uint32_t o = take(m, 70 * MiB, 0);    /* 100 >= 70 + 20: refused, a new segment */
    assert_int_equal(st->segments_alloc, 3);
    assert_int_equal(size_of(m, o), 70 * MiB);
    uint32_t p = take(m, 90 * MiB, 0); /* 100 < 90 + 20: served whole, not split */
    assert_int_equal(st->segments_alloc, 3);
    assert_int_equal(size_of(m, p), 100 * MiB);
    (void)s;
    gmp_cca_destroy(m);
}

/* free_block / try_merge_blocks: a freed block merges with its free neighbours of the segment;
 * once all are free the segment is one cached block again, and release_cached_blocks
 * (empty_cache) can give it back. */
static void test_free_merge(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 0, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    uint32_t a = take(m, 3 * MiB, 0), b = take(m, 3 * MiB, 0), c = take(m, 3 * MiB, 0);
    uint64_t largest = 0;
    assert_int_equal(gmp_cca_free(m, b), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free_blocks(m, &largest), 2); /* b, and the 11 MiB tail */
    assert_int_equal(gmp_cca_free(m, a), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free_blocks(m, &largest), 2); /* a+b, tail */
    assert_int_equal(largest, 11 * MiB);
    gmp_cca_empty_cache(m); /* nothing whole to release yet */
    assert_int_equal(st->segments_freed, 0);
    uint32_t d = take(m, 6 * MiB, 0); /* best fit: a+b exactly, at a's address */
    assert_int_equal(st->segments_alloc, 1);
    assert_int_equal(gmp_cca_free(m, d), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free(m, c), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free_blocks(m, &largest), 1);
    assert_int_equal(largest, 20 * MiB);
    assert_int_equal(st->allocated, 0);
    gmp_cca_empty_cache(m);
    assert_int_equal(st->segments_freed, 1);
    assert_int_equal(st->reserved, 0);
    assert_int_equal(st->peak_reserved, 20 * MiB);
    assert_int_equal(st->peak_allocated, 9 * MiB);
    assert_int_equal(gmp_cca_free(m, c), GMP_CCA_EINVAL); /* freed twice */
    gmp_cca_destroy(m);
}

/* BlockComparatorSize / get_free_block: blocks are searched by (stream, size, address) and
 * only a block of the request's stream is used. */
static void test_per_stream(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 0, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    uint32_t a = take(m, 3 * MiB, 1);
    uint64_t a_addr = addr_of(m, a);
    assert_int_equal(gmp_cca_free(m, a), GMP_CCA_OK);
    uint32_t b = take(m, 3 * MiB, 2);
    assert_int_equal(st->segments_alloc, 2);
    assert_int_not_equal(addr_of(m, b), a_addr);
    uint32_t c = take(m, 3 * MiB, 1);
    assert_int_equal(st->segments_alloc, 2);
    assert_int_equal(addr_of(m, c), a_addr);
    /* stream 2's cached block sorts after every stream 0 key: the best fit found for stream 0
     * is stream 2's block, and only the stream check turns it down */
    uint64_t b_addr = addr_of(m, b);
    assert_int_equal(gmp_cca_free(m, b), GMP_CCA_OK);
    uint32_t d = take(m, 3 * MiB, 0);
    assert_int_equal(st->segments_alloc, 3);
    assert_int_not_equal(addr_of(m, d), b_addr);
    /* small pool too */
    take(m, 1, 1);
    take(m, 1, 2);
    assert_int_equal(st->segments_alloc, 5);
    gmp_cca_destroy(m);
}

/* malloc's out-of-memory path: alloc_block fails past the capacity, release_cached_blocks frees
 * the cached whole segments (both pools), alloc_block is retried and succeeds. */
static void test_oom_release(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 40 * MiB, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    assert_int_equal(gmp_cca_free(m, take(m, 12 * MiB, 0)), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free(m, take(m, 1, 0)), GMP_CCA_OK);
    assert_int_equal(st->reserved, 14 * MiB);
    uint32_t a = take(m, 30 * MiB, 0); /* 14 + 30 > 40: release both, retry */
    assert_int_equal(st->segments_freed, 2);
    assert_int_equal(st->alloc_retries, 1);
    assert_int_equal(st->reserved, 30 * MiB);
    assert_int_equal(st->peak_reserved, 30 * MiB);
    assert_int_equal(size_of(m, a), 30 * MiB);
    assert_int_equal(st->ooms, 0);
    gmp_cca_destroy(m);
}

/* The capacity truly exceeded: nothing cached (or only segments still partly in use, which
 * release_blocks keeps) leaves the request failing. */
static void test_oom_fail(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 40 * MiB, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    take(m, 30 * MiB, 0);
    uint32_t id = 0;
    assert_int_equal(gmp_cca_alloc(m, 12 * MiB, 0, &id), GMP_CCA_OOM);
    assert_int_equal(st->ooms, 1);
    assert_int_equal(st->reserved, 30 * MiB);
    gmp_cca_destroy(m);

    m = mk(0, 30 * MiB, 0);
    st = gmp_cca_get_stats(m);
    take(m, 3 * MiB, 0); /* a 20 MiB segment, split: 17 MiB cached but not whole */
    assert_int_equal(gmp_cca_alloc(m, 18 * MiB, 0, &id), GMP_CCA_OOM); /* 20 + 18 > 30 */
    assert_int_equal(st->segments_freed, 0);
    assert_int_equal(st->reserved, 20 * MiB);
    gmp_cca_destroy(m);
}

/* release_available_cached_blocks: with max_split_size set, an oversize cached block that covers
 * the request is freed first, without release_cached_blocks (no retry is counted). */
static void test_oom_oversize(void **state)
{
    (void)state;
    gmp_cca *m = mk(64 * MiB, 110 * MiB, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    assert_int_equal(gmp_cca_free(m, take(m, 100 * MiB, 0)), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free(m, take(m, 1, 0)), GMP_CCA_OK); /* a cached small segment */
    take(m, 30 * MiB, 0); /* refuses the oversize block; 102 + 30 > 110 */
    assert_int_equal(st->segments_freed, 1);
    assert_int_equal(st->alloc_retries, 0);
    assert_int_equal(st->reserved, 32 * MiB); /* the small segment stayed */
    gmp_cca_destroy(m);
}

/* round_size with roundup_power2_divisions (roundup_power2_next_division): 5 MiB + 1 with 4
 * divisions rounds to the next quarter between 4 and 8 MiB, 6 MiB; a power of two stays. */
static void test_roundup_power2(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 0, 4);
    assert_int_equal(gmp_cca_round_size(m, 5 * MiB + 1), 6 * MiB);
    assert_int_equal(gmp_cca_round_size(m, 8 * MiB), 8 * MiB);
    assert_int_equal(gmp_cca_round_size(m, 1200), 1536); /* <= 512 * 4: plain 512 multiple */
    assert_int_equal(gmp_cca_round_size(m, 3000), 3072); /* 2048..4096 in steps of 512 */
    uint32_t a = take(m, 5 * MiB + 1, 0);
    assert_int_equal(size_of(m, a), 6 * MiB);
    assert_int_equal(gmp_cca_get_stats(m)->allocated, 6 * MiB);
    gmp_cca_destroy(m);
    m = mk(0, 0, 0);
    assert_int_equal(gmp_cca_round_size(m, 5 * MiB + 1), 5 * MiB + 512);
    gmp_cca_destroy(m);
}

/* Settings that CUDAAllocatorConfig rejects are refused; expandable segments are a boolean. */
static void test_config_refused(void **state)
{
    (void)state;
    gmp_cca_config c;
    memset(&c, 0, sizeof c);
    c.expandable_segments = 2;
    assert_null(gmp_cca_create(&c));
    c.expandable_segments = 1;
    gmp_cca *m = gmp_cca_create(&c);
    assert_non_null(m);
    gmp_cca_destroy(m);
    memset(&c, 0, sizeof c);
    c.garbage_collection_threshold = 1.0; /* "garbage_collect_threshold too big" */
    assert_null(gmp_cca_create(&c));
    c.garbage_collection_threshold = -0.5; /* "too small" */
    assert_null(gmp_cca_create(&c));
    memset(&c, 0, sizeof c);
    c.max_split_size = 20 * MiB;
    assert_null(gmp_cca_create(&c));
    memset(&c, 0, sizeof c);
    c.roundup_power2_divisions = 3;
    assert_null(gmp_cca_create(&c));
}

static gmp_cca *mk_gc(uint64_t capacity, double threshold)
{
    gmp_cca_config c;
    memset(&c, 0, sizeof c);
    c.capacity = capacity;
    c.garbage_collection_threshold = threshold;
    gmp_cca *m = gmp_cca_create(&c);
    assert_non_null(m);
    return m;
}

/* Cache a 12 MiB and a 14 MiB segment, both at large-pool get_free_block count 2; reuse the
 * 12 MiB one (count 3) and cache it again; then ask for 40 MiB (count 4). */
static const gmp_cca_stats *gc_sequence(gmp_cca *m)
{
    uint32_t a = take(m, 12 * MiB, 0), b = take(m, 14 * MiB, 0);
    assert_int_equal(gmp_cca_free(m, a), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free(m, b), GMP_CCA_OK);
    uint32_t x = take(m, 12 * MiB, 0); /* the cached 12 MiB block, whole (nothing to split) */
    assert_int_equal(addr_of(m, x), addr_of(m, a));
    assert_int_equal(gmp_cca_free(m, x), GMP_CCA_OK);
    take(m, 40 * MiB, 0);
    return gmp_cca_get_stats(m);
}

/* garbage_collect_cached_blocks: capacity 60 MiB, threshold 0.25 -> 15 MiB. At the 40 MiB request
 * reserved is 26 MiB, so 11 MiB are to be reclaimed. Ages (gc_count): the 12 MiB block 4-3 = 1,
 * the 14 MiB block 4-2 = 2; average 1.5, so only the 14 MiB block (2 >= 1.5) is freed, which
 * reaches the target. Reserved 12 + 40 = 52 MiB, no retry. Without the collector (threshold 0)
 * 26 + 40 = 66 MiB passes 60 MiB: malloc's retry frees both cached segments (reserved 40 MiB). */
static void test_gc_threshold(void **state)
{
    (void)state;
    gmp_cca *m = mk_gc(60 * MiB, 0.25);
    const gmp_cca_stats *st = gc_sequence(m);
    assert_int_equal(st->segments_freed, 1);
    assert_int_equal(st->reserved, 52 * MiB);
    assert_int_equal(st->peak_reserved, 52 * MiB);
    assert_int_equal(st->alloc_retries, 0);
    uint64_t largest = 0;
    assert_int_equal(gmp_cca_free_blocks(m, &largest), 1);
    assert_int_equal(largest, 12 * MiB); /* the younger block stays cached */
    gmp_cca_destroy(m);

    m = mk_gc(60 * MiB, 0);
    st = gc_sequence(m);
    assert_int_equal(st->segments_freed, 2);
    assert_int_equal(st->alloc_retries, 1);
    assert_int_equal(st->reserved, 40 * MiB);
    assert_int_equal(st->peak_reserved, 40 * MiB);
    gmp_cca_destroy(m);

    /* Below the threshold (0.5 x 60 = 30 MiB > 26 MiB) nothing is collected and 66 > 60 needs
     * the retry again. */
    m = mk_gc(60 * MiB, 0.5);
    st = gc_sequence(m);
    assert_int_equal(st->segments_freed, 2);
    assert_int_equal(st->alloc_retries, 1);
    gmp_cca_destroy(m);

    /* No capacity (PyTorch: no memory fraction, set_fraction false): no collection. */
    m = mk_gc(0, 0.25);
    st = gc_sequence(m);
    assert_int_equal(st->segments_freed, 0);
    assert_int_equal(st->reserved, 66 * MiB);
    gmp_cca_destroy(m);
}

/* The average age is recomputed pass after pass: threshold 0.1 x 60 MiB = 6 MiB, target 20 MiB.
 * Pass 1 (average 1.5) frees the 14 MiB block (reclaimed 14 < 20); pass 2 (average 1) frees the
 * 12 MiB block. Both go although the target (20) is reached only by the second. */
static void test_gc_passes(void **state)
{
    (void)state;
    gmp_cca *m = mk_gc(60 * MiB, 0.1);
    const gmp_cca_stats *st = gc_sequence(m);
    assert_int_equal(st->segments_freed, 2);
    assert_int_equal(st->alloc_retries, 0);
    assert_int_equal(st->reserved, 40 * MiB);
    assert_int_equal(gmp_cca_free_blocks(m, NULL), 0);
    gmp_cca_destroy(m);
}

/* free with stream uses (insert_events): the block is neither reused nor merged until its events
 * complete (process_events); allocated bytes drop at the free. */
static void test_deferred_free(void **state)
{
    (void)state;
    gmp_cca *m = mk(0, 0, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    uint32_t a = take(m, 12 * MiB, 0);
    uint64_t aa = addr_of(m, a);
    assert_int_equal(gmp_cca_free_deferred(m, a), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free_deferred(m, a), GMP_CCA_EINVAL);
    assert_int_equal(st->allocated, 0);
    assert_int_equal(gmp_cca_pending_frees(m), 1);
    assert_int_equal(gmp_cca_free_blocks(m, NULL), 0);
    uint32_t b = take(m, 12 * MiB, 0); /* a is not cached yet: a second 12 MiB segment */
    assert_int_equal(addr_of(m, b), aa + 12 * MiB);
    assert_int_equal(st->reserved, 24 * MiB);
    gmp_cca_process_events(m);
    assert_int_equal(gmp_cca_pending_frees(m), 0);
    uint32_t c = take(m, 12 * MiB, 0); /* now a serves it */
    assert_int_equal(addr_of(m, c), aa);
    assert_int_equal(st->reserved, 24 * MiB);
    gmp_cca_destroy(m);

    /* try_merge_blocks skips a block with events: 3 + 3 MiB cut from one 20 MiB segment; the
     * first freed with events, the second freed at once merges only with the 14 MiB rest. */
    m = mk(0, 0, 0);
    uint32_t x = take(m, 3 * MiB, 0), y = take(m, 3 * MiB, 0);
    assert_int_equal(gmp_cca_free_deferred(m, x), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free(m, y), GMP_CCA_OK);
    uint64_t largest = 0;
    assert_int_equal(gmp_cca_free_blocks(m, &largest), 1);
    assert_int_equal(largest, 17 * MiB);
    gmp_cca_process_events(m);
    assert_int_equal(gmp_cca_free_blocks(m, &largest), 1);
    assert_int_equal(largest, 20 * MiB); /* whole again */
    gmp_cca_destroy(m);

    /* release_cached_blocks synchronizes first: capacity 30 MiB, 12 MiB pending, 20 MiB asked
     * (32 > 30): the retry completes the free, releases the 12 MiB segment, and fits. */
    m = mk(0, 30 * MiB, 0);
    st = gmp_cca_get_stats(m);
    assert_int_equal(gmp_cca_free_deferred(m, take(m, 12 * MiB, 0)), GMP_CCA_OK);
    take(m, 20 * MiB, 0);
    assert_int_equal(st->alloc_retries, 1);
    assert_int_equal(st->segments_freed, 1);
    assert_int_equal(st->reserved, 20 * MiB);
    assert_int_equal(gmp_cca_pending_frees(m), 0);
    gmp_cca_destroy(m);
}

/* The segment events of a model (gmp_cca_on_segment), summed. */
typedef struct seg_log {
    uint64_t mapped, unmapped, malloced, freed; /* bytes */
    size_t n;
    int op[64];
    uint64_t addr[64], size[64];
} seg_log;

static void on_seg(void *ctx, int op, uint64_t addr, uint64_t size)
{
    seg_log *l = ctx;
    if (op == GMP_CCA_SEGMENT_MAP)
        l->mapped += size;
    else if (op == GMP_CCA_SEGMENT_UNMAP)
        l->unmapped += size;
    else if (op == GMP_CCA_SEGMENT_ALLOC)
        l->malloced += size;
    else
        l->freed += size;
    if (l->n < 64) {
        l->op[l->n] = op;
        l->addr[l->n] = addr;
        l->size[l->n] = size;
    }
    l->n++;
}

static gmp_cca *mk_exp(uint64_t capacity, seg_log *log)
{
    gmp_cca_config c;
    memset(&c, 0, sizeof c);
    c.capacity = capacity;
    c.expandable_segments = 1;
    gmp_cca *m = gmp_cca_create(&c);
    assert_non_null(m);
    if (log) {
        memset(log, 0, sizeof *log);
        gmp_cca_on_segment(m, on_seg, log);
    }
    return m;
}

/* Expandable segments (try_allocate_expandable_block, map_block, find_expandable_block): a small
 * request maps one 2 MiB page of the small pool's segment; 3 MiB maps one 20 MiB page of the large
 * pool's; the next 3 MiB is cut from it; 30 MiB finds the 14 MiB free at the end of the mapped
 * range and maps only one more 20 MiB page, so that the block starts right after the second 3 MiB
 * one (without expandable segments it would cudaMalloc 30 MiB: 52 MiB reserved, not 42). Another
 * stream gets its own segment. Each map counts as a device allocation (num_device_alloc). */
static void test_exp_grow(void **state)
{
    (void)state;
    seg_log log;
    gmp_cca *m = mk_exp(0, &log);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    take(m, 1, 0);
    assert_int_equal(st->reserved, 2 * MiB);
    assert_int_equal(st->allocated, 512);
    uint32_t a = take(m, 3 * MiB, 0);
    assert_int_equal(st->reserved, 22 * MiB);
    uint32_t b = take(m, 3 * MiB, 0);
    assert_int_equal(addr_of(m, b), addr_of(m, a) + 3 * MiB);
    assert_int_equal(st->segments_alloc, 2);
    uint32_t c = take(m, 30 * MiB, 0);
    assert_int_equal(addr_of(m, c), addr_of(m, b) + 3 * MiB);
    assert_int_equal(size_of(m, c), 30 * MiB);
    assert_int_equal(st->reserved, 42 * MiB);
    assert_int_equal(st->segments_alloc, 3);
    assert_int_equal(log.n, 3);
    assert_int_equal(log.op[2], GMP_CCA_SEGMENT_MAP);
    assert_int_equal(log.addr[2], addr_of(m, a) + 20 * MiB);
    assert_int_equal(log.size[2], 20 * MiB);
    assert_int_equal(gmp_cca_segments(m), 2); /* the small range and the large range */
    take(m, 3 * MiB, 1);
    assert_int_equal(st->reserved, 62 * MiB);
    assert_int_equal(gmp_cca_segments(m), 3);
    gmp_cca_destroy(m);

    gmp_cca *n = mk(0, 0, 0); /* the same requests without expandable segments */
    take(n, 1, 0);
    take(n, 3 * MiB, 0);
    take(n, 3 * MiB, 0);
    take(n, 30 * MiB, 0);
    assert_int_equal(gmp_cca_get_stats(n)->reserved, 52 * MiB);
    gmp_cca_destroy(n);
}

/* should_split with expandable segments on: every pool splits as the small one (remaining >=
 * 512 B). 12 MiB maps a 20 MiB page and takes 12 MiB of it; 7 MiB is cut from the 8 MiB left,
 * leaving 1 MiB cached, where without expandable segments the large pool would hand out the whole
 * 8 MiB (a remainder of 1 MiB is not above kSmallSize). */
static void test_exp_split(void **state)
{
    (void)state;
    gmp_cca *m = mk_exp(0, NULL);
    uint32_t a = take(m, 12 * MiB, 0);
    assert_int_equal(size_of(m, a), 12 * MiB);
    assert_int_equal(gmp_cca_get_stats(m)->reserved, 20 * MiB);
    uint32_t b = take(m, 7 * MiB, 0);
    assert_int_equal(size_of(m, b), 7 * MiB);
    uint64_t largest = 0;
    assert_int_equal(gmp_cca_free_blocks(m, &largest), 1);
    assert_int_equal(largest, MiB);
    gmp_cca_destroy(m);
}

/* get_free_block with expandable segments: the free block at the end of the mapped range counts
 * as what it can grow to, so a 6 MiB request passes over that 8 MiB block for the 10 MiB block
 * before it (at the segment's start); plain best fit would take the 8 MiB one. */
static void test_exp_best_fit(void **state)
{
    (void)state;
    gmp_cca *m = mk_exp(0, NULL);
    uint32_t a = take(m, 10 * MiB, 0);
    uint64_t base = addr_of(m, a);
    uint32_t b = take(m, 2 * MiB, 0);
    assert_int_equal(addr_of(m, b), base + 10 * MiB);
    assert_int_equal(gmp_cca_free(m, a), GMP_CCA_OK);
    uint32_t c = take(m, 6 * MiB, 0);
    assert_int_equal(addr_of(m, c), base);
    gmp_cca_destroy(m);
}

/* The out-of-memory path with expandable segments (malloc, release_cached_blocks, unmap_block):
 * capacity 90 MiB. 30 MiB maps two pages (40 MiB), 10 MiB takes the rest; the 30 MiB block is
 * freed. 50 MiB would map three more pages (100 MiB > 90 MiB): the retry unmaps the one page that
 * lies wholly inside the free 30 MiB block (the other 10 MiB stay mapped and free), and the map
 * then fits (80 MiB). Then everything is freed and empty_cache unmaps all and releases the
 * segment (release_expandable_segment). */
static void test_exp_oom_unmap(void **state)
{
    (void)state;
    seg_log log;
    gmp_cca *m = mk_exp(90 * MiB, &log);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    uint32_t a = take(m, 30 * MiB, 0);
    uint64_t base = addr_of(m, a);
    uint32_t b = take(m, 10 * MiB, 0);
    assert_int_equal(st->reserved, 40 * MiB);
    assert_int_equal(gmp_cca_free(m, a), GMP_CCA_OK);
    uint32_t c = take(m, 50 * MiB, 0);
    assert_int_equal(st->alloc_retries, 1);
    assert_int_equal(st->reserved, 80 * MiB);
    assert_int_equal(addr_of(m, c), base + 40 * MiB);
    assert_int_equal(log.n, 3);
    assert_int_equal(log.op[1], GMP_CCA_SEGMENT_UNMAP);
    assert_int_equal(log.addr[1], base);
    assert_int_equal(log.size[1], 20 * MiB);
    assert_int_equal(log.op[2], GMP_CCA_SEGMENT_MAP);
    assert_int_equal(log.size[2], 60 * MiB);
    assert_int_equal(gmp_cca_segments(m), 1); /* mapped from base + 20 MiB to base + 100 MiB */
    /* 30 MiB more cannot fit: [base, base + 20 MiB) unmapped + 10 MiB free is 30 MiB of address
     * space, but mapping 20 MiB there passes 90 MiB; the request fails */
    uint32_t id;
    assert_int_equal(gmp_cca_alloc(m, 30 * MiB, 0, &id), GMP_CCA_OOM);
    assert_int_equal(st->ooms, 1);
    assert_int_equal(gmp_cca_free(m, b), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free(m, c), GMP_CCA_OK);
    gmp_cca_empty_cache(m);
    assert_int_equal(st->reserved, 0);
    assert_int_equal(gmp_cca_segments(m), 0);
    assert_int_equal(gmp_cca_free_blocks(m, NULL), 0);
    assert_int_equal(log.mapped, log.unmapped);
    gmp_cca_destroy(m);
}

/* find_expandable_block's allocatable: a block whose free waits for other streams is no room to
 * grow into. 20 MiB fills one page; freed with gmp_cca_free_deferred, it stays out of reach, so
 * 30 MiB maps two new pages after it in one map (reserved 60 MiB), rather than starting from the
 * pending block and mapping page by page. Once its events complete the block is cached and a 20 MiB
 * request takes it back. */
static void test_exp_deferred(void **state)
{
    (void)state;
    gmp_cca *m = mk_exp(0, NULL);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    uint32_t a = take(m, 20 * MiB, 0);
    uint64_t base = addr_of(m, a);
    assert_int_equal(gmp_cca_free_deferred(m, a), GMP_CCA_OK);
    uint32_t b = take(m, 30 * MiB, 0);
    assert_int_equal(addr_of(m, b), base + 20 * MiB);
    assert_int_equal(st->reserved, 60 * MiB);
    assert_int_equal(st->segments_alloc, 2); /* one map of two pages, not a walk from the start */
    gmp_cca_process_events(m);
    uint32_t c = take(m, 20 * MiB, 0);
    assert_int_equal(addr_of(m, c), base);
    assert_int_equal(st->reserved, 60 * MiB);
    gmp_cca_destroy(m);
}

/* Hostile sizes: a request larger than an expandable segment's address space, and requests that
 * would run the model's addresses past 2^64 (with and without expandable segments), fail as out
 * of memory instead of reusing addresses; the blocks handed out never overlap. */
static void test_exp_hostile(void **state)
{
    (void)state;
    uint32_t id;
    gmp_cca *m = mk_exp(0, NULL); /* 16 TiB of address space per segment */
    assert_int_equal(gmp_cca_alloc(m, (uint64_t)1 << 59, 0, &id), GMP_CCA_OOM);
    take(m, MiB + 1, 7);
    gmp_cca_destroy(m);
    for (int exp = 0; exp < 2; exp++) {
        m = exp ? mk_exp(UINT64_MAX, NULL) : mk(0, 0, 0);
        uint64_t lo[64], hi[64];
        int n = 0, ooms = 0;
        for (int k = 0; k < 64; k++) {
            int rc = gmp_cca_alloc(m, ((uint64_t)1 << 59) + 1, (uint64_t)k, &id);
            assert_true(rc == GMP_CCA_OK || rc == GMP_CCA_OOM);
            if (rc == GMP_CCA_OOM) {
                ooms++;
                continue;
            }
            uint64_t a = 0, sz = 0;
            assert_true(gmp_cca_block(m, id, &a, &sz));
            assert_true(a + sz > a); /* no wrap */
            for (int j = 0; j < n; j++)
                assert_true(a + sz <= lo[j] || hi[j] <= a);
            lo[n] = a;
            hi[n++] = a + sz;
        }
        assert_true(n > 0 && ooms > 0);
        gmp_cca_destroy(m);
    }
}

/* Random requests on three streams, freed in random order: live blocks never overlap, the
 * counters add up, and at the end every segment merges back whole and is released (for
 * expandable segments: everything mapped is unmapped, and the segments are released). */
static void random_run(int expandable)
{
    enum { N = 400 };
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    seg_log log;
    gmp_cca *m = expandable ? mk_exp(2048 * MiB, &log) : mk(128 * MiB, 2048 * MiB, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    uint32_t live[N];
    size_t n = 0;
    for (int step = 0; step < 20000; step++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if (n < N && (n == 0 || rng % 3 != 0)) {
            uint64_t kind = (rng >> 8) % 4;
            uint64_t size = kind == 0   ? (rng >> 16) % 4096 + 1
                            : kind == 1 ? (rng >> 16) % MiB + 1
                            : kind == 2 ? (rng >> 16) % (9 * MiB) + MiB
                                        : (rng >> 16) % (200 * MiB) + 10 * MiB;
            uint32_t id;
            int rc = gmp_cca_alloc(m, size, (rng >> 40) % 3, &id);
            assert_true(rc == GMP_CCA_OK || rc == GMP_CCA_OOM);
            if (rc == GMP_CCA_OK)
                live[n++] = id;
        } else {
            size_t k = (size_t)((rng >> 20) % n);
            assert_int_equal(gmp_cca_free(m, live[k]), GMP_CCA_OK);
            live[k] = live[--n];
        }
        if (step % 500 == 0) {
            uint64_t sum = 0;
            for (size_t i = 0; i < n; i++) {
                uint64_t ai, si;
                assert_true(gmp_cca_block(m, live[i], &ai, &si));
                sum += si;
                for (size_t j = i + 1; j < n; j++) {
                    uint64_t aj, sj;
                    assert_true(gmp_cca_block(m, live[j], &aj, &sj));
                    assert_true(ai + si <= aj || aj + sj <= ai);
                }
            }
            assert_int_equal(st->allocated, sum);
            assert_true(st->reserved >= st->allocated);
            assert_true(st->reserved <= 2048 * MiB);
            assert_int_equal(st->reserved % (2 * MiB), 0);
            if (expandable)
                assert_int_equal(log.mapped - log.unmapped, st->reserved);
        }
    }
    while (n)
        assert_int_equal(gmp_cca_free(m, live[--n]), GMP_CCA_OK);
    gmp_cca_empty_cache(m);
    assert_int_equal(st->allocated, 0);
    assert_int_equal(st->reserved, 0);
    if (expandable) {
        assert_true(log.mapped > 0);
        assert_int_equal(log.mapped, log.unmapped);
        assert_int_equal(log.malloced, 0);
        assert_true(st->alloc_retries > 0); /* the out-of-memory path was taken */
    } else {
        assert_int_equal(st->segments_freed, st->segments_alloc);
    }
    assert_int_equal(gmp_cca_segments(m), 0);
    assert_int_equal(gmp_cca_free_blocks(m, NULL), 0);
    gmp_cca_destroy(m);
}

static void test_random_invariants(void **state)
{
    (void)state;
    random_run(0);
}

static void test_exp_random_invariants(void **state)
{
    (void)state;
    random_run(1);
}

/* get_free_block's best fit over a pool of thousands of cached blocks (more than the model's
 * chunks hold, so that they split and merge): 3000 whole segments of 10 to 1008 MiB (many of the
 * same size) are freed in a random order, then 4000 random requests each take what a brute-force
 * search of the cached blocks says PyTorch's std::set gives (the smallest block of at least the
 * request, the lowest address among equal sizes; its rest cached again), or a new segment when
 * none fits. */
static void test_best_fit_many(void **state)
{
    (void)state;
    enum { K = 3000, R = 4000 };
    static uint64_t csize[K + R], caddr[K + R]; /* the cached blocks (size 0: gone) */
    static uint32_t ids[K];
    size_t nc = 0;
    uint64_t rng = 0x2545f4914f6cdd1dull;
    gmp_cca *m = mk(0, 0, 0);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    for (size_t i = 0; i < K; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        csize[i] = 10 * MiB + 2 * MiB * (rng % 500);
        ids[i] = take(m, csize[i], 0);
        caddr[i] = addr_of(m, ids[i]);
        assert_int_equal(size_of(m, ids[i]), csize[i]);
    }
    nc = K;
    for (size_t i = K; i > 1; i--) { /* freed in a random order */
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t j = (size_t)(rng % i);
        uint32_t t = ids[i - 1];
        ids[i - 1] = ids[j];
        ids[j] = t;
    }
    for (size_t i = 0; i < K; i++)
        assert_int_equal(gmp_cca_free(m, ids[i]), GMP_CCA_OK);
    assert_int_equal(gmp_cca_free_blocks(m, NULL), K);
    for (size_t r = 0; r < R; r++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        uint64_t want = 2 * MiB * (1 + rng % 505);
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < nc; i++)
            if (csize[i] >= want && (best == SIZE_MAX || csize[i] < csize[best] ||
                                     (csize[i] == csize[best] && caddr[i] < caddr[best])))
                best = i;
        uint64_t segs = st->segments_alloc;
        uint32_t id = take(m, want, 0);
        if (best == SIZE_MAX) {
            assert_int_equal(st->segments_alloc, segs + 1);
            continue;
        }
        assert_int_equal(st->segments_alloc, segs);
        assert_int_equal(addr_of(m, id), caddr[best]);
        /* should_split in the large pool: the rest (a multiple of 2 MiB here) stays cached */
        if (csize[best] > want) {
            csize[nc] = csize[best] - want;
            caddr[nc++] = caddr[best] + want;
        }
        csize[best] = 0;
    }
    gmp_cca_destroy(m);
}

/* The same best fit with expandable segments on, over more cached blocks than the model's chunks
 * hold: 3000 small requests (512 B to 32 KiB, multiples of 512) are cut one after the other from
 * the small pool's expandable segment (its pages mapped as it runs out), every other one is freed
 * (each between two allocated blocks: no merge; 1500 cached blocks), then each freed size is asked
 * for once in a random order: it must get the lowest-address cached block of exactly that size
 * (none of these can grow into the unmapped rest, so get_free_block's expandable_size does not
 * pass them over), and give every byte back at the end. */
static void test_exp_best_fit_many(void **state)
{
    (void)state;
    enum { K = 3000 };
    static uint64_t csize[K], caddr[K];
    static uint32_t ids[K];
    static size_t order[K / 2];
    static uint8_t taken[K];
    uint64_t rng = 0x853c49e6748fea9bull;
    seg_log log;
    gmp_cca *m = mk_exp(0, &log);
    const gmp_cca_stats *st = gmp_cca_get_stats(m);
    for (size_t i = 0; i < K; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        csize[i] = 512 * (1 + rng % 64);
        ids[i] = take(m, csize[i], 0);
        caddr[i] = addr_of(m, ids[i]);
        assert_int_equal(size_of(m, ids[i]), csize[i]);
        if (i > 0) /* cut one after the other */
            assert_int_equal(caddr[i], caddr[i - 1] + csize[i - 1]);
    }
    assert_int_equal(log.malloced, 0);
    size_t nfree = 0;
    for (size_t i = 0; i + 1 < K; i += 2) {
        assert_int_equal(gmp_cca_free(m, ids[i]), GMP_CCA_OK);
        order[nfree++] = i;
    }
    assert_true(gmp_cca_free_blocks(m, NULL) >= nfree); /* and the mapped rest at the end */
    for (size_t i = nfree; i > 1; i--) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t j = (size_t)(rng % i), t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    uint64_t maps = log.mapped;
    for (size_t r = 0; r < nfree; r++) {
        uint64_t want = csize[order[r]];
        size_t best = SIZE_MAX;
        for (size_t k = 0; k < nfree; k++) {
            size_t i = order[k];
            if (csize[i] == want && !taken[i] && (best == SIZE_MAX || caddr[i] < caddr[best]))
                best = i;
        }
        assert_true(best != SIZE_MAX);
        ids[best] = take(m, want, 0);
        assert_int_equal(addr_of(m, ids[best]), caddr[best]);
        taken[best] = 1;
    }
    assert_int_equal(log.mapped, maps); /* every request was served from the cache */
    for (size_t i = 0; i < K; i++)
        assert_int_equal(gmp_cca_free(m, ids[i]), GMP_CCA_OK);
    gmp_cca_empty_cache(m);
    assert_int_equal(st->allocated, 0);
    assert_int_equal(st->reserved, 0);
    assert_int_equal(log.mapped, log.unmapped);
    gmp_cca_destroy(m);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        /* one a line: CMakeLists.txt registers each line's test (clang-format would pack them) */
        // clang-format off
        cmocka_unit_test(test_small_one_byte),
        cmocka_unit_test(test_large_split),
        cmocka_unit_test(test_large_round),
        cmocka_unit_test(test_max_split),
        cmocka_unit_test(test_free_merge),
        cmocka_unit_test(test_per_stream),
        cmocka_unit_test(test_oom_release),
        cmocka_unit_test(test_oom_fail),
        cmocka_unit_test(test_oom_oversize),
        cmocka_unit_test(test_roundup_power2),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_gc_threshold),
        cmocka_unit_test(test_gc_passes),
        cmocka_unit_test(test_deferred_free),
        cmocka_unit_test(test_random_invariants),
        cmocka_unit_test(test_exp_grow),
        cmocka_unit_test(test_exp_split),
        cmocka_unit_test(test_exp_best_fit),
        cmocka_unit_test(test_exp_oom_unmap),
        cmocka_unit_test(test_exp_random_invariants),
        cmocka_unit_test(test_exp_hostile),
        cmocka_unit_test(test_exp_deferred),
        cmocka_unit_test(test_best_fit_many),
        cmocka_unit_test(test_exp_best_fit_many),
        // clang-format on
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
