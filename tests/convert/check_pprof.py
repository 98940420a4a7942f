#!/usr/bin/env python3
"""`gpumemprof convert --pprof` checked by decoders nobody here wrote.

    check_pprof.py GPUMEMPROF CONVERT_DATA TORCH_SNAPSHOTS NSYS_DIR NODEDEPS VIEWER WORK

For every kind of input (the convert test traces, one of them several traces at once, an empty
trace; the real PyTorch snapshots; the real nsys export), the .pb.gz is decoded by the npm package
pprof-format (tests/convert/pprof_decode.js, after node's gunzip) and compared with
`gpumemprof report --format json` of the same input:
  - sample types inuse_space/bytes, inuse_objects/count, alloc_space/bytes, alloc_objects/count,
    default inuse_space; every id and string index resolves;
  - per process and device: the inuse_space of its samples adds up to the report's
    peak_allocated_bytes, inuse_objects to the allocations live at the peak (live_at_peak_by_kind),
    alloc_space and alloc_objects of its device-memory samples to allocated_bytes_total and
    allocations;
  - per entry of the report's live_at_peak (device, range, stack): the samples with that device,
    range label and stack (function and line of every frame the report does not fold) hold its
    bytes.
Then speedscope (the npm package, in Debian's headless chromium driven by playwright-core:
tests/convert/speedscope_pprof.js) imports a file of each kind of input as "protobuf encoded
pprof" without an error; a damaged file must fail that check first, to show that it sees failures.

Exit 77 (skip) without node, or without pprof-format (scripts/install-deps.sh --browser)."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SKIP = 77
DEVICE_KINDS = {"device", "async-pool", "vmm-physical", "array", "static"}


def run(cmd):
    return gmp_testlib.run(cmd).stdout


def frame_key(fr):
    """A report JSON frame as (function, line) the way the pprof names it."""
    if fr.get("function"):
        return (fr["function"], fr.get("line") or 0)
    if fr.get("module"):  # "/opt/app/libtrain.so+0x12340": the module's file name and offset
        return (os.path.basename(fr["module"]), 0)
    return (fr.get("address") or "", 0)


def report_processes(rep):
    """[(label or '', report of one process)]"""
    if "processes" in rep:
        return [(p["trace"].get("label", ""), p) for p in rep["processes"]]
    return [("", rep)]


def dev_label(i):
    return "host" if i < 0 else "Device %d" % i


def check(name, gmp, nodedeps, inputs, work):
    pb = os.path.join(work, name + ".pb.gz")
    run([gmp, "convert"] + inputs + ["--pprof", pb, "--no-progress"])
    rep = json.loads(run([gmp, "report", "--format", "json"] + inputs))
    dec = json.loads(run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "pprof_decode.js"), nodedeps, pb]))
    errs = list(dec["errors"])
    want_types = ["inuse_space/bytes", "inuse_objects/count", "alloc_space/bytes",
                  "alloc_objects/count"]
    if dec["sample_types"] != want_types:
        errs.append("sample types %s" % dec["sample_types"])
    if dec["default"] != "inuse_space":
        errs.append("default sample type %r" % dec["default"])
    figures = []
    for label, proc in report_processes(rep):
        mine = [s for s in dec["samples"] if s["labels"].get("process", "") == label]
        for d in proc.get("devices", []):
            dl = dev_label(d["id"])
            ds = [s for s in mine if s["labels"].get("device") == dl]
            dev_mem = [s for s in ds if s["labels"].get("kind") in DEVICE_KINDS]
            got = [sum(s["values"][0] for s in ds), sum(s["values"][1] for s in ds),
                   sum(s["values"][2] for s in dev_mem), sum(s["values"][3] for s in dev_mem)]
            want = [d["peak_allocated_bytes"],
                    sum(k["count"] for k in d.get("live_at_peak_by_kind", [])),
                    d["allocated_bytes_total"], d["allocations"]]
            if got != want:
                errs.append("%s %s: pprof inuse_space, inuse_objects, alloc_space, alloc_objects "
                            "%s, report %s" % (label or name, dl, got, want))
            figures.append("%s%s: inuse_space %d = peak %d" %
                           (label + " " if label else "", dl, got[0], want[0]))
        # the live set at the peak by (device, range, stack as shown): entries of the report
        # whose stacks differ only in folded frames add up, as the pprof's samples do
        want_by, got_by = {}, {}
        for e in proc.get("live_at_peak", []):
            frames = e.get("stack") or []
            shown = [f for f in frames if not f.get("internal")] or frames
            key = (dev_label(e["device"]), e.get("range"),
                   tuple(frame_key(f) for f in shown))
            want_by[key] = want_by.get(key, 0) + e["bytes"]
        for s in mine:
            key = (s["labels"].get("device"), s["labels"].get("range"),
                   tuple((f[0], f[2]) for f in s["frames"]))
            if s["values"][0]:
                got_by[key] = got_by.get(key, 0) + s["values"][0]
        for key in sorted(set(want_by) | set(got_by), key=repr):
            if want_by.get(key, 0) != got_by.get(key, 0):
                errs.append("%s: live at the peak on %s, range %s, stack %s: report %d bytes, "
                            "pprof %d" % (label or name, key[0], key[1], list(key[2])[:4],
                                          want_by.get(key, 0), got_by.get(key, 0)))
    if errs:
        print("FAIL %s:\n  %s" % (name, "\n  ".join(errs[:20])))
        return None
    print("ok: %s: %d samples; %s" % (name, len(dec["samples"]), "; ".join(figures) or
                                       "no device"))
    return pb


def speedscope_check(pbs, nodedeps, viewer, work):
    if gmp_testlib.no_browser():
        print("speedscope in chromium left out (GMP_TEST_NO_BROWSER)")
        return True
    import speedscope_viewer as sv
    chromium = sv.find_chromium()
    if not chromium:
        print("SKIP speedscope: no chromium")
        return True
    index_html = os.path.join(os.path.abspath(viewer), "node_modules", "speedscope", "dist",
                              "release", "index.html")
    if not os.path.exists(index_html):
        sys.exit("%s is missing: run scripts/install-deps.sh --browser" % index_html)
    if not os.path.isdir(os.path.join(nodedeps, "playwright-core")):
        sys.exit("%s/playwright-core is missing: run scripts/install-deps.sh --browser" % nodedeps)
    # a damaged file (a sample with no values) must be reported, to show the check sees failures
    import gzip
    bad = os.path.join(work, "damaged.pb.gz")
    with open(bad, "wb") as f:
        f.write(gzip.compress(b"\x12\x00" + gzip.decompress(open(pbs[0], "rb").read())))
    out = run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "speedscope_pprof.js"), nodedeps, chromium, index_html, work,
               bad] + pbs)
    res = [json.loads(l) for l in out.decode().splitlines() if l.strip()]
    if len(res) != len(pbs) + 1:
        sys.exit("speedscope_pprof.js answered for %d of %d files" % (len(res), len(pbs) + 1))
    if res[0]["imported"] and res[0]["pprof"] and not res[0]["errors"]:
        sys.exit("the speedscope check did not notice a damaged file: it cannot be trusted")
    print("ok: a damaged file is reported (title %r, imported as pprof: %s)" %
          (res[0]["title"], res[0]["pprof"]))
    ok = True
    for r in res[1:]:
        name = os.path.basename(r["file"])
        if not r["imported"] or not r["pprof"] or r["errors"]:
            print("FAIL speedscope %s: title %r, imported as pprof %s, errors %s" %
                  (name, r["title"], r["pprof"], r["errors"][:3]))
            ok = False
        else:
            print("ok: speedscope imports %s as pprof" % name)
    return ok


def main():
    gmp, data, snaps, nsys, nodedeps, viewer, work = sys.argv[1:8]
    gmp = gmp_testlib.gpumemprof(gmp)
    nodedeps = os.path.join(os.path.abspath(nodedeps), "node_modules")
    if not shutil.which("node"):
        print("SKIP: needs node (scripts/install-deps.sh --browser)")
        return SKIP
    if not os.path.isdir(os.path.join(nodedeps, "pprof-format")):
        print("SKIP: %s/pprof-format missing (scripts/install-deps.sh --browser)" % nodedeps)
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
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
    pbs, ok = [], True
    for name, inputs in cases:
        for i in inputs:
            if not os.path.exists(i):
                sys.exit("%s is missing" % i)
        pb = check(name, gmp, nodedeps, inputs, work)
        ok = ok and pb is not None
        if pb:
            pbs.append(pb)
    # speedscope on one file of each kind of input (about 2.5 s a file in chromium)
    some = [pb for pb in pbs if os.path.basename(pb).split(".")[0] in
            ("basic", "hostile", "multi", "empty", "qwen3-expandable-3gpu-oom",
             "gemm-a100-memory-usage")]
    ok = speedscope_check(some, nodedeps, viewer, work) and ok
    if not ok:
        return 1
    print("all pprof files decoded and equal to the reports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
