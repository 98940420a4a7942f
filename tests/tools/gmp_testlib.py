"""What the tests' Python check scripts share (python3, stdlib only): running a program and
failing with its output, a scratch directory, the path of the gpumemprof CLI.

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    import gmp_testlib

run(cmd, expect=0, cwd=None, env=None, timeout=None, text=False, stdin=None, input=None)
    runs cmd (a list) with stdout and stderr captured and returns the subprocess.CompletedProcess.
    When expect is not None and the exit status differs, the script fails (fail()) with the
    command, both statuses and the tail of both outputs. text=True decodes the outputs as UTF-8,
    strictly (output that is not UTF-8 raises UnicodeDecodeError: the test fails). Exit statuses
    are the subprocess module's: -N means killed by signal N.
outputs(cmd, env=None, cwd=None, timeout=None, stdin=subprocess.DEVNULL, preexec_fn=None)
    runs cmd and returns (exit status, stdout, stderr), the outputs as text (undecodable bytes
    replaced): for checks that judge the status themselves (a signal, an expected failure).
fail(msg)
    prints "FAIL: msg" to stderr and exits 1 (ctest: failed).
tmpdir(base=None, prefix="gmp-test-")
    a context manager: a new empty directory (inside base when given, created if missing),
    removed when the block ends, kept when the block fails or GMP_KEEP_TMP=1 (its path is
    printed then).
no_browser()
    GMP_TEST_NO_BROWSER=1 is set (a sanitizer build's ctest sets it): a check that renders the
    CLI's output in chromium runs the CLI as usual and leaves the browser part out (a sanitizer
    sees nothing of the browser; the plain build runs it).
gpumemprof(path=None)
    the CLI to test: path when given, else $GMP_GPUMEMPROF, else build/bin/gpumemprof of this
    checkout; fails when it is not an executable file.
"""
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
_TAIL = 4000  # characters of each output a failure shows


def fail(msg):
    sys.stderr.write("FAIL: %s\n" % msg)
    sys.exit(1)


def _show(out):
    if out is None:
        return ""
    if isinstance(out, bytes):
        out = out.decode("utf-8", errors="replace")
    return out[-_TAIL:]


def run(cmd, expect=0, cwd=None, env=None, timeout=None, text=False, stdin=None, input=None):
    cmd = [str(c) for c in cmd]
    kw = {}
    if text:
        kw = {"encoding": "utf-8"}
    if input is None and stdin is not None:
        kw["stdin"] = stdin
    p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, input=input,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if expect is not None and p.returncode != expect:
        fail("%s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s" %
             (" ".join(cmd), p.returncode, expect, _show(p.stdout), _show(p.stderr)))
    return p


def outputs(cmd, env=None, cwd=None, timeout=None, stdin=subprocess.DEVNULL, preexec_fn=None):
    p = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, timeout=timeout, stdin=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec_fn)
    return (p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"))


@contextlib.contextmanager
def tmpdir(base=None, prefix="gmp-test-"):
    if base:
        os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix=prefix, dir=base)
    keep = os.environ.get("GMP_KEEP_TMP", "") not in ("", "0")
    try:
        yield d
    except SystemExit as e:
        keep = keep or e.code not in (None, 0)
        raise
    except BaseException:
        keep = True
        raise
    finally:
        if keep:
            sys.stderr.write("kept %s\n" % d)
        else:
            shutil.rmtree(d, ignore_errors=True)


def gpumemprof(path=None):
    p = path or os.environ.get("GMP_GPUMEMPROF") or os.path.join(_ROOT, "build", "bin",
                                                                  "gpumemprof")
    if not (os.path.isfile(p) and os.access(p, os.X_OK)):
        fail("no gpumemprof at %s (build it, or give its path)" % p)
    return os.path.abspath(p)


def no_browser():
    return os.environ.get("GMP_TEST_NO_BROWSER", "") not in ("", "0")
