# SPDX-License-Identifier: Apache-2.0
"""Elementwise functions of expressions (the public ``pl.exp``, ``pl.where``, ...)."""
from __future__ import annotations

from .expr import BinOpKind, Expr, ExprLike, UnaryKind, as_expr, binop, cast, select, unary
from .expr import const as const  # re-exported


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    """Elementwise maximum: ``pl.maximum(C[i, j], 0.0)``."""
    return binop(BinOpKind.MAX, a, b)


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    """Elementwise minimum: ``pl.minimum(A[i], 6.0)``."""
    return binop(BinOpKind.MIN, a, b)


def where(cond: ExprLike, a: ExprLike, b: ExprLike) -> Expr:
    """``a`` where ``cond`` holds, else ``b`` (only the chosen side is evaluated)."""
    return select(cond, a, b)


def exp(x: ExprLike) -> Expr:
    """``pl.exp(A[i])``; integer operands are computed in float64."""
    return unary(UnaryKind.EXP, x)


def log(x: ExprLike) -> Expr:
    """Natural logarithm: ``pl.log(A[i])``."""
    return unary(UnaryKind.LOG, x)


def sqrt(x: ExprLike) -> Expr:
    """Square root: ``pl.sqrt(A[i])``."""
    return unary(UnaryKind.SQRT, x)


def tanh(x: ExprLike) -> Expr:
    """Hyperbolic tangent: ``pl.tanh(A[i])``."""
    return unary(UnaryKind.TANH, x)


def sin(x: ExprLike) -> Expr:
    """Sine: ``pl.sin(A[i])``."""
    return unary(UnaryKind.SIN, x)


def cos(x: ExprLike) -> Expr:
    """Cosine: ``pl.cos(A[i])``."""
    return unary(UnaryKind.COS, x)


def tan(x: ExprLike) -> Expr:
    """Tangent: ``pl.tan(A[i])``."""
    return unary(UnaryKind.TAN, x)


def erf(x: ExprLike) -> Expr:
    """The error function: ``pl.erf(A[i])`` (as ``scipy.special.erf``)."""
    return unary(UnaryKind.ERF, x)


def sigmoid(x: ExprLike) -> Expr:
    """The logistic function ``1 / (1 + exp(-x))``: ``pl.sigmoid(A[i])``; built on exp, so it
    is vectorized wherever exp is."""
    e = as_expr(x)
    one = cast(e.dtype, 1) if e.dtype.is_float else 1.0
    return one / (one + exp(-e))


def floor(x: ExprLike) -> Expr:
    """Round down: ``pl.floor(A[i])`` (integers are computed in float64, as NumPy does)."""
    return unary(UnaryKind.FLOOR, x)


def ceil(x: ExprLike) -> Expr:
    """Round up: ``pl.ceil(A[i])``."""
    return unary(UnaryKind.CEIL, x)


def round(x: ExprLike) -> Expr:  # noqa: A001 - the public name is pl.round
    """Round to the nearest integer, halves to even, as ``np.round``: ``pl.round(A[i])``."""
    return unary(UnaryKind.ROUND, x)


def isnan(x: ExprLike) -> Expr:
    """Is it NaN (a bool): ``pl.where(pl.isnan(A[i]), 0.0, A[i])``."""
    return unary(UnaryKind.ISNAN, x)


def pow(x: ExprLike, y: ExprLike) -> Expr:  # noqa: A001 - the public name is pl.pow
    """``x`` to the power ``y`` (C's pow; integers are computed in float64): ``pl.pow(A[i], 3)``,
    also spelled ``A[i] ** y``."""
    return binop(BinOpKind.POW, x, y)


def fmod(x: ExprLike, y: ExprLike) -> Expr:
    """The remainder of ``x / y`` with the sign of ``x`` (``np.fmod``; ``%`` follows the sign
    of ``y`` as Python does): ``pl.fmod(A[i], 3.0)``."""
    return binop(BinOpKind.FMOD, x, y)


def abs(x: ExprLike) -> Expr:  # noqa: A001 - the public name is pl.abs
    """Absolute value: ``pl.abs(A[i])`` (keeps the dtype)."""
    return unary(UnaryKind.ABS, x)
