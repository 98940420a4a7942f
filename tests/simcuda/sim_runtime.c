/* simcuda runtime: libcudart.so.13 for tests. Implements the runtime API over the simulated
 * driver's public entry points (so runtime and driver callbacks nest as on a real system), the
 * registration and launch entry points nvcc emits, and per-thread device and last-error state. */
#include "sim_internal.h"

#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_API SIMCUDA_API

/* ------------------------------------------------------------------------------------------ */
/* per-thread state */

static _Thread_local int tl_device;
static _Thread_local cudaError_t tl_last_error;
static atomic_int g_rt_inited;

static pthread_mutex_t g_rt_init_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int tl_rt_initializing;

/* The runtime initializes the driver once; other threads wait for it. The initializing thread may
 * re-enter the runtime from InitializeInjection. */
static void rt_init(void)
{
    if (atomic_load(&g_rt_inited) || tl_rt_initializing)
        return;
    pthread_mutex_lock(&g_rt_init_mu);
    if (!atomic_load(&g_rt_inited)) {
        tl_rt_initializing = 1;
        simcuda_driver_init();
        tl_rt_initializing = 0;
        atomic_store(&g_rt_inited, 1);
    }
    pthread_mutex_unlock(&g_rt_init_mu);
}

static cudaError_t to_rt(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return cudaErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return cudaErrorHostMemoryNotRegistered;
    case CUDA_ERROR_NOT_READY: return cudaErrorNotReady;
    case CUDA_ERROR_FILE_NOT_FOUND: return cudaErrorFileNotFound;
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return cudaErrorPeerAccessAlreadyEnabled;
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: return cudaErrorPeerAccessNotEnabled;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return cudaErrorStreamCaptureUnsupported;
    case CUDA_ERROR_ILLEGAL_STATE: return cudaErrorIllegalState;
    default: return cudaErrorUnknown;
    }
}

/* The primary context of the thread's device, created on first use and made current. */
static cudaError_t rt_ctx(void)
{
    CUcontext cur = simcuda_current_ctx();
    if (cur && cur->magic == SIMCUDA_CTX_MAGIC && cur->active && cur->device == tl_device)
        return cudaSuccess;
    CUcontext c = simcuda_primary_ctx(tl_device, 1);
    if (!c)
        return cudaErrorInvalidDevice;
    simcuda_set_current_ctx(c);
    return cudaSuccess;
}

/* With SIMCUDA_LATE_INJECTION the first call enters before the driver is initialized (and the tool
 * loaded), as the real runtime initializes inside its first call. */
static void rt_init_before_enter(void)
{
    if (!simcuda_late_injection())
        rt_init();
}

#define RT_BEGIN_(fn, ver, paramsptr, sym)                                                         \
    cudaError_t rt_r_ = cudaSuccess;                                                               \
    rt_init_before_enter();                                                                        \
    simcuda_call rt_c_ = {.domain = CUPTI_CB_DOMAIN_RUNTIME_API,                                   \
                          .cbid = CUPTI_RUNTIME_TRACE_CBID_##fn##_##ver,                           \
                          .name = #fn,                                                             \
                          .params = paramsptr,                                                     \
                          .ret = &rt_r_,                                                           \
                          .symbol = sym,                                                           \
                          .ctx = simcuda_current_ctx()};                                           \
    simcuda_api_enter(&rt_c_);                                                                     \
    rt_init()

#define RT_CALL(fn, ver, ...)                                                                      \
    fn##_##ver##_params rt_p_ = {__VA_ARGS__};                                                     \
    RT_BEGIN_(fn, ver, &rt_p_, NULL)

/* launches: symbolName is the kernel's device name at enter and exit */
#define RT_CALL_SYM(sym, fn, ver, ...)                                                             \
    fn##_##ver##_params rt_p_ = {__VA_ARGS__};                                                     \
    RT_BEGIN_(fn, ver, &rt_p_, sym)

#define RT_CALL0(fn, ver) RT_BEGIN_(fn, ver, NULL, NULL)

#define RT_RETURN(expr)                                                                            \
    do {                                                                                           \
        rt_r_ = (expr);                                                                            \
        if (rt_r_ != cudaSuccess)                                                                  \
            tl_last_error = rt_r_;                                                                 \
        simcuda_api_exit(&rt_c_);                                                                  \
        return rt_r_;                                                                              \
    } while (0)

#define RT_NEED_CTX()                                                                              \
    do {                                                                                           \
        cudaError_t e_ = rt_ctx();                                                                 \
        if (e_ != cudaSuccess)                                                                     \
            RT_RETURN(e_);                                                                         \
    } while (0)

/* sim_rt_entry.c and the generated stubs (sim_internal.h): bracketed like RT_CALL/RT_RETURN */
SIMCUDA_HIDDEN void simcuda_rt_begin(simcuda_call *c, unsigned cbid, const char *name,
                                     const void *params, void *ret)
{
    rt_init_before_enter();
    *c = (simcuda_call){.domain = CUPTI_CB_DOMAIN_RUNTIME_API,
                        .cbid = cbid,
                        .name = name,
                        .params = params,
                        .ret = ret,
                        .ctx = simcuda_current_ctx()};
    *(cudaError_t *)ret = cudaSuccess;
    simcuda_api_enter(c);
    rt_init();
}

SIMCUDA_HIDDEN int simcuda_rt_end(simcuda_call *c, int result)
{
    cudaError_t r = (cudaError_t)result;
    *(cudaError_t *)c->ret = r;
    if (r != cudaSuccess)
        tl_last_error = r;
    simcuda_api_exit(c);
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* errors and versions */

RT_API const char *CUDARTAPI cudaGetErrorName(cudaError_t error)
{
    switch (error) {
/* one case per line (clang-format cannot lay out a list of macro calls stably) */
#define E(x)                                                                                       \
    case x: return #x;
        // clang-format off
        E(cudaSuccess)
        E(cudaErrorInvalidValue)
        E(cudaErrorMemoryAllocation)
        E(cudaErrorInitializationError)
        E(cudaErrorInvalidDevice)
        E(cudaErrorDeviceUninitialized)
        E(cudaErrorInvalidResourceHandle)
        E(cudaErrorNotSupported)
        E(cudaErrorHostMemoryAlreadyRegistered)
        E(cudaErrorHostMemoryNotRegistered)
        E(cudaErrorInvalidDevicePointer)
        E(cudaErrorInvalidSymbol)
        E(cudaErrorInvalidDeviceFunction)
        E(cudaErrorInvalidConfiguration)
        E(cudaErrorMissingConfiguration)
        E(cudaErrorNoDevice)
        E(cudaErrorUnknown)
        // clang-format on
#undef E
    default: return "cudaErrorUnknown";
    }
}

RT_API const char *CUDARTAPI cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorDeviceUninitialized: return "invalid device context";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorHostMemoryAlreadyRegistered:
        return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered:
        return "pointer does not correspond to a registered memory region";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorMissingConfiguration: return "__global__ function call is not configured";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return "unknown error";
    }
}

RT_API cudaError_t CUDARTAPI cudaGetLastError(void)
{
    RT_CALL0(cudaGetLastError, v3020);
    rt_r_ = tl_last_error;
    tl_last_error = cudaSuccess;
    simcuda_api_exit(&rt_c_);
    return rt_r_;
}

RT_API cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
    RT_CALL0(cudaPeekAtLastError, v3020);
    rt_r_ = tl_last_error;
    simcuda_api_exit(&rt_c_);
    return rt_r_;
}

RT_API cudaError_t CUDARTAPI cudaDriverGetVersion(int *driverVersion)
{
    RT_CALL(cudaDriverGetVersion, v3020, driverVersion);
    if (!driverVersion)
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(cuDriverGetVersion(driverVersion)));
}

RT_API cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *runtimeVersion)
{
    RT_CALL(cudaRuntimeGetVersion, v3020, runtimeVersion);
    if (!runtimeVersion)
        RT_RETURN(cudaErrorInvalidValue);
    *runtimeVersion = SIMCUDA_RUNTIME_VERSION;
    RT_RETURN(cudaSuccess);
}

/* ------------------------------------------------------------------------------------------ */
/* devices */

RT_API cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    RT_CALL(cudaGetDeviceCount, v3020, count);
    if (!count)
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(cuDeviceGetCount(count)));
}

RT_API cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    RT_CALL(cudaGetDevice, v3020, device);
    if (!device)
        RT_RETURN(cudaErrorInvalidValue);
    *device = tl_device;
    RT_RETURN(cudaSuccess);
}

RT_API cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    RT_CALL(cudaSetDevice, v3020, device);
    if (device < 0 || device >= simcuda_device_count())
        RT_RETURN(cudaErrorInvalidDevice);
    tl_device = device;
    RT_NEED_CTX(); /* CUDA 12+: cudaSetDevice initializes the device's primary context */
    RT_RETURN(cudaSuccess);
}

RT_API cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    RT_CALL(cudaGetDeviceProperties, v12000, prop, device);
    if (!prop)
        RT_RETURN(cudaErrorInvalidValue);
    if (device < 0 || device >= simcuda_device_count())
        RT_RETURN(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof(*prop));
    CUresult r = cuDeviceGetName(prop->name, (int)sizeof(prop->name), device);
    size_t total = 0;
    if (r == CUDA_SUCCESS)
        r = cuDeviceTotalMem(&total, device);
    prop->totalGlobalMem = total;
    CUuuid u;
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetUuid(&u, device);
    memcpy(&prop->uuid, &u, sizeof(u));
