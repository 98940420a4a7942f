#!/usr/bin/env python3
"""memory_viz on the snapshots of bench_htmlview.py, for comparison (outside CI; docs/performance.md).

    GMP_MEMVIZ_JS=/path/MemoryViz.js python3 tests/bench/bench_memviz.py [-n 1 100 1000] [--tmp DIR]

The real memory_viz (PyTorch's MemoryViz.js, which this repository does not hold: docs/convert.md
says where to get it) opens each snapshot the way torch.cuda._memory_viz's HTML does (the pickle in
base64 inside the page), served with its d3 modules from 127.0.0.1 by tests/convert/memviz_viewer.py's
server, in Debian's chromium driven by playwright-core (tests/bench/bench_htmlview.js): the time to
its Active Memory Timeline drawn (the test page's title "memviz done") and the JS heap then; an
error when it does not load. Snapshots from tests/bench/gen_big_snapshot.py, as bench_htmlview.py
makes them (same --tmp)."""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests/convert"))
import memviz_viewer as mv  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(
        ROOT, "tests/data/torch-snapshots/transformer-train-step-adamw.pickle"))
    ap.add_argument("-n", type=int, nargs="+", default=[1, 100, 1000])
    ap.add_argument("--tmp", default="/tmp/gmp-bench-htmlview")
    a = ap.parse_args()
    js = os.environ.get("GMP_MEMVIZ_JS")
    if not js or not os.path.isfile(js):
        sys.exit("GMP_MEMVIZ_JS must name MemoryViz.js")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    modules = os.path.join(ROOT, "tests/convert/nodedeps/node_modules")
    harness = os.path.join(ROOT, "tests/convert/memviz")
    nm = os.path.join(harness, "node_modules")
    imap, _ = mv.import_map(js, nm)
    srv = mv.Server(os.path.dirname(os.path.abspath(js)), nm, os.path.join(harness, "page.html"),
                    imap)
    print("%6s %10s %12s %10s  %s" % ("N", "snapshot", "timeline", "JS heap", "errors"))
    for n in a.n:
        snap = a.src if n == 1 else os.path.join(a.tmp, "n%d.pickle" % n)
        if not os.path.exists(snap):
            subprocess.run([sys.executable, os.path.join(HERE, "gen_big_snapshot.py"), a.src,
                            snap, "-n", str(n)], check=True, stdout=subprocess.DEVNULL)
        try:
            url = srv.add_case("n%d" % n, open(snap, "rb").read(), ["Active Memory Timeline"])
        except (MemoryError, OverflowError) as e:
            print("%6d %8.1fMB %12s %10s  %s" % (n, os.path.getsize(snap) / 1e6, "-", "-", e))
            continue
        p = subprocess.run(["node", os.path.join(HERE, "bench_htmlview.js"), modules, chromium,
                            url], capture_output=True, text=True)
        srv.cases.pop("n%d" % n, None)
        if p.returncode != 0 or not p.stdout.strip():
            print("%6d %8.1fMB %12s %10s  %s" % (n, os.path.getsize(snap) / 1e6, "-", "-",
                                                 (p.stderr.strip().splitlines() or ["?"])[-1]))
            continue
        r = json.loads(p.stdout.splitlines()[-1])
        t = "%.0f ms" % r["first_render"] if r["first_render"] is not None else "-"
        print("%6d %8.1fMB %12s %8.1fMB  %s" % (n, os.path.getsize(snap) / 1e6, t,
                                               (r["js_heap"] or 0) / 1e6,
                                               "; ".join(r["errors"])[:200]))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
