#!/usr/bin/env python3
"""Tests of the report's formats (gpumemprof report --format text|markdown|html|json).

    check_report_formats.py MODE GPUMEMPROF GEN_TRACES GOLDEN_DIR

MODE: golden_md, golden_html (the fixture, `gen_traces report fixture`, against golden files;
GMP_REGEN=1 rewrites them), golden_multi_text, golden_multi_md, golden_multi_html,
golden_multi_json (three ranks, `gen_traces report rank 0..2`, in one report against golden/multi.*;
the JSON compared as parsed JSON), ranges_json (exact per-range statistics of a crafted trace),
html_hostile (hostile strings: no injected element, parsed with html.parser), md_hostile,
html_selfcontained (no network reference), convert (convert --report/--json),
multi (several traces: a section per process and a
summary, in every format), options (--by, --sort, --top, format from -o's extension, bad
arguments)."""
import html.parser
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_golden  # noqa: E402
import gmp_testlib  # noqa: E402

MiB = 1 << 20
T0 = 1000000000


def us(x):
    return T0 + int(x * 1000)


def without_annotations(snap, tmp):
    """A copy of a PyTorch snapshot without its record_function annotations (no ranges then),
    through Python's own pickle module (plain data: every global refused)."""
    import pickle

    class PlainData(pickle.Unpickler):
        def find_class(self, module, name):
            raise pickle.UnpicklingError(f"global {module}.{name} refused")

    with open(snap, "rb") as f:
        doc = PlainData(f).load()
    doc.pop("external_annotations", None)
    out = os.path.join(tmp, "no-annotations-" + os.path.basename(snap))
    with open(out, "wb") as f:
        pickle.dump(doc, f, protocol=4)
    return out


def run(args, cwd, expect_rc=0):
    p = gmp_testlib.run(args, expect=expect_rc, cwd=cwd)
    return p.stdout, p.stderr.decode()


def eq(what, got, want):
    if got != want:
        sys.exit("%s: got %r, expected %r" % (what, got, want))


def golden(name, out, gdir):
    path = os.path.join(gdir, name)
    if gmp_golden.regen_requested():
        with open(path, "wb") as f:
            f.write(out)
    with open(path, "rb") as f:
        want = f.read()
    if out != want:
        sys.exit("output differs from %s (GMP_REGEN=1 rewrites it):\n%s" %
                 (path, out.decode(errors="replace")[:4000]))


ALLOWED = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "h5", "p",
           "br", "code", "span", "b", "i", "table", "tr", "th", "td", "section", "svg", "g",
           "rect", "path", "line", "circle", "text", "ul", "li", "div", "nav", "a"}
# The interactive view (the default of an HTML report; --static leaves it out): one
# <div id="gmp-view"> holding only its scoped <style>, its data (<script type=application/json>)
# and one script (formats/export/htmlview/view.js). <script> anywhere else is an injection.
VIEW_ALLOWED = {"style", "script"}
NETWORK = ("http://", "https://", "url(", "@import", "<link", "<img", "<iframe", "fetch(",
           "xmlhttprequest", "websocket", "import(", "sendbeacon", "eventsource")


