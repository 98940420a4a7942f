/* gmp_frames: the rules that say which frames of a stack are the user's code (gmp_frames.h,
 * docs/stacks.md "Frames from user code"). The table below is the whole policy. */
#include "gmp_frames.h"
#include "gmp_hash.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define I GMP_FRAME_INTERNAL
#define F GMP_FRAME_FRAMEWORK
#define U GMP_FRAME_USER

/* Tried in order; the first rule that matches decides. Each group names where its names come
 * from (pytorch/pytorch and python/cpython source files), so that a stack recorded on a machine
 * nobody here has seen folds by what those sources define, not by the files at hand. A file is
 * matched with every backslash read as '/': a path recorded on Windows,
 * C:\Users\me\venv\Lib\site-packages\torch\nn\modules\module.py, is matched as
 * C:/Users/me/venv/Lib/site-packages/torch/nn/modules/module.py. */
static const gmp_frame_rule rules[] = {
    /* the recorders: gpumemprof's agent; PyTorch's stack capture for memory snapshots:
     * torch/csrc/profiler/unwind/unwind.cpp (torch::unwind::unwind, ::symbolize),
     * torch/csrc/profiler/combined_traceback.cpp (torch::CapturedTraceback::gather),
     * torch/csrc/cuda/memory_snapshot.cpp (torch::cuda::(anonymous namespace)::gather,
     * gather_with_cpp) */
    {"gpumemprof", I, NULL, NULL, "libgpumemprof_agent.so*", "gpumemprof's agent"},
    {"pytorch", I, "torch::unwind::*", NULL, NULL, "PyTorch's stack capture (snapshots)"},
    {"pytorch", I, "torch::CapturedTraceback::*", NULL, NULL, "PyTorch's stack capture"},
    {"pytorch", I, "torch::cuda::*gather*", NULL, NULL, "PyTorch's stack capture"},
    {"pytorch", I, "*gather_with_cpp", NULL, NULL, "PyTorch's stack capture"},
    {"pytorch", I, "torch::profiler::*", NULL, NULL, "PyTorch's profiler (its unwinder)"},
    /* the allocators: c10/cuda/CUDACachingAllocator.cpp (c10::cuda::CUDACachingAllocator::
     * Native::DeviceCachingAllocator::malloc, NativeCachingAllocator::allocate),
     * c10/core/CachingDeviceAllocator.h, aten/src/ATen/core/CachingHostAllocator.h (pinned
     * memory), the CUDA runtime, driver and CUPTI */
    {"pytorch", I, "c10::cuda::CUDACachingAllocator::*", NULL, NULL, "PyTorch's caching allocator"},
    {"pytorch", I, "c10::CachingDeviceAllocator::*", NULL, NULL, "PyTorch's caching allocator"},
    {"pytorch", I, "c10::CachingAllocator::*", NULL, NULL, "PyTorch's caching allocator"},
    {"pytorch", I, "at::*CachingHostAllocator*", NULL, NULL, "PyTorch's pinned-memory allocator"},
    {"pytorch", I, NULL, NULL, "libc10_cuda.so*", "PyTorch's caching allocator (its library)"},
    {"cuda", I, NULL, NULL, "libcudart.so*", "the CUDA runtime"},
    {"cuda", I, NULL, NULL, "libcuda.so*", "the CUDA driver"},
    {"cuda", I, NULL, NULL, "libcupti.so*", "CUPTI"},
    /* the Python interpreter's C frames (python/cpython): the C API and its internals
     * (_PyEval_EvalFrameDefault in Python/ceval.c, _PyObject_MakeTpCall and PyObject_Call in
     * Objects/call.c, _PyObject_VectorcallTstate in Include/internal/pycore_call.h) */
    {"python", I, "_Py*", NULL, NULL, "the Python interpreter"},
    {"python", I, "Py_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "PyEval_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "PyObject_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "PyVectorcall_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "PyCFunction_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "Py*_*", NULL, NULL, "the Python interpreter (its C API: PyNumber_Add, ...)"},
    {"python", I, NULL, "*/python-3*/*", NULL, "the Python interpreter (CPython's sources)"},
    {"python", I, NULL, "*/Python-3*/*", NULL, "the Python interpreter (CPython's sources)"},
    {"python", I, NULL, "*/cpython/*.c", NULL, "the Python interpreter (CPython's sources)"},
    {"python", I, NULL, "*/cpython/*.h", NULL, "the Python interpreter (CPython's sources)"},
    /* its static functions, as a binary without CPython's file names shows them: Modules/main.c
     * (pymain_*), Python/pythonrun.c (pyrun_*, run_mod, run_eval_code_obj),
     * Objects/methodobject.c (cfunction_call, cfunction_vectorcall_*), Objects/descrobject.c
     * (method_vectorcall_*, wrapperdescr_call, wrapper_call), Objects/classobject.c
     * (method_vectorcall), Objects/typeobject.c (slot_tp_call, slot_nb_*, type_call,
     * vectorcall_method), Objects/abstract.c (binary_op1, binary_op, ternary_op, binary_iop1),
     * Objects/call.c (object_vacall), Python/ceval.c (do_call_core; function_code_fastcall in
     * 3.8's Objects/call.c), Modules/_functoolsmodule.c (partial_call, partial_vectorcall),
     * Python/context.c (context_run), Objects/genobject.c (gen_send_ex), Python/bltinmodule.c
     * (builtin_exec), Modules/_threadmodule.c (thread_run) and Python/thread_pthread.h
     * (pythread_wrapper): a Python thread's entry. Names a program of the user's may have too
     * (thread_run, type_call, binary_op) are matched only with CPython's file for them, or where
     * the file is unknown ("" below: empty or "??", as PyTorch's snapshots name CPython's frames
     * without debug information) */
    {"python", I, "pymain_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "pyrun_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "run_eval_code_obj*", NULL, NULL, "the Python interpreter"},
    {"python", I, "run_mod*", NULL, NULL, "the Python interpreter"},
    {"python", I, "cfunction_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "method_vectorcall*", NULL, NULL, "the Python interpreter"},
    {"python", I, "wrapperdescr_call", NULL, NULL, "the Python interpreter"},
    {"python", I, "wrapper_call", "", NULL, "the Python interpreter"},
    {"python", I, "wrapper_call", "*descrobject.c", NULL, "the Python interpreter"},
    {"python", I, "vectorcall_*", NULL, NULL, "the Python interpreter"},
    {"python", I, "slot_*", NULL, NULL, "the Python interpreter (type slots)"},
    {"python", I, "type_call", "", NULL, "the Python interpreter (calling a class)"},
    {"python", I, "type_call", "*typeobject.c", NULL, "the Python interpreter (calling a class)"},
    {"python", I, "binary_op", "", NULL, "the Python interpreter (operators)"},
    {"python", I, "binary_op", "*abstract.c", NULL, "the Python interpreter (operators)"},
    {"python", I, "binary_op1", "", NULL, "the Python interpreter (operators)"},
    {"python", I, "binary_op1", "*abstract.c", NULL, "the Python interpreter (operators)"},
    {"python", I, "binary_iop", "", NULL, "the Python interpreter (operators)"},
    {"python", I, "binary_iop", "*abstract.c", NULL, "the Python interpreter (operators)"},
    {"python", I, "binary_iop1", "", NULL, "the Python interpreter (operators)"},
    {"python", I, "binary_iop1", "*abstract.c", NULL, "the Python interpreter (operators)"},
    {"python", I, "ternary_op", "", NULL, "the Python interpreter (operators)"},
    {"python", I, "ternary_op", "*abstract.c", NULL, "the Python interpreter (operators)"},
    {"python", I, "object_vacall", "", NULL, "the Python interpreter"},
    {"python", I, "object_vacall", "*call.c", NULL, "the Python interpreter"},
    {"python", I, "do_call_core", "", NULL, "the Python interpreter"},
    {"python", I, "do_call_core", "*ceval.c", NULL, "the Python interpreter"},
    {"python", I, "function_code_fastcall", NULL, NULL, "the Python interpreter"},
    {"python", I, "partial_call", "", NULL, "the Python interpreter (functools.partial)"},
    {"python", I, "partial_call", "*_functoolsmodule.c", NULL,
     "the Python interpreter (functools.partial)"},
    {"python", I, "partial_vectorcall", NULL, NULL, "the Python interpreter (functools.partial)"},
    {"python", I, "context_run", "", NULL, "the Python interpreter (contextvars)"},
    {"python", I, "context_run", "*context.c", NULL, "the Python interpreter (contextvars)"},
    {"python", I, "gen_send_ex*", NULL, NULL, "the Python interpreter (generators)"},
    {"python", I, "builtin_exec*", NULL, NULL, "the Python interpreter (exec)"},
    {"python", I, "thread_run", "", NULL, "the Python interpreter: a thread's entry"},
    {"python", I, "thread_run", "*_threadmodule.c", NULL,
     "the Python interpreter: a thread's entry"},
    {"python", I, "pythread_wrapper", NULL, NULL, "the Python interpreter: a thread's entry"},
    {"python", I, NULL, NULL, "libpython3*", "the Python interpreter (its library)"},
    {"python", I, NULL, NULL, "python3*", "the Python interpreter (its executable)"},
    /* frozen modules (Python 3.11+: importlib, runpy, ...) */
    {"python", I, NULL, "<frozen *", NULL, "Python's frozen modules (import machinery, runpy)"},
    /* libffi (ffi_call, ffi_call_int, ffi_call_unix64 in src/x86/ffi64.c and unix64.S) and
     * ctypes (Modules/_ctypes/callproc.c: _ctypes_callproc, _call_function_pointer): how Python
     * calls a C library through ctypes (numba's CUDA driver calls, for one) */
    {"python", I, "ffi_call*", NULL, NULL, "libffi (ctypes' calls into C)"},
    {"python", I, "ffi_closure*", NULL, NULL, "libffi (ctypes' callbacks)"},
    {"python", I, NULL, NULL, "libffi.so*", "libffi (ctypes' calls into C)"},
    {"python", I, "_ctypes_*", NULL, NULL, "ctypes"},
    {"python", I, "_call_function_pointer", NULL, NULL, "ctypes"},
    {"python", I, NULL, NULL, "_ctypes*", "ctypes (its extension module)"},
    /* PyTorch's module call machinery (between a module's caller and its forward) */
    {"pytorch", I, "_call_impl", "*torch/nn/modules/module.py", NULL, "nn.Module.__call__"},
    {"pytorch", I, "_wrapped_call_impl", "*torch/nn/modules/module.py", NULL, "nn.Module.__call__"},
    /* torch's Python code, installed or from a source checkout: torch/_dynamo, torch/_inductor,
     * torch/_functorch (torch.compile, AOTAutograd), torch/fx, torch/nn, torch/autograd ... */
    {"pytorch", F, NULL, "*/site-packages/torch/*", NULL, "torch's Python code"},
    {"pytorch", F, NULL, "*/dist-packages/torch/*", NULL, "torch's Python code"},
    {"pytorch", F, NULL, "*/torch/_dynamo/*", NULL, "torch.compile (dynamo)"},
    {"pytorch", F, NULL, "*/torch/_inductor/*", NULL, "torch.compile (inductor)"},
    {"pytorch", F, NULL, "*/torch/_functorch/*", NULL, "torch.compile (AOTAutograd)"},
    {"pytorch", F, NULL, "*/torch/_higher_order_ops/*", NULL, "torch.compile"},
    {"pytorch", F, NULL, "*/torch/fx/*", NULL, "torch.fx"},
    {"pytorch", F, NULL, "*/torch/nn/*", NULL, "torch.nn"},
    {"pytorch", F, NULL, "*/torch/autograd/*", NULL, "torch.autograd"},
    {"pytorch", F, NULL, "*/torch/utils/*", NULL, "torch.utils"},
    {"pytorch", F, NULL, "*/torch/_tensor.py", NULL, "torch.Tensor"},
    /* code that torch.compile generates and runs: inductor's output modules (written under
     * torch/_inductor/runtime/cache_dir_utils.py's default_cache_dir, /tmp/torchinductor_USER),
     * fx GraphModules' code (torch/fx/graph_module.py: "<eval_with_key>.N"), dynamo's compiled
     * functions (torch/_dynamo/output_graph.py: __compiled_fn_N) */
    {"pytorch", F, NULL, "*torchinductor_*", NULL, "torch.compile's generated code (inductor)"},
    {"pytorch", F, NULL, "<eval_with_key>*", NULL, "torch.fx's generated code"},
    {"pytorch", F, "__compiled_fn_*", NULL, NULL, "torch.compile's compiled function"},
    /* other libraries installed for Python, and its standard library: shown only when no user
     * frame explains. Linux: .../lib/python3.X/..., Windows: ...\Lib\... under a Python
     * installation (python.org's PythonXY, conda's base and envs, uv's cpython-3.X) */
    {"python", F, NULL, "*/site-packages/*", NULL, "installed Python packages"},
    {"python", F, NULL, "*/dist-packages/*", NULL, "installed Python packages"},
    {"python", F, NULL, "*/lib/python3*", NULL, "Python's standard library"},
    {"python", F, NULL, "*/lib/pypy*", NULL, "Python's standard library (PyPy)"},
    {"python", F, NULL, "*/Python3*/Lib/*", NULL, "Python's standard library (Windows)"},
    {"python", F, NULL, "*/cpython-3*/Lib/*", NULL, "Python's standard library (Windows)"},
    {"python", F, NULL, "*conda*/Lib/*", NULL, "Python's standard library (Windows, conda)"},
    {"python", F, NULL, "*/envs/*/Lib/*", NULL, "Python's standard library (Windows, conda)"},
    /* a Python special method (__init__, __call__, __getitem__) in a file of the program's is
     * the user's code: its name only looks like libc's reserved names (below) */
    {"python", U, "__*__", "*.py", NULL, "a Python special method in the user's code"},
    {"python", U, "__*__", "<*", NULL, "a Python special method in the user's code (notebooks)"},
    /* libc, the dynamic loader, the C++ runtime */
    {"libc", I, "__*", NULL, NULL, "libc and the compiler's runtime (reserved names)"},
    {"libc", I, "_start", NULL, NULL, "libc: the program's entry"},
    {"libc", I, "start_thread", NULL, NULL, "libc: a thread's entry"},
    {"libc", I, "clone", NULL, NULL, "libc: a thread's entry"},
    {"libc", I, "clone3", NULL, NULL, "libc: a thread's entry"},
    {"libc", I, "pthread_*", NULL, NULL, "libc's threads"},
    {"libc", I, NULL, NULL, "libc.so*", "libc"},
    {"libc", I, NULL, NULL, "libc-*", "libc"},
    {"libc", I, NULL, NULL, "libpthread*", "libc's threads"},
    {"libc", I, NULL, NULL, "ld-linux*", "the dynamic loader"},
    {"c++", I, "std::*", NULL, NULL, "the C++ standard library"},
    {"c++", I, "__gnu_cxx::*", NULL, NULL, "the C++ standard library"},
    {"c++", I, "execute_native_thread_routine*", NULL, NULL, "the C++ runtime: a thread's entry"},
    {"c++", I, NULL, NULL, "libstdc++.so*", "the C++ standard library"},
    {"c++", I, NULL, NULL, "libgcc_s.so*", "the compiler's runtime"},
    /* pybind11's call machinery (pybind11/pybind11.h: cpp_function::initialize<...>'s lambda,
     * cpp_function::dispatcher; pybind11/cast.h: argument_loader<...>::call_impl): between
     * Python and a bound C++ function, like CPython's cfunction_call */
    {"pybind11", I, "pybind11::*", NULL, NULL, "pybind11's call machinery"},
    /* autograd's nodes, where a backward allocation with no Python frame opens (user code:
     * what the user's forward asked to differentiate): the generated nodes of
     * torch/csrc/autograd/generated/Functions.cpp (tools/autograd/gen_autograd_functions.py:
     * torch::autograd::generated::DivBackward0::apply), the hand-written ones of
     * torch/csrc/autograd/functions/ (AccumulateGrad, CopyBackwards, CopySlices), Python
     * functions' node (torch/csrc/autograd/python_function.cpp: PyNode::apply), and the
     * engine's casts of a node's outputs (torch/csrc/autograd/engine.cpp: validate_outputs,
     * validate_outputs_impl) */
    {"pytorch", U, "torch::autograd::generated::*::apply", NULL, NULL, "an autograd node"},
    {"pytorch", U, "torch::autograd::*Backward*::apply", NULL, NULL, "an autograd node"},
    {"pytorch", U, "torch::autograd::AccumulateGrad::apply", NULL, NULL, "an autograd node"},
    {"pytorch", U, "torch::autograd::CopySlices::apply", NULL, NULL, "an autograd node"},
    {"pytorch", U, "torch::autograd::PyNode::apply", NULL, NULL, "an autograd node"},
    {"pytorch", U, "torch::autograd::validate_outputs*", NULL, NULL,
     "the autograd engine's casts of a node's outputs"},
    /* PyTorch's own code: shown only when no user frame explains the allocation. ATen and c10
     * (operators, the dispatcher: at::_ops::*::call, c10::impl::wrap_kernel_functor_unboxed_),
     * every other torch:: namespace (torch/csrc: autograd's VariableType and engine, the
     * Python bindings' THPVariable_* and torch::autograd::dispatch_to under Tensor.to/.cuda in
     * python_variable_methods.cpp, the nodes' helpers torch::autograd::generated::details in
     * FunctionsManual.cpp, torch::dynamo's guards in torch/csrc/dynamo/guards.cpp, TorchScript),
     * dynamo's frame evaluation (torch/csrc/dynamo/eval_frame.c: dynamo__custom_eval_frame*,
     * dynamo_eval_custom_code, dynamo_call_callback; cpython_defs.c: THP_PyFrame_*) */
    {"pytorch", F, "at::*", NULL, NULL, "ATen (operators, dispatch)"},
    {"pytorch", F, "c10::*", NULL, NULL, "c10 (dispatcher, core)"},
    {"pytorch", F, "torch::*", NULL, NULL, "PyTorch's C++ (autograd, bindings, dynamo, jit)"},
    {"pytorch", F, "THP*", NULL, NULL, "PyTorch's Python bindings"},
    {"pytorch", F, "THCP*", NULL, NULL, "PyTorch's CUDA bindings (torch/csrc/cuda/Module.cpp)"},
    {"pytorch", F, "c10d::*", NULL, NULL, "torch.distributed (torch/csrc/distributed/c10d)"},
    {"pytorch", F, "dynamo_*", NULL, NULL, "dynamo's frame evaluation (torch.compile)"},
    {"pytorch", F, "custom_eval_frame*", NULL, NULL, "dynamo's frame evaluation (torch.compile)"},
    {"pytorch", F, NULL, NULL, "libtorch*", "PyTorch's libraries"},
    /* CUDA's libraries that allocate for the frameworks calling them (workspaces, buffers) */
    {"cuda", F, NULL, NULL, "libcublas*", "cuBLAS"},
    {"cuda", F, NULL, NULL, "libcudnn*", "cuDNN"},
    {"cuda", F, NULL, NULL, "libnccl*", "NCCL"},
    {"cuda", F, NULL, NULL, "libcufft*", "cuFFT"},
    {"cuda", F, NULL, NULL, "libcusparse*", "cuSPARSE"},
    {"cuda", F, NULL, NULL, "libcusolver*", "cuSOLVER"},
    {"cuda", F, NULL, NULL, "libcurand*", "cuRAND"},
    {"cuda", F, NULL, NULL, "libnvrtc*", "NVRTC"},
    {"pytorch", F, NULL, NULL, "libc10.so*", "PyTorch's libraries"},
};

#undef I
#undef F
#undef U

size_t gmp_frame_rule_count(void)
{
    return sizeof rules / sizeof rules[0];
}

const gmp_frame_rule *gmp_frame_rule_at(size_t i)
{
    return i < gmp_frame_rule_count() ? &rules[i] : NULL;
}

/* A glob of `*` and literals matches when the literal before the first `*` begins s, the one
 * after the last `*` ends it (not overlapping the first), and the literals between stars occur in
 * that order in what is left, each found leftmost (a match further right never leaves more room
 * for the next): no backtracking, and memmem for the searches. */
int gmp_frame_glob(const char *pat, const char *s, size_t n)
{
    const char *first = strchr(pat, '*');
    if (!first)
        return strlen(pat) == n && (!n || memcmp(pat, s, n) == 0);
    size_t pre = (size_t)(first - pat);
    const char *last = strrchr(first, '*');
    size_t suf = strlen(last + 1);
    if (pre + suf > n)
        return 0;
    if (!n) /* s may be NULL: only stars match */
        return pat[strspn(pat, "*")] == 0;
    if ((pre && memcmp(pat, s, pre) != 0) || (suf && memcmp(last + 1, s + n - suf, suf) != 0))
        return 0;
    size_t i = pre, end = n - suf;
    for (const char *p = first + 1; p < last;) {
        const char *q = strchr(p, '*'); /* at most last */
        size_t len = (size_t)(q - p);
        if (len) {
            const char *f = len <= end - i ? memmem(s + i, end - i, p, len) : NULL;
            if (!f)
                return 0;
            i = (size_t)(f - s) + len;
        }
        p = q + 1;
    }
    return 1;
}

static const char ANON[] = "(anonymous namespace)";

/* The bytes gmp_frame_function_head looks at; it skips the others. */
static const uint8_t head_special[256] = {['('] = 1, ['<'] = 1, ['>'] = 1, [' '] = 1};

gmp_str gmp_frame_function_head(gmp_str name)
{
    const char *p = name.ptr;
    size_t n = name.len, end = n, start = 0;
    if (!p)
        return (gmp_str){"", 0};
    int angle = 0;
    for (size_t i = 0; i < n; i++) {
        while (i < n && !head_special[(unsigned char)p[i]]) /* nothing below to do for them */
            i++;
        if (i == n)
            break;
        char c = p[i];
        if (c == '(' && n - i >= sizeof ANON - 1 && memcmp(p + i, ANON, sizeof ANON - 1) == 0) {
            i += sizeof ANON - 2;
            continue;
        }
        if (c == '(' && i >= 8 && memcmp(p + i - 8, "operator", 8) == 0 && i + 1 < n &&
            p[i + 1] == ')') {
            i++; /* operator() */
            continue;
        }
        if (c == '<' && i > 0)
            angle++;
        else if (c == '>' && angle > 0)
            angle--;
        else if (c == '(' && angle == 0 && i > 0) {
            end = i;
            break;
        } else if (c == ' ' && angle == 0 && i + 1 < n) {
            start = i + 1; /* the return type before it */
        }
    }
    if (start > end)
        start = end;
    /* template arguments right after the name: f<T> */
    if (end > start + 1 && p[end - 1] == '>') {
        int d = 0;
        for (size_t i = end; i-- > start;) {
            if (p[i] == '>')
                d++;
            else if (p[i] == '<' && --d == 0) {
                if (i > start)
                    end = i;
                break;
            }
        }
    }
    return (gmp_str){p + start, (uint32_t)(end - start)};
}

static gmp_str base_name(gmp_str s)
{
    for (uint32_t i = s.len; i-- > 0;)
        if (s.ptr[i] == '/' || s.ptr[i] == '\\')
            return (gmp_str){s.ptr + i + 1, s.len - i - 1};
    return s;
}

/* gmp_frame_glob of a non-empty s, the first byte tested first: most rules start with a literal
 * that most frames do not (the same answer: a literal first byte must match s's). */
static inline int glob_nonempty(const char *pat, gmp_str s)
{
    if (!s.len || (pat[0] != '*' && pat[0] != s.ptr[0]))
        return 0;
    return gmp_frame_glob(pat, s.ptr, s.len);
}

/* A file the recording does not know: empty, or "??" (addr2line's answer, in PyTorch's
 * snapshots). A rule's file "" matches only these. */
static int unknown_file(gmp_str file)
{
    return !file.len || (file.len == 2 && file.ptr[0] == '?' && file.ptr[1] == '?');
}

/* gmp_frame_classify with the function's head (gmp_frame_function_head) computed already. */
static gmp_frame_class classify_head(const gmp_frame_info *f, gmp_str fn,
                                     const gmp_frame_rule **rule)
{
    gmp_str mod = f->module.ptr ? base_name(f->module) : (gmp_str){"", 0};
    gmp_str file = f->file.ptr ? f->file : (gmp_str){"", 0};
    char slash[4096]; /* a Windows path, matched with '/' for every backslash */
    if (file.len && file.len <= sizeof slash && memchr(file.ptr, '\\', file.len)) {
        for (uint32_t i = 0; i < file.len; i++)
            slash[i] = file.ptr[i] == '\\' ? '/' : file.ptr[i];
        file.ptr = slash;
    }
    if (!fn.len && !file.len && !mod.len) { /* an address inside no loaded module */
        if (rule)
            *rule = NULL;
        return GMP_FRAME_INTERNAL;
    }
    for (size_t i = 0; i < gmp_frame_rule_count(); i++) {
        const gmp_frame_rule *r = &rules[i];
        if (r->function && !glob_nonempty(r->function, fn))
            continue;
        if (r->file && (r->file[0] ? !glob_nonempty(r->file, file) : !unknown_file(file)))
            continue;
        if (r->module && !glob_nonempty(r->module, mod))
            continue;
        if (rule)
            *rule = r;
        return r->cls;
    }
    if (rule)
        *rule = NULL;
    return GMP_FRAME_USER;
}

gmp_frame_class gmp_frame_classify(const gmp_frame_info *f, const gmp_frame_rule **rule)
{
    return classify_head(f, gmp_frame_function_head(f->function), rule);
}

size_t gmp_frames_fold(const uint8_t *cls, size_t n, uint8_t *hide)
{
    int user = 0;
    for (size_t i = 0; i < n && !user; i++)
        user = cls[i] == GMP_FRAME_USER;
    size_t hidden = 0;
    for (size_t i = 0; i < n; i++) {
        hide[i] = cls[i] == GMP_FRAME_INTERNAL || (cls[i] == GMP_FRAME_FRAMEWORK && user);
        hidden += hide[i];
    }
    if (hidden == n) {
        memset(hide, 0, n);
        return 0;
    }
    return hidden;
}

/* ---- categories (gmp_category) ---- */

const char *gmp_category_name(gmp_category c)
{
    static const char *const names[GMP_CAT_COUNT] = {
        "other", "parameter", "gradient", "optimizer", "activation", "temporary",
    };
    return (unsigned)c < GMP_CAT_COUNT ? names[c] : "other";
}

static int fn_is(gmp_str head, const char *pat)
{
    return head.len && gmp_frame_glob(pat, head.ptr, head.len);
}

static int file_is(const gmp_frame_info *f, const char *pat)
{
    return f->file.len && gmp_frame_glob(pat, f->file.ptr, f->file.len);
}

/* What one frame says of its allocation's category (bits of gmp_frames_category's tests). */
enum {
    FACT_GRAD = 1u << 2,
    FACT_OPTIM = 1u << 3,
    FACT_BWD = 1u << 4,
    FACT_FWD = 1u << 5,
    FACT_PARAM = 1u << 6,
    FACT_CLS = 3u, /* bits 0-1: gmp_frame_class */
};

static unsigned category_facts(const gmp_frame_info *x, gmp_str h)
{
    static const char *const param_fns[] = {
        "to",
        "cuda",
        "_apply",
        "__init__",
        "reset_parameters",
        "load_state_dict",
        "_load_from_state_dict",
        "from_pretrained",
        "load_checkpoint",
    };
    unsigned f = 0;
    if (fn_is(h, "*ccumulateGrad*"))
        f |= FACT_GRAD;
    if (file_is(x, "*/torch/optim/*") || file_is(x, "*optim*.py") || fn_is(h, "*_fused_adam*") ||
        fn_is(h, "*_foreach_*"))
        f |= FACT_OPTIM;
    if (fn_is(h, "torch::autograd::Engine::*") || fn_is(h, "torch::autograd::generated::*") ||
        fn_is(h, "*Backward*::apply"))
        f |= FACT_BWD;
    int py = x->file.len && gmp_frame_glob("*.py", x->file.ptr, x->file.len);
    if (py && fn_is(h, "forward"))
        f |= FACT_FWD;
    for (size_t k = 0; py && k < sizeof param_fns / sizeof param_fns[0]; k++)
        if (fn_is(h, param_fns[k]))
            f |= FACT_PARAM;
    return f;
}

/* Everything the rules say of one frame: its class (bits 0-1) and its category facts. */
static unsigned frame_facts(const gmp_frame_info *x)
{
    gmp_str h = gmp_frame_function_head(x->function); /* once per frame, not per pattern */
    return category_facts(x, h) | (unsigned)classify_head(x, h, NULL);
}

/* ---- the memo of frame facts (gmp_frame_memo) ---- */

#define MEMO_MAX_BYTES ((size_t)32 << 20) /* keys kept at most: then it starts afresh */

typedef struct memo_ent {
    uint64_t h;
    size_t off; /* the key in the arena: three lengths (uint32_t) then the three fields */
    uint32_t len;
    uint8_t facts, used;
} memo_ent;

struct gmp_frame_memo {
    memo_ent *t;
    size_t cap, n;
    char *arena;
    size_t alen, acap;
};

gmp_frame_memo *gmp_frame_memo_new(void)
{
    return calloc(1, sizeof(gmp_frame_memo));
}

void gmp_frame_memo_free(gmp_frame_memo *m)
{
    if (!m)
        return;
    free(m->t);
    free(m->arena);
    free(m);
}

static uint64_t key_hash(const gmp_frame_info *x)
{
    uint64_t h = 0x243f6a8885a308d3ull ^ x->function.len ^ ((uint64_t)x->file.len << 21) ^
                 ((uint64_t)x->module.len << 42);
    h = gmp_hash_bytes(h, x->function.ptr, x->function.len);
    h = gmp_hash_bytes(h, x->file.ptr, x->file.len);
    return gmp_hash_bytes(h, x->module.ptr, x->module.len);
}

static int key_eq(const gmp_frame_memo *m, const memo_ent *e, const gmp_frame_info *x)
{
    const char *k = m->arena + e->off;
    uint32_t l[3];
    memcpy(l, k, sizeof l);
    if (l[0] != x->function.len || l[1] != x->file.len || l[2] != x->module.len)
        return 0;
    k += sizeof l; /* a field's ptr may be NULL when its len is 0 */
    return (!l[0] || memcmp(k, x->function.ptr, l[0]) == 0) &&
           (!l[1] || memcmp(k + l[0], x->file.ptr, l[1]) == 0) &&
           (!l[2] || memcmp(k + l[0] + l[1], x->module.ptr, l[2]) == 0);
}

/* Keeps the facts of x; silently keeps nothing when memory runs out (they are computed again). */
static void memo_put(gmp_frame_memo *m, const gmp_frame_info *x, uint64_t h, unsigned facts)
{
    size_t klen = 3 * sizeof(uint32_t) + (size_t)x->function.len + x->file.len + x->module.len;
    if (klen > MEMO_MAX_BYTES / 4)
        return;
    if (m->alen + klen > MEMO_MAX_BYTES) { /* bounded: start afresh */
        m->alen = 0;
        m->n = 0;
        if (m->t)
            memset(m->t, 0, m->cap * sizeof *m->t);
    }
    if ((m->n + 1) * 4 > m->cap * 3) {
        size_t nc = m->cap ? m->cap * 2 : 1024;
        memo_ent *nt = calloc(nc, sizeof *nt);
        if (!nt)
            return;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->t[i].used)
                continue;
            size_t j = (size_t)m->t[i].h & (nc - 1);
            while (nt[j].used)
                j = (j + 1) & (nc - 1);
            nt[j] = m->t[i];
        }
        free(m->t);
        m->t = nt;
        m->cap = nc;
    }
    if (m->alen + klen > m->acap) {
        size_t nc = m->acap ? m->acap : 65536;
        while (nc < m->alen + klen)
            nc *= 2;
        char *na = realloc(m->arena, nc);
        if (!na)
            return;
        m->arena = na;
        m->acap = nc;
    }
    char *k = m->arena + m->alen;
    uint32_t l[3] = {x->function.len, x->file.len, x->module.len};
    memcpy(k, l, sizeof l);
    k += sizeof l;
    if (l[0])
        memcpy(k, x->function.ptr, l[0]);
    if (l[1])
        memcpy(k + l[0], x->file.ptr, l[1]);
    if (l[2])
        memcpy(k + l[0] + l[1], x->module.ptr, l[2]);
    size_t j = (size_t)h & (m->cap - 1);
    while (m->t[j].used)
        j = (j + 1) & (m->cap - 1);
    m->t[j] = (memo_ent){h, m->alen, (uint32_t)klen, (uint8_t)facts, 1};
    m->alen += klen;
    m->n++;
}

