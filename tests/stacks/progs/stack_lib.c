/* stack_lib: a shared library on the call chain of stack_app (tests/stacks). Lines marked @name
 * are looked up by test_stacks.py: keep each marker on the line of the call it names. */
#include <stddef.h>

#include <cuda_runtime_api.h>

void *stack_lib_entry(size_t n);

static inline __attribute__((always_inline)) void *lib_helper(size_t n)
{
    void *p = NULL;
    cudaMalloc(&p, n); /* @lib_cudaMalloc */
    return p;
}

__attribute__((noinline)) void *stack_lib_entry(size_t n)
{
    void *p = lib_helper(n); /* @lib_call_helper */
    __asm__ volatile("" ::: "memory");
    return p;
}
