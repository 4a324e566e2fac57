# SPDX-License-Identifier: Apache-2.0
"""A small graph (one imported quantized layer) copied into a larger one, its values renamed."""
from __future__ import annotations

from ...errors import PolyloopError
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
    values: dict[str, Value] = {}
    for mine, v in bound:
        if mine.type != v.type:
            raise PolyloopError(f"quantize: the quantized layer's %{mine.name} is {mine.type}, "
                                f"the graph's %{v.name} is {v.type}")
        values[mine.name] = v

    def rename(v: Value) -> Value:
        if v.name not in values:
            values[v.name] = Value(names.fresh(f"{prefix}_{v.name}"), v.type)
        return values[v.name]
    constants = [Constant(rename(c.value), c.data) for c in sub.constants]
    calls = []
    for b in sub.bindings:
        if not isinstance(b, Call):
            raise PolyloopError(f"quantize: the quantized layer holds {b.callee()}; only "
                                "operator calls are expected")
        calls.append(Call(tuple(rename(v) for v in b.outputs), b.op,
                          tuple(rename(v) for v in b.inputs), b.attrs))
    return constants, calls, [rename(v) for v in sub.outputs]
