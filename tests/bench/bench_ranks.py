#!/usr/bin/env python3
"""bench_ranks: `gpumemprof report` over the traces of many ranks (docs/performance.md, "Report
over many ranks"). Not a test: it prints figures (`name: value unit` lines and a table).

Records MAX small rank traces on the simulated device, one `gpumemprof run` per rank with RANK
set (tests/agent's programs: `nvtx_ranges` for most ranks, nested NVTX ranges; `basic alloc 16`
every 100th rank from rank 2, four times the others' peak; `oom` on rank 7, on a 1 GiB device),
then times `report --format json` over the first N traces, for each N, with each binary: CPU
(user + system, from wait4) per trace, wall time and the largest resident set. Columns:
  cross-rank   this build (the cross-rank view: more than 8 traces)
  per-process  this build with --per-process (every process's whole report)
  baseline     another build (--baseline; e.g. the code before the cross-rank view)

bench_ranks.py --gpumemprof BIN --progs DIR --simcuda DIR [--baseline BIN] [--recorder BIN]
               [--ranks 64,256,1024] [--baseline-max N] [--dir DIR]
(--recorder: the gpumemprof that records, with its agent beside it; default --gpumemprof)
Python 3 standard library only."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20


def timed(cmd, env):
    """Runs cmd, stdout to /dev/null; returns (wall s, cpu s, max rss KiB, rc)."""
    t0 = time.monotonic()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(cmd, env=env, stdout=null, stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.stderr.write(err.decode(errors="replace")[-2000:])
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, p.returncode


def record(args, d, n, env):
    progs = args.progs
    t0 = time.monotonic()
    for r in range(n):
        out = os.path.join(d, "rank%04d.zst" % r)
        if os.path.exists(out):
            continue
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r % 8), WORLD_SIZE=str(n))
        if r == 7:
            cmd = [os.path.join(progs, "oom")]
            e["SIMCUDA_DEVICE_MEMORY"] = str(1024 * MIB)
            e["SIMCUDA_CONTEXT_OVERHEAD"] = str(100 * MIB)
        elif r % 100 == 2:
            cmd = [os.path.join(progs, "basic"), "alloc", "16"]
        else:
            cmd = [os.path.join(progs, "nvtx_ranges")]
        p = subprocess.run([args.recorder or args.gpumemprof, "run", "-q", "-o", out, "--"] + cmd, env=e,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if p.returncode or not os.path.exists(out):
            sys.exit("recording rank %d failed: %s" % (r, p.stderr.decode(errors="replace")))
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpumemprof", required=True)
    ap.add_argument("--baseline", default="")
    ap.add_argument("--recorder", default="")
    ap.add_argument("--progs", required=True)
    ap.add_argument("--simcuda", required=True)
    ap.add_argument("--ranks", default="64,256,1024")
    ap.add_argument("--baseline-max", type=int, default=1024,
                    help="largest N the baseline runs at (it may take minutes)")
    ap.add_argument("--dir", default="", help="keep the traces here (default: a temporary one)")
    args = ap.parse_args()
    ns = [int(x) for x in args.ranks.split(",")]
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("GPUMEMPROF_") or k.startswith("SIMCUDA_") or k in (
                "RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                "PMI_RANK", "LD_PRELOAD", "CUDA_INJECTION64_PATH"):
            del env[k]
    env["LD_LIBRARY_PATH"] = args.simcuda
    env["LC_ALL"] = "C"
    d = args.dir or tempfile.mkdtemp(prefix="bench-ranks-")
    os.makedirs(d, exist_ok=True)
    try:
        rec = record(args, d, max(ns), env)
        traces = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".zst"))
        size = sum(os.path.getsize(t) for t in traces[:max(ns)])
        print("ranks_recorded: %d traces, %.1f KiB each on average (%.1f s to record)"
              % (max(ns), size / max(ns) / 1024, rec))
        cols = [("cross-rank", [args.gpumemprof, "report", "--format", "json"]),
                ("per-process", [args.gpumemprof, "report", "--format", "json", "--per-process"])]
        if args.baseline:
            cols.append(("baseline", [args.baseline, "report", "--format", "json"]))
        rows = []
        for n in ns:
            for name, cmd in cols:
                if name == "baseline" and n > args.baseline_max:
                    continue
                wall, cpu, rss, rc = timed(cmd + traces[:n], env)
                if rc:
                    sys.exit("%s at %d ranks: exit status %d" % (name, n, rc))
                rows.append((n, name, cpu * 1000.0 / n, wall, rss / 1024.0))
                print("report_%d_ranks_%s: %.2f ms CPU per trace, %.2f s wall, %.1f MiB max RSS"
                      % (n, name.replace("-", "_"), cpu * 1000.0 / n, wall, rss / 1024.0))
                sys.stdout.flush()
        print()
        print("| ranks | command | CPU per trace | wall | max RSS |")
        print("|---:|---|---:|---:|---:|")
        for n, name, cpt, wall, rss in rows:
            print("| %d | %s | %.1f ms | %.2f s | %.1f MiB |" % (n, name, cpt, wall, rss))
    finally:
        if not args.dir:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