#define A(name) simcuda_device_attribute(CU_DEVICE_ATTRIBUTE_##name, device)
    prop->major = A(COMPUTE_CAPABILITY_MAJOR);
    prop->minor = A(COMPUTE_CAPABILITY_MINOR);
    prop->warpSize = A(WARP_SIZE);
    prop->maxThreadsPerBlock = A(MAX_THREADS_PER_BLOCK);
    prop->maxThreadsDim[0] = A(MAX_BLOCK_DIM_X);
    prop->maxThreadsDim[1] = A(MAX_BLOCK_DIM_Y);
    prop->maxThreadsDim[2] = A(MAX_BLOCK_DIM_Z);
    prop->maxGridSize[0] = A(MAX_GRID_DIM_X);
    prop->maxGridSize[1] = A(MAX_GRID_DIM_Y);
    prop->maxGridSize[2] = A(MAX_GRID_DIM_Z);
    prop->multiProcessorCount = A(MULTIPROCESSOR_COUNT);
    prop->sharedMemPerBlock = (size_t)A(MAX_SHARED_MEMORY_PER_BLOCK);
    prop->sharedMemPerBlockOptin = (size_t)A(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    prop->sharedMemPerMultiprocessor = (size_t)A(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    prop->reservedSharedMemPerBlock = (size_t)A(RESERVED_SHARED_MEMORY_PER_BLOCK);
    prop->regsPerBlock = A(MAX_REGISTERS_PER_BLOCK);
    prop->regsPerMultiprocessor = A(MAX_REGISTERS_PER_MULTIPROCESSOR);
    prop->memPitch = (size_t)A(MAX_PITCH);
    prop->totalConstMem = (size_t)A(TOTAL_CONSTANT_MEMORY);
    prop->textureAlignment = (size_t)A(TEXTURE_ALIGNMENT);
    prop->texturePitchAlignment = (size_t)A(TEXTURE_PITCH_ALIGNMENT);
    prop->maxThreadsPerMultiProcessor = A(MAX_THREADS_PER_MULTIPROCESSOR);
    prop->maxBlocksPerMultiProcessor = A(MAX_BLOCKS_PER_MULTIPROCESSOR);
    prop->integrated = A(INTEGRATED);
    prop->canMapHostMemory = A(CAN_MAP_HOST_MEMORY);
    prop->maxTexture1D = A(MAXIMUM_TEXTURE1D_WIDTH);
    prop->maxTexture2D[0] = A(MAXIMUM_TEXTURE2D_WIDTH);
    prop->maxTexture2D[1] = A(MAXIMUM_TEXTURE2D_HEIGHT);
    prop->maxTexture3D[0] = A(MAXIMUM_TEXTURE3D_WIDTH);
    prop->maxTexture3D[1] = A(MAXIMUM_TEXTURE3D_HEIGHT);
    prop->maxTexture3D[2] = A(MAXIMUM_TEXTURE3D_DEPTH);
    prop->maxTextureCubemap = A(MAXIMUM_TEXTURECUBEMAP_WIDTH);
    prop->maxTexture2DLayered[0] = A(MAXIMUM_TEXTURE2D_LAYERED_WIDTH);
    prop->maxTexture2DLayered[1] = A(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT);
    prop->maxTexture2DLayered[2] = A(MAXIMUM_TEXTURE2D_LAYERED_LAYERS);
    prop->surfaceAlignment = (size_t)A(SURFACE_ALIGNMENT);
    prop->concurrentKernels = A(CONCURRENT_KERNELS);
    prop->ECCEnabled = A(ECC_ENABLED);
    prop->pciBusID = A(PCI_BUS_ID);
    prop->pciDeviceID = A(PCI_DEVICE_ID);
    prop->pciDomainID = A(PCI_DOMAIN_ID);
    prop->tccDriver = A(TCC_DRIVER);
    prop->asyncEngineCount = A(ASYNC_ENGINE_COUNT);
    prop->unifiedAddressing = A(UNIFIED_ADDRESSING);
    prop->memoryBusWidth = A(GLOBAL_MEMORY_BUS_WIDTH);
    prop->l2CacheSize = A(L2_CACHE_SIZE);
    prop->persistingL2CacheMaxSize = A(MAX_PERSISTING_L2_CACHE_SIZE);
    prop->accessPolicyMaxWindowSize = A(MAX_ACCESS_POLICY_WINDOW_SIZE);
    prop->streamPrioritiesSupported = A(STREAM_PRIORITIES_SUPPORTED);
    prop->globalL1CacheSupported = A(GLOBAL_L1_CACHE_SUPPORTED);
    prop->localL1CacheSupported = A(LOCAL_L1_CACHE_SUPPORTED);
    prop->managedMemory = A(MANAGED_MEMORY);
    prop->isMultiGpuBoard = A(MULTI_GPU_BOARD);
    prop->multiGpuBoardGroupID = A(MULTI_GPU_BOARD_GROUP_ID);
    prop->hostNativeAtomicSupported = A(HOST_NATIVE_ATOMIC_SUPPORTED);
    prop->pageableMemoryAccess = A(PAGEABLE_MEMORY_ACCESS);
    prop->concurrentManagedAccess = A(CONCURRENT_MANAGED_ACCESS);
    prop->computePreemptionSupported = A(COMPUTE_PREEMPTION_SUPPORTED);
    prop->canUseHostPointerForRegisteredMem = A(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
    prop->cooperativeLaunch = A(COOPERATIVE_LAUNCH);
    prop->pageableMemoryAccessUsesHostPageTables = A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
    prop->directManagedMemAccessFromHost = A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
    prop->hostRegisterSupported = A(HOST_REGISTER_SUPPORTED);
    prop->hostRegisterReadOnlySupported = A(READ_ONLY_HOST_REGISTER_SUPPORTED);
    prop->sparseCudaArraySupported = A(SPARSE_CUDA_ARRAY_SUPPORTED);
    prop->timelineSemaphoreInteropSupported = A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED);
    prop->memoryPoolsSupported = A(MEMORY_POOLS_SUPPORTED);
    prop->memoryPoolSupportedHandleTypes = (unsigned)A(MEMPOOL_SUPPORTED_HANDLE_TYPES);
    prop->gpuDirectRDMASupported = A(GPU_DIRECT_RDMA_SUPPORTED);
    prop->gpuDirectRDMAFlushWritesOptions = (unsigned)A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS);
    prop->gpuDirectRDMAWritesOrdering = A(GPU_DIRECT_RDMA_WRITES_ORDERING);
    prop->deferredMappingCudaArraySupported = A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED);
    prop->ipcEventSupported = A(IPC_EVENT_SUPPORTED);
    prop->clusterLaunch = A(CLUSTER_LAUNCH);
    prop->unifiedFunctionPointers = A(UNIFIED_FUNCTION_POINTERS);
#undef A
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
                                                    int device)
{
    RT_CALL(cudaDeviceGetAttribute, v5000, value, attr, device);
    RT_RETURN(to_rt(cuDeviceGetAttribute(value, (CUdevice_attribute)attr, device)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    RT_CALL0(cudaDeviceSynchronize, v3020);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuCtxSynchronize()));
}

RT_API cudaError_t CUDARTAPI cudaDeviceReset(void)
{
    RT_CALL0(cudaDeviceReset, v3020);
    RT_RETURN(to_rt(cuDevicePrimaryCtxReset(tl_device)));
}

/* ------------------------------------------------------------------------------------------ */
/* memory */

RT_API cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    RT_CALL(cudaMalloc, v3020, devPtr, size);
    if (!devPtr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    if (size == 0) {
        *devPtr = NULL;
        RT_RETURN(cudaSuccess);
    }
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc(&p, size);
    if (r == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)p;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    RT_CALL(cudaFree, v3020, devPtr);
    RT_NEED_CTX();
    if (!devPtr)
        RT_RETURN(cudaSuccess);
    CUresult r = cuMemFree((CUdeviceptr)(uintptr_t)devPtr);
    RT_RETURN(r == CUDA_ERROR_INVALID_VALUE ? cudaErrorInvalidValue : to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaMallocPitch(void **devPtr, size_t *pitch, size_t width,
                                             size_t height)
{
    RT_CALL(cudaMallocPitch, v3020, devPtr, pitch, width, height);
    if (!devPtr || !pitch)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr p = 0;
    CUresult r = cuMemAllocPitch(&p, pitch, width, height, 4);
    if (r == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)p;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr,
                                          struct cudaExtent extent)
{
    RT_CALL(cudaMalloc3D, v3020, pitchedDevPtr, extent);
    if (!pitchedDevPtr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult r = cuMemAllocPitch(&p, &pitch, extent.width,
                                 extent.height * (extent.depth ? extent.depth : 1), 4);
    if (r == CUDA_SUCCESS) {
        pitchedDevPtr->ptr = (void *)(uintptr_t)p;
        pitchedDevPtr->pitch = pitch;
        pitchedDevPtr->xsize = extent.width;
        pitchedDevPtr->ysize = extent.height;
    }
    RT_RETURN(to_rt(r));
}

static CUarray_format channel_format(const struct cudaChannelFormatDesc *d, unsigned *nch)
{
    int bits = d->x;
    *nch = (d->x > 0) + (d->y > 0) + (d->z > 0) + (d->w > 0);
    if (*nch == 3)
        *nch = 4;
    if (d->f == cudaChannelFormatKindFloat)
        return bits == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
    if (d->f == cudaChannelFormatKindSigned)
        return bits == 8    ? CU_AD_FORMAT_SIGNED_INT8
               : bits == 16 ? CU_AD_FORMAT_SIGNED_INT16
                            : CU_AD_FORMAT_SIGNED_INT32;
    return bits == 8    ? CU_AD_FORMAT_UNSIGNED_INT8
           : bits == 16 ? CU_AD_FORMAT_UNSIGNED_INT16
                        : CU_AD_FORMAT_UNSIGNED_INT32;
}

RT_API cudaError_t CUDARTAPI cudaMallocArray(cudaArray_t *array,
                                             const struct cudaChannelFormatDesc *desc, size_t width,
                                             size_t height, unsigned int flags)
{
    RT_CALL(cudaMallocArray, v3020, array, desc, width, height, flags);
    if (!array || !desc)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUDA_ARRAY_DESCRIPTOR ad;
    memset(&ad, 0, sizeof(ad));
    ad.Width = width;
    ad.Height = height;
    ad.Format = channel_format(desc, &ad.NumChannels);
    CUarray h = NULL;
    CUresult r = cuArrayCreate(&h, &ad);
    if (r == CUDA_SUCCESS)
        *array = (cudaArray_t)(void *)h;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaMalloc3DArray(cudaArray_t *array,
                                               const struct cudaChannelFormatDesc *desc,
                                               struct cudaExtent extent, unsigned int flags)
{
    RT_CALL(cudaMalloc3DArray, v3020, array, desc, extent, flags);
    if (!array || !desc)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUDA_ARRAY3D_DESCRIPTOR ad;
    memset(&ad, 0, sizeof(ad));
    ad.Width = extent.width;
    ad.Height = extent.height;
    ad.Depth = extent.depth;
    ad.Format = channel_format(desc, &ad.NumChannels);
    ad.Flags = flags;
    CUarray h = NULL;
    CUresult r = cuArray3DCreate(&h, &ad);
    if (r == CUDA_SUCCESS)
        *array = (cudaArray_t)(void *)h;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaFreeArray(cudaArray_t array)
{
    RT_CALL(cudaFreeArray, v3020, array);
    if (!array)
        RT_RETURN(cudaSuccess);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuArrayDestroy((CUarray)(void *)array)));
}

RT_API cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
    RT_CALL(cudaMallocHost, v3020, ptr, size);
    if (!ptr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemAllocHost(ptr, size)));
}

RT_API cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    RT_CALL(cudaHostAlloc, v3020, pHost, size, flags);
    if (!pHost)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemHostAlloc(pHost, size, flags)));
}

