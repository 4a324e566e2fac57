# SPDX-License-Identifier: Apache-2.0
"""``fuse`` of loops with symbolic extents: one loop over n * m (made in the code: i = f // m,
j = f % m), legal whenever the loops are, with split / parallel / vectorize / unroll after it."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

from .programs import lines, poisoned, refused_unchanged

SIZES = [(0, 4), (7, 0), (1, 1), (3, 5), (37, 29)]


def _scale():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    return pl.Schedule(pl.compute((n, m), lambda i, j: A[i, j] * 2.0 - 1.0, name="B"))


def _check(sch, rng, sizes=SIZES):
    mod = pl.build(sch)
    for shape in sizes:
        a = rng.standard_normal(shape, dtype="float32")
        out = poisoned(shape)
        mod(a, out)
        np.testing.assert_allclose(out, a * 2.0 - 1.0, rtol=1e-6, atol=1e-6)


def test_a_fused_loop_runs_n_times_m_and_recovers_each_iterator(rng):
    sch = _scale()
    f = sch.fuse(*sch.get_loops("B"))
    assert f.name == "i_j_fused" and [h.name for h in sch.get_loops("B")] == ["i_j_fused"]
    sch.parallel(f)
    assert lines(sch) == ["for i_j_fused in parallel(n * m):", "i = i_j_fused // m",
                          "j = i_j_fused % m", "B[i, j] = A[i, j] * 2.0 - 1.0"]
    source = pl.build(sch).source
    assert "#pragma omp parallel for" in source and "const int64_t j = " in source
    _check(sch, rng)


@pytest.mark.parametrize("factor", [1, 16, 7])
def test_split_parallel_and_vectorize_after_fuse(rng, factor):
    sch = _scale()
    fo, fi = sch.split(sch.fuse(*sch.get_loops("B")), factor=factor)
    sch.parallel(fo)
    sch.vectorize(fi)
    assert lines(sch)[:2] == [f"for i_j_fused_0 in parallel((n * m + {factor - 1}) // {factor}):"
                              if factor > 1 else "for i_j_fused_0 in parallel(n * m):",
                              f"for i_j_fused_1 in vectorized(min({factor}, n * m - "
                              f"{factor} * i_j_fused_0)):" if factor > 1 else
                              "for i_j_fused_1 in vectorized(min(1, n * m - i_j_fused_0)):"]
    _check(sch, rng)
    replayed = pl.Schedule.from_trace(sch.program, sch.trace)
    assert str(replayed) == str(sch)


def test_three_symbolic_loops_fused_and_unrolled(rng):
    n, m, k = pl.var("n"), pl.var("m"), pl.var("k")
    A = pl.placeholder((n, m, k), "float32", name="A")
    sch = pl.Schedule(pl.compute((n, m, k), lambda a, b, c: A[a, b, c] + 3.0, name="B"))
    f0, f1 = sch.split(sch.fuse(*sch.get_loops("B"), name="abc"), factor=4)
    sch.unroll(f1)
    mod = pl.build(sch)
    for shape in [(2, 3, 5), (0, 2, 2), (1, 7, 1)]:
        a = rng.standard_normal(shape, dtype="float32")
        out = poisoned(shape)
        mod(a, out)
        np.testing.assert_allclose(out, a + 3.0, rtol=1e-6)


def test_a_fused_loop_around_a_reduction(rng):
    n, m, r = pl.var("n"), pl.var("m"), pl.var("r")
    A = pl.placeholder((n, r), "float32", name="A")
    B = pl.placeholder((r, m), "float32", name="B")
    k = pl.reduce_axis((0, r), name="k")
    C = pl.compute((n, m), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    i, j, kk = sch.get_loops("C")
    sch.parallel(sch.fuse(i, j))
    mod = pl.build(sch)
    for (nn, mm, rr) in [(5, 7, 3), (1, 13, 0), (9, 1, 4)]:
        a = rng.standard_normal((nn, rr), dtype="float32")
        b = rng.standard_normal((rr, mm), dtype="float32")
        out = poisoned((nn, mm))
        mod(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


@pl.script
def _row_prefix(A: pl.Buffer[("n", "m"), "float32"], B: pl.Buffer[("n", "m"), "float32"]):
    for i in range(n):
        for j in range(m):
            B[i, j] = A[i, j] if j == 0 else B[i, j - 1] + A[i, j]


def test_a_fused_loop_is_parallel_only_if_every_loop_fused_is(rng):
    sch = pl.Schedule(_row_prefix)
    f = sch.fuse(*sch.get_loops("B"))
    msg = refused_unchanged(sch, lambda: sch.parallel(f), "cannot parallelize loop 'i_j_fused'",
                            "fused from loop 'j'")
    assert "RAW" in msg
    refused_unchanged(sch, lambda: sch.vectorize(f), "cannot vectorize", "loop 'j'")
    fo, fi = sch.split(f, factor=8)
    refused_unchanged(sch, lambda: sch.parallel(fo), "fused from loop 'j'")
    sch.unroll(fi)                  # unrolling never reorders: allowed
    mod = pl.build(sch)
    a = rng.standard_normal((6, 11), dtype="float32")
    out = poisoned((6, 11))
    mod(a, out)
    np.testing.assert_allclose(out, np.cumsum(a, axis=1), rtol=1e-5, atol=1e-5)


def _lower_triangle(A: pl.Buffer[("n", "n"), "float32"], L: pl.Buffer[("n", "n"), "float32"]):
    for i in range(n):
        for j in range(i + 1):
            L[i, j] = A[i, j]


def test_fuse_refuses_a_triangle_and_other_primitives_on_the_fused_loop():
    sch = pl.Schedule(pl.script(_lower_triangle))
    i, j = sch.get_loops("L")
    refused_unchanged(sch, lambda: sch.fuse(i, j), "not a rectangle")
    sch = _scale()
    i, j = sch.get_loops("B")
    f = sch.fuse(i, j)
    refused_unchanged(sch, lambda: sch.reorder(f), "fused loop of symbolic extent",
                      "split, parallel, vectorize and unroll")
    refused_unchanged(sch, lambda: sch.bind(f, "blockIdx.x"), "fused loop of symbolic extent")
    refused_unchanged(sch, lambda: sch.parallel(j), "was fused into loop 'i_j_fused'")
    fo, fi = sch.split(f, factor=4)
    refused_unchanged(sch, lambda: sch.split(fo, factor=2), "splits no further")
    refused_unchanged(sch, lambda: sch.vectorize(fo), "outer part of a split fused loop")
