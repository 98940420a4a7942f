/* Every memory API family of the driver, once each, in a fixed order, with failing calls.
 * Prints the addresses and handles it got; test_api_families.py holds the expected records. */
#include <cuda.h>
#include <string.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    CHECK(cuInit(0), CUDA_SUCCESS);
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx), CUDA_SUCCESS);

    CUdeviceptr d1;
    CHECK(cuMemAlloc(&d1, 4096), CUDA_SUCCESS);
    show("d1", d1);
    CUdeviceptr pitched;
    size_t pitch = 0;
    CHECK(cuMemAllocPitch(&pitched, &pitch, 1000, 10, 4), CUDA_SUCCESS);
    EXPECT(pitch == 1024);
    show("pitched", pitched);

    void *host = NULL;
    CHECK(cuMemAllocHost(&host, 8192), CUDA_SUCCESS);
    SHOWP("host", host);
    void *halloc = NULL;
    CHECK(cuMemHostAlloc(&halloc, 12288, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    SHOWP("halloc", halloc);
    static char reg[16384];
    CHECK(cuMemHostRegister(reg, sizeof reg, 0), CUDA_SUCCESS);
    SHOWP("reg", reg);
    CHECK(cuMemHostUnregister(reg), CUDA_SUCCESS);
    CHECK(cuMemHostUnregister(reg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

    CUdeviceptr managed;
    CHECK(cuMemAllocManaged(&managed, 2 * MIB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    show("managed", managed);

    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a1;
    CHECK(cuMemAllocAsync(&a1, 3000, s), CUDA_SUCCESS);
    show("a1", a1);
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &pp), CUDA_SUCCESS);
    SHOWP("pool", pool);
    cuuint64_t thr = 8 * MIB;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr), CUDA_SUCCESS);
    CUdeviceptr a2;
    CHECK(cuMemAllocFromPoolAsync(&a2, 6000, pool, s), CUDA_SUCCESS);
    show("a2", a2);
    CHECK(cuMemFreeAsync(a1, s), CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(a2, s), CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    CHECK(cuMemPoolDestroy(pool), CUDA_SUCCESS);

    /* VMM: reserve 4 MiB, two 2 MiB physical allocations mapped side by side, one unmap */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          CUDA_SUCCESS);
    EXPECT(gran == 2 * MIB);
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, 4 * MIB, 0, 0, 0), CUDA_SUCCESS);
    show("va", va);
    CUmemGenericAllocationHandle h1, h2;
    CHECK(cuMemCreate(&h1, 2 * MIB, &prop, 0), CUDA_SUCCESS);
    show("h1", h1);
    CHECK(cuMemCreate(&h2, 2 * MIB, &prop, 0), CUDA_SUCCESS);
    show("h2", h2);
    CHECK(cuMemMap(va, 2 * MIB, 0, h1, 0), CUDA_SUCCESS);
    CHECK(cuMemMap(va + 2 * MIB, 2 * MIB, 0, h2, 0), CUDA_SUCCESS);
    CHECK(cuMemRelease(h1), CUDA_SUCCESS); /* kept until unmapped */
    CHECK(cuMemRelease(h2), CUDA_SUCCESS);
    CHECK(cuMemUnmap(va, 4 * MIB), CUDA_SUCCESS);
    CHECK(cuMemAddressFree(va, 4 * MIB), CUDA_SUCCESS);

    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR ad = {256, 256, CU_AD_FORMAT_FLOAT, 4};
    CHECK(cuArrayCreate(&arr, &ad), CUDA_SUCCESS);
    SHOWP("arr", arr);
    CUarray arr3;
    CUDA_ARRAY3D_DESCRIPTOR ad3;
    memset(&ad3, 0, sizeof ad3);
    ad3.Width = 32;
    ad3.Height = 16;
    ad3.Depth = 8;
    ad3.Format = CU_AD_FORMAT_UNSIGNED_INT16;
    ad3.NumChannels = 2;
    CHECK(cuArray3DCreate(&arr3, &ad3), CUDA_SUCCESS);
    SHOWP("arr3", arr3);
    CHECK(cuArrayDestroy(arr3), CUDA_SUCCESS);
    CHECK(cuArrayDestroy(arr), CUDA_SUCCESS);

    CHECK(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK(cuMemFree(managed), CUDA_SUCCESS);
    CHECK(cuMemFreeHost(halloc), CUDA_SUCCESS);
    CHECK(cuMemFreeHost(host), CUDA_SUCCESS);
    CHECK(cuMemFree(pitched), CUDA_SUCCESS);
    CHECK(cuMemFree(d1), CUDA_SUCCESS);
    CUdeviceptr bad;
    CHECK(cuMemAlloc(&bad, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
    printf("drv_apis: ok\n");
    return 0;
}
