#!/usr/bin/env python3
"""Another CUPTI client in the program (docs/collectors.md, "Another CUPTI client in the program";
progs/kineto_like.c does what torch.profiler's Kineto does after CUDA started: cuptiSubscribe,
cuptiActivityRegisterCallbacks with buffers of its own, an activity kind of its own, then more
CUDA work and a flush). On the simulated device, which keeps one subscriber
(cupti_callbacks.h:698-703) and one registered buffer pair per library, the last one
(cupti_activity.h:7648-7669):
- alone, its subscription succeeds and its buffers get no MEMORY2 record (nobody enabled them);
- under `gpumemprof run` the agent holds CUPTI, so its subscription fails with
  CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39), and its buffers replace the agent's: they
  receive the MEMORY2 records the agent enabled. The program runs on unchanged otherwise; the
  agent says it once on stderr and in a WARNING notice (what stops: static memory, pool sizes,
  graph memory); the API allocations after it are still recorded from callbacks, and the pool
  sizes after it are missing (what the notice says);
- a program without another client ("basic") gets no such notice."""
import agentlib as L

MIB = 1 << 20
PHRASE = "CUPTI activity records stopped reaching gpumemprof"


def main():
    c = L.setup()
    prog = L.prog(c, "kineto_like")
    rc0, out0, err0 = L.run([prog], c.env)
    L.eq(rc0, 0, "alone: exit status (%s)" % err0.strip())
    lines0 = out0.splitlines()
    L.eq([l for l in lines0 if not l.startswith("A ")],
         ["subscribe 0", "kineto buffers 0, MEMORY2 records 0", "kineto_like: ok"], "alone: stdout")

    out = c.tmp + "/k.zst"
    rc, stdout, stderr = L.gmp_run(c, ["-o", out], [prog])
    L.eq(rc, 0, "under run: exit status (%s)" % stderr.strip())
    lines = stdout.splitlines()
    L.eq(lines[0], "subscribe 39", "the program's subscription fails: the agent holds CUPTI")
    got = [l for l in lines if l.startswith("kineto buffers")]
    L.check(got and not got[0].endswith("MEMORY2 records 0"),
            "the program's buffers got the agent's MEMORY2 records: %s" % got)
    L.eq(lines[-1], "kineto_like: ok", "under run: the program ends as alone")
    said = [l for l in L.agent_lines(stderr) if PHRASE in l]
    L.eq(len(said), 1, "one agent line about it:\n" + stderr)
    t = L.dump(c, out)
    notices = [n for n in t.of("notice") if PHRASE in n["message"]]
    L.eq([n["severity"] for n in notices], ["warning"], "one WARNING notice")
    if notices:
        m = notices[0]["message"]
        for w in ("torch.profiler", "MEMORY2", "static __device__ memory, pool sizes and graph memory",
                  "still recorded"):
            L.check(w in m, "the notice says %r: %s" % (w, m))
    vals = L.shown(stdout)
    allocs = [(r["api"], r["size"]) for r in t.mem() if r["type"] == "alloc"]
    L.eq(allocs, [("cudaMalloc", MIB), ("cudaMalloc", 2 * MIB), ("cudaMallocAsync", 4 * MIB)],
         "API allocations, before and after the other client, from callbacks")
    after = [r for r in t.mem() if r["type"] == "alloc" and int(r["address"], 16) == vals.get("after")]
    L.eq(len(after), 1, "the allocation after the other client registered")
    pools = [p for p in t.of("pool") if p["op"] == "reserved" and p["value"] > 0]
    L.eq(pools, [], "no pool size after the other client took the records")
    L.check(t.summary["complete"], "the trace is complete")

    # no other client: no notice
    out2 = c.tmp + "/b.zst"
    rc, stdout, stderr = L.gmp_run(c, ["-o", out2, "--quiet"], [L.prog(c, "locations")],
                                   env=L.env_with(c, SIMCUDA_DEVICE_COUNT=2))
    L.eq(rc, 0, "control: exit status (%s)" % stderr.strip())
    L.eq([n for n in L.dump(c, out2).of("notice") if PHRASE in n["message"]], [],
         "control: no notice")
    L.check(PHRASE not in stderr, "control: nothing said")
    L.cleanup(c)
    L.finish("kineto")


if __name__ == "__main__":
    main()