static unsigned facts_of(gmp_frame_memo *m, const gmp_frame_info *x)
{
    if (!m)
        return frame_facts(x);
    uint64_t h = key_hash(x);
    if (m->cap) {
        for (size_t j = (size_t)h & (m->cap - 1); m->t[j].used; j = (j + 1) & (m->cap - 1))
            if (m->t[j].h == h && key_eq(m, &m->t[j], x))
                return m->t[j].facts;
    }
    unsigned f = frame_facts(x);
    memo_put(m, x, h, f);
    return f;
}

/* The category from the facts of all frames and the range path (the class bits are not tested). */
gmp_category gmp_frames_category_of(unsigned all, gmp_str range)
{
    if (range.len) {
        if (gmp_frame_glob("*optim*", range.ptr, range.len))
            all |= FACT_OPTIM;
        if (gmp_frame_glob("*backward*", range.ptr, range.len))
            all |= FACT_BWD;
        if (gmp_frame_glob("*forward*", range.ptr, range.len))
            all |= FACT_FWD;
    }
    if (all & FACT_GRAD)
        return GMP_CAT_GRADIENT;
    if (all & FACT_OPTIM)
        return GMP_CAT_OPTIMIZER;
    if (all & FACT_BWD)
        return GMP_CAT_TEMPORARY;
    if (all & FACT_FWD)
        return GMP_CAT_ACTIVATION;
    if (all & FACT_PARAM)
        return GMP_CAT_PARAMETER;
    return GMP_CAT_OTHER;
}

