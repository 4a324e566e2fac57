# SPDX-License-Identifier: Apache-2.0
"""Fusing loop nests as pure functions ``State -> State``: ``shift`` renumbers a loop's
iterations, ``merge`` fuses two adjacent sibling loops into one, ``distribute`` (fission, the
inverse of ``merge``) splits one loop into two over its children. Legality is checked by the
caller (``verdicts.verify``) on the result, as for every primitive."""
from __future__ import annotations

from dataclasses import replace

from ..errors import ParseError, ScheduleError
from ..poly import affine
from ..poly.tree import LoopNode, Root, statements_under
from . import state as st
from . import verdicts as vd
from .state import State
from ..poly.tree_edits import replace_node


def shift(state: State, node: LoopNode, offset: int | str) -> State:
    """Every statement below ``node`` sees the loop's value increased by ``offset``."""
    if isinstance(offset, bool) or not isinstance(offset, (int, str)):
        raise ScheduleError(f"shift of loop {st.loop_label(state, node)}: the offset is an "
                            "integer or an affine expression of size parameters such as "
                            f"\"K - 1\", got {offset!r}")
    try:
        exprs = tuple((s, affine.shifted(state.program, e, offset)) for s, e in node.exprs)
    except ParseError:
        raise ScheduleError(f"shift of loop {st.loop_label(state, node)}: {offset!r} is not an "
                            "affine expression of the size parameters "
                            + ", ".join(state.program.params)) from None
    return state.with_root(replace_node(state.root, node.id, replace(node, exprs=exprs)))


def merge(state: State, first: LoopNode, second: LoopNode,
          name: str | None) -> tuple[State, LoopNode]:
    """One loop running ``first``'s body, then ``second``'s, at each value."""
    siblings = _siblings(state.root, first.id)
    ids = [c.id if isinstance(c, LoopNode) else None for c in siblings]
    if first.id == second.id or second.id not in ids:
        raise ScheduleError(f"merge: loops {st.loop_label(state, first)} and "
                            f"{st.loop_label(state, second)} are not siblings (children of the "
                            "same loop, or both outermost)")
    if ids.index(second.id) != ids.index(first.id) + 1:
        raise ScheduleError(f"merge: loop {st.loop_label(state, second)} does not directly follow "
                            f"loop {st.loop_label(state, first)}; merge adjacent loops, in program "
                            "order")
    merged = LoopNode(state.next_id, name or first.name, first.exprs + second.exprs,
                      first.children + second.children, first.kind, first.unroll_factor,
                      first.thread, first.annotations)
    root = replace_node(state.root, second.id, None)
    root = replace_node(root, first.id, merged)
    return state.with_root(root, state.next_id + 1), merged


def distribute(state: State, node: LoopNode, at: int,
               name: str | None) -> tuple[State, LoopNode, LoopNode]:
    """Two loops over the same values: the first runs ``node``'s children before position
    ``at``, the second the others (loop fission)."""
    if not 0 < at < len(node.children):
        raise ScheduleError(f"distribute of loop {st.loop_label(state, node)}: the split position "
                            f"is between 1 and {len(node.children) - 1} (it has "
                            f"{len(node.children)} children), got {at!r}")
    head, tail = node.children[:at], node.children[at:]

    def part(ident: int, kids: tuple, loop_name: str) -> LoopNode:
        under = {s for k in kids for s in statements_under(k)}
        return replace(node, id=ident, name=loop_name,
                       exprs=tuple((s, e) for s, e in node.exprs if s in under), children=kids)
    first = part(node.id, head, node.name)
    second = part(state.next_id, tail, name or node.name)
    root = replace_node(state.root, node.id, (first, second))
    new = state.with_root(root, state.next_id + 1)
    # Every statement keeps its loops and their expressions; only sequence positions change:
    # the loop's place among its siblings (or a new sequence where it had none) and the
    # children's positions below it. Two statements left in one part keep the relative order
    # of their positions; two put in different parts are now ordered by the parts.
    # ``verdict_cache.transfer_verdict`` says why the verdicts follow from these items alone.
    vd.inherit_sequence_edit(state, new)
    return new, first, second


def _siblings(root: Root, loop_id: int) -> tuple:
    """The children list that contains the loop ``loop_id``."""
    stack: list = [root]
    while stack:
        n = stack.pop()
        kids = n.children
        if any(isinstance(c, LoopNode) and c.id == loop_id for c in kids):
            return kids
        stack.extend(c for c in kids if isinstance(c, LoopNode))
    return ()
