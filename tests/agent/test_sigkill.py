#!/usr/bin/env python3
"""SIGKILL at a random moment (seeded): progs/basic.c loop allocates and frees 4 KiB every
100 us; after a random delay it is killed with SIGKILL. Every trace reads with dump (exit 0), is
marked incomplete (no END), and holds the events up to at most one flush interval (50 ms, plus a
small allowance for compressing and writing the last frame) before the kill: the last event's
time, converted with the header's start_wall_ns/start_trace_ns, is compared with the time of the
kill (each run within 50 + 250 ms, the median within 50 + 50 ms). Usage: test_sigkill.py COMMON-OPTIONS [--seed N] [--runs N]"""
import os
import random
import signal
import time

import agentlib as L

FLUSH_MS = 50
# The writer's cycle itself (collect, compress, write) and scheduling on a busy 2-core machine
# with sanitizers: every run within FLUSH + ALLOWANCE, the median within FLUSH + MEDIAN_ALLOWANCE.
ALLOWANCE_MS = 250
MEDIAN_ALLOWANCE_MS = 50


def main():
    c = L.setup(lambda ap: (ap.add_argument("--seed", type=int, default=4242),
                            ap.add_argument("--runs", type=int, default=4)))
    rnd = random.Random(c.args.seed)
    gaps = []
    for i in range(c.args.runs):
        delay = rnd.uniform(0.02, 0.5)
        out = os.path.join(c.tmp, "kill%d.zst" % i)
        p = L.Proc([c.gmp, "run", "-o", out, "--flush-interval", str(FLUSH_MS), "--",
                    L.prog(c, "basic"), "loop"], c.env, out + ".err")
        line = p.line_starting("ready ")
        if not L.check(line, "run %d: program started (%r)" % (i, p.lines)):
            p.kill_all()
            p.wait()
            continue
        ready_wall = time.time_ns()  # the program's first allocation and free came before this
        pid = int(line.split()[1])
        time.sleep(delay)  # the random moment of the kill
        kill_wall = time.time_ns()
        os.kill(pid, signal.SIGKILL)
        rc, _, err = p.wait()
        L.eq(rc, 128 + signal.SIGKILL, "run %d: run's exit status" % i)
        L.check("was ended by signal 9" in err, "run %d: run says the program was killed" % i)
        L.check(("gpumemprof: %s (pid %d:" % (out, pid)) in err, "run %d: summary lists it" % i)
        t = L.dump(c, out)
        L.eq(t.rc, 0, "run %d: dump exit status" % i)
        if not t.summary:
            continue
        L.eq((t.summary["complete"], t.summary["has_end"]), (False, False),
             "run %d: marked incomplete (%s)" % (i, t.summary["message"]))
        L.eq(t.header["pid"], pid, "run %d: the trace is the killed program's" % i)
        events = [r for r in t.recs if "t" in r]
        if not events:
            # killed before the first flush: allowed only within one flush interval of the
            # program's first events
            waited = (kill_wall - ready_wall) / 1e6
            print("run %d: killed after %.0f ms, before the first flush" % (i, delay * 1000))
            L.check(waited <= FLUSH_MS + ALLOWANCE_MS,
                    "run %d: no events although killed %.1f ms after the first ones" % (i, waited))
            continue
        last = max(r["t"] for r in events)
        gap_ms = (kill_wall - t.wall(last)) / 1e6
        gaps.append(gap_ms)
        allocs = len(t.of("alloc"))
        print("run %d: killed after %.0f ms; %d allocations in the trace, the last event %.1f ms "
              "before the kill" % (i, delay * 1000, allocs, gap_ms))
        L.check(-5 <= gap_ms <= FLUSH_MS + ALLOWANCE_MS,
                "run %d: last event %.1f ms before the kill (flush interval %d ms)" % (
                    i, gap_ms, FLUSH_MS))
        # what is there is whole: every free matches an earlier allocation
        live = set()
        for r in t.mem():
            if r["type"] == "alloc":
                live.add(r["address"])
            else:
                L.check(r["address"] in live, "run %d: free of %s matched" % (i, r["address"]))
                live.discard(r["address"])
        L.check(len(live) <= 1, "run %d: at most the last allocation is live" % i)
    if gaps:
        print("gaps (ms): " + ", ".join("%.1f" % g for g in gaps))
        med = sorted(gaps)[len(gaps) // 2]
        L.check(med <= FLUSH_MS + MEDIAN_ALLOWANCE_MS, "median gap %.1f ms" % med)
    L.cleanup(c)
    L.finish("sigkill")


if __name__ == "__main__":
    main()
