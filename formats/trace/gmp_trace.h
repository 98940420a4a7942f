/* gmp_trace: the records of a gpumemprof trace, as the writer takes them and the reader returns
 * them. The byte encoding is specified in docs/trace-format.md and implemented in gmp_codec.
 *
 * Two families of records:
 *  - definitions (HEADER, STRING, DEVICE, THREAD, MODULE, STACK, RANGE) carry no time; they define
 *    ids that later records refer to, and always precede their first use in file order;
 *  - events (RANGE_PUSH .. ALERT, LOST, END) carry a time (ns on the trace clock) and the thread
 *    that produced them; the reader returns them merged into one time order.
 * Framing records (BUFFER, SYNC) structure the stream and are consumed by the reader. */
#ifndef GMP_TRACE_H
#define GMP_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define GMP_TRACE_MAGIC "GMPTRACE" /* first 8 bytes of the decompressed stream */
#define GMP_TRACE_MAGIC_LEN 8
#define GMP_FORMAT_VERSION 1    /* version this code writes */
#define GMP_FORMAT_MIN_READER 1 /* oldest reader version that can read what this code writes */
#define GMP_READER_VERSION 1    /* highest min_reader version this reader accepts */

/* Limits every reader enforces (a larger value is corrupt input). */
#define GMP_MAX_RECORD_BYTES (1u << 20)  /* one record's payload */
#define GMP_MAX_FRAME_BYTES (64u << 20)  /* one frame, decompressed */
#define GMP_MAX_STRING_BYTES (64u << 10) /* one string */

typedef enum gmp_rec_type {
    /* definitions */
    GMP_REC_HEADER = 0x01,
    GMP_REC_STRING = 0x02,
    GMP_REC_DEVICE = 0x03,
    GMP_REC_THREAD = 0x04,
    GMP_REC_MODULE = 0x05,
    GMP_REC_STACK = 0x06, /* one node of the stack trie */
    GMP_REC_RANGE = 0x07, /* one node of the range-path tree */
    /* framing */
    GMP_REC_BUFFER = 0x08, /* start of one thread's chunk: thread and base time */
    GMP_REC_SYNC = 0x09,   /* every event at or before this time has been written */
    /* events */
    GMP_REC_RANGE_PUSH = 0x10,
    GMP_REC_RANGE_POP = 0x11,
    GMP_REC_RANGE_START = 0x12,
    GMP_REC_RANGE_END = 0x13,
    GMP_REC_MARK = 0x14,
    GMP_REC_ALLOC = 0x20,
    GMP_REC_FREE = 0x21,
    GMP_REC_OOM = 0x22,
    GMP_REC_POOL = 0x23,
    GMP_REC_SAMPLE = 0x24,
    GMP_REC_RESOURCE = 0x25,
    GMP_REC_ALERT = 0x26,
    GMP_REC_NOTICE = 0x27, /* a message from the producer: profiling degraded or impossible */
    GMP_REC_LOST = 0x30,
    GMP_REC_END = 0x3f,
} gmp_rec_type;

/* Types 0x40..0xff are reserved; a reader skips a record of a type it does not know. Unknown types
 * 0x10..0x3f are future events: their payload starts with dt, which a reader applies to the
 * buffer's time even when it skips the record (docs/trace-format.md, "Record encoding"). */
#define GMP_REC_TYPE_MAX 0xff

