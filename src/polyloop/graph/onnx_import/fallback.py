# SPDX-License-Identifier: Apache-2.0
"""ONNX operators without a converter, kept in the graph as foreign calls
(``graph.foreign``) when ONNX's shape inference gives every result a fixed shape: refused by
``pl.graph.build`` by default (every one listed), run by ``fallback="numpy"`` through ONNX's own
NumPy reference implementation (``onnx.reference.ReferenceEvaluator``) on a model of that one
node. There is no ``"torch"`` reference for an ONNX operator.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import PolyloopError
from ..foreign import Reference
from ..ir import TensorType, Value
from .node import ONNX_DTYPES


def result_types(proto, inferred: dict) -> tuple[TensorType, ...] | None:
    """The types ONNX's shape inference gives the node's results when every one is a tensor
    of a dtype the graph carries and a fixed, non-empty shape; else None (the node cannot
    run as a fallback: its results' shapes depend on the data or are unknown)."""
    types = []
    for name in proto.output:
        t = inferred.get(name) if name else None
        if t is None or t.WhichOneof("value") != "tensor_type" or \
                not t.tensor_type.HasField("shape"):
            return None
        dtype = ONNX_DTYPES.get(t.tensor_type.elem_type)
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in t.tensor_type.shape.dim]
        if dtype is None or any(d < 1 for d in dims):
            return None
        types.append(TensorType(tuple(dims), dtype))
    return tuple(types)


def foreign_node(b, proto, opset: int, inputs: list[Value], types: tuple[TensorType, ...],
                 where: str) -> tuple[Value, ...]:
    """Emit ``proto`` as a foreign call with a NumPy reference."""
    from onnx import helper
    text = helper.printable_node(proto, prefix="", subgraphs=False)
    ref = Reference(f"onnx.{proto.op_type}", f"onnx {text} (opset {opset})",
                    "no converter", where, {"numpy": _evaluator(proto, opset, inputs, types)})
    return b.emit_foreign(ref, tuple(inputs), types, name=proto.output[0] or None)


def _evaluator(proto, opset: int, inputs: list[Value], types: tuple[TensorType, ...]
               ) -> Callable[..., tuple[np.ndarray, ...]]:
    """A function of the node's (present) inputs running ONNX's reference on a one-node
    model; its failures are PolyloopErrors naming the node."""
    from onnx import helper
    codes = {v: k for k, v in ONNX_DTYPES.items()}
    names = [name for name in proto.input if name]
    graph = helper.make_graph(
        [proto], f"fallback_{proto.op_type}",
        [helper.make_tensor_value_info(name, codes[v.type.dtype], None)
         for name, v in zip(names, inputs)],
        [helper.make_tensor_value_info(name, codes[t.dtype], list(t.shape))
         for name, t in zip(proto.output, types)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    state: dict = {}

    def run(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        from onnx.reference import ReferenceEvaluator
        try:
            if "session" not in state:
                state["session"] = ReferenceEvaluator(model)
            outs = state["session"].run(None, dict(zip(names, arrays)))
        except Exception as e:   # the reference's own errors, of any kind
            raise PolyloopError(f"ONNX's reference implementation of {proto.op_type} "
                                f"('{proto.output[0]}') failed: {type(e).__name__}: {e}") \
                from None
        for out, t in zip(outs, types):
            if tuple(np.shape(out)) != t.shape:
                raise PolyloopError(f"ONNX's reference implementation of {proto.op_type} "
                                    f"('{proto.output[0]}') gave shape {np.shape(out)}, not "
                                    f"the inferred {list(t.shape)}")
        return tuple(outs)
    return run
