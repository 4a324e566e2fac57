# SPDX-License-Identifier: Apache-2.0
"""16-bit floats that a target stores but does not compute in (bfloat16 in C, float16 and
bfloat16 in OpenCL without ``cl_khr_fp16``, both in CUDA): every operation converts its operands
to float32, computes there and rounds the result back to nearest even, so each operation gives
what NumPy (or ``ml_dtypes``) gives for that dtype.

A target names the dtypes it stores this way (``stored_halves``) and how it converts
(``half_conversion``); ``widen`` rewrites an expression on such a dtype into its float32 form,
and the helpers below spell the conversions where a target has no built-in for them.

>>> from polyloop.ir.expr import BinOp, BinOpKind, Load
>>> x = Load("x", (), DType.BFLOAT16)
>>> inner, back = widen(BinOp(BinOpKind.ADD, x, x, DType.BFLOAT16), frozenset({DType.BFLOAT16}))
>>> str(inner.dtype), str(back)
('float32', 'bfloat16')
"""
from __future__ import annotations

import numpy as np

from ..ir.dtypes import DType
from ..ir.expr import BinOp, Cast, Const, Expr, Unary
from .writer import CodeWriter

F32 = DType.FLOAT32


def widen(e: Expr, halves: frozenset[DType]) -> tuple[Expr, DType | None] | None:
    """``(e computed in float32, the dtype to round the result to or None)`` when ``e`` is an
    operation on a stored-only dtype (its operands are cast to float32), else None. Casts are
    the printer's: they are the conversions themselves."""
    if isinstance(e, BinOp) and e.lhs.dtype in halves:
        comparison = e.op.is_comparison
        inner = BinOp(e.op, Cast(e.lhs, F32), Cast(e.rhs, F32),
                      DType.BOOL if comparison else F32)
        return inner, None if comparison else e.dtype
    if isinstance(e, Unary) and e.operand.dtype in halves:
        boolean = e.dtype is DType.BOOL
        return Unary(e.op, Cast(e.operand, F32), DType.BOOL if boolean else F32), \
            None if boolean else e.dtype
    if isinstance(e, Const) and e.dtype in halves:
        return Const(float(e.value), F32), e.dtype
    return None


def bfloat16_bits(value: float) -> int:
    """The bits of ``value`` rounded to bfloat16 (to nearest even; a NaN stays a quiet NaN).

    >>> hex(bfloat16_bits(1.0)), hex(bfloat16_bits(-2.5))
    ('0x3f80', '0xc020')
    """
    with np.errstate(over="ignore"):
        u = int(np.array([value], dtype=np.float32).view(np.uint32)[0])
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return (u >> 16) | 0x40
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def rounded(value: float, d: DType) -> float:
    """``value`` rounded to the 16-bit float dtype ``d``, as a Python float.

    >>> rounded(1.00390625, DType.BFLOAT16), rounded(1.00390625, DType.FLOAT16)
    (1.0, 1.00390625)
    """
    if d is DType.FLOAT16:
        with np.errstate(over="ignore"):
            return float(np.float16(value))
    bits = np.array([bfloat16_bits(value) << 16], dtype=np.uint32)
    return float(bits.view(np.float32)[0])


# The conversion bodies: $Q the helper qualifier, $B the 16-bit storage type. Rounding to
# nearest even adds 0x7fff plus the lowest kept bit and truncates; a NaN keeps its sign and
# payload's top bits and is made quiet, so that it cannot round to an infinity.
_C_BF16 = {
    "pl_bf16_to_f32": ["$Q float pl_bf16_to_f32($B h) {",
                       "    union { uint32_t u; float f; } v = { (uint32_t)h << 16 };",
                       "    return v.f;",
                       "}"],
    "pl_f32_to_bf16": ["$Q $B pl_f32_to_bf16(float f) {",
                       "    union { float f; uint32_t u; } v = { f };",
                       "    if ((v.u & 0x7fffffffu) > 0x7f800000u)",
                       "        return ($B)((v.u >> 16) | 0x40u);",
                       "    return ($B)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);",
                       "}"],
}
_OPENCL = {
    "pl_bf16_to_f32": ["$Q float pl_bf16_to_f32(ushort h) {",
                       "    return as_float((uint)h << 16);",
                       "}"],
    "pl_f32_to_bf16": ["$Q ushort pl_f32_to_bf16(float f) {",
                       "    uint u = as_uint(f);",
                       "    if ((u & 0x7fffffffu) > 0x7f800000u)",
                       "        return (ushort)((u >> 16) | 0x40u);",
                       "    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);",
                       "}"],
    # OpenCL 1.2 converts half without cl_khr_fp16 through vload_half / vstore_half_rte,
    # which take a pointer to half in any address space: the bits are a private ushort
    "pl_f16_to_f32": ["$Q float pl_f16_to_f32(ushort h) {",
                      "    return vload_half(0, (const half *)&h);",
                      "}"],
    "pl_f32_to_f16": ["$Q ushort pl_f32_to_f16(float f) {",
                      "    ushort h;",
                      "    vstore_half_rte(f, 0, (half *)&h);",
                      "    return h;",
                      "}"],
}
HALF_SUFFIX = {DType.FLOAT16: "f16", DType.BFLOAT16: "bf16"}


def to_float_name(d: DType) -> str:
    return f"pl_{HALF_SUFFIX[d]}_to_f32"


def from_float_name(d: DType) -> str:
    return f"pl_f32_to_{HALF_SUFFIX[d]}"


def emit_conversions(w: CodeWriter, names: set[str], *, target: str, qualifier: str,
                     storage: str) -> None:
    """Define the conversion helpers ``names`` for ``target`` ("c" or "opencl").

    >>> w = CodeWriter()
    >>> emit_conversions(w, {"pl_bf16_to_f32"}, target="opencl", qualifier="inline",
    ...                  storage="ushort")
    >>> print(w.text().splitlines()[0])
    inline float pl_bf16_to_f32(ushort h) {
    """
    table = _OPENCL if target == "opencl" else _C_BF16
    for name in sorted(names):
        for line in table[name]:
            w.line(line.replace("$Q", qualifier).replace("$B", storage))
        w.line()


__all__ = ["HALF_SUFFIX", "bfloat16_bits", "emit_conversions", "from_float_name", "rounded",
           "to_float_name", "widen"]
