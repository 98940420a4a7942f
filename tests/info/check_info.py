#!/usr/bin/env python3
"""Tests of `gpumemprof info` (tests/info/CMakeLists.txt).

    check_info.py CASE GPUMEMPROF [SIMCUDA_DIR]

no_driver  this machine has no CUDA driver: info says so, in text and JSON, and exits 1
           (skipped, exit 77, where a libcuda.so.1 is installed);
simcuda    on the simulated device (LD_LIBRARY_PATH=SIMCUDA_DIR, two devices of 16 GiB): both
           devices with their memory, CUPTI found next to the driver with the version the agent
           was built against, the agent loadable; exit 0;
no_agent   GPUMEMPROF_AGENT names a missing file: exit 1, the reason names the agent;
bad_cupti  GPUMEMPROF_CUPTI names a missing file: exit 1, the reason names CUPTI;
no_inject  CUDA_INJECTION64_PATH already set to a tool: info notes it and does not let the driver
           inject it into its own process (the tool's log stays empty);
cupti_newer the CUDA 12 personality's 12.8 driver (SIMCUDA_DIR/cuda12/driver) with a CUPTI 13
           (GPUMEMPROF_CUPTI = the simulated libcupti.so.13): exit 1, "profiling: not possible", the
           reason says the CUPTI is newer than the driver and names the fix: the CUDA 12 CUPTI of a
           Python environment ($VIRTUAL_ENV's nvidia/cuda_cupti/lib/libcupti.so.12, a copy of the
           personality's) as `gpumemprof run --cupti PATH`, or, with none, what to look for;
wheel13    a Python environment with CUDA 13's wheel layout (every library in
           site-packages/nvidia/cu13/lib; copies of the simulated libcudart.so.13 and
           libcupti.so.13): info finds that runtime and the CUPTI beside it, as the agent does."""
import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def info(gmp, env, json_out=False, expect=0):
    args = [gmp, "info", "--json"] if json_out else [gmp, "info"]
    p = subprocess.run(args, env=env, capture_output=True, text=True)
    if p.returncode != expect:
        fail("%s: exit %d (expected %d)\n%s%s" % (" ".join(args), p.returncode, expect,
                                                 p.stdout, p.stderr))
    if json_out:
        try:
            return json.loads(p.stdout)
        except ValueError as e:
            fail("invalid JSON (%s):\n%s" % (e, p.stdout))
    return p.stdout


def base_env():
    env = dict(os.environ)
    for k in ("LD_LIBRARY_PATH", "CUDA_INJECTION64_PATH", "GPUMEMPROF_AGENT", "GPUMEMPROF_CUPTI",
              "SIMCUDA_DEVICE_COUNT", "SIMCUDA_DEVICE_MEMORY"):
        env.pop(k, None)
    return env


def sim_env(simdir):
    env = base_env()
    env["LD_LIBRARY_PATH"] = simdir
    env["SIMCUDA_DEVICE_COUNT"] = "2"
    env["SIMCUDA_DEVICE_MEMORY"] = str(16 << 30)
    return env


def case_no_driver(gmp, simdir):
    env = base_env()
    try:
        ctypes.CDLL("libcuda.so.1")
        print("SKIP: a CUDA driver is installed here")
        sys.exit(77)
    except OSError:
        pass
    out = info(gmp, env, expect=1)
    check("CUDA driver   not found" in out, out)
    check("profiling: not possible on this machine:" in out, out)
    check("  - no CUDA driver: libcuda.so.1 cannot be loaded" in out, out)
    j = info(gmp, env, json_out=True, expect=1)
    check(j["schema"] == "gpumemprof-info/1", "schema")
    check(j["driver"]["found"] is False and j["driver"]["error"], "driver %s" % j["driver"])
    check(j["devices"] == [] and j["profiling_possible"] is False, "devices/possible")
    check(any(r.startswith("no CUDA driver") for r in j["reasons"]), "reasons %s" % j["reasons"])
    print("ok")


def case_simcuda(gmp, simdir):
    env = sim_env(simdir)
    out = info(gmp, env)
    check("profiling: possible" in out, out)
    check("    0: SimCUDA Device 0, 16.00 GiB (17179869184 bytes)" in out, out)
    check("    1: SimCUDA Device 1, 16.00 GiB (17179869184 bytes)" in out, out)
    j = info(gmp, env, json_out=True)
    real = os.path.realpath(simdir)
    check(j["driver"]["found"] and j["driver"]["path"] == os.path.join(real, "libcuda.so.1"),
          "driver %s" % j["driver"])
    check(j["driver"]["version"] >= 13000 and j["driver"]["init_result"] == 0, "driver version")
    check([(d["ordinal"], d["name"], d["total_bytes"]) for d in j["devices"]] ==
          [(0, "SimCUDA Device 0", 16 << 30), (1, "SimCUDA Device 1", 16 << 30)],
          "devices %s" % j["devices"])
    c = j["cupti"]
    check(c["found"] and c["path"] == os.path.join(real, "libcupti.so.13"),
          "CUPTI next to the driver: %s" % c)
    check(c["built_against"] >= 130000 and c["version"] == c["built_against"] and c["compatible"],
          "CUPTI versions %s" % c)
    check(j["agent"]["found"] and j["agent"]["entry_points"], "agent %s" % j["agent"])
    check(j["profiling_possible"] is True and j["reasons"] == [], "reasons %s" % j["reasons"])
    print("ok")


def case_no_agent(gmp, simdir):
    env = sim_env(simdir)
    env["GPUMEMPROF_AGENT"] = "/nonexistent/libgpumemprof_agent.so"
    j = info(gmp, env, json_out=True, expect=1)
    check(j["agent"]["found"] is False, "agent %s" % j["agent"])
    check(len(j["reasons"]) == 1 and j["reasons"][0].startswith("agent library: missing"),
          "reasons %s" % j["reasons"])
    out = info(gmp, env, expect=1)
    check("  - agent library: missing (looked for /nonexistent/libgpumemprof_agent.so)" in out, out)
    print("ok")


