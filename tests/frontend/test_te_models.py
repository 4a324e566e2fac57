# SPDX-License-Identifier: Apache-2.0
"""The operators models are made of, written as tensor expressions and checked against NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax as scipy_softmax

import polyloop as pl


def poisoned(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    fill = np.nan if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
    return np.full(shape, fill, dtype=dtype)


def conv2d_reference(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """NCHW input, OIHW filters, stride 1, zero padding: a direct sum over the window."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    ho, wo = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo), dtype=np.result_type(x, w))
    for ry in range(kh):
        for rx in range(kw):
            out += np.einsum("nchw,fc->nfhw", xp[:, :, ry:ry + ho, rx:rx + wo], w[:, :, ry, rx])
    return out


def padded(X: pl.Tensor, pad: int, name: str) -> pl.Tensor:
    n, c, h, w = X.shape
    return pl.compute(
        (n, c, h + 2 * pad, w + 2 * pad),
        lambda b, ch, y, x: pl.where((y >= pad) & (y < h + pad) & (x >= pad) & (x < w + pad),
                                     X[b, ch, y - pad, x - pad], 0.0),
        name=name)


def test_batched_matmul_relu(rng):
    batch, size = 16, 128
    A = pl.placeholder((batch, size, size), "float32", name="A")
    B = pl.placeholder((batch, size, size), "float32", name="B")
    k = pl.reduce_axis((0, size), name="k")
    C = pl.compute((batch, size, size),
                   lambda q, i, j: pl.sum(A[q, i, k] * B[q, k, j], axis=k), name="C")
    D = pl.compute((batch, size, size), lambda q, i, j: pl.maximum(C[q, i, j], 0.0), name="D")
    mod = pl.build(D)
    a, b = rng.standard_normal((2, batch, size, size), dtype="float32")
    d = poisoned((batch, size, size), "float32")
    mod(a, b, d)
    expected = np.maximum(a.astype("float64") @ b.astype("float64"), 0.0)
    np.testing.assert_allclose(d, expected, rtol=1e-4, atol=1e-4)


def test_conv2d_nchw_with_padding_through_where(rng):
    N, C, H, W, F, K, pad = 1, 3, 13, 13, 4, 3, 1
    X = pl.placeholder((N, C, H, W), "float32", name="X")
    Wt = pl.placeholder((F, C, K, K), "float32", name="Wt")
    Xp = padded(X, pad, "Xp")
    rc = pl.reduce_axis((0, C), name="rc")
    ry = pl.reduce_axis((0, K), name="ry")
    rx = pl.reduce_axis((0, K), name="rx")
    Y = pl.compute((N, F, H, W), lambda b, f, y, x: pl.sum(
        Xp[b, rc, y + ry, x + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    mod = pl.build(Y)
    x = rng.standard_normal((N, C, H, W), dtype="float32")
    w = rng.standard_normal((F, C, K, K), dtype="float32")
    y = poisoned((N, F, H, W), "float32")
    mod(x, w, y)
    expected = conv2d_reference(x.astype("float64"), w.astype("float64"), pad)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_conv2d_with_symbolic_sizes_and_padding(rng):
    n, c, h, w, f = (pl.var(s) for s in ("n", "c", "h", "w", "f"))
    X = pl.placeholder((n, c, h, w), "float64", name="X")
    Wt = pl.placeholder((f, c, 3, 3), "float64", name="Wt")
    Xp = padded(X, 1, "Xp")
    rc = pl.reduce_axis((0, c), name="rc")
    ry = pl.reduce_axis((0, 3), name="ry")
    rx = pl.reduce_axis((0, 3), name="rx")
    Y = pl.compute((n, f, h, w), lambda b, o, y, x: pl.sum(
        Xp[b, rc, y + ry, x + rx] * Wt[o, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    mod = pl.build(Y)
    for shape in ((2, 3, 7, 5), (1, 1, 1, 1)):
        x = rng.standard_normal(shape)
        wt = rng.standard_normal((5, shape[1], 3, 3))
        np.testing.assert_allclose(mod(x, wt), conv2d_reference(x, wt, 1), rtol=1e-12,
                                   atol=1e-12)


def test_small_int64_convolution_is_exact(rng):
    X = pl.placeholder((1, 1, 8, 8), "int64", name="X")
    Wt = pl.placeholder((2, 1, 3, 3), "int64", name="Wt")
    rc = pl.reduce_axis((0, 1), name="rc")
    ry = pl.reduce_axis((0, 3), name="ry")
    rx = pl.reduce_axis((0, 3), name="rx")
    Y = pl.compute((1, 2, 6, 6), lambda b, f, y, x: pl.sum(
        X[b, rc, y + ry, x + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    mod = pl.build(Y)
    x = rng.integers(-1000, 1000, size=(1, 1, 8, 8))
    w = rng.integers(-1000, 1000, size=(2, 1, 3, 3))
    y = poisoned((1, 2, 6, 6), "int64")
    mod(x, w, y)
    np.testing.assert_array_equal(y, conv2d_reference(x, w, 0))


def test_depthwise_3x3_convolution(rng):
    C, H, W = 5, 11, 9
    X = pl.placeholder((1, C, H, W), "float32", name="X")
    Wt = pl.placeholder((C, 3, 3), "float32", name="Wt")
    Xp = padded(X, 1, "Xp")
    ry = pl.reduce_axis((0, 3), name="ry")
    rx = pl.reduce_axis((0, 3), name="rx")
    Y = pl.compute((1, C, H, W), lambda b, c, y, x: pl.sum(
        Xp[b, c, y + ry, x + rx] * Wt[c, ry, rx], axis=[ry, rx]), name="Y")
    mod = pl.build(Y)
    x = rng.standard_normal((1, C, H, W), dtype="float32")
    w = rng.standard_normal((C, 3, 3), dtype="float32")
    y = poisoned((1, C, H, W), "float32")
    mod(x, w, y)
    expected = np.concatenate([conv2d_reference(x[:, c:c + 1].astype("float64"),
                                                w[c][None, None].astype("float64"), 1)
                               for c in range(C)], axis=1)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def softmax_last_axis(dtype: str) -> pl.Tensor:
    n, m = pl.var("n"), pl.var("m")
    X = pl.placeholder((n, m), dtype, name="X")
    k = pl.reduce_axis((0, m), name="k")
    k2 = pl.reduce_axis((0, m), name="k2")
    top = pl.compute((n,), lambda i: pl.max(X[i, k], axis=k), name="top")
    e = pl.compute((n, m), lambda i, j: pl.exp(X[i, j] - top[i]), name="e")
    total = pl.compute((n,), lambda i: pl.sum(e[i, k2], axis=k2), name="total")
    return pl.compute((n, m), lambda i, j: e[i, j] / total[i], name="softmax")


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-6), ("float32", 1e-5)])
@pytest.mark.parametrize("shape", [(1, 1), (3, 37), (17, 129)])
def test_softmax_over_the_last_axis_matches_scipy(rng, dtype, tol, shape):
    mod = pl.build(softmax_last_axis(dtype))
    x = (rng.standard_normal(shape) * 10).astype(dtype)   # large values: the max matters
    y = poisoned(shape, dtype)
    mod(x, y)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_allclose(y, scipy_softmax(x.astype("float64"), axis=-1), rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=tol)


def test_softmax_does_not_overflow_on_large_inputs():
    mod = pl.build(softmax_last_axis("float32"))
    x = np.array([[1000.0, 999.0, -1000.0]], dtype="float32")
    np.testing.assert_allclose(mod(x), scipy_softmax(x.astype("float64"), axis=-1), rtol=1e-5,
                               atol=1e-6)
