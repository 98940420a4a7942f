/* gmp_cca_model: a model of PyTorch's CUDA caching allocator (the native DeviceCachingAllocator of
 * c10/cuda/CUDACachingAllocator.cpp), for replaying a recording of tensor allocations under other
 * allocator settings ("what if"). It keeps no device memory: it hands out block ids and model
 * addresses and counts what PyTorch's statistics would count (reserved_bytes, allocated_bytes,
 * num_device_alloc, num_device_free) for one device.
 *
 * Each rule is written from PyTorch's source at commit 001074d25084fdb87a799823e395a50f5ec044d3
 * (c10/cuda/CUDACachingAllocator.cpp; the function that holds the rule is named beside it in
 * gmp_cca_model.c): size rounding (round_size, roundup_power2_next_division), the small and large
 * pools and the size of a new segment (get_pool, get_allocation_size), best-fit search per stream
 * (BlockComparatorSize, get_free_block, with max_split_size), splitting (should_split,
 * alloc_found_block), merging on free (free_block, try_merge_blocks), and the out-of-memory path
 * of malloc (alloc_block, release_available_cached_blocks, release_cached_blocks, release_block),
 * and garbage_collection_threshold (garbage_collect_cached_blocks, with BlockPool's
 * get_free_blocks_call_count and Block::gc_count_base as the age of a cached block), and
 * expandable segments (ExpandableSegment, find_expandable_block, map_block,
 * try_allocate_expandable_block, unmap_block, release_blocks, release_expandable_segment, and their
 * cases in get_free_block, should_split and try_merge_blocks): one segment per stream and pool,
 * its address space 1 1/8 of the capacity, mapped and unmapped in pages of 2 MiB (small pool) or
 * 20 MiB (large pool).
 *
 * Not modelled: the timing of events of frees that wait for other streams: the caller says
 * when they complete (gmp_cca_free_deferred, gmp_cca_process_events). Nor CUDA graph private pools,
 * and the per-interval form of roundup_power2_divisions (one value for every size is modelled). */
#ifndef GMP_CCA_MODEL_H
#define GMP_CCA_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* Constants of CUDACachingAllocator.cpp (same names there). */
#define GMP_CCA_MIN_BLOCK ((uint64_t)512)            /* kMinBlockSize */
#define GMP_CCA_SMALL_SIZE ((uint64_t)1 << 20)       /* kSmallSize: largest small request */
#define GMP_CCA_SMALL_BUFFER ((uint64_t)2 << 20)     /* kSmallBuffer: small segment */
#define GMP_CCA_LARGE_BUFFER ((uint64_t)20 << 20)    /* kLargeBuffer */
#define GMP_CCA_MIN_LARGE_ALLOC ((uint64_t)10 << 20) /* kMinLargeAlloc */
#define GMP_CCA_ROUND_LARGE ((uint64_t)2 << 20)      /* kRoundLarge */

typedef struct gmp_cca_config {
    /* max_split_size_mb in bytes; 0 = unlimited (PyTorch's default, SIZE_MAX). Otherwise it must
     * exceed kLargeBuffer, as CUDAAllocatorConfig requires ("max_split_size_mb too small"). */
    uint64_t max_split_size;
    /* Bytes cudaMalloc may hold in all (the device's free memory, or a memory fraction);
     * 0 = unlimited. A segment that would take reserved past it fails as cudaMalloc would. */
    uint64_t capacity;
    /* roundup_power2_divisions:N for every size (0 or 1 = off). */
    uint32_t roundup_power2_divisions;
    /* expandable_segments: 0 off, 1 on (gmp_cca_create refuses anything else). With a capacity,
     * mapping pages fails past it (cuMemCreate out of memory) and each segment's address space is
     * 1 1/8 of it (ExpandableSegment: totalGlobalMem + totalGlobalMem / 8); under a memory fraction
     * PyTorch's alloc_block would also refuse when reserved + get_allocation_size(size) passes the
     * fraction, which the model does not do (its capacity is the device's memory here). */
    uint32_t expandable_segments;
    /* garbage_collection_threshold: 0 = off, else strictly between 0 and 1 (create refuses the
     * rest, as CUDAAllocatorConfig does). PyTorch collects only under a memory fraction
     * (set_fraction), against allowed_memory_maximum: the model collects only when capacity is
     * set, against capacity (garbage_collect_cached_blocks). */
    double garbage_collection_threshold;
} gmp_cca_config;

