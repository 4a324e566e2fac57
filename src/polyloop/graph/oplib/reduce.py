# SPDX-License-Identifier: Apache-2.0
"""Reductions as tensor expressions: ``Op.REDUCE`` (one reduction per ``ReduceFn``),
``Op.ARG_REDUCE`` and ``Op.CUMSUM``."""
from __future__ import annotations

import math

import numpy as np

from ...frontend import te
from ...frontend.te_reducer import comm_reducer
from ...ir.dtypes import DType, as_dtype
from ...ir.elementwise import abs as abs_, exp, isnan, log, sqrt, where
from ...ir.expr import Expr, cast, const
from ..kinds import ReduceFn

_prod = comm_reducer(lambda x, y: x * y, lambda d: const(1, d), name="prod")


def reduced_index(ndim: int, red: dict, keep: bool, i: tuple) -> tuple:
    """The input index of output element ``i``: reduce axes where ``red`` has one."""
    out, it = [], iter(i)
    for a in range(ndim):
        if a in red:
            out.append(red[a])
            if keep:
                next(it)
        else:
            out.append(next(it))
    return tuple(out)


def count_of(dims: list, dtype: str) -> Expr | float:
    """The number of elements over ``dims`` (a constant, or an expression of size parameters)."""
    total = 1
    for d in dims:
        total = total * (int(d.value) if hasattr(d, "value") else d)
    return float(total) if isinstance(total, int) else cast(as_dtype(dtype), total)


def _reduce_with(x, axes, keep, shape, name, kind: str, value, suffix: str = ""):
    red = {a: te.reduce_axis((0, x.shape[a]), name=f"r{a}") for a in axes}
    fn = {"sum": te.sum, "max": te.max, "min": te.min, "prod": _prod}[kind]
    return te.compute(shape, lambda *i: fn(value(x[reduced_index(x.ndim, red, keep, i)]),
                                           axis=list(red.values())), name=name + suffix)


def lower_reduce(inputs, attrs, shape, name):
    """``Op.REDUCE``: one te reduction, then the function's finishing step."""
    x = inputs[0]
    fn = attrs["fn"]
    axes = sorted(a % x.ndim for a in attrs.get("axes", ()))
    keep = bool(attrs.get("keepdims", False))
    if not axes:
        return te.compute(shape, lambda *i: x[i], name=name)
    kind = {ReduceFn.MAX: "max", ReduceFn.MIN: "min", ReduceFn.PROD: "prod"}.get(fn, "sum")
    square = fn in (ReduceFn.L2, ReduceFn.SUM_SQUARE)
    if fn is ReduceFn.LOG_SUM_EXP:
        return _log_sum_exp(x, axes, keep, shape, name)
    value = (lambda v: v * v) if square else abs_ if fn is ReduceFn.L1 else (lambda v: v)
    finish = {ReduceFn.MEAN: None, ReduceFn.L2: sqrt, ReduceFn.LOG_SUM: log}
    if fn not in finish:
        return _reduce_with(x, axes, keep, shape, name, kind, value)
    total = _reduce_with(x, axes, keep, shape, name, kind, value, "_sum")
    if fn is ReduceFn.MEAN:
        n = count_of([x.shape[a] for a in axes], str(x.dtype))
        return te.compute(shape, lambda *i: total[i] / n, name=name)
    return te.compute(shape, lambda *i: finish[fn](total[i]), name=name)


def _log_sum_exp(x, axes, keep, shape, name):
    """``log(sum(exp(x - m))) + m`` with ``m`` the maximum (no overflow); an all -inf slice
    gives -inf."""
    m = _reduce_with(x, axes, keep, shape, name, "max", lambda v: v, "_max")
    red = {a: te.reduce_axis((0, x.shape[a]), name=f"s{a}") for a in axes}

    def term(i):
        mi = m[i]
        safe = where(isnan(mi - mi), 0.0, mi)
        return exp(x[reduced_index(x.ndim, red, keep, i)] - safe)
    total = te.compute(shape, lambda *i: te.sum(term(i), axis=list(red.values())),
                       name=f"{name}_sum")

    def result(*i):
        mi = m[i]
        return log(total[i]) + where(isnan(mi - mi), 0.0, mi)
    return te.compute(shape, result, name=name)


