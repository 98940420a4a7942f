/* simcuda CUPTI: libcupti.so.13 for tests. One subscriber, callback domains (driver, runtime,
 * resource, nvtx), and the activity API for MEMORY2 and MEMORY_POOL records, delivered in client
 * buffers from a helper thread. Plugs into the simulated driver through simcuda_set_tool(). */
#include "sim_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim_cbid_names.h"

#define MAX_CBID 2048

struct CUpti_Subscriber_st {
    CUpti_CallbackFunc callback;
    void *userdata;
    char name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN];
    atomic_uchar enabled[CUPTI_CB_DOMAIN_SIZE][MAX_CBID];
    struct CUpti_Subscriber_st *retired_next;
};

static pthread_mutex_t g_sub_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct CUpti_Subscriber_st *) g_sub;
static struct CUpti_Subscriber_st *g_retired; /* unsubscribed handles, kept: see cuptiUnsubscribe */
static atomic_uint g_next_corr = 1;
static _Thread_local int tl_in_callback;
static _Thread_local uint32_t tl_corr_stack[64];
static _Thread_local int tl_corr_depth;
static _Thread_local CUptiResult tl_last_error;

/* activity state */
typedef struct pending_buf {
    uint8_t *buf;
    size_t size, valid;
    struct pending_buf *next;
} pending_buf;

static pthread_mutex_t g_act_mu = PTHREAD_MUTEX_INITIALIZER; /* recursive, see init */
static pthread_mutex_t g_deliver_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_int g_kind_memory2, g_kind_pool;
static CUpti_BuffersCallbackRequestFunc g_req;
static CUpti_BuffersCallbackCompleteFunc g_done;
static _Atomic(CUpti_TimestampCallbackFunc) g_ts_cb;
static uint8_t *g_cur;
static size_t g_cur_size, g_cur_off, g_cur_start, g_cur_max, g_cur_n;
static pending_buf *g_pending_head, **g_pending_tail = &g_pending_head;
static size_t g_dropped;
static _Thread_local int tl_in_delivery;
static int g_source_enabled;

static const simcuda_tool_ops g_ops;

/* the model's stream resolution (sim_driver.c), where it has one */
extern CUstream simcuda_stream_resolve(CUcontext ctx, CUstream s, int perThread)
    __attribute__((weak));

static CUptiResult ret(CUptiResult r)
{
    if (r != CUPTI_SUCCESS)
        tl_last_error = r;
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* failure switches (README "Failure modes"): SIMCUDA_CUPTI_FAIL is a comma-separated list of
 * enable_callback, enable_domain, activity, activity_callbacks, subscribe; the failing calls return
 * SIMCUDA_CUPTI_FAIL_RESULT (a CUptiResult number, default CUPTI_ERROR_UNKNOWN).
 * SIMCUDA_CUPTI_VERSION: what cuptiGetVersion answers (default: the personality's). */

enum {
    FAIL_ENABLE_CALLBACK = 1,
    FAIL_ENABLE_DOMAIN = 2,
    FAIL_ACTIVITY = 4,
    FAIL_ACTIVITY_CALLBACKS = 8,
    FAIL_SUBSCRIBE = 16
};

#ifndef SIMCUDA_CUPTI_API_VERSION
#define SIMCUDA_CUPTI_API_VERSION CUPTI_API_VERSION
#endif

/* the CUDA major version of this CUPTI: API versions count 1, 2, ... up to 12.x (26 is 12.8's,
 * cupti_version.h) and are major * 10000 + ... from 13.0 on */
#define SIMCUDA_CUPTI_MAJOR                                                                        \
    (SIMCUDA_CUPTI_API_VERSION >= 10000 ? SIMCUDA_CUPTI_API_VERSION / 10000 : 12)

static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;
static unsigned g_fail;
static CUptiResult g_fail_result = CUPTI_ERROR_UNKNOWN;
static uint32_t g_version = SIMCUDA_CUPTI_API_VERSION;

static void read_config(void)
{
    const char *f = getenv("SIMCUDA_CUPTI_FAIL");
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"enable_callback", FAIL_ENABLE_CALLBACK},
                 {"enable_domain", FAIL_ENABLE_DOMAIN},
                 {"activity", FAIL_ACTIVITY},
                 {"activity_callbacks", FAIL_ACTIVITY_CALLBACKS},
                 {"subscribe", FAIL_SUBSCRIBE}};
    while (f && *f) {
        size_t n = strcspn(f, ",");
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (strlen(names[i].name) == n && strncmp(f, names[i].name, n) == 0)
                g_fail |= names[i].bit;
        f += n;
        if (*f == ',')
            f++;
    }
    const char *r = getenv("SIMCUDA_CUPTI_FAIL_RESULT");
    if (r && *r)
        g_fail_result = (CUptiResult)strtol(r, NULL, 0);
    const char *v = getenv("SIMCUDA_CUPTI_VERSION");
    if (v && *v)
        g_version = (uint32_t)strtoul(v, NULL, 0);
}

