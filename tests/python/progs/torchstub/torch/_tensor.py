"""Stand-in for torch.Tensor (see torch/__init__.py): a block of the caching allocator with what
autograd needs here: requires_grad, the tensors it was computed from, tensor hooks
(Tensor.register_hook: called with the gradient when it is ready, before it flows on,
torch/_tensor.py) and backward(). Grad mode is per thread (torch.is_grad_enabled, no_grad)."""
import threading

from . import _C

_grad = threading.local()


def is_grad_enabled():
    return getattr(_grad, "on", True)


class no_grad:
    def __enter__(self):
        self.prev = is_grad_enabled()
        _grad.on = False

    def __exit__(self, *exc):
        _grad.on = self.prev
        return False


class _Handle:
    def __init__(self, lst, item):
        self.lst, self.item = lst, item

    def remove(self):
        if self.item in self.lst:
            self.lst.remove(self.item)


class Tensor:
    def __init__(self, nbytes, shape=None, requires_grad=False, parents=()):
        self.nbytes = int(nbytes)
        self.shape = shape or (self.nbytes // 4,)
        self.device = "cuda"
        self.requires_grad = bool(requires_grad)
        self._parents = tuple(parents) if self.requires_grad else ()
        self._hooks = []
        self.grad = None
        self._live = False
        self._addr, self._h = _C.malloc(self.nbytes)
        self._live = True

    def data_ptr(self):
        return self._addr

    def free(self):
        """Gives the block back now (a real tensor does when its last reference goes)."""
        if self._live:
            self._live = False
            _C.free(self._addr, self._h)

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    def register_hook(self, hook):
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        self._hooks.append(hook)
        return _Handle(self._hooks, hook)

    def sum(self):
        return Tensor(512, (1,), self.requires_grad and is_grad_enabled(), (self,))

    def backward(self):
        from .autograd import backward
        backward(self)
