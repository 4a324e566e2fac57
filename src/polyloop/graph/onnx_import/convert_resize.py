# SPDX-License-Identifier: Apache-2.0
"""ONNX Resize (opsets 10 to 19) and Upsample onto ``Op.RESIZE``: the output size and the
per-axis scale from ``scales`` or ``sizes`` (with ``axes`` and the aspect-ratio policy)."""
from __future__ import annotations

import math

from ...errors import PolyloopError
from ..ir import Op, Value
from ..kinds import CoordinateMode, NearestMode, ResizeMode, SamplePadding
from .dims import normalize
from .node import Node

_MODES = {"nearest": ResizeMode.NEAREST, "linear": ResizeMode.LINEAR,
          "bilinear": ResizeMode.LINEAR, "cubic": ResizeMode.CUBIC}
_COORDS = {m.value: m for m in CoordinateMode}
_NEAREST = {m.value: m for m in NearestMode}


def _enum(table: dict, value: object, what: str):
    if value not in table:
        raise PolyloopError(f"{what} {value!r} is not one of {', '.join(table)}")
    return table[value]


def _sizes_and_scales(n: Node, x: Value, scales, sizes, axes) -> tuple[list, list[float]]:
    shape = list(x.type.shape)
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [normalize(int(a), rank) for a in axes]
    full_scales = [1.0] * rank
    out = list(shape)
    for a in axes:
        if not isinstance(shape[a], int):
            if (scales is not None and scales[axes.index(a)] != 1) or (
                    sizes is not None and sizes[axes.index(a)] != shape[a]):
                raise PolyloopError(f"cannot resize the symbolic axis {a}")
    if sizes is not None:
        if len(sizes) != len(axes):
            raise PolyloopError(f"sizes {list(sizes)} need one entry per axis {axes}")
        ratios = [int(s) / shape[a] for s, a in zip(sizes, axes)]
        policy = n.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s, r in zip(axes, sizes, ratios):
                out[a], full_scales[a] = int(s), r
        elif policy in ("not_larger", "not_smaller"):
            r = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                out[a], full_scales[a] = int(shape[a] * r + 0.5), r
        else:
            raise PolyloopError(f"keep_aspect_ratio_policy {policy!r} is not stretch, "
                                "not_larger or not_smaller")
    else:
        if scales is None or len(scales) != len(axes):
            raise PolyloopError("Resize needs scales or sizes, one entry per resized axis")
        n.attr("keep_aspect_ratio_policy")
        for a, s in zip(axes, scales):
            if not s > 0:
                raise PolyloopError(f"scale {s} must be positive")
            full_scales[a] = float(s)
            out[a] = int(math.floor(float(s) * shape[a])) if isinstance(shape[a], int) \
                else shape[a]
    if any(isinstance(d, int) and d < 1 for d in out):
        raise PolyloopError(f"the output shape {out} has an empty axis")
    return out, full_scales


def convert_resize(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    antialias = n.flag("antialias", 0)
    axes = n.attr("axes")
    if n.opset < 11:
        scales = [float(s) for s in n.array(1, "the scales").reshape(-1)]
        sizes = roi = None
    else:
        roi = list(n.array(1, "the roi").reshape(-1)) if n.has(1) else None
        scales = list(n.array(2, "the scales").reshape(-1)) if n.has(2) else None
        sizes = n.ints(3, "the sizes") if n.has(3) else None
        if scales is not None and not scales:
            scales = None
        if sizes is not None and scales is not None:
            raise PolyloopError("Resize takes scales or sizes, not both")
    shape, full = _sizes_and_scales(n, x, scales, sizes, axes)
    mode = _enum(_MODES, n.attr("mode", "nearest"), "mode")
    coords = _enum(_COORDS, n.attr("coordinate_transformation_mode",
                                   "asymmetric" if n.opset < 11 else "half_pixel"),
                   "coordinate_transformation_mode")
    attrs = dict(mode=mode, coordinates=coords, scales=tuple(full), shape=tuple(shape),
                 nearest=_enum(_NEAREST, n.attr("nearest_mode", "round_prefer_floor"
                                                if n.opset >= 11 else "floor"), "nearest_mode"),
                 cubic_a=float(n.attr("cubic_coeff_a", -0.75)),
                 exclude_outside=n.flag("exclude_outside", 0), antialias=antialias,
                 extrapolation=float(n.attr("extrapolation_value", 0.0)))
    if antialias and mode is ResizeMode.NEAREST:
        raise PolyloopError("antialias applies to linear and cubic modes, not nearest")
    if coords is CoordinateMode.TF_CROP_AND_RESIZE:
        if roi is None:
            raise PolyloopError("tf_crop_and_resize needs the roi input")
        ax = list(range(rank)) if axes is None else [normalize(int(a), rank) for a in axes]
        full_roi = [0.0] * rank + [1.0] * rank
        for k, a in enumerate(ax):
            full_roi[a], full_roi[a + rank] = float(roi[k]), float(roi[k + len(ax)])
        attrs["roi"] = tuple(full_roi)
    return n.emit(Op.RESIZE, x, **attrs)


def convert_upsample(n: Node) -> Value:
    x = n.value(0)
    scales = [float(s) for s in (n.attr("scales") if n.opset < 9 else
                                 n.array(1, "the scales").reshape(-1))]
    shape, full = _sizes_and_scales(n, x, scales, None, None)
    mode = _enum(_MODES, n.attr("mode", "nearest"), "mode")
    return n.emit(Op.RESIZE, x, mode=mode, coordinates=CoordinateMode.ASYMMETRIC,
                  nearest=NearestMode.FLOOR, scales=tuple(full), shape=tuple(shape))


_PADDING = {m.value: m for m in SamplePadding}
_SAMPLE_MODES = {"bilinear": ResizeMode.LINEAR, "linear": ResizeMode.LINEAR,
                 "nearest": ResizeMode.NEAREST, "bicubic": ResizeMode.CUBIC,
                 "cubic": ResizeMode.CUBIC}


def convert_grid_sample(n: Node) -> Value:
    mode = _enum(_SAMPLE_MODES, n.attr("mode", "bilinear" if n.opset < 20 else "linear"),
                 "mode")
    padding = _enum(_PADDING, n.attr("padding_mode", "zeros"), "padding_mode")
    return n.emit(Op.GRID_SAMPLE, n.value(0), n.value(1), mode=mode, padding=padding,
                  align_corners=n.flag("align_corners", 0))


CONVERTERS = {"Resize": convert_resize, "Upsample": convert_upsample,
              "GridSample": convert_grid_sample}
