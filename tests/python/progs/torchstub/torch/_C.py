"""Stand-in for torch._C's CUDA side (the C++ code; see torch/__init__.py for the sources cited).

Initialization, as PyTorch does it:
- The allocator backend is chosen when the library loads, i.e. inside `import torch`
  (c10/cuda/CUDACachingAllocator.cpp, BackendStaticInitializer::parseEnvForBackend: "Parses env
  for backend at load time"); its other options are read at the first CUDA use, when
  CUDAAllocatorConfig::instance() is first asked (CUDACachingAllocator::init, 2.x before the
  config moved to load time). Which variable is read: c10/cuda/CUDAAllocatorConfig.h
  CUDAAllocatorConfig::instance(), one of two orders by version (TORCHSTUB_CONF_ORDER picks):
  "cuda" (default) PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF (the version with "keep the
  parsing order and logic stable"); "alloc" PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF
  (the version with use_async_allocator). Only one of the two is ever parsed.
- lazy_init_device() is at::globalContext().lazyInitDevice(CUDA) (once): CUDAHooks::init,
  device_count_ensure_non_zero (cudaGetDeviceCount: cuInit, where the driver, here the simulated
  one, loads CUDA_INJECTION64_PATH and reads CUDA_VISIBLE_DEVICES), then the allocator's init.
- _cuda_init() is THCPModule_initExtension (torch/csrc/cuda/Module.cpp): poison_fork() (a forked
  child's torch.cuda._lazy_init then refuses: "Cannot re-initialize CUDA in forked subprocess")
  and lazyInitDevice. _cuda_record_memory_history reaches lazyInitDevice directly
  (torch/csrc/cuda/memory_snapshot.cpp, both overloads of _record_memory_history: lazyInitCUDA()
  in 2.1, lazyInitDevice(c10::DeviceType::CUDA) in 2.6+, before recordHistory), without
  poison_fork and without running torch.cuda's queued calls.
- CUDA does not survive a fork after cuInit: a forked child that uses a device initialized by
  its parent fails with "CUDA error: initialization error" (cudaErrorInitializationError).
"""
import ctypes
import os
import sys
import threading
import time
import traceback

_site = os.environ.get("TORCHSTUB_SITE")
if _site:
    # a pip-installed torch: its CUDA 12 runtime from site-packages/nvidia/cuda_runtime/lib,
    # loaded by path with RTLD_GLOBAL (torch/__init__.py's _load_global_deps)
    _rt = ctypes.CDLL(os.path.join(_site, "nvidia", "cuda_runtime", "lib", "libcudart.so.12"),
                      mode=ctypes.RTLD_GLOBAL)
else:
    _rt = ctypes.CDLL("libcudart.so.13")
_rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
_rt.cudaMalloc.restype = ctypes.c_int
_rt.cudaFree.argtypes = [ctypes.c_void_p]
_rt.cudaFree.restype = ctypes.c_int
_rt.cudaGetDeviceCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
_rt.cudaGetDeviceCount.restype = ctypes.c_int
if hasattr(_rt, "cudaMallocAsync"):  # CUDA 11.2+ runtimes
    _rt.cudaMallocAsync.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                    ctypes.c_void_p]
    _rt.cudaMallocAsync.restype = ctypes.c_int
    _rt.cudaFreeAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    _rt.cudaFreeAsync.restype = ctypes.c_int

SEGMENT = 2 << 20
LIMIT = int(os.environ.get("TORCHSTUB_LIMIT", str(1 << 40)))  # bytes of segments allowed
ASYNC_REFUSAL = ("cudaMallocAsync does not yet support %s. If you need it, please file an issue "
                 "describing your use case.")  # c10/cuda/CUDAMallocAsyncAllocator.cpp


def _conf():
    """CUDAAllocatorConfig::instance()'s variable: (name, value) or (None, None)."""
    order = ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]
    if os.environ.get("TORCHSTUB_CONF_ORDER") == "alloc":
        order.reverse()
    for k in order:
        if k in os.environ:
            return k, os.environ[k]
    return None, None


def _options(value):
    out = {}
    for item in (value or "").replace(" ", ",").split(","):
        k, _, v = item.partition(":")
        if k:
            out[k] = v
    return out


# the library is loading (import torch): the backend is chosen now
backend = _options(_conf()[1]).get("backend", "native")


class _State:
    init_pid = None  # lazyInitDevice ran in this process (or in the parent of a fork)
    visible_at_init = None  # CUDA_VISIBLE_DEVICES as the driver read it at cuInit
    device_count = 0
    settings = {}  # the allocator's options, read at lazyInitDevice
    settings_from = (None, None)
    in_bad_fork = False
    poisoned = False
    recording = False
    context = stacks = None
    max_entries = sys.maxsize
    annotations_on = False
    trace = []
    annotations = []
    segments = []  # [address, size, [[offset, size, requested, frames]]] (live blocks)
    reserved = 0
    oom_observers = []


