"""The caching-allocator model (formats/replay/gmp_cca_model.h) against what PyTorch really did.

Every real snapshot of SNAPSHOT_DIR is read with Python's own pickle module (an oracle the model's
author did not write); each device whose window holds segment events (segment_alloc / segment_free,
or segment_map / segment_unmap for expandable segments) is replayed through the model (loaded with
ctypes from a shared build of the one source file) under the snapshot's own allocator_settings:
its `alloc` and `free_completed` entries in order, and the recorded `oom` request tried too (it
must fail). A burst of recorded `segment_free` / `segment_unmap` entries followed by a new segment
or map (or an `oom`) is malloc's own release before its retry, which the model does by itself;
any other burst is one torch.cuda.empty_cache(). The model starts empty:
memory held before the window is not modelled, so the peak compared is that of the window's own
segments. Where the recording ran out of memory, the model's capacity is what PyTorch could have
held there (the reserve at the OOM plus the free memory the driver reported).

Checked, per device: the segments created (num_device_alloc: cudaMalloc'ed or mapped) within 10%
and the peak reserved within 2% of the recorded ones; the segment events compared in order, the
first place where the model and the recording part printed with the request that caused it and
the reason, and a parting that is not explained by memory held before the window is a failure;
the recorded OOM request fails in the model too. small-step's segments must match exactly, in order.

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


SEGFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64)
OPS = {0: "segment_alloc", 1: "segment_free", 2: "segment_map", 3: "segment_unmap"}
SEG_ACTIONS = set(OPS.values())


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
    lib.gmp_cca_segments.restype = ctypes.c_size_t
    lib.gmp_cca_segments.argtypes = [ctypes.c_void_p]
    lib.gmp_cca_on_segment.argtypes = [ctypes.c_void_p, SEGFN, ctypes.c_void_p]
    return lib


def own_config(settings):
    """The snapshot's allocator_settings as the model's config (what PyTorch ran with)."""
    cfg = Cfg()
    ms = settings.get("max_split_size", -1)
    cfg.max_split_size = 0 if ms in (-1, None) or ms >= (1 << 63) else ms
    cfg.expandable_segments = 1 if settings.get("expandable_segments") else 0
    cfg.garbage_collection_threshold = settings.get("garbage_collection_threshold", 0.0) or 0.0
    div = settings.get("roundup_power2_divisions") or {}
    vals = set(div.values()) if isinstance(div, dict) else {div}
    if len(vals) > 1:
        return None  # a per-size roundup_power2_divisions is not modelled
    cfg.roundup_power2_divisions = vals.pop() if vals else 0
    return cfg


def oom_capacity(trace):
    """Reserve at the first recorded OOM plus the driver's free memory there; 0 without one."""
    run = 0
    for e in trace:
        a = e["action"]
        if a in ("segment_alloc", "segment_map"):
            run += e["size"]
        elif a in ("segment_free", "segment_unmap"):
            run -= e["size"]
        elif a == "oom":
            return run + e["device_free"]
    return 0


def replay(lib, trace, cfg):
    m = lib.gmp_cca_create(ctypes.byref(cfg))
    assert m
    model = []  # (action, size, index in the trace of the request that caused it)
    cur = [None]

    def on_seg(_ctx, op, _addr, size):
        model.append((OPS[op], size, cur[0]))

    fn = SEGFN(on_seg)
    lib.gmp_cca_on_segment(m, fn, None)
    st = lib.gmp_cca_get_stats(m).contents
    ids, rec = {}, []
    reserved = peak = 0
    last = None
    oom_failed = []
    pre_frees = 0
    frees = ("segment_free", "segment_unmap")
    for k, e in enumerate(trace):
        a = e["action"]
        cur[0] = k
        if a in SEG_ACTIONS:
            rec.append((a, e["size"], k))
            reserved += e["size"] if a in ("segment_alloc", "segment_map") else -e["size"]
            peak = max(peak, reserved)
            if a in frees and last not in frees:
                j = k
                while j < len(trace) and trace[j]["action"] in frees:
                    j += 1
                if j == len(trace) or trace[j]["action"] not in (
                        "segment_alloc", "segment_map", "oom"):
                    lib.gmp_cca_empty_cache(m)  # not malloc's retry: an empty_cache
        elif a == "alloc":
            out = ctypes.c_uint32()
            assert lib.gmp_cca_alloc(m, e["size"], e["stream"], ctypes.byref(out)) == 0, (k, e["size"])
            ids[e["addr"]] = out.value
        elif a == "free_completed":
            if e["addr"] not in ids:
                pre_frees += 1  # memory allocated before the window: the model never held it
                continue
            assert lib.gmp_cca_free(m, ids.pop(e["addr"])) == 0
        elif a == "oom":
            out = ctypes.c_uint32()
            oom_failed.append(lib.gmp_cca_alloc(m, e["size"], e["stream"], ctypes.byref(out)) == 1)
        last = a
    res = dict(rec=rec, model=model, peak=peak, st=Stats.from_buffer_copy(st),
               held=lib.gmp_cca_segments(m), oom_failed=oom_failed, pre_frees=pre_frees)
    lib.gmp_cca_destroy(m)
    return res


