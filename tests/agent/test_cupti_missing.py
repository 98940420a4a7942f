#!/usr/bin/env python3
"""CUPTI missing. `gpumemprof run --cupti /nonexistent` is refused before anything runs (exit 2,
one message naming the path). With GPUMEMPROF_CUPTI set directly (no run) to a file that is not
CUPTI (a text file; a shared library without cuptiSubscribe) the program runs on with the same
output and status as without the agent, the agent prints one stderr line, and the trace holds a
NOTICE with severity error and nothing else recorded."""
import os

import agentlib as L

WANT_OUT = "alloc 0\nalloc 1\nbasic: ok\n"


def main():
    c = L.setup()
    basic = L.prog(c, "basic")
    rc, out, err = L.gmp_run(c, ["--cupti", "/nonexistent/libcupti.so"], [basic, "alloc", "2"])
    L.eq(rc, 2, "run --cupti /nonexistent: exit status")
    L.eq(out, "", "run --cupti /nonexistent: the program did not run")
    msgs = [l for l in err.splitlines() if "/nonexistent/libcupti.so" in l]
    L.eq(len(msgs), 1, "one message naming the path:\n" + err)
    L.check(not [l for l in err.splitlines() if "recording" in l], "nothing recorded")

    rc0, out0, _ = L.run([basic, "alloc", "2"], c.env)
    L.eq((rc0, out0), (0, WANT_OUT), "without the agent")
    text = os.path.join(c.tmp, "not-cupti.txt")
    with open(text, "w") as f:
        f.write("this is not a shared library\n")
    nolib = os.path.join(c.args.simcuda, "libcudart.so.13")  # an ELF library, not CUPTI
    for name, path, why in (("text file", text, "cannot load CUPTI from " + text),
                            ("library", nolib, "lacks cuptiSubscribe")):
        out = os.path.join(c.tmp, "%s.zst" % name.replace(" ", "-"))
        env = L.direct_env(c, out, GPUMEMPROF_CUPTI=path)
        rc, stdout, stderr = L.run([basic, "alloc", "2"], env)
        L.eq((rc, stdout), (rc0, out0), name + ": the program runs on unchanged")
        lines = L.agent_lines(stderr)
        errs = [l for l in lines if "recording to" not in l]
        L.eq(len(errs), 1, name + ": one stderr line:\n" + stderr)
        if errs:
            L.check("cannot profile" in errs[0] and why in errs[0], name + ": " + errs[0])
        L.eq(len(stderr.splitlines()), len(lines), name + ": nothing else on stderr")
        t = L.dump(c, out)
        L.eq([(n["severity"], why in n["message"]) for n in t.of("notice")], [("error", True)],
             name + ": NOTICE")
        L.eq(t.of("alloc", "free", "pool", "oom", "resource"), [], name + ": nothing recorded")
        L.check(t.summary["complete"], name + ": complete")
    L.cleanup(c)
    L.finish("cupti_missing")


if __name__ == "__main__":
    main()
