/* THREADS threads x ITERS cudaMalloc/cudaFree pairs each (arguments; default 8 x 100000), all
 * threads released at once. Prints the totals and the wall time of the loop on stderr, never the
 * time on stdout (stdout must be the same with and without the agent). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <time.h>

#include "prog_util.h"

static long iters = 100000;
static pthread_barrier_t start;

static void *work(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < iters; i++) {
        void *p = NULL;
        CHECK(cudaMalloc(&p, 256 + (size_t)(i & 7) * 256), cudaSuccess);
        CHECK(cudaFree(p), cudaSuccess);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = argc > 1 ? strtol(argv[1], NULL, 10) : 8;
    iters = argc > 2 ? strtol(argv[2], NULL, 10) : 100000;
    EXPECT(threads > 0 && threads <= 64 && iters > 0);
    int ndev = 0;
    CHECK(cudaGetDeviceCount(&ndev), cudaSuccess); /* initialization outside the timed part */
    CHECK(cudaFree(NULL), cudaSuccess);
    pthread_t th[64];
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (long i = 0; i < threads; i++)
        CHECK(pthread_create(&th[i], NULL, work, NULL), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_barrier_wait(&start);
    for (long i = 0; i < threads; i++)
        CHECK(pthread_join(th[i], NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr, "mt_alloc: %ld threads x %ld pairs in %.3f s (%.0f ns per call)\n", threads,
            iters, s, s * 1e9 / (double)(threads * iters * 2));
    printf("mt_alloc: %ld allocations, %ld frees\n", threads * iters, threads * iters);
    return 0;
}
