# SPDX-License-Identifier: Apache-2.0
"""An assumption about the size parameters, as a condition a call can check.

A program may state what its caller guarantees (``assert n >= 1`` in a script, ``pl.assume``,
``make_kernel(assumptions=...)``); the compiler relies on it (a loop known to run at least
once, an access known to stay in bounds), so a call that violates it is refused before the
kernel runs.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import PolyloopError
from .expr import BinOp, BinOpKind, Const, Expr, Unary, UnaryKind, Var, binop, walk
from .shapes import evaluate

_COMPARE = {
    BinOpKind.LT: lambda a, b: a < b,
    BinOpKind.LE: lambda a, b: a <= b,
    BinOpKind.GT: lambda a, b: a > b,
    BinOpKind.GE: lambda a, b: a >= b,
    BinOpKind.EQ: lambda a, b: a == b,
    BinOpKind.NE: lambda a, b: a != b,
}


@dataclass(frozen=True, slots=True)
class Assumption:
    """A condition on the size parameters that every call must satisfy.

    >>> from polyloop.ir.program import param
    >>> n = param("n")
    >>> a = Assumption(n >= 1)
    >>> a.holds({"n": 0}), a.params, str(a)
    (False, ('n',), 'n >= 1')

    ``reason`` says why the kernel needs it when polyloop derived it (an access that would
    leave its buffer otherwise); empty for an assumption the program states.
    """

    condition: Expr
    reason: str = ""

    @property
    def params(self) -> tuple[str, ...]:
        """The size parameters the condition reads, sorted."""
        return tuple(sorted({v.name for v in walk(self.condition) if isinstance(v, Var)}))

    def holds(self, env: Mapping[str, int]) -> bool:
        """Whether the condition is true for the size parameters bound by ``env``."""
        return truth(self.condition, env)

    def __str__(self) -> str:
        return condition_to_str(self.condition)


def truth(e: Expr, env: Mapping[str, int]) -> bool:
    """The value of condition ``e`` (comparisons of integer arithmetic, and, or, not)."""
    if isinstance(e, BinOp) and e.op in _COMPARE:
        return _COMPARE[e.op](evaluate(e.lhs, env), evaluate(e.rhs, env))
    if isinstance(e, BinOp) and e.op is BinOpKind.AND:
        return truth(e.lhs, env) and truth(e.rhs, env)
    if isinstance(e, BinOp) and e.op is BinOpKind.OR:
        return truth(e.lhs, env) or truth(e.rhs, env)
    if isinstance(e, Unary) and e.op is UnaryKind.NOT:
        return not truth(e.operand, env)
    if isinstance(e, Const):
        return bool(e.value)
    raise PolyloopError(f"assumption {e} is not a condition on the size parameters")


def conjuncts(e: Expr) -> list[Expr]:
    """The operands of a chain of ``and``, in order (``e`` itself when it is no ``and``)."""
    if isinstance(e, BinOp) and e.op is BinOpKind.AND:
        return conjuncts(e.lhs) + conjuncts(e.rhs)
    return [e]


def any_of(options: list[Expr]) -> Expr:
    """The conditions joined by ``or`` (the first one alone when there is one)."""
    return _joined(BinOpKind.OR, options)


def all_of(conditions: list[Expr]) -> Expr:
    """The conditions joined by ``and`` (the first one alone when there is one)."""
    return _joined(BinOpKind.AND, conditions)


def _joined(op: BinOpKind, terms: list[Expr]) -> Expr:
    out = terms[0]
    for t in terms[1:]:
        out = binop(op, out, t)
    return out


_WORDS = {BinOpKind.OR: ("or", 1), BinOpKind.AND: ("and", 2)}


def condition_to_str(e: Expr, prec: int = 0) -> str:
    """A condition as a sentence reads it: ``and``/``or``/``not`` as words, parentheses only
    where they change the meaning.

    >>> from polyloop.ir.program import param
    >>> n, m = param("n"), param("m")
    >>> condition_to_str(((n >= 1) | (m == 0)) & (n % 4 == 0))
    '(n >= 1 or m == 0) and n % 4 == 0'
    """
    if isinstance(e, BinOp) and e.op in _WORDS:
        word, p = _WORDS[e.op]
        text = f"{condition_to_str(e.lhs, p)} {word} {condition_to_str(e.rhs, p + 1)}"
        return f"({text})" if p < prec else text
    if isinstance(e, Unary) and e.op is UnaryKind.NOT:
        return f"not {condition_to_str(e.operand, 3)}"
    return str(e)
