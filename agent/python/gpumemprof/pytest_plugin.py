"""The pytest plugin of gpumemprof: GPU memory budgets, leak checks and baselines per test.

Registered as the pytest11 entry point `gpumemprof` (pyproject.toml); without an install,
`pytest -p gpumemprof.pytest_plugin`. Options:

  --gpumemprof                   measure every test; a table of each test's peak, allocated and
                                 leaked bytes at the end of the session
  --gpumemprof-dir DIR           for each failing measured test, DIR/<test>.json (its figures, the
                                 top sites at its peak with their stacks) and DIR/<test>.zst: a
                                 trace of the test run again alone under `gpumemprof run` at the
                                 end of the session (--gpumemprof-no-rerun: the JSON only)
  --gpumemprof-baseline FILE     compare each test's peak with FILE (a JSON of per-test peaks);
                                 FILE is written when it does not exist
  --gpumemprof-baseline-update   (re)write FILE with this run's peaks
  --gpumemprof-tolerance T       how much a peak may grow over its baseline: "10%" (default) or a
                                 size ("1 MiB")
  --gpumemprof-markdown PATH     the comparison as a Markdown table (for a pull request)

Marker: @pytest.mark.gpu_memory(limit="2 GiB", leaks=0, peak="test"|"device") fails the test
when its peak is over limit or it leaves more than `leaks` bytes allocated, naming the size, the
limit and the top site at the peak (file:line). Marked tests are measured with or without
--gpumemprof; without an agent or a GPU they are skipped with the reason, never passed.

What is measured: the test's call (its body, not its fixtures' setup and teardown), as a
gpumemprof.profile() scope named after the test (an NVTX range of the test's id in the trace).
peak: the most bytes live on the devices above what was live when the call began (marker
peak="device": the devices' live bytes, whole process); allocated: bytes allocated during the call;
leaked: bytes allocated during the call minus bytes freed during it, when positive (the agent
counts bytes per device, not which allocation a free matched: a test that frees memory of an
earlier test as well as leaking its own shows the difference). Before the scope closes, PyTorch's
cache (torch.cuda.empty_cache) and numba's pending deallocations are released when those
libraries are in use, so memory they hold for reuse is not taken for a leak.

Loading the plugin imports the package `gpumemprof` without starting the agent (its import does
not when pytest loads a plugin): the agent is armed at configure time with --gpumemprof or a
baseline option (before collection, so that it counts from the first CUDA call), else at the
setup of the first marked test. A pytest run that measures nothing never starts it."""
import json
import os
import re
import sys

import pytest

from ._units import fmt_bytes, parse_size, table

MARK = "gpu_memory"
_KEY = "_gpumemprof_result"
_CHILD = "GPUMEMPROF_PYTEST_RERUN"  # set in the re-run of a failing test (--gpumemprof-dir)


def pytest_addoption(parser):
    g = parser.getgroup("gpumemprof", "GPU memory per test (gpumemprof)")
    g.addoption("--gpumemprof", action="store_true", default=False,
                help="measure each test's GPU memory (peak, allocated, leaked) and print a table")
    g.addoption("--gpumemprof-dir", metavar="DIR", default=None,
                help="write DIR/<test>.json for each failing measured test: its figures, the top "
                     "sites at its peak with their stacks, and its range in the trace")
    g.addoption("--gpumemprof-baseline", metavar="FILE", default=None,
                help="compare each test's peak with FILE (written when it does not exist)")
    g.addoption("--gpumemprof-baseline-update", action="store_true", default=False,
                help="write this run's peaks to the baseline FILE")
    g.addoption("--gpumemprof-tolerance", metavar="T", default="10%",
                help="growth over the baseline allowed: a percentage (default 10%%) or a size")
    g.addoption("--gpumemprof-markdown", metavar="PATH", default=None,
                help="write the baseline comparison as a Markdown table to PATH")
    g.addoption("--gpumemprof-no-rerun", action="store_true", default=False,
                help="--gpumemprof-dir: keep the JSON only, do not re-run each failing test "
                     "under `gpumemprof run` for a trace of its own")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu_memory(limit=None, leaks=None, peak='test'): fail the test when its GPU "
        "memory peak is over limit (\"2 GiB\", bytes) or it leaks more than `leaks` bytes "
        "(gpumemprof); skipped without a GPU or the gpumemprof agent")
    plugin = GpuMemPlugin(config)
    config.pluginmanager.register(plugin, "gpumemprof-plugin")


