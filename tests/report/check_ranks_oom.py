#!/usr/bin/env python3
"""A 64-rank job on the simulated CUDA device (docs/report.md, "An OOM across ranks"; docs/run.md,
"Trace names and ranks"): 64 processes of tests/agent's `rank_job` started together under one
`gpumemprof run` without -o, each with RANK, LOCAL_RANK and WORLD_SIZE set as torchrun sets them,
on a 1 GiB device (64 MiB of context). Rank 5 is heavy (activations 8 times as large); rank 42
keeps a cache in "step/forward/kv_cache" that grows by 200 MiB a step and runs out of memory in
its 5th step. Checked:
- the default names carry the host and the rank: exactly gpumemprof.HOST.rank0.zst ..
  gpumemprof.HOST.rank63.zst, and each header has its rank, local rank and world size 64;
- `report --format json` over the 64 traces: every healthy rank's peak is what rank_job
  allocates (16 MiB of weights + twice its activations, (4 + R % 8) MiB, 8 times for rank 5), the
  heavy findings name rank 5, and the OOM section names rank 42 as the rank that failed first, in
  the 5th "step", compared with the 63 others at their own 5th step, with
  step/forward/kv_cache as the range that differs (800 MiB against a median of 0) and
  "range_grew" as the cause;
- the text report says the same in words ("ran out of memory first", "heavy: rank 5, ");
- the same job of 8 ranks without NVTX ranges (GMP_TEST_NO_NVTX=1): no iteration, so the others
  are put beside rank 6 (the failing one there) by the wall clock: iteration 0, every compared
  rank aligned by the wall clock, rank 6 named.
The expected figures come from rank_job's own arithmetic, not from a gpumemprof output.

check_ranks_oom.py --gpumemprof BIN --agent LIB --simcuda DIR --progs DIR --tmp DIR (agentlib's
options, tests/agent/agentlib.py)."""
import json
import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))
import agentlib as L  # noqa: E402

MiB = 1 << 20
RANKS, HEAVY, OOM = 64, 5, 42
LAUNCHER_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                 "PMI_RANK"]


def peak_of(r):
    """rank_job's peak on a healthy rank: weights, activations and gradients of one step."""
    act = (4 + r % 8) * MiB * (8 if r == HEAVY else 1)
    return 16 * MiB + 2 * act