_lock = threading.RLock()
_meta = threading.local()  # DeviceCachingAllocator::user_metadata is `static thread_local`


def lazy_init_device():
    """at::globalContext().lazyInitDevice(c10::DeviceType::CUDA)."""
    with _lock:
        if _State.init_pid is not None:
            if _State.init_pid != os.getpid():
                raise RuntimeError("CUDA error: initialization error")
            return
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        n = ctypes.c_int(0)
        rc = _rt.cudaGetDeviceCount(ctypes.byref(n))  # cuInit: the driver loads the injection
        if rc != 0 or n.value <= 0:
            raise RuntimeError("No CUDA GPUs are available")
        _State.visible_at_init = visible
        _State.device_count = n.value
        _State.settings_from = _conf()
        _State.settings = _options(_State.settings_from[1])
        _State.init_pid = os.getpid()


def _child_after_fork():
    _State.in_bad_fork = True


def _cuda_init():
    """THCPModule_initExtension: poison_fork(), then lazyInitDevice."""
    if not _State.poisoned:
        _State.poisoned = True
        os.register_at_fork(after_in_child=_child_after_fork)
    lazy_init_device()


def _cuda_isInBadFork():
    return _State.in_bad_fork


def _cuda_getDeviceCount():
    return _State.device_count


def _check_in(option, valid, error):
    if option not in valid:
        raise RuntimeError(error)


def _cuda_record_memory_history(enabled, context, stacks, max_entries, clear_history=False,
                                compile_context=False, global_record_annotations=False):
    """torch::cuda::_record_memory_history (memory_snapshot.cpp, the string overload)."""
    if enabled is not None:
        _check_in(enabled, ("state", "all"), "expected state to be 'state', 'all', or None")
    if context is not None:
        _check_in(context, ("state", "alloc", "all"),
                  "expected context to be 'state', 'alloc', 'all', or None")
    _check_in(stacks, ("python", "all"), "expected stacks to be 'python', or 'all'")
    lazy_init_device()
    # setRecordFunctionCallbacks: USER_SCOPE record_function START/END become annotations
    _State.annotations_on = enabled is not None
    if backend == "cudaMallocAsync":
        raise RuntimeError(ASYNC_REFUSAL % "recordHistory")
    with _lock:
        _State.recording = enabled == "all"
        _State.context, _State.stacks = context, stacks
        _State.max_entries = max_entries if enabled == "all" else 1
        if enabled is None or clear_history:
            _State.trace.clear()


def _cuda_attach_out_of_memory_observer(observer):
    """observer(device, alloc, device_allocated, device_free), called before the OOM error.
    NativeCachingAllocator::attachOutOfMemoryObserver hands it to each device allocator that
    init() created: before the first CUDA use there is none, and the observer is dropped."""
    if backend == "cudaMallocAsync":
        raise RuntimeError(ASYNC_REFUSAL % "attachOutOfMemoryObserver")
    if _State.init_pid == os.getpid():
        _State.oom_observers.append(observer)


def _cuda_setMemoryMetadata(metadata):
    _meta.value = str(metadata)


def _cuda_getMemoryMetadata():
    return getattr(_meta, "value", "")


def record_annotation(name, stage):
    """recordAnnotation from memory_snapshot.cpp's RecordFunction callback (USER_SCOPE)."""
    if _State.annotations_on:
        with _lock:
            _State.annotations.append({"stage": stage, "name": name, "device": 0,
                                       "time_us": int(time.time() * 1e6)})


_here = os.path.dirname(os.path.abspath(__file__))
# the files that stand for PyTorch's C++ (the allocator, the tensor factories): no Python frames
_native = {os.path.join(_here, f) for f in ("_C.py", "_tensor.py")} | \
    {os.path.join(_here, "cuda", "__init__.py")}


def _frames():
    """The caller's Python frames, innermost first, as PyTorch records them (its own Python
    code, such as torch/nn/modules, included; the code standing for C++ left out)."""
    st = [f for f in traceback.extract_stack() if os.path.abspath(f.filename) not in _native]
    return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(st)]


def _record(action, addr, size, frames):
    # CUDACachingAllocator's record_trace: every entry carries the recording thread's
    # user_metadata and the compile context ("N/A" outside compiled regions); a block's entries
    # carry the size the program asked for (orig_size / block->requested_size), not the
    # 512-rounded block (the real snapshots of tests/data have alloc entries of 1, 4, 16 bytes)
    if not _State.recording:
        return
    _State.trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                         "time_us": int(time.time() * 1e6), "frames": frames,
                         "compile_context": "N/A", "user_metadata": _cuda_getMemoryMetadata()})
    del _State.trace[:-_State.max_entries]


