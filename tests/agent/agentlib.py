"""Shared helpers of the agent test scripts (python3 standard library only).

Every script takes the same options (given by tests/agent/CMakeLists.txt):
  --gpumemprof BIN  --agent LIB  --simcuda DIR  --progs DIR  --preload LIB  --tmp DIR
and may add its own. Each test gets a fresh private temporary directory under --tmp.
"""
import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

FAILS = []


class Ctx:
    pass


def setup(extra=None):
    """Parses the common options; returns a Ctx with paths, a temp dir and a base environment."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpumemprof", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--simcuda", required=True)
    ap.add_argument("--progs", required=True)
    ap.add_argument("--preload", default="")
    ap.add_argument("--tmp", default=None)
    if extra:
        extra(ap)
    args, rest = ap.parse_known_args()
    c = Ctx()
    c.args = args
    c.rest = rest
    c.gmp = args.gpumemprof
    c.agent = args.agent
    c.progs = args.progs
    if args.tmp:
        os.makedirs(args.tmp, exist_ok=True)
    c.tmp = tempfile.mkdtemp(prefix="agent-", dir=args.tmp)
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("GPUMEMPROF_") or k.startswith("SIMCUDA_") or k in (
                "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "RANK", "OMPI_COMM_WORLD_RANK",
                "SLURM_PROCID", "PMI_RANK", "LD_PRELOAD"):
            del env[k]
    env["LD_LIBRARY_PATH"] = args.simcuda
    env["LC_ALL"] = "C"
    # an instrumented agent in an uninstrumented program needs the sanitizer runtime first
    c.preload = args.preload
    c.env = env
    return c


def prog(c, name):
    return os.path.join(c.progs, name)


def env_with(c, preload=False, **kv):
    e = dict(c.env)
    if preload and c.preload:
        e["LD_PRELOAD"] = c.preload
        e["ASAN_OPTIONS"] = "detect_leaks=0"
    for k, v in kv.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    return e


def run(cmd, env, cwd=None, timeout=60, stdin=subprocess.DEVNULL):
    """Runs cmd; returns (rc, stdout, stderr) as text."""
    return gmp_testlib.outputs(cmd, env, cwd, timeout, stdin)


def gmp_run(c, opts, cmd, env=None, cwd=None, timeout=60):
    """gpumemprof run OPTS -- CMD; returns (rc, stdout, stderr)."""
    return run([c.gmp, "run"] + list(opts) + ["--"] + list(cmd), env or c.env, cwd=cwd,
               timeout=timeout)


class Proc:
    """A running command: stdout is read line by line, stderr goes to a file."""

    def __init__(self, cmd, env, errpath, cwd=None):
        self.errpath = errpath
        self.err = open(errpath, "wb")
        # a session of its own: kill_all() ends the command and everything it started
        self.p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=self.err, start_new_session=True)
        self.out = b""
        self.lines = []

    def kill_all(self):
        try:
            os.killpg(self.p.pid, 9)
        except OSError:
            pass

    def line_starting(self, prefix, timeout=20.0):
        """Reads lines until one starts with prefix; returns it, or None."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.readline(max(0.0, deadline - time.monotonic()))
            if line is None:
                return None
            self.lines.append(line)
            if line.startswith(prefix):
                return line

    def readline(self, timeout=20.0):
        """The next line of stdout (without the newline), or None at EOF or timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.out:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                continue
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.out += chunk
        line, self.out = self.out.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def wait(self, timeout=30.0):
        """Waits for the end; returns (rc, rest of stdout, stderr)."""
        try:
            rest, _ = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_all()
            rest, _ = self.p.communicate()
            check(False, "%s did not end in %.0f s" % (self.p.args[0], timeout))
        self.err.close()
        with open(self.errpath, "rb") as f:
            err = f.read().decode("utf-8", "replace")
        return self.p.returncode, (self.out + (rest or b"")).decode("utf-8", "replace"), err


def direct_env(c, output, preload=False, **kv):
    """The environment `run` would give a program: the agent injected directly."""
    e = env_with(c, preload=preload, CUDA_INJECTION64_PATH=c.agent,
                 NVTX_INJECTION64_PATH=c.agent, GPUMEMPROF_OUTPUT=output)
    for k, v in kv.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    return e


class Trace:
    """A trace as `gpumemprof dump --json` shows it: records (dicts) and the final summary."""

    def __init__(self, path, recs, summary, rc, err):
        self.path = path
        self.recs = recs
        self.summary = summary
        self.rc = rc
        self.err = err
        self.header = next((r for r in recs if r["type"] == "header"), None)

    def of(self, *types):
        return [r for r in self.recs if r["type"] in types]

    def mem(self, activity=False):
        """ALLOC and FREE records from API callbacks (activity ones too when asked)."""
        out = []
        for r in self.recs:
            if r["type"] not in ("alloc", "free"):
                continue
            if not activity and "activity" in r["flags"].split("|"):
                continue
            out.append(r)
        return out

    def end(self):
        e = self.of("end")
        return e[0] if e else None

    def wall(self, t):
        """Trace time (ns) to CLOCK_REALTIME ns."""
        return self.header["start_wall_ns"] + (t - self.header["start_trace_ns"])


def dump(c, path, ok_rc=(0,), must=True):
    """`dump --json PATH` as a Trace. must=False (polling a file being written): None when the
    trace cannot be read yet, without counting a failure."""
    rc, out, err = run([c.gmp, "dump", "--json", path], c.env)
    if not must and rc not in ok_rc:
        return None
    recs = []
    summary = None
    for line in out.splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("type") == "summary":
            summary = r
        else:
            recs.append(r)
    check(rc in ok_rc, "dump %s exited %d: %s" % (path, rc, err.strip()))
    return Trace(path, recs, summary, rc, err)


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL: " + msg, flush=True)
    return bool(cond)


def eq(got, want, what):
    return check(got == want, "%s: got %r, want %r" % (what, got, want))


def wait_for(cond, timeout=20.0, what="condition"):
    """Polls cond() until it returns a true value (returned) or the timeout passes (fails)."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            check(False, "timed out waiting for " + what)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def shown(stdout):
    """The "A label 0x..." lines a program printed: {label: int}."""
    vals = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "A":
            vals[parts[1]] = int(parts[2], 16)
    return vals


def agent_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("gpumemprof:")]


def finish(name):
    if FAILS:
        print("%s: %d failure(s)" % (name, len(FAILS)))
        sys.exit(1)
    print("%s: ok" % name)
    sys.exit(0)


def cleanup(c):
    if not FAILS:
        shutil.rmtree(c.tmp, ignore_errors=True)
