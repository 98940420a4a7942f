/* gmp_analysis: analyses of a trace computed in the one replay pass (docs/architecture.md,
 * Decisions: "One replay, many outputs"), for the report (docs/report.md, "Analyses"):
 *
 *  - growth: the iterations of the program are found in the recording (the outermost range, or
 *    MARK name, that repeats: see gmp_analysis_iter); every allocation site's live bytes are
 *    followed at the iterations' ends, and the sites that keep growing over the later iterations
 *    (warm-up and state allocated once excluded) make one verdict per leak, at the range the
 *    growing allocations were made in (its owner; the stack when there is no range), with bytes
 *    per iteration and the sites' stacks (gmp_analysis_leak). Besides, for every range path closed
 *    at least GMP_ANALYSIS_MIN_SAMPLES times, the device's allocated bytes at each exit (data:
 *    gmp_analysis_growth);
 *  - temporary allocations: allocations freed within a short time (opts.temp_ns, 1 ms by
 *    default) and, when made inside a push/pop range, before that range closed on their thread
 *    (what outlives the work that made it is kept, not temporary, however fast the run), per
 *    range path and per allocation site ("churn");
 *  - allocator overhead: reserved - allocated per device at the peak of allocated bytes, at the
 *    peak of reserved bytes and at the end, with the part held by pools and VMM's numbers;
 *  - out-of-memory errors explained: at each failed allocation, allocated and reserved, the
 *    memory free inside the reserved segments and (where the recording knows the blocks: PyTorch
 *    snapshots) the largest free block there, the driver's free memory and total, the memory
 *    outside the allocator, what was live (the largest sites), and one verdict: fragmentation,
 *    capacity, or memory outside the allocator (gmp_analysis_oom).
 *
 * A gmp_analysis registers its own gmp_replay_ops (gmp_analysis_attach); after the run,
 * gmp_analysis_result builds a gmp_analysis_result whose strings and stacks are translated by a
 * resolver (the report's string and stack tables), so that it no longer refers to the replay.
 *
 * Memory is proportional to the distinct range paths, allocation sites and devices, never to the
 * length of the trace: per (range path, device) a streaming least-squares regression and a series
 * of at most GMP_ANALYSIS_SERIES exit values (the stride doubles as the range repeats); per site a
 * few counters and, for at most GMP_ANALYSIS_SLOTS ranges, the site's live bytes at two exits of
 * the range (the window's start, which moves to exit 2^k as the range repeats, so that the window
 * is always the later half to three quarters of the iterations) and at its last exit, with the
 * rises and falls between, kept lazily (a site saves its values only when it changes after an
 * exit: O(GMP_ANALYSIS_SLOTS) per event, nothing per exit). */
#ifndef GMP_ANALYSIS_H
#define GMP_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gmp_error.h"
#include "gmp_replay.h"

#define GMP_ANALYSIS_SERIES 64     /* exit values kept per range and device (downsampled) */
#define GMP_ANALYSIS_SLOTS 8       /* ranges whose sites are followed at once */
#define GMP_ANALYSIS_MIN_SAMPLES 3 /* exits before a range is listed under growth */

typedef struct gmp_analysis_opts {
    uint64_t temp_ns;  /* an allocation freed within this time (and inside its range) is temporary
                          (default 1 ms) */
    uint32_t min_reps; /* repetitions before a growth can be a leak (default 4, at least 3) */
    double rise_frac;  /* of the pairs of consecutive exits that change, the share that must rise
                          (default 0.8) */
    size_t max_sites;  /* growing sites kept per growth, hottest temporary sites (default 20) */
    size_t max_growth; /* growth rows kept (default 1000): leaks first */
} gmp_analysis_opts;

/* Translates the replay's ids into the caller's (the report's string and stack indices). NULL
 * members keep the ids. */
typedef struct gmp_analysis_resolver {
    void *ctx;
    uint32_t (*range)(void *ctx, uint32_t range_id); /* range path id -> string index */
    uint32_t (*api)(void *ctx, uint32_t api_id);     /* string id -> string index */
    uint32_t (*stack)(void *ctx, uint32_t stack_id); /* stack id -> stack index */
} gmp_analysis_resolver;

/* An allocation site (device, kind, API, range path, stack), ids as the resolver gave them. */
typedef struct gmp_analysis_site {
    int32_t device;
    uint32_t kind, api, range, stack;
} gmp_analysis_site;

typedef struct gmp_analysis_growth_site {
    gmp_analysis_site site;
    uint64_t first_bytes; /* its live bytes at the window's first iteration end */
    uint64_t last_bytes;  /* at the last iteration's end */
    uint64_t growth_bytes;
    double rate_bytes;     /* growth_bytes / iterations in the window */
    uint64_t rises, falls; /* iteration ends at which its live bytes were above / below the
                              previous one's, in the window */
} gmp_analysis_growth_site;

