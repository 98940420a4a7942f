/* The agent's start race (docs/collectors.md, point 1): two threads released at once at the very
 * start of the process, before any CUDA or NVTX call. Thread "a" opens an NVTX range and allocates
 * inside it (the CUDA initialization, InitializeInjection, arrives from inside an NVTX range);
 * thread "b" allocates first and then opens a range (InitializeInjectionNvtx2 may arrive while
 * the CUDA one is starting the agent on the other thread). Prints both addresses;
 * test_start_race.py checks that both allocations and both ranges are in the trace. */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

#include "prog_util.h"

static pthread_barrier_t start;
static void *pa, *pb;

static void *thread_a(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    nvtxRangePushA("a");
    CHECK(cudaMalloc(&pa, 1 << 20), cudaSuccess);
    nvtxRangePop();
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    CHECK(cudaMalloc(&pb, 2 << 20), cudaSuccess);
    nvtxRangePushA("b");
    nvtxRangePop();
    return NULL;
}

int main(void)
{
    pthread_t ta, tb;
    pthread_barrier_init(&start, NULL, 2);
    CHECK(pthread_create(&ta, NULL, thread_a, NULL), 0);
    CHECK(pthread_create(&tb, NULL, thread_b, NULL), 0);
    CHECK(pthread_join(ta, NULL), 0);
    CHECK(pthread_join(tb, NULL), 0);
    SHOWP("a", pa);
    SHOWP("b", pb);
    CHECK(cudaFree(pa), cudaSuccess);
    CHECK(cudaFree(pb), cudaSuccess);
    return 0;
}
