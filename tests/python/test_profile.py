#!/usr/bin/env python3
"""The Python package gpumemprof (agent/python/gpumemprof: profile(), its decorator, late start,
pip install), end to end on the simulated device with Debian's numba (python3-numba 0.56, a real
CUDA client: it calls the driver's cuMemAlloc through ctypes; see tests/simcuda/test_numba.py).

  test_profile.py --gpumemprof BIN --pkg DIR --wheel DIR --python EXE --tmp DIR [--preload LIB] MODE
MODE: inproc  no `gpumemprof run`: `import gpumemprof` before CUDA (the agent armed, started by the
              program's cuInit) gives a block's exact peak and net bytes, the top sites at the peak
              (file:line of the program, also after more than the journal's 4,096 changes),
              nested scopes, a thread's allocation counted in the enclosing scope, the decorator's
              accumulation (calls, mean and max peak) and the live bytes; and `import gpumemprof`
              after numba initialized CUDA and allocated (late start): that memory is a baseline,
              its free is counted in baseline_frees and not in freed_bytes, said so in the result;
              a child process started before CUDA is initialized inherits the armed variables: it
              records nothing and says nothing unless it imports gpumemprof itself (no trace file
              anywhere)
      run     the same program under `gpumemprof run`: the same figures from the injected agent,
              the blocks are ranges of the trace with the allocations inside them, and the top
              site's stack id is the trace's stack of that allocation
      pip     `pip install --no-index --no-build-isolation --target DIR` of the build's package
              (Debian's pip and setuptools, no download) and a venv: the copy finds its agent and
              registers the pytest11 entry point; the sitecustomize is not installed; a copy that
              finds no agent says which package was imported from where and what it tried; a
              package of the same name without __product__ (as stormlog's) is told apart
Oracles: numba's source (device_array(n, uint8) asks cuMemAlloc for n bytes) and the simulated
driver's own accounting (numba's ctx.get_memory_info(): its reserved bytes, every size being a
multiple of its 256-byte alignment). Exit 77 when numba is absent."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

ap = argparse.ArgumentParser()
for a in ("gpumemprof", "pkg", "wheel", "python", "tmp"):
    ap.add_argument("--" + a, required=True)
ap.add_argument("--preload", default="")
ap.add_argument("mode", choices=("inproc", "run", "pip"))
args = ap.parse_args()

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "progs", "profile_prog.py")
MIB = 1 << 20
fails = []


def check(what, got, want):
    if got != want:
        fails.append("%s: got %r, want %r" % (what, got, want))


def finish():
    if fails:
        print("FAIL\n  " + "\n  ".join(fails))
        sys.exit(1)
    print("ok")
    sys.exit(0)


if subprocess.run([args.python, "-c", "import numba.cuda"], stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL).returncode != 0:
    print("SKIP: %s has no numba (python3-numba)" % args.python)
    sys.exit(77)

work = os.path.join(args.tmp, "profile-" + args.mode)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = {k: v for k, v in os.environ.items()
       if not k.startswith(("SIMCUDA_", "GPUMEMPROF_", "SIMTEST_", "NUMBA_", "PYTHON"))
       and k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD",
                     "LD_LIBRARY_PATH")}
env["LC_ALL"] = "C"
env["NUMBA_CUDA_DRIVER"] = os.path.join(args.wheel, "driver", "libcuda.so.1")
env["NUMBA_CACHE_DIR"] = work
CUPTI = os.path.join(args.wheel, "site-packages", "nvidia", "cuda_cupti", "lib", "libcupti.so.12")
if args.preload:
    env["LD_PRELOAD"] = args.preload
    env["ASAN_OPTIONS"] = "detect_leaks=0"

lines = {}
with open(PROG) as fh:
    for i, line in enumerate(fh, 1):
        for k in re.findall(r"# (SITE-[A-Z]+)", line):
            lines[k] = "%s:%d" % (PROG, i)


def run_prog(mode, under_run=False, pythonpath=None, extra_env=None, cwd=None):
    e = dict(env)
    e["PYTHONPATH"] = pythonpath or args.pkg
    e.update(extra_env or {})
    if under_run:
        trace = os.path.join(work, "p.zst")
        cmd = [args.gpumemprof, "run", "-q", "--cupti", CUPTI, "-o", trace, "--",
               args.python, PROG, mode]
    else:
        e["GPUMEMPROF_CUPTI"] = CUPTI  # the CUDA 12 CUPTI of the simulated wheels, as --cupti
        cmd = [args.python, PROG, mode]
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240,
                       cwd=cwd)
    if p.returncode != 0:
        fails.append("%s %s: exit %d: %s" % (mode, "run" if under_run else "",
                                             p.returncode, p.stderr.decode()[-1500:]))
        finish()
    return json.loads(p.stdout.decode()), p.stderr.decode()


def dev0(res, what):
    d = res.get("devices", {}).get("0")
    if d is None:
        fails.append("%s: no device 0 in %r" % (what, res))
        finish()
    return d


def sites(d):
    return [(s["bytes"], s["allocs"], s["where"]) for s in d["top_sites"]]


def check_early(out, under_run):
    o = out["oracle"]
    check("product", out["product"].startswith("gpumemprof"), True)
    st = out["status"]
    check("status once CUDA is up", st["state"], "on")
    check("late", st["late"], False)
    if under_run:
        check("status before CUDA (run)", out["status0"], {"state": "waiting", "in_process": False})
        check("injected by run", (st["injected"], st["in_process"], st["trace"]), (True, False, True))
    else:
        check("status before CUDA", out["status0"], {"state": "waiting", "in_process": True})
        check("started in the process", (st["injected"], st["in_process"], st["trace"]),
              (False, True, False))
    b = dev0(out["block"], "block")
    # the driver's own figures, and numba's sizes: 1 + 3 MiB live together, then 1 MiB freed,
    # 1/4 MiB and 2,100 arrays of 256 bytes allocated and freed
    check("block peak increase = the driver's", b["peak_increase_bytes"], o["peak"])
    check("block peak increase (numba's sizes)", b["peak_increase_bytes"], 4 * MIB)
    check("block net = the driver's", b["net_bytes"], o["net"])
    check("block net (numba's sizes)", b["net_bytes"], 3 * MIB + MIB // 4)
    check("block start (the array kept from before)", b["start_bytes"], MIB // 2)
    check("block peak", b["peak_bytes"], MIB // 2 + 4 * MIB)
    check("block allocated", b["allocated_bytes"], 4 * MIB + MIB // 4 + 2100 * 256)
    check("block freed", b["freed_bytes"], MIB + 2100 * 256)
    check("block calls", (b["allocs"], b["frees"], b["baseline_frees"]), (2103, 2101, 0))
    check("block end", b["end_bytes"], b["start_bytes"] + b["net_bytes"])
    check("block's sites at the peak (after 4,200 changes)", sites(b),
          [(3 * MIB, 1, lines["SITE-B"]), (MIB, 1, lines["SITE-A"]),
           (MIB // 2, 1, lines["SITE-KEEP"])])
    check("block ok", (out["block"]["ok"], out["block"]["late"], out["block"]["baseline"]),
          (True, False, ""))
    inner, outer = dev0(out["inner"], "inner"), dev0(out["outer"], "outer")
    check("inner peak increase = the driver's", inner["peak_increase_bytes"], o["inner_peak"])
    check("inner", (inner["peak_increase_bytes"], inner["net_bytes"], inner["allocs"]),
          (2 * MIB, 0, 1))
    check("outer net = the driver's", outer["net_bytes"], o["outer_net"])
    # the thread's 1 MiB is the process's: counted in the scope open on the main thread
    check("outer (inner's 2 MiB, the thread's 1 MiB, 1 MiB kept)",
          (outer["peak_increase_bytes"], outer["net_bytes"], outer["allocated_bytes"],
           outer["freed_bytes"], outer["allocs"], outer["frees"]),
          (2 * MIB, MIB, 4 * MIB, 3 * MIB, 3, 2))
    check("inner's top site", sites(inner)[1], (2 * MIB, 1, lines["SITE-INNER"]))
    s = out["stats"]
    check("decorator: calls", s["calls"], 3)
    check("decorator: max peak increase", s["max_peak_increase_bytes"], 3 * MIB)
    check("decorator: mean peak increase", s["mean_peak_increase_bytes"], 2 * MIB)
    check("decorator: net", s["total_net_bytes"], 0)
    start = b["end_bytes"] + outer["net_bytes"]  # live before the steps
    check("decorator: max peak", s["max_peak_bytes"], start + 3 * MIB)
    check("decorator: mean peak", s["mean_peak_bytes"], start + 2 * MIB)
    check("@profile without arguments", out["bare"], [7, 1, "bare"])
    check("summary", out["summary"], ["bare", "step"])
    check("current bytes = the driver's", out["current"], {"0": o["current"] - o["base"]})


# ---- inproc ----
if args.mode == "inproc":
    out, err = run_prog("early")
    check_early(out, False)
    check("its line on stderr", "recording to an unnamed temporary file" in err, True)
    late, _ = run_prog("late")
    check("late status", late["status"], {"state": "on", "late": True, "in_process": True})
    d = dev0(late["late"], "late-block")
    # the 2 MiB array allocated before the import is a baseline: its free changes no figure
    check("late: allocated, freed, baseline frees",
          (d["allocated_bytes"], d["freed_bytes"], d["baseline_frees"], d["start_bytes"]),
          (MIB, 0, 1, 0))
    check("late: net is the driver's delta plus the baseline freed",
          d["net_bytes"], late["oracle"]["delta"] + 2 * MIB)
    check("late: said in the result", (late["late"]["late"], "baseline" in late["late"]["baseline"]),
          (True, True))
    check("late: its site", sites(d), [(MIB, 1, lines["SITE-LATE"])])
    cwd = os.path.join(work, "spawn")
    os.makedirs(cwd)
    sp, _ = run_prog("spawn", cwd=cwd)
    check("spawn: armed", sp["status0"], "waiting")
    check("spawn: a child that does not import gpumemprof: runs, silent",
          sp["plain_child"], [0, ["allocated"], ""])
    rc, res, err = sp["gpumemprof_child"]
    check("spawn: a child that imports gpumemprof profiles itself", [rc, res], [0, ["on", True, 2 * MIB]])
    check("spawn: the parent", sp["parent"], ["on", MIB])
    check("spawn: no trace file written", os.listdir(cwd), [])
    finish()

# ---- run ----
if args.mode == "run":
    out, _ = run_prog("early", under_run=True)
    check_early(out, True)
    d = subprocess.run([args.gpumemprof, "dump", "--json", os.path.join(work, "p.zst")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    recs = [json.loads(x) for x in d.stdout.decode().splitlines() if x.strip()]
    paths = {r["path"] for r in recs if r.get("type") == "range"}
    check("the scopes are ranges of the trace", {"block", "outer", "outer/inner", "step", "bare"} <= paths,
          True)
    allocs = [r for r in recs if r.get("type") == "alloc"]
    in_block = sorted(r["size"] for r in allocs if r.get("path") == "block")
    check("allocations in range block", in_block, sorted([MIB, 3 * MIB, MIB // 4] + [256] * 2100))
    check("allocations in outer/inner", [r["size"] for r in allocs if r.get("path") == "outer/inner"],
          [2 * MIB])
    big = [r for r in allocs if r["size"] == 3 * MIB and r.get("path") == "block"]
    top = out["block"]["devices"]["0"]["top_sites"][0]
    check("the top site's stack is the trace's", [top["stack"]], [r["stack"] for r in big])
    finish()

# ---- pip ----
target = os.path.join(work, "target")
p = subprocess.run([args.python, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation",
                    "--target", target, args.pkg], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   timeout=240, env=dict(env, PIP_DISABLE_PIP_VERSION_CHECK="1"))
if p.returncode != 0:
    fails.append("pip install --target: %s" % p.stdout.decode()[-1500:])
    finish()
check("installed: the package only", sorted(n for n in os.listdir(target) if not n.endswith(".dist-info")),
      ["gpumemprof"])
ep = [os.path.join(target, n, "entry_points.txt") for n in os.listdir(target) if n.endswith(".dist-info")]
check("pytest11 entry point", bool(ep) and "gpumemprof = gpumemprof.pytest_plugin" in open(ep[0]).read(),
      True)
out, _ = run_prog("early", pythonpath=target)
check_early(out, False)
# the same from a venv of Debian's python (its setuptools through --system-site-packages)
venv = os.path.join(work, "venv")
p = subprocess.run([args.python, "-m", "venv", "--system-site-packages", venv], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, timeout=240)
vpy = os.path.join(venv, "bin", "python")
if p.returncode == 0:
    p = subprocess.run([vpy, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", args.pkg],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240,
                       env=dict(env, PIP_DISABLE_PIP_VERSION_CHECK="1"))
if p.returncode != 0:
    fails.append("venv pip install: %s" % p.stdout.decode()[-1500:])
    finish()
code = ("import importlib.metadata as m, gpumemprof; "
        "print(gpumemprof.agent_path()); print(gpumemprof.__file__); "
        "print([e.value for e in m.entry_points(group='pytest11') if e.name == 'gpumemprof'])")
p = subprocess.run([vpy, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                   cwd=work, env=dict(env, GPUMEMPROF_NO_AUTOSTART="1"))
got = p.stdout.decode().splitlines()
check("venv: the agent found", len(got) == 3 and os.path.exists(got[0]), True)
check("venv: the package is the venv's", len(got) == 3 and got[1].startswith(venv), True)
check("venv: pytest11", got[2:], ["['gpumemprof.pytest_plugin']"])
# a copy that finds no agent: says which package, from where, and what it tried
lone = os.path.join(work, "lone")
shutil.copytree(os.path.join(target, "gpumemprof"), os.path.join(lone, "gpumemprof"))
os.remove(os.path.join(lone, "gpumemprof", "_where.py"))
code = ("import gpumemprof; s = gpumemprof.status(); print(s.state); print(s.message); "
        "p = gpumemprof.profile('x')\nwith p: pass\nprint(p.result.ok, p.result.reason == s.message)")
p = subprocess.run([args.python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   timeout=120, env=dict(env, PYTHONPATH=lone))
got = p.stdout.decode().splitlines()
check("no agent: state", got[:1], ["unavailable"])
check("no agent: the message names this package's folder and the variable",
      len(got) > 1 and os.path.join(lone, "gpumemprof") in got[1] and "GPUMEMPROF_AGENT" in got[1], True)
check("no agent: profile() still runs the block, not counted", got[2:], ["False True"])
# GPUMEMPROF_AGENT names the agent for that copy
agent_lib = os.path.normpath(os.path.join(args.pkg, "..", "libgpumemprof_agent.so"))
p = subprocess.run([args.python, "-c", "import gpumemprof; print(gpumemprof.status().state, "
                    "gpumemprof.agent_path())"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   timeout=120, env=dict(env, PYTHONPATH=lone, GPUMEMPROF_AGENT=agent_lib))
check("GPUMEMPROF_AGENT", p.stdout.decode().split(), ["waiting", agent_lib])
# another package named gpumemprof first on the path (stormlog installs one): no __product__
other = os.path.join(work, "other")
os.makedirs(os.path.join(other, "gpumemprof"))
with open(os.path.join(other, "gpumemprof", "__init__.py"), "w") as fh:
    fh.write("def profile_function(f):\n    return f\n")
p = subprocess.run([args.python, "-c", "import gpumemprof; print(getattr(gpumemprof, '__product__', None))"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                   env=dict(env, PYTHONPATH=other + os.pathsep + target))
check("a shadowing package has no __product__", p.stdout.decode().split(), ["None"])
finish()
