#!/usr/bin/env python3
"""A process like PyTorch's on the simulated CUDA 12 wheels (test_wheel12.py). At import, as torch
does, it loads site-packages/nvidia/cuda_cupti/lib/libcupti.so.12 and
site-packages/nvidia/cuda_runtime/lib/libcudart.so.12 by path with ctypes, before the first CUDA
call. Then: allocates through the runtime (a caching allocator's 20 MiB segment, which it carves
into blocks with no CUDA call), reaches cuMemAlloc through cudaGetDriverEntryPointByVersion and
allocates with it, and grows an expandable segment as PyTorch's caching allocator does
(cuMemAddressReserve, then per 2 MiB chunk cuMemCreate, cuMemMap, cuMemSetAccess; then unmaps,
releases and frees the range), each driver function reached through cudaGetDriverEntryPoint.
Every call goes through ctypes, which releases the GIL around it.
Then what a PyTorch process adds (docs/simcuda.md, "A PyTorch-like process"):
- a backward pass on a native worker thread (libsimcuda_pyworker.so's pthread, which never runs
  Python) allocating 5 and 7 MiB with cudaMalloc and freeing them while this thread waits;
- a CUDA graph with a private pool: a pool made by cudaMemPoolCreate; a stream captures a 6 MiB
  cudaMallocFromPoolAsync and its cudaFreeAsync and a 4 MiB one kept past the graph; the graph is
  instantiated and launched once, and the 4 MiB freed by a cudaFreeAsync outside the graph;
- a NCCL-like peer buffer: 2 MiB from cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
  mapped here, exported with cuMemExportToShareableHandle; a second process (this script with
  --import, started by exec, inheriting the descriptor) imports it with
  cuMemImportFromShareableHandle, maps it, unmaps and releases it.
Prints the versions the runtime and driver report, the addresses the test checks, then 'ok'.
Usage: wheel12_prog.py WHEEL_DIR WORKER_SO
       wheel12_prog.py --import WHEEL_DIR FD SIZE   (the peer process)"""
import ctypes
import os
import subprocess
import sys

IMPORTER = sys.argv[1] == "--import"
site = os.path.join(sys.argv[2 if IMPORTER else 1], "site-packages", "nvidia")
# torch's libraries depend on both, so both are mapped at `import torch`, before any CUDA call
cupti = ctypes.CDLL(os.path.join(site, "cuda_cupti", "lib", "libcupti.so.12"), mode=ctypes.RTLD_GLOBAL)
rt = ctypes.CDLL(os.path.join(site, "cuda_runtime", "lib", "libcudart.so.12"), mode=ctypes.RTLD_GLOBAL)
u64, sz, vp = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
MIB = 1 << 20
CHUNK = 2 * MIB


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AllocProp(ctypes.Structure):  # CUmemAllocationProp (cuda.h)
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", AllocFlags)]


class AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


class PoolProps(ctypes.Structure):  # cudaMemPoolProps (driver_types.h)
    _fields_ = [("allocType", ctypes.c_int), ("handleTypes", ctypes.c_int),
                ("location", Location), ("win32SecurityAttributes", ctypes.c_void_p),
                ("maxSize", ctypes.c_size_t), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 54)]


def driver(name, *argtypes):
    f = ctypes.c_void_p()
    with_status = ctypes.c_int(-1)
    assert rt.cudaGetDriverEntryPoint(name.encode(), ctypes.byref(f), 0,
                                      ctypes.byref(with_status)) == 0 and f.value, name
    return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(f.value)


def vmm():
    return dict(reserve=driver("cuMemAddressReserve", ctypes.POINTER(u64), sz, sz, u64, u64),
                create=driver("cuMemCreate", ctypes.POINTER(u64), sz, ctypes.POINTER(AllocProp), u64),
                map=driver("cuMemMap", u64, sz, sz, u64, u64),
                access=driver("cuMemSetAccess", u64, sz, ctypes.POINTER(AccessDesc), sz),
                unmap=driver("cuMemUnmap", u64, sz),
                release=driver("cuMemRelease", u64),
                addrfree=driver("cuMemAddressFree", u64, sz),
                export=driver("cuMemExportToShareableHandle", vp, u64, ctypes.c_int, u64),
                imp=driver("cuMemImportFromShareableHandle", ctypes.POINTER(u64), vp, ctypes.c_int))


DESC = AccessDesc(location=Location(type=1, id=0), flags=3)  # device 0, read-write
POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR

if IMPORTER:  # the peer process: maps the exporter's buffer, as NCCL maps a peer's
    fd, size = int(sys.argv[3]), int(sys.argv[4])
    assert rt.cudaSetDevice(0) == 0 and rt.cudaFree(None) == 0  # the context, as torch makes it
    d = vmm()
    h, base = u64(), u64()
    assert d["imp"](ctypes.byref(h), vp(fd), POSIX_FD) == 0
    assert d["reserve"](ctypes.byref(base), size, 0, 0, 0) == 0
    assert d["map"](base.value, size, 0, h.value, 0) == 0
    assert d["access"](base.value, size, ctypes.byref(DESC), 1) == 0
    assert d["unmap"](base.value, size) == 0
    assert d["release"](h.value) == 0
    assert d["addrfree"](base.value, size) == 0
    print("imported 0x%x" % base.value)
    sys.exit(0)

