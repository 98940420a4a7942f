#!/usr/bin/env python3
"""A 64-rank job on the simulated CUDA device (docs/report.md, "An OOM across ranks"; docs/run.md,
"Trace names and ranks"): 64 processes of tests/agent's `rank_job` started together under one
`gpumemprof run` without -o, each with RANK, LOCAL_RANK and WORLD_SIZE set as torchrun sets them,
on a 1 GiB device (64 MiB of context). Rank 5 is heavy (activations 8 times as large); rank 42
keeps a cache in "step/forward/kv_cache" that grows by 200 MiB a step and runs out of memory in
its 5th step. Checked:
- `run`'s end-of-run summary (64 processes, more than 8): the cross-rank view's short form (the
  findings, the heavy ranks, the OOM rank), no block per process, no table of ranks;
- the default names carry the host and the rank: exactly gpumemprof.HOST.rank0.zst ..
  gpumemprof.HOST.rank63.zst, and each header has its rank, local rank and world size 64;
- `report --format json` over the 64 traces (the cross-rank view, gpumemprof-ranks/1): every
  healthy rank's peak is what rank_job allocates (16 MiB of weights + twice its activations,
  (4 + R % 8) MiB, 8 times for rank 5), each rank's local rank and world size, the heavy ranks
  are 5 and 42 (its cache), the OOM rank is 42, and the OOM section names rank 42 as the rank
  that failed first, in the 5th "step", compared with the 63 others at their own 5th step (rank 5
  the heaviest of them), with step/forward/kv_cache as the range that differs (800 MiB against a
  median of 0) and "range_grew" as the cause;
- `--per-process`: the per-process document says the same, and its OOM section is the view's;
- the text report says the same in words ("ran out of memory first", "heavy: rank 5 (");
- `--summary-only` then `--reduce`: byte for byte `--cross-rank` in text, JSON, Markdown and
  HTML, the comparison included; with the traces moved away, one line says why there is none;
- `convert --parquet` over the 64 traces read by DuckDB (npm @duckdb/node-api through
  tests/convert/parquet_read.mjs; skipped with a message without node or its modules): per rank
  and device, the summary table's peak, OOMs, allocations, local rank and world size, and the
  allocations table's rows of device memory, equal to the view's;
- the same job of 8 ranks without NVTX ranges (GMP_TEST_NO_NVTX=1): no iteration, so the others
  are put beside rank 6 (the failing one there) by the wall clock: iteration 0, every compared
  rank aligned by the wall clock, rank 6 named; --cross-rank gives the same section.
The expected figures come from rank_job's own arithmetic, not from a gpumemprof output.

check_ranks_oom.py --gpumemprof BIN --agent LIB --simcuda DIR --progs DIR --tmp DIR (agentlib's
options, tests/agent/agentlib.py) [--nodedeps DIR] (tests/convert/nodedeps, for the Parquet part).
Python: the interpreter ctest was configured with."""
import json
import os
import shutil
import socket
import subprocess
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


