/* gmp_import_torch: converts a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot, a
 * pickle read with gmp_pickle: nothing in it is executed) into a gpumemprof trace.
 *
 * The caching allocator is a memory pool, and the trace says so with the records a stream-ordered
 * pool uses (docs/import.md has the whole mapping):
 *  - a segment (segment_alloc / segment_free: the allocator's cudaMalloc / cudaFree) is a pool
 *    whose handle is the segment's address: POOL create + POOL reserved (its size), POOL destroy;
 *  - the mapped memory of expandable segments (segment_map / segment_unmap: cuMemMap / cuMemUnmap)
 *    is one pool per device whose reserved size follows the mapped bytes;
 *  - a tensor block (alloc / free_completed) is an ALLOC / FREE of kind async-pool, api
 *    "CUDACachingAllocator.malloc" / "CUDACachingAllocator.free", with its frames as a stack of
 *    Python frames (file, function, line); free_requested is only a request and is not recorded;
 *  - oom is a failed ALLOC (GMP_MEMF_FAILED) then an OOM record (requested size, device_free as
 *    the free bytes);
 *  - external_annotations (record_function START/END) are RANGE push/pop on the thread of their
 *    device (TID + device: each device's ranges nest by themselves), an entry's user_metadata (a
 *    "/"-separated range path) and compile_context are ranges pushed above them around the
 *    allocations that carry them; the domains say which (gmp_torch_layout.h).
 * The replay (docs/replay.md) then gives reserved = the bytes of segments (memory_reserved()) and
 * allocated = the requested bytes of blocks, freed at free_completed, as memory_viz counts them
 * (not memory_allocated(): rounded block sizes, freed at free_requested; docs/import.md).
 * Memory that existed before the recorded window (the trace is a ring buffer) is reconstructed
 * from the final `segments` and written at the start (blocks, then segments): segments and blocks
 * alive at the dump that no event of the window created, and those the window frees without having
 * created them. time_us becomes the trace time (ns); without it, event order is the time (1 us
 * apart). The legacy format (a bare list of segments, no trace) is the state at the dump. */
#ifndef GMP_IMPORT_TORCH_H
#define GMP_IMPORT_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"
#include "gmp_torch_layout.h"

typedef struct gmp_import_torch_stats {
    int legacy;             /* the input was a bare list of segments */
    uint64_t entries;       /* trace entries read, all devices */
    uint64_t allocs;        /* alloc */
    uint64_t frees;         /* free_completed */
    uint64_t segments;      /* segment_alloc + segment_map */
    uint64_t segment_frees; /* segment_free + segment_unmap */
    uint64_t ooms;          /* oom */
    uint64_t ignored;       /* free_requested, snapshot and unknown actions */
    uint64_t pre_segments;  /* segments reconstructed as existing before the window */
    uint64_t pre_blocks;    /* blocks reconstructed as existing before the window */
    uint64_t pre_reserved;  /* their bytes, all devices */
    uint64_t pre_allocated;
    uint64_t inconsistencies; /* places where the snapshot contradicts itself (see the notices) */
    uint32_t devices;         /* devices with events or segments */
    int has_time;             /* time_us was present */
    int overflowed;           /* allocator_settings.trace_alloc_overflowed: entries are missing */
    uint32_t overflowed_devices;  /* which, when it was given per device (bit d: device d < 32) */
    uint64_t trace_max_entries;   /* allocator_settings.trace_alloc_max_entries; 0: not given */
    uint64_t annotations;         /* external_annotations read (record_function START/END) */
    uint64_t annotations_ignored; /* of another shape, or without their START */
    uint64_t umeta_allocs;        /* alloc/oom entries with a user_metadata */
    uint64_t cctx_allocs;         /* alloc/oom entries inside a compiled region */
    /* allocator_settings.PYTORCH_CUDA_ALLOC_CONF (what `gpumemprof whatif` replays first):
     * has_alloc_conf 0 when the snapshot has none (or it does not fit alloc_conf) */
    int has_alloc_conf;
    char alloc_conf[512];
} gmp_import_torch_stats;