unsigned gmp_frame_facts_memo(gmp_frame_memo *m, const gmp_frame_info *f)
{
    return facts_of(m, f);
}

gmp_frame_class gmp_frame_facts_class(unsigned facts)
{
    return (gmp_frame_class)(facts & FACT_CLS);
}

gmp_category gmp_frames_category(const gmp_frame_info *f, size_t n, gmp_str range)
{
    unsigned all = 0;
    for (size_t i = 0; i < n; i++) /* the class is not needed: the category's tests only */
        all |= category_facts(&f[i], gmp_frame_function_head(f[i].function));
    return gmp_frames_category_of(all, range);
}

/* ---- one-line names and lines (gmp_frame_short_name, gmp_frames_line) ---- */

static int ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The index just past the bracket group that opens at p[i] ('<' or '('), counting both kinds
 * of bracket; n when it never closes. */
static size_t group_end(const char *p, size_t n, size_t i)
{
    int depth = 0;
    for (; i < n; i++) {
        char c = p[i];
        if (c == '<' || c == '(')
            depth++;
        else if ((c == '>' || c == ')') && --depth == 0)
            return i + 1;
    }
    return n;
}

static size_t put(char *buf, size_t cap, size_t k, const char *s, size_t n)
{
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        buf[k++] = s[i];
    return k;
}

