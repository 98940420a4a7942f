#!/usr/bin/env python3
"""The cross-rank view (docs/report.md, "Cross-rank view"): `gpumemprof report` over more than 8
traces, on traces of tests/tools/gen_traces (11 ranks of a small job, `convert rank R`, plus the
report fixture, which has an OOM). Checked against each trace's own single report (the
per-process path, another code path: its devices' peaks, OOMs and ranges' peaks) and against
medians computed here:
  - the JSON has the schema gpumemprof-ranks/1, a row per rank, sorted by rank, with each trace's
    peak, reserved peak, OOMs and leaks; the heaviest rank, the heavy ranks (> 1.5x the median),
    the OOM rank; each range's min/median/max peak across the ranks and the rank at the max;
  - `--summary-only` per trace then `--reduce` gives the same JSON byte for byte, as do one summary
    file for all and any number of threads (--jobs);
  - --device keeps one device's figures;
  - text and Markdown show the outliers and a line per rank; --per-process gives the old view,
    3 traces the old view and --cross-rank the new one;
  - traces without a rank are ranked by their place on the command line;
  - growth that diverges: 9 steady traces and 2 that grow (tests/analysis's test_analysis
    write-steady, write-growth, write-leak): the two named, with the growth of their own report's
    analysis (the largest total_growth_bytes of its growing ranges);
  - a summary file cut anywhere, or otherwise not a summary, is refused with one line (exit 1),
    never a crash.

check_ranks_view.py GPUMEMPROF GEN_TRACES TMPDIR [TEST_ANALYSIS]"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if p.returncode < 0:
        FAILS.append("%s: killed by signal %d" % (cmd[:4], -p.returncode))
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def main():
    gmp, gen, tmp = sys.argv[1:4]
    os.makedirs(tmp, exist_ok=True)
    d = tempfile.mkdtemp(prefix="ranks-view-", dir=tmp)
    env = dict(os.environ, LC_ALL="C", NO_COLOR="1")
    traces = []
    for r in range(11):
        p = os.path.join(d, "rank%02d.zst" % r)
        subprocess.run([gen, "convert", "rank", str(r), p], check=True)
        traces.append(p)
    fx = os.path.join(d, "fixture.zst")
    subprocess.run([gen, "report", "fixture", fx], check=True)
    traces.insert(5, fx)

    # the oracle: each trace's single report
    single = []
    for t in traces:
        rc, out, err = run([gmp, "report", "--format", "json", t], env=env)
        check(rc == 0, "single report of %s: %s" % (t, err))
        single.append(json.loads(out))

    rc, out, err = run([gmp, "report", "--format", "json"] + traces, env=env)
    check(rc == 0, "report json: " + err)
    direct = out
    doc = json.loads(out)
    check(doc.get("schema") == "gpumemprof-ranks/1", "schema %r" % doc.get("schema"))
    check(doc.get("traces") == 12, "traces %r" % doc.get("traces"))
    check(doc.get("ranks_recorded") == 11, "ranks recorded %r (the fixture has none)"
          % doc.get("ranks_recorded"))
    ranks = doc["ranks"]
    check(len(ranks) == 12, "%d rows of ranks" % len(ranks))
    def rank_of(i):  # the trace's rank, else its place on the command line
        r = single[i]["trace"].get("rank")
        return (r, "trace") if r is not None and r >= 0 else (i, "order")

    want_order = sorted(range(12), key=lambda i: (rank_of(i)[0], i))
    peaks = []
    for row, i in zip(ranks, want_order):
        s = single[i]
        devs = s["devices"]
        peak = max(x["peak_allocated_bytes"] for x in devs)
        dev = [x for x in devs if x["peak_allocated_bytes"] == peak][0]
        peaks.append(peak)
        check(row["path"] == traces[i], "row order: %s, want %s" % (row["path"], traces[i]))
        check((row["rank"], row["rank_source"]) == rank_of(i), "rank %r %r vs %r"
              % (row["rank"], row["rank_source"], rank_of(i)))
        check(row["peak_allocated_bytes"] == peak, "%s: peak %d, want %d"
              % (traces[i], row["peak_allocated_bytes"], peak))
        check(row["peak_device"] == dev["id"], "%s: peak device" % traces[i])
        check(row["peak_reserved_bytes"] == dev["peak_reserved_bytes"], "%s: reserved" % traces[i])
        check(row["ooms"] == sum(x["ooms"] for x in devs), "%s: ooms" % traces[i])
        check(row["leaked_bytes"] == sum(x["leaked_bytes"] for x in devs), "%s: leaked %r vs %r"
              % (traces[i], row["leaked_bytes"], [x["leaked_bytes"] for x in devs]))
        check(row["events"] == s["events"], "%s: events" % traces[i])
    med = statistics.median(peaks)
    check(doc["median_peak_bytes"] == int(med + 0.5), "median %r, want %r"
          % (doc["median_peak_bytes"], med))
    o = doc["outliers"]
    top = max(range(12), key=lambda k: (peaks[k], -k))
    check(o["heaviest"]["peak_allocated_bytes"] == peaks[top], "heaviest %r" % o["heaviest"])
    check(o["heaviest"]["path"] == ranks[top]["path"], "heaviest path %r" % o["heaviest"]["path"])
    heavy = [ranks[k]["path"] for k in range(12) if peaks[k] > 1.5 * med]
    check([ranks[k]["path"] for k in range(12) for h in o["heavy"]
           if h["rank"] == ranks[k]["rank"] and h["path"] == ranks[k]["path"]] == heavy,
          "heavy %r, want %r" % (o["heavy"], heavy))
    check(len(heavy) >= 1, "the fixture (1.81 GiB against MiB) is heavy")
    ooms = [r for r in ranks if r["ooms"]]
    check(len(ooms) == 1 and ooms[0]["path"] == fx, "one OOM rank, the fixture: %r" % ooms)
    check(len(o["oom"]) == 1 and o["oom"][0]["ooms"] == ooms[0]["ooms"], "oom outlier %r" % o["oom"])
    fx_oom = single[5]["ooms"][0]
    check(o["oom"][0]["requested_bytes"] == fx_oom["requested_bytes"], "OOM request %r vs %r"
          % (o["oom"][0], fx_oom))
    check(o["growth"] == [], "no growth outlier: %r" % o["growth"])
    # ranges: each (path, device)'s peak across the ranks that have it
    per = {}
    for i, s in enumerate(single):
        for r in s["ranges"]:
            per.setdefault((r["path"], r["device"]), []).append((r["peak_bytes"], i))
    got = {(r["range"], r["device"]): r for r in doc["ranges"]}
    check(set(got) == set(per), "ranges %r, want %r" % (sorted(got), sorted(per)))
    for k, vals in per.items():
        g = got.get(k)
        if not g:
            continue
        ps = [v for v, _ in vals]
        check(g["ranks"] == len(ps), "%s: ranks %d, want %d" % (k, g["ranks"], len(ps)))
        check(g["min_peak_bytes"] == min(ps), "%s: min" % (k,))
        check(g["max_peak_bytes"] == max(ps), "%s: max" % (k,))
        check(g["median_peak_bytes"] == int(statistics.median(ps) + 0.5), "%s: median" % (k,))
        at = [i for v, i in vals if v == max(ps)][0]
        check(g["max_path"] == traces[at], "%s: at max %s, want %s" % (k, g["max_path"], traces[at]))
    check([r["max_peak_bytes"] for r in doc["ranges"]]
          == sorted((r["max_peak_bytes"] for r in doc["ranges"]), reverse=True), "ranges order")

    # --device: that device's figures only (the fixture has a device 1)
    rc, out, err = run([gmp, "report", "--format", "json", "--device", "1"] + traces, env=env)
    dv = json.loads(out) if rc == 0 else {"ranks": [], "outliers": {}}
    for row, i in zip(dv["ranks"], want_order):
        d1 = [x["peak_allocated_bytes"] for x in single[i]["devices"] if x["id"] == 1]
        check(row["peak_allocated_bytes"] == (d1[0] if d1 else 0), "--device 1: %s's peak %r"
              % (traces[i], row["peak_allocated_bytes"]))
    check(dv["outliers"].get("heaviest", {}).get("device") == 1, "--device 1: heaviest %r"
          % dv["outliers"].get("heaviest"))
    check(all(r["device"] == 1 for r in dv.get("ranges", [])) and dv.get("ranges"),
          "--device 1: ranges of device 1 only")

    # summaries and their reduction: the same bytes
    sums = []
    for i, t in enumerate(traces):
        p = os.path.join(d, "s%02d.json" % i)
        rc, out, err = run([gmp, "report", "--summary-only", t, "-o", p], env=env)
        check(rc == 0, "summary of %s: %s" % (t, err))
        sums.append(p)
    rc, out, err = run([gmp, "report", "--reduce", "--format", "json"] + sums, env=env)
    check(rc == 0 and out == direct, "reduce != direct (%s)" % err)
    rc, out, err = run([gmp, "report", "--summary-only", "--format", "json"] + traces, env=env)
    check(rc == 0, "summaries: " + err)
    allsum = os.path.join(d, "all.json")
    with open(allsum, "wb") as f:
        f.write(out)
    s0 = json.loads(out)
    check(s0["schema"] == "gpumemprof-rank-summary/1" and len(s0["summaries"]) == 12,
          "summary document")
    rc, out, err = run([gmp, "report", "--reduce", "--format", "json", allsum], env=env)
    check(rc == 0 and out == direct, "reduce of one file != direct (%s)" % err)
    for j in ("1", "3"):
        rc, out, err = run([gmp, "report", "--format", "json", "--jobs", j] + traces, env=env)
        check(rc == 0 and out == direct, "--jobs %s != default" % j)
    rc, txt_direct, _ = run([gmp, "report"] + traces, env=env)
    rc2, txt_red, _ = run([gmp, "report", "--reduce", allsum], env=env)
    check(rc == 0 and rc2 == 0 and txt_direct == txt_red, "text: reduce != direct")
    txt = txt_direct.decode()
    check("Outliers:" in txt and "heaviest: rank " in txt, "text outliers:\n" + txt[:2000])
    check("out of memory: rank " in txt, "text: the OOM rank")
    lines = [l for l in txt.splitlines() if any(l.rstrip().endswith(t) for t in traces)]
    check(len(lines) == 12, "text: %d rank lines" % len(lines))
    rc, md, _ = run([gmp, "report", "--format", "markdown"] + traces, env=env)
    md = md.decode()
    check(rc == 0 and "\n## Ranks\n" in md and "\n## Outliers\n" in md, "markdown sections")
    check(sum(1 for l in md.splitlines() if l.startswith("| ") and l.rstrip().endswith(".zst |"))
          == 12, "markdown: a row per rank")

    # the old view on request, or with few traces
    rc, out, err = run([gmp, "report", "--format", "json", "--per-process"] + traces, env=env)
    old = json.loads(out) if rc == 0 else {}
    check(old.get("schema") == "gpumemprof-report/3" and len(old.get("summary", [])) == 12,
          "--per-process: the per-process report")
    rc, out, err = run([gmp, "report", "--format", "json"] + traces[:3], env=env)
    check(rc == 0 and json.loads(out)["schema"] == "gpumemprof-report/3", "3 traces: per process")
    rc, out, err = run([gmp, "report", "--format", "json", "--cross-rank"] + traces[:3], env=env)
    check(rc == 0 and json.loads(out)["schema"] == "gpumemprof-ranks/1", "--cross-rank")
    rc, out, err = run([gmp, "report", "--per-process", "--reduce", allsum], env=env)
    check(rc == 2, "--per-process with --reduce: usage error")

    # no rank recorded: the place on the command line
    unr = []
    for r in range(9):
        p = os.path.join(d, "u%d.zst" % r)
        subprocess.run([gen, "report", "rank", str(8 - r), p], check=True)
        unr.append(p)
    rc, out, err = run([gmp, "report", "--format", "json"] + unr, env=env)
    u = json.loads(out) if rc == 0 else {"ranks": []}
    check([(r["rank"], r["rank_source"], r["path"]) for r in u["ranks"]]
          == [(i, "order", unr[i]) for i in range(9)], "ranks by order: %r"
          % [(r["rank"], r["path"]) for r in u["ranks"]])
    check(u["outliers"]["heaviest"]["path"] == unr[0], "heaviest of the unranked")
    check(u.get("ranks_recorded") == 0, "unranked: ranks recorded %r" % u.get("ranks_recorded"))
    rc, out, err = run([gmp, "report", "--format", "json"] + [t for t in traces if t != fx],
                       env=env)
    check(rc == 0 and json.loads(out).get("ranks_recorded") == 11, "all ranked: ranks recorded")

    # growth that diverges from the median
    if len(sys.argv) > 4:
        ta = sys.argv[4]
        gt = []
        for k in range(11):
            p = os.path.join(d, "g%02d.zst" % k)
            what = "write-growth" if k == 4 else "write-leak" if k == 9 else "write-steady"
            subprocess.run([ta, what, p], check=True, stdout=subprocess.DEVNULL)
            gt.append(p)
        want = {}
        for k in (4, 9):
            rc, out, err = run([gmp, "report", "--format", "json", gt[k]], env=env)
            want[gt[k]] = max(g["total_growth_bytes"] for g in json.loads(out)["analysis"]["growth"])
        rc, out, err = run([gmp, "report", "--format", "json"] + gt, env=env)
        g = json.loads(out) if rc == 0 else {"outliers": {"growth": []}, "ranks": []}
        got = {x["path"]: x["growth_bytes"] for x in g["outliers"]["growth"]}
        check(got == want, "growth outliers %r, want %r" % (got, want))
        # the two growing ranks' column is their own analysis's; every steady rank's is below
        # the smaller of them (it is no outlier)
        check(all(r["growth_bytes"] == want[r["path"]] if r["path"] in want
                  else (r["growth_bytes"] or 0) < min(want.values()) for r in g["ranks"]),
              "growth column %r" % [(os.path.basename(r["path"]), r["growth_bytes"])
                                    for r in g["ranks"]])

    # summaries that are not: refused with one line, never a crash
    data = open(allsum, "rb").read()
    bad = [data[:k] for k in range(0, len(data), max(1, len(data) // 97))]
    bad += [data.replace(b"gpumemprof-rank-summary/1", b"gpumemprof-rank-summary/9"),
            b"[" * 100000, b'{"schema": "gpumemprof-rank-summary/1", "summaries": [{}]}',
            data.replace(b'"pid": ', b'"pid": 99999999999999999999999', 1),
            data.replace(b'"rank": ', b'"rank": -', 1).replace(b'"rank": --', b'"rank": "x', 1),
            data.replace(b'"path": "', b'"path": "\\ud800\\u00ff\\u0000', 1),
            b"\xff\xfe" + data]
    for k, b in enumerate(bad):
        p = os.path.join(d, "bad.json")
        with open(p, "wb") as f:
            f.write(b)
        rc, out, err = run([gmp, "report", "--reduce", "--format", "json", p], env=env)
        if rc == 0:  # a cut that still parses is fine only as a whole summary document
            check(json.loads(out)["schema"] == "gpumemprof-ranks/1", "bad %d: output" % k)
            continue
        check(rc == 1 and err.count("\n") == 1 and "bad.json" in err,
              "bad summary %d: rc %d, %r" % (k, rc, err[:300]))

    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
    shutil.rmtree(d, ignore_errors=True)
    print("ranks view: ok")


if __name__ == "__main__":
    main()
