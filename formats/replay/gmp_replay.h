/* gmp_replay: the single pass over a trace that every output shares (docs/architecture.md,
 * Decisions: "One replay, many outputs").
 *
 * The replay reads a trace once through gmp_reader (events in time order) and keeps, per device:
 * the live allocations, allocated and reserved bytes, their peaks and times, the live set at the
 * peak aggregated by allocation site, counts, leaks, OOMs, per-kind totals, driver samples; per
 * thread: the NVTX range stack. Outputs (reports, speedscope, Chrome trace, ...) register a
 * gmp_replay_ops table; each callback is invoked in time order during the pass, with the state
 * after the event, and the final summary is available once gmp_replay_run returns.
 *
 * Memory grows with the live set, the number of distinct allocation sites (device, kind, API,
 * range path, stack), pools, threads and open ranges: never with the length of the trace. There is
 * no allocation per event in the steady state (open-addressing tables that grow geometrically).
 * What counts where is specified in docs/replay.md. */
#ifndef GMP_REPLAY_H
#define GMP_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_reader.h"
#include "gmp_trace.h"

typedef struct gmp_replay gmp_replay;

/* Totals of one memory kind on one device. */
typedef struct gmp_replay_kind_stats {
    uint64_t allocs;          /* successful ALLOC records */
    uint64_t frees;           /* frees matched to a live allocation */
    uint64_t alloc_bytes;     /* sum of the sizes allocated */
    uint64_t live_bytes;      /* live now (after the run: still live at the end) */
    uint64_t live_count;      /* live allocations now */
    uint64_t peak_bytes;      /* maximum of live_bytes */
    uint64_t peak_time_ns;    /* first time live_bytes reached peak_bytes */
    uint64_t max_alloc_bytes; /* largest single allocation */
} gmp_replay_kind_stats;

/* One device (CUDA ordinal), or the host (id -1) for memory tied to no device. */
typedef struct gmp_replay_device {
    int32_t id;                /* CUDA device ordinal; -1: host */
    const gmp_rec_device *def; /* its DEVICE record (name, total); NULL when none was read */
    uint64_t allocated;        /* live bytes of device kinds (gmp_mem_kind_is_device) */
    uint64_t reserved;         /* allocated outside pools + pools' reserved + VMM physical */
    uint64_t peak_allocated;   /* maximum of allocated */
    uint64_t peak_time_ns;     /* when allocated first reached peak_allocated */
    uint64_t peak_reserved;    /* maximum of reserved */
    uint64_t peak_reserved_time_ns;
    uint64_t allocs, frees;   /* successful allocations / matched frees, device kinds only */
    uint64_t alloc_bytes;     /* bytes allocated over the run, device kinds only */
    uint64_t live_count;      /* live allocations of device kinds */
    uint64_t failed_allocs;   /* ALLOC with GMP_MEMF_FAILED (any kind) */
    uint64_t failed_frees;    /* FREE with GMP_MEMF_FAILED (any kind) */
    uint64_t unknown_frees;   /* FREE of an address that was not live (and not a double free) */
    uint64_t double_frees;    /* FREE of an address freed before and not allocated since */
    uint64_t ooms;            /* OOM records */
    uint64_t samples;         /* SAMPLE records */
    uint64_t sample_used;     /* last sample: used bytes (process use, else total - free) */
    uint64_t sample_total;    /* last sample: total bytes */
    uint64_t max_unexplained; /* max over samples of used - reserved (0 when never above) */
    uint64_t max_unexplained_time_ns;
    uint64_t pool_reserved;                         /* part of reserved that pools hold */
    gmp_replay_kind_stats kind[GMP_MEM_KIND_COUNT]; /* per memory kind (unknown kinds: [0]) */
} gmp_replay_device;

/* A place allocations come from: device, kind, API, range path and stack. Totals per site. */
typedef struct gmp_replay_site {
    int32_t device; /* device ordinal (-1 host) */
    uint32_t kind;  /* gmp_mem_kind */
    uint32_t api;   /* string id of the API */
    uint32_t range; /* range path id (0 none) */
    uint32_t stack; /* stack id (0 none) */
    uint64_t allocs, alloc_bytes, frees, free_bytes;
    uint64_t live_bytes, live_count; /* now; after the run: still live at the end (leaked) */
    uint64_t peak_bytes, peak_count; /* live at the moment of the device's peak allocated (device
                                        kinds only; valid after the run) */
    uint64_t max_alloc_bytes;
} gmp_replay_site;

