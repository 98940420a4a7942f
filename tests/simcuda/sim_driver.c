/* simcuda driver: libcuda.so.1 for tests. Owns the simulated devices, contexts, streams and the
 * memory model, loads the injection library in cuInit as the real driver does, and reports every
 * driver API call to the CUPTI hooks that libcupti.so.13 installs. See README.md. */
#include "sim_internal.h"

#include <cudaProfiler.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

#define DEV_ALIGN 256ull             /* cudaMalloc / cuMemAlloc alignment */
#define VMM_GRANULARITY (2ull * MIB) /* cuMemGetAllocationGranularity */
#define POOL_GRANULARITY (2ull * MIB)
#define PITCH_ALIGN 512ull

/* Address layout (README.md): one 8 TiB window per device, 512 GiB sub-regions by kind. */
#define DEV_BASE(d) (0x100000000000ull + (uint64_t)(d)*0x80000000000ull)
#define SUBREGION 0x8000000000ull
#define REG_DEVICE 0
#define REG_ARRAY 1
#define REG_STATIC 2
#define REG_POOLS_FIRST 4
#define POOL_WINDOW 0x800000000ull /* 32 GiB of addresses per pool */
#define MAX_POOLS_PER_DEV ((int)((12 * SUBREGION) / POOL_WINDOW))
#define VMM_BASE 0x500000000000ull
#define VMM_LIMIT 0x540000000000ull

static uint64_t round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* ------------------------------------------------------------------------------------------ */
/* configuration and global state */

typedef struct freeblk {
    uint64_t addr, size;
    struct freeblk *next;
} freeblk;

typedef struct region {
    uint64_t base, limit, bump;
    freeblk *free;
} region;

struct CUmemPoolHandle_st {
    uint32_t magic;
    int dev;
    int idx;
    int is_default;
    region addrs;
    uint64_t threshold;
    uint64_t reserved, reserved_high, used, used_high;
    int reuse_follow, reuse_opportunistic, reuse_internal;
    int host; /* host (pinned) or managed pool: real host memory, not the device's */
    CUmemLocationType loc_type;
    CUmemAllocationType alloc_type;
    unsigned handle_types; /* CUmemAllocationHandleType bits it may be exported as */
    int imported;          /* imported from another process: no memory of its own */
    uint32_t access;       /* devices granted access (cuMemPoolSetAccess), bit per device */
};

struct CUarray_st {
    uint32_t magic;
    int dev;
    CUcontext ctx;
    uint64_t addr, bytes, rsize;
    int level;                         /* a level of a mipmapped array: no memory of its own */
    struct CUmipmappedArray_st *owner; /* the mipmapped array this allocation holds */
    struct CUarray_st *next;           /* g_arrays: every live array (destroyed with its context) */
};

enum alloc_type {
    AT_DEVICE,
    AT_PINNED,
    AT_MANAGED,
    AT_POOL,
    AT_STATIC,
    AT_HOSTREG,
    AT_GRAPH, /* graph memory (alloc nodes), physical memory from the device's graph pool */
    AT_IMPORT /* IPC / pool-import mapping of another process's memory: not this process's */
};

typedef struct alloc {
    uint64_t addr, size, rsize;
    enum alloc_type type;
    int dev;
    CUcontext ctx;
    struct CUmemPoolHandle_st *pool;
    int module, var;
    const char *name;
    unsigned flags;    /* cuMemHostAlloc / cuMemHostRegister flags */
    int refs;          /* AT_IMPORT: opens of the same IPC handle */
    uint64_t src_addr; /* AT_IMPORT: the exporter's address */
    struct alloc *next;
} alloc;

typedef struct vmm_phys {
    CUmemGenericAllocationHandle handle;
    int dev;
    uint64_t size;
    int refs; /* create/import 1, + cuMemRetainAllocationHandle, - cuMemRelease */
    int maps;
    int host;     /* host location: not device memory */
    int imported; /* cuMemImportFromShareableHandle: another process's memory */
    unsigned htypes;
    unsigned char compression; /* CUmemAllocationProp.allocFlags.compressionType */
    struct vmm_phys *next;
} vmm_phys;

typedef struct vmm_map {
    uint64_t addr, size;
    vmm_phys *phys;
    struct vmm_map *next;
} vmm_map;

typedef struct vmm_resv {
    uint64_t addr, size;
    struct vmm_resv *next;
} vmm_resv;

typedef struct sim_device {
    uint64_t capacity;
    uint64_t reserved; /* everything physically allocated on the device */
    region regions[REG_POOLS_FIRST];
    struct CUctx_st ctx;
    struct CUmemPoolHandle_st *default_pool;
    struct CUmemPoolHandle_st *current_pool;
    struct CUmemPoolHandle_st *pools[256];
    int npools;
} sim_device;

#define MAX_MODULES 256
#define MAX_VARS 4096
typedef struct module {
    int used;
    int loaded[SIMCUDA_MAX_DEVICES];
    int nvars;
    const char *names[64];
    size_t sizes[64];
} module;

#define NBUCKETS 65536
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_device g_dev[SIMCUDA_MAX_DEVICES];
static int g_ndev;
static uint64_t g_ctx_overhead;
static int g_config_done;
static alloc *g_buckets[NBUCKETS];
static vmm_phys *g_phys;
static vmm_map *g_maps;
static vmm_resv *g_resv;
static region g_vmm_region;
static uint64_t g_next_handle = 0x1000;
static uint32_t g_next_stream_id = SIMCUDA_FIRST_STREAM_ID;
static uint32_t g_next_ctx_uid = 1;
static module g_modules[MAX_MODULES];
static int g_nmodules;
static struct CUarray_st *g_arrays;
static struct CUarray_st *g_dead_arrays; /* destroyed with their context, never reused */

static _Atomic(const simcuda_tool_ops *) g_tool;
static atomic_int g_initialized;
static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int tl_in_init;
static _Thread_local CUcontext tl_ctx;

/* memory events produced under g_mu are emitted after it is released */
static _Thread_local simcuda_mem_event tl_events[16];
static _Thread_local int tl_nevents;
static _Thread_local simcuda_pool_event tl_pool_events[4];
static _Thread_local int tl_npool_events;

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end = NULL;
    unsigned long long x = strtoull(v, &end, 0);
    if (end == v)
        return dflt;
    return (uint64_t)x;
}

static void config_locked(void)
{
    if (g_config_done)
        return;
    g_config_done = 1;
    uint64_t n = env_u64("SIMCUDA_DEVICE_COUNT", 1);
    if (n > SIMCUDA_MAX_DEVICES)
        n = SIMCUDA_MAX_DEVICES;
    g_ndev = (int)n;
    uint64_t cap = env_u64("SIMCUDA_DEVICE_MEMORY", 80ull * GIB);
    g_ctx_overhead = env_u64("SIMCUDA_CONTEXT_OVERHEAD", 300ull * MIB);
    for (int d = 0; d < SIMCUDA_MAX_DEVICES; d++) {
        sim_device *dv = &g_dev[d];
        dv->capacity = cap;
        for (int r = 0; r < REG_POOLS_FIRST; r++) {
            dv->regions[r].base = dv->regions[r].bump = DEV_BASE(d) + (uint64_t)r * SUBREGION;
            dv->regions[r].limit = dv->regions[r].base + SUBREGION;
        }
        dv->ctx.magic = SIMCUDA_CTX_MAGIC;
        dv->ctx.device = d;
        dv->ctx.primary = 1;
        dv->ctx.null_stream.magic = SIMCUDA_STREAM_MAGIC;
        dv->ctx.null_stream.ctx = &dv->ctx;
        dv->ctx.null_stream.id = SIMCUDA_DEFAULT_STREAM_ID;
    }
    g_vmm_region.base = g_vmm_region.bump = VMM_BASE;
    g_vmm_region.limit = VMM_LIMIT;
}

static void lock(void)
{
    pthread_mutex_lock(&g_mu);
    config_locked();
}

static void unlock_and_emit(void)
{
    simcuda_mem_event ev[16];
    simcuda_pool_event pev[4];
    int n = tl_nevents, np = tl_npool_events;
    memcpy(ev, tl_events, sizeof(ev[0]) * (size_t)n);
    memcpy(pev, tl_pool_events, sizeof(pev[0]) * (size_t)np);
    tl_nevents = 0;
    tl_npool_events = 0;
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < np; i++)
        simcuda_emit_pool(&pev[i]);
    for (int i = 0; i < n; i++)
        simcuda_emit_memory(&ev[i]);
}

static void push_event(const simcuda_mem_event *ev)
{
    if (tl_nevents < 16)
        tl_events[tl_nevents++] = *ev;
}

static void push_pool_event(const struct CUmemPoolHandle_st *p,
                            CUpti_ActivityMemoryPoolOperationType op, uint64_t min_keep)
{
    if (tl_npool_events >= 4)
        return;
    simcuda_pool_event *e = &tl_pool_events[tl_npool_events++];
    memset(e, 0, sizeof(*e));
    e->op = op;
    e->device = p->dev;
    e->address = p->addrs.base;
    e->size = p->reserved;
    e->release_threshold = p->threshold;
    e->utilized = p->used;
    e->min_bytes_to_keep = min_keep;
}

/* ------------------------------------------------------------------------------------------ */
/* tool hooks */

SIMCUDA_API void simcuda_set_tool(const simcuda_tool_ops *ops)
{
    atomic_store(&g_tool, ops);
}

SIMCUDA_API void simcuda_api_enter(simcuda_call *call)
{
    const simcuda_tool_ops *t = atomic_load(&g_tool);
    call->delivered = 0;
    call->corr_id = 0;
    call->corr_data = 0;
    if (t) {
        t->api_enter(call);
        call->delivered |= 2; /* the tool saw the enter: it must see the exit */
    } else {
        call->delivered = 4; /* entered with no tool: one loaded meanwhile sees the exit only */
    }
}

SIMCUDA_API void simcuda_api_exit(simcuda_call *call)
{
    const simcuda_tool_ops *t = atomic_load(&g_tool);
    if (t && (call->delivered & 6))
        t->api_exit(call);
}

SIMCUDA_API void simcuda_resource(CUpti_CallbackId cbid, CUcontext ctx, CUstream stream,
                                  void *descriptor)
{
    const simcuda_tool_ops *t = atomic_load(&g_tool);
    if (t)
        t->resource(cbid, ctx, stream, descriptor);
}

SIMCUDA_API void simcuda_emit_memory(const simcuda_mem_event *ev)
{
    const simcuda_tool_ops *t = atomic_load(&g_tool);
    if (t)
        t->memory(ev);
}

SIMCUDA_API void simcuda_emit_pool(const simcuda_pool_event *ev)
{
    const simcuda_tool_ops *t = atomic_load(&g_tool);
    if (t)
        t->mempool(ev);
}

SIMCUDA_API CUcontext simcuda_current_ctx(void)
{
    return tl_ctx;
}
SIMCUDA_API void simcuda_set_current_ctx(CUcontext ctx)
{
    tl_ctx = ctx;
}

/* symbolName: the kernel name for launches, NULL for every other call */
static const char *drv_symbol_launch(const cuLaunchKernel_params *p)
{
    return (p->f && p->f->magic == SIMCUDA_FUNC_MAGIC) ? p->f->name : NULL;
}
#define drv_symbol_(pp)                                                                            \
    _Generic((pp), cuLaunchKernel_params *                                                         \
             : drv_symbol_launch((const cuLaunchKernel_params *)(const void *)(pp)), default       \
             : (const char *)NULL)

#define DRV_CALL(cbname, ...)                                                                      \
    cbname##_params drv_p_ = {__VA_ARGS__};                                                        \
    CUresult drv_r_ = CUDA_SUCCESS;                                                                \
    simcuda_call drv_c_ = {.domain = CUPTI_CB_DOMAIN_DRIVER_API,                                   \
                           .cbid = CUPTI_DRIVER_TRACE_CBID_##cbname,                               \
                           .name = #cbname,                                                        \
                           .params = &drv_p_,                                                      \
                           .ret = &drv_r_,                                                         \
                           .ctx = tl_ctx};                                                         \
    drv_c_.symbol = drv_symbol_(&drv_p_);                                                          \
    simcuda_api_enter(&drv_c_)

#define DRV_CALL0(cbname)                                                                          \
    CUresult drv_r_ = CUDA_SUCCESS;                                                                \
    simcuda_call drv_c_ = {.domain = CUPTI_CB_DOMAIN_DRIVER_API,                                   \
                           .cbid = CUPTI_DRIVER_TRACE_CBID_##cbname,                               \
                           .name = #cbname,                                                        \
                           .params = NULL,                                                         \
                           .ret = &drv_r_,                                                         \
                           .ctx = tl_ctx};                                                         \
    simcuda_api_enter(&drv_c_)

#define DRV_RETURN(expr)                                                                           \
    do {                                                                                           \
        drv_r_ = (expr);                                                                           \
        simcuda_api_exit(&drv_c_);                                                                 \
        return drv_r_;                                                                             \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* allocation table */

static size_t bucket_of(uint64_t addr)
{
    return (size_t)((addr >> 8) * 0x9E3779B97F4A7C15ull >> 48) % NBUCKETS;
}

static alloc *table_find(uint64_t addr)
{
    for (alloc *a = g_buckets[bucket_of(addr)]; a; a = a->next)
        if (a->addr == addr)
            return a;
    return NULL;
}

static alloc *table_add(uint64_t addr, uint64_t size, uint64_t rsize, enum alloc_type type, int dev,
                        CUcontext ctx)
{
    alloc *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->addr = addr;
    a->size = size;
    a->rsize = rsize;
    a->type = type;
    a->dev = dev;
    a->ctx = ctx;
    size_t b = bucket_of(addr);
    a->next = g_buckets[b];
    g_buckets[b] = a;
    return a;
}

static void table_remove(alloc *a)
{
    alloc **pp = &g_buckets[bucket_of(a->addr)];
    while (*pp && *pp != a)
        pp = &(*pp)->next;
    if (*pp)
        *pp = a->next;
    free(a);
}

/* ------------------------------------------------------------------------------------------ */
/* address regions: bump allocation, exact-size LIFO reuse of freed blocks (deterministic) */

static int region_alloc(region *r, uint64_t size, uint64_t *out)
{
    for (freeblk **pp = &r->free; *pp; pp = &(*pp)->next) {
        if ((*pp)->size == size) {
            freeblk *f = *pp;
            *out = f->addr;
            *pp = f->next;
            free(f);
            return 0;
        }
    }
    if (r->bump + size > r->limit || r->bump + size < r->bump)
        return -1;
    *out = r->bump;
    r->bump += size;
    return 0;
}

static void region_free(region *r, uint64_t addr, uint64_t size)
{
    freeblk *f = malloc(sizeof(*f));
    if (!f)
        return;
    f->addr = addr;
    f->size = size;
    f->next = r->free;
    r->free = f;
}

static uint64_t overhead_of(int d)
{
    return g_dev[d].ctx.active ? g_ctx_overhead : 0;
}

static int fits(int d, uint64_t bytes)
{
    sim_device *dv = &g_dev[d];
    uint64_t used = dv->reserved + overhead_of(d);
    return used <= dv->capacity && bytes <= dv->capacity - used;
}

/* ------------------------------------------------------------------------------------------ */
/* contexts and modules */

static void module_load_locked(int m, int d);
static void ctx_destroy_locked(CUcontext c);

static CUcontext primary_ctx_locked(int d, int create, int *created)
{
    if (d < 0 || d >= g_ndev)
        return NULL;
    struct CUctx_st *c = &g_dev[d].ctx;
    if (!c->active && create) {
        c->active = 1;
        c->uid = g_next_ctx_uid++;
        *created = 1;
    }
    return c;
}

static void announce_ctx(CUcontext c)
{
    simcuda_resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, c, NULL, NULL);
    /* modules registered before the context existed are loaded into it now */
    lock();
    int n = g_nmodules;
    pthread_mutex_unlock(&g_mu);
    for (int m = 0; m < n; m++) {
        lock();
        int do_load = g_modules[m].used && !g_modules[m].loaded[c->device];
        if (do_load)
            module_load_locked(m, c->device);
        unlock_and_emit();
        if (do_load) {
            CUpti_ModuleResourceData md = {
                .moduleId = (uint32_t)m + 1, .cubinSize = 0, .pCubin = NULL};
            simcuda_resource(CUPTI_CBID_RESOURCE_MODULE_LOADED, c, NULL, &md);
        }
    }
}

SIMCUDA_API CUcontext simcuda_primary_ctx(int dev, int create)
{
    int created = 0;
    lock();
    CUcontext c = primary_ctx_locked(dev, create, &created);
    if (c && created)
        c->refcnt++;
    CUcontext result = (c && c->active) ? c : NULL;
    pthread_mutex_unlock(&g_mu);
    if (created)
        announce_ctx(c);
    return result;
}

SIMCUDA_API int simcuda_device_count(void)
{
    lock();
    int n = g_ndev;
    pthread_mutex_unlock(&g_mu);
    return n;
}

SIMCUDA_API int simcuda_is_device_address(uint64_t addr)
{
    return addr >= DEV_BASE(0) && addr < VMM_LIMIT;
}

SIMCUDA_API int simcuda_module_register(void)
{
    lock();
    int m = g_nmodules < MAX_MODULES ? g_nmodules++ : -1;
    if (m >= 0)
        g_modules[m].used = 1;
    pthread_mutex_unlock(&g_mu);
    return m;
}

SIMCUDA_API void simcuda_module_add_var(int m, const char *name, size_t size)
{
    lock();
    if (m >= 0 && m < g_nmodules && g_modules[m].nvars < 64) {
        g_modules[m].names[g_modules[m].nvars] = name;
        g_modules[m].sizes[g_modules[m].nvars] = size;
        g_modules[m].nvars++;
    }
    pthread_mutex_unlock(&g_mu);
}

