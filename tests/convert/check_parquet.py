#!/usr/bin/env python3
"""`gpumemprof convert --parquet` checked by two Parquet readers nobody here wrote: DuckDB (npm
@duckdb/node-api) and hyparquet (npm, pure JavaScript, with hyparquet-compressors for zstd), through
tests/convert/parquet_read.mjs.

    check_parquet.py writer PQ_GEN NODEDEPS WORK
        The writer alone (formats/export/gmp_parquet.c): pq_gen writes files whose every value is
        known (several row groups and pages, nulls, dictionaries and a dictionary that overflows to
        PLAIN, booleans, invalid UTF-8, an over-long string, no row at all); both readers must
        return exactly writer_rows(), and the statistics (min, max, null_count) of every column
        chunk must bound its values.

    check_parquet.py convert GPUMEMPROF CONVERT_DATA TORCH_SNAPSHOTS NSYS_DIR NODEDEPS WORK
        Every kind of input (the convert test traces, two ranks at once, an empty trace, the real
        PyTorch snapshots, the real nsys export) exported, every table read by both readers (the
        same rows), and compared with `gpumemprof report --format json` of the same input: per
        rank and device, the allocations (count and bytes of device memory), the live set at the
        end, the peak allocated replayed from the allocations table in event order, the summary
        table's figures; ranks; a known allocation of the test trace with its range path and
        stack; dictionary pages and statistics present; two ranks read as one table by DuckDB with
        hive_partitioning.

    check_parquet.py hostile GPUMEMPROF GEN_TRACES CONVERT_DATA NODEDEPS WORK
        Hostile and damaged inputs (the convert and report tests' odd traces, 40 randomly damaged
        copies of a trace) never crash the export (exit 0 or 1; after 1 nothing is left behind);
        what is written is read by both readers; a directory that is not empty is refused and
        left as it was; --parquet - is refused.

Exit 77 (skip) without node or without the npm packages (scripts/install-deps.sh --browser).
Python: the interpreter ctest was configured with (standard library only)."""
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
TABLES = ["allocations", "stacks", "frames", "ranges", "samples", "summary"]
ERRORS = []


def err(msg):
    ERRORS.append(msg)
    print("FAIL: " + msg)


def read(nodedeps, files):
    out = subprocess.run(["node", os.path.join(HERE, "parquet_read.mjs"), nodedeps] + files,
                         capture_output=True, timeout=600)
    if out.returncode != 0:
        sys.exit("parquet_read.mjs failed:\n" + out.stderr.decode(errors="replace")[-3000:])
    res = json.loads(out.stdout)
    for e in res["errors"]:
        err(e)
    for f, r in res["files"].items():
        if "rows" in r and not r.get("same"):
            err("%s: DuckDB and hyparquet differ: %s" % (f, r.get("diff")))
    return res["files"]


def hive(nodedeps, d, table):
    out = subprocess.run(["node", os.path.join(HERE, "parquet_read.mjs"), nodedeps, "--hive", d,
                          table], capture_output=True, timeout=600)
    if out.returncode != 0:
        sys.exit("parquet_read.mjs --hive failed:\n" + out.stderr.decode(errors="replace")[-3000:])
    return json.loads(out.stdout)["rows"]


def num(v):
    return None if v is None else int(v)


def check_stats(name, r):
    """Every column chunk's min/max bound its values and null_count counts its nulls (one row
    group: the whole file; with several, the file's range)."""
    rows = r["rows"]
    for col in {c["name"] for c in r["chunks"]}:
        chunks = [c for c in r["chunks"] if c["name"] == col]
        vals = [row[col] for row in rows]
        nulls = sum(v is None for v in vals)
        if sum(int(c["stats_null_count"]) for c in chunks) != nulls:
            err("%s.%s: null_count %s, %d nulls read" %
                (name, col, [c["stats_null_count"] for c in chunks], nulls))
        present = [v for v in vals if v is not None]
        if not present:
            continue
        typ = [c for c in r["columns"] if c["name"] == col][0]["type"]
        key = (lambda v: v.encode()) if typ == "BYTE_ARRAY" else \
            (lambda v: {"true": 1, "false": 0}.get(v, v) if typ == "BOOLEAN" else int(v))
        mins = [c["stats_min"] for c in chunks if c["stats_min"] is not None]
        maxs = [c["stats_max"] for c in chunks if c["stats_max"] is not None]
        if typ != "BYTE_ARRAY" or max(len(v.encode()) for v in present) <= 256:
            if not mins or not maxs:
                err("%s.%s: no min/max statistics" % (name, col))
                continue
        if mins and min(key(m) for m in mins) != min(key(v) for v in present):
            err("%s.%s: min %s, values' min %s" % (name, col, mins, min(present, key=key)))
        if maxs and max(key(m) for m in maxs) != max(key(v) for v in present):
            err("%s.%s: max %s, values' max %s" % (name, col, maxs, max(present, key=key)))