/* One allocation as the replay tracks it. */
typedef struct gmp_replay_alloc {
    uint64_t address; /* address; 0 for VMM physical memory (matched by handle) */
    uint64_t size;
    uint64_t time_ns; /* when it was allocated */
    uint64_t handle;  /* pool, VMM handle, NVTX heap */
    uint32_t tid;     /* thread that allocated it */
    uint32_t flags;   /* GMP_MEMF_* of its ALLOC */
    int32_t device;
    uint32_t kind, api, range, stack;
    size_t site; /* index for gmp_replay_site_at */
} gmp_replay_alloc;

/* What the replay made of an ALLOC or FREE record. */
typedef enum gmp_replay_status {
    GMP_REPLAY_OK = 0,       /* applied */
    GMP_REPLAY_FAILED,       /* the API failed (GMP_MEMF_FAILED): nothing changed */
    GMP_REPLAY_UNKNOWN_FREE, /* FREE of an address that is not live: nothing changed */
    GMP_REPLAY_DOUBLE_FREE,  /* FREE of an address freed before: nothing changed */
    GMP_REPLAY_DUPLICATE,    /* ALLOC that repeats a live one (activity record of a callback
                                event): ignored */
    GMP_REPLAY_REPLACED,     /* ALLOC at a live address: the old allocation was dropped first
                                (its free was lost) */
} gmp_replay_status;

/* An ALLOC or FREE event. */
typedef struct gmp_replay_mem {
    const gmp_rec *rec; /* the record as read */
    gmp_replay_status status;
    const gmp_replay_alloc *alloc;    /* ALLOC: the new allocation; FREE: the one freed (with its
                                         allocation time, size and site); NULL when none */
    size_t nalloc;                    /* FREE of VMM mappings: one unmap may cover several; else 1
                                         (0 when alloc is NULL) */
    const gmp_replay_device *dev;     /* the device's state after the event; NULL when none */
    int counted;                      /* the event changed dev->allocated */
    const gmp_replay_alloc *replaced; /* ALLOC with GMP_REPLAY_REPLACED: the allocation dropped
                                         (its free was lost), as it was; else NULL */
} gmp_replay_mem;

/* A range event of one thread. */
typedef enum gmp_replay_range_op {
    GMP_REPLAY_PUSH,  /* RANGE_PUSH */
    GMP_REPLAY_POP,   /* RANGE_POP, or a range closed implicitly under a POP of an outer one */
    GMP_REPLAY_START, /* RANGE_START */
    GMP_REPLAY_END,   /* RANGE_END */
    GMP_REPLAY_MARK,  /* MARK */
} gmp_replay_range_op;

typedef struct gmp_replay_range {
    const gmp_rec *rec; /* the record as read */
    gmp_replay_range_op op;
    uint32_t tid;
    uint32_t range;    /* range path (PUSH/POP: of the pushed range; START/END/MARK: node) */
    uint64_t begin_ns; /* POP/END: when the range was opened; else the record's time */
    uint64_t end_ns;   /* the record's time */
    uint32_t depth;    /* the thread's push/pop depth after the event */
    int implicit;      /* POP: closed because an outer range was popped (a POP was lost) */
} gmp_replay_range;

/* An OOM record and the replay's state at that moment. */
typedef struct gmp_replay_oom {
    uint64_t time_ns;
    uint32_t tid;
    int32_t device;
    uint32_t api, range, stack;
    uint64_t requested;
    uint64_t live_bytes;     /* the device's allocated bytes at the OOM (replayed) */
    uint64_t reserved_bytes; /* the device's reserved bytes at the OOM (replayed) */
    uint64_t free_bytes;     /* as the driver reported it, 0 unknown */
    int32_t result;
} gmp_replay_oom;

/* A SAMPLE record with what the replay knows at that moment. */
typedef struct gmp_replay_sample {
    const gmp_rec *rec;
    const gmp_replay_device *dev;
    uint64_t used;        /* process use when known, else total - free */
    uint64_t unexplained; /* used - dev->reserved, 0 when not above */
} gmp_replay_sample;