RT_API cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
    RT_CALL(cudaFreeHost, v3020, ptr);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemFreeHost(ptr)));
}

RT_API cudaError_t CUDARTAPI cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    RT_CALL(cudaHostRegister, v4000, ptr, size, flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemHostRegister(ptr, size, flags)));
}

RT_API cudaError_t CUDARTAPI cudaHostUnregister(void *ptr)
{
    RT_CALL(cudaHostUnregister, v4000, ptr);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemHostUnregister(ptr)));
}

RT_API cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    RT_CALL(cudaMallocManaged, v6000, devPtr, size, flags);
    if (!devPtr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr p = 0;
    CUresult r = cuMemAllocManaged(&p, size, flags);
    if (r == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)p;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free, size_t *total)
{
    RT_CALL(cudaMemGetInfo, v3020, free, total);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemGetInfo(free, total)));
}

/* stream-ordered */

RT_API cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    RT_CALL(cudaMallocAsync, v11020, devPtr, size, hStream);
    if (!devPtr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr p = 0;
    CUresult r = cuMemAllocAsync(&p, size, hStream);
    if (r == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)p;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                                     cudaStream_t stream)
{
    RT_CALL(cudaMallocFromPoolAsync, v11020, ptr, size, memPool, stream);
    if (!ptr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr p = 0;
    CUresult r = cuMemAllocFromPoolAsync(&p, size, memPool, stream);
    if (r == CUDA_SUCCESS)
        *ptr = (void *)(uintptr_t)p;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    RT_CALL(cudaFreeAsync, v11020, devPtr, hStream);
    RT_NEED_CTX();
    if (!devPtr)
        RT_RETURN(cudaSuccess);
    RT_RETURN(to_rt(cuMemFreeAsync((CUdeviceptr)(uintptr_t)devPtr, hStream)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t *memPool,
                                               const struct cudaMemPoolProps *poolProps)
{
    RT_CALL(cudaMemPoolCreate, v11020, memPool, poolProps);
    if (!memPool || !poolProps)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUmemPoolProps p;
    memset(&p, 0, sizeof(p));
    p.allocType = (CUmemAllocationType)poolProps->allocType;
    p.handleTypes = (CUmemAllocationHandleType)poolProps->handleTypes;
    p.location.type = (CUmemLocationType)poolProps->location.type;
    p.location.id = poolProps->location.id;
    RT_RETURN(to_rt(cuMemPoolCreate(memPool, &p)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    RT_CALL(cudaMemPoolDestroy, v11020, memPool);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPoolDestroy(memPool)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    RT_CALL(cudaMemPoolTrimTo, v11020, memPool, minBytesToKeep);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPoolTrimTo(memPool, minBytesToKeep)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool,
                                                     enum cudaMemPoolAttr attr, void *value)
{
    RT_CALL(cudaMemPoolSetAttribute, v11020, memPool, attr, value);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPoolSetAttribute(memPool, (CUmemPool_attribute)attr, value)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t memPool,
                                                     enum cudaMemPoolAttr attr, void *value)
{
    RT_CALL(cudaMemPoolGetAttribute, v11020, memPool, attr, value);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPoolGetAttribute(memPool, (CUmemPool_attribute)attr, value)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    RT_CALL(cudaDeviceGetDefaultMemPool, v11020, memPool, device);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuDeviceGetDefaultMemPool(memPool, device)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    RT_CALL(cudaDeviceGetMemPool, v11020, memPool, device);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuDeviceGetMemPool(memPool, device)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
    RT_CALL(cudaDeviceSetMemPool, v11020, device, memPool);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuDeviceSetMemPool(device, memPool)));
}

/* CUDA 13's pools by location (cuda_runtime_api.h:8102-8153): the driver's cuMemGetDefaultMemPool,
 * cuMemGetMemPool and cuMemSetMemPool; struct cudaMemLocation and CUmemLocation have the same
 * fields ({type, id}, driver_types.h / cuda.h) and the enums the same values. A CUDA 12 runtime
 * (the CUDA 12 personality) has none of them: there the generated stubs answer, and the
 * personality's driver does not export the driver functions (dated 13000 by cudaTypedefs.h). */
#if SIMCUDA_RUNTIME_VERSION >= 13000
_Static_assert(sizeof(struct cudaMemLocation) == sizeof(CUmemLocation) &&
                   (int)cudaMemLocationTypeHostNuma == (int)CU_MEM_LOCATION_TYPE_HOST_NUMA &&
                   (int)cudaMemAllocationTypeManaged == (int)CU_MEM_ALLOCATION_TYPE_MANAGED,
               "cudaMemLocation layout");

RT_API cudaError_t CUDARTAPI cudaMemGetDefaultMemPool(cudaMemPool_t *memPool,
                                                      struct cudaMemLocation *location,
                                                      enum cudaMemAllocationType type)
{
    RT_CALL(cudaMemGetDefaultMemPool, v13000, memPool, location, type);
    RT_NEED_CTX();
    RT_RETURN(to_rt(
        cuMemGetDefaultMemPool(memPool, (CUmemLocation *)location, (CUmemAllocationType)type)));
}

RT_API cudaError_t CUDARTAPI cudaMemGetMemPool(cudaMemPool_t *memPool,
                                               struct cudaMemLocation *location,
                                               enum cudaMemAllocationType type)
{
    RT_CALL(cudaMemGetMemPool, v13000, memPool, location, type);
    RT_NEED_CTX();
    RT_RETURN(
        to_rt(cuMemGetMemPool(memPool, (CUmemLocation *)location, (CUmemAllocationType)type)));
}

RT_API cudaError_t CUDARTAPI cudaMemSetMemPool(struct cudaMemLocation *location,
                                               enum cudaMemAllocationType type,
                                               cudaMemPool_t memPool)
{
    RT_CALL(cudaMemSetMemPool, v13000, location, type, memPool);
    RT_NEED_CTX();
    RT_RETURN(
        to_rt(cuMemSetMemPool((CUmemLocation *)location, (CUmemAllocationType)type, memPool)));
}
#endif

/* copies and sets (recorded; device contents are not simulated) */

RT_API cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count,
                                        enum cudaMemcpyKind kind)
{
    RT_CALL(cudaMemcpy, v3020, dst, src, count, kind);
    RT_NEED_CTX();
    CUresult r;
    switch (kind) {
    case cudaMemcpyHostToDevice: r = cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, count); break;
    case cudaMemcpyDeviceToHost: r = cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, count); break;
    case cudaMemcpyDeviceToDevice:
        r = cuMemcpyDtoD((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, count);
        break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
        r = cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, count);
        break;
    default: RT_RETURN(cudaErrorInvalidMemcpyDirection);
    }
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                             enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_CALL(cudaMemcpyAsync, v3020, dst, src, count, kind, stream);
    RT_NEED_CTX();
    if ((int)kind < 0 || kind > cudaMemcpyDefault)
        RT_RETURN(cudaErrorInvalidMemcpyDirection);
    RT_RETURN(to_rt(
        cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, count, stream)));
}

RT_API cudaError_t CUDARTAPI cudaMemset(void *devPtr, int value, size_t count)
{
    RT_CALL(cudaMemset, v3020, devPtr, value, count);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemsetD8((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count)));
}

RT_API cudaError_t CUDARTAPI cudaMemsetAsync(void *devPtr, int value, size_t count,
                                             cudaStream_t stream)
{
    RT_CALL(cudaMemsetAsync, v3020, devPtr, value, count, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(
        cuMemsetD8Async((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value, count, stream)));
}

/* ------------------------------------------------------------------------------------------ */
/* streams */

RT_API cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *pStream)
{
    RT_CALL(cudaStreamCreate, v3020, pStream);
    if (!pStream)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamCreate(pStream, 0)));
}

RT_API cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    RT_CALL(cudaStreamCreateWithFlags, v5000, pStream, flags);
    if (!pStream)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamCreate(pStream, flags)));
}

RT_API cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream)
{
    RT_CALL(cudaStreamDestroy, v5050, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamDestroy(stream)));
}

RT_API cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
    RT_CALL(cudaStreamSynchronize, v3020, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamSynchronize(stream)));
}

/* ------------------------------------------------------------------------------------------ */
/* modules, kernels and variables registered by nvcc-generated code */

typedef struct kernel_entry {
    struct CUfunc_st f; /* first: the handle given to the driver and returned as cudaKernel_t */
    const void *host_fun;
    struct kernel_entry *next;
} kernel_entry;

typedef struct var_entry {
    const void *host_var;
    int module, index;
    size_t size;
    struct var_entry *next;
} var_entry;

typedef struct fatbin_handle {
    void *fatbin; /* first: nvcc passes &handle->fatbin around as void** */
    int module;
    int nvars;
} fatbin_handle;

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static kernel_entry *g_kernels;
static var_entry *g_vars;

static fatbin_handle *handle_of(void **h)
{
    return (fatbin_handle *)(void *)h;
}

RT_API void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin);
RT_API void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin)
{
    fatbin_handle *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->fatbin = fatCubin;
    h->module = simcuda_module_register();
    return &h->fatbin;
}

RT_API void CUDARTAPI __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
RT_API void CUDARTAPI __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    if (fatCubinHandle)
        simcuda_module_loaded(handle_of(fatCubinHandle)->module);
}

RT_API void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle);
RT_API void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    if (!fatCubinHandle)
        return;
    simcuda_module_unload(handle_of(fatCubinHandle)->module);
}

RT_API void CUDARTAPI __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun,
                                             char *deviceFun, const char *deviceName,
                                             int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim,
                                             dim3 *gDim, int *wSize);
RT_API void CUDARTAPI __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun,
                                             char *deviceFun, const char *deviceName,
                                             int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim,
                                             dim3 *gDim, int *wSize)
{
    kernel_entry *k = calloc(1, sizeof(*k));
    if (!k)
        return;
    k->f.magic = SIMCUDA_FUNC_MAGIC;
    k->f.name = deviceName ? deviceName : deviceFun;
    k->host_fun = hostFun;
    pthread_mutex_lock(&g_reg_mu);
    k->next = g_kernels;
    g_kernels = k;
    pthread_mutex_unlock(&g_reg_mu);
}

RT_API void CUDARTAPI __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                        const char *deviceName, int ext, size_t size, int constant,
                                        int global);
RT_API void CUDARTAPI __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                        const char *deviceName, int ext, size_t size, int constant,
                                        int global)
{
    if (!fatCubinHandle)
        return;
    fatbin_handle *h = handle_of(fatCubinHandle);
    var_entry *v = calloc(1, sizeof(*v));
    if (!v)
        return;
    v->host_var = hostVar;
    v->module = h->module;
    v->index = h->nvars++;
    v->size = size;
    simcuda_module_add_var(h->module, deviceName ? deviceName : deviceAddress, size);
    pthread_mutex_lock(&g_reg_mu);
    v->next = g_vars;
    g_vars = v;
    pthread_mutex_unlock(&g_reg_mu);
}

