#!/usr/bin/env python3
"""simcuda_agent_wheel12: the agent on the CUDA 12 personality's pip-wheel layout (README "CUDA 12
personality"). Runs wheel12_prog.py with Debian's python3 under `gpumemprof run` (no
LD_LIBRARY_PATH: the wheel's libraries find the simulated driver by their RUNPATH) and checks the
program's output (versions 12.8), its exit status, and that its allocations were recorded: the
one made through the pointer cudaGetDriverEntryPointByVersion returned, and the expandable
segment's chunks (cuMemCreate, freed by cuMemRelease) made through cudaGetDriverEntryPoint's.
Usage: test_wheel12.py --gpumemprof BIN --wheel DIR --python PY --tmp DIR [--preload LIB]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
for opt in ("gpumemprof", "wheel", "python", "tmp"):
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
prog = [a.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "wheel12_prog.py"), a.wheel]
trace = os.path.join(tmp, "w.trace")
p = subprocess.run([a.gpumemprof, "run", "-q", "-o", trace, "--"] + prog, env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
out, err = p.stdout.decode(), p.stderr.decode()
fails = []
if p.returncode != 0 or out != "runtime 12080 driver 12080\nok\n":
    fails.append("program: exit %d, stdout %r, stderr %r" % (p.returncode, out, err[-600:]))
d = subprocess.run([a.gpumemprof, "dump", "--json", trace], env=env, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=60)
recs = [json.loads(l) for l in d.stdout.decode().splitlines() if l.strip()]
allocs = sorted((r["api"], r["size"]) for r in recs if r.get("type") == "alloc"
                and r["api"] in ("cuMemAlloc", "cudaMalloc", "cuMemCreate")
                and "activity" not in r.get("flags", "").split("|"))
# the expandable segment's physical chunks, reached through cudaGetDriverEntryPoint
want = [("cuMemAlloc", 3 << 20), ("cuMemCreate", 2 << 20), ("cuMemCreate", 2 << 20),
        ("cudaMalloc", 1 << 20)]
frees = sorted(r["api"] for r in recs if r.get("type") == "free" and r["api"] == "cuMemRelease")
if frees != ["cuMemRelease", "cuMemRelease"]:
    fails.append("trace: the chunks' releases %r" % frees)
if d.returncode != 0 or allocs != want:
    fails.append("trace: dump exit %d, allocations %r, want %r" % (d.returncode, allocs, want))
for f in fails:
    print("FAIL: " + f)
if fails:
    sys.exit(1)
print("wheel12: ok")
