# SPDX-License-Identifier: Apache-2.0
"""QDQ models (ONNX Runtime's ``QuantFormat.QDQ``) folded into integer operators.

A ``Conv``, ``MatMul`` or ``Gemm`` whose input is a ``DequantizeLinear`` of a uint8/int8
activation (one scale, one zero point), whose weights are a ``DequantizeLinear`` of a constant
int8/uint8 tensor (per tensor, or per output channel), whose bias (if any) is constant (taken
as int32 at the input scale times the weight scale: ONNX Runtime's quantized bias as it is,
another one rounded to that scale), and whose only reader is a ``QuantizeLinear`` (directly,
or through one ``Relu``) becomes the ``QLinearConv`` / ``QLinearMatMul`` of the same meaning (a ``Relu`` becomes ``Max`` with the
output zero point), computed in integers (``convert_quant``). What does not match keeps its
float32 form: every ``QuantizeLinear`` / ``DequantizeLinear`` left converts as ONNX defines it.

Between the integer layers, a ``MaxPool``, ``Relu``, ``Concat``, ``Reshape``, ``Flatten``,
``Transpose``, ``Squeeze`` or ``Unsqueeze`` whose inputs are dequantized and whose output is
quantized again, all with one scale and zero point, runs on the 8-bit tensors (exactly, as
ONNX Runtime drops such pairs: these operators move or select elements, the maximum commutes
with the increasing dequantization, a ``Relu`` is the maximum with the zero point; an
``AveragePool`` rounds, and stays in float32), and an ``Add`` of two dequantized
tensors read by a ``QuantizeLinear`` (directly or through a ``Relu``), all per tensor,
becomes ``QLinearAdd`` (dequantize both, add, quantize: ``convert_quant``), so that 8-bit
tensors flow from one integer kernel to the next.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ops.quantized import accumulation_limit

_EIGHT_BIT = ("uint8", "int8")


@dataclass(frozen=True, slots=True)
class _Dq:
    """A DequantizeLinear whose scale and zero point are constants."""
    data: str
    scale: np.ndarray
    zero: np.ndarray
    axis: int


class _Model:
    def __init__(self, model) -> None:
        from onnx import numpy_helper
        g = model.graph
        self.inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
        self.producer = {o: node for node in g.node for o in node.output}
        self.uses: dict[str, int] = {}
        for node in g.node:
            for i in node.input:
                self.uses[i] = self.uses.get(i, 0) + 1
        for o in g.output:
            self.uses[o.name] = self.uses.get(o.name, 0) + 2

    def reader(self, name: str, nodes) -> object | None:
        """The one node reading ``name`` (not a graph output), else None."""
        if self.uses.get(name) != 1:
            return None
        return next((n for n in nodes if name in n.input), None)

    def dq(self, name: str) -> _Dq | None:
        node = self.producer.get(name)
        while node is not None and node.op_type == "Identity":     # a shared initializer
            node = self.producer.get(node.input[0])
        if node is None or node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx"):
            return None
        attrs = {a.name: a for a in node.attribute}
        if set(attrs) - {"axis"} or len(node.input) < 3 or \
                any(i not in self.inits for i in node.input[1:3]):
            return None
        axis = attrs["axis"].i if "axis" in attrs else 1
        return _Dq(node.input[0], self.inits[node.input[1]].reshape(-1),
                   self.inits[node.input[2]].reshape(-1), axis)


def _spread(dtype: str, zero: np.ndarray) -> int:
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    z = zero.astype(np.int64)
    return int(max((z - lo).max(), (hi - z).max())) if len(set(z.tolist())) == 1 else 255


def _fits(terms: int, x: _Dq, w: _Dq) -> bool:
    """The int8 recipe sums ``terms`` products without int32 overflow (as ``polyloop.ops``
    checks); a longer reduction stays in float32."""
    return terms <= accumulation_limit(_spread(str(x.zero.dtype), x.zero),
                                       _spread(str(w.zero.dtype), w.zero))


def _conv_ok(node, w: np.ndarray) -> bool:
    """A 2-D convolution ``ops.conv2d_int8`` takes: one group, no dilation, one stride and one
    padding on every side."""
    a = {x.name: x for x in node.attribute}

    def ints(key: str, default: list[int]) -> list[int]:
        return list(a[key].ints) if key in a else default
    auto = a["auto_pad"].s.decode() if "auto_pad" in a else "NOTSET"
    group = a["group"].i if "group" in a else 1
    return (w.ndim == 4 and auto == "NOTSET" and group == 1
            and set(ints("dilations", [1])) == {1} and len(set(ints("strides", [1]))) == 1
            and len(set(ints("pads", [0]))) == 1)


def _weights(m: _Model, node, x: _Dq, w: _Dq, attrs: dict) -> tuple | None:
    """(the weights' DequantizeLinear as QLinearConv / QLinearMatMul read them, the reduction
    length, a new initializer or None), else None: not an int8 recipe's layer."""
    weights = m.inits[w.data]
    if str(x.zero.dtype) not in _EIGHT_BIT or str(weights.dtype) not in _EIGHT_BIT or \
            x.scale.size != 1 or x.zero.size != 1 or w.zero.size not in (1, w.scale.size):
        return None
    if node.op_type == "Conv":
        if not _conv_ok(node, weights) or w.scale.size not in (1, weights.shape[0]) or \
                (w.scale.size > 1 and w.axis != 0):
            return None
        return w, int(np.prod(weights.shape[1:])), None
    trans = node.op_type == "Gemm" and attrs.get("transB", 0)
    if weights.ndim != 2 or (w.scale.size > 1 and w.axis % 2 != (0 if trans else 1)):
        return None
    if node.op_type == "Gemm" and (attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0
                                   or attrs.get("beta", 1.0) != 1.0):
        return None
    if not trans:
        return w, weights.shape[0], None
    name = f"{w.data}_kn"                 # QLinearMatMul's weights are (k, n)
    return _Dq(name, w.scale, w.zero, 1), weights.shape[1], (name, weights.T)


