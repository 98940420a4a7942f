"""gpumemprof run --layers: a range per torch.nn.Module call, through the gpumemprof agent.

`gpumemprof run --layers` puts this directory first on PYTHONPATH. At interpreter start this
module (1) runs the sitecustomize that would have run without it (the next one on sys.path), and
(2) waits for `import torch`; once torch is imported it registers global module forward hooks that
open a range per module call, named by the module's qualified name (`model.encoder.layers.3.attn`),
nested as the calls nest, and tensor hooks that open a `<name> (backward)` range when the module's
backward starts. Ranges go to the agent's gmp_range_push/gmp_range_pop (the library named by
CUDA_INJECTION64_PATH), into the same per-thread stack as NVTX ranges, so an allocation made inside
`model.encoder.layers.3.attn` while the program is in its own NVTX range `train` has the path
`train/model/model.encoder/model.encoder.layers/.../model.encoder.layers.3.attn`.

Names: the outermost module called gets the name its caller knows it by (a local or global
variable, or an attribute of `self`), else its class name; the modules inside it get their
qualified names from named_modules(). Backward ranges: no module backward hooks are registered
(they wrap module outputs and break in-place operations such as ReLU(inplace=True)); a module's
backward range opens when the gradient of its output is ready and closes when the backward of a
module that is not one of its ancestors starts, or when the next forward begins. See docs/python.md.
Nothing here ever raises into the program: a failure disables the hooks with one line on stderr.

`gpumemprof run --torch-history` (GPUMEMPROF_TORCH_HISTORY=1) uses the same path: once torch is
imported it turns on PyTorch's own memory history (torch.cuda.memory._record_memory_history of
PyTorch 2.1+, with context and Python/C++ stacks) and dumps it (_dump_snapshot) beside the trace:
TRACE.torch.pickle when the process exits or gets SIGTERM (then it exits with status 143 through
Python's ordinary exit, so that the agent finishes the trace as well), TRACE.oom.torch.pickle on
an out-of-memory error (torch._C._cuda_attach_out_of_memory_observer).
"""
import os
import sys


