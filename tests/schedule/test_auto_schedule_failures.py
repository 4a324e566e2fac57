# SPDX-License-Identifier: Apache-2.0
"""``pl.auto_schedule`` on programs that used to crash it with a bare ``KeyError`` or
``UnboundLocalError``; every result is checked against NumPy on poisoned outputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.schedule import auto_band

SIZES = [(1, 1), (5, 7), (13, 4)]


@pl.script
def two_scalars(A: pl.Buffer[("n", "m"), "float64"], B: pl.Buffer[("n", "m"), "float64"],
                C: pl.Buffer[("n",), "float64"]):
    """Scalar temporaries s and t, each written in its own nest, both read by a third."""
    assert m >= 1  # noqa: F821 - n, m are the sizes of A's shape
    s = pl.alloc((1,), "float64")
    t = pl.alloc((1,), "float64")
    for i in range(n):  # noqa: F821
        s[0] = A[i, 0] * 0.5
        C[i] = s[0]
    for i in range(n):  # noqa: F821
        for j in range(m):  # noqa: F821
            t[0] = A[i, j] + 1.0
            B[i, j] = t[0]
    for i in range(n):  # noqa: F821
        for j in range(m):  # noqa: F821
            B[i, j] = B[i, j] + s[0] + t[0]


def two_scalars_numpy(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = a[:, 0] * 0.5
    s, t = c[-1], a[-1, -1] + 1.0
    return a + 1.0 + s + t, c


def softmax():
    n, m = pl.var("n"), pl.var("m")
    X = pl.placeholder((n, m), "float32", name="X")
    k, k2 = pl.reduce_axis(m, name="k"), pl.reduce_axis(m, name="k2")
    M = pl.compute((n,), lambda i: pl.max(X[i, k], axis=k), name="M")
    E = pl.compute((n, m), lambda i, j: pl.exp(X[i, j] - M[i]), name="E")
    S = pl.compute((n,), lambda i: pl.sum(E[i, k2], axis=k2), name="S")
    return pl.compute((n, m), lambda i, j: E[i, j] / S[i], name="Y")


@pytest.mark.parametrize("fusion", ["smart", "max"])
def test_scalar_temporaries_written_in_different_nests(rng, fusion):
    mod = pl.build(pl.auto_schedule(two_scalars, fusion=fusion))
    for n, m in SIZES:
        a = rng.standard_normal((n, m))
        b, c = np.full((n, m), np.nan), np.full(n, np.nan)
        mod(a, b, c)
        want_b, want_c = two_scalars_numpy(a)
        np.testing.assert_allclose(b, want_b, rtol=1e-12)
        np.testing.assert_allclose(c, want_c, rtol=1e-12)


@pytest.mark.parametrize("fusion, tile", [("smart", "auto"), ("max", 4)])
def test_row_softmax_in_tensor_expressions(rng, fusion, tile):
    mod = pl.build(pl.auto_schedule(softmax(), fusion=fusion, tile=tile))
    for n, m in SIZES:
        x = rng.standard_normal((n, m), dtype="float32")
        e = np.exp(x - x.max(axis=1, keepdims=True))
        out = np.full((n, m), np.nan, "float32")
        mod(x, out)
        np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


@pl.script
def seidel_1d(A: pl.Buffer[("n",), "float64"], T: pl.Buffer[("tsteps",), "float64"]):
    for t in range(tsteps):  # noqa: F821 - tsteps is the size of T's shape
        for i in range(1, n - 1):  # noqa: F821
            A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0


def seidel_numpy(a: np.ndarray, steps: int) -> np.ndarray:
    a = a.copy()
    for _ in range(steps):
        for i in range(1, len(a) - 1):
            a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0
    return a


def test_a_refused_tiling_leaves_the_band_untiled(rng, monkeypatch):
    """When tiling a permutable band is refused, the band is scheduled untiled (the tile
    loops are not looked for)."""
    def refuse(*args, **kwargs):
        raise pl.ScheduleError("tiling refused (test)")
    monkeypatch.setattr(auto_band, "_tile", refuse)
    sch = pl.auto_schedule(seidel_1d, fusion="max", tile=4, vectorize=False)
    mod = pl.build(sch)
    for n, steps in [(3, 1), (17, 5)]:
        a = rng.standard_normal(n)
        got = a.copy()
        mod(got, np.zeros(steps))
        np.testing.assert_allclose(got, seidel_numpy(a, steps), rtol=1e-12)
