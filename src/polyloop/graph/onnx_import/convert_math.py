# SPDX-License-Identifier: Apache-2.0
"""ONNX elementwise operators onto ``Op.UNARY``/``Op.BINARY`` (and the specific float ops
the fusion passes know: Add, Relu, Sigmoid ...), ``Op.WHERE`` and ``Op.CAST``."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Op, Value
from ..kinds import BinaryFn, UnaryFn
from . import shape_values
from .node import Node, Shape, onnx_dtype

_FLOATS = ("float16", "float32", "float64")

# op type -> (function, {attribute: (parameter, default)})
_UNARY: dict[str, tuple[UnaryFn, dict[str, tuple[str, float]]]] = {
    "Abs": (UnaryFn.ABS, {}), "Neg": (UnaryFn.NEG, {}), "Exp": (UnaryFn.EXP, {}),
    "Log": (UnaryFn.LOG, {}), "Sqrt": (UnaryFn.SQRT, {}), "Reciprocal": (UnaryFn.RECIPROCAL, {}),
    "Floor": (UnaryFn.FLOOR, {}), "Ceil": (UnaryFn.CEIL, {}), "Round": (UnaryFn.ROUND, {}),
    "Sign": (UnaryFn.SIGN, {}), "Sin": (UnaryFn.SIN, {}), "Cos": (UnaryFn.COS, {}),
    "Tan": (UnaryFn.TAN, {}), "Asin": (UnaryFn.ASIN, {}), "Acos": (UnaryFn.ACOS, {}),
    "Atan": (UnaryFn.ATAN, {}), "Sinh": (UnaryFn.SINH, {}), "Cosh": (UnaryFn.COSH, {}),
    "Tanh": (UnaryFn.TANH, {}), "Asinh": (UnaryFn.ASINH, {}), "Acosh": (UnaryFn.ACOSH, {}),
    "Atanh": (UnaryFn.ATANH, {}), "Erf": (UnaryFn.ERF, {}), "Sigmoid": (UnaryFn.SIGMOID, {}),
    "Relu": (UnaryFn.RELU, {}), "Softplus": (UnaryFn.SOFTPLUS, {}),
    "Softsign": (UnaryFn.SOFTSIGN, {}), "Elu": (UnaryFn.ELU, {"alpha": ("alpha", 1.0)}),
    "Selu": (UnaryFn.SELU, {"alpha": ("alpha", 1.67326319217681884765625),
                            "gamma": ("gamma", 1.05070102214813232421875)}),
    "Celu": (UnaryFn.CELU, {"alpha": ("alpha", 1.0)}),
    "LeakyRelu": (UnaryFn.LEAKY_RELU, {"alpha": ("alpha", 0.01)}),
    "HardSigmoid": (UnaryFn.HARD_SIGMOID, {"alpha": ("alpha", 0.2), "beta": ("beta", 0.5)}),
    "HardSwish": (UnaryFn.HARD_SWISH, {}), "Mish": (UnaryFn.MISH, {}),
    "ThresholdedRelu": (UnaryFn.THRESHOLDED_RELU, {"alpha": ("alpha", 1.0)}),
    "Shrink": (UnaryFn.SHRINK, {"bias": ("bias", 0.0), "lambd": ("lambd", 0.5)}),
    "Not": (UnaryFn.NOT, {}), "IsNaN": (UnaryFn.ISNAN, {}),
    "IsInf": (UnaryFn.ISINF, {"detect_positive": ("detect_positive", 1),
                              "detect_negative": ("detect_negative", 1)}),
    "BitwiseNot": (UnaryFn.BITWISE_NOT, {}), "Swish": (UnaryFn.SILU, {"alpha": ("alpha", 1.0)}),
}
# the specific graph ops of float tensors the fusion passes and fast recipes match on
_SPECIFIC = {UnaryFn.RELU: Op.RELU, UnaryFn.SIGMOID: Op.SIGMOID, UnaryFn.TANH: Op.TANH,
             UnaryFn.EXP: Op.EXP, UnaryFn.SQRT: Op.SQRT, UnaryFn.NEG: Op.NEG}


def unary(n: Node, fn: UnaryFn, x: Value, **params: object) -> Value:
    if fn in _SPECIFIC and x.type.dtype == "float32" and not params:
        return n.emit(_SPECIFIC[fn], x)
    return n.emit(Op.UNARY, x, fn=fn, **params)


def convert_unary(n: Node) -> Value:
    fn, attrs = _UNARY[n.op_type]
    if fn is UnaryFn.ISINF:
        params = {p: n.flag(a, d) for a, (p, d) in attrs.items()}
    else:
        params = {p: float(n.attr(a, d)) for a, (p, d) in attrs.items()}
    return unary(n, fn, n.value(0), **params)


def convert_gelu(n: Node) -> Value:
    approximate = n.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise PolyloopError(f"Gelu approximate={approximate!r} is not one of 'none', 'tanh'")
    return n.emit(Op.UNARY, n.value(0), fn=UnaryFn.GELU if approximate == "none"
                  else UnaryFn.GELU_TANH)


_BINARY = {"Add": BinaryFn.ADD, "Sub": BinaryFn.SUB, "Mul": BinaryFn.MUL, "Div": BinaryFn.DIV,
           "Pow": BinaryFn.POW, "And": BinaryFn.AND, "Or": BinaryFn.OR, "Xor": BinaryFn.XOR,
           "Equal": BinaryFn.EQ, "Greater": BinaryFn.GT, "Less": BinaryFn.LT,
           "GreaterOrEqual": BinaryFn.GE, "LessOrEqual": BinaryFn.LE,
           "BitwiseAnd": BinaryFn.BITAND, "BitwiseOr": BinaryFn.BITOR,
           "BitwiseXor": BinaryFn.BITXOR, "PRelu": BinaryFn.PRELU}
_FLOAT_OPS = {BinaryFn.ADD: Op.ADD, BinaryFn.SUB: Op.SUB, BinaryFn.MUL: Op.MUL,
              BinaryFn.DIV: Op.DIV}


def binary(n: Node, fn: BinaryFn, a: Value, b: Value) -> Value:
    if fn in _FLOAT_OPS and a.type.dtype == b.type.dtype == "float32":
        return n.emit(_FLOAT_OPS[fn], a, b)
    return n.emit(Op.BINARY, a, b, fn=fn)


def convert_binary(n: Node) -> Value | Shape:
    if shape_values.foldable(n, 0, 1) and n.op_type in ("Add", "Sub", "Mul", "Div"):
        return shape_values.arithmetic(n)
    if shape_values.foldable(n, 0, 1) and n.op_type in shape_values.COMPARISONS:
        return shape_values.compare(n)
    fn = _BINARY[n.op_type]
    a, b = n.value(0), n.value(1)
    if fn is BinaryFn.PRELU and len(b.type.shape) < len(a.type.shape) \
            and len(b.type.shape) == 1 and len(a.type.shape) >= 2 and b.type.shape[0] != 1 \
            and b.type.shape[0] == a.type.shape[1] and a.type.shape[-1] != b.type.shape[0]:
        # a per-channel slope given as (C,) for (N, C, ...) data (the older exporters)
        b = n.emit(Op.RESHAPE, b, shape=b.type.shape + (1,) * (len(a.type.shape) - 2))
    return binary(n, fn, a, b)


def convert_mod(n: Node) -> Value:
    fmod = int(n.flag("fmod", 0))
    a, b = n.value(0), n.value(1)
    return n.emit(Op.BINARY, a, b, fn=BinaryFn.FMOD if fmod else BinaryFn.MOD)


def convert_bitshift(n: Node) -> Value:
    direction = n.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise PolyloopError(f"BitShift direction={direction!r} is not 'LEFT' or 'RIGHT'")
    fn = BinaryFn.SHIFT_LEFT if direction == "LEFT" else BinaryFn.SHIFT_RIGHT
    return n.emit(Op.BINARY, n.value(0), n.value(1), fn=fn)


def convert_variadic(n: Node) -> Value:
    """Sum, Max, Min, Mean of any number of broadcast inputs, folded pairwise."""
    xs = n.values()
    fn = {"Sum": BinaryFn.ADD, "Mean": BinaryFn.ADD, "Max": BinaryFn.MAX,
          "Min": BinaryFn.MIN}[n.op_type]
    acc = xs[0]
    for x in xs[1:]:
        acc = binary(n, fn, acc, x)
    if len(xs) == 1:
        acc = n.emit(Op.COPY, acc)
    if n.op_type == "Mean" and len(xs) > 1:
        acc = binary(n, BinaryFn.DIV, acc, n.const(np.array(len(xs), acc.type.dtype)))
    return acc


def convert_where(n: Node) -> Value | Shape:
    if shape_values.foldable(n, 0, 1, 2):
        return shape_values.where(n)
    return n.emit(Op.WHERE, n.value(0), n.value(1), n.value(2))


def cast(n: Node, x: Value, dtype: str) -> Value:
    if x.type.dtype == dtype:
        return x
    return n.emit(Op.CAST, x, dtype=dtype)


def convert_cast(n: Node) -> Value:
    dtype = onnx_dtype(int(n.attr("to")), "Cast's target type")
    n.attr("saturate")   # applies to float8 targets only, which the graph does not carry
    n.attr("round_mode")
    if shape_values.involved(n, 0) and dtype in ("int64", "int32"):
        return n.entry(0)      # still a shape (its sizes are far below 2^31)
    return cast(n, n.value(0), dtype)


def convert_cast_like(n: Node) -> Value:
    n.attr("saturate")
    n.attr("round_mode")
    return cast(n, n.value(0), n.value(1).type.dtype)


def convert_clip(n: Node) -> Value:
    x = n.value(0)
    if n.opset < 11:
        lo, hi = n.attr("min", -3.4028234663852886e38), n.attr("max", 3.4028234663852886e38)
        return n.emit(Op.UNARY, x, fn=UnaryFn.CLIP, lo=float(lo), hi=float(hi))
    bounds = []
    for k in (1, 2):
        if not n.has(k):
            bounds.append(None)
            continue
        data = n.b.data(n.value(k))
        bounds.append(data if data is not None and data.size == 1 else n.value(k))
    if all(not isinstance(v, Value) for v in bounds):
        lo, hi = (None if v is None else v.reshape(()).item() for v in bounds)
        return n.emit(Op.UNARY, x, fn=UnaryFn.CLIP, lo=lo, hi=hi)
    for fn, bound in ((BinaryFn.MAX, bounds[0]), (BinaryFn.MIN, bounds[1])):
        if bound is not None:
            v = bound if isinstance(bound, Value) else n.const(bound.reshape(()), x.type.dtype)
            x = n.emit(Op.BINARY, x, v, fn=fn)
    return x


def _axis_param(n: Node, p: Value, rank: int) -> Value:
    """A per-axis quantization parameter (1-D along ``axis``) shaped to broadcast."""
    if len(p.type.shape) == 0 or p.type.shape == (1,):
        return p
    if int(n.attr("block_size", 0)):
        raise PolyloopError("blocked quantization (block_size > 0) is not supported")
    axis = int(n.attr("axis", 1)) % rank
    shape = (1,) * axis + p.type.shape + (1,) * (rank - axis - 1)
    return n.emit(Op.RESHAPE, p, shape=shape)


def convert_quantize(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    n.attr("axis")
    n.attr("block_size")
    n.attr("precision")
    if not n.flag("saturate", 1):
        raise PolyloopError("saturate=0 applies to float8 outputs, which are not supported")
    scale = _axis_param(n, n.value(1), rank)
    zp = _axis_param(n, n.value(2), rank) if n.has(2) else None
    out = n.attr("output_dtype", 0)
    dtype = zp.type.dtype if zp is not None else \
        (onnx_dtype(int(out), "output_dtype") if out else "uint8")
    if dtype not in ("uint8", "int8", "int16"):
        raise PolyloopError(f"quantizing to {dtype} is not supported (uint8, int8, int16)")
    y = n.emit(Op.UNARY, n.emit(Op.BINARY, x, cast(n, scale, x.type.dtype), fn=BinaryFn.DIV),
               fn=UnaryFn.ROUND)
    if zp is not None:
        y = n.emit(Op.BINARY, y, cast(n, zp, x.type.dtype), fn=BinaryFn.ADD)
    info = np.iinfo(dtype)
    y = n.emit(Op.UNARY, y, fn=UnaryFn.CLIP, lo=float(info.min), hi=float(info.max))
    return cast(n, y, dtype)


def convert_dequantize(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    n.attr("axis")
    n.attr("block_size")
    scale = _axis_param(n, n.value(1), rank)
    dtype = onnx_dtype(int(n.attr("output_dtype", 0)), "output_dtype") \
        if n.attr("output_dtype", 0) else scale.type.dtype
    y = cast(n, x, dtype)
    if n.has(2):
        y = n.emit(Op.BINARY, y, cast(n, _axis_param(n, n.value(2), rank), dtype),
                   fn=BinaryFn.SUB)
    return n.emit(Op.BINARY, y, cast(n, scale, dtype), fn=BinaryFn.MUL)


def convert_bitcast(n: Node) -> Value:
    return n.emit(Op.BITCAST, n.value(0), dtype=onnx_dtype(int(n.attr("to")), "BitCast's to"))


def convert_det(n: Node) -> Value:
    return n.emit(Op.DET, n.value(0))


CONVERTERS = {"BitCast": convert_bitcast, "Det": convert_det,
              **{k: convert_unary for k in _UNARY}, **{k: convert_binary for k in _BINARY},
              "Gelu": convert_gelu, "Mod": convert_mod, "BitShift": convert_bitshift,
              "Sum": convert_variadic, "Max": convert_variadic, "Min": convert_variadic,
              "Mean": convert_variadic, "Where": convert_where, "Cast": convert_cast,
              "CastLike": convert_cast_like, "Clip": convert_clip,
              "QuantizeLinear": convert_quantize, "DequantizeLinear": convert_dequantize}
