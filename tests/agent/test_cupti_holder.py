#!/usr/bin/env python3
"""A second CUPTI subscriber: progs/cupti_holder.c subscribes to CUPTI itself (as "Nsight
Systems") before CUDA starts, as a profiler in the same process would; CUPTI allows one
subscriber. Under `gpumemprof run` the program runs on unchanged (same stdout, same exit status
7, and its own callbacks all arrive), the agent prints exactly one line that names the holder
(also with --quiet: errors are not silenced), the trace holds a NOTICE with severity error and no
memory records, and run's summary says that the trace could not profile and why."""
import os

import agentlib as L

HOLDER = "Nsight Systems"


def main():
    c = L.setup()
    prog = L.prog(c, "cupti_holder")
    rc0, out0, err0 = L.run([prog], c.env)
    L.eq((rc0, out0), (7, "cupti_holder: 4 callbacks\n"), "without the agent (%s)" % err0.strip())
    for quiet in (False, True):
        what = "--quiet" if quiet else "run"
        out = os.path.join(c.tmp, "holder%d.zst" % quiet)
        rc, stdout, stderr = L.gmp_run(c, ["-o", out] + (["--quiet"] if quiet else []), [prog])
        L.eq(rc, rc0, what + ": exit status")
        L.eq(stdout, out0, what + ": stdout")
        lines = [l for l in L.agent_lines(stderr) if "cannot profile" in l and
                 not l.startswith("gpumemprof: " + out)]
        L.eq(len(lines), 1, what + ": agent lines about it:\n" + stderr)
        if lines:
            L.check(HOLDER in lines[0] and "in use by " + HOLDER in lines[0],
                    what + ": the line names the holder: " + lines[0])
            L.check("runs on" in lines[0], what + ": says the program runs on: " + lines[0])
        t = L.dump(c, out)
        notices = t.of("notice")
        L.eq([(n["severity"], HOLDER in n["message"] and "cannot profile" in n["message"])
              for n in notices], [("error", True)], what + ": NOTICE records")
        L.eq(t.of("alloc", "free", "pool", "oom"), [], what + ": no memory records")
        L.check(t.summary["complete"], what + ": the trace is complete")
        if not quiet:
            summary = stderr[stderr.find("gpumemprof: " + out):]
            L.check("error: cannot profile: CUPTI is already in use by " + HOLDER in summary,
                    "run's summary says why nothing was recorded:\n" + stderr)
            L.check("peak allocated" not in summary, "no device figures in the summary")
        else:
            L.check(("gpumemprof: " + out) not in stderr, "--quiet: no summary")
    L.cleanup(c)
    L.finish("cupti_holder")


if __name__ == "__main__":
    main()
