/* gmp_cupti: see gmp_cupti.h.
 *
 * Assumptions about real CUPTI, from the CUDA 13 headers (cupti_callbacks.h, cupti_activity.h):
 * - Callbacks run on the thread that made the API call; CUpti_CallbackData.functionParams points
 *   at the API's *_params struct (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h);
 *   output parameters are valid at CUPTI_API_EXIT. correlationData is shared by the enter and exit
 *   callbacks of one call.
 * - Whether driver callbacks fire for the driver calls the runtime makes internally is not
 *   documented (DESIGN.md): we count a call once either way, by ignoring driver memory callbacks
 *   while the same thread is inside a runtime memory API.
 * - MEMORY2 records carry the kinds callbacks cannot see (DEVICE_STATIC, MANAGED_STATIC) and pool
 *   sizes in memoryPoolConfig; everything else they report was already recorded from callbacks
 *   ("reconciled" by kind: API memory comes from callbacks only, so nothing is counted twice).
 * - Activity record layouts (CUpti_ActivityMemory4, CUpti_ActivityMemoryPool3) are trusted for
 *   CUPTI 12.2-12.9 and the major of our headers: the fields read are a common prefix, proved by
 *   static assertions (activity_layout_ok, docs/collectors.md).
 * - Activity records reach us in buffers, after the fact (a buffer is delivered when it fills or on
 *   a flush). They keep CUPTI's timestamps, converted to our trace clock with an offset measured at
 *   start and before every flush (cuptiGetTimestamp vs CLOCK_MONOTONIC). So that they are not older
 *   than the last SYNC record the writer wrote (the reader would apply them late, and a peak could
 *   miss static memory), a flush thread asks CUPTI for its completed buffers every flush interval
 *   (the default flush: forced only at the stop), and the agent asks the writer to keep its SYNC
 *   times behind by a few intervals (gmp_writer_opts.sync_lag_ns).
 * - Callbacks call CUPTI only (cuptiGetDeviceId, cuptiGetStreamIdEx), never the driver: devices are
 *   described, and graph memory read, by the flush thread.
 * Every point of the header audit of issue 16 is answered in docs/collectors.md. */
#include "gmp_driver.h"
#include "gmp_cupti.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
/* cupti.h brings the *_params structs of generated_cuda_meta.h and
 * generated_cuda_runtime_api_meta.h */

#include "gmp_clock.h"
#include "gmp_handles.h"
#include "gmp_nvtx.h"
#include "gmp_alert.h"
#include "gmp_stack.h"

#define CUPTI_SONAME "libcupti.so.13"

/* ---- the CUPTI entry points we use, looked up with dlsym ---- */
static struct {
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
} C;

/* Driver entry points for device descriptions (looked up in the process, never loaded by us). */
static struct {
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DeviceGetUuid)(CUuuid *, CUdevice);
} D;

static const gmp_sink *S;
static CUpti_SubscriberHandle sub;
static atomic_int active;
static int activity_on;
static int memory2_on; /* MEMORY2 records: graph allocations come from them (graph launches) */
static _Atomic int64_t clock_offset; /* trace clock - CUPTI clock */
static unsigned runtime_version;
static atomic_size_t act_outstanding;
static size_t act_limit;
static atomic_uint_least64_t devices_seen; /* bit per device ordinal < 64 with a DEVICE record */
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;

/* Per-thread state: depth inside runtime memory APIs, the last device looked up. */
static _Thread_local struct {
    int rt_depth;
    uint64_t last_drv_addr; /* address recorded from a driver callback outside any runtime call */
    int late_window;        /* this thread started CUPTI (see "late injection" below) */
    CUcontext ctx;
    int dev;
} tl;

