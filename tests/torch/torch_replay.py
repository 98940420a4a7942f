#!/usr/bin/env python3
"""Independent replay of a PyTorch memory snapshot (stdlib only), and the check of `gpumemprof
import` + `gpumemprof report --format json` against it.

The replay shares no code and no logic with the C importer: it loads the pickle with an unpickler
whose find_class refuses every global, and follows amounts, not addresses:

  reserved  = bytes of segments: segment_alloc / segment_map add, segment_free / segment_unmap
              subtract;
  allocated = bytes of blocks: alloc adds, free_completed subtracts (free_requested is a request);
  before the window = the state at the dump (final `segments`: total_size of every segment; the
              requested size of every active block) minus the net change of the trace;
  peak = the largest value at the start or after any entry of the device's trace.

Usage:
  torch_replay.py SNAPSHOT                         print the peaks per device (JSON)
  torch_replay.py --check GPUMEMPROF SNAPSHOT DIR  import, report, compare; exit 1 on a difference
  torch_replay.py --roundtrip GPUMEMPROF SNAPSHOT DIR
      import, convert --pytorch-snapshot, then: the exported snapshot replays (here) to the same
      peaks as the original, every segment's blocks add up to its size, and importing it again
      gives the same report peaks
"""
import json
import os
import pickle
import subprocess
import sys


class NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"global {module}.{name} refused")


def load(path):
    with open(path, "rb") as f:
        return NoGlobals(f).load()


def block_bytes(b):
    """What a block counts for: its requested size (the size alloc entries carry)."""
    if "requested_size" in b:
        return b["requested_size"]
    hist = b.get("history")
    if hist:
        return hist[0].get("real_size", b["size"])
    return b["size"]


def replay(snap):
    if isinstance(snap, list):  # legacy: segments only
        segments, traces = snap, []
    else:
        segments, traces = snap["segments"], snap.get("device_traces", [])
    final_res, final_alloc = {}, {}
    for s in segments:
        d = s["device"]
        final_res[d] = final_res.get(d, 0) + s["total_size"]
        for b in s.get("blocks", []):
            if b["state"] in ("active_allocated", "active_pending_free"):
                final_alloc[d] = final_alloc.get(d, 0) + block_bytes(b)
    devices = set(final_res) | {d for d, t in enumerate(traces) if t}
    out = {}
    for d in sorted(devices):
        trace = traces[d] if d < len(traces) else []
        dres = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
        dalloc = {"alloc": 1, "free_completed": -1}
        net_res = sum(dres.get(e["action"], 0) * e["size"] for e in trace)
        net_alloc = sum(dalloc.get(e["action"], 0) * e["size"] for e in trace)
        res = final_res.get(d, 0) - net_res
        alloc = final_alloc.get(d, 0) - net_alloc
        peak_res, peak_alloc = res, alloc
        for e in trace:
            res += dres.get(e["action"], 0) * e["size"]
            alloc += dalloc.get(e["action"], 0) * e["size"]
            peak_res = max(peak_res, res)
            peak_alloc = max(peak_alloc, alloc)
        out[d] = {"peak_reserved_bytes": peak_res, "peak_allocated_bytes": peak_alloc,
                  "start_reserved_bytes": final_res.get(d, 0) - net_res,
                  "start_allocated_bytes": final_alloc.get(d, 0) - net_alloc,
                  "entries": len(trace)}
    return out


def report_peaks(gmp, trace):
    r = subprocess.run([gmp, "report", trace, "--format", "json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"report failed ({r.returncode}): {r.stderr}")
    doc = json.loads(r.stdout)
    # schema 2 leaves "devices" out when no device memory was recorded (an empty snapshot)
    return {d["id"]: d for d in doc.get("devices", [])}


def check(gmp, snapshot, workdir):
    os.makedirs(workdir, exist_ok=True)
    trace = os.path.join(workdir, os.path.basename(snapshot) + ".zst")
    r = subprocess.run([gmp, "import", snapshot, "-o", trace, "--force"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"import failed ({r.returncode}): {r.stderr}", file=sys.stderr)
        return 1
    expected = replay(load(snapshot))
    got = report_peaks(gmp, trace)
    bad = 0
    print(f"{os.path.basename(snapshot)}:")
    for d, e in expected.items():
        g = got.get(d, {})
        for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
            ok = g.get(key) == e[key]
            bad += not ok
            print(f"  device {d} {key:22} python {e[key]:>14}  gpumemprof {g.get(key)!s:>14}"
                  f"  {'ok' if ok else 'DIFFERENT'}")
    for d, g in got.items():
        if d not in expected and (g["peak_allocated_bytes"] or g["peak_reserved_bytes"]):
            print(f"  device {d}: in the report only", file=sys.stderr)
            bad += 1
    return 1 if bad else 0


def peaks_only(replayed):
    return {d: (v["peak_allocated_bytes"], v["peak_reserved_bytes"]) for d, v in replayed.items()
            if v["peak_allocated_bytes"] or v["peak_reserved_bytes"]}


def roundtrip(gmp, snapshot, workdir):
    os.makedirs(workdir, exist_ok=True)
    base = os.path.join(workdir, os.path.basename(snapshot))
    for cmd in ([gmp, "import", snapshot, "-o", base + ".zst", "--force", "--quiet"],
                [gmp, "convert", base + ".zst", "--pytorch-snapshot", base + ".rt.pickle"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{cmd[1]} failed ({r.returncode}): {r.stderr}", file=sys.stderr)
            return 1
    original = peaks_only(replay(load(snapshot)))
    exported_snap = load(base + ".rt.pickle")
    exported = peaks_only(replay(exported_snap))
    bad = 0
    if exported != original:
        print(f"exported snapshot replays to {exported}, the original to {original}",
              file=sys.stderr)
        bad += 1
    for s in exported_snap["segments"]:
        if sum(b["size"] for b in s["blocks"]) != s["total_size"]:
            print(f"segment {s['address']:#x}: blocks do not add up to its size", file=sys.stderr)
            bad += 1
    bad += check(gmp, base + ".rt.pickle", workdir)
    first = report_peaks(gmp, base + ".zst")
    again = report_peaks(gmp, base + ".rt.pickle.zst")
    for d, g in first.items():
        for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
            if again.get(d, {}).get(key) != g[key]:
                print(f"device {d} {key}: {g[key]} imported, {again.get(d, {}).get(key)} after "
                      f"the round trip", file=sys.stderr)
                bad += 1
    print(f"round trip {'ok' if not bad else 'FAILED'}: {original}")
    return 1 if bad else 0


def main(argv):
    if len(argv) == 5 and argv[1] == "--check":
        return check(argv[2], argv[3], argv[4])
    if len(argv) == 5 and argv[1] == "--roundtrip":
        return roundtrip(argv[2], argv[3], argv[4])
    if len(argv) == 2:
        print(json.dumps(replay(load(argv[1])), indent=1, sort_keys=True))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