/* Totals of the whole run. */
typedef struct gmp_replay_summary {
    uint64_t events;        /* event records replayed (END excluded, as in END's count) */
    uint64_t alloc_records; /* ALLOC records (every kind, failed ones included) */
    uint64_t free_records;  /* FREE records (every kind, failed ones included) */
    uint64_t failed_allocs, failed_frees;
    uint64_t undone_frees; /* frees undone by a failed-free record of the same call */
    uint64_t unknown_frees, double_frees;
    uint64_t duplicate_allocs; /* GMP_REPLAY_DUPLICATE */
    uint64_t replaced_allocs;  /* GMP_REPLAY_REPLACED */
    uint64_t ooms;
    uint64_t samples;
    uint64_t lost_events; /* sum of LOST counts */
    uint64_t late_events; /* events the reader returned out of time order */
    uint64_t range_pushes, unmatched_pops, implicit_pops;
    uint64_t range_starts, unmatched_ends;
    uint64_t notices;
    uint64_t first_ns, last_ns; /* times of the first and last event (END excluded) */
    uint64_t max_live_allocs;   /* most allocations live at once (all kinds) */
    int complete;               /* the reader found the trace complete */
    int truncated;              /* the file was cut */
    char completeness[256];     /* the reader's completeness line */
} gmp_replay_summary;

/* The callbacks of one output. Every member may be NULL. Each returns GMP_OK to go on; any other
 * value stops the replay, and gmp_replay_run returns it (set a message with gmp_replay_fail). The
 * pointers passed are valid during the call only. */
typedef struct gmp_replay_ops {
    /* before the first record (the header is available from gmp_replay_reader) */
    gmp_err (*begin)(void *ctx, gmp_replay *rp);
    /* every definition record (STRING, DEVICE, THREAD, MODULE, STACK, RANGE), in file order */
    gmp_err (*def)(void *ctx, gmp_replay *rp, const gmp_rec *rec);
    gmp_err (*alloc)(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev);
    gmp_err (*free)(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev);
    gmp_err (*range)(void *ctx, gmp_replay *rp, const gmp_replay_range *ev);
    /* POOL records; dev after the change of the pool's reserved size */
    gmp_err (*pool)(void *ctx, gmp_replay *rp, const gmp_rec *rec, const gmp_replay_device *dev);
    gmp_err (*sample)(void *ctx, gmp_replay *rp, const gmp_replay_sample *ev);
    gmp_err (*oom)(void *ctx, gmp_replay *rp, const gmp_replay_oom *ev);
    /* a device's allocated reached a new maximum (called after the alloc callback) */
    gmp_err (*peak)(void *ctx, gmp_replay *rp, const gmp_replay_device *dev, uint64_t time_ns);
    /* every other event: RESOURCE, ALERT, NOTICE, LOST, END, and types this code does not know */
    gmp_err (*event)(void *ctx, gmp_replay *rp, const gmp_rec *rec);
    /* after the last record; the summary, devices and sites are final */
    gmp_err (*end)(void *ctx, gmp_replay *rp);
} gmp_replay_ops;

typedef struct gmp_replay_opts {
    size_t max_ooms;    /* OOM records kept for gmp_replay_oom_at (default 1024); all are counted */
    size_t max_notices; /* NOTICE messages kept (default 64) */
    int threads;        /* 0: the trace is read ahead in a second thread (gmp_reader_readahead)
                           when this process may run on more than one CPU and the file is over
                           512 KiB (or of unknown size); 1: the replay starts
                           no thread (read-ahead the caller asked of the reader stands). The
                           callbacks always run in the calling thread, and they and the summary
                           are the same either way. */
} gmp_replay_opts;

/* Creates a replay over r (which the caller keeps and closes after gmp_replay_free). opts may be
 * NULL. */
gmp_err gmp_replay_new(gmp_replay **out, gmp_reader *r, const gmp_replay_opts *opts);
void gmp_replay_free(gmp_replay *rp);

/* Registers an output (at most 16); ctx is passed to its callbacks. Before gmp_replay_run. */
gmp_err gmp_replay_add(gmp_replay *rp, const gmp_replay_ops *ops, void *ctx);

/* Reads the whole trace once, invoking the outputs' callbacks. GMP_OK also for a cut trace (see
 * the summary's completeness); reader errors (GMP_ERR_FORMAT ...) and callback errors are returned
 * with a message in gmp_replay_error. Once only. */
