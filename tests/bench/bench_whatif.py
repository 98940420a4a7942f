#!/usr/bin/env python3
"""bench_whatif.py: `gpumemprof whatif SNAPSHOT.pickle` beside `gpumemprof report SNAPSHOT.pickle`.

    python3 tests/bench/bench_whatif.py [--gpumemprof EXE] [--bench-whatif EXE] [--runs N]
                                        [--sizes real,100,1000] [--work DIR]

Prints figures, asserts nothing (a benchmark, not a test). For each input, one `report` process
and one `whatif` process (the standard set of settings: the recording's own and five others) are
timed from a cold start, alternately, --runs times (default 3): wall time, CPU time (user +
system) and peak RSS from wait4() of that process (as /usr/bin/time -v reports them); the medians
are printed side by side with the ratios whatif/report, and whatif's tensor events per second
(the allocations and frees it replays, over its wall time). Then tests/bench/bench_whatif (C) on
the same input gives the replay's own throughput in one process, reading included: tensor events
per CPU second (best of --runs; the wall time of a shared machine counts waits for a core too)
through one model (PyTorch's defaults) and through the standard set.

Inputs: tests/data/torch-snapshots/transformer-train-step-adamw.pickle (real: 3.2 MB, 12,989
tensor events), and that trace repeated N times by tests/bench/gen_big_snapshot.py (N=100:
130 MB; N=1000: 1.3 GB), generated once into --work (default /tmp/gpumemprof-bench, shared with
bench_pickle.py; never in the repository).

The executables are --gpumemprof / --bench-whatif, else build-bench/bin/ (built here with
CMAKE_BUILD_TYPE=RelWithDebInfo, as tests/bench/run-benchmarks does).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REAL = os.path.join(ROOT, "tests", "data", "torch-snapshots", "transformer-train-step-adamw.pickle")
GEN = os.path.join(ROOT, "tests", "bench", "gen_big_snapshot.py")


def run_timed(cmd):
    """Runs cmd (stdout discarded); returns (wall s, cpu s, peak RSS bytes) from wait4()."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("bench_whatif: %s: %s" % (" ".join(cmd), err.decode(errors="replace")[-500:]))
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def build(given, target):
    if given:
        return given
    b = os.path.join(ROOT, "build-bench")
    subprocess.run(["cmake", "-S", ROOT, "-B", b, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", b, "--target", target, "-j2"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(b, "bin", target)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpumemprof")
    ap.add_argument("--bench-whatif")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="real,100")
    ap.add_argument("--work", default="/tmp/gpumemprof-bench")
    a = ap.parse_args()
    gmp = build(a.gpumemprof, "gpumemprof")
    bw = build(a.bench_whatif, "bench_whatif")
    os.makedirs(a.work, exist_ok=True)
    print("gpumemprof: %s; %d runs each, alternating, medians" % (gmp, a.runs))
    print("%-5s %7s %9s | %-28s | %-28s | %-22s | %s" % (
        "input", "MB", "tensor ev", "report: wall cpu RSS", "whatif: wall cpu RSS",
        "whatif/report: wall cpu RSS",
        "whatif ev/s; replay ev per CPU s: one setting, standard set"))
    for size in a.sizes.split(","):
        if size == "real":
            path = REAL
        else:
            n = int(size)
            path = os.path.join(a.work, "train-step-x%d.pickle" % n)
            if not os.path.exists(path):
                subprocess.run([sys.executable, GEN, REAL, path + ".tmp", "-n", str(n)],
                               check=True, stdout=subprocess.DEVNULL)
                os.replace(path + ".tmp", path)
        mb = os.path.getsize(path) / 1e6
        rep, wif = [], []
        for _ in range(a.runs):
            rep.append(run_timed([gmp, "report", path]))
            wif.append(run_timed([gmp, "whatif", path]))
        r = [statistics.median(x[k] for x in rep) for k in range(3)]
        w = [statistics.median(x[k] for x in wif) for k in range(3)]
        # the replay alone, in one process (bench_whatif.c): tensor events and events/s
        bo = subprocess.run([bw, path, "--runs", str(a.runs)], check=True, capture_output=True,
                            text=True).stdout
        fig = dict(l.split(": ", 1) for l in bo.splitlines() if ": " in l)
        per_cpu = lambda k: fig[k].split("per CPU second: ")[1].rstrip(")")
        ev = int(fig["tensor_events"])
        print("%-5s %7.1f %9d | %6.2f s %6.2f s %6.1f MiB | %6.2f s %6.2f s %6.1f MiB | "
              "%5.2f %5.2f %5.2f | %.2f M; %s, %s" % (
                  size, mb, ev, r[0], r[1], r[2] / 2**20, w[0], w[1], w[2] / 2**20,
                  w[0] / r[0], w[1] / r[1], w[2] / r[2], ev / w[0] / 1e6,
                  per_cpu("run_defaults_tensor_events_per_s"),
                  per_cpu("run_standard_set_tensor_events_per_s")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
