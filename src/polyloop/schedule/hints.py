# SPDX-License-Identifier: Apache-2.0
"""The legal alternative to a refused primitive, for its error message: the loops where
compute_at would be legal, the skew that makes an interchange or a tiling legal. Each
candidate is tried on the (immutable) state and verified exactly; nothing here changes it."""
from __future__ import annotations

from typing import Callable

from ..errors import ScheduleError
from ..poly.tree import LoopNode
from . import blocks, loops
from .state import State
from .verdicts import verify

SKEWS = (1, 2, 3, 4)


def _legal(make: Callable[[], State]) -> bool:
    try:
        verify(make(), "hint")
    except ScheduleError:
        return False
    return True


def compute_at_loops(state: State, block: str, loop: LoopNode, *, reverse: bool) -> list[str]:
    """Names of the loops around ``loop`` (outermost first) where the move would be legal."""
    move = blocks.reverse_compute_at if reverse else blocks.compute_at
    return [anc.name for anc in state.path(loop.id)[:-1]
            if _legal(lambda anc=anc: move(state, block, anc))]


def compute_at_hint(state: State, block: str, loop: LoopNode, *, reverse: bool) -> str:
    primitive = "reverse_compute_at" if reverse else "compute_at"
    legal = compute_at_loops(state, block, loop, reverse=reverse)
    if legal:
        return (f" {primitive} of '{block}' is legal at loop "
                + ", ".join(f"'{n}'" for n in legal))
    return f" {primitive} of '{block}' is legal at no loop around '{loop.name}'"


def skew_for_tile(state: State, a: LoopNode, b: LoopNode, ta: int, tb: int) -> int | None:
    """The smallest skew of ``b`` by ``a`` after which tiling (a, b) is legal."""
    def tiled(f: int) -> State:
        s = loops.skew(state, a, b, f)
        verify(s, "skew")
        s, (a0, a1) = loops.split(s, s.loop(a.id), [None, ta], None)  # type: ignore[arg-type]
        s, (b0, b1) = loops.split(s, s.loop(b.id), [None, tb], None)  # type: ignore[arg-type]
        return loops.reorder(s, [a0, b0, a1, b1])
    return next((f for f in SKEWS if _legal(lambda f=f: tiled(f))), None)


def skew_for_interchange(state: State, nodes: list[LoopNode]) -> tuple[str, str, int] | None:
    """For a refused interchange of two loops, the skew (outer, inner, factor) that makes it
    legal."""
    if len(nodes) != 2:
        return None
    ids = [p.id for p in state.path(nodes[0].id)]
    inner, outer = nodes if nodes[1].id in ids else nodes[::-1]

    def swapped(f: int) -> State:
        s = loops.skew(state, outer, inner, f)
        verify(s, "skew")
        return loops.reorder(s, [s.loop(n.id) for n in nodes])  # type: ignore[misc]
    f = next((f for f in SKEWS if _legal(lambda f=f: swapped(f))), None)
    return None if f is None else (outer.name, inner.name, f)
