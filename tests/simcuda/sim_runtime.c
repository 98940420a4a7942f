/* simcuda runtime: libcudart.so.13 for tests. Implements the runtime API over the simulated
 * driver's public entry points (so runtime and driver callbacks nest as on a real system), the
 * registration and launch entry points nvcc emits, and per-thread device and last-error state. */
#include "sim_internal.h"

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
    prop->major = 9;
    prop->minor = 0;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->multiProcessorCount = 132;
    prop->sharedMemPerBlock = 49152;
    prop->unifiedAddressing = 1;
    prop->managedMemory = 1;
    prop->concurrentManagedAccess = 1;
    prop->memoryPoolsSupported = 1;
    prop->pciBusID = device + 1;
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
