/* gmp_cupti_graphs: CUDA graphs in the CUPTI collector (gmp_cupti_impl.h): which streams are
 * being captured (their allocations are graph nodes, not memory), graph launches by correlation id
 * (for their MEMORY2 records), and the devices' graph memory read by the flush thread. */
#include "gmp_cupti_impl.h"

#include "gmp_driver.h"
#include "gmp_handles.h"

/* ---- CUDA graphs (docs/collectors.md, point 4) ----
 * Stream capture: between cudaStreamBeginCapture and cudaStreamEndCapture, work issued to the
 * capturing stream is not executed but recorded into a graph (cuda_runtime_api.h
 * cudaStreamBeginCapture); a cudaMallocAsync or cudaFreeAsync there adds a memory node
 * (cudaMallocAsync: "if the stream is capturing, the allocation is ... a graph node"), so it
 * allocates or frees nothing now and is not recorded. Other streams join a capture by waiting on
 * an event recorded in a capturing stream; the agent follows that (cudaEventRecord /
 * cudaStreamWaitEvent, enabled only while some capture runs, so programs that never capture pay
 * nothing for them). The memory of graph memory nodes is allocated when the graph runs; CUPTI
 * reports no allocation callback for it, so the agent reads the devices' graph memory
 * (cuDeviceGetGraphMemAttribute: USED_MEM_CURRENT and RESERVED_MEM_CURRENT) from the flush thread,
 * every interval after a graph was launched or uploaded on the device, and writes its changes:
 * the reserved size as the size of a pseudo pool (GRAPH_POOL), the used size as ALLOC/FREE
 * records of kind async-pool, api "graph memory", flagged activity|async, at the time read. The
 * used memory of a graph is therefore seen at the flush interval's resolution; a higher high
 * watermark (USED_MEM_HIGH, never reset by the agent) than seen before is written as a chunk
 * allocated and freed at the reading, so the trace's peak has it. Addresses a capture or
 * cudaGraphAddMemAllocNode returned are the graph's: their frees outside a graph are not
 * recorded (the graph memory's reading covers them). */
static gmp_handles capturing;      /* stream key -> capture id (the origin stream's key) */
static gmp_handles capture_events; /* event -> capture id */
atomic_int gmp_cupti_n_capturing;
static _Thread_local char tl_key; /* its address: this thread's per-thread default stream */

/* A stream's key: the handle, or for the per-thread default stream (NULL of a _ptsz call,
 * cudaStreamPerThread) an address of this thread. */
static uint64_t stream_key(const void *stream, int ptsz)
{
    if ((uintptr_t)stream == 0x2 || (!stream && ptsz))
        return (uint64_t)(uintptr_t)&tl_key;
    return (uint64_t)(uintptr_t)stream;
}

int gmp_cupti_is_ptsz(const api_desc *a)
{
    return (a->dom == CUPTI_CB_DOMAIN_RUNTIME_API &&
            (a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020 ||
             a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020)) ||
           (a->dom == CUPTI_CB_DOMAIN_DRIVER_API &&
            (a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz ||
             a->cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz));
}