RT_API void CUDARTAPI __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                               char *deviceAddress, const char *deviceName, int ext,
                                               size_t size, int constant, int global);
RT_API void CUDARTAPI __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                               char *deviceAddress, const char *deviceName, int ext,
                                               size_t size, int constant, int global)
{
    /* __managed__ variables: not modelled (README.md) */
}

RT_API char CUDARTAPI __cudaInitModule(void **fatCubinHandle);
RT_API char CUDARTAPI __cudaInitModule(void **fatCubinHandle)
{
    return 1;
}

RT_API void CUDARTAPI __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName,
                                            char *hostVar, size_t size);
RT_API void CUDARTAPI __cudaRegisterHostVar(void **fatCubinHandle, const char *deviceName,
                                            char *hostVar, size_t size)
{
}

static kernel_entry *find_kernel(const void *host_fun)
{
    pthread_mutex_lock(&g_reg_mu);
    kernel_entry *k = g_kernels;
    while (k && k->host_fun != host_fun)
        k = k->next;
    pthread_mutex_unlock(&g_reg_mu);
    return k;
}

static var_entry *find_var(const void *host_var)
{
    pthread_mutex_lock(&g_reg_mu);
    var_entry *v = g_vars;
    while (v && v->host_var != host_var)
        v = v->next;
    pthread_mutex_unlock(&g_reg_mu);
    return v;
}

/* launch configuration stack (per thread) */
typedef struct {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
} launch_cfg;
static _Thread_local launch_cfg tl_cfg[16];
static _Thread_local int tl_ncfg;

/* The cbid headers define __cudaPushCallConfiguration_v13000 and friends but
 * generated_cuda_runtime_api_meta.h has no params structs for them: these mirror the signatures. */
typedef struct {
    dim3 gridDim;
    dim3 blockDim;
    size_t sharedMem;
    struct CUstream_st *stream;
} __cudaPushCallConfiguration_v13000_params;
typedef struct {
    dim3 *gridDim;
    dim3 *blockDim;
    size_t *sharedMem;
    void *stream;
} __cudaPopCallConfiguration_v13000_params;
typedef struct {
    cudaKernel_t *kernel;
    const void *entryFuncAddr;
} __cudaGetKernel_v13000_params;
typedef struct {
    cudaKernel_t kernel;
    dim3 gridDim;
    dim3 blockDim;
    void **args;
    size_t sharedMem;
    cudaStream_t stream;
} __cudaLaunchKernel_v13000_params;
typedef __cudaLaunchKernel_v13000_params __cudaLaunchKernel_ptsz_v13000_params;

RT_API unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                      struct CUstream_st *stream);
RT_API unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                      struct CUstream_st *stream)
{
    RT_CALL(__cudaPushCallConfiguration, v13000, gridDim, blockDim, sharedMem, stream);
    if (tl_ncfg >= 16)
        RT_RETURN(cudaErrorInvalidConfiguration);
    launch_cfg *c = &tl_cfg[tl_ncfg++];
    c->grid = gridDim;
    c->block = blockDim;
    c->shmem = sharedMem;
    c->stream = stream;
    RT_RETURN(cudaSuccess);
}

RT_API cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                                        size_t *sharedMem, void *stream);
RT_API cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim,
                                                        size_t *sharedMem, void *stream)
{
    RT_CALL(__cudaPopCallConfiguration, v13000, gridDim, blockDim, sharedMem, stream);
    if (tl_ncfg <= 0)
        RT_RETURN(cudaErrorMissingConfiguration);
    launch_cfg *c = &tl_cfg[--tl_ncfg];
    if (gridDim)
        *gridDim = c->grid;
    if (blockDim)
        *blockDim = c->block;
    if (sharedMem)
        *sharedMem = c->shmem;
    if (stream)
        *(cudaStream_t *)stream = c->stream;
    RT_RETURN(cudaSuccess);
}

RT_API cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *kernel, const void *entryFuncAddr);
RT_API cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *kernel, const void *entryFuncAddr)
{
    RT_CALL(__cudaGetKernel, v13000, kernel, entryFuncAddr);
    kernel_entry *k = find_kernel(entryFuncAddr);
    if (!kernel || !k)
        RT_RETURN(cudaErrorInvalidDeviceFunction);
    *kernel = (cudaKernel_t)(void *)k;
    RT_RETURN(cudaSuccess);
}

static CUresult launch(kernel_entry *k, dim3 g, dim3 b, void **args, size_t shmem, cudaStream_t s)
{
    return cuLaunchKernel((CUfunction)&k->f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shmem, s, args,
                          NULL);
}

static cudaError_t launch_rt(CUresult r)
{
    if (r == CUDA_ERROR_INVALID_VALUE)
        return cudaErrorInvalidConfiguration;
    if (r == CUDA_ERROR_INVALID_HANDLE)
        return cudaErrorInvalidResourceHandle;
    return to_rt(r);
}

RT_API cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                                void **args, size_t sharedMem, cudaStream_t stream);
RT_API cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                                void **args, size_t sharedMem, cudaStream_t stream)
{
    kernel_entry *k = (kernel_entry *)(void *)kernel;
    int k_ok = k && k->f.magic == SIMCUDA_FUNC_MAGIC;
    RT_CALL_SYM(k_ok ? k->f.name : NULL, __cudaLaunchKernel, v13000, kernel, gridDim, blockDim,
                args, sharedMem, stream);
    if (!k_ok)
        RT_RETURN(cudaErrorInvalidDeviceFunction);
    RT_NEED_CTX();
    RT_RETURN(launch_rt(launch(k, gridDim, blockDim, args, sharedMem, stream)));
}

RT_API cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim,
                                                     dim3 blockDim, void **args, size_t sharedMem,
                                                     cudaStream_t stream);
RT_API cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim,
                                                     dim3 blockDim, void **args, size_t sharedMem,
                                                     cudaStream_t stream)
{
    kernel_entry *k = (kernel_entry *)(void *)kernel;
    int k_ok = k && k->f.magic == SIMCUDA_FUNC_MAGIC;
    RT_CALL_SYM(k_ok ? k->f.name : NULL, __cudaLaunchKernel_ptsz, v13000, kernel, gridDim, blockDim,
                args, sharedMem, stream);
    if (!k_ok)
        RT_RETURN(cudaErrorInvalidDeviceFunction);
    RT_NEED_CTX();
    RT_RETURN(launch_rt(launch(k, gridDim, blockDim, args, sharedMem, stream)));
}

RT_API cudaError_t CUDARTAPI cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim,
                                              void **args, size_t sharedMem, cudaStream_t stream)
{
    kernel_entry *k = find_kernel(func);
    RT_CALL_SYM(k ? k->f.name : NULL, cudaLaunchKernel, v7000, func, gridDim, blockDim, args,
                sharedMem, stream);
    if (!k)
        RT_RETURN(cudaErrorInvalidDeviceFunction);
    RT_NEED_CTX();
    RT_RETURN(launch_rt(launch(k, gridDim, blockDim, args, sharedMem, stream)));
}

/* symbols */

static cudaError_t symbol_address(const void *symbol, CUdeviceptr *addr, size_t *size)
{
    var_entry *v = find_var(symbol);
    if (!v)
        return cudaErrorInvalidSymbol;
    uint64_t a = simcuda_module_var_address(v->module, v->index, tl_device);
    if (!a)
        return cudaErrorInvalidSymbol;
    *addr = (CUdeviceptr)a;
    *size = v->size;
    return cudaSuccess;
}

RT_API cudaError_t CUDARTAPI cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    RT_CALL(cudaGetSymbolAddress, v3020, devPtr, symbol);
    if (!devPtr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr a = 0;
    size_t sz = 0;
    cudaError_t e = symbol_address(symbol, &a, &sz);
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)a;
    RT_RETURN(e);
}

RT_API cudaError_t CUDARTAPI cudaGetSymbolSize(size_t *size, const void *symbol)
{
    RT_CALL(cudaGetSymbolSize, v3020, size, symbol);
    if (!size)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr a = 0;
    RT_RETURN(symbol_address(symbol, &a, size));
}

RT_API cudaError_t CUDARTAPI cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count,
                                                size_t offset, enum cudaMemcpyKind kind)
{
    RT_CALL(cudaMemcpyToSymbol, v3020, symbol, src, count, offset, kind);
    RT_NEED_CTX();
    CUdeviceptr a = 0;
    size_t sz = 0;
    cudaError_t e = symbol_address(symbol, &a, &sz);
    if (e == cudaSuccess && offset + count > sz)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = to_rt(cuMemcpyHtoD(a + offset, src, count));
    RT_RETURN(e);
}

RT_API cudaError_t CUDARTAPI cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count,
                                                  size_t offset, enum cudaMemcpyKind kind)
{
    RT_CALL(cudaMemcpyFromSymbol, v3020, dst, symbol, count, offset, kind);
    RT_NEED_CTX();
    CUdeviceptr a = 0;
    size_t sz = 0;
    cudaError_t e = symbol_address(symbol, &a, &sz);
    if (e == cudaSuccess && offset + count > sz)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = to_rt(cuMemcpyDtoH(dst, a + offset, count));
    RT_RETURN(e);
}

RT_API struct cudaChannelFormatDesc CUDARTAPI cudaCreateChannelDesc(int x, int y, int z, int w,
                                                                    enum cudaChannelFormatKind f)
{
    struct cudaChannelFormatDesc d = {x, y, z, w, f};
    return d;
}

/* ------------------------------------------------------------------------------------------ */
/* device flags, limits, peers */

RT_API cudaError_t CUDARTAPI cudaSetDeviceFlags(unsigned int flags)
{
    RT_CALL(cudaSetDeviceFlags, v3020, flags);
    /* cudaDevice* flags have the values of the CU_CTX_* flags (driver_types.h / cuda.h) */
    if (flags & ~(unsigned)cudaDeviceMask)
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(cuDevicePrimaryCtxSetFlags(tl_device, flags)));
}

RT_API cudaError_t CUDARTAPI cudaGetDeviceFlags(unsigned int *flags)
{
    RT_CALL(cudaGetDeviceFlags, v7000, flags);
    if (!flags)
        RT_RETURN(cudaErrorInvalidValue);
    int active = 0;
    CUresult r = cuDevicePrimaryCtxGetState(tl_device, flags, &active);
    /* mapped host memory is always on (unified addressing): cudaDeviceMapHost is reported */
    if (r == CUDA_SUCCESS)
        *flags |= cudaDeviceMapHost;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
    RT_CALL(cudaDeviceSetLimit, v3020, limit, value);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuCtxSetLimit((CUlimit)limit, value)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)
{
    RT_CALL(cudaDeviceGetLimit, v3020, pValue, limit);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuCtxGetLimit(pValue, (CUlimit)limit)));
}

