# SPDX-License-Identifier: Apache-2.0
"""Signed integer overflow wraps around in compiled kernels, as it does in NumPy, on every
target (C leaves it undefined and compilers fold ``a + 1 > a`` to true)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()
TARGETS = ["c", pytest.param("opencl", marks=pytest.mark.skipif(
    not OPENCL, reason=f"OpenCL unavailable: {WHY}"))]


def program(dtype: str):
    n = pl.var("n")
    A = pl.placeholder((n,), dtype, name="A")
    grows = pl.compute((n,), lambda i: pl.where(A[i] + 1 > A[i], 1, 0), name="grows")
    square = pl.compute((n,), lambda i: A[i] * A[i] - A[i], name="square")
    negated = pl.compute((n,), lambda i: -A[i] - 1, name="negated")
    return [grows, square, negated]


def numpy_reference(a: np.ndarray):
    one = a.dtype.type(1)
    with np.errstate(over="ignore"):
        return np.where(a + one > a, 1, 0), a * a - a, -a - one


@pytest.fixture(scope="module", params=TARGETS)
def modules(request):
    return {d: pl.build(program(d), target=request.param) for d in ("int32", "int64")}


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_overflow_at_the_extremes_wraps_as_in_numpy(modules, dtype, rng):
    info = np.iinfo(dtype)
    edges = np.array([info.max, info.min, info.max - 1, info.min + 1, 0, -1, 1], dtype=dtype)
    a = np.concatenate([edges, rng.integers(info.min, info.max, size=30, dtype=dtype)])
    mod = modules[dtype]
    # outputs passed in poisoned with a value no result has here
    outs = {b.name: np.full(a.shape, 77, b.dtype.numpy) for b in mod.args if b.name != "A"}
    mod(a, **outs)
    for name, e in zip(("grows", "square", "negated"), numpy_reference(a)):
        np.testing.assert_array_equal(outs[name], e.astype(outs[name].dtype))
    assert outs["grows"][0] == 0   # a + 1 > a is false at the maximum


@pytest.mark.parametrize("target", TARGETS)
def test_division_by_zero_and_by_minus_one_give_numpys_results(target, rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "int32", name="A")
    B = pl.placeholder((n,), "int32", name="B")
    C = pl.compute((n,), lambda i: A[i] // B[i] + A[i] % B[i], name="C")
    edges = np.array([5, -7, 2**31 - 1, -2**31, -2**31, 0], dtype="int32")
    a = np.concatenate([edges, rng.integers(-100, 100, size=9, dtype="int32")])
    b = np.concatenate([np.array([0, 0, -1, -1, 0, 0], "int32"),
                        rng.integers(-3, 4, size=9, dtype="int32")])
    out = np.full(a.shape, 77, "int32")
    pl.build(C, target=target)(a, b, out)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, a // b + a % b)