def _bias(m: _Model, node, x: _Dq, w: _Dq, new_inits: dict) -> list[str] | None:
    """The int32 bias initializer of the layer at the input scale times the weight scale ([]
    without a bias), else None. A bias quantized at that scale is taken as it is; one at
    another scale (a bias shared by layers) or a float32 one is rounded to it, halves to even,
    as a new initializer."""
    if len(node.input) < 3 or not node.input[2]:
        return []
    want = (x.scale.astype(np.float32) * w.scale.astype(np.float32)).reshape(-1)
    b = m.dq(node.input[2])
    if b is not None and b.data in m.inits and str(m.inits[b.data].dtype) == "int32" and \
            not np.any(b.zero) and b.scale.size in (1, want.size) and \
            np.allclose(b.scale, want, rtol=1e-6, atol=0):
        return [b.data]
    if b is not None and b.data in m.inits:
        values = (m.inits[b.data].astype(np.float32) - b.zero.astype(np.float32)) * b.scale
    elif node.input[2] in m.inits:
        values = m.inits[node.input[2]]
    else:
        return None
    ints = np.round(values.astype(np.float64).reshape(-1) / want.astype(np.float64))
    if ints.size != want.size and want.size != 1 or np.abs(ints).max(initial=0) > 2 ** 30:
        return None
    name = f"{node.input[2]}_int32_{len(new_inits)}"
    new_inits[name] = ints.astype(np.int32)
    return [name]


