# SPDX-License-Identifier: Apache-2.0
"""Loops of symbolic extents fused in the code (``tree.SymbolicFuse``).

isl builds the nested loops (``for i in range(n): for j in range(m):``); this module makes
them one loop over the product of their extents, as TVM's fuse does, and recovers each
iterator with a quotient and a remainder::

    for (int64_t f = 0; f < n * m; f++) {
        const int64_t i = f / m;
        const int64_t j = f % m;
        ...

A split of the fused loop by ``F`` becomes ``for f_0 in range((n * m + F - 1) // F): for f_1
in range(min(F, n * m - F * f_0)): f = F * f_0 + f_1``. The loops keep the kinds the schedule
gave the fused loop (and, once split, its two parts).

Where isl did not write the loops as one perfect nest of rectangular loops (a loop of one
iteration it left out, a guard between them), they stay nested as isl wrote them: the same
instances in the same order, the outer one with the fused loop's kind (or its outer part's),
the innermost with the inner part's; the schedule allows each of those kinds on every one of
them (``schedule.symbolic_fuse``), so that is exact too.

>>> from polyloop.ir.expr import Var
>>> from polyloop.ir.loops import For, Store
>>> from polyloop.ir.printer import loops_to_str
>>> n, m = Var("n"), Var("m")
>>> nest = For("f", 0 * n, n, For("j", 0 * m, m, Store("B", (Var("f"), Var("j")), n * 1.0)))
>>> print(loops_to_str(collapse_nest(nest, 1, None, ("i", "j"))))
for f in range(n * m):
    i = f // m
    j = f % m
    B[i, j] = float64(n) * 1.0
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.dtypes import INDEX
from ..ir.expr import BinOpKind, Const, Expr, Var, binop, free_vars, substitute
from ..ir.loops import Block, For, LoopKind, Node, iter_nodes, map_exprs
from ..ir.simplify import simplify


def collapse_nest(outer: Node, inner_count: int, factor: int | None,
                  names: tuple[str, ...] = ()) -> Node:
    """The nest whose outermost loop is ``outer`` and whose next ``inner_count`` loops were
    fused with it, as one loop (split by ``factor`` when given); unchanged when isl did not
    write them as a perfect nest of rectangular loops (see the module docstring).

    Each fused loop's value is bound, inside the fused loop, by a loop of one iteration
    (``for i in range(f // m, f // m + 1)``, which C code prints as ``const int64_t i = f /
    m``), named ``names[k]`` when that name is free: the body keeps the indices isl wrote and
    proved in bounds."""
    chain = _chain(outer, inner_count)
    if chain is None:
        return _nested(outer, inner_count, factor)
    body = chain[-1].body
    extents = [simplify(binop(BinOpKind.SUB, f.stop, f.start)) for f in chain]
    total = extents[0]
    for e in extents[1:]:
        total = simplify(binop(BinOpKind.MUL, total, e))
    first, last = chain[0], chain[-1]
    fused: Expr = Var(first.var, dtype=INDEX)
    if factor is not None:
        fused = simplify(binop(BinOpKind.ADD, binop(BinOpKind.MUL, factor, fused),
                               Var(last.var, dtype=INDEX)))
    kept = {first.var, last.var} if factor is not None else {first.var}
    taken = (_used_names(body) - {f.var for f in chain}) | kept
    binders: list[tuple[str, Expr]] = []
    renames: dict[str, Expr] = {}
    stride: Expr = Const(1, INDEX, True)
    for k in range(len(chain) - 1, -1, -1):
        v = fused if k == len(chain) - 1 else binop(BinOpKind.FLOORDIV, fused, stride)
        if k > 0:
            v = binop(BinOpKind.MOD, v, extents[k])
        name = _fresh(names[k] if k < len(names) else chain[k].var + "_v", taken)
        binders.append((name, simplify(binop(BinOpKind.ADD, chain[k].start, v))))
        renames[chain[k].var] = Var(name, dtype=INDEX)
        stride = simplify(binop(BinOpKind.MUL, stride, extents[k]))
    body = map_exprs(body, lambda e: substitute(e, renames) if free_vars(e) & set(renames) else e)
    for name, value in binders:             # innermost first: the outer binders enclose
        body = For(name, value, simplify(binop(BinOpKind.ADD, value, 1)), body)
    zero = Const(0, INDEX, True)
    if factor is None:
        return replace(first, start=zero, stop=total, body=body)
    parts = total if factor == 1 else simplify(
        binop(BinOpKind.FLOORDIV, binop(BinOpKind.ADD, total, factor - 1), factor))
    rest = simplify(binop(BinOpKind.SUB, total, binop(BinOpKind.MUL, factor,
                                                       Var(first.var, dtype=INDEX))))
    inner = replace(last, start=zero, stop=binop(BinOpKind.MIN, Const(factor, INDEX, True), rest),
                    body=body)
    return replace(first, start=zero, stop=parts, body=inner)


def _used_names(node: Node) -> set[str]:
    found = {n.var for n in iter_nodes(node) if isinstance(n, For)}
    map_exprs(node, lambda e: found.update(free_vars(e)) or e)
    return found


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _chain(outer: Node, inner_count: int) -> list[For] | None:
    """``outer`` and the ``inner_count`` loops directly nested in it, when each is the only
    thing in the one around it and its bounds do not depend on the loops around it."""
    if not isinstance(outer, For):
        return None
    chain = [outer]
    for _ in range(inner_count):
        body = chain[-1].body
        if isinstance(body, Block) and len(body.body) == 1:
            body = body.body[0]
        if not isinstance(body, For) or body.step != 1 or chain[-1].step != 1:
            return None
        if (free_vars(body.start) | free_vars(body.stop)) & {f.var for f in chain}:
            return None
        chain.append(body)
    return chain


def _nested(outer: Node, inner_count: int, factor: int | None) -> Node:
    """The loops as isl wrote them. The outer one keeps the fused loop's kind (parallel or
    unrolled: allowed on it), unless that is vectorized, which only an innermost loop can be:
    it then runs serially (the innermost loop of a split keeps its own kind)."""
    if isinstance(outer, For) and outer.kind is LoopKind.VECTORIZED:
        return replace(outer, kind=LoopKind.SERIAL)
    return outer
