#!/usr/bin/env python3
"""Faults injected into a program profiled on the simulated CUDA device (docs/reliability.md).

  test_faults.py COMMON-OPTIONS SCENARIO [--seed N] [--runs N]

disk_full     `run` under RLIMIT_FSIZE 48 KiB (the agent's writer thread blocks SIGXFSZ, so its
              write fails with EFBIG): the program's exit status and stdout are those of a run
              without gpumemprof; the file is not larger than the limit and reads (dump exit 0) up
              to its last whole frame, a prefix of the program's allocations, marked incomplete;
              the agent's stderr line says writing failed and how many events were not written, and
              run's summary says the trace is incomplete.
sigkill       SIGKILL at --runs (20) random moments (seeded): every trace reads (never empty: the
              agent writes the header frame when it starts), is marked incomplete, belongs to the
              killed process, and its last event is at most one flush
              interval (50 ms, plus an allowance for the last write) before the kill; every FREE
              matches an earlier ALLOC.
term_signals  SIGTERM and SIGINT sent to the program (default action), and SIGTERM sent to `run`
              (forwarded): the program dies of the signal as it would have (same status), and the
              trace is complete: END present and its totals match what was read.
endings       exit(3), _exit(4), abort(), SIGSEGV, return 0, and a Python program (ctypes over the
              simulated libcudart) that ends with an uncaught exception: the exit status is the
              program's own, every trace reads and holds the allocations made before the end;
              exit, return and the exception give complete traces.
cupti_dropped GPUMEMPROF_ACTIVITY_BUFFER=1M with a tight allocation loop: CUPTI is refused buffers
              and drops activity records; the trace has LOST records with reason "dropped by CUPTI",
              END's lost total counts them, the callback-recorded allocations are all there, and
              the agent's stderr line and run's summary report the loss.
slow_writer   storage that cannot keep up (LD_PRELOAD shim: every write of the trace sleeps 300 ms)
              and GPUMEMPROF_BUFFER_SIZE=1M under a tight loop: the program ends normally, its
              VmHWM stays within 40 MiB of the same run without gpumemprof, events that found no
              buffer are LOST records (reason "buffers full"), recorded + lost = every event the
              program made, END is written and counts the loss, and stderr and run's summary report the loss."""
import os
import random
import resource
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rellib as L  # noqa: E402

FLUSH_MS = 50
ALLOWANCE_MS = 150  # the writer's last cycle: collect, compress, write (2 cores, sanitizers)


def disk_full(c):
    limit = 48 << 10
    n = 100000
    rc0, out0, err0 = L.run(L.prog(c, "loop", n, 64), L.env_with(c))
    L.eq(rc0, 0, "loop without gpumemprof")
    out = os.path.join(c.tmp, "full.zst")

    def fsize():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    rc, so, se = L.run([c.gmp, "run", "-o", out, "--flush-interval", str(FLUSH_MS), "--"] +
                       L.prog(c, "loop", n, 64), L.env_with(c, preload=True), preexec_fn=fsize)
    L.eq(rc, 0, "exit status under a full disk")
    L.eq(so, out0, "the program's output under a full disk")
    size = os.path.getsize(out)
    L.check(0 < size <= limit, "trace size %d within the %d limit" % (size, limit))
    lines = L.agent_lines(se)
    inc = [l for l in lines if "is incomplete: writing failed" in l]
    if L.check(len(inc) == 1, "one agent line says writing failed: %r" % lines):
        L.check("File too large" in inc[0], "it names the error: %r" % inc[0])
        words = inc[0].split()
        k = words.index("events") if "events" in words else -1
        L.check(k > 0 and int(words[k - 1]) > 0, "it counts the events not written: %r" % inc[0])
    t = L.dump(c, out)
    if t.summary:
        L.eq((t.summary["complete"], t.summary["has_end"]), (False, False), "marked incomplete")
        L.check(t.summary["bytes_discarded"] < size, "read up to its last whole frame")
        allocs = len(t.of("alloc"))
        L.check(0 < allocs < n, "a prefix of the allocations is there (%d of %d)" % (allocs, n))
        print("disk_full: %d bytes, %d allocations kept, %d bytes of a cut frame discarded; "
              "agent: %s" % (size, allocs, t.summary["bytes_discarded"], inc[0] if inc else "-"))
    summ = [l for l in se.splitlines() if l.startswith("  incomplete")]
    L.check(summ, "run's summary says the trace is incomplete:\n" + se)


