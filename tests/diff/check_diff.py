#!/usr/bin/env python3
"""Tests of `gpumemprof diff` on the two traces of `gen_traces diff` (tests/tools/gen_traces.c).

    check_diff.py CASE GPUMEMPROF DIFF_TRACES WORK_DIR

json    every number of the JSON output against the sizes written by `gen_traces diff`
text    the text output: devices side by side, tables ordered by the size of the change
same    a trace against itself: every change is zero
top     --top limits rows per device and table
errors  bad arguments (exit 2), a missing or corrupt trace (exit 1, one message, no output)
golden_text, golden_top, golden_json, markdown
        the output (text; text with --top 1; JSON, compared as parsed JSON; Markdown) against
        golden/diff.*
        (run in WORK_DIR on a.zst and b.zst, so the paths it prints are those);
        GMP_REGEN=1 rewrites the golden files
html    --format html: one well-formed page (html.parser: every element closed in order) holding
        every figure of the text output
native  the native frame symbolized as `report` symbolizes it (the frame at an offset of
        gen_traces' own `main` in gen_traces itself, checked against addr2line), in text and JSON
leaks   the leaked totals are the report's (static __device__ memory is not leaked), per device
ext     -o's extension picks the format (.html, .md, .json, else text), as for `report`
snapshot
        two PyTorch snapshots (tests/data/torch-snapshots): nothing called leaked, stacks start
        at the user's frame as in the report's "by call stack" rows, a by-user-frame table,
        lines of a terminal's size rather than thousands of characters; B's record_function
        annotations give a by-range table whose B side is the report's by-range rows of B;
        copies without annotations give none"""
import html.parser
import json
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_golden  # noqa: E402
import gmp_testlib  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(gmp, args, expect=0):
    return gmp_testlib.run([gmp] + args, expect=expect, text=True)


def rows(j, table, dev, key="range"):
    return [(r[key], r["a_bytes"], r["b_bytes"], r["delta_bytes"], r["delta_count"])
            for r in j[table] if r["device"] == dev]


