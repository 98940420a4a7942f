/* gmp_cupti: see gmp_cupti.h.
 *
 * Assumptions about real CUPTI, from the CUDA 13 headers (cupti_callbacks.h, cupti_activity.h):
 * - Callbacks run on the thread that made the API call; CUpti_CallbackData.functionParams points
 *   at the API's *_params struct (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h);
 *   output parameters are valid at CUPTI_API_EXIT. correlationData is shared by the enter and exit
 *   callbacks of one call.
 * - Whether driver callbacks fire for the driver calls the runtime makes internally is not
 *   documented: we count a call once either way, by ignoring driver memory callbacks while the
 *   same thread is inside a runtime memory API (docs/architecture.md, Decisions, "Counting a
 *   user's call once").
 * - MEMORY2 records carry the kinds callbacks cannot see (DEVICE_STATIC, MANAGED_STATIC) and pool
 *   sizes in memoryPoolConfig; everything else they report was already recorded from callbacks
 *   ("reconciled" by kind: API memory comes from callbacks only, so nothing is counted twice).
 * - Activity record layouts (CUpti_ActivityMemory4, CUpti_ActivityMemoryPool3) are trusted for
 *   CUPTI 12.2-12.9 and the major of our headers: the fields read are a common prefix, proved by
 *   static assertions (gmp_cupti_activity_layout_ok, docs/collectors.md).
 * - Activity records reach us in buffers, after the fact (a buffer is delivered when it fills or on
 *   a flush). They keep CUPTI's timestamps, converted to our trace clock with an offset measured at
 *   start and before every flush (cuptiGetTimestamp vs CLOCK_MONOTONIC). So that they are not older
 *   than the last SYNC record the writer wrote (the reader would apply them late, and a peak could
 *   miss static memory), a flush thread asks CUPTI for its completed buffers every flush interval
 *   (the default flush: forced only at the stop), and the agent asks the writer to keep its SYNC
 *   times behind by a few intervals (gmp_writer_opts.sync_lag_ns).
 * - Callbacks call CUPTI only (cuptiGetDeviceId, cuptiGetStreamIdEx), never the driver: devices are
 *   described, and graph memory read, by the flush thread.
 * docs/collectors.md gives, for each point the collector relies on, the header line that shows it
 * and the test on the simulated device that checks it. The collector's files are listed in
 * gmp_cupti_impl.h. */
#include "gmp_driver.h"
#include "gmp_cupti.h"
#include "gmp_cupti_impl.h"

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

static CUpti_SubscriberHandle sub;
static atomic_int active;
static int activity_on;

/* Per-thread state: depth inside runtime memory APIs, the last device looked up. */
static _Thread_local struct {
    int rt_depth;
    uint64_t last_drv_addr; /* address recorded from a driver callback outside any runtime call */
    int late_window;        /* this thread started CUPTI (see "late injection" below) */
    CUcontext ctx;
    int dev;
} tl;

