# SPDX-License-Identifier: Apache-2.0
"""Depthwise 2-D convolution (NCHW, stride 1) and its CPU schedule.

``depthwise_conv2d_nchw(data, weight, pad)``: ``weight (C, 1, R, S)`` as in PyTorch (one filter
per channel), ``pad`` zeros on each side, padding as its own stage like ``conv2d_nchw``'s.

The recipe: the channel loop is parallel and each output row is computed in vectors along the
row, ``x_vectors`` vectors unrolled (by default the whole row, up to 8 vectors: as many
independent FMA chains). Where a channel's padded plane fits in L1 it is made by the thread
that uses it, right before (``compute_at``), and each input row is read from it by the three
output rows that use it; a bigger plane is not made at all: the padding is inlined into the
sum, whose loads read the input in place under lane masks (zeros outside the image).
Streaming stores of the output are a knob (``stream``), off by default: measured slower while
input and output stay in the last-level cache between calls (up to 96 x 96 x 256).

>>> import numpy as np, polyloop as pl
>>> X = pl.placeholder((1, 2, 6, 6), name="X"); W = pl.placeholder((2, 1, 3, 3), name="W")
>>> mod = pl.build(schedule_depthwise_conv2d_nchw(depthwise_conv2d_nchw(X, W)))
>>> y = mod(np.ones((1, 2, 6, 6), "float32"), np.ones((2, 1, 3, 3), "float32"))
>>> float(y[0, 0, 0, 0]), float(y[0, 1, 3, 3])
(4.0, 9.0)
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import where
from ..ir.expr import Const
from ..schedule import Schedule
from ..schedule.trace import LoopHandle
from .conv import check_conv, conv_output_size, operands, pair, padded_input
from .knobs import check_knobs, default_lanes


def depthwise_conv2d_nchw(data: Tensor, weight: Tensor, pad: int | tuple[int, int] = 1, *,
                          stride: int | tuple[int, int] = 1,
                          row_multiple: int | None = None,
                          column_phases: bool | None = None) -> Tensor:
    """``out[n, c, y, x] = sum_{r, s} pad(data)[n, c, sh y + r, sw x + s] * weight[c, 0, r, s]``
    (``pad = (R - 1) // 2`` is SAME padding for odd R; ``pad`` and ``stride`` an int or a
    (rows, columns) pair); the result is ``dwconv``.

    The sum is computed on rows widened to a multiple of ``row_multiple`` (default: the host's
    float32 vector width when the width is a constant, else 1), in a stage ``dwconv_wide``
    whose extra columns see only padding zeros and are dropped by ``dwconv``: every vector of
    the sum is then whole (no masked accumulation, which would go through memory). With a
    column stride ``sw`` > 1 (constant sizes) and ``column_phases`` (the default,
    ``COLUMN_PHASES``) the padded input is a stage ``<data>_phases`` ``[n, c, row, phase,
    column]`` holding column ``column * sw + phase``: the taps of neighbouring outputs are then
    contiguous, and only the kept columns are summed. With ``column_phases=False`` the rows are
    summed at every column of the window's span, ``(W_out - 1) * sw + 1`` widened likewise, and
    ``dwconv`` keeps every ``sw``-th: ``sw`` times the products, but read in place, in whole
    vectors, with no copy of the input (alone, one thread, AVX-512, 3 x 3 stride 2: 1.5 times
    faster at 112 x 112 x 96, 2.6 times at 28 x 28 x 256, 3.2 at 14 x 14 x 672 with 5 x 5; but
    with an elementwise epilogue level or slower, so not the default).

    >>> import polyloop as pl
    >>> depthwise_conv2d_nchw(pl.placeholder((1, 3, 8, 8), name="X"),
    ...                       pl.placeholder((3, 1, 3, 3), name="W"))
    Tensor(dwconv: float32[1, 3, 8, 8])
    >>> depthwise_conv2d_nchw(pl.placeholder((1, 3, 9, 9), name="X"),
    ...                       pl.placeholder((3, 1, 5, 5), name="W"), 2, stride=2)
    Tensor(dwconv: float32[1, 3, 5, 5])
    """
    who = "depthwise_conv2d_nchw"
    check_conv(who, data, weight, pad, stride)
    if str(data.shape[1]) != str(weight.shape[0]) or str(weight.shape[1]) != "1":
        raise ScheduleError(f"{who}: weight must be (C, 1, R, S) with C = "
                            f"{data.shape[1]} channels of data, got {weight!r}")
    n, c, h, w = data.shape
    _, _, r_ext, s_ext = weight.shape
    (ph, pw), (sh, sw) = pair(pad), pair(stride)
    out_h, out_w = conv_output_size(who, h, w, r_ext, s_ext, pad, stride)
    if sw > 1 and not all(isinstance(d, (Const, int)) for d in (w, s_ext, out_w)):
        raise ScheduleError(f"{who}: a column stride needs constant widths, got {data!r}")
    wide_w = out_w
    if row_multiple is None:
        row_multiple = default_lanes(str(data.dtype)) if isinstance(w, Const) else 1
    check_knobs(who, row_multiple=row_multiple)
    if isinstance(out_w, int) and row_multiple > 1:
        wide_w = -(-out_w // row_multiple) * row_multiple
    ry = te.reduce_axis((0, r_ext), name="ry")
    rx = te.reduce_axis((0, s_ext), name="rx")
    if column_phases is None:
        column_phases = COLUMN_PHASES
    if sw == 1 or not column_phases:
        # with a column stride: every column of the window's span is summed, every sw-th kept
        if sw > 1:
            full = (out_w - 1) * sw + 1
            wide_w = -(-full // row_multiple) * row_multiple
        padded = padded_input(data, pad, kernel_width=s_ext,
                              extra_columns=wide_w if isinstance(wide_w, int) else None)
        wide = te.compute((n, c, out_h, wide_w),
                          lambda b, ch, y, x: te.sum(padded[b, ch, sh * y + ry, x + rx]
                                                     * weight[ch, 0, ry, rx], axis=[ry, rx]),
                          name="dwconv_wide")
        if sw > 1:
            return te.compute((n, c, out_h, out_w), lambda b, ch, y, x: wide[b, ch, y, sw * x],
                              name="dwconv")
    else:
        phases = _phases(data, ph, pw, sw, wide_w + (s_ext.value - 1) // sw)
        wide = te.compute((n, c, out_h, wide_w),
                          lambda b, ch, y, x: te.sum(
                              phases[b, ch, sh * y + ry, rx % sw, x + rx // sw]
                              * weight[ch, 0, ry, rx], axis=[ry, rx]),
                          name="dwconv_wide")
    return te.compute((n, c, out_h, out_w), lambda b, ch, y, x: wide[b, ch, y, x], name="dwconv")


#: the default of ``column_phases``: the whole span summed in place measured faster alone but
#: slower with an elementwise epilogue (its strided read of the row buffer), so not yet default
COLUMN_PHASES = True


def _phases(data: Tensor, ph: int, pw: int, sw: int, columns: int) -> Tensor:
    """The padded input split by column phase: ``[n, c, row, phase, q]`` is padded column
    ``q * sw + phase`` (zeros outside the image). It reads a padded stage ``<data>_pad`` of
    ``columns * sw`` columns: the padding's conditions are on contiguous elements there, and
    the split is a plain strided copy (both vectorize; a strided read under a condition does
    not)."""
    n, c, h, w = data.shape
    width = columns * sw
    padded = te.compute((n, c, h + 2 * ph, width), lambda b, ch, y, x: where(
        (y >= ph) & (y < h + ph) & (x >= pw) & (x < w + pw), data[b, ch, y - ph, x - pw], 0.0),
        name=f"{data.name}_pad")
    return te.compute((n, c, h + 2 * ph, sw, columns),
                      lambda b, ch, y, p, q: padded[b, ch, y, q * sw + p],
                      name=f"{data.name}_phases")


def schedule_depthwise_conv2d_nchw(out: Tensor, *, lanes: int | None = None,
                                   x_vectors: int | None = None,
                                   pad_in_channel: bool | None = None,
                                   inline_pad: bool | None = None,
                                   stream: bool = False, y_rows: int | None = None) -> Schedule:
    """The schedule of ``out = depthwise_conv2d_nchw(data, weight, pad)``: channels in
    parallel; each (widened) output row is accumulated in a row-local buffer in vectors of
    ``lanes`` pixels, ``x_vectors`` of them unrolled, all nine taps unrolled, then copied into
    ``out``. ``x_vectors`` defaults to the whole widened row, up to 8 vectors (independent FMA
    chains: a row of 6 vectors keeps 6 in flight where 2 would wait on the FMA latency);
    ``y_rows`` rows are summed together, tap by tap (default: the largest divisor of the height
    that keeps ``y_rows * x_vectors`` within 8 vectors: a 7 x 7 plane's rows of one vector each
    were seven chains of 25 dependent FMAs for a 5 x 5 window, run one after the other).
    The padding, three ways. With ``inline_pad`` there is no padded plane: the sum reads the
    input in place, its border conditions become lane masks of the loads (AVX-512: zero-masking
    loads, no fault outside the image), so each input row comes from the cache hierarchy once
    per channel and no plane is written or re-read. With ``pad_in_channel`` the padded plane of a
    channel is made in a channel-local buffer by the thread that uses it, right before; otherwise
    the padded input is made whole first, in parallel. The default inlines the padding when a
    channel's padded plane is larger than ``_PLANE_IN_L1`` elements (24 KB of float32: a bigger
    plane leaves L1, and making it then costs more than masking: 0.87 vs 1.7 ms at 96 x 96 x 256
    and 0.55 vs 0.79 ms at 80 x 80, one thread), when a size is symbolic, or when the rows are
    widened (an output row that is not whole vectors: its loads are masked anyway, and a plane
    made per channel and read at once stalls on its own fresh stores: inlined, one thread,
    AVX-512, 7 x 7 x 960 (3 x 3) 0.025 vs 0.041 ms, 7 x 7 x 1152 (5 x 5) 0.064 vs 0.085,
    14 x 14 x 672 (5 x 5) 0.085 vs 0.10, 56 x 56 x 144 (5 x 5) 0.33 vs 0.43), and pads in the
    channel otherwise (rows of whole vectors: 0.10 vs 0.11 ms at 64 x 64 x 96, level at
    32 x 32 x 256).
    ``stream``: the output
    is written with streaming stores (``nontemporal``); worth it only when the output does not
    stay in the last-level cache between uses.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 4, 10, 10), name="X"); W = pl.placeholder((4, 1, 3, 3), name="W")
    >>> sch = schedule_depthwise_conv2d_nchw(depthwise_conv2d_nchw(X, W), lanes=8)
    >>> [loop.name for loop in sch.get_loops("dwconv_wide")]
    ['b', 'ch', 'y_0', 'x_0', 'ry', 'rx', 'y_1', 'x_1', 'x_2']
    """
    sch = Schedule(out)
    depthwise_rows(sch, out, out, "schedule_depthwise_conv2d_nchw", lanes=lanes,
                   x_vectors=x_vectors, pad_in_channel=pad_in_channel, inline_pad=inline_pad,
                   stream=stream, y_rows=y_rows)
    return sch


def depthwise_rows(sch: Schedule, out: Tensor, dw: Tensor, who: str, *,
                   lanes: int | None = None, x_vectors: int | None = None,
                   pad_in_channel: bool | None = None, inline_pad: bool | None = None,
                   stream: bool = False, y_rows: int | None = None) -> None:
    """The recipe of ``schedule_depthwise_conv2d_nchw`` applied to ``dw =
    depthwise_conv2d_nchw(...)`` inside ``sch``: ``out`` is ``dw`` itself or an elementwise
    stage reading it (every stage between them inlined into it already), computed on each
    output row right after the row is summed."""
    wide = dw.inputs[0] if isinstance(dw, Tensor) and len(dw.inputs) == 1 else None
    if wide is None or wide.name != "dwconv_wide":
        raise ScheduleError(f"{who}: expected the result of depthwise_conv2d_nchw(data, weight), "
                            f"got {dw!r}")
    src = wide.inputs[0] if len(wide.inputs) == 2 else None
    if src is not None and src.ndim == 5:       # column phases, read from a padded stage
        padded = src
    else:
        _, _, padded = operands(wide, who, "depthwise_conv2d_nchw")
    lanes = default_lanes(str(out.dtype)) if lanes is None else lanes
    if x_vectors is None:
        x_vectors = _row_vectors(wide.shape[3], lanes)
    check_knobs(who, lanes=lanes, x_vectors=x_vectors)
    if y_rows is None:
        y_rows = _tile_rows(wide.shape[2], x_vectors)
    check_knobs(who, y_rows=y_rows)
    c = _row_sums(sch, out, wide, lanes, x_vectors, y_rows, stream)
    if padded is not None:
        _padding(sch, who, out, wide, padded, c, lanes, pad_in_channel=pad_in_channel,
                 inline_pad=inline_pad)


def _row_sums(sch: Schedule, out: Tensor, wide: Tensor, lanes: int, x_vectors: int,
              y_rows: int, stream: bool) -> LoopHandle:
    """Channels in parallel, each tile of ``y_rows`` output rows summed in a local buffer in
    unrolled vectors, then copied into ``out``; returns the channel loop."""
    # the sum goes to a row-local buffer; the stage that held it disappears
    sch.compute_inline(sch.cache_write(wide.name, "local"))
    n, c, y, x, r, s = sch.get_loops(wide.name)
    x0, x1, x2 = sch.split(x, factors=[None, x_vectors, lanes])
    if y_rows > 1:
        # several rows of one tap at a time: independent sums (a row of one vector alone is
        # one chain of r * s dependent FMAs), and each tap's weight is loaded once for them
        y, y1 = sch.split(y, factors=[None, y_rows])
        sch.reorder(n, c, y, x0, r, s, y1, x1, x2)
        sch.unroll(y1)
    else:
        sch.reorder(n, c, y, x0, r, s, x1, x2)
    sch.parallel(c)
    for loop in (r, s, x1):
        sch.unroll(loop)
    sch.vectorize(x2)
    init = sch.decompose_reduction(wide.name, r)
    # the zeroing of a row tile: vectors too (a scalar loop became a rep stos per tile)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.reverse_compute_at(out.name, y)
    if stream:
        # the whole output row is one vector loop, so that it can be peeled to a boundary
        sch.vectorize(sch.get_loops(out.name)[-1])
        sch.annotate(c, "nontemporal", out.name)
    else:
        sch.vectorize(sch.split(sch.get_loops(out.name)[-1], factors=[None, lanes])[1])
    return c


def _padding(sch: Schedule, who: str, out: Tensor, wide: Tensor, padded: Tensor, c: LoopHandle,
             lanes: int, *, pad_in_channel: bool | None, inline_pad: bool | None) -> None:
    """The padded input: read in place (inlined), made per channel inside channel loop ``c``,
    or made whole in parallel first (see ``schedule_depthwise_conv2d_nchw``)."""
    if padded.ndim == 5:      # column phases: inlined, the reads would be strided again
        if inline_pad:
            raise ScheduleError(f"{who}: a column-strided depthwise convolution reads its "
                                "input split by column phase; it cannot inline the padding")
        inline_pad = False
    if inline_pad is None:
        inline_pad = pad_in_channel is None and (_plane_leaves_l1(padded)
                                                  or _widened(out, wide))
    if inline_pad and pad_in_channel:
        raise ScheduleError(f"{who}: inline_pad and pad_in_channel exclude each other (the "
                            "padding is either read in place or made per channel); give one")
    if inline_pad:
        sch.compute_inline(padded.name)
        return
    if pad_in_channel is None:
        pad_in_channel = all(isinstance(d, Const) and d.value > 0 for d in out.shape[2:])
    if pad_in_channel:
        plane = sch.cache_read(wide.name, padded.name, "local")
        sch.compute_inline(padded.name)
        sch.compute_at(plane, c)
        if padded.ndim == 5:
            # a strided copy, which the C compiler vectorizes with permutes: one whole loop
            sch.vectorize(sch.get_loops(plane)[-1])
            # the phases of a row are split from that padded row, made right before
            row = sch.cache_read(plane, padded.inputs[0].name, "local")
            sch.compute_inline(padded.inputs[0].name)
            sch.compute_at(row, sch.get_loops(plane)[-3])
            sch.vectorize(sch.split(sch.get_loops(row)[-1], factors=[None, lanes])[1])
        else:
            sch.vectorize(sch.split(sch.get_loops(plane)[-1], factors=[None, lanes])[1])
    else:
        sch.parallel(sch.get_loops(padded.name)[1])


_PLANE_IN_L1 = 6144    # elements of a padded plane made per channel (24 KB of float32)


def _widened(out: Tensor, wide: Tensor) -> bool:
    """Whether the rows are summed wider than the output's (a row that is not whole vectors)."""
    return str(out.shape[3]) != str(wide.shape[3])