def case_json(gmp, a, b, work):
    j = json.loads(run(gmp, ["diff", a, b, "--format", "json"]).stdout)
    check(j["schema"] == "gpumemprof-diff/3", "schema")
    check(j["a"]["path"] == a and j["b"]["path"] == b and j["a"]["complete"], "traces")
    check(j["a"]["end"] == "exit" and j["b"]["end"] == "exit", "ends")
    d = {x["id"]: x for x in j["devices"]}
    check(sorted(d) == [0, 1], "devices %s" % sorted(d))
    # 256 KiB of static __device__ memory in both: in the peak, never leaked
    pa, pb = GiB + 256 * MiB + 64 * MiB + 256 * KiB, GiB + 512 * MiB + 128 * MiB + 256 * KiB
    check(d[0]["a"]["peak_allocated_bytes"] == pa and d[0]["b"]["peak_allocated_bytes"] == pb,
          "peaks %s" % d[0])
    check(d[0]["delta"]["peak_allocated_bytes"] == pb - pa == 335544320, "peak delta")
    check(d[0]["delta"]["leaked_bytes"] == 384 * MiB, "leak delta %s" % d[0]["delta"])
    check(d[0]["a"]["leaked_bytes"] == 256 * MiB and d[0]["b"]["leaked_bytes"] == 640 * MiB,
          "leaks without the static variables %s" % d[0])
    check(d[0]["delta"]["allocations"] == 0 and d[0]["a"]["allocations"] == 4, "allocations")
    check(d[0]["a"]["peak_time_ns"] == 1003000000, "peak time A")
    check(d[1]["a"] is None and d[1]["b"]["peak_allocated_bytes"] == 100 * MiB
          and d[1]["delta"]["peak_allocated_bytes"] == 100 * MiB, "device 1 %s" % d[1])
    check(rows(j, "live_at_peak_by_range", 0) == [
        ("train", 256 * MiB, 512 * MiB, 256 * MiB, 0),
        ("eval", 0, 128 * MiB, 128 * MiB, 1),
        (None, 64 * MiB + 256 * KiB, 256 * KiB, -64 * MiB, -1),
        ("train/step", GiB, GiB, 0, 0)], "by range %s" % rows(j, "live_at_peak_by_range", 0))
    # stacks as the report's JSON gives them: frames, innermost first; the outer 0x401000, an
    # address inside no loaded module, left out as the report leaves it out (docs/stacks.md)
    check(rows(j, "live_at_peak_by_stack", 0, "stack") == [
        (None, 320 * MiB + 256 * KiB, 512 * MiB + 256 * KiB, 192 * MiB, -1),
        ([{"function": "evaluate", "file": "train.py", "line": 7}], 0, 128 * MiB, 128 * MiB, 1),
        ([{"function": None, "file": None, "line": 0, "module": "/opt/app/libtrain.so+0x12340",
           "address": "0x7f0000012340", "unknown": "file missing"}], GiB, GiB, 0, 0)],
        "by stack %s" % rows(j, "live_at_peak_by_stack", 0, "stack"))
    # each stack is the report's own JSON stack of that trace, frame for frame
    for side, path in (("a", a), ("b", b)):
        rep = json.loads(run(gmp, ["report", path, "-f", "json", "--top", "0"]).stdout)
        want = sorted(json.dumps(r["stack"]) for r in rep["devices"][0]["live_at_peak_by_stack"])
        got = sorted(json.dumps(r["stack"]) for r in j["live_at_peak_by_stack"]
                     if r["device"] == 0 and r[side + "_count"] and r["stack"])
        check(got == want, "%s's stacks: diff %s, report %s" % (side, got, want))
    check(rows(j, "live_at_peak_by_frame", 0, "frame") == [
        (None, 320 * MiB + 256 * KiB, 512 * MiB + 256 * KiB, 192 * MiB, -1),
        ("evaluate (train.py:7)", 0, 128 * MiB, 128 * MiB, 1),
        ("libtrain.so+0x12340", GiB, GiB, 0, 0)],
        "by frame %s" % rows(j, "live_at_peak_by_frame", 0, "frame"))
    check(rows(j, "leaks", 0) == [("train", 256 * MiB, 512 * MiB, 256 * MiB, 0),
                                  ("eval", 0, 128 * MiB, 128 * MiB, 1)],
          "leaks %s" % rows(j, "leaks", 0))
    check(rows(j, "leaks", 1) == [(None, 0, 100 * MiB, 100 * MiB, 1)], "leaks dev 1")
    check(all(r["kind"] == "device" for r in j["leaks"]), "leak kinds")
    # B against A: every delta changes sign
    r = json.loads(run(gmp, ["diff", b, a, "--format", "json"]).stdout)
    check(r["devices"][0]["delta"]["peak_allocated_bytes"] == pa - pb, "reversed")
    check(rows(r, "live_at_peak_by_range", 0)[0] == ("train", 512 * MiB, 256 * MiB, -256 * MiB, 0),
          "reversed rows")
    out = os.path.join(work, "d.json")
    run(gmp, ["diff", a, b, "-f", "json", "-o", out])
    check(json.load(open(out)) == j, "-o writes the same JSON")
    print("ok")


def case_text(gmp, a, b, work):
    out = run(gmp, ["diff", a, b]).stdout
    lines = out.splitlines()
    want = [
        "gpumemprof diff",
        "  A  " + a,
        "  B  " + b,
        "",
        "Per device (B - A):",
    ]
    check(lines[:5] == want, "header:\n" + "\n".join(lines[:5]))

    def line_with(prefix):
        for l in lines:
            if l.startswith(prefix):
                return l.split()
        fail("no line starting with %r in\n%s" % (prefix, out))
    check(line_with("  peak allocated")[2:] == ["1.31", "GiB", "1.63", "GiB", "+320.00", "MiB",
                                                 "+23.8%"], "peak line")
    check(line_with("  leaked at exit")[3:] == ["256.00", "MiB", "640.00", "MiB", "+384.00", "MiB",
                                                 "+150.0%"], "leak line")
    sect = out.split("Device 0: NVIDIA H100 80GB HBM3: live at the peak, by range, "
                     "biggest changes first:\n")
    check(len(sect) == 2, "by-range section missing:\n" + out)
    body = sect[1].split("\n\n")[0].splitlines()[1:]
    check([l.split()[-1] for l in body] == ["train", "eval", "range)", "train/step"],
          "by range order:\n" + "\n".join(body))
    check("new" in body[1] and "-99.6%" in body[2], "new mark, change of the static row")
    check("Device 1: NVIDIA H100 80GB HBM3: leaks (live at exit), by kind and range" in out, out)
    check(re.search(r" device  \(no range\)\n", out), out)
    # the report's frame format, the report's table names; the stack's rows are the report's
    # "by call stack" rows (0x401000, inside no loaded module, left out of both)
    check("evaluate (train.py:7)" in out and "0x401000" not in out, out)
    rep = run(gmp, ["report", b, "--color", "never"]).stdout
    rrows = rep.split("Live at the peak, by call stack:\n")[1].split("\n\n")[0].splitlines()[1:]
    rstacks = sorted(r.split(None, 4)[4] for r in rrows)
    drows = out.split("live at the peak, by call stack, biggest changes first:\n")[1]
    dstacks = sorted(r.split("  ")[-1] for r in drows.split("\n\n")[0].splitlines()[1:]
                     if "(no stack recorded)" not in r)
    check(rstacks == dstacks == ["evaluate (train.py:7)", "libtrain.so+0x12340"],
          "diff's stacks %s, the report's %s" % (dstacks, rstacks))
    check("live at the peak, by user frame" in out and "live at the peak, by call stack" in out,
          out)
    print("ok")


