# SPDX-License-Identifier: Apache-2.0
"""A reduction's initialisation written into its update's loops.

A schedule that leaves a reduction's initialisation in a nest of its own (the default schedule:
one nest per statement) makes the code write the whole output twice: zeros first, then the
sums. TVM (and a careful programmer) writes the zero right before the element's reduction, so
the accumulator starts in a register. This step does that to the loop tree it lowers, where it
is exact by construction:

- the initialisation's nest is a chain of plain loops (serial, no annotation) around the one
  statement ``C[i, j] = 0``, written at its iterators;
- the next sibling nest runs the update of the same block, and no statement in it besides
  the update reads or writes the buffer (copies of other buffers may be there); the loops
  whose values depend only on the element it updates (``i``, ``j``, a tile of them, a fused
  and parallel ``b * C + c``: not on a reduction iterator) around the update are the loops the
  initialisation joins, right before the first loop that does (as ``decompose_reduction`` at
  that loop), or that carries an annotation (a tensorized loop stays one perfect nest);
- the update reads the buffer only at the element it writes.

Then each element is initialised in the iteration of those loops that reduces into it, before
its first update, and no other statement runs between: the result is the same (an element
with no update, an empty reduction, is still initialised: the loops run over the
initialisation's instances too). The schedule the user printed is unchanged;
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
from ..poly import affine
from ..poly.isl_text import instance_map, iterator_expr
from ..poly.loop_expr import LoopExpr
from ..poly.tree import LoopNode, Node, Root, StmtNode, loops, statements_under


def fuse_reduction_inits(program: Program | None, root: Root) -> tuple[Root, tuple[str, ...]]:
    """``root`` with each initialisation nest that may be written into the next nest (see the
    module docstring) written there, and a note for each."""
    if program is None or len(root.children) < 2:
        return root, ()
    kids = list(root.children)
    out: list[Node] = []
    notes: list[str] = []
    next_id = max((n.id for n in loops(root)), default=0) + 1
    k = 0
    while k < len(kids):
        merged = _merged(program, kids[k], kids[k + 1], next_id) if k + 1 < len(kids) else None
        if merged is None:
            out.append(kids[k])
            k += 1
            continue
        out.append(merged)
        next_id += 64       # the ids the initialisation's loops took, and room
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


def _merged(program: Program, first: Node, second: Node, next_id: int) -> Node | None:
    if not isinstance(first, LoopNode) or not isinstance(second, LoopNode):
        return None
    init_loops, leaf = _chain(first)
    if not isinstance(leaf, StmtNode) or any(
            n.kind is not LoopKind.SERIAL or n.annotations or n.collapse is not None
            or n.thread is not None for n in init_loops):
        return None
    init = program.statement(leaf.statement)
    if not init.is_init or \
            [i.name if isinstance(i, Var) else None for i in init.indices] != list(init.iters):
        return None
    under = [program.statement(s) for s in statements_under(second)]
    updates = [u for u in under if u.block_name == init.block_name]
    if len(updates) != 1 or updates[0].is_init or any(
            _touches(x, init.buffer) for x in under if x is not updates[0]):
        return None
    update = updates[0]
    if not _update_matches(update, init):
        return None
    path, joined = _spatial_path(program, second, update, init)
    if not path:
        return None
    nest: Node = StmtNode(init.name)
    for k, it in reversed(list(enumerate(init.iters))):
        nest = LoopNode(next_id + k, it, ((init.name, iterator_expr(init.name, init.iters, it)),),
                        (nest,))
    kids = path[-1].children
    at = next(k for k, c in enumerate(kids) if update.name in _names(c))
    inner: Node = replace(joined[-1], children=(*kids[:at], nest, *kids[at:]))
    for n in reversed(joined[:-1]):
        inner = replace(n, children=tuple(inner if update.name in _names(c) else c
                                          for c in n.children))
    return inner


def _names(node: Node) -> list[str]:
    return [node.statement] if isinstance(node, StmtNode) else statements_under(node)


def _touches(stmt: Statement, buffer: str) -> bool:
    return stmt.buffer == buffer or any(ld.buffer == buffer for ld in loads(stmt.value)) or \
        any(ld.buffer == buffer for i in stmt.indices for ld in loads(i))


def _spatial_path(program: Program, second: LoopNode, update: Statement, init: Statement
                  ) -> tuple[list[LoopNode], list[LoopNode]]:
    """The update's outer loops whose values depend on the element it updates only (not on a
    reduction iterator), and each of them running the initialisation of that element too."""
    spatial = [i.name for i in update.indices]   # type: ignore[union-attr]
    rename = dict(zip(spatial, init.iters))
    taken = set(init.iters)
    targets = []
    for it in update.iters:
        name = rename.get(it)
        if name is None:            # a reduction iterator: any value (the expression
            name = f"{it}_any"      # does not depend on it)
            while name in taken:
                name += "_"
            taken.add(name)
        targets.append(name)
    arg_map = instance_map(init.name, init.iters, update.name, targets)
    path: list[LoopNode] = []
    joined: list[LoopNode] = []
    node: Node = second
    while isinstance(node, LoopNode) and not node.annotations and \
            affine.depends_only_on(program, update.name, node.expr(update.name), spatial):
        moved = _joined(program, node, update.name, init, arg_map)
        if moved is None:
            break
        path.append(node)
        joined.append(moved)
        node = next(c for c in node.children if update.name in _names(c))
    return path, joined


def _joined(program: Program, node: LoopNode, update: str, init: Statement, arg_map: str
            ) -> LoopNode | None:
    """``node`` running the initialisation too (at the element its update reduces into), or
    None where that value is not a function of the element. A fused loop built from its parts
    (``Collapse``) gets the initialisation's parts as well: without them the loop would no
    longer be built from its parts, and isl's inverse of the fused value is a large piecewise
    function in every index of the nest."""
    def moved(e: LoopExpr) -> LoopExpr | None:
        out = affine.retarget(program, e, update, init.name, arg_map)
        ok = affine.depends_only_on(program, init.name, out, init.iters) and \
            affine.defined_everywhere(program, init.name, out)
        return out if ok else None
    e = moved(node.expr(update))
    if e is None:
        return None
    collapse = node.collapse
    if collapse is not None and collapse.applies(node.exprs):
        parts = [moved(p) for p in collapse.part_exprs(update)]
        if any(p is None for p in parts):
            return None
        collapse = replace(collapse, parts=collapse.parts + ((init.name, e, tuple(parts)),))
    return replace(node, exprs=node.exprs + ((init.name, e),), collapse=collapse)


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
