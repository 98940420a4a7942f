#!/usr/bin/env python3
"""gpumemprof.fleet (agent/python/gpumemprof/fleet.py; docs/fleet.md, "On a Dask cluster"): the
cross-rank view of many traces summarized by the tasks of a Dask LocalCluster of two worker
processes, on Debian's python3 with its python3-distributed (exit 77, skipped, without it).

On 18 traces of tests/tools/gen_traces (16 ranks of a small job, `convert rank R`; the report
fixture, which has an OOM and two devices and no rank; one more rank under a name with a
non-ASCII character and a byte that is not UTF-8):
  - `python3 -m gpumemprof.fleet --scheduler local:2 --format json` writes the same bytes as
    `gpumemprof report --cross-rank --format json` over the same traces in the same order, with
    one task per trace (--batch 1); with the default batches (one per worker) -o FILE.md the same
    Markdown; the Python API, cross_rank() on a LocalCluster of the caller's, the same text;
  - the tasks ran in two different worker processes, neither of them the client, and every
    trace was summarized once, in the command line's order;
  - on a scheduler and two workers started apart (`dask scheduler`, `dask worker --no-nanny`)
    whose Python cannot import the package and whose PATH has no gpumemprof: the same bytes with
    --gpumemprof, the tasks in those two processes; without it, the workers named;
  - a trace no worker can read is named with each worker and the reason (exit 1, nothing on
    stdout); a corrupt trace is named with the worker that ran it and gpumemprof's message;
  - without Dask's distributed, one line says what is missing (exit 1);
  - the batches (plan()) keep the command line's order and go only to workers that can read them.

test_fleet.py --gpumemprof BIN --gen-traces BIN --pkg DIR --python PY --tmp DIR"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def run(cmd, env, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, **kw)
    if p.returncode < 0:
        FAILS.append("%s: killed by signal %d" % (cmd[:4], -p.returncode))
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    for o in ("--gpumemprof", "--gen-traces", "--pkg", "--python", "--tmp"):
        ap.add_argument(o, required=True)
    a = ap.parse_args()
    env = dict(os.environ, LC_ALL="C", NO_COLOR="1", PYTHONPATH=a.pkg, PYTHONDONTWRITEBYTECODE="1")
    for k in list(env):
        if k.startswith("GPUMEMPROF_") or k in ("CUDA_INJECTION64_PATH", "LD_PRELOAD"):
            del env[k]
    # the package on the path is the build's, and gpumemprof beside it is the one under test
    env["PATH"] = os.path.dirname(os.path.abspath(a.gpumemprof)) + os.pathsep + env.get("PATH", "")
    rc, _, err = run([a.python, "-c", "import distributed"], env)
    if rc != 0:
        print("SKIP: %s has no Dask distributed (%s)" % (a.python, err.strip().splitlines()[-1:]))
        sys.exit(77)
    os.makedirs(a.tmp, exist_ok=True)
    d = tempfile.mkdtemp(prefix="fleet-", dir=a.tmp)
    db = os.fsencode(d)
    traces = []
    for r in range(16):
        p = os.path.join(d, "rank%02d.zst" % r)
        subprocess.run([a.gen_traces, "convert", "rank", str(r), p], check=True)
        traces.append(p)
    fx = os.path.join(d, "fixture.zst")
    subprocess.run([a.gen_traces, "report", "fixture", fx], check=True)
    traces.insert(7, fx)
    # a name that is not plain ASCII, and one byte that is not UTF-8: the paths travel to the
    # workers as Python strings (surrogate escapes) and come back in the summaries as gpumemprof
    # wrote them
    odd = os.fsdecode(db + b"/rank16-\xc3\xa9-\xff.zst")
    subprocess.run([a.gen_traces, "convert", "rank", "16", os.fsencode(odd)], check=True)
    traces.append(odd)

    fleet = [a.python, "-m", "gpumemprof.fleet", "--scheduler", "local:2"]
    rc, want, err = run([a.gpumemprof, "report", "--cross-rank", "--format", "json"] + traces, env)
    check(rc == 0, "report --cross-rank: exit status %d (%s)" % (rc, err.strip()))
    doc = json.loads(want)
    check(len(doc["ranks"]) == len(traces), "the view has a row per trace")
    check(any(r["ooms"] for r in doc["ranks"]), "the fixture's OOM is in the view")

    # one task per trace: the tasks spread over both workers
    rc, got, err = run(fleet + ["--batch", "1", "-v", "--format", "json"] + traces, env)
    check(rc == 0, "fleet --batch 1: exit status %d (%s)" % (rc, err.strip()))
    check(got == want, "fleet --batch 1: the same JSON bytes as report --cross-rank")
    tasks = re.findall(r"^gpumemprof\.fleet: task (\d+): (\d+) traces on worker (\S+) "
                       r"\(pid (\d+) on [^)]*\): (.*)$", err, re.M)
    check(len(tasks) == len(traces), "one task per trace (%d tasks)" % len(tasks))
    pids = {int(t[3]) for t in tasks}
    workers = {t[2] for t in tasks}
    check(len(pids) == 2 and len(workers) == 2,
          "the tasks ran in two worker processes (pids %s)" % sorted(pids))
    check(os.getpid() not in pids, "the tasks did not run in the test's process")
    seen = []
    for t in tasks:
        seen += t[4].split(" ")
    check(len(seen) == len(traces), "each trace summarized once (%d)" % len(seen))
    check(seen[:len(traces) - 1] == traces[:-1], "the tasks in the command line's order")

    # the default batches (one per worker), Markdown to a file (the format from -o's extension)
    out = os.path.join(d, "view.md")
    rc, want_m, err = run([a.gpumemprof, "report", "--cross-rank", "--format", "markdown"] + traces,
                          env)
    check(rc == 0, "report --cross-rank markdown: exit status %d (%s)" % (rc, err.strip()))
    rc, got, err = run(fleet + ["-v", "-o", out] + traces, env)
    check(rc == 0, "fleet -o: exit status %d (%s)" % (rc, err.strip()))
    check(got == b"", "fleet -o: nothing on stdout")
    with open(out, "rb") as f:
        check(f.read() == want_m, "fleet -o view.md: the same Markdown as report --cross-rank")
    n = len(re.findall(r"^gpumemprof\.fleet: task \d+: ", err, re.M))
    check(n == 2, "the default: one batch per worker (%d tasks)" % n)

    # the Python API: cross_rank() on a client of the caller's, text
    rc, want_t, err = run([a.gpumemprof, "report", "--cross-rank"] + traces, env)
    check(rc == 0, "report --cross-rank text: exit status %d (%s)" % (rc, err.strip()))
    code = """
