# SPDX-License-Identifier: Apache-2.0
"""Matrix products on B packed ahead of time (polyloop.ops.matmul_packed) against NumPy:
column counts that leave the last panel part-empty, symbolic rows, the micro-kernel path,
NaN-poisoned outputs, and the refusals."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops
from polyloop.intrin import gemm_intrin


def run(mod, inputs, shape):
    out = np.full(shape, np.nan, dtype=np.float32)
    mod(*inputs, out)
    return out


def test_pack_layout_and_zero_padding(rng):
    b = rng.standard_normal((29, 70), dtype=np.float32)
    packed = ops.pack_matmul_weight(b, 16)
    assert packed.shape == (5, 29, 16) and packed.flags.c_contiguous
    j = np.arange(70)
    np.testing.assert_array_equal(packed[j // 16, :, j % 16], b.T)
    assert not packed[4, :, 6:].any()            # columns 70..79 do not exist


@pytest.mark.parametrize("m, k, n, knobs", [(37, 29, 70, {}), (37, 29, 70, dict(mr=4, lanes=8)),
                                            (1, 1, 1, dict(lanes=4, nr_vectors=1)),
                                            (13, 40, 65, dict(lanes=8, nr_vectors=3))])
def test_packed_matmul_matches_numpy(rng, m, k, n, knobs):
    lanes = knobs.get("lanes", ops.matmul_panel_width() // 4)
    nr = ops.matmul_panel_width() if not knobs else lanes * knobs.get("nr_vectors", 4)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    packed = ops.pack_matmul_weight(b, nr)
    A = pl.placeholder((m, k), name="A")
    P = pl.placeholder(packed.shape, name="P")
    mod = pl.build(ops.schedule_matmul(ops.matmul_packed(A, P, n), **knobs))
    np.testing.assert_allclose(run(mod, (a, packed), (m, n)), a @ b, rtol=1e-4, atol=1e-4)


def test_packed_matmul_symbolic_rows_one_module(rng):
    k, n = 29, 70
    b = rng.standard_normal((k, n), dtype=np.float32)
    packed = ops.pack_matmul_weight(b, ops.matmul_panel_width())
    A = pl.placeholder((pl.var("m"), k), name="A")
    P = pl.placeholder(packed.shape, name="P")
    mod = pl.build(ops.schedule_matmul(ops.matmul_packed(A, P, n)))
    for m in (37, 1, 6):
        a = rng.standard_normal((m, k), dtype=np.float32)
        np.testing.assert_allclose(run(mod, (a, packed), (m, n)), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("order", ["panel", "kslice"])
def test_packed_matmul_micro_kernel(rng, order):
    intrin = gemm_intrin("portable", rows=6, cols=16)
    m, k, n = 17, 37, 45
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    packed = ops.pack_matmul_weight(b, 16)
    A = pl.placeholder((m, k), name="A")
    P = pl.placeholder(packed.shape, name="P")
    sch = ops.schedule_matmul(ops.matmul_packed(A, P, n), intrin=intrin, kc=16, order=order)
    assert "P_packed" not in str(sch)            # nothing is copied
    got = run(pl.build(sch), (a, packed), (m, n))
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_packed_schedule_copies_nothing():
    A = pl.placeholder((37, 29), name="A")
    B = pl.placeholder((29, 70), name="B")
    P = pl.placeholder((2, 29, 64), name="P")
    assert "B_packed[" in str(ops.schedule_matmul(ops.matmul(A, B), lanes=16))
    packed = str(ops.schedule_matmul(ops.matmul_packed(A, P, 70), lanes=16))
    assert "_packed" not in packed and "P[j_0, k, " in packed


def test_mismatched_panels_are_refused():
    A = pl.placeholder((8, 29), name="A")
    P = pl.placeholder((5, 29, 16), name="P")
    C = ops.matmul_packed(A, P, 70)
    with pytest.raises(pl.ScheduleError, match="packed in panels of 16 columns"):
        ops.schedule_matmul(C, lanes=16, nr_vectors=4)
    with pytest.raises(pl.ScheduleError, match="packed in panels of 16 columns"):
        ops.schedule_matmul(C, lanes=32)
    with pytest.raises(pl.ScheduleError, match="intrinsic .* computes 32"):
        ops.schedule_matmul(C, intrin=gemm_intrin("portable", rows=6, cols=32))
    with pytest.raises(pl.ScheduleError, match="70 columns need 5 panels of 16, packed has 4"):
        ops.matmul_packed(A, pl.placeholder((4, 29, 16), name="Q"), 70)
    with pytest.raises(pl.ScheduleError, match="reduction extents differ"):
        ops.matmul_packed(A, pl.placeholder((5, 30, 16), name="Q"), 70)
    with pytest.raises(pl.ScheduleError, match="3-D tensor"):
        ops.matmul_packed(A, pl.placeholder((29, 70), name="Q"), 70)
    with pytest.raises(pl.ScheduleError, match="2-D array"):
        ops.pack_matmul_weight(np.ones(3, "float32"), 16)
    with pytest.raises(pl.ScheduleError, match="nr must be a positive integer"):
        ops.pack_matmul_weight(np.ones((3, 3), "float32"), 0)