static int failing(unsigned what)
{
    pthread_once(&g_cfg_once, read_config);
    return (g_fail & what) != 0;
}

/* a CUPTI function the simulator does not model (generated stubs, gen_api_stubs.py) */
SIMCUDA_HIDDEN int simcuda_cupti_stub(void)
{
    return ret(CUPTI_ERROR_NOT_SUPPORTED);
}

static void init_once(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g_act_mu, &a);
    pthread_mutexattr_destroy(&a);
    simcuda_set_tool(&g_ops);
}

static void ensure_init(void)
{
    pthread_once(&g_once, init_once);
}

/* The tool is installed as soon as the library is loaded, as CUPTI attaches to the driver. */
__attribute__((constructor)) static void sim_cupti_ctor(void)
{
    ensure_init();
}

/* ------------------------------------------------------------------------------------------ */
/* timestamps */

static uint64_t now_ns(void)
{
    CUpti_TimestampCallbackFunc cb = atomic_load(&g_ts_cb);
    if (cb)
        return cb();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
    if (!timestamp)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *timestamp = now_ns();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp)
{
    if (!funcTimestamp)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    atomic_store(&g_ts_cb, funcTimestamp);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    if (!version)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    pthread_once(&g_cfg_once, read_config);
    *version = g_version;
    return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* results */

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    switch (result) {
#define R(x)                                                                                       \
    case x: *str = #x; return CUPTI_SUCCESS;
        R(CUPTI_SUCCESS)
        R(CUPTI_ERROR_INVALID_PARAMETER)
        R(CUPTI_ERROR_INVALID_DEVICE)
        R(CUPTI_ERROR_INVALID_CONTEXT)
        R(CUPTI_ERROR_INVALID_OPERATION)
        R(CUPTI_ERROR_OUT_OF_MEMORY)
        R(CUPTI_ERROR_MAX_LIMIT_REACHED)
        R(CUPTI_ERROR_NOT_READY)
        R(CUPTI_ERROR_NOT_COMPATIBLE)
        R(CUPTI_ERROR_NOT_INITIALIZED)
        R(CUPTI_ERROR_INVALID_KIND)
        R(CUPTI_ERROR_NOT_SUPPORTED)
        R(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        R(CUPTI_ERROR_UNKNOWN)
#undef R
    default: *str = NULL; return ret(CUPTI_ERROR_INVALID_PARAMETER);
    }
}

CUptiResult CUPTIAPI cuptiGetErrorMessage(CUptiResult result, const char **str)
{
    return cuptiGetResultString(result, str);
}

CUptiResult CUPTIAPI cuptiGetLastError(void)
{
    CUptiResult r = tl_last_error;
    tl_last_error = CUPTI_SUCCESS;
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* subscription */

static CUptiResult subscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                             void *userdata, const char *name, char *old_name, size_t old_size)
{
    ensure_init();
    if (!subscriber)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (failing(FAIL_SUBSCRIBE))
        return ret(g_fail_result);
    /* A CUPTI needs a driver of its own CUDA major version or later (CUDA's compatibility rules:
     * a 13.x toolkit's components need a 13.x driver, r580 or later; docs.nvidia.com/deploy/
     * cuda-compatibility, "Minor Version Compatibility"). The real libcupti.so.13 (CUPTI 13.0.1)
     * answers cuptiSubscribe with CUPTI_ERROR_UNKNOWN on the CUDA 12 personality's 12.8 driver;
     * the simulated one does the same. */
    if (SIMCUDA_CUPTI_MAJOR > simcuda_driver_version() / 1000)
        return ret(CUPTI_ERROR_UNKNOWN);
    pthread_mutex_lock(&g_sub_mu);
    struct CUpti_Subscriber_st *cur = atomic_load(&g_sub);
    if (cur) {
        if (old_name && old_size)
            snprintf(old_name, old_size, "%s", cur->name);
        pthread_mutex_unlock(&g_sub_mu);
        return ret(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    }
    struct CUpti_Subscriber_st *s = calloc(1, sizeof(*s));
    if (!s) {
        pthread_mutex_unlock(&g_sub_mu);
        return ret(CUPTI_ERROR_OUT_OF_MEMORY);
    }
    s->callback = callback;
    s->userdata = userdata;
    /* "CUPTI adds a 10 byte prefix" (cupti_callbacks.h): "CUPTI for " */
    snprintf(s->name, sizeof(s->name), "CUPTI for %.*s", CUPTI_SUBSCRIBER_NAME_MAX_LEN,
             name ? name : "unnamed subscriber");
    atomic_store(&g_sub, s);
    pthread_mutex_unlock(&g_sub_mu);
    *subscriber = s;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                    void *userdata)
{
    return subscribe(subscriber, callback, userdata, NULL, NULL, 0);
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber,
                                       CUpti_CallbackFunc callback, void *userdata,
                                       CUpti_SubscriberParams *pParams)
{
    if (pParams && pParams->structSize == 0)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    const char *name = NULL;
    char *old = NULL;
    size_t old_size = 0;
    if (pParams) {
        name = pParams->subscriberName;
        if (pParams->structSize >= CUpti_SubscriberParams_STRUCT_SIZE) {
            old = pParams->oldSubscriberName;
            old_size = pParams->oldSubscriberSize;
        }
    }
    return subscribe(subscriber, callback, userdata, name, old, old_size);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    pthread_mutex_lock(&g_sub_mu);
    struct CUpti_Subscriber_st *cur = atomic_load(&g_sub);
    if (!subscriber || subscriber != cur) {
        pthread_mutex_unlock(&g_sub_mu);
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    }
    atomic_store(&g_sub, NULL);
    /* the handle is not freed: a callback may be running on another thread */
    subscriber->retired_next = g_retired;
    g_retired = subscriber;
    pthread_mutex_unlock(&g_sub_mu);
    return CUPTI_SUCCESS;
}

static int domain_ok(CUpti_CallbackDomain d)
{
    return d > CUPTI_CB_DOMAIN_INVALID && d < CUPTI_CB_DOMAIN_SIZE;
}

/* Ids the headers define for a domain: 0 < cbid < the domain's *_SIZE (cupti_*_cbid.h,
 * cupti_callbacks.h); the real cuptiEnableCallback rejects others with INVALID_PARAMETER. */
static int cbid_ok(CUpti_CallbackDomain d, CUpti_CallbackId cbid)
{
    unsigned size = 0;
    switch (d) {
    case CUPTI_CB_DOMAIN_DRIVER_API: size = CUPTI_DRIVER_TRACE_CBID_SIZE; break;
    case CUPTI_CB_DOMAIN_RUNTIME_API: size = CUPTI_RUNTIME_TRACE_CBID_SIZE; break;
    case CUPTI_CB_DOMAIN_RESOURCE: size = CUPTI_CBID_RESOURCE_SIZE; break;
    case CUPTI_CB_DOMAIN_SYNCHRONIZE: size = CUPTI_CBID_SYNCHRONIZE_SIZE; break;
    case CUPTI_CB_DOMAIN_NVTX: size = CUPTI_CBID_NVTX_SIZE; break;
    case CUPTI_CB_DOMAIN_STATE: size = CUPTI_CBID_STATE_SIZE; break;
    default: return 0;
    }
    return cbid > 0 && cbid < size && cbid < MAX_CBID;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (!subscriber || !domain_ok(domain) || !cbid_ok(domain, cbid))
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (enable && failing(FAIL_ENABLE_CALLBACK))
        return ret(g_fail_result);
    atomic_store(&subscriber->enabled[domain][cbid], enable ? 1 : 0);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (!enable || !subscriber || !domain_ok(domain) || !cbid_ok(domain, cbid))
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *enable = atomic_load(&subscriber->enabled[domain][cbid]);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain)
{
    if (!subscriber || !domain_ok(domain))
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (enable && failing(FAIL_ENABLE_DOMAIN))
        return ret(g_fail_result);
    for (int i = 0; i < MAX_CBID; i++)
        atomic_store(&subscriber->enabled[domain][i], enable ? 1 : 0);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber)
{
    if (!subscriber)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (enable && failing(FAIL_ENABLE_DOMAIN))
        return ret(g_fail_result);
    for (int d = CUPTI_CB_DOMAIN_DRIVER_API; d < CUPTI_CB_DOMAIN_SIZE; d++)
        cuptiEnableDomain(enable, subscriber, (CUpti_CallbackDomain)d);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSupportedDomains(size_t *domainCount, CUpti_DomainTable *domainTable)
{
    static CUpti_CallbackDomain domains[] = {
        CUPTI_CB_DOMAIN_DRIVER_API,  CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_RESOURCE,
        CUPTI_CB_DOMAIN_SYNCHRONIZE, CUPTI_CB_DOMAIN_NVTX,        CUPTI_CB_DOMAIN_STATE};
    if (!domainCount || !domainTable)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *domainCount = sizeof(domains) / sizeof(domains[0]);
    *domainTable = domains;
    return CUPTI_SUCCESS;
}

static const char *lookup(const simcuda_cbid_name *t, uint32_t id)
{
    for (; t->name; t++)
        if (t->id == id)
            return t->name;
    return NULL;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                          const char **name)
{
    if (!name)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    const char *n = NULL;
    switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API: n = lookup(g_runtime_names, cbid); break;
    case CUPTI_CB_DOMAIN_DRIVER_API: n = lookup(g_driver_names, cbid); break;
    case CUPTI_CB_DOMAIN_NVTX: n = lookup(g_nvtx_names, cbid); break;
    case CUPTI_CB_DOMAIN_RESOURCE: n = lookup(g_resource_names, cbid); break;
    default: break;
    }
    if (!n)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *name = n;
    return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* ids */

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t *contextId)
{
    if (!context || !contextId || context->magic != SIMCUDA_CTX_MAGIC)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    *contextId = context->uid;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t *deviceId)
{
    if (!deviceId)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (!context)
        context = simcuda_current_ctx();
    if (!context || context->magic != SIMCUDA_CTX_MAGIC)
        return ret(CUPTI_ERROR_INVALID_CONTEXT);
    *deviceId = (uint32_t)context->device;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t perThreadStream,
                                        uint32_t *streamId)
{
    if (!streamId)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (context && context->magic != SIMCUDA_CTX_MAGIC)
        return ret(CUPTI_ERROR_INVALID_CONTEXT);
    /* special handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD: cudaStreamLegacy,
     * cudaStreamPerThread) and NULL are resolved by the model, never dereferenced */
    if (simcuda_stream_resolve) {
        CUstream s = simcuda_stream_resolve(context, stream, perThreadStream);
        if (!s)
            return ret(CUPTI_ERROR_INVALID_STREAM);
        if (context && s->ctx != context)
            return ret(CUPTI_ERROR_INVALID_STREAM);
        *streamId = s->id;
        return CUPTI_SUCCESS;
    }
    if (stream == CU_STREAM_PER_THREAD || (!stream && perThreadStream))
        return ret(CUPTI_ERROR_INVALID_STREAM); /* a model without per-thread streams */
    if (stream && stream != CU_STREAM_LEGACY) {
        if (stream->magic != SIMCUDA_STREAM_MAGIC)
            return ret(CUPTI_ERROR_INVALID_STREAM);
        if (context && stream->ctx != context)
            return ret(CUPTI_ERROR_INVALID_STREAM);
        *streamId = stream->id;
        return CUPTI_SUCCESS;
    }
    if (!context)
        context = simcuda_current_ctx();
    if (!context || context->magic != SIMCUDA_CTX_MAGIC)
        return ret(CUPTI_ERROR_INVALID_CONTEXT);
    *streamId = context->null_stream.id;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t *streamId)
{
    return cuptiGetStreamIdEx(context, stream, 0, streamId);
}

/* ------------------------------------------------------------------------------------------ */
/* callback dispatch (hooks called by the simulated driver and runtime) */

static int sub_enabled(struct CUpti_Subscriber_st *s, CUpti_CallbackDomain d, CUpti_CallbackId cbid)
{
    return s && s->callback && domain_ok(d) && cbid < MAX_CBID && atomic_load(&s->enabled[d][cbid]);
}

static void deliver_api(simcuda_call *c, CUpti_ApiCallbackSite site)
{
    struct CUpti_Subscriber_st *s = atomic_load(&g_sub);
    if (!sub_enabled(s, c->domain, c->cbid))
        return;
    CUpti_CallbackData d;
    memset(&d, 0, sizeof(d));
    d.callbackSite = site;
    d.functionName = c->name;
    d.functionParams = c->params;
    d.functionReturnValue = c->ret;
    d.symbolName = c->symbol;
    d.context = c->ctx;
    d.contextUid = (c->ctx && c->ctx->magic == SIMCUDA_CTX_MAGIC) ? c->ctx->uid : 0;
    d.correlationData = &c->corr_data;
    d.correlationId = c->corr_id;
    tl_in_callback++;
    s->callback(s->userdata, c->domain, c->cbid, &d);
    tl_in_callback--;
    if (site == CUPTI_API_ENTER)
        c->delivered |= 1;
}

static void hook_api_enter(simcuda_call *c)
{
    simcuda_ptds_apply(c); /* a _ptds/_ptsz entry point forwarding to this call */
    c->corr_id = atomic_fetch_add(&g_next_corr, 1);
    if (tl_corr_depth < 64)
        tl_corr_stack[tl_corr_depth] = c->corr_id;
    tl_corr_depth++;
    if (tl_in_callback)
        return; /* APIs called from inside a callback are not reported */
    deliver_api(c, CUPTI_API_ENTER);
}

/* correlationData of a call whose enter preceded the subscription: the real slot is whatever the
 * stack held (cupti_callbacks.h promises nothing else); a non-canonical address, so a tool that
 * dereferences it crashes here as it might on a GPU */
#define SIMCUDA_JUNK_CORRELATION_DATA 0xdeadbeefcafef00dull

static void hook_api_exit(simcuda_call *c)
{
    if (c->delivered & 4) {
        /* entered before the tool was loaded (SIMCUDA_LATE_INJECTION): only the exit is seen, with
         * no correlation id (no API record was started) and junk correlationData */
        if (tl_in_callback)
            return;
        c->corr_id = 0;
        c->corr_data = SIMCUDA_JUNK_CORRELATION_DATA;
        c->ctx = simcuda_current_ctx();
        deliver_api(c, CUPTI_API_EXIT);
        return;
    }
    if (tl_corr_depth > 0)
        tl_corr_depth--;
    if (!(c->delivered & 1) || tl_in_callback)
        return;
    c->ctx = simcuda_current_ctx();
    deliver_api(c, CUPTI_API_EXIT);
}

static void hook_resource(CUpti_CallbackId cbid, CUcontext ctx, CUstream stream, void *desc)
{
    struct CUpti_Subscriber_st *s = atomic_load(&g_sub);
    if (tl_in_callback || !sub_enabled(s, CUPTI_CB_DOMAIN_RESOURCE, cbid))
        return;
    CUpti_ResourceData d;
    memset(&d, 0, sizeof(d));
    d.context = ctx;
    d.resourceHandle.stream = stream;
    d.resourceDescriptor = desc;
    tl_in_callback++;
    s->callback(s->userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &d);
    tl_in_callback--;
}

/* ------------------------------------------------------------------------------------------ */
/* activity buffers */

static size_t record_size(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: return sizeof(CUpti_ActivityMemoryPool3);
    default: return 0;
    }
}

static size_t align_off(const uint8_t *buf)
{
    return (size_t)((8 - ((uintptr_t)buf & 7)) & 7);
}

/* under g_act_mu */
static void queue_buffer(uint8_t *buf, size_t size, size_t valid)
{
    pending_buf *p = calloc(1, sizeof(*p));
    if (!p)
        return;
    p->buf = buf;
    p->size = size;
    p->valid = valid;
    *g_pending_tail = p;
    g_pending_tail = &p->next;
}

static void retire_current(void)
{
    if (!g_cur)
        return;
    queue_buffer(g_cur, g_cur_size, g_cur_off);
    g_cur = NULL;
}

static void *deliver_thread(void *arg)
{
    (void)arg;
    tl_in_delivery = 1;
    for (;;) {
        pthread_mutex_lock(&g_act_mu);
        pending_buf *p = g_pending_head;
        if (p) {
            g_pending_head = p->next;
            if (!g_pending_head)
                g_pending_tail = &g_pending_head;
        }
        CUpti_BuffersCallbackCompleteFunc done = g_done;
        pthread_mutex_unlock(&g_act_mu);
        if (!p)
            break;
        if (done)
            done(NULL, 0, p->buf, p->size, p->valid);
        free(p);
    }
    return NULL;
}

/* Completed buffers are handed back on a helper thread that the caller waits for: a thread that is
 * not the application's, yet deterministic. */
static void deliver_pending(void)
{
    if (tl_in_delivery)
        return; /* the running delivery loop picks new buffers up */
    pthread_mutex_lock(&g_deliver_mu);
    pthread_mutex_lock(&g_act_mu);
    int any = g_pending_head != NULL;
    pthread_mutex_unlock(&g_act_mu);
    if (any) {
        pthread_t t;
        if (pthread_create(&t, NULL, deliver_thread, NULL) == 0)
            pthread_join(t, NULL);
    }
    pthread_mutex_unlock(&g_deliver_mu);
}

static void append_record(const void *rec, size_t size)
{
    int deliver = 0;
    pthread_mutex_lock(&g_act_mu);
    if (g_cur && (g_cur_off + size > g_cur_size || (g_cur_max && g_cur_n >= g_cur_max))) {
        retire_current();
        deliver = 1;
    }
    if (!g_cur) {
        uint8_t *b = NULL;
        size_t sz = 0, maxr = 0;
        if (g_req)
            g_req(&b, &sz, &maxr);
        if (b && sz >= align_off(b) + size) {
            g_cur = b;
            g_cur_size = sz;
            g_cur_start = g_cur_off = align_off(b);
            g_cur_max = maxr;
            g_cur_n = 0;
        } else {
            if (b) {
                queue_buffer(b, sz, 0); /* too small: handed back empty */
                deliver = 1;
            }
            g_dropped++;
        }
    }
    if (g_cur) {
        memcpy(g_cur + g_cur_off, rec, size);
        g_cur_off += size;
        g_cur_n++;
    }
    pthread_mutex_unlock(&g_act_mu);
    if (deliver)
        deliver_pending();
}

static uint32_t outer_corr(void)
{
    if (tl_corr_depth <= 0)
        return 0;
    return tl_corr_stack[0];
}

static void hook_memory(const simcuda_mem_event *ev)
{
    if (!atomic_load(&g_kind_memory2))
        return;
    CUpti_ActivityMemory4 r;
    memset(&r, 0, sizeof(r));
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = ev->op;
    r.memoryKind = ev->kind;
    r.correlationId = outer_corr();
    r.address = ev->address;
    r.bytes = ev->bytes;
    r.timestamp = now_ns();
    r.PC = 0;
    r.processId = (uint32_t)getpid();
    r.deviceId = (uint32_t)ev->device;
    r.contextId =
        (ev->ctx && ev->ctx->magic == SIMCUDA_CTX_MAGIC) ? ev->ctx->uid : CUPTI_INVALID_CONTEXT_ID;
    r.streamId = ev->stream ? ev->stream->id : CUPTI_INVALID_STREAM_ID;
    r.name = ev->name;
    r.isAsync = (uint32_t)ev->is_async;
    if (ev->has_pool) {
        r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        r.memoryPoolConfig.address = ev->pool_address;
        r.memoryPoolConfig.releaseThreshold = ev->pool_release_threshold;
        r.memoryPoolConfig.pool.size = ev->pool_size;
        r.memoryPoolConfig.utilizedSize = ev->pool_utilized;
    } else {
        r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    }
    r.source = NULL;
    (void)g_source_enabled;
    append_record(&r, sizeof(r));
}

static void hook_mempool(const simcuda_pool_event *ev)
{
    if (!atomic_load(&g_kind_pool))
        return;
    CUpti_ActivityMemoryPool3 r;
    memset(&r, 0, sizeof(r));
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    r.memoryPoolOperationType = ev->op;
    r.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    r.correlationId = outer_corr();
    r.processId = (uint32_t)getpid();
    r.deviceId = (uint32_t)ev->device;
    r.minBytesToKeep = (size_t)ev->min_bytes_to_keep;
    r.address = ev->address;
    r.size = ev->size;
    r.releaseThreshold = ev->release_threshold;
    r.timestamp = now_ns();
    r.utilizedSize = ev->utilized;
    r.isManagedPool = 0;
    append_record(&r, sizeof(r));
}

static const simcuda_tool_ops g_ops = {
    .api_enter = hook_api_enter,
    .api_exit = hook_api_exit,
    .resource = hook_resource,
    .memory = hook_memory,
    .mempool = hook_mempool,
};

CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
    ensure_init();
    if (!funcBufferRequested || !funcBufferCompleted)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    if (failing(FAIL_ACTIVITY_CALLBACKS))
        return ret(g_fail_result);
    pthread_mutex_lock(&g_act_mu);
    g_req = funcBufferRequested;
    g_done = funcBufferCompleted;
    pthread_mutex_unlock(&g_act_mu);
    return CUPTI_SUCCESS;
}

