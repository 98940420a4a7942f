#!/usr/bin/env python3
"""The gpumemprof agent under the simulator's failure modes (README "Failure modes").

Each case runs a simcuda program under `gpumemprof run` with one switch set and checks that the
agent survives: the program's exit status and stdout are those of a run without the agent, the
trace reads back (`gpumemprof dump --json`), and the agent records what the switch leaves it able
to record (compared with a run without the switch):
  late_runtime   SIMCUDA_LATE_INJECTION=1, first call cudaMalloc (first_alloc.c): its exit only,
                 with junk correlationData; every allocation and free recorded as without the
                 switch, the first one exactly once, under cudaMalloc (not cuMemAlloc, the driver
                 call inside it whose enter and exit the agent sees), at the same address
  late_driver    SIMCUDA_LATE_INJECTION=1, driver-only program (vmm.c): cuInit's exit only
  late_kinds     SIMCUDA_LATE_INJECTION=1, alloc_kinds.c (first call cudaMemGetInfo)
  late_threads   SIMCUDA_LATE_INJECTION=1, mt.cu (nvcc): 8 threads race the first call, so each
                 thread's first call may be an exit without enter (at most 8 records missing)
  fail_callback  SIMCUDA_CUPTI_FAIL=enable_callback: every API record complete (through another
                 way of subscribing), or the loss declared: a notice in the trace and an error on
                 stderr under `run -q`
  fail_domain    SIMCUDA_CUPTI_FAIL=enable_domain: the same
  fail_activity  SIMCUDA_CUPTI_FAIL=activity,activity_callbacks: callbacks only, all API records
  fail_subscribe SIMCUDA_CUPTI_FAIL=subscribe: nothing recorded, the program unaffected
  old_cupti      SIMCUDA_CUPTI_VERSION=22 (CUPTI of CUDA 12.4): API records complete
  ancient_cupti  SIMCUDA_CUPTI_VERSION=18 (CUDA 11.8): API records complete
  future_cupti   SIMCUDA_CUPTI_VERSION=140001: API records complete
  per_thread_stream  no switch: ptds_prog.c built with CUDA_API_PER_THREAD_DEFAULT_STREAM (its
                 calls are the _ptsz/_ptds entry points) records what its legacy-stream build
                 records (the baseline), names compared without the _ptsz/_ptds suffix; its
                 default-stream allocation is on the per-thread stream, as the
                 cudaStreamPerThread one
For "late" cases records are compared by (type, size): the first call, whose enter the agent never
saw, may be missing or recorded under the driver call inside it.
--known-defect TEXT: the case is expected to fail because of the agent defect TEXT; it then exits
77 (ctest: skipped, with TEXT), and fails if the case passes (the defect is fixed: drop the flag).
Usage: test_failure_modes.py --gpumemprof BIN --simdir DIR --progdir DIR --tmp DIR
                             [--preload LIB] [--known-defect TEXT] CASE
"""
import argparse
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

CASES = {
    # case: (program, env, API records expected complete?)
    "late_runtime": ("simcuda_first_alloc", {"SIMCUDA_LATE_INJECTION": "1"}, "late_exact"),
    "late_driver": ("simcuda_vmm", {"SIMCUDA_LATE_INJECTION": "1"}, "late"),
    "late_kinds": ("simcuda_alloc_kinds", {"SIMCUDA_LATE_INJECTION": "1"}, "late"),
    "late_threads": ("simcuda_mt_cu", {"SIMCUDA_LATE_INJECTION": "1"}, "late8"),
    "fail_callback": ("simcuda_alloc_kinds", {"SIMCUDA_CUPTI_FAIL": "enable_callback"},
                      "complete_or_declared"),
    "fail_domain": ("simcuda_alloc_kinds", {"SIMCUDA_CUPTI_FAIL": "enable_domain"},
                    "complete_or_declared"),
    "fail_activity": ("simcuda_alloc_kinds",
                      {"SIMCUDA_CUPTI_FAIL": "activity,activity_callbacks"}, "complete"),
    "fail_subscribe": ("simcuda_alloc_kinds", {"SIMCUDA_CUPTI_FAIL": "subscribe"}, "any"),
    "old_cupti": ("simcuda_pools", {"SIMCUDA_CUPTI_VERSION": "22"}, "complete"),
    "ancient_cupti": ("simcuda_pools", {"SIMCUDA_CUPTI_VERSION": "18"}, "complete"),
    "future_cupti": ("simcuda_pools", {"SIMCUDA_CUPTI_VERSION": "140001"}, "complete"),
    "per_thread_stream": ("simcuda_ptds_prog", {}, "complete_unsuffixed"),
}

FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL: " + msg, flush=True)
    return cond


def run(cmd, env, timeout=60):
    return gmp_testlib.outputs(cmd, env, timeout=timeout)


def read_trace(gmp, env, trace):
    """(Counter of (type, api, size) of the API alloc/free records, number of notices)"""
    rc, out, err = run([gmp, "dump", "--json", trace], env)
    if not check(rc == 0, "dump %s exited %d: %s" % (trace, rc, err.strip()[-500:])):
        return None, 0
    recs = [json.loads(l) for l in out.splitlines() if l.strip()]
    mem = [r for r in recs if r.get("type") in ("alloc", "free")
           and "activity" not in r.get("flags", "").split("|")]
    notices = sum(1 for r in recs if r.get("type") == "notice")
    return collections.Counter((r["type"], r["api"], r.get("size", 0)) for r in mem), notices


def streams_by_size(gmp, env, trace):
    """{size: stream} of the trace's API allocations"""
    rc, out, _ = run([gmp, "dump", "--json", trace], env)
    recs = [json.loads(l) for l in out.splitlines() if l.strip()] if rc == 0 else []
    return {r["size"]: r.get("stream") for r in recs if r.get("type") == "alloc"
            and "activity" not in r.get("flags", "").split("|")}


def dump_mem(gmp, env, trace):
    rc, out, _ = run([gmp, "dump", "--json", trace], env)
    recs = [json.loads(l) for l in out.splitlines() if l.strip()] if rc == 0 else []
    return [r for r in recs if r.get("type") in ("alloc", "free")
            and "activity" not in r.get("flags", "").split("|")]


def alloc_addresses(gmp, env, trace):
    """{size: [address, ...]} of the trace's API allocations"""
    out = collections.defaultdict(list)
    for r in dump_mem(gmp, env, trace):
        if r["type"] == "alloc":
            out[r.get("size", 0)].append(r.get("address"))
    return out


def frees_by_address(gmp, env, trace):
    """addresses of the trace's API frees"""
    return [r.get("address") for r in dump_mem(gmp, env, trace) if r["type"] == "free"]


def by_size(c):
    out = collections.Counter()
    for (t, _, size), n in c.items():
        out[(t, size)] += n
    return out