import os, sys
from distributed import Client, LocalCluster
from gpumemprof import fleet
if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as lc, \\
            Client(lc) as c:
        sys.stdout.buffer.write(fleet.cross_rank([os.fsdecode(a) for a in sys.argv[1:]], c,
                                                 fmt="text"))
"""
    api = os.path.join(d, "api.py")
    with open(api, "w") as f:
        f.write(code)
    rc, got, err = run([a.python, api] + traces, dict(env, GPUMEMPROF_NO_AUTOSTART="1"))
    check(rc == 0, "cross_rank(): exit status %d (%s)" % (rc, err.strip()[-500:]))
    check(got == want_t, "cross_rank(): the same text as report --cross-rank")

    # a scheduler and two workers started apart (dask scheduler, dask worker --no-nanny: the
    # worker is the process started here), the workers without the package on their path and
    # gpumemprof not in their PATH: the tasks travel by value, --gpumemprof names the binary
    sched = os.path.join(d, "scheduler.json")
    wenv = dict(env, PATH="/usr/bin:/bin")
    del wenv["PYTHONPATH"]
    procs = [subprocess.Popen([a.python, "-m", "distributed.cli.dask_scheduler", "--host",
                               "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
                               sched], env=wenv, cwd=d, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    try:
        for _ in range(2):
            procs.append(subprocess.Popen([a.python, "-m", "distributed.cli.dask_worker",
                                           "--scheduler-file", sched, "--nthreads", "1",
                                           "--no-nanny", "--no-dashboard"], env=wenv, cwd=d,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait = ("import json, sys, time\n"
                "from distributed import Client\n"
                "for _ in range(600):\n"
                "    try:\n"
                "        addr = json.load(open(sys.argv[1]))['address']; break\n"
                "    except (OSError, ValueError, KeyError):\n"
                "        time.sleep(0.1)\n"
                "with Client(addr, timeout=60) as c:\n"
                "    c.wait_for_workers(2, timeout=120)\n"
                "    print(addr)\n")
        rc, out, err = run([a.python, "-c", wait, sched], wenv)
        check(rc == 0, "the scheduler and its 2 workers started (%s)" % err.strip()[-300:])
        if rc == 0:
            addr = out.decode().strip()
            rc, out, err = run([a.python, "-c", "import gpumemprof"], wenv)
            check(rc != 0, "the workers' python cannot import gpumemprof")
            rc, got, err = run([a.python, "-m", "gpumemprof.fleet", "--scheduler", addr,
                                "--gpumemprof", os.path.abspath(a.gpumemprof), "--batch", "3",
                                "-v", "--format", "json"] + traces, env)
            check(rc == 0, "fleet --scheduler %s: exit status %d (%s)" % (addr, rc, err.strip()))
            check(got == want, "fleet on a scheduler started apart: the bytes of report")
            pids = {int(x) for x in re.findall(r"^gpumemprof\.fleet: task \d+: \d+ traces on "
                                               r"worker \S+ \(pid (\d+) ", err, re.M)}
            check(pids == {p.pid for p in procs[1:]},
                  "the tasks ran in the two workers started here (%s)" % sorted(pids))
            # without --gpumemprof the workers find none: named before any task
            rc, got, err = run([a.python, "-m", "gpumemprof.fleet", "--scheduler", addr]
                               + traces[:2], env)
            check(rc == 1 and "gpumemprof not found on worker tcp://" in err and
                  "give --gpumemprof PATH" in err,
                  "no gpumemprof on the workers: said (%d, %s)" % (rc, err.strip()))
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # a trace that no worker can read, and a corrupt one
    missing = os.path.join(d, "gone", "rank99.zst")
    rc, got, err = run(fleet + [traces[0], missing, traces[1]], env)
    check(rc == 1, "a missing trace: exit status 1 (%d)" % rc)
    check(got == b"", "a missing trace: nothing on stdout")
    check(re.search(re.escape(missing) + r": not readable on any of the 2 workers \(worker tcp://"
                    r"\S+ \(pid \d+ on [^)]*\): No such file or directory; worker ", err)
          is not None, "a missing trace: its path, each worker and why (%s)" % err.strip())
    bad = os.path.join(d, "bad.zst")
    with open(bad, "wb") as f:
        f.write(b"not a trace\n")
    rc, got, err = run(fleet + [traces[0], bad, traces[1]], env)
    check(rc == 1 and got == b"", "a corrupt trace: exit status 1, nothing on stdout (%d)" % rc)
    check(re.search(r"^gpumemprof\.fleet: worker tcp://\S+ \(pid \d+ on [^)]*\): gpumemprof "
                    r"report: " + re.escape(bad) + ": not a gpumemprof trace", err, re.M)
          is not None, "a corrupt trace: the worker and gpumemprof's message (%s)" % err.strip())

    # a scheduler address it cannot use
    rc, got, err = run([a.python, "-m", "gpumemprof.fleet", "--scheduler", "bogus://x", traces[0]],
                       env)
    check(rc == 1 and got == b"" and "gpumemprof.fleet: cannot reach the scheduler bogus://x: "
          in err, "a bad scheduler address: one line, exit status 1 (%d, %s)" % (rc, err.strip()))

    # without distributed
    code = ("import sys, runpy; sys.modules['distributed'] = None; "
            "sys.argv = ['gpumemprof.fleet', '--scheduler', 'local:2', %r]; "
            "runpy.run_module('gpumemprof.fleet', run_name='__main__')" % traces[0])
    # (run as -c, the package's import would arm the agent: not what is tested here, and a
    # sanitizer build's agent cannot load into an uninstrumented python)
    rc, got, err = run([a.python, "-c", code], dict(env, GPUMEMPROF_NO_AUTOSTART="1"))
    check(rc == 1 and got == b"", "without distributed: exit status 1 (%d)" % rc)
    check("gpumemprof.fleet: needs Dask's distributed package" in err,
          "without distributed: the message (%s)" % err.strip())

    # plan(): consecutive traces that the same workers can read, at most --batch each
    env1 = dict(env, GPUMEMPROF_NO_AUTOSTART="1")
    code = r"""