def case_bad_cupti(gmp, simdir):
    env = sim_env(simdir)
    env["GPUMEMPROF_CUPTI"] = "/nonexistent/libcupti.so.13"
    j = info(gmp, env, json_out=True, expect=1)
    check(j["cupti"]["found"] is False and j["cupti"]["compatible"] is False, "cupti %s" % j["cupti"])
    check(len(j["reasons"]) == 1 and "GPUMEMPROF_CUPTI=/nonexistent/libcupti.so.13" in j["reasons"][0],
          "reasons %s" % j["reasons"])
    print("ok")


def case_no_inject(gmp, simdir):
    env = sim_env(simdir)
    tool = os.path.join(simdir, "tests", "libsimcuda_test_inject.so")
    check(os.path.exists(tool), tool + " missing")
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "inject.log")
        env["CUDA_INJECTION64_PATH"] = tool
        env["SIMTEST_LOG"] = log
        out = info(gmp, env)
        check("note          CUDA_INJECTION64_PATH is already set to " + tool in out, out)
        check(not os.path.exists(log) or os.path.getsize(log) == 0,
              "the tool was injected into gpumemprof info")
        j = info(gmp, env, json_out=True)
        check(j["cuda_injection64_path"] == tool, "json %s" % j["cuda_injection64_path"])
    print("ok")


def wheel_dir(simdir):
    w = os.path.join(simdir, "cuda12")
    if not os.path.exists(os.path.join(w, "driver", "libcuda.so.1")):
        print("SKIP: no CUDA 12 personality in " + w)
        sys.exit(77)
    return w


def case_cupti_newer(gmp, simdir):
    w = wheel_dir(simdir)
    env = base_env()
    env["LD_LIBRARY_PATH"] = os.path.join(w, "driver")
    env["GPUMEMPROF_CUPTI"] = os.path.join(simdir, "libcupti.so.13")
    for k in ("VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_HOME", "CUDA_PATH"):
        env.pop(k, None)
    with tempfile.TemporaryDirectory() as d:
        lib = os.path.join(d, "lib", "python3.11", "site-packages", "nvidia", "cuda_cupti", "lib")
        os.makedirs(lib)
        alt = os.path.join(lib, "libcupti.so.12")
        shutil.copy(os.path.join(w, "site-packages", "nvidia", "cuda_cupti", "lib",
                                 "libcupti.so.12"), alt)
        env["VIRTUAL_ENV"] = d
        j = info(gmp, env, json_out=True, expect=1)
        check(j["driver"]["version"] == 12080, "driver %s" % j["driver"])
        check(j["cupti"]["found"] and j["cupti"]["version"] == 130001 and
              j["cupti"]["compatible"] is False, "cupti %s" % j["cupti"])
        want = ("CUPTI %s is CUDA 13's and the CUDA driver is CUDA 12.8: a CUPTI needs a driver of "
                "its major version or later (cuptiSubscribe would fail with CUPTI_ERROR_UNKNOWN); "
                "a CUDA 12 CUPTI is at %s: gpumemprof run --cupti %s"
                % (os.path.realpath(env["GPUMEMPROF_CUPTI"]), alt, alt))
        check(j["reasons"] == [want], "reasons %s, want [%s]" % (j["reasons"], want))
        out = info(gmp, env, expect=1)
        check("API version 130001 (newer than the driver: cannot work with it)" in out, out)
        check("profiling: not possible on this machine:\n  - " + want in out, out)
    env.pop("VIRTUAL_ENV")
    j = info(gmp, env, json_out=True, expect=1)
    check(len(j["reasons"]) == 1 and
          "give a CUDA 12 CUPTI to run with --cupti PATH (a CUDA 12 toolkit's libcupti.so.12, or "
          "a Python environment's site-packages/nvidia/cuda_cupti/lib/libcupti.so.12), or update "
          "the driver" in j["reasons"][0] or "a CUDA 12 CUPTI is at " in j["reasons"][0],
          "reasons without an environment %s" % j["reasons"])
    print("ok")


def case_wheel13(gmp, simdir):
    env = sim_env(simdir)
    with tempfile.TemporaryDirectory() as d:
        lib = os.path.join(d, "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib")
        os.makedirs(lib)
        for f in ("libcudart.so.13", "libcupti.so.13"):
            shutil.copy(os.path.join(simdir, f), os.path.join(lib, f))
        env["VIRTUAL_ENV"] = d
        j = info(gmp, env, json_out=True)
        check(j["runtime"]["found"] and
              j["runtime"]["path"] == os.path.join(os.path.realpath(lib), "libcudart.so.13"),
              "runtime %s" % j["runtime"])
        c = j["cupti"]
        check(c["found"] and c["path"] == os.path.join(os.path.realpath(lib), "libcupti.so.13"),
              "CUPTI of the wheels %s" % c)
        check("nvidia/cu13/lib" in c["chosen_as"] and c["compatible"], "chosen as %s" % c)
        check(j["profiling_possible"] is True, "reasons %s" % j["reasons"])
    print("ok")


def main():
    case, gmp = sys.argv[1], sys.argv[2]
    simdir = sys.argv[3] if len(sys.argv) > 3 else ""
    {"no_driver": case_no_driver, "simcuda": case_simcuda, "no_agent": case_no_agent,
     "bad_cupti": case_bad_cupti, "no_inject": case_no_inject,
     "cupti_newer": case_cupti_newer, "wheel13": case_wheel13}[case](gmp, simdir)


if __name__ == "__main__":
    main()
