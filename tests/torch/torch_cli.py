#!/usr/bin/env python3
"""`gpumemprof import` of PyTorch snapshots, cases the real files lack (stdlib only).

  torch_cli.py synthetic GPUMEMPROF DATA_DIR WORK_DIR
      snapshots written here with pickle (protocols 2 and 4): the legacy format, no time_us,
      several devices, memory freed in the window that the window never allocated, segment_free,
      expandable segments, oom, free_requested and unknown actions; each checked against the
      independent replay of torch_replay.py. A snapshot that contradicts itself imports with a
      warning notice.
  torch_cli.py generic GPUMEMPROF DATA_DIR WORK_DIR   (GEN: tests/tools/gen_traces)
      a generated trace (cudaMalloc, stream-ordered pools with POOL records, VMM, host memory,
      OOM) converted with --pytorch-snapshot and imported again: the same peaks per device,
      and the snapshot's replay here agrees.
  torch_cli.py ranges GPUMEMPROF DATA_DIR WORK_DIR
      record_function annotations (nested, same name nested, per device, an END without its
      START, items of another shape), user_metadata and compile_context: each allocation's
      range, the per-range table, the OOM's range, checked by hand and by torch_oracle.py; every
      export has them, a repeated annotation is an iteration; a private pool's blocks (a segment's
      segment_pool_id) are labelled by their API.
  torch_cli.py cli GPUMEMPROF DATA_DIR WORK_DIR
      bad inputs: a pickle with a global (refused, nothing executed), a pickle that is not a
      snapshot, a cut snapshot, an existing output without --force; --help names the format.
"""
import collections
import json
import os
import stat
import threading
import pickle
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_replay  # noqa: E402

GiB, MiB = 1 << 30, 1 << 20
FR = [{"name": "forward", "filename": "/src/model.py", "line": 42},
      {"name": "<module>", "filename": "/src/train.py", "line": 7}]


def entry(action, addr, size, t=None, **kw):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": FR}
    if t is not None:
        e["time_us"] = t
    e.update(kw)
    return e


def seg(device, addr, total, blocks, expandable=False):
    return {"device": device, "address": addr, "total_size": total, "allocated_size": 0,
            "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": expandable, "frames": [],
            "blocks": blocks}


def blk(addr, size, state, req=None):
    return {"address": addr, "size": size, "requested_size": size if req is None else req,
            "state": state, "frames": FR}


