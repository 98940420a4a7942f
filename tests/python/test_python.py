#!/usr/bin/env python3
"""Python stacks and the PyTorch switches of `gpumemprof run`, end to end on the simulated device.

  test_python.py --gpumemprof BIN --simcuda DIR --progs DIR --src DIR --tmp DIR [--preload LIB]
                 [--python EXE] MODE
MODE: python     --stacks python: exact file:function:line frames, with the GIL held (ctypes.PyDLL)
                 and without it (ctypes.CDLL, read from 3.9 without the GIL); a C thread gets no
                 Python frames (and no crash); a pending exception survives the walk
      all        --stacks all: Python frames spliced into the native stack in reading order
      nogil      frames without the GIL (3.9+): a C extension that releases it around cudaMalloc
                 (py_ext.c, built here with the interpreter's headers), ctypes.CDLL inside a
                 generator, a C thread with a thread state and no frame (as PyTorch's autograd
                 engine threads) that gets native frames only, and a stress test (threads allocating with and without the GIL while
                 others run Python code: every allocation has its own site's lines)
      default    no --stacks: Python frames with native ones (the default for Python programs)
      lines      (3.9+) the line of every instruction of many code objects and their names, read
                 by gmp_pyframes (py_lines.c), against the interpreter's own co_lines() /
                 dis.findlinestarts, co_filename, co_qualname; the decoders on random tables
      verify     (3.9+) the reader without the GIL, made to disagree with the C API on the first
                 stack with the GIL, is turned off: the next call without the GIL has no Python
                 frames; one notice in the trace, and the same line in run's summary, gives the
                 reason (the self-check) and counts the call
      offsets    pyenv's CPython 3.13 (skipped when absent): the offsets read from its
                 _PyRuntime.debug_offsets equal the table of 3.13's headers (py_lines.c), and
                 its frames without the GIL are right (nogil); pyenv's 3.8: the notice says why
                 threads without the GIL have no Python frames (the version), once
      versions   `python`, `all` and (3.9+) `nogil` and `lines` checks on every CPython 3.8-3.13 found on this
                 machine (pyenv's included; skips if none); with --ends, only on the oldest and
                 the newest found (a sanitizer build: the layouts' two ends, the plain build
                 having checked every version)
      layers     --layers with torch (skipped when torch is absent): range names, nesting,
                 forward and backward, an allocation's path under the program's NVTX range
      site       --layers keeps an existing sitecustomize working; no hooks without --layers
      torchalloc --torch-alloc merges backend:... into PYTORCH_CUDA_ALLOC_CONF
      torchhistory --torch-history on a stand-in torch with PyTorch 2.1's history API
                 (progs/torchstub): history asked with context and stacks, TRACE.torch.pickle at
                 exit and SIGTERM (the trace still finished), TRACE.oom.torch.pickle at an OOM;
                 its segments are the trace's cudaMalloc calls; nothing without the option; with
                 --wheel, the same as a pip-installed torch on CUDA 12 (the simulator's wheel
                 layout): profiled with its own libcupti.so.12 and no other CUPTI; the trace
                 read with its snapshot beside it is merged (gmp_merge_torch): report shows the
                 tensors with their Python stacks inside the segments (allocated = live blocks,
                 reserved = segments), convert --pytorch-snapshot gives the blocks back, and
                 bad snapshots beside a copy of the trace give one warning and the trace alone
      whatif     `whatif` on a --torch-history trace (merged with its snapshot) and on a
                 --torch-alloc async trace (a cudaMallocAsync per tensor): the figures worked by
                 hand from the allocator's rules; the raw trace alone: nothing to replay (exit 1)
      torchside  --torch-history's side effects on the stand-in torch: none in a process that never
                 uses CUDA; settings made after import torch honoured; import, fork, CUDA in the
                 child; the program's SIGTERM handler left alone; the cudaMallocAsync backend said
                 once by run; python -I/-E/-S and no torch each said once; --torch-alloc native
                 keeps a PYTORCH_ALLOC_CONF of the user's
      torchlayers --layers with --torch-history on the stand-in's training step inside the
                 program's NVTX range `train`: every tensor's user_metadata is its layer path,
                 forward and backward (engine thread); record_function annotations; in the
                 merged report every tensor a module made has the trace's full path
                 (`train/model/...` for a forward one)
      hooks      the --layers hooks with real torch (skipped without it): they step aside while
                 torch.compile traces (simulated: Debian's torch 1.13 has no dynamo) and say so in
                 the trace; a spawn or forkserver worker calling modules makes no trace and no
                 line; real torch imported without CUDA under --layers --torch-history is silent
Exit 77: skipped.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

ap = argparse.ArgumentParser()
for a in ("gpumemprof", "simcuda", "progs", "src", "tmp"):
    ap.add_argument("--" + a, required=True)
ap.add_argument("--preload", default="")
ap.add_argument("--python", default="/usr/bin/python3")
ap.add_argument("--wheel", default="", help="the simulator's CUDA 12 pip-wheel layout (torchhistory)")
ap.add_argument("--ends", action="store_true", help="versions: the oldest and newest CPython only")
ap.add_argument("mode")
args = ap.parse_args()

failures = []
MiB = 1 << 20
SKIP = 77


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def finish():
    if failures:
        print("FAIL\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("ok")
    sys.exit(0)


def markers(name):
    m = {}
    with open(os.path.join(args.src, "progs", name)) as fh:
        for i, line in enumerate(fh, 1):
            for k in re.findall(r"# @(\w+)", line):
                m[k] = i
    return m


work = os.path.join(args.tmp, args.mode)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def base_env():
    env = dict(os.environ)
    for k in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD", "CUDA_HOME",
              "CUDA_PATH", "PYTHONPATH", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
              "PYTHONSTARTUP", "PYTHONHOME") + tuple(k for k in os.environ
                                                      if k.startswith("GPUMEMPROF_")):
        env.pop(k, None)
    env["LD_LIBRARY_PATH"] = args.progs + ":" + args.simcuda
    if args.preload:
        # an uninstrumented interpreter loading the sanitized agent; Python's own allocations
        # are not ours to report
        env["LD_PRELOAD"] = args.preload
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env["LC_ALL"] = "C"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(opts, prog, python=None, env=None, trace="t.zst", expect_ok=True, extra=(), quiet=True):
    trace = os.path.join(work, trace)
    cmd = [args.gpumemprof, "run"] + (["-q"] if quiet else []) + ["-o", trace, "--force"] + opts + \
        ["--", python or args.python, os.path.join(args.src, "progs", prog), args.progs] + \
        list(extra)
    p = gmp_testlib.run(cmd, expect=0 if expect_ok else None, env=env or base_env(), text=True,
                        timeout=120)
    return p, trace


def report(trace):
    cmd = [args.gpumemprof, "report", "--format", "json", trace]
    return json.loads(gmp_testlib.run(cmd, env=base_env(), text=True, timeout=120).stdout)


def stacks_by_size(doc):
    # schema 2: "stack" is null when none was recorded
    return {e["bytes"]: e["stack"] or [] for e in doc["live_at_peak"]}


def is_py(f):
    return "module" not in f


def py_frames(st):
    return [(f["function"], os.path.basename(f["file"] or ""), f["line"]) for f in st if is_py(f)]


def python_version(exe):
    out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[1])"],
                         capture_output=True, text=True, timeout=60, env=base_env())
    return int(out.stdout.strip()) if out.returncode == 0 else None


A = markers("py_alloc.py")


def want_alloc(minor, size_marker):
    step = "Model.step" if minor >= 11 else "step"  # co_qualname from 3.11
    f = "py_alloc.py"
    chain = [("alloc", f, A["alloc"]), ("inner", f, A["inner"]), ("outer", f, A["outer"]),
             (step, f, A["step"]), ("main", f, A[size_marker]), ("<module>", f, A["module"])]
    return chain


def check_alloc(label, doc, minor, only_python):
    by = stacks_by_size(doc)
    st3 = by.get(3 * MiB, [])
    w3 = [want_alloc(minor, "main3")[0]] + want_alloc(minor, "main3")[1:]
    check(f"{label}: 3 MiB Python frames", py_frames(st3), w3)
    w1 = [("alloc", "py_alloc.py", A["alloc"]), ("main", "py_alloc.py", A["main1"]),
          ("<module>", "py_alloc.py", A["module"])]
    check(f"{label}: 1 MiB Python frames (exception pending)", py_frames(by.get(1 * MiB, [])), w1)
    # the thread released the GIL (ctypes.CDLL): frames read without the GIL from 3.9
    w5 = [("alloc", "py_alloc.py", A["alloc"]), ("main", "py_alloc.py", A["main5"]),
          ("<module>", "py_alloc.py", A["module"])] if minor >= 9 else []
    check(f"{label}: 5 MiB (GIL released) Python frames", py_frames(by.get(5 * MiB, [])), w5)
    # a C thread Python does not know
    check(f"{label}: 7 MiB (C thread) Python frames", py_frames(by.get(7 * MiB, [])), [])
    if only_python:
        check(f"{label}: only Python frames", [f for f in st3 if not is_py(f)], [])
        check(f"{label}: 5 MiB only Python frames",
              [f for f in by.get(5 * MiB, []) if not is_py(f)], [])
    else:
        nat5 = [f for f in by.get(5 * MiB, []) if not is_py(f)]
        check(f"{label}: 5 MiB native frames present", len(nat5) > 0, True)
        nat7 = [f.get("function") for f in by.get(7 * MiB, [])]
        check(f"{label}: 7 MiB C thread frames", "thread_main" in nat7, True)


def check_spliced(label, doc, minor):
    st = stacks_by_size(doc).get(3 * MiB, [])
    kinds = "".join("P" if is_py(f) else "n" for f in st)
    # native frames inside (ctypes, libffi), Python frames, native frames outside (the
    # interpreter's main): the Python frames are spliced into the native stack
    check(f"{label}: frame kinds {kinds}", bool(re.fullmatch(r"n+P[nP]*Pn+", kinds)), True)
    check(f"{label}: Python frames in reading order", py_frames(st), want_alloc(minor, "main3"))
    check(f"{label}: innermost frame is ctypes' call (libffi or _ctypes)",
          bool(st and re.search(r"libffi|_ctypes", st[0].get("module") or "")), True)
    names = [f.get("function") for f in st if not is_py(f)]
    check(f"{label}: outer native frames reach main", any(
        n in ("main", "Py_BytesMain", "__libc_start_main", "_start") for n in names), True)
    if "_PyEval_EvalFrameDefault" in names and minor >= 11:
        failures.append(f"{label}: an evaluation-loop frame was not replaced: {names}")


N = markers("py_nogil.py")
STRESS_THREADS, STRESS_ALLOCS = 4, 60


def build_ext(exe, tag):
    """py_ext.c built for interpreter exe with its own headers; None when it has none."""
    q = "import sysconfig; print(sysconfig.get_paths()['include']); " \
        "print(sysconfig.get_config_var('EXT_SUFFIX'))"
    r = subprocess.run([exe, "-c", q], capture_output=True, text=True, timeout=60, env=base_env())
    inc, suffix = r.stdout.split("\n")[:2]
    if not os.path.exists(os.path.join(inc, "Python.h")):
        return None
    d = os.path.join(work, "ext" + tag)
    os.makedirs(d, exist_ok=True)
    cmd = [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer",
           "-I", inc, os.path.join(args.src, "progs", "py_ext.c"), "-o",
           os.path.join(d, "py_ext" + suffix), "-L", args.simcuda, "-l:libcudart.so.13"]
    c = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if c.returncode != 0:
        print(f"FAIL: {' '.join(cmd)}\n{c.stderr}")
        sys.exit(1)
    return d


def check_nogil(label, doc, minor, only_python):
    """py_nogil.py: Python frames of allocations made without the GIL (3.9+)."""
    by = stacks_by_size(doc)
    f = "py_nogil.py"
    fwd = "Net.forward" if minor >= 11 else "forward"
    w11 = [("ext_call", f, N["ext"]), (fwd, f, N["forward"]), ("main", f, N["main11"]),
           ("<module>", f, N["module"])]
    w13 = [("cdll_alloc", f, N["cdll"]), ("gen", f, N["gen"]), ("main", f, N["main13"]),
           ("<module>", f, N["module"])]
    if minor < 9:
        w11 = w13 = []
    st11 = by.get(11 * MiB, [])
    check(f"{label}: extension without the GIL, Python frames", py_frames(st11), w11)
    check(f"{label}: CDLL in a generator, Python frames", py_frames(by.get(13 * MiB, [])), w13)
    st17 = by.get(17 * MiB, [])
    check(f"{label}: engine-like C thread, Python frames", py_frames(st17), [])
    if only_python:
        check(f"{label}: extension, only Python frames", [x for x in st11 if not is_py(x)], [])
    elif minor >= 9:
        kinds = "".join("P" if is_py(x) else "n" for x in st11)
        check(f"{label}: extension frame kinds {kinds}",
              bool(re.fullmatch(r"n+P[nP]*Pn+", kinds)), True)
        check(f"{label}: innermost frame is the extension's",
              st11[0].get("function") if st11 else None, "ext_cuda_alloc")
        check(f"{label}: engine-like C thread, native frames",
              [x.get("function") for x in st17][:2], ["ext_cuda_alloc", "engine_thread"])
    # stress: every allocation of the allocating threads has its own call site's frames
    total = STRESS_THREADS * STRESS_ALLOCS
    sites = {"stress_a": "wa", "stress_b": "wb", "stress_c": "wc"}
    count = nbytes = 0
    for e in doc["live_at_peak"]:
        pf = py_frames(e["stack"] or [])
        if e["bytes"] in (11 * MiB, 13 * MiB, 17 * MiB) and e["count"] == 1:
            continue
        if minor < 9 and not pf:
            continue  # calls without the GIL: no Python frames before 3.9
        fn = pf[0][0] if pf else None
        if fn not in sites:
            failures.append(f"{label}: a stress allocation without its frames: {pf[:3]}")
            continue
        want = [(fn, f, N[{"stress_a": "sa", "stress_b": "sb", "stress_c": "sc"}[fn]]),
                ("worker", f, N[sites[fn]])]
        check(f"{label}: stress frames of {fn}", pf[:2], want)
        check(f"{label}: stress frames of {fn} go out through threading",
              all(x[1] == "threading.py" for x in pf[2:]) and len(pf) > 2, True)
        count += e["count"]
        nbytes += e["bytes"]
    if minor >= 9:
        check(f"{label}: stress allocations with frames", count, total)
        check(f"{label}: stress bytes with frames", nbytes,
              sum(MiB + i * 4096 for i in range(total)))


def run_nogil(label, exe, minor, tag):
    d = build_ext(exe, tag)
    if d is None:
        print(f"skip: no Python.h for {exe}")
        sys.exit(SKIP)
    extra = [d, str(STRESS_THREADS), str(STRESS_ALLOCS)]
    p, t = run(["--stacks", "python"], "py_nogil.py", python=exe, trace=f"ng{tag}.zst",
               extra=extra)
    check(f"{label}: program output", f"py_nogil: ok {STRESS_THREADS * STRESS_ALLOCS}" in p.stdout,
          True)
    check_nogil(f"{label} python", report(t), minor, True)
    p, t = run(["--stacks", "all"], "py_nogil.py", python=exe, trace=f"nga{tag}.zst", extra=extra)
    check_nogil(f"{label} all", report(t), minor, False)


def run_lines(label, exe):
    """py_lines.py: gmp_pyframes' lines and names against the interpreter's own (3.9+)."""
    cmd = [exe, os.path.join(args.src, "progs", "py_lines.py"),
           os.path.join(args.progs, "libpy_lines.so")]
    p = subprocess.run(cmd, env=base_env(), capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or "py_lines: ok" not in p.stdout:
        failures.append(f"{label}: {' '.join(cmd)}: exit {p.returncode}\n{p.stdout}{p.stderr}")


def check_off_notice(label, trace, summary, reason, calls):
    """One notice in the trace (and its line in run's summary) says why threads without the GIL
    have no Python frames, and counts their calls."""
    dump = subprocess.run([args.gpumemprof, "dump", trace], capture_output=True, text=True,
                          env=base_env(), timeout=60).stdout
    want = (f"Python frames of threads without the GIL are off ({reason}): {calls} calls from "
            "such threads have native frames only")
    check(f"{label}: the notice gives the reason and the count", want in dump, True)
    check(f"{label}: one such notice",
          dump.count("Python frames of threads without the GIL are off"), 1)
    check(f"{label}: the summary shows it", want in summary, True)
    check(f"{label}: the summary shows it once",
          summary.count("Python frames of threads without the GIL are off"), 1)


def pyenv_python(m):
    """pyenv's CPython 3.<m> (~/.pyenv/versions/3.<m>.*), else python3.<m> on PATH; None."""
    for exe in sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{m}.*/bin/python3"))):
        if python_version(exe) == m:
            return exe
    exe = shutil.which(f"python3.{m}")
    return exe if exe and python_version(exe) == m else None


minor = python_version(args.python)
if minor is None:
    print(f"skip: {args.python} does not run")
    sys.exit(SKIP)

if args.mode == "python":
    p, t = run(["--stacks", "python"], "py_alloc.py")
    check("program output", "py_alloc: ok" in p.stdout, True)
    check_alloc("python", report(t), minor, True)
elif args.mode == "all":
    p, t = run(["--stacks", "all"], "py_alloc.py")
    doc = report(t)
    check_alloc("all", doc, minor, False)
    check_spliced("all", doc, minor)
elif args.mode == "default":
    p, t = run([], "py_alloc.py")
    doc = report(t)
    check_alloc("default", doc, minor, False)
    check_spliced("default", doc, minor)
    head = subprocess.run([args.gpumemprof, "dump", t], capture_output=True, text=True,
                          env=base_env(), timeout=60).stdout.split("\n", 1)[0]
    check("header options say stacks=auto", "stacks=auto" in head, True)
elif args.mode == "nogil":
    run_nogil("nogil", args.python, minor, "")
elif args.mode == "lines":
    if minor < 9:
        print("skip: frames without the GIL need CPython 3.9+")
        sys.exit(SKIP)
    run_lines("lines", args.python)
elif args.mode == "verify":
    # the reader without the GIL is checked against the C API on the first stacks with the GIL:
    # made to disagree (GPUMEMPROF_TEST_PYFRAMES_SKEW: its lines off by one), it is turned off
    if minor < 9:
        print("skip: frames without the GIL need CPython 3.9+")
        sys.exit(SKIP)
    env = base_env()
    env["GPUMEMPROF_TEST_PYFRAMES_SKEW"] = "1"
    p, t = run(["--stacks", "python"], "py_alloc.py", env=env, quiet=False)
    by = stacks_by_size(report(t))
    check("verify: 3 MiB (GIL held, C API) frames", py_frames(by.get(3 * MiB, [])),
          want_alloc(minor, "main3"))
    check("verify: 5 MiB (no GIL) after the disagreement: no Python frames",
          py_frames(by.get(5 * MiB, [])), [])
    check_off_notice("verify", t, p.stderr, "its self-check failed: a stack read without the "
                     "GIL differed from the same stack read through CPython's C API", 1)
elif args.mode == "offsets":
    py13, py8 = pyenv_python(13), pyenv_python(8)
    if not py13 and not py8:
        print("skip: neither CPython 3.13 nor 3.8 found (pyenv)")
        sys.exit(SKIP)
    if py13:
        print(f"3.13: {py13}")
        cmd = [py13, os.path.join(args.src, "progs", "py_lines.py"),
               os.path.join(args.progs, "libpy_lines.so")]
        q = subprocess.run(cmd, env=base_env(), capture_output=True, text=True, timeout=300)
        check("3.13: py_lines ok", "py_lines: ok" in q.stdout, True)
        check("3.13: the offsets read from _PyRuntime.debug_offsets equal the table's",
              "py_lines: 3.13 debug offsets = table" in q.stdout, True)
        if q.returncode != 0:
            failures.append(f"3.13: {' '.join(cmd)}: exit {q.returncode}\n{q.stdout}{q.stderr}")
        run_nogil("3.13 nogil", py13, 13, "313")
    if py8:
        print(f"3.8: {py8}")
        p, t = run(["--stacks", "python"], "py_alloc.py", python=py8, trace="off38.zst",
                   quiet=False)
        check_off_notice("3.8", t, p.stderr, "Python 3.8: the reader needs 3.9 or later", 1)
elif args.mode == "torchhistory":
    # the stand-in torch (progs/torchstub: PyTorch 2.1's history API written from its source)
    import pickle
    H = markers("py_torch_history.py")
    stub = os.path.join(args.src, "progs", "torchstub")
    f = "py_torch_history.py"

    def hist(mode, opts=("--torch-history",), limit=None, trace=None, wheel=False):
        env = base_env()
        if limit:
            env["TORCHSTUB_LIMIT"] = str(limit)
        if wheel:  # a pip-installed torch: its own CUDA 12 runtime and CUPTI from site-packages
            env.pop("LD_LIBRARY_PATH", None)
            env["TORCHSTUB_SITE"] = os.path.join(args.wheel, "site-packages")
        trace = trace or f"h_{mode}.zst"
        p, t = run(list(opts), "py_torch_history.py", env=env, trace=trace,
                   extra=[stub, mode], expect_ok=False)
        return p, t

    def entries(snap, action):
        return [e for e in snap["device_traces"][0] if e["action"] == action]

    def raw_env():  # the trace alone, without the snapshot beside it merged
        env = base_env()
        env["GPUMEMPROF_TORCH_MERGE"] = "0"
        return env

    def trace_allocs(t):
        d = subprocess.run([args.gpumemprof, "dump", t], capture_output=True, text=True,
                           env=raw_env(), timeout=60).stdout
        return {int(m.group(1), 16): int(m.group(2))
                for m in re.finditer(r" alloc .*?address=(0x[0-9a-f]+) size=(\d+)", d)}

    def check_exit(label, p, t):
        check(f"{label}: status", p.returncode, 0)
        check(f"{label}: history asked with context and stacks", "history_args={'enabled': 'all', "
              "'context': 'all', 'stacks': 'all'" in p.stdout, True)
        snap_path = t + ".torch.pickle"
        check(f"{label}: snapshot beside the trace", os.path.exists(snap_path), True)
        if not os.path.exists(snap_path):
            return
        with open(snap_path, "rb") as fh:
            snap = pickle.load(fh)
        allocs = entries(snap, "alloc")
        check(f"{label}: tensors recorded", [e["size"] for e in allocs], [MiB, 3 * MiB, 5 * MiB])
        check(f"{label}: a tensor's stack",
              [(x["name"], os.path.basename(x["filename"]), x["line"])
               for x in allocs[1]["frames"][:3]],
              [("layer", f, H["layer"]), ("forward", f, H["fwd3"]), ("<module>", f, H["module"])])
        check(f"{label}: the freed tensor", [e["addr"] for e in entries(snap, "free_completed")],
              [allocs[1]["addr"]])
        # one timeline: PyTorch's segments are the allocations the agent recorded from CUDA
        segs = {e["addr"]: e["size"] for e in entries(snap, "segment_alloc")}
        ta = trace_allocs(t)
        check(f"{label}: segments are the trace's cudaMalloc calls",
              {a: ta.get(a) for a in segs}, segs)
        check(f"{label}: segments found", len(segs) >= 2, True)
        # and the trace has the Python frames of the tensor that made each segment (read
        # without the GIL: the stand-in calls cudaMalloc through ctypes.CDLL)
        raw = json.loads(subprocess.run([args.gpumemprof, "report", "--format", "json", t],
                                        capture_output=True, text=True, env=raw_env(),
                                        timeout=60).stdout)
        by = stacks_by_size(raw)
        check(f"{label}: the trace's 4 MiB segment, Python frames",
              [x for x in py_frames(by.get(4 * MiB, [])) if x[1] == f],
              [("layer", f, H["layer"]), ("forward", f, H["fwd3"]), ("<module>", f, H["module"])])
        r = subprocess.run([args.gpumemprof, "report", "--format", "json", snap_path],
                           capture_output=True, text=True, env=base_env(), timeout=60)
        check(f"{label}: gpumemprof reads the snapshot", r.returncode, 0)
        check_merged(label, t, snap, raw)

    def check_merged(label, t, snap, raw):
        """The trace read with the snapshot beside it: one timeline (gmp_merge_torch)."""
        doc = report(t)
        merged = [n["message"] for n in doc["notices"]
                  if n["message"].startswith("merged with PyTorch's memory history")]
        check(f"{label} merged: the notice names the snapshot",
              [os.path.basename(t) + ".torch.pickle" in m for m in merged], [True])
        # expected from the snapshot itself: allocated = live blocks, reserved = segments
        live, peak, peak_live = {}, 0, {}
        for e in snap["device_traces"][0]:
            if e["action"] == "alloc":
                live[e["addr"]] = e
            elif e["action"] == "free_completed":
                live.pop(e["addr"], None)
            cur = sum(x["size"] for x in live.values())
            if cur > peak:
                peak, peak_live = cur, dict(live)
        segs = {s["address"]: s["total_size"] for s in snap["segments"]}
        dev = doc["devices"][0]
        check(f"{label} merged: peak allocated = the live blocks at the peak",
              dev["peak_allocated_bytes"], peak)
        check(f"{label} merged: reserved at exit = the segments", dev["reserved_at_exit_bytes"],
              sum(segs.values()))
        check(f"{label} merged: peak reserved = the trace's alone",
              dev["peak_reserved_bytes"], raw["devices"][0]["peak_reserved_bytes"])
        check(f"{label} merged: leaked = blocks live at the dump", dev["leaked_bytes"],
              sum(b["size"] for s in snap["segments"] for b in s["blocks"]
                  if b["state"] == "active_allocated"))
        check(f"{label} merged: figures", (peak, sum(segs.values())), (9 * MiB, 12 * MiB))
        # the tensors live at the peak, each with the stand-in's Python stack
        want = {}
        for e in peak_live.values():
            want[e["size"]] = [(x["name"], os.path.basename(x["filename"]), x["line"])
                               for x in e["frames"] if x["filename"].endswith(f)]
        got = {e["bytes"]: py_frames(e["stack"] or []) for e in doc["live_at_peak"]}
        check(f"{label} merged: live at the peak, tensors with their stacks", got, want)
        check(f"{label} merged: the 5 MiB tensor's stack", got.get(5 * MiB),
              [("layer", f, H["layer"]), ("forward", f, H["fwd5"]), ("<module>", f, H["module"])])
        check(f"{label} merged: only blocks live at the peak",
              sorted({k["kind"] for k in doc["kinds"]}) if isinstance(doc["kinds"], list) else
              None, ["async-pool"])
        # every block inside a segment that the trace's cudaMalloc made, after it on the timeline
        d = subprocess.run([args.gpumemprof, "dump", t], capture_output=True, text=True,
                           env=base_env(), timeout=60).stdout
        pools, inside = {}, []
        for line in d.splitlines():
            m = re.match(r"(\d+) \d+ pool .*op=reserved pool=(0x[0-9a-f]+) value=(\d+)", line)
            if m:
                pools[int(m.group(2), 16)] = (int(m.group(1)), int(m.group(3)))
            m = re.match(r"(\d+) \d+ alloc .*kind=async-pool .*address=(0x[0-9a-f]+) size=(\d+)",
                         line)
            if m:
                tm, a, n = int(m.group(1)), int(m.group(2), 16), int(m.group(3))
                inside.append(any(p <= a and a + n <= p + sz and pt <= tm
                                  for p, (pt, sz) in pools.items()))
        check(f"{label} merged: the segments are the trace's cudaMalloc calls, as pools",
              {p: sz for p, (pt, sz) in pools.items()}, segs)
        check(f"{label} merged: every block inside an earlier segment", inside, [True] * 3)
        # the PyTorch snapshot export of the merged trace has the blocks back
        out = os.path.join(work, os.path.basename(t) + ".merged.pickle")
        r = subprocess.run([args.gpumemprof, "convert", "--pytorch-snapshot", out, t],
                           capture_output=True, text=True, env=base_env(), timeout=60)
        check(f"{label} merged: convert --pytorch-snapshot", r.returncode, 0)
        if r.returncode == 0:
            with open(out, "rb") as fh:
                back = pickle.load(fh)

            def blocks(sn):
                return sorted((b["address"], b["size"]) for s in sn["segments"]
                              for b in s["blocks"] if b["state"] == "active_allocated")

            def acts(sn):
                return [(e["action"], e["addr"], e["size"]) for e in sn["device_traces"][0]
                        if e["action"] in ("alloc", "free_completed", "segment_alloc")]
            check(f"{label} merged: exported segments",
                  sorted((s["address"], s["total_size"]) for s in back["segments"]),
                  sorted(segs.items()))
            check(f"{label} merged: exported blocks", blocks(back), blocks(snap))
            check(f"{label} merged: exported entries", acts(back), acts(snap))
            check(f"{label} merged: exported stacks",
                  [[(x["name"], x["line"]) for x in e["frames"] if x["filename"].endswith(f)]
                   for e in back["device_traces"][0] if e["action"] == "alloc"],
                  [[(x["name"], x["line"]) for x in e["frames"] if x["filename"].endswith(f)]
                   for e in snap["device_traces"][0] if e["action"] == "alloc"])

    p, t = hist("exit")
    check_exit("exit", p, t)
    # a snapshot that cannot be merged: one warning line, the trace alone (as without it)
    if os.path.exists(t + ".torch.pickle"):
        with open(t + ".torch.pickle", "rb") as fh:
            good = pickle.load(fh)
        alone = json.loads(subprocess.run([args.gpumemprof, "report", "--format", "json", t],
                                          capture_output=True, text=True, env=raw_env(),
                                          timeout=60).stdout)

        def shifted(key, by):
            sn = pickle.loads(pickle.dumps(good))
            for e in sn["device_traces"][0]:
                e[key] += by
            if key == "addr":
                for sg in sn["segments"]:
                    sg["address"] += by
                    for b in sg["blocks"]:
                        b["address"] += by
            return pickle.dumps(sn, protocol=4)

        for name, data, why in (
                ("garbage", b"\x80\x04not a pickle at all", "not merged with"),
                ("addresses", shifted("addr", 1 << 30), "none of the snapshot's 3 segments"),
                ("times", shifted("time_us", 3600 * 10**6), "are not within the trace's"),
                ("no times", pickle.dumps({**good, "device_traces": [[
                    {k: v for k, v in e.items() if k != "time_us"}
                    for e in good["device_traces"][0]]]}, protocol=4), "has no times")):
            bad = os.path.join(work, "bad_" + name.replace(" ", "_") + ".zst")
            shutil.copyfile(t, bad)
            with open(bad + ".torch.pickle", "wb") as fh:
                fh.write(data)
            r = subprocess.run([args.gpumemprof, "report", "--format", "json", bad],
                               capture_output=True, text=True, env=base_env(), timeout=60)
            check(f"bad snapshot ({name}): report still works", r.returncode, 0)
            lines = [x for x in r.stderr.splitlines() if x]
            check(f"bad snapshot ({name}): one warning line that says why",
                  len(lines) == 1 and "not merged with" in lines[0] and why in lines[0], True)
            if r.returncode == 0:
                d = json.loads(r.stdout)
                check(f"bad snapshot ({name}): the trace alone",
                      (d["devices"][0]["peak_allocated_bytes"],
                       [n for n in d["notices"] if "merged" in n["message"]]),
                      (alone["devices"][0]["peak_allocated_bytes"], []))
    if args.wheel:
        # the PyTorch-like CUDA 12 process: the simulator's pip-wheel layout, loaded by path
        p, t = hist("exit", trace="h_wheel.zst", wheel=True)
        check_exit("wheel exit", p, t)
        mods = [m.group(1) for m in re.finditer(
            r' module .*?path="([^"]*)"', subprocess.run(
                [args.gpumemprof, "dump", t], capture_output=True, text=True, env=base_env(),
                timeout=60).stdout)]
        check("wheel: its own libcupti.so.12, no other CUPTI",
              [os.path.relpath(m, args.wheel) for m in mods if "libcupti" in m],
              ["site-packages/nvidia/cuda_cupti/lib/libcupti.so.12"])
    p, t = hist("sigterm")
    check("sigterm: status", p.returncode, 143)
    check("sigterm: snapshot written", os.path.exists(t + ".torch.pickle"), True)
    end = subprocess.run([args.gpumemprof, "dump", t], capture_output=True, text=True,
                         env=base_env(), timeout=60).stdout
    check("sigterm: the trace is finished (END record)", " end " in end, True)
    p, t = hist("oom", limit=16 * MiB)
    check("oom: status", p.returncode, 0)
    check("oom: caught", "oom caught" in p.stdout, True)
    oom_path = t + ".oom.torch.pickle"
    check("oom: snapshot at the out-of-memory error", os.path.exists(oom_path), True)
    if os.path.exists(oom_path):
        with open(oom_path, "rb") as fh:
            snap = pickle.load(fh)
        check("oom: the oom entry", [e["size"] for e in entries(snap, "oom")], [64 * MiB])
    check("oom: the exit snapshot too", os.path.exists(t + ".torch.pickle"), True)
    p, t = hist("exit", opts=(), trace="h_off.zst")
    check("without --torch-history: no history", "history_args=None" in p.stdout, True)
    check("without --torch-history: no snapshot", os.path.exists(t + ".torch.pickle"), False)
elif args.mode == "whatif":
    # `gpumemprof whatif` on traces (docs/whatif.md): a --torch-history trace (read merged with
    # the TRACE.torch.pickle beside it), a --torch-alloc async trace (one cudaMallocAsync per
    # tensor), and the same trace alone (a raw CUDA trace: nothing to replay). The stand-in's
    # tensors (progs/py_torch_history.py): 1, 3 and 5 MiB, the 3 MiB one freed after the 5 MiB one
    # is made. PyTorch's caching allocator under its defaults, worked by hand from the rules of
    # docs/whatif.md: 1 MiB is a small request (at most 1 MiB: a 2 MiB segment), 3 MiB is a large
    # one under 10 MiB (a 20 MiB segment), 5 MiB is cut from the 17 MiB left of it: peak reserved
    # 22 MiB in 2 segments, peak allocated 9 MiB (the blocks, already multiples of 512 B).
    stub = os.path.join(args.src, "progs", "torchstub")
    want = (22 * MiB, 2, 9 * MiB)

    def whatif(t, env=None, fmt="json"):
        return subprocess.run([args.gpumemprof, "whatif", t, "--format", fmt], capture_output=True,
                              text=True, env=env or base_env(), timeout=120)

    def figures(doc):
        c = doc["devices"][0]["configs"][0] if doc["devices"] else {}
        return (c.get("peak_reserved_bytes"), c.get("segments"), c.get("peak_allocated_bytes"))

    p, t = run(["--torch-history"], "py_torch_history.py", trace="w_hist.zst",
               extra=[stub, "exit"])
    check("history: the snapshot beside the trace", os.path.exists(t + ".torch.pickle"), True)
    w = whatif(t)
    check("history: whatif exit status", (w.returncode, w.stderr), (0, ""))
    doc = json.loads(w.stdout) if w.returncode == 0 else {"devices": []}
    check("history: the caching allocator's tensors", doc.get("tensors"), "caching-allocator")
    check("history: the recorded settings, from the snapshot beside the trace",
          [c["alloc_conf"] for c in doc["devices"][0]["configs"][:1]] if doc["devices"] else [],
          ["recorded (defaults)"])
    check("history: peak reserved, segments, peak allocated under the defaults", figures(doc),
          want)
    raw = base_env()
    raw["GPUMEMPROF_TORCH_MERGE"] = "0"
    w = whatif(t, env=raw)
    check("raw CUDA trace: exit 1, saying why", (w.returncode, "no PyTorch tensor allocations to "
                                                 "replay" in w.stderr, w.stdout), (1, True, ""))
    p, t = run(["--torch-alloc", "async"], "py_torch_history.py", trace="w_async.zst",
               extra=[stub, "exit"])
    d = subprocess.run([args.gpumemprof, "dump", t], capture_output=True, text=True,
                       env=base_env(), timeout=60).stdout
    sizes = sorted(int(m) for m in re.findall(r' alloc .*api="cudaMallocAsync" .*size=(\d+)', d))
    check("async: a cudaMallocAsync per tensor, of the size asked for", sizes,
          [1 * MiB, 3 * MiB, 5 * MiB])
    w = whatif(t)
    check("async: whatif exit status", (w.returncode, w.stderr), (0, ""))
    doc = json.loads(w.stdout) if w.returncode == 0 else {"devices": []}
    check("async: the cudaMallocAsync tensors", doc.get("tensors"), "cudaMallocAsync")
    check("async: replayed through the native allocator under its defaults",
          [c["alloc_conf"] for c in doc["devices"][0]["configs"][:1]] if doc["devices"] else [],
          ["defaults (PyTorch's)"])
    check("async: peak reserved, segments, peak allocated under the native allocator",
          figures(doc), want)
    w = whatif(t, fmt="text")
    check("async: the text says what was replayed", "the tensors are the trace's stream-ordered "
          "allocations (cudaMallocAsync" in w.stdout, True)
    finish()
elif args.mode == "torchside":
    # what --torch-history must not change in a PyTorch program (the stand-in torch models the
    # CUDA initialization as PyTorch does it, progs/torchstub/torch/_C.py)
    import pickle
    stub = os.path.join(args.src, "progs", "torchstub")

    def side(mode, opts=("--torch-history",), trace=None, env=None, quiet=False, pyflags=()):
        trace = os.path.join(work, trace or f"s_{mode}.zst")
        cmd = [args.gpumemprof, "run", "-o", trace, "--force"] + (["-q"] if quiet else []) + \
            list(opts) + ["--", args.python] + list(pyflags) + \
            [os.path.join(args.src, "progs", "py_torch_side.py"), args.progs, stub, mode]
        p = gmp_testlib.run(cmd, expect=None, env=env or base_env(), text=True, timeout=120)
        return p, trace

    def agent_lines(p):  # the agent's and the hooks' lines (not run's own summary)
        return [x for x in p.stderr.splitlines() if x.startswith("gpumemprof:") and
                not x.startswith("gpumemprof: no trace was written")]

    # A1: a process that imports torch and never uses CUDA: no trace, no snapshot, no line
    p, t = side("cpu", opts=("--layers", "--torch-history"))
    check("cpu: status", p.returncode, 0)
    check("cpu: CUDA not initialized by import torch", "cuda initialized at import: False"
          in p.stdout, True)
    check("cpu: no trace", os.path.exists(t), False)
    check("cpu: no snapshot", os.path.exists(t + ".torch.pickle"), False)
    check("cpu: no line from the agent or the hooks", agent_lines(p), [])
    # settings made after import torch are the ones CUDA and the allocator read
    p, t = side("after")
    check("after: status", p.returncode, 0)
    check("after: CUDA_VISIBLE_DEVICES set after import is read at cuInit",
          "visible_at_init=0" in p.stdout, True)
    check("after: PYTORCH_CUDA_ALLOC_CONF set after import is the allocator's",
          "conf_at_init=expandable_segments:True" in p.stdout, True)
    if os.path.exists(t + ".torch.pickle"):
        with open(t + ".torch.pickle", "rb") as fh:
            snap = pickle.load(fh)
        check("after: the snapshot's allocator settings", snap["allocator_settings"],
              {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
               "expandable_segments": True})
        check("after: the history has the tensor", [e["size"] for e in snap["device_traces"][0]
                                                     if e["action"] == "alloc"], [1 << 20])
    else:
        check("after: snapshot beside the trace", False, True)
    # import torch, fork, CUDA in the child only
    p, t = side("fork", trace="f_%p.zst")
    check("fork: the child used CUDA", "child: ok" in p.stdout, True)
    check("fork: child status", "child status=0" in p.stdout, True)
    # A10: a SIGTERM handler of the program's own is left alone (docs/python.md)
    p, t = side("handler")
    check("handler: the program's SIGTERM handler is still its own", "own_handler=True"
          in p.stdout, True)
    # A2: the cudaMallocAsync backend: one line at the start from run, none from the hooks
    for label, opts, conf in (("--torch-alloc async", ("--torch-history", "--torch-alloc",
                                                       "async"), None),
                              ("the user's own setting", ("--torch-history",),
                               "backend:cudaMallocAsync")):
        env = base_env()
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        p, t = side("handler", opts=opts, env=env, trace="async.zst", quiet=True)
        lines = [x for x in p.stderr.splitlines() if "cudaMallocAsync" in x]
        check(f"async ({label}): status", p.returncode, 0)
        check(f"async ({label}): one line that says so",
              len(lines) == 1 and lines[0].startswith("gpumemprof run: --torch-history:") and
              "no memory history" in lines[0] and "instead" in lines[0], True)
        check(f"async ({label}): no other line", [x for x in p.stderr.splitlines()
                                                  if "torch-history" in x and x not in lines], [])
        check(f"async ({label}): no snapshot", os.path.exists(t + ".torch.pickle"), False)
    # ... and chosen by the program itself, which run cannot see: one line from the sitecustomize
    p, t = side("async", trace="async_self.zst", quiet=True)
    lines = [x for x in p.stderr.splitlines() if "torch-history" in x]
    check("async (the program's own choice): status", p.returncode, 0)
    check("async (the program's own choice): one line from the hooks",
          len(lines) == 1 and lines[0].startswith("gpumemprof: --torch-history: PyTorch's "
                                                  "cudaMallocAsync backend keeps no memory "
                                                  "history"), True)
    # A7: python -I / -E / -S never run the sitecustomize: one line says so
    for flag in ("-I", "-E", "-S"):
        p, t = side("handler", opts=("--layers", "--torch-history"), pyflags=(flag,),
                    trace=f"flag{flag}.zst")
        lines = [x for x in agent_lines(p) if "could not attach" in x]
        check(f"python {flag}: status", p.returncode, 0)
        check(f"python {flag}: one line says --layers/--torch-history could not attach",
              len(lines), 1)
        if os.path.exists(t):
            doc = report(t)
            check(f"python {flag}: the trace says so too",
                  len([n for n in doc["notices"] if "could not attach" in n["message"]]), 1)
    p, t = side("handler", opts=("--layers", "--torch-history"), trace="attached.zst")
    check("attached: no such line", [x for x in agent_lines(p) if "could not attach" in x or
                                     "never imported" in x], [])
    # a Python process that uses CUDA without torch: said once
    p = gmp_testlib.run([args.gpumemprof, "run", "-o", os.path.join(work, "notorch.zst"),
                         "--force", "--layers", "--", args.python,
                         os.path.join(args.src, "progs", "py_alloc.py"), args.progs],
                        expect=None, env=base_env(), text=True, timeout=120)
    lines = [x for x in agent_lines(p) if "torch was never imported" in x]
    check("no torch: one line says torch was never imported", len(lines), 1)
    # B11: --torch-alloc native keeps a PYTORCH_ALLOC_CONF of the user's, whichever variable the
    # PyTorch version reads (the stand-in's TORCHSTUB_CONF_ORDER)
    for order in ("cuda", "alloc"):
        env = base_env()
        env["PYTORCH_ALLOC_CONF"] = "expandable_segments:True"
        env["TORCHSTUB_CONF_ORDER"] = order
        p, t = side("handler", opts=("--torch-history", "--torch-alloc", "native"), env=env,
                    trace=f"conf_{order}.zst", quiet=True)
        snap = None
        if os.path.exists(t + ".torch.pickle"):
            with open(t + ".torch.pickle", "rb") as fh:
                snap = pickle.load(fh)
        check(f"--torch-alloc native with PYTORCH_ALLOC_CONF ({order} first): the user's options",
              snap and snap["allocator_settings"],
              {"PYTORCH_CUDA_ALLOC_CONF": "backend:native,expandable_segments:True",
               "expandable_segments": True})
elif args.mode == "torchlayers":
    # --layers with --torch-history: every tensor's history entry carries its layer path
    # (user_metadata, written by the stand-in as PyTorch 2.6+ writes it), forward on the program's
    # thread, backward on the autograd engine's
    import pickle
    stub = os.path.join(args.src, "progs", "torchstub")
    p, t = run(["--layers", "--torch-history", "--stacks", "none"], "py_torch_train.py",
               extra=[stub], expect_ok=False)
    check("status", p.returncode, 0)
    check("program output", "py_torch_train: ok" in p.stdout, True)
    if not os.path.exists(t + ".torch.pickle"):
        check("snapshot beside the trace", False, True)
        finish()
    with open(t + ".torch.pickle", "rb") as fh:
        snap = pickle.load(fh)
    allocs = [e for e in snap["device_traces"][0] if e["action"] == "alloc"]
    L = "model/model.encoder/model.encoder.layers"
    B = " (backward)"
    LB = f"model{B}/model.encoder{B}/model.encoder.layers"
    want = [""] * 11  # model.cuda(): 5 Linear layers' weight and bias; the input
    want += [f"{L}.0/model.encoder.layers.0.attn", f"{L}.0/model.encoder.layers.0.ff",
             f"{L}.1/model.encoder.layers.1.attn", f"{L}.1/model.encoder.layers.1.ff",
             "model/model.head",
             "",  # loss = y.sum(), outside the model
             "", "",  # backward: the loss's gradient and the sum's, before any module's
             f"model{B}/model.head{B}", f"model{B}/model.head{B}",
             f"{LB}.1{B}/model.encoder.layers.1.ff{B}", f"{LB}.1{B}/model.encoder.layers.1.ff{B}",
             f"{LB}.1{B}/model.encoder.layers.1.attn{B}",
             f"{LB}.1{B}/model.encoder.layers.1.attn{B}",
             f"{LB}.0{B}/model.encoder.layers.0.ff{B}", f"{LB}.0{B}/model.encoder.layers.0.ff{B}",
             f"{LB}.0{B}/model.encoder.layers.0.attn{B}"]
    check("every tensor's user_metadata is its layer path", [e.get("user_metadata")
                                                            for e in allocs], want)
    inside = [e for e in allocs if e.get("user_metadata")]
    check("the tensors made inside modules", len(inside), 14)
    ann = snap.get("external_annotations", [])
    check("record_function: START and END annotations",
          [(a["name"], a["stage"], sorted(a)) for a in ann],
          [("train_step", "START", ["device", "name", "stage", "time_us"]),
           ("train_step", "END", ["device", "name", "stage", "time_us"])])
    if len(ann) == 2:
        check("the annotation brackets the module tensors",
              all(ann[0]["time_us"] <= e["time_us"] <= ann[1]["time_us"] for e in inside), True)
    # the trace's own ranges (the hooks' pushes, on the program's threads; thread 1 is the
    # merged history's) end with the same paths: forward ones inside the program's NVTX range
    # `train` (the same thread), backward ones on the autograd engine's thread, outside it
    dump = subprocess.run([args.gpumemprof, "dump", t], capture_output=True, text=True,
                          env=base_env(), timeout=60).stdout
    pushed = {path for tid, path in re.findall(r'^\d+ (\d+) range_push .*path="([^"]*)"', dump,
                                               re.M) if tid != "1"}
    metas = {e["user_metadata"] for e in inside}

    def full(meta):  # the trace's path of a layer path
        return meta if meta.startswith(f"model{B}") else "train/" + meta
    check("each layer path is the end of a range of the trace",
          sorted(m for m in metas if full(m) not in pushed), [])
    # the merged trace (gmp_merge_torch) gives every tensor live at the peak that a module made
    # (its stack passes through a forward of the program, or the autograd engine) the trace's
    # range whose path ends with its user_metadata: its layer path with the program's `train`
    # around it
    doc = report(t)
    live = doc.get("live_at_peak", [])

    def by_module(e):
        return any((f["function"] == "forward" and f["file"].endswith("py_torch_train.py")) or
                   f["file"].endswith(os.path.join("autograd", "__init__.py"))
                   for f in e["stack"] or [])
    check("merged: tensors made by modules at the peak", any(by_module(e) for e in live), True)
    check("merged: a forward tensor at the peak inside train/",
          any(by_module(e) and (e.get("range") or "").startswith("train/model/") for e in live),
          True)
    check("merged: every tensor a module made has its full layer path at the peak",
          [(e["bytes"], e.get("range")) for e in live
           if by_module(e) and e.get("range") not in {full(m) for m in metas}], [])
elif args.mode == "hooks":
    # the --layers hooks themselves with Debian's real torch (CPU): torch.compile (B1), spawn
    # workers (B2)
    r = subprocess.run([args.python, "-c", "import torch"], capture_output=True, env=base_env())
    if r.returncode != 0:
        print("skip: torch is not installed for " + args.python)
        sys.exit(SKIP)
    p, t = run(["--layers", "--stacks", "none"], "py_compile.py", expect_ok=False)
    check("compile: status", p.returncode, 0)
    check("compile: the same result", "same=True" in p.stdout, True)
    check("compile: no frame inspection while tracing", "getframe_calls=0" in p.stdout, True)
    dump = subprocess.run([args.gpumemprof, "dump", t], capture_output=True, text=True,
                          env=base_env(), timeout=60).stdout
    pushed = re.findall(r' range_push .*path="([^"]*)"', dump)
    check("compile: the eager model's ranges", pushed, ["eager", "eager/eager.lin",
                                                        "eager/eager.act"])
    doc = report(t)
    check("compile: the trace says once that compiled modules have no range",
          len([n for n in doc["notices"] if "torch.compile compiled 2 graph" in n["message"]]), 1)
    # --torch-history in a real-torch process that never uses CUDA: nothing at import (Debian's
    # 1.13 has no history API: the line would come at the first CUDA use only), no trace
    p = gmp_testlib.run([args.gpumemprof, "run", "-o", os.path.join(work, "cpu.zst"), "--force",
                         "--layers", "--torch-history", "--", args.python, "-c",
                         "import torch; print(float(torch.nn.Linear(2, 2)(torch.ones(1, 2)).sum()"
                         " * 0))"], expect=None, env=base_env(), text=True, timeout=120)
    check("real torch without CUDA: status", p.returncode, 0)
    check("real torch without CUDA: no line from the hooks or the agent",
          [x for x in p.stderr.splitlines() if x.startswith("gpumemprof:") and
           not x.startswith("gpumemprof: no trace was written")], [])
    check("real torch without CUDA: no trace", os.path.exists(os.path.join(work, "cpu.zst")),
          False)
    # spawn and forkserver (Linux's default from Python 3.14) workers: nn modules called in a
    # process that never uses CUDA
    for method in ("spawn", "forkserver"):
        pat = os.path.join(work, method + "_%p.zst")
        p = gmp_testlib.run([args.gpumemprof, "run", "-o", pat, "--layers", "--stacks", "none",
                             "--", args.python, os.path.join(args.src, "progs", "py_spawn.py"),
                             args.progs, method], expect=None, env=base_env(), text=True,
                            timeout=180)
        check(f"{method}: status", p.returncode, 0)
        check(f"{method}: the worker ran", "worker exit=0" in p.stdout, True)
        check(f"{method}: one trace (the parent's)",
              len(glob.glob(os.path.join(work, method + "_*.zst"))), 1)
        check(f"{method}: one 'recording to' line",
              len([x for x in p.stderr.splitlines() if "gpumemprof: recording to" in x]), 1)
elif args.mode == "versions":
    found = {}
    cands = [shutil.which(f"python3.{m}") for m in range(8, 14)]
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))
    for exe in cands:
        if not exe:
            continue
        m = python_version(exe)
        if m is not None and 8 <= m <= 13 and m not in found:
            found[m] = exe
    if not found:
        print("skip: no CPython 3.8-3.13 found")
        sys.exit(SKIP)
    if args.ends:
        found = {m: found[m] for m in (min(found), max(found))}
    print("interpreters: " + ", ".join(f"3.{m}={e}" for m, e in sorted(found.items())))
    for m, exe in sorted(found.items()):
        p, t = run(["--stacks", "python"], "py_alloc.py", python=exe, trace=f"py3{m}.zst")
        check_alloc(f"3.{m} python", report(t), m, True)
        p, t = run(["--stacks", "all"], "py_alloc.py", python=exe, trace=f"all3{m}.zst")
        doc = report(t)
        check_alloc(f"3.{m} all", doc, m, False)
        check_spliced(f"3.{m} all", doc, m)
        if m >= 9:
            run_nogil(f"3.{m} nogil", exe, m, f"3{m}")
            run_lines(f"3.{m} lines", exe)
