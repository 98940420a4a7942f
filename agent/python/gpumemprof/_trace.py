"""gpumemprof.trace(model): each layer's GPU memory, forward and backward, from the agent's records.

    with gpumemprof.trace(model) as t:
        loss = model(x).sum()
        loss.backward()
    t.print_summary()
    t.to_json("layers.json")

Every call of a module of `model` is a scope of the agent (gmp_scope_open/close, agent/
gmp_agent_api.h): its figures are the agent's own count of the process's allocations and frees
while the layer ran (every thread, every device), its peak the device's live bytes at their
highest then, the top site at that peak the allocation stack holding most of it. A scope pushes a
range of its name on the thread's range stack, so the trace file (`gpumemprof run`, or
GPUMEMPROF_OUTPUT) has the same layer ranges as `gpumemprof run --layers` gives.

Names and hooks follow `run --layers` (agent/python/sitecustomize.py): the model is named as the
caller knows it (the variable passed to trace(), else its class name) and its modules by their
qualified names (`model.encoder.layers.3`); forward scopes open in a forward pre-hook and close
in the forward hook; a module's backward scope `<name> (backward)` opens when the gradient of
its output is ready (a tensor hook: no module backward hook, which wraps outputs and breaks
in-place operations) and closes when the backward of a module that is not inside it starts, when
the backward pass ends (a callback queued on autograd's engine), or when a new forward begins.
Under `run --layers` the global hooks step aside for the modules traced here
(sys._gpumemprof_traced), so each layer has one range, not two.

Fragmentation: the agent records CUDA allocations, which for PyTorch are its caching allocator's
segments (its *reserved* memory), not its tensors. A layer's `fragmentation_bytes` is PyTorch's own
reserved − allocated (torch.cuda.memory_reserved() − memory_allocated(), the cache held but not
used by tensors) when the layer's scope closes, the largest over its calls; None when PyTorch's
CUDA is not initialized (a program whose allocator is not PyTorch's, such as numba's, has no
cache between it and the driver: what it allocates is what the agent counts)."""
import json
import os
import sys
import threading
import time
import weakref

from . import _agent
from ._units import fmt_bytes, fmt_seconds, table

__all__ = ["trace", "Layer"]

FWD, BWD = "forward", "backward"

# modules a trace() hooks: the global hooks of `run --layers` (sitecustomize) leave them alone
if not isinstance(getattr(sys, "_gpumemprof_traced", None), weakref.WeakSet):
    sys._gpumemprof_traced = weakref.WeakSet()
_TRACED = sys._gpumemprof_traced


