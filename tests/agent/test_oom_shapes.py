#!/usr/bin/env python3
"""Failed pitched and 3D allocations and NVTX levels (docs/collectors.md, points 12 and 15;
progs/oom_shapes.c, 1 GiB simulated device). Every OOM record of cudaMallocPitch, cudaMalloc3D and
cuMemAllocPitch asks for the 2 GiB of the call's inputs, never a size computed from the decoy
outputs the failed call did not write. NVTX push/pop return levels per domain (nvToolsExt.h:939,
978): outer 0, the first range of domain d 0, inner 1; pops 1, 0, 0."""
import agentlib as L

MIB = 1 << 20
GIB = 1 << 30


def main():
    c = L.setup()
    out = c.tmp + "/t.zst"
    env = L.env_with(c, SIMCUDA_DEVICE_MEMORY=1024 * MIB, SIMCUDA_CONTEXT_OVERHEAD=100 * MIB)
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet"], [L.prog(c, "oom_shapes")], env=env)
    L.eq(rc, 0, "exit status (stderr: %s)" % stderr.strip())
    t = L.dump(c, out)
    L.eq([(o["api"], o["requested"]) for o in t.of("oom")],
         [("cudaMallocPitch", 2 * GIB), ("cudaMalloc3D", 2 * GIB), ("cuMemAllocPitch", 2 * GIB)],
         "OOM records: the requested sizes")
    failed = [(r["api"], r["size"]) for r in t.of("alloc") if "failed" in r["flags"]]
    L.eq(failed, [("cudaMallocPitch", 2 * GIB), ("cudaMalloc3D", 2 * GIB),
                  ("cuMemAllocPitch", 2 * GIB)], "failed allocation records: the requested sizes")
    levels = [l[2:] for l in stdout.splitlines() if l.startswith("L ")]
    L.eq(levels, ["push 0", "dpush 0", "push 1", "pop 1", "dpop 0", "pop 0"],
         "NVTX levels per domain")
    L.cleanup(c)
    L.finish("oom_shapes")


if __name__ == "__main__":
    main()
