#!/usr/bin/env python3
"""Python stacks: added cost per CUDA call (tests/bench; figures, not a test).

A CPython program calls the simulated cudaMalloc/cudaFree through ctypes.PyDLL (the GIL held: the
agent walks the Python stack through the C API) and through ctypes.CDLL (the GIL released: the
agent reads the frames directly, gmp_pyframes) at a Python depth of --depth frames, under the
agent with GPUMEMPROF_STACKS none, native, python and all, interleaved, median of --rounds. Every
call (malloc and free) records a stack. Prints `name: value unit` lines (`_cdll` for the calls
without the GIL).

Then, in one process and without CUDA, the reader of frames without the GIL alone
(tests/bench/bench_pyframes.c, built here with `cc` against collectors/gmp_pyframes.c, called
through ctypes.CDLL at the same depth): CPU ns per stack for the walk, the walk with every line
decoded (lines not cached), and with every frame's names read (code objects not cached); best of
--rounds. This part holds still on a loaded machine, the end-to-end figures do not.

  tests/bench/bench_pystacks.py [--build build-bench] [--simcuda DIR] [--python /usr/bin/python3]
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
ap.add_argument("--simcuda", default=None, help="simulated CUDA libraries (default: BUILD/simcuda)")
args = ap.parse_args()

PROG = r"""
import ctypes, sys, time
rt = (ctypes.CDLL if sys.argv[3] == "cdll" else ctypes.PyDLL)("libcudart.so.13")
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
sim = os.path.abspath(args.simcuda) if args.simcuda else os.path.join(build, "simcuda")
agent = os.path.join(build, "lib", "gpumemprof", "libgpumemprof_agent.so")
for p in (sim, agent):
    if not os.path.exists(p):
        sys.exit(f"bench_pystacks: {p} missing (build {args.build} first)")

tmp = tempfile.mkdtemp()
prog = os.path.join(tmp, "loop.py")
with open(prog, "w") as f:
    f.write(PROG)


def run(stacks, dll):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMEMPROF_", "CUDA_"))}
    env["LD_LIBRARY_PATH"] = sim
    if stacks is not None:
        env.update(CUDA_INJECTION64_PATH=agent, GPUMEMPROF_OUTPUT=os.path.join(tmp, "t.zst"),
                   GPUMEMPROF_FORCE="1", GPUMEMPROF_QUIET="1", GPUMEMPROF_STACKS=stacks,
                   GPUMEMPROF_SAMPLE_INTERVAL_MS="0", GPUMEMPROF_ACTIVITY="0")
    out = subprocess.run([args.python, prog, str(args.pairs), str(args.depth), dll], env=env,
                         capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("ns_per_call:"):
            return float(line.split()[1])
    sys.exit(f"bench_pystacks: run failed ({stacks}, {dll}): {out.stdout}{out.stderr}")


cfgs = [None, "none", "native", "python", "all"]
ver = subprocess.run([args.python, "-c", "import sys; print(sys.version.split()[0])"],
                     capture_output=True, text=True).stdout.strip()
res = {(c, d): [] for c in cfgs for d in ("pydll", "cdll")}
for _ in range(args.rounds):
    for d in ("pydll", "cdll"):
        for c in cfgs:
            res[(c, d)].append(run(c, d))
med = {k: statistics.median(v) for k, v in res.items()}
print(f"# CPython {ver}, Python depth {args.depth}, {args.pairs} malloc/free pairs, "
      f"median of {args.rounds}")
for d, sfx, how in (("pydll", "", "GIL held: C API walk"),
                    ("cdll", "_cdll", "GIL released: frames read directly")):
    print(f"# ctypes.{'PyDLL' if d == 'pydll' else 'CDLL'} ({how})")
    print(f"pystacks_ns_per_call_no_injection{sfx}: {med[(None, d)]:.1f} ns")
    for c in cfgs[1:]:
        print(f"pystacks_ns_per_call_stacks_{c}{sfx}: {med[(c, d)]:.1f} ns")
    print(f"pystacks_added_ns_per_call_python{sfx}: {med[('python', d)] - med[('none', d)]:.1f} ns "
          "(Python frames only, over --stacks none)")
    print(f"pystacks_added_ns_per_call_all{sfx}: {med[('all', d)] - med[('none', d)]:.1f} ns "
          "(native + Python spliced, over --stacks none)")
    print(f"pystacks_added_ns_per_call_all_over_native{sfx}: "
          f"{med[('all', d)] - med[('native', d)]:.1f} ns (the Python part of --stacks all)")


# ---- the reader of frames without the GIL alone (gmp_pyframes), in process ----
src = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(src))
lib = os.path.join(tmp, "libbench_pyframes.so")
cc = subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-I",
                     os.path.join(root, "collectors"), os.path.join(src, "bench_pyframes.c"),
                     os.path.join(root, "collectors", "gmp_pyframes.c"), "-o", lib, "-ldl"],
                    capture_output=True, text=True)
if cc.returncode != 0:
    sys.exit(f"bench_pystacks: cannot build bench_pyframes: {cc.stderr}")
DIRECT = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.bench_pyframes.restype = ctypes.c_double
lib.bench_pyframes.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
if not lib.bench_pyframes_init(sys.version_info[1]):
    sys.exit("layouts do not check out")
depth, rounds = int(sys.argv[2]), int(sys.argv[3])
def measure():
    n = ctypes.c_int()
    out = []
    for mode in (0, 1, 2):
        best = min(lib.bench_pyframes(20000, mode, ctypes.byref(n)) for _ in range(rounds))
        out.append(best)
    print("frames: %d" % n.value)
    for name, v in zip(("walk", "walk_lines", "walk_lines_names"), out):
        print("%s: %.1f" % (name, v))
def deeper(d):
    return deeper(d - 1) if d > 0 else measure()
deeper(depth)
"""
dprog = os.path.join(tmp, "direct.py")
with open(dprog, "w") as f:
    f.write(DIRECT)
out = subprocess.run([args.python, dprog, lib, str(args.depth), str(args.rounds)],
                     capture_output=True, text=True, timeout=600)
if out.returncode != 0:
    sys.exit(f"bench_pystacks: direct reader failed: {out.stdout}{out.stderr}")
vals = dict(line.split(": ") for line in out.stdout.splitlines())
print(f"# frames without the GIL, read alone (gmp_pyframes), {vals['frames']} frames per stack, "
      f"CPU time, best of {args.rounds}")
print(f"pyframes_ns_per_stack_walk: {float(vals['walk']):.1f} ns")
print(f"pyframes_ns_per_stack_walk_lines: {float(vals['walk_lines']):.1f} ns (every line decoded)")
print(f"pyframes_ns_per_stack_walk_lines_names: {float(vals['walk_lines_names']):.1f} ns "
      "(and every name read)")