static void module_load_locked(int m, int d)
{
    module *mod = &g_modules[m];
    sim_device *dv = &g_dev[d];
    mod->loaded[d] = 1;
    for (int i = 0; i < mod->nvars; i++) {
        uint64_t rs = round_up(mod->sizes[i] ? mod->sizes[i] : 1, DEV_ALIGN), addr;
        if (!fits(d, rs) || region_alloc(&dv->regions[REG_STATIC], rs, &addr))
            continue;
        dv->reserved += rs;
        alloc *a = table_add(addr, mod->sizes[i], rs, AT_STATIC, d, &dv->ctx);
        if (a) {
            a->module = m;
            a->var = i;
            a->name = mod->names[i];
        }
        simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                .kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC,
                                .address = addr,
                                .bytes = mod->sizes[i],
                                .device = d,
                                .ctx = &dv->ctx,
                                .name = mod->names[i]};
        push_event(&ev);
    }
}

/* Releases the static memory of module m on device d (under g_mu). */
static void module_unload_locked(int m, int d)
{
    sim_device *dv = &g_dev[d];
    g_modules[m].loaded[d] = 0;
    for (size_t b = 0; b < NBUCKETS; b++) {
        alloc *a = g_buckets[b];
        while (a) {
            alloc *next = a->next;
            if (a->type == AT_STATIC && a->module == m && a->dev == d) {
                simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                                        .kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC,
                                        .address = a->addr,
                                        .bytes = a->size,
                                        .device = d,
                                        .ctx = &dv->ctx,
                                        .name = a->name};
                push_event(&ev);
                dv->reserved -= a->rsize;
                region_free(&dv->regions[REG_STATIC], a->addr, a->rsize);
                table_remove(a);
            }
            a = next;
        }
    }
}

SIMCUDA_API uint64_t simcuda_module_var_address(int m, int var, int d)
{
    uint64_t addr = 0;
    lock();
    for (size_t b = 0; b < NBUCKETS && !addr; b++)
        for (alloc *a = g_buckets[b]; a; a = a->next)
            if (a->type == AT_STATIC && a->module == m && a->var == var && a->dev == d)
                addr = a->addr;
    pthread_mutex_unlock(&g_mu);
    return addr;
}

SIMCUDA_API void simcuda_module_loaded(int m)
{
    /* registered after a context exists (a library loaded later): load into active contexts */
    for (int d = 0; d < SIMCUDA_MAX_DEVICES; d++) {
        lock();
        int do_load = m >= 0 && m < g_nmodules && d < g_ndev && g_dev[d].ctx.active &&
                      !g_modules[m].loaded[d];
        if (do_load)
            module_load_locked(m, d);
        unlock_and_emit();
        if (do_load) {
            CUpti_ModuleResourceData md = {.moduleId = (uint32_t)m + 1};
            simcuda_resource(CUPTI_CBID_RESOURCE_MODULE_LOADED, &g_dev[d].ctx, NULL, &md);
        }
    }
}

SIMCUDA_API void simcuda_module_unload(int m)
{
    for (int d = 0; d < SIMCUDA_MAX_DEVICES; d++) {
        lock();
        int loaded = m >= 0 && m < g_nmodules && d < g_ndev && g_modules[m].loaded[d];
        pthread_mutex_unlock(&g_mu);
        if (!loaded)
            continue;
        CUpti_ModuleResourceData md = {.moduleId = (uint32_t)m + 1};
        simcuda_resource(CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, &g_dev[d].ctx, NULL, &md);
        lock();
        module_unload_locked(m, d);
        unlock_and_emit();
    }
    lock();
    if (m >= 0 && m < g_nmodules)
        g_modules[m].used = 0;
    pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------------------------------------ */
/* pools */

/* A pool on device d (host != 0: a host or managed pool kept in device d's list, whose memory is
 * a window of real host memory, never counted as device memory). */
static struct CUmemPoolHandle_st *pool_new_host_locked(int d, int is_default, int host)
{
    sim_device *dv = &g_dev[d];
    if (dv->npools >= MAX_POOLS_PER_DEV || dv->npools >= 256)
        return NULL;
    struct CUmemPoolHandle_st *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->magic = SIMCUDA_POOL_MAGIC;
    p->dev = d;
    p->idx = dv->npools;
    p->is_default = is_default;
    p->host = host;
    p->loc_type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
    if (host) {
        void *w = mmap(NULL, POOL_WINDOW, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (w == MAP_FAILED) {
            free(p);
            return NULL;
        }
        p->addrs.base = p->addrs.bump = (uint64_t)(uintptr_t)w;
    } else {
        p->addrs.base = p->addrs.bump =
            DEV_BASE(d) + REG_POOLS_FIRST * SUBREGION + (uint64_t)p->idx * POOL_WINDOW;
    }
    p->addrs.limit = p->addrs.base + POOL_WINDOW;
    p->reuse_follow = p->reuse_opportunistic = p->reuse_internal = 1;
    p->access = 1u << d;
    dv->pools[dv->npools++] = p;
    push_pool_event(p, CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0);
    return p;
}

static struct CUmemPoolHandle_st *pool_new_locked(int d, int is_default)
{
    return pool_new_host_locked(d, is_default, 0);
}

static struct CUmemPoolHandle_st *default_pool_locked(int d)
{
    sim_device *dv = &g_dev[d];
    if (!dv->default_pool) {
        dv->default_pool = pool_new_locked(d, 1);
        if (!dv->current_pool)
            dv->current_pool = dv->default_pool;
    }
    return dv->default_pool;
}

/* the pools of a location that is not DEVICE+PINNED (cuMemGetDefaultMemPool, below) */
typedef struct loc_pools {
    CUmemLocationType type;
    int id; /* a device ordinal for DEVICE, the NUMA node for HOST_NUMA, else 0 */
    CUmemAllocationType alloc;
    struct CUmemPoolHandle_st *def, *cur;
} loc_pools;
static loc_pools g_locpools[SIMCUDA_MAX_DEVICES + 8];
static int g_nlocpools;

static int pool_valid(struct CUmemPoolHandle_st *p)
{
    return p && p->magic == SIMCUDA_POOL_MAGIC;
}

static void pool_set_reserved(struct CUmemPoolHandle_st *p, uint64_t nr)
{
    sim_device *dv = &g_dev[p->dev];
    if (!p->host)
        dv->reserved = dv->reserved - p->reserved + nr;
    p->reserved = nr;
    if (nr > p->reserved_high)
        p->reserved_high = nr;
}

/* memory above the release threshold goes back to the device at synchronization points */
static void pool_release_locked(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    uint64_t floor_ = round_up(p->used, POOL_GRANULARITY);
    uint64_t target = round_up(keep, POOL_GRANULARITY);
    if (target < floor_)
        target = floor_;
    if (target < p->reserved)
        pool_set_reserved(p, target);
}

static void fill_pool_cfg(simcuda_mem_event *ev, struct CUmemPoolHandle_st *p)
{
    ev->has_pool = 1;
    ev->pool_address = p->addrs.base;
    ev->pool_release_threshold = p->threshold;
    ev->pool_size = p->reserved;
    ev->pool_utilized = p->used;
}

static CUpti_ActivityMemoryKind pool_kind(const struct CUmemPoolHandle_st *p)
{
    if (!p->host)
        return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    return p->alloc_type == CU_MEM_ALLOCATION_TYPE_MANAGED ? CUPTI_ACTIVITY_MEMORY_KIND_MANAGED
                                                           : CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
}

static CUresult pool_alloc_locked(struct CUmemPoolHandle_st *p, uint64_t size, CUstream stream,
                                  uint64_t *out)
{
    uint64_t rs = round_up(size ? size : 1, DEV_ALIGN);
    if (p->used + rs > p->reserved) {
        uint64_t grow = round_up(p->used + rs - p->reserved, POOL_GRANULARITY);
        if (!p->host && !fits(p->dev, grow))
            return CUDA_ERROR_OUT_OF_MEMORY;
        pool_set_reserved(p, p->reserved + grow);
    }
    uint64_t addr;
    if (region_alloc(&p->addrs, rs, &addr))
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->used += rs;
    if (p->used > p->used_high)
        p->used_high = p->used;
    alloc *a = table_add(addr, size, rs, AT_POOL, p->dev, &g_dev[p->dev].ctx);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a->pool = p;
    *out = addr;
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                            .kind = pool_kind(p),
                            .address = addr,
                            .bytes = size,
                            .device = p->dev,
                            .ctx = &g_dev[p->dev].ctx,
                            .stream = stream,
                            .is_async = 1};
    fill_pool_cfg(&ev, p);
    push_event(&ev);
    return CUDA_SUCCESS;
}

static void pool_free_locked(alloc *a, CUstream stream, int is_async)
{
    struct CUmemPoolHandle_st *p = a->pool;
    p->used -= a->rsize;
    region_free(&p->addrs, a->addr, a->rsize);
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                            .kind = pool_kind(p),
                            .address = a->addr,
                            .bytes = a->size,
                            .device = p->dev,
                            .ctx = &g_dev[p->dev].ctx,
                            .stream = stream,
                            .is_async = is_async};
    table_remove(a);
    if (!is_async)
        pool_release_locked(p, p->threshold);
    fill_pool_cfg(&ev, p);
    push_event(&ev);
}

static void graph_pool_sync_locked(int d, struct CUstream_st *s);
static void sync_locked(int d)
{
    sim_device *dv = &g_dev[d];
    graph_pool_sync_locked(d, NULL);
    for (int i = 0; i < dv->npools; i++)
        if (dv->pools[i])
            pool_release_locked(dv->pools[i], dv->pools[i]->threshold);
}

SIMCUDA_API void simcuda_sync_point(CUcontext ctx)
{
    lock();
    if (ctx && ctx->magic == SIMCUDA_CTX_MAGIC)
        sync_locked(ctx->device);
    pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------------------------------------ */
/* initialization and injection */

/* Other threads wait in cuInit until the injection is initialized; the initializing thread itself
 * may call the driver from InitializeInjection. */
static int initialized(void)
{
    return tl_in_init || atomic_load(&g_initialized) != 0;
}

static void load_injection(void)
{
    const char *path = getenv("CUDA_INJECTION64_PATH");
    if (!path || !*path)
        return;
    void *h = dlopen(path, RTLD_NOW);
    if (!h)
        return; /* a path that does not load is ignored, as the driver does */
    int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
    if (init)
        (void)init();
}

/* The one-time initialization (injection); 1 when this call performed it. */
static int init_once(void)
{
    int did = 0;
    if (!initialized()) {
        pthread_mutex_lock(&g_init_mu);
        if (!initialized()) {
            tl_in_init = 1;
            lock();
            pthread_mutex_unlock(&g_mu);
            load_injection();
            simcuda_resource(CUPTI_CBID_RESOURCE_CU_INIT_FINISHED, NULL, NULL, NULL);
            tl_in_init = 0;
            atomic_store(&g_initialized, 1);
            did = 1;
        }
        pthread_mutex_unlock(&g_init_mu);
    }
    return did;
}

SIMCUDA_API void simcuda_driver_init(void)
{
    (void)init_once();
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
    if (tl_in_init)
        return CUDA_SUCCESS; /* re-entered from InitializeInjection */
    if (!initialized() && simcuda_late_injection()) {
        /* SIMCUDA_LATE_INJECTION: the tool is loaded inside this call and sees its exit only */
        DRV_CALL(cuInit, Flags);
        (void)init_once();
        DRV_RETURN(Flags != 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
    }
    if (init_once())
        return CUDA_SUCCESS;
    DRV_CALL(cuInit, Flags);
    DRV_RETURN(Flags != 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

#define REQUIRE_INIT()                                                                             \
    do {                                                                                           \
        if (!initialized())                                                                        \
            DRV_RETURN(CUDA_ERROR_NOT_INITIALIZED);                                                \
    } while (0)

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    DRV_CALL(cuDriverGetVersion, driverVersion);
    if (!driverVersion)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *driverVersion = SIMCUDA_DRIVER_VERSION;
    DRV_RETURN(CUDA_SUCCESS);
}

SIMCUDA_API int simcuda_driver_version(void)
{
    return SIMCUDA_DRIVER_VERSION;
}

static int valid_dev(CUdevice d)
{
    return d >= 0 && d < g_ndev;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    DRV_CALL(cuDeviceGet, device, ordinal);
    REQUIRE_INIT();
    if (!device)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(ordinal))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    DRV_CALL(cuDeviceGetCount, count);
    REQUIRE_INIT();
    if (!count)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *count = g_ndev;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    DRV_CALL(cuDeviceGetName, name, len, dev);
    REQUIRE_INIT();
    if (!name || len <= 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "SimCUDA Device %d", dev);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
    DRV_CALL(cuDeviceTotalMem_v2, bytes, dev);
    REQUIRE_INIT();
    if (!bytes)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    *bytes = (size_t)g_dev[dev].capacity;
    DRV_RETURN(CUDA_SUCCESS);
}

/* An H100 SXM5 80GB's attributes (NVIDIA's deviceQuery output and the H100 datasheet; the
 * persisting-L2 maximum, 75 % of the L2, is an assumption). Every attribute not listed is 0. */
SIMCUDA_API int simcuda_device_attribute(CUdevice_attribute a, int dev)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 * 1024 * 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 39321600;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: return 0;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS: return 2046;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT: return 65536;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x10 + dev;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: return 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: return 0; /* x86 host, PCIe */
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: return 0; /* no HMM */
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES: return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES: return 0;
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST: return 0;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED: return 0;
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING: return 0;
    case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
        return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1: return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: return 0;
    default: return 0;
    }
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    DRV_CALL(cuDeviceGetAttribute, pi, attrib, dev);
    REQUIRE_INIT();
    if (!pi)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    *pi = simcuda_device_attribute(attrib, dev);
    DRV_RETURN(CUDA_SUCCESS);
}

static void fill_uuid(CUuuid *uuid, CUdevice dev)
{
    for (int i = 0; i < 16; i++)
        uuid->bytes[i] = (char)(0x51 + i + 16 * dev);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    DRV_CALL(cuDeviceGetUuid_v2, uuid, dev);
    REQUIRE_INIT();
    if (!uuid)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    fill_uuid(uuid, dev);
    DRV_RETURN(CUDA_SUCCESS);
}

/* PCI bus id "0000:<bus>:00.0", bus = 0x10 + ordinal (NVML looks devices up by it). */
CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    DRV_CALL(cuDeviceGetPCIBusId, pciBusId, len, dev);
    REQUIRE_INIT();
    if (!pciBusId || len <= 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* contexts */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    DRV_CALL(cuDevicePrimaryCtxRetain, pctx, dev);
    REQUIRE_INIT();
    if (!pctx)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    int created = 0;
    lock();
    CUcontext c = primary_ctx_locked(dev, 1, &created);
    if (c)
        c->refcnt++;
    pthread_mutex_unlock(&g_mu);
    if (!c)
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (created)
        announce_ctx(c);
    *pctx = c;
    DRV_RETURN(CUDA_SUCCESS);
}

/* What a context's destruction frees (cuda.h, cuCtxDestroy / cuDevicePrimaryCtxReset): memory
 * allocated in it (cuMemAlloc, pitch, arrays) and, for the primary context, module variables.
 * Stream-ordered pool memory, VMM memory, pinned/managed memory and graph memory survive. */
static void ctx_destroy_locked(CUcontext c)
{
    int d = c->device;
    sim_device *dv = &g_dev[d];
    for (size_t b = 0; b < NBUCKETS; b++) {
        alloc *a = g_buckets[b];
        while (a) {
            alloc *next = a->next;
            int mine = (a->type == AT_DEVICE && a->ctx == c) ||
                       (a->type == AT_STATIC && c->primary && a->dev == d);
            if (mine) {
                dv->reserved -= a->rsize;
                region_free(&dv->regions[a->type == AT_STATIC ? REG_STATIC : REG_DEVICE], a->addr,
                            a->rsize);
                table_remove(a);
            }
            a = next;
        }
    }
    for (struct CUarray_st **pp = &g_arrays; *pp;) {
        struct CUarray_st *arr = *pp;
        if (arr->ctx == c) {
            *pp = arr->next;
            if (!arr->level) {
                dv->reserved -= arr->rsize;
                region_free(&dv->regions[REG_ARRAY], arr->addr, arr->rsize);
            }
            arr->magic = 0; /* the handle is dead; kept so that a later destroy is refused */
            arr->next = g_dead_arrays;
            g_dead_arrays = arr;
        } else {
            pp = &arr->next;
        }
    }
    if (c->primary)
        for (int m = 0; m < g_nmodules; m++)
            g_modules[m].loaded[d] = 0;
    c->active = 0;
    c->refcnt = 0;
    c->peers = 0;
}

static CUresult ctx_destroy(int d)
{
    lock();
    int active = g_dev[d].ctx.active;
    pthread_mutex_unlock(&g_mu);
    if (!active)
        return CUDA_SUCCESS;
    simcuda_resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, &g_dev[d].ctx, NULL, NULL);
    lock();
    ctx_destroy_locked(&g_dev[d].ctx);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    DRV_CALL(cuDevicePrimaryCtxRelease_v2, dev);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    lock();
    int destroy = 0;
    if (!g_dev[dev].ctx.active || g_dev[dev].ctx.refcnt == 0) {
        pthread_mutex_unlock(&g_mu);
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    }
    destroy = --g_dev[dev].ctx.refcnt == 0;
    pthread_mutex_unlock(&g_mu);
    if (destroy)
        ctx_destroy(dev);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    DRV_CALL(cuDevicePrimaryCtxGetState, dev, flags, active);
    REQUIRE_INIT();
    if (!flags || !active)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    lock();
    *active = g_dev[dev].ctx.active;
    *flags = g_dev[dev].ctx.flags; /* cuDevicePrimaryCtxSetFlags */
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    DRV_CALL(cuDevicePrimaryCtxReset_v2, dev);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    DRV_RETURN(ctx_destroy(dev));
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    DRV_CALL(cuCtxGetCurrent, pctx);
    REQUIRE_INIT();
    if (!pctx)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *pctx = tl_ctx;
    DRV_RETURN(CUDA_SUCCESS);
}

