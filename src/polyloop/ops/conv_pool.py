# SPDX-License-Identifier: Apache-2.0
"""A convolution of few input channels, its bias and ReLU, and the max-pool that follows, as
one operator: each tile of pooled rows is computed from a tile of convolution rows that
never leaves registers and L1 (the full-size convolution output is never written).

``conv2d_bias_relu_maxpool_nchw(data, weight, bias, pad, pool)`` is
``max_pool2d(relu(conv2d(data, weight, stride 1, pad) + bias), pool, stride pool)`` (floor
mode, no pool padding). It is computed as ``relu(max(window) + bias)``: adding a constant and
ReLU are non-decreasing and so is rounding to float32, so this equals the max of the ReLUs
exactly, with one add per pooled element instead of ``pool**2``.

The recipe (``schedule_conv2d_bias_relu_maxpool_nchw``) suits a first layer (one to a few
input channels), where the many-channel conv2d recipe has little to reduce over:
- the padded input is split into ``pool`` column phases (``<data>_phases[b, c, y, p, x]`` is
  padded column ``pool * x + p``), and the convolution is kept per phase of its columns
  (``<result>_conv[b, k, y, dx, x]`` is column ``pool * x + dx``), its rows widened to whole
  vectors (the extra columns read zeros and are never stored into the result): the columns of
  one pooling window are then in different vectors at the same lane, so the pooling is a
  vector max, and every input read is a contiguous vector;
- a register tile is ``k_tile`` output channels by the ``pool`` rows of one pooled row by the
  ``pool`` phases of the whole widened row: per tap, a few input vectors and ``k_tile``
  broadcast weights feed ``k_tile * pool * pool * row_vectors`` FMAs (16 accumulators by
  default);
- the pooled row (``<result>_wide``) and the result are computed from the tile right after it,
  and the (image, channel tile) pairs run in parallel.

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import conv2d_bias_relu_maxpool_nchw, schedule_conv2d_bias_relu_maxpool_nchw
>>> X = pl.placeholder((1, 1, 7, 7), name="X"); W = pl.placeholder((3, 1, 3, 3), name="W")
>>> B = pl.placeholder((3,), name="B")
>>> out = conv2d_bias_relu_maxpool_nchw(X, W, B, pad=1, pool=2)
>>> mod = pl.build(schedule_conv2d_bias_relu_maxpool_nchw(out))
>>> y = mod(np.ones((1, 1, 7, 7), "float32"), np.ones((3, 1, 3, 3), "float32"),
...         np.array([0, 1, -20], "float32"))
>>> y.shape, float(y[0, 0, 0, 0]), float(y[0, 1, 1, 1]), float(y[0, 2, 1, 1])
((1, 3, 3, 3), 9.0, 10.0, 0.0)
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import maximum, where
from ..ir.expr import Const
from ..schedule import Schedule
from .conv import check_conv
from .knobs import check_knobs, default_lanes

#: output channels per register tile (with two row vectors and a pool of 2: 16 accumulators)
DEFAULT_K_TILE = 4


def const_size(who: str, what: str, d: object) -> int:
    """The value of the constant size ``d``; a ScheduleError naming ``who`` and ``what`` when
    it is symbolic (the fused recipes size their tiles from it).

    >>> import polyloop as pl
    >>> const_size("f", "the width", pl.placeholder((3, 7), name="A").shape[1])
    7
    """
    if not isinstance(d, Const):
        raise ScheduleError(f"{who}: {what} must be a constant, got {d}; the fused recipe "
                            "sizes its row tiles from it (use conv2d_nchw and a pooling)")
    return d.value


def weight_reader(who: str, weight: Tensor, out_channels: int | None):
    """(K, a function (k, c, r, s) -> the weight) for weights (K, C, R, S) or packed ones
    (``pack_conv2d_weight``: blocks, C, R, S, block) of ``out_channels``.

    >>> import polyloop as pl
    >>> k, at = weight_reader("f", pl.placeholder((2, 3, 3, 3, 16), name="P"), 20)
    >>> k, at(17, 0, 1, 2)
    (20, <Load P[1, 0, 1, 2, 1]>)
    """
    if weight.ndim == 4:
        return const_size(who, "the weight's output channels", weight.shape[0]), \
            lambda k, c, r, s: weight[k, c, r, s]
    if weight.ndim != 5 or out_channels is None:
        raise ScheduleError(f"{who}: weight must be (K, C, R, S), or packed (blocks, C, R, S, "
                            f"block) with out_channels given, got {weight!r}")
    kb = const_size(who, "the packed block", weight.shape[4])
    check_knobs(who, out_channels=out_channels)
    return out_channels, lambda k, c, r, s: weight[k // kb, c, r, s, k % kb]


def bias_reader(who: str, bias: Tensor | None, k_out: int):
    """A function k -> the bias of channel k for a bias (K,) or (K, 1, 1), None without one.

    >>> import polyloop as pl
    >>> bias_reader("f", pl.placeholder((4, 1, 1), name="B"), 4)(2)
    <Load B[2, 0, 0]>
    """
    if bias is None:
        return None
    if not isinstance(bias, Tensor) or bias.ndim not in (1, 3) \
            or str(bias.shape[0]) != str(k_out) or any(str(d) != "1" for d in bias.shape[1:]):
        raise ScheduleError(f"{who}: bias must be ({k_out},) or ({k_out}, 1, 1), got {bias!r}")
    return (lambda k: bias[k]) if bias.ndim == 1 else (lambda k: bias[k, 0, 0])


def conv2d_bias_relu_maxpool_nchw(data: Tensor, weight: Tensor, bias: Tensor | None = None,
                                  pad: int = 0, pool: int = 2, *,
                                  out_channels: int | None = None, lanes: int | None = None,
                                  name: str = "conv_pool") -> Tensor:
    """``max_pool2d(relu(conv2d(data, weight, pad) + bias), pool)`` (stride 1 convolution;
    pooling windows ``pool`` x ``pool`` with stride ``pool``, floor mode), as the stages of
    the module docstring. ``weight`` is (K, C, R, S), or packed by ``pack_conv2d_weight``
    with ``out_channels = K``; ``bias`` is (K,), (K, 1, 1) or None. The image's height and
    width and the kernel's size must be constants (the batch may be symbolic).

    >>> import polyloop as pl
    >>> conv2d_bias_relu_maxpool_nchw(pl.placeholder((pl.var("n"), 1, 28, 28), name="X"),
    ...                               pl.placeholder((32, 1, 3, 3), name="W"))
    Tensor(conv_pool: float32[n, 32, 13, 13])
    """
    who = "conv2d_bias_relu_maxpool_nchw"
    check_conv(who, data, None, pad)
    check_knobs(who, pool=pool)
    k_out, w_at = weight_reader(who, weight, out_channels)
    b_at = bias_reader(who, bias, k_out)
    lanes = default_lanes(str(data.dtype)) if lanes is None else lanes
    check_knobs(who, lanes=lanes)
    n, c_in, h, w = data.shape
    if str(c_in) != str(weight.shape[1]):
        raise ScheduleError(f"{who}: data has {c_in} channels, weight expects {weight.shape[1]}")
    r_ext, s_ext = (const_size(who, "the kernel size", d) for d in weight.shape[2:4])
    out_h = const_size(who, "the height", h) + 2 * pad - r_ext + 1
    out_w = const_size(who, "the width", w) + 2 * pad - s_ext + 1
    if out_h < pool or out_w < pool:
        raise ScheduleError(f"{who}: a {pool} x {pool} pooling window does not fit in the "
                            f"{out_h} x {out_w} convolution output; use a smaller pool")
    pooled_h, pooled_w = out_h // pool, out_w // pool
    wide_w = -(-pooled_w // lanes) * lanes
    phases = _phase_input(data, pad, pool, wide_w + (pool + s_ext - 2) // pool)
    rc = te.reduce_axis((0, c_in), name="rc")
    ry = te.reduce_axis((0, r_ext), name="ry")
    rx = te.reduce_axis((0, s_ext), name="rx")
    # conv[b, k, y, dx, x] is the convolution at column pool * x + dx: its input column
    # pool * (x + (dx + rx) // pool) + (dx + rx) % pool is phase (dx + rx) % pool
    conv = te.compute((n, k_out, pooled_h * pool, pool, wide_w),
                      lambda b, k, y, dx, x: te.sum(
                          phases[b, rc, y + ry, (dx + rx) % pool, x + (dx + rx) // pool]
                          * w_at(k, rc, ry, rx), axis=[rc, ry, rx]), name=f"{name}_conv")

    def window(b, k, y, x):
        best = conv[b, k, pool * y, 0, x]
        for dy in range(pool):
            for dx in range(pool):
                if dy or dx:
                    best = maximum(best, conv[b, k, pool * y + dy, dx, x])
        return maximum(best + b_at(k), 0.0) if b_at is not None else maximum(best, 0.0)
    wide = te.compute((n, k_out, pooled_h, wide_w), window, name=f"{name}_wide")
    return te.compute((n, k_out, pooled_h, pooled_w), lambda b, k, y, x: wide[b, k, y, x],
                      name=name)


def _phase_input(data: Tensor, pad: int, pool: int, width: int) -> Tensor:
    """``data`` padded by ``pad`` zeros and split into ``pool`` column phases:
    ``[b, c, y, p, x]`` is padded column ``pool * x + p`` (zeros past the image), so that the
    convolution columns one pooling window apart read consecutive elements."""
    n, c, h, w = data.shape
    return te.compute((n, c, h + 2 * pad, pool, width),
                      lambda b, ch, y, p, x: where(
                          (y >= pad) & (y < h + pad) & (pool * x + p >= pad)
                          & (pool * x + p < w + pad), data[b, ch, y - pad, pool * x + p - pad],
                          0.0), name=f"{data.name}_phases")


def _stages(who: str, out: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
    """(pooled rows, convolution, padding stage or None) of ``out``."""
    wide = out.inputs[0] if isinstance(out, Tensor) and len(out.inputs) == 1 else None
    conv = wide.inputs[0] if wide is not None and wide.inputs else None
    if conv is None or wide.name != f"{out.name}_wide" or conv.name != f"{out.name}_conv":
        raise ScheduleError(f"{who}: expected the result of conv2d_bias_relu_maxpool_nchw, "
                            f"got {out!r}")
    return wide, conv, conv.inputs[0]


def schedule_conv2d_bias_relu_maxpool_nchw(out: Tensor, *, k_tile: int = DEFAULT_K_TILE,
                                           lanes: int | None = None,
                                           parallel: bool = True) -> Schedule:
    """The register-tile schedule of ``out = conv2d_bias_relu_maxpool_nchw(...)`` (see the
    module docstring); ``k_tile`` output channels per tile, vectors of ``lanes`` (the host's
    by default; the one the operator was built with), the (image, channel tile) pairs in
    parallel unless ``parallel`` is false.

    >>> import polyloop as pl
    >>> X = pl.placeholder((2, 1, 10, 10), name="X"); W = pl.placeholder((8, 1, 3, 3), name="W")
    >>> out = conv2d_bias_relu_maxpool_nchw(X, W, lanes=4)
    >>> sch = schedule_conv2d_bias_relu_maxpool_nchw(out, lanes=4)
    >>> [loop.name for loop in sch.get_loops("conv_pool_conv")]
    ['b_k_0_fused', 'y_0', 'rc', 'ry', 'rx', 'k_1', 'y_1', 'dx', 'x_0', 'x_1']
    """
    who = "schedule_conv2d_bias_relu_maxpool_nchw"
    wide, conv, padded = _stages(who, out)
    lanes = default_lanes(str(out.dtype)) if lanes is None else lanes
    check_knobs(who, k_tile=k_tile, lanes=lanes)
    pool = conv.shape[2].value // wide.shape[2].value       # type: ignore[union-attr]
    if wide.shape[3].value % lanes:                          # type: ignore[union-attr]
        raise ScheduleError(f"{who}: the pooled rows are {wide.shape[3]} wide, not whole "
                            f"vectors of {lanes}; build the operator with lanes={lanes}")
    sch = Schedule(out)
    # the tile accumulates in a tile-local buffer the pooling then reads (no full-size conv)
    sch.compute_inline(sch.cache_write(conv.name, "local"))
    n, k, y, dx, x, rc, ry, rx = sch.get_loops(conv.name)
    k0, k1 = sch.split(k, factors=[None, k_tile])
    y0, y1 = sch.split(y, factors=[None, pool])
    x0, x1 = sch.split(x, factors=[None, lanes])
    sch.reorder(n, k0, y0, rc, ry, rx, k1, y1, dx, x0, x1)
    tiles = sch.fuse(n, k0)
    if parallel:
        sch.parallel(tiles)
    for loop in (ry, rx, k1, y1, dx, x0):
        sch.unroll(loop)
    sch.vectorize(x1)
    init = sch.decompose_reduction(conv.name, rc)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.compute_inline(sch.cache_write(wide.name, "local"))
    sch.reverse_compute_at(wide.name, y0)
    # the pooling is a max of whole vectors (one per window position): the C compiler does
    # not vectorize the NaN-propagating max by itself
    sch.vectorize(sch.get_loops(wide.name)[-1])
    sch.reverse_compute_at(out.name, y0)
    if parallel:
        sch.parallel(sch.get_loops(padded.name)[0])
    return sch
