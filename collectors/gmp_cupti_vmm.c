/* gmp_cupti_vmm: the CUPTI collector's bookkeeping of memory whose free is not one call
 * (gmp_cupti_impl.h): VMM handles, which live until their last reference and last mapping go
 * (cuMemMap and cuMemMapArrayAsync), and memory this process did not allocate (IPC, pool
 * imports, external memory), whose allocation and free are not recorded. */
#include "gmp_cupti_impl.h"

#include "gmp_alert.h"
#include "gmp_handles.h"
#include "gmp_hash.h"
#include "gmp_nvtx.h"
#include "gmp_stack.h"

/* ---- VMM handles: physical memory lives until its last reference and last mapping go ----
 * cuda.h (cuMemRelease): "the memory allocation will be freed when all outstanding mappings to
 * the memory are unmapped and when all outstanding references to the handle (including its
 * shareable counterparts) are also released"; cuMemRetainAllocationHandle: "the handle ... must be
 * released with cuMemRelease" (one more reference). So the agent counts, per handle, references
 * (cuMemCreate, cuMemRetainAllocationHandle, cuMemImportFromShareableHandle +1; cuMemRelease -1)
 * and live mappings (cuMemMap +1, cuMemUnmap -1), and writes the VMM_PHYSICAL FREE when both reach
 * zero, at the call that makes them so: a cuMemRelease or a cuMemUnmap. The replay then sees the
 * true free time and needs no VMM rule of its own. NCCL's free path (retain, release, unmap,
 * release) gives one free, at the last release. Imported handles (memory another process owns)
 * are counted the same way but never recorded: they are not this process's memory. A release of a
 * handle the agent never saw (created before it subscribed) is recorded as before, a FREE by
 * handle, so the trace says the program released something unknown. Like other frees, the FREE
 * is written at the call's entry; a release that then fails is undone (a FAILED record follows,
 * the counts are restored). A failed cuMemUnmap is not undone (its mappings are taken as gone). */
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static gmp_handles vmm_handles; /* handle -> size, device, refs, maps, flags */
static gmp_handles vmm_maps;    /* mapped address -> handle, size */
static _Thread_local struct {
    uint64_t handle, size;
    int32_t device;
    uint32_t flags;
    int state; /* 0 none, 1 a reference dropped at entry, 2 the handle freed at entry */
} tl_rel;

static void vmm_free_record(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd,
                            uint64_t handle, uint64_t size, int dev, int failed, int result)
{
    gmp_rec r = {.type = GMP_REC_FREE};
    r.u.mem.kind = GMP_MEM_VMM_PHYSICAL;
    r.u.mem.api = api_sid(a);
    r.u.mem.correlation = cd->correlationId;
    r.u.mem.handle = handle;
    r.u.mem.size = size;
    r.u.mem.device = dev;
    if (failed) {
        r.u.mem.flags = GMP_MEMF_FAILED;
        r.u.mem.result = result;
        r.u.mem.stack = gmp_stack_current();
    } else {
        r.u.mem.range = gmp_nvtx_current_range(gmp_cupti_sink->w);
    }
    emit(t, &r);
    if (!failed && gmp_alert_on)
        gmp_alert_free(&r.u.mem);
}

void gmp_cupti_vmm_created(uint64_t handle, uint64_t size, int dev, uint32_t flags)
{
    pthread_mutex_lock(&vmm_lock);
    gmp_handle_ent *e = gmp_handles_put(&vmm_handles, handle);
    if (e) {
        if (e->refs == 0 && e->maps == 0) { /* a new handle (or a reused value) */
            e->size = size;
            e->device = dev;
            e->flags = flags;
        }
        e->refs++;
    }
    pthread_mutex_unlock(&vmm_lock);
}

void gmp_cupti_vmm_retained(uint64_t handle)
{
    pthread_mutex_lock(&vmm_lock);
    gmp_handle_ent *e = gmp_handles_get(&vmm_handles, handle);
    if (e)
        e->refs++;
    pthread_mutex_unlock(&vmm_lock);
}

