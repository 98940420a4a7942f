/* bench_alloc: cost of cudaMalloc+cudaFree pairs, for measuring what the agent adds per call.
 * Run it twice in one benchmark session, with and without CUDA_INJECTION64_PATH (see
 * run-benchmarks); prints "ns_per_call: N" (per API call, a pair counting two calls).
 * Usage: bench_alloc [PAIRS] [THREADS] [DEPTH]: DEPTH extra frames on the stack of every call (for
 * the cost of native stacks at a given depth). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

static long pairs = 200000;
static int depth;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *loop(void)
{
    for (long i = 0; i < pairs; i++) {
        void *p;
        if (cudaMalloc(&p, 4096 + (size_t)(i & 63) * 256) != cudaSuccess)
            return (void *)1;
        cudaFree(p);
    }
    return NULL;
}

/* d frames deep, then the loop: one call site per level, so every call has the same stack */
static __attribute__((noinline)) void *deeper(int d)
{
    void *r = d > 0 ? deeper(d - 1) : loop();
    __asm__ volatile("" ::: "memory"); /* no tail call */
    return r;
}

static void *worker(void *arg)
{
    (void)arg;
    return deeper(depth);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        pairs = atol(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    depth = argc > 3 ? atoi(argv[3]) : 0;
    if (pairs < 1 || threads < 1 || threads > 64 || depth < 0 || depth > 1000) {
        fprintf(stderr, "usage: bench_alloc [PAIRS] [THREADS] [DEPTH]\n");
        return 2;
    }
    void *warm;
    cudaMalloc(&warm, 256); /* initialization (and injection) outside the timed part */
    cudaFree(warm);
    pthread_t t[64];
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    int bad = 0;
    for (int i = 0; i < threads; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    double dt = now_s() - t0;
    if (bad) {
        fprintf(stderr, "bench_alloc: cudaMalloc failed\n");
        return 1;
    }
    /* per call, per thread: wall time of each thread's own calls */
    printf("ns_per_call: %.1f\n", dt * 1e9 / (2.0 * (double)pairs));
    return 0;
}
