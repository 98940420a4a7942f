"""gpumemprof: read a block's GPU memory from inside the program, through the gpumemprof agent.

    import gpumemprof

    with gpumemprof.profile("step") as p:
        train_step()
    print(p.result.peak_bytes, p.result.net_bytes)

    @gpumemprof.profile("forward")
    def forward(x): ...
    forward(x); forward(x)
    print(forward.stats.calls, forward.stats.max_peak_bytes)

This is the package of the gpumemprof profiler (CUPTI agent, `gpumemprof run`, traces), pure
Python over the agent library's C ABI (agent/gmp_agent_api.h). `import gpumemprof` starts the agent
in the process when `gpumemprof run` did not: at once when CUDA is already initialized (late start:
what was allocated before is a baseline it does not count), else when the program initializes
CUDA. A scope counts every allocation and free of the whole process on each device while it is
open, on all threads. See docs/python-api.md.

Another project (stormlog) also installs a package named `gpumemprof`: this one says what it is in
`gpumemprof.__product__`."""
import functools
import os
import threading
import time

from . import _agent

__product__ = "gpumemprof (CUPTI agent; github: gpumemprof run/report/view)"
__version__ = "0.1.0"
__all__ = ["profile", "open_scope", "start", "status", "current_bytes", "summary",
           "print_summary", "Result", "DeviceResult", "Site", "Stats", "Status", "Scope",
           "agent_path", "trace"]

_lock = threading.Lock()
_agent_obj = None


def _get():
    global _agent_obj
    if _agent_obj is not None:
        return _agent_obj
    with _lock:
        if _agent_obj is None:
            _agent_obj = _agent.Agent()
        return _agent_obj


def agent_path():
    """The agent library this package uses, or None when none was found."""
    return _get().path


class Status:
    """The agent's state: state ("on", "waiting", "off", "disabled", "done", or "unavailable" when
    no agent library was found), message (one line: what it records and where, or why not),
    late (CUDA was initialized before the agent: earlier memory is an uncounted baseline),
    in_process (started by this package rather than by `gpumemprof run`), trace (True when a
    trace file of the user's is written; its path is in message)."""

    def __init__(self, state, flags, message):
        self.state = state
        self.message = message
        self.flags = flags
        self.late = bool(flags & _agent.F_LATE)
        self.in_process = bool(flags & _agent.F_INPROC)
        self.injected = bool(flags & _agent.F_INJECTED)
        self.trace = bool(flags & _agent.F_TRACE)

    @property
    def ok(self):
        """The agent is recording, or will as soon as the program initializes CUDA."""
        return self.state in ("on", "waiting")

    def __repr__(self):
        return "Status(%r, %r)" % (self.state, self.message)


def status():
    a = _get()
    if a.lib is None:
        return Status("unavailable", 0, a.why)
    st, flags, msg = a.status()
    return Status(_agent.STATE_NAMES.get(st, str(st)), flags, msg)


def start():
    """Starts the agent in this process if it is not running (import does it); returns status()."""
    a = _get()
    if a.lib is not None:
        a.start()
    return status()


def current_bytes():
    """{device: live bytes} as the agent counts them now (devices seen so far)."""
    a = _get()
    return a.current() if a.lib is not None else {}


class Frame:
    """One frame of an allocation stack: kind "py" (file, line, function) or "native" (address,
    object, symbol)."""

    def __init__(self, text):
        parts = text.split("\t")
        self.kind = parts[0]
        if self.kind == "py" and len(parts) >= 4:
            self.file, self.line, self.function = parts[1], int(parts[2]), parts[3]
            self.address = self.object = self.symbol = None
        else:
            self.file = self.function = None
            self.line = 0
            self.address = int(parts[1], 16) if len(parts) > 1 and parts[1] else 0
            self.object = parts[2] if len(parts) > 2 else ""
            self.symbol = parts[3] if len(parts) > 3 else ""

    def __str__(self):
        if self.kind == "py":
            return "%s:%d (%s)" % (self.file, self.line, self.function)
        obj = os.path.basename(self.object) if self.object else "?"
        return "%s!%s" % (obj, self.symbol or hex(self.address))

    __repr__ = __str__


_LIB_DIRS = tuple(os.sep + d + os.sep for d in ("site-packages", "dist-packages"))


def _library_file(path):
    import sysconfig

    if any(d in path for d in _LIB_DIRS) or path.startswith("<"):
        return True
    std = sysconfig.get_paths().get("stdlib", "")
    return bool(std) and path.startswith(std + os.sep)


