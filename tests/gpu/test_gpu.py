#!/usr/bin/env python3
"""The same end-to-end scenario as the demo, on a real GPU: `gpumemprof info` says profiling can
work, and `gpumemprof run` on the bundled sample gives the exact numbers the sample's allocation
pattern implies (identical to the simulated device's). Exits 77 (skipped) without a GPU: no
nvidia-smi that lists one, or no system libcuda.so.1."""
import ctypes, json, os, shutil, subprocess, sys, tempfile

gmp, sample, cuda_root = sys.argv[1:4]
SKIP = 77
MiB = 1 << 20

if not shutil.which("nvidia-smi") or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode:
    print("no GPU (nvidia-smi -L fails): skipped")
    sys.exit(SKIP)
try:
    ctypes.CDLL("libcuda.so.1")
except OSError:
    print("no CUDA driver (libcuda.so.1): skipped")
    sys.exit(SKIP)

env = dict(os.environ)
env.pop("LD_LIBRARY_PATH", None)  # the real driver and runtime, never the simulated device
for d in ("lib64", "lib", "targets/x86_64-linux/lib"):
    if os.path.isdir(os.path.join(cuda_root, d)):
        env["LD_LIBRARY_PATH"] = os.path.join(cuda_root, d)
        break
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


p = subprocess.run([gmp, "info"], env=env, capture_output=True, text=True)
check(p.returncode == 0, f"info exit {p.returncode}: {p.stdout}{p.stderr}")

with tempfile.TemporaryDirectory() as tmp:
    trace = os.path.join(tmp, "gpu.zst")
    plain = subprocess.run([sample, "6"], env=env, capture_output=True, text=True, timeout=300)
    p = subprocess.run([gmp, "run", "-o", trace, "--", sample, "6"], env=env, capture_output=True,
                       text=True, timeout=300)
    check(p.returncode == plain.returncode == 0, f"exit {p.returncode} vs {plain.returncode}: {p.stderr}")
    check(p.stdout == plain.stdout, "the program's stdout changed under gpumemprof")
    r = subprocess.run([gmp, "report", "--format", "json", trace], capture_output=True, text=True)
    check(r.returncode == 0, f"report exit {r.returncode}: {r.stderr}")
    rep = json.loads(r.stdout) if r.returncode == 0 else {}
    devs = [d for d in rep.get("devices", []) if d.get("id", -1) >= 0]
    check(len(devs) >= 1, "no device in the report")
    if devs:
        d = devs[0]
        # weights 112 + optimizer 224 + 5 metrics buffers + one step's activations 224 and
        # gradients 64 MiB, plus the 256 KiB __device__ table
        check(d["peak_allocated_bytes"] == 629 * MiB + 256 * 1024, f"peak {d['peak_allocated_bytes']}")
        check(d["allocations"] >= 42, f"allocations {d['allocations']}")
    paths = {x.get("range") for x in rep.get("live_at_peak", [])}
    for want in ("train/step/optimizer", "init/weights", "train/step/forward/layer3"):
        check(want in paths, f"{want} missing from live_at_peak: {sorted(p for p in paths if p)}")
    check(rep.get("lost_events", 0) == 0, f"lost events: {rep.get('lost_events')}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("gpu end-to-end passed")
