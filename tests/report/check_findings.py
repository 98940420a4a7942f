#!/usr/bin/env python3
"""Findings first (docs/report.md, "Findings"): every format of `gpumemprof report` opens with the
findings under the trace's header, and the JSON has them in `findings[]` with stable keys.

check_findings.py snapshot GPUMEMPROF SNAPSHOT
    a real PyTorch snapshot that ends in an out-of-memory error (tests/data/torch-snapshots/
    qwen3-expandable-3gpu-oom.pickle): the OOM's device and request are read from the pickle with
    Python's pickle module (the oracle: no code of ours), and the OOM verdict must be within the
    first 20 lines of the text and Markdown reports, in the JSON's first finding, and in the HTML
    before the first device's section, with a link to its section that exists; `convert
    --speedscope` opens on that device's first profile.
check_findings.py demo GPUMEMPROF SIMCUDA_DIR TRAIN_SIM [PRELOAD]
    the demo (scripts/demo: samples/train_sim 6 recorded by `gpumemprof run` on the simulated
    device): its probable leak (train/step/metrics, 1 MiB per step) within the first 20 lines of
    every format; 6 MiB left at exit as a warning after it.
check_findings.py growth GPUMEMPROF TEST_ANALYSIS
    growth without a leak (tests/analysis/test_analysis write-growth: 12 steps each keeping 1 MiB
    from a stack of its own): a "growth" warning with the step range's rise over the later half
    of the iterations, after the 12 MiB left at exit, and no probable leak.
check_findings.py fixture GPUMEMPROF GEN_TRACES
    the report fixture: the order (problems first, then warnings, each largest first) and the keys
    of every finding, each json_path naming a member of the same JSON that exists."""
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # nothing written into the source tree

KEYS = ["severity", "text", "kind", "device", "bytes", "time_ns", "section", "anchor",
        "json_path", "verdict"]
FIRST_LINES = 20


