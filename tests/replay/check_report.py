#!/usr/bin/env python3
"""Tests of `gpumemprof report` on the fixed trace of `gen_traces report fixture` (tests/tools).

    check_report.py MODE GPUMEMPROF REPORT_TRACE GOLDEN_DIR

MODE: json (every value checked exactly), text (golden file; GMP_REGEN=1 rewrites it),
golden_json (--format json against golden/report.json, compared as parsed JSON), golden_color
(--color always against golden/report.color.txt, byte for byte), truncated (a cut trace: report
plus one warning line), corrupt (one message, exit 1), options (--top, --device and the
temporary totals, -o, the same trace twice, bad arguments)."""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_golden  # noqa: E402
import gmp_testlib  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
T0 = 1000000000


def ms(x):
    return T0 + int(x * 1000000)


def run(args, cwd, expect_rc=0):
    p = gmp_testlib.run(args, expect=expect_rc, cwd=cwd)
    return p.stdout.decode(), p.stderr.decode()


def eq(what, got, want):
    if got != want:
        sys.exit("%s: got %r, expected %r" % (what, got, want))


def check_json(doc):
    eq("schema", doc["schema"], "gpumemprof-report/3")
    eq("trace.pid", doc["trace"]["pid"], 4242)
    eq("cmdline", doc["cmdline"], "python train.py")
    eq("complete", doc["complete"], True)
    eq("truncated", doc["truncated"], False)
    eq("events", doc["events"], 32)
    eq("lost_events", doc["lost_events"], 0)
    eq("first_time_ns", doc["first_time_ns"], ms(0.5))
    devs = {d["id"]: d for d in doc["devices"]}
    eq("device ids", sorted(devs), [0, 1])
    d0, d1 = devs[0], devs[1]
    want0 = {
        "name": "NVIDIA H100 80GB HBM3", "total_bytes": 80 * GiB,
        "peak_allocated_bytes": GiB + 512 * MiB + 256 * MiB + 64 * MiB,
        "peak_time_ns": ms(9),
        "peak_reserved_bytes": GiB + 512 * MiB + 256 * MiB + 128 * MiB,
        "peak_reserved_time_ns": ms(8.1),
        "allocations": 4, "frees": 3, "failed_allocations": 1, "leaked_bytes": GiB,
        "leaked_allocations": 1, "reserved_at_exit_bytes": GiB + 128 * MiB, "ooms": 1,
        "unknown_frees": 1, "double_frees": 0, "samples": 1,
        "max_unexplained_bytes": 2 * GiB - (GiB + 128 * MiB),
        "max_unexplained_time_ns": ms(18),
    }
    for k, v in want0.items():
        eq("devices[0]." + k, d0[k], v)
    want1 = {
        "peak_allocated_bytes": 356 * MiB, "peak_time_ns": ms(6.5),
        "peak_reserved_bytes": 356 * MiB, "allocations": 2, "frees": 1,
        "leaked_bytes": 100 * MiB, "leaked_allocations": 1, "ooms": 0,
    }
    for k, v in want1.items():
        eq("devices[1]." + k, d1[k], v)

    # schema 2: "stack": null when none was recorded
    live = [(e["device"], e["range"], e["bytes"], e["count"],
             0 if e["stack"] is None else len(e["stack"]))
            for e in doc["live_at_peak"]]
    eq("live_at_peak", live, [
        (0, "train/step/forward", GiB, 1, 1),
        (0, "train/step/forward", 512 * MiB, 1, 1),
        (0, "train/step/backward", 320 * MiB, 2, 0),
        (1, "eval", 356 * MiB, 2, 0),
    ])
    st = doc["live_at_peak"][0]["stack"]
    # symbolized (formats/symbols/gmp_symbolize): /opt/app/libtrain.so does not exist here, so
    # its frame says why it has no function; no module covers 0x401000: left out
    # (docs/stacks.md: a frame-pointer walk reads data words, and one call site must stay one
    # stack whatever they held)
    eq("native stack", st, [{"function": None, "file": None, "line": 0,
                             "address": "0x7f0000012340",
                             "module": "/opt/app/libtrain.so+0x12340",
                             "unknown": "file missing"}])
    eq("python stack", doc["live_at_peak"][1]["stack"],
       [{"function": "model_forward", "file": "train.py", "line": 42}])

    # schema 2: each device's leaks in devices[].leaks; host memory of a host that is not a
    # listed device in the top-level leaks (without "device")
    eq("host not a listed device", -1 in devs, False)
    leaks = [(-1, e["kind"], e["range"], e["bytes"], e["count"]) for e in doc["leaks"]]
    for d in doc["devices"]:
        leaks += [(d["id"], e["kind"], e["range"], e["bytes"], e["count"]) for e in d["leaks"]]
    eq("leaks", leaks, [
        (-1, "pinned-host", "train", 16 * MiB, 1),
        (0, "device", "train/step/forward", GiB, 1),
        (0, "managed", "train", 32 * MiB, 1),
        (1, "device", "eval", 100 * MiB, 1),
    ])
    eq("ooms", len(doc["ooms"]), 1)
    o = doc["ooms"][0]
    for k, v in {"device": 0, "time_ns": ms(15), "requested_bytes": 8 * GiB,
                 "api": "cudaMalloc", "range": "train", "live_bytes": GiB + 256 * MiB,
                 "reserved_bytes": GiB + 256 * MiB + 128 * MiB, "free_bytes": MiB}.items():
        eq("ooms[0]." + k, o[k], v)
    eq("oom stack depth", len(o["stack"]), 1)  # 0x401000, inside no loaded module, left out

    kinds = {(k["device"], k["kind"]): k for k in doc["kinds"]}
    eq("kinds", sorted(kinds), sorted([
        (-1, "pinned-host"), (0, "device"), (0, "async-pool"), (0, "managed"), (1, "device"),
        (1, "vmm-physical"), (1, "vmm-mapping"), (1, "va-reserve")]))
    eq("managed counts", kinds[(0, "managed")]["counts_in_device_peak"], False)
    eq("managed peak", kinds[(0, "managed")]["peak_bytes"], 32 * MiB)
    eq("pinned peak", kinds[(-1, "pinned-host")]["peak_bytes"], 16 * MiB)
    eq("async peak", kinds[(0, "async-pool")]["peak_bytes"], 64 * MiB)
    eq("mapping peak", kinds[(1, "vmm-mapping")]["peak_bytes"], 256 * MiB)
    eq("mapping live", kinds[(1, "vmm-mapping")]["live_bytes_at_exit"], 0)
    eq("vmm counts", kinds[(1, "vmm-physical")]["counts_in_device_peak"], True)
    eq("anomalies", doc["anomalies"]["unknown_frees"], 1)
    eq("anomalies", doc["anomalies"]["failed_allocations"], 1)
    eq("notices", [n["message"] for n in doc["notices"]],
       ["stacks: native frames not symbolized"])


