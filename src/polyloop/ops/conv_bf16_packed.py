# SPDX-License-Identifier: Apache-2.0
"""A bf16 convolution on weights packed once: ``conv2d_bf16`` without its ``W_g`` stage.

``schedule_conv2d_bf16`` stores ``W_g`` (the weights in channel pairs) in panels of the tile's
output channels, ``(K / cols, R, S, C / 2, cols, 2)``, on every call: for a model's constant
weights that is a read and a write of every weight per inference. ``pack_bf16_conv_weight``
makes that array once (rounded to bfloat16, to nearest even; zeros past K and C) and
``conv2d_bf16_packed`` reads it where ``conv2d_bf16`` reads ``W_g``: the same stages (``X_g``,
the pixel-major sums ``C`` and epilogue ``E``, the output a copy: ``conv_lowbit.bf16_conv``)
and the same schedule.

>>> import numpy as np, polyloop as pl
>>> from polyloop import ops
>>> X = pl.placeholder((1, 3, 6, 6), "float32", name="X")
>>> P = pl.placeholder((1, 3, 3, 2, 32, 2), "bfloat16", name="P")
>>> y = conv2d_bf16_packed(X, P, 5, padding=1)
>>> mod = pl.build(ops.schedule_conv2d_bf16(y, intrin="pl_lowbit_bf16_portable_6x32_win"))
>>> w = np.full((5, 3, 3, 3), 0.5, np.float32)
>>> float(mod(np.ones((1, 3, 6, 6), np.float32), pack_bf16_conv_weight(w, 32))[0, 4, 2, 2])
13.5
"""
from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from ..frontend.te import Tensor
from ..ir.dtypes import DType
from ..ir.expr import Const
from . import grouped as gr
from .conv import check_conv, conv_output_size
from .conv_lowbit import bf16_conv, panel_weight
from .knobs import check_knobs
from .matmul_bf16 import bf16_weight

PAIR = 2


def pack_bf16_conv_weight(w: np.ndarray, cols: int | None = None) -> np.ndarray:
    """Float32 (or bfloat16) weights ``(K, C, R, S)`` rounded to bfloat16 and stored as
    ``schedule_conv2d_bf16`` stores ``W_g``: ``(ceil(K / cols), R, S, ceil(C / 2), cols, 2)``,
    zeros past K and C. ``cols``: the width of the host's tile (None) or of the intrinsic the
    schedule will use.

    >>> pack_bf16_conv_weight(np.ones((40, 3, 1, 1), np.float32), cols=32).shape
    (2, 1, 1, 2, 32, 2)
    """
    rounded, cols = bf16_weight("pack_bf16_conv_weight", "w (K, C, R, S)", w, 4, cols)
    return gr.pack_grouped_window(rounded, PAIR, cols)


def conv2d_bf16_packed(x: Tensor, packed: Tensor, k_out: int, *, stride: int = 1,
                       padding: int = 0, bias: Tensor | None = None, name: str = "Y") -> Tensor:
    """``conv2d_bf16(x, w, ...)`` with ``packed = pack_bf16_conv_weight(w)`` in place of ``w``
    and ``k_out`` its output channels: a float32 result; ``x`` bfloat16 or float32 (rounded
    as it is grouped). The packed tensor's sizes must be constants.

    >>> import polyloop as pl
    >>> conv2d_bf16_packed(pl.placeholder((1, 8, 6, 6), "float32", name="X"),
    ...                    pl.placeholder((1, 3, 3, 4, 32, 2), "bfloat16", name="P"), 20)
    Tensor(Y: float32[1, 20, 4, 4])
    """
    who = "conv2d_bf16_packed"
    if not isinstance(x, Tensor) or x.ndim != 4 or x.dtype not in (DType.BFLOAT16,
                                                                   DType.FLOAT32):
        raise ScheduleError(f"{who}: x must be a 4-D bfloat16 or float32 tensor, got {x!r}")
    if not isinstance(packed, Tensor) or packed.ndim != 6 or packed.dtype is not DType.BFLOAT16 \
            or not all(isinstance(d, Const) for d in packed.shape) \
            or packed.shape[5].value != PAIR:               # type: ignore[attr-defined]
        raise ScheduleError(f"{who}: packed must be a (K / cols, R, S, C / 2, cols, 2) bfloat16 "
                            f"tensor of constant sizes (pack_bf16_conv_weight), got {packed!r}")
    panels, r_ext, s_ext, groups, cols, _ = (d.value for d in packed.shape)  # type: ignore
    check_knobs(who, k_out=k_out)
    c_in = x.shape[1]
    if panels != -(-k_out // cols) or not (isinstance(c_in, Const)
                                           and -(-c_in.value // PAIR) == groups):
        raise ScheduleError(f"{who}: {packed!r} does not hold ({k_out}, {c_in}, {r_ext}, "
                            f"{s_ext}) weights in panels of {cols}; pack them with "
                            f"pack_bf16_conv_weight(w, {cols})")
    check_conv(who, x, None, padding, stride)
    n, _, h, wd = x.shape
    out_h, out_w = conv_output_size(who, h, wd, Const(r_ext, DType.INT64),
                                    Const(s_ext, DType.INT64), padding, stride)
    extents = tuple(Const(v, DType.INT64) for v in (r_ext, s_ext, groups, k_out))
    return bf16_conv(who, x, panel_weight(packed), extents, (n, out_h, out_w), stride, padding, bias, "float32",
                     name)


__all__ = ["conv2d_bf16_packed", "pack_bf16_conv_weight"]
