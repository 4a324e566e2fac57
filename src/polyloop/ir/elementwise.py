# SPDX-License-Identifier: Apache-2.0
"""Elementwise functions of expressions (the public ``pl.exp``, ``pl.where``, ...)."""
from __future__ import annotations

from .expr import BinOpKind, Expr, ExprLike, UnaryKind, as_expr, binop, cast, select, unary
from .expr import const as const  # re-exported


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    """Elementwise maximum: ``pl.maximum(C[i, j], 0.0)``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> e = pl.maximum(A[0], 0.0)
    >>> str(e), str(e.dtype)
    ('max(A[0], 0.0)', 'float32')
    >>> str(pl.maximum(I[0], 0).dtype), str(pl.maximum(I[0], 0.5).dtype)
    ('int32', 'float64')
    """
    return binop(BinOpKind.MAX, a, b)


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    """Elementwise minimum: ``pl.minimum(A[i], 6.0)``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> e = pl.minimum(A[0], 6.0)
    >>> str(e), str(e.dtype)
    ('min(A[0], 6.0)', 'float32')
    """
    return binop(BinOpKind.MIN, a, b)


def where(cond: ExprLike, a: ExprLike, b: ExprLike) -> Expr:
    """``a`` where ``cond`` holds, else ``b`` (only the chosen side is evaluated).

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> R = pl.compute((4,), lambda i: pl.where(A[i] > 0.0, A[i], 0.0), name="R")
    >>> str(R.body)
    'where(A[i] > 0.0, A[i], 0.0)'
    """
    return select(cond, a, b)


def exp(x: ExprLike) -> Expr:
    """``pl.exp(A[i])``; integer operands are computed in float64.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> str(pl.exp(A[0])), str(pl.exp(A[0]).dtype)
    ('exp(A[0])', 'float32')
    >>> str(pl.exp(I[0])), str(pl.exp(I[0]).dtype)
    ('exp(float64(I[0]))', 'float64')
    """
    return unary(UnaryKind.EXP, x)


def log(x: ExprLike) -> Expr:
    """Natural logarithm: ``pl.log(A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> str(pl.log(A[0])), str(pl.log(I[0]))
    ('log(A[0])', 'log(float64(I[0]))')
    """
    return unary(UnaryKind.LOG, x)


def sqrt(x: ExprLike) -> Expr:
    """Square root: ``pl.sqrt(A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.sqrt(A[0])), str(pl.sqrt(A[0]).dtype)
    ('sqrt(A[0])', 'float32')
    """
    return unary(UnaryKind.SQRT, x)


def tanh(x: ExprLike) -> Expr:
    """Hyperbolic tangent: ``pl.tanh(A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> str(pl.tanh(A[0])), str(pl.tanh(I[0]).dtype)
    ('tanh(A[0])', 'float64')
    """
    return unary(UnaryKind.TANH, x)


def sin(x: ExprLike) -> Expr:
    """Sine: ``pl.sin(A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.sin(A[0]))
    'sin(A[0])'
    """
    return unary(UnaryKind.SIN, x)


def cos(x: ExprLike) -> Expr:
    """Cosine: ``pl.cos(A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.cos(A[0]))
    'cos(A[0])'
    """
    return unary(UnaryKind.COS, x)


def tan(x: ExprLike) -> Expr:
    """Tangent: ``pl.tan(A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.tan(A[0]))
    'tan(A[0])'
    """
    return unary(UnaryKind.TAN, x)


def erf(x: ExprLike) -> Expr:
    """The error function: ``pl.erf(A[i])`` (as ``scipy.special.erf``).

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.erf(A[0]))
    'erf(A[0])'
    """
    return unary(UnaryKind.ERF, x)


def sigmoid(x: ExprLike) -> Expr:
    """The logistic function ``1 / (1 + exp(-x))``: ``pl.sigmoid(A[i])``; built on exp, so it
    is vectorized wherever exp is.

    >>> import polyloop as pl
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> str(pl.sigmoid(I[0]))
    '1.0 / (1.0 + exp(float64(-I[0])))'
    """
    e = as_expr(x)
    one = cast(e.dtype, 1) if e.dtype.is_float else 1.0
    return one / (one + exp(-e))


def floor(x: ExprLike) -> Expr:
    """Round down: ``pl.floor(A[i])`` (integers are computed in float64, as NumPy does).

    >>> import polyloop as pl
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> str(pl.floor(I[0])), str(pl.floor(I[0]).dtype)
    ('floor(float64(I[0]))', 'float64')
    """
    return unary(UnaryKind.FLOOR, x)


def ceil(x: ExprLike) -> Expr:
    """Round up: ``pl.ceil(A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.ceil(A[0]))
    'ceil(A[0])'
    """
    return unary(UnaryKind.CEIL, x)


def round(x: ExprLike) -> Expr:  # noqa: A001 - the public name is pl.round
    """Round to the nearest integer, halves to even, as ``np.round``: ``pl.round(A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.round(A[0]))
    'round(A[0])'
    """
    return unary(UnaryKind.ROUND, x)


def isnan(x: ExprLike) -> Expr:
    """Is it NaN (a bool): ``pl.where(pl.isnan(A[i]), 0.0, A[i])``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> e = pl.where(pl.isnan(A[0]), 0.0, A[0])
    >>> str(e), str(pl.isnan(A[0]).dtype)
    ('where(isnan(A[0]), 0.0, A[0])', 'bool')
    """
    return unary(UnaryKind.ISNAN, x)


def pow(x: ExprLike, y: ExprLike) -> Expr:  # noqa: A001 - the public name is pl.pow
    """``x`` to the power ``y`` (C's pow; integers are computed in float64): ``pl.pow(A[i], 3)``,
    also spelled ``A[i] ** y``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> str(pl.pow(I[0], 3)), str(A[0] ** 2.0)
    ('pow(float64(I[0]), 3.0)', 'pow(A[0], 2.0)')
    """
    return binop(BinOpKind.POW, x, y)


def fmod(x: ExprLike, y: ExprLike) -> Expr:
    """The remainder of ``x / y`` with the sign of ``x`` (``np.fmod``; ``%`` follows the sign
    of ``y`` as Python does): ``pl.fmod(A[i], 3.0)``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.fmod(A[0], 3.0))
    'fmod(A[0], 3.0)'
    """
    return binop(BinOpKind.FMOD, x, y)


def abs(x: ExprLike) -> Expr:  # noqa: A001 - the public name is pl.abs
    """Absolute value: ``pl.abs(A[i])`` (keeps the dtype).

    >>> import polyloop as pl
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> str(pl.abs(I[0])), str(pl.abs(I[0]).dtype)
    ('abs(I[0])', 'int32')
    """
    return unary(UnaryKind.ABS, x)
