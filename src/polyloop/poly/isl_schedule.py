# SPDX-License-Identifier: Apache-2.0
"""The isl schedule tree of a loop tree: one band under a mark ``L<id>`` per loop, one sequence
per node with several children, a filter per child (the domains of its statements).

isl reads its loops from here and decides every bound; ``astgen`` builds the AST from it. A
fused loop is written as the loops it replaced (``Collapse``; isl writes clean bounds for those)
unless its id is in ``plain``; a loop the hardware runs (``hardware``) leaves no node.
"""
from __future__ import annotations

from typing import Collection, Mapping

import islpy as isl

from ..errors import PolyloopError
from ..ir.program import Program
from .isl_util import map_in, params_prefix, set_
from .tree import LoopNode, Root, StmtNode, statements_under


def collapsed(node: LoopNode, plain: frozenset[int]) -> bool:
    """Is the node a fused loop whose AST is built from its parts and collapsed afterwards?"""
    return (node.collapse is not None and node.id not in plain
            and node.collapse.applies(node.exprs))


def _width(node: LoopNode, plain: frozenset[int], hardware: Collection[int]) -> int:
    """How many band members (isl AST depths) the node occupies."""
    if node.id in hardware:
        return 0
    return len(node.collapse.ranges) if collapsed(node, plain) else 1  # type: ignore[union-attr]


def _band(program: Program, node: LoopNode, plain: frozenset[int]) -> isl.MultiUnionPwAff:
    """The loop's values for the statements below it (its parts', for a collapsed loop)."""
    um = None
    for stmt, text in node.exprs:
        if collapsed(node, plain):
            m = None
            for part in node.collapse.part_exprs(stmt):  # type: ignore[union-attr]
                pm = map_in(program.params, part)
                m = pm if m is None else m.flat_range_product(pm)
        else:
            m = map_in(program.params, text)
        um = isl.UnionMap.from_map(m) if um is None else um.union(isl.UnionMap.from_map(m))
    return isl.MultiUnionPwAff.from_union_map(um)


def _insert(program: Program, at: isl.ScheduleNode, kids: tuple, plain: frozenset[int],
            doms: dict[str, isl.Set], hardware: Mapping[int, str]) -> isl.ScheduleNode:
    """Insert the subtree of ``kids`` at the leaf ``at``; returns the node now at its place.
    Several children become a sequence (one filter per child: the domains of its
    statements); a loop becomes a band under a mark ``L<id>`` (a hardware loop: nothing)."""
    if not kids:
        return at
    if len(kids) == 1:
        return _insert_node(program, at, kids[0], plain, doms, hardware)
    filters = None
    for c in kids:
        f = None
        for stmt in statements_under(c):
            d = isl.UnionSet.from_set(doms[stmt])
            f = d if f is None else f.union(d)
        filters = (isl.UnionSetList.from_union_set(f) if filters is None  # type: ignore[arg-type]
                   else filters.add(f))
    node = at.insert_sequence(filters)
    for k, c in enumerate(kids):
        node = _insert_node(program, node.child(k).child(0), c, plain, doms,
                            hardware).parent().parent()
    return node


def _insert_node(program: Program, at: isl.ScheduleNode, node: object, plain: frozenset[int],
                 doms: dict[str, isl.Set], hardware: Mapping[int, str]) -> isl.ScheduleNode:
    if isinstance(node, StmtNode):
        return at
    assert isinstance(node, LoopNode)
    if node.id in hardware:     # a parameter of the build: no band, no mark
        return _insert(program, at, node.children, plain, doms, hardware)
    mark = at.insert_mark(isl.Id(f"L{node.id}"))
    band = mark.child(0).insert_partial_schedule(_band(program, node, plain))
    return _insert(program, band.child(0), node.children, plain, doms,
                   hardware).parent().parent()


def isl_schedule(program: Program, root: Root, doms: Mapping[str, isl.Set],
                 plain: frozenset[int] = frozenset(),
                 hardware: Mapping[int, str] | None = None) -> isl.Schedule:
    """The isl schedule tree of ``root`` over the statement domains ``doms``; fused loops not
    in ``plain`` appear as their parts; the loops in ``hardware`` (loop id -> parameter) are
    parameters of the build (``doms`` fixes each statement to one value of each:
    ``hardware.statement_domains``) and leave no node.
    Built node by node from the (cached) isl objects of the loop expressions, not through
    text: the maps are parsed once, for legality, and reused here."""
    hardware = hardware or {}
    every = union_of(doms)
    if every is None:
        raise PolyloopError(f"program '{program.name}' has no statements")
    top = isl.Schedule.from_domain(every).get_root().child(0)
    return _insert(program, top, root.children, plain, dict(doms), hardware).get_schedule()


def union_of(doms: Mapping[str, isl.Set]) -> isl.UnionSet | None:
    """Every statement instance of ``doms`` in one set (None for no statement)."""
    every = None
    for d in doms.values():
        u = isl.UnionSet.from_set(d)
        every = u if every is None else every.union(u)
    return every


def context(program: Program) -> isl.Set:
    """What is known about the parameters: sizes are non-negative, plus the user's assumptions."""
    pre = params_prefix(program.params)
    cons = " and ".join(f"{p} >= 0" for p in program.params)
    ctx = set_(f"{pre}{{ : {cons} }}" if cons else "{ : }")
    if program.assumptions:
        ctx = ctx.intersect(set_(program.assumptions))
    return ctx


def depths(root: Root, plain: frozenset[int], hardware: Collection[int]) -> dict[int, int]:
    """The isl AST depth (``c<depth>``) of each loop's first band member."""
    out: dict[int, int] = {}

    def go(n: object, depth: int) -> None:
        if isinstance(n, LoopNode):
            out[n.id] = depth
            depth += _width(n, plain, hardware)
        if not isinstance(n, StmtNode):
            for c in n.children:  # type: ignore[attr-defined]
                go(c, depth)
    go(root, 0)
    return out

