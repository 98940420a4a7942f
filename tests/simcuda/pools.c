/* Stream-ordered allocation: the default pool, release threshold, synchronization, TrimTo,
 * attributes, explicit pools, cudaDeviceSetMemPool, and the MEMORY_POOL records. */
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "sim_test_util.h"

#define MIB (1024ull * 1024ull)

static uint64_t attr(cudaMemPool_t p, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    CHECK(cudaMemPoolGetAttribute(p, a, &v), cudaSuccess);
    return v;
}

int main(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    cudaMemPool_t def = NULL;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0), cudaSuccess);
    size_t free0 = 0, total = 0;
    CHECK(cudaMemGetInfo(&free0, &total), cudaSuccess);

    void *a = NULL, *b = NULL;
    CHECK(cudaMallocAsync(&a, 3 * MIB, s), cudaSuccess);
    CHECK(cudaMallocAsync(&b, 1000, s), cudaSuccess);
    EXPECT(attr(def, cudaMemPoolAttrReservedMemCurrent) == 4 * MIB);
    EXPECT(attr(def, cudaMemPoolAttrUsedMemCurrent) == 3 * MIB + 1024);
    size_t free1 = 0;
    CHECK(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT(free0 - free1 == 4 * MIB); /* the pool's reservation, not what is allocated from it */

    /* threshold 0: freed memory goes back at the next synchronization */
    CHECK(cudaFreeAsync(a, s), cudaSuccess);
    EXPECT(attr(def, cudaMemPoolAttrReservedMemCurrent) == 4 * MIB);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT(attr(def, cudaMemPoolAttrReservedMemCurrent) == 2 * MIB);

    /* a threshold keeps freed memory in the pool; TrimTo releases it */
    uint64_t thr = 64 * MIB;
    CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &thr), cudaSuccess);
    void *c = NULL;
    CHECK(cudaMallocAsync(&c, 20 * MIB, s), cudaSuccess);
    CHECK(cudaFreeAsync(c, s), cudaSuccess);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT(attr(def, cudaMemPoolAttrReservedMemCurrent) == 22 * MIB);
    EXPECT(attr(def, cudaMemPoolAttrUsedMemCurrent) == 1024);
    EXPECT(attr(def, cudaMemPoolAttrUsedMemHigh) == 20 * MIB + 1024);
    void *c2 = NULL;
    CHECK(cudaMallocAsync(&c2, 20 * MIB, s), cudaSuccess);
    EXPECT(c2 == c); /* same-size blocks are reused */
    CHECK(cudaFreeAsync(c2, s), cudaSuccess);
    CHECK(cudaMemPoolTrimTo(def, 0), cudaSuccess);
    EXPECT(attr(def, cudaMemPoolAttrReservedMemCurrent) == 2 * MIB);
    uint64_t zero = 0;
    CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
    EXPECT(attr(def, cudaMemPoolAttrUsedMemHigh) == 1024);

    /* an explicit pool */
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool = NULL;
    CHECK(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    void *d = NULL;
    CHECK(cudaMallocFromPoolAsync(&d, 5 * MIB, pool, s), cudaSuccess);
    EXPECT((uintptr_t)d != (uintptr_t)a);
    CHECK(cudaDeviceSetMemPool(0, pool), cudaSuccess);
    cudaMemPool_t cur = NULL;
    CHECK(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    EXPECT(cur == pool);
    void *e = NULL;
    CHECK(cudaMallocAsync(&e, 1 * MIB, 0), cudaSuccess); /* from the current pool, default stream */
    CHECK(cudaFreeAsync(e, 0), cudaSuccess);
    CHECK(cudaFree(d), cudaSuccess); /* cudaFree of stream-ordered memory synchronizes */
    CHECK(cudaDeviceSetMemPool(0, def), cudaSuccess);
    CHECK(cudaMemPoolDestroy(pool), cudaSuccess);
    CHECK(cudaMemPoolDestroy(def),
          cudaErrorInvalidValue); /* the default pool cannot be destroyed */

    CHECK(cudaFreeAsync(b, s), cudaSuccess);
    CHECK(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(cudaStreamDestroy(s), cudaSuccess);
    CHECK(cudaMemPoolTrimTo(def, 0), cudaSuccess); /* the 64 MiB threshold kept 2 MiB */
    size_t free2 = 0;
    CHECK(cudaMemGetInfo(&free2, &total), cudaSuccess);
    EXPECT(free2 == free0);
    printf("pools: ok\n");
    return 0;
}
