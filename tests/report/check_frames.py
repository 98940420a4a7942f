#!/usr/bin/env python3
"""Stacks start at the user's code (docs/stacks.md, "Frames from user code"), checked on
PyTorch snapshots through `gpumemprof report` (stdlib only).

    check_frames.py MODE GPUMEMPROF DATA_DIR WORK_DIR

real       the four real snapshots of tests/data/torch-snapshots (other people's runs): on every
           device, the top rows of "Live at the peak, by call stack" and "by user frame" start at
           user code, read from the report's JSON by the definition below (not by gpumemprof's
           rules); the text rows show no C++ parameter list or template argument, every row of a
           by-stack table looks different, and stacks that look alike once folded are told apart
           by a frame ("via"), never shown unfolded (no row opens at PyTorch's recorder); the
           HTML view and speedscope name no frame "(??:0)".
synthetic  snapshots written here with pickle, shaped as PyTorch writes them (frames innermost
           first; C++ frames with no line, "??" for an unknown file) for cases the real files
           lack: recorded on Windows (backslashes, drive letters), torch.compile (dynamo,
           AOTAutograd, inductor's generated module, fx's <eval_with_key>, __compiled_fn_N,
           the compiled backward on autograd's thread), notebooks (ipykernel cells,
           <ipython-input-...>), inference with .to() and empty_cache, pybind11 bindings: each
           allocation's row must open at the frame written here as the user's, and the by-user-
           frame table must hold exactly those frames.

User code, by definition here: a Python frame (a line > 0) whose file is not an installed
package (site-packages, dist-packages), not the standard library (lib/python3.X, Windows' Lib\\
of a Python installation), not torch's own (torch/...) and not code torch.compile generates
(torchinductor_*, <eval_with_key>, <frozen ...>); or, on autograd's thread where PyTorch records
no Python frame, the autograd node (torch::autograd::generated::*::apply, ...Backward...::apply,
AccumulateGrad, PyNode, validate_outputs)."""
import json
import os
import pickle
import re
import subprocess
import sys

MiB = 1 << 20


def fail(msg):
    sys.exit("FAIL: " + msg)


def run(args):
    p = subprocess.run(args, capture_output=True)
    if p.returncode != 0:
        fail("%s: exit %d\n%s" % (" ".join(args), p.returncode, p.stderr.decode()))
    return p.stdout.decode()


def norm(path):
    return (path or "").replace("\\", "/")


def user_frame(fr):
    fn, file = fr.get("function") or "", norm(fr.get("file"))
    if fr.get("line"):
        if re.search(r"/(site|dist)-packages/|/lib/python3|/Lib/|/torch/|torchinductor_", file):
            return False
        return not file.startswith("<eval_with_key>") and not file.startswith("<frozen")
    return bool(re.match(r"torch::autograd::(generated::\w+::apply|\w*Backward\w*::apply|"
                         r"AccumulateGrad::apply|PyNode::apply|validate_outputs)", fn))


def first_shown(stack):
    shown = [f for f in stack if not f.get("internal")]
    return shown[0] if shown else None


def display(fr):
    """The report's one-line name of a Python frame: "f (file:line)"."""
    return "%s (%s:%d)" % (fr["function"], fr["file"], fr["line"])


def report(gmp, path, *extra):
    return json.loads(run([gmp, "report", path, "-f", "json", "--top", "0"] + list(extra)))


def text_rows(text, heading):
    rows = []
    for sec in text.split(heading)[1:]:
        body = sec.split("\n\n")[0].splitlines()[2:]
        rows.append([re.sub(r"^\s*\S+ \S+\s+\S+%\s+\d+  ", "", ln) for ln in body])
    return rows


def check_text(name, text):
    # one-line names: no C++ parameter lists or template arguments (PyTorch's signatures run to
    # thousands of characters), and no row opens at PyTorch's recorder or allocator
    for bad in ("c10::ArrayRef<", "std::optional<", "(c10::DispatchKeySet", "_object*",
                "(signed char"):
        if bad in text:
            line = [ln for ln in text.splitlines() if bad in ln][0]
            fail("%s: a full C++ signature in the text: %s" % (name, line[:300]))
    for table in text_rows(text, "Live at the peak, by call stack"):
        if len(set(table)) != len(table):
            fail("%s: two stacks shown alike:\n%s" % (name, "\n".join(table)))
        for r in table:
            if re.match(r"(torch::unwind|torch::CapturedTraceback|c10::cuda::|\+\d+ internal)", r):
                fail("%s: a row opens at PyTorch's recorder: %s" % (name, r[:300]))


