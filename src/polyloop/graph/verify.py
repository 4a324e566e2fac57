# SPDX-License-Identifier: Apache-2.0
"""The invariants of a graph, checked after import and after every pass of ``optimize``:
every value has one producer (an input, a constant or one binding) and is defined before it
is read (so there is no cycle); every read sees the type its producer gave it; a kernel's
parameters and results agree with its call; every static size fits the address space; and,
on an imported graph, every operator call's result type is what its shape rule says."""
from __future__ import annotations

import numpy as np

from ..errors import PolyloopError
from .ir import Call, Graph, KernelCall, Op, TensorType, Value
from .shapes import infer

# offsets are 64-bit; no address space holds more
MAX_BYTES = 1 << 62


def _size_ok(t: TensorType) -> bool:
    total = np.dtype(t.dtype).itemsize if t.dtype != "bfloat16" else 2
    for d in t.shape:
        if isinstance(d, int):
            if d < 1:
                return False
            total *= d
            if total > MAX_BYTES:
                return False
    return True


def verify(g: Graph, *, where: str = "", rules: bool = False) -> Graph:
    """Raise ``PolyloopError`` naming the value and the broken rule (see the module
    docstring); ``rules=True`` also re-derives each call's result type. Returns ``g``.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (2, 3))
    >>> g = verify(b.build(b.emit(pl.graph.Op.RELU, x)), rules=True)
    """
    at = f" ({where})" if where else ""
    types: dict[str, TensorType] = {}

    def define(v: Value, by: str) -> None:
        if v.name in types:
            raise PolyloopError(f"graph '{g.name}'{at}: value %{v.name} is written twice (again "
                                f"by {by}); each value has one producer")
        empty_constant = by == "a constant" and 0 in v.type.shape     # unread: known anyway
        if not (empty_constant or _size_ok(v.type)):
            raise PolyloopError(f"graph '{g.name}'{at}: %{v.name} has type {v.type}: a "
                                "dimension below 1, or more bytes than the address space")
        types[v.name] = v.type

    def read(v: Value, by: str) -> None:
        t = types.get(v.name)
        if t is not None and 0 in t.shape and by != "the graph's return":
            raise PolyloopError(f"graph '{g.name}'{at}: {by} reads %{v.name} of type {t}: "
                                "zero-size tensors are not supported")
        if t is None:
            raise PolyloopError(f"graph '{g.name}'{at}: {by} reads %{v.name} before any "
                                "producer writes it (an undefined value or a cycle)")
        if t != v.type:
            raise PolyloopError(f"graph '{g.name}'{at}: {by} reads %{v.name} as {v.type}, "
                                f"its producer made {t}")
    for v in g.inputs:
        define(v, "an input")
    for c in g.constants:
        define(c.value, "a constant")
        if tuple(c.data.shape) != c.value.type.shape or c.data.dtype.name != c.value.type.dtype:
            raise PolyloopError(f"graph '{g.name}'{at}: constant %{c.value.name} holds "
                                f"{c.data.dtype}{list(c.data.shape)}, typed {c.value.type}")
    for b in g.bindings:
        label = b.callee()
        for v in b.inputs:
            read(v, label)
        if isinstance(b, KernelCall):
            _kernel(g, b, at)
        # a foreign call is typed by its importer: no shape rule re-derives it
        if rules and isinstance(b, Call) and b.op not in (Op.TE, Op.FOREIGN):
            want = infer(b.op, tuple(v.type for v in b.inputs), dict(b.attrs))
            if want != b.outputs[0].type:
                raise PolyloopError(f"graph '{g.name}'{at}: {label} gives {want}, the graph "
                                    f"says {b.outputs[0].type} for %{b.outputs[0].name}")
        for v in b.outputs:
            define(v, label)
    for v in g.outputs:
        read(v, "the graph's return")
    return g


def _kernel(g: Graph, kc: KernelCall, at: str) -> None:
    k = kc.kernel
    if tuple(v.type for v in k.params) != tuple(v.type for v in kc.inputs) or \
            tuple(v.type for v in k.results) != tuple(v.type for v in kc.outputs):
        raise PolyloopError(f"graph '{g.name}'{at}: kernel {k.name}'s parameters or results "
                            "differ from its call's")
    inner = {v.name for v in k.params}
    for c in k.body:
        for v in c.inputs:
            if v.name not in inner:
                raise PolyloopError(f"graph '{g.name}'{at}: kernel {k.name} reads %{v.name}, "
                                    "neither a parameter nor computed before in the kernel")
        inner.update(v.name for v in c.outputs)
    missing = [v.name for v in k.results if v.name not in inner]
    if missing:
        raise PolyloopError(f"graph '{g.name}'{at}: kernel {k.name} returns %{missing[0]}, "
                            "which it does not compute")