def main():
    ap = argparse.ArgumentParser()
    for a in ("gpumemprof", "simdir", "progdir", "tmp"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--preload", default="")
    ap.add_argument("--known-defect", default="")
    ap.add_argument("case", choices=sorted(CASES))
    a = ap.parse_args()
    prog_name, switch, expect = CASES[a.case]
    prog = os.path.join(a.progdir, prog_name)
    os.makedirs(a.tmp, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=a.case + "-", dir=a.tmp)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SIMCUDA_", "GPUMEMPROF_", "SIMTEST_"))
           and k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD")}
    env["LD_LIBRARY_PATH"] = a.simdir
    env["LC_ALL"] = "C"
    if a.preload:
        env["LD_PRELOAD"] = a.preload
        env["ASAN_OPTIONS"] = "detect_leaks=0"

    # the program alone, then under the agent without and with the switch
    rc0, out0, err0 = run([prog], env)
    check(rc0 == 0, "%s alone exited %d: %s" % (prog_name, rc0, err0.strip()))
    base_trace = os.path.join(tmp, "base.trace")
    base_prog = prog
    if expect == "complete_unsuffixed":  # the baseline is the legacy-stream build
        base_prog = os.path.join(a.progdir, "simcuda_ptds_legacy")
        rc0, out0, err0 = run([base_prog], env)
    rc1, out1, err1 = run([a.gpumemprof, "run", "-q", "-o", base_trace, "--", base_prog], env)
    check(rc1 == rc0 and out1 == out0, "baseline under the agent: exit %d, stdout %r" % (rc1, out1))
    base, _ = read_trace(a.gpumemprof, env, base_trace)

    senv = dict(env, **switch)
    trace = os.path.join(tmp, "switch.trace")
    rc, out, err = run([a.gpumemprof, "run", "-q", "-o", trace, "--", prog], senv)
    print("%s %s: exit %d, stderr: %s" % (a.case, switch, rc, err.strip()[-800:]))
    check(rc == rc0, "exit status %d under %s, %d without the agent" % (rc, switch, rc0))
    check(out == out0, "stdout under %s: %r, without the agent %r" % (switch, out, out0))
    notices = 0
    if os.path.exists(trace):
        got, notices = read_trace(a.gpumemprof, senv, trace)
    else:
        got = None
        check(expect == "any", "no trace written under %s" % switch)
    if got is not None and base is not None:
        print("baseline records: %s" % sorted(base.items()))
        print("records under the switch: %s" % sorted(got.items()))
        if expect == "complete_unsuffixed":
            strip = collections.Counter()
            for (t, api, size), n in got.items():
                strip[(t, api.replace("_ptsz", "").replace("_ptds", ""), size)] += n
            check(strip == base, "API records differ from the legacy-stream build: missing %s, "
                  "extra %s" % (sorted((base - strip).items()), sorted((strip - base).items())))
            st = streams_by_size(a.gpumemprof, senv, trace)
            bst = streams_by_size(a.gpumemprof, env, base_trace)
            # ptds_prog.c: 3000 bytes on stream 0, 1 MiB on cudaStreamPerThread
            check(st.get(3000) is not None and st.get(3000) == st.get(1 << 20),
                  "per-thread build: stream 0 recorded as %r, cudaStreamPerThread as %r"
                  % (st.get(3000), st.get(1 << 20)))
            check(bst.get(3000) != bst.get(1 << 20),
                  "legacy build: stream 0 and cudaStreamPerThread both recorded as %r"
                  % bst.get(3000))
        elif expect == "complete":
            check(got == base, "API records differ from the baseline: missing %s, extra %s"
                  % (sorted((base - got).items()), sorted((got - base).items())))
        elif expect == "complete_or_declared":
            if got != base:
                check(notices > 0 and err.strip() != "",
                      "API records missing (%s) and not declared: %d notices in the trace, "
                      "stderr under run -q %r" % (sorted((base - got).items())[:6], notices,
                                                  err.strip()))
        elif expect == "late_exact":
            # first_alloc.c: cudaMalloc(1 MiB) is the first call (its enter unseen), then
            # cudaMalloc(2 MiB), cuMemAlloc(3 MiB) through an entry point, frees
            check(got == base, "API records differ from the baseline: missing %s, extra %s"
                  % (sorted((base - got).items()), sorted((got - base).items())))
            first = [(k, n) for k, n in got.items() if k[0] == "alloc" and k[2] == 1 << 20]
            check(first == [(("alloc", "cudaMalloc", 1 << 20), 1)],
                  "the first allocation (cudaMalloc of 1 MiB) recorded as %s" % first)
            addrs = alloc_addresses(a.gpumemprof, senv, trace)
            check(len(addrs.get(1 << 20, [])) == 1 and addrs.get(1 << 20) ==
                  [f for f in frees_by_address(a.gpumemprof, senv, trace)
                   if f in addrs.get(1 << 20, [])],
                  "the first allocation's address %s is not the one cudaFree frees"
                  % addrs.get(1 << 20))
        elif expect in ("late", "late8"):
            # only the first call's enter was missed: at most its record is absent, nothing extra
            if got != base:
                print("labels differ from the baseline: missing %s, extra %s"
                      % (sorted((base - got).items()), sorted((got - base).items())))
            extra = by_size(got) - by_size(base)
            missing = by_size(base) - by_size(got)
            check(not extra, "records the baseline does not have: %s" % sorted(extra.items()))
            most = 8 if expect == "late8" else 1
            check(sum(missing.values()) <= most,
                  "more than the first calls' records missing: %s" % sorted(missing.items()))
        else:
            extra = got - base
            check(not extra, "records the baseline does not have: %s" % sorted(extra.items()))
    if a.known_defect:
        if FAILS:
            print("KNOWN AGENT DEFECT (skipped): " + a.known_defect)
            sys.exit(77)
        print("FAIL: %s passes: the known defect (%s) is fixed; drop --known-defect"
              % (a.case, a.known_defect))
        sys.exit(1)
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
    print("%s: ok" % a.case)


if __name__ == "__main__":
    main()
