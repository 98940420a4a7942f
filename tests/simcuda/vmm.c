/* Driver API only: initialization, primary context, virtual memory management (reserve, create,
 * map, set access, unmap, release, free) and its effect on cuMemGetInfo. */
#include <cuda.h>
#include <stdint.h>

#include "sim_test_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    CUdeviceptr dummy = 0;
    CHECK(cuMemAlloc(&dummy, 16), CUDA_ERROR_NOT_INITIALIZED);
    CHECK(cuInit(0), CUDA_SUCCESS);
    int version = 0;
    CHECK(cuDriverGetVersion(&version), CUDA_SUCCESS);
    EXPECT(version == CUDA_VERSION);
    CUdevice dev = -1;
    CHECK(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK(cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    char name[64];
    CHECK(cuDeviceGetName(name, sizeof(name), 0), CUDA_SUCCESS);
    size_t total = 0;
    CHECK(cuDeviceTotalMem(&total, 0), CUDA_SUCCESS);
    EXPECT(total == 80ull << 30);
    CUuuid uuid;
    CHECK(cuDeviceGetUuid(&uuid, 0), CUDA_SUCCESS);
    int vmm = 0;
    CHECK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
          CUDA_SUCCESS);
    EXPECT(vmm == 1);

    CHECK(cuMemAlloc(&dummy, 16), CUDA_ERROR_INVALID_CONTEXT); /* no current context yet */
    CUcontext ctx = NULL;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUcontext cur = NULL;
    CHECK(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    EXPECT(cur == ctx);

    size_t free0 = 0;
    CHECK(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
    EXPECT(free0 == total - 300 * MIB);

    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          CUDA_SUCCESS);
    EXPECT(gran == 2 * MIB);

    CUdeviceptr va = 0;
    CHECK(cuMemAddressReserve(&va, 3 * MIB, 0, 0, 0),
          CUDA_ERROR_INVALID_VALUE); /* not a granule multiple */
    CHECK(cuMemAddressReserve(&va, 64 * MIB, 0, 0, 0), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h1 = 0, h2 = 0;
    CHECK(cuMemCreate(&h1, 1 * MIB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemCreate(&h1, 8 * MIB, &prop, 0), CUDA_SUCCESS);
    CHECK(cuMemCreate(&h2, 4 * MIB, &prop, 0), CUDA_SUCCESS);
    size_t free1 = 0;
    CHECK(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
    EXPECT(free0 - free1 == 12 * MIB); /* physical memory counts when created, mapped or not */

    CHECK(cuMemMap(va, 8 * MIB, 0, h1, 0), CUDA_SUCCESS);
    CHECK(cuMemMap(va + 8 * MIB, 4 * MIB, 0, h2, 0), CUDA_SUCCESS);
    CHECK(cuMemMap(va, 2 * MIB, 0, h2, 0), CUDA_ERROR_INVALID_VALUE); /* already mapped */
    CUmemAccessDesc access = {0};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(va, 12 * MIB, &access, 1), CUDA_SUCCESS);

    /* releasing a mapped handle keeps the memory until it is unmapped */
    CHECK(cuMemRelease(h1), CUDA_SUCCESS);
    size_t free2 = 0;
    CHECK(cuMemGetInfo(&free2, &total), CUDA_SUCCESS);
    EXPECT(free2 == free1);
    CHECK(cuMemUnmap(va, 8 * MIB), CUDA_SUCCESS);
    CHECK(cuMemGetInfo(&free2, &total), CUDA_SUCCESS);
    EXPECT(free2 == free1 + 8 * MIB);
    CHECK(cuMemAddressFree(va, 64 * MIB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    CHECK(cuMemUnmap(va + 8 * MIB, 4 * MIB), CUDA_SUCCESS);
    CHECK(cuMemRelease(h2), CUDA_SUCCESS);
    CHECK(cuMemRelease(h2), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemAddressFree(va, 64 * MIB), CUDA_SUCCESS);
    CHECK(cuMemGetInfo(&free2, &total), CUDA_SUCCESS);
    EXPECT(free2 == free0);

    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, 1 << 20), CUDA_SUCCESS);
    CHECK(cuMemFree(p), CUDA_SUCCESS);
    CHECK(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CHECK(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    printf("vmm: ok\n");
    return 0;
}
