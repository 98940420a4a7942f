/* What the simulator models beyond allocations, checked against the headers' comments: events,
 * stream priorities and the per-thread default stream, device flags and an H100's properties,
 * mapped host memory, stream capture (no memory at capture), graph memory nodes and the graph
 * memory pool (memory at launch, kept until cudaDeviceGraphMemTrim), host pools, mipmapped arrays,
 * IPC handles (not openable in their own process), and cudaDeviceReset (pool memory survives,
 * arrays do not).
 * The injection log (expected/c_model.txt) shows every call's callback and each MEMORY2 record. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "sim_test_util.h"

#define MIB (1024ull * 1024ull)

static uint64_t graph_attr(enum cudaGraphMemAttributeType a)
{
    uint64_t v = 0;
    CHECK(cudaDeviceGetGraphMemAttribute(0, a, &v), cudaSuccess);
    return v;
}

int main(void)
{
    /* device flags before the context exists; cudaDeviceMapHost is always reported */
    CHECK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
    unsigned flags = 0;
    CHECK(cudaGetDeviceFlags(&flags), cudaSuccess);
    EXPECT(flags == (cudaDeviceScheduleBlockingSync | cudaDeviceMapHost));

    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    EXPECT(prop.major == 9 && prop.minor == 0 && prop.multiProcessorCount == 132);
    EXPECT(prop.canMapHostMemory == 1 && prop.unifiedAddressing == 1 && prop.managedMemory == 1);
    EXPECT(prop.memoryPoolsSupported == 1 && prop.l2CacheSize == 50 * 1024 * 1024);

    /* streams: priorities clamp to [greatest, least] = [-5, 0]; per-thread stream is valid */
    int least = 1, greatest = 1;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    EXPECT(least == 0 && greatest == -5);
    cudaStream_t hi;
    CHECK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, -100), cudaSuccess);
    int prio = 0;
    CHECK(cudaStreamGetPriority(hi, &prio), cudaSuccess);
    EXPECT(prio == -5);
    CHECK(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    CHECK(cudaStreamQuery(cudaStreamLegacy), cudaSuccess);

    /* events: timing, and no timing with cudaEventDisableTiming */
    cudaEvent_t e0, e1, nt;
    CHECK(cudaEventCreate(&e0), cudaSuccess);
    CHECK(cudaEventCreate(&e1), cudaSuccess);
    CHECK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming), cudaSuccess);
    CHECK(cudaEventRecord(e0, hi), cudaSuccess);
    CHECK(cudaEventRecord(e1, hi), cudaSuccess);
    CHECK(cudaEventRecord(nt, hi), cudaSuccess);
    CHECK(cudaEventSynchronize(e1), cudaSuccess);
    float ms = -1;
    CHECK(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
    EXPECT(ms >= 0);
    CHECK(cudaEventElapsedTime(&ms, e0, nt), cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamWaitEvent(cudaStreamPerThread, e1, 0), cudaSuccess);

    /* mapped host memory: the device pointer is the host pointer (unified addressing) */
    void *h = NULL, *dh = NULL;
    CHECK(cudaHostAlloc(&h, 4096, cudaHostAllocMapped), cudaSuccess);
    CHECK(cudaHostGetDevicePointer(&dh, h, 0), cudaSuccess);
    EXPECT(dh == h);
    CHECK(cudaHostGetDevicePointer(&dh, (char *)h + 100, 0), cudaSuccess);
    EXPECT(dh == (char *)h + 100);
    CHECK(cudaFreeHost(h), cudaSuccess);

    /* capture: cudaMallocAsync gives an address but takes no memory until a launch */
    size_t free0 = 0, total = 0;
    CHECK(cudaMemGetInfo(&free0, &total), cudaSuccess);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    enum cudaStreamCaptureStatus cs;
    CHECK(cudaStreamIsCapturing(s, &cs), cudaSuccess);
    EXPECT(cs == cudaStreamCaptureStatusActive);
    void *g = NULL;
    CHECK(cudaMallocAsync(&g, 3 * MIB, s), cudaSuccess);
    EXPECT(g != NULL);
    CHECK(cudaMemsetAsync(g, 0, 3 * MIB, s), cudaSuccess);
    CHECK(cudaFreeAsync(g, s), cudaSuccess);
    cudaGraph_t graph;
    CHECK(cudaStreamEndCapture(s, &graph), cudaSuccess);
    size_t n = 0;
    CHECK(cudaGraphGetNodes(graph, NULL, &n), cudaSuccess);
    EXPECT(n == 3);
    size_t free1 = 0;
    CHECK(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT(free1 == free0);

    /* an explicit alloc node without a free: memory at launch, kept after the exec is gone */
    cudaGraph_t g2;
    CHECK(cudaGraphCreate(&g2, 0), cudaSuccess);
    struct cudaMemAllocNodeParams ap;
    memset(&ap, 0, sizeof(ap));
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = 5 * MIB;
    cudaGraphNode_t an;
    CHECK(cudaGraphAddMemAllocNode(&an, g2, NULL, 0, &ap), cudaSuccess);
    cudaGraphExec_t x1, x2;
    CHECK(cudaGraphInstantiate(&x1, graph, 0), cudaSuccess);
    CHECK(cudaGraphInstantiate(&x2, g2, 0), cudaSuccess);
    EXPECT(graph_attr(cudaGraphMemAttrReservedMemCurrent) == 0); /* nothing at instantiate */
    CHECK(cudaGraphLaunch(x1, s), cudaSuccess);
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemCurrent) == 4 * MIB); /* 3 MiB in 2 MiB steps */
    CHECK(cudaGraphLaunch(x2, s), cudaSuccess);                    /* reuses nothing: 5 MiB */
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemCurrent) == 4 * MIB + 6 * MIB);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cudaDeviceGraphMemTrim(0), cudaSuccess); /* the freed 4 MiB goes back */
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemCurrent) == 6 * MIB);
    CHECK(cudaGraphExecDestroy(x2), cudaSuccess);
    CHECK(cudaFree(ap.dptr), cudaSuccess); /* graph memory may be freed outside a graph */
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemCurrent) == 6 * MIB);
    CHECK(cudaDeviceGraphMemTrim(0), cudaSuccess);
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemCurrent) == 0);
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemHigh) == 10 * MIB);
    CHECK(cudaGraphExecDestroy(x1), cudaSuccess);
    CHECK(cudaGraphDestroy(graph), cudaSuccess);
    CHECK(cudaGraphDestroy(g2), cudaSuccess);

    /* a host pool: real host memory, never the device's */
    struct cudaMemPoolProps pp;
    memset(&pp, 0, sizeof(pp));
    pp.allocType = cudaMemAllocationTypePinned;
    pp.location.type = cudaMemLocationTypeHost;
    cudaMemPool_t hp;
    CHECK(cudaMemPoolCreate(&hp, &pp), cudaSuccess);
    void *hm = NULL;
    CHECK(cudaMallocFromPoolAsync(&hm, 1 * MIB, hp, s), cudaSuccess);
    memset(hm, 0x5a, 1 * MIB); /* the host can use it */
    CHECK(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT(free1 == free0);
    CHECK(cudaFreeAsync(hm, s), cudaSuccess);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cudaMemPoolDestroy(hp), cudaSuccess);

    /* mipmapped array: 3 levels of 64x64 float4 = (64*64 + 32*32 + 16*16) * 16 bytes */
    struct cudaChannelFormatDesc fd = {32, 32, 32, 32, cudaChannelFormatKindFloat};
    cudaMipmappedArray_t mm;
    CHECK(cudaMallocMipmappedArray(&mm, &fd, (struct cudaExtent){64, 64, 0}, 3, 0), cudaSuccess);
    cudaArray_t lv;
    CHECK(cudaGetMipmappedArrayLevel(&lv, mm, 2), cudaSuccess);
    CHECK(cudaGetMipmappedArrayLevel(&lv, mm, 3), cudaErrorInvalidValue);
    CHECK(cudaFreeMipmappedArray(mm), cudaSuccess);

    /* IPC: a handle of cudaMalloc memory, which its own process cannot open */
    void *d = NULL, *o = NULL;
    CHECK(cudaMalloc(&d, 1 * MIB), cudaSuccess);
    cudaIpcMemHandle_t ih;
    CHECK(cudaIpcGetMemHandle(&ih, d), cudaSuccess);
    CHECK(cudaIpcOpenMemHandle(&o, ih, cudaIpcMemLazyEnablePeerAccess),
          cudaErrorDeviceUninitialized);

    /* reset (cuda.h): stream-ordered pool memory survives, arrays and cudaMalloc memory do not */
    void *pa = NULL;
    CHECK(cudaMallocAsync(&pa, 1 * MIB, s), cudaSuccess);
    cudaArray_t arr;
    CHECK(cudaMallocArray(&arr, &fd, 16, 16, 0), cudaSuccess);
    CHECK(cudaEventDestroy(e0), cudaSuccess);
    CHECK(cudaEventDestroy(e1), cudaSuccess);
    CHECK(cudaEventDestroy(nt), cudaSuccess);
    CHECK(cudaStreamDestroy(hi), cudaSuccess);
    CHECK(cudaStreamDestroy(s), cudaSuccess);
    CHECK(cudaDeviceReset(), cudaSuccess);
    CHECK(cudaFreeArray(arr), cudaErrorInvalidResourceHandle);
    CHECK(cudaFree(d), cudaErrorInvalidValue);
    CHECK(cudaFreeAsync(pa, NULL), cudaSuccess);
    return 0;
}
