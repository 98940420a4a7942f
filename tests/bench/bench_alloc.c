/* bench_alloc: cost of cudaMalloc+cudaFree pairs, for measuring what the agent adds per call.
 * Run it twice in one benchmark session, with and without CUDA_INJECTION64_PATH (see
 * run-benchmarks); prints "ns_per_call: N" (per API call, a pair counting two calls) and
 * "ns_per_call_best_chunk: N" (the same over the fastest 1,000 pairs of the first thread).
 * Usage: bench_alloc [PAIRS] [THREADS] [DEPTH]: DEPTH extra frames on the stack of every call (for
 * the cost of native stacks at a given depth).
 * BENCH_SCOPES=N: N scopes of the agent's C ABI (gmp_scope_open, agent/gmp_agent_api.h) are open
 * during the timed part (the cost of the live accounting with scopes open); the agent is the
 * library CUDA_INJECTION64_PATH names, already loaded by the driver. */
#include <dlfcn.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

static long pairs = 200000;
static int depth;
static int nth;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* the fastest chunk of CHUNK pairs of the first thread: on a busy machine the mean carries every
 * preemption, the fastest chunk only the calls' own cost */
#define CHUNK 1000
static double best_chunk = 1e30;

static void *loop(void)
{
    int first = __atomic_fetch_add(&nth, 1, __ATOMIC_RELAXED) == 0;
    double c0 = now_s();
    for (long i = 0; i < pairs; i++) {
        void *p;
        if (cudaMalloc(&p, 4096 + (size_t)(i & 63) * 256) != cudaSuccess)
            return (void *)1;
        cudaFree(p);
        if (first && (i + 1) % CHUNK == 0) {
            double c1 = now_s();
            if (c1 - c0 < best_chunk)
                best_chunk = c1 - c0;
            c0 = c1;
        }
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
    const char *sc = getenv("BENCH_SCOPES");
    int nscopes = sc ? atoi(sc) : 0;
    uint64_t scopes[64];
    int (*scope_close)(uint64_t, void *, void *, int) = NULL;
    if (nscopes > 0) {
        const char *inj = getenv("CUDA_INJECTION64_PATH");
        void *agent = inj ? dlopen(inj, RTLD_NOW | RTLD_NOLOAD) : NULL;
        uint64_t (*scope_open)(const char *) =
            agent ? (uint64_t(*)(const char *))dlsym(agent, "gmp_scope_open") : NULL;
        *(void **)&scope_close = agent ? dlsym(agent, "gmp_scope_close") : NULL;
        if (!scope_open || !scope_close || nscopes > 64) {
            fprintf(stderr, "bench_alloc: BENCH_SCOPES needs the agent (1..64 scopes)\n");
            return 2;
        }
        for (int i = 0; i < nscopes; i++)
            scopes[i] = scope_open("bench");
    }
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
    for (int i = nscopes; i-- > 0;)
        scope_close(scopes[i], NULL, NULL, 0);
    if (bad) {
        fprintf(stderr, "bench_alloc: cudaMalloc failed\n");
        return 1;
    }
    /* per call, per thread: wall time of each thread's own calls */
    printf("ns_per_call: %.1f\n", dt * 1e9 / (2.0 * (double)pairs));
    if (pairs >= CHUNK)
        printf("ns_per_call_best_chunk: %.1f\n", best_chunk * 1e9 / (2.0 * CHUNK));
    return 0;
}
