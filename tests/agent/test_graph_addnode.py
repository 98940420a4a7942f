#!/usr/bin/env python3
"""Graph memory nodes added through the generic node API (docs/collectors.md, point 4;
progs/graph_addnode.c: cuGraphAddNode and cudaGraphAddNode with MEM_ALLOC parameters, the graph
launched once, its memory freed outside the graph by cudaFree and cudaFreeAsync).
- with --no-activity the agent learns the nodes' addresses from those calls, as from
  cudaGraphAddMemAllocNode, so the frees outside the graph are not recorded as frees of unknown
  memory (the graph memory's reading covers them): no FREE record at either address, the report
  has no unknown free;
- with activity records (the default) the launch's MEMORY2 records give both allocations (api
  cuGraphLaunch, at the nodes' addresses) and the frees outside the graph match them."""
import json

import agentlib as L

MIB = 1 << 20


def run(c, name, extra):
    out = "%s/%s.zst" % (c.tmp, name)
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet"] + extra, [L.prog(c, "graph_addnode")])
    L.eq(rc, 0, "%s: exit status (stderr: %s)" % (name, stderr.strip()))
    L.check(stdout.endswith("graph_addnode: ok\n"), "%s: stdout %r" % (name, stdout))
    t = L.dump(c, out)
    rc, rep, rerr = L.run([c.gmp, "report", out, "--format", "json"], c.env)
    L.eq(rc, 0, "%s: report exit status (%s)" % (name, rerr.strip()))
    return L.shown(stdout), t.mem(activity=True), json.loads(rep)


def unknown_frees(rep):
    return [d.get("unknown_frees", 0) for d in rep.get("devices", [])]


def main():
    c = L.setup()
    vals, recs, rep = run(c, "noact", ["--no-activity"])
    nodes = {vals.get("node16"), vals.get("node8")}
    L.check(None not in nodes, "the program showed both nodes: %s" % vals)
    frees = [r for r in recs if r["type"] == "free" and int(r["address"], 16) in nodes]
    L.eq(frees, [], "--no-activity: no free of a graph node's address recorded")
    L.eq(sum(unknown_frees(rep)), 0, "--no-activity: no unknown free")

    vals, recs, rep = run(c, "act", [])
    got = sorted((r["type"], r["api"], r["size"]) for r in recs
                 if int(r["address"], 16) in (vals.get("node16"), vals.get("node8")))
    L.eq(got, sorted([("alloc", "cuGraphLaunch", 16 * MIB), ("alloc", "cuGraphLaunch", 8 * MIB),
                      ("free", "cudaFree", 0), ("free", "cudaFreeAsync", 0)]),
         "activity: the launch's allocations and the frees outside the graph")
    L.eq(sum(unknown_frees(rep)), 0, "activity: no unknown free")
    L.cleanup(c)
    L.finish("graph_addnode")


if __name__ == "__main__":
    main()
