/* Memory kinds the agent must follow beyond plain allocations (docs/collectors.md, points 6 and 7),
 * driver API, every entry point looked up with dlsym so that the program runs on a driver (the
 * simulated one) that lacks some: a part whose entry point is missing or fails prints
 * "SKIP <part> <why>" and is left out.
 *  6: "mip": cuMipmappedArrayCreate 64x64 float4, 4 levels, cuMipmappedArrayDestroy;
 *     "sparse": a sparse cuArray3DCreate (no memory) with a 2 MiB VMM handle mapped into it by
 *     cuMemMapArrayAsync; the handle is released while mapped and freed by the UNMAP;
 *     "mc": cuMulticastCreate, then cuMemRelease of the multicast handle (not memory).
 *  7: "ipc": cuIpcGetMemHandle / cuIpcOpenMemHandle of a 1 MiB cuMemAlloc, cuIpcCloseMemHandle;
 *     "shareable": a 2 MiB handle exported as a POSIX fd and imported
 * (cuMemImportFromShareableHandle), the import mapped, unmapped and released; "poolptr":
 * cuMemPoolExportPointer / cuMemPoolImportPointer of a 1 MiB allocation of an exportable pool, the
 * import freed with cuMemFreeAsync. Prints "A <label> 0x.." for the values the test looks for and
 * "OK <part>" for each part done. */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)
#define SYM(var, name) (*(void **)&(var) = dlsym(RTLD_DEFAULT, name))

static int skip(const char *part, const char *why, int rc)
{
    printf("SKIP %s %s(%d)\n", part, why, rc);
    return 0;
}

static CUmemAllocationProp device_prop(int shareable)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    if (shareable)
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

static int part_mip(void)
{
    CUresult (*create)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned);
    CUresult (*destroy)(CUmipmappedArray);
    if (!SYM(create, "cuMipmappedArrayCreate") || !SYM(destroy, "cuMipmappedArrayDestroy"))
        return skip("mip", "no cuMipmappedArrayCreate", 0);
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof d);
    d.Width = 64;
    d.Height = 64;
    d.Format = CU_AD_FORMAT_FLOAT;
    d.NumChannels = 4;
    CUmipmappedArray m;
    CUresult r = create(&m, &d, 4);
    if (r != CUDA_SUCCESS)
        return skip("mip", "cuMipmappedArrayCreate", r);
    SHOWP("mip", m);
    CHECK(destroy(m), CUDA_SUCCESS);
    return 1;
}

static int part_sparse(void)
{
    CUresult (*mapa)(CUarrayMapInfo *, unsigned, CUstream);
    if (!SYM(mapa, "cuMemMapArrayAsync"))
        return skip("sparse", "no cuMemMapArrayAsync", 0);
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof d);
    d.Width = 1024;
    d.Height = 1024;
    d.Format = CU_AD_FORMAT_FLOAT;
    d.NumChannels = 1;
    d.Flags = CUDA_ARRAY3D_SPARSE;
    CUarray arr;
    CUresult r = cuArray3DCreate(&arr, &d);
    if (r != CUDA_SUCCESS)
        return skip("sparse", "sparse cuArray3DCreate", r);
    SHOWP("sparse", arr);
    CUmemAllocationProp prop = device_prop(0);
    CUmemGenericAllocationHandle h;
    CHECK(cuMemCreate(&h, 2 * MIB, &prop, 0), CUDA_SUCCESS);
    show("sparseh", h);
    CUarrayMapInfo mi;
    memset(&mi, 0, sizeof mi);
    mi.resourceType = CU_RESOURCE_TYPE_ARRAY;
    mi.resource.array = arr;
    mi.subresourceType = CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_SPARSE_LEVEL;
    mi.subresource.sparseLevel.extentWidth = 512;
    mi.subresource.sparseLevel.extentHeight = 1024;
    mi.subresource.sparseLevel.extentDepth = 1;
    mi.memOperationType = CU_MEM_OPERATION_TYPE_MAP;
    mi.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
    mi.memHandle.memHandle = h;
    mi.deviceBitMask = 1;
    r = mapa(&mi, 1, 0);
    if (r != CUDA_SUCCESS) {
        CHECK(cuMemRelease(h), CUDA_SUCCESS);
        CHECK(cuArrayDestroy(arr), CUDA_SUCCESS);
        return skip("sparse", "cuMemMapArrayAsync", r);
    }
    CHECK(cuMemRelease(h), CUDA_SUCCESS); /* still mapped into the array */
    mi.memOperationType = CU_MEM_OPERATION_TYPE_UNMAP;
    mi.memHandle.memHandle = 0;
    CHECK(mapa(&mi, 1, 0), CUDA_SUCCESS); /* the 2 MiB go here */
    CHECK(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK(cuArrayDestroy(arr), CUDA_SUCCESS);
    return 1;
}

