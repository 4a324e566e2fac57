# SPDX-License-Identifier: Apache-2.0
"""A loop whose one store selects on its own index is split where the condition changes.

A padding, written ``P[y, x] = where(1 <= x < w + 1 and 1 <= y < h + 1, X[y - 1, x - 1], 0)``,
is a select whose condition holds on one range of the innermost loop's index ``x`` (between
bounds that do not depend on ``x``), under a condition on the loops around it (``y``). The C
compiler vectorizes such a loop only by if-conversion into masked loads, which gcc is not
allowed to do for a guarded load (``codegen/guarded_loads.py``), so the copy stayed scalar,
one branch per element. Split at the bounds, the loop is three loops of straight stores — the
false value before the range, the true value in it, the false value after — and the condition
on the outer loops is one test around them:

    if 1 <= y < h + 1:
        for x in range(0, max(0, 1)):            P[y, x] = 0
        for x in range(1, w + 1):                P[y, x] = X[y - 1, x - 1]
        for x in range(w + 1, w + 2):            P[y, x] = 0
    else:
        for x in range(0, w + 2):                P[y, x] = 0

The same values are stored in the same order, and each value is still computed only where the
condition chooses it (a guarded load reads only where its guard holds). A bound of the range
is taken from a conjunct ``x + b OP c`` (``OP``: ``<``, ``<=``, ``>``, ``>=``) whose other terms
read no memory; the rest of the condition stays a select.

>>> from polyloop.ir.dtypes import DType
>>> from polyloop.ir.expr import BinOp, BinOpKind, Const, Load, Select, Var, const
>>> from polyloop.ir.loops import For, Store
>>> from polyloop.ir.printer import loops_to_str
>>> x, f32 = Var("x"), DType.FLOAT32
>>> inside = BinOp(BinOpKind.AND, x >= 1, x < 9, DType.BOOL)
>>> pad = Store("P", (x,), Select(inside, Load("X", (x - 1,), f32), Const(0.0, f32), f32))
>>> print(loops_to_str(split_guarded_loops(For("x", const(0), const(10), pad))))
x = 0
P[x] = 0.0
for x in range(1, 9):
    P[x] = X[x - 1]
x = 9
P[x] = 0.0
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.assumption import all_of, conjuncts
from ..ir.dtypes import INDEX
from ..ir.expr import BinOp, BinOpKind, Const, Expr, Load, Select, binop, walk
from ..ir.loops import Block, For, If, LoopKind, Node, Store, map_children
from ..ir.simplify import affine_form, simplify, split_terms
from ..ir.traverse import free_vars, same

_ORDER = (BinOpKind.LT, BinOpKind.LE, BinOpKind.GT, BinOpKind.GE)


def split_guarded_loops(node: Node) -> Node:
    """``node`` with every serial loop whose body is one store of a select on the loop's index
    split at the condition's bounds (see the module docstring)."""
    if isinstance(node, For) and node.kind is LoopKind.SERIAL and isinstance(node.body, Store):
        split = _split(node, node.body)
        if split is not None:
            return split
    return map_children(node, split_guarded_loops)


def _split(loop: For, store: Store) -> Node | None:
    value = store.value
    if not isinstance(value, Select) or loop.step != 1:
        return None
    lower: list[Expr] = []
    upper: list[Expr] = []
    outer: list[Expr] = []          # conjuncts free of the loop's index
    inner: list[Expr] = []          # conjuncts on it that give no bound
    for c in conjuncts(value.cond):
        bound = _bound(c, loop.var)
        if bound is not None:
            (lower if bound[0] else upper).append(bound[1])
        elif loop.var in free_vars(c) or _reads(c):
            inner.append(c)
        else:
            outer.append(c)
    if not lower and not upper:
        return None
    start = _minmax(BinOpKind.MIN, _extreme(BinOpKind.MAX, [loop.start, *lower]), loop.stop)
    stop = _minmax(BinOpKind.MAX, _extreme(BinOpKind.MIN, [loop.stop, *upper]), start)
    chosen = value.true_value if not inner else replace(value, cond=all_of(inner))
    pieces = Block(tuple(
        p for p in (replace(loop, stop=start, body=replace(store, value=value.false_value)),
                    replace(loop, start=start, stop=stop, body=replace(store, value=chosen)),
                    replace(loop, start=stop, body=replace(store, value=value.false_value)))
        if not _empty(p)))
    if not outer:
        return pieces
    return If(all_of(outer), pieces, replace(loop, body=replace(store, value=value.false_value)))


def _extreme(op: BinOpKind, values: list[Expr]) -> Expr:
    out = values[0]
    for v in values[1:]:
        out = _minmax(op, out, v)
    return out


def _minmax(op: BinOpKind, a: Expr, b: Expr) -> Expr:
    """``min(a, b)`` or ``max(a, b)``, one of them when they are constants or equal."""
    a, b = simplify(a), simplify(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return a if (a.value <= b.value) == (op is BinOpKind.MIN) else b
    if same(a, b):
        return a
    return simplify(binop(op, a, b))


def _reads(e: Expr) -> bool:
    return any(isinstance(n, Load) for n in walk(e))


def _bound(c: Expr, var: str) -> tuple[bool, Expr] | None:
    """``(True, b)`` when ``c`` says ``var >= b``, ``(False, b)`` when it says ``var < b``, for
    an integer comparison of ``var`` (coefficient 1 or -1) with terms that read no memory."""
    if not (isinstance(c, BinOp) and c.op in _ORDER and c.lhs.dtype.is_int
            and c.rhs.dtype.is_int) or _reads(c):
        return None
    parts = split_terms(binop(BinOpKind.SUB, c.lhs, c.rhs), {var})
    if parts is None:
        return None
    mine, rest = parts                       # c.lhs - c.rhs == mine + rest
    form = affine_form(mine)
    if form is None or form[1] != 0 or set(form[0]) != {var} or abs(form[0][var]) != 1:
        return None
    k = form[0][var]
    # d = k * var + rest compared with 0; strict comparisons move the bound by one
    shift = {BinOpKind.GE: 0, BinOpKind.GT: 1, BinOpKind.LE: 0, BinOpKind.LT: -1}[c.op]
    at_least = (c.op in (BinOpKind.GE, BinOpKind.GT)) == (k == 1)
    # k = 1:  var >= shift - rest (>=, >)   or var <= shift - rest (<=, <)
    # k = -1: var <= rest - shift (>=, >)   or var >= rest - shift (<=, <)
    edge = binop(BinOpKind.SUB, Const(shift, INDEX, True), rest) if k == 1 else \
        binop(BinOpKind.SUB, rest, Const(shift, INDEX, True))
    if at_least:
        return True, simplify(edge)
    return False, simplify(binop(BinOpKind.ADD, edge, Const(1, INDEX, True)))


def _empty(loop: For) -> bool:
    s, e = simplify(loop.start), simplify(loop.stop)
    return isinstance(s, Const) and isinstance(e, Const) and e.value <= s.value

