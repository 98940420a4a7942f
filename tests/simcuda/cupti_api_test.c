/* Unit tests (cmocka) of the simulated CUPTI API, with this program as the CUPTI client: results
 * and names, the one-subscriber rule, enabling callbacks, CUpti_CallbackData contents and nesting,
 * entry points (invalid ids, special streams, generated stubs, _ptsz, cuGetProcAddress and
 * cudaGetDriverEntryPoint), activity buffers (full buffers, flush, helper thread, record iteration)
 * and dropped records.
 * The tests share one process and run in order. */
#include <cuda.h>
#include <cupti.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    CUpti_ApiCallbackSite site;
    uint32_t corr;
    char name[64];
    size_t size;     /* cudaMalloc / cuMemAlloc_v2 size */
    uint64_t result; /* returned pointer at exit */
    int ret;
} event;

static event g_ev[64];
static int g_nev;

static void CUPTIAPI on_cb(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void *data)
{
    assert_ptr_equal(ud, &g_nev);
    if (domain == CUPTI_CB_DOMAIN_RESOURCE || g_nev >= 64)
        return;
    const CUpti_CallbackData *d = data;
    event *e = &g_ev[g_nev++];
    e->domain = domain;
    e->cbid = cbid;
    e->site = d->callbackSite;
    e->corr = d->correlationId;
    snprintf(e->name, sizeof(e->name), "%s", d->functionName);
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
        cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) {
        const cudaMalloc_v3020_params *p = d->functionParams;
        e->size = p->size;
        if (d->callbackSite == CUPTI_API_EXIT) {
            e->result = (uint64_t)(uintptr_t)*p->devPtr;
            e->ret = *(cudaError_t *)d->functionReturnValue;
        }
    }
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2) {
        const cuMemAlloc_v2_params *p = d->functionParams;
        e->size = p->bytesize;
        if (d->callbackSite == CUPTI_API_EXIT) {
            e->result = *p->dptr;
            e->ret = *(CUresult *)d->functionReturnValue;
        }
    }
}

static void test_results_and_names(void **state)
{
    const char *s = NULL;
    assert_int_equal(cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &s),
                     CUPTI_SUCCESS);
    assert_string_equal(s, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
    uint32_t v = 0;
    assert_int_equal(cuptiGetVersion(&v), CUPTI_SUCCESS);
    assert_int_equal(v, CUPTI_API_VERSION);
    const char *n = NULL;
    assert_int_equal(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API,
                                          CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &n),
                     CUPTI_SUCCESS);
    assert_string_equal(n, "cudaMalloc");
    assert_int_equal(cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API,
                                          CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050, &n),
                     CUPTI_SUCCESS);
    assert_string_equal(n, "cudaStreamDestroy");
    assert_int_equal(
        cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &n),
        CUPTI_SUCCESS);
    assert_string_equal(n, "cuMemAlloc_v2");
    assert_int_equal(cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, 100000, &n),
                     CUPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(cuptiGetLastError(), CUPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(cuptiGetLastError(), CUPTI_SUCCESS);
    uint64_t t1 = 0, t2 = 0;
    assert_int_equal(cuptiGetTimestamp(&t1), CUPTI_SUCCESS);
    assert_int_equal(cuptiGetTimestamp(&t2), CUPTI_SUCCESS);
    assert_true(t1 > 0 && t2 >= t1);
}

static void test_flush_before_register(void **state)
{
    assert_int_equal(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                     CUPTI_ERROR_INVALID_OPERATION);
}

