"""Stand-in for torch.cuda.memory's history API (see torch/__init__.py), PyTorch 2.6+'s Python side
(pytorch/pytorch torch/cuda/memory.py): _record_memory_history goes straight to the C++ binding
(_C._cuda_record_memory_history), which initializes CUDA itself (lazyInitDevice) and does not
run torch.cuda's queued calls; _set_memory_metadata is _C._cuda_setMemoryMetadata, whose value
is per thread (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator: "thread local user
metadata for annotating allocations", `static thread_local std::string user_metadata`) and is
written into every trace entry that thread records (memory_snapshot.cpp: user_metadata)."""
import pickle
import sys

from .. import _C

_history_args = None  # what the last _record_memory_history call asked for (for the tests)


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                           device=None, clear_history=False, compile_context=False,
                           global_record_annotations=False):
    global _history_args
    _history_args = dict(enabled=enabled, context=context, stacks=stacks,
                         max_entries=max_entries)
    _C._cuda_record_memory_history(enabled, context, stacks, max_entries, clear_history,
                                   compile_context, global_record_annotations)


def _set_memory_metadata(metadata):
    _C._cuda_setMemoryMetadata(metadata)


def _get_memory_metadata():
    return _C._cuda_getMemoryMetadata()


def _snapshot(device=None):
    return _C.snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle"):
    s = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(s, f)
