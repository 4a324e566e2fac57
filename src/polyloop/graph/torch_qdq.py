# SPDX-License-Identifier: Apache-2.0
"""PT2E-quantized layers of an exported program (``convert_pt2e``'s reference form) in
integers, through the QDQ fold of ONNX models (``onnx_import.qdq``).

``convert_pt2e`` leaves each quantized layer as ``dequantize_per_tensor`` of an 8-bit
activation, ``dequantize_per_channel`` (or ``_per_tensor``) of constant int8 weights, the
float layer (``convolution``, ``linear``) with its float bias, then ``quantize_per_tensor`` of
the result. Such a layer, with one ``relu`` after it and then any of the calls that commute
with quantizing (max pooling, views, permutations) before its ``quantize``, is written in
ONNX's QDQ form (``quant.fragment``, the bias as int32 at the input scale times the weight
scale) and folded as an ONNX model is: the same checks decide whether it runs in integers and
the same converters emit the kernel; the calls after it then run on the 8-bit tensor. A layer
the fold does not take (a grouped or dilated convolution, a reduction too long for int32)
keeps its float form, which the converters of ``aten.quantized`` compute as PyTorch does.

Between two quantized values, a view, permutation, concatenation, max pooling or ReLU whose
operands are all dequantized with one scale and zero point, and whose result is quantized
again with them, runs on the 8-bit tensors (a ReLU as the maximum with the zero point): each
of these commutes exactly with an increasing quantization.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from .aten.context import Unsupported, op_name
from .ir import Op, Value
from .kinds import BinaryFn
from .quant.fragment import LayerQuantization, integer_layer
from .quant.layers import LayerForm, LayerKind
from .quant.params import Quantization, bias_quantization

_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}
# calls whose result, quantized, is the call on the quantized operands (same scale and zero)
_VIEWS = frozenset({"view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten",
                    "permute", "transpose", "t", "clone", "contiguous"})
_POOL = "max_pool2d_with_indices"
_PASSING = _VIEWS | {_POOL, "cat", "relu"}


@dataclass(frozen=True, slots=True)
class Params:
    """One scale and zero point of a per-tensor quantize or dequantize over its dtype's whole
    range (a narrower one, such as PT2E's reduced range, is not what the kernels saturate
    to)."""

    scale: float
    zero: int
    dtype: str

    def quantization(self) -> Quantization:
        return Quantization(np.array([self.scale], np.float32),
                            np.array([self.zero], self.dtype))


def _number(imp, a: object) -> float | None:
    a = imp.resolve(a)
    if imp.is_constant(a):
        data = imp.array(a).reshape(-1)
        return float(data[0]) if data.size == 1 else None
    return float(a) if isinstance(a, (int, float)) else None


def params(imp, node, kind: str) -> Params | None:
    """The parameters of ``node`` when it is a ``kind`` (``quantize_per_tensor`` or
    ``dequantize_per_tensor``) with constant ones, else None."""
    if getattr(node, "op", None) != "call_function" or op_name(node) != kind or \
            len(node.args) < 6 or node.kwargs.get("out_dtype") not in (None, imp.torch.float32):
        return None
    scale, zero = _number(imp, node.args[1]), _number(imp, node.args[2])
    dtype = str(node.args[5]).replace("torch.", "")
    if scale is None or zero is None or not scale > 0 or dtype not in _RANGES or \
            (node.args[3], node.args[4]) != _RANGES[dtype]:
        return None
    return Params(float(np.float32(scale)), int(zero), dtype)


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _output(imp, node) -> tuple | None:
    """(the relu after ``node`` or None, the calls after it that commute with quantizing,
    the ``quantize_per_tensor`` ending them and its parameters), else None."""
    relu, chain, cur = None, [], node
    nxt = _only_user(cur)
    if nxt is not None and op_name(nxt) == "relu":
        relu, cur = nxt, nxt
    while True:
        nxt = _only_user(cur)
        if nxt is None:
            return None
        name = op_name(nxt)
        if name in _VIEWS or name == _POOL:
            chain.append(nxt)
            cur = nxt
            if name == _POOL:
                cur = _only_user(nxt)
                if cur is None or cur.target is not operator.getitem or cur.args[1] != 0:
                    return None
                chain.append(cur)
            continue
        found = params(imp, nxt, "quantize_per_tensor")
        return (relu, chain, nxt, found) if found is not None else None


def _weights(imp, node) -> tuple[Quantization, np.ndarray] | None:
    """The quantization of constant 8-bit weights ``node`` dequantizes (per output channel,
    axis 0, or per tensor) and the weights, else None."""
    name = op_name(node) if getattr(node, "op", None) == "call_function" else ""
    if name not in ("dequantize_per_channel", "dequantize_per_tensor") or \
            node.kwargs.get("out_dtype") not in (None, imp.torch.float32):
        return None
    data = imp.resolve(node.args[0])
    if not imp.is_constant(data) or str(data.dtype) not in ("torch.int8", "torch.uint8"):
        return None
    weight = imp.array(data)
    if name == "dequantize_per_tensor":
        p = Params(float(np.float32(_number(imp, node.args[1]) or 0)),
                   int(_number(imp, node.args[2]) or 0), str(weight.dtype))
        return (p.quantization(), weight) if p.scale > 0 else None
    scales, zeros = (imp.resolve(a) for a in node.args[1:3])
    if not imp.is_constant(scales) or int(node.args[3]) != 0:
        return None
    scale = imp.array(scales).reshape(-1).astype(np.float32)
    zero = imp.array(zeros).reshape(-1) if imp.is_constant(zeros) else np.zeros(scale.size)
    if scale.size != weight.shape[0] or zero.size != scale.size or not (scale > 0).all():
        return None
    return Quantization(scale, zero.astype(weight.dtype), 0), weight


@dataclass(frozen=True, slots=True, eq=False)
class QuantizedLayer:
    """A layer of the module docstring: the FX node of its 8-bit input, its ONNX form and
    quantization, and the FX calls after it (the relu, the calls on the 8-bit result, the
    ``quantize`` whose value is the last of them)."""

    source: object
    form: LayerForm
    quantization: LayerQuantization
    relu: object
    chain: tuple
    out: object

    def emit(self, imp, node) -> Value | None:
        """The layer's quantized result computed by the fold's integer kernel, the FX calls
        after it bound to the 8-bit values (``imp.aliases``); None where the fold leaves it."""
        xq = imp.env.get(self.source.name)
        if not isinstance(xq, Value) or xq.type.dtype != self.quantization.x.dtype:
            return None
        sub = integer_layer(self.form, self.quantization, quantized_input=True)
        if sub is None:
            return None
        _, yq = imp.b.inline(sub, [xq], node.name)
        last = self.chain[-1] if self.chain else (self.relu or node)
        if self.relu is not None:
            imp.aliases[self.relu.name] = node.name
        imp.aliases[self.out.name] = last.name
        return yq


def _form(imp, node, weight: np.ndarray):
    """(kind, attrs) of a convolution or linear ``node`` (a ``Gemm`` whatever the rank of its
    input: the fold makes it a ``QLinearMatMul``), else None."""
    if op_name(node) == "linear":
        return (LayerKind.GEMM, (("transB", 1),)) if weight.ndim == 2 else None
    args = [imp.resolve(a) for a in node.args]
    if weight.ndim != 4 or len(args) < 9 or args[6]:
        return None
    stride, pad, dilation = (list(args[k]) for k in (3, 4, 5))
    return LayerKind.CONV, (("strides", stride), ("pads", pad + pad), ("dilations", dilation),
                            ("group", int(args[8])))


def match_layer(imp, node) -> QuantizedLayer | None:
    """``node`` (a ``convolution`` or ``linear``) as a quantized layer, else None."""
    if op_name(node) not in ("convolution", "linear") or len(node.args) < 2:
        return None
    dq = node.args[0]
    x = params(imp, dq, "dequantize_per_tensor")
    found = _weights(imp, node.args[1])
    ends = _output(imp, node)
    if x is None or found is None or ends is None or not isinstance(imp.env.get(dq.name), Value):
        return None
    bias = imp.resolve(node.args[2]) if len(node.args) > 2 else None
    if bias is not None and not (imp.is_constant(bias) and str(bias.dtype) == "torch.float32"):
        return None
    w, weight = found
    form = _form(imp, node, weight)
    if form is None:
        return None
    xq = x.quantization()
    b, b_int = bias_quantization(imp.array(bias), xq, w) if bias is not None else (None, None)
    relu, chain, out, y = ends
    q = LayerQuantization(xq, w, weight, b, b_int, y.quantization())
    shapes = imp.env[dq.name].type.shape, imp.result_types(node)[0].shape
    return QuantizedLayer(dq.args[0], LayerForm(*form, relu is not None, *shapes), q, relu,
                          tuple(chain), out)


def _operands(node) -> list:
    """The FX nodes of ``node``'s tensor operands (the list of a ``cat``)."""
    first = node.args[0]
    return list(first) if op_name(node) == "cat" else [first]


