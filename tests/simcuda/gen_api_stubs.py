#!/usr/bin/env python3
"""Generates the simulated CUDA libraries' whole API surface (tests/simcuda, README "API surface").

The oracle of names is the CUDA toolkit's own libraries: the exported functions of the stub
libcuda.so, of libcudart.so.N and of libcupti.so.N (`nm -D --defined-only`). Prototypes come from
the toolkit headers, read through clang's JSON AST dump (cuda.h and cuda_runtime_api.h with
__CUDA_API_VERSION_INTERNAL, which declares the legacy and _ptds/_ptsz names that cuda.h's
`#define cuMemAlloc cuMemAlloc_v2` hides; every CUPTI header that compiles as C). Callback ids come
from cupti_driver_cbid.h / cupti_runtime_cbid.h, cuGetProcAddress versions from cudaTypedefs.h
(`PFN_<name>_v<version>[_ptds|_ptsz]`).

For every name it writes a weak definition, so a (strong) definition in the hand-written sim_*.c
files wins at link time and nothing here needs to know which functions are modelled:
  * driver functions: driver-domain callbacks with a params struct of the function's parameter
    types (the layout of NVIDIA's <name>_params), then CUDA_ERROR_NOT_SUPPORTED;
  * runtime functions: runtime-domain callbacks, cudaErrorNotSupported (also the thread's last
    error);
  * CUPTI functions: CUPTI_ERROR_NOT_SUPPORTED (also cuptiGetLastError's);
  * _ptds/_ptsz variants whose plain function has the same parameters: forward to it with the
    per-thread default-stream flag set and the variant's own callback id (simcuda_ptds_begin);
  * functions that do not return a status return a zeroed value (NULL, 0); names exported by the
    toolkit library without a C prototype in its headers (graphics interop, which needs GL/EGL/VDPAU
    headers, C++-only CUPTI headers, internal entry points) are defined without parameters (they
    ignore their arguments: harmless in the SysV/AArch64 calling conventions) and return the
    library's not-supported status; InitializeInjectionNvtx* return 0 (NVTX: injection failed).
Outputs never touch output arguments. Also writes the oracle name lists the exported-API test
compares the built libraries with, and the cuGetProcAddress table.

The CUDA 12 personality's driver (--older-driver VERSION, e.g. 12080) must not export what a driver
of that version lacks: a driver function is as old as the oldest cudaTypedefs.h typedef its symbol
answers cuGetProcAddress for (cuCtxGetDevice_v2 has only PFN_cuCtxGetDevice_v13000: CUDA 13.0). The
names newer than VERSION are written to newer_libcuda.txt (name and version), a linker version
script libcuda_older.map that makes them local, and the personality's oracle oracle_libcuda_older.txt.

Usage: gen_api_stubs.py --clang CLANG --nm NM --include DIR --driver-lib LIB --runtime-lib LIB
                        --cupti-lib LIB --out DIR [--older-driver VERSION]
Python standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

NO_SUPPORT = {
    "driver": ("CUresult", "CUDA_ERROR_NOT_SUPPORTED"),
    "runtime": ("cudaError_t", "cudaErrorNotSupported"),
    "cupti": ("CUptiResult", "CUPTI_ERROR_NOT_SUPPORTED"),
}
# CUPTI headers that belong to other libraries (libcheckpoint.so, libpcsamplingutil.so)
CUPTI_OTHER_LIBS = {"cupti_checkpoint.h", "cupti_pcsampling_util.h"}


def die(msg):
    sys.stderr.write("gen_api_stubs.py: %s\n" % msg)
    sys.exit(1)


def exported_functions(nm, lib):
    """Names of the functions a shared library exports (T/W), without @version."""
    try:
        out = subprocess.check_output([nm, "-D", "--defined-only", lib], text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        die("cannot read the symbols of %s: %s" % (lib, e))
    names = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("T", "W", "i"):
            names.append(parts[2].split("@")[0])
    if not names:
        die("%s exports no functions" % lib)
    return sorted(set(names))


def ast_functions(clang, include, source, lang="c"):
    """FunctionDecls of a translation unit: name -> (return type, [param types])."""
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write(source)
        path = f.name
    try:
        cmd = [clang, "-x", lang, "-fsyntax-only", "-I", include, "-Xclang", "-ast-dump=json", path]
        r = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        die("clang failed on\n%s\n%s" % (source, r.stderr[-2000:]))
    root = json.loads(r.stdout)
    decls = {}

    def walk(nodes):
        for n in nodes:
            k = n.get("kind")
            if k == "LinkageSpecDecl":
                walk(n.get("inner", []))
            elif k == "FunctionDecl" and "name" in n:
                ftype = n["type"]["qualType"]
                params = [p["type"]["qualType"] for p in n.get("inner", [])
                          if p.get("kind") == "ParmVarDecl"]
                variadic = n.get("variadic", False)
                ret = ftype[:ftype.index("(")].strip()
                decls[n["name"]] = (ret, params, variadic)

    walk(root.get("inner", []))
    return decls


def header_compiles(clang, include, header):
    r = subprocess.run([clang, "-x", "c", "-fsyntax-only", "-I", include, "-"],
                       input="#include <%s>\n" % header, capture_output=True, text=True)
    return r.returncode == 0


def cbids(include, header, prefix):
    text = open(os.path.join(include, header)).read()
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"\b%s(\w+)\s*=\s*(\d+)" % prefix, text)}


def runtime_cbid(rt_cbids, name):
    """The runtime cbid of a function: the highest _vNNNN version of its name."""
    best = None
    for key, val in rt_cbids.items():
        m = re.fullmatch(r"(\w+)_v(\d+)", key)
        if m and m.group(1) == name:
            v = int(m.group(2))
            if best is None or v > best[0]:
                best = (v, val)
    return best[1] if best else None


def procaddr_table(include, driver_names):
    """cuGetProcAddress entries (base name, version, per-thread, symbol) from cudaTypedefs.h."""
    text = ""
    for h in sorted(os.listdir(include)):
        if re.fullmatch(r"cuda\w*Typedefs\.h", h):
            text += open(os.path.join(include, h)).read()
    bases = {}
    for b, v, p in re.findall(r"\(CUDAAPI \*PFN_(\w+?)_v(\d+)(_ptds|_ptsz)?\)", text):
        bases.setdefault(b, {}).setdefault(p, set()).add(int(v))
    names = set(driver_names)
    entries = []
    for b in sorted(bases):
        for suf, vers in sorted(bases[b].items()):
            syms = [s for s in names if s == b + suf or re.fullmatch(re.escape(b) + r"_v\d+" + re.escape(suf), s)]
            if not syms:
                continue  # an interop function the library does not export
            syms.sort(key=lambda s: 0 if s == b + suf else int(s[len(b) + 2:len(s) - len(suf)]))
            vers = sorted(vers)
            if suf:
                if len(syms) < len(vers):
                    die("cudaTypedefs.h: %s%s has versions %s, library %s" % (b, suf, vers, syms))
                syms = syms[len(syms) - len(vers):]  # per-thread variants of the newest ABIs
            elif len(syms) != len(vers):
                die("cudaTypedefs.h: %s has versions %s, library %s" % (b, vers, syms))
            for s, v in zip(syms, vers):
                entries.append((b, v, 1 if suf else 0, s))
    covered = {e[3] for e in entries}
    missing = sorted(n for n in names if n not in covered)
    return entries, missing


def c_params(params):
    return ", ".join("__typeof__(%s) p%d" % (t, i) for i, t in enumerate(params)) or "void"


def params_struct(params):
    if not params:
        return "", "NULL"
    members = " ".join("__typeof__(%s) p%d;" % (t, i) for i, t in enumerate(params))
    init = ", ".join("p%d" % i for i in range(len(params)))
    return "    struct { %s } prm = {%s};\n" % (members, init), "&prm"


def plain_of(name):
    m = re.fullmatch(r"(\w+)_(ptds|ptsz)", name)
    return m.group(1) if m else None


def generate(lib, names, decls, cb, out, header_src, extra_prelude=""):
    status_t, no_support = NO_SUPPORT[lib]
    lines = []
    counts = {"prototyped": 0, "unprototyped": 0, "forward": 0}
    unprototyped = []
    for name in names:
        d = decls.get(name)
        cbid = cb(name)
        if d is None:
            counts["unprototyped"] += 1
            unprototyped.append(name)
            if name.startswith("InitializeInjectionNvtx"):
                lines.append("int %s(void);\n__attribute__((weak)) int %s(void)\n{\n    return 0;\n}\n" % (name, name))
                continue
            hook = {"driver": "simcuda_drv_stub(%su, \"%s\", NULL)",
                    "runtime": "simcuda_rt_stub(%su, \"%s\", NULL)",
                    "cupti": "simcuda_cupti_stub()"}[lib]
            call = hook % (cbid if cbid is not None else 0, name) if lib != "cupti" else hook
            lines.append("%s %s(void);\n/* no C prototype in the headers */\n__attribute__((weak)) %s %s(void)\n{\n"
                         "    return %s;\n}\n" % (status_t, name, status_t, name, call))
            continue
        ret, params, variadic = d
        if variadic:
            die("%s is variadic: not handled" % name)
        counts["prototyped"] += 1
        proto = "__attribute__((weak)) __typeof__(%s) %s(%s)" % (ret, name, c_params(params))
        plain = plain_of(name)
        if (plain and plain in decls and decls[plain][1] == params and decls[plain][0] == ret
                and lib in ("driver", "runtime")):
            counts["forward"] += 1
            args = ", ".join("p%d" % i for i in range(len(params)))
            lines.append("%s\n{\n    int o = simcuda_ptds_begin(%du, \"%s\");\n    __typeof__(%s) r = %s(%s);\n"
                         "    simcuda_ptds_end(o);\n    return r;\n}\n"
                         % (proto, cbid if cbid is not None else 0, name, ret, plain, args))
            continue
        if ret == status_t:
            decl, ptr = params_struct(params)
            if lib == "driver":
                body = "%s    return simcuda_drv_stub(%du, \"%s\", %s);\n" % (decl, cbid if cbid is not None else 0, name, ptr)
            elif lib == "runtime":
                body = "%s    return simcuda_rt_stub(%du, \"%s\", %s);\n" % (decl, cbid if cbid is not None else 0, name, ptr)
            else:
                body = "    return simcuda_cupti_stub();\n"
        elif ret == "void":
            body = ""
        else:
            body = "    __typeof__(%s) r;\n    memset(&r, 0, sizeof(r));\n    return r;\n" % ret
        lines.append("%s\n{\n%s}\n" % (proto, body))
    hdr = ("/* Generated by tests/simcuda/gen_api_stubs.py from the CUDA toolkit's libraries and headers;\n"
           " * do not edit. Weak definitions: the hand-written simulator's definitions win. */\n")
    text = hdr + header_src + extra_prelude + "\n".join(lines)
    write_if_changed(out, text)
    return counts, unprototyped


def write_if_changed(path, text):
    try:
        if open(path).read() == text:
            return
    except OSError:
        pass
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for a in ("clang", "nm", "include", "driver-lib", "runtime-lib", "cupti-lib", "out"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--older-driver", type=int, default=0)
    a = ap.parse_args()
    inc = a.include
    os.makedirs(a.out, exist_ok=True)

    drv_names = exported_functions(a.nm, a.driver_lib)
    rt_names = exported_functions(a.nm, a.runtime_lib)
    cupti_names = exported_functions(a.nm, a.cupti_lib)

    drv_src = "#define __CUDA_API_VERSION_INTERNAL 1\n#include <cuda.h>\n#include <cudaProfiler.h>\n"
    rt_src = ("#define __CUDA_API_VERSION_INTERNAL 1\n#include <cuda_runtime_api.h>\n"
              "#include <cuda_profiler_api.h>\n")
    cupti_headers = sorted(h for h in os.listdir(inc)
                           if re.fullmatch(r"cupti\w*\.h", h) and h not in CUPTI_OTHER_LIBS
                           and not h.endswith("_cbid.h")  # id enums, unguarded, no functions
                           and header_compiles(a.clang, inc, h))
    cupti_src = "".join("#include <%s>\n" % h for h in cupti_headers)

    drv_decls = ast_functions(a.clang, inc, drv_src)
    rt_decls = ast_functions(a.clang, inc, rt_src)
    cupti_decls = ast_functions(a.clang, inc, cupti_src)

    drv_cb = cbids(inc, "cupti_driver_cbid.h", "CUPTI_DRIVER_TRACE_CBID_")
    rt_cb = cbids(inc, "cupti_runtime_cbid.h", "CUPTI_RUNTIME_TRACE_CBID_")

    prelude_common = ("#include <stddef.h>\n#include <string.h>\n#include \"sim_stubs.h\"\n"
                      "#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"\n\n")
    report = {}
    unproto = {}
    report["driver"], unproto["libcuda"] = generate("driver", drv_names, drv_decls, lambda n: drv_cb.get(n),
                                os.path.join(a.out, "sim_gen_driver.c"), drv_src + prelude_common)
    report["runtime"], unproto["libcudart"] = generate("runtime", rt_names, rt_decls, lambda n: runtime_cbid(rt_cb, n),
                                 os.path.join(a.out, "sim_gen_runtime.c"), rt_src + prelude_common)
    report["cupti"], unproto["libcupti"] = generate("cupti", cupti_names, cupti_decls, lambda n: None,
                               os.path.join(a.out, "sim_gen_cupti.c"), cupti_src + prelude_common)

    # cuGetProcAddress table (compiled into libcuda.so.1 with the driver stubs' declarations)
    entries, missing = procaddr_table(inc, drv_names)
    if missing:
        die("no cudaTypedefs.h version for %s" % ", ".join(missing))
    tab = [("/* Generated by tests/simcuda/gen_api_stubs.py from cudaTypedefs.h and the stub libcuda.so;\n"
            " * do not edit. cuGetProcAddress's table: base name, CUDA version, per-thread variant. */\n"),
           drv_src, "#include \"sim_stubs.h\"\n\n",
           "const simcuda_procaddr_entry simcuda_procaddr_table[] = {\n"]
    for b, v, pt, s in entries:
        tab.append("    {\"%s\", %d, %d, (simcuda_fn)%s},\n" % (b, v, pt, s))
    tab.append("};\nconst size_t simcuda_procaddr_count = sizeof(simcuda_procaddr_table) / "
               "sizeof(simcuda_procaddr_table[0]);\n")
    write_if_changed(os.path.join(a.out, "sim_gen_procaddr.c"), "".join(tab))

    # an older driver (the CUDA 12 personality): the names introduced after its version
    if a.older_driver:
        since = {}
        for b, v, pt, s in entries:
            since[s] = min(v, since.get(s, v))
        newer = sorted(n for n in drv_names if since[n] > a.older_driver)
        write_if_changed(os.path.join(a.out, "newer_libcuda.txt"),
                         "".join("%s %d\n" % (n, since[n]) for n in newer))
        write_if_changed(os.path.join(a.out, "oracle_libcuda_older.txt"),
                         "".join(n + "\n" for n in drv_names if n not in set(newer)))
        write_if_changed(os.path.join(a.out, "libcuda_older.map"),
                         "/* Generated by gen_api_stubs.py: libcuda.so.1 of driver %d hides the driver\n"
                         " * functions cudaTypedefs.h dates after it. */\n{\n  global: *;\n  local:\n%s};\n"
                         % (a.older_driver, "".join("    %s;\n" % n for n in newer)))

    # oracle lists for the exported-API test
    for lib, names, decls, prefix in (("libcuda", drv_names, drv_decls, "cu"),
                                      ("libcudart", rt_names, rt_decls, "cuda"),
                                      ("libcupti", cupti_names, cupti_decls, "cupti")):
        write_if_changed(os.path.join(a.out, "oracle_%s.txt" % lib), "".join(n + "\n" for n in names))
        hdr_only = sorted(n for n in decls if n.startswith(prefix) and n not in names)
        write_if_changed(os.path.join(a.out, "headers_only_%s.txt" % lib),
                         "".join(n + "\n" for n in hdr_only))
        write_if_changed(os.path.join(a.out, "unprototyped_%s.txt" % lib),
                         "".join(n + "\n" for n in unproto[lib]))
    summary = {k: dict(v, total=len(n)) for (k, v), n in
               zip(report.items(), (drv_names, rt_names, cupti_names))}
    summary["procaddr_entries"] = len(entries)
    write_if_changed(os.path.join(a.out, "gen_summary.json"), json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
