#!/usr/bin/env python3
"""Nested NVTX ranges and domains (progs/nvtx_ranges.c): every allocation carries the range path of
its own thread at the time of the call (train/step/forward, a domain range with a registered
string, a start/end range that is not part of the stack, a second thread with its own stack);
ranges appear as RANGE definitions (with their domain) and push/pop/start/end events. Then a flood
of names (`nvtx_ranges flood`: torch.autograd.profiler.emit_nvtx()'s name per operator call, then
more distinct names than a trace keeps): the trace keeps the operator's name, a bounded number of
ranges, and one notice, which run's summary shows."""
import agentlib as L

# label -> (path, thread: "main" or "worker", size)
EXPECTED = {
    "none": ("", "main", 256),
    "forward": ("train/step/forward", "main", 1 << 20),
    "backward": ("train/step/backward", "main", 2 << 20),
    "step": ("train/step", "main", 3 << 20),
    "cache": ("train/step/kernel_cache", "main", 4 << 20),
    "started": ("train/step", "main", 5 << 20),  # a start/end range is not on the stack
    "loader": ("loader", "worker", 4096),  # the worker's stack starts empty
    "after": ("", "main", 6 << 20),
}


def main():
    c = L.setup()
    out = c.tmp + "/t.zst"
    rc, stdout, stderr = L.gmp_run(c, ["-o", out, "--quiet"], [L.prog(c, "nvtx_ranges")])
    L.eq(rc, 0, "exit status (stderr: %s)" % stderr.strip())
    vals = L.shown(stdout)
    t = L.dump(c, out)
    L.check(t.summary and t.summary["complete"], "trace complete")
    pid = t.header["pid"]
    allocs = {int(r["address"], 16): r for r in t.of("alloc")}
    L.eq(len(allocs), len(EXPECTED), "allocations")
    for label, (path, thread, size) in EXPECTED.items():
        r = allocs.get(vals.get(label, -1))
        if not L.check(r is not None, "allocation %s in the trace" % label):
            continue
        L.eq(r["path"], path, "range path of %s" % label)
        L.eq(r["size"], size, "size of %s" % label)
        L.eq(r["tid"] == pid, thread == "main", "thread of %s is %s" % (label, thread))
        L.eq(r["range"] != 0, path != "", "range id of %s" % label)
    # frees come after every pop of their thread: no path
    L.eq(sorted(set(r["path"] for r in t.of("free"))), [""], "paths of the frees")

    ranges = {r["path"]: r for r in t.of("range")}
    L.eq(sorted(ranges), sorted(["train", "train/step", "train/step/forward",
                                 "train/step/backward", "train/step/kernel_cache",
                                 "not-a-stack-range", "loader"]), "RANGE definitions")
    L.eq(ranges.get("train/step/kernel_cache", {}).get("domain"), "mylib",
         "domain of the registered-string range")
    L.eq(ranges.get("train/step/forward", {}).get("domain"), "", "default domain")
    main_ev = [(r["type"], r.get("path")) for r in t.recs
               if r["type"].startswith("range_") and r["tid"] == pid]
    L.eq(main_ev, [("range_push", "train"), ("range_push", "train/step"),
                   ("range_push", "train/step/forward"), ("range_pop", "train/step/forward"),
                   ("range_push", "train/step/backward"), ("range_pop", "train/step/backward"),
                   ("range_push", "train/step/kernel_cache"),
                   ("range_pop", "train/step/kernel_cache"),
                   ("range_start", "not-a-stack-range"), ("range_end", None),
                   ("range_pop", "train/step"), ("range_pop", "train")],
         "range events of the main thread")
    worker = [(r["type"], r.get("path")) for r in t.recs
              if r["type"].startswith("range_") and r["tid"] != pid]
    L.eq(worker, [("range_push", "loader"), ("range_pop", "loader")], "worker's range events")
    flood(c)
    L.cleanup(c)


def flood(c):
    n = 50000
    out = c.tmp + "/flood.zst"
    rc, stdout, stderr = L.gmp_run(c, ["-o", out], [L.prog(c, "nvtx_ranges"), "flood", str(n)],
                                   timeout=300)
    L.eq(rc, 0, "flood: exit status (stderr: %s)" % stderr.strip())
    vals = L.shown(stdout)
    t = L.dump(c, out)
    allocs = {int(r["address"], 16): r for r in t.of("alloc")}
    L.eq(allocs.get(vals.get("op", -1), {}).get("path"), "aten::mm",
         "flood: an emit_nvtx range is its operator's")
    L.eq(allocs.get(vals.get("user", -1), {}).get("path"), "user #",
         "flood: a name past the cap has its digits folded")
    ranges = t.of("range")
    L.check(len(ranges) <= 16384 + 8, "flood: %d RANGE definitions, at most 16392" % len(ranges))
    want = ("NVTX range names bounded: %d names in PyTorch's emit_nvtx form" % n)
    notes = [x for x in t.of("notice") if x["message"].startswith("NVTX range names bounded")]
    L.eq(len(notes), 1, "flood: one notice")
    L.check(notes and notes[0]["message"].startswith(want) and
            "past 16384 distinct names, %d ranges with a new name" % (20000 - (16384 - 1)) in notes[0]["message"],
            "flood: the notice counts (%s)" % (notes[0]["message"] if notes else None))
    L.eq(stderr.count("NVTX range names bounded"), 1, "flood: run's summary shows it once")
    L.finish("nvtx")


if __name__ == "__main__":
    main()
