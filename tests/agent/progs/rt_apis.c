/* Every memory API family of the runtime, once each, in a fixed order, with two failing calls.
 * Prints the addresses and handles it got ("A label 0x..."); test_api_families.py holds the
 * records the trace must contain, in this order. */
#include <cuda_runtime_api.h>
#include <string.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    void *d1 = NULL;
    CHECK(cudaMalloc(&d1, 1000), cudaSuccess);
    SHOWP("d1", d1);

    void *pitched = NULL;
    size_t pitch = 0;
    CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 100), cudaSuccess);
    EXPECT(pitch == 1024);
    SHOWP("pitched", pitched);

    struct cudaPitchedPtr p3;
    struct cudaExtent ext = {300, 20, 10};
    CHECK(cudaMalloc3D(&p3, ext), cudaSuccess);
    EXPECT(p3.pitch == 512);
    SHOWP("p3", p3.ptr);

    struct cudaChannelFormatDesc desc =
        cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    cudaArray_t arr = NULL;
    CHECK(cudaMallocArray(&arr, &desc, 1024, 1024, 0), cudaSuccess);
    SHOWP("arr", arr);
    cudaArray_t arr3 = NULL;
    struct cudaExtent aext = {64, 64, 4};
    CHECK(cudaMalloc3DArray(&arr3, &desc, aext, 0), cudaSuccess);
    SHOWP("arr3", arr3);

    void *pinned = NULL;
    CHECK(cudaMallocHost(&pinned, 1 * MIB), cudaSuccess);
    SHOWP("pinned", pinned);
    void *halloc = NULL;
    CHECK(cudaHostAlloc(&halloc, 4096, cudaHostAllocPortable), cudaSuccess);
    SHOWP("halloc", halloc);

    static char reg[8192];
    CHECK(cudaHostRegister(reg, sizeof reg, cudaHostRegisterDefault), cudaSuccess);
    SHOWP("reg", reg);
    CHECK(cudaHostRegister(reg, sizeof reg, cudaHostRegisterDefault),
          cudaErrorHostMemoryAlreadyRegistered);
    CHECK(cudaHostUnregister(reg), cudaSuccess);

    void *managed = NULL;
    CHECK(cudaMallocManaged(&managed, 64 * MIB, cudaMemAttachGlobal), cudaSuccess);
    SHOWP("managed", managed);

    cudaStream_t s;
    CHECK(cudaStreamCreate(&s), cudaSuccess);
    void *a1 = NULL;
    CHECK(cudaMallocAsync(&a1, 3000, s), cudaSuccess);
    SHOWP("a1", a1);

    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    CHECK(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    SHOWP("pool", pool);
    uint64_t thr = 4 * MIB;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr), cudaSuccess);
    void *a2 = NULL;
    CHECK(cudaMallocFromPoolAsync(&a2, 5000, pool, s), cudaSuccess);
    SHOWP("a2", a2);
    CHECK(cudaFreeAsync(a1, s), cudaSuccess);
    CHECK(cudaFreeAsync(a2, s), cudaSuccess);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cudaMemPoolTrimTo(pool, 1 * MIB), cudaSuccess);
    CHECK(cudaMemPoolDestroy(pool), cudaSuccess);
    CHECK(cudaStreamDestroy(s), cudaSuccess);

    CHECK(cudaFree(managed), cudaSuccess);
    CHECK(cudaFreeHost(halloc), cudaSuccess);
    CHECK(cudaFreeHost(pinned), cudaSuccess);
    CHECK(cudaFreeArray(arr3), cudaSuccess);
    CHECK(cudaFreeArray(arr), cudaSuccess);
    CHECK(cudaFree(p3.ptr), cudaSuccess);
    CHECK(cudaFree(pitched), cudaSuccess);
    CHECK(cudaFree(d1), cudaSuccess);
    CHECK(cudaFree(d1), cudaErrorInvalidValue); /* a double free fails */
    CHECK(cudaFree(NULL), cudaSuccess);         /* frees nothing: no record */
    printf("rt_apis: ok\n");
    return 0;
}
