/* A program as built with --default-stream per-thread (compiled with and without
 * CUDA_API_PER_THREAD_DEFAULT_STREAM: cuda_runtime_api.h then maps cudaMallocAsync, cudaFreeAsync,
 * cudaMemcpy, cudaMemsetAsync, cudaStreamSynchronize to their _ptsz/_ptds entry points): stream-
 * ordered allocations on the default stream, a copy, a set, frees. test_failure_modes.py compares
 * what the agent records for both builds. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "sim_test_util.h"

int main(void)
{
    void *a = NULL, *b = NULL, *d = NULL;
    CHECK(cudaMalloc(&d, 4096), cudaSuccess);
    CHECK(cudaMallocAsync(&a, 3000, 0), cudaSuccess);
    CHECK(cudaMallocAsync(&b, 1 << 20, cudaStreamPerThread), cudaSuccess);
    CHECK(cudaMemsetAsync(a, 0, 3000, 0), cudaSuccess);
    char host[64];
    memset(host, 1, sizeof(host));
    CHECK(cudaMemcpy(d, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
    CHECK(cudaFreeAsync(b, cudaStreamPerThread), cudaSuccess);
    CHECK(cudaFreeAsync(a, 0), cudaSuccess);
    CHECK(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(cudaFree(d), cudaSuccess);
    printf("ptds_prog: ok\n");
    return 0;
}
