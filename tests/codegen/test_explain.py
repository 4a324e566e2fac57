# SPDX-License-Identifier: Apache-2.0
"""``mod.explain()`` / ``pl.build(..., explain=True)``: a loop marked vectorized that is not
explicit vector code says why (in the report and in a comment of the generated code); an
unrolled loop without a constant trip count is reported; lowering's notes are listed."""
from __future__ import annotations

import numpy as np

import polyloop as pl


def strided(n) -> pl.Schedule:
    A = pl.placeholder((2 * n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[2 * i] + 1.0, name="B")
    sch = pl.Schedule(B)
    (i,) = sch.get_loops("B")
    i0, i1 = sch.split(i, [None, 16])
    sch.vectorize(i1)
    return sch


def test_a_vectorized_loop_left_scalar_says_why(capsys, rng):
    mod = pl.build(strided(pl.var("n")), explain=True)
    printed = capsys.readouterr().out
    assert "loop 'i_1' is marked vectorized but is not explicit vector code: it reads A at " \
           "non-contiguous elements" in printed
    assert printed.strip() == mod.explain()
    assert "no explicit vector code (it reads A at non-contiguous elements" in mod.source
    a = rng.random(2 * 37, dtype=np.float32)
    out = np.full(37, np.nan, np.float32)
    mod(a, out)
    np.testing.assert_allclose(out, a[::2] + 1, rtol=1e-6)


def matmul_tiles(n) -> pl.Schedule:
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    i, j, kk = sch.get_loops("C")
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(kk, [None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.unroll(k1)
    sch.vectorize(j1)
    return sch


def test_full_tiles_carry_constant_bounds_and_the_rest_is_reported():
    mod = pl.build(matmul_tiles(pl.var("n")))
    # isl isolates the full tiles: their unrolled and vector loops have constant bounds
    assert "for (int64_t k_1 = 0; k_1 < 4; k_1++)" in mod.source
    report = mod.explain()
    assert "loop 'j_1': explicit vectors of" in report
    assert "loop 'k_1' is marked unrolled but its trip count is not a constant here" in report
    assert "C: 16 element(s) kept in registers" in report


def test_nothing_to_say_is_an_empty_report():
    A = pl.placeholder((8,), "float32", name="A")
    assert pl.build(pl.compute((8,), lambda i: A[i] * 2.0, name="B")).explain() == ""
