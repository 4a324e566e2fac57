# SPDX-License-Identifier: Apache-2.0
"""Lowering that does not depend on how a schedule is spelled: loops counted from zero (a stage
computed at a tile), a reduction's initialisation in its update's loops. Each checked on the
code and against NumPy at sizes that do not divide, outputs poisoned."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def _gemm(n: int):
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    return pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")


def _write_cache(n: int, spelling: str) -> pl.Schedule:
    """TVM's write-cache step: TE (compute_at of the computing block into the write-back's
    tile), TensorIR (reverse_compute_at of the write-back), or scope "local"."""
    s = pl.Schedule(_gemm(n))
    if spelling == "compute_at":
        wb = s.cache_write("C", "global")
        mo, no, mi, ni = s.tile(*s.get_loops(wb), 32, 32)
        s.compute_at("C", no)
        mc, nc, kk = s.get_loops("C")[-3:]
        ko, ki = s.split(kk, factor=4)
        s.reorder(ko, mc, ki, nc)
    else:
        wb = s.cache_write("C", "global" if spelling == "reverse" else "local")
        x, y, kk = s.get_loops("C")
        mo, no, mc, nc = s.tile(x, y, 32, 32)
        ko, ki = s.split(kk, factor=4)
        s.reorder(ko, mc, ki, nc)
        s.reverse_compute_at(wb, no)
        s.decompose_reduction("C", ko)
    s.vectorize(nc)
    s.unroll(ki)
    return s


def _run(mod, *arrays, out_shape):
    out = np.full(out_shape, np.nan, np.float32)
    mod(*arrays, out)
    assert not np.isnan(out).any()
    return out


@pytest.mark.parametrize("spelling", ["compute_at", "reverse", "local"])
def test_every_spelling_of_the_write_cache_keeps_the_tile_in_registers(rng, spelling):
    mod = pl.build(_write_cache(64, spelling))
    notes = mod.explain()
    assert "holds the 32x32 elements used in one iteration" in notes
    assert "32 element(s) kept in registers" in notes
    body = mod.source[mod.source.index("_body("):]
    # loops of the tile counted from zero: the register row is indexed by the vector loop alone
    assert "_reg[j" in body or "_reg[ni" in body or "_reg[y" in body or "reg[nc" in body, body
    assert " - 32 * " not in body
    a, b = (rng.standard_normal((64, 64), dtype="float32") for _ in range(2))
    np.testing.assert_allclose(_run(mod, a, b, out_shape=(64, 64)), a @ b, rtol=1e-4,
                               atol=1e-4)


def test_the_write_cache_spellings_compute_alike_at_a_size_the_tiles_do_not_divide(rng):
    a, b = (rng.standard_normal((70, 70), dtype="float32") for _ in range(2))
    for spelling in ("compute_at", "reverse", "local"):
        mod = pl.build(_write_cache(70, spelling))
        np.testing.assert_allclose(_run(mod, a, b, out_shape=(70, 70)), a @ b, rtol=1e-4,
                                   atol=1e-4)


def _conv2d_reduction():
    n = pl.var("n")
    X = pl.placeholder((n, n), "float32", name="X")
    F = pl.placeholder((3, 3), "float32", name="F")
    di = pl.reduce_axis((0, 3), name="di")
    dj = pl.reduce_axis((0, 3), name="dj")
    return pl.compute((n - 2, n - 2), lambda i, j: pl.sum(X[i + di, j + dj] * F[di, dj],
                                                          axis=[di, dj]), name="Y")


def test_a_default_reduction_initialises_each_element_in_its_own_loops(rng):
    mod = pl.build(_conv2d_reduction())
    assert "the initialisation Y_init runs in the loops of its reduction" in mod.explain()
    body = mod.source[mod.source.index("_body("):]
    assert body.count("for (int64_t i = 0;") == 1        # one nest: no separate zeroing pass
    for n in (3, 4, 19):
        x = rng.standard_normal((n, n), dtype="float32")
        f = rng.standard_normal((3, 3), dtype="float32")
        want = sum(x[di:di + n - 2, dj:dj + n - 2] * f[di, dj]
                   for di in range(3) for dj in range(3))
        np.testing.assert_allclose(_run(mod, x, f, out_shape=(n - 2, n - 2)), want,
                                   rtol=1e-4, atol=1e-5)


def test_an_empty_reduction_still_initialises_at_symbolic_sizes(rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    k = pl.reduce_axis((0, m), name="k")
    mod = pl.build(pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="S"))
    for shape in ((13, 7), (5, 0), (0, 3), (3, 1), (101, 37)):
        a = rng.standard_normal(shape, dtype="float32")
        out = _run(mod, a, out_shape=(shape[0],))
        np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_benchmark_times_the_kernel_in_its_own_loop_of_calls(rng):
    A = pl.placeholder((64,), "float32", name="A")
    mod = pl.build(pl.compute((64,), lambda i: A[i] + 1.0, name="B"))
    assert "pl_repeat_B_kernel" in mod.source
    assert 0 < mod.benchmark(np.ones(64, np.float32), repeat=2) < 1e-3


def _mlc_conv2d(nb: int, ci: int, h: int, w: int, co: int, *, decompose: bool) -> pl.Schedule:
    """The MLC course's conv2d schedule as the course writes it: batch split [2, 2], channels
    by 4, rows and columns by 2, the outer four fused, (b1, f1) fused and unrolled, (y1, x1)
    fused and vectorized; the initialisation left where it is (lowering writes it into the
    reduction's loops) or placed by ``decompose_reduction`` at the first reduction loop."""
    X = pl.placeholder((nb, ci, h, w), "float32", name="X")
    W = pl.placeholder((co, ci, 3, 3), "float32", name="W")
    rc, ry, rx = (pl.reduce_axis((0, e), name=nm) for nm, e in (("rc", ci), ("ry", 3), ("rx", 3)))
    Y = pl.compute((nb, co, h - 2, w - 2), lambda b, f, y, x: pl.sum(
        X[b, rc, y + ry, x + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    sch = pl.Schedule(Y)
    outer, c = _course_tiles(sch)
    sch.parallel(outer)
    if decompose:
        sch.decompose_reduction("Y", c)
    return sch


def _course_tiles(sch: pl.Schedule):
    """The course's tiling of ``Y``: batch split [2, 2], channels by 4, rows and columns by 2,
    the outer four fused, (b1, f1) fused and unrolled, (y1, x1) fused and vectorized; returns
    the fused outer loop and the first reduction loop."""
    b, f, y, x, c, r, s = sch.get_loops("Y")
    b0, b1 = sch.split(b, factors=[2, 2])
    f0, f1 = sch.split(f, factor=4)
    y0, y1 = sch.split(y, factor=2)
    x0, x1 = sch.split(x, factor=2)
    sch.reorder(b0, f0, y0, x0, c, r, s, b1, f1, y1, x1)
    outer = sch.fuse(b0, f0, y0, x0)
    sch.unroll(sch.fuse(b1, f1))
    sch.vectorize(sch.fuse(y1, x1))
    return outer, c


def _conv2d_ref(xs: np.ndarray, ws: np.ndarray) -> np.ndarray:
    oh, ow = xs.shape[2] - 2, xs.shape[3] - 2
    want = np.zeros((xs.shape[0], ws.shape[0], oh, ow), np.float64)
    for ry in range(3):
        for rx in range(3):
            want += np.einsum("bchw,fc->bfhw", xs[:, :, ry:ry + oh, rx:rx + ow], ws[:, :, ry, rx])
    return want


@pytest.mark.parametrize("decompose", [False, True], ids=["init-in-place", "decompose"])
def test_the_mlc_conv2d_schedule_keeps_its_fused_tile_in_registers(rng, decompose):
    """The accesses of the fused loops are the parts' quotients and remainders (affine to isl,
    proven in bounds: no run-time check), the 2 x 4 x 2 x 2 accumulator tile stays in
    registers, the short fused vector loop is unrolled; at a size the tiles divide (the
    course's) and at sizes they do not (partial tiles: correct, guarded)."""
    for (nb, ci, h, w, co), whole in (((4, 3, 10, 10, 8), True), ((4, 3, 11, 9, 10), False),
                                      ((4, 2, 3, 4, 5), False)):
        mod = pl.build(_mlc_conv2d(nb, ci, h, w, co, decompose=decompose))
        assert "pl_index_ok" not in mod.source and not mod.index_sites
        if whole:
            notes = mod.explain()
            assert "Y: 32 element(s) kept in registers" in notes, notes
            assert "unrolled, 4 iterations" in notes and "#pragma GCC unroll 4" in mod.source
        xs = rng.standard_normal((nb, ci, h, w), dtype="float32")
        ws = rng.standard_normal((co, ci, 3, 3), dtype="float32")
        np.testing.assert_allclose(_run(mod, xs, ws, out_shape=(nb, co, h - 2, w - 2)),
                                   _conv2d_ref(xs, ws), rtol=1e-4, atol=1e-4)


def test_a_stage_computed_at_a_fused_loop_keeps_it_built_from_its_parts(rng):
    """The padding stage computed at the fused outer loop (TE's ``compute_at``): the stage's
    values of the parts are recovered from the fused value, so the loop is still built from
    its parts: quotient and remainder indices, no run-time check, the tile in registers (the
    channels' outer part has one value: isl writes no loop for it)."""
    nb, ci, h, w, co = 4, 1, 4, 4, 4
    X = pl.placeholder((nb, ci, h, w), "float32", name="X")
    W = pl.placeholder((co, ci, 3, 3), "float32", name="W")
    P = pl.compute((nb, ci, h + 2, w + 2), lambda b, c, y, x: pl.where(
        (y >= 1) & (y < h + 1) & (x >= 1) & (x < w + 1), X[b, c, y - 1, x - 1], 0.0), name="P")
    rc, ry, rx = (pl.reduce_axis((0, e), name=nm) for nm, e in (("rc", ci), ("ry", 3), ("rx", 3)))
    Y = pl.compute((nb, co, h, w), lambda b, f, y, x: pl.sum(
        P[b, rc, y + ry, x + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    sch = pl.Schedule(Y)
    outer, _ = _course_tiles(sch)
    sch.compute_at("P", outer)
    mod = pl.build(sch)
    assert "pl_index_ok" not in mod.source
    assert "Y: 32 element(s) kept in registers" in mod.explain()
    xs = rng.standard_normal((nb, ci, h, w), dtype="float32")
    ws = rng.standard_normal((co, ci, 3, 3), dtype="float32")
    xp = np.pad(xs, ((0, 0), (0, 0), (1, 1), (1, 1)))
    np.testing.assert_allclose(_run(mod, xs, ws, out_shape=(nb, co, h, w)),
                               _conv2d_ref(xp, ws), rtol=1e-4, atol=1e-4)