v, dv = ctypes.c_int(), ctypes.c_int()
assert rt.cudaRuntimeGetVersion(ctypes.byref(v)) == 0
assert rt.cudaDriverGetVersion(ctypes.byref(dv)) == 0
print("runtime %d driver %d" % (v.value, dv.value))
# the caching allocator's large segment; its blocks are carved out of it with no CUDA call
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(20 * MIB)) == 0
fn, st = ctypes.c_void_p(), ctypes.c_int(-1)
assert rt.cudaGetDriverEntryPointByVersion(b"cuMemAlloc", ctypes.byref(fn), 12000, 0,
                                           ctypes.byref(st)) == 0 and st.value == 0 and fn.value
cu_alloc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t)(fn.value)
dp = ctypes.c_uint64()
assert cu_alloc(ctypes.byref(dp), 3 << 20) == 0

# an expandable segment
d = vmm()
base = u64()
assert d["reserve"](ctypes.byref(base), 8 * CHUNK, 0, 0, 0) == 0
prop = AllocProp(type=1, requestedHandleTypes=0, location=Location(type=1, id=0))  # pinned, device 0
handles = []
for i in range(2):
    h = u64()
    assert d["create"](ctypes.byref(h), CHUNK, ctypes.byref(prop), 0) == 0
    assert d["map"](base.value + i * CHUNK, CHUNK, 0, h.value, 0) == 0
    assert d["access"](base.value + i * CHUNK, CHUNK, ctypes.byref(DESC), 1) == 0
    handles.append(h.value)
for i, h in enumerate(handles):
    assert d["unmap"](base.value + i * CHUNK, CHUNK) == 0
    assert d["release"](h) == 0
assert d["addrfree"](base.value, 8 * CHUNK) == 0

# the backward pass on a native thread (PyTorch's autograd engine); this thread waits in
# pthread_join with the GIL released
worker = ctypes.CDLL(sys.argv[2])
sizes, addrs = (u64 * 2)(5 * MIB, 7 * MIB), (u64 * 2)()
assert worker.gmp_simworker_backward(ctypes.cast(rt.cudaMalloc, vp), ctypes.cast(rt.cudaFree, vp),
                                     sizes, 2, addrs) == 0
print("worker 0x%x 0x%x" % (addrs[0], addrs[1]))

# a CUDA graph with a private pool
stream, pool = vp(), vp()
assert rt.cudaStreamCreateWithFlags(ctypes.byref(stream), 1) == 0  # cudaStreamNonBlocking
pp = PoolProps(allocType=1, handleTypes=0, location=Location(type=1, id=0))
assert rt.cudaMemPoolCreate(ctypes.byref(pool), ctypes.byref(pp)) == 0
assert rt.cudaStreamBeginCapture(stream, 1) == 0  # cudaStreamCaptureModeThreadLocal
g6, g4 = vp(), vp()
assert rt.cudaMallocFromPoolAsync(ctypes.byref(g6), sz(6 * MIB), pool, stream) == 0
assert rt.cudaMallocFromPoolAsync(ctypes.byref(g4), sz(4 * MIB), pool, stream) == 0
assert rt.cudaFreeAsync(g6, stream) == 0
graph, gexec = vp(), vp()
assert rt.cudaStreamEndCapture(stream, ctypes.byref(graph)) == 0
rt.cudaGraphInstantiate.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_ulonglong]
assert rt.cudaGraphInstantiate(ctypes.byref(gexec), graph, 0) == 0
assert rt.cudaGraphLaunch(gexec, stream) == 0
assert rt.cudaStreamSynchronize(stream) == 0
print("graph 0x%x 0x%x" % (g6.value, g4.value))
assert rt.cudaFreeAsync(g4, stream) == 0  # the graph's output, freed outside it
assert rt.cudaStreamSynchronize(stream) == 0
assert rt.cudaGraphExecDestroy(gexec) == 0 and rt.cudaGraphDestroy(graph) == 0
assert rt.cudaDeviceGraphMemTrim(0) == 0
assert rt.cudaMemPoolDestroy(pool) == 0 and rt.cudaStreamDestroy(stream) == 0

# a NCCL-like peer buffer, shared with a second process through a POSIX file descriptor
peer, pbase, fd = u64(), u64(), ctypes.c_int(-1)
prop = AllocProp(type=1, requestedHandleTypes=POSIX_FD, location=Location(type=1, id=0))
assert d["create"](ctypes.byref(peer), CHUNK, ctypes.byref(prop), 0) == 0
assert d["reserve"](ctypes.byref(pbase), CHUNK, 0, 0, 0) == 0
assert d["map"](pbase.value, CHUNK, 0, peer.value, 0) == 0
assert d["access"](pbase.value, CHUNK, ctypes.byref(DESC), 1) == 0
assert d["export"](ctypes.byref(fd), peer.value, POSIX_FD, 0) == 0 and fd.value >= 0
child = subprocess.run([sys.executable, os.path.abspath(__file__), "--import", sys.argv[1],
                        str(fd.value), str(CHUNK)], pass_fds=(fd.value,), stdout=subprocess.PIPE)
assert child.returncode == 0, child.returncode
sys.stdout.write(child.stdout.decode())
os.close(fd.value)
print("peer 0x%x" % pbase.value)
assert d["unmap"](pbase.value, CHUNK) == 0
assert d["release"](peer.value) == 0
assert d["addrfree"](pbase.value, CHUNK) == 0
assert rt.cudaFree(p) == 0
print("ok")
