"""tests/python: a real torch.nn model under `run --layers` (forward and backward); an allocation
inside a module's forward (the simulated cudaMalloc through ctypes) gets the module's range path
under the program's own NVTX range `train`."""
import ctypes
import os
import sys

import torch
import torch.nn as nn

rt = ctypes.PyDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
helper = ctypes.PyDLL(os.path.join(sys.argv[1], "libpy_helper.so"))
helper.py_helper_push.argtypes = [ctypes.c_char_p]
keep = []


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)

    def forward(self, x):
        p = ctypes.c_void_p()
        rt.cudaMalloc(ctypes.byref(p), (1 << 20) * (1 + len(keep)))
        keep.append(p)
        return self.q(x)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()
        self.ff = nn.Linear(8, 8)

    def forward(self, x):
        return self.ff(torch.relu(self.attn(x)))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


model = Net()
x = torch.randn(2, 8)
helper.py_helper_push(b"train")
loss = model(x).sum()
loss.backward()
helper.py_helper_pop()
print("py_layers: ok")
