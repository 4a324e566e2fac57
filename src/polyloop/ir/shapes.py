# SPDX-License-Identifier: Apache-2.0
"""The value of a shape expression (integer arithmetic on size parameters), shared by the
runtime, the reference interpreter and the driver."""
from __future__ import annotations

from collections.abc import Mapping

from ..errors import PolyloopError
from .expr import BinOp, BinOpKind, Cast, Const, Expr, Unary, UnaryKind, Var, VarKind

_EVAL = {
    BinOpKind.ADD: lambda a, b: a + b,
    BinOpKind.SUB: lambda a, b: a - b,
    BinOpKind.MUL: lambda a, b: a * b,
    BinOpKind.FLOORDIV: lambda a, b: a // b,
    BinOpKind.MOD: lambda a, b: a % b,
    BinOpKind.MIN: min,
    BinOpKind.MAX: max,
}


def evaluate(e: Expr, env: Mapping[str, int]) -> int:
    """The integer value of shape expression ``e`` with size parameters bound by ``env``.

    Floor division and modulo follow Python (and polyloop) semantics.

    >>> from polyloop.ir.program import param
    >>> evaluate(2 * param("n") + 1, {"n": 5})
    11
    """
    if isinstance(e, Const):
        if isinstance(e.value, bool) or not isinstance(e.value, int):
            raise PolyloopError(f"shape dimension {e} is not an integer")
        return e.value
    if isinstance(e, Var):
        if e.kind is not VarKind.PARAM:
            raise PolyloopError(f"shape dimension uses loop iterator '{e.name}'; "
                                "a shape may only use size parameters")
        try:
            return env[e.name]
        except KeyError:
            raise PolyloopError(f"size parameter '{e.name}' is not bound") from None
    if isinstance(e, BinOp) and e.op in _EVAL:
        lhs, rhs = evaluate(e.lhs, env), evaluate(e.rhs, env)
        if rhs == 0 and e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
            raise PolyloopError(f"shape dimension {e} divides by zero")
        return _EVAL[e.op](lhs, rhs)
    if isinstance(e, Unary) and e.op is UnaryKind.NEG:
        return -evaluate(e.operand, env)
    if isinstance(e, Cast) and e.dtype.is_int:
        return evaluate(e.value, env)
    raise PolyloopError(f"shape dimension {e} is not integer arithmetic on size parameters "
                        "(allowed: + - * // % min max)")
