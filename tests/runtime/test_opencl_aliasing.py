# SPDX-License-Identifier: Apache-2.0
"""PyOpenCL arrays passed as an output and as another argument must not share device memory,
as NumPy arguments must not overlap: a reversal into its own input comes back wrong."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import default_queue, platform_available

OPENCL, WHY = platform_available()
pytestmark = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")


@pytest.fixture(scope="module")
def reverse():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[n - 1 - i], name="B")
    return pl.build(B, target="opencl")


@pytest.fixture(scope="module")
def cla():
    return pytest.importorskip("pyopencl.array", reason="the opencl extra is not installed")


def test_the_same_device_array_as_input_and_output_is_refused(reverse, cla, rng):
    q = default_queue()
    x = cla.to_device(q, rng.standard_normal(37).astype("float32"))
    with pytest.raises(pl.ArgumentError, match="'B'.*shares device memory with argument 'A'"):
        reverse(x, x)
    with pytest.raises(pl.ArgumentError, match="shares device memory"):
        reverse(A=x.reshape(37), B=x)


def test_overlapping_sub_buffers_are_refused(reverse, cla, rng):
    q = default_queue()
    align = max(q.device.mem_base_addr_align // 8, 8)     # bytes a sub-buffer may start at
    k = align // 2                                         # floats: 2 * align bytes
    x = cla.to_device(q, rng.standard_normal(2 * k).astype("float32"))
    a = cla.Array(q, (k,), np.float32, data=x.base_data.get_sub_region(0, 4 * k))
    b = cla.Array(q, (k,), np.float32, data=x.base_data.get_sub_region(align, 4 * k))
    with pytest.raises(pl.ArgumentError, match="shares device memory"):
        reverse(a, b)     # bytes [0, 2 align) and [align, 3 align) of x
    c = cla.Array(q, (k,), np.float32, data=x.base_data.get_sub_region(2 * align, 4 * k))
    reverse(a, c)         # [2 align, 4 align): apart
    np.testing.assert_array_equal(c.get(), x.get()[:k][::-1])


def test_separate_device_arrays_run(reverse, cla, rng):
    q = default_queue()
    a = rng.standard_normal(37).astype("float32")
    x = cla.to_device(q, a)
    y = cla.to_device(q, np.full(37, np.nan, "float32"))
    reverse(x, y)
    np.testing.assert_array_equal(y.get(), a[::-1])
