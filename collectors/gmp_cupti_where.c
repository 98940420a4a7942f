/* gmp_cupti_where: where memory lives, for the CUPTI collector (gmp_cupti_impl.h): the devices'
 * descriptions (DEVICE records, written off the callbacks), the device and type of the memory pools
 * the program created, and the device of each stream. */
#include "gmp_cupti_impl.h"

#include "gmp_driver.h"
#include "gmp_handles.h"

/* Driver entry points for device descriptions (looked up in the process, never loaded by us). */
static struct {
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DeviceGetUuid)(CUuuid *, CUdevice);
} D;

static atomic_uint_least64_t devices_seen; /* bit per device ordinal < 64 with a DEVICE record */
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;

void gmp_cupti_devices_init(void)
{
    *(void **)&D.DeviceGetName = gmp_driver_sym("cuDeviceGetName");
    *(void **)&D.DeviceTotalMem = gmp_driver_sym("cuDeviceTotalMem_v2");
    *(void **)&D.DeviceGetAttribute = gmp_driver_sym("cuDeviceGetAttribute");
    *(void **)&D.DeviceGetUuid = gmp_driver_sym("cuDeviceGetUuid_v2");
    if (!D.DeviceGetUuid)
        *(void **)&D.DeviceGetUuid = gmp_driver_sym("cuDeviceGetUuid");
}

/* ---- device descriptions ---- */

/* Device descriptions (DEVICE records: name, memory, compute capability, UUID) come from driver
 * calls, and cupti_activity.h (cuptiGetDeviceId) documents only cuptiGetDeviceId as callable from
 * inside callbacks. So a callback only marks a device as seen (devices_pending) and wakes the
 * flush thread, which describes it off the callback; the stop describes what is left. Without a
 * flush thread (flush interval 0) descriptions wait for the stop. The DEVICE record may so follow
 * the first records of its device in the file; readers take it whenever it comes. */
static atomic_uint_least64_t devices_pending;

static void describe_now(int dev)
{
    if (dev < 0 || dev >= 64)
        return;
    uint64_t bit = 1ull << dev;
    if (atomic_load(&devices_seen) & bit)
        return;
    pthread_mutex_lock(&dev_lock);
    if (!(atomic_load(&devices_seen) & bit)) {
        gmp_rec r = {.type = GMP_REC_DEVICE};
        char name[256] = "";
        size_t total = 0;
        int major = 0, minor = 0;
        CUuuid uuid;
        memset(&uuid, 0, sizeof uuid);
        if (D.DeviceGetName)
            D.DeviceGetName(name, sizeof name - 1, (CUdevice)dev);
        if (D.DeviceTotalMem)
            D.DeviceTotalMem(&total, (CUdevice)dev);
        if (D.DeviceGetAttribute) {
            D.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                 (CUdevice)dev);
            D.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                 (CUdevice)dev);
        }
        if (D.DeviceGetUuid)
            D.DeviceGetUuid(&uuid, (CUdevice)dev);
        name[sizeof name - 1] = 0;
        r.u.device.id = (uint32_t)dev;
        r.u.device.name = (gmp_str){name, (uint32_t)strlen(name)};
        memcpy(r.u.device.uuid, uuid.bytes, 16);
        r.u.device.total_bytes = total;
        r.u.device.cc_major = (uint32_t)major;
        r.u.device.cc_minor = (uint32_t)minor;
        if (gmp_writer_define(gmp_cupti_sink->w, &r) == GMP_OK)
            atomic_fetch_or(&devices_seen, bit);
    }
    pthread_mutex_unlock(&dev_lock);
}

/* From a callback: remember the device; the flush thread describes it. */
void gmp_cupti_describe_device(int dev)
{
    if (dev < 0 || dev >= 64)
        return;
    uint64_t bit = 1ull << dev;
    if ((atomic_load(&devices_seen) | atomic_load(&devices_pending)) & bit)
        return;
    if (!(atomic_fetch_or(&devices_pending, bit) & bit))
        gmp_cupti_flusher_wake();
}

void gmp_cupti_describe_pending(void)
{
    uint64_t p = atomic_exchange(&devices_pending, 0);
    for (int d = 0; d < 64; d++)
        if (p & (1ull << d))
            describe_now(d);
}

/* ---- where memory lives: pools and streams ----
 * cuda.h: cuMemAllocFromPoolAsync allocates from the pool given, wherever it lives (a pool's
 * location is set at creation: a device, the host, a host NUMA node; cuMemPoolCreate, cuda.h
 * "To create a memory pool for host memory ... CU_MEM_LOCATION_TYPE_HOST"); a managed pool
 * (allocType CU_MEM_ALLOCATION_TYPE_MANAGED) holds managed memory. cuMemAllocAsync allocates from
 * "the current mempool of the provided stream's device" (cuDeviceSetMemPool: that pool "must be
 * local to the specified device"), so its device is the stream's, not the current context's. The
 * agent remembers each pool's location and type at creation, and each stream's device at its
 * STREAM_CREATED resource callback (cuptiGetDeviceId of the stream's context: no driver call).
 * Host pools' memory is recorded on device -1 (the report's "Host"), managed pools' as managed. */
