# SPDX-License-Identifier: Apache-2.0
"""Readable index arithmetic: fold affine sums (``n - 1 + 1`` -> ``n``) and push constants into
``min``/``max`` (``min(a, b) + 1`` -> ``min(a + 1, b + 1)``). Integer expressions only."""
from __future__ import annotations

from .dtypes import INDEX
from .expr import BinOp, BinOpKind, Const, Expr, Unary, UnaryKind, Var, binop, rewrite

Linear = tuple[dict[str, tuple[Expr, int]], int]   # atom key -> (atom, coefficient), constant


def _linear(e: Expr) -> Linear | None:
    if not e.dtype.is_int:
        return None
    if isinstance(e, Const) and isinstance(e.value, int):
        return {}, e.value
    if isinstance(e, Var):
        return {e.name: (e, 1)}, 0
    if isinstance(e, Unary) and e.op is UnaryKind.NEG:
        inner = _linear(e.operand)
        return None if inner is None else _scale(inner, -1)
    if isinstance(e, BinOp):
        if e.op in (BinOpKind.ADD, BinOpKind.SUB):
            a, b = _linear(e.lhs), _linear(e.rhs)
            if a is None or b is None:
                return None
            return _add(a, _scale(b, -1) if e.op is BinOpKind.SUB else b)
        if e.op is BinOpKind.MUL:
            a, b = _linear(e.lhs), _linear(e.rhs)
            if a is not None and b is not None:
                if not b[0]:
                    return _scale(a, b[1])
                if not a[0]:
                    return _scale(b, a[1])
            return None
    return {f"#{id(e)}": (e, 1)}, 0   # an opaque atom (floor division, min, load, ...)


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
        if c == 0:
            continue
        mag = abs(c)
        term = atom if mag == 1 else binop(BinOpKind.MUL, Const(mag, INDEX, True), atom)
        if out is None:
            out = term if c > 0 else Unary(UnaryKind.NEG, term, INDEX, True)
        else:
            out = binop(BinOpKind.ADD if c > 0 else BinOpKind.SUB, out, term)
    k = x[1]
    if out is None:
        return Const(k, INDEX, True)
    if k:
        out = binop(BinOpKind.ADD if k > 0 else BinOpKind.SUB, out, Const(abs(k), INDEX, True))
    return out


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
    if lin is None or (len(lin[0]) == 1 and next(iter(lin[0])).startswith("#") and not lin[1]):
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
