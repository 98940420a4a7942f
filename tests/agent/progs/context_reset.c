/* What survives a context's destruction (docs/collectors.md, point 5). cuda.h (cuCtxDestroy): it
 * "will not destroy memory allocations by cuMemCreate(), cuMemAllocAsync() and
 * cuMemAllocFromPoolAsync()"; cuda_runtime_api.h (cudaDeviceReset): the same for cudaMallocAsync
 * and cudaMallocFromPoolAsync. Allocates 8 MiB with cudaMalloc (destroyed by the reset), 16 MiB
 * with cudaMallocAsync and a 4 MiB VMM handle (both survive), resets the device, then frees the
 * survivors explicitly. Prints "A label 0x.." and "FREE <label> <result>" for the frees after the
 * reset. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    void *d = NULL, *a = NULL;
    CHECK(cudaSetDevice(0), cudaSuccess);
    CHECK(cudaMalloc(&d, 8 * MIB), cudaSuccess);
    SHOWP("malloc", d);
    CHECK(cudaMallocAsync(&a, 16 * MIB, 0), cudaSuccess);
    SHOWP("async", a);
    CHECK(cudaStreamSynchronize(0), cudaSuccess);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    CHECK(cuMemCreate(&h, 4 * MIB, &prop, 0), CUDA_SUCCESS);
    show("vmm", h);
    CHECK(cudaDeviceReset(), cudaSuccess);
    CHECK(cudaSetDevice(0), cudaSuccess);
    printf("FREE async %d\n", (int)cudaFreeAsync(a, 0));
    CHECK(cudaStreamSynchronize(0), cudaSuccess);
    printf("FREE vmm %d\n", (int)cuMemRelease(h));
    printf("context_reset: ok\n");
    return 0;
}
