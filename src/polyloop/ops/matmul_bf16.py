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

import numpy as np

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import INDEX, DType, bfloat16_numpy
from ..ir.expr import Const, Expr
from ..schedule import Schedule
from ..schedule.intrin_registry import TensorIntrin
from . import grouped as gr
from . import lowbit_tile as tile
from .knobs import check_knobs

PAIR = 2
OUT_DTYPES = ("float32", "bfloat16")
# operand dtypes: bfloat16, or float32 rounded to it as the operand is grouped
ROUNDED = (DType.BFLOAT16, DType.FLOAT32)


def matmul_bf16(a: Tensor, b: Tensor, *, bias: Tensor | None = None, out_dtype: str = "float32",
                name: str = "Y") -> Tensor:
    """``sum_k float32(a[..., i, k]) * float32(b[..., k, j]) (+ bias[j])`` as ``out_dtype``
    (``"float32"``, or ``"bfloat16"`` rounded to nearest even).

    ``a``: ``(..., m, k)``; ``b``: ``(k, n)`` or ``(..., k, n)`` with ``a``'s leading axes; each
    bfloat16, or float32 rounded to bfloat16 (to nearest even) as it is grouped (a stage
    ``A_g`` / ``B_g``: a float32 operand is read once, in the grouping the tiles take).
    ``bias``: a float32 vector of ``n``, or None.

    >>> import polyloop as pl
    >>> A = pl.placeholder((pl.var("m"), 64), "bfloat16", name="A")
    >>> matmul_bf16(A, pl.placeholder((64, 10), "bfloat16", name="B"), out_dtype="bfloat16")
    Tensor(Y: bfloat16[m, 10])
    """
    who = "matmul_bf16"
    for what, t in (("a", a), ("b", b)):
        if not isinstance(t, Tensor) or t.ndim < 2 or t.dtype not in ROUNDED:
            raise ScheduleError(f"{who}: operand {what} must be a bfloat16 (or float32) tensor "
                                f"of 2 axes or more, got {t!r}")
    if b.ndim > 2 and (a.ndim != b.ndim or [str(d) for d in a.shape[:-2]]
                       != [str(d) for d in b.shape[:-2]]):
        raise ScheduleError(f"{who}: a batched b {b!r} needs an a with the same batch axes, "
                            f"got {a!r}")
    m, k_len = a.shape[-2:]
    n = b.shape[-1]
    if str(k_len) != str(b.shape[-2]):
        raise ScheduleError(f"{who}: the reduction extents differ: a is {a!r}, b is {b!r}")
    if out_dtype not in OUT_DTYPES:
        raise ScheduleError(f"{who}: out_dtype must be one of {', '.join(OUT_DTYPES)}, got "
                            f"{out_dtype!r}")
    _check_bias(who, bias, n)
    a_src = gr.grouped_a(a, k_len, PAIR, "bfloat16", rounding(a))
    b_g = gr.grouped_b(b, k_len, PAIR, "bfloat16", rounding(b))
    c = gr.grouped_products(a_src, b_g, a.shape[:-2], m, n, "float32")
    return _output(c, bias, out_dtype, name)


def rounding(t: Tensor):
    """The conversion of a float32 operand's values to bfloat16 (None for a bfloat16 one)."""
    return (lambda v: v.astype("bfloat16")) if t.dtype is DType.FLOAT32 else None


def _check_bias(who: str, bias: Tensor | None, n: Expr) -> None:
    if bias is not None and (not isinstance(bias, Tensor) or bias.dtype is not DType.FLOAT32
                             or bias.ndim != 1 or str(bias.shape[0]) != str(n)):
        raise ScheduleError(f"{who}: bias must be a float32 vector of {n} values, got {bias!r}")


def _output(c: Tensor, bias: Tensor | None, out_dtype: str, name: str) -> Tensor:
    def result(*ix: Expr) -> Expr:
        value = c[ix] + bias[ix[-1]] if bias is not None else c[ix]
        return value if out_dtype == "float32" else value.astype(out_dtype)
    return te.compute(c.shape, result, name=name)


