/* Out of memory at the configured capacity: SIMCUDA_DEVICE_MEMORY=1 GiB and
 * SIMCUDA_CONTEXT_OVERHEAD=100 MiB leave 924 MiB for allocations of every device kind. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "sim_test_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    size_t free0 = 0, total = 0;
    CHECK(cudaMemGetInfo(&free0, &total), cudaSuccess);
    EXPECT(total == 1024 * MIB);
    EXPECT(free0 == 924 * MIB);

    void *big = NULL;
    CHECK(cudaMalloc(&big, 925 * MIB), cudaErrorMemoryAllocation);
    CHECK(cudaGetLastError(), cudaErrorMemoryAllocation);
    CHECK(cudaMalloc(&big, 900 * MIB), cudaSuccess);
    void *rest = NULL;
    CHECK(cudaMalloc(&rest, 24 * MIB), cudaSuccess);
    size_t free1 = 0;
    CHECK(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT(free1 == 0);
    void *one = NULL;
    CHECK(cudaMalloc(&one, 1), cudaErrorMemoryAllocation);
    CHECK(cudaMallocAsync(&one, 1, 0), cudaErrorMemoryAllocation);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    CHECK(cuMemCreate(&h, 2 * MIB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    /* host memory does not come from the device */
    void *host = NULL;
    CHECK(cudaMallocHost(&host, 4 * MIB), cudaSuccess);
    CHECK(cudaFreeHost(host), cudaSuccess);

    CHECK(cudaFree(rest), cudaSuccess);
    CHECK(cudaMallocAsync(&one, 1, 0), cudaSuccess);                       /* pools grow by 2 MiB */
    CHECK(cudaMallocAsync(&rest, 24 * MIB, 0), cudaErrorMemoryAllocation); /* needs 24 MiB more */
    CHECK(cudaFreeAsync(one, 0), cudaSuccess);
    CHECK(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(cudaMalloc(&rest, 24 * MIB), cudaSuccess);
    CHECK(cudaFree(rest), cudaSuccess);
    CHECK(cudaFree(big), cudaSuccess);
    printf("oom: ok\n");
    return 0;
}
