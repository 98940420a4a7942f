#!/usr/bin/env python3
"""gpumemprof.trace(model) and the pytest plugin, end to end: Debian's python3 with its real torch
(1.13, CPU) and numba (0.56, a real CUDA client) on the simulated CUDA 12 driver.

  test_pyplugin.py --gpumemprof BIN --pkg DIR --wheel DIR --src DIR --tmp DIR [--python EXE]
                   [--preload LIB] MODE
MODE: trace   progs/py_trace.py: a torch model whose layers' forward (and one backward) allocate
              numba device arrays of known sizes, one layer called twice. Without `gpumemprof
              run` (the package starts the agent late, in the process) every layer's figures,
              forward and backward, are the sizes numba asks for (peak, peak increase,
              allocated, freed, calls; the top site's line); print_summary names every row;
              fragmentation is None (numba has no cache), and with PyTorch's CUDA counters stood
              in, their reserved - allocated when each call ended, the largest over the calls; a
              layer that raises (its scope closed at the block's end, the exception through);
              without an agent library the block runs unprofiled and print_summary says why. Under `gpumemprof run` the trace's
              ranges are those `run --layers` gives the same model without trace(), and under
              `run --layers` with trace() too (one range per layer, not two); the report's
              per-range figures, computed from the trace file, equal trace()'s.
      pytest  progs/pytest_gpu: the plugin from a pip install into a temporary target (its
              pytest11 entry point) and with -p: a test over its budget fails naming the size,
              the limit and the test's line; one under passes; a leak is caught and one within
              `leaks` passes; peak="device" counts what earlier tests left; a test's own failure
              stays its own; --gpumemprof's table and --gpumemprof-dir's files; a baseline
              written, then compared (a 150% growth fails, 5% is within the 10% tolerance) with a
              Markdown table; without the agent library, and for a marked test that never
              initializes CUDA, marked tests are skipped with the reason.
Exit 77: skipped (no numba or torch in the interpreter)."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

ap = argparse.ArgumentParser()
for a in ("gpumemprof", "pkg", "wheel", "src", "tmp"):
    ap.add_argument("--" + a, required=True)
ap.add_argument("--python", default="/usr/bin/python3")
ap.add_argument("--preload", default="")
ap.add_argument("mode", choices=("trace", "pytest"))
args = ap.parse_args()

KiB, MiB = 1 << 10, 1 << 20
failures = []


def check(what, got, want):
    if got != want:
        failures.append("%s: got %r, want %r" % (what, got, want))


def finish():
    if failures:
        print("FAIL\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("ok")
    sys.exit(0)


need = "import numba.cuda, torch" if args.mode == "trace" else "import numba.cuda, pytest"
if subprocess.run([args.python, "-c", need], stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL).returncode != 0:
    print("SKIP: %s lacks numba, torch or pytest (python3-numba, python3-torch, python3-pytest)"
          % args.python)
    sys.exit(77)

work = os.path.join(args.tmp, "pyplugin-" + args.mode)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
progs = os.path.join(args.src, "progs")
cupti = os.path.join(args.wheel, "site-packages", "nvidia", "cuda_cupti", "lib", "libcupti.so.12")


def markers(path):
    m = {}
    with open(path) as fh:
        for i, line in enumerate(fh, 1):
            for k in re.findall(r"# @(\w+)", line):
                m[k] = i
    return m


def env(pythonpath=None, **extra):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("SIMCUDA_", "GPUMEMPROF_", "NUMBA_", "PYTEST_"))
         and k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD",
                       "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    e["LC_ALL"] = "C"
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    # numba drives the CUDA 12 personality's driver (tests/simcuda/test_numba.py); the agent
    # started in the process takes the CUPTI of that personality
    e["NUMBA_CUDA_DRIVER"] = os.path.join(args.wheel, "driver", "libcuda.so.1")
    e["NUMBA_CACHE_DIR"] = work
    e["GPUMEMPROF_CUPTI"] = cupti
    if pythonpath:
        e["PYTHONPATH"] = pythonpath
    if args.preload:
        e["LD_PRELOAD"] = args.preload
        e["ASAN_OPTIONS"] = "detect_leaks=0"
    e.update(extra)
    return e


def run(cmd, e, cwd=None, timeout=180):
    p = subprocess.run(cmd, env=e, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    return p


# -- trace(model) ----------------------------------------------------------------------------------
def trace_mode():
    prog = os.path.join(progs, "py_trace.py")
    mk = markers(prog)
    where = {k: "%s:%d" % (prog, v) for k, v in mk.items()}
    # (name, phase): calls, peak, peak increase, allocated, freed, top site's line, its bytes.
    # Forward: enc keeps 1 MiB and uses 256 KiB for a while, norm (called twice) uses 128 KiB, dec
    # keeps 2 MiB and uses 512 KiB, head keeps 64 KiB; backward: Grow's backward (inside head's)
    # uses 4 MiB for a while. The top site is the one of the call with the largest peak increase
    # (the first of equal ones).
    F = 3 * MiB + 64 * KiB  # live once the forward is over
    want = [
        ("model", "forward", 1, 3 * MiB + 512 * KiB, 3 * MiB + 512 * KiB,
         4 * MiB + 64 * KiB, 1 * MiB, "keep", 2 * MiB),
        ("model.enc", "forward", 1, 1 * MiB + 256 * KiB, 1 * MiB + 256 * KiB,
         1 * MiB + 256 * KiB, 256 * KiB, "keep", 1 * MiB),
        ("model.enc.lin", "forward", 1, 1 * MiB, 0, 0, 0, "keep", 1 * MiB),
        ("model.norm", "forward", 2, 3 * MiB + 128 * KiB, 128 * KiB, 256 * KiB, 256 * KiB,
         "keep", 1 * MiB),
        ("model.dec", "forward", 1, 3 * MiB + 512 * KiB, 2 * MiB + 512 * KiB,
         2 * MiB + 512 * KiB, 512 * KiB, "keep", 2 * MiB),
        ("model.dec.lin", "forward", 1, 3 * MiB, 0, 0, 0, "keep", 2 * MiB),
        ("model.head", "forward", 1, F, 64 * KiB, 64 * KiB, 0, "keep", 2 * MiB),
        ("model", "backward", 1, F + 4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB, "bwd", 4 * MiB),
        ("model.head", "backward", 1, F + 4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB, "bwd", 4 * MiB),
        ("model.norm", "backward", 2, F, 0, 0, 0, "keep", 2 * MiB),
        ("model.dec", "backward", 1, F, 0, 0, 0, "keep", 2 * MiB),
        ("model.dec.lin", "backward", 1, F, 0, 0, 0, "keep", 2 * MiB),
        ("model.enc", "backward", 1, F, 0, 0, 0, "keep", 2 * MiB),
        ("model.enc.lin", "backward", 1, F, 0, 0, 0, "keep", 2 * MiB),
    ]
    # frag: PyTorch's counters stood in (reserved 8 MiB, allocated = live): 8 MiB minus what was
    # live when each call ended, the largest over the calls
    live_end = {("model.enc", "forward"): 1 * MiB, ("model.enc.lin", "forward"): 1 * MiB,
                ("model.norm", "forward"): 1 * MiB, ("model.dec", "forward"): 3 * MiB,
                ("model.dec.lin", "forward"): 3 * MiB}
    frag = {(w[0], w[1]): 8 * MiB - live_end.get((w[0], w[1]), F) for w in want}

    def check_layers(label, path, late, frags=None):
        try:
            with open(path) as fh:
                d = json.load(fh)
        except (OSError, ValueError) as e:
            failures.append("%s: no JSON: %s" % (label, e))
            return None
        check(label + ": ok", d.get("ok"), True)
        check(label + ": late", d.get("late"), late)
        got = [(l["name"], l["phase"], l["calls"], l["peak_bytes"], l["peak_increase_bytes"],
                l["allocated_bytes"], l["freed_bytes"],
                (l["top_site"] or {}).get("where"), (l["top_site"] or {}).get("bytes"))
               for l in d["layers"]]
        check(label + ": layers", got, [w[:7] + (where[w[7]], w[8]) for w in want])
        check(label + ": fragmentation", {(l["name"], l["phase"]): l["fragmentation_bytes"]
                                          for l in d["layers"]},
              frags or {(w[0], w[1]): None for w in want})
        for l in d["layers"]:
            if l["net_bytes"] != l["allocated_bytes"] - l["freed_bytes"] or l["total_s"] <= 0 or \
                    l["mean_s"] != l["total_s"] / l["calls"]:
                failures.append("%s: %s %s: net %r, time %r" % (label, l["name"], l["phase"],
                                                                 l["net_bytes"], l["total_s"]))
        return d

    # 1. without gpumemprof run: `import gpumemprof` starts the agent after numba initialized CUDA
    out = os.path.join(work, "inproc.json")
    p = run([args.python, prog, out, "trace"], env(args.pkg))
    if p.returncode != 0 or "ok" not in p.stdout.split():
        failures.append("in-process run: exit %d, %s" % (p.returncode, (p.stdout + p.stderr)[-1500:]))
    else:
        check_layers("in-process", out, True)
        lines = p.stdout.splitlines()
        rows = [l for l in lines if l.startswith("  ") and ("forward" in l or "backward" in l)]
        check("print_summary rows", [(r.split()[0], r.split()[1]) for r in rows],
              [(w[0], w[1]) for w in want])
        enc = next((r for r in rows if r.split()[:2] == ["model.enc", "forward"]), "")
        for text in ("1.25 MiB", "256.00 KiB", "py_trace.py:%d (1.00 MiB)" % mk["keep"]):
            if text not in enc:
                failures.append("print_summary: %r not in the model.enc row %r" % (text, enc))
        if not lines or not lines[0].startswith("gpumemprof.trace(model): 14 layer rows"):
            failures.append("print_summary head: %r" % lines[:1])
        if "note: the agent started after CUDA was initialized" not in p.stdout:
            failures.append("print_summary: no note of the late start")

    # frag: fragmentation_bytes from PyTorch's counters (stood in: Debian's torch has no CUDA)
    out = os.path.join(work, "frag.json")
    p = run([args.python, prog, out, "frag"], env(args.pkg))
    if p.returncode != 0:
        failures.append("frag run: exit %d, %s" % (p.returncode, (p.stdout + p.stderr)[-1500:]))
    else:
        check_layers("frag", out, True, frag)

    # a layer that raises: its scopes close at the end of the block, the exception goes through;
    # without an agent library the block runs unprofiled and says why
    raising = (
        "import numpy as np, torch, torch.nn as nn, gpumemprof\n"
        "from numba import cuda\n"
        "class Bad(nn.Module):\n"
        "    def forward(self, x):\n"
        "        self.a = cuda.device_array(1 << 20, dtype=np.uint8)\n"
        "        raise ValueError('boom')\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.bad = Bad(); self.lin = nn.Linear(2, 2)\n"
        "    def forward(self, x):\n"
        "        return self.bad(self.lin(x))\n"
        "m = M()\n"
        "try:\n"
        "    with gpumemprof.trace(m) as t:\n"
        "        m(torch.ones(2))\n"
        "except ValueError as e:\n"
        "    print('raised', e)\n"
        "print([(l.name, l.calls, l.allocated_bytes) for l in t.layers])\n"
        "with gpumemprof.profile('after') as p:\n"
        "    cuda.device_array(4096, dtype=np.uint8)\n"
        "print(t.ok, p.result.ok, p.result.allocated_bytes)\n")
    p = run([args.python, "-c", raising], env(args.pkg))
    check("a layer that raises", p.stdout.splitlines(),
          ["raised boom", "[('m', 1, %d), ('m.lin', 1, 0), ('m.bad', 1, %d)]" % (MiB, MiB),
           "True True 4096"])
    bare = os.path.join(work, "bare")
    shutil.copytree(os.path.join(args.pkg, "gpumemprof"), os.path.join(bare, "gpumemprof"),
                    ignore=shutil.ignore_patterns("_where.py", "__pycache__"))
    p = run([args.python, "-c", "import torch, gpumemprof\nm = torch.nn.Linear(2, 2)\n"
             "with gpumemprof.trace(m) as t:\n    m(torch.ones(2))\nt.print_summary()\n"
             "print(t.ok, t.layers)"], env(bare))
    if p.returncode != 0 or "gpumemprof.trace(m): not profiled: the gpumemprof package at" \
            not in p.stdout or "found no gpumemprof agent library" not in p.stdout or \
            not p.stdout.endswith("False []\n"):
        failures.append("no agent: exit %d, %r" % (p.returncode, (p.stdout + p.stderr)[-800:]))

    # 2. the trace's ranges: run --layers without trace(), run with trace(), run --layers with it
    reps = {}
    for label, opts, mode in (("layers", ["--layers"], "plain"), ("trace", [], "trace"),
                              ("layers+trace", ["--layers"], "trace")):
        t = os.path.join(work, label + ".zst")
        js = os.path.join(work, label + ".json")
        p = run([args.gpumemprof, "run", "-q", "--cupti", cupti, "-o", t, "--force"] + opts +
                ["--", args.python, prog, js, mode], env(args.pkg))
        if p.returncode != 0:
            failures.append("%s: exit %d, %s" % (label, p.returncode, (p.stdout + p.stderr)[-1500:]))
            continue
        if mode == "trace":
            check_layers(label, js, False)
        r = run([args.gpumemprof, "report", "-f", "json", "--top", "0", t], env())
        try:
            reps[label] = {x["path"]: (x["entered"], x["allocated_bytes"], x["freed_bytes"],
                                       x["peak_inside_bytes"])
                           for x in json.loads(r.stdout)["ranges"]}
        except (ValueError, KeyError) as e:
            failures.append("%s: report: %s %s" % (label, e, r.stderr[-500:]))
    if len(reps) == 3:
        check("trace()'s ranges against run --layers'", sorted(reps["trace"]),
              sorted(reps["layers"]))
        check("run --layers with trace(): ranges", reps["layers+trace"], reps["layers"])
        # the report, from the trace file, against trace()'s live figures
        path = {}
        for w in want:
            parts, n = [], w[0].split(".")
            for i in range(1, len(n) + 1):
                parts.append(".".join(n[:i]) + ("" if w[1] == "forward" else " (backward)"))
            path[(w[0], w[1])] = "/".join(parts)
        got = {path[(w[0], w[1])]: reps["trace"].get(path[(w[0], w[1])]) for w in want}
        check("the report's ranges against trace()'s figures", got,
              {path[(w[0], w[1])]: (w[2], w[5], w[6], w[4]) for w in want})


# -- the pytest plugin -------------------------------------------------------------------------------
def junit(path):
    """{test name: (outcome, message)} from pytest's JUnit XML."""
    out = {}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        failures.append("junit %s: %s" % (path, e))
        return out
    for tc in root.iter("testcase"):
        outcome, msg = "passed", ""
        for k in ("failure", "error", "skipped"):
            el = tc.find(k)
            if el is not None:
                outcome = k
                msg = (el.get("message") or "") + "\n" + (el.text or "")
                break
        out[tc.get("name")] = (outcome, msg)
    return out


