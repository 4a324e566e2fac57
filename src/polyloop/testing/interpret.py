# SPDX-License-Identifier: Apache-2.0
"""The reference interpreter: run a Program point by point, in its own order.

Statements run in program order, each over its domain in lexicographic order: the default
schedule, one loop nest per statement. It is slow and simple on purpose: every test compares
compiled code with it.
"""
from __future__ import annotations

import numpy as np

from ..errors import PolyloopError
from ..ir.program import Program
from ..poly.enumerate import points
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
        for stmt in program.statements:
            run = compile_statement(stmt, slots, binding.params)
            todo = points(program, stmt, binding.params)
            try:
                run(todo, *storage)
            except (ArithmeticError, TypeError, ValueError, IndexError) as e:
                raise PolyloopError(f"interpreting statement '{stmt.name}' failed: "
                                    f"{type(e).__name__}: {e}") from e
    out = tuple(binding.arrays[name] for name in binding.returned)
    if not out:
        return None
    return out[0] if len(out) == 1 else out
