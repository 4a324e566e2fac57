# SPDX-License-Identifier: Apache-2.0
"""Matrix products on a right operand packed ahead of time: the panels ``schedule_matmul``
copies B into on every call, made once when B is a constant (a model's dense weights).

``pack_matmul_weight(b, nr)`` turns a NumPy ``(k, n)`` matrix into ``ceil(n / nr)`` column
panels, ``packed[j // nr, k, j % nr]`` (zeros past column ``n``), and
``matmul_packed(a, packed, n)`` is the product that reads them. ``schedule_matmul`` schedules it
as it does ``matmul``, without the copy: for BERT's 768 x 3072 weights the copy moves 9 MB per
call. ``matmul_panel_width()`` is the panel width of the default schedule.

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import matmul_packed, pack_matmul_weight, schedule_matmul
>>> b = np.ones((3, 5), "float32")
>>> packed = pack_matmul_weight(b, 8); packed.shape
(1, 3, 8)
>>> A = pl.placeholder((4, 3), name="A"); P = pl.placeholder(packed.shape, name="P")
>>> mod = pl.build(schedule_matmul(matmul_packed(A, P, 5), lanes=8, nr_vectors=1))
>>> c = mod(np.ones((4, 3), "float32"), packed)
>>> c.shape, float(c[3, 4])
((4, 5), 3.0)
"""
from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.expr import Const
from .knobs import check_knobs, default_lanes
from .matmul import DEFAULT_NR_VECTORS, reduction_axis_name


def matmul_panel_width(dtype: str = "float32") -> int:
    """Columns per panel of B in the default ``schedule_matmul`` (four vectors).

    >>> matmul_panel_width() % 4
    0
    """
    return DEFAULT_NR_VECTORS * default_lanes(dtype)


def pack_matmul_weight(b: np.ndarray, nr: int) -> np.ndarray:
    """A NumPy matrix ``(k, n)`` as ``(ceil(n / nr), k, nr)`` column panels, each contiguous
    along k; the columns past ``n`` in the last panel are zeros.

    >>> pack_matmul_weight(np.arange(6, dtype="float32").reshape(2, 3), 2)[1]
    array([[2., 0.],
           [5., 0.]], dtype=float32)
    """
    if not isinstance(b, np.ndarray) or b.ndim != 2:
        raise ScheduleError(f"pack_matmul_weight: b must be a 2-D array (k, n), got "
                            f"{getattr(b, 'shape', type(b).__name__)}")
    check_knobs("pack_matmul_weight", nr=nr)
    k, n = b.shape
    panels = -(-n // nr)
    full = np.zeros((k, panels * nr), b.dtype)
    full[:, :n] = b
    return np.ascontiguousarray(full.reshape(k, panels, nr).transpose(1, 0, 2))


def matmul_packed(a: Tensor, packed: Tensor, n: int) -> Tensor:
    """``matmul(a, b)`` with ``packed = pack_matmul_weight(b, nr)`` in place of ``b`` (``nr``
    is the packed tensor's last axis) and ``n`` the columns of ``b``; the result is named ``C``.

    >>> import polyloop as pl
    >>> matmul_packed(pl.placeholder((pl.var("m"), 7), name="A"),
    ...               pl.placeholder((2, 7, 16), name="P"), 20)
    Tensor(C: float32[m, 20])
    """
    who = "matmul_packed"
    if not isinstance(a, Tensor) or a.ndim != 2:
        raise ScheduleError(f"{who}: operand a must be a 2-D tensor, got {a!r}")
    if not isinstance(packed, Tensor) or packed.ndim != 3 \
            or not all(isinstance(d, Const) for d in packed.shape):
        raise ScheduleError(f"{who}: packed must be a 3-D tensor (panels, k, nr) of constant "
                            f"sizes (made by pack_matmul_weight), got {packed!r}")
    check_knobs(who, n=n)
    panels, k_ext, nr = (d.value for d in packed.shape)
    if str(a.shape[1]) != str(k_ext):
        raise ScheduleError(f"{who}: the reduction extents differ: a is {a!r}, packed is "
                            f"{packed!r} (a's last dimension must equal packed's second)")
    if panels != -(-n // nr):
        raise ScheduleError(f"{who}: {n} columns need {-(-n // nr)} panels of {nr}, packed has "
                            f"{panels}; pack with pack_matmul_weight(b, {nr})")
    k = te.reduce_axis((0, a.shape[1]), name=reduction_axis_name(a, packed))
    return te.compute((a.shape[0], n),
                      lambda i, j: te.sum(a[i, k] * packed[j // nr, k, j % nr], axis=k),
                      name="C")
