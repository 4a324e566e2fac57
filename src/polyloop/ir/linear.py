# SPDX-License-Identifier: Apache-2.0
"""Integer expressions read as sums of scaled parts, and sums written back as expressions.

One walker reads negations, sums, differences and products by a constant; what a part is, and
how parts scale and add, is the reader's choice (:mod:`polyloop.ir.simplify` keeps any other
node as an opaque atom; ``lower.strength`` reads floor divisions and remainders in a canonical
form). The writer prints a sum the way every index in generated code reads: terms in order,
the first negated with a minus, the constant last.

>>> from polyloop.ir.expr import Var
>>> rules = SumRules(atom=lambda e: {e.name: 1} if isinstance(e, Var) else None,
...                  scale=lambda t, k: {v: c * k for v, c in t.items()},
...                  plus=lambda a, b: {v: a.get(v, 0) + b.get(v, 0) for v in {**a, **b}},
...                  factor=lambda e: getattr(e, "value", None))
>>> i, j = Var("i"), Var("j")
>>> sorted(read_sum(3 * (i - j) + j, rules).items())
[('i', 3), ('j', -2)]
>>> print(add_constant(add_term(add_term(None, 3, i), -2, j), -1))
3 * i - 2 * j - 1
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from .dtypes import INDEX, DType
from .nodes import BinOp, Const, Expr, Unary, binop
from .kinds import BinOpKind, UnaryKind

T = TypeVar("T")
# the integer dtypes, asked once: the walk visits every node of every index expression
_INTEGER = frozenset(d for d in DType if d.is_int)


@dataclass(frozen=True, slots=True)
class SumRules(Generic[T]):
    """How one reader reads a sum: ``atom`` reads a node that is not a negation, sum,
    difference or product by a constant (None: the expression is no sum of this kind);
    ``factor`` is the constant of one side of a product, or None; ``whole``, when given, reads
    a node at once before the walk looks inside it (None: look inside)."""

    atom: Callable[[Expr], T | None]
    scale: Callable[[T, int], T]
    plus: Callable[[T, T], T]
    factor: Callable[[Expr], int | None]
    whole: Callable[[Expr], T | None] | None = None


def read_sum(e: Expr, rules: SumRules[T]) -> T | None:
    """``e`` read by ``rules`` (see :class:`SumRules`), or None when it is not integer or a part
    cannot be read."""
    if e.dtype not in _INTEGER:
        return None
    if rules.whole is not None:
        done = rules.whole(e)
        if done is not None:
            return done
    if isinstance(e, BinOp):
        op = e.op
        if op is BinOpKind.ADD or op is BinOpKind.SUB:
            a = read_sum(e.lhs, rules)
            b = read_sum(e.rhs, rules) if a is not None else None
            if b is None:
                return None
            return rules.plus(a, rules.scale(b, -1) if op is BinOpKind.SUB else b)
        if op is BinOpKind.MUL:
            for x, k in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                c = rules.factor(k)
                if c is not None:
                    inner = read_sum(x, rules)
                    return None if inner is None else rules.scale(inner, c)
            return None
    elif isinstance(e, Unary) and e.op is UnaryKind.NEG:
        inner = read_sum(e.operand, rules)
        return None if inner is None else rules.scale(inner, -1)
    return rules.atom(e)


def add_term(out: Expr | None, k: int, atom: Expr) -> Expr:
    """``out + k * atom`` with the sign in the operator (``out - 2 * a``); ``-atom`` or
    ``-(2 * a)`` when ``out`` is None."""
    term = atom if abs(k) == 1 else binop(BinOpKind.MUL, Const(abs(k), INDEX, True), atom)
    if out is None:
        return term if k > 0 else Unary(UnaryKind.NEG, term, INDEX, True)
    return binop(BinOpKind.ADD if k > 0 else BinOpKind.SUB, out, term)


def add_constant(out: Expr | None, k: int) -> Expr:
    """``out + k`` with the sign in the operator, ``out`` unchanged when ``k`` is 0; the
    constant alone when ``out`` is None."""
    if out is None:
        return Const(k, INDEX, True)
    if k:
        out = binop(BinOpKind.ADD if k > 0 else BinOpKind.SUB, out, Const(abs(k), INDEX, True))
    return out
