# SPDX-License-Identifier: Apache-2.0
"""int8 and bfloat16 2-D convolutions (NCHW in, NCHW out) on the dot-product tiles: ONNX's
``ConvInteger`` / ``QLinearConv`` with int32 sums, and a bf16 convolution summed in float32.

The stages, visible to the schedule:

- ``X_g[n, y, x, g, t]``: the input padded and in channel groups (4 channels for int8, 2 for
  bf16) innermost: the operand the tile broadcasts a group of. An int8 input is shifted by
  128 (uint8); spatial padding holds the input's zero point (its products vanish), channels
  past C hold zeros;
- ``W_g[r, s, g, k, t]``: the weights in the same groups (int8: a uint8 weight minus 128),
  stored in panels of output channels by the schedule;
- ``A_sum`` (the window sums of ``X_g``) and ``B_sum`` (the weights' sums), where zero points
  or offsets need them;
- ``C[n, y, x, k]``: the sum over the window and the channel groups, pixel-major (a tile's
  pixels are its rows, its output channels the columns);
- ``E[n, y, x, k]``: the corrected sum through the epilogue (``quantized``), pixel-major, an
  8-bit result held as int32: the schedule computes it along the output channels as vector
  code (as the NCHW output, a select per element, it ran scalar at several times the cost
  of the tile's dot products);
- the output ``Y[n, k, y, x]``: ``E`` copied in the output's dtype.

>>> import numpy as np, polyloop as pl
>>> from polyloop import ops
>>> X = pl.placeholder((1, 5, 7, 7), "uint8", name="X")
>>> W = pl.placeholder((8, 5, 3, 3), "int8", name="W")
>>> mod = pl.build(ops.schedule_conv2d_int8(ops.conv2d_int8(X, W, padding=1, x_zero_point=2)))
>>> y = mod(np.full((1, 5, 7, 7), 3, np.uint8), np.ones((8, 5, 3, 3), np.int8))
>>> int(y[0, 0, 0, 0]), int(y[0, 7, 3, 3])
(20, 45)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import DType
from ..ir.elementwise import where
from ..ir.expr import Cast, Const, Expr, cast, const
from ..schedule import Schedule
from ..schedule.intrin_registry import TensorIntrin
from . import lowbit_tile as tile
from .grouped import group_count
from . import quantized as q
from .conv import check_conv, conv_output_size


def conv2d_int8(x: Tensor, w: Tensor, *, stride: int = 1, padding: int = 0,
                x_zero_point: int | Tensor = 0, w_zero_point: int | Tensor = 0,
                bias: Tensor | None = None, scale: float | Tensor | None = None,
                out_zero_point: int | Tensor = 0, out_dtype: str = "int32",
                name: str = "Y", in_layout: str = "NCHW", out_layout: str = "NCHW") -> Tensor:
    """``Y[n, k, y, x] = epilogue(sum_{c, r, s} (pad(x)[n, c, .., ..] - zx) * (w[k, c, r, s] -
    zw))`` for uint8 or int8 ``x (N, C, H, W)`` and ``w (K, C, R, S)``; ``padding`` on each
    side (its value is ``zx``: padded taps add nothing), ``stride``. ``w_zero_point`` may be
    per output channel; the epilogue (bias, scale, output zero point, ``out_dtype``) is
    ``matmul_int8``'s, per output channel. A window of more terms than the int32 sum holds
    exactly is refused. ``in_layout`` / ``out_layout`` "NHWC": ``x`` is ``(N, H, W, C)`` /
    the result ``Y[n, y, x, k]`` (channels innermost, as the tile computes them: consecutive
    int8 layers then pass their activations on with no transposition).

    >>> import polyloop as pl
    >>> conv2d_int8(pl.placeholder((1, 16, 9, 9), "int8", name="X"),
    ...             pl.placeholder((32, 16, 3, 3), "int8", name="W"), stride=2, padding=1,
    ...             scale=0.01, out_dtype="int8")
    Tensor(Y: int8[1, 32, 5, 5])
    """
    who = "conv2d_int8"
    x = q.check_operand(x, who, "x", (4,))
    w = q.check_operand(w, who, "w", (4,))
    check_layouts(who, in_layout, out_layout)
    shape = _shape(who, nchw_view(x, in_layout), w, stride, padding)
    shift_b = -128 if w.dtype is DType.UINT8 else 0
    w_g = grouped_weight(w, 4, "int8", lambda v: q.shifted(v, shift_b, "int8"))
    weights = Weights(tuple(w.shape), w.dtype, lambda r, s, g, k, t: w_g[r, s, g, k, t],
                      lambda: _weight_sums(w, shift_b))
    return int8_conv(who, x, weights, shape, stride, padding, x_zero_point, w_zero_point,
                     q.Epilogue(out_dtype, bias, scale, out_zero_point), name,
                     (in_layout, out_layout))


LAYOUTS = ("NCHW", "NHWC")


def check_layouts(who: str, *layouts: str) -> None:
    """A ScheduleError naming ``who`` unless each layout is "NCHW" or "NHWC"."""
    for layout in layouts:
        if layout not in LAYOUTS:
            raise ScheduleError(f"{who}: a layout must be 'NCHW' or 'NHWC', got {layout!r}")


def nchw_view(x: Tensor, layout: str) -> Tensor:
    """``x`` as the shape checks see it: an NHWC tensor's ``(N, C, H, W)`` placeholder."""
    if layout == "NCHW":
        return x
    n, h, wd, c = x.shape
    return te.placeholder((n, c, h, wd), str(x.dtype), name=x.name)


