# SPDX-License-Identifier: Apache-2.0
"""Sizes, names and axes of tensor expressions: ``pl.var``, ``pl.reduce_axis`` and the checks
on the shapes and names a user gives.

>>> import polyloop as pl
>>> k = pl.reduce_axis((1, 9), name="k")
>>> str(k.start), str(k.extent)
('1', '8')
"""
from __future__ import annotations

import itertools
import numbers
import operator
from typing import Sequence

import numpy as np

from ..errors import PolyloopError
from ..ir.dtypes import INDEX
from ..ir.expr import Const, Expr, Var, VarKind, as_expr, const, walk
from ..ir.simplify import simplify
from ..poly.isl_util import NotAffine, expr_to_isl, isl_name
_names: dict[str, itertools.count] = {}


def _auto_name(base: str) -> str:
    k = next(_names.setdefault(base, itertools.count()))
    return base if k == 0 else f"{base}_{k}"


def _tensor_name(name: str | None, base: str) -> str:
    if name is None:
        return _auto_name(base)
    if not isinstance(name, str) or not name.isidentifier():
        raise PolyloopError(f"tensor name {name!r} is not an identifier; use letters, digits and "
                            "underscores, not starting with a digit")
    return isl_name(name)


def var(name: str) -> Var:
    """A symbolic size: ``n = pl.var("n")``; bound from argument shapes at call time.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n, 2 * n), "float32", name="A")
    >>> n, A
    (<Var n>, Tensor(A: float32[n, 2 * n]))
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise PolyloopError(f"size parameter name {name!r} is not an identifier")
    return Var(isl_name(name), VarKind.PARAM)


class ReduceAxis(Expr):
    """An iterator that a reduction runs over: ``k = pl.reduce_axis((0, n), name="k")``."""

    __slots__ = ("var", "start", "extent", "dtype", "weak")

    def __init__(self, var_: Var, start: Expr, extent: Expr):
        object.__setattr__(self, "var", var_)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "extent", extent)
        object.__setattr__(self, "dtype", INDEX)
        object.__setattr__(self, "weak", True)

    def as_expr(self) -> Var:
        return self.var

    def __str__(self) -> str:
        return self.var.name


def reduce_axis(dom: object, name: str | None = None) -> ReduceAxis:
    """A reduction axis over ``range(lo, hi)``: ``pl.reduce_axis((0, n))`` or ``pl.reduce_axis(n)``.

    >>> import polyloop as pl
    >>> k = pl.reduce_axis((0, 16), name="k")
    """
    if isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise PolyloopError(f"reduce_axis takes (start, stop) or an extent, got {dom!r}")
        lo, hi = _size(dom[0], "reduce_axis start"), _size(dom[1], "reduce_axis stop")
    else:
        lo, hi = const(0), _size(dom, "reduce_axis extent")
    for e in (lo, hi):
        _check_extent(e, "reduce_axis bound", allow_zero=True)
    extent = simplify(_sub(hi, lo))
    if isinstance(extent, Const) and extent.value < 0:
        raise PolyloopError(f"reduce_axis(({lo}, {hi})) has a negative extent {extent.value}: "
                            "the stop must not be below the start")
    if name is not None and (not isinstance(name, str) or not name.isidentifier()):
        raise PolyloopError(f"reduce_axis name {name!r} is not an identifier")
    return ReduceAxis(Var(isl_name(name) if name else _auto_name("k")), lo, extent)


def _sub(a: Expr, b: Expr) -> Expr:
    if isinstance(b, Const) and b.value == 0:
        return a
    return a - b


def _check_extent(e: Expr, what: str, *, allow_zero: bool = True) -> None:
    if not e.dtype.is_int:
        raise PolyloopError(f"{what} must be an integer, got {e.dtype} {e}")
    if isinstance(e, Const) and (e.value < 0 or (e.value == 0 and not allow_zero)):
        raise PolyloopError(f"{what} must be non-negative, got {e.value}")
    for n in walk(e):
        if isinstance(n, Var) and n.kind is not VarKind.PARAM:
            raise PolyloopError(f"{what} may only use size parameters (pl.var), got {e}")


def _shape(shape: object) -> tuple[Expr, ...]:
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise PolyloopError(f"shape must be a tuple of sizes, got {shape!r}")
    out = []
    for k, d in enumerate(shape):
        e = _size(d, f"extent {k} of the shape")
        _check_extent(e, f"extent {k} of the shape")
        out.append(e)
    return tuple(out)


def _size(value: object, what: str) -> Expr:
    """A size given by the user: an integer (Python or NumPy) or an expression of pl.var sizes."""
    if isinstance(value, Expr) or hasattr(value, "as_expr"):
        return as_expr(value)  # type: ignore[arg-type]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise PolyloopError(f"{what} is {value!r} of type {type(value).__name__}: sizes must be "
                            "integers or expressions of pl.var sizes")
    return const(operator.index(value))


def _bounds(names: Sequence[str], starts: Sequence[Expr], extents: Sequence[Expr],
            owner: str) -> list[str]:
    out = []
    for n, lo, ext in zip(names, starts, extents):
        try:
            a, b = expr_to_isl(simplify(lo)), expr_to_isl(simplify(lo + ext))
        except NotAffine:
            raise PolyloopError(f"the extent of axis '{n}' of '{owner}' must be affine in the size "
                                f"parameters (like 2*n + 1), got {ext}") from None
        out.append(f"{a} <= {n} < {b}")
    return out