class PlainData(pickle.Unpickler):
    """A PyTorch snapshot is plain data: any global in it is refused."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s refused" % (module, name))


def without_annotations(path, work):
    """A copy of a snapshot without its record_function annotations (Python's pickle module)."""
    with open(path, "rb") as f:
        doc = PlainData(f).load()
    doc.pop("external_annotations", None)
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "no-annotations-" + os.path.basename(path))
    with open(out, "wb") as f:
        pickle.dump(doc, f, protocol=4)
    return out


def mode_real(gmp, data, work):
    snaps = sorted(f for f in os.listdir(data) if f.endswith(".pickle"))
    if len(snaps) != 4:
        fail("%d snapshots in %s" % (len(snaps), data))
    vias = 0
    for snap in snaps:
        path = os.path.join(data, snap)
        doc = report(gmp, path, "--by", "stack")
        byframe = report(gmp, path)
        # the by-user-frame table is the report's when no allocation was made inside a range:
        # a snapshot whose record_function annotations hold allocations is read without them
        if any(r["range"] for d in byframe["devices"] for r in d.get("live_at_peak_by_range", [])):
            byframe = report(gmp, without_annotations(path, work))
        for dev, devf in zip(doc["devices"], byframe["devices"]):
            top = dev.get("live_at_peak_by_stack", [])[:3]
            if not top:
                fail("%s: device %s: no stack" % (snap, dev["id"]))
            for row in top:
                fr = first_shown(row["stack"])
                if not fr or not user_frame(fr):
                    fail("%s: device %s: a top row by call stack opens at %r" %
                         (snap, dev["id"], fr))
            frames = [r for r in devf.get("live_at_peak_by_frame", []) if r["frame"]][:3]
            if not frames:
                fail("%s: device %s: no by-user-frame table" % (snap, dev["id"]))
            # the key of a row is the first frame shown of its stacks: find one stack with it
            keys = {}
            for row in dev.get("live_at_peak_by_stack", []):
                fr = first_shown(row["stack"])
                if fr:
                    keys.setdefault(fr["function"], fr)
            for r in frames:
                m = re.match(r"(.*) \((.*):(\d+)\)$", r["frame"])
                ok = (m and user_frame({"function": m.group(1), "file": m.group(2),
                                        "line": int(m.group(3))})) or \
                    (not m and user_frame({"function": r["frame"], "line": 0}))
                if not ok:
                    fail("%s: device %s: a top row by user frame is %r" %
                         (snap, dev["id"], r["frame"]))
        text = run([gmp, "report", path, "--by", "stack", "--top", "0"])
        check_text(snap, text)
        vias += text.count(", via ")
        # the HTML view and speedscope name a snapshot's C++ frames as the report does: no
        # "(??:0)" or "(:0)" for a frame without file or line
        os.makedirs(work, exist_ok=True)
        hv, ss = os.path.join(work, snap + ".html"), os.path.join(work, snap + ".json")
        for out in (hv, ss):
            if os.path.exists(out):
                os.unlink(out)
        run([gmp, "convert", path, "--html-view", hv, "--speedscope", ss, "--no-progress"])
        for out in (hv, ss):
            body = open(out, encoding="utf-8", errors="replace").read()
            for bad in ("(??:0)", " (:0)", "torch::unwind::unwind() (??"):
                if bad in body:
                    fail("%s: %s names a frame %r" % (snap, os.path.basename(out), bad))
        # --all-frames shows everything, the recorder first
        t = run([gmp, "report", path, "--by", "stack", "--top", "1", "--all-frames"])
        if "torch::unwind::unwind" not in t or "internal frame" in t:
            fail("%s: --all-frames folded something" % snap)
    if not vias:
        fail("no stack told apart by a frame on the real snapshots (small-step has three)")
    print("ok: real snapshots: top rows start at user code; %d frames tell stacks apart" % vias)


# ---- synthetic snapshots ----

def cpp(name, file="??"):
    return {"name": name, "filename": file, "line": 0}


def py(name, file, line):
    return {"name": name, "filename": file, "line": line}


