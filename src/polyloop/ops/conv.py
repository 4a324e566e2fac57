# SPDX-License-Identifier: Apache-2.0
"""2-D convolution (NCHW) and its CPU schedule.

``conv2d_nchw(data, weight, pad, stride)``: ``data (N, C, H, W)``, ``weight (K, C, R, S)``, zero
padding ``pad`` on each side, output ``(N, K, (H + 2 pad - R) // stride + 1, (W + 2 pad - S)
// stride + 1)``; ``conv_packed.conv2d_nchw_packed`` is the same on weights packed ahead of time.
The padding is its own stage (``<data>_pad``, exact at the borders: a ``where`` on the
window), which the schedules either compute whole or per channel. The depthwise convolution is
in ``conv_depthwise``.

The conv2d recipe (register tiles, the matmul recipe applied to the convolution):
- the weights are copied into blocks of ``kb = k_vectors * lanes`` output channels,
  ``W_packed[k // kb, c, r, s, k % kb]`` (``transform_layout``; no copy when they come packed),
  so that for each ``(c, r, s)`` the weights of a block are ``k_vectors`` contiguous vectors;
- the output is accumulated in a tile of ``w_block`` pixels of one row by ``kb`` channels held
  in a tile-local buffer laid out pixel-major (``cache_write "local"`` + ``transform_layout``):
  per ``(c, r, s)`` ``w_block`` broadcasts of the padded input (every ``stride``-th element of
  a row) and ``k_vectors`` vector loads
  feed ``w_block * k_vectors`` FMAs, all in registers;
- the loop over channel blocks is parallel (each thread owns whole output planes).


>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import conv2d_nchw, schedule_conv2d_nchw
>>> X = pl.placeholder((1, 3, 9, 11), name="X"); Wt = pl.placeholder((5, 3, 3, 3), name="Wt")
>>> mod = pl.build(schedule_conv2d_nchw(conv2d_nchw(X, Wt)))
>>> y = mod(np.ones((1, 3, 9, 11), "float32"), np.ones((5, 3, 3, 3), "float32"))
>>> float(y[0, 0, 0, 0]), float(y[0, 4, 4, 4])
(12.0, 27.0)
"""
from __future__ import annotations

import math

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import where
from ..ir.expr import Const
from ..poly.prefetch_regions import LINE_BYTES
from ..schedule import Schedule
from ..schedule.software_prefetch import MAX_LINES
from ..schedule.trace import BlockHandle, LoopHandle
from .knobs import check_knobs, default_lanes

#: vectors of output channels in a register tile of the default conv2d schedule
DEFAULT_K_VECTORS = 2
# images of a constant batch from which the images, not the channel blocks, run in parallel
BATCH_PARALLEL = 4


def pair(value: int | tuple[int, int]) -> tuple[int, int]:
    """``value`` for both axes when it is one int, else the (rows, columns) pair as given.

    >>> pair(3), pair((0, 3))
    ((3, 3), (0, 3))
    """
    return (value, value) if isinstance(value, int) else (value[0], value[1])


def padded_input(data: Tensor, pad: int | tuple[int, int], *, extra_columns: int | None = None,
                 kernel_width: object = None, channels: int | None = None) -> Tensor:
    """``data`` with ``pad`` zeros on each side of its two last axes (``data`` if pad is 0 and
    no widening is asked; a pair: rows, columns). ``extra_columns``: the rows are made wide
    enough for that many output columns of a kernel ``kernel_width`` wide (the extra ones are
    zeros). ``channels``: that many channels, the ones past ``data``'s zeros."""
    ph, pw = pair(pad)
    n, c, h, w = data.shape
    width = w + 2 * pw
    if extra_columns is not None:
        width = extra_columns + kernel_width.value - 1   # type: ignore[union-attr]
        if width == w.value + 2 * pw:                    # type: ignore[union-attr]
            extra_columns = None
    more = channels is not None and channels > c.value   # type: ignore[union-attr]
    if ph == 0 and pw == 0 and extra_columns is None and not more:
        return data

    def inside(ch, y, x):
        cond = (y >= ph) & (y < h + ph) & (x >= pw) & (x < w + pw)
        return cond & (ch < c) if more else cond
    return te.compute((n, channels if more else c, h + 2 * ph, width),
                      lambda b, ch, y, x: where(inside(ch, y, x), data[b, ch, y - ph, x - pw],
                                                0.0),
                      name=f"{data.name}_pad")


