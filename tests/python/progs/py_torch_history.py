"""tests/python: `run --torch-history` on the stand-in torch (markers: @name).

argv: PROGS_DIR STUB_DIR MODE (exit | sigterm | oom)
Tensors of 1, 3 and 5 MiB (the 3 MiB one freed) from named functions; then, by MODE: exit
normally, send itself SIGTERM, or ask for more than TORCHSTUB_LIMIT (out of memory, caught) and
exit. Prints what the hook asked of _record_memory_history.
"""
import os
import signal
import sys

sys.path.insert(0, sys.argv[2])
import torch  # noqa: E402

MiB = 1 << 20
keep = []


def layer(n):
    return torch.empty(n, device="cuda")  # @layer


def forward():
    keep.append(layer(1 * MiB))  # @fwd1
    t = layer(3 * MiB)  # @fwd3
    keep.append(layer(5 * MiB))  # @fwd5
    t.free()


forward()  # @module
print("history_args=%r" % (torch.cuda.memory._history_args,))
sys.stdout.flush()
mode = sys.argv[3]
if mode == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause() if hasattr(signal, "pause") else None
elif mode == "oom":
    try:
        keep.append(layer(64 * MiB))  # @oom
    except torch.cuda.OutOfMemoryError:
        print("oom caught")
print("py_torch_history: ok")
