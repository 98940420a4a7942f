#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_pickle, fuzz_nsys, fuzz_cli_opts and fuzz_agent_opts into
tests/fuzz/corpus/<name>/ (python3 standard library only). Run it again after changing a target's
input format:   python3 tests/fuzz/make_seeds.py"""
import io
import os
import pickle
import sqlite3
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def put(name, fname, data):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, fname), "wb") as f:
        f.write(data)


# ---- pickle: PyTorch snapshots in miniature, every protocol, and plain data ----

def snapshot(legacy=False):
    frames = [{"filename": "train.py", "line": 12, "name": "forward"},
              {"filename": "<script>\"x\".py", "line": 3, "name": "main"}]
    blocks = [{"size": 512, "requested_size": 500, "address": 0x7f0000000000, "state": "active_allocated",
               "frames": frames},
              {"size": 1536, "requested_size": 0, "address": 0x7f0000000200, "state": "inactive",
               "frames": []}]
    segs = [{"device": 0, "address": 0x7f0000000000, "total_size": 2048, "allocated_size": 512,
             "active_size": 512, "requested_size": 500, "stream": 0, "segment_type": "small",
             "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames, "blocks": blocks}]
    if legacy:
        return segs
    trace = [{"action": "segment_alloc", "addr": 0x7f0000000000, "size": 2048, "stream": 0,
              "time_us": 1000, "frames": frames},
             {"action": "alloc", "addr": 0x7f0000000000, "size": 512, "stream": 0,
              "time_us": 1001, "frames": frames},
             {"action": "free_requested", "addr": 0x7f0000000000, "size": 512, "stream": 0,
              "time_us": 1002, "frames": frames},
             {"action": "free_completed", "addr": 0x7f0000000000, "size": 512, "stream": 0,
              "time_us": 1003, "frames": frames},
             {"action": "alloc", "addr": 0x7f0000000000, "size": 512, "stream": 0,
              "time_us": 1004, "frames": frames},
             {"action": "oom", "addr": 0, "size": 1 << 40, "stream": 0, "device_free": 1024,
              "time_us": 1005, "frames": frames}]
    return {"segments": segs, "device_traces": [trace, []],
            "allocator_settings": {"expandable_segments": False, "max_split_size": -1},
            "external_annotations": []}


def ranged(s):
    t = [dict(e, time_us=1757253255000000 + e["time_us"]) for e in s["device_traces"][0]]
    t[1] = dict(t[1], user_metadata="train/model/layers.0", compile_context="N/A")
    t[4] = dict(t[4], user_metadata="", compile_context="Torch-Compiled Region: 0/1")
    ann = [{"name": n, "stage": st, "device": d, "time_us": 1757253255000000 + tu}
           for n, st, d, tu in (("ghost", "END", 0, 999), ("step", "START", 0, 1000),
                                ("inner", "START", 0, 1001), ("inner", "END", 0, 1003),
                                ("step", "END", 0, 1006), ("d1", "START", 1, 1000))]
    segs = [dict(s["segments"][0], segment_pool_id=(1, 0))]
    return dict(s, segments=segs, device_traces=[t, []], external_annotations=ann)


def pickles():
    s = snapshot()
    for proto in (2, 3, 4, 5):
        put("pickle", "snapshot-p%d.pickle" % proto, pickle.dumps(s, protocol=proto))
    put("pickle", "legacy-p4.pickle", pickle.dumps(snapshot(legacy=True), protocol=4))
    plain = {"ints": [0, 1, -1, 255, 256, 65535, 2**31, -2**31, 2**63 - 1, -2**63, 2**64 - 1],
             "floats": [0.0, -1.5, 1e308, float("inf")], "bytes": b"\x00\xff", "none": None,
             "bools": (True, False), "nested": [[[[{"k": ()}]]]], "str": "\u00e9\u4e2d\x00",
             "tuple1": (1,), "tuple2": (1, 2), "tuple3": (1, 2, 3), "empty": {}}
    for proto in (2, 5):
        put("pickle", "plain-p%d.pickle" % proto, pickle.dumps(plain, protocol=proto))
    shared = [1, 2]
    put("pickle", "memo-shared.pickle", pickle.dumps({"a": shared, "b": shared, "c": [shared]}, 4))
    # the streaming reader (gmp_pickle_stream.h): entries on three devices, device_traces before
    # segments, and a root built by DICT (its lists cannot be streamed: handed over at STOP)
    t = s["device_traces"][0]
    put("pickle", "stream-3dev.pickle",
        pickle.dumps(dict(s, device_traces=[t, t[:3], t[2:]]), protocol=4))
    put("pickle", "stream-traces-first.pickle",
        pickle.dumps({"device_traces": [t], "segments": s["segments"]}, protocol=4))
    put("pickle", "stream-dict-root.pickle",
        b"\x80\x02(X\x08\x00\x00\x00segments]X\x0d\x00\x00\x00device_traces]]a"
        b"d.")
    # ranges: record_function annotations (nested, an END without START), user_metadata,
    # compile_context, a private pool (segment_pool_id)
    put("pickle", "snapshot-ranges.pickle", pickle.dumps(ranged(s), protocol=4))
    # refused: a global (never executed)
    put("pickle", "global.pickle", pickle.dumps(set([1]), protocol=2))


# ---- nsys: a small real-schema export, and structured programs ----

def nsys_raw():
    sys.path.insert(0, os.path.join(HERE, "..", "nsys"))
    import check_nsys  # the schema and rows of tests/nsys's generated export
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.sqlite")
        c = sqlite3.connect(p)
        c.execute("PRAGMA page_size = 512")
        c.executescript(check_nsys.SCHEMA)
        check_nsys.synthetic_rows(c)
        c.commit()
        c.execute("VACUUM")
        c.close()
        with open(p, "rb") as f:
            put("nsys", "synthetic.sqlite", f.read())


# structured mode (see fuzz_nsys.c): tables by index
T_MEM, T_RT, T_DRV, T_NVTX, T_STR, T_THR, T_GPU, T_PROC, T_EKIND, T_EOPER, T_ETYPE, T_ENV, T_START = range(13)
NAMES = ["CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "CUDA_MEMOPR_MEMORY_KIND_PINNED",
         "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "CUDA_MEMOPR_MEMORY_KIND_ARRAY",
         "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC",
         "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN",
         "CUDA_DEV_MEM_EVENT_OPR_ALLOCATION", "CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION",
         "NvtxPushPopRange", "NvtxStartEndRange", "NvtxDomainCreate", "NvtxMark",
         "cudaMalloc_v3020", "cuMemAlloc_v2", "cudaMallocAsync_v11020", "cudaFree_v3020",
         "Hostname", "GPU-00112233-4455-6677-8899-aabbccddeeff"]


def null():
    return b"\x00"


def small(v):  # 0..31
    return bytes([1 | (v << 3)])


def i64(v):
    return b"\x03" + struct.pack(">q", v)


def name(s):
    return bytes([5 | (NAMES.index(s) << 3)])


def text(s):
    b = s.encode()
    return bytes([6, len(b)]) + b


def row(t, *vals):
    return bytes([t]) + b"".join(vals)


def nsys_structured():
    G = (1 << 48) | (4321 << 24)
    head = bytes([0xff, 0x1f, 0x00])  # every table, every column
    enums = b"".join(row(T_EKIND, small(i), name(NAMES[i]), null()) for i in range(8))
    enums += row(T_EOPER, small(0), name("CUDA_DEV_MEM_EVENT_OPR_ALLOCATION"), null())
    enums += row(T_EOPER, small(1), name("CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION"), null())
    for i, n in enumerate(["NvtxPushPopRange", "NvtxStartEndRange", "NvtxDomainCreate"]):
        enums += row(T_ETYPE, small(20 + i), name(n), null())
    meta = row(T_STR, small(1), name("cudaMalloc_v3020")) + row(T_STR, small(2), text("main"))
    meta += row(T_THR, small(2), small(0), i64(G | 4321))
    meta += row(T_GPU, small(1), small(0), text("GPU 0"), i64(80 << 30),
                name("GPU-00112233-4455-6677-8899-aabbccddeeff"), small(9), small(0))
    meta += row(T_PROC, i64(G), i64(4321), text("python train.py"))
    meta += row(T_ENV, name("Hostname"), text("host<1>"))
    meta += row(T_START, i64(1700000000000000000))

    def mem(t, op, addr, size, kind=2, corr=0, nm=None):
        return row(T_MEM, i64(t), small(0), i64(addr), i64(size), small(kind), small(op), i64(G),
                   small(1), small(0), text(nm) if nm else null(), i64(corr) if corr else null(),
                   small(0), null(), null(), null(), null())

    def nvtx(t, end, typ, txt, tid=4321):
        return row(T_NVTX, i64(t), i64(end) if end is not None else null(), small(typ), null(),
                   null(), null(), text(txt), i64(G | tid), null(), null(), null())
    ev = nvtx(100, 900, 20, "train") + nvtx(200, 800, 20, "forward")
    ev += nvtx(150, 950, 21, "epoch")
    ev += row(T_RT, i64(300), i64(310), small(0), i64(G | 4321), small(7), small(1), small(0))
    ev += mem(305, 0, 0x7f0000000000, 4096, corr=7)
    ev += mem(400, 0, 0x7f0000100000, 1 << 20, kind=5, nm="weights")
    ev += mem(700, 1, 0x7f0000000000, 4096)
    put("nsys", "structured-full.bin", head + enums + meta + ev)
    put("nsys", "structured-noenum.bin", bytes([0x01, 0x00, 0xff]) + ev)
    put("nsys", "structured-missing-col.bin", bytes([0xff, 0x1f, 0x83]) + ev)
    put("nsys", "structured-nested.bin", head + enums + b"".join(
        nvtx(10 * i, 10000 - 10 * i, 20, "r%d" % i) for i in range(40)) + ev)


# ---- cli_opts: argv split at NUL ----

def cli_opts():
    seeds = {
        "basic": ["-o", "out.json", "--json", "trace.zst", "--", "-x"],
        "values": ["--count=-5", "--max", "0x10", "-b", "1.5G", "--flush-interval", "200",
                   "--timeout=2m", "pos"],
        "sizes": ["--buffer-size=64KiB", "-b", "18446744073709551615", "--buffer-size", "16T"],
        "durations": ["-t", "0.5s", "--timeout", "10us", "--flush-interval=1h"],
        "bad": ["--nope", "-", "-jq"],
        "help": ["a", "--help"],
        "missing": ["--output"],
    }
    for k, v in seeds.items():
        put("cli_opts", k + ".args", "\0".join(v).encode())


# ---- agent_opts: <selector><value>\0 ----

VARS = ["GPUMEMPROF_OUTPUT", "GPUMEMPROF_FORCE", "GPUMEMPROF_STACKS", "GPUMEMPROF_STACK_UNWIND",
        "GPUMEMPROF_STACK_DEPTH", "GPUMEMPROF_SAMPLE_INTERVAL_MS", "GPUMEMPROF_BUFFER_SIZE",
        "GPUMEMPROF_FLUSH_INTERVAL_MS", "GPUMEMPROF_CUPTI", "GPUMEMPROF_NVTX",
        "GPUMEMPROF_ACTIVITY", "GPUMEMPROF_QUIET", "GPUMEMPROF_ALERT_THRESHOLD",
        "GPUMEMPROF_ACTIVITY_BUFFER", "RANK", "%n"]


def agent_opts():
    def ent(var, val):
        return bytes([VARS.index(var)]) + val.encode() + b"\0"
    put("agent_opts", "defaults.env", b"")
    put("agent_opts", "run.env", b"".join([
        ent("GPUMEMPROF_OUTPUT", "out/trace.%p.%h.%r.%n.%%.zst"), ent("GPUMEMPROF_FORCE", "1"),
        ent("GPUMEMPROF_STACKS", "native"), ent("GPUMEMPROF_STACK_UNWIND", "fp"),
        ent("GPUMEMPROF_STACK_DEPTH", "256"), ent("GPUMEMPROF_SAMPLE_INTERVAL_MS", "0"),
        ent("GPUMEMPROF_BUFFER_SIZE", "64M"), ent("GPUMEMPROF_FLUSH_INTERVAL_MS", "200"),
        ent("GPUMEMPROF_CUPTI", "/usr/local/cuda/lib64/libcupti.so"), ent("GPUMEMPROF_NVTX", "0"),
        ent("GPUMEMPROF_ACTIVITY", "yes"), ent("GPUMEMPROF_QUIET", "off"),
        ent("GPUMEMPROF_ALERT_THRESHOLD", "90%"), ent("GPUMEMPROF_ACTIVITY_BUFFER", "4MiB"),
        ent("RANK", "3"), ent("%n", "7")]))
    put("agent_opts", "bytes.env", ent("GPUMEMPROF_ALERT_THRESHOLD", "40G") +
        ent("GPUMEMPROF_BUFFER_SIZE", "4294967296"))
    put("agent_opts", "hostile.env", ent("GPUMEMPROF_OUTPUT", "%s%n%x%") +
        ent("GPUMEMPROF_STACK_DEPTH", "-1") + ent("GPUMEMPROF_BUFFER_SIZE", "99999999999999999999G"))


pickles()
nsys_raw()
nsys_structured()
cli_opts()
agent_opts()
print("seeds written under", os.path.join(HERE, "corpus"))
