// Basic runtime API program compiled by nvcc -cudart shared: device memory, copies, a kernel
// launch, a __device__ variable (static device memory), streams and memory info.
#include <cuda_runtime.h>
#include <string.h>
#include "sim_test_util.h"

__device__ float g_table[1000];
__device__ int g_counter;

__global__ void scale(float *p, int n, float f)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = p[i] * f + g_table[i % 1000] + g_counter;
}

int main()
{
    int count = 0;
    CHECK(cudaGetDeviceCount(&count), cudaSuccess);
    EXPECT(count == 1);
    float *d = NULL;
    CHECK(cudaMalloc(&d, 1000 * sizeof(float)), cudaSuccess);
    float h[1000];
    memset(h, 1, sizeof(h));
    CHECK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice), cudaSuccess);
    CHECK(cudaMemset(d, 0, sizeof(h)), cudaSuccess);
    scale<<<4, 256>>>(d, 1000, 2.0f);
    CHECK(cudaGetLastError(), cudaSuccess);
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s), cudaSuccess);
    scale<<<1, 32, 0, s>>>(d, 10, 1.0f);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT(h[0] == 0.0f); /* device contents are not simulated: reads give zeros */
    size_t free_b = 0, total_b = 0;
    CHECK(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    EXPECT(total_b == 80ull << 30);
    EXPECT(free_b == total_b - (300ull << 20) - 4096 - 256 - 4096);
    CHECK(cudaFree(d), cudaSuccess);
    CHECK(cudaFree((void *)0x1234), cudaErrorInvalidValue);
    CHECK(cudaGetLastError(), cudaErrorInvalidValue);
    CHECK(cudaGetLastError(), cudaSuccess);
    EXPECT(strcmp(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory") == 0);
    CHECK(cudaStreamDestroy(s), cudaSuccess);
    CHECK(cudaDeviceSynchronize(), cudaSuccess);
    printf("basic: ok\n");
    return 0;
}
