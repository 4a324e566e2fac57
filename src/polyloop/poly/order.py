# SPDX-License-Identifier: Apache-2.0
"""The order a program was written in: its loop tree and the instance order it defines.

A program from tensor expressions runs one loop nest per statement, in program order. A program
written as Python loops (``@pl.script``) may interleave statements in imperfect nests; its
``Program.nesting`` gives each statement's position among its siblings at every depth, and the
tree built here is the one the default schedule, the dependences and the reference interpreter
all follow.
"""
from __future__ import annotations

from ..errors import PolyloopError
from ..ir.program import Program
from .access import accesses
from .isl_text import iterator_expr
from .loop_expr import LoopExpr
from .tree import LoopNode, Node, Root, StmtNode, flat_schedule


def _identity(program: Program, stmt: str, depth: int) -> LoopExpr:
    s = program.statement(stmt)
    return iterator_expr(s.name, s.iters, s.iters[depth])


def positions(program: Program) -> dict[str, tuple[int, ...]]:
    """Statement -> its position at each depth (``(k, 0, 0, ...)`` for the k-th statement of a
    program without nesting), checked to describe a tree."""
    if not program.nesting:
        return {s.name: (k,) + (0,) * len(s.iters) for k, s in enumerate(program.statements)}
    given = dict(program.nesting)
    out = {}
    for s in program.statements:
        if s.name not in given:
            raise PolyloopError(f"program '{program.name}' gives no nesting position for "
                                f"statement '{s.name}'")
        pos = tuple(given[s.name])
        if len(pos) != len(s.iters) + 1:
            raise PolyloopError(f"statement '{s.name}' has {len(s.iters)} iterators but nesting "
                                f"position {pos}; it needs one entry per loop and one more")
        out[s.name] = pos
    return out


def original_tree(program: Program, first_id: int = 0) -> tuple[Root, int]:
    """The loop tree of the program as written, and the next free loop id (ids are given in
    pre-order from ``first_id``)."""
    pos = positions(program)
    counter = [first_id]

    def build(stmts: list[str], depth: int) -> tuple[Node, ...]:
        groups: dict[int, list[str]] = {}
        for name in stmts:
            groups.setdefault(pos[name][depth], []).append(name)
        kids: list[Node] = []
        for key in sorted(groups):
            group = groups[key]
            ending = [g for g in group if len(pos[g]) == depth + 1]
            if ending and len(group) > 1:
                raise PolyloopError(f"nesting positions of {', '.join(group)} collide at depth "
                                    f"{depth}: a statement and a loop cannot share a place")
            if ending:
                kids.append(StmtNode(group[0]))
                continue
            lid = counter[0]
            counter[0] += 1
            name = program.statement(group[0]).iters[depth]
            exprs = tuple((g, _identity(program, g, depth)) for g in group)
            kids.append(LoopNode(lid, name, exprs, build(group, depth + 1)))
        return tuple(kids)

    root = Root(build([s.name for s in program.statements], 0))
    return root, counter[0]


def instance_key(position: tuple[int, ...], point: tuple[int, ...]) -> tuple[int, ...]:
    """The place of one statement instance in the original order: positions interleaved with
    the iterator values (``(p0, i, p1, j, p2)``); keys of all instances sort in execution order."""
    key: list[int] = []
    for k, p in enumerate(position):
        key.append(p)
        if k < len(point):
            key.append(point[k])
    return tuple(key)


def exposed_reads(program: Program, buffer: str) -> bool:
    """May a read of ``buffer`` see a value from before the program runs (an element not
    written earlier in the program's own order)? Inexact (non-affine) accesses count as yes."""
    acc = [a for a in accesses(program) if a.buffer == buffer]
    reads = [a for a in acc if not a.is_write]
    writes = [a for a in acc if a.is_write]
    if any(not a.exact for a in acc):
        return bool(reads)
    schedule = flat_schedule(program, original_tree(program)[0])
    for r in reads:
        covered = None
        for w in writes:
            pairs = w.relation.apply_range(r.relation.reverse())
            pairs = pairs.intersect(schedule[w.statement].lex_lt_map(schedule[r.statement]))
            covered = pairs.range() if covered is None else covered.union(pairs.range())
        if covered is None or not r.relation.domain().is_subset(covered):
            return True
    return False
