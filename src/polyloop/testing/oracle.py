# SPDX-License-Identifier: Apache-2.0
"""``pl.build(..., check=True)``: a built module against the reference interpreter on small
random inputs (sizes that satisfy the program's assumptions)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import BuildError
from ..ir.program import BufferRole, Program
from ..ir.shapes import evaluate
from ..poly.assumptions import sizes_satisfying
from .interpret import interpret


def random_inputs(program: Program, rng: np.random.Generator,
                  sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Fresh random arrays for the program's input arguments at ``sizes``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((3,), "int32", name="A")
    >>> prog = pl.compute((3,), lambda i: A[i] + 1, name="B").to_program()
    >>> random_inputs(prog, np.random.default_rng(0), {})["A"].shape
    (3,)
    """
    arrays = {}
    for b in program.arg_buffers():
        if b.role is BufferRole.OUTPUT:
            continue
        shape = tuple(evaluate(d, sizes) for d in b.shape)
        if b.dtype.is_float:
            arrays[b.name] = rng.standard_normal(shape).astype(b.dtype.numpy)
        elif b.dtype.is_int:
            arrays[b.name] = rng.integers(-9, 10, size=shape).astype(b.dtype.numpy)
        else:
            arrays[b.name] = rng.integers(0, 2, size=shape).astype(bool)
    return arrays


def check_against_interpreter(program: Program, mod: Any) -> None:
    """Raise BuildError unless ``mod`` (built from ``program``) computes what the reference
    interpreter computes, on random inputs at small random sizes."""
    rng = np.random.default_rng(0)
    sizes = sizes_satisfying(program, {p: int(rng.integers(5, 12)) for p in program.params})
    inputs = random_inputs(program, rng, sizes)
    ref_args = {k: v.copy() for k, v in inputs.items()}
    mod_args = {k: v.copy() for k, v in inputs.items()}
    expected = interpret(program, **ref_args, **sizes)
    got = mod(**mod_args, **sizes)
    # the returned outputs, then the arrays both updated in place
    inout = [b.name for b in program.arg_buffers() if b.role is BufferRole.INOUT]
    exp_t = (expected if isinstance(expected, tuple) else (expected,)) + tuple(
        ref_args[name] for name in inout)
    got_t = (got if isinstance(got, tuple) else (got,)) + tuple(mod_args[name] for name in inout)
    for e, g in zip(exp_t, got_t):
        if e is None:
            continue
        tol = 1e-4 if e.dtype == np.float32 else 1e-9
        if not np.allclose(g, e, rtol=tol, atol=tol, equal_nan=False):
            bad = np.argwhere(~np.isclose(g, e, rtol=tol, atol=tol))[0]
            raise BuildError(f"check failed: the compiled '{mod.entry}' differs from the reference "
                             f"interpreter at {tuple(int(x) for x in bad)} (sizes {sizes}): "
                             f"{g[tuple(bad)]} vs {e[tuple(bad)]}. Source: {_source_of(mod)}")


def _source_of(mod: Any) -> str:
    library = getattr(mod, "library", None)
    return str(library.source_path) if library is not None else "mod.source"


__all__ = ["check_against_interpreter", "random_inputs"]
