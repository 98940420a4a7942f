/* simcuda internal interface: what the simulated driver (libcuda.so.1), runtime (libcudart.so.13)
 * and CUPTI (libcupti.so.13) share. Test infrastructure only; see tests/simcuda/README.md.
 * Public types (CUcontext, CUstream, CUpti_*) are NVIDIA's own, from the toolkit headers; the
 * opaque handle structs below are defined here because the simulated driver owns them. */
#ifndef SIMCUDA_SIM_INTERNAL_H
#define SIMCUDA_SIM_INTERNAL_H

#include <cuda.h>
#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_stubs.h"

#define SIMCUDA_API __attribute__((visibility("default")))

#define SIMCUDA_MAX_DEVICES 8
#define SIMCUDA_CTX_MAGIC 0x43545853u    /* "SXTC" */
#define SIMCUDA_STREAM_MAGIC 0x4d525453u /* "STRM" */
#define SIMCUDA_POOL_MAGIC 0x4c4f4f50u   /* "POOL" */
#define SIMCUDA_ARRAY_MAGIC 0x59415241u  /* "ARAY" */
#define SIMCUDA_FUNC_MAGIC 0x434e5546u   /* "FUNC" */

/* CUPTI stream ids: the legacy default stream of every context, then created streams. */
#define SIMCUDA_DEFAULT_STREAM_ID 7u
#define SIMCUDA_FIRST_STREAM_ID 13u

struct CUstream_st {
    uint32_t magic;
    CUcontext ctx;
    uint32_t id; /* CUPTI stream id */
    unsigned int flags;
    int priority;
    int per_thread;                  /* a thread's per-thread default stream */
    struct CUgraph_st *cap;          /* stream capture: the graph being built, or NULL */
    struct CUgraphNode_st *cap_last; /* the node later captured work depends on */
    int cap_origin;                  /* the stream that began the capture */
    CUstreamCaptureMode cap_mode;
};

struct CUctx_st {
    uint32_t magic;
    int device;
    uint32_t uid;    /* CUPTI context id */
    int active;      /* primary context retained and not reset; created context not destroyed */
    unsigned refcnt; /* cuDevicePrimaryCtxRetain count */
    int primary;     /* 1 for the device's primary context, 0 for cuCtxCreate's */
    unsigned flags;  /* CU_CTX_* flags (cuDevicePrimaryCtxSetFlags, cuCtxCreate) */
    uint32_t peers;  /* devices whose memory this context may access (cuCtxEnablePeerAccess) */
    struct CUstream_st null_stream;
};

/* A kernel as the driver sees it: the runtime's kernel handles start with this. */
struct CUfunc_st {
    uint32_t magic;
    const char *name; /* device (mangled) name */
};

/* ---- tool (CUPTI) hooks installed by libcupti.so.13 into the driver ---- */

typedef struct simcuda_call {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    const char *name;
    const void *params;
    void *ret;          /* points at the CUresult / cudaError_t of the call */
    const char *symbol; /* kernel name for launches */
    CUcontext ctx;
    /* filled by the tool */
    uint32_t corr_id;
    uint64_t corr_data;
    int delivered;
} simcuda_call;

typedef struct simcuda_mem_event {
    CUpti_ActivityMemoryOperationType op;
    CUpti_ActivityMemoryKind kind;
    uint64_t address;
    uint64_t bytes;
    int device;
    CUcontext ctx;   /* may be NULL (host allocations made without a context) */
    CUstream stream; /* non-NULL for stream-ordered operations */
    int is_async;
    const char *name; /* static variable name */
    int has_pool;
    uint64_t pool_address;
    uint64_t pool_release_threshold;
    uint64_t pool_size;
    uint64_t pool_utilized;
} simcuda_mem_event;

typedef struct simcuda_pool_event {
    CUpti_ActivityMemoryPoolOperationType op;
    int device;
    uint64_t address;
    uint64_t size;
    uint64_t release_threshold;
    uint64_t utilized;
    uint64_t min_bytes_to_keep;
} simcuda_pool_event;

typedef struct simcuda_tool_ops {
    void (*api_enter)(simcuda_call *call);
    void (*api_exit)(simcuda_call *call);
    void (*resource)(CUpti_CallbackId cbid, CUcontext ctx, CUstream stream, void *descriptor);
    void (*memory)(const simcuda_mem_event *ev);
    void (*mempool)(const simcuda_pool_event *ev);
} simcuda_tool_ops;

/* ---- entry points, versions, injection timing (sim_entry.c, sim_rt_entry.c, sim_switches.c) */

