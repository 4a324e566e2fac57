# SPDX-License-Identifier: Apache-2.0
"""Elementwise functions of expressions (the public ``pl.exp``, ``pl.where``, ...)."""
from __future__ import annotations

from .expr import BinOpKind, Expr, ExprLike, UnaryKind, binop, select, unary
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


def abs(x: ExprLike) -> Expr:  # noqa: A001 - the public name is pl.abs
    """Absolute value: ``pl.abs(A[i])`` (keeps the dtype)."""
    return unary(UnaryKind.ABS, x)
