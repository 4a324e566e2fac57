# SPDX-License-Identifier: Apache-2.0
"""Matmul operator schedules (polyloop.ops.matmul) against NumPy at sizes that divide no tile.

Outputs are passed in filled with NaN, so an element the kernel forgets to write shows up.
"""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops
from polyloop.intrin import TILES, gemm_intrin, host_kind


def run(mod, inputs, shape):
    out = np.full(shape, np.nan, dtype=np.float32)
    mod(*inputs, out)
    return out


def matmul_module(m, n, k, **knobs):
    A = pl.placeholder((m, k), "float32", name="A")
    B = pl.placeholder((k, n), "float32", name="B")
    return pl.build(ops.schedule_matmul(ops.matmul(A, B), **knobs))


# 1, lanes - 1, lanes + 1 around the vector width (16 float32 with AVX-512) and the 6-row tile.
@pytest.mark.parametrize("m, n, k", [(37, 45, 29), (1, 1, 1), (6, 64, 3), (5, 15, 17),
                                     (7, 17, 1), (13, 65, 40)])
def test_matmul_default_schedule_matches_numpy(rng, m, n, k):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    got = run(matmul_module(m, n, k), (a, b), (m, n))
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("knobs", [dict(mr=4, nr_vectors=2), dict(mr=1, nr_vectors=1, lanes=8),
                                   dict(mr=3, nr_vectors=3, pack_in_panel=False)])
def test_matmul_knobs_keep_the_result(rng, knobs):
    m, n, k = 23, 41, 19
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    got = run(matmul_module(m, n, k, **knobs), (a, b), (m, n))
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


# Micro-kernel tiles of the host's ISA (and the portable C ones everywhere), sizes around them.
MICRO = sorted({(host_kind(), r, c) for r, c in TILES[host_kind()]} | {("portable", 6, 16)})


@pytest.mark.parametrize("isa, rows, cols", MICRO)
def test_matmul_micro_kernel_schedule_matches_numpy(rng, isa, rows, cols):
    # full tiles and tiles cut by every edge; k = 37 leaves a partial kc block
    m, n, k = 2 * rows + 1, 2 * cols - 1, 37
    intrin = gemm_intrin(isa, rows=rows, cols=cols)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    got = run(matmul_module(m, n, k, intrin=intrin, kc=16), (a, b), (m, n))
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m, n, k", [(15, 33, 40), (5, 31, 9), (1, 70, 1)])
def test_matmul_micro_kernel_kslice_order_and_small_sizes(rng, m, n, k):
    # (5, 31, 9) and (1, 70, 1) have no full 6 x 32 tile: the register-tile schedule is used
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    mod = matmul_module(m, n, k, intrin=gemm_intrin(), kc=8, order="kslice")
    np.testing.assert_allclose(run(mod, (a, b), (m, n)), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("order", ["panel", "kslice"])
def test_matmul_micro_kernel_with_packed_a(rng, order):
    m, n, k = 17, 45, 21
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    mod = matmul_module(m, n, k, intrin=gemm_intrin(packed_a=True), pack_a=True, kc=8,
                        order=order)
    np.testing.assert_allclose(run(mod, (a, b), (m, n)), a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_symbolic_sizes_one_module_for_all(rng):
    m, n, k = pl.var("m"), pl.var("n"), pl.var("k")
    mod = matmul_module(m, n, k)
    for shape in [(37, 45, 29), (1, 17, 2), (12, 64, 5)]:
        mm, nn, kk = shape
        a = rng.standard_normal((mm, kk), dtype=np.float32)
        b = rng.standard_normal((kk, nn), dtype=np.float32)
        got = run(mod, (a, b), (mm, nn))
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch, m, n, k", [(3, 37, 45, 29), (1, 1, 1, 1), (2, 9, 17, 15)])
def test_batch_matmul_relu_matches_numpy(rng, batch, m, n, k):
    A = pl.placeholder((batch, m, k), "float32", name="A")
    B = pl.placeholder((batch, k, n), "float32", name="B")
    mod = pl.build(ops.schedule_batch_matmul_relu(ops.batch_matmul_relu(A, B)))
    a = rng.standard_normal((batch, m, k), dtype=np.float32)
    b = rng.standard_normal((batch, k, n), dtype=np.float32)
    got = run(mod, (a, b), (batch, m, n))
    np.testing.assert_allclose(got, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_schedule_is_replayable_from_its_trace(rng):
    A = pl.placeholder((19, 33), "float32", name="A")
    B = pl.placeholder((33, 21), "float32", name="B")
    C = ops.matmul(A, B)
    sch = ops.schedule_matmul(C)
    replayed = pl.Schedule.from_trace(C, sch.trace)
    assert str(replayed) == str(sch)


def test_wrong_operands_and_knobs_are_refused():
    A = pl.placeholder((4, 3), "float32", name="A")
    B = pl.placeholder((5, 6), "float32", name="B")
    with pytest.raises(pl.ScheduleError, match="reduction extents differ"):
        ops.matmul(A, B)
    with pytest.raises(pl.ScheduleError, match="2-D"):
        ops.matmul(pl.placeholder((4,), name="x"), B)
    C = ops.matmul(A, pl.placeholder((3, 6), "float32", name="B2"))
    with pytest.raises(pl.ScheduleError, match="mr must be a positive integer"):
        ops.schedule_matmul(C, mr=0)
    with pytest.raises(pl.ScheduleError, match="lanes must be a positive integer"):
        ops.schedule_matmul(C, lanes=0)          # 0 is refused, not taken as the default
    with pytest.raises(pl.ScheduleError, match="order must be 'panel' or 'kslice'"):
        ops.schedule_matmul(C, intrin=gemm_intrin("portable"), order="ij")
    relu = pl.compute((4, 6), lambda i, j: pl.maximum(C[i, j], 0.0), name="R")
    with pytest.raises(pl.ScheduleError, match="expected the product"):
        ops.schedule_matmul(relu)
    with pytest.raises(pl.ScheduleError, match="expected the result of batch_matmul_relu"):
        ops.schedule_batch_matmul_relu(C)
