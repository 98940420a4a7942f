#!/usr/bin/env python3
"""bench_pickle.py: `gpumemprof report SNAPSHOT.pickle` beside `ptmem -s SNAPSHOT.pickle`.

    python3 tests/bench/bench_pickle.py [--ptmem DIR] [--gpumemprof EXE] [--runs N]
                                        [--sizes real,100,1000] [--ptmem-1000] [--work DIR]

Prints figures, asserts nothing (a benchmark, not a test). For each input, one process of each
tool is timed from a cold start, alternately, --runs times (default 3): wall time, CPU time
(user + system) and peak RSS from wait4() of that process; the medians are printed with the ratio
ours/ptmem, MB/s (file size / wall time) and peak RSS per file size.

Inputs: tests/data/torch-snapshots/transformer-train-step-adamw.pickle (real: 3.2 MB, 19,342
entries), and that trace repeated N times by tests/bench/gen_big_snapshot.py (N=100: 130 MB,
1.93 M entries; N=1000: 1.3 GB, 19.3 M entries), generated once into --work (default
/tmp/gpumemprof-bench; never in the repository).

ptmem (https://github.com/kainzhong/ptmem, a Python tool; nothing of it is copied here) is taken
from a checkout given by --ptmem or $PTMEM (the directory holding src/ptmem/cli.py):
    git clone https://github.com/kainzhong/ptmem /tmp/ptmem
It needs only the Python standard library; it runs with $PYTHON (default /usr/bin/python3).
ptmem caches what it parsed in .NAME.memcache beside its input: it is run on a copy of the input
in a directory of its own, and the cache is deleted after every run, so each run is cold. At
N=1000 ptmem needs about 10 times its N=100 memory (some 13 GB), so it runs there only with
--ptmem-1000; gpumemprof always does.

gpumemprof is --gpumemprof or $GPUMEMPROF, else build-bench/bin/gpumemprof (built here with
CMAKE_BUILD_TYPE=RelWithDebInfo when missing, as tests/bench/run-benchmarks does).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REAL = os.path.join(ROOT, "tests", "data", "torch-snapshots", "transformer-train-step-adamw.pickle")
GEN = os.path.join(ROOT, "tests", "bench", "gen_big_snapshot.py")


def timed(cmd, cwd=None):
    """Runs cmd (stdout discarded); returns (wall s, cpu s, peak RSS bytes, exit status)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.stderr.write("bench_pickle: %s: exit %d: %s\n" % (" ".join(cmd), p.returncode,
                                                              err.decode(errors="replace")[-500:]))
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode


def gpumemprof_exe(given):
    exe = given or os.environ.get("GPUMEMPROF")
    if exe:
        return exe
    exe = os.path.join(ROOT, "build-bench", "bin", "gpumemprof")
    if True:  # incremental: cheap when up to date
        subprocess.run(["cmake", "-S", ROOT, "-B", os.path.join(ROOT, "build-bench"),
                        "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", os.path.join(ROOT, "build-bench"), "--target",
                        "gpumemprof", "-j2"], check=True, stdout=subprocess.DEVNULL)
    return exe


def entries_of(n):
    return 19342 * n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptmem", default=os.environ.get("PTMEM"))
    ap.add_argument("--gpumemprof")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="real,100,1000")
    ap.add_argument("--ptmem-1000", action="store_true")
    ap.add_argument("--work", default="/tmp/gpumemprof-bench")
    a = ap.parse_args()
    py = os.environ.get("PYTHON", "/usr/bin/python3")
    src = os.path.join(a.ptmem, "src") if a.ptmem else None
    if not src or not os.path.exists(os.path.join(src, "ptmem", "cli.py")):
        print("bench_pickle: no ptmem checkout (--ptmem DIR or $PTMEM, the directory holding "
              "src/ptmem/cli.py); get it with: git clone https://github.com/kainzhong/ptmem "
              "/tmp/ptmem. Running gpumemprof alone.")
        src = None
    gmp = gpumemprof_exe(a.gpumemprof)
    os.makedirs(a.work, exist_ok=True)
    print("gpumemprof: %s; ptmem: %s (%s); %d runs each, alternating, medians" % (
        gmp, a.ptmem or "-", py, a.runs))
    print("%-6s %9s %10s | %-30s | %-30s | %s" % (
        "input", "MB", "entries", "gpumemprof report: wall cpu RSS", "ptmem -s: wall cpu RSS",
        "ours/ptmem wall cpu; MB/s ours ptmem; RSS/file ours ptmem"))
    for size in a.sizes.split(","):
        if size == "real":
            path, entries = REAL, entries_of(1)
        else:
            n = int(size)
            path, entries = os.path.join(a.work, "train-step-x%d.pickle" % n), entries_of(n)
            if not os.path.exists(path):
                subprocess.run([sys.executable, GEN, REAL, path + ".tmp", "-n", str(n)],
                               check=True, stdout=subprocess.DEVNULL)
                os.replace(path + ".tmp", path)
        mb = os.path.getsize(path) / 1e6
        run_ptmem = src is not None and (size != "1000" or a.ptmem_1000)
        ours, theirs = [], []
        pdir = os.path.join(a.work, "ptmem-run")
        for _ in range(a.runs):
            ours.append(timed([gmp, "report", path]))
            if run_ptmem:
                shutil.rmtree(pdir, ignore_errors=True)
                os.makedirs(pdir)
                copy = os.path.join(pdir, os.path.basename(path))
                shutil.copyfile(path, copy)  # ptmem's cache goes beside the copy
                theirs.append(timed([py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                                     "sys.argv = ['ptmem', '-s', sys.argv[2]]; "
                                     "from ptmem.cli import run; run()", src, copy], cwd=pdir))
                shutil.rmtree(pdir, ignore_errors=True)  # the copy and its .NAME.memcache

        def med(rows, k):
            return statistics.median(r[k] for r in rows)

        o = [med(ours, k) for k in range(3)]
        line = "%-6s %9.1f %10d | %7.2f s %7.2f s %7.1f MiB | " % (
            size, mb, entries, o[0], o[1], o[2] / 2**20)
        if theirs:
            t = [med(theirs, k) for k in range(3)]
            line += "%7.2f s %7.2f s %7.1f MiB | %.3f %.3f; %.0f %.1f MB/s; %.2f %.2f" % (
                t[0], t[1], t[2] / 2**20, o[0] / t[0], o[1] / t[1], mb / o[0], mb / t[0],
                o[2] / 1e6 / mb, t[2] / 1e6 / mb)
        else:
            why = "not run (--ptmem-1000)" if src else "no ptmem"
            line += "%-30s | -; %.0f MB/s; RSS/file %.3f" % (why, mb / o[0], o[2] / 1e6 / mb)
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
