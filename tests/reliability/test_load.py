#!/usr/bin/env python3
"""Load: THREADS threads (32) allocate and free concurrently for SECONDS (10) under nested NVTX
ranges ("worker<k>/step/layer<j>") on two simulated devices, profiled by `gpumemprof run`.

  test_load.py COMMON-OPTIONS [--threads N] [--seconds S]

Checked from the trace (dump --json):
 - nothing lost (no LOST record), END present and its totals match;
 - per thread: the trace's allocations, frees and live-at-exit blocks (count and bytes) equal what
   the thread itself counted, and allocations = frees + live at exit, in count and in bytes;
 - per device: the same conservation, summed over the device's threads;
 - every allocation carries its thread's range path worker<k>/step/layer<0-3>;
 - run's summary (allocations and leaked blocks per device) and `gpumemprof report --format json`
   (allocations, frees, allocated bytes, leaked bytes and blocks per device) match the trace."""
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rellib as L  # noqa: E402


def main():
    c = L.setup(lambda ap: (ap.add_argument("--threads", type=int, default=32),
                            ap.add_argument("--seconds", type=float, default=10.0)))
    out = os.path.join(c.tmp, "load.zst")
    env = L.env_with(c, preload=True, SIMCUDA_DEVICE_COUNT=2)
    rc, so, se = L.run([c.gmp, "run", "-o", out, "--stacks", "none", "--"] +
                       L.prog(c, "load", c.args.threads, c.args.seconds, 2), env,
                       timeout=120 + 3 * c.args.seconds)
    L.eq(rc, 0, "exit status")
    L.check("load: ok" in so, "the program finished")
    prog = {}
    for line in so.splitlines():
        f = line.split()
        if f and f[0] == "T":
            prog[int(f[1])] = dict(zip(("dev", "allocs", "abytes", "frees", "fbytes", "live",
                                        "lbytes"), map(int, f[2:])))
    L.eq(len(prog), c.args.threads, "threads reported by the program")

    t = L.dump(c, out)
    L.eq(t.lost(), 0, "nothing lost")
    end = t.of("end")
    if L.check(end and t.summary and t.summary["complete"], "complete trace, END totals match"):
        pass
    per_t = collections.defaultdict(lambda: collections.Counter())
    live = {}
    path_re = re.compile(r"^worker(\d+)/step/layer[0-3]$")
    worker_of = {}
    bad_paths = 0
    for r in t.mem():
        tid = r["tid"]
        s = per_t[tid]
        if r["type"] == "alloc":
            s["allocs"] += 1
            s["abytes"] += r["size"]
            live[(r["device"], r["address"])] = (tid, r["size"])
            m = path_re.match(r.get("path", ""))
            if not m or worker_of.setdefault(tid, m.group(1)) != m.group(1):
                bad_paths += 1
        else:
            owner = live.pop((r["device"], r["address"]), None)
            if not L.check(owner and owner[0] == tid, "free of %s by its own thread" % r["address"]):
                continue
            s["frees"] += 1
            s["fbytes"] += owner[1]
    L.eq(bad_paths, 0, "allocations outside their thread's range path")
    for (dev, addr), (tid, size) in live.items():
        per_t[tid]["live"] += 1
        per_t[tid]["lbytes"] += size
    per_dev = collections.defaultdict(lambda: collections.Counter())
    for tid, p in prog.items():
        s = per_t.get(tid, collections.Counter())
        got = {k: s[k] for k in ("allocs", "abytes", "frees", "fbytes", "live", "lbytes")}
        want = {k: p[k] for k in got}
        L.eq(got, want, "thread %d: trace vs program" % tid)
        L.check(s["allocs"] == s["frees"] + s["live"] and
                s["abytes"] == s["fbytes"] + s["lbytes"],
                "thread %d: allocations = frees + live (count and bytes): %r" % (tid, got))
        per_dev[p["dev"]].update(s)
    for dev, s in sorted(per_dev.items()):
        L.check(s["allocs"] == s["frees"] + s["live"] and
                s["abytes"] == s["fbytes"] + s["lbytes"],
                "device %d: allocations = frees + live: %r" % (dev, dict(s)))

    # run's summary and the JSON report agree with the trace
    for dev, s in sorted(per_dev.items()):
        m = re.search(r"device %d \(.*\): peak allocated .*, (\d+) allocations, leaked .* in (\d+)"
                      % dev, se)
        if L.check(m, "run's summary has device %d:\n%s" % (dev, se)):
            L.eq((int(m.group(1)), int(m.group(2))), (s["allocs"], s["live"]),
                 "device %d: run's summary (allocations, leaked blocks)" % dev)
    rc, rj, re_ = L.run([c.gmp, "report", "--format", "json", out], c.env, timeout=300)
    L.eq(rc, 0, "report exit status: " + re_[:300])
    try:
        rep = json.loads(rj)
    except ValueError as e:
        L.check(False, "report JSON: %s" % e)
        rep = {"devices": []}
    for d in rep.get("devices", []):
        s = per_dev.get(d["id"], collections.Counter())
        L.eq((d["allocations"], d["frees"], d["allocated_bytes_total"], d["leaked_bytes"],
              d["leaked_allocations"]),
             (s["allocs"], s["frees"], s["abytes"], s["lbytes"], s["live"]),
             "device %d: report JSON vs trace" % d["id"])
    L.eq(sorted(d["id"] for d in rep.get("devices", [])), sorted(per_dev), "devices in the report")
    total = sum(s["allocs"] for s in per_dev.values())
    print("load: %d threads x %.0f s: %d allocations, %d live at exit, %d events; conservation "
          "holds per thread and per device" % (c.args.threads, c.args.seconds, total,
                                               sum(s["live"] for s in per_dev.values()),
                                               len(t.recs)))
    L.finish(c, "load")


if __name__ == "__main__":
    main()
