/* gmp_cupti_activity: the CUPTI collector's activity records (gmp_cupti_impl.h): the buffers
 * CUPTI fills (bounded), MEMORY2 records (static memory, graph allocations) and MEMORY_POOL
 * records (pool sizes), with their timestamps moved to the trace clock. */
#include "gmp_cupti_impl.h"

#include <stdlib.h>

#include "gmp_alert.h"
#include "gmp_clock.h"

static _Atomic int64_t clock_offset; /* trace clock - CUPTI clock */
static atomic_size_t act_outstanding;
size_t gmp_cupti_act_limit;
unsigned gmp_cupti_api_version;

#define ACT_BUF_BYTES (1u << 20)

/* Another CUPTI client in the program (torch.profiler's Kineto) may register its own activity
 * buffer callbacks: CUPTI keeps one pair per process, the last registered (cupti_activity.h:
 * cuptiActivityRegisterCallbacks, 7648-7669), so from then on every record of every kind enabled,
 * the agent's MEMORY2 and MEMORY_POOL ones included, goes to that client's buffers. No CUPTI call
 * says so. What the agent sees: its buffer callbacks are not called any more, although API memory
 * calls that MEMORY2 reports (device, pinned, managed and pool allocations and frees) keep coming.
 * owed counts those calls since the agent's last buffer callback (requested or completed);
 * requesting a buffer, declining it included, or getting one back resets it. After the forced
 * flush at the stop, which hands every buffer CUPTI holds to the registered completion callback
 * before it returns (cupti_activity.h:7715, "a blocking call"; 7728-7732, the forced flush "returns
 * all the activity buffers"), owed > 0 means
 * the records of those calls went to another client. */
static atomic_uint_least64_t owed;
static _Atomic uint64_t last_ours_ns; /* trace time of the agent's last buffer callback */

static void ours_called(void)
{
    atomic_store_explicit(&owed, 0, memory_order_relaxed);
    atomic_store_explicit(&last_ours_ns, gmp_clock_ns(), memory_order_relaxed);
}

void gmp_cupti_activity_owed(void)
{
    atomic_fetch_add_explicit(&owed, 1, memory_order_relaxed);
}

void gmp_cupti_activity_unowed(void)
{
    uint_least64_t v = atomic_load_explicit(&owed, memory_order_relaxed);
    while (v && !atomic_compare_exchange_weak_explicit(&owed, &v, v - 1, memory_order_relaxed,
                                                       memory_order_relaxed)) {
    }
}

int gmp_cupti_activity_replaced(uint64_t *last_ns)
{
    if (!atomic_load(&owed))
        return 0;
    *last_ns = atomic_load(&last_ours_ns);
    return 1;
}

void CUPTIAPI gmp_cupti_buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    ours_called();
    *max_records = 0;
    *buffer = NULL;
    *size = 0;
    if (atomic_fetch_add(&act_outstanding, ACT_BUF_BYTES) + ACT_BUF_BYTES > gmp_cupti_act_limit) {
        atomic_fetch_sub(&act_outstanding, ACT_BUF_BYTES);
        return; /* CUPTI drops records and counts them: reported as LOST */
    }
    void *p = NULL;
    if (posix_memalign(&p, 8, ACT_BUF_BYTES) != 0) {
        atomic_fetch_sub(&act_outstanding, ACT_BUF_BYTES);
        return;
    }
    *buffer = p;
    *size = ACT_BUF_BYTES;
}

static uint32_t static_range(const char *name)
{
    /* static memory is attributed to a range "[static]/<variable>" */
    static atomic_uint root;
    uint32_t r = atomic_load(&root);
    if (!r) {
        r = gmp_writer_range(gmp_cupti_sink->w, 0, 0,
                             gmp_writer_string(gmp_cupti_sink->w, "[static]", 8));
        atomic_store(&root, r);
    }
    if (!name || !*name)
        return r;
    size_t n = strnlen(name, GMP_MAX_STRING_BYTES);
    return gmp_writer_range(gmp_cupti_sink->w, r, 0, gmp_writer_string(gmp_cupti_sink->w, name, n));
}

