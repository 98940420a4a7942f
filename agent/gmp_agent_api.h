/* gmp_agent_api.h: the C ABI the gpumemprof agent (libgpumemprof_agent.so) exports to the program
 * it runs in: start the agent in the process, open and close measuring scopes, read the live
 * device memory. The Python package `gpumemprof` (agent/python/gpumemprof, ctypes) is its first
 * user; a C or C++ program may dlopen the agent and use it the same way. See docs/python-api.md.
 *
 * Versioning: gmp_api_version() returns GMP_API_VERSION. A later version only adds functions and
 * appends fields at the end of the structs; a caller passes the size of the structs it knows
 * (`size` fields) and the agent fills no more than that. A change that breaks callers gets a new
 * major (GMP_API_VERSION / 1000).
 *
 * What a scope counts: every allocation and free of the whole process on each device while the
 * scope is open, on any thread (not only the opening thread's), as the agent records them (the
 * memory kinds the replay counts as allocated: device, async-pool, VMM physical, arrays, static
 * and graph memory; static and graph memory come from CUPTI's activity buffers, up to a flush
 * interval late: a scope that closes sooner misses them and a later one counts them). Scopes nest
 * and may be open on several threads at once; each has its own figures. A free of memory the agent
 * never saw allocated (allocated before the agent started counting: the baseline) changes no
 * figure; it is counted in baseline_frees.
 *
 * Thread safety: every function may be called from any thread, at any time, also before CUDA is
 * initialized and after the agent finished (then they return the state and count nothing). None
 * calls Python; only gmp_start calls CUDA (cuDeviceGetCount, to learn whether CUDA is initialized,
 * then CUPTI's subscription when it is). Before CUDA is initialized gmp_start sets two
 * environment variables (setenv): call it before the program starts threads of its own, as
 * `import gpumemprof` at the top of a program does (glibc before 2.40 lets a concurrent getenv
 * read the environment array setenv replaces). */
#ifndef GMP_AGENT_API_H
#define GMP_AGENT_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GMP_API_VERSION 1

/* The agent's state (gmp_start, gmp_status). */
enum {
    GMP_STATE_DISABLED = -1, /* it cannot record in this process: the status text says why */
    GMP_STATE_OFF = 0,       /* not started (gmp_start was not called, CUDA not initialized) */
    GMP_STATE_WAITING = 1,   /* armed: it starts when the program initializes CUDA (cuInit) */
    GMP_STATE_ON = 2,        /* recording: CUPTI subscribed, scopes count */
    GMP_STATE_DONE = 3,      /* the trace was finished (process exit) */
};

/* gmp_status flags. */
#define GMP_API_INJECTED                                                                           \
    0x1u                    /* started by the CUDA driver (gpumemprof run, CUDA_INJECTION64_PATH) */
#define GMP_API_INPROC 0x2u /* started by gmp_start in the process */
#define GMP_API_LATE                                                                               \
    0x4u                   /* CUPTI was subscribed after CUDA was initialized: memory allocated    \
                              before is a baseline the agent does not know (see above) */
#define GMP_API_TRACE 0x8u /* a trace file is being written (its path is in the status text) */

/* Top sites kept per device and scope. */
#define GMP_API_MAX_SITES 16

typedef struct gmp_api_site {
    uint64_t bytes;  /* bytes this site had live on the device at the scope's peak */
    uint64_t allocs; /* live allocations of it then */
    uint32_t stack;  /* the allocation stack's id (gmp_stack_text; the trace's STACK id); 0: none */
    uint32_t pad;
} gmp_api_site;

