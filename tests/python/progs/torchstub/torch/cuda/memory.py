"""Stand-in for torch.cuda.memory's history API of PyTorch 2.1+ (see torch/__init__.py)."""
import pickle
import sys

_history_args = None  # what the last _record_memory_history call asked for (for the test)


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                           device=None, clear_history=False):
    """PyTorch 2.1's signature: enabled None | "state" | "all", context None | "state" | "alloc" |
    "all", stacks "python" | "all"."""
    global _history_args
    from . import _State
    if enabled not in (None, "state", "all") or context not in (None, "state", "alloc", "all") \
            or stacks not in ("python", "all"):
        raise ValueError("bad _record_memory_history arguments")
    _history_args = dict(enabled=enabled, context=context, stacks=stacks,
                         max_entries=max_entries)
    _State.recording = enabled == "all"
    _State.max_entries = max_entries
    if clear_history:
        _State.trace.clear()


def _snapshot(device=None):
    from . import _State
    segments = []
    for addr, size, blocks in _State.segments:
        bl, off = [], 0
        for b in sorted(blocks):
            bl.append({"address": addr + b[0], "size": b[1], "requested_size": b[2],
                       "state": "active_allocated" if b[3] else "inactive", "frames": b[4]})
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
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False},
            "external_annotations": []}


def _dump_snapshot(filename="dump_snapshot.pickle"):
    s = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(s, f)
