#!/usr/bin/env python3
"""A process tree: `gpumemprof run -- sh -c 'A & B; wait'` where A and B are CUDA programs. Each
process that initializes CUDA writes its own trace (%p in the pattern): exactly two traces, one per
program with its own pid and command line, both complete, both listed by run's summary (and in
its `next:` command); the shell itself writes nothing."""
import glob
import os

import agentlib as L


def main():
    c = L.setup()
    basic = L.prog(c, "basic")
    pattern = os.path.join(c.tmp, "tree.%p.zst")
    script = "%s alloc 2 > %s/a.out & %s alloc 3 > %s/b.out; wait" % (basic, c.tmp, basic, c.tmp)
    rc, out, err = L.gmp_run(c, ["-o", pattern], ["sh", "-c", script])
    L.eq(rc, 0, "exit status (%s)" % err.strip())
    traces = sorted(glob.glob(os.path.join(c.tmp, "tree.*.zst")))
    L.eq(len(traces), 2, "trace files: %s" % traces)
    allocs_by_n = {}
    for path in traces:
        t = L.dump(c, path)
        h = t.header
        L.eq(os.path.basename(path), "tree.%d.zst" % h["pid"], "file name of pid %d" % h["pid"])
        L.check(t.summary["complete"], "%s complete" % path)
        L.eq(h["cmdline"][:2], [basic, "alloc"], "command line in %s" % path)
        n = int(h["cmdline"][2])
        allocs_by_n[n] = (len(t.of("alloc")), len(t.of("free")))
        L.eq(len([l for l in err.splitlines() if l.startswith("gpumemprof: %s (pid %d:" % (
            path, h["pid"]))]), 1, "run's summary lists %s" % path)
    L.eq(allocs_by_n, {2: (2, 2), 3: (3, 3)}, "allocations and frees per program")
    nxt = [l for l in err.splitlines() if l.startswith("gpumemprof: next:")]
    L.check(len(nxt) == 1 and all(p in nxt[0] for p in traces), "next command: %s" % nxt)
    for f, n in (("a.out", 2), ("b.out", 3)):
        with open(os.path.join(c.tmp, f)) as fh:
            L.eq(fh.read().splitlines()[-1], "basic: ok", "output of the program with %d" % n)
    L.cleanup(c)
    L.finish("process_tree")


if __name__ == "__main__":
    main()