RT_API cudaError_t CUDARTAPI cudaCtxResetPersistingL2Cache(void)
{
    RT_CALL0(cudaCtxResetPersistingL2Cache, v11000);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuCtxResetPersistingL2Cache()));
}

RT_API cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int *leastPriority,
                                                              int *greatestPriority)
{
    RT_CALL(cudaDeviceGetStreamPriorityRange, v5050, leastPriority, greatestPriority);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuCtxGetStreamPriorityRange(leastPriority, greatestPriority)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    RT_CALL(cudaDeviceCanAccessPeer, v4000, canAccessPeer, device, peerDevice);
    RT_RETURN(to_rt(cuDeviceCanAccessPeer(canAccessPeer, device, peerDevice)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    RT_CALL(cudaDeviceEnablePeerAccess, v4000, peerDevice, flags);
    RT_NEED_CTX();
    CUcontext peer = simcuda_primary_ctx(peerDevice, 1);
    if (!peer)
        RT_RETURN(cudaErrorInvalidDevice);
    RT_RETURN(to_rt(cuCtxEnablePeerAccess(peer, flags)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceDisablePeerAccess(int peerDevice)
{
    RT_CALL(cudaDeviceDisablePeerAccess, v4000, peerDevice);
    RT_NEED_CTX();
    CUcontext peer = simcuda_primary_ctx(peerDevice, 0);
    if (!peer)
        RT_RETURN(cudaErrorPeerAccessNotEnabled);
    RT_RETURN(to_rt(cuCtxDisablePeerAccess(peer)));
}

RT_API cudaError_t CUDARTAPI cudaProfilerStart(void)
{
    RT_CALL0(cudaProfilerStart, v4000);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuProfilerStart()));
}

RT_API cudaError_t CUDARTAPI cudaProfilerStop(void)
{
    RT_CALL0(cudaProfilerStop, v4000);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuProfilerStop()));
}

/* ------------------------------------------------------------------------------------------ */
/* events */

RT_API cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *event)
{
    RT_CALL(cudaEventCreate, v3020, event);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuEventCreate(event, 0)));
}

RT_API cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    RT_CALL(cudaEventCreateWithFlags, v3020, event, flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuEventCreate(event, flags)));
}

RT_API cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event)
{
    RT_CALL(cudaEventDestroy, v3020, event);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuEventDestroy(event)));
}

RT_API cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    RT_CALL(cudaEventRecord, v3020, event, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuEventRecord(event, stream)));
}

RT_API cudaError_t CUDARTAPI cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                                      unsigned int flags)
{
    RT_CALL(cudaEventRecordWithFlags, v11010, event, stream, flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuEventRecordWithFlags(event, stream, flags)));
}

RT_API cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event)
{
    RT_CALL(cudaEventQuery, v3020, event);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuEventQuery(event)));
}

RT_API cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
    RT_CALL(cudaEventSynchronize, v3020, event);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuEventSynchronize(event)));
}

RT_API cudaError_t CUDARTAPI cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    RT_CALL(cudaEventElapsedTime, v12080, ms, start, end);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuEventElapsedTime(ms, start, end)));
}

/* ------------------------------------------------------------------------------------------ */
/* streams (more) */

RT_API cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
                                                          int priority)
{
    RT_CALL(cudaStreamCreateWithPriority, v5050, pStream, flags, priority);
    if (!pStream)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamCreateWithPriority(pStream, flags, priority)));
}

RT_API cudaError_t CUDARTAPI cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    RT_CALL(cudaStreamGetPriority, v5050, hStream, priority);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamGetPriority(hStream, priority)));
}

RT_API cudaError_t CUDARTAPI cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    RT_CALL(cudaStreamGetFlags, v5050, hStream, flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamGetFlags(hStream, flags)));
}

RT_API cudaError_t CUDARTAPI cudaStreamGetId(cudaStream_t hStream, unsigned long long *streamId)
{
    RT_CALL(cudaStreamGetId, v12000, hStream, streamId);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamGetId(hStream, streamId)));
}

RT_API cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream)
{
    RT_CALL(cudaStreamQuery, v3020, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamQuery(stream)));
}

RT_API cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                                 unsigned int flags)
{
    RT_CALL(cudaStreamWaitEvent, v3020, stream, event, flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamWaitEvent(stream, event, flags)));
}

RT_API cudaError_t CUDARTAPI cudaStreamSetAttribute(cudaStream_t hStream, cudaStreamAttrID attr,
                                                    const cudaStreamAttrValue *value)
{
    RT_CALL(cudaStreamSetAttribute, v11000, hStream, attr, value);
    RT_NEED_CTX();
    /* cudaLaunchAttributeValue and CUlaunchAttributeValue have the same layout (driver_types.h) */
    RT_RETURN(to_rt(cuStreamSetAttribute(hStream, (CUstreamAttrID)attr,
                                         (const CUstreamAttrValue *)(const void *)value)));
}

RT_API cudaError_t CUDARTAPI cudaStreamGetAttribute(cudaStream_t hStream, cudaStreamAttrID attr,
                                                    cudaStreamAttrValue *value_out)
{
    RT_CALL(cudaStreamGetAttribute, v11000, hStream, attr, value_out);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamGetAttribute(hStream, (CUstreamAttrID)attr,
                                         (CUstreamAttrValue *)(void *)value_out)));
}

RT_API cudaError_t CUDARTAPI cudaStreamAttachMemAsync(cudaStream_t stream, void *devPtr,
                                                      size_t length, unsigned int flags)
{
    RT_CALL(cudaStreamAttachMemAsync, v6000, stream, devPtr, length, flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamAttachMemAsync(stream, (CUdeviceptr)(uintptr_t)devPtr, length, flags)));
}

RT_API cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn,
                                                void *userData)
{
    RT_CALL(cudaLaunchHostFunc, v10000, stream, fn, userData);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuLaunchHostFunc(stream, fn, userData)));
}

typedef struct {
    cudaStreamCallback_t cb;
    void *user;
} rt_stream_cb;

static void CUDA_CB rt_stream_cb_tramp(CUstream s, CUresult status, void *user)
{
    rt_stream_cb *c = user;
    c->cb(s, to_rt(status), c->user);
}

RT_API cudaError_t CUDARTAPI cudaStreamAddCallback(cudaStream_t stream,
                                                   cudaStreamCallback_t callback, void *userData,
                                                   unsigned int flags)
{
    RT_CALL(cudaStreamAddCallback, v5000, stream, callback, userData, flags);
    if (!callback)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    rt_stream_cb c = {callback, userData}; /* called before cuStreamAddCallback returns */
    RT_RETURN(to_rt(cuStreamAddCallback(stream, rt_stream_cb_tramp, &c, flags)));
}

RT_API cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream,
                                                    enum cudaStreamCaptureMode mode)
{
    RT_CALL(cudaStreamBeginCapture, v10000, stream, mode);
    RT_NEED_CTX();
    CUresult r = cuStreamBeginCapture(stream, (CUstreamCaptureMode)mode);
    RT_RETURN(r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ? cudaErrorStreamCaptureImplicit
                                                         : to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    RT_CALL(cudaStreamEndCapture, v10000, stream, pGraph);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamEndCapture(stream, pGraph)));
}

RT_API cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream,
                                                   enum cudaStreamCaptureStatus *pCaptureStatus)
{
    RT_CALL(cudaStreamIsCapturing, v10000, stream, pCaptureStatus);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamIsCapturing(stream, (CUstreamCaptureStatus *)pCaptureStatus)));
}

RT_API cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(
    cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
    unsigned long long *id_out, cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    RT_CALL(cudaStreamGetCaptureInfo, v12030, stream, captureStatus_out, id_out, graph_out,
            dependencies_out, edgeData_out, numDependencies_out);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuStreamGetCaptureInfo(stream, (CUstreamCaptureStatus *)captureStatus_out,
                                           (cuuint64_t *)id_out, graph_out, dependencies_out,
                                           (const CUgraphEdgeData **)(const void *)edgeData_out,
                                           numDependencies_out)));
}

static _Thread_local enum cudaStreamCaptureMode tl_capture_mode;

RT_API cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    RT_CALL(cudaThreadExchangeStreamCaptureMode, v10010, mode);
    if (!mode || *mode > cudaStreamCaptureModeRelaxed)
        RT_RETURN(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode old = tl_capture_mode;
    tl_capture_mode = *mode;
    *mode = old;
    RT_RETURN(cudaSuccess);
}

/* ------------------------------------------------------------------------------------------ */
/* graphs */

RT_API cudaError_t CUDARTAPI cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    RT_CALL(cudaGraphCreate, v10000, pGraph, flags);
    RT_RETURN(to_rt(cuGraphCreate(pGraph, flags)));
}

RT_API cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph)
{
    RT_CALL(cudaGraphDestroy, v10000, graph);
    RT_RETURN(to_rt(cuGraphDestroy(graph)));
}

RT_API cudaError_t CUDARTAPI cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                    const cudaGraphNode_t *pDependencies,
                                                    size_t numDependencies,
                                                    const struct cudaKernelNodeParams *pNodeParams)
{
    RT_CALL(cudaGraphAddKernelNode, v10000, pGraphNode, graph, pDependencies, numDependencies,
            pNodeParams);
    if (!pNodeParams)
        RT_RETURN(cudaErrorInvalidValue);
    kernel_entry *k = find_kernel(pNodeParams->func);
    if (!k)
        RT_RETURN(cudaErrorInvalidDeviceFunction);
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof(p));
    p.func = (CUfunction)&k->f;
    p.gridDimX = pNodeParams->gridDim.x;
    p.gridDimY = pNodeParams->gridDim.y;
    p.gridDimZ = pNodeParams->gridDim.z;
    p.blockDimX = pNodeParams->blockDim.x;
    p.blockDimY = pNodeParams->blockDim.y;
    p.blockDimZ = pNodeParams->blockDim.z;
    p.sharedMemBytes = pNodeParams->sharedMemBytes;
    p.kernelParams = pNodeParams->kernelParams;
    p.extra = pNodeParams->extra;
    RT_RETURN(to_rt(cuGraphAddKernelNode(pGraphNode, graph, pDependencies, numDependencies, &p)));
}

