# SPDX-License-Identifier: Apache-2.0
"""Lowering of ``Schedule.prefetch``: ``Prefetch`` nodes at the top of each hinted loop.

The region is computed from the final program and loop tree (``poly.prefetch_regions``) as a
function of the values of the loops around the hinted one. To know, in isl's AST, which ``for``
is which loop of the tree, the loops on the way to a hinted loop carry a marker annotation
through AST generation (``mark_paths``); ``apply_prefetch`` reads and removes the markers. A
hint that no longer applies (the block left the loop, a rewrite replaced the buffer, the loop
became vectorized, the loop looked ``along`` no longer encloses it) is kept as a comment that says so, never an error: a hint changes no result.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Expr, Var
from ..ir.loop_notes import NoteKey
from ..ir.loops import Block, For, Node, iter_nodes, map_children
from ..ir.program import BufferRole, MemScope, Program
from ..poly.prefetch_regions import Along, along_fits, prefetch_nest, statement_paths
from ..poly.tree import LoopNode, Root, loops, path_to, statements_under
from ..ir.loop_notes import PrefetchHint, PrefetchPath, SkippedPrefetch
from ..schedule.software_prefetch import ANNOTATION, hints_of
from ..poly.tree_edits import map_tree

MARKER = NoteKey.PREFETCH_LOOP


def mark_paths(root: Root) -> Root:
    """``root`` with every loop on the way to a hinted loop marked by its id (unchanged when
    no loop has a hint)."""
    wanted: set[int] = set()
    for n in loops(root):
        if hints_of(n):
            wanted |= {p.id for p in path_to(root, n.id) or []}
    if not wanted:
        return root

    def mark(n: object) -> object:
        if isinstance(n, LoopNode) and n.id in wanted:
            return replace(n, annotations=n.annotations + ((MARKER, PrefetchPath(n.id)),))
        return n
    return map_tree(root, mark)


def apply_prefetch(program: Program, root: Root, body: Node) -> Node:
    """``body`` with the prefetches of every hinted loop at the top of its body, and without
    the markers of ``mark_paths``."""
    hinted = {n.id: n for n in loops(root) if hints_of(n)}
    if not hinted:
        return body
    taken = {n.var for n in iter_nodes(body) if isinstance(n, For)}
    taken |= set(program.params) | {b.name for b in program.buffers}
    pass_ = _Pass(program, root, hinted, taken)
    return pass_.node(body, {})


class _Pass:
    def __init__(self, program: Program, root: Root, hinted: dict[int, LoopNode],
                 taken: set[str]):
        self.program, self.root, self.hinted, self.taken = program, root, hinted, taken

    def node(self, n: Node, values: dict[int, Expr]) -> Node:
        if not isinstance(n, For):
            return map_children(n, lambda c: self.node(c, values))
        marker = dict(n.annotations).get(MARKER)
        if not isinstance(marker, PrefetchPath):
            return map_children(n, lambda c: self.node(c, values))
        loop_id = marker.id
        inner = values | {loop_id: Var(n.var)}
        kept = tuple((k, v) for k, v in n.annotations if k != MARKER)
        body = self.node(n.body, inner)
        if loop_id not in self.hinted:
            return replace(n, body=body, annotations=kept)
        nests: list[Node] = []
        notes: dict[PrefetchHint, SkippedPrefetch] = {}
        for hint in hints_of(self.hinted[loop_id]):
            nest, why = self.nest(loop_id, hint, n, inner)
            if nest is not None:
                nests.append(nest)
            if why:
                notes[hint] = SkippedPrefetch(hint, why)
        ann = tuple((k, notes.get(v, v) if k == ANNOTATION else v) for k, v in kept)
        return replace(n, body=Block(tuple(nests) + (body,)) if nests else body,
                       annotations=ann)

    def nest(self, loop_id: int, hint: PrefetchHint, loop: For, values: dict[int, Expr]
             ) -> tuple[Node | None, str]:
        """The prefetch nest of one hint, or None and why not."""
        if loop.kind.value == "vectorized":
            return None, "the loop is vectorized"
        node = self.hinted[loop_id]
        path = path_to(self.root, loop_id) or []
        spec = None
        if hint.along is not None:
            ids = [p.id for p in path[:-1]]
            if hint.along.id not in ids:
                return None, f"loop '{hint.along.name}' no longer encloses this loop"
            index = ids.index(hint.along.id)
            stmts = _block_statements(self.program, path[index], hint.block)
            if not stmts:
                return None, f"block '{hint.block}' is no longer inside loop '{hint.along.name}'"
            here = tuple(s for s in statements_under(node)
                         if s in {st.name for st in self.program.statements})
            spec = Along(index, statement_paths(path[:index + 1], stmts), here)
            why = along_fits(self.program, path, spec, hint.buffer)
            if why:
                return None, why
        else:
            stmts = _block_statements(self.program, node, hint.block)
        if not stmts:
            return None, f"block '{hint.block}' is no longer inside this loop"
        used = {b for s in stmts for b in _buffers(self.program, s)}
        if hint.buffer not in used:
            return None, f"'{hint.block}' no longer accesses '{hint.buffer}' here"
        buf = self.program.buffer(hint.buffer)
        if buf.role is BufferRole.TEMP and buf.scope is not MemScope.GLOBAL:
            return None, f"'{hint.buffer}' is a {buf.scope.value} temporary"
        nest = prefetch_nest(self.program, path, stmts, hint.buffer, hint.distance, values,
                             self.taken, write=hint.write, locality=hint.locality, along=spec)
        for f in iter_nodes(nest) if nest is not None else ():
            if isinstance(f, For):
                self.taken.add(f.var)
        return nest, ""


def _block_statements(program: Program, node: LoopNode, block: str) -> list[str]:
    """The statements of ``block`` inside ``node`` (the program may differ from the one the
    hint was given on: lowering places temporaries first)."""
    return [s for s in statements_under(node)
            if s in {st.name for st in program.statements}
            and program.statement(s).block_name == block]


def _buffers(program: Program, stmt: str) -> set[str]:
    s = program.statement(stmt)
    return {s.buffer} | {ld.buffer for ld in s.reads()}
