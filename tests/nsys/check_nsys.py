#!/usr/bin/env python3
"""Tests of `gpumemprof import` on Nsight Systems SQLite exports (tests/nsys/CMakeLists.txt).

    check_nsys.py CASE GPUMEMPROF DATA_DIR WORK_DIR

real      the real export in DATA_DIR/nsys (tests/data/nsys): the imported trace's
          record count, peak per device, live set at the peak, static allocations (named as in the
          file, C++ symbols as c++filt demangles them) and range attribution equal an independent replay of the same rows written here
          with the sqlite3 module;
synthetic a generated export: nested push/pop ranges on two threads, start/end ranges, a pool
          allocation, driver API names, ranges that end out of nesting order;
schema    wrong inputs: not SQLite, SQLite without the table, missing columns, wrong value types,
          an existing output without --force: one clear message, exit 1, no output left.
Only the Python standard library and binutils' c++filt are used."""
import json
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

GMP = DATA = WORK = None


def demangle(name):
    """A C++ symbol as binutils' c++filt (the oracle, not the importer's demangler) shows it."""
    if not name.startswith("_Z"):
        return name
    out = subprocess.run(["c++filt", name], capture_output=True, text=True, check=True).stdout
    return out.strip()


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(args, expect=0):
    return gmp_testlib.run([GMP] + args, expect=expect, text=True)


def import_(db, out):
    if os.path.exists(out):
        os.unlink(out)
    return run(["import", db, "-o", out])


def report(trace):
    return json.loads(run(["report", "--format", "json", trace]).stdout)


def dump(trace):
    return [json.loads(l) for l in run(["dump", "--json", trace]).stdout.splitlines()
            if l.startswith("{")]


# ---- independent replay of CUDA_GPU_MEMORY_USAGE_EVENTS ----

DEVICE_KINDS = {"CUDA_MEMOPR_MEMORY_KIND_DEVICE", "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC",
                "CUDA_MEMOPR_MEMORY_KIND_ARRAY"}


def reference(db):
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    kinds = dict(c.execute("SELECT id, name FROM ENUM_CUDA_MEM_KIND"))
    ops = dict(c.execute("SELECT id, name FROM ENUM_CUDA_DEV_MEM_EVENT_OPER"))
    rows = c.execute("SELECT start, deviceId, address, bytes, memKind, memoryOperationType, name, "
                     "correlationId FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start").fetchall()
    # NVTX push/pop ranges per thread, for the allocations made by a runtime call
    pushpop = c.execute("SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name='NvtxPushPopRange'"
                        ).fetchone()[0]
    ranges = c.execute("SELECT n.start, n.end, n.globalTid, COALESCE(n.text, s.value) FROM "
                       "NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
                       "WHERE n.eventType = ?", (pushpop,)).fetchall()
    calls = {}
    for corr, tid, name in c.execute(
            "SELECT r.correlationId, r.globalTid, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN StringIds s ON s.id = r.nameId"):
        calls[corr] = (tid, name)
    live, peak, peak_t, cur = {}, {}, {}, {}
    at_peak = {}
    statics = []
    allocs = frees = 0
    for (t, dev, addr, size, kind, op, name, corr) in rows:
        kname, oname = kinds[kind], ops[op]
        if kname == "CUDA_MEMOPR_MEMORY_KIND_PINNED":
            dev = -1  # page-locked host memory: the host's, whatever device's context made it
        counted = kname in DEVICE_KINDS
        if kname.endswith("STATIC"):
            path = "[static]/" + demangle(name) if name else "[static]"
            statics.append((path, size))
        elif corr in calls:
            tid = calls[corr][0]
            inside = [(s, e, n) for (s, e, g, n) in ranges if g == tid and s <= t <= e]
            inside.sort(key=lambda x: (x[0], -x[1]))
            path = "/".join(n for (_, _, n) in inside)
        else:
            path = ""
        if oname.endswith("_DEALLOCATION"):
            frees += 1
            if addr in live:
                d, sz, p, cnt, _ = live.pop(addr)
                if cnt:
                    cur[d] -= sz
        else:
            allocs += 1
            live[addr] = (dev, size, path, counted, kname.endswith("STATIC"))
            if counted:
                cur[dev] = cur.get(dev, 0) + size
                if cur[dev] > peak.get(dev, 0):
                    peak[dev], peak_t[dev] = cur[dev], t
                    snap = {}
                    for (d, sz, p, cnt, _) in live.values():
                        if cnt and d == dev:
                            b, n = snap.get(p, (0, 0))
                            snap[p] = (b + sz, n + 1)
                    at_peak[dev] = snap
    leaks = {}  # static __device__ variables live as long as their module: not leaks
    for (d, sz, p, cnt, static) in live.values():
        if static:
            continue
        b, n = leaks.get((d, p), (0, 0))
        leaks[(d, p)] = (b + sz, n + 1)
    apis = {corr: name for corr, (tid, name) in calls.items()}
    return dict(rows=len(rows), allocs=allocs, frees=frees, peak=peak, peak_t=peak_t,
                at_peak=at_peak, statics=statics, leaks=leaks, apis=apis, rows_list=rows)


