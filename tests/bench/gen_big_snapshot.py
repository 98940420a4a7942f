#!/usr/bin/env python3
"""gen_big_snapshot.py: a large PyTorch memory snapshot made from a real one, for benchmarks.

    python3 tests/bench/gen_big_snapshot.py SRC.pickle OUT.pickle -n N [--fresh-frames]

OUT holds SRC's trace repeated N times, copy k shifted by k spans in time (time_us) and in address
(every 'addr' of a trace entry, every 'address' of a segment and of a block), with the final
`segments` made consistent with it: each copy lives in its own address range with its own copy of
SRC's memory before the window, so the state at the dump is N shifted copies of SRC's final
segments (and the external annotations are repeated with the trace). An importer that reconstructs
the memory before the window (docs/import.md) therefore finds N times SRC's, and every copy's
peak is SRC's plus what the copies before it left alive.

Sharing follows PyTorch (torch/csrc/cuda/Module.cpp builds one dict per distinct frame and one
frames list per captured traceback, shared by the entries and blocks that carry it, and pickle
writes each shared object once and then a memo reference, BINGET/LONG_BINGET): strings and frame
dicts are written once for the whole file; frames lists are written once too, as if every copy
repeated the same tracebacks (that is what makes N=100 about 117 MB from the 3.2 MB train-step
snapshot), or, with --fresh-frames, once per copy (each copy's entries and blocks refer to their
own lists, like a long run whose every allocation captured a new traceback: a larger file whose
memo grows with N). Every container and string is memoized (MEMOIZE) as CPython's pickler does,
lists and dicts are filled in batches of 1000 (APPENDS/SETITEMS), protocol 4 with 64 KiB FRAMEs.

The file is written as a stream: one copy of each section is compiled into a template (bytes with
holes for the shifted integers and the per-copy memo references), and the copies are written one
after the other, so memory does not grow with N (N=1000, about 1.2 GB and 19 M entries, needs
about as much memory as loading SRC). Standard library only. The source is read with an unpickler
that refuses every global (it holds plain data only). Test and benchmark input only: nothing here
is installed.
"""
import argparse
import io
import pickle
import struct
import sys

FRAME_SIZE = 64 * 1024
BATCH = 1000


class PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("%s.%s: a snapshot holds plain data only" % (module, name))


def encode_long(x):
    if x == 0:
        return b""
    nbytes = (x.bit_length() >> 3) + 1
    r = x.to_bytes(nbytes, "little", signed=True)
    if x < 0 and nbytes > 1 and r[-1] == 0xFF and (r[-2] & 0x80):
        r = r[:-1]
    return r


def int_op(x):
    if 0 <= x <= 0xFF:
        return b"K" + bytes((x,))
    if 0 <= x <= 0xFFFF:
        return b"M" + struct.pack("<H", x)
    if -0x80000000 <= x <= 0x7FFFFFFF:
        return b"J" + struct.pack("<i", x)
    e = encode_long(x)
    if len(e) < 256:
        return b"\x8a" + bytes((len(e),)) + e
    return b"\x8b" + struct.pack("<i", len(e)) + e


def get_op(i):
    return b"h" + bytes((i,)) if i < 256 else b"j" + struct.pack("<I", i)


class Out:
    """Framed protocol-4 output: opcodes are appended whole, frames cut between them."""

    def __init__(self, f):
        self.f = f
        self.buf = bytearray()
        self.bytes = 0

    def put(self, b):
        self.buf += b
        if len(self.buf) >= FRAME_SIZE:
            self.flush()

    def flush(self):
        if self.buf:
            self.f.write(b"\x95" + struct.pack("<Q", len(self.buf)))
            self.f.write(self.buf)
            self.bytes += 9 + len(self.buf)
            self.buf = bytearray()