def sigkill(c):
    rnd = random.Random(c.args.seed)
    gaps = []
    for i in range(c.args.runs):
        delay = rnd.uniform(0.0, 0.6)
        out = os.path.join(c.tmp, "kill%d.zst" % i)
        p = L.Proc(L.prog(c, "ready", 100), L.direct_env(
            c, out, GPUMEMPROF_FLUSH_INTERVAL_MS=FLUSH_MS, GPUMEMPROF_QUIET=1), out + ".err")
        line = p.line_starting("ready ")
        if not L.check(line, "run %d: the program started" % i):
            p.kill_all()
            p.wait()
            continue
        ready_wall = time.time_ns()
        pid = int(line.split()[1])
        time.sleep(delay)
        kill_wall = time.time_ns()
        os.kill(pid, signal.SIGKILL)
        rc, _, _ = p.wait()
        L.eq(rc, -signal.SIGKILL, "run %d: killed" % i)
        waited = (kill_wall - ready_wall) / 1e6
        # the header frame is written when the agent starts, before the program goes on: a trace
        # that exists is never empty
        L.check(os.path.getsize(out) > 0, "run %d: empty trace (killed %.1f ms after start)"
                % (i, waited))
        t = L.dump(c, out)
        if not t.summary:
            continue
        L.eq((t.summary["complete"], t.summary["has_end"]), (False, False),
             "run %d: marked incomplete" % i)
        L.eq(t.header["pid"], pid, "run %d: the killed process's trace" % i)
        events = [r for r in t.recs if "t" in r]
        if not events:
            L.check(waited <= FLUSH_MS + ALLOWANCE_MS,
                    "run %d: no events although killed %.1f ms after the first" % (i, waited))
            continue
        gap = (kill_wall - t.wall(max(r["t"] for r in events))) / 1e6
        gaps.append(gap)
        L.check(-5 <= gap <= FLUSH_MS + ALLOWANCE_MS,
                "run %d: last event %.1f ms before the kill (flush interval %d ms)" % (
                    i, gap, FLUSH_MS))
        live = set()
        for r in t.mem():
            if r["type"] == "alloc":
                live.add(r["address"])
            else:
                L.check(r["address"] in live, "run %d: free of %s matched" % (i, r["address"]))
                live.discard(r["address"])
    if gaps:
        print("sigkill: %d runs, loss window (ms) min %.1f max %.1f mean %.1f" % (
            len(gaps), min(gaps), max(gaps), sum(gaps) / len(gaps)))


def complete_trace(c, out, what):
    t = L.dump(c, out)
    if t.summary:
        L.eq((t.summary["complete"], t.summary["has_end"]), (True, True),
             "%s: complete trace (%s)" % (what, t.summary["message"]))
    return t


