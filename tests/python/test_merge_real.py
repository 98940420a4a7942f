#!/usr/bin/env python3
"""The merge (gmp_merge_torch) with the real PyTorch snapshots of tests/data/torch-snapshots.

  test_merge_real.py GPUMEMPROF MERGE_REAL DATA_DIR WORK_DIR

No CUPTI trace was recorded with them, so merge_real writes the one CUPTI would have recorded:
the caching allocator's cudaMalloc/cudaFree calls (its segments; expandable segments' memory as
cuMemCreate chunks) on a clock 1000 s ahead of the snapshot's. Read with the snapshot beside it,
the trace must give what the snapshot gives alone (report --format json, per device): peak
allocated, peak reserved and leaked bytes, allocations, the live set at the peak by stack; and
say that it is merged, with no warning; the snapshot's record_function annotations give the
tensors their ranges (the per-range table as alone; 1,164 allocations in the train step's
"Optimizer.step#AdamW.step").
"""
import glob
import json
import os
import shutil
import subprocess
import sys

gmp, tool, data, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMPROF_")}
env["LC_ALL"] = "C"
failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def report(path):
    r = subprocess.run([gmp, "report", "--format", "json", path], capture_output=True,
                       text=True, env=env, timeout=300)
    if r.returncode != 0:
        failures.append(f"report {path}: exit {r.returncode}: {r.stderr}")
        return None, r.stderr
    return json.loads(r.stdout), r.stderr


def peak_set(doc):
    return sorted((e["device"], e["bytes"], e["count"], e.get("range") or "",
                   json.dumps(e["stack"], sort_keys=True)) for e in doc["live_at_peak"])


def range_table(doc):
    return {(r["device"], r["path"]): r["allocations"] for r in doc.get("ranges", [])}


snaps = sorted(glob.glob(os.path.join(data, "*.pickle")))
if not snaps:
    print("no snapshots in " + data)
    sys.exit(1)
for snap in snaps:
    name = os.path.basename(snap)[:-len(".pickle")]
    trace = os.path.join(work, name + ".zst")
    r = subprocess.run([tool, snap, trace], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        failures.append(f"{name}: merge_real: {r.stderr}")
        continue
    alone, _ = report(trace)  # the cudaMalloc calls alone: reserved only
    shutil.copyfile(snap, trace + ".torch.pickle")
    merged, err = report(trace)
    want, _ = report(snap)
    if not (merged and want and alone):
        continue
    if "expandable" in name:  # expandable segments only: not merged yet, the trace alone
        check(f"{name}: one warning, the trace alone",
              ("not merged with" in err and "expandable_segments:True" in err,
               err.count("\n"), merged["devices"], merged["notices"]),
              (True, 1, alone["devices"], alone["notices"]))
        print(f"{name}: not merged (expandable segments), as documented")
        continue
    check(f"{name}: no warning", err, "")
    check(f"{name}: the merged notice",
          any(n["message"].startswith("merged with PyTorch's memory history ") and
              name + ".zst.torch.pickle" in n["message"] for n in merged["notices"]), True)
    keys = ("peak_allocated_bytes", "peak_reserved_bytes", "leaked_bytes", "allocations",
            "frees", "reserved_at_exit_bytes")
    got = {d["id"]: {k: d[k] for k in keys} for d in merged["devices"]}
    exp = {d["id"]: {k: d[k] for k in keys} for d in want["devices"]}
    check(f"{name}: per device, merged = the snapshot alone", got, exp)
    check(f"{name}: reserved = the trace's cudaMalloc calls alone",
          {d["id"]: d["peak_reserved_bytes"] for d in merged["devices"]},
          {d["id"]: d["peak_reserved_bytes"] for d in alone["devices"]})
    check(f"{name}: live at the peak, by range and stack", peak_set(merged), peak_set(want))
    # the snapshot's record_function annotations are the tensors' ranges, merged as alone
    check(f"{name}: the per-range table", range_table(merged), range_table(want))
    if "train-step" in name:
        check(f"{name}: allocations in the optimizer step",
              range_table(merged).get((0, "Optimizer.step#AdamW.step")), 1164)
    print(f"{name}: " + ", ".join(
        f"device {i}: allocated {v['peak_allocated_bytes']}, reserved {v['peak_reserved_bytes']}"
        for i, v in sorted(got.items())))
# A synthetic snapshot (pickle, as PyTorch writes it) through import and the merge: a tensor with a
# user_metadata path (as torchpy's hooks set with torch.cuda.memory._set_memory_metadata), one
# inside a record_function annotation, one inside both (user_metadata wins), one with neither
# (no range: merge_real's trace has none)
import pickle  # noqa: E402

A, T, MiB = 0x7f0000000000, 1757253255000000, 1 << 20
FR = [{"name": "forward", "filename": "/src/model.py", "line": 42}]


def ent(action, addr, size, t, **kw):
    return dict({"action": action, "addr": addr, "size": size, "stream": 0, "frames": FR,
                 "time_us": T + t}, **kw)


trace0 = [ent("segment_alloc", A, 64 * MiB, 10),
          ent("alloc", A, 1 * MiB, 20, user_metadata="train/model/model.layers.3"),
          ent("alloc", A + 1 * MiB, 2 * MiB, 40),
          ent("alloc", A + 3 * MiB, 3 * MiB, 45, user_metadata="train/model/model.layers.4"),
          ent("alloc", A + 6 * MiB, 4 * MiB, 60)]
snap = {"segments": [{"device": 0, "address": A, "total_size": 64 * MiB, "stream": 0,
                      "segment_type": "large", "segment_pool_id": (0, 0),
                      "is_expandable": False, "frames": [],
                      "blocks": [{"address": A + o * MiB, "size": n * MiB,
                                  "requested_size": n * MiB, "state": "active_allocated",
                                  "frames": FR} for o, n in ((0, 1), (1, 2), (3, 3), (6, 4))]}],
        "device_traces": [trace0],
        "external_annotations": [{"name": "Optimizer.step#AdamW.step", "stage": "START",
                                  "device": 0, "time_us": T + 30},
                                 {"name": "Optimizer.step#AdamW.step", "stage": "END",
                                  "device": 0, "time_us": T + 50}]}
spath = os.path.join(work, "synthetic.pickle")
with open(spath, "wb") as f:
    pickle.dump(snap, f, protocol=4)
strace = os.path.join(work, "synthetic.zst")
r = subprocess.run([tool, spath, strace], capture_output=True, text=True, timeout=300)
if r.returncode != 0:
    failures.append(f"synthetic: merge_real: {r.stderr}")
else:
    shutil.copyfile(spath, strace + ".torch.pickle")
    merged, err = report(strace)
    if merged:
        ranges = sorted((e["bytes"] // MiB, e.get("range")) for e in merged["live_at_peak"])
        check("synthetic: each tensor's range", ranges,
              [(1, "train/model/model.layers.3"), (2, "Optimizer.step#AdamW.step"),
               (3, "train/model/model.layers.4"), (4, None)])
        check("synthetic: the notice of the ranges' sources",
              any("the tensors' ranges: 2 from PyTorch's user_metadata (range paths the program "
                  "set; 0 of them the trace's open range whose path ends with it), 1 from its "
                  "record_function annotations, 0 from a compiled region alone, "
                  "0 from the trace's range open at the time (by thread), 1 none"
                  in n["message"] for n in merged["notices"]), True)
        print(f"synthetic: {ranges}")

if failures:
    print("FAIL\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok")
