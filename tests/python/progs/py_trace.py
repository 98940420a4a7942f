"""tests/python (test_pyapi.py, mode trace): gpumemprof.trace(model) on Debian's real torch
modules whose forward, and one backward, allocate through Debian's numba (a real CUDA client) on
the simulated device. Sizes are exact (numba asks the driver for nbytes of each array:
numba/cuda/api.py device_array); numba frees through a queue (cudadrv/driver.py
_PendingDeallocs), so a block that drops an array flushes the queue to free it at once.

  py_trace.py OUT.json [plain|trace|frag]
plain: the model runs without trace() (for `run --layers`: the ranges it gives);
trace: inside gpumemprof.trace(model); the layers as JSON in OUT.json, the summary on stdout;
frag: trace, with PyTorch's CUDA counters stood in (Debian's torch has no CUDA): reserved 8 MiB,
      allocated the bytes the agent counts live, so each layer's fragmentation_bytes must be
      8 MiB minus what was live when its call ended, the largest over its calls."""
import json
import sys

import numpy as np
import torch
import torch.nn as nn
from numba import cuda

KiB, MiB = 1 << 10, 1 << 20
cuda.select_device(0)


def flush():
    # numba's pending deallocations, freed now (the same as numba does past 10 pending items)
    cuda.current_context().memory_manager.deallocations.clear()


class Block(nn.Module):
    """Keeps `keep` bytes on the device (an activation) and uses `temp` bytes for a while."""

    def __init__(self, keep, temp):
        super().__init__()
        self.keep, self.temp = keep, temp
        self.lin = nn.Linear(4, 4)
        self.held = []

    def forward(self, x):
        self.held.append(cuda.device_array(self.keep, dtype=np.uint8))  # @keep
        t = cuda.device_array(self.temp, dtype=np.uint8)  # @temp
        del t
        flush()
        return self.lin(x) * 2


class Norm(nn.Module):
    """Uses 128 KiB for a while; called twice in a forward (a layer's calls accumulate)."""

    def forward(self, x):
        t = cuda.device_array(128 * KiB, dtype=np.uint8)  # @norm
        del t
        flush()
        return x * 1.0


class Grow(torch.autograd.Function):
    """x * 3, whose backward uses 4 MiB of device memory for a while."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        w = cuda.device_array(4 * MiB, dtype=np.uint8)  # @bwd
        del w
        flush()
        return g * 3


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.held = []

    def forward(self, x):
        self.held.append(cuda.device_array(64 * KiB, dtype=np.uint8))  # @head
        return Grow.apply(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Block(1 * MiB, 256 * KiB)
        self.dec = Block(2 * MiB, 512 * KiB)
        self.norm = Norm()
        self.head = Head()

    def forward(self, x):
        x = self.enc(x)
        x = self.norm(x)
        x = self.dec(x)
        x = self.norm(x)
        return self.head(x)


def step(model, x):
    loss = model(x).sum()
    loss.backward()


model = Net()
x = torch.ones(2, 4, requires_grad=True)
if sys.argv[2] == "plain":
    step(model, x)
else:
    import gpumemprof

    if sys.argv[2] == "frag":
        torch.cuda.is_initialized = lambda: True
        torch.cuda.memory_reserved = lambda device=None: 8 * MiB
        torch.cuda.memory_allocated = lambda device=None: gpumemprof.current_bytes().get(0, 0)
    with gpumemprof.trace(model) as t:
        step(model, x)
    t.print_summary()
    t.to_json(sys.argv[1])
print("ok")
