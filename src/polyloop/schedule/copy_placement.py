# SPDX-License-Identifier: Apache-2.0
"""A copy into on-chip memory that ``compute_at`` placed once for several iterations of a loop,
when ``bind`` makes that loop a GPU index: each work-group needs its own tile, so the copy is
placed again, once per iteration of the loops around it (TVM's ``compute_at`` places a copy
so from the start)."""
from __future__ import annotations

from ..ir.loops import LoopKind
from ..ir.program import MemScope
from ..poly import deps as deps_mod
from ..poly.tree import LoopNode, common_loops
from . import blocks
from . import recompute as rc
from .state import State

ON_CHIP = (MemScope.SHARED, MemScope.LOCAL)


def placement(state: State, copy: str, consumer: str) -> LoopNode | None:
    """The innermost loop around both a copy and its consumer: where compute_at put it."""
    common = common_loops([state.stmt_path(copy), state.stmt_path(consumer)])
    return common[-1] if common else None


def fresh_nest(state: State, copy: str, at: LoopNode) -> bool:
    """Are the copy's loops below ``at`` still as compute_at made them (serial, one per
    iterator)? Copying per iteration builds new ones: what was done to them would be lost."""
    path = state.stmt_path(copy)
    own = path[[n.id for n in path].index(at.id) + 1:]
    return len(own) == len(state.program.statement(copy).iters) and \
        all(n.kind is LoopKind.SERIAL and not n.annotations for n in own)


def changed_copy(state: State, dep: deps_mod.Dependence | None) -> bool:
    """Is ``dep`` the read of a copy that serves several iterations and whose own loops were
    changed since compute_at placed it (so it cannot be placed again per iteration)?"""
    at = placement(state, dep.source, dep.sink) if dep is not None else None
    return at is not None and blocks.is_copy_statement(state, dep.source) and \
        not fresh_nest(state, dep.source, at)


def copy_per_iteration(state: State, dep: deps_mod.Dependence | None) -> State | None:
    """``state`` with the on-chip copy that ``dep`` reads from placed once per iteration of
    the loops around it, or None when ``dep`` is no such copy's read, its loops were changed,
    or it sits under work-item loops (a copy per work-item is not built yet). Raises
    ScheduleError where the copy cannot be placed per iteration."""
    if dep is None or not blocks.is_copy_statement(state, dep.source) or \
            state.program.buffer(dep.buffer).scope not in ON_CHIP:
        return None
    at = placement(state, dep.source, dep.sink)
    if at is None or not fresh_nest(state, dep.source, at) or rc.under_work_items(state, at):
        return None
    block = state.program.statement(dep.source).block_name
    return rc.compute_at_recompute(state, block, at)
