# SPDX-License-Identifier: Apache-2.0
"""int8 matrix products with int32 sums: ONNX's ``MatMulInteger`` and ``QLinearMatMul`` (a
requantized result), batched or not, on the VNNI / AMX dot-product tiles.

``matmul_int8(a, b)`` computes ``Y = epilogue(sum_k (a[i, k] - za) * (b[k, j] - zb))`` for
uint8 or int8 ``a`` and ``b`` as stages a schedule can see and place:

- ``B_g[g, j, t]``: ``b`` (minus 128 when it is uint8) in groups of 4 along k, zero past k;
  the schedule stores it in column panels, the layout the dot-product tile reads;
- ``A_g[i, g, t]`` (only for an int8 ``a``, or a length of k that is not a constant multiple
  of 4): ``a`` (plus 128 when int8) in groups of 4, zero past k;
- ``A_sum`` / ``B_sum``: the sums of the shifted operands along k, where a zero point (or an
  offset) needs them;
- ``C``: the int32 sum of ``uint8 x int8`` products, the tensorized stage;
- ``Y``: ``C`` corrected for the zero points, then the epilogue (``quantized.Epilogue``).

>>> import numpy as np, polyloop as pl
>>> from polyloop import ops
>>> A = pl.placeholder((5, 12), "uint8", name="A"); B = pl.placeholder((12, 7), "int8", name="B")
>>> mod = pl.build(ops.schedule_matmul_int8(ops.matmul_int8(A, B, a_zero_point=3)))
>>> a = np.full((5, 12), 5, np.uint8); b = np.full((12, 7), -2, np.int8)
>>> int(mod(a, b)[4, 6])
-48
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import DType
from ..ir.dtypes import INDEX
from ..ir.expr import Const, Expr, cast
from ..schedule import Schedule
from ..schedule.intrin_registry import TensorIntrin
from . import grouped as gr
from . import lowbit_tile as tile
from . import quantized as q
from .knobs import check_knobs

GROUP = 4


def matmul_int8(a: Tensor, b: Tensor, *, a_zero_point: int | Tensor = 0,
                b_zero_point: int | Tensor = 0, bias: Tensor | None = None,
                scale: float | Tensor | None = None, out_zero_point: int | Tensor = 0,
                out_dtype: str = "int32", name: str = "Y") -> Tensor:
    """``epilogue(sum_k (a[..., i, k] - za) * (b[..., k, j] - zb))`` in int32, exactly.

    ``a``: ``(m, k)`` or ``(batch, m, k)``; ``b``: ``(k, n)`` (shared by the batch) or
    ``(batch, k, n)``; each uint8 or int8. Zero points are ints or tensors (``a``'s per row,
    ``b``'s per column). The epilogue: ``bias`` (int32, per column) is added, then
    ``out_dtype="int32"`` keeps the sum, ``"float32"`` multiplies it by ``scale`` and
    ``"int8"``/``"uint8"`` requantize it: ``saturate(round(sum * scale) + out_zero_point)``
    (``scale`` and ``out_zero_point`` per column or scalars). A constant k longer than the
    int32 sum can hold is refused.

    >>> import polyloop as pl
    >>> A = pl.placeholder((2, 8, 16), "int8", name="A")
    >>> B = pl.placeholder((16, 4), "int8", name="B")
    >>> matmul_int8(A, B, scale=0.1, out_dtype="int8")
    Tensor(Y: int8[2, 8, 4])
    """
    who = "matmul_int8"
    a = q.check_operand(a, who, "a", (2, 3))
    b = q.check_operand(b, who, "b", (2, 3))
    if b.ndim == 3 and (a.ndim != 3 or str(a.shape[0]) != str(b.shape[0])):
        raise ScheduleError(f"{who}: a batched b {b!r} needs an a with the same batch, got {a!r}")
    k_len, n = a.shape[-1], b.shape[-1]
    if str(k_len) != str(b.shape[-2]):
        raise ScheduleError(f"{who}: the reduction extents differ: a is {a!r}, b is {b!r} (a's "
                            "last dimension must equal b's second to last)")
    return _product(a, b, b.dtype, k_len, n, a_zero_point, b_zero_point,
                    q.Epilogue(out_dtype, bias, scale, out_zero_point), name, who)


def pack_int8_weight(b: np.ndarray, cols: int | None = None) -> np.ndarray:
    """A NumPy int8 or uint8 matrix ``(k, n)`` as the panels ``schedule_matmul_int8`` stores
    ``B_g`` in: ``(ceil(n / cols), ceil(k / 4), cols, 4)`` int8 (a uint8 ``b`` minus 128),
    zeros past k and n. ``cols``: the tile width of the host's tile (None) or the one of the
    intrinsic the schedule will use.

    >>> pack_int8_weight(np.ones((5, 3), np.uint8), cols=16).shape
    (1, 2, 16, 4)
    """
    if not isinstance(b, np.ndarray) or b.ndim != 2 or b.dtype not in (np.int8, np.uint8):
        raise ScheduleError(f"pack_int8_weight: b must be a 2-D int8 or uint8 array, got "
                            f"{getattr(b, 'dtype', type(b).__name__)} "
                            f"{getattr(b, 'shape', '')}")
    cols = tile.default_tile("u8s8")[1] if cols is None else cols
    check_knobs("pack_int8_weight", cols=cols)
    shifted = b.astype(np.int16) - 128 if b.dtype == np.uint8 else b
    return gr.pack_grouped(shifted.astype(np.int8), GROUP, cols)


def matmul_int8_packed(a: Tensor, packed: Tensor, n: int, *, b_dtype: str = "int8",
                       a_zero_point: int | Tensor = 0, b_zero_point: int | Tensor = 0,
                       bias: Tensor | None = None, scale: float | Tensor | None = None,
                       out_zero_point: int | Tensor = 0, out_dtype: str = "int32",
                       name: str = "Y") -> Tensor:
    """``matmul_int8(a, b, ...)`` with ``packed = pack_int8_weight(b)`` in place of ``b``
    (``b_dtype``: the dtype ``b`` had; ``b_zero_point`` is ``b``'s) and ``n`` its columns:
    nothing is packed per call. The packed tensor's sizes must be constants.

    >>> import polyloop as pl
    >>> P = pl.placeholder((2, 4, 32, 4), "int8", name="P")
    >>> matmul_int8_packed(pl.placeholder((pl.var("m"), 16), "uint8", name="A"), P, 50)
    Tensor(Y: int32[m, 50])
    """
    who = "matmul_int8_packed"
    a = q.check_operand(a, who, "a", (2, 3))
    k_len = a.shape[-1]
    gr.packed_columns(who, packed, DType.INT8, GROUP, k_len, n, "pack_int8_weight")
    if b_dtype not in ("int8", "uint8"):
        raise ScheduleError(f"{who}: b_dtype must be 'int8' or 'uint8', got {b_dtype!r}")
    return _product(a, packed, DType(b_dtype), k_len, Const(n, INDEX, weak=True), a_zero_point,
                    b_zero_point, q.Epilogue(out_dtype, bias, scale, out_zero_point), name, who)


def _product(a: Tensor, b: Tensor, b_dtype: DType, k_len: Expr, n: Expr, a_zero_point: object,
             b_zero_point: object, epilogue: q.Epilogue, name: str, who: str) -> Tensor:
    """The stages of ``matmul_int8``; ``b`` is the matrix or its packed panels."""
    m = a.shape[-2]
    za = q.zero_point(a_zero_point, a.dtype, m, who, "a_zero_point")
    zb = q.zero_point(b_zero_point, b_dtype, n, who, "b_zero_point")
    q.check_length(k_len, who, q.largest_difference(a.dtype, za),
                   q.largest_difference(b_dtype, zb))
    epilogue.check(who, n)
    off = q.Offsets(128 if a.dtype is DType.INT8 else 0, -128 if b_dtype is DType.UINT8 else 0,
                    za, zb)
    packed = b.ndim == 4
    a_src = gr.grouped_a(a, k_len, GROUP, "uint8", _shift(off.shift_a, "uint8"))
    # the sums come first: the result is computed as each tile of C is written back
    a_sum = q.row_sums(a, k_len, off.shift_a) if off.needs_a_sums else None
    b_sum = None
    if off.needs_b_sums:
        b_sum = _packed_sums(b, n) if packed else _column_sums(b, k_len, off.shift_b)
    b_g = b if packed else gr.grouped_b(b, k_len, GROUP, "int8", _shift(off.shift_b, "int8"))
    c = gr.grouped_products(a_src, b_g, a.shape[:-2], m, n, "int32")

    def result(*ix: Expr) -> Expr:
        *batch, i, j = ix
        acc = c[ix]
        if a_sum is not None:
            acc = acc - off.b_zero(j) * a_sum[(*batch, i)]
        if b_sum is not None:
            acc = acc - off.a_zero(i) * b_sum[(*batch, j)[-b_sum.ndim:]]
        if a_sum is not None and b_sum is not None:
            acc = acc + cast(DType.INT32, k_len) * off.a_zero(i) * off.b_zero(j)
        return epilogue.apply(acc, j)
    return te.compute(c.shape, result, name=name)


def _packed_sums(packed: Tensor, n: Expr) -> Tensor:
    """``B_sum[j]``: the sums of packed panels (their zeros add nothing)."""
    _, kg, cols, group = (d.value for d in packed.shape)   # type: ignore[attr-defined]
    g = te.reduce_axis((0, kg), name="gb")
    t = te.reduce_axis((0, group), name="tb")
    return te.compute((n,), lambda j: te.sum(
        packed[j // cols, g, j % cols, t].astype("int32"), axis=[g, t]), name="B_sum")


def _shift(shift: int, dtype: str) -> Callable[[Expr], Expr] | None:
    return (lambda v: q.shifted(v, shift, dtype)) if shift else None


def _column_sums(b: Tensor, k_len: Expr, shift: int) -> Tensor:
    """``B_sum[..., j] = sum_k int32(b[..., k, j]) + shift`` (the shifted operand's sums)."""
    k = te.reduce_axis((0, k_len), name="kb")

    def body(*ix: Expr) -> Expr:
        value = b[(*ix[:-1], k, ix[-1])].astype("int32")
        return te.sum(value + shift if shift else value, axis=k)
    return te.compute((*b.shape[:-2], b.shape[-1]), body, name="B_sum")


def schedule_matmul_int8(y: Tensor, *, intrin: TensorIntrin | str | None = None,
                         rows: int | None = None, cols: int | None = None,
                         panels: int | None = None, parallel: bool = True) -> Schedule:
    """The schedule of ``y = matmul_int8(...)`` on a dot-product tile (``intrin``; default the
    host's best ``u8s8`` tile, ``rows x cols`` of it): ``B_g`` is stored in panels of
    ``cols`` columns, each packed by the thread that owns it; each ``rows x cols`` tile of
    ``C`` is summed in a local buffer by one call per tile over all of k, then corrected and
    written as ``y`` (the epilogue runs on the tile, vectorized). Tiles cut by the edges run
    the loops. A symbolic k is checked at each call against the int32 bound.

    >>> import polyloop as pl
    >>> A = pl.placeholder((pl.var("m"), 64), "uint8", name="A")
    >>> B = pl.placeholder((64, 48), "int8", name="B")
    >>> sch = schedule_matmul_int8(matmul_int8(A, B), intrin="pl_lowbit_u8s8_portable_6x32")
    >>> "tensorize=pl_lowbit_u8s8_portable_6x32" in str(sch)
    True
    """
    return tile.schedule_product(y, "u8s8", intrin=intrin, rows=rows, cols=cols,
                                 parallel=parallel, who="schedule_matmul_int8", panels=panels)


__all__ = ["matmul_int8", "matmul_int8_packed", "pack_int8_weight", "schedule_matmul_int8"]
