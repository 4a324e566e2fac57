# SPDX-License-Identifier: Apache-2.0
"""One quantized layer written as ONNX Runtime's QDQ form and imported by ``from_onnx``.

The layer becomes a small ONNX model: ``QuantizeLinear`` of the float input (left out when the
input is already quantized), ``DequantizeLinear`` of it, of the int8 weights and of the int32
bias, the layer's node, its ReLU, ``QuantizeLinear`` of the result and ``DequantizeLinear`` back
to float32. ``from_onnx`` folds it as it folds any QDQ model (``onnx_import.qdq``): the same
checks decide whether the layer runs in integers, and the same converters emit the integer
kernel. The imported graph returns the float32 result and its quantized form.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import PolyloopError
from ..integer import IntegerConv, IntegerMatmul
from ..ir import Graph, Op
from ..onnx_import import from_onnx
from .layers import LayerForm
from .params import Quantization

_ONNX_TYPES = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6}
OPSET = 13     # QuantizeLinear / DequantizeLinear per axis


@dataclass(frozen=True, slots=True, eq=False)
class LayerQuantization:
    """The quantization chosen for one layer: its input, weights (with the int8 values),
    bias (with the int32 values, or None) and result."""

    x: Quantization
    w: Quantization
    weight: np.ndarray
    b: Quantization | None
    bias: np.ndarray | None
    y: Quantization


def _params(prefix: str, q: Quantization) -> dict[str, np.ndarray]:
    one = q.scale.size == 1
    return {f"{prefix}_scale": q.scale.reshape(()) if one else q.scale,
            f"{prefix}_zero": q.zero_point.reshape(()) if one else q.zero_point}


def _qdq(op: str, data: str, prefix: str, out: str, q: Quantization | None = None,
         axis: int | None = None):
    from onnx import helper
    extra = {"axis": axis} if axis is not None and q is not None and q.scale.size > 1 else {}
    return helper.make_node(op, [data, f"{prefix}_scale", f"{prefix}_zero"], [out],
                            name=f"{prefix}_{op}", **extra)


def _value_info(name: str, dtype: str, shape: tuple):
    from onnx import helper
    return helper.make_tensor_value_info(name, _ONNX_TYPES[dtype], list(shape))


def layer_model(layer: LayerForm, q: LayerQuantization, *, quantized_input: bool):
    """The ONNX QDQ model of ``layer`` (module docstring); its input is ``x`` (float32) or,
    with ``quantized_input``, ``xq`` (already quantized with ``q.x``); its outputs ``y``
    (float32), ``yq`` (quantized) and, from ``x``, ``xq``."""
    from onnx import helper, numpy_helper
    inits = {**_params("x", q.x), **_params("w", q.w), **_params("y", q.y),
             "w_q": q.weight}
    nodes = [] if quantized_input else [_qdq("QuantizeLinear", "x", "x", "xq")]
    nodes += [_qdq("DequantizeLinear", "xq", "x", "xd"),
              _qdq("DequantizeLinear", "w_q", "w", "wd", q.w, layer.channel_axis)]
    inputs = ["xd", "wd"]
    if q.b is not None:
        inits.update({**_params("b", q.b), "b_q": q.bias})
        nodes.append(_qdq("DequantizeLinear", "b_q", "b", "bd", q.b, 0))
        inputs.append("bd")
    nodes.append(helper.make_node(layer.kind.value, inputs, ["acc"], name="layer",
                                  **dict(layer.attrs)))
    last = "acc"
    if layer.relu:
        nodes.append(helper.make_node("Relu", ["acc"], ["act"], name="relu"))
        last = "act"
    nodes += [_qdq("QuantizeLinear", last, "y", "yq"), _qdq("DequantizeLinear", "yq", "y", "y")]
    x_type = ("xq", q.x.dtype) if quantized_input else ("x", "float32")
    shape = layer.out_shape
    outputs = [_value_info("y", "float32", shape), _value_info("yq", q.y.dtype, shape)]
    if not quantized_input:
        outputs.append(_value_info("xq", q.x.dtype, layer.x_shape))
    graph = helper.make_graph(
        nodes, "layer", [_value_info(*x_type, layer.x_shape)], outputs,
        [numpy_helper.from_array(np.ascontiguousarray(a), k) for k, a in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def integer_layer(layer: LayerForm, q: LayerQuantization, *, quantized_input: bool
                  ) -> Graph | None:
    """The graph of ``layer`` quantized as ``q``: inputs ``x`` (or ``xq``), outputs the
    float32 result, the quantized one and (from ``x``) the quantized input; None when it
    stays in float32: the fold leaves it (a layer the integer kernels do not take), or the
    integer converters refuse it (a product of more than three axes with a symbolic one)."""
    try:
        sub = from_onnx(layer_model(layer, q, quantized_input=quantized_input))
    except PolyloopError:
        return None
    folded = any(c.op is Op.TE and isinstance(c.attr("fn"), (IntegerConv, IntegerMatmul))
                 for c in sub.bindings)
    return sub if folded else None
