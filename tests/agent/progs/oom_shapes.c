/* Failed pitched and 3D allocations (docs/collectors.md, point 12): on a 1 GiB simulated device,
 * 2 GiB asked for through cudaMallocPitch, cudaMalloc3D and cuMemAllocPitch fail. Their outputs
 * (pitch, pointer) are filled with decoys before each call: an API does not write them when it
 * fails, so an OOM record computed from them would be wrong. test_oom_shapes.py expects every OOM
 * to ask for exactly 2 GiB (the inputs). Then nvtx depth per domain (point 15): pushes and pops in
 * the default domain and in a domain "d" print the levels NVTX returned ("L push 0" ...). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    void *p = (void *)0x1234;
    size_t pitch = 12345; /* decoy */
    CHECK(cudaMallocPitch(&p, &pitch, MIB, 2048), cudaErrorMemoryAllocation);
    struct cudaPitchedPtr pp = {(void *)0x1234, 777, 1, 1}; /* decoy */
    struct cudaExtent ext = {MIB, 1024, 2};
    CHECK(cudaMalloc3D(&pp, ext), cudaErrorMemoryAllocation);
    CUdeviceptr d = 0x1234;
    size_t dpitch = 999; /* decoy */
    CHECK(cuMemAllocPitch(&d, &dpitch, MIB, 2048, 4), CUDA_ERROR_OUT_OF_MEMORY);

    nvtxDomainHandle_t dom = nvtxDomainCreateA("d");
    nvtxEventAttributes_t ea = {0};
    ea.version = NVTX_VERSION;
    ea.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    ea.messageType = NVTX_MESSAGE_TYPE_ASCII;
    ea.message.ascii = "in d";
    printf("L push %d\n", nvtxRangePushA("outer"));          /* 0 */
    printf("L dpush %d\n", nvtxDomainRangePushEx(dom, &ea)); /* 0: the first of domain d */
    printf("L push %d\n", nvtxRangePushA("inner"));          /* 1 */
    printf("L pop %d\n", nvtxRangePop());                    /* 1 */
    printf("L dpop %d\n", nvtxDomainRangePop(dom));          /* 0 */
    printf("L pop %d\n", nvtxRangePop());                    /* 0 */
    printf("oom_shapes: ok\n");
    return 0;
}