gmp_err gmp_replay_run(gmp_replay *rp);

/* Message of the last error; "" when none. */
const char *gmp_replay_error(const gmp_replay *rp);
/* For callbacks: records a message (printf-like) and returns e, for `return gmp_replay_fail(...)`.
 */
gmp_err gmp_replay_fail(gmp_replay *rp, gmp_err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* For outputs that keep state per pool, during a pool callback: a number for the POOL record's
 * pool, so that they keep it in an array rather than a map of their own (the replay has looked the
 * pool up already). Numbers are dense: below the most pools alive at once. A pool keeps its number
 * until a GMP_POOL_DESTROY record removes it (that record's callback still gets it); a new pool may
 * then get the number again. *fresh (when not NULL): 1 for the first record of a pool under its
 * number (the output's entry for it is stale then), else 0. */
uint32_t gmp_replay_pool_number(const gmp_replay *rp, int *fresh);

/* The reader, for definitions (strings, range paths, stacks, modules, header). */
gmp_reader *gmp_replay_reader(const gmp_replay *rp);
const gmp_replay_summary *gmp_replay_get_summary(const gmp_replay *rp);

/* Devices seen (ALLOC/FREE/POOL/SAMPLE/OOM records or DEVICE definitions), ordered by id, the host
 * (-1) first when present. A device's pointer stays valid until gmp_replay_free; the index of a
 * device changes when a device with a lower id appears. */
size_t gmp_replay_device_count(const gmp_replay *rp);
const gmp_replay_device *gmp_replay_device_at(const gmp_replay *rp, size_t i);
const gmp_replay_device *gmp_replay_device_find(const gmp_replay *rp, int32_t id);

/* Allocation sites, in the order they were first seen. Pointers are valid until the next event is
 * replayed (the table grows); after the run, until gmp_replay_free. */
size_t gmp_replay_site_count(const gmp_replay *rp);
const gmp_replay_site *gmp_replay_site_at(const gmp_replay *rp, size_t i);

/* OOM records kept (the first opts.max_ooms). */
size_t gmp_replay_oom_count(const gmp_replay *rp);
const gmp_replay_oom *gmp_replay_oom_at(const gmp_replay *rp, size_t i);

/* NOTICE records kept (severity and message, NUL-terminated copies). */
size_t gmp_replay_notice_count(const gmp_replay *rp);
const char *gmp_replay_notice_at(const gmp_replay *rp, size_t i, uint32_t *severity,
                                 uint64_t *time_ns);

/* Calls fn for every allocation live now (after the run: live at the end), in no particular
 * order; stops at the first non-GMP_OK return and returns it. */
gmp_err gmp_replay_live_foreach(const gmp_replay *rp,
                                gmp_err (*fn)(void *ctx, const gmp_replay_alloc *a), void *ctx);

/* One frame of a stack, resolved as far as the trace allows (symbolization is not done here). */
typedef struct gmp_replay_frame {
    uint32_t kind;                /* GMP_FRAME_NATIVE or GMP_FRAME_PYTHON */
    uint64_t address;             /* NATIVE: return address */
    const gmp_rec_module *module; /* NATIVE: the module mapped at address; NULL when none */
    uint64_t offset;              /* NATIVE: address - module->base (when module) */
    gmp_str function, file;       /* PYTHON */
    uint32_t line;                /* PYTHON */
} gmp_replay_frame;

/* Frames of a stack id, innermost first; writes at most max and returns the stack's depth. */
size_t gmp_replay_stack_frames(const gmp_replay *rp, uint32_t stack, gmp_replay_frame *out,
                               size_t max);

/* ---- for tests and benchmarks: no output of the product calls these ---- */

/* For outputs that keep state per pool in tables larger than the caches, during a callback: 1 and
 * the handle of a POOL record the replay will reach a few events later (*pool), when it has looked
 * ahead (it does while thousands of pools or live allocations are known), so that the output can
 * fetch its entry ahead of use; 0 otherwise. A hint: it never changes what the callbacks get.
 * tests/replay/test_replay.c checks that the hint is right; no output uses it today. */
int gmp_replay_pool_ahead(const gmp_replay *rp, uint64_t *pool);

#endif