# PyTorch's own frames as its snapshots record them (torch/csrc/profiler/unwind/unwind.cpp,
# torch/csrc/profiler/combined_traceback.cpp, torch/csrc/cuda/memory_snapshot.cpp,
# c10/cuda/CUDACachingAllocator.cpp, aten/src/ATen/EmptyTensor.cpp)
RECORDER = [
    cpp("torch::unwind::unwind()"),
    cpp("torch::CapturedTraceback::gather(bool, bool, bool)"),
    cpp("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"),
    cpp("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
        "unsigned long, CUstream_st*)", "CUDACachingAllocator.cpp"),
    cpp("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned "
        "long)", ""),
    cpp("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*, "
        "c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)", ""),
    cpp("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)"),
]
# an operator through the dispatcher, called from Python (ATen's generated registrations,
# torch/csrc/autograd/generated/python_torch_functions.cpp), then CPython's C frames
# (Objects/methodobject.c, Objects/call.c, Python/ceval.c)


def op(name):
    return [
        cpp("at::(anonymous namespace)::wrapper_CUDA_%s(at::Tensor const&, at::Tensor const&)"
            % name, "RegisterCUDA.cpp"),
        cpp("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_"
            "<c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&, at::Tensor const&), "
            "&at::(anonymous namespace)::wrapper_CUDA_%s>, at::Tensor, c10::guts::typelist::"
            "typelist<at::Tensor const&, at::Tensor const&> >, at::Tensor (at::Tensor const&, "
            "at::Tensor const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor "
            "const&, at::Tensor const&)" % name, "RegisterCUDA.cpp"),
        cpp("at::_ops::%s::call(at::Tensor const&, at::Tensor const&)" % name),
        cpp("torch::autograd::THPVariable_%s(_object*, _object*, _object*)" % name,
            "python_torch_functions_0.cpp"),
        cpp("cfunction_call", "/usr/local/src/conda/python-3.11.9/Objects/methodobject.c"),
        cpp("_PyObject_MakeTpCall"),
    ]


EVAL = [cpp("_PyEval_EvalFrameDefault"), cpp("_PyFunction_Vectorcall")]
MAIN_TAIL = [cpp("PyEval_EvalCode"), cpp("run_eval_code_obj"), cpp("run_mod"),
             cpp("pyrun_file"), cpp("_PyRun_SimpleFileObject"), cpp("Py_BytesMain"),
             cpp("__libc_start_main"), cpp("_start")]


def windows_frames(user):
    """Python frames only (PyTorch records no C++ frames on Windows)."""
    site = "C:\\Users\\me\\miniconda3\\envs\\dl\\Lib\\site-packages\\torch\\nn\\modules\\"
    proj = "C:\\Users\\me\\proj\\"
    call = [py("_call_impl", site + "module.py", 1747),
            py("_wrapped_call_impl", site + "module.py", 1736)]
    if user == "conv":
        return [py("_conv_forward", site + "conv.py", 454), py("forward", site + "conv.py", 458)] \
            + call + [py("forward", proj + "model.py", 31)] + call + \
            [py("train_step", proj + "train.py", 88), py("<module>", proj + "train.py", 120)]
    if user == "to":
        return [py("convert", site + "module.py", 1329), py("_apply", site + "module.py", 942),
                py("_apply", site + "module.py", 915), py("to", site + "module.py", 1340),
                py("main", proj + "train.py", 60), py("<module>", proj + "train.py", 120)]
    # a thread of the standard library (python.org's installer), in a user file
    stdlib = "C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\threading.py"
    return [py("prefetch", proj + "data.py", 14), py("run", stdlib, 982),
            py("_bootstrap_inner", stdlib, 1045), py("_bootstrap", stdlib, 1002)]


WIN_USER = {"conv": "forward (C:\\Users\\me\\proj\\model.py:31)",
            "to": "main (C:\\Users\\me\\proj\\train.py:60)",
            "thread": "prefetch (C:\\Users\\me\\proj\\data.py:14)"}