/* Memory kinds. Device peaks count DEVICE, ASYNC_POOL, VMM_PHYSICAL, ARRAY and STATIC. */
typedef enum gmp_mem_kind {
    GMP_MEM_UNKNOWN = 0,
    GMP_MEM_DEVICE = 1,          /* cudaMalloc, cuMemAlloc, pitch, 3D */
    GMP_MEM_ASYNC_POOL = 2,      /* cudaMallocAsync / FromPoolAsync: a block of a pool */
    GMP_MEM_VMM_PHYSICAL = 3,    /* cuMemCreate handle */
    GMP_MEM_VMM_MAPPING = 4,     /* cuMemMap of a handle into a reserved range */
    GMP_MEM_ARRAY = 5,           /* cudaMallocArray, cuArrayCreate */
    GMP_MEM_PINNED_HOST = 6,     /* cudaMallocHost, cudaHostAlloc */
    GMP_MEM_REGISTERED_HOST = 7, /* cudaHostRegister */
    GMP_MEM_MANAGED = 8,         /* cudaMallocManaged */
    GMP_MEM_STATIC = 9,          /* __device__ variables of a loaded module */
    GMP_MEM_NVTX_REGION = 10,    /* sub-allocation described with nvtxMemRegionsRegister */
    GMP_MEM_VA_RESERVE = 11,     /* cuMemAddressReserve: address space only, no memory */
    GMP_MEM_KIND_COUNT = 12
} gmp_mem_kind;

/* Name of a memory kind ("device", "async-pool", ...); "unknown" for out-of-range values. */
const char *gmp_mem_kind_name(unsigned kind);
/* Non-zero when the kind counts in a device's allocated memory and peak. */
int gmp_mem_kind_is_device(unsigned kind);

/* The api of the memory a module load allocates (static __device__ and __managed__ variables): no
 * API call makes it, CUPTI reports it in activity records only (CUPTI_ACTIVITY_KIND_MEMORY2).
 * Traces written before this name say "MEMORY2" (the activity kind); the reader reads that string
 * as this name, so old and new traces read the same in every output. */
#define GMP_API_MODULE_LOAD "module load"
#define GMP_API_MEMORY2_OLD "MEMORY2"
/* The api of memory an imported profile records with no API call (nsys rows of other kinds). */
#define GMP_API_UNRECORDED "no API call recorded"

/* Flags of ALLOC and FREE records. */
#define GMP_MEMF_ACTIVITY 0x1u /* reported by a CUPTI activity record, not an API callback */
#define GMP_MEMF_ASYNC 0x2u    /* stream-ordered (takes effect in stream order) */
#define GMP_MEMF_FAILED 0x4u   /* the API returned an error; nothing was allocated/freed */
#define GMP_MEMF_IMPLICIT 0x8u /* freed by the system (context/device reset, module unload) */

/* POOL operations */
typedef enum gmp_pool_op {
    GMP_POOL_CREATE = 1,
    GMP_POOL_DESTROY = 2,
    GMP_POOL_TRIM = 3,     /* value: bytes to keep requested */
    GMP_POOL_RESERVED = 4, /* value: the pool's reserved size after a change */
    GMP_POOL_THRESHOLD = 5 /* value: release threshold set */
} gmp_pool_op;

/* RESOURCE operations */
typedef enum gmp_resource_op {
    GMP_RES_CONTEXT_CREATE = 1,
    GMP_RES_CONTEXT_DESTROY = 2,
    GMP_RES_STREAM_CREATE = 3,
    GMP_RES_STREAM_DESTROY = 4,
    GMP_RES_MODULE_LOAD = 5,
    GMP_RES_MODULE_UNLOAD = 6
} gmp_resource_op;

/* LOST reasons */
typedef enum gmp_lost_reason {
    GMP_LOST_BUFFER_FULL = 1,   /* the agent's buffers were full (writer fell behind) */
    GMP_LOST_IO = 2,            /* the trace file could not be written (disk full, limit) */
    GMP_LOST_CUPTI_DROPPED = 3, /* CUPTI dropped activity records */
    GMP_LOST_REENTRANT = 4,     /* event raised while the agent was busy on the same thread */
    GMP_LOST_OTHER = 5
} gmp_lost_reason;

const char *gmp_lost_reason_name(unsigned reason);

/* Stack frame kinds */
#define GMP_FRAME_NATIVE 0 /* a return address */
#define GMP_FRAME_PYTHON 1 /* file, function, line */

/* A string as decoded: not NUL-terminated in general; valid until the reader moves on. */
typedef struct gmp_str {
    const char *ptr;
    uint32_t len;
} gmp_str;