class Encoder:
    """Encodes plain values like CPython's pickler (protocol 4). Objects are memoized by identity;
    `per_copy` holds the ids of objects written again for every copy (their memo entry is valid
    only within the copy's section, whose first memo index is `base`). While `parts` is a list,
    shifted integers and per-copy references are recorded there as holes, so that the section can
    be replayed for other copies."""

    def __init__(self, out, per_copy, shift_keys):
        self.out = out
        self.memo = {}  # id -> memo index
        self.n = 0  # memo entries so far
        self.per_copy = per_copy
        self.shift_keys = shift_keys  # key -> 't' (time) or 'a' (address)
        self.parts = None
        self.base = 0
        self.seg_ref = None  # id -> relative index in this copy's segments section (fresh frames)

    def emit(self, b):
        if self.parts is None:
            self.out.put(b)
        elif self.parts and isinstance(self.parts[-1], bytearray):
            self.parts[-1] += b
        else:
            self.parts.append(bytearray(b))

    def hole(self, kind, value):
        self.parts.append((kind, value))

    def memoize(self, obj):
        self.memo[id(obj)] = self.n
        self.n += 1
        self.emit(b"\x94")

    def ref(self, obj):
        """Writes a GET if obj is already in the memo (for this copy); returns whether it did."""
        i = id(obj)
        if i in self.per_copy:
            if self.seg_ref is not None and i in self.seg_ref:
                if self.parts is not None:
                    self.hole("s", self.seg_ref[i])
                else:
                    self.emit(get_op(self.seg_base + self.seg_ref[i]))
                return True
            j = self.memo.get(i)
            if j is None or j < self.base:
                return False
            if self.parts is not None:
                self.hole("m", j - self.base)
            else:
                self.emit(get_op(j))
            return True
        j = self.memo.get(i)
        if j is None:
            return False
        self.emit(get_op(j))
        return True

    def int_value(self, x, kind, shift):
        if kind and x:
            if self.parts is not None:
                self.hole(kind, x)
                return
            x += shift[kind]
        self.emit(int_op(x))

    def save(self, obj, shift, kind=None):
        t = type(obj)
        if t is int:
            return self.int_value(obj, kind, shift)
        if obj is None:
            return self.emit(b"N")
        if t is bool:
            return self.emit(b"\x88" if obj else b"\x89")
        if t is float:
            return self.emit(b"G" + struct.pack(">d", obj))
        if self.ref(obj):
            return
        if t is str:
            e = obj.encode("utf-8", "surrogatepass")
            if len(e) <= 0xFF:
                self.emit(b"\x8c" + bytes((len(e),)) + e)
            else:
                self.emit(b"X" + struct.pack("<I", len(e)) + e)
            return self.memoize(obj)
        if t is bytes:
            if len(obj) <= 0xFF:
                self.emit(b"C" + bytes((len(obj),)) + obj)
            else:
                self.emit(b"B" + struct.pack("<I", len(obj)) + obj)
            return self.memoize(obj)
        if t is tuple:
            if not obj:
                return self.emit(b")")
            if len(obj) <= 3:
                for x in obj:
                    self.save(x, shift)
                self.emit(bytes((0x84 + len(obj),)))
            else:
                self.emit(b"(")
                for x in obj:
                    self.save(x, shift)
                self.emit(b"t")
            return self.memoize(obj)
        if t is list:
            self.emit(b"]")
            self.memoize(obj)
            return self.items(obj, shift)
        if t is dict:
            self.emit(b"}")
            self.memoize(obj)
            items = list(obj.items())
            for i in range(0, len(items), BATCH):
                batch = items[i : i + BATCH]
                if len(batch) > 1:
                    self.emit(b"(")
                for k, v in batch:
                    self.save(k, shift)
                    self.save(v, shift, self.shift_keys.get(k) if type(k) is str else None)
                self.emit(b"u" if len(batch) > 1 else b"s")
            return
        raise TypeError("a snapshot holds plain data only, not %s" % t.__name__)

    def items(self, seq, shift):
        for i in range(0, len(seq), BATCH):
            batch = seq[i : i + BATCH]
            if len(batch) > 1:
                self.emit(b"(")
            for x in batch:
                self.save(x, shift)
            self.emit(b"e" if len(batch) > 1 else b"a")


def replay(enc, parts, shift, base, seg_base):
    put = enc.out.put
    for p in parts:
        if type(p) is bytearray:
            put(p)
            continue
        kind, v = p
        if kind == "m":
            put(get_op(base + v))
        elif kind == "s":
            put(get_op(seg_base + v))
        else:
            put(int_op(v + shift[kind]))


