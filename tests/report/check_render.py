#!/usr/bin/env python3
"""Tests of the report document's renderers (formats/report/gmp_render_*.c) on the sample document
of doc_sample (every block kind, value type and flag, hostile strings).

    check_render.py MODE DOC_SAMPLE GOLDEN_DIR

GMP_REGEN=1 rewrites the golden files (review `git diff tests/report/golden`).

MODE, one function each (MODES below):
  json_golden  `doc_sample json` against golden/doc_sample.json, as parsed JSON and as bytes
  json_valid   strict JSON (UTF-8, no duplicate member, no NaN/Infinity), every value type as
               docs/report.md says, hostile strings read back exactly, what has no key or is
               view-only left out, the layout (two-space indentation, one line per row/frame/point)
  html_golden  `doc_sample html` against golden/doc_sample.html, as bytes
  html_wellformed  parsed with html.parser (check_report_formats.py's rules): balanced, only the
               allowed elements, no on* attribute, no href/src, self-contained; hostile strings
               are text; headings by depth, DATA left out, every block kind drawn as it should be
  text_golden   `doc_sample text` against golden/doc_sample.txt (bytes)
  color_golden  `doc_sample color` against golden/doc_sample.color.txt (bytes)
  md_golden     `doc_sample markdown` against golden/doc_sample.md (bytes)
  text_plain    no escape sequence without colour, no control byte but newlines, valid UTF-8,
                the hostile trace strings shown escaped (\\xNN) and never raw
  color_sgr     only SGR sequences (ESC [ ... m); each reset closes an opener, nothing is left
                open at the end of a line; with the sequences removed, the coloured text is the
                plain text exactly; headings bold, BAD red, WARN yellow, verdicts by severity
  text_align    every table of the text: numeric columns end at the same column in every row,
                text columns start at the same column
  md_hostile    every row of every Markdown table has as many unescaped | as its header; no raw
                '<', control byte or invalid UTF-8; the hostile strings escaped as expected
"""
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_golden  # noqa: E402

MiB = 1 << 20
T0 = 1000000000
REGEN = "GMP_REGEN"


def sample(doc_sample, fmt):
    p = subprocess.run([doc_sample, fmt], capture_output=True)
    if p.returncode != 0:
        sys.exit("FAIL: doc_sample %s: exit %d\n%s" % (fmt, p.returncode,
                                                        p.stderr.decode(errors="replace")))
    return p.stdout


def eq(what, got, want):
    # bool is not int in the JSON: compare the types too
    if got != want or type(got) is not type(want):
        sys.exit("FAIL: %s: got %r, expected %r" % (what, got, want))


# ---- JSON ----

def json_golden(doc_sample, gdir):
    out = sample(doc_sample, "json")
    path = os.path.join(gdir, "doc_sample.json")
    gmp_golden.golden_json(path, out, REGEN)
    gmp_golden.golden_bytes(path, out, REGEN, regen=False)