/* ---- what each API does ---- */
enum op {
    OP_NONE,
    OP_ALLOC,
    OP_FREE,
    OP_POOL_CREATE,
    OP_POOL_DESTROY,
    OP_POOL_TRIM,
    OP_POOL_ATTR,
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

#define RT(id, nm, op, kind)                                                                       \
    {                                                                                              \
        CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##id, nm, op, kind, 0                \
    }
#define DRV(id, nm, op, kind)                                                                      \
    {                                                                                              \
        CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##id, nm, op, kind, 0                  \
    }

static api_desc apis[] = {
    RT(cudaMalloc_v3020, "cudaMalloc", OP_ALLOC, GMP_MEM_DEVICE),
    RT(cudaFree_v3020, "cudaFree", OP_FREE, GMP_MEM_DEVICE),
    RT(cudaMallocPitch_v3020, "cudaMallocPitch", OP_ALLOC, GMP_MEM_DEVICE),
    RT(cudaMalloc3D_v3020, "cudaMalloc3D", OP_ALLOC, GMP_MEM_DEVICE),
    RT(cudaMallocArray_v3020, "cudaMallocArray", OP_ALLOC, GMP_MEM_ARRAY),
    RT(cudaMalloc3DArray_v3020, "cudaMalloc3DArray", OP_ALLOC, GMP_MEM_ARRAY),
    RT(cudaFreeArray_v3020, "cudaFreeArray", OP_FREE, GMP_MEM_ARRAY),
    RT(cudaMallocHost_v3020, "cudaMallocHost", OP_ALLOC, GMP_MEM_PINNED_HOST),
    RT(cudaHostAlloc_v3020, "cudaHostAlloc", OP_ALLOC, GMP_MEM_PINNED_HOST),
    RT(cudaFreeHost_v3020, "cudaFreeHost", OP_FREE, GMP_MEM_PINNED_HOST),
    RT(cudaHostRegister_v4000, "cudaHostRegister", OP_ALLOC, GMP_MEM_REGISTERED_HOST),
    RT(cudaHostUnregister_v4000, "cudaHostUnregister", OP_FREE, GMP_MEM_REGISTERED_HOST),
    RT(cudaMallocManaged_v6000, "cudaMallocManaged", OP_ALLOC, GMP_MEM_MANAGED),
    RT(cudaMallocAsync_v11020, "cudaMallocAsync", OP_ALLOC, GMP_MEM_ASYNC_POOL),
    RT(cudaMallocAsync_ptsz_v11020, "cudaMallocAsync", OP_ALLOC, GMP_MEM_ASYNC_POOL),
    RT(cudaFreeAsync_v11020, "cudaFreeAsync", OP_FREE, GMP_MEM_ASYNC_POOL),
    RT(cudaFreeAsync_ptsz_v11020, "cudaFreeAsync", OP_FREE, GMP_MEM_ASYNC_POOL),
    RT(cudaMallocFromPoolAsync_v11020, "cudaMallocFromPoolAsync", OP_ALLOC, GMP_MEM_ASYNC_POOL),
    RT(cudaMallocFromPoolAsync_ptsz_v11020, "cudaMallocFromPoolAsync", OP_ALLOC,
       GMP_MEM_ASYNC_POOL),
    RT(cudaMemPoolCreate_v11020, "cudaMemPoolCreate", OP_POOL_CREATE, 0),
    RT(cudaMemPoolDestroy_v11020, "cudaMemPoolDestroy", OP_POOL_DESTROY, 0),
    RT(cudaMemPoolTrimTo_v11020, "cudaMemPoolTrimTo", OP_POOL_TRIM, 0),
    RT(cudaMemPoolSetAttribute_v11020, "cudaMemPoolSetAttribute", OP_POOL_ATTR, 0),
    DRV(cuMemAlloc_v2, "cuMemAlloc", OP_ALLOC, GMP_MEM_DEVICE),
    DRV(cuMemFree_v2, "cuMemFree", OP_FREE, GMP_MEM_DEVICE),
    DRV(cuMemAllocPitch_v2, "cuMemAllocPitch", OP_ALLOC, GMP_MEM_DEVICE),
    DRV(cuMemAllocHost_v2, "cuMemAllocHost", OP_ALLOC, GMP_MEM_PINNED_HOST),
    DRV(cuMemHostAlloc, "cuMemHostAlloc", OP_ALLOC, GMP_MEM_PINNED_HOST),
    DRV(cuMemFreeHost, "cuMemFreeHost", OP_FREE, GMP_MEM_PINNED_HOST),
    DRV(cuMemHostRegister_v2, "cuMemHostRegister", OP_ALLOC, GMP_MEM_REGISTERED_HOST),
    DRV(cuMemHostUnregister, "cuMemHostUnregister", OP_FREE, GMP_MEM_REGISTERED_HOST),
    DRV(cuMemAllocManaged, "cuMemAllocManaged", OP_ALLOC, GMP_MEM_MANAGED),
    DRV(cuMemAllocAsync, "cuMemAllocAsync", OP_ALLOC, GMP_MEM_ASYNC_POOL),
    DRV(cuMemAllocAsync_ptsz, "cuMemAllocAsync", OP_ALLOC, GMP_MEM_ASYNC_POOL),
    DRV(cuMemFreeAsync, "cuMemFreeAsync", OP_FREE, GMP_MEM_ASYNC_POOL),
    DRV(cuMemFreeAsync_ptsz, "cuMemFreeAsync", OP_FREE, GMP_MEM_ASYNC_POOL),
    DRV(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", OP_ALLOC, GMP_MEM_ASYNC_POOL),
    DRV(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", OP_ALLOC, GMP_MEM_ASYNC_POOL),
    DRV(cuMemPoolCreate, "cuMemPoolCreate", OP_POOL_CREATE, 0),
    DRV(cuMemPoolDestroy, "cuMemPoolDestroy", OP_POOL_DESTROY, 0),
    DRV(cuMemPoolTrimTo, "cuMemPoolTrimTo", OP_POOL_TRIM, 0),
    DRV(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", OP_POOL_ATTR, 0),
    DRV(cuMemCreate, "cuMemCreate", OP_ALLOC, GMP_MEM_VMM_PHYSICAL),
    DRV(cuMemRelease, "cuMemRelease", OP_FREE, GMP_MEM_VMM_PHYSICAL),
    DRV(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", OP_VMM_RETAIN,
        GMP_MEM_VMM_PHYSICAL),
    DRV(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", OP_VMM_IMPORT,
        GMP_MEM_VMM_PHYSICAL),
    DRV(cuMemMap, "cuMemMap", OP_ALLOC, GMP_MEM_VMM_MAPPING),
    DRV(cuMemUnmap, "cuMemUnmap", OP_FREE, GMP_MEM_VMM_MAPPING),
    DRV(cuMemAddressReserve, "cuMemAddressReserve", OP_ALLOC, GMP_MEM_VA_RESERVE),
    DRV(cuMemAddressFree, "cuMemAddressFree", OP_FREE, GMP_MEM_VA_RESERVE),
    DRV(cuArrayCreate_v2, "cuArrayCreate", OP_ALLOC, GMP_MEM_ARRAY),
    DRV(cuArray3DCreate_v2, "cuArray3DCreate", OP_ALLOC, GMP_MEM_ARRAY),
    DRV(cuArrayDestroy, "cuArrayDestroy", OP_FREE, GMP_MEM_ARRAY),
    /* the entries above are the original memory APIs (see gmp_cupti_start) */
    /* issue 16, audit 6 and 7: mipmapped arrays, sparse mappings, multicast, imported memory */
    RT(cudaMallocMipmappedArray_v5000, "cudaMallocMipmappedArray", OP_ALLOC, GMP_MEM_ARRAY),
    RT(cudaFreeMipmappedArray_v5000, "cudaFreeMipmappedArray", OP_FREE, GMP_MEM_ARRAY),
    DRV(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", OP_ALLOC, GMP_MEM_ARRAY),
    DRV(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", OP_FREE, GMP_MEM_ARRAY),
    DRV(cuMemMapArrayAsync, "cuMemMapArrayAsync", OP_ARRAY_MAP, GMP_MEM_VMM_PHYSICAL),
    DRV(cuMemMapArrayAsync_ptsz, "cuMemMapArrayAsync", OP_ARRAY_MAP, GMP_MEM_VMM_PHYSICAL),
    DRV(cuMulticastCreate, "cuMulticastCreate", OP_VMM_MULTICAST, GMP_MEM_VMM_PHYSICAL),
    RT(cudaIpcOpenMemHandle_v4010, "cudaIpcOpenMemHandle", OP_IMPORT_ADDR, GMP_MEM_DEVICE),
    RT(cudaIpcCloseMemHandle_v4010, "cudaIpcCloseMemHandle", OP_IMPORT_CLOSE, GMP_MEM_DEVICE),
    DRV(cuIpcOpenMemHandle, "cuIpcOpenMemHandle", OP_IMPORT_ADDR, GMP_MEM_DEVICE),
    DRV(cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle", OP_IMPORT_ADDR, GMP_MEM_DEVICE),
    DRV(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", OP_IMPORT_CLOSE, GMP_MEM_DEVICE),
    RT(cudaMemPoolImportPointer_v11020, "cudaMemPoolImportPointer", OP_IMPORT_ADDR,
       GMP_MEM_ASYNC_POOL),
    DRV(cuMemPoolImportPointer, "cuMemPoolImportPointer", OP_IMPORT_ADDR, GMP_MEM_ASYNC_POOL),
    RT(cudaExternalMemoryGetMappedBuffer_v10000, "cudaExternalMemoryGetMappedBuffer",
       OP_IMPORT_ADDR, GMP_MEM_DEVICE),
    DRV(cuExternalMemoryGetMappedBuffer, "cuExternalMemoryGetMappedBuffer", OP_IMPORT_ADDR,
        GMP_MEM_DEVICE),
    RT(cudaExternalMemoryGetMappedMipmappedArray_v10000,
       "cudaExternalMemoryGetMappedMipmappedArray", OP_IMPORT_ADDR, GMP_MEM_ARRAY),
    DRV(cuExternalMemoryGetMappedMipmappedArray, "cuExternalMemoryGetMappedMipmappedArray",
        OP_IMPORT_ADDR, GMP_MEM_ARRAY),
    /* issue 16, audit 4: CUDA graphs (the event calls are enabled only while a capture runs) */
    RT(cudaStreamBeginCapture_v10000, "cudaStreamBeginCapture", OP_CAPTURE_BEGIN, 0),
    RT(cudaStreamBeginCapture_ptsz_v10000, "cudaStreamBeginCapture", OP_CAPTURE_BEGIN, 0),
    RT(cudaStreamBeginCaptureToGraph_v12030, "cudaStreamBeginCaptureToGraph", OP_CAPTURE_BEGIN, 0),
    RT(cudaStreamBeginCaptureToGraph_ptsz_v12030, "cudaStreamBeginCaptureToGraph", OP_CAPTURE_BEGIN,
       0),
    RT(cudaStreamEndCapture_v10000, "cudaStreamEndCapture", OP_CAPTURE_END, 0),
    RT(cudaStreamEndCapture_ptsz_v10000, "cudaStreamEndCapture", OP_CAPTURE_END, 0),
    RT(cudaGraphLaunch_v10000, "cudaGraphLaunch", OP_GRAPH_LAUNCH, 0),
    RT(cudaGraphLaunch_ptsz_v10000, "cudaGraphLaunch", OP_GRAPH_LAUNCH, 0),
    RT(cudaGraphUpload_v10000, "cudaGraphUpload", OP_GRAPH_LAUNCH, 0),
    RT(cudaGraphUpload_ptsz_v10000, "cudaGraphUpload", OP_GRAPH_LAUNCH, 0),
    DRV(cuStreamBeginCapture, "cuStreamBeginCapture", OP_CAPTURE_BEGIN, 0),
    DRV(cuStreamBeginCapture_ptsz, "cuStreamBeginCapture", OP_CAPTURE_BEGIN, 0),
    DRV(cuStreamBeginCapture_v2, "cuStreamBeginCapture", OP_CAPTURE_BEGIN, 0),
    DRV(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture", OP_CAPTURE_BEGIN, 0),
    DRV(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", OP_CAPTURE_BEGIN, 0),
    DRV(cuStreamBeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph", OP_CAPTURE_BEGIN, 0),
    DRV(cuStreamEndCapture, "cuStreamEndCapture", OP_CAPTURE_END, 0),
    DRV(cuStreamEndCapture_ptsz, "cuStreamEndCapture", OP_CAPTURE_END, 0),
    DRV(cuGraphLaunch, "cuGraphLaunch", OP_GRAPH_LAUNCH, 0),
    DRV(cuGraphLaunch_ptsz, "cuGraphLaunch", OP_GRAPH_LAUNCH, 0),
    DRV(cuGraphUpload, "cuGraphUpload", OP_GRAPH_LAUNCH, 0),
    DRV(cuGraphUpload_ptsz, "cuGraphUpload", OP_GRAPH_LAUNCH, 0),
    RT(cudaGraphAddMemAllocNode_v11040, "cudaGraphAddMemAllocNode", OP_GRAPH_MEMNODE, 0),
    DRV(cuGraphAddMemAllocNode, "cuGraphAddMemAllocNode", OP_GRAPH_MEMNODE, 0),
    /* from here on: enabled only while a capture runs (capture_first) */
    RT(cudaEventRecord_v3020, "cudaEventRecord", OP_EVENT_RECORD, 0),
    RT(cudaEventRecord_ptsz_v7000, "cudaEventRecord", OP_EVENT_RECORD, 0),
    RT(cudaEventRecordWithFlags_v11010, "cudaEventRecordWithFlags", OP_EVENT_RECORD, 0),
    RT(cudaEventRecordWithFlags_ptsz_v11010, "cudaEventRecordWithFlags", OP_EVENT_RECORD, 0),
    RT(cudaStreamWaitEvent_v3020, "cudaStreamWaitEvent", OP_STREAM_WAIT, 0),
    RT(cudaStreamWaitEvent_ptsz_v7000, "cudaStreamWaitEvent", OP_STREAM_WAIT, 0),
    DRV(cuEventRecord, "cuEventRecord", OP_EVENT_RECORD, 0),
    DRV(cuEventRecord_ptsz, "cuEventRecord", OP_EVENT_RECORD, 0),
    DRV(cuEventRecordWithFlags, "cuEventRecordWithFlags", OP_EVENT_RECORD, 0),
    DRV(cuEventRecordWithFlags_ptsz, "cuEventRecordWithFlags", OP_EVENT_RECORD, 0),
    DRV(cuStreamWaitEvent, "cuStreamWaitEvent", OP_STREAM_WAIT, 0),
    DRV(cuStreamWaitEvent_ptsz, "cuStreamWaitEvent", OP_STREAM_WAIT, 0),
};

#define NAPIS (sizeof apis / sizeof apis[0])
_Static_assert(NAPIS < 255, "rt_index and drv_index hold index + 1 in a uint8_t");

/* cbid -> index+1 into apis, per domain (cbids are small dense integers) */
#define MAX_CBID 1024
static uint8_t rt_index[MAX_CBID], drv_index[MAX_CBID];

static uint32_t api_sid(api_desc *a)
{
    uint32_t s = atomic_load_explicit(&a->sid, memory_order_relaxed);
    if (!s) {
        s = gmp_writer_string(S->w, a->name, strlen(a->name));
        atomic_store_explicit(&a->sid, s, memory_order_relaxed);
    }
    return s;
}

static const char *result_str(CUptiResult r)
{
    const char *s = NULL;
    if (C.GetResultString && C.GetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

/* ---- device descriptions ---- */

/* Device descriptions (DEVICE records: name, memory, compute capability, UUID) come from driver
 * calls, and cupti_activity.h (cuptiGetDeviceId) documents only cuptiGetDeviceId as callable from
 * inside callbacks. So a callback only marks a device as seen (devices_pending) and wakes the
 * flush thread, which describes it off the callback; the stop describes what is left. Without a
 * flush thread (flush interval 0) descriptions wait for the stop. The DEVICE record may so follow
 * the first records of its device in the file; readers take it whenever it comes. */
static atomic_uint_least64_t devices_pending;
static void flusher_wake(void);

static void describe_now(int dev)
{
    if (dev < 0 || dev >= 64)
        return;
    uint64_t bit = 1ull << dev;
    if (atomic_load(&devices_seen) & bit)
        return;
    pthread_mutex_lock(&dev_lock);
    if (!(atomic_load(&devices_seen) & bit)) {
        gmp_rec r = {.type = GMP_REC_DEVICE};
        char name[256] = "";
        size_t total = 0;
        int major = 0, minor = 0;
        CUuuid uuid;
        memset(&uuid, 0, sizeof uuid);
        if (D.DeviceGetName)
            D.DeviceGetName(name, sizeof name - 1, (CUdevice)dev);
        if (D.DeviceTotalMem)
            D.DeviceTotalMem(&total, (CUdevice)dev);
        if (D.DeviceGetAttribute) {
            D.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                 (CUdevice)dev);
            D.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                 (CUdevice)dev);
        }
        if (D.DeviceGetUuid)
            D.DeviceGetUuid(&uuid, (CUdevice)dev);
        name[sizeof name - 1] = 0;
        r.u.device.id = (uint32_t)dev;
        r.u.device.name = (gmp_str){name, (uint32_t)strlen(name)};
        memcpy(r.u.device.uuid, uuid.bytes, 16);
        r.u.device.total_bytes = total;
        r.u.device.cc_major = (uint32_t)major;
        r.u.device.cc_minor = (uint32_t)minor;
        if (gmp_writer_define(S->w, &r) == GMP_OK)
            atomic_fetch_or(&devices_seen, bit);
    }
    pthread_mutex_unlock(&dev_lock);
}

/* From a callback: remember the device; the flush thread describes it. */
static void describe_device(int dev)
{
    if (dev < 0 || dev >= 64)
        return;
    uint64_t bit = 1ull << dev;
    if ((atomic_load(&devices_seen) | atomic_load(&devices_pending)) & bit)
        return;
    if (!(atomic_fetch_or(&devices_pending, bit) & bit))
        flusher_wake();
}

static void describe_pending(void)
{
    uint64_t p = atomic_exchange(&devices_pending, 0);
    for (int d = 0; d < 64; d++)
        if (p & (1ull << d))
            describe_now(d);
}

static int device_of(CUcontext ctx)
{
    if (!ctx)
        return -1;
    if (ctx == tl.ctx)
        return tl.dev;
    uint32_t d = 0;
    if (!C.GetDeviceId || C.GetDeviceId(ctx, &d) != CUPTI_SUCCESS)
        return -1;
    tl.ctx = ctx;
    tl.dev = (int)d;
    describe_device((int)d);
    return (int)d;
}

/* A stream's CUPTI id. cupti_activity.h (cuptiGetStreamIdEx): the context "typically ... should
 * be null" (non-NULL only checks that the stream belongs to it, which fails for a stream of
 * another context); perThreadStream is 1 for the _ptsz entry points, where a NULL stream is the
 * calling thread's default stream. cudaStreamLegacy (0x1) is the legacy default stream (id as for
 * NULL without _ptsz), cudaStreamPerThread (0x2) the thread's default stream. Ids are unique
 * within a context (the trace keeps them with the record's device). */
static uint64_t stream_id(const void *stream, int ptsz)
{
    uint32_t id = 0;
    if (!C.GetStreamIdEx)
        return 0;
    if ((uintptr_t)stream == 0x1) /* cudaStreamLegacy / CU_STREAM_LEGACY */
        stream = NULL, ptsz = 0;
    else if ((uintptr_t)stream == 0x2) /* cudaStreamPerThread / CU_STREAM_PER_THREAD */
        stream = NULL, ptsz = 1;
    if (!stream && !ptsz)
        return 0; /* the legacy default stream: 0 in the trace */
    if (C.GetStreamIdEx(NULL, (CUstream)(uintptr_t)stream, (uint8_t)ptsz, &id) != CUPTI_SUCCESS)
        return 0;
    return id;
}

/* ---- where memory lives: pools and streams ----
 * cuda.h: cuMemAllocFromPoolAsync allocates from the pool given, wherever it lives (a pool's
 * location is set at creation: a device, the host, a host NUMA node; cuMemPoolCreate, cuda.h
 * "To create a memory pool for host memory ... CU_MEM_LOCATION_TYPE_HOST"); a managed pool
 * (allocType CU_MEM_ALLOCATION_TYPE_MANAGED) holds managed memory. cuMemAllocAsync allocates from
 * "the current mempool of the provided stream's device" (cuDeviceSetMemPool: that pool "must be
 * local to the specified device"), so its device is the stream's, not the current context's. The
 * agent remembers each pool's location and type at creation, and each stream's device at its
 * STREAM_CREATED resource callback (cuptiGetDeviceId of the stream's context: no driver call).
 * Host pools' memory is recorded on device -1 (the report's "Host"), managed pools' as managed. */
static pthread_mutex_t loc_lock = PTHREAD_MUTEX_INITIALIZER;
static gmp_handles pools;   /* pool -> device (-1: not a device), GMP_HANDLE_* flags */
static gmp_handles streams; /* stream handle -> device */

static void pool_created(uint64_t pool, int loc_type, int loc_id, int alloc_type)
{
    if (!pool)
        return;
    pthread_mutex_lock(&loc_lock);
    gmp_handle_ent *e = gmp_handles_put(&pools, pool);
    if (e) {
        /* CU_MEM_LOCATION_TYPE_DEVICE == cudaMemLocationTypeDevice (1); managed: 2 in both */
        e->device = loc_type == CU_MEM_LOCATION_TYPE_DEVICE ? loc_id : -1;
        e->flags = (loc_type == CU_MEM_LOCATION_TYPE_DEVICE ? 0 : GMP_HANDLE_NOT_DEVICE) |
                   (alloc_type == CU_MEM_ALLOCATION_TYPE_MANAGED ? GMP_HANDLE_MANAGED : 0);
    }
    pthread_mutex_unlock(&loc_lock);
}

static void pool_gone(uint64_t pool)
{
    pthread_mutex_lock(&loc_lock);
    gmp_handles_del(&pools, pool);
    pthread_mutex_unlock(&loc_lock);
}

/* The device (and kind) of memory from a pool the agent saw created; 0 when unknown (a default
 * pool: on its device, which the caller already has). */
static int pool_where(uint64_t pool, int *dev, uint32_t *kind)
{
    int known = 0;
    pthread_mutex_lock(&loc_lock);
    const gmp_handle_ent *e = gmp_handles_get(&pools, pool);
    if (e) {
        known = 1;
        *dev = e->device;
        if (kind && (e->flags & GMP_HANDLE_MANAGED))
            *kind = GMP_MEM_MANAGED;
    }
    pthread_mutex_unlock(&loc_lock);
    return known;
}

/* Streams created or destroyed so far: a thread's cached stream device is valid while equal. */
static atomic_uint stream_gen;
static _Thread_local struct {
    const void *stream;
    int dev;
    unsigned gen;
} tl_stream;

static void stream_seen(const void *stream, int dev, int gone)
{
    if (!stream)
        return;
    pthread_mutex_lock(&loc_lock);
    if (gone) {
        gmp_handles_del(&streams, (uint64_t)(uintptr_t)stream);
    } else {
        gmp_handle_ent *e = gmp_handles_put(&streams, (uint64_t)(uintptr_t)stream);
        if (e)
            e->device = dev;
    }
    pthread_mutex_unlock(&loc_lock);
    atomic_fetch_add(&stream_gen, 1); /* after the change: cached devices are stale now */
}

/* The device of a stream: a created stream's own; the default streams' is the current one. */
static int stream_device(const void *stream, int cur)
{
    if ((uintptr_t)stream <= 0x2)
        return cur;
    unsigned gen = atomic_load_explicit(&stream_gen, memory_order_acquire);
    if (tl_stream.stream == stream && tl_stream.gen == gen) /* no lock on the hot path */
        return tl_stream.dev >= 0 ? tl_stream.dev : cur;
    int known = -1;
    pthread_mutex_lock(&loc_lock);
    const gmp_handle_ent *e = gmp_handles_get(&streams, (uint64_t)(uintptr_t)stream);
    if (e)
        known = e->device;
    pthread_mutex_unlock(&loc_lock);
    tl_stream.stream = stream;
    tl_stream.dev = known;
    tl_stream.gen = gen;
    return known >= 0 ? known : cur;
}

/* ---- array sizes (approximate: element size x extent; real arrays may be padded) ---- */

static uint64_t rt_array_bytes(const struct cudaChannelFormatDesc *d, size_t w, size_t h,
                               size_t depth)
{
    uint64_t bits = d ? (uint64_t)(d->x + d->y + d->z + d->w) : 0;
    return (bits / 8) * (uint64_t)w * (h ? h : 1) * (depth ? depth : 1);
}

static unsigned cu_format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 1;
    }
}

/* Bytes of a mipmapped array: every level halves each extent (at least 1), as cuda.h describes
 * levels (cuMipmappedArrayCreate); extents of 0 (1D, 2D) stay out. Approximate like arrays. */
static uint64_t mip_bytes(uint64_t elem, size_t w, size_t h, size_t d, unsigned levels)
{
    uint64_t total = 0;
    if (levels > 64)
        levels = 64;
    for (unsigned l = 0; l < levels; l++) {
        uint64_t lw = w >> l, lh = h >> l, ld = d >> l;
        total += elem * (lw ? lw : 1) * (h ? (lh ? lh : 1) : 1) * (d ? (ld ? ld : 1) : 1);
    }
    return total;
}

/* ---- recording ---- */

static void emit(gmp_wthread *t, gmp_rec *r)
{
    gmp_wthread_event(t, r);
}

static void record_oom(gmp_wthread *t, int dev, uint32_t api, uint64_t size, int result,
                       uint32_t stack)
{
    gmp_rec o = {.type = GMP_REC_OOM};
    o.u.oom.stack = stack;
    o.u.oom.device = dev;
    o.u.oom.api = api;
    o.u.oom.requested = size;
    o.u.oom.range = gmp_nvtx_current_range(S->w);
    o.u.oom.result = result;
    emit(t, &o);
    gmp_writer_flush(S->w, 0); /* ask the writer thread to write it now; do not wait */
}

/* Fills m from the params of an allocation at API exit (ok: the call succeeded, so its outputs are
 * written). Returns 0 when nothing to record. */
static int alloc_fields(api_desc *a, const CUpti_CallbackData *cd, gmp_rec_mem *m, int *dev, int ok)
{
    const void *p = cd->functionParams;
    switch ((int)a->dom) {
    case CUPTI_CB_DOMAIN_RUNTIME_API:
        switch (a->cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
            const cudaMalloc_v3020_params *q = p;
            m->address = q->devPtr ? (uint64_t)(uintptr_t)*q->devPtr : 0;
            m->size = q->size;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
            const cudaMallocPitch_v3020_params *q = p;
            /* the outputs are written only when the call succeeds: a failure's size is the
             * request (width x height) */
            m->address = ok && q->devPtr ? (uint64_t)(uintptr_t)*q->devPtr : 0;
            m->size = (ok && q->pitch ? *q->pitch : q->width) * (uint64_t)q->height;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020: {
            const cudaMalloc3D_v3020_params *q = p;
            if (!ok) { /* *pitchedDevPtr is not written: the request */
                m->size = (uint64_t)q->extent.width * (q->extent.height ? q->extent.height : 1) *
                          (q->extent.depth ? q->extent.depth : 1);
            } else if (q->pitchedDevPtr) {
                m->address = (uint64_t)(uintptr_t)q->pitchedDevPtr->ptr;
                m->size = (uint64_t)q->pitchedDevPtr->pitch *
                          (q->extent.height ? q->extent.height : 1) *
                          (q->extent.depth ? q->extent.depth : 1);
            }
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020: {
            const cudaMallocArray_v3020_params *q = p;
            m->address = q->array ? (uint64_t)(uintptr_t)*q->array : 0;
            m->size = rt_array_bytes(q->desc, q->width, q->height, 0);
            if (q->flags & (cudaArraySparse | cudaArrayDeferredMapping))
                m->size = 0;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3DArray_v3020: {
            const cudaMalloc3DArray_v3020_params *q = p;
            m->address = q->array ? (uint64_t)(uintptr_t)*q->array : 0;
            m->size = rt_array_bytes(q->desc, q->extent.width, q->extent.height, q->extent.depth);
            if (q->flags & (cudaArraySparse | cudaArrayDeferredMapping))
                m->size = 0; /* no memory until mapped (driver_types.h) */
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocMipmappedArray_v5000: {
            const cudaMallocMipmappedArray_v5000_params *q = p;
            m->address = ok && q->mipmappedArray ? (uint64_t)(uintptr_t)*q->mipmappedArray : 0;
            uint64_t elem =
                q->desc ? (uint64_t)(q->desc->x + q->desc->y + q->desc->z + q->desc->w) / 8 : 0;
            m->size =
                mip_bytes(elem, q->extent.width, q->extent.height, q->extent.depth, q->numLevels);
            if (q->flags & (cudaArraySparse | cudaArrayDeferredMapping))
                m->size = 0;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020: {
            const cudaMallocHost_v3020_params *q = p;
            m->address = q->ptr ? (uint64_t)(uintptr_t)*q->ptr : 0;
            m->size = q->size;
            *dev = -1;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020: {
            const cudaHostAlloc_v3020_params *q = p;
            m->address = q->pHost ? (uint64_t)(uintptr_t)*q->pHost : 0;
            m->size = q->size;
            *dev = -1;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000: {
            const cudaHostRegister_v4000_params *q = p;
            m->address = (uint64_t)(uintptr_t)q->ptr;
            m->size = q->size;
            *dev = -1;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
            const cudaMallocManaged_v6000_params *q = p;
            m->address = q->devPtr ? (uint64_t)(uintptr_t)*q->devPtr : 0;
            m->size = q->size;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020: {
            const cudaMallocAsync_v11020_params *q = p;
            m->address = q->devPtr ? (uint64_t)(uintptr_t)*q->devPtr : 0;
            m->size = q->size;
            *dev = stream_device(q->hStream, *dev);
            m->stream = stream_id(q->hStream,
                                  a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020);
            m->flags |= GMP_MEMF_ASYNC;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020: {
            const cudaMallocFromPoolAsync_v11020_params *q = p;
            m->address = q->ptr ? (uint64_t)(uintptr_t)*q->ptr : 0;
            m->size = q->size;
            m->stream = stream_id(
                q->stream, a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020);
            m->handle = (uint64_t)(uintptr_t)q->memPool;
            m->flags |= GMP_MEMF_ASYNC;
            if (!pool_where(m->handle, dev, &m->kind))
                *dev = stream_device(q->stream, *dev);
            break;
        }
        default: return 0;
        }
        break;
    case CUPTI_CB_DOMAIN_DRIVER_API:
        switch (a->cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
            const cuMemAlloc_v2_params *q = p;
            m->address = q->dptr ? (uint64_t)*q->dptr : 0;
            m->size = q->bytesize;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
            const cuMemAllocPitch_v2_params *q = p;
            m->address = ok && q->dptr ? (uint64_t)*q->dptr : 0;
            m->size = (ok && q->pPitch ? *q->pPitch : q->WidthInBytes) * (uint64_t)q->Height;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
            const cuMemAllocHost_v2_params *q = p;
            m->address = q->pp ? (uint64_t)(uintptr_t)*q->pp : 0;
            m->size = q->bytesize;
            *dev = -1;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
            const cuMemHostAlloc_params *q = p;
            m->address = q->pp ? (uint64_t)(uintptr_t)*q->pp : 0;
            m->size = q->bytesize;
            *dev = -1;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
            const cuMemHostRegister_v2_params *q = p;
            m->address = (uint64_t)(uintptr_t)q->p;
            m->size = q->bytesize;
            *dev = -1;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
            const cuMemAllocManaged_params *q = p;
            m->address = q->dptr ? (uint64_t)*q->dptr : 0;
            m->size = q->bytesize;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
            const cuMemAllocAsync_params *q = p;
            m->address = q->dptr ? (uint64_t)*q->dptr : 0;
            m->size = q->bytesize;
            *dev = stream_device(q->hStream, *dev);
            m->stream =
                stream_id(q->hStream, a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz);
            m->flags |= GMP_MEMF_ASYNC;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
            const cuMemAllocFromPoolAsync_params *q = p;
            m->address = q->dptr ? (uint64_t)*q->dptr : 0;
            m->size = q->bytesize;
            m->stream = stream_id(q->hStream,
                                  a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz);
            m->handle = (uint64_t)(uintptr_t)q->pool;
            m->flags |= GMP_MEMF_ASYNC;
            if (!pool_where(m->handle, dev, &m->kind))
                *dev = stream_device(q->hStream, *dev);
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
            const cuMemCreate_params *q = p;
            m->handle = q->handle ? (uint64_t)*q->handle : 0;
            m->size = q->size;
            /* cuda.h (CUmemLocationType): a device ordinal only for DEVICE locations; host and
             * host NUMA memory is not a device's (device -1, the report's "Host") */
            if (q->prop)
                *dev = q->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? q->prop->location.id
                                                                             : -1;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
            const cuMemMap_params *q = p;
            m->address = (uint64_t)q->ptr;
            m->size = q->size;
            m->handle = (uint64_t)q->handle;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
            const cuMemAddressReserve_params *q = p;
            m->address = q->ptr ? (uint64_t)*q->ptr : 0;
            m->size = q->size;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2: {
            const cuArrayCreate_v2_params *q = p;
            m->address = q->pHandle ? (uint64_t)(uintptr_t)*q->pHandle : 0;
            if (q->pAllocateArray)
                m->size = (uint64_t)cu_format_bytes(q->pAllocateArray->Format) *
                          q->pAllocateArray->NumChannels * q->pAllocateArray->Width *
                          (q->pAllocateArray->Height ? q->pAllocateArray->Height : 1);
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuArray3DCreate_v2: {
            const cuArray3DCreate_v2_params *q = p;
            m->address = q->pHandle ? (uint64_t)(uintptr_t)*q->pHandle : 0;
            if (q->pAllocateArray)
                m->size = (uint64_t)cu_format_bytes(q->pAllocateArray->Format) *
                          q->pAllocateArray->NumChannels * q->pAllocateArray->Width *
                          (q->pAllocateArray->Height ? q->pAllocateArray->Height : 1) *
                          (q->pAllocateArray->Depth ? q->pAllocateArray->Depth : 1);
            if (q->pAllocateArray &&
                (q->pAllocateArray->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)))
                m->size = 0; /* cuda.h: no memory until mapped */
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayCreate: {
            const cuMipmappedArrayCreate_params *q = p;
            m->address = ok && q->pHandle ? (uint64_t)(uintptr_t)*q->pHandle : 0;
            const CUDA_ARRAY3D_DESCRIPTOR *d = q->pMipmappedArrayDesc;
            if (d) {
                m->size = mip_bytes((uint64_t)cu_format_bytes(d->Format) * d->NumChannels, d->Width,
                                    d->Height, d->Depth, q->numMipmapLevels);
                if (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING))
                    m->size = 0;
            }
            break;
        }
        default: return 0;
        }
        break;
    default: return 0;
    }
    return 1;
}

/* Fills m from the params of a free (valid at entry and at exit). */
static void rt_free_fields(CUpti_CallbackId cbid, const CUpti_CallbackData *cd, gmp_rec_mem *m,
                           int *dev)
{
    const void *p = cd->functionParams;
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
        m->address = (uint64_t)(uintptr_t)((const cudaFree_v3020_params *)p)->devPtr;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeArray_v3020:
        m->address = (uint64_t)(uintptr_t)((const cudaFreeArray_v3020_params *)p)->array;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeMipmappedArray_v5000:
        m->address =
            (uint64_t)(uintptr_t)((const cudaFreeMipmappedArray_v5000_params *)p)->mipmappedArray;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020:
        m->address = (uint64_t)(uintptr_t)((const cudaFreeHost_v3020_params *)p)->ptr;
        *dev = -1;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostUnregister_v4000:
        m->address = (uint64_t)(uintptr_t)((const cudaHostUnregister_v4000_params *)p)->ptr;
        *dev = -1;
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020: {
        const cudaFreeAsync_v11020_params *q = p;
        m->address = (uint64_t)(uintptr_t)q->devPtr;
        m->stream =
            stream_id(q->hStream, cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020);
        m->flags |= GMP_MEMF_ASYNC;
        break;
    }
    default: break;
    }
}

static void drv_free_fields(CUpti_CallbackId cbid, const CUpti_CallbackData *cd, gmp_rec_mem *m,
                            int *dev)
{
    const void *p = cd->functionParams;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        m->address = (uint64_t)((const cuMemFree_v2_params *)p)->dptr;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
        m->address = (uint64_t)(uintptr_t)((const cuMemFreeHost_params *)p)->p;
        *dev = -1;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
        m->address = (uint64_t)(uintptr_t)((const cuMemHostUnregister_params *)p)->p;
        *dev = -1;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
        const cuMemFreeAsync_params *q = p;
        m->address = (uint64_t)q->dptr;
        m->stream = stream_id(q->hStream, cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz);
        m->flags |= GMP_MEMF_ASYNC;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
        m->handle = (uint64_t)((const cuMemRelease_params *)p)->handle;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
        const cuMemUnmap_params *q = p;
        m->address = (uint64_t)q->ptr;
        m->size = q->size;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
        const cuMemAddressFree_params *q = p;
        m->address = (uint64_t)q->ptr;
        m->size = q->size;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuArrayDestroy:
        m->address = (uint64_t)(uintptr_t)((const cuArrayDestroy_params *)p)->hArray;
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayDestroy:
        m->address =
            (uint64_t)(uintptr_t)((const cuMipmappedArrayDestroy_params *)p)->hMipmappedArray;
        break;
    default: break;
    }
}

/* ---- VMM handles: physical memory lives until its last reference and last mapping go ----
 * cuda.h (cuMemRelease): "the memory allocation will be freed when all outstanding mappings to
 * the memory are unmapped and when all outstanding references to the handle (including its
 * shareable counterparts) are also released"; cuMemRetainAllocationHandle: "the handle ... must be
 * released with cuMemRelease" (one more reference). So the agent counts, per handle, references
 * (cuMemCreate, cuMemRetainAllocationHandle, cuMemImportFromShareableHandle +1; cuMemRelease -1)
 * and live mappings (cuMemMap +1, cuMemUnmap -1), and writes the VMM_PHYSICAL FREE when both reach
 * zero, at the call that makes them so: a cuMemRelease or a cuMemUnmap. The replay then sees the
 * true free time and needs no VMM rule of its own. NCCL's free path (retain, release, unmap,
 * release) gives one free, at the last release. Imported handles (memory another process owns)
 * are counted the same way but never recorded: they are not this process's memory. A release of a
 * handle the agent never saw (created before it subscribed) is recorded as before, a FREE by
 * handle, so the trace says the program released something unknown. Like other frees, the FREE
 * is written at the call's entry; a release that then fails is undone (a FAILED record follows,
 * the counts are restored). A failed cuMemUnmap is not undone (its mappings are taken as gone). */
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static gmp_handles vmm_handles; /* handle -> size, device, refs, maps, flags */
static gmp_handles vmm_maps;    /* mapped address -> handle, size */
static _Thread_local struct {
    uint64_t handle, size;
    int32_t device;
    uint32_t flags;
    int state; /* 0 none, 1 a reference dropped at entry, 2 the handle freed at entry */
} tl_rel;

static void vmm_free_record(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd,
                            uint64_t handle, uint64_t size, int dev, int failed, int result)
{
    gmp_rec r = {.type = GMP_REC_FREE};
    r.u.mem.kind = GMP_MEM_VMM_PHYSICAL;
    r.u.mem.api = api_sid(a);
    r.u.mem.correlation = cd->correlationId;
    r.u.mem.handle = handle;
    r.u.mem.size = size;
    r.u.mem.device = dev;
    if (failed) {
        r.u.mem.flags = GMP_MEMF_FAILED;
        r.u.mem.result = result;
        r.u.mem.stack = gmp_stack_current();
    } else {
        r.u.mem.range = gmp_nvtx_current_range(S->w);
    }
    emit(t, &r);
    if (!failed && gmp_alert_on)
        gmp_alert_free(&r.u.mem);
}

static void vmm_created(uint64_t handle, uint64_t size, int dev, uint32_t flags)
{
    pthread_mutex_lock(&vmm_lock);
    gmp_handle_ent *e = gmp_handles_put(&vmm_handles, handle);
    if (e) {
        if (e->refs == 0 && e->maps == 0) { /* a new handle (or a reused value) */
            e->size = size;
            e->device = dev;
            e->flags = flags;
        }
        e->refs++;
    }
    pthread_mutex_unlock(&vmm_lock);
}

static void vmm_retained(uint64_t handle)
{
    pthread_mutex_lock(&vmm_lock);
    gmp_handle_ent *e = gmp_handles_get(&vmm_handles, handle);
    if (e)
        e->refs++;
    pthread_mutex_unlock(&vmm_lock);
}

static void vmm_mapped(uint64_t addr, uint64_t size, uint64_t handle)
{
    pthread_mutex_lock(&vmm_lock);
    gmp_handle_ent *h = gmp_handles_get(&vmm_handles, handle);
    if (h) {
        h->maps++;
        gmp_handle_ent *m = gmp_handles_put(&vmm_maps, addr);
        if (m) {
            m->handle = handle;
            m->size = size;
        } else {
            h->maps--; /* out of memory: the mapping is not counted */
        }
    }
    pthread_mutex_unlock(&vmm_lock);
}

/* cuMemRelease: at entry drop a reference (the FREE when nothing holds the memory any more); at a
 * failed exit undo it. Returns 1 when handled (the caller records nothing more). */
static int vmm_release(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd, int enter,
                       int result)
{
    uint64_t handle = (uint64_t)((const cuMemRelease_params *)cd->functionParams)->handle;
    if (enter) {
        tl_rel.state = 0;
        pthread_mutex_lock(&vmm_lock);
        gmp_handle_ent *e = gmp_handles_get(&vmm_handles, handle);
        if (!e) {
            pthread_mutex_unlock(&vmm_lock);
            return 0; /* unknown: recorded as a FREE by handle, as before */
        }
        tl_rel.handle = handle;
        tl_rel.size = e->size;
        tl_rel.device = e->device;
        tl_rel.flags = e->flags;
        tl_rel.state = 1;
        if (e->refs)
            e->refs--;
        int gone = e->refs == 0 && e->maps == 0;
        if (gone) {
            gmp_handles_del(&vmm_handles, handle);
            tl_rel.state = 2;
        }
        pthread_mutex_unlock(&vmm_lock);
        if (gone && !(tl_rel.flags & GMP_HANDLE_IMPORTED))
            vmm_free_record(t, a, cd, handle, tl_rel.size, tl_rel.device, 0, 0);
        return 1;
    }
    /* exit of a failed release */
    if (!tl_rel.state || tl_rel.handle != handle)
        return 0;
    int was = tl_rel.state;
    tl_rel.state = 0;
    pthread_mutex_lock(&vmm_lock);
    gmp_handle_ent *e = gmp_handles_put(&vmm_handles, handle);
    if (e) {
        if (was == 2) {
            e->size = tl_rel.size;
            e->device = tl_rel.device;
            e->flags = tl_rel.flags;
        }
        e->refs++;
    }
    pthread_mutex_unlock(&vmm_lock);
    if (was == 2 && !(tl_rel.flags & GMP_HANDLE_IMPORTED))
        vmm_free_record(t, a, cd, handle, tl_rel.size, tl_rel.device, 1, result);
    return 1;
}

/* cuMemUnmap at entry: every mapping in [ptr, ptr + size) loses its handle's mapping; a handle
 * with no reference and no mapping left is freed here. */
static void vmm_unmap(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd)
{
    const cuMemUnmap_params *q = cd->functionParams;
    uint64_t addr = (uint64_t)q->ptr, end = addr + (uint64_t)q->size;
    if (end < addr)
        return;
    struct {
        uint64_t handle, size;
        int32_t dev;
    } freed[16];
    for (int more = 1; more && addr < end;) {
        size_t nf = 0;
        more = 0;
        pthread_mutex_lock(&vmm_lock);
        while (addr < end) {
            gmp_handle_ent *m = gmp_handles_get(&vmm_maps, addr);
            if (!m || !m->size)
                break;
            uint64_t handle = m->handle, msize = m->size;
            gmp_handles_del(&vmm_maps, addr);
            addr += msize;
            gmp_handle_ent *h = gmp_handles_get(&vmm_handles, handle);
            if (h && h->maps)
                h->maps--;
            if (h && h->maps == 0 && h->refs == 0) {
                int imported = (h->flags & GMP_HANDLE_IMPORTED) != 0;
                uint64_t hsize = h->size;
                int32_t hdev = h->device;
                gmp_handles_del(&vmm_handles, handle);
                if (!imported) {
                    freed[nf].handle = handle;
                    freed[nf].size = hsize;
                    freed[nf].dev = hdev;
                    if (++nf == sizeof freed / sizeof freed[0]) {
                        more = 1;
                        break;
                    }
                }
            }
        }
        pthread_mutex_unlock(&vmm_lock);
        for (size_t i = 0; i < nf; i++)
            vmm_free_record(t, a, cd, freed[i].handle, freed[i].size, freed[i].dev, 0, 0);
    }
}

/* ---- memory this process did not allocate (issue 16, audit 7) ----
 * IPC (cudaIpcOpenMemHandle: closed by cudaIpcCloseMemHandle), pool pointer imports
 * (cuMemPoolImportPointer: "freed with cuMemFree or cuMemFreeAsync"), external memory
 * (cuExternalMemoryGetMappedBuffer: "must be freed using cuMemFree"; mapped mipmapped arrays: with
 * cuMipmappedArrayDestroy). Their memory belongs to another process or API: the agent records no
 * allocation, remembers the address, and records nothing when it is freed (no unmatched free). */
static gmp_handles imported; /* under loc_lock */
static atomic_int n_imported;
static _Thread_local uint64_t tl_imported_free; /* an imported address whose free is under way */

static void imported_add(uint64_t addr)
{
    if (!addr)
        return;
    pthread_mutex_lock(&loc_lock);
    if (gmp_handles_put(&imported, addr))
        atomic_store(&n_imported, (int)imported.n);
    pthread_mutex_unlock(&loc_lock);
}

/* 1 when addr was imported (and is now forgotten). Free of cost while nothing is imported. */
static int imported_take(uint64_t addr)
{
    if (!addr || !atomic_load_explicit(&n_imported, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&loc_lock);
    int was = gmp_handles_get(&imported, addr) != NULL;
    if (was) {
        gmp_handles_del(&imported, addr);
        atomic_store(&n_imported, (int)imported.n);
    }
    pthread_mutex_unlock(&loc_lock);
    return was;
}

/* The address an import call returned (at its exit). */
static uint64_t import_address(const api_desc *a, const void *p)
{
    if (a->dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        switch (a->cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaIpcOpenMemHandle_v4010: {
            const cudaIpcOpenMemHandle_v4010_params *q = p;
            return q->devPtr ? (uint64_t)(uintptr_t)*q->devPtr : 0;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolImportPointer_v11020: {
            const cudaMemPoolImportPointer_v11020_params *q = p;
            return q->ptr ? (uint64_t)(uintptr_t)*q->ptr : 0;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaExternalMemoryGetMappedBuffer_v10000: {
            const cudaExternalMemoryGetMappedBuffer_v10000_params *q = p;
            return q->devPtr ? (uint64_t)(uintptr_t)*q->devPtr : 0;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaExternalMemoryGetMappedMipmappedArray_v10000: {
            const cudaExternalMemoryGetMappedMipmappedArray_v10000_params *q = p;
            return q->mipmap ? (uint64_t)(uintptr_t)*q->mipmap : 0;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaIpcCloseMemHandle_v4010:
            return (uint64_t)(uintptr_t)((const cudaIpcCloseMemHandle_v4010_params *)p)->devPtr;
        default: return 0;
        }
    }
    switch (a->cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle: {
        const cuIpcOpenMemHandle_params *q = p;
        return q->pdptr ? (uint64_t)*q->pdptr : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2: {
        const cuIpcOpenMemHandle_v2_params *q = p;
        return q->pdptr ? (uint64_t)*q->pdptr : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer: {
        const cuMemPoolImportPointer_params *q = p;
        return q->ptr_out ? (uint64_t)*q->ptr_out : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuExternalMemoryGetMappedBuffer: {
        const cuExternalMemoryGetMappedBuffer_params *q = p;
        return q->devPtr ? (uint64_t)*q->devPtr : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuExternalMemoryGetMappedMipmappedArray: {
        const cuExternalMemoryGetMappedMipmappedArray_params *q = p;
        return q->mipmap ? (uint64_t)(uintptr_t)*q->mipmap : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle:
        return (uint64_t)((const cuIpcCloseMemHandle_params *)p)->dptr;
    default: return 0;
    }
}

/* cuMemMapArrayAsync (issue 16, audit 6): VMM memory mapped into (or unmapped from) tiles and mip
 * tails of sparse arrays keeps its handle alive like a cuMemMap does (cuda.h cuMemRelease: "all
 * outstanding mappings"). Each mapping is keyed by what it maps into (array, subresource, device
 * mask); an UNMAP finds the handle there and may free it (at the call's exit: the operation is
 * stream-ordered and the callback sees only its success). */
static gmp_handles array_maps; /* key of a tile or mip tail -> handle; under vmm_lock */

static uint64_t array_map_key(const CUarrayMapInfo *mi)
{
    uint64_t h = 1469598103934665603ull;
    const uint64_t parts[3] = {
        (uint64_t)(uintptr_t)(mi->resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY
                                  ? (void *)mi->resource.mipmap
                                  : (void *)mi->resource.array),
        (uint64_t)mi->subresourceType, (uint64_t)mi->deviceBitMask};
    uint64_t subres[4] = {0, 0, 0, 0};
    memcpy(subres, &mi->subresource,
           sizeof mi->subresource < sizeof subres ? sizeof mi->subresource : sizeof subres);
    for (int i = 0; i < 3; i++)
        h = (h ^ parts[i]) * 1099511628211ull;
    for (int i = 0; i < 4; i++)
        h = (h ^ subres[i]) * 1099511628211ull;
    return h ? h : 1;
}

static void array_map(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd)
{
    const cuMemMapArrayAsync_params *q = cd->functionParams;
    if (!q->mapInfoList)
        return;
    for (unsigned i = 0; i < q->count && i < 65536; i++) {
        const CUarrayMapInfo *mi = &q->mapInfoList[i];
        if (mi->memHandleType != CU_MEM_HANDLE_TYPE_GENERIC)
            continue;
        uint64_t key = array_map_key(mi);
        uint64_t fh = 0, fsize = 0;
        int32_t fdev = -1;
        pthread_mutex_lock(&vmm_lock);
        if (mi->memOperationType == CU_MEM_OPERATION_TYPE_MAP) {
            uint64_t handle = (uint64_t)mi->memHandle.memHandle;
            gmp_handle_ent *h = gmp_handles_get(&vmm_handles, handle);
            gmp_handle_ent *m = h ? gmp_handles_put(&array_maps, key) : NULL;
            if (m) {
                m->handle = handle;
                m->size = 1;
                h = gmp_handles_get(&vmm_handles, handle);
                if (h)
                    h->maps++;
            }
        } else if (mi->memOperationType == CU_MEM_OPERATION_TYPE_UNMAP) {
            gmp_handle_ent *m = gmp_handles_get(&array_maps, key);
            if (m) {
                uint64_t handle = m->handle;
                gmp_handles_del(&array_maps, key);
                gmp_handle_ent *h = gmp_handles_get(&vmm_handles, handle);
                if (h && h->maps)
                    h->maps--;
                if (h && !h->maps && !h->refs) {
                    if (!(h->flags & GMP_HANDLE_IMPORTED)) {
                        fh = handle;
                        fsize = h->size;
                        fdev = h->device;
                    }
                    gmp_handles_del(&vmm_handles, handle);
                }
            }
        }
        pthread_mutex_unlock(&vmm_lock);
        if (fh)
            vmm_free_record(t, a, cd, fh, fsize, fdev, 0, 0);
    }
}

/* ---- CUDA graphs (issue 16, audit 4) ----
 * Stream capture: between cudaStreamBeginCapture and cudaStreamEndCapture, work issued to the
 * capturing stream is not executed but recorded into a graph (cuda_runtime_api.h
 * cudaStreamBeginCapture); a cudaMallocAsync or cudaFreeAsync there adds a memory node
 * (cudaMallocAsync: "if the stream is capturing, the allocation is ... a graph node"), so it
 * allocates or frees nothing now and is not recorded. Other streams join a capture by waiting on
 * an event recorded in a capturing stream; the agent follows that (cudaEventRecord /
 * cudaStreamWaitEvent, enabled only while some capture runs, so programs that never capture pay
 * nothing for them). The memory of graph memory nodes is allocated when the graph runs; CUPTI
 * reports no allocation callback for it, so the agent reads the devices' graph memory
 * (cuDeviceGetGraphMemAttribute: USED_MEM_CURRENT and RESERVED_MEM_CURRENT) from the flush thread,
 * every interval after a graph was launched or uploaded on the device, and writes its changes:
 * the reserved size as the size of a pseudo pool (GRAPH_POOL), the used size as ALLOC/FREE
 * records of kind async-pool, api "graph memory", flagged activity|async, at the time read. The
 * used memory of a graph is therefore seen at the flush interval's resolution; a higher high
 * watermark (USED_MEM_HIGH, never reset by the agent) than seen before is written as a chunk
 * allocated and freed at the reading, so the trace's peak has it. Addresses a capture or
 * cudaGraphAddMemAllocNode returned are the graph's: their frees outside a graph are not
 * recorded (the graph memory's reading covers them). */
static gmp_handles capturing;      /* stream key -> capture id (the origin stream's key) */
static gmp_handles capture_events; /* event -> capture id */
static atomic_int n_capturing;     /* capturing streams: 0 = nothing to look up */
static _Thread_local char tl_key;  /* its address: this thread's per-thread default stream */

/* A stream's key: the handle, or for the per-thread default stream (NULL of a _ptsz call,
 * cudaStreamPerThread) an address of this thread. */
static uint64_t stream_key(const void *stream, int ptsz)
{
    if ((uintptr_t)stream == 0x2 || (!stream && ptsz))
        return (uint64_t)(uintptr_t)&tl_key;
    return (uint64_t)(uintptr_t)stream;
}

static int is_ptsz(const api_desc *a)
{
    return (a->dom == CUPTI_CB_DOMAIN_RUNTIME_API &&
            (a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020)) ||
           (a->dom == CUPTI_CB_DOMAIN_DRIVER_API &&
            (a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz));
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

static size_t capture_first; /* index in apis of the first capture-only API */

static void capture_callbacks(int on)
{
    for (size_t i = capture_first; capture_first && i < NAPIS; i++)
        C.EnableCallback((uint32_t)on, sub, apis[i].dom, apis[i].cbid);
}

/* 1 when the stream of an asynchronous allocation or free is being captured. */
static int stream_capturing(const void *stream, int ptsz)
{
    if (!atomic_load_explicit(&n_capturing, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&loc_lock);
    int yes = gmp_handles_get(&capturing, stream_key(stream, ptsz)) != NULL;
    pthread_mutex_unlock(&loc_lock);
    return yes;
}

/* Removes every entry of capture id from t: keys gathered first (a deletion shifts entries, also
 * across the table's end), then deleted. */
static void remove_capture(gmp_handles *t, uint64_t id)
{
    for (;;) {
        uint64_t keys[32];
        size_t n = 0;
        for (size_t i = 0; i < t->cap && n < 32; i++)
            if (t->ent[i].used && t->ent[i].handle == id)
                keys[n++] = t->ent[i].key;
        for (size_t i = 0; i < n; i++)
            gmp_handles_del(t, keys[i]);
        if (n < 32)
            return;
    }
}

static void capture_event(const api_desc *a, const void *params)
{
    const two_ptrs *q = params;
    int ptsz = is_ptsz(a);
    pthread_mutex_lock(&loc_lock);
    int before = (int)capturing.n;
    switch (a->op) {
    case OP_CAPTURE_BEGIN: {
        uint64_t k = stream_key(q->a, ptsz);
        gmp_handle_ent *e = gmp_handles_put(&capturing, k);
        if (e)
            e->handle = k;
        break;
    }
    case OP_CAPTURE_END: {
        /* the origin stream and every stream that joined its capture leave it */
        uint64_t id = stream_key(q->a, ptsz);
        const gmp_handle_ent *o = gmp_handles_get(&capturing, id);
        if (o)
            id = o->handle;
        remove_capture(&capturing, id);
        remove_capture(&capture_events, id);
        break;
    }
    case OP_EVENT_RECORD: {
        const gmp_handle_ent *c = gmp_handles_get(&capturing, stream_key(q->b, ptsz));
        if (c) {
            uint64_t id = c->handle;
            gmp_handle_ent *e = gmp_handles_put(&capture_events, (uint64_t)(uintptr_t)q->a);
            if (e)
                e->handle = id;
        } else {
            gmp_handles_del(&capture_events, (uint64_t)(uintptr_t)q->a);
        }
        break;
    }
    case OP_STREAM_WAIT: {
        const gmp_handle_ent *ev = gmp_handles_get(&capture_events, (uint64_t)(uintptr_t)q->b);
        if (ev) {
            uint64_t id = ev->handle;
            gmp_handle_ent *e = gmp_handles_put(&capturing, stream_key(q->a, ptsz));
            if (e)
                e->handle = id;
        }
        break;
    }
    default: break;
    }
    int after = (int)capturing.n;
    atomic_store(&n_capturing, after);
    pthread_mutex_unlock(&loc_lock);
    if (!before && after)
        capture_callbacks(1);
    else if (before && !after)
        capture_callbacks(0);
}

/* Graph launches by correlation id: the MEMORY2 records of the memory a launch allocates and
 * frees (its alloc and free nodes) carry the launch's correlation id (cupti_activity.h,
 * CUpti_ActivityMemory4.correlationId: "identical to the correlation ID in the driver and runtime
 * API activity record that launched the memory operation"). The outermost graph launch call's id
 * and API name are kept here (the last 4096 launches: records arrive within a few flush
 * intervals); a MEMORY2 record of device memory with such an id is a graph allocation or free and
 * is recorded, with the record's address, size and time, under the launch's API name. Lock-free:
 * one 64-bit slot per id (id << 32 | API name's string id). */
#define LAUNCH_RING 4096
static atomic_uint_least64_t launch_ring[LAUNCH_RING];

static void launch_seen(uint32_t corr, uint32_t api)
{
    if (corr)
        atomic_store_explicit(&launch_ring[corr % LAUNCH_RING], (uint64_t)corr << 32 | api,
                              memory_order_release);
}

/* The API name of the graph launch with this correlation id, 0 when it is not one. */
static uint32_t launch_api(uint32_t corr)
{
    uint64_t v = atomic_load_explicit(&launch_ring[corr % LAUNCH_RING], memory_order_acquire);
    return corr && (uint32_t)(v >> 32) == corr ? (uint32_t)v : 0;
}

/* Graph memory, read by the flush thread (see above). */
#define GRAPH_POOL(dev) (0x6772617068000000ull | (uint64_t)(uint32_t)(dev)) /* "graph" */
static atomic_uint_least64_t graph_devices; /* devices a graph was launched on */
static struct graph_mem {
    uint64_t used, high;
    atomic_uint_least64_t reserved; /* as last written (poll, or the floor of on_memory2) */
    atomic_uint_least64_t live;     /* graph memory live from the launches' MEMORY2 records */
    uint64_t chunk_addr[256], chunk_size[256]; /* the used memory as records: a stack */
    unsigned nchunks;
    uint64_t next;
} graph_mem[64];

static void graph_launched(int dev)
{
    if (dev < 0 || dev >= 64)
        return;
    uint64_t bit = 1ull << dev;
    if (!(atomic_fetch_or(&graph_devices, bit) & bit))
        flusher_wake();
}

static struct {
    CUresult (*GetAttr)(CUdevice, CUgraphMem_attribute, void *);
    CUresult (*PrimaryCtxGetState)(CUdevice, unsigned int *, int *);
} G;

static void graph_mem_record(gmp_wthread *t, int dev, int alloc, uint64_t addr, uint64_t size)
{
    static atomic_uint api;
    uint32_t sid = atomic_load(&api);
    if (!sid) {
        sid = gmp_writer_string(S->w, "graph memory", 12);
        atomic_store(&api, sid);
    }
    gmp_rec r = {.type = alloc ? GMP_REC_ALLOC : GMP_REC_FREE};
    r.u.mem.device = dev;
    r.u.mem.kind = GMP_MEM_ASYNC_POOL;
    r.u.mem.flags = GMP_MEMF_ACTIVITY | GMP_MEMF_ASYNC;
    r.u.mem.api = sid;
    r.u.mem.address = addr;
    r.u.mem.size = size;
    r.u.mem.handle = GRAPH_POOL(dev);
    emit(t, &r);
}

/* Reads every graph device's graph memory and writes what changed (flush thread, stop). */
static void graph_mem_poll(void)
{
    uint64_t devs = atomic_load(&graph_devices);
    if (!devs || !G.GetAttr)
        return;
    gmp_wthread *t = S->enter();
    if (!t)
        return;
    for (int dev = 0; dev < 64; dev++) {
        if (!(devs & (1ull << dev)))
            continue;
        unsigned flags = 0;
        int on = 0;
        /* never the call that would create a context: only a device whose context lives */
        if (G.PrimaryCtxGetState &&
            (G.PrimaryCtxGetState((CUdevice)dev, &flags, &on) != CUDA_SUCCESS || !on))
            continue;
        cuuint64_t used = 0, reserved = 0;
        if (G.GetAttr((CUdevice)dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS ||
            G.GetAttr((CUdevice)dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) !=
                CUDA_SUCCESS)
            continue;
        struct graph_mem *g = &graph_mem[dev];
        if (reserved != atomic_load(&g->reserved)) {
            gmp_rec p = {.type = GMP_REC_POOL};
            p.u.pool.device = dev;
            p.u.pool.op = GMP_POOL_RESERVED;
            p.u.pool.pool = GRAPH_POOL(dev);
            p.u.pool.value = reserved;
            emit(t, &p);
            atomic_store(&g->reserved, reserved);
        }
        if (memory2_on)
            continue; /* the used memory comes from the launches' MEMORY2 records */
        while (used < g->used && g->nchunks) { /* free from the top; split the last */
            unsigned i = --g->nchunks;
            uint64_t over = g->used - used, sz = g->chunk_size[i];
            graph_mem_record(t, dev, 0, g->chunk_addr[i], sz);
            g->used -= sz;
            if (sz > over) { /* allocate back what remains of it */
                uint64_t back = sz - over;
                uint64_t addr =
                    (0x67ull << 56) | ((uint64_t)dev << 48) | (++g->next & 0xffffffffffull);
                g->chunk_addr[g->nchunks] = addr;
                g->chunk_size[g->nchunks++] = back;
                graph_mem_record(t, dev, 1, addr, back);
                g->used += back;
            }
        }
        cuuint64_t high = 0; /* a peak between two readings (allocated and freed by a graph) */
        if (G.GetAttr((CUdevice)dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high) == CUDA_SUCCESS &&
            high > g->high && high > used && high > g->used) {
            uint64_t addr = (0x67ull << 56) | ((uint64_t)dev << 48) | (++g->next & 0xffffffffffull);
            graph_mem_record(t, dev, 1, addr, high - g->used);
            graph_mem_record(t, dev, 0, addr, high - g->used);
        }
        if (high > g->high)
            g->high = high;
        if (used > g->used) {
            uint64_t grow = used - g->used;
            if (g->nchunks == 256) { /* merge the top into the new chunk */
                unsigned i = --g->nchunks;
                graph_mem_record(t, dev, 0, g->chunk_addr[i], g->chunk_size[i]);
                grow += g->chunk_size[i];
                g->used -= g->chunk_size[i];
            }
            uint64_t addr = (0x67ull << 56) | ((uint64_t)dev << 48) | (++g->next & 0xffffffffffull);
            g->chunk_addr[g->nchunks] = addr;
            g->chunk_size[g->nchunks++] = grow;
            graph_mem_record(t, dev, 1, addr, grow);
            g->used += grow;
        }
    }
    S->leave();
}

/* The stream of an asynchronous allocation or free (NULL for others), read at entry or exit. */
static const void *async_stream(const api_desc *a, const void *p)
{
    if (a->dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        switch (a->cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
            return ((const cudaMallocAsync_v11020_params *)p)->hStream;
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
            return ((const cudaMallocFromPoolAsync_v11020_params *)p)->stream;
        case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
            return ((const cudaFreeAsync_v11020_params *)p)->hStream;
        default: return NULL;
        }
    }
    switch (a->cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
        return ((const cuMemAllocAsync_params *)p)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
        return ((const cuMemAllocFromPoolAsync_params *)p)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
        return ((const cuMemFreeAsync_params *)p)->hStream;
    default: return NULL;
    }
}

static int is_oom(CUpti_CallbackDomain dom, int result)
{
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API)
        return result == (int)cudaErrorMemoryAllocation;
    return result == (int)CUDA_ERROR_OUT_OF_MEMORY;
}

static void pool_event(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd, int dev,
                       int result)
{
    const void *p = cd->functionParams;
    gmp_rec r = {.type = GMP_REC_POOL};
    r.u.pool.device = dev;
    int rt = a->dom == CUPTI_CB_DOMAIN_RUNTIME_API;
    switch (a->op) {
    case OP_POOL_CREATE:
        r.u.pool.op = GMP_POOL_CREATE;
        if (rt) {
            const cudaMemPoolCreate_v11020_params *q = p;
            r.u.pool.pool = result == 0 && q->memPool ? (uint64_t)(uintptr_t)*q->memPool : 0;
            if (q->poolProps) {
                int lt = (int)q->poolProps->location.type;
                r.u.pool.device = lt == cudaMemLocationTypeDevice ? q->poolProps->location.id : -1;
                if (result == 0)
                    pool_created(r.u.pool.pool, lt, q->poolProps->location.id,
                                 (int)q->poolProps->allocType);
            }
        } else {
            const cuMemPoolCreate_params *q = p;
            r.u.pool.pool = result == 0 && q->pool ? (uint64_t)(uintptr_t)*q->pool : 0;
            if (q->poolProps) {
                int lt = (int)q->poolProps->location.type;
                r.u.pool.device =
                    lt == CU_MEM_LOCATION_TYPE_DEVICE ? q->poolProps->location.id : -1;
                if (result == 0)
                    pool_created(r.u.pool.pool, lt, q->poolProps->location.id,
                                 (int)q->poolProps->allocType);
            }
        }
        break;
    case OP_POOL_DESTROY:
        r.u.pool.op = GMP_POOL_DESTROY;
        r.u.pool.pool =
            rt ? (uint64_t)(uintptr_t)((const cudaMemPoolDestroy_v11020_params *)p)->memPool
               : (uint64_t)(uintptr_t)((const cuMemPoolDestroy_params *)p)->pool;
        break;
    case OP_POOL_TRIM:
        r.u.pool.op = GMP_POOL_TRIM;
        if (rt) {
            const cudaMemPoolTrimTo_v11020_params *q = p;
            r.u.pool.pool = (uint64_t)(uintptr_t)q->memPool;
            r.u.pool.value = q->minBytesToKeep;
        } else {
            const cuMemPoolTrimTo_params *q = p;
            r.u.pool.pool = (uint64_t)(uintptr_t)q->pool;
            r.u.pool.value = q->minBytesToKeep;
        }
        break;
    case OP_POOL_ATTR:
        if (rt) {
            const cudaMemPoolSetAttribute_v11020_params *q = p;
            if (q->attr != cudaMemPoolAttrReleaseThreshold || !q->value)
                return;
            r.u.pool.pool = (uint64_t)(uintptr_t)q->memPool;
            r.u.pool.value = *(const uint64_t *)q->value;
        } else {
            const cuMemPoolSetAttribute_params *q = p;
            if (q->attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD || !q->value)
                return;
            r.u.pool.pool = (uint64_t)(uintptr_t)q->pool;
            r.u.pool.value = *(const uint64_t *)q->value;
        }
        r.u.pool.op = GMP_POOL_THRESHOLD;
        break;
    default: return;
    }
    if (result != 0)
        return; /* a failed pool call changes nothing */
    if (a->op != OP_POOL_CREATE)
        pool_where(r.u.pool.pool, &r.u.pool.device, NULL);
    if (a->op == OP_POOL_DESTROY)
        pool_gone(r.u.pool.pool);
    emit(t, &r);
}

#define ENTER_MARK 0x676d70656e746572ull /* "gmpenter", xor the call's correlation id */

/* Late injection: the driver calls InitializeInjection from inside the first CUDA call, on the
 * calling thread (gmp_agent.c), so a runtime call already under way when we subscribe delivers
 * only its exit. What CUPTI guarantees (cupti_callbacks.h, CUpti_CallbackData): callbacks run on
 * the thread of the call; functionParams' outputs are valid at CUPTI_API_EXIT; correlationData is
 * one slot per call shared by its enter and exit, with no promise of zeroing (so an exit without
 * enter finds junk in it: never read here). What is assumed (not documented): the driver calls a
 * runtime call makes inside it are reported in the driver domain, enter and exit, before the
 * runtime call's exit, on the same thread (the simulator does this; DESIGN.md). So on the thread
 * that started CUPTI, until its first runtime callback, the first driver allocation is held back
 * (late_rec, with its own time) instead of written: if the next memory callback of that thread is
 * a runtime allocation's exit (necessarily without enter: no runtime callback came before) whose
 * output pointer is that address, the record is written once under the runtime API's name and
 * correlation id (what the user called); any other callback writes it as it was. A held record
 * is never lost: the flush thread writes it after half a flush interval (a driver-only program,
 * whose allocation no runtime exit follows), gmp_cupti_stop at the latest. No lock: the holder
 * publishes with a release store, and whoever wins the compare-and-swap (that thread, or the stop)
 * writes it. Other threads and later calls are untouched. */
static gmp_rec late_rec;
static atomic_int late_state; /* 0 nothing held, 1 late_rec held, 2 done (held at most once) */

static void late_release(api_desc *ra, uint32_t correlation)
{
    int held = 1;
    if (!atomic_compare_exchange_strong(&late_state, &held, 2))
        return;
    gmp_rec r = late_rec;
    if (ra) {
        r.u.mem.api = api_sid(ra);
        r.u.mem.kind = ra->kind;
        r.u.mem.correlation = correlation;
    }
    gmp_wthread *t = S->enter();
    if (!t)
        return;
    emit(t, &r);
    S->leave();
}

static void on_api(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cd)
{
    if (cbid >= MAX_CBID)
        return;
    int rt = dom == CUPTI_CB_DOMAIN_RUNTIME_API;
    unsigned idx = rt ? rt_index[cbid] : drv_index[cbid];
    if (!idx)
        return;
    api_desc *a = &apis[idx - 1];
    int enter = cd->callbackSite == CUPTI_API_ENTER;

    if (tl.late_window) {
        if (atomic_load_explicit(&late_state, memory_order_acquire) == 1) {
            /* the held driver allocation: the runtime allocation it was made for, or its own */
            gmp_rec_mem m = {0};
            int d = -1;
            if (rt && !enter && a->op == OP_ALLOC && cd->functionReturnValue &&
                *(const int *)cd->functionReturnValue == 0 && cd->functionParams &&
                alloc_fields(a, cd, &m, &d, 1) && m.address &&
                m.address == late_rec.u.mem.address) {
                late_release(a, cd->correlationId);
                tl.late_window = 0;
                return; /* recorded once; the depth was never raised for it */
            }
            late_release(NULL, 0);
            tl.late_window = 0;
        } else if (rt || (a->op != OP_ALLOC && a->op != OP_NONE)) {
            tl.late_window = 0; /* not inside a runtime allocation we missed */
        }
    }

    if (rt) {
        if (enter) {
            tl.rt_depth++;
            if (cd->correlationData) /* the exit callback knows its entry was seen */
                *cd->correlationData = ENTER_MARK ^ cd->correlationId;
        }
    } else if (tl.rt_depth > 0) {
        return; /* a driver call inside a runtime memory API: counted by the runtime call */
    }
    int outermost = rt ? (enter ? tl.rt_depth == 1 : tl.rt_depth <= 1) : 1;
    if (rt && !enter) {
        /* correlationData is ours only when our enter callback ran: the header promises no
         * zeroing (cupti_callbacks.h), so an exit whose enter was never seen (the driver loads the
         * agent from inside the first CUDA call) finds whatever was there; a mark that also holds
         * the call's correlation id cannot be such junk by accident in practice */
        int entered =
            cd->correlationData && *cd->correlationData == (ENTER_MARK ^ cd->correlationId);
        if (entered && tl.rt_depth > 0)
            tl.rt_depth--;
        if (!entered && a->op == OP_FREE)
            return; /* its entry (where frees are recorded) was never seen: nothing to undo */
        if (!entered && a->op == OP_ALLOC) {
            /* subscribed in the middle of this call (lazy initialization): the driver callback
             * inside it may already have recorded the allocation */
            gmp_rec_mem m = {0};
            int dev = -1;
            if (cd->functionParams && alloc_fields(a, cd, &m, &dev, 1) && m.address &&
                m.address == tl.last_drv_addr)
                return;
        }
    }
    if (!outermost || !atomic_load_explicit(&active, memory_order_acquire))
        return;
    if (enter && a->op == OP_GRAPH_LAUNCH && memory2_on)
        launch_seen(cd->correlationId, api_sid(a)); /* before its MEMORY2 records can arrive */
    /* allocations and pool calls are recorded at exit, frees at entry (and at exit on failure) */
    int result = !enter && cd->functionReturnValue ? *(const int *)cd->functionReturnValue : 0;
    if (enter ? a->op != OP_FREE : (a->op == OP_FREE && result == 0))
        return;

    if (a->op >= OP_CAPTURE_BEGIN && a->op <= OP_STREAM_WAIT) {
        if (result == 0 || a->op == OP_CAPTURE_END) /* an invalidated capture ends too */
            capture_event(a, cd->functionParams);
        return;
    }
    if (a->kind == GMP_MEM_ASYNC_POOL && atomic_load_explicit(&n_capturing, memory_order_relaxed) &&
        stream_capturing(async_stream(a, cd->functionParams), is_ptsz(a))) {
        /* a memory node of the graph being captured: nothing happens now. Its address is the
         * graph's: a free of it outside the graph is the graph memory's (read from the device's
         * graph memory), so it is remembered like imported memory. */
        if (!enter && result == 0 && a->op == OP_ALLOC && !memory2_on) {
            gmp_rec_mem m = {0};
            int d = -1;
            if (alloc_fields(a, cd, &m, &d, 1))
                imported_add(m.address);
        }
        return;
    }
    if (a->op == OP_GRAPH_MEMNODE) {
        if (memory2_on) {
            /* the launches' MEMORY2 records give this address its allocation */
        } else if (result == 0 && rt) {
            const cudaGraphAddMemAllocNode_v11040_params *q = cd->functionParams;
            if (q->nodeParams)
                imported_add((uint64_t)(uintptr_t)q->nodeParams->dptr);
        } else if (result == 0) {
            const cuGraphAddMemAllocNode_params *q = cd->functionParams;
            if (q->nodeParams)
                imported_add((uint64_t)q->nodeParams->dptr);
        }
        return;
    }
    if (a->op == OP_GRAPH_LAUNCH) {
        if (result == 0) {
            const two_ptrs *q = cd->functionParams;
            graph_launched(stream_device(q->b, device_of(cd->context)));
        }
        return;
    }
    gmp_wthread *t = S->enter();
    if (!t)
        return;
    int dev = device_of(cd->context);
    if (!rt && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemRelease &&
        vmm_release(t, a, cd, enter, result)) {
        S->leave();
        return;
    }
    if (!rt && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemUnmap && enter)
        vmm_unmap(t, a, cd); /* then the mapping's own FREE below */
    if (a->op == OP_FREE) {
        if (enter) {
            /* recorded at entry, before the memory is released: an address reused by another
             * thread is always freed before it is allocated again in the trace */
            gmp_rec r = {.type = GMP_REC_FREE};
            r.u.mem.kind = a->kind;
            r.u.mem.api = api_sid(a);
            r.u.mem.correlation = cd->correlationId;
            r.u.mem.range = gmp_nvtx_current_range(S->w);
            if (rt)
                rt_free_fields(cbid, cd, &r.u.mem, &dev);
            else
                drv_free_fields(cbid, cd, &r.u.mem, &dev);
            r.u.mem.device = dev;
            if (r.u.mem.address && imported_take(r.u.mem.address)) {
                tl_imported_free = r.u.mem.address;         /* not ours: no record */
            } else if (r.u.mem.address || r.u.mem.handle) { /* cudaFree(NULL) frees nothing */
                /* no stack: the question is where memory was allocated, and unwinding costs
                 * about a microsecond; a failed free (below) keeps its stack */
                emit(t, &r);
                if (gmp_alert_on)
                    gmp_alert_free(&r.u.mem);
            }
        } else {
            /* the free failed: a second record with the failure and the same correlation id */
            gmp_rec r = {.type = GMP_REC_FREE};
            r.u.mem.kind = a->kind;
            r.u.mem.flags = GMP_MEMF_FAILED;
            r.u.mem.api = api_sid(a);
            r.u.mem.correlation = cd->correlationId;
            r.u.mem.result = result;
            if (rt)
                rt_free_fields(cbid, cd, &r.u.mem, &dev);
            else
                drv_free_fields(cbid, cd, &r.u.mem, &dev);
            r.u.mem.device = dev;
            if (r.u.mem.address && r.u.mem.address == tl_imported_free) {
                imported_add(r.u.mem.address); /* the free of imported memory failed */
                tl_imported_free = 0;
            } else if (r.u.mem.address || r.u.mem.handle) {
                r.u.mem.stack = gmp_stack_current();
                emit(t, &r);
            }
        }
    } else {
        if (a->op == OP_ALLOC) {
            gmp_rec r = {.type = GMP_REC_ALLOC};
            r.u.mem.kind = a->kind;
            r.u.mem.api = api_sid(a);
            r.u.mem.correlation = cd->correlationId;
            r.u.mem.range = gmp_nvtx_current_range(S->w);
            r.u.mem.result = result;
            /* a successful call that returns no memory (cudaMalloc of 0 bytes gives NULL) has
             * allocated nothing: nothing to record */
            if (alloc_fields(a, cd, &r.u.mem, &dev, result == 0) &&
                (result != 0 || r.u.mem.address || r.u.mem.handle)) {
                r.u.mem.stack = gmp_stack_current();
                if (result != 0) {
                    r.u.mem.flags |= GMP_MEMF_FAILED;
                    r.u.mem.address = 0;
                    r.u.mem.handle = 0;
                }
                r.u.mem.device = dev;
                if (!rt && tl.late_window && result == 0 && r.u.mem.address &&
                    atomic_load_explicit(&late_state, memory_order_relaxed) == 0) {
                    r.time_ns = gmp_clock_ns(); /* held: see late_release */
                    late_rec = r;
                    atomic_store_explicit(&late_state, 1, memory_order_release);
                } else {
                    emit(t, &r);
                }
                if (gmp_alert_on && result == 0)
                    gmp_alert_alloc(t, &r.u.mem);
                if (!rt && result == 0)
                    tl.last_drv_addr = r.u.mem.address;
                if (!rt && result == 0 && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate)
                    vmm_created(r.u.mem.handle, r.u.mem.size, dev, 0);
                else if (!rt && result == 0 && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap)
                    vmm_mapped(r.u.mem.address, r.u.mem.size, r.u.mem.handle);
                if (result != 0 && is_oom(dom, result))
                    record_oom(t, dev, r.u.mem.api, r.u.mem.size, result, r.u.mem.stack);
            }
        } else if (a->op == OP_VMM_RETAIN) {
            const cuMemRetainAllocationHandle_params *q = cd->functionParams;
            if (result == 0 && q->handle)
                vmm_retained((uint64_t)*q->handle);
        } else if (a->op == OP_IMPORT_ADDR) {
            if (result == 0)
                imported_add(import_address(a, cd->functionParams));
        } else if (a->op == OP_IMPORT_CLOSE) {
            if (result == 0)
                imported_take(import_address(a, cd->functionParams));
        } else if (a->op == OP_ARRAY_MAP) {
            if (result == 0)
                array_map(t, a, cd);
        } else if (a->op == OP_VMM_MULTICAST) {
            /* a multicast object: mapped and released like memory, but its memory is what is
             * bound to it (cuMulticastBindMem of handles already recorded) */
            const cuMulticastCreate_params *q = cd->functionParams;
            if (result == 0 && q->mcHandle)
                vmm_created((uint64_t)*q->mcHandle, 0, -1, GMP_HANDLE_IMPORTED);
        } else if (a->op == OP_VMM_IMPORT) {
            /* another process's memory (or an object's): counted for its releases and mappings,
             * never recorded as this process's allocation */
            const cuMemImportFromShareableHandle_params *q = cd->functionParams;
            if (result == 0 && q->handle)
                vmm_created((uint64_t)*q->handle, 0, -1, GMP_HANDLE_IMPORTED);
        } else {
            pool_event(t, a, cd, dev, result);
        }
    }
    S->leave();
}

static void on_resource(CUpti_CallbackId cbid, const void *data)
{
    if (!atomic_load_explicit(&active, memory_order_acquire))
        return;
    gmp_rec r = {.type = GMP_REC_RESOURCE};
    int dev = -1;
    switch (cbid) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING: {
        const CUpti_ResourceData *rd = data;
        r.u.resource.op = cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED ? GMP_RES_CONTEXT_CREATE
                                                                      : GMP_RES_CONTEXT_DESTROY;
        uint32_t d = 0;
        if (rd && rd->context && C.GetDeviceId && C.GetDeviceId(rd->context, &d) == CUPTI_SUCCESS)
            dev = (int)d;
        r.u.resource.handle = (uint64_t)(uintptr_t)(rd ? rd->context : NULL);
        if (dev >= 0)
            describe_device(dev);
        if (tl.ctx == (rd ? rd->context : NULL))
            tl.ctx = NULL; /* a destroyed context's address may be reused */
        break;
    }
    case CUPTI_CBID_RESOURCE_STREAM_CREATED:
    case CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING: {
        const CUpti_ResourceData *rd = data;
        r.u.resource.op = cbid == CUPTI_CBID_RESOURCE_STREAM_CREATED ? GMP_RES_STREAM_CREATE
                                                                     : GMP_RES_STREAM_DESTROY;
        uint32_t d = 0;
        if (rd && rd->context && C.GetDeviceId && C.GetDeviceId(rd->context, &d) == CUPTI_SUCCESS)
            dev = (int)d;
        r.u.resource.handle =
            rd && rd->resourceHandle.stream ? stream_id(rd->resourceHandle.stream, 0) : 0;
        if (rd)
            stream_seen(rd->resourceHandle.stream, dev,
                        cbid == CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING);
        break;
    }
    case CUPTI_CBID_RESOURCE_MODULE_LOADED:
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING: {
        const CUpti_ResourceData *rd = data;
        const CUpti_ModuleResourceData *md = rd ? rd->resourceDescriptor : NULL;
        r.u.resource.op =
            cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED ? GMP_RES_MODULE_LOAD : GMP_RES_MODULE_UNLOAD;
        uint32_t d = 0;
        if (rd && rd->context && C.GetDeviceId && C.GetDeviceId(rd->context, &d) == CUPTI_SUCCESS)
            dev = (int)d;
        r.u.resource.handle = md ? md->moduleId : 0;
        break;
    }
    default: return;
    }
    r.u.resource.device = dev;
    gmp_wthread *t = S->enter();
    if (!t)
        return;
    emit(t, &r);
    S->leave();
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)ud;
    if (!data)
        return;
    if (dom == CUPTI_CB_DOMAIN_RESOURCE)
        on_resource(cbid, data);
    else if (dom == CUPTI_CB_DOMAIN_RUNTIME_API || dom == CUPTI_CB_DOMAIN_DRIVER_API)
        on_api(dom, cbid, data);
}

/* ---- activity ---- */

#define ACT_BUF_BYTES (1u << 20)

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0;
    *buffer = NULL;
    *size = 0;
    if (atomic_fetch_add(&act_outstanding, ACT_BUF_BYTES) + ACT_BUF_BYTES > act_limit) {
        atomic_fetch_sub(&act_outstanding, ACT_BUF_BYTES);
        return; /* CUPTI drops records and counts them: reported as LOST */
    }
    void *p = NULL;
    if (posix_memalign(&p, 8, ACT_BUF_BYTES) != 0) {
        atomic_fetch_sub(&act_outstanding, ACT_BUF_BYTES);
        return;
    }
    *buffer = p;
    *size = ACT_BUF_BYTES;
}

static uint32_t static_range(const char *name)
{
    /* static memory is attributed to a range "[static]/<variable>" */
    static atomic_uint root;
    uint32_t r = atomic_load(&root);
    if (!r) {
        r = gmp_writer_range(S->w, 0, 0, gmp_writer_string(S->w, "[static]", 8));
        atomic_store(&root, r);
    }
    if (!name || !*name)
        return r;
    size_t n = strnlen(name, GMP_MAX_STRING_BYTES);
    return gmp_writer_range(S->w, r, 0, gmp_writer_string(S->w, name, n));
}

/* The graph memory pool holds at least the graph memory live in it: RESERVED_MEM_CURRENT is the
 * memory "allocated for use by the CUDA graphs asynchronous allocator" and USED_MEM_CURRENT the
 * memory "currently associated with graphs" (driver_types.h, cudaGraphMemAttributeType), and only
 * cudaDeviceGraphMemTrim gives blocks "not in use by a graph" back
 * (cuda_runtime_api.h:11079-11082); NVIDIA's graphMemoryFootprint sample says freeing graph
 * allocations does not shrink the footprint, a trim after the frees does (its lines 322-334). So
 * reserved only falls at a trim. The polls read the true size
 * (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) at each flush; between them a launch can take more than
 * was last read, so when a MEMORY2 record of graph memory raises the live bytes above the reserved
 * size last written, the reserved size is raised to it at that record's time. A trim is seen at the
 * next poll. (Called where the activity records are processed; the poll may run beside it, hence
 * the atomics: the replay orders both by time.) */
static void graph_reserve_floor(gmp_wthread *t, int dev, int alloc, uint64_t bytes, uint64_t ts)
{
    if (dev < 0 || dev >= 64)
        return;
    struct graph_mem *g = &graph_mem[dev];
    uint64_t live;
    if (alloc) {
        live = atomic_fetch_add(&g->live, bytes) + bytes;
    } else {
        uint64_t cur = atomic_load(&g->live);
        while (!atomic_compare_exchange_weak(&g->live, &cur, cur > bytes ? cur - bytes : 0))
            ;
        return;
    }
    uint64_t res = atomic_load(&g->reserved);
    while (live > res) {
        if (atomic_compare_exchange_weak(&g->reserved, &res, live)) {
            gmp_rec p = {.type = GMP_REC_POOL, .time_ns = ts};
            p.u.pool.device = dev;
            p.u.pool.op = GMP_POOL_RESERVED;
            p.u.pool.pool = GRAPH_POOL(dev);
            p.u.pool.value = live;
            emit(t, &p);
            break;
        }
    }
}

static void on_memory2(gmp_wthread *t, const CUpti_ActivityMemory4 *m)
{
    static atomic_uint api;
    uint64_t ts = m->timestamp ? (uint64_t)((int64_t)m->timestamp + atomic_load(&clock_offset)) : 0;
    if (m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID &&
        m->memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
        gmp_rec p = {.type = GMP_REC_POOL, .time_ns = ts};
        int pdev = (int)m->deviceId;
        uint32_t pkind = 0;
        pool_where(m->memoryPoolConfig.address, &pdev, &pkind); /* a host pool's: -1 */
        p.u.pool.device = pdev;
        p.u.pool.op = GMP_POOL_RESERVED;
        p.u.pool.pool = m->memoryPoolConfig.address;
        p.u.pool.value = m->memoryPoolConfig.pool.size;
        if (pkind != GMP_MEM_MANAGED)
            emit(t, &p);
    }
    unsigned kind;
    uint32_t a = 0, flags = GMP_MEMF_ACTIVITY;
    if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC)
        kind = GMP_MEM_STATIC;
    else if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC)
        kind = GMP_MEM_MANAGED;
    else if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
             (a = launch_api(m->correlationId)) != 0) {
        kind = GMP_MEM_ASYNC_POOL; /* a graph's alloc or free node, run by its launch */
        flags |= GMP_MEMF_ASYNC;
    } else {
        return; /* recorded from the API callbacks */
    }
    if (!a)
        a = atomic_load(&api);
    if (!a) {
        a = gmp_writer_string(S->w, "MEMORY2", 7);
        atomic_store(&api, a);
    }
    gmp_rec r = {.type = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                             ? GMP_REC_FREE
                             : GMP_REC_ALLOC,
                 .time_ns = ts};
    r.u.mem.device = (int32_t)m->deviceId;
    r.u.mem.kind = kind;
    r.u.mem.flags = flags;
    r.u.mem.api = a;
    r.u.mem.address = m->address;
    r.u.mem.size = m->bytes;
    r.u.mem.stream = m->streamId;
    r.u.mem.correlation = m->correlationId;
    r.u.mem.range = kind == GMP_MEM_ASYNC_POOL ? 0 : static_range(m->name);
    describe_device((int)m->deviceId);
    emit(t, &r);
    if (kind == GMP_MEM_ASYNC_POOL)
        graph_reserve_floor(t, r.u.mem.device, r.type == GMP_REC_ALLOC, m->bytes, ts);
    if (gmp_alert_on) {
        if (r.type == GMP_REC_ALLOC)
            gmp_alert_alloc(t, &r.u.mem);
        else
            gmp_alert_free(&r.u.mem);
    }
}

/* MEMORY_POOL records: the pool's size after a creation or a trim. cupti_activity.h
 * (CUpti_ActivityMemoryPool3): size "is valid for CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL" only, and
 * isManagedPool (CUPTI 13 records only) says the pool holds managed memory, which is not device
 * memory reserved: both are left out. The size of a TRIMMED record is read as the size after the
 * trim (the pool's size, as for CREATED). */
static void on_memory_pool(gmp_wthread *t, const CUpti_ActivityMemoryPool3 *m)
{
    uint64_t ts = m->timestamp ? (uint64_t)((int64_t)m->timestamp + atomic_load(&clock_offset)) : 0;
    if (m->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED)
        return; /* from the callbacks */
    if (m->memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL)
        return;
    if (runtime_version >= 130000 && m->isManagedPool)
        return;
    int32_t dev = (int32_t)m->deviceId;
    uint32_t kind = 0;
    int pdev = dev;
    if (pool_where(m->address, &pdev, &kind)) {
        if (kind == GMP_MEM_MANAGED)
            return;
        dev = pdev; /* a host pool's: -1 */
    }
    gmp_rec p = {.type = GMP_REC_POOL, .time_ns = ts};
    p.u.pool.device = dev;
    p.u.pool.op = GMP_POOL_RESERVED;
    p.u.pool.pool = m->address;
    p.u.pool.value = m->size;
    emit(t, &p);
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                   size_t valid)
{
    (void)size;
    gmp_wthread *t = S ? S->enter() : NULL;
    if (t && buffer) {
        CUpti_Activity *rec = NULL;
        while (C.ActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
            if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY2)
                on_memory2(t, (const CUpti_ActivityMemory4 *)rec);
            else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL)
                on_memory_pool(t, (const CUpti_ActivityMemoryPool3 *)rec);
        }
        size_t dropped = 0;
        if (C.ActivityGetNumDroppedRecords &&
            C.ActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
            gmp_writer_lost(S->w, dropped, GMP_LOST_CUPTI_DROPPED);
    }
    if (t)
        S->leave();
    if (buffer) {
        free(buffer);
        atomic_fetch_sub(&act_outstanding, ACT_BUF_BYTES);
    }
}

/* ---- loading ---- */

static void *try_open(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return h;
}

/* The major version of a loaded CUDA runtime, from its file name (libcudart.so.12 or the real
 * file libcudart.so.12.4.127); 0 when unknown. */
static int runtime_major(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *v = base + strlen("libcudart.so");
    if (v[0] == '.' && v[1] >= '0' && v[1] <= '9')
        return atoi(v + 1);
    char real[4096];
    if (realpath(path, real)) {
        base = strrchr(real, '/');
        base = base ? base + 1 : real;
        if (!strncmp(base, "libcudart.so.", 13) && base[13] >= '0' && base[13] <= '9')
            return atoi(base + 13);
    }
    return 0;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* The CUPTI of the process (issue 16): first the one it names, then one it already loaded, then
 * one matching its CUDA runtime beside that runtime, then a toolkit's. Never a second CUPTI: a
 * loaded one is reused (RTLD_NOLOAD), and the runtime's neighbour is the file the program's own
 * profiler (torch.profiler, a wheel's kineto) would load. gpumemprof info (cli/cmd_info.c) follows
 * the same order. */
static void *load_cupti(const char *explicit_path, char *why, size_t whylen)
{
    char path[4096], loaded[4096];
    int have_loaded = gmp_loaded_object("libcupti.so", loaded, sizeof loaded);
    /* 0. an explicit path (--cupti, GPUMEMPROF_CUPTI) */
    if (explicit_path && *explicit_path) {
        void *h = try_open(explicit_path);
        if (!h) {
            snprintf(why, whylen, "cannot profile: cannot load CUPTI from %s: %s", explicit_path,
                     dlerror());
            return NULL;
        }
        char now[4096];
        if (have_loaded && gmp_loaded_object("libcupti.so", now, sizeof now) &&
            strcmp(now, loaded) == 0 && strcmp(loaded, explicit_path) != 0 && S && S->log) {
            char a[4096], b[4096];
            if (!realpath(loaded, a) || !realpath(explicit_path, b) || strcmp(a, b) != 0)
                S->log("the program had loaded CUPTI %s; --cupti %s is a second CUPTI in the "
                       "process",
                       loaded, explicit_path);
        }
        return h;
    }
    /* 1. the CUPTI the process already loaded (its own profiler, a wheel's kineto): reused */
    if (have_loaded) {
        void *h = dlopen(loaded, RTLD_NOW | RTLD_NOLOAD);
        if (h)
            return h;
    }
    /* 2. beside the loaded CUDA runtime, of its major version: the runtime's directory (a
     * toolkit's lib64, torch/lib of wheels that bundle it), the pip wheels' layout
     * (site-packages/nvidia/cuda_runtime/lib -> nvidia/cuda_cupti/lib, torch/lib) and a toolkit's
     * extras/CUPTI/lib64 */
    char rt[4096];
    int major = 0;
    if (gmp_loaded_object("libcudart.so", rt, sizeof rt) && (major = runtime_major(rt)) > 0) {
        char *slash = strrchr(rt, '/');
        if (slash) {
            *slash = 0;
            size_t n = strlen(rt);
            char cand[4][4200];
            size_t nc = 0;
            snprintf(cand[nc++], sizeof cand[0], "%s/libcupti.so.%d", rt, major);
            if (ends_with(rt, n, "/nvidia/cuda_runtime/lib")) {
                size_t root = n - strlen("/cuda_runtime/lib"); /* .../nvidia */
                snprintf(cand[nc++], sizeof cand[0], "%.*s/cuda_cupti/lib/libcupti.so.%d",
                         (int)root, rt, major);
                root -= strlen("/nvidia"); /* site-packages */
                snprintf(cand[nc++], sizeof cand[0], "%.*s/torch/lib/libcupti.so.%d", (int)root, rt,
                         major);
            }
            if (ends_with(rt, n, "/lib64"))
                snprintf(cand[nc++], sizeof cand[0], "%.*s/extras/CUPTI/lib64/libcupti.so.%d",
                         (int)(n - 6), rt, major);
            for (size_t i = 0; i < nc; i++) {
                void *h = try_open(cand[i]);
                if (h)
                    return h;
            }
        }
    }
    /* 3. a toolkit's: next to the driver, CUDA_HOME/CUDA_PATH, the library path, the usual
     * places; of the runtime's major first when one is loaded */
    int majors[2] = {major > 0 && major != CUPTI_API_VERSION / 10000 ? major : 0,
                     CUPTI_API_VERSION / 10000};
    for (int mi = 0; mi < 2; mi++) {
        if (!majors[mi])
            continue;
        char soname[32];
        snprintf(soname, sizeof soname, "libcupti.so.%d", majors[mi]);
        char dir[4000];
        if (gmp_driver_dir(dir, sizeof dir) == 0) {
            snprintf(path, sizeof path, "%.4000s/%s", dir, soname);
            void *h = try_open(path);
            if (h)
                return h;
        }
        const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
        for (size_t i = 0; i < 2; i++) {
            if (!homes[i] || !*homes[i])
                continue;
            const char *subs[] = {"lib64", "extras/CUPTI/lib64", "lib"};
            for (size_t j = 0; j < 3; j++) {
                snprintf(path, sizeof path, "%.3000s/%s/%s", homes[i], subs[j], soname);
                void *h = try_open(path);
                if (h)
                    return h;
            }
        }
        const char *places[] = {"", "/usr/local/cuda/lib64/", "/usr/local/cuda/extras/CUPTI/lib64/",
                                "/usr/lib/x86_64-linux-gnu/"};
        for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
            snprintf(path, sizeof path, "%s%s", places[i], soname);
            void *h = try_open(path);
            if (h)
                return h;
        }
    }
    void *h = try_open("libcupti.so");
    if (h)
        return h;
    if (major > 0 && major != CUPTI_API_VERSION / 10000)
        snprintf(why, whylen,
                 "cannot profile: libcupti.so.%d (for the program's CUDA %d runtime %s) not "
                 "found beside the runtime, in a wheel's nvidia/cuda_cupti/lib or torch/lib, next "
                 "to libcuda, in CUDA_HOME, on the library path or in /usr/local/cuda; use "
                 "--cupti PATH",
                 major, major, rt);
    else
        snprintf(why, whylen,
                 "cannot profile: %s not found (looked beside the CUDA runtime, next to libcuda, "
                 "in CUDA_HOME, on the library path and in /usr/local/cuda; use --cupti PATH)",
                 CUPTI_SONAME);
    return NULL;
}

static void flusher_start(unsigned ms);
static void measure_clock_offset(void);
static int flusher_flush; /* the flush thread asks CUPTI for activity buffers */

/* Activity record layouts the agent reads (CUpti_ActivityMemory4 for MEMORY2,
 * CUpti_ActivityMemoryPool3 for MEMORY_POOL, cupti_activity.h). CUPTI 12.2 to 12.9 (API versions
 * 20 to 28, cupti_version.h) deliver CUpti_ActivityMemory3 / CUpti_ActivityMemoryPool2 (or the
 * newer ones), kept in cupti_activity_deprecated.h; records only grow at their end (Memory4 appends
 * `source`, MemoryPool3 `isManagedPool`), and the static assertions below prove that every field
 * the agent reads is at the same offset in both. isManagedPool is read only from CUPTI 13 on.
 * Versions before 12.2 are not taken (their MEMORY2 records are CUpti_ActivityMemory2, whose
 * prefix differs); nor are later majors than the agent's (not seen yet). */
#define SAME_FIELD(a, b, f) _Static_assert(offsetof(a, f) == offsetof(b, f), #f " moved")
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, kind);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryOperationType);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryKind);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, correlationId);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, address);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, bytes);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, timestamp);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, deviceId);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, streamId);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, name);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryPoolConfig.memoryPoolType);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryPoolConfig.address);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryPoolConfig.pool.size);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, kind);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, memoryPoolOperationType);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, memoryPoolType);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, deviceId);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, address);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, size);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, timestamp);

static int activity_layout_ok(uint32_t ver)
{
    return (ver >= 20 && ver < 10000) || ver / 10000 == CUPTI_API_VERSION / 10000;
}

#define SYM(field, name) (*(void **)&C.field = dlsym(C.lib, name))

int gmp_cupti_start(const gmp_sink *sink, const gmp_cupti_opts *o, char *why, size_t whylen)
{
    S = sink;
    why[0] = 0;
    tl.late_window = 1; /* the driver's thread, maybe inside a call (late injection) */
    C.lib = load_cupti(o->path, why, whylen);
    if (!C.lib)
        return -1;
    SYM(Subscribe, "cuptiSubscribe");
    SYM(Subscribe_v2, "cuptiSubscribe_v2");
    SYM(Unsubscribe, "cuptiUnsubscribe");
    SYM(EnableCallback, "cuptiEnableCallback");
    SYM(EnableDomain, "cuptiEnableDomain");
    SYM(GetResultString, "cuptiGetResultString");
    SYM(GetVersion, "cuptiGetVersion");
    SYM(GetTimestamp, "cuptiGetTimestamp");
    SYM(GetDeviceId, "cuptiGetDeviceId");
    SYM(GetStreamIdEx, "cuptiGetStreamIdEx");
    SYM(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
    SYM(ActivityEnable, "cuptiActivityEnable");
    SYM(ActivityDisable, "cuptiActivityDisable");
    SYM(ActivityFlushAll, "cuptiActivityFlushAll");
    SYM(ActivityGetNextRecord, "cuptiActivityGetNextRecord");
    SYM(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
    if ((!C.Subscribe && !C.Subscribe_v2) || !C.EnableCallback || !C.EnableDomain ||
        !C.Unsubscribe) {
        snprintf(why, whylen, "cannot profile: the CUPTI library found lacks cuptiSubscribe");
        return -1;
    }
    *(void **)&D.DeviceGetName = gmp_driver_sym("cuDeviceGetName");
    *(void **)&D.DeviceTotalMem = gmp_driver_sym("cuDeviceTotalMem_v2");
    *(void **)&D.DeviceGetAttribute = gmp_driver_sym("cuDeviceGetAttribute");
    *(void **)&D.DeviceGetUuid = gmp_driver_sym("cuDeviceGetUuid_v2");
    if (!D.DeviceGetUuid)
        *(void **)&D.DeviceGetUuid = gmp_driver_sym("cuDeviceGetUuid");

    for (size_t i = 0; i < NAPIS; i++) {
        if (apis[i].cbid >= MAX_CBID)
            continue;
        if (apis[i].dom == CUPTI_CB_DOMAIN_RUNTIME_API)
            rt_index[apis[i].cbid] = (uint8_t)(i + 1);
        else
            drv_index[apis[i].cbid] = (uint8_t)(i + 1);
    }

    uint32_t ver = 0;
    if (C.GetVersion)
        C.GetVersion(&ver);
    runtime_version = ver;

    CUptiResult r;
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2] = "";
    if (C.Subscribe_v2) {
        CUpti_SubscriberParams sp;
        memset(&sp, 0, sizeof sp);
        sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        sp.subscriberName = "gpumemprof";
        sp.oldSubscriberName = holder;
        sp.oldSubscriberSize = sizeof holder;
        r = C.Subscribe_v2(&sub, on_callback, NULL, &sp);
    } else {
        r = C.Subscribe(&sub, on_callback, NULL);
    }
    if (r != CUPTI_SUCCESS) {
        /* CUPTI prefixes the holder's own name with "CUPTI for " (cupti_callbacks.h) */
        const char *who = holder;
        if (!strncmp(who, "CUPTI for ", 10) && who[10])
            who += 10;
        if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            snprintf(why, whylen,
                     "cannot profile: CUPTI is already in use by %s (CUPTI allows one subscriber; "
                     "run without the other profiler)",
                     who[0] ? who : "another tool");
        else
            snprintf(why, whylen, "cannot profile: cuptiSubscribe failed: %s", result_str(r));
        return -1;
    }
    /* One callback per API. When one of the original memory APIs (cudaMalloc ... cuArrayDestroy,
     * which every CUPTI since CUDA 11.2 has) cannot be enabled, the whole domain is enabled instead
     * (on_api looks every call up in its table; the others cost a lookup); when that fails too,
     * the loss is declared: an error line (even under --quiet) and a NOTICE. A later API that an
     * older CUPTI lacks is only a warning. */
    int core_failed[2] = {0, 0}, other_failed = 0;
    size_t ncore = 0;
    for (size_t i = 0; i < NAPIS && !capture_first; i++)
        if (apis[i].op == OP_EVENT_RECORD)
            capture_first = i;
    for (size_t i = 0; i < NAPIS && !ncore; i++)
        if (!strcmp(apis[i].name, "cudaMallocMipmappedArray"))
            ncore = i;
    for (size_t i = 0; i < NAPIS && (!capture_first || i < capture_first); i++) {
        if (C.EnableCallback(1, sub, apis[i].dom, apis[i].cbid) == CUPTI_SUCCESS)
            continue;
        if (i < ncore)
            core_failed[apis[i].dom == CUPTI_CB_DOMAIN_DRIVER_API]++;
        else
            other_failed++;
    }
    *(void **)&G.GetAttr = gmp_driver_sym("cuDeviceGetGraphMemAttribute");
    *(void **)&G.PrimaryCtxGetState = gmp_driver_sym("cuDevicePrimaryCtxGetState");
    const CUpti_CallbackDomain doms[2] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};
    for (int d = 0; d < 2; d++) {
        if (!core_failed[d])
            continue;
        if (C.EnableDomain(1, sub, doms[d]) == CUPTI_SUCCESS) {
            sink->log("%d %s memory API callbacks could not be enabled one by one; every %s API "
                      "callback is enabled instead (slower)",
                      core_failed[d], d ? "driver" : "runtime", d ? "driver" : "runtime");
            continue;
        }
        char msg[240];
        snprintf(msg, sizeof msg,
                 "%s memory API calls are not recorded: CUPTI refused their callbacks (%d "
                 "cuptiEnableCallback calls and cuptiEnableDomain failed)",
                 d ? "driver" : "runtime", core_failed[d]);
        if (sink->error)
            sink->error("%s", msg);
        gmp_wthread *t = sink->enter();
        if (t) {
            gmp_rec n = {.type = GMP_REC_NOTICE};
            n.u.notice.severity = GMP_NOTICE_ERROR;
            n.u.notice.message = (gmp_str){msg, (uint32_t)strlen(msg)};
            emit(t, &n);
            sink->leave();
        }
    }
    if (other_failed)
        sink->log("%d newer memory API callbacks could not be enabled (an older CUPTI?); their "
                  "calls are not recorded",
                  other_failed);
    const CUpti_CallbackId res_ids[] = {
        CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
        CUPTI_CBID_RESOURCE_STREAM_CREATED,  CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING,
        CUPTI_CBID_RESOURCE_MODULE_LOADED,   CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING};
    for (size_t i = 0; i < sizeof res_ids / sizeof res_ids[0]; i++)
        C.EnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, res_ids[i]);

