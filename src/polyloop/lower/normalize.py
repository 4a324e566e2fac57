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

from dataclasses import replace

from ..ir.dtypes import INDEX
from ..ir.expr import BinOp, BinOpKind, Const, Expr, Load, Select, Var, binop, walk
from ..ir.loops import Block, For, If, LoopKind, Node, map_exprs
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
        body = map_exprs(body, lambda e: simplify(substitute(e, {node.var: shifted})))
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
        if isinstance(e, BinOp) and e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) and \
                not isinstance(e.rhs, Const):       # a fused loop's recovered iterator
            return False
    return True
