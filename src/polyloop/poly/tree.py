# SPDX-License-Identifier: Apache-2.0
"""The loop tree of a schedule, as plain data, and its meaning as isl objects.

A tree is a ``Root`` whose children are ``LoopNode``s and ``StmtNode``s in execution order.
A loop node gives, for every statement below it, the loop's value as a quasi-affine function
of the statement's iterators (a ``LoopExpr``: the map ``{ S[i, j] -> [(floor(i/8))] }``, kept
as an isl object and compared by its text). Siblings run in sequence. This is the whole
schedule: ``flat_schedule`` turns it into one map per statement (sequence positions
interleaved with loop values) and ``isl_schedule`` into an isl schedule tree.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterator, Sequence, Union

import islpy as isl

from ..ir.loops import LoopKind
from ..ir.program import Program
from ..ir.thread_axis import ThreadAxis
from .isl_util import map_, map_in, params_prefix, set_, with_params
from .loop_expr import LoopExpr


@dataclass(frozen=True, slots=True)
class StmtNode:
    statement: str


@dataclass(frozen=True, slots=True)
class Collapse:
    """How a fused loop was made, kept for code generation: isl writes clean code for the
    nested loops it replaced but not for their flattened product, so the AST is built from the
    parts and collapsed afterwards (``loop_ast``). Valid only while the loop's expressions are
    still the ones it was made for."""
    # (statement, fused expr, part exprs)
    parts: tuple[tuple[str, LoopExpr, tuple[LoopExpr, ...]], ...]
    ranges: tuple[tuple[int, int], ...]                    # (lowest value, extent) per part

    def applies(self, exprs: tuple[tuple[str, LoopExpr], ...]) -> bool:
        made = {(s, e) for s, e, _ in self.parts}
        return bool(exprs) and all((s, e) in made for s, e in exprs)

    def part_exprs(self, statement: str) -> tuple[LoopExpr, ...]:
        return next(p for s, _, p in self.parts if s == statement)


@dataclass(frozen=True, slots=True)
class SymbolicFuse:
    """Nested loops of symbolic extents fused into one loop ``f`` that the code makes, not isl
    (``f = i * m + j`` is no affine expression when ``m`` is a size): the loop tree keeps the
    loops (isl builds them, legality reads them), and code generation runs them as one loop
    over the product of their extents, recovering each with ``//`` and ``%``
    (``poly.symbolic_fuse``). The loop node carrying this is the outermost of them and stands
    for ``f`` (or, once ``f`` is split, its outer part); ``inners`` are the ids of the loops
    fused into it, outermost first; ``factor``, once ``f`` is split, the extent of its inner
    part, which the innermost of them then stands for."""
    inners: tuple[int, ...]
    factor: int | None = None
    names: tuple[str, ...] = ()        # the fused loops' own names: the code binds them


@dataclass(frozen=True, slots=True)
class LoopNode:
    id: int
    name: str
    exprs: tuple[tuple[str, LoopExpr], ...]      # (statement, { S[i, j] -> [(i)] })
    children: tuple["Node", ...]
    kind: LoopKind = LoopKind.SERIAL
    unroll_factor: int | None = None
    thread: ThreadAxis | None = None
    annotations: tuple[tuple[str, object], ...] = ()   # values: str or a loop_notes type
    collapse: Collapse | None = None
    fused: SymbolicFuse | None = None

    def expr(self, statement: str) -> LoopExpr:
        for s, e in self.exprs:
            if s == statement:
                return e
        raise KeyError(statement)

    def with_children(self, children: tuple["Node", ...]) -> "LoopNode":
        if len(children) == len(self.children) and all(
                a is b for a, b in zip(children, self.children)):
            return self     # immutable: an unchanged subtree is shared
        return LoopNode(self.id, self.name, self.exprs, children, self.kind, self.unroll_factor,
                        self.thread, self.annotations, self.collapse, self.fused)


@dataclass(frozen=True, slots=True)
class Root:
    children: tuple["Node", ...] = field(default=())


Node = Union[StmtNode, LoopNode]


def statements_under(node: Node | Root) -> list[str]:
    if isinstance(node, StmtNode):
        return [node.statement]
    out: list[str] = []
    for c in node.children:
        out.extend(statements_under(c))
    return out


def loops(node: Node | Root) -> Iterator[LoopNode]:
    """All loop nodes, pre-order."""
    if isinstance(node, LoopNode):
        yield node
    if not isinstance(node, StmtNode):
        for c in node.children:
            yield from loops(c)


def path_to(root: Root, target_id: int) -> list[LoopNode] | None:
    """The loop nodes from the root down to (and including) the loop with target_id."""
    def go(n: Node | Root, acc: list[LoopNode]) -> list[LoopNode] | None:
        if isinstance(n, LoopNode):
            acc = acc + [n]
            if n.id == target_id:
                return acc
        if isinstance(n, StmtNode):
            return None
        for c in n.children:
            r = go(c, acc)
            if r is not None:
                return r
        return None
    return go(root, [])


def schedule_items(program: Program, root: Root) -> dict[str, tuple[int | LoopExpr, ...]]:
    """Statement -> its schedule items, outermost first, padded with zeros to one length: the
    position among two or more siblings (int) or a loop's expression (``LoopExpr``). Equal
    items give equal flat schedules; statements not in the tree are left out."""
    paths: dict[str, list[object]] = {}

    def walk(n: Node | Root, prefix: list[object]) -> None:
        kids = n.children
        for pos, c in enumerate(kids):
            here = prefix + ([pos] if len(kids) > 1 else [])
            if isinstance(c, StmtNode):
                paths[c.statement] = here
            else:
                walk(c, here + [c])
    walk(root, [])
    depth = max((len(p) for p in paths.values()), default=0)
    out: dict[str, tuple[int | LoopExpr, ...]] = {}
    for s in program.statements:
        if s.name in paths:
            p = paths[s.name]
            out[s.name] = (tuple(x.expr(s.name) if isinstance(x, LoopNode) else x for x in p)
                           + (0,) * (depth - len(p)))
    return out


def flat_schedule(program: Program, root: Root) -> dict[str, isl.Map]:
    """Statement -> ``S[i, ...] -> [t0, t1, ...]`` with one common range (padded with zeros).

    A sequence of two or more children contributes the child's position; a loop its value.
    """
    return {name: statement_schedule(program.params, name, program.statement(name).iters,
                                     program.statement(name).domain, items)
            for name, items in schedule_items(program, root).items()}


@lru_cache(maxsize=4096)
def statement_time_map(params: tuple[str, ...], name: str, iters: tuple[str, ...],
                       items: tuple[int | LoopExpr, ...]) -> isl.Map:
    """``S[i, ...] -> [t0, t1, ...]`` from the statement's schedule items, outermost first: a
    sequence position (int) or a loop expression, on no particular domain.
    Remembered by value: the same items are asked for by the legality checks of several
    schedule states and again when lowering (``clear_caches`` forgets them)."""
    head = f"{params_prefix(params)}{{ {name}[{', '.join(iters)}] -> "
    m = None
    for item in items:
        if isinstance(item, LoopExpr):
            piece = map_in(params, item)
        else:
            piece = _position(head, item)
        m = piece if m is None else m.flat_range_product(piece)
    return m if m is not None else map_(f"{head}[] }}")


def _position(head: str, value: int) -> isl.Map:
    """``S[i, ...] -> [value]`` without parsing a new text for every value: the statement's
    space comes from one parsed map and the constant is set on it."""
    zero = map_(f"{head}[0] }}")
    if value == 0:
        return zero
    return zero.apply_range(map_(f"{{ [t] -> [t + {value}] }}").align_params(zero.get_space()))


@lru_cache(maxsize=4096)
def statement_schedule(params: tuple[str, ...], name: str, iters: tuple[str, ...],
                       domain_text: str, items: tuple[int | LoopExpr, ...]) -> isl.Map:
    """``statement_time_map`` restricted to the statement's domain (its flat schedule)."""
    return statement_time_map(params, name, iters, items).intersect_domain(
        set_(with_params(params, domain_text)))


def clear_caches() -> None:
    """Forget the remembered schedule maps (``poly.caches.clear_all`` forgets everything poly
    remembers)."""
    statement_time_map.cache_clear()
    statement_schedule.cache_clear()


def loop_position(root: Root, loop_id: int) -> int:
    """Index of the loop's dimension in the flat schedule of the statements below it."""
    def go(n: Node | Root, pos: int) -> int | None:
        kids = n.children
        base = pos + (1 if len(kids) > 1 else 0)
        for c in kids:
            if isinstance(c, LoopNode):
                if c.id == loop_id:
                    return base
                r = go(c, base + 1)
                if r is not None:
                    return r
        return None
    r = go(root, 0)
    if r is None:
        raise KeyError(loop_id)
    return r


def common_loops(paths: Sequence[Sequence[LoopNode]]) -> list[LoopNode]:
    """The loops that head every one of ``paths`` (outermost first): the loops shared by the
    statements whose loop paths these are."""
    if not paths:
        return []
    common = list(paths[0])
    for path in paths[1:]:
        k = 0
        while k < min(len(common), len(path)) and common[k].id == path[k].id:
            k += 1
        common = common[:k]
    return common