pthread_mutex_t gmp_cupti_loc_lock = PTHREAD_MUTEX_INITIALIZER;
static gmp_handles pools;   /* pool -> device (-1: not a device), GMP_HANDLE_* flags */
static gmp_handles streams; /* stream handle -> device */

void gmp_cupti_pool_created(uint64_t pool, int loc_type, int loc_id, int alloc_type)
{
    if (!pool)
        return;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    gmp_handle_ent *e = gmp_handles_put(&pools, pool);
    if (e) {
        /* CU_MEM_LOCATION_TYPE_DEVICE == cudaMemLocationTypeDevice (1); managed: 2 in both */
        e->device = loc_type == CU_MEM_LOCATION_TYPE_DEVICE ? loc_id : -1;
        e->flags = (loc_type == CU_MEM_LOCATION_TYPE_DEVICE ? 0 : GMP_HANDLE_NOT_DEVICE) |
                   (alloc_type == CU_MEM_ALLOCATION_TYPE_MANAGED ? GMP_HANDLE_MANAGED : 0);
    }
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
}

void gmp_cupti_pool_gone(uint64_t pool)
{
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    gmp_handles_del(&pools, pool);
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
}

/* The device (and kind) of memory from a pool the agent saw created or handed out (a default or
 * current pool, OP_POOL_LOCATE); 0 when unknown (a pool the program got before CUDA started the
 * agent cannot be: the agent starts in cuInit; the caller keeps the stream's device). */
int gmp_cupti_pool_where(uint64_t pool, int *dev, uint32_t *kind)
{
    int known = 0;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    const gmp_handle_ent *e = gmp_handles_get(&pools, pool);
    if (e) {
        known = 1;
        *dev = e->device;
        if (kind && (e->flags & GMP_HANDLE_MANAGED))
            *kind = GMP_MEM_MANAGED;
    }
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
    return known;
}

/* Pools by base address, for activity records: MEMORY2's memoryPoolConfig.address and
 * MEMORY_POOL's address are the pool's base address, not its handle (cupti_activity.h,
 * CUpti_ActivityMemoryPoolConfig and CUpti_ActivityMemoryPool3), and a MEMORY_POOL record says
 * nothing of a host location (deviceId is "the device where the memory pool is created"). A
 * MEMORY2 record of an allocation from a pool says what memory the pool holds (memoryKind PINNED:
 * host memory, MANAGED: managed, DEVICE: deviceId's), so each pool base is learnt there and the
 * pool's later MEMORY_POOL records (trims) follow it. */
static gmp_handles pool_bases; /* base address -> device (-1: not a device), GMP_HANDLE_MANAGED */

void gmp_cupti_pool_base_seen(uint64_t base, int dev, int managed)
{
    if (!base)
        return;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    gmp_handle_ent *e = gmp_handles_put(&pool_bases, base);
    if (e) {
        e->device = dev;
        e->flags = managed ? GMP_HANDLE_MANAGED : 0;
    }
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
}

int gmp_cupti_pool_base_where(uint64_t base, int *dev, uint32_t *kind)
{
    int known = 0;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    const gmp_handle_ent *e = gmp_handles_get(&pool_bases, base);
    if (e) {
        known = 1;
        *dev = e->device;
        if (kind && (e->flags & GMP_HANDLE_MANAGED))
            *kind = GMP_MEM_MANAGED;
    }
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
    return known;
}

/* Streams created or destroyed so far: a thread's cached stream device is valid while equal. */
static atomic_uint stream_gen;
static _Thread_local struct {
    const void *stream;
    int dev;
    unsigned gen;
} tl_stream;

void gmp_cupti_stream_seen(const void *stream, int dev, int gone)
{
    if (!stream)
        return;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    if (gone) {
        gmp_handles_del(&streams, (uint64_t)(uintptr_t)stream);
    } else {
        gmp_handle_ent *e = gmp_handles_put(&streams, (uint64_t)(uintptr_t)stream);
        if (e)
            e->device = dev;
    }
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
    atomic_fetch_add(&stream_gen, 1); /* after the change: cached devices are stale now */
}

/* The device of a stream: a created stream's own; the default streams' is the current one. */
int gmp_cupti_stream_device(const void *stream, int cur)
{
    if ((uintptr_t)stream <= 0x2)
        return cur;
    unsigned gen = atomic_load_explicit(&stream_gen, memory_order_acquire);
    if (tl_stream.stream == stream && tl_stream.gen == gen) /* no lock on the hot path */
        return tl_stream.dev >= 0 ? tl_stream.dev : cur;
    int known = -1;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    const gmp_handle_ent *e = gmp_handles_get(&streams, (uint64_t)(uintptr_t)stream);
    if (e)
        known = e->device;
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
    tl_stream.stream = stream;
    tl_stream.dev = known;
    tl_stream.gen = gen;
    return known >= 0 ? known : cur;
}
