/* Two simulated devices (SIMCUDA_DEVICE_COUNT=2): per-thread current device, one primary context
 * per device, distinct address ranges, per-device memory accounting. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "sim_test_util.h"

int main(void)
{
    int n = 0;
    CHECK(cudaGetDeviceCount(&n), cudaSuccess);
    EXPECT(n == 2);
    CHECK(cudaSetDevice(2), cudaErrorInvalidDevice);
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 1), cudaSuccess);
    EXPECT(strcmp(prop.name, "SimCUDA Device 1") == 0);
    EXPECT(prop.totalGlobalMem == 8ull << 30);

    void *a = NULL, *b = NULL;
    CHECK(cudaSetDevice(0), cudaSuccess);
    CHECK(cudaMalloc(&a, 1 << 20), cudaSuccess);
    CHECK(cudaSetDevice(1), cudaSuccess);
    int cur = -1;
    CHECK(cudaGetDevice(&cur), cudaSuccess);
    EXPECT(cur == 1);
    CHECK(cudaMalloc(&b, 1 << 20), cudaSuccess);
    EXPECT(a != b);
    size_t f1 = 0, t = 0;
    CHECK(cudaMemGetInfo(&f1, &t), cudaSuccess);
    EXPECT(f1 == t - (300u << 20) - (1u << 20));
    void *h = NULL;
    CHECK(cudaMallocHost(&h, 100), cudaSuccess);
    CHECK(cudaFreeHost(h), cudaSuccess);
    CHECK(cudaFree(b), cudaSuccess);
    CHECK(cudaSetDevice(0), cudaSuccess);
    CHECK(cudaFree(a), cudaSuccess);
    CHECK(cudaDeviceReset(), cudaSuccess);
    printf("multidev: ok\n");
    return 0;
}
