/* Test injection library for the simulated CUDA device: subscribes to CUPTI exactly as a tool
 * does (InitializeInjection, cuptiSubscribe_v2, activity buffers) and writes what it receives to
 * a text log that the simcuda tests compare with expected output.
 *
 * Environment: SIMTEST_LOG (log path, default stderr), SIMTEST_MODE=trace|summary,
 * SIMTEST_BUFSIZE (activity buffer bytes, 0 = decline buffers), SIMTEST_SECOND_SUBSCRIBE=1,
 * SIMTEST_NO_ACTIVITY=1, SIMTEST_FLUSH=forced|default|none (at exit). */
#include <cuda.h>
#include <cupti.h>
#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int InitializeInjection(void);

static FILE *g_log;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_summary;
static size_t g_bufsize = 64 * 1024;
static CUpti_SubscriberHandle g_sub;
static int g_init_calls;
static _Thread_local int tl_app_thread;
static const char *g_flush = "forced";

/* summary mode counters */
#define MAX_KEYS 512
static struct {
    char key[96];
    unsigned long n;
} g_counts[MAX_KEYS];
static int g_nkeys;

static void count(const char *key)
{
    for (int i = 0; i < g_nkeys; i++)
        if (!strcmp(g_counts[i].key, key)) {
            g_counts[i].n++;
            return;
        }
    if (g_nkeys < MAX_KEYS) {
        snprintf(g_counts[g_nkeys].key, sizeof(g_counts[0].key), "%s", key);
        g_counts[g_nkeys++].n = 1;
    }
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g_mu);
    vfprintf(g_log ? g_log : stderr, fmt, ap);
    pthread_mutex_unlock(&g_mu);
    va_end(ap);
}

/* simulated device addresses are deterministic; host addresses are not */
static const char *A(uint64_t a, char *buf)
{
    if (a == 0)
        snprintf(buf, 24, "0");
    else if (a >= 0x100000000000ull && a < 0x540000000000ull)
        snprintf(buf, 24, "0x%" PRIx64, a);
    else
        snprintf(buf, 24, "<host>");
    return buf;
}

static uint32_t ctx_id(CUcontext c)
{
    uint32_t id = 0;
    if (c && cuptiGetContextId(c, &id) != CUPTI_SUCCESS)
        return 9999;
    return id;
}

static uint32_t stream_id(CUstream s)
{
    uint32_t id = 0;
    if (cuptiGetStreamIdEx(NULL, s, 0, &id) != CUPTI_SUCCESS)
        return 9999;
    return id;
}

#define P(type) const type *p = (const type *)d->functionParams