size_t gmp_frame_short_name(gmp_str name, char *buf, size_t cap)
{
    if (!cap)
        return 0;
    buf[0] = 0;
    if (!name.ptr || !name.len)
        return 0;
    const char *p = name.ptr;
    size_t n = name.len, k = 0;
    if (!memchr(p, ':', n) && !memchr(p, '(', n)) { /* a C or Python name: as it is */
        k = put(buf, cap, 0, p, n);
        buf[k] = 0;
        return k;
    }
    /* from where the return type ends (gmp_frame_function_head's slice of name) */
    size_t i = (size_t)(gmp_frame_function_head(name).ptr - p);
    if (i > n)
        i = 0;
    int brace = 0; /* inside {lambda(...)#1}: its parameters do not end the name */
    while (i < n) {
        char c = p[i];
        if (c == 'o' && n - i >= 8 && memcmp(p + i, "operator", 8) == 0 &&
            (i == 0 || !ident_char(p[i - 1])) && (i + 8 == n || !ident_char(p[i + 8]))) {
            k = put(buf, cap, k, p + i, 8);
            i += 8;
            if (i + 1 < n && p[i] == '(' && p[i + 1] == ')') {
                k = put(buf, cap, k, "()", 2);
                i += 2;
            } else {
                size_t j = i;
                while (j < n && p[j] && strchr("<>=!+-*/%^&|~[],", p[j]))
                    j++;
                k = put(buf, cap, k, p + i, j - i);
                i = j;
            }
            continue;
        }
        if (c == '(' && n - i >= sizeof ANON - 1 && memcmp(p + i, ANON, sizeof ANON - 1) == 0) {
            k = put(buf, cap, k, p + i, sizeof ANON - 1);
            i += sizeof ANON - 1;
            continue;
        }
        if (c == '<' && i > 0 && ident_char(p[i - 1])) { /* template arguments: left out */
            i = group_end(p, n, i);
            continue;
        }
        if (c == '(') { /* parameters: left out; the name ends unless a local entity's follows */
            size_t e = group_end(p, n, i);
            if (brace || (e + 2 <= n && p[e] == ':' && p[e + 1] == ':')) {
                i = e;
                continue;
            }
            break;
        }
        if (c == ' ' && !brace && i + 1 < n && p[i + 1] == '[') /* " [clone .cold]" */
            break;
        if (c == '{')
            brace++;
        else if (c == '}' && brace)
            brace--;
        if (k + 1 < cap)
            buf[k++] = c;
        i++;
    }
    buf[k] = 0;
    return k;
}