/* Non-zero when head[0..n) begins a pickle of protocol 2 to 5 (0x80, then 2..5). */
int gmp_import_torch_probe(const unsigned char *head, size_t n);

/* Converts the snapshot data[0..n) and writes a trace to out_fd (owned from now on: closed).
 * source names the input in the trace header. On failure returns an error code and writes one
 * line into msg. stats may be NULL. */
gmp_err gmp_import_torch_mem(const void *data, size_t n, const char *source, int out_fd,
                             gmp_import_torch_stats *stats, char *msg, size_t msglen);

/* The same from a file, read whole into memory: refused (GMP_ERR_LIMIT) when it is larger than
 * the memory this process may use (gmp_import_torch_usable_memory); the parse is bounded by that
 * memory too. */
gmp_err gmp_import_torch(const char *in_path, int out_fd, gmp_import_torch_stats *stats, char *msg,
                         size_t msglen);

/* Flags of gmp_import_torch_flags. TEMPORARY: the trace is read back at once by this process and
 * then thrown away (the commands' imported inputs, cli_input): it may be written stored (zstd
 * frames of Raw blocks, not compressed), which is faster to write and to read; the records are
 * the same. Without it the trace is compressed (gpumemprof import: the bytes do not change). */
#define GMP_IMPORT_TORCH_TEMPORARY 1u

/* gmp_import_torch with flags (GMP_IMPORT_TORCH_*). */
gmp_err gmp_import_torch_flags(const char *in_path, int out_fd, unsigned flags,
                               gmp_import_torch_stats *stats, char *msg, size_t msglen);

/* The bytes of memory this process may use: the machine's physical memory, or less when a cgroup
 * (v1 or v2) or RLIMIT_AS / RLIMIT_DATA says less; UINT64_MAX when nothing is known. */
uint64_t gmp_import_torch_usable_memory(void);

/* For the commands' table of inputs (cli_input): gmp_import_torch_flags, and on success a
 * one-line summary in msg. */
gmp_err gmp_import_torch_run(const char *in_path, int out_fd, unsigned flags, char *msg,
                             size_t msglen);

/* The one-line summary gmp_import_torch_run gives on success. */
void gmp_import_torch_summary(const gmp_import_torch_stats *st, char *msg, size_t msglen);

/* The import in two steps, for a reader that reads the trace while it is written (report of a
 * snapshot): gmp_import_torch_start reads the whole snapshot (every error of the reading is
 * returned here, as gmp_import_torch_flags returns it), then starts a thread that writes the
 * trace into out_fd (owned: closed when written), stored (zstd frames of Raw blocks: it is read
 * at once); out_fd is meant to be a pipe that the caller reads from its end to the end. flags as
 * gmp_import_torch_flags (TEMPORARY). gmp_import_torch_finish waits for the writing to end and
 * returns its outcome (an error of the writing: out of memory, or the reader closed the pipe
 * early) with one line in msg, stats as gmp_import_torch_flags gives them, and frees the job. A
 * caller that stops reading early must close every descriptor of the pipe's reading end before
 * it calls finish (the writes then fail instead of waiting). */
typedef struct gmp_import_torch_job gmp_import_torch_job;
gmp_err gmp_import_torch_start(const char *in_path, int out_fd, unsigned flags,
                               gmp_import_torch_job **job, char *msg, size_t msglen);
/* The same into q (gmp_tq.h) instead of a pipe, for a reader of this process
 * (gmp_reader_open_queue): no framing, no checksums, no copies through the kernel. The job holds
 * a reference to q until finish; the writing ends the queue's writing side. A caller that stops
 * reading early closes the queue's reading side (gmp_reader_close does) before finish. */
struct gmp_tq;
gmp_err gmp_import_torch_start_queue(const char *in_path, struct gmp_tq *q, unsigned flags,
                                     gmp_import_torch_job **job, char *msg, size_t msglen);
/* The number of events the trace will hold (for a progress estimate). */
uint64_t gmp_import_torch_job_events(const gmp_import_torch_job *job);
gmp_err gmp_import_torch_finish(gmp_import_torch_job *job, gmp_import_torch_stats *stats, char *msg,
                                size_t msglen);

#endif
