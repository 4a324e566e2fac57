# SPDX-License-Identifier: Apache-2.0
"""Windowed operators over 1 to 3 spatial axes as tensor expressions: ``Op.CONV``,
``Op.CONV_TRANSPOSE``, ``Op.POOL`` and ``Op.LRN``.

Padding is never materialised: a read outside the input is a guarded load (``where`` on the
bounds, only the chosen side evaluated), so nothing outside an array is touched.
"""
from __future__ import annotations

import numpy as np

from ...frontend import te
from ...frontend.te_reducer import comm_reducer
from ...ir.dtypes import DType
from ...ir.elementwise import abs as abs_, maximum, minimum, pow as pow_, sqrt, where
from ...ir.expr import Expr, const
from ..kinds import PoolFn
from .nn import const_int


def _all(conds: list) -> Expr | None:
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


def _inside(pos: list, sizes: tuple, pads: tuple, last: tuple | None = None) -> Expr | None:
    """The condition that each position is inside its axis (only where a window can leave
    it: padding, or the extra window of ceil mode; ``last`` is each axis's largest position
    when known)."""
    nd = len(pos)
    conds = []
    for t, p in enumerate(pos):
        if pads[t] > 0:
            conds.append(p >= 0)
        if pads[nd + t] > 0 or last is None or last[t] >= const_int(sizes[t], "a size"):
            conds.append(p < sizes[t])
    return _all(conds)


def _guarded(x, index: tuple, cond: Expr | None, fill) -> Expr:
    return x[index] if cond is None else where(cond, x[index], fill)


