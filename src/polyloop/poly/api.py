# SPDX-License-Identifier: Apache-2.0
"""Dependences of a program in its default order (``pl.dependences`` is built on this)."""
from __future__ import annotations

from ..ir.program import Program
from .deps import Dependences, compute
from .tree import Root, StmtNode


def default_order(program: Program) -> dict:
    from .tree import LoopNode, flat_schedule
    if program.nesting:     # written as imperfect loop nests (the script front end)
        from .order import original_tree
        return flat_schedule(program, original_tree(program)[0])
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


def program_dependences(program: Program) -> Dependences:
    """Dependences of a program in its own order (one loop nest per statement)."""
    return compute(program, default_order(program))
