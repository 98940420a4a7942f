/* The program the reliability tests profile (tests/reliability), on the simulated CUDA device.
 * Modes:
 *   loop N SIZE        N cudaMalloc(SIZE)/cudaFree pairs as fast as possible; prints
 *                      "rel_prog: N pairs" on stdout and "rel_prog: VmHWM K kB" on stderr
 *   ready [SLEEP_US]   prints "ready <pid>", then allocates and frees 4 KiB (sleeping SLEEP_US,
 *                      default 100, between pairs) until a signal ends it
 *   end HOW            allocates 3 blocks (1 freed), waits 300 ms (longer than the tests' flush
 *                      interval), prints "ending HOW", then ends through HOW: exit (status 3),
 *                      _exit (status 4), abort, segv (a null write), return (status 0)
 *   load THREADS SECONDS DEVICES
 *                      THREADS threads allocate and free concurrently for SECONDS under nested NVTX
 *                      ranges ("worker<k>/step/layer<j>"), on device k % DEVICES; each thread frees
 *                      only its own blocks and leaves some live at exit. Prints one line per
 * thread: "T <tid> <device> <allocs> <alloc_bytes> <frees> <freed_bytes> <live> <live_bytes>", then
 * "load: ok". */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        int rc_ = (int)(expr);                                                                     \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #expr, rc_);            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void print_hwm(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            fprintf(stderr, "rel_prog: VmHWM %ld kB\n", strtol(line + 6, NULL, 10));
    if (f)
        fclose(f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- load ---- */

typedef struct worker {
    pthread_t th;
    int k, device;
    double seconds;
    unsigned long long allocs, alloc_bytes, frees, freed_bytes;
    long tid;
} worker;

#define SLOTS 16

static void *load_main(void *arg)
{
    worker *w = arg;
    w->tid = (long)syscall(SYS_gettid);
    CHECK(cudaSetDevice(w->device));
    char name[32];
    snprintf(name, sizeof name, "worker%d", w->k);
    nvtxRangePushA(name);
    void *slot[SLOTS] = {0};
    size_t slot_size[SLOTS] = {0};
    unsigned seed = 12345u + (unsigned)w->k;
    double end = now_s() + w->seconds;
    static const char *const layers[] = {"layer0", "layer1", "layer2", "layer3"};
    for (unsigned it = 0; now_s() < end; it++) {
        nvtxRangePushA("step");
        nvtxRangePushA(layers[it % 4]);
        for (int j = 0; j < 4; j++) {
            seed = seed * 1103515245u + 12345u;
            int s = (int)((seed >> 8) % SLOTS);
            if (slot[s]) {
                CHECK(cudaFree(slot[s]));
                w->frees++;
                w->freed_bytes += slot_size[s];
                slot[s] = NULL;
            } else {
                size_t n = 256 + (size_t)((seed >> 16) % 64) * 256;
                CHECK(cudaMalloc(&slot[s], n));
                slot_size[s] = n;
                w->allocs++;
                w->alloc_bytes += n;
            }
        }
        nvtxRangePop();
        nvtxRangePop();
        struct timespec ts = {0, 5000000}; /* 5 ms: a steady load, not a flood */
        nanosleep(&ts, NULL);
    }
    nvtxRangePop();
    return NULL;
}

static int load(int threads, double seconds, int devices)
{
    int ndev = 0;
    CHECK(cudaGetDeviceCount(&ndev));
    if (devices > ndev)
        devices = ndev;
    worker *w = calloc((size_t)threads, sizeof *w);
    for (int k = 0; k < threads; k++) {
        w[k].k = k;
        w[k].device = k % devices;
        w[k].seconds = seconds;
        CHECK(pthread_create(&w[k].th, NULL, load_main, &w[k]));
    }
    for (int k = 0; k < threads; k++)
        CHECK(pthread_join(w[k].th, NULL));
    for (int k = 0; k < threads; k++)
        printf("T %ld %d %llu %llu %llu %llu %llu %llu\n", w[k].tid, w[k].device, w[k].allocs,
               w[k].alloc_bytes, w[k].frees, w[k].freed_bytes, w[k].allocs - w[k].frees,
               w[k].alloc_bytes - w[k].freed_bytes);
    printf("load: ok\n");
    free(w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: rel_prog loop N SIZE | ready [US] | end HOW | load T S D\n");
        return 2;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "loop") && argc >= 4) {
        long n = strtol(argv[2], NULL, 10);
        size_t size = (size_t)strtoull(argv[3], NULL, 10);
        for (long i = 0; i < n; i++) {
            void *p = NULL;
            CHECK(cudaMalloc(&p, size));
            CHECK(cudaFree(p));
        }
        printf("rel_prog: %ld pairs\n", n);
        print_hwm();
        return 0;
    }
    if (!strcmp(mode, "ready")) {
        long us = argc > 2 ? strtol(argv[2], NULL, 10) : 100;
        void *p = NULL;
        CHECK(cudaMalloc(&p, 4096));
        CHECK(cudaFree(p));
        printf("ready %ld\n", (long)getpid());
        fflush(stdout);
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        for (;;) {
            CHECK(cudaMalloc(&p, 4096));
            CHECK(cudaFree(p));
            if (us)
                nanosleep(&ts, NULL);
        }
    }
    if (!strcmp(mode, "end") && argc >= 3) {
        const char *how = argv[2];
        void *a = NULL, *b = NULL, *c = NULL;
        CHECK(cudaMalloc(&a, 1 << 20));
        CHECK(cudaMalloc(&b, 2 << 20));
        CHECK(cudaMalloc(&c, 3 << 20));
        CHECK(cudaFree(b));
        struct timespec ts = {0, 300 * 1000000};
        nanosleep(&ts, NULL);
        printf("ending %s\n", how);
        fflush(stdout);
        if (!strcmp(how, "exit"))
            exit(3);
        if (!strcmp(how, "_exit"))
            _exit(4);
        if (!strcmp(how, "abort"))
            abort();
        if (!strcmp(how, "segv")) {
            /* a real fault: a write to a page without access (a NULL store would be caught by
             * UBSan's null check in sanitizer builds, which exits 1 instead of faulting) */
            volatile int *np = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (np != MAP_FAILED)
                *np = 1;
            raise(SIGSEGV); /* where the write did not fault */
        }
        if (!strcmp(how, "return"))
            return 0;
        fprintf(stderr, "rel_prog: unknown ending %s\n", how);
        return 2;
    }
    if (!strcmp(mode, "load") && argc >= 5)
        return load(atoi(argv[2]), atof(argv[3]), atoi(argv[4]));
    fprintf(stderr, "rel_prog: bad arguments\n");
    return 2;
}