def pre_window(snap, dev, trace):
    """Segments alive at the dump that the window did not create (held before it)."""
    made = {e["addr"] for e in trace if e["action"] in ("segment_alloc", "segment_map")}
    return [s for s in snap.get("segments", []) if s.get("device") == dev and
            s["address"] not in made and not s.get("is_expandable")]


def parting(trace, res, pre):
    """Where the model's segment events and the recorded ones part, and why (None: they agree)."""
    rec, model = res["rec"], res["model"]
    for i in range(max(len(rec), len(model))):
        r = rec[i] if i < len(rec) else None
        mo = model[i] if i < len(model) else None
        if r and mo and r[0] == mo[0] and r[1] == mo[1]:
            continue
        where = "event %d: recorded %s, model %s" % (
            i, "%s %d B (trace entry %d)" % r if r else "nothing",
            "%s %d B (for trace entry %d: %s %s B)" % (mo[0], mo[1], mo[2],
                                                       trace[mo[2]]["action"],
                                                       trace[mo[2]].get("size"))
            if mo else "nothing")
        if pre or res["pre_frees"]:
            small = [s for s in pre if s.get("segment_type") == "small"]
            room = sum(s["total_size"] - s["allocated_size"] for s in small)
            why = ("memory held before the window: %d segments (%d B) the model starts without, "
                   "%d of them in the small pool with %d B of free room at the dump; %d frees "
                   "of blocks allocated before the window" % (
                       len(pre), sum(s["total_size"] for s in pre), len(small), room,
                       res["pre_frees"]))
            return where, why, True
        return where, "no reason known (a rule missing from the model?)", False
    return None


def main():
    lib = load(sys.argv[1])
    data = sys.argv[2]
    fails = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            fails.append(what)

    devices = 0
    for name in sorted(f for f in os.listdir(data) if f.endswith(".pickle")):
        with open(os.path.join(data, name), "rb") as f:
            snap = pickle.load(f)
        base = name[:-len(".pickle")]
        for dev, trace in enumerate(snap.get("device_traces", [])):
            if not any(e["action"] in SEG_ACTIONS for e in trace):
                if trace:
                    print("     %s device %d: no segment event in the window, not compared" % (
                        base, dev))
                continue
            cfg = own_config(snap.get("allocator_settings") or {})
            if cfg is None:
                print("     %s device %d: a per-size roundup_power2_divisions, not modelled" % (
                    base, dev))
                continue
            cfg.capacity = oom_capacity(trace)
            res = replay(lib, trace, cfg)
            st, rec = res["st"], res["rec"]
            nrec = sum(1 for r in rec if r[0] in ("segment_alloc", "segment_map"))
            tag = "%s device %d" % (base, dev)
            devices += 1
            print("     %s (%s, capacity %d): segments recorded %d / model %d; peak reserved "
                  "recorded %d / model %d; segments held at the end recorded %d / model %d" % (
                      tag, snap["allocator_settings"].get("PYTORCH_CUDA_ALLOC_CONF") or "defaults",
                      cfg.capacity, nrec, st.segments_alloc, res["peak"], st.peak_reserved,
                      sum(1 for s in snap.get("segments", []) if s.get("device") == dev),
                      res["held"]))
            check(abs(st.segments_alloc - nrec) <= 0.10 * nrec, tag + ": segments within 10%")
            check(abs(st.peak_reserved - res["peak"]) <= 0.02 * res["peak"],
                  tag + ": peak reserved within 2%")
            part = parting(trace, res, pre_window(snap, dev, trace))
            if part is None:
                print("     %s: the %d segment events agree in order (action and size)" % (
                    tag, len(rec)))
            else:
                print("     %s: they part at %s\n          why: %s" % (tag, part[0], part[1]))
            check(part is None or part[2], tag + ": segments in order, or parted for a known reason")
            if res["oom_failed"]:
                check(all(res["oom_failed"]), tag + ": the recorded OOM request fails in the model")
            if base == "small-step":
                check(part is None, tag + ": every segment exactly as recorded, in order")
    check(devices >= 5, "%d devices with segment events compared (small-step, the train step, "
          "qwen3's three)" % devices)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