def _tolerance(text):
    """(fraction, bytes): "10%" -> (0.10, 0); "1 MiB" -> (0, 1048576)."""
    t = str(text).strip()
    if t.endswith("%"):
        v = float(t[:-1])
        if v < 0:
            raise ValueError(t)
        return v / 100.0, 0
    return 0.0, parse_size(t)


def _safe_name(nodeid):
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")
    return (s or "test")[:200]


class _Measure:
    """What a test's call gave: peak, device_peak, allocated, freed, leaked (bytes), elapsed_s,
    the top site (where, bytes), the Result (gpumemprof.Result) and the agent's status."""

    def __init__(self, res, status, item):
        self.item = item
        self.result = res
        self.status = status
        devs = res.devices.values()
        self.peak = sum(d.peak_increase_bytes for d in devs)
        self.device_peak = sum(d.peak_bytes for d in devs)
        self.allocated = sum(d.allocated_bytes for d in devs)
        self.freed = sum(d.freed_bytes for d in devs)
        self.leaked = max(0, sum(d.net_bytes for d in devs))
        self.elapsed_s = res.elapsed_s
        sites = res.top_sites
        self.top = sites[0] if sites else None

    def _rel(self, where):
        try:
            root = str(self.item.config.rootpath)
        except AttributeError:
            return where
        return where[len(root) + 1:] if where.startswith(root + os.sep) else where

    def top_text(self):
        """The site holding the most bytes on the devices at the peak (whoever allocated them):
        its innermost frame of the program's own code as file:line (profile()'s Site.where), and
        the test function's own line in that stack when it is another one (a helper allocated)."""
        if self.top is None:
            return "no site (nothing was live)"
        where = self._rel(self.top.where)
        test_file = os.path.abspath(str(self.item.fspath))
        name = getattr(self.item, "originalname", None) or self.item.name
        for f in self.top.frames:
            if f.kind == "py" and f.file and os.path.abspath(f.file) == test_file and \
                    f.function.split(".")[-1] == name:
                at = self._rel("%s:%d" % (f.file, f.line))
                if at != where:
                    where += " called from the test at " + at
                break
        return "%s (%s live there at the peak)" % (where, fmt_bytes(self.top.bytes))