def check_oom_section(ro, what):
    """The OOM across ranks of the 64-rank job: rank 42 at its 5th step beside the 63 others."""
    if not L.check(ro is not None, "%s: an OOM section" % what):
        return
    L.check(ro["failing"]["label"].startswith("rank %d, " % OOM),
            "%s: the failing rank: %s" % (what, ro["failing"]["label"]))
    L.eq(ro["failing"]["requested_bytes"], 200 * MiB, "%s: the failed request" % what)
    L.eq((ro["iteration"], ro["iteration_name"]), (5, "step"), "%s: the iteration" % what)
    L.eq((ro["compared_ranks"], ro["healthy_ranks"], ro["aligned_by_iteration"]),
         (RANKS - 1, RANKS - 1, RANKS - 1), "%s: every other rank at the same step" % what)
    L.eq(ro["differs_by"], "range_grew", "%s: the cause" % what)
    top = ro["ranges"][0]
    L.eq((top["range"], top["failing_bytes"], top["median_bytes"]),
         ("step/forward/kv_cache", 800 * MiB, 0), "%s: the range that grew" % what)
    fail, med, heavy = ro["ranks"][0], ro["ranks"][1], ro["ranks"][2]
    # at the OOM: weights, 4 steps of cache, this step's activations
    L.eq(fail["allocated_bytes"], 16 * MiB + 800 * MiB + (4 + OOM % 8) * MiB,
         "%s: the failing rank's allocated bytes at the OOM" % what)
    others = sorted(peak_of(r) for r in range(RANKS) if r != OOM)
    L.eq(med["allocated_bytes"], others[len(others) // 2],  # 63 of them
         "%s: the median of the others' peaks in step 5" % what)
    L.check(heavy["label"].startswith("rank %d, " % HEAVY),
            "%s: the heaviest other is rank 5: %s" % (what, heavy["label"]))
    L.eq(heavy["allocated_bytes"], peak_of(HEAVY), "%s: the heaviest other's peak" % what)


def check_parquet(c, traces, view):
    """convert --parquet over the 64 traces, read by DuckDB (npm @duckdb/node-api through
    tests/convert/parquet_read.mjs): per rank, the summary table's peak, OOMs and allocations
    equal to the view's, and the allocations table's rows on the device to the allocation count."""
    nodedeps = c.args.nodedeps
    if not nodedeps or not os.path.isdir(os.path.join(nodedeps, "node_modules", "@duckdb")) \
            or not shutil.which("node"):
        print("SKIP the Parquet part: no node or no node modules in %s "
              "(scripts/install-deps.sh --browser)" % nodedeps)
        return
    pq = os.path.join(c.tmp, "parquet")
    rc, _, err = L.run([c.gmp, "convert", "--parquet", pq] + traces, c.env, timeout=300)
    if not L.eq(rc, 0, "convert --parquet (%s)" % err.strip()):
        return
    reader = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "convert",
                          "parquet_read.mjs")

    def hive(table):
        p = subprocess.run(["node", reader, nodedeps, "--hive", pq, table], capture_output=True,
                           timeout=600)
        L.eq(p.returncode, 0, "DuckDB reads %s (%s)" % (table, p.stderr.decode()[-500:]))
        return json.loads(p.stdout)["rows"] if p.returncode == 0 else []

    summ = hive("summary")
    allocs = hive("allocations")
    L.eq(sorted({int(r["rank"]) for r in summ}), list(range(RANKS)), "Parquet: every rank")
    devs = {(d["rank"], d["device"]): d for d in view.get("devices", [])}
    count = {}
    for a in allocs:
        if a["device_memory"] == "true":
            k = (int(a["rank"]), int(a["device"]))
            count[k] = count.get(k, 0) + 1
    for r in summ:
        k = (int(r["rank"]), None if r["device"] is None else int(r["device"]))
        v = devs.get(k)
        if not L.check(v is not None, "Parquet summary row %s in the view" % (k,)):
            continue
        got = (int(r["peak_allocated_bytes"]), int(r["ooms"]), int(r["allocations"]),
               int(r["local_rank"]), int(r["world_size"]))
        want = (v["peak_allocated_bytes"], v["ooms"], v["allocs"], k[0], RANKS)
        L.eq(got, want, "Parquet summary of rank %d device %d: peak, OOMs, allocations, "
                     "local rank, world size" % k)
        L.eq(count.get(k, 0), v["allocs"], "Parquet allocations rows of rank %d device %d" % k)
    L.eq(len(summ), len(devs), "Parquet: a summary row per rank and device, as the view")
    print("Parquet: %d summary rows, %d allocation rows, read by DuckDB" % (len(summ), len(allocs)))