def lower_conv(inputs, attrs, shape, name):
    """``out[n, k, o] = sum over c, r of x[n, g(k) * C/groups + c, o * s + r * d - pad] *
    w[k, c, r]`` (+ bias)."""
    x, w = inputs[0], inputs[1]
    nd = x.ndim - 2
    strides, pads, dil = attrs["strides"], attrs["pads"], attrs["dilations"]
    groups = attrs.get("groups", 1)
    cg = const_int(w.shape[1], "conv input channels")
    kg = const_int(w.shape[0], "conv output channels") // groups
    rc = te.reduce_axis((0, cg), name="rc")
    rs = [te.reduce_axis((0, w.shape[2 + t]), name=f"r{t}") for t in range(nd)]
    sizes = tuple(x.shape[2:])
    last = tuple((const_int(shape[2 + t], "a conv output size") - 1) * strides[t]
                 + (const_int(w.shape[2 + t], "a kernel size") - 1) * dil[t] - pads[t]
                 for t in range(nd))

    def body(*i):
        n, k, o = i[0], i[1], i[2:]
        c = rc if groups == 1 else (k // kg) * cg + rc
        pos = [o[t] * strides[t] + rs[t] * dil[t] - pads[t] for t in range(nd)]
        v = _guarded(x, (n, c, *pos), _inside(pos, sizes, pads, last), const(0, x.dtype))
        return te.sum(v * w[(k, rc, *rs)], axis=[rc, *rs])
    conv = te.compute(shape, body, name=name if len(inputs) == 2 else f"{name}_conv")
    if len(inputs) == 2:
        return conv
    bias = inputs[2]
    return te.compute(shape, lambda *i: conv[i] + bias[i[1]], name=name)


def lower_conv_transpose(inputs, attrs, shape, name):
    """The adjoint of ``lower_conv``: ``out[n, k, o] = sum over c, r of x[n, c, q] *
    w[c, k, r]`` where ``o + pad - r * d = q * s``."""
    x, w = inputs[0], inputs[1]
    nd = x.ndim - 2
    strides, pads, dil = attrs["strides"], attrs["pads"], attrs["dilations"]
    groups = attrs.get("groups", 1)
    cg = const_int(x.shape[1], "conv_transpose input channels") // groups
    kg = const_int(w.shape[1], "conv_transpose output channels")
    rc = te.reduce_axis((0, cg), name="rc")
    rs = [te.reduce_axis((0, w.shape[2 + t]), name=f"r{t}") for t in range(nd)]

    def body(*i):
        n, k, o = i[0], i[1], i[2:]
        c = rc if groups == 1 else (k // kg) * cg + rc
        p = [o[t] + pads[t] - rs[t] * dil[t] for t in range(nd)]
        q = [p[t] // strides[t] if strides[t] > 1 else p[t] for t in range(nd)]
        conds = [c_ for t in range(nd) for c_ in
                 ((p[t] >= 0, q[t] < x.shape[2 + t])
                  + ((p[t] % strides[t] == 0,) if strides[t] > 1 else ()))]
        v = where(_all(conds), x[(n, c, *q)], const(0, x.dtype))
        kk = k if groups == 1 else k % kg
        return te.sum(v * w[(c, kk, *rs)], axis=[rc, *rs])
    conv = te.compute(shape, body, name=name if len(inputs) == 2 else f"{name}_conv")
    if len(inputs) == 2:
        return conv
    bias = inputs[2]
    return te.compute(shape, lambda *i: conv[i] + bias[i[1]], name=name)


def _lowest(d: DType) -> Expr:
    if d.is_float:
        return const(float(np.finfo(np.float32 if d is not DType.FLOAT64 else np.float64).min)
                     if d in (DType.FLOAT32, DType.FLOAT64) else -65504.0, d)
    return const(int(np.iinfo(d.numpy).min), d)


def _window(x, attrs, o, rs, shape):
    """Positions of window element ``rs`` of output ``o`` and whether each is in the input."""
    nd = x.ndim - 2
    strides, pads, dil, kernel = attrs["strides"], attrs["pads"], attrs["dilations"], \
        attrs["kernel"]
    pos = [o[t] * strides[t] + rs[t] * dil[t] - pads[t] for t in range(nd)]
    last = tuple((const_int(shape[2 + t], "a pooled size") - 1) * strides[t]
                 + (kernel[t] - 1) * dil[t] - pads[t] for t in range(nd))
    return pos, _inside(pos, tuple(x.shape[2:]), pads, last)


def lower_pool(inputs, attrs, shape, name):
    """Max, average, Lp or argmax over each window (see ``Op``'s docstring)."""
    x = inputs[0]
    nd = x.ndim - 2
    fn = attrs["fn"]
    kernel = attrs["kernel"]
    rs = [te.reduce_axis((0, kernel[t]), name=f"r{t}") for t in range(nd)]
    if fn is PoolFn.ARGMAX:
        return _argmax_pool(x, attrs, shape, name, rs)
    if fn is PoolFn.MAX:
        def body(*i):
            n, c, o = i[0], i[1], i[2:]
            pos, cond = _window(x, attrs, o, rs, shape)
            return te.max(_guarded(x, (n, c, *pos), cond, _lowest(x.dtype)), axis=rs)
        return te.compute(shape, body, name=name)
    p = attrs.get("p", 2)

    def term(v):
        if fn is PoolFn.AVG:
            return v
        return abs_(v) if p == 1 else v * v if p == 2 else pow_(abs_(v), float(p))

    def total(*i):
        n, c, o = i[0], i[1], i[2:]
        pos, cond = _window(x, attrs, o, rs, shape)
        return te.sum(term(_guarded(x, (n, c, *pos), cond, const(0, x.dtype))), axis=rs)
    s = te.compute(shape, total, name=f"{name}_sum")
    if fn is PoolFn.LP:
        finish = (lambda v: v) if p == 1 else sqrt if p == 2 else \
            (lambda v: pow_(v, 1.0 / p))
        return te.compute(shape, lambda *i: finish(s[i]), name=name)
    count = _window_count(x, attrs, shape, name)
    return te.compute(shape, lambda *i: s[i] / count[i[2:]], name=name)


def _window_count(x, attrs, shape, name):
    """How many elements each window averages: those inside the input, or inside input and
    explicit padding with ``count_include_pad`` (never the extra room of ceil mode); at
    least 1. Per axis, the taps ``r`` with ``lo <= o * s + r * d - pad < hi`` are a range."""
    nd = x.ndim - 2
    kernel, strides, pads, dil = attrs["kernel"], attrs["strides"], attrs["pads"], \
        attrs["dilations"]
    include = bool(attrs.get("count_include_pad", False))
    sizes = [const_int(d, "a pooled size") for d in x.shape[2:]]

    def body(*o):
        total = None
        for t in range(nd):
            base = o[t] * strides[t] - pads[t]
            lo, hi = (-pads[t], sizes[t] + pads[nd + t]) if include else (0, sizes[t])
            first = maximum(-((base - lo) // dil[t]), 0)            # ceil((lo - base) / d)
            last = minimum((hi - 1 - base) // dil[t], kernel[t] - 1)
            n = maximum(last - first + 1, 1)
            total = n if total is None else total * n
        return total.astype(str(x.dtype))
    return te.compute(tuple(shape[2:]), body, name=f"{name}_count")


def _argmax_pool(x, attrs, shape, name, rs):
    """The flat (N, C, spatial) index of each window's maximum, the first in window order;
    ``storage_order`` 1 numbers a 2-D plane by columns."""
    nd = x.ndim - 2
    sizes = [const_int(d, "a pooled axis") for d in x.shape[2:]]
    plane = int(np.prod(sizes))
    column_major = bool(attrs.get("storage_order", 0))

    def better(a, b):
        take = b[1] > a[1]
        return where(take, b[0], a[0]), where(take, b[1], a[1])
    reducer = comm_reducer(better, lambda ti, tv: (const(0, ti), _lowest(tv)),
                           name="argmax_pool")
    channels = const_int(x.shape[1], "the channels")

    def body(*i):
        n, c, o = i[0], i[1], i[2:]
        pos, cond = _window(x, attrs, o, rs, shape)
        flat = pos[1] * sizes[0] + pos[0] if column_major and nd == 2 else \
            _row_major(pos, sizes)
        index = (n * channels + c) * plane + flat
        return reducer((index, _guarded(x, (n, c, *pos), cond, _lowest(x.dtype))), axis=rs)
    idx, _ = te.compute(shape, body, name=name)
    return idx


def _row_major(pos: list, sizes: list[int]) -> Expr:
    flat = pos[0]
    for p, s in zip(pos[1:], sizes[1:]):
        flat = flat * s + p
    return flat


def lower_lrn(inputs, attrs, shape, name):
    """``x / (bias + alpha / size * sum of x^2 over a window of channels) ^ beta``."""
    x = inputs[0]
    size = attrs["size"]
    alpha, beta, bias = (float(attrs.get(k, d)) for k, d in
                         (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    lo = (size - 1) // 2
    r = te.reduce_axis((0, size), name="rl")

    def square_sum(*i):
        n, c, rest = i[0], i[1], i[2:]
        ch = c - lo + r
        v = where((ch >= 0) & (ch < x.shape[1]), x[(n, ch, *rest)], const(0, x.dtype))
        return te.sum(v * v, axis=r)
    s = te.compute(shape, square_sum, name=f"{name}_sq")
    return te.compute(shape, lambda *i: x[i] / pow_(bias + (alpha / size) * s[i], beta),
                      name=name)


WINDOW = {"conv": lower_conv, "conv_transpose": lower_conv_transpose, "pool": lower_pool,
          "lrn": lower_lrn}