def _trace_str(raw):
    """What a trace string reads back as: valid UTF-8 as it is, each other byte as U+00XX."""
    out, i = [], 0
    while i < len(raw):
        for n in (4, 3, 2, 1):
            try:
                out.append(raw[i:i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(chr(raw[i]))
            i += 1
    return "".join(out)


def _check_layout(out):
    text = out.decode("utf-8")
    if not text.endswith("}\n") or not text.startswith("{\n"):
        sys.exit("FAIL: JSON does not open with '{' and close with '}' and a newline")
    for n, line in enumerate(text.split("\n")[:-1], 1):
        ind = len(line) - len(line.lstrip(" "))
        if ind % 2 or line[ind:ind + 1] in (" ", "\t", ""):
            sys.exit("FAIL: line %d: indentation not a multiple of two spaces: %r" % (n, line))
        body = line.strip()
        # an element on one line ({...} row, frame, lane, mark; [...] point) has no spaces
        # outside strings
        if body[0] in "{[" and body.rstrip(",")[-1] in "}]" and len(body) > 2:
            outside = re.sub(r'"(\\.|[^"\\])*"', '""', body)
            if " " in outside:
                sys.exit("FAIL: line %d: one-line element with spaces: %r" % (n, line))


def json_valid(doc_sample, gdir):
    out = sample(doc_sample, "json")
    if sample(doc_sample, "json") != out:
        sys.exit("FAIL: two runs wrote different JSON")
    if re.search(rb"[\x00-\x09\x0b-\x1f\x7f]", out):
        sys.exit("FAIL: a control byte in the JSON (trace bytes not escaped)")
    j = gmp_golden.parse_json(out, "doc_sample json")  # UTF-8, no duplicate, no NaN
    _check_layout(out)

    # members in document order; data-only items included
    eq("top-level members", list(j), [
        "schema", "pid", "hostname", "cmdline", "events", "span_ns", "lost_events", "complete",
        "ratio", "change", "delta", "address", "first_time_ns", "devices",
        "largest_allocations", "analysis", "empty"])
    # every value type
    eq("LIT", j["schema"], "gpumemprof-sample/1")
    eq("COUNT", j["pid"], 4242)
    eq("STR with invalid UTF-8", j["hostname"], _trace_str(b"host\xff\xfe"))
    if b'"host\\u00ff\\u00fe"' not in out:
        sys.exit("FAIL: invalid UTF-8 bytes not written as \\u00XX")
    eq("STR (code)", j["cmdline"], "python train.py --lr=1e-3")
    eq("DUR", j["span_ns"], 18500000)
    eq("BOOL", j["complete"], False)
    eq("REAL", j["ratio"], 2.5)
    eq("SBYTES", j["change"], -512)
    eq("INT", j["delta"], -3)
    eq("HEX", j["address"], "0x7f00")
    eq("TIME (trace clock, not relative)", j["first_time_ns"], T0 - 1500)
    # trace strings without a key (headings) are not in the JSON
    for s in (b"run", b"Sim", b"and 3 more"):
        if s in out:
            sys.exit("FAIL: %r written though it has no key" % s)

    # ITEM sections: one array; DATA items included
    devs = j["devices"]
    eq("devices", [d["id"] for d in devs], [0, 1])
    eq("device members", list(devs[0]), [
        "id", "peak_allocated_bytes", "peak_time_ns", "leaked_bytes", "leaked_allocations",
        "samples", "timeline", "live_at_peak_by_range"])
    eq("BYTES", devs[0]["peak_allocated_bytes"], 128 * MiB)
    eq("DATA item", devs[0]["samples"], 3)

    # SERIES: every column with a key, time first; DOTS 0 is null; lanes and marks
    tl = devs[0]["timeline"]
    eq("series members", list(tl), ["bucket_ns", "columns", "points", "lanes", "marks"])
    eq("bucket_ns", tl["bucket_ns"], 1000000)
    eq("columns", tl["columns"], ["time_ns", "allocated_min", "allocated_max", "reserved",
                                  "driver_used", "events"])
    eq("points", len(tl["points"]), 24)
    for k, p in enumerate(tl["points"]):
        eq("point %d width" % k, len(p), 6)
        eq("point %d start" % k, p[0], T0 + k * 1000000)
        eq("point %d events" % k, p[5], k)
        if (p[4] is None) != (k % 5 != 0):
            sys.exit("FAIL: point %d: driver_used %r (DOTS: null where 0)" % (k, p[4]))
    eq("lanes", tl["lanes"], [{"label": "tid 7, depth 1", "spans": [
        {"start_ns": T0, "end_ns": T0 + 12000000, "label": "train/<step>"},
        {"start_ns": T0 + 12000000, "end_ns": T0 + 24000000,
         "label": _trace_str(b"eval\n\xff")}]}])
    eq("marks", tl["marks"], [
        {"time_ns": T0 + 12000000, "label": "peak", "problem": False},
        {"time_ns": T0 + 20000000, "label": "out of memory", "problem": True}])

    # TABLE: columns without a key left out; hostile strings read back exactly; empty STR null
    eq("table", devs[0]["live_at_peak_by_range"], [
        {"bytes": 96 * MiB, "count": 3, "range": "train/step/forward"},
        {"bytes": 24 * MiB, "count": 1, "range": "a|b*c_d`e[f]#g~h&i<j>k\"l"},
        {"bytes": 8 * MiB, "count": 2, "range": None}])

    # VIEW column left out, DATA column in; NONE null; DEVICE -1; STACK frames
    big = j["largest_allocations"]
    eq("row members", list(big[0]), ["bytes", "device", "time_ns", "free_time_ns", "address",
                                     "stack"])
    eq("NONE", big[0]["free_time_ns"], None)
    eq("DATA column (HEX)", big[0]["address"], "0x7f2000000000")
    eq("DEVICE host", big[1]["device"], -1)
    st = big[0]["stack"]
    eq("python frame", st[0], {"function": "forward", "file": "model.py", "line": 42})
    eq("native frame", st[1], {"function": "at::empty<float>", "file": "/src/aten/empty.cpp",
                               "line": 7, "module": "/usr/lib/libtorch.so+0x1a2b",
                               "address": "0x7f001a2b", "inlined": True})
    eq("unknown native frame", st[2], {"function": None, "file": None, "line": 0,
                                       "module": "/usr/lib/libtorch.so+0x99",
                                       "address": "0x7f000099", "unknown": "no DWARF"})
    eq("bare address", st[3], {"function": None, "file": None, "line": 0, "module": None,
                               "address": "0x401000"})
    eq("hostile python frame", st[4]["file"], "train|<b>.py")
    eq("frames", len(st), 6)
    eq("one-frame stack", len(big[1]["stack"]), 1)

    # VERDICT/NOTICE with a key: severity, the line as text, keyed values, children; without a
    # key: not there; a STACK block in a keyless section: a member of the enclosing object
    an = j["analysis"]
    leaks = an["leaks"]
    if not isinstance(leaks, list):
        sys.exit("FAIL: analysis.leaks is not one array (two verdicts with one key need "
                 "GMP_DOC_ITEM in the sample)")
    eq("verdict", leaks[0], {
        "severity": "problem",
        "text": "probable leak: train/<step> on device 0: +1.00 MiB per repetition",
        "range": "train/<step>", "device": 0, "rate_bytes": MiB,
        "sites": [{"growth_bytes": 10 * MiB, "range": "train/<step>"},
                  {"growth_bytes": -2 * MiB,
                   "range": "model/encoder/layers.11/self_attn/q_proj/\u00e9t\u00e9/tail_end"}]})
    eq("verdict 2", leaks[1], {"severity": "warning",
                               "text": "growth to watch: 12.5% (see Largest allocations)",
                               "share": 12.5})
    notes = an["notes"]
    if isinstance(notes, list):
        notes = notes[0]
    eq("notice", notes, {"severity": "ok",
                         "text": "no range grows over its repetitions (2 checked)",
                         "ranges_checked": 2})
    eq("stack block", an["focus_stack"], st)
    eq("empty section", j["empty"], {"nothing": []})


# ---- HTML ----

def html_golden(doc_sample, gdir):
    out = sample(doc_sample, "html")
    gmp_golden.golden_bytes(os.path.join(gdir, "doc_sample.html"), out, REGEN)


def html_wellformed(doc_sample, gdir):
    import check_report_formats as crf  # parse_html, self_contained, ALLOWED
    out = sample(doc_sample, "html")
    if sample(doc_sample, "html") != out:
        sys.exit("FAIL: two runs wrote different HTML")
    try:
        doc = out.decode("utf-8")  # strict: invalid UTF-8 must not pass through
    except UnicodeDecodeError as e:
        sys.exit("FAIL: the HTML is not UTF-8: %s" % e)
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", doc):
        sys.exit("FAIL: a raw control character in the HTML")
    if not doc.startswith("<!DOCTYPE html>\n"):
        sys.exit("FAIL: no <!DOCTYPE html>")
    crf.self_contained(doc)
    p = crf.parse_html(doc)  # balanced, allowed elements only, no on*/href/src
    text = "".join(p.data)
    # hostile strings are text, never markup (&#x1b; reads back as nothing in html.parser)
    for s in ("a|b*c_d`e[f]#g~h&i<j>k\"l", "train/<step>", "<module> (train|<b>.py:1)",
              "at::empty<float> (empty.cpp:7)", "eval\n\ufffd", "host\ufffd\ufffd",
              "Sim[31mGPU", "run]0;x.zst"):
        if s not in text:
            sys.exit("FAIL: hostile string %r not shown as text" % s)
    for tag, k, v in p.attrs:
        if v and "<" in v:
            sys.exit("FAIL: '<' in attribute %s of <%s>: %r" % (k, tag, v))
    # <title>: the first heading, as text
    m = re.search(r"<title>(.*?)</title>", doc)
    eq("<title>", m and m.group(1), "gpumemprof report: run&#x1b;]0;x&#x07;.zst")
    # headings by depth: no root title (no <h1>); depth 1 a <section> with <h2>
    eq("sections", doc.count("<section>"), 1)
    eq("<h1>", p.tags.count("h1"), 0)
    eq("<h2>", re.findall(r"<h2(?: id=\"[^\"]*\")?>(.*?)</h2>", doc), ["gpumemprof report: run&#x1b;]0;x&#x07;.zst"])
    eq("<h3>", [re.sub(r"<[^>]*>", "", h) for h in re.findall(r"<h3(?: id=\"[^\"]*\")?>(.*?)</h3>", doc)],
       ["Device 0: Sim&#x1b;[31mGPU", "Device 1: Sim&#x1b;[31mGPU", "Largest allocations",
        "Findings", "Empty section"])
    # "(top N of M)" on the heading of the section whose first block is the cut table
    eq("top note", doc.count("Live at the peak, by range <span class=note>(top 3 of 5)</span>"
                             "</h4>"), 2)
    # what is only in the JSON is not in the page; VIEW columns are
    for s in ("gpumemprof-sample/1", "samples", "0x7f2000000000"):
        if s in doc:
            sys.exit("FAIL: %r (GMP_DOC_DATA) in the HTML" % s)
    for s in ("<th>note</th>", "never freed", "<th colspan=2>bytes</th>",
              "<td class=bar><span style=\"width:160.0px\"></span></td>",
              "<td class=n>96.00 MiB</td>", "<td><i>(no range)</i></td>",
              "<b>128.00 MiB (134217728 bytes)</b>", "<span class=bad>64.00 MiB</span>",
              "<span class=warn>no</span>", "<code>python train.py --lr=1e-3</code>",
              '<div class="verdict bad">', '<div class="verdict warn">', "<p class=ok>",
              "<p>... and 3 more</p>", "<div class=st>forward (model.py:42)<br>",
              "<span class=st>forward (model.py:42)<br>", "stroke-dasharray=",
              "out of memory at +0.020000 s",
              "text-anchor=\"end\">tid 7, depth 1</text>", "; 24 buckets of 1.000 ms</div>",
              # a reference to an anchored section is a link to its heading's id, and the table
              # of contents links it too
              '(see <a href="#largest">Largest allocations</a>)', '<h3 id="largest">',
              '<nav class=toc>'):
        if s not in doc:
            sys.exit("FAIL: %r not in the HTML" % s)
    # a verdict's children are inside it
    v = doc[doc.index('<div class="verdict bad">'):]
    if v.index("<th>growth</th>") > v.index("</div>"):
        sys.exit("FAIL: the verdict's table is not inside it")
    # a SERIES: a band, lines, dots where not 0 (5 points of 24 per device), HIDDEN not drawn
    eq("dots", doc.count('r="2" fill="#777"'), 10)
    if "<title>events" in doc:
        sys.exit("FAIL: a HIDDEN column drawn")


# ---- text and Markdown ----

def text_golden(doc_sample, gdir):
    gmp_golden.golden_bytes(os.path.join(gdir, "doc_sample.txt"), sample(doc_sample, "text"),
                            REGEN)


def color_golden(doc_sample, gdir):
    gmp_golden.golden_bytes(os.path.join(gdir, "doc_sample.color.txt"),
                            sample(doc_sample, "color"), REGEN)


def md_golden(doc_sample, gdir):
    gmp_golden.golden_bytes(os.path.join(gdir, "doc_sample.md"), sample(doc_sample, "markdown"),
                            REGEN)


def _utf8(out, what):
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as e:
        sys.exit("FAIL: %s is not valid UTF-8: %s" % (what, e))


# the sample's hostile trace strings as the text renderer must show them
TEXT_ESCAPED = ["run\\x1b]0;x\\x07.zst", "host\\xff\\xfe", "Sim\\x1b[31mGPU",
                "a|b*c_d`e[f]#g~h&i<j>k\"l", "<module> (train|<b>.py:1)"]


def text_plain(doc_sample, gdir):
    out = sample(doc_sample, "text")
    if b"\x1b" in out:
        sys.exit("FAIL: an escape byte in the text without colour")
    bad = re.search(rb"[\x00-\x09\x0b-\x1f\x7f]", out)
    if bad:
        sys.exit("FAIL: control byte %r in the text" % bad.group())
    text = _utf8(out, "the text")
    for s in TEXT_ESCAPED:
        if s not in text:
            sys.exit("FAIL: %r not in the text (trace strings escaped as \\xNN)" % s)
    if not text.endswith("\n") or text.startswith("\n") or "\n\n\n" in text:
        sys.exit("FAIL: the text starts with a blank line, does not end with a newline or has "
                 "two blank lines in a row")
    if re.search(r" +\n", text):
        sys.exit("FAIL: trailing spaces in the text")
    # a TAIL cell longer than 48 columns: its last 47 characters (whole UTF-8 ones) after "…"
    tail = "\u2026encoder/layers.11/self_attn/q_proj/\u00e9t\u00e9/tail_end"
    if tail not in text or "model/encoder" in text or len(tail) != 48:
        sys.exit("FAIL: the long range path is not elided to %r" % tail)


SGR = re.compile(r"\x1b\[([0-9;]*)m")


def color_sgr(doc_sample, gdir):
    text = _utf8(sample(doc_sample, "color"), "the coloured text")
    if SGR.sub("", text) != _utf8(sample(doc_sample, "text"), "the text"):
        sys.exit("FAIL: the coloured text without its SGR sequences is not the plain text")
    if "\x1b" in SGR.sub("", text):
        sys.exit("FAIL: an escape byte that is not one of our SGR sequences")
    for n, line in enumerate(text.split("\n"), 1):
        opened = False
        for m in SGR.finditer(line):
            if m.group(1) in ("0", ""):
                if not opened:
                    sys.exit("FAIL: line %d: a reset that no colour opened: %r" % (n, line))
                opened = False
            else:
                opened = True
        if opened:
            sys.exit("FAIL: line %d: a colour left open at the end of the line: %r" % (n, line))
    # what is coloured how
    for s, what in [("\x1b[1mgpumemprof report: run\\x1b]0;x\\x07.zst\x1b[0m", "heading bold"),
                    ("\x1b[1mLargest allocations:\x1b[0m", "heading bold"),
                    ("\x1b[1m128.00 MiB (134217728 bytes)\x1b[0m", "STRONG value bold"),
                    ("\x1b[31m64.00 MiB\x1b[0m", "BAD value red"),
                    ("complete  \x1b[33mno\x1b[0m", "WARN value yellow"),
                    ("\x1b[31mprobable leak: train/<step>", "PROBLEM verdict red"),
                    ("\x1b[33mgrowth to watch: 12.5% (see Largest allocations)\x1b[0m",
                     "WARNING verdict yellow")]:
        if s not in text:
            sys.exit("FAIL: %s: %r not in the coloured text" % (what, s))
    for s in ("no range grows", "... and 3 more", "  leaked at exit  0 B"):
        line = text[text.index(s):].split("\n")[0]
        if "\x1b" in line:
            sys.exit("FAIL: coloured though nothing asks for it: %r" % line)


def _tables(lines):
    """(header, rows) of each table of the sample's text: a header line is one of the sample's
    column headers; its rows follow at the same indentation."""
    heads = ("bytes  share  count  range", "bytes  device", "growth  range")
    for i, line in enumerate(lines):
        if any(line.strip().startswith(h) for h in heads):
            ind = min(len(x) - len(x.lstrip()) for x in lines[i:i + 2])
            rows = []
            for r in lines[i + 1:]:
                if not r.strip() or len(r) - len(r.lstrip()) < ind:
                    break
                rows.append(r)
            yield line, rows


NUMERIC_TITLES = {"bytes", "share", "count", "device", "at", "freed at", "growth"}


def text_align(doc_sample, gdir):
    lines = _utf8(sample(doc_sample, "text"), "the text").split("\n")
    ntables = 0
    for head, rows in _tables(lines):
        ntables += 1
        if not rows:
            sys.exit("FAIL: table without rows: %r" % head)
        cols = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", head)]
        for k, (title, start, end) in enumerate(cols):
            for r in rows:
                if title in NUMERIC_TITLES:
                    # the cell ends where its title ends (or is blank)
                    cell = r[cols[k - 1][2] if k else 0:end]
                    if cell.strip() and (len(r) < end or r[end - 1] == " " or
                                         (len(r) > end and r[end] != " ")):
                        sys.exit("FAIL: column %r not right-aligned at %d in %r (header %r)" %
                                 (title, end, r, head))
                elif len(r) > start and (r[start] == " " or r[start - 2:start] != "  "):
                    # the cell starts where its title starts, two spaces after the one before
                    if r[start:end].strip():
                        sys.exit("FAIL: column %r does not start at %d in %r (header %r)" %
                                 (title, start, r, head))
    if ntables != 4:
        sys.exit("FAIL: %d tables found in the text, expected 4" % ntables)


def _unescaped_pipes(line):
    n, i = 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        n += line[i] == "|"
        i += 1
    return n


def md_hostile(doc_sample, gdir):
    text = _utf8(sample(doc_sample, "markdown"), "the Markdown")
    bad = re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text)
    if bad:
        sys.exit("FAIL: control character %r in the Markdown" % bad.group())
    if "<" in text or ">" in text:
        sys.exit("FAIL: a raw < or > in the Markdown (HTML could be injected)")
    lines = text.split("\n")
    ntables, i = 0, 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        ntables += 1
        want = _unescaped_pipes(lines[i])
        if not re.fullmatch(r"(\|---:?)+\|", lines[i + 1]) or \
                _unescaped_pipes(lines[i + 1]) != want:
            sys.exit("FAIL: table without a delimiter row fitting its header: %r" % lines[i + 1])
        for r in lines[i:j]:
            if _unescaped_pipes(r) != want or not r.endswith("|"):
                sys.exit("FAIL: Markdown table row with %d cells, header %d: %r" %
                         (_unescaped_pipes(r) - 1, want - 1, r))
        i = j
    if ntables != 7:
        sys.exit("FAIL: %d Markdown tables, expected 7" % ntables)
    for s in ["a\\|b\\*c\\_d\\`e\\[f\\]\\#g\\~h&amp;i&lt;j&gt;k&quot;l",
              "run\ufffd\\]0;x\ufffd.zst", "host\ufffd\ufffd", "Sim\ufffd\\[31mGPU",
              "&lt;module&gt; (train\\|&lt;b&gt;.py:1)", "`python train.py --lr=1e-3`",
              "*(no range)*", "**128.00 MiB (134217728 bytes)**", "**Problem:** probable leak",
              "**Warning:** growth to watch", "### Largest allocations",
              "**Live at the peak, by range** (top 3 of 5)"]:
        if s not in text:
            sys.exit("FAIL: %r not in the Markdown" % s)


MODES = {
    "json_golden": json_golden,
    "json_valid": json_valid,
    "html_golden": html_golden,
    "html_wellformed": html_wellformed,
    "text_golden": text_golden,
    "color_golden": color_golden,
    "md_golden": md_golden,
    "text_plain": text_plain,
    "color_sgr": color_sgr,
    "text_align": text_align,
    "md_hostile": md_hostile,
}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in MODES:
        sys.exit("usage: check_render.py %s DOC_SAMPLE GOLDEN_DIR" % "|".join(MODES))
    MODES[sys.argv[1]](sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
