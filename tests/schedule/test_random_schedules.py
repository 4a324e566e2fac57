# SPDX-License-Identifier: Apache-2.0
"""The guarantee, tried at random: whatever sequence of primitives is accepted, the scheduled
program computes what the original does (``build(check=True)`` runs the reference interpreter).
Refused steps are skipped; each schedule takes up to six steps."""
from __future__ import annotations

import random

import numpy as np
import pytest

import polyloop as pl

from .programs import conv2d, conv2d_reference, diagonal_stencil, matmul_relu, stencil

PROGRAMS = {
    "matmul_relu": lambda: pl.Schedule(matmul_relu()),
    "stencil": lambda: pl.Schedule(stencil()),
    "diagonal": lambda: pl.Schedule(diagonal_stencil()),
    "conv": lambda: pl.Schedule(conv2d(2, 2, 3, 7, 6)),
}


def random_step(sch: pl.Schedule, r: random.Random) -> None:
    block = r.choice(sch.blocks())
    loops = sch.get_loops(block)
    loop = r.choice(loops)
    pair = sorted(r.sample(range(len(loops)), 2)) if len(loops) > 1 else None
    kind = r.randrange(12)
    if kind == 0:
        sch.split(loop, factors=[None, r.choice([2, 3, 4, 8])])
    elif kind == 1 and pair:
        sch.reorder(loops[pair[1]], loops[pair[0]])
    elif kind == 2:
        sch.parallel(loop)
    elif kind == 3:
        sch.vectorize(loops[-1])
    elif kind == 4:
        sch.unroll(loop, r.choice([None, 2]))
    elif kind == 5 and pair:
        sch.fuse(loops[pair[0]], loops[pair[0] + 1])
    elif kind == 6 and pair:
        sch.skew(loops[pair[0]], loops[pair[1]], r.choice([1, -1, 2]))
    elif kind == 7:
        sch.reverse(loop)
    elif kind == 8:
        sch.compute_at(block, r.choice(sch.get_loops(r.choice(sch.blocks()))))
    elif kind == 9:
        sch.reverse_compute_at(block, r.choice(sch.get_loops(r.choice(sch.blocks()))))
    elif kind == 10:
        sch.decompose_reduction(block, loop)
    elif kind == 11 and pair:
        sch.tile(loops[pair[0]], loops[pair[1]], r.choice([2, 3]), r.choice([2, 4]))


@pytest.mark.parametrize("seed", range(16))
def test_accepted_random_schedules_compute_the_same_results(seed):
    r = random.Random(seed)
    name = list(PROGRAMS)[seed % len(PROGRAMS)]
    sch = PROGRAMS[name]()
    for _ in range(6):
        before = str(sch)
        try:
            random_step(sch, r)
        except pl.ScheduleError:
            assert str(sch) == before
    pl.build(sch, check=True)
    again = pl.Schedule.from_trace(PROGRAMS[name]().original, sch.trace.to_json())
    assert str(again) == str(sch)


def test_reversed_reduction_loop_with_a_cached_weight():
    """GCC 12.1/12.2 at -O3 vectorize this reduction (reading P and W_local backwards along rw)
    wrongly; polyloop compiles such kernels without loop vectorization on those versions."""
    rng = np.random.default_rng(0)
    sch = pl.Schedule(conv2d(2, 2, 3, 7, 6))
    b, o, y, x, rc, rh, rw = sch.get_loops("O")
    sch.skew(rc, rh, 1)
    sch.reverse(rw)
    sch.cache_read("O", "W", "local")
    a = rng.standard_normal((2, 2, 7, 6), dtype="float32")
    w = rng.standard_normal((3, 2, 3, 3), dtype="float32")
    np.testing.assert_allclose(pl.build(sch)(a, w), conv2d_reference(a, w), rtol=1e-4, atol=1e-4)
