"""A stand-in for torch (tests/python: `run --torch-history`, `--layers` with it): only what the
agent's sitecustomize uses, with PyTorch 2.x's names, signatures and order of effects, each
written from PyTorch's source (cited where it is modelled; "2.1" is pytorch/pytorch's
torch/csrc/cuda/memory_snapshot.cpp at 0006736, "2.6+" the same file at 127b7ad, "1.13" Debian's
python3-torch 1.13 in /usr/lib/python3/dist-packages/torch, whose torch/cuda/__init__.py has
the same lazy initialization as 2.x). Debian's torch is 1.13 and CPU-only: it has no history API.

What it models, and where:
  torch/_C.py          the C++ side: CUDA's lazy initialization (lazyInitDevice: cuInit through
                       the CUDA runtime, so the simulated driver loads the agent there and not at
                       import), the allocator backend chosen when the library loads and its
                       options read at the first CUDA use, the caching allocator and its history
                       (trace entries with user_metadata, external_annotations), the
                       cudaMallocAsync backend's refusals, the OOM observer, fork poisoning
  torch/cuda/          the Python side: _lazy_init/_lazy_call/is_initialized, memory.py's
                       _record_memory_history/_set_memory_metadata/_snapshot/_dump_snapshot
  torch/nn/            Module.__call__ with the global forward hooks, Linear, ModuleList
  torch/autograd/      tensor hooks and backward() on an engine thread; record_function
The stand-in's "caching allocator" takes 2 MiB-rounded segments from the (simulated) CUDA runtime
with cudaMalloc through ctypes.CDLL (the GIL released, as PyTorch's operators do) and carves
tensors out of them; with history on it records the trace entries PyTorch records.
"""
from . import _C  # noqa: F401  (loads the "library": the allocator backend is chosen now)
from ._tensor import Tensor, is_grad_enabled, no_grad  # noqa: F401
from . import cuda  # noqa: F401
from .cuda import empty  # noqa: F401
from . import autograd, nn, profiler  # noqa: F401

__version__ = "2.6.0+stand-in"
