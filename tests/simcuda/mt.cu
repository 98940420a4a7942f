// Many threads at once: each thread allocates and frees device memory, stream-ordered memory and
// pinned memory, and launches a kernel. Checks that live addresses never collide and that the
// memory accounting returns to its starting point.
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include "sim_test_util.h"

#define THREADS 8
#define ITERS 200

__global__ void touch(int *p)
{
    p[threadIdx.x] = threadIdx.x;
}

static pthread_mutex_t g_live_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_live[3 * THREADS];

static void live_add(void *p)
{
    pthread_mutex_lock(&g_live_mu);
    int slot = -1;
    for (int i = 0; i < 3 * THREADS; i++) {
        EXPECT(g_live[i] != p); /* two live allocations never share an address */
        if (!g_live[i] && slot < 0)
            slot = i;
    }
    EXPECT(slot >= 0);
    g_live[slot] = p;
    pthread_mutex_unlock(&g_live_mu);
}

static void live_del(void *p)
{
    pthread_mutex_lock(&g_live_mu);
    for (int i = 0; i < 3 * THREADS; i++)
        if (g_live[i] == p)
            g_live[i] = NULL;
    pthread_mutex_unlock(&g_live_mu);
}

static void *worker(void *arg)
{
    (void)arg;
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s), cudaSuccess);
    for (int i = 0; i < ITERS; i++) {
        int *d = NULL;
        void *a = NULL, *h = NULL;
        CHECK(cudaMalloc(&d, 256 * (1 + (i % 7))), cudaSuccess);
        CHECK(cudaMallocAsync(&a, 4096 * (1 + (i % 3)), s), cudaSuccess);
        CHECK(cudaMallocHost(&h, 64), cudaSuccess);
        live_add(d);
        live_add(a);
        live_add(h);
        touch<<<1, 32, 0, s>>>(d);
        live_del(a);
        CHECK(cudaFreeAsync(a, s), cudaSuccess);
        live_del(d);
        CHECK(cudaFree(d), cudaSuccess);
        live_del(h);
        CHECK(cudaFreeHost(h), cudaSuccess);
    }
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cudaStreamDestroy(s), cudaSuccess);
    return NULL;
}

int main()
{
    /* no CUDA call before the threads start: they race for cuInit and the injection */
    size_t total = 0;
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        EXPECT(pthread_create(&th[t], NULL, worker, (void *)t) == 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    CHECK(cudaDeviceSynchronize(), cudaSuccess);
    size_t free1 = 0;
    CHECK(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT(free1 == total - (300ull << 20)); /* only the context overhead is left */
    printf("mt: ok\n");
    return 0;
}
