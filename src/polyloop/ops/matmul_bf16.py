# SPDX-License-Identifier: Apache-2.0
"""bfloat16 matrix products summed in float32, on the AVX-512 BF16 / AMX dot-product tiles.

``matmul_bf16(a, b)`` is ``Y = sum_k float32(a[i, k]) * float32(b[k, j])`` (+ a float32 bias
per column), stored as float32 or rounded to bfloat16 (``out_dtype``), with the stages of
``matmul_int8``: ``B_g`` (``b`` in pairs along k, zero past k, stored in column panels by the
schedule), ``A_g`` (only where k is not a constant even number), ``C`` (the float32 sum) and
the output. The tiles add the pairs of a column first (``vdpbf16ps``) and flush subnormal
inputs to zero, so the result agrees with a float32 matmul of the same inputs to float32
rounding, not bit for bit.

>>> import numpy as np, polyloop as pl, ml_dtypes
>>> from polyloop import ops
>>> A = pl.placeholder((5, 6), "bfloat16", name="A")
>>> B = pl.placeholder((6, 3), "bfloat16", name="B")
>>> mod = pl.build(ops.schedule_matmul_bf16(ops.matmul_bf16(A, B)))
>>> a = np.full((5, 6), 0.5, ml_dtypes.bfloat16); b = np.full((6, 3), 2, ml_dtypes.bfloat16)
>>> float(mod(a, b)[4, 2])
6.0
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import DType
from ..ir.expr import Expr
from ..schedule import Schedule
from ..schedule.intrin_registry import TensorIntrin
from . import grouped as gr
from . import lowbit_tile as tile

PAIR = 2
OUT_DTYPES = ("float32", "bfloat16")


def matmul_bf16(a: Tensor, b: Tensor, *, bias: Tensor | None = None, out_dtype: str = "float32",
                name: str = "Y") -> Tensor:
    """``sum_k float32(a[..., i, k]) * float32(b[..., k, j]) (+ bias[j])`` as ``out_dtype``
    (``"float32"``, or ``"bfloat16"`` rounded to nearest even).

    ``a``: ``(m, k)`` or ``(batch, m, k)``; ``b``: ``(k, n)`` or ``(batch, k, n)``; both
    bfloat16. ``bias``: a float32 vector of ``n``, or None.

    >>> import polyloop as pl
    >>> A = pl.placeholder((pl.var("m"), 64), "bfloat16", name="A")
    >>> matmul_bf16(A, pl.placeholder((64, 10), "bfloat16", name="B"), out_dtype="bfloat16")
    Tensor(Y: bfloat16[m, 10])
    """
    who = "matmul_bf16"
    for what, t in (("a", a), ("b", b)):
        if not isinstance(t, Tensor) or t.ndim not in (2, 3) or t.dtype is not DType.BFLOAT16:
            raise ScheduleError(f"{who}: operand {what} must be a 2-D or 3-D bfloat16 tensor, "
                                f"got {t!r}")
    if b.ndim == 3 and (a.ndim != 3 or str(a.shape[0]) != str(b.shape[0])):
        raise ScheduleError(f"{who}: a batched b {b!r} needs an a with the same batch, got {a!r}")
    m, k_len = a.shape[-2:]
    n = b.shape[-1]
    if str(k_len) != str(b.shape[-2]):
        raise ScheduleError(f"{who}: the reduction extents differ: a is {a!r}, b is {b!r}")
    if out_dtype not in OUT_DTYPES:
        raise ScheduleError(f"{who}: out_dtype must be one of {', '.join(OUT_DTYPES)}, got "
                            f"{out_dtype!r}")
    if bias is not None and (not isinstance(bias, Tensor) or bias.dtype is not DType.FLOAT32
                             or bias.ndim != 1 or str(bias.shape[0]) != str(n)):
        raise ScheduleError(f"{who}: bias must be a float32 vector of {n} values, got {bias!r}")
    a_src = gr.grouped_a(a, k_len, PAIR, "bfloat16")
    b_g = gr.grouped_b(b, k_len, PAIR, "bfloat16")
    c = gr.grouped_products(a_src, b_g, a.shape[:-2], m, n, "float32")

    def result(*ix: Expr) -> Expr:
        value = c[ix] + bias[ix[-1]] if bias is not None else c[ix]
        return value if out_dtype == "float32" else value.astype(out_dtype)
    return te.compute(c.shape, result, name=name)


def schedule_matmul_bf16(y: Tensor, *, intrin: TensorIntrin | str | None = None,
                         rows: int | None = None, cols: int | None = None,
                         panels: int | None = None, parallel: bool = True) -> Schedule:
    """The schedule of ``y = matmul_bf16(...)``: ``schedule_matmul_int8``'s recipe on the
    host's best ``bf16`` tile (``intrin``, or ``rows x cols`` of it).

    >>> import polyloop as pl
    >>> A = pl.placeholder((20, 30), "bfloat16", name="A")
    >>> B = pl.placeholder((30, 40), "bfloat16", name="B")
    >>> sch = schedule_matmul_bf16(matmul_bf16(A, B), intrin="pl_lowbit_bf16_portable_6x32")
    >>> "tensorize=pl_lowbit_bf16_portable_6x32" in str(sch)
    True
    """
    return tile.schedule_product(y, "bf16", intrin=intrin, rows=rows, cols=cols,
                                 parallel=parallel, who="schedule_matmul_bf16", panels=panels)


__all__ = ["matmul_bf16", "schedule_matmul_bf16"]
