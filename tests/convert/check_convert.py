#!/usr/bin/env python3
"""Tests of `gpumemprof convert` (python3 stdlib only).

    check_convert.py MODE GPUMEMPROF GEN_TRACES DATA_DIR WORK_DIR

The traces in DATA_DIR were written by `gen_traces convert` (tests/tools); goldens are in DATA_DIR/../golden.
GMP_REGEN=1 rewrites the traces and the golden files (review `git diff tests/convert`).

Modes: golden_speedscope golden_chrome golden_torch golden_multi golden_pytorch (exact outputs;
golden_pytorch: the --pytorch-snapshot pickles of basic, hostile and empty, byte for byte);
chrome_structure speedscope_structure (structure and numbers against `gpumemprof report
--format json`); torch_compat; hostile (hostile strings give valid JSON that decodes to the
trace's bytes); truncated (a cut trace converts with a warning); corrupt (one message, exit 1, no
output left); unwritable (fails before any work, nothing left); usage; multi (several traces: a
process per trace, aligned times); max_spans; counters (a track's counter events are bounded and
keep each time bucket's lowest and highest values, against an independent replay of the dump);
empty; stdout; memory (peak memory does not grow with the length of the trace)."""
import json
import os
import resource
import shutil
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_golden  # noqa: E402
import gmp_testlib  # noqa: E402

GMP = GEN = DATA = WORK = None
GOLDEN = None
REGEN = gmp_golden.regen_requested()
VERSION_NORM = "gpumemprof VERSION"


def fail(msg):
    sys.exit("FAIL: " + msg)


def run(args, expect_rc=0, cwd=None, env=None):
    return gmp_testlib.run(args, expect=expect_rc, cwd=cwd, env=env)


def regen_traces():
    for kind, args in (("basic", ["basic"]), ("hostile", ["hostile"]), ("rank0", ["rank", "0"]),
                       ("rank1", ["rank", "1"]), ("empty", ["empty"])):
        tmp = os.path.join(WORK, kind + ".trace.tmp")
        run([GEN, "convert"] + args + [tmp])
        os.replace(tmp, os.path.join(DATA, kind + ".trace"))


def convert(traces, *opts, expect_rc=0):
    """Runs convert in DATA (trace names as given, so outputs name them the same everywhere)."""
    return run([GMP, "convert"] + list(traces) + list(opts), expect_rc=expect_rc, cwd=DATA)


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")  # strict: invalid UTF-8 fails here
    except UnicodeDecodeError as e:
        fail("%s is not valid UTF-8: %s" % (path, e))
    try:
        return json.loads(text)  # strict: raw control characters in strings fail here
    except ValueError as e:
        fail("%s is not valid JSON: %s" % (path, e))


def report_json(trace):
    p = run([GMP, "report", "--format", "json", trace], expect_rc=None, cwd=DATA)
    if p.returncode != 0:
        fail("report: " + p.stderr.decode())
    return json.loads(p.stdout.decode())


def normalize(text):
    import re
    return re.sub(r"gpumemprof \d+\.\d+\.\d+[^\"]*", VERSION_NORM, text)


def golden(name, produced):
    path = os.path.join(GOLDEN, name)
    got = normalize(open(produced, encoding="utf-8").read())
    if REGEN:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(got)
        print("regenerated", path)
        return
    want = open(path, encoding="utf-8").read()
    if got != want:
        import difflib
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            "golden/" + name, "produced", n=2))
        fail("%s differs from the golden file (GMP_REGEN=1 to accept):\n%s" % (name, diff[:6000]))


# ---- Chrome trace structure ----

def check_ts(e):
    ts = e.get("ts")
    if not isinstance(ts, (int, float)):
        fail("event without a numeric ts: %r" % e)


