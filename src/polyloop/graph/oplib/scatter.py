# SPDX-License-Identifier: Apache-2.0
"""``Op.SCATTER_ELEMENTS`` and ``Op.SCATTER_ND`` as tensor expressions.

Each output element searches the updates that land on it: a reduction, in the updates'
order, over (found, combined value) pairs, so the last of several updates wins when they
replace, and all of them fold into the data otherwise. Every index read is clamped into its
array (a data-dependent read), and a candidate outside the updates is never read.
"""
from __future__ import annotations

from ...frontend import te
from ...frontend.te_reducer import comm_reducer
from ...ir.dtypes import DType
from ...ir.elementwise import maximum, minimum, where
from ...ir.expr import Expr, cast, const
from ..kinds import ScatterFn
from .movement import checked_index
from .nn import const_int

_COMBINE = {ScatterFn.NONE: lambda a, b: b, ScatterFn.ADD: lambda a, b: a + b,
            ScatterFn.MUL: lambda a, b: a * b, ScatterFn.MAX: maximum,
            ScatterFn.MIN: minimum}


def _reducer(fn: ScatterFn):
    f = _COMBINE[fn]

    def combine(x, y):
        take = y[0] > 0
        both = (x[0] > 0) & take
        value = where(both, f(x[1], y[1]), where(take, y[1], x[1]))
        return where(take, y[0], x[0]), value
    return comm_reducer(combine, lambda t0, t1: (const(0, t0), const(0, t1)),
                        name=f"scatter_{fn.value}")


def _finish(fn: ScatterFn, data: Expr, found: Expr, acc: Expr) -> Expr:
    return where(found > 0, acc if fn is ScatterFn.NONE else _COMBINE[fn](data, acc), data)


def lower_scatter_elements(inputs, attrs, shape, name):
    x, idx, upd = inputs
    axis = attrs.get("axis", 0) % x.ndim
    fn = attrs.get("fn", ScatterFn.NONE)
    ushape = [const_int(d, "an updates axis") for d in upd.shape]
    dshape = [const_int(d, "a data axis") for d in x.shape]
    r = te.reduce_axis((0, ushape[axis]), name="ru")
    reducer = _reducer(fn)

    def candidates(*i):
        inside = [i[a] < ushape[a] for a in range(x.ndim) if a != axis and ushape[a] < dshape[a]]
        u = tuple(r.var if a == axis else minimum(i[a], ushape[a] - 1) for a in range(x.ndim))
        hit = checked_index(idx[u], dshape[axis]) == i[axis]
        for c in inside:
            hit = hit & c
        return reducer((cast(DType.INT64, hit), upd[u]), axis=r)
    found, acc = te.compute(shape, candidates, name=f"{name}_hits")
    return te.compute(shape, lambda *i: _finish(fn, x[i], found[i], acc[i]), name=name)


def lower_scatter_nd(inputs, attrs, shape, name):
    x, idx, upd = inputs
    fn = attrs.get("fn", ScatterFn.NONE)
    k = const_int(idx.shape[-1], "the index depth")
    lead = [const_int(d, "an indices axis") for d in idx.shape[:-1]]
    dshape = [const_int(d, "a data axis") for d in x.shape]
    rs = [te.reduce_axis((0, d), name=f"rq{a}") for a, d in enumerate(lead)]
    reducer = _reducer(fn)
    if not rs:      # one update, of the whole slice idx points at
        def one(*p):
            hit = None
            for j in range(k):
                eq = checked_index(idx[(j,)], dshape[j]) == p[j]
                hit = eq if hit is None else hit & eq
            return _finish(fn, x[p], cast(DType.INT64, hit), upd[tuple(p[k:])])
        return te.compute(shape, one, name=name)

    def candidates(*p):
        q = tuple(r.var for r in rs)
        hit = None
        for j in range(k):
            eq = checked_index(idx[q + (j,)], dshape[j]) == p[j]
            hit = eq if hit is None else hit & eq
        return reducer((cast(DType.INT64, hit), upd[q + tuple(p[k:])]), axis=rs)
    found, acc = te.compute(shape, candidates, name=f"{name}_hits")
    return te.compute(shape, lambda *i: _finish(fn, x[i], found[i], acc[i]), name=name)


SCATTER = {"scatter_elements": lower_scatter_elements, "scatter_nd": lower_scatter_nd}