class Site:
    """A site holding memory at a block's peak: bytes and allocs live from it then, its stack id in
    the trace, frames (innermost first) and where: the innermost Python frame of the program's
    own code (not the standard library, site-packages or dist-packages) as "file:line", else the
    innermost Python frame, else the innermost native frame; "(no stack)" when stacks are off.
    frames and where are read from the agent when first asked for."""

    def __init__(self, nbytes, allocs, stack, agent):
        self.bytes = nbytes
        self.allocs = allocs
        self.stack = stack
        self._agent = agent
        self._frames = None

    @property
    def frames(self):
        if self._frames is None:
            self._frames = ([Frame(t) for t in self._agent.stack_text(self.stack)]
                            if self.stack else [])
        return self._frames

    @property
    def where(self):
        py = [f for f in self.frames if f.kind == "py"]
        own = [f for f in py if not _library_file(f.file)]
        if own:
            return "%s:%d" % (own[0].file, own[0].line)
        if py:
            return "%s:%d" % (py[0].file, py[0].line)
        if self.frames:
            return str(self.frames[0])
        return "(no stack)" if not self.stack else "(stack %d)" % self.stack

    def __repr__(self):
        return "Site(%d bytes, %d allocs, %s)" % (self.bytes, self.allocs, self.where)


class DeviceResult:
    """One device's figures for a block (bytes): start_bytes, peak_bytes (the most live on the
    device while the block ran, whole process: as torch.cuda.max_memory_allocated after a reset),
    end_bytes, peak_increase_bytes (peak - start), allocated_bytes, freed_bytes, net_bytes
    (allocated - freed = end - start), allocs, frees, baseline_frees (frees of memory allocated
    before the agent counted: not in freed_bytes), top_sites (Site, most bytes first, at the
    peak)."""

    def __init__(self, d, agent):
        self.device = d.device
        self.start_bytes = d.start_bytes
        self.peak_bytes = d.peak_bytes
        self.end_bytes = d.end_bytes
        self.allocated_bytes = d.allocated_bytes
        self.freed_bytes = d.freed_bytes
        self.net_bytes = d.net_bytes
        self.peak_increase_bytes = d.peak_bytes - d.start_bytes
        self.allocs = d.allocs
        self.frees = d.frees
        self.baseline_frees = d.baseline_frees
        self.top_sites = [Site(s.bytes, s.allocs, s.stack, agent) for s in d.sites[:d.nsites]]

    def as_dict(self):
        d = {k: getattr(self, k) for k in (
            "device", "start_bytes", "peak_bytes", "end_bytes", "peak_increase_bytes",
            "allocated_bytes", "freed_bytes", "net_bytes", "allocs", "frees", "baseline_frees")}
        d["top_sites"] = [{"bytes": s.bytes, "allocs": s.allocs, "where": s.where, "stack": s.stack,
                           "frames": [str(f) for f in s.frames]} for s in self.top_sites]
        return d

    def __repr__(self):
        return ("DeviceResult(device=%d, peak=%d, allocated=%d, freed=%d, net=%d)"
                % (self.device, self.peak_bytes, self.allocated_bytes, self.freed_bytes,
                   self.net_bytes))


class Result:
    """A block's result: name, elapsed_s, devices ({ordinal: DeviceResult}), ok (the agent counted
    the block), reason (why not, when not ok), late and baseline (a sentence: what the figures
    leave out). peak_bytes, peak_increase_bytes, allocated_bytes, freed_bytes and net_bytes
    are sums over the devices (one device: its figures)."""

    def __init__(self, name, elapsed_s, devices, ok, reason, late=False, lost=0):
        self.name = name
        self.elapsed_s = elapsed_s
        self.devices = devices
        self.ok = ok
        self.reason = reason
        self.late = late
        self.lost_events = lost
        self.baseline = ("the agent started after CUDA was initialized: memory allocated before "
                         "it started is a baseline it does not count (not in start_bytes, and "
                         "its frees are not in freed_bytes: baseline_frees counts them)"
                         if late else "")
        devs = devices.values()
        self.peak_bytes = sum(d.peak_bytes for d in devs)
        self.peak_increase_bytes = sum(d.peak_increase_bytes for d in devs)
        self.allocated_bytes = sum(d.allocated_bytes for d in devs)
        self.freed_bytes = sum(d.freed_bytes for d in devs)
        self.net_bytes = sum(d.net_bytes for d in devs)

    @property
    def top_sites(self):
        """Every device's top sites, most bytes first."""
        return sorted((s for d in self.devices.values() for s in d.top_sites),
                      key=lambda s: -s.bytes)

    def as_dict(self):
        return {"name": self.name, "elapsed_s": self.elapsed_s, "ok": self.ok,
                "reason": self.reason, "late": self.late, "baseline": self.baseline,
                "devices": {str(k): v.as_dict() for k, v in sorted(self.devices.items())}}

    def __repr__(self):
        if not self.ok:
            return "Result(%r, not counted: %s)" % (self.name, self.reason)
        return "Result(%r, %.6fs, %r)" % (self.name, self.elapsed_s,
                                          list(self.devices.values()))