static void on_memory2(gmp_wthread *t, const CUpti_ActivityMemory4 *m)
{
    static atomic_uint api;
    uint64_t ts = m->timestamp ? (uint64_t)((int64_t)m->timestamp + atomic_load(&clock_offset)) : 0;
    if (m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID &&
        m->memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
        gmp_rec p = {.type = GMP_REC_POOL, .time_ns = ts};
        /* where the pool's memory is, from the record's memory kind (a pinned host pool's
         * allocations are PINNED memory, a managed pool's MANAGED: cupti_activity.h,
         * CUpti_ActivityMemoryKind), learnt for its MEMORY_POOL records */
        int pdev = (int)m->deviceId;
        uint32_t pkind = 0;
        if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED)
            pdev = -1;
        else if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED)
            pkind = GMP_MEM_MANAGED;
        gmp_cupti_pool_base_seen(m->memoryPoolConfig.address, pdev, pkind == GMP_MEM_MANAGED);
        p.u.pool.device = pdev;
        p.u.pool.op = GMP_POOL_RESERVED;
        p.u.pool.pool = m->memoryPoolConfig.address;
        p.u.pool.value = m->memoryPoolConfig.pool.size;
        if (pkind != GMP_MEM_MANAGED)
            emit(t, &p);
    }
    unsigned kind;
    uint32_t a = 0, flags = GMP_MEMF_ACTIVITY;
    if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC)
        kind = GMP_MEM_STATIC;
    else if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC)
        kind = GMP_MEM_MANAGED;
    else if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
             (a = gmp_cupti_launch_api(m->correlationId)) != 0) {
        kind = GMP_MEM_ASYNC_POOL; /* a graph's alloc or free node, run by its launch */
        flags |= GMP_MEMF_ASYNC;
    } else {
        return; /* recorded from the API callbacks */
    }
    if (!a)
        a = atomic_load(&api);
    if (!a) {
        a = gmp_writer_string(gmp_cupti_sink->w, GMP_API_MODULE_LOAD,
                              sizeof GMP_API_MODULE_LOAD - 1);
        atomic_store(&api, a);
    }
    gmp_rec r = {.type = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                             ? GMP_REC_FREE
                             : GMP_REC_ALLOC,
                 .time_ns = ts};
    r.u.mem.device = (int32_t)m->deviceId;
    r.u.mem.kind = kind;
    r.u.mem.flags = flags;
    r.u.mem.api = a;
    r.u.mem.address = m->address;
    r.u.mem.size = m->bytes;
    r.u.mem.stream = m->streamId;
    r.u.mem.correlation = m->correlationId;
    r.u.mem.range = kind == GMP_MEM_ASYNC_POOL ? 0 : static_range(m->name);
    gmp_cupti_describe_device((int)m->deviceId);
    emit(t, &r);
    if (kind == GMP_MEM_ASYNC_POOL)
        gmp_cupti_graph_reserve_floor(t, r.u.mem.device, r.type == GMP_REC_ALLOC, m->bytes, ts);
    if (gmp_alert_on) {
        if (r.type == GMP_REC_ALLOC)
            gmp_alert_alloc(t, &r.u.mem);
        else
            gmp_alert_free(&r.u.mem);
    }
}

/* MEMORY_POOL records: the pool's size after a creation or a trim. cupti_activity.h
 * (CUpti_ActivityMemoryPool3): size "is valid for CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL" only, and
 * isManagedPool (CUPTI 13 records only) says the pool holds managed memory, which is not device
 * memory reserved: both are left out. The size of a TRIMMED record is read as the size after the
 * trim (the pool's size, as for CREATED). */