def main():
    c = L.setup()
    prog = L.prog(c, "rank_job")
    host = socket.gethostname().replace("/", "_")
    d = os.path.join(c.tmp, "job")
    os.makedirs(d, exist_ok=True)
    env = dict(c.env)
    for k in LAUNCHER_VARS:
        env.pop(k, None)
    env.update(SIMCUDA_DEVICE_MEMORY=str(1 << 30), SIMCUDA_CONTEXT_OVERHEAD=str(64 * MiB),
               GMP_TEST_HEAVY_RANK=str(HEAVY), GMP_TEST_OOM_RANK=str(OOM))
    script = " ".join(
        "RANK=%d LOCAL_RANK=%d WORLD_SIZE=%d %s > r%d.out 2>&1 &" % (r, r, RANKS, prog, r)
        for r in range(RANKS)) + " wait"
    t0 = time.monotonic()
    rc, out, err = L.gmp_run(c, ["-q", "--stacks", "none"], ["sh", "-c", script], env=env, cwd=d,
                             timeout=120)
    t_run = time.monotonic() - t0
    L.eq(rc, 0, "the job's status (%s)" % err.strip())
    with open(os.path.join(d, "r%d.out" % OOM)) as f:
        L.eq(f.read().strip(), "oom at step 5", "rank %d's own output" % OOM)
    want = ["gpumemprof.%s.rank%d.zst" % (host, r) for r in range(RANKS)]
    made = sorted(f for f in os.listdir(d) if f.endswith(".zst"))
    L.eq(made, sorted(want), "one trace per rank, named by host and rank")
    traces = [os.path.join(d, f) for f in want if os.path.exists(os.path.join(d, f))]
    for r in (0, HEAVY, OOM, RANKS - 1):
        h = L.dump(c, os.path.join(d, want[r])).header
        L.eq((h["rank"], h["local_rank"], h["world_size"], h["rank_var"]), (r, r, RANKS, "RANK"),
             "rank %d's header" % r)

    t0 = time.monotonic()
    rc, out, err = L.run([c.gmp, "report", "--format", "json"] + traces, c.env, timeout=120)
    t_json = time.monotonic() - t0
    L.eq(rc, 0, "report json (%s)" % err.strip())
    doc = json.loads(out)
    rows = {r["rank"]: r for r in doc["summary"]}
    L.eq(sorted(rows), list(range(RANKS)), "every rank in the summary")
    for r in range(RANKS):
        if r != OOM and r in rows:
            L.eq(rows[r]["peak_allocated_bytes"], peak_of(r), "rank %d's peak" % r)
    heavy = [h["label"] for h in doc["heavy"]]
    L.check(any(h.startswith("rank %d, " % HEAVY) for h in heavy), "rank 5 is heavy: %s" % heavy)
    ro = doc.get("ranks_oom")
    if L.check(ro is not None, "an OOM section in the JSON: %s" % list(doc)):
        L.check(ro["failing"]["label"].startswith("rank %d, " % OOM),
                "the failing rank: %s" % ro["failing"]["label"])
        L.eq(ro["failing"]["requested_bytes"], 200 * MiB, "the failed request")
        L.eq((ro["iteration"], ro["iteration_name"]), (5, "step"), "the iteration of the OOM")
        L.eq((ro["compared_ranks"], ro["healthy_ranks"], ro["aligned_by_iteration"]),
             (RANKS - 1, RANKS - 1, RANKS - 1), "every other rank compared at the same step")
        L.eq(ro["differs_by"], "range_grew", "the cause")
        top = ro["ranges"][0]
        L.eq((top["range"], top["failing_bytes"], top["median_bytes"]),
             ("step/forward/kv_cache", 800 * MiB, 0), "the range that grew")
        fail, med = ro["ranks"][0], ro["ranks"][1]
        # at the OOM: weights, 4 steps of cache, this step's activations
        L.eq(fail["allocated_bytes"], 16 * MiB + 800 * MiB + (4 + OOM % 8) * MiB,
             "the failing rank's allocated bytes at the OOM")
        others = sorted(peak_of(r) for r in range(RANKS) if r != OOM)
        L.eq(med["allocated_bytes"], others[len(others) // 2],  # 63 of them
             "the median of the others' peaks in step 5")

    t0 = time.monotonic()
    rc, out, err = L.run([c.gmp, "report"] + traces, c.env, timeout=120)
    t_text = time.monotonic() - t0
    L.eq(rc, 0, "report text")
    lines = out.splitlines()
    first = [l for l in lines if "ran out of memory first" in l]
    L.check(len(first) == 1 and first[0].strip().startswith("rank %d, " % OOM),
            "the text names the failing rank: %s" % first)
    L.check(any(l.strip().startswith("heavy: rank %d, " % HEAVY) for l in lines),
            "the text names the heavy rank")
    L.check(any("what differs on rank %d, " % OOM in l and "step/forward/kv_cache" in l
                for l in lines), "the text names the range that grew")
    print("64 ranks: run %.1f s, report json %.1f s, report text %.1f s" % (t_run, t_json, t_text))

    # no NVTX: aligned by the wall clock
    d2 = os.path.join(c.tmp, "job-wall")
    os.makedirs(d2, exist_ok=True)
    env.update(GMP_TEST_NO_NVTX="1", GMP_TEST_OOM_RANK="6")
    script = " ".join("RANK=%d WORLD_SIZE=8 %s > r%d.out 2>&1 &" % (r, prog, r)
                      for r in range(8)) + " wait"
    rc, out, err = L.gmp_run(c, ["-q", "--stacks", "none"], ["sh", "-c", script], env=env, cwd=d2)
    L.eq(rc, 0, "the wall-clock job's status (%s)" % err.strip())
    traces = [os.path.join(d2, "gpumemprof.%s.rank%d.zst" % (host, r)) for r in range(8)]
    rc, out, err = L.run([c.gmp, "report", "--format", "json"] + traces, c.env)
    L.eq(rc, 0, "wall-clock job: report json (%s)" % err.strip())
    ro = json.loads(out).get("ranks_oom") if rc == 0 else None
    if L.check(ro is not None, "wall-clock job: an OOM section"):
        L.check(ro["failing"]["label"].startswith("rank 6, "), "wall-clock job: the failing rank")
        L.eq((ro["iteration"], ro["iteration_name"]), (0, None), "wall-clock job: no iteration")
        L.check(ro["compared_ranks"] >= 1 and ro["aligned_by_wall_clock"] == ro["compared_ranks"]
                and ro["aligned_by_iteration"] == 0,
                "wall-clock job: compared by the wall clock: %s" % ro)
        L.eq(ro["ranks"][0]["allocated_bytes"], 16 * MiB + 800 * MiB + (4 + 6 % 8) * MiB,
             "wall-clock job: the failing rank at its OOM")
        L.eq(ro["differs_by"], "allocations", "wall-clock job: no range to name")
    L.cleanup(c)
    L.finish("ranks_oom")


if __name__ == "__main__":
    main()