static int ctx_ok(CUcontext c)
{
    return c && c->magic == SIMCUDA_CTX_MAGIC && c->active;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    DRV_CALL(cuCtxSetCurrent, ctx);
    REQUIRE_INIT();
    if (ctx && ctx->magic != SIMCUDA_CTX_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    tl_ctx = ctx;
    DRV_RETURN(CUDA_SUCCESS);
}

/* Context stack (push/pop) for tools that read a device without changing the program's current
 * context, e.g. the gpumemprof sampler. The current context is the top of the stack. */
#define SIM_CTX_STACK 16
static _Thread_local CUcontext tl_ctx_stack[SIM_CTX_STACK];
static _Thread_local int tl_ctx_depth;

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
    DRV_CALL(cuCtxPushCurrent_v2, ctx);
    REQUIRE_INIT();
    if (!ctx || ctx->magic != SIMCUDA_CTX_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (tl_ctx_depth >= SIM_CTX_STACK)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    tl_ctx_stack[tl_ctx_depth++] = tl_ctx;
    tl_ctx = ctx;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
    DRV_CALL(cuCtxPopCurrent_v2, pctx);
    REQUIRE_INIT();
    if (!tl_ctx)
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (pctx)
        *pctx = tl_ctx;
    tl_ctx = tl_ctx_depth > 0 ? tl_ctx_stack[--tl_ctx_depth] : NULL;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    DRV_CALL(cuCtxGetDevice, device);
    REQUIRE_INIT();
    if (!device)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    *device = tl_ctx->device;
    DRV_RETURN(CUDA_SUCCESS);
}

/* CUDA 13's explicit-context forms (cuda.h:6480-6499, 6630-6653): new functions with a context
 * argument, exported beside the old cuCtxGetDevice/cuCtxSynchronize that binaries built before 13
 * call (the driver keeps them: the CUDA 13 stub libcuda.so exports both, and cudaTypedefs.h keeps
 * PFN_cuCtxGetDevice_v2000 beside PFN_cuCtxGetDevice_v13000). "If the specified context is NULL,
 * the API will return the current context's device"; another value must be a context
 * (CUDA_ERROR_INVALID_CONTEXT otherwise). The simulator recognizes a context without reading
 * through the pointer (a caller that passes nothing there, as numba 0.56 does when it resolves
 * cuCtxGetDevice to cuCtxGetDevice_v2, hands over whatever its register held): a primary context,
 * the thread's current one or one on its stack; a created context current on another thread
 * only is refused too (a simplification). */
static CUcontext ctx_explicit(CUcontext c)
{
    if (!c)
        return tl_ctx;
    if (c == tl_ctx)
        return c;
    for (int i = 0; i < g_ndev; i++)
        if (c == &g_dev[i].ctx)
            return c;
    for (int i = 0; i < tl_ctx_depth; i++)
        if (c == tl_ctx_stack[i])
            return c;
    return NULL;
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    DRV_CALL(cuCtxGetDevice_v2, device, ctx);
    REQUIRE_INIT();
    if (!device)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    CUcontext c = ctx_explicit(ctx);
    if (!ctx_ok(c))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    *device = c->device;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    DRV_CALL(cuCtxSynchronize_v2, ctx);
    REQUIRE_INIT();
    CUcontext c = ctx_explicit(ctx);
    if (!ctx_ok(c))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    simcuda_sync_point(c);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    DRV_CALL0(cuCtxSynchronize);
    REQUIRE_INIT();
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    simcuda_sync_point(tl_ctx);
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* device memory */

static CUresult device_alloc(int d, uint64_t size, uint64_t rs, uint64_t *out)
{
    sim_device *dv = &g_dev[d];
    uint64_t addr;
    if (!fits(d, rs) || region_alloc(&dv->regions[REG_DEVICE], rs, &addr))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!table_add(addr, size, rs, AT_DEVICE, d, tl_ctx)) {
        region_free(&dv->regions[REG_DEVICE], addr, rs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    dv->reserved += rs;
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                            .address = addr,
                            .bytes = size,
                            .device = d,
                            .ctx = tl_ctx};
    push_event(&ev);
    *out = addr;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
    DRV_CALL(cuMemAlloc_v2, dptr, bytesize);
    REQUIRE_INIT();
    if (!dptr || bytesize == 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    uint64_t addr = 0;
    lock();
    CUresult r = device_alloc(tl_ctx->device, bytesize, round_up(bytesize, DEV_ALIGN), &addr);
    unlock_and_emit();
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)addr;
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                 size_t Height, unsigned int ElementSizeBytes)
{
    DRV_CALL(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    REQUIRE_INIT();
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    uint64_t pitch = round_up(WidthInBytes, PITCH_ALIGN), bytes = pitch * Height, addr = 0;
    lock();
    CUresult r = device_alloc(tl_ctx->device, bytes, round_up(bytes, DEV_ALIGN), &addr);
    unlock_and_emit();
    if (r == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr)addr;
        *pPitch = (size_t)pitch;
    }
    DRV_RETURN(r);
}

static void graph_free_locked(alloc *a, struct CUstream_st *s);
static void import_unmap_locked(alloc *a);

static CUresult free_any_locked(uint64_t addr, int want_host)
{
    alloc *a = table_find(addr);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    if (want_host != (a->type == AT_PINNED))
        return CUDA_ERROR_INVALID_VALUE;
    if (a->type == AT_STATIC || a->type == AT_HOSTREG)
        return CUDA_ERROR_INVALID_VALUE;
    if (a->type == AT_POOL) {
        pool_free_locked(a, NULL, 0);
        return CUDA_SUCCESS;
    }
    if (a->type == AT_GRAPH) { /* graph memory may be freed outside a graph (cuda.h) */
        graph_free_locked(a, NULL);
        return CUDA_SUCCESS;
    }
    if (a->type == AT_IMPORT) { /* cuMemPoolImportPointer: freed with cuMemFree(Async) */
        if (!a->flags)
            return CUDA_ERROR_INVALID_VALUE; /* IPC handles: cuIpcCloseMemHandle */
        import_unmap_locked(a);
        return CUDA_SUCCESS;
    }
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                            .address = a->addr,
                            .bytes = a->size,
                            .device = a->dev,
                            .ctx = a->ctx};
    if (a->type == AT_DEVICE) {
        ev.kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        g_dev[a->dev].reserved -= a->rsize;
        region_free(&g_dev[a->dev].regions[REG_DEVICE], a->addr, a->rsize);
    } else if (a->type == AT_MANAGED) {
        ev.kind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
        munmap((void *)(uintptr_t)a->addr, a->rsize);
    } else {
        ev.kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        free((void *)(uintptr_t)a->addr);
    }
    table_remove(a);
    push_event(&ev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr)
{
    DRV_CALL(cuMemFree_v2, dptr);
    REQUIRE_INIT();
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (dptr == 0)
        DRV_RETURN(CUDA_SUCCESS);
    lock();
    CUresult r = free_any_locked(dptr, 0);
    if (r == CUDA_SUCCESS)
        sync_locked(tl_ctx->device); /* cuMemFree synchronizes */
    unlock_and_emit();
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemGetInfo(size_t *free_, size_t *total)
{
    DRV_CALL(cuMemGetInfo_v2, free_, total);
    REQUIRE_INIT();
    if (!free_ || !total)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    lock();
    sim_device *dv = &g_dev[tl_ctx->device];
    uint64_t used = dv->reserved + overhead_of(tl_ctx->device);
    *free_ = (size_t)(used < dv->capacity ? dv->capacity - used : 0);
    *total = (size_t)dv->capacity;
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* host and managed memory */

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytesize ? bytesize : 1))
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, bytesize);
    int d = ctx_ok(tl_ctx) ? tl_ctx->device : 0;
    lock();
    alloc *a = table_add((uint64_t)(uintptr_t)p, bytesize, bytesize, AT_PINNED, d, tl_ctx);
    if (!a) {
        pthread_mutex_unlock(&g_mu);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->flags = flags;
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                            .address = (uint64_t)(uintptr_t)p,
                            .bytes = bytesize,
                            .device = d,
                            .ctx = tl_ctx};
    push_event(&ev);
    unlock_and_emit();
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocHost(void **pp, size_t bytesize)
{
    DRV_CALL(cuMemAllocHost_v2, pp, bytesize);
    REQUIRE_INIT();
    if (!pp)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    DRV_RETURN(host_alloc(pp, bytesize, 0));
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    DRV_CALL(cuMemHostAlloc, pp, bytesize, Flags);
    REQUIRE_INIT();
    if (!pp || (Flags & ~0xfu))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    DRV_RETURN(host_alloc(pp, bytesize, Flags));
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    DRV_CALL(cuMemFreeHost, p);
    REQUIRE_INIT();
    if (!p)
        DRV_RETURN(CUDA_SUCCESS);
    lock();
    CUresult r = free_any_locked((uint64_t)(uintptr_t)p, 1);
    unlock_and_emit();
    DRV_RETURN(r);
}

/* the pinned, registered or managed range holding host address p (under g_mu) */
static alloc *host_range_locked(uint64_t p)
{
    alloc *a = table_find(p);
    if (a && (a->type == AT_PINNED || a->type == AT_HOSTREG || a->type == AT_MANAGED))
        return a;
    for (size_t b = 0; b < NBUCKETS; b++)
        for (a = g_buckets[b]; a; a = a->next)
            if ((a->type == AT_PINNED || a->type == AT_HOSTREG || a->type == AT_MANAGED) &&
                p >= a->addr && p - a->addr < (a->size ? a->size : 1))
                return a;
    return NULL;
}

CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    DRV_CALL(cuMemHostRegister_v2, p, bytesize, Flags);
    REQUIRE_INIT();
    if (!p || bytesize == 0 || (Flags & ~0xfu))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    lock();
    CUresult r = CUDA_SUCCESS;
    alloc *a = NULL;
    uint64_t lo = (uint64_t)(uintptr_t)p, hi = lo + bytesize - 1;
    if (host_range_locked(lo) || host_range_locked(hi))
        r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (!(a = table_add(lo, bytesize, bytesize, AT_HOSTREG, tl_ctx->device, tl_ctx)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        a->flags = Flags;
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    DRV_CALL(cuMemHostUnregister, p);
    REQUIRE_INIT();
    lock();
    alloc *a = table_find((uint64_t)(uintptr_t)p);
    CUresult r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (a && a->type == AT_HOSTREG) {
        table_remove(a);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

/* Mapped host memory: with unified addressing the device pointer is the host pointer (cuda.h,
 * cuMemHostGetDevicePointer / CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM). */
CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    DRV_CALL(cuMemHostGetDevicePointer_v2, pdptr, p, Flags);
    REQUIRE_INIT();
    if (!pdptr || !p || Flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    lock();
    alloc *a = host_range_locked((uint64_t)(uintptr_t)p);
    int ok = a && a->type != AT_MANAGED;
    pthread_mutex_unlock(&g_mu);
    if (!ok)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    DRV_CALL(cuMemHostGetFlags, pFlags, p);
    REQUIRE_INIT();
    if (!pFlags || !p)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    alloc *a = host_range_locked((uint64_t)(uintptr_t)p);
    int ok = a && a->type == AT_PINNED;
    unsigned f = ok ? a->flags | CU_MEMHOSTALLOC_DEVICEMAP : 0;
    pthread_mutex_unlock(&g_mu);
    if (!ok)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *pFlags = f;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    DRV_CALL(cuMemAllocManaged, dptr, bytesize, flags);
    REQUIRE_INIT();
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    uint64_t rs = round_up(bytesize, 4096);
    void *p =
        mmap(NULL, rs, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    lock();
    if (!table_add((uint64_t)(uintptr_t)p, bytesize, rs, AT_MANAGED, tl_ctx->device, tl_ctx)) {
        pthread_mutex_unlock(&g_mu);
        munmap(p, rs);
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED,
                            .address = (uint64_t)(uintptr_t)p,
                            .bytes = bytesize,
                            .device = tl_ctx->device,
                            .ctx = tl_ctx};
    push_event(&ev);
    unlock_and_emit();
    *dptr = (CUdeviceptr)(uintptr_t)p;
    DRV_RETURN(CUDA_SUCCESS);
}

static int managed_range(CUdeviceptr p, size_t count)
{
    lock();
    alloc *a = host_range_locked(p);
    int ok = a && a->type == AT_MANAGED && count <= a->size - (p - a->addr);
    pthread_mutex_unlock(&g_mu);
    return ok;
}

static int location_ok(CUmemLocation l)
{
    switch (l.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return valid_dev(l.id);
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return 1;
    default: return 0;
    }
}

static struct CUstream_st *stream_get(CUstream s);
static int capture_active(const struct CUgraph_st *g);
static void capture_joined(struct CUstream_st *s);
static void capture_forget(struct CUstream_st *s);

CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream)
{
    DRV_CALL(cuMemPrefetchAsync_v2, devPtr, count, location, flags, hStream);
    REQUIRE_INIT();
    if (!stream_get(hStream))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!managed_range(devPtr, count) || !location_ok(location) || flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(CUDA_SUCCESS); /* where managed pages live is not modelled */
}

CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                             CUmemLocation location)
{
    DRV_CALL(cuMemAdvise_v2, devPtr, count, advice, location);
    REQUIRE_INIT();
    if (!managed_range(devPtr, count) || advice < CU_MEM_ADVISE_SET_READ_MOSTLY ||
        advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                        unsigned int flags)
{
    DRV_CALL(cuStreamAttachMemAsync, hStream, dptr, length, flags);
    REQUIRE_INIT();
    if (!stream_get(hStream))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!managed_range(dptr, length ? length : 1) ||
        (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
         flags != CU_MEM_ATTACH_SINGLE))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* arrays and mipmapped arrays (destroyed with the context that created them) */

static unsigned format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}

/* an array of `bytes` on the current context's device; NULL on OOM (under g_mu) */
static struct CUarray_st *array_new_locked(uint64_t bytes)
{
    uint64_t rs = round_up(bytes ? bytes : 1, 2 * MIB), addr;
    int d = tl_ctx->device;
    if (!fits(d, rs) || region_alloc(&g_dev[d].regions[REG_ARRAY], rs, &addr))
        return NULL;
    struct CUarray_st *arr = calloc(1, sizeof(*arr));
    if (!arr) {
        region_free(&g_dev[d].regions[REG_ARRAY], addr, rs);
        return NULL;
    }
    g_dev[d].reserved += rs;
    arr->magic = SIMCUDA_ARRAY_MAGIC;
    arr->dev = d;
    arr->ctx = tl_ctx;
    arr->addr = addr;
    arr->bytes = bytes;
    arr->rsize = rs;
    arr->next = g_arrays;
    g_arrays = arr;
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
                            .address = addr,
                            .bytes = bytes,
                            .device = d,
                            .ctx = tl_ctx};
    push_event(&ev);
    return arr;
}

static void array_free_locked(struct CUarray_st *arr)
{
    for (struct CUarray_st **pp = &g_arrays; *pp; pp = &(*pp)->next)
        if (*pp == arr) {
            *pp = arr->next;
            break;
        }
    int d = arr->dev;
    g_dev[d].reserved -= arr->rsize;
    region_free(&g_dev[d].regions[REG_ARRAY], arr->addr, arr->rsize);
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
                            .address = arr->addr,
                            .bytes = arr->bytes,
                            .device = d,
                            .ctx = arr->ctx};
    push_event(&ev);
    arr->magic = 0;
    free(arr);
}

static int array_desc_ok(uint64_t w, unsigned nch)
{
    return w != 0 && (nch == 1 || nch == 2 || nch == 4);
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t dpt, CUarray_format f, unsigned nch)
{
    return w * (h ? h : 1) * (dpt ? dpt : 1) * nch * format_bytes(f);
}

static CUresult array_create(CUarray *ph, uint64_t w, uint64_t h, uint64_t dpt, CUarray_format f,
                             unsigned nch)
{
    if (!ph || !array_desc_ok(w, nch))
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx_ok(tl_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    lock();
    struct CUarray_st *arr = array_new_locked(array_bytes(w, h, dpt, f, nch));
    unlock_and_emit();
    if (!arr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ph = arr;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    DRV_CALL(cuArrayCreate_v2, pHandle, pAllocateArray);
    REQUIRE_INIT();
    if (!pAllocateArray)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(array_create(pHandle, pAllocateArray->Width, pAllocateArray->Height, 0,
                            pAllocateArray->Format, pAllocateArray->NumChannels));
}

CUresult CUDAAPI cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    DRV_CALL(cuArray3DCreate_v2, pHandle, pAllocateArray);
    REQUIRE_INIT();
    if (!pAllocateArray)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    /* layered / cubemap arrays: Depth is the number of layers (6 faces for a cubemap) */
    DRV_RETURN(array_create(pHandle, pAllocateArray->Width, pAllocateArray->Height,
                            pAllocateArray->Depth, pAllocateArray->Format,
                            pAllocateArray->NumChannels));
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    DRV_CALL(cuArrayDestroy, hArray);
    REQUIRE_INIT();
    lock();
    int ok = 0;
    for (struct CUarray_st *a = g_arrays; a && !ok; a = a->next)
        ok = a == hArray && !a->level;
    if (!ok) {
        pthread_mutex_unlock(&g_mu);
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    }
    array_free_locked(hArray);
    unlock_and_emit();
    DRV_RETURN(CUDA_SUCCESS);
}

#define SIMCUDA_MIPMAP_MAGIC 0x50494d4du /* "MMIP" */
#define MAX_MIP_LEVELS 32
struct CUmipmappedArray_st {
    uint32_t magic;
    struct CUarray_st *mem; /* one allocation holding every level */
    unsigned nlevels;
    struct CUarray_st levels[MAX_MIP_LEVELS]; /* level handles: no memory of their own */
};

static uint64_t halve(uint64_t v, unsigned l)
{
    if (!v)
        return 0;
    v >>= l;
    return v ? v : 1;
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                        const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels)
{
    DRV_CALL(cuMipmappedArrayCreate, pHandle, pMipmappedArrayDesc, numMipmapLevels);
    REQUIRE_INIT();
    const CUDA_ARRAY3D_DESCRIPTOR *dsc = pMipmappedArrayDesc;
    if (!pHandle || !dsc || numMipmapLevels == 0 || numMipmapLevels > MAX_MIP_LEVELS ||
        !array_desc_ok(dsc->Width, dsc->NumChannels))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    int layered = (dsc->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    struct CUmipmappedArray_st *m = calloc(1, sizeof(*m));
    if (!m)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    uint64_t total = 0, lb[MAX_MIP_LEVELS];
    for (unsigned l = 0; l < numMipmapLevels; l++) {
        uint64_t dp = layered ? dsc->Depth : halve(dsc->Depth, l);
        lb[l] = array_bytes(halve(dsc->Width, l), halve(dsc->Height, l), dp, dsc->Format,
                            dsc->NumChannels);
        total += lb[l];
    }
    lock();
    m->mem = array_new_locked(total);
    if (m->mem) {
        m->mem->owner = m;
        uint64_t off = 0;
        m->magic = SIMCUDA_MIPMAP_MAGIC;
        m->nlevels = numMipmapLevels;
        for (unsigned l = 0; l < numMipmapLevels; l++) {
            struct CUarray_st *lv = &m->levels[l];
            lv->magic = SIMCUDA_ARRAY_MAGIC;
            lv->dev = m->mem->dev;
            lv->ctx = tl_ctx;
            lv->addr = m->mem->addr + off;
            lv->bytes = lb[l];
            lv->level = 1;
            off += lb[l];
        }
    }
    unlock_and_emit();
    if (!m->mem) {
        free(m);
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    *pHandle = m;
    DRV_RETURN(CUDA_SUCCESS);
}

/* a live mipmapped array (found through its allocation: a destroyed handle is never read) */
static int mipmap_ok_locked(CUmipmappedArray m)
{
    if (!m)
        return 0;
    for (struct CUarray_st *a = g_arrays; a; a = a->next)
        if (a->owner == m)
            return 1;
    return 0; /* destroyed, or its context was */
}

CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray,
                                          unsigned int level)
{
    DRV_CALL(cuMipmappedArrayGetLevel, pLevelArray, hMipmappedArray, level);
    REQUIRE_INIT();
    lock();
    int ok = mipmap_ok_locked(hMipmappedArray);
    pthread_mutex_unlock(&g_mu);
    if (!ok)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!pLevelArray || level >= hMipmappedArray->nlevels)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *pLevelArray = &hMipmappedArray->levels[level];
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    DRV_CALL(cuMipmappedArrayDestroy, hMipmappedArray);
    REQUIRE_INIT();
    lock();
    if (!mipmap_ok_locked(hMipmappedArray)) {
        pthread_mutex_unlock(&g_mu);
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    }
    array_free_locked(hMipmappedArray->mem);
    hMipmappedArray->magic = 0;
    free(hMipmappedArray);
    unlock_and_emit();
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* streams: created streams, the legacy NULL stream of each context, and per-thread default
 * streams (CU_STREAM_PER_THREAD, and NULL inside _ptsz/_ptds calls) */

static _Thread_local int tl_ptds;
#define PTS_SLOTS 16
static _Thread_local struct {
    CUcontext ctx;
    struct CUstream_st *s;
} tl_pts[PTS_SLOTS];

SIMCUDA_API int simcuda_set_per_thread_default(int on)
{
    int old = tl_ptds;
    tl_ptds = on;
    return old;
}

static struct CUstream_st *per_thread_stream(CUcontext c)
{
    int freeslot = -1;
    for (int i = 0; i < PTS_SLOTS; i++) {
        if (tl_pts[i].ctx == c && tl_pts[i].s)
            return tl_pts[i].s;
        if (!tl_pts[i].s && freeslot < 0)
            freeslot = i;
    }
    if (freeslot < 0)
        return &c->null_stream;
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->magic = SIMCUDA_STREAM_MAGIC;
    s->ctx = c;
    s->per_thread = 1;
    lock();
    s->id = g_next_stream_id++;
    pthread_mutex_unlock(&g_mu);
    tl_pts[freeslot].ctx = c;
    tl_pts[freeslot].s = s;
    return s;
}

static struct CUstream_st *resolve(CUcontext c, CUstream s, int per_thread)
{
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
        if (!c || c->magic != SIMCUDA_CTX_MAGIC)
            return NULL;
        if (s == CU_STREAM_PER_THREAD || (s == NULL && per_thread))
            return per_thread_stream(c);
        return &c->null_stream;
    }
    return s->magic == SIMCUDA_STREAM_MAGIC ? s : NULL;
}

SIMCUDA_API CUstream simcuda_stream_resolve(CUcontext ctx, CUstream s, int perThread)
{
    return resolve(ctx ? ctx : tl_ctx, s, perThread);
}

/* the stream a handle stands for in the calling thread's call; NULL when it is not valid */
static struct CUstream_st *stream_get(CUstream s)
{
    return resolve(tl_ctx, s, tl_ptds);
}

static int is_special_stream(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

static CUresult stream_create(CUstream *phStream, unsigned int Flags, int priority)
{
    if (!phStream || (Flags & ~1u))
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx_ok(tl_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = SIMCUDA_STREAM_MAGIC;
    s->ctx = tl_ctx;
    s->flags = Flags;
    /* cuda.h: priorities outside [greatest, least] = [-5, 0] are clamped */
    s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
    lock();
    s->id = g_next_stream_id++;
    pthread_mutex_unlock(&g_mu);
    simcuda_resource(CUPTI_CBID_RESOURCE_STREAM_CREATED, tl_ctx, s, NULL);
    *phStream = s;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    DRV_CALL(cuStreamCreate, phStream, Flags);
    REQUIRE_INIT();
    DRV_RETURN(stream_create(phStream, Flags, 0));
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    DRV_CALL(cuStreamCreateWithPriority, phStream, flags, priority);
    REQUIRE_INIT();
    DRV_RETURN(stream_create(phStream, flags, priority));
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    DRV_CALL(cuCtxGetStreamPriorityRange, leastPriority, greatestPriority);
    REQUIRE_INIT();
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    DRV_CALL(cuStreamDestroy_v2, hStream);
    REQUIRE_INIT();
    if (is_special_stream(hStream) || hStream->magic != SIMCUDA_STREAM_MAGIC ||
        hStream->per_thread || hStream == &hStream->ctx->null_stream)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    simcuda_resource(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, hStream->ctx, hStream, NULL);
    capture_forget(hStream);
    hStream->magic = 0;
    free(hStream);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int *priority)
{
    DRV_CALL(cuStreamGetPriority, hStream, priority);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!priority)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *priority = s->priority;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    DRV_CALL(cuStreamGetFlags, hStream, flags);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!flags)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *flags = s->flags;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    DRV_CALL(cuStreamGetId, hStream, streamId);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!streamId)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *streamId = s->id;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    DRV_CALL(cuStreamGetCtx, hStream, pctx);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!pctx)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *pctx = s->ctx;
    DRV_RETURN(CUDA_SUCCESS);
}

