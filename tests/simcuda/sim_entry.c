/* simcuda driver entry points (libcuda.so.1): cuGetProcAddress over the table generated from
 * cudaTypedefs.h, the support the generated stubs (gen_api_stubs.py) call for driver functions the
 * simulator does not model, and the _ptds/_ptsz forwarding state. See README.md "API surface". */
#include "sim_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The model's per-thread default-stream setting (sim_driver.c), where it has one. */
extern int simcuda_set_per_thread_default(int on) __attribute__((weak));

/* ------------------------------------------------------------------------------------------ */
/* generated stubs and _ptds/_ptsz variants */

SIMCUDA_HIDDEN int simcuda_drv_stub(unsigned cbid, const char *name, void *params)
{
    CUresult r = CUDA_SUCCESS;
    simcuda_call c = {.domain = CUPTI_CB_DOMAIN_DRIVER_API,
                      .cbid = cbid,
                      .name = name,
                      .params = params,
                      .ret = &r,
                      .ctx = simcuda_current_ctx()};
    if (cbid != CUPTI_DRIVER_TRACE_CBID_INVALID)
        simcuda_api_enter(&c);
    r = CUDA_ERROR_NOT_SUPPORTED;
    if (cbid != CUPTI_DRIVER_TRACE_CBID_INVALID)
        simcuda_api_exit(&c);
    return r;
}

static _Thread_local unsigned tl_ptds_cbid;
static _Thread_local const char *tl_ptds_name;

SIMCUDA_API int simcuda_ptds_begin(unsigned cbid, const char *name)
{
    tl_ptds_cbid = cbid;
    tl_ptds_name = name;
    return simcuda_set_per_thread_default ? simcuda_set_per_thread_default(1) : 0;
}

SIMCUDA_API void simcuda_ptds_end(int restore)
{
    tl_ptds_name = NULL;
    if (simcuda_set_per_thread_default)
        (void)simcuda_set_per_thread_default(restore);
}

SIMCUDA_API void simcuda_ptds_apply(simcuda_call *call)
{
    if (!tl_ptds_name)
        return;
    call->cbid = tl_ptds_cbid;
    call->name = tl_ptds_name;
    tl_ptds_name = NULL; /* the outermost call only */
}

/* ------------------------------------------------------------------------------------------ */
/* cuGetProcAddress (cuda.h "Driver Entry Point Access") */

static CUresult proc_address(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    const cuuint64_t known =
        CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (!symbol || !pfn || (flags & ~known) || cudaVersion > SIMCUDA_DRIVER_VERSION)
        return CUDA_ERROR_INVALID_VALUE;
    /* DEFAULT is LEGACY_STREAM for a caller built without per-thread default streams */
    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const simcuda_procaddr_entry *best = NULL, *best_pt = NULL;
    int found = 0;
    for (size_t i = 0; i < simcuda_procaddr_count; i++) {
        const simcuda_procaddr_entry *e = &simcuda_procaddr_table[i];
        /* a driver older than an entry (the CUDA 12 personality) does not know it at all */
        if (e->version > SIMCUDA_DRIVER_VERSION || strcmp(e->name, symbol) != 0)
            continue;
        found = 1;
        if (e->version > cudaVersion)
            continue;
        const simcuda_procaddr_entry **slot = e->per_thread ? &best_pt : &best;
        if (!*slot || e->version > (*slot)->version)
            *slot = e;
    }
    if (per_thread && best_pt)
        best = best_pt; /* "If a per-thread version is not found ... the legacy version" */
    *pfn = best ? (void *)best->fn : NULL;
    if (status)
        *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
                  : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

/* the two exported versions: cuGetProcAddress (CUDA 11.3) and cuGetProcAddress_v2 (12.0) */
#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                  cuuint64_t flags);

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    cuGetProcAddress_params p = {symbol, pfn, cudaVersion, flags};
    CUresult r = CUDA_SUCCESS;
    simcuda_call c = {.domain = CUPTI_CB_DOMAIN_DRIVER_API,
                      .cbid = CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
                      .name = "cuGetProcAddress",
                      .params = &p,
                      .ret = &r,
                      .ctx = simcuda_current_ctx()};
    simcuda_api_enter(&c);
    r = proc_address(symbol, pfn, cudaVersion, flags, NULL);
    simcuda_api_exit(&c);
    return r;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    cuGetProcAddress_v2_params p = {symbol, pfn, cudaVersion, flags, symbolStatus};
    CUresult r = CUDA_SUCCESS;
    simcuda_call c = {.domain = CUPTI_CB_DOMAIN_DRIVER_API,
                      .cbid = CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
                      .name = "cuGetProcAddress_v2",
                      .params = &p,
                      .ret = &r,
                      .ctx = simcuda_current_ctx()};
    simcuda_api_enter(&c);
    r = proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
    simcuda_api_exit(&c);
    return r;
}
