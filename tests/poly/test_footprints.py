# SPDX-License-Identifier: Apache-2.0
"""Exact footprints per loop level (poly.footprints), checked against counts by hand on a
tiled matrix product and a tiled 5-point stencil whose sizes the tiles do not divide, with
symbolic sizes bound at counting time."""
from __future__ import annotations

import math

import pytest

import polyloop as pl
from polyloop.poly.footprints import loop_footprints
from polyloop.tune.features import MAX_BUFFERS, PER_FOOTPRINT, feature_groups


def _tiled_matmul():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    i, j, kk = sch.get_loops("C")
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, kk, i1, j1)
    return sch


def _by_loop(sch, sizes):
    return {f.loop: f for f in loop_footprints(sch.program, sch.state.root, sizes)}


def test_matmul_footprints_match_hand_counts():
    fp = _by_loop(_tiled_matmul(), {"n": 37})      # 37 = 4 * 8 + 5 = 2 * 16 + 5
    # one row tile: 8 rows of A and C, all of B; 8 * 37 * 37 multiply-adds
    assert fp["i_0"].elements == {"A": 8 * 37, "B": 37 * 37, "C": 8 * 37}
    assert fp["i_0"].instances == 8 * 37 * 37 and fp["i_0"].flops == 2 * 8 * 37 * 37
    # one 8 x 16 tile of C: 8 rows of A, 16 columns of B
    assert fp["j_0"].elements == {"A": 8 * 37, "B": 37 * 16, "C": 8 * 16}
    # one k: a column of A's tile, a row of B's, the whole C tile
    assert fp["k"].elements == {"A": 8, "B": 16, "C": 8 * 16}
    assert fp["i_1"].elements == {"A": 1, "B": 16, "C": 16}
    assert fp["j_1"].elements == {"A": 1, "B": 1, "C": 1} and fp["j_1"].flops == 2
    # the initialisation nest: a row of C, then one element
    assert fp["i"].elements == {"C": 37} and fp["j"].elements == {"C": 1}
    assert fp["i"].flops == 0


def test_stencil_footprints_match_hand_counts():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float64", name="A")
    B = pl.compute((n - 2, n - 2), lambda i, j: A[i, j + 1] + A[i + 2, j + 1] + A[i + 1, j]
                   + A[i + 1, j + 2] + A[i + 1, j + 1], name="B")
    sch = pl.Schedule(B)
    i, j = sch.get_loops("B")
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i0, j0, i1, j1)
    fp = _by_loop(sch, {"n": 23})      # 21 x 21 points: tiles of 4 and 8 do not divide
    # 4 output rows read rows 0..5 at the 21 inner columns and rows 1..4 at both edges
    assert fp["i_0"].elements == {"A": 6 * 21 + 4 * 2, "B": 4 * 21}
    assert fp["i_0"].flops == 4 * 4 * 21
    # a 4 x 8 tile: a 6 x 8 block plus the 4 x 2 edge columns
    assert fp["j_0"].elements == {"A": 6 * 8 + 4 * 2, "B": 4 * 8}
    # one row of the tile: two rows of 8 and the middle row of 10
    assert fp["i_1"].elements == {"A": 8 + 8 + 10, "B": 8}
    assert fp["j_1"].elements == {"A": 5, "B": 1}


def test_footprint_features_are_the_counts():
    sch = _tiled_matmul()
    rows = feature_groups(sch, {"n": 37})["footprints"]
    names = [f.loop for f in loop_footprints(sch.program, sch.state.root, {"n": 37})]
    row = rows[names.index("j_0") * PER_FOOTPRINT:][:PER_FOOTPRINT]
    # the argument buffers in order (A, B, C), then an unused slot
    assert row[:MAX_BUFFERS] == pytest.approx(
        [math.log2(1 + 8 * 37), math.log2(1 + 37 * 16), math.log2(1 + 8 * 16), -1.0])
    nbytes = 4 * (8 * 37 + 37 * 16 + 8 * 16)
    assert row[MAX_BUFFERS] == pytest.approx(math.log2(1 + nbytes))
    assert row[MAX_BUFFERS + 3] == pytest.approx(math.log2(1 + 2 * 8 * 16 * 37 / nbytes))


def test_a_skewed_loop_counts_its_largest_sampled_iteration():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    sch = pl.Schedule(B)
    i, j = sch.get_loops("B")
    sch.skew(i, j, factor=1)
    sch.reorder(j, i)
    fp = _by_loop(sch, {"n": 9})
    outer = fp[sch.get_loops("B")[0].name]
    # the middle anti-diagonal of a 9 x 9 square holds 9 points (the first holds 1)
    assert outer.elements == {"A": 9, "B": 9}
