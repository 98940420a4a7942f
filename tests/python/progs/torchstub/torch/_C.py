"""Stand-in for torch._C's CUDA allocator bindings (see torch/__init__.py)."""
_oom_observers = []


def _cuda_attach_out_of_memory_observer(observer):
    """observer(device, alloc, device_allocated, device_free), called before the OOM error."""
    _oom_observers.append(observer)