/* ---- what each API does (enum op, api_desc: gmp_cupti_impl.h) ---- */

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
    /* mipmapped arrays, sparse mappings, multicast, imported memory (docs/collectors.md, points 6
     * and 7; gmp_cupti_vmm.c) */
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
    /* pools the driver makes itself, never through cuMemPoolCreate: a device's default (and
     * current) pool, and CUDA 13's default and current pools of a location and allocation type
     * (cuda.h:13578-13647: pinned host, host NUMA and managed pools). Their handles are learnt
     * when the program asks for them, which it must before allocating from them
     * (docs/collectors.md, point 3; gmp_cupti_where.c) */
    RT(cudaDeviceGetDefaultMemPool_v11020, "cudaDeviceGetDefaultMemPool", OP_POOL_LOCATE, 0),
    RT(cudaDeviceGetMemPool_v11020, "cudaDeviceGetMemPool", OP_POOL_LOCATE, 0),
    DRV(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", OP_POOL_LOCATE, 0),
    DRV(cuDeviceGetMemPool, "cuDeviceGetMemPool", OP_POOL_LOCATE, 0),
    RT(cudaMemGetDefaultMemPool_v13000, "cudaMemGetDefaultMemPool", OP_POOL_LOCATE, 0),
    RT(cudaMemGetMemPool_v13000, "cudaMemGetMemPool", OP_POOL_LOCATE, 0),
    RT(cudaMemSetMemPool_v13000, "cudaMemSetMemPool", OP_POOL_LOCATE, 0),
    DRV(cuMemGetDefaultMemPool, "cuMemGetDefaultMemPool", OP_POOL_LOCATE, 0),
    DRV(cuMemGetMemPool, "cuMemGetMemPool", OP_POOL_LOCATE, 0),
    DRV(cuMemSetMemPool, "cuMemSetMemPool", OP_POOL_LOCATE, 0),
    /* CUDA graphs (docs/collectors.md, point 4; gmp_cupti_graphs.c): the event calls are enabled
     * only while a capture runs */
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
    /* the generic node API: a memory node when its type is MEM_ALLOC (cuda.h:21479) */
    RT(cudaGraphAddNode_v12030, "cudaGraphAddNode", OP_GRAPH_MEMNODE, 0),
    DRV(cuGraphAddNode, "cuGraphAddNode", OP_GRAPH_MEMNODE, 0),
    DRV(cuGraphAddNode_v2, "cuGraphAddNode", OP_GRAPH_MEMNODE, 0),
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

static const char *result_str(CUptiResult r)
{
    const char *s = NULL;
    if (gmp_cupti_lib.GetResultString && gmp_cupti_lib.GetResultString(r, &s) == CUPTI_SUCCESS && s)
        return s;
    return "unknown CUPTI error";
}

static int device_of(CUcontext ctx)
{
    if (!ctx)
        return -1;
    if (ctx == tl.ctx)
        return tl.dev;
    uint32_t d = 0;
    if (!gmp_cupti_lib.GetDeviceId || gmp_cupti_lib.GetDeviceId(ctx, &d) != CUPTI_SUCCESS)
        return -1;
    tl.ctx = ctx;
    tl.dev = (int)d;
    gmp_cupti_describe_device((int)d);
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
    if (!gmp_cupti_lib.GetStreamIdEx)
        return 0;
    if ((uintptr_t)stream == 0x1) /* cudaStreamLegacy / CU_STREAM_LEGACY */
        stream = NULL, ptsz = 0;
    else if ((uintptr_t)stream == 0x2) /* cudaStreamPerThread / CU_STREAM_PER_THREAD */
        stream = NULL, ptsz = 1;
    if (!stream && !ptsz)
        return 0; /* the legacy default stream: 0 in the trace */
    if (gmp_cupti_lib.GetStreamIdEx(NULL, (CUstream)(uintptr_t)stream, (uint8_t)ptsz, &id) !=
        CUPTI_SUCCESS)
        return 0;
    return id;
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

static void record_oom(gmp_wthread *t, int dev, uint32_t api, uint64_t size, int result,
                       uint32_t stack)
{
    gmp_rec o = {.type = GMP_REC_OOM};
    o.u.oom.stack = stack;
    o.u.oom.device = dev;
    o.u.oom.api = api;
    o.u.oom.requested = size;
    o.u.oom.range = gmp_nvtx_current_range(gmp_cupti_sink->w);
    o.u.oom.result = result;
    emit(t, &o);
    gmp_writer_flush(gmp_cupti_sink->w, 0); /* ask the writer thread to write it now; do not wait */
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
            *dev = gmp_cupti_stream_device(q->hStream, *dev);
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
            if (!gmp_cupti_pool_where(m->handle, dev, &m->kind))
                *dev = gmp_cupti_stream_device(q->stream, *dev);
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
            *dev = gmp_cupti_stream_device(q->hStream, *dev);
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
            if (!gmp_cupti_pool_where(m->handle, dev, &m->kind))
                *dev = gmp_cupti_stream_device(q->hStream, *dev);
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

/* memory of another process or API whose free is under way on this thread (gmp_cupti_vmm.c) */
static _Thread_local uint64_t tl_imported_free; /* an imported address whose free is under way */

/* CUDA graphs (gmp_cupti_graphs.c): the event callbacks, enabled only while a capture runs */
static size_t capture_first; /* index in apis of the first capture-only API */

static void capture_callbacks(int on)
{
    for (size_t i = capture_first; capture_first && i < NAPIS; i++)
        gmp_cupti_lib.EnableCallback((uint32_t)on, sub, apis[i].dom, apis[i].cbid);
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
                    gmp_cupti_pool_created(r.u.pool.pool, lt, q->poolProps->location.id,
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
                    gmp_cupti_pool_created(r.u.pool.pool, lt, q->poolProps->location.id,
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
        gmp_cupti_pool_where(r.u.pool.pool, &r.u.pool.device, NULL);
    if (a->op == OP_POOL_DESTROY)
        gmp_cupti_pool_gone(r.u.pool.pool);
    emit(t, &r);
}

/* A pool handed out by a successful OP_POOL_LOCATE call: its location and allocation type, as the
 * call's arguments give them (cuda.h: cuDeviceGetDefaultMemPool and cuDeviceGetMemPool give a
 * device's pinned pool; cuMemGetDefaultMemPool/cuMemGetMemPool return the pool of the location
 * and type asked; cuMemSetMemPool's pool "must match" its location and type). The runtime's
 * cudaMemLocation is the driver's CUmemLocation ({type, id}, same values). */
_Static_assert(sizeof(struct cudaMemLocation) == sizeof(CUmemLocation) &&
                   offsetof(struct cudaMemLocation, id) == offsetof(CUmemLocation, id),
               "cudaMemLocation layout");
static void pool_located(const api_desc *a, const void *p)
{
    const void *const *out = NULL; /* where the call wrote the pool */
    const void *pool = NULL;
    const CUmemLocation *loc = NULL;
    int type = CU_MEM_ALLOCATION_TYPE_PINNED, dev = -1;
    if (a->dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        switch (a->cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetDefaultMemPool_v11020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetMemPool_v11020: {
            const cudaDeviceGetMemPool_v11020_params *q = p;
            out = (const void *const *)q->memPool;
            dev = q->device;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMemGetDefaultMemPool_v13000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaMemGetMemPool_v13000: {
            const cudaMemGetMemPool_v13000_params *q = p;
            out = (const void *const *)q->memPool;
            loc = (const CUmemLocation *)q->location;
            type = (int)q->type;
            break;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMemSetMemPool_v13000: {
            const cudaMemSetMemPool_v13000_params *q = p;
            pool = q->memPool;
            loc = (const CUmemLocation *)q->location;
            type = (int)q->type;
            break;
        }
        default: return;
        }
    } else {
        switch (a->cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuDeviceGetDefaultMemPool: {
            const cuDeviceGetDefaultMemPool_params *q = p;
            out = (const void *const *)q->pool_out;
            dev = q->dev;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuDeviceGetMemPool: {
            const cuDeviceGetMemPool_params *q = p;
            out = (const void *const *)q->pool;
            dev = q->dev;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemGetDefaultMemPool:
        case CUPTI_DRIVER_TRACE_CBID_cuMemGetMemPool: {
            const cuMemGetMemPool_params *q = p;
            out = (const void *const *)q->pool;
            loc = q->location;
            type = (int)q->type;
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuMemSetMemPool: {
            const cuMemSetMemPool_params *q = p;
            pool = q->pool;
            loc = q->location;
            type = (int)q->type;
            break;
        }
        default: return;
        }
    }
    if (out)
        pool = *out;
    if (!pool)
        return;
    if (loc)
        gmp_cupti_pool_created((uint64_t)(uintptr_t)pool, (int)loc->type, loc->id, type);
    else
        gmp_cupti_pool_created((uint64_t)(uintptr_t)pool, CU_MEM_LOCATION_TYPE_DEVICE, dev, type);
}
_Static_assert(offsetof(cudaDeviceGetDefaultMemPool_v11020_params, memPool) ==
                       offsetof(cudaDeviceGetMemPool_v11020_params, memPool) &&
                   offsetof(cudaDeviceGetDefaultMemPool_v11020_params, device) ==
                       offsetof(cudaDeviceGetMemPool_v11020_params, device),
               "layout");
_Static_assert(offsetof(cudaMemGetDefaultMemPool_v13000_params, memPool) ==
                       offsetof(cudaMemGetMemPool_v13000_params, memPool) &&
                   offsetof(cudaMemGetDefaultMemPool_v13000_params, location) ==
                       offsetof(cudaMemGetMemPool_v13000_params, location) &&
                   offsetof(cudaMemGetDefaultMemPool_v13000_params, type) ==
                       offsetof(cudaMemGetMemPool_v13000_params, type),
               "layout");
_Static_assert(offsetof(cuMemGetDefaultMemPool_params, pool_out) ==
                       offsetof(cuMemGetMemPool_params, pool) &&
                   offsetof(cuMemGetDefaultMemPool_params, location) ==
                       offsetof(cuMemGetMemPool_params, location) &&
                   offsetof(cuMemGetDefaultMemPool_params, type) ==
                       offsetof(cuMemGetMemPool_params, type),
               "layout");

/* The kinds of API memory whose allocations and frees MEMORY2 reports (cupti_activity.h,
 * CUpti_ActivityMemoryKind: DEVICE, PINNED, MANAGED; pool allocations as DEVICE with their pool's
 * configuration): what tells the agent whether its activity buffers still come back
 * (gmp_cupti_activity.c). Arrays, host registrations and VMM are left out: whether CUPTI reports
 * them is not documented. */
static int memory2_reported(unsigned kind)
{
    return kind == GMP_MEM_DEVICE || kind == GMP_MEM_PINNED_HOST || kind == GMP_MEM_MANAGED ||
           kind == GMP_MEM_ASYNC_POOL;
}

#define ENTER_MARK 0x676d70656e746572ull /* "gmpenter", xor the call's correlation id */

/* Late injection: the driver calls InitializeInjection from inside the first CUDA call, on the
 * calling thread (gmp_agent.c), so a runtime call already under way when we subscribe delivers
 * only its exit. What CUPTI guarantees (cupti_callbacks.h, CUpti_CallbackData): callbacks run on
 * the thread of the call; functionParams' outputs are valid at CUPTI_API_EXIT; correlationData is
 * one slot per call shared by its enter and exit, with no promise of zeroing (so an exit without
 * enter finds junk in it: never read here). What is assumed (not documented): the driver calls a
 * runtime call makes inside it are reported in the driver domain, enter and exit, before the
 * runtime call's exit, on the same thread (the simulator does this). So on the thread
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
    gmp_wthread *t = gmp_cupti_sink->enter();
    if (!t)
        return;
    gmp_wthread_event(t, &r); /* not emit: the live accounting counted it when it was held */
    gmp_cupti_sink->leave();
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
    if (enter && a->op == OP_GRAPH_LAUNCH && gmp_cupti_memory2_on)
        gmp_cupti_launch_seen(cd->correlationId,
                              api_sid(a)); /* before its MEMORY2 records can arrive */
    /* allocations and pool calls are recorded at exit, frees at entry (and at exit on failure) */
    int result = !enter && cd->functionReturnValue ? *(const int *)cd->functionReturnValue : 0;
    if (enter ? a->op != OP_FREE : (a->op == OP_FREE && result == 0))
        return;

    if (a->op >= OP_CAPTURE_BEGIN && a->op <= OP_STREAM_WAIT) {
        if (result == 0 || a->op == OP_CAPTURE_END) { /* an invalidated capture ends too */
            int turn = gmp_cupti_capture_event(a, cd->functionParams);
            if (turn)
                capture_callbacks(turn > 0);
        }
        return;
    }
    if (a->kind == GMP_MEM_ASYNC_POOL &&
        atomic_load_explicit(&gmp_cupti_n_capturing, memory_order_relaxed) &&
        gmp_cupti_stream_capturing(async_stream(a, cd->functionParams), gmp_cupti_is_ptsz(a))) {
        /* a memory node of the graph being captured: nothing happens now. Its address is the
         * graph's: a free of it outside the graph is the graph memory's (read from the device's
         * graph memory), so it is remembered like imported memory. */
        if (!enter && result == 0 && a->op == OP_ALLOC && !gmp_cupti_memory2_on) {
            gmp_rec_mem m = {0};
            int d = -1;
            if (alloc_fields(a, cd, &m, &d, 1))
                gmp_cupti_imported_add(m.address);
        }
        return;
    }
    if (a->op == OP_GRAPH_MEMNODE) {
        if (gmp_cupti_memory2_on || result != 0) {
            /* the launches' MEMORY2 records give this address its allocation */
        } else if (rt && a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddNode_v12030) {
            const cudaGraphAddNode_v12030_params *q = cd->functionParams;
            if (q->nodeParams && q->nodeParams->type == cudaGraphNodeTypeMemAlloc)
                gmp_cupti_imported_add((uint64_t)(uintptr_t)q->nodeParams->alloc.dptr);
        } else if (rt) {
            const cudaGraphAddMemAllocNode_v11040_params *q = cd->functionParams;
            if (q->nodeParams)
                gmp_cupti_imported_add((uint64_t)(uintptr_t)q->nodeParams->dptr);
        } else if (a->cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode ||
                   a->cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2) {
            /* both ABIs end with the node's parameters (generated_cuda_meta.h) */
            const CUgraphNodeParams *np =
                a->cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode
                    ? ((const cuGraphAddNode_params *)cd->functionParams)->nodeParams
                    : ((const cuGraphAddNode_v2_params *)cd->functionParams)->nodeParams;
            if (np && np->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
                gmp_cupti_imported_add((uint64_t)np->alloc.dptr);
        } else {
            const cuGraphAddMemAllocNode_params *q = cd->functionParams;
            if (q->nodeParams)
                gmp_cupti_imported_add((uint64_t)q->nodeParams->dptr);
        }
        return;
    }
    if (a->op == OP_GRAPH_LAUNCH) {
        if (result == 0) {
            const two_ptrs *q = cd->functionParams;
            gmp_cupti_graph_launched(gmp_cupti_stream_device(q->b, device_of(cd->context)));
        }
        return;
    }
    gmp_wthread *t = gmp_cupti_sink->enter();
    if (!t)
        return;
    int dev = device_of(cd->context);
    if (!rt && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemRelease &&
        gmp_cupti_vmm_release(t, a, cd, enter, result)) {
        gmp_cupti_sink->leave();
        return;
    }
    if (!rt && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemUnmap && enter)
        gmp_cupti_vmm_unmap(t, a, cd); /* then the mapping's own FREE below */
    if (a->op == OP_FREE) {
        if (enter) {
            /* recorded at entry, before the memory is released: an address reused by another
             * thread is always freed before it is allocated again in the trace */
            gmp_rec r = {.type = GMP_REC_FREE};
            r.u.mem.kind = a->kind;
            r.u.mem.api = api_sid(a);
            r.u.mem.correlation = cd->correlationId;
            r.u.mem.range = gmp_nvtx_current_range(gmp_cupti_sink->w);
            if (rt)
                rt_free_fields(cbid, cd, &r.u.mem, &dev);
            else
                drv_free_fields(cbid, cd, &r.u.mem, &dev);
            r.u.mem.device = dev;
            if (r.u.mem.address && gmp_cupti_imported_take(r.u.mem.address)) {
                tl_imported_free = r.u.mem.address;         /* not ours: no record */
            } else if (r.u.mem.address || r.u.mem.handle) { /* cudaFree(NULL) frees nothing */
                /* no stack: the question is where memory was allocated, and unwinding costs
                 * about a microsecond; a failed free (below) keeps its stack */
                emit(t, &r);
                if (gmp_cupti_memory2_on && memory2_reported(a->kind))
                    gmp_cupti_activity_owed();
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
                gmp_cupti_imported_add(r.u.mem.address); /* the free of imported memory failed */
                tl_imported_free = 0;
            } else if (r.u.mem.address || r.u.mem.handle) {
                r.u.mem.stack = gmp_stack_current();
                emit(t, &r);
                if (gmp_cupti_memory2_on && memory2_reported(a->kind))
                    gmp_cupti_activity_unowed(); /* a failed free has no MEMORY2 record */
            }
        }
    } else {
        if (a->op == OP_ALLOC) {
            gmp_rec r = {.type = GMP_REC_ALLOC};
            r.u.mem.kind = a->kind;
            r.u.mem.api = api_sid(a);
            r.u.mem.correlation = cd->correlationId;
            r.u.mem.range = gmp_nvtx_current_range(gmp_cupti_sink->w);
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
                    gmp_live_rec(&r);           /* live now, whenever the trace gets it */
                    late_rec = r;
                    atomic_store_explicit(&late_state, 1, memory_order_release);
                } else {
                    emit(t, &r);
                }
                if (gmp_alert_on && result == 0)
                    gmp_alert_alloc(t, &r.u.mem);
                if (result == 0 && gmp_cupti_memory2_on && memory2_reported(a->kind))
                    gmp_cupti_activity_owed();
                if (!rt && result == 0)
                    tl.last_drv_addr = r.u.mem.address;
                if (!rt && result == 0 && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate)
                    gmp_cupti_vmm_created(r.u.mem.handle, r.u.mem.size, dev, 0);
                else if (!rt && result == 0 && a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap)
                    gmp_cupti_vmm_mapped(r.u.mem.address, r.u.mem.size, r.u.mem.handle);
                if (result != 0 && is_oom(dom, result))
                    record_oom(t, dev, r.u.mem.api, r.u.mem.size, result, r.u.mem.stack);
            }
        } else if (a->op == OP_POOL_LOCATE) {
            if (result == 0 && cd->functionParams)
                pool_located(a, cd->functionParams);
        } else if (a->op == OP_VMM_RETAIN) {
            const cuMemRetainAllocationHandle_params *q = cd->functionParams;
            if (result == 0 && q->handle)
                gmp_cupti_vmm_retained((uint64_t)*q->handle);
        } else if (a->op == OP_IMPORT_ADDR) {
            if (result == 0)
                gmp_cupti_imported_add(gmp_cupti_import_address(a, cd->functionParams));
        } else if (a->op == OP_IMPORT_CLOSE) {
            if (result == 0)
                gmp_cupti_imported_take(gmp_cupti_import_address(a, cd->functionParams));
        } else if (a->op == OP_ARRAY_MAP) {
            if (result == 0)
                gmp_cupti_array_map(t, a, cd);
        } else if (a->op == OP_VMM_MULTICAST) {
            /* a multicast object: mapped and released like memory, but its memory is what is
             * bound to it (cuMulticastBindMem of handles already recorded) */
            const cuMulticastCreate_params *q = cd->functionParams;
            if (result == 0 && q->mcHandle)
                gmp_cupti_vmm_created((uint64_t)*q->mcHandle, 0, -1, GMP_HANDLE_IMPORTED);
        } else if (a->op == OP_VMM_IMPORT) {
            /* another process's memory (or an object's): counted for its releases and mappings,
             * never recorded as this process's allocation */
            const cuMemImportFromShareableHandle_params *q = cd->functionParams;
            if (result == 0 && q->handle)
                gmp_cupti_vmm_created((uint64_t)*q->handle, 0, -1, GMP_HANDLE_IMPORTED);
        } else {
            pool_event(t, a, cd, dev, result);
        }
    }
    gmp_cupti_sink->leave();
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
        if (rd && rd->context && gmp_cupti_lib.GetDeviceId &&
            gmp_cupti_lib.GetDeviceId(rd->context, &d) == CUPTI_SUCCESS)
            dev = (int)d;
        r.u.resource.handle = (uint64_t)(uintptr_t)(rd ? rd->context : NULL);
        if (dev >= 0)
            gmp_cupti_describe_device(dev);
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
        if (rd && rd->context && gmp_cupti_lib.GetDeviceId &&
            gmp_cupti_lib.GetDeviceId(rd->context, &d) == CUPTI_SUCCESS)
            dev = (int)d;
        r.u.resource.handle =
            rd && rd->resourceHandle.stream ? stream_id(rd->resourceHandle.stream, 0) : 0;
        if (rd)
            gmp_cupti_stream_seen(rd->resourceHandle.stream, dev,
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
        if (rd && rd->context && gmp_cupti_lib.GetDeviceId &&
            gmp_cupti_lib.GetDeviceId(rd->context, &d) == CUPTI_SUCCESS)
            dev = (int)d;
        r.u.resource.handle = md ? md->moduleId : 0;
        break;
    }
    default: return;
    }
    r.u.resource.device = dev;
    gmp_wthread *t = gmp_cupti_sink->enter();
    if (!t)
        return;
    emit(t, &r);
    gmp_cupti_sink->leave();
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

static int flusher_flush; /* the flush thread asks CUPTI for activity buffers */

/* The flush thread's work, every flush interval (see gmp_cupti_flush.c), or when a callback woke
 * it (kicked: no activity flush then). */
static void flush_tick(int kicked, unsigned interval_ms)
{
    gmp_cupti_describe_pending();
    gmp_cupti_graph_mem_poll();
    /* a driver allocation held back (late injection) for half an interval has no runtime
     * call to wait for: written, so that it stays within the writer's SYNC lag */
    if (atomic_load_explicit(&late_state, memory_order_acquire) == 1 &&
        gmp_clock_ns() - late_rec.time_ns > (uint64_t)interval_ms * 500000ull)
        late_release(NULL, 0);
    if (!kicked && flusher_flush && gmp_cupti_lib.ActivityFlushAll) {
        gmp_cupti_measure_clock_offset();
        gmp_cupti_lib.ActivityFlushAll(0);
    }
}

/* The callback ids CUDA 13.0 added: the enums only append, and the first new ids are
 * cudaMemPrefetchBatchAsync_v13000 (runtime) and cuMemPrefetchBatchAsync (driver). */
static int since_cuda13(const api_desc *a)
{
    return a->dom == CUPTI_CB_DOMAIN_RUNTIME_API
               ? a->cbid >= CUPTI_RUNTIME_TRACE_CBID_cudaMemPrefetchBatchAsync_v13000
               : a->cbid >= CUPTI_DRIVER_TRACE_CBID_cuMemPrefetchBatchAsync;
}

#define SYM(field, name) (*(void **)&gmp_cupti_lib.field = dlsym(gmp_cupti_lib.lib, name))

int gmp_cupti_start(const gmp_sink *sink, const gmp_cupti_opts *o, char *why, size_t whylen)
{
    gmp_cupti_sink = sink;
    why[0] = 0;
    tl.late_window = 1; /* the driver's thread, maybe inside a call (late injection) */
    gmp_cupti_lib.lib = gmp_cupti_load(o->path, gmp_cupti_sink, why, whylen);
    if (!gmp_cupti_lib.lib)
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
    if ((!gmp_cupti_lib.Subscribe && !gmp_cupti_lib.Subscribe_v2) ||
        !gmp_cupti_lib.EnableCallback || !gmp_cupti_lib.EnableDomain ||
        !gmp_cupti_lib.Unsubscribe) {
        snprintf(why, whylen, "cannot profile: the CUPTI library found lacks cuptiSubscribe");
        return -1;
    }
    gmp_cupti_devices_init();

    for (size_t i = 0; i < NAPIS; i++) {
        if (apis[i].cbid >= MAX_CBID)
            continue;
        if (apis[i].dom == CUPTI_CB_DOMAIN_RUNTIME_API)
            rt_index[apis[i].cbid] = (uint8_t)(i + 1);
        else
            drv_index[apis[i].cbid] = (uint8_t)(i + 1);
    }

    uint32_t ver = 0;
    if (gmp_cupti_lib.GetVersion)
        gmp_cupti_lib.GetVersion(&ver);
    gmp_cupti_api_version = ver;

    CUptiResult r;
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2] = "";
    if (gmp_cupti_lib.Subscribe_v2) {
        CUpti_SubscriberParams sp;
        memset(&sp, 0, sizeof sp);
        sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        sp.subscriberName = "gpumemprof";
        sp.oldSubscriberName = holder;
        sp.oldSubscriberSize = sizeof holder;
        r = gmp_cupti_lib.Subscribe_v2(&sub, on_callback, NULL, &sp);
    } else {
        r = gmp_cupti_lib.Subscribe(&sub, on_callback, NULL);
    }
    if (r != CUPTI_SUCCESS) {
        /* CUPTI prefixes the holder's own name with "CUPTI for " (cupti_callbacks.h) */
        char hint[1400];
        const char *who = holder;
        if (!strncmp(who, "CUPTI for ", 10) && who[10])
            who += 10;
        if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
            snprintf(why, whylen,
                     "cannot profile: CUPTI is already in use by %s (CUPTI allows one subscriber; "
                     "run without the other profiler)",
                     who[0] ? who : "another tool");
        else if (gmp_cupti_driver_hint(ver, hint, sizeof hint))
            snprintf(why, whylen, "cannot profile: cuptiSubscribe failed: %s; %s", result_str(r),
                     hint);
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
        if (gmp_cupti_lib.EnableCallback(1, sub, apis[i].dom, apis[i].cbid) == CUPTI_SUCCESS)
            continue;
        if (ver < 130000 && since_cuda13(&apis[i]))
            continue; /* a CUDA 13 function: no CUPTI 12 knows it, nor does a 12 runtime have it */
        if (i < ncore)
            core_failed[apis[i].dom == CUPTI_CB_DOMAIN_DRIVER_API]++;
        else
            other_failed++;
    }
    gmp_cupti_graphs_init();
    const CUpti_CallbackDomain doms[2] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};
    for (int d = 0; d < 2; d++) {
        if (!core_failed[d])
            continue;
        if (gmp_cupti_lib.EnableDomain(1, sub, doms[d]) == CUPTI_SUCCESS) {
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
        gmp_cupti_lib.EnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, res_ids[i]);

    atomic_store(&active, 1);

    /* activity records, only from a CUPTI whose record layouts we were built with */
    /* MEMORY2 reports every allocation and free again (128 bytes each): a program allocating
     * from 8 threads at once keeps 7-9 one-MiB buffers in flight, so 8 MiB dropped records */
    gmp_cupti_act_limit = o->activity_bytes ? o->activity_bytes : (32u << 20);
    if (o->activity) {
        if (!gmp_cupti_activity_layout_ok(ver)) {
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
        } else if (gmp_cupti_lib.ActivityRegisterCallbacks && gmp_cupti_lib.ActivityEnable &&
                   gmp_cupti_lib.ActivityGetNextRecord &&
                   gmp_cupti_lib.ActivityRegisterCallbacks(
                       gmp_cupti_buf_requested, gmp_cupti_buf_completed) == CUPTI_SUCCESS) {
            gmp_cupti_measure_clock_offset();
            int a1 = gmp_cupti_lib.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2) == CUPTI_SUCCESS;
            int a2 = gmp_cupti_lib.ActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL) == CUPTI_SUCCESS;
            activity_on = a1 || a2;
            gmp_cupti_memory2_on = a1;
            if (!a1 || !a2)
                sink->log("activity records partly unavailable (MEMORY2: %s, MEMORY_POOL: %s)",
                          a1 ? "on" : "off", a2 ? "on" : "off");
        }
    }
    /* the flush thread also describes devices: it runs without activity records too */
    flusher_flush = activity_on && o->flush_ms;
    gmp_cupti_flusher_start(o->flush_ms ? o->flush_ms : 1000, flush_tick);
    return 0;
}

void gmp_cupti_flush(void)
{
    if (activity_on && gmp_cupti_lib.ActivityFlushAll)
        gmp_cupti_lib.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* After the forced flush: another CUPTI client (torch.profiler's Kineto) took the activity
 * buffers (gmp_cupti_activity.c). Said once, on stderr and as a WARNING notice, with what stopped
 * being recorded. */
static void replaced_notice(void)
{
    uint64_t last = 0;
    if (!activity_on || !gmp_cupti_memory2_on || !gmp_cupti_activity_replaced(&last))
        return;
    uint64_t now = gmp_clock_ns();
    double ago = last && now > last ? (double)(now - last) / 1e9 : 0.0;
    char msg[600];
    snprintf(msg, sizeof msg,
             "CUPTI activity records stopped reaching gpumemprof %.3f s before the end: another "
             "CUPTI client in the program (torch.profiler / Kineto, or the program's own) "
             "registered its activity buffers, and CUPTI keeps one pair per process, so the "
             "MEMORY2 and MEMORY_POOL records went to it from then on; static __device__ memory, "
             "pool sizes and graph memory are missing after that point (memory API calls are "
             "still recorded from callbacks; run without the other profiler, or with "
             "--no-activity to say so from the start)",
             ago);
    gmp_cupti_sink->log("%s", msg);
    gmp_wthread *t = gmp_cupti_sink->enter();
    if (t) {
        gmp_rec n = {.type = GMP_REC_NOTICE};
        n.u.notice.severity = GMP_NOTICE_WARNING;
        n.u.notice.message = (gmp_str){msg, (uint32_t)strlen(msg)};
        emit(t, &n);
        gmp_cupti_sink->leave();
    }
}

void gmp_cupti_stop(void)
{
    if (!atomic_load(&active))
        return;
    late_release(NULL, 0); /* a driver allocation still held (late injection) */
    gmp_cupti_flusher_join();
    gmp_cupti_describe_pending();
    gmp_cupti_graph_mem_poll();
    gmp_cupti_measure_clock_offset();
    gmp_cupti_flush();
    replaced_notice();
    gmp_cupti_describe_pending(); /* devices of the last activity records */
    gmp_cupti_graph_mem_poll(); /* again: the last MEMORY2 records may have raised the graph pools'
                                   floor */
    atomic_store(&active, 0);
    if (activity_on && gmp_cupti_lib.ActivityDisable) {
        gmp_cupti_lib.ActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2);
        gmp_cupti_lib.ActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    }
}
