#!/usr/bin/env python3
"""The merge (gmp_merge_torch) with the real PyTorch snapshots of tests/data/torch-snapshots.

  test_merge_real.py GPUMEMPROF MERGE_REAL DATA_DIR WORK_DIR

No CUPTI trace was recorded with them, so merge_real writes the one CUPTI would have recorded:
the caching allocator's cudaMalloc/cudaFree calls (its segments; expandable segments' memory as
cuMemCreate chunks) on a clock 1000 s ahead of the snapshot's. Read with the snapshot beside it,
the trace must give what the snapshot gives alone (report --format json, per device): peak
allocated, peak reserved and leaked bytes, allocations, the live set at the peak by stack; and
say that it is merged, with no warning.
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
    return sorted((e["device"], e["bytes"], e["count"],
                   json.dumps(e["stack"], sort_keys=True)) for e in doc["live_at_peak"])


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
    check(f"{name}: live at the peak, by stack", peak_set(merged), peak_set(want))
    print(f"{name}: " + ", ".join(
        f"device {i}: allocated {v['peak_allocated_bytes']}, reserved {v['peak_reserved_bytes']}"
        for i, v in sorted(got.items())))
if failures:
    print("FAIL\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok")
