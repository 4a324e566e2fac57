# SPDX-License-Identifier: Apache-2.0
"""How a parallel loop runs on OpenMP threads: the ``#pragma omp parallel for`` of the C target.

Two choices are made from the loop alone, at every call with the sizes of that call:

* **too little work stays sequential.** Starting the threads of a parallel region and waiting
  for all of them costs microseconds, and much more when another process holds a core (the
  region ends only when its last thread has run). The pragma's ``if`` clause runs the loop on
  one thread unless its work (the statement instances it executes, estimated from the loop
  bounds with every inner loop at its middle iteration) reaches ``MIN_PARALLEL_WORK``.
* **triangles are balanced.** A loop the schedule marks ``balanced`` (``pl.auto_schedule``
  does where the extent of a loop inside depends on the parallel loop's variable, ``for j in
  range(i, n)``: equal numbers of iterations are unequal work) hands out iterations in chunks
  as threads become free (``schedule(dynamic)``), which also lets a running thread take over
  the chunks of one the operating system has descheduled. Another loop keeps
  ``schedule(static)``: each thread keeps its part of the data in its own cache from one
  region to the next (a time loop around a parallel sweep).

>>> from polyloop.ir.dtypes import INDEX
>>> from polyloop.ir.expr import Const, Var, VarKind
>>> from polyloop.ir.loops import For, Store
>>> n, i, j = Var("n", VarKind.PARAM), Var("i"), Var("j")
>>> body = For("j", i, n, Store("A", (i, j), Const(0.0, INDEX), None, "S"))
>>> str(work(For("i", Const(0, INDEX), n, body)))
'max(n, 0) * max(n - n // 2, 0)'
"""
from __future__ import annotations

from ..ir.dtypes import INDEX
from ..ir.expr import BinOpKind, Const, Expr, binop
from ..ir.loops import Block, For, If, Node
from ..ir.simplify import simplify
from ..ir.traverse import substitute

# statement instances below which a parallel loop runs on one thread (about the work of a few
# microseconds: the cost of waking the threads of a region and waiting for them)
MIN_PARALLEL_WORK = 1 << 15
# a balanced loop hands out about this many chunks per thread
CHUNKS_PER_THREAD = 8


def work(loop: For) -> Expr:
    """The statement instances one execution of ``loop`` runs, estimated: its trip count
    times the work of its body with its variable at the middle iteration."""
    return simplify(_work(loop))


def _zero() -> Expr:
    return Const(0, INDEX, weak=True)


def trip_count(loop: For) -> Expr:
    """How many times ``loop`` runs (0 when its range is empty)."""
    span = binop(BinOpKind.SUB, loop.stop, loop.start)
    if loop.step != 1:
        span = binop(BinOpKind.FLOORDIV, binop(BinOpKind.ADD, span, loop.step - 1), loop.step)
    return binop(BinOpKind.MAX, span, _zero())


def _work(node: Node) -> Expr:
    if isinstance(node, For):
        middle = binop(BinOpKind.FLOORDIV, binop(BinOpKind.ADD, node.start, node.stop), 2)
        inner = _work(_bind(node.body, node.var, middle))
        return binop(BinOpKind.MUL, trip_count(node), inner)
    if isinstance(node, Block):
        total: Expr = _zero()
        for child in node.body:
            total = binop(BinOpKind.ADD, total, _work(child))
        return total
    if isinstance(node, If):
        return _work(node.then)     # an estimate: the branch taken first (a full tile)
    return Const(1, INDEX, weak=True)


def _bind(node: Node, var: str, value: Expr) -> Node:
    """``node`` with the loop bounds below it read at ``var = value`` (only bounds matter)."""
    if isinstance(node, For):
        return For(node.var, substitute(node.start, {var: value}),
                   substitute(node.stop, {var: value}), _bind(node.body, var, value),
                   node.kind, node.step)
    if isinstance(node, Block):
        return Block(tuple(_bind(c, var, value) for c in node.body))
    if isinstance(node, If):
        return If(node.cond, _bind(node.then, var, value),
                  None if node.otherwise is None else _bind(node.otherwise, var, value))
    return node


def chunk(loop: For, threads: int) -> Expr:
    """Iterations per chunk of a balanced loop: ``CHUNKS_PER_THREAD`` chunks per thread."""
    return simplify(binop(BinOpKind.MAX, binop(BinOpKind.FLOORDIV, trip_count(loop),
                                              CHUNKS_PER_THREAD * threads),
                          Const(1, INDEX, weak=True)))
