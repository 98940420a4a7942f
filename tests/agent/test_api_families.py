#!/usr/bin/env python3
"""Every memory API family, runtime (progs/rt_apis.c) or driver (progs/drv_apis.c), under
`gpumemprof run`: each call the program made appears exactly once in the trace (a runtime call and
the driver call inside it count once), with the right kind, api, size, address (as the program
printed it), device, stream, flags and result; failed calls are flagged; every allocation is
freed by a matching FREE; pool operations appear as POOL records; END totals match.
Usage: test_api_families.py COMMON-OPTIONS runtime|driver"""
import sys

import agentlib as L

MIB = 1 << 20
OK = 0

# (type, api, kind, address label or int, size, device, stream, flags, result, handle label)
RUNTIME = [
    ("alloc", "cudaMalloc", "device", "d1", 1000, 0, 0, "0", OK, 0),
    ("alloc", "cudaMallocPitch", "device", "pitched", 1024 * 100, 0, 0, "0", OK, 0),
    ("alloc", "cudaMalloc3D", "device", "p3", 512 * 20 * 10, 0, 0, "0", OK, 0),
    ("alloc", "cudaMallocArray", "array", "arr", 4 * 1024 * 1024, 0, 0, "0", OK, 0),
    ("alloc", "cudaMalloc3DArray", "array", "arr3", 4 * 64 * 64 * 4, 0, 0, "0", OK, 0),
    ("alloc", "cudaMallocHost", "pinned-host", "pinned", MIB, -1, 0, "0", OK, 0),
    ("alloc", "cudaHostAlloc", "pinned-host", "halloc", 4096, -1, 0, "0", OK, 0),
    ("alloc", "cudaHostRegister", "registered-host", "reg", 8192, -1, 0, "0", OK, 0),
    # cudaErrorHostMemoryAlreadyRegistered
    ("alloc", "cudaHostRegister", "registered-host", 0, 8192, -1, 0, "failed", 712, 0),
    ("free", "cudaHostUnregister", "registered-host", "reg", 0, -1, 0, "0", OK, 0),
    ("alloc", "cudaMallocManaged", "managed", "managed", 64 * MIB, 0, 0, "0", OK, 0),
    ("alloc", "cudaMallocAsync", "async-pool", "a1", 3000, 0, 13, "async", OK, 0),
    ("alloc", "cudaMallocFromPoolAsync", "async-pool", "a2", 5000, 0, 13, "async", OK, "pool"),
    ("free", "cudaFreeAsync", "async-pool", "a1", 0, 0, 13, "async", OK, 0),
    ("free", "cudaFreeAsync", "async-pool", "a2", 0, 0, 13, "async", OK, 0),
    ("free", "cudaFree", "device", "managed", 0, 0, 0, "0", OK, 0),
    ("free", "cudaFreeHost", "pinned-host", "halloc", 0, -1, 0, "0", OK, 0),
    ("free", "cudaFreeHost", "pinned-host", "pinned", 0, -1, 0, "0", OK, 0),
    ("free", "cudaFreeArray", "array", "arr3", 0, 0, 0, "0", OK, 0),
    ("free", "cudaFreeArray", "array", "arr", 0, 0, 0, "0", OK, 0),
    ("free", "cudaFree", "device", "p3", 0, 0, 0, "0", OK, 0),
    ("free", "cudaFree", "device", "pitched", 0, 0, 0, "0", OK, 0),
    ("free", "cudaFree", "device", "d1", 0, 0, 0, "0", OK, 0),
    ("free", "cudaFree", "device", "d1", 0, 0, 0, "failed", 1, 0),  # double free
]
RUNTIME_POOL = [("create", "pool", 0), ("threshold", "pool", 4 * MIB), ("trim", "pool", MIB),
                ("destroy", "pool", 0)]

