# SPDX-License-Identifier: Apache-2.0
"""Fresh names for what primitives add (buffers, statements, loops): the first of ``base``,
``base_1``, ``base_2``, ... that nothing in use already has."""
from __future__ import annotations

from collections.abc import Collection, Sequence

from ..ir.program import Program


def unique_name(base: str, taken: Collection[str], suffixes: Sequence[str] = ("",)) -> str:
    """``base`` (or ``base_1``, ...) such that no name in ``taken`` is it followed by any of
    ``suffixes``.

    >>> unique_name("B_rf", {"B_rf", "B_rf_1_init"}, ("", "_init"))
    'B_rf_2'
    """
    name, k = base, 1
    while any(name + x in taken for x in suffixes):
        name, k = f"{base}_{k}", k + 1
    return name


def fresh_name(program: Program, base: str, suffixes: Sequence[str] = ("",)) -> str:
    """``unique_name`` among the buffers and statements of ``program``."""
    taken = {b.name for b in program.buffers} | {s.name for s in program.statements}
    return unique_name(base, taken, suffixes)
