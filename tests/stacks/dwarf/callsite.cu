// callsite.cu: a CUDA program (host code built by nvcc through its temporary
// tmpxft_*.cudafe1.cpp, with #line directives naming this file) for check_llvm_symbolizer.py.
#include <cuda_runtime.h>
#include <stdio.h>

#include "hdr.h"

int dw_sink(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 2;
}

__global__ void fill(float *p)
{
    p[threadIdx.x] = 1.0f;
}

__attribute__((noinline)) static void *alloc_here(size_t n)
{
    void *p = NULL;
    cudaMalloc(&p, n + (size_t)hdr_fn((int)n & 1));
    return p;
}

template <typename T> __attribute__((noinline)) T *alloc_typed(size_t n)
{
    return static_cast<T *>(alloc_here(n * sizeof(T)));
}

__attribute__((noinline)) void *outer_alloc(size_t n)
{
    void *p = alloc_typed<float>(n);
    printf("%p\n", p);
    return p;
}

int main(void)
{
    void *p = outer_alloc(1 << 20);
    fill<<<1, 32>>>((float *)p);
    cudaFree(p);
    return 0;
}
