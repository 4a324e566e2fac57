# SPDX-License-Identifier: Apache-2.0
"""The layers ``pl.graph.quantize`` may run in integers, read off the float graph.

A layer is a convolution (``CONV2D``, ``CONV``), a ``LINEAR`` or a ``MATMUL`` of a float32
activation by constant float32 weights (and a constant bias), described as the ONNX node of
the same meaning (``Conv``, ``Gemm`` with ``transB``, ``MatMul``): the form the QDQ fold reads.
Its result is the call's own, or that of the one ``RELU`` that alone reads it (the quantized
result then has the ReLU's range, and the fold turns the ReLU into a max with the zero point,
as ONNX Runtime's tool removes a ReLU after a quantized layer).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ..ir import Call, Dim, Graph, Op, Value, uses
from ..kinds import UnaryFn


class LayerKind(enum.Enum):
    """The ONNX operator a layer is written as."""

    CONV = "Conv"
    GEMM = "Gemm"
    MATMUL = "MatMul"


@dataclass(frozen=True, slots=True)
class LayerForm:
    """What the QDQ form of a layer is written from (``fragment.layer_model``): the ONNX
    operator and its attributes, whether a ReLU follows it, the shapes of its input and of
    its result, and the weights' output-channel axis."""

    kind: LayerKind
    attrs: tuple[tuple[str, object], ...]
    relu: bool
    x_shape: tuple[Dim, ...]
    out_shape: tuple[Dim, ...]

    @property
    def channel_axis(self) -> int:
        """The weights' output-channel axis."""
        return 1 if self.kind is LayerKind.MATMUL else 0


@dataclass(frozen=True, slots=True, eq=False)
class Layer:
    """One quantizable call (module docstring). ``weight`` is laid out as the ONNX node reads
    it: Conv (K, C / groups, kh, kw), Gemm (N, K) transposed, MatMul (K, N); ``attrs`` are the
    node's attributes."""

    call: Call
    kind: LayerKind
    x: Value
    weight: np.ndarray
    bias: np.ndarray | None
    attrs: tuple[tuple[str, object], ...]
    relu: Call | None
    out: Value

    @property
    def channel_axis(self) -> int:
        """The weights' output-channel axis."""
        return self.form.channel_axis

    @property
    def form(self) -> LayerForm:
        return LayerForm(self.kind, self.attrs, self.relu is not None, self.x.type.shape,
                         self.out.type.shape)


def _is_relu(b: object) -> bool:
    return isinstance(b, Call) and (b.op is Op.RELU or (
        b.op is Op.UNARY and b.attr("fn") is UnaryFn.RELU))


def _conv_attrs(c: Call) -> tuple[tuple[str, object], ...]:
    if c.op is Op.CONV2D:
        pads = list(c.attr("padding"))
        return (("strides", list(c.attr("stride"))), ("pads", pads + pads),
                ("dilations", list(c.attr("dilation"))), ("group", int(c.attr("groups", 1))))
    return (("strides", list(c.attr("strides"))), ("pads", list(c.attr("pads"))),
            ("dilations", list(c.attr("dilations"))), ("group", int(c.attr("groups", 1))))


def _described(c: Call, data: dict[str, np.ndarray]) -> tuple | None:
    """(kind, weight, bias, attrs) of a quantizable call, else None."""
    x, w = c.inputs[0], c.inputs[1]
    weight = data.get(w.name)
    bias = data.get(c.inputs[2].name) if len(c.inputs) > 2 else None
    if x.name in data or x.type.dtype != "float32" or weight is None or \
            weight.dtype != np.float32 or (len(c.inputs) > 2 and (
                bias is None or bias.dtype != np.float32)):
        return None
    if c.op in (Op.CONV2D, Op.CONV):
        return LayerKind.CONV, weight, bias, _conv_attrs(c)
    if c.op is Op.LINEAR and len(x.type.shape) == 2:
        return LayerKind.GEMM, weight, bias, (("transB", 1),)
    if c.op is Op.LINEAR and bias is None:
        return LayerKind.MATMUL, np.ascontiguousarray(weight.T), None, ()
    if c.op is Op.MATMUL and weight.ndim == 2 and len(x.type.shape) >= 2:
        return LayerKind.MATMUL, weight, None, ()
    return None


def find_layers(g: Graph) -> list[Layer]:
    """The quantizable layers of ``g`` in dataflow order (module docstring)."""
    data = g.constant_data()
    count = uses(g)
    readers: dict[str, list] = {}
    for b in g.bindings:
        for v in b.inputs:
            readers.setdefault(v.name, []).append(b)
    layers = []
    for c in g.bindings:
        if not isinstance(c, Call) or c.op not in (Op.CONV2D, Op.CONV, Op.LINEAR, Op.MATMUL):
            continue
        found = _described(c, data)
        if found is None:
            continue
        y = c.outputs[0]
        after = readers.get(y.name, [])
        relu = after[0] if count.get(y.name) == 1 and len(after) == 1 and \
            _is_relu(after[0]) else None
        kind, weight, bias, attrs = found
        layers.append(Layer(c, kind, c.inputs[0], weight, bias, attrs, relu,
                            relu.outputs[0] if relu is not None else y))
    return layers


def split_linear_bias(g: Graph) -> Graph:
    """``g`` with each ``LINEAR`` of an activation of rank other than 2 and a constant bias
    written as the product then an ``ADD`` of the bias (as ONNX writes it: ``MatMul`` then
    ``Add``), so that the product alone is quantized."""
    data = g.constant_data()
    taken = {v.name for v in (*g.inputs, *(c.value for c in g.constants))} | \
        {v.name for b in g.bindings for v in b.outputs}
    bindings = []
    for c in g.bindings:
        if not (isinstance(c, Call) and c.op is Op.LINEAR and len(c.inputs) == 3 and
                len(c.inputs[0].type.shape) != 2 and c.inputs[1].name in data and
                c.inputs[2].name in data):
            bindings.append(c)
            continue
        y = c.outputs[0]
        name, k = f"{y.name}_product", 1
        while name in taken:
            name, k = f"{y.name}_product_{k}", k + 1
        taken.add(name)
        product = Value(name, y.type)
        bindings += [Call((product,), Op.LINEAR, c.inputs[:2], c.attrs),
                     Call((y,), Op.ADD, (product, c.inputs[2]))]
    return g.replace(bindings=tuple(bindings))
