# SPDX-License-Identifier: Apache-2.0
"""NumPy evaluation of graph operators on constant inputs: what importers fold when every
input of a call is known (shape arithmetic, index tables, weights reshaped or transposed).

``evaluate(op, arrays, attrs, out_type)`` returns the result, or None when ``op`` has no
NumPy form here (the call then stays in the graph and runs as a kernel). Each form computes
what the operator's tensor expression computes (``Op``'s docstring).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .ir import Op, TensorType
from .kinds import BinaryFn, PadMode, ReduceFn, UnaryFn


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe) * np.sign(a) * np.sign(safe)
    return np.where(b == 0, 0, q)


def _div(a, b):
    return a / b if a.dtype.kind == "f" else _int_div(a, b)


def _fmod(a, b):
    if a.dtype.kind == "f":
        return np.fmod(a, b)
    return np.where(b == 0, 0, a - _int_div(a, b) * b)


def _mod(a, b):
    return np.mod(a, b) if a.dtype.kind == "f" else np.where(b == 0, 0, np.mod(a, np.where(
        b == 0, 1, b)))


_BINARY: dict[BinaryFn, Callable] = {
    BinaryFn.ADD: np.add, BinaryFn.SUB: np.subtract, BinaryFn.MUL: np.multiply,
    BinaryFn.DIV: _div, BinaryFn.MAX: np.maximum, BinaryFn.MIN: np.minimum,
    BinaryFn.MOD: _mod, BinaryFn.FMOD: _fmod, BinaryFn.AND: np.logical_and,
    BinaryFn.OR: np.logical_or, BinaryFn.XOR: np.logical_xor, BinaryFn.EQ: np.equal,
    BinaryFn.NE: np.not_equal, BinaryFn.LT: np.less, BinaryFn.LE: np.less_equal,
    BinaryFn.GT: np.greater, BinaryFn.GE: np.greater_equal,
    BinaryFn.BITAND: np.bitwise_and, BinaryFn.BITOR: np.bitwise_or,
    BinaryFn.BITXOR: np.bitwise_xor,
}
_UNARY: dict[UnaryFn, Callable] = {
    UnaryFn.ABS: np.abs, UnaryFn.NEG: np.negative, UnaryFn.SIGN: np.sign,
    UnaryFn.NOT: np.logical_not, UnaryFn.FLOOR: np.floor, UnaryFn.CEIL: np.ceil,
    UnaryFn.ROUND: np.round, UnaryFn.SQRT: np.sqrt, UnaryFn.EXP: np.exp, UnaryFn.LOG: np.log,
    UnaryFn.RECIPROCAL: np.reciprocal, UnaryFn.RELU: lambda x: np.maximum(x, 0),
    UnaryFn.ISNAN: np.isnan,
}
_REDUCE = {ReduceFn.SUM: np.sum, ReduceFn.PROD: np.prod, ReduceFn.MAX: np.max,
           ReduceFn.MIN: np.min, ReduceFn.MEAN: np.mean,
           ReduceFn.L1: lambda x, **k: np.sum(np.abs(x), **k),
           ReduceFn.L2: lambda x, **k: np.sqrt(np.sum(x * x, **k)),
           ReduceFn.SUM_SQUARE: lambda x, **k: np.sum(x * x, **k),
           ReduceFn.LOG_SUM: lambda x, **k: np.log(np.sum(x, **k)),
           ReduceFn.LOG_SUM_EXP: lambda x, **k: np.log(np.sum(np.exp(x), **k))}


def _unary(a, attrs, t):
    fn = attrs["fn"]
    if fn is UnaryFn.CLIP:
        lo, hi = attrs.get("lo"), attrs.get("hi")
        return np.clip(a[0], lo, hi) if lo is not None or hi is not None else a[0]
    f = _UNARY.get(fn)
    return None if f is None else f(a[0])


def _binary(a, attrs, t):
    f = _BINARY.get(attrs["fn"])
    if f is None:
        return None
    with np.errstate(all="ignore"):
        return f(a[0], a[1])


def _reduce(a, attrs, t):
    f = _REDUCE.get(attrs["fn"])
    axes = tuple(attrs.get("axes", ()))
    if f is None or not axes:
        return None if f is None else a[0]
    if a[0].size == 0 and attrs["fn"] in (ReduceFn.MAX, ReduceFn.MIN):
        info = np.finfo(a[0].dtype) if a[0].dtype.kind == "f" else np.iinfo(a[0].dtype)
        fill = -np.inf if a[0].dtype.kind == "f" else info.min
        if attrs["fn"] is ReduceFn.MIN:
            fill = np.inf if a[0].dtype.kind == "f" else info.max
        shape = [1 if k in axes else d for k, d in enumerate(a[0].shape)]
        out = np.full(shape, fill, a[0].dtype)
        return out if attrs.get("keepdims") else out.reshape(t.shape)
    return f(a[0], axis=axes, keepdims=bool(attrs.get("keepdims", False)))


def _slice(a, attrs, t):
    ranges = [b + s * np.arange(n) for b, s, n in zip(attrs["begin"], attrs["step"],
                                                       attrs["size"])]
    return a[0][np.ix_(*ranges)] if ranges else a[0]


def _pad(a, attrs, t):
    if attrs.get("mode", PadMode.CONSTANT) is not PadMode.CONSTANT:
        return None
    x, pads = a[0], attrs["pads"]
    rank = x.ndim
    crop = tuple(slice(max(-pads[k], 0), x.shape[k] - max(-pads[k + rank], 0))
                 for k in range(rank))
    widths = [(max(pads[k], 0), max(pads[k + rank], 0)) for k in range(rank)]
    return np.pad(x[crop], widths, constant_values=attrs.get("value", 0))


def _gather(a, attrs, t):
    x, idx = a
    axis = attrs.get("axis", 0) % x.ndim
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        return None
    return np.take(x, np.where(idx < 0, idx + n, idx), axis=axis)


_FORMS: dict[Op, Callable] = {
    Op.ADD: lambda a, attrs, t: a[0] + a[1], Op.SUB: lambda a, attrs, t: a[0] - a[1],
    Op.MUL: lambda a, attrs, t: a[0] * a[1], Op.DIV: lambda a, attrs, t: _div(a[0], a[1]),
    Op.NEG: lambda a, attrs, t: -a[0], Op.SQRT: lambda a, attrs, t: np.sqrt(a[0]),
    Op.EXP: lambda a, attrs, t: np.exp(a[0]), Op.COPY: lambda a, attrs, t: a[0],
    Op.RELU: lambda a, attrs, t: np.maximum(a[0], 0),
    Op.UNARY: _unary, Op.BINARY: _binary,
    Op.WHERE: lambda a, attrs, t: np.where(a[0], a[1], a[2]),
    Op.CAST: lambda a, attrs, t: a[0].astype(t.dtype),
    Op.RESHAPE: lambda a, attrs, t: a[0].reshape(t.shape),
    Op.PERMUTE: lambda a, attrs, t: np.transpose(a[0], attrs["axes"]),
    Op.CONCAT: lambda a, attrs, t: np.concatenate(a, axis=attrs["axis"]),
    Op.REDUCE: _reduce, Op.SLICE: _slice, Op.PAD: _pad,
    Op.BROADCAST_TO: lambda a, attrs, t: np.broadcast_to(a[0], t.shape),
    Op.TILE: lambda a, attrs, t: np.tile(a[0], attrs["repeats"]),
    Op.GATHER: _gather,
    Op.CUMSUM: lambda a, attrs, t: None if attrs.get("exclusive") or attrs.get("reverse")
    else np.cumsum(a[0], axis=attrs.get("axis", 0)),
}


def evaluate(op: Op, arrays: list[np.ndarray], attrs: dict, out_type: TensorType
             ) -> np.ndarray | None:
    """``op`` applied to constant ``arrays`` (None: no NumPy form, or a shape parameter).

    >>> import numpy as np
    >>> from polyloop.graph.ir import Op, TensorType
    >>> evaluate(Op.CONCAT, [np.array([1]), np.array([2, 3])], {"axis": 0}, TensorType((3,), "int64"))
    array([1, 2, 3])
    """
    form = _FORMS.get(op)
    if form is None or out_type.params:
        return None
    try:
        with np.errstate(all="ignore"):
            out = form(arrays, attrs, out_type)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None     # NumPy has no answer here (a maximum of nothing): not folded
    if out is None:
        return None
    out = np.asarray(out).astype(out_type.dtype, copy=False)
    return np.require(out.reshape(out_type.shape), requirements="C")
