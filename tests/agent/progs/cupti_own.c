/* The process's own CUPTI (docs/collectors.md, "Which CUPTI"): a program that loads its CUDA
 * runtime with dlopen, as Python's ctypes and PyTorch's wheels do, optionally after loading a CUPTI
 * of its own (what torch.profiler/kineto do before CUDA starts). Usage: cupti_own RUNTIME [CUPTI].
 * Allocates and frees 1 MiB through the runtime, then prints every libcupti file mapped in the
 * process ("M /path", from /proc/self/maps, each once) and the allocation ("A p 0x.."). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "prog_util.h"

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);

int main(int argc, char **argv)
{
    EXPECT(argc >= 2);
    if (argc > 2 && argv[2][0]) {
        void *own = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        if (!own) {
            fprintf(stderr, "cupti_own: %s\n", dlerror());
            return 1;
        }
    }
    void *rt = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!rt) {
        fprintf(stderr, "cupti_own: %s\n", dlerror());
        return 1;
    }
    malloc_fn m = (malloc_fn)(uintptr_t)dlsym(rt, "cudaMalloc");
    free_fn f = (free_fn)(uintptr_t)dlsym(rt, "cudaFree");
    EXPECT(m && f);
    void *p = NULL;
    CHECK(m(&p, 1 << 20), 0);
    SHOWP("p", p);
    CHECK(f(p), 0);
    FILE *maps = fopen("/proc/self/maps", "r");
    EXPECT(maps);
    char line[8192], seen[16][4096];
    int nseen = 0;
    while (fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (!path || !strstr(path, "libcupti"))
            continue;
        path[strcspn(path, "\n")] = 0;
        int dup = 0;
        for (int i = 0; i < nseen; i++)
            dup |= !strcmp(seen[i], path);
        if (!dup && nseen < 16) {
            snprintf(seen[nseen++], sizeof seen[0], "%s", path);
            printf("M %s\n", path);
        }
    }
    fclose(maps);
    return 0;
}
