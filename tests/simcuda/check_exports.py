#!/usr/bin/env python3
"""simcuda_exported_api: the simulated libraries export exactly the toolkit's API (README "API surface").

The oracle is what gen_api_stubs.py read from the CUDA toolkit (nm -D of the stub libcuda.so,
libcudart.so.13, libcupti.so.13: oracle_*.txt) and the headers (headers_only_*.txt: functions the
headers declare with the library's prefix that the library does not export; must be empty, so a
header function the oracle lacks shows up here). For each simulated library (the CUDA 13 build and
the CUDA 12 personality, whose libcuda.so.1 must lack what cudaTypedefs.h dates after 12.8:
oracle_libcuda_older.txt; its cuGetProcAddress must not find it either) it compares the exported
function names with the oracle (libcuda.so.1 may
also export the simulator's own simcuda_* hooks), checks the symbol versions of libcudart/libcupti,
that every library loads (ctypes, RTLD_NOW) and the versions each reports. Prints how many entry
points are hand-written (strong) and generated not-supported stubs (weak).
Names the toolkit exports without a C prototype in its headers get a stub whose result is a guess
(README "API surface"); they must be in the reviewed list `unprototyped.txt` beside this script, so
a new one fails here until someone has looked at what it returns.
Usage: check_exports.py --nm NM --gen DIR --simdir DIR --wheel DIR
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def exports(nm, lib):
    out = subprocess.check_output([nm, "-D", "--defined-only", lib], text=True)
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("T", "W", "i"):
            name, _, ver = parts[2].partition("@")
            syms[name] = (parts[1], ver.lstrip("@"))
    return syms


def read_list(path):
    with open(path) as f:
        return {l.strip() for l in f if l.strip() and not l.startswith("#")}


def check_lib(nm, gen, oracle_name, path, version_tag, extra_prefix=None):
    oracle = read_list(os.path.join(gen, "oracle_%s.txt" % oracle_name))
    hdr_only = read_list(os.path.join(gen, "headers_only_%s.txt" % oracle_name.replace("_older", "")))
    if hdr_only:
        fail("%s: the headers declare %d functions the toolkit library does not export: %s"
             % (oracle_name, len(hdr_only), " ".join(sorted(hdr_only)[:20])))
    syms = exports(nm, path)
    names = {n for n in syms if not (extra_prefix and n.startswith(extra_prefix))}
    missing = sorted(oracle - names)
    extra = sorted(names - oracle)
    strong = sum(1 for n in names & oracle if syms[n][0] == "T")
    weak = sum(1 for n in names & oracle if syms[n][0] == "W")
    print("%-70s exports %4d of %4d oracle functions (%d hand-written, %d generated), %d extra"
          % (path, len(names & oracle), len(oracle), strong, weak, len(extra)))
    if missing:
        fail("%s lacks %d: %s" % (path, len(missing), " ".join(missing[:30])))
    if extra:
        fail("%s exports %d functions the toolkit does not: %s" % (path, len(extra), " ".join(extra[:30])))
    if version_tag:
        wrong = sorted(n for n in names if syms[n][1] != version_tag)
        if wrong:
            fail("%s: %d symbols not at version %s: %s" % (path, len(wrong), version_tag, " ".join(wrong[:10])))


def call_version(lib, fn, argtype=ctypes.c_int):
    v = argtype(0)
    r = getattr(lib, fn)(ctypes.byref(v))
    return r, v.value


def check_older_procaddr(path, gen):
    """The CUDA 12 personality's cuGetProcAddress finds none of the driver functions newer than it
    (newer_libcuda.txt, dated by cudaTypedefs.h): a base name it still has (cuCtxGetDevice) gives
    an exported, older ABI, a base name it lacks (cuMemPrefetchBatchAsync) SYMBOL_NOT_FOUND."""
    newer = {}
    with open(os.path.join(gen, "newer_libcuda.txt")) as f:
        for line in f:
            name, ver = line.split()
            newer[name] = int(ver)
    try:
        drv = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        fail("%s does not load: %s" % (path, e))
        return
    oracle = read_list(os.path.join(gen, "oracle_libcuda_older.txt"))
    exported = {ctypes.cast(getattr(drv, n), ctypes.c_void_p).value: n for n in oracle}
    gpa = drv.cuGetProcAddress_v2
    gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                    ctypes.POINTER(ctypes.c_int)]
    bases = sorted({re.sub(r"(_v\d+)?(_ptds|_ptsz)?$", "", n) for n in newer})
    found = absent = 0
    for base in bases:
        for flags in (1, 2):  # LEGACY_STREAM, PER_THREAD_DEFAULT_STREAM
            pfn, status = ctypes.c_void_p(0), ctypes.c_int(-1)
            r = gpa(base.encode(), ctypes.byref(pfn), 12080, flags, ctypes.byref(status))
            if r != 0:
                fail("cuGetProcAddress_v2(%s, 12080, %d) of %s: %d" % (base, flags, path, r))
            elif status.value == 0 and pfn.value in exported:
                found += 1
            elif status.value == 1 and not pfn.value:  # CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
                absent += 1
            else:
                fail("cuGetProcAddress_v2(%s, 12080, %d) of %s: status %d, pointer %s not an exported "
                     "function (a function newer than the driver?)" % (base, flags, path, status.value,
                                                                         hex(pfn.value or 0)))
    print("%s hides %d functions newer than 12.8 (%s); cuGetProcAddress: %d older ABIs, %d not found"
          % (path, len(newer), " ".join(sorted(newer)[:3]) + " ...", found, absent))


def main():
    ap = argparse.ArgumentParser()
    for a in ("nm", "gen", "simdir", "wheel"):
        ap.add_argument("--" + a, required=True)
    a = ap.parse_args()
    sim, wheel = a.simdir, a.wheel
    libs13 = [("libcuda", os.path.join(sim, "libcuda.so.1"), "", "simcuda_"),
              ("libcudart", os.path.join(sim, "libcudart.so.13"), "libcudart.so.13", None),
              ("libcupti", os.path.join(sim, "libcupti.so.13"), "libcupti.so.13", None)]
    site = os.path.join(wheel, "site-packages", "nvidia")
    libs12 = [("libcuda_older", os.path.join(wheel, "driver", "libcuda.so.1"), "", "simcuda_"),
              ("libcudart", os.path.join(site, "cuda_runtime", "lib", "libcudart.so.12"), "libcudart.so.12", None),
              ("libcupti", os.path.join(site, "cuda_cupti", "lib", "libcupti.so.12"), "libcupti.so.12", None)]
    for oracle, path, tag, prefix in libs13 + libs12:
        check_lib(a.nm, a.gen, oracle, path, tag, prefix)
    reviewed = read_list(os.path.join(os.path.dirname(os.path.abspath(__file__)), "unprototyped.txt"))
    for lib in ("libcuda", "libcudart", "libcupti"):
        new = sorted(read_list(os.path.join(a.gen, "unprototyped_%s.txt" % lib)) - reviewed)
        if new:
            fail("%s exports %d functions without a C prototype in the headers that are not in "
                 "unprototyped.txt (review what their stubs return, then add them): %s"
                 % (lib, len(new), " ".join(new)))
    for extra in ("libcudart.so", "libcupti.so"):
        for sub in ("cuda_runtime", "cuda_cupti"):
            if os.path.lexists(os.path.join(site, sub, "lib", extra)):
                fail("the wheel layout has %s in %s (a wheel ships the soname only)" % (extra, sub))

    # every library loads (RTLD_NOW: all its symbols resolve) and reports its personality's versions
    # (CUDA 13: the headers' CUDA_VERSION 13000 and CUPTI_API_VERSION 130001; CUDA 12: 12.8, CUPTI 26)
    for libs, want in ((libs13, (13000, 13000, 130001)), (libs12, (12080, 12080, 26))):
        handles = []
        for _, path, _, _ in libs:
            try:
                handles.append(ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL))
            except OSError as e:
                fail("%s does not load: %s" % (path, e))
                handles.append(None)
        if None in handles:
            continue
        drv, rt, cupti = handles
        got = (call_version(drv, "cuDriverGetVersion"), call_version(rt, "cudaRuntimeGetVersion"),
               call_version(cupti, "cuptiGetVersion", ctypes.c_uint32))
        for (r, v), w, what in zip(got, want, ("cuDriverGetVersion", "cudaRuntimeGetVersion", "cuptiGetVersion")):
            if r != 0 or v != w:
                fail("%s of %s: result %d, version %d, want %d" % (what, libs[0][1], r, v, w))
        print("%s: driver %d, runtime %d, CUPTI %d" % (os.path.dirname(libs[1][1]), got[0][1], got[1][1], got[2][1]))
    check_older_procaddr(os.path.join(wheel, "driver", "libcuda.so.1"), a.gen)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
