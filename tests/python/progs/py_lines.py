"""tests/python: gmp_pyframes' line and name readers against the interpreter's own answers.

argv: LIBPY_LINES
Every code object of a few standard-library modules and of a synthetic source (non-ASCII names and
file name, 1-, 2- and 4-byte strings, lines past 100,000, lines that go backwards, generators,
lambdas, comprehensions): the line at each instruction offset must be the one the interpreter
gives (3.10+: co_lines(); 3.9: dis.findlinestarts), the file co_filename and the name co_qualname
(3.11+) or co_name. Then the decoders on random tables. From 3.13, the offsets the reader took from
the interpreter's _PyRuntime.debug_offsets must equal the table printed from the same version's
headers (prints `py_lines: 3.13 debug offsets = table`). Prints `py_lines: ok N` or the mismatches.
"""
import ctypes
import dis
import importlib
import sys

minor = sys.version_info[1]
lib = ctypes.CDLL(sys.argv[1])
lib.lines_of.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                         ctypes.POINTER(ctypes.c_int), ctypes.c_int]
lib.names_of.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_int]
lib.fuzz_tables.restype = ctypes.c_long
if not lib.lines_init(minor):
    sys.exit("py_lines: the layouts of 3.%d do not check out" % minor)

SYNTH = "\n" * 3 + '''
import functools
def plain(a):
    b = a + 1
    return (b +
            2)
class Κλάση:
    def μέθοδος(self):
        return [x * 2 for x in range(3)]
    class 内部:
        def 函数(self):
            yield 1
            yield (2,
                   3)
def 𠀀(x):
    return lambda y: (x +
                      y)
@functools.lru_cache(
    maxsize=None)
def decorated(
        a,
        b):
    try:
        return a / b
    except ZeroDivisionError:
        return None
''' + "\n" * 100000 + '''
def far_away():
    x = 1
    return x
'''


def codes():
    out = []
    def add(co):
        out.append(co)
        for c in co.co_consts:
            if hasattr(c, "co_code"):
                add(c)
    for name in ("json.decoder", "json.encoder", "argparse", "dataclasses", "email.message",
                 "collections", "asyncio.tasks"):
        m = importlib.import_module(name)
        with open(m.__file__, encoding="utf-8") as f:
            add(compile(f.read(), m.__file__, "exec"))
    add(compile(SYNTH, "/tmp/fïlé_名_𝔣.py", "exec"))
    return out


def expected_lines(co):
    n = len(co.co_code)
    if minor >= 10:
        exp = {}
        for start, end, line in co.co_lines():
            for a in range(start, end, 2):
                exp[a] = line or 0
        return [exp.get(a, 0) for a in range(0, n, 2)]
    starts = list(dis.findlinestarts(co))
    lines, k, cur = [], 0, co.co_firstlineno
    for a in range(0, n, 2):
        while k < len(starts) and starts[k][0] <= a:
            cur = starts[k][1]
            k += 1
        lines.append(cur)
    return lines


bad = []
count = 0
for co in codes():
    want = expected_lines(co)
    n = len(want)
    addrs = (ctypes.c_int * n)(*range(0, 2 * n, 2))
    got = (ctypes.c_int * n)()
    lib.lines_of(id(co), addrs, got, n)
    for i in range(n):
        count += 1
        if got[i] != want[i] and len(bad) < 20:
            bad.append("%s %s offset %d: line %d, want %d" % (co.co_filename, co.co_name, 2 * i,
                                                             got[i], want[i]))
    fb, nb = ctypes.create_string_buffer(8192), ctypes.create_string_buffer(8192)
    if lib.names_of(id(co), fb, 8192, nb, 8192) != 0:
        bad.append("%s: names not read" % co.co_name)
        continue
    name = co.co_qualname if minor >= 11 else co.co_name
    if fb.value.decode("utf-8") != co.co_filename or nb.value.decode("utf-8") != name:
        bad.append("names: %r %r, want %r %r" % (fb.value, nb.value, co.co_filename, name))
    count += 1
for seed in range(1, 9):
    if lib.fuzz_tables(minor, seed, 500) < 0:
        bad.append("random tables: a negative line (seed %d)" % seed)
lib.layout_vs_table.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
if minor >= 13:
    diff = ctypes.create_string_buffer(2048)
    nd = lib.layout_vs_table(minor, diff, 2048)
    if nd == 0:
        print("py_lines: 3.%d debug offsets = table" % minor)
    elif nd > 0:
        bad.append("3.%d: debug offsets differ from the table (got/want): %s"
                   % (minor, diff.value.decode()))
    else:
        print("py_lines: 3.%d has no table to compare with" % minor)
if bad:
    print("py_lines: FAIL\n  " + "\n  ".join(bad[:40]))
    sys.exit(1)
print("py_lines: ok %d" % count)
