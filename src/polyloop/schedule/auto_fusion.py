# SPDX-License-Identifier: Apache-2.0
"""Step 1 of ``pl.auto_schedule``: fusion of neighbouring loop nests with shifts, and loop
fission that gives a deep nest loops of its own (see ``schedule/auto.py``)."""
from __future__ import annotations

from typing import Any

from ..poly import fusion_shifts, locality
from ..poly.tree import LoopNode, loops, statements_under
from . import verdicts as vd
from .auto_common import attempt, cache_sizes, handle_of, loop_chain, model_extent
from .schedule import Schedule


def _spine(node: LoopNode, last: bool) -> list[LoopNode]:
    out = [node]
    while True:
        kids = out[-1].children
        nxt = kids[-1] if last else kids[0]
        if not isinstance(nxt, LoopNode):
            return out
        out.append(nxt)


def fuse_nests(sch: Schedule, fusion: str) -> tuple[Schedule, frozenset[int]]:
    """Fuse neighbouring nests at the top level, then inside every loop (e.g. the space loops
    inside a time loop). Also returns the loops fused to be tiled in time (sweeps inside a time
    loop), which fission must leave alone."""
    context = fusion_shifts.parameter_context(sch.program)
    in_time: set[int] = set()
    sch = _fuse_children(sch, None, fusion, context, in_time)
    for loop_id in [n.id for n in loops(sch.state.root)]:
        if sch.state.loop(loop_id) is not None:
            sch = _fuse_children(sch, loop_id, fusion, context, in_time)
    return sch, frozenset(in_time)


def _fuse_children(sch: Schedule, parent: int | None, fusion: str, context: Any,
                   in_time_ids: set[int]) -> Schedule:
    k = 0
    while True:
        node = sch.state.loop(parent) if parent is not None else None
        kids = node.children if node is not None else sch.state.root.children
        outer = sch.state.path(parent) if parent is not None else []
        if k + 1 >= len(kids):
            return sch
        a, b = kids[k], kids[k + 1]
        if not (isinstance(a, LoopNode) and isinstance(b, LoopNode)):
            k += 1
            continue
        first, second = _spine(a, last=True), _spine(b, last=False)
        shifts = fusion_shifts.merge_shifts(sch.program, sch.state.deps, outer, first, second,
                                        context)
        in_time = fusion == "smart" and _time_loop(sch, node)
        plain = fusion == "smart" and not in_time
        if in_time and any(not isinstance(sh.offset, int) for sh in shifts):
            k += 1      # a shift by a size: the sweeps would not overlap, only lose parallelism
            continue
        if in_time and min(len(first), len(second)) >= 2:
            # the sweeps' innermost loops stay apart: each a clean stride-1 loop (vectorized),
            # while the loops around them form the band tiled in time
            shifts = shifts[:min(len(first), len(second)) - 1]
        if plain and (has_deep_reuse(sch, a) or has_deep_reuse(sch, b)):
            k += 1      # fusing would keep the nest from becoming a band of its own (tiled)
            continue
        if plain:
            keep = 0
            while keep < len(shifts) and shifts[keep].offset == 0 and \
                    (keep > 0 or shifts[0].exact_zero) and \
                    fusion_shifts.conformable(sch.program, first[keep], second[keep], context):
                keep += 1
            shifts = shifts[:keep]
            if any(walks_columns(sch, n) and len(shifts) < len(loop_chain(sch, n.id))
                   for n in (a, b)):
                shifts = []     # its loops would no longer be one band: not interchanged
        merged = attempt(sch, lambda t: _merge(t, first, second, shifts)) if shifts else None
        if merged is None:
            k += 1
        else:
            sch = merged[0]     # then try the fused nest with the next one
            if in_time:
                in_time_ids.update(merged[1])


def _time_loop(sch: Schedule, node: LoopNode | None) -> bool:
    """Is ``node`` a loop that carries a dependence around nests that, fused with shifts into
    one band with it, would have reuse worth tiling (a time loop around stencil sweeps: it
    writes the same elements at every iteration, its variable indexes no written element)?
    Its body is fused with shifts, the way to tile in time."""
    if node is None or any(locality.indexes_written(sch.program, s, node.expr(s))
                           for s in statements_under(node)):
        return False
    return vd.check_parallel(sch.state, node) is not None and has_deep_reuse(sch, node)


