"""tests/python: allocations through ctypes from nested Python functions (markers: @name)."""
import ctypes
import os
import sys

# PyDLL: the call keeps the GIL, so the agent can read this thread's Python stack
rt = ctypes.PyDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaMalloc.restype = ctypes.c_int
# CDLL: ctypes releases the GIL around the call: native frames only
rt_nogil = ctypes.CDLL("libcudart.so.13")
rt_nogil.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt_nogil.cudaMalloc.restype = ctypes.c_int
helper = ctypes.PyDLL(os.path.join(sys.argv[1], "libpy_helper.so"))
helper.py_helper_thread_alloc.argtypes = [ctypes.c_size_t]
keep = []
MiB = 1 << 20


def alloc(lib, n):
    p = ctypes.c_void_p()
    rc = lib.cudaMalloc(ctypes.byref(p), n)  # @alloc
    if rc != 0:
        raise SystemExit("cudaMalloc: %d" % rc)
    keep.append(p)


def inner(n):
    alloc(rt, n)  # @inner


def outer(n):
    inner(n)  # @outer


class Model:
    def step(self, n):
        outer(n)  # @step


def main():
    Model().step(3 * MiB)  # @main3
    alloc(rt_nogil, 5 * MiB)  # @main5
    if helper.py_helper_thread_alloc(7 * MiB) != 0:  # @main7
        raise SystemExit("thread allocation failed")
    # an exception pending while the agent reads the stack is kept and still raised
    try:
        try:
            raise KeyError("kept")
        except KeyError:
            alloc(rt, 1 * MiB)  # @main1
            raise
    except KeyError as e:
        assert e.args == ("kept",), e.args
    print("py_alloc: ok")


main()  # @module
