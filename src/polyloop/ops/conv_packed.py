# SPDX-License-Identifier: Apache-2.0
"""Convolution on weights packed ahead of time: the layout the conv2d recipe copies its weights
into on every call, made once when the weights are constants (a model's layers).

``pack_conv2d_weight(weight, block)`` turns NumPy weights ``(K, C, R, S)`` into blocks of
``block`` output channels, ``packed[k // block, c, r, s, k % block]`` (zeros past ``K``), and
``conv2d_nchw_packed(data, packed, out_channels, pad, stride)`` is the convolution that reads
them. ``schedule_conv2d_nchw`` schedules it as it does ``conv2d_nchw``, without the copy: for
ResNet-18's 512-channel layers the copy moves 9 MB per call, as much time as a third of the
products. ``conv2d_channel_block()`` is the block the default schedule uses.

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import conv2d_nchw_packed, pack_conv2d_weight, schedule_conv2d_nchw
>>> w = np.ones((5, 3, 3, 3), "float32")
>>> packed = pack_conv2d_weight(w, 8); packed.shape
(1, 3, 3, 3, 8)
>>> X = pl.placeholder((1, 3, 9, 11), name="X"); P = pl.placeholder(packed.shape, name="P")
>>> mod = pl.build(schedule_conv2d_nchw(conv2d_nchw_packed(X, P, 5), lanes=8, k_vectors=1))
>>> y = mod(np.ones((1, 3, 9, 11), "float32"), packed)
>>> y.shape, float(y[0, 0, 0, 0]), float(y[0, 4, 4, 4])
((1, 5, 9, 11), 12.0, 27.0)
"""
from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.expr import Const
from .conv import DEFAULT_K_VECTORS, check_conv, conv_output_size, padded_input
from .knobs import check_knobs, default_lanes


def conv2d_channel_block(dtype: str = "float32") -> int:
    """Output channels per weight block of the default conv2d schedule (two vectors).

    >>> conv2d_channel_block() % 4
    0
    """
    return DEFAULT_K_VECTORS * default_lanes(dtype)


def pack_conv2d_weight(weight: np.ndarray, block: int) -> np.ndarray:
    """NumPy weights ``(K, C, R, S)`` as ``(ceil(K / block), C, R, S, block)`` blocks of
    ``block`` output channels; the channels past ``K`` in the last block are zeros.

    >>> pack_conv2d_weight(np.arange(6, dtype="float32").reshape(3, 2, 1, 1), 2)[1, :, 0, 0]
    array([[4., 0.],
           [5., 0.]], dtype=float32)
    """
    if not isinstance(weight, np.ndarray) or weight.ndim != 4:
        raise ScheduleError(f"pack_conv2d_weight: weight must be a 4-D array (K, C, R, S), got "
                            f"{getattr(weight, 'shape', type(weight).__name__)}")
    check_knobs("pack_conv2d_weight", block=block)
    k, c, r, s = weight.shape
    blocks = -(-k // block)
    full = np.zeros((blocks * block, c, r, s), weight.dtype)
    full[:k] = weight
    return np.ascontiguousarray(full.reshape(blocks, block, c, r, s).transpose(0, 2, 3, 4, 1))


def conv2d_nchw_packed(data: Tensor, packed: Tensor, out_channels: int, pad: int = 1,
                       stride: int = 1) -> Tensor:
    """``conv2d_nchw(data, weight, pad, stride)`` with ``packed = pack_conv2d_weight(weight,
    block)`` in place of ``weight`` (``block`` is the packed tensor's last axis) and
    ``out_channels = K``; the result is named ``conv``.

    >>> import polyloop as pl
    >>> conv2d_nchw_packed(pl.placeholder((1, 3, 8, 8), name="X"),
    ...                    pl.placeholder((2, 3, 3, 3, 16), name="P"), 20, stride=2)
    Tensor(conv: float32[1, 20, 4, 4])
    """
    who = "conv2d_nchw_packed"
    check_conv(who, data, None, pad, stride)
    if not isinstance(packed, Tensor) or packed.ndim != 5 \
            or not all(isinstance(d, Const) for d in packed.shape[2:]):
        raise ScheduleError(f"{who}: packed must be a 5-D tensor (K blocks, C, R, S, block) "
                            f"with constant R, S and block, got {packed!r}")
    check_knobs(who, out_channels=out_channels)
    blocks, c_in, r_ext, s_ext, block = packed.shape
    if str(data.shape[1]) != str(c_in):
        raise ScheduleError(f"{who}: data has {data.shape[1]} channels, packed expects {c_in}")
    if isinstance(blocks, Const) and blocks.value != -(-out_channels // block.value):
        raise ScheduleError(f"{who}: {out_channels} output channels need "
                            f"{-(-out_channels // block.value)} blocks of {block.value}, packed "
                            f"has {blocks.value}; pack with pack_conv2d_weight(weight, "
                            f"{block.value})")
    n, _, h, w = data.shape
    out_h, out_w = conv_output_size(who, h, w, r_ext, s_ext, pad, stride)
    padded = padded_input(data, pad)
    kb = block.value
    rc = te.reduce_axis((0, c_in), name="rc")
    ry = te.reduce_axis((0, r_ext), name="ry")
    rx = te.reduce_axis((0, s_ext), name="rx")
    return te.compute((n, out_channels, out_h, out_w),
                      lambda b, k, y, x: te.sum(padded[b, rc, stride * y + ry, stride * x + rx]
                                                * packed[k // kb, rc, ry, rx, k % kb],
                                                axis=[rc, ry, rx]),
                      name="conv")
