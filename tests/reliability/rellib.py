"""Shared helpers of the reliability tests (python3 standard library only).

Every script takes the options tests/reliability/CMakeLists.txt gives:
  --gpumemprof BIN  --agent LIB  --simcuda DIR  --progs DIR  --preload LIB  --tmp DIR
then a scenario name and its own options. Each run gets a fresh private directory under --tmp
(removed when everything passed)."""
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
    ap = argparse.ArgumentParser()
    for o in ("--gpumemprof", "--agent", "--simcuda", "--progs"):
        ap.add_argument(o, required=True)
    ap.add_argument("--preload", default="")
    ap.add_argument("--tmp", default=None)
    ap.add_argument("scenario", nargs="?", default=None)
    if extra:
        extra(ap)
    a = ap.parse_args()
    c = Ctx()
    c.args = a
    c.gmp, c.agent, c.progs, c.preload = a.gpumemprof, a.agent, a.progs, a.preload
    if a.tmp:
        os.makedirs(a.tmp, exist_ok=True)
    c.tmp = tempfile.mkdtemp(prefix="rel-", dir=a.tmp)
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("GPUMEMPROF_", "SIMCUDA_")) or k in (
                "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "RANK", "OMPI_COMM_WORLD_RANK",
                "SLURM_PROCID", "PMI_RANK", "LD_PRELOAD"):
            del env[k]
    env["LD_LIBRARY_PATH"] = a.simcuda
    env["LC_ALL"] = "C"
    c.env = env
    return c


def prog(c, *args):
    return [os.path.join(c.progs, "rel_prog")] + [str(x) for x in args]


def env_with(c, preload=False, **kv):
    """c.env plus kv (None removes); preload: the sanitizer runtime for uninstrumented programs."""
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


def direct_env(c, output, preload=False, **kv):
    """What `run` gives a program: the agent injected through the environment."""
    return env_with(c, preload=preload, CUDA_INJECTION64_PATH=c.agent,
                    NVTX_INJECTION64_PATH=c.agent, GPUMEMPROF_OUTPUT=output, **kv)


def run(cmd, env, cwd=None, timeout=120, preexec_fn=None):
    """Runs cmd; returns (rc, stdout, stderr) as text (rc negative: killed by that signal)."""
    return gmp_testlib.outputs(cmd, env, cwd, timeout, preexec_fn=preexec_fn)


class Proc:
    """A running command whose stdout is read line by line; stderr goes to a file."""

    def __init__(self, cmd, env, errpath, cwd=None):
        self.errpath = errpath
        self.err = open(errpath, "wb")
        self.p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=self.err, start_new_session=True)
        self.out = b""

    def line_starting(self, prefix, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
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
            line = line.decode("utf-8", "replace")
            if line.startswith(prefix):
                return line

    def kill_all(self):
        try:
            os.killpg(self.p.pid, 9)
        except OSError:
            pass

    def wait(self, timeout=60.0):
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


class Trace:
    def __init__(self, recs, summary, rc, err):
        self.recs, self.summary, self.rc, self.err = recs, summary, rc, err
        self.header = next((r for r in recs if r["type"] == "header"), None)

    def of(self, *types):
        return [r for r in self.recs if r["type"] in types]

    def mem(self):
        """ALLOC and FREE from API callbacks (not activity records)."""
        return [r for r in self.of("alloc", "free") if "activity" not in r["flags"].split("|")]

    def lost(self, reason=None):
        return sum(r["count"] for r in self.of("lost") if reason is None or r["reason"] == reason)

    def wall(self, t):
        return self.header["start_wall_ns"] + (t - self.header["start_trace_ns"])


def dump(c, path, timeout=300):
    rc, out, err = run([c.gmp, "dump", "--json", path], c.env, timeout=timeout)
    recs, summary = [], None
    for line in out.splitlines():
        if line.strip():
            r = json.loads(line)
            if r.get("type") == "summary":
                summary = r
            else:
                recs.append(r)
    check(rc == 0, "dump %s exited %d: %s" % (path, rc, err.strip()[:300]))
    return Trace(recs, summary, rc, err)


def agent_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("gpumemprof:")]


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL: " + msg, flush=True)
    return bool(cond)


def eq(got, want, what):
    return check(got == want, "%s: got %r, want %r" % (what, got, want))


def finish(c, name):
    if FAILS:
        print("%s: %d failure(s); files kept in %s" % (name, len(FAILS), c.tmp))
        sys.exit(1)
    shutil.rmtree(c.tmp, ignore_errors=True)
    print("%s: ok" % name)
    sys.exit(0)