# ---- writer ----

def writer_rows():
    """The values pq_gen writes (keep in step with pq_gen.c)."""
    groups = []
    for i in range(30000):
        if i % 5 == 0:
            note = None
        elif i % 11 == 0:
            note = "\u00ff%d" % i
        else:
            note = "n\u00e9%d" % i
        groups.append({"i": str(i), "sq": None if i % 3 == 0 else str(i * i),
                       "small": str(i % 7 - 3), "key": "k%d" % (i % 50), "note": note,
                       "even": "true" if i % 2 == 0 else "false",
                       "neg": None if (i // 100) % 2 else str(-(i // 1000))})
    big = "".join(chr(ord("a") + k % 26) for k in range(64 * 1024 + 1000))
    return {"groups": groups, "overflow": [{"u": "u%d" % i} for i in range(70000)],
            "empty": [], "long": [{"s": big[:64 * 1024]}, {"s": big[:300]}]}


def main_writer(pq_gen, nodedeps, work):
    gmp_testlib.run([pq_gen, work])
    want = writer_rows()
    files = [os.path.join(work, n + ".parquet") for n in want]
    got = read(nodedeps, files)
    for n, rows in want.items():
        r = got.get(os.path.join(work, n + ".parquet"), {})
        if "rows" not in r:
            continue
        if r["rows"] != rows:
            bad = next((i for i in range(min(len(rows), len(r["rows"])))
                        if rows[i] != r["rows"][i]), None)
            err("%s: %d rows read, %d written; first difference at row %s: %s != %s" %
                (n, len(r["rows"]), len(rows), bad,
                 r["rows"][bad] if bad is not None else "", rows[bad] if bad is not None else ""))
            continue
        check_stats(n, r)
        print("ok: %s: %d rows, %d row groups, read alike by DuckDB and hyparquet" %
              (n, len(rows), r["row_groups"]))
    g = got.get(os.path.join(work, "groups.parquet"), {})
    if g.get("row_groups", 0) < 3:
        err("groups.parquet: %s row groups, several expected (256 KiB each)" % g.get("row_groups"))
    enc = {c["name"]: c for c in g.get("columns", [])}
    for col in ("small", "key", "neg"):
        if "RLE_DICTIONARY" not in (enc.get(col, {}).get("encodings") or "") or \
                enc.get(col, {}).get("dictionary_page_offset") is None:
            err("groups.parquet: %s is not dictionary encoded: %s" % (col, enc.get(col)))
    ov = got.get(os.path.join(work, "overflow.parquet"), {})
    if any("RLE_DICTIONARY" in (c["encodings"] or "") for c in ov.get("columns", [])):
        err("overflow.parquet: 70000 distinct strings still dictionary encoded")
    lg = got.get(os.path.join(work, "long.parquet"), {})
    if lg.get("columns") and lg["columns"][0]["stats_min"] is not None:
        err("long.parquet: min/max of strings over 256 bytes written")


# ---- convert ----

def report_processes(rep):
    if "processes" in rep:
        return [p for p in rep["processes"]]
    return [rep]


def replayed_peaks(allocs):
    """Per (rank, device): the highest sum of the device-memory allocations live at once, events
    in their order (alloc_seq, free_seq)."""
    ev = {}
    for a in allocs:
        if a["device_memory"] != "true":
            continue
        k = (a.get("rank"), int(a["device"]))
        ev.setdefault(k, []).append((int(a["alloc_seq"]), int(a["size"])))
        if a["free_seq"] is not None:
            ev[k].append((int(a["free_seq"]), -int(a["size"])))
    peaks = {}
    for k, e in ev.items():
        cur = best = 0
        for _, d in sorted(e):
            cur += d
            best = max(best, cur)
        peaks[k] = best
    return peaks


def check_convert(name, gmp, nodedeps, inputs, work):
    d = os.path.join(work, name)
    gmp_testlib.run([gmp, "convert"] + inputs + ["--parquet", d, "--no-progress"])
    rep = json.loads(gmp_testlib.run([gmp, "report", "--format", "json"] + inputs).stdout)
    procs = report_processes(rep)
    several = len(inputs) > 1
    if several:
        files = sorted(os.path.join(d, sub, t + ".parquet") for sub in os.listdir(d)
                       for t in TABLES)
        if len(files) != 6 * len(inputs) or set(os.listdir(d)) != \
                {"rank=%d" % (p["trace"]["rank"] if p["trace"]["rank"] >= 0 else i)
                 for i, p in enumerate(procs)}:
            err("%s: %s holds %s" % (name, d, sorted(os.listdir(d))))
    else:
        files = [os.path.join(d, t + ".parquet") for t in TABLES]
        if sorted(os.listdir(d)) != sorted(t + ".parquet" for t in TABLES):
            err("%s: %s holds %s" % (name, d, sorted(os.listdir(d))))
    got = read(nodedeps, files)
    tables = {t: [] for t in TABLES}
    for f, r in got.items():
        t = os.path.basename(f)[:-8]
        rank = os.path.basename(os.path.dirname(f))[5:] if several else None
        for row in r.get("rows", []):
            if several:
                if "rank" in row:
                    err("%s: a partitioned file has a rank column" % f)
                row = dict(row, rank=rank)
            tables[t].append(row)
        if t == "allocations" and r.get("rows"):
            check_stats(name + "/" + t, r)
            cols = {c["name"]: c for c in r["columns"]}
            for col in ("kind", "device", "category"):
                if cols[col]["dictionary_page_offset"] is None:
                    err("%s: allocations.%s has no dictionary page" % (name, col))
            if any(c["compression"] != "ZSTD" for c in r["columns"]):
                err("%s: a column chunk is not zstd-compressed" % name)
    peaks = replayed_peaks(tables["allocations"])
    figures = []
    for i, p in enumerate(procs):
        tr = p["trace"]
        rank = str(tr["rank"] if tr["rank"] >= 0 else i)
        summ = {num(s["device"]): s for s in tables["summary"] if s["rank"] == rank}
        if not summ:
            err("%s: no summary row for rank %s" % (name, rank))
        for dv in p.get("devices", []):
            dev = dv["id"]
            mine = [a for a in tables["allocations"]
                    if a["rank"] == rank and int(a["device"]) == dev and a["device_memory"] == "true"]
            live = [a for a in mine if a["free_ns"] is None and a["kind"] != "static"]
            got_f = [len(mine), sum(int(a["size"]) for a in mine), len(live),
                     sum(int(a["size"]) for a in live), peaks.get((rank, dev), 0)]
            want_f = [dv["allocations"], dv["allocated_bytes_total"],
                      dv["live_at_end_allocations"], dv["live_at_end_bytes"],
                      dv["peak_allocated_bytes"]]
            if got_f != want_f:
                err("%s rank %s device %d: allocations table: count, bytes, live at end count, "
                    "bytes, replayed peak %s; report %s" % (name, rank, dev, got_f, want_f))
            s = summ.get(dev)
            if not s:
                err("%s rank %s: no summary row for device %d" % (name, rank, dev))
                continue
            got_s = [num(s[k]) for k in ("peak_allocated_bytes", "peak_reserved_bytes",
                                         "allocations", "allocated_bytes_total", "ooms",
                                         "live_at_end_bytes", "leaked_bytes")]
            want_s = [dv["peak_allocated_bytes"], dv["peak_reserved_bytes"], dv["allocations"],
                      dv["allocated_bytes_total"], dv["ooms"], dv["live_at_end_bytes"],
                      dv.get("leaked_bytes")]
            if got_s != want_s:
                err("%s rank %s device %d: summary %s, report %s" %
                    (name, rank, dev, got_s, want_s))
            figures.append("rank %s dev %d: %d allocations, peak %d" %
                           (rank, dev, len(mine), peaks.get((rank, dev), 0)))
    ranks = {s["rank"] for s in tables["summary"]}
    if len(ranks) != len(procs):
        err("%s: summary has ranks %s, report %d processes" % (name, sorted(ranks), len(procs)))
    # every id the tables name resolves
    for a in tables["allocations"]:
        if a["range_id"] is not None and not any(
                r["rank"] == a["rank"] and r["range_id"] == a["range_id"] for r in tables["ranges"]):
            err("%s: allocation range %s has no ranges row" % (name, a["range_id"]))
            break
    frame_ids = {(f["rank"], f["frame_id"]) for f in tables["frames"]}
    stack_ids = {(s["rank"], s["stack_id"]) for s in tables["stacks"]}
    if any((s["rank"], s["frame_id"]) not in frame_ids for s in tables["stacks"]):
        err("%s: a stacks row names a frame the frames table lacks" % name)
    if any(a["stack_id"] is not None and (a["rank"], a["stack_id"]) not in stack_ids
           for a in tables["allocations"]):
        err("%s: an allocation names a stack the stacks table lacks" % name)
    print("ok: %s: %s" % (name, "; ".join(figures) or "no device"))
    return d, tables


def spot_check(tables):
    """basic.trace's allocation of 512 MiB by cudaMalloc at 5 ms, freed at 10 ms, in
    train/step/forward, from Linear.forward (model.py:7) < model_forward (train.py:42)
    (tests/tools/gen_traces.c, `convert basic`)."""
    a = [x for x in tables["allocations"] if x["size"] == "536870912" and x["kind"] == "device"]
    if len(a) != 1:
        err("basic: %d allocations of 536870912 bytes" % len(a))
        return
    a = a[0]
    path = [r["path"] for r in tables["ranges"] if r["range_id"] == a["range_id"]]
    frames = {f["frame_id"]: f for f in tables["frames"]}
    stack = [(frames[s["frame_id"]]["function"], frames[s["frame_id"]]["file"],
              frames[s["frame_id"]]["line"])
             for s in sorted((s for s in tables["stacks"] if s["stack_id"] == a["stack_id"]),
                             key=lambda s: int(s["depth"]))]
    got = [a["alloc_ns"], a["free_ns"], a["api"], a["device"], path, stack, a["category"]]
    want = ["5000000", "10000000", "cudaMalloc", "0", ["train/step/forward"],
            [("Linear.forward", "model.py", "7"), ("model_forward", "train.py", "42")],
            "activation"]
    if got != want:
        err("basic: the known allocation reads %s, expected %s" % (got, want))
    else:
        print("ok: basic: the 512 MiB cudaMalloc: %s" % got)


def main_convert(gmp, data, snaps, nsys, nodedeps, work):
    cases = [("basic", [os.path.join(data, "basic.trace")]),
             ("hostile", [os.path.join(data, "hostile.trace")]),
             ("multi", [os.path.join(data, "rank0.trace"), os.path.join(data, "rank1.trace")]),
             ("empty", [os.path.join(data, "empty.trace")])]
    for f in sorted(os.listdir(snaps)):
        if f.endswith(".pickle"):
            cases.append((f[:-7], [os.path.join(snaps, f)]))
    for f in sorted(os.listdir(nsys)):
        if f.endswith(".sqlite"):
            cases.append((f[:-7], [os.path.join(nsys, f)]))
    if len(cases) < 9:
        sys.exit("test data missing: %d inputs" % len(cases))
    out = {}
    for name, inputs in cases:
        out[name] = check_convert(name, gmp, nodedeps, inputs, work)
    spot_check(out["basic"][1])
    # several ranks as one table, the way docs/fleet.md queries them
    d, tables = out["multi"]
    rows = hive(nodedeps, d, "allocations")
    by = {}
    for r in rows:
        by[r["rank"]] = by.get(r["rank"], 0) + 1
    want = {}
    for a in tables["allocations"]:
        want[a["rank"]] = want.get(a["rank"], 0) + 1
    fleet_queries(gmp, nodedeps, [i for n, ins in cases if n not in ("basic", "hostile", "multi",
                                                                    "empty") for i in ins],
                  work, os.path.join(HERE, "..", "..", "docs", "fleet.md"))
    if by != want or len(by) != 2:
        err("multi: DuckDB hive_partitioning reads %s rows per rank, files hold %s" % (by, want))
    else:
        print("ok: multi: DuckDB reads DIR/*/allocations.parquet with hive_partitioning: rows "
              "per rank %s" % by)


def fleet_queries(gmp, nodedeps, inputs, work, docs):
    """The DuckDB queries of docs/fleet.md (its ```sql blocks, 'job/' read as the export) on an
    export of several inputs: each runs, and the answers of those that have one in the report
    are the report's."""
    import re
    d = os.path.join(work, "fleet")
    gmp_testlib.run([gmp, "convert"] + inputs + ["--parquet", d, "--no-progress"])
    rep = json.loads(gmp_testlib.run([gmp, "report", "--format", "json"] + inputs).stdout)
    devs = {}
    for i, p in enumerate(report_processes(rep)):
        rank = str(p["trace"]["rank"] if p["trace"]["rank"] >= 0 else i)
        for dv in p.get("devices", []):
            devs[(rank, str(dv["id"]))] = dv
    blocks = re.findall(r"```sql\n(.*?)```", open(docs).read(), re.S)
    if len(blocks) < 5:
        err("docs/fleet.md: %d sql blocks" % len(blocks))
        return
    out = subprocess.run(["node", os.path.join(HERE, "parquet_read.mjs"), nodedeps, "--sql", d] +
                         blocks, capture_output=True, timeout=600)
    if out.returncode != 0:
        sys.exit("parquet_read.mjs --sql failed:\n" + out.stderr.decode(errors="replace")[-3000:])
    res = json.loads(out.stdout)["results"]
    seen = set()
    for b, r in zip(blocks, res):
        title = b.splitlines()[0].lstrip("- ").strip()
        seen.add(title)
        if "error" in r:
            err("docs/fleet.md query %r: %s" % (title, r["error"]))
            continue
        rows = r["rows"]
        if title == "heaviest rank":
            top = max(devs.items(), key=lambda kv: kv[1]["peak_allocated_bytes"])
            got = (rows[0]["rank"], rows[0]["device"], int(rows[0]["peak_allocated_bytes"]))
            if got != (top[0][0], top[0][1], top[1]["peak_allocated_bytes"]):
                err("fleet: heaviest rank %s, report %s" % (got, top[0]))
        elif title == "OOM rank":
            want = sorted((k[0], k[1], dv["ooms"]) for k, dv in devs.items() if dv["ooms"])
            got = sorted((x["rank"], x["device"], int(x["ooms"])) for x in rows)
            if got != want or not got:
                err("fleet: OOM ranks %s, report %s" % (got, want))
        elif title == "leaks per rank":
            want = {}
            for k, dv in devs.items():
                want[k[0]] = want.get(k[0], 0) + dv["live_at_end_bytes"]
            got = {x["rank"]: int(x["live_at_end"]) for x in rows}
            if got != want:
                err("fleet: live at end per rank %s, report %s" % (got, want))
        elif title == "peak over time":
            got = {}
            for x in rows:
                k = (x["rank"], x["device"])
                got[k] = max(got.get(k, 0), int(x["peak_bytes"]))
            want = {k: dv["peak_allocated_bytes"] for k, dv in devs.items()
                    if dv["peak_allocated_bytes"]}
            if got != want:
                err("fleet: peak over time's maxima %s, report %s" % (got, want))
        elif not rows:
            err("docs/fleet.md query %r: no row" % title)
    for t in ("heaviest rank", "OOM rank", "range grew", "leaks per rank", "peak over time"):
        if t not in seen:
            err("docs/fleet.md has no query %r" % t)
    print("ok: docs/fleet.md: %d DuckDB queries run on %d inputs, answers as the report's" %
          (len(blocks), len(inputs)))


# ---- hostile ----

def main_hostile(gmp, gen_traces, data, nodedeps, work):
    base = open(os.path.join(data, "basic.trace"), "rb").read()
    rng = random.Random(34)
    written, failed = [], 0
    for k in range(40):
        b = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        if k % 5 == 4:
            b = b[:rng.randrange(len(b))]
        src = os.path.join(work, "damaged%d.trace" % k)
        open(src, "wb").write(b)
        d = os.path.join(work, "damaged%d" % k)
        p = subprocess.run([gmp, "convert", src, "--parquet", d, "--no-progress"],
                           capture_output=True, timeout=120)
        if p.returncode not in (0, 1):
            err("damaged%d: exit %d: %s" % (k, p.returncode, p.stderr.decode(errors="replace")))
        elif p.returncode == 1:
            failed += 1
            if os.path.exists(d):
                err("damaged%d: failed, and left %s behind: %s" % (k, d, os.listdir(d)))
        else:
            written += [os.path.join(d, t + ".parquet") for t in TABLES]
    got = read(nodedeps, written) if written else {}
    print("ok: 40 damaged traces: %d exported (%d files read alike by both readers), %d refused "
          "with nothing left behind" % (40 - failed, len(got), failed))
    # hostile strings: both readers (DuckDB checks UTF-8) read what the export wrote; and the
    # report tests' odd traces (hostile strings and ids, a killed process, no allocation, ranges)
    srcs = [("hostile", os.path.join(data, "hostile.trace"))]
    for kind in ("hostile", "killed", "noalloc", "ranges"):
        src = os.path.join(work, "report-%s.trace" % kind)
        gmp_testlib.run([gen_traces, "report", kind, src])
        srcs.append(("report-" + kind, src))
    for name, src in srcs:
        d = os.path.join(work, name)
        p = subprocess.run([gmp, "convert", src, "--parquet", d, "--no-progress"],
                           capture_output=True, timeout=120)
        if p.returncode not in (0, 1):
            err("%s: exit %d: %s" % (name, p.returncode, p.stderr.decode(errors="replace")))
            continue
        if p.returncode == 1:
            if os.path.exists(d):
                err("%s: failed, and left %s behind" % (name, d))
            print("ok: %s: refused (%s), nothing left behind" %
                  (name, p.stderr.decode(errors="replace").strip()[-120:]))
            continue
        got = read(nodedeps, [os.path.join(d, t + ".parquet") for t in TABLES])
        n = sum(len(r.get("rows", [])) for r in got.values())
        print("ok: %s: %d rows in 6 tables read alike" % (name, n))
    # a directory that is not empty is refused and left as it was
    d = os.path.join(work, "notempty")
    os.makedirs(d)
    open(os.path.join(d, "mine.txt"), "w").write("keep")
    p = subprocess.run([gmp, "convert", os.path.join(data, "basic.trace"), "--parquet", d,
                        "--no-progress"], capture_output=True)
    if p.returncode != 1 or os.listdir(d) != ["mine.txt"] or b"not an empty directory" not in \
            p.stderr:
        err("a non-empty directory: exit %d, holds %s, %s" % (p.returncode, os.listdir(d),
                                                              p.stderr))
    else:
        print("ok: a non-empty directory is refused and left as it was")
    p = subprocess.run([gmp, "convert", os.path.join(data, "basic.trace"), "--parquet", "-"],
                       capture_output=True)
    if p.returncode != 2:
        err("--parquet -: exit %d" % p.returncode)
    # two inputs with the same rank: refused, nothing left behind
    d = os.path.join(work, "samerank")
    p = subprocess.run([gmp, "convert", os.path.join(data, "rank0.trace"),
                        os.path.join(data, "rank0.trace"), "--parquet", d, "--no-progress"],
                       capture_output=True)
    if p.returncode != 1 or os.path.exists(d) or b"rank 0 again" not in p.stderr:
        err("the same rank twice: exit %d, left %s: %s" % (p.returncode, os.path.exists(d),
                                                          p.stderr))
    else:
        print("ok: two inputs of the same rank are refused: %s" %
              p.stderr.decode().strip().splitlines()[-1])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mode = sys.argv[1]
    args = sys.argv[2:]
    work = args[-1]
    nodedeps = os.path.abspath(args[-2])
    if not shutil.which("node"):
        print("SKIP: needs node (scripts/install-deps.sh --browser)")
        return SKIP
    for pkg in ("@duckdb/node-api", "hyparquet", "hyparquet-compressors"):
        if not os.path.isdir(os.path.join(nodedeps, "node_modules", pkg)):
            print("SKIP: %s/node_modules/%s missing (scripts/install-deps.sh --browser)" %
                  (nodedeps, pkg))
            return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if mode == "writer":
        main_writer(args[0], nodedeps, work)
    elif mode == "convert":
        main_convert(gmp_testlib.gpumemprof(args[0]), args[1], args[2], args[3], nodedeps, work)
    elif mode == "hostile":
        main_hostile(gmp_testlib.gpumemprof(args[0]), args[1], args[2], nodedeps, work)
    else:
        sys.exit("unknown mode %s" % mode)
    if ERRORS:
        print("%d failures" % len(ERRORS))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
