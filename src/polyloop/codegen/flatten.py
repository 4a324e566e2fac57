# SPDX-License-Identifier: Apache-2.0
"""Element addresses of fused loops without division: ``A[e // 28][e % 28]`` is ``A[0][e]``.

A loop made by ``fuse`` indexes a buffer through the quotient and the remainder of its fused
index by a dimension's size (``lower.strength`` writes both in one canonical form). Their
linear offset in the buffer, ``28 * (e // 28) + e % 28``, is ``e`` itself (an identity of floor
division), so the element's address is an offset from the start of the trailing dimensions that
needs no division at all, and is contiguous in the fused loop: C code indexes it so, and a
vectorized fused loop loads and stores whole vectors.

>>> from polyloop.ir.expr import Var, const
>>> e = Var("f") + Var("g") * 16
>>> k, offset = flat_offset((e // 28, e % 28 + 1), (const(28), const(28)))
>>> k, str(offset)
(0, 'f + 16 * g + 1')
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.dtypes import INDEX
from ..ir.expr import BinOp, BinOpKind, Const, Expr, Unary, UnaryKind, Var, binop, walk

# an atom of an index: ("var", name) or ("floordiv" | "mod", numerator form, divisor)
Atom = tuple
Form = dict[Atom, int]          # atom -> coefficient; () -> the constant


def flat_offset(indices: tuple[Expr, ...], shape: tuple[Expr, ...]
                ) -> tuple[int, Expr] | None:
    """``(k, offset)``: the element is ``offset`` elements after ``buffer[i0, .., i(k-1), 0,
    .., 0]``, with fewer divisions than the indices had; None when flattening removes none
    (or a dimension after ``k`` has no constant size)."""
    forms = [_form(i) for i in indices]
    for k in range(len(indices) - 1):
        tail = forms[k:]
        sizes = shape[k + 1:]
        if any(f is None for f in tail) or not all(isinstance(s, Const) for s in sizes):
            continue
        total: Form = {}
        stride = 1
        for f, size in zip(reversed(tail), reversed((None, *sizes))):
            total = _add(total, f, stride)          # type: ignore[arg-type]
            stride *= int(size.value) if size is not None else 1
        before = sum(1 for f in tail for a in f if a and a[0] != "var")   # type: ignore[union-attr]
        reduced = _cancel(total)
        after = sum(1 for a in reduced if a and a[0] != "var")
        if after < before:
            return k, _expr(reduced, indices)
    return None


def var_coefficient(e: Expr, var: str) -> int | None:
    """The coefficient of ``var`` in ``e``, a sum of variables and of quotients and remainders
    by constants that do not involve ``var``; None for anything else.

    >>> from polyloop.ir.expr import Var
    >>> var_coefficient(Var("j") + (Var("n") + 3) % 4 * 4, "j")
    1
    """
    f = _form(e)
    if f is None or any(a and a[0] != "var" and any(x == ("var", var) for x, _ in a[1])
                        for a in f):
        return None
    return f.get(("var", var), 0)


@dataclass(frozen=True, slots=True)
class Wrap:
    """An integer difference that depends on the loop variable ``j`` only as ``j`` itself and
    through the quotient and remainder of one index ``e = j + (terms without j)`` by a constant
    ``c``. At lane ``l`` of a vector that starts at ``j``, with ``r = c - e % c`` (where the
    remainder wraps): lanes ``l < r`` see ``d + step * l`` and lanes ``l >= r`` see
    ``d + jump + step * l``, ``d`` the difference at lane 0 (for ``c`` at least the lane count,
    the remainder wraps at most once in a vector)."""
    numerator: Expr
    divisor: int
    step: int
    jump: int


def wrap_of(e: Expr, var: str) -> Wrap | None:
    """The :class:`Wrap` of the integer difference ``e`` in ``var``, or None (no quotient or
    remainder of ``var``, or not of that form).

    >>> from polyloop.ir.expr import Var
    >>> w = wrap_of((Var("j") + 16) % 28 + 2, "j")
    >>> w.divisor, w.step, w.jump
    (28, 1, -28)
    """
    f = _form(e)
    if f is None:
        return None
    here = [a for a in f if a and a[0] != "var" and any(x == ("var", var) for x, _ in a[1])]
    keys = {(a[1], a[2]) for a in here}
    if len(keys) != 1:
        return None
    (key, c), = keys
    if dict(key).get(("var", var)) != 1:
        return None
    a = f.get(("floordiv", key, c), 0)
    b = f.get(("mod", key, c), 0)
    step = f.get(("var", var), 0) + b
    return Wrap(_to_expr(dict(key), {n.name: n for n in walk(e) if isinstance(n, Var)}), c,
                step, a - b * c)


def _form(e: Expr) -> Form | None:
    """``e`` as a sum of atoms times coefficients, or None if it is not one."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return {(): e.value}
    if isinstance(e, Var):
        return {("var", e.name): 1}
    if isinstance(e, Unary) and e.op is UnaryKind.NEG:
        inner = _form(e.operand)
        return None if inner is None else {a: -c for a, c in inner.items()}
    if not isinstance(e, BinOp):
        return None
    if e.op in (BinOpKind.ADD, BinOpKind.SUB):
        a, b = _form(e.lhs), _form(e.rhs)
        if a is None or b is None:
            return None
        return _add(a, b, -1 if e.op is BinOpKind.SUB else 1)
    if e.op is BinOpKind.MUL:
        a, b = _form(e.lhs), _form(e.rhs)
        if a is None or b is None:
            return None
        if set(b) <= {()}:
            return {x: c * b.get((), 0) for x, c in a.items()}
        if set(a) <= {()}:
            return {x: c * a.get((), 0) for x, c in b.items()}
        return None
    if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) and isinstance(e.rhs, Const) \
            and isinstance(e.rhs.value, int) and e.rhs.value > 0:
        num = _form(e.lhs)
        if num is None or any(a and a[0] != "var" for a in num):
            return None
        key = tuple(sorted((a, c) for a, c in num.items() if c))
        return {(e.op.name.lower(), key, e.rhs.value): 1}
    return None


