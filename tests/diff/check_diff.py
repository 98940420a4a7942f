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
        every figure of the text output"""
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

MiB, GiB = 1 << 20, 1 << 30


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
    check(j["schema"] == "gpumemprof-diff/2", "schema")
    check(j["a"]["path"] == a and j["b"]["path"] == b and j["a"]["complete"], "traces")
    d = {x["id"]: x for x in j["devices"]}
    check(sorted(d) == [0, 1], "devices %s" % sorted(d))
    pa, pb = GiB + 256 * MiB + 64 * MiB, GiB + 512 * MiB + 128 * MiB
    check(d[0]["a"]["peak_allocated_bytes"] == pa and d[0]["b"]["peak_allocated_bytes"] == pb,
          "peaks %s" % d[0])
    check(d[0]["delta"]["peak_allocated_bytes"] == pb - pa == 335544320, "peak delta")
    check(d[0]["delta"]["leaked_bytes"] == 384 * MiB, "leak delta %s" % d[0]["delta"])
    check(d[0]["delta"]["allocations"] == 0 and d[0]["a"]["allocations"] == 3, "allocations")
    check(d[0]["a"]["peak_time_ns"] == 1003000000, "peak time A")
    check(d[1]["a"] is None and d[1]["b"]["peak_allocated_bytes"] == 100 * MiB
          and d[1]["delta"]["peak_allocated_bytes"] == 100 * MiB, "device 1 %s" % d[1])
    check(rows(j, "live_at_peak_by_range", 0) == [
        ("train", 256 * MiB, 512 * MiB, 256 * MiB, 0),
        ("eval", 0, 128 * MiB, 128 * MiB, 1),
        (None, 64 * MiB, 0, -64 * MiB, -1),
        ("train/step", GiB, GiB, 0, 0)], "by range %s" % rows(j, "live_at_peak_by_range", 0))
    check(rows(j, "live_at_peak_by_stack", 0, "stack") == [
        (None, 320 * MiB, 512 * MiB, 192 * MiB, -1),
        ("train.py:evaluate:7", 0, 128 * MiB, 128 * MiB, 1),
        ("libtrain.so+0x12340 <- 0x401000", GiB, GiB, 0, 0)],
        "by stack %s" % rows(j, "live_at_peak_by_stack", 0, "stack"))
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
    check(line_with("  peak allocated")[2:] == ["1.31", "GiB", "1.62", "GiB", "+320.00", "MiB",
                                                 "+23.8%"], "peak line")
    sect = out.split("Device 0: NVIDIA H100 80GB HBM3: live at the peak, by range, "
                     "biggest changes first:\n")
    check(len(sect) == 2, "by-range section missing:\n" + out)
    body = sect[1].split("\n\n")[0].splitlines()[1:]
    check([l.split()[-1] for l in body] == ["train", "eval", "range)", "train/step"],
          "by range order:\n" + "\n".join(body))
    check("new" in body[1] and "-100.0%" not in body[2] and "gone" in body[2], "new/gone marks")
    check("Device 1: NVIDIA H100 80GB HBM3: leaks (live at exit), by kind and range" in out, out)
    check(re.search(r" device  \(no range\)\n", out) and "train.py:evaluate:7" in out, out)
    print("ok")


def case_same(gmp, a, b, work):
    j = json.loads(run(gmp, ["diff", a, a, "-f", "json"]).stdout)
    for dev in j["devices"]:
        check(all(v == 0 for v in dev["delta"].values()), "device delta %s" % dev)
    for t in ("live_at_peak_by_range", "live_at_peak_by_stack", "leaks"):
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
                 "+23.8%", "gone", "(no range)", "train.py:evaluate:7",
                 "Device 1: NVIDIA H100 80GB HBM3: leaks (live at exit), by kind and range"):
        check(want in text, "%r not in the page's text" % want)
    check("<title>gpumemprof diff</title>" in out, "title")
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
     "html": case_html}[case](gmp, a, b, work)


if __name__ == "__main__":
    main()
