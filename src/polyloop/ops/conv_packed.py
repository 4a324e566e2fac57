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
from .conv import DEFAULT_K_VECTORS, check_conv, conv_output_size, pair, padded_input
from .knobs import check_knobs, default_lanes


def conv2d_channel_block(dtype: str = "float32") -> int:
    """Output channels per weight block of the default conv2d schedule (two vectors).

    >>> conv2d_channel_block() % 4
    0
    """
    return DEFAULT_K_VECTORS * default_lanes(dtype)


def group_span(out_channels: int, groups: int, block: int) -> int | None:
    """Output channels of one group that a block of ``block`` output channels serves with
    one contiguous range of input channels: the block is a whole number of groups, or a group
    a whole number of blocks. None when neither holds (the convolution cannot be packed in
    such blocks).

    >>> group_span(128, 32, 16), group_span(256, 8, 16), group_span(96, 4, 16)
    (4, 32, None)
    """
    if groups < 1 or out_channels % groups:
        return None
    kg = out_channels // groups
    return kg if block % kg == 0 or kg % block == 0 else None


def block_input_channels(out_channels: int, in_per_group: int, groups: int, block: int) -> int:
    """Input channels one block of output channels reduces over: those of its groups (a group
    of ``in_per_group``, times the groups a block holds).

    >>> block_input_channels(128, 4, 32, 16), block_input_channels(64, 3, 1, 16)
    (16, 3)
    """
    kg = out_channels // groups
    return in_per_group * max(1, block // kg)


def pack_conv2d_weight(weight: np.ndarray, block: int, groups: int = 1) -> np.ndarray:
    """NumPy weights ``(K, C, R, S)`` as ``(ceil(K / block), C, R, S, block)`` blocks of
    ``block`` output channels; the channels past ``K`` in the last block are zeros.

    Grouped weights (``groups > 1``: ``C`` input channels per group, ``K / groups`` output
    channels per group) are packed block-diagonally: a block's ``C'`` axis covers the input
    channels of every group it holds (``block_input_channels``), zeros where an output channel
    does not read an input channel; ``group_span`` must not be None.

    >>> pack_conv2d_weight(np.arange(6, dtype="float32").reshape(3, 2, 1, 1), 2)[1, :, 0, 0]
    array([[4., 0.],
           [5., 0.]], dtype=float32)
    >>> pack_conv2d_weight(np.ones((4, 1, 1, 1), "float32"), 2, groups=4)[1, :, 0, 0]
    array([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    if not isinstance(weight, np.ndarray) or weight.ndim != 4:
        raise ScheduleError(f"pack_conv2d_weight: weight must be a 4-D array (K, C, R, S), got "
                            f"{getattr(weight, 'shape', type(weight).__name__)}")
    check_knobs("pack_conv2d_weight", block=block, groups=groups)
    k, c, r, s = weight.shape
    if groups > 1 and group_span(k, groups, block) is None:
        raise ScheduleError(f"pack_conv2d_weight: {k // max(1, groups)} output channels per "
                            f"group neither divide nor are a multiple of the block of {block}; "
                            "give a block that is")
    blocks = -(-k // block)
    cb = block_input_channels(k, c, groups, block) if groups > 1 else c
    full = np.zeros((blocks * block, cb, r, s), weight.dtype)
    if groups == 1:
        full[:k] = weight
    else:
        kg = k // groups
        per_block = max(1, block // kg)     # groups in one block
        for ch in range(k):
            slot = (ch // kg) % per_block   # the group's place among its block's groups
            full[ch, slot * c:(slot + 1) * c] = weight[ch]
    return np.ascontiguousarray(full.reshape(blocks, block, cb, r, s).transpose(0, 2, 3, 4, 1))


def conv2d_nchw_packed(data: Tensor, packed: Tensor, out_channels: int,
                       pad: int | tuple[int, int] = 1, stride: int | tuple[int, int] = 1, *,
                       dilation: int | tuple[int, int] = 1, groups: int = 1) -> Tensor:
    """``conv2d_nchw(data, weight, pad, stride)`` with ``packed = pack_conv2d_weight(weight,
    block, groups)`` in place of ``weight`` (``block`` is the packed tensor's last axis) and
    ``out_channels = K``; the result is named ``conv``. ``dilation`` spaces the taps; with
    ``groups`` each block of output channels reads the input channels of its own groups.

    >>> import polyloop as pl
    >>> conv2d_nchw_packed(pl.placeholder((1, 3, 8, 8), name="X"),
    ...                    pl.placeholder((2, 3, 3, 3, 16), name="P"), 20, stride=2)
    Tensor(conv: float32[1, 20, 4, 4])
    >>> conv2d_nchw_packed(pl.placeholder((1, 64, 8, 8), name="X"),
    ...                    pl.placeholder((4, 16, 1, 7, 16), name="P"), 64, (0, 3), groups=16)
    Tensor(conv: float32[1, 64, 8, 8])
    """
    who = "conv2d_nchw_packed"
    check_conv(who, data, None, pad, stride, dilation)
    if not isinstance(packed, Tensor) or packed.ndim != 5 \
            or not all(isinstance(d, Const) for d in packed.shape[1:]):
        raise ScheduleError(f"{who}: packed must be a 5-D tensor (K blocks, C, R, S, block) "
                            f"with constant C, R, S and block, got {packed!r}")
    check_knobs(who, out_channels=out_channels, groups=groups)
    blocks, c_block, r_ext, s_ext, block = packed.shape
    kb = block.value
    if not isinstance(data.shape[1], Const) and groups > 1:
        raise ScheduleError(f"{who}: a grouped convolution needs a constant channel count, "
                            f"got {data.shape[1]}")
    if groups == 1:
        cg = c_block.value
        if str(data.shape[1]) != str(c_block):
            raise ScheduleError(f"{who}: data has {data.shape[1]} channels, packed expects "
                                f"{c_block}")
    else:
        cg = data.shape[1].value // groups
        if data.shape[1].value % groups or group_span(out_channels, groups, kb) is None \
                or block_input_channels(out_channels, cg, groups, kb) != c_block.value:
            raise ScheduleError(f"{who}: {data.shape[1]} input and {out_channels} output "
                                f"channels in {groups} groups do not match packed {packed!r}; "
                                f"pack with pack_conv2d_weight(weight, {kb}, groups={groups})")
    if isinstance(blocks, Const) and blocks.value != -(-out_channels // kb):
        raise ScheduleError(f"{who}: {out_channels} output channels need "
                            f"{-(-out_channels // kb)} blocks of {kb}, packed "
                            f"has {blocks.value}; pack with pack_conv2d_weight(weight, "
                            f"{kb})")
    n, _, h, w = data.shape
    out_h, out_w = conv_output_size(who, h, w, r_ext, s_ext, pad, stride, dilation)
    (sh, sw), (dh, dw) = pair(stride), pair(dilation)
    kg = out_channels // groups
    # a last block of fewer groups than a block holds reads zero channels past the input's
    reach = -(-out_channels // kb) * kb // kg * cg if groups > 1 and kb > kg else None
    padded = padded_input(data, pad, channels=reach)
    rc = te.reduce_axis((0, c_block), name="rc")
    ry = te.reduce_axis((0, r_ext), name="ry")
    rx = te.reduce_axis((0, s_ext), name="rx")

    def channel(k):      # the first input channel of the groups of k's block, plus rc
        return rc if groups == 1 else (k // kb) * kb // kg * cg + rc
    return te.compute((n, out_channels, out_h, out_w),
                      lambda b, k, y, x: te.sum(
                          padded[b, channel(k), sh * y + dh * ry, sw * x + dw * rx]
                          * packed[k // kb, rc, ry, rx, k % kb], axis=[rc, ry, rx]),
                      name="conv")
