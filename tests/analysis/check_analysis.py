#!/usr/bin/env python3
"""CLI checks of the report's analyses (docs/report.md, "Analyses").

check_analysis.py cli   GPUMEMPROF TEST_ANALYSIS WORKDIR: the leaking trace of test_analysis in
    every report format: JSON value by value, text/Markdown/HTML name the leak and its rate;
    --temporary-us and --device.
check_analysis.py torch GPUMEMPROF TEST_ANALYSIS WORKDIR: a real PyTorch snapshot imported and
    reported (sanity: no crash, plausible numbers; tests/data/torch-snapshots).
check_analysis.py oom GPUMEMPROF TEST_ANALYSIS WORKDIR: the real OOM snapshot of tests/data (its
    oom entry read with Python's pickle) and test_analysis's simulated fragmentation OOM.
check_analysis.py golden_text|golden_md|golden_html|golden_json GPUMEMPROF TEST_ANALYSIS WORKDIR:
    the whole report, in that format, of two fixtures against golden/<fixture>.<ext>:
    `test_analysis write-analyses` (every analysis section: a probable leak with its site,
    temporaries, allocator overhead with a pool, an OOM of each verdict) and `write-steady` (no
    range grows). Run in WORKDIR on relative paths; JSON compared as parsed JSON.
    GMP_REGEN=1 rewrites the golden files.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_golden  # noqa: E402
import gmp_testlib  # noqa: E402

MiB = 1 << 20
SNAPSHOT = os.path.join(os.path.dirname(__file__), "..", "data", "torch-snapshots",
                        "transformer-train-step-adamw.pickle")


def run(*args, ok=0):
    return gmp_testlib.run(list(args), expect=ok, text=True).stdout


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)


def cli(gmp, tool, work):
    trace = os.path.join(work, "leak.zst")
    run(tool, "write-leak", trace)
    rep = json.loads(run(gmp, "report", trace, "--format", "json"))
    a = rep["analysis"]
    check(a["options"] == {"temporary_ns": 1000000, "min_repetitions": 4, "rise_fraction": 0.8},
          "options %r" % a["options"])
    check(a["ranges_checked"] == 2, "ranges_checked")
    # the iterations: "step" (step/opt is nested in it), 10 seen, growth from the end of 2
    # (2^(floor(log2 10) - 2): the warm-up left out is at most a quarter of the iterations)
    check(a["iterations"] == {"kind": "range", "range": "step", "depth": 1, "count": 10,
                              "tracked_from": 1, "window_from": 2},
          "iterations %r" % a["iterations"])
    # one verdict, at step/opt where the leaking allocations are made
    check(len(a["leaks"]) == 1, "one leak verdict: %r" % a["leaks"])
    v = a["leaks"][0]
    check(v["severity"] == "problem" and v["range"] == "step/opt" and v["device"] == 0,
          "verdict %r" % v)
    check(v["rate_bytes_per_iteration"] == MiB and v["growth_bytes"] == 8 * MiB and
          v["iterations"] == 8 and v["from_iteration"] == 2 and v["rises"] == 8 and
          v["falls"] == 0, "verdict numbers %r" % v)
    check(len(v["sites"]) == 1, "one growing site")
    s = v["sites"][0]
    check(s["range"] == "step/opt" and s["api"] == "cudaMalloc" and s["kind"] == "device",
          "site key %r" % s)
    check(s["growth_bytes"] == 8 * MiB and s["rate_bytes_per_iteration"] == MiB and
          s["first_bytes"] == 2 * MiB and s["last_bytes"] == 10 * MiB, "site growth %r" % s)
    check(s["stack"] == [{"function": "optimizer_step", "file": "train.py", "line": 77}],
          "site stack %r" % s.get("stack"))
    # the repeating ranges as data: the device's allocated bytes at their exits
    g = [x for x in a["growth"] if x["range"] == "step"]
    check(len(g) == 1, "one growth row for step")
    g = g[0]
    check(g["severity"] == "ok" and g["owns_leak"] is False, "step owns no leak")
    check([x["owns_leak"] for x in a["growth"] if x["range"] == "step/opt"] == [True],
          "step/opt owns it")
    check(g["device"] == 0 and g["thread_bound"] is True, "device, thread_bound")
    check(g["repetitions"] == 10, "repetitions")
    check(g["rate_bytes_per_repetition"] == MiB, "rate %r" % g["rate_bytes_per_repetition"])
    check(g["total_growth_bytes"] == 9 * MiB, "total growth")
    check(g["first_bytes"] == 65 * MiB and g["last_bytes"] == 74 * MiB, "first/last")
    # the series of exits: points [exit number, bytes]
    check([p[1] for p in g["series"]["points"]] == [(65 + i) * MiB for i in range(10)], "series")
    check([p[0] for p in g["series"]["points"]] == list(range(1, 11)), "series exits")
    check(g["rises"] == 9 and g["falls"] == 0, "rises/falls")
    check(a["temporary_totals"] == {"threshold_ns": 1000000, "allocations": 21, "count": 10,
                                    "bytes": 40 * MiB}, "temporary totals %r" % a["temporary_totals"])
    check(a["temporary"] == [{"range": "step", "device": 0, "allocations": 10,
                              "allocated_bytes": 40 * MiB, "count": 10, "bytes": 40 * MiB,
                              "mean_lifetime_ns": 100000}], "temporary %r" % a["temporary"])
    check(len(a["temporary_sites"]) == 1 and a["temporary_sites"][0]["count"] == 10,
          "temporary sites")
    check(a["temporary_sites"][0]["stack"][0]["function"] == "forward", "temporary site stack")
    check(len(a["overhead"]) == 1 and a["overhead"][0]["device"] == 0, "overhead rows")
    o = a["overhead"][0]["at_peak_allocated"]
    check(o["allocated_bytes"] == 77 * MiB and o["overhead_bytes"] == 0, "overhead at peak %r" % o)
    check(a["ooms"] == [], "no OOMs")

    # a larger threshold (100 us is the temporaries' lifetime: still within)
    a = json.loads(run(gmp, "report", trace, "--format", "json", "--temporary-us", "100"))["analysis"]
    check(a["temporary_totals"]["count"] == 10, "threshold 100 us")
    a = json.loads(run(gmp, "report", trace, "--format", "json", "--temporary-us", "99"))["analysis"]
    check(a["temporary_totals"]["count"] == 0 and a["temporary"] == [], "threshold 99 us")
    run(gmp, "report", trace, "--temporary-us", "-1", ok=2)
    # another device: nothing listed
    a = json.loads(run(gmp, "report", trace, "--format", "json", "--device", "1"))["analysis"]
    check(a["growth"] == [] and a["leaks"] == [] and a["temporary"] == [] and
          a["overhead"] == [], "--device 1")

    text = run(gmp, "report", trace, "--color", "never")
    check("Growth over iterations" in text, "text: growth heading")
    check("probable leak in step/opt on device 0: +1.00 MiB per iteration over iterations 2-10"
          in text, "text: leak line\n" + text)
    # one verdict in its section, and the same line among the findings the report opens with
    check(text.split("\nGrowth over iterations")[1].count("probable leak") == 1, "text: one verdict")
    check(text.split("\nGrowth over iterations")[0].count("probable leak") == 1, "text: one finding")
    check("optimizer_step (train.py:77)" in text, "text: site stack")
    check("Temporary allocations (freed within 1.000 ms, before the range that made them closed): "
          "10 of 21 allocations" in text,
          "text: temporaries")
    md = run(gmp, "report", trace, "--format", "markdown")
    check("### Growth over iterations" in md and "+**1.00 MiB** per iteration" in md, "md")
    check("### Temporary allocations" in md, "md temporaries")
    html = run(gmp, "report", trace, "--format", "html")
    plain = re.sub(r"<[^>]*>", "", html)
    check("probable leak in step/opt on device 0: +1.00 MiB per iteration" in plain, "html leak")
    check('<h3 id="growth">Growth over iterations</h3>' in html, "html growth heading")

    # docs/report.md, "Growth over iterations":
    # a training loop: one leak of 1 MiB per iteration beside state created on step 1
    # (gradients, optimizer state): exactly one verdict, at the leaking range, at 1 MiB/iteration
    trace = os.path.join(work, "train.zst")
    run(tool, "write-train", trace)
    a = json.loads(run(gmp, "report", trace, "--format", "json"))["analysis"]
    check([(v["range"], v["rate_bytes_per_iteration"]) for v in a["leaks"]] ==
          [("train/step/forward", MiB)], "train: verdicts %r" % a["leaks"])
    check(a["iterations"]["range"] == "train/step", "train: iterations %r" % a["iterations"])
    text = run(gmp, "report", trace, "--color", "never")
    check(text.split("\nGrowth over iterations")[1].count("probable leak") == 1,
          "train text: one verdict\n" + text)


def torch(gmp, tool, work):
    if not os.path.exists(SNAPSHOT):  # tests/data is part of the repository
        sys.exit("FAIL: %s missing" % SNAPSHOT)
    trace = os.path.join(work, "adamw.zst")
    run(gmp, "import", SNAPSHOT, "-o", trace)
    rep = json.loads(run(gmp, "report", trace, "--format", "json"))
    a = rep["analysis"]
    dev = {d["id"]: d for d in rep["devices"]}
    check(a["overhead"], "overhead rows")
    for o in a["overhead"]:
        d = dev[o["device"]]
        p = o["at_peak_allocated"]
        check(p["allocated_bytes"] == d["peak_allocated_bytes"], "allocated at the peak")
        check(p["reserved_bytes"] >= p["allocated_bytes"], "reserved >= allocated")
        check(p["overhead_bytes"] == p["reserved_bytes"] - p["allocated_bytes"], "overhead")
        r = o["at_peak_reserved"]
        check(r["reserved_bytes"] == d["peak_reserved_bytes"], "reserved at its peak")
        print("device %d: peak allocated %d, reserved then %d (overhead %d), peak reserved %d "
              "(overhead %d)" % (o["device"], p["allocated_bytes"], p["reserved_bytes"],
                                 p["overhead_bytes"], r["reserved_bytes"], r["overhead_bytes"]))
    t = a["temporary_totals"]
    check(t["count"] <= t["allocations"], "temporaries <= allocations")
    print("temporaries: %d of %d allocations, %d bytes" % (t["count"], t["allocations"], t["bytes"]))
    for g in a["growth"][:5]:
        print("growth: %s x%d owns a leak=%s rate=%d" % (g["range"], g["repetitions"],
                                                          g["owns_leak"],
                                                          g["rate_bytes_per_repetition"]))
    for fmt in ("text", "markdown", "html"):
        run(gmp, "report", trace, "--format", fmt)


OOM_SNAPSHOT = os.path.join(os.path.dirname(__file__), "..", "data", "torch-snapshots",
                            "qwen3-expandable-3gpu-oom.pickle")


def oom(gmp, tool, work):
    """OOMs explained (docs/report.md, "Out of memory, why"). The real OOM snapshot: its one 'oom'
    trace entry read independently with Python's own pickle module (the snapshot is plain dicts and
    lists), against the report's verdict; and the simulated fragmentation OOM of test_analysis."""
    import pickle
    with open(OOM_SNAPSHOT, "rb") as f:
        snap = pickle.load(f)
    entries = [(d, e) for d, tr in enumerate(snap["device_traces"]) for e in tr
               if e["action"] == "oom"]
    check(len(entries) == 1, "one oom entry in the snapshot")
    dev, entry = entries[0]
    # the segments the snapshot was dumped with: what the allocator had reserved (it frees no
    # segment between the OOM and the dump here: the report's reserved at the OOM must match)
    reserved = sum(s["total_size"] for s in snap["segments"] if s["device"] == dev)
    expandable = any(s.get("is_expandable") for s in snap["segments"] if s["device"] == dev)
    rep = json.loads(run(gmp, "report", OOM_SNAPSHOT, "--format", "json"))
    ooms = rep["analysis"]["ooms"]
    check(len(ooms) == 1, "one OOM verdict")
    o = ooms[0]
    check(o["device"] == dev and o["requested_bytes"] == entry["size"] and
          o["free_bytes"] == entry["device_free"], "OOM numbers %r vs %r" % (o, entry))
    check(o["reserved_bytes"] == reserved, "reserved %d vs the segments' %d" %
          (o["reserved_bytes"], reserved))
    check(o["cached_bytes"] == o["reserved_bytes"] - o["allocated_bytes"], "cached")
    # the verdict follows from the numbers: what was free inside the segments and on the device
    # is far below the request, and the device total is not in a snapshot
    check(o["cached_bytes"] + o["free_bytes"] < o["requested_bytes"], "short of the request")
    check(o["verdict"] == "capacity", "verdict %r" % o["verdict"])
    check(o["blocks"] == ("expandable" if expandable else "known"), "blocks %r" % o["blocks"])
    check(o["outside_allocator_bytes"] is None and o["total_bytes"] is None, "outside unknown")
    check(o["advice"].startswith("make the live set smaller"), "advice")
    live = o["live"]
    check(live and sum(x["bytes"] for x in live) <= o["allocated_bytes"], "live sites")
    first = [f for f in live[0]["stack"] if not f.get("internal")][0]
    check(first["function"] == "update_nodes" and first["file"].endswith("models.py"),
          "largest live site %r" % first)
    text = run(gmp, "report", OOM_SNAPSHOT)
    check("4.94 GiB requested: capacity" in text and "largest free block" in text,
          "text verdict")
    print("real OOM: %d requested, %d allocated, %d reserved, %d free inside, %d free on the "
          "device: %s" % (o["requested_bytes"], o["allocated_bytes"], o["reserved_bytes"],
                          o["cached_bytes"], o["free_bytes"], o["verdict"]))
    # the simulated fragmentation OOM (segments and blocks at their addresses, as a snapshot has)
    trace = os.path.join(work, "frag.zst")
    run(tool, "write-frag-oom", trace)
    ooms = json.loads(run(gmp, "report", trace, "--format", "json"))["analysis"]["ooms"]
    check([x["verdict"] for x in ooms] == ["fragmentation", "capacity", "outside_allocator"],
          "simulated verdicts %r" % [x["verdict"] for x in ooms])
    f = ooms[0]
    check(f["largest_free_block_bytes"] == 32 * MiB and f["cached_bytes"] == 256 * MiB and
          f["blocks"] == "known", "fragmentation numbers %r" % f)
    check("expandable_segments" in f["advice"], "fragmentation advice")
    text = run(gmp, "report", trace)
    check("largest free block 32.00 MiB" in text, "text: largest free block\n" + text)


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def golden(gmp, tool, work, fmt):
    ext = {"text": "txt", "markdown": "md", "html": "html", "json": "json"}[fmt]
    for fixture in ("analyses", "steady"):
        run(tool, "write-" + fixture, os.path.join(work, fixture + ".zst"))
        # HTML: the static page (the interactive view, the default, is checked by the report
        # tests and convert_htmlview_chromium)
        extra = ["--static"] if fmt == "html" else []
        p = subprocess.run([gmp, "report", fixture + ".zst", "--format", fmt] + extra, cwd=work,
                           capture_output=True)
        if p.returncode != 0 or p.stderr:
            sys.exit("report %s --format %s: exit %d\n%s" % (fixture, fmt, p.returncode,
                                                             p.stderr.decode()))
        path = os.path.join(GOLDEN, "%s.%s" % (fixture, ext))
        if fmt == "json":
            gmp_golden.golden_json(path, p.stdout, "GMP_REGEN")
        else:
            gmp_golden.golden_bytes(path, p.stdout, "GMP_REGEN")


def main():
    what, gmp, tool, work = sys.argv[1:5]
    gmp = gmp_testlib.gpumemprof(gmp)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fmt = {"golden_text": "text", "golden_md": "markdown", "golden_html": "html",
           "golden_json": "json"}.get(what)
    if fmt:
        golden(gmp, tool, work, fmt)
    else:
        {"cli": cli, "torch": torch, "oom": oom}[what](gmp, tool, work)
    print("ok")


if __name__ == "__main__":
    main()
