# SPDX-License-Identifier: Apache-2.0
"""Readable index arithmetic: fold affine sums (``n - 1 + 1`` -> ``n``) and push constants into
``min``/``max`` (``min(a, b) + 1`` -> ``min(a + 1, b + 1)``). Integer expressions only."""
from __future__ import annotations

from .expr import BinOp, BinOpKind, Const, Expr, Var, binop, free_vars, rewrite
from .linear import SumRules, add_constant, add_term, read_sum

Linear = tuple[dict[str, tuple[Expr, int]], int]   # atom key -> (atom, coefficient), constant


def _linear(e: Expr) -> Linear | None:
    return read_sum(e, _LINEAR)


def _atom(e: Expr) -> Linear:
    if isinstance(e, Const) and isinstance(e.value, int):
        return {}, e.value
    if isinstance(e, Var):
        return {e.name: (e, 1)}, 0
    # an opaque atom (floor division, min, load, ...), keyed by its text: two equal quotients
    # of a loop (``2 * (f // 14) - 2 * (f // 14)``) cancel
    return {f"#{e}": (e, 1)}, 0


def _factor(e: Expr) -> int | None:
    """The value of a side of a product that is a constant sum."""
    if isinstance(e, Const):        # the common sides, answered without reading a sum
        return e.value if e.dtype.is_int and isinstance(e.value, int) else None
    if isinstance(e, Var):
        return None
    lin = _linear(e)
    return lin[1] if lin is not None and not lin[0] else None


def _scale(x: Linear, k: int) -> Linear:
    return {key: (a, c * k) for key, (a, c) in x[0].items()}, x[1] * k


def _add(x: Linear, y: Linear) -> Linear:
    terms = dict(x[0])
    for key, (a, c) in y[0].items():
        terms[key] = (a, terms[key][1] + c) if key in terms else (a, c)
    return terms, x[1] + y[1]


def _from_linear(x: Linear) -> Expr:
    out: Expr | None = None
    for atom, c in x[0].values():
        if c != 0:
            out = add_term(out, c, atom)
    return add_constant(out, x[1])


_LINEAR: SumRules[Linear] = SumRules(atom=_atom, scale=_scale, plus=_add, factor=_factor)


def _step(e: Expr) -> Expr | None:
    if not e.dtype.is_int or not e.weak:
        return None
    if isinstance(e, BinOp) and e.op in (BinOpKind.ADD, BinOpKind.SUB):
        for mm, other, sign in ((e.lhs, e.rhs, 1), (e.rhs, e.lhs, -1 if e.op is BinOpKind.SUB else 1)):
            if isinstance(mm, BinOp) and mm.op in (BinOpKind.MIN, BinOpKind.MAX) \
                    and isinstance(other, Const) and sign == 1:
                k = other.value if (e.op is BinOpKind.ADD or mm is e.lhs) else None
                if k is None:
                    continue
                k = k if e.op is BinOpKind.ADD else -k
                return binop(mm.op, simplify(binop(BinOpKind.ADD, mm.lhs, k)),
                             simplify(binop(BinOpKind.ADD, mm.rhs, k)))
    lin = _linear(e)
    if lin is None:
        return None
    if len(lin[0]) == 1 and not lin[1]:
        atom, c = next(iter(lin[0].values()))
        if c == 1 and atom is e:     # an opaque atom alone: nothing to rewrite
            return None
    return _from_linear(lin)


def simplify(e: Expr) -> Expr:
    """Canonical, short form of an index expression."""
    if isinstance(e, (Const, Var)):   # most loop bounds and indices: nothing to rewrite
        return e
    if _DONE.get(id(e)) is e:         # a result simplified again (lowering's second pass)
        return e
    out = rewrite(e, _step)
    if len(_DONE) > 50_000:
        _DONE.clear()
    _DONE[id(out)] = out              # held, so that its id is not reused while remembered
    return out


# results of simplify (immutable, so a result stays simplified), by id
_DONE: dict[int, Expr] = {}


def linear_coefficient(e: Expr, var: str) -> int:
    """The coefficient of ``var`` in an affine integer expression (0 if absent or not affine)."""
    lin = _linear(e)
    if lin is None:
        return 0
    term = lin[0].get(var)
    return term[1] if term is not None and isinstance(term[0], Var) else 0


def affine_form(e: Expr) -> tuple[dict[str, int], int] | None:
    """``e`` as variable coefficients and a constant, or None when it is not an affine integer
    expression of variables (a floor division, a ``min`` or a load makes it opaque).

    >>> from polyloop.ir.expr import Var
    >>> affine_form(binop(BinOpKind.ADD, binop(BinOpKind.MUL, 4, Var("i")), 3))
    ({'i': 4}, 3)
    """
    lin = _linear(e)
    if lin is None or any(not isinstance(atom, Var) for atom, _ in lin[0].values()):
        return None
    return {key: c for key, (_, c) in lin[0].items()}, lin[1]


def split_terms(e: Expr, names: set[str]) -> tuple[Expr, Expr] | None:
    """``e`` as ``a + b`` where ``a`` mentions only the variables ``names`` (and constants
    folded into ``b``) and ``b`` none of them, or None when a term of the sum mixes both
    (``(i + j) // 4`` with ``names = {"j"}``).

    >>> from polyloop.ir.expr import Var
    >>> f, u = Var("f"), Var("u")
    >>> [str(x) for x in split_terms(2 * (f // 14) + u // 2 + 1, {"u"})]
    ['u // 2', '2 * (f // 14) + 1']
    """
    lin = _linear(e)
    if lin is None:
        return None
    mine: Linear = ({}, 0)
    rest: Linear = ({}, lin[1])
    for key, (atom, c) in lin[0].items():
        used = free_vars(atom)
        if used & names and used - names:
            return None
        side = mine if used & names else rest
        side[0][key] = (atom, c)
    return _from_linear(mine), _from_linear(rest)
