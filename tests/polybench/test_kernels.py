# SPDX-License-Identifier: Apache-2.0
"""All 30 PolyBench/C 4.2.1 kernels, written statement for statement as Python (local scalars,
downward loops, scalar arguments, pow and the macros as helpers, each kernel's C data type),
are accepted as written, auto-scheduled, built, and compute what the same functions compute
when Python runs them, at sizes that divide no tile (register tiles of 4 rows and 24 columns,
time tiles of 16 steps) and exceed the smallest.

Outputs the kernel writes completely are passed poisoned (NaN, or -1 for integers), so an
element the compiled kernel skips shows up against the value Python wrote. The benchmark
(``benchmarks/bench_polybench.py``) runs the same kernels at PolyBench's MEDIUM and LARGE
sizes against the C program."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.program import BufferRole
from polyloop.runtime.shapes import evaluate

from .kernels import KERNELS

SIZES = {"m": 37, "n": 43, "ni": 35, "nj": 41, "nk": 29, "nl": 33, "nm": 31, "nr": 11,
         "nq": 13, "np_": 17, "tsteps": 21, "tmax": 19, "nx": 33, "ny": 39, "w": 47, "h": 29}
# a 3-D grid stays small for Python; gramschmidt with fewer rows than columns amplifies
# rounding noise (a rank-deficient matrix): compare a full-rank case
OVERRIDES = {"heat_3d": {"n": 13}, "gramschmidt": {"m": 43, "n": 37}}
VALUES = {"alpha": 1.5, "beta": 1.2, "float_n": 43.0}


def _inputs(prog, rng, sizes):
    """Arrays (by name) for one call; well-conditioned where C expects it, outputs poisoned."""
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
            a = a.astype(b.dtype.numpy)
        if b.role is BufferRole.OUTPUT:
            a = np.full(shape, -1 if b.dtype.is_int else np.nan, b.dtype.numpy)
        arrays[name] = a
    return arrays


@pytest.mark.parametrize("fn", KERNELS, ids=lambda f: f.__name__)
def test_polybench_kernel_as_written(fn, rng):
    prog = pl.script(fn)
    table = {**SIZES, **OVERRIDES.get(fn.__name__, {})}
    sizes = {p: table[p] for p in prog.params}
    arrays = _inputs(prog, rng, sizes)
    values = {a: VALUES[a] for a in prog.args if prog.buffer(a).ndim == 0}
    expected = {k: v.copy() for k, v in arrays.items()}
    python_args = {**sizes, **values, **expected}
    fn(*[python_args[name] for name in fn.__code__.co_varnames[:fn.__code__.co_argcount]])
    got = {k: v.copy() for k, v in arrays.items()}
    mod = pl.build(pl.auto_schedule(prog))
    mod(**got, **values, **sizes)
    for name in got:
        tol = 1e-4 if got[name].dtype == np.float32 else 1e-9
        np.testing.assert_allclose(got[name], expected[name], rtol=tol, atol=tol * 1e-3,
                                   err_msg=f"{fn.__name__}: buffer {name}")


def test_all_thirty_kernels_are_here():
    assert len({f.__name__ for f in KERNELS}) == 30
