# SPDX-License-Identifier: Apache-2.0
"""A bf16 convolution whose tiles run along the rows of output pixels: NCHW in, NCHW out, no
transposition.

``conv2d_bf16_packed`` makes its tiles of pixels by output channels (pixel-major): it copies
the NCHW input into pixels x channel pairs and the pixel-major sums back into NCHW, two
transpositions per call that cost as much as the products where the channels are few and the
images large. ``conv2d_bf16_rows`` swaps the operands of the dot-product tile: a tile is
``rows`` output channels (a broadcast pair of weights each) by ``cols`` pixels of one output
row (a vector of input pixels, each a pair of channels), so

- ``X_p[n, g, y, x, t]``: the padded input with channels ``2 g + t`` in pairs, rounded to
  bfloat16: rows of pixels stay rows of pixels (two channel rows interleaved per pair);
- ``C[n, k, y, x]``: the sum over the window and the channel pairs of the weights
  ``packed[k, r, s, g, t]`` (``pack_bf16_conv_rows_weight``) times ``X_p``;
- the output ``Y[n, k, y, x]``: ``C`` plus a float32 bias per output channel, NCHW, written
  along the row as each tile is done (a graph's residual add and activation with it).

Stride 1 only: a strided row of pixels is not a vector of the input. A row of output pixels
narrower than the tile leaves lanes empty; the graph takes this recipe for wide rows only.

>>> import numpy as np, polyloop as pl
>>> X = pl.placeholder((1, 3, 6, 6), "float32", name="X")
>>> P = pl.placeholder((5, 3, 3, 2, 2), "bfloat16", name="P")
>>> y = conv2d_bf16_rows(X, P, padding=1)
>>> mod = pl.build(schedule_conv2d_bf16_rows(y, intrin="pl_lowbit_bf16_portable_6x32_win"))
>>> w = np.full((5, 3, 3, 3), 0.5, np.float32)
>>> float(mod(np.ones((1, 3, 6, 6), np.float32), pack_bf16_conv_rows_weight(w))[0, 4, 2, 2])
13.5
"""
from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import DType
from ..ir.elementwise import where
from ..ir.expr import Const, Expr, const
from ..schedule import Schedule
from ..schedule.intrin_registry import TensorIntrin
from . import lowbit_tile as tile
from .conv import check_conv, conv_output_size
from .grouped import group_count
from .matmul_bf16 import bf16_weight

PAIR = 2
# tile heights (output channels) best first: one that divides the channels leaves no short tile
CHANNEL_ROWS = (8, 7, 6)