/* Versions the simulated libraries report; the CUDA 12 personality build overrides them. */
#ifndef SIMCUDA_DRIVER_VERSION
#define SIMCUDA_DRIVER_VERSION CUDA_VERSION
#endif
#ifndef SIMCUDA_RUNTIME_VERSION
#define SIMCUDA_RUNTIME_VERSION CUDA_VERSION
#endif
/* SIMCUDA_LATE_INJECTION=1: the injection is loaded inside the first CUDA call, which the tool
 * then sees only the exit of (libcuda.so.1). */
SIMCUDA_API int simcuda_late_injection(void);
/* Called by the tool's enter hook (sim_cupti.c): a pending _ptds/_ptsz callback id and name
 * (simcuda_ptds_begin) replace the call's. */
SIMCUDA_API void simcuda_ptds_apply(simcuda_call *call);
/* The driver's one-time initialization (injection) without an API callback: the runtime's. */
SIMCUDA_API void simcuda_driver_init(void);
/* the driver's version (cuDriverGetVersion without a call, so without callbacks): CUPTI checks
 * it when a tool subscribes (sim_cupti.c) */
SIMCUDA_API int simcuda_driver_version(void);
/* A runtime API call bracketed as sim_runtime.c brackets its own (initialization, callbacks, last
 * error), for sim_rt_entry.c and the generated stubs: `ret` points at the caller's cudaError_t. */
SIMCUDA_HIDDEN void simcuda_rt_begin(simcuda_call *c, unsigned cbid, const char *name,
                                     const void *params, void *ret);
SIMCUDA_HIDDEN int simcuda_rt_end(simcuda_call *c, int result);

/* ---- exported by libcuda.so.1 for libcupti.so.13 and libcudart.so.13 ---- */
#ifdef __cplusplus
extern "C" {
#endif

SIMCUDA_API void simcuda_set_tool(const simcuda_tool_ops *ops);
/* API call bracketing used by the driver itself and by the runtime. */
SIMCUDA_API void simcuda_api_enter(simcuda_call *call);
SIMCUDA_API void simcuda_api_exit(simcuda_call *call);
SIMCUDA_API void simcuda_resource(CUpti_CallbackId cbid, CUcontext ctx, CUstream stream,
                                  void *descriptor);
SIMCUDA_API void simcuda_emit_memory(const simcuda_mem_event *ev);
SIMCUDA_API void simcuda_emit_pool(const simcuda_pool_event *ev);

/* Runtime support: the primary context of a device, created on first use (no driver callbacks:
 * the real runtime uses private entry points for this). Returns NULL when dev is invalid. */
SIMCUDA_API CUcontext simcuda_primary_ctx(int dev, int create);
/* Module (fatbin) registry: the runtime registers device variables; the driver allocates them as
 * static device memory in every active context and releases them on unload. */
SIMCUDA_API int simcuda_module_register(void);
SIMCUDA_API void simcuda_module_add_var(int module, const char *name, size_t size);
SIMCUDA_API void simcuda_module_loaded(int module);
SIMCUDA_API void simcuda_module_unload(int module);
/* Pool sync point (stream/device synchronization releases pool memory above the threshold). */
SIMCUDA_API void simcuda_sync_point(CUcontext ctx);
SIMCUDA_API int simcuda_device_count(void);
SIMCUDA_API CUcontext simcuda_current_ctx(void);
SIMCUDA_API void simcuda_set_current_ctx(CUcontext ctx);
/* Device address of variable `var` of `module` in the context of device `dev` (0 if not loaded). */
SIMCUDA_API uint64_t simcuda_module_var_address(int module, int var, int dev);
/* Classify an address: 1 when it is simulated device memory (not host-dereferenceable). */
SIMCUDA_API int simcuda_is_device_address(uint64_t addr);
/* Per-thread default stream (the _ptsz/_ptds entry points): while set on a thread, a NULL stream in
 * that thread's calls means its per-thread default stream (CU_STREAM_PER_THREAD), as when the
 * program is built with --default-stream per-thread. Returns the previous setting; a forwarder does
 *   int o = simcuda_set_per_thread_default(1); r = plain(...); simcuda_set_per_thread_default(o);
 */
SIMCUDA_API int simcuda_set_per_thread_default(int on);
/* The stream a handle stands for: NULL (the legacy or, with perThread, the per-thread default
 * stream), CU_STREAM_LEGACY, CU_STREAM_PER_THREAD (cudaStreamLegacy/cudaStreamPerThread) resolved
 * for ctx (NULL: the calling thread's current context) and the calling thread; NULL when the
 * handle is not a stream. Never dereferences a special handle (for cuptiGetStreamIdEx). */
SIMCUDA_API CUstream simcuda_stream_resolve(CUcontext ctx, CUstream s, int perThread);
/* A device attribute's value (an H100 SXM's, see README.md), without an API callback. */
SIMCUDA_API int simcuda_device_attribute(CUdevice_attribute attr, int dev);

#ifdef __cplusplus
}
#endif

#endif