def copies_of(enc, n, items, shifts, seg_bases=None, seg_rels=None, keep_refs=None):
    """Writes items (one copy of a section) n times, as batches appended to the list that is
    open. Copy 0 is written directly (it memoizes the objects shared by the whole file), copy 1 is
    compiled into a template and replayed, copies 2.. are replayed from the template. With
    seg_rels (--fresh-frames), references to the frames lists of copy k's segments go to
    seg_bases[k] + their relative index (seg_rels[0] for copy 0, seg_rels[1] for the others).
    Returns each copy's first memo index and, for the ids in keep_refs, their memo index relative
    to it in copy 0 and in copy 1 (the same for every copy from 1 on)."""
    bases, rels = [], [{}, {}]
    parts, per_copy_memo = None, 0
    for k in range(n):
        start = enc.base = enc.n
        bases.append(start)
        if seg_rels is not None:
            enc.seg_ref = seg_rels[0 if k == 0 else 1]
            enc.seg_base = seg_bases[k]
        if k >= 2:
            replay(enc, parts, shifts[k], start, enc.seg_base)
            enc.n += per_copy_memo
            continue
        if k == 1:
            enc.parts = []
        enc.items(items, shifts[k])
        if k == 1:
            parts, enc.parts = enc.parts, None
            per_copy_memo = enc.n - start
            replay(enc, parts, shifts[1], start, enc.seg_base)
        if keep_refs is not None:
            for i in keep_refs:
                j = enc.memo.get(i)
                if j is not None and j >= start:
                    rels[k][i] = j - start
    enc.seg_ref = None
    return bases, rels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("-n", type=int, default=100, help="copies of the trace (default 100)")
    ap.add_argument(
        "--fresh-frames",
        action="store_true",
        help="each copy has its own frames lists (default: shared by all copies)",
    )
    ap.add_argument("--gap-us", type=int, default=1000, help="time between copies (default 1000)")
    a = ap.parse_args()
    if a.n < 1:
        sys.exit("gen_big_snapshot: -n must be at least 1")
    with open(a.src, "rb") as f:
        snap = PlainUnpickler(f).load()
    if type(snap) is not dict or "segments" not in snap or "device_traces" not in snap:
        sys.exit("gen_big_snapshot: %s: not a snapshot with segments and device_traces" % a.src)
    segs = snap["segments"]
    traces = snap["device_traces"]
    notes = snap.get("external_annotations") or []

    # time and address spans of one copy
    times = [e["time_us"] for t in traces for e in t if type(e.get("time_us")) is int]
    times += [x["time_us"] for x in notes if type(x) is dict and type(x.get("time_us")) is int]
    dt = (max(times) - min(times) + a.gap_us) if times else 0
    lo, hi = None, None

    def span(addr, size):
        nonlocal lo, hi
        if type(addr) is int and addr > 0:
            lo = addr if lo is None else min(lo, addr)
            e = addr + (size if type(size) is int and size > 0 else 0)
            hi = e if hi is None else max(hi, e)

    for t in traces:
        for e in t:
            span(e.get("addr"), e.get("size"))
    for s in segs:
        span(s.get("address"), s.get("total_size"))
    da = 0
    if lo is not None:
        da = 1 << 30
        while da < hi - lo + (1 << 30):
            da <<= 1
    shifts = [{"t": k * dt, "a": k * da} for k in range(a.n)]

    # what is written once per copy: every container except frame dicts (and, unless
    # --fresh-frames, frames lists); strings and frame dicts are shared by the whole file
    frames_lists, frame_dicts = set(), set()

    def note_frames(d):
        fr = d.get("frames")
        if type(fr) is list:
            frames_lists.add(id(fr))
            for f in fr:
                frame_dicts.add(id(f))

    for t in traces:
        for e in t:
            if type(e) is dict:
                note_frames(e)
    for s in segs:
        if type(s) is dict:
            note_frames(s)
            for b in s.get("blocks") or []:
                if type(b) is dict:
                    note_frames(b)
                    for h in b.get("history") or []:
                        if type(h) is dict:
                            note_frames(h)
    per_copy = set()

    def mark(o):
        if type(o) in (list, dict, tuple) and id(o) not in frame_dicts:
            if id(o) in frames_lists and not a.fresh_frames:
                return
            if id(o) in per_copy:
                return
            per_copy.add(id(o))
            for x in o.values() if type(o) is dict else o:
                mark(x)

    for s in segs:
        mark(s)
    for t in traces:
        for e in t:
            mark(e)
    for x in notes:
        mark(x)

    with open(a.out, "wb") as f:
        f.write(b"\x80\x04")
        out = Out(f)
        enc = Encoder(out, per_copy, {"time_us": "t", "addr": "a", "address": "a"})
        enc.seg_base = 0
        out.put(b"}")
        enc.memo[id(snap)] = enc.n
        enc.n += 1
        out.put(b"\x94")
        seg_bases, seg_rels = None, None
        for key, value in snap.items():
            enc.save(key, shifts[0])
            if key == "segments" and type(value) is list:
                out.put(b"]\x94")
                enc.n += 1
                seg_bases, seg_rels = copies_of(
                    enc, a.n, value, shifts, keep_refs=frames_lists if a.fresh_frames else None
                )
            elif key == "device_traces" and type(value) is list:
                out.put(b"]\x94")
                enc.n += 1
                for t in value:
                    out.put(b"]\x94")
                    enc.n += 1
                    if type(t) is list and t:
                        copies_of(enc, a.n, t, shifts, seg_bases, seg_rels if a.fresh_frames else None)
                    out.put(b"a")
            elif key == "external_annotations" and type(value) is list:
                out.put(b"]\x94")
                enc.n += 1
                copies_of(enc, a.n, value, shifts)
            else:
                enc.save(value, shifts[0])
            out.put(b"s")
        out.put(b".")
        out.flush()
    entries = sum(len(t) for t in traces) * a.n
    print(
        "gen_big_snapshot: %s: %d copies of %s: %d trace entries, %d segments, %.1f MB"
        % (a.out, a.n, a.src, entries, len(segs) * a.n, (out.bytes + 2) / 1e6)
    )


if __name__ == "__main__":
    main()
