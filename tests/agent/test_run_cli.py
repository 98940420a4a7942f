#!/usr/bin/env python3
"""`gpumemprof run` around a CUDA program (progs/basic.c):
- exit status: exit 3 -> 3; a program killed by SIGTERM -> 143 (and the summary says so);
- SIGTERM sent to gpumemprof is forwarded to the program (-> 143), while it runs; its device
  memory SAMPLE records read capacity - context overhead - its 4 KiB;
- -o patterns: %p %n %h %r (RANK=3), %n counts up past existing files;
- an existing output file is refused without --force (exit 1, one message, the program does not
  run, the file is untouched) and overwritten with --force; traces are created with mode 0600
  (also an overwritten one);
- a symbolic link planted at the output path is never followed (refused by run, or with --force
  or a pattern by the agent: the program runs on, the link's target is untouched);
- bad option values: exit 2, one message, nothing run; --sample-interval's message speaks of
  milliseconds as its --help does; an output directory that does not exist is refused before the
  program starts;
- a fixed -o name under a command that starts several CUDA processes: each is recorded (NAME.zst,
  NAME.2.zst), the summary lists both and its "next" commands name both; --force then overwrites
  the name and the others still get their own files;
- a CUDA process whose agent could not write its trace is named in the summary; "next" lines only
  when a trace recorded something; a command that cannot be started gets its error only;
- the program's stdout is the same as without gpumemprof (the agent never writes to stdout)."""
import os
import signal
import socket
import stat

import agentlib as L

MIB = 1 << 20
GIB = 1 << 30


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def run_messages(err):
    return [l for l in err.splitlines() if l.startswith("gpumemprof run:")]


