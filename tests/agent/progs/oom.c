/* Out of memory on a small simulated device (SIMCUDA_DEVICE_MEMORY=1 GiB, context overhead
 * 100 MiB): a 512 MiB allocation fits, a 768 MiB one does not (runtime), then 1 GiB through the
 * driver does not either; the program carries on. With the argument "wait" it prints
 * "oom <pid>" after the failures and waits to be killed (the OOM must reach the file at once). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>
#include <unistd.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

int main(int argc, char **argv)
{
    void *a = NULL, *b = (void *)1;
    CHECK(cudaMalloc(&a, 512 * MIB), cudaSuccess);
    SHOWP("a", a);
    CHECK(cudaMalloc(&b, 768 * MIB), cudaErrorMemoryAllocation);
    CUdeviceptr c;
    CHECK(cuMemAlloc(&c, 1024 * MIB), CUDA_ERROR_OUT_OF_MEMORY);
    if (argc > 1 && !strcmp(argv[1], "wait")) {
        printf("oom %ld\n", (long)getpid());
        fflush(stdout);
        for (;;)
            pause();
    }
    CHECK(cudaFree(a), cudaSuccess);
    printf("oom: ok\n");
    return 0;
}
