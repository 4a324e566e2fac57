# SPDX-License-Identifier: Apache-2.0
"""int8 depthwise 2-D convolution (NCHW, one filter per channel) with int32 sums and the
int8 operators' epilogue.

``depthwise_conv2d_int8(x, w)``: ``x (N, C, H, W)`` and ``w (C, 1, R, S)`` uint8 or int8, as
ONNX's ``ConvInteger`` / ``QLinearConv`` with ``group = C``. Stages: ``X_pad`` (the input
padded with its zero point, int16), ``W_z`` (the weights minus their zero point, int32),
``D`` (the int32 sum over the window) and the output. A depthwise window has no channel
reduction for a dot-product instruction to take groups of, so the schedule sums in int32
vectors along the output rows (16 pixels per AVX-512 vector), the taps unrolled.

>>> import numpy as np, polyloop as pl
>>> from polyloop import ops
>>> X = pl.placeholder((1, 3, 6, 6), "uint8", name="X")
>>> W = pl.placeholder((3, 1, 3, 3), "int8", name="W")
>>> y = ops.depthwise_conv2d_int8(X, W, padding=1, x_zero_point=1)
>>> mod = pl.build(ops.schedule_depthwise_conv2d_int8(y))
>>> out = mod(np.full((1, 3, 6, 6), 2, np.uint8), np.ones((3, 1, 3, 3), np.int8))
>>> int(out[0, 0, 0, 0]), int(out[0, 2, 3, 3])
(4, 9)
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import DType
from ..ir.elementwise import where
from ..ir.expr import Const, Expr, cast
from ..schedule import Schedule
from . import quantized as q
from .conv import check_conv, conv_output_size
from .knobs import check_knobs, default_lanes


def depthwise_conv2d_int8(x: Tensor, w: Tensor, *, stride: int = 1, padding: int = 0,
                          x_zero_point: int | Tensor = 0, w_zero_point: int | Tensor = 0,
                          bias: Tensor | None = None, scale: float | Tensor | None = None,
                          out_zero_point: int | Tensor = 0, out_dtype: str = "int32",
                          name: str = "Y") -> Tensor:
    """``Y[n, c, y, x] = epilogue(sum_{r, s} (pad(x)[n, c, stride y + r, stride x + s] - zx) *
    (w[c, 0, r, s] - zw[c]))``; ``w_zero_point`` may be per channel, the epilogue (bias, scale,
    output zero point) too, as in ``conv2d_int8``.

    >>> import polyloop as pl
    >>> depthwise_conv2d_int8(pl.placeholder((1, 8, 10, 10), "int8", name="X"),
    ...                       pl.placeholder((8, 1, 3, 3), "int8", name="W"), padding=1,
    ...                       scale=0.05, out_dtype="int8")
    Tensor(Y: int8[1, 8, 10, 10])
    """
    who = "depthwise_conv2d_int8"
    x = q.check_operand(x, who, "x", (4,))
    w = q.check_operand(w, who, "w", (4,))
    check_conv(who, x, w, padding, stride)
    n, c_in, h, wd = x.shape
    if str(w.shape[0]) != str(c_in) or str(w.shape[1]) != "1":
        raise ScheduleError(f"{who}: w must be (C, 1, R, S) with C = {c_in} channels of x, got "
                            f"{w!r}")
    _, _, r_ext, s_ext = w.shape
    out_h, out_w = conv_output_size(who, h, wd, r_ext, s_ext, padding, stride)
    zx = q.zero_point(x_zero_point, x.dtype, Const(1, DType.INT64), who, "x_zero_point")
    if isinstance(zx.value, Tensor) and zx.value.ndim != 0:
        raise ScheduleError(f"{who}: x_zero_point must be one value for the tensor, got "
                            f"{zx.value!r}")
    zw = q.zero_point(w_zero_point, w.dtype, c_in, who, "w_zero_point")
    q.check_length(r_ext * s_ext, who, q.largest_difference(x.dtype, zx),
                   q.largest_difference(w.dtype, zw))
    epilogue = q.Epilogue(out_dtype, bias, scale, out_zero_point)
    epilogue.check(who, c_in)
    zero_x = zx.at(Const(0, DType.INT64))
    p = padding

    def padded(b: Expr, ch: Expr, y: Expr, xx: Expr) -> Expr:
        value = cast(DType.INT16, x[b, ch, y - p, xx - p]) - cast(DType.INT16, zero_x)
        if not p:
            return value
        inside = (y >= p) & (y < h + p) & (xx >= p) & (xx < wd + p)
        return where(inside, value, Const(0, DType.INT16))
    x_pad = te.compute((n, c_in, h + 2 * p, wd + 2 * p), padded, name="X_pad")
    w_z = te.compute(w.shape, lambda ch, o, r, s: w[ch, o, r, s].astype("int32") - zw.at(ch),
                     name="W_z")
    r = te.reduce_axis((0, r_ext), name="r")
    s = te.reduce_axis((0, s_ext), name="s")
    d = te.compute((n, c_in, out_h, out_w), lambda b, ch, y, xx: te.sum(
        x_pad[b, ch, stride * y + r, stride * xx + s].astype("int32") * w_z[ch, 0, r, s],
        axis=[r, s]), name="D")
    return te.compute(d.shape, lambda b, ch, y, xx: epilogue.apply(d[b, ch, y, xx], ch),
                      name=name)


def schedule_depthwise_conv2d_int8(y: Tensor, *, lanes: int | None = None,
                                   parallel: bool = True) -> Schedule:
    """The schedule of ``y = depthwise_conv2d_int8(...)``: channels in parallel; each output
    row summed in a local buffer in vectors of ``lanes`` int32 pixels (default: the host's
    vector), the taps unrolled; the epilogue applied as the row is written back; the padded
    input made whole first, in parallel.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 4, 10, 10), "uint8", name="X")
    >>> W = pl.placeholder((4, 1, 3, 3), "int8", name="W")
    >>> sch = schedule_depthwise_conv2d_int8(depthwise_conv2d_int8(X, W, padding=1), lanes=8)
    >>> [loop.name for loop in sch.get_loops("D")]
    ['b', 'ch', 'y', 'xx_0', 'r', 's', 'xx_1']
    """
    who = "schedule_depthwise_conv2d_int8"
    d = y.inputs[0] if isinstance(y, Tensor) and y.inputs else None
    if d is None or d.name != "D":
        raise ScheduleError(f"{who}: expected the result of depthwise_conv2d_int8, got {y!r}")
    lanes = default_lanes("int32") if lanes is None else lanes
    check_knobs(who, lanes=lanes)
    sch = Schedule(y)
    write_back = sch.cache_write("D", "local")
    c = sch.get_block("D")
    b, ch, yy, xx, r, s = sch.get_loops(c)
    x0, x1 = sch.split(xx, [None, lanes])
    sch.reorder(b, ch, yy, x0, r, s, x1)
    sch.decompose_reduction(c, r)
    sch.unroll(r)
    sch.unroll(s)
    sch.vectorize(x1)
    sch.reverse_compute_inline(sch.get_block(y.name))
    sch.reverse_compute_at(write_back, x0)
    *_, last = sch.get_loops(write_back)
    sch.vectorize(last)
    if parallel:
        sch.parallel(ch)
        sch.parallel(sch.get_loops("X_pad")[1])
    return sch


__all__ = ["depthwise_conv2d_int8", "schedule_depthwise_conv2d_int8"]
