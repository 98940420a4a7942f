"""tests/python: allocations made without the GIL (markers: @name).

argv: PROGS_DIR EXT_DIR [THREADS ALLOCS]
- a C extension that releases the GIL around cudaMalloc (py_ext.c), 11 MiB;
- ctypes.CDLL (releases the GIL) from inside a generator, 13 MiB;
- a C thread with a Python thread state but no frame (like PyTorch's autograd engine threads),
  17 MiB;
- stress: THREADS Python threads allocating through ctypes.CDLL (no GIL) and ctypes.PyDLL (GIL
  held) at three call sites while two other threads run Python code; every allocation is kept
  (sizes from 1 MiB up, 4 KiB apart) so that the report lists them all.
"""
import ctypes
import os
import sys
import threading

sys.path.insert(0, sys.argv[2])
import py_ext  # noqa: E402

nogil = ctypes.CDLL("libcudart.so.13")
nogil.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
nogil.cudaMalloc.restype = ctypes.c_int
gil = ctypes.PyDLL("libcudart.so.13")
gil.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
gil.cudaMalloc.restype = ctypes.c_int
MiB = 1 << 20
keep = []
lock = threading.Lock()


def check(rc):
    if rc != 0:
        raise SystemExit("cudaMalloc: %d" % rc)


def ext_call(n):
    check(py_ext.alloc(n))  # @ext


class Net:
    def forward(self, n):
        ext_call(n)  # @forward


def cdll_alloc(n):
    p = ctypes.c_void_p()
    check(nogil.cudaMalloc(ctypes.byref(p), n))  # @cdll
    keep.append(p)
    return p


def gen(n):
    yield cdll_alloc(n)  # @gen


def stress_a(n):
    p = ctypes.c_void_p()
    check(nogil.cudaMalloc(ctypes.byref(p), n))  # @sa
    return p


def stress_b(n):
    p = ctypes.c_void_p()
    check(nogil.cudaMalloc(ctypes.byref(p), n))  # @sb
    return p


def stress_c(n):
    p = ctypes.c_void_p()
    check(gil.cudaMalloc(ctypes.byref(p), n))  # @sc
    return p


def worker(tid, count, out):
    for k in range(count):
        n = MiB + (tid * count + k) * 4096
        if k % 3 == 0:
            p = stress_a(n)  # @wa
        elif k % 3 == 1:
            p = stress_b(n)  # @wb
        else:
            p = stress_c(n)  # @wc
        out.append(p)


def busy(stop):
    def fib(k):
        return k if k < 2 else fib(k - 1) + fib(k - 2)
    while not stop.is_set():
        fib(12)


def main():
    Net().forward(11 * MiB)  # @main11
    next(gen(13 * MiB))  # @main13
    check(py_ext.engine_alloc(17 * MiB))
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    sys.setswitchinterval(1e-5)
    stop = threading.Event()
    busies = [threading.Thread(target=busy, args=(stop,)) for _ in range(2)]
    for b in busies:
        b.start()
    outs = [[] for _ in range(threads)]
    ws = [threading.Thread(target=worker, args=(i, count, outs[i])) for i in range(threads)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    stop.set()
    for b in busies:
        b.join()
    keep.extend(p for o in outs for p in o)
    print("py_nogil: ok %d" % sum(len(o) for o in outs))


main()  # @module
