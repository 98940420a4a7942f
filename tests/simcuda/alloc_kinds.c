/* Every allocation kind of the runtime API, in plain C: pitch, 3D, arrays, pinned host memory,
 * registered host memory, managed memory, memory info, and cudaDeviceReset. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "sim_test_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    size_t free0 = 0, total = 0;
    CHECK(cudaMemGetInfo(&free0, &total), cudaSuccess);

    void *pitched = NULL;
    size_t pitch = 0;
    CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 100), cudaSuccess);
    EXPECT(pitch == 1024);

    struct cudaPitchedPtr p3;
    struct cudaExtent ext = {300, 20, 10};
    CHECK(cudaMalloc3D(&p3, ext), cudaSuccess);
    EXPECT(p3.pitch == 512 && p3.xsize == 300 && p3.ysize == 20);

    struct cudaChannelFormatDesc desc =
        cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    cudaArray_t arr = NULL;
    CHECK(cudaMallocArray(&arr, &desc, 1024, 1024, 0), cudaSuccess);

    void *pinned = NULL;
    CHECK(cudaMallocHost(&pinned, 1 * MIB), cudaSuccess);
    memset(pinned, 0xab, 1 * MIB); /* pinned memory is real host memory */
    void *portable = NULL;
    CHECK(cudaHostAlloc(&portable, 4096, cudaHostAllocPortable | cudaHostAllocMapped), cudaSuccess);

    static char reg[8192];
    CHECK(cudaHostRegister(reg, sizeof(reg), cudaHostRegisterDefault), cudaSuccess);
    CHECK(cudaHostRegister(reg, sizeof(reg), cudaHostRegisterDefault),
          cudaErrorHostMemoryAlreadyRegistered);
    CHECK(cudaHostUnregister(reg), cudaSuccess);
    CHECK(cudaHostUnregister(reg), cudaErrorHostMemoryNotRegistered);

    int *managed = NULL;
    CHECK(cudaMallocManaged((void **)&managed, 64 * MIB, cudaMemAttachGlobal), cudaSuccess);
    managed[0] = 42; /* managed memory is host-accessible */
    managed[64 * MIB / sizeof(int) - 1] = 7;

    size_t free1 = 0;
    CHECK(cudaMemGetInfo(&free1, &total), cudaSuccess);
    /* device-resident: pitch 1024*100 -> 102400, 3D 512*200 -> 102400, array 4 MiB (2 MiB
     * granules); host, registered and managed memory do not use device memory */
    EXPECT(free0 - free1 == 102400 + 102400 + 4 * MIB);

    CHECK(cudaFree(managed), cudaSuccess);
    CHECK(cudaFreeHost(portable), cudaSuccess);
    CHECK(cudaFreeHost(pinned), cudaSuccess);
    CHECK(cudaFreeHost(pinned), cudaErrorInvalidValue);
    CHECK(cudaFreeArray(arr), cudaSuccess);
    CHECK(cudaFree(p3.ptr), cudaSuccess);
    CHECK(cudaFree(pitched), cudaSuccess);
    void *zero = (void *)1;
    CHECK(cudaMalloc(&zero, 0), cudaSuccess);
    EXPECT(zero == NULL);

    size_t free2 = 0;
    CHECK(cudaMemGetInfo(&free2, &total), cudaSuccess);
    EXPECT(free2 == free0);

    /* a reset destroys the primary context; the next call creates a new one */
    void *leak = NULL;
    CHECK(cudaMalloc(&leak, 1000), cudaSuccess);
    CHECK(cudaDeviceReset(), cudaSuccess);
    void *again = NULL;
    CHECK(cudaMalloc(&again, 1000), cudaSuccess);
    EXPECT(again == leak); /* the freed address range is reused */
    CHECK(cudaFree(again), cudaSuccess);
    printf("alloc_kinds: ok\n");
    return 0;
}