def conv_output_size(op: str, h, w, r_ext, s_ext, pad, stride, dilation=1) -> tuple:
    """The output's rows and columns (ints when the sizes are constants); a ScheduleError
    naming ``op`` when the window does not fit. ``pad``, ``stride`` and ``dilation`` are an
    int for both axes or a (rows, columns) pair."""
    def size(extent, kernel, p, st, d):
        if isinstance(extent, Const) and isinstance(kernel, Const):
            return (extent.value + 2 * p - d * (kernel.value - 1) - 1) // st + 1
        if st == 1:
            return extent + 2 * p - d * (kernel - 1)
        return (extent + 2 * p - d * (kernel - 1) - 1) // st + 1
    (ph, pw), (sh, sw), (dh, dw) = pair(pad), pair(stride), pair(dilation)
    out_h, out_w = size(h, r_ext, ph, sh, dh), size(w, s_ext, pw, sw, dw)
    if any(isinstance(d, int) and d < 1 for d in (out_h, out_w)):
        raise ScheduleError(f"{op}: a {r_ext} x {s_ext} window does not fit in the {h} x {w} "
                            f"input padded by {pad}; pad more or use a smaller kernel")
    return out_h, out_w


def check_conv(op: str, data: Tensor, weight: Tensor | None, pad, stride=1,
               dilation=1) -> None:
    """Raise a ScheduleError naming ``op`` unless the operands and knobs are well formed
    (``weight`` None: checked by the caller; ``pad``, ``stride``, ``dilation``: an int or a
    (rows, columns) pair)."""
    for name, t in (("data", data), ("weight", weight)):
        if t is None:
            continue
        if not isinstance(t, Tensor) or t.ndim != 4:
            raise ScheduleError(f"{op}: {name} must be a 4-D tensor, got {t!r}")
    for knob, value, kind in (("pad", pad, "non-negative"), ("stride", stride, "positive"),
                              ("dilation", dilation, "positive")):
        least = 0 if kind == "non-negative" else 1
        parts = (value,) if not isinstance(value, tuple) else value
        if len(parts) not in (1, 2) or any(not isinstance(v, int) or isinstance(v, bool)
                                           or v < least for v in parts):
            raise ScheduleError(f"{op}: {knob} must be a {kind} integer or a pair of them "
                                f"(rows, columns), got {value!r}")


def conv2d_nchw(data: Tensor, weight: Tensor, pad: int | tuple[int, int] = 1,
                stride: int | tuple[int, int] = 1) -> Tensor:
    """``out[n, k, y, x] = sum_{c, r, s} pad(data)[n, c, stride y + r, stride x + s]
    * weight[k, c, r, s]`` (``pad`` zeros on each side); the result tensor is named ``conv``,
    of size ``(H + 2 pad - R) // stride + 1`` by ``(W + 2 pad - S) // stride + 1``
    (``pad`` and ``stride``: one int, or a pair for rows and columns).

    >>> import polyloop as pl
    >>> conv2d_nchw(pl.placeholder((1, 3, 8, 8), name="X"), pl.placeholder((4, 3, 3, 3), name="W"))
    Tensor(conv: float32[1, 4, 8, 8])
    >>> conv2d_nchw(pl.placeholder((1, 3, 9, 9), name="X"), pl.placeholder((4, 3, 7, 7), name="W"),
    ...             pad=3, stride=2)
    Tensor(conv: float32[1, 4, 5, 5])
    """
    check_conv("conv2d_nchw", data, weight, pad, stride)
    if str(data.shape[1]) != str(weight.shape[1]):
        raise ScheduleError(f"conv2d_nchw: data has {data.shape[1]} channels, weight expects "
                            f"{weight.shape[1]} (weight is (K, C, R, S))")
    n, _, h, w = data.shape
    k_out, c_in, r_ext, s_ext = weight.shape
    sh, sw = pair(stride)
    padded = padded_input(data, pad)
    rc = te.reduce_axis((0, c_in), name="rc")
    ry = te.reduce_axis((0, r_ext), name="ry")
    rx = te.reduce_axis((0, s_ext), name="rx")
    out_h, out_w = conv_output_size("conv2d_nchw", h, w, r_ext, s_ext, pad, stride)
    return te.compute((n, k_out, out_h, out_w),
                      lambda b, k, y, x: te.sum(padded[b, rc, sh * y + ry, sw * x + rx]
                                                * weight[k, rc, ry, rx], axis=[rc, ry, rx]),
                      name="conv")


