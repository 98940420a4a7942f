"""Stand-in for torch.autograd (see torch/__init__.py): backward() and record_function.

backward() runs where PyTorch's engine runs a CUDA graph's backward: on the device's own engine
thread while the calling thread waits (torch/csrc/autograd/engine.cpp: Engine::execute hands a
graph whose work is on a CUDA device to that device's ready queue, served by the thread that
start_device_threads made for it). Each tensor's hooks are called with its gradient when it is
ready, before the gradient flows to the tensors it was computed from; those gradients are new
tensors allocated on that thread."""
import threading

from .._tensor import Tensor
from .profiler import record_function  # noqa: F401


def _order(root):
    seen, out = set(), []

    def visit(t):
        if id(t) in seen:
            return
        seen.add(id(t))
        for p in t._parents:
            visit(p)
        out.append(t)
    visit(root)
    return list(reversed(out))  # root first


def _run(root, errors):
    try:
        grads = {id(root): Tensor(root.nbytes, root.shape)}
        for t in _order(root):
            g = grads.pop(id(t), None)
            if g is None:
                continue
            for h in list(t._hooks):
                h(g)
            if not t._parents:
                t.grad = g  # a leaf (a parameter) keeps its gradient
                continue
            for p in t._parents:
                if p.requires_grad and id(p) not in grads:
                    grads[id(p)] = Tensor(p.nbytes, p.shape)
            g.free()
    except BaseException as e:  # raised again on the calling thread
        errors.append(e)


def backward(root):
    errors = []
    th = threading.Thread(target=_run, args=(root, errors), name="pt_autograd_0")
    th.start()
    th.join()
    if errors:
        raise errors[0]
