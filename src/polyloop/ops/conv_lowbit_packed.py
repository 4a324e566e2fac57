# SPDX-License-Identifier: Apache-2.0
"""int8 convolutions on weights packed once: ``pack_conv_int8_weight`` stores constant weights
as the panels ``schedule_conv2d_int8`` reads (``W_g`` of ``conv_lowbit``) together with their
sums, and ``conv2d_int8_packed`` is ``conv2d_int8`` on them: a call packs and sums nothing
(for a 512 x 512 x 3 x 3 layer on a 7 x 7 image, packing and summing the weights took longer
than the products).

>>> import numpy as np, polyloop as pl
>>> w = np.ones((8, 5, 3, 3), np.int8)
>>> panels, sums = pack_conv_int8_weight(w, cols=32)
>>> panels.shape, int(sums[0])
((1, 3, 3, 2, 32, 4), 45)
>>> X = pl.placeholder((1, 5, 7, 7), "uint8", name="X")
>>> P = pl.placeholder(panels.shape, "int8", name="P")
>>> S = pl.placeholder((8,), "int32", name="S")
>>> y = conv2d_int8_packed(X, P, S, w.shape, padding=1, x_zero_point=2)
>>> mod = pl.build(schedule_conv2d_int8(y))
>>> int(mod(np.full((1, 5, 7, 7), 3, np.uint8), panels, sums)[0, 7, 3, 3])
45
"""
from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from ..frontend.te import Tensor
from ..ir.dtypes import DType
from ..ir.expr import Const
from . import grouped as gr
from . import lowbit_tile as tile
from . import quantized as q
from .conv import check_conv, conv_output_size
from .conv_lowbit import (Weights, check_layouts, int8_conv, nchw_view, panel_weight,
                          schedule_conv2d_int8)
from .knobs import check_knobs

GROUP = 4


def pack_conv_int8_weight(w: np.ndarray, cols: int | None = None
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(panels, sums) of int8 or uint8 weights ``w (K, C, R, S)``: ``panels[k // cols, r, s,
    g, k % cols, t] = w[k, 4 g + t, r, s]`` as int8 (a uint8 weight minus 128), zeros past C
    and K; ``sums[k]`` the int32 sums of those values over ``(c, r, s)``. ``cols``: the tile
    width of the host's tile (None) or the one of the intrinsic the schedule will use."""
    if not isinstance(w, np.ndarray) or w.ndim != 4 or w.dtype not in (np.int8, np.uint8):
        raise ScheduleError(f"pack_conv_int8_weight: w must be a 4-D int8 or uint8 array "
                            f"(K, C, R, S), got {getattr(w, 'dtype', type(w).__name__)} "
                            f"{getattr(w, 'shape', '')}")
    cols = tile.default_tile("u8s8")[1] if cols is None else cols
    check_knobs("pack_conv_int8_weight", cols=cols)
    shifted = (w.astype(np.int16) - 128 if w.dtype == np.uint8 else w).astype(np.int8)
    sums = shifted.astype(np.int32).reshape(w.shape[0], -1).sum(axis=1).astype(np.int32)
    return gr.pack_grouped_window(shifted, GROUP, cols), sums


def conv2d_int8_packed(x: Tensor, packed: Tensor, sums: Tensor | None, w_shape: tuple, *,
                       w_dtype: str = "int8", stride: int = 1, padding: int = 0,
                       x_zero_point: int | Tensor = 0, w_zero_point: int | Tensor = 0,
                       bias: Tensor | None = None, scale: float | Tensor | None = None,
                       out_zero_point: int | Tensor = 0, out_dtype: str = "int32",
                       name: str = "Y", in_layout: str = "NCHW", out_layout: str = "NCHW"
                       ) -> Tensor:
    """``conv2d_int8(x, w, ...)`` with ``packed, sums = pack_conv_int8_weight(w)`` in place of
    ``w`` (``w_shape``: its ``(K, C, R, S)``, ``w_dtype``: its dtype; ``w_zero_point`` is
    ``w``'s). The packed tensor's sizes must be constants. ``sums`` may be None where
    they are not needed: a uint8 ``x`` whose zero point is 0. ``in_layout``, ``out_layout``:
    as in ``conv2d_int8``.

    >>> import polyloop as pl
    >>> P = pl.placeholder((2, 3, 3, 4, 32, 4), "int8", name="P")
    >>> S = pl.placeholder((40,), "int32", name="S")
    >>> conv2d_int8_packed(pl.placeholder((1, 16, 9, 9), "uint8", name="X"), P, S,
    ...                    (40, 16, 3, 3), padding=1)
    Tensor(Y: int32[1, 40, 9, 9])
    """
    who = "conv2d_int8_packed"
    x = q.check_operand(x, who, "x", (4,))
    check_layouts(who, in_layout, out_layout)
    view = nchw_view(x, in_layout)
    check_conv(who, view, None, padding, stride)
    if w_dtype not in ("int8", "uint8"):
        raise ScheduleError(f"{who}: w_dtype must be 'int8' or 'uint8', got {w_dtype!r}")
    if len(w_shape) != 4 or any(not isinstance(d, int) or d < 1 for d in w_shape):
        raise ScheduleError(f"{who}: w_shape must be the weights' (K, C, R, S), four positive "
                            f"ints, got {w_shape!r}")
    k_out, c_in, r_ext, s_ext = w_shape
    if not isinstance(packed, Tensor) or packed.ndim != 6 or packed.dtype is not DType.INT8 \
            or not all(isinstance(d, Const) for d in packed.shape):
        raise ScheduleError(f"{who}: packed must be a 6-D int8 tensor of constant sizes "
                            f"(pack_conv_int8_weight), got {packed!r}")
    panels, rp, sp, cg, cols, group = (d.value for d in packed.shape)  # type: ignore[attr-defined]
    if (panels, rp, sp, cg, group) != (-(-k_out // cols), r_ext, s_ext, -(-c_in // GROUP),
                                       GROUP):
        raise ScheduleError(f"{who}: {packed!r} does not hold weights of shape {w_shape} in "
                            f"panels of {cols} channels; pack them with "
                            f"pack_conv_int8_weight(w, {cols})")
    if sums is not None and (not isinstance(sums, Tensor) or sums.dtype is not DType.INT32
                             or sums.ndim != 1 or str(sums.shape[0]) != str(k_out)):
        raise ScheduleError(f"{who}: sums must be the int32 vector of {k_out} weight sums "
                            f"(pack_conv_int8_weight), got {sums!r}")
    if str(view.shape[1]) != str(c_in):
        raise ScheduleError(f"{who}: x has {view.shape[1]} channels, the weights expect {c_in}")
    n, _, h, wd = view.shape
    out_h, out_w = conv_output_size(who, h, wd, Const(r_ext, DType.INT64),
                                    Const(s_ext, DType.INT64), padding, stride)

    def weight_sums() -> Tensor:
        if sums is None:
            raise ScheduleError(f"{who}: the weights' sums are needed (x is int8 or has a "
                                "zero point other than 0); pass the sums of "
                                "pack_conv_int8_weight")
        return sums
    weights = Weights(tuple(Const(d, DType.INT64) for d in w_shape), DType(w_dtype),
                      panel_weight(packed), weight_sums)
    return int8_conv(who, x, weights, (n, out_h, out_w), stride, padding, x_zero_point,
                     w_zero_point, q.Epilogue(out_dtype, bias, scale, out_zero_point), name,
                     (in_layout, out_layout))


__all__ = ["conv2d_int8_packed", "pack_conv_int8_weight"]
