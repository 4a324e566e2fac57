# SPDX-License-Identifier: Apache-2.0
"""Data movement as tensor expressions: slices, pads, broadcasts, tiles, gathers, one-hot
and triangles. Each output element reads at most one input element (an index map)."""
from __future__ import annotations

from ...frontend import te
from ...ir.elementwise import maximum, minimum, where
from ...ir.expr import Expr, cast, const
from ...ir.dtypes import DType
from ..kinds import PadMode
from .elementwise import broadcast_index


def lower_slice(inputs, attrs, shape, name):
    """``out[i] = x[begin + i * step]`` on every axis."""
    x = inputs[0]
    begin, step = attrs["begin"], attrs["step"]
    return te.compute(shape, lambda *i: x[tuple(b + k * s for b, k, s in zip(begin, i, step))],
                      name=name)


def _pad_index(j: Expr, n, mode: PadMode) -> Expr:
    if mode is PadMode.REFLECT:
        j = where(j < 0, -j, j)
        return where(j >= n, 2 * (n - 1) - j, j)
    if mode is PadMode.EDGE:
        return maximum(minimum(j, n - 1), 0)
    return j % n


def lower_pad(inputs, attrs, shape, name):
    """Constant, reflect, edge or wrap padding; negative pads drop elements."""
    x = inputs[0]
    rank = x.ndim
    pads = attrs["pads"]
    mode = attrs.get("mode", PadMode.CONSTANT)
    value = const(attrs.get("value", 0), x.dtype)

    def edge_mode(a: int, k):
        """Negative pads crop first; the mode then fills from the cropped axis."""
        lo, hi = max(-pads[a], 0), max(-pads[a + rank], 0)
        if not (pads[a] or pads[a + rank]):
            return k
        return _pad_index(k - max(pads[a], 0), x.shape[a] - lo - hi, mode) + lo

    def body(*i):
        src = tuple(k - pads[a] for a, k in enumerate(i))
        if mode is not PadMode.CONSTANT:
            return x[tuple(edge_mode(a, k) for a, k in enumerate(i))]
        conds = [c for a, j in enumerate(src) for c in
                 ((j >= 0,) if pads[a] > 0 else ()) + ((j < x.shape[a],) if pads[a + rank] > 0
                                                      else ())]
        if not conds:
            return x[src]
        cond = conds[0]
        for c in conds[1:]:
            cond = cond & c
        return where(cond, x[src], value)
    return te.compute(shape, body, name=name)


def lower_broadcast_to(inputs, attrs, shape, name):
    x = inputs[0]
    return te.compute(shape, lambda *i: x[broadcast_index(x, len(shape), i)], name=name)


def lower_tile(inputs, attrs, shape, name):
    x = inputs[0]
    reps = attrs["repeats"]
    return te.compute(shape, lambda *i: x[tuple(k % x.shape[a] if reps[a] > 1 else k
                                                for a, k in enumerate(i))], name=name)


def checked_index(k: Expr, n) -> Expr:
    """An index read from a tensor: negative counts from the end, then clamped into
    ``[0, n)`` so that no read leaves the array (indices given as inputs or constants are
    checked before the run)."""
    k = cast(DType.INT64, k)
    k = where(k < 0, k + n, k)
    return maximum(minimum(k, n - 1), 0)


def lower_gather(inputs, attrs, shape, name):
    """``out[a, j, b] = x[a, idx[j], b]`` along ``axis``."""
    x, idx = inputs
    axis = attrs.get("axis", 0) % x.ndim
    q = idx.ndim

    def body(*i):
        k = checked_index(idx[tuple(i[axis:axis + q])], x.shape[axis])
        return x[tuple(i[:axis]) + (k,) + tuple(i[axis + q:])]
    return te.compute(shape, body, name=name)


def lower_gather_elements(inputs, attrs, shape, name):
    """``out[i] = x[i with axis replaced by idx[i]]``."""
    x, idx = inputs
    axis = attrs.get("axis", 0) % x.ndim
    return te.compute(shape, lambda *i: x[tuple(i[:axis]) + (
        checked_index(idx[i], x.shape[axis]),) + tuple(i[axis + 1:])], name=name)


def lower_gather_nd(inputs, attrs, shape, name):
    """``out[b, j, r] = x[b, idx[b, j, 0], ..., idx[b, j, m-1], r]``."""
    x, idx = inputs
    b = attrs.get("batch_dims", 0)
    lead = idx.ndim - 1
    m = int(idx.shape[-1].value) if hasattr(idx.shape[-1], "value") else int(idx.shape[-1])

    def body(*i):
        pos = tuple(i[:lead])
        ks = tuple(checked_index(idx[pos + (t,)], x.shape[b + t]) for t in range(m))
        return x[tuple(i[:b]) + ks + tuple(i[lead:])]
    return te.compute(shape, body, name=name)


def lower_one_hot(inputs, attrs, shape, name):
    """``values[1]`` where the position along ``axis`` is the index, else ``values[0]``."""
    idx, values = inputs
    depth = attrs["depth"]
    axis = attrs.get("axis", -1) % len(shape)

    def body(*i):
        k = cast(DType.INT64, idx[tuple(i[:axis]) + tuple(i[axis + 1:])])
        k = where(k < 0, k + depth, k)
        return where(k == i[axis], values[1], values[0])
    return te.compute(shape, body, name=name)


def lower_trilu(inputs, attrs, shape, name):
    """The upper (``upper``) or lower triangle of the two last axes, shifted by ``k``."""
    x = inputs[0]
    k = attrs.get("k", 0)
    upper = bool(attrs.get("upper", True))
    zero = const(0, x.dtype) if x.dtype is not DType.BOOL else const(False, "bool")

    def body(*i):
        d = i[-1] - i[-2]
        return where(d >= k if upper else d <= k, x[i], zero)
    return te.compute(shape, body, name=name)


MOVEMENT = {"slice": lower_slice, "pad": lower_pad, "broadcast_to": lower_broadcast_to,
            "tile": lower_tile, "gather": lower_gather, "gather_elements": lower_gather_elements,
            "gather_nd": lower_gather_nd, "one_hot": lower_one_hot, "trilu": lower_trilu}
