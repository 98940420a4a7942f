#!/usr/bin/env python3
"""Ranks side by side (docs/report.md, "Several traces"), on the simulated CUDA device: a
four-rank job run under `gpumemprof run` (four processes of tests/agent's `basic` program with
RANK=0..3, rank 2 allocating four times as much), then `gpumemprof report` over the four traces:
the summary names each rank, its peak against the median, what held most of it, and flags rank 2
(and only it) as heavy, in text and JSON.

check_ranks.py --gpumemprof BIN --agent LIB --simcuda DIR --progs DIR --tmp DIR (agentlib's
options, tests/agent/agentlib.py)."""
import glob
import json
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))
import agentlib as L  # noqa: E402

MiB = 1 << 20


def main():
    c = L.setup()
    basic = L.prog(c, "basic")
    pattern = os.path.join(c.tmp, "rank.%p.zst")
    sizes = {0: 4, 1: 5, 2: 16, 3: 4}  # MiB allocated at once by each rank
    script = " & ".join("RANK=%d %s alloc %d > %s/r%d.out" % (r, basic, n, c.tmp, r)
                        for r, n in sizes.items()) + "; wait"
    rc, out, err = L.gmp_run(c, ["-o", pattern], ["sh", "-c", script])
    L.eq(rc, 0, "exit status (%s)" % err.strip())
    traces = sorted(glob.glob(os.path.join(c.tmp, "rank.*.zst")))
    L.eq(len(traces), 4, "trace files: %s" % traces)
    rc, out, err = L.run([c.gmp, "report", "--format", "json"] + traces, c.env)
    L.eq(rc, 0, "report json (%s)" % err.strip())
    doc = json.loads(out)
    rows = {r["rank"]: r for r in doc["summary"]}
    L.eq(sorted(rows), [0, 1, 2, 3], "ranks in the summary")
    for r, n in sizes.items():
        L.eq(rows[r]["peak_allocated_bytes"], n * MiB, "rank %d's peak" % r)
        L.eq(rows[r]["label"].startswith("rank %d, pid " % r), True, "label %r" % rows[r]["label"])
        L.eq(rows[r]["heavy"], r == 2, "rank %d heavy" % r)
        L.eq(rows[r]["top_bytes"], n * MiB, "rank %d's top bytes" % r)
    # the median of 4, 4, 5, 16 MiB is 4.5 MiB: rank 2 is 3.56x of it
    L.eq(round(rows[2]["vs_median_pct"], 1), round(100.0 * (16 - 4.5) / 4.5, 1), "vs median")
    heavy = [h["label"] for h in doc["heavy"]]
    L.eq(len(heavy), 1, "one heavy rank: %s" % heavy)
    L.eq(heavy[0].startswith("rank 2, "), True, "the heavy rank: %s" % heavy)
    rc, out, err = L.run([c.gmp, "report"] + traces, c.env)
    L.eq(rc, 0, "report text")
    lines = [l for l in out.splitlines() if l.strip().startswith("heavy: rank 2, ")]
    L.eq(len(lines), 1, "text names the heavy rank:\n%s" % out[:3000])
    L.check("x the median 4.50 MiB" in lines[0], "text: %s" % lines[0])
    print(lines[0])
    L.cleanup(c)
    L.finish("ranks")


if __name__ == "__main__":
    main()