    atomic_store(&active, 1);

    /* activity records, only from a CUPTI whose record layouts we were built with */
    /* MEMORY2 reports every allocation and free again (128 bytes each): a program allocating
     * from 8 threads at once keeps 7-9 one-MiB buffers in flight, so 8 MiB dropped records */
    act_limit = o->activity_bytes ? o->activity_bytes : (32u << 20);
    if (o->activity) {
        if (!activity_layout_ok(ver)) {
            char msg[240];
            snprintf(msg, sizeof msg,
                     "activity records disabled: CUPTI API version %u found; the agent reads "
                     "activity records of CUPTI 12.2 to 12.9 (20 to 28) and %u.x; static device "
                     "memory and pool sizes are not recorded",
                     ver, (unsigned)CUPTI_API_VERSION / 10000);
            sink->log("%s", msg);
            gmp_wthread *t = sink->enter();
            if (t) {
                gmp_rec n = {.type = GMP_REC_NOTICE};
                n.u.notice.severity = GMP_NOTICE_WARNING;
                n.u.notice.message = (gmp_str){msg, (uint32_t)strlen(msg)};
                emit(t, &n);
                sink->leave();
            }
        } else if (C.ActivityRegisterCallbacks && C.ActivityEnable && C.ActivityGetNextRecord &&
                   C.ActivityRegisterCallbacks(buf_requested, buf_completed) == CUPTI_SUCCESS) {
            measure_clock_offset();
            int a1 = C.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2) == CUPTI_SUCCESS;
            int a2 = C.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL) == CUPTI_SUCCESS;
            activity_on = a1 || a2;
            memory2_on = a1;
            if (!a1 || !a2)
                sink->log("activity records partly unavailable (MEMORY2: %s, MEMORY_POOL: %s)",
                          a1 ? "on" : "off", a2 ? "on" : "off");
        }
    }
    /* the flush thread also describes devices: it runs without activity records too */
    flusher_flush = activity_on && o->flush_ms;
    flusher_start(o->flush_ms ? o->flush_ms : 1000);
    return 0;
}

