# SPDX-License-Identifier: Apache-2.0
"""``Op.RESIZE`` as tensor expressions: nearest, linear and cubic interpolation, separable
over the resized axes.

Each resized axis maps an output position to a fractional input coordinate (the coordinate
mode, computed in float64 so that a position exactly between two pixels rounds the same way
on every machine), then reads 1, 2 or 4 taps clamped into the axis (edge padding) with their
weights; the result is the tensor product of the axes' taps.
"""
from __future__ import annotations

import itertools
import math

from ...frontend import te
from ...ir.dtypes import DType
from ...ir.elementwise import ceil, floor, maximum, minimum, where
from ...ir.expr import Expr, cast, const
from ..kinds import CoordinateMode, NearestMode, ResizeMode


def _f64(e) -> Expr:
    return cast(DType.FLOAT64, e)


def source_coordinate(o: Expr, size_in: int, size_out: int, scale: float,
                      mode: CoordinateMode, roi: tuple[float, float]) -> Expr:
    """The input coordinate of output position ``o`` (float64)."""
    x = _f64(o)
    width = scale * size_in       # the output width the scale implies (may be fractional)
    if mode is CoordinateMode.ALIGN_CORNERS:
        return const(0.0, "float64") if width == 1 else x * ((size_in - 1) / (width - 1))
    if mode is CoordinateMode.ASYMMETRIC:
        return x * (1.0 / scale)
    if mode is CoordinateMode.TF_CROP_AND_RESIZE:
        lo, hi = roi
        if width == 1:
            return const((hi - lo) * (size_in - 1) / 2 + lo * (size_in - 1), "float64")
        return x * ((hi - lo) * (size_in - 1) / (width - 1)) + lo * (size_in - 1)
    if mode is CoordinateMode.PYTORCH_HALF_PIXEL and width == 1:
        return const(-0.5, "float64")
    shifted = (x + 0.5) * (1.0 / scale) - 0.5
    if mode is CoordinateMode.HALF_PIXEL_SYMMETRIC:
        adjustment = size_out / width
        return shifted + (size_in / 2) * (1 - adjustment)
    return shifted


def _cubic_weights(r: Expr, a: float) -> list[Expr]:
    s = 1.0 - r
    return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a]


def _keys(d: Expr, a: float) -> Expr:
    """The cubic convolution kernel of Keys at distance ``d`` (zero from 2 on)."""
    d = where(d < 0.0, -d, d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return where(d <= 1.0, near, where(d < 2.0, far, 0.0))


def _antialiased(r: Expr, scale: float, mode: ResizeMode, a: float):
    """Taps of a downscale with antialiasing: the filter stretched by 1 / scale, normalised
    so its weights sum to 1."""
    support = 1 if mode is ResizeMode.LINEAR else 2
    start = int(math.floor(-support / scale)) + 1
    offsets = tuple(range(start, 2 - start))
    if mode is ResizeMode.LINEAR:
        raw = [maximum(minimum(1.0 - ((o - r) * scale) * where((o - r) < 0.0, -1.0, 1.0), 1.0),
                       0.0) for o in offsets]
    else:
        raw = [_keys((o - r) * scale, a) for o in offsets]
    total = raw[0]
    for w in raw[1:]:
        total = total + w
    return offsets, [w / total for w in raw]


def _nearest(x: Expr, mode: NearestMode) -> Expr:
    if mode is NearestMode.FLOOR:
        return floor(x)
    if mode is NearestMode.CEIL:
        return ceil(x)
    if mode is NearestMode.ROUND_PREFER_CEIL:
        return floor(x + 0.5)
    return ceil(x - 0.5)


def axis_taps(o: Expr, size_in: int, size_out: int, scale: float, attrs: dict,
              roi: tuple[float, float]) -> tuple[list[tuple[Expr, Expr]], Expr | None]:
    """The (index, weight) taps of one axis at output position ``o``, and the condition that
    the coordinate is outside the crop (tf_crop_and_resize), else None."""
    cmode = attrs.get("coordinates", CoordinateMode.HALF_PIXEL)
    x = source_coordinate(o, size_in, size_out, scale, cmode, roi)
    outside = ((x < 0.0) | (x > float(size_in - 1))) \
        if cmode is CoordinateMode.TF_CROP_AND_RESIZE else None
    mode = attrs.get("mode", ResizeMode.NEAREST)

    def clamp(k: Expr) -> Expr:
        return maximum(minimum(k, size_in - 1), 0)
    if mode is ResizeMode.NEAREST:
        k = cast(DType.INT64, _nearest(x, attrs.get("nearest", NearestMode.ROUND_PREFER_FLOOR)))
        return [(clamp(k), const(1.0, "float64"))], outside
    base = floor(x)
    r = x - base
    k0 = cast(DType.INT64, base)
    a = float(attrs.get("cubic_a", -0.75))
    if attrs.get("antialias") and scale < 1.0:
        offsets, weights = _antialiased(r, scale, mode, a)
    elif mode is ResizeMode.LINEAR:
        offsets, weights = (0, 1), [1.0 - r, r]
    else:
        offsets, weights = (-1, 0, 1, 2), _cubic_weights(r, a)
    taps = [(k0 + d, w) for d, w in zip(offsets, weights)]
    if attrs.get("exclude_outside"):
        inside = [where((k >= 0) & (k < size_in), w, 0.0) for k, w in taps]
        total = inside[0]
        for w in inside[1:]:
            total = total + w
        taps = [(k, w / total) for (k, _), w in zip(taps, inside)]
    return [(clamp(k), w) for k, w in taps], outside


def lower_resize(inputs, attrs, shape, name):
    """Interpolate ``x`` to ``shape`` (see the module docstring)."""
    x = inputs[0]
    scales = attrs["scales"]
    roi = attrs.get("roi") or (0.0,) * x.ndim + (1.0,) * x.ndim
    sizes_in = [int(d.value) if hasattr(d, "value") else d for d in x.shape]
    sizes_out = [int(d.value) if hasattr(d, "value") else d for d in shape]
    resized = [a for a in range(x.ndim) if str(sizes_in[a]) != str(sizes_out[a])
               or scales[a] != 1.0 or attrs.get("coordinates") is CoordinateMode.TF_CROP_AND_RESIZE
               and (roi[a], roi[a + x.ndim]) != (0.0, 1.0)]
    fill = float(attrs.get("extrapolation", 0.0))

    def body(*i):
        per_axis, outside = [], []
        for a in resized:
            taps, out = axis_taps(i[a], sizes_in[a], sizes_out[a], float(scales[a]), attrs,
                                  (float(roi[a]), float(roi[a + x.ndim])))
            per_axis.append(taps)
            if out is not None:
                outside.append(out)
        total = None
        for combo in itertools.product(*per_axis):
            index = list(i)
            weight = None
            for a, (k, w) in zip(resized, combo):
                index[a] = k
                weight = w if weight is None else weight * w
            term = _f64(x[tuple(index)]) * weight
            total = term if total is None else total + term
        if total is None:
            total = _f64(x[i])
        if outside:
            cond = outside[0]
            for c in outside[1:]:
                cond = cond | c
            total = where(cond, fill, total)
        return cast(x.dtype, total)
    return te.compute(shape, body, name=name)


RESIZE = {"resize": lower_resize}