typedef struct gmp_api_device {
    int32_t device;           /* CUDA device ordinal */
    uint32_t nsites;          /* sites[0..nsites), most bytes first */
    uint64_t start_bytes;     /* live bytes on the device (that the agent knows) at open */
    uint64_t peak_bytes;      /* the most live bytes while the scope was open (>= start_bytes) */
    uint64_t end_bytes;       /* live bytes at close */
    uint64_t allocated_bytes; /* bytes allocated while open (every allocation, also freed ones) */
    uint64_t freed_bytes;     /* bytes freed while open (known sizes: not the baseline's) */
    uint64_t allocs, frees;   /* calls counted in allocated_bytes and freed_bytes */
    uint64_t baseline_frees;  /* frees of memory the agent never saw allocated */
    gmp_api_site sites[GMP_API_MAX_SITES]; /* at the peak; exact (see docs/python-api.md) */
    int64_t net_bytes; /* allocated_bytes - freed_bytes = end_bytes - start_bytes */
} gmp_api_device;

typedef struct gmp_api_scope {
    uint32_t size;        /* in: sizeof(gmp_api_scope) of the caller */
    uint32_t dev_size;    /* in: sizeof(gmp_api_device) of the caller (the array's stride) */
    uint32_t flags;       /* out: GMP_API_* flags of the agent at close */
    uint32_t ndevices;    /* out: devices with anything live or any call while open */
    uint64_t elapsed_ns;  /* out: open to close (CLOCK_MONOTONIC) */
    uint64_t lost_events; /* out: allocations the live table could not hold (out of memory) */
    int32_t state;        /* out: GMP_STATE_* at close */
    uint32_t pad;
} gmp_api_scope;

/* GMP_API_VERSION of the library. */
int gmp_api_version(void);

/* Starts the agent in this process if it is not running, and returns its state. When CUDA is
 * already initialized in the process, the agent starts now and subscribes CUPTI (late start:
 * GMP_API_LATE); when it is not, the agent arms itself (CUDA_INJECTION64_PATH and
 * NVTX_INJECTION64_PATH set to this library when unset) and starts when the program initializes
 * CUDA: GMP_STATE_WAITING. When gpumemprof run (or the driver) already loaded it, that agent is the
 * one used. Idempotent. msg (may be NULL) gets the status text, as gmp_status. */
int gmp_start(char *msg, size_t msglen);

/* The state; flags (may be NULL) gets GMP_API_*; msg (may be NULL) one line: what the agent
 * records and where (the trace path), or why it does not. */
int gmp_status(unsigned *flags, char *msg, size_t msglen);

/* Opens a scope named name (UTF-8; may be NULL) on the calling thread: counting begins now, and a
 * range of that name is pushed on this thread's NVTX range stack, so the trace records the scope
 * (only when the agent is ON). Returns the scope's handle (non-zero), 0 when the bound of open
 * scopes (256) is reached. A scope may be opened before the agent is ON: it counts from when the
 * agent starts. */
uint64_t gmp_scope_open(const char *name);

/* Closes the scope: pops its range (when it was pushed, on the opening thread), fills *info and
 * devs[0..maxdevs) (ordered by device ordinal; stride info->dev_size) and frees the handle.
 * Returns the number of devices (info->ndevices; more than maxdevs when the array was short), or
 * -1 for a handle that is not open. With info NULL, devs is not written. */
int gmp_scope_close(uint64_t scope, gmp_api_scope *info, void *devs, int maxdevs);

/* Live bytes per device as the agent knows them now: devices[i], bytes[i] for i < the return
 * value (at most max), devices with live memory or past activity only. */
int gmp_current_bytes(int32_t *devices, uint64_t *bytes, int max);

/* The frames of a stack id, innermost first, one line each ("\n" after each):
 *   py<TAB>FILE<TAB>LINE<TAB>FUNCTION     a Python frame
 *   native<TAB>0xADDRESS<TAB>OBJECT<TAB>SYMBOL   a native frame (SYMBOL from the dynamic symbol
 *                                                table, may be empty)
 * Writes at most buflen bytes including the NUL (cut at a line's end). Returns the number of
 * frames written, -1 for an unknown id or when the agent records no trace. */
int gmp_stack_text(uint32_t stack, char *buf, size_t buflen);

#ifdef __cplusplus
}
#endif

#endif
