"""Stand-in for torch/nn/modules/module.py (see torch/__init__.py): the global hooks and the order in
which Module._call_impl calls them (pytorch/pytorch 2.1+; Debian's 1.13 copy has the same
registration functions, lines 87-160, without always_call): every global forward pre-hook
(hook(module, args); a result replaces args), forward, every global forward hook
(hook(module, args, output); a result replaces the output); when forward raises, the hooks
registered with always_call=True are called all the same, then the error goes on."""
from collections import OrderedDict

from ..._tensor import Tensor, is_grad_enabled

_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()
_next_id = [0]


class RemovableHandle:
    def __init__(self, *dicts):
        _next_id[0] += 1
        self.id = _next_id[0]
        self.dicts = dicts

    def remove(self):
        for d in self.dicts:
            d.pop(self.id, None)


def register_module_forward_pre_hook(hook):
    h = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[h.id] = hook
    return h


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    h = RemovableHandle(_global_forward_hooks, _global_forward_hooks_always_called)
    _global_forward_hooks[h.id] = hook
    if always_call:
        _global_forward_hooks_always_called[h.id] = True
    return h


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_parameters", OrderedDict())  # name -> bytes or Tensor

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name)

    def cuda(self):
        """The parameters to the device (where CUDA is first used, in most programs): Tensor.cuda
        initializes CUDA through torch::utils::device_lazy_init, i.e. torch.cuda._lazy_init."""
        from ... import cuda

        cuda._lazy_init()
        for _, m in self.named_modules():
            for name, p in list(m._parameters.items()):
                if not isinstance(p, Tensor):
                    t = Tensor(p, requires_grad=True)
                    m._parameters[name] = t
                    object.__setattr__(m, name, t)
        return self

    def __call__(self, *args):
        return self._call_impl(*args)

    def _call_impl(self, *args):
        result = None
        called_always = set()
        try:
            for hook in list(_global_forward_pre_hooks.values()):
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
            result = self.forward(*args)
            for hook_id, hook in list(_global_forward_hooks.items()):
                if hook_id in _global_forward_hooks_always_called:
                    called_always.add(hook_id)
                r = hook(self, args, result)
                if r is not None:
                    result = r
        except Exception:
            for hook_id, hook in list(_global_forward_hooks.items()):
                if hook_id in _global_forward_hooks_always_called and \
                        hook_id not in called_always:
                    try:
                        r = hook(self, args, result)
                        if r is not None:
                            result = r
                    except Exception:
                        continue
            raise
        return result


class ModuleList(Module):
    def __init__(self, mods):
        super().__init__()
        for i, m in enumerate(mods):
            setattr(self, str(i), m)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i):
        return list(self._modules.values())[i]


class Linear(Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.n_in, self.n_out = n_in, n_out
        self._parameters["weight"] = n_in * n_out * 4
        self._parameters["bias"] = n_out * 4

    def forward(self, x):
        rows = x.shape[0]
        w = self._parameters["weight"]
        parents = (x, w) if isinstance(w, Tensor) else (x,)
        grad = is_grad_enabled() and any(p.requires_grad for p in parents)
        return Tensor(rows * self.n_out * 4, (rows, self.n_out), grad, parents)


class ReLU(Module):
    def forward(self, x):
        return Tensor(x.nbytes, x.shape, is_grad_enabled() and x.requires_grad, (x,))
