"""A marked test that never initializes CUDA (test_pyplugin.py, mode pytest): the agent never
records, so the plugin cannot say anything about its GPU memory: skipped with the reason."""
import pytest


@pytest.mark.gpu_memory(limit="1 MiB")
def test_marked_without_cuda():
    assert sum(range(10)) == 45


def test_plain():
    pass
