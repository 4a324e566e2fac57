# SPDX-License-Identifier: Apache-2.0
"""Dead-code removal: bindings whose results nothing reads, and unused constants."""
from __future__ import annotations

from ..ir import Graph


def remove_dead_code(g: Graph) -> Graph:
    """Drop the bindings no output depends on, and the constants no binding reads.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (4,))
    >>> unused = b.emit(pl.graph.Op.EXP, x)
    >>> g = pl.graph.passes.remove_dead_code(b.build(b.emit(pl.graph.Op.RELU, x)))
    >>> len(g.bindings)
    1
    """
    live = {v.name for v in g.outputs}
    kept = []
    for b in reversed(g.bindings):
        if any(v.name in live for v in b.outputs):
            kept.append(b)
            live.update(v.name for v in b.inputs)
    constants = tuple(c for c in g.constants if c.value.name in live)
    return g.replace(bindings=tuple(reversed(kept)), constants=constants)