def _chain():
    """Runs the sitecustomize this one hides (the next on sys.path), as Python would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = []
    for p in sys.path:
        try:
            if os.path.abspath(p or os.getcwd()) == here:
                continue
        except (OSError, ValueError):
            pass
        path.append(p)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)  # its errors are reported by site.py, as without gpumemprof


_push = _pop = None


def _agent():
    global _push, _pop
    import ctypes

    path = os.environ.get("CUDA_INJECTION64_PATH", "")
    # PyDLL: the calls keep the GIL (they are short and never call back into Python)
    lib = ctypes.PyDLL(path)
    _push = lib.gmp_range_push
    _push.argtypes = [ctypes.c_char_p]
    _push.restype = ctypes.c_int
    _pop = lib.gmp_range_pop
    _pop.argtypes = []
    _pop.restype = ctypes.c_int


def _install(torch):
    import threading
    import weakref

    mm = torch.nn.modules.module
    module_file = os.path.abspath(mm.__file__)
    this_file = os.path.abspath(__file__)
    names = weakref.WeakKeyDictionary()  # module -> (qualified name, its bytes)
    tls = threading.local()
    FWD, BWD = 0, 1

    def stack():
        s = getattr(tls, "s", None)
        if s is None:
            s = tls.s = []
        return s

    def caller_name(m):
        f = sys._getframe(1)
        while f is not None and os.path.abspath(f.f_code.co_filename) in (module_file, this_file):
            f = f.f_back
        if f is not None:
            loc = f.f_locals
            for k, v in loc.items():
                if v is m and k != "self":
                    return k
            for k, v in f.f_globals.items():
                if v is m:
                    return k
            s = loc.get("self")
            d = getattr(s, "__dict__", None)
            if isinstance(d, dict):
                for k, v in d.items():
                    if v is m:
                        return k
                for k, v in (d.get("_modules") or {}).items():
                    if v is m:
                        return k
        return type(m).__name__

    def set_name(m, name):
        names[m] = (name, name.encode("utf-8", "replace"))

    def name_of(m, st):
        n = names.get(m)
        if n is not None:
            return n
        parent = None
        for e in reversed(st):
            if e[0] == FWD:
                parent = e
                break
        if parent is not None:
            # a module created or attached after its parent was named
            for rel, sub in parent[1].named_modules():
                if sub is m and rel:
                    set_name(m, parent[2] + "." + rel)
                    return names[m]
        root = caller_name(m)
        for rel, sub in m.named_modules():
            if sub not in names:
                set_name(sub, root + "." + rel if rel else root)
        return names[m]

    def pop_backward(st, keep=None):
        # closes the backward ranges on top of the stack that are not ancestors of keep
        while st and st[-1][0] == BWD:
            q = st[-1][2]
            if keep is not None and keep.startswith(q + "."):
                break
            st.pop()
            _pop()

    def pre(m, inputs):
        st = stack()
        if not any(e[0] == FWD for e in st):
            pop_backward(st)  # a new forward: the last backward is over
        name, b = name_of(m, st)
        st.append((FWD, m, name))
        _push(b)

    def post(m, inputs, output):
        st = stack()
        for i in range(len(st) - 1, -1, -1):
            if st[i][0] == FWD and st[i][1] is m:
                while len(st) > i:
                    st.pop()
                    _pop()
                break
        if torch.is_grad_enabled():
            watch_backward(m, output)
        return None

    def watch_backward(m, output):
        ts = []
        if isinstance(output, torch.Tensor):
            ts = [output]
        elif isinstance(output, (tuple, list)):
            ts = [t for t in output if isinstance(t, torch.Tensor)]
        elif isinstance(output, dict):
            ts = [t for t in output.values() if isinstance(t, torch.Tensor)]
        ts = [t for t in ts if t.requires_grad]
        if not ts:
            return
        name = names.get(m, (type(m).__name__, b""))[0]
        entry = [name, (name + " (backward)").encode("utf-8", "replace"), False]
        for t in ts:
            # one hook per tensor, holding every module whose output it is: a module's output
            # is often its last child's, and the outer module's range must open first
            lst = getattr(t, "_gpumemprof_bw", None)
            if lst is None:
                lst = []
                try:
                    t._gpumemprof_bw = lst
                except (AttributeError, TypeError):
                    pass
                t.register_hook(lambda grad, lst=lst: on_grad(lst))
            lst.append(entry)

    def on_grad(lst):
        try:
            st = stack()
            for e in reversed(lst):
                if not e[2]:
                    e[2] = True
                    pop_backward(st, e[0])
                    st.append((BWD, None, e[0]))
                    _push(e[1])
        except Exception:
            pass
        return None

    mm.register_module_forward_pre_hook(pre)
    try:
        mm.register_module_forward_hook(post, always_call=True)  # torch 2.1+: also on exceptions
    except TypeError:
        mm.register_module_forward_hook(post)


def _trace_path():
    """The trace file this process's agent writes: the file it holds open whose path is the output
    pattern (GPUMEMPROF_OUTPUT, absolute) with %p, %h, %r expanded and %n any counter."""
    import re
    import socket

    pattern = os.environ.get("GPUMEMPROF_OUTPUT", "")
    if not pattern:
        return None
    rank = "0"
    for v in ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"):
        s = os.environ.get(v, "")
        if s.isdigit() and int(s) < 100000000:
            rank = str(int(s))
            break
    rx, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "%" and i + 1 < len(pattern):
            k = pattern[i + 1]
            i += 2
            if k == "p":
                rx += str(os.getpid())
            elif k == "h":
                rx += re.escape(socket.gethostname().replace("/", "_"))
            elif k == "r":
                rx += rank
            elif k == "n":
                rx += "[0-9]+"
            else:
                rx += re.escape(k)
            continue
        rx += re.escape(c)
        i += 1
    found = None
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if re.fullmatch(rx, target):
            found = target
    return found


def _history(torch):
    """run --torch-history: PyTorch's own memory history, dumped beside the trace at exit
    (TRACE.torch.pickle), on SIGTERM (the same file) and on out-of-memory
    (TRACE.oom.torch.pickle)."""
    import atexit
    import signal
    import threading

    mem = getattr(getattr(torch, "cuda", None), "memory", None)
    record = getattr(mem, "_record_memory_history", None)
    if record is None or not hasattr(mem, "_dump_snapshot"):
        raise RuntimeError("torch.cuda.memory._record_memory_history needs PyTorch 2.1 or later")
    try:
        max_entries = int(os.environ.get("GPUMEMPROF_TORCH_HISTORY_MAX", "") or 1000000)
    except ValueError:
        max_entries = 1000000
    record(enabled="all", context="all", stacks="all", max_entries=max_entries)
    lock = threading.Lock()

    def dump(suffix):
        with lock:
            trace = _trace_path()
            if trace is None:  # CUDA never started under the agent: nothing to merge with
                return
            try:
                mem._dump_snapshot(trace + suffix)
            except Exception as e:
                sys.stderr.write("gpumemprof: --torch-history: cannot write %s: %s\n"
                                 % (trace + suffix, e))

    atexit.register(dump, ".torch.pickle")
    observe = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
    if observe is not None:
        observe(lambda device, alloc, device_allocated, device_free: dump(".oom.torch.pickle"))
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum, frame):
            dump(".torch.pickle")
            if callable(previous):
                previous(signum, frame)
                return
            # the ordinary exit, so that the agent finishes the trace too (dying of the signal
            # here would skip it: the agent leaves a signal the program handles alone)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            raise SystemExit(128 + signum)

        # the default action only: a handler of the program's (or a C one) is left alone
        if previous == signal.SIG_DFL or callable(previous):
            signal.signal(signal.SIGTERM, on_term)


def _on_torch(torch):
    """What `run` asked for, once torch is imported; never raises into the program."""
    if os.environ.get("GPUMEMPROF_LAYERS") == "1":
        try:
            _agent()
            _install(torch)
        except Exception as e:
            sys.stderr.write("gpumemprof: --layers: PyTorch hooks unavailable: %s\n" % e)
    if os.environ.get("GPUMEMPROF_TORCH_HISTORY") == "1":
        try:
            _history(torch)
        except Exception as e:
            sys.stderr.write("gpumemprof: --torch-history: unavailable: %s\n" % e)


class _TorchWatcher:
    """A meta path finder that lets `import torch` run, then installs the hooks."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        orig = loader.exec_module

        def exec_module(module):
            orig(module)
            _on_torch(module)
            try:
                del loader.exec_module  # back to the class's method
            except AttributeError:
                pass

        loader.exec_module = exec_module
        return spec

    def find_module(self, name, path=None):  # Python < 3.4 API, never used
        return None


def _start():
    if os.environ.get("GPUMEMPROF_LAYERS") != "1" and \
            os.environ.get("GPUMEMPROF_TORCH_HISTORY") != "1":
        return
    if "torch" in sys.modules:
        _on_torch(sys.modules["torch"])
        return
    sys.meta_path.insert(0, _TorchWatcher())


_start()
del _start
_chain()
