/* Where memory lives (docs/collectors.md, point 3): memory of another device, of the host and
 * managed memory must not be counted as the current device's. Two devices (SIMCUDA_DEVICE_COUNT=2):
 *  - "async1": cudaMallocAsync on a stream of device 1 while device 0 is current (cuda.h: from the
 *    current pool of the stream's device);
 *  - "pool1": cudaMallocFromPoolAsync from a pool created on device 1, device 0 current;
 *  - "hostpool": from a pool whose location is the host (cuda.h cuMemPoolCreate);
 *  - "managedpool": from a managed pool (allocType managed, no location);
 *  - "hostvmm": cuMemCreate with a host location (a VMM handle, printed as its value);
 *  - pools the driver makes itself, never created by the program (cuda.h:13578-13647, CUDA 13):
 *    "defhost" from cudaMemGetDefaultMemPool(HOST, pinned), "defmanaged" from
 *    cuMemGetDefaultMemPool(NONE, managed), "curnuma" from cudaMemGetMemPool(HOST_NUMA 0, pinned),
 *    "setnuma" from cuMemGetMemPool after cuMemSetMemPool made a created HOST_NUMA pool current,
 *    "dev1def" from device 1's default pool (cudaDeviceGetDefaultMemPool) and "dev1cur" from
 *    cuMemGetMemPool(DEVICE 1, pinned), both on a stream of device 0 (cuda.h: "Use
 *    cuMemAllocFromPoolAsync to specify asynchronous allocations from a device different than the
 *    one the stream runs on"). These must succeed (the simulated CUDA 13 driver models them).
 * A part the driver refuses prints "SKIP <label> <error>" and is left out. Prints "A label 0x..".*/
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

static void from_pool(const char *label, struct cudaMemPoolProps *props, size_t size,
                      cudaStream_t s)
{
    cudaMemPool_t pool;
    cudaError_t e = cudaMemPoolCreate(&pool, props);
    if (e != cudaSuccess) {
        printf("SKIP %s %d\n", label, (int)e);
        return;
    }
    void *p = NULL;
    e = cudaMallocFromPoolAsync(&p, size, pool, s);
    if (e != cudaSuccess) {
        printf("SKIP %s %d\n", label, (int)e);
    } else {
        SHOWP(label, p);
        CHECK(cudaFreeAsync(p, s), cudaSuccess);
        CHECK(cudaStreamSynchronize(s), cudaSuccess);
    }
    CHECK(cudaMemPoolDestroy(pool), cudaSuccess);
}

/* an allocation from a pool the program did not create, freed after the synchronization */
static void alloc_from(const char *label, cudaMemPool_t pool, size_t size, cudaStream_t s)
{
    void *p = NULL;
    CHECK(cudaMallocFromPoolAsync(&p, size, pool, s), cudaSuccess);
    SHOWP(label, p);
    CHECK(cudaFreeAsync(p, s), cudaSuccess);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
}

int main(void)
{
    int n = 0;
    CHECK(cudaGetDeviceCount(&n), cudaSuccess);
    EXPECT(n >= 2);
    cudaStream_t s0, s1;
    CHECK(cudaSetDevice(1), cudaSuccess);
    CHECK(cudaStreamCreate(&s1), cudaSuccess);
    CHECK(cudaSetDevice(0), cudaSuccess);
    CHECK(cudaStreamCreate(&s0), cudaSuccess);

    void *a = NULL;
    CHECK(cudaMallocAsync(&a, 4 * MIB, s1), cudaSuccess);
    SHOWP("async1", a);
    CHECK(cudaFreeAsync(a, s1), cudaSuccess);
    CHECK(cudaStreamSynchronize(s1), cudaSuccess);

    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 1;
    from_pool("pool1", &props, 6 * MIB, s1);

    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeHost;
    from_pool("hostpool", &props, 8 * MIB, s0);

    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypeManaged;
    props.location.type = cudaMemLocationTypeNone;
    from_pool("managedpool", &props, 10 * MIB, s0);

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CUmemGenericAllocationHandle h;
    CUresult r = cuMemCreate(&h, 2 * MIB, &prop, 0);
    if (r != CUDA_SUCCESS) {
        printf("SKIP hostvmm %d\n", (int)r);
    } else {
        show("hostvmm", h);
        CHECK(cuMemRelease(h), CUDA_SUCCESS);
    }
    /* CUDA 13's default and current pools by location */
    struct cudaMemLocation loc = {cudaMemLocationTypeHost, 0};
    cudaMemPool_t pool = NULL;
    CHECK(cudaMemGetDefaultMemPool(&pool, &loc, cudaMemAllocationTypePinned), cudaSuccess);
    alloc_from("defhost", pool, 12 * MIB, s0);
    CUmemLocation cloc = {CU_MEM_LOCATION_TYPE_NONE, 0};
    CUmemoryPool cpool = NULL;
    CHECK(cuMemGetDefaultMemPool(&cpool, &cloc, CU_MEM_ALLOCATION_TYPE_MANAGED), CUDA_SUCCESS);
    alloc_from("defmanaged", cpool, 14 * MIB, s0);
    loc.type = cudaMemLocationTypeHostNuma;
    CHECK(cudaMemGetMemPool(&pool, &loc, cudaMemAllocationTypePinned), cudaSuccess);
    alloc_from("curnuma", pool, 16 * MIB, s0);
    /* a created pool made current; the handle the agent learns from cuMemGetMemPool is the
     * created one's (known already): the same answer */
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeHostNuma;
    cudaMemPool_t numa = NULL;
    CHECK(cudaMemPoolCreate(&numa, &props), cudaSuccess);
    cloc.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    CHECK(cuMemSetMemPool(&cloc, CU_MEM_ALLOCATION_TYPE_PINNED, numa), CUDA_SUCCESS);
    CHECK(cuMemGetMemPool(&cpool, &cloc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
    EXPECT(cpool == numa);
    alloc_from("setnuma", cpool, 22 * MIB, s0);
    CHECK(cudaMemPoolDestroy(numa), cudaSuccess); /* the location's default is current again */
    CHECK(cuMemGetMemPool(&cpool, &cloc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
    EXPECT(cpool != numa);
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 1), cudaSuccess);
    alloc_from("dev1def", pool, 18 * MIB, s0);
    cloc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    cloc.id = 1;
    CHECK(cuMemGetMemPool(&cpool, &cloc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
    alloc_from("dev1cur", cpool, 20 * MIB, s0);

    CHECK(cudaStreamDestroy(s0), cudaSuccess);
    CHECK(cudaStreamDestroy(s1), cudaSuccess);
    printf("locations: ok\n");
    return 0;
}