@dataclass(frozen=True, slots=True)
class Weights:
    """The weights of an int8 convolution as its sums read them: ``shape`` ``(K, C, R, S)``
    and ``dtype`` of the weights, ``at(r, s, g, k, t)`` the shifted weight of channel
    ``4 g + t`` (zero past C), ``sums()`` the tensor of the shifted weights' sums per output
    channel (made only where a zero point needs it)."""
    shape: tuple
    dtype: DType
    at: Callable[..., Expr]
    sums: Callable[[], Tensor]


def int8_conv(who: str, x: Tensor, weights: Weights, shape: tuple, stride: int, padding: int,
              x_zero_point: int | Tensor, w_zero_point: int | Tensor, epilogue: q.Epilogue,
              name: str, layouts: tuple[str, str] = ("NCHW", "NCHW")) -> Tensor:
    """The stages of ``conv2d_int8`` on given ``weights`` (see the module docstring);
    ``layouts``: the input's and the output's."""
    k_out, c_in, r_ext, s_ext = weights.shape
    zx = q.zero_point(x_zero_point, x.dtype, Const(1, DType.INT64), who, "x_zero_point")
    if isinstance(zx.value, Tensor) and zx.value.ndim != 0:
        raise ScheduleError(f"{who}: x_zero_point must be one value for the tensor, got "
                            f"{zx.value!r}")
    zw = q.zero_point(w_zero_point, weights.dtype, k_out, who, "w_zero_point")
    terms = c_in * r_ext * s_ext
    q.check_length(terms, who, q.largest_difference(x.dtype, zx),
                   q.largest_difference(weights.dtype, zw))
    epilogue.check(who, k_out)
    off = q.Offsets(128 if x.dtype is DType.INT8 else 0,
                    -128 if weights.dtype is DType.UINT8 else 0, zx, zw)
    pad_value = (lambda: _shifted_zero(off)) if isinstance(zx.value, Tensor) else \
        _shifted_zero(off)
    x_g = grouped_input(x, padding, 4, "uint8", lambda v: q.shifted(v, off.shift_a, "uint8"),
                        pad_value, layouts[0])
    a_sum = _window_sums(x_g, shape, r_ext, s_ext, stride) if off.needs_a_sums else None
    b_sum = weights.sums() if off.needs_b_sums else None
    c = _window_products(x_g, weights.at, (r_ext, s_ext, x_g.shape[3], k_out), shape, stride,
                         "int32")

    def result(b: Expr, k: Expr, y: Expr, xx: Expr) -> Expr:
        za = off.a_zero(Const(0, DType.INT64))      # one zero point for the whole input
        acc = c[b, y, xx, k]
        if a_sum is not None:
            acc = acc - off.b_zero(k) * a_sum[b, y, xx]
        if b_sum is not None:
            acc = acc - za * b_sum[k]
        if a_sum is not None and b_sum is not None:
            acc = acc + cast(DType.INT32, terms) * za * off.b_zero(k)
        return _widened(epilogue.apply(acc, k))
    return _pixel_major_then_copy(shape, k_out, result, epilogue.out_dtype, name, layouts[1])