/* A range path that repeats, on one device. */
typedef struct gmp_analysis_growth {
    uint32_t range;   /* path */
    int thread_bound; /* 1 push/pop, 0 start/end */
    int32_t device;
    uint64_t repetitions;                                   /* exits (closed instances) */
    uint64_t first_bytes, last_bytes, min_bytes, max_bytes; /* device allocated at the exits */
    double rate_bytes;     /* least-squares slope: bytes per repetition */
    int64_t total_bytes;   /* last_bytes - first_bytes */
    uint64_t rises, falls; /* pairs of consecutive exits that rise / fall */
    uint64_t mid_bytes;    /* at the middle repetition (from the series) */
    int leak;              /* the range owns a leak verdict (gmp_analysis_leak) */
    size_t nseries;
    uint64_t series_stride; /* series[i] is the value at exit i * stride + 1 */
    uint64_t series[GMP_ANALYSIS_SERIES];
} gmp_analysis_growth;

/* Temporary allocations of one range path on one device (the range the allocation was made in). */
typedef struct gmp_analysis_temp {
    uint32_t range;
    int32_t device;
    uint64_t allocs, alloc_bytes;    /* every allocation made there */
    uint64_t temp_count, temp_bytes; /* of those, freed within opts.temp_ns */
    uint64_t temp_life_ns;           /* sum of the temporaries' lifetimes */
} gmp_analysis_temp;

typedef struct gmp_analysis_temp_site {
    gmp_analysis_site site;
    uint64_t allocs;
    uint64_t temp_count, temp_bytes, temp_life_ns;
} gmp_analysis_temp_site;

/* The temporary allocations of one device, all ranges together (what `--device` shows). */
typedef struct gmp_analysis_temp_device {
    int32_t device;
    uint64_t allocs, temp_count, temp_bytes;
} gmp_analysis_temp_device;

/* The state of a device at one moment. */
typedef struct gmp_analysis_point {
    uint64_t time_ns;
    uint64_t allocated, reserved;
    uint64_t overhead;       /* reserved - allocated */
    uint64_t pool_reserved;  /* what pools held */
    uint64_t pool_allocated; /* blocks allocated from pools (async-pool) */
    uint64_t vmm_physical;   /* cuMemCreate memory */
    uint64_t vmm_mapped;     /* cuMemMap'ed views */
    uint64_t va_reserved;    /* address space reserved (cuMemAddressReserve) */
} gmp_analysis_point;

typedef struct gmp_analysis_overhead {
    int32_t device;
    gmp_analysis_point at_peak_allocated, at_peak_reserved, at_end;
} gmp_analysis_overhead;

/* Why an allocation failed (docs/report.md, "Out of memory, why"). */
typedef enum gmp_analysis_oom_verdict {
    GMP_ANALYSIS_OOM_CAPACITY = 0,  /* the live set itself is too big: not enough memory even
                                       counting what the allocator held free, the driver's free
                                       memory and what lies outside the allocator */
    GMP_ANALYSIS_OOM_FRAGMENTATION, /* enough memory free inside the reserved segments (or that
                                       plus the driver's free memory), no block large enough */
    GMP_ANALYSIS_OOM_OUTSIDE,       /* memory the driver counts as used that the allocator does not
                                       hold (CUDA context, cuBLAS/cuDNN workspaces, NCCL, other
                                       processes) would have made room */
} gmp_analysis_oom_verdict;

#define GMP_ANALYSIS_OOM_LIVE 5 /* sites listed as live at an OOM */

/* How much the recording says about free blocks inside reserved segments. */
typedef enum gmp_analysis_blocks {
    GMP_ANALYSIS_BLOCKS_UNKNOWN = 0, /* no block layout (a CUDA trace: pools are opaque) */
    GMP_ANALYSIS_BLOCKS_KNOWN,       /* segments and blocks with addresses (a PyTorch snapshot) */
    GMP_ANALYSIS_BLOCKS_EXPANDABLE,  /* a snapshot with expandable segments: their mapped pages
                                        are not in it, so the largest free block is not known */
} gmp_analysis_blocks;

typedef struct gmp_analysis_oom_live {
    gmp_analysis_site site;
    uint64_t bytes, count; /* live then */
} gmp_analysis_oom_live;

typedef struct gmp_analysis_oom {
    uint64_t time_ns;
    int32_t device;
    uint64_t requested, allocated, reserved;
    uint64_t free_bytes;  /* what the driver reported free, 0 unknown */
    uint64_t total_bytes; /* the device's memory (its DEVICE record), 0 unknown */
    uint64_t cached;      /* reserved - allocated: free inside the reserved segments */
    gmp_analysis_blocks blocks;
    uint64_t largest_free; /* the largest free block inside a reserved segment (blocks KNOWN) */
    int has_outside;       /* total and free known */
    uint64_t outside;      /* total - free - reserved: used, but not by the allocator */
    gmp_analysis_oom_verdict verdict;
    size_t nlive;
    gmp_analysis_oom_live live[GMP_ANALYSIS_OOM_LIVE]; /* largest live sites of the device */
    uint64_t live_total;                               /* what all its sites held then */
} gmp_analysis_oom;

