# SPDX-License-Identifier: Apache-2.0
"""What a GPU target does with a loop nest the user did not bind: its outermost loop is split
into work-groups of ``threads`` work-items (``blockIdx.x`` x ``threadIdx.x``), when that loop
carries no dependence; otherwise the nest runs in one work-item, as written.

>>> import polyloop as pl
>>> A = pl.placeholder((100,), "float32", name="A")
>>> B = pl.compute((100,), lambda i: A[i] * 2.0, name="B")
>>> print(map_unbound_nests(pl.Schedule(B)))
for i_0 in bind(2, 'blockIdx.x'):
    for i_1 in bind(min(64, -(64 * i_0) + 100), 'threadIdx.x'):
        B[64 * i_0 + i_1] = A[64 * i_0 + i_1] * 2.0
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.loops import LoopKind
from ..poly.tree import LoopNode, Node
from .schedule import Schedule
from .trace import LoopHandle

DEFAULT_THREADS = 64


def map_unbound_nests(sch: Schedule, threads: int = DEFAULT_THREADS) -> Schedule:
    """A copy of ``sch`` in which every top-level nest without a bound loop has its outermost
    loop spread over work-groups and work-items (legality checked; refused nests stay serial)."""
    out = sch.copy()
    for node in list(out.state.root.children):
        if not isinstance(node, LoopNode) or _has_thread(node) or node.kind is not LoopKind.SERIAL:
            continue
        attempt = out.copy()
        try:
            outer, inner = attempt.split(LoopHandle(node.id, node.name), factor=threads)
            attempt.bind(outer, "blockIdx.x")
            attempt.bind(inner, "threadIdx.x")
        except ScheduleError:
            continue        # the loop carries a dependence (or is not splittable): one work-item
        out = attempt
    return out


def _has_thread(node: Node) -> bool:
    if isinstance(node, LoopNode):
        if node.kind is LoopKind.THREAD:
            return True
        return any(_has_thread(c) for c in node.children)
    return False
