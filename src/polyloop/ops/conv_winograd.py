# SPDX-License-Identifier: Apache-2.0
"""Winograd convolution F(2x2, 3x3): a 3 x 3, stride-1 convolution in 4 x 4 tiles of the
transformed domain, 16 products per 2 x 2 output pixels instead of 36 (2.25 times fewer).

For each 2 x 2 tile of the output, ``d`` is the 4 x 4 patch of the padded input under it,
``V = B^T d B`` its transform, ``U = G g G^T`` the transform of each 3 x 3 filter (made once
from constant weights: ``winograd_weight``), ``M = sum over c of V * U`` (16 matrix products
[tiles x C] x [C x K], one per element of the 4 x 4 tile) and the output ``A^T M A``. The
stages, each a ``pl.compute``:

- ``<data>_wpad``: the input zero-padded to whole tiles, each row split by column parity
  (``[n, c, y, x % 2, x // 2]``), so that every read of the input transform is a contiguous
  vector along a row of tiles;
- ``<data>_wino`` (``V``): ``[n, tile row, a, b, c, tile column]``;
- ``wino_prod`` (``M``): ``[n, tile row, a, b, tile column, k]``, the products over ``c``
  with the weights ``U[a, b, k // kb, c, k % kb]`` in blocks of ``kb`` output channels;
- ``wino_out``: the output transform, NHWC (vectors along the channels);
- ``conv``: the NCHW result, a transposing copy.

``schedule_conv2d_winograd`` runs the tile rows in parallel (or, on small planes, the blocks
of output channels); for each row, the input transform, the 16 products in register tiles
(``mr`` tiles of a row by ``kb`` channels, as the direct recipe's) and the output transform
(with an elementwise epilogue after it), so a row's transformed input and products stay in
the cache. The results differ from a direct convolution's by rounding only (the transforms
add and subtract: see docs/ops-conv-winograd.md for the errors measured).

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import conv2d_winograd, schedule_conv2d_winograd, winograd_weight
>>> w = np.ones((5, 3, 3, 3), "float32")
>>> u = winograd_weight(w, 8); u.shape
(4, 4, 1, 3, 8)
>>> X = pl.placeholder((1, 3, 9, 11), name="X"); U = pl.placeholder(u.shape, name="U")
>>> mod = pl.build(schedule_conv2d_winograd(conv2d_winograd(X, U, 5), lanes=8))
>>> y = mod(np.ones((1, 3, 9, 11), "float32"), u)
>>> y.shape, float(y[0, 0, 0, 0]), float(y[0, 4, 4, 4])
((1, 5, 9, 11), 12.0, 27.0)
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import where
from ..ir.expr import Const
from ..schedule import Schedule
from .conv_epilogue import epilogue_chain
from .knobs import check_knobs, default_lanes

# F(2x2, 3x3): the filter transform G, and the rows of B^T and A^T as (sign, element) terms
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
_BT_ROWS = (((1, 0), (-1, 2)), ((1, 1), (1, 2)), ((-1, 1), (1, 2)), ((1, 1), (-1, 3)))
_AT_ROWS = (((1, 0), (1, 1), (1, 2)), ((1, 1), (-1, 2), (-1, 3)))
TILE = 2            # output pixels per tile side
WINDOW = 4          # input pixels per tile side (TILE + 3 - 1)


def winograd_weight(weight: np.ndarray, block: int) -> np.ndarray:
    """NumPy 3 x 3 weights ``(K, C, 3, 3)`` transformed (``G g G^T``, in float64, rounded
    once to the weights' dtype) into ``(4, 4, ceil(K / block), C, block)``: for each element
    of the 4 x 4 tile, blocks of ``block`` output channels (zeros past ``K``).

    >>> u = winograd_weight(np.ones((2, 1, 3, 3), "float32"), 4)
    >>> u.shape, u[0, 0, 0, 0].tolist(), float(u[1, 1, 0, 0, 1])
    ((4, 4, 1, 1, 4), [1.0, 1.0, 0.0, 0.0], 2.25)
    """
    if not isinstance(weight, np.ndarray) or weight.ndim != 4 or weight.shape[2:] != (3, 3):
        raise ScheduleError(f"winograd_weight: weight must be a (K, C, 3, 3) array, got "
                            f"{getattr(weight, 'shape', type(weight).__name__)}")
    check_knobs("winograd_weight", block=block)
    k, c = weight.shape[:2]
    u = np.einsum("ar,kcrs,bs->abkc", _G, weight.astype(np.float64), _G)
    blocks = -(-k // block)
    full = np.zeros((4, 4, blocks * block, c), np.float64)
    full[:, :, :k] = u
    packed = full.reshape(4, 4, blocks, block, c).transpose(0, 1, 2, 4, 3)
    return np.ascontiguousarray(packed.astype(weight.dtype))


def _combine(rows: tuple, row: object, term: Callable[[int], object]) -> object:
    """Row ``row`` (an iterator) of a constant matrix given as signed terms, applied to the
    vector ``term(0..)``: a ``where`` per row, which unrolling the row's loop folds away."""
    values = []
    for terms in rows:
        total = None
        for sign, index in terms:
            value = term(index)
            total = value if total is None and sign > 0 else \
                (-value if total is None else (total + value if sign > 0 else total - value))
        values.append(total)
    result = values[-1]
    for r in range(len(rows) - 2, -1, -1):
        result = where(row == r, values[r], result)
    return result


def _constant(who: str, extent: object) -> int:
    if not isinstance(extent, Const):
        raise ScheduleError(f"{who}: the image size must be constant, got {extent}; build the "
                            f"direct convolution (conv2d_nchw) for symbolic sizes")
    return extent.value


def _phases(data: Tensor, pad: int, th: int, tw: int, rows: int, cols: int) -> Tensor:
    """``data`` zero-padded to ``th`` x ``tw`` tiles, each row split by column parity."""
    return te.compute(
        (data.shape[0], data.shape[1], TILE * th + 2, TILE, tw + 1),
        lambda b, ch, y, p, u: where((y >= pad) & (y < rows + pad) & (2 * u + p >= pad)
                                     & (2 * u + p < cols + pad),
                                     data[b, ch, y - pad, 2 * u + p - pad], 0.0),
        name=f"{data.name}_wpad")


def conv2d_winograd(data: Tensor, weight: Tensor, out_channels: int, pad: int = 1) -> Tensor:
    """The 3 x 3, stride-1 convolution of ``data (N, C, H, W)`` (``pad`` zeros on each side)
    with weights transformed by ``winograd_weight(weight, block)``; the result ``(N, K, H + 2
    pad - 2, W + 2 pad - 2)`` is named ``conv``. H and W must be constant (N may be symbolic).

    >>> import polyloop as pl
    >>> conv2d_winograd(pl.placeholder((pl.var("n"), 3, 7, 7), name="X"),
    ...                 pl.placeholder((4, 4, 1, 3, 16), name="U"), 10)
    Tensor(conv: float32[n, 10, 7, 7])
    """
    who = "conv2d_winograd"
    if not isinstance(data, Tensor) or data.ndim != 4:
        raise ScheduleError(f"{who}: data must be a 4-D tensor (N, C, H, W), got {data!r}")
    if not isinstance(weight, Tensor) or weight.ndim != 5 \
            or not all(isinstance(d, Const) for d in weight.shape) \
            or [d.value for d in weight.shape[:2]] != [WINDOW, WINDOW]:
        raise ScheduleError(f"{who}: weight must be a (4, 4, K blocks, C, block) tensor made "
                            f"by winograd_weight, got {weight!r}")
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
        raise ScheduleError(f"{who}: pad must be a non-negative integer, got {pad!r}")
    check_knobs(who, out_channels=out_channels)
    n, c_in, h, w = data.shape
    _, _, blocks, c_w, block = (d.value for d in weight.shape)  # type: ignore[union-attr]
    if str(c_in) != str(c_w):
        raise ScheduleError(f"{who}: data has {c_in} channels, weight expects {c_w}")
    if blocks != -(-out_channels // block):
        raise ScheduleError(f"{who}: {out_channels} output channels need "
                            f"{-(-out_channels // block)} blocks of {block}, weight has {blocks}; "
                            f"make it with winograd_weight(weight, {block})")
    rows, cols = _constant(who, h), _constant(who, w)
    out_h, out_w = rows + 2 * pad - 2, cols + 2 * pad - 2
    if out_h < 1 or out_w < 1:
        raise ScheduleError(f"{who}: a 3 x 3 window does not fit in the {h} x {w} input padded "
                            f"by {pad}; pad more")
    th, tw = -(-out_h // TILE), -(-out_w // TILE)
    phases = _phases(data, pad, th, tw, rows, cols)

    def patch(b, ch, ty, tx, i, j):
        return phases[b, ch, TILE * ty + i, j % 2, tx + j // 2]

    v = te.compute((n, th, WINDOW, WINDOW, c_in, tw),
                   lambda b, ty, a, e, ch, tx: _combine(
                       _BT_ROWS, a, lambda i: _combine(
                           _BT_ROWS, e, lambda j: patch(b, ch, ty, tx, i, j))),
                   name=f"{data.name}_wino")
    rc = te.reduce_axis((0, c_in), name="rc")
    m = te.compute((n, th, WINDOW, WINDOW, tw, out_channels),
                   lambda b, ty, a, e, tx, k: te.sum(v[b, ty, a, e, rc, tx]
                                                     * weight[a, e, k // block, rc, k % block],
                                                     axis=rc),
                   name="wino_prod")
    # the output transform with the channels innermost (vectors along the products' rows),
    # then the NCHW result: one transposing copy (in L1) that epilogues fold into
    nhwc = te.compute((n, out_h, out_w, out_channels),
                      lambda b, y, x, k: _combine(
                          _AT_ROWS, y % TILE, lambda a: _combine(
                              _AT_ROWS, x % TILE,
                              lambda e: m[b, y // TILE, a, e, x // TILE, k])),
                      name="wino_out")
    return te.compute((n, out_channels, out_h, out_w), lambda b, k, y, x: nhwc[b, y, x, k],
                      name="conv")


# input channels ahead that the weights are prefetched in the "k" layout
PREFETCH_CHANNELS = 16
# the largest temporary a thread's stack holds (as the C target's limit for private arrays)
LOCAL_BYTES = 64 * 1024


def _row_bytes(phases: Tensor) -> int:
    """Bytes of the padded input one tile row reads (4 rows of every channel)."""
    _, c_in, _, _, half = phases.shape
    if not isinstance(c_in, Const):
        return LOCAL_BYTES + 1
    return c_in.value * WINDOW * TILE * half.value * phases.dtype.itemsize  # type: ignore[union-attr]


def _row_tile(tw: int) -> int:
    """Tiles of a row per register tile: a divisor of the row's tiles between 4 and 8 when
    there is one (no partial tile), else 6."""
    for cand in (8, 7, 6, 5, 4):
        if tw % cand == 0:
            return cand
    return 6


def schedule_conv2d_winograd(out: Tensor, conv: Tensor | None = None, *,
                             lanes: int | None = None, mr: int | None = None,
                             parallel: str | None = None, prefetch: int | None = None
                             ) -> Schedule:
    """The schedule of ``out = conv2d_winograd(...)``, or of ``out``, an elementwise chain
    over ``conv = conv2d_winograd(...)`` (bias, residual add, ReLU) applied as the result is
    copied out of the output transform.

    The tile rows run in parallel (``parallel="rows"``, the default from 8 tile rows: each
    row's transformed input and products stay in the cache), or the blocks of output
    channels (``"k"``). ``mr``: tiles of a row per register tile (default: a divisor of the
    row's tiles between 4 and 8, else 6); ``lanes``: the vector width; ``prefetch``: the
    weights are prefetched that many input channels ahead (0: no hint; default
    ``PREFETCH_CHANNELS`` with ``"k"``, else 0).

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 8, 16, 16), name="X"); U = pl.placeholder((4, 4, 1, 8, 16), name="U")
    >>> conv = conv2d_winograd(X, U, 16)
    >>> out = pl.compute(conv.shape, lambda n, k, y, x: pl.maximum(conv[n, k, y, x], 0.0),
    ...                  name="relu")
    >>> sch = schedule_conv2d_winograd(out, conv, lanes=16)
    >>> [loop.name for loop in sch.get_loops("relu")][:3]       # per tile row, channel block
    ['b', 'ty', 'k_0']
    """
    who = "schedule_conv2d_winograd"
    stages = [] if conv is None else epilogue_chain(out, conv)
    sch = Schedule(out)
    anchor = _recipe(sch, out if conv is None else conv, who, lanes=lanes, mr=mr,
                            parallel=parallel, prefetch=prefetch)
    if conv is not None:
        # the transposing copy (scalar, without branches) into a block of NCHW rows in L1,
        # then the epilogue in vectors along them: applied in the scalar copy, a ReLU's
        # comparison is a branch that mispredicts on real data (measured 1.6 times slower)
        sch.reverse_compute_at(conv.name, anchor)
        for stage in stages[:-1]:
            sch.compute_inline(stage.name)
        sch.reverse_compute_at(out.name, anchor)
        sch.vectorize(sch.get_loops(out.name)[-1])
    else:
        sch.reverse_compute_at(out.name, anchor)
    return sch


def _stages(conv: Tensor, who: str) -> tuple[Tensor, ...]:
    """(output transform, phases, V, M, U) of ``conv = conv2d_winograd(...)``."""
    ok = isinstance(conv, Tensor) and len(conv.inputs) == 1 \
        and conv.inputs[0].name == "wino_out" and len(conv.inputs[0].inputs) == 1
    if not ok:
        raise ScheduleError(f"{who}: expected the result of conv2d_winograd, got {conv!r}")
    nhwc = conv.inputs[0]
    m = nhwc.inputs[0]
    v, u = m.inputs
    return nhwc, v.inputs[0], v, m, u


def _recipe(sch: Schedule, conv: Tensor, who: str, *, lanes: int | None = None,
                   mr: int | None = None, parallel: str | None = None,
                   prefetch: int | None = None):
    """Apply the recipe to ``conv`` inside ``sch`` (a schedule of ``conv`` or of an epilogue
    over it); returns the loop over blocks of output channels, where the caller puts the
    copy to NCHW."""
    nhwc, phases, v, m, u = _stages(conv, who)
    lanes = default_lanes(str(conv.dtype)) if lanes is None else lanes
    block = u.shape[4].value          # type: ignore[union-attr]
    th, tw = m.shape[1].value, m.shape[4].value             # type: ignore[union-attr]
    mr = _row_tile(tw) if mr is None else mr
    parallel = ("rows" if th >= 8 else "k") if parallel is None else parallel
    if prefetch is None:
        # with the channel blocks in parallel, a block's weights serve only the few tiles of
        # a small plane: they stream from memory (256 x 14 x 14, cold: 0.45 -> 0.41 ms)
        prefetch = PREFETCH_CHANNELS if parallel == "k" else 0
    check_knobs(who, lanes=lanes, mr=mr)
    if block % lanes:
        raise ScheduleError(f"{who}: the weights come in blocks of {block} channels, not whole "
                            f"vectors of {lanes} lanes; make them with winograd_weight(weight, "
                            f"a multiple of {lanes})")
    tile = sch.cache_write(m.name, "local")
    n, ty, a, e, tx, k, c = sch.get_loops(m.name)
    k0, k1, k2 = sch.split(k, factors=[None, block // lanes, lanes])
    x0, x1 = sch.split(tx, factors=[None, mr])
    if parallel == "rows":
        sch.reorder(n, ty, k0, a, e, x0, c, x1, k1, k2)
        sch.parallel(ty)
    else:
        # each element's block of weights is read once, for every tile row in turn
        sch.reorder(n, k0, a, e, ty, x0, c, x1, k1, k2)
        sch.parallel(k0)
    sch.unroll(x1)
    sch.unroll(k1)
    sch.vectorize(k2)
    sch.decompose_reduction(m.name, c)
    if prefetch:
        sch.prefetch(m.name, u.name, c, prefetch)
    sch.reverse_compute_at(tile, x0)
    sch.vectorize(sch.get_loops(tile)[-1])
    if parallel == "rows":
        sch.compute_at(v.name, ty)
    else:
        sch.parallel(sch.get_loops(v.name)[1])
    if _row_bytes(phases) <= LOCAL_BYTES:
        # the padded rows a tile row reads, made by the iteration that reads them (the two
        # rows shared with the next tile row are made twice): no parallel region of their
        # own and no buffer of the whole input
        sch.compute_at(phases.name, sch.get_loops(v.name)[-5], recompute=True)
    else:
        sch.parallel(sch.get_loops(phases.name)[1])
    *_, va, ve, vc, vx = sch.get_loops(v.name)
    # a channel's 4 input rows stay in L1 for the 16 elements of the transform
    sch.reorder(vc, va, ve)
    sch.unroll(va)
    sch.unroll(ve)
    sch.vectorize(vx)
    sch.vectorize(sch.get_loops(phases.name)[-1])
    sch.reverse_compute_at(nhwc.name, k0)
    sch.vectorize(sch.get_loops(nhwc.name)[-1])
    return k0
