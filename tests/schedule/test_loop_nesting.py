# SPDX-License-Identifier: Apache-2.0
"""Accepted schedules build: a primitive that would put a parallel loop inside a vectorized one
(which OpenMP rejects: no parallel region inside simd) is refused and changes nothing."""
from __future__ import annotations

import numpy as np

import polyloop as pl

from .programs import refused_unchanged


def scaled():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    return pl.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")


def test_reorder_cannot_move_a_parallel_loop_inside_a_vectorized_one(rng):
    sch = pl.Schedule(scaled())
    i, j = sch.get_loops("B")
    sch.parallel(i)
    sch.vectorize(j)
    refused_unchanged(sch, lambda: sch.reorder(j, i), "parallel loop 'i' inside vectorized loop "
                      "'j'", "keep vectorized loops innermost")
    a = rng.standard_normal((5, 11), dtype="float32")
    out = np.full((5, 11), np.nan, "float32")
    pl.build(sch)(a, out)
    np.testing.assert_array_equal(out, a * 2 + 1)
