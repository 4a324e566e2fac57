# SPDX-License-Identifier: Apache-2.0
"""What the steps of ``pl.auto_schedule`` share: loop handles, trial application of
primitives, perfectly nested chains, loop extents as the cache model sees them, and this
machine's cache sizes."""
from __future__ import annotations

from typing import Any

from .. import config
from ..errors import ScheduleError
from ..poly import affine, locality
from ..poly.tree import LoopNode
from ..util.machine import Machine, host_machine
from .schedule import Schedule
from .trace import LoopHandle


class AutoScheduleWarning(UserWarning):
    """A choice of isl's scheduler that ``auto_schedule`` could not express as primitives."""


def handle_of(node: LoopNode) -> LoopHandle:
    return LoopHandle(node.id, node.name)


def attempt(sch: Schedule, steps) -> tuple[Schedule, Any] | None:
    """Run ``steps(trial)`` on a copy: (the copy, what steps returned) if every primitive was
    accepted, else None (the schedule is left as it was)."""
    trial = sch.copy()
    try:
        result = steps(trial)
    except ScheduleError:
        return None
    return trial, result



def loop_chain(sch: Schedule, loop_id: int) -> list[LoopNode]:
    """The perfectly nested loops from ``loop_id`` down."""
    node = sch.state.loop(loop_id)
    assert node is not None
    out = [node]
    while len(out[-1].children) == 1 and isinstance(out[-1].children[0], LoopNode):
        out.append(out[-1].children[0])
    return out



def constant_extent(sch: Schedule, node: LoopNode) -> int | None:
    """The loop's constant trip count over all its statements, if it has one."""
    worst = 0
    for s, e in node.exprs:
        lo, hi = affine.value_range(sch.program, s, e)
        if lo is None or hi is None:
            return None
        worst = max(worst, hi - lo + 1)
    return worst


def model_extent(sch: Schedule, node: LoopNode) -> int | None:
    """The extent the cache model assumes: the constant one, a window loop's (short), or None
    (large)."""
    extent = constant_extent(sch, node)
    if extent is None and locality.is_window_loop(sch.program, node):
        return locality.WINDOW_EXTENT
    return extent



def machine() -> Machine:
    """The machine the model describes (``util.machine``: read once, cached)."""
    return host_machine(config.CONFIG.cc)


def cache_sizes() -> tuple[int, int]:
    """(L1 data, L2) bytes per core of this machine."""
    m = machine()
    return m.l1, m.l2
