"""Stand-in for torch.nn (see torch/__init__.py): Module with the global forward hooks, Linear,
ReLU, ModuleList."""
from . import modules  # noqa: F401
from .modules.module import Module, ModuleList, Linear, ReLU  # noqa: F401