def fail(msg):
    sys.exit("FAIL: " + msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def report(gmp, args, env=None):
    r = subprocess.run([gmp, "report", "--color", "never"] + args, capture_output=True,
                       env=env)
    check(r.returncode == 0, "report %s: rc %d: %s" % (args, r.returncode, r.stderr.decode()))
    return r.stdout.decode()


def line_of(text, needle):
    for i, l in enumerate(text.splitlines()):
        if needle in l.replace("**", ""):  # Markdown's bold
            return i + 1
    return None


def resolve(doc, path):
    """The member a finding's json_path names ("analysis.ooms[0]", "devices[1].leaks")."""
    cur = doc
    for part in path.split("."):
        m = re.fullmatch(r"([a-z_]+)(?:\[(\d+)\])?", part)
        check(m is not None, "json_path %r" % path)
        check(isinstance(cur, dict) and m.group(1) in cur, "json_path %r: no %s" % (path, part))
        cur = cur[m.group(1)]
        if m.group(2) is not None:
            i = int(m.group(2))
            check(isinstance(cur, list) and i < len(cur), "json_path %r: no [%d]" % (path, i))
            cur = cur[i]
    return cur


def check_json(doc):
    fs = doc["findings"]
    for f in fs:
        check(list(f) == KEYS, "finding keys %r, want %r" % (list(f), KEYS))
        resolve(doc, f["json_path"])
    # problems first, then warnings, each largest first
    rank = {"problem": 0, "warning": 1, "info": 2, "ok": 3}
    order = [(rank[f["severity"]], -f["bytes"]) for f in fs]
    check(order == sorted(order), "findings not in order: %r" % order)
    return fs


def check_html(page, needle):
    """needle is in the page before the first device's section, and every in-page link of the
    findings points at a heading of the page."""
    dev = re.search(r'<h3 id="(p\d+-)?device-', page)
    check(dev is not None, "html: no device section")
    before = re.sub(r"<[^>]*>", "", page[:dev.start()]).replace("&quot;", '"')
    check(needle in before, "html: %r not before the first device's section" % needle)
    ids = set(re.findall(r' id="([^"]+)"', page))
    for ref in re.findall(r'<a href="#([^"]+)"', page):
        check(ref in ids, "html: link #%s to no heading" % ref)
    check('<nav class=toc>' in page, "html: no table of contents")


def snapshot(gmp, snap):
    with open(snap, "rb") as f:
        d = pickle.load(f)
    ooms = [(dev, e["size"]) for dev, tr in enumerate(d["device_traces"]) for e in tr
            if e["action"] == "oom"]
    check(len(ooms) == 1, "the oracle finds %d OOMs" % len(ooms))
    dev, size = ooms[0]
    verdict = "out of memory on device %d at " % dev
    for fmt in ("text", "markdown"):
        out = report(gmp, [snap, "--format", fmt])
        n = line_of(out, verdict)
        check(n is not None and n <= FIRST_LINES,
              "%s: the OOM verdict is at line %s of %d" % (fmt, n, len(out.splitlines())))
        check("requested; capacity:" in out.splitlines()[n - 1].replace("**", ""),
              "%s: no verdict" % fmt)
    doc = json.loads(report(gmp, [snap, "--format", "json"]))
    fs = check_json(doc)
    check(fs and fs[0]["kind"] == "oom", "json: first finding %r" % (fs[:1],))
    f = fs[0]
    check((f["device"], f["bytes"], f["verdict"], f["severity"]) ==
          (dev, size, "capacity", "problem"), "json: %r (oracle: device %d, %d bytes)" %
          (f, dev, size))
    oom = resolve(doc, f["json_path"])
    check(oom["device"] == dev and oom["requested_bytes"] == size and oom["verdict"] == "capacity",
          "json_path %s: %r" % (f["json_path"], oom))
    check(f["anchor"] == "oom-why" and f["section"] == "Out of memory, why", "json: %r" % f)
    page = report(gmp, [snap, "--format", "html", "--static"])
    check_html(page, verdict)
    check('<a href="#oom-why">Out of memory, why</a>' in page, "html: no link to the verdict")
    check('<h3 id="oom-why">Out of memory, why</h3>' in page, "html: no anchor on the section")
    # the html view: its frames written as the report writes them (a snapshot's native frames,
    # which have no file or line, by their function alone: "thread_run", not "thread_run (:0)";
    # thread_run, with no file, is folded (docs/stacks.md): shown with --all-frames)
    tmpd = tempfile.mkdtemp(prefix="gmpfindings")
    for extra in ([], ["--all-frames"]):
        hv = os.path.join(tmpd, "q%d.html" % len(extra))
        r = subprocess.run([gmp, "convert", snap, "--html-view", hv, "--no-progress"] + extra,
                           capture_output=True)
        check(r.returncode == 0, "convert --html-view: %s" % r.stderr.decode())
        with open(hv, encoding="utf-8") as f:
            m = re.search(r'<script type="application/json" id="gmp-meta">(.*?)</script>',
                          f.read(), re.S)
        frames = {fr for site in json.loads(m.group(1))["sites"].values() for fr in site["s"]}
        check(not [fr for fr in frames if fr.endswith(":0)")], "html view frames with line 0: %r"
              % sorted(fr for fr in frames if fr.endswith(":0)"))[:5])
        if not extra:
            meta = json.loads(m.group(1))
            check("thread_run" not in frames, "html view: thread_run not folded")
    check("thread_run" in frames, "html view --all-frames: no bare thread_run frame")
    check(meta["start"] == dev and meta["findings"][0]["text"].startswith(verdict),
          "html view: opens on %r, findings %r" % (meta["start"], meta["findings"]))
    # a snapshot without an OOM (the oracle: no "oom" action in the pickle): nothing found, and
    # the line says only what a snapshot allows to look for (no exit, no iterations)
    calm = os.path.join(os.path.dirname(snap), "small-step.pickle")
    with open(calm, "rb") as f:
        cd = pickle.load(f)
    check(not any(e["action"] == "oom" for tr in cd["device_traces"] for e in tr),
          "the oracle finds an OOM in small-step")
    check(json.loads(report(gmp, [calm, "--format", "json"]))["findings"] == [],
          "small-step: findings")
    out = report(gmp, [calm])
    n = line_of(out, "nothing to report: no out-of-memory error")
    check(n is not None and n <= FIRST_LINES and "exit" not in out.splitlines()[n - 1],
          "small-step: the findings say %r" % (out.splitlines()[n - 1] if n else None))
    # speedscope opens on the OOM's device too (its first profile)
    tmp = tempfile.mkdtemp(prefix="gmpfindings")
    ss = os.path.join(tmp, "q.speedscope.json")
    r = subprocess.run([gmp, "convert", snap, "--speedscope", ss, "--no-progress"],
                       capture_output=True)
    check(r.returncode == 0, "convert --speedscope: %s" % r.stderr.decode())
    with open(ss) as f:
        sd = json.load(f)
    names = [p["name"] for p in sd["profiles"]]
    a = sd["activeProfileIndex"]
    check(names[a].startswith("Device %d:" % dev) and
          not any(n.startswith("Device %d:" % dev) for n in names[:a]),
          "speedscope opens on %r (profiles %r)" % (names[a], names))
    # a snapshot's end is not the program's exit, and it names no process: what is live at its end
    # is "live at end (not leaks)" as report and diff say, and no output heads it "0 on ?"
    check(not any("leaked at exit" in n for n in names) and
          any(n.endswith(": live at end (not leaks), bytes") for n in names),
          "speedscope profiles of a snapshot: %r" % names)
    for fmt in ("text", "md", "html"):
        out = report(gmp, [snap, "--format", fmt])
        check("on ?" not in out and "on *?*" not in out and
              "PyTorch snapshot (no process recorded)" in out,
              "%s report's process line: %r" % (fmt, [x for x in out.splitlines()
                                                       if "process" in x][:2]))
    hv = os.path.join(tmp, "q.html")
    r = subprocess.run([gmp, "convert", snap, "--html-view", hv, "--no-progress"],
                       capture_output=True)
    check(r.returncode == 0, "convert --html-view: %s" % r.stderr.decode())
    with open(hv, encoding="utf-8") as f:
        page = f.read()
    check("0 on ?" not in page and "leaked at exit" not in page, "html view of a snapshot")


def demo(gmp, simcuda, train_sim, preload):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = simcuda + (":" + env["LD_LIBRARY_PATH"]
                                        if env.get("LD_LIBRARY_PATH") else "")
    if preload:
        env["LD_PRELOAD"] = preload
    tmp = tempfile.mkdtemp(prefix="gmpfindings")
    tr = os.path.join(tmp, "demo.zst")
    r = subprocess.run([gmp, "run", "-o", tr, "--", train_sim, "6"], capture_output=True, env=env)
    check(r.returncode == 0, "run: %d %s" % (r.returncode, r.stderr.decode()))
    leak = "probable leak in train/step/metrics on device 0: +4.00 MiB over iterations 2-6"
    for fmt in ("text", "markdown"):
        out = report(gmp, [tr, "--format", fmt])
        n = line_of(out, leak)
        check(n is not None and n <= FIRST_LINES,
              "%s: the leak verdict is at line %s of %d:\n%s" %
              (fmt, n, len(out.splitlines()), out[:3000]))
        m = line_of(out, "6.00 MiB still allocated at exit on device 0")
        check(m is not None and n < m <= FIRST_LINES, "%s: left at exit at line %s" % (fmt, m))
    doc = json.loads(report(gmp, [tr, "--format", "json"]))
    fs = check_json(doc)
    check([(f["kind"], f["device"], f["bytes"]) for f in fs] ==
          [("leak", 0, 4 << 20), ("live_at_exit", 0, 6 << 20)], "json: %r" % fs)
    leak_doc = resolve(doc, fs[0]["json_path"])
    check(leak_doc["range"] == "train/step/metrics" and leak_doc["growth_bytes"] == 4 << 20,
          "json_path: %r" % leak_doc)
    check(resolve(doc, fs[1]["json_path"])[0]["bytes"] == 6 << 20, "json_path of the exit")
    check_html(report(gmp, [tr, "--format", "html", "--static"]), leak)
    print("demo: leak verdict first")


def growth(gmp, tool):
    tmp = tempfile.mkdtemp(prefix="gmpfindings")
    tr = os.path.join(tmp, "growth.zst")
    subprocess.run([tool, "write-growth", tr], check=True)
    doc = json.loads(report(gmp, [tr, "--format", "json"]))
    fs = check_json(doc)
    check([(f["kind"], f["device"], f["bytes"]) for f in fs] ==
          [("live_at_exit", 0, 12 << 20), ("growth", 0, 6 << 20)], "growth: %r" % fs)
    g = resolve(doc, fs[1]["json_path"])
    check(g["range"] == "step" and g["last_bytes"] - g["middle_bytes"] == 6 << 20 and
          not g["owns_leak"] and doc["analysis"]["leaks"] == [], "growth row: %r" % g)
    text = report(gmp, [tr])
    n = line_of(text, "device 0's memory grows over the iterations of step: +6.00 MiB")
    check(n is not None and n <= FIRST_LINES, "growth: text line %s" % n)


def fixture(gmp, gen):
    tmp = tempfile.mkdtemp(prefix="gmpfindings")
    tr = os.path.join(tmp, "report.zst")
    subprocess.run([gen, "report", "fixture", tr], check=True)
    doc = json.loads(report(gmp, [tr, "--format", "json"]))
    fs = check_json(doc)
    check([(f["severity"], f["kind"], f["device"]) for f in fs] ==
          [("problem", "oom", 0), ("warning", "live_at_exit", 0), ("warning", "unexplained", 0),
           ("warning", "live_at_exit", 1)], "fixture: %r" % fs)
    # the figures are the detail's: the device's leaked and unexplained bytes, the OOM's request
    check(fs[0]["bytes"] == resolve(doc, fs[0]["json_path"])["requested_bytes"], "oom bytes")
    check(fs[1]["bytes"] == doc["devices"][0]["leaked_bytes"], "leaked bytes")
    check(fs[2]["bytes"] == resolve(doc, fs[2]["json_path"]), "unexplained bytes")
    # --device 1: only device 1's
    doc = json.loads(report(gmp, [tr, "--format", "json", "--device", "1"]))
    check([(f["kind"], f["device"]) for f in check_json(doc)] == [("live_at_exit", 1)],
          "--device 1: %r" % doc["findings"])
    # several traces: one Findings block first, each finding naming its process
    tr2 = os.path.join(tmp, "r1.zst")
    subprocess.run([gen, "report", "rank", "1", tr2], check=True)
    doc = json.loads(report(gmp, [tr, tr2, "--format", "json"]))
    check(list(doc)[:2] == ["schema", "findings"], "several: members %r" % list(doc)[:3])
    fs = doc["findings"]
    for f in fs:
        check(list(f) == KEYS + ["process"], "several: keys %r" % list(f))
        resolve(doc, f["json_path"])
    check(sorted({f["process"] for f in fs}) == [1, 2], "several: processes %r" % fs)
    text = report(gmp, [tr, tr2])
    check(text.index("Findings:") < text.index("Across the 2 processes"), "several: text order")
    # the page: anchors unique (p2- for the second trace) and every link to a heading
    page = report(gmp, [tr, tr2, "--format", "html", "--static"])
    check_html(page, "out of memory on device 0 at ")
    ids = re.findall(r' id="([^"]+)"', page)
    check(len(ids) == len(set(ids)), "several: ids twice: %r" %
          sorted({i for i in ids if ids.count(i) > 1}))
    check('<a href="#p1-oom-why">Out of memory, why</a>' in page and 'id="p2-device-0"' in page,
          "several: anchors of each process")


def main():
    mode = sys.argv[1]
    if mode == "snapshot":
        snapshot(sys.argv[2], sys.argv[3])
    elif mode == "demo":
        demo(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else "")
    elif mode == "growth":
        growth(sys.argv[2], sys.argv[3])
    elif mode == "fixture":
        fixture(sys.argv[2], sys.argv[3])
    else:
        fail("mode %r" % mode)
    print("ok")


if __name__ == "__main__":
    main()
