#!/usr/bin/env python3
"""gpumemprof run --alert-threshold on the simulated device, with the bundled sample.

train_sim allocates 112 MiB of weights, then per step activations (32+48+64+80 MiB from a pool),
64 MiB of gradients, 224 MiB of optimizer state once and 1 MiB of metrics: its allocated memory
first reaches 500 MiB in step 1, at the layer3 activation: 112 + 224 + 1 + (32+48+64+80) = 561 MiB.
The static table (256 KiB) is reported by CUPTI activity records, which arrive later."""
import json, os, subprocess, sys, tempfile

gmp, simdir, sample = sys.argv[1:4]
env = dict(os.environ, LD_LIBRARY_PATH=simdir)
if len(sys.argv) > 4 and sys.argv[4]:
    env["LD_PRELOAD"] = sys.argv[4]
    env["ASAN_OPTIONS"] = "detect_leaks=0"
MiB = 1 << 20
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(tmp, threshold, name):
    out = os.path.join(tmp, name)
    p = subprocess.run([gmp, "run", "-q", "--alert-threshold", threshold, "-o", out, "--",
                        sample, "3"], env=env, capture_output=True, text=True, timeout=120)
    return p, out


def records(trace):
    p = subprocess.run([gmp, "dump", "--json", trace], capture_output=True, text=True, env=env)
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


with tempfile.TemporaryDirectory() as tmp:
    p, trace = run(tmp, "500M", "a.zst")
    check(p.returncode == 0, f"run exit {p.returncode}: {p.stderr}")
    lines = [l for l in p.stderr.splitlines() if "alert" in l]
    check(len(lines) == 1, f"one alert line expected, got {lines}")
    if lines:
        check("device 0" in lines[0] and "500.00 MiB" in lines[0], lines[0])
        check("224.00 MiB train/step/optimizer" in lines[0], lines[0])
    recs = records(trace)
    alerts = [r for r in recs if r["type"] == "alert"]
    check(len(alerts) == 1, f"one ALERT record expected, got {len(alerts)}")
    if alerts:
        a = alerts[0]
        check(a["threshold"] == 500 * MiB, f"threshold {a['threshold']}")
        check(a["live_bytes"] == 561 * MiB, f"live_bytes {a['live_bytes']}")
        check(a["path"] == "train/step/optimizer", f"path {a['path']}")

    # 1% of the simulated 80 GiB device is never reached: no alert at all
    p, trace = run(tmp, "1%", "b.zst")
    check(p.returncode == 0 and "alert" not in p.stderr, f"unexpected alert: {p.stderr}")
    check(not [r for r in records(trace) if r["type"] == "alert"], "ALERT record at 1%")

    # a percentage that is reached: 0.5% is not accepted (whole percents), 1% of a 40 GiB device is
    env["SIMCUDA_DEVICE_MEMORY"] = str(40 << 30)
    p, trace = run(tmp, "1%", "c.zst")
    check(sum("alert" in l for l in p.stderr.splitlines()) == 1, f"1% of 40 GiB: {p.stderr}")

    for bad in ("101%", "0", "x", "%", "-5"):
        p = subprocess.run([gmp, "run", "--alert-threshold", bad, "--", "true"], env=env,
                           capture_output=True, text=True)
        check(p.returncode == 2 and "--alert-threshold" in p.stderr, f"bad value {bad!r}: {p.returncode}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("alert tests passed")
