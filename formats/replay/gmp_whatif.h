/* gmp_whatif: replays the tensor allocations of a recording (PyTorch's caching allocator as the
 * snapshot import and the --torch-history merge write it: ALLOC/FREE records of api
 * "CUDACachingAllocator.malloc" and "CUDACachingAllocator.free", the main pool's, with their
 * requested sizes and streams) through one caching-allocator model (gmp_cca_model.h) per config and
 * device, and collects what each config would have done. Memory is bounded by the model's live
 * blocks and one address -> block map per device and config.
 */
#ifndef GMP_WHATIF_H
#define GMP_WHATIF_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_cca_model.h"
#include "gmp_error.h"
#include "gmp_reader.h"

typedef struct gmp_whatif_row {
    int modelled; /* 0: gmp_cca_create refused the config (not modelled yet): no figures */
    uint64_t peak_reserved, peak_allocated, segments;
    uint64_t frag_at_peak; /* reserved - allocated when reserved reached its peak */
    uint64_t capacity;     /* the device's memory, or --capacity; 0 unknown */
    int fits;              /* no allocation failed and peak_reserved <= capacity */
    int failed;            /* an allocation failed (the model's OOM under the capacity) */
    uint64_t fail_time_ns, fail_size;
    uint32_t fail_stack;
} gmp_whatif_row;

/* What the recording itself says of a device (gmp_whatif_scan): its reserved memory (the import's
 * POOL records: one pool per cudaMalloc'ed segment, one per device for expandable segments). */
typedef struct gmp_whatif_recorded {
    int present;
    uint64_t peak_reserved; /* the recorded reserved's maximum */
    uint64_t segments;      /* POOL creates other than the expandable pool, and the maps of the
                             * expandable pool (each growth of its reserve): num_device_alloc */
    /* At the first recorded OOM: reserved + the driver's free bytes, i.e. what PyTorch could
     * have held in all (0 without an OOM) */
    uint64_t oom_capacity;
    /* Tensor allocations: PyTorch's caching allocator's (a snapshot, a --torch-history merge),
     * and stream-ordered ones (cudaMallocAsync, cudaMallocFromPoolAsync: PyTorch's cudaMallocAsync
     * backend, `run --torch-alloc async`). gmp_whatif_run replays the first, or, on a device
     * that has none of them, the second (given recorded). */
    uint64_t cca_allocs, async_allocs;
    /* The recording's time zero (gmp_trace_zero: what report and view count times from), the
     * same in every device's entry */
    uint64_t t0_ns;
} gmp_whatif_recorded;

/* First pass: rec[0..GMP_WHATIF_MAX_DEVICES) from r, read to its end. */
#define GMP_WHATIF_MAX_DEVICES 1024
gmp_err gmp_whatif_scan(gmp_reader *r, gmp_whatif_recorded *rec, char *msg, size_t msglen);

/* The reserved bytes of one config's model over time (gmp_whatif_run_series), bounded whatever the
 * recording's length: buckets of equal width from the device's first tensor event, each holding
 * the most the model reserved in it (the value carried over from the bucket before when nothing
 * happened in it); when an event passes the last bucket, pairs of buckets merge (their maximum) and
 * the width doubles, as the view's timeline buckets do. */
#define GMP_WHATIF_SERIES_BUCKETS 4096
typedef struct gmp_whatif_series {
    uint64_t t0_ns;    /* trace time of bucket 0's start */
    uint64_t width_ns; /* bucket i covers [t0 + i * width, t0 + (i + 1) * width) */
    size_t n;          /* buckets used (the last one holds the last event) */
    uint64_t *max;     /* n: the most reserved in each bucket */
    uint64_t peak;     /* the model's peak reserved (the buckets' maximum) */
} gmp_whatif_series;

/* The most reserved in [t0_ns, t1_ns] (the buckets that overlap it); 0 before the first event,
 * the last bucket's after the last one. */
uint64_t gmp_whatif_series_max(const gmp_whatif_series *s, uint64_t t0_ns, uint64_t t1_ns);

/* gmp_whatif_scan, and each device's recorded reserve over time into series[device] (an array of
 * GMP_WHATIF_MAX_DEVICES pointers, NULL for a device without POOL records; free them with
 * gmp_whatif_series_free). */
gmp_err gmp_whatif_scan_series(gmp_reader *r, gmp_whatif_recorded *rec, gmp_whatif_series **series,
                               char *msg, size_t msglen);
void gmp_whatif_series_free(gmp_whatif_series *s);

typedef struct gmp_whatif_device {
    int32_t id;
    uint64_t total_bytes; /* from the DEVICE record; 0 unknown */
    uint64_t allocs;      /* tensor allocations replayed */
    gmp_whatif_row *rows; /* one per config */
    /* gmp_whatif_run_series: the series config's reserved over time; NULL otherwise, or when that
     * config is not modelled */
    gmp_whatif_series *series;
} gmp_whatif_device;

typedef struct gmp_whatif {
    size_t nconfigs, ndevices;
    gmp_whatif_device *devices; /* by device id */
} gmp_whatif;

/* Reads r to its end. capacity 0: each device's total memory from its DEVICE record, else
 * (recorded, may be NULL) the capacity its OOM shows; none when neither is known. With recorded,
 * a device with no caching-allocator tensor but stream-ordered allocations replays those (their
 * frees: cudaFreeAsync) through the models: what PyTorch's native allocator would have done. */
gmp_err gmp_whatif_run(gmp_reader *r, const gmp_cca_config *cfgs, size_t ncfg, uint64_t capacity,
                       const gmp_whatif_recorded *recorded, gmp_whatif *out, char *msg,
                       size_t msglen);
/* gmp_whatif_run, and for config series_cfg (< ncfg) each device's reserved over time
 * (gmp_whatif_device.series): GMP_WHATIF_SERIES_BUCKETS buckets of 8 bytes per device at most. */
gmp_err gmp_whatif_run_series(gmp_reader *r, const gmp_cca_config *cfgs, size_t ncfg,
                              uint64_t capacity, const gmp_whatif_recorded *recorded,
                              size_t series_cfg, gmp_whatif *out, char *msg, size_t msglen);
void gmp_whatif_free(gmp_whatif *w);

/* Both reserves over time of the trace at path (gmp_reader_open), for the views: the recorded one
 * (gmp_whatif_scan_series) and the one cfg's model replays (gmp_whatif_run_series with cfg alone;
 * capacity as gmp_whatif_run's). Two passes over the trace. */
typedef struct gmp_whatif_reserve {
    gmp_whatif w;                 /* w.devices[i].series: the replayed reserve (NULL: none) */
    gmp_whatif_recorded *rec;     /* GMP_WHATIF_MAX_DEVICES */
    gmp_whatif_series **recorded; /* GMP_WHATIF_MAX_DEVICES: the recorded reserve, NULL none */
} gmp_whatif_reserve;
gmp_err gmp_whatif_reserve_of(const char *path, const gmp_cca_config *cfg, uint64_t capacity,
                              gmp_whatif_reserve *out, char *msg, size_t msglen);
/* The replayed reserve of device id, NULL when none. */
const gmp_whatif_series *gmp_whatif_reserve_replayed(const gmp_whatif_reserve *rs, int32_t id);
const gmp_whatif_series *gmp_whatif_reserve_recorded(const gmp_whatif_reserve *rs, int32_t id);
void gmp_whatif_reserve_free(gmp_whatif_reserve *rs);

#endif
