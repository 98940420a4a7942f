#!/usr/bin/env python3
"""fork without exec (progs/basic.c fork): the parent allocates, forks a child that calls
cudaMalloc and exits (its exit handlers run), then allocates and frees again. Exactly one trace
(the parent's), complete, with the parent's records only: the child never writes into it and
writes no trace of its own."""
import glob
import os

import agentlib as L

MIB = 1 << 20


def main():
    c = L.setup()
    pattern = os.path.join(c.tmp, "fork.%p.zst")
    rc, out, err = L.gmp_run(c, ["-o", pattern], [L.prog(c, "basic"), "fork"])
    L.eq(rc, 0, "exit status (%s)" % err.strip())
    L.check("child: cudaMalloc returned 0" in out and out.endswith("parent: ok\n"),
            "program output: %r" % out)
    traces = glob.glob(os.path.join(c.tmp, "*"))
    traces = [p for p in traces if p.endswith(".zst")]
    L.eq(len(traces), 1, "trace files: %s" % traces)
    if traces:
        t = L.dump(c, traces[0])
        L.check(t.summary["complete"], "complete: %s" % t.summary["message"])
        pid = t.header["pid"]
        L.eq(os.path.basename(traces[0]), "fork.%d.zst" % pid, "the trace is the parent's")
        vals = L.shown(out)
        got = [(r["type"], r["api"], r["address"], r["size"], r["tid"]) for r in t.mem()]
        want = [("alloc", "cudaMalloc", "%#x" % vals["p1"], MIB, pid),
                ("alloc", "cudaMalloc", "%#x" % vals["p2"], 3 * MIB, pid),
                ("free", "cudaFree", "%#x" % vals["p2"], 0, pid),
                ("free", "cudaFree", "%#x" % vals["p1"], 0, pid)]
        L.eq(got, want, "the parent's allocations only (the child's 2 MiB is not there)")
        child = [int(l.split()[2]) for l in out.splitlines() if l.startswith("child: pid ")]
        tids = set(r["tid"] for r in t.recs if "tid" in r)
        L.check(child and child[0] not in tids, "no record of the child (%s) in %s" % (child, tids))
        e = t.end()
        L.eq((e["allocs"], e["frees"], e["lost"]) if e else None, (2, 2, 0), "END totals")
    L.eq([l for l in err.splitlines() if "recording to" in l].__len__(), 1,
         "one 'recording to' line (the child starts no trace)")
    L.cleanup(c)
    L.finish("fork")


if __name__ == "__main__":
    main()
