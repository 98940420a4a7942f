/* Where memory lives (docs/collectors.md, point 3): memory of another device, of the host and
 * managed memory must not be counted as the current device's. Two devices (SIMCUDA_DEVICE_COUNT=2):
 *  - "async1": cudaMallocAsync on a stream of device 1 while device 0 is current (cuda.h: from the
 *    current pool of the stream's device);
 *  - "pool1": cudaMallocFromPoolAsync from a pool created on device 1, device 0 current;
 *  - "hostpool": from a pool whose location is the host (cuda.h cuMemPoolCreate);
 *  - "managedpool": from a managed pool (allocType managed, no location);
 *  - "hostvmm": cuMemCreate with a host location (a VMM handle, printed as its value).
 * A part the driver refuses prints "SKIP <label> <error>" and is left out. Prints "A label 0x..".*/
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

static void from_pool(const char *label, struct cudaMemPoolProps *props, size_t size,
                      cudaStream_t s)
{
    cudaMemPool_t pool;
    cudaError_t e = cudaMemPoolCreate(&pool, props);
    if (e != cudaSuccess) {
        printf("SKIP %s %d\n", label, (int)e);
        return;
    }
    void *p = NULL;
    e = cudaMallocFromPoolAsync(&p, size, pool, s);
    if (e != cudaSuccess) {
        printf("SKIP %s %d\n", label, (int)e);
    } else {
        SHOWP(label, p);
        CHECK(cudaFreeAsync(p, s), cudaSuccess);
        CHECK(cudaStreamSynchronize(s), cudaSuccess);
    }
    CHECK(cudaMemPoolDestroy(pool), cudaSuccess);
}

int main(void)
{
    int n = 0;
    CHECK(cudaGetDeviceCount(&n), cudaSuccess);
    EXPECT(n >= 2);
    cudaStream_t s0, s1;
    CHECK(cudaSetDevice(1), cudaSuccess);
    CHECK(cudaStreamCreate(&s1), cudaSuccess);
    CHECK(cudaSetDevice(0), cudaSuccess);
    CHECK(cudaStreamCreate(&s0), cudaSuccess);

    void *a = NULL;
    CHECK(cudaMallocAsync(&a, 4 * MIB, s1), cudaSuccess);
    SHOWP("async1", a);
    CHECK(cudaFreeAsync(a, s1), cudaSuccess);
    CHECK(cudaStreamSynchronize(s1), cudaSuccess);

    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 1;
    from_pool("pool1", &props, 6 * MIB, s1);

    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeHost;
    from_pool("hostpool", &props, 8 * MIB, s0);

    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypeManaged;
    props.location.type = cudaMemLocationTypeNone;
    from_pool("managedpool", &props, 10 * MIB, s0);

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CUmemGenericAllocationHandle h;
    CUresult r = cuMemCreate(&h, 2 * MIB, &prop, 0);
    if (r != CUDA_SUCCESS) {
        printf("SKIP hostvmm %d\n", (int)r);
    } else {
        show("hostvmm", h);
        CHECK(cuMemRelease(h), CUDA_SUCCESS);
    }
    CHECK(cudaStreamDestroy(s0), cudaSuccess);
    CHECK(cudaStreamDestroy(s1), cudaSuccess);
    printf("locations: ok\n");
    return 0;
}