/* The frame a one-line display opens at: the first one shown (hide 0); n when none is. */
static size_t opening(const uint8_t *hide, size_t n)
{
    size_t k = 0;
    while (k < n && hide[k])
        k++;
    return k;
}

size_t gmp_frames_line(const gmp_str *names, const uint8_t *hide, size_t n, size_t max_items,
                       char *buf, size_t cap)
{
    if (!cap)
        return 0;
    size_t k = 0, items = 0;
    buf[0] = 0;
    size_t open = opening(hide, n), i = 0;
    char num[64];
    int all = open == n; /* nothing shown (never so from gmp_frames_fold): every frame */
    if (!all) {
        k = put(buf, cap, k, names[open].ptr, names[open].len);
        if (open) {
            int l = snprintf(num, sizeof num, " [+%zu inside", open);
            k = put(buf, cap, k, num, (size_t)l);
            for (size_t j = open; j-- > 0;)
                if (hide[j] == 2) {
                    k = put(buf, cap, k, ", via ", 6);
                    k = put(buf, cap, k, names[j].ptr, names[j].len);
                }
            k = put(buf, cap, k, "]", 1);
        }
        items = 1;
        i = open + 1;
    }
    while (i < n && (!max_items || items < max_items)) {
        if (items++)
            k = put(buf, cap, k, " < ", 3);
        if (hide[i] != 1 || all) {
            k = put(buf, cap, k, names[i].ptr, names[i].len);
            i++;
            continue;
        }
        size_t r = 0;
        while (i < n && hide[i] == 1) { /* a run, what tells it apart (2) shown in it */
            r++;
            i++;
        }
        int l = snprintf(num, sizeof num, "+%zu internal frame%s", r, r == 1 ? "" : "s");
        k = put(buf, cap, k, num, (size_t)l);
    }
    if (i < n)
        k = put(buf, cap, k, " < ...", 6);
    buf[k] = 0;
    return k;
}

