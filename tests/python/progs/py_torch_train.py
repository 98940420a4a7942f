"""tests/python: a training step on the stand-in torch under `run --layers --torch-history`: module
calls in forward, their backward on the autograd engine's thread, a record_function range.

argv: PROGS_DIR STUB_DIR
"""
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


model = Net()
model.cuda()
x = torch.cuda.zeros(1024, 64)
with torch.profiler.record_function("train_step"):
    loss = model(x).sum()
    loss.backward()
print("py_torch_train: ok")
