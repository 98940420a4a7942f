#!/usr/bin/env python3
"""Processes that share a GPU: `report A B` gives their combined allocated memory per shared device
(docs/report.md, "Several traces"), checked against an independent computation from
`gpumemprof dump --json` of each trace (Python's json module, standard library only).

    check_shared.py simcuda GPUMEMPROF SIMCUDA_DIR TRAIN_SIM PRELOAD
        two samples/train_sim processes started together under `run -o x.%p.zst` on the simulated
        device (one UUID): one shared-device row whose combined peak and time equal the oracle's:
        every allocation and free of device memory (device, async-pool, vmm-physical, array,
        static) per process on the wall clock (trace time + start_wall_ns - start_trace_ns), a
        process holding nothing after its exit (its END record), the largest sum and its first
        moment. The
        same traces' static __device__ table (256 KiB) is named for the module load that made it,
        not "MEMORY2".
    check_shared.py gen GPUMEMPROF GEN_TRACES
        two generated traces without UUID on the same host and ordinal: matched by "ordinal and
        host"; a single trace has no such table.
"""
import json
import os
import subprocess
import sys
import tempfile

DEVICE_KINDS = {"device", "async-pool", "vmm-physical", "array", "static"}


def check(cond, msg):
    if not cond:
        print("FAIL: " + msg)
        sys.exit(1)


def dump(gmp, path):
    out = subprocess.run([gmp, "dump", "--json", path], capture_output=True, text=True,
                         check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def steps(recs, device):
    """(wall time, allocated bytes on device) after each change, and the wall time of the end."""
    h = recs[0]
    base = h["start_wall_ns"] - h["start_trace_ns"]
    live, cur, out, last, end = {}, 0, [], 0, None
    for r in recs:
        if r.get("type") == "end":
            end = r["t"]  # the process's exit: its memory goes then
        elif isinstance(r.get("t"), int):
            last = max(last, r["t"])
        if r.get("type") not in ("alloc", "free") or r["kind"] not in DEVICE_KINDS:
            continue
        if r["device"] != device or "failed" in r["flags"]:
            continue
        if r["type"] == "alloc":
            live[r["address"]] = r["size"]
            cur += r["size"]
        elif r["address"] in live:
            cur -= live.pop(r["address"])
        else:
            continue
        out.append((r["t"] + base, cur))
    return out, (end if end is not None and end > last else last) + base


def combined_peak(traces, device):
    ev = []
    for i, recs in enumerate(traces):
        st, end = steps(recs, device)
        ev += [(t, i, v) for (t, v) in st] + [(end + 1, i, 0)]
    ev.sort()
    cur, best, when = {}, 0, None
    for k, (t, i, v) in enumerate(ev):
        cur[i] = v
        if (k + 1 == len(ev) or ev[k + 1][0] != t) and sum(cur.values()) > best:
            best, when = sum(cur.values()), t
    return best, when


def report_json(gmp, paths):
    r = subprocess.run([gmp, "report", "--format", "json"] + paths, capture_output=True, text=True)
    check(r.returncode == 0, "report: %s" % r.stderr)
    return json.loads(r.stdout)


def case_simcuda(gmp, simcuda, train_sim, preload):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = simcuda + (":" + env["LD_LIBRARY_PATH"]
                                        if env.get("LD_LIBRARY_PATH") else "")
    if preload:
        env["LD_PRELOAD"] = preload
    tmp = tempfile.mkdtemp(prefix="gmpshared")
    cmd = "%s 1 & %s 1; wait" % (train_sim, train_sim)
    r = subprocess.run([gmp, "run", "-o", os.path.join(tmp, "x.%p.zst"), "--", "sh", "-c", cmd],
                       capture_output=True, env=env, cwd=tmp)
    check(r.returncode == 0, "run: %s" % r.stderr.decode())
    paths = sorted(os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".zst"))
    check(len(paths) == 2, "two traces: %s" % paths)
    traces = [dump(gmp, p) for p in paths]
    # static memory (train_sim's 256 KiB __device__ table): the module load's, in the trace itself
    for recs in traces:
        st = [(r["api"], r["size"]) for r in recs
              if r.get("type") == "alloc" and r["kind"] == "static"]
        check(st == [("module load", 256 << 10)], "static memory's api: %s" % st)
    text = subprocess.run([gmp, "report"] + paths, capture_output=True, text=True).stdout
    check("MEMORY2" not in text and "module load" in text, "the report names MEMORY2")
    want, when = combined_peak(traces, 0)
    own = sum(max([v for (_, v) in steps(t, 0)[0]] or [0]) for t in traces)
    j = report_json(gmp, paths)
    rows = j.get("shared_devices")
    check(rows is not None and len(rows) == 1, "shared devices: %s" % rows)
    row = rows[0]
    check(row["device"] == 0 and row["matched_by"] == "UUID", "row %s" % row)
    check(row["combined_peak_bytes"] == want and row["combined_peak_time_ns"] == when,
          "combined peak %s at %s, the oracle's %d at %d" % (row["combined_peak_bytes"],
                                                              row["combined_peak_time_ns"],
                                                              want, when))
    check(row["sum_of_peaks_bytes"] == own, "sum of peaks %s, oracle %d" %
          (row["sum_of_peaks_bytes"], own))
    # (on a loaded machine the two may not overlap: then the combined peak is the larger one's)
    print("ok: combined peak %d B at %d (own peaks sum %d B; %s)" %
          (want, when, own, "they overlapped" if want > own // 2 else "no overlap"))


def case_gen(gmp, gen):
    tmp = tempfile.mkdtemp(prefix="gmpshared")
    a, b = os.path.join(tmp, "r0.zst"), os.path.join(tmp, "r1.zst")
    for r, p in ((0, a), (1, b)):
        subprocess.run([gen, "report", "rank", str(r), p], check=True)
    traces = [dump(gmp, p) for p in (a, b)]
    want, when = combined_peak(traces, 0)
    rows = report_json(gmp, [a, b]).get("shared_devices")
    check(rows is not None and len(rows) == 1 and rows[0]["matched_by"] == "ordinal and host" and
          rows[0]["combined_peak_bytes"] == want and rows[0]["combined_peak_time_ns"] == when,
          "gen: %s, oracle %d at %d" % (rows, want, when))
    # a single trace has no such table
    check("shared_devices" not in report_json(gmp, [a]), "one trace: shared_devices")
    # --device filters it as every other table: device 0 keeps the row, another device has none
    rows0 = report_json(gmp, [a, b, "--device", "0"]).get("shared_devices")
    check(rows0 == rows, "--device 0: %s" % rows0)
    check(not report_json(gmp, [a, b, "--device", "1"]).get("shared_devices"),
          "--device 1: a row for device 0")
    print("ok: %d B at %d" % (want, when))


if __name__ == "__main__":
    if sys.argv[1] == "simcuda":
        case_simcuda(*sys.argv[2:6])
    else:
        case_gen(*sys.argv[2:4])