static CUmemorytype mem_type(enum cudaMemcpyKind kind, int is_src)
{
    switch (kind) {
    case cudaMemcpyHostToHost: return CU_MEMORYTYPE_HOST;
    case cudaMemcpyHostToDevice: return is_src ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    case cudaMemcpyDeviceToHost: return is_src ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    case cudaMemcpyDeviceToDevice: return CU_MEMORYTYPE_DEVICE;
    default: return CU_MEMORYTYPE_UNIFIED;
    }
}

/* cudaMemcpy3DParms as the driver's CUDA_MEMCPY3D (widths of array copies in elements are taken
 * as bytes: array contents are not simulated) */
static int to_copy3d(const struct cudaMemcpy3DParms *p, CUDA_MEMCPY3D *c)
{
    if (!p || (p->kind < cudaMemcpyHostToHost || p->kind > cudaMemcpyDefault))
        return 0;
    memset(c, 0, sizeof(*c));
    if (p->srcArray) {
        c->srcMemoryType = CU_MEMORYTYPE_ARRAY;
        c->srcArray = (CUarray)(void *)p->srcArray;
    } else {
        c->srcMemoryType = mem_type(p->kind, 1);
        c->srcHost = p->srcPtr.ptr;
        c->srcDevice = (CUdeviceptr)(uintptr_t)p->srcPtr.ptr;
        c->srcPitch = p->srcPtr.pitch;
        c->srcHeight = p->srcPtr.ysize;
    }
    c->srcXInBytes = p->srcPos.x;
    c->srcY = p->srcPos.y;
    c->srcZ = p->srcPos.z;
    if (p->dstArray) {
        c->dstMemoryType = CU_MEMORYTYPE_ARRAY;
        c->dstArray = (CUarray)(void *)p->dstArray;
    } else {
        c->dstMemoryType = mem_type(p->kind, 0);
        c->dstHost = p->dstPtr.ptr;
        c->dstDevice = (CUdeviceptr)(uintptr_t)p->dstPtr.ptr;
        c->dstPitch = p->dstPtr.pitch;
        c->dstHeight = p->dstPtr.ysize;
    }
    c->dstXInBytes = p->dstPos.x;
    c->dstY = p->dstPos.y;
    c->dstZ = p->dstPos.z;
    c->WidthInBytes = p->extent.width;
    c->Height = p->extent.height;
    c->Depth = p->extent.depth;
    return 1;
}

RT_API cudaError_t CUDARTAPI cudaGraphAddMemcpyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                    const cudaGraphNode_t *pDependencies,
                                                    size_t numDependencies,
                                                    const struct cudaMemcpy3DParms *pCopyParams)
{
    RT_CALL(cudaGraphAddMemcpyNode, v10000, pGraphNode, graph, pDependencies, numDependencies,
            pCopyParams);
    RT_NEED_CTX();
    CUDA_MEMCPY3D c;
    if (!to_copy3d(pCopyParams, &c))
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(cuGraphAddMemcpyNode(pGraphNode, graph, pDependencies, numDependencies, &c,
                                         simcuda_current_ctx())));
}

RT_API cudaError_t CUDARTAPI cudaGraphAddMemcpyNode1D(
    cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
    size_t numDependencies, void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    RT_CALL(cudaGraphAddMemcpyNode1D, v11010, pGraphNode, graph, pDependencies, numDependencies,
            dst, src, count, kind);
    RT_NEED_CTX();
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof(c));
    c.srcMemoryType = mem_type(kind, 1);
    c.srcHost = src;
    c.srcDevice = (CUdeviceptr)(uintptr_t)src;
    c.dstMemoryType = mem_type(kind, 0);
    c.dstHost = dst;
    c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    c.WidthInBytes = count;
    c.Height = c.Depth = 1;
    RT_RETURN(to_rt(cuGraphAddMemcpyNode(pGraphNode, graph, pDependencies, numDependencies, &c,
                                         simcuda_current_ctx())));
}

RT_API cudaError_t CUDARTAPI cudaGraphAddMemsetNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                    const cudaGraphNode_t *pDependencies,
                                                    size_t numDependencies,
                                                    const struct cudaMemsetParams *pMemsetParams)
{
    RT_CALL(cudaGraphAddMemsetNode, v10000, pGraphNode, graph, pDependencies, numDependencies,
            pMemsetParams);
    RT_NEED_CTX();
    if (!pMemsetParams)
        RT_RETURN(cudaErrorInvalidValue);
    CUDA_MEMSET_NODE_PARAMS p;
    memset(&p, 0, sizeof(p));
    p.dst = (CUdeviceptr)(uintptr_t)pMemsetParams->dst;
    p.pitch = pMemsetParams->pitch;
    p.value = pMemsetParams->value;
    p.elementSize = pMemsetParams->elementSize;
    p.width = pMemsetParams->width;
    p.height = pMemsetParams->height;
    RT_RETURN(to_rt(cuGraphAddMemsetNode(pGraphNode, graph, pDependencies, numDependencies, &p,
                                         simcuda_current_ctx())));
}

RT_API cudaError_t CUDARTAPI cudaGraphAddHostNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                  const cudaGraphNode_t *pDependencies,
                                                  size_t numDependencies,
                                                  const struct cudaHostNodeParams *pNodeParams)
{
    RT_CALL(cudaGraphAddHostNode, v10000, pGraphNode, graph, pDependencies, numDependencies,
            pNodeParams);
    if (!pNodeParams)
        RT_RETURN(cudaErrorInvalidValue);
    CUDA_HOST_NODE_PARAMS p = {pNodeParams->fn, pNodeParams->userData};
    RT_RETURN(to_rt(cuGraphAddHostNode(pGraphNode, graph, pDependencies, numDependencies, &p)));
}

RT_API cudaError_t CUDARTAPI cudaGraphAddMemAllocNode(cudaGraphNode_t *pGraphNode,
                                                      cudaGraph_t graph,
                                                      const cudaGraphNode_t *pDependencies,
                                                      size_t numDependencies,
                                                      struct cudaMemAllocNodeParams *nodeParams)
{
    RT_CALL(cudaGraphAddMemAllocNode, v11040, pGraphNode, graph, pDependencies, numDependencies,
            nodeParams);
    RT_NEED_CTX();
    if (!nodeParams)
        RT_RETURN(cudaErrorInvalidValue);
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof(p));
    p.poolProps.allocType = (CUmemAllocationType)nodeParams->poolProps.allocType;
    p.poolProps.handleTypes = (CUmemAllocationHandleType)nodeParams->poolProps.handleTypes;
    p.poolProps.location.type = (CUmemLocationType)nodeParams->poolProps.location.type;
    p.poolProps.location.id = nodeParams->poolProps.location.id;
    p.bytesize = nodeParams->bytesize;
    CUresult r = cuGraphAddMemAllocNode(pGraphNode, graph, pDependencies, numDependencies, &p);
    if (r == CUDA_SUCCESS)
        nodeParams->dptr = (void *)(uintptr_t)p.dptr;
    RT_RETURN(to_rt(r));
}

/* cudaGraphAddNode (cuda_runtime_api.h:12908): the memory nodes over the driver's cuGraphAddNode
 * (driver_types.h cudaMemAllocNodeParamsV2 / cudaMemFreeNodeParams have the driver's fields);
 * other node types are not modelled. */
RT_API cudaError_t CUDARTAPI cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                              const cudaGraphNode_t *pDependencies,
                                              const cudaGraphEdgeData *dependencyData,
                                              size_t numDependencies,
                                              struct cudaGraphNodeParams *nodeParams)
{
    RT_CALL(cudaGraphAddNode, v12030, pGraphNode, graph, pDependencies, dependencyData,
            numDependencies, nodeParams);
    RT_NEED_CTX();
    if (!nodeParams)
        RT_RETURN(cudaErrorInvalidValue);
    CUgraphNodeParams p;
    memset(&p, 0, sizeof(p));
    if (nodeParams->type == cudaGraphNodeTypeMemAlloc) {
        const struct cudaMemPoolProps *pp = &nodeParams->alloc.poolProps;
        p.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        p.alloc.poolProps.allocType = (CUmemAllocationType)pp->allocType;
        p.alloc.poolProps.handleTypes = (CUmemAllocationHandleType)pp->handleTypes;
        p.alloc.poolProps.location.type = (CUmemLocationType)pp->location.type;
        p.alloc.poolProps.location.id = pp->location.id;
        p.alloc.bytesize = nodeParams->alloc.bytesize;
    } else if (nodeParams->type == cudaGraphNodeTypeMemFree) {
        p.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
        p.free.dptr = (CUdeviceptr)(uintptr_t)nodeParams->free.dptr;
    } else {
        RT_RETURN(cudaErrorNotSupported);
    }
    CUresult r = cuGraphAddNode(pGraphNode, graph, pDependencies, NULL, numDependencies, &p);
    if (r == CUDA_SUCCESS && p.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        nodeParams->alloc.dptr = (void *)(uintptr_t)p.alloc.dptr;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaGraphAddMemFreeNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                     const cudaGraphNode_t *pDependencies,
                                                     size_t numDependencies, void *dptr)
{
    RT_CALL(cudaGraphAddMemFreeNode, v11040, pGraphNode, graph, pDependencies, numDependencies,
            dptr);
    RT_RETURN(to_rt(cuGraphAddMemFreeNode(pGraphNode, graph, pDependencies, numDependencies,
                                          (CUdeviceptr)(uintptr_t)dptr)));
}

RT_API cudaError_t CUDARTAPI cudaGraphClone(cudaGraph_t *pGraphClone, cudaGraph_t originalGraph)
{
    RT_CALL(cudaGraphClone, v10000, pGraphClone, originalGraph);
    RT_RETURN(to_rt(cuGraphClone(pGraphClone, originalGraph)));
}

RT_API cudaError_t CUDARTAPI cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes,
                                               size_t *numNodes)
{
    RT_CALL(cudaGraphGetNodes, v10000, graph, nodes, numNodes);
    RT_RETURN(to_rt(cuGraphGetNodes(graph, nodes, numNodes)));
}

RT_API cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                  unsigned long long flags)
{
    RT_CALL(cudaGraphInstantiate, v12000, pGraphExec, graph, flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuGraphInstantiateWithFlags(pGraphExec, graph, flags)));
}

RT_API cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec,
                                                           cudaGraph_t graph,
                                                           unsigned long long flags)
{
    RT_CALL(cudaGraphInstantiateWithFlags, v11040, pGraphExec, graph, flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuGraphInstantiateWithFlags(pGraphExec, graph, flags)));
}

RT_API cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_CALL(cudaGraphLaunch, v10000, graphExec, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuGraphLaunch(graphExec, stream)));
}

RT_API cudaError_t CUDARTAPI cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_CALL(cudaGraphUpload, v10000, graphExec, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuGraphUpload(graphExec, stream)));
}

