# SPDX-License-Identifier: Apache-2.0
"""Work-item guards sunk below the loops they enclose, in OpenCL kernels that synchronise.

PoCL, the OpenCL runtime for CPUs (what polyloop's OpenCL tests run on, and what a machine
without a GPU offers), runs a work-group as loops over its work-items between barriers. Its 3.x
releases mistranslate a branch on a work-item id that encloses a loop when the kernel also has
barriers: seen here, the stores of such a loop took values from another work-group's local
memory about once in a few hundred launches (only while work-groups ran concurrently), and a
variant of the same kernel crashed the process on every launch. The same kernels with the branch
moved into the loop bodies are correct in thousands of launches. So the OpenCL printer moves
it there::

    if (j < 16) {                      for (i = 0; i < 2; i++) {
        for (i = 0; i < 2; i++) {  ->      if (j < 16) {
            c[...] = acc[...];                 c[...] = acc[...];
        }                                  }
    }                                  }

The meaning is the same: a guard on ids is free of side effects, and the loops it passes
evaluate only their bounds, which never read memory (a bound that loads is left alone). The
work-items the guard excludes now run the (empty) loops; the loops are short tiles of a
work-group, so that costs little. On a GPU the two forms compile alike.

>>> from polyloop.ir.expr import Var, as_expr
>>> from polyloop.ir.loops import Barrier, Block, For, If, Kernel, LoopKind, Store
>>> from polyloop.ir.thread_axis import ThreadAxis
>>> j, i = Var("j"), Var("i")
>>> zero, two, lanes = as_expr(0), as_expr(2), as_expr(32)
>>> copy = If(j < 16, For("i", zero, two, Store("c", (i, j), j)))
>>> body = For("j", zero, lanes, Block((Barrier(), copy)), LoopKind.THREAD,
...            thread=ThreadAxis.THREAD_X)
>>> sunk = sink_item_guards(Kernel("k", (), (), (), body))
>>> inner = sunk.body.body.body[1]
>>> type(inner).__name__, type(inner.body).__name__
('For', 'If')
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Expr
from ..ir.loops import Barrier, Block, For, If, Kernel, LoopKind, Node, iter_nodes, map_children
from ..ir.thread_axis import AxisLevel
from ..ir.traverse import free_vars, loads


def sink_item_guards(kernel: Kernel) -> Kernel:
    """``kernel`` with every branch on a work-item id that encloses a loop (and no barrier)
    moved into that loop's body, when the kernel has a barrier; the same kernel otherwise."""
    nodes = list(iter_nodes(kernel.body))
    if not any(isinstance(n, Barrier) for n in nodes):
        return kernel
    items = {n.var for n in nodes if isinstance(n, For) and n.kind is LoopKind.THREAD
             and n.thread is not None and n.thread.level is AxisLevel.ITEM}

    def visit(n: Node) -> Node:
        n = map_children(n, visit)
        if (isinstance(n, If) and n.otherwise is None and free_vars(n.cond) & items
                and _sinkable(n.then)):
            return _sink(n.cond, n.then)
        return n

    body = visit(kernel.body)
    return replace(kernel, body=body)


def _sinkable(n: Node) -> bool:
    """A loop inside, no barrier, and no loop bound that reads memory (the guard may be what
    keeps that read in range)."""
    inside = list(iter_nodes(n))
    loops = [x for x in inside if isinstance(x, For)]
    return (bool(loops) and not any(isinstance(x, Barrier) for x in inside)
            and not any(loads(x.start) or loads(x.stop) for x in loops))


def _has_loop(n: Node) -> bool:
    return any(isinstance(x, For) for x in iter_nodes(n))


def _sink(cond: Expr, n: Node) -> Node:
    """``if (cond) n`` with the test at the statements: through loops, into both arms of an
    inner branch, and once around each run of loop-free items of a block."""
    if isinstance(n, For):
        return replace(n, body=_sink(cond, n.body))
    if isinstance(n, If) and _has_loop(n):
        return If(n.cond, _sink(cond, n.then),
                  None if n.otherwise is None else _sink(cond, n.otherwise))
    if isinstance(n, Block) and _has_loop(n):
        items: list[Node] = []
        run: list[Node] = []
        for c in n.body:
            if _has_loop(c):
                if run:
                    items.append(If(cond, run[0] if len(run) == 1 else Block(tuple(run))))
                    run = []
                items.append(_sink(cond, c))
            else:
                run.append(c)
        if run:
            items.append(If(cond, run[0] if len(run) == 1 else Block(tuple(run))))
        return Block(tuple(items))
    return If(cond, n)
