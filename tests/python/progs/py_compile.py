"""tests/python: --layers while torch.compile traces (B1), on Debian's real torch (CPU).

Debian's torch 1.13 has no dynamo; the program stands in for it the one way the hooks can see
it: torch.compiler.is_compiling(), which dynamo folds to True while it traces
(torch/compiler/__init__.py, 2.3+; installed here as a module before `import torch`), and the
counters dynamo keeps (torch._dynamo.utils.counters["stats"]["unique_graphs"]). While it is
true the hooks must do nothing at all: no range, no frame inspection, no call into the agent.
"""
import ctypes
import sys
import types

flag = [False]
fake = types.ModuleType("torch.compiler")
fake._is_compiling_flag = False
fake.is_compiling = lambda: flag[0]
sys.modules["torch.compiler"] = fake

import torch  # noqa: E402

rt = ctypes.PyDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
p = ctypes.c_void_p()
rt.cudaMalloc(ctypes.byref(p), 1 << 20)  # CUDA starts: the agent records


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.act(self.lin(x))


torch.manual_seed(0)
eager = Small()
traced = Small()
traced.load_state_dict(eager.state_dict())
x = torch.randn(3, 4)
y1 = eager(x)
calls = []
orig = sys._getframe


def spy(*a):
    calls.append(a)
    return orig(*a) if not a else orig(a[0] + 1)


sys._getframe = spy
flag[0] = True  # "dynamo is tracing"
y2 = traced(x)
flag[0] = False
sys._getframe = orig
print("same=%s" % bool(torch.equal(y1, y2)))
print("getframe_calls=%d" % len(calls))
utils = types.ModuleType("torch._dynamo.utils")
utils.counters = {"stats": {"unique_graphs": 2}}
sys.modules["torch._dynamo.utils"] = utils
print("py_compile: ok")
