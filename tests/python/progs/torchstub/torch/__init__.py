"""A stand-in for torch (tests/python, `run --torch-history`): only what the history hook uses, with
PyTorch 2.1+'s names and signatures, written from PyTorch's source (torch/cuda/memory.py:
_record_memory_history, _snapshot, _dump_snapshot; torch/csrc/cuda/Module.cpp:
_cuda_attach_out_of_memory_observer; the snapshot layout of torch/cuda/memory.py's _snapshot
docstring and c10/cuda/CUDACachingAllocator.h). Debian's torch is 1.13 and CPU-only: it has no
such API. The stand-in's "caching allocator" takes 2 MiB-rounded segments from the (simulated)
CUDA runtime with cudaMalloc through ctypes.CDLL (the GIL released, as PyTorch's operators do)
and carves tensors out of them; with history on it records the trace entries PyTorch records.
"""
from . import _C, cuda  # noqa: F401
from .cuda import empty  # noqa: F401

__version__ = "2.1.0+stand-in"
