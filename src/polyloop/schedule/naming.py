# SPDX-License-Identifier: Apache-2.0
"""Fresh names for what primitives add (buffers, statements): the first of ``base``,
``base_1``, ``base_2``, ... that no buffer or statement of the program has."""
from __future__ import annotations

from collections.abc import Sequence

from ..ir.program import Program
from ..util.names import unique_name


def fresh_name(program: Program, base: str, suffixes: Sequence[str] = ("",)) -> str:
    """``unique_name`` among the buffers and statements of ``program``."""
    taken = {b.name for b in program.buffers} | {s.name for s in program.statements}
    return unique_name(base, taken, suffixes)
