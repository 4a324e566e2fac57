# SPDX-License-Identifier: Apache-2.0
"""Every PolyBench kernel of the benchmark suite, automatically scheduled with each fusion
strategy, computes what the loops as written compute (the reference interpreter), at odd sizes."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.shapes import evaluate
from polyloop.testing import interpret

from polybench_scripts import KERNELS  # tests/ is on sys.path (rootdir conftest)

SIZES = {"ni": 13, "nj": 11, "nk": 9, "nl": 7, "m": 11, "n": 13, "tsteps": 4, "nx": 9,
         "ny": 11, "tmax": 5}


def _arguments(prog, rng):
    out = []
    for name in prog.args:
        shape = tuple(evaluate(d, SIZES) for d in prog.buffer(name).shape)
        a = rng.standard_normal(shape)
        if prog.name in ("lu", "cholesky"):          # well conditioned, positive definite
            a = a @ a.T + shape[0] * np.eye(shape[0])
        out.append(a)
    return out


@pytest.mark.parametrize("fusion", ["min", "smart", "max"])
@pytest.mark.parametrize("prog", KERNELS, ids=lambda p: p.name)
def test_polybench_kernel(prog, fusion, rng):
    sizes = {p: SIZES[p] for p in prog.params}
    args = _arguments(prog, rng)
    expected = [a.copy() for a in args]
    interpret(prog, *expected, **sizes)
    sch = pl.auto_schedule(prog, fusion=fusion, tile=4)
    got = [a.copy() for a in args]
    pl.build(sch)(*got, **sizes)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
    assert len(KERNELS) >= 15


def test_time_loops_are_fused_with_shifts_and_tiled_in_time():
    jacobi = next(p for p in KERNELS if p.name == "jacobi_2d")
    steps = [s.primitive for s in pl.auto_schedule(jacobi, fusion="max").trace]
    assert steps.count("shift") == 2 and steps.count("merge") == 2
    assert "skew" in steps and "parallel" in steps