static void test_one_subscriber(void **state)
{
    CUpti_SubscriberHandle a = NULL, b = NULL;
    CUpti_SubscriberParams p = {0};
    p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    p.subscriberName = "first";
    assert_int_equal(cuptiSubscribe_v2(&a, on_cb, &g_nev, &p), CUPTI_SUCCESS);
    char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
    CUpti_SubscriberParams q = {0};
    q.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    q.subscriberName = "second";
    q.oldSubscriberName = old;
    q.oldSubscriberSize = sizeof(old);
    assert_int_equal(cuptiSubscribe_v2(&b, on_cb, &g_nev, &q),
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    assert_string_equal(old, "CUPTI for first");
    assert_int_equal(cuptiSubscribe(&b, on_cb, &g_nev),
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    assert_int_equal(cuptiUnsubscribe(b), CUPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(cuptiUnsubscribe(a), CUPTI_SUCCESS);
    assert_int_equal(cuptiSubscribe(&b, on_cb, &g_nev), CUPTI_SUCCESS);
    assert_int_equal(cuptiUnsubscribe(b), CUPTI_SUCCESS);
}

static void test_callbacks(void **state)
{
    CUpti_SubscriberHandle s = NULL;
    assert_int_equal(cuptiSubscribe(&s, on_cb, &g_nev), CUPTI_SUCCESS);
    assert_int_equal(cuptiEnableCallback(1, s, CUPTI_CB_DOMAIN_RUNTIME_API,
                                         CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020),
                     CUPTI_SUCCESS);
    uint32_t on = 0;
    assert_int_equal(cuptiGetCallbackState(&on, s, CUPTI_CB_DOMAIN_RUNTIME_API,
                                           CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020),
                     CUPTI_SUCCESS);
    assert_int_equal(on, 1);
    g_nev = 0;
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, 1234), cudaSuccess);
    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(g_nev, 2); /* only the enabled callback */
    assert_int_equal(g_ev[0].site, CUPTI_API_ENTER);
    assert_int_equal(g_ev[1].site, CUPTI_API_EXIT);
    assert_int_equal(g_ev[0].corr, g_ev[1].corr);
    assert_int_equal(g_ev[0].size, 1234);
    assert_int_equal(g_ev[1].result, (uint64_t)(uintptr_t)p);
    assert_int_equal(g_ev[1].ret, cudaSuccess);

    /* nesting: runtime enter, driver enter, driver exit, runtime exit */
    assert_int_equal(cuptiEnableDomain(1, s, CUPTI_CB_DOMAIN_DRIVER_API), CUPTI_SUCCESS);
    g_nev = 0;
    assert_int_equal(cudaMalloc(&p, 4096), cudaSuccess);
    assert_int_equal(g_nev, 4);
    assert_string_equal(g_ev[0].name, "cudaMalloc");
    assert_string_equal(g_ev[1].name, "cuMemAlloc_v2");
    assert_int_equal(g_ev[1].site, CUPTI_API_ENTER);
    assert_string_equal(g_ev[2].name, "cuMemAlloc_v2");
    assert_int_equal(g_ev[2].site, CUPTI_API_EXIT);
    assert_int_equal(g_ev[1].corr, g_ev[2].corr);
    assert_true(g_ev[1].corr != g_ev[0].corr);
    assert_int_equal(g_ev[2].result, (uint64_t)(uintptr_t)p);
    assert_int_equal(g_ev[3].result, (uint64_t)(uintptr_t)p);
    g_nev = 0;
    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(g_nev, 2); /* cuMemFree_v2 only: cudaFree's runtime callback is off */
    assert_string_equal(g_ev[0].name, "cuMemFree_v2");
    assert_int_equal(cuptiEnableAllDomains(0, s), CUPTI_SUCCESS);
    g_nev = 0;
    assert_int_equal(cudaMalloc(&p, 4096), cudaSuccess);
    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(g_nev, 0);
    assert_int_equal(cuptiUnsubscribe(s), CUPTI_SUCCESS);
}

/* Entry points (README "API surface"): invalid callback ids, special stream handles, the generated
 * not-supported stubs (callbacks, outputs untouched, last errors), _ptsz forwarding, and
 * cuGetProcAddress / cudaGetDriverEntryPoint returning the instrumented entry points. */
cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t s);

