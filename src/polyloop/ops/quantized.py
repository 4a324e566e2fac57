# SPDX-License-Identifier: Apache-2.0
"""What the int8 operators share: zero points, the +128 offsets that bring every operand pair
to the ``uint8 x int8`` of ``vpdpbusd``, the bound that keeps int32 sums exact, and the
epilogue that turns the int32 sum into the result (int32, float32 or requantized int8/uint8).

An integer product ``sum_k (a - za) * (b - zb)`` is computed as

    sum_k a' * b'  -  zb' * sum_k a'  -  za' * sum_k b'  +  K * za' * zb'

where ``a' = a + 128`` for an int8 ``a`` (``za' = za + 128``) and ``b' = b - 128`` for a uint8
``b`` (``zb' = zb - 128``): ``a'`` is uint8 and ``b'`` int8. int32 arithmetic wraps, so every
partial term may wrap and the result is still exact whenever the true result fits in int32;
``accumulation_limit`` is the reduction length that guarantees it.

>>> accumulation_limit(255, 128), accumulation_limit(255, 255)
(65793, 33025)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import DType, as_dtype
from ..ir.expr import Const, Expr, as_expr, cast, const
from ..ir.quantize import requantize

INT32_MAX = 2**31 - 1
_EIGHT_BIT = (DType.INT8, DType.UINT8)
OUT_DTYPES = ("int32", "float32", "int8", "uint8")


def accumulation_limit(max_a: int, max_b: int) -> int:
    """The longest reduction whose int32 sum of products ``(a - za) * (b - zb)`` cannot
    overflow when ``|a - za| <= max_a`` and ``|b - zb| <= max_b``."""
    return INT32_MAX // (max_a * max_b)


def largest_difference(dtype: DType, zp: "ZeroPoint") -> int:
    """The largest ``|x - zp|`` over the values ``x`` of ``dtype`` (255 for a tensor zp)."""
    lo, hi = (0, 255) if dtype is DType.UINT8 else (-128, 127)
    if isinstance(zp.value, int):
        return max(zp.value - lo, hi - zp.value)
    return 255


@dataclass(frozen=True, slots=True)
class ZeroPoint:
    """A zero point: an int, or a tensor (0-d, or 1-d along the rows of a / columns of b)."""
    value: int | Tensor

    @property
    def known_zero(self) -> bool:
        return isinstance(self.value, int) and self.value == 0

    def at(self, index: Expr) -> Expr:
        """The zero point of row / column ``index`` as int32."""
        v = self.value
        if isinstance(v, int):
            return const(v, DType.INT32)
        return cast(DType.INT32, v[()] if v.ndim == 0 else v[index])


def zero_point(value: object, dtype: DType, extent: Expr, who: str, what: str) -> ZeroPoint:
    """``value`` checked: an int in ``dtype``'s range or a 0-d / 1-d tensor of ``dtype``."""
    if isinstance(value, bool) or not isinstance(value, (int, Tensor)):
        raise ScheduleError(f"{who}: {what} must be an int or a tensor of {dtype}, got "
                            f"{value!r:.60}")
    if isinstance(value, int):
        lo, hi = (0, 255) if dtype is DType.UINT8 else (-128, 127)
        if not lo <= value <= hi:
            raise ScheduleError(f"{who}: {what} {value} is outside the range of {dtype} "
                                f"({lo} to {hi})")
        return ZeroPoint(value)
    if value.dtype is not dtype or value.ndim > 1 or (
            value.ndim == 1 and str(value.shape[0]) != str(extent)):
        raise ScheduleError(f"{who}: {what} must be a {dtype} scalar or a vector of {extent} "
                            f"{dtype} values, got {value!r}")
    return ZeroPoint(value)


def check_operand(t: object, who: str, name: str, ndims: tuple[int, ...]) -> Tensor:
    if not isinstance(t, Tensor) or t.ndim not in ndims or t.dtype not in _EIGHT_BIT:
        raise ScheduleError(f"{who}: operand {name} must be a {' or '.join(map(str, ndims))}-D "
                            f"int8 or uint8 tensor, got {t!r}")
    return t


def check_length(k: Expr, who: str, max_a: int, max_b: int) -> None:
    """Refuse a constant reduction length beyond ``accumulation_limit`` (a symbolic one is
    checked at each call: the schedule states a limit as an assumption)."""
    limit = accumulation_limit(max_a, max_b)
    if isinstance(k, Const) and k.value > limit:
        raise ScheduleError(f"{who}: a reduction of {k.value} products of up to {max_a} x "
                            f"{max_b} may overflow the int32 sum (exact up to {limit} terms); "
                            f"split the reduction into parts of at most {limit} terms and add "
                            "their int32 results in a wider type")


