"""Debian's numba (python3-numba 0.56) allocating on the simulated CUDA 12.8 driver, for
test_numba.py: only what needs no GPU compiler (no kernel, no NVVM: cuda.select_device rather
than cuda.is_available, which also requires libNVVM). Sizes are what numba's source asks the driver
for (numba/cuda/api.py, cudadrv/devicearray.py: memory_size_from_info of the shape, strides and
itemsize, i.e. nbytes of a contiguous array). Prints what it did; test_numba.py compares the trace.
Run as: NUMBA_CUDA_DRIVER=<libcuda.so.1> python3 numba_prog.py"""
import gc
import numpy as np
from numba import cuda

cuda.select_device(0)
ctx = cuda.current_context()
mm = ctx.memory_manager
free0, total = ctx.get_memory_info()
print("total", total)

a = cuda.device_array(1000, dtype=np.float32)                  # cuMemAlloc 4000
h = np.arange(2048, dtype=np.float64)
d = cuda.to_device(h)                                           # cuMemAlloc 16384 + HtoD
f = cuda.device_array((3, 5), dtype=np.int16, order="F")        # cuMemAlloc 30
back = d.copy_to_host()                                         # DtoH (the simulator keeps no data)
mgd = cuda.managed_array(100, dtype=np.float64)                 # cuMemAllocManaged 800
p = cuda.pinned_array(4096, dtype=np.uint8)                     # cuMemHostAlloc 4096, flags 0
m = cuda.mapped_array(8192, dtype=np.uint8)                     # cuMemHostAlloc 8192, DEVICEMAP
host = np.zeros(12288, dtype=np.uint8)
with cuda.pinned(host):                                         # cuMemHostRegister 12288
    pass                                                        # cuMemHostUnregister at exit
free1, _ = ctx.get_memory_info()
print("device bytes in use by the arrays", free0 - free1)

# numba frees through a queue (cudadrv/driver.py _PendingDeallocs): a dropped array's cuMemFree
# waits until the queue is cleared
del a, d, f, mgd, p, m
gc.collect()
print("pending", len(mm.deallocations))
mm.deallocations.clear()
print("pending after clear", len(mm.deallocations))

# ... or until it holds more than CUDA_DEALLOCS_COUNT (10) items: the 11th add_item clears it
for i in range(11):
    x = cuda.device_array(64, dtype=np.float32)                 # cuMemAlloc 256
    del x
    gc.collect()
print("pending after 11", len(mm.deallocations))
print("ok")
