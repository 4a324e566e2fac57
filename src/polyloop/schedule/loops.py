# SPDX-License-Identifier: Apache-2.0
"""Loop primitives as pure functions ``State -> State``: split, reorder, fuse, skew, reverse,
and loop kinds. Legality is checked by the caller (``verdicts.verify``) on the result."""
from __future__ import annotations

from dataclasses import replace
from math import prod
from typing import Sequence

from ..errors import ScheduleError
from ..ir.loops import LoopKind
from ..poly import affine
from ..poly.tree import Collapse, LoopNode
from . import state as st
from . import symbolic_fuse
from . import verdicts as vd
from .state import State
from ..poly.tree_edits import replace_node


def split(state: State, node: LoopNode, factors: Sequence[int | None],
          names: Sequence[str] | None) -> tuple[State, list[LoopNode]]:
    if len(factors) < 2:
        raise ScheduleError(f"split of loop {st.loop_label(state, node)} needs at least two "
                            f"factors, got {list(factors)}")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError(f"split of loop {st.loop_label(state, node)}: at most one factor may "
                            "be None")
    for f in factors:
        if f is not None and (not isinstance(f, int) or isinstance(f, bool) or f <= 0):
            raise ScheduleError(f"split of loop {st.loop_label(state, node)}: factors must be "
                                f"positive integers or None, got {f!r}")
    lo, hi = _range(state, node)
    facs = list(factors)
    if None in facs[1:]:
        if lo is None or hi is None:
            raise ScheduleError(f"split of loop {st.loop_label(state, node)}: a None factor other "
                                "than the first needs a constant extent; the extent of this loop "
                                "is symbolic")
        k = facs.index(None)
        rest = prod(f for f in facs if f is not None)
        facs[k] = -(-(hi - lo + 1) // rest)
    names = list(names) if names else [f"{node.name}_{k}" for k in range(len(facs))]
    if len(names) != len(facs):
        raise ScheduleError(f"split of loop {st.loop_label(state, node)}: {len(facs)} factors "
                            "but "
                            f"{len(names)} names")
    shift = lo if lo is not None else 0
    new_nodes: list[LoopNode] = []
    nid = state.next_id
    for k in range(len(facs)):
        inner = prod(f for f in facs[k + 1:])  # type: ignore[misc]
        factor = facs[k] if k > 0 else None
        exprs = tuple((s, affine.split_part(state.program, e, shift=shift, inner=inner,
                                            factor=factor))  # type: ignore[arg-type]
                      for s, e in node.exprs)
        new_nodes.append(LoopNode(nid, names[k], exprs, ()))
        nid += 1
    nest = _chain(new_nodes, node.children)
    new = state.with_root(replace_node(state.root, node.id, nest), nid)
    # Strip-mining changes no order, so the verdicts of ``state`` hold for ``new``. With
    # P_k = f_{k+1} * ... * f_m, the loop value x of every statement below becomes the tuple
    # (floor((x-s)/P_1), floor((x-s)/P_2) mod f_2, ..., (x-s) mod f_m), one shift s and one
    # set of factors for all of them: the mixed-radix digits of x - s, a bijection from the
    # integers that is strictly increasing for the lexicographic order. Two instances thus
    # compare on the tuple exactly as they compared on x, and agree on it exactly when they
    # agreed on x; sequence positions and the other loops are untouched. So every pair of
    # instances keeps its relative order (the order verdict), and every exclusive loop (the
    # new loops are serial; the split loop's own kind is dropped) keeps the pairs on which
    # the dimensions above it agree (its carried verdict).
    vd.inherit_split(state, new, node, len(facs))
    return new, new_nodes


def split_blocks(state: State, node: LoopNode, parts: int, names: Sequence[str] | None
                 ) -> tuple[State, list[LoopNode]]:
    """TVM's ``split(nparts=parts)`` of a loop of symbolic extent: ``parts`` blocks of
    ``ceil(extent / parts)`` consecutive iterations (the last ones shorter or empty)."""
    if not isinstance(parts, int) or isinstance(parts, bool) or not 1 <= parts <= MAX_PARTS:
        raise ScheduleError(f"split of loop {st.loop_label(state, node)}: nparts of a loop of "
                            f"symbolic extent must be an int in [1, {MAX_PARTS}] (one piece "
                            f"of the schedule per part), got {parts!r}; for more parts split "
                            "with factor=")
    names = list(names) if names else [f"{node.name}_0", f"{node.name}_1"]
    if len(names) != 2:
        raise ScheduleError(f"split of loop {st.loop_label(state, node)}: 2 loops but "
                            f"{len(names)} names")
    got = affine.block_parts(state.program, node.exprs, parts)
    if got is None:
        raise ScheduleError(f"split of loop {st.loop_label(state, node)}: the loop has no "
                            "iterations to divide into parts")
    outer, inner = got
    stmts = [s for s, _ in node.exprs]
    nid = state.next_id
    new_nodes = [LoopNode(nid, names[0], tuple(zip(stmts, outer)), ()),
                 LoopNode(nid + 1, names[1], tuple(zip(stmts, inner)), ())]
    new = state.with_root(replace_node(state.root, node.id, _chain(new_nodes, node.children)),
                          nid + 2)
    # x -> (block, offset) is strictly increasing for the lexicographic order, as the
    # mixed-radix digits of ``split``: the same verdicts hold
    vd.inherit_split(state, new, node, 2)
    return new, new_nodes


# one piece of the schedule per part: more parts make isl's maps (and code) large
MAX_PARTS = 64


def loop_range(state: State, node: LoopNode) -> tuple[int | None, int | None]:
    """The constant (first, last) values of a loop; None where they depend on sizes."""
    return _range(state, node)


def _chain(nodes: list[LoopNode], children: tuple) -> LoopNode:
    inner = nodes[-1].with_children(children)
    for n in reversed(nodes[:-1]):
        inner = n.with_children((inner,))
    return inner


def _range(state: State, node: LoopNode) -> tuple[int | None, int | None]:
    los, his = [], []
    for s, e in node.exprs:
        lo, hi = affine.value_range(state.program, s, e)
        los.append(lo)
        his.append(hi)
    lo = min(los) if los and None not in los else None
    hi = max(his) if his and None not in his else None
    return lo, hi


def chain(state: State, nodes: Sequence[LoopNode], primitive: str) -> list[LoopNode]:
    """The perfectly nested chain from the outermost to the innermost of ``nodes``."""
    paths = {n.id: state.path(n.id) for n in nodes}
    deepest = max(nodes, key=lambda n: len(paths[n.id]))
    full = paths[deepest.id]
    ids = [p.id for p in full]
    for n in nodes:
        if n.id not in ids:
            raise ScheduleError(f"{primitive}: loops {st.loop_label(state, n)} and "
                                f"{st.loop_label(state, deepest)} are not nested in one another")
    top = min(ids.index(n.id) for n in nodes)
    seg = full[top:]
    for outer in seg[:-1]:
        if len(outer.children) != 1:
            others = ", ".join(_describe(state, c) for c in outer.children)
            raise ScheduleError(f"{primitive}: loop {st.loop_label(state, outer)} is not "
                                f"perfectly nested: it contains {others}; move the other "
                                "statements first (compute_at) or schedule each nest separately")
    return seg


def _describe(state: State, n: object) -> str:
    if isinstance(n, LoopNode):
        return f"loop {st.loop_label(state, n)}"
    return f"statement '{n.statement}'"


def reorder(state: State, nodes: Sequence[LoopNode]) -> State:
    if len({n.id for n in nodes}) != len(nodes):
        raise ScheduleError("reorder: a loop is listed twice")
    seg = chain(state, nodes, "reorder")
    wanted = {n.id for n in nodes}
    slots = [k for k, n in enumerate(seg) if n.id in wanted]
    payload = {n.id: n for n in seg}
    new_seq = list(seg)
    for slot, n in zip(slots, nodes):
        new_seq[slot] = payload[n.id]
    rebuilt = _chain([replace(n, children=()) for n in new_seq], seg[-1].children)
    new = state.with_root(replace_node(state.root, seg[0].id, rebuilt))
    old_slot = {n.id: k for k, n in enumerate(seg)}
    vd.inherit_permutation(state, new, seg[0], len(seg), [old_slot[n.id] for n in new_seq])
    return new


def fuse(state: State, nodes: Sequence[LoopNode], name: str | None) -> tuple[State, LoopNode]:
    if len(nodes) < 2:
        raise ScheduleError("fuse needs at least two loops")
    seg = chain(state, nodes, "fuse")
    if [n.id for n in seg] != [n.id for n in nodes]:
        raise ScheduleError("fuse: the loops must be directly nested, outermost first: "
                            + ", ".join(n.name for n in seg))
    stmts = [s for s, _ in seg[0].exprs]
    ranges = _common_ranges(state, seg, stmts)
    if any(lo is None or hi is None for lo, hi in ranges[1:]):
        # an inner extent is a size: the fused loop is made in the code (symbolic_fuse)
        return symbolic_fuse.fuse(state, seg, name or "_".join(n.name for n in seg) + "_fused")
    # the parts of already fused loops are fused again directly (flattening is associative)
    parts = {s: [p for n in seg for p in _parts(n, s)] for s in stmts}
    part_ranges = [r for n, rng in zip(seg, ranges) for r in _part_ranges(n, rng)]
    exprs = tuple((s, affine.flatten(state.program, [n.expr(s) for n in seg], ranges))
                  for s in stmts)
    collapse = None
    if all(lo is not None and hi is not None for lo, hi in ranges):
        collapse = Collapse(tuple((s, e, tuple(parts[s])) for s, e in exprs),
                            tuple((lo, hi - lo + 1) for lo, hi in part_ranges))  # type: ignore[operator]
    fused = LoopNode(state.next_id, name or "_".join(n.name for n in seg) + "_fused",
                     exprs, seg[-1].children, collapse=collapse)
    return state.with_root(replace_node(state.root, seg[0].id, fused), state.next_id + 1), fused


def _common_ranges(state: State, seg: Sequence[LoopNode], stmts: list[str]
                   ) -> list[tuple[int | None, int | None]]:
    """Each loop's value range over all statements below it: one flattening for all of them,
    so that the fused order is the nested order for every statement alike."""
    out: list[tuple[int | None, int | None]] = []
    for k, n in enumerate(seg):
        found = [affine.value_range(state.program, s, n.expr(s)) for s in stmts]
        los, his = [lo for lo, _ in found], [hi for _, hi in found]
        lo = None if None in los else min(los)  # type: ignore[type-var]
        hi = None if None in his else max(his)  # type: ignore[type-var]
        out.append((lo, hi))
    return out


def _parts(node: LoopNode, stmt: str) -> tuple[str, ...]:
    if node.collapse is not None and node.collapse.applies(node.exprs):
        return node.collapse.part_exprs(stmt)
    return (node.expr(stmt),)


def _part_ranges(node: LoopNode, rng: tuple[int | None, int | None]
                 ) -> list[tuple[int | None, int | None]]:
    if node.collapse is not None and node.collapse.applies(node.exprs):
        return [(lo, lo + ext - 1) for lo, ext in node.collapse.ranges]
    return [rng]


def skew(state: State, outer: LoopNode, inner: LoopNode, factor: int) -> State:
    if not isinstance(factor, int) or isinstance(factor, bool) or factor == 0:
        raise ScheduleError(f"skew factor must be a non-zero integer, got {factor!r}")
    path = state.path(inner.id)
    if outer.id not in [p.id for p in path[:-1]]:
        raise ScheduleError(f"skew: loop {st.loop_label(state, inner)} is not inside loop "
                            f"{st.loop_label(state, outer)}")
    exprs = tuple((s, affine.skewed(state.program, outer.expr(s), e, factor))
                  for s, e in inner.exprs)
    return state.with_root(replace_node(state.root, inner.id, replace(inner, exprs=exprs)))


def reverse(state: State, node: LoopNode) -> State:
    exprs = tuple((s, affine.negated(state.program, e)) for s, e in node.exprs)
    return state.with_root(replace_node(state.root, node.id, replace(node, exprs=exprs)))


def set_kind(state: State, node: LoopNode, kind: LoopKind, **fields: object) -> State:
    new = replace(node, kind=kind, **fields)  # type: ignore[arg-type]
    return state.with_root(replace_node(state.root, node.id, new))