@dataclass(frozen=True, slots=True)
class Offsets:
    """The operands brought to uint8 x int8: the shift added to a (0 or 128) and to b (0 or
    -128), and the zero points of the shifted operands (``za + shift_a``, ``zb + shift_b``)."""
    shift_a: int
    shift_b: int
    za: ZeroPoint
    zb: ZeroPoint

    def a_zero(self, i: Expr) -> Expr:
        return self.za.at(i) + const(self.shift_a, DType.INT32) if self.shift_a else \
            self.za.at(i)

    def b_zero(self, j: Expr) -> Expr:
        return self.zb.at(j) + const(self.shift_b, DType.INT32) if self.shift_b else \
            self.zb.at(j)

    @property
    def needs_a_sums(self) -> bool:
        """Whether ``sum_k a'`` is needed (b's shifted zero point may be nonzero)."""
        return bool(self.shift_b) or not self.zb.known_zero

    @property
    def needs_b_sums(self) -> bool:
        return bool(self.shift_a) or not self.za.known_zero


def shifted(value: Expr, shift: int, dtype: str) -> Expr:
    """``value + shift`` as ``dtype`` (uint8 a' or int8 b'); a shift of 128 flips the top bit."""
    if not shift:
        return value
    return cast(as_dtype(dtype), value.astype("int32") + shift)  # type: ignore[attr-defined]


def row_sums(a: Tensor, k_len: Expr, shift: int, name: str = "A_sum") -> Tensor:
    """``sum_k int32(a[..., i, k]) + shift``: the sums of the shifted operand along its last
    axis, int32."""
    k = te.reduce_axis((0, k_len), name="ks")
    return te.compute(a.shape[:-1], lambda *ix: te.sum(
        a[(*ix, k)].astype("int32") + shift if shift else a[(*ix, k)].astype("int32"), axis=k),
        name=name)


@dataclass(frozen=True, slots=True)
class Epilogue:
    """What follows the int32 sum: a bias (int32, per column), then nothing (``int32``), a
    scale (``float32``: dequantized), or a scale and a zero point (``int8`` / ``uint8``:
    requantized, halves to even). ``scale`` and ``out_zero_point`` may be per-column tensors."""
    out_dtype: str = "int32"
    bias: Tensor | None = None
    scale: float | Tensor | None = None
    out_zero_point: int | Tensor = 0

    def check(self, who: str, columns: Expr) -> None:
        if self.out_dtype not in OUT_DTYPES:
            raise ScheduleError(f"{who}: out_dtype must be one of {', '.join(OUT_DTYPES)}, got "
                                f"{self.out_dtype!r}")
        if (self.scale is None) != (self.out_dtype == "int32"):
            raise ScheduleError(f"{who}: a scale is needed for out_dtype {self.out_dtype!r} "
                                "(and only then): int32 keeps the sum as it is")
        for name, t, dtype in (("bias", self.bias, "int32"), ("scale", self.scale, "float32"),
                               ("out_zero_point", self.out_zero_point, self.out_dtype)):
            if isinstance(t, Tensor) and (str(t.dtype) != dtype or t.ndim > 1 or (
                    t.ndim == 1 and str(t.shape[0]) != str(columns))):
                raise ScheduleError(f"{who}: {name} must be a {dtype} scalar or a vector of "
                                    f"{columns} values, got {t!r}")

    def apply(self, acc: Expr, j: Expr) -> Expr:
        """The result of column ``j`` from its int32 sum ``acc``."""
        if self.bias is not None:
            acc = acc + _at(self.bias, j)
        if self.out_dtype == "int32":
            return acc
        scale = _at(self.scale, j) if isinstance(self.scale, Tensor) else \
            const(float(self.scale), DType.FLOAT32)  # type: ignore[arg-type]
        if self.out_dtype == "float32":
            return acc.astype("float32") * scale  # type: ignore[attr-defined]
        zp = _at(self.out_zero_point, j) if isinstance(self.out_zero_point, Tensor) else \
            as_expr(int(self.out_zero_point))
        return requantize(acc, scale, zp, self.out_dtype)


def _at(t: Tensor, j: Expr) -> Expr:
    return t[()] if t.ndim == 0 else t[j]


__all__ = ["Epilogue", "Offsets", "ZeroPoint", "accumulation_limit", "check_length",
           "largest_difference",
           "check_operand", "row_sums", "shifted", "zero_point"]
