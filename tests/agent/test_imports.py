#!/usr/bin/env python3
"""Mipmapped and sparse arrays, multicast objects (docs/collectors.md, point 6) and memory this process
did not allocate (point 7), driver API (progs/imports.c). Checked from the trace:
 - mip: a mipmapped array is an array allocation of its levels' bytes (64x64 float4, 4 levels:
   16 x (4096 + 1024 + 256 + 64) = 87,040 B), freed by cuMipmappedArrayDestroy;
 - sparse: a sparse array holds no memory (size 0); a VMM handle mapped into it with
   cuMemMapArrayAsync and released while mapped is freed once, by the UNMAP;
 - mc: a multicast handle is never recorded (its memory is what is bound to it);
 - ipc, poolptr: an IPC-opened or pool-imported address is never recorded, nor its close/free;
 - shareable: an imported VMM handle is never recorded; the exported one is freed once.
No unknown or double frees, nothing leaked. Parts the simulated driver cannot do print SKIP
(it models mipmapped and sparse arrays, IPC, shareable handles and pool imports, not multicast)."""
import json

import agentlib as L

MIB = 1 << 20
MIP = 16 * sum((64 >> l) * (64 >> l) for l in range(4))


def main():
    c = L.setup()
    out = c.tmp + "/t.zst"
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet"], [L.prog(c, "imports")])
    L.eq(rc, 0, "exit status (stderr: %s)" % stderr.strip())
    vals = L.shown(stdout)
    done = {l.split()[1] for l in stdout.splitlines() if l.startswith("OK ")}
    for line in stdout.splitlines():
        if line.startswith("SKIP "):
            print("SKIP: %s" % line[5:])
    t = L.dump(c, out)
    mem = t.mem()

    def at(key, value, apis=None):
        """Records at an address or handle (of the given APIs: a value can come back later)."""
        return [(r["type"], r["api"], r["kind"], r["size"]) for r in mem
                if int(r[key], 16) == value and (apis is None or r["api"] in apis)]

    if "mip" in done:
        L.eq(at("address", vals["mip"], ("cuMipmappedArrayCreate", "cuMipmappedArrayDestroy")),
             [("alloc", "cuMipmappedArrayCreate", "array", MIP),
              ("free", "cuMipmappedArrayDestroy", "array", 0)], "mipmapped array records")
    if "sparse" in done:
        L.eq(at("address", vals["sparse"], ("cuArray3DCreate", "cuArrayDestroy")),
             [("alloc", "cuArray3DCreate", "array", 0), ("free", "cuArrayDestroy", "array", 0)],
             "sparse array: no memory")
        L.eq(at("handle", vals["sparseh"]),
             [("alloc", "cuMemCreate", "vmm-physical", 2 * MIB),
              ("free", "cuMemMapArrayAsync", "vmm-physical", 2 * MIB)],
             "a handle mapped into a sparse array is freed by the unmap")
    if "mc" in done:
        L.eq([r for r in mem if r["kind"] == "vmm-physical" and int(r["handle"], 16) == vals["mc"]],
             [], "multicast handle not recorded")
    if "ipc" in done:
        L.eq(at("address", vals["ipc"]), [], "IPC-opened memory not recorded")
    if "poolptr" in done:
        L.eq(at("address", vals["poolptr"]), [], "pool-imported pointer not recorded")
    if "shareable" in done:
        L.eq([r for r in mem if r["kind"] == "vmm-physical" and
              int(r["handle"], 16) == vals["imported"]], [], "imported handle not recorded")
        L.eq([x[:2] for x in at("handle", vals["exported"]) if x[2] == "vmm-physical"],
             [("alloc", "cuMemCreate"), ("free", "cuMemRelease")], "exported handle freed once")
    rc, rep, rerr = L.run([c.gmp, "report", out, "--format", "json"], c.env)
    L.eq(rc, 0, "report exit status (%s)" % rerr.strip())
    r = json.loads(rep)
    for d in r.get("devices", []):
        for k in ("unknown_frees", "double_frees", "leaked_bytes"):
            L.eq(d.get(k), 0, "device %s %s" % (d.get("id"), k))
    print("parts checked: %s" % (", ".join(sorted(done)) or "none (the simulator has none yet)"))
    L.cleanup(c)
    L.finish("imports")


if __name__ == "__main__":
    main()