/* A malloc'd, NUL-terminated copy of s (free it); NULL when out of memory. */
char *gmp_str_dup(gmp_str s);

typedef struct gmp_rec_header {
    uint32_t format_version;
    uint32_t min_reader_version;
    gmp_str producer; /* e.g. "gpumemprof 0.1.0" */
    uint32_t pid, ppid;
    gmp_str hostname;
    gmp_str cmdline;         /* arguments separated by NUL bytes */
    int64_t rank;            /* -1 when the environment names no rank */
    uint64_t start_wall_ns;  /* CLOCK_REALTIME at start, ns since the epoch */
    uint64_t start_trace_ns; /* trace clock at the same moment */
    gmp_str clock;           /* trace clock source, e.g. "CLOCK_MONOTONIC" */
    gmp_str options;         /* the producer's settings, "key=value" separated by spaces */
    /* Fields appended later (absent from older traces: the reader then sets local_rank -1,
     * world_size 0, rank_var empty). The process's place in a distributed job as its launcher
     * named it (agent/gmp_agent_out.h): these three with rank above are the trace's rank
     * identity, which every reader takes from here. */
    int64_t local_rank; /* rank on this host (LOCAL_RANK, SLURM_LOCALID, ...); -1 unknown */
    int64_t world_size; /* ranks in the job (WORLD_SIZE, SLURM_NTASKS, ...); 0 unknown */
    gmp_str rank_var;   /* the variable rank came from ("RANK", "SLURM_PROCID"); empty: none */
} gmp_rec_header;

/* The time zero every reader counts "+S s" from (report, view, whatif): the trace clock's start
 * of the header (h may be NULL) when it is not after first_ns (the first timed record; 0 none),
 * else first_ns. */
static inline uint64_t gmp_trace_zero(const gmp_rec_header *h, uint64_t first_ns)
{
    if (h && h->start_trace_ns && (!first_ns || h->start_trace_ns <= first_ns))
        return h->start_trace_ns;
    return first_ns;
}

typedef struct gmp_rec_string {
    uint32_t id; /* >= 1 */
    gmp_str value;
} gmp_rec_string;

typedef struct gmp_rec_device {
    uint32_t id; /* CUDA device ordinal */
    gmp_str name;
    uint8_t uuid[16];
    uint64_t total_bytes;
    uint32_t cc_major, cc_minor;
} gmp_rec_device;

typedef struct gmp_rec_thread {
    uint32_t tid; /* OS thread id */
    gmp_str name;
} gmp_rec_thread;

typedef struct gmp_rec_module {
    uint32_t id; /* >= 1 */
    gmp_str path;
    uint64_t base;    /* load bias: run-time address of file virtual address 0 */
    uint64_t lo;      /* lowest mapped run-time address */
    uint64_t size;    /* bytes mapped from lo */
    gmp_str build_id; /* raw bytes of the GNU build-id note; empty when none */
} gmp_rec_module;

typedef struct gmp_rec_stack {
    uint32_t id;                   /* >= 1; the stack that ends at this node */
    uint32_t parent;               /* 0 for a root (outermost frame) */
    uint32_t kind;                 /* GMP_FRAME_* */
    uint64_t address;              /* NATIVE: return address */
    uint32_t file, function, line; /* PYTHON: string ids and line */
} gmp_rec_stack;

typedef struct gmp_rec_range {
    uint32_t id;     /* >= 1; the path that ends at this node */
    uint32_t parent; /* 0 for an outermost range */
    uint32_t domain; /* string id of the NVTX domain; 0 for the default domain */
    uint32_t name;   /* string id of the range name */
} gmp_rec_range;

typedef struct gmp_rec_buffer {
    uint32_t tid;
    uint64_t base_ns;
} gmp_rec_buffer;

typedef struct gmp_rec_sync {
    uint64_t time_ns;
} gmp_rec_sync;

typedef struct gmp_rec_range_ev {
    uint32_t range;  /* PUSH: path after the push; POP: path being closed; START/MARK: node */
    uint64_t handle; /* START/END: the nvtxRangeId_t */
} gmp_rec_range_ev;

