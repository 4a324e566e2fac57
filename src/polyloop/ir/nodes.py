# SPDX-License-Identifier: Apache-2.0
"""Expression nodes: small frozen dataclasses with NumPy-style typing, the functions that
build them (constant folding, dtype promotion) and their one text form.

Nodes compare by identity (``==`` builds an ``EQ`` expression, as in every tensor DSL);
use :func:`polyloop.ir.traverse.same` for structural equality.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from ..errors import PolyloopError
from .dtypes import INDEX, DType, as_dtype, promote
from .kinds import BinOpKind, ReduceKind, UnaryKind, VarKind


ExprLike = Union["Expr", int, float, bool]


class Expr:
    """Base of all expression nodes. Subclasses are frozen, slotted dataclasses."""

    __slots__ = ()
    dtype: DType
    weak: bool

    # arithmetic ----------------------------------------------------------------------------
    def __add__(self, o: ExprLike) -> Expr: return binop(BinOpKind.ADD, self, o)
    def __radd__(self, o: ExprLike) -> Expr: return binop(BinOpKind.ADD, o, self)
    def __sub__(self, o: ExprLike) -> Expr: return binop(BinOpKind.SUB, self, o)
    def __rsub__(self, o: ExprLike) -> Expr: return binop(BinOpKind.SUB, o, self)
    def __mul__(self, o: ExprLike) -> Expr: return binop(BinOpKind.MUL, self, o)
    def __rmul__(self, o: ExprLike) -> Expr: return binop(BinOpKind.MUL, o, self)
    def __truediv__(self, o: ExprLike) -> Expr: return binop(BinOpKind.DIV, self, o)
    def __rtruediv__(self, o: ExprLike) -> Expr: return binop(BinOpKind.DIV, o, self)
    def __floordiv__(self, o: ExprLike) -> Expr: return binop(BinOpKind.FLOORDIV, self, o)
    def __rfloordiv__(self, o: ExprLike) -> Expr: return binop(BinOpKind.FLOORDIV, o, self)
    def __mod__(self, o: ExprLike) -> Expr: return binop(BinOpKind.MOD, self, o)
    def __rmod__(self, o: ExprLike) -> Expr: return binop(BinOpKind.MOD, o, self)
    def __pow__(self, o: ExprLike) -> Expr: return binop(BinOpKind.POW, self, o)
    def __rpow__(self, o: ExprLike) -> Expr: return binop(BinOpKind.POW, o, self)
    def __neg__(self) -> Expr: return unary(UnaryKind.NEG, self)
    def __pos__(self) -> Expr: return self

    # comparisons and logic -------------------------------------------------------------------
    def __lt__(self, o: ExprLike) -> Expr: return binop(BinOpKind.LT, self, o)
    def __le__(self, o: ExprLike) -> Expr: return binop(BinOpKind.LE, self, o)
    def __gt__(self, o: ExprLike) -> Expr: return binop(BinOpKind.GT, self, o)
    def __ge__(self, o: ExprLike) -> Expr: return binop(BinOpKind.GE, self, o)
    def __eq__(self, o: object) -> Expr: return binop(BinOpKind.EQ, self, o)  # type: ignore[override,arg-type]
    def __ne__(self, o: object) -> Expr: return binop(BinOpKind.NE, self, o)  # type: ignore[override,arg-type]
    def __and__(self, o: ExprLike) -> Expr: return binop(BinOpKind.AND, self, o)
    def __rand__(self, o: ExprLike) -> Expr: return binop(BinOpKind.AND, o, self)
    def __or__(self, o: ExprLike) -> Expr: return binop(BinOpKind.OR, self, o)
    def __ror__(self, o: ExprLike) -> Expr: return binop(BinOpKind.OR, o, self)
    def __invert__(self) -> Expr: return unary(UnaryKind.NOT, self)
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise PolyloopError(
            f"a symbolic expression has no truth value: {self}; use pl.where(cond, a, b) "
            "instead of Python's if/and/or, and & | ~ to combine conditions")

    def astype(self, dtype: object) -> Expr:
        """Cast to another dtype: ``A[i].astype("float64")``."""
        return cast(as_dtype(dtype), self)

    def __str__(self) -> str:
        return expr_to_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


_node = dataclass(frozen=True, slots=True, eq=False, repr=False)


@_node
class Const(Expr):
    value: int | float | bool
    dtype: DType
    weak: bool = False


@_node
class Var(Expr):
    """A loop iterator or a symbolic size parameter."""
    name: str
    kind: VarKind = VarKind.ITER
    dtype: DType = INDEX
    weak: bool = True


@_node
class Load(Expr):
    """``buffer[indices]``; the buffer is named, its dtype is the value's dtype."""
    buffer: str
    indices: tuple[Expr, ...]
    dtype: DType
    weak: bool = False


