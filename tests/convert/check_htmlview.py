#!/usr/bin/env python3
"""`gpumemprof convert --html-view` pages checked in real headless chromium (Debian's, driven by
the npm package playwright-core: tests/convert/htmlview_check.js).

    check_htmlview.py GPUMEMPROF CONVERT_DATA TORCH_SNAPSHOTS NSYS_DIR NODEDEPS WORK

For each input kind (the convert test traces, several traces at once, an empty trace, a real PyTorch
snapshot, the real nsys export): the page renders (coloured pixels in the plot), the column of each
device's peak holds exactly the report's peak_allocated_bytes and the breakdown by category is the
report's live_at_peak_by_category, hovering along the peak column shows allocations with their
stacks and categories (the frames named per input below must appear), a mouse drag zooms into the
middle fifth of the window and a wheel step zooms further, a click on the breakdown's first stack
selects it and redraws the chart, and there is no console error, no exception and no request
outside the file. The page is self-contained: it names no http(s) address.

The same view inside an HTML report, where it is the default (`gpumemprof report --format html`
for a trace, several traces, a PyTorch snapshot and an nsys export; `gpumemprof convert --report
FILE.html` for a trace and a PyTorch snapshot): the same checks, plus the report is still there
(its <h1>, its static SVG timeline) with the view in its <div id="gmp-view">, once, right above the
first SVG timeline. `--static` (report and convert) gives the page without the view and no script.

Exit 77 (skip) without chromium, node or playwright-core (scripts/install-deps.sh --browser)."""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

SKIP = 77


def run(cmd):
    return gmp_testlib.run(cmd).stdout


def recorded_peak(path, dev):
    """PyTorch's peak reserved on device dev, by Python's pickle module: the reserve before the
    window (the final segments less the window's net change) plus the window's running maximum."""
    import pickle
    with open(path, "rb") as f:
        snap = pickle.load(f)
    run = peak = 0
    for e in snap["device_traces"][dev]:
        if e["action"] in ("segment_alloc", "segment_map"):
            run += e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            run -= e["size"]
        peak = max(peak, run)
    final = sum(s["total_size"] for s in snap["segments"] if s.get("device") == dev)
    return final - run + peak