RT_API cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    RT_CALL(cudaGraphExecDestroy, v10000, graphExec);
    RT_RETURN(to_rt(cuGraphExecDestroy(graphExec)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceGraphMemTrim(int device)
{
    RT_CALL(cudaDeviceGraphMemTrim, v11040, device);
    RT_RETURN(to_rt(cuDeviceGraphMemTrim(device)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceGetGraphMemAttribute(int device,
                                                            enum cudaGraphMemAttributeType attr,
                                                            void *value)
{
    RT_CALL(cudaDeviceGetGraphMemAttribute, v11040, device, attr, value);
    RT_RETURN(to_rt(cuDeviceGetGraphMemAttribute(device, (CUgraphMem_attribute)attr, value)));
}

RT_API cudaError_t CUDARTAPI cudaDeviceSetGraphMemAttribute(int device,
                                                            enum cudaGraphMemAttributeType attr,
                                                            void *value)
{
    RT_CALL(cudaDeviceSetGraphMemAttribute, v11040, device, attr, value);
    RT_RETURN(to_rt(cuDeviceSetGraphMemAttribute(device, (CUgraphMem_attribute)attr, value)));
}

/* ------------------------------------------------------------------------------------------ */
/* mapped host memory, IPC, pool sharing, managed memory hints */

RT_API cudaError_t CUDARTAPI cudaHostGetDevicePointer(void **pDevice, void *pHost,
                                                      unsigned int flags)
{
    RT_CALL(cudaHostGetDevicePointer, v3020, pDevice, pHost, flags);
    if (!pDevice)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr d = 0;
    CUresult r = cuMemHostGetDevicePointer(&d, pHost, flags);
    if (r == CUDA_SUCCESS)
        *pDevice = (void *)(uintptr_t)d;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    RT_CALL(cudaHostGetFlags, v3020, pFlags, pHost);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemHostGetFlags(pFlags, pHost)));
}

RT_API cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    RT_CALL(cudaIpcGetMemHandle, v4010, handle, devPtr);
    RT_NEED_CTX();
    RT_RETURN(
        to_rt(cuIpcGetMemHandle((CUipcMemHandle *)(void *)handle, (CUdeviceptr)(uintptr_t)devPtr)));
}

RT_API cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                                  unsigned int flags)
{
    RT_CALL(cudaIpcOpenMemHandle, v4010, devPtr, handle, flags);
    if (!devPtr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUipcMemHandle h;
    memcpy(&h, &handle, sizeof(h));
    CUdeviceptr d = 0;
    CUresult r = cuIpcOpenMemHandle(&d, h, flags);
    if (r == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)d;
    RT_RETURN(r == CUDA_ERROR_INVALID_CONTEXT ? cudaErrorDeviceUninitialized : to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void *devPtr)
{
    RT_CALL(cudaIpcCloseMemHandle, v4010, devPtr);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuIpcCloseMemHandle((CUdeviceptr)(uintptr_t)devPtr)));
}

RT_API cudaError_t CUDARTAPI cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event)
{
    RT_CALL(cudaIpcGetEventHandle, v4010, handle, event);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuIpcGetEventHandle((CUipcEventHandle *)(void *)handle, event)));
}

RT_API cudaError_t CUDARTAPI cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle)
{
    RT_CALL(cudaIpcOpenEventHandle, v4010, event, handle);
    RT_NEED_CTX();
    CUipcEventHandle h;
    memcpy(&h, &handle, sizeof(h));
    RT_RETURN(to_rt(cuIpcOpenEventHandle(event, h)));
}

RT_API cudaError_t CUDARTAPI
cudaMemPoolExportToShareableHandle(void *shareableHandle, cudaMemPool_t memPool,
                                   enum cudaMemAllocationHandleType handleType, unsigned int flags)
{
    RT_CALL(cudaMemPoolExportToShareableHandle, v11020, shareableHandle, memPool, handleType,
            flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPoolExportToShareableHandle(
        shareableHandle, memPool, (CUmemAllocationHandleType)handleType, flags)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolImportFromShareableHandle(
    cudaMemPool_t *memPool, void *shareableHandle, enum cudaMemAllocationHandleType handleType,
    unsigned int flags)
{
    RT_CALL(cudaMemPoolImportFromShareableHandle, v11020, memPool, shareableHandle, handleType,
            flags);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPoolImportFromShareableHandle(
        memPool, shareableHandle, (CUmemAllocationHandleType)handleType, flags)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolExportPointer(struct cudaMemPoolPtrExportData *exportData,
                                                      void *ptr)
{
    RT_CALL(cudaMemPoolExportPointer, v11020, exportData, ptr);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPoolExportPointer((CUmemPoolPtrExportData *)(void *)exportData,
                                           (CUdeviceptr)(uintptr_t)ptr)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolImportPointer(void **ptr, cudaMemPool_t memPool,
                                                      struct cudaMemPoolPtrExportData *exportData)
{
    RT_CALL(cudaMemPoolImportPointer, v11020, ptr, memPool, exportData);
    if (!ptr)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUdeviceptr d = 0;
    CUresult r = cuMemPoolImportPointer(&d, memPool, (CUmemPoolPtrExportData *)(void *)exportData);
    if (r == CUDA_SUCCESS)
        *ptr = (void *)(uintptr_t)d;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolSetAccess(cudaMemPool_t memPool,
                                                  const struct cudaMemAccessDesc *descList,
                                                  size_t count)
{
    RT_CALL(cudaMemPoolSetAccess, v11020, memPool, descList, count);
    RT_NEED_CTX();
    /* cudaMemAccessDesc and CUmemAccessDesc have the same layout */
    RT_RETURN(
        to_rt(cuMemPoolSetAccess(memPool, (const CUmemAccessDesc *)(const void *)descList, count)));
}

RT_API cudaError_t CUDARTAPI cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags,
                                                  cudaMemPool_t memPool,
                                                  struct cudaMemLocation *location)
{
    RT_CALL(cudaMemPoolGetAccess, v11020, flags, memPool, location);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPoolGetAccess((CUmemAccess_flags *)flags, memPool,
                                       (CUmemLocation *)(void *)location)));
}

static CUmemLocation to_cu_loc(struct cudaMemLocation l)
{
    CUmemLocation c;
    memset(&c, 0, sizeof(c));
    c.type = (CUmemLocationType)l.type;
    c.id = l.id;
    return c;
}

RT_API cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *devPtr, size_t count,
                                                  struct cudaMemLocation location,
                                                  unsigned int flags, cudaStream_t stream)
{
    RT_CALL(cudaMemPrefetchAsync, v12020, devPtr, count, location, flags, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemPrefetchAsync((CUdeviceptr)(uintptr_t)devPtr, count, to_cu_loc(location),
                                       flags, stream)));
}

RT_API cudaError_t CUDARTAPI cudaMemAdvise(const void *devPtr, size_t count,
                                           enum cudaMemoryAdvise advice,
                                           struct cudaMemLocation location)
{
    RT_CALL(cudaMemAdvise, v12020, devPtr, count, advice, location);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemAdvise((CUdeviceptr)(uintptr_t)devPtr, count, (CUmem_advise)advice,
                                to_cu_loc(location))));
}

/* ------------------------------------------------------------------------------------------ */
/* 2D/3D copies, peer copies */

static CUresult copy2d_rt(void *dst, size_t dpitch, cudaArray_t dstArray, size_t dx, size_t dy,
                          const void *src, size_t spitch, cudaArray_const_t srcArray, size_t sx,
                          size_t sy, size_t width, size_t height, enum cudaMemcpyKind kind,
                          int async, cudaStream_t stream)
{
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof(c));
    if (srcArray) {
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        c.srcArray = (CUarray)(void *)(uintptr_t)srcArray;
    } else {
        c.srcMemoryType = mem_type(kind, 1);
        c.srcHost = src;
        c.srcDevice = (CUdeviceptr)(uintptr_t)src;
        c.srcPitch = spitch;
    }
    c.srcXInBytes = sx;
    c.srcY = sy;
    if (dstArray) {
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        c.dstArray = (CUarray)(void *)dstArray;
    } else {
        c.dstMemoryType = mem_type(kind, 0);
        c.dstHost = dst;
        c.dstDevice = (CUdeviceptr)(uintptr_t)dst;
        c.dstPitch = dpitch;
    }
    c.dstXInBytes = dx;
    c.dstY = dy;
    c.WidthInBytes = width;
    c.Height = height;
    return async ? cuMemcpy2DAsync(&c, stream) : cuMemcpy2D(&c);
}

static int kind_ok(enum cudaMemcpyKind kind)
{
    return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault;
}

