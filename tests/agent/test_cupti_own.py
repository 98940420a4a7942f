#!/usr/bin/env python3
"""The process's own CUPTI (docs/collectors.md, "Which CUPTI"; progs/cupti_own.c loads its CUDA
runtime with dlopen, as ctypes and PyTorch do). Checked from the program's /proc/self/maps after its CUDA calls: exactly
one CUPTI is mapped, the expected one, and the allocation is in the trace.

 - plain: the simulated runtime and driver in one directory: the CUPTI beside the runtime.
 - wheel layout (copies of the simulated libraries): site-packages/nvidia/cuda_runtime/lib holds the
   runtime; the CUPTI in site-packages/nvidia/cuda_cupti/lib is used, not the one next to libcuda.
 - own CUPTI: the program loads a CUPTI of its own (another copy, elsewhere) before CUDA starts:
   the agent reuses it; no second CUPTI is mapped.
 - explicit: --cupti PATH wins.
 - `gpumemprof info --json` with VIRTUAL_ENV naming an environment with the wheels: the wheel's
   runtime and CUPTI, chosen_as "the CUDA runtime's pip wheel layout (nvidia/cuda_cupti/lib)".
 - CUDA 12 wheel personality of the simulator (GMP_SIM_WHEEL_DIR = <simcuda>/cuda12:
   site-packages/nvidia/cuda_runtime/lib/libcudart.so.12, nvidia/cuda_cupti/lib/libcupti.so.12,
   driver/libcuda.so.1 of driver 12.8): the wheel's libcupti.so.12 is found beside the runtime, and
   when the program loaded it before CUDA started it is reused: one CUPTI mapped either way."""
import json
import os
import shutil

import agentlib as L


def maps_cupti(stdout):
    return [l[2:] for l in stdout.splitlines() if l.startswith("M ")]


def case(c, name, runtime, own="", opts=(), env=None, want=None):
    out = "%s/%s.zst" % (c.tmp, name)
    args = [L.prog(c, "cupti_own"), runtime] + ([own] if own else [])
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet"] + list(opts), args, env=env)
    if not L.eq(rc, 0, "%s: exit status (stderr: %s)" % (name, stderr.strip())):
        return
    got = maps_cupti(stdout)
    L.eq([os.path.realpath(p) for p in got], [os.path.realpath(want)],
         "%s: the CUPTI files mapped" % name)
    vals = L.shown(stdout)
    t = L.dump(c, out)
    allocs = [r for r in t.of("alloc") if int(r["address"], 16) == vals.get("p")]
    L.eq(len(allocs), 1, "%s: the allocation recorded" % name)
    print("%s: one CUPTI mapped: %s" % (name, got[0] if got else None))


def main():
    c = L.setup()
    sim = c.args.simcuda
    rt13 = os.path.join(sim, "libcudart.so.13")
    # plain
    case(c, "plain", rt13, want=os.path.join(sim, "libcupti.so.13"))
    # wheel layout with copies of the CUDA 13 simulator
    sp = os.path.join(c.tmp, "site-packages")
    rtdir = os.path.join(sp, "nvidia", "cuda_runtime", "lib")
    cudir = os.path.join(sp, "nvidia", "cuda_cupti", "lib")
    owndir = os.path.join(c.tmp, "own")
    for d in (rtdir, cudir, owndir):
        os.makedirs(d, exist_ok=True)
    shutil.copy(rt13, rtdir)
    shutil.copy(os.path.join(sim, "libcupti.so.13"), cudir)
    shutil.copy(os.path.join(sim, "libcupti.so.13"), owndir)
    wheel_rt = os.path.join(rtdir, "libcudart.so.13")
    case(c, "wheel", wheel_rt, want=os.path.join(cudir, "libcupti.so.13"))
    case(c, "own", wheel_rt, own=os.path.join(owndir, "libcupti.so.13"),
         want=os.path.join(owndir, "libcupti.so.13"))
    case(c, "explicit", wheel_rt, opts=["--cupti", os.path.join(owndir, "libcupti.so.13")],
         want=os.path.join(owndir, "libcupti.so.13"))
    # gpumemprof info in a Python environment with the wheels: says which CUPTI and why
    venv = os.path.join(c.tmp, "venv")
    vsp = os.path.join(venv, "lib", "python3.11", "site-packages")
    for sub, lib in (("cuda_runtime", "libcudart.so.13"), ("cuda_cupti", "libcupti.so.13")):
        d = os.path.join(vsp, "nvidia", sub, "lib")
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(sim, lib), d)
    rc, out, err = L.run([c.gmp, "info", "--json"], L.env_with(c, VIRTUAL_ENV=venv))
    L.eq(rc, 0, "info exit status (%s)" % err.strip())
    info = json.loads(out)
    L.eq(info["runtime"]["path"],
         os.path.realpath(os.path.join(vsp, "nvidia", "cuda_runtime", "lib", "libcudart.so.13")),
         "info: the environment's wheel runtime")
    L.eq(info["cupti"]["path"],
         os.path.realpath(os.path.join(vsp, "nvidia", "cuda_cupti", "lib", "libcupti.so.13")),
         "info: the wheel's CUPTI")
    L.eq(info["cupti"]["chosen_as"], "the CUDA runtime's pip wheel layout (nvidia/cuda_cupti/lib)",
         "info: why")
    rc, out, err = L.run([c.gmp, "info"], L.env_with(c, VIRTUAL_ENV=venv))
    L.check("chosen as: the CUDA runtime's pip wheel layout" in out, "info text says why: " + out)
    # the simulator's CUDA 12 wheel personality, when it exists
    sp12 = None
    root12 = os.path.join(sim, "cuda12")  # GMP_SIM_WHEEL_DIR (tests/simcuda/CMakeLists.txt)
    if os.path.exists(os.path.join(root12, "site-packages", "nvidia", "cuda_runtime", "lib",
                                   "libcudart.so.12")):
        sp12 = os.path.join(root12, "site-packages")
    if not sp12:
        print("SKIP: CUDA 12 wheel personality (no cuda12/site-packages/nvidia/cuda_runtime/lib/"
              "libcudart.so.12 in the simulator's build directory)")
    else:
        rt12 = os.path.join(sp12, "nvidia", "cuda_runtime", "lib", "libcudart.so.12")
        cu12 = os.path.join(sp12, "nvidia", "cuda_cupti", "lib", "libcupti.so.12")
        env12 = L.env_with(c, LD_LIBRARY_PATH=os.path.join(root12, "driver"))  # driver 12.8
        case(c, "wheel12", rt12, want=cu12, env=env12)
        case(c, "wheel12-own", rt12, own=cu12, want=cu12, env=env12)
    L.cleanup(c)
    L.finish("cupti_own")


if __name__ == "__main__":
    main()