def term_signals(c):
    for sig in (signal.SIGTERM, signal.SIGINT):
        out = os.path.join(c.tmp, "sig%d.zst" % sig)
        p = L.Proc(L.prog(c, "ready", 100), L.direct_env(c, out, GPUMEMPROF_QUIET=1),
                   out + ".err")
        line = p.line_starting("ready ")
        if not L.check(line, "signal %d: program started" % sig):
            p.kill_all()
            p.wait()
            continue
        time.sleep(0.3)
        os.kill(int(line.split()[1]), sig)
        rc, _, err = p.wait()
        L.eq(rc, -sig, "signal %d: the program died of it" % sig)
        t = complete_trace(c, out, "signal %d" % sig)
        L.check(len(t.of("alloc")) > 10, "signal %d: the allocations are there" % sig)
    # through run, which forwards the signal
    out = os.path.join(c.tmp, "run-term.zst")
    p = L.Proc([c.gmp, "run", "-q", "-o", out, "--"] + L.prog(c, "ready", 100),
               L.env_with(c, preload=True), out + ".err")
    if L.check(p.line_starting("ready "), "run: program started"):
        time.sleep(0.3)
        os.kill(p.p.pid, signal.SIGTERM)
    rc, _, err = p.wait()
    L.eq(rc, 128 + signal.SIGTERM, "run: exit status 128+SIGTERM")
    complete_trace(c, out, "SIGTERM through run")


def endings(c):
    want = {"exit": (3, True), "_exit": (4, False), "abort": (-signal.SIGABRT, False),
            "segv": (-signal.SIGSEGV, False), "return": (0, True)}
    for how, (status, complete) in want.items():
        out = os.path.join(c.tmp, "end-%s.zst" % how.replace("_", "u"))
        # sanitizers must let the crash signal through as it is
        env = L.direct_env(c, out, GPUMEMPROF_FLUSH_INTERVAL_MS=FLUSH_MS, GPUMEMPROF_QUIET=1,
                           ASAN_OPTIONS="handle_segv=0:handle_abort=0:detect_leaks=0")
        rc, so, se = L.run(L.prog(c, "end", how), env)
        L.eq(rc, status, "%s: exit status" % how)
        L.check("ending " + how in so, "%s: the program ran to its end" % how)
        t = L.dump(c, out)
        if t.summary:
            L.eq(t.summary["complete"], complete, "%s: complete (%s)" % (how, t.summary["message"]))
            L.eq((len(t.of("alloc")), len(t.of("free"))), (3, 1), "%s: allocations and frees" % how)
    # an uncaught exception in a Python program that uses the (simulated) CUDA runtime
    out = os.path.join(c.tmp, "end-exception.zst")
    script = ("import ctypes, time\n"
              "rt = ctypes.CDLL('libcudart.so.13')\n"
              "p = ctypes.c_void_p()\n"
              "assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0\n"
              "print('allocated', flush=True)\n"
              "raise RuntimeError('uncaught on purpose')\n")
    rc, so, se = L.run([sys.executable, "-c", script],
                       L.direct_env(c, out, preload=True, GPUMEMPROF_QUIET=1,
                                    GPUMEMPROF_CUPTI=os.path.join(c.args.simcuda,
                                                                  "libcupti.so.13")))
    L.eq(rc, 1, "exception: Python's exit status")
    L.check("RuntimeError: uncaught on purpose" in se, "exception: traceback printed")
    t = complete_trace(c, out, "uncaught exception")
    L.eq(len(t.of("alloc")), 1, "exception: the allocation is there")


def cupti_dropped(c):
    n = 30000
    out = os.path.join(c.tmp, "dropped.zst")
    env = L.env_with(c, preload=True, GPUMEMPROF_ACTIVITY_BUFFER="1M")
    rc, so, se = L.run([c.gmp, "run", "-o", out, "--"] + L.prog(c, "loop", n, 64), env)
    L.eq(rc, 0, "exit status")
    t = L.dump(c, out)
    dropped = t.lost("dropped by CUPTI")
    L.check(dropped > 0, "LOST records with reason 'dropped by CUPTI' (%d)" % dropped)
    L.eq(t.lost(), dropped, "no other loss")
    end = t.of("end")
    if L.check(end, "END present"):
        L.eq(end[0]["lost"], dropped, "END counts the dropped records")
    L.eq(len([r for r in t.mem() if r["type"] == "alloc"]), n, "every callback allocation kept")
    L.check(any("%d events lost" % dropped in l for l in L.agent_lines(se)),
            "the agent says how many were lost:\n" + se)
    L.check("  lost events: %d" % dropped in se, "run's summary reports the loss:\n" + se)
    print("cupti_dropped: %d activity records dropped by CUPTI, all counted" % dropped)
    # the bound is validated
    rc, so, se = L.run(L.prog(c, "loop", 10, 64), L.direct_env(
        c, os.path.join(c.tmp, "bad.zst"), GPUMEMPROF_ACTIVITY_BUFFER="0"))
    L.eq(rc, 0, "a bad GPUMEMPROF_ACTIVITY_BUFFER: the program runs on")
    L.eq(L.agent_lines(se), ["gpumemprof: not profiling: GPUMEMPROF_ACTIVITY_BUFFER=0: expected a "
                             "number from 1048576 to 1073741824"], "one line says why")


