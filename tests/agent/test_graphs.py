#!/usr/bin/env python3
"""CUDA graphs (docs/collectors.md, point 4; progs/graphs.c). cudaMallocAsync and cudaFreeAsync during
stream capture (on the capturing stream and on a stream that joined the capture through an event)
are not recorded at capture time: they only add memory nodes. The graph's memory is recorded when
the graph runs:

 - with activity records (the default): from the MEMORY2 records of the launch (their correlation
   id is the launch's): the 32 MiB alloc node and the 8 MiB alloc/free pair, api cudaGraphLaunch,
   at the capture-time addresses; the 32 MiB's cudaFreeAsync outside the graph frees it (matched,
   no unknown free); the device peak holds 32 + 8 MiB;
 - with --no-activity: from the device's graph memory attributes read by the flush thread
   (api "graph memory"; memory stays associated with graphs until cudaDeviceGraphMemTrim, which
   the program calls at the end); the free outside the graph is not recorded (the graph memory's
   reading covers it), no unknown free.

Allocations before and after the capture on the same stream are recorded as usual. Runs with
--flush-interval 50. Needs stream capture and graph memory in the simulator; without them the
program prints SKIP and only the plain allocations are checked."""
import json

import agentlib as L

MIB = 1 << 20


def run(c, name, extra):
    out = "%s/%s.zst" % (c.tmp, name)
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet", "--flush-interval", "50"] + extra,
                                   [L.prog(c, "graphs")])
    L.eq(rc, 0, "%s: exit status (stderr: %s)" % (name, stderr.strip()))
    t = L.dump(c, out)
    rc, rep, rerr = L.run([c.gmp, "report", out, "--format", "json"], c.env)
    L.eq(rc, 0, "%s: report exit status (%s)" % (name, rerr.strip()))
    d = (json.loads(rep).get("devices") or [{}])[0]
    return stdout, L.shown(stdout), t.mem(activity=True), d


def main():
    c = L.setup()
    # with activity records
    stdout, vals, mem, d = run(c, "activity", [])
    for l in stdout.splitlines():
        if l.startswith("SKIP "):
            print("SKIP: " + l[5:])
    launched = "LAUNCHED" in stdout
    api = [(r["type"], r["api"], r["size"]) for r in mem
           if r["api"] in ("cudaMallocAsync", "cudaFreeAsync")]
    want = [("alloc", "cudaMallocAsync", MIB), ("free", "cudaFreeAsync", 0)]
    if launched:  # the free of the graph's 32 MiB outside the graph
        want += [("free", "cudaFreeAsync", 0)]
    want += [("alloc", "cudaMallocAsync", MIB), ("free", "cudaFreeAsync", 0)]
    L.eq(api, want, "activity: stream-ordered API records (nothing of the capture)")
    if launched:
        graph = [(r["type"], r["api"], int(r["address"], 16), r["size"]) for r in mem
                 if r["api"] == "cudaGraphLaunch"]
        L.eq(graph, [("alloc", "cudaGraphLaunch", vals["captured32"], 32 * MIB),
                     ("alloc", "cudaGraphLaunch", vals["captured8"], 8 * MIB),
                     ("free", "cudaGraphLaunch", vals["captured8"], 8 * MIB)],
             "activity: the launch's graph memory (MEMORY2 records of the launch)")
        L.eq((d.get("unknown_frees"), d.get("double_frees"), d.get("leaked_bytes")), (0, 0, 0),
             "activity: no unknown or double frees, nothing leaked")
        L.eq(d.get("peak_allocated_bytes"), 40 * MIB, "activity: device peak (32 + 8 MiB)")

    # without activity records: the graph memory attributes
    stdout, vals, mem, d = run(c, "polled", ["--no-activity"])
    if "LAUNCHED" in stdout:
        L.eq([r for r in mem if r["api"] in ("cudaMallocAsync", "cudaFreeAsync") and
              int(r["address"], 16) in (vals.get("captured32"), vals.get("captured8"))], [],
             "polled: nothing recorded at the graph's addresses by callbacks")
        graph = [r for r in mem if r["api"] == "graph memory"]
        live = sum(r["size"] if r["type"] == "alloc" else -r["size"] for r in graph)
        L.check(any(r["type"] == "alloc" and r["size"] >= 32 * MIB for r in graph),
                "polled: graph memory of 32 MiB or more recorded: %s" % graph)
        L.eq(live, 0, "polled: graph memory given back by the end (cudaDeviceGraphMemTrim)")
        L.eq(d.get("unknown_frees"), 0, "polled: no unknown frees")
        L.check((d.get("peak_allocated_bytes") or 0) >= 32 * MIB,
                "polled: device peak %s includes the graph's 32 MiB" % d.get("peak_allocated_bytes"))
    L.cleanup(c)
    L.finish("graphs")


if __name__ == "__main__":
    main()
