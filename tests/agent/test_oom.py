#!/usr/bin/env python3
"""Out of memory (progs/oom.c) on a 1 GiB simulated device with 100 MiB context overhead: the
failed cudaMalloc (768 MiB) and cuMemAlloc (1 GiB) are ALLOC records flagged failed with the
requested size and the error, each followed by an OOM record with the requested size; the report
lists both OOMs with what was live (512 MiB); a device memory SAMPLE reads capacity - overhead.
Then the same program killed right after its OOMs, with a 60 s flush interval: the OOM records
are in the file already (an OOM forces a flush)."""
import json
import os
import signal

import agentlib as L

MIB = 1 << 20
DEV_ENV = {"SIMCUDA_DEVICE_MEMORY": 1024 * MIB, "SIMCUDA_CONTEXT_OVERHEAD": 100 * MIB}


def check_ooms(t, vals, what):
    allocs = t.of("alloc")
    want = [("0", "cudaMalloc", "%#x" % vals["a"], 512 * MIB, 0),
            ("failed", "cudaMalloc", "0x0", 768 * MIB, 2),  # cudaErrorMemoryAllocation
            ("failed", "cuMemAlloc", "0x0", 1024 * MIB, 2)]  # CUDA_ERROR_OUT_OF_MEMORY
    L.eq([(a["flags"], a["api"], a["address"], a["size"], a["result"]) for a in allocs], want,
         what + ": ALLOC records")
    ooms = t.of("oom")
    L.eq([(o["api"], o["requested"], o["device"], o["result"]) for o in ooms],
         [("cudaMalloc", 768 * MIB, 0, 2), ("cuMemAlloc", 1024 * MIB, 0, 2)], what + ": OOM records")
    # each OOM right after its failed ALLOC on the same thread
    seq = [r for r in t.recs if r["type"] in ("alloc", "oom")]
    L.eq([r["type"] for r in seq], ["alloc", "alloc", "oom", "alloc", "oom"], what + ": order")


def main():
    c = L.setup()
    env = L.env_with(c, **DEV_ENV)
    out = c.tmp + "/t.zst"
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--sample-interval", "5"],
                                   [L.prog(c, "oom")], env=env)
    L.eq(rc, 0, "exit status (%s)" % stderr.strip())
    vals = L.shown(stdout)
    t = L.dump(c, out)
    L.check(t.summary["complete"], "complete")
    check_ooms(t, vals, "run")
    L.check("out of memory: 2 times" in stderr, "run's summary counts the OOMs:\n" + stderr)
    samples = t.of("sample")
    L.check(samples, "SAMPLE records")
    # the last sample is taken at exit, after every free: capacity - context overhead
    if samples:
        s = samples[-1]
        L.eq((s["device"], s["free"], s["total"]), (0, 924 * MIB, 1024 * MIB), "last SAMPLE")
    rc, rep, rerr = L.run([c.gmp, "report", out, "--format", "json"], c.env)
    L.eq(rc, 0, "report exit status (%s)" % rerr.strip())
    r = json.loads(rep)
    L.eq([(o["device"], o["api"], o["requested_bytes"], o["live_bytes"]) for o in r["ooms"]],
         [(0, "cudaMalloc", 768 * MIB, 512 * MIB), (0, "cuMemAlloc", 1024 * MIB, 512 * MIB)],
         "report's OOMs")
    d = r["devices"][0]
    L.eq((d["peak_allocated_bytes"], d["failed_allocations"], d["ooms"], d["allocations"]),
         (512 * MIB, 2, 2, 1), "report's device 0")

    # killed after the OOMs, with a flush interval far longer than the test: the OOM forced it
    out2 = c.tmp + "/killed.zst"
    p = L.Proc([c.gmp, "run", "-q", "-o", out2, "--flush-interval", "60000", "--",
                L.prog(c, "oom"), "wait"], env, c.tmp + "/killed.err")
    line = p.line_starting("oom ")
    if L.check(line, "program reached its OOMs: %r" % p.lines):
        pid = int(line.split()[1])

        def has_ooms():
            t2 = L.dump(c, out2, must=False)
            return t2 if t2 and len(t2.of("oom")) == 2 else None

        t2 = L.wait_for(has_ooms, 10, "the OOM records in the file of a running program")
        os.kill(pid, signal.SIGKILL)
        rc, _, err = p.wait()
        L.eq(rc, 128 + 9, "run's exit status after SIGKILL of the program")
        if t2:
            check_ooms(t2, L.shown("\n".join(p.lines)), "killed")
    else:
        p.kill_all()
        p.wait()
    L.cleanup(c)
    L.finish("oom")


if __name__ == "__main__":
    main()