static void test_entry_points(void **state)
{
    CUpti_SubscriberHandle s = NULL;
    assert_int_equal(cuptiSubscribe(&s, on_cb, &g_nev), CUPTI_SUCCESS);
    /* ids outside what the headers define are rejected (cupti_callbacks.h) */
    assert_int_equal(cuptiEnableCallback(1, s, CUPTI_CB_DOMAIN_RUNTIME_API, 0),
                     CUPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(
        cuptiEnableCallback(1, s, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE),
        CUPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(cuptiEnableCallback(1, s, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_SIZE),
                     CUPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(cuptiEnableCallback(1, s, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_SIZE),
                     CUPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(cuptiGetLastError(), CUPTI_ERROR_INVALID_PARAMETER);
    assert_int_equal(cuptiEnableDomain(1, s, CUPTI_CB_DOMAIN_DRIVER_API), CUPTI_SUCCESS);
    assert_int_equal(cuptiEnableDomain(1, s, CUPTI_CB_DOMAIN_RUNTIME_API), CUPTI_SUCCESS);

    /* special stream handles are resolved, never dereferenced */
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, 4096), cudaSuccess);
    uint32_t id = 0;
    assert_int_equal(cuptiGetStreamIdEx(NULL, CU_STREAM_LEGACY, 0, &id), CUPTI_SUCCESS);
    assert_int_equal(id, 7);
    CUptiResult st = cuptiGetStreamIdEx(NULL, CU_STREAM_PER_THREAD, 1, &id);
    assert_true(st == CUPTI_SUCCESS || st == CUPTI_ERROR_INVALID_STREAM);
    assert_int_equal(cuptiGetStreamIdEx(NULL, (CUstream)(uintptr_t)&id, 0, &id),
                     CUPTI_ERROR_INVALID_STREAM);

    /* a driver function nobody models: callbacks with its own id, NOT_SUPPORTED, output kept */
    g_nev = 0;
    CUgraphicsResource res = (CUgraphicsResource)(uintptr_t)0x1234;
    CUdeviceptr dp = 77;
    size_t sz = 88;
    assert_int_equal(cuGraphicsResourceGetMappedPointer(&dp, &sz, res), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(dp, 77);
    assert_int_equal(sz, 88);
    assert_int_equal(g_nev, 2);
    assert_int_equal(g_ev[0].cbid, CUPTI_DRIVER_TRACE_CBID_cuGraphicsResourceGetMappedPointer_v2);
    assert_string_equal(g_ev[1].name, "cuGraphicsResourceGetMappedPointer_v2");
    assert_int_equal(g_ev[1].site, CUPTI_API_EXIT);
    /* the runtime: cudaErrorNotSupported, also the last error */
    g_nev = 0;
    assert_int_equal(cudaGraphicsUnregisterResource((cudaGraphicsResource_t)(uintptr_t)0x1234),
                     cudaErrorNotSupported);
    assert_int_equal(g_nev, 2);
    assert_int_equal(g_ev[0].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaGraphicsUnregisterResource_v3020);
    assert_int_equal(cudaGetLastError(), cudaErrorNotSupported);
    /* CUPTI: CUPTI_ERROR_NOT_SUPPORTED, also cuptiGetLastError's */
    uint32_t n = 99;
    assert_int_equal(cuptiGetNumEventDomains(&n), CUPTI_ERROR_NOT_SUPPORTED);
    assert_int_equal(n, 99);
    assert_int_equal(cuptiGetLastError(), CUPTI_ERROR_NOT_SUPPORTED);

    /* a _ptsz variant reports its own callback id and does what the plain function does */
    g_nev = 0;
    assert_int_equal(cudaMemsetAsync_ptsz(p, 0, 16, NULL), cudaSuccess);
    assert_true(g_nev >= 2);
    assert_int_equal(g_ev[0].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000);
    assert_string_equal(g_ev[0].name, "cudaMemsetAsync_ptsz");
    assert_int_equal(g_ev[g_nev - 1].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000);

    /* cuGetProcAddress: the versioned, instrumented entry points (cuda.h, cudaTypedefs.h) */
    void *fn = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &q), CUDA_SUCCESS);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(fn, (void *)cuMemAlloc_v2);
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &fn, 3000, 0, &q), CUDA_SUCCESS);
    assert_ptr_equal(fn, dlsym(RTLD_DEFAULT, "cuMemAlloc"));
    assert_true(fn != (void *)cuMemAlloc_v2);
    assert_int_equal(cuGetProcAddress("cuMemcpyHtoD", &fn, 12000,
                                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"));
    assert_int_equal(
        cuGetProcAddress("cuMemcpyHtoD", &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q),
        CUDA_SUCCESS);
    assert_ptr_equal(fn, dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2"));
    assert_int_equal(cuGetProcAddress("cuMemCreate", &fn, 10000, 0, &q), CUDA_SUCCESS);
    assert_null(fn);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_int_equal(cuGetProcAddress("cuNoSuchFunction", &fn, 13000, 0, &q), CUDA_SUCCESS);
    assert_null(fn);
    assert_int_equal(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &fn, 99000, 0, &q), CUDA_ERROR_INVALID_VALUE);
    /* a call through the pointer is reported like a direct call */
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &q), CUDA_SUCCESS);
    CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))fn;
    g_nev = 0;
    assert_int_equal(alloc(&dp, 1000), CUDA_SUCCESS);
    assert_int_equal(g_nev, 2);
    assert_int_equal(g_ev[1].cbid, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
    assert_int_equal(g_ev[1].size, 1000);
    assert_int_equal(g_ev[1].result, dp);
    assert_int_equal(cuMemFree(dp), CUDA_SUCCESS);
    /* the runtime's: the same pointers, inside its own callbacks */
    enum cudaDriverEntryPointQueryResult rq = cudaDriverEntryPointSymbolNotFound;
    void *fn2 = NULL;
    assert_int_equal(
        cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn2, 12000, cudaEnableDefault, &rq),
        cudaSuccess);
    assert_int_equal(rq, cudaDriverEntryPointSuccess);
    assert_ptr_equal(fn2, fn);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* still exported and used */
    assert_int_equal(cudaGetDriverEntryPoint("cuMemCreate", &fn2, cudaEnableDefault, &rq),
                     cudaSuccess);
    assert_ptr_equal(fn2, (void *)cuMemCreate);
    assert_int_equal(cudaGetDriverEntryPoint("cuNoSuchFunction", &fn2, cudaEnableDefault, &rq),
                     cudaSuccess);
    assert_null(fn2);
