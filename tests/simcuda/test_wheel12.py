#!/usr/bin/env python3
"""simcuda_agent_wheel12: the agent on the CUDA 12 personality's pip-wheel layout (README "CUDA 12
personality"), in a PyTorch-like process (docs/simcuda.md, "A PyTorch-like process"). Runs
wheel12_prog.py with Debian's python3 under `gpumemprof run` (no LD_LIBRARY_PATH: the wheel's
libraries find the simulated driver by their RUNPATH) and checks the program's output (versions
12.8), its exit status, and from the traces (`gpumemprof dump --json`, `report --format json`):
- exactly one CUPTI mapped in each process, the wheel's libcupti.so.12 (which the program loads at
  import, before its first CUDA call);
- its allocations, exact sizes: the caching allocator's 20 MiB segment, the one made through the
  pointer cudaGetDriverEntryPointByVersion returned, the expandable segment's chunks (cuMemCreate,
  freed by cuMemRelease) made through cudaGetDriverEntryPoint's;
- the backward pass on the native worker thread (pyworker.c): its 5 and 7 MiB on that thread's
  id, not the Python thread's, with stacks of native frames only (one of them in
  libsimcuda_pyworker.so) and no Python frame, where the Python thread's cudaMalloc has one;
- the CUDA graph with a private pool: nothing recorded at capture; at the launch its 6 and 4 MiB
  allocations and the 6 MiB free (api cudaGraphLaunch, flags activity|async), the 4 MiB freed
  later by cudaFreeAsync;
- the NCCL-like peer buffer: the exporter records its 2 MiB cuMemCreate (kind vmm-physical,
  counted in its device memory) and its release; the importing process records its mapping but
  no allocation of its own (report: 0 allocations, device peak 0).
Usage: test_wheel12.py --gpumemprof BIN --wheel DIR --python PY --tmp DIR --worker SO
                       [--preload LIB]"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
for opt in ("gpumemprof", "wheel", "python", "tmp", "worker"):
    ap.add_argument("--" + opt, required=True)
ap.add_argument("--preload", default="")  # sanitizer runtime for an uninstrumented python
a = ap.parse_args()
os.makedirs(a.tmp, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="wheel12-", dir=a.tmp)
env = {k: v for k, v in os.environ.items()
       if not k.startswith(("SIMCUDA_", "GPUMEMPROF_", "SIMTEST_"))
       and k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD", "LD_LIBRARY_PATH")}
env["LC_ALL"] = "C"
if a.preload:
    env["LD_PRELOAD"] = a.preload
    env["ASAN_OPTIONS"] = "detect_leaks=0"
MIB = 1 << 20
prog = [a.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "wheel12_prog.py"), a.wheel,
        a.worker]
pattern = os.path.join(tmp, "w.%p.trace")
p = subprocess.run([a.gpumemprof, "run", "-q", "-o", pattern, "--"] + prog, env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
out, err = p.stdout.decode(), p.stderr.decode()
fails = []
m = re.fullmatch(r"runtime 12080 driver 12080\nworker 0x([0-9a-f]+) 0x([0-9a-f]+)\n"
                 r"graph 0x([0-9a-f]+) 0x([0-9a-f]+)\nimported 0x([0-9a-f]+)\npeer 0x([0-9a-f]+)\nok\n", out)
if p.returncode != 0 or not m:
    print("FAIL: program: exit %d, stdout %r, stderr %r" % (p.returncode, out, err[-600:]))
    sys.exit(1)
w5, w7, g6, g4, imported, peer = (int(x, 16) for x in m.groups())


def load(path):
    d = subprocess.run([a.gpumemprof, "dump", "--json", path], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    r = subprocess.run([a.gpumemprof, "report", "--format", "json", path], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if d.returncode != 0 or r.returncode != 0:
        fails.append("%s: dump exit %d, report exit %d: %r" % (path, d.returncode, r.returncode,
                                                                (d.stderr + r.stderr)[-400:]))
        return [], {}
    return [json.loads(l) for l in d.stdout.decode().splitlines() if l.strip()], json.loads(r.stdout)


traces = sorted(os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".trace"))
exp = imp = None
for t in traces:
    recs, rep = load(t)
    if recs and recs[0].get("type") == "header":
        if "--import" in recs[0]["cmdline"]:
            imp = (recs, rep)
        else:
            exp = (recs, rep)
if len(traces) != 2 or not exp or not imp:
    print("FAIL: want the exporter's and the importer's traces, got %r" % traces)
    for f in fails:
        print("FAIL: " + f)
    sys.exit(1)

cupti = os.path.realpath(os.path.join(a.wheel, "site-packages", "nvidia", "cuda_cupti", "lib",
                                      "libcupti.so.12"))
for name, (recs, rep) in (("exporter", exp), ("importer", imp)):
    mapped = [r["path"] for r in recs if r.get("type") == "module"
              and os.path.basename(r["path"]).startswith("libcupti")]
    if [os.path.realpath(x) for x in mapped] != [cupti]:
        fails.append("%s: CUPTI libraries mapped %r, want only %s" % (name, mapped, cupti))

recs, rep = exp
pid = recs[0]["pid"]
mem = [r for r in recs if r.get("type") in ("alloc", "free")]
allocs = sorted((r["api"], r["size"]) for r in mem if r["type"] == "alloc"
                and r["api"] in ("cuMemAlloc", "cudaMalloc", "cuMemCreate")
                and "activity" not in r.get("flags", "").split("|"))
want = [("cuMemAlloc", 3 * MIB), ("cuMemCreate", 2 * MIB), ("cuMemCreate", 2 * MIB),
        ("cuMemCreate", 2 * MIB), ("cudaMalloc", 5 * MIB), ("cudaMalloc", 7 * MIB),
        ("cudaMalloc", 20 * MIB)]
if allocs != want:
    fails.append("exporter: allocations %r, want %r" % (allocs, want))
frees = sorted(r["api"] for r in mem if r["type"] == "free" and r["api"] == "cuMemRelease")
if frees != ["cuMemRelease"] * 3:
    fails.append("exporter: the chunks' and the peer buffer's releases %r" % frees)

# (a) the native worker thread's backward pass
stacks = {r["id"]: r for r in recs if r.get("type") == "stack"}
mods = [r for r in recs if r.get("type") == "module"]


def frames(sid):
    out, seen = [], set()
    while sid and sid in stacks and sid not in seen:
        seen.add(sid)
        out.append(stacks[sid])
        sid = stacks[sid]["parent"]
    return out


def module_of(addr):
    for mo in mods:
        lo = int(mo["lo"], 16)
        if lo <= addr < lo + mo["size"]:
            return os.path.basename(mo["path"])
    return None


grads = [r for r in mem if r["api"] in ("cudaMalloc", "cudaFree") and int(r["address"], 16) in (w5, w7)]
got = [(r["type"], int(r["address"], 16), r["size"]) for r in grads]
if got != [("alloc", w5, 5 * MIB), ("alloc", w7, 7 * MIB), ("free", w7, 0), ("free", w5, 0)]:
    fails.append("worker: records %r" % got)
tids = {r["tid"] for r in grads}
if len(tids) != 1 or pid in tids:
    fails.append("worker: thread ids %r, want one that is not the Python thread %d" % (tids, pid))
for r in grads:
    if r["type"] != "alloc":
        continue
    fr = frames(r["stack"])
    kinds = sorted({f["frame"] for f in fr})
    in_worker = [f for f in fr if f["frame"] == "native"
                 and module_of(int(f["address"], 16)) == os.path.basename(a.worker)]
    if kinds != ["native"] or not in_worker:
        fails.append("worker: the %d-byte allocation's stack: frame kinds %r, %d frames in %s" %
                     (r["size"], kinds, len(in_worker), os.path.basename(a.worker)))
main = [r for r in mem if r["type"] == "alloc" and r["api"] == "cudaMalloc" and r["size"] == 20 * MIB]
if not main or main[0]["tid"] != pid or not any(f["frame"] == "python" for f in frames(main[0]["stack"])):
    fails.append("the Python thread's cudaMalloc: not recorded with a Python frame: %r" % main)

# (b) the CUDA graph's private pool: memory at launch only
gmem = [r for r in mem if int(r["address"], 16) in (g6, g4)]
got = [(r["type"], r["api"], r["flags"], int(r["address"], 16), r["size"]) for r in gmem]
want = [("alloc", "cudaGraphLaunch", "activity|async", g6, 6 * MIB),
        ("alloc", "cudaGraphLaunch", "activity|async", g4, 4 * MIB),
        ("free", "cudaGraphLaunch", "activity|async", g6, 6 * MIB),
        ("free", "cudaFreeAsync", "async", g4, 0)]
if got != want:
    fails.append("graph: records %r, want %r" % (got, want))

# (c) the peer buffer: the exporter's memory
create = [r for r in mem if r["api"] == "cuMemCreate"][-1:]
pmap = [r for r in mem if r["api"] == "cuMemMap" and int(r["address"], 16) == peer]
if not create or not pmap or create[0]["handle"] != pmap[0]["handle"] or pmap[0]["size"] != 2 * MIB \
        or create[0]["kind"] != "vmm-physical":
    fails.append("exporter: the peer buffer's cuMemCreate %r and cuMemMap %r" % (create, pmap))
dev = rep["devices"][0]
if (dev["allocations"], dev["allocated_bytes_total"], dev["peak_allocated_bytes"]) != \
        (9, (20 + 3 + 5 + 7 + 6 + 4 + 3 * 2) * MIB, (20 + 3 + 5 + 7) * MIB):
    fails.append("exporter report: %d allocations, %d bytes in all, peak %d" %
                 (dev["allocations"], dev["allocated_bytes_total"], dev["peak_allocated_bytes"]))
recs, rep = imp
mem = [r for r in recs if r.get("type") in ("alloc", "free")]
got = [(r["type"], r["kind"], r["api"], int(r["address"], 16), r["size"]) for r in mem]
want = [("alloc", "va-reserve", "cuMemAddressReserve", imported, 2 * MIB),
        ("alloc", "vmm-mapping", "cuMemMap", imported, 2 * MIB),
        ("free", "vmm-mapping", "cuMemUnmap", imported, 2 * MIB),
        ("free", "va-reserve", "cuMemAddressFree", imported, 2 * MIB)]
if got != want:
    fails.append("importer: records %r, want %r" % (got, want))
dev = rep["devices"][0]
if (dev["allocations"], dev["peak_allocated_bytes"], dev["frees"]) != (0, 0, 0):
    fails.append("importer report: the import counted as its own memory: %d allocations, peak %d, "
                 "%d frees" % (dev["allocations"], dev["peak_allocated_bytes"], dev["frees"]))
for f in fails:
    print("FAIL: " + f)
if fails:
    sys.exit(1)
print("wheel12: ok")
