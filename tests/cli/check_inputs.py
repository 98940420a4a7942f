#!/usr/bin/env python3
"""Every command that reads a recording takes a trace, a PyTorch snapshot or an nsys export
(cli/cli_input.c), recognised by content (stdlib only).

  check_inputs.py torch GPUMEMPROF DATA_DIR WORK_DIR
      each real snapshot of DATA_DIR/torch-snapshots read directly by report (text, JSON,
      Markdown), convert (speedscope, Chrome, PyTorch snapshot, report, JSON), dump and info
      gives what import-then-command gives, except that the path shown is the file given; diff
      of the snapshot against its imported trace finds no difference; a snapshot named .zst and a
      trace named .pickle are read by content.
  check_inputs.py nsys GPUMEMPROF DATA_DIR WORK_DIR
      the same for DATA_DIR/nsys/gemm-a100-memory-usage.sqlite, and a diff of the export
      against a snapshot (kinds mixed).
  check_inputs.py bad GPUMEMPROF DATA_DIR WORK_DIR
      garbage, an empty file, a truncated pickle, a truncated SQLite file, a zstd file that is
      no trace, a directory and a missing file: one line on stderr naming the file, exit 1, no
      crash, from report, convert, diff (either side), dump and info; nothing written.
  check_inputs.py tmp GPUMEMPROF DATA_DIR WORK_DIR
      no temporary file is left in $TMPDIR after a success, a failure, or SIGKILL while the
      imported trace is open (checked through /proc/PID/fd at that moment).
  check_inputs.py stream GPUMEMPROF DATA_DIR WORK_DIR
      report of a snapshot of 8 MiB or more (made from the real one by tests/bench/
      gen_big_snapshot.py) reads it from memory as it is written: the same reports as from
      its imported trace, alone and among other inputs, and no temporary trace meanwhile.
"""
import json
import os
import pickle
import resource
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

GMP = DATA = WORK = None


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(args, expect=0, env=None):
    return gmp_testlib.run([GMP] + args, expect=expect, cwd=WORK, env=env)


def same_as_imported(direct, imported, src, trace, what):
    """direct (bytes) equals imported once the imported trace's name is the file given."""
    fixed = imported.replace(trace.encode(), src.encode())
    md = lambda x: x.replace("_", "\\_").encode()  # Markdown escapes underscores
    fixed = fixed.replace(md(trace), md(src))
    fixed = fixed.replace(os.path.basename(trace).encode(), os.path.basename(src).encode())
    if direct != fixed:
        a, b = direct.decode(errors="replace").splitlines(), fixed.decode(errors="replace").splitlines()
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                fail("%s: line %d differs:\n  direct:   %.300s\n  imported: %.300s" % (what, i + 1, x, y))
        fail("%s: outputs differ in length (%d and %d lines)" % (what, len(a), len(b)))


