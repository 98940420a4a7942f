#!/usr/bin/env python3
"""Builds NVIDIA's CUDA samples (../shared/cuda-samples beside the repository; never copied in) as
their README says a user builds them: nvcc -cudart shared against the real toolkit headers and
libraries, so that at run time LD_LIBRARY_PATH picks the simulated libcudart/libcuda. Kernel
files that a sample loads itself (a fatbin or PTX next to the program) are built too. Samples
build in parallel (one nvcc per core); a sample already built and newer than its sources is
kept. Exits 77 (ctest: skipped) when the samples are absent.
Usage: build_samples.py --samples DIR --out DIR --nvcc PATH [--cuda DIR] [--jobs N]"""
import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys
import time

# kernels a sample loads at run time: (sample, source, output, nvcc mode)
LOADED = {
    "simpleDrvRuntime": ("vectorAdd_kernel.cu", "vectorAdd_kernel64.fatbin", "-fatbin"),
    "vectorAddMMAP": ("vectorAdd_kernel.cu", "vectorAdd_kernel64.fatbin", "-fatbin"),
    "memMapIPCDrv": ("memMapIpc_kernel.cu", "memMapIpc_kernel64.ptx", "-ptx"),
}


def sources(d, name):
    loaded = LOADED.get(name, ("",))[0]
    srcs = sorted(f for f in glob.glob(os.path.join(d, "*.cu")) + glob.glob(os.path.join(d, "*.cpp"))
                  if os.path.basename(f) != loaded)
    text = ""
    for f in glob.glob(os.path.join(d, "*")):
        if f.endswith((".cu", ".cpp", ".h", ".hpp")):
            with open(f, encoding="utf-8", errors="replace") as fh:
                text += fh.read()
    return srcs, text


def build(args, d):
    name = os.path.basename(d.rstrip("/"))
    out = os.path.join(args.out, name)
    os.makedirs(out, exist_ok=True)
    exe = os.path.join(out, name)
    srcs, text = sources(d, name)
    extra = []
    common = os.path.join(args.samples, "Common")
    if '"helper_multiprocess.h"' in text or "<helper_multiprocess.h>" in text:
        extra.append(os.path.join(common, "helper_multiprocess.cpp"))
    if '"multithreading.h"' in text:
        extra.append(os.path.join(common, "multithreading.cpp"))
    inputs = srcs + extra
    newest = max(os.path.getmtime(f) for f in inputs)
    cmds = []
    if not (os.path.exists(exe) and os.path.getmtime(exe) >= newest):
        cmds.append([args.nvcc, "-cudart", "shared", "-g", "-O1", "-arch=sm_90", "-I", common,
                     "-o", exe] + inputs + ["-L" + os.path.join(args.cuda, "lib64", "stubs"),
                                            "-lcuda"])
    if name in LOADED:
        src, obj, mode = LOADED[name]
        target = os.path.join(out, obj)
        if not os.path.exists(target):
            cmds.append([args.nvcc, mode, "-arch=sm_90", "-o", target, os.path.join(d, src)])
    for c in cmds:
        p = subprocess.run(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            return name, False, p.stdout.decode("utf-8", "replace")
    return name, True, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--cuda", default="/usr/local/cuda")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    dirs = sorted(glob.glob(os.path.join(args.samples, "Samples", "*", "*", "")))
    if not dirs:
        print("SKIP: no CUDA samples in %s" % args.samples)
        return 77
    t0 = time.monotonic()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        for name, ok, log in ex.map(lambda d: build(args, d), dirs):
            print("%-28s %s" % (name, "ok" if ok else "FAILED"))
            if not ok:
                failed.append(name)
                print(log)
    print("built %d samples in %.1f s with %d jobs" % (len(dirs) - len(failed),
                                                     time.monotonic() - t0, args.jobs))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