def _pixel_major_then_copy(shape: tuple, k_out: Expr, result, out_dtype: str, name: str,
                           layout: str = "NCHW") -> Tensor:
    """``E[n, y, x, k] = result(n, k, y, x)`` (pixel-major, as the tile's sums are: the
    epilogue runs as vector code along the output channels), then the output ``Y[n, k, y,
    x]`` (``layout`` "NHWC": ``Y[n, y, x, k]``) as a copy of ``E`` in ``out_dtype``."""
    n, out_h, out_w = shape
    e = te.compute((n, out_h, out_w, k_out), lambda b, y, xx, k: result(b, k, y, xx), name="E")
    if layout == "NHWC":
        return te.compute((n, out_h, out_w, k_out),
                          lambda b, y, xx, k: cast(DType(out_dtype), e[b, y, xx, k]), name=name)
    return te.compute((n, k_out, out_h, out_w),
                      lambda b, k, y, xx: cast(DType(out_dtype), e[b, y, xx, k]), name=name)


def _widened(value: Expr) -> Expr:
    """An 8-bit result as the int32 of the same value (a saturated requantization is in
    range: the narrowing cast moves to the copy into the output)."""
    if isinstance(value, Cast) and value.dtype in (DType.INT8, DType.UINT8):
        return cast(DType.INT32, value.value)
    return value


def conv2d_bf16(x: Tensor, w: Tensor, *, stride: int = 1, padding: int = 0,
                bias: Tensor | None = None, out_dtype: str = "float32", name: str = "Y"
                ) -> Tensor:
    """``sum_{c, r, s} float32(pad(x)) * float32(w)`` (+ a float32 bias per output channel)
    for bfloat16 ``x (N, C, H, W)`` and ``w (K, C, R, S)``, as float32 or rounded to bfloat16.
    A float32 ``x`` is rounded to bfloat16 (to nearest even) as it is padded and grouped
    (the stage ``X_g``), so a float32 model's activations need no pass of their own.

    >>> import polyloop as pl
    >>> conv2d_bf16(pl.placeholder((1, 8, 6, 6), "bfloat16", name="X"),
    ...             pl.placeholder((4, 8, 3, 3), "bfloat16", name="W"), padding=1)
    Tensor(Y: float32[1, 4, 6, 6])
    """
    who = "conv2d_bf16"
    for what, t, dtypes in (("x", x, (DType.BFLOAT16, DType.FLOAT32)),
                            ("w", w, (DType.BFLOAT16,))):
        if not isinstance(t, Tensor) or t.ndim != 4 or t.dtype not in dtypes:
            raise ScheduleError(f"{who}: operand {what} must be a 4-D "
                                f"{' or '.join(str(d) for d in dtypes)} tensor, got {t!r}")
    shape = _shape(who, x, w, stride, padding)
    w_g = grouped_weight(w, 2, "bfloat16", None)
    return bf16_conv(who, x, lambda r, s, g, k, t: w_g[r, s, g, k, t], w_g.shape[:4], shape,
                     stride, padding, bias, out_dtype, name)


def bf16_conv(who: str, x: Tensor, weight: Callable[..., Expr], extents: tuple, shape: tuple,
              stride: int, padding: int, bias: Tensor | None, out_dtype: str, name: str
              ) -> Tensor:
    """The stages of ``conv2d_bf16`` on the bfloat16 weights ``weight(r, s, g, k, t)`` (the
    weight of channel ``2 g + t``, zero past C) over ``extents`` ``(R, S, groups, K)``:
    ``X_g``, ``C`` and ``E`` pixel-major, the output a copy (see the module docstring)."""
    if out_dtype not in ("float32", "bfloat16"):
        raise ScheduleError(f"{who}: out_dtype must be 'float32' or 'bfloat16', got "
                            f"{out_dtype!r}")
    k_out = extents[3]
    if bias is not None and (not isinstance(bias, Tensor) or bias.dtype is not DType.FLOAT32
                             or bias.ndim != 1 or str(bias.shape[0]) != str(k_out)):
        raise ScheduleError(f"{who}: bias must be a float32 vector of {k_out} values, got "
                            f"{bias!r}")
    zero = const(0.0, DType.BFLOAT16)
    rounded = (lambda v: v.astype("bfloat16")) if x.dtype is DType.FLOAT32 else None
    x_g = grouped_input(x, padding, 2, "bfloat16", rounded, zero)
    c = _window_products(x_g, weight, extents, shape, stride, "float32")

    def result(b: Expr, k: Expr, y: Expr, xx: Expr) -> Expr:
        value = c[b, y, xx, k] + bias[k] if bias is not None else c[b, y, xx, k]
        return value if out_dtype == "float32" else value.astype(out_dtype)
    return _pixel_major_then_copy(shape, k_out, result, out_dtype, name)


