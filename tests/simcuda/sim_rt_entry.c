/* simcuda runtime entry points (libcudart.so): cudaGetDriverEntryPoint(ByVersion) and their _ptsz
 * variants over the driver's cuGetProcAddress_v2, so a program reaches the same instrumented driver
 * entry points a direct call would; and the support the generated stubs (gen_api_stubs.py) call for
 * runtime functions the simulator does not model. See README.md "API surface". */
#include "sim_internal.h"

#include <cuda_runtime_api.h>

SIMCUDA_HIDDEN int simcuda_rt_stub(unsigned cbid, const char *name, void *params)
{
    cudaError_t r;
    simcuda_call c;
    simcuda_rt_begin(&c, cbid, name, params, &r);
    return simcuda_rt_end(&c, cudaErrorNotSupported);
}

static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                               unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *driverStatus, int ptsz)
{
    if (!symbol || !funcPtr)
        return cudaErrorInvalidValue;
    /* cudaEnableDefault: per-thread for a caller built with per-thread default streams (the
     * _ptsz entry points), legacy otherwise (cuda_runtime_api.h) */
    if (ptsz && (flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)) == 0)
        flags |= cudaEnablePerThreadDefaultStream;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = cuGetProcAddress_v2(symbol, funcPtr, (int)cudaVersion, flags, &st);
    if (r != CUDA_SUCCESS)
        return r == CUDA_ERROR_INVALID_VALUE ? cudaErrorInvalidValue : cudaErrorNotSupported;
    if (driverStatus)
        *driverStatus = st == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
                        : st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                            ? cudaDriverEntryPointVersionNotSufficent
                            : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

#define ENTRY_BEGIN(cbname, fname, ...)                                                            \
    cbname##_params p = {__VA_ARGS__};                                                             \
    cudaError_t r;                                                                                 \
    simcuda_call c;                                                                                \
    simcuda_rt_begin(&c, CUPTI_RUNTIME_TRACE_CBID_##cbname, fname, &p, &r)

/* declared by cuda_runtime_api.h only for callers built with per-thread default streams */
SIMCUDA_API cudaError_t CUDARTAPI
cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                             enum cudaDriverEntryPointQueryResult *s);
SIMCUDA_API cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *s);

/* the runtime's own version picks the ABI (cuda_runtime_api.h) */
SIMCUDA_API cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                                          unsigned long long flags,
                                                          enum cudaDriverEntryPointQueryResult *s)
{
    ENTRY_BEGIN(cudaGetDriverEntryPoint_v11030, "cudaGetDriverEntryPoint", symbol, funcPtr, flags,
                s);
    return simcuda_rt_end(&c, entry_point(symbol, funcPtr, SIMCUDA_RUNTIME_VERSION, flags, s, 0));
}

SIMCUDA_API cudaError_t CUDARTAPI
cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                             enum cudaDriverEntryPointQueryResult *s)
{
    ENTRY_BEGIN(cudaGetDriverEntryPoint_ptsz_v11030, "cudaGetDriverEntryPoint_ptsz", symbol,
                funcPtr, flags, s);
    return simcuda_rt_end(&c, entry_point(symbol, funcPtr, SIMCUDA_RUNTIME_VERSION, flags, s, 1));
}

SIMCUDA_API cudaError_t CUDARTAPI
cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                 unsigned long long flags, enum cudaDriverEntryPointQueryResult *s)
{
    ENTRY_BEGIN(cudaGetDriverEntryPointByVersion_v12050, "cudaGetDriverEntryPointByVersion", symbol,
                funcPtr, cudaVersion, flags, s);
    return simcuda_rt_end(&c, entry_point(symbol, funcPtr, cudaVersion, flags, s, 0));
}

SIMCUDA_API cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *s)
{
    ENTRY_BEGIN(cudaGetDriverEntryPointByVersion_ptsz_v12050,
                "cudaGetDriverEntryPointByVersion_ptsz", symbol, funcPtr, cudaVersion, flags, s);
    return simcuda_rt_end(&c, entry_point(symbol, funcPtr, cudaVersion, flags, s, 1));
}
