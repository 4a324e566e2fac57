# SPDX-License-Identifier: Apache-2.0
"""Dependences of a program in its default order (``pl.dependences`` is built on this)."""
from __future__ import annotations

from ..ir.program import Program
from .deps import Dependences, compute
from .order import original_tree
from .tree import flat_schedule


def default_order(program: Program) -> dict:
    """The flat schedule of the program as written (one nest per statement, or its nesting)."""
    return flat_schedule(program, original_tree(program)[0])


def program_dependences(program: Program) -> Dependences:
    """Dependences of a program in its own order (one loop nest per statement)."""
    return compute(program, default_order(program))
