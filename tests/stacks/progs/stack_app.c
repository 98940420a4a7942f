/* stack_app: allocates through known call chains for tests/stacks/test_stacks.py:
 *   main -> app_outer -> app_inlined (inlined) -> stack_lib_entry (libstack_lib.so)
 *        -> lib_helper (inlined) -> cudaMalloc          (3 MiB, kept)
 *   main -> app_direct -> cudaMalloc                    (5 MiB, kept)
 * Lines marked @name are looked up by the test. Usage: stack_app [dlopen-lib-path] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

void *stack_lib_entry(size_t n);

static inline __attribute__((always_inline)) void *app_inlined(size_t n)
{
    void *p = stack_lib_entry(n); /* @app_call_lib */
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *app_outer(size_t n)
{
    void *p = app_inlined(n); /* @app_call_inlined */
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *app_direct(size_t n)
{
    void *p = NULL;
    cudaMalloc(&p, n); /* @app_cudaMalloc */
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(int argc, char **argv)
{
    void *a = app_outer(3u << 20);  /* @main_call_outer */
    void *b = app_direct(5u << 20); /* @main_call_direct */
    if (!a || !b) {
        fprintf(stderr, "stack_app: cudaMalloc failed\n");
        return 1;
    }
    if (argc > 1) {
        /* a library loaded after the agent started: its frames need a module map rescan */
        void *h = dlopen(argv[1], RTLD_NOW);
        void *(*entry)(size_t) = h ? (void *(*)(size_t))dlsym(h, "stack_dl_entry") : NULL;
        if (!entry || !entry(7u << 20)) {
            fprintf(stderr, "stack_app: %s: %s\n", argv[1], dlerror());
            return 1;
        }
    }
    printf("stack_app: ok\n");
    return 0;
}
