/* gmp_cupti_impl: what the files of the CUPTI collector share (private to collectors/gmp_cupti*.c;
 * the collector's interface is gmp_cupti.h). The files and what each holds:
 *   gmp_cupti.c           the API table, the callbacks (what a call records), start and stop;
 *   gmp_cupti_load.c      which CUPTI is loaded;
 *   gmp_cupti_where.c     where memory lives: device descriptions, pools' and streams' devices;
 *   gmp_cupti_vmm.c       VMM handles' lifetimes, memory this process did not allocate;
 *   gmp_cupti_graphs.c    CUDA graphs: stream capture, graph launches, graph memory;
 *   gmp_cupti_activity.c  activity records (buffers, MEMORY2, MEMORY_POOL), the CUPTI clock;
 *   gmp_cupti_flush.c     the flush thread;
 *   gmp_cupti_impl.c      the state below that every file reads (set by gmp_cupti_start).
 * The assumptions about real CUPTI they rely on are listed at the top of gmp_cupti.c. Uses go one
 * way (tests/arch/check_deps.py checks it): gmp_cupti.c uses the others; activity uses graphs and
 * where; graphs and vmm use where; where and graphs wake the flush thread, which calls back into
 * gmp_cupti.c only through the function given to gmp_cupti_flusher_start. */
#ifndef GMP_CUPTI_IMPL_H
#define GMP_CUPTI_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include "gmp_live.h"
#include "gmp_sink.h"

/* The CUPTI entry points we use, looked up with dlsym (gmp_cupti_start). */
typedef struct gmp_cupti_fns {
    void *lib;
    CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*Subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                CUpti_SubscriberParams *);
    CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*EnableCallback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                  CUpti_CallbackId);
    CUptiResult (*EnableDomain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
    CUptiResult (*GetResultString)(CUptiResult, const char **);
    CUptiResult (*GetVersion)(uint32_t *);
    CUptiResult (*GetTimestamp)(uint64_t *);
    CUptiResult (*GetDeviceId)(CUcontext, uint32_t *);
    CUptiResult (*GetStreamIdEx)(CUcontext, CUstream, uint8_t, uint32_t *);
    CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                             CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
    CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
    CUptiResult (*ActivityFlushAll)(uint32_t);
    CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
} gmp_cupti_fns;

extern gmp_cupti_fns gmp_cupti_lib;
extern const gmp_sink *gmp_cupti_sink;
extern int gmp_cupti_memory2_on; /* MEMORY2 records: graph allocations come from them */

/* What each API does (the table is gmp_cupti.c's). */
enum op {
    OP_NONE,
    OP_ALLOC,
    OP_FREE,
    OP_POOL_CREATE,
    OP_POOL_DESTROY,
    OP_POOL_TRIM,
    OP_POOL_ATTR,
    OP_POOL_LOCATE,   /* a pool handed out by location (default and current pools): where it is */
    OP_VMM_RETAIN,    /* cuMemRetainAllocationHandle: one more reference to a handle */
    OP_VMM_IMPORT,    /* cuMemImportFromShareableHandle: a handle of memory another process owns */
    OP_VMM_MULTICAST, /* cuMulticastCreate: a handle that maps and releases like memory, is none */
    OP_IMPORT_ADDR,   /* an address of memory this process did not allocate (IPC, pool import,
                         external memory): never recorded, and its free is not either */
    OP_IMPORT_CLOSE,  /* cudaIpcCloseMemHandle: such an address goes */
    OP_ARRAY_MAP,     /* cuMemMapArrayAsync: VMM handles mapped into sparse arrays */
    OP_CAPTURE_BEGIN, /* stream capture: what the stream then does becomes graph nodes */
    OP_CAPTURE_END,
    OP_EVENT_RECORD, /* while capturing: an event recorded in a capturing stream... */
    OP_STREAM_WAIT,  /* ...joins the stream that waits for it to the capture */
    OP_GRAPH_LAUNCH, /* a graph launched or uploaded: its device's graph memory is read */
    OP_GRAPH_MEMNODE /* cudaGraphAddMemAllocNode: the node's address is graph memory */
};

