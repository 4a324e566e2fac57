# SPDX-License-Identifier: Apache-2.0
"""Explicit barriers (``ir.barriers``) in the loop AST: ``Barrier`` nodes on GPU targets,
nothing on C (its statements run in order), and refused where a GPU could not honour them.

A work-group barrier must be reached by every work-item of the group the same number of
times: inside a work-item loop of the loop tree (whose iterations are the work-items) it
would be reached in divergent control flow, so that is refused naming the loop.
"""
from __future__ import annotations

from ..errors import BuildError
from ..ir.barriers import barrier_scope
from ..ir.loops import Barrier, Block, Node, Store, map_children
from ..ir.program import Program
from ..poly.gpu import is_item, statement_paths
from ..poly.tree import Root


def explicit_barriers(program: Program, root: Root, body: Node, *, gpu: bool) -> Node:
    """``body`` with each explicit barrier's store replaced (``gpu``) or dropped."""
    if gpu:
        _check_placement(program, root)

    def go(n: Node) -> Node:
        if isinstance(n, Store):
            scope = barrier_scope(n.buffer)
            if scope is None:
                return n
            return Barrier(scope.value) if gpu else Block(())
        return map_children(n, go)
    return go(body)


def merge_adjacent(body: Node) -> Node:
    """Two barriers in a row are one (an explicit barrier where the dependences placed one
    too): the one that also orders global memory is kept."""
    def go(n: Node) -> Node:
        n = map_children(n, go)
        if not isinstance(n, Block):
            return n
        out: list[Node] = []
        for c in n.body:
            if isinstance(c, Barrier) and out and isinstance(out[-1], Barrier):
                if c.scope == "global":
                    out[-1] = c
                continue
            out.append(c)
        return Block(tuple(out))
    return go(body)


def _check_placement(program: Program, root: Root) -> None:
    for stmt, path in statement_paths(root).items():
        if barrier_scope(program.statement(stmt).buffer) is None:
            continue
        item = next((n for n in path if is_item(n)), None)
        if item is not None:
            raise BuildError(f"barrier '{stmt}' is inside work-item loop '{item.name}' "
                             f"({item.thread}): the work-items of a group would reach it in "
                             "divergent control flow. Place it between the work-item loops: "
                             "give it inames= without that loop (and the loops inside it)")


__all__ = ["explicit_barriers", "merge_adjacent"]
