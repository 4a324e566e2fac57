# SPDX-License-Identifier: Apache-2.0
"""A reduction's initialisation written into its update's loops.

A schedule that leaves a reduction's initialisation in a nest of its own (the default schedule:
one nest per statement) makes the code write the whole output twice: zeros first, then the
sums. TVM (and a careful programmer) writes the zero right before the element's reduction, so
the accumulator starts in a register. This step does that to the loop tree it lowers, where it
is exact by construction:

- the initialisation's nest is a chain of plain loops (serial, no annotation), one per
  iterator, each the iterator itself, around the one statement ``C[i, j] = 0``;
- the next sibling nest runs the update of the same block: its outer loops are, in the same
  order, the iterators that index the element it updates (``C[i, j] += ...`` under
  ``for i: for j:``), and it holds nothing else;
- the update reads the buffer only at the element it writes.

Then the element an iteration initialises is the one its updates reduce into, and no other
statement runs between: the result is the same. The schedule the user printed is unchanged;
``mod.explain()`` says where an initialisation was moved.

>>> from polyloop.poly.tree import Root
>>> fuse_reduction_inits(None, Root()) == (Root(), ())
True
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Load, Var, loads
from ..ir.loops import LoopKind
from ..ir.program import Program, Statement
from ..poly.isl_text import iterator_expr
from ..poly.tree import LoopNode, Node, Root, StmtNode, statements_under


def fuse_reduction_inits(program: Program | None, root: Root) -> tuple[Root, tuple[str, ...]]:
    """``root`` with each initialisation nest that may be written into the next nest (see the
    module docstring) written there, and a note for each."""
    if program is None or len(root.children) < 2:
        return root, ()
    kids = list(root.children)
    out: list[Node] = []
    notes: list[str] = []
    k = 0
    while k < len(kids):
        merged = _merged(program, kids[k], kids[k + 1]) if k + 1 < len(kids) else None
        if merged is None:
            out.append(kids[k])
            k += 1
            continue
        out.append(merged)
        init = statements_under(kids[k])[0]
        notes.append(f"the initialisation {init} runs in the loops of its reduction, right "
                     "before the element's first update (its own nest would write the output "
                     "twice)")
        k += 2
    return Root(tuple(out)), tuple(notes)


def _chain(node: Node) -> tuple[list[LoopNode], Node]:
    """The loops of ``node`` while each has one child, and what the last one holds."""
    loops: list[LoopNode] = []
    while isinstance(node, LoopNode) and len(node.children) == 1:
        loops.append(node)
        node = node.children[0]
    if isinstance(node, LoopNode):
        loops.append(node)
    return loops, node


def _merged(program: Program, first: Node, second: Node) -> Node | None:
    if not isinstance(first, LoopNode) or not isinstance(second, LoopNode):
        return None
    init_loops, leaf = _chain(first)
    if not isinstance(leaf, StmtNode) or not isinstance(init_loops[-1].children[0], StmtNode):
        return None
    init = program.statement(leaf.statement)
    if not init.is_init or len(init_loops) != len(init.iters) or any(
            n.kind is not LoopKind.SERIAL or n.annotations or n.collapse is not None
            or n.thread is not None or n.expr(init.name) != iterator_expr(init.name, init.iters, it)
            for n, it in zip(init_loops, init.iters)):
        return None
    if [i.name if isinstance(i, Var) else None for i in init.indices] != list(init.iters):
        return None
    updates = [program.statement(s) for s in statements_under(second)]
    if len(updates) != 1 or updates[0].is_init or updates[0].block_name != init.block_name:
        return None
    update = updates[0]
    if not _update_matches(update, init):
        return None
    path: list[LoopNode] = []
    node: Node = second
    for it in update.indices:
        if not isinstance(node, LoopNode) or len(node.children) != 1 \
                or node.expr(update.name) != iterator_expr(update.name, update.iters,
                                                           it.name):  # type: ignore[union-attr]
            return None
        path.append(node)
        node = node.children[0]
    return _rebuilt(path, init_loops, init.name, node)


def _update_matches(update: Statement, init: Statement) -> bool:
    """Does ``update`` write ``init``'s buffer at plain iterators, one per dimension, and read
    that buffer only there?"""
    if update.buffer != init.buffer or update.reduction is None:
        return False
    if not all(isinstance(i, Var) and i.name in update.iters for i in update.indices):
        return False
    if len({i.name for i in update.indices}) != len(update.indices):   # type: ignore[union-attr]
        return False
    mine = [ld for ld in loads(update.value) if isinstance(ld, Load) and ld.buffer == update.buffer]
    return all(tuple(str(i) for i in ld.indices) == tuple(str(i) for i in update.indices)
               for ld in mine)


def _rebuilt(path: list[LoopNode], init_loops: list[LoopNode], init: str, body: Node) -> Node:
    """The update's loops with the initialisation's expressions added, and the
    initialisation first in the innermost of them."""
    inner: Node = replace(path[-1], exprs=path[-1].exprs + init_loops[-1].exprs,
                          children=(StmtNode(init), body))
    for n, i in zip(reversed(path[:-1]), reversed(init_loops[:-1])):
        inner = replace(n, exprs=n.exprs + i.exprs, children=(inner,))
    return inner
