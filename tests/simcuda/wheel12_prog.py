#!/usr/bin/env python3
"""A process like PyTorch's on the simulated CUDA 12 wheels (test_wheel12.py): loads
site-packages/nvidia/cuda_runtime/lib/libcudart.so.12 by path with ctypes, allocates through the
runtime, reaches cuMemAlloc through cudaGetDriverEntryPointByVersion and allocates with it, frees.
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
assert rt.cudaFree(p) == 0
print("ok")