class Stats:
    """A decorated function's calls: calls, total/mean/max of peak_bytes and of
    peak_increase_bytes, total elapsed_s, last (the last call's Result)."""

    def __init__(self, name):
        self.name = name
        self.calls = 0
        self.total_peak_bytes = self.max_peak_bytes = 0
        self.total_peak_increase_bytes = self.max_peak_increase_bytes = 0
        self.total_net_bytes = 0
        self.total_elapsed_s = 0.0
        self.last = None
        self._lock = threading.Lock()

    def add(self, r):
        with self._lock:
            self.calls += 1
            self.total_peak_bytes += r.peak_bytes
            self.max_peak_bytes = max(self.max_peak_bytes, r.peak_bytes)
            self.total_peak_increase_bytes += r.peak_increase_bytes
            self.max_peak_increase_bytes = max(self.max_peak_increase_bytes,
                                               r.peak_increase_bytes)
            self.total_net_bytes += r.net_bytes
            self.total_elapsed_s += r.elapsed_s
            self.last = r

    @property
    def mean_peak_bytes(self):
        return self.total_peak_bytes / self.calls if self.calls else 0.0

    @property
    def mean_peak_increase_bytes(self):
        return self.total_peak_increase_bytes / self.calls if self.calls else 0.0

    def as_dict(self):
        return {"name": self.name, "calls": self.calls, "mean_peak_bytes": self.mean_peak_bytes,
                "max_peak_bytes": self.max_peak_bytes,
                "mean_peak_increase_bytes": self.mean_peak_increase_bytes,
                "max_peak_increase_bytes": self.max_peak_increase_bytes,
                "total_net_bytes": self.total_net_bytes, "total_elapsed_s": self.total_elapsed_s}

    def __repr__(self):
        return ("Stats(%r, calls=%d, mean_peak=%.0f, max_peak=%d)"
                % (self.name, self.calls, self.mean_peak_bytes, self.max_peak_bytes))


_registry = {}  # name -> Stats of decorated functions
_reg_lock = threading.Lock()


class profile:
    """profile(name=None): a context manager and a decorator.

    As a context manager, `with profile("step") as p:` opens a scope (an NVTX range named `step`
    in the trace) and, after the block, p.result is a Result. As a decorator, every call of the
    function is a scope (named after the function unless name is given) and the calls accumulate
    in the function's `stats` (Stats; also in gpumemprof.summary()); `.last` is the last call's
    Result. Never raises because of the profiler: without an agent, result.ok is False and
    result.reason says why."""

    def __new__(cls, name=None):
        if callable(name):  # @profile without parentheses: the wrapper, not an instance
            return cls._decorate(name, None)
        return super().__new__(cls)

    def __init__(self, name=None):
        self.name = name
        self.result = None
        self._tls = threading.local()

    @classmethod
    def _decorate(cls, fn, name):
        label = name or getattr(fn, "__qualname__", getattr(fn, "__name__", "function"))
        with _reg_lock:
            stats = _registry.get(label)
            if stats is None:
                stats = _registry[label] = Stats(label)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            p = cls(label)
            with p:
                ret = fn(*args, **kwargs)
            stats.add(p.result)
            return ret

        wrapper.stats = stats
        return wrapper

    def __call__(self, fn):
        return self._decorate(fn, self.name)

    def __enter__(self):
        stack = getattr(self._tls, "s", None)
        if stack is None:
            stack = self._tls.s = []
        stack.append(open_scope(self.name))
        return self

    def __exit__(self, *exc):
        self.result = self._tls.s.pop().close()
        return False