def operands(out: Tensor, who: str, builder: str) -> tuple[Tensor, Tensor, Tensor | None]:
    """(data, weight, padding stage or None) of a convolution built by ``builder``; a
    ScheduleError naming ``who`` for anything else.

    >>> import polyloop as pl
    >>> out = conv2d_nchw(pl.placeholder((1, 3, 8, 8), name="X"),
    ...                   pl.placeholder((4, 3, 3, 3), name="W"))
    >>> [t.name for t in operands(out, "f", "conv2d_nchw")]
    ['X', 'W', 'X_pad']
    """
    if not isinstance(out, Tensor) or out.is_placeholder or len(out.inputs) != 2:
        raise ScheduleError(f"{who}: expected the result of {builder}(data, weight), got {out!r}")
    src, weight = out.inputs
    if src.is_placeholder:
        return src, weight, None
    if len(src.inputs) != 1 or not src.inputs[0].is_placeholder:
        raise ScheduleError(f"{who}: expected the result of {builder}(data, weight), got {out!r}")
    return src.inputs[0], weight, src


def _width_block(width: object, default: int) -> int:
    """The row tile: a divisor of a constant width between 5 and 8 (no partial tile) when there
    is one, else ``default``."""
    if isinstance(width, Const):
        for cand in (8, 7, 6, 5):
            if width.value % cand == 0:
                return cand
    return default


def schedule_conv2d_nchw(out: Tensor, *, lanes: int | None = None, k_vectors: int | None = None,
                         w_block: int | None = None, parallel: str | None = None,
                         c_block: int | None = None, prefetch: int | None = None) -> Schedule:
    """The register-tile schedule of ``out = conv2d_nchw(data, weight, pad, stride)`` (or of
    ``conv2d_nchw_packed``, whose weights are already in blocks: no copy).

    A tile is ``w_block`` output pixels of a row by ``k_vectors * lanes`` output channels
    (default: 2 x 16 channels with AVX-512, or the packed weights' block; a divisor of the width
    between 5 and 8 pixels, else 8). ``parallel="k"`` runs the blocks of output channels in
    parallel (each block's packed weights stay in its core's cache), with a constant height
    as one loop over the blocks' rows (threads that do not divide the blocks evenly split a
    block's rows); ``parallel="y"`` runs the
    output rows in parallel; ``parallel="n"`` runs the images of a batch in parallel. The
    default is ``"n"`` for a constant batch of at least ``BATCH_PARALLEL`` images (one parallel
    region for the whole batch), else ``"k"``. ``c_block``: input channels per block run over
    every row before the next block (default: none). ``prefetch``: the weights are prefetched
    that many input channels ahead (0: no hint; default 8 for packed weights on output planes
    of at most 64 pixels, whose weights stream from memory, without ``c_block``; else 0).

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 8, 10, 10), name="X"); W = pl.placeholder((32, 8, 3, 3), name="W")
    >>> sch = schedule_conv2d_nchw(conv2d_nchw(X, W), lanes=16, k_vectors=1, w_block=5)
    >>> [loop.name for loop in sch.get_loops("conv")][:3]     # a block's rows in parallel
    ['b', 'k_0_y_fused', 'x_0']
    """
    sch = Schedule(out)
    tile, anchor, _ = conv_tiles(sch, out, "schedule_conv2d_nchw", lanes=lanes,
                                 k_vectors=k_vectors, w_block=w_block, parallel=parallel,
                                 c_block=c_block, prefetch=prefetch)
    sch.reverse_compute_at(tile, anchor)
    return sch


