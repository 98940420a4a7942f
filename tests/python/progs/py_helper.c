/* py_helper: what the Python test programs call through ctypes (tests/python): an NVTX range of
 * the program's own (the real NVTX v3 headers, injected like any NVTX user) and an allocation made
 * by a C thread that Python does not know. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

int py_helper_push(const char *name);
int py_helper_pop(void);
int py_helper_thread_alloc(size_t n);

int py_helper_push(const char *name)
{
    return nvtxRangePushA(name);
}

int py_helper_pop(void)
{
    return nvtxRangePop();
}

static void *thread_main(void *arg)
{
    void *p = NULL;
    size_t n = (size_t)(uintptr_t)arg;
    if (cudaMalloc(&p, n) != cudaSuccess)
        return (void *)1;
    return NULL; /* kept: live at the peak */
}

/* Allocates n bytes from a new C thread (no Python thread state, no GIL). 0 on success. */
int py_helper_thread_alloc(size_t n)
{
    pthread_t t;
    void *rc = (void *)1;
    if (pthread_create(&t, NULL, thread_main, (void *)(uintptr_t)n) != 0)
        return -1;
    pthread_join(t, &rc);
    return rc ? -1 : 0;
}
