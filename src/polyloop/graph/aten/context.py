# SPDX-License-Identifier: Apache-2.0
"""What a converter of an ATen call sees: its arguments (by position or keyword), its inputs as
graph values, its result's type from ``torch.export``'s metadata, and the graph builder."""
from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np

from ..builder import GraphBuilder
from ..ir import Dim, Op, TensorType, Value


def op_name(node) -> str:
    """The name of an exported call's operator without its namespace and overload
    (``"convolution"`` for ``aten.convolution.default``; ``"getitem"``)."""
    if node.target is operator.getitem:
        return "getitem"
    name = getattr(node.target, "__name__", str(node.target))
    return name.split(".")[0]


class Unsupported(Exception):
    """A converter's refusal: the call stays in the graph as a foreign operator (see
    ``graph.foreign``) with this reason."""


class Call:
    """One ATen call being converted: ``arg(k, name, default)`` reads argument ``k`` (or
    keyword ``name``), ``value(k)`` gives it as a graph value (a Python number or constant
    tensor becomes a constant), ``out`` is the type of result ``k`` (``out_type(k)``)."""

    def __init__(self, importer, node) -> None:
        self.importer, self.node = importer, node
        self.b: GraphBuilder = importer.b
        self.name = node.name
        self.overload = getattr(node.target, "_overloadname", "default")
        self._schema = [a.name for a in node.target._schema.arguments] \
            if hasattr(node.target, "_schema") else []

    def _raw(self, k: int, name: str | None, default: object) -> object:
        if k < len(self.node.args):
            return self.node.args[k]
        key = name or (self._schema[k] if k < len(self._schema) else None)
        return self.node.kwargs.get(key, default)

    def arg(self, k: int, name: str | None = None, default: object = None) -> object:
        """Argument ``k`` as a Python value (tensors as graph values or constant tensors)."""
        return self.importer.resolve(self._raw(k, name, default))

    def has(self, k: int, name: str | None = None) -> bool:
        return self._raw(k, name, None) is not None

    def value(self, k: int, name: str | None = None, *, dtype: str | None = None) -> Value:
        """Argument ``k`` as a graph value; a Python number becomes a constant of ``dtype``
        (by default the result's dtype)."""
        return self.importer.as_value(self.arg(k, name), dtype or self.out_type().dtype)

    def dims(self, k: int, name: str | None = None) -> tuple[Dim, ...]:
        """Argument ``k``, a list of sizes, each an int or a size parameter."""
        return tuple(self.importer.dim_of(d) for d in self.arg(k, name))

    def rank(self, k: int = 0) -> int:
        return len(self.value(k).type.shape)

    def out_type(self, k: int = 0) -> TensorType:
        return self.importer.result_types(self.node)[k]

    def emit(self, op: Op, *inputs: Value, name: str | None = None, **attrs: object) -> Value:
        return self.b.emit(op, *inputs, name=name or self.name, **attrs)

    def constant(self, data: object, dtype: str) -> Value:
        return self.b.constant(np.asarray(data, dtype=dtype), f"{self.name}_c")


Converter = Callable[[Call], object]


def normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < max(rank, 1):
        raise Unsupported(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return axis % max(rank, 1)
