# SPDX-License-Identifier: Apache-2.0
"""GPU questions about a scheduled loop tree, answered exactly with isl.

A launch runs one top-level nest: loops bound to ``blockIdx.*`` are work-groups, loops bound to
``threadIdx.*`` are the work-items of a group, running in parallel. Between work-items, only a
barrier orders memory accesses. ``barrier_gaps`` finds where barriers are needed: wherever a
dependence links two statement instances run by different work-items of one group (no missing
barriers), and nowhere else (no needless ones). Launch shapes and sizes: ``poly.launch``.
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..errors import BuildError
from ..ir.program import MemScope, Program
from ..ir.thread_axis import AXIS_LETTERS, AxisLevel, ThreadAxis
from .access import domain
from .affine import prefix_map
from .access import Access, accesses
from .deps import DepKind
from .isl_util import map_in, printed
from .tree import (LoopNode, Node, Root, StmtNode, loop_position, path_to, schedule_items,
                   statement_time_map, statements_under)

AXES = AXIS_LETTERS


def is_group(n: LoopNode) -> bool:
    return n.thread is not None and n.thread.is_group


def is_item(n: LoopNode) -> bool:
    return n.thread is not None and n.thread.is_item


def statement_paths(root: Root) -> dict[str, list[LoopNode]]:
    """Statement -> the loops around it, outermost first."""
    out: dict[str, list[LoopNode]] = {}

    def go(n: Node | Root, acc: list[LoopNode]) -> None:
        if isinstance(n, StmtNode):
            out[n.statement] = acc
            return
        here = acc + [n] if isinstance(n, LoopNode) else acc
        for c in n.children:
            go(c, here)
    go(root, [])
    return out


def _align(a, b):
    return a.align_params(b.get_space())


def item_map(program: Program, path: list[LoopNode], stmt: str) -> isl.Map:
    """``S[...] -> [x, y, z]``: the work-item index that runs each instance (0 on axes without
    a work-item loop)."""
    return _axis_map(program, path, stmt, AxisLevel.ITEM)


def group_map(program: Program, path: list[LoopNode], stmt: str) -> isl.Map:
    """``S[...] -> [x, y, z]``: the work-group index that runs each instance (0 on axes
    without a work-group loop)."""
    return _axis_map(program, path, stmt, AxisLevel.GROUP)


def _axis_map(program: Program, path: list[LoopNode], stmt: str, level: AxisLevel) -> isl.Map:
    s = program.statement(stmt)
    head = f"{{ {s.name}[{', '.join(s.iters)}] -> "
    m = None
    for dim in range(len(AXES)):
        loops = [n for n in path if n.thread is ThreadAxis.of(level, dim)]
        text = loops[0].expr(stmt) if loops else head + "[0] }"
        piece = map_in(program.params, text)
        m = piece if m is None else _align(m, piece).flat_range_product(_align(piece, m))
    assert m is not None
    return m.intersect_domain(_align(domain(program, s), m))


@dataclass(frozen=True, slots=True)
class Gap:
    """A barrier among the children of ``loop`` (None: the launch's top level), before child
    ``index`` (``index == len(children)``: at the end of the body). ``global_memory``: some
    dependence it orders goes through a global buffer."""
    loop: int | None
    index: int
    global_memory: bool


def barrier_gaps(program: Program, root: Root) -> list[Gap]:
    """Where one launch (``root`` has one top-level nest) needs work-group barriers: wherever
    two accesses to one element, one of them a write, run on different work-items of a group
    in an order that only a barrier among the children of a group-level loop can enforce."""
    levels = _group_level(root)
    pairs = _cross_item_pairs(program, root, levels)
    if not pairs:
        return []
    out: list[Gap] = []
    for node in levels:
        out += _gaps_at(program, root, node, pairs)
    return out


@dataclass(frozen=True, slots=True)
class _Pair:
    """Two accesses (``a`` of statement ``first``, ``b`` of ``second``) that touch one element
    from different work-items, with the time deltas of those instance pairs (second minus
    first) on the schedule dimensions of the group-level loops."""
    first: Access
    second: Access
    profile: _Profile
    global_memory: bool


def _cross_item_pairs(program: Program, root: Root,
                      levels: list[LoopNode | Root]) -> list[_Pair]:
    """Every pair of accesses to one buffer, one of them a write, that some pair of instances
    run by different work-items reaches on one element; the dependence's direction is not
    needed: between different children of a loop it is the children's order, and for a loop
    that carries it the sign of its delta there.

    Each access is first mapped to ``[t, item] -> element`` (``t``: the schedule dimensions
    the group-level loops need, ``item``: the work-item index), so a pair costs one
    composition and one delta set: the element is shared where both ends reach it, and the
    work-items differ where the item part of the delta is not zero."""
    depth = max((loop_position(root, n.id) + 1 for n in levels if isinstance(n, LoopNode)),
                default=0)
    paths = statement_paths(root)
    items = schedule_items(program, root)
    timed: dict[str, isl.Map] = {}
    by_buffer: dict[str, list[Access]] = {}
    for a in accesses(program):
        # private memory: every work-item has its own copy (storage placement made sure no
        # value has to travel between work-items through it)
        if program.buffer(a.buffer).scope is MemScope.LOCAL:
            continue
        if a.statement in paths and not (a.is_accumulator and not a.is_write):
            by_buffer.setdefault(a.buffer, []).append(a)
    out: list[_Pair] = []
    for buf, group in by_buffer.items():
        if not any(a.is_write for a in group):
            continue
        if len(group) == 1 and group[0].relation.is_injective():
            continue    # one write, each element by one instance: a pair is one instance
        glob = program.buffer(buf).scope is MemScope.GLOBAL
        located = []
        for a in group:
            if a.statement not in timed:
                timed[a.statement] = _time_and_item(program, a.statement, paths[a.statement],
                                                   items[a.statement][:depth])
            t = timed[a.statement]
            rel = a.relation
            if not glob:    # local memory: each work-group has its own, so an element is
                # also named by the group (pairs of instances in different groups share none)
                g = group_map(program, paths[a.statement], a.statement)
                rel = _align(rel, g).flat_range_product(_align(g, rel))
            located.append(rel.apply_domain(_align(t, rel)))
        for k, a in enumerate(group):
            for m in range(k, len(group)):
                b = group[m]
                if not (a.is_write or b.is_write):
                    continue
                ea, eb = located[k], located[m]
                deltas = ea.apply_range(_align(eb, ea).reverse()).deltas()
                cross = deltas.subtract(_items_equal(deltas, depth))
                if cross.is_empty():
                    continue
                cross = cross.project_out(isl.dim_type.set, depth, len(AXES))
                out.append(_Pair(a, b, _Profile(cross), glob))
    return out


def _time_and_item(program: Program, stmt: str, path: list[LoopNode],
                   items: tuple[int | str, ...]) -> isl.Map:
    """``S[...] -> [t0, ..., x, y, z]``: the first schedule dimensions, then the work-item
    index (``item_map``), on the statement's domain."""
    s = program.statement(stmt)
    ids = item_map(program, path, stmt)
    t = statement_time_map(tuple(program.params), s.name, tuple(s.iters), items)
    return _align(t, ids).flat_range_product(_align(ids, t))


def _items_equal(deltas: isl.Set, depth: int) -> isl.Set:
    """The deltas' space with the work-item part (the dimensions after ``depth``) zero."""
    zero = isl.Set.universe(deltas.get_space())
    for k in range(len(AXES)):
        zero = zero.fix_val(isl.dim_type.set, depth + k, isl.Val.int_from_si(deltas.get_ctx(),
                                                                             0))
    return zero


class _Profile:
    """What the barrier placement asks about one pair of accesses, from its time deltas (one
    set, computed once): do some of its instance pairs agree on the first ``n`` schedule
    dimensions (``agree(n)``), and which ways do they differ at dimension ``p`` when they
    agree before it (``forward(p)``: the second access later, ``backward(p)``: earlier)?"""

    def __init__(self, deltas: isl.Set):
        self.levels = [deltas]        # deltas with the first k dimensions fixed to 0

    def _level(self, k: int) -> isl.Set:
        while len(self.levels) <= k:
            j = len(self.levels) - 1
            self.levels.append(self.levels[j].fix_val(isl.dim_type.set, j, 0))
        return self.levels[k]

    def agree(self, n: int) -> bool:
        return not self._level(n).is_empty()

    def forward(self, p: int) -> bool:
        same = self._level(p)
        one = isl.Val.int_from_si(same.get_ctx(), 1)
        return not (same.is_empty()
                    or same.lower_bound_val(isl.dim_type.set, p, one).is_empty())

    def adjacent(self, p: int, step: int) -> bool:
        """Do some pairs that agree before ``p`` differ by exactly ``step`` there (consecutive
        iterations of the loop at ``p``)? When a loop-carried pair is only ever two or more
        iterations apart, a barrier anywhere in the loop's body, run by the iterations
        between, orders it."""
        same = self._level(p)
        return not same.is_empty() and not same.fix_val(isl.dim_type.set, p, step).is_empty()

    def backward(self, p: int) -> bool:
        same = self._level(p)
        minus_one = isl.Val.int_from_si(same.get_ctx(), -1)
        return not (same.is_empty()
                    or same.upper_bound_val(isl.dim_type.set, p, minus_one).is_empty())


def _group_level(root: Root) -> list[LoopNode | Root]:
    """The nodes whose children run in sequence for the whole group: the root and every loop
    that is neither a work-item loop nor inside one."""
    out: list[LoopNode | Root] = [root]

    def go(n: LoopNode) -> None:
        if is_item(n):
            return
        out.append(n)
        for c in n.children:
            if isinstance(c, LoopNode):
                go(c)
    for c in root.children:
        if isinstance(c, LoopNode):
            go(c)
    return out


def _gaps_at(program: Program, root: Root, node: LoopNode | Root,
             pairs: list[_Pair]) -> list[Gap]:
    kids = node.children
    where = {s: k for k, c in enumerate(kids) for s in statements_under(c)}
    loop_id = node.id if isinstance(node, LoopNode) else None
    pos = loop_position(root, node.id) if isinstance(node, LoopNode) else -1
    sequential = isinstance(node, LoopNode) and not is_group(node)
    linear: list[tuple[int, int, bool]] = []
    wrap: list[tuple[int, int, bool]] = []
    far: list[bool] = []    # pairs two or more iterations apart: any barrier of the body
    every = sequential and _no_skipped_iterations(program, root, node)
    for pr in pairs:
        first, second = pr.first.statement, pr.second.statement
        if first not in where or second not in where:
            continue
        i, j = where[first], where[second]
        glob, x = pr.global_memory, pr.profile
        # the instance pairs in one iteration of every loop down to this node: the earlier
        # child runs the source
        if x.agree(pos + 1):
            if i == j:
                if isinstance(kids[i], LoopNode) and is_item(kids[i]):
                    _inside_items(program, root, kids[i], pr)
            else:
                linear.append((min(i, j) + 1, max(i, j), glob))
        # the pairs in different iterations of this loop: the earlier iteration runs the source
        if sequential:
            if x.forward(pos):
                if every and not x.adjacent(pos, 1):
                    far.append(glob)
                else:
                    wrap.append((i + 1, j, glob))
            if pr.first is not pr.second and x.backward(pos):
                if every and not x.adjacent(pos, -1):
                    far.append(glob)
                else:
                    wrap.append((j + 1, i, glob))
    chosen: dict[int, bool] = {}
    for lo, hi, glob in sorted(linear, key=lambda t: t[1]):
        hit = [g for g in chosen if lo <= g <= hi]
        if hit:
            chosen[hit[0]] = chosen[hit[0]] or glob
        else:
            chosen[hi] = glob
    for lo, hi, glob in wrap:
        hit = [g for g in chosen if g >= lo or g <= hi]
        if hit:
            chosen[hit[0]] = chosen[hit[0]] or glob
        else:
            chosen[len(kids)] = glob
    for glob in far:
        g = next(iter(chosen), len(kids))
        chosen[g] = chosen.get(g, False) or glob
    return [Gap(loop_id, g, glob) for g, glob in sorted(chosen.items())]


def _no_skipped_iterations(program: Program, root: Root, node: LoopNode) -> bool:
    """Does a barrier among the children of loop ``node`` run at every value between two
    values it runs at (with the loops around fixed)? Its domain is the loop values at which
    some statement below runs (``barrier_domain``); a hole there could leave two iterations
    two apart with no barrier run between them."""
    path = path_to(root, node.id) or []
    region = None
    for st in statements_under(node):
        r = prefix_map(program, st, [n.expr(st) for n in path]).range()
        region = r if region is None else _align(region, r).union(_align(r, region))
    if region is None:
        return False
    n = region.dim(isl.dim_type.set)
    after = isl.Map.universe(region.get_space().map_from_set())
    for k in range(n - 1):
        after = after.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    after = after.order_le(isl.dim_type.in_, n - 1, isl.dim_type.out, n - 1)
    between = region.apply(after).intersect(region.apply(after.reverse()))
    return bool(between.is_subset(region))


def _inside_items(program: Program, root: Root, child: LoopNode, pr: _Pair) -> None:
    """Two work-items linked inside one work-item region could only be ordered by a barrier
    inside it, where work-items may have left: refuse (naming the dependence's source first:
    the access whose instance runs first in a pair that agrees down to ``child``)."""
    a, b = pr.first, pr.second
    if not _runs_first(program, root, child, a, b):
        a, b = b, a
    kind = (DepKind.WAW if a.is_write and b.is_write else
            DepKind.RAW if a.is_write else DepKind.WAR)
    raise BuildError(f"{kind.value} dependence {a.statement} -> {b.statement} on '{a.buffer}' "
                     f"links different work-items inside loop '{child.name}' (a work-item loop "
                     "or a loop under one), where no barrier can order them; move the "
                     "sequential loops that carry it outside the work-item loops")


def _runs_first(program: Program, root: Root, child: LoopNode, a: Access, b: Access) -> bool:
    """Does ``a`` run first in some pair of instances on different work-items that touch one
    element and agree on every loop above ``child``? (Only for the error message.)"""
    paths = statement_paths(root)
    items = schedule_items(program, root)
    ends = []
    for x in (a, b):
        t = _time_and_item(program, x.statement, paths[x.statement], items[x.statement])
        ends.append(x.relation.apply_domain(_align(t, x.relation)))
    deltas = ends[0].apply_range(_align(ends[1], ends[0]).reverse()).deltas()
    depth = len(items[a.statement])
    rest = deltas.subtract(_items_equal(deltas, depth))
    rest = rest.project_out(isl.dim_type.set, depth, len(AXES))
    one = isl.Val.int_from_si(rest.get_ctx(), 1)
    for k in range(loop_position(root, child.id)):
        rest = rest.fix_val(isl.dim_type.set, k, 0)
    for k in range(loop_position(root, child.id), depth):
        if not rest.lower_bound_val(isl.dim_type.set, k, one).is_empty():
            return True
        rest = rest.fix_val(isl.dim_type.set, k, 0)
    return False


def barrier_domain(program: Program, path: list[LoopNode], name: str) -> tuple[str, tuple[str, ...]]:
    """The domain of a barrier placed among the children of ``path[-1]``: every iteration of
    the loops of ``path`` that runs some statement below it. Returns (domain text, iterators)."""
    iters = tuple(f"t{k}" for k in range(len(path)))
    region = None
    below = statements_under(path[-1]) if path else []
    for s in below:
        r = prefix_map(program, s, [n.expr(s) for n in path]).range()
        region = r if region is None else _align(region, r).union(_align(r, region))
    assert region is not None
    region = region.coalesce().set_tuple_name(name)
    for k, it in enumerate(iters):
        region = region.set_dim_name(isl.dim_type.set, k, it)
    return printed(region), iters