def zstd_frames(data):
    """(start, end) of every zstd frame of data (RFC 8878 frame layout)."""
    out, pos = [], 0
    while pos < len(data):
        start = pos
        magic = int.from_bytes(data[pos:pos + 4], "little")
        if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable frame
            pos += 8 + int.from_bytes(data[pos + 4:pos + 8], "little")
            out.append((start, pos))
            continue
        fhd = data[pos + 4]
        single = (fhd >> 5) & 1
        pos += 5 + (0 if single else 1)
        pos += [0, 1, 2, 4][fhd & 3]
        pos += [1 if single else 0, 2, 4, 8][fhd >> 6]
        while True:
            bh = int.from_bytes(data[pos:pos + 3], "little")
            pos += 3
            btype, bsize = (bh >> 1) & 3, bh >> 3
            pos += 1 if btype == 1 else bsize
            if bh & 1:
                break
        if (fhd >> 2) & 1:
            pos += 4
        out.append((start, pos))
    return out


def main():
    mode, gpumemprof, gen, golden = sys.argv[1:5]
    with gmp_testlib.tmpdir(prefix="gmp_report_") as tmp:
        run([gen, "report", "fixture", "report.zst"], tmp)
        if mode == "json":
            out, err = run([gpumemprof, "report", "report.zst", "--format", "json"], tmp)
            eq("stderr", err, "")
            check_json(json.loads(out))
        elif mode == "text":
            out, err = run([gpumemprof, "report", "report.zst"], tmp)
            eq("stderr", err, "")
            path = os.path.join(golden, "report.txt")
            if gmp_golden.regen_requested():
                with open(path, "w") as f:
                    f.write(out)
            with open(path) as f:
                want = f.read()
            if out != want:
                sys.exit("text report differs from %s:\n%s" % (path, out))
        elif mode == "golden_json":
            p = subprocess.run([gpumemprof, "report", "report.zst", "--format", "json"], cwd=tmp,
                               capture_output=True)
            eq("exit status", p.returncode, 0)
            eq("stderr", p.stderr, b"")
            gmp_golden.golden_json(os.path.join(golden, "report.json"), p.stdout,
                                   "GMP_REGEN")
        elif mode == "golden_color":
            p = subprocess.run([gpumemprof, "report", "report.zst", "--color", "always"], cwd=tmp,
                               capture_output=True)
            eq("exit status", p.returncode, 0)
            eq("stderr", p.stderr, b"")
            gmp_golden.golden_bytes(os.path.join(golden, "report.color.txt"), p.stdout,
                                    "GMP_REGEN")
        elif mode == "truncated":
            data = open(os.path.join(tmp, "report.zst"), "rb").read()
            frames = zstd_frames(data)
            eq("frames cover the file", frames[-1][1], len(data))
            if len(frames) < 4:
                sys.exit("the fixture has %d frames, expected several" % len(frames))
            a, b = frames[len(frames) * 2 // 3]  # cut inside a frame after the middle
            open(os.path.join(tmp, "cut.zst"), "wb").write(data[:(a + b) // 2])
            out, err = run([gpumemprof, "report", "cut.zst", "--format", "json"], tmp)
            lines = err.splitlines()
            eq("stderr lines", len(lines), 1)
            if not lines[0].startswith("gpumemprof report: warning: cut.zst: "):
                sys.exit("unexpected warning: " + lines[0])
            doc = json.loads(out)
            eq("complete", doc["complete"], False)
            eq("truncated", doc["truncated"], True)
            if not 0 < doc["events"] < 32:
                sys.exit("cut trace: %d events" % doc["events"])
            out, err = run([gpumemprof, "report", "cut.zst"], tmp)
            eq("text stderr lines", len(err.splitlines()), 1)
            if "Device 0" not in out:
                sys.exit("cut trace: no device in the text report")
        elif mode == "corrupt":
            data = bytearray(open(os.path.join(tmp, "report.zst"), "rb").read())
            for i in range(len(data) // 3, len(data) // 3 + 16):
                data[i] ^= 0x5a
            open(os.path.join(tmp, "bad.zst"), "wb").write(bytes(data))
            open(os.path.join(tmp, "text.zst"), "w").write("not a trace at all\n")
            for name in ("bad.zst", "text.zst", "missing.zst"):
                out, err = run([gpumemprof, "report", name, "-o", "out.json"], tmp, 1)
                lines = err.splitlines()
                eq(name + ": stderr lines", len(lines), 1)
                if not lines[0].startswith("gpumemprof report: %s: " % name):
                    sys.exit("unexpected message: " + lines[0])
                eq(name + ": stdout", out, "")
                eq(name + ": output left", os.path.exists(os.path.join(tmp, "out.json")),
                   False)
        elif mode == "options":
            out, _ = run([gpumemprof, "report", "report.zst", "-f", "json", "--top", "1"], tmp)
            doc = json.loads(out)
            eq("--top 1", [(e["device"], e["bytes"]) for e in doc["live_at_peak"]],
               [(0, GiB), (1, 356 * MiB)])
            out, _ = run([gpumemprof, "report", "report.zst", "-f", "json", "--device", "1",
                          "-o", "d1.json"], tmp)
            eq("-o: stdout", out, "")
            doc = json.load(open(os.path.join(tmp, "d1.json")))
            eq("--device 1", [d["id"] for d in doc["devices"]], [1])
            eq("--device 1 leaks", [(d["id"], e["bytes"]) for d in doc["devices"]
                                    for e in d.get("leaks", [])], [(1, 100 * MiB)])
            eq("--device 1: no host leaks", "leaks" in doc, False)
            eq("--device 1 ooms", doc["ooms"], [])
            out, _ = run([gpumemprof, "report", "report.zst", "--top", "1"], tmp)
            if "(top 1 of 2)" not in out:
                sys.exit("--top 1 in text: no 'top 1 of 2'")
            # the temporary allocations' totals are the shown device's (8 allocations: 5 on
            # device 0, 2 on device 1, 1 on the host)
            tot = {}
            for dev in ("0", "1", "-1", None):
                out, _ = run([gpumemprof, "report", "report.zst", "-f", "json"] +
                             (["--device", dev] if dev else []), tmp)
                tot[dev] = json.loads(out)["analysis"]["temporary_totals"]["allocations"]
            eq("temporary totals by --device", tot, {"0": 5, "1": 2, "-1": 1, None: 8})
            # values --help does not describe are refused: --top -1, a --debug-dir that is not
            # a directory, --temporary-us 0, --device -2
            open(os.path.join(tmp, "plain"), "w").close()
            for bad in (["--format", "xml"], ["--top", "-3"], ["--device", "x"], [],
                        ["--top", "-1"], ["--debug-dir", "/nonexistent/debug"],
                        ["--debug-dir", "plain"], ["--temporary-us", "0"], ["--device", "-2"]):
                run([gpumemprof, "report"] + (["report.zst"] if bad else []) + bad, tmp, 2)
            # the same trace twice: said on stderr, both read
            out, err = run([gpumemprof, "report", "report.zst", "report.zst", "-f", "json"], tmp)
            if "given twice" not in err:
                sys.exit("report of a trace given twice: no warning: %r" % err)
            run([gpumemprof, "report", "report.zst", "-o", "/nonexistent/dir/x.json"], tmp, 1)
            out, _ = run([gpumemprof, "report", "--help"], tmp)
            if "usage: gpumemprof report" not in out:
                sys.exit("--help: no usage line")
        else:
            sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
