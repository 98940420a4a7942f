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
The modules a gpumemprof.trace(model) block hooks itself (sys._gpumemprof_traced) are left to it:
it opens the same ranges, so each layer has one range, not two.
Nothing here ever raises into the program: a failure disables the hooks with one line on stderr.

`gpumemprof run --torch-history` (GPUMEMPROF_TORCH_HISTORY=1) uses the same path: once torch is
imported it queues, for the moment the program initializes CUDA (torch.cuda._lazy_call), PyTorch's
own memory history (torch.cuda.memory._record_memory_history of PyTorch 2.1+, with context and
Python/C++ stacks) and dumps it (_dump_snapshot) beside the trace: TRACE.torch.pickle when the
process exits or gets SIGTERM (then it exits with status 143 through Python's ordinary exit, so
that the agent finishes the trace as well), TRACE.oom.torch.pickle on an out-of-memory error
(torch._C._cuda_attach_out_of_memory_observer). With both options, each range change sets
torch.cuda.memory._set_memory_metadata to the thread's layer path, so that every tensor of the
history carries it (user_metadata). The hooks step aside while torch.compile's dynamo traces.
The process is marked in GPUMEMPROF_PY for the agent, which says when a recorded Python process
never ran this file or never imported torch.
"""
import os
import sys


def _chain():
    """Runs the sitecustomize this one hides, as Python would have: the next one on sys.path after
    this file's directory. Searching only the entries after it means that copies of this file
    (a second gpumemprof, or one left on PYTHONPATH) chain onwards one after the other and never
    back to each other; each runs the next, down to the user's or the system's own."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))

    def same(p):
        try:
            return os.path.abspath(p or os.getcwd()) == here
        except (OSError, ValueError):
            return False

    at = next((i for i, p in enumerate(sys.path) if same(p)), -1)
    path = [p for p in sys.path[at + 1:] if not same(p)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)  # its errors are reported by site.py, as without gpumemprof


_push = _pop = None
_setmeta = None  # torch.cuda.memory._set_memory_metadata once history records (else None)
_paths = None  # the hooks' per-thread range path, for _setmeta


def _agent():
    global _push, _pop
    import ctypes

    path = os.environ.get("CUDA_INJECTION64_PATH", "")
    # PyDLL: the calls keep the GIL (they are short and never call back into Python). They never
    # start the agent: in a process that has not initialized CUDA (a spawn or forkserver worker
    # calling torchvision transforms, a CPU helper) they return -2 and record nothing.
    lib = ctypes.PyDLL(path)
    _push = lib.gmp_range_push
    _push.argtypes = [ctypes.c_char_p]
    _push.restype = ctypes.c_int
    _pop = lib.gmp_range_pop
    _pop.argtypes = []
    _pop.restype = ctypes.c_int


def _notice(msg):
    """One notice into this process's trace (nothing when it records no trace)."""
    try:
        import ctypes

        lib = ctypes.PyDLL(os.environ.get("CUDA_INJECTION64_PATH", ""))
        f = lib.gmp_python_notice
        f.argtypes = [ctypes.c_char_p]
        f.restype = ctypes.c_int
        return f(msg.encode("utf-8", "replace"))
    except Exception:
        return -1


def _compile_probe(torch):
    """The function that tells whether dynamo is tracing (torch.compile, torch.export), or None.
    Dynamo folds it to True while it traces, so a hook that returns at once when it is true is
    traced as nothing at all: no graph break, fullgraph=True holds, the graph is the one without
    gpumemprof. torch.compiler.is_compiling is public from 2.3 and reads a flag
    (torch/compiler/__init__.py: `_is_compiling_flag`); 2.1 and 2.2 have it calling
    torch._dynamo.is_compiling (which imports dynamo), so torch._utils.is_compiling (2.1+,
    returns False, folded to True by dynamo) is preferred there."""
    try:
        import torch.compiler as c

        if hasattr(c, "_is_compiling_flag") and hasattr(c, "is_compiling"):
            return c.is_compiling
    except Exception:
        c = None
    f = getattr(getattr(torch, "_utils", None), "is_compiling", None)
    if f is None and c is not None:
        f = getattr(c, "is_compiling", None)
    return f