import json, sys
from gpumemprof import fleet
probes = {"A": {"unreadable": {2: "x", 3: "x"}, "worker": "A", "pid": 1, "host": "h"},
          "B": {"unreadable": {0: "x", 5: "Permission denied"}, "worker": "B", "pid": 2, "host": "h"}}
print(json.dumps(fleet.plan(["t%d" % i for i in range(7)], probes, 2)))
probes["A"]["unreadable"][5] = "No such file or directory"
try:
    fleet.plan(["t%d" % i for i in range(7)], probes, 2)
except fleet.FleetError as e:
    print(e)
"""
    rc, got, err = run([a.python, "-c", code], env1)
    lines = got.decode().splitlines()
    check(rc == 0 and len(lines) == 2, "plan(): ran (%s)" % err.strip())
    if rc == 0 and len(lines) == 2:
        check(json.loads(lines[0]) == [[[0], ["A"]], [[1], ["A", "B"]], [[2, 3], ["B"]],
                                       [[4], ["A", "B"]], [[5], ["A"]], [[6], ["A", "B"]]],
              "plan(): batches in order, each to the workers that can read it (%s)" % lines[0])
        check(lines[1] == "t5: not readable on any of the 2 workers (worker A (pid 1 on h): No "
              "such file or directory; worker B (pid 2 on h): Permission denied)",
              "plan(): a trace nobody reads (%s)" % lines[1])

    if FAILS:
        print("%d failures (files kept in %s)" % (len(FAILS), d))
        sys.exit(1)
    shutil.rmtree(d, ignore_errors=True)
    print("fleet: all checks passed")


if __name__ == "__main__":
    main()