/* 1 when the stream of an asynchronous allocation or free is being captured. */
int gmp_cupti_stream_capturing(const void *stream, int ptsz)
{
    if (!atomic_load_explicit(&gmp_cupti_n_capturing, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    int yes = gmp_handles_get(&capturing, stream_key(stream, ptsz)) != NULL;
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
    return yes;
}

/* Removes every entry of capture id from t: keys gathered first (a deletion shifts entries, also
 * across the table's end), then deleted. */
static void remove_capture(gmp_handles *t, uint64_t id)
{
    for (;;) {
        uint64_t keys[32];
        size_t n = 0;
        for (size_t i = 0; i < t->cap && n < 32; i++)
            if (t->ent[i].used && t->ent[i].handle == id)
                keys[n++] = t->ent[i].key;
        for (size_t i = 0; i < n; i++)
            gmp_handles_del(t, keys[i]);
        if (n < 32)
            return;
    }
}

int gmp_cupti_capture_event(const api_desc *a, const void *params)
{
    const two_ptrs *q = params;
    int ptsz = gmp_cupti_is_ptsz(a);
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    int before = (int)capturing.n;
    switch (a->op) {
    case OP_CAPTURE_BEGIN: {
        uint64_t k = stream_key(q->a, ptsz);
        gmp_handle_ent *e = gmp_handles_put(&capturing, k);
        if (e)
            e->handle = k;
        break;
    }
    case OP_CAPTURE_END: {
        /* the origin stream and every stream that joined its capture leave it */
        uint64_t id = stream_key(q->a, ptsz);
        const gmp_handle_ent *o = gmp_handles_get(&capturing, id);
        if (o)
            id = o->handle;
        remove_capture(&capturing, id);
        remove_capture(&capture_events, id);
        break;
    }
    case OP_EVENT_RECORD: {
        const gmp_handle_ent *c = gmp_handles_get(&capturing, stream_key(q->b, ptsz));
        if (c) {
            uint64_t id = c->handle;
            gmp_handle_ent *e = gmp_handles_put(&capture_events, (uint64_t)(uintptr_t)q->a);
            if (e)
                e->handle = id;
        } else {
            gmp_handles_del(&capture_events, (uint64_t)(uintptr_t)q->a);
        }
        break;
    }
    case OP_STREAM_WAIT: {
        const gmp_handle_ent *ev = gmp_handles_get(&capture_events, (uint64_t)(uintptr_t)q->b);
        if (ev) {
            uint64_t id = ev->handle;
            gmp_handle_ent *e = gmp_handles_put(&capturing, stream_key(q->a, ptsz));
            if (e)
                e->handle = id;
        }
        break;
    }
    default: break;
    }
    int after = (int)capturing.n;
    atomic_store(&gmp_cupti_n_capturing, after);
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
    return !before && after ? 1 : before && !after ? -1 : 0;
}

/* Graph launches by correlation id: the MEMORY2 records of the memory a launch allocates and
 * frees (its alloc and free nodes) carry the launch's correlation id (cupti_activity.h,
 * CUpti_ActivityMemory4.correlationId: "identical to the correlation ID in the driver and runtime
 * API activity record that launched the memory operation"). The outermost graph launch call's id
 * and API name are kept here (the last 4096 launches: records arrive within a few flush
 * intervals); a MEMORY2 record of device memory with such an id is a graph allocation or free and
 * is recorded, with the record's address, size and time, under the launch's API name. Lock-free:
 * one 64-bit slot per id (id << 32 | API name's string id). */
#define LAUNCH_RING 4096
static atomic_uint_least64_t launch_ring[LAUNCH_RING];

void gmp_cupti_launch_seen(uint32_t corr, uint32_t api)
{
    if (corr)
        atomic_store_explicit(&launch_ring[corr % LAUNCH_RING], (uint64_t)corr << 32 | api,
                              memory_order_release);
}

/* The API name of the graph launch with this correlation id, 0 when it is not one. */
uint32_t gmp_cupti_launch_api(uint32_t corr)
{
    uint64_t v = atomic_load_explicit(&launch_ring[corr % LAUNCH_RING], memory_order_acquire);
    return corr && (uint32_t)(v >> 32) == corr ? (uint32_t)v : 0;
}

/* Graph memory, read by the flush thread (see above). */
#define GRAPH_POOL(dev) (0x6772617068000000ull | (uint64_t)(uint32_t)(dev)) /* "graph" */
static atomic_uint_least64_t graph_devices; /* devices a graph was launched on */
static struct graph_mem {
    uint64_t used, high;
    atomic_uint_least64_t reserved; /* as last written (poll, or the floor of on_memory2) */
    atomic_uint_least64_t live;     /* graph memory live from the launches' MEMORY2 records */
    uint64_t chunk_addr[256], chunk_size[256]; /* the used memory as records: a stack */
    unsigned nchunks;
    uint64_t next;
} graph_mem[64];

void gmp_cupti_graph_launched(int dev)
{
    if (dev < 0 || dev >= 64)
        return;
    uint64_t bit = 1ull << dev;
    if (!(atomic_fetch_or(&graph_devices, bit) & bit))
        gmp_cupti_flusher_wake();
}

static struct {
    CUresult (*GetAttr)(CUdevice, CUgraphMem_attribute, void *);
    CUresult (*PrimaryCtxGetState)(CUdevice, unsigned int *, int *);
} G;

static void graph_mem_record(gmp_wthread *t, int dev, int alloc, uint64_t addr, uint64_t size)
{
    static atomic_uint api;
    uint32_t sid = atomic_load(&api);
    if (!sid) {
        sid = gmp_writer_string(gmp_cupti_sink->w, "graph memory", 12);
        atomic_store(&api, sid);
    }
    gmp_rec r = {.type = alloc ? GMP_REC_ALLOC : GMP_REC_FREE};
    r.u.mem.device = dev;
    r.u.mem.kind = GMP_MEM_ASYNC_POOL;
    r.u.mem.flags = GMP_MEMF_ACTIVITY | GMP_MEMF_ASYNC;
    r.u.mem.api = sid;
    r.u.mem.address = addr;
    r.u.mem.size = size;
    r.u.mem.handle = GRAPH_POOL(dev);
    emit(t, &r);
}

/* Reads every graph device's graph memory and writes what changed (flush thread, stop). */
void gmp_cupti_graph_mem_poll(void)
{
    uint64_t devs = atomic_load(&graph_devices);
    if (!devs || !G.GetAttr)
        return;
    gmp_wthread *t = gmp_cupti_sink->enter();
    if (!t)
        return;
    for (int dev = 0; dev < 64; dev++) {
        if (!(devs & (1ull << dev)))
            continue;
        unsigned flags = 0;
        int on = 0;
        /* never the call that would create a context: only a device whose context lives */
        if (G.PrimaryCtxGetState &&
            (G.PrimaryCtxGetState((CUdevice)dev, &flags, &on) != CUDA_SUCCESS || !on))
            continue;
        cuuint64_t used = 0, reserved = 0;
        if (G.GetAttr((CUdevice)dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS ||
            G.GetAttr((CUdevice)dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) !=
                CUDA_SUCCESS)
            continue;
        struct graph_mem *g = &graph_mem[dev];
        if (reserved != atomic_load(&g->reserved)) {
            gmp_rec p = {.type = GMP_REC_POOL};
            p.u.pool.device = dev;
            p.u.pool.op = GMP_POOL_RESERVED;
            p.u.pool.pool = GRAPH_POOL(dev);
            p.u.pool.value = reserved;
            emit(t, &p);
            atomic_store(&g->reserved, reserved);
        }
        if (gmp_cupti_memory2_on)
            continue; /* the used memory comes from the launches' MEMORY2 records */
        while (used < g->used && g->nchunks) { /* free from the top; split the last */
            unsigned i = --g->nchunks;
            uint64_t over = g->used - used, sz = g->chunk_size[i];
            graph_mem_record(t, dev, 0, g->chunk_addr[i], sz);
            g->used -= sz;
            if (sz > over) { /* allocate back what remains of it */
                uint64_t back = sz - over;
                uint64_t addr =
                    (0x67ull << 56) | ((uint64_t)dev << 48) | (++g->next & 0xffffffffffull);
                g->chunk_addr[g->nchunks] = addr;
                g->chunk_size[g->nchunks++] = back;
                graph_mem_record(t, dev, 1, addr, back);
                g->used += back;
            }
        }
        cuuint64_t high = 0; /* a peak between two readings (allocated and freed by a graph) */
        if (G.GetAttr((CUdevice)dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high) == CUDA_SUCCESS &&
            high > g->high && high > used && high > g->used) {
            uint64_t addr = (0x67ull << 56) | ((uint64_t)dev << 48) | (++g->next & 0xffffffffffull);
            graph_mem_record(t, dev, 1, addr, high - g->used);
            graph_mem_record(t, dev, 0, addr, high - g->used);
        }
        if (high > g->high)
            g->high = high;
        if (used > g->used) {
            uint64_t grow = used - g->used;
            if (g->nchunks == 256) { /* merge the top into the new chunk */
                unsigned i = --g->nchunks;
                graph_mem_record(t, dev, 0, g->chunk_addr[i], g->chunk_size[i]);
                grow += g->chunk_size[i];
                g->used -= g->chunk_size[i];
            }
            uint64_t addr = (0x67ull << 56) | ((uint64_t)dev << 48) | (++g->next & 0xffffffffffull);
            g->chunk_addr[g->nchunks] = addr;
            g->chunk_size[g->nchunks++] = grow;
            graph_mem_record(t, dev, 1, addr, grow);
            g->used += grow;
        }
    }
    gmp_cupti_sink->leave();
}

/* The graph memory pool holds at least the graph memory live in it: RESERVED_MEM_CURRENT is the
 * memory "allocated for use by the CUDA graphs asynchronous allocator" and USED_MEM_CURRENT the
 * memory "currently associated with graphs" (driver_types.h, cudaGraphMemAttributeType), and only
 * cudaDeviceGraphMemTrim gives blocks "not in use by a graph" back
 * (cuda_runtime_api.h:11079-11082); NVIDIA's graphMemoryFootprint sample says freeing graph
 * allocations does not shrink the footprint, a trim after the frees does (its lines 322-334). So
 * reserved only falls at a trim. The polls read the true size
 * (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) at each flush; between them a launch can take more than
 * was last read, so when a MEMORY2 record of graph memory raises the live bytes above the reserved
 * size last written, the reserved size is raised to it at that record's time. A trim is seen at the
 * next poll. (Called where the activity records are processed; the poll may run beside it, hence
 * the atomics: the replay orders both by time.) */
void gmp_cupti_graph_reserve_floor(gmp_wthread *t, int dev, int alloc, uint64_t bytes, uint64_t ts)
{
    if (dev < 0 || dev >= 64)
        return;
    struct graph_mem *g = &graph_mem[dev];
    uint64_t live;
    if (alloc) {
        live = atomic_fetch_add(&g->live, bytes) + bytes;
    } else {
        uint64_t cur = atomic_load(&g->live);
        while (!atomic_compare_exchange_weak(&g->live, &cur, cur > bytes ? cur - bytes : 0))
            ;
        return;
    }
    uint64_t res = atomic_load(&g->reserved);
    while (live > res) {
        if (atomic_compare_exchange_weak(&g->reserved, &res, live)) {
            gmp_rec p = {.type = GMP_REC_POOL, .time_ns = ts};
            p.u.pool.device = dev;
            p.u.pool.op = GMP_POOL_RESERVED;
            p.u.pool.pool = GRAPH_POOL(dev);
            p.u.pool.value = live;
            emit(t, &p);
            break;
        }
    }
}

void gmp_cupti_graphs_init(void)
{
    *(void **)&G.GetAttr = gmp_driver_sym("cuDeviceGetGraphMemAttribute");
    *(void **)&G.PrimaryCtxGetState = gmp_driver_sym("cuDevicePrimaryCtxGetState");
}
