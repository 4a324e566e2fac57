# SPDX-License-Identifier: Apache-2.0
"""Quantized operators in integers: ``QLinearConv``, ``QLinearMatMul``, ``ConvInteger``,
``MatMulInteger`` become ``polyloop.ops`` int8 kernels, ``QLinearAdd`` (ONNX Runtime's) an
integer addition (``graph.integer``: ``u8/s8 x s8``
summed in int32, requantized with halves to even and saturation); ``DynamicQuantizeLinear``
is computed as ONNX defines it. ``QLinearMatMul`` takes an int32 bias as a ninth input, as
``QLinearConv`` does: the form ``qdq.fold_qdq`` gives a quantized ``Gemm``."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ...ops import pack_conv_int8_weight, pack_int8_weight
from ..integer import Epilogue, IntegerAdd, IntegerConv, IntegerMatmul
from ..ir import Op, Value
from ..kinds import BinaryFn, ReduceFn, UnaryFn
from .node import Node


def _zero(n: Node, k: int, what: str, inputs: list[Value], per: int | None = None):
    """Zero point ``k`` as an int when it is one constant value, else appended to ``inputs``
    as a tensor (0-D, or ``per`` values) and None."""
    if not n.has(k):
        return 0
    data = n.b.data(n.value(k))
    if data is not None and (data.size == 1 or np.all(data == data.reshape(-1)[0])):
        return int(data.reshape(-1)[0])
    v = n.value(k)
    if v.type.shape in ((1,), ()):
        v = n.emit(Op.RESHAPE, v, shape=())
    elif per is None or v.type.shape != (per,):
        raise PolyloopError(f"{what} must be one value{'' if per is None else f' or {per}'}, "
                            f"got shape {v.type.shape}")
    inputs.append(v)
    return None


def _requantize(n: Node, first: int, per: int, inputs: list[Value]) -> tuple:
    """(scale, tensor_scale, out zero point, out dtype) of a QLinear operator: the input's
    scale times the weight's (per output channel or one) over the output's, in float32."""
    xs = n.array(first, "the input scale").astype(np.float32).reshape(-1)
    ws = n.array(first + 3, "the weight scale").astype(np.float32).reshape(-1)
    ys = n.array(first + 5, "the output scale").astype(np.float32).reshape(-1)
    if xs.size != 1 or ys.size != 1 or ws.size not in (1, per):
        raise PolyloopError(f"scales must be one value (the weight's: one or {per}), got "
                            f"{xs.size}, {ws.size}, {ys.size}")
    scale = (xs * ws) / ys
    out = n.array(first + 6, "the output zero point") if n.has(first + 6) else \
        np.zeros(1, np.uint8)
    if out.size != 1 or str(out.dtype) not in ("uint8", "int8"):
        raise PolyloopError(f"the output zero point must be one uint8 or int8 value, got "
                            f"{out.dtype} of shape {out.shape}")
    if scale.size == 1:
        return float(scale[0]), False, int(out.reshape(-1)[0]), str(out.dtype)
    inputs.append(n.const(scale, "float32"))
    return None, True, int(out.reshape(-1)[0]), str(out.dtype)


def _conv_geometry(n: Node, x: Value, w: Value) -> tuple[int, int]:
    """(stride, padding) of a 2-D convolution the int8 recipe takes: one group, no dilation,
    one stride and one padding on every side."""
    if len(x.type.shape) != 4 or len(w.type.shape) != 4:
        raise PolyloopError(f"only 2-D convolutions (4-D input and weights) run in integers, "
                            f"got {x.type.shape} and {w.type.shape}")
    auto = n.attr("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    kernel = n.attr("kernel_shape", None)
    strides = list(n.attr("strides", [1, 1]))
    pads = list(n.attr("pads", [0, 0, 0, 0]))
    dil = list(n.attr("dilations", [1, 1]))
    group = int(n.attr("group", 1))
    if kernel is not None and list(kernel) != list(w.type.shape[2:]):
        raise PolyloopError(f"kernel_shape {list(kernel)} differs from the weights' "
                            f"{w.type.shape}")
    if auto not in ("NOTSET", "VALID") or group != 1 or set(dil) != {1} or \
            len(set(strides)) != 1 or len(set(pads)) != 1:
        raise PolyloopError(
            f"the int8 convolution takes one group (got {group}), no dilation ({dil}), one "
            f"stride ({strides}) and one padding on every side ({pads}, auto_pad {auto}); "
            "quantize this layer in the QDQ form instead, which runs in float32")
    return strides[0], pads[0]


def _weights(n: Node, k: int) -> Value:
    w = n.value(k)
    if w.type.dtype not in ("int8", "uint8"):
        raise PolyloopError(f"the weights are {w.type.dtype}; uint8 or int8 needed")
    return w


def _packed(n: Node, inputs: list[Value], a_zero: int | None) -> dict:
    """Constant weights (``inputs[1]``) packed once, their sums inserted after them where the
    input's zero point needs them (an int8 input, or a zero point other than 0): the
    ``IntegerConv`` fields saying so (none for weights computed by the model)."""
    x, w = inputs[:2]
    data = n.b.data(w)
    if data is None or data.ndim != 4:
        return {}
    panels, sums = pack_conv_int8_weight(data)
    needs_sums = x.type.dtype == "int8" or a_zero != 0
    inputs[1:2] = [n.const(panels, "int8")] + ([n.const(sums, "int32")] if needs_sums else [])
    return {"weight": tuple(int(d) for d in data.shape), "w_dtype": str(data.dtype),
            "weight_sums": needs_sums}


def convert_qlinear_conv(n: Node) -> Value:
    x, w = n.value(0), _weights(n, 3)
    stride, padding = _conv_geometry(n, x, w)
    k_out = w.type.shape[0]
    inputs = [x, w]
    b_zero = _zero(n, 5, "the weight zero point", inputs, k_out)
    a_zero = _zero(n, 2, "the input zero point", inputs)
    has_bias = n.has(8)
    if has_bias:
        inputs.append(n.value(8))
    scale, tensor, out_zero, out_dtype = _requantize(n, 1, k_out, inputs)
    e = Epilogue(out_dtype, a_zero, b_zero, has_bias, scale, tensor, out_zero)
    packed = _packed(n, inputs, a_zero)
    return n.b.emit_te(IntegerConv(e, stride, padding, **packed), *inputs, name=n.hint)


def _matmul(n: Node, a: Value, b: Value, zeros: tuple[int, int], epilogue: dict) -> Value:
    """A product of ``a`` (2-D or 3-D) by ``b`` through ``IntegerMatmul``; a constant 2-D
    ``b`` is packed once."""
    shape = a.type.shape
    if len(shape) > 3 and len(b.type.shape) == 2 and all(isinstance(d, int) for d in shape):
        rows = n.emit(Op.RESHAPE, a, shape=(int(np.prod(shape[:-1])), shape[-1]))
        y = _matmul(n, rows, b, zeros, epilogue)
        return n.emit(Op.RESHAPE, y, shape=(*shape[:-1], y.type.shape[-1]))
    if len(shape) not in (2, 3) or len(b.type.shape) not in (2, 3):
        raise PolyloopError(f"integer products take 2-D or 3-D operands (or more axes of "
                            f"constant sizes by a matrix), got {shape} x {b.type.shape}")
    cols = b.type.shape[-1]
    inputs = [a, b]
    b_zero = _zero(n, zeros[1], "b's zero point", inputs, cols)
    a_zero = _zero(n, zeros[0], "a's zero point", inputs)
    extra = epilogue.pop("inputs", [])
    e = Epilogue(a_zero=a_zero, b_zero=b_zero, **epilogue)
    data = n.b.data(b)
    if data is not None and data.ndim == 2 and isinstance(cols, int):
        inputs[1] = n.const(pack_int8_weight(data), "int8")
        fn = IntegerMatmul(e, cols, b.type.dtype)
    else:
        fn = IntegerMatmul(e)
    return n.b.emit_te(fn, *inputs, *extra, name=n.hint)


def convert_qlinear_matmul(n: Node) -> Value:
    a, b = n.value(0), _weights(n, 3)
    extra: list[Value] = []
    if n.has(8):
        extra.append(n.value(8))
    scale, tensor, out_zero, out_dtype = _requantize(n, 1, b.type.shape[-1], extra)
    return _matmul(n, a, b, (2, 5), dict(out_dtype=out_dtype, bias=n.has(8), scale=scale,
                                         tensor_scale=tensor, out_zero=out_zero,
                                         inputs=extra))


def convert_matmul_integer(n: Node) -> Value:
    return _matmul(n, n.value(0), _weights(n, 1), (2, 3), {})


def convert_conv_integer(n: Node) -> Value:
    x, w = n.value(0), _weights(n, 1)
    stride, padding = _conv_geometry(n, x, w)
    inputs = [x, w]
    b_zero = _zero(n, 3, "the weight zero point", inputs, w.type.shape[0])
    a_zero = _zero(n, 2, "the input zero point", inputs)
    packed = _packed(n, inputs, a_zero)
    return n.b.emit_te(IntegerConv(Epilogue(a_zero=a_zero, b_zero=b_zero), stride, padding,
                                   **packed), *inputs, name=n.hint)


def _one(n: Node, k: int, what: str, zero_point: bool = False) -> float | int:
    """Input ``k``: one constant value (a zero point: an int, 0 where it is left out)."""
    if zero_point and not n.has(k):
        return 0
    data = n.array(k, what).reshape(-1)
    if data.size != 1:
        raise PolyloopError(f"{what} must be one value (per tensor), got {data.size}")
    return int(data[0]) if zero_point else float(np.float32(data[0]))


def _dequantized(n: Node, v: Value, scale: float, zero: int) -> Value:
    f = n.emit(Op.CAST, v, dtype="float32")
    f = n.emit(Op.BINARY, f, n.const(np.array(zero, np.float32)), fn=BinaryFn.SUB)
    return n.emit(Op.BINARY, f, n.const(np.array(scale, np.float32)), fn=BinaryFn.MUL)


def convert_qlinear_add(n: Node) -> Value:
    """ONNX Runtime's ``QLinearAdd`` (what ``qdq.fold_qdq`` makes of a QDQ ``Add``):
    ``quantize(dequantize(a) + dequantize(b))``, one scale and zero point per tensor; operands
    of one shape are added by an integer kernel, broadcast ones through float32 as ONNX's
    operators are."""
    a, b = n.value(0), n.value(3)
    for v, what in ((a, "A"), (b, "B")):
        if v.type.dtype not in ("uint8", "int8"):
            raise PolyloopError(f"{what} is {v.type.dtype}; uint8 or int8 needed")
    out_dtype = str(n.array(7, "C_zero_point").dtype) if n.has(7) else a.type.dtype
    params = (_one(n, 1, "A_scale"), _one(n, 2, "A_zero_point", True),
              _one(n, 4, "B_scale"), _one(n, 5, "B_zero_point", True),
              _one(n, 6, "C_scale"), _one(n, 7, "C_zero_point", True))
    if a.type.shape == b.type.shape:
        shape = a.type.shape
        flat = all(isinstance(d, int) for d in shape) and len(shape) != 1
        if flat:
            size = int(np.prod(shape))
            a, b = (n.emit(Op.RESHAPE, v, shape=(size,)) for v in (a, b))
        y = n.b.emit_te(IntegerAdd(*params, out_dtype), a, b, name=n.hint)  # type: ignore[arg-type]
        return n.emit(Op.RESHAPE, y, shape=shape) if flat else y
    total = n.emit(Op.BINARY, _dequantized(n, a, *params[0:2]),  # type: ignore[arg-type]
                   _dequantized(n, b, *params[2:4]), fn=BinaryFn.ADD)  # type: ignore[arg-type]
    y = n.emit(Op.BINARY, total, n.const(np.array(params[4], np.float32)), fn=BinaryFn.DIV)
    y = n.emit(Op.BINARY, n.emit(Op.UNARY, y, fn=UnaryFn.ROUND),
               n.const(np.array(params[5], np.float32)), fn=BinaryFn.ADD)
    info = np.iinfo(out_dtype)
    y = n.emit(Op.UNARY, y, fn=UnaryFn.CLIP, lo=float(info.min), hi=float(info.max))
    return n.emit(Op.CAST, y, dtype=out_dtype)


def convert_dynamic_quantize(n: Node) -> tuple[Value, Value, Value]:
    """ONNX ``DynamicQuantizeLinear``: uint8 over ``[min(0, min x), max(0, max x)]``."""
    x = n.value(0)
    if x.type.dtype != "float32":
        raise PolyloopError(f"the input is {x.type.dtype}; float32 needed")
    axes = list(range(len(x.type.shape)))
    zero = n.const(np.array(0, np.float32))
    lo = n.emit(Op.BINARY, n.emit(Op.REDUCE, x, fn=ReduceFn.MIN, axes=axes), zero,
                fn=BinaryFn.MIN)
    hi = n.emit(Op.BINARY, n.emit(Op.REDUCE, x, fn=ReduceFn.MAX, axes=axes), zero,
                fn=BinaryFn.MAX)
    scale = n.emit(Op.BINARY, n.emit(Op.BINARY, hi, lo, fn=BinaryFn.SUB),
                   n.const(np.array(255, np.float32)), fn=BinaryFn.DIV)
    zp = n.emit(Op.BINARY, n.emit(Op.UNARY, lo, fn=UnaryFn.NEG), scale, fn=BinaryFn.DIV)
    zp = n.emit(Op.UNARY, n.emit(Op.UNARY, zp, fn=UnaryFn.ROUND), fn=UnaryFn.CLIP, lo=0.0,
                hi=255.0)
    y = n.emit(Op.BINARY, n.emit(Op.UNARY, n.emit(Op.BINARY, x, scale, fn=BinaryFn.DIV),
                                 fn=UnaryFn.ROUND), zp, fn=BinaryFn.ADD)
    y = n.emit(Op.UNARY, y, fn=UnaryFn.CLIP, lo=0.0, hi=255.0)
    return (n.emit(Op.CAST, y, dtype="uint8"), scale, n.emit(Op.CAST, zp, dtype="uint8"))


CONVERTERS = {"QLinearConv": convert_qlinear_conv, "QLinearMatMul": convert_qlinear_matmul,
              "MatMulInteger": convert_matmul_integer, "ConvInteger": convert_conv_integer,
              "DynamicQuantizeLinear": convert_dynamic_quantize, "QLinearAdd": convert_qlinear_add}
# ONNX Runtime's operators (domain com.microsoft) converted here
CONTRIB_OPS = frozenset({("com.microsoft", "QLinearAdd")})