def main():
    c = L.setup()
    basic = L.prog(c, "basic")
    d = c.tmp

    # exit status and stdout
    rc0, out0, _ = L.run([basic, "exit", "3"], c.env)
    L.eq((rc0, out0), (3, "exiting with 3\n"), "exit 3 without gpumemprof")
    rc, out, err = L.gmp_run(c, ["-o", d + "/exit.zst"], [basic, "exit", "3"])
    L.eq((rc, out), (3, out0), "exit 3 under run: status and stdout")
    L.check("gpumemprof: %s/exit.zst (pid" % d in err, "summary lists the trace:\n" + err)
    t = L.dump(c, d + "/exit.zst")
    L.check(t.summary["complete"], "a program that calls exit() leaves a complete trace")
    L.eq(mode(d + "/exit.zst"), 0o600, "trace file mode")

    rc, out, err = L.gmp_run(c, ["-o", d + "/term.zst"], [basic, "sigterm"])
    L.eq((rc, out), (143, "raising SIGTERM\n"), "program killed by SIGTERM: status and stdout")
    L.check("was ended by signal 15" in err, "summary says SIGTERM ended it:\n" + err)

    # SIGTERM to gpumemprof reaches the program; samples while it runs
    env = L.env_with(c, SIMCUDA_DEVICE_MEMORY=GIB, SIMCUDA_CONTEXT_OVERHEAD=100 * MIB)
    out = d + "/fwd.zst"
    p = L.Proc([c.gmp, "run", "-o", out, "--sample-interval", "10", "--flush-interval", "20",
                "--", basic, "wait"], env, d + "/fwd.err")
    if L.check(p.line_starting("ready"), "program ready: %r" % p.lines):
        def sampled():
            t = L.dump(c, out, must=False)
            return t if t and t.of("sample") else None

        t = L.wait_for(sampled, 10, "a SAMPLE record of the running program")
        if t:
            s = t.of("sample")[0]
            L.eq((s["device"], s["free"], s["total"]), (0, GIB - 100 * MIB - 4096, GIB),
                 "SAMPLE while 4 KiB are allocated")
        os.kill(p.p.pid, signal.SIGTERM)
        rc, rest, err = p.wait()
        L.eq(rc, 143, "SIGTERM to gpumemprof: exit status")
        L.check("was ended by signal 15" in err, "the program got the SIGTERM:\n" + err)
        L.eq(rest, "", "no more stdout after ready")
    else:
        p.kill_all()
        p.wait()

    # patterns
    host = socket.gethostname().replace("/", "_")
    env = L.env_with(c, RANK=3)
    rc, out, err = L.gmp_run(c, ["-o", d + "/pat.%p.%n.%h.%r.zst"], [basic, "alloc", "1"], env=env)
    L.eq(rc, 0, "pattern run")
    made = [f for f in os.listdir(d) if f.startswith("pat.")]
    L.eq(len(made), 1, "one trace for the pattern: %s" % made)
    if made:
        t = L.dump(c, os.path.join(d, made[0]))
        L.eq(made[0], "pat.%d.0.%s.3.zst" % (t.header["pid"], host), "expanded name")
        L.eq(t.header["rank"], 3, "rank in the header")
    for n in range(2):
        rc, out, err = L.gmp_run(c, ["-o", d + "/cnt.%n.zst"], [basic, "alloc", "1"])
        L.eq(rc, 0, "counter run %d" % n)
    L.eq(sorted(f for f in os.listdir(d) if f.startswith("cnt.")), ["cnt.0.zst", "cnt.1.zst"],
         "%n counts past existing files")

    # existing file: refused, then --force
    fixed = d + "/fixed.zst"
    with open(fixed, "w") as f:
        f.write("keep me")
    os.chmod(fixed, 0o644)
    rc, out, err = L.gmp_run(c, ["-o", fixed], [basic, "alloc", "1"])
    L.eq((rc, out), (1, ""), "existing file without --force: status, program not run")
    L.eq(len(run_messages(err)), 1, "one message:\n" + err)
    L.check("exists" in err and "--force" in err, "the message says why:\n" + err)
    with open(fixed) as f:
        L.eq(f.read(), "keep me", "existing file untouched")
    rc, out, err = L.gmp_run(c, ["-o", fixed, "--force"], [basic, "alloc", "1"])
    L.eq((rc, out), (0, "alloc 0\nbasic: ok\n"), "--force: status and stdout")
    t = L.dump(c, fixed)
    L.eq(len(t.of("alloc")), 1, "--force: the file is a new trace")
    L.eq(mode(fixed), 0o600, "--force: overwritten file has mode 0600")

    # symbolic links at the output path
    target = d + "/target"
    with open(target, "w") as f:
        f.write("secret")
    link = d + "/link.zst"
    os.symlink(target, link)
    rc, out, err = L.gmp_run(c, ["-o", link], [basic, "alloc", "1"])
    L.eq((rc, out), (1, ""), "symlink, no --force: refused by run")
    rc, out, err = L.gmp_run(c, ["-o", link, "--force"], [basic, "alloc", "1"])
    L.eq((rc, out), (0, "alloc 0\nbasic: ok\n"), "symlink with --force: the program runs on")
    L.check(any("symbolic link" in l for l in L.agent_lines(err)),
            "symlink with --force: the agent refuses it:\n" + err)
    link3 = d + "/rank.3.zst"
    os.symlink(target, link3)
    rc, out, err = L.gmp_run(c, ["-o", d + "/rank.%r.zst"], [basic, "alloc", "1"],
                             env=L.env_with(c, RANK=3))
    L.eq((rc, out), (0, "alloc 0\nbasic: ok\n"), "symlink at an expanded pattern: runs on")
    L.check(any("not profiling" in l and "rank.3.zst" in l for l in L.agent_lines(err)),
            "symlink at an expanded pattern: the agent refuses it:\n" + err)
    with open(target) as f:
        L.eq(f.read(), "secret", "the link's target is untouched")
    L.check(os.path.islink(link) and os.path.islink(link3), "the links are still links")

    # bad option values
    bad = [["--flush-interval", "0"], ["--flush-interval", "abc"], ["--sample-interval", "-1"],
           ["--buffer-size", "1K"], ["--stack-depth", "0"], ["-o", d + "/x.%q.zst"],
           ["--bogus"], ["--cupti", d + "/no-such-libcupti.so"], ["-o", ""]]
    for opts in bad:
        rc, out, err = L.gmp_run(c, opts, [basic, "alloc", "1"])
        L.eq((rc, out), (2, ""), "%s: status 2, nothing run" % " ".join(opts))
        L.eq(len(run_messages(err)), 1, "%s: one message:\n%s" % (" ".join(opts), err))
    rc, out, err = L.run([c.gmp, "run"], c.env)
    L.eq((rc, len(run_messages(err))), (2, 1), "no command: status 2, one message")
    L.eq(sorted(f for f in os.listdir(d) if f.startswith("x.")), [], "no file for bad options")
    rc, out, err = L.gmp_run(c, ["--sample-interval", "-1"], [basic, "alloc", "1"])
    L.check("milliseconds" in err, "--sample-interval's message says its unit:\n" + err)
    rc, out, err = L.gmp_run(c, ["-o", d + "/no-such-dir/x.zst"], [basic, "alloc", "1"])
    L.eq((rc, out), (2, ""), "missing output directory: status 2, program not run")
    L.check(len(run_messages(err)) == 1 and "no-such-dir" in err,
            "missing output directory: one message naming it:\n" + err)
    rc, out, err = L.gmp_run(c, ["-o", d + "/no-such-dir/%p/x.zst"], [basic, "alloc", "1"])
    L.eq((rc, out), (2, ""), "missing directory above a %p one: status 2, program not run")

    # several CUDA processes under one fixed name: each recorded
    two = "%s alloc 1 >/dev/null & %s alloc 1 >/dev/null; wait" % (basic, basic)
    multi = d + "/multi.zst"
    rc, out, err = L.gmp_run(c, ["-o", multi], ["sh", "-c", two])
    L.eq(rc, 0, "two processes, fixed name: status")
    made = sorted(f for f in os.listdir(d) if f.startswith("multi."))
    L.eq(made, ["multi.2.zst", "multi.zst"], "two processes, fixed name: two traces")
    pids = set()
    for f in made:
        t = L.dump(c, os.path.join(d, f))
        L.eq(len(t.of("alloc")), 1, "%s holds its process's allocation" % f)
        pids.add(t.header["pid"])
        L.check("gpumemprof: %s/%s (pid %d" % (d, f, t.header["pid"]) in err,
                "the summary lists %s:\n%s" % (f, err))
    L.eq(len(pids), 2, "two processes, two pids")
    nxt = [l for l in err.splitlines() if "next:" in l or "  or:" in l]
    L.eq(len(nxt), 2, "next and or lines:\n" + err)
    L.check(all(multi in l and d + "/multi.2.zst" in l for l in nxt),
            "next lines name both traces:\n" + err)
    rc, out, err = L.gmp_run(c, ["-o", multi, "--force"], ["sh", "-c", two])
    made = sorted(f for f in os.listdir(d) if f.startswith("multi."))
    L.eq(made, ["multi.2.zst", "multi.3.zst", "multi.zst"],
         "--force: the name overwritten, the second process beside it")
    L.check("multi.3.zst (pid" in err and "multi.zst (pid" in err,
            "--force: the summary lists the new traces:\n" + err)

    # a process that could not be recorded is named; no "next" without a trace
    os.symlink(target, d + "/lost.0.zst")
    tmpd = L.env_with(c, TMPDIR=d)  # the run log is made there, and removed
    rc, out, err = L.gmp_run(c, ["-o", d + "/lost.%r.zst"], [basic, "alloc", "1"], env=tmpd)
    L.eq(rc, 0, "unrecordable process: runs on")
    L.check(any("used CUDA and was not recorded" in l and "lost.0.zst" in l
                for l in err.splitlines()), "the summary names the lost process:\n" + err)
    L.check("next:" not in err and "no trace was written" not in err,
            "no next line, no contradicting line:\n" + err)
    rc, out, err = L.gmp_run(c, ["-o", d + "/nx.zst"], [d + "/no-such-program"], env=tmpd)
    L.eq(rc, 127, "a missing program: 127")
    L.check("cannot run" in err and "no trace was written" not in err and "next:" not in err,
            "a missing program: its error only:\n" + err)
    L.eq([f for f in os.listdir(d) if f.startswith("gpumemprof-run.")], [], "no run log left")
    L.cleanup(c)
    L.finish("run_cli")


if __name__ == "__main__":
    main()
