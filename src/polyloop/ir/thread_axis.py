# SPDX-License-Identifier: Apache-2.0
"""GPU hardware axes a loop can be bound to: the block (work-group) and thread (work-item)
indices x, y and z.

A user spells an axis as CUDA does (``"blockIdx.x"``, ``"threadIdx.y"``) or as Loo.py tags do
(``"g.0"`` for a work-group index, ``"l.1"`` for a work-item index); ``parse_thread_axis``
turns either into a ``ThreadAxis`` once, where it was typed. Everything below the schedule
carries the enum.
"""
from __future__ import annotations

import enum

from ..errors import ScheduleError

AXIS_LETTERS = ("x", "y", "z")


class AxisLevel(enum.Enum):
    """Which hardware index: the block (OpenCL work-group) or the thread within it."""
    GROUP = "blockIdx"
    ITEM = "threadIdx"


class ThreadAxis(enum.Enum):
    """One GPU index a loop runs on.

    >>> ThreadAxis.THREAD_Y.level, ThreadAxis.THREAD_Y.dim, str(ThreadAxis.THREAD_Y)
    (<AxisLevel.ITEM: 'threadIdx'>, 1, 'threadIdx.y')
    """
    BLOCK_X = "blockIdx.x"
    BLOCK_Y = "blockIdx.y"
    BLOCK_Z = "blockIdx.z"
    THREAD_X = "threadIdx.x"
    THREAD_Y = "threadIdx.y"
    THREAD_Z = "threadIdx.z"

    @property
    def level(self) -> AxisLevel:
        return AxisLevel.GROUP if self.name.startswith("BLOCK") else AxisLevel.ITEM

    @property
    def dim(self) -> int:
        """0, 1 or 2 for x, y, z."""
        return AXIS_LETTERS.index(self.letter)

    @property
    def letter(self) -> str:
        return self.name[-1].lower()

    @property
    def is_group(self) -> bool:
        return self.level is AxisLevel.GROUP

    @property
    def is_item(self) -> bool:
        return self.level is AxisLevel.ITEM

    @classmethod
    def of(cls, level: AxisLevel, dim: int) -> "ThreadAxis":
        """The axis of ``level`` on dimension ``dim`` (0 = x)."""
        return cls(f"{level.value}.{AXIS_LETTERS[dim]}")

    def __str__(self) -> str:
        return self.value


VALID_SPELLINGS = tuple(a.value for a in ThreadAxis) + ("g.0", "g.1", "g.2", "l.0", "l.1", "l.2")


def parse_thread_axis(text: "str | ThreadAxis") -> ThreadAxis:
    """The axis a user named: ``"blockIdx.x"``, ``"threadIdx.z"``, ``"g.1"`` or ``"l.0"``.

    >>> parse_thread_axis("g.1"), parse_thread_axis("threadIdx.x")
    (<ThreadAxis.BLOCK_Y: 'blockIdx.y'>, <ThreadAxis.THREAD_X: 'threadIdx.x'>)
    """
    if isinstance(text, ThreadAxis):
        return text
    t = str(text).strip()
    head, _, tail = t.partition(".")
    if head in ("g", "l") and tail in ("0", "1", "2"):
        return ThreadAxis.of(AxisLevel.GROUP if head == "g" else AxisLevel.ITEM, int(tail))
    try:
        return ThreadAxis(t)
    except ValueError:
        raise ScheduleError(f"unknown thread axis {text!r}; valid: "
                            + ", ".join(VALID_SPELLINGS)) from None


__all__ = ["AxisLevel", "ThreadAxis", "parse_thread_axis", "VALID_SPELLINGS"]
