"""Stand-in for torch.autograd.profiler.record_function (see torch/__init__.py): a USER_SCOPE
RecordFunction (torch/autograd/profiler.py, record_function.__enter__:
_record_function_enter_new); while memory history is on, memory_snapshot.cpp's callback writes
START and END annotations ({name, stage} + device, time_us) into external_annotations."""
from .. import _C


class record_function:
    def __init__(self, name, args=None):
        self.name = name

    def __enter__(self):
        _C.record_annotation(self.name, "START")
        return self

    def __exit__(self, *exc):
        _C.record_annotation(self.name, "END")
        return False
