/* A native worker thread for the PyTorch-like test process (wheel12_prog.py, test
 * simcuda_agent_wheel12). PyTorch runs the backward pass on its autograd engine's own threads,
 * created in C++ and never running Python. gmp_simworker_backward creates such a thread with
 * pthread_create; the thread allocates a gradient buffer of each requested size through the
 * runtime's cudaMalloc, then frees them in reverse order with cudaFree. The calling (Python)
 * thread waits in pthread_join, with the GIL released by ctypes. The runtime's functions are
 * passed in as pointers, so this library links to no CUDA library and works with whichever
 * runtime the program loaded. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*gmp_simworker_malloc_fn)(void **, size_t);
typedef int (*gmp_simworker_free_fn)(void *);

int gmp_simworker_backward(void *malloc_fn, void *free_fn, const uint64_t *sizes, int n,
                           uint64_t *addrs);

enum { WORKER_MAX = 16 };

typedef struct worker_job {
    gmp_simworker_malloc_fn alloc;
    gmp_simworker_free_fn release;
    const uint64_t *sizes;
    uint64_t *addrs;
    int n;
    int status; /* 0, or the first failing call's error code */
} worker_job;

/* noinline: the frame stays on the allocations' stacks, so the test can find it there */
__attribute__((noinline)) static void worker_grads(worker_job *j)
{
    void *p[WORKER_MAX] = {0};
    for (int i = 0; i < j->n && !j->status; i++) {
        int r = j->alloc(&p[i], (size_t)j->sizes[i]);
        if (r)
            j->status = r;
        j->addrs[i] = (uint64_t)(uintptr_t)p[i];
    }
    for (int i = j->n - 1; i >= 0; i--) {
        if (p[i]) {
            int r = j->release(p[i]);
            if (r && !j->status)
                j->status = r;
        }
    }
}

static void *worker_main(void *arg)
{
    worker_grads((worker_job *)arg);
    return NULL;
}

/* Runs the "backward pass" on a new native thread and waits for it. addrs receives each buffer's
 * address. Returns 0, the runtime's error code, or -1 when the arguments are bad or the thread
 * cannot be created. */
int gmp_simworker_backward(void *malloc_fn, void *free_fn, const uint64_t *sizes, int n,
                           uint64_t *addrs)
{
    if (!malloc_fn || !free_fn || !sizes || !addrs || n < 1 || n > WORKER_MAX)
        return -1;
    worker_job j = {0};
    /* object pointer to function pointer: POSIX (dlsym) guarantees this conversion */
    *(void **)&j.alloc = malloc_fn;
    *(void **)&j.release = free_fn;
    j.sizes = sizes;
    j.addrs = addrs;
    j.n = n;
    pthread_t t;
    if (pthread_create(&t, NULL, worker_main, &j) != 0)
        return -1;
    if (pthread_join(t, NULL) != 0)
        return -1;
    return j.status;
}
