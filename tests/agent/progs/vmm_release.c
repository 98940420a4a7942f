/* VMM memory lives until its last mapping and last reference go (docs/collectors.md, point 2;
 * cuda.h cuMemRelease, cuMemRetainAllocationHandle). Part 1: create + map 64 MiB, release the
 * handle while it is mapped, then cuMemAlloc 16 MiB: 80 MiB are in use at that moment; the unmap
 * frees the 64. Part 2, NCCL's free path (ncclCuMemFree: retain the handle from the address,
 * release it, unmap, release again, free the address range) on a 4 MiB handle: one free, at the
 * last release. Part 2 needs cuMemRetainAllocationHandle from the driver; without it (or when it
 * fails) the program prints "SKIP retain" and leaves part 2 out of the checks. Prints the handles
 * ("A h1 0x..", "A h2 0x..") and the allocation ("A d 0x.."). */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *, void *);

static CUdeviceptr map_new(CUmemGenericAllocationHandle *h, size_t size)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, size, 0, 0, 0), CUDA_SUCCESS);
    CHECK(cuMemCreate(h, size, &prop, 0), CUDA_SUCCESS);
    CHECK(cuMemMap(va, size, 0, *h, 0), CUDA_SUCCESS);
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(va, size, &acc, 1), CUDA_SUCCESS);
    return va;
}

int main(void)
{
    CHECK(cuInit(0), CUDA_SUCCESS);
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx), CUDA_SUCCESS);

    /* part 1 */
    CUmemGenericAllocationHandle h1;
    CUdeviceptr va1 = map_new(&h1, 64 * MIB);
    show("h1", h1);
    CHECK(cuMemRelease(h1), CUDA_SUCCESS); /* still mapped: nothing is freed */
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, 16 * MIB), CUDA_SUCCESS); /* 64 + 16 MiB in use */
    show("d", d);
    CHECK(cuMemFree(d), CUDA_SUCCESS);
    CHECK(cuMemUnmap(va1, 64 * MIB), CUDA_SUCCESS); /* the 64 MiB go here */
    CHECK(cuMemAddressFree(va1, 64 * MIB), CUDA_SUCCESS);

    /* part 2 */
    retain_fn retain = (retain_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cuMemRetainAllocationHandle");
    if (!retain) {
        printf("SKIP retain\n");
    } else {
        CUmemGenericAllocationHandle h2, again;
        CUdeviceptr va2 = map_new(&h2, 4 * MIB);
        show("h2", h2);
        CUresult r = retain(&again, (void *)(uintptr_t)va2);
        if (r != CUDA_SUCCESS) { /* a driver without it (a stub): undo part 2 */
            printf("SKIP retain %d\n", (int)r);
            CHECK(cuMemUnmap(va2, 4 * MIB), CUDA_SUCCESS);
            CHECK(cuMemRelease(h2), CUDA_SUCCESS);
            CHECK(cuMemAddressFree(va2, 4 * MIB), CUDA_SUCCESS);
            CHECK(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
            printf("vmm_release: ok\n");
            return 0;
        }
        EXPECT(again == h2);
        CHECK(cuMemRelease(again), CUDA_SUCCESS);
        CHECK(cuMemUnmap(va2, 4 * MIB), CUDA_SUCCESS);
        CHECK(cuMemRelease(again), CUDA_SUCCESS); /* the last reference: freed here */
        CHECK(cuMemAddressFree(va2, 4 * MIB), CUDA_SUCCESS);
    }
    CHECK(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
    printf("vmm_release: ok\n");
    return 0;
}