DRIVER = [
    ("alloc", "cuMemAlloc", "device", "d1", 4096, 0, 0, "0", OK, 0),
    ("alloc", "cuMemAllocPitch", "device", "pitched", 1024 * 10, 0, 0, "0", OK, 0),
    ("alloc", "cuMemAllocHost", "pinned-host", "host", 8192, -1, 0, "0", OK, 0),
    ("alloc", "cuMemHostAlloc", "pinned-host", "halloc", 12288, -1, 0, "0", OK, 0),
    ("alloc", "cuMemHostRegister", "registered-host", "reg", 16384, -1, 0, "0", OK, 0),
    ("free", "cuMemHostUnregister", "registered-host", "reg", 0, -1, 0, "0", OK, 0),
    # CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
    ("free", "cuMemHostUnregister", "registered-host", "reg", 0, -1, 0, "failed", 713, 0),
    ("alloc", "cuMemAllocManaged", "managed", "managed", 2 * MIB, 0, 0, "0", OK, 0),
    ("alloc", "cuMemAllocAsync", "async-pool", "a1", 3000, 0, 13, "async", OK, 0),
    ("alloc", "cuMemAllocFromPoolAsync", "async-pool", "a2", 6000, 0, 13, "async", OK, "pool"),
    ("free", "cuMemFreeAsync", "async-pool", "a1", 0, 0, 13, "async", OK, 0),
    ("free", "cuMemFreeAsync", "async-pool", "a2", 0, 0, 13, "async", OK, 0),
    ("alloc", "cuMemAddressReserve", "va-reserve", "va", 4 * MIB, 0, 0, "0", OK, 0),
    ("alloc", "cuMemCreate", "vmm-physical", 0, 2 * MIB, 0, 0, "0", OK, "h1"),
    ("alloc", "cuMemCreate", "vmm-physical", 0, 2 * MIB, 0, 0, "0", OK, "h2"),
    ("alloc", "cuMemMap", "vmm-mapping", "va", 2 * MIB, 0, 0, "0", OK, "h1"),
    ("alloc", "cuMemMap", "vmm-mapping", ("va", 2 * MIB), 2 * MIB, 0, 0, "0", OK, "h2"),
    # cuMemRelease of a mapped handle frees nothing (cuda.h: memory lives until every mapping is
    # unmapped); the unmap of both mappings frees both handles' physical memory, then the mapping
    ("free", "cuMemUnmap", "vmm-physical", 0, 2 * MIB, 0, 0, "0", OK, "h1"),
    ("free", "cuMemUnmap", "vmm-physical", 0, 2 * MIB, 0, 0, "0", OK, "h2"),
    ("free", "cuMemUnmap", "vmm-mapping", "va", 4 * MIB, 0, 0, "0", OK, 0),
    ("free", "cuMemAddressFree", "va-reserve", "va", 4 * MIB, 0, 0, "0", OK, 0),
    ("alloc", "cuArrayCreate", "array", "arr", 4 * 4 * 256 * 256, 0, 0, "0", OK, 0),
    ("alloc", "cuArray3DCreate", "array", "arr3", 2 * 2 * 32 * 16 * 8, 0, 0, "0", OK, 0),
    ("free", "cuArrayDestroy", "array", "arr3", 0, 0, 0, "0", OK, 0),
    ("free", "cuArrayDestroy", "array", "arr", 0, 0, 0, "0", OK, 0),
    ("free", "cuMemFree", "device", "managed", 0, 0, 0, "0", OK, 0),
    ("free", "cuMemFreeHost", "pinned-host", "halloc", 0, -1, 0, "0", OK, 0),
    ("free", "cuMemFreeHost", "pinned-host", "host", 0, -1, 0, "0", OK, 0),
    ("free", "cuMemFree", "device", "pitched", 0, 0, 0, "0", OK, 0),
    ("free", "cuMemFree", "device", "d1", 0, 0, 0, "0", OK, 0),
    # CUDA_ERROR_INVALID_VALUE for a 0-byte cuMemAlloc
    ("alloc", "cuMemAlloc", "device", 0, 0, 0, 0, "failed", 1, 0),
]
DRIVER_POOL = [("create", "pool", 0), ("threshold", "pool", 8 * MIB), ("trim", "pool", 0),
               ("destroy", "pool", 0)]


def value(v, vals):
    if isinstance(v, tuple):
        return vals[v[0]] + v[1]
    if isinstance(v, str):
        return vals[v]
    return v


def drop_failed_free_entries(mem):
    """A failed free is written as the FREE at the call's entry (before the memory is released:
    see gmp_cupti.c) and a FREE flagged failed at its exit, with the same correlation id. Returns
    the records with those entry records left out, and how many there were."""
    out, n = [], 0
    for i, r in enumerate(mem):
        nxt = mem[i + 1] if i + 1 < len(mem) else None
        if (r["type"] == "free" and r["flags"] != "failed" and nxt and nxt["type"] == "free" and
                nxt["flags"] == "failed" and nxt["correlation"] == r["correlation"] and
                nxt["tid"] == r["tid"]):
            n += 1
            continue
        out.append(r)
    return out, n


