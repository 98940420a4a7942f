"""A marked test that never initializes CUDA (test_pyplugin.py, mode pytest): the agent never
records, so the plugin cannot say anything about its GPU memory: skipped with the reason. Before
it, a test sees that loading the plugin (-p) did not start the agent."""
import pytest


def test_a_plugin_alone_starts_no_agent():
    # runs first: loading the plugin imported the package, and nothing was measured yet
    import gpumemprof

    st = gpumemprof.status()
    assert st.state == "off", st


@pytest.mark.gpu_memory(limit="1 MiB")
def test_marked_without_cuda():
    assert sum(range(10)) == 45


def test_plain():
    pass