class Scope:
    """An open scope (open_scope): close() ends it and returns its Result. For code that cannot
    use a with block (hooks that open in one callback and close in another, as trace(model)'s);
    profile() is made of these."""

    __slots__ = ("name", "handle", "t0", "result")

    def __init__(self, name, handle, t0):
        self.name, self.handle, self.t0, self.result = name, handle, t0, None

    def close(self):
        """Closes the scope (once; later calls return the same Result)."""
        if self.result is not None:
            return self.result
        elapsed = time.perf_counter() - self.t0
        a = _get()
        if a.lib is None:
            self.result = Result(self.name, elapsed, {}, False, a.why)
        elif not self.handle:
            self.result = Result(self.name, elapsed, {}, False,
                                 "too many scopes open at once (the agent's bound is 256)")
        else:
            info, devs = a.close(self.handle)
            if info is None:
                self.result = Result(self.name, elapsed, {}, False, "the scope was not open")
            else:
                ok = info.state in (_agent.STATE_ON, _agent.STATE_WAITING, _agent.STATE_DONE)
                reason = "" if ok else a.status()[2]
                self.result = Result(self.name, info.elapsed_ns / 1e9,
                                     {d.device: DeviceResult(d, a) for d in devs}, ok, reason,
                                     late=bool(info.flags & _agent.F_LATE), lost=info.lost_events)
                self.result.state = _agent.STATE_NAMES.get(info.state, str(info.state))
        return self.result


def open_scope(name=None):
    """Opens a scope now (what `with profile(name)` does on entry) and returns its Scope; its
    close() returns the Result. It may be closed on another thread (the range in the trace is
    then left to the opening thread's next ranges: close on the opening thread to keep it)."""
    a = _get()
    handle = a.open(name) if a.lib is not None else 0
    return Scope(name, handle, time.perf_counter())


def summary():
    """The Stats of every decorated function, by name."""
    with _reg_lock:
        return dict(_registry)


def print_summary(file=None):
    """A table of the decorated functions' calls: calls, mean and max peak, mean peak increase."""
    import sys

    out = file or sys.stdout
    rows = sorted(summary().values(), key=lambda s: -s.max_peak_bytes)
    out.write("%-40s %8s %16s %16s %16s\n" % ("function", "calls", "mean peak", "max peak",
                                              "mean increase"))
    for s in rows:
        out.write("%-40s %8d %16.0f %16d %16.0f\n" % (s.name[:40], s.calls, s.mean_peak_bytes,
                                                      s.max_peak_bytes,
                                                      s.mean_peak_increase_bytes))


def _loading_pytest_plugin():
    """pytest is importing this package to load its plugin (the pytest11 entry point, -p, a
    conftest's pytest_plugins: pluggy's load_setuptools_entrypoints, _pytest's import_plugin):
    the plugin starts the agent itself for the tests it measures, so that a pytest run that
    measures nothing never arms it (pytest_plugin.py)."""
    import sys

    f = sys._getframe(1)
    while f is not None:
        c = f.f_code
        if c.co_name in ("load_setuptools_entrypoints", "import_plugin") and \
                ("pluggy" in c.co_filename or "_pytest" in c.co_filename):
            return True
        f = f.f_back
    return False


def _running_tool():
    """The package is imported because one of its own commands runs (`python3 -m
    gpumemprof.fleet`): such a command profiles nothing, so it must not arm the agent for itself
    and the processes it starts. While -m imports the module's parent packages sys.argv[0] is
    "-m" (runpy); sys.orig_argv (Python 3.10+) names the module, whatever options come before it
    (`-X dev -m M`, `-mM`). Before 3.10 the command is not told apart (it sets
    GPUMEMPROF_NO_AUTOSTART for the processes it starts itself)."""
    import sys

    if sys.argv[:1] != ["-m"]:
        return False
    argv = getattr(sys, "orig_argv", None) or []
    for i, a in enumerate(argv[1:], 1):
        if a == "-m":
            return i + 1 < len(argv) and argv[i + 1].startswith("gpumemprof.")
        if a.startswith("-m"):
            return a[2:].startswith("gpumemprof.")
    return False


def _autostart():
    if os.environ.get("GPUMEMPROF_NO_AUTOSTART") == "1" or _loading_pytest_plugin() or \
            _running_tool():
        return
    try:
        start()
    except Exception:  # never break the program's import
        pass


from ._trace import trace  # noqa: E402  (trace(model): per-layer figures; _trace.py)

_autostart()
