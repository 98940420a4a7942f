/* Graph memory nodes added through the generic node API (cuda.h:21479 cuGraphAddNode,
 * cuda_runtime_api.h:12908 cudaGraphAddNode; CUgraphNodeParams / cudaGraphNodeParams of type
 * MEM_ALLOC, whose alloc.dptr is written back): a 16 MiB node by the driver API and an 8 MiB node
 * by the runtime in one graph, launched once; the 16 MiB is then freed outside the graph by
 * cudaFree, the 8 MiB by cudaFreeAsync (cuda.h: graph allocations may be freed outside the graph),
 * and the graph memory trimmed. Prints "A node16 0x..", "A node8 0x.." and "graph_addnode: ok". */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

int main(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s), cudaSuccess);
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0), CUDA_SUCCESS);

    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    np.alloc.poolProps.location.id = 0;
    np.alloc.bytesize = 16 * MIB;
    CUgraphNode n16;
    CHECK(cuGraphAddNode(&n16, g, NULL, NULL, 0, &np), CUDA_SUCCESS);
    show("node16", np.alloc.dptr);

    struct cudaGraphNodeParams rp;
    memset(&rp, 0, sizeof rp);
    rp.type = cudaGraphNodeTypeMemAlloc;
    rp.alloc.poolProps.allocType = cudaMemAllocationTypePinned;
    rp.alloc.poolProps.location.type = cudaMemLocationTypeDevice;
    rp.alloc.poolProps.location.id = 0;
    rp.alloc.bytesize = 8 * MIB;
    cudaGraphNode_t n8;
    CHECK(cudaGraphAddNode(&n8, (cudaGraph_t)g, NULL, NULL, 0, &rp), cudaSuccess);
    SHOWP("node8", rp.alloc.dptr);

    CUgraphExec ge;
    CHECK(cuGraphInstantiate(&ge, g, 0), CUDA_SUCCESS);
    CHECK(cuGraphLaunch(ge, s), CUDA_SUCCESS);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cudaFree((void *)(uintptr_t)np.alloc.dptr), cudaSuccess);
    CHECK(cudaFreeAsync(rp.alloc.dptr, s), cudaSuccess);
    CHECK(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(cuGraphExecDestroy(ge), CUDA_SUCCESS);
    CHECK(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK(cudaDeviceGraphMemTrim(0), cudaSuccess);
    CHECK(cudaStreamDestroy(s), cudaSuccess);
    printf("graph_addnode: ok\n");
    return 0;
}