static int part_mc(void)
{
    CUresult (*create)(CUmemGenericAllocationHandle *, const CUmulticastObjectProp *);
    if (!SYM(create, "cuMulticastCreate"))
        return skip("mc", "no cuMulticastCreate", 0);
    CUmulticastObjectProp p;
    memset(&p, 0, sizeof p);
    p.numDevices = 1;
    p.size = 2 * MIB;
    CUmemGenericAllocationHandle mc;
    CUresult r = create(&mc, &p);
    if (r != CUDA_SUCCESS)
        return skip("mc", "cuMulticastCreate", r);
    show("mc", mc);
    CHECK(cuMemRelease(mc), CUDA_SUCCESS);
    return 1;
}

static int part_ipc(void)
{
    CUresult (*get)(CUipcMemHandle *, CUdeviceptr);
    CUresult (*open)(CUdeviceptr *, CUipcMemHandle, unsigned);
    CUresult (*closeh)(CUdeviceptr);
    if (!SYM(get, "cuIpcGetMemHandle") || !SYM(open, "cuIpcOpenMemHandle_v2") ||
        !SYM(closeh, "cuIpcCloseMemHandle"))
        return skip("ipc", "no cuIpc*", 0);
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, MIB), CUDA_SUCCESS);
    CUipcMemHandle ih;
    CUdeviceptr o = 0;
    CUresult r = get(&ih, d);
    if (r == CUDA_SUCCESS)
        r = open(&o, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r != CUDA_SUCCESS) {
        CHECK(cuMemFree(d), CUDA_SUCCESS);
        return skip("ipc", "cuIpcOpenMemHandle", r);
    }
    show("ipc", o);
    CHECK(closeh(o), CUDA_SUCCESS);
    CHECK(cuMemFree(d), CUDA_SUCCESS);
    return 1;
}

static int part_shareable(void)
{
    CUresult (*expf)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                     unsigned long long);
    CUresult (*imp)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    if (!SYM(expf, "cuMemExportToShareableHandle") || !SYM(imp, "cuMemImportFromShareableHandle"))
        return skip("shareable", "no cuMemExport/ImportShareableHandle", 0);
    CUmemAllocationProp prop = device_prop(1);
    CUmemGenericAllocationHandle h, g;
    CHECK(cuMemCreate(&h, 2 * MIB, &prop, 0), CUDA_SUCCESS);
    show("exported", h);
    int fd = -1;
    CUresult r = expf(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r == CUDA_SUCCESS)
        r = imp(&g, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS) {
        CHECK(cuMemRelease(h), CUDA_SUCCESS);
        return skip("shareable", "export/import", r);
    }
    show("imported", g);
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, 2 * MIB, 0, 0, 0), CUDA_SUCCESS);
    CHECK(cuMemMap(va, 2 * MIB, 0, g, 0), CUDA_SUCCESS);
    CHECK(cuMemUnmap(va, 2 * MIB), CUDA_SUCCESS);
    CHECK(cuMemRelease(g), CUDA_SUCCESS);
    CHECK(cuMemAddressFree(va, 2 * MIB), CUDA_SUCCESS);
    CHECK(cuMemRelease(h), CUDA_SUCCESS);
    close(fd);
    return 1;
}

static int part_poolptr(CUstream s)
{
    CUresult (*expp)(CUmemPoolPtrExportData *, CUdeviceptr);
    CUresult (*imp)(CUdeviceptr *, CUmemoryPool, CUmemPoolPtrExportData *);
    if (!SYM(expp, "cuMemPoolExportPointer") || !SYM(imp, "cuMemPoolImportPointer"))
        return skip("poolptr", "no cuMemPoolExport/ImportPointer", 0);
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool;
    CUresult r = cuMemPoolCreate(&pool, &pp);
    if (r != CUDA_SUCCESS)
        return skip("poolptr", "exportable cuMemPoolCreate", r);
    CUdeviceptr d, o = 0;
    CHECK(cuMemAllocFromPoolAsync(&d, MIB, pool, s), CUDA_SUCCESS);
    CUmemPoolPtrExportData ed;
    r = expp(&ed, d);
    if (r == CUDA_SUCCESS)
        r = imp(&o, pool, &ed);
    if (r != CUDA_SUCCESS) {
        CHECK(cuMemFreeAsync(d, s), CUDA_SUCCESS);
        CHECK(cuStreamSynchronize(s), CUDA_SUCCESS);
        CHECK(cuMemPoolDestroy(pool), CUDA_SUCCESS);
        return skip("poolptr", "export/import pointer", r);
    }
    show("poolptr", o);
    CHECK(cuMemFreeAsync(o, s), CUDA_SUCCESS); /* the import's free: not recorded */
    CHECK(cuMemFreeAsync(d, s), CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    return 1;
}

int main(void)
{
    CHECK(cuInit(0), CUDA_SUCCESS);
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    if (part_mip())
        printf("OK mip\n");
    if (part_sparse())
        printf("OK sparse\n");
    if (part_mc())
        printf("OK mc\n");
    if (part_ipc())
        printf("OK ipc\n");
    if (part_shareable())
        printf("OK shareable\n");
    if (part_poolptr(s))
        printf("OK poolptr\n");
    CHECK(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
    printf("imports: ok\n");
    return 0;
}
