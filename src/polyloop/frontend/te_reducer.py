# SPDX-License-Identifier: Apache-2.0
"""Reductions: ``pl.sum``, ``pl.max``, ``pl.min``, and ``pl.comm_reducer(combine, identity)``, a
reduction named by its combining function, as TVM's ``te.comm_reducer`` spells it.

The combining function is applied once to two symbolic values to see which reduction it is
(sum, product, max or min, each commutative and associative, so a schedule may reorder its
updates), and the identity is checked against that reduction's own.

>>> import polyloop as pl
>>> product = pl.comm_reducer(lambda x, y: x * y, lambda dtype: pl.const(1, dtype), name="prod")
>>> A = pl.placeholder((4, 3), "float64", name="A")
>>> k = pl.reduce_axis((0, 3), name="k")
>>> P = pl.compute((4,), lambda i: product(A[i, k], axis=k), name="P")
>>> str(P.body)
'prod(A[i, k], axis=[k])'
"""
from __future__ import annotations

import math
from typing import Callable

from ..errors import PolyloopError
from ..ir.dtypes import DType
from ..ir.elementwise import isnan, where
from ..ir.expr import (BinOp, BinOpKind, Const, Expr, ExprLike, Reduce, ReduceKind, Var, VarKind,
                       as_expr, const, reduce_identity)
from .te_axes import ReduceAxis, _sub
from .te_tuple import TupleReduce, max_value, min_value, tuple_reduce


def _reduce(kind: ReduceKind, expr: ExprLike, axis: object) -> Reduce:
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    if not axes or not all(isinstance(a, ReduceAxis) for a in axes):
        raise PolyloopError(f"{kind.value}(..., axis=) takes reduce axes made by pl.reduce_axis, "
                            f"got {axis!r}")
    src = as_expr(expr)
    if src.weak:
        src = src.astype(src.dtype)
    if src.dtype is DType.BOOL:
        raise PolyloopError(f"{kind.value}(..., axis=) over bool values ({src}): reductions add "
                            "or compare numbers; reduce x.astype(\"int32\") (a count for sum, "
                            "any/all for max/min) and compare the result with 0")
    return Reduce(kind, src, tuple(a.var for a in axes), tuple(a.start for a in axes),
                  tuple(a.extent for a in axes), src.dtype)


def sum(expr: ExprLike, axis: object) -> Reduce:  # noqa: A001 - the public name is pl.sum
    """Sum over reduce axes: ``pl.sum(A[i, k] * B[k, j], axis=k)`` (or ``axis=[k, l]``).

    >>> import polyloop as pl
    >>> A = pl.placeholder((4, 3), "float32", name="A")
    >>> k = pl.reduce_axis((0, 3), name="k")
    >>> S = pl.compute((4,), lambda i: pl.sum(A[i, k], axis=k), name="S")
    >>> str(S.body)
    'sum(A[i, k], axis=[k])'
    >>> l = pl.reduce_axis((0, 4), name="l")
    >>> T = pl.compute((1,), lambda _: pl.sum(A[l, k], axis=[l, k]), name="T")
    >>> str(T.body)
    'sum(A[l, k], axis=[l, k])'
    """
    return _reduce(ReduceKind.SUM, expr, axis)


def max(expr: ExprLike, axis: object) -> Reduce:  # noqa: A001
    """Maximum over reduce axes: ``pl.max(A[i, k], axis=k)``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4, 3), "float32", name="A")
    >>> k = pl.reduce_axis((0, 3), name="k")
    >>> M = pl.compute((4,), lambda i: pl.max(A[i, k], axis=k), name="M")
    >>> str(M.body), str(M.dtype)
    ('max(A[i, k], axis=[k])', 'float32')
    """
    return _reduce(ReduceKind.MAX, expr, axis)


def min(expr: ExprLike, axis: object) -> Reduce:  # noqa: A001
    """Minimum over reduce axes: ``pl.min(A[i, k], axis=k)``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4, 3), "float32", name="A")
    >>> k = pl.reduce_axis((0, 3), name="k")
    >>> M = pl.compute((4,), lambda i: pl.min(A[i, k], axis=k), name="M")
    >>> str(M.body)
    'min(A[i, k], axis=[k])'
    """
    return _reduce(ReduceKind.MIN, expr, axis)


_KINDS = {BinOpKind.ADD: ReduceKind.SUM, BinOpKind.MUL: ReduceKind.PROD,
          BinOpKind.MAX: ReduceKind.MAX, BinOpKind.MIN: ReduceKind.MIN}