elif args.mode == "layers":
    r = subprocess.run([args.python, "-c", "import torch"], capture_output=True, env=base_env())
    if r.returncode != 0:
        print("skip: torch is not installed for " + args.python)
        sys.exit(SKIP)
    p, t = run(["--layers", "--stacks", "none"], "py_layers.py")
    check("program output", "py_layers: ok" in p.stdout, True)
    dump = subprocess.run([args.gpumemprof, "dump", t], capture_output=True, text=True,
                          env=base_env(), timeout=60)
    events = []
    for line in dump.stdout.splitlines():
        mm = re.search(r" (range_push|range_pop) .*path=\"([^\"]*)\"", line)
        if mm:
            events.append((mm.group(1), mm.group(2)))
    # forward: every module call is a range named by its qualified name, nested as the calls
    L = "model.encoder.layers"
    fwd = [e for e in events if "(backward)" not in e[1]]
    want = [("range_push", "train"), ("range_push", "train/model"),
            ("range_push", "train/model/model.encoder")]
    for i in range(4):
        base = f"train/model/model.encoder/{L}.{i}"
        want += [("range_push", base), ("range_push", f"{base}/{L}.{i}.attn"),
                 ("range_push", f"{base}/{L}.{i}.attn/{L}.{i}.attn.q"),
                 ("range_pop", f"{base}/{L}.{i}.attn/{L}.{i}.attn.q"),
                 ("range_pop", f"{base}/{L}.{i}.attn"),
                 ("range_push", f"{base}/{L}.{i}.ff"), ("range_pop", f"{base}/{L}.{i}.ff"),
                 ("range_pop", base)]
    want += [("range_pop", "train/model/model.encoder"), ("range_push", "train/model/model.head"),
             ("range_pop", "train/model/model.head"), ("range_pop", "train/model")]
    check("forward ranges", fwd[:len(want)], want)
    # backward: `<name> (backward)` ranges, outer modules around inner ones, layers in reverse
    bwd = [(k, "/".join(s for s in path.split("/") if s != "train"))
           for k, path in events if "(backward)" in path]
    B = " (backward)"
    wantb = [("range_push", "model" + B), ("range_push", "model" + B + "/model.head" + B),
             ("range_pop", "model" + B + "/model.head" + B),
             ("range_push", "model" + B + "/model.encoder" + B)]
    for i in (3, 2, 1, 0):
        base = f"model{B}/model.encoder{B}/{L}.{i}{B}"
        wantb += [("range_push", base), ("range_push", f"{base}/{L}.{i}.ff{B}"),
                  ("range_pop", f"{base}/{L}.{i}.ff{B}"),
                  ("range_push", f"{base}/{L}.{i}.attn{B}"),
                  ("range_push", f"{base}/{L}.{i}.attn{B}/{L}.{i}.attn.q{B}")]
        if i:
            wantb += [("range_pop", f"{base}/{L}.{i}.attn{B}/{L}.{i}.attn.q{B}"),
                      ("range_pop", f"{base}/{L}.{i}.attn{B}"), ("range_pop", base)]
    check("backward ranges", bwd[:len(wantb)], wantb)
    check("backward ranges inside train", all(path.startswith("train/") for k, path in events
                                              if "(backward)" in path), True)
    # the allocations made inside each layer's attention block
    doc = report(t)
    got = {}
    for e in doc["live_at_peak"]:
        got[e["bytes"]] = e.get("range") or e.get("path")
    for i in range(4):
        check(f"allocation in layer {i}", got.get((i + 1) * MiB),
              f"train/model/model.encoder/{L}.{i}/{L}.{i}.attn")