def hwm(stderr):
    for l in stderr.splitlines():
        if l.startswith("rel_prog: VmHWM"):
            return int(l.split()[2])
    return None


def slow_writer(c):
    n = 150000
    shim = os.path.join(c.progs, "librel_slow_write.so")
    # the same sanitizer runtime on both sides
    base_env = L.env_with(c, preload=True)
    if c.preload:  # ASan keeps freed blocks in a quarantine: not memory the agent holds
        base_env["ASAN_OPTIONS"] = "detect_leaks=0:quarantine_size_mb=0"
    rc0, out0, err0 = L.run(L.prog(c, "loop", n, 64), base_env)
    L.eq(rc0, 0, "loop without gpumemprof")
    out = os.path.join(c.tmp, "slow.zst")
    pre = ((c.preload + " ") if c.preload else "") + shim
    env = L.env_with(c, preload=True, LD_PRELOAD=pre, REL_SLOW_WRITE_MS=300,
                     GPUMEMPROF_ACTIVITY_BUFFER="1M")
    if c.preload:
        env["ASAN_OPTIONS"] = "detect_leaks=0:quarantine_size_mb=0"
    rc, so, se = L.run([c.gmp, "run", "-o", out, "--buffer-size", "1M", "--sample-interval", "0",
                        "--"] + L.prog(c, "loop", n, 64), env, timeout=300)
    L.eq(rc, 0, "exit status with a slow writer")
    L.eq(so, out0, "the program's output with a slow writer")
    h0, h1 = hwm(err0), hwm(se)
    if L.check(h0 and h1, "VmHWM reported"):
        L.check(h1 - h0 <= 40 << 10, "memory bounded: VmHWM %d kB with gpumemprof, %d kB without"
                % (h1, h0))
    t = L.dump(c, out)
    full = t.lost("buffers full")
    L.check(full > 0, "events lost for want of a buffer are LOST records (%d)" % full)
    end = t.of("end")
    if L.check(end, "END present (the trace was finished)"):
        L.eq(end[0]["lost"], t.lost(), "END counts every lost event")
    mem = len(t.of("alloc", "free"))
    L.check(2 * n <= mem + full <= 2 * n + 20,
            "recorded %d + lost %d = every event (%d allocations and frees, and a few others)"
            % (mem, full, 2 * n))
    L.check(any("events lost" in l for l in L.agent_lines(se)), "the agent reports the loss")
    L.check("  lost events: %d" % t.lost() in se, "run's summary reports the loss:\n" + se)
    print("slow_writer: VmHWM %s kB (without gpumemprof %s kB); %d events recorded, %d lost "
          "(buffers full)" % (h1, h0, mem, full))


def main():
    c = L.setup(lambda ap: (ap.add_argument("--seed", type=int, default=8008),
                            ap.add_argument("--runs", type=int, default=20)))
    {"disk_full": disk_full, "sigkill": sigkill, "term_signals": term_signals,
     "endings": endings, "cupti_dropped": cupti_dropped,
     "slow_writer": slow_writer}[c.args.scenario](c)
    L.finish(c, c.args.scenario)


if __name__ == "__main__":
    main()
