#!/usr/bin/env python3
"""The offline symbolizer (formats/symbols) against an outside oracle, LLVM's llvm-symbolizer.

Builds the programs of tests/stacks/dwarf with gcc, g++, clang and nvcc (-cudart shared -g -O1), each
with -gdwarf-4 and -gdwarf-5, then asks both symbolizers about the same addresses of every program
(and of the --extra binaries that have a line table: the stacks tests' programs and libraries, the
CLI itself; a build type without -g leaves the CLI out):
  - every call site: return address - 1, the address gmp_symbolize looks up for a recorded return
    address (sym_dump is given the return address itself);
  - up to --sample instruction addresses spread evenly over .text.
Where llvm-symbolizer names a function and a line, every frame (inlined ones first, then the
function) must have the same function, file and line. Then a few known answers (the DWARF 5 cases
of docs/stacks.md, "Symbolization (offline)", point 3: a header's function first in its unit,
nvcc's #line'd .cu file) are checked by name, so that an llvm-symbolizer that went wrong the same
way would not pass either.

  check_llvm_symbolizer.py --sym-dump BIN --src DIR --tmp DIR [--nvcc NVCC] [--extra BIN ...]
"""
import argparse
import os
import random
import shutil
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--sym-dump", required=True)
ap.add_argument("--src", required=True, help="tests/stacks/dwarf")
ap.add_argument("--tmp", required=True)
ap.add_argument("--llvm-symbolizer", default="/usr/bin/llvm-symbolizer")
ap.add_argument("--cc", default="gcc")
ap.add_argument("--cxx", default="g++")
ap.add_argument("--clang", default="clang")
ap.add_argument("--nvcc", default="")
ap.add_argument("--sample", type=int, default=1500)
ap.add_argument("--extra", nargs="*", default=[])
args = ap.parse_args()

for tool in (args.llvm_symbolizer, args.sym_dump):
    if not shutil.which(tool):
        sys.exit(f"check_llvm_symbolizer: {tool} not found (scripts/install-deps.sh installs llvm)")

shutil.rmtree(args.tmp, ignore_errors=True)
os.makedirs(args.tmp)
S = args.src
inc = ["-I" + os.path.join(S, "inc"), "-I" + S]


