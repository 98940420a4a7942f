"""gpumemprof.fleet: the cross-rank view of many traces, summarized on a Dask cluster.

    python3 -m gpumemprof.fleet --scheduler tcp://host:8786 /shared/run/*.zst
    python3 -m gpumemprof.fleet --scheduler local:4 --format json -o ranks.json run/*.zst

The traces are cut into batches; each batch is a task of a Dask distributed cluster that runs
`gpumemprof report --summary-only` on a worker that can read every trace of the batch (the paths
are the worker's: a shared file system, or each node's own disk) and returns the summaries' JSON
text unchanged. The client writes them, in the order of the command line, to files that the
local `gpumemprof report --reduce` turns into the cross-rank view: the same bytes as
`gpumemprof report --cross-rank --format F TRACES...` run in one place (docs/report.md,
"Per-rank summaries"; docs/fleet.md, "On a Dask cluster").

Before any task, each worker says which traces it can read and which gpumemprof it would run: a
trace that no worker can read, or a worker without gpumemprof, stops the run with one message that
names the trace, the workers and why (exit 1); so does a batch whose gpumemprof fails. Nothing is
left out silently.

A worker needs Dask's distributed and the gpumemprof binary, not this package: the task functions
travel by value (cloudpickle). On the worker, gpumemprof is --gpumemprof when given (a bare name
is looked up in the worker's PATH), else the one beside the worker's gpumemprof package (its
build tree's bin/, or the prefix it was installed in), else `gpumemprof` in the worker's PATH.

Python API: `cross_rank(traces, client, fmt="json")` returns the output as bytes."""
import argparse
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

SUMMARY_SCHEMA = "gpumemprof-rank-summary/1"
FORMATS = ("text", "markdown", "html", "json")
# A batch's summaries are one --reduce input: it refuses files above 4,194,304 JSON values
# (docs/report.md); a summary holds at most 256 ranges of 7 values plus its own members and
# devices, so 1,024 summaries stay well below that bound.
MAX_BATCH = 1024


class FleetError(Exception):
    """A failure the command reports in one message (exit status 1)."""


def _gpumemprof_candidates(explicit):
    """Where gpumemprof is looked for on this machine, in order: (path, where it comes from).
    Runs on the worker for the tasks, on the client for the reduction."""
    if explicit:
        if os.sep in explicit:
            return [(explicit, "--gpumemprof")]
        found = shutil.which(explicit)
        return [(found or explicit, "--gpumemprof, in PATH")]
    out = []
    try:
        # find_spec locates the package without importing it (an import would start the agent)
        spec = importlib.util.find_spec("gpumemprof")
    except (ImportError, ValueError):
        spec = None
    locs = list(spec.submodule_search_locations or []) if spec is not None else []
    for pkg in locs:
        # <build>/lib/gpumemprof/python/gpumemprof and <prefix>/lib/gpumemprof/python/gpumemprof:
        # the CLI is <build or prefix>/bin/gpumemprof (agent/CMakeLists.txt)
        out.append((os.path.normpath(os.path.join(pkg, "..", "..", "..", "..", "bin", "gpumemprof")),
                    "beside the gpumemprof package"))
        # a copy installed by pip elsewhere: _where.py names the agent of the build it came from
        # (<agentdir>/libgpumemprof_agent.so, <agentdir> = <build or prefix>/lib/gpumemprof)
        try:
            with open(os.path.join(pkg, "_where.py"), encoding="utf-8") as f:
                m = re.search(r'^AGENT = "(.*)"$', f.read(), re.M)
        except OSError:
            m = None
        if m:
            out.append((os.path.normpath(os.path.join(os.path.dirname(m.group(1)), "..", "..",
                                                      "bin", "gpumemprof")),
                        "the build the gpumemprof package came from"))
    found = shutil.which("gpumemprof")
    if found:
        out.append((found, "PATH"))
    return out


