#!/usr/bin/env python3
"""Python stacks: added cost per CUDA call (tests/bench; figures, not a test).

A CPython program calls the simulated cudaMalloc/cudaFree through ctypes.PyDLL (the GIL held, so
the agent reads the Python stack) at a Python depth of --depth frames, under the agent with
GPUMEMPROF_STACKS none, native, python and all, interleaved, median of --rounds. Every call
(malloc and free) records a stack. Prints `name: value unit` lines.

  tests/bench/bench_pystacks.py [--build build-bench] [--python /usr/bin/python3]
                                [--pairs 50000] [--depth 20] [--rounds 5]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build-bench")
ap.add_argument("--python", default="/usr/bin/python3")
ap.add_argument("--pairs", type=int, default=50000)
ap.add_argument("--depth", type=int, default=20)
ap.add_argument("--rounds", type=int, default=5)
args = ap.parse_args()

PROG = r"""
import ctypes, sys, time
rt = ctypes.PyDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]
pairs, depth = int(sys.argv[1]), int(sys.argv[2])
def loop():
    p = ctypes.c_void_p()
    ref = ctypes.byref(p)
    malloc, free = rt.cudaMalloc, rt.cudaFree
    t0 = time.perf_counter()
    for i in range(pairs):
        malloc(ref, 4096 + (i & 63) * 256)
        free(p)
    return time.perf_counter() - t0
def deeper(d):
    return deeper(d - 1) if d > 0 else loop()
loop_warm = pairs
pairs = 2000
deeper(depth)          # warm: caches, first stacks
pairs = loop_warm
print("ns_per_call: %.1f" % (deeper(depth) * 1e9 / (2 * pairs)))
"""

build = os.path.abspath(args.build)
sim = os.path.join(build, "simcuda")
agent = os.path.join(build, "lib", "gpumemprof", "libgpumemprof_agent.so")
for p in (sim, agent):
    if not os.path.exists(p):
        sys.exit(f"bench_pystacks: {p} missing (build {args.build} first)")

tmp = tempfile.mkdtemp()
prog = os.path.join(tmp, "loop.py")
with open(prog, "w") as f:
    f.write(PROG)


def run(stacks):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEMPROF_", "CUDA_"))}
    env["LD_LIBRARY_PATH"] = sim
    if stacks is not None:
        env.update(CUDA_INJECTION64_PATH=agent, GPUMEMPROF_OUTPUT=os.path.join(tmp, "t.zst"),
                   GPUMEMPROF_FORCE="1", GPUMEMPROF_QUIET="1", GPUMEMPROF_STACKS=stacks,
                   GPUMEMPROF_SAMPLE_INTERVAL_MS="0", GPUMEMPROF_ACTIVITY="0")
    out = subprocess.run([args.python, prog, str(args.pairs), str(args.depth)], env=env,
                         capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("ns_per_call:"):
            return float(line.split()[1])
    sys.exit(f"bench_pystacks: run failed ({stacks}): {out.stdout}{out.stderr}")


cfgs = [None, "none", "native", "python", "all"]
res = {c: [] for c in cfgs}
for _ in range(args.rounds):
    for c in cfgs:
        res[c].append(run(c))
med = {c: statistics.median(v) for c, v in res.items()}
ver = subprocess.run([args.python, "-c", "import sys; print(sys.version.split()[0])"],
                     capture_output=True, text=True).stdout.strip()
print(f"# CPython {ver}, Python depth {args.depth}, {args.pairs} malloc/free pairs, "
      f"median of {args.rounds}")
print(f"pystacks_ns_per_call_no_injection: {med[None]:.1f} ns")
for c in cfgs[1:]:
    print(f"pystacks_ns_per_call_stacks_{c}: {med[c]:.1f} ns")
print(f"pystacks_added_ns_per_call_python: {med['python'] - med['none']:.1f} ns "
      "(Python frames only, over --stacks none)")
print(f"pystacks_added_ns_per_call_all: {med['all'] - med['none']:.1f} ns "
      "(native + Python spliced, over --stacks none)")
print(f"pystacks_added_ns_per_call_all_over_native: {med['all'] - med['native']:.1f} ns "
      "(the Python part of --stacks all)")
