# SPDX-License-Identifier: Apache-2.0
"""Saturating casts, (re)quantization and NumPy's wrapping of narrow integers, against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.errors import DTypeError


def numpy_requantize(x, scale, zero_point, dtype):
    info = np.iinfo(dtype)
    y = np.round(x.astype(np.float32) * np.asarray(scale, np.float32)) + np.float32(zero_point)
    return np.clip(y, info.min, info.max).astype(dtype)


def test_helpers_match_numpy_on_ties_edges_and_per_channel_scales():
    """One module computes every helper: ties go to even, values beyond the range saturate,
    a per-column scale and zero point come from tensors, float32 beyond int32 clamps."""
    m, n = pl.var("m"), pl.var("n")
    C = pl.placeholder((m, n), "int32", name="C")
    S = pl.placeholder((n,), "float32", name="S")
    Z = pl.placeholder((n,), "uint8", name="Z")
    X = pl.placeholder((m, n), "float32", name="X")
    Q = pl.compute((m, n), lambda i, j: pl.requantize(C[i, j], 0.5, -3, "int8"), name="Q")
    P = pl.compute((m, n), lambda i, j: pl.requantize(C[i, j], S[j], Z[j], "uint8"), name="P")
    L = pl.compute((m, n), lambda i, j: pl.quantize_linear(X[i, j], S[j], Z[j], "uint8"),
                   name="L")
    D = pl.compute((m, n), lambda i, j: pl.dequantize_linear(P[i, j], S[j], Z[j]), name="D")
    T = pl.compute((m, n), lambda i, j: pl.saturate(X[i, j] * 1e9, "int32"), name="T")
    W = pl.compute((m, n), lambda i, j: pl.saturate(C[i, j], "int16"), name="W")
    mod = pl.build(pl.Schedule(Q, P, L, D, T, W))
    rng = np.random.default_rng(3)
    c = rng.integers(-2000, 2000, (9, 13)).astype(np.int32)
    c[0, :6] = [1, 3, 5, -1, -3, -5]            # x * 0.5 exactly halfway: to even
    c[1, :2] = [2**31 - 1, -2**31]
    s = rng.uniform(0.01, 0.2, 13).astype(np.float32)
    z = rng.integers(0, 256, 13).astype(np.uint8)
    x = rng.standard_normal((9, 13)).astype(np.float32) * 20
    q, p, lq, d, t, w = mod(c, s, z, x)
    np.testing.assert_array_equal(q, numpy_requantize(c, 0.5, -3, np.int8))
    assert q[0, :6].tolist() == [-3, -1, -1, -3, -5, -5]
    np.testing.assert_array_equal(p, numpy_requantize(c, s, z, np.uint8))
    ref_l = np.clip(np.round(x / s) + z.astype(np.float32), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(lq, ref_l)
    np.testing.assert_array_equal(d, (p.astype(np.int32) - z).astype(np.float32) * s)
    big = np.float32(2147483520.0)              # the largest float32 below 2**31
    np.testing.assert_array_equal(t, np.clip(x * np.float32(1e9), np.float32(-2**31), big)
                                  .astype(np.int32))
    np.testing.assert_array_equal(w, np.clip(c, -2**15, 2**15 - 1).astype(np.int16))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_narrow_integer_arithmetic_wraps_as_numpy(dtype):
    """``int32(A * B)`` of int8 operands is NumPy's int8 product, widened (C computes in int)."""
    n = pl.var("n")
    A = pl.placeholder((n,), dtype, name="A")
    B = pl.placeholder((n,), dtype, name="B")
    Y = pl.compute((n,), lambda i: (A[i] * B[i]).astype("int32") * 7
                   + (A[i] + B[i] - A[i] // 3).astype("int32") + (-A[i]).astype("int32"), name="Y")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    a = rng.integers(info.min, info.max + 1, 500).astype(dtype)
    b = rng.integers(info.min, info.max + 1, 500).astype(dtype)
    a[:2] = info.min
    ref = (a * b).astype(np.int32) * 7 + (a + b - a // 3).astype(np.int32) + (-a).astype(np.int32)
    np.testing.assert_array_equal(pl.build(Y)(a, b), ref)


def test_bad_requests():
    A = pl.placeholder((4,), "float32", name="A")
    with pytest.raises(DTypeError, match="saturate: the target dtype must be an integer"):
        pl.saturate(A[0], "float32")
    with pytest.raises(DTypeError, match="dequantize_linear: q must be an integer"):
        pl.dequantize_linear(A[0], 0.5, 1)