def main():
    c = L.setup(lambda ap: ap.add_argument("--nodedeps", default=""))
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
    rc, out, err = L.gmp_run(c, ["--stacks", "none"], ["sh", "-c", script], env=env, cwd=d,
                             timeout=120)
    t_run = time.monotonic() - t0
    L.eq(rc, 0, "the job's status (%s)" % err.strip())
    # run's end-of-run summary of 64 processes: the cross-rank view's short form, not 64 blocks
    L.check("gpumemprof: 64 processes recorded: the ranks side by side" in err,
            "run's summary: the short cross-rank view")
    L.eq([l for l in err.splitlines() if l.startswith("gpumemprof: ") and ".zst (pid " in l], [],
         "run's summary: no block per process")
    L.check(any(l.strip().startswith("heavy: rank %d (" % HEAVY) for l in err.splitlines())
            and any(l.strip().startswith("out of memory: rank %d (" % OOM)
                    for l in err.splitlines())
            and any(l.strip().startswith("rank %d, " % OOM) and "ran out of memory first" in l
                    for l in err.splitlines()),
            "run's summary names the heavy rank, the OOM rank and the OOM across ranks")
    L.check("Ranks:" not in err and "gpumemprof: next: gpumemprof convert" in err,
            "run's summary: no table of ranks; the next commands")
    with open(os.path.join(d, "r%d.out" % OOM)) as f:
        own = [l for l in f.read().splitlines() if not l.startswith("gpumemprof: ")]
        L.eq(own, ["oom at step 5"], "rank %d's own output" % OOM)  # the agent's line aside
    want = ["gpumemprof.%s.rank%d.zst" % (host, r) for r in range(RANKS)]
    made = sorted(f for f in os.listdir(d) if f.endswith(".zst"))
    L.eq(made, sorted(want), "one trace per rank, named by host and rank")
    traces = [os.path.join(d, f) for f in want if os.path.exists(os.path.join(d, f))]
    for r in (0, HEAVY, OOM, RANKS - 1):
        h = L.dump(c, os.path.join(d, want[r])).header
        L.eq((h["rank"], h["local_rank"], h["world_size"], h["rank_var"]), (r, r, RANKS, "RANK"),
             "rank %d's header" % r)

    # the cross-rank view (more than 8 traces)
    t0 = time.monotonic()
    rc, out, err = L.run([c.gmp, "report", "--format", "json"] + traces, c.env, timeout=120)
    t_json = time.monotonic() - t0
    L.eq(rc, 0, "report json (%s)" % err.strip())
    doc = json.loads(out) if rc == 0 else {}
    L.eq(doc.get("schema"), "gpumemprof-ranks/1", "above 8 traces: the cross-rank view")
    rows = {r["rank"]: r for r in doc.get("ranks", [])}
    L.eq(sorted(rows), list(range(RANKS)), "every rank in the table of ranks")
    for r in range(RANKS):
        if r != OOM and r in rows:
            L.eq(rows[r]["peak_allocated_bytes"], peak_of(r), "rank %d's peak" % r)
    for r in (0, HEAVY, OOM, RANKS - 1):
        if r in rows:
            L.eq((rows[r]["local_rank"], rows[r]["world_size"]), (r, RANKS),
                 "rank %d's local rank and world size in the view" % r)
    outl = doc.get("outliers", {})
    # rank 42's peak (its cache) is above 1.5 times the median too
    L.eq(sorted(h["rank"] for h in outl.get("heavy", [])), [HEAVY, OOM], "the heavy ranks")
    L.eq([o["rank"] for o in outl.get("oom", [])], [OOM], "the rank that ran out of memory")
    check_oom_section(doc.get("ranks_oom"), "cross-rank view")
    f = doc.get("findings", [])
    L.check(len(f) == 1 and f[0]["kind"] == "ranks_oom" and f[0]["differs_by"] == "range_grew"
            and f[0]["text"].startswith("rank %d, " % OOM) and "in the 5th step" in f[0]["text"]
            and "step/forward/kv_cache grew" in f[0]["text"],
            "the view's finding names rank 42, its step and the range: %s" % f)

    # the per-process document (--per-process): the same comparison
    rc, out, err = L.run([c.gmp, "report", "--format", "json", "--per-process"] + traces, c.env,
                         timeout=120)
    L.eq(rc, 0, "report json --per-process (%s)" % err.strip())
    pdoc = json.loads(out) if rc == 0 else {}
    prow = {r["rank"]: r for r in pdoc.get("summary", [])}
    L.eq(sorted(prow), list(range(RANKS)), "--per-process: every rank in the summary")
    for r in range(RANKS):
        if r != OOM and r in prow:
            L.eq(prow[r]["peak_allocated_bytes"], peak_of(r), "--per-process: rank %d's peak" % r)
    heavy = [h["label"] for h in pdoc.get("heavy", [])]
    L.check(any(h.startswith("rank %d, " % HEAVY) for h in heavy), "rank 5 is heavy: %s" % heavy)
    check_oom_section(pdoc.get("ranks_oom"), "--per-process")
    if pdoc.get("ranks_oom") and doc.get("ranks_oom"):
        L.eq(doc["ranks_oom"], pdoc["ranks_oom"], "the same comparison in both documents")

    t0 = time.monotonic()
    rc, out, err = L.run([c.gmp, "report"] + traces, c.env, timeout=120)
    t_text = time.monotonic() - t0
    L.eq(rc, 0, "report text")
    lines = out.splitlines()
    first = [l for l in lines if "ran out of memory first" in l]  # the finding, the section
    L.check(len(first) == 2 and all(l.strip().startswith("rank %d, " % OOM) for l in first),
            "the text names the failing rank: %s" % first)
    L.check(any(l.strip().startswith("heavy: rank %d (" % HEAVY) for l in lines),
            "the text names the heavy rank")
    L.check(any("what differs on rank %d, " % OOM in l and "step/forward/kv_cache" in l
                for l in lines), "the text names the range that grew")
    print("64 ranks: run %.1f s, report json %.1f s, report text %.1f s" % (t_run, t_json, t_text))

    # --reduce over the summaries: byte for byte --cross-rank's, the comparison included, while
    # the traces are readable; one line saying why not once they are gone
    summ = os.path.join(c.tmp, "summaries.json")
    rc, _, err = L.run([c.gmp, "report", "--summary-only", "-o", summ] + traces, c.env,
                       timeout=120)
    L.eq(rc, 0, "--summary-only (%s)" % err.strip())
    for fmt in ("text", "json", "markdown", "html"):
        rc1, a, _ = L.run([c.gmp, "report", "--cross-rank", "--format", fmt, "--color", "never"]
                          + traces, c.env, timeout=120)
        rc2, b, e2 = L.run([c.gmp, "report", "--reduce", "--format", fmt, "--color", "never",
                            summ], c.env, timeout=120)
        L.eq((rc1, rc2), (0, 0), "%s: --cross-rank and --reduce (%s)" % (fmt, e2.strip()))
        L.check(a == b, "%s: --reduce gives --cross-rank's bytes" % fmt)
        L.check("ran out of memory first" in a, "%s: the comparison in the view" % fmt)
    check_parquet(c, traces, doc)
    moved = d + "-moved"
    os.rename(d, moved)
    rc, b, err = L.run([c.gmp, "report", "--reduce", "--format", "json", summ], c.env)
    os.rename(moved, d)
    L.eq(rc, 0, "--reduce without the traces (%s)" % err.strip())
    rdoc = json.loads(b) if rc == 0 else {}
    L.check("ranks_oom" not in rdoc, "--reduce without the traces: no comparison")
    note = rdoc.get("outliers", {}).get("ranks_oom_note", {}).get("text", "")
    L.check("not compared" in note and "trace" in note,
            "--reduce without the traces: one line says why: %r" % note)
    L.eq([o["rank"] for o in rdoc.get("outliers", {}).get("oom", [])], [OOM],
         "--reduce without the traces: the OOM rank still named")

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
    rc, out, err = L.run([c.gmp, "report", "--format", "json", "--cross-rank"] + traces, c.env)
    L.eq(rc, 0, "wall-clock job: report json --cross-rank (%s)" % err.strip())
    L.eq(json.loads(out).get("ranks_oom") if rc == 0 else None, ro,
         "wall-clock job: the same comparison in the cross-rank view")
    L.cleanup(c)
    L.finish("ranks_oom")


if __name__ == "__main__":
    main()
