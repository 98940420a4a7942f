#!/usr/bin/python3
"""The oracle for `gpumemprof report --json` of the real PyTorch snapshots: per device the peak
allocated, the peak reserved and the maximum fragmentation, the allocations that fail (OOM) and the
tensor allocations inside each record_function annotation, all computed here from the pickle alone
with Python's own pickle module (Debian's /usr/bin/python3 runs it in ctest), then compared with the
report of the same snapshot.

Written from PyTorch's definitions, not from the C importer:

  - a trace entry (torch/csrc/cuda/memory_snapshot.cpp, _memory_snapshot_pickled, pytorch
    127b7ad:423-444) is one of alloc, free_requested, free_completed, segment_alloc, segment_free,
    segment_map, segment_unmap, oom, snapshot; `size` is the block's requested size for the block
    actions (what memory_viz draws);
  - allocated = bytes of live blocks: + alloc, - free_completed (free_requested only asks);
  - reserved = bytes of segments: + segment_alloc / segment_map, - segment_free / segment_unmap;
  - memory from before the recorded window = the state at the dump (every segment's total_size,
    the requested size of every active block in the final `segments`) minus the window's net change;
  - fragmentation = reserved - allocated (0 when negative); its maximum is taken at the start of
    the window and after every entry; a peak the same way;
  - an `oom` entry is one failed allocation of its device;
  - `external_annotations` (memory_snapshot.cpp:446-455) are {name, stage START|END, device,
    time_us}: a START opens the range `name` on its device, the next END of that name closes it;
    the allocations inside it are the device's alloc entries whose time_us lies within
    [START, END] (an END missing: the range runs to the end of the trace); an END without its
    START, and an item of another shape, are no range.

Usage:
  torch_oracle.py SNAPSHOT                        print what the replay gives (JSON)
  torch_oracle.py --check GPUMEMPROF SNAPSHOT DIR  compare with `report --format json`; exit 1 on a
                                                   difference
"""
import json
import os
import pickle
import subprocess
import sys

MIB = 1 << 20
RESERVE = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
ALLOCATE = {"alloc": 1, "free_completed": -1}


class PlainData(pickle.Unpickler):
    """A snapshot is plain data: any global in it is refused."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"global {module}.{name} refused")


def requested(block):
    if "requested_size" in block:
        return block["requested_size"]
    return block["size"]


def replay(snap):
    segments = snap if isinstance(snap, list) else snap["segments"]
    traces = [] if isinstance(snap, list) else snap.get("device_traces", [])
    annotations = [] if isinstance(snap, list) else snap.get("external_annotations", [])
    at_dump_res, at_dump_alloc = {}, {}
    for s in segments:
        d = s["device"]
        at_dump_res[d] = at_dump_res.get(d, 0) + s["total_size"]
        for b in s.get("blocks", []):
            if b["state"] in ("active_allocated", "active_pending_free"):
                at_dump_alloc[d] = at_dump_alloc.get(d, 0) + requested(b)
    devices = sorted(set(at_dump_res) | {d for d, t in enumerate(traces) if t})
    out = {}
    for d in devices:
        trace = traces[d] if d < len(traces) else []
        res = at_dump_res.get(d, 0) - sum(RESERVE.get(e["action"], 0) * e["size"] for e in trace)
        alloc = at_dump_alloc.get(d, 0) - sum(ALLOCATE.get(e["action"], 0) * e["size"]
                                              for e in trace)
        peak_res, peak_alloc, frag_max = res, alloc, max(res - alloc, 0)
        ooms = 0
        for e in trace:
            res += RESERVE.get(e["action"], 0) * e["size"]
            alloc += ALLOCATE.get(e["action"], 0) * e["size"]
            peak_res = max(peak_res, res)
            peak_alloc = max(peak_alloc, alloc)
            frag_max = max(frag_max, res - alloc)
            ooms += e["action"] == "oom"
        out[d] = {"peak_allocated_bytes": peak_alloc, "peak_reserved_bytes": peak_res,
                  "fragmentation_max_bytes": frag_max, "failed": ooms, "ranges": {}}
    # record_function ranges: START and END paired by name on each device
    opened = {}
    closed = []
    annotations = [a for a in annotations if isinstance(a, dict) and
                   isinstance(a.get("name"), str) and a.get("stage") in ("START", "END") and
                   type(a.get("device")) is int and a["device"] >= 0 and
                   type(a.get("time_us")) is int]
    for a in sorted(annotations, key=lambda a: a["time_us"]):
        key = (a["device"], a["name"])
        if a["stage"] == "START":
            opened.setdefault(key, []).append(a["time_us"])
        elif a["stage"] == "END" and opened.get(key):
            closed.append((key, opened[key].pop(), a["time_us"]))
    for key, starts in opened.items():
        closed.extend((key, t, None) for t in starts)
    for (d, name), t0, t1 in closed:
        trace = traces[d] if d < len(traces) else []
        n = sum(1 for e in trace if e["action"] == "alloc" and e["time_us"] >= t0 and
                (t1 is None or e["time_us"] <= t1))
        if d in out:
            out[d]["ranges"][name] = out[d]["ranges"].get(name, 0) + n
    return out


def load(path):
    with open(path, "rb") as f:
        return PlainData(f).load()


def report(gmp, snapshot):
    r = subprocess.run([gmp, "report", snapshot, "--format", "json"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SystemExit(f"report failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def range_allocs(doc, device):
    """Allocations by range name in the report's per-range table of a device."""
    out = {}
    for r in doc.get("ranges", []):
        if r.get("device", device) != device:
            continue
        name = r.get("path", r.get("name", "")).split("/")[-1]
        out[name] = out.get(name, 0) + r.get("allocations", 0)
    return out


def check(gmp, snapshot, workdir):
    os.makedirs(workdir, exist_ok=True)
    expected = replay(load(snapshot))
    doc = report(gmp, snapshot)
    got = {d["id"]: d for d in doc.get("devices", [])}
    bad = 0
    print(f"{os.path.basename(snapshot)}:")

    def line(d, key, want, have, ok):
        nonlocal bad
        bad += not ok
        print(f"  device {d} {key:26} oracle {want!s:>14}  gpumemprof {have!s:>14}"
              f"  {'ok' if ok else 'DIFFERENT'}")

    for d, e in expected.items():
        g = got.get(d, {})
        for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
            line(d, key, e[key], g.get(key), g.get(key) == e[key])
        have = g.get("fragmentation_max_bytes")
        line(d, "fragmentation_max_bytes", e["fragmentation_max_bytes"], have,
             have is not None and abs(have - e["fragmentation_max_bytes"]) <= MIB)
        have = g.get("failed_allocations")
        line(d, "failed allocations", e["failed"], have, have == e["failed"])
        ranges = range_allocs(doc, d)
        for name, n in sorted(e["ranges"].items()):
            line(d, f"allocs in {name[:40]}", n, ranges.get(name), ranges.get(name) == n)
    with open(os.path.join(workdir, os.path.basename(snapshot) + ".oracle.json"), "w") as f:
        json.dump({str(k): v for k, v in expected.items()}, f, indent=1, sort_keys=True)
    return 1 if bad else 0


def main(argv):
    if len(argv) == 5 and argv[1] == "--check":
        return check(argv[2], argv[3], argv[4])
    if len(argv) == 2:
        print(json.dumps(replay(load(argv[1])), indent=1, sort_keys=True))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
