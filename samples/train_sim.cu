/* train_sim: a small "training job" in plain CUDA C, the sample gpumemprof's demo profiles.
 *
 * It does what a real training loop does to GPU memory, with NVTX ranges naming each phase:
 *   init/weights       model weights (cudaMalloc), kept to the end
 *   train/step/forward/layerN   activations from the stream-ordered pool (cudaMallocAsync)
 *   train/step/backward         gradients; activations freed (cudaFreeAsync)
 *   train/step/optimizer        optimizer state, allocated on the first step only
 *   train/step/metrics          a small buffer every step that is never freed: a leak that grows
 * plus a __device__ table (static device memory) and pinned host staging memory.
 *
 * Built with `nvcc -cudart shared` (kernels run on a real GPU; the simulated device records
 * launches without executing them). Without nvcc it compiles as C (no kernels). Prints one line per
 * step on stdout and exits 0. Usage: train_sim [STEPS] (default 8). */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#define LAYERS 4
#define MiB (1024ull * 1024ull)

#ifdef __CUDACC__
__device__ float lookup_table[1 << 16]; /* 256 KiB of static device memory */

__global__ void fill(float *p, size_t n, float v)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = v + lookup_table[i & 0xffff];
}
#endif

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "train_sim: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static void touch(void *p, size_t bytes, cudaStream_t s)
{
#ifdef __CUDACC__
    size_t n = bytes / sizeof(float);
    fill<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((float *)p, n, 1.0f);
#else
    check(cudaMemsetAsync(p, 0, bytes, s), "cudaMemsetAsync");
#endif
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 8;
    if (steps < 1 || steps > 100000) {
        fprintf(stderr, "usage: train_sim [STEPS]\n");
        return 2;
    }
    cudaStream_t stream;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");

    nvtxRangePushA("init");
    nvtxRangePushA("weights");
    void *weights[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        check(cudaMalloc(&weights[l], (size_t)(16 + 8 * l) * MiB), "cudaMalloc weights");
        touch(weights[l], (size_t)(16 + 8 * l) * MiB, stream);
    }
    nvtxRangePop();
    void *staging;
    check(cudaMallocHost(&staging, 8 * MiB), "cudaMallocHost");
    nvtxRangePop();

    void *optimizer = NULL;
    void *metrics[100000];
    nvtxRangePushA("train");
    for (int step = 0; step < steps; step++) {
        nvtxRangePushA("step");
        void *act[LAYERS];
        nvtxRangePushA("forward");
        for (int l = 0; l < LAYERS; l++) {
            char name[16];
            snprintf(name, sizeof name, "layer%d", l);
            nvtxRangePushA(name);
            check(cudaMallocAsync(&act[l], (size_t)(32 + 16 * l) * MiB, stream), "cudaMallocAsync");
            touch(act[l], (size_t)(32 + 16 * l) * MiB, stream);
            nvtxRangePop();
        }
        nvtxRangePop();

        nvtxRangePushA("backward");
        void *grads;
        check(cudaMallocAsync(&grads, 64 * MiB, stream), "cudaMallocAsync grads");
        for (int l = LAYERS - 1; l >= 0; l--)
            check(cudaFreeAsync(act[l], stream), "cudaFreeAsync");
        check(cudaFreeAsync(grads, stream), "cudaFreeAsync grads");
        nvtxRangePop();

        nvtxRangePushA("optimizer");
        if (!optimizer)
            check(cudaMalloc(&optimizer, 2 * 112 * MiB), "cudaMalloc optimizer");
        nvtxRangePop();

        nvtxRangePushA("metrics");
        check(cudaMalloc(&metrics[step], 1 * MiB), "cudaMalloc metrics"); /* never freed */
        nvtxRangePop();

        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        nvtxRangePop();
        printf("step %d done\n", step);
    }
    nvtxRangePop();

    for (int l = 0; l < LAYERS; l++)
        check(cudaFree(weights[l]), "cudaFree weights");
    check(cudaFree(optimizer), "cudaFree optimizer");
    check(cudaFreeHost(staging), "cudaFreeHost");
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    printf("train_sim: %d steps; %d MiB of metrics buffers left allocated on purpose\n", steps,
           steps);
    return 0;
}