static void graph_pool_sync_locked(int d, struct CUstream_st *s);

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    DRV_CALL(cuStreamSynchronize, hStream);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!ctx_ok(s->ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (s->cap)
        DRV_RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    simcuda_sync_point(s->ctx);
    lock();
    graph_pool_sync_locked(s->ctx->device, s);
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    DRV_CALL(cuStreamQuery, hStream);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    /* nothing runs, so every stream is idle (a capturing stream cannot be queried) */
    DRV_RETURN(s->cap ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                                      const CUstreamAttrValue *value)
{
    DRV_CALL(cuStreamSetAttribute, hStream, attr, value);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!value)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (attr == CU_LAUNCH_ATTRIBUTE_PRIORITY)
        s->priority = value->priority > 0 ? 0 : value->priority < -5 ? -5 : value->priority;
    DRV_RETURN(CUDA_SUCCESS); /* access policy windows, synchronization policy: accepted */
}

CUresult CUDAAPI cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr,
                                      CUstreamAttrValue *value_out)
{
    DRV_CALL(cuStreamGetAttribute, hStream, attr, value_out);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!value_out)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    memset(value_out, 0, sizeof(*value_out));
    if (attr == CU_LAUNCH_ATTRIBUTE_PRIORITY)
        value_out->priority = s->priority;
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* events */