void gmp_cupti_vmm_mapped(uint64_t addr, uint64_t size, uint64_t handle)
{
    pthread_mutex_lock(&vmm_lock);
    gmp_handle_ent *h = gmp_handles_get(&vmm_handles, handle);
    if (h) {
        h->maps++;
        gmp_handle_ent *m = gmp_handles_put(&vmm_maps, addr);
        if (m) {
            m->handle = handle;
            m->size = size;
        } else {
            h->maps--; /* out of memory: the mapping is not counted */
        }
    }
    pthread_mutex_unlock(&vmm_lock);
}

/* cuMemRelease: at entry drop a reference (the FREE when nothing holds the memory any more); at a
 * failed exit undo it. Returns 1 when handled (the caller records nothing more). */
int gmp_cupti_vmm_release(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd, int enter,
                          int result)
{
    uint64_t handle = (uint64_t)((const cuMemRelease_params *)cd->functionParams)->handle;
    if (enter) {
        tl_rel.state = 0;
        pthread_mutex_lock(&vmm_lock);
        gmp_handle_ent *e = gmp_handles_get(&vmm_handles, handle);
        if (!e) {
            pthread_mutex_unlock(&vmm_lock);
            return 0; /* unknown: recorded as a FREE by handle, as before */
        }
        tl_rel.handle = handle;
        tl_rel.size = e->size;
        tl_rel.device = e->device;
        tl_rel.flags = e->flags;
        tl_rel.state = 1;
        if (e->refs)
            e->refs--;
        int gone = e->refs == 0 && e->maps == 0;
        if (gone) {
            gmp_handles_del(&vmm_handles, handle);
            tl_rel.state = 2;
        }
        pthread_mutex_unlock(&vmm_lock);
        if (gone && !(tl_rel.flags & GMP_HANDLE_IMPORTED))
            vmm_free_record(t, a, cd, handle, tl_rel.size, tl_rel.device, 0, 0);
        return 1;
    }
    /* exit of a failed release */
    if (!tl_rel.state || tl_rel.handle != handle)
        return 0;
    int was = tl_rel.state;
    tl_rel.state = 0;
    pthread_mutex_lock(&vmm_lock);
    gmp_handle_ent *e = gmp_handles_put(&vmm_handles, handle);
    if (e) {
        if (was == 2) {
            e->size = tl_rel.size;
            e->device = tl_rel.device;
            e->flags = tl_rel.flags;
        }
        e->refs++;
    }
    pthread_mutex_unlock(&vmm_lock);
    if (was == 2 && !(tl_rel.flags & GMP_HANDLE_IMPORTED))
        vmm_free_record(t, a, cd, handle, tl_rel.size, tl_rel.device, 1, result);
    return 1;
}

/* cuMemUnmap at entry: every mapping in [ptr, ptr + size) loses its handle's mapping; a handle
 * with no reference and no mapping left is freed here. */
void gmp_cupti_vmm_unmap(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd)
{
    const cuMemUnmap_params *q = cd->functionParams;
    uint64_t addr = (uint64_t)q->ptr, end = addr + (uint64_t)q->size;
    if (end < addr)
        return;
    struct {
        uint64_t handle, size;
        int32_t dev;
    } freed[16];
    for (int more = 1; more && addr < end;) {
        size_t nf = 0;
        more = 0;
        pthread_mutex_lock(&vmm_lock);
        while (addr < end) {
            gmp_handle_ent *m = gmp_handles_get(&vmm_maps, addr);
            if (!m || !m->size)
                break;
            uint64_t handle = m->handle, msize = m->size;
            gmp_handles_del(&vmm_maps, addr);
            addr += msize;
            gmp_handle_ent *h = gmp_handles_get(&vmm_handles, handle);
            if (h && h->maps)
                h->maps--;
            if (h && h->maps == 0 && h->refs == 0) {
                int imported = (h->flags & GMP_HANDLE_IMPORTED) != 0;
                uint64_t hsize = h->size;
                int32_t hdev = h->device;
                gmp_handles_del(&vmm_handles, handle);
                if (!imported) {
                    freed[nf].handle = handle;
                    freed[nf].size = hsize;
                    freed[nf].dev = hdev;
                    if (++nf == sizeof freed / sizeof freed[0]) {
                        more = 1;
                        break;
                    }
                }
            }
        }
        pthread_mutex_unlock(&vmm_lock);
        for (size_t i = 0; i < nf; i++)
            vmm_free_record(t, a, cd, freed[i].handle, freed[i].size, freed[i].dev, 0, 0);
    }
}