/* What an iteration is in this recording: the range path (push/pop or start/end) or MARK name that
 * repeats at least opts.min_reps times, the outermost such (fewest path components; a MARK counts
 * as outermost: a step marker), and of those the one that repeats most. Nested ranges therefore
 * never compete: `step` is the iteration, not `step/forward` inside it, and not `epoch` when epoch
 * repeats fewer than min_reps times. */
typedef enum gmp_analysis_iter_kind {
    GMP_ANALYSIS_ITER_NONE = 0, /* nothing repeats enough: no growth verdict */
    GMP_ANALYSIS_ITER_PUSH,     /* a push/pop range's exits */
    GMP_ANALYSIS_ITER_START,    /* a start/end range's ends */
    GMP_ANALYSIS_ITER_MARK,     /* a MARK's occurrences */
} gmp_analysis_iter_kind;

typedef struct gmp_analysis_iter {
    gmp_analysis_iter_kind kind;
    uint32_t range;        /* path (or MARK name), as the resolver gave it */
    uint32_t depth;        /* path components (0: a MARK) */
    uint64_t iterations;   /* ends seen */
    uint64_t tracked_from; /* sites followed from this iteration's end (1 = the first; 0 when the
                              range had no tracking slot: no verdict) */
    uint64_t window_from;  /* growth is measured from this iteration's end to the last (the
                              later half: warm-up before it excluded) */
} gmp_analysis_iter;

/* One probable leak: allocation sites that grew over the later iterations, owned by one range
 * (the range the growing allocations were made in; a parent range that only contains it gets no
 * verdict of its own) or, for allocations outside any range, one stack. */
typedef struct gmp_analysis_leak {
    int32_t device;
    uint32_t range;        /* owner range path (string index), 0 none */
    uint32_t stack;        /* when range is 0: the stack of the growing allocations */
    uint64_t growth_bytes; /* over the window */
    double rate_bytes;     /* growth_bytes / iterations in the window */
    uint64_t iterations;   /* in the window (from iter.window_from to the last) */
    uint64_t rises, falls; /* of its largest site */
    size_t nsites;
    gmp_analysis_growth_site *sites; /* biggest growth first, at most opts.max_sites */
} gmp_analysis_leak;

typedef struct gmp_analysis_result {
    gmp_analysis_opts opts;
    gmp_analysis_iter iter;
    size_t nleaks;
    gmp_analysis_leak *leaks; /* fastest first */
    size_t ngrowth;
    gmp_analysis_growth *growth; /* owners of a leak first, then by rate */
    uint64_t ranges_checked;     /* (range, device) pairs closed at least 3 times */
    size_t ntemp;
    gmp_analysis_temp *temp;                 /* most temporary bytes first */
    uint64_t temp_count, temp_bytes, allocs; /* over all ranges */
    size_t ntemp_sites;
    gmp_analysis_temp_site *temp_sites; /* most temporaries first, at most opts.max_sites */
    size_t ntemp_devices;
    gmp_analysis_temp_device *temp_devices; /* the totals above per device, by id */
    size_t noverhead;
    gmp_analysis_overhead *overhead; /* devices with device memory, by id */
    size_t nooms;
    gmp_analysis_oom *ooms; /* the first 64 */
} gmp_analysis_result;

typedef struct gmp_analysis gmp_analysis;

/* opts may be NULL (defaults). */
gmp_err gmp_analysis_new(gmp_analysis **out, const gmp_analysis_opts *opts);
void gmp_analysis_free(gmp_analysis *a);
/* Registers the analysis on rp (before gmp_replay_run). */
gmp_err gmp_analysis_attach(gmp_analysis *a, gmp_replay *rp);
/* After the replay's last event (in an `end` callback or after gmp_replay_run, before
 * gmp_replay_free): the result, ids translated by res (may be NULL). NULL when out of memory. */
gmp_analysis_result *gmp_analysis_finish(gmp_analysis *a, const gmp_analysis_resolver *res);
void gmp_analysis_result_free(gmp_analysis_result *r);

/* The leak criterion of one site over the window of w iterations (see docs/report.md):
 *   growth_bytes > 0, rises >= opts.rise_frac * (rises + falls), 2 * rises >= w (it rises at
 *   least every other iteration: a one-time allocation in the window is not a leak). */
int gmp_analysis_site_leaks(const gmp_analysis_growth_site *s, uint64_t w,
                            const gmp_analysis_opts *opts);

/* An OOM verdict's name ("capacity", "fragmentation", "outside_allocator": the report's JSON) and
 * its words, the same in every output that says it (the report, the HTML view). */
const char *gmp_analysis_oom_verdict_name(gmp_analysis_oom_verdict v);
const char *gmp_analysis_oom_verdict_text(gmp_analysis_oom_verdict v);

#endif