def case_same(gmp, a, b, work):
    j = json.loads(run(gmp, ["diff", a, a, "-f", "json"]).stdout)
    for dev in j["devices"]:
        check(all(v == 0 for v in dev["delta"].values()), "device delta %s" % dev)
    for t in ("live_at_peak_by_range", "live_at_peak_by_stack", "live_at_peak_by_frame", "leaks",
              "leaks_by_frame"):
        check(j[t] and all(r["delta_bytes"] == 0 and r["delta_count"] == 0 for r in j[t]), t)
    print("ok")


def case_top(gmp, a, b, work):
    j = json.loads(run(gmp, ["diff", a, b, "-f", "json", "--top", "1"]).stdout)
    check([(r["device"], r["range"]) for r in j["live_at_peak_by_range"]] == [(0, "train"), (1, None)],
          "top 1 json, per device")
    check(len(j["leaks"]) == 2, "top per device: %s" % j["leaks"])
    out = run(gmp, ["diff", a, b, "--top", "2"]).stdout
    check("live at the peak, by range, biggest changes first (top 2 of 4):" in out, out)
    out = run(gmp, ["diff", a, b, "--top", "0"]).stdout
    check("(top " not in out, out)
    print("ok")


def case_errors(gmp, a, b, work):
    p = run(gmp, ["diff", a], expect=2)
    check("expected two recordings" in p.stderr, p.stderr)
    run(gmp, ["diff", a, b, a], expect=2)
    run(gmp, ["diff", a, b, "--format", "xml"], expect=2)
    run(gmp, ["diff", a, b, "--top", "-3"], expect=2)
    # -1 too, as report does (it was taken for "not given")
    p = run(gmp, ["diff", a, b, "--top", "-1"], expect=2)
    check(p.stdout == "" and "--top -1" in p.stderr, p.stderr)
    p = run(gmp, ["diff", a, os.path.join(work, "missing.zst")], expect=1)
    check(p.stdout == "" and len(p.stderr.splitlines()) == 1 and "missing.zst" in p.stderr,
          p.stderr)
    junk = os.path.join(work, "junk.zst")
    with open(junk, "wb") as f:
        f.write(b"\x28\xb5\x2f\xfd garbage" * 10)
    p = run(gmp, ["diff", junk, b], expect=1)
    check(p.stdout == "" and "junk.zst" in p.stderr, p.stderr)
    h = run(gmp, ["diff", "--help"])
    check("usage: gpumemprof diff A B" in h.stdout, h.stdout)
    print("ok")


def golden_run(gmp, work, args):
    """gpumemprof diff a.zst b.zst ARGS in work: relative paths, the same in every build."""
    p = subprocess.run([gmp, "diff", "a.zst", "b.zst"] + args, capture_output=True, cwd=work)
    if p.returncode != 0 or p.stderr:
        fail("diff %s: exit %d\n%s" % (" ".join(args), p.returncode, p.stderr.decode()))
    return p.stdout


def case_golden_text(gmp, a, b, work):
    gmp_golden.golden_bytes(os.path.join(GOLDEN, "diff.txt"), golden_run(gmp, work, []),
                            "GMP_REGEN")
    print("ok")


def case_golden_top(gmp, a, b, work):
    gmp_golden.golden_bytes(os.path.join(GOLDEN, "diff.top1.txt"),
                            golden_run(gmp, work, ["--top", "1"]), "GMP_REGEN")
    print("ok")


def case_golden_json(gmp, a, b, work):
    gmp_golden.golden_json(os.path.join(GOLDEN, "diff.json"),
                           golden_run(gmp, work, ["--format", "json"]), "GMP_REGEN")
    print("ok")


def case_golden_md(gmp, a, b, work):
    gmp_golden.golden_bytes(os.path.join(GOLDEN, "diff.md"),
                            golden_run(gmp, work, ["--format", "markdown"]), "GMP_REGEN")
    print("ok")