def _install(torch):
    global _paths
    import threading
    import weakref

    mm = torch.nn.modules.module
    module_file = os.path.abspath(mm.__file__)
    this_file = os.path.abspath(__file__)
    names = weakref.WeakKeyDictionary()  # module -> (qualified name, its bytes)
    tls = threading.local()
    FWD, BWD = 0, 1
    compiling = _compile_probe(torch)

    def stack():
        s = getattr(tls, "s", None)
        if s is None:
            s = tls.s = []
        return s

    def path():
        # this thread's ranges opened by the hooks, "/"-joined as the trace's range paths are
        return "/".join(e[2] if e[0] == FWD else e[2] + " (backward)" for e in stack())

    _paths = path

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
        # torch.compile's OptimizedModule wraps the module as `_orig_mod`: keep the user's names
        name = name.replace("._orig_mod", "")
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

    def push(st, kind, m, name, b):
        # entries: (kind, module, name, pushed): a range the agent did not record is not popped
        st.append((kind, m, name, _push(b) >= 0))
        if _setmeta is not None:
            _setmeta(path())

    def pop(st):
        e = st.pop()
        if e[3]:
            _pop()
        return e

    def changed():
        if _setmeta is not None:
            _setmeta(path())

    def pop_backward(st, keep=None):
        # closes the backward ranges on top of the stack that are not ancestors of keep
        n = len(st)
        while st and st[-1][0] == BWD:
            q = st[-1][2]
            if keep is not None and keep.startswith(q + "."):
                break
            pop(st)
        if len(st) != n:
            changed()

    def pre(m, inputs):
        if compiling is not None and compiling():
            return None  # dynamo is tracing: nothing here may run (see _compile_probe)
        if m in getattr(sys, "_gpumemprof_traced", ()):
            return None  # gpumemprof.trace(model) opens this module's range itself
        try:
            st = stack()
            if not any(e[0] == FWD for e in st):
                pop_backward(st)  # a new forward: the last backward is over
            name, b = name_of(m, st)
            push(st, FWD, m, name, b)
        except Exception:
            pass
        return None

    def post(m, inputs, output):
        if compiling is not None and compiling():
            return None
        if m in getattr(sys, "_gpumemprof_traced", ()):
            return None  # gpumemprof.trace(model): its ranges, forward and backward
        try:
            st = stack()
            for i in range(len(st) - 1, -1, -1):
                if st[i][0] == FWD and st[i][1] is m:
                    while len(st) > i:
                        pop(st)
                    changed()
                    break
            if torch.is_grad_enabled():
                watch_backward(m, output)
        except Exception:
            pass
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
        # on the thread that runs this part of the backward (the autograd engine's device thread
        # for CUDA tensors): its own range stack and its own memory metadata
        try:
            st = stack()
            for e in reversed(lst):
                if not e[2]:
                    e[2] = True
                    pop_backward(st, e[0])
                    push(st, BWD, None, e[0], e[1])
        except Exception:
            pass
        return None

    mm.register_module_forward_pre_hook(pre)
    try:
        mm.register_module_forward_hook(post, always_call=True)  # torch 2.1+: also on exceptions
    except TypeError:
        mm.register_module_forward_hook(post)
    _compile_note(torch)