def pack_bf16_weight(b: np.ndarray, cols: int | None = None) -> np.ndarray:
    """A NumPy float32 (or bfloat16) matrix ``(k, n)`` rounded to bfloat16 (to nearest even)
    and stored as the panels ``schedule_matmul_bf16`` reads: ``(ceil(n / cols), ceil(k / 2),
    cols, 2)``, zeros past k and n. ``cols``: the width of the host's tile (None) or the one of
    the intrinsic the schedule will use.

    >>> pack_bf16_weight(np.ones((5, 3), np.float32), cols=32).shape
    (1, 3, 32, 2)
    """
    rounded, cols = bf16_weight("pack_bf16_weight", "b", b, 2, cols)
    return gr.pack_grouped(rounded, PAIR, cols)


def bf16_weight(who: str, what: str, w: object, ndim: int, cols: int | None
                ) -> tuple[np.ndarray, int]:
    """The ``ndim``-D float32 or bfloat16 array ``w`` of the packer ``who`` rounded to
    bfloat16 (to nearest even), and the panel width: ``cols``, or the host's tile's where
    None; else a ``ScheduleError`` naming ``what``.

    >>> bf16_weight("pack", "b", np.ones((2, 3), np.float32), 2, 16)[0].dtype.name
    'bfloat16'
    """
    bf16 = bfloat16_numpy()
    if not isinstance(w, np.ndarray) or w.ndim != ndim or w.dtype not in (np.dtype(np.float32),
                                                                           bf16):
        raise ScheduleError(f"{who}: {what} must be a {ndim}-D float32 or bfloat16 array, got "
                            f"{getattr(w, 'dtype', type(w).__name__)} {getattr(w, 'shape', '')}")
    cols = tile.default_tile("bf16")[1] if cols is None else cols
    check_knobs(who, cols=cols)
    return w.astype(bf16), cols


def matmul_bf16_packed(a: Tensor, packed: Tensor, n: int, *, bias: Tensor | None = None,
                       out_dtype: str = "float32", name: str = "Y") -> Tensor:
    """``matmul_bf16(a, b, ...)`` with ``packed = pack_bf16_weight(b)`` in place of ``b`` and
    ``n`` its columns: nothing is packed per call. ``a``: bfloat16 or float32 (rounded as it
    is grouped), any number of leading axes; the packed tensor's sizes must be constants.

    >>> import polyloop as pl
    >>> P = pl.placeholder((2, 8, 32, 2), "bfloat16", name="P")
    >>> matmul_bf16_packed(pl.placeholder((pl.var("m"), 16), "float32", name="A"), P, 50)
    Tensor(Y: float32[m, 50])
    """
    who = "matmul_bf16_packed"
    if not isinstance(a, Tensor) or a.ndim < 2 or a.dtype not in ROUNDED:
        raise ScheduleError(f"{who}: operand a must be a bfloat16 or float32 tensor of 2 axes "
                            f"or more, got {a!r}")
    k_len = a.shape[-1]
    gr.packed_columns(who, packed, DType.BFLOAT16, PAIR, k_len, n, "pack_bf16_weight")
    if out_dtype not in OUT_DTYPES:
        raise ScheduleError(f"{who}: out_dtype must be one of {', '.join(OUT_DTYPES)}, got "
                            f"{out_dtype!r}")
    width = Const(n, INDEX, weak=True)
    _check_bias(who, bias, width)
    a_src = gr.grouped_a(a, k_len, PAIR, "bfloat16", rounding(a))
    c = gr.grouped_products(a_src, packed, a.shape[:-2], a.shape[-2], width, "float32")
    return _output(c, bias, out_dtype, name)


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


__all__ = ["matmul_bf16", "matmul_bf16_packed", "pack_bf16_weight", "schedule_matmul_bf16"]
