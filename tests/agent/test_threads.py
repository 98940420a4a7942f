#!/usr/bin/env python3
"""8 threads x 100,000 cudaMalloc/cudaFree each (progs/mt_alloc.c) under `gpumemprof run`: nothing
lost. END totals match, 800,000 allocations and 800,000 frees, no LOST records, exact bytes, no
leak and no anomaly; the program's stdout is the same as without the agent. Prints the run time
with and without the agent (figures, not asserted beyond a generous bound)."""
import json
import time

import agentlib as L

THREADS, ITERS = 8, 100000


def main():
    c = L.setup()
    p = L.prog(c, "mt_alloc")
    args = [p, str(THREADS), str(ITERS)]
    t0 = time.monotonic()
    rc0, out0, err0 = L.run(args, L.env_with(c), timeout=120)
    plain = time.monotonic() - t0
    L.eq(rc0, 0, "exit status without the agent (%s)" % err0.strip())

    trace = c.tmp + "/t.zst"
    t0 = time.monotonic()
    rc, out, err = L.gmp_run(c, ["-o", trace], args, timeout=120)
    profiled = time.monotonic() - t0
    L.eq(rc, 0, "exit status under gpumemprof run (%s)" % err.strip())
    L.eq(out, out0, "stdout with and without the agent")
    n = THREADS * ITERS
    L.eq(out, "mt_alloc: %d allocations, %d frees\n" % (n, n), "program output")
    for line in err0.splitlines() + err.splitlines():
        if line.startswith("mt_alloc:"):
            print(line)
    print("wall time: %.2f s without the agent, %.2f s under gpumemprof run" % (plain, profiled))

    rc, rep, rerr = L.run([c.gmp, "report", trace, "--format", "json"], c.env)
    L.eq(rc, 0, "report exit status (%s)" % rerr.strip())
    r = json.loads(rep)
    L.check(r["complete"] and r["has_end"], "complete: %s" % r["completeness"])
    L.eq((r["lost_events"], r["late_events"]), (0, 0), "lost and late events")
    d = r["devices"][0] if r.get("devices") else {}  # schema 2: left out when none
    # sizes 256 * (1 + i % 8): 256 * 36 bytes per 8 iterations
    want = {"id": 0, "allocations": n, "frees": n, "failed_allocations": 0, "failed_frees": 0,
            "allocated_bytes_total": THREADS * (ITERS // 8) * 256 * 36, "leaked_bytes": 0,
            "leaked_allocations": 0, "unknown_frees": 0, "double_frees": 0}
    L.eq({k: d.get(k) for k in want}, want, "device 0 totals")
    L.check(0 < d.get("peak_allocated_bytes", 0) <= THREADS * 2048,
            "peak allocated %s within %d threads x 2048 B" % (d.get("peak_allocated_bytes"),
                                                             THREADS))
    L.eq(r["events"] >= 2 * n, True, "events >= 2 x %d" % n)

    L.check("END totals match" in r["completeness"], "END totals: %s" % r["completeness"])
    L.check(profiled < 60, "run under the agent took %.1f s" % profiled)
    L.cleanup(c)
    L.finish("threads")


if __name__ == "__main__":
    main()