def comm_reducer(combine: Callable[..., object], identity: Callable[..., object],
                 name: str | None = None) -> Callable[..., Reduce | TupleReduce]:
    """A reducer ``r(expr, axis=k)`` from ``combine(x, y)`` and ``identity(dtype)``.

    ``x + y``, ``x * y``, ``pl.maximum(x, y)`` and ``pl.minimum(x, y)`` are reductions a
    schedule may reorder (rfactor, reordering the reduction loops). Any other combine, and a
    reducer over tuples, ``r((k, A[i, k]), axis=k)`` with ``combine((x0, x1), (y0, y1))``
    returning a tuple and ``identity(dtype0, dtype1)`` returning one, folds the values in the
    order of the axes, with exact dependences (see ``pl.argmax``).

    >>> import polyloop as pl
    >>> def keep_first_max(x, y):
    ...     take = y[1] > x[1]
    ...     return pl.where(take, y[0], x[0]), pl.where(take, y[1], x[1])
    >>> argmax = pl.comm_reducer(keep_first_max,
    ...                          lambda t0, t1: (pl.const(0, t0), pl.min_value(t1)))
    >>> A = pl.placeholder((4, 5), "int32", name="A")
    >>> k = pl.reduce_axis((0, 5), name="k")
    >>> idx, val = pl.compute((4,), lambda i: argmax((k, A[i, k]), axis=k), name="T")
    """
    label = name or getattr(combine, "__name__", "reducer")
    if not callable(combine) or not callable(identity):
        raise PolyloopError(f"comm_reducer '{label}' takes two functions: combine(x, y) and "
                            "identity(dtype)")

    def reducer(expr: object, axis: object) -> Reduce | TupleReduce:
        if isinstance(expr, (tuple, list)):
            return tuple_reduce(label, combine, identity, expr, axis)
        src = as_expr(expr)  # type: ignore[arg-type]
        kind = _kind_of(combine, src.dtype, label)
        if kind is None:  # a fold in axis order, as a tuple reduction of one value
            return tuple_reduce(label, lambda x, y: (combine(x[0], y[0]),),
                                lambda d: (identity(d),), [src], axis)
        _check_identity(identity, kind, src.dtype, label)
        return _reduce(kind, src, axis)
    reducer.__name__ = label
    return reducer


def _kind_of(combine: Callable[..., object], dtype: DType, label: str) -> ReduceKind | None:
    """The reduction ``combine`` is, or None when it is none of sum, product, max and min."""
    x, y = (Var(v, VarKind.ITER, dtype, weak=False) for v in ("x", "y"))
    try:
        out = as_expr(combine(x, y))  # type: ignore[arg-type]
    except PolyloopError as e:
        raise PolyloopError(f"comm_reducer '{label}': combine(x, y) failed on {dtype} values: "
                            f"{e}") from None
    if isinstance(out, BinOp) and out.op in _KINDS and {str(out.lhs), str(out.rhs)} == {"x", "y"}:
        return _KINDS[out.op]
    return None


def _check_identity(identity: Callable[..., object], kind: ReduceKind, dtype: DType,
                    label: str) -> None:
    given = as_expr(identity(dtype))  # type: ignore[arg-type]
    want = reduce_identity(kind, dtype)
    if not (isinstance(given, Const) and given.value == want.value):
        raise PolyloopError(f"comm_reducer '{label}': identity({dtype}) is {given}, but a "
                            f"{kind.value} starts from {want.value}; give that identity")


def _arg_best(y_wins: Callable[[Expr, Expr], Expr]) -> Callable[..., tuple[Expr, Expr]]:
    def combine(x: tuple[Expr, Expr], y: tuple[Expr, Expr]) -> tuple[Expr, Expr]:
        take = y_wins(y[1], x[1])
        if x[1].dtype.is_float:  # the first NaN wins and stays, as in NumPy
            take = take | (isnan(y[1]) & ~isnan(x[1]))
        return where(take, y[0], x[0]), where(take, y[1], x[1])
    return combine


def _arg_reducer(label: str, y_wins: Callable[[Expr, Expr], Expr],
                 start: Callable[[DType], Expr]) -> Callable[..., TupleReduce]:
    combine = _arg_best(y_wins)

    def reducer(expr: ExprLike, axis: object) -> TupleReduce:
        if not isinstance(axis, ReduceAxis):
            raise PolyloopError(f"pl.{label}(..., axis=) takes one reduce axis made by "
                                f"pl.reduce_axis, got {axis!r}; for several axes fuse them "
                                "into one or reduce twice")
        value = as_expr(expr)
        # the identity index is 0, the first position: a row of equal values (all -inf, all
        # NaN-free minima) gives 0 as NumPy does, not an index outside the axis
        return tuple_reduce(label, combine, lambda ti, tv: (const(0, ti), start(tv)),
                            [_sub(axis.var, axis.start), value], axis)
    reducer.__name__ = label
    return reducer


def _lowest(d: DType) -> Expr:
    return const(-math.inf, d) if d.is_float else min_value(d)


def _highest(d: DType) -> Expr:
    return const(math.inf, d) if d.is_float else max_value(d)


argmax = _arg_reducer("argmax", lambda y, x: y > x, _lowest)
argmax.__doc__ = """The index and the value of the maximum along a reduce axis, as ``np.argmax``
and ``np.max``: ``idx, val = pl.compute((m,), lambda i: pl.argmax(A[i, k], axis=k))``.

The index is the position along the axis (``k`` minus its start), int64. Ties give the first
index; a NaN counts as the maximum and the first NaN wins, as in NumPy. An empty axis gives
index 0 and value -inf (the lowest integer for integer values).

>>> import polyloop as pl
>>> A = pl.placeholder((3, 7), "float32", name="A")
>>> k = pl.reduce_axis((0, 7), name="k")
>>> idx, val = pl.compute((3,), lambda i: pl.argmax(A[i, k], axis=k), name="best")
>>> idx.name, val.name
('best', 'best_1')
"""
argmin = _arg_reducer("argmin", lambda y, x: y < x, _highest)
argmin.__doc__ = """The index and the value of the minimum along a reduce axis, as ``np.argmin``
and ``np.min``: ``idx, val = pl.compute((m,), lambda i: pl.argmin(A[i, k], axis=k))``; ties
and NaN as for ``pl.argmax`` (the first NaN wins).

>>> import polyloop as pl
>>> A = pl.placeholder((3, 7), "int8", name="A")
>>> k = pl.reduce_axis((0, 7), name="k")
>>> idx, val = pl.compute((3,), lambda i: pl.argmin(A[i, k], axis=k), name="low")
"""
