# SPDX-License-Identifier: Apache-2.0
"""``pl.dependences``: the exact dependences of a program, a schedule or output tensors."""
from __future__ import annotations

from ..errors import PolyloopError
from ..ir.program import Program
from ..poly.api import program_dependences
from ..poly.deps import direct
from .schedule import Schedule


def dependences(obj: object, *, kind: str = "dataflow"):
    """The dependences of a program, schedule or output tensors: kind (RAW/WAR/WAW), source and
    sink statements, buffer, the exact isl relation and the distance vector where constant.

    ``kind="dataflow"`` (the default) keeps the direct ones: the write whose value each read
    sees, each write's previous write, the reads since the previous write. ``kind="memory"``
    lists every ordered pair of accesses to one element, which is what legality checks use.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n,), "float32", name="A")
    >>> B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    >>> print(pl.dependences(B))
    no dependences
    """
    if kind not in ("dataflow", "memory"):
        raise PolyloopError(f"dependences(kind={kind!r}): kind is 'dataflow' or 'memory'")
    if isinstance(obj, Schedule):
        program, deps = obj.program, obj.state.deps
    else:
        program = _program_of(obj)
        deps = program_dependences(program)
    return deps if kind == "memory" else direct(deps, program)


def _program_of(obj: object) -> Program:
    """A Program, or the program of a front end's output tensors (they know how to become one,
    as ``pl.Schedule`` takes them)."""
    if isinstance(obj, Program):
        return obj
    if hasattr(obj, "to_program"):
        return obj.to_program()  # type: ignore[attr-defined]
    if isinstance(obj, (list, tuple)) and obj and all(hasattr(t, "to_program") for t in obj):
        return obj[0].to_program(*obj[1:])
    raise PolyloopError(f"dependences() takes a Program, a Schedule or output tensors, "
                        f"got {obj!r}")


__all__ = ["dependences"]
