/* null_inject: an injection library that subscribes to CUPTI and enables the same memory API
 * callbacks as the agent, with a callback that does nothing. Running bench_alloc under it measures
 * what CUPTI itself costs per call (on the simulated device: the simulated CUPTI's dispatch), so
 * that run-benchmarks can tell the agent's own cost from CUPTI's. Not part of the product. */
#include <dlfcn.h>
#include <stddef.h>

#include <cupti.h>

int InitializeInjection(void);

static void CUPTIAPI nothing(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                             const void *data)
{
    (void)ud;
    (void)dom;
    (void)cbid;
    (void)data;
}

int InitializeInjection(void)
{
    void *lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 1;
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*enable)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
    *(void **)&subscribe = dlsym(lib, "cuptiSubscribe");
    *(void **)&enable = dlsym(lib, "cuptiEnableCallback");
    CUpti_SubscriberHandle sub;
    if (!subscribe || !enable || subscribe(&sub, nothing, NULL) != CUPTI_SUCCESS)
        return 1;
    /* the calls bench_alloc makes, at both levels, as the agent enables them */
    enable(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020);
    enable(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020);
    enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
    enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2);
    return 1;
}