def _merge(sch: Schedule, first: list[LoopNode], second: list[LoopNode],
           shifts: list[fusion_shifts.Shift]) -> list[int]:
    """Shift and merge the two spines level by level; the ids of the merged loops."""
    merged = []
    for a, b, sh in zip(first, second, shifts):
        if sh.offset != 0:
            sch.shift(handle_of(b), sh.offset)
        merged.append(sch.merge(handle_of(a), handle_of(b)).id)
    return merged


def distribute_deep_nests(sch: Schedule, keep: frozenset[int] = frozenset()) -> Schedule:
    """Loop fission where it makes a deep perfect band: a loop whose body holds, beside other
    statements or loops, a perfect nest that would form a band of at least 3 loops with the
    loops above it (the matmul pattern: an initialisation next to a reduction) is split so
    that nest gets loops of its own (innermost loops first, so that fission propagates up).
    The loops ``keep`` stay whole (sweeps fused to be tiled in time)."""
    changed = True
    while changed:
        changed = False
        for node in reversed(list(loops(sch.state.root))):
            if sch.state.loop(node.id) is None or len(node.children) < 2:
                continue
            depth = len(sch.state.path(node.id))
            if node.id in keep:
                continue    # sweeps fused for tiling in time stay fused
            for k, child in enumerate(node.children):
                if not isinstance(child, LoopNode) or depth + len(loop_chain(sch, child.id)) < 3 \
                        or not _nest_pays(sch, child):
                    continue
                cuts = [c for c in (k, k + 1) if 0 < c < len(node.children)]
                done = attempt(sch, lambda t: _split_out(t, node, cuts))  # noqa: B023
                if done is not None:
                    sch, changed = done[0], True
                    break
            if changed:
                break
    return sch


def _nest_pays(sch: Schedule, node: LoopNode) -> bool:
    """Would the loops around and inside ``node`` (down to its perfect nest's body), as one
    band, have reuse that only tiling captures (see ``locality.tiling_pays``)?"""
    band = sch.state.path(node.id) + loop_chain(sch, node.id)[1:]
    groups = locality.access_groups(sch.program, [], band)
    extents = [model_extent(sch, n) for n in band]
    return locality.tiling_pays(groups, extents, cache_sizes()[1] // 2)


def has_deep_reuse(sch: Schedule, top: LoopNode) -> bool:
    """Does a statement under ``top`` sit in 3 or more loops that, made one band, would need
    tiling to capture their reuse (a matrix product, not a matrix-vector product)?"""
    for leaf in loops(top):
        if any(isinstance(c, LoopNode) for c in leaf.children):
            continue
        band = sch.state.path(leaf.id)
        if len(band) >= 3:
            groups = locality.access_groups(sch.program, [], band)
            extents = [model_extent(sch, n) for n in band]
            if locality.tiling_pays(groups, extents, cache_sizes()[1] // 2):
                return True
    return False


def walks_columns(sch: Schedule, top: LoopNode) -> bool:
    """Is the nest at ``top`` a perfect nest whose innermost loop helps spatial locality less
    than a loop around it (``locality.locality_score``: a transposed matrix-vector product
    walking ``A[j, i]`` down its columns)? Fused with a neighbour at fewer levels than it has,
    its loops would no longer form one band, and the interchange that puts the stride-1 loop
    inside could not be made."""
    chain = loop_chain(sch, top.id)
    if len(chain) < 2 or any(isinstance(c, LoopNode) for c in chain[-1].children):
        return False
    inner = locality.locality_score(sch.program, chain[-1])
    return any(locality.locality_score(sch.program, n) > inner for n in chain[:-1])


def _split_out(sch: Schedule, node: LoopNode, cuts: list[int]) -> None:
    """Distribute ``node`` at the child positions ``cuts`` (ascending)."""
    loop = handle_of(node)
    for c in reversed(cuts):
        loop, _ = sch.distribute(loop, at=c)
