/* A program whose first CUDA call is an allocation (cudaMalloc), then a second allocation, a
 * driver allocation through cuGetProcAddress, and frees: under SIMCUDA_LATE_INJECTION the tool is
 * loaded inside the first cudaMalloc and sees only its exit (test_failure_modes.py). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "sim_test_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    void *a = NULL, *b = NULL;
    CHECK(cudaMalloc(&a, 1 * MIB), cudaSuccess);
    CHECK(cudaMalloc(&b, 2 * MIB), cudaSuccess);
    /* as PyTorch reaches the driver: an entry point from the runtime */
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &q),
          cudaSuccess);
    EXPECT(fn && q == cudaDriverEntryPointSuccess);
    CUdeviceptr c = 0;
    CHECK(((CUresult(*)(CUdeviceptr *, size_t))fn)(&c, 3 * MIB), CUDA_SUCCESS);
    CHECK(cuMemFree(c), CUDA_SUCCESS);
    CHECK(cudaFree(b), cudaSuccess);
    CHECK(cudaFree(a), cudaSuccess);
    printf("first_alloc: ok\n");
    return 0;
}