/* ---- the flush thread ----
 * Every flush interval: describes devices seen by callbacks (see describe_device), re-measures the
 * CUPTI clock's offset to ours, and asks CUPTI for the activity buffers whose records are complete
 * (cuptiActivityFlushAll(0): cupti_activity.h says the default flush "can be done at a regular
 * interval in a separate thread" and returns buffers that "need not be full"; the forced flag is
 * for the end, "in the at-exit handler", and is used only by gmp_cupti_stop). */

static pthread_t flusher;
static atomic_int flusher_running;
static int flusher_stop, flusher_kick;
static unsigned flusher_ms;
static pthread_mutex_t flusher_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flusher_cond;

static void flusher_wake(void)
{
    if (!atomic_load(&flusher_running))
        return; /* the flush thread takes it at its next interval, or the stop does */
    pthread_mutex_lock(&flusher_lock);
    flusher_kick = 1;
    pthread_cond_signal(&flusher_cond);
    pthread_mutex_unlock(&flusher_lock);
}

/* CUPTI timestamps (CLOCK_REALTIME on Linux, cupti_activity.h at
 * cuptiActivityRegisterTimestampCallback) to the trace clock (CLOCK_MONOTONIC): the offset is
 * measured at start and again before every flush, so a realtime clock adjusted while the program
 * runs (NTP) moves records by at most the adjustment within one interval. */
