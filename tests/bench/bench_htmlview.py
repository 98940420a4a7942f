#!/usr/bin/env python3
"""Benchmark of `convert --html-view` on large PyTorch snapshots (outside CI; docs/performance.md).

    python3 tests/bench/bench_htmlview.py GPUMEMPROF [--src SNAPSHOT] [-n 1 100 1000] [--tmp DIR]

For each N: a snapshot made of SRC repeated N times (tests/bench/gen_big_snapshot.py; N=1 is SRC
itself), converted with `gpumemprof convert --html-view` (wall time and peak RSS of the converter,
from /usr/bin/time's format or getrusage), then the page opened in Debian's chromium driven by
playwright-core (tests/bench/bench_htmlview.js): page size, time to the load event and to the first
chart drawn, the JS heap then, and the time to draw after zooming into 1/1000 of the run around
the peak. Needs scripts/install-deps.sh --browser. Prints one line per N."""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpumemprof")
    ap.add_argument("--src", default=os.path.join(
        ROOT, "tests/data/torch-snapshots/transformer-train-step-adamw.pickle"))
    ap.add_argument("-n", type=int, nargs="+", default=[1, 100, 1000])
    ap.add_argument("--tmp", default="/tmp/gmp-bench-htmlview")
    a = ap.parse_args()
    os.makedirs(a.tmp, exist_ok=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    modules = os.path.join(ROOT, "tests/convert/nodedeps/node_modules")
    if not chromium or not os.path.isdir(os.path.join(modules, "playwright-core")):
        sys.exit("needs chromium and playwright-core (scripts/install-deps.sh --browser)")
    print("%6s %10s %9s %9s %9s %9s %9s %10s %9s" % (
        "N", "snapshot", "convert", "conv RSS", "page", "load", "1st draw", "JS heap",
        "zoom draw"))
    for n in a.n:
        snap = a.src if n == 1 else os.path.join(a.tmp, "n%d.pickle" % n)
        if not os.path.exists(snap):
            subprocess.run([sys.executable, os.path.join(HERE, "gen_big_snapshot.py"), a.src,
                            snap, "-n", str(n)], check=True, stdout=subprocess.DEVNULL)
        page = os.path.join(a.tmp, "n%d.html" % n)
        t = time.time()
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        subprocess.run([a.gpumemprof, "convert", snap, "--html-view", page, "--no-progress"],
                       check=True)
        conv = time.time() - t
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        rss = max(rss, before) / 1024.0
        out = subprocess.run(["node", os.path.join(HERE, "bench_htmlview.js"), modules, chromium,
                              page], capture_output=True, text=True, check=True).stdout
        r = json.loads(out.splitlines()[-1])
        print("%6d %8.1fMB %8.1fs %7.0fMB %7.1fMB %7dms %7.0fms %8.1fMB %7.1fms%s" % (
            n, os.path.getsize(snap) / 1e6, conv, rss, os.path.getsize(page) / 1e6, r["load"],
            r["first_render"] or -1, (r["js_heap"] or 0) / 1e6, r["zoom_render"] or -1,
            "  errors: %s" % r["errors"][:2] if r["errors"] else ""))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
