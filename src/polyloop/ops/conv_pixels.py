# SPDX-License-Identifier: Apache-2.0
"""Convolution (NCHW, stride 1) in register tiles along the pixels: for convolutions whose
outputs each reduce few products (few input channels per group).

The conv2d recipe (``schedule_conv2d_nchw``) holds a tile of pixels by *channels* in vectors of
output channels and stores it transposed into the NCHW output; when an output reduces only a
few dozen products (a 1 x 1 convolution of 16 or 24 channels, a grouped one of 4 or 8 channels
per group) that store costs as much as the products, and a block of 16 or 32 channels of a
small group is mostly zeros. Here a tile is ``k_block`` output channels of one group by
``x_vectors`` vectors of *pixels*, so it is stored in whole vectors and reads only its group.

The image is read as one row of pixels: ``<data>_pad`` is the padded image, and the sum runs
over ``conv_wide[b, k, q]``, ``q = y * Wp + x`` for the padded width ``Wp``, reading
``pad[b, c, q + r * Wp + s]`` (contiguous in ``q``; the ``Wp - W_out`` columns past each output
row are computed and dropped). Without padding and with a 1 x 1 kernel the input is read in
place. ``conv2d_pixels`` is the result ``conv`` (N, K, H_out, W_out); ``pack_conv2d_weight(w,
k_block, groups)`` gives the weights (``k_block`` divides the output channels of a group).

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import pack_conv2d_weight
>>> w = np.ones((6, 2, 3, 3), "float32")
>>> X = pl.placeholder((1, 2, 5, 7), name="X")
>>> P = pl.placeholder((2, 2, 3, 3, 3), name="P")
>>> mod = pl.build(schedule_conv2d_pixels(conv2d_pixels(X, P, 6, 1), lanes=8))
>>> y = mod(np.ones((1, 2, 5, 7), "float32"), pack_conv2d_weight(w, 3))
>>> float(y[0, 0, 0, 0]), float(y[0, 5, 2, 3])
(8.0, 18.0)
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import where
from ..ir.expr import Const
from ..schedule import Schedule
from ..schedule.trace import LoopHandle
from .conv import check_conv, pair
from .conv_epilogue import epilogue_chain
from .knobs import check_knobs, default_lanes

#: vectors of pixels in a tile (with ``K_BLOCK`` channels: 24 accumulators of 32 registers)
X_VECTORS = 4
#: output channels in a tile
K_BLOCK = 6


def conv2d_pixels(data: Tensor, packed: Tensor, out_channels: int,
                  pad: int | tuple[int, int] = 0, *, groups: int = 1) -> Tensor:
    """The stride-1 convolution of ``data`` (N, C, H, W, constant C, H, W) with weights packed
    in blocks of output channels, ``packed[k // kb, c, r, s, k % kb]`` (``kb`` the last axis;
    with ``groups``, ``c`` counts the channels of one group and ``kb`` divides a group's output
    channels); ``pad`` zeros on each side (a pair: rows, columns). The result is ``conv``.

    >>> import polyloop as pl
    >>> conv2d_pixels(pl.placeholder((1, 8, 9, 9), name="X"),
    ...               pl.placeholder((4, 2, 3, 3, 4), name="P"), 16, 1, groups=4)
    Tensor(conv: float32[1, 16, 9, 9])
    """
    who = "conv2d_pixels"
    check_conv(who, data, None, pad)
    if not isinstance(packed, Tensor) or packed.ndim != 5 \
            or not all(isinstance(d, Const) for d in packed.shape):
        raise ScheduleError(f"{who}: packed must be a 5-D tensor (K blocks, C, R, S, block) of "
                            f"constant sizes, got {packed!r}")
    check_knobs(who, out_channels=out_channels, groups=groups)
    n, c, h, w = data.shape
    if not all(isinstance(d, Const) for d in (c, h, w)):
        raise ScheduleError(f"{who}: the channels and image sizes must be constants, got "
                            f"{data!r}")
    blocks, cg, r_ext, s_ext, kb = (d.value for d in packed.shape)
    if c.value % groups or c.value // groups != cg or out_channels % groups \
            or (out_channels // groups) % kb or blocks * kb != out_channels:
        raise ScheduleError(f"{who}: {c.value} input and {out_channels} output channels in "
                            f"{groups} groups do not match packed {packed!r}: pack with "
                            f"pack_conv2d_weight(weight, block, groups) for a block that "
                            f"divides the {out_channels // groups} output channels of a group")
    ph, pw = pair(pad)
    hp, wp = h.value + 2 * ph, w.value + 2 * pw
    out_h, out_w = hp - r_ext + 1, wp - s_ext + 1
    if out_h < 1 or out_w < 1:
        raise ScheduleError(f"{who}: a {r_ext} x {s_ext} window does not fit in the {h} x {w} "
                            f"input padded by {pad}; pad more or use a smaller kernel")
    flat = _flat_input(data, ph, pw, hp, wp)
    kg = out_channels // groups
    rc = te.reduce_axis((0, cg), name="rc")
    ry = te.reduce_axis((0, r_ext), name="ry")
    rx = te.reduce_axis((0, s_ext), name="rx")
    # the last output's position: the columns past the last row are never computed
    span = (out_h - 1) * wp + out_w

    def channel(k):
        return rc if groups == 1 else (k // kg) * cg + rc
    wide = te.compute((n, out_channels, span), lambda b, k, q: te.sum(
        flat(b, channel(k), q + ry * wp + rx) * packed[k // kb, rc, ry, rx, k % kb],
        axis=[rc, ry, rx]), name="conv_wide")
    return te.compute((n, out_channels, out_h, out_w),
                      lambda b, k, y, x: wide[b, k, y * wp + x], name="conv")


def _flat_input(data: Tensor, ph: int, pw: int, hp: int, wp: int):
    """A reader of the padded image as one row per channel: ``read(b, c, i)`` is padded
    element ``(i // wp, i % wp)``: the input itself when there is no padding, else a padded
    stage ``<data>_pad``."""
    if ph == 0 and pw == 0:
        return lambda b, c, i: data[b, c, i // wp, i % wp]
    n, c, h, w = data.shape
    padded = te.compute((n, c, hp, wp), lambda b, ch, y, x: where(
        (y >= ph) & (y < h + ph) & (x >= pw) & (x < w + pw), data[b, ch, y - ph, x - pw], 0.0),
        name=f"{data.name}_pad")
    return lambda b, ch, i: padded[b, ch, i // wp, i % wp]


def pixel_tiles(sch: Schedule, conv: Tensor, who: str, *, lanes: int | None = None,
                x_vectors: int | None = None) -> LoopHandle:
    """The recipe on ``conv = conv2d_pixels(...)`` inside ``sch``, whose result ``out`` is
    ``conv`` or an elementwise chain over it with every stage between them already inlined:
    channel blocks in parallel, tiles of ``k_block x x_vectors`` vectors accumulated in
    registers over the reduction; returns the loop over a channel block's tiles, where the
    caller computes ``out`` from each finished tile."""
    wide = conv.inputs[0] if len(conv.inputs) == 1 else None
    if wide is None or wide.name != "conv_wide":
        raise ScheduleError(f"{who}: expected the result of conv2d_pixels(data, packed), got "
                            f"{conv!r}")
    lanes = default_lanes(str(conv.dtype)) if lanes is None else lanes
    x_vectors = X_VECTORS if x_vectors is None else x_vectors
    check_knobs(who, lanes=lanes, x_vectors=x_vectors)
    kb = wide.inputs[-1].shape[4].value if wide.inputs[-1].ndim == 5 else None
    # the sum accumulates in a tile-local buffer, which the result then reads (the block
    # that would copy the tile into conv_wide is inlined)
    sch.compute_inline(sch.cache_write(wide.name, "local"))
    b, k, q, c, r, s = sch.get_loops(wide.name)
    k0, k1 = sch.split(k, factors=[None, kb])
    q0, q1, q2 = sch.split(q, factors=[None, x_vectors, lanes])
    sch.reorder(b, k0, q0, c, r, s, k1, q1, q2)
    sch.parallel(k0)
    for loop in (r, s, k1, q1):
        sch.unroll(loop)
    sch.vectorize(q2)
    sch.decompose_reduction(wide.name, c)
    return q0


def schedule_conv2d_pixels(out: Tensor, conv: Tensor | None = None, *,
                           lanes: int | None = None, x_vectors: int | None = None) -> Schedule:
    """The schedule of ``out``: ``conv = conv2d_pixels(...)`` itself (``conv`` None), or an
    elementwise chain over ``conv`` (a bias, a residual, an activation), applied to each tile
    as it is stored. ``x_vectors``: vectors of pixels per tile (default ``X_VECTORS``)."""
    conv = out if conv is None else conv
    stages = epilogue_chain(out, conv) if out is not conv else []
    sch = Schedule(out)
    if out is not conv:
        sch.compute_inline(conv.name)
        for stage in stages[:-1]:
            sch.compute_inline(stage.name)
    anchor = pixel_tiles(sch, conv, "schedule_conv2d_pixels", lanes=lanes,
                         x_vectors=x_vectors)
    sch.reverse_compute_at(out.name, anchor)
    sch.vectorize(sch.get_loops(out.name)[-1])
    _pad_stage(sch, conv)
    return sch


def _pad_stage(sch: Schedule, conv: Tensor) -> None:
    """The padded image, if any: channels in parallel, rows in vectors."""
    wide = conv.inputs[0]
    padded = [t for t in wide.inputs if t.name.endswith("_pad")]
    if padded:
        loops = sch.get_loops(padded[0].name)
        sch.parallel(sch.fuse(loops[0], loops[1]))
        sch.vectorize(sch.get_loops(padded[0].name)[-1])
