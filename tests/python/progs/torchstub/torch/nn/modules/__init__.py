"""Stand-in for torch.nn.modules (see torch/__init__.py)."""
from . import module  # noqa: F401
