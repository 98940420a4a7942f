"""The report's out-of-memory verdict from the what-if replay (docs/report.md, "Out of memory,
why"; docs/whatif.md).

1. A constructed fragmentation OOM: a snapshot written here with Python's pickle module (and read
   back with it, to check what it holds) of a run under PyTorch's defaults. Worked by hand from
   CUDACachingAllocator's rules (docs/whatif.md's table; MiB throughout):
     A = 1000 is allocated (a 1000 segment: above 10 MiB, rounded to 2 MiB) and freed (cached);
     B = 600 takes the cached 1000 block, split (the rest, 400, is over 1 MiB);
     C = 600 finds no block (400 free) and takes a new 600 segment: reserved 1600;
     D = 500 finds no block (400 free) and needs a new 500 segment: 2100 > the 2000 PyTorch could
       hold (reserved 1600 + the 400 the driver reported free at the OOM), no whole cached segment
       to release: out of memory.
   Under max_split_size_mb:128 (and :512) the cached 1000 block is oversize for B (600 is at or
   above the limit and the block is more than 20 MiB larger): B takes a new 600 segment (1600);
   C's new segment exceeds 2000, so the oversize cached segment is released (600) and C fits
   (1200); D's new 500 segment makes 1700 <= 2000: it fits, peak reserved 1700 MiB.
   Under expandable_segments:True A maps 1000 in one segment (20 MiB pages), B splits A's freed
   block (400 free at the segment's end), C takes those 400 and maps 200 more (1200 mapped), D maps
   500 more: 1700 <= 2000, peak reserved 1700 MiB too. The standard set lists expandable segments
   first, so the verdict is fragmentation, expandable_segments:True (the first of the settings
   with the lowest peak reserved), 1700 MiB within 2000 MiB; smallest card: 16 GB.
2. qwen3-expandable-3gpu-oom.pickle (tests/data): its device 1's OOM fits under no setting: a
   capacity verdict, with what the cheapest setting would need without the limit (more than the
   capacity) and a card larger than the device.
3. The same OOM in a snapshot over 8 MiB, whose import `report` streams (read once): the what-if
   imports it again and gives the same verdict.
4. The constructed OOM with more free memory at the OOM (the model's defaults fit: not
   reproduced) and with none reported (no capacity: no verdict); hostile recorded settings.
5. A snapshot without an OOM: no what-if anywhere in the report (its cost is paid only for OOMs).
Each checked in the JSON report; the text, Markdown and HTML reports show the what-if table, and
`convert --report/--json` write the same.

usage: check_whatif_oom.py GPUMEMPROF SNAPSHOT_DIR WORKDIR"""
import json
import os
import pickle
import subprocess
import sys

EXE, DIR, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
MiB = 1 << 20
fails = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails.append(what)


def entry(action, addr, size, t):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "frames": [{"filename": "train.py", "line": 10 + t % 100, "name": "step"}]}


def frag_snapshot(path):
    s1, s2 = 0x7f0000000000, 0x7f0100000000
    t0 = 1_700_000_000_000_000
    trace = [
        entry("segment_alloc", s1, 1000 * MiB, t0 + 1),
        entry("alloc", s1, 1000 * MiB, t0 + 2),
        entry("free_requested", s1, 1000 * MiB, t0 + 3),
        entry("free_completed", s1, 1000 * MiB, t0 + 4),
        entry("alloc", s1, 600 * MiB, t0 + 5),
        entry("segment_alloc", s2, 600 * MiB, t0 + 6),
        entry("alloc", s2, 600 * MiB, t0 + 7),
        {"action": "oom", "size": 500 * MiB, "device_free": 400 * MiB, "stream": 0,
         "time_us": t0 + 8, "frames": [{"filename": "train.py", "line": 42, "name": "step"}]},
    ]
    blk = {"frames": [], "requested_size": 0}
    segs = [
        {"device": 0, "address": s1, "total_size": 1000 * MiB, "allocated_size": 600 * MiB,
         "active_size": 600 * MiB, "requested_size": 600 * MiB, "stream": 0,
         "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
         "frames": [],
         "blocks": [dict(blk, address=s1, size=600 * MiB, requested_size=600 * MiB,
                         state="active_allocated"),
                    dict(blk, address=s1 + 600 * MiB, size=400 * MiB, state="inactive")]},
        {"device": 0, "address": s2, "total_size": 600 * MiB, "allocated_size": 600 * MiB,
         "active_size": 600 * MiB, "requested_size": 600 * MiB, "stream": 0,
         "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
         "frames": [],
         "blocks": [dict(blk, address=s2, size=600 * MiB, requested_size=600 * MiB,
                         state="active_allocated")]},
    ]
    snap = {"segments": segs, "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False},
            "external_annotations": []}
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    with open(path, "rb") as f:
        back = pickle.load(f)
    ooms = [e for e in back["device_traces"][0] if e["action"] == "oom"]
    check(len(ooms) == 1 and ooms[0]["size"] == 500 * MiB and
          sum(s["total_size"] for s in back["segments"]) + ooms[0]["device_free"] == 2000 * MiB,
          "constructed snapshot (read back with pickle): one 500 MiB OOM, 1600 MiB reserved + "
          "400 MiB free = 2000 MiB")


