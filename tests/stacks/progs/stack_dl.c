/* stack_dl: a library stack_app loads with dlopen after the agent started (tests/stacks). */
#include <stddef.h>

#include <cuda_runtime_api.h>

void *stack_dl_entry(size_t n);

__attribute__((noinline)) void *stack_dl_entry(size_t n)
{
    void *p = NULL;
    cudaMalloc(&p, n); /* @dl_cudaMalloc */
    __asm__ volatile("" ::: "memory");
    return p;
}
