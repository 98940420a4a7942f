"""Stand-in for torch.cuda's lazy initialization (see torch/__init__.py), as torch/cuda/__init__.py
has it: Debian's 1.13 copy, /usr/lib/python3/dist-packages/torch/cuda/__init__.py, lines cited,
the same code in 2.x (pytorch/pytorch torch/cuda/__init__.py, is_initialized, _lazy_call,
_lazy_init). Nothing touches CUDA at import; the first CUDA use (a tensor factory, through
torch/csrc/utils/device_lazy_init.cpp, which calls this module's _lazy_init) initializes it and
then runs the calls queued with _lazy_call."""
import os
import threading

from .. import _C
from .._tensor import Tensor, is_grad_enabled
from . import memory  # noqa: F401

_initialized = False  # 1.13 :33
_tls = threading.local()
_initialization_lock = threading.Lock()
_queued_calls = []  # "don't invoke these until initialization occurs" (1.13 :36)
_is_in_bad_fork = _C._cuda_isInBadFork  # 1.13 :37
OutOfMemoryError = _C.OutOfMemoryError


class DeferredCudaCallError(Exception):
    pass


def is_initialized():
    """1.13 :158-160: _initialized and not _is_in_bad_fork()."""
    return _initialized and not _is_in_bad_fork()


def _lazy_call(callable, **kwargs):
    """1.13 :163-177: run now when initialized, else queue for _lazy_init."""
    if is_initialized():
        callable()
    else:
        _queued_calls.append((callable, "(stand-in: no traceback)"))


def init():
    _lazy_init()


def _lazy_init():
    """1.13 :201-248: _cuda_init (cuInit and the allocator), then the queued calls, any of whose
    errors becomes DeferredCudaCallError raised into the program."""
    global _initialized
    if is_initialized() or hasattr(_tls, "is_initializing"):
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                "multiprocessing, you must use the 'spawn' start method")
        if "CUDA_MODULE_LOADING" not in os.environ:
            os.environ["CUDA_MODULE_LOADING"] = "LAZY"
        _C._cuda_init()
        _tls.is_initializing = True
        try:
            for queued_call, orig_traceback in _queued_calls:
                try:
                    queued_call()
                except Exception as e:
                    raise DeferredCudaCallError(
                        "CUDA call failed lazily at initialization with error: %s\n\n"
                        "CUDA call was originally invoked at:\n\n%s" % (e, orig_traceback)) from e
        finally:
            delattr(_tls, "is_initializing")
        _initialized = True


def device_count():
    _lazy_init()
    return _C._cuda_getDeviceCount()


def empty(nbytes, device="cuda", requires_grad=False):
    """A tensor of nbytes (rounded to 512) on the device (torch.empty's path: device_lazy_init,
    then the allocator)."""
    _lazy_init()
    return Tensor(nbytes, requires_grad=requires_grad and is_grad_enabled())


def zeros(rows, cols, requires_grad=False):
    _lazy_init()
    return Tensor(rows * cols * 4, (rows, cols), requires_grad)