def _output(m: _Model, node, nodes) -> tuple | None:
    """(the QuantizeLinear that alone reads the layer's result, the Relu between them or
    None), else None."""
    out = m.reader(node.output[0], nodes)
    relu = None
    if out is not None and out.op_type == "Relu":
        relu, out = out, m.reader(out.output[0], nodes)
    if out is None or out.op_type != "QuantizeLinear" or len(out.input) < 3 or \
            any(i not in m.inits for i in out.input[1:3]) or \
            m.inits[out.input[1]].size != 1 or m.inits[out.input[2]].size != 1 or \
            str(m.inits[out.input[2]].dtype) not in _EIGHT_BIT or \
            any(a.name != "axis" for a in out.attribute):
        return None
    return out, relu


def _fold(m: _Model, node, nodes, new_inits: dict) -> list | None:
    """[the nodes replacing ``node``, the nodes they replace], else None (kept as it is)."""
    from onnx import helper
    x = m.dq(node.input[0])
    w = m.dq(node.input[1]) if len(node.input) > 1 else None
    if x is None or w is None or w.data not in m.inits or x.data in m.inits:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    found = _weights(m, node, x, w, attrs)
    if found is None or not _fits(found[1], x, found[0]):
        return None
    bias, ends = _bias(m, node, x, w, new_inits), _output(m, node, nodes)
    if bias is None or ends is None:
        return None
    w, _, extra = found
    if extra is not None:
        new_inits[extra[0]] = np.ascontiguousarray(extra[1])
    out, relu = ends
    xq, wq = m.producer[node.input[0]], m.producer[node.input[1]]
    inputs = [x.data, xq.input[1], xq.input[2], w.data, wq.input[1], wq.input[2],
              out.input[1], out.input[2], *bias]
    target = out.output[0] if relu is None else f"{out.output[0]}_before_relu"
    if node.op_type == "Conv":
        kept = {k: v for k, v in attrs.items()
                if k in ("dilations", "group", "kernel_shape", "pads", "strides")}
        made = [helper.make_node("QLinearConv", inputs, [target], name=f"{node.name}_int8",
                                 **kept)]
    else:
        made = [helper.make_node("QLinearMatMul", inputs, [target], name=f"{node.name}_int8")]
    if relu is not None:
        made.append(helper.make_node("Max", [target, out.input[2]], [out.output[0]],
                                     name=f"{relu.name}_int8"))
    return [made, [node, out] + ([relu] if relu is not None else [])]


def _per_tensor(q: _Dq | None) -> bool:
    """A DequantizeLinear of an 8-bit tensor with one positive scale and one zero point."""
    return q is not None and q.scale.size == 1 and q.zero.size == 1 and \
        str(q.zero.dtype) in _EIGHT_BIT and float(q.scale[0]) > 0