typedef struct gmp_cca_stats {
    uint64_t reserved, peak_reserved;   /* reserved_bytes: sizes of the segments held */
    uint64_t allocated, peak_allocated; /* allocated_bytes: sizes of the blocks handed out */
    uint64_t segments_alloc; /* num_device_alloc: cudaMalloc calls that succeeded, and maps of
                              * expandable segments (map_block) */
    uint64_t segments_freed; /* num_device_free: cudaFree calls, and unmaps (unmap_block) */
    uint64_t alloc_retries;  /* num_alloc_retries: alloc_block after release_cached */
    uint64_t ooms;           /* num_ooms: requests that failed */
} gmp_cca_stats;

enum { GMP_CCA_OK = 0, GMP_CCA_OOM = 1, GMP_CCA_EINVAL = 2, GMP_CCA_ENOMEM = 3 };

typedef struct gmp_cca gmp_cca;

/* NULL if the config holds a value PyTorch refuses or memory is short. */
gmp_cca *gmp_cca_create(const gmp_cca_config *cfg);
void gmp_cca_destroy(gmp_cca *m);

/* The allocator's malloc(size, stream): on GMP_CCA_OK *id names the block until gmp_cca_free.
 * GMP_CCA_OOM: PyTorch would raise OutOfMemoryError (the cached segments it released on the way
 * stay released, as in PyTorch). GMP_CCA_EINVAL: size 0, which PyTorch never passes to malloc.
 * GMP_CCA_ENOMEM: the host is out of memory. */
int gmp_cca_alloc(gmp_cca *m, uint64_t size, uint64_t stream, uint32_t *id);
/* free(block): GMP_CCA_EINVAL for an id that is not allocated. */
int gmp_cca_free(gmp_cca *m, uint32_t id);

/* The block's model address (segments are laid out one after the other, never reused) and its
 * size (the rounded request, or the whole block when it was not split). 0 if id is not allocated.
 */
int gmp_cca_block(const gmp_cca *m, uint32_t id, uint64_t *addr, uint64_t *size);
/* free(block) for a block used on other streams (record_stream): allocated bytes drop now, but the
 * block is not cached (nor merged with) until its events complete: gmp_cca_process_events, or an
 * empty_cache / out-of-memory retry, which synchronize first (insert_events, process_events,
 * synchronize_and_free_events). PyTorch polls the events at each malloc; the model cannot know
 * when they end, so the caller says it. GMP_CCA_EINVAL for an id that is not allocated. */
int gmp_cca_free_deferred(gmp_cca *m, uint32_t id);
/* process_events with every event complete: the pending frees finish in the order they were made
 * (free_block: merge, cache). */
void gmp_cca_process_events(gmp_cca *m);
/* Frees still waiting for their events. */
size_t gmp_cca_pending_frees(const gmp_cca *m);
/* release_cached_blocks: what torch.cuda.empty_cache() does: the pending frees complete
 * (synchronize_and_free_events), then unsplit free segments are released. */
void gmp_cca_empty_cache(gmp_cca *m);

const gmp_cca_stats *gmp_cca_get_stats(const gmp_cca *m);
/* Number of cached free blocks (both pools, every stream), and the largest. */
size_t gmp_cca_free_blocks(const gmp_cca *m, uint64_t *largest);
/* PyTorch's round_size under this config (exported for tests and the what-if report). */
uint64_t gmp_cca_round_size(const gmp_cca *m, uint64_t size);

/* The segments as torch.cuda.memory_snapshot() would list them now (DeviceCachingAllocator::
 * snapshot): each cudaMalloc'ed segment, and for expandable segments each contiguous mapped range.
 * Linear in the blocks. */
size_t gmp_cca_segments(const gmp_cca *m);

/* Segment events, named as PyTorch's TraceEntry actions (segment_alloc, segment_free,
 * segment_map, segment_unmap), with the model address and size of the range. */
enum {
    GMP_CCA_SEGMENT_ALLOC = 0, /* alloc_block's cudaMalloc */
    GMP_CCA_SEGMENT_FREE = 1,  /* release_block's cudaFree */
    GMP_CCA_SEGMENT_MAP = 2,   /* map_block */
    GMP_CCA_SEGMENT_UNMAP = 3  /* unmap_block */
};
typedef void (*gmp_cca_segment_fn)(void *ctx, int op, uint64_t addr, uint64_t size);
/* Calls fn for each segment event from now on (NULL: none), as PyTorch's record_trace would
 * record it; for tests that compare the model's segments with a recording's in order. */
void gmp_cca_on_segment(gmp_cca *m, gmp_cca_segment_fn fn, void *ctx);

#endif
