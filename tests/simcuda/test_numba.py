#!/usr/bin/env python3
"""simcuda_agent_numba: a CUDA client Debian 12 packages (python3-numba 0.56, main), unmodified, on
the CUDA 12 personality's driver (docs/simcuda.md "Debian 12's CUDA clients"). numba drives the
driver API through ctypes: it loads NUMBA_CUDA_DRIVER (numba/cuda/cudadrv/driver.py,
find_driver) and looks every function up as NAME_v2 first (_find_api), so it runs only against a
driver without CUDA 13's cuCtxGetDevice_v2/cuCtxSynchronize_v2 (a 12.x one). numba_prog.py runs
under `gpumemprof run` (CUPTI: the personality's libcupti.so.12, as a CUDA 12 toolkit's would be
chosen with --cupti); the oracle is numba's source: the sizes it asks for (nbytes of each array,
numba/cuda/api.py and cudadrv/devicearray.py), which driver call each API makes (cuMemAlloc,
cuMemAllocManaged, cuMemHostAlloc, cuMemHostRegister) and when its deallocation queue frees
(_PendingDeallocs: on clear(), or when an add makes it hold more than CUDA_DEALLOCS_COUNT = 10).
Every allocation must be recorded with that size, with its Python stack (numba_prog.py calling
numba's API function), and freed by the matching call at its address.
Three more runs, each about a second:
- without --cupti, a CUDA 12 toolkit's CUPTI in $CUDA_HOME/lib64 (a copy of the personality's):
  for a program that loads no runtime the agent looks for a CUPTI of the driver's major (12) before
  its own (13), and records every allocation as with --cupti;
- the CUPTI of a later CUDA major than the driver (the simulated libcupti.so.13 given to the
  12.8 driver): cuptiSubscribe fails with CUPTI_ERROR_UNKNOWN, as the real CUPTI 13 does there;
  the agent's message says the CUPTI is newer than the driver and names the fix (--cupti with a
  CUDA 12 CUPTI), and the program runs on unchanged;
- numba 0.56 on the CUDA 13 personality's driver (--simcuda): it resolves cuCtxGetDevice to
  CUDA 13's cuCtxGetDevice_v2(CUdevice *, CUcontext) and calls it with one argument, so the
  driver reads an undefined context; the simulated driver answers CUDA_ERROR_INVALID_CONTEXT as
  cuda.h says for a context that is none (a real 580 driver was reported to crash there), and
  the program fails at its first context push (driver.py:498), under gpumemprof as without it.
Skips (77) where python3-numba is not installed.
Usage: test_numba.py --gpumemprof BIN --wheel DIR --simcuda DIR --python PY --tmp DIR
                     [--preload LIB]"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
for opt in ("gpumemprof", "wheel", "simcuda", "python", "tmp"):
    ap.add_argument("--" + opt, required=True)
ap.add_argument("--preload", default="")
a = ap.parse_args()
if subprocess.run([a.python, "-c", "import numba.cuda"], stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL).returncode != 0:
    print("SKIP: %s has no numba (apt-get install python3-numba; scripts/install-deps.sh)" % a.python)
    sys.exit(77)
os.makedirs(a.tmp, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="numba-", dir=a.tmp)
env = {k: v for k, v in os.environ.items()
       if not k.startswith(("SIMCUDA_", "GPUMEMPROF_", "SIMTEST_", "NUMBA_"))
       and k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD", "LD_LIBRARY_PATH")}
env["LC_ALL"] = "C"
env["NUMBA_CUDA_DRIVER"] = os.path.join(a.wheel, "driver", "libcuda.so.1")
env["NUMBA_CACHE_DIR"] = tmp
if a.preload:
    env["LD_PRELOAD"] = a.preload
    env["ASAN_OPTIONS"] = "detect_leaks=0"
cupti = os.path.join(a.wheel, "site-packages", "nvidia", "cuda_cupti", "lib", "libcupti.so.12")
prog = [a.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "numba_prog.py")]
trace = os.path.join(tmp, "n.trace")
p = subprocess.run([a.gpumemprof, "run", "-q", "--cupti", cupti, "-o", trace, "--"] + prog, env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
out, err = p.stdout.decode(), p.stderr.decode()
fails = []
lines = out.splitlines()
want_out = ["total 85899345920", "pending 6", "pending after clear 0", "pending after 11 0", "ok"]
if p.returncode != 0 or [l for l in lines if not l.startswith("device bytes")] != want_out:
    fails.append("program: exit %d, stdout %r, stderr %r" % (p.returncode, out, err[-800:]))
d = subprocess.run([a.gpumemprof, "dump", "--json", trace], env=env, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=60)
recs = [json.loads(l) for l in d.stdout.decode().splitlines() if l.strip()]
if d.returncode != 0:
    fails.append("dump exit %d: %s" % (d.returncode, d.stderr.decode()[-400:]))
api = [r for r in recs if r.get("type") in ("alloc", "free")
       and "activity" not in r.get("flags", "").split("|")]
allocs = [(r["api"], r["kind"], r["size"]) for r in api if r["type"] == "alloc"]
want = ([("cuMemAlloc", "device", 4000), ("cuMemAlloc", "device", 16384), ("cuMemAlloc", "device", 30),
         ("cuMemAllocManaged", "managed", 800), ("cuMemHostAlloc", "pinned-host", 4096),
         ("cuMemHostAlloc", "pinned-host", 8192), ("cuMemHostRegister", "registered-host", 12288)]
        + [("cuMemAlloc", "device", 256)] * 11)
if allocs != want:
    fails.append("allocations %r, want (numba's source) %r" % (allocs, want))
# each freed once, by the call that matches its allocation, in the order numba's queue says
free_api = {"cuMemAlloc": "cuMemFree", "cuMemAllocManaged": "cuMemFree",
            "cuMemHostAlloc": "cuMemFreeHost", "cuMemHostRegister": "cuMemHostUnregister"}
live, order = {}, []
for r in api:
    if r["type"] == "alloc":
        live[r["address"]] = r
    else:
        al = live.pop(r["address"], None)
        if al is None or free_api[al["api"]] != r["api"]:
            fails.append("free %s of %s: allocated by %s" % (r["api"], r["address"],
                                                             al["api"] if al else "nothing live"))
        else:
            order.append((r["api"], al["size"]))
if live:
    fails.append("never freed: %r" % sorted((r["api"], r["size"]) for r in live.values()))
want_order = ([("cuMemHostUnregister", 12288)]       # cuda.pinned's exit, at once
              + [("cuMemFree", 4000), ("cuMemFree", 16384), ("cuMemFree", 30), ("cuMemFree", 800),
                 ("cuMemFreeHost", 4096), ("cuMemFreeHost", 8192)]   # deallocations.clear()
              + [("cuMemFree", 256)] * 11)            # the 11th add_item
if order != want_order:
    fails.append("frees %r, want %r" % (order, want_order))
# the queue: nothing of the 11 small arrays freed before the 11th was allocated
first = next((i for i, r in enumerate(api) if r["type"] == "alloc" and r["size"] == 256), len(api))
small = api[first:]
kinds = "".join("a" if r["type"] == "alloc" else "f" for r in small)
if kinds != "a" * 11 + "f" * 11:
    fails.append("the 11 small arrays' allocs/frees in order %s, want 11 allocs then 11 frees" % kinds)
# each allocation's Python stack: numba_prog.py calling numba's API function (numba/cuda/api.py)
stacks = {r["id"]: r for r in recs if r.get("type") == "stack"}


def py_functions(sid):
    out, seen = [], set()
    while sid and sid in stacks and sid not in seen:
        seen.add(sid)
        st = stacks[sid]
        if st.get("frame") == "python":
            out.append((os.path.basename(st.get("file", "")), st.get("function")))
        sid = st.get("parent")
    return out


want_api = (["device_array", "to_device", "device_array", "managed_array", "pinned_array",
             "mapped_array", "pinned"] + ["device_array"] * 11)
got_api = []
for r, fn in zip([r for r in api if r["type"] == "alloc"], want_api):
    frames = py_functions(r.get("stack"))
    ok = ("api.py", fn) in frames and any(f == "numba_prog.py" for f, _ in frames)
    got_api.append(fn if ok else "%s? %r" % (fn, frames[:6]))
if got_api != want_api[:len(got_api)]:
    fails.append("Python stacks: %r" % [g for g in got_api if "?" in g])

# the CUPTI of a later major than the driver: the agent says so and names the fix
cupti13 = os.path.join(a.simcuda, "libcupti.so.13")
trace13 = os.path.join(tmp, "n13.trace")
p = subprocess.run([a.gpumemprof, "run", "--cupti", cupti13, "-o", trace13, "--"] + prog, env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
out13, err13 = p.stdout.decode(), p.stderr.decode()
if p.returncode != 0 or [l for l in out13.splitlines() if not l.startswith("device bytes")] != want_out:
    fails.append("newer CUPTI: the program did not run on: exit %d, stdout %r" % (p.returncode, out13))
for said in ("cannot profile: cuptiSubscribe failed: CUPTI_ERROR_UNKNOWN; the CUPTI loaded (",
             "CUDA 13, API version 130001) is newer than the CUDA driver (CUDA 12.8)",
             "give a CUDA 12 CUPTI with --cupti PATH"):
    if said not in err13:
        fails.append("newer CUPTI: stderr lacks %r: %r" % (said, err13[-1200:]))

# no --cupti: a CUDA 12 toolkit's CUPTI ($CUDA_HOME/lib64/libcupti.so.12, a copy of the
# personality's) is taken before the agent's own major, for a program that loads no runtime
home = os.path.join(tmp, "cuda12-home")
os.makedirs(os.path.join(home, "lib64"), exist_ok=True)
shutil.copy(cupti, os.path.join(home, "lib64", "libcupti.so.12"))
envh = dict(env)
envh["CUDA_HOME"] = home
envh.pop("CUDA_PATH", None)
traceh = os.path.join(tmp, "nh.trace")
p = subprocess.run([a.gpumemprof, "run", "-q", "-o", traceh, "--"] + prog, env=envh,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
dh = subprocess.run([a.gpumemprof, "dump", "--json", traceh], env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, timeout=60)
recsh = [json.loads(l) for l in dh.stdout.decode().splitlines() if l.strip()]
allocsh = [(r["api"], r["kind"], r["size"]) for r in recsh if r.get("type") == "alloc"
           and "activity" not in r.get("flags", "").split("|")]
if p.returncode != 0 or "cannot profile" in p.stderr.decode() or allocsh != want:
    fails.append("CUDA_HOME's CUPTI 12: exit %d, stderr %r, allocations %r"
                 % (p.returncode, p.stderr.decode()[-600:], allocsh))

# numba 0.56 on the CUDA 13 driver: cuCtxGetDevice resolved to cuCtxGetDevice_v2
env13 = dict(env)
env13["NUMBA_CUDA_DRIVER"] = os.path.join(a.simcuda, "libcuda.so.1")
for label, cmd in (("alone", prog), ("under gpumemprof run",
                                    [a.gpumemprof, "run", "-q", "-o",
                                     os.path.join(tmp, "c13.trace"), "--"] + prog)):
    p = subprocess.run(cmd, env=env13, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    e = p.stderr.decode()
    if p.returncode == 0 or "Call to cuCtxGetDevice results in CUDA_ERROR_INVALID_CONTEXT" not in e:
        fails.append("numba on the CUDA 13 driver %s: exit %d, stderr %r"
                     % (label, p.returncode, e[-600:]))

# the report opens every stack at the program's line (docs/stacks.md, "Frames from user code"):
# ctypes' and libffi's frames, the interpreter's and numba's are folded (they led every stack)
rep = subprocess.run([a.gpumemprof, "report", "-f", "json", "--by", "stack", "--top", "0", trace],
                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
rows = [r for d in json.loads(rep.stdout or b"{}").get("devices", [])
        for r in d.get("live_at_peak_by_stack", [])] if rep.returncode == 0 else []
firsts = [next((f for f in r["stack"] if not f.get("internal")), {}) for r in rows]
if not rows or any(os.path.basename(f.get("file") or "") != "numba_prog.py" for f in firsts):
    fails.append("report: stacks open at %r" % [(f.get("function"), f.get("file")) for f in firsts])
for f in fails:
    print("FAIL: " + f)
if fails:
    sys.exit(1)
print("numba: %d allocations and their frees recorded as numba's source says; %s"
      % (len(allocs), [l for l in lines if l.startswith("device bytes")][0]))