def compare_commands(src, name):
    """Every reading command on src directly against the same on its imported copy."""
    trace = os.path.join(WORK, "imported-copy-of-%s.zst" % name)
    run(["import", "-q", "-f", src, "-o", trace])
    for fmt in ["text", "json", "markdown"]:
        d = run(["report", src, "-f", fmt, "--color", "never"]).stdout
        i = run(["report", trace, "-f", fmt, "--color", "never"]).stdout
        check(src.encode() in d, "report -f %s does not name the file given" % fmt)
        check(b"/proc/self/fd" not in d, "report -f %s names the temporary trace" % fmt)
        same_as_imported(d, i, src, trace, "%s: report -f %s" % (name, fmt))
    # two recordings in one report: a section each, named by the files given
    d = run(["report", src, src, "-f", "json"]).stdout
    check(d.count(src.encode()) >= 2, "report of two recordings")
    outs = {}
    for tag, path in [("direct", src), ("imported", trace)]:
        o = {k: os.path.join(WORK, "%s-%s.%s" % (name, tag, ext)) for k, ext in
             [("speedscope", "speedscope.json"), ("chrome", "chrome.json"),
              ("pytorch-snapshot", "pickle"), ("report", "md"), ("json", "json")]}
        args = ["convert", path, "--no-progress"]
        for k, v in o.items():
            args += ["--" + k, v]
        run(args)
        outs[tag] = o
    for k in outs["direct"]:
        with open(outs["direct"][k], "rb") as f:
            d = f.read()
        with open(outs["imported"][k], "rb") as f:
            i = f.read()
        same_as_imported(d, i, src, trace, "%s: convert --%s" % (name, k))
    for extra in [[], ["--json"], ["--raw"]]:
        d = run(["dump", src] + extra).stdout
        i = run(["dump", trace] + extra).stdout
        same_as_imported(d, i, src, trace, "%s: dump %s" % (name, " ".join(extra)))
    # diff of the recording against its imported trace: no difference anywhere
    j = json.loads(run(["diff", src, trace, "-f", "json"]).stdout)
    check(j["a"]["path"] == src and j["b"]["path"] == trace, "diff paths %s" % j["a"])
    nz = []

    def walk(v, where, in_delta):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, where + "/" + k, in_delta or k.startswith("delta"))
        elif isinstance(v, list):
            for n, x in enumerate(v):
                walk(x, "%s[%d]" % (where, n), in_delta)
        elif in_delta and v not in (0, None):
            nz.append((where, v))
    walk(j, "", False)
    check(not nz, "%s: diff against its imported trace: %s" % (name, nz[:5]))
    for dev in j["devices"]:
        check(dev["a"] == dev["b"], "%s: diff device %s: %s / %s" % (name, dev["id"], dev["a"], dev["b"]))
    # info: what it is, and the same facts as the imported trace's
    ij = json.loads(run(["info", "--json", src, trace]).stdout)
    r0, r1 = ij["recordings"]
    check(r0["path"] == src and r1["kind"] == "trace", "info kinds %s %s" % (r0["kind"], r1["kind"]))
    check(r0["imported"] and r1["imported"] is None, "info: imported summary")
    for k in ["events", "allocs", "frees", "ooms", "span_ns", "devices", "complete", "completeness",
              "process", "first_event_wall_ns"]:
        check(r0[k] == r1[k], "%s: info %s: %r / %r" % (name, k, r0[k], r1[k]))
    check(r0["trace_bytes"] == os.path.getsize(trace), "info trace_bytes")
    check(r0["file_bytes"] == os.path.getsize(src), "info file_bytes")
    txt = run(["info", src]).stdout.decode()
    check(txt.startswith(src + "\n") and "completeness  complete" in txt, "info text:\n" + txt)
    return trace, r0


def mislabelled(src, trace, name, label):
    """A recording named like another kind is read by its content."""
    fake = os.path.join(WORK, "%s-really-%s" % (name, label))
    shutil.copyfile(src, fake)
    d = run(["report", fake, "-f", "json"]).stdout
    i = run(["report", src, "-f", "json"]).stdout
    same_as_imported(d.replace(fake.encode(), b"X"), i.replace(src.encode(), b"X"), "X", "X",
                     "%s named %s" % (name, label))
    run(["dump", fake], expect=0)
    run(["info", fake], expect=0)
    # and the trace under a snapshot's name
    t2 = os.path.join(WORK, "%s-trace-named.pickle" % name)
    shutil.copyfile(trace, t2)
    k = json.loads(run(["info", "--json", t2]).stdout)["recordings"][0]["kind"]
    check(k == "trace", "a trace named .pickle is %s" % k)
    run(["report", t2, "-f", "json"])


def case_torch():
    snaps = sorted(f for f in os.listdir(os.path.join(DATA, "torch-snapshots")) if f.endswith(".pickle"))
    check(snaps, "no snapshots in %s" % DATA)
    for s in snaps:
        src = os.path.join(DATA, "torch-snapshots", s)
        name = s[:-len(".pickle")]
        trace, info = compare_commands(src, name)
        check(info["kind"] == "pytorch" and info["pickle_protocol"] in (2, 3, 4, 5), "info %s" % info)
        mislabelled(src, trace, name, "snapshot.zst")
        print("ok %s: %d events, %d devices" % (s, info["events"], len(info["devices"])))


def case_nsys():
    src = os.path.join(DATA, "nsys", "gemm-a100-memory-usage.sqlite")
    trace, info = compare_commands(src, "gemm")
    check(info["kind"] == "nsys" and info["process"] and info["process"]["pid"] > 0, "info %s" % info)
    check(info["devices"] and info["devices"][0]["name"], "info devices %s" % info["devices"])
    mislabelled(src, trace, "gemm", "export.pickle")
    # kinds mixed: an export against a snapshot, both ways
    snap = os.path.join(DATA, "torch-snapshots", "small-step.pickle")
    j = json.loads(run(["diff", src, snap, "-f", "json"]).stdout)
    check(j["a"]["path"] == src and j["b"]["path"] == snap, "mixed diff %s" % j["a"])
    run(["diff", snap, src])
    run(["report", src, snap, trace, "-f", "json"])
    print("ok nsys: %d events" % info["events"])


