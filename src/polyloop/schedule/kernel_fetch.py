# SPDX-License-Identifier: Apache-2.0
"""Where a kernel's copy loops go (``pl.add_prefetch``, ``pl.precompute``): the consumer's loops
reordered so that the ones not swept are outermost, and the copy loops spread over the
work-items of the group."""
from __future__ import annotations

from ..errors import ScheduleError
from ..poly import affine
from ..poly.tree import LoopNode, statements_under
from .kernel_tags import Tag, TagKind, Work, apply_tag
from .schedule import Schedule
from .trace import LoopHandle

__all__ = ["fetch_outer", "spread_over_items"]


def fetch_outer(work: Work, consumer: str, sweep: set[str], primitive: str = "add_prefetch"
                ) -> list[LoopNode]:
    """Reorder the consumer's loops to (work-group loops, loops not swept, work-item loops,
    swept loops) and return the first two groups: the copy runs once per their iteration."""
    sch = work.sch
    path = sch.state.stmt_path(consumer)
    groups = [n for n in path if work.rank(n) == 0]
    if [n.id for n in path[:len(groups)]] != [n.id for n in groups]:
        raise ScheduleError(f"{primitive}: work-group loops must be the outermost loops")
    rest, wanted, keep = _fetch_order(work, path[len(groups):], sweep)
    moved = next((k for k, (a, b) in enumerate(zip(rest, wanted)) if a.id != b.id), None)
    if moved is not None:
        path = _alone_below(work, consumer, len(groups) + moved, primitive)
        rest, wanted, keep = _fetch_order(work, path[len(groups):], sweep)
    if [n.id for n in wanted] != [n.id for n in rest]:
        try:
            sch.reorder(*[LoopHandle(n.id, n.name) for n in wanted])
        except ScheduleError as e:
            raise ScheduleError(f"{primitive}: loops {', '.join(n.name for n in keep)} must "
                                "move outside the work-item and swept loops to fetch once for "
                                f"all of them: {e}") from None
    outer = groups + keep
    if not outer:
        raise ScheduleError(f"{primitive}: every loop around the instruction is swept; split a "
                            "loop and keep its outer part out of sweep_inames")
    return [sch.state.loop(n.id) for n in outer]  # type: ignore[misc]


def _fetch_order(work: Work, rest: list[LoopNode], sweep: set[str]
                 ) -> tuple[list[LoopNode], list[LoopNode], list[LoopNode]]:
    keep = [n for n in rest if work.rank(n) == 2 and n.name not in sweep]
    items = [n for n in rest if work.rank(n) == 1]
    swept = [n for n in rest if work.rank(n) == 2 and n.name in sweep]
    return rest, keep + items + swept, keep


def _alone_below(work: Work, consumer: str, depth: int, primitive: str) -> list[LoopNode]:
    """Distribute the consumer's loops below the first ``depth`` (innermost first) until each
    holds only the consumer's nest, so that they can be reordered: a reduction's
    initialization and store (``acc = 0``, ``c[i, j] = acc``) get work-item loops of their
    own. Each part keeps the loop's tag. Returns the consumer's new loop path."""
    sch = work.sch
    while True:
        path = sch.state.stmt_path(consumer)
        crowded = next((n for n in reversed(path[depth:-1]) if len(n.children) > 1), None)
        if crowded is None:
            return path
        k = next(k for k, c in enumerate(crowded.children)
                 if consumer in statements_under(c))
        try:
            _, second = sch.distribute(LoopHandle(crowded.id, crowded.name), max(k, 1))
        except ScheduleError as e:
            raise ScheduleError(f"{primitive}: loop '{crowded.name}' holds other statements "
                                f"next to '{consumer}' and cannot be split around it: {e}"
                                ) from None
        if crowded.id in work.tags:
            work.tags[second.id] = work.tags[crowded.id]


def spread_over_items(work: Work, consumer: str, ids: list[int]) -> None:
    """Tag the copy loops, innermost first, with the work-item axes the consumer uses,
    splitting a loop longer than the work-group on its axis."""
    sch = work.sch
    sizes: dict[int, int] = {}
    for n in sch.state.stmt_path(consumer):
        tag = work.tags.get(n.id)
        if tag is not None and tag.kind is TagKind.LOCAL:
            lo, hi = _loop_range(sch, n)
            if lo is not None and hi is not None:
                sizes[tag.axis] = max(sizes.get(tag.axis, 0), hi - lo + 1)
    for loop_id, axis in zip(reversed(ids), sorted(sizes)):
        node = sch.state.loop(loop_id)
        assert node is not None
        lo, hi = _loop_range(sch, node)
        if lo is None or hi is None:
            continue
        h = LoopHandle(node.id, node.name)
        if hi - lo + 1 > sizes[axis]:
            h = sch.split(h, [None, sizes[axis]],
                          names=[f"{node.name}_outer", f"{node.name}_inner"])[1]
        apply_tag(work, h, Tag(TagKind.LOCAL, axis))


def _loop_range(sch: Schedule, node: LoopNode) -> tuple[int | None, int | None]:
    los, his = zip(*(affine.value_range(sch.program, s, e) for s, e in node.exprs))
    if None in los or None in his:
        return None, None
    return min(los), max(his)