def main():
    gmp, data, snaps, nsys, nodedeps, work = sys.argv[1:7]
    gmp = gmp_testlib.gpumemprof(gmp)
    nodedeps = os.path.join(os.path.abspath(nodedeps), "node_modules")
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser")
                     if shutil.which(n)), None)
    if not chromium or not shutil.which("node"):
        print("SKIP: needs chromium and node (scripts/install-deps.sh --browser)")
        return SKIP
    if not os.path.isdir(os.path.join(nodedeps, "playwright-core")):
        print("SKIP: %s/playwright-core missing (scripts/install-deps.sh --browser)" % nodedeps)
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cases = [
        ("basic", [os.path.join(data, "basic.trace")],
         ["libtrain.so+0x12340", "Linear.forward (model.py:7)"]),
        ("hostile", [os.path.join(data, "hostile.trace")], []),
        ("multi", [os.path.join(data, "rank0.trace"), os.path.join(data, "rank1.trace")], []),
        ("empty", [os.path.join(data, "empty.trace")], []),
        ("small-step", [os.path.join(snaps, "small-step.pickle")], []),
        ("train-step", [os.path.join(snaps, "transformer-train-step-adamw.pickle")], []),
        ("gemm", [os.path.join(nsys, "gemm-a100-memory-usage.sqlite")], []),
        ("qwen3-oom", [os.path.join(snaps, "qwen3-expandable-3gpu-oom.pickle")], []),
    ]
    # the HTML report with the view as its timeline (the default: report --format html, and
    # convert --report FILE.html)
    cases += [("report-" + name, inputs, frames) for name, inputs, frames in cases
              if name in ("basic", "multi", "small-step", "gemm")]
    cases += [("convreport-" + name, inputs, frames) for name, inputs, frames in cases
              if name in ("basic", "small-step")]
    # --whatif CONF: the recorded reserve and the one the model replays under CONF, two lines
    train = os.path.join(snaps, "transformer-train-step-adamw.pickle")
    qwen = os.path.join(snaps, "qwen3-expandable-3gpu-oom.pickle")
    whatif_cases = [("whatif-train-step-own", train, "expandable_segments:False"),
                    ("whatif-train-step-128", train, "max_split_size_mb:128"),
                    ("whatif-qwen3", qwen, "max_split_size_mb:128")]
    spec, peaks, wcats, starts, finds = [], {}, {}, {}, {}
    wants = {}
    for name, inp, conf in whatif_cases:
        page = os.path.join(work, name + ".html")
        run([gmp, "convert", inp, "--html-view", page, "--whatif", conf, "--no-progress"])
        w = json.loads(run([gmp, "whatif", inp, "--format", "json", "--alloc-conf", conf]))
        first = next((o["device"] for o in json.loads(run([gmp, "report", "--format", "json",
                                                               inp]))["ooms"][:1]), None)
        dev = next(d for d in w["devices"] if first is None or d["id"] == first)
        # the recorded line's top is PyTorch's peak reserved as Python's pickle module reads it;
        # the replayed line's is whatif's figure for CONF, and under the recording's own
        # settings (the train step's: the defaults) PyTorch's again
        wants[page] = {"name": conf, "recorded": recorded_peak(inp, dev["id"]),
                       "replayed": dev["configs"][1]["peak_reserved_bytes"]}
        if name.endswith("-own"):
            wants[page]["replayed_is_recorded"] = True
        spec.append({"file": page, "frames": [], "report": False})
        peaks[page] = None
    for name, inputs, frames in cases:
        for i in inputs:
            if not os.path.exists(i):
                sys.exit("%s is missing" % i)
        page = os.path.join(work, name + ".html")
        if name.startswith(("report-", "convreport-")):
            if name.startswith("report-"):
                run([gmp, "report"] + inputs + ["--format", "html", "-o", page, "--no-progress"])
                static = run([gmp, "report"] + inputs + ["--format", "html", "--static",
                                                         "--no-progress"]).decode()
            else:
                run([gmp, "convert"] + inputs + ["--report", page, "--no-progress"])
                sp = os.path.join(work, name + "-static.html")
                run([gmp, "convert"] + inputs + ["--report", sp, "--static", "--no-progress"])
                static = open(sp, encoding="utf-8").read()
            text = open(page, encoding="utf-8").read()
            if "gmp-view" in static or "<script" in static or "<svg" not in static:
                sys.exit("%s: the --static page has a view or a script, or no SVG" % name)
            # once, right above the first device's static timeline (an SVG before the next
            # heading), which stays
            div = '<div id="gmp-view">\n<style>'
            at = text.find(div)
            close = "</script>\n</div>\n"
            end = text.find(close, at) if at >= 0 else -1
            rest = text[end + len(close):end + 4000] if end >= 0 else ""
            h = rest.find("<h")
            if text.count(div) != 1 or "<svg" not in rest or (h >= 0 and rest.index("<svg") > h):
                sys.exit("%s: the view is not once right above the first SVG timeline" % name)
        else:
            run([gmp, "convert"] + inputs + ["--html-view", page, "--no-progress"])
        text = open(page, encoding="utf-8").read()
        if re.search(r"https?://", text):
            sys.exit("%s names a network address: %s" % (name, re.search(r"https?://\S+",
                                                                           text).group(0)[:80]))
        rep = json.loads(run([gmp, "report", "--format", "json"] + inputs))
        procs = rep["processes"] if "processes" in rep else [rep]
        want = [d["peak_allocated_bytes"] for p in procs for d in p.get("devices", [])
                if d["peak_allocated_bytes"] > 0 or d.get("allocations")]
        peaks[page] = want
        wcats[page] = [{c["category"]: c["bytes"] for c in d.get("live_at_peak_by_category", [])
                        if c["bytes"]}
                       for p in procs for d in p.get("devices", [])
                       if d["peak_allocated_bytes"] > 0 or d.get("allocations")]
        # the page opens on the device of the first OOM (the report's first), among the devices
        # it lists (those of `want`, in order)
        listed = [(pi, d["id"]) for pi, p in enumerate(procs) for d in p.get("devices", [])
                  if d["peak_allocated_bytes"] > 0 or d.get("allocations")]
        first = next(((pi, o["device"]) for pi, p in enumerate(procs) for o in p["ooms"][:1]),
                     None)
        starts[page] = (listed.index(first) if first in listed else 0,
                        sum(1 for p in procs for o in p["ooms"] if o["device"] == first[1])
                        if first else 0)
        # a whole page's findings: the report's (one trace), less what only the report says (the
        # memory left at exit, growth, an OOM's what-if: the report replays the recording again
        # for it) and where its detail is
        if not name.startswith(("report-", "convreport-")) and "processes" not in rep:
            finds[page] = [re.sub(r'; what if: .*$', "", re.sub(
                                      r'; details: "[^"]*"\)$', ")",
                                      re.sub(r' \(details: "[^"]*"\)$', "", f["text"])))
                           for f in rep["findings"] if f["kind"] in ("oom", "leak", "unexplained")]
        spec.append({"file": page, "frames": frames,
                     "report": name.startswith(("report-", "convreport-"))})
    # --static (and --interactive, the default kept for older scripts) are for HTML only: a usage
    # error (exit 2) for another format
    for opt in ("--static", "--interactive"):
        p = subprocess.run([gmp, "report", os.path.join(data, "basic.trace"), opt],
                           capture_output=True)
        if p.returncode != 2 or opt.encode() not in p.stderr:
            sys.exit("report %s (text): exit %d, %r" % (opt, p.returncode, p.stderr[-200:]))
    if gmp_testlib.no_browser():
        print("ok: %d pages written; chromium left out (GMP_TEST_NO_BROWSER)" % len(spec))
        return 0
    spec_file = os.path.join(work, "spec.json")
    with open(spec_file, "w") as f:
        json.dump(spec, f)
    out = run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "htmlview_check.js"), nodedeps, chromium, spec_file])
    res = [json.loads(l) for l in out.decode().splitlines() if l.strip()]
    if len(res) != len(spec):
        sys.exit("htmlview_check.js answered for %d of %d pages" % (len(res), len(spec)))
    fails = []
    for s, r in zip(spec, res):
        name = os.path.basename(s["file"])
        f = []
        if not r.get("draws"):
            f.append("the page did not draw")
        if r.get("errors"):
            f.append("errors: %s" % r["errors"][:3])
        if r.get("requests"):
            f.append("requests outside the file: %s" % r["requests"][:3])
        if s["report"]:
            ir = r.get("inReport")
            if not ir or not ir.get("header"):
                f.append("the report has no interactive view in its <div id=gmp-view>: %s" % ir)
            elif not ir.get("svgs") or not ir.get("h1", "").startswith("gpumemprof report"):
                f.append("the report's own heading or static timeline is gone: %s" % ir)
        rs = r.get("reserve")
        if s["file"] in wants:
            w = wants[s["file"]]
            if not rs or rs.get("name") != w["name"] or rs.get("recorded") != w["recorded"] or \
                    rs.get("replayed") != w["replayed"]:
                f.append("reserve lines drawn %s, want %s" % (rs, w))
            if w.get("replayed_is_recorded") and w["replayed"] != w["recorded"]:
                f.append("replayed under its own settings %d, PyTorch's %d" %
                         (w["replayed"], w["recorded"]))
            if not r.get("replayedPixels"):
                f.append("the replayed reserve's line is not on the canvas")
            if f:
                fails.append("%s: %s" % (name, "; ".join(f)))
            else:
                print("ok: %s: reserve lines recorded %d, replayed %d (%s), %d pixels"
                      % (name, rs["recorded"], rs["replayed"], rs["name"], r["replayedPixels"]))
            continue
        if rs is not None or r.get("replayedPixels"):
            f.append("a reserve line without --whatif: %s" % rs)
        want = peaks[s["file"]]
        start, ooms = starts[s["file"]]
        if r.get("draws") and want and r.get("start") != start:
            f.append("opens on device %s, the first OOM's is %s" % (r.get("start"), start))
        if r.get("draws") and want and r.get("oomsDrawn") != ooms:
            f.append("%s OOMs drawn on the opening device, the report has %d" %
                     (r.get("oomsDrawn"), ooms))
        if s["file"] in finds and r.get("draws"):
            if r.get("findings", []) != finds[s["file"]]:
                f.append("findings %r, the report's %r" % (r.get("findings"), finds[s["file"]]))
            if finds[s["file"]] and not r.get("findingsFirst"):
                f.append("the findings are not above the timeline")
        got = [r.get("peaks", {}).get(str(i)) for i in range(len(want))]
        if r.get("draws") and got != want:
            f.append("peak columns %s, report's peaks %s" % (got, want))
        cats = [r.get("categories", {}).get(str(i), {}) for i in range(len(want))]
        if r.get("draws") and [sum(c.values()) for c in cats] != want:
            f.append("breakdown by category %s, report's peaks %s" % (cats, want))
        # the report leaves its table out when every byte is "other"
        want_cats = [wc or ({"other": w} if w else {}) for wc, w in zip(wcats[s["file"]], want)]
        if r.get("draws") and cats != want_cats:
            f.append("breakdown by category %s, report's live_at_peak_by_category %s" %
                     (cats, want_cats))
        if want and r.get("draws"):
            if not r.get("painted"):
                f.append("nothing painted in the chart")
            hov = r.get("hovers", [])
            if not any(h.startswith("allocation of") or "allocation" in h for h in hov):
                f.append("hovering along the peak showed no allocation: %s" % hov[:3])
            if not any("stack:" in h for h in hov):
                f.append("no hover shows a stack")
            if not any("category: " in h for h in hov):
                f.append("no hover shows a category")
            for fr in s["frames"]:
                if not any(fr in h for h in hov):
                    f.append("no hover shows the frame %r" % fr)
            z = r.get("zoom", {})
            b, d, w = z.get("before"), z.get("drag"), z.get("wheel")
            if not (b and d and w):
                f.append("no zoom figures")
            else:
                span0, span1, span2 = b[1] - b[0], d[1] - d[0], w[1] - w[0]
                if not (0.15 * span0 < span1 < 0.25 * span0) or not (b[0] < d[0] < d[1] < b[1]):
                    f.append("a drag over the middle fifth gave the window %s of %s" % (d, b))
                if not span2 < span1:
                    f.append("a wheel step did not zoom in: %s -> %s" % (d, w))
            ln = r.get("link")
            if not ln or not ln.get("selected") or not ln.get("redrawn") or \
                    "stack" not in ln.get("detail", ""):
                f.append("a click on the breakdown did not select and redraw: %s" % ln)
        if f:
            fails.append("%s: %s" % (name, "; ".join(f)))
        else:
            print("ok: %s: %d device(s), opens on %s with %s OOMs drawn, %d findings, peak columns "
                  "%s, %d hover texts, zoom %s -> %s, level %s"
                  % (name, r.get("devices", 0), r.get("start"), r.get("oomsDrawn"),
                     len(r.get("findings") or []), got, len(r.get("hovers", [])),
                     (r.get("zoom") or {}).get("before"), (r.get("zoom") or {}).get("wheel"),
                     (r.get("zoom") or {}).get("level")))
    if fails:
        print("FAIL\n" + "\n".join(fails))
        return 1
    print("all html views render, hover, zoom and link in chromium")
    return 0


if __name__ == "__main__":
    sys.exit(main())
