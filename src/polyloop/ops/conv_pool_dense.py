# SPDX-License-Identifier: Apache-2.0
"""A small CNN's first convolution, its bias, ReLU and max-pool, and the dense layer on the
flattened result, as one operator computed with the batch along the vector lanes.

On a batch of many images the dense layer ``(B, F) x (F, N)`` with few outputs (a hundred: six
and a quarter vectors) wastes lanes when its vectors run along the outputs. Run along the batch
instead, every lane is useful: ``acc[j, n] = sum_f w[j, f] * feat[f, n]`` is a register tile of
``rows`` weight rows (one broadcast each) by ``vectors`` vectors of images, the weights read
from row panels packed once (``pack_matmul_weight(w, rows)`` of the ``(F, N)`` weights). That
needs the features ``[f, n]``, batch last, which the convolution then writes directly: with
the images along the lanes, a convolution is ``k_tile`` broadcast weights times contiguous
input vectors, and a max-pool window is a max of whole vectors at the same lanes.

``conv_pool_dense_nchw(data, conv_weight, conv_bias, packed, dense_bias, columns=N)`` is
``act(flatten(max_pool2d(relu(conv2d(data, conv_weight, pad) + conv_bias), pool)) @ w +
dense_bias)`` (stride-1 convolution, pooling windows equal to their strides, floor mode;
``act`` is ReLU when ``relu``, else nothing), through the stages

- ``<name>_images[c, y, x, n]``: the padded input, images last, the batch widened to whole
  vectors (zeros);
- ``<name>_conv[k, y, x, n]`` and ``<name>_feat[k, py, px, n]``: the convolution tile and its
  pooled, biased, ReLU'd result (``relu(max(window) + b)`` equals the max of the ReLUs
  exactly: adding a constant, ReLU and float rounding are non-decreasing);
- ``<name>_acc[j, n]``: the dense product, batch last (the widened lanes are never stored);
- ``name[n, j]``: the result, with the bias and the activation.

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import conv_pool_dense_nchw, schedule_conv_pool_dense_nchw
>>> from polyloop.ops import pack_matmul_weight
>>> X = pl.placeholder((2, 1, 6, 6), name="X"); W = pl.placeholder((2, 1, 3, 3), name="W")
>>> wd = np.ones((8, 3), "float32"); packed = pack_matmul_weight(wd, 2)
>>> P = pl.placeholder(packed.shape, name="P")
>>> out = conv_pool_dense_nchw(X, W, None, P, None, columns=3, lanes=4)
>>> mod = pl.build(schedule_conv_pool_dense_nchw(out, lanes=4))
>>> y = mod(np.ones((2, 1, 6, 6), "float32"), np.ones((2, 1, 3, 3), "float32"), packed)
>>> y.shape, float(y[1, 2])
((2, 3), 72.0)
"""
from __future__ import annotations

from .. import config
from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import maximum, where
from ..ir.expr import Const
from ..schedule import Schedule
from .conv import check_conv
from .conv_pool import DEFAULT_K_TILE, bias_reader, weight_reader
from .knobs import check_knobs, default_lanes

#: at most this many vectors of images per dense tile when the panels of rows run in parallel
MAX_VECTORS = 2