@_node
class BinOp(Expr):
    op: BinOpKind
    lhs: Expr
    rhs: Expr
    dtype: DType
    weak: bool = False


@_node
class Unary(Expr):
    op: UnaryKind
    operand: Expr
    dtype: DType
    weak: bool = False


@_node
class Cast(Expr):
    value: Expr
    dtype: DType
    weak: bool = False


@_node
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr
    dtype: DType
    weak: bool = False


@_node
class Reduce(Expr):
    """A reduction over ``axes`` (front-end only: lowering turns it into init + update)."""
    kind: ReduceKind
    source: Expr
    axes: tuple[Var, ...]
    starts: tuple[Expr, ...]
    extents: tuple[Expr, ...]
    dtype: DType
    weak: bool = False


# construction ---------------------------------------------------------------------------------

def const(value: int | float | bool, dtype: object | None = None) -> Const:
    """A typed constant: ``pl.const(0.5, "float32")``; without dtype it is weak like a Python number.

    >>> import polyloop as pl
    >>> c = pl.const(0.5, "float32")
    >>> c, str(c.dtype), c.weak
    (<Const 0.5>, 'float32', False)
    >>> pl.const(1).weak
    True
    """
    if isinstance(value, Expr):
        raise PolyloopError(f"const() takes a Python number, got expression {value}")
    if dtype is not None:
        d = as_dtype(dtype)
        return Const(_coerce(_python(value), d), d, weak=False)
    if isinstance(value, np.generic):  # a NumPy scalar has its own dtype, as in NEP 50
        d = as_dtype(value.dtype)
        return Const(_coerce(value.item(), d), d, weak=False)
    if isinstance(value, bool):
        return Const(value, DType.BOOL, weak=True)
    if isinstance(value, int):
        return Const(value, INDEX, weak=True)
    if isinstance(value, float):
        return Const(value, DType.FLOAT64, weak=True)
    raise PolyloopError(f"cannot use {value!r} of type {type(value).__name__} as a value")


