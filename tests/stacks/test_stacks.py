#!/usr/bin/env python3
"""Native stacks end to end: stack_app runs on the simulated device under
`gpumemprof run --stacks native`, then `gpumemprof report --format json` must give exact frames.

  test_stacks.py --gpumemprof BIN --simcuda DIR --progs DIR --src DIR --tmp DIR [--preload LIB] MODE
MODE: native-libunwind | native-glibc | native-fp   exact function, file, line (inlined frames too)
      stripped      a stripped copy: module+offset frames for the program, .dynsym names for the lib
      removed       copies removed (or replaced) before the report: "unknown" frames, exit 0
      debugfile     stripped copies with separate debug files (build-id dir, .gnu_debuglink)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

ap = argparse.ArgumentParser()
for a in ("gpumemprof", "simcuda", "progs", "src", "tmp"):
    ap.add_argument("--" + a, required=True)
ap.add_argument("--preload", default="")
ap.add_argument("mode")
args = ap.parse_args()

failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def markers():
    m = {}
    for f in ("stack_app.c", "stack_lib.c", "stack_dl.c"):
        with open(os.path.join(args.src, "progs", f)) as fh:
            for i, line in enumerate(fh, 1):
                for name in re.findall(r"@(\w+)", line):
                    if "/*" in line:
                        m[name] = (f, i)
    return m


M = markers()
work = os.path.join(args.tmp, args.mode)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

app = os.path.join(args.progs, "stack_app")
lib = os.path.join(args.progs, "libstack_lib.so")
dl = os.path.join(args.progs, "libstack_dl.so")
if args.mode in ("stripped", "removed", "debugfile"):
    # copies in a directory of their own: the app finds its library through LD_LIBRARY_PATH
    for f in (app, lib, dl):
        shutil.copy2(f, work)
    app, lib, dl = (os.path.join(work, os.path.basename(f)) for f in (app, lib, dl))
    if args.mode in ("stripped", "debugfile"):
        for f in (app, lib, dl):
            if args.mode == "debugfile":
                subprocess.run(["objcopy", "--only-keep-debug", f, f + ".debug"], check=True)
            subprocess.run(["strip", "--strip-all", f], check=True)
        if args.mode == "debugfile":
            # the program's debug file by build-id, the libraries' through .gnu_debuglink
            out = subprocess.run(["readelf", "-n", app], capture_output=True, text=True).stdout
            bid = re.search(r"Build ID: ([0-9a-f]+)", out).group(1)
            d = os.path.join(work, "debug", ".build-id", bid[:2])
            os.makedirs(d)
            shutil.move(app + ".debug", os.path.join(d, bid[2:] + ".debug"))
            for f in (lib, dl):
                subprocess.run(["objcopy", "--add-gnu-debuglink=" + f + ".debug", f], cwd=work,
                               check=True)

env = dict(os.environ)
for k in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD"):
    env.pop(k, None)
env["LD_LIBRARY_PATH"] = os.path.dirname(app) + ":" + args.simcuda
if args.preload:
    env["LD_PRELOAD"] = args.preload
env["LC_ALL"] = "C"
trace = os.path.join(work, "t.zst")
unwind = args.mode.split("-")[1] if args.mode.startswith("native-") else "libunwind"
cmd = [args.gpumemprof, "run", "-q", "--stacks", "native", "--stack-unwind", unwind, "-o", trace,
       "--force", "--", app, dl]
p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
if p.returncode != 0 or "stack_app: ok" not in p.stdout:
    print(f"FAIL: {' '.join(cmd)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    sys.exit(1)

if args.mode == "removed":
    os.unlink(app)               # removed: "file missing"
    shutil.copy2("/bin/true", lib)  # rebuilt: another build-id
    os.unlink(dl)

rep = [args.gpumemprof, "report", "--format", "json", trace]
if args.mode == "debugfile":
    rep += ["--debug-dir", os.path.join(work, "debug")]
r = subprocess.run(rep, env=env, capture_output=True, text=True, timeout=60)
if r.returncode != 0:
    print(f"FAIL: {' '.join(rep)}: exit {r.returncode}\n{r.stderr}")
    sys.exit(1)
doc = json.loads(r.stdout)
text = subprocess.run(rep[:2] + rep[4:], env=env, capture_output=True, text=True, timeout=60)
check("text report exit", text.returncode, 0)

by_size = {}
for e in doc["live_at_peak"]:
    by_size[e["bytes"]] = e["stack"] or []  # schema 2: null when none was recorded
MiB = 1 << 20


def frames(st, n):
    return [(f["function"], os.path.basename(f["file"]) if f["file"] else None, f["line"],
             f.get("inlined", False)) for f in st[:n]]


def at(name, fn, inlined=False):
    f, line = M[name]
    return (fn, f, line, inlined)


want = {
    3 * MiB: [at("lib_cudaMalloc", "lib_helper", True), at("lib_call_helper", "stack_lib_entry"),
              at("app_call_lib", "app_inlined", True), at("app_call_inlined", "app_outer"),
              at("main_call_outer", "main")],
    5 * MiB: [at("app_cudaMalloc", "app_direct"), at("main_call_direct", "main")],
    7 * MiB: [at("dl_cudaMalloc", "stack_dl_entry")],
}

if args.mode.startswith("native-") or args.mode == "debugfile":
    for size, w in want.items():
        check(f"{size // MiB} MiB stack", frames(by_size.get(size, []), len(w)), w)
    # no frame of the agent or of the CUDA libraries
    for size in want:
        for f in by_size.get(size, []):
            mod = f.get("module") or ""
            if re.search(r"libgpumemprof_agent|libcudart|libcuda\.|libcupti|libunwind", mod):
                failures.append(f"{size // MiB} MiB stack has a frame of {mod}")
    if "Live at the peak, by call stack" not in text.stdout or \
            "stack_lib_entry (stack_lib.c:%d)" % M["lib_call_helper"][1] not in text.stdout:
        failures.append("text report: no stack table with stack_lib_entry:\n" + text.stdout)
elif args.mode == "stripped":
    st = by_size.get(3 * MiB, [])
    check("stripped: lib frame from .dynsym",
          [(f["function"], f["line"]) for f in st[:1]], [("stack_lib_entry", 0)])
    app_frames = [f for f in st if (f.get("module") or "").startswith(app + "+0x")]
    check("stripped: program frames", len(app_frames) >= 2, True)
    for f in app_frames:
        check("stripped: program frame function", f["function"], None)
        check("stripped: program frame reason", f.get("unknown"), "no symbol")
elif args.mode == "removed":
    reasons = {}
    for size in want:
        for f in by_size.get(size, []):
            mod = f.get("module") or ""
            for path in (app, lib, dl):
                if mod.startswith(path + "+0x"):
                    reasons.setdefault(os.path.basename(path), set()).add(
                        (f["function"], f.get("unknown")))
    check("removed: program", reasons.get("stack_app"), {(None, "file missing")})
    check("removed: replaced library", reasons.get("libstack_lib.so"),
          {(None, "build-id mismatch")})
    check("removed: dlopened library", reasons.get("libstack_dl.so"), {(None, "file missing")})

if failures:
    print("FAIL\n  " + "\n  ".join(failures))
    print(json.dumps(doc["live_at_peak"], indent=1)[:6000])
    sys.exit(1)
print("ok")