def images_in_parallel(batch: int, lanes: int | None = None, threads: int | None = None
                       ) -> bool:
    """Whether the schedule runs the vectors of ``batch`` images in parallel (each thread
    then convolves, pools and multiplies its own images, their features staying in its
    caches): when they split evenly between the ``threads`` (the configured ones by default).

    >>> images_in_parallel(64, 16, 2), images_in_parallel(16, 16, 2)
    (True, False)
    """
    lanes = default_lanes() if lanes is None else lanes
    threads = config.CONFIG.threads if threads is None else threads
    return threads > 1 and -(-batch // lanes) % threads == 0


def dense_rows(batch: int, lanes: int | None = None, threads: int | None = None) -> int:
    """The rows of the packed dense weight panels that suit the schedule for ``batch``
    images: with the images in parallel, a tile is 20 rows by one vector of images (20
    accumulators; the 32 registers also hold a step's broadcast weight and image vector);
    else 10 rows by up to two vectors, and 100 outputs are 10 panels, split evenly between
    two threads.

    >>> dense_rows(64, 16, 2), dense_rows(16, 16, 2)
    (20, 10)
    """
    return 20 if images_in_parallel(batch, lanes, threads) else 10


def _const(who: str, what: str, d: object) -> int:
    if not isinstance(d, Const):
        raise ScheduleError(f"{who}: {what} must be a constant, got {d}; the batch-last "
                            "recipe sizes its vectors and tiles from it (use "
                            "conv2d_bias_relu_maxpool_nchw and a dense recipe apart)")
    return d.value


def _dense_weights(who: str, packed: Tensor, features: int) -> tuple[int, int]:
    """(panels, rows per panel) of the packed dense weights, checked against the features."""
    if not isinstance(packed, Tensor) or packed.ndim != 3 \
            or not all(isinstance(d, Const) for d in packed.shape):
        raise ScheduleError(f"{who}: the dense weights must be packed (panels, F, rows) by "
                            f"pack_matmul_weight, constant sizes, got {packed!r}")
    panels, depth, rows = (d.value for d in packed.shape)
    if depth != features:
        raise ScheduleError(f"{who}: the packed dense weights reduce over {depth} features, "
                            f"the pooled convolution has {features}; flatten order is "
                            "(channel, row, column)")
    return panels, rows


def conv_pool_dense_nchw(data: Tensor, conv_weight: Tensor, conv_bias: Tensor | None,
                         packed: Tensor, dense_bias: Tensor | None, *, columns: int,
                         pad: int = 0, pool: int = 2, relu: bool = True,
                         out_channels: int | None = None, lanes: int | None = None,
                         name: str = "conv_pool_dense") -> Tensor:
    """The convolution + bias + ReLU + max-pool + flatten + dense (+ ReLU) of the module
    docstring. ``data`` is (B, C, H, W) of constant sizes; ``conv_weight`` (K, C, R, S), or
    packed by ``pack_conv2d_weight`` with ``out_channels = K``; ``conv_bias`` (K,), (K, 1, 1)
    or None; ``packed`` the ``(F, columns)`` dense weights as ``pack_matmul_weight`` panels;
    ``dense_bias`` (columns,) or None.

    >>> import polyloop as pl
    >>> conv_pool_dense_nchw(pl.placeholder((64, 1, 28, 28), name="X"),
    ...                      pl.placeholder((32, 1, 3, 3), name="W"), None,
    ...                      pl.placeholder((20, 5408, 5), name="P"), None, columns=100)
    Tensor(conv_pool_dense: float32[64, 100])
    """
    who = "conv_pool_dense_nchw"
    check_conv(who, data, None, pad)
    check_knobs(who, pool=pool, columns=columns)
    lanes = default_lanes(str(data.dtype)) if lanes is None else lanes
    check_knobs(who, lanes=lanes)
    k_out, w_at = weight_reader(who, conv_weight, out_channels)
    b_at = bias_reader(who, conv_bias, k_out)
    batch, c_in, h, w = (_const(who, what, d) for what, d in
                         zip(("the batch", "the channels", "the height", "the width"),
                             data.shape))
    if str(c_in) != str(conv_weight.shape[1]):
        raise ScheduleError(f"{who}: data has {c_in} channels, the convolution weight "
                            f"expects {conv_weight.shape[1]}")
    r_ext, s_ext = (_const(who, "the kernel size", d) for d in conv_weight.shape[2:4])
    pooled_h, pooled_w = (h + 2 * pad - r_ext + 1) // pool, (w + 2 * pad - s_ext + 1) // pool
    if pooled_h < 1 or pooled_w < 1:
        raise ScheduleError(f"{who}: a {pool} x {pool} pooling window does not fit in the "
                            "convolution output; use a smaller pool")
    panels, rows = _dense_weights(who, packed, k_out * pooled_h * pooled_w)
    if panels * rows < columns:
        raise ScheduleError(f"{who}: {panels} panels of {rows} rows hold fewer than the "
                            f"{columns} columns")
    if dense_bias is not None and (dense_bias.ndim != 1
                                   or str(dense_bias.shape[0]) != str(columns)):
        raise ScheduleError(f"{who}: the dense bias must be ({columns},), got {dense_bias!r}")
    feat = _pooled_features(data, w_at, b_at, (k_out, r_ext, s_ext), pad, pool,
                            -(-batch // lanes) * lanes, name)
    return _dense_batch_last(feat, packed, dense_bias, batch, columns, relu, name)


def _pooled_features(data: Tensor, w_at, b_at, kernel: tuple[int, int, int], pad: int,
                     pool: int, wide: int, name: str) -> Tensor:
    """``<name>_feat[k, py, px, n]``: the pooled, biased, ReLU'd convolution, images last
    (``wide`` of them, the widened batch), through ``<name>_images`` and ``<name>_conv``."""
    batch, c_in, h, w = (d.value for d in data.shape)               # type: ignore[union-attr]
    k_out, r_ext, s_ext = kernel
    pooled_h, pooled_w = (h + 2 * pad - r_ext + 1) // pool, (w + 2 * pad - s_ext + 1) // pool
    # the rows and columns of the padded images that the pooled windows read
    images = te.compute((c_in, pooled_h * pool + r_ext - 1, pooled_w * pool + s_ext - 1, wide),
                        lambda c, y, x, i: where(
                            (i < batch) & (y >= pad) & (y < h + pad) & (x >= pad)
                            & (x < w + pad), data[i, c, y - pad, x - pad], 0.0),
                        name=f"{name}_images")
    rc = te.reduce_axis((0, c_in), name="rc")
    ry = te.reduce_axis((0, r_ext), name="ry")
    rx = te.reduce_axis((0, s_ext), name="rx")
    conv = te.compute((k_out, pooled_h * pool, pooled_w * pool, wide),
                      lambda k, y, x, i: te.sum(images[rc, y + ry, x + rx, i]
                                                * w_at(k, rc, ry, rx), axis=[rc, ry, rx]),
                      name=f"{name}_conv")

    def window(k, py, px, i):
        best = conv[k, pool * py, pool * px, i]
        for dy in range(pool):
            for dx in range(pool):
                if dy or dx:
                    best = maximum(best, conv[k, pool * py + dy, pool * px + dx, i])
        return maximum(best + b_at(k), 0.0) if b_at is not None else maximum(best, 0.0)
    return te.compute((k_out, pooled_h, pooled_w, wide), window, name=f"{name}_feat")


def _dense_batch_last(feat: Tensor, packed: Tensor, dense_bias: Tensor | None, batch: int,
                      columns: int, relu: bool, name: str) -> Tensor:
    """``<name>_acc[j, n]``, the dense product of the features batch last, and the result
    ``name[n, j]`` with the bias and the activation."""
    k_out, pooled_h, pooled_w, wide = (d.value for d in feat.shape)  # type: ignore[union-attr]
    panels, _, rows = (d.value for d in packed.shape)                # type: ignore[union-attr]
    fk = te.reduce_axis((0, k_out), name="fk")
    fy = te.reduce_axis((0, pooled_h), name="fy")
    fx = te.reduce_axis((0, pooled_w), name="fx")
    # distinct iterator names per stage (j, m here; k, y, x, i above) keep loop names apart
    acc = te.compute((panels * rows, wide),
                     lambda j, m: te.sum(packed[j // rows, (fk * pooled_h + fy) * pooled_w + fx,
                                                j % rows] * feat[fk, fy, fx, m],
                                         axis=[fk, fy, fx]), name=f"{name}_acc")

    def result(n, j):
        s = acc[j, n] + dense_bias[j] if dense_bias is not None else acc[j, n]
        return maximum(s, 0.0) if relu else s
    return te.compute((batch, columns), result, name=name)


def _stages(who: str, out: Tensor) -> dict[str, Tensor]:
    """The stages of ``out = conv_pool_dense_nchw(...)`` by suffix, or a ScheduleError."""
    found: dict[str, Tensor] = {}

    def visit(t: Tensor) -> None:
        for p in t.inputs:
            if not p.is_placeholder and p.name.startswith(f"{out.name}_"):
                found.setdefault(p.name[len(out.name) + 1:], p)
                visit(p)
    if isinstance(out, Tensor):
        visit(out)
    if set(found) != {"images", "conv", "feat", "acc"}:
        raise ScheduleError(f"{who}: expected the result of conv_pool_dense_nchw, got {out!r}")
    return found


def schedule_conv_pool_dense_nchw(out: Tensor, *, k_tile: int = DEFAULT_K_TILE,
                                  lanes: int | None = None, parallel: bool = True,
                                  parallel_images: bool | None = None) -> Schedule:
    """The schedule of ``out = conv_pool_dense_nchw(...)``: the convolution in register tiles
    of ``k_tile`` output channels by one pooling window by one vector of images, pooled right
    away; then the dense product in tiles of one packed panel's rows by vectors of images.
    With ``parallel_images`` (by default ``images_in_parallel``) the vectors of images run in
    parallel, one per dense tile, so that each thread convolves, pools and multiplies its own
    images; else the channel tiles of the convolution and the panels of the dense product run
    in parallel, up to ``MAX_VECTORS`` vectors of images per dense tile. ``lanes`` is the
    width the operator was built with (the host's by default).

    >>> import polyloop as pl
    >>> X = pl.placeholder((8, 1, 8, 8), name="X"); W = pl.placeholder((4, 1, 3, 3), name="W")
    >>> P = pl.placeholder((2, 36, 5), name="P")
    >>> out = conv_pool_dense_nchw(X, W, None, P, None, columns=10, lanes=4)
    >>> sch = schedule_conv_pool_dense_nchw(out, lanes=4, parallel_images=True)
    >>> [loop.name for loop in sch.get_loops("conv_pool_dense_acc")]
    ['m_0', 'j_0', 'fk', 'fy', 'fx', 'j_1', 'm_1', 'm_2']
    """
    who = "schedule_conv_pool_dense_nchw"
    st = _stages(who, out)
    lanes = default_lanes(str(out.dtype)) if lanes is None else lanes
    check_knobs(who, k_tile=k_tile, lanes=lanes)
    wide = st["acc"].shape[1].value                                  # type: ignore[union-attr]
    if wide % lanes:
        raise ScheduleError(f"{who}: the batch is widened to {wide} lanes, not whole vectors "
                            f"of {lanes}; build the operator with lanes={lanes}")
    if parallel_images is None:
        parallel_images = images_in_parallel(wide, lanes)
    sch = Schedule(out)
    _conv_tiles(sch, st, k_tile, lanes, parallel, parallel_images)
    _dense_tiles(sch, st, wide // lanes, lanes, parallel, parallel_images)
    return sch


def _conv_tiles(sch: Schedule, st: dict[str, Tensor], k_tile: int, lanes: int,
                parallel: bool, by_images: bool) -> None:
    conv, feat = st["conv"].name, st["feat"].name
    pool = st["conv"].shape[1].value // st["feat"].shape[1].value    # type: ignore[union-attr]
    # the tile accumulates in a tile-local buffer the pooling then reads
    sch.compute_inline(sch.cache_write(conv, "local"))
    k, y, x, i, rc, ry, rx = sch.get_loops(conv)
    k0, k1 = sch.split(k, factors=[None, k_tile])
    y0, y1 = sch.split(y, factors=[None, pool])
    x0, x1 = sch.split(x, factors=[None, pool])
    i0, i1 = sch.split(i, factors=[None, lanes])
    outer, inner = (i0, k0) if by_images else (k0, i0)
    sch.reorder(outer, inner, y0, x0, rc, ry, rx, k1, y1, x1, i1)
    if parallel:
        sch.parallel(outer)
    for loop in (ry, rx, k1, y1, x1):
        sch.unroll(loop)
    sch.vectorize(i1)
    init = sch.decompose_reduction(conv, rc)
    *_, a, b, c, d = sch.get_loops(init)
    for loop in (a, b, c):
        sch.unroll(loop)
    sch.vectorize(d)
    sch.reverse_compute_at(feat, x0)
    *_, channel, lane = sch.get_loops(feat)
    sch.unroll(channel)
    sch.vectorize(lane)
    if by_images:
        # each thread copies its own images, right before convolving them
        sch.compute_at(st["images"].name, outer)
    elif parallel:
        sch.parallel(sch.get_loops(st["images"].name)[1])


def _dense_tiles(sch: Schedule, st: dict[str, Tensor], vectors: int, lanes: int,
                 parallel: bool, by_images: bool) -> None:
    acc = st["acc"].name
    rows = st["acc"].inputs[0].shape[2].value if st["acc"].inputs[0].ndim == 3 \
        else st["acc"].inputs[1].shape[2].value                      # type: ignore[union-attr]
    per_tile = 1 if by_images else min(vectors, MAX_VECTORS)
    tile = sch.cache_write(acc, "local")
    j, m, fk, fy, fx = sch.get_loops(acc)
    j0, j1 = sch.split(j, factors=[None, rows])
    m0, m1, m2 = sch.split(m, factors=[None, per_tile, lanes])
    outer, inner = (m0, j0) if by_images else (j0, m0)
    sch.reorder(outer, inner, fk, fy, fx, j1, m1, m2)
    if parallel:
        sch.parallel(outer)
    sch.unroll(j1)
    sch.unroll(m1)
    sch.vectorize(m2)
    init = sch.decompose_reduction(acc, fk)
    *_, row, lane = sch.get_loops(init)
    r0, r1 = sch.split(lane, factors=[None, lanes])
    sch.unroll(row)
    sch.unroll(r0)
    sch.vectorize(r1)
    sch.reverse_compute_at(tile, inner)
