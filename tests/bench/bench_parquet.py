#!/usr/bin/env python3
"""bench_parquet.py: what `convert --parquet` costs beside `report` on the same input.

    python3 tests/bench/bench_parquet.py GPUMEMPROF INPUT [--runs N]

Runs, alternated, N times each (median): `report INPUT` (text to /dev/null), `convert INPUT --json
/dev/null` (the report's pass through convert) and `convert INPUT --parquet DIR` (DIR removed
before each run); wall time, CPU time (user + system) and peak RSS from wait4(), and the size of
the tables written. The input is typically the 130 MB snapshot of tests/bench/gen_big_snapshot.py
(docs/performance.md, "Parquet export")."""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def one(cmd):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("%s: exit %d" % (" ".join(cmd), os.waitstatus_to_exitcode(status)))
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpumemprof")
    ap.add_argument("input")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gmp-bench-parquet-")
    out = os.path.join(work, "tables")
    cases = [("report", [a.gpumemprof, "report", a.input, "--no-progress"]),
             ("convert --json", [a.gpumemprof, "convert", a.input, "--json", os.devnull,
                                 "--no-progress"]),
             ("convert --parquet", [a.gpumemprof, "convert", a.input, "--parquet", out,
                                    "--no-progress"])]
    res = {n: [] for n, _ in cases}
    size = 0
    try:
        for _ in range(a.runs):
            for n, cmd in cases:
                shutil.rmtree(out, ignore_errors=True)
                res[n].append(one(cmd))
                if n == "convert --parquet":
                    size = sum(os.path.getsize(os.path.join(d, f))
                               for d, _, fs in os.walk(out) for f in fs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("input: %s (%.1f MB), %d runs each, medians; load average %.1f" %
          (a.input, os.path.getsize(a.input) / 1e6, a.runs, os.getloadavg()[0]))
    for n, _ in cases:
        w, c, r = (statistics.median(x[i] for x in res[n]) for i in range(3))
        print("%-18s wall %.2f s, CPU %.2f s, peak RSS %.1f MiB" % (n, w, c, r))
    print("tables written: %.2f MB" % (size / 1e6))


if __name__ == "__main__":
    main()
