# SPDX-License-Identifier: Apache-2.0
"""The stages that bring a matrix product to the dot-product tiles: the operands in *groups*
along k (4 int8 values for ``vpdpbusd``, 2 bfloat16 for ``vdpbf16ps``) and the sum over the
groups. Past the end of k a group holds zeros, so any length of k (symbolic included) is
summed by whole groups.

>>> import polyloop as pl
>>> A = pl.placeholder((3, 5), "bfloat16", name="A")
>>> grouped_a(A, A.shape[1], 2, "bfloat16")
Tensor(A_g: bfloat16[3, 3, 2])
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import INDEX, DType, as_dtype
from ..ir.elementwise import where
from ..ir.expr import Const, Expr, const
from .knobs import check_knobs


def group_count(k_len: Expr, group: int) -> Expr:
    """``ceil(k / group)``: a constant when k is one.

    >>> group_count(Const(5, INDEX, weak=True), 4)
    <Const 2>
    """
    if isinstance(k_len, Const):
        return Const(-(-k_len.value // group), INDEX, weak=True)
    return (k_len + group - 1) // group


def whole_groups(k_len: Expr, group: int) -> bool:
    """Whether k is a constant multiple of the group (no zeros to add)."""
    return isinstance(k_len, Const) and k_len.value % group == 0


def _padded(value: Expr, k: Expr, k_len: Expr, group: int, dtype: str) -> Expr:
    if whole_groups(k_len, group):
        return value
    return where(k < k_len, value, const(0, as_dtype(dtype)))


def grouped_a(a: Tensor, k_len: Expr, group: int, dtype: str,
              convert: Callable[[Expr], Expr] | None = None) -> Tensor:
    """``a`` itself where k is whole groups and nothing is converted; else the stage
    ``A_g[..., i, g, t] = convert(a[..., i, group * g + t])`` (``dtype``, zero past k)."""
    if convert is None and whole_groups(k_len, group):
        return a
    kg = group_count(k_len, group)

    def body(*ix: Expr) -> Expr:
        *lead, g, t = ix
        k = group * g + t
        value = a[(*lead, k)]
        return _padded(convert(value) if convert else value, k, k_len, group, dtype)
    return te.compute((*a.shape[:-1], kg, group), body, name="A_g")


def grouped_b(b: Tensor, k_len: Expr, group: int, dtype: str,
              convert: Callable[[Expr], Expr] | None = None) -> Tensor:
    """``B_g[..., g, j, t] = convert(b[..., group * g + t, j])`` (``dtype``, zero past k)."""
    kg = group_count(k_len, group)

    def body(*ix: Expr) -> Expr:
        *lead, g, j, t = ix
        k = group * g + t
        value = b[(*lead, k, j)]
        return _padded(convert(value) if convert else value, k, k_len, group, dtype)
    return te.compute((*b.shape[:-2], kg, b.shape[-1], group), body, name="B_g")


def grouped_products(a_src: Tensor, b_g: Tensor, batch: tuple[Expr, ...], m: Expr, n: Expr,
                     acc: str) -> Tensor:
    """``C[..., i, j] = sum_{g, t} acc(a[..., i, g, t]) * acc(B_g[..., g, j, t])``, with ``a``
    grouped (``A_g``) or read as ``a[..., i, group * g + t]``. ``B_g`` may lack the batch, or
    be panels packed ahead of time: ``(panels, kg, cols, group)`` read at
    ``[j // cols, g, j % cols, t]`` (``pack_grouped``)."""
    packed = b_g.is_placeholder
    kg, group = b_g.shape[-3], b_g.shape[-1].value   # type: ignore[attr-defined]
    cols = b_g.shape[-2].value if packed else None   # type: ignore[attr-defined]
    g = te.reduce_axis((0, kg), name="g")
    t = te.reduce_axis((0, group), name="t")
    grouped = a_src.name == "A_g"
    b_lead = b_g.ndim - 3

    def body(*ix: Expr) -> Expr:
        *lead, i, j = ix
        av = a_src[(*lead, i, g, t)] if grouped else a_src[(*lead, i, group * g + t)]
        if packed:
            bv = b_g[j // cols, g, j % cols, t]
        else:
            bv = b_g[(*lead[len(lead) - b_lead:], g, j, t)] if b_lead else b_g[g, j, t]
        return te.sum(av.astype(acc) * bv.astype(acc), axis=[g, t])
    return te.compute((*batch, m, n), body, name="C")


def pack_grouped(b: np.ndarray, group: int, cols: int, dtype: np.dtype | None = None
                 ) -> np.ndarray:
    """A NumPy ``(k, n)`` matrix as ``(ceil(n / cols), ceil(k / group), cols, group)``
    panels, zeros past k and past n: the layout the schedules store ``B_g`` in.

    >>> pack_grouped(np.arange(6).reshape(3, 2), 2, 4)[0, :, 0]
    array([[0, 2],
           [4, 0]])
    """
    k, n = b.shape
    kg, panels = -(-k // group), -(-n // cols)
    full = np.zeros((kg * group, panels * cols), dtype or b.dtype)
    full[:k, :n] = b
    return np.ascontiguousarray(full.reshape(kg, group, panels, cols).transpose(2, 0, 3, 1))


def packed_columns(who: str, packed: object, dtype: DType, group: int, k_len: Expr, n: int,
                   packer: str) -> int:
    """The panel width of ``packed``, checked to be ``pack_grouped``'s panels of a ``(k_len,
    n)`` matrix in ``dtype`` (constant sizes, groups of ``group``; ``n`` a valid knob);
    ``packer`` names the function that makes them, for the error."""
    if not isinstance(packed, Tensor) or packed.ndim != 4 or packed.dtype is not dtype \
            or not all(isinstance(d, Const) for d in packed.shape) \
            or packed.shape[3].value != group:    # type: ignore[attr-defined]
        raise ScheduleError(f"{who}: packed must be a (panels, k / {group}, cols, {group}) "
                            f"{dtype.value} tensor of constant sizes ({packer}), got {packed!r}")
    panels, kg, cols, _ = (d.value for d in packed.shape)   # type: ignore[attr-defined]
    check_knobs(who, n=n)
    if panels != -(-n // cols) or not (isinstance(k_len, Const)
                                       and -(-k_len.value // group) == kg):
        raise ScheduleError(f"{who}: {packed!r} does not hold a ({k_len}, {n}) matrix in panels "
                            f"of {cols} columns; pack it with {packer}(b, {cols})")
    return cols


def pack_grouped_window(w: np.ndarray, group: int, cols: int) -> np.ndarray:
    """NumPy convolution weights ``(K, C, R, S)`` as ``(ceil(K / cols), R, S, ceil(C / group),
    cols, group)`` panels, zeros past K and past C: the layout the low-bit convolutions read
    packed weights in (``panels[k // cols, r, s, g, k % cols, t] = w[k, group * g + t, r, s]``).

    >>> pack_grouped_window(np.ones((3, 5, 1, 1)), 4, 8).shape
    (1, 1, 1, 2, 8, 4)
    """
    k_out, c_in, r, s = w.shape
    groups, panels = -(-c_in // group), -(-k_out // cols)
    full = np.zeros((panels * cols, groups * group, r, s), w.dtype)
    full[:k_out, :c_in] = w
    # (panel, column, g, t, r, s) -> (panel, r, s, g, column, t)
    return np.ascontiguousarray(
        full.reshape(panels, cols, groups, group, r, s).transpose(0, 4, 5, 2, 1, 3))
