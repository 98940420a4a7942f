#!/usr/bin/env python3
"""Where memory lives (docs/collectors.md, point 3; progs/locations.c, two simulated devices, device 0
current): cudaMallocAsync on a stream of device 1 and cudaMallocFromPoolAsync from a device-1 pool
are device 1's; a host pool's allocation is on device -1 (the report's Host), a managed pool's is
kind managed, a host-located cuMemCreate is device -1; device 0 records none of them (its peak is 0).
CUDA 13's default and current pools of the host, a host NUMA node and managed memory
(cu/cudaMemGetDefaultMemPool, cu/cudaMemGetMemPool, cuMemSetMemPool), and device 1's default pool
used on a stream of device 0, are booked where their memory is, pool sizes (POOL reserved records
from MEMORY2) included.
Parts the simulated driver refuses (host/managed pools, host VMM before the simulator models them)
are said SKIP by the program and here."""
import json

import agentlib as L

MIB = 1 << 20
# label -> (device, kind, size)
WANT = {
    "async1": (1, "async-pool", 4 * MIB),
    "pool1": (1, "async-pool", 6 * MIB),
    "hostpool": (-1, "async-pool", 8 * MIB),
    "managedpool": (None, "managed", 10 * MIB),
    "hostvmm": (-1, "vmm-physical", 2 * MIB),
    # CUDA 13's pools the driver makes (never created by the program): where their memory is
    "defhost": (-1, "async-pool", 12 * MIB),
    "defmanaged": (None, "managed", 14 * MIB),
    "curnuma": (-1, "async-pool", 16 * MIB),
    "setnuma": (-1, "async-pool", 22 * MIB),
    "dev1def": (1, "async-pool", 18 * MIB),
    "dev1cur": (1, "async-pool", 20 * MIB),
}
# parts the simulated CUDA 13 driver models: never skipped
MUST = ("defhost", "defmanaged", "curnuma", "setnuma", "dev1def", "dev1cur")


def main():
    c = L.setup()
    out = c.tmp + "/t.zst"
    env = L.env_with(c, SIMCUDA_DEVICE_COUNT=2)
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet"], [L.prog(c, "locations")], env=env)
    L.eq(rc, 0, "exit status (stderr: %s)" % stderr.strip())
    vals = L.shown(stdout)
    for line in stdout.splitlines():
        if line.startswith("SKIP "):
            print("SKIP: %s (the simulated driver refuses it: %s)" % tuple(line.split()[1:3]))
    t = L.dump(c, out)
    allocs = [r for r in t.mem() if r["type"] == "alloc"]
    for label in MUST:
        L.check(label in vals, "%s ran (not skipped)" % label)
    for label, (dev, kind, size) in WANT.items():
        if label not in vals:
            continue
        key = "handle" if kind == "vmm-physical" else "address"
        # an address can come back for a later part (the simulator reuses them): by size too
        got = [r for r in allocs if int(r[key], 16) == vals[label] and r["size"] == size]
        if not L.eq(len(got), 1, "%s recorded once" % label):
            continue
        r = got[0]
        L.eq((r["kind"], r["size"]), (kind, size), "%s: kind and size" % label)
        if dev is not None:
            L.eq(r["device"], dev, "%s: device" % label)
        else:
            L.check(r["device"] != 0 or kind == "managed", "%s: not device 0's" % label)
    # pool sizes (MEMORY2 memoryPoolConfig, MEMORY_POOL records): a host or managed pool's size
    # is never device 0's reserved memory (device 0 allocates nothing here)
    d0pools = [p for p in t.of("pool") if p["device"] == 0 and p["op"] == "reserved" and
               p["value"] > 0]
    L.eq(d0pools, [], "no pool size on device 0")
    hostpools = {p["value"] for p in t.of("pool") if p["device"] == -1 and p["op"] == "reserved"}
    for label in ("defhost", "curnuma", "setnuma"):
        size = WANT[label][2]
        L.check(size in hostpools, "%s: its pool's %d bytes reserved on the host" % (label, size))
    rc, rep, rerr = L.run([c.gmp, "report", out, "--format", "json"], c.env)
    L.eq(rc, 0, "report exit status (%s)" % rerr.strip())
    r = json.loads(rep)
    d0 = [d for d in r.get("devices", []) if d.get("id") == 0]
    L.check(not d0 or d0[0].get("peak_allocated_bytes", 0) == 0,
            "device 0 peak 0 (nothing of it allocated): %s" %
            (d0[0].get("peak_allocated_bytes") if d0 else None))
    L.cleanup(c)
    L.finish("locations")


if __name__ == "__main__":
    main()
