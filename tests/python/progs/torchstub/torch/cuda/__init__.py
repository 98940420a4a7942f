"""Stand-in for torch.cuda: a small caching allocator over the CUDA runtime (see torch/__init__.py)."""
import ctypes
import os
import sys
import time
import traceback

from .. import _C
from . import memory  # noqa: F401

# TORCHSTUB_SITE: a site-packages with NVIDIA's CUDA 12 wheels (nvidia/cuda_runtime/lib): loaded by
# path with RTLD_GLOBAL as torch/__init__.py's _load_global_deps does for a pip-installed torch
_site = os.environ.get("TORCHSTUB_SITE")
if _site:
    _rt = ctypes.CDLL(os.path.join(_site, "nvidia", "cuda_runtime", "lib", "libcudart.so.12"),
                      mode=ctypes.RTLD_GLOBAL)
else:
    _rt = ctypes.CDLL("libcudart.so.13")
_rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
_rt.cudaMalloc.restype = ctypes.c_int
_rt.cudaFree.argtypes = [ctypes.c_void_p]
_rt.cudaFree.restype = ctypes.c_int
SEGMENT = 2 << 20
LIMIT = int(os.environ.get("TORCHSTUB_LIMIT", str(1 << 40)))  # bytes of segments allowed


class OutOfMemoryError(RuntimeError):
    pass


class _State:
    recording = False
    context = stacks = None
    max_entries = sys.maxsize
    trace = []
    segments = []  # [address, size, [[offset, size, requested, live, frames]]]
    reserved = 0


def _frames(skip):
    """The caller's Python frames, innermost first, as PyTorch records them."""
    st = traceback.extract_stack()[:-skip]
    return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(st)]


def _record(action, addr, size, frames):
    if not _State.recording:
        return
    _State.trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                         "time_us": int(time.time() * 1e6), "frames": frames})
    del _State.trace[:-_State.max_entries]


class Tensor:
    def __init__(self, seg, block, nbytes):
        self._seg, self._block, self.nbytes = seg, block, nbytes
        self.data_ptr = seg[0] + block[0]

    def free(self):
        if self._block[3]:
            self._block[3] = False
            fr = _frames(2) if _State.recording else []
            _record("free_requested", self.data_ptr, self._block[1], fr)
            _record("free_completed", self.data_ptr, self._block[1], fr)


def empty(nbytes, device="cuda"):
    """A tensor of nbytes (rounded to 512) on the device."""
    size = (int(nbytes) + 511) // 512 * 512
    fr = _frames(2) if _State.recording else []
    for seg in _State.segments:
        used = sum(b[1] for b in seg[2])
        if seg[1] - used >= size:
            block = [used, size, nbytes, True, fr]
            seg[2].append(block)
            _record("alloc", seg[0] + used, size, fr)
            return Tensor(seg, block, nbytes)
    ssize = (size + SEGMENT - 1) // SEGMENT * SEGMENT
    p = ctypes.c_void_p()
    if _State.reserved + ssize > LIMIT or _rt.cudaMalloc(ctypes.byref(p), ssize) != 0:
        _record("oom", 0, size, fr)
        for obs in list(_C._oom_observers):
            obs(0, size, _State.reserved, LIMIT - _State.reserved)
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes" % size)
    _State.reserved += ssize
    seg = [p.value, ssize, []]
    _State.segments.append(seg)
    _record("segment_alloc", p.value, ssize, fr)
    block = [0, size, nbytes, True, fr]
    seg[2].append(block)
    _record("alloc", p.value, size, fr)
    return Tensor(seg, block, nbytes)
