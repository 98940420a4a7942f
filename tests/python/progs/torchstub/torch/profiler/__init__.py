"""Stand-in for torch.profiler: record_function, as torch/profiler/__init__.py re-exports it."""
from ..autograd.profiler import record_function  # noqa: F401
