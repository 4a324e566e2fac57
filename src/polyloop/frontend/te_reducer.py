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

from typing import Callable

from ..errors import PolyloopError
from ..ir.dtypes import DType
from ..ir.expr import (BinOp, BinOpKind, Const, Expr, ExprLike, Reduce, ReduceKind, Var, VarKind,
                       as_expr, reduce_identity)
from .te_axes import ReduceAxis


def _reduce(kind: ReduceKind, expr: ExprLike, axis: object) -> Reduce:
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    if not axes or not all(isinstance(a, ReduceAxis) for a in axes):
        raise PolyloopError(f"{kind.value}(..., axis=) takes reduce axes made by pl.reduce_axis, "
                            f"got {axis!r}")
    src = as_expr(expr)
    if src.weak:
        src = src.astype(src.dtype)
    return Reduce(kind, src, tuple(a.var for a in axes), tuple(a.start for a in axes),
                  tuple(a.extent for a in axes), src.dtype)


def sum(expr: ExprLike, axis: object) -> Reduce:  # noqa: A001 - the public name is pl.sum
    """Sum over reduce axes: ``pl.sum(A[i, k] * B[k, j], axis=k)`` (or ``axis=[k, l]``)."""
    return _reduce(ReduceKind.SUM, expr, axis)


def max(expr: ExprLike, axis: object) -> Reduce:  # noqa: A001
    """Maximum over reduce axes: ``pl.max(A[i, k], axis=k)``."""
    return _reduce(ReduceKind.MAX, expr, axis)


def min(expr: ExprLike, axis: object) -> Reduce:  # noqa: A001
    """Minimum over reduce axes: ``pl.min(A[i, k], axis=k)``."""
    return _reduce(ReduceKind.MIN, expr, axis)


_KINDS = {BinOpKind.ADD: ReduceKind.SUM, BinOpKind.MUL: ReduceKind.PROD,
          BinOpKind.MAX: ReduceKind.MAX, BinOpKind.MIN: ReduceKind.MIN}


def comm_reducer(combine: Callable[[Expr, Expr], ExprLike],
                 identity: Callable[[DType], ExprLike], name: str | None = None
                 ) -> Callable[..., Reduce]:
    """A reducer ``r(expr, axis=k)`` from ``combine(x, y)`` (``x * y``, ``x + y``,
    ``pl.maximum(x, y)`` or ``pl.minimum(x, y)``) and ``identity(dtype)``."""
    label = name or getattr(combine, "__name__", "reducer")
    if not callable(combine) or not callable(identity):
        raise PolyloopError(f"comm_reducer '{label}' takes two functions: combine(x, y) and "
                            "identity(dtype)")

    def reducer(expr: ExprLike, axis: object) -> Reduce:
        src = as_expr(expr)
        kind = _kind_of(combine, src.dtype, label)
        _check_identity(identity, kind, src.dtype, label)
        return _reduce(kind, src, axis)
    reducer.__name__ = label
    return reducer


def _kind_of(combine: Callable[[Expr, Expr], ExprLike], dtype: DType, label: str) -> ReduceKind:
    x, y = (Var(v, VarKind.ITER, dtype, weak=False) for v in ("x", "y"))
    try:
        out = as_expr(combine(x, y))
    except PolyloopError as e:
        raise PolyloopError(f"comm_reducer '{label}': combine(x, y) failed on {dtype} values: "
                            f"{e}") from None
    if isinstance(out, BinOp) and out.op in _KINDS and {str(out.lhs), str(out.rhs)} == {"x", "y"}:
        return _KINDS[out.op]
    raise PolyloopError(
        f"comm_reducer '{label}': combine(x, y) = {out}; polyloop reduces with x + y, x * y, "
        "pl.maximum(x, y) or pl.minimum(x, y). For an argmax/argmin (tuple values) compute the "
        "max with pl.max, then the first index where it is reached with a second reduction")


def _check_identity(identity: Callable[[DType], ExprLike], kind: ReduceKind, dtype: DType,
                    label: str) -> None:
    given = as_expr(identity(dtype))
    want = reduce_identity(kind, dtype)
    if not (isinstance(given, Const) and given.value == want.value):
        raise PolyloopError(f"comm_reducer '{label}': identity({dtype}) is {given}, but a "
                            f"{kind.value} starts from {want.value}; give that identity")