def _add(a: Form, b: Form, scale: int) -> Form:
    out = dict(a)
    for x, c in b.items():
        out[x] = out.get(x, 0) + c * scale
    return {x: c for x, c in out.items() if c}


def _cancel(f: Form) -> Form:
    """Replace ``m * c * (e // c) + m * (e % c)`` by ``m * e`` wherever both terms are there."""
    out = dict(f)
    for atom, m in list(f.items()):
        if not atom or atom[0] != "mod":
            continue
        _, key, c = atom
        quotient = ("floordiv", key, c)
        if out.get(quotient) == m * c and out.get(atom) == m:
            del out[quotient], out[atom]
            out = _add(out, dict(key), m)
    return out


def _expr(f: Form, indices: tuple[Expr, ...]) -> Expr:
    """The expression of a form over the variables of ``indices``."""
    names = {n.name: n for i in indices for n in walk(i) if isinstance(n, Var)}
    return _to_expr(f, names)


def _to_expr(f: Form, names: dict[str, Var]) -> Expr:
    out: Expr | None = None
    for atom in sorted((a for a in f if a), key=str):
        k = f[atom]
        term = _atom_expr(atom, names)
        term = term if abs(k) == 1 else binop(BinOpKind.MUL, Const(abs(k), INDEX, True), term)
        if out is None:
            out = term if k > 0 else Unary(UnaryKind.NEG, term, INDEX, True)
        else:
            out = binop(BinOpKind.ADD if k > 0 else BinOpKind.SUB, out, term)
    const = f.get((), 0)
    if out is None:
        return Const(const, INDEX, True)
    if const:
        out = binop(BinOpKind.ADD if const > 0 else BinOpKind.SUB, out,
                    Const(abs(const), INDEX, True))
    return out


def _atom_expr(atom: Atom, names: dict[str, Var]) -> Expr:
    if atom[0] == "var":
        return names[atom[1]]
    _, key, c = atom
    return binop(BinOpKind.FLOORDIV if atom[0] == "floordiv" else BinOpKind.MOD,
                 _to_expr(dict(key), names), Const(c, INDEX, True))