elif args.mode == "site":
    env = base_env()
    env["PYTHONPATH"] = os.path.join(args.src, "progs", "usersite")
    p, t = run(["--layers", "--torch-alloc", "async"], "py_env.py", env=env)
    check("user sitecustomize ran", "user_site=ran" in p.stdout, True)
    check("sys.modules['sitecustomize'] is the user's",
          "site=" + os.path.join(args.src, "progs", "usersite", "sitecustomize.py") in p.stdout,
          True)
    check("torch watcher installed", "watcher=True" in p.stdout, True)
    p, t = run([], "py_env.py", env=env, trace="t2.zst")
    check("without --layers: user sitecustomize ran", "user_site=ran" in p.stdout, True)
    check("without --layers: no watcher", "watcher=False" in p.stdout, True)
    check("without --torch-alloc: conf untouched", "conf=<unset>" in p.stdout, True)
    # two more copies of gpumemprof's sitecustomize on PYTHONPATH before the user's: each chains
    # to the next, none recurses, the user's still runs, and one watcher is installed
    copies = []
    for d in ("copyA", "copyB"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
        shutil.copyfile(os.path.join(args.src, "..", "..", "agent", "python", "sitecustomize.py"),
                        os.path.join(work, d, "sitecustomize.py"))
        copies.append(os.path.join(work, d))
    env = base_env()
    env["PYTHONPATH"] = ":".join(copies + [os.path.join(args.src, "progs", "usersite")])
    p, t = run(["--layers"], "py_env.py", env=env, trace="t3.zst", expect_ok=False)
    check("two copies: status", p.returncode, 0)
    check("two copies: no recursion", "RecursionError" in p.stderr, False)
    check("two copies: user sitecustomize ran", "user_site=ran" in p.stdout, True)
    check("two copies: one watcher", "watchers=1" in p.stdout, True)
    bad = subprocess.run([args.gpumemprof, "run", "--layers", "--no-nvtx", "--", "true"],
                         capture_output=True, text=True, env=base_env())
    check("--layers --no-nvtx exit", bad.returncode, 2)
    bad = subprocess.run([args.gpumemprof, "run", "--stacks", "bogus", "--", "true"],
                         capture_output=True, text=True, env=base_env())
    check("--stacks bogus exit", bad.returncode, 2)
    check("--stacks bogus message", "expected auto, native, python, all or none" in bad.stderr,
          True)
elif args.mode == "torchalloc":
    cases = [
        ("async", None, "backend:cudaMallocAsync"),
        ("async", "expandable_segments:True", "backend:cudaMallocAsync,expandable_segments:True"),
        ("async", "backend:native,max_split_size_mb:128",
         "backend:cudaMallocAsync,max_split_size_mb:128"),
        ("native", "backend:cudaMallocAsync", "backend:native"),
    ]
    for i, (mode, old, want) in enumerate(cases):
        env = base_env()
        if old is not None:
            env["PYTORCH_CUDA_ALLOC_CONF"] = old
        p, t = run(["--torch-alloc", mode], "py_env.py", env=env, trace=f"t{i}.zst")
        check(f"--torch-alloc {mode} with {old!r}", re.search(r"conf=(.*)", p.stdout).group(1),
              want)
        check(f"--torch-alloc {mode} with {old!r}: PYTORCH_ALLOC_CONF the same",
              re.search(r"alloc_conf=(.*)", p.stdout).group(1), want)
    # the user's PYTORCH_ALLOC_CONF alone: both variables carry its options with the backend,
    # whichever one the PyTorch version reads (c10/cuda/CUDAAllocatorConfig.h)
    env = base_env()
    env["PYTORCH_ALLOC_CONF"] = "expandable_segments:True"
    p, t = run(["--torch-alloc", "native"], "py_env.py", env=env, trace="t_alloc.zst")
    check("--torch-alloc native with PYTORCH_ALLOC_CONF only",
          (re.search(r"conf=(.*)", p.stdout).group(1),
           re.search(r"alloc_conf=(.*)", p.stdout).group(1)),
          ("backend:native,expandable_segments:True",) * 2)
    bad = subprocess.run([args.gpumemprof, "run", "--torch-alloc", "sync", "--", "true"],
                         capture_output=True, text=True, env=base_env())
    check("--torch-alloc sync exit", bad.returncode, 2)
else:
    print("unknown mode " + args.mode)
    sys.exit(2)
finish()
