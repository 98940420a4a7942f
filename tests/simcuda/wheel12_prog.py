#!/usr/bin/env python3
"""A process like PyTorch's on the simulated CUDA 12 wheels (test_wheel12.py): loads
site-packages/nvidia/cuda_runtime/lib/libcudart.so.12 by path with ctypes, allocates through the
runtime, reaches cuMemAlloc through cudaGetDriverEntryPointByVersion and allocates with it, and
grows an expandable segment as PyTorch's caching allocator does (cuMemAddressReserve, then per
2 MiB chunk cuMemCreate, cuMemMap, cuMemSetAccess; then unmaps, releases and frees the range), each
driver function reached through cudaGetDriverEntryPoint.
Prints the versions the runtime and driver report, then 'ok'.
Usage: wheel12_prog.py WHEEL_DIR"""
import ctypes
import os
import sys

site = os.path.join(sys.argv[1], "site-packages", "nvidia")
rt = ctypes.CDLL(os.path.join(site, "cuda_runtime", "lib", "libcudart.so.12"))
v, d = ctypes.c_int(), ctypes.c_int()
assert rt.cudaRuntimeGetVersion(ctypes.byref(v)) == 0
assert rt.cudaDriverGetVersion(ctypes.byref(d)) == 0
print("runtime %d driver %d" % (v.value, d.value))
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
fn, st = ctypes.c_void_p(), ctypes.c_int(-1)
assert rt.cudaGetDriverEntryPointByVersion(b"cuMemAlloc", ctypes.byref(fn), 12000, 0,
                                           ctypes.byref(st)) == 0 and st.value == 0 and fn.value
cu_alloc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t)(fn.value)
dp = ctypes.c_uint64()
assert cu_alloc(ctypes.byref(dp), 3 << 20) == 0

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


def driver(name, *argtypes):
    f = ctypes.c_void_p()
    with_status = ctypes.c_int(-1)
    assert rt.cudaGetDriverEntryPoint(name.encode(), ctypes.byref(f), 0,
                                      ctypes.byref(with_status)) == 0 and f.value, name
    return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(f.value)


u64, sz, vp = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
reserve = driver("cuMemAddressReserve", ctypes.POINTER(u64), sz, sz, u64, u64)
create = driver("cuMemCreate", ctypes.POINTER(u64), sz, ctypes.POINTER(AllocProp), u64)
mmap = driver("cuMemMap", u64, sz, sz, u64, u64)
access = driver("cuMemSetAccess", u64, sz, ctypes.POINTER(AccessDesc), sz)
unmap = driver("cuMemUnmap", u64, sz)
release = driver("cuMemRelease", u64)
addrfree = driver("cuMemAddressFree", u64, sz)
CHUNK = 2 << 20
base = u64()
assert reserve(ctypes.byref(base), 8 * CHUNK, 0, 0, 0) == 0
prop = AllocProp(type=1, requestedHandleTypes=0, location=Location(type=1, id=0))  # pinned, device 0
desc = AccessDesc(location=Location(type=1, id=0), flags=3)  # read-write
handles = []
for i in range(2):
    h = u64()
    assert create(ctypes.byref(h), CHUNK, ctypes.byref(prop), 0) == 0
    assert mmap(base.value + i * CHUNK, CHUNK, 0, h.value, 0) == 0
    assert access(base.value + i * CHUNK, CHUNK, ctypes.byref(desc), 1) == 0
    handles.append(h.value)
for i, h in enumerate(handles):
    assert unmap(base.value + i * CHUNK, CHUNK) == 0
    assert release(h) == 0
assert addrfree(base.value, 8 * CHUNK) == 0
assert rt.cudaFree(p) == 0
print("ok")
