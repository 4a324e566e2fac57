# SPDX-License-Identifier: Apache-2.0
"""A small graph (one imported quantized layer) copied into a larger one, its values renamed."""
from __future__ import annotations

from ..builder import copy_graph
from ..ir import Call, Constant, Graph, Value


class Names:
    """The value names a graph uses, and fresh ones beside them."""

    def __init__(self, g: Graph) -> None:
        self.taken = {v.name for v in (*g.inputs, *(c.value for c in g.constants))} | \
            {v.name for b in g.bindings for v in b.outputs}

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name


def splice(sub: Graph, bound: list[tuple[Value, Value]], prefix: str, names: Names
           ) -> tuple[list[Constant], list[Call], list[Value]]:
    """(the constants and calls of ``sub``, its outputs) with ``sub``'s values renamed
    ``prefix_<name>``, except each value of ``sub`` paired in ``bound`` (its inputs, and
    outputs that must keep a name of the larger graph) with a value of the larger graph: that
    value replaces it, and must have the same type."""
    return copy_graph(sub, bound, lambda v: names.fresh(f"{prefix}_{v}"),
                      "quantize: the quantized layer")
