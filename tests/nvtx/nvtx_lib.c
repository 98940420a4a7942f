/* A shared library that uses NVTX on its own (its own copy of the NVTX loader and function
 * tables), built twice (nvtx_liba, nvtx_libb) for the two-loaders test. NVTX_LIB_PREFIX names the
 * exported functions. */
#include <stddef.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "nvtx_libs.h"

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define FN(name) CAT(NVTX_LIB_PREFIX, name)

int FN(push)(const char *name)
{
    return nvtxRangePushA(name);
}

int FN(pop)(void)
{
    return nvtxRangePop();
}

void FN(region_register)(void *p, size_t n)
{
    nvtxMemVirtualRangeDesc_t r = {n, p};
    nvtxMemRegionsRegisterBatch_t b = {0};
    b.extCompatID = NVTX_EXT_COMPATID_MEM;
    b.structSize = sizeof b;
    b.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    b.heap = NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE;
    b.regionCount = 1;
    b.regionDescElementSize = sizeof r;
    b.regionDescElements = &r;
    nvtxMemRegionsRegister(NULL, &b);
}

void FN(region_unregister)(void *p)
{
    nvtxMemRegionRef_t ref;
    ref.pointer = p;
    nvtxMemRegionsUnregisterBatch_t b = {0};
    b.extCompatID = NVTX_EXT_COMPATID_MEM;
    b.structSize = sizeof b;
    b.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    b.refCount = 1;
    b.refElementSize = sizeof ref;
    b.refElements = &ref;
    nvtxMemRegionsUnregister(NULL, &b);
}