def pass_quantized(imp, node, convert) -> object | None:
    """``node`` (a call of ``_PASSING``) run on the 8-bit values (module docstring) through
    ``convert`` with its dequantized operands replaced by the quantized ones, its
    ``quantize`` bound to the result (``imp.aliases``); None when it does not apply."""
    name = op_name(node)
    if name not in _PASSING:
        return None
    operands = _operands(node)
    found = [params(imp, a, "dequantize_per_tensor") for a in operands]
    after = _only_user(node)
    if name == _POOL and after is not None and after.target is operator.getitem and \
            after.args[1] == 0:
        last, after = after, _only_user(after)
    else:
        last = node
    out = params(imp, after, "quantize_per_tensor") if after is not None else None
    if out is None or any(p != out for p in found):
        return None
    sources = [imp.env.get(a.args[0].name) for a in operands]
    if not all(isinstance(v, Value) and v.type.dtype == out.dtype for v in sources):
        return None
    if name == "relu":
        (v,) = sources
        zero = imp.b.constant(np.array(out.zero, out.dtype), f"{node.name}_zero")
        result = imp.b.emit(Op.BINARY, v, zero, fn=BinaryFn.MAX, name=node.name)
    else:
        saved = {a.name: imp.env[a.name] for a in operands}
        imp.env.update({a.name: v for a, v in zip(operands, sources)})
        try:
            result = convert(node)
        except Unsupported:
            return None
        finally:
            imp.env.update(saved)
    imp.aliases[after.name] = last.name
    return result