def run(*args):
    p = subprocess.run([EXE, *args], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "gpumemprof %s: exit 0 (%s)" % (" ".join(args[:2]), p.stderr[-300:]))
    return p.stdout


os.makedirs(WORK, exist_ok=True)
frag = os.path.join(WORK, "frag-oom.pickle")
frag_snapshot(frag)
doc = json.loads(run("report", "--format", "json", frag))
o = doc["analysis"]["ooms"][0]
check(o.get("whatif_verdict") == "fragmentation", "frag: what-if verdict fragmentation (%r)"
      % o.get("whatif_verdict"))
check(o.get("whatif_setting") == "expandable_segments:True" and
      o.get("whatif_peak_reserved_bytes") == 1700 * MiB and
      o.get("whatif_capacity_bytes") == 2000 * MiB,
      "frag: expandable_segments:True avoids it, peak reserved 1700 MiB within 2000 MiB (%r, %r, %r)"
      % (o.get("whatif_setting"), o.get("whatif_peak_reserved_bytes"),
         o.get("whatif_capacity_bytes")))
rows = {r["alloc_conf"]: r for r in o.get("whatif", [])}
own = rows.get("recorded (defaults)", {})
check(own.get("fits") is False and own.get("first_failure_bytes") == 500 * MiB and
      own.get("peak_reserved_bytes") == 1600 * MiB,
      "frag: the recorded settings fail on the 500 MiB request at 1600 MiB reserved, as PyTorch "
      "did")
check(rows.get("max_split_size_mb:512", {}).get("fits") is True and
      rows.get("roundup_power2_divisions:4", {}).get("fits") is False,
      "frag: max_split_size_mb:512 fits too, roundup_power2_divisions:4 does not")
check(o.get("whatif_smallest_card") == "16 GB", "frag: smallest card 16 GB")
f0 = doc["findings"][0]
check(f0["kind"] == "oom" and "what if: fragmentation: expandable_segments:True would have avoided "
      "it (peak reserved 1.66 GiB within 1.95 GiB" in f0["text"],
      "frag: the finding says which setting avoids it (%s)" % f0["text"])
txt = run("report", frag)
check("what if                        fragmentation: expandable_segments:True" in txt and
      "What if: the tensors replayed under each allocator setting" in txt,
      "frag: text report: the verdict and the what-if table")
md = run("report", "--format", "markdown", frag)
check("| max\\_split\\_size\\_mb:128 | 1.66 GiB |" in md, "frag: Markdown report: the table's row")
html = run("report", "--format", "html", "--static", frag)
check("What if: the tensors replayed under each allocator setting" in html and
      "expandable_segments:True" in html, "frag: HTML report: the what-if table")
w = json.loads(run("whatif", "--format", "json", frag))
r = w["devices"][0]["recommendation"]
check(r["alloc_conf"] == "expandable_segments:True" and r["peak_reserved_bytes"] == 1700 * MiB and
      r["fits_capacity"] is True and r["smallest_card"]["class"] == "16 GB",
      "frag: whatif recommends the same setting and card")

# convert --report and --json write what `report` writes, the what-if included
crep, cjson = os.path.join(WORK, "conv.txt"), os.path.join(WORK, "conv.json")
run("convert", frag, "--report", crep, "--json", cjson, "--no-progress")
with open(crep) as f1, open(cjson) as f2:
    check(f1.read() == txt and json.load(f2) == json.loads(run("report", "--format", "json",
                                                                  frag)),
          "frag: convert --report/--json are the report's, with the what-if")

# the same OOM in a snapshot over 8 MiB (device 1 churns one 2 MiB tensor): `report` streams
# such a snapshot's import (read once), so its what-if imports the file again (cli_whatif.c)
big = os.path.join(WORK, "frag-oom-big.pickle")
with open(frag, "rb") as f:
    snap = pickle.load(f)
pad, base, t0 = [], 0x7e0000000000, 1_600_000_000_000_000
pad.append({"action": "segment_alloc", "addr": base, "size": 20 * MiB, "stream": 0,
            "time_us": t0, "frames": []})
for i in range(90000):
    fr = [{"filename": "pad_%d.py" % (i % 50), "line": i % 1000, "name": "padding_step"}]
    for k, a in ((1, "alloc"), (2, "free_completed")):
        pad.append({"action": a, "addr": base, "size": 2 * MiB, "stream": 0,
                    "time_us": t0 + 2 * i + k, "frames": fr})