static void measure_clock_offset(void)
{
    uint64_t c0 = 0;
    if (C.GetTimestamp && C.GetTimestamp(&c0) == CUPTI_SUCCESS && c0)
        atomic_store(&clock_offset, (int64_t)gmp_clock_ns() - (int64_t)c0);
}

static void *flusher_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&flusher_lock);
    while (!flusher_stop) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_sec += flusher_ms / 1000;
        dl.tv_nsec += (long)(flusher_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_nsec -= 1000000000L;
            dl.tv_sec++;
        }
        while (!flusher_stop && !flusher_kick &&
               pthread_cond_timedwait(&flusher_cond, &flusher_lock, &dl) == 0)
            ;
        if (flusher_stop)
            break;
        int kicked = flusher_kick;
        flusher_kick = 0;
        pthread_mutex_unlock(&flusher_lock);
        describe_pending();
        graph_mem_poll();
        /* a driver allocation held back (late injection) for half an interval has no runtime
         * call to wait for: written, so that it stays within the writer's SYNC lag */
        if (atomic_load_explicit(&late_state, memory_order_acquire) == 1 &&
            gmp_clock_ns() - late_rec.time_ns > (uint64_t)flusher_ms * 500000ull)
            late_release(NULL, 0);
        if (!kicked && flusher_flush && C.ActivityFlushAll) {
            measure_clock_offset();
            C.ActivityFlushAll(0);
        }
        pthread_mutex_lock(&flusher_lock);
    }
    pthread_mutex_unlock(&flusher_lock);
    return NULL;
}

static void flusher_start(unsigned ms)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&flusher_cond, &ca);
    pthread_condattr_destroy(&ca);
    flusher_ms = ms;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&flusher, NULL, flusher_main, NULL) == 0)
        atomic_store(&flusher_running, 1);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void flusher_join(void)
{
    if (!flusher_running)
        return;
    pthread_mutex_lock(&flusher_lock);
    flusher_stop = 1;
    pthread_cond_signal(&flusher_cond);
    pthread_mutex_unlock(&flusher_lock);
    pthread_join(flusher, NULL);
    atomic_store(&flusher_running, 0);
}

void gmp_cupti_flush(void)
{
    if (activity_on && C.ActivityFlushAll)
        C.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

void gmp_cupti_stop(void)
{
    if (!atomic_load(&active))
        return;
    late_release(NULL, 0); /* a driver allocation still held (late injection) */
    flusher_join();
    describe_pending();
    graph_mem_poll();
    measure_clock_offset();
    gmp_cupti_flush();
    describe_pending(); /* devices of the last activity records */
    graph_mem_poll();   /* again: the last MEMORY2 records may have raised the graph pools' floor */
    atomic_store(&active, 0);
    if (activity_on && C.ActivityDisable) {
        C.ActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2);
        C.ActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    }
}
