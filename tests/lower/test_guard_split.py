# SPDX-License-Identifier: Apache-2.0
"""A loop whose store selects on the loop's own index is split where the condition changes
(``lower/guard_split.py``): the same values as NumPy at symbolic and awkward sizes, every
output element written, and no select left in the split loops."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def _pad(h, w, top: int, left: int):
    X = pl.placeholder((h, w), "float32", name="X")
    return X, pl.compute((h + top + 1, w + left + 2), lambda y, x: pl.where(
        (y >= top) & (y < h + top) & (x >= left) & (x < w + left), X[y - top, x - left], 0.0),
        name="P")


def test_padding_is_straight_stores_at_symbolic_sizes(rng):
    h, w = pl.var("h"), pl.var("w")
    _, P = _pad(h, w, 2, 1)
    mod = pl.build(P)
    assert "? X[" not in mod.source          # the select became three loops and a test
    assert "no-tree-loop-if-convert" not in mod.source
    for shape in [(1, 1), (5, 7), (3, 33)]:
        x = rng.standard_normal(shape).astype("float32")
        got = np.full((shape[0] + 3, shape[1] + 3), np.nan, "float32")
        mod(x, got)
        np.testing.assert_array_equal(got, np.pad(x, ((2, 1), (1, 2))))


@pytest.mark.parametrize("size", [1, 9, 23])
def test_mixed_conditions(rng, size):
    # bounds from both directions (a negative coefficient, strict and not), a bound that
    # depends on the outer loop, and a conjunct that gives no bound (it stays a select);
    # the false value reads memory, only where the condition fails
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float64", name="A")
    B = pl.placeholder((n, m), "float64", name="B")
    C = pl.compute((n, m), lambda y, x: pl.where(
        (x > 1) & (m - x >= 3) & (x <= y + 2) & (2 < x + 1) & ((x + y) % 3 != 0),
        A[y, x] * 2.0, B[y, x] - 1.0), name="C")
    mod = pl.build(C)
    a = rng.standard_normal((size, size + 4))
    b = rng.standard_normal((size, size + 4))
    got = np.full(a.shape, np.nan)
    mod(a, b, got)
    y, x = np.indices(a.shape)
    keep = (x > 1) & (a.shape[1] - x >= 3) & (x <= y + 2) & ((x + y) % 3 != 0)
    np.testing.assert_array_equal(got, np.where(keep, a * 2.0, b - 1.0))


def test_concatenation_reads_each_input_in_its_range(rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((m,), "float32", name="B")
    C = pl.compute((n + m,), lambda i: pl.where(i < n, A[i], B[i - n]), name="C")
    mod = pl.build(C)
    assert "? A[" not in mod.source
    for k, j in [(1, 1), (3, 8), (17, 2)]:
        a = rng.standard_normal(k).astype("float32")
        b = rng.standard_normal(j).astype("float32")
        got = np.full(k + j, np.nan, "float32")
        mod(a, b, got)
        np.testing.assert_array_equal(got, np.concatenate([a, b]))