def compile_frames(user):
    site = "/home/alice/.venv/lib/python3.11/site-packages/torch/"
    gen = "/tmp/torchinductor_alice/xy/cxyz3k2.py"
    if user == "backward":  # the compiled backward, on autograd's thread
        return RECORDER + [
            cpp("torch::dynamo::_empty_strided_cuda(_object*, _object*)", "guards.cpp"),
            cpp("cfunction_call"), cpp("_PyObject_MakeTpCall"),
            py("call", "/tmp/torchinductor_alice/ab/cab7q.py", 311),
            py("__call__", site + "_inductor/output_code.py", 460),
            py("call_compiled_backward",
               site + "_functorch/_aot_autograd/runtime_wrappers.py", 2050),
            py("backward", site + "_functorch/_aot_autograd/runtime_wrappers.py", 2094),
            py("apply", site + "autograd/function.py", 307),
            cpp("torch::autograd::PyNode::apply(std::vector<at::Tensor, std::allocator<at::"
                "Tensor> >&&)", "python_function.cpp"),
            cpp("torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::"
                "Tensor> >&&)"),
            cpp("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::"
                "GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::"
                "shared_ptr<torch::autograd::ReadyQueue> const&)"),
            cpp("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::"
                "GraphTask> const&)"),
            cpp("execute_native_thread_routine"), cpp("start_thread"), cpp("clone")]
    line = {"fwd": 57, "guard": 12}[user]
    head = RECORDER + [
        cpp("torch::dynamo::_empty_strided_cuda(_object*, _object*)", "guards.cpp"),
        cpp("cfunction_call"), cpp("_PyObject_MakeTpCall"),
        py("call", gen, 120), py("__call__", site + "_inductor/output_code.py", 460),
        py("runtime_wrapper", site + "_functorch/_aot_autograd/runtime_wrappers.py", 339),
        py("forward", "<eval_with_key>.12", 9),
        py("__compiled_fn_5", "<eval_with_key>.13", 4),
        py("_fn", site + "_dynamo/eval_frame.py", 838)] if user == "fwd" else RECORDER + [
        cpp("at::native::empty_like(at::Tensor const&, std::optional<c10::ScalarType>, std::"
            "optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::"
            "optional<c10::MemoryFormat>)"),
        cpp("torch::dynamo::(anonymous namespace)::TENSOR_MATCH::check_nopybind(_object*)",
            "guards.cpp"),
        cpp("torch::dynamo::(anonymous namespace)::GuardManager::check_nopybind(_object*)",
            "guards.cpp"),
        cpp("torch::dynamo::(anonymous namespace)::RootGuardManager::check_nopybind("
            "FrameLocalsMapping*)", "guards.cpp"),
        cpp("dynamo__custom_eval_frame", "eval_frame_cpp.cpp"),
        cpp("dynamo_eval_frame_default", "eval_frame.c")]
    return head + EVAL + [
        py("forward", "/home/alice/proj/model.py", line),
        py("_call_impl", site + "nn/modules/module.py", 1762),
        py("_wrapped_call_impl", site + "nn/modules/module.py", 1751),
        py("_fn", site + "_dynamo/eval_frame.py", 655),
        py("train_step", "/home/alice/proj/train.py", 40),
        py("<module>", "/home/alice/proj/train.py", 99)] + MAIN_TAIL


COMPILE_USER = {"fwd": "forward (/home/alice/proj/model.py:57)",
                "guard": "forward (/home/alice/proj/model.py:12)",
                "backward": "torch::autograd::PyNode::apply (python_function.cpp)"}


def notebook_frames(user):
    site = "/opt/conda/lib/python3.11/site-packages/"
    ipy = [py("run_code", site + "IPython/core/interactiveshell.py", 3577),
           py("run_ast_nodes", site + "IPython/core/interactiveshell.py", 3517),
           py("run_cell_async", site + "IPython/core/interactiveshell.py", 3334),
           py("_pseudo_sync_runner", site + "IPython/core/async_helpers.py", 128),
           py("do_execute", site + "ipykernel/ipkernel.py", 359),
           py("_run", "/opt/conda/lib/python3.11/asyncio/events.py", 84),
           py("_run_once", "/opt/conda/lib/python3.11/asyncio/base_events.py", 1936),
           py("start", site + "ipykernel/kernelapp.py", 739),
           py("<module>", site + "ipykernel_launcher.py", 18),
           py("_run_code", "<frozen runpy>", 88),
           py("_run_module_as_main", "<frozen runpy>", 198)]
    lin = [py("forward", site + "torch/nn/modules/linear.py", 125),
           py("_call_impl", site + "torch/nn/modules/module.py", 1747),
           py("_wrapped_call_impl", site + "torch/nn/modules/module.py", 1736)]
    if user == "cell":
        return RECORDER + op("mm") + lin + [py("<module>", "/tmp/ipykernel_1234/3456.py", 7)] \
            + ipy
    if user == "fn":
        return RECORDER + op("add") + [py("train", "/tmp/ipykernel_1234/1111.py", 12),
                                       py("<module>", "/tmp/ipykernel_1234/2222.py", 3)] + ipy
    return lin + [py("<module>", "<ipython-input-3-4f5c2a1b>", 5)] + ipy


