# SPDX-License-Identifier: Apache-2.0
"""Index arithmetic in one canonical form for floor division and modulo by a constant.

isl writes the indices of fused and split loops in forms such as
``yx0 - floor((12 * yx0 - yx1 + 27) / 28)`` and ``(-(12 * yx0) + yx1 + 588) mod 28``; both are
``floor(e / 28)`` and ``e mod 28`` of the one fused index ``e = 16 * yx0 + yx1``. Rewritten
with exact identities (for a constant ``c > 0`` and integers ``a``, ``b``, ``k``):

- ``a - floor(b / c) = floor((c * a - b + c - 1) / c)`` (a difference becomes one quotient);
- ``floor((b + c * k) / c) = k + floor(b / c)`` (multiples of ``c`` leave the quotient), so a
  numerator of non-negative coefficients keeps them, and its constant, in ``[0, c)``;
- ``(b + c * k) mod c = b mod c``: the same for a remainder.

so a quotient and a remainder of the same index look alike, which lets code generation see
that ``floor(e / 28) * 28 + e mod 28`` is ``e`` (a fused loop's accesses are contiguous) and
print both as plain C division when ``e`` is not negative.

>>> from polyloop.ir.expr import Var
>>> x = Var("x")
>>> str(canonical_divisions((x * 16 + 600) % 28))
'(16 * x + 12) % 28'
"""
from __future__ import annotations

from collections.abc import Sequence

from ..ir.dtypes import INDEX
from ..ir.expr import BinOp, BinOpKind, Const, Expr, Unary, UnaryKind, Var, binop, rewrite, walk
from ..ir.linear import SumRules, add_constant, add_term, read_sum
from ..ir.simplify import affine_form

Form = tuple[dict[str, int], int]
Division = tuple[BinOpKind, tuple[tuple[str, int], ...], int, int]   # op, numerator, constant, c


def canonical_divisions(e: Expr) -> Expr:
    """``e`` with every sum of variables and of floor divisions and remainders of affine
    expressions by positive constants in the canonical form (see the module docstring):
    numerators with coefficients and constant in ``[0, c)``, a quotient or remainder subtracted
    turned into one added; anything else unchanged."""
    return rewrite(e, _step)


def _step(e: Expr) -> Expr | None:
    if not (isinstance(e, (BinOp, Unary)) and e.dtype.is_int):
        return None
    if isinstance(e, BinOp) and e.op not in (BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL,
                                             BinOpKind.FLOORDIV, BinOpKind.MOD):
        return None
    if isinstance(e, Unary) and e.op is not UnaryKind.NEG:
        return None
    sum_ = _sum(e)
    if sum_ is None or not sum_[1]:
        return None
    linear, divisions = sum_
    out = _rebuild(linear, divisions, _vars(e))
    return None if str(out) == str(e) else out


def _sum(e: Expr) -> tuple[Form, dict[Division, int]] | None:
    """``e`` as an affine part plus canonical divisions times coefficients, or None."""
    return read_sum(e, _SUM)


def _affine(e: Expr) -> tuple[Form, dict[Division, int]] | None:
    """An affine subtree, read at once (its variables with their coefficients)."""
    f = affine_form(e)
    return None if f is None else (f, {})


def _division_atom(e: Expr) -> tuple[Form, dict[Division, int]] | None:
    """A floor division or remainder of an affine numerator by a positive constant."""
    if not isinstance(e, BinOp):
        return None
    c = _divisor(e)
    num = affine_form(e.lhs) if c else None
    if num is None:
        return None
    return _division(e.op, num, c, 1)


def _literal(e: Expr) -> int | None:
    return e.value if isinstance(e, Const) and isinstance(e.value, int) else None


def _division(op: BinOpKind, num: Form, c: int, m: int) -> tuple[Form, dict[Division, int]]:
    """``m * (num // c)`` or ``m * (num % c)`` with a canonical numerator."""
    if m == -1 and op is BinOpKind.FLOORDIV:     # -(b // c) = (c - 1 - b) // c
        return _division(op, _add(({}, c - 1), _scale(num, -1)), c, 1)
    if m == -1 and op is BinOpKind.MOD:          # -(b % c) = (c - 1 - b) % c - (c - 1)
        linear, divs = _division(op, _add(({}, c - 1), _scale(num, -1)), c, 1)
        return _add(linear, ({}, 1 - c)), divs
    whole = ({v: k // c for v, k in num[0].items() if k // c}, num[1] // c)
    rest = ({v: k % c for v, k in num[0].items() if k % c}, num[1] % c)
    if not rest[0]:         # every variable's coefficient is a multiple of c: no division
        if op is BinOpKind.FLOORDIV:
            return _scale(whole, m), {}
        return ({}, m * (num[1] % c)), {}
    key: Division = (op, tuple(sorted(rest[0].items())), rest[1], c)
    linear = _scale(whole, m) if op is BinOpKind.FLOORDIV else ({}, 0)
    return linear, {key: m}


def _scaled(s: tuple[Form, dict[Division, int]], k: int) -> tuple[Form, dict[Division, int]]:
    linear, divs = s
    out: tuple[Form, dict[Division, int]] = (_scale(linear, k), {})
    for d, m in divs.items():
        out = _plus(out, _division(d[0], (dict(d[1]), d[2]), d[3], m * k) if m * k == -1
                    else ((({}, 0)), {d: m * k}))
    return out


def _plus(a: tuple[Form, dict[Division, int]], b: tuple[Form, dict[Division, int]]
          ) -> tuple[Form, dict[Division, int]]:
    divs = dict(a[1])
    for d, m in b[1].items():
        divs[d] = divs.get(d, 0) + m
    return _add(a[0], b[0]), {d: m for d, m in divs.items() if m}


def _rebuild(linear: Form, divisions: dict[Division, int], names: dict[str, Var]) -> Expr:
    atoms = [(m, binop(op, _build((dict(num), const), names), Const(c, INDEX, True)))
             for (op, num, const, c), m in sorted(divisions.items(), key=str)]
    return _build(linear, names, atoms)


def _divisor(e: BinOp) -> int:
    if e.op not in (BinOpKind.FLOORDIV, BinOpKind.MOD):
        return 0
    r = e.rhs
    return int(r.value) if isinstance(r, Const) and isinstance(r.value, int) and r.value > 0 \
        else 0


def _scale(f: Form, k: int) -> Form:
    return {v: c * k for v, c in f[0].items() if c * k}, f[1] * k


def _add(a: Form, b: Form) -> Form:
    out = dict(a[0])
    for v, c in b[0].items():
        out[v] = out.get(v, 0) + c
    return {v: c for v, c in out.items() if c}, a[1] + b[1]


def _vars(e: Expr) -> dict[str, Var]:
    """The variables of ``e`` by name (a size parameter keeps its kind)."""
    return {n.name: n for n in walk(e) if isinstance(n, Var)}


def _build(f: Form, names: dict[str, Var], atoms: Sequence[tuple[int, Expr]] = ()) -> Expr:
    """The expression of an affine form, variables in order of name, then ``atoms`` (each
    with its coefficient), the constant last."""
    out: Expr | None = None
    for v in sorted(f[0]):
        out = add_term(out, f[0][v], names[v])
    for m, atom in atoms:
        out = add_term(out, m, atom)
    return add_constant(out, f[1])


_SUM: SumRules[tuple[Form, dict[Division, int]]] = SumRules(
    atom=_division_atom, scale=_scaled, plus=_plus, factor=_literal, whole=_affine)
