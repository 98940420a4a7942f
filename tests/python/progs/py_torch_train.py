"""tests/python: a training step on the stand-in torch under `run --layers --torch-history`: module
calls in forward, their backward on the autograd engine's thread, a record_function range, the
whole step inside the program's own NVTX range `train` (NVTX through py_helper, as a program
calling torch.cuda.nvtx.range_push would: the hooks' ranges then sit under it on this thread).

argv: PROGS_DIR STUB_DIR
"""
import ctypes
import os
import sys

sys.path.insert(0, sys.argv[2])
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(64, 64)
        self.ff = nn.Linear(64, 64)

    def forward(self, x):
        return self.ff(self.attn(x))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(64, 8)

    def forward(self, x):
        return self.head(self.encoder(x))


helper = ctypes.PyDLL(os.path.join(sys.argv[1], "libpy_helper.so"))
helper.py_helper_push.argtypes = [ctypes.c_char_p]

model = Net()
model.cuda()
x = torch.cuda.zeros(1024, 64)
helper.py_helper_push(b"train")
with torch.profiler.record_function("train_step"):
    loss = model(x).sum()
    loss.backward()
helper.py_helper_pop()
print("py_torch_train: ok")