typedef struct api_desc {
    CUpti_CallbackDomain dom;
    CUpti_CallbackId cbid;
    const char *name;
    enum op op;
    unsigned kind;
    atomic_uint sid; /* interned name, 0 until first use */
} api_desc;

static inline uint32_t api_sid(api_desc *a)
{
    uint32_t s = atomic_load_explicit(&a->sid, memory_order_relaxed);
    if (!s) {
        s = gmp_writer_string(gmp_cupti_sink->w, a->name, strlen(a->name));
        atomic_store_explicit(&a->sid, s, memory_order_relaxed);
    }
    return s;
}

static inline void emit(gmp_wthread *t, gmp_rec *r)
{
    gmp_wthread_event(t, r);
    /* every allocation and free the trace gets also goes to the live accounting (gmp_live.h) */
    if (r->type == GMP_REC_ALLOC || r->type == GMP_REC_FREE)
        gmp_live_rec(r);
}

/* Every capture and event call starts with the same two pointers (the generated meta headers):
 * begin/end capture and stream wait (stream, ...), event record (event, stream), graph launch and
 * upload (graphExec, stream). The assertions prove it for each params struct read this way. */
typedef struct two_ptrs {
    const void *a, *b;
} two_ptrs;
#define FIRST_TWO(T, f1, f2)                                                                       \
    _Static_assert(offsetof(T, f1) == offsetof(two_ptrs, a) &&                                     \
                       offsetof(T, f2) == offsetof(two_ptrs, b),                                   \
                   #T " layout")
FIRST_TWO(cudaStreamEndCapture_v10000_params, stream, pGraph);
FIRST_TWO(cudaStreamBeginCaptureToGraph_v12030_params, stream, graph);
FIRST_TWO(cuStreamEndCapture_params, hStream, phGraph);
FIRST_TWO(cuStreamBeginCaptureToGraph_params, hStream, hGraph);
FIRST_TWO(cudaEventRecord_v3020_params, event, stream);
FIRST_TWO(cudaEventRecordWithFlags_v11010_params, event, stream);
FIRST_TWO(cuEventRecord_params, hEvent, hStream);
FIRST_TWO(cuEventRecordWithFlags_params, hEvent, hStream);
FIRST_TWO(cudaStreamWaitEvent_v3020_params, stream, event);
FIRST_TWO(cuStreamWaitEvent_params, hStream, hEvent);
FIRST_TWO(cudaGraphLaunch_v10000_params, graphExec, stream);
FIRST_TWO(cudaGraphUpload_v10000_params, graphExec, stream);
FIRST_TWO(cuGraphLaunch_params, hGraph, hStream);
FIRST_TWO(cuGraphUpload_params, hGraph, hStream);
_Static_assert(offsetof(cudaStreamBeginCapture_v10000_params, stream) == 0, "layout");
_Static_assert(offsetof(cuStreamBeginCapture_params, hStream) == 0, "layout");
_Static_assert(offsetof(cuStreamBeginCapture_v2_params, hStream) == 0, "layout");

/* ---- gmp_cupti_load.c ---- */

/* Loads the CUPTI of the process (see the file); NULL with why filled when none can be. The sink
 * logs a second CUPTI in the process. */
void *gmp_cupti_load(const char *explicit_path, const gmp_sink *sink, char *why, size_t whylen);
/* The CUDA major version of a CUPTI API version (cuptiGetVersion); 0 when unknown. */
unsigned gmp_cupti_major(uint32_t ver);
/* When the CUPTI loaded is of a later CUDA major version than the driver (which it cannot work
 * with), what to do instead into out; returns 1 then, else 0. */
int gmp_cupti_driver_hint(uint32_t ver, char *out, size_t n);

/* ---- gmp_cupti_flush.c ---- */

/* Starts the flush thread: every interval_ms, or sooner when woken, it calls tick (kicked: woken
 * rather than at the interval's end). gmp_cupti_flusher_wake wakes it (nothing when it does not
 * run); gmp_cupti_flusher_join stops it. */
void gmp_cupti_flusher_start(unsigned interval_ms, void (*tick)(int kicked, unsigned interval_ms));
void gmp_cupti_flusher_wake(void);
void gmp_cupti_flusher_join(void);

/* ---- gmp_cupti_where.c ---- */

extern pthread_mutex_t gmp_cupti_loc_lock; /* pools, streams, imported memory, captures */

void gmp_cupti_devices_init(void);       /* the driver's device entry points */
void gmp_cupti_describe_device(int dev); /* from a callback: the flush thread describes it */
void gmp_cupti_describe_pending(void);   /* writes the DEVICE records of the devices seen */
void gmp_cupti_pool_created(uint64_t pool, int loc_type, int loc_id, int alloc_type);
void gmp_cupti_pool_gone(uint64_t pool);
int gmp_cupti_pool_where(uint64_t pool, int *dev, uint32_t *kind);
void gmp_cupti_pool_base_seen(uint64_t base, int dev, int managed);
int gmp_cupti_pool_base_where(uint64_t base, int *dev, uint32_t *kind);
void gmp_cupti_stream_seen(const void *stream, int dev, int gone);
int gmp_cupti_stream_device(const void *stream, int cur);

/* ---- gmp_cupti_vmm.c ---- */

void gmp_cupti_vmm_created(uint64_t handle, uint64_t size, int dev, uint32_t flags);
void gmp_cupti_vmm_retained(uint64_t handle);
void gmp_cupti_vmm_mapped(uint64_t addr, uint64_t size, uint64_t handle);
int gmp_cupti_vmm_release(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd, int enter,
                          int result);
void gmp_cupti_vmm_unmap(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd);
void gmp_cupti_imported_add(uint64_t addr);
int gmp_cupti_imported_take(uint64_t addr);
uint64_t gmp_cupti_import_address(const api_desc *a, const void *p);
void gmp_cupti_array_map(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd);

/* ---- gmp_cupti_graphs.c ---- */

extern atomic_int gmp_cupti_n_capturing; /* capturing streams: 0 = nothing to look up */

void gmp_cupti_graphs_init(void); /* the driver's graph memory entry points */
int gmp_cupti_is_ptsz(const api_desc *a);
int gmp_cupti_stream_capturing(const void *stream, int ptsz);
/* A capture or event call that succeeded: 1 when the first capture began (the event callbacks
 * are to be enabled), -1 when the last one ended (disabled), else 0. */
int gmp_cupti_capture_event(const api_desc *a, const void *params);
void gmp_cupti_launch_seen(uint32_t corr, uint32_t api);
uint32_t gmp_cupti_launch_api(uint32_t corr);
void gmp_cupti_graph_launched(int dev);
void gmp_cupti_graph_mem_poll(void);
void gmp_cupti_graph_reserve_floor(gmp_wthread *t, int dev, int alloc, uint64_t bytes, uint64_t ts);

/* ---- gmp_cupti_activity.c ---- */

extern size_t gmp_cupti_act_limit;     /* bytes of activity buffers in flight at most */
extern unsigned gmp_cupti_api_version; /* cuptiGetVersion of the CUPTI loaded */

void CUPTIAPI gmp_cupti_buf_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI gmp_cupti_buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid);
int gmp_cupti_activity_layout_ok(uint32_t ver);
/* An API memory call whose MEMORY2 record the agent's buffers should receive (see the file). */
void gmp_cupti_activity_owed(void);
void gmp_cupti_activity_unowed(void); /* that call failed after all (a free: counted at entry) */
/* After the forced flush: 1 when such calls came after the agent's last buffer callback (another
 * CUPTI client's buffer callbacks replaced the agent's), with that callback's trace time. */
int gmp_cupti_activity_replaced(uint64_t *last_ns);
void gmp_cupti_measure_clock_offset(void);

#endif
