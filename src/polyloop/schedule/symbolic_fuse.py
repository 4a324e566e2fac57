# SPDX-License-Identifier: Apache-2.0
"""``fuse`` of loops whose extents are symbolic, as pure functions ``State -> State``.

``f = i * m + j`` is not an affine expression when ``m`` is a size, so isl cannot run such a
fused loop itself. The loop tree keeps the loops it fused (isl builds them, and every
dependence is judged on them), the outermost marked as the fused loop
(``poly.tree.SymbolicFuse``), and code generation makes them one loop
(``poly.symbolic_fuse``). What a fused loop allows, all decided on the loops it was made of:

- ``split(f, factor=F)``: an outer loop over the chunks of ``F`` and an inner one within;
- ``parallel``, ``vectorize`` (the inner part, or an unsplit fused loop with nothing inside):
  allowed when none of the fused loops carries a dependence, since the fused loop's
  iterations are theirs, in any grouping;
- ``unroll``: always.
Everything else on a fused loop of symbolic extent is refused with a message that says so;
the loops inside it take every primitive as before.

>>> import polyloop as pl
>>> n, m = pl.var("n"), pl.var("m")
>>> A = pl.placeholder((n, m), "float32", name="A")
>>> sch = pl.Schedule(pl.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B"))
>>> f = sch.fuse(*sch.get_loops("B"))
>>> sch.parallel(f)
>>> print(sch)
for i_j_fused in parallel(n * m):
    i = i_j_fused // m
    j = i_j_fused % m
    B[i, j] = A[i, j] * 2.0
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from ..errors import ScheduleError
from ..ir.loops import LoopKind
from ..poly import affine
from ..poly.tree import LoopNode, SymbolicFuse, loops, statements_under
from ..poly.tree_edits import replace_node
from . import state as st
from . import verdicts as vd
from .state import State

# what a fused loop of symbolic extent takes (the names primitives give ``Schedule._loop``)
ALLOWED = frozenset({"split", "parallelize", "vectorize", "unroll", "annotate"})


def fuse(state: State, seg: Sequence[LoopNode], name: str) -> tuple[State, LoopNode]:
    """The loops ``seg`` (directly nested, outermost first) as one fused loop ``name``."""
    if any(n.fused is not None or owner(state, n) is not None for n in seg):
        raise ScheduleError(f"fuse: loop {st.loop_label(state, seg[0])} is already a fused loop "
                            "of symbolic extent; fuse all the loops in one call")
    if any(n.collapse is not None for n in seg):
        raise ScheduleError("fuse: a loop fused from loops of constant extents cannot be fused "
                            "again with one of symbolic extent; fuse them all in one call")
    stmts = statements_under(seg[0])
    if not affine.rectangular(state.program, {s: [n.expr(s) for n in seg] for s in stmts}):
        raise ScheduleError(
            f"fuse: the range of loop {st.loop_label(state, seg[-1])} depends on the loops "
            "around it (the iterations are not a rectangle); one loop over n * m values can "
            "only run rectangular nests: fuse loops whose bounds are independent, or split "
            "the outer loop instead")
    top = replace(seg[0], name=name, fused=SymbolicFuse(tuple(n.id for n in seg[1:]),
                                                        names=tuple(n.name for n in seg)))
    return state.with_root(replace_node(state.root, seg[0].id, top)), top


def owner(state: State, node: LoopNode) -> LoopNode | None:
    """The fused loop ``node`` was fused into (``node`` not the outermost), or None."""
    for n in loops(state.root):
        if n.fused is not None and node.id in n.fused.inners:
            return n
    return None


def hidden(state: State, node: LoopNode) -> LoopNode | None:
    """The fused loop that stands for ``node`` when ``node`` has no handle of its own (a loop
    fused into another, not the inner part of a split), else None."""
    top = owner(state, node)
    if top is None or (top.fused.factor is not None  # type: ignore[union-attr]
                       and node.id == top.fused.inners[-1]):  # type: ignore[union-attr]
        return None
    return top


def group(state: State, node: LoopNode) -> LoopNode | None:
    """The outermost loop of the fused group ``node`` belongs to (or stands for), or None."""
    return node if node.fused is not None else owner(state, node)


def split(state: State, top: LoopNode, factors: Sequence[int | None],
          names: Sequence[str] | None) -> tuple[State, list[LoopNode]]:
    """The fused loop ``top`` split into chunks of a constant size: ``factors=[None, F]``."""
    spec = top.fused
    assert spec is not None
    if spec.factor is not None:
        raise ScheduleError(f"split of loop {st.loop_label(state, top)}: it is the outer part of "
                            "a split fused loop of symbolic extent, which splits no further; "
                            "split by the product of the factors at once")
    if len(factors) != 2 or factors[0] is not None or not isinstance(factors[1], int):
        raise ScheduleError(f"split of loop {st.loop_label(state, top)}: a fused loop of symbolic "
                            "extent splits into two loops by a constant inner factor: "
                            "factor=F or factors=[None, F]")
    outer_name, inner_name = names or (f"{top.name}_0", f"{top.name}_1")
    inner = state.loop(spec.inners[-1])
    assert inner is not None
    root = replace_node(state.root, inner.id, replace(inner, name=inner_name))
    new_top = replace(top, name=outer_name, fused=replace(spec, factor=factors[1]))
    root = replace_node(root, top.id, new_top.with_children(
        next(n for n in loops(root) if n.id == top.id).children))
    new = state.with_root(root)
    return new, [new.loop(top.id), new.loop(inner.id)]  # type: ignore[list-item]


def set_kind(state: State, node: LoopNode, kind: LoopKind, what: str, **fields: Any) -> State:
    """``node`` (a fused loop, or a part of a split one) run as ``kind``: parallel and
    vectorized need every fused loop free of carried dependences (``what`` names the
    primitive in the error)."""
    top = group(state, node)
    assert top is not None
    members = [top] + [state.loop(i) for i in top.fused.inners]  # type: ignore[union-attr]
    if kind is LoopKind.VECTORIZED:
        _assert_innermost(state, top, node)
    spec = top.fused
    assert spec is not None
    if kind in (LoopKind.PARALLEL, LoopKind.VECTORIZED):
        for m, original in zip(members, spec.names or [x.name for x in members]):  # type: ignore
            assert m is not None
            trial = state.with_root(replace_node(state.root, m.id, replace(  # type: ignore
                m, kind=LoopKind.PARALLEL)))
            bad = vd.check_parallel(trial, trial.loop(m.id))  # type: ignore[arg-type, union-attr]
            if bad is not None:
                raise ScheduleError(
                    f"cannot {what} loop {st.loop_label(state, node)}: it is fused from loop "
                    f"'{original}', which carries {bad.summary()}; for instance "
                    f"{bad.describe()}", dependence=bad.evidence())
    if kind is LoopKind.PARALLEL:
        for anc in state.path(top.id)[:-1]:
            if anc.kind is LoopKind.PARALLEL:
                raise ScheduleError(f"cannot parallelize loop {st.loop_label(state, node)}: it is "
                                    f"inside parallel loop {st.loop_label(state, anc)}")
    return state.with_root(replace_node(state.root, node.id, replace(node, kind=kind, **fields)))


def _assert_innermost(state: State, top: LoopNode, node: LoopNode) -> None:
    spec = top.fused
    assert spec is not None
    last = state.loop(spec.inners[-1])
    if spec.factor is not None and node.id != last.id:  # type: ignore[union-attr]
        raise ScheduleError(f"cannot vectorize loop {st.loop_label(state, node)}: it is the outer "
                            "part of a split fused loop; vectorize its inner part")
    inner = st.inner_loops(state, last)  # type: ignore[arg-type]
    if inner:
        raise ScheduleError(f"cannot vectorize loop {st.loop_label(state, node)}: it contains "
                            f"loop '{inner[0].name}'; vectorize an innermost loop")
