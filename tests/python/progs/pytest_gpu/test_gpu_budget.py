"""Tests the gpumemprof pytest plugin judges (tests/python/test_pyplugin.py, mode pytest): each
allocates through Debian's numba on the simulated device, sizes exact (numba asks the driver for
nbytes: numba/cuda/api.py device_array). GPUMEMPROF_TEST_GROW=1 makes test_baseline_grows use
1.5 MiB more (a regression against a baseline), test_baseline_same 5% more (within the 10%
tolerance)."""
import os

import numpy as np
import pytest
from numba import cuda

KiB, MiB = 1 << 10, 1 << 20
GROW = os.environ.get("GPUMEMPROF_TEST_GROW") == "1"
KEEP = []
cuda.select_device(0)


def alloc(n):
    return cuda.device_array(n, dtype=np.uint8)


@pytest.mark.gpu_memory(limit="4 MiB")
def test_over_budget():
    a = alloc(3 * MiB)  # @over_a
    b = alloc(2 * MiB)  # @over_b
    del a, b  # freed by the plugin's flush of numba's queue, before the test's figures close


@pytest.mark.gpu_memory(limit="4 MiB", leaks=0)
def test_under_budget():
    a = alloc(3 * MiB)
    b = alloc(1 * MiB)
    del a, b


@pytest.mark.gpu_memory(leaks=0)
def test_leaks():
    KEEP.append(alloc(1 * MiB))  # @leak
    t = alloc(256 * KiB)
    del t


@pytest.mark.gpu_memory(leaks="1 MiB")
def test_leak_allowed():
    KEEP.append(alloc(512 * KiB))


@pytest.mark.gpu_memory(limit=6 * MiB, peak="device")
def test_device_peak():
    # 1.5 MiB live from the two tests before: the devices' live bytes reach 1.5 + 5 MiB
    a = alloc(5 * MiB)  # @device
    del a


def test_unmarked():
    a = alloc(2 * MiB)
    del a


def test_baseline_grows():
    a = alloc(1 * MiB + (3 * MiB // 2 if GROW else 0))
    del a


def test_baseline_same():
    a = alloc(2 * MiB + (2 * MiB // 20 if GROW else 0))
    del a


def test_fails_by_itself():
    a = alloc(1 * MiB)
    del a
    assert False, "a failure of the test's own"