static void runtime_params(CUpti_CallbackId cbid, const CUpti_CallbackData *d, int exit, char *o,
                           size_t n)
{
    char a1[24], a2[24];
    o[0] = 0;
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020: {
        P(cudaMalloc_v3020_params);
        if (!exit)
            snprintf(o, n, " size=%zu", p->size);
        else
            snprintf(o, n, " *devPtr=%s", A((uint64_t)(uintptr_t)*p->devPtr, a1));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020: {
        P(cudaFree_v3020_params);
        if (!exit)
            snprintf(o, n, " devPtr=%s", A((uint64_t)(uintptr_t)p->devPtr, a1));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
        P(cudaMallocPitch_v3020_params);
        if (!exit)
            snprintf(o, n, " width=%zu height=%zu", p->width, p->height);
        else
            snprintf(o, n, " *devPtr=%s *pitch=%zu", A((uint64_t)(uintptr_t)*p->devPtr, a1),
                     *p->pitch);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020: {
        P(cudaMalloc3D_v3020_params);
        if (!exit)
            snprintf(o, n, " extent=%zux%zux%zu", p->extent.width, p->extent.height,
                     p->extent.depth);
        else
            snprintf(o, n, " ptr=%s pitch=%zu", A((uint64_t)(uintptr_t)p->pitchedDevPtr->ptr, a1),
                     p->pitchedDevPtr->pitch);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocArray_v3020: {
        P(cudaMallocArray_v3020_params);
        if (!exit)
            snprintf(o, n, " width=%zu height=%zu", p->width, p->height);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020: {
        P(cudaMallocHost_v3020_params);
        if (!exit)
            snprintf(o, n, " size=%zu", p->size);
        else
            snprintf(o, n, " *ptr=%s", A((uint64_t)(uintptr_t)*p->ptr, a1));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020: {
        P(cudaHostAlloc_v3020_params);
        if (!exit)
            snprintf(o, n, " size=%zu flags=%u", p->size, p->flags);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000: {
        P(cudaHostRegister_v4000_params);
        if (!exit)
            snprintf(o, n, " size=%zu flags=%u", p->size, p->flags);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000: {
        P(cudaMallocManaged_v6000_params);
        if (!exit)
            snprintf(o, n, " size=%zu flags=%u", p->size, p->flags);
        else
            snprintf(o, n, " *devPtr=%s", A((uint64_t)(uintptr_t)*p->devPtr, a1));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020: {
        P(cudaMallocAsync_v11020_params);
        if (!exit)
            snprintf(o, n, " size=%zu stream=%u", p->size, stream_id(p->hStream));
        else
            snprintf(o, n, " *devPtr=%s", A((uint64_t)(uintptr_t)*p->devPtr, a1));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020: {
        P(cudaMallocFromPoolAsync_v11020_params);
        if (!exit)
            snprintf(o, n, " size=%zu stream=%u", p->size, stream_id(p->stream));
        else
            snprintf(o, n, " *ptr=%s", A((uint64_t)(uintptr_t)*p->ptr, a1));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020: {
        P(cudaFreeAsync_v11020_params);
        if (!exit)
            snprintf(o, n, " devPtr=%s stream=%u", A((uint64_t)(uintptr_t)p->devPtr, a1),
                     stream_id(p->hStream));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolTrimTo_v11020: {
        P(cudaMemPoolTrimTo_v11020_params);
        if (!exit)
            snprintf(o, n, " minBytesToKeep=%zu", p->minBytesToKeep);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolSetAttribute_v11020: {
        P(cudaMemPoolSetAttribute_v11020_params);
        if (!exit)
            snprintf(o, n, " attr=%d", (int)p->attr);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemGetInfo_v3020: {
        P(cudaMemGetInfo_v3020_params);
        if (exit && *(cudaError_t *)d->functionReturnValue == cudaSuccess)
            snprintf(o, n, " *free=%zu *total=%zu", *p->free, *p->total);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020: {
        P(cudaStreamCreate_v3020_params);
        if (exit)
            snprintf(o, n, " *pStream=%u", stream_id(*p->pStream));
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020: {
        P(cudaSetDevice_v3020_params);
        if (!exit)
            snprintf(o, n, " device=%d", p->device);
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000: {
        P(cudaLaunchKernel_v7000_params);
        if (!exit)
            snprintf(o, n, " grid=%u block=%u", p->gridDim.x, p->blockDim.x);
        break;
    }
    default: break;
    }
    (void)a2;
}

static void driver_params(CUpti_CallbackId cbid, const CUpti_CallbackData *d, int exit, char *o,
                          size_t n)
{
    char a1[24];
    o[0] = 0;
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
        P(cuMemAlloc_v2_params);
        if (!exit)
            snprintf(o, n, " bytesize=%zu", p->bytesize);
        else
            snprintf(o, n, " *dptr=%s", A(*p->dptr, a1));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
        P(cuMemFree_v2_params);
        if (!exit)
            snprintf(o, n, " dptr=%s", A(p->dptr, a1));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        P(cuMemAllocPitch_v2_params);
        if (!exit)
            snprintf(o, n, " width=%zu height=%zu elem=%u", p->WidthInBytes, p->Height,
                     p->ElementSizeBytes);
        else
            snprintf(o, n, " *dptr=%s *pitch=%zu", A(*p->dptr, a1), *p->pPitch);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
        P(cuMemAllocHost_v2_params);
        if (!exit)
            snprintf(o, n, " bytesize=%zu", p->bytesize);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
        P(cuMemHostAlloc_params);
        if (!exit)
            snprintf(o, n, " bytesize=%zu flags=%u", p->bytesize, p->Flags);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
        P(cuMemAllocManaged_params);
        if (!exit)
            snprintf(o, n, " bytesize=%zu flags=%u", p->bytesize, p->flags);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync: {
        P(cuMemAllocAsync_params);
        if (!exit)
            snprintf(o, n, " bytesize=%zu stream=%u", p->bytesize, stream_id(p->hStream));
        else
            snprintf(o, n, " *dptr=%s", A(*p->dptr, a1));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync: {
        P(cuMemAllocFromPoolAsync_params);
        if (!exit)
            snprintf(o, n, " bytesize=%zu stream=%u", p->bytesize, stream_id(p->hStream));
        else
            snprintf(o, n, " *dptr=%s", A(*p->dptr, a1));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync: {
        P(cuMemFreeAsync_params);
        if (!exit)
            snprintf(o, n, " dptr=%s stream=%u", A(p->dptr, a1), stream_id(p->hStream));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
        P(cuMemCreate_params);
        if (!exit)
            snprintf(o, n, " size=%zu dev=%d", p->size, p->prop->location.id);
        else
            snprintf(o, n, " *handle=0x%llx", (unsigned long long)*p->handle);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
        P(cuMemRelease_params);
        if (!exit)
            snprintf(o, n, " handle=0x%llx", (unsigned long long)p->handle);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
        P(cuMemAddressReserve_params);
        if (!exit)
            snprintf(o, n, " size=%zu", p->size);
        else
            snprintf(o, n, " *ptr=%s", A(*p->ptr, a1));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
        P(cuMemAddressFree_params);
        if (!exit)
            snprintf(o, n, " ptr=%s size=%zu", A(p->ptr, a1), p->size);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
        P(cuMemMap_params);
        if (!exit)
            snprintf(o, n, " ptr=%s size=%zu offset=%zu handle=0x%llx", A(p->ptr, a1), p->size,
                     p->offset, (unsigned long long)p->handle);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
        P(cuMemUnmap_params);
        if (!exit)
            snprintf(o, n, " ptr=%s size=%zu", A(p->ptr, a1), p->size);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2: {
        P(cuMemGetInfo_v2_params);
        if (exit && *(CUresult *)d->functionReturnValue == CUDA_SUCCESS)
            snprintf(o, n, " *free=%zu *total=%zu", *p->free, *p->total);
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
        P(cuLaunchKernel_params);
        if (!exit)
            snprintf(o, n, " grid=%u block=%u", p->gridDimX, p->blockDimX);
        break;
    }
    default: break;
    }
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    tl_app_thread = 1;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        const CUpti_ResourceData *r = data;
        const char *name = "?";
        cuptiGetCallbackName(domain, cbid, &name);
        if (g_summary) {
            char k[96];
            snprintf(k, sizeof(k), "RES %s", name);
            pthread_mutex_lock(&g_mu);
            count(k);
            pthread_mutex_unlock(&g_mu);
            return;
        }
        char extra[64] = "";
        if (cbid == CUPTI_CBID_RESOURCE_STREAM_CREATED ||
            cbid == CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING)
            snprintf(extra, sizeof(extra), " stream=%u", stream_id(r->resourceHandle.stream));
        if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED ||
            cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)
            snprintf(extra, sizeof(extra), " module=%u",
                     r->resourceDescriptor
                         ? ((CUpti_ModuleResourceData *)r->resourceDescriptor)->moduleId
                         : 0);
        uint32_t dev = 0;
        if (r->context)
            cuptiGetDeviceId(r->context, &dev);
        logf_("RES %s ctx=%u dev=%u%s\n", name, ctx_id(r->context), dev, extra);
        return;
    }
    const CUpti_CallbackData *d = data;
    int exit = d->callbackSite == CUPTI_API_EXIT;
    const char *cname = NULL;
    cuptiGetCallbackName(domain, cbid, &cname);
    if (!cname || strcmp(cname, d->functionName))
        logf_("ERR name mismatch %s vs %s\n", cname ? cname : "-", d->functionName);
    if (!exit) {
        *d->correlationData = d->correlationId * 1000ull + 7;
    } else if (d->correlationId == 0) {
        /* the exit of a call that entered before the subscription (SIMCUDA_LATE_INJECTION): no
         * correlation id, the slot holds whatever it held */
        logf_("LATE exit without enter: %s correlationData=%#llx\n", d->functionName,
              (unsigned long long)*d->correlationData);
    } else if (*d->correlationData != d->correlationId * 1000ull + 7) {
        logf_("ERR correlationData lost for %s\n", d->functionName);
    }
    const char *dom = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "RT" : "DR";
    if (g_summary) {
        char k[96];
        snprintf(k, sizeof(k), "%s%s %s", dom, exit ? "<" : ">", d->functionName);
        pthread_mutex_lock(&g_mu);
        count(k);
        pthread_mutex_unlock(&g_mu);
        return;
    }
    char params[256];
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        runtime_params(cbid, d, exit, params, sizeof(params));
    else
        driver_params(cbid, d, exit, params, sizeof(params));
    char ret[32] = "";
    if (exit)
        snprintf(ret, sizeof(ret), " ret=%d", *(int *)d->functionReturnValue);
    char sym[128] = "";
    if (d->symbolName)
        snprintf(sym, sizeof(sym), " symbol=%s", d->symbolName);
    logf_("%s%s %s corr=%u ctx=%u%s%s%s\n", dom, exit ? "<" : ">", d->functionName,
          d->correlationId, d->contextUid, ret, sym, params);
}

/* ---- activity ---- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *maxNumRecords)
{
    *maxNumRecords = 0;
    if (g_bufsize == 0) {
        *buffer = NULL;
        *size = 0;
        return;
    }
    *buffer = aligned_alloc(8, (g_bufsize + 7) / 8 * 8);
    *size = g_bufsize;
}

static const char *memkind(CUpti_ActivityMemoryKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "PAGEABLE";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "PINNED";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "DEVICE";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "ARRAY";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "MANAGED";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "DEVICE_STATIC";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "MANAGED_STATIC";
    default: return "UNKNOWN";
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t streamId, uint8_t *buffer,
                                      size_t size, size_t validSize)
{
    CUpti_Activity *rec = NULL;
    int n = 0;
    char a1[24], a2[24];
    while (cuptiActivityGetNextRecord(buffer, validSize, &rec) == CUPTI_SUCCESS) {
        n++;
        if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
            CUpti_ActivityMemory4 *m = (CUpti_ActivityMemory4 *)rec;
            const char *op =
                m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                    ? "ALLOC"
                    : "RELEASE";
            if (m->timestamp == 0)
                logf_("ERR MEMORY2 record without timestamp\n");
            if (g_summary) {
                char k[96];
                snprintf(k, sizeof(k), "ACT MEMORY2 %s %s", op, memkind(m->memoryKind));
                pthread_mutex_lock(&g_mu);
                count(k);
                pthread_mutex_unlock(&g_mu);
                continue;
            }
            char pool[160] = "";
            if (m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID)
                snprintf(pool, sizeof(pool),
                         " pool={type=%d addr=%s threshold=%" PRIu64 " size=%" PRIu64
                         " used=%" PRIu64 "}",
                         (int)m->memoryPoolConfig.memoryPoolType,
                         A(m->memoryPoolConfig.address, a2), m->memoryPoolConfig.releaseThreshold,
                         m->memoryPoolConfig.pool.size, m->memoryPoolConfig.utilizedSize);
            logf_("ACT MEMORY2 %s %s addr=%s bytes=%" PRIu64
                  " corr=%u dev=%u ctx=%d stream=%d async=%u name=%s%s\n",
                  op, memkind(m->memoryKind), A(m->address, a1), m->bytes, m->correlationId,
                  m->deviceId, (int)m->contextId, (int)m->streamId, m->isAsync,
                  m->name ? m->name : "-", pool);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL) {
            CUpti_ActivityMemoryPool3 *p = (CUpti_ActivityMemoryPool3 *)rec;
            static const char *ops[] = {"INVALID", "CREATED", "DESTROYED", "TRIMMED"};
            const char *op =
                (unsigned)p->memoryPoolOperationType < 4 ? ops[p->memoryPoolOperationType] : "?";
            if (g_summary) {
                char k[96];
                snprintf(k, sizeof(k), "ACT MEMORY_POOL %s", op);
                pthread_mutex_lock(&g_mu);
                count(k);
                pthread_mutex_unlock(&g_mu);
                continue;
            }
            logf_("ACT MEMORY_POOL %s type=%d addr=%s dev=%u size=%" PRIu64 " threshold=%" PRIu64
                  " used=%" PRIu64 " minBytesToKeep=%zu corr=%u\n",
                  op, (int)p->memoryPoolType, A(p->address, a1), p->deviceId, p->size,
                  p->releaseThreshold, p->utilizedSize, p->minBytesToKeep, p->correlationId);
        } else {
            logf_("ERR unexpected activity kind %d\n", (int)rec->kind);
        }
    }
    if (!g_summary)
        logf_("BUF completed size=%zu valid=%zu records=%d ctx=%p stream=%u app_thread=%s\n", size,
              validSize, n, (void *)ctx, streamId, tl_app_thread ? "yes" : "no");
    else if (tl_app_thread)
        logf_("ERR buffer completed on an application thread\n");
    free(buffer);
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void at_exit(void)
{
    tl_app_thread = 1;
    if (!strcmp(g_flush, "forced"))
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    else if (!strcmp(g_flush, "default"))
        cuptiActivityFlushAll(0);
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped);
    if (g_summary) {
        qsort(g_counts, (size_t)g_nkeys, sizeof(g_counts[0]), cmp_keys);
        for (int i = 0; i < g_nkeys; i++)
            logf_("COUNT %s = %lu\n", g_counts[i].key, g_counts[i].n);
    }
    logf_("END dropped=%zu init_calls=%d\n", dropped, g_init_calls);
    if (g_log)
        fflush(g_log);
}

EXPORT int InitializeInjection(void)
{
    g_init_calls++;
    if (g_init_calls > 1)
        return 1;
    const char *path = getenv("SIMTEST_LOG");
    g_log = path && *path ? fopen(path, "w") : NULL;
    if (g_log)
        setvbuf(g_log, NULL, _IOLBF, 0);
    const char *mode = getenv("SIMTEST_MODE");
    g_summary = mode && !strcmp(mode, "summary");
    const char *bs = getenv("SIMTEST_BUFSIZE");
    if (bs && *bs)
        g_bufsize = (size_t)strtoull(bs, NULL, 0);
    const char *fl = getenv("SIMTEST_FLUSH");
    if (fl && *fl)
        g_flush = fl;
    tl_app_thread = 1;

    uint32_t version = 0;
    cuptiGetVersion(&version);
    logf_("INIT cupti_version=%u header_version=%u\n", version, (unsigned)CUPTI_API_VERSION);
    CUpti_SubscriberParams sp;
    memset(&sp, 0, sizeof(sp));
    sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    sp.subscriberName = "simcuda test injection";
    CUptiResult r = cuptiSubscribe_v2(&g_sub, on_callback, NULL, &sp);
    logf_("SUBSCRIBE result=%d\n", (int)r);
    if (r != CUPTI_SUCCESS)
        return 1;
    if (getenv("SIMTEST_SECOND_SUBSCRIBE")) {
        CUpti_SubscriberHandle second = NULL;
        char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
        CUpti_SubscriberParams sp2;
        memset(&sp2, 0, sizeof(sp2));
        sp2.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        sp2.subscriberName = "second tool";
        sp2.oldSubscriberName = old;
        sp2.oldSubscriberSize = sizeof(old);
        CUptiResult r2 = cuptiSubscribe_v2(&second, on_callback, NULL, &sp2);
        const char *rs = NULL;
        cuptiGetResultString(r2, &rs);
        logf_("SECOND_SUBSCRIBE result=%d (%s) holder=\"%s\"\n", (int)r2, rs ? rs : "?", old);
        CUptiResult r3 = cuptiSubscribe(&second, on_callback, NULL);
        logf_("SECOND_SUBSCRIBE_V1 result=%d\n", (int)r3);
    }
    cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API);
    cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_RESOURCE);
    if (!getenv("SIMTEST_NO_ACTIVITY")) {
        cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2);
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    }
    atexit(at_exit);
    return 1;
}
