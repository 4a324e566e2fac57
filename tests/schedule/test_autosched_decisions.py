# SPDX-License-Identifier: Apache-2.0
"""The decisions ``pl.auto_schedule`` takes for performance, each checked for its structure and
for NumPy's result at sizes that do not divide the tile sizes: loop fission for a matrix
product next to an initialisation, tile sizes from the cache model (and no tiling where it
cannot pay), time tiling of stencils, the stride-1 loop innermost and vectorized; plus the
``distribute`` primitive those schedules use, and the warning for a change of basis that
cannot be written as primitives."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import polyloop as pl
from polyloop import config
from polyloop.ir.loops import LoopKind
from polyloop.poly import band_transform, locality
from polyloop.poly.tree import LoopNode, loops, statements_under
from polyloop.schedule import auto, auto_band, auto_common
from polyloop.testing import interpret


@pl.script
def gemm(C: pl.Buffer[("ni", "nj"), "float64"], A: pl.Buffer[("ni", "nk"), "float64"],
         B: pl.Buffer[("nk", "nj"), "float64"]):
    for i in range(ni):  # noqa: F821
        for j in range(nj):  # noqa: F821
            C[i, j] *= 1.2
        for k in range(nk):  # noqa: F821
            for j in range(nj):  # noqa: F821
                C[i, j] += 1.5 * A[i, k] * B[k, j]


@pl.script
def matmul(A: pl.Buffer[("n", "l"), "float64"], B: pl.Buffer[("l", "m"), "float64"],
           C: pl.Buffer[("n", "m"), "float64"]):
    for i in range(n):  # noqa: F821
        for j in range(m):  # noqa: F821
            C[i, j] = 0.0
            for k in range(l):  # noqa: F821
                C[i, j] += A[i, k] * B[k, j]


@pl.script
def matvec(A: pl.Buffer[("n", "m"), "float64"], x: pl.Buffer[("m",), "float64"],
           y: pl.Buffer[("n",), "float64"]):
    for i in range(n):  # noqa: F821
        y[i] = 0.0
        for j in range(m):  # noqa: F821
            y[i] += A[i, j] * x[j]


@pl.script
def mv(A: pl.Buffer[("n", "n"), "float64"], x: pl.Buffer[("n",), "float64"],
       y: pl.Buffer[("n",), "float64"]):
    for i in range(n):  # noqa: F821
        for j in range(n):  # noqa: F821
            y[i] += A[i, j] * x[j]


@pl.script
def jacobi(A: pl.Buffer[("n", "n"), "float64"], B: pl.Buffer[("n", "n"), "float64"],
           T: pl.Buffer[("tsteps",), "float64"]):
    for t in range(tsteps):  # noqa: F821
        for i in range(1, n - 1):  # noqa: F821
            for j in range(1, n - 1):  # noqa: F821
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):  # noqa: F821
            for j in range(1, n - 1):  # noqa: F821
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


def primitives(sch):
    return [s.primitive for s in sch.trace]


def innermost(node):
    while any(isinstance(c, LoopNode) for c in node.children):
        node = next(c for c in node.children if isinstance(c, LoopNode))
    return node


# -- a matrix product next to its initialisation: fission, then a register tile ------------------

@pytest.mark.parametrize("ni, nj, nk", [(1, 1, 1), (7, 129, 3), (130, 17, 131)])
def test_gemm_is_distributed_register_tiled_parallel_and_vectorized(ni, nj, nk, rng):
    sch = pl.auto_schedule(gemm)
    steps = primitives(sch)
    assert steps[0] == "distribute" and "cache_write" in steps
    assert steps.count("unroll") == 2 and steps.count("split") == 2
    init, product = sch.state.root.children
    assert statements_under(init) == ["C"]
    assert statements_under(product) == ["C_local_in", "C_1", "C_local_out"]  # load, k, store
    assert product.kind is LoopKind.PARALLEL
    inner = sch.state.stmt_path("C_1")[-1]
    assert inner.kind is LoopKind.VECTORIZED and inner.name.startswith("j")   # stride 1
    c, a, b = (rng.standard_normal(s) for s in ((ni, nj), (ni, nk), (nk, nj)))
    expected = 1.2 * c + 1.5 * a @ b
    pl.build(sch)(c, a, b)
    np.testing.assert_allclose(c, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n, l, m", [(1, 1, 1), (3, 130, 17), (129, 5, 131)])
def test_matmul_with_initialisation_inside_the_band(n, l, m, rng):
    sch = pl.auto_schedule(matmul)
    assert primitives(sch).count("distribute") == 2      # at j, then at i
    assert len(sch.state.root.children) == 2
    a, b = rng.standard_normal((n, l)), rng.standard_normal((l, m))
    out = np.full((n, m), np.nan)
    pl.build(sch)(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-10, atol=1e-10)


def test_matrix_vector_product_is_not_tiled(rng):
    sch = pl.auto_schedule(matvec)
    assert "split" not in primitives(sch) and "distribute" not in primitives(sch)
    assert sch.state.root.children[0].kind is LoopKind.PARALLEL
    a, x = rng.standard_normal((9, 17)), rng.standard_normal(17)
    y = np.full(9, np.nan)
    pl.build(sch)(a, x, y)
    np.testing.assert_allclose(y, a @ x, rtol=1e-12)


def test_an_int_tile_still_tiles_every_band():
    assert "split" not in primitives(pl.auto_schedule(mv))
    assert "split" in primitives(pl.auto_schedule(mv, tile=8))
    assert "split" not in primitives(pl.auto_schedule(gemm, tile=None))


# -- stencils: time tiling by default ----------------------------------------------------------------

@pytest.mark.parametrize("n, tsteps", [(3, 1), (13, 5), (70, 37)])
def test_time_loop_sweeps_are_fused_skewed_and_tiled(n, tsteps, rng):
    sch = pl.auto_schedule(jacobi)
    steps = primitives(sch)
    # the rows are fused (shifted by one), the columns stay two vectorized loops
    assert steps.count("shift") == 1 and steps.count("merge") == 1
    assert "skew" in steps and "split" in steps and "parallel" in steps
    (top,) = sch.state.root.children
    assert len(set(statements_under(top))) == 2          # one band for both sweeps
    assert [n.kind for n in loops(top) if not any(isinstance(c, LoopNode)
                                                  for c in n.children)] == [LoopKind.VECTORIZED] * 2
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    t = np.zeros(tsteps)
    ea, eb = a.copy(), b.copy()
    interpret(jacobi, ea, eb, t)
    pl.build(sch)(a, b, t)
    np.testing.assert_allclose(a, ea, rtol=1e-12)
    np.testing.assert_allclose(b, eb, rtol=1e-12)


# -- the cache model ---------------------------------------------------------------------------------

def _groups(sch, loop_names):
    band = [n for n in loops(sch.state.root) if n.name in loop_names and "C_1" in
            [s for s, _ in n.exprs]]
    return locality.access_groups(sch.program, [], band)


def test_cache_model_tiles_fit_the_budget_and_prefer_a_long_stride_1_loop():
    sch = pl.Schedule(gemm)
    a, b = sch.state.root.children[0].children
    sch.distribute(pl.LoopHandle(sch.state.root.children[0].id, "i"), at=1)
    groups = _groups(sch, ("i", "k", "j"))
    assert {g.buffer for g in groups} == {"A", "B", "C"}
    assert all(not g.has_reuse or g.buffer in "ABC" for g in groups)
    budget = 512 * 1024
    assert locality.tiling_pays(groups, [None, None, None], budget)
    sizes = locality.tile_sizes(groups, [None, None, None], budget, innermost=2)
    assert sum(g.footprint(sizes) for g in groups) <= budget
    assert sizes[2] >= max(sizes[:2]) and min(sizes) >= 32


def test_cache_model_sees_no_missed_reuse_in_a_matrix_vector_product():
    sch = pl.Schedule(matvec)
    band = [n for n in loops(sch.state.root)]
    groups = locality.access_groups(sch.program, [], band)
    assert not locality.tiling_pays(groups, [None, None], 512 * 1024)
    assert locality.tiling_pays(groups, [None, 10 ** 6], 512 * 1024)   # a row leaves the cache


def test_cache_sizes_are_read_from_the_machine():
    l1, l2 = auto_common.cache_sizes()
    assert 16 * 1024 <= l1 <= l2


# -- distribute: loop fission as a primitive ---------------------------------------------------------

def test_distribute_splits_a_loop_and_replays(rng):
    sch = pl.Schedule(gemm)
    i = sch.get_loops("C")[0]
    first, second = sch.distribute(i, at=1)
    assert [statements_under(c) for c in sch.state.root.children] == [["C"], ["C_1"]]
    assert first.id == i.id and second.id != i.id
    again = pl.Schedule.from_trace(gemm, sch.trace)
    assert str(again) == str(sch)
    c, a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 4)), rng.standard_normal((4, 3))
    expected = 1.2 * c + 1.5 * a @ b
    pl.build(sch)(c, a, b)
    np.testing.assert_allclose(c, expected, rtol=1e-12)


def test_distribute_refuses_to_break_a_dependence():
    sch = pl.Schedule(jacobi)
    t = sch.get_loops("B")[0]
    before = str(sch)
    with pytest.raises(pl.ScheduleError, match="would break the RAW dependence A -> B"):
        sch.distribute(t, at=1)
    assert str(sch) == before and "distribute" not in primitives(sch)


@pytest.mark.parametrize("at", [0, 2, "1"])
def test_distribute_bad_position(at):
    sch = pl.Schedule(gemm)
    with pytest.raises(pl.ScheduleError, match="distribute"):
        sch.distribute(sch.get_loops("C")[0], at=at)


# -- a change of basis that is no sequence of legal primitives is reported ---------------------------

def test_non_triangular_band_transform_warns_and_keeps_the_band():
    sch = pl.Schedule(matvec)
    band = [sch.state.root.children[0], sch.state.root.children[0].children[1]]
    t = band_transform.BandTransform(((1, 1), (1, 2)), 2, (True, True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        order = auto_band._transform(sch, band, t)
    assert order == [n.id for n in band] and primitives(sch) == []
    (w,) = caught
    assert issubclass(w.category, auto.AutoScheduleWarning)
    assert "[[1, 1], [1, 2]]" in str(w.message) and "left as written" in str(w.message)


# -- a band that only a wavefront makes parallel gets one of tiles ----------------------------------

@pl.script
def triangle_dp(T: pl.Buffer[("n", "n"), "int32"]):
    """A dynamic program over a triangle (nussinov's shape): each cell takes the best split of
    its row to the left and its column below."""
    for i in range(n - 1, -1, -1):  # noqa: F821
        for j in range(i + 1, n):  # noqa: F821
            for k in range(i + 1, j):
                T[i, j] = max(T[i, j], T[i, k] + T[k + 1, j])


def test_wavefront_only_band_is_tiled_for_its_wavefront(monkeypatch, rng):
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG, num_threads=2))
    sch = pl.auto_schedule(triangle_dp)
    steps = primitives(sch)
    assert steps[:2] == ["split", "split"] and "skew" in steps and "parallel" in steps
    assert str(sch.trace).count("factors=[None, 32]") == 2
    # the parallel loop runs over the tiles of one diagonal of tiles
    top = sch.state.root.children[0]
    assert top.kind is LoopKind.SERIAL and top.children[0].kind is LoopKind.PARALLEL
    mod = pl.build(sch)
    for n in (1, 2, 33, 70):
        t = rng.integers(0, 5, (n, n)).astype(np.int32)
        want = t.copy()
        interpret(triangle_dp, want)
        mod(t)
        np.testing.assert_array_equal(t, want)
    # one thread: no wavefront, nothing tiled for it
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG, num_threads=1))
    assert "split" not in primitives(pl.auto_schedule(triangle_dp))
