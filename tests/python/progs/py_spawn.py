"""tests/python: a spawn worker calling torch.nn modules (as torchvision transforms in a DataLoader
worker do) while its parent profiles CUDA: the worker never uses CUDA, so under `run --layers` it
gets no trace and prints nothing. Real torch (Debian's python3-torch, CPU)."""
import ctypes
import multiprocessing as mp
import sys


def work(q):
    import torch

    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    q.put(float(m(torch.ones(2, 4)).sum() * 0 + 1))


if __name__ == "__main__":
    rt = ctypes.PyDLL("libcudart.so.13")
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    p = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(p), 1 << 20)
    ctx = mp.get_context(sys.argv[2] if len(sys.argv) > 2 else "spawn")
    q = ctx.Queue()
    w = ctx.Process(target=work, args=(q,))
    w.start()
    print("worker result=%s" % q.get(timeout=60))
    w.join()
    print("worker exit=%s" % w.exitcode)
