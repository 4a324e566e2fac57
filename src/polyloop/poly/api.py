# SPDX-License-Identifier: Apache-2.0
"""``pl.dependences``: the exact dependences of a program or schedule, for people to read."""
from __future__ import annotations

from ..ir.program import Program
from .deps import Dependences, compute
from .tree import Root, StmtNode


def default_order(program: Program) -> dict:
    from .tree import LoopNode, flat_schedule
    nests = []
    nid = 0
    for s in program.statements:
        child = StmtNode(s.name)
        for it in reversed(s.iters):
            child = LoopNode(nid, it, ((s.name, f"{{ {s.name}[{', '.join(s.iters)}] -> [({it})] }}"),),
                             (child,))
            nid += 1
        nests.append(child)
    return flat_schedule(program, Root(tuple(nests)))


def dependences(obj: object) -> Dependences:
    """RAW/WAR/WAW dependences with source, sink, buffer, isl relation and distance vector.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n,), "float32", name="A")
    >>> B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    >>> print(pl.dependences(B))
    no dependences
    """
    if isinstance(obj, Program):
        return compute(obj, default_order(obj))
    state = getattr(obj, "state", None)
    if state is not None:           # a Schedule
        return state.deps
    from ..frontend.te import Tensor, to_program
    if isinstance(obj, Tensor):
        return dependences(to_program(obj))
    if isinstance(obj, (list, tuple)):
        return dependences(to_program(*obj))
    raise TypeError(f"dependences() takes a Program, Schedule or tensors, got {obj!r}")