def check_chrome(doc, reports=None, torch=False):
    """Structure of a Chrome trace; reports: {pid: report json} to compare numbers with."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("not the JSON object form with traceEvents")
    if doc.get("displayTimeUnit") != "ns":
        fail("displayTimeUnit is not ns")
    od = doc.get("otherData", {})
    if not od.get("exporter", "").startswith("gpumemprof"):
        fail("otherData.exporter missing")
    ev = doc["traceEvents"]
    pids = {e["pid"] for e in ev}
    names = {}
    threads = set()
    for e in ev:
        for k in ("ph", "pid", "tid"):
            if k not in e:
                fail("event without %s: %r" % (k, e))
        check_ts(e)
        if e["ph"] == "M":
            if e["name"] == "process_name":
                names[e["pid"]] = e["args"]["name"]
            if e["name"] == "thread_name":
                threads.add((e["pid"], e["tid"]))
    for p in pids:
        if p not in names:
            fail("pid %d has no process_name metadata" % p)
    # B/E nested per thread, in time order, no negative durations
    stacks = {}
    last = {}
    for e in ev:
        if e["ph"] not in "BE":
            continue
        key = (e["pid"], e["tid"])
        if e["ts"] < last.get(key, -1e300):
            fail("B/E events of thread %r out of time order at %r" % (key, e))
        last[key] = e["ts"]
        if e["ph"] == "B":
            stacks.setdefault(key, []).append(e)
        else:
            if not stacks.get(key):
                fail("E without B on thread %r: %r" % (key, e))
            b = stacks[key].pop()
            if e["ts"] < b["ts"]:
                fail("negative duration: %r .. %r" % (b, e))
    for key, st in stacks.items():
        if st:
            fail("thread %r ends with %d open slices" % (key, len(st)))
    for e in ev:
        if e["ph"] == "X" and e.get("dur", 0) < 0:
            fail("negative dur: %r" % e)
    # async spans matched by (pid, cat, id)
    spans = {}
    for e in ev:
        if e["ph"] in "be":
            key = (e["pid"], e.get("cat"), e["id"])
            s = spans.setdefault(key, {})
            if e["ph"] in s:
                fail("async id %r has two %s events" % (key, e["ph"]))
            s[e["ph"]] = e
    for key, s in spans.items():
        if set(s) != {"b", "e"}:
            fail("async span %r is not matched: %r" % (key, s))
        if s["e"]["ts"] < s["b"]["ts"]:
            fail("async span %r ends before it begins" % (key,))
        if s["e"]["name"] != s["b"]["name"]:
            fail("async span %r: b and e names differ" % (key,))
    if not reports:
        return
    for pid, rep in reports.items():
        for d in rep["devices"]:
            label = "Device %d" % d["id"] if d["id"] >= 0 else "host"
            ctr = [e for e in ev if e["pid"] == pid and e["ph"] == "C" and
                   e["name"] == label + " memory"]
            alloc = max([e["args"]["allocated"] for e in ctr] or [0])
            res = max([e["args"]["reserved"] for e in ctr] or [0])
            if alloc != d["peak_allocated_bytes"]:
                fail("pid %d %s: counter max allocated %d != report peak %d" %
                     (pid, label, alloc, d["peak_allocated_bytes"]))
            if res != d["peak_reserved_bytes"]:
                fail("pid %d %s: counter max reserved %d != report peak reserved %d" %
                     (pid, label, res, d["peak_reserved_bytes"]))
            peak = [e for e in ev if e["pid"] == pid and e["ph"] == "i" and
                    e["name"] == "peak allocated (%s)" % label]
            if d["peak_allocated_bytes"]:
                if len(peak) != 1 or peak[0]["args"]["bytes"] != d["peak_allocated_bytes"]:
                    fail("pid %d %s: peak instant %r" % (pid, label, peak))
                t0 = rep["trace"]["start_trace_ns"]
                want_us = (d["peak_time_ns"] - t0) / 1000.0
                if abs(peak[0]["ts"] - want_us - chrome_offset_us(doc, pid)) > 0.0005:
                    fail("pid %d %s: peak at %r us, report says %r us" %
                         (pid, label, peak[0]["ts"], want_us))
            if od.get("allocation_spans_dropped", 0) == 0:
                n = sum(1 for e in ev if e["pid"] == pid and e["ph"] == "b" and
                        e["name"] == label + " allocations")
                if n != d["allocations"]:
                    fail("pid %d %s: %d allocation spans, report counts %d allocations" %
                         (pid, label, n, d["allocations"]))
        ooms = [e for e in ev if e["pid"] == pid and e["ph"] == "i" and e.get("cat") == "oom"]
        if len(ooms) != len(rep["ooms"]):
            fail("pid %d: %d OOM instants, report has %d" % (pid, len(ooms), len(rep["ooms"])))


def chrome_offset_us(doc, pid):
    """The shown-time offset of a process (several traces are aligned on the wall clock)."""
    tr = [t for t in doc["otherData"]["traces"] if t["pid"] == pid][0]
    w0 = min(t["start_wall_ns"] for t in doc["otherData"]["traces"])
    return (tr["start_wall_ns"] - w0) / 1000.0


def check_ts_precision(path):
    import re
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r'"ts":(-?[0-9.eE+]+)', text):
        if not re.fullmatch(r"-?\d+\.\d{3}", m.group(1)):
            fail("ts %s is not microseconds with 3 decimals" % m.group(1))


# ---- speedscope structure ----

def check_speedscope(doc, rep=None, label=""):
    if doc.get("$schema") != "https://www.speedscope.app/file-format-schema.json":
        fail("speedscope $schema missing")
    for k in ("exporter", "name", "profiles", "shared"):
        if k not in doc:
            fail("speedscope: no %s" % k)
    frames = doc["shared"]["frames"]
    for f in frames:
        if not isinstance(f.get("name"), str):
            fail("frame without a name: %r" % f)
    nf = len(frames)
    if not doc["profiles"]:
        fail("no profiles")
    if not 0 <= doc.get("activeProfileIndex", 0) < len(doc["profiles"]):
        fail("activeProfileIndex out of range")
    for p in doc["profiles"]:
        if p["type"] == "sampled":
            if p["unit"] not in ("bytes", "none"):
                fail("unit %r" % p["unit"])
            if len(p["samples"]) != len(p["weights"]):
                fail("%s: samples and weights differ in length" % p["name"])
            if sum(p["weights"]) != p["endValue"] - p["startValue"]:
                fail("%s: endValue is not the sum of the weights" % p["name"])
            for s in p["samples"]:
                if not s or any(not 0 <= i < nf for i in s):
                    fail("%s: bad sample %r" % (p["name"], s))
            if any(w <= 0 for w in p["weights"]):
                fail("%s: a weight is not positive" % p["name"])
        elif p["type"] == "evented":
            if p["unit"] != "nanoseconds":
                fail("evented unit %r" % p["unit"])
            st, last = [], p["startValue"]
            for e in p["events"]:
                if not 0 <= e["frame"] < nf:
                    fail("%s: bad frame %r" % (p["name"], e))
                if e["at"] < last:
                    fail("%s: events out of order at %r" % (p["name"], e))
                last = e["at"]
                if e["type"] == "O":
                    st.append(e["frame"])
                elif e["type"] == "C":
                    if not st or st[-1] != e["frame"]:
                        fail("%s: closes frame %d, open: %r" % (p["name"], e["frame"], st))
                    st.pop()
                else:
                    fail("event type %r" % e["type"])
            if st:
                fail("%s: frames left open: %r" % (p["name"], st))
            if last > p["endValue"]:
                fail("%s: an event after endValue" % p["name"])
        else:
            fail("profile type %r" % p["type"])
    if rep:
        for d in rep["devices"]:
            if d["id"] < 0 or not d["peak_allocated_bytes"]:
                continue
            name = [p for p in doc["profiles"]
                    if p["name"].startswith(label + "Device %d" % d["id"])
                    and p["name"].endswith("live at the peak, bytes")]
            if len(name) != 1 or name[0]["endValue"] != d["peak_allocated_bytes"]:
                fail("Device %d: live-at-peak profile %r, report peak %d" %
                     (d["id"], [(p["name"], p["endValue"]) for p in name],
                      d["peak_allocated_bytes"]))
            want = sum(x["bytes"] for x in rep["live_at_peak"] if x["device"] == d["id"])
            if want != name[0]["endValue"]:
                fail("Device %d: live_at_peak rows sum to %d" % (d["id"], want))


# ---- modes ----

def out(name):
    return os.path.join(WORK, name)


def mode_golden_speedscope():
    convert(["basic.trace"], "--speedscope", out("b.json"))
    golden("basic.speedscope.json", out("b.json"))


def mode_golden_chrome():
    convert(["basic.trace"], "--chrome", out("b.json"))
    golden("basic.chrome.json", out("b.json"))


def mode_golden_torch():
    convert(["basic.trace"], "--chrome", out("b.json"), "--chrome-torch-compat")
    golden("basic.torch.chrome.json", out("b.json"))


def mode_golden_multi():
    convert(["rank0.trace", "rank1.trace"], "--chrome", out("c.json"), "--speedscope",
            out("s.json"))
    golden("ranks.chrome.json", out("c.json"))
    golden("ranks.speedscope.json", out("s.json"))


def mode_golden_pytorch():
    for name in ("basic", "hostile", "empty"):
        convert([name + ".trace"], "--pytorch-snapshot", out(name + ".pickle"))
        with open(out(name + ".pickle"), "rb") as f:
            got = f.read()
        gmp_golden.golden_bytes(os.path.join(GOLDEN, name + ".pytorch.pickle"), got,
                                "GMP_REGEN", regen=REGEN)


def mode_chrome_structure():
    p = convert(["basic.trace"], "--chrome", out("b.json"))
    doc = load(out("b.json"))
    check_ts_precision(out("b.json"))
    rep = report_json("basic.trace")
    check_chrome(doc, {4242: rep})
    ev = doc["traceEvents"]
    # what the trace holds, as the user would look for it
    threads = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and
               e["name"] == "thread_name"}
    if threads != {100: "MainThread", 101: "loader"}:
        fail("thread names %r" % threads)
    slices = [e["name"] for e in ev if e["ph"] == "B"]
    if slices != ["train", "step", "forward", "eval", "backward", "eval"]:
        fail("NVTX slices %r" % slices)
    if not any(e["ph"] == "i" and e["name"] == "checkpoint" for e in ev):
        fail("the mark is missing")
    if not any(e["ph"] == "b" and e["name"] == "load_batch" for e in ev):
        fail("the start/end range is missing")
    drv = [e for e in ev if e["ph"] == "C" and e["name"] == "Device 0 driver"]
    if len(drv) != 1 or drv[0]["args"]["used"] != 2 << 30 or drv[0]["ts"] != 18000.0:
        fail("driver counter %r" % drv)
    leaked = [e for e in ev if e["ph"] == "b" and e.get("args", {}).get("leaked")]
    if sorted(e["args"]["bytes"] for e in leaked) != sorted(
            [1 << 30, 1 << 30, 100 << 20, 32 << 20, 16 << 20]):
        fail("leaked spans %r" % [(e["name"], e["args"]["bytes"]) for e in leaked])
    span = [e for e in ev if e["ph"] == "b" and e.get("args", {}).get("address") == "0x7f1040000000"][0]
    if span["args"]["stack"] != ["Linear.forward (model.py:7)", "model_forward (train.py:42)"] \
            or span["args"]["range"] != "train/step/forward" or span["ts"] != 5000.0:
        fail("allocation span %r" % span)
    end = [e for e in ev if e["ph"] == "e" and e["id"] == span["id"]][0]
    if end["ts"] != 10000.0:
        fail("the span of 0x7f1040000000 ends at %r" % end["ts"])
    if not any(e["ph"] == "i" and e.get("cat") == "lost" and e["args"]["count"] == 3 for e in ev):
        fail("the LOST instant is missing")
    if b"warning" not in p.stderr:
        fail("no warning for the trace's lost events")


def mode_speedscope_structure():
    convert(["basic.trace"], "--speedscope", out("b.json"))
    doc = load(out("b.json"))
    check_speedscope(doc, report_json("basic.trace"))
    frames = doc["shared"]["frames"]
    py = [f for f in frames if f["name"] == "model_forward (train.py:42)"]
    if py != [{"name": "model_forward (train.py:42)", "file": "train.py", "line": 42}]:
        fail("python frame %r" % py)
    nat = [f for f in frames if f["name"].startswith("libtrain.so+")]
    if nat != [{"name": "libtrain.so+0x12340", "file": "/opt/app/libtrain.so"}]:
        fail("native frame %r" % nat)
    if not any(f["name"] == "0x401000" for f in frames):
        fail("unresolved native frame missing")
    if not any(f["name"] == "eval (eval-domain)" for f in frames):
        fail("a range of a domain should show its domain")
    if doc["exporter"] != "gpumemprof " + doc["exporter"].split(" ", 1)[1]:
        fail("exporter %r" % doc["exporter"])
    first = doc["profiles"][0]
    if first["name"] != "Device 0 (NVIDIA H100 80GB HBM3): live at the peak, bytes":
        fail("first profile %r" % first["name"])
    # the sample of the 1 GiB allocation: train/step/forward, then its stack outermost first,
    # without 0x401000, an address inside no loaded module (folded: docs/stacks.md)
    names = [[frames[i]["name"] for i in s] for s in first["samples"]]
    want = ["train", "step", "forward", "libtrain.so+0x12340"]
    if names[0] != want or first["weights"][0] != 1 << 30:
        fail("first sample %r (%r)" % (names[0], first["weights"][0]))
    th = [p for p in doc["profiles"] if p["type"] == "evented"]
    if [p["name"] for p in th] != ["thread 100 (MainThread): NVTX ranges",
                                   "thread 101 (loader): NVTX ranges"]:
        fail("evented profiles %r" % [p["name"] for p in th])
    ev0 = [(e["type"], frames[e["frame"]]["name"], e["at"]) for e in th[0]["events"]]
    if ev0[:3] != [("O", "train", 1000000), ("O", "step", 2000000), ("O", "forward", 3000000)]:
        fail("thread 100 events %r" % ev0[:3])
    if ev0[-1] != ("C", "train", 19000000):
        fail("thread 100 last event %r" % (ev0[-1],))
    leak = [p for p in doc["profiles"] if p["name"] == "Device 0 (NVIDIA H100 80GB HBM3): "
            "leaked at exit, bytes"][0]
    if leak["endValue"] != (1 << 30) + (32 << 20):
        fail("Device 0 leaked %d" % leak["endValue"])


def mode_torch_compat():
    convert(["basic.trace"], "--chrome", out("b.json"), "--chrome-torch-compat")
    doc = load(out("b.json"))
    check_chrome(doc, {4242: report_json("basic.trace")})
    mem = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    keys = {"Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved"}
    for e in mem:
        if e["ph"] != "i" or e["s"] != "t" or e["cat"] != "cpu_instant_event":
            fail("[memory] event form %r" % e)
        if set(e["args"]) != keys or any(not isinstance(v, int) for v in e["args"].values()):
            fail("[memory] args %r" % e["args"])
    # device memory only: 1 GiB, 512 MiB, 256 MiB phys, 100 MiB, 256 MiB, 64 MiB pool block
    allocs = [e for e in mem if e["args"]["Bytes"] > 0]
    frees = [e for e in mem if e["args"]["Bytes"] < 0]
    if len(allocs) != 6 or len(frees) != 4:
        fail("%d [memory] allocations and %d frees" % (len(allocs), len(frees)))
    # Total Allocated follows the device's allocated bytes
    dev0 = [e for e in mem if e["args"]["Device Id"] == 0]
    tot = 0
    for e in sorted(dev0, key=lambda e: e["ts"]):
        tot += e["args"]["Bytes"]
        if e["args"]["Total Allocated"] != tot:
            fail("Total Allocated %d, running sum %d at %r" % (e["args"]["Total Allocated"],
                                                              tot, e))
    first = sorted(dev0, key=lambda e: e["ts"])[0]
    if first["args"] != {"Device Type": 1, "Device Id": 0, "Addr": 0x7f1000000000,
                         "Bytes": 1 << 30, "Total Allocated": 1 << 30,
                         "Total Reserved": 1 << 30} or first["ts"] != 4000.0 \
            or first["tid"] != 100 or first["pid"] != 4242:
        fail("first [memory] event %r" % first)


HOSTILE = {
    "train": "tr\"ain", "step": "st\\ep", "forward": "<script>alert(1)</script>",
    "backward": "new\nline\ttab\r", "eval": "bad \xff\xfe utf8 \xc3",
    "thread0": "Main\"Thread</title>", "thread1": "\xe2\x82 cut euro",
    "device": "GPU \"0\" <b>&amp;</b>", "api": "cuda\"Malloc\\",
}


def latin1_invalid(s):
    """What the escaper makes of invalid UTF-8: each bad byte as its Latin-1 character."""
    b = s.encode("latin-1")
    outs, i = [], 0
    while i < len(b):
        for n in (4, 3, 2, 1):
            try:
                outs.append(b[i:i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                continue
        else:
            outs.append(chr(b[i]))
            i += 1
    return "".join(outs)


def mode_hostile():
    convert(["hostile.trace"], "--chrome", out("c.json"), "--speedscope", out("s.json"),
            "--chrome-torch-compat")
    c, s = load(out("c.json")), load(out("s.json"))
    check_chrome(c, {4242: report_json("hostile.trace")})
    check_speedscope(s)
    ev = c["traceEvents"]
    slices = [e["name"] for e in ev if e["ph"] == "B"]
    want = [latin1_invalid(HOSTILE[k]) for k in ("train", "step", "forward", "eval",
                                                  "backward", "eval")]
    if slices != want:
        fail("hostile slice names %r, expected %r" % (slices, want))
    threads = sorted(e["args"]["name"] for e in ev if e["ph"] == "M" and
                     e["name"] == "thread_name")
    if threads != sorted([latin1_invalid(HOSTILE["thread0"]), latin1_invalid(HOSTILE["thread1"])]):
        fail("hostile thread names %r" % threads)
    apis = {e["args"]["api"] for e in ev if e["ph"] == "b" and "api" in e.get("args", {})}
    if latin1_invalid(HOSTILE["api"]) not in apis:
        fail("hostile API name %r" % apis)
    names = [p["name"] for p in s["profiles"]]
    if not any(latin1_invalid(HOSTILE["device"]) in n for n in names):
        fail("hostile device name missing from %r" % names)
    frames = {f["name"] for f in s["shared"]["frames"]}
    for k in ("train", "step", "forward", "backward"):
        if latin1_invalid(HOSTILE[k]) not in frames:
            fail("frame %r missing" % HOSTILE[k])
    raw = open(out("c.json"), "rb").read() + open(out("s.json"), "rb").read()
    if b"</script>" in raw.replace(b"<\\/script>", b"") and b"\"<script>alert(1)</script>\"" \
            not in raw:
        fail("script tag outside a JSON string")
    for bad in (b"\xff", b"\xfe", b"\x01", b"\x1b", b"\x7f"):
        if bad in raw:
            fail("raw byte %r in the output" % bad)


def mode_truncated():
    data = open(os.path.join(DATA, "basic.trace"), "rb").read()
    for cut in (len(data) * 2 // 3, len(data) - 7):
        path = out("cut.trace")
        with open(path, "wb") as f:
            f.write(data[:cut])
        p = run([GMP, "convert", path, "--chrome", out("c.json"), "--speedscope", out("s.json")])
        err = p.stderr.decode()
        if "warning" not in err or "cut.trace" not in err:
            fail("cut at %d: no warning:\n%s" % (cut, err))
        check_chrome(load(out("c.json")), {4242: report_json(path)})
        check_speedscope(load(out("s.json")))


def no_outputs(*names):
    for n in names:
        if os.path.exists(out(n)):
            fail("%s was left behind" % n)


def mode_corrupt():
    garbage = out("garbage.trace")
    with open(garbage, "wb") as f:
        f.write(b"this is not a gpumemprof trace\n" * 10)
    data = bytearray(open(os.path.join(DATA, "basic.trace"), "rb").read())
    flipped = out("flipped.trace")
    data[len(data) // 2] ^= 0xff
    with open(flipped, "wb") as f:
        f.write(data)
    for path in (garbage, flipped, out("missing.trace")):
        p = run([GMP, "convert", path, "--chrome", out("c.json"), "--speedscope", out("s.json")],
                expect_rc=1)
        lines = p.stderr.decode().strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("gpumemprof convert: ") or \
                os.path.basename(path) not in lines[0]:
            fail("%s: expected one message naming the trace, got:\n%s" % (path, p.stderr.decode()))
        no_outputs("c.json", "s.json")
    # a corrupt trace after a good one: nothing is written either
    p = run([GMP, "convert", os.path.join(DATA, "basic.trace"), flipped, "--chrome", out("c.json")],
            expect_rc=1)
    no_outputs("c.json")


def mode_unwritable():
    blocker = out("afile")
    with open(blocker, "w") as f:
        f.write("x")
    # a trace whose header is good but whose body is corrupt: had any work been done before the
    # outputs were checked, the message would be about the trace
    data = bytearray(open(os.path.join(DATA, "basic.trace"), "rb").read())
    data[len(data) // 2] ^= 0xff
    bad_body = out("badbody.trace")
    with open(bad_body, "wb") as f:
        f.write(data)
    run([GMP, "convert", bad_body, "--speedscope", out("s.json")], expect_rc=1)
    for bad in (out("no/such/dir/x.json"), os.path.join(blocker, "x.json"), WORK):
        for trace in (os.path.join(DATA, "basic.trace"), bad_body):
            p = run([GMP, "convert", trace, "--speedscope", out("s.json"), "--chrome", bad],
                    expect_rc=1)
            lines = p.stderr.decode().strip().splitlines()
            if len(lines) != 1 or "--chrome" not in lines[0] or bad not in lines[0]:
                fail("unwritable %s with %s: %r" % (bad, os.path.basename(trace), lines))
            no_outputs("s.json")


def mode_usage():
    b = os.path.join(DATA, "basic.trace")
    for args in ([], [b], ["--chrome", out("c.json")], [b, "--chrome"],
                 [b, "--max-spans", "many", "--chrome", out("c.json")],
                 [b, "--chrome", out("x.json"), "--speedscope", out("x.json")],
                 [b, "--chrome", b], [b, "--chrome", "-", "--speedscope", "-"],
                 [b, "--nope", "--chrome", out("c.json")]):
        p = run([GMP, "convert"] + args, expect_rc=2)
        if not p.stderr.decode().startswith("gpumemprof convert: "):
            fail("usage error for %r: %r" % (args, p.stderr.decode()))
    no_outputs("c.json", "x.json")
    if open(b, "rb").read(4) != b"\x28\xb5\x2f\xfd":
        fail("the trace was overwritten")
    p = run([GMP, "convert", "--help"])
    for want in (b"--speedscope", b"--chrome", b"--chrome-torch-compat", b"--max-spans"):
        if want not in p.stdout:
            fail("--help does not mention %r" % want)
    p = run([GMP, "--help"])
    if b"convert" not in p.stdout:
        fail("gpumemprof --help does not list convert")


def mode_multi():
    convert(["rank0.trace", "rank1.trace"], "--chrome", out("c.json"), "--speedscope",
            out("s.json"))
    c, s = load(out("c.json")), load(out("s.json"))
    check_chrome(c, {5000: report_json("rank0.trace"), 5001: report_json("rank1.trace")})
    names = {e["pid"]: e["args"]["name"] for e in c["traceEvents"] if e["ph"] == "M" and
             e["name"] == "process_name"}
    if names != {5000: "rank 0, pid 5000: python train.py",
                 5001: "rank 1, pid 5001: python train.py"}:
        fail("process names %r" % names)
    # rank 1 started 1 ms after rank 0: its events are 1000 us later on the shared time line
    first = {}
    for e in c["traceEvents"]:
        if e["ph"] == "B":
            first.setdefault(e["pid"], e["ts"])
    if first != {5000: 1000.0, 5001: 2000.0}:
        fail("first slices %r" % first)
    check_speedscope(s, report_json("rank0.trace"), "rank 0, pid 5000: ")
    check_speedscope(s, report_json("rank1.trace"), "rank 1, pid 5001: ")
    # the same trace twice: pids stay distinct
    convert(["rank0.trace", "rank0.trace"], "--chrome", out("d.json"))
    pids = {e["pid"] for e in load(out("d.json"))["traceEvents"]}
    if len(pids) != 2:
        fail("the same trace twice gives pids %r" % pids)


def mode_max_spans():
    big = out("big.trace")
    run([GEN, "convert", "big", "20000", big])
    rep = json.loads(run([GMP, "report", "--format", "json", big]).stdout)
    p = run([GMP, "convert", big, "--chrome", out("c.json"), "--max-spans", "100"])
    doc = load(out("c.json"))
    check_chrome(doc, {9000: rep})
    spans = [e for e in doc["traceEvents"] if e["ph"] == "b" and e.get("cat") == "memory"]
    total = sum(d["allocations"] for d in rep["devices"])
    if len(spans) != 100:
        fail("%d spans with --max-spans 100" % len(spans))
    od = doc["otherData"]
    if od["allocation_spans"] != 100 or od["allocation_spans_dropped"] != total - 100:
        fail("otherData %r, %d allocations" % (od, total))
    err = p.stderr.decode()
    if "note" not in err or str(total - 100) not in err or "--max-spans" not in err:
        fail("no note about dropped spans: %r" % err)
    run([GMP, "convert", big, "--chrome", out("all.json"), "--max-spans", "0"])
    doc = load(out("all.json"))
    n = sum(1 for e in doc["traceEvents"] if e["ph"] == "b" and e.get("cat") == "memory")
    if n != total:
        fail("--max-spans 0 wrote %d of %d spans" % (n, total))
    check_chrome(doc, {9000: rep})
    ss = out("s.json")
    run([GMP, "convert", big, "--speedscope", ss])
    check_speedscope(load(ss), rep)


# formats/export/gmp_out_counters.h: the first EXACT changes of a track as they come, then time
# buckets (BUCKET0_NS wide at first, doubled until the rest of the run fits in BUCKETS)
CTR_EXACT, CTR_BUCKETS, CTR_BUCKET0_NS = 4096, 2048, 1


def mode_counters():
    big = out("big.trace")
    run([GEN, "convert", "big", "20000", big])
    rep = json.loads(run([GMP, "report", "--format", "json", big]).stdout)
    p = run([GMP, "convert", big, "--chrome", out("c.json"), "--no-progress"])
    doc = load(out("c.json"))
    check_chrome(doc, {9000: rep})  # the peaks survive
    # the true curve: allocated bytes per device after each event that changed it
    t0 = None
    live, cur, true = {}, {}, {}
    for line in run([GMP, "dump", big, "--json"]).stdout.decode().splitlines():
        r = json.loads(line)
        if r["type"] == "header":
            t0 = r["start_trace_ns"]
        elif r["type"] == "alloc" and r["result"] == 0:
            live[r["address"]] = (r["device"], r["size"])
            cur[r["device"]] = cur.get(r["device"], 0) + r["size"]
            true.setdefault(r["device"], []).append((r["t"] - t0, cur[r["device"]]))
        elif r["type"] == "free" and r["address"] in live:
            d, sz = live.pop(r["address"])
            cur[d] -= sz
            true.setdefault(d, []).append((r["t"] - t0, cur[d]))
    merged = 0
    for dev, tc in sorted(true.items()):
        got = [(round(e["ts"] * 1000), e["args"]["allocated"]) for e in doc["traceEvents"]
               if e["ph"] == "C" and e["name"] == "Device %d memory" % dev]
        if len(tc) <= CTR_EXACT:
            fail("device %d: %d changes, not enough to test the bound" % (dev, len(tc)))
        bound = CTR_EXACT + CTR_BUCKETS * 6
        if len(got) > bound:
            fail("device %d: %d counter events, bound %d" % (dev, len(got), bound))
        if got[:CTR_EXACT] != tc[:CTR_EXACT]:
            fail("device %d: the first %d changes are not written as they came" %
                 (dev, CTR_EXACT))
        rest, out_rest = tc[CTR_EXACT:], sorted(got[CTR_EXACT:])
        merged += len(rest)
        at = {}
        for t, v in rest:
            at.setdefault(t, set()).add(v)
        for t, v in out_rest:
            if v not in at.get(t, ()):
                fail("device %d: written point (%d ns, %d) is no state of the run" % (dev, t, v))
        w, first = CTR_BUCKET0_NS, rest[0][0]
        while (rest[-1][0] - first) // w >= CTR_BUCKETS:
            w *= 2
        buckets, wrote = {}, {}
        for t, v in rest:
            buckets.setdefault((t - first) // w, []).append(v)
        for t, v in out_rest:
            wrote.setdefault((t - first) // w, []).append(v)
        if sorted(buckets) != sorted(wrote):
            fail("device %d: buckets with changes %d, written %d" % (dev, len(buckets), len(wrote)))
        for k, vs in buckets.items():
            if (min(vs), max(vs)) != (min(wrote[k]), max(wrote[k])):
                fail("device %d bucket %d: lowest/highest %s, written %s" %
                     (dev, k, (min(vs), max(vs)), (min(wrote[k]), max(wrote[k]))))
        print("device %d: %d changes -> %d counter events (buckets of %d ns)" %
              (dev, len(tc), len(got), w))
    if doc["otherData"].get("counter_changes_merged", 0) < merged:
        fail("otherData.counter_changes_merged %r, %d merged on the memory tracks" %
             (doc["otherData"].get("counter_changes_merged"), merged))
    if "merged into time buckets" not in p.stderr.decode():
        fail("no note about merged counters: %r" % p.stderr.decode())


def mode_empty():
    p = convert(["empty.trace"], "--chrome", out("c.json"), "--speedscope", out("s.json"))
    check_chrome(load(out("c.json")))
    s = load(out("s.json"))
    check_speedscope(s)
    if len(s["profiles"]) != 1:
        fail("empty trace: %d profiles" % len(s["profiles"]))


def mode_stdout():
    p = convert(["basic.trace"], "--chrome", "-", "--speedscope", out("s.json"))
    doc = json.loads(p.stdout.decode("utf-8"))
    check_chrome(doc, {4242: report_json("basic.trace")})
    check_speedscope(load(out("s.json")))


def max_rss_kib(args):
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execv(args[0], args)
    _, status, ru = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        fail("%s failed" % " ".join(args))
    return ru.ru_maxrss


def mode_memory():
    small, large = out("small.trace"), out("large.trace")
    run([GEN, "convert", "big", "200000", small])
    run([GEN, "convert", "big", "2000000", large])
    env = os.environ.get("ASAN_OPTIONS", "")
    os.environ["ASAN_OPTIONS"] = (env + ":" if env else "") + "quarantine_size_mb=1"
    rs = max_rss_kib([GMP, "convert", small, "--speedscope", out("s1.json"), "--chrome",
                      out("c1.json"), "--chrome-torch-compat", "--max-spans", "0"])
    rl = max_rss_kib([GMP, "convert", large, "--speedscope", out("s2.json"), "--chrome",
                      out("c2.json"), "--chrome-torch-compat", "--max-spans", "0"])
    print("peak RSS: %d KiB for 200k events, %d KiB for 2M events" % (rs, rl))
    if rl > rs * 1.25 + 8192:
        fail("memory grows with the trace: %d KiB -> %d KiB for 10x the events" % (rs, rl))
    check_speedscope(load(out("s2.json")))


def main():
    global GMP, GEN, DATA, WORK, GOLDEN
    mode, GMP, GEN, DATA, WORK = sys.argv[1:6]
    GMP = gmp_testlib.gpumemprof(GMP)
    GMP, GEN, DATA, WORK = (os.path.abspath(x) for x in (GMP, GEN, DATA, WORK))
    GOLDEN = os.path.join(os.path.dirname(DATA), "golden")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    if REGEN and mode.startswith("golden"):
        regen_traces()
    fn = globals().get("mode_" + mode)
    if not fn:
        fail("unknown mode " + mode)
    fn()
    print("ok:", mode)


if __name__ == "__main__":
    main()
