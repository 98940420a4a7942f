"""tests/python: what `run --torch-history` must not change in a PyTorch program (the stand-in torch).

argv: PROGS_DIR STUB_DIR MODE
  cpu      imports torch and never uses CUDA (torchrun's launcher, a DataLoader worker, a CPU
           helper): no trace, no snapshot, no line
  after    sets CUDA_VISIBLE_DEVICES and PYTORCH_CUDA_ALLOC_CONF after `import torch`, then uses
           CUDA: prints what the driver and the allocator read at the CUDA initialization
  fork     imports torch, forks, and uses CUDA in the child only
  handler  its own SIGTERM handler, installed before `import torch`, then CUDA used: prints
           whether it is still the handler
  async    chooses PyTorch's cudaMallocAsync backend itself (os.environ, before `import torch`,
           where `run` cannot see it), then uses CUDA
"""
import os
import signal
import sys

mode = sys.argv[3]


def own(signum, frame):
    sys.exit(3)


if mode == "handler":
    signal.signal(signal.SIGTERM, own)
if mode == "async":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
sys.path.insert(0, sys.argv[2])
import torch  # noqa: E402

if mode == "cpu":
    print("cuda initialized at import: %s" % (torch._C._State.init_pid is not None))
elif mode == "after":
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    t = torch.empty(1 << 20)
    print("visible_at_init=%s" % torch._C._State.visible_at_init)
    print("conf_at_init=%s" % (torch._C._State.settings_from[1],))
elif mode == "fork":
    pid = os.fork()
    if pid == 0:
        try:
            t = torch.empty(1 << 20)
            print("child: ok")
            sys.stdout.flush()
            code = 0
        except Exception as e:
            print("child: %s: %s" % (type(e).__name__, e))
            sys.stdout.flush()
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print("child status=%d" % os.waitstatus_to_exitcode(status))
elif mode in ("handler", "async"):
    t = torch.empty(1 << 20)
    print("own_handler=%s" % (signal.getsignal(signal.SIGTERM) is own))
print("py_torch_side: ok")