def gen_big(n, name):
    """WORK/name: the real train-step snapshot's trace repeated n times (tests/bench/
    gen_big_snapshot.py)."""
    src = os.path.join(DATA, "torch-snapshots", "transformer-train-step-adamw.pickle")
    out = os.path.join(WORK, name)
    gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench",
                       "gen_big_snapshot.py")
    subprocess.run([sys.executable, gen, src, out, "-n", str(n)], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def one_line_error(args, name, what):
    p = run(args, expect=None)
    err = p.stderr.decode(errors="replace")
    check(p.returncode == 1, "%s: exit %d (expected 1), stderr %r" % (" ".join(args), p.returncode, err))
    lines = err.strip().splitlines()
    check(len(lines) == 1, "%s: %d lines on stderr: %r" % (" ".join(args), len(lines), err))
    check(name in lines[0], "%s: the message does not name %s: %r" % (" ".join(args), name, err))
    if what:
        check(what in lines[0], "%s: %r does not say %r" % (" ".join(args), lines[0], what))
    return lines[0]


def case_bad():
    snap = os.path.join(DATA, "torch-snapshots", "small-step.pickle")
    db = os.path.join(DATA, "nsys", "gemm-a100-memory-usage.sqlite")
    with open(snap, "rb") as f:
        pk = f.read()
    with open(db, "rb") as f:
        sq = f.read()
    expected = ("not a gpumemprof trace, a PyTorch memory snapshot (pickle) or an Nsight Systems "
                "SQLite export")
    files = {
        "garbage.zst": (b"\x89PNG\r\n\x1a\n" + os.urandom(200), expected + ' (it begins with "\\x89PNG\\r\\n\\x1a\\n'),
        "empty.pickle": (b"", expected + " (it is empty)"),
        "text.sqlite": (b"hello, world\n", expected + ' (it begins with "hello, world"...)'),
        "cut.pickle": (pk[:len(pk) // 2], "not a readable PyTorch memory snapshot"),
        "cut-head.pickle": (pk[:3], "not a readable PyTorch memory snapshot"),
        "cut.sqlite": (sq[:len(sq) // 3], None),
        "cut-head.sqlite": (sq[:100], None),
        "other.zst": (bytes.fromhex("28b52ffd2000110000") + b"plain zstd", None),
    }
    for fname, (data, what) in files.items():
        path = os.path.join(WORK, fname)
        with open(path, "wb") as f:
            f.write(data)
    d = os.path.join(WORK, "a-directory")
    os.makedirs(d, exist_ok=True)
    missing = os.path.join(WORK, "no-such-file.pickle")
    cases = [(os.path.join(WORK, f), f, w) for f, (_, w) in files.items()]
    cases += [(d, "a-directory", "directory"), (missing, "no-such-file.pickle", "No such file")]
    out = os.path.join(WORK, "out.json")
    for path, name, what in cases:
        msgs = []
        msgs.append(one_line_error(["report", path], name, what))
        msgs.append(one_line_error(["report", snap, path], name, what))
        msgs.append(one_line_error(["convert", path, "--chrome", out], name, what))
        check(not os.path.exists(out), "convert left %s behind" % out)
        msgs.append(one_line_error(["diff", path, snap], name, what))
        msgs.append(one_line_error(["diff", snap, path], name, what))
        msgs.append(one_line_error(["dump", path], name, what))
        msgs.append(one_line_error(["info", path], name, what))
        msgs.append(one_line_error(["import", path, "-o", out], name, None))
        check(not os.path.exists(out), "import left %s behind" % out)
        print("ok %s: %s" % (name, msgs[0]))
    # a snapshot larger than the memory the process may use (RLIMIT_DATA here) is read all the
    # same: the import streams it (formats/import/gmp_pickle_stream.h); a limit too small even for
    # that gives one line (not under a sanitizer, which needs its own memory)
    with open(GMP, "rb") as f:
        exe = f.read()
    sanitized = b"__asan_init" in exe or b"__tsan_init" in exe
    if not sanitized:
        big = gen_big(40, "big.pickle")
        for lim, ok in ((os.path.getsize(big) * 2 // 3, True), (4 << 20, False)):
            p = subprocess.run([GMP, "report", big], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE,
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_DATA,
                                                                     (lim, lim)))
            err = p.stderr.decode(errors="replace")
            if ok:
                check(p.returncode == 0 and b"peak allocated" in p.stdout,
                      "RLIMIT_DATA %d (2/3 of the file): %r" % (lim, err))
            else:
                check(p.returncode == 1 and len(err.strip().splitlines()) == 1 and
                      "out of memory" in err, "RLIMIT_DATA %d: %r" % (lim, err))
            print("ok RLIMIT_DATA %d for a file of %d bytes: %s" % (
                lim, os.path.getsize(big), err.strip() or "read"))
        os.unlink(big)
    # info on several files describes those it can read and fails for the others
    p = run(["info", "--json", snap, os.path.join(WORK, "empty.pickle")], expect=1)
    j = json.loads(p.stdout)
    check(j["recordings"][0]["kind"] == "pytorch" and "error" in j["recordings"][1], "info mixed %s" % j)


def tmp_entries(tmp):
    return sorted(os.listdir(tmp))


def case_tmp():
    tmp = os.path.join(WORK, "tmp")
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, TMPDIR=tmp)
    snaps = [os.path.join(DATA, "torch-snapshots", f) for f in
             sorted(os.listdir(os.path.join(DATA, "torch-snapshots")))]
    big = max(snaps, key=os.path.getsize)
    db = os.path.join(DATA, "nsys", "gemm-a100-memory-usage.sqlite")
    run(["report", big, db], env=env)
    check(not tmp_entries(tmp), "after a success: %s" % tmp_entries(tmp))
    cut = os.path.join(WORK, "cut.pickle")
    with open(big, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:len(data) - 1000])
    run(["report", db, cut], expect=1, env=env)
    check(not tmp_entries(tmp), "after a failure: %s" % tmp_entries(tmp))
    # SIGKILL while the imported trace exists: wait for the process to hold it (an fd that is a
    # memfd or a deleted file), kill it there. Several inputs make the window long enough.
    # (report reads a snapshot's trace from memory as it is written, GMP_CLI_INPUT_STREAM:
    # nothing that could be left behind; the nsys export, and every input of convert, still go
    # through a temporary trace.)
    seen = None
    for attempt in range(20):
        p = subprocess.Popen([GMP, "report", "-f", "html", "-o", os.path.join(WORK, "k.html")] +
                             [db, big] * 4, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=env)
        deadline = time.time() + 30
        while p.poll() is None and time.time() < deadline and not seen:
            try:
                for fd in os.listdir("/proc/%d/fd" % p.pid):
                    t = os.readlink("/proc/%d/fd/%s" % (p.pid, fd))
                    if t.startswith("/memfd:") or "(deleted)" in t:
                        seen = t
                        break
            except OSError:
                pass
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.wait()
        if seen:
            check(p.returncode == -signal.SIGKILL, "killed: exit %s" % p.returncode)
            break
    check(seen, "never saw the temporary trace open")
    check(not tmp_entries(tmp), "after SIGKILL: %s" % tmp_entries(tmp))
    print("ok: the temporary trace was %s; %s is empty after success, failure and SIGKILL" % (seen, tmp))


def case_stream():
    """report of one large snapshot (8 MiB or more) reads it as its trace is written, through a
    queue in memory (GMP_CLI_INPUT_STREAM): the same reports as from the imported trace, and the
    process holds no temporary trace (nor a pipe) while it does; with several inputs, temporary
    traces."""
    src = os.path.join(DATA, "torch-snapshots", "transformer-train-step-adamw.pickle")
    big = gen_big(7, "big7.pickle")
    check(os.path.getsize(big) >= 8 << 20, "the generated snapshot is under 8 MiB")
    trace = os.path.join(WORK, "big7.zst")
    run(["import", "-q", "-f", big, "-o", trace])
    for fmt in ["text", "json", "markdown"]:
        d = run(["report", big, "-f", fmt, "--color", "never"]).stdout
        i = run(["report", trace, "-f", fmt, "--color", "never"]).stdout
        same_as_imported(d, i, big, trace, "big7: report -f %s" % fmt)
    # several inputs are not streamed (each would hold its importer's ops until its turn)
    d = run(["report", big, src, big, "-f", "json"]).stdout
    i = run(["report", trace, src, trace, "-f", "json"]).stdout
    same_as_imported(d, i, big, trace, "big7: report of three recordings")
    h = os.path.join(WORK, "big7.html")
    run(["report", big, "-f", "html", "-o", h])
    check(os.path.getsize(h) > 0, "report -f html")

    def held(inputs):
        """what report of inputs holds while it runs: a pipe (stdout and stderr are not pipes
        here), a temporary trace (a memfd or a deleted file); and how many times its descriptors
        were looked at while it ran"""
        kinds, looks = set(), 0
        p = subprocess.Popen([GMP, "report", "-f", "json", "-o", os.path.join(WORK, "k.json")] +
                             inputs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while p.poll() is None:
            try:
                for fd in os.listdir("/proc/%d/fd" % p.pid):
                    t = os.readlink("/proc/%d/fd/%s" % (p.pid, fd))
                    if t.startswith("pipe:"):
                        kinds.add("pipe")
                    elif t.startswith("/memfd:") or "(deleted)" in t:
                        kinds.add("temporary")
                looks += 1
            except OSError:
                pass
        check(p.returncode == 0, "report of %d inputs: exit %s" % (len(inputs), p.returncode))
        return kinds, looks
    # a temporary trace is held from the import to the end: looked at often enough while the
    # process runs, it shows; streamed, nothing does (the queue is memory)
    seen, looks = set(), 0
    for attempt in range(20):
        k, n = held([big])
        seen |= k
        looks += n
        if looks >= 50:
            break
    check(looks >= 50, "report of one large snapshot: looked at its descriptors %d times" % looks)
    check(not seen, "report of one large snapshot held %s (expected nothing)" % sorted(seen))
    seen = set()
    for attempt in range(20):
        seen |= held([big, big])[0]
        if "temporary" in seen:
            break
    check(seen == {"temporary"}, "report of two held %s (expected temporary traces)" % sorted(seen))
    print("ok big7.pickle (%d bytes) read as it is written, through memory" % os.path.getsize(big))
    # The importer reads a snapshot in one pass that keeps, of what the pickle memoizes, only
    # strings and frames lists (gmp_pkstream_one_pass); a snapshot that
    # fetches anything else again is read again in two passes. Here every segment_pool_id is one
    # shared tuple per value (the pickle then fetches it from the memo): the same report as with
    # a tuple each.
    with open(big, "rb") as f:
        snap = pickle.load(f)
    apart, shared = os.path.join(WORK, "apart.pickle"), os.path.join(WORK, "shared.pickle")
    with open(apart, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    one = {}
    n = 0
    for seg in snap["segments"]:
        if isinstance(seg.get("segment_pool_id"), tuple):
            seg["segment_pool_id"] = one.setdefault(seg["segment_pool_id"], seg["segment_pool_id"])
            n += 1
    check(n > 1000 and len(one) < n, "segment_pool_id tuples: %d, %d values" % (n, len(one)))
    with open(shared, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    check(os.path.getsize(shared) >= 8 << 20, "the shared-tuple snapshot is under 8 MiB")
    a = run(["report", apart, "-f", "json"]).stdout.replace(apart.encode(), b"X")
    b = run(["report", shared, "-f", "json"]).stdout.replace(shared.encode(), b"X")
    check(a == b, "a snapshot fetching its shared tuples reports otherwise")
    # and both, as the sparse pass and its retry read them, against the independent replay of
    # tests/torch/torch_replay.py (CPython's unpickler, its own arithmetic)
    replay = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch",
                          "torch_replay.py")
    for snap in (big, shared):
        p = subprocess.run([sys.executable, replay, "--check", GMP, snap, WORK],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        check(p.returncode == 0, "torch_replay --check %s:\n%s" % (snap, p.stdout.decode()))
    print("ok %d segments sharing %d segment_pool_id tuples: the same report" % (n, len(one)))


def main():
    global GMP, DATA, WORK
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    case, GMP, DATA, WORK = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3]), sys.argv[4]
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    WORK = os.path.abspath(WORK)
    {"torch": case_torch, "nsys": case_nsys, "bad": case_bad, "tmp": case_tmp,
     "stream": case_stream}[case]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
