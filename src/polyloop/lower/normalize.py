# SPDX-License-Identifier: Apache-2.0
"""Loops counted from zero when they start where an enclosing loop says.

isl writes a loop placed inside a tile (``compute_at`` into the consumer's tile) over the
original index: ``for i in range(32 * i0, 32 * i0 + 32)``, and the accesses to a temporary
sized to the tile subtract the corner again: ``T[i - 32 * i0]``. A C compiler reads the first
as a loop of unknown trip count and the second as a varying index, so a register tile indexed
by it stays in memory: the loop is not unrolled (gcc does not see the two iterations of a
16-lane vector loop over 32 elements), and every multiply-add loads and stores its accumulator.
Written as TVM writes such loops, ``for i in range(32): ... T[i] ... A[32 * i0 + i]``, the trip
count is a constant and the temporary's index is the loop's.

This step rewrites ``for v in range(s, e)`` whose start ``s`` depends on an enclosing loop (and
is an affine expression: no ``min``/``max``, no data) as ``for v in range(0, e - s)`` with ``v``
replaced by ``v + s`` in its body: the same iterations in the same order.

>>> from polyloop.ir.expr import Var, const
>>> from polyloop.ir.loops import For, Store
>>> from polyloop.ir.printer import loops_to_str
>>> i0, i = Var("i0"), Var("i")
>>> inner = For("i", 32 * i0, 32 * i0 + 32, Store("T", (i - 32 * i0,), i0 + i))
>>> print(loops_to_str(normalize_loops(For("i0", const(0), const(8), inner))))
for i0 in range(8):
    for i in range(32):
        T[i] = 33 * i0 + i
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..ir.dtypes import INDEX
from ..ir.expr import BinOp, BinOpKind, Const, Expr, Load, Select, Var, binop, walk
from ..ir.loops import Block, Call, For, If, LoopKind, Node, Prefetch, Region, Store
from ..ir.simplify import simplify
from ..ir.traverse import free_vars, substitute


def normalize_loops(node: Node, outer: frozenset[str] = frozenset()) -> Node:
    """``node`` with every loop whose start depends on an enclosing loop counted from zero (see
    the module docstring); ``outer``: the loops around ``node``."""
    if isinstance(node, For):
        body = normalize_loops(node.body, outer | {node.var})
        if node.kind is LoopKind.THREAD or not _rebased(node.start, outer):
            return replace(node, body=body)
        shifted = simplify(binop(BinOpKind.ADD, Var(node.var, dtype=INDEX), node.start))
        body = map_node_exprs(body, lambda e: simplify(substitute(e, {node.var: shifted})))
        return replace(node, start=Const(0, INDEX, True),
                       stop=simplify(binop(BinOpKind.SUB, node.stop, node.start)), body=body)
    if isinstance(node, If):
        return If(node.cond, normalize_loops(node.then, outer),
                  None if node.otherwise is None else normalize_loops(node.otherwise, outer))
    if isinstance(node, Block):
        return Block(tuple(normalize_loops(c, outer) for c in node.body))
    return node


def _rebased(start: Expr, outer: frozenset[str]) -> bool:
    """Does ``start`` depend on an enclosing loop, as an affine expression?"""
    if not (free_vars(start) & outer):
        return False
    for e in walk(start):
        if isinstance(e, (Load, Select)):
            return False
        if isinstance(e, BinOp) and e.op in (BinOpKind.MIN, BinOpKind.MAX):
            return False
    return True


def map_node_exprs(node: Node, fn: Callable[[Expr], Expr]) -> Node:
    """``node`` with ``fn`` applied to every expression in it: loop bounds, conditions, stored
    indices and values, the operands of intrinsic calls and prefetches."""
    if isinstance(node, For):
        return replace(node, start=fn(node.start), stop=fn(node.stop),
                       body=map_node_exprs(node.body, fn))
    if isinstance(node, If):
        return If(fn(node.cond), map_node_exprs(node.then, fn),
                  None if node.otherwise is None else map_node_exprs(node.otherwise, fn))
    if isinstance(node, Block):
        return Block(tuple(map_node_exprs(c, fn) for c in node.body))
    if isinstance(node, Store):
        return replace(node, indices=tuple(fn(i) for i in node.indices), value=fn(node.value))
    if isinstance(node, Call):
        return replace(node, args=tuple(
            Region(a.buffer, tuple(fn(i) for i in a.indices)) if isinstance(a, Region)
            else fn(a) for a in node.args))
    if isinstance(node, Prefetch):
        return replace(node, indices=tuple(fn(i) for i in node.indices), count=fn(node.count))
    return node
