# SPDX-License-Identifier: Apache-2.0
"""Checks made before every call: the program's assumptions hold for the bound sizes, sizes fit
the kernel's int64, and byte counts of outputs and temporaries fit a 64-bit size."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()
TARGETS = ["c", pytest.param("opencl", marks=pytest.mark.skipif(
    not OPENCL, reason=f"OpenCL unavailable: {WHY}"))]


@pl.script
def row_max(A: pl.Buffer[("n", "m"), "float32"], M: pl.Buffer[("n",), "float32"]):
    assert m >= 1  # noqa: F821
    for i in range(n):  # noqa: F821
        M[i] = A[i, 0]
        for j in range(1, m):  # noqa: F821
            M[i] = max(M[i], A[i, j])


def split_by_four():
    """``out = a + 1`` with its loop split by 4 under ``n mod 4 = 0``: no tail guard."""
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < 3 }", "out[i, j] = a[i, j] + 1")
    return pl.assume(pl.split_iname(knl, "i", 4), "n mod 4 = 0 and n >= 8")


@pytest.fixture(scope="module", params=TARGETS)
def target(request):
    return request.param


@pytest.fixture(scope="module")
def row_max_mod(target):
    return pl.build(row_max, target=target)


@pytest.fixture(scope="module")
def split_mod(target):
    return pl.build(split_by_four(), target=target)


def test_a_script_assert_is_checked_before_the_call(row_max_mod, rng):
    with pytest.raises(pl.ArgumentError, match=r"assuming m >= 1.*m = 0 from A.shape\[1\]"):
        row_max_mod(np.zeros((3, 0), "float32"))
    a = rng.standard_normal((7, 5)).astype("float32")
    out = np.full(7, np.nan, "float32")
    row_max_mod(a, out)
    np.testing.assert_array_equal(out, a.max(axis=1))


@pytest.mark.parametrize("n", [13, 4, 6])
def test_assume_is_checked_before_the_call(split_mod, n, rng):
    with pytest.raises(pl.ArgumentError, match=r"assuming .*n.*which this call breaks.*"
                                               rf"n = {n} from a.shape\[0\]"):
        split_mod(rng.standard_normal((n, 3)).astype("float32"))


@pytest.mark.parametrize("n", [8, 12, 20])
def test_calls_that_satisfy_the_assumptions_run(split_mod, n, rng):
    a = rng.standard_normal((n, 3)).astype("float32")
    out = np.full((n, 3), np.nan, "float32")
    split_mod(a, out)
    np.testing.assert_array_equal(out, a + 1)


def test_make_kernel_assumptions_are_checked(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2 * a[i]",
                         assumptions="n >= 1000")
    mod = pl.build(knl)
    with pytest.raises(pl.ArgumentError, match="assuming n >= 1000"):
        mod(rng.standard_normal(10).astype("float32"))
    a = rng.standard_normal(1003).astype("float32")
    np.testing.assert_array_equal(mod(a), 2 * a)


def test_an_assumption_on_a_size_given_by_name_is_checked(rng):
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < k }", "out[i] = sum(j, a[i])",
                         assumptions="k >= 1 and k <= 9")
    mod = pl.build(knl)
    a = rng.standard_normal(4).astype("float32")
    with pytest.raises(pl.ArgumentError, match=r"k = 10 given as k=10"):
        mod(a, k=10)
    out = np.full(4, np.nan, "float32")
    mod(a, out, k=9)
    np.testing.assert_allclose(out, 9 * a, rtol=1e-6)


# sizes and byte counts -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def window_mod():
    """``out[i] = sum over k - 2 <= j < k of a[i]`` = ``2 * a[i]``: k is a size no shape binds."""
    return pl.build(pl.make_kernel("{ [i, j] : 0 <= i < n and k - 2 <= j < k and k >= 2 }",
                                   "out[i] = sum(j, a[i])"))


@pytest.mark.parametrize("value", [2**64 + 2, 2**63, 2**200])
def test_a_size_outside_int64_is_refused_not_wrapped(window_mod, value):
    with pytest.raises(pl.ArgumentError, match=r"size parameter 'k'.*2\*\*63 - 1"):
        window_mod(np.zeros(3, "float32"), k=value)


@pytest.mark.parametrize("value", [2, 1000, 2**63 - 1])
def test_sizes_up_to_the_int64_maximum_are_accepted(window_mod, value, rng):
    a = rng.standard_normal(5).astype("float32")
    out = np.full(5, np.nan, "float32")
    window_mod(a, out, k=value)
    np.testing.assert_allclose(out, 2 * a, rtol=1e-6)


def test_an_output_whose_byte_count_overflows_is_refused():
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < n }", "out[i, j] = 1.0")
    mod = pl.build(knl)
    with pytest.raises(pl.ArgumentError, match=r"output 'out'.*more than a 64-bit size"):
        mod(n=2**32)


@pytest.fixture(scope="module")
def big_temp_mod():
    """``B[i] = T[i, i, i, i]`` with a 4-D temporary ``T`` of side n on the heap."""
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    T = pl.compute((n, n, n, n), lambda i, j, k, m: A[i] + A[j] + A[k] + A[m], name="T")
    B = pl.compute((n,), lambda i: T[i, i, i, i], name="B")
    return pl.build(B)


def test_a_temporary_whose_byte_count_overflows_is_refused(big_temp_mod, rng):
    mod = big_temp_mod
    with pytest.raises(pl.ArgumentError, match=r"temporary 'T'.*more than a 64-bit size.*"
                                               r"n = 65536 from A.shape\[0\]"):
        mod(np.zeros(65536, "float32"))
    a = rng.standard_normal(7).astype("float32")
    np.testing.assert_allclose(mod(a), 4 * a, rtol=1e-6)


@pytest.mark.parametrize("side", [65536, 2**16 + 1, 2**40])
def test_the_compiled_function_itself_fails_cleanly_on_an_overflowing_temporary(big_temp_mod,
                                                                               side):
    # what a C caller of the exported library gets, without the Python checks: status 1 (the
    # allocation failed), not a short buffer written past its end
    fn = big_temp_mod._fn
    a, b = np.zeros(4, "float32"), np.zeros(4, "float32")
    args = (ctypes.c_void_p * 2)(a.ctypes.data, b.ctypes.data)
    assert fn(args, (ctypes.c_int64 * 1)(side)) == 1


def test_an_exported_header_lists_the_assumptions(tmp_path):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2 * a[i]",
                         assumptions="n >= 16 and n mod 4 = 0")
    _, header = pl.build(knl).export_library(tmp_path / "libk.so")
    text = header.read_text()
    assert "built assuming" in text and "n >= 16" in text and "n % 4 == 0" in text


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
def test_an_opencl_scratch_buffer_too_large_for_the_device_is_a_polyloop_error(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    T = pl.compute((n, n, n), lambda i, j, k: A[i] + A[j] + A[k], name="T")
    B = pl.compute((n,), lambda i: T[i, i, i], name="B")
    mod = pl.build(B, target="opencl")
    with pytest.raises(pl.PolyloopError, match=r"OpenCL could not run B\(\) with sizes "
                                               r"\{'n': 65536\}"):
        mod(np.zeros(2**16, "float32"))     # a petabyte of scratch memory
    a = rng.standard_normal(6).astype("float32")
    np.testing.assert_allclose(mod(a), 3 * a, rtol=1e-6)
