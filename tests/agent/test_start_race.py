#!/usr/bin/env python3
"""The agent's start race (docs/collectors.md, point 1; progs/start_race.c): InitializeInjection and
InitializeInjectionNvtx2 arriving together from two threads. Thread a opens NVTX range "a" and
allocates 1 MiB inside it; thread b allocates 2 MiB, then opens range "b"; both are released at
once at the start of the process. Every run must record both allocations (a's with path "a") and
both ranges, and end with a complete trace: the second thread waits for the first's start instead
of returning with CUPTI unsubscribed or NVTX disabled; no run may hang (deadlock).

--runs N (default 200; about 10 ms a run on the simulator, so CI runs all 200)
runs; half of them with GPUMEMPROF_TEST_START_DELAY_US=2000, a pause inside the agent's start that
makes the other thread arrive while the start is under way in every such run, half without (the
natural race). Prints how many runs lost what (none may). The agent before the fix lost the
allocations or the ranges in most runs of this script."""
import time

import agentlib as L


def one(c, n, delay):
    out = "%s/t%d.zst" % (c.tmp, n)
    kv = {"GPUMEMPROF_QUIET": 1}
    if delay:
        kv["GPUMEMPROF_TEST_START_DELAY_US"] = 2000
    rc, stdout, stderr = L.run([L.prog(c, "start_race")], L.direct_env(c, out, **kv), timeout=30)
    if rc != 0:
        return "exit status %d (%s)" % (rc, stderr.strip())
    vals = L.shown(stdout)
    t = L.dump(c, out)
    lost = []
    if not (t.summary and t.summary["complete"]):
        lost.append("incomplete trace")
    allocs = {int(r["address"], 16): r for r in t.of("alloc")}
    ra = allocs.get(vals.get("a", -1))
    rb = allocs.get(vals.get("b", -1))
    if ra is None:
        lost.append("allocation a")
    elif ra.get("path") != "a":
        lost.append("range path of allocation a (%r)" % ra.get("path"))
    if rb is None:
        lost.append("allocation b")
    names = {r.get("name") for r in t.of("range")}
    pushes = len(t.of("range_push"))
    if pushes != 2 or not {"a", "b"} <= names:
        lost.append("ranges (%d pushes, names %s)" % (pushes, sorted(n for n in names if n)))
    frees = len(t.of("free"))
    if frees != 2:
        lost.append("%d frees" % frees)
    return "; ".join(lost)


def main():
    c = L.setup(lambda ap: ap.add_argument("--runs", type=int, default=200))
    runs = c.args.runs
    bad = 0
    t0 = time.monotonic()
    for n in range(runs):
        why = one(c, n, delay=(n % 2 == 0))
        if why:
            bad += 1
            L.check(False, "run %d (%s): %s" % (n, "paused start" if n % 2 == 0 else "natural",
                                                why))
    s = time.monotonic() - t0
    print("start race: %d runs (%d with a paused start), %d lost something; %.1f ms per run" %
          (runs, (runs + 1) // 2, bad, 1000 * s / max(runs, 1)))
    L.cleanup(c)
    L.finish("start_race")


if __name__ == "__main__":
    main()
