# SPDX-License-Identifier: Apache-2.0
"""``add_prefetch`` for kernels made by ``pl.make_kernel``: copy the part of an array a
work-group reads into local memory, with the loops reordered so that the copy runs once for
the whole group and its loops spread over the work-items.

>>> import polyloop as pl
>>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
>>> knl = pl.split_iname(knl, "i", 64, outer_tag="g.0", inner_tag="l.0")
>>> knl = add_prefetch(knl, "a", ["i_inner"])
>>> [(b.name, b.scope.value) for b in knl.schedule.program.buffers if b.name.startswith("a_")]
[('a_fetch', 'shared')]
"""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import ScheduleError, foreign_errors
from ..poly import affine
from ..poly.tree import LoopNode, statements_under
from .kernel_tags import Tag, TagKind, Work, apply_tag, derive, parse_tag, with_state, work_of
from .prefetch import prefetch
from .schedule import Schedule
from .trace import LoopHandle


@foreign_errors("add_prefetch", ScheduleError)
def add_prefetch(knl: Any, var_name: str, sweep_inames: Sequence[str] = (), *,
                 dim_arg_names: Sequence[str] | None = None, default_tag: str | None = "l.auto",
                 temporary_name: str | None = None) -> Any:
    """Copy the part of array ``var_name`` that the loops ``sweep_inames`` read into local
    memory ('shared' scope), once per iteration of the other loops around the reading
    instruction, and read the copy instead. Loops that are not swept move outside the
    work-item loops so that the whole work-group shares the copy; with ``default_tag="l.auto"``
    the copy loops are spread over the work-items. Barriers are placed when lowering.

    >>> knl = pl.add_prefetch(knl, "a", ["i_inner", "k_inner"])  # doctest: +SKIP
    """
    work = work_of(knl)
    program = work.sch.program
    if not program.has_buffer(var_name):
        raise ScheduleError(f"add_prefetch: the kernel has no array '{var_name}'")
    readers = [s.name for s in program.statements
               if any(ld.buffer == var_name for ld in s.reads())]
    if len(readers) != 1:
        what = ", ".join(readers) if readers else "no instruction"
        raise ScheduleError(f"add_prefetch: '{var_name}' is read by {what}; add_prefetch needs "
                            "exactly one reading instruction")
    consumer = readers[0]
    path = work.sch.state.stmt_path(consumer)
    missing = [x for x in sweep_inames if x not in [n.name for n in path]]
    if missing:
        raise ScheduleError(f"add_prefetch: {', '.join(missing)} are not loops around "
                            f"'{consumer}' (its loops: {', '.join(n.name for n in path)})")
    outer = _fetch_outer(work, consumer, set(sweep_inames))
    state, fname, ids = prefetch(work.sch.state, consumer, var_name, outer, name=temporary_name,
                                 dim_names=list(dim_arg_names) if dim_arg_names else None)
    work.sch = with_state(work.sch, state)
    if default_tag == "l.auto":
        _spread_over_items(work, consumer, ids)
    elif default_tag is not None:
        tag = parse_tag(default_tag)
        for i in ids:
            apply_tag(work, LoopHandle(i, state.loop(i).name), tag)  # type: ignore[union-attr]
    return derive(knl, work, "add_prefetch", (var_name, tuple(sweep_inames)),
                   {"dim_arg_names": tuple(dim_arg_names) if dim_arg_names else None,
                    "default_tag": default_tag, "temporary_name": temporary_name})


def _fetch_outer(work: Work, consumer: str, sweep: set[str]) -> list[LoopNode]:
    """Reorder the consumer's loops to (work-group loops, loops not swept, work-item loops,
    swept loops) and return the first two groups: the copy runs once per their iteration."""
    sch = work.sch
    path = sch.state.stmt_path(consumer)
    groups = [n for n in path if work.rank(n) == 0]
    if [n.id for n in path[:len(groups)]] != [n.id for n in groups]:
        raise ScheduleError("add_prefetch: work-group loops must be the outermost loops")
    rest, wanted, keep = _fetch_order(work, path[len(groups):], sweep)
    moved = next((k for k, (a, b) in enumerate(zip(rest, wanted)) if a.id != b.id), None)
    if moved is not None:
        path = _alone_below(work, consumer, len(groups) + moved)
        rest, wanted, keep = _fetch_order(work, path[len(groups):], sweep)
    if [n.id for n in wanted] != [n.id for n in rest]:
        try:
            sch.reorder(*[LoopHandle(n.id, n.name) for n in wanted])
        except ScheduleError as e:
            raise ScheduleError(f"add_prefetch: loops {', '.join(n.name for n in keep)} must "
                                "move outside the work-item and swept loops to fetch once for "
                                f"all of them: {e}") from None
    outer = groups + keep
    if not outer:
        raise ScheduleError("add_prefetch: every loop around the instruction is swept; split a "
                            "loop and keep its outer part out of sweep_inames")
    return [sch.state.loop(n.id) for n in outer]  # type: ignore[misc]


def _fetch_order(work: Work, rest: list[LoopNode], sweep: set[str]
                 ) -> tuple[list[LoopNode], list[LoopNode], list[LoopNode]]:
    keep = [n for n in rest if work.rank(n) == 2 and n.name not in sweep]
    items = [n for n in rest if work.rank(n) == 1]
    swept = [n for n in rest if work.rank(n) == 2 and n.name in sweep]
    return rest, keep + items + swept, keep


def _alone_below(work: Work, consumer: str, depth: int) -> list[LoopNode]:
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
            raise ScheduleError(f"add_prefetch: loop '{crowded.name}' holds other statements "
                                f"next to '{consumer}' and cannot be split around it: {e}"
                                ) from None
        if crowded.id in work.tags:
            work.tags[second.id] = work.tags[crowded.id]


def _spread_over_items(work: Work, consumer: str, ids: list[int]) -> None:
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
