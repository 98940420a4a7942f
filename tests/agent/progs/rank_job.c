/* One rank of a small data-parallel training job, for the cross-rank tests
 * (tests/report/check_ranks_oom.py). It reads its rank from RANK, as a torchrun worker does,
 * allocates its weights once inside the NVTX range "init" (16 MiB), then runs `rank_job STEPS`
 * iterations (default 6) of a top-level range "step": "forward" allocates the activations
 * ((4 + RANK % 8) MiB), "backward" the gradients (as much), both freed at the end of the step.
 * Two ranks differ, named by the environment:
 *   GMP_TEST_HEAVY_RANK  its activations and gradients are 8 times as large;
 *   GMP_TEST_OOM_RANK    its "forward" also keeps a cache, in the range "step/forward/kv_cache",
 *                        that grows by 200 MiB every step until cudaMalloc fails (the device's
 *                        size is SIMCUDA_DEVICE_MEMORY): it prints "oom at step N" and exits 1,
 *                        as a training script ends on torch.OutOfMemoryError.
 * With GMP_TEST_NO_NVTX=1 it calls no NVTX function (a job whose ranks can only be put side by
 * side by the wall clock). Every successful rank prints "rank R done" and exits 0. */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)
#define MAX_STEPS 64

static int nvtx = 1;

static void push(const char *name)
{
    if (nvtx)
        nvtxRangePushA(name);
}

static void pop(void)
{
    if (nvtx)
        nvtxRangePop();
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtol(s, NULL, 10) : dflt;
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 6;
    long rank = env_long("RANK", 0);
    nvtx = env_long("GMP_TEST_NO_NVTX", 0) != 1;
    EXPECT(steps > 0 && steps <= MAX_STEPS && rank >= 0);
    int heavy = rank == env_long("GMP_TEST_HEAVY_RANK", -1);
    int oom = rank == env_long("GMP_TEST_OOM_RANK", -1);
    size_t act = (size_t)(4 + rank % 8) * MIB * (heavy ? 8 : 1);

    void *weights = NULL, *cache[MAX_STEPS] = {0};
    push("init");
    CHECK(cudaMalloc(&weights, 16 * MIB), cudaSuccess);
    pop();
    for (long s = 0; s < steps; s++) {
        void *a = NULL, *g = NULL;
        push("step");
        push("forward");
        CHECK(cudaMalloc(&a, act), cudaSuccess);
        if (oom) {
            push("kv_cache");
            cudaError_t e = cudaMalloc(&cache[s], 200 * MIB);
            pop();
            if (e != cudaSuccess) {
                printf("oom at step %ld\n", s + 1);
                return 1;
            }
        }
        pop();
        push("backward");
        CHECK(cudaMalloc(&g, act), cudaSuccess);
        pop();
        CHECK(cudaFree(a), cudaSuccess);
        CHECK(cudaFree(g), cudaSuccess);
        pop();
    }
    for (long s = 0; s < steps; s++)
        if (cache[s])
            CHECK(cudaFree(cache[s]), cudaSuccess);
    CHECK(cudaFree(weights), cudaSuccess);
    printf("rank %ld done\n", rank);
    return 0;
}