NOTEBOOK_USER = {"cell": "<module> (/tmp/ipykernel_1234/3456.py:7)",
                 "fn": "train (/tmp/ipykernel_1234/1111.py:12)",
                 "old": "<module> (<ipython-input-3-4f5c2a1b>:5)"}


def inference_frames(user):
    site = "/srv/venv/lib/python3.10/site-packages/"
    if user == "to":  # model.to("cuda"): Tensor.to through torch::autograd::dispatch_to
        return RECORDER + [
            cpp("at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>, std::"
                "optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, "
                "std::optional<c10::MemoryFormat>)"),
            cpp("at::_ops::to_dtype_layout::call(at::Tensor const&, std::optional<c10::"
                "ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::"
                "optional<bool>, bool, bool, std::optional<c10::MemoryFormat>)"),
            cpp("torch::autograd::dispatch_to(at::Tensor const&, c10::Device, bool, bool, std::"
                "optional<c10::MemoryFormat>)", "python_variable_methods.cpp"),
            cpp("torch::autograd::THPVariable_to(_object*, _object*, _object*)",
                "python_variable_methods.cpp"),
            cpp("_object* torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::"
                "THPVariable_to>(_object*, _object*, _object*)", "python_variable_methods.cpp"),
            cpp("method_vectorcall_VARARGS_KEYWORDS"), cpp("_PyObject_VectorcallTstate"),
        ] + EVAL + [py("load_model", "/srv/app/infer.py", 20),
                    py("main", "/srv/app/infer.py", 41),
                    py("<module>", "/srv/app/infer.py", 60)] + MAIN_TAIL
    if user == "bind":  # a C++ extension's function bound with pybind11
        return RECORDER + [
            cpp("myext::fused_rope(at::Tensor const&, at::Tensor const&)", "rope.cpp"),
            cpp("pybind11::cpp_function::initialize<at::Tensor (*&)(at::Tensor const&, "
                "at::Tensor const&), at::Tensor, at::Tensor const&, at::Tensor const&, "
                "pybind11::name, pybind11::scope, pybind11::sibling>(at::Tensor (*&)(at::Tensor "
                "const&, at::Tensor const&), at::Tensor (*)(at::Tensor const&, at::Tensor "
                "const&), pybind11::name const&, pybind11::scope const&, pybind11::sibling "
                "const&)::{lambda(pybind11::detail::function_call&)#3}::_FUN(pybind11::detail::"
                "function_call&)"),
            cpp("pybind11::cpp_function::dispatcher(_object*, _object*, _object*)"),
            cpp("cfunction_call")] + EVAL + [
            py("apply_rope", "/srv/app/rope.py", 8), py("main", "/srv/app/infer.py", 45),
            py("<module>", "/srv/app/infer.py", 60)] + MAIN_TAIL
    # generate() of an installed library under torch.no_grad, from the user's main
    return RECORDER + op("mm") + [
        py("forward", site + "torch/nn/modules/linear.py", 125),
        py("_call_impl", site + "torch/nn/modules/module.py", 1747),
        py("forward", site + "transformers/models/llama/modeling_llama.py", 310),
        py("generate", site + "transformers/generation/utils.py", 2215),
        py("decorate_context", site + "torch/utils/_contextlib.py", 116),
        py("main", "/srv/app/infer.py", 44), py("<module>", "/srv/app/infer.py", 60)] + MAIN_TAIL


INFERENCE_USER = {"to": "load_model (/srv/app/infer.py:20)",
                  "bind": "myext::fused_rope (rope.cpp)",
                  "gen": "main (/srv/app/infer.py:44)"}

# torch.cuda.empty_cache() as the snapshot records it (torch/cuda/memory.py: empty_cache;
# c10/cuda/CUDACachingAllocator.cpp: NativeCachingAllocator::emptyCache, release_cached_blocks)
EMPTY_CACHE = [
    cpp("torch::unwind::unwind()"),
    cpp("torch::CapturedTraceback::gather(bool, bool, bool)"),
    cpp("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::release_cached_blocks("
        "std::shared_ptr<c10::GatheredContext> const&)"),
    cpp("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache()"),
    cpp("THCPModule_emptyCache(_object*, _object*)", "Module.cpp"),
    cpp("cfunction_vectorcall_NOARGS")] + EVAL + [
    py("empty_cache", "/srv/venv/lib/python3.10/site-packages/torch/cuda/memory.py", 192),
    py("main", "/srv/app/infer.py", 50), py("<module>", "/srv/app/infer.py", 60)]