#pragma GCC diagnostic pop
    assert_int_equal(rq, cudaDriverEntryPointSymbolNotFound);
    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(cuptiEnableAllDomains(0, s), CUPTI_SUCCESS);
    assert_int_equal(cuptiUnsubscribe(s), CUPTI_SUCCESS);
}

/* activity */
static size_t g_req_size;
static int g_decline;
static int g_completed, g_records, g_on_main_thread, g_empty;
static pthread_t g_main;

static void CUPTIAPI req(uint8_t **buf, size_t *size, size_t *max)
{
    *max = 0;
    if (g_decline) {
        *buf = NULL;
        *size = 0;
        return;
    }
    *buf = aligned_alloc(8, 4096);
    *size = g_req_size;
}

static void CUPTIAPI done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    g_completed++;
    if (pthread_equal(pthread_self(), g_main))
        g_on_main_thread++;
    if (valid == 0)
        g_empty++;
    CUpti_Activity *r = NULL;
    CUptiResult st;
    while ((st = cuptiActivityGetNextRecord(buf, valid, &r)) == CUPTI_SUCCESS) {
        g_records++;
        assert_int_equal(r->kind, CUPTI_ACTIVITY_KIND_MEMORY2);
        const CUpti_ActivityMemory4 *m = (const CUpti_ActivityMemory4 *)r;
        assert_true(m->timestamp >= 1000); /* from the registered timestamp callback */
        assert_int_equal(m->memoryKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    }
    assert_int_equal(st, CUPTI_ERROR_MAX_LIMIT_REACHED);
    free(buf);
}

static uint64_t g_fake_time = 1000;
static uint64_t CUPTIAPI fake_ts(void)
{
    return g_fake_time++;
}

static void test_activity_buffers(void **state)
{
    g_main = pthread_self();
    assert_int_equal(cuptiActivityRegisterTimestampCallback(fake_ts), CUPTI_SUCCESS);
    uint64_t t = 0;
    assert_int_equal(cuptiGetTimestamp(&t), CUPTI_SUCCESS);
    assert_int_equal(t, 1000);
    g_req_size = 2 * sizeof(CUpti_ActivityMemory4); /* two records per buffer */
    assert_int_equal(cuptiActivityRegisterCallbacks(req, done), CUPTI_SUCCESS);
    assert_int_equal(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2), CUPTI_SUCCESS);
    void *p[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(cudaMalloc(&p[i], 1000), cudaSuccess);
    /* records 1-2 filled the first buffer; the third record retired it */
    assert_int_equal(g_completed, 1);
    assert_int_equal(g_records, 2);
    assert_int_equal(g_on_main_thread, 0);
    assert_int_equal(cuptiActivityFlushAll(0),
                     CUPTI_SUCCESS); /* default flush: the partial buffer too */
    assert_int_equal(g_completed, 2);
    assert_int_equal(g_records, 3);
    assert_int_equal(cuptiActivityFlushAll(0), CUPTI_SUCCESS); /* nothing left */
    assert_int_equal(g_completed, 2);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cudaFree(p[i]), cudaSuccess);
    assert_int_equal(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
    assert_int_equal(g_records, 6);
    size_t dropped = 99;
    assert_int_equal(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped), CUPTI_SUCCESS);
    assert_int_equal(dropped, 0);
    assert_int_equal(g_on_main_thread, 0);
}

static void test_dropped_records(void **state)
{
    g_decline = 1;
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, 1000), cudaSuccess);
    assert_int_equal(cudaFree(p), cudaSuccess);
    size_t dropped = 0;
    assert_int_equal(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped), CUPTI_SUCCESS);
    assert_int_equal(dropped, 2);
    assert_int_equal(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped), CUPTI_SUCCESS);
    assert_int_equal(dropped, 0); /* reset by the call */
    /* a buffer too small for one record is handed back empty and the record is dropped */
    g_decline = 0;
    g_req_size = 16;
    int empty0 = g_empty;
    assert_int_equal(cudaMalloc(&p, 1000), cudaSuccess);
    assert_int_equal(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped), CUPTI_SUCCESS);
    assert_int_equal(dropped, 1);
    assert_int_equal(g_empty, empty0 + 1);
    g_req_size = 4096;
    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMORY2), CUPTI_SUCCESS);
    assert_int_equal(cuptiActivityEnable((CUpti_ActivityKind)100000), CUPTI_ERROR_INVALID_KIND);
    assert_int_equal(cuptiFinalize(), CUPTI_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_and_names), cmocka_unit_test(test_flush_before_register),
        cmocka_unit_test(test_one_subscriber),    cmocka_unit_test(test_callbacks),
        cmocka_unit_test(test_entry_points),      cmocka_unit_test(test_activity_buffers),
        cmocka_unit_test(test_dropped_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