static int name_eq(gmp_str a, gmp_str b)
{
    return a.len == b.len && (!a.len || memcmp(a.ptr, b.ptr, a.len) == 0);
}

int gmp_frames_apart(const gmp_str *a, uint8_t *ha, size_t na, const gmp_str *b, uint8_t *hb,
                     size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++) /* alike: the same frames shown, the same runs folded */
        if (!ha[i] != !hb[i] || (!ha[i] && !name_eq(a[i], b[i])))
            return 0;
    size_t open = opening(ha, na);
    if (open == na)
        return 0;
    /* the frame nearest the opening one inside it (what the user's frame called), then the
     * folded runs after it in the order they are shown */
    for (size_t j = open; j-- > 0;)
        if (!name_eq(a[j], b[j])) {
            ha[j] = hb[j] = 2;
            return 1;
        }
    for (size_t j = open + 1; j < na; j++)
        if (ha[j] && !name_eq(a[j], b[j])) {
            ha[j] = hb[j] = 2;
            return 1;
        }
    return 0;
}

size_t gmp_frame_text(const gmp_frame_info *f, int python, uint32_t line, uint64_t offset,
                      char *buf, size_t cap)
{
    if (!cap)
        return 0;
    gmp_str fn = f->function.ptr ? f->function : (gmp_str){"", 0};
    gmp_str file = f->file.ptr ? f->file : (gmp_str){"", 0};
    char sn[512];
    gmp_str name = fn;
    /* C++: a native frame, a snapshot's native frame (no line), or a name with "::" (never a
     * Python one); a Python frame's name is shown as recorded, whatever its bytes */
    if (fn.len && (!python || !line || memmem(fn.ptr, fn.len, "::", 2))) {
        size_t l = gmp_frame_short_name(fn, sn, sizeof sn);
        if (l)
            name = (gmp_str){sn, (uint32_t)l};
    }
    int unknown_file = !file.len || (file.len == 2 && memcmp(file.ptr, "??", 2) == 0);
    int k;
    if (python && !line && unknown_file)
        k = snprintf(buf, cap, "%.*s", (int)name.len, name.ptr);
    else if (python && !line)
        k = snprintf(buf, cap, "%.*s (%.*s)", (int)name.len, name.ptr, (int)file.len, file.ptr);
    else if (python)
        k = snprintf(buf, cap, "%.*s (%.*s:%" PRIu32 ")", (int)name.len, name.ptr, (int)file.len,
                     file.ptr, line);
    else if (fn.len) {
        gmp_str b = base_name(file);
        if (b.len && line)
            k = snprintf(buf, cap, "%.*s (%.*s:%" PRIu32 ")", (int)name.len, name.ptr, (int)b.len,
                         b.ptr, line);
        else
            k = snprintf(buf, cap, "%.*s", (int)name.len, name.ptr);
    } else if (f->module.len) {
        gmp_str b = base_name(f->module);
        k = snprintf(buf, cap, "%.*s+0x%" PRIx64, (int)b.len, b.ptr, offset);
    } else
        k = snprintf(buf, cap, "?");
    if (k < 0) {
        buf[0] = 0;
        return 0;
    }
    return (size_t)k < cap ? (size_t)k : cap - 1;
}