def _compile_note(torch):
    """At exit, once: the trace says that the modules called inside torch.compile's graphs have no
    range (the hooks stepped aside while dynamo traced them)."""
    import atexit

    def note():
        utils = sys.modules.get("torch._dynamo.utils")
        try:
            n = int(utils.counters["stats"]["unique_graphs"]) if utils is not None else 0
        except Exception:
            n = 0
        if n > 0:
            _notice("--layers: torch.compile compiled %d graph(s); the modules they call have no "
                    "layer range (the hooks step aside while dynamo traces, so the compiled "
                    "program is the one without gpumemprof)" % n)
    atexit.register(note)


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
    """run --torch-history: PyTorch's own memory history, from the moment the program initializes
    CUDA. _record_memory_history initializes CUDA itself (torch/csrc/cuda/memory_snapshot.cpp,
    _record_memory_history: lazyInitCUDA() in 2.1, lazyInitDevice(c10::DeviceType::CUDA) in
    2.6+, before recordHistory): called at `import torch` it would start CUDA in every process
    that imports torch (torchrun's launcher, DataLoader workers, CPU helpers), read
    CUDA_VISIBLE_DEVICES and the allocator's options before the program sets them, and break
    programs that fork before they use CUDA. So it is queued with torch.cuda._lazy_call, which
    runs it inside torch.cuda._lazy_init right after PyTorch's own CUDA initialization, or at once
    when CUDA is already initialized (torch/cuda/__init__.py: _lazy_call, _lazy_init; the same
    from 1.13, Debian's copy lines 163-248, to 2.x). A process that never initializes CUDA gets
    no history, no snapshot and no line. A queued call that raises would make _lazy_init raise
    into the program (DeferredCudaCallError): start never raises."""
    cuda = getattr(torch, "cuda", None)
    mem = getattr(cuda, "memory", None)

    def start():
        try:
            if getattr(mem, "_record_memory_history", None) is None or \
                    not hasattr(mem, "_dump_snapshot"):
                raise RuntimeError("torch.cuda.memory._record_memory_history needs PyTorch 2.1 "
                                   "or later (this is %s)" % getattr(torch, "__version__", "?"))
            _history_start(torch, mem)
        except Exception as e:
            if "does not yet support recordHistory" in str(e):
                # the cudaMallocAsync backend (c10/cuda/CUDAMallocAsyncAllocator.cpp:
                # recordHistory is TORCH_CHECK(false, ...)); `run` said so at the start when it
                # could see the setting
                if os.environ.get("GPUMEMPROF_TORCH_ASYNC") != "1":
                    sys.stderr.write(
                        "gpumemprof: --torch-history: PyTorch's cudaMallocAsync backend keeps no "
                        "memory history; the trace has each tensor as a CUDA allocation "
                        "instead\n")
                return
            sys.stderr.write("gpumemprof: --torch-history: unavailable: %s\n" % e)

    lazy_call = getattr(cuda, "_lazy_call", None)
    if lazy_call is None:
        start()
    else:
        lazy_call(start)


def _history_start(torch, mem):
    """Turns the history on (CUDA is initialized now) and arranges the dumps beside the trace:
    TRACE.torch.pickle at exit and on SIGTERM, TRACE.oom.torch.pickle on out-of-memory."""
    global _setmeta
    import atexit
    import signal
    import threading

    try:
        max_entries = int(os.environ.get("GPUMEMPROF_TORCH_HISTORY_MAX", "") or 1000000)
    except ValueError:
        max_entries = 1000000
    mem._record_memory_history(enabled="all", context="all", stacks="all",
                               max_entries=max_entries)
    lock = threading.Lock()
    # --layers too: every entry's user_metadata is the layer path of the thread that made it
    # (torch.cuda.memory._set_memory_metadata, PyTorch 2.6+; per thread: CUDACachingAllocator.cpp
    # keeps it in a `static thread_local std::string user_metadata`, so the backward's engine
    # threads set their own from the tensor hooks that run on them)
    setmeta = getattr(mem, "_set_memory_metadata", None)
    if setmeta is not None and _paths is not None:
        _setmeta = setmeta
        setmeta(_paths())

        def forget():  # a forked child cannot use its parent's CUDA: no metadata calls there
            global _setmeta
            _setmeta = None
        try:
            os.register_at_fork(after_in_child=forget)
        except AttributeError:
            pass

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
            # the ordinary exit, so that the agent finishes the trace too (dying of the signal
            # here would skip it: the agent leaves a signal the program handles alone)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            raise SystemExit(128 + signum)

        # the default action only: a handler of the program's own (Python's or a C one) is left
        # alone; the program's exit then dumps at atexit
        if previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, on_term)


def _mark(state):
    """Tells the agent (GPUMEMPROF_PY: "<pid> <state>") that this sitecustomize ran in this
    process: "site" at start, "torch" once torch is imported. The agent says, once, when a Python
    process it records was asked for --layers/--torch-history and never ran it (python -I, -E,
    -S, an embedded interpreter that ignores the environment), or never imported torch."""
    os.environ["GPUMEMPROF_PY"] = "%d %s" % (os.getpid(), state)


def _on_torch(torch):
    """What `run` asked for, once torch is imported; never raises into the program."""
    _mark("torch")
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
    # one gpumemprof sitecustomize per process: a copy chained after this one only chains on
    if getattr(sys, "_gpumemprof_site", False):
        return
    sys._gpumemprof_site = True
    state = "torch" if "torch" in sys.modules else "site"
    _mark(state)
    try:  # a forked child is another process: the mark follows it
        os.register_at_fork(after_in_child=lambda: _mark(
            os.environ.get("GPUMEMPROF_PY", " site").split(" ", 1)[-1]))
    except AttributeError:
        pass
    if "torch" in sys.modules:
        _on_torch(sys.modules["torch"])
        return
    sys.meta_path.insert(0, _TorchWatcher())


_start()
del _start
_chain()