def find_gpumemprof(explicit=None):
    """(path, None) of the gpumemprof to run here, or (None, what was tried)."""
    tried = []
    for path, origin in _gpumemprof_candidates(explicit):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path, None
        tried.append("%s (%s): %s" % (path, origin,
                                      "not executable" if os.path.exists(path) else "no such file"))
    return None, "; ".join(tried) or "no gpumemprof package and none in PATH"


def _where_am_i():
    """This worker: its address, host and pid (the client names them in its messages)."""
    try:
        from distributed import get_worker

        addr = get_worker().address
    except (ImportError, ValueError):
        addr = "?"
    return {"worker": addr, "host": socket.gethostname(), "pid": os.getpid()}


def _probe(paths, explicit):
    """On each worker: the gpumemprof it would run, and why each trace it cannot read is not
    readable ({index: reason})."""
    me = _where_am_i()
    me["gpumemprof"], me["gpumemprof_tried"] = find_gpumemprof(explicit)
    bad = {}
    for i, p in enumerate(paths):
        try:
            with open(p, "rb"):
                pass
        except OSError as e:
            bad[i] = e.strerror or str(e)
    me["unreadable"] = bad
    return me


def _summarize(paths, explicit, jobs):
    """The task: `gpumemprof report --summary-only` on a batch of traces, on this worker. Returns
    the summaries' JSON bytes as gpumemprof wrote them, its stderr, its exit status and the worker."""
    me = _where_am_i()
    gmp, tried = find_gpumemprof(explicit)
    if gmp is None:
        me.update(rc=None, out=b"", err="gpumemprof not found (tried %s)" % tried)
        return me
    cmd = [gmp, "report", "--summary-only", "--no-progress"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    p = subprocess.run(cmd + ["--"] + list(paths), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL)
    me.update(rc=p.returncode, out=p.stdout, err=p.stderr.decode("utf-8", "replace"),
              gpumemprof=gmp)
    return me


def _who(w):
    return "worker %s (pid %s on %s)" % (w.get("worker"), w.get("pid"), w.get("host"))


def _ship_by_value():
    """Let the tasks travel by value, so that a worker needs no copy of this package."""
    import cloudpickle

    mod = sys.modules.get(__name__)
    if mod is not None and __name__ != "__main__" and hasattr(cloudpickle,
                                                              "register_pickle_by_value"):
        try:
            cloudpickle.register_pickle_by_value(mod)
        except ValueError:
            pass


def plan(traces, probes, batch):
    """Batches of consecutive traces (the command line's order is the output's: the reduction
    numbers the summaries by their place) that a same set of workers can all read; each with
    those workers' addresses. Raises FleetError for a trace no worker can read."""
    workers = sorted(probes)
    readers = []
    for i, p in enumerate(traces):
        can = tuple(w for w in workers if i not in probes[w]["unreadable"])
        if not can:
            why = "; ".join("%s: %s" % (_who(probes[w]), probes[w]["unreadable"][i])
                            for w in workers)
            raise FleetError("%s: not readable on any of the %d workers (%s)" %
                             (p, len(workers), why))
        readers.append(can)
    out, i = [], 0
    while i < len(traces):
        j = i + 1
        while j < len(traces) and j - i < batch and readers[j] == readers[i]:
            j += 1
        out.append((list(range(i, j)), list(readers[i])))
        i = j
    return out


def summarize(client, traces, batch=0, gpumemprof=None, jobs=0, log=None):
    """The batches' summaries (JSON bytes, in the traces' order) and the tasks' reports (a dict
    per batch: worker, host, pid, traces). Raises FleetError on any failure."""
    traces = list(traces)
    if not traces:
        raise FleetError("no trace given")
    _ship_by_value()
    probes = client.run(_probe, traces, gpumemprof)
    if not probes:
        raise FleetError("the cluster has no worker")
    missing = [w for w in sorted(probes) if probes[w]["gpumemprof"] is None]
    if missing:
        raise FleetError("gpumemprof not found on %s; give --gpumemprof PATH (the worker's path)" %
                         "; ".join("%s: tried %s" % (_who(probes[w]), probes[w]["gpumemprof_tried"])
                                   for w in missing))
    if batch <= 0:
        threads = sum(max(1, int(v.get("nthreads", 1)))
                      for v in client.scheduler_info().get("workers", {}).values()) or len(probes)
        batch = -(-len(traces) // threads)  # one batch per worker thread: symbols read once each
    batch = max(1, min(batch, MAX_BATCH))
    batches = plan(traces, probes, batch)
    futures = [client.submit(_summarize, [traces[i] for i in idx], gpumemprof, jobs,
                             workers=ws, allow_other_workers=False, pure=False)
               for idx, ws in batches]
    from distributed import wait

    wait(futures)
    outs, tasks, first_err = [], [], None
    for (idx, _), fut in zip(batches, futures):
        names = [traces[i] for i in idx]
        span = names[0] if len(names) == 1 else "%s ... %s (%d traces)" % (names[0], names[-1],
                                                                          len(names))
        try:
            r = fut.result()
        except Exception as e:  # a worker that died, a task lost: the batch is named
            first_err = first_err or "%s: the task failed: %s: %s" % (span, type(e).__name__, e)
            continue
        tasks.append({"worker": r["worker"], "host": r["host"], "pid": r["pid"],
                      "traces": names})
        if r["rc"] != 0:
            err = r["err"].strip() or "exit status %s" % r["rc"]
            first_err = first_err or "%s: %s" % (_who(r), err)
            continue
        if r["err"] and log is not None:
            log.write(r["err"])  # gpumemprof's warnings (a trace cut short), as it wrote them
        head = r["out"][:200].decode("utf-8", "replace")
        if SUMMARY_SCHEMA not in head:
            first_err = first_err or ("%s: %s did not write %s summaries (not gpumemprof's CLI, or "
                                      "one without --summary-only?)" %
                                      (_who(r), r["gpumemprof"], SUMMARY_SCHEMA))
            continue
        outs.append(r["out"])
    if first_err:
        raise FleetError(first_err)
    return outs, tasks


def reduce(outs, fmt=None, output=None, gpumemprof=None, stdout=None):
    """`gpumemprof report --reduce` (the local binary) over the batches' summaries. Writes to
    output (a path) or stdout (a file object; None: captured and returned as bytes)."""
    gmp, tried = find_gpumemprof(gpumemprof)
    if gmp is None:
        raise FleetError("gpumemprof not found here (tried %s)" % tried)
    with tempfile.TemporaryDirectory(prefix="gpumemprof-fleet-") as d:
        files = []
        for i, o in enumerate(outs):
            f = os.path.join(d, "batch%06d.json" % i)
            with open(f, "wb") as fh:
                fh.write(o)
            files.append(f)
        cmd = [gmp, "report", "--reduce", "--no-progress"]
        if fmt:
            cmd += ["--format", fmt]  # else report's default: text, or from -o's extension
        if output:
            cmd += ["-o", output]
        p = subprocess.run(cmd + ["--"] + files, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE if stdout is None else stdout,
                           stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise FleetError("gpumemprof report --reduce: %s" %
                         (p.stderr.decode("utf-8", "replace").strip() or
                          "exit status %d" % p.returncode))
    return p.stdout


def _here(gpumemprof):
    """The --gpumemprof that reduces here: a bare name, or a path that exists on this machine (it
    names the workers' binary, which may be elsewhere here: then the usual search)."""
    if gpumemprof and (os.sep not in gpumemprof or os.path.exists(gpumemprof)):
        return gpumemprof
    return None


def cross_rank(traces, client, fmt="json", batch=0, gpumemprof=None, jobs=0):
    """The cross-rank view of the traces (paths as the workers see them) as bytes, summarized on
    the client's cluster; the same bytes as `gpumemprof report --cross-rank --format FMT`.
    gpumemprof's warnings go to stderr; a failure raises FleetError."""
    outs, _ = summarize(client, traces, batch=batch, gpumemprof=gpumemprof, jobs=jobs,
                        log=sys.stderr)
    return reduce(outs, fmt=fmt, gpumemprof=_here(gpumemprof))


def _local_cluster(n):
    from distributed import LocalCluster

    # the workers are new processes (spawn) that import this module again: the package's
    # import must not arm the agent in them (it would wait for a CUDA they never use)
    os.environ.setdefault("GPUMEMPROF_NO_AUTOSTART", "1")
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                        dashboard_address=None)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python3 -m gpumemprof.fleet",
        description="The cross-rank view of many traces, each batch summarized by `gpumemprof "
                    "report --summary-only` on a Dask worker that can read it, reduced here: the "
                    "same output as `gpumemprof report --cross-rank` (docs/fleet.md).")
    ap.add_argument("--scheduler", required=True, metavar="ADDRESS|local[:N]",
                    help="a Dask scheduler (tcp://host:8786), or local[:N]: a LocalCluster of N "
                         "worker processes on this machine (default N: 2)")
    ap.add_argument("--batch", type=int, default=0, metavar="K",
                    help="traces per task (default: the traces divided by the workers' threads, "
                         "at most %d)" % MAX_BATCH)
    ap.add_argument("--format", "-f", choices=FORMATS,
                    help="as report's (default: text, or from -o's extension)")
    ap.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    ap.add_argument("--gpumemprof", metavar="PATH",
                    help="the gpumemprof binary (on the workers: their path; also the one that "
                         "reduces here when it exists here)")
    ap.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                    help="traces each task's gpumemprof reads at once (default: its own)")
    ap.add_argument("--verbose", "-v", action="store_true",
                    help="one line per task on stderr: its traces and the worker that ran it")
    ap.add_argument("traces", nargs="+", metavar="TRACE")
    a = ap.parse_args(argv)
    m = re.fullmatch(r"local(?::(\d+))?", a.scheduler)
    if m and m.group(1) is not None and int(m.group(1)) < 1:
        ap.error("--scheduler local:N: N must be at least 1")
    if a.batch < 0 or a.jobs < 0:
        ap.error("--batch and --jobs: a positive number")
    try:
        import distributed  # noqa: F401
    except ImportError as e:
        sys.stderr.write("gpumemprof.fleet: needs Dask's distributed package on the client and "
                         "the workers (Debian: apt install python3-distributed; pip install "
                         "distributed): %s\n" % e)
        return 1
    from distributed import Client

    local = None
    try:
        if m:
            local = _local_cluster(int(m.group(1) or 2))
            client = Client(local)
        else:
            client = Client(a.scheduler, timeout="30s")
    except Exception as e:  # OSError, TimeoutError, ValueError (an address it cannot parse), ...
        sys.stderr.write("gpumemprof.fleet: cannot reach the scheduler %s: %s\n" % (a.scheduler, e))
        if local is not None:
            local.close()
        return 1
    try:
        outs, tasks = summarize(client, a.traces, batch=a.batch, gpumemprof=a.gpumemprof,
                                jobs=a.jobs, log=sys.stderr)
        if a.verbose:
            for i, t in enumerate(tasks):
                sys.stderr.write("gpumemprof.fleet: task %d: %d traces on %s: %s\n" %
                                 (i, len(t["traces"]), _who(t), " ".join(t["traces"])))
        sys.stdout.flush()
        reduce(outs, fmt=a.format, output=a.output, gpumemprof=_here(a.gpumemprof),
               stdout=sys.stdout.buffer if not a.output else subprocess.DEVNULL)
    except FleetError as e:
        sys.stderr.write("gpumemprof.fleet: %s\n" % e)
        return 1
    except Exception as e:  # the cluster's own failures (a worker lost during client.run, ...)
        sys.stderr.write("gpumemprof.fleet: the Dask cluster at %s failed: %s: %s\n" %
                         (a.scheduler, type(e).__name__, e))
        return 1
    finally:
        client.close()
        if local is not None:
            local.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