#define SIMCUDA_EVENT_MAGIC 0x544e5645u /* "EVNT" */
struct CUevent_st {
    uint32_t magic;
    CUcontext ctx;
    unsigned flags;
    int recorded;
    uint64_t t_ns;
    struct CUgraph_st *cap;          /* recorded in a capturing stream: its capture */
    struct CUgraphNode_st *cap_node; /* ... and the node then last in that stream */
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int event_ok(CUevent e)
{
    return e && e->magic == SIMCUDA_EVENT_MAGIC;
}

static CUresult event_new(CUevent *ph, unsigned flags)
{
    if (!ph || (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                    CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE; /* cuda.h: interprocess requires DISABLE_TIMING */
    if (!ctx_ok(tl_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUevent_st *e = calloc(1, sizeof(*e));
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = SIMCUDA_EVENT_MAGIC;
    e->ctx = tl_ctx;
    e->flags = flags;
    *ph = e;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    DRV_CALL(cuEventCreate, phEvent, Flags);
    REQUIRE_INIT();
    DRV_RETURN(event_new(phEvent, Flags));
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
    DRV_CALL(cuEventDestroy_v2, hEvent);
    REQUIRE_INIT();
    if (!event_ok(hEvent))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    hEvent->magic = 0;
    free(hEvent);
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult event_record(CUevent e, CUstream hStream)
{
    if (!event_ok(e))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    e->recorded = 1;
    e->t_ns = mono_ns();
    e->cap = s->cap;
    e->cap_node = s->cap ? s->cap_last : NULL;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    DRV_CALL(cuEventRecord, hEvent, hStream);
    REQUIRE_INIT();
    DRV_RETURN(event_record(hEvent, hStream));
}

CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    DRV_CALL(cuEventRecordWithFlags, hEvent, hStream, flags);
    REQUIRE_INIT();
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(event_record(hEvent, hStream));
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    DRV_CALL(cuEventQuery, hEvent);
    REQUIRE_INIT();
    DRV_RETURN(event_ok(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    DRV_CALL(cuEventSynchronize, hEvent);
    REQUIRE_INIT();
    DRV_RETURN(event_ok(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    DRV_CALL(cuEventElapsedTime_v2, pMilliseconds, hStart, hEnd);
    REQUIRE_INIT();
    if (!event_ok(hStart) || !event_ok(hEnd))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!pMilliseconds)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!hStart->recorded || !hEnd->recorded)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    *pMilliseconds = (float)((double)(int64_t)(hEnd->t_ns - hStart->t_ns) / 1e6);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    DRV_CALL(cuStreamWaitEvent, hStream, hEvent, Flags);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s || !event_ok(hEvent))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (hEvent->cap && !capture_active(hEvent->cap))
        hEvent->cap = NULL; /* recorded in a capture that has ended */
    if (hEvent->cap && !s->cap) {
        /* waiting on an event of a capture joins the capture (cuda.h, cuStreamBeginCapture) */
        s->cap = hEvent->cap;
        s->cap_last = hEvent->cap_node;
        s->cap_origin = 0;
        capture_joined(s);
    } else if (hEvent->cap && s->cap == hEvent->cap && !s->cap_last) {
        s->cap_last = hEvent->cap_node;
    }
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* graphs and stream capture (nodes; memory of alloc nodes from the per-device graph pool) */

#define SIMCUDA_GRAPH_MAGIC 0x48505247u /* "GRPH" */
#define SIMCUDA_NODE_MAGIC 0x45444f4eu  /* "NODE" */
#define SIMCUDA_EXEC_MAGIC 0x43455847u  /* "GXEC" */
#define MAX_NODE_DEPS 8

struct CUgraphNode_st {
    uint32_t magic;
    struct CUgraph_st *graph;
    CUgraphNodeType type;
    uint64_t dptr, bytes; /* alloc: its address and size; free: the address */
    int dev;
    int va_reused; /* free node: an alloc node depending on it took over its address */
    CUhostFn fn;
    void *user;
    struct CUgraphNode_st *deps[MAX_NODE_DEPS];
    size_t ndeps;
    struct CUgraphNode_st *next;
};

struct CUgraph_st {
    uint32_t magic;
    struct CUgraphNode_st *head, *tail;
    size_t count;
    int capturing; /* being built by a stream capture */
};

typedef struct xnode {
    CUgraphNodeType type;
    uint64_t dptr, bytes;
    int dev;
    CUhostFn fn;
    void *user;
} xnode;

struct CUgraphExec_st {
    uint32_t magic;
    size_t n;
    xnode *nodes;
};

/* Per-device graph memory pool (cuda.h, cuDeviceGraphMemTrim / CUgraphMem_attribute): physical
 * chunks backing graph allocations. A launch takes, for each alloc node, an idle chunk that is not
 * still in flight on another stream (idle since a synchronization, or last used on the launching
 * stream), else reserves a new one; chunks stay reserved until cuDeviceGraphMemTrim. */
typedef struct gchunk {
    uint64_t size;
    uint64_t holder;          /* address of the live graph allocation using it, 0 if idle */
    struct CUstream_st *busy; /* stream that last used it, until a synchronization */
    struct gchunk *next;
} gchunk;

typedef struct graph_pool {
    gchunk *chunks;
    uint64_t reserved, reserved_high, used_high;
    region va; /* graph allocation addresses: device subregion 3, lower half */
} graph_pool;
static graph_pool g_gpool[SIMCUDA_MAX_DEVICES];

#define REG_IMPORT_GRAPH 3

static region *graph_va_locked(int d)
{
    region *r = &g_gpool[d].va;
    if (!r->base) {
        r->base = r->bump = DEV_BASE(d) + (uint64_t)REG_IMPORT_GRAPH * SUBREGION;
        r->limit = r->base + SUBREGION / 2;
    }
    return r;
}

/* addresses of memory imported from other processes: device subregion 3, upper half */
static region g_import_va[SIMCUDA_MAX_DEVICES];
static region *import_va_locked(int d)
{
    region *r = &g_import_va[d];
    if (!r->base) {
        r->base = r->bump = DEV_BASE(d) + (uint64_t)REG_IMPORT_GRAPH * SUBREGION + SUBREGION / 2;
        r->limit = r->base + SUBREGION / 2;
    }
    return r;
}

static void graph_pool_sync_locked(int d, struct CUstream_st *s)
{
    for (gchunk *c = g_gpool[d].chunks; c; c = c->next)
        if (!s || c->busy == s)
            c->busy = NULL;
}

static void graph_pool_set_reserved(int d, uint64_t nr)
{
    graph_pool *gp = &g_gpool[d];
    g_dev[d].reserved = g_dev[d].reserved - gp->reserved + nr;
    gp->reserved = nr;
    if (nr > gp->reserved_high)
        gp->reserved_high = nr;
    if (nr > gp->used_high)
        gp->used_high = nr;
}

static int graph_ok(CUgraph g)
{
    return g && g->magic == SIMCUDA_GRAPH_MAGIC;
}

static CUresult node_new(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                         CUgraphNodeType type)
{
    if (!graph_ok(g) || (ndeps && !deps) || ndeps > MAX_NODE_DEPS)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++)
        if (!deps[i] || deps[i]->magic != SIMCUDA_NODE_MAGIC || deps[i]->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphNode_st *n = calloc(1, sizeof(*n));
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->magic = SIMCUDA_NODE_MAGIC;
    n->graph = g;
    n->type = type;
    for (size_t i = 0; i < ndeps; i++)
        n->deps[i] = deps[i];
    n->ndeps = ndeps;
    if (g->tail)
        g->tail->next = n;
    else
        g->head = n;
    g->tail = n;
    g->count++;
    if (out)
        *out = n;
    return CUDA_SUCCESS;
}

/* an alloc node: its address is fixed now, for the graph's lifetime; it takes over the address of
 * a same-sized allocation freed by a free node it depends on (the sample graphMemoryFootprint) */
static CUresult alloc_node_new(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                               int dev, uint64_t bytes, uint64_t *dptr)
{
    if (!valid_dev(dev) || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode n = NULL;
    CUresult r = node_new(&n, g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    if (r != CUDA_SUCCESS)
        return r;
    uint64_t rs = round_up(bytes, VMM_GRANULARITY), addr = 0;
    for (size_t i = 0; i < ndeps && !addr; i++) {
        struct CUgraphNode_st *f = deps[i];
        if (f->type != CU_GRAPH_NODE_TYPE_MEM_FREE || f->va_reused)
            continue;
        for (struct CUgraphNode_st *a = g->head; a; a = a->next)
            if (a->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && a->dptr == f->dptr &&
                round_up(a->bytes, VMM_GRANULARITY) == rs && a->dev == dev) {
                addr = f->dptr;
                f->va_reused = 1;
                break;
            }
    }
    lock();
    if (!addr && region_alloc(graph_va_locked(dev), rs, &addr))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g_mu);
    n->dptr = addr;
    n->bytes = bytes;
    n->dev = dev;
    if (out)
        *out = n;
    *dptr = addr;
    return r;
}

/* capture: work submitted to a capturing stream becomes a node depending on its last one */
static CUresult cap_node(struct CUstream_st *s, CUgraphNodeType type, CUgraphNode *out)
{
    CUgraphNode n = NULL;
    CUresult r = node_new(&n, s->cap, s->cap_last ? &s->cap_last : NULL, s->cap_last ? 1 : 0, type);
    if (r == CUDA_SUCCESS) {
        s->cap_last = n;
        if (out)
            *out = n;
    }
    return r;
}

static CUresult cap_alloc(struct CUstream_st *s, uint64_t size, int dev, uint64_t *addr)
{
    CUgraphNode n = NULL;
    CUresult r = alloc_node_new(&n, s->cap, s->cap_last ? &s->cap_last : NULL, s->cap_last ? 1 : 0,
                                dev, size, addr);
    if (r == CUDA_SUCCESS)
        s->cap_last = n;
    return r;
}

static CUresult cap_free(struct CUstream_st *s, uint64_t dptr)
{
    CUgraphNode n = NULL;
    CUresult r = cap_node(s, CU_GRAPH_NODE_TYPE_MEM_FREE, &n);
    if (r == CUDA_SUCCESS)
        n->dptr = dptr;
    return r;
}

/* graph memory released outside a graph (cuMemFree / cuMemFreeAsync): its chunk goes idle */
static void graph_free_locked(alloc *a, struct CUstream_st *s)
{
    gchunk *c = NULL;
    for (c = g_gpool[a->dev].chunks; c && c->holder != a->addr; c = c->next)
        ;
    if (c) {
        c->holder = 0;
        c->busy = s;
    }
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                            .address = a->addr,
                            .bytes = a->size,
                            .device = a->dev,
                            .ctx = &g_dev[a->dev].ctx,
                            .stream = s,
                            .is_async = s != NULL};
    push_event(&ev);
    table_remove(a);
}

/* ------------------------------------------------------------------------------------------ */
/* stream-ordered allocation */

static CUresult async_alloc(CUdeviceptr *dptr, size_t bytesize, struct CUmemPoolHandle_st *p,
                            CUstream hs)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = stream_get(hs);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!ctx_ok(tl_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    uint64_t addr = 0;
    CUresult r;
    lock();
    if (!p)
        p = g_dev[s->ctx->device].current_pool ? g_dev[s->ctx->device].current_pool
                                               : default_pool_locked(s->ctx->device);
    if (!pool_valid(p) || p->imported) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (s->cap) {
        /* captured: an alloc node of the graph; memory comes at launch (cuda.h, graph memory) */
        int dev = p->dev;
        pthread_mutex_unlock(&g_mu);
        r = cap_alloc(s, bytesize ? bytesize : 1, dev, &addr);
        lock();
    } else {
        r = pool_alloc_locked(p, bytesize, s, &addr);
    }
    unlock_and_emit();
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)addr;
    return r;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    DRV_CALL(cuMemAllocAsync, dptr, bytesize, hStream);
    REQUIRE_INIT();
    DRV_RETURN(async_alloc(dptr, bytesize, NULL, hStream));
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream)
{
    DRV_CALL(cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream);
    REQUIRE_INIT();
    if (!pool_valid(pool))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(async_alloc(dptr, bytesize, pool, hStream));
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    DRV_CALL(cuMemFreeAsync, dptr, hStream);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (s->cap)
        DRV_RETURN(cap_free(s, dptr));
    lock();
    alloc *a = table_find(dptr);
    CUresult r = CUDA_SUCCESS;
    if (!a) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (a->type == AT_POOL) {
        pool_free_locked(a, s, 1);
    } else if (a->type == AT_GRAPH) {
        graph_free_locked(a, s);
    } else if (a->type == AT_DEVICE || (a->type == AT_IMPORT && a->flags == 1)) {
        r = free_any_locked(dptr, 0); /* cudaFreeAsync of cudaMalloc memory is allowed */
    } else {
        r = CUDA_ERROR_INVALID_VALUE;
    }
    unlock_and_emit();
    DRV_RETURN(r);
}

static int handle_types_ok(unsigned t)
{
    return (t &
            ~(unsigned)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC)) == 0;
}

/* Pools on a device, on the host (HOST, HOST_NUMA, HOST_NUMA_CURRENT) and managed pools
 * (cuda.h, cuMemPoolCreate). Host and managed pools hand out real host memory. */
CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    DRV_CALL(cuMemPoolCreate, pool, poolProps);
    REQUIRE_INIT();
    if (!pool || !poolProps || !handle_types_ok((unsigned)poolProps->handleTypes))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    int host = 0, dev = 0;
    CUmemLocation loc = poolProps->location;
    if (poolProps->allocType == CU_MEM_ALLOCATION_TYPE_PINNED) {
        if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE) {
            dev = loc.id;
        } else if (loc.type == CU_MEM_LOCATION_TYPE_HOST ||
                   loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                   loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
            host = 1;
            if (loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && loc.id != 0)
                DRV_RETURN(CUDA_ERROR_INVALID_VALUE); /* one host NUMA node: 0 */
        } else {
            DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
        }
    } else if (poolProps->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED) {
        host = 1;
        if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE)
            dev = loc.id;
        else if (loc.type != CU_MEM_LOCATION_TYPE_NONE && loc.type != CU_MEM_LOCATION_TYPE_HOST &&
                 loc.type != CU_MEM_LOCATION_TYPE_HOST_NUMA &&
                 loc.type != CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
            DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    } else {
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    if (host && loc.type != CU_MEM_LOCATION_TYPE_DEVICE)
        dev = ctx_ok(tl_ctx) ? tl_ctx->device : 0;
    lock();
    if (!valid_dev(dev)) {
        pthread_mutex_unlock(&g_mu);
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    }
    struct CUmemPoolHandle_st *p = pool_new_host_locked(dev, 0, host);
    if (p) {
        p->loc_type = loc.type;
        p->alloc_type = poolProps->allocType;
        p->handle_types = (unsigned)poolProps->handleTypes;
    }
    unlock_and_emit();
    if (!p)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *pool = p;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    DRV_CALL(cuMemPoolDestroy, pool);
    REQUIRE_INIT();
    if (!pool_valid(pool) || pool->is_default)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    sim_device *dv = &g_dev[pool->dev];
    /* live allocations keep their memory until freed; the sim releases what is unused now */
    pool_release_locked(pool, 0);
    if (!pool->imported)
        push_pool_event(pool, CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, 0);
    if (pool->used == 0) {
        for (int i = 0; i < dv->npools; i++)
            if (dv->pools[i] == pool)
                dv->pools[i] = NULL;
        if (dv->current_pool == pool)
            dv->current_pool = dv->default_pool;
        for (int i = 0; i < g_nlocpools; i++) /* a location's current pool: its default again */
            if (g_locpools[i].cur == pool)
                g_locpools[i].cur = g_locpools[i].def;
        pool->magic = 0;
        while (pool->addrs.free) {
            freeblk *f = pool->addrs.free;
            pool->addrs.free = f->next;
            free(f);
        }
        if (pool->host)
            munmap((void *)(uintptr_t)pool->addrs.base, POOL_WINDOW);
        free(pool);
    }
    unlock_and_emit();
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    DRV_CALL(cuMemPoolTrimTo, pool, minBytesToKeep);
    REQUIRE_INIT();
    if (!pool_valid(pool))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    pool_release_locked(pool, minBytesToKeep);
    push_pool_event(pool, CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, minBytesToKeep);
    unlock_and_emit();
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    DRV_CALL(cuMemPoolSetAttribute, pool, attr, value);
    REQUIRE_INIT();
    if (!pool_valid(pool) || !value)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r = CUDA_SUCCESS;
    lock();
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: pool->reuse_follow = *(int *)value; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        pool->reuse_opportunistic = *(int *)value;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        pool->reuse_internal = *(int *)value;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: pool->threshold = *(cuuint64_t *)value; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            pool->reserved_high = pool->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            pool->used_high = pool->used;
        break;
    default: r = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    DRV_CALL(cuMemPoolGetAttribute, pool, attr, value);
    REQUIRE_INIT();
    if (!pool_valid(pool) || !value)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r = CUDA_SUCCESS;
    lock();
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *(int *)value = pool->reuse_follow; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        *(int *)value = pool->reuse_opportunistic;
        break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = pool->reuse_internal;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = pool->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = pool->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = pool->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = pool->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = pool->used_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    DRV_CALL(cuDeviceGetDefaultMemPool, pool_out, dev);
    REQUIRE_INIT();
    if (!pool_out)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    lock();
    *pool_out = default_pool_locked(dev);
    unlock_and_emit();
    DRV_RETURN(*pool_out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    DRV_CALL(cuDeviceGetMemPool, pool, dev);
    REQUIRE_INIT();
    if (!pool)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    lock();
    *pool = g_dev[dev].current_pool ? g_dev[dev].current_pool : default_pool_locked(dev);
    unlock_and_emit();
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    DRV_CALL(cuDeviceSetMemPool, dev, pool);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (!pool_valid(pool) || pool->dev != dev)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    g_dev[dev].current_pool = pool;
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

/* CUDA 13's pools by location and allocation type (cuda.h:13578-13647, cuMemGetDefaultMemPool,
 * cuMemGetMemPool, cuMemSetMemPool): besides a device's pinned pool (cuDeviceGetDefaultMemPool),
 * every location has a default pool per allocation type: pinned memory on the host (HOST) or a
 * host NUMA node (HOST_NUMA; the simulator has node 0 only, as cuMemPoolCreate), managed memory
 * with a preferred location (DEVICE, HOST, HOST_NUMA) or none (NONE, managed only). Any other
 * location type, or another allocation type, is CUDA_ERROR_INVALID_VALUE. The default pools are
 * made on first use (never by cuMemPoolCreate: a tool sees no creation call) and cannot be
 * destroyed; a location's current pool is its default until cuMemSetMemPool sets another "of the
 * same location and allocation type", and goes back to the default when that pool is destroyed
 * (cuMemPoolDestroy). DEVICE+PINNED is the device's pool of cuDeviceGetDefaultMemPool /
 * cuDeviceSetMemPool ("the equivalent of calling cuDeviceSetMemPool"). Host and managed pools hand
 * out real host memory, like created ones (pool_new_host_locked). */

/* checks a location and allocation type as cuda.h lists them; the location's id normalized */
static CUresult loc_check(const CUmemLocation *loc, CUmemAllocationType type, int *id)
{
    if (!loc || (type != CU_MEM_ALLOCATION_TYPE_PINNED && type != CU_MEM_ALLOCATION_TYPE_MANAGED))
        return CUDA_ERROR_INVALID_VALUE;
    *id = 0;
    switch (loc->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (!valid_dev(loc->id))
            return CUDA_ERROR_INVALID_DEVICE;
        *id = loc->id;
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST: return CUDA_SUCCESS; /* "id is ignored" */
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return loc->id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; /* one NUMA node */
    case CU_MEM_LOCATION_TYPE_NONE:
        return type == CU_MEM_ALLOCATION_TYPE_MANAGED ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* the entry of a location that is not DEVICE+PINNED, made with its default pool on first use */
static loc_pools *loc_pools_locked(CUmemLocationType t, int id, CUmemAllocationType atype)
{
    for (int i = 0; i < g_nlocpools; i++)
        if (g_locpools[i].type == t && g_locpools[i].id == id && g_locpools[i].alloc == atype)
            return &g_locpools[i];
    if (g_nlocpools >= (int)(sizeof g_locpools / sizeof g_locpools[0]))
        return NULL;
    /* kept in the list of the device it prefers (managed on a device), else device 0's */
    struct CUmemPoolHandle_st *p =
        pool_new_host_locked(t == CU_MEM_LOCATION_TYPE_DEVICE ? id : 0, 1, 1);
    if (!p)
        return NULL;
    p->loc_type = t;
    p->alloc_type = atype;
    loc_pools *e = &g_locpools[g_nlocpools++];
    e->type = t;
    e->id = id;
    e->alloc = atype;
    e->def = e->cur = p;
    return e;
}

static int loc_is_device_pinned(const CUmemLocation *loc, CUmemAllocationType type)
{
    return loc->type == CU_MEM_LOCATION_TYPE_DEVICE && type == CU_MEM_ALLOCATION_TYPE_PINNED;
}

CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
                                        CUmemAllocationType type)
{
    DRV_CALL(cuMemGetDefaultMemPool, pool_out, location, type);
    REQUIRE_INIT();
    int id = 0;
    CUresult r = pool_out ? loc_check(location, type, &id) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        DRV_RETURN(r);
    lock();
    struct CUmemPoolHandle_st *p = NULL;
    if (loc_is_device_pinned(location, type)) {
        p = default_pool_locked(id);
    } else {
        loc_pools *e = loc_pools_locked(location->type, id, type);
        p = e ? e->def : NULL;
    }
    unlock_and_emit();
    if (!p)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *pool_out = p;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                 CUmemAllocationType type)
{
    DRV_CALL(cuMemGetMemPool, pool, location, type);
    REQUIRE_INIT();
    int id = 0;
    CUresult r = pool ? loc_check(location, type, &id) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        DRV_RETURN(r);
    lock();
    struct CUmemPoolHandle_st *p = NULL;
    if (loc_is_device_pinned(location, type)) {
        p = g_dev[id].current_pool ? g_dev[id].current_pool : default_pool_locked(id);
    } else {
        loc_pools *e = loc_pools_locked(location->type, id, type);
        p = e ? e->cur : NULL;
    }
    unlock_and_emit();
    if (!p)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *pool = p;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
                                 CUmemoryPool pool)
{
    DRV_CALL(cuMemSetMemPool, location, type, pool);
    REQUIRE_INIT();
    int id = 0;
    CUresult r = loc_check(location, type, &id);
    if (r != CUDA_SUCCESS)
        DRV_RETURN(r);
    /* "The location and allocation type specified must match those of the pool" */
    if (!pool_valid(pool) || pool->imported || pool->loc_type != location->type ||
        pool->alloc_type != type ||
        (location->type == CU_MEM_LOCATION_TYPE_DEVICE && pool->dev != id))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    if (loc_is_device_pinned(location, type)) {
        g_dev[id].current_pool = pool;
    } else {
        loc_pools *e = loc_pools_locked(location->type, id, type);
        if (e)
            e->cur = pool;
        else
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    unlock_and_emit();
    DRV_RETURN(r);
}

/* ------------------------------------------------------------------------------------------ */
/* sharing memory with other processes: IPC handles, pool export, shareable VMM handles.
 * A handle carries a blob naming the exporting process and what it exports; another process of
 * the same test opens it at a new address of its own (imported memory is not its own memory, so
 * it never counts as the importer's device memory). POSIX file descriptors are memfds holding
 * the blob, so they can be passed over a UNIX socket as real descriptors are. */

#define SIMCUDA_SHARE_MAGIC 0x52485353u /* "SSHR" */
enum share_kind { SHARE_MEM = 1, SHARE_EVENT, SHARE_POOL, SHARE_POOL_PTR, SHARE_VMM };
typedef struct share_blob {
    uint32_t magic;
    uint32_t kind;
    int32_t pid;
    int32_t dev;
    uint64_t addr, size, id;
} share_blob;

static int blob_read(const void *p, size_t n, enum share_kind kind, share_blob *b)
{
    if (n < sizeof(*b))
        return 0;
    memcpy(b, p, sizeof(*b));
    return b->magic == SIMCUDA_SHARE_MAGIC && b->kind == (uint32_t)kind && b->size > 0 &&
           b->size < (1ull << 48);
}

static int blob_fd(const share_blob *b)
{
    int fd = (int)syscall(SYS_memfd_create, "simcuda-share", 0u);
    if (fd < 0)
        return -1;
    if (pwrite(fd, b, sizeof(*b), 0) != (ssize_t)sizeof(*b)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int blob_from_fd(int fd, enum share_kind kind, share_blob *b)
{
    share_blob tmp;
    if (fd < 0 || pread(fd, &tmp, sizeof(tmp), 0) != (ssize_t)sizeof(tmp))
        return 0;
    return blob_read(&tmp, sizeof(tmp), kind, b);
}

/* maps imported memory at a new address of device d (under g_mu) */
static CUresult import_map_locked(const share_blob *b, int d, int pool_import, uint64_t *out)
{
    if (!valid_dev(d))
        d = 0;
    for (size_t k = 0; k < NBUCKETS && !pool_import; k++)
        for (alloc *a = g_buckets[k]; a; a = a->next)
            if (a->type == AT_IMPORT && !a->flags && a->src_addr == b->addr &&
                a->module == b->pid) {
                a->refs++; /* cuda.h: opening a handle again gives the same address */
                *out = a->addr;
                return CUDA_SUCCESS;
            }
    uint64_t rs = round_up(b->size, VMM_GRANULARITY), addr;
    if (region_alloc(import_va_locked(d), rs, &addr))
        return CUDA_ERROR_OUT_OF_MEMORY;
    alloc *a = table_add(addr, b->size, rs, AT_IMPORT, d, tl_ctx);
    if (!a) {
        region_free(import_va_locked(d), addr, rs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->refs = 1;
    a->src_addr = b->addr;
    a->module = b->pid;
    a->flags = pool_import ? 1u : 0u;
    *out = addr;
    return CUDA_SUCCESS;
}

static void import_unmap_locked(alloc *a)
{
    region_free(import_va_locked(a->dev), a->addr, a->rsize);
    table_remove(a);
}

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    DRV_CALL(cuIpcGetMemHandle, pHandle, dptr);
    REQUIRE_INIT();
    if (!pHandle)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    alloc *a = table_find(dptr);
    share_blob b = {SIMCUDA_SHARE_MAGIC, SHARE_MEM, (int32_t)getpid(), 0, dptr, 0, 0};
    int ok = a && a->type == AT_DEVICE; /* cuda.h: memory from cuMemAlloc */
    if (ok) {
        b.dev = a->dev;
        b.size = a->size;
    }
    pthread_mutex_unlock(&g_mu);
    if (!ok)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    memset(pHandle, 0, sizeof(*pHandle));
    memcpy(pHandle->reserved, &b, sizeof(b));
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    DRV_CALL(cuIpcOpenMemHandle_v2, pdptr, handle, Flags);
    REQUIRE_INIT();
    share_blob b;
    if (!pdptr || (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ||
        !blob_read(handle.reserved, sizeof(handle.reserved), SHARE_MEM, &b))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    /* cuda.h: a handle cannot be opened in the process that exported it */
    if (b.pid == (int32_t)getpid())
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    uint64_t addr = 0;
    lock();
    CUresult r = import_map_locked(&b, tl_ctx->device, 0, &addr);
    pthread_mutex_unlock(&g_mu);
    if (r == CUDA_SUCCESS)
        *pdptr = (CUdeviceptr)addr;
    DRV_RETURN(r);
}

CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    DRV_CALL(cuIpcCloseMemHandle, dptr);
    REQUIRE_INIT();
    lock();
    alloc *a = table_find(dptr);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a && a->type == AT_IMPORT && !a->flags) {
        if (--a->refs == 0)
            import_unmap_locked(a);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event)
{
    DRV_CALL(cuIpcGetEventHandle, pHandle, event);
    REQUIRE_INIT();
    if (!event_ok(event))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!pHandle || !(event->flags & CU_EVENT_INTERPROCESS))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    share_blob b = {SIMCUDA_SHARE_MAGIC,
                    SHARE_EVENT,
                    (int32_t)getpid(),
                    event->ctx->device,
                    (uint64_t)(uintptr_t)event,
                    1,
                    0};
    memset(pHandle, 0, sizeof(*pHandle));
    memcpy(pHandle->reserved, &b, sizeof(b));
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle)
{
    DRV_CALL(cuIpcOpenEventHandle, phEvent, handle);
    REQUIRE_INIT();
    share_blob b;
    if (!phEvent || !blob_read(handle.reserved, sizeof(handle.reserved), SHARE_EVENT, &b))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (b.pid == (int32_t)getpid())
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    DRV_RETURN(event_new(phEvent, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
}

CUresult CUDAAPI cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                  CUmemAllocationHandleType handleType,
                                                  unsigned long long flags)
{
    DRV_CALL(cuMemPoolExportToShareableHandle, handle_out, pool, handleType, flags);
    REQUIRE_INIT();
    if (!handle_out || !pool_valid(pool) || flags != 0 || pool->imported)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !(pool->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE); /* the pool was not created exportable */
    share_blob b = {SIMCUDA_SHARE_MAGIC, SHARE_POOL, (int32_t)getpid(),  pool->dev,
                    pool->addrs.base,    1,          (uint64_t)pool->idx};
    int fd = blob_fd(&b);
    if (fd < 0)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *(int *)handle_out = fd;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                    CUmemAllocationHandleType handleType,
                                                    unsigned long long flags)
{
    DRV_CALL(cuMemPoolImportFromShareableHandle, pool_out, handle, handleType, flags);
    REQUIRE_INIT();
    share_blob b;
    if (!pool_out || flags != 0 || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !blob_from_fd((int)(intptr_t)handle, SHARE_POOL, &b))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUmemPoolHandle_st *p = calloc(1, sizeof(*p));
    if (!p)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    p->magic = SIMCUDA_POOL_MAGIC;
    p->dev = valid_dev(b.dev) ? b.dev : 0;
    p->idx = -1;
    p->imported = 1;
    p->handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p->loc_type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->access = 1u << p->dev;
    *pool_out = p;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
    DRV_CALL(cuMemPoolExportPointer, shareData_out, ptr);
    REQUIRE_INIT();
    if (!shareData_out)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    alloc *a = table_find(ptr);
    int ok = a && a->type == AT_POOL && a->pool->handle_types != 0;
    share_blob b = {SIMCUDA_SHARE_MAGIC, SHARE_POOL_PTR, (int32_t)getpid(), 0, ptr, 0, 0};
    if (ok) {
        b.dev = a->dev;
        b.size = a->size ? a->size : 1;
    }
    pthread_mutex_unlock(&g_mu);
    if (!ok)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    memset(shareData_out, 0, sizeof(*shareData_out));
    memcpy(shareData_out->reserved, &b, sizeof(b));
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                        CUmemPoolPtrExportData *shareData)
{
    DRV_CALL(cuMemPoolImportPointer, ptr_out, pool, shareData);
    REQUIRE_INIT();
    share_blob b;
    if (!ptr_out || !pool_valid(pool) || !pool->imported || !shareData ||
        !blob_read(shareData->reserved, sizeof(shareData->reserved), SHARE_POOL_PTR, &b))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    uint64_t addr = 0;
    lock();
    CUresult r = import_map_locked(&b, pool->dev, 1, &addr);
    pthread_mutex_unlock(&g_mu);
    if (r == CUDA_SUCCESS)
        *ptr_out = (CUdeviceptr)addr;
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    DRV_CALL(cuMemPoolSetAccess, pool, map, count);
    REQUIRE_INIT();
    if (!pool_valid(pool) || (count && !map))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++)
        if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_dev(map[i].location.id) ||
            map[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    for (size_t i = 0; i < count; i++) {
        uint32_t bit = 1u << map[i].location.id;
        if (map[i].location.id == pool->dev && !pool->host)
            continue; /* cuda.h: the owning device's access cannot be changed */
        pool->access = map[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE ? pool->access & ~bit
                                                                     : pool->access | bit;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
                                    CUmemLocation *location)
{
    DRV_CALL(cuMemPoolGetAccess, flags, memPool, location);
    REQUIRE_INIT();
    if (!flags || !pool_valid(memPool) || !location ||
        location->type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_dev(location->id))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *flags = (memPool->access >> location->id) & 1u ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                                    : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* virtual memory management */

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    DRV_CALL(cuMemGetAllocationGranularity, granularity, prop, option);
    REQUIRE_INIT();
    if (!granularity || !prop)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *granularity = (size_t)VMM_GRANULARITY;
    DRV_RETURN(CUDA_SUCCESS);
}

static int host_location(CUmemLocationType t)
{
    return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static vmm_phys *phys_new_locked(int dev, uint64_t size, int host, unsigned htypes)
{
    vmm_phys *ph = calloc(1, sizeof(*ph));
    if (!ph)
        return NULL;
    ph->handle = g_next_handle++;
    ph->dev = dev;
    ph->size = size;
    ph->refs = 1;
    ph->host = host;
    ph->htypes = htypes;
    ph->next = g_phys;
    g_phys = ph;
    return ph;
}

/* Physical memory on a device or on the host (cuda.h, cuMemCreate: CU_MEM_LOCATION_TYPE_HOST,
 * HOST_NUMA, HOST_NUMA_CURRENT); only device memory counts as the device's. */
CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    DRV_CALL(cuMemCreate, handle, size, prop, flags);
    REQUIRE_INIT();
    if (!handle || !prop || size == 0 || size % VMM_GRANULARITY || flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    int host = host_location(prop->location.type);
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE && !host) ||
        !handle_types_ok((unsigned)prop->requestedHandleTypes))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    int d = host ? (ctx_ok(tl_ctx) ? tl_ctx->device : 0) : prop->location.id;
    CUresult r = CUDA_SUCCESS;
    if (!valid_dev(d)) {
        r = CUDA_ERROR_INVALID_DEVICE;
    } else if (!host && !fits(d, size)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        vmm_phys *ph = phys_new_locked(d, size, host, (unsigned)prop->requestedHandleTypes);
        if (!ph) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            if (!host)
                g_dev[d].reserved += size;
            ph->compression = prop->allocFlags.compressionType;
            *handle = ph->handle;
        }
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

static vmm_phys *phys_find(CUmemGenericAllocationHandle h)
{
    for (vmm_phys *p = g_phys; p; p = p->next)
        if (p->handle == h && p->refs > 0)
            return p;
    return NULL;
}

/* physical memory goes back once every handle reference is released and every mapping unmapped */
static void phys_maybe_free(vmm_phys *ph)
{
    if (ph->refs > 0 || ph->maps)
        return;
    if (!ph->host && !ph->imported)
        g_dev[ph->dev].reserved -= ph->size;
    for (vmm_phys **pp = &g_phys; *pp; pp = &(*pp)->next)
        if (*pp == ph) {
            *pp = ph->next;
            break;
        }
    free(ph);
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    DRV_CALL(cuMemRelease, handle);
    REQUIRE_INIT();
    lock();
    vmm_phys *ph = phys_find(handle);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (ph) {
        ph->refs--;
        phys_maybe_free(ph);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    DRV_CALL(cuMemRetainAllocationHandle, handle, addr);
    REQUIRE_INIT();
    if (!handle)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uint64_t)(uintptr_t)addr;
    for (vmm_map *m = g_maps; m; m = m->next)
        if (a >= m->addr && a - m->addr < m->size) {
            m->phys->refs++; /* cuda.h: must be released with cuMemRelease */
            *handle = m->phys->handle;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle)
{
    DRV_CALL(cuMemGetAllocationPropertiesFromHandle, prop, handle);
    REQUIRE_INIT();
    if (!prop)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    vmm_phys *ph = phys_find(handle);
    if (ph) {
        memset(prop, 0, sizeof(*prop));
        prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop->location.type = ph->host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
        prop->location.id = ph->host ? 0 : ph->dev;
        prop->requestedHandleTypes = (CUmemAllocationHandleType)ph->htypes;
        prop->allocFlags.compressionType = ph->compression;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(ph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle,
                                              CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType,
                                              unsigned long long flags)
{
    DRV_CALL(cuMemExportToShareableHandle, shareableHandle, handle, handleType, flags);
    REQUIRE_INIT();
    if (!shareableHandle || flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    vmm_phys *ph = phys_find(handle);
    share_blob b = {SIMCUDA_SHARE_MAGIC, SHARE_VMM, (int32_t)getpid(), 0, 0, 0, handle};
    int ok = ph && handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
             (ph->htypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (ok) {
        b.dev = ph->dev;
        b.size = ph->size;
        b.addr = ph->host;
    }
    pthread_mutex_unlock(&g_mu);
    if (!ok)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE); /* not created with this handle type */
    int fd = blob_fd(&b);
    if (fd < 0)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    *(int *)shareableHandle = fd;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                void *osHandle,
                                                CUmemAllocationHandleType shHandleType)
{
    DRV_CALL(cuMemImportFromShareableHandle, handle, osHandle, shHandleType);
    REQUIRE_INIT();
    share_blob b;
    if (!handle || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
        !blob_from_fd((int)(intptr_t)osHandle, SHARE_VMM, &b) || b.size % VMM_GRANULARITY)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    vmm_phys *ph = phys_new_locked(valid_dev(b.dev) ? b.dev : 0, b.size, b.addr != 0,
                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (ph) {
        ph->imported = 1;
        *handle = ph->handle;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(ph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags)
{
    DRV_CALL(cuMemAddressReserve, ptr, size, alignment, addr, flags);
    REQUIRE_INIT();
    if (!ptr || size == 0 || size % VMM_GRANULARITY || (alignment & (alignment - 1)))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    uint64_t al = alignment > VMM_GRANULARITY ? alignment : VMM_GRANULARITY;
    uint64_t base = round_up(g_vmm_region.bump, al);
    CUresult r = CUDA_SUCCESS;
    vmm_resv *rv = NULL;
    if (base + size > g_vmm_region.limit || !(rv = calloc(1, sizeof(*rv)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        g_vmm_region.bump = base + size;
        rv->addr = base;
        rv->size = size;
        rv->next = g_resv;
        g_resv = rv;
        *ptr = (CUdeviceptr)base;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

static vmm_resv *resv_containing(uint64_t addr, uint64_t size)
{
    for (vmm_resv *r = g_resv; r; r = r->next)
        if (addr >= r->addr && addr + size <= r->addr + r->size && addr + size > addr)
            return r;
    return NULL;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    DRV_CALL(cuMemAddressFree, ptr, size);
    REQUIRE_INIT();
    lock();
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    for (vmm_resv **pp = &g_resv; *pp; pp = &(*pp)->next) {
        vmm_resv *rv = *pp;
        if (rv->addr == ptr && rv->size == size) {
            int mapped = 0;
            for (vmm_map *m = g_maps; m; m = m->next)
                if (m->addr >= rv->addr && m->addr < rv->addr + rv->size)
                    mapped = 1;
            if (mapped)
                break;
            *pp = rv->next;
            free(rv);
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    DRV_CALL(cuMemMap, ptr, size, offset, handle, flags);
    REQUIRE_INIT();
    if (size == 0 || size % VMM_GRANULARITY || ptr % VMM_GRANULARITY || flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    CUresult r = CUDA_SUCCESS;
    vmm_phys *ph = phys_find(handle);
    if (!ph || offset + size > ph->size || !resv_containing(ptr, size)) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        for (vmm_map *m = g_maps; m; m = m->next)
            if (ptr < m->addr + m->size && m->addr < ptr + size)
                r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        vmm_map *m = calloc(1, sizeof(*m));
        if (!m) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            m->addr = ptr;
            m->size = size;
            m->phys = ph;
            m->next = g_maps;
            g_maps = m;
            ph->maps++;
        }
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    DRV_CALL(cuMemUnmap, ptr, size);
    REQUIRE_INIT();
    lock();
    CUresult r = CUDA_SUCCESS;
    int found = 0;
    for (vmm_map *m = g_maps; m; m = m->next) {
        int overlap = ptr < m->addr + m->size && m->addr < ptr + size;
        int inside = m->addr >= ptr && m->addr + m->size <= ptr + size;
        if (overlap && !inside)
            r = CUDA_ERROR_INVALID_VALUE;
        if (inside)
            found = 1;
    }
    if (!found)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        vmm_map **pp = &g_maps;
        while (*pp) {
            vmm_map *m = *pp;
            if (m->addr >= ptr && m->addr + m->size <= ptr + size) {
                *pp = m->next;
                m->phys->maps--;
                phys_maybe_free(m->phys);
                free(m);
            } else {
                pp = &m->next;
            }
        }
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                size_t count)
{
    DRV_CALL(cuMemSetAccess, ptr, size, desc, count);
    REQUIRE_INIT();
    if (!desc || count == 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    uint64_t covered = 0;
    for (vmm_map *m = g_maps; m; m = m->next)
        if (m->addr >= ptr && m->addr + m->size <= ptr + size)
            covered += m->size;
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(covered == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                CUdeviceptr ptr)
{
    DRV_CALL(cuMemGetAccess, flags, location, ptr);
    REQUIRE_INIT();
    if (!flags || !location || !location_ok(*location))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    int mapped = 0;
    for (vmm_map *m = g_maps; m; m = m->next)
        if (ptr >= m->addr && ptr - m->addr < m->size)
            mapped = 1;
    pthread_mutex_unlock(&g_mu);
    if (!mapped)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* copies, sets and launches: recorded, not executed (captured as graph nodes while capturing) */

static void copy_bytes(uint64_t dst, uint64_t src, size_t n)
{
    if (!n || !dst)
        return;
    if (simcuda_is_device_address(dst))
        return;
    if (!src || simcuda_is_device_address(src))
        memset((void *)(uintptr_t)dst, 0,
               n); /* device contents are not simulated: reads give zeros */
    else
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
}

/* a stream for an asynchronous operation: NULL result = invalid handle; *captured set when the
 * operation only becomes a node of the stream's capture */
static CUresult async_op(CUstream hs, CUgraphNodeType type, int *captured)
{
    struct CUstream_st *s = stream_get(hs);
    *captured = 0;
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s->cap) {
        *captured = 1;
        return cap_node(s, type, NULL);
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    DRV_CALL(cuMemcpy, dst, src, ByteCount);
    REQUIRE_INIT();
    copy_bytes(dst, src, ByteCount);
    DRV_RETURN(CUDA_SUCCESS);
}

#define ASYNC_COPY(hs, doit)                                                                       \
    do {                                                                                           \
        int cap_;                                                                                  \
        CUresult r_ = async_op(hs, CU_GRAPH_NODE_TYPE_MEMCPY, &cap_);                              \
        if (r_ == CUDA_SUCCESS && !cap_) {                                                         \
            doit;                                                                                  \
        }                                                                                          \
        DRV_RETURN(r_);                                                                            \
    } while (0)

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    DRV_CALL(cuMemcpyAsync, dst, src, ByteCount, hStream);
    REQUIRE_INIT();
    ASYNC_COPY(hStream, copy_bytes(dst, src, ByteCount));
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    DRV_CALL(cuMemcpyHtoD_v2, dstDevice, srcHost, ByteCount);
    REQUIRE_INIT();
    copy_bytes(dstDevice, (uint64_t)(uintptr_t)srcHost, ByteCount);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    DRV_CALL(cuMemcpyDtoH_v2, dstHost, srcDevice, ByteCount);
    REQUIRE_INIT();
    copy_bytes((uint64_t)(uintptr_t)dstHost, srcDevice, ByteCount);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    DRV_CALL(cuMemcpyDtoD_v2, dstDevice, srcDevice, ByteCount);
    REQUIRE_INIT();
    copy_bytes(dstDevice, srcDevice, ByteCount);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    DRV_CALL(cuMemcpyHtoDAsync_v2, dstDevice, srcHost, ByteCount, hStream);
    REQUIRE_INIT();
    ASYNC_COPY(hStream, copy_bytes(dstDevice, (uint64_t)(uintptr_t)srcHost, ByteCount));
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    DRV_CALL(cuMemcpyDtoHAsync_v2, dstHost, srcDevice, ByteCount, hStream);
    REQUIRE_INIT();
    ASYNC_COPY(hStream, copy_bytes((uint64_t)(uintptr_t)dstHost, srcDevice, ByteCount));
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    DRV_CALL(cuMemcpyDtoDAsync_v2, dstDevice, srcDevice, ByteCount, hStream);
    REQUIRE_INIT();
    ASYNC_COPY(hStream, copy_bytes(dstDevice, srcDevice, ByteCount));
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                              CUcontext srcContext, size_t ByteCount)
{
    DRV_CALL(cuMemcpyPeer, dstDevice, dstContext, srcDevice, srcContext, ByteCount);
    REQUIRE_INIT();
    if (!ctx_ok(dstContext) || !ctx_ok(srcContext))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    copy_bytes(dstDevice, srcDevice, ByteCount);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                                   CUstream hStream)
{
    DRV_CALL(cuMemcpyPeerAsync, dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream);
    REQUIRE_INIT();
    if (!ctx_ok(dstContext) || !ctx_ok(srcContext))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    ASYNC_COPY(hStream, copy_bytes(dstDevice, srcDevice, ByteCount));
}

/* 2D/3D copies: host rows are copied, device and array contents are not simulated */
static uint64_t side_addr(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr)
{
    switch (t) {
    case CU_MEMORYTYPE_HOST: return (uint64_t)(uintptr_t)host;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: return dev;
    case CU_MEMORYTYPE_ARRAY: return arr ? DEV_BASE(0) : 0; /* any device address */
    default: return 0;
    }
}

static CUresult copy3d(const CUDA_MEMCPY3D *c)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t src = side_addr(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray);
    uint64_t dst = side_addr(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray);
    if (!src || !dst)
        return CUDA_ERROR_INVALID_VALUE;
    if (simcuda_is_device_address(dst))
        return CUDA_SUCCESS;
    size_t h = c->Height ? c->Height : 1, dpt = c->Depth ? c->Depth : 1;
    size_t sp = c->srcPitch ? c->srcPitch : c->WidthInBytes;
    size_t dp = c->dstPitch ? c->dstPitch : c->WidthInBytes;
    size_t sh = c->srcHeight ? c->srcHeight : h, dh = c->dstHeight ? c->dstHeight : h;
    for (size_t z = 0; z < dpt; z++)
        for (size_t y = 0; y < h; y++) {
            uint64_t so = ((c->srcZ + z) * sh + c->srcY + y) * sp + c->srcXInBytes;
            uint64_t doff = ((c->dstZ + z) * dh + c->dstY + y) * dp + c->dstXInBytes;
            copy_bytes(dst + doff, simcuda_is_device_address(src) ? 0 : src + so, c->WidthInBytes);
        }
    return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *c)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D t;
    memset(&t, 0, sizeof(t));
    t.srcXInBytes = c->srcXInBytes;
    t.srcY = c->srcY;
    t.srcMemoryType = c->srcMemoryType;
    t.srcHost = c->srcHost;
    t.srcDevice = c->srcDevice;
    t.srcArray = c->srcArray;
    t.srcPitch = c->srcPitch;
    t.dstXInBytes = c->dstXInBytes;
    t.dstY = c->dstY;
    t.dstMemoryType = c->dstMemoryType;
    t.dstHost = c->dstHost;
    t.dstDevice = c->dstDevice;
    t.dstArray = c->dstArray;
    t.dstPitch = c->dstPitch;
    t.WidthInBytes = c->WidthInBytes;
    t.Height = c->Height;
    t.Depth = 1;
    return copy3d(&t);
}

CUresult CUDAAPI cuMemcpy2D(const CUDA_MEMCPY2D *pCopy)
{
    DRV_CALL(cuMemcpy2D_v2, pCopy);
    REQUIRE_INIT();
    DRV_RETURN(copy2d(pCopy));
}

CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    DRV_CALL(cuMemcpy2DAsync_v2, pCopy, hStream);
    REQUIRE_INIT();
    if (!pCopy)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    ASYNC_COPY(hStream, (void)copy2d(pCopy));
}

CUresult CUDAAPI cuMemcpy3D(const CUDA_MEMCPY3D *pCopy)
{
    DRV_CALL(cuMemcpy3D_v2, pCopy);
    REQUIRE_INIT();
    DRV_RETURN(copy3d(pCopy));
}

CUresult CUDAAPI cuMemcpy3DAsync(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    DRV_CALL(cuMemcpy3DAsync_v2, pCopy, hStream);
    REQUIRE_INIT();
    if (!pCopy)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    ASYNC_COPY(hStream, (void)copy3d(pCopy));
}

static void set_bytes(uint64_t dst, int v, size_t n)
{
    if (dst && !simcuda_is_device_address(dst))
        memset((void *)(uintptr_t)dst, v, n);
}

static void set_elems(uint64_t dst, uint32_t v, size_t esize, size_t n)
{
    if (!dst || simcuda_is_device_address(dst))
        return;
    for (size_t i = 0; i < n; i++)
        memcpy((char *)(uintptr_t)dst + i * esize, &v, esize); /* little endian */
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    DRV_CALL(cuMemsetD8_v2, dstDevice, uc, N);
    REQUIRE_INIT();
    set_bytes(dstDevice, uc, N);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemsetD16(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    DRV_CALL(cuMemsetD16_v2, dstDevice, us, N);
    REQUIRE_INIT();
    set_elems(dstDevice, us, 2, N);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    DRV_CALL(cuMemsetD32_v2, dstDevice, ui, N);
    REQUIRE_INIT();
    set_elems(dstDevice, ui, 4, N);
    DRV_RETURN(CUDA_SUCCESS);
}

#define ASYNC_SET(hs, doit)                                                                        \
    do {                                                                                           \
        int cap_;                                                                                  \
        CUresult r_ = async_op(hs, CU_GRAPH_NODE_TYPE_MEMSET, &cap_);                              \
        if (r_ == CUDA_SUCCESS && !cap_) {                                                         \
            doit;                                                                                  \
        }                                                                                          \
        DRV_RETURN(r_);                                                                            \
    } while (0)

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream)
{
    DRV_CALL(cuMemsetD8Async, dstDevice, uc, N, hStream);
    REQUIRE_INIT();
    ASYNC_SET(hStream, set_bytes(dstDevice, uc, N));
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                  CUstream hStream)
{
    DRV_CALL(cuMemsetD32Async, dstDevice, ui, N, hStream);
    REQUIRE_INIT();
    ASYNC_SET(hStream, set_elems(dstDevice, ui, 4, N));
}

static void set_2d(uint64_t dst, size_t pitch, unsigned char v, size_t w, size_t h)
{
    for (size_t y = 0; y < h; y++)
        set_bytes(dst + y * pitch, v, w);
}

CUresult CUDAAPI cuMemsetD2D8(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                              size_t Width, size_t Height)
{
    DRV_CALL(cuMemsetD2D8_v2, dstDevice, dstPitch, uc, Width, Height);
    REQUIRE_INIT();
    if (dstPitch < Width)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    set_2d(dstDevice, dstPitch, uc, Width, Height);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                   size_t Width, size_t Height, CUstream hStream)
{
    DRV_CALL(cuMemsetD2D8Async, dstDevice, dstPitch, uc, Width, Height, hStream);
    REQUIRE_INIT();
    if (dstPitch < Width)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    ASYNC_SET(hStream, set_2d(dstDevice, dstPitch, uc, Width, Height));
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                                void **extra)
{
    DRV_CALL(cuLaunchKernel, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
             sharedMemBytes, hStream, kernelParams, extra);
    REQUIRE_INIT();
    if (!f || f->magic != SIMCUDA_FUNC_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ ||
        (uint64_t)blockDimX * blockDimY * blockDimZ > 1024)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    int cap;
    DRV_RETURN(async_op(hStream, CU_GRAPH_NODE_TYPE_KERNEL, &cap));
}

/* Host functions run at once on the calling thread: nothing else is in flight. */
CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    DRV_CALL(cuLaunchHostFunc, hStream, fn, userData);
    REQUIRE_INIT();
    if (!fn)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (s->cap) {
        CUgraphNode n = NULL;
        CUresult r = cap_node(s, CU_GRAPH_NODE_TYPE_HOST, &n);
        if (r == CUDA_SUCCESS) {
            n->fn = fn;
            n->user = userData;
        }
        DRV_RETURN(r);
    }
    fn(userData);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                     unsigned int flags)
{
    DRV_CALL(cuStreamAddCallback, hStream, callback, userData, flags);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!callback || flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (s->cap)
        DRV_RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    callback(is_special_stream(hStream) ? hStream : s, CUDA_SUCCESS, userData);
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* graph API */

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    DRV_CALL(cuGraphCreate, phGraph, flags);
    REQUIRE_INIT();
    if (!phGraph || flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUgraph_st *g = calloc(1, sizeof(*g));
    if (!g)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    g->magic = SIMCUDA_GRAPH_MAGIC;
    *phGraph = g;
    DRV_RETURN(CUDA_SUCCESS);
}

static void graph_free(CUgraph g)
{
    struct CUgraphNode_st *n = g->head;
    while (n) {
        struct CUgraphNode_st *next = n->next;
        n->magic = 0;
        free(n);
        n = next;
    }
    g->magic = 0;
    free(g);
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    DRV_CALL(cuGraphDestroy, hGraph);
    REQUIRE_INIT();
    if (!graph_ok(hGraph) || hGraph->capturing)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    graph_free(hGraph);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    DRV_CALL(cuGraphAddKernelNode_v2, phGraphNode, hGraph, dependencies, numDependencies,
             nodeParams);
    REQUIRE_INIT();
    if (!phGraphNode || !nodeParams)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(
        node_new(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_KERNEL));
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    DRV_CALL(cuGraphAddMemcpyNode, phGraphNode, hGraph, dependencies, numDependencies, copyParams,
             ctx);
    REQUIRE_INIT();
    if (!phGraphNode || !copyParams)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(
        node_new(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEMCPY));
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    DRV_CALL(cuGraphAddMemsetNode, phGraphNode, hGraph, dependencies, numDependencies, memsetParams,
             ctx);
    REQUIRE_INIT();
    if (!phGraphNode || !memsetParams)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    DRV_RETURN(
        node_new(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEMSET));
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies,
                                    const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    DRV_CALL(cuGraphAddHostNode, phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
    REQUIRE_INIT();
    if (!phGraphNode || !nodeParams || !nodeParams->fn)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r =
        node_new(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_HOST);
    if (r == CUDA_SUCCESS) {
        (*phGraphNode)->fn = nodeParams->fn;
        (*phGraphNode)->user = nodeParams->userData;
    }
    DRV_RETURN(r);
}

CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    DRV_CALL(cuGraphAddMemAllocNode, phGraphNode, hGraph, dependencies, numDependencies,
             nodeParams);
    REQUIRE_INIT();
    if (!phGraphNode || !nodeParams ||
        nodeParams->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    uint64_t addr = 0;
    CUresult r = alloc_node_new(phGraphNode, hGraph, dependencies, numDependencies,
                                nodeParams->poolProps.location.id, nodeParams->bytesize, &addr);
    if (r == CUDA_SUCCESS)
        nodeParams->dptr = (CUdeviceptr)addr;
    DRV_RETURN(r);
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies, size_t numDependencies,
                                       CUdeviceptr dptr)
{
    DRV_CALL(cuGraphAddMemFreeNode, phGraphNode, hGraph, dependencies, numDependencies, dptr);
    REQUIRE_INIT();
    if (!phGraphNode || !dptr)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r =
        node_new(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEM_FREE);
    if (r == CUDA_SUCCESS)
        (*phGraphNode)->dptr = dptr;
    DRV_RETURN(r);
}

/* The generic node API (cuda.h:21479, cuGraphAddNode, CUDA 12.3's ABI cuGraphAddNode_v2 that
 * cuda.h's #define names): a node of any type from CUgraphNodeParams. The memory nodes are made as
 * cuGraphAddMemAllocNode / cuGraphAddMemFreeNode make them, the alloc node's address written back
 * to nodeParams->alloc.dptr ("out: address of the allocation returned by CUDA",
 * CUDA_MEM_ALLOC_NODE_PARAMS_v2); edge data is not modelled (as for capture dependencies), and
 * other node types are not either (CUDA_ERROR_NOT_SUPPORTED, the simulator's answer). */
CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies,
                                const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                CUgraphNodeParams *nodeParams)
{
    DRV_CALL(cuGraphAddNode_v2, phGraphNode, hGraph, dependencies, dependencyData, numDependencies,
             nodeParams);
    REQUIRE_INIT();
    if (!phGraphNode || !nodeParams)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    CUresult r;
    if (nodeParams->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        const CUmemPoolProps *pp = &nodeParams->alloc.poolProps;
        if (pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
            pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
        uint64_t addr = 0;
        r = alloc_node_new(phGraphNode, hGraph, dependencies, numDependencies, pp->location.id,
                           nodeParams->alloc.bytesize, &addr);
        if (r == CUDA_SUCCESS)
            nodeParams->alloc.dptr = (CUdeviceptr)addr;
    } else if (nodeParams->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        if (!nodeParams->free.dptr)
            DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
        r = node_new(phGraphNode, hGraph, dependencies, numDependencies,
                     CU_GRAPH_NODE_TYPE_MEM_FREE);
        if (r == CUDA_SUCCESS)
            (*phGraphNode)->dptr = nodeParams->free.dptr;
    } else {
        r = CUDA_ERROR_NOT_SUPPORTED;
    }
    DRV_RETURN(r);
}

CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    DRV_CALL(cuGraphClone, phGraphClone, originalGraph);
    REQUIRE_INIT();
    if (!phGraphClone || !graph_ok(originalGraph))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUgraph_st *g = calloc(1, sizeof(*g));
    if (!g)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    g->magic = SIMCUDA_GRAPH_MAGIC;
    for (struct CUgraphNode_st *n = originalGraph->head; n; n = n->next) {
        CUgraphNode c = NULL;
        if (node_new(&c, g, NULL, 0, n->type) != CUDA_SUCCESS) {
            graph_free(g);
            DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        }
        c->dptr = n->dptr; /* cuda.h: a clone's alloc nodes keep the original's addresses */
        c->bytes = n->bytes;
        c->dev = n->dev;
        c->fn = n->fn;
        c->user = n->user;
    }
    *phGraphClone = g;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    DRV_CALL(cuGraphGetNodes, hGraph, nodes, numNodes);
    REQUIRE_INIT();
    if (!graph_ok(hGraph) || !numNodes)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (nodes) {
        size_t i = 0;
        for (struct CUgraphNode_st *n = hGraph->head; n && i < *numNodes; n = n->next)
            nodes[i++] = n;
        for (size_t k = i; k < *numNodes; k++)
            nodes[k] = NULL;
        *numNodes = i;
    } else {
        *numNodes = hGraph->count;
    }
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags)
{
    DRV_CALL(cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags);
    REQUIRE_INIT();
    if (!phGraphExec || !graph_ok(hGraph) || hGraph->capturing)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUgraphExec_st *x = calloc(1, sizeof(*x));
    if (!x || !(x->nodes = calloc(hGraph->count + 1, sizeof(xnode)))) {
        free(x);
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    }
    x->magic = SIMCUDA_EXEC_MAGIC;
    for (struct CUgraphNode_st *n = hGraph->head; n; n = n->next) {
        xnode *e = &x->nodes[x->n++];
        e->type = n->type;
        e->dptr = n->dptr;
        e->bytes = n->bytes;
        e->dev = n->dev;
        e->fn = n->fn;
        e->user = n->user;
    }
    /* graph memory is reserved at launch, not here (the sample graphMemoryFootprint) */
    *phGraphExec = x;
    DRV_RETURN(CUDA_SUCCESS);
}

static int exec_ok(CUgraphExec x)
{
    return x && x->magic == SIMCUDA_EXEC_MAGIC;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    DRV_CALL(cuGraphExecDestroy, hGraphExec);
    REQUIRE_INIT();
    if (!exec_ok(hGraphExec))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    hGraphExec->magic = 0;
    free(hGraphExec->nodes);
    free(hGraphExec);
    DRV_RETURN(CUDA_SUCCESS);
}

/* takes graph pool memory for an alloc node launched on s (under g_mu) */
static CUresult graph_alloc_locked(const xnode *e, struct CUstream_st *s)
{
    graph_pool *gp = &g_gpool[e->dev];
    alloc *old = table_find(e->dptr);
    if (old)
        return CUDA_ERROR_INVALID_VALUE; /* still allocated from an earlier launch */
    uint64_t rs = round_up(e->bytes, VMM_GRANULARITY);
    gchunk *c = NULL;
    for (gchunk *k = gp->chunks; k; k = k->next)
        if (!k->holder && k->size >= rs && (!k->busy || k->busy == s) && (!c || k->size < c->size))
            c = k;
    if (!c) {
        if (!fits(e->dev, rs) || !(c = calloc(1, sizeof(*c))))
            return CUDA_ERROR_OUT_OF_MEMORY;
        c->size = rs;
        c->next = gp->chunks;
        gp->chunks = c;
        graph_pool_set_reserved(e->dev, gp->reserved + rs);
    }
    alloc *a = table_add(e->dptr, e->bytes, rs, AT_GRAPH, e->dev, &g_dev[e->dev].ctx);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->holder = e->dptr;
    c->busy = s;
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                            .address = e->dptr,
                            .bytes = e->bytes,
                            .device = e->dev,
                            .ctx = &g_dev[e->dev].ctx,
                            .stream = s,
                            .is_async = 1};
    push_event(&ev);
    return CUDA_SUCCESS;
}

static CUresult graph_run(CUgraphExec x, struct CUstream_st *s, int upload_only)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < x->n && r == CUDA_SUCCESS; i++) {
        xnode *e = &x->nodes[i];
        if (upload_only && e->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            continue;
        if (e->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
            lock();
            r = graph_alloc_locked(e, s);
            if (upload_only && r == CUDA_SUCCESS) {
                /* upload reserves the memory without allocating (cuda.h, cuGraphUpload) */
                alloc *a = table_find(e->dptr);
                graph_free_locked(a, s);
                tl_nevents = 0;
            }
            unlock_and_emit();
        } else if (e->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
            lock();
            alloc *a = table_find(e->dptr);
            if (a && a->type == AT_GRAPH)
                graph_free_locked(a, s);
            else
                r = CUDA_ERROR_INVALID_VALUE;
            unlock_and_emit();
        } else if (e->type == CU_GRAPH_NODE_TYPE_HOST && e->fn) {
            e->fn(e->user);
        }
    }
    return r;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    DRV_CALL(cuGraphLaunch, hGraphExec, hStream);
    REQUIRE_INIT();
    if (!exec_ok(hGraphExec))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (s->cap)
        DRV_RETURN(cap_node(s, CU_GRAPH_NODE_TYPE_GRAPH, NULL));
    DRV_RETURN(graph_run(hGraphExec, s, 0));
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    DRV_CALL(cuGraphUpload, hGraphExec, hStream);
    REQUIRE_INIT();
    if (!exec_ok(hGraphExec))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    DRV_RETURN(graph_run(hGraphExec, s, 1));
}

CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
    DRV_CALL(cuDeviceGraphMemTrim, device);
    REQUIRE_INIT();
    if (!valid_dev(device))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    lock();
    graph_pool *gp = &g_gpool[device];
    uint64_t freed = 0;
    for (gchunk **pp = &gp->chunks; *pp;) {
        gchunk *c = *pp;
        if (!c->holder && !c->busy) {
            freed += c->size;
            *pp = c->next;
            free(c);
        } else {
            pp = &c->next;
        }
    }
    graph_pool_set_reserved(device, gp->reserved - freed);
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

/* USED: memory associated with graphs (kept after a free until a trim, as the sample
 * graphMemoryFootprint shows); RESERVED: what the graph allocator holds. Both are the pool's
 * chunks here. */
CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void *value)
{
    DRV_CALL(cuDeviceGetGraphMemAttribute, device, attr, value);
    REQUIRE_INIT();
    if (!valid_dev(device))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (!value)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    graph_pool *gp = &g_gpool[device];
    CUresult r = CUDA_SUCCESS;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = gp->reserved; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = gp->used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = gp->reserved_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void *value)
{
    DRV_CALL(cuDeviceSetGraphMemAttribute, device, attr, value);
    REQUIRE_INIT();
    if (!valid_dev(device))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (!value || *(cuuint64_t *)value != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE); /* cuda.h: only resets the highs, to 0 */
    lock();
    CUresult r = CUDA_SUCCESS;
    if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        g_gpool[device].used_high = g_gpool[device].reserved;
    else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        g_gpool[device].reserved_high = g_gpool[device].reserved;
    else
        r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

/* stream capture */
static void capture_set(const struct CUgraph_st *g, int on);

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode)
{
    DRV_CALL(cuStreamBeginCapture_v2, hStream, mode);
    REQUIRE_INIT();
    if (hStream == NULL || hStream == CU_STREAM_LEGACY)
        DRV_RETURN(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); /* cuda.h: not the legacy stream */
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (s->cap)
        DRV_RETURN(CUDA_ERROR_ILLEGAL_STATE);
    struct CUgraph_st *g = calloc(1, sizeof(*g));
    if (!g)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    g->magic = SIMCUDA_GRAPH_MAGIC;
    g->capturing = 1;
    s->cap = g;
    s->cap_last = NULL;
    s->cap_origin = 1;
    s->cap_mode = mode;
    capture_set(g, 1);
    DRV_RETURN(CUDA_SUCCESS);
}

/* streams that joined a capture (through cuStreamWaitEvent) leave it when it ends */
#define MAX_JOINED 64
static struct CUstream_st *g_joined[MAX_JOINED];
#define MAX_CAPTURES 64
static const struct CUgraph_st *g_captures[MAX_CAPTURES]; /* captures in progress */

static int capture_active(const struct CUgraph_st *g)
{
    lock();
    int on = 0;
    for (int i = 0; i < MAX_CAPTURES && !on; i++)
        on = g_captures[i] == g;
    pthread_mutex_unlock(&g_mu);
    return on;
}

static void capture_set(const struct CUgraph_st *g, int on)
{
    lock();
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (on ? !g_captures[i] : g_captures[i] == g) {
            g_captures[i] = on ? g : NULL;
            break;
        }
    pthread_mutex_unlock(&g_mu);
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    DRV_CALL(cuStreamEndCapture, hStream, phGraph);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!phGraph)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!s->cap || !s->cap_origin)
        DRV_RETURN(CUDA_ERROR_ILLEGAL_STATE);
    struct CUgraph_st *g = s->cap;
    g->capturing = 0;
    capture_set(g, 0);
    s->cap = NULL;
    s->cap_last = NULL;
    s->cap_origin = 0;
    lock();
    for (int i = 0; i < MAX_JOINED; i++)
        if (g_joined[i] && g_joined[i]->magic == SIMCUDA_STREAM_MAGIC && g_joined[i]->cap == g) {
            g_joined[i]->cap = NULL;
            g_joined[i]->cap_last = NULL;
            g_joined[i] = NULL;
        }
    pthread_mutex_unlock(&g_mu);
    *phGraph = g;
    DRV_RETURN(CUDA_SUCCESS);
}

/* a destroyed stream leaves the list of streams that joined a capture */
static void capture_forget(struct CUstream_st *s)
{
    lock();
    for (int i = 0; i < MAX_JOINED; i++)
        if (g_joined[i] == s)
            g_joined[i] = NULL;
    pthread_mutex_unlock(&g_mu);
}

static void capture_joined(struct CUstream_st *s)
{
    lock();
    for (int i = 0; i < MAX_JOINED; i++)
        if (!g_joined[i] || g_joined[i]->magic != SIMCUDA_STREAM_MAGIC || !g_joined[i]->cap) {
            g_joined[i] = s;
            break;
        }
    pthread_mutex_unlock(&g_mu);
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    DRV_CALL(cuStreamIsCapturing, hStream, captureStatus);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!captureStatus)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *captureStatus = s->cap ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out)
{
    DRV_CALL(cuStreamGetCaptureInfo_v3, hStream, captureStatus_out, id_out, graph_out,
             dependencies_out, edgeData_out, numDependencies_out);
    REQUIRE_INIT();
    struct CUstream_st *s = stream_get(hStream);
    if (!s)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!captureStatus_out)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *captureStatus_out = s->cap ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    if (id_out)
        *id_out = (cuuint64_t)(uintptr_t)s->cap;
    if (graph_out)
        *graph_out = s->cap;
    if (dependencies_out)
        *dependencies_out = s->cap_last ? &s->cap_last : NULL;
    if (edgeData_out)
        *edgeData_out = NULL;
    if (numDependencies_out)
        *numDependencies_out = s->cap_last ? 1 : 0;
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* created contexts, flags, limits, peers */

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                             unsigned int flags, CUdevice dev)
{
    DRV_CALL(cuCtxCreate_v4, pctx, ctxCreateParams, flags, dev);
    REQUIRE_INIT();
    if (!pctx ||
        (ctxCreateParams && (ctxCreateParams->execAffinityParams || ctxCreateParams->cigParams)))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (tl_ctx_depth >= SIM_CTX_STACK)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    struct CUctx_st *c = calloc(1, sizeof(*c));
    if (!c)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    c->magic = SIMCUDA_CTX_MAGIC;
    c->device = dev;
    c->active = 1;
    c->refcnt = 1;
    c->flags = flags;
    c->null_stream.magic = SIMCUDA_STREAM_MAGIC;
    c->null_stream.ctx = c;
    c->null_stream.id = SIMCUDA_DEFAULT_STREAM_ID;
    lock();
    c->uid = g_next_ctx_uid++;
    pthread_mutex_unlock(&g_mu);
    announce_ctx(c);
    /* cuda.h: the new context is pushed onto the calling thread's stack */
    tl_ctx_stack[tl_ctx_depth++] = tl_ctx;
    tl_ctx = c;
    *pctx = c;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
    DRV_CALL(cuCtxDestroy_v2, ctx);
    REQUIRE_INIT();
    if (!ctx_ok(ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (ctx->primary)
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT); /* primary contexts: cuDevicePrimaryCtxRelease */
    simcuda_resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, ctx, NULL, NULL);
    lock();
    ctx_destroy_locked(ctx);
    pthread_mutex_unlock(&g_mu);
    if (tl_ctx == ctx)
        tl_ctx = tl_ctx_depth > 0 ? tl_ctx_stack[--tl_ctx_depth] : NULL;
    /* the handle stays allocated (magic kept, inactive) so that later uses are refused */
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    DRV_CALL(cuDevicePrimaryCtxSetFlags_v2, dev, flags);
    REQUIRE_INIT();
    if (!valid_dev(dev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (flags &
        ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
                    CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    g_dev[dev].ctx.flags = flags;
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    DRV_CALL(cuCtxGetFlags, flags);
    REQUIRE_INIT();
    if (!flags)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    *flags = tl_ctx->flags;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    DRV_CALL(cuCtxGetId, ctx, ctxId);
    REQUIRE_INIT();
    if (!ctx)
        ctx = tl_ctx;
    if (!ctx_ok(ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (!ctxId)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *ctxId = ctx->uid;
    DRV_RETURN(CUDA_SUCCESS);
}

static size_t g_limits[CU_LIMIT_MAX];
static int g_limits_set;

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
    DRV_CALL(cuCtxSetLimit, limit, value);
    REQUIRE_INIT();
    if ((int)limit < 0 || limit >= CU_LIMIT_MAX)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    lock();
    g_limits_set |= 1 << limit;
    /* cuda.h: the persisting L2 size is capped by the device's maximum */
    if (limit == CU_LIMIT_PERSISTING_L2_CACHE_SIZE) {
        size_t mx = (size_t)simcuda_device_attribute(
            CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, tl_ctx->device);
        value = value > mx ? mx : value;
    }
    g_limits[limit] = value;
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

static size_t limit_default(CUlimit l)
{
    switch (l) {
    case CU_LIMIT_STACK_SIZE: return 1024;
    case CU_LIMIT_PRINTF_FIFO_SIZE: return 1048576;
    case CU_LIMIT_MALLOC_HEAP_SIZE: return 8388608;
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH: return 2;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: return 2048;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: return 64;
    default: return 0;
    }
}

CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    DRV_CALL(cuCtxGetLimit, pvalue, limit);
    REQUIRE_INIT();
    if (!pvalue || (int)limit < 0 || limit >= CU_LIMIT_MAX)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    lock();
    *pvalue = (g_limits_set >> limit) & 1 ? g_limits[limit] : limit_default(limit);
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxResetPersistingL2Cache(void)
{
    DRV_CALL0(cuCtxResetPersistingL2Cache);
    REQUIRE_INIT();
    DRV_RETURN(ctx_ok(tl_ctx) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT);
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    DRV_CALL(cuDeviceCanAccessPeer, canAccessPeer, dev, peerDev);
    REQUIRE_INIT();
    if (!canAccessPeer)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(dev) || !valid_dev(peerDev))
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    *canAccessPeer = dev != peerDev; /* NVLink-connected devices of one board */
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib,
                                         CUdevice srcDevice, CUdevice dstDevice)
{
    DRV_CALL(cuDeviceGetP2PAttribute, value, attrib, srcDevice, dstDevice);
    REQUIRE_INIT();
    if (!value)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!valid_dev(srcDevice) || !valid_dev(dstDevice) || srcDevice == dstDevice)
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    *value = attrib == CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK ? 0 : 1;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    DRV_CALL(cuCtxEnablePeerAccess, peerContext, Flags);
    REQUIRE_INIT();
    if (Flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx) || !ctx_ok(peerContext))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (peerContext->device == tl_ctx->device)
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    uint32_t bit = 1u << peerContext->device;
    if (tl_ctx->peers & bit)
        DRV_RETURN(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    tl_ctx->peers |= bit;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext)
{
    DRV_CALL(cuCtxDisablePeerAccess, peerContext);
    REQUIRE_INIT();
    if (!ctx_ok(tl_ctx) || !ctx_ok(peerContext))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    uint32_t bit = 1u << peerContext->device;
    if (!(tl_ctx->peers & bit))
        DRV_RETURN(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    tl_ctx->peers &= ~bit;
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* modules loaded through the driver API (cuModuleLoad*): kernels by name, no code */

#define SIMCUDA_MODULE_MAGIC 0x4c444f4du /* "MODL" */
#define MOD_FUNCS 64
struct CUmod_st {
    uint32_t magic;
    int module; /* index in the module registry (moduleId = index + 1) */
    CUcontext ctx;
    int nfuncs;
    struct CUfunc_st funcs[MOD_FUNCS];
    char *names[MOD_FUNCS];
};

static CUresult module_new(CUmodule *out, const void *image)
{
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx_ok(tl_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUmod_st *m = calloc(1, sizeof(*m));
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->magic = SIMCUDA_MODULE_MAGIC;
    m->ctx = tl_ctx;
    m->module = simcuda_module_register();
    CUpti_ModuleResourceData md = {.moduleId = (uint32_t)m->module + 1};
    simcuda_resource(CUPTI_CBID_RESOURCE_MODULE_LOADED, tl_ctx, NULL, &md);
    *out = m;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoad(CUmodule *pmodule, const char *fname)
{
    DRV_CALL(cuModuleLoad, pmodule, fname);
    REQUIRE_INIT();
    if (!fname)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (access(fname, R_OK) != 0)
        DRV_RETURN(CUDA_ERROR_FILE_NOT_FOUND);
    DRV_RETURN(module_new(pmodule, fname));
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *pmodule, const void *image)
{
    DRV_CALL(cuModuleLoadData, pmodule, image);
    REQUIRE_INIT();
    DRV_RETURN(module_new(pmodule, image));
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *pmodule, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues)
{
    DRV_CALL(cuModuleLoadDataEx, pmodule, image, numOptions, options, optionValues);
    REQUIRE_INIT();
    if (numOptions && (!options || !optionValues))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    /* nothing is compiled: the info and error logs are empty strings, their "filled" sizes 0 and
     * the wall time 0 (cuda.h, CUjit_option: IN/OUT options) */
    size_t info_size = 0, err_size = 0;
    for (unsigned i = 0; i < numOptions; i++) {
        if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
            info_size = (size_t)(uintptr_t)optionValues[i];
        else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            err_size = (size_t)(uintptr_t)optionValues[i];
    }
    for (unsigned i = 0; i < numOptions; i++) {
        switch (options[i]) {
        case CU_JIT_INFO_LOG_BUFFER:
            if (optionValues[i] && info_size)
                *(char *)optionValues[i] = 0;
            break;
        case CU_JIT_ERROR_LOG_BUFFER:
            if (optionValues[i] && err_size)
                *(char *)optionValues[i] = 0;
            break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: optionValues[i] = NULL; break;
        case CU_JIT_WALL_TIME: {
            float zero = 0;
            memcpy(&optionValues[i], &zero, sizeof(zero));
            break;
        }
        default: break;
        }
    }
    DRV_RETURN(module_new(pmodule, image));
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    DRV_CALL(cuModuleGetFunction, hfunc, hmod, name);
    REQUIRE_INIT();
    if (!hfunc || !name)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!hmod || hmod->magic != SIMCUDA_MODULE_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    for (int i = 0; i < hmod->nfuncs; i++)
        if (strcmp(hmod->names[i], name) == 0) {
            *hfunc = &hmod->funcs[i];
            DRV_RETURN(CUDA_SUCCESS);
        }
    if (hmod->nfuncs >= MOD_FUNCS)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    char *nm = strdup(name);
    if (!nm)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    int i = hmod->nfuncs++;
    hmod->names[i] = nm;
    hmod->funcs[i].magic = SIMCUDA_FUNC_MAGIC;
    hmod->funcs[i].name = nm;
    *hfunc = &hmod->funcs[i];
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    DRV_CALL(cuModuleUnload, hmod);
    REQUIRE_INIT();
    if (!hmod || hmod->magic != SIMCUDA_MODULE_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    CUpti_ModuleResourceData md = {.moduleId = (uint32_t)hmod->module + 1};
    simcuda_resource(CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, hmod->ctx, NULL, &md);
    lock();
    if (hmod->module >= 0 && hmod->module < g_nmodules)
        g_modules[hmod->module].used = 0;
    pthread_mutex_unlock(&g_mu);
    hmod->magic = 0;
    for (int i = 0; i < hmod->nfuncs; i++) {
        hmod->funcs[i].magic = 0;
        free(hmod->names[i]);
    }
    free(hmod);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    DRV_CALL(cuFuncGetAttribute, pi, attrib, hfunc);
    REQUIRE_INIT();
    if (!pi)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!hfunc || hfunc->magic != SIMCUDA_FUNC_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = 49152; break;
    default: *pi = 0; break;
    }
    DRV_RETURN(CUDA_SUCCESS);
}

/* 2048 threads and 32 blocks per multiprocessor (compute capability 9.0) */
static int occupancy(int blockSize)
{
    int n = 2048 / blockSize;
    return n > 32 ? 32 : n;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                             int blockSize, size_t dynamicSMemSize)
{
    DRV_CALL(cuOccupancyMaxActiveBlocksPerMultiprocessor, numBlocks, func, blockSize,
             dynamicSMemSize);
    REQUIRE_INIT();
    if (!numBlocks || blockSize <= 0 || blockSize > 1024)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!func || func->magic != SIMCUDA_FUNC_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    *numBlocks = occupancy(blockSize);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize, unsigned int flags)
{
    DRV_CALL(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, numBlocks, func, blockSize,
             dynamicSMemSize, flags);
    REQUIRE_INIT();
    if (!numBlocks || blockSize <= 0 || blockSize > 1024 || flags > 1)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!func || func->magic != SIMCUDA_FUNC_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    *numBlocks = occupancy(blockSize);
    DRV_RETURN(CUDA_SUCCESS);
}

/* texture objects: handles only (sampling happens in kernels, which do not run) */
static atomic_ullong g_next_tex = 1;

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                   const CUDA_TEXTURE_DESC *pTexDesc,
                                   const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    DRV_CALL(cuTexObjectCreate, pTexObject, pResDesc, pTexDesc, pResViewDesc);
    REQUIRE_INIT();
    if (!pTexObject || !pResDesc || !pTexDesc)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    *pTexObject = (CUtexObject)atomic_fetch_add(&g_next_tex, 1);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject)
{
    DRV_CALL(cuTexObjectDestroy, texObject);
    REQUIRE_INIT();
    DRV_RETURN(texObject && texObject < atomic_load(&g_next_tex) ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_VALUE);
}

CUresult CUDAAPI cuProfilerStart(void)
{
    DRV_CALL0(cuProfilerStart);
    REQUIRE_INIT();
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuProfilerStop(void)
{
    DRV_CALL0(cuProfilerStop);
    REQUIRE_INIT();
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* errors (no callbacks: these do not go through the driver's API layer) */

#define ERR_CASES(X)                                                                               \
    X(CUDA_SUCCESS, "no error")                                                                    \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                                \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                   \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                          \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                            \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                  \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                         \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                        \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                        \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                         \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,                                                   \
      "part or all of the requested memory range is already mapped")                               \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,                                                       \
      "pointer does not correspond to a registered memory region")

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
#define X(e, s)                                                                                    \
    case e: *pStr = s; return CUDA_SUCCESS;
    switch (error) {
        ERR_CASES(X) default : *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
#undef X
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
#define X(e, s)                                                                                    \
    case e: *pStr = #e; return CUDA_SUCCESS;
    switch (error) {
        ERR_CASES(X) default : *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
#undef X
}