def _release_caches():
    """Memory an allocator keeps for reuse is not a leak: PyTorch's caching allocator's cache
    (torch.cuda.empty_cache, when PyTorch initialized CUDA) and numba's pending deallocations
    (numba/cuda/cudadrv/driver.py _PendingDeallocs: a dropped array is freed when its context's
    queue is cleared; only contexts numba already made are touched)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:
        pass
    devices = sys.modules.get("numba.cuda.cudadrv.devices")
    try:
        gpus = devices._runtime.gpus if devices is not None else None
        for gpu in (gpus.__dict__.get("lst") or []) if gpus is not None else []:
            ctx = getattr(gpu, "primary_context", None)
            if ctx is not None:
                ctx.memory_manager.deallocations.clear()
    except Exception:
        pass


class GpuMemPlugin:
    def __init__(self, config):
        o = config.option
        self.config = config
        self.all = bool(o.gpumemprof)
        self.dir = o.gpumemprof_dir
        self.baseline_path = o.gpumemprof_baseline
        self.update = bool(o.gpumemprof_baseline_update)
        self.markdown = o.gpumemprof_markdown
        try:
            self.tol = _tolerance(o.gpumemprof_tolerance)
        except ValueError:
            raise pytest.UsageError("--gpumemprof-tolerance: not a percentage or a size: %r"
                                    % o.gpumemprof_tolerance)
        if self.update and not self.baseline_path:
            raise pytest.UsageError("--gpumemprof-baseline-update needs --gpumemprof-baseline FILE")
        self.baseline = None
        if self.baseline_path and os.path.exists(self.baseline_path) and not self.update:
            try:
                with open(self.baseline_path) as fh:
                    data = json.load(fh)
                self.baseline = {k: int(v["peak_bytes"]) for k, v in data["tests"].items()}
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise pytest.UsageError("--gpumemprof-baseline %s: not a gpumemprof baseline (%s)"
                                        % (self.baseline_path, e))
        self.rerun = not o.gpumemprof_no_rerun
        if os.environ.get(_CHILD) == "1":
            # the re-run of one failing test for --gpumemprof-dir: it judges the test again and
            # writes nothing of the session's (no baseline, no table file, no re-run)
            self.dir = self.baseline_path = self.markdown = None
            self.update = False
        self.rows = {}  # nodeid -> _Measure, in the order measured
        self.compare = {}  # nodeid -> (baseline peak or None, peak, verdict)
        self.written = []  # files of --gpumemprof-dir
        self.failed = []  # (item path, nodeid, json path) of the tests kept
        if self.all or self.baseline_path:
            # every test is measured: the agent armed now, before collection imports the tests
            # (which may initialize CUDA), so that it counts from the first CUDA call
            self._start()

    # -- which tests, and can they be measured --------------------------------------------------
    def _wants(self, item):
        return self.all or self.baseline_path is not None or \
            item.get_closest_marker(MARK) is not None

    def _gpumemprof(self):
        import gpumemprof

        return gpumemprof

    def _start(self):
        """The package's import does not start the agent when pytest loads this plugin (see
        gpumemprof._loading_pytest_plugin): it is started here, for the tests measured."""
        try:
            return self._gpumemprof().start()
        except Exception:
            return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        mark = item.get_closest_marker(MARK)
        if mark is None:
            return
        try:
            self._limits(mark)
        except ValueError as e:
            raise pytest.UsageError("%s: @pytest.mark.gpu_memory: %s" % (item.nodeid, e))
        try:
            st = self._gpumemprof().start()  # idempotent
        except Exception as e:  # another package named gpumemprof, a broken install
            pytest.skip("gpu_memory: the gpumemprof package cannot measure: %s" % e)
        if not st.ok:
            pytest.skip("gpu_memory: GPU memory cannot be measured: the gpumemprof agent is %s: %s"
                        % (st.state, st.message))

    @staticmethod
    def _limits(mark):
        kw = dict(mark.kwargs)
        if mark.args:
            kw.setdefault("limit", mark.args[0])
        unknown = set(kw) - {"limit", "leaks", "peak"}
        if unknown:
            raise ValueError("unknown argument(s) %s (limit, leaks, peak)" % ", ".join(sorted(unknown)))
        limit = parse_size(kw["limit"]) if kw.get("limit") is not None else None
        leaks = parse_size(kw["leaks"]) if kw.get("leaks") is not None else None
        peak = kw.get("peak", "test")
        if peak not in ("test", "device"):
            raise ValueError("peak=%r: \"test\" or \"device\"" % (peak,))
        return limit, leaks, peak

    # -- measuring ------------------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        if not self._wants(item):
            yield
            return
        try:
            gmp = self._gpumemprof()
            gmp.start()  # idempotent: armed at configure or at a marked test's setup already
            prof = gmp.profile(item.nodeid)
            prof.__enter__()
        except Exception:
            yield
            return
        try:
            yield
        finally:
            _release_caches()
            prof.__exit__(None, None, None)
            setattr(item, _KEY, (prof.result, gmp.status()))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        if call.when != "call":
            return
        got = getattr(item, _KEY, None)
        if got is None:
            return
        res, status = got
        mark = item.get_closest_marker(MARK)
        state = getattr(res, "state", None)
        if not res.ok or state not in ("on", "done"):
            why = res.reason or ("the agent never recorded during the test (it is %s: %s); CUDA "
                                 "was not initialized, or there is no GPU"
                                 % (status.state, status.message))
            if mark is not None and rep.passed:
                rep.outcome = "skipped"
                rep.longrepr = (str(item.fspath), (item.location[1] or 0) + 1,
                                "gpu_memory: not measured: " + why)
            return
        m = _Measure(res, status, item)
        self.rows[item.nodeid] = m
        problems = []
        if mark is not None:
            limit, leaks, which = self._limits(mark)
            peak = m.device_peak if which == "device" else m.peak
            if limit is not None and peak > limit:
                problems.append("GPU memory peak %s (%d bytes%s) is over the limit %s (%d bytes); "
                                "top site at the peak: %s"
                                % (fmt_bytes(peak), peak,
                                   ", the devices' live bytes" if which == "device" else
                                   " above what was live when the test began",
                                   fmt_bytes(limit), limit, m.top_text()))
            if leaks is not None and m.leaked > leaks:
                problems.append("GPU memory leaked: %s (%d bytes) more allocated than freed by "
                                "the test, over the %s (%d bytes) allowed; top site at the peak: %s"
                                % (fmt_bytes(m.leaked), m.leaked, fmt_bytes(leaks), leaks,
                                   m.top_text()))
        if self.baseline is not None:
            base = self.baseline.get(item.nodeid)
            verdict = "new"
            if base is not None:
                allowed = base + max(int(base * self.tol[0]), self.tol[1])
                if m.peak > allowed:
                    verdict = "regression"
                    problems.append("GPU memory peak %s (%d bytes) grew over its baseline %s (%d "
                                    "bytes) by more than the tolerance %s; top site at the peak: %s"
                                    % (fmt_bytes(m.peak), m.peak, fmt_bytes(base), base,
                                       self.config.option.gpumemprof_tolerance, m.top_text()))
                else:
                    verdict = "ok" if m.peak >= base else "smaller"
            self.compare[item.nodeid] = (base, m.peak, verdict)
        if problems and rep.outcome != "skipped":
            text = "\n".join(problems)
            if rep.passed:
                rep.outcome = "failed"
                rep.longrepr = text
            else:
                rep.sections.append(("gpumemprof", text))
        if self.dir and (problems or rep.failed):
            self._keep(item, m, problems)

    def _keep(self, item, m, problems):
        """DIR/<test>.json: the failing test's measurement and the stacks of its top sites."""
        try:
            os.makedirs(self.dir, exist_ok=True)
            path = os.path.join(self.dir, _safe_name(item.nodeid) + ".json")
            st = m.status
            doc = {"test": item.nodeid, "problems": problems,
                   "peak_bytes": m.peak, "device_peak_bytes": m.device_peak,
                   "allocated_bytes": m.allocated, "freed_bytes": m.freed,
                   "leaked_bytes": m.leaked, "elapsed_s": m.elapsed_s,
                   "result": m.result.as_dict(),
                   "trace": {"recording": st.message, "file_of_the_user": st.trace,
                             "range": item.nodeid,
                             "note": "the test is the range named after its id in the process's "
                                     "trace when it records one of yours (gpumemprof run, "
                                     "GPUMEMPROF_OUTPUT); `rerun`: the trace of the test run "
                                     "again alone under gpumemprof run"}}
            with open(path, "w") as fh:
                json.dump(doc, fh, indent=1)
                fh.write("\n")
            self.written.append(path)
            self.failed.append((os.path.abspath(str(item.fspath)), item.nodeid, path))
        except OSError as e:
            sys.stderr.write("gpumemprof: --gpumemprof-dir: %s\n" % e)

    # -- the end ----------------------------------------------------------------------------------
    def _markdown(self):
        lines = ["| test | baseline peak | peak | change | verdict |",
                 "|---|---:|---:|---:|---|"]
        # regressions first, then in the order the tests ran
        order = sorted(self.compare.items(), key=lambda kv: kv[1][2] != "regression")
        for nodeid, (base, peak, verdict) in order:
            if base is None:
                change = "-"
            elif base == 0:
                change = "+%s" % fmt_bytes(peak) if peak else "0"
            else:
                change = "%+.1f%%" % ((peak - base) * 100.0 / base)
            lines.append("| `%s` | %s | %s | %s | %s |" % (
                nodeid.replace("|", "\\|"), fmt_bytes(base) if base is not None else "-",
                fmt_bytes(peak), change, "**regression**" if verdict == "regression" else verdict))
        n = sum(1 for v in self.compare.values() if v[2] == "regression")
        lines.append("")
        lines.append("%d test(s) compared with the baseline, %d over it by more than the tolerance "
                     "(%s)." % (len(self.compare), n, self.config.option.gpumemprof_tolerance))
        return lines

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if self.rows and (self.all or self.baseline_path):
            tr.section("gpumemprof: GPU memory per test")
            rows = [[nodeid, fmt_bytes(m.peak), fmt_bytes(m.allocated), fmt_bytes(m.leaked),
                     m.top_text() if m.top is not None and m.peak > 0 else "-"]
                    for nodeid, m in sorted(self.rows.items(), key=lambda kv: -kv[1].peak)]
            for line in table(["test", "peak", "allocated", "leaked", "top site at the peak"],
                              rows, right={1, 2, 3}):
                tr.write_line(line)
            tr.write_line("peak: above what was live when the test began; leaked: allocated "
                          "minus freed during the test")
        if self.baseline is not None and self.compare:
            tr.section("gpumemprof: peaks against the baseline %s" % self.baseline_path)
            for line in self._markdown():
                tr.write_line(line)
        if (self.all or self.baseline_path) and not self.rows:
            gmp = sys.modules.get("gpumemprof")
            why = gmp.status().message if gmp is not None else "no test was measured"
            tr.write_line("gpumemprof: no test measured: %s" % why)
        for p in self.written:
            tr.write_line("gpumemprof: kept %s" % p)

    def _cli(self):
        """The gpumemprof command of the agent in use: <prefix>/bin/gpumemprof beside
        <prefix>/lib/gpumemprof/libgpumemprof_agent.so (the build tree and cmake --install), else
        GPUMEMPROF_CLI. Not searched on PATH: stormlog installs a command of the same name."""
        gmp = sys.modules.get("gpumemprof")
        agent = gmp.agent_path() if gmp is not None else None
        cands = [os.environ.get("GPUMEMPROF_CLI", "")]
        if agent:
            cands.append(os.path.join(os.path.dirname(os.path.abspath(agent)), "..", "..",
                                      "bin", "gpumemprof"))
        for c in cands:
            if c and os.path.isfile(c) and os.access(c, os.X_OK):
                return os.path.normpath(c)
        return None

    def _rerun_failed(self):
        """Each kept test again, alone, in a new process under `gpumemprof run`: DIR/<test>.zst
        is then a trace of that test (its fixtures and the test; not the tests before it)."""
        import subprocess

        cli = self._cli()
        cfg = self.config
        for path, nodeid, doc_path in self.failed:
            trace = os.path.splitext(doc_path)[0] + ".zst"
            why = None
            if cli is None:
                why = ("no gpumemprof command beside the agent (%s; set GPUMEMPROF_CLI)"
                       % sys.modules["gpumemprof"].agent_path())
            else:
                target = path + nodeid[nodeid.index("::"):] if "::" in nodeid else path
                cmd = [cli, "run", "-q", "-o", trace, "--force"]
                if os.environ.get("GPUMEMPROF_CUPTI"):
                    cmd += ["--cupti", os.environ["GPUMEMPROF_CUPTI"]]
                # --gpumemprof: the test is measured there too, so it is a range in the trace
                cmd += ["--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--gpumemprof", "--rootdir", str(cfg.rootpath), target]
                if not cfg.pluginmanager.has_plugin("gpumemprof"):  # not the entry point: -p
                    cmd[-1:-1] = ["-p", __name__]
                # run injects its own agent: nothing of this process's (armed) agent goes along
                env = {k: v for k, v in os.environ.items()
                       if k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH",
                                    "GPUMEMPROF_ARMED_BY")}
                env[_CHILD] = "1"
                try:
                    p = subprocess.run(cmd, env=env, cwd=str(cfg.invocation_params.dir),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       timeout=900)
                    if not os.path.exists(trace):
                        why = "gpumemprof run wrote no trace (exit %d): %s" % (
                            p.returncode, p.stderr.decode("utf-8", "replace")[-300:])
                except (OSError, subprocess.SubprocessError) as e:
                    why = str(e)
            try:
                with open(doc_path) as fh:
                    doc = json.load(fh)
                if why is None:
                    doc["trace"]["rerun"] = trace
                    self.written.append(trace)
                else:
                    doc["trace"]["rerun_failed"] = why
                with open(doc_path, "w") as fh:
                    json.dump(doc, fh, indent=1)
                    fh.write("\n")
            except (OSError, ValueError, KeyError):
                pass

    def pytest_sessionfinish(self, session):
        if self.dir and self.rerun and self.failed:
            self._rerun_failed()
        if self.baseline_path and (self.update or self.baseline is None) and self.rows:
            data = {"gpumemprof_baseline": 1,
                    "tests": {k: {"peak_bytes": m.peak, "allocated_bytes": m.allocated,
                                  "leaked_bytes": m.leaked} for k, m in sorted(self.rows.items())}}
            with open(self.baseline_path, "w") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
                fh.write("\n")
        if self.markdown and self.baseline is not None:
            with open(self.markdown, "w") as fh:
                fh.write("\n".join(self._markdown()) + "\n")
