#!/usr/bin/env python3
"""bench_fleet: the cross-rank view by `python3 -m gpumemprof.fleet` on a Dask LocalCluster of two
worker processes against `gpumemprof report` in one process (docs/performance.md, "Fleet on
Dask"). Not a test: it prints figures (`name: value unit` lines and a table), after checking
that both give the same bytes.

Records the rank traces as bench_ranks.py does (tests/agent's programs on the simulated device,
one `gpumemprof run` per rank with RANK set), then times, over the first N of them:
  report        gpumemprof report --format json (the cross-rank view, above 8 traces)
  fleet         python3 -m gpumemprof.fleet --scheduler local:2 --format json (one batch per
                worker: each worker's gpumemprof reads the modules' symbols once)
  fleet K       the same with --batch K (N/K tasks, each paying the symbols again)
CPU is user + system of the command and the processes it waited for (the workers, their
gpumemprof), from wait4; each figure is the median of --repeat runs, interleaved.

bench_fleet.py --gpumemprof BIN --progs DIR --simcuda DIR --pkg DIR [--python PY]
               [--ranks 64,256] [--batch 16] [--repeat 3] [--dir DIR]
(--pkg: the directory that holds the gpumemprof package, <build>/lib/gpumemprof/python;
--python: one with Dask's distributed, default /usr/bin/python3)"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_ranks  # noqa: E402  (record(): the same traces as the ranks benchmark)


def timed(cmd, env, out):
    t0 = time.monotonic()
    with open(out, "wb") as f:
        p = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc:
        sys.exit("%s: exit status %d: %s" % (" ".join(cmd[:6]), rc,
                                             err.decode(errors="replace")[-2000:]))
    return wall, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpumemprof", required=True)
    ap.add_argument("--progs", required=True)
    ap.add_argument("--simcuda", required=True)
    ap.add_argument("--pkg", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--ranks", default="64,256")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dir", default="")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, interleaved: the median")
    args = ap.parse_args()
    args.recorder = ""
    ns = [int(x) for x in args.ranks.split(",")]
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("GPUMEMPROF_") or k.startswith("SIMCUDA_") or k in (
                "RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                "PMI_RANK", "LD_PRELOAD", "CUDA_INJECTION64_PATH"):
            del env[k]
    env["LD_LIBRARY_PATH"] = args.simcuda
    env["LC_ALL"] = "C"
    d = args.dir or tempfile.mkdtemp(prefix="bench-fleet-")
    os.makedirs(d, exist_ok=True)
    try:
        rec = bench_ranks.record(args, d, max(ns), env)
        traces = sorted(os.path.join(d, f) for f in os.listdir(d)
                        if f.startswith("rank") and f.endswith(".zst"))
        print("ranks_recorded: %d traces (%.1f s to record)" % (max(ns), rec))
        fenv = dict(env, PYTHONPATH=args.pkg)
        fleet = [args.python, "-m", "gpumemprof.fleet", "--scheduler", "local:2",
                 "--gpumemprof", os.path.abspath(args.gpumemprof), "--format", "json"]
        cols = [("report", [args.gpumemprof, "report", "--format", "json"], env),
                ("fleet", fleet, fenv),
                ("fleet --batch %d" % args.batch, fleet + ["--batch", str(args.batch)], fenv)]
        rows = []
        for n in ns:
            want = None
            runs = {name: [] for name, _, _ in cols}
            for _ in range(args.repeat):
                for name, cmd, e in cols:
                    out = os.path.join(d, "out.json")
                    runs[name].append(timed(cmd + traces[:n], e, out))
                    with open(out, "rb") as f:
                        got = f.read()
                    if want is None:
                        want = got
                    elif got != want:
                        sys.exit("%s at %d ranks: not the bytes of report" % (name, n))
            for name, _, _ in cols:
                wall = statistics.median(w for w, _ in runs[name])
                cpu = statistics.median(c for _, c in runs[name])
                rows.append((n, name, wall, cpu))
                print("fleet_%d_ranks_%s: %.2f s wall, %.2f s CPU" %
                      (n, name.replace(" --batch ", "_batch").replace("-", "_"), wall, cpu))
                sys.stdout.flush()
        print()
        print("| ranks | command | wall | CPU |")
        print("|---:|---|---:|---:|")
        for n, name, wall, cpu in rows:
            print("| %d | %s | %.2f s | %.2f s |" % (n, name, wall, cpu))
    finally:
        if not args.dir:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
