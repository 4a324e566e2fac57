# SPDX-License-Identifier: Apache-2.0
"""What a converter sees of one ONNX node: its inputs (graph values, constants or shapes that
hold size parameters), its attributes (each read is recorded: an attribute no converter
read is refused by name, never ignored), its opset, and the builder to emit calls with."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import PolyloopError
from ..builder import GraphBuilder
from ..ir import Dim, Op, Value
from ..kinds import ReduceFn
from ..torch_sizes import SizeNames

# ONNX tensor element types (TensorProto.DataType) the graph carries, as NumPy dtype names.
ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64",
               9: "bool", 10: "float16", 11: "float64"}
ONNX_TYPE_NAMES = {0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16",
                   6: "INT32", 7: "INT64", 8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE",
                   12: "UINT32", 13: "UINT64", 14: "COMPLEX64", 15: "COMPLEX128",
                   16: "BFLOAT16"}


class ValueNeeded(PolyloopError):
    """A graph input decides a shape (a Reshape's target, a Slice's bounds...): the model
    compiles only once its value is known (``from_onnx(..., values={name: array})``)."""

    def __init__(self, message: str, names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.names = names


@dataclass(frozen=True, slots=True)
class Shape:
    """A 1-D int64 value computed from shapes, some of whose entries are size parameters
    (``Shape`` of a tensor with a symbolic batch): kept as dimensions until it decides a
    shape."""

    dims: tuple[Dim, ...]
    scalar: bool = False      # a 0-d value (one dimension, picked by a Gather)


Entry = Value | Shape


def onnx_dtype(elem_type: int, what: str) -> str:
    """The graph dtype of an ONNX element type, else an error naming ``what``."""
    if elem_type not in ONNX_DTYPES:
        name = ONNX_TYPE_NAMES.get(elem_type, f"type {elem_type}")
        raise PolyloopError(f"{what} has ONNX element type {name}, which polyloop does not "
                            f"carry; supported: {', '.join(sorted(set(ONNX_DTYPES.values())))}")
    return ONNX_DTYPES[elem_type]


class Node:
    """One ONNX node under conversion (see the module docstring)."""

    def __init__(self, proto, opset: int, b: GraphBuilder, env: dict[str, Entry],
                 sources: dict[str, frozenset[str]], sizes: SizeNames) -> None:
        from onnx import helper
        self.proto = proto
        self.sizes = sizes      # the size parameters and the sizes derived from them
        self.op_type: str = proto.op_type
        self.opset = opset
        self.b = b
        self._env = env
        self._sources = sources
        self._attrs = {a.name: a for a in proto.attribute}
        self._helper = helper
        self.read: set[str] = set()

    # inputs --------------------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.proto.input)

    def has(self, k: int) -> bool:
        return k < len(self.proto.input) and self.proto.input[k] != ""

    def entry(self, k: int) -> Entry:
        if not self.has(k):
            raise PolyloopError(f"input {k} is required")
        return self._env[self.proto.input[k]]

    def value(self, k: int) -> Value:
        """Input ``k`` as a graph value (a shape of size parameters becomes a tensor computed
        at run time)."""
        e = self.entry(k)
        return self._tensor_of(e) if isinstance(e, Shape) else e

    def _tensor_of(self, e: Shape) -> Value:
        """The int64 tensor of a shape holding size parameters: each size counted at run
        time (the sum of that many ones)."""
        parts = []
        for d in e.dims:
            one = self.b.constant(np.array([d if isinstance(d, int) else 1], "int64"),
                                  f"{self.hint}_size")
            if isinstance(d, str):
                ones = self.b.emit(Op.BROADCAST_TO, one, shape=(d,), name=f"{self.hint}_ones")
                one = self.b.emit(Op.REDUCE, ones, fn=ReduceFn.SUM, axes=(0,), keepdims=True,
                                  name=f"{self.hint}_{d}")
            parts.append(one)
        v = parts[0] if len(parts) == 1 else self.b.emit(Op.CONCAT, *parts, axis=0,
                                                          name=f"{self.hint}_shape")
        return self.b.emit(Op.RESHAPE, v, shape=(), name=f"{self.hint}_shape") if e.scalar \
            else v

    def values(self) -> list[Value]:
        return [self.value(k) for k in range(self.n_inputs) if self.has(k)]

    def array(self, k: int, what: str = "") -> np.ndarray:
        """Input ``k`` as a constant array; a graph input here makes the model need its
        value at build time (``ValueNeeded``)."""
        e = self.entry(k)
        name = self.proto.input[k]
        label = what or f"input {k}"
        if isinstance(e, Shape):
            if all(isinstance(d, int) for d in e.dims):
                return np.array(e.dims, "int64")
            raise PolyloopError(f"{label} ('{name}') depends on the size parameters "
                                f"{[d for d in e.dims if isinstance(d, str)]}; only constant "
                                "values are supported here")
        data = self.b.data(e)
        if data is not None:
            return data
        sources = self._sources.get(name)
        if sources:
            raise ValueNeeded(f"{label} ('{name}') decides a shape and is computed from the "
                              f"graph input(s) {', '.join(sorted(sources))}; give their values "
                              "at import (from_onnx(..., values={...}))", tuple(sorted(sources)))
        raise PolyloopError(f"{label} ('{name}') is computed at run time from the data; "
                            "polyloop needs it as a constant (its value decides a shape or "
                            "a branch)")

    def optional_array(self, k: int, what: str = "") -> np.ndarray | None:
        return self.array(k, what) if self.has(k) else None

    def dims(self, k: int, what: str = "") -> tuple[Dim, ...]:
        """Input ``k`` as a list of dimensions: a constant 1-D int64 tensor or a ``Shape``."""
        e = self.entry(k)
        if isinstance(e, Shape):
            return e.dims
        return tuple(int(v) for v in self.array(k, what).reshape(-1))

    def ints(self, k: int, what: str = "") -> list[int]:
        return [int(v) for v in self.array(k, what).reshape(-1)]

    # attributes ----------------------------------------------------------------------------
    def attr(self, key: str, default: object = None) -> object:
        """The attribute's value (lists as lists, strings decoded), else ``default``."""
        self.read.add(key)
        a = self._attrs.get(key)
        if a is None:
            return default
        if a.ref_attr_name:
            raise PolyloopError(f"attribute '{key}' refers to a function attribute outside a "
                                "function body")
        v = self._helper.get_attribute_value(a)
        if isinstance(v, bytes):
            return v.decode()
        if isinstance(v, list):
            return [x.decode() if isinstance(x, bytes) else x for x in v]
        return v

    def flag(self, key: str, default: int) -> bool:
        """A 0/1 attribute as a bool; any other value is refused (runtimes read such a value
        differently: never guess)."""
        v = self.attr(key, default)
        if v not in (0, 1):
            raise PolyloopError(f"attribute {key}={v!r} must be 0 or 1")
        return bool(v)

    def has_attr(self, key: str) -> bool:
        return key in self._attrs

    def unread_attributes(self) -> list[str]:
        return [k for k in self._attrs if k not in self.read]

    # outputs and emitting ------------------------------------------------------------------
    @property
    def n_outputs(self) -> int:
        return len(self.proto.output)

    def wants(self, k: int) -> bool:
        """Whether output ``k`` is present (optional outputs have empty names)."""
        return k < len(self.proto.output) and self.proto.output[k] != ""

    @property
    def hint(self) -> str:
        return self.proto.output[0] if self.proto.output else self.op_type.lower()

    def emit(self, op: Op, *inputs: Value, **attrs: object) -> Value:
        return self.b.emit(op, *inputs, name=self.hint, **attrs)

    def const(self, data: object, dtype: str | None = None) -> Value:
        arr = np.asarray(data) if dtype is None else np.asarray(data, dtype)
        return self.b.constant(arr, f"{self.hint}_c")
