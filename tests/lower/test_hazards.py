# SPDX-License-Identifier: Apache-2.0
"""The GCC 12.1/12.2 workaround (no loop vectorization) is kept for the reductions it was
found on and not paid by a lone reduction over a size-dependent loop (durbin's inner sum)."""
from __future__ import annotations

import numpy as np

import polyloop as pl
from polyloop.lower.hazards import negative_stride_reduction
from polyloop.lower.lower import lower

from polybench.kernels import durbin  # tests/ is on sys.path (rootdir conftest)
from schedule.test_random_schedules import conv2d, conv2d_reference


def _flagged(sch: pl.Schedule) -> bool:
    return negative_stride_reduction(lower(sch.program, sch.state.root).body)


def reversed_window() -> pl.Schedule:
    sch = pl.Schedule(conv2d(2, 2, 3, 7, 6))
    b, o, y, x, rc, rh, rw = sch.get_loops("O")
    sch.reverse(rw)
    return sch


def test_reduction_read_backwards_along_a_constant_loop_is_flagged():
    sch = reversed_window()
    assert _flagged(sch)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 2, 7, 6), dtype="float32")
    w = rng.standard_normal((3, 2, 3, 3), dtype="float32")
    np.testing.assert_allclose(pl.build(sch)(a, w), conv2d_reference(a, w), rtol=1e-4,
                               atol=1e-4)


def test_lone_sum_over_a_size_dependent_loop_keeps_vectorization(rng):
    prog = pl.script(durbin)
    assert not _flagged(pl.Schedule(prog))
    n = 37
    r = rng.uniform(0.1, 0.2, n) / np.arange(1, n + 1)
    want, got = np.full(n, np.nan), np.full(n, np.nan)
    durbin(n, r.copy(), want)
    pl.build(pl.auto_schedule(prog))(r=r, y=got, n=n)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