snap["device_traces"].append(pad)
snap["segments"].append({"device": 1, "address": base, "total_size": 20 * MiB,
                         "allocated_size": 0, "active_size": 0, "requested_size": 0, "stream": 0,
                         "segment_type": "large", "segment_pool_id": (0, 0),
                         "is_expandable": False, "frames": [],
                         "blocks": [{"address": base, "size": 20 * MiB, "requested_size": 0,
                                     "state": "inactive", "frames": []}]})
with open(big, "wb") as f:
    pickle.dump(snap, f, protocol=4)
check(os.path.getsize(big) > 8 * MiB, "big: the snapshot is over 8 MiB (a streamed import)")
doc = json.loads(run("report", "--format", "json", big))
o = doc["analysis"]["ooms"][0]
check(o.get("whatif_verdict") == "fragmentation" and
      o.get("whatif_setting") == "expandable_segments:True" and
      o.get("whatif_peak_reserved_bytes") == 1700 * MiB,
      "big (streamed): the same verdict, setting and peak (%r, %r, %r)" % (
          o.get("whatif_verdict"), o.get("whatif_setting"), o.get("whatif_peak_reserved_bytes")))

# the same recording with more free memory at the OOM (600 MiB: 2200 MiB in all): the model's
# defaults fit (1600 + a 500 MiB segment = 2100), so the model does not reproduce the OOM and says
# so; without the driver's free memory there is no capacity and no verdict
for free, verdict in ((600 * MiB, "not_reproduced"), (0, None)):
    other = os.path.join(WORK, "frag-free-%d.pickle" % free)
    with open(frag, "rb") as f:
        snap = pickle.load(f)
    for e in snap["device_traces"][0]:
        if e["action"] == "oom":
            e["device_free"] = free
    with open(other, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    o = json.loads(run("report", "--format", "json", other))["analysis"]["ooms"][0]
    check(o.get("whatif_verdict") == verdict and
          o.get("whatif_capacity_bytes") == (2200 * MiB if free else None),
          "device_free %d MiB: verdict %r, capacity %r (%r, %r)" % (
              free // MiB, verdict, 2200 * MiB if free else None, o.get("whatif_verdict"),
              o.get("whatif_capacity_bytes")))

# a hostile PYTORCH_CUDA_ALLOC_CONF (a terminal escape): neither shown nor replayed
hostile = os.path.join(WORK, "hostile.pickle")
with open(frag, "rb") as f:
    snap = pickle.load(f)
snap["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:64\x1b[31m"
with open(hostile, "wb") as f:
    pickle.dump(snap, f, protocol=4)
out = run("whatif", hostile) + run("report", hostile)
check("\x1b" not in out and "  defaults (PyTorch's)  " in out,
      "hostile settings: no escape in the outputs, PyTorch's defaults replayed instead")

qwen = os.path.join(DIR, "qwen3-expandable-3gpu-oom.pickle")
with open(qwen, "rb") as f:
    snap = pickle.load(f)
oom = [(d, e) for d, tr in enumerate(snap["device_traces"]) for e in tr if e["action"] == "oom"]
doc = json.loads(run("report", "--format", "json", qwen))
o = doc["analysis"]["ooms"][0]
check(len(oom) == 1 and o["device"] == oom[0][0] == 1 and o["requested_bytes"] == oom[0][1]["size"],
      "qwen3: the OOM of device 1 (pickle: device %d, %d B)" % (oom[0][0], oom[0][1]["size"]))
check(o.get("whatif_verdict") == "capacity", "qwen3: what-if verdict capacity (%r)"
      % o.get("whatif_verdict"))
modelled = [x for x in o.get("whatif", []) if x["modelled"]]
check(len(modelled) >= 3 and all(x["fits"] is False for x in modelled),
      "qwen3: no modelled setting fits")
check(o.get("whatif_peak_reserved_bytes", 0) > o.get("whatif_capacity_bytes", 1) and
      o.get("whatif_smallest_card") not in (None, "16 GB", "24 GB", "40 GB", "48 GB", "80 GB"),
      "qwen3: without the limit the cheapest setting needs more than the capacity: a card above "
      "80 GB (%r)" % o.get("whatif_smallest_card"))
check("what if: capacity: no allocator setting fits" in doc["findings"][0]["text"],
      "qwen3: the finding says no setting fits")

small = os.path.join(DIR, "small-step.pickle")


def keys(v):
    if isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from keys(x)
    elif isinstance(v, list):
        for x in v:
            yield from keys(x)


doc = json.loads(run("report", "--format", "json", small))
check(not [k for k in keys(doc) if k.startswith("whatif")] and
      not any("what if" in f["text"] for f in doc["findings"]),
      "small-step (no OOM): no what-if in the report")
sys.exit(1 if fails else 0)
