# SPDX-License-Identifier: Apache-2.0
"""A local tile whose home loop isl emits as two loops (the parallel full panels and a serial
remainder) is declared in each copy, so every thread has its own: declared once at function
scope it was shared by the threads (a race found by pl.tune: wrong C elements now and then)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import polyloop as pl

from matmul_checks import check_matmul  # tests/ is on sys.path (rootdir conftest)


def _tiled(rows, depth: int, cols: int, panel: int, i_factors: list, j_factors: list, *,
           pack_per_panel: bool):
    """C = A @ B with B packed in ``panel``-wide column panels, a local tile of C at the middle
    row loop ``i_1``, the column panels ``j_0`` in parallel, the tile's rows and vectors
    unrolled; ``pack_per_panel``: B's panel packed inside ``j_0``."""
    A = pl.placeholder((rows, depth), "float32", name="A")
    B = pl.placeholder((depth, cols), "float32", name="B")
    k = pl.reduce_axis((0, depth), name="k")
    C = pl.compute((rows, cols), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    sch.transform_layout("C", "B", lambda k, j: (j // panel, k, j % panel))
    tile = sch.cache_write("C", "local")
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, factors=i_factors)
    j0, j1, j2 = sch.split(j, factors=j_factors)
    sch.reorder(j0, i0, i1, kk, i2, j1, j2)
    sch.parallel(j0)
    sch.unroll(i2)
    sch.unroll(j1)
    sch.vectorize(j2)
    sch.decompose_reduction(c, kk)
    sch.reverse_compute_at(tile, i1)
    if pack_per_panel:
        sch.compute_at("B_packed_in", j0)
    return sch


def test_each_copy_of_the_home_loop_declares_the_tile():
    mod = pl.build(_tiled(100, 70, 90, 16, [13, 4, 2], [None, 1, 16], pack_per_panel=True))
    body = mod.source[mod.source.index("int32_t pl_C_kernel_body"):]
    head = body[:body.index("#pragma omp parallel")]
    assert "C_local" not in head              # not shared at function scope
    assert len(re.findall(r"float C_local\[", body)) == 2
    # the packed panel of B, a global temporary sized to loop j_0, is each thread's own too
    parallel = body[body.index("#pragma omp parallel"):]
    assert re.search(r"float B_packed\[", parallel[:parallel.index("for (int64_t i_0")])
    check_matmul(mod, [(100, 90, 70)] * 20, np.random.default_rng(0))


def _one_iteration_home(n: int | pl.Var):
    """The tile's home loop ``i_1`` has one iteration: isl's AST has no such loop at all, in
    the parallel copy or in the remainder."""
    return _tiled(n, 75, 100, 48, [None, 1, 4], [None, 3, 16], pack_per_panel=False)


def test_a_dropped_one_iteration_home_loop_declares_the_tile_in_its_enclosing_loop():
    mod = pl.build(_one_iteration_home(36))
    body = mod.source[mod.source.index("int32_t pl_C_kernel_body"):]
    assert "C_local" not in body[:body.index("#pragma omp parallel")]
    assert "i_1" not in body                        # the home loop is gone from the code
    # declared right inside each copy of i_0, the loop that encloses the home loop
    assert len(re.findall(r"for \(int64_t i_0[^\n]*\n\s*_Alignas\(64\) float C_local\[", body)) \
        == 2
    check_matmul(mod, [(36, 100, 75)] * 20, np.random.default_rng(1))


def test_a_dropped_home_loop_with_a_symbolic_size():
    n = pl.var("n")
    mod = pl.build(_one_iteration_home(n))
    body = mod.source[mod.source.index("int32_t pl_C_kernel_body"):]
    assert "C_local" not in body[:body.index("#pragma omp parallel")]
    check_matmul(mod, [(rows, 100, 75) for rows in (1, 9, 37)], np.random.default_rng(2))


def test_a_home_loop_named_like_a_loop_of_another_statement():
    """The tile's home loop ``n_0`` (one iteration: isl drops it) is named like a loop of the
    statement before it; the home loop is found by its path, not its name, so the tile is
    still declared inside the parallel loop (found by name, it was shared by the threads)."""
    A = pl.placeholder((8, 16), name="A")
    W = pl.placeholder((13, 8), name="W")
    doubled = pl.compute((8, 16), lambda i, n: A[i, n] * 2.0, name="doubled")
    k = pl.reduce_axis((0, 8), name="k")
    C = pl.compute((13, 16), lambda j, n: pl.sum(W[j, k] * doubled[k, n], axis=k), name="C")
    sch = pl.Schedule(C)
    sch.split(sch.get_loops("doubled")[1], factors=[None, 4])       # loops i, n_0, n_1
    tile = sch.cache_write("C", "local")
    j, n, kk = sch.get_loops("C")
    j0, j1 = sch.split(j, factors=[None, 3])
    n0, n1 = sch.split(n, factors=[None, 16])                         # n_0: one iteration
    sch.reorder(j0, n0, kk, j1, n1)
    sch.parallel(j0)
    sch.decompose_reduction("C", kk)
    sch.reverse_compute_at(tile, n0)
    mod = pl.build(sch)
    body = mod.source[mod.source.index("int32_t pl_C_kernel_body"):]
    assert "C_local" not in body[:body.index("#pragma omp parallel")]
    a = np.random.default_rng(1).standard_normal((8, 16), dtype=np.float32)
    w = np.random.default_rng(2).standard_normal((13, 8), dtype=np.float32)
    out = np.full((13, 16), np.nan, np.float32)
    mod(a, w, out)
    np.testing.assert_allclose(out, w @ (2 * a), rtol=1e-5, atol=1e-5)


def test_an_inner_loop_named_like_a_loop_above_the_home_loop():
    """The tile's home loop ``j_0`` runs inside the parallel loop ``m_0`` over tiles of image
    vectors, which isl emits as two copies (the full tile, the part tile) without any loop
    ``m_0``; the initialisation's own split of ``m`` is named ``m_0`` too. That inner loop is
    not a loop above the home loop: the tile is declared once per copy of ``j_0``, not again
    inside the initialisation (which then zeroed a copy of its own)."""
    A = pl.placeholder((8, 12), name="A")
    W = pl.placeholder((6, 8), name="W")
    k = pl.reduce_axis((0, 8), name="k")
    C = pl.compute((6, 12), lambda j, m: pl.sum(W[j, k] * A[k, m], axis=k), name="C")
    sch = pl.Schedule(C)
    tile = sch.cache_write("C", "local")
    j, m, kk = sch.get_loops("C")
    j0, j1 = sch.split(j, factors=[None, 3])
    m0, m1, m2 = sch.split(m, factors=[None, 2, 4])                 # 3 vectors: 2 + 1
    sch.reorder(m0, j0, kk, j1, m1, m2)
    sch.parallel(m0)
    sch.unroll(j1)
    sch.unroll(m1)
    sch.vectorize(m2)
    init = sch.decompose_reduction("C", kk)
    *_, row, lane = sch.get_loops(init)
    r0, r1 = sch.split(lane, factors=[None, 4])                       # loops m_0, m_1
    sch.unroll(row)
    sch.unroll(r0)
    sch.vectorize(r1)
    sch.reverse_compute_at(tile, j0)
    mod = pl.build(sch)
    assert len(re.findall(r"float C_local\[", mod.source)) == 2
    a = np.random.default_rng(3).standard_normal((8, 12), dtype=np.float32)
    w = np.random.default_rng(4).standard_normal((6, 8), dtype=np.float32)
    out = np.full((6, 12), np.nan, np.float32)
    mod(a, w, out)
    np.testing.assert_allclose(out, w @ a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows, i_factors", [(20, [None, 2, 2]), (4, [None, 1, 4])])
def test_copies_of_the_parallel_loop_inside_a_serial_loop_declare_their_own_tiles(rows,
                                                                                  i_factors):
    """The parallel panels ``j_0`` and their remainder are two loops inside the serial batch
    loop ``b``, the tile's home loop ``i_1`` inside each: the accesses share only loop ``b``,
    and the tile declared there was shared by the threads of the parallel copy (a race that
    gave a convolution of 1,000 channels, 31 panels of 32 and a remainder, wrong values).
    With 4 rows the home loop has one iteration and the remainder one panel: isl drops both,
    so the remainder's accesses have no loop toward the home loop but ``b`` (a 1 x 1 image's
    convolution), and ``b`` declares the remainder's tile, ``j_0`` the parallel copy's."""
    A = pl.placeholder((2, rows, 30), "float32", name="A")
    B = pl.placeholder((30, 90), "float32", name="B")
    k = pl.reduce_axis((0, 30), name="k")
    C = pl.compute((2, rows, 90), lambda b, i, j: pl.sum(A[b, i, k] * B[k, j], axis=k),
                   name="C")
    sch = pl.Schedule(C)
    tile = sch.cache_write("C", "local")
    c = sch.get_block("C")
    b, i, j, kk = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, factors=i_factors)
    j0, j1, j2 = sch.split(j, factors=[None, 1, 16])
    sch.reorder(b, j0, i0, i1, kk, i2, j1, j2)
    sch.parallel(j0)
    sch.unroll(i2)
    sch.vectorize(j2)
    sch.decompose_reduction(c, kk)
    sch.reverse_compute_at(tile, i1)
    mod = pl.build(sch)
    body = mod.source[mod.source.index("int32_t pl_C_kernel_body"):].splitlines()
    start = next(n for n, line in enumerate(body) if "omp parallel" in line) + 1
    indent = body[start][:len(body[start]) - len(body[start].lstrip())]
    end = body.index(indent + "}", start)
    assert any("float C_local[" in line for line in body[start:end])  # the parallel copy's own
    rng = np.random.default_rng(5)
    for _ in range(20):
        a = rng.standard_normal((2, rows, 30), dtype=np.float32)
        w = rng.standard_normal((30, 90), dtype=np.float32)
        out = np.full((2, rows, 90), np.nan, np.float32)
        mod(a, w, out)
        np.testing.assert_allclose(out, a @ w, rtol=1e-4, atol=1e-4)
