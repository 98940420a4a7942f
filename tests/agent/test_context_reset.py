#!/usr/bin/env python3
"""What survives a context's destruction (docs/collectors.md, point 5; progs/context_reset.c):
cudaDeviceReset destroys the cudaMalloc allocation (an implicit free at the reset) but not the
cudaMallocAsync allocation nor the cuMemCreate handle (cuda.h cuCtxDestroy: "will not destroy
memory allocations by cuMemCreate(), cuMemAllocAsync() and cuMemAllocFromPoolAsync()";
cuda_runtime_api.h cudaDeviceReset, the same). The trace has the reset (a CONTEXT_DESTROY resource
record) and the survivors' explicit frees after it; the report must count those frees as matched
(no unknown or double free), nothing leaked, and the device's memory after the reset 20 MiB until
the frees.

The agent records all of this; what is checked here is the replay's reading of CONTEXT_DESTROY
(formats/replay/gmp_replay.c, on_context_destroy), which frees only what the context owns (the
cudaMalloc block), so the survivors' later frees match; with the old reading (every live
allocation of the device freed) they were unknown frees. The simulator's reset keeps pool
allocations and cuMemCreate memory (tests/simcuda/model.c)."""
import json

import agentlib as L

MIB = 1 << 20


def main():
    c = L.setup()
    out = c.tmp + "/t.zst"
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet"], [L.prog(c, "context_reset")])
    L.eq(rc, 0, "exit status (stderr: %s)" % stderr.strip())
    frees = {l.split()[1]: int(l.split()[2]) for l in stdout.splitlines()
             if l.startswith("FREE ")}
    L.eq(frees, {"async": 0, "vmm": 0}, "the survivors' frees after the reset succeed")
    t = L.dump(c, out)
    L.check(any(r.get("op") in ("context_destroy", "context-destroy")
                for r in t.of("resource")), "a CONTEXT_DESTROY record")
    rc, rep, rerr = L.run([c.gmp, "report", out, "--format", "json"], c.env)
    L.eq(rc, 0, "report exit status (%s)" % rerr.strip())
    r = json.loads(rep)
    d = r["devices"][0] if r.get("devices") else {}
    for k in ("unknown_frees", "double_frees", "leaked_bytes"):
        L.eq(d.get(k), 0, "device 0 " + k)
    L.eq(d.get("peak_allocated_bytes"), 28 * MIB, "device 0 peak (8 + 16 + 4 MiB)")
    L.cleanup(c)
    L.finish("context_reset")


if __name__ == "__main__":
    main()