def snapshots():
    A, B = 0x7f0000000000, 0x7f1000000000
    # 1. legacy: a bare list of segments, blocks with history and no address
    legacy = [
        {"device": 0, "address": A, "total_size": 20 * MiB, "allocated_size": 0,
         "active_size": 0, "stream": 0, "segment_type": "large",
         "blocks": [{"size": 4 * MiB, "state": "active_allocated",
                     "history": [{"addr": A, "real_size": 3 * MiB, "frames": FR}]},
                    {"size": 16 * MiB, "state": "inactive", "history": []}]},
        {"device": 1, "address": B, "total_size": 2 * MiB, "allocated_size": 0,
         "active_size": 0, "stream": 0, "segment_type": "small",
         "blocks": [{"size": 512, "state": "active_allocated"},
                    {"size": 2 * MiB - 512, "state": "inactive"}]},
    ]
    # 2. no time_us, two devices (0 and 2), memory from before the window on both
    tr0 = [
        entry("free_requested", A, 1 * MiB),
        entry("free_completed", A, 1 * MiB),          # allocated before the window
        entry("segment_free", A, 20 * MiB),           # a segment from before the window
        entry("segment_alloc", A + 64 * MiB, 40 * MiB),
        entry("alloc", A + 64 * MiB, 30 * MiB),
        entry("alloc", A + 94 * MiB, 10 * MiB),
        entry("snapshot", 0, 0),
        entry("free_requested", A + 94 * MiB, 10 * MiB),
        entry("free_completed", A + 94 * MiB, 10 * MiB),
        entry("something_new", 0, 0),
        {"action": "oom", "size": 3 * GiB, "device_free": 5 * MiB, "stream": 0, "frames": FR},
    ]
    tr2 = [entry("segment_map", B, 20 * MiB), entry("alloc", B, 6 * MiB),
           entry("segment_map", B + 20 * MiB, 20 * MiB), entry("alloc", B + 20 * MiB, 18 * MiB),
           entry("free_completed", B + 20 * MiB, 18 * MiB),
           entry("segment_unmap", B + 20 * MiB, 20 * MiB)]
    notime = {
        "segments": [
            seg(0, A + 32 * MiB, 2 * MiB, [blk(A + 32 * MiB, 2 * MiB, "active_allocated",
                                               1500000)]),          # untouched by the window
            seg(0, A + 64 * MiB, 40 * MiB, [blk(A + 64 * MiB, 30 * MiB, "active_allocated"),
                                            blk(A + 94 * MiB, 10 * MiB, "inactive")]),
            seg(2, B, 20 * MiB, [blk(B, 6 * MiB, "active_pending_free"),
                                 blk(B + 6 * MiB, 14 * MiB, "inactive")], expandable=True),
        ],
        "device_traces": [tr0, [], tr2],
    }
    # 3. time_us, a segment allocated and freed in the window, times out of order
    tr = [entry("segment_alloc", A, 2 * MiB, 1000), entry("alloc", A, 512, 1001),
          entry("alloc", A + 512, 1024, 999), entry("free_completed", A, 512, 1005),
          entry("free_completed", A + 512, 1024, 1006), entry("segment_free", A, 2 * MiB, 1007),
          entry("segment_alloc", A, 4 * MiB, 1010), entry("alloc", A, 3 * MiB, 1011)]
    timed = {"segments": [seg(0, A, 4 * MiB, [blk(A, 3 * MiB, "active_allocated"),
                                              blk(A + 3 * MiB, 1 * MiB, "inactive")])],
             "device_traces": [tr]}
    # 4. an empty snapshot
    empty = {"segments": [], "device_traces": []}
    # 5. PyTorch's ring buffer of trace entries overflowed (max_entries 4): the window starts
    # with the free of a block allocated before it, in a segment allocated before it
    ring = [entry("free_requested", A, 1 * MiB, 2000), entry("free_completed", A, 1 * MiB, 2001),
            entry("alloc", A, 2 * MiB, 2002), entry("alloc", A + 2 * MiB, 1 * MiB, 2003)]
    overflowed = {"segments": [seg(0, A, 8 * MiB, [blk(A, 2 * MiB, "active_allocated"),
                                                   blk(A + 2 * MiB, 1 * MiB, "active_allocated"),
                                                   blk(A + 3 * MiB, 5 * MiB, "inactive")])],
                  "device_traces": [ring],
                  "allocator_settings": {"expandable_segments": False,
                                         "trace_alloc_max_entries": 4,
                                         "trace_alloc_overflowed": True}}
    # the same, not overflowed; and the flags given per device
    whole = dict(overflowed, allocator_settings={"trace_alloc_max_entries": 4,
                                                 "trace_alloc_overflowed": False})
    per_device = dict(overflowed, device_traces=[[], ring],
                      segments=[dict(overflowed["segments"][0], device=1)],
                      allocator_settings={"trace_alloc_max_entries": [4, 4],
                                          "trace_alloc_overflowed": [False, True]})
    return {"legacy": (legacy, 4), "notime": (notime, 2), "timed": (timed, 4),
            "empty": (empty, 4), "overflowed": (overflowed, 4), "whole": (whole, 4),
            "per_device": (per_device, 4)}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def synthetic(gmp, work):
    bad = 0
    for name, (obj, proto) in snapshots().items():
        path = os.path.join(work, name + ".pickle")
        with open(path, "wb") as f:
            pickle.dump(obj, f, protocol=proto)
        rc = torch_replay.check(gmp, path, work)
        bad += rc != 0
    # the trace has the frames as a Python stack, the OOM and the notice
    rep = json.loads(run([gmp, "report", os.path.join(work, "notime.pickle.zst"), "--format",
                          "json"]).stdout)
    ooms = rep["ooms"]
    if len(ooms) != 1 or ooms[0]["requested_bytes"] != 3 * GiB or ooms[0]["free_bytes"] != 5 * MiB \
            or ooms[0]["stack"][0] != {"function": "forward", "file": "/src/model.py", "line": 42}:
        print(f"unexpected OOMs: {ooms}", file=sys.stderr)
        bad += 1
    if not any("imported from a PyTorch memory snapshot" in n["message"] for n in rep["notices"]):
        print("no import notice", file=sys.stderr)
        bad += 1
    if rep["anomalies"]["unknown_frees"] or rep["anomalies"]["replaced_allocations"]:
        print(f"anomalies: {rep['anomalies']}", file=sys.stderr)
        bad += 1
    # an overflowed ring buffer: the import says so, and the report's notices say what is missing
    for name, want in (("overflowed", "incomplete: PyTorch's ring buffer of trace entries "
                        "(trace_alloc_max_entries 4) overflowed"),
                       ("per_device", "ring buffer of trace entries of device 1 "
                        "(trace_alloc_max_entries 4) overflowed"),
                       ("whole", None)):
        path = os.path.join(work, name + ".pickle")
        r = run([gmp, "import", path, "-o", os.path.join(work, name + ".again.zst"), "--force"])
        said = "incomplete: PyTorch's trace ring buffer overflowed" in r.stderr
        rep = json.loads(run([gmp, "report", path + ".zst", "--format", "json"]).stdout)
        notes = [n for n in rep["notices"] if "trace_alloc_overflowed" in n["message"]]
        # the completeness line of report (the snapshot read directly) and of info says so too
        direct = json.loads(run([gmp, "report", path, "--format", "json"]).stdout)
        info = run([gmp, "info", path]).stdout
        flagged = (not direct["complete"] and direct["lost_events"] >= 1 and
                   "incomplete: PyTorch's ring buffer of trace entries overflowed" in info)
        if flagged != bool(want):
            print(f"{name}: completeness {direct['completeness']!r}; info {info!r}",
                  file=sys.stderr)
            bad += 1
        ok = r.returncode == 0 and (
            (said and len(notes) == 1 and notes[0]["severity"] == "warning" and
             want in notes[0]["message"] and "before the first recorded entry" in
             notes[0]["message"]) if want else (not said and not notes))
        if not ok:
            print(f"{name}: rc {r.returncode} {r.stderr.strip()} {notes}", file=sys.stderr)
            bad += 1
        else:
            print(f"ok: {name}: {notes[0]['message'] if notes else 'no overflow notice'}")
    # a snapshot whose trace frees more than its final state explains: imported, with a warning
    A = 0x7f0000000000
    contra = {"segments": [], "device_traces": [[entry("alloc", A, 100, 5),
                                                 entry("segment_alloc", A, 1 * MiB, 4)]]}
    path = os.path.join(work, "contradiction.pickle")
    with open(path, "wb") as f:
        pickle.dump(contra, f, protocol=4)
    out = os.path.join(work, "contradiction.zst")
    r = run([gmp, "import", path, "-o", out, "--force"])
    rep = json.loads(run([gmp, "report", out, "--format", "json"]).stdout) if r.returncode == 0 \
        else {"notices": []}
    if r.returncode != 0 or not any(n["severity"] == "warning" for n in rep["notices"]):
        print(f"contradiction: rc {r.returncode} {r.stderr} {rep['notices']}", file=sys.stderr)
        bad += 1
    # the same entry dict twice, a batch of 1,000 apart: the pickler fetches it from the memo
    # after the first APPENDS handed it over, which the one-pass read of small snapshots cannot
    # follow (formats/import: then read again in two passes): every entry imported all the same
    first = entry("alloc", A + 64 * MiB, 512, 1)
    ents = [first] + [entry("alloc", A + i * 4096, 512, 2 + i) for i in range(1000)] + [first]
    path = os.path.join(work, "refetch.pickle")
    with open(path, "wb") as f:
        pickle.dump({"segments": [], "device_traces": [ents]}, f, protocol=4)
    r = run([gmp, "import", path, "-o", os.path.join(work, "refetch.zst"), "--force"])
    direct = run([gmp, "report", path, "--format", "json"])
    if r.returncode != 0 or ": 1002 trace entries (1002 allocations" not in r.stderr or \
            direct.returncode != 0:
        print(f"refetch: rc {r.returncode} {r.stderr.strip()} report rc {direct.returncode}",
              file=sys.stderr)
        bad += 1
    return 1 if bad else 0