static CUptiResult set_kind(CUpti_ActivityKind kind, int on)
{
    ensure_init();
    if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT)
        return ret(CUPTI_ERROR_INVALID_KIND);
    if (on && failing(FAIL_ACTIVITY))
        return ret(g_fail_result);
    if (kind == CUPTI_ACTIVITY_KIND_MEMORY2)
        atomic_store(&g_kind_memory2, on);
    if (kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL)
        atomic_store(&g_kind_pool, on);
    return CUPTI_SUCCESS; /* other kinds are accepted and produce no records */
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    return set_kind(kind, 1);
}
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    return set_kind(kind, 0);
}
CUptiResult CUPTIAPI cuptiActivityEnableContext(CUcontext context, CUpti_ActivityKind kind)
{
    return set_kind(kind, 1);
}
CUptiResult CUPTIAPI cuptiActivityDisableContext(CUcontext context, CUpti_ActivityKind kind)
{
    return set_kind(kind, 0);
}

CUptiResult CUPTIAPI cuptiActivityEnableAllocationSource(uint8_t enable)
{
    g_source_enabled = enable;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    ensure_init();
    pthread_mutex_lock(&g_act_mu);
    if (!g_req) {
        pthread_mutex_unlock(&g_act_mu);
        return ret(CUPTI_ERROR_INVALID_OPERATION);
    }
    /* every simulated record is complete when written, so a default flush returns the current
     * buffer too when it holds records; a forced flush returns it even when empty */
    if (g_cur && (g_cur_off > g_cur_start || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)))
        retire_current();
    pthread_mutex_unlock(&g_act_mu);
    deliver_pending();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag)
{
    return cuptiActivityFlushAll(flag);
}

CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t time)
{
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity **record)
{
    if (!buffer || !record)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    uint8_t *end = buffer + validBufferSizeBytes;
    uint8_t *p;
    if (!*record) {
        p = buffer + align_off(buffer);
    } else {
        size_t sz = record_size((*record)->kind);
        if (!sz)
            return ret(CUPTI_ERROR_INVALID_KIND);
        p = (uint8_t *)*record + sz;
    }
    if (p + sizeof(CUpti_ActivityKind) > end)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    size_t sz = record_size(((CUpti_Activity *)(void *)p)->kind);
    if (!sz || p + sz > end)
        return ret(CUPTI_ERROR_INVALID_KIND);
    *record = (CUpti_Activity *)(void *)p;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
                                                       size_t *dropped)
{
    if (!dropped)
        return ret(CUPTI_ERROR_INVALID_PARAMETER);
    pthread_mutex_lock(&g_act_mu);
    if (context == NULL) {
        *dropped = g_dropped;
        g_dropped = 0;
    } else {
        *dropped = 0; /* all records go to the global queue */
    }
    pthread_mutex_unlock(&g_act_mu);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiFinalize(void)
{
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    atomic_store(&g_kind_memory2, 0);
    atomic_store(&g_kind_pool, 0);
    pthread_mutex_lock(&g_sub_mu);
    struct CUpti_Subscriber_st *s = atomic_load(&g_sub);
    atomic_store(&g_sub, NULL);
    if (s) {
        s->retired_next = g_retired;
        g_retired = s;
    }
    pthread_mutex_unlock(&g_sub_mu);
    return CUPTI_SUCCESS;
}