def pytest_mode():
    tests = os.path.join(progs, "pytest_gpu")
    budget = os.path.join(tests, "test_gpu_budget.py")
    mk = markers(budget)
    rel = lambda k: "test_gpu_budget.py:%d" % mk[k]  # noqa: E731
    base = os.path.join(work, "baseline.json")
    keep = os.path.join(work, "keep")

    def pytest(label, pythonpath, extra, files, **envx):
        xml = os.path.join(work, label + ".xml")
        cmd = [args.python, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", tests,
               "--junitxml", xml, "-o", "junit_family=xunit1"] + extra + files
        p = run(cmd, env(pythonpath, **envx), cwd=tests)
        return p, junit(xml)

    # A. installed: pip into a temporary target (no download), the plugin by its entry point
    src = os.path.join(work, "pkgsrc")
    shutil.copytree(args.pkg, src, ignore=shutil.ignore_patterns("sitecustomize.py", "__pycache__"))
    target = os.path.join(work, "site")
    p = run([args.python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
             "--no-build-isolation", "--target", target, src], env())
    if p.returncode != 0:
        failures.append("pip install: exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-1500:]))
        return
    p, r = pytest("installed", target,
                  ["--gpumemprof", "--gpumemprof-dir", keep, "--gpumemprof-baseline", base],
                  [budget])
    check("installed: exit status", p.returncode, 1)
    for name, outcome in (("test_over_budget", "failure"), ("test_under_budget", "passed"),
                          ("test_leaks", "failure"), ("test_leak_allowed", "passed"),
                          ("test_device_peak", "failure"), ("test_unmarked", "passed"),
                          ("test_baseline_grows", "passed"), ("test_baseline_same", "passed"),
                          ("test_fails_by_itself", "failure")):
        check("installed: %s" % name, r.get(name, ("missing",))[0], outcome)
    says = {
        "test_over_budget": ["GPU memory peak 5.00 MiB (5242880 bytes above what was live when "
                             "the test began) is over the limit 4.00 MiB (4194304 bytes)",
                             "called from the test at %s (3.00 MiB live there" % rel("over_a")],
        "test_leaks": ["GPU memory leaked: 1.00 MiB (1048576 bytes)", "over the 0 B (0 bytes) "
                       "allowed", "called from the test at %s" % rel("leak")],
        "test_device_peak": ["GPU memory peak 6.50 MiB (6815744 bytes, the devices' live bytes) "
                             "is over the limit 6.00 MiB (6291456 bytes)",
                             "called from the test at %s (5.00 MiB" % rel("device")],
        "test_fails_by_itself": ["a failure of the test's own"],
    }
    for name, texts in says.items():
        msg = r.get(name, ("", ""))[1]
        for t in texts:
            if t not in msg:
                failures.append("installed: %s: %r not in %r" % (name, t, msg[-600:]))
    if "GPU memory" in r.get("test_fails_by_itself", ("", ""))[1]:
        failures.append("installed: test_fails_by_itself: a budget message in its own failure")
    # the table: peak, allocated, leaked of every test
    table = {}
    for line in p.stdout.splitlines():
        m = re.match(r"test_gpu_budget\.py::(\w+)\s+(\S+ \S+)\s+(\S+ \S+)\s+(\S+ \S+)", line)
        if m:
            table[m.group(1)] = m.groups()[1:]
    want_table = {"test_over_budget": ("5.00 MiB", "5.00 MiB", "0 B"),
                  "test_under_budget": ("4.00 MiB", "4.00 MiB", "0 B"),
                  "test_leaks": ("1.25 MiB", "1.25 MiB", "1.00 MiB"),
                  "test_leak_allowed": ("512.00 KiB", "512.00 KiB", "512.00 KiB"),
                  "test_device_peak": ("5.00 MiB", "5.00 MiB", "0 B"),
                  "test_unmarked": ("2.00 MiB", "2.00 MiB", "0 B"),
                  "test_baseline_grows": ("1.00 MiB", "1.00 MiB", "0 B"),
                  "test_baseline_same": ("2.00 MiB", "2.00 MiB", "0 B"),
                  "test_fails_by_itself": ("1.00 MiB", "1.00 MiB", "0 B")}
    check("installed: the table", table, want_table)
    # the baseline written (it did not exist), exact peaks
    try:
        with open(base) as fh:
            b = json.load(fh)["tests"]
        got = {k.split("::")[1]: v["peak_bytes"] for k, v in b.items()}
        want = {"test_over_budget": 5 * MiB, "test_under_budget": 4 * MiB,
                "test_leaks": 1 * MiB + 256 * KiB, "test_leak_allowed": 512 * KiB,
                "test_device_peak": 5 * MiB, "test_unmarked": 2 * MiB,
                "test_baseline_grows": 1 * MiB, "test_baseline_same": 2 * MiB,
                "test_fails_by_itself": 1 * MiB}
        check("the baseline written", got, want)
    except (OSError, ValueError, KeyError, IndexError) as e:
        failures.append("baseline %s: %s" % (base, e))
    # --gpumemprof-dir: the failing tests, each its figures and its top sites' stacks
    kept = sorted(os.listdir(keep)) if os.path.isdir(keep) else []
    check("--gpumemprof-dir files", kept,
          sorted("test_gpu_budget.py_%s.%s" % (n, x) for x in ("json", "zst") for n in
                 ("test_over_budget", "test_leaks", "test_device_peak", "test_fails_by_itself")))
    # each .zst: the test run again alone under gpumemprof run; its range has its allocations
    for name, alloc, freed in (("test_over_budget", 5 * MiB, 5 * MiB),
                               ("test_leaks", 1 * MiB + 256 * KiB, 256 * KiB),
                               ("test_device_peak", 5 * MiB, 5 * MiB),
                               ("test_fails_by_itself", 1 * MiB, 1 * MiB)):
        t = os.path.join(keep, "test_gpu_budget.py_%s.zst" % name)
        rp = run([args.gpumemprof, "report", "-f", "json", "--top", "0", t], env())
        try:
            rr = {x["path"]: (x["entered"], x["allocated_bytes"], x["freed_bytes"])
                  for x in json.loads(rp.stdout)["ranges"]}
        except (ValueError, KeyError) as e:
            failures.append("kept trace %s: %s %s" % (t, e, rp.stderr[-300:]))
            continue
        check("kept trace %s: its range" % name, rr,
              {"test_gpu_budget.py::%s" % name: (1, alloc, freed)})
    try:
        with open(os.path.join(keep, "test_gpu_budget.py_test_over_budget.json")) as fh:
            k = json.load(fh)
        check("kept: peak", (k["peak_bytes"], k["allocated_bytes"], k["leaked_bytes"]),
              (5 * MiB, 5 * MiB, 0))
        sites = k["result"]["devices"]["0"]["top_sites"]
        check("kept: top sites' bytes", [s["bytes"] for s in sites][:2], [3 * MiB, 2 * MiB])
        frames = " ".join(sites[0]["frames"])
        if "%s:%d (test_over_budget)" % (budget, mk["over_a"]) not in frames:
            failures.append("kept: the top site's stack lacks the test's line: %r" % frames[-800:])
        check("kept: range", k["trace"]["range"], "test_gpu_budget.py::test_over_budget")
        # --gpumemprof armed the agent before collection imported the tests (CUDA initialized
        # at their import): not a late start
        check("kept: late", k["result"]["late"], False)
        check("kept: rerun", k["trace"].get("rerun"),
              os.path.join(keep, "test_gpu_budget.py_test_over_budget.zst"))
    except (OSError, ValueError, KeyError, IndexError) as e:
        failures.append("--gpumemprof-dir: %s" % e)

    # B. -p, against the baseline: one test grows 150% (fails), one 5% (within 10%). The package
    # alone on PYTHONPATH (a pip install from the build's folder leaves an egg-info there, whose
    # entry point would load the plugin a second time)
    plain = os.path.join(work, "plain")
    shutil.copytree(os.path.join(args.pkg, "gpumemprof"), os.path.join(plain, "gpumemprof"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    md = os.path.join(work, "pr.md")
    p, r = pytest("baseline", plain, ["-p", "gpumemprof.pytest_plugin",
                                         "--gpumemprof-baseline", base,
                                         "--gpumemprof-markdown", md],
                  [budget], GPUMEMPROF_TEST_GROW="1")
    check("baseline: test_baseline_grows", r.get("test_baseline_grows", ("missing",))[0], "failure")
    check("baseline: test_baseline_same", r.get("test_baseline_same", ("missing",))[0], "passed")
    check("baseline: test_unmarked", r.get("test_unmarked", ("missing",))[0], "passed")
    msg = r.get("test_baseline_grows", ("", ""))[1]
    t = ("GPU memory peak 2.50 MiB (2621440 bytes) grew over its baseline 1.00 MiB (1048576 "
         "bytes) by more than the tolerance 10%")
    if t not in msg:
        failures.append("baseline: %r not in %r" % (t, msg[-600:]))
    try:
        with open(md) as fh:
            rows = {}
            for line in fh:
                c = [x.strip() for x in line.strip().strip("|").split("|")]
                if len(c) == 5 and c[0].startswith("`"):
                    rows[c[0].strip("`").split("::")[1]] = c[1:]
        check("markdown: test_baseline_grows", rows.get("test_baseline_grows"),
              ["1.00 MiB", "2.50 MiB", "+150.0%", "**regression**"])
        check("markdown: test_baseline_same", rows.get("test_baseline_same"),
              ["2.00 MiB", "2.10 MiB", "+5.0%", "ok"])
        check("markdown: test_over_budget", rows.get("test_over_budget"),
              ["5.00 MiB", "5.00 MiB", "+0.0%", "ok"])
        check("markdown: rows", len(rows), 9)
    except OSError as e:
        failures.append("markdown: %s" % e)
    # the baseline was compared, not rewritten
    with open(base) as fh:
        check("baseline kept", json.load(fh)["tests"]["test_gpu_budget.py::test_baseline_grows"]
              ["peak_bytes"], 1 * MiB)

    # C. without the agent library: a copy of the package that knows of none
    bare = os.path.join(work, "bare")
    shutil.copytree(os.path.join(args.pkg, "gpumemprof"), os.path.join(bare, "gpumemprof"),
                    ignore=shutil.ignore_patterns("_where.py", "__pycache__"))
    p, r = pytest("noagent", bare, ["-p", "gpumemprof.pytest_plugin"], [budget])
    for name in ("test_over_budget", "test_under_budget", "test_leaks", "test_leak_allowed",
                 "test_device_peak"):
        o, msg = r.get(name, ("missing", ""))
        check("no agent: %s" % name, o, "skipped")
        if "found no gpumemprof agent library" not in msg:
            failures.append("no agent: %s: the reason %r" % (name, msg[-400:]))
    check("no agent: test_unmarked", r.get("test_unmarked", ("missing",))[0], "passed")
    check("no agent: test_fails_by_itself", r.get("test_fails_by_itself", ("missing",))[0],
          "failure")

    # D. a marked test in a process that never initializes CUDA: nothing measured, skipped
    p, r = pytest("nocuda", plain, ["-p", "gpumemprof.pytest_plugin"],
                  [os.path.join(tests, "test_no_cuda.py")])
    o, msg = r.get("test_marked_without_cuda", ("missing", ""))
    check("no CUDA: the marked test", o, "skipped")
    if "the agent never recorded during the test" not in msg:
        failures.append("no CUDA: the reason %r" % msg[-400:])
    check("no CUDA: test_plain", r.get("test_plain", ("missing",))[0], "passed")
    check("the plugin loaded, nothing measured: the agent off",
          r.get("test_a_plugin_alone_starts_no_agent", ("missing", ""))[0], "passed")
    check("no CUDA: exit status", p.returncode, 0)


trace_mode() if args.mode == "trace" else pytest_mode()
finish()