def ranges(gmp, work):
    """record_function annotations, user_metadata and compile_context become ranges."""
    import torch_oracle
    A = 0x7f0000000000
    T = 1757253255000000  # time_us: microseconds since the epoch, as PyTorch's
    k = [0]

    def alloc(t, dev_off=0, **kw):  # every allocation a size of its own (found again by it)
        k[0] += 1
        return entry("alloc", A + dev_off + k[0] * MiB, k[0] * 4096, T + t, **kw)

    def ann(name, stage, t, device=0):
        return {"name": name, "stage": stage, "device": device, "time_us": T + t}

    d0 = [entry("segment_alloc", A, 64 * MiB, T + 10),
          alloc(150), alloc(250), alloc(300), alloc(350), alloc(450),  # 1-5
          alloc(515),                                                  # 6: a/a
          alloc(600, user_metadata="train/model/model.layers.3"),      # 7
          alloc(610, user_metadata="train/model/model.layers.3", compile_context="N/A"),  # 8
          alloc(620, user_metadata=""),                                # 9: step
          alloc(630, compile_context="Torch-Compiled Region: 0/1"),    # 10
          alloc(640, compile_context="N/A"),                           # 11: step
          {"action": "oom", "size": 3 * GiB, "device_free": MiB, "stream": 0, "frames": FR,
           "time_us": T + 650, "user_metadata": "train/model/model.layers.4"}]
    d1 = [entry("segment_alloc", A + GiB, 64 * MiB, T + 10), alloc(150, GiB), alloc(250, GiB)]  # 12, 13
    annotations = [
        ann("ghost", "END", 50),                                   # no START: ignored
        ann("outer", "START", 100), ann("inner", "START", 200), ann("inner", "END", 300),
        ann("outer", "END", 400),
        ann("a", "START", 500), ann("a", "START", 510), ann("a", "END", 520), ann("a", "END", 530),
        ann("step", "START", 590), ann("step", "END", 700),
        ann("d1", "START", 200, device=1), ann("d1", "END", 260, device=1),
        # of another shape: ignored, never an error
        "not a dict", {"name": 7, "stage": "START", "device": 0, "time_us": 1},
        ann("x", "MIDDLE", 1), ann("x", "START", 1, device=-1), ann("x", "START", 1, device=5000),
        {"name": "x", "stage": "START", "device": 0, "time_us": "1"}]
    blocks = [blk(A + (i + 1) * MiB, (i + 1) * 4096, "active_allocated") for i in range(11)]
    snap = {"segments": [seg(0, A, 64 * MiB, blocks),
                         seg(1, A + GiB, 64 * MiB,
                             [blk(A + GiB + (i + 1) * MiB, (i + 1) * 4096, "active_allocated")
                              for i in range(11, 13)])],
            "device_traces": [d0, d1], "external_annotations": annotations}
    path = os.path.join(work, "ranges.pickle")
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    bad = torch_oracle.check(gmp, path, work)
    rep = json.loads(run([gmp, "report", path, "--format", "json", "--top", "50"]).stdout)
    got = {(a["device"], a["bytes"] // 4096): a["range"] for a in rep["largest_allocations"]}
    want = {(0, 1): "outer", (0, 2): "outer/inner", (0, 3): "outer/inner", (0, 4): "outer",
            (0, 5): None, (0, 6): "a/a", (0, 7): "train/model/model.layers.3",
            (0, 8): "train/model/model.layers.3", (0, 9): "step",
            (0, 10): "step/Torch-Compiled Region: 0/1", (0, 11): "step", (1, 12): None,
            (1, 13): "d1"}
    for key, r in sorted(want.items()):
        if got.get(key, "absent") != r:
            print(f"FAILED: allocation {key}: range {got.get(key, 'absent')!r}, want {r!r}")
            bad += 1
    table = {(r["device"], r["path"]): r["allocations"] for r in rep["ranges"]}
    want_table = {(0, "outer"): 4, (0, "outer/inner"): 2, (0, "a"): 1, (0, "a/a"): 1,
                  (0, "step"): 5, (0, "train/model/model.layers.3"): 2,
                  (0, "step/Torch-Compiled Region: 0/1"): 1, (1, "d1"): 1}
    for key, n in sorted(want_table.items()):
        if table.get(key) != n:
            print(f"FAILED: range {key}: {table.get(key)} allocations, want {n}")
            bad += 1
    if [o.get("range") for o in rep["ooms"]] != ["train/model/model.layers.4"]:
        print(f"FAILED: the OOM's range: {rep['ooms']}")
        bad += 1
    if any("ghost" in r["path"] or r["path"] == "x" for r in rep["ranges"]):
        print(f"FAILED: an ignored annotation became a range: {table}")
        bad += 1
    # convert --pytorch-snapshot writes the annotations, user_metadata and compile_context back:
    # read again, the same ranges
    rt = os.path.join(work, "ranges.rt.pickle")
    r = run([gmp, "convert", path, "--pytorch-snapshot", rt])
    again = json.loads(run([gmp, "report", rt, "--format", "json"]).stdout) \
        if r.returncode == 0 else {"ranges": []}
    back = {(x["device"], x["path"]): x["allocations"] for x in again["ranges"]}
    if back != want_table:
        print(f"FAILED: the round trip's ranges: {back}, want {want_table}")
        bad += 1
    # a segment of a CUDA graph's private pool (segment_pool_id (1, 0)): its blocks' API says so
    P = A + 4 * GiB
    pool_snap = {"segments": [dict(seg(0, P, 8 * MiB, [blk(P, 3 * MiB, "active_allocated")]),
                                   segment_pool_id=(1, 0)),
                              seg(0, A, 8 * MiB, [blk(A, 5 * MiB, "active_allocated")])],
                 "device_traces": [[entry("segment_alloc", P, 8 * MiB, T + 1),
                                    entry("alloc", P, 3 * MiB, T + 2),
                                    entry("segment_alloc", A, 8 * MiB, T + 3),
                                    entry("alloc", A, 5 * MiB, T + 4)]]}
    with open(os.path.join(work, "pool.pickle"), "wb") as f:
        pickle.dump(pool_snap, f, protocol=4)
    rep = json.loads(run([gmp, "report", os.path.join(work, "pool.pickle"), "--format",
                          "json"]).stdout)
    apis = sorted((a["bytes"] // MiB, a["api"]) for a in rep["largest_allocations"])
    if apis != [(3, "CUDACachingAllocator.malloc (private pool 1,0)"),
                (5, "CUDACachingAllocator.malloc")]:
        print(f"FAILED: the private pool's blocks: {apis}")
        bad += 1
    # every export has the ranges
    outs = {"--speedscope": "s.json", "--chrome": "c.json", "--html-view": "v.html",
            "--pprof": "p.pb.gz"}
    r = run([gmp, "convert", path] + [a for o, f in outs.items()
                                      for a in (o, os.path.join(work, f))])
    for opt, f in outs.items():
        data = open(os.path.join(work, f), "rb").read()
        if f.endswith(".gz"):
            import gzip
            data = gzip.decompress(data)
        if r.returncode != 0 or b"inner" not in data or b"model.layers.3" not in data:
            print(f"FAILED: convert {opt}: no ranges ({r.returncode} {r.stderr.strip()})")
            bad += 1
    # a range repeated is what an iteration is (growth over iterations)
    it = [entry("segment_alloc", A, 64 * MiB, T + 10)]
    its = []
    for i in range(6):
        its += [ann("train_step", "START", 1000 + 100 * i), ann("train_step", "END", 1050 + 100 * i)]
        it.append(entry("alloc", A + i * MiB, MiB, T + 1010 + 100 * i))  # kept: a leak
    with open(os.path.join(work, "iters.pickle"), "wb") as f:
        pickle.dump({"segments": [seg(0, A, 64 * MiB, [blk(A + i * MiB, MiB, "active_allocated")
                                                        for i in range(6)])],
                     "device_traces": [it], "external_annotations": its}, f, protocol=4)
    rep = json.loads(run([gmp, "report", os.path.join(work, "iters.pickle"), "--format",
                          "json"]).stdout)
    iters = rep["analysis"]["iterations"]
    if iters.get("range") != "train_step" or iters.get("count") != 6:
        print(f"FAILED: iterations: {iters}")
        bad += 1
    r = run([gmp, "import", path, "-o", os.path.join(work, "ranges.zst"), "--force"])
    if r.returncode != 0 or ("ranges: 13 record_function annotations (7 ignored), 3 allocations "
                             "with a user_metadata range path, 1 inside compiled regions"
                             not in r.stderr):
        print(f"FAILED: import's summary of the ranges: {r.returncode} {r.stderr.strip()}")
        bad += 1
    print("ranges: " + ("ok" if not bad else "FAILED"))
    return 1 if bad else 0


def expect_fail(gmp, args, what, out=None):
    r = run([gmp, "import"] + args)
    ok = r.returncode == 1 and what in r.stderr and (out is None or not os.path.exists(out))
    print(f"{'ok' if ok else 'FAILED'}: import {' '.join(os.path.basename(a) for a in args)}: "
          f"{r.stderr.strip()}")
    return 0 if ok else 1


def cli(gmp, work):
    bad = 0
    evil = os.path.join(work, "evil.pickle")
    with open(evil, "wb") as f:
        # unpickling this with pickle.load would call os.system
        f.write(b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system"
                b"\x94\x93\x94\x8c\x05touch\x94\x85\x94R\x94.")
    out = os.path.join(work, "evil.zst")
    bad += expect_fail(gmp, [evil, "-o", out], "STACK_GLOBAL", out)
    od = os.path.join(work, "ordered.pickle")
    with open(od, "wb") as f:
        pickle.dump(collections.OrderedDict(a=1), f, protocol=2)
    bad += expect_fail(gmp, [od, "-o", out], "refused", out)
    other = os.path.join(work, "other.pickle")
    with open(other, "wb") as f:
        pickle.dump({"model": [1, 2, 3]}, f, protocol=4)
    bad += expect_fail(gmp, [other, "-o", out], "without 'segments'", out)
    notdict = os.path.join(work, "str.pickle")
    with open(notdict, "wb") as f:
        pickle.dump("segments", f, protocol=4)
    bad += expect_fail(gmp, [notdict, "-o", out], "holds a str", out)
    badtype = os.path.join(work, "badtype.pickle")
    with open(badtype, "wb") as f:
        pickle.dump({"segments": [{"device": "0", "address": 1, "total_size": 1}]}, f, protocol=4)
    bad += expect_fail(gmp, [badtype, "-o", out], "'device' is a str", out)
    baddev = os.path.join(work, "baddev.pickle")
    with open(baddev, "wb") as f:
        pickle.dump({"segments": [{"device": 5000, "address": 1, "total_size": 1}]}, f, protocol=4)
    bad += expect_fail(gmp, [baddev, "-o", out], "device 5000", out)
    good = os.path.join(work, "good.pickle")
    with open(good, "wb") as f:
        pickle.dump(snapshots()["timed"][0], f, protocol=4)
    data = open(good, "rb").read()
    cut = os.path.join(work, "cut.pickle")
    with open(cut, "wb") as f:
        f.write(data[: len(data) // 2])
    bad += expect_fail(gmp, [cut, "-o", out], "not a readable PyTorch memory snapshot", out)
    r = run([gmp, "import", good, "-o", out])
    if r.returncode != 0 or "(pytorch)" not in r.stderr:
        print(f"FAILED: import good: {r.returncode} {r.stderr}")
        bad += 1
    bad += expect_fail(gmp, [good, "-o", out], "exists")
    r = run([gmp, "import", good, "-o", out, "--force", "--quiet"])
    if r.returncode != 0 or r.stderr:
        print(f"FAILED: import --force --quiet: {r.returncode} {r.stderr}")
        bad += 1
    # an output that is not a regular file is written where it is, never replaced (a FIFO read by
    # a thread here; a symbolic link keeps pointing at its target, which gets the trace)
    fifo = os.path.join(work, "out.fifo")
    os.mkfifo(fifo)
    got = []
    # (a daemon: when the FIFO was replaced, the thread stays blocked opening it)
    th = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    th.start()
    r = run([gmp, "import", good, "-o", fifo, "--force", "--quiet"])
    th.join(30)
    if r.returncode != 0 or not stat.S_ISFIFO(os.lstat(fifo).st_mode) or \
            not got or got[0] != open(out, "rb").read():
        print(f"FAILED: import into a FIFO: {r.returncode} {r.stderr} "
              f"fifo still one: {stat.S_ISFIFO(os.lstat(fifo).st_mode)}")
        bad += 1
    target = os.path.join(work, "target.zst")
    link = os.path.join(work, "link.zst")
    with open(target, "wb") as f:
        f.write(b"old contents, longer than nothing")
    os.symlink(target, link)
    r = run([gmp, "import", good, "-o", link, "--force", "--quiet"])
    if r.returncode != 0 or not os.path.islink(link) or \
            open(target, "rb").read() != open(out, "rb").read():
        print(f"FAILED: import through a symbolic link: {r.returncode} {r.stderr}")
        bad += 1
    # diagnose reads a snapshot through cli_input (by content, imported once for both reports)
    r = run([gmp, "diagnose", "--list", good])
    if r.returncode != 0 or "(PyTorch memory snapshot)" not in r.stdout or \
            "recording-1/report.json" not in r.stdout:
        print(f"FAILED: diagnose --list of a snapshot: {r.returncode} {r.stdout} {r.stderr}")
        bad += 1
    r = run([gmp, "import", "--help"])
    if r.returncode != 0 or "PyTorch memory snapshot" not in r.stdout:
        print(f"FAILED: import --help: {r.stdout}")
        bad += 1
    return 1 if bad else 0


def generic(gmp, work):
    gen = os.environ.get("GEN")
    if not gen:
        print("skipped: GEN (gen_traces) not set")
        return 77
    trace = os.path.join(work, "gen.zst")
    snap = os.path.join(work, "gen.pickle")
    again = os.path.join(work, "gen2.zst")
    for cmd in ([gen, "cli", trace, "--complete"], [gmp, "convert", trace, "--pytorch-snapshot", snap],
                [gmp, "import", snap, "-o", again, "--quiet"]):
        r = run(cmd)
        if r.returncode != 0:
            print(f"{cmd}: {r.returncode} {r.stderr}", file=sys.stderr)
            return 1
    first = torch_replay.report_peaks(gmp, trace)
    second = torch_replay.report_peaks(gmp, again)
    replayed = torch_replay.replay(torch_replay.load(snap))
    bad = 0
    for d, g in first.items():
        if d < 0:
            continue
        for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
            vals = (g[key], second.get(d, {}).get(key), replayed.get(d, {}).get(key))
            ok = vals[0] == vals[1] == vals[2]
            bad += not ok
            print(f"device {d} {key:22} trace {vals[0]}  after the round trip {vals[1]}  "
                  f"snapshot replayed {vals[2]}  {'ok' if ok else 'DIFFERENT'}")
    return 1 if bad else 0


def main(argv):
    cases = {"synthetic": synthetic, "cli": cli, "generic": generic, "ranges": ranges}
    if len(argv) != 5 or argv[1] not in cases:
        print(__doc__, file=sys.stderr)
        return 2
    case, gmp, _data, work = argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return cases[case](gmp, work)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