def snapshot(cases, frames_of, freed=()):
    """One device: each case an allocation of its own size (its own segment); those in freed are
    freed and their segments released by empty_cache before the snapshot."""
    A = 0x7f0000000000
    trace, segs = [], []
    for i, case in enumerate(cases):
        addr, size = A + i * 64 * MiB, (32 - i) * MiB
        fr = frames_of(case)
        trace.append({"action": "segment_alloc", "addr": addr, "size": size, "stream": 0,
                      "frames": fr, "time_us": 1000 + 10 * i})
        trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                      "frames": fr, "time_us": 1001 + 10 * i})
        if case not in freed:
            segs.append({"device": 0, "address": addr, "total_size": size,
                         "allocated_size": size, "active_size": size, "requested_size": size,
                         "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                         "is_expandable": False, "frames": fr,
                         "blocks": [{"address": addr, "size": size, "requested_size": size,
                                     "state": "active_allocated", "frames": fr}]})
    t = 2000
    for i, case in enumerate(cases):
        if case in freed:
            addr, size = A + i * 64 * MiB, (32 - i) * MiB
            for action in ("free_requested", "free_completed"):
                trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                              "frames": frames_of(case), "time_us": t})
                t += 1
            trace.append({"action": "segment_free", "addr": addr, "size": size, "stream": 0,
                          "frames": EMPTY_CACHE, "time_us": t})
            t += 1
    return {"segments": segs, "device_traces": [trace],
            "allocator_settings": {"expandable_segments": False}}


def mode_synthetic(gmp, data, work):
    os.makedirs(work, exist_ok=True)
    cases = [
        ("windows", ["conv", "to", "thread"], windows_frames, WIN_USER, ()),
        ("compile", ["fwd", "guard", "backward"], compile_frames, COMPILE_USER, ()),
        ("notebook", ["cell", "fn", "old"], notebook_frames, NOTEBOOK_USER, ()),
        # inference: the largest request freed and given back by empty_cache before the
        # snapshot, so that the peak holds all three and the end two
        ("inference", ["gen", "to", "bind"], inference_frames, INFERENCE_USER, ("gen",)),
    ]
    for name, keys, frames_of, want, freed in cases:
        path = os.path.join(work, name + ".pickle")
        with open(path, "wb") as f:
            pickle.dump(snapshot(keys, frames_of, freed), f, protocol=4)
        doc = report(gmp, path, "--by", "stack")
        rows = doc["devices"][0].get("live_at_peak_by_stack", [])
        if len(rows) != len(keys):
            fail("%s: %d rows by call stack, expected %d" % (name, len(rows), len(keys)))
        # rows by size: the cases in order (each case's allocation is smaller than the last's)
        for key, row in zip(keys, rows):
            fr = first_shown(row["stack"])
            got = display(fr) if fr and fr["line"] else \
                (fr["function"] if fr and fr["file"] in ("", "??", None)
                 else "%s (%s)" % (fr["function"], fr["file"]) if fr else None)
            # the report's one-line name of a C++ frame is short: compare the JSON's full name
            if got != want[key] and not (fr and not fr["line"] and
                                         got.startswith(want[key].split(" (")[0])):
                fail("%s: the %s allocation opens at %r, expected %r" %
                     (name, key, got, want[key]))
        frames = [r["frame"] for r in report(gmp, path)["devices"][0]["live_at_peak_by_frame"]]
        if sorted(frames) != sorted(want[k] for k in keys):
            fail("%s: by user frame %r, expected %r" % (name, frames, [want[k] for k in keys]))
        text = run([gmp, "report", path, "--by", "stack"])
        check_text(name, text)
        for k in keys:  # the text shows a backslash as \\ (gmp_render_text.c)
            if want[k].replace("\\", "\\\\") not in text:
                fail("%s: %r not in the text report:\n%s" % (name, want[k], text))
    print("ok: synthetic snapshots (Windows, torch.compile, notebooks, inference): every row "
          "opens at the user's frame")


def main():
    mode, gmp, data, work = sys.argv[1:5]
    {"real": mode_real, "synthetic": mode_synthetic}[mode](gmp, data, work)


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    main()