def conv_tiles(sch: Schedule, out: Tensor, who: str, *, lanes: int | None = None,
               k_vectors: int | None = None, w_block: int | None = None,
               parallel: str | None = None, c_block: int | None = None,
               prefetch: int | None = None) -> tuple[BlockHandle, LoopHandle, LoopHandle]:
    """The register-tile recipe of ``schedule_conv2d_nchw`` applied to the convolution ``out``
    inside ``sch`` (a schedule of ``out`` or of a chain that reads it); returns the block that
    copies a finished tile out, the loop where that copy belongs (the caller moves it there)
    and the loop over which a block of channels of whole output rows is finished.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 8, 10, 10), name="X"); W = pl.placeholder((32, 8, 3, 3), name="W")
    >>> conv = conv2d_nchw(X, W); sch = Schedule(conv)
    >>> tile, at, row = conv_tiles(sch, conv, "example", lanes=16, k_vectors=1, w_block=5)
    >>> tile, at.name, row.name
    (Block('conv_local_out'), 'x_0', 'k_0_y_fused')
    """
    _, weight, padded = operands(out, who, "conv2d_nchw")
    if lanes is None:
        lanes = default_lanes(str(out.dtype))
        if weight.ndim == 5:            # blocks of part of a vector: vectors of that width
            lanes = math.gcd(lanes, weight.shape[4].value)   # type: ignore[union-attr]
    w_block = _width_block(out.shape[3], 8) if w_block is None else w_block
    k_vectors = _k_vectors(who, weight, lanes, k_vectors)
    check_knobs(who, lanes=lanes, k_vectors=k_vectors, w_block=w_block)
    if c_block is not None:
        check_knobs(who, c_block=c_block)
    if parallel is None:
        batch = out.shape[0]
        parallel = "n" if isinstance(batch, Const) and batch.value >= BATCH_PARALLEL else "k"
    if parallel not in ("k", "y", "n") or (c_block is not None and parallel == "y"):
        raise ScheduleError(f"{who}: parallel must be 'k' (channel blocks), 'y' (rows, not with "
                            f"c_block) or 'n' (images), got {parallel!r}")
    kb = k_vectors * lanes
    if prefetch is None:        # within a block of c_block channels, 8 ahead is mostly past it
        prefetch = 0 if c_block is not None else _prefetch_distance(out, weight, kb)
    if prefetch:
        check_knobs(who, prefetch=prefetch)
    if weight.ndim == 4:
        sch.transform_layout(out.name, weight.name,
                             lambda k, c, r, s: (k // kb, c, r, s, k % kb))
    tile = sch.cache_write(out.name, "local")
    # pixel-major tile: the channel vectors of one pixel are contiguous
    sch.transform_layout(out.name, f"{out.name}_local", lambda n, k, y, x: (n, y, x, k))
    n, k, y, x, c, r, s = sch.get_loops(out.name)
    k0, k1, k2 = sch.split(k, factors=[None, k_vectors, lanes])
    x0, x1 = sch.split(x, factors=[None, w_block])
    anchor, row = x0, (y if parallel in ("k", "n") else k0)
    if c_block is not None:
        # a block of input channels for every row before the next block: its weights are read
        # from memory once, each tile's partial sums go through the (L1-resident) output block
        c0, c = sch.split(c, factors=[None, c_block])
        sch.reorder(n, k0, c0, y, x0, c, r, s, x1, k1, k2)
        anchor = row = k0
    elif parallel in ("k", "n"):
        sch.reorder(n, k0, y, x0, c, r, s, x1, k1, k2)
    else:
        sch.reorder(n, y, k0, x0, c, r, s, x1, k1, k2)
    outer = {"k": k0, "n": n, "y": y}[parallel]
    if parallel == "k" and c_block is None and isinstance(out.shape[2], Const):
        # the channel blocks' rows as one parallel loop: the threads share out whole blocks
        # when they divide evenly (the same split as the blocks alone), and split a block's
        # rows when they do not (one block of 24 channels ran on one thread, three on two
        # threads took two blocks' time)
        outer = row = sch.fuse(k0, y)
        anchor = x0
    sch.parallel(outer)
    sch.unroll(x1)
    sch.unroll(k1)
    sch.vectorize(k2)
    sch.decompose_reduction(out.name, c0 if c_block is not None else c)
    if weight.ndim == 4:
        # the weight copy: one block of output channels at a time, written contiguously
        a0, a1, a2, a3 = sch.get_loops(f"{weight.name}_packed_in")
        p0, p1 = sch.split(a0, factors=[None, kb])
        sch.reorder(p0, a1, a2, a3, p1)
        sch.parallel(p0)
    if padded is not None:
        pad_loops = sch.get_loops(padded.name)
        sch.parallel(pad_loops[1])
        # explicit vectors along the padded rows (GCC 12.2 at -O3 vectorizes the copy's row
        # loop wrongly when only the rows are padded)
        sch.vectorize(pad_loops[-1])
    if prefetch:
        packed = weight.name if weight.ndim == 5 else f"{weight.name}_packed"
        sch.prefetch(out.name, packed, c, prefetch)
    return tile, anchor, row


# output planes up to this many pixels get the weights prefetched (see _prefetch_distance)
_SMALL_PLANE = 64
_PREFETCH_CHANNELS = 8


def _prefetch_distance(out: Tensor, weight: Tensor, block: int) -> int:
    """Input channels ahead that the weights are prefetched by default: ``_PREFETCH_CHANNELS``
    for weights packed ahead of time and a constant output plane of at most ``_SMALL_PLANE``
    pixels whose block of weights per input channel fits the prefetch hint's limit of
    ``MAX_LINES`` cache lines per iteration, counted as the hint counts them (each of the
    ``r * s`` rows of a block may start anywhere in a line: a 5 x 5 kernel's 25 rows of 32
    channels are 75 lines), else 0. Such a plane
    reuses a block's weights for few tiles, so they come from memory at the pace of the FMAs
    (ResNet-18's 7 x 7 x 512 layers, 9.4 MB of weights, cold: 1.11 -> 1.03 ms on one thread);
    at 14 x 14 and 56 x 56 the hint measured neutral to 2 % slower."""
    h, w = out.shape[2:]
    r, s = weight.shape[2:4]
    if weight.ndim != 5 or not all(isinstance(d, Const) for d in (h, w, r, s)):
        return 0
    row_lines = -(-(LINE_BYTES - 4 + block * 4) // LINE_BYTES)
    lines = r.value * s.value * row_lines                  # type: ignore[union-attr]
    small = h.value * w.value <= _SMALL_PLANE               # type: ignore[union-attr]
    return _PREFETCH_CHANNELS if small and lines <= MAX_LINES else 0


def _k_vectors(who: str, weight: Tensor, lanes: int, k_vectors: int | None) -> int:
    """Vectors of output channels per tile: the packed weights' block in vectors, else
    ``k_vectors`` (default ``DEFAULT_K_VECTORS``)."""
    if weight.ndim == 4:
        return DEFAULT_K_VECTORS if k_vectors is None else k_vectors
    block = weight.shape[4].value          # type: ignore[union-attr]
    wanted = block if k_vectors is None else k_vectors * lanes
    if block % lanes or wanted != block:
        raise ScheduleError(f"{who}: the weights are packed in blocks of {block} channels, "
                            f"the tile takes whole vectors of {lanes} lanes ({wanted} channels); "
                            f"pack with pack_conv2d_weight(weight, k_vectors * lanes)")
    return block // lanes
