# SPDX-License-Identifier: Apache-2.0
"""``fuse``: directly nested loops become one loop (the inner ones need constant extents)."""
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
    refused_unchanged(sch, lambda: sch.fuse(i, j), "fuse: loop 'j' has no constant extent")
    di, dj = sch.get_loops("D")
    refused_unchanged(sch, lambda: sch.fuse(i, dj), "fuse", "not nested in one another")