typedef struct gmp_rec_mem {
    int32_t device; /* device ordinal; -1 for host memory not tied to a device */
    uint32_t kind;  /* gmp_mem_kind */
    uint32_t flags; /* GMP_MEMF_* */
    uint32_t api;   /* string id of the API name ("cudaMalloc"); 0 unknown */
    uint64_t address;
    uint64_t size;   /* FREE: 0 when the producer does not know it */
    uint64_t stream; /* stream handle or id; 0 = default/none */
    uint32_t stack;  /* stack id; 0 = none */
    uint32_t range;  /* range path id; 0 = none */
    uint64_t correlation;
    int32_t result;  /* API return code; 0 = success */
    uint64_t handle; /* pool handle (ASYNC_POOL), VMM handle (VMM_*), heap (NVTX_REGION) */
} gmp_rec_mem;

typedef struct gmp_rec_oom {
    int32_t device;
    uint32_t api;
    uint64_t requested;
    uint32_t stack, range;
    int32_t result;
    uint64_t free_bytes; /* free memory the driver reported just after, 0 unknown */
} gmp_rec_oom;

typedef struct gmp_rec_pool {
    int32_t device;
    uint32_t op;   /* gmp_pool_op */
    uint64_t pool; /* pool handle */
    uint64_t value;
} gmp_rec_pool;

typedef struct gmp_rec_sample {
    int32_t device;
    uint64_t free_bytes, total_bytes;
    uint64_t process_used; /* this process's use from NVML; UINT64_MAX when unknown */
} gmp_rec_sample;

typedef struct gmp_rec_resource {
    int32_t device;
    uint32_t op;     /* gmp_resource_op */
    uint64_t handle; /* context uid, stream id, module id */
} gmp_rec_resource;

typedef struct gmp_rec_alert {
    int32_t device;
    uint64_t threshold, live_bytes;
    uint32_t range;
} gmp_rec_alert;

/* NOTICE severities */
#define GMP_NOTICE_INFO 1
#define GMP_NOTICE_WARNING 2
#define GMP_NOTICE_ERROR 3 /* nothing (more) could be recorded */

typedef struct gmp_rec_notice {
    uint32_t severity; /* GMP_NOTICE_* */
    gmp_str message;   /* one line, e.g. "cannot profile: CUPTI is in use by Nsight Systems" */
} gmp_rec_notice;

typedef struct gmp_rec_lost {
    uint64_t count;
    uint32_t reason; /* gmp_lost_reason */
} gmp_rec_lost;

typedef struct gmp_rec_end {
    uint64_t
        events; /* event records written before END (END, SYNC, BUFFER and definitions excluded) */
    uint64_t allocs; /* ALLOC records among them */
    uint64_t frees;  /* FREE records among them */
    uint64_t lost;   /* events counted in LOST records */
} gmp_rec_end;

typedef struct gmp_rec {
    uint32_t type;    /* gmp_rec_type */
    uint64_t time_ns; /* events: absolute trace-clock time */
    uint32_t tid;     /* events: thread (from the enclosing BUFFER) */
    union {
        gmp_rec_header header;
        gmp_rec_string string;
        gmp_rec_device device;
        gmp_rec_thread thread;
        gmp_rec_module module;
        gmp_rec_stack stack;
        gmp_rec_range range;
        gmp_rec_buffer buffer;
        gmp_rec_sync sync;
        gmp_rec_range_ev rev;
        gmp_rec_mem mem;
        gmp_rec_oom oom;
        gmp_rec_pool pool;
        gmp_rec_sample sample;
        gmp_rec_resource resource;
        gmp_rec_alert alert;
        gmp_rec_notice notice;
        gmp_rec_lost lost;
        gmp_rec_end end;
    } u;
} gmp_rec;

/* Name of a record type ("alloc"); NULL for a type this code does not know. */
const char *gmp_rec_type_name(unsigned type);
/* Non-zero for event types (records with a time). */
int gmp_rec_is_event(unsigned type);

#endif
