/* gmp_import_nsys: converts an Nsight Systems SQLite export (`nsys export --type sqlite`, recorded
 * with `--cuda-memory-usage=true`) into a gpumemprof trace.
 *
 * Read from the file (an untrusted input: opened read-only, triggers and views disabled, every
 * table and column checked before use, every value type-checked):
 *  - CUDA_GPU_MEMORY_USAGE_EVENTS (CUPTI MEMORY2 records): ALLOC / FREE with device, kind, address,
 *    size, time, correlation id, stream (when the column exists) and the local pool; the API that
 *    made the call and its thread come from CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER by correlation id
 *    ("cudaMalloc_v3020" becomes "cudaMalloc"); with none, "module load" for static memory (as
 *    the agent writes it) and "no API call recorded" for other rows; static memory is named
 *    "[static]/<variable>" as the agent names it, C++ symbols demangled;
 *  - NVTX_EVENTS: push/pop ranges become RANGE_PUSH/RANGE_POP on their thread (an allocation made
 *    inside gets that range path), start/end ranges RANGE_START/RANGE_END; domains by name;
 *  - ThreadNames (THREAD records for the threads of the profiled processes), TARGET_INFO_GPU
 *    (DEVICE: name, total memory, UUID, compute capability), PROCESSES, TARGET_INFO_SYSTEM_ENV
 *    (host name) and TARGET_INFO_SESSION_START_TIME for the header.
 * Times stay on the nsys session clock (ns since the start of the capture). Events are read in time
 * order through one SQL query that SQLite sorts, so memory grows with the threads and open ranges,
 * not with the number of events. */
#ifndef GMP_IMPORT_NSYS_H
#define GMP_IMPORT_NSYS_H

#include <stddef.h>
#include <stdint.h>

#include "gmp_error.h"

/* First 16 bytes of every SQLite 3 database file. */
#define GMP_SQLITE_MAGIC "SQLite format 3"
#define GMP_SQLITE_MAGIC_LEN 16 /* the string above and its NUL */

typedef struct gmp_import_nsys_stats {
    uint64_t memory_records; /* rows of CUDA_GPU_MEMORY_USAGE_EVENTS imported */
    uint64_t allocs, frees;  /* ALLOC / FREE records written */
    uint64_t with_api;       /* memory records whose API call was found by correlation id */
    uint64_t range_pushes;   /* push/pop ranges */
    uint64_t range_starts;   /* start/end ranges */
    uint64_t threads;        /* THREAD records */
    uint64_t devices;        /* DEVICE records */
    uint64_t skipped;        /* rows skipped (unknown operation type, negative values) */
} gmp_import_nsys_stats;

/* Non-zero when the n bytes at head begin an SQLite 3 database. */
int gmp_import_nsys_probe(const void *head, size_t n);

/* Reads the SQLite export at in_path and writes a trace to out_fd (which it owns from now on and
 * closes). On failure returns an error code and writes one line into msg (for example "not an
 * Nsight Systems export: table CUDA_GPU_MEMORY_USAGE_EVENTS is missing (record with nsys profile
 * --cuda-memory-usage=true)"). stats may be NULL. */
gmp_err gmp_import_nsys(const char *in_path, int out_fd, gmp_import_nsys_stats *stats, char *msg,
                        size_t msglen);

#endif