class Layer:
    """One layer's figures in one phase ("forward" or "backward"), bytes summed over devices:
    calls; peak_bytes (the most bytes live on the devices while a call ran, whole process: as
    torch.cuda.max_memory_allocated would say after a reset at the call's start), the largest over
    the calls; peak_increase_bytes (that peak minus what was live when the call began: the
    layer's own high-water mark), the largest over the calls; allocated_bytes, freed_bytes,
    net_bytes (allocated - freed), allocs, frees, summed over the calls; total_s, max_s; the
    fragmentation_bytes of the module docstring (None when not known); top_site (where, bytes) at
    the peak of the call with the largest peak increase; lost (calls the agent could not count:
    256 scopes open at once)."""

    def __init__(self, name, phase, depth, order):
        self.name, self.phase, self.depth, self.order = name, phase, depth, order
        self.calls = 0
        self.peak_bytes = self.peak_increase_bytes = 0
        self.allocated_bytes = self.freed_bytes = 0
        self.allocs = self.frees = 0
        self.total_s = self.max_s = 0.0
        self.fragmentation_bytes = None
        self.lost = 0
        self._top = None  # (bytes, allocs, stack id) of the worst call's top site
        self._site = None

    @property
    def net_bytes(self):
        return self.allocated_bytes - self.freed_bytes

    @property
    def mean_s(self):
        return self.total_s / self.calls if self.calls else 0.0

    def _add(self, info, devs, frag):
        self.calls += 1
        s = info.elapsed_ns / 1e9
        self.total_s += s
        self.max_s = max(self.max_s, s)
        peak = sum(d.peak_bytes for d in devs)
        inc = sum(d.peak_bytes - d.start_bytes for d in devs)
        self.peak_bytes = max(self.peak_bytes, peak)
        for d in devs:
            self.allocated_bytes += d.allocated_bytes
            self.freed_bytes += d.freed_bytes
            self.allocs += d.allocs
            self.frees += d.frees
        if frag is not None:
            self.fragmentation_bytes = max(self.fragmentation_bytes or 0, frag)
        if self._top is None or inc > self.peak_increase_bytes:
            best = None
            for d in devs:
                for i in range(min(d.nsites, _agent.MAX_SITES)):
                    st = d.sites[i]
                    if best is None or st.bytes > best[0]:
                        best = (st.bytes, st.allocs, st.stack)
            self._top, self._site = best, None
        self.peak_increase_bytes = max(self.peak_increase_bytes, inc)

    def top_site(self, agent):
        """(where, bytes) of the top site at the peak; where is "file:line" of the innermost
        Python frame of the program's own code (as profile()'s Site.where)."""
        if self._top is None or self._top[0] == 0:
            return None
        if self._site is None:
            from . import Site

            nbytes, allocs, stack = self._top
            self._site = Site(nbytes, allocs, stack if agent is not None else 0, agent)
        return self._site

    def as_dict(self, agent=None):
        site = self.top_site(agent)
        return {"name": self.name, "phase": self.phase, "depth": self.depth, "calls": self.calls,
                "peak_bytes": self.peak_bytes, "peak_increase_bytes": self.peak_increase_bytes,
                "allocated_bytes": self.allocated_bytes, "freed_bytes": self.freed_bytes,
                "net_bytes": self.net_bytes, "allocs": self.allocs, "frees": self.frees,
                "total_s": self.total_s, "mean_s": self.mean_s, "max_s": self.max_s,
                "fragmentation_bytes": self.fragmentation_bytes, "lost_calls": self.lost,
                "top_site": None if site is None else {
                    "where": site.where, "bytes": site.bytes, "allocs": site.allocs,
                    "frames": [str(f) for f in site.frames]}}

    def __repr__(self):
        return ("Layer(%r, %s, calls=%d, peak=%d, increase=%d, allocated=%d, freed=%d)"
                % (self.name, self.phase, self.calls, self.peak_bytes, self.peak_increase_bytes,
                   self.allocated_bytes, self.freed_bytes))


def _caller_name(model, frame):
    """The name the caller knows the model by (sitecustomize's caller_name): a local or global
    variable, or an attribute of its `self`; else None."""
    f = frame
    if f is None:
        return None
    for k, v in f.f_locals.items():
        if v is model and k != "self":
            return k
    for k, v in f.f_globals.items():
        if v is model:
            return k
    d = getattr(f.f_locals.get("self"), "__dict__", None)
    if isinstance(d, dict):
        for k, v in d.items():
            if v is model:
                return k
        for k, v in (d.get("_modules") or {}).items():
            if v is model:
                return k
    return None