def case_real():
    db = os.path.join(DATA, "nsys", "gemm-a100-memory-usage.sqlite")
    if not os.path.exists(db):  # tests/data is part of the repository
        sys.exit("FAIL: %s not found" % db)
    out = os.path.join(WORK, "real.zst")
    p = import_(db, out)
    ref = reference(db)
    rep = report(out)
    recs = dump(out)
    mem = [r for r in recs if r["type"] in ("alloc", "free")]
    check(len(mem) == ref["rows"], "records: %d, sqlite says %d" % (len(mem), ref["rows"]))
    check(sum(r["type"] == "alloc" for r in mem) == ref["allocs"], "alloc count")
    check(sum(r["type"] == "free" for r in mem) == ref["frees"], "free count")
    check("%d memory records" % ref["rows"] in p.stderr, "summary line: " + p.stderr)
    def rng(p):  # the report's JSON (schema 2) has null for a trace's empty string
        return p if p else None

    devs = {d["id"]: d for d in rep["devices"]}
    check(set(devs) == set(ref["peak"]), "devices %s vs %s" % (sorted(devs), sorted(ref["peak"])))
    for dev, pk in ref["peak"].items():
        check(devs[dev]["peak_allocated_bytes"] == pk,
              "device %d peak %d, sqlite says %d" % (dev, devs[dev]["peak_allocated_bytes"], pk))
        check(devs[dev]["peak_time_ns"] == ref["peak_t"][dev], "device %d peak time" % dev)
        got = {(r["range"]): (r["bytes"], r["count"]) for r in rep["live_at_peak"]
               if r["device"] == dev}
        want = {rng(p): v for p, v in ref["at_peak"][dev].items()}
        check(got == want, "live at peak %s\n  expected %s" % (got, want))
    # static allocations, named as in the file
    statics = sorted((r["path"], r["size"]) for r in mem
                     if r["type"] == "alloc" and r["kind"] == "static")
    check(statics == sorted(ref["statics"]), "statics %s vs %s" % (statics, ref["statics"]))
    check(len(statics) == 3, "three static allocations in the file")
    check(("[static]/cublas::internal::deviceConstants", 112) in statics,
          "cuBLAS's static symbol demangled: %s" % statics)
    # schema 2: each device's leaks in devices[].leaks, the host's (when it is not a listed
    # device) in the top-level leaks
    leaks = {(-1, r["range"]): (r["bytes"], r["count"]) for r in rep.get("leaks", [])}
    for d in rep["devices"]:
        leaks.update({(d["id"], r["range"]): (r["bytes"], r["count"]) for r in d.get("leaks", [])})
    want = {(d, rng(p)): v for (d, p), v in ref["leaks"].items()}
    check(leaks == want, "leaks %s vs %s" % (leaks, want))
    # API names by correlation id, without CUPTI's version suffix
    for r in mem:
        want = ref["apis"].get(r["correlation"])
        # no call on record: static memory was made by a module load (not CUPTI's "MEMORY2")
        want = (want.rsplit("_v", 1)[0] if want else
                "module load" if r["kind"] == "static" else "no API call recorded")
        check(r["api"] == want, "api of correlation %d: %s, expected %s"
              % (r["correlation"], r["api"], want))
    # pinned host memory (2 rows in the file, 96 GB allocated in all) on the host, not on the
    # device whose context made it: "Memory by kind" has no pinned-host row on device 0
    pinned = [r for r in mem if r["kind"] == "pinned-host"]
    check(len(pinned) == 2 and all(r["device"] == -1 for r in pinned),
          "pinned host records on the host: %s" % [(r["type"], r["device"]) for r in pinned])
    check(not any(k["kind"] == "pinned-host" and k.get("device") == 0
                  for k in rep.get("kinds", [])), "device 0 has pinned-host memory: %s"
          % rep.get("kinds"))
    # the device as in TARGET_INFO_GPU, the main thread named
    d = [r for r in recs if r["type"] == "device"][0]
    check(d["name"] == "NVIDIA A100-PCIE-40GB" and d["total_bytes"] == 42411098112
          and d["cc"] == "8.0" and d["uuid"] == "GPU-cf06906f-2083-050b-f5e0-547c81d4f55d",
          "device record %s" % d)
    th = {r["tid"]: r["name"] for r in recs if r["type"] == "thread"}
    check(th.get(149646) == "gemm_pipeline_d", "main thread name: %s" % th)
    # numbers quoted in docs and the report of this session
    check(ref["peak"] == {0: 17608520848}, "the file's device peak changed? %s" % ref["peak"])
    print("ok: %d records, peak %s, %d statics" % (ref["rows"], ref["peak"], len(statics)))


