# SPDX-License-Identifier: Apache-2.0
"""The reference interpreter: run a Program point by point, in its own order.

Statements run in program order, each over its domain in lexicographic order: the default
schedule, one loop nest per statement (or, for a program written as imperfect loop nests, the
instances interleaved as those loops run them). It is slow and simple on purpose: every test compares
compiled code with it.
"""
from __future__ import annotations

import numpy as np

from ..errors import PolyloopError
from ..ir.program import Program
from ..poly.enumerate import points
from ..poly.order import instance_key, positions
from .arguments import bind
from .pycode import BufferSlot, compile_statement


def interpret(program: Program, *arrays: object, **named: object) -> object:
    """Execute ``program`` on NumPy arrays, called like the module ``pl.build`` would give.

    Arrays are passed in ``program.args`` order or by name; size parameters are inferred from
    their shapes or passed by keyword. Outputs that are not passed are allocated and returned
    (one array, a tuple of several in argument order, or None); given outputs and inout
    arrays are updated in place.

    >>> import numpy as np, polyloop.frontend.te as te
    >>> n = te.var("n")
    >>> A = te.placeholder((n,), "float32", name="A")
    >>> B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    >>> interpret(te.to_program(B), np.arange(3, dtype="float32"))
    array([0., 2., 4.], dtype=float32)
    """
    binding = bind(program, arrays, named)
    slots = {name: BufferSlot(name, f"b_{k}", a.shape)
             for k, (name, a) in enumerate(binding.arrays.items())}
    storage = list(binding.arrays.values())
    with np.errstate(all="ignore"):  # C does not warn on overflow or division by zero either
        compiled: dict[str, object] = {}
        for stmt, todo in _runs(program, binding.params):
            if stmt.name not in compiled:
                compiled[stmt.name] = compile_statement(stmt, slots, binding.params)
            run = compiled[stmt.name]
            try:
                run(todo, *storage)
            except (ArithmeticError, TypeError, ValueError, IndexError) as e:
                raise PolyloopError(f"interpreting statement '{stmt.name}' failed: "
                                    f"{type(e).__name__}: {e}") from e
    out = tuple(binding.arrays[name] for name in binding.returned)
    if not out:
        return None
    return out[0] if len(out) == 1 else out


def _runs(program: Program, params: dict[str, int]):
    """(statement, points) in execution order: whole domains one after another, or, for a
    program written as imperfect loop nests, maximal runs of one statement in the interleaved
    order of the nest."""
    if not program.nesting:
        for stmt in program.statements:
            yield stmt, points(program, stmt, params)
        return
    where = positions(program)
    timed = []
    for k, stmt in enumerate(program.statements):
        pos = where[stmt.name]
        timed.extend((instance_key(pos, p), k, p) for p in points(program, stmt, params))
    timed.sort()
    run: list[tuple[int, ...]] = []
    current = -1
    for _, k, p in timed:
        if k != current and run:
            yield program.statements[current], run
            run = []
        current = k
        run.append(p)
    if run:
        yield program.statements[current], run
