# SPDX-License-Identifier: Apache-2.0
"""A local tile whose home loop isl emits as two loops (the parallel full panels and a serial
remainder) is declared in each copy, so every thread has its own: declared once at function
scope it was shared by the threads (a race found by pl.tune: wrong C elements now and then)."""
from __future__ import annotations

import re

import numpy as np

import polyloop as pl


def _schedule():
    A = pl.placeholder((100, 70), "float32", name="A")
    B = pl.placeholder((70, 90), "float32", name="B")
    k = pl.reduce_axis((0, 70), name="k")
    C = pl.compute((100, 90), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    sch.transform_layout("C", "B", lambda k, j: (j // 16, k, j % 16))
    tile = sch.cache_write("C", "local")
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, factors=[13, 4, 2])
    j0, j1, j2 = sch.split(j, factors=[None, 1, 16])
    sch.reorder(j0, i0, i1, kk, i2, j1, j2)
    sch.parallel(j0)
    sch.unroll(i2)
    sch.unroll(j1)
    sch.vectorize(j2)
    sch.decompose_reduction(c, kk)
    sch.reverse_compute_at(tile, i1)
    sch.compute_at("B_packed_in", j0)
    return sch


def test_each_copy_of_the_home_loop_declares_the_tile():
    mod = pl.build(_schedule())
    body = mod.source[mod.source.index("int32_t pl_C_kernel_body"):]
    head = body[:body.index("#pragma omp parallel")]
    assert "C_local" not in head              # not shared at function scope
    assert len(re.findall(r"float C_local\[", body)) == 2
    # the packed panel of B, a global temporary sized to loop j_0, is each thread's own too
    parallel = body[body.index("#pragma omp parallel"):]
    assert re.search(r"float B_packed\[", parallel[:parallel.index("for (int64_t i_0")])
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.standard_normal((100, 70)).astype("float32")
        b = rng.standard_normal((70, 90)).astype("float32")
        c = np.full((100, 90), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _one_iteration_home(n: int | pl.Var):
    """The tile's home loop ``i_1`` has one iteration: isl's AST has no such loop at all, in
    the parallel copy or in the remainder."""
    A = pl.placeholder((n, 75), "float32", name="A")
    B = pl.placeholder((75, 100), "float32", name="B")
    k = pl.reduce_axis((0, 75), name="k")
    C = pl.compute((n, 100), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    sch.transform_layout("C", "B", lambda k, j: (j // 48, k, j % 48))
    tile = sch.cache_write("C", "local")
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, factors=[None, 1, 4])
    j0, j1, j2 = sch.split(j, factors=[None, 3, 16])
    sch.reorder(j0, i0, i1, kk, i2, j1, j2)
    sch.parallel(j0)
    sch.unroll(i2)
    sch.unroll(j1)
    sch.vectorize(j2)
    sch.decompose_reduction(c, kk)
    sch.reverse_compute_at(tile, i1)
    return sch


def test_a_dropped_one_iteration_home_loop_declares_the_tile_in_its_enclosing_loop():
    mod = pl.build(_one_iteration_home(36))
    body = mod.source[mod.source.index("int32_t pl_C_kernel_body"):]
    assert "C_local" not in body[:body.index("#pragma omp parallel")]
    assert "i_1" not in body                        # the home loop is gone from the code
    # declared right inside each copy of i_0, the loop that encloses the home loop
    assert len(re.findall(r"for \(int64_t i_0[^\n]*\n\s*_Alignas\(64\) float C_local\[", body)) \
        == 2
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.standard_normal((36, 75)).astype("float32")
        b = rng.standard_normal((75, 100)).astype("float32")
        c = np.full((36, 100), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_a_dropped_home_loop_with_a_symbolic_size():
    n = pl.var("n")
    mod = pl.build(_one_iteration_home(n))
    body = mod.source[mod.source.index("int32_t pl_C_kernel_body"):]
    assert "C_local" not in body[:body.index("#pragma omp parallel")]
    rng = np.random.default_rng(2)
    for rows in (1, 9, 37):
        a = rng.standard_normal((rows, 75)).astype("float32")
        b = rng.standard_normal((75, 100)).astype("float32")
        c = np.full((rows, 100), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
