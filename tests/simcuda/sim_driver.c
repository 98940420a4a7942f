/* simcuda driver: libcuda.so.1 for tests. Owns the simulated devices, contexts, streams and the
 * memory model, loads the injection library in cuInit as the real driver does, and reports every
 * driver API call to the CUPTI hooks that libcupti.so.13 installs. See README.md. */
#include "sim_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
};

struct CUarray_st {
    uint32_t magic;
    int dev;
    CUcontext ctx;
    uint64_t addr, bytes, rsize;
};

enum alloc_type { AT_DEVICE, AT_PINNED, AT_MANAGED, AT_POOL, AT_STATIC, AT_HOSTREG };

typedef struct alloc {
    uint64_t addr, size, rsize;
    enum alloc_type type;
    int dev;
    CUcontext ctx;
    struct CUmemPoolHandle_st *pool;
    int module, var;
    const char *name;
    struct alloc *next;
} alloc;

typedef struct vmm_phys {
    CUmemGenericAllocationHandle handle;
    int dev;
    uint64_t size;
    int released;
    int maps;
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
    simcuda_ptds_apply(call);
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
static void ctx_destroy_locked(int d);

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

static struct CUmemPoolHandle_st *pool_new_locked(int d, int is_default)
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
    p->addrs.base = p->addrs.bump =
        DEV_BASE(d) + REG_POOLS_FIRST * SUBREGION + (uint64_t)p->idx * POOL_WINDOW;
    p->addrs.limit = p->addrs.base + POOL_WINDOW;
    p->reuse_follow = p->reuse_opportunistic = p->reuse_internal = 1;
    dv->pools[dv->npools++] = p;
    push_pool_event(p, CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0);
    return p;
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

static int pool_valid(struct CUmemPoolHandle_st *p)
{
    return p && p->magic == SIMCUDA_POOL_MAGIC;
}

static void pool_set_reserved(struct CUmemPoolHandle_st *p, uint64_t nr)
{
    sim_device *dv = &g_dev[p->dev];
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

static CUresult pool_alloc_locked(struct CUmemPoolHandle_st *p, uint64_t size, CUstream stream,
                                  uint64_t *out)
{
    uint64_t rs = round_up(size ? size : 1, DEV_ALIGN);
    if (p->used + rs > p->reserved) {
        uint64_t grow = round_up(p->used + rs - p->reserved, POOL_GRANULARITY);
        if (!fits(p->dev, grow))
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
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
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
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
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

static void sync_locked(int d)
{
    sim_device *dv = &g_dev[d];
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

static int device_attribute(CUdevice_attribute a, CUdevice dev)
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
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return dev + 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 * 1024 * 1024;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
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
    *pi = device_attribute(attrib, dev);
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

static void ctx_destroy_locked(int d)
{
    sim_device *dv = &g_dev[d];
    for (size_t b = 0; b < NBUCKETS; b++) {
        alloc *a = g_buckets[b];
        while (a) {
            alloc *next = a->next;
            if (a->dev == d &&
                (a->type == AT_DEVICE || a->type == AT_POOL || a->type == AT_STATIC)) {
                if (a->type == AT_POOL) {
                    a->pool->used -= a->rsize;
                    region_free(&a->pool->addrs, a->addr, a->rsize);
                } else {
                    dv->reserved -= a->rsize;
                    region_free(&dv->regions[a->type == AT_STATIC ? REG_STATIC : REG_DEVICE],
                                a->addr, a->rsize);
                }
                table_remove(a);
            }
            a = next;
        }
    }
    for (int i = 0; i < dv->npools; i++)
        if (dv->pools[i])
            pool_set_reserved(dv->pools[i], 0);
    for (int m = 0; m < g_nmodules; m++)
        g_modules[m].loaded[d] = 0;
    dv->ctx.active = 0;
    dv->ctx.refcnt = 0;
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
    ctx_destroy_locked(d);
    pthread_mutex_unlock(&g_mu);
    if (tl_ctx == &g_dev[d].ctx)
        tl_ctx = &g_dev[d].ctx; /* primary ctx handle stays valid */
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
    pthread_mutex_unlock(&g_mu);
    *flags = 0;
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
    if (!table_add(addr, size, rs, AT_DEVICE, d, &dv->ctx)) {
        region_free(&dv->regions[REG_DEVICE], addr, rs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    dv->reserved += rs;
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                            .address = addr,
                            .bytes = size,
                            .device = d,
                            .ctx = &dv->ctx};
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

static CUresult host_alloc(void **pp, size_t bytesize)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytesize ? bytesize : 1))
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, bytesize);
    int d = ctx_ok(tl_ctx) ? tl_ctx->device : 0;
    lock();
    if (!table_add((uint64_t)(uintptr_t)p, bytesize, bytesize, AT_PINNED, d, tl_ctx)) {
        pthread_mutex_unlock(&g_mu);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
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
    DRV_RETURN(host_alloc(pp, bytesize));
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    DRV_CALL(cuMemHostAlloc, pp, bytesize, Flags);
    REQUIRE_INIT();
    if (!pp || (Flags & ~0xfu))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    DRV_RETURN(host_alloc(pp, bytesize));
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

CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    DRV_CALL(cuMemHostRegister_v2, p, bytesize, Flags);
    REQUIRE_INIT();
    if (!p || bytesize == 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    lock();
    CUresult r = CUDA_SUCCESS;
    if (table_find((uint64_t)(uintptr_t)p))
        r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (!table_add((uint64_t)(uintptr_t)p, bytesize, bytesize, AT_HOSTREG, tl_ctx->device,
                        tl_ctx))
        r = CUDA_ERROR_OUT_OF_MEMORY;
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

/* ------------------------------------------------------------------------------------------ */
/* arrays */

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

static CUresult array_create(CUarray *ph, uint64_t w, uint64_t h, uint64_t dpt, CUarray_format f,
                             unsigned nch)
{
    if (!ph || w == 0 || (nch != 1 && nch != 2 && nch != 4))
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx_ok(tl_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    uint64_t bytes = w * (h ? h : 1) * (dpt ? dpt : 1) * nch * format_bytes(f);
    uint64_t rs = round_up(bytes, 2 * MIB), addr;
    int d = tl_ctx->device;
    struct CUarray_st *arr = calloc(1, sizeof(*arr));
    if (!arr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    lock();
    if (!fits(d, rs) || region_alloc(&g_dev[d].regions[REG_ARRAY], rs, &addr)) {
        pthread_mutex_unlock(&g_mu);
        free(arr);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g_dev[d].reserved += rs;
    arr->magic = SIMCUDA_ARRAY_MAGIC;
    arr->dev = d;
    arr->ctx = tl_ctx;
    arr->addr = addr;
    arr->bytes = bytes;
    arr->rsize = rs;
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
                            .address = addr,
                            .bytes = bytes,
                            .device = d,
                            .ctx = tl_ctx};
    push_event(&ev);
    unlock_and_emit();
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
    DRV_RETURN(array_create(pHandle, pAllocateArray->Width, pAllocateArray->Height,
                            pAllocateArray->Depth, pAllocateArray->Format,
                            pAllocateArray->NumChannels));
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    DRV_CALL(cuArrayDestroy, hArray);
    REQUIRE_INIT();
    if (!hArray || hArray->magic != SIMCUDA_ARRAY_MAGIC)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    lock();
    int d = hArray->dev;
    if (g_dev[d].ctx.active) {
        g_dev[d].reserved -= hArray->rsize;
        region_free(&g_dev[d].regions[REG_ARRAY], hArray->addr, hArray->rsize);
    }
    simcuda_mem_event ev = {.op = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                            .kind = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
                            .address = hArray->addr,
                            .bytes = hArray->bytes,
                            .device = d,
                            .ctx = hArray->ctx};
    push_event(&ev);
    hArray->magic = 0;
    free(hArray);
    unlock_and_emit();
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* streams */

static int stream_ok(CUstream s)
{
    return s == NULL || s->magic == SIMCUDA_STREAM_MAGIC;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    DRV_CALL(cuStreamCreate, phStream, Flags);
    REQUIRE_INIT();
    if (!phStream || (Flags & ~1u))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (!s)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    s->magic = SIMCUDA_STREAM_MAGIC;
    s->ctx = tl_ctx;
    s->flags = Flags;
    lock();
    s->id = g_next_stream_id++;
    pthread_mutex_unlock(&g_mu);
    simcuda_resource(CUPTI_CBID_RESOURCE_STREAM_CREATED, tl_ctx, s, NULL);
    *phStream = s;
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    DRV_CALL(cuStreamDestroy_v2, hStream);
    REQUIRE_INIT();
    if (!hStream || hStream->magic != SIMCUDA_STREAM_MAGIC || hStream == &hStream->ctx->null_stream)
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    simcuda_resource(CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, hStream->ctx, hStream, NULL);
    hStream->magic = 0;
    free(hStream);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    DRV_CALL(cuStreamSynchronize, hStream);
    REQUIRE_INIT();
    if (!stream_ok(hStream))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    CUcontext c = hStream ? hStream->ctx : tl_ctx;
    if (!ctx_ok(c))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    simcuda_sync_point(c);
    DRV_RETURN(CUDA_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* stream-ordered allocation */

static CUresult async_alloc(CUdeviceptr *dptr, size_t bytesize, struct CUmemPoolHandle_st *p,
                            CUstream s)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_ok(s))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!ctx_ok(tl_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    CUstream eff = s ? s : &tl_ctx->null_stream;
    uint64_t addr = 0;
    lock();
    if (!p)
        p = g_dev[tl_ctx->device].current_pool ? g_dev[tl_ctx->device].current_pool
                                               : default_pool_locked(tl_ctx->device);
    CUresult r =
        pool_valid(p) ? pool_alloc_locked(p, bytesize, eff, &addr) : CUDA_ERROR_INVALID_VALUE;
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
    if (!stream_ok(hStream))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    CUstream eff = hStream ? hStream : &tl_ctx->null_stream;
    lock();
    alloc *a = table_find(dptr);
    CUresult r = CUDA_SUCCESS;
    if (!a || (a->type != AT_POOL && a->type != AT_DEVICE)) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (a->type == AT_POOL) {
        pool_free_locked(a, eff, 1);
    } else {
        r = free_any_locked(dptr, 0); /* cudaFreeAsync of cudaMalloc memory is allowed */
    }
    unlock_and_emit();
    DRV_RETURN(r);
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    DRV_CALL(cuMemPoolCreate, pool, poolProps);
    REQUIRE_INIT();
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        DRV_RETURN(CUDA_ERROR_NOT_SUPPORTED);
    lock();
    if (!valid_dev(poolProps->location.id)) {
        pthread_mutex_unlock(&g_mu);
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    }
    struct CUmemPoolHandle_st *p = pool_new_locked(poolProps->location.id, 0);
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
    push_pool_event(pool, CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, 0);
    if (pool->used == 0) {
        for (int i = 0; i < dv->npools; i++)
            if (dv->pools[i] == pool)
                dv->pools[i] = NULL;
        if (dv->current_pool == pool)
            dv->current_pool = dv->default_pool;
        pool->magic = 0;
        while (pool->addrs.free) {
            freeblk *f = pool->addrs.free;
            pool->addrs.free = f->next;
            free(f);
        }
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

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    DRV_CALL(cuMemCreate, handle, size, prop, flags);
    REQUIRE_INIT();
    if (!handle || !prop || size == 0 || size % VMM_GRANULARITY || flags != 0)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    lock();
    int d = prop->location.id;
    CUresult r = CUDA_SUCCESS;
    if (!valid_dev(d)) {
        r = CUDA_ERROR_INVALID_DEVICE;
    } else if (!fits(d, size)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        vmm_phys *ph = calloc(1, sizeof(*ph));
        if (!ph) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            ph->handle = g_next_handle++;
            ph->dev = d;
            ph->size = size;
            ph->next = g_phys;
            g_phys = ph;
            g_dev[d].reserved += size;
            *handle = ph->handle;
        }
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
}

static vmm_phys *phys_find(CUmemGenericAllocationHandle h)
{
    for (vmm_phys *p = g_phys; p; p = p->next)
        if (p->handle == h && !p->released)
            return p;
    return NULL;
}

static void phys_maybe_free(vmm_phys *ph)
{
    if (!ph->released || ph->maps)
        return;
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
        ph->released = 1; /* physical memory goes back once the last mapping is unmapped */
        phys_maybe_free(ph);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mu);
    DRV_RETURN(r);
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

/* ------------------------------------------------------------------------------------------ */
/* copies, sets and launches: recorded, not executed */

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

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    DRV_CALL(cuMemcpy, dst, src, ByteCount);
    REQUIRE_INIT();
    copy_bytes(dst, src, ByteCount);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    DRV_CALL(cuMemcpyAsync, dst, src, ByteCount, hStream);
    REQUIRE_INIT();
    if (!stream_ok(hStream))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    copy_bytes(dst, src, ByteCount);
    DRV_RETURN(CUDA_SUCCESS);
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

static void set_bytes(uint64_t dst, int v, size_t n)
{
    if (dst && !simcuda_is_device_address(dst))
        memset((void *)(uintptr_t)dst, v, n);
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    DRV_CALL(cuMemsetD8_v2, dstDevice, uc, N);
    REQUIRE_INIT();
    set_bytes(dstDevice, uc, N);
    DRV_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream)
{
    DRV_CALL(cuMemsetD8Async, dstDevice, uc, N, hStream);
    REQUIRE_INIT();
    if (!stream_ok(hStream))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    set_bytes(dstDevice, uc, N);
    DRV_RETURN(CUDA_SUCCESS);
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
    if (!stream_ok(hStream))
        DRV_RETURN(CUDA_ERROR_INVALID_HANDLE);
    if (!ctx_ok(tl_ctx))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ ||
        (uint64_t)blockDimX * blockDimY * blockDimZ > 1024)
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
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
