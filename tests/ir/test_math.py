# SPDX-License-Identifier: Apache-2.0
"""The math functions (sin, cos, tan, erf, sigmoid, pow/**, floor, ceil, round, fmod, isnan)
in tensor expressions and scripts: the compiled kernel and the reference interpreter agree
with NumPy/SciPy in float32 and float64 at a symbolic, odd size, NaN and halves included."""
from __future__ import annotations

import math

import numpy as np
import pytest

import polyloop as pl
from polyloop.testing import interpret

special = pytest.importorskip("scipy.special", reason="erf and expit references come from SciPy")

CASES = {
    "sin": (pl.sin, np.sin), "cos": (pl.cos, np.cos), "tan": (pl.tan, np.tan),
    "erf": (pl.erf, special.erf), "sigmoid": (pl.sigmoid, special.expit),
    "floor": (pl.floor, np.floor), "ceil": (pl.ceil, np.ceil), "round": (pl.round, np.round),
    "isnan": (pl.isnan, np.isnan),
    "pow": (lambda x: pl.pow(pl.abs(x), 1.7), lambda x: np.power(np.abs(x), 1.7)),
    "pow_op": (lambda x: x ** 3, lambda x: x ** 3),
    "fmod": (lambda x: pl.fmod(x, 0.75), lambda x: np.fmod(x, 0.75)),
}
# float32 libm results are within a few units in the last place of NumPy's
RTOL = {"float32": 4e-6, "float64": 1e-13}


def _data(dtype):
    x = np.linspace(-6.0, 6.0, 37).astype(dtype)
    x[4], x[7], x[9] = np.nan, 2.5, -0.5        # NaN propagates; halves round to even
    return x


@pytest.fixture(scope="module")
def n():
    return pl.var("n")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_function_matches_numpy(case, dtype, n):
    fn, ref = CASES[case]
    A = pl.placeholder((n,), dtype, name="A")
    C = pl.compute((n,), lambda i: fn(A[i]), name="C")
    x = _data(dtype)
    expected = ref(x.astype("float64"))
    out_dtype = "bool" if case == "isnan" else dtype
    got = np.full(x.shape, True if case == "isnan" else np.nan, out_dtype)
    pl.build(C)(x, got)
    assert got.dtype == np.dtype(out_dtype)
    np.testing.assert_allclose(got.astype("float64"), expected, rtol=RTOL[dtype], atol=1e-7)
    np.testing.assert_allclose(interpret(pl.to_program(C), x).astype("float64"), expected,
                               rtol=RTOL[dtype], atol=1e-7)


def test_sigmoid_is_vectorized_like_exp(rng):
    A = pl.placeholder((29,), "float32", name="A")
    C = pl.compute((29,), lambda i: pl.sigmoid(A[i]), name="C")
    sch = pl.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(i, factors=[None, 8])
    sch.vectorize(inner)
    x = rng.standard_normal(29).astype("float32") * 4
    got = pl.build(sch)(x)
    np.testing.assert_allclose(got, special.expit(x), rtol=2e-6, atol=1e-7)


def script_math(n: int, A: pl.Buffer[("n",), "float64"], y: pl.Buffer[("n", 8), "float64"]):
    for i in range(n):
        y[i, 0] = math.sin(A[i]) + np.cos(A[i])
        y[i, 1] = math.erf(A[i])
        y[i, 2] = math.fmod(A[i], 0.7)
        y[i, 3] = math.ceil(A[i]) + math.floor(A[i])
        y[i, 4] = abs(A[i]) ** A[i]
        y[i, 5] = np.round(A[i] * 2.0)
        y[i, 6] = 1.0 if math.isnan(A[i]) else 0.0
        y[i, 7] = math.tan(A[i] * 0.1)


def test_script_math_matches_python(rng):
    prog = pl.script(script_math)
    x = rng.uniform(-3, 3, 11)
    expected = np.full((11, 8), np.nan)
    script_math(11, x, expected)
    got = np.full((11, 8), np.nan)
    pl.build(prog)(x, got)
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def test_printed_forms():
    A = pl.placeholder((4,), "float32", name="A")
    C = pl.compute((4,), lambda i: pl.fmod(A[i] ** 2.0, 3.0) + pl.erf(A[i]), name="C")
    assert "fmod(pow(A[i], 2.0), 3.0) + erf(A[i])" in str(pl.to_program(C))
    assert pl.isnan(A[0]).dtype is pl.DType.BOOL
