# SPDX-License-Identifier: Apache-2.0
"""PT2E's quantize and dequantize operators (``quantized_decomposed``, what
``convert_pt2e`` leaves around the layers it quantized) computed as PyTorch defines them:

- ``quantize_per_tensor(x, scale, zero_point, quant_min, quant_max, dtype)``:
  ``clamp(round(x * (1 / scale)) + zero_point, quant_min, quant_max)`` in float32 (halves to
  even), then ``dtype``;
- ``dequantize_per_tensor(q, scale, zero_point, ...)``: ``(float32(q) - zero_point) * scale``;
- ``quantize_per_channel`` / ``dequantize_per_channel``: the same with one scale and zero
  point per index of ``axis``, in the scales' dtype (float64 as the observers keep them).

Scales and zero points must be constants (numbers, or constant tensors for the ``.tensor``
overloads and per channel); the integer kernels that replace a quantized layer with its
``quantize`` and ``dequantize`` calls are chosen by ``graph.torch_qdq``.
"""
from __future__ import annotations

import numpy as np

from ..ir import Op, Value
from ..kinds import BinaryFn, UnaryFn
from .context import Call, Unsupported
from .math import cast


def constant_numbers(c: Call, k: int, name: str) -> np.ndarray:
    """Argument ``k``: a number or a constant tensor, as a flat array."""
    v = c.arg(k, name)
    if isinstance(v, Value):
        raise Unsupported(f"its {name} is computed by the model (dynamic quantization); only "
                          "constant scales and zero points are supported")
    if c.importer.is_constant(v):
        return c.importer.array(v).reshape(-1)
    return np.asarray([v]).reshape(-1)


def _number(c: Call, k: int, name: str) -> float:
    data = constant_numbers(c, k, name)
    if data.size != 1:
        raise Unsupported(f"its {name} has {data.size} values; one is expected per tensor")
    return float(data[0])


def _emit(c: Call, fn: BinaryFn, v: Value, data: np.ndarray, hint: str) -> Value:
    return c.emit(Op.BINARY, v, c.constant(data, str(data.dtype)), fn=fn,
                  name=f"{c.name}_{hint}")


def _quantized(c: Call, y: Value, zero: np.ndarray) -> Value:
    """``clamp(round(y) + zero, quant_min, quant_max)`` as the result's dtype."""
    y = c.emit(Op.UNARY, y, fn=UnaryFn.ROUND, name=f"{c.name}_round")
    y = _emit(c, BinaryFn.ADD, y, zero.astype(y.type.dtype), "zero")
    y = c.emit(Op.UNARY, y, fn=UnaryFn.CLIP, lo=float(c.arg(3, "quant_min")),
               hi=float(c.arg(4, "quant_max")), name=f"{c.name}_clip")
    return cast(c, y, c.out_type().dtype)


def quantize_per_tensor(c: Call) -> Value:
    x = c.value(0)
    if x.type.dtype != "float32":
        raise Unsupported(f"quantizing a {x.type.dtype} tensor; float32 is supported")
    inverse = np.float32(1.0 / _number(c, 1, "scale"))
    y = _emit(c, BinaryFn.MUL, x, np.asarray(inverse), "scaled")
    return _quantized(c, y, np.asarray(_number(c, 2, "zero_point"), np.float32))


def dequantize_per_tensor(c: Call) -> Value:
    y = cast(c, c.value(0), c.out_type().dtype)
    y = _emit(c, BinaryFn.SUB, y, np.asarray(_number(c, 2, "zero_point"), y.type.dtype), "zero")
    return _emit(c, BinaryFn.MUL, y, np.asarray(_number(c, 1, "scale"), y.type.dtype), "scale")


def _per_channel(c: Call) -> tuple[Value, np.ndarray, np.ndarray]:
    """(the input, the scales and the zero points shaped to broadcast along ``axis``)."""
    x = c.value(0)
    rank = len(x.type.shape)
    axis = int(c.arg(3, "axis"))
    scales = constant_numbers(c, 1, "scales")
    zeros = constant_numbers(c, 2, "zero_points") if c.has(2, "zero_points") else \
        np.zeros(scales.size, np.int64)
    if not -rank <= axis < rank or scales.size != zeros.size:
        raise Unsupported(f"axis {axis} of a rank-{rank} tensor with {scales.size} scales "
                          f"and {zeros.size} zero points")
    shape = [1] * rank
    shape[axis % rank] = scales.size
    dtype = "float64" if scales.dtype == np.float64 else "float32"
    return x, scales.astype(dtype).reshape(shape), zeros.astype(dtype).reshape(shape)


def quantize_per_channel(c: Call) -> Value:
    x, scales, zeros = _per_channel(c)
    y = cast(c, x, str(scales.dtype))
    return _quantized(c, _emit(c, BinaryFn.MUL, y, 1.0 / scales, "scaled"), zeros)


def dequantize_per_channel(c: Call) -> Value:
    x, scales, zeros = _per_channel(c)
    y = _emit(c, BinaryFn.SUB, cast(c, x, str(scales.dtype)), zeros, "zero")
    return cast(c, _emit(c, BinaryFn.MUL, y, scales, "scale"), c.out_type().dtype, "out")


QUANTIZED = {"quantize_per_tensor": quantize_per_tensor,
             "dequantize_per_tensor": dequantize_per_tensor,
             "quantize_per_channel": quantize_per_channel,
             "dequantize_per_channel": dequantize_per_channel}
