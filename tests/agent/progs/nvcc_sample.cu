// A CUDA C++ program built by nvcc -cudart shared: a kernel, a __device__ variable (static
// memory), NVTX ranges, a stream-ordered pool and a leak. Its stdout and exit status must be the
// same with and without gpumemprof.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>

__device__ float scale_factor[64];

__global__ void scale(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= scale_factor[i % 64];
}

#define CK(e)                                                                                      \
    do {                                                                                           \
        cudaError_t r_ = (e);                                                                      \
        if (r_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #e, cudaGetErrorString(r_));    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main()
{
    const int n = 1 << 20;
    nvtxRangePushA("setup");
    float *x = nullptr;
    CK(cudaMalloc(&x, n * sizeof(float)));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    nvtxRangePop();
    nvtxRangePushA("train");
    for (int step = 0; step < 3; step++) {
        nvtxRangePushA("step");
        float *tmp = nullptr;
        CK(cudaMallocAsync(&tmp, (step + 1) << 20, s));
        scale<<<(n + 255) / 256, 256, 0, s>>>(x, n);
        CK(cudaGetLastError());
        CK(cudaFreeAsync(tmp, s));
        nvtxRangePop();
    }
    CK(cudaStreamSynchronize(s));
    nvtxRangePop();
    float *leak = nullptr;
    CK(cudaMalloc(&leak, 12345));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(x));
    printf("nvcc_sample: 3 steps done, %d floats\n", n);
    return 5;
}