class OutOfMemoryError(RuntimeError):
    pass


def malloc(nbytes):
    """A block of nbytes (rounded to 512) from the caching allocator: (address, handle)."""
    lazy_init_device()
    size = (int(nbytes) + 511) // 512 * 512
    if backend == "cudaMallocAsync":
        # c10/cuda/CUDAMallocAsyncAllocator.cpp (pytorch/pytorch at 0345947; the stored copy has
        # no line numbers): CudaMallocAsyncAllocator::allocate calls mallocAsync only when
        # size != 0 (an empty tensor has no memory); mallocAsync calls cudaMallocAsync(devPtr,
        # size, stream) for each tensor, with the size asked for (no rounding), on the current
        # stream (the default stream here), and on cudaErrorMemoryAllocation raises
        # OutOfMemoryError "Allocation on device N would exceed allowed memory. (out of memory)"
        # followed by its figures (left out here)
        if int(nbytes) == 0:
            return None, None
        p = ctypes.c_void_p()
        if _rt.cudaMallocAsync(ctypes.byref(p), int(nbytes), None) != 0:
            raise OutOfMemoryError("Allocation on device %d would exceed allowed memory. "
                                   "(out of memory)" % 0)  # the stand-in has device 0 only
        return p.value, None
    with _lock:
        fr = _frames() if _State.recording else []
        for seg in _State.segments:
            at = 0  # first fit between the live blocks
            for b in sorted(seg[2], key=lambda b: b[0]):
                if b[0] - at >= size:
                    break
                at = b[0] + b[1]
            if seg[1] - at >= size:
                block = [at, size, nbytes, fr]
                seg[2].append(block)
                _record("alloc", seg[0] + at, nbytes, fr)
                return seg[0] + at, (seg, block)
        ssize = (size + SEGMENT - 1) // SEGMENT * SEGMENT
        p = ctypes.c_void_p()
        if _State.reserved + ssize > LIMIT or _rt.cudaMalloc(ctypes.byref(p), ssize) != 0:
            _record("oom", 0, size, fr)
            for obs in list(_State.oom_observers):
                obs(0, size, _State.reserved, LIMIT - _State.reserved)
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes" % size)
        _State.reserved += ssize
        seg = [p.value, ssize, []]
        _State.segments.append(seg)
        _record("segment_alloc", p.value, ssize, fr)
        block = [0, size, nbytes, fr]
        seg[2].append(block)
        _record("alloc", p.value, nbytes, fr)
        return p.value, (seg, block)


def free(addr, handle):
    if handle is None:  # the cudaMallocAsync backend: freeAsync's cudaFreeAsync(ptr, stream)
        if addr is not None:  # an empty tensor's (allocate made no call): nothing to free
            _rt.cudaFreeAsync(ctypes.c_void_p(addr), None)
        return
    seg, block = handle
    with _lock:
        if block in seg[2]:
            seg[2].remove(block)
            fr = _frames() if _State.recording else []
            _record("free_requested", addr, block[2], fr)
            _record("free_completed", addr, block[2], fr)


def snapshot():
    """_memory_snapshot_pickled's dict (memory_snapshot.cpp, 2.6+)."""
    with _lock:
        segments = []
        for addr, size, blocks in _State.segments:
            bl, off = [], 0
            for b in sorted(blocks, key=lambda b: b[0]):
                if b[0] > off:
                    bl.append({"address": addr + off, "size": b[0] - off, "requested_size": 0,
                               "state": "inactive", "frames": []})
                bl.append({"address": addr + b[0], "size": b[1], "requested_size": b[2],
                           "state": "active_allocated", "frames": b[3]})
                off = b[0] + b[1]
            if off < size:
                bl.append({"address": addr + off, "size": size - off, "requested_size": 0,
                           "state": "inactive", "frames": []})
            active = sum(b["size"] for b in bl if b["state"] == "active_allocated")
            segments.append({"device": 0, "address": addr, "total_size": size,
                             "allocated_size": active, "active_size": active,
                             "requested_size": sum(b["requested_size"] for b in bl
                                                   if b["state"] == "active_allocated"),
                             "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                             "is_expandable": False, "frames": bl[0]["frames"] if bl else [],
                             "blocks": bl})
        return {"segments": segments, "device_traces": [list(_State.trace)],
                "external_annotations": list(_State.annotations),
                "allocator_settings": {
                    "PYTORCH_CUDA_ALLOC_CONF": _State.settings_from[1] or "",
                    "expandable_segments": _State.settings.get("expandable_segments") == "True"}}
