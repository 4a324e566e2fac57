# SPDX-License-Identifier: Apache-2.0
"""A convolution (any stride), its bias and ReLU, and a max-pool whose windows overlap (a
window wider than its stride, padded), as one operator: ResNet's stem, a 7 x 7 stride-2
convolution followed by a 3 x 3 stride-2 max-pool with padding 1.

``conv2d_bias_relu_maxpool_overlap_nchw(data, weight, bias, pad, stride, pool, pool_stride,
pool_pad)`` is ``max_pool2d(relu(conv2d(data, weight, stride, pad) + bias), pool,
pool_stride, pool_pad)`` (floor mode). It is computed as ``relu(max(window) + bias)`` over the
window's elements inside the convolution's output: adding a constant, ReLU and rounding are
non-decreasing, so this equals the max of the ReLUs exactly, and a padded position (which
``max_pool2d`` fills with -inf) is left out of the max.

The stages (``schedule_conv2d_bias_relu_maxpool_overlap_nchw`` schedules them):
- ``<data>_phases[b, c, y, f, v]``: the input, zero-padded, its columns split into
  ``stride * pool_stride`` phases (padded column ``stride * pool_stride * v + f``);
- ``<data>_taps[b, c, y, rx, z]``: for each tap column ``rx``, the input element that column
  ``z`` of a convolution row reads, copied from the phases as whole vectors;
- ``<result>_conv[b, k, y, z]``: the convolution, row ``y`` being convolution row
  ``y - pool_pad`` (rows outside the output are computed too and left out of the pooling),
  its columns ordered by phase: convolution column ``pool_stride * u + dx`` is at
  ``z = dx * phase_w + u``. Every tap of a vector of ``z`` is then a contiguous vector of the
  taps, and the columns of every pooling window position are a contiguous vector too;
- the result: each pooled element is the max of its window (one vector load per window
  position), biased and ReLU'd.

The schedule computes the convolution's rows in order, a tile of ``k_tile`` channels by
``row_tile`` rows by a vector of columns in registers, and each pooled row right after the last
convolution row its windows need: the rows are read back from the core's cache, and the
output of the convolution never travels to memory and back as a separate kernel's would.

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import (conv2d_bias_relu_maxpool_overlap_nchw,
...                           schedule_conv2d_bias_relu_maxpool_overlap_nchw)
>>> X = pl.placeholder((1, 1, 9, 9), name="X"); W = pl.placeholder((3, 1, 3, 3), name="W")
>>> B = pl.placeholder((3,), name="B")
>>> out = conv2d_bias_relu_maxpool_overlap_nchw(X, W, B, pad=1, stride=2, lanes=4)
>>> mod = pl.build(schedule_conv2d_bias_relu_maxpool_overlap_nchw(out, lanes=4, k_tile=3))
>>> y = mod(np.ones((1, 1, 9, 9), "float32"), np.ones((3, 1, 3, 3), "float32"),
...         np.array([0, 1, -20], "float32"))
>>> y.shape, float(y[0, 0, 0, 0]), float(y[0, 1, 1, 1]), float(y[0, 2, 1, 1])
((1, 3, 3, 3), 9.0, 10.0, 0.0)
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import config
from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import maximum, where
from ..schedule import Schedule
from .conv import check_conv
from .conv_pool import bias_reader, const_size, weight_reader
from .knobs import check_knobs, default_lanes

#: output channels per register tile (by 2 rows and one vector: 16 accumulators)
DEFAULT_K_TILE = 8
#: convolution rows per register tile (the rows are computed in whole tiles)
ROW_TILE = 2


@dataclass(frozen=True, slots=True)
class _Geometry:
    """The sizes of the stages, from the operator's constants (see the module docstring)."""
    stride: int          # the convolution's
    pool: int
    pool_stride: int
    pool_pad: int
    out_h: int           # the convolution's output
    out_w: int
    pooled_h: int
    pooled_w: int
    phase_w: int         # columns of one column phase of a convolution row
    wide: int            # columns of a row, the phases one after the other, whole vectors
    row_tile: int

    @property
    def rows(self) -> int:
        """Convolution rows computed: those the windows cover, in whole tiles."""
        needed = self.pool_stride * (self.pooled_h - 1) + self.pool
        return -(-needed // self.row_tile) * self.row_tile

    def inside(self, y, x, i: int, j: int):
        """The condition that window position (``i``, ``j``), at convolution row ``y`` and
        column ``x``, is inside the convolution's output: only the bounds some window
        crosses are tested (None: every window's position is inside)."""
        tests = []
        last_y = self.pool_stride * (self.pooled_h - 1) - self.pool_pad + i
        last_x = self.pool_stride * (self.pooled_w - 1) - self.pool_pad + j
        if i < self.pool_pad:
            tests.append(y >= 0)
        if last_y >= self.out_h:
            tests.append(y < self.out_h)
        if j < self.pool_pad:
            tests.append(x >= 0)
        if last_x >= self.out_w:
            tests.append(x < self.out_w)
        cond = None
        for t in tests:
            cond = t if cond is None else cond & t
        return cond

    def column(self, j: int) -> int:
        """Where window column ``j`` of pooled column 0 is in a row: convolution column
        ``pool_stride * q - pool_pad + j`` of pooled column ``q`` is at ``q`` + this."""
        rel = j - self.pool_pad
        return (rel % self.pool_stride) * self.phase_w + rel // self.pool_stride


def _geometry(who: str, data: Tensor, weight: Tensor, pad: int, stride: int, pool: int,
              pool_stride: int, pool_pad: int, lanes: int, row_tile: int) -> _Geometry:
    h, w = (const_size(who, what, d) for what, d in
            (("the height", data.shape[2]), ("the width", data.shape[3])))
    r_ext, s_ext = (const_size(who, "the kernel size", d) for d in weight.shape[2:4])
    out_h, out_w = (h + 2 * pad - r_ext) // stride + 1, (w + 2 * pad - s_ext) // stride + 1
    if out_h < 1 or out_w < 1:
        raise ScheduleError(f"{who}: a {r_ext} x {s_ext} window does not fit in the {h} x {w} "
                            f"input padded by {pad}; pad more or use a smaller kernel")
    # pool_pad < pool_stride keeps every window position's columns inside a row (see column)
    if not isinstance(pool_pad, int) or isinstance(pool_pad, bool) or pool_pad < 0 \
            or 2 * pool_pad > pool or pool_pad >= pool_stride:
        raise ScheduleError(f"{who}: pool_pad must be an integer from 0 to half the pool "
                            f"window ({pool}) and less than pool_stride ({pool_stride}), got "
                            f"{pool_pad!r}; use conv2d_nchw and a separate max-pool")
    pooled_h = (out_h + 2 * pool_pad - pool) // pool_stride + 1
    pooled_w = (out_w + 2 * pool_pad - pool) // pool_stride + 1
    if pooled_h < 1 or pooled_w < 1:
        raise ScheduleError(f"{who}: a {pool} x {pool} pooling window does not fit in the "
                            f"{out_h} x {out_w} convolution output padded by {pool_pad}")
    phase_w = pooled_w + (pool - 1 - pool_pad) // pool_stride
    wide = -(-(pool_stride * phase_w) // lanes) * lanes
    return _Geometry(stride, pool, pool_stride, pool_pad, out_h, out_w, pooled_h, pooled_w,
                     phase_w, wide, row_tile)


def conv2d_bias_relu_maxpool_overlap_nchw(
        data: Tensor, weight: Tensor, bias: Tensor | None = None, pad: int = 0,
        stride: int = 1, pool: int = 3, pool_stride: int = 2, pool_pad: int = 1, *,
        out_channels: int | None = None, lanes: int | None = None,
        row_tile: int = ROW_TILE, name: str = "conv_pool") -> Tensor:
    """``max_pool2d(relu(conv2d(data, weight, stride, pad) + bias), pool, pool_stride,
    pool_pad)`` as the stages of the module docstring. ``weight`` is (K, C, R, S), or packed
    by ``pack_conv2d_weight`` with ``out_channels = K``; ``bias`` is (K,), (K, 1, 1) or None.
    The image's height and width and the kernel's size must be constants (the batch may be
    symbolic), and ``pool_pad < pool_stride``; ``lanes`` is the vector width (the host's by
    default).

    >>> import polyloop as pl
    >>> conv2d_bias_relu_maxpool_overlap_nchw(pl.placeholder((1, 3, 224, 224), name="X"),
    ...     pl.placeholder((64, 3, 7, 7), name="W"), pad=3, stride=2)
    Tensor(conv_pool: float32[1, 64, 56, 56])
    """
    who = "conv2d_bias_relu_maxpool_overlap_nchw"
    check_conv(who, data, None, pad, stride)
    check_knobs(who, pool=pool, pool_stride=pool_stride)
    k_out, w_at = weight_reader(who, weight, out_channels)
    b_at = bias_reader(who, bias, k_out)
    lanes = default_lanes(str(data.dtype)) if lanes is None else lanes
    check_knobs(who, lanes=lanes, row_tile=row_tile)
    if str(data.shape[1]) != str(weight.shape[1]):
        raise ScheduleError(f"{who}: data has {data.shape[1]} channels, weight expects "
                            f"{weight.shape[1]}")
    geo = _geometry(who, data, weight, pad, stride, pool, pool_stride, pool_pad, lanes,
                    row_tile)
    kernel = tuple(d.value for d in weight.shape[2:4])    # constants: checked by _geometry
    conv = _conv_rows(_column_taps(data, kernel, pad, geo), w_at, kernel[0], k_out, geo, name)

    def window(b, k, p, q):
        best = None
        for i in range(pool):
            for j in range(pool):
                v = conv[b, k, pool_stride * p + i, q + geo.column(j)]
                inside = geo.inside(pool_stride * p - pool_pad + i, pool_stride * q - pool_pad
                                    + j, i, j)
                v = v if inside is None else where(inside, v, float("-inf"))
                best = v if best is None else maximum(best, v)
        best = best + b_at(k) if b_at is not None else best
        return maximum(best, 0.0)
    return te.compute((data.shape[0], k_out, geo.pooled_h, geo.pooled_w), window, name=name)


def _column_taps(data: Tensor, kernel: tuple[int, int], pad: int, geo: _Geometry) -> Tensor:
    """``<data>_taps[b, c, y, rx, z]``: the zero-padded input element that tap column ``rx``
    of row column ``z`` (convolution column ``pool_stride * u + dx``, ``z = dx * phase_w +
    u``) reads, copied from ``<data>_phases`` (read with a stride once)."""
    n, c_in, h, w = data.shape
    r_ext, s_ext = kernel
    s, ps, wc = geo.stride, geo.pool_stride, geo.phase_w
    phases = s * ps
    top = s * geo.pool_pad + pad
    height = s * (geo.rows - 1) + r_ext
    last_u = max(wc - 1, geo.wide - 1 - (ps - 1) * wc)
    width = last_u + (s * (ps - 1) + s_ext - 1) // phases + 1
    x_ph = te.compute((n, c_in, height, phases, width),
                      lambda b, ch, y, f, v: where(
                          (y >= top) & (y < h + top) & (phases * v + f >= pad)
                          & (phases * v + f < w + pad),
                          data[b, ch, y - top, phases * v + f - pad], 0.0),
                      name=f"{data.name}_phases")

    def tap(b, ch, y, rx, z):
        # column z is phase dx = min(z // phase_w, ps - 1): padded column
        # phases * u + s * dx + rx, i.e. phase (s * dx + rx) % phases, v = u + its quotient
        value = None
        for dx in reversed(range(ps)):
            e = s * dx + rx
            read = x_ph[b, ch, y, e % phases, z - dx * wc + e // phases]
            value = read if value is None else where(z < (dx + 1) * wc, read, value)
        return value
    return te.compute((n, c_in, height, s_ext, geo.wide), tap, name=f"{data.name}_taps")


def _conv_rows(taps: Tensor, w_at, r_ext: int, k_out: int, geo: _Geometry,
               name: str) -> Tensor:
    """``<name>_conv[b, k, y, z]``: convolution row ``y - pool_pad`` (see the module
    docstring)."""
    n, c_in, _, s_ext, _ = taps.shape
    rc = te.reduce_axis((0, c_in), name="rc")
    ry = te.reduce_axis((0, r_ext), name="ry")
    rx = te.reduce_axis((0, s_ext), name="rx")
    return te.compute((n, k_out, geo.rows, geo.wide),
                      lambda b, k, y, z: te.sum(taps[b, rc, geo.stride * y + ry, rx, z]
                                                * w_at(k, rc, ry, rx), axis=[rc, ry, rx]),
                      name=f"{name}_conv")


def _stages(who: str, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(convolution rows, column taps, input phases) of ``out``."""
    conv = out.inputs[0] if isinstance(out, Tensor) and out.inputs else None
    taps = conv.inputs[0] if conv is not None and conv.inputs else None
    if conv is None or conv.name != f"{out.name}_conv" or taps is None \
            or not taps.name.endswith("_taps") or not taps.inputs:
        raise ScheduleError(f"{who}: expected the result of "
                            f"conv2d_bias_relu_maxpool_overlap_nchw, got {out!r}")
    return conv, taps, taps.inputs[0]


def schedule_conv2d_bias_relu_maxpool_overlap_nchw(
        out: Tensor, *, k_tile: int = DEFAULT_K_TILE, row_tile: int = ROW_TILE,
        chunks: int | None = None, lanes: int | None = None,
        parallel: bool = True) -> Schedule:
    """The register-tile schedule of ``out = conv2d_bias_relu_maxpool_overlap_nchw(...)``
    (see the module docstring): tiles of ``k_tile`` output channels (a divisor of the
    channels, else the largest one below) by ``row_tile`` rows (the operator's) by a vector of
    ``lanes`` columns (the host's width by default; the one the operator was built with). The
    channel tiles are split into ``chunks`` (default: one per thread) that run in parallel
    unless ``parallel`` is false; a chunk's tiles run inside the loop over rows, so that the
    rows of taps they read come from the core's cache after the first.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 3, 30, 30), name="X"); W = pl.placeholder((8, 3, 7, 7), name="W")
    >>> out = conv2d_bias_relu_maxpool_overlap_nchw(X, W, pad=3, stride=2, lanes=8)
    >>> sch = schedule_conv2d_bias_relu_maxpool_overlap_nchw(out, lanes=8)
    >>> [loop.name for loop in sch.get_loops("conv_pool_conv")]
    ['b_k_0_0_fused', 'y_0', 'k_0_1', 'z_0', 'rc', 'ry', 'rx', 'y_1', 'k_1', 'z_1']
    """
    who = "schedule_conv2d_bias_relu_maxpool_overlap_nchw"
    conv, taps, phases = _stages(who, out)
    lanes = default_lanes(str(out.dtype)) if lanes is None else lanes
    check_knobs(who, k_tile=k_tile, row_tile=row_tile, lanes=lanes)
    if conv.shape[2].value % row_tile:                       # type: ignore[union-attr]
        raise ScheduleError(f"{who}: the convolution has {conv.shape[2]} rows, not whole tiles "
                            f"of {row_tile}; build the operator with row_tile={row_tile}")
    if conv.shape[3].value % lanes:                          # type: ignore[union-attr]
        raise ScheduleError(f"{who}: the convolution rows are {conv.shape[3]} wide, not whole "
                            f"vectors of {lanes}; build the operator with lanes={lanes}")
    channels = conv.shape[1].value                           # type: ignore[union-attr]
    k_tile = max(d for d in range(1, min(k_tile, channels) + 1) if channels % d == 0)
    tiles_k = channels // k_tile
    chunks = min(config.CONFIG.threads, tiles_k) if chunks is None else chunks
    check_knobs(who, chunks=chunks)
    sch = Schedule(out)
    n, k, y, z, rc, ry, rx = sch.get_loops(conv.name)
    k0, k1 = sch.split(k, factors=[None, k_tile])
    y0, y1 = sch.split(y, factors=[None, row_tile])
    z0, z1 = sch.split(z, factors=[None, lanes])
    # a chunk of channel tiles per thread, its tiles inside the row loop: the rows of taps a
    # row of tiles reads are read from memory once and then from the core's cache
    kc, k0 = sch.split(k0, factors=[min(chunks, tiles_k), None])
    sch.reorder(n, kc, y0, k0, z0, rc, ry, rx, y1, k1, z1)
    tiles = sch.fuse(n, kc)
    if parallel:
        sch.parallel(tiles)
    # the tap loops stay rolled: unrolled, the compiler keeps every broadcast weight of the
    # taps live at once and spills the accumulators (measured 2x slower)
    sch.unroll(y1)
    sch.unroll(k1)
    sch.vectorize(z1)
    init = sch.decompose_reduction(conv.name, rc)
    sch.vectorize(sch.get_loops(init)[-1])
    # each pooled row right after the last convolution rows its windows read
    sch.reverse_compute_at(out.name, y0)
    sch.vectorize(sch.get_loops(out.name)[-1])
    # the taps row by row (in parallel), each from its row of phases, made just before
    b, c, row, rx, z = sch.get_loops(taps.name)
    sch.reorder(row, b, c, rx, z)
    if parallel:
        sch.parallel(row)
    sch.vectorize(z)
    try:
        sch.compute_at(phases.name, row)
    except ScheduleError:       # a phase has columns no tap reads: the phases on their own
        b, c, row, f, v = sch.get_loops(phases.name)
        sch.reorder(row, b, c, f, v)
        if parallel:
            sch.parallel(row)
    return sch