# ---- generated exports ----

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER, name TEXT, label TEXT);
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL,
  pc INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER NOT NULL,
  memoryOperationType INTEGER NOT NULL, name TEXT, correlationId INTEGER,
  localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER,
  localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER,
  importedMemoryPoolAddress INTEGER, importedMemoryPoolProcessId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
  returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
  returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
  totalMemory INTEGER, uuid TEXT, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
"""
KINDS = ["PAGEABLE", "PINNED", "DEVICE", "ARRAY", "MANAGED", "DEVICE_STATIC", "MANAGED_STATIC",
         "UNKNOWN"]
PID = 4321


def gid(tid, pid=PID):
    return (1 << 48) | (pid << 24) | tid


def make_db(path, rows_fn=None, schema=SCHEMA):
    if os.path.exists(path):
        os.unlink(path)
    c = sqlite3.connect(path)
    c.executescript(schema)
    if rows_fn:
        rows_fn(c)
    c.commit()
    c.close()


def synthetic_rows(c):
    # enum ids deliberately differ from nsys's numbering: the importer must go by name
    for i, k in enumerate(KINDS):
        c.execute("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?,?,?)",
                  (10 + i, "CUDA_MEMOPR_MEMORY_KIND_" + k, k))
    c.execute("INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (5,'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION','A')")
    c.execute("INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (6,'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION','D')")
    for i, n in [(159, "NvtxPushPopRange"), (160, "NvtxStartEndRange"), (175, "NvtxDomainCreate")]:
        c.execute("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?,?,?)", (i, n, n))
    strings = {1: "cudaMalloc_v3020", 2: "cuMemAlloc_v2", 3: "cudaMallocAsync_v11020",
               4: "main", 5: "worker", 6: "forward", 7: "cudaFree_v3020"}
    for k, v in strings.items():
        c.execute("INSERT INTO StringIds VALUES (?,?)", (k, v))
    T1, T2 = gid(PID), gid(PID + 1)
    c.execute("INSERT INTO ThreadNames VALUES (4, 20, ?)", (T1,))
    c.execute("INSERT INTO ThreadNames VALUES (5, 20, ?)", (T2,))
    c.execute("INSERT INTO ThreadNames VALUES (5, 20, ?)", (gid(7, 99),))  # another process
    c.execute("INSERT INTO TARGET_INFO_GPU VALUES (1, 0, 'Sim GPU 0', 1000000, 'GPU-00112233-4455-6677-8899-aabbccddeeff', 9, 0)")
    c.execute("INSERT INTO TARGET_INFO_GPU VALUES (1, 1, 'Sim GPU 1', 2000000, 'junk', 8, 6)")
    c.execute("INSERT INTO PROCESSES VALUES (?, ?, 'python')", (gid(0), PID))
    nv = "INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, endGlobalTid, textId, domainId) VALUES (?,?,?,?,?,?,?,?,?)"
    c.execute(nv, (1, None, 175, None, "mydomain", T1, None, None, 7))
    c.execute(nv, (100, 1000, 159, None, "train", T1, None, None, None))
    c.execute(nv, (200, 500, 159, None, None, T1, None, 6, None))        # forward (textId)
    c.execute(nv, (300, 400, 159, None, "inner", T1, None, None, 7))     # in mydomain
    c.execute(nv, (600, 900, 159, None, "backward", T1, None, None, None))
    c.execute(nv, (650, 950, 159, None, "overlong", T1, None, None, None))  # ends after its parent
    c.execute(nv, (100, 700, 159, None, "io", T2, None, None, None))
    c.execute(nv, (150, 800, 160, 77, "epoch", T1, T2, None, None))     # start/end across threads
    rt = "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,?,0,NULL)"
    mem = ("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, "
           "address, pc, bytes, memKind, memoryOperationType, name, correlationId, "
           "localMemoryPoolAddress, localMemoryPoolSize) VALUES (?,?,?,1,?,0,?,?,?,?,?,?,?)")
    G = gid(0)
    DEV, STATIC, PINNED = 12, 15, 11
    c.execute(rt, (340, 360, T1, 1, 1))
    c.execute(mem, (350, G, 0, 0x1000, 100, DEV, 5, None, 1, None, None))        # train/forward/inner
    c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_DRIVER VALUES (?,?,0,?,?,?,0,NULL)", (440, 460, T1, 2, 2))
    c.execute(mem, (450, G, 0, 0x2000, 200, DEV, 5, None, 2, None, None))        # train/forward
    c.execute(rt, (690, 710, T2, 3, 1))
    c.execute(mem, (700, G, 1, 0x3000, 300, DEV, 5, None, 3, None, None))        # io (at its end)
    c.execute(rt, (920, 930, T1, 4, 3))
    c.execute(mem, (925, G, 0, 0x4000, 400, DEV, 5, None, 4, 0x9000, 4096))     # pool: train/backward? no: ended
    c.execute(mem, (960, G, 0, 0x5000, 50, STATIC, 5, "var", 0, None, None))
    c.execute(mem, (970, G, 0, 0x6000, 60, PINNED, 5, None, 0, None, None))
    c.execute(rt, (1100, 1110, T1, 5, 7))
    c.execute(mem, (1105, G, 0, 0x2000, 200, DEV, 6, None, 5, None, None))
    c.execute(mem, (1200, G, 0, 0x7000, 1, DEV, 99, None, 0, None, None))       # unknown op: skipped


def case_synthetic():
    db = os.path.join(WORK, "synthetic.sqlite")
    make_db(db, synthetic_rows)
    out = os.path.join(WORK, "synthetic.zst")
    import_(db, out)
    recs = dump(out)
    mem = [r for r in recs if r["type"] in ("alloc", "free")]
    got = [(r["type"], r["address"], r["kind"], r["api"], r["path"], r["tid"]) for r in mem]
    want = [("alloc", "0x1000", "device", "cudaMalloc", "train/forward/inner", PID),
            ("alloc", "0x2000", "device", "cuMemAlloc", "train/forward", PID),
            ("alloc", "0x3000", "device", "cudaMalloc", "io", PID + 1),
            ("alloc", "0x4000", "async-pool", "cudaMallocAsync", "train", PID),
            ("alloc", "0x5000", "static", "module load", "[static]/var", PID),
            ("alloc", "0x6000", "pinned-host", "no API call recorded", "", PID),
            ("free", "0x2000", "device", "cudaFree", "", PID)]
    check(got == want, "memory records:\n  %s\nexpected\n  %s" % ("\n  ".join(map(str, got)),
                                                                   "\n  ".join(map(str, want))))
    inner = [r for r in recs if r["type"] == "range" and r["name"] == "inner"]
    check(inner and inner[0]["domain"] == "mydomain", "domain of 'inner': %s" % inner)
    pools = [r for r in recs if r["type"] == "pool"]
    check(len(pools) == 1 and pools[0]["value"] == 4096, "pool record %s" % pools)
    ev = [(r["type"], r["t"], r["tid"], r.get("path", "")) for r in recs
          if r["type"] in ("range_push", "range_pop", "range_start", "range_end")]
    pops = [e for e in ev if e[0] == "range_pop"]
    # overlong ends after backward and train: closed with backward, once
    check([p[3] for p in pops] == ["train/forward/inner", "train/forward", "io",
                                   "train/backward/overlong", "train/backward", "train"],
          "pops %s" % pops)
    check([p[1] for p in pops] == [400, 500, 700, 900, 900, 1000], "pop times %s" % pops)
    st = [e for e in ev if e[0] in ("range_start", "range_end")]
    check(st == [("range_start", 150, PID, "epoch"), ("range_end", 800, PID + 1, "")],
          "start/end %s" % st)
    times = [r["t"] for r in recs if "t" in r and r["type"] != "end"]
    check(times == sorted(times), "events out of time order")
    devs = {r["ordinal"]: r for r in recs if r["type"] == "device"}
    check(devs[0]["uuid"] == "GPU-00112233-4455-6677-8899-aabbccddeeff" and devs[0]["cc"] == "9.0",
          "device 0 %s" % devs[0])
    check(devs[1]["total_bytes"] == 2000000 and devs[1]["cc"] == "8.6", "device 1 %s" % devs[1])
    th = sorted((r["tid"], r["name"]) for r in recs if r["type"] == "thread")
    check(th == [(PID, "main"), (PID + 1, "worker")], "threads %s" % th)
    rep = report(out)
    d = {x["id"]: x for x in rep["devices"]}
    check(d[0]["peak_allocated_bytes"] == 750 and d[1]["peak_allocated_bytes"] == 300,
          "peaks %s" % rep["devices"])
    print("ok")


def expect_error(db, text, out_name="bad.zst"):
    out = os.path.join(WORK, out_name)
    if os.path.exists(out):
        os.unlink(out)
    p = run(["import", db, "-o", out], expect=1)
    check(text in p.stderr, "message %r does not contain %r" % (p.stderr, text))
    check(len(p.stderr.strip().splitlines()) == 1, "one line: %r" % p.stderr)
    check(not os.path.exists(out), "output left behind")
    check(not [f for f in os.listdir(WORK) if ".tmp" in f], "temporary file left behind")


def case_schema():
    junk = os.path.join(WORK, "junk.bin")
    with open(junk, "wb") as f:
        f.write(b"this is not a database at all, nor a pickle\n")
    expect_error(junk, "not a gpumemprof trace, a PyTorch memory snapshot (pickle) or an Nsight Systems SQLite export (it begins with \"this is not")
    fake = os.path.join(WORK, "fake.sqlite")
    with open(fake, "wb") as f:
        f.write(b"SQLite format 3\0" + b"\xff" * 200)
    expect_error(fake, "fake.sqlite")
    other = os.path.join(WORK, "other.sqlite")
    make_db(other, schema="CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1);")
    expect_error(other, "table CUDA_GPU_MEMORY_USAGE_EVENTS is missing")
    nocol = os.path.join(WORK, "nocol.sqlite")
    make_db(nocol, schema="CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, deviceId INTEGER, address INTEGER, memKind INTEGER, memoryOperationType INTEGER);")
    expect_error(nocol, "has no column bytes")
    badtype = os.path.join(WORK, "badtype.sqlite")

    def bad_rows(c):
        c.execute("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, bytes, memKind, memoryOperationType) VALUES (1, 1, 0, 0, 4096, 0, 'lots', 2, 0)")
    make_db(badtype, bad_rows)
    expect_error(badtype, "bytes is not an integer")
    view = os.path.join(WORK, "view.sqlite")
    make_db(view, schema="CREATE TABLE x (a); CREATE VIEW CUDA_GPU_MEMORY_USAGE_EVENTS AS SELECT 1 AS start;")
    expect_error(view, "is missing")
    # an existing output is kept unless --force
    good = os.path.join(WORK, "good.sqlite")
    make_db(good, synthetic_rows)
    out = os.path.join(WORK, "exists.zst")
    with open(out, "w") as f:
        f.write("keep me")
    p = run(["import", good, "-o", out], expect=1)
    check("--force" in p.stderr and open(out).read() == "keep me", "overwrote without --force")
    run(["import", good, "-o", out, "--force", "--quiet"])
    run(["dump", out])
    run(["import", good], expect=2)
    print("ok")


def main():
    global GMP, DATA, WORK
    case, GMP, DATA, WORK = sys.argv[1:5]
    GMP = gmp_testlib.gpumemprof(GMP)
    os.makedirs(WORK, exist_ok=True)
    {"real": case_real, "synthetic": case_synthetic, "schema": case_schema}[case]()


if __name__ == "__main__":
    main()
