# SPDX-License-Identifier: Apache-2.0
"""Explicit barriers written by a user (``... lbarrier`` in a kernel's instructions).

In a Program an explicit barrier is a statement that writes one element of a buffer of its
own per iteration (so it has no dependence with anything and keeps its place in the loop
nest through every transformation); lowering turns it into a ``Barrier`` node on GPU targets
and drops it on C, where instructions already run in order. The buffer's name says the scope.

>>> name = barrier_buffer(BarrierScope.LOCAL, "b")
>>> name, barrier_scope(name), barrier_scope("a")
('__barrier_local_b', <BarrierScope.LOCAL: 'local'>, None)
"""
from __future__ import annotations

import enum


class BarrierScope(enum.Enum):
    """What a barrier orders: the work-items of a group (local) or the whole launch (global)."""
    LOCAL = "local"
    GLOBAL = "global"


_PREFIX = "__barrier_"


def barrier_buffer(scope: BarrierScope, statement: str) -> str:
    """The name of the buffer an explicit barrier statement writes."""
    return f"{_PREFIX}{scope.value}_{statement}"


def barrier_scope(buffer: str) -> BarrierScope | None:
    """The scope of an explicit barrier's buffer; None for any other buffer."""
    for scope in BarrierScope:
        if buffer.startswith(f"{_PREFIX}{scope.value}_"):
            return scope
    return None


__all__ = ["BarrierScope", "barrier_buffer", "barrier_scope"]