class trace:
    """trace(model, name=None): a context manager that profiles each layer (module) of a PyTorch
    model, forward and backward, while the block runs. `name` is the model's name in the layer
    names (default: the caller's variable, else the class name, as `run --layers`). After the
    block: layers (Layer, in the order first called), layer(name, phase), print_summary(),
    as_dict(), to_json(path). Without an agent the block runs unprofiled and `ok` is False with
    `reason`."""

    def __init__(self, model, name=None):
        self.model = model
        self.name = name or _caller_name(model, sys._getframe(1)) or type(model).__name__
        self.name = self.name.replace("._orig_mod", "")
        self._layers = {}
        self._names = {}
        self._handles = []
        self._tls = threading.local()
        self._lock = threading.Lock()
        self._open = set()  # scopes not closed yet, for __exit__ (any thread)
        self._agent = None
        self.ok, self.reason, self.late = False, "", False
        self.elapsed_s = 0.0

    # -- hooks --------------------------------------------------------------------------------
    def _stack(self):
        s = getattr(self._tls, "s", None)
        if s is None:
            s = self._tls.s = []
        return s

    def _layer(self, name, phase):
        key = (name, phase)
        lay = self._layers.get(key)
        if lay is None:
            with self._lock:
                lay = self._layers.get(key)
                if lay is None:
                    depth = name.count(".") - self.name.count(".")
                    lay = self._layers[key] = Layer(name, phase, depth, len(self._layers))
        return lay

    def _push(self, st, phase, m, name):
        label = name if phase == FWD else name + " (backward)"
        self._layer(name, phase)  # rows in the order the layers are first entered
        h = self._agent.open(label)
        st.append((phase, m, name, h))
        if h:
            self._open.add(h)  # one bytecode under the GIL: no lock
        else:
            self._layer(name, phase).lost += 1

    def _pop(self, st):
        phase, m, name, h = st.pop()
        if not h:
            return
        self._open.discard(h)
        frag = self._fragmentation()
        info, devs = self._agent.close(h)
        if info is not None:
            self._layer(name, phase)._add(info, devs, frag)
            self.late = self.late or bool(info.flags & _agent.F_LATE)

    def _fragmentation(self):
        torch = sys.modules.get("torch")
        try:
            if torch is None or not torch.cuda.is_initialized():
                return None
            return int(torch.cuda.memory_reserved()) - int(torch.cuda.memory_allocated())
        except Exception:
            return None

    def _pop_backward(self, st, keep=None):
        # closes the backward scopes on top of the stack that are not ancestors of keep
        while st and st[-1][0] == BWD:
            q = st[-1][2]
            if keep is not None and keep.startswith(q + "."):
                break
            self._pop(st)

    def _pre(self, m, inputs):
        try:
            st = self._stack()
            if st and st[-1][0] == BWD and not any(e[0] == FWD for e in st):
                self._pop_backward(st)  # a new forward: the last backward is over
            self._push(st, FWD, m, self._names.get(m) or self._name_new(m, st))
        except Exception:
            pass
        return None

    def _name_new(self, m, st):
        # a module attached after trace() began: named inside its caller, as sitecustomize does
        for e in reversed(st):
            if e[0] == FWD and e[1] is not None:
                for rel, sub in e[1].named_modules():
                    if sub is m and rel:
                        self._names[m] = e[2] + "." + rel
                        return self._names[m]
        self._names[m] = type(m).__name__
        return self._names[m]

    def _post(self, m, inputs, output):
        try:
            st = self._stack()
            for i in range(len(st) - 1, -1, -1):
                if st[i][0] == FWD and st[i][1] is m:
                    while len(st) > i:  # scopes of calls that raised inside it close here
                        self._pop(st)
                    break
            torch = sys.modules.get("torch")
            if torch is not None and torch.is_grad_enabled():
                self._watch_backward(torch, m, output)
        except Exception:
            pass
        return None

    def _watch_backward(self, torch, m, output):
        if isinstance(output, torch.Tensor):
            ts = [output]
        elif isinstance(output, (tuple, list)):
            ts = [t for t in output if isinstance(t, torch.Tensor)]
        elif isinstance(output, dict):
            ts = [t for t in output.values() if isinstance(t, torch.Tensor)]
        else:
            ts = []
        ts = [t for t in ts if t.requires_grad]
        if not ts:
            return
        entry = [self._names.get(m, type(m).__name__), False]
        for t in ts:
            # one hook per tensor, holding every module whose output it is (a module's output is
            # often its last child's: the outer module's scope opens first)
            lst = getattr(t, "_gpumemprof_trace_bw", None)
            if lst is None or lst[0] is not self:
                lst = [self]
                try:
                    t._gpumemprof_trace_bw = lst
                except (AttributeError, TypeError):
                    pass
                t.register_hook(lambda grad, lst=lst: self._on_grad(lst))
            lst.append(entry)

    def _on_grad(self, lst):
        # on the thread that runs this part of the backward (for CUDA tensors the autograd
        # engine's device thread): its own stack
        try:
            st = self._stack()
            if not getattr(self._tls, "queued", False):
                torch = sys.modules.get("torch")
                try:
                    # at the end of this backward pass, on the thread that finishes it (for a
                    # CPU graph the caller's): torch/csrc/autograd/engine.cpp, GraphTask's
                    # final callbacks (exec_post_processing); the same in 1.13 and 2.x
                    torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
                    self._tls.queued = True
                except Exception:
                    pass
            for e in reversed(lst[1:]):
                if not e[1]:
                    e[1] = True
                    self._pop_backward(st, e[0])
                    self._push(st, BWD, None, e[0])
        except Exception:
            pass
        return None

    def _end_backward(self):
        try:
            self._tls.queued = False
            self._pop_backward(self._stack())
        except Exception:
            pass

    # -- the block ----------------------------------------------------------------------------
    def __enter__(self):
        from . import _get

        self._t0 = time.perf_counter()
        a = _get()
        if a.lib is None:
            self.reason = a.why
            return self
        self._agent = a
        st, flags, msg = a.status()
        if st not in (_agent.STATE_ON, _agent.STATE_WAITING):
            st, msg = a.start()
        self.ok = st in (_agent.STATE_ON, _agent.STATE_WAITING)
        self.reason = "" if self.ok else msg
        if not self.ok:
            self._agent = None
            return self
        for rel, sub in self.model.named_modules():
            self._names[sub] = (self.name + "." + rel if rel else self.name).replace(
                "._orig_mod", "")
            self._handles.append(sub.register_forward_pre_hook(self._pre))
            self._handles.append(sub.register_forward_hook(self._post))
            _TRACED.add(sub)
        return self

    def __exit__(self, *exc):
        self.elapsed_s = time.perf_counter() - self._t0
        for h in self._handles:
            h.remove()
        self._handles = []
        for m in list(self._names):
            _TRACED.discard(m)
        if self._agent is not None:
            self._pop_backward(self._stack())
            st = self._stack()
            while st:
                self._pop(st)
            # scopes still open on other threads (a backward that never finished): closed here
            left = list(self._open)
            self._open.clear()
            for h in left:
                self._agent.close(h)
            s, flags, msg = self._agent.status()
            if s not in (_agent.STATE_ON, _agent.STATE_DONE):
                self.ok = False
                self.reason = ("the agent never recorded during the block (%s): CUDA was not "
                               "initialized, or there is no GPU" % msg)
        return False

    # -- results ------------------------------------------------------------------------------
    @property
    def layers(self):
        """Every layer and phase seen, forward rows first in the order first entered, then
        backward rows in the order their backward first began."""
        return sorted(self._layers.values(), key=lambda l: (l.phase != FWD, l.order))

    def layer(self, name, phase=FWD):
        return self._layers.get((name, phase))

    def as_dict(self):
        return {"gpumemprof_trace": 1, "model": self.name, "ok": self.ok, "reason": self.reason,
                "late": self.late, "elapsed_s": self.elapsed_s,
                "layers": [l.as_dict(self._agent) for l in self.layers]}

    def to_json(self, path=None, indent=1):
        """The JSON text of as_dict(); written to path when given."""
        text = json.dumps(self.as_dict(), indent=indent) + "\n"
        if path is not None:
            with open(path, "w") as fh:
                fh.write(text)
        return text

    def summary_lines(self):
        if not self.ok:
            return ["gpumemprof.trace(%s): not profiled: %s" % (self.name, self.reason)]
        head = ["layer", "phase", "calls", "peak", "peak increase", "allocated", "freed", "net",
                "total time", "mean time", "fragmentation", "top site at the peak"]
        rows = []
        for l in self.layers:
            site = l.top_site(self._agent)
            where = "-"
            if site is not None:
                f = site.where
                if ":" in f and os.sep in f:
                    f = os.path.basename(f)
                where = "%s (%s)" % (f, fmt_bytes(site.bytes))
            rows.append(["  " * max(l.depth, 0) + l.name, l.phase, l.calls, fmt_bytes(l.peak_bytes),
                         fmt_bytes(l.peak_increase_bytes), fmt_bytes(l.allocated_bytes),
                         fmt_bytes(l.freed_bytes), fmt_bytes(l.net_bytes), fmt_seconds(l.total_s),
                         fmt_seconds(l.mean_s), fmt_bytes(l.fragmentation_bytes), where])
        out = ["gpumemprof.trace(%s): %d layer rows over %s (device memory while each layer ran, "
               "whole process; peak increase: above what was live when the call began)"
               % (self.name, len(rows), fmt_seconds(self.elapsed_s))]
        if self.late:
            out.append("note: the agent started after CUDA was initialized: memory allocated "
                       "before it started is not counted")
        out += ["  " + r for r in table(head, rows, right={2, 3, 4, 5, 6, 7, 8, 9, 10})]
        return out

    def print_summary(self, file=None):
        out = file or sys.stdout
        out.write("\n".join(self.summary_lines()) + "\n")
