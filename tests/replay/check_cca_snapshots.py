"""The caching-allocator model (formats/replay/gmp_cca_model.h) against what PyTorch really did.

Each real snapshot of tests/data/torch-snapshots whose window holds segment_alloc events, frees only
blocks it allocated and uses no expandable segments is replayed from an empty model (memory held
before the window is not modelled; the peak compared is that of the window's own segments): its `alloc` and
`free_completed` entries go through the model (loaded with ctypes from a shared build of the one
source file), a burst of recorded `segment_free` as one empty_cache, and the model's segments are
compared with the recorded `segment_alloc` entries. Python's own pickle module reads the snapshots
(an oracle the model's author did not write). Checked: the number of segments, the peak reserved
within the window, the multiset of segment sizes, and for small-step the segment sizes in order.

usage: check_cca_snapshots.py LIBRARY SNAPSHOT_DIR"""
import ctypes
import os
import pickle
import sys


class Cfg(ctypes.Structure):
    _fields_ = [("max_split_size", ctypes.c_uint64), ("capacity", ctypes.c_uint64),
                ("roundup_power2_divisions", ctypes.c_uint32),
                ("expandable_segments", ctypes.c_uint32),
                ("garbage_collection_threshold", ctypes.c_double)]


class Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "reserved", "peak_reserved", "allocated", "peak_allocated", "segments_alloc",
        "segments_freed", "alloc_retries", "ooms")]


def load(path):
    lib = ctypes.CDLL(path)
    lib.gmp_cca_create.restype = ctypes.c_void_p
    lib.gmp_cca_create.argtypes = [ctypes.POINTER(Cfg)]
    lib.gmp_cca_destroy.argtypes = [ctypes.c_void_p]
    lib.gmp_cca_alloc.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64,
                                  ctypes.POINTER(ctypes.c_uint32)]
    lib.gmp_cca_free.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.gmp_cca_empty_cache.argtypes = [ctypes.c_void_p]
    lib.gmp_cca_get_stats.restype = ctypes.POINTER(Stats)
    lib.gmp_cca_get_stats.argtypes = [ctypes.c_void_p]
    return lib


def replay(lib, trace):
    """Returns (recorded segment sizes, model segment sizes, recorded peak, model stats)."""
    m = lib.gmp_cca_create(ctypes.byref(Cfg()))
    assert m
    st = lib.gmp_cca_get_stats(m).contents
    ids, rec, model = {}, [], []
    reserved = peak = 0
    last = None
    for e in trace:
        a = e["action"]
        if a == "segment_alloc":
            rec.append(e["size"])
            reserved += e["size"]
            peak = max(peak, reserved)
        elif a == "segment_free":
            reserved -= e["size"]
            if last != "segment_free":
                lib.gmp_cca_empty_cache(m)
        elif a == "alloc":
            before, r0 = st.segments_alloc, st.reserved
            out = ctypes.c_uint32()
            assert lib.gmp_cca_alloc(m, e["size"], e["stream"], ctypes.byref(out)) == 0
            ids[e["addr"]] = out.value
            if st.segments_alloc > before:
                model.append(st.reserved - r0)
        elif a == "free_completed":
            assert e["addr"] in ids, "a free of memory allocated before the window"
            assert lib.gmp_cca_free(m, ids.pop(e["addr"])) == 0
        last = a
    result = (rec, model, peak, Stats.from_buffer_copy(st))
    lib.gmp_cca_destroy(m)
    return result


def main():
    lib = load(sys.argv[1])
    data = sys.argv[2]
    checked = 0
    for name in ("small-step.pickle", "transformer-train-step-adamw.pickle"):
        with open(os.path.join(data, name), "rb") as f:
            snap = pickle.load(f)
        settings = snap["allocator_settings"]
        assert not settings["expandable_segments"] and settings["max_split_size"] == -1
        trace = snap["device_traces"][0]
        rec, model, peak, st = replay(lib, trace)
        print(f"{name}: recorded {len(rec)} segments, peak reserved {peak}; "
              f"model {len(model)} segments, peak reserved {st.peak_reserved}")
        assert rec, name
        assert len(model) == len(rec), (name, len(model), len(rec))
        assert st.peak_reserved == peak, (name, st.peak_reserved, peak)
        assert sorted(model) == sorted(rec), name
        if name == "small-step.pickle":
            assert model == rec, (model, rec)
        checked += 1
    assert checked == 2
    print("ok")


if __name__ == "__main__":
    main()
