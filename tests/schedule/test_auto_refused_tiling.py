# SPDX-License-Identifier: Apache-2.0
"""auto_schedule when the tiling it tries is refused: the band stays untiled (found by pl.tune
drawing fusion="max" with a fixed tile size on a time-stepped stencil)."""
from __future__ import annotations

import numpy as np

import polyloop as pl


@pl.script
def jacobi(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"]):
    for t in range(4):
        for i in range(1, n - 1):
            B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0
        for i in range(1, n - 1):
            A[i] = B[i]


def test_refused_tiling_leaves_the_band_and_stays_correct():
    sch = pl.auto_schedule(jacobi, fusion="max", tile=16)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(41), rng.standard_normal(41)
    a_ref, b_ref = a.copy(), b.copy()
    for _ in range(4):
        b_ref[1:-1] = (a_ref[:-2] + a_ref[1:-1] + a_ref[2:]) / 3.0
        a_ref[1:-1] = b_ref[1:-1]
    pl.build(sch)(a, b)
    np.testing.assert_allclose(a, a_ref, rtol=1e-12)
    np.testing.assert_allclose(b[1:-1], b_ref[1:-1], rtol=1e-12)