def _python(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value


def _coerce(value: int | float | bool, d: DType) -> int | float | bool:
    """A number the user wrote, as a constant of dtype d: exact, or an error (as in NumPy)."""
    if d.is_float:
        return float(value)
    if d is DType.BOOL:
        return bool(value)
    if isinstance(value, float) and not value.is_integer():
        raise PolyloopError(f"constant {value} is not an integer, cannot be {d}")
    v = int(value)
    info = np.iinfo(d.numpy)
    if not info.min <= v <= info.max:
        raise PolyloopError(f"constant {v} does not fit in {d} (range {info.min} to {info.max}); "
                            f"cast the other operand to a wider type with .astype()")
    return v


def _convert(value: int | float | bool, d: DType) -> int | float | bool:
    """``.astype(d)`` of a constant, as C and NumPy convert: floats truncate toward zero,
    integers wrap around."""
    if d.is_float or d is DType.BOOL or isinstance(value, bool):
        return _coerce(value, d)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PolyloopError(f"cannot convert the constant {value} to {d}")
        value = math.trunc(value)
    bits = 8 * d.itemsize
    v = int(value) & ((1 << bits) - 1)
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def as_expr(value: ExprLike) -> Expr:
    if hasattr(value, "as_expr"):  # front-end objects that stand for an expression (reduce axes)
        return value.as_expr()  # type: ignore[union-attr]
    if isinstance(value, Expr):
        return value
    return const(value)  # type: ignore[arg-type]


def cast(dtype: DType, value: ExprLike) -> Expr:
    e = as_expr(value)
    if e.dtype is dtype:
        return Cast(e, dtype, weak=False) if e.weak and not isinstance(e, Var) else e
    if isinstance(e, Const):
        return Const(_convert(e.value, dtype), dtype, weak=False)
    return Cast(e, dtype, weak=False)


def _to(d: DType, weak: bool, e: Expr) -> Expr:
    """Bring operand e to dtype d (no-op when it already has it)."""
    if e.dtype is d:
        return e
    if isinstance(e, Const):
        return Const(_coerce(e.value, d), d, weak=weak)
    return Cast(e, d, weak=weak)


def binop(op: BinOpKind, a: ExprLike, b: ExprLike) -> Expr:
    lhs, rhs = as_expr(a), as_expr(b)
    if op.is_logical:
        for side in (lhs, rhs):
            if side.dtype is not DType.BOOL:
                raise PolyloopError(f"'{op.value}' combines conditions, got a {side.dtype} operand "
                                    f"{side}; compare it first (e.g. x > 0)")
        return BinOp(op, lhs, rhs, DType.BOOL, weak=lhs.weak and rhs.weak)
    d, weak = promote(lhs.dtype, lhs.weak, rhs.dtype, rhs.weak, what=f"'{op.value}'")
    if d is DType.BOOL and not op.is_comparison:
        raise PolyloopError(f"arithmetic '{op.value}' on booleans; cast with .astype() first")
    if op in _FLOAT_ONLY and not d.is_float:
        d = DType.FLOAT64
    lhs, rhs = _to(d, weak, lhs), _to(d, weak, rhs)
    folded = _fold(op, lhs, rhs, d, weak)
    if folded is not None:
        return folded
    return BinOp(op, lhs, rhs, DType.BOOL if op.is_comparison else d, weak=weak)


_FLOAT_ONLY = frozenset({BinOpKind.DIV, BinOpKind.POW, BinOpKind.FMOD})


def _fold(op: BinOpKind, lhs: Expr, rhs: Expr, d: DType, weak: bool) -> Expr | None:
    """Keep index arithmetic readable: x+0, x*1, 0*x and integer constants fold."""
    lc = lhs.value if isinstance(lhs, Const) else None
    rc = rhs.value if isinstance(rhs, Const) else None
    if not d.is_int:
        return None
    if lc is not None and rc is not None and op in _INT_FOLD:
        return Const(_INT_FOLD[op](lc, rc), d, weak=weak)
    if op is BinOpKind.ADD and rc == 0 or op is BinOpKind.SUB and rc == 0:
        return lhs
    if op is BinOpKind.ADD and lc == 0:
        return rhs
    if op is BinOpKind.MUL and rc == 1:
        return lhs
    if op is BinOpKind.MUL and lc == 1:
        return rhs
    return None


_INT_FOLD: dict[BinOpKind, Callable[[int, int], int]] = {
    BinOpKind.ADD: lambda a, b: a + b, BinOpKind.SUB: lambda a, b: a - b,
    BinOpKind.MUL: lambda a, b: a * b,
}


def unary(op: UnaryKind, a: ExprLike) -> Expr:
    e = as_expr(a)
    if op is UnaryKind.NOT:
        if e.dtype is not DType.BOOL:
            raise PolyloopError(f"'~' negates a condition, got a {e.dtype} operand {e}")
        return Unary(op, e, DType.BOOL, weak=e.weak)
    if op in (UnaryKind.NEG, UnaryKind.ABS):
        if isinstance(e, Const) and op is UnaryKind.NEG:
            return Const(-e.value, e.dtype, weak=e.weak)
        return Unary(op, e, e.dtype, weak=e.weak)
    d = e.dtype if e.dtype.is_float else DType.FLOAT64
    if op is UnaryKind.ISNAN:
        return Unary(op, _to(d, e.weak, e), DType.BOOL, weak=e.weak)
    return Unary(op, _to(d, e.weak, e), d, weak=e.weak)


def select(cond: ExprLike, a: ExprLike, b: ExprLike) -> Expr:
    c = as_expr(cond)
    if c.dtype is not DType.BOOL:
        raise PolyloopError(f"where() needs a condition, got {c.dtype} expression {c}")
    t, f = as_expr(a), as_expr(b)
    d, weak = promote(t.dtype, t.weak, f.dtype, f.weak, what="where()")
    return Select(c, _to(d, weak, t), _to(d, weak, f), d, weak=weak)


# traversal ------------------------------------------------------------------------------------



def reduce_identity(kind: ReduceKind, dtype: DType) -> Const:
    """The value a reduction starts from: 0 for sums, 1 for products, -inf/+inf (or the
    integer limits) for max/min."""
    if kind is ReduceKind.SUM:
        return const(0, dtype)
    if kind is ReduceKind.PROD:
        return const(1, dtype)
    if dtype.is_float:
        return const(float("-inf") if kind is ReduceKind.MAX else float("inf"), dtype)
    info = np.iinfo(dtype.numpy)
    return const(int(info.min) if kind is ReduceKind.MAX else int(info.max), dtype)


# The one text form of expressions (Python-like), used by str() and every printer.
# Python operator precedence, higher binds tighter. Conditions print with ``&`` and ``|``, as
# users write them, which bind tighter than comparisons: ``(x > 0) & (i < n)``.
_COMPARE = 4
_PREC = {
    BinOpKind.LT: _COMPARE, BinOpKind.LE: _COMPARE, BinOpKind.GT: _COMPARE,
    BinOpKind.GE: _COMPARE, BinOpKind.EQ: _COMPARE, BinOpKind.NE: _COMPARE,
    BinOpKind.OR: 5, BinOpKind.AND: 6, BinOpKind.ADD: 7, BinOpKind.SUB: 7,
    BinOpKind.MUL: 8, BinOpKind.DIV: 8, BinOpKind.FLOORDIV: 8, BinOpKind.MOD: 8,
}
_UNARY = 9


def expr_to_str(e: Expr, prec: int = 0) -> str:
    if isinstance(e, Const):
        if e.weak:
            return repr(e.value)
        return repr(e.value) if e.dtype.is_float or e.dtype.is_int else str(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Load):
        return f"{e.buffer}[{', '.join(expr_to_str(i) for i in e.indices)}]"
    if isinstance(e, BinOp):
        if e.op in (BinOpKind.MIN, BinOpKind.MAX, BinOpKind.POW, BinOpKind.FMOD):
            return f"{e.op.value}({expr_to_str(e.lhs)}, {expr_to_str(e.rhs)})"
        p = _PREC[e.op]
        sym = {BinOpKind.AND: "&", BinOpKind.OR: "|"}.get(e.op, e.op.value)
        left = p + 1 if p == _COMPARE else p    # Python chains a < b < c: never print one
        s = f"{expr_to_str(e.lhs, left)} {sym} {expr_to_str(e.rhs, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, Unary):
        if e.op is UnaryKind.NEG:
            return f"-{expr_to_str(e.operand, _UNARY)}"
        if e.op is UnaryKind.NOT:
            return f"~{expr_to_str(e.operand, _UNARY)}"
        return f"{e.op.value}({expr_to_str(e.operand)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_to_str(e.value)})"
    if isinstance(e, Select):
        return (f"where({expr_to_str(e.cond)}, {expr_to_str(e.true_value)}, "
                f"{expr_to_str(e.false_value)})")
    if isinstance(e, Reduce):
        return (f"{e.kind.value}({expr_to_str(e.source)}, axis=["
                f"{', '.join(a.name for a in e.axes)}])")
    render = getattr(e, "render_text", None)    # nodes defined above this module (extern calls)
    if render is not None:
        return render(expr_to_str)
    raise TypeError(f"unknown expression node {type(e).__name__}")