def pack_bf16_conv_rows_weight(w: np.ndarray) -> np.ndarray:
    """Float32 (or bfloat16) weights ``(K, C, R, S)`` rounded to bfloat16 (to nearest even) as
    ``conv2d_bf16_rows`` reads them: ``(K, R, S, ceil(C / 2), 2)``, zeros past C.

    >>> pack_bf16_conv_rows_weight(np.ones((4, 3, 1, 1), np.float32)).shape
    (4, 1, 1, 2, 2)
    """
    rounded, _ = bf16_weight("pack_bf16_conv_rows_weight", "w (K, C, R, S)", w, 4, None)
    k_out, c_in, r, s = rounded.shape
    groups = -(-c_in // PAIR)
    full = np.zeros((k_out, groups * PAIR, r, s), rounded.dtype)
    full[:, :c_in] = rounded
    return np.ascontiguousarray(full.reshape(k_out, groups, PAIR, r, s).transpose(0, 3, 4, 1, 2))


def conv2d_bf16_rows(x: Tensor, packed: Tensor, *, padding: int = 0,
                     bias: Tensor | None = None, name: str = "Y") -> Tensor:
    """``sum_{c, r, s} float32(bf16(pad(x))) * float32(w)`` (+ ``bias`` per output channel)
    with stride 1, a float32 NCHW result; ``x`` float32 (rounded to bfloat16 to nearest even as
    it is paired) or bfloat16 ``(N, C, H, W)``; ``packed = pack_bf16_conv_rows_weight(w)``.

    >>> import polyloop as pl
    >>> conv2d_bf16_rows(pl.placeholder((pl.var("n"), 8, 6, 6), "float32", name="X"),
    ...                  pl.placeholder((20, 3, 3, 4, 2), "bfloat16", name="P"))
    Tensor(Y: float32[n, 20, 4, 4])
    """
    who = "conv2d_bf16_rows"
    if not isinstance(x, Tensor) or x.ndim != 4 or x.dtype not in (DType.BFLOAT16,
                                                                   DType.FLOAT32):
        raise ScheduleError(f"{who}: x must be a 4-D bfloat16 or float32 tensor, got {x!r}")
    k_out = _check_weights(who, x, packed, bias)
    _, r_ext, s_ext, groups, _ = packed.shape
    check_conv(who, x, None, padding, 1)
    n, _, h, wd = x.shape
    out_h, out_w = conv_output_size(who, h, wd, r_ext, s_ext, padding, 1)
    x_p = _paired_input(x, padding)
    r = te.reduce_axis((0, r_ext), name="r")
    s = te.reduce_axis((0, s_ext), name="s")
    g = te.reduce_axis((0, groups), name="g")
    t = te.reduce_axis((0, PAIR), name="t")
    c = te.compute((n, k_out, out_h, out_w), lambda b, k, y, xx: te.sum(
        packed[k, r, s, g, t].astype("float32") * x_p[b, g, y + r, xx + s, t].astype("float32"),
        axis=[r, s, g, t]), name="C")
    return te.compute(c.shape, lambda *ix: c[ix] + bias[ix[1]] if bias is not None else c[ix],
                      name=name)


def _paired_input(x: Tensor, padding: int) -> Tensor:
    """``X_p[n, g, y, x, t]``: ``bf16(x[n, 2 g + t, y - pad, x - pad])``, zero outside the
    image and past the channels."""
    n, c_in, h, wd = x.shape
    p = padding
    zero = const(0.0, DType.BFLOAT16)

    def body(b: Expr, g: Expr, y: Expr, xx: Expr, t: Expr) -> Expr:
        ch = PAIR * g + t
        value = x[b, ch, y - p, xx - p]
        value = value.astype("bfloat16") if x.dtype is DType.FLOAT32 else value
        if p:
            inside = (y >= p) & (y < h + p) & (xx >= p) & (xx < wd + p)
            value = where(inside, value, zero)
        if c_in.value % PAIR:                                   # type: ignore[attr-defined]
            value = where(ch < c_in, value, zero)
        return value
    return te.compute((n, group_count(c_in, PAIR), h + 2 * p, wd + 2 * p, PAIR), body,
                      name="X_p")


def _check_weights(who: str, x: Tensor, packed: Tensor, bias: Tensor | None) -> Expr:
    """The output channels of ``packed`` (``pack_bf16_conv_rows_weight``'s weights of ``x``'s
    channels), checked with ``bias``."""
    if not isinstance(packed, Tensor) or packed.ndim != 5 or packed.dtype is not DType.BFLOAT16 \
            or not all(isinstance(d, Const) for d in packed.shape) \
            or packed.shape[4].value != PAIR:                   # type: ignore[attr-defined]
        raise ScheduleError(f"{who}: packed must be a (K, R, S, C / 2, 2) bfloat16 tensor of "
                            f"constant sizes (pack_bf16_conv_rows_weight), got {packed!r}")
    k_out, groups = packed.shape[0], packed.shape[3]
    c_in = x.shape[1]
    if not (isinstance(c_in, Const) and -(-c_in.value // PAIR) == groups.value):  # type: ignore
        raise ScheduleError(f"{who}: {packed!r} does not hold weights of {c_in} input channels; "
                            "pack them with pack_bf16_conv_rows_weight(w)")
    if bias is not None and (not isinstance(bias, Tensor) or bias.dtype is not DType.FLOAT32
                             or bias.ndim != 1 or str(bias.shape[0]) != str(k_out)):
        raise ScheduleError(f"{who}: bias must be a float32 vector of {k_out} values, got "
                            f"{bias!r}")
    return k_out


def schedule_conv2d_bf16_rows(y: Tensor, *, intrin: TensorIntrin | str | None = None,
                              rows: int | None = None, cols: int | None = None,
                              parallel: bool = True) -> Schedule:
    """The schedule of ``y = conv2d_bf16_rows(...)``: ``n > y (parallel) > channel tiles >
    pixel tiles > [tile]``, each tile one call of the host's bf16 window tile over all taps
    and channel pairs, then written to ``y`` along the row (vector code), the elementwise
    stages after the sum inlined there; ``X_p`` made whole first, its channel pairs in parallel.
    ``rows`` (output channels per tile) defaults to one of 8, 7, 6 that divides them.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 8, 9, 9), "float32", name="X")
    >>> P = pl.placeholder((16, 1, 1, 4, 2), "bfloat16", name="P")
    >>> sch = schedule_conv2d_bf16_rows(conv2d_bf16_rows(X, P),
    ...                                 intrin="pl_lowbit_bf16_portable_8x32")
    >>> "tensorize=pl_lowbit_bf16_portable_8x32" in str(sch)
    True
    """
    who = "schedule_conv2d_bf16_rows"
    found = tile.stages(y)
    if not {"C", "X_p"} <= set(found) or y.name == "C":
        raise ScheduleError(f"{who}: expected the result of conv2d_bf16_rows (stages X_p, C "
                            f"and an output), got {y!r}")
    c_t = found["C"]
    packed = next(t for t in c_t.inputs if t.is_placeholder and t.ndim == 5)
    k_out, r_ext, s_ext = (d.value for d in packed.shape[:3])  # type: ignore[attr-defined]
    taps = r_ext * s_ext > 1
    if intrin is None and rows is None:
        rows = next((h for h in CHANNEL_ROWS if k_out % h == 0), None)
    it = tile._chosen("bf16", intrin, rows, cols, who, window=taps)
    rows, cols = tile.tile_of(it)
    sch = Schedule(y.to_program())
    tile.inline_epilogue(sch, found, y.name)
    write_back = sch.cache_write("C", "local")
    c = sch.get_block("C")
    n, k, yy, x, r, s, g, t = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, rows])
    x0, x1 = sch.split(x, [None, cols])
    sch.reorder(n, yy, k0, x0, r, s, g, k1, x1, t)
    sch.decompose_reduction(c, r)
    sch.tensorize(r if taps else g, it)
    sch.reverse_compute_inline(sch.get_block(y.name))
    sch.reverse_compute_at(write_back, x0)
    *_, last = sch.get_loops(write_back)
    sch.vectorize(last)
    if parallel:
        sch.parallel(yy)
        sch.parallel(sch.get_loops("X_p")[1])
    tile.roll_padded_groups(sch)
    return sch


__all__ = ["conv2d_bf16_rows", "pack_bf16_conv_rows_weight", "schedule_conv2d_bf16_rows"]