RT_API cudaError_t CUDARTAPI cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                          size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_CALL(cudaMemcpy2D, v3020, dst, dpitch, src, spitch, width, height, kind);
    RT_NEED_CTX();
    if (!kind_ok(kind))
        RT_RETURN(cudaErrorInvalidMemcpyDirection);
    if (dpitch < width || spitch < width)
        RT_RETURN(cudaErrorInvalidPitchValue);
    RT_RETURN(to_rt(
        copy2d_rt(dst, dpitch, NULL, 0, 0, src, spitch, NULL, 0, 0, width, height, kind, 0, NULL)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                               size_t spitch, size_t width, size_t height,
                                               enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_CALL(cudaMemcpy2DAsync, v3020, dst, dpitch, src, spitch, width, height, kind, stream);
    RT_NEED_CTX();
    if (!kind_ok(kind))
        RT_RETURN(cudaErrorInvalidMemcpyDirection);
    if (dpitch < width || spitch < width)
        RT_RETURN(cudaErrorInvalidPitchValue);
    RT_RETURN(to_rt(copy2d_rt(dst, dpitch, NULL, 0, 0, src, spitch, NULL, 0, 0, width, height, kind,
                              1, stream)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                 const void *src, size_t spitch, size_t width,
                                                 size_t height, enum cudaMemcpyKind kind)
{
    RT_CALL(cudaMemcpy2DToArray, v3020, dst, wOffset, hOffset, src, spitch, width, height, kind);
    RT_NEED_CTX();
    if (!dst || !kind_ok(kind))
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(copy2d_rt(NULL, 0, dst, wOffset, hOffset, src, spitch, NULL, 0, 0, width,
                              height, kind, 0, NULL)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src,
                                                   size_t wOffset, size_t hOffset, size_t width,
                                                   size_t height, enum cudaMemcpyKind kind)
{
    RT_CALL(cudaMemcpy2DFromArray, v3020, dst, dpitch, src, wOffset, hOffset, width, height, kind);
    RT_NEED_CTX();
    if (!src || !kind_ok(kind))
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(copy2d_rt(dst, dpitch, NULL, 0, 0, NULL, 0, src, wOffset, hOffset, width,
                              height, kind, 0, NULL)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                               const void *src, size_t count,
                                               enum cudaMemcpyKind kind)
{
    RT_CALL(cudaMemcpyToArray, v3020, dst, wOffset, hOffset, src, count, kind);
    RT_NEED_CTX();
    if (!dst || !kind_ok(kind))
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(copy2d_rt(NULL, 0, dst, wOffset, hOffset, src, count, NULL, 0, 0, count, 1,
                              kind, 0, NULL)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpyFromArray(void *dst, cudaArray_const_t src, size_t wOffset,
                                                 size_t hOffset, size_t count,
                                                 enum cudaMemcpyKind kind)
{
    RT_CALL(cudaMemcpyFromArray, v3020, dst, src, wOffset, hOffset, count, kind);
    RT_NEED_CTX();
    if (!src || !kind_ok(kind))
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(copy2d_rt(dst, count, NULL, 0, 0, NULL, 0, src, wOffset, hOffset, count, 1,
                              kind, 0, NULL)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    RT_CALL(cudaMemcpy3D, v3020, p);
    RT_NEED_CTX();
    CUDA_MEMCPY3D c;
    if (!to_copy3d(p, &c))
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(cuMemcpy3D(&c)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p,
                                               cudaStream_t stream)
{
    RT_CALL(cudaMemcpy3DAsync, v3020, p, stream);
    RT_NEED_CTX();
    CUDA_MEMCPY3D c;
    if (!to_copy3d(p, &c))
        RT_RETURN(cudaErrorInvalidValue);
    RT_RETURN(to_rt(cuMemcpy3DAsync(&c, stream)));
}

RT_API cudaError_t CUDARTAPI cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width,
                                          size_t height)
{
    RT_CALL(cudaMemset2D, v3020, devPtr, pitch, value, width, height);
    RT_NEED_CTX();
    RT_RETURN(to_rt(
        cuMemsetD2D8((CUdeviceptr)(uintptr_t)devPtr, pitch, (unsigned char)value, width, height)));
}

RT_API cudaError_t CUDARTAPI cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width,
                                               size_t height, cudaStream_t stream)
{
    RT_CALL(cudaMemset2DAsync, v3020, devPtr, pitch, value, width, height, stream);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMemsetD2D8Async((CUdeviceptr)(uintptr_t)devPtr, pitch, (unsigned char)value,
                                      width, height, stream)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpyPeer(void *dst, int dstDevice, const void *src,
                                            int srcDevice, size_t count)
{
    RT_CALL(cudaMemcpyPeer, v4000, dst, dstDevice, src, srcDevice, count);
    RT_NEED_CTX();
    CUcontext dc = simcuda_primary_ctx(dstDevice, 1), sc = simcuda_primary_ctx(srcDevice, 1);
    if (!dc || !sc)
        RT_RETURN(cudaErrorInvalidDevice);
    RT_RETURN(to_rt(
        cuMemcpyPeer((CUdeviceptr)(uintptr_t)dst, dc, (CUdeviceptr)(uintptr_t)src, sc, count)));
}

RT_API cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src,
                                                 int srcDevice, size_t count, cudaStream_t stream)
{
    RT_CALL(cudaMemcpyPeerAsync, v4000, dst, dstDevice, src, srcDevice, count, stream);
    RT_NEED_CTX();
    CUcontext dc = simcuda_primary_ctx(dstDevice, 1), sc = simcuda_primary_ctx(srcDevice, 1);
    if (!dc || !sc)
        RT_RETURN(cudaErrorInvalidDevice);
    RT_RETURN(to_rt(cuMemcpyPeerAsync((CUdeviceptr)(uintptr_t)dst, dc, (CUdeviceptr)(uintptr_t)src,
                                      sc, count, stream)));
}

/* ------------------------------------------------------------------------------------------ */
/* mipmapped arrays, textures, kernels' attributes and occupancy */

RT_API cudaError_t CUDARTAPI cudaMallocMipmappedArray(cudaMipmappedArray_t *mipmappedArray,
                                                      const struct cudaChannelFormatDesc *desc,
                                                      struct cudaExtent extent,
                                                      unsigned int numLevels, unsigned int flags)
{
    RT_CALL(cudaMallocMipmappedArray, v5000, mipmappedArray, desc, extent, numLevels, flags);
    if (!mipmappedArray || !desc)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUDA_ARRAY3D_DESCRIPTOR ad;
    memset(&ad, 0, sizeof(ad));
    ad.Width = extent.width;
    ad.Height = extent.height;
    ad.Depth = extent.depth;
    ad.Format = channel_format(desc, &ad.NumChannels);
    ad.Flags = flags;
    CUmipmappedArray m = NULL;
    CUresult r = cuMipmappedArrayCreate(&m, &ad, numLevels);
    if (r == CUDA_SUCCESS)
        *mipmappedArray = (cudaMipmappedArray_t)(void *)m;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaGetMipmappedArrayLevel(cudaArray_t *levelArray,
                                                        cudaMipmappedArray_const_t mipmappedArray,
                                                        unsigned int level)
{
    RT_CALL(cudaGetMipmappedArrayLevel, v5000, levelArray, mipmappedArray, level);
    RT_NEED_CTX();
    CUarray a = NULL;
    CUresult r =
        cuMipmappedArrayGetLevel(&a, (CUmipmappedArray)(void *)(uintptr_t)mipmappedArray, level);
    if (r == CUDA_SUCCESS && levelArray)
        *levelArray = (cudaArray_t)(void *)a;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray)
{
    RT_CALL(cudaFreeMipmappedArray, v5000, mipmappedArray);
    if (!mipmappedArray)
        RT_RETURN(cudaSuccess);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuMipmappedArrayDestroy((CUmipmappedArray)(void *)mipmappedArray)));
}

RT_API cudaError_t CUDARTAPI cudaCreateTextureObject(
    cudaTextureObject_t *pTexObject, const struct cudaResourceDesc *pResDesc,
    const struct cudaTextureDesc *pTexDesc, const struct cudaResourceViewDesc *pResViewDesc)
{
    RT_CALL(cudaCreateTextureObject, v5000, pTexObject, pResDesc, pTexDesc, pResViewDesc);
    if (!pTexObject || !pResDesc || !pTexDesc)
        RT_RETURN(cudaErrorInvalidValue);
    RT_NEED_CTX();
    CUDA_RESOURCE_DESC rd;
    CUDA_TEXTURE_DESC td;
    memset(&rd, 0, sizeof(rd));
    memset(&td, 0, sizeof(td));
    rd.resType = (CUresourcetype)pResDesc->resType;
    switch (pResDesc->resType) {
    case cudaResourceTypeArray:
        rd.res.array.hArray = (CUarray)(void *)pResDesc->res.array.array;
        break;
    case cudaResourceTypeMipmappedArray:
        rd.res.mipmap.hMipmappedArray = (CUmipmappedArray)(void *)pResDesc->res.mipmap.mipmap;
        break;
    case cudaResourceTypeLinear:
        rd.res.linear.devPtr = (CUdeviceptr)(uintptr_t)pResDesc->res.linear.devPtr;
        rd.res.linear.sizeInBytes = pResDesc->res.linear.sizeInBytes;
        break;
    case cudaResourceTypePitch2D:
        rd.res.pitch2D.devPtr = (CUdeviceptr)(uintptr_t)pResDesc->res.pitch2D.devPtr;
        rd.res.pitch2D.width = pResDesc->res.pitch2D.width;
        rd.res.pitch2D.height = pResDesc->res.pitch2D.height;
        rd.res.pitch2D.pitchInBytes = pResDesc->res.pitch2D.pitchInBytes;
        break;
    default: RT_RETURN(cudaErrorInvalidValue);
    }
    for (int i = 0; i < 3; i++)
        td.addressMode[i] = (CUaddress_mode)pTexDesc->addressMode[i];
    td.filterMode = (CUfilter_mode)pTexDesc->filterMode;
    td.flags = (pTexDesc->readMode == cudaReadModeElementType ? CU_TRSF_READ_AS_INTEGER : 0) |
               (pTexDesc->normalizedCoords ? CU_TRSF_NORMALIZED_COORDINATES : 0);
    CUtexObject t = 0;
    CUresult r = cuTexObjectCreate(&t, &rd, &td, NULL);
    if (r == CUDA_SUCCESS)
        *pTexObject = (cudaTextureObject_t)t;
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaDestroyTextureObject(cudaTextureObject_t texObject)
{
    RT_CALL(cudaDestroyTextureObject, v5000, texObject);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuTexObjectDestroy((CUtexObject)texObject)));
}

RT_API cudaError_t CUDARTAPI cudaFuncGetAttributes(struct cudaFuncAttributes *attr,
                                                   const void *func)
{
    RT_CALL(cudaFuncGetAttributes, v3020, attr, func);
    if (!attr)
        RT_RETURN(cudaErrorInvalidValue);
    kernel_entry *k = find_kernel(func);
    if (!k)
        RT_RETURN(cudaErrorInvalidDeviceFunction);
    RT_NEED_CTX();
    memset(attr, 0, sizeof(*attr));
    CUfunction f = (CUfunction)&k->f;
    CUresult r =
        cuFuncGetAttribute(&attr->maxThreadsPerBlock, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
    if (r == CUDA_SUCCESS)
        r = cuFuncGetAttribute(&attr->numRegs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
    if (r == CUDA_SUCCESS)
        r = cuFuncGetAttribute(&attr->ptxVersion, CU_FUNC_ATTRIBUTE_PTX_VERSION, f);
    if (r == CUDA_SUCCESS)
        r = cuFuncGetAttribute(&attr->binaryVersion, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f);
    if (r == CUDA_SUCCESS)
        r = cuFuncGetAttribute(&attr->maxDynamicSharedSizeBytes,
                               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f);
    RT_RETURN(to_rt(r));
}

RT_API cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks,
                                                                           const void *func,
                                                                           int blockSize,
                                                                           size_t dynamicSMemSize)
{
    RT_CALL(cudaOccupancyMaxActiveBlocksPerMultiprocessor, v6050, numBlocks, func, blockSize,
            dynamicSMemSize);
    kernel_entry *k = find_kernel(func);
    if (!k)
        RT_RETURN(cudaErrorInvalidDeviceFunction);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, (CUfunction)&k->f,
                                                                blockSize, dynamicSMemSize)));
}

RT_API cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize, unsigned int flags)
{
    RT_CALL(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, v7000, numBlocks, func,
            blockSize, dynamicSMemSize, flags);
    kernel_entry *k = find_kernel(func);
    if (!k)
        RT_RETURN(cudaErrorInvalidDeviceFunction);
    RT_NEED_CTX();
    RT_RETURN(to_rt(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        numBlocks, (CUfunction)&k->f, blockSize, dynamicSMemSize, flags)));
}
