#!/usr/bin/env python3
"""The causes "An OOM across ranks" names besides a range that grew (docs/report.md), on the
four-rank traces of gen_ranks_oom.c (rank 2 runs out of memory in its 3rd "step"; the others run
six): with a pool grown to 900 MiB around 300 MiB of blocks the cause is fragmentation (600 MiB
free in its pool against the others' 20 MiB); with 600 MiB more driver-counted use than its pool
the cause is memory outside the allocator; when it holds what the others hold and asks for 2 GiB,
the cause is capacity (nothing differs). All: the iteration is the healthy ranks' "step"
(rank 2 repeats it too few times for an iteration of its own), the failing rank is compared at its
3rd step with the three others, by the iteration. Expected numbers are the generator's.

check_ranks_oom_causes.py GPUMEMPROF GEN_RANKS_OOM TMPDIR"""
import json
import os
import subprocess
import sys

MiB = 1 << 20
failures = 0


def eq(got, want, what):
    global failures
    if got != want:
        failures += 1
        print("FAIL: %s: got %r, want %r" % (what, got, want))


def main():
    gmp, gen, tmp = sys.argv[1:4]
    os.makedirs(tmp, exist_ok=True)
    for kind, cause in (("frag", "fragmentation"), ("outside", "outside_allocator"),
                        ("capacity", "capacity")):
        traces = []
        for r in range(4):
            path = os.path.join(tmp, "%s.rank%d.zst" % (kind, r))
            subprocess.run([gen, kind, str(r), path], check=True)
            traces.append(path)
        p = subprocess.run([gmp, "report", "--format", "json"] + traces, capture_output=True,
                           text=True)
        eq(p.returncode, 0, "%s: report's status (%s)" % (kind, p.stderr.strip()))
        ro = json.loads(p.stdout).get("ranks_oom") if p.returncode == 0 else None
        if ro is None:
            eq(ro is None, False, "%s: an OOM section" % kind)
            continue
        eq(ro["failing"]["label"], "rank 2, pid 5002", "%s: the failing rank" % kind)
        eq((ro["iteration"], ro["iteration_name"]), (3, "step"), "%s: the iteration" % kind)
        eq((ro["compared_ranks"], ro["aligned_by_iteration"]), (3, 3), "%s: compared" % kind)
        eq(ro["differs_by"], cause, "%s: the cause" % kind)
        fail, med = ro["ranks"][0], ro["ranks"][1]
        if kind == "capacity":
            eq((fail["allocated_bytes"], ro["ranges"]), (80 * MiB, []),
               "capacity: the failing rank holds what the others hold")
            eq(ro["failing"]["requested_bytes"], 2048 * MiB, "capacity: the request")
        elif kind == "frag":
            eq((fail["allocated_bytes"], fail["reserved_bytes"], fail["cached_bytes"]),
               (300 * MiB, 900 * MiB, 600 * MiB), "frag: the failing rank at its OOM")
            eq(ro["differs"]["cached_more_bytes"], 580 * MiB, "frag: free in the pool, more")
        else:
            eq((fail["allocated_bytes"], fail["outside_bytes"]), (90 * MiB, 700 * MiB),
               "outside: the failing rank at its OOM")
            eq(ro["differs"]["outside_more_bytes"], 600 * MiB, "outside: more outside")
        eq((med["allocated_bytes"], med["reserved_bytes"], med["cached_bytes"],
            med["outside_bytes"]), (80 * MiB, 100 * MiB, 20 * MiB, 100 * MiB),
           "%s: the median of the others at their 3rd step" % kind)
        t = subprocess.run([gmp, "report"] + traces, capture_output=True, text=True).stdout
        words = {"frag": "fragmentation: its pool held 600.00 MiB free",
                 "outside": "600.00 MiB more memory outside the allocator",
                 "capacity": "held no more than the other ranks"}[kind]
        eq(any(l.strip().startswith(("what differs on rank 2, ", "rank 2, ")) and words in l
               for l in t.splitlines()), True, "%s: the text says it" % kind)
    print("ranks_oom_causes: %s" % ("ok" if not failures else "%d failures" % failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
