# SPDX-License-Identifier: Apache-2.0
"""``Op.GRID_SAMPLE`` as one tensor expression: each output element reads the input at a
coordinate taken from the grid (a data-dependent read: every index is clamped into the
input, and a tap outside it with zero padding is a guarded read of 0)."""
from __future__ import annotations

import itertools

from ...frontend import te
from ...ir.dtypes import DType
from ...ir.elementwise import abs as abs_, floor, maximum, minimum, round as round_, where
from ...ir.expr import Expr, cast, const
from ..kinds import ResizeMode, SamplePadding
from .nn import const_int


def _reflect(x: Expr, lo: float, hi: float) -> Expr:
    """``x`` mirrored at ``lo`` and ``hi`` until it lies between them."""
    span = hi - lo

    def fold(d: Expr, near: float, far: float) -> Expr:
        k = floor(d / span)
        r = d - k * span
        even = (k - 2.0 * floor(k * 0.5)) == 0.0
        return where(even, near + (r if near == lo else -r), far + (-r if near == lo else r))
    below = fold(lo - x, lo, hi)
    above = fold(x - hi, hi, lo)
    return where(x < lo, below, where(x > hi, above, x))


def _cubic(t: Expr) -> list[Expr]:
    a = -0.75
    s = 1.0 - t
    return [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]


def _axis_taps(g: Expr, size: int, attrs: dict) -> list[tuple[Expr, Expr, Expr | None]]:
    """(index, weight, inside condition) of each tap along one axis of ``size``."""
    align = bool(attrs.get("align_corners", False))
    mode = attrs.get("mode", ResizeMode.LINEAR)
    padding = attrs.get("padding", SamplePadding.ZEROS)
    x = (g + 1.0) * (0.5 * (size - 1)) if align else ((g + 1.0) * size - 1.0) * 0.5
    lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    if mode is ResizeMode.NEAREST:
        x = round_(x)
    if padding is SamplePadding.BORDER:
        x = where((x < lo) | (x > hi), maximum(minimum(x, float(size - 1)), 0.0), x)
    elif padding is SamplePadding.REFLECTION:
        x = _reflect(x, lo, hi)
    if mode is ResizeMode.NEAREST:
        taps = [(cast(DType.INT64, x), const(1.0, g.dtype))]
    else:
        base = floor(x)
        t = x - base
        k0 = cast(DType.INT64, base)
        if mode is ResizeMode.LINEAR:
            taps = [(k0, 1.0 - t), (k0 + 1, t)]
        else:
            taps = [(k0 + d, w) for d, w in zip((-1, 0, 1, 2), _cubic(abs_(t)))]
    out = []
    for k, w in taps:
        if padding is SamplePadding.ZEROS:
            out.append((k, w, (k >= 0) & (k < size)))
            continue
        if padding is SamplePadding.REFLECTION:
            k = cast(DType.INT64, _reflect(cast(g.dtype, k), lo, hi))
        out.append((maximum(minimum(k, size - 1), 0), w, None))
    return out


def lower_grid_sample(inputs, attrs, shape, name):
    x, grid = inputs
    nd = x.ndim - 2
    sizes = [const_int(d, "a sampled axis") for d in x.shape[2:]]

    def body(*i):
        n, c, o = i[0], i[1], tuple(i[2:])
        per_axis = [_axis_taps(grid[(n, *o, nd - 1 - a)], sizes[a], attrs) for a in range(nd)]
        total = None
        for combo in itertools.product(*per_axis):
            index = tuple(maximum(minimum(k, s - 1), 0) for (k, _, _), s in zip(combo, sizes))
            conds = [c_ for _, _, c_ in combo if c_ is not None]
            weight = combo[0][1]
            for _, w, _ in combo[1:]:
                weight = weight * w
            v = x[(n, c, *index)]
            if conds:
                cond = conds[0]
                for c_ in conds[1:]:
                    cond = cond & c_
                v = where(cond, v, const(0, x.dtype))
            term = v * weight
            total = term if total is None else total + term
        return total
    return te.compute(shape, body, name=name)


SAMPLE = {"grid_sample": lower_grid_sample}