static void on_memory_pool(gmp_wthread *t, const CUpti_ActivityMemoryPool3 *m)
{
    uint64_t ts = m->timestamp ? (uint64_t)((int64_t)m->timestamp + atomic_load(&clock_offset)) : 0;
    if (m->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED)
        return; /* from the callbacks */
    if (m->memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL)
        return;
    if (gmp_cupti_api_version >= 130000 && m->isManagedPool)
        return;
    int32_t dev = (int32_t)m->deviceId;
    uint32_t kind = 0;
    int pdev = dev;
    if (gmp_cupti_pool_base_where(m->address, &pdev, &kind)) {
        if (kind == GMP_MEM_MANAGED)
            return;
        dev = pdev; /* a host pool's: -1 */
    }
    gmp_rec p = {.type = GMP_REC_POOL, .time_ns = ts};
    p.u.pool.device = dev;
    p.u.pool.op = GMP_POOL_RESERVED;
    p.u.pool.pool = m->address;
    p.u.pool.value = m->size;
    emit(t, &p);
}

void CUPTIAPI gmp_cupti_buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)size;
    ours_called();
    gmp_wthread *t = gmp_cupti_sink ? gmp_cupti_sink->enter() : NULL;
    if (t && buffer) {
        CUpti_Activity *rec = NULL;
        while (gmp_cupti_lib.ActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
            if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY2)
                on_memory2(t, (const CUpti_ActivityMemory4 *)rec);
            else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL)
                on_memory_pool(t, (const CUpti_ActivityMemoryPool3 *)rec);
        }
        size_t dropped = 0;
        if (gmp_cupti_lib.ActivityGetNumDroppedRecords &&
            gmp_cupti_lib.ActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS &&
            dropped)
            gmp_writer_lost(gmp_cupti_sink->w, dropped, GMP_LOST_CUPTI_DROPPED);
    }
    if (t)
        gmp_cupti_sink->leave();
    if (buffer) {
        free(buffer);
        atomic_fetch_sub(&act_outstanding, ACT_BUF_BYTES);
    }
}

/* Activity record layouts the agent reads (CUpti_ActivityMemory4 for MEMORY2,
 * CUpti_ActivityMemoryPool3 for MEMORY_POOL, cupti_activity.h). CUPTI 12.2 to 12.9 (API versions
 * 20 to 28, cupti_version.h) deliver CUpti_ActivityMemory3 / CUpti_ActivityMemoryPool2 (or the
 * newer ones), kept in cupti_activity_deprecated.h; records only grow at their end (Memory4 appends
 * `source`, MemoryPool3 `isManagedPool`), and the static assertions below prove that every field
 * the agent reads is at the same offset in both. isManagedPool is read only from CUPTI 13 on.
 * Versions before 12.2 are not taken (their MEMORY2 records are CUpti_ActivityMemory2, whose
 * prefix differs); nor are later majors than the agent's (not seen yet). */
#define SAME_FIELD(a, b, f) _Static_assert(offsetof(a, f) == offsetof(b, f), #f " moved")
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, kind);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryOperationType);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryKind);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, correlationId);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, address);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, bytes);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, timestamp);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, deviceId);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, streamId);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, name);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryPoolConfig.memoryPoolType);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryPoolConfig.address);
SAME_FIELD(CUpti_ActivityMemory3, CUpti_ActivityMemory4, memoryPoolConfig.pool.size);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, kind);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, memoryPoolOperationType);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, memoryPoolType);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, deviceId);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, address);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, size);
SAME_FIELD(CUpti_ActivityMemoryPool2, CUpti_ActivityMemoryPool3, timestamp);

int gmp_cupti_activity_layout_ok(uint32_t ver)
{
    return (ver >= 20 && ver < 10000) || ver / 10000 == CUPTI_API_VERSION / 10000;
}

/* CUPTI timestamps (CLOCK_REALTIME on Linux, cupti_activity.h at
 * cuptiActivityRegisterTimestampCallback) to the trace clock (CLOCK_MONOTONIC): the offset is
 * measured at start and again before every flush, so a realtime clock adjusted while the program
 * runs (NTP) moves records by at most the adjustment within one interval. */
void gmp_cupti_measure_clock_offset(void)
{
    uint64_t c0 = 0;
    if (gmp_cupti_lib.GetTimestamp && gmp_cupti_lib.GetTimestamp(&c0) == CUPTI_SUCCESS && c0)
        atomic_store(&clock_offset, (int64_t)gmp_clock_ns() - (int64_t)c0);
}
