# SPDX-License-Identifier: Apache-2.0
"""``fuse``: directly nested loops become one loop (symbolic extents: test_fuse_symbolic.py)."""
from __future__ import annotations

import numpy as np

import polyloop as pl

from .programs import check_matmul_relu, lines, matmul_sch, poisoned, refused_unchanged


def test_fuse_of_a_split_gives_back_one_loop(rng):
    sch, (i, j, k) = matmul_sch()
    i0, i1 = sch.split(i, factors=[None, 4])
    f = sch.fuse(i0, i1)
    assert f.name == "i_0_i_1_fused"
    assert "C[i_0_i_1_fused, j] += A[i_0_i_1_fused, k] * B[k, j]" in lines(sch)
    check_matmul_relu(sch, rng)


def test_fuse_three_loops_of_constant_extent_then_split(rng):
    A = pl.placeholder((3, 5, 7), "float32", name="A")
    B = pl.compute((3, 5, 7), lambda a, b, c: A[a, b, c] * 3.0 - 1.0, name="B")
    sch = pl.Schedule(B)
    a, b, c = sch.get_loops("B")
    f = sch.fuse(a, b, c, name="abc")
    assert lines(sch)[0] == "for abc in range(105):"
    f0, f1 = sch.split(f, factors=[None, 16])
    sch.vectorize(f1)
    x = rng.standard_normal((3, 5, 7), dtype="float32")
    out = poisoned((3, 5, 7))
    pl.build(sch)(x, out)
    np.testing.assert_allclose(out, x * 3.0 - 1.0, rtol=1e-6, atol=1e-6)   # gcc may use fma


def test_fuse_wrong_uses():
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.fuse(j), "fuse needs at least two loops")
    refused_unchanged(sch, lambda: sch.fuse(i, k), "fuse: the loops must be directly nested")
    refused_unchanged(sch, lambda: sch.fuse(j, i), "fuse: the loops must be directly nested")
    di, dj = sch.get_loops("D")
    refused_unchanged(sch, lambda: sch.fuse(i, dj), "fuse", "not nested in one another")


def _stages(h: int = 6, w: int = 5):
    A = pl.placeholder((h, w), "float32", name="A")
    B = pl.compute((h, w), lambda i, j: A[i, j] * 2.0, name="B")
    return pl.compute((h, w), lambda i, j: B[i, j] + 1.0, name="C")


def _check_stages(sch, rng, h: int = 6, w: int = 5):
    a = rng.standard_normal((h, w), dtype="float32")
    out = poisoned((h, w))
    pl.build(sch)(a, out)
    np.testing.assert_allclose(out, a * 2.0 + 1.0, rtol=1e-6)


def test_fused_tile_loops_recover_each_loop_with_div_and_mod(rng):
    """The code of a fused loop comes from the loops it replaced (exact isl bounds), each
    recovered from the fused index, with the partial tiles as guards."""
    sch = pl.Schedule(_stages(7, 9))
    i, j = sch.get_loops("C")
    i0, j0, i1, j1 = sch.tile(i, j, 2, 4)
    outer = sch.fuse(i0, j0)
    sch.fuse(i1, j1)
    sch.parallel(outer)
    assert lines(sch)[-5:] == [
        "for i_0_j_0_fused in parallel(12):",          # 4 row tiles x 3 column tiles
        "for i_1_j_1_fused in range(8):",
        "if i_1_j_1_fused // 4 <= min(1, -(2 * (i_0_j_0_fused // 3)) + 6):",
        "if i_1_j_1_fused % 4 <= min(3, -(4 * (i_0_j_0_fused % 3)) + 8):",
        "C[2 * (i_0_j_0_fused // 3) + i_1_j_1_fused // 4, 4 * (i_0_j_0_fused % 3) + "
        "i_1_j_1_fused % 4] = B[2 * (i_0_j_0_fused // 3) + i_1_j_1_fused // 4, "
        "4 * (i_0_j_0_fused % 3) + i_1_j_1_fused % 4] + 1.0",
    ]
    _check_stages(sch, rng, 7, 9)


def test_compute_at_into_a_fused_loop_then_split_and_vectorize(rng):
    sch = pl.Schedule(_stages())
    i, j = sch.get_loops("C")
    f = sch.fuse(i, j)
    sch.compute_at("B", f)
    assert lines(sch) == [
        "for i_j_fused in range(30):",
        "B[i_j_fused // 5, i_j_fused % 5] = A[i_j_fused // 5, i_j_fused % 5] * 2.0",
        "C[i_j_fused // 5, i_j_fused % 5] = B[i_j_fused // 5, i_j_fused % 5] + 1.0",
    ]
    _check_stages(sch, rng)
    f0, f1 = sch.split(f, factors=[None, 4])
    sch.vectorize(f1)     # B's own loops have one iteration each: f1 is innermost
    _check_stages(sch, rng)


def test_fuse_with_a_loop_of_one_iteration(rng):
    sch = pl.Schedule(_stages())
    i, j = sch.get_loops("B")
    i0, i1 = sch.split(i, factors=[None, 1])
    sch.fuse(i1, j)
    _check_stages(sch, rng)