/* ---- memory this process did not allocate (docs/collectors.md, point 7) ----
 * IPC (cudaIpcOpenMemHandle: closed by cudaIpcCloseMemHandle), pool pointer imports
 * (cuMemPoolImportPointer: "freed with cuMemFree or cuMemFreeAsync"), external memory
 * (cuExternalMemoryGetMappedBuffer: "must be freed using cuMemFree"; mapped mipmapped arrays: with
 * cuMipmappedArrayDestroy). Their memory belongs to another process or API: the agent records no
 * allocation, remembers the address, and records nothing when it is freed (no unmatched free). */
static gmp_handles imported; /* under gmp_cupti_loc_lock */
static atomic_int n_imported;

void gmp_cupti_imported_add(uint64_t addr)
{
    if (!addr)
        return;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    if (gmp_handles_put(&imported, addr))
        atomic_store(&n_imported, (int)imported.n);
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
}

/* 1 when addr was imported (and is now forgotten). Free of cost while nothing is imported. */
int gmp_cupti_imported_take(uint64_t addr)
{
    if (!addr || !atomic_load_explicit(&n_imported, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&gmp_cupti_loc_lock);
    int was = gmp_handles_get(&imported, addr) != NULL;
    if (was) {
        gmp_handles_del(&imported, addr);
        atomic_store(&n_imported, (int)imported.n);
    }
    pthread_mutex_unlock(&gmp_cupti_loc_lock);
    return was;
}

/* The address an import call returned (at its exit). */
uint64_t gmp_cupti_import_address(const api_desc *a, const void *p)
{
    if (a->dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        switch (a->cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaIpcOpenMemHandle_v4010: {
            const cudaIpcOpenMemHandle_v4010_params *q = p;
            return q->devPtr ? (uint64_t)(uintptr_t)*q->devPtr : 0;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaMemPoolImportPointer_v11020: {
            const cudaMemPoolImportPointer_v11020_params *q = p;
            return q->ptr ? (uint64_t)(uintptr_t)*q->ptr : 0;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaExternalMemoryGetMappedBuffer_v10000: {
            const cudaExternalMemoryGetMappedBuffer_v10000_params *q = p;
            return q->devPtr ? (uint64_t)(uintptr_t)*q->devPtr : 0;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaExternalMemoryGetMappedMipmappedArray_v10000: {
            const cudaExternalMemoryGetMappedMipmappedArray_v10000_params *q = p;
            return q->mipmap ? (uint64_t)(uintptr_t)*q->mipmap : 0;
        }
        case CUPTI_RUNTIME_TRACE_CBID_cudaIpcCloseMemHandle_v4010:
            return (uint64_t)(uintptr_t)((const cudaIpcCloseMemHandle_v4010_params *)p)->devPtr;
        default: return 0;
        }
    }
    switch (a->cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle: {
        const cuIpcOpenMemHandle_params *q = p;
        return q->pdptr ? (uint64_t)*q->pdptr : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2: {
        const cuIpcOpenMemHandle_v2_params *q = p;
        return q->pdptr ? (uint64_t)*q->pdptr : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer: {
        const cuMemPoolImportPointer_params *q = p;
        return q->ptr_out ? (uint64_t)*q->ptr_out : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuExternalMemoryGetMappedBuffer: {
        const cuExternalMemoryGetMappedBuffer_params *q = p;
        return q->devPtr ? (uint64_t)*q->devPtr : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuExternalMemoryGetMappedMipmappedArray: {
        const cuExternalMemoryGetMappedMipmappedArray_params *q = p;
        return q->mipmap ? (uint64_t)(uintptr_t)*q->mipmap : 0;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle:
        return (uint64_t)((const cuIpcCloseMemHandle_params *)p)->dptr;
    default: return 0;
    }
}

/* cuMemMapArrayAsync (docs/collectors.md, point 6): VMM memory mapped into (or unmapped from) tiles
 * and mip tails of sparse arrays keeps its handle alive like a cuMemMap does (cuda.h cuMemRelease:
 * "all outstanding mappings"). Each mapping is keyed by what it maps into (array, subresource,
 * device mask); an UNMAP finds the handle there and may free it (at the call's exit: the operation
 * is stream-ordered and the callback sees only its success). */
static gmp_handles array_maps; /* key of a tile or mip tail -> handle; under vmm_lock */

static uint64_t array_map_key(const CUarrayMapInfo *mi)
{
    uint64_t h = GMP_FNV1A_OFFSET;
    const uint64_t parts[3] = {
        (uint64_t)(uintptr_t)(mi->resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY
                                  ? (void *)mi->resource.mipmap
                                  : (void *)mi->resource.array),
        (uint64_t)mi->subresourceType, (uint64_t)mi->deviceBitMask};
    uint64_t subres[4] = {0, 0, 0, 0};
    memcpy(subres, &mi->subresource,
           sizeof mi->subresource < sizeof subres ? sizeof mi->subresource : sizeof subres);
    for (int i = 0; i < 3; i++)
        h = gmp_fnv1a_word(h, parts[i]);
    for (int i = 0; i < 4; i++)
        h = gmp_fnv1a_word(h, subres[i]);
    return h ? h : 1;
}

void gmp_cupti_array_map(gmp_wthread *t, api_desc *a, const CUpti_CallbackData *cd)
{
    const cuMemMapArrayAsync_params *q = cd->functionParams;
    if (!q->mapInfoList)
        return;
    for (unsigned i = 0; i < q->count && i < 65536; i++) {
        const CUarrayMapInfo *mi = &q->mapInfoList[i];
        if (mi->memHandleType != CU_MEM_HANDLE_TYPE_GENERIC)
            continue;
        uint64_t key = array_map_key(mi);
        uint64_t fh = 0, fsize = 0;
        int32_t fdev = -1;
        pthread_mutex_lock(&vmm_lock);
        if (mi->memOperationType == CU_MEM_OPERATION_TYPE_MAP) {
            uint64_t handle = (uint64_t)mi->memHandle.memHandle;
            gmp_handle_ent *h = gmp_handles_get(&vmm_handles, handle);
            gmp_handle_ent *m = h ? gmp_handles_put(&array_maps, key) : NULL;
            if (m) {
                m->handle = handle;
                m->size = 1;
                h = gmp_handles_get(&vmm_handles, handle);
                if (h)
                    h->maps++;
            }
        } else if (mi->memOperationType == CU_MEM_OPERATION_TYPE_UNMAP) {
            gmp_handle_ent *m = gmp_handles_get(&array_maps, key);
            if (m) {
                uint64_t handle = m->handle;
                gmp_handles_del(&array_maps, key);
                gmp_handle_ent *h = gmp_handles_get(&vmm_handles, handle);
                if (h && h->maps)
                    h->maps--;
                if (h && !h->maps && !h->refs) {
                    if (!(h->flags & GMP_HANDLE_IMPORTED)) {
                        fh = handle;
                        fsize = h->size;
                        fdev = h->device;
                    }
                    gmp_handles_del(&vmm_handles, handle);
                }
            }
        }
        pthread_mutex_unlock(&vmm_lock);
        if (fh)
            vmm_free_record(t, a, cd, fh, fsize, fdev, 0, 0);
    }
}