def _arg_combine(largest: bool, last: bool):
    def combine(x, y):
        better = (y[1] > x[1]) if largest else (y[1] < x[1])
        if last:
            better = better | (y[1] == x[1])
        if x[1].dtype.is_float:     # NaN wins, as in NumPy: the first one, or the last
            better = better | (isnan(y[1]) & (~isnan(x[1]) | const(last, "bool")))
        return where(better, y[0], x[0]), where(better, y[1], x[1])
    return combine


def _arg_identity(largest: bool):
    def identity(ti, tv):
        if tv.is_float:
            start = const(-math.inf if largest else math.inf, tv)
        else:
            info = np.iinfo(tv.numpy)
            start = const(int(info.min if largest else info.max), tv)
        return const(0, ti), start
    return identity


def lower_arg_reduce(inputs, attrs, shape, name):
    """``Op.ARG_REDUCE``: the int64 position of the max (``largest``) or min along ``axis``,
    the first of ties (the last with ``last``)."""
    x = inputs[0]
    axis = attrs.get("axis", 0) % x.ndim
    keep = bool(attrs.get("keepdims", False))
    largest, last = bool(attrs.get("largest", True)), bool(attrs.get("last", False))
    reducer = comm_reducer(_arg_combine(largest, last), _arg_identity(largest),
                           name="argmax" if largest else "argmin")
    r = te.reduce_axis((0, x.shape[axis]), name="ra")
    idx, _ = te.compute(shape, lambda *i: reducer(
        (r.var, x[reduced_index(x.ndim, {axis: r}, keep, i)]),
        axis=r), name=name)
    return idx


def lower_cumsum(inputs, attrs, shape, name):
    """``Op.CUMSUM``: ``out[i] = sum of x[r]`` for r up to i (``exclusive``: before i;
    ``reverse``: from the end)."""
    x = inputs[0]
    axis = attrs.get("axis", 0) % x.ndim
    exclusive, reverse = bool(attrs.get("exclusive")), bool(attrs.get("reverse"))
    r = te.reduce_axis((0, x.shape[axis]), name="rc")

    def body(*i):
        k = i[axis]
        rv = r.var
        take = (rv > k if exclusive else rv >= k) if reverse else \
            (rv < k if exclusive else rv <= k)
        zero = const(0, x.dtype)
        return te.sum(where(take, x[i[:axis] + (r,) + i[axis + 1:]], zero), axis=r)
    return te.compute(shape, body, name=name)


def lower_topk(inputs, attrs, shape, name):
    """``Op.TOPK``: each element's rank along the axis (how many come before it: better, or
    equal and earlier), then output ``j`` is the element of rank ``j``."""
    x = inputs[0]
    axis = attrs.get("axis", -1) % x.ndim
    largest = bool(attrs.get("largest", True))
    m = te.reduce_axis((0, x.shape[axis]), name="rm")

    def ahead(*i):
        other = x[i[:axis] + (m,) + i[axis + 1:]]
        better = (other > x[i]) if largest else (other < x[i])
        first = better | ((other == x[i]) & (m.var < i[axis]))
        return te.sum(cast(DType.INT64, first), axis=m)
    rank = te.compute(x.shape, ahead, name=f"{name}_rank")
    r = te.reduce_axis((0, x.shape[axis]), name="rt")

    def pick(*i):
        at = i[:axis] + (r,) + i[axis + 1:]
        hit = rank[at] == i[axis]
        value = cast(DType.INT64, r.var) if attrs.get("indices") else x[at]
        return te.sum(where(hit, value, const(0, value.dtype)), axis=r)
    return te.compute(shape, pick, name=name)


REDUCE = {"reduce": lower_reduce, "arg_reduce": lower_arg_reduce, "cumsum": lower_cumsum,
          "topk": lower_topk}