def build(name, cmd):
    out = os.path.join(args.tmp, name)
    r = subprocess.run(cmd + ["-o", out], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_llvm_symbolizer: building {name} failed:\n{' '.join(cmd)}\n{r.stderr}")
    return out


binaries = []
for v in (4, 5):
    g = [f"-gdwarf-{v}", "-O1", "-g"]
    binaries.append(build(f"gcc-dwarf{v}", [args.cc] + g + inc + [os.path.join(S, "main.c"),
                                                                  os.path.join(S, "other.c")]))
    binaries.append(build(f"gxx-dwarf{v}", [args.cxx] + g + inc + [os.path.join(S, "cxx.cc")]))
    if shutil.which(args.clang):
        binaries.append(build(f"clang-dwarf{v}", [args.clang] + g + inc +
                              [os.path.join(S, "main.c"), os.path.join(S, "other.c")]))
    if args.nvcc:
        binaries.append(build(f"nvcc-dwarf{v}", [args.nvcc, "-cudart", "shared", "-g", "-O1",
                                                 "-Xcompiler", f"-gdwarf-{v}"] + inc +
                              [os.path.join(S, "callsite.cu")]))
for b in args.extra:
    if not os.path.isfile(b):
        sys.exit(f"check_llvm_symbolizer: {b} not found (not built?)")


def has_line_table(path):
    """The file has a .debug_line section (a build type without -g, e.g. Release, has none)."""
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    return " .debug_line " in out


# the programs built above always have line tables; an --extra binary is compared only when it has
# one (the CLI and test_symbolize follow the build type), and is named when it is left out
with_lines = [b for b in args.extra if has_line_table(b)]
for b in args.extra:
    if b not in with_lines:
        print(f"{os.path.basename(b)}: no .debug_line (built without -g): not compared")
if args.extra and not with_lines:  # test_symbolize and the stacks programs are built with -g
    sys.exit("check_llvm_symbolizer: no --extra binary has a line table")
binaries += with_lines


def text_addresses(path):
    """(call sites as return address - 1, all instruction addresses) of the file's code."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", path],
                         capture_output=True, text=True, check=True).stdout
    insns = []
    for line in dis.split("\n"):
        if line.startswith("  ") and ":\t" in line:
            a, rest = line.split(":\t", 1)
            insns.append((int(a, 16), rest.strip()))
    calls = [insns[i + 1][0] - 1 for i in range(len(insns) - 1) if insns[i][1].startswith("call")]
    return calls, [a for a, _ in insns]


def parse(out, llvm):
    """Blocks of 'function\\nfile:line[:column]' pairs, one block per address."""
    res = []
    for block in out.strip("\n").split("\n\n"):
        lines = block.split("\n")
        frames = []
        for i in range(0, len(lines) - 1, 2):
            loc = lines[i + 1]
            parts = loc.rsplit(":", 2 if llvm else 1)
            frames.append((lines[i], parts[0], int(parts[1])))
        res.append(frames)
    return res


failures = []
total = {"compared": 0, "skipped": 0}
answers = {}
for b in binaries:
    calls, insns = text_addresses(b)
    step = max(1, len(insns) // args.sample)
    addrs = sorted(set(calls) | set(insns[::step]))
    q = "".join(f"0x{a:x}\n" for a in addrs)
    llvm = parse(subprocess.run([args.llvm_symbolizer, "--obj=" + b, "--inlines", "--demangle"],
                                input=q, capture_output=True, text=True, check=True).stdout, True)
    # sym_dump resolves ADDR+1 as a return address: the lookup is at ADDR
    ours = parse(subprocess.run([args.sym_dump, b], input=q, capture_output=True, text=True,
                                check=True).stdout, False)
    if len(llvm) != len(addrs) or len(ours) != len(addrs):
        failures.append(f"{b}: {len(addrs)} addresses, {len(llvm)} answers from llvm-symbolizer, "
                        f"{len(ours)} from sym_dump")
        continue
    n = bad = 0
    for a, o, ll in zip(addrs, ours, llvm):
        answers[(os.path.basename(b), a)] = o
        if ll[-1][0] == "??" or ll[0][2] == 0:
            total["skipped"] += 1  # no function or no line known to llvm-symbolizer: padding, CRT
            continue
        n += 1
        if o != ll:
            bad += 1
            if bad <= 5:
                failures.append(f"{os.path.basename(b)} 0x{a:x}:\n    ours {o}\n    llvm {ll}")
    total["compared"] += n
    ncalls = len(calls)
    print(f"{os.path.basename(b)}: {n - bad}/{n} addresses agree ({ncalls} call sites, "
          f"{len(addrs)} asked)")
    if n < 10:
        failures.append(f"{b}: only {n} addresses with a line to compare")
    if bad:
        failures.append(f"{os.path.basename(b)}: {bad} of {n} addresses differ")


def known(binary, function, want_file):
    """The addresses inside function (by the symbol table) name want_file for it (their outermost
    frame; inlined frames are the headers')."""
    path = os.path.join(args.tmp, binary)
    if not os.path.exists(path):
        return
    syms = subprocess.run(["nm", "-C", "--defined-only", "-S", path], capture_output=True,
                          text=True, check=True).stdout
    lo = hi = None
    for line in syms.split("\n"):
        f = line.split(None, 3)
        if len(f) == 4 and f[3].startswith(function):
            lo, hi = int(f[0], 16), int(f[0], 16) + int(f[1], 16)
    if lo is None:
        failures.append(f"{binary}: no symbol {function}")
        return
    seen = [fr for (bn, a), fr in answers.items() if bn == binary and lo <= a < hi]
    if not seen:
        failures.append(f"{binary}: no address in {function}")
    for fr in seen:
        if not fr[-1][0].startswith(function) or os.path.basename(fr[-1][1]) != want_file:
            failures.append(f"{binary}: {function}: {fr[-1]}, want {want_file}")


# a header's function that comes first in its unit: gcc's DWARF 5 file 1 (docs/stacks.md, point 3)
known("gcc-dwarf5", "first_in_header", "first.h")
known("gcc-dwarf4", "first_in_header", "first.h")
# nvcc's host code: the .cu file its #line directives name, not tmpxft_*.cudafe1.cpp (docs/stacks.md, point 3)
for v in (4, 5):
    known(f"nvcc-dwarf{v}", "alloc_here", "callsite.cu")
    known(f"nvcc-dwarf{v}", "outer_alloc", "callsite.cu")



def section(path, name):
    """(file offset, size) of an ELF section, by readelf."""
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.split("\n"):
        f = line.replace("[ ", "[").split()
        if len(f) > 6 and f[1] == name:
            return int(f[4], 16), int(f[5], 16)
    return None


# Untrusted files: line tables with bytes changed at random (and cut lengths) must give answers,
# never a crash or a hang (run under ASan in the sanitizer build).
rng = random.Random(20)
mutated = 0
for b in binaries[:8]:
    sec = section(b, ".debug_line")
    if not sec:
        continue
    data = bytearray(open(b, "rb").read())
    calls, _ = text_addresses(b)
    q = "".join(f"0x{a:x}\n" for a in calls[:20])
    for i in range(12):
        d = bytearray(data)
        off, size = sec
        for _ in range(rng.choice((1, 4, 32))):
            d[off + rng.randrange(size)] = rng.randrange(256)
        if i % 3 == 0:  # a huge length field at the start of the table
            d[off:off + 4] = rng.choice((b"\xff\xff\xff\xff", b"\xfe\xff\xff\x7f"))
        m = os.path.join(args.tmp, "mutated")
        with open(m, "wb") as fh:
            fh.write(d)
        r = subprocess.run([args.sym_dump, m], input=q, capture_output=True, text=True, timeout=30,
                           errors="replace")
        mutated += 1
        if r.returncode != 0 or r.stdout.count("\n\n") != q.count("\n"):
            failures.append(f"{b} with a damaged .debug_line ({i}): exit {r.returncode}, "
                            f"{r.stderr[-400:]}")
print(f"{mutated} damaged line tables read without a failure")
print(f"compared {total['compared']} addresses in {len(binaries)} files "
      f"({total['skipped']} without a function or line in llvm-symbolizer's answer)")
if failures:
    print("FAIL\n" + "\n".join(failures))
    sys.exit(1)
print("ok")
