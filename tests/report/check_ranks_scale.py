#!/usr/bin/env python3
"""The cross-rank view on real recordings (docs/report.md, "Cross-rank view"): twelve ranks of
tests/agent's `basic` program recorded under `gpumemprof run` on the simulated device, one process
per rank with RANK set, rank 5 allocating four times as much; then `gpumemprof report` over the
twelve traces, whose native stacks are symbolized by several threads sharing the modules' symbol
tables:
  - rank 5, and only it, is heavy and the heaviest, and what held its peak is named from the
    program's DWARF ("one (basic.c:24)"), as in each trace's own report;
  - every rank's peak equals the one of the per-process report (--per-process), and each rank's
    `top` its own report's;
  - one thread or four give the same bytes (the order of the output does not follow the threads).

check_ranks_scale.py --gpumemprof BIN --agent LIB --simcuda DIR --progs DIR --tmp DIR (agentlib's
options, tests/agent/agentlib.py)."""
import json
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))
import agentlib as L  # noqa: E402

MiB = 1 << 20
N = 12


def main():
    c = L.setup()
    basic = L.prog(c, "basic")
    traces = []
    for r in range(N):
        out = os.path.join(c.tmp, "rank%02d.zst" % r)
        env = L.env_with(c, RANK=str(r))
        rc, _, err = L.gmp_run(c, ["-q", "-o", out], [basic, "alloc", "16" if r == 5 else "4"],
                               env=env)
        L.eq(rc, 0, "recording rank %d (%s)" % (r, err.strip()))
        traces.append(out)
    rc, out, err = L.run([c.gmp, "report", "--format", "json", "--jobs", "4"] + traces, c.env)
    L.eq(rc, 0, "report (%s)" % err.strip())
    doc = json.loads(out)
    L.eq(doc["schema"], "gpumemprof-ranks/1", "the cross-rank view above 8 traces")
    rc, out1, err = L.run([c.gmp, "report", "--format", "json", "--jobs", "1"] + traces, c.env)
    L.eq(out1, out, "one thread gives the same bytes as four")
    rows = doc["ranks"]
    L.eq([r["rank"] for r in rows], list(range(N)), "ranks in order")
    for r in rows:
        want = (16 if r["rank"] == 5 else 4) * MiB
        L.eq(r["peak_allocated_bytes"], want, "rank %d's peak" % r["rank"])
        L.eq(r["rank_source"], "trace", "rank %d from the trace" % r["rank"])
    h = doc["outliers"]["heaviest"]
    L.eq(h["rank"], 5, "the heaviest rank")
    L.eq(h["top"], "one (basic.c:24)", "what held its peak, named from DWARF")
    L.eq([x["rank"] for x in doc["outliers"]["heavy"]], [5], "the heavy ranks")
    rc, out, err = L.run([c.gmp, "report", "--format", "json", "--per-process"] + traces, c.env)
    L.eq(rc, 0, "--per-process (%s)" % err.strip())
    old = {r["path"]: r for r in json.loads(out)["summary"]}
    for r in rows:
        o = old[r["path"]]
        L.eq(r["peak_allocated_bytes"], o["peak_allocated_bytes"], "%s: peak" % r["path"])
        L.eq(r["top"], o["top"], "%s: top" % r["path"])
    L.cleanup(c)
    L.finish("ranks scale")


if __name__ == "__main__":
    main()