def _quantize_params(m: _Model, q) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, zero point) of a QuantizeLinear with one constant 8-bit pair, else None."""
    if q is None or q.op_type != "QuantizeLinear" or len(q.input) < 3 or \
            any(i not in m.inits for i in q.input[1:3]) or \
            any(a.name != "axis" for a in q.attribute):
        return None
    scale, zero = m.inits[q.input[1]].reshape(-1), m.inits[q.input[2]].reshape(-1)
    if scale.size != 1 or zero.size != 1 or str(zero.dtype) not in _EIGHT_BIT:
        return None
    return scale, zero


# operators whose result, quantized, is the operator on the quantized operands when both
# have one scale and zero point (they move or select elements): {op type: its data inputs}
# (None: all of them)
_PASSING = {"MaxPool": 1, "Reshape": 1, "Flatten": 1, "Transpose": 1, "Squeeze": 1,
            "Unsqueeze": 1, "Concat": None, "Relu": 1}


def _fold_pass(m: _Model, node, nodes) -> list | None:
    """An operator of ``_PASSING`` whose data inputs are all dequantized with the scale and
    zero point of the QuantizeLinear that alone reads its result (directly or through a
    ``Relu``), run on the 8-bit tensors: quantizing a dequantized value gives it back
    exactly, and these operators only move or select elements (a maximum commutes with the
    increasing dequantization). A ``Relu`` becomes the maximum with the zero point."""
    from onnx import helper
    count = _PASSING[node.op_type] or len(node.input)
    data = [m.dq(i) for i in node.input[:count]]
    ends = _output(m, node, nodes) if len(node.output) == 1 else None
    params = _quantize_params(m, ends[0]) if ends is not None else None
    if params is None or any(
            not _per_tensor(x) or x.zero.dtype != params[1].dtype or
            np.float32(x.scale[0]) != np.float32(params[0][0]) or x.zero[0] != params[1][0]
            for x in data):
        return None
    out, relu = ends
    inputs = [x.data for x in data] + list(node.input[count:])
    target = out.output[0] if relu is None else f"{out.output[0]}_before_relu"
    if node.op_type == "Relu":
        made = [helper.make_node("Max", [inputs[0], out.input[2]], [target],
                                 name=f"{node.name}_int8")]
    else:
        made = [helper.make_node(node.op_type, inputs, [target], name=f"{node.name}_int8",
                                 domain=node.domain)]
        made[0].attribute.extend(node.attribute)
    if relu is not None:
        made.append(helper.make_node("Max", [target, out.input[2]], [out.output[0]],
                                     name=f"{relu.name}_int8"))
    return [made, [node, out] + ([relu] if relu is not None else [])]


def _fold_add(m: _Model, node, nodes) -> list | None:
    """An Add of two DequantizeLinear read by a QuantizeLinear (directly or through a Relu),
    all per tensor: ``QLinearAdd`` (ONNX Runtime's operator, of the same meaning: dequantize
    both, add, quantize), computed on the 8-bit tensors."""
    from onnx import helper
    a, b = (m.dq(i) for i in node.input[:2])
    ends = _output(m, node, nodes)
    qa, qb = (m.producer.get(i) for i in node.input[:2])
    if len(node.input) != 2 or not _per_tensor(a) or not _per_tensor(b) or ends is None or \
            any(p is None or p.op_type != "DequantizeLinear" for p in (qa, qb)):
        return None
    out, relu = ends
    inputs = [a.data, qa.input[1], qa.input[2], b.data, qb.input[1], qb.input[2],
              out.input[1], out.input[2]]
    target = out.output[0] if relu is None else f"{out.output[0]}_before_relu"
    made = [helper.make_node("QLinearAdd", inputs, [target], name=f"{node.name}_int8",
                             domain="com.microsoft")]
    if relu is not None:
        made.append(helper.make_node("Max", [target, out.input[2]], [out.output[0]],
                                     name=f"{relu.name}_int8"))
    return [made, [node, out] + ([relu] if relu is not None else [])]


def fold_qdq(model):
    """``model`` with each quantized Conv / MatMul / Gemm, the operators between equal
    quantizations, and Add of the QDQ form
    folded into its integer operator (see the module docstring); the model itself when none
    is."""
    from onnx import numpy_helper
    nodes = list(model.graph.node)
    if not any(n.op_type == "QuantizeLinear" for n in nodes):
        return model
    m = _Model(model)
    new_inits: dict[str, np.ndarray] = {}
    replaced: dict[int, list] = {}
    removed: set[int] = set()
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in ("Conv", "MatMul", "Gemm"):
            folded = _fold(m, node, nodes, new_inits)
        elif node.op_type in _PASSING:
            folded = _fold_pass(m, node, nodes)
        elif node.op_type == "Add":
            folded = _fold_add(m, node, nodes)
        else:
            continue
        if folded is not None:
            replaced[id(node)] = folded[0]
            removed.update(id(n) for n in folded[1])
    if not replaced:
        return model
    out = type(model)()
    out.CopyFrom(model)
    del out.graph.node[:]
    for node in nodes:
        if id(node) in replaced:
            out.graph.node.extend(replaced[id(node)])
        elif id(node) not in removed:
            out.graph.node.append(node)
    out.graph.initializer.extend(numpy_helper.from_array(a, k) for k, a in new_inits.items())
    return out