def panel_weight(packed: Tensor) -> Callable[..., Expr]:
    """``weight(r, s, g, k, t)`` read from weights packed in panels of output channels,
    ``packed[k // cols, r, s, g, k % cols, t]`` (a builder's ``W_g`` as the schedule stores
    it): the weights of a convolution on weights packed once."""
    cols = packed.shape[4]
    return lambda r, s, g, k, t: packed[k // cols, r, s, g, k % cols, t]


def _shape(who: str, x: Tensor, w: Tensor, stride: int, padding: int) -> tuple:
    check_conv(who, x, w, padding, stride)
    if str(x.shape[1]) != str(w.shape[1]):
        raise ScheduleError(f"{who}: x has {x.shape[1]} channels, w expects {w.shape[1]} (w is "
                            "(K, C, R, S))")
    n, _, h, wd = x.shape
    _, _, r_ext, s_ext = w.shape
    out_h, out_w = conv_output_size(who, h, wd, r_ext, s_ext, padding, stride)
    return n, out_h, out_w


def _shifted_zero(off: q.Offsets) -> Expr:
    """The shifted input's zero point as uint8: the value of a padded tap."""
    value = off.a_zero(Const(0, DType.INT64))
    return cast(DType.UINT8, value) if not isinstance(value, Const) else \
        const(value.value, DType.UINT8)


def grouped_input(x: Tensor, padding: int, group: int, dtype: str, convert, pad_value,
                  layout: str = "NCHW") -> Tensor:
    """``X_g[n, y, x, g, t]``: ``convert(x[n, group g + t, y - pad, x - pad])``, ``pad_value``
    (an expression, or a function making it: one that reads a tensor) outside the image,
    zero past the channels; ``layout`` "NHWC": ``x`` is ``(N, H, W, C)``."""
    nhwc = layout == "NHWC"
    n, c_in, h, wd = (x.shape[0], x.shape[3], x.shape[1], x.shape[2]) if nhwc else x.shape
    cg = group_count(c_in, group)
    p = padding

    def body(b: Expr, y: Expr, xx: Expr, g: Expr, t: Expr) -> Expr:
        ch = group * g + t
        value = x[b, y - p, xx - p, ch] if nhwc else x[b, ch, y - p, xx - p]
        value = convert(value) if convert else value
        if p:
            inside = (y >= p) & (y < h + p) & (xx >= p) & (xx < wd + p)
            value = where(inside, value, pad_value() if callable(pad_value) else pad_value)
        if isinstance(c_in, Const) and c_in.value % group == 0:
            return value
        return where(ch < c_in, value, const(0, value.dtype))
    return te.compute((n, h + 2 * p, wd + 2 * p, cg, group), body, name="X_g")


def grouped_weight(w: Tensor, group: int, dtype: str, convert) -> Tensor:
    """``W_g[r, s, g, k, t] = convert(w[k, group g + t, r, s])``, zero past the channels."""
    k_out, c_in, r_ext, s_ext = w.shape
    cg = group_count(c_in, group)

    def body(r: Expr, s: Expr, g: Expr, k: Expr, t: Expr) -> Expr:
        ch = group * g + t
        value = w[k, ch, r, s]
        value = convert(value) if convert else value
        if isinstance(c_in, Const) and c_in.value % group == 0:
            return value
        return where(ch < c_in, value, const(0, value.dtype))
    return te.compute((r_ext, s_ext, cg, k_out, group), body, name="W_g")


def _window_products(x_g: Tensor, weight: Callable[..., Expr], extents: tuple, shape: tuple,
                     stride: int, acc: str) -> Tensor:
    """``C[n, y, x, k] = sum_{r, s, g, t} acc(X_g[n, stride y + r, stride x + s, g, t]) *
    acc(weight(r, s, g, k, t))`` over ``extents`` ``(R, S, groups, K)``."""
    r_ext, s_ext, cg, k_out = extents
    group = x_g.shape[4]
    r = te.reduce_axis((0, r_ext), name="r")
    s = te.reduce_axis((0, s_ext), name="s")
    g = te.reduce_axis((0, cg), name="g")
    t = te.reduce_axis((0, group), name="t")
    n, out_h, out_w = shape
    return te.compute((n, out_h, out_w, k_out), lambda b, y, xx, k: te.sum(
        x_g[b, stride * y + r, stride * xx + s, g, t].astype(acc) *
        weight(r, s, g, k, t).astype(acc), axis=[r, s, g, t]), name="C")


def _window_sums(x_g: Tensor, shape: tuple, r_ext: Expr, s_ext: Expr, stride: int) -> Tensor:
    """``A_sum[n, y, x]``: the sum of the shifted input over each window (all channels)."""
    _, _, _, cg, group = x_g.shape
    r = te.reduce_axis((0, r_ext), name="ra")
    s = te.reduce_axis((0, s_ext), name="sa")
    g = te.reduce_axis((0, cg), name="ga")
    t = te.reduce_axis((0, group), name="ta")
    return te.compute(shape, lambda b, y, xx: te.sum(
        x_g[b, stride * y + r, stride * xx + s, g, t].astype("int32"), axis=[r, s, g, t]),
        name="A_sum")


def _weight_sums(w: Tensor, shift: int) -> Tensor:
    """``B_sum[k]``: the sum of the shifted weights of output channel k."""
    _, c_in, r_ext, s_ext = w.shape
    c = te.reduce_axis((0, c_in), name="cb")
    r = te.reduce_axis((0, r_ext), name="rb")
    s = te.reduce_axis((0, s_ext), name="sb")

    def body(k: Expr) -> Expr:
        value = w[k, c, r, s].astype("int32")
        return te.sum(value + shift if shift else value, axis=[c, r, s])
    return te.compute((w.shape[0],), body, name="B_sum")


def schedule_conv2d_int8(y: Tensor, *, intrin: TensorIntrin | str | None = None,
                         rows: int | None = None, cols: int | None = None,
                         panels: int | None = None, parallel: bool = True) -> Schedule:
    """The schedule of ``y = conv2d_int8(...)``: tiles of ``rows`` output pixels of one row by
    ``cols`` output channels summed in a local buffer by one call of the window variant of the
    dot-product tile (all taps and channel groups; a plain tile is called once per tap), the
    epilogue applied as the tile is written to ``y``; blocks of ``panels`` weight panels
    outermost, the output rows in parallel; the padded input made whole first, in parallel.
    ``rows`` defaults to a tile height that divides the output rows (8, 7 or 6).

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 8, 9, 9), "uint8", name="X")
    >>> W = pl.placeholder((16, 8, 3, 3), "int8", name="W")
    >>> sch = schedule_conv2d_int8(conv2d_int8(X, W), intrin="pl_lowbit_u8s8_portable_6x32_win")
    >>> "tensorize=pl_lowbit_u8s8_portable_6x32_win" in str(sch)
    True
    """
    return tile.schedule_window(y, "u8s8", intrin=intrin, rows=rows, cols=cols, panels=panels,
                                parallel=parallel, who="schedule_conv2d_int8")


def schedule_conv2d_bf16(y: Tensor, *, intrin: TensorIntrin | str | None = None,
                         rows: int | None = None, cols: int | None = None,
                         panels: int | None = None, parallel: bool = True) -> Schedule:
    """The schedule of ``y = conv2d_bf16(...)``: ``schedule_conv2d_int8``'s recipe on the
    host's best ``bf16`` tile.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 8, 9, 9), "bfloat16", name="X")
    >>> W = pl.placeholder((16, 8, 3, 3), "bfloat16", name="W")
    >>> sch = schedule_conv2d_bf16(conv2d_bf16(X, W), intrin="pl_lowbit_bf16_portable_6x32")
    >>> "tensorize=pl_lowbit_bf16_portable_6x32" in str(sch)
    True
    """
    return tile.schedule_window(y, "bf16", intrin=intrin, rows=rows, cols=cols, panels=panels,
                                parallel=parallel, who="schedule_conv2d_bf16")


__all__ = ["conv2d_bf16", "conv2d_int8", "schedule_conv2d_bf16", "schedule_conv2d_int8"]
