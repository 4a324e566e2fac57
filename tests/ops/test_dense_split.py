# SPDX-License-Identifier: Apache-2.0
"""A dense layer with its reduction split between threads (polyloop.ops.dense_split_k) against
NumPy: rows 1, 3 and 4, rows in several tiles (21 rows, 9 rows), columns off the vector width, bias and ReLU or neither, more slices than
threads, NaN-poisoned outputs; malformed operands refused."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops


@pytest.mark.parametrize("m, k, n, splits, bias, relu, lanes",
                         [(1, 96, 37, 2, True, True, None), (3, 120, 20, 3, False, False, 8),
                          (4, 64, 16, 4, True, False, 4), (21, 50, 10, 1, True, False, None),
                          (9, 40, 7, 2, False, True, 4)])
def test_dense_split_matches_numpy(rng, m, k, n, splits, bias, relu, lanes):
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((k, n), dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    X, W = pl.placeholder(x.shape, name="x"), pl.placeholder(w.shape, name="w")
    B = pl.placeholder(b.shape, name="b") if bias else None
    out = ops.dense_split_k(X, W, B, splits=splits, relu=relu, lanes=lanes)
    mod = pl.build(ops.schedule_dense_split_k(out, lanes=lanes))
    expected = x.astype(np.float64) @ w + (b if bias else 0.0)
    if relu:
        expected = np.maximum(expected, 0.0)
    got = np.full((m, n), np.nan, np.float32)
    mod(*((x, w, b) if bias else (x, w)), got)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_malformed_operands_are_refused():
    x, w = pl.placeholder((2, 30), name="x"), pl.placeholder((30, 8), name="w")
    with pytest.raises(pl.ScheduleError, match="4 slices do not divide the reduction of 30"):
        ops.dense_split_k(x, w, splits=4)
    with pytest.raises(pl.ScheduleError, match=r"bias must be \(8,\)"):
        ops.dense_split_k(x, w, pl.placeholder((9,), name="b"))
    with pytest.raises(pl.ScheduleError, match="constant sizes"):
        ops.dense_split_k(pl.placeholder((pl.var("m"), 30), name="y"), w)
    wide = ops.dense_split_k(x, pl.placeholder((30, 117), name="v"), lanes=4)
    with pytest.raises(pl.ScheduleError, match="more than 28 vectors"):
        ops.schedule_dense_split_k(wide, lanes=4)
    with pytest.raises(pl.ScheduleError, match="expected the result of dense_split_k"):
        ops.schedule_dense_split_k(x)


@pytest.mark.parametrize("m, k, n, nr, splits, lanes",
                         [(4, 96, 37, 48, 2, None), (3, 40, 20, 24, 2, 8), (2, 30, 5, 32, 1, 8),
                          (5, 33, 13, 13, 3, 4)])
def test_one_packed_panel_of_zero_padded_columns(rng, m, k, n, nr, splits, lanes):
    """Weights packed in one panel (pack_matmul_weight) of ``nr`` columns, zeros past ``n``:
    read without masks when ``nr`` holds the widened row, with them when not (13 of 13)."""
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((k, n), dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    packed = ops.pack_matmul_weight(w, nr)
    assert packed.shape == (1, k, nr)
    X, P = pl.placeholder(x.shape, name="x"), pl.placeholder(packed.shape, name="p")
    out = ops.dense_split_k(X, P, pl.placeholder(b.shape, name="b"), splits=splits, relu=True,
                            lanes=lanes, columns=n)
    mod = pl.build(ops.schedule_dense_split_k(out, lanes=lanes))
    got = np.full((m, n), np.nan, np.float32)
    mod(x, packed, b, got)
    expected = np.maximum(x.astype(np.float64) @ w + b, 0.0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_a_packed_panel_needs_its_columns():
    x, p = pl.placeholder((2, 30), name="x"), pl.placeholder((1, 30, 16), name="p")
    with pytest.raises(pl.ScheduleError, match="need columns= the result's columns, at most 16"):
        ops.dense_split_k(x, p)
    with pytest.raises(pl.ScheduleError, match="at most 16, got 17"):
        ops.dense_split_k(x, p, columns=17)
    with pytest.raises(pl.ScheduleError, match="one panel when packed"):
        ops.dense_split_k(x, pl.placeholder((2, 30, 8), name="q"), columns=10)