class Page(html.parser.HTMLParser):
    """Checks that elements close in the order they opened; collects the text."""
    VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", "area", "base", "source"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open, self.text, self.errors = [], [], []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if not self.open or self.open[-1] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.open[-1:] or "nothing"))
        else:
            self.open.pop()

    def handle_data(self, data):
        self.text.append(data)


def case_html(gmp, a, b, work):
    out = golden_run(gmp, work, ["--format", "html"]).decode("utf-8")
    check(out.startswith("<!DOCTYPE html>"), out[:200])
    p = Page()
    p.feed(out)
    p.close()
    check(not p.errors and not p.open, "not well-formed: %s, left open %s" % (p.errors[:5], p.open))
    text = " ".join(p.text)
    for want in ("gpumemprof diff", "a.zst", "b.zst", "Per device (B - A)", "+320.00 MiB",
                 "+23.8%", "-99.6%", "(no range)", "evaluate (train.py:7)",
                 "Device 1: NVIDIA H100 80GB HBM3: leaks (live at exit), by kind and range"):
        check(want in text, "%r not in the page's text" % want)
    check("<title>gpumemprof diff</title>" in out, "title")
    print("ok")


def case_native(gmp, a, b, work, gen):
    """The frame at main+16 of gen_traces (a real ELF with DWARF): symbolized as `report` does
    and as addr2line says (the symbolizer looks up a return address minus one)."""
    syms = subprocess.run(["nm", gen], capture_output=True, text=True, check=True).stdout
    main_at = [int(l.split()[0], 16) for l in syms.splitlines()
               if l.split()[-1:] == ["main"] and l.split()[1] in "Tt"]
    check(len(main_at) == 1, "main in nm's output")
    off = main_at[0] + 16
    a2l = subprocess.run(["addr2line", "-f", "-e", gen, hex(off - 1)], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    check(a2l[0] == "main" and ":" in a2l[1], "addr2line: %s" % a2l)
    line = a2l[1].split(":")[1].split()[0]
    want = "main (gen_traces.c:%s)" % line
    na, nb = os.path.join(work, "na.zst"), os.path.join(work, "nb.zst")
    subprocess.run([gen, "diff", na, nb, gen, hex(off)], check=True)
    out = run(gmp, ["diff", na, nb]).stdout
    rep = run(gmp, ["report", nb, "--color", "never"]).stdout
    stack = want  # the outer 0x401000, inside no loaded module, left out (as by the report)
    check(re.search(r"\+0 B +\+0  " + re.escape(stack) + "\n", out), "diff's stack:\n" + out)
    check(re.search(r"\+0 B +\+0  " + re.escape(want) + "\n", out), "diff's user frame:\n" + out)
    check(re.search(r"  1\.00 GiB +[0-9.]+% +1  " + re.escape(stack) + "\n", rep),
          "the report's stack:\n" + rep)
    check("+0x" not in out.split("by call stack")[1].split("\n\n")[0], "an unsymbolized frame")
    check("0x401000" not in out and "0x401000" not in rep, "an address inside no module shown")
    j = json.loads(run(gmp, ["diff", na, nb, "-f", "json"]).stdout)
    fr = [r["stack"][0] for r in j["live_at_peak_by_stack"] if r["stack"] and r["a_bytes"] == GiB]
    check(len(fr) == 1 and fr[0]["function"] == "main" and fr[0]["line"] == int(line)
          and fr[0]["file"].endswith("gen_traces.c"), "JSON frame %s" % fr)
    print("ok")


def case_leaks(gmp, a, b, work):
    d = {x["id"]: x for x in json.loads(run(gmp, ["diff", a, b, "-f", "json"]).stdout)["devices"]}
    for side, path in (("a", a), ("b", b)):
        rep = json.loads(run(gmp, ["report", path, "-f", "json"]).stdout)
        for dev in rep["devices"]:
            x = d[dev["id"]][side]
            check(x["leaked_bytes"] == dev["leaked_bytes"]
                  and x["leaked_allocations"] == dev["leaked_allocations"],
                  "%s device %s: diff %s, report %s" % (side, dev["id"], x, dev))
    print("ok")


def case_ext(gmp, a, b, work):
    for ext, start in ((".html", "<!DOCTYPE html>"), (".md", "## gpumemprof diff"),
                       (".json", "{"), (".txt", "gpumemprof diff\n")):
        out = os.path.join(work, "d" + ext)
        run(gmp, ["diff", a, b, "-o", out])
        with open(out) as f:
            got = f.read()
        check(got.startswith(start), "%s: %r" % (ext, got[:80]))
    # --format wins over the extension
    out = os.path.join(work, "forced.html")
    run(gmp, ["diff", a, b, "-o", out, "-f", "text"])
    check(open(out).read().startswith("gpumemprof diff\n"), "--format text into .html")
    print("ok")


def without_annotations(snap, work):
    """A copy of a PyTorch snapshot without its record_function annotations (no ranges then),
    through Python's own pickle module (plain data: every global refused)."""
    import pickle

    class PlainData(pickle.Unpickler):
        def find_class(self, module, name):
            raise pickle.UnpicklingError("global %s.%s refused" % (module, name))

    with open(snap, "rb") as f:
        doc = PlainData(f).load()
    doc.pop("external_annotations", None)
    out = os.path.join(work, "no-annotations-" + os.path.basename(snap))
    with open(out, "wb") as f:
        pickle.dump(doc, f, protocol=4)
    return out


def case_snapshot(gmp, a, b, work):
    snaps = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                         "torch-snapshots")
    sa = os.path.join(snaps, "transformer-forward-bf16.pickle")
    sb = os.path.join(snaps, "transformer-train-step-adamw.pickle")
    out = run(gmp, ["diff", sa, sb]).stdout
    check("leak" not in out.replace("not leaks", "").replace("not leaked", ""),
          "a snapshot's memory called leaked:\n" + out)
    check("live at end (not leaks)" in out and "a snapshot" in out, out)
    longest = max(len(l) for l in out.splitlines())
    check(longest < 600, "a line of %d characters" % longest)
    # the report's "by call stack" row of B's largest stack is diff's, frame for frame
    rep = run(gmp, ["report", sb, "--color", "never"]).stdout
    rrow = rep.split("Live at the peak, by call stack")[1].splitlines()[2]
    rstack = rrow.split(None, 4)[4]
    check(rstack.startswith("step (") and "optimizers.py:8" in rstack, rrow)
    sect = out.split("live at the peak, by call stack, biggest changes first")[1]
    check(rstack in sect.split("\n\n")[0], "report's stack %r not in\n%s" % (rstack, sect[:3000]))
    check("torch::unwind" not in sect.split("\n\n")[0], "PyTorch's recorder frames first")
    check("live at the peak, by user frame" in out, out[:3000])
    # B's record_function annotations are ranges: live at the peak by range, each row's B side
    # the report's own row for B
    check("live at the peak, by range" in out, out[:3000])
    j = json.loads(run(gmp, ["diff", sa, sb, "-f", "json"]).stdout)
    rb = json.loads(run(gmp, ["report", sb, "-f", "json", "--top", "0"]).stdout)
    want = sorted((r["range"] or "", r["bytes"], r["count"])
                  for r in rb["devices"][0]["live_at_peak_by_range"])
    got = sorted((r["range"] or "", r["b_bytes"], r["b_count"])
                 for r in j["live_at_peak_by_range"] if r["b_count"])
    check(got == want and any(r[0] for r in want),
          "diff's by-range B side %r, report's %r" % (got, want))
    # without their annotations (copies through Python's pickle module) there is no range
    sa2, sb2 = (without_annotations(x, work) for x in (sa, sb))
    out2 = run(gmp, ["diff", sa2, sb2]).stdout
    check("live at the peak, by user frame" in out2 and "by range" not in out2, out2[:3000])
    check(j["a"]["end"] == "snapshot" and "leaks" not in j and j["live_at_end_by_frame"], "JSON")
    check(all(d["b"]["leaked_bytes"] is None for d in j["devices"]), "JSON leaked_bytes")
    print("ok")


def main():
    case, gmp, gen, work = sys.argv[1:5]
    gmp = gmp_testlib.gpumemprof(gmp)
    os.makedirs(work, exist_ok=True)
    a, b = os.path.join(work, "a.zst"), os.path.join(work, "b.zst")
    subprocess.run([gen, "diff", a, b], check=True)
    {"json": case_json, "text": case_text, "same": case_same, "top": case_top,
     "errors": case_errors, "golden_text": case_golden_text, "golden_top": case_golden_top,
     "golden_json": case_golden_json, "markdown": case_golden_md,
     "html": case_html, "leaks": case_leaks, "ext": case_ext,
     "snapshot": case_snapshot}.get(case, lambda *x: case_native(*x, gen))(gmp, a, b, work)


if __name__ == "__main__":
    main()