class Collect(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.data, self.stack = [], [], [], []
        self.view_depth = None  # depth of the stack at the view's <div>, while inside it
        self.views, self.scripts = 0, []  # views seen; (attrs, text) of each script

    def handle_starttag(self, tag, attrs):
        if self.view_depth is not None:
            if tag not in VIEW_ALLOWED:
                sys.exit("unexpected <%s> in the view's <div id=gmp-view>" % tag)
            if tag == "script":
                self.scripts.append([dict(attrs), ""])
        else:
            if tag == "script":
                sys.exit("a <script> outside the view's <div id=gmp-view>")
            self.tags.append(tag)
            if tag == "div" and ("id", "gmp-view") in attrs:
                self.views += 1
                self.view_depth = len(self.stack)
        self.attrs.extend((tag, k, v) for k, v in attrs)
        if tag not in ("meta", "br"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            sys.exit("unbalanced </%s>, open: %r" % (tag, self.stack[-5:]))
        self.stack.pop()
        if self.view_depth is not None and len(self.stack) == self.view_depth:
            self.view_depth = None

    def handle_data(self, d):
        if self.stack and self.stack[-1] == "script":
            self.scripts[-1][1] += d
        elif not (self.stack and self.stack[-1] == "style"):
            self.data.append(d)


def parse_html(doc, view=None):
    """Parses an HTML report: balanced, only the report's elements outside the view, no event
    handler or link attribute anywhere. view: True (the default page: one view), False (--static:
    none), None (either)."""
    p = Collect()
    p.feed(doc)
    p.close()
    eq("elements left open", p.stack, [])
    bad = sorted(set(p.tags) - ALLOWED)
    if bad:
        sys.exit("unexpected elements in the HTML: %r" % bad)
    for tag, k, v in p.attrs:
        # links inside the page only: the table of contents, a finding to its section
        if tag == "a" and k == "href" and v and v.startswith("#"):
            if not re.fullmatch(r"#[A-Za-z0-9_-]+", v):
                sys.exit("unexpected link %r" % v)
            continue
        if k.startswith("on") or k in ("src", "href", "xlink:href", "action", "formaction"):
            sys.exit("unexpected attribute %s=%r on <%s>" % (k, v, tag))
    if p.views > 1 or (view is not None and p.views != int(view)):
        sys.exit("%d interactive views (<div id=gmp-view>), want %s" % (p.views, view))
    # every "<script" of the text outside the scripts' own text is a parsed script inside the
    # view: nothing from the data became a script
    inner = sum(t.lower().count("<script") for a, t in p.scripts)
    eq("<script in the text", doc.lower().count("<script") - inner, len(p.scripts))
    code = [t for a, t in p.scripts if a.get("type") != "application/json"]
    if p.views:
        eq("the view's code scripts", len(code), 1)
    for a, t in p.scripts:
        if a.get("type") == "application/json":
            if "<" in t:  # the view's JSON writes "<" as \u003c: no "</script>" from the data
                sys.exit("a raw '<' in the view's data: %r" % t[max(0, t.find("<") - 40):][:80])
            json.loads(t)  # data only: it parses as JSON
    return p


def self_contained(doc):
    """No network reference anywhere (the view's script and data included); <script> only as the
    view's (parse_html)."""
    low = doc.lower()
    for pat in NETWORK:
        if pat in low:
            sys.exit("the HTML is not self-contained: it has %r" % pat)
    if "<script" in low and '<div id="gmp-view">' not in doc:
        sys.exit("the HTML has a <script> and no view")


def strip_view(doc):
    """The page without its view: the --static page (the view changes nothing else)."""
    a = doc.find('<div id="gmp-view">')
    if a < 0:
        return doc
    end = "</script>\n</div>\n"
    b = doc.find(end, a)
    if b < 0:
        sys.exit("the view's <div> has no end")
    return doc[:a] + doc[b + len(end):]


def static_and_default(gmp, args, tmp):
    """report ARGS --static (checked: no view) and report ARGS (checked: one view, else the same
    page): the static page's bytes, for the goldens."""
    out, err = run([gmp, "report"] + args + ["--static"], tmp)
    eq("stderr", err, "")
    doc = out.decode("utf-8")
    parse_html(doc, view=False)
    self_contained(doc)
    dout, err = run([gmp, "report"] + args, tmp)
    eq("stderr", err, "")
    ddoc = dout.decode("utf-8")
    parse_html(ddoc, view=True)
    self_contained(ddoc)
    eq("the default page without its view is the --static page", strip_view(ddoc), doc)
    return out


def process_sections(doc):
    """The <section>s of an HTML report that are a process's (the summary and the shared devices
    may be sections too)."""
    return len(re.findall(r"<section>\n<h2[^>]*>(?!Across the |Findings<|Devices shared )", doc))


def check_ranges(doc):
    rs = {(r["path"], r["kind"]): r for r in doc["ranges"]}
    eq("range paths", sorted(rs), [("outer", "push"), ("outer/inner", "push"),
                                   ("phase", "start")])
    want = {
        ("outer", "push"): dict(
            depth=1, device=0, entered=1, open_at_end=0, total_ns=11000, mean_ns=11000,
            allocations=4, allocated_bytes=190 * MiB, frees=1, freed_bytes=100 * MiB,
            net_bytes=90 * MiB, left_bytes=40 * MiB, peak_bytes=150 * MiB, peak_time_ns=us(4),
            peak_inside_bytes=150 * MiB, fragmentation_mean_bytes=200 * MiB),
        ("outer/inner", "push"): dict(
            depth=2, device=0, entered=2, open_at_end=0, total_ns=6000, mean_ns=3000,
            max_ns=4000, allocations=3, allocated_bytes=90 * MiB, frees=1,
            freed_bytes=100 * MiB, net_bytes=-10 * MiB, left_bytes=40 * MiB,
            peak_bytes=150 * MiB, peak_time_ns=us(4), peak_inside_bytes=50 * MiB,
            fragmentation_mean_bytes=200 * MiB),
        ("phase", "start"): dict(
            depth=1, device=0, entered=1, total_ns=6000, allocations=2, allocated_bytes=80 * MiB,
            frees=2, freed_bytes=150 * MiB, net_bytes=-70 * MiB, left_bytes=30 * MiB,
            peak_bytes=150 * MiB, peak_time_ns=us(4), peak_inside_bytes=50 * MiB,
            fragmentation_mean_bytes=200 * MiB),
    }
    for key, w in want.items():
        for k, v in w.items():
            eq("ranges[%s].%s" % (key[0], k), rs[key][k], v)


def main():
    mode, gmp, gen, gdir = sys.argv[1:5]
    with gmp_testlib.tmpdir(prefix="gmp_report_fmt_") as tmp:
        run([gen, "report", "fixture", "report.zst"], tmp)
        if mode == "golden_md":
            out, err = run([gmp, "report", "report.zst", "--format", "markdown"], tmp)
            eq("stderr", err, "")
            golden("report.md", out, gdir)
        elif mode == "golden_html":
            out = static_and_default(gmp, ["report.zst", "--format", "html"], tmp)
            golden("report.html", out, gdir)
        elif mode.startswith("golden_multi_"):
            fmt, ext = {"text": ("text", "txt"), "md": ("markdown", "md"),
                        "html": ("html", "html"), "json": ("json", "json")}[mode[13:]]
            for r in (0, 1, 2):
                run([gen, "report", "rank", str(r), "r%d.zst" % r], tmp)
            args = ["--format", fmt, "r0.zst", "r1.zst", "r2.zst"]
            if fmt == "html":
                out = static_and_default(gmp, args, tmp)
            else:
                out, err = run([gmp, "report"] + args, tmp)
                eq("stderr", err, "")
            if fmt == "json":
                gmp_golden.golden_json(os.path.join(gdir, "multi.json"), out, "GMP_REGEN")
            else:
                golden("multi." + ext, out, gdir)
        elif mode == "ranges_json":
            run([gen, "report", "ranges", "ranges.zst"], tmp)
            out, _ = run([gmp, "report", "ranges.zst", "--format", "json"], tmp)
            doc = json.loads(out)
            check_ranges(doc)
            eq("fragmentation max", doc["devices"][0]["fragmentation_max_bytes"], 200 * MiB)
            eq("schema kept", doc["schema"], "gpumemprof-report/3")
            # every format shows the table
            for fmt, needle in (("text", "Ranges, sorted by path"), ("markdown", "### Ranges"),
                                ("html", ">Ranges")):
                o, _ = run([gmp, "report", "ranges.zst", "--format", fmt], tmp)
                if needle not in o.decode() or "outer/inner" not in o.decode():
                    sys.exit("%s: no ranges table" % fmt)
            # --sort
            o, _ = run([gmp, "report", "ranges.zst", "-f", "json", "--sort", "alloc"], tmp)
            eq("--sort alloc", [r["path"] for r in json.loads(o)["ranges"]],
               ["outer", "outer/inner", "phase"])
            o, _ = run([gmp, "report", "ranges.zst", "-f", "json", "--sort", "net"], tmp)
            eq("--sort net", [r["path"] for r in json.loads(o)["ranges"]],
               ["outer", "outer/inner", "phase"])
            o, _ = run([gmp, "report", "ranges.zst", "-f", "json", "--sort", "time", "--top",
                        "1"], tmp)
            eq("--sort time --top 1", [r["path"] for r in json.loads(o)["ranges"]], ["outer"])
        elif mode in ("html_hostile", "md_hostile", "html_selfcontained"):
            run([gen, "report", "hostile", "hostile.zst"], tmp)
            if mode == "md_hostile":
                out, _ = run([gmp, "report", "hostile.zst", "--format", "markdown"], tmp)
                doc = out.decode("utf-8")
                for bad in ("<script", "<img", "<svg", "<b>", "<x>", "</title>"):
                    if bad in doc:
                        sys.exit("markdown has raw %r" % bad)
                for line in doc.splitlines():
                    if line.startswith("|") and "---" not in line:
                        cells = re.split(r"(?<!\\)\|", line)
                        if len(cells) < 3:
                            sys.exit("broken table row: %r" % line)
                # every row of a table has as many cells as its header
                prev = None
                for l in doc.splitlines():
                    if not l.startswith("|"):
                        prev = None
                        continue
                    n = len(re.split(r"(?<!\\)\|", l))
                    if prev is None:
                        prev = n
                    elif n != prev:
                        sys.exit("table row with %d cells, header has %d: %r" % (n, prev, l))
                out, _ = run([gmp, "report", "hostile.zst"], tmp)
                if b"\x1b" in out:
                    sys.exit("text report to a pipe has colour codes")
                if b"\nline2" in out:
                    sys.exit("text report let a newline of a range name through")
            else:
                # the default page (with the interactive view) and --static
                for extra, view in (([], True), (["--static"], False)):
                    out, _ = run([gmp, "report", "hostile.zst", "--format", "html", "--top", "0"]
                                 + extra, tmp)
                    doc = out.decode("utf-8")  # strict: invalid UTF-8 must not pass through
                    self_contained(doc)
                    p = parse_html(doc, view=view)
                    if mode == "html_hostile":
                        text = "".join(p.data)
                        for s in ('"><script>alert(1)</script>', "a'b\"c&d|e*f_g`h",
                                  "GPU</title><script>alert('d')</script>",
                                  "\ufffd\ufffd<img src=x onerror=alert(1)>",
                                  "fn\"><svg onload=alert(2)>", "line1\nline2"):
                            if s not in text:
                                sys.exit("hostile string %r not shown as text" % s)
                # JSON stays valid and keeps the bytes
                out, _ = run([gmp, "report", "hostile.zst", "--format", "json"], tmp)
                doc = json.loads(out)
                paths = [r["path"] for r in doc["ranges"]]
                if '"><script>alert(1)</script>' not in paths:
                    sys.exit("json ranges: %r" % paths)
        elif mode == "multi":
            for r in (0, 1, 2):
                run([gen, "report", "rank", str(r), "r%d.zst" % r], tmp)
            names = ["r0.zst", "r1.zst", "r2.zst"]
            out, _ = run([gmp, "report", "--format", "json"] + names, tmp)
            doc = json.loads(out)
            # schema 2: one schema for the whole report, the summary before the processes
            eq("multi schema", doc["schema"], "gpumemprof-report/3")
            eq("multi members", list(doc), ["schema", "findings", "summary", "median_peak_bytes", "heavy",
                                            "timelines", "shared_devices", "processes"])
            # the three generated processes name no UUID and run on device 0 of one host: their
            # allocated memory on one axis (each 2 x (r+1) x 50 MiB at 3-4 us after its start)
            eq("shared devices", [(s["device"], s["matched_by"], s["processes"],
                                   s["combined_peak_bytes"], s["sum_of_peaks_bytes"])
                                  for s in doc["shared_devices"]],
               [(0, "ordinal and host", "pid 4242, pid 4242, pid 4242", 600 * MiB, 600 * MiB)])
            # docs/report.md, "Several traces":
            # each process's peak against the median (200 MiB), what held
            # most of it, the heavy one (300 MiB > 1.5 x 200 MiB), the timelines on one axis
            eq("median", doc["median_peak_bytes"], 200 * MiB)
            eq("vs median", [round(s["vs_median_pct"], 1) for s in doc["summary"]],
               [-50.0, 0.0, 50.0])
            eq("heavy flags", [s["heavy"] for s in doc["summary"]], [False, False, False])
            eq("top", [(s["top"], s["top_kind"], s["top_bytes"]) for s in doc["summary"]],
               [("step/forward", "range", n * MiB) for n in (100, 200, 300)])
            eq("heavy", doc["heavy"], [])
            eq("timelines columns", doc["timelines"]["columns"],
               ["time_ns", "process_1", "process_2", "process_3"])
            eq("timelines maxima", [max(p[c] for p in doc["timelines"]["points"])
                                    for c in (1, 2, 3)], [100 * MiB, 200 * MiB, 300 * MiB])
            run([gen, "report", "rank", "5", "r5.zst"], tmp)
            out, _ = run([gmp, "report", "--format", "json"] + names + ["r5.zst"], tmp)
            doc5 = json.loads(out)
            eq("heavy with r5 (600 MiB vs a median of 250)",
               [(h["path"], h["peak_allocated_bytes"]) for h in doc5["heavy"]],
               [("r5.zst", 600 * MiB)])
            eq("processes", len(doc["processes"]), 3)
            eq("processes without schema", ["schema" in p for p in doc["processes"]],
               [False] * 3)
            eq("peaks", [p["devices"][0]["peak_allocated_bytes"] for p in doc["processes"]],
               [100 * MiB, 200 * MiB, 300 * MiB])
            eq("summary peaks", [s["peak_allocated_bytes"] for s in doc["summary"]],
               [100 * MiB, 200 * MiB, 300 * MiB])
            eq("summary paths", [s["path"] for s in doc["summary"]], names)
            out, _ = run([gmp, "report"] + names, tmp)
            t = out.decode()
            eq("text sections", len(re.findall(r"^process \d of 3: ", t, re.M)), 3)
            if "Across the 3 processes" not in t or "ratio 3.00" not in t:
                sys.exit("text: no cross-process summary:\n" + t)
            out, _ = run([gmp, "report", "-f", "markdown"] + names, tmp)
            t = out.decode()
            # the findings of every process, the summary, the shared device, a section per process
            eq("markdown sections", t.count("\n## "), 6)
            if t.index("\n## Findings") > t.index("\n## Across the 3 processes"):
                sys.exit("markdown: the findings are not first")
            out, _ = run([gmp, "report", "-f", "html"] + names, tmp)
            t = out.decode()
            parse_html(t)
            self_contained(t)
            eq("html sections", process_sections(t), 3)
            if "Across the 3 processes" not in t:
                sys.exit("html: no summary")
        elif mode == "torch_stacks":
            # docs/stacks.md, "Frames from user code":
            # on every real snapshot of tests/data, the three largest stacks
            # live at each device's peak start at a frame of user code (the recorder's, the
            # caching allocator's, ATen's and the interpreter's frames folded) and differ as
            # shown. User code, read by hand from the snapshots: a Python frame of the user's
            # own files (not site-packages), or, on autograd's thread where PyTorch records no
            # Python frame, the autograd node that allocated (torch::autograd::generated::...).
            data = os.path.join(gdir, "..", "..", "data", "torch-snapshots")
            snaps = sorted(f for f in os.listdir(data) if f.endswith(".pickle"))
            eq("snapshots", len(snaps), 4)
            for snap in snaps:
                path = os.path.join(data, snap)
                out, _ = run([gmp, "report", path, "-f", "json", "--by", "stack", "--top", "3"],
                             tmp)
                doc = json.loads(out)
                text, _ = run([gmp, "report", path, "--by", "stack", "--top", "3"], tmp)
                rows = re.findall(r"^\s+\S+ \S+\s+\S+%\s+\d+  (.*)$", text.decode(), re.M)
                for dev in doc["devices"]:
                    top = dev.get("live_at_peak_by_stack", [])[:3]
                    if len(top) < 3:
                        sys.exit("%s: device %s: %d stacks" % (snap, dev["id"], len(top)))
                    for row in top:
                        first = [f for f in row["stack"] if not f.get("internal")][0]
                        fn, file = first["function"] or "", first["file"] or ""
                        user = (file.endswith(".py") and "site-packages" not in file) or \
                            fn.startswith("torch::autograd::generated::")
                        if not user:
                            sys.exit("%s: device %s: a stack starts at %r (%s)" %
                                     (snap, dev["id"], fn, file))
                        if not row["stack"][0].get("internal"):
                            sys.exit("%s: nothing folded in %r" % (snap, row["stack"][0]))
                # the text rows of each device's table start with that frame and differ
                for i in range(0, len(rows), 3):
                    three = rows[i:i + 3]
                    if len(set(three)) != len(three):
                        sys.exit("%s: stacks shown alike:\n%s" % (snap, "\n".join(three)))
                    for r in three:
                        if r.startswith("+") or "CUDACachingAllocator" in r.split(" < ")[0]:
                            sys.exit("%s: a row starts with internal frames: %s" % (snap, r))
                # every row of the whole by-stack table (--top 0) looks different in text (rows
                # that would look alike in their first items show more; alike even whole, they
                # are shown unfolded)
                text, _ = run([gmp, "report", path, "--by", "stack", "--top", "0"], tmp)
                for sec in text.decode().split("Live at the peak, by call stack")[1:]:
                    body = sec.split("\n\n")[0].splitlines()[2:]
                    shown = [re.sub(r"^\s*\S+ \S+\s+\S+%\s+\d+  ", "", l) for l in body]
                    if len(set(shown)) != len(shown):
                        sys.exit("%s: two stacks shown alike in the whole table" % snap)
                # --all-frames: nothing folded, the recorder's frames first
                out, _ = run([gmp, "report", path, "--by", "stack", "--top", "1",
                              "--all-frames"], tmp)
                if "internal frame" in out.decode() or "torch::unwind::unwind" not in \
                        out.decode():
                    sys.exit("%s: --all-frames folded something" % snap)
                # speedscope by the same rules: the innermost frame of the heaviest samples of
                # "live at the peak" is not the recorder's; --all-frames keeps the recorder
                for extra, want_unwind in (([], False), (["--all-frames"], True)):
                    run([gmp, "convert", path, "--speedscope", "s.json", "--no-progress"] + extra,
                        tmp)
                    s = json.load(open(os.path.join(tmp, "s.json")))
                    names = [f["name"] for f in s["shared"]["frames"]]
                    p = s["profiles"][0]
                    heavy = sorted(zip(p["weights"], p["samples"]), reverse=True)[:4]
                    inner = [names[smp[-1]] for _, smp in heavy if smp]
                    unwind = any(n.startswith("torch::unwind::unwind") for n in inner)
                    if not inner or unwind != want_unwind:
                        sys.exit("%s: speedscope %s: innermost frames %r" % (snap, extra, inner))
        elif mode == "ends_early":
            # docs/report.md, "Sections and what the numbers mean", live at end of recording:
            # a recording that ends before the program (a PyTorch snapshot, a
            # killed process's trace) reports what was live at its end as such, not as leaks;
            # without ranges, live at the peak is grouped by the innermost user frame
            snap = os.path.join(gdir, "..", "..", "data", "torch-snapshots",
                                "transformer-train-step-adamw.pickle")
            # its record_function annotations are ranges: live at the peak by range
            out, _ = run([gmp, "report", snap, "-f", "json", "--top", "0"], tmp)
            ranged = json.loads(out)["devices"][0]
            eq("snapshot with annotations: by range",
               sorted(r["range"] or "" for r in ranged.get("live_at_peak_by_range", [])),
               ["", "Optimizer.step#AdamW.step"])
            snap = without_annotations(snap, tmp)
            out, _ = run([gmp, "report", snap, "-f", "json", "--top", "0"], tmp)
            doc = json.loads(out)
            eq("snapshot: recording_end", doc["recording_end"], "snapshot")
            d0 = doc["devices"][0]
            eq("snapshot: leaked", (d0["leaked_bytes"], d0["leaked_allocations"]), (None, None))
            # what the snapshot's final segments hold, read independently: the sum of the
            # live-at-end table is the device's figure
            eq("snapshot: live at end", sum(r["bytes"] for r in d0["live_at_end"]),
               d0["live_at_end_bytes"])
            eq("snapshot: no leaks table", "leaks" in d0, False)
            eq("snapshot: no by-range table", "live_at_peak_by_range" in d0, False)
            frames = d0["live_at_peak_by_frame"]
            eq("by frame sums to the peak", sum(r["bytes"] for r in frames),
               d0["peak_allocated_bytes"])
            if len(frames) < 5 or not any(
                    r["frame"] and r["frame"].startswith("step (") and "optimizers.py:82" in
                    r["frame"] for r in frames):
                sys.exit("snapshot: frames %r" % [r["frame"] for r in frames])
            text, _ = run([gmp, "report", snap], tmp)
            t = text.decode()
            for want in ("live at end of recording", "Live at the peak, by user frame",
                         "recording ends  before the program: a PyTorch snapshot"):
                if want not in t:
                    sys.exit("snapshot text: no %r" % want)
            for bad in ("leaked at exit", "(leaks)", "(no range)  \n"):
                if bad in t:
                    sys.exit("snapshot text: %r" % bad)
            # a killed process: the trace lost its end (the file cut inside its last frame)
            run([gen, "report", "killed", "k.zst"], tmp)
            run([gen, "report", "rank", "0", "r0.zst"], tmp)
            raw = open(os.path.join(tmp, "k.zst"), "rb").read()
            open(os.path.join(tmp, "cut.zst"), "wb").write(raw[:-8])
            out, err = run([gmp, "report", "cut.zst", "-f", "json"], tmp)
            doc = json.loads(out)
            eq("cut: recording_end", doc["recording_end"], "cut")
            eq("cut: leaked", doc["devices"][0]["leaked_bytes"], None)
            eq("cut: live at end", doc["devices"][0]["live_at_end_bytes"], 50 * MiB)
            text, _ = run([gmp, "report", "cut.zst"], tmp)
            if "live at end of recording" not in text.decode() or \
                    "leaked at exit" in text.decode():
                sys.exit("cut text:\n" + text.decode())
            # a whole trace keeps its leaks, and ranges keep the by-range table
            out, _ = run([gmp, "report", "r0.zst", "-f", "json"], tmp)
            doc = json.loads(out)
            eq("exit: recording_end", doc["recording_end"], "exit")
            eq("exit: leaked", doc["devices"][0]["leaked_bytes"], 50 * MiB)
            eq("exit: by range", "live_at_peak_by_range" in doc["devices"][0], True)
        elif mode == "categories":
            # docs/report.md, "Memory by category":
            # memory by category at the peak of the real train-step snapshot
            # adds up to its peak, and agrees with a reading of its frames by hand (the
            # breakdown by user frame, another path through the report): the optimizer's state
            # and temporaries are made in step() of the user's optimizers.py (lines 82, 84, 100),
            # the gradients by autograd's nodes on its thread (BmmBackward0, IndexBackward0,
            # validate_outputs) and kept until the step, the activation in forward
            # (transformer.py:22); the blocks from before the recorded window have no stack
            # (without its record_function annotations: no ranges, so grouped by user frame)
            snap = without_annotations(os.path.join(gdir, "..", "..", "data", "torch-snapshots",
                                                    "transformer-train-step-adamw.pickle"), tmp)
            out, _ = run([gmp, "report", snap, "-f", "json", "--top", "0"], tmp)
            d0 = json.loads(out)["devices"][0]
            cats = {r["category"]: r["bytes"] for r in d0["live_at_peak_by_category"]}
            # a category with nothing live has no row (no parameter, no temporary here)
            eq("categories", sorted(cats), sorted(["gradient", "optimizer", "activation", "other"]))
            eq("categories add up to the peak", sum(cats.values()), d0["peak_allocated_bytes"])
            hand = {"optimizer": 0, "gradient": 0, "activation": 0, "other": 0}
            for r in d0["live_at_peak_by_frame"]:
                f = r["frame"] or ""
                if f.startswith("step (") and "optimizers.py" in f:
                    hand["optimizer"] += r["bytes"]
                elif "Backward0::apply" in f or "validate_outputs" in f:
                    hand["gradient"] += r["bytes"]
                elif f.startswith("forward ("):
                    hand["activation"] += r["bytes"]
                else:
                    hand["other"] += r["bytes"]
            for k, v in hand.items():
                eq("category %s by hand" % k, cats[k], v)
            eq("no parameter or temporary named", (cats.get("parameter"), cats.get("temporary")),
               (None, None))
            t = run([gmp, "report", snap], tmp)[0].decode()
            if "Live at the peak, by category" not in t:
                sys.exit("text: no categories table")
            # a CUDA trace without PyTorch's frames or phase ranges: nothing to say, no table
            run([gen, "report", "ranges", "ranges.zst"], tmp)
            out, _ = run([gmp, "report", "ranges.zst", "-f", "json"], tmp)
            if any("live_at_peak_by_category" in d for d in json.loads(out)["devices"]):
                sys.exit("categories table on a trace without PyTorch frames")
        elif mode == "alike":
            # two different call sites never render the same: stacks alike in their first four
            # items show a fifth; stacks alike even whole when folded are told apart by the
            # frame that differs ("via"), the user frame still first; one call site whose outer
            # frames are addresses inside no loaded module is one row; stacks of nothing but such
            # addresses are one row of one "?" frame
            run([gen, "report", "alike", "alike.zst"], tmp)
            for fmt in ("text", "markdown", "html"):
                o, _ = run([gmp, "report", "alike.zst", "-f", fmt, "--by", "stack"], tmp)
                t = o.decode()
                for want in ("run (x.py:5)", "run (x.py:6)", "CUDACachingAllocator::malloc",
                             "CUDACachingAllocator::allocate"):
                    if want not in t:
                        sys.exit("%s: %r not shown:\n%s" % (fmt, want, t))
                if fmt == "text":
                    for want in ("user (u.py:9) [+1 inside, via c10::cuda::CUDACachingAllocator::"
                                 "malloc]", " 8.00 MiB   7.1%      2  libx.so+0x10\n",
                                 " 4.00 MiB   3.6%      2  ?\n"):
                        if want not in t:
                            sys.exit("text: %r not shown:\n%s" % (want, t))
                for bad in ("0x100001000000", "0x120009000000", "0x100002000000", "0x130005000000",
                            "(unsigned long)"):
                    if bad in t:
                        sys.exit("%s: %r shown:\n%s" % (fmt, bad, t))
            o, _ = run([gmp, "report", "alike.zst", "-f", "json", "--by", "stack"], tmp)
            rows = json.loads(o)["devices"][0]["live_at_peak_by_stack"]
            eq("json keeps the internal marks", [any(f.get("internal") for f in r["stack"])
                                                 for r in rows],
               [False, False, True, True, False, False])
            eq("json: no frame outside every module", [f["address"] for f in rows[4]["stack"]],
               ["0x7f0000000010"])
            eq("json: nothing but addresses outside every module", rows[5]["stack"],
               [{"function": None, "file": None, "line": 0, "module": None, "address": "0x0",
                 "unknown": "no module"}])
        elif mode == "noalloc":
            # a trace without allocations: no peak and no time for it (it was "0 B at -1.000000
            # s", a time before the trace began), in every format
            run([gen, "report", "noalloc", "noalloc.zst"], tmp)
            out, _ = run([gmp, "report", "noalloc.zst", "-f", "json"], tmp)
            doc = json.loads(out)
            eq("devices", [d["id"] for d in doc["devices"]], [0, 1])
            for d in doc["devices"]:
                eq("peak", d["peak_allocated_bytes"], 0)
                eq("peak time", d["peak_time_ns"], None)
                eq("peak reserved time", d["peak_reserved_time_ns"], None)
            eq("unexplained time, device 0", doc["devices"][0]["max_unexplained_time_ns"], None)
            eq("unexplained, device 1", (doc["devices"][1]["max_unexplained_bytes"],
                                         doc["devices"][1]["max_unexplained_time_ns"]),
               (1 << 30, 1300001500))
            for fmt in ("text", "markdown", "html"):
                o, _ = run([gmp, "report", "noalloc.zst", "-f", fmt], tmp)
                t = o.decode()
                if re.search(r"-\d+\.\d+ s", t):
                    sys.exit("%s: a time before the trace:\n%s" % (fmt, t))
                if "no device memory allocated" not in t:
                    sys.exit("%s: no 'no device memory allocated':\n%s" % (fmt, t))
                if "max 1.00 GiB at +0.3000" not in t and fmt == "text":
                    sys.exit("text: device 1's unexplained memory has no time:\n" + t)
        elif mode == "convert":
            # convert --report F (format by extension) and --json F: the same as report
            # (HTML: with the interactive view by default, without it with --static)
            for ext, fmt, extra in (("html", "html", []), ("html", "html", ["--static"]),
                                    ("md", "markdown", []), ("txt", "text", [])):
                run([gmp, "convert", "report.zst", "--report", "c." + ext, "--json", "c.json",
                     "--no-progress"] + extra, tmp)
                want, _ = run([gmp, "report", "report.zst", "--format", fmt, "--color", "never"]
                              + extra, tmp)
                if ext == "html":
                    parse_html(want.decode(), view=not extra)
                eq("convert --report c." + ext, open(os.path.join(tmp, "c." + ext), "rb").read(),
                   want)
                want, _ = run([gmp, "report", "report.zst", "--format", "json"], tmp)
                eq("convert --json", open(os.path.join(tmp, "c.json"), "rb").read(), want)
            run([gen, "report", "rank", "0", "r0.zst"], tmp)
            run([gen, "report", "rank", "1", "r1.zst"], tmp)
            run([gmp, "convert", "r0.zst", "r1.zst", "--json", "m.json", "--report", "m.html"],
                tmp)
            doc = json.load(open(os.path.join(tmp, "m.json")))
            eq("convert several: processes", len(doc["processes"]), 2)
            m = open(os.path.join(tmp, "m.html")).read()
            eq("convert several: html sections", process_sections(m), 2)
            parse_html(m, view=True)
            self_contained(m)
            run([gmp, "convert", "r0.zst", "r1.zst", "--report", "s.html", "--static"], tmp)
            eq("convert --static: the page without the view",
               open(os.path.join(tmp, "s.html")).read(), strip_view(m))
        elif mode == "options":
            out, _ = run([gmp, "report", "report.zst", "-o", "r.md"], tmp)
            eq("-o r.md: stdout", out, b"")
            if not open(os.path.join(tmp, "r.md")).read().startswith("# gpumemprof report"):
                sys.exit("-o r.md is not Markdown")
            run([gmp, "report", "report.zst", "-o", "r.html"], tmp)
            if "<!DOCTYPE html>" not in open(os.path.join(tmp, "r.html")).read():
                sys.exit("-o r.html is not HTML")
            run([gmp, "report", "report.zst", "-o", "r.json"], tmp)
            json.load(open(os.path.join(tmp, "r.json")))
            out, _ = run([gmp, "report", "report.zst", "--by", "api,kind"], tmp)
            t = out.decode()
            if "by API" not in t or "by kind" not in t or "by range" in t:
                sys.exit("--by api,kind:\n" + t)
            out, _ = run([gmp, "report", "report.zst", "-f", "json", "--by", "stack"], tmp)
            # schema 2: the groupings per device (devices[].live_at_peak_by_KEY); device 1's
            # allocations have no stack, so it has no live_at_peak_by_stack
            by = [sorted(k for k in d if k.startswith("live_at_peak_by"))
                  for d in json.loads(out)["devices"]]
            eq("--by stack json", by, [["live_at_peak_by_stack"], []])
            out, _ = run([gmp, "report", "report.zst", "--color", "always"], tmp)
            if b"\x1b[1m" not in out:
                sys.exit("--color always: no colour")
            for bad in (["--by", "range,bogus"], ["--sort", "x"], ["--color", "blue"],
                        ["--format", "pdf"]):
                run([gmp, "report", "report.zst"] + bad, tmp, 2)
        else:
            sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