def check_matched(mem):
    """Every successful allocation is freed by a later FREE of the same address (or VMM handle);
    cuMemUnmap may cover several mappings."""
    live = {}
    for r in mem:
        if r["flags"] == "failed":
            continue
        kind = r["kind"]
        space = kind if kind in ("vmm-physical", "vmm-mapping", "va-reserve") else "mem"
        key = int(r["handle"], 16) if kind == "vmm-physical" else int(r["address"], 16)
        if r["type"] == "alloc":
            L.check((space, key) not in live, "%s at %#x allocated twice" % (r["api"], key))
            live[(space, key)] = r
        elif space == "vmm-mapping" and r["size"]:
            lo, hi = key, key + r["size"]
            hit = [k for k in live if k[0] == space and lo <= k[1] < hi]
            L.check(hit, "%s at %#x unmaps nothing" % (r["api"], key))
            for k in hit:
                del live[k]
        else:
            L.check((space, key) in live, "%s at %#x frees nothing" % (r["api"], key))
            live.pop((space, key), None)
    L.check(not live, "allocations never freed: %s" % sorted(
        "%s@%#x" % (v["api"], k[1]) for k, v in live.items()))


def main():
    c = L.setup()
    which = c.rest[0] if c.rest else "runtime"
    name, expected, pools = (("rt_apis", RUNTIME, RUNTIME_POOL) if which == "runtime" else
                             ("drv_apis", DRIVER, DRIVER_POOL))
    out = c.tmp + "/t.zst"
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet"], [L.prog(c, name)])
    L.eq(rc, 0, "%s exit status (stderr: %s)" % (name, stderr.strip()))
    L.check(stdout.endswith("%s: ok\n" % name), "%s stdout ends with ok" % name)
    vals = L.shown(stdout)
    t = L.dump(c, out)
    L.check(t.summary and t.summary["complete"], "trace complete: %s" % (t.summary or {}).get(
        "message"))
    pid = t.header["pid"]

    mem_all = t.mem()
    L.check(all(r["tid"] == pid for r in mem_all), "every API record is on the main thread")
    mem, entries = drop_failed_free_entries(mem_all)
    n_failed_free = sum(1 for e in expected if e[0] == "free" and e[7] == "failed")
    L.eq(entries, n_failed_free, "entry records of failed frees")
    L.eq(len(mem), len(expected), "number of ALLOC/FREE records (one per call)")
    for i, (r, e) in enumerate(zip(mem, expected)):
        typ, api, kind, addr, size, dev, stream, flags, result, handle = e
        want = {"type": typ, "api": api, "kind": kind, "address": "%#x" % value(addr, vals),
                "size": size, "device": dev, "stream": stream, "flags": flags, "result": result,
                "handle": "%#x" % value(handle, vals), "path": ""}
        got = {k: r[k] for k in want}
        L.eq(got, want, "record %d (%s)" % (i, api))
    # one record per user call and what it freed: correlation ids unique but for a cuMemUnmap's
    # physical frees (its own call's id); driver calls inside runtime calls unseen
    corr = [r["correlation"] for r in mem
            if not (r["api"] == "cuMemUnmap" and r["kind"] == "vmm-physical")]
    L.eq(len(set(corr)), len(corr), "distinct correlation ids")
    L.check(all(x > 0 for x in corr), "correlation ids set")
    check_matched(mem)

    got_pools = [(p["op"], p["pool"], p["value"]) for p in t.of("pool") if p["tid"] == pid]
    L.eq(got_pools, [(op, "%#x" % vals[h], v) for op, h, v in pools], "POOL records")

    e = t.end()
    L.check(e is not None, "END record present")
    if e:
        L.eq((e["allocs"], e["frees"], e["lost"]),
             (len(t.of("alloc")), len(t.of("free")), 0), "END totals")
    L.eq(t.of("lost"), [], "LOST records")
    devs = t.of("device")
    L.eq([d["ordinal"] for d in devs], [0], "DEVICE records")
    L.eq([n for n in t.of("notice") if n["severity"] == "error"], [], "error notices")
    L.cleanup(c)
    L.finish("api_" + which)


if __name__ == "__main__":
    main()
