# SPDX-License-Identifier: Apache-2.0
"""int8, uint8, int16, bool and float16 arrays: built kernels and the reference interpreter
agree with NumPy at a symbolic, odd size (integer arithmetic wraps when stored, as NumPy's
does; float16 is computed in float32 and rounded, so it is within a unit of the last place)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.testing import interpret

INTS = ["int8", "uint8", "int16"]


@pytest.fixture(scope="module")
def n():
    return pl.var("n")


@pytest.mark.parametrize("dtype", INTS)
def test_integer_arithmetic_wraps_like_numpy(dtype, n, rng):
    A = pl.placeholder((n,), dtype, name="A")
    B = pl.placeholder((n,), dtype, name="B")
    C = pl.compute((n,), lambda i: pl.maximum(A[i] + B[i] * 3, A[i] - 1), name="C")
    a = rng.integers(0, 100, 37).astype(dtype)
    b = rng.integers(0, 100, 37).astype(dtype)
    three, one = np.array(3, dtype), np.array(1, dtype)
    with np.errstate(over="ignore"):
        expected = np.maximum(a + b * three, a - one)
    got = np.full(37, 7, dtype)
    pl.build(C)(a, b, got)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(interpret(pl.to_program(C), a, b), expected)


@pytest.mark.parametrize("dtype", INTS)
def test_widening_sum_of_small_integers(dtype, n, rng):
    A = pl.placeholder((n, 5), dtype, name="A")
    k = pl.reduce_axis((0, 5), name="k")
    S = pl.compute((n,), lambda i: pl.sum(A[i, k].astype("int32"), axis=k), name="S")
    a = rng.integers(0, 100, (11, 5)).astype(dtype)
    got = np.full(11, -1, "int32")
    pl.build(S)(a, got)
    np.testing.assert_array_equal(got, a.astype("int32").sum(axis=1))


def test_float16_storage_with_float32_arithmetic(n, rng):
    A = pl.placeholder((n,), "float16", name="A")
    B = pl.compute((n,), lambda i: A[i] * 1.5 + pl.const(0.25, "float16"), name="B")
    W = pl.compute((n,), lambda i: B[i].astype("float32"), name="W")
    a = rng.standard_normal(37).astype("float16")
    b = np.full(37, np.nan, "float16")
    w = np.full(37, np.nan, "float32")
    pl.build(pl.Schedule(B, W))(a, b, w)
    expected = a.astype("float32") * 1.5 + 0.25
    np.testing.assert_allclose(b.astype("float32"), expected, rtol=2e-3, atol=1e-3)
    np.testing.assert_array_equal(w, b.astype("float32"))


def test_bool_arrays(n, rng):
    A = pl.placeholder((n,), "bool", name="A")
    X = pl.placeholder((n,), "float32", name="X")
    C = pl.compute((n,), lambda i: A[i] & (X[i] > 0.0), name="C")
    a = rng.integers(0, 2, 13).astype(bool)
    x = rng.standard_normal(13).astype("float32")
    np.testing.assert_array_equal(pl.build(C)(a, x), a & (x > 0))


def test_bfloat16_is_a_dtype():
    assert pl.placeholder((4,), "bfloat16", name="A").dtype.value == "bfloat16"


def test_float16_math_is_computed_in_float32(n, rng):
    A = pl.placeholder((n,), "float16", name="A")
    B = pl.compute((n,), lambda i: pl.exp(A[i]) + pl.pow(A[i] * A[i], 0.5)
                   + pl.where(pl.isnan(A[i]), 1.0, 0.0), name="B")
    a = rng.standard_normal(9).astype("float16")
    a[2] = np.nan
    got = pl.build(B)(a)
    assert got.dtype == np.float16
    x = a.astype("float32")
    expected = np.exp(x) + np.abs(x) + np.isnan(x)
    np.testing.assert_allclose(got.astype("float32"), expected, rtol=3e-3)