def _plane_leaves_l1(padded: Tensor) -> bool:
    """Whether a channel's padded plane is too big for L1 (or of symbolic size)."""
    rows, cols = padded.shape[2:]
    if not (isinstance(rows, Const) and isinstance(cols, Const)):
        return True
    return rows.value * cols.value > _PLANE_IN_L1


# independent vector sums a row tile aims for (FMA latency times the FMAs issued per cycle)
_SUMS = 8


def _tile_rows(height: object, x_vectors: int) -> int:
    """Output rows per tile: the largest divisor of a constant height that keeps the tile
    within ``_SUMS`` vectors (a row of fewer vectors would leave the FMA units waiting on one
    dependent chain), else 1.

    >>> _tile_rows(7, 1), _tile_rows(28, 2), _tile_rows(56, 4), _tile_rows(112, 7)
    (7, 4, 2, 1)
    """
    rows = height.value if isinstance(height, Const) else height
    if not isinstance(rows, int):
        return 1
    most = max(1, _SUMS // x_vectors)
    return max(d for d in range(1, min(rows, most) + 1) if rows % d == 0)


def _row_vectors(width: object, lanes: int, most: int = 8) -> int:
    """Vectors of a row tile: the largest divisor of a constant row's vector count up to
    ``most`` (no partial tile), else 2."""
    if not isinstance(width, Const) or width.value % lanes:
        return 2
    count = width.value // lanes
    return max(d for d in range(1, min(count, most) + 1) if count % d == 0)
