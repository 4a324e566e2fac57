# SPDX-License-Identifier: Apache-2.0
"""All 30 PolyBench/C 4.2 kernels, written statement for statement as Python (local scalars,
downward loops, scalar arguments, pow and the macros as helpers), parse, auto-schedule, build
and compute what the same functions compute when Python runs them, at small odd sizes.

Outputs the kernel writes completely are passed poisoned with NaN, so an element the compiled
kernel skips shows up as NaN against the value Python wrote."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.program import BufferRole
from polyloop.runtime.shapes import evaluate

from .kernels import KERNELS

SIZES = {"m": 7, "n": 9, "ni": 7, "nj": 9, "nk": 5, "nl": 6, "nm": 8, "nr": 3, "nq": 4,
         "np_": 5, "tsteps": 2, "tmax": 3, "nx": 6, "ny": 7, "w": 6, "h": 5}
# gramschmidt with fewer rows than columns normalizes rounding noise: compare a full-rank case
OVERRIDES = {"gramschmidt": {"m": 9, "n": 7}}
VALUES = {"alpha": 1.5, "beta": 1.2, "float_n": 9.0}


def _inputs(prog, rng, sizes):
    """Arrays (by name) and Python scalars for one call; well-conditioned where C expects it."""
    arrays = {}
    for name in prog.args:
        b = prog.buffer(name)
        if b.ndim == 0:
            continue
        shape = tuple(evaluate(d, sizes) for d in b.shape)
        if b.dtype.is_int:
            a = rng.integers(0, 4, shape).astype(b.dtype.numpy)
        else:
            a = rng.uniform(0.5, 1.5, shape)
            if len(shape) == 2 and shape[0] == shape[1]:
                a = a @ a.T + shape[0] * np.eye(shape[0])   # positive definite
        if b.role is BufferRole.OUTPUT:
            a = np.full(shape, -1 if b.dtype.is_int else np.nan, b.dtype.numpy)
        arrays[name] = a
    return arrays


@pytest.mark.parametrize("fn", KERNELS, ids=lambda f: f.__name__)
def test_polybench_c_kernel(fn, rng):
    prog = pl.script(fn)
    table = {**SIZES, **OVERRIDES.get(fn.__name__, {})}
    sizes = {p: table[p] for p in prog.params}
    arrays = _inputs(prog, rng, sizes)
    values = {a: VALUES[a] for a in prog.args if prog.buffer(a).ndim == 0}
    expected = {k: v.copy() for k, v in arrays.items()}
    python_args = {**sizes, **values, **expected}
    fn(*[python_args[name] for name in fn.__code__.co_varnames[:fn.__code__.co_argcount]])
    got = {k: v.copy() for k, v in arrays.items()}
    pl.build(pl.auto_schedule(prog))(**got, **values, **sizes)
    for name in got:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-9, atol=1e-12,
                                   err_msg=f"{fn.__name__}: buffer {name}")


def test_all_thirty_kernels_are_here():
    assert len({f.__name__ for f in KERNELS}) == 30
