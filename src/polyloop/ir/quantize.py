# SPDX-License-Identifier: Apache-2.0
"""Saturating casts and linear (de)quantization of expressions, with ONNX's semantics.

- ``saturate(x, "int8")``: ``x`` converted to an integer dtype, values beyond its range
  clamped to the range (a float is truncated toward zero, as ``astype`` does).
- ``requantize(x, scale, zero_point, "int8")``: ``saturate(round(float32(x) * scale) +
  zero_point)``: an int32 accumulator brought back to 8 bits. ``round`` takes halves to even
  (``np.round``, ONNX's rounding); the product and the sum are computed in float32.
- ``quantize_linear(x, scale, zero_point, "uint8")``: ONNX ``QuantizeLinear``,
  ``saturate(round(x / scale) + zero_point)`` in float32.
- ``dequantize_linear(q, scale, zero_point)``: ONNX ``DequantizeLinear``,
  ``float32(int32(q) - zero_point) * scale``.

``scale`` and ``zero_point`` are numbers or expressions (an element of a per-channel tensor).
The NumPy reference of ``requantize`` is
``np.clip(np.round(x.astype(np.float32) * np.float32(scale)) + zero_point, lo, hi).astype(dtype)``.

>>> import polyloop as pl
>>> C = pl.placeholder((4,), "int32", name="C")
>>> str(pl.saturate(C[0], "int8"))
'int8(min(max(C[0], -128), 127))'
>>> str(pl.requantize(C[0], 0.5, 3, "uint8"))
'uint8(where(round(float32(C[0]) * 0.5) + 3.0 < 0.0, 0.0, where(round(float32(C[0]) * 0.5) + 3.0 > 255.0, 255.0, round(float32(C[0]) * 0.5) + 3.0)))'
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from .dtypes import DType, as_dtype
from .nodes import (BinOpKind, Const, Expr, ExprLike, UnaryKind, as_expr, binop, cast, const,
                    select, unary)


def _int_target(dtype: object, who: str) -> DType:
    d = as_dtype(dtype)
    if not d.is_int:
        raise DTypeError(f"{who}: the target dtype must be an integer type (int8, uint8, int16, "
                         f"int32, int64), got {d}")
    return d


def saturate(x: ExprLike, dtype: object) -> Expr:
    """``x`` as the integer ``dtype``, values beyond its range clamped to the range.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.saturate(A[0], "uint8"))
    'uint8(where(A[0] < 0.0, 0.0, where(A[0] > 255.0, 255.0, A[0])))'
    """
    d = _int_target(dtype, "saturate")
    e = as_expr(x)
    info = np.iinfo(d.numpy)
    lo, hi = int(info.min), int(info.max)
    if e.dtype is DType.BOOL:
        return cast(d, e)
    if e.dtype.is_float:
        # compares and selects, not min / max: those carry NaN through at a cost in every
        # lane, and a NaN has no integer value either way
        low, high = (const(v, e.dtype) for v in _float_bounds(e.dtype, lo, hi))
        return cast(d, select(binop(BinOpKind.LT, e, low), low,
                              select(binop(BinOpKind.GT, e, high), high, e)))
    own = np.iinfo(e.dtype.numpy)
    if lo > own.min:
        e = binop(BinOpKind.MAX, e, const(lo, e.dtype))
    if hi < own.max:
        e = binop(BinOpKind.MIN, e, const(hi, e.dtype))
    return cast(d, e)


def _float_bounds(d: DType, lo: int, hi: int) -> tuple[float, float]:
    """The integer range ``[lo, hi]`` as values of the float dtype ``d`` inside it (2**31 - 1
    is no float32: its neighbour below is the bound, so that the conversion stays defined)."""
    t = np.float32 if d in (DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16) else np.float64
    lo_f, hi_f = t(lo), t(hi)
    if int(hi_f) > hi:
        hi_f = np.nextafter(hi_f, t(0))
    if int(lo_f) < lo:
        lo_f = np.nextafter(lo_f, t(0))
    return float(lo_f), float(hi_f)


def _float32(v: ExprLike, what: str) -> Expr:
    e = as_expr(v)
    if isinstance(e, Const) and e.weak:
        return const(float(e.value), DType.FLOAT32)
    if e.dtype is DType.BOOL:
        raise DTypeError(f"{what} must be a number, got the condition {e}")
    return e if e.dtype is DType.FLOAT32 else cast(DType.FLOAT32, e)


def requantize(x: ExprLike, scale: ExprLike, zero_point: ExprLike = 0,
               dtype: object = "int8") -> Expr:
    """``saturate(round(float32(x) * scale) + zero_point, dtype)`` in float32, halves to even.

    >>> import numpy as np, polyloop as pl
    >>> C = pl.placeholder((5,), "int32", name="C")
    >>> Y = pl.compute((5,), lambda i: pl.requantize(C[i], 0.5, 1, "int8"), name="Y")
    >>> pl.build(Y)(np.array([1, 3, -5, 1000, -1000], "int32")).tolist()
    [1, 3, -1, 127, -128]
    """
    d = _int_target(dtype, "requantize")
    scaled = unary(UnaryKind.ROUND, binop(BinOpKind.MUL, _float32(x, "requantize: x"),
                                          _float32(scale, "requantize: scale")))
    return saturate(_plus(scaled, _float32(zero_point, "requantize: zero_point")), d)


def quantize_linear(x: ExprLike, scale: ExprLike, zero_point: ExprLike = 0,
                    dtype: object = "uint8") -> Expr:
    """ONNX ``QuantizeLinear``: ``saturate(round(x / scale) + zero_point, dtype)`` in float32.

    >>> import numpy as np, polyloop as pl
    >>> X = pl.placeholder((4,), "float32", name="X")
    >>> Q = pl.compute((4,), lambda i: pl.quantize_linear(X[i], 0.5, 10, "uint8"), name="Q")
    >>> pl.build(Q)(np.array([0.25, 0.75, -100.0, 1.0], "float32")).tolist()
    [10, 12, 0, 12]
    """
    d = _int_target(dtype, "quantize_linear")
    scaled = unary(UnaryKind.ROUND, binop(BinOpKind.DIV, _float32(x, "quantize_linear: x"),
                                          _float32(scale, "quantize_linear: scale")))
    return saturate(_plus(scaled, _float32(zero_point, "quantize_linear: zero_point")), d)


def _plus(value: Expr, zero_point: Expr) -> Expr:
    """``value + zero_point``, or ``value`` for a zero point of 0."""
    if isinstance(zero_point, Const) and zero_point.value == 0:
        return value
    return binop(BinOpKind.ADD, value, zero_point)


def dequantize_linear(q: ExprLike, scale: ExprLike, zero_point: ExprLike = 0) -> Expr:
    """ONNX ``DequantizeLinear``: ``float32(int32(q) - int32(zero_point)) * scale``.

    >>> import numpy as np, polyloop as pl
    >>> Q = pl.placeholder((3,), "uint8", name="Q")
    >>> X = pl.compute((3,), lambda i: pl.dequantize_linear(Q[i], 0.5, 128), name="X")
    >>> pl.build(X)(np.array([0, 128, 255], "uint8")).tolist()
    [-64.0, 0.0, 63.5]
    """
    e, z = as_expr(q), as_expr(zero_point)
    for v, what in ((e, "q"), (z, "zero_point")):
        if not v.dtype.is_int:
            raise DTypeError(f"dequantize_linear: {what} must be an integer, got {v.dtype} {v}")
    diff = binop(BinOpKind.SUB, cast(DType.INT32, e), z if isinstance(z, Const) and z.weak
                 else cast(DType.INT32, z))
    return binop(BinOpKind.MUL, cast(DType.FLOAT32, diff),
                 _float32(scale, "dequantize_linear: scale"))


__all__ = ["dequantize_linear", "quantize_linear", "requantize", "saturate"]
