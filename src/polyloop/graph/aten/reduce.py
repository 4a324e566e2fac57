# SPDX-License-Identifier: Apache-2.0
"""ATen reductions: sum, mean, amax, amin, prod, var, argmax/argmin, any/all, max/min along a
dimension."""
from __future__ import annotations

from ..ir import Op, Value
from ..kinds import BinaryFn, ReduceFn
from .context import Call, Unsupported, normalize_axis
from .math import cast

_FNS = {"sum": ReduceFn.SUM, "mean": ReduceFn.MEAN, "amax": ReduceFn.MAX,
        "amin": ReduceFn.MIN, "prod": ReduceFn.PROD, "any": ReduceFn.MAX, "all": ReduceFn.MIN}


def _axes(c: Call, k: int, rank: int) -> tuple[int, ...]:
    dims = c.arg(k, "dim")
    if dims is None or dims == []:
        return tuple(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted(normalize_axis(int(d), rank, "dim") for d in dims))


def reduce(c: Call) -> Value:
    name = c.node.target.__name__.split(".")[0]
    x = c.value(0)
    rank = len(x.type.shape)
    axes = _axes(c, 1, rank) if len(c.node.args) > 1 or "dim" in c.node.kwargs \
        else tuple(range(rank))
    keep = bool(c.arg(2, "keepdim", False)) if len(c.node.args) > 1 or "dim" in c.node.kwargs \
        else False
    out = c.out_type().dtype
    if name in ("any", "all"):
        x = cast(c, x, "int32")
    elif x.type.dtype != out:
        x = cast(c, x, out)
    if name == "mean" and out.startswith("float"):
        result = c.emit(Op.MEAN, x, axes=list(axes), keepdim=keep)
    else:
        result = c.emit(Op.REDUCE, x, fn=_FNS[name], axes=axes, keepdims=keep)
    return cast(c, result, out, "out")


def var(c: Call) -> Value:
    """``var(x, dim, correction, keepdim)``: the mean of squared deviations, times
    ``n / (n - correction)``."""
    x = c.value(0)
    rank = len(x.type.shape)
    axes = _axes(c, 1, rank)
    n = 1
    for a in axes:
        if not isinstance(x.type.shape[a], int):
            raise Unsupported("variance over a symbolic axis")
        n *= x.type.shape[a]
    correction = c.arg(2, "correction")
    correction = 1 if correction is None else float(correction)
    keep = bool(c.arg(3, "keepdim", False))
    mean = c.emit(Op.MEAN, x, axes=list(axes), keepdim=True, name=f"{c.name}_mean")
    dev = c.emit(Op.SUB, x, mean, name=f"{c.name}_dev")
    sq = c.emit(Op.MUL, dev, dev, name=f"{c.name}_sq")
    total = c.emit(Op.REDUCE, sq, fn=ReduceFn.SUM, axes=axes, keepdims=keep,
                   name=f"{c.name}_sum")
    if n - correction <= 0:
        raise Unsupported(f"variance of {n} elements with correction {correction}")
    return c.emit(Op.MUL, total, c.constant(1.0 / (n - correction), x.type.dtype))


def arg_reduce(c: Call) -> Value:
    x = c.value(0)
    dim = c.arg(1, "dim")
    if dim is None:
        flat = 1
        for d in x.type.shape:
            if not isinstance(d, int):
                raise Unsupported("argmax over all of a symbolic shape")
            flat *= d
        x, dim = c.emit(Op.RESHAPE, x, shape=(flat,), name=f"{c.name}_flat"), 0
    axis = normalize_axis(int(dim), len(x.type.shape), "dim")
    largest = c.node.target.__name__.startswith("argmax")
    return c.emit(Op.ARG_REDUCE, x, largest=largest, axis=axis,
                  keepdims=bool(c.arg(2, "keepdim", False)))


def max_dim(c: Call) -> object:
    """``max.dim``/``min.dim``: the values and their indices (``max``: the whole tensor's;
    ``max.other``: elementwise)."""
    largest = c.node.target.__name__.startswith("max")
    if c.overload == "other":
        fn = BinaryFn.MAX if largest else BinaryFn.MIN
        return c.emit(Op.BINARY, c.value(0), c.value(1), fn=fn)
    x = c.value(0)
    if c.overload != "dim":
        return c.emit(Op.REDUCE, x, fn=ReduceFn.MAX if largest else ReduceFn.MIN,
                      axes=tuple(range(len(x.type.shape))), keepdims=False)
    axis = normalize_axis(int(c.arg(1, "dim")), len(x.type.shape), "dim")
    keep = bool(c.arg(2, "keepdim", False))
    values = c.emit(Op.REDUCE, x, fn=ReduceFn.MAX if largest else ReduceFn.MIN, axes=(axis,),
                    keepdims=keep)
    idx = c.emit(Op.ARG_REDUCE, x, largest=largest, axis=axis, keepdims=keep,
                 name=f"{c.name}_idx")
    return values, idx


REDUCE = {**{name: reduce for name in _FNS}, "var": var, "argmax": arg_reduce,
          "argmin": arg_reduce, "max": max_dim, "min": max_dim}
