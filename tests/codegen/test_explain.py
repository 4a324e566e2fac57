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


def bmm_relu(b, n, *, reorder: bool = True) -> pl.Schedule:
    """The MLC course's batched matmul + ReLU schedule: Y's tile of 8 columns sized to the j
    tile (reverse_compute_at), updated by a serial loop of 8 under an unrolled k."""
    A = pl.placeholder((b, n, n), "float32", name="A")
    B = pl.placeholder((b, n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    Y = pl.compute((b, n, n), lambda t, i, j: pl.sum(A[t, i, k] * B[t, k, j], axis=k), name="Y")
    C = pl.compute((b, n, n), lambda t, i, j: pl.maximum(Y[t, i, j], 0.0), name="C")
    sch = pl.Schedule(C)
    t, i, j, kk = sch.get_loops("Y")
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(kk, [None, 4])
    sch.reorder(j0, k0, k1, j1)
    sch.reverse_compute_at("C", j0)
    sch.parallel(t)
    init = sch.decompose_reduction("Y", k0)
    sch.unroll(k1)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.vectorize(sch.get_loops("C")[-1])
    return sch


def test_serial_row_of_a_local_tile_is_left_to_the_vectorizer(rng):
    mod = pl.build(bmm_relu(3, 24))
    lines = mod.source.splitlines()
    k = next(n for n, line in enumerate(lines) if "for (int64_t j_1 = 0; j_1 < 8; j_1++)" in line)
    assert lines[k - 1].strip() == "#pragma GCC unroll 1"
    assert "loop 'j_1' updates a row of a loop-local tile" in mod.explain()
    a = rng.standard_normal((3, 24, 24)).astype(np.float32)
    b = rng.standard_normal((3, 24, 24)).astype(np.float32)
    out = np.full((3, 24, 24), np.nan, np.float32)
    mod(a, b, out)
    np.testing.assert_allclose(out, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_a_serial_loop_with_a_carried_dependence_is_not_a_tile_row():
    n = pl.var("n")
    A = pl.placeholder((n, 8), "float32", name="A")
    k = pl.reduce_axis((0, 8), name="k")
    S = pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="S")
    T = pl.compute((n,), lambda i: S[i] * 2.0, name="T")
    sch = pl.Schedule(T)
    sch.compute_at("S", sch.get_loops("T")[0])
    mod = pl.build(sch)
    # S is one loop-local element summed over k: every iteration of k updates it
    assert "#pragma GCC unroll 1" not in mod.source and "tile" not in mod.explain()
