# SPDX-License-Identifier: Apache-2.0
"""Edits of a loop tree (``poly.tree``) that the schedule primitives and lowering share: each
returns a new tree, the old one is unchanged.

>>> from polyloop.poly.tree import Root
>>> map_tree(Root(()), lambda n: n)
Root(children=())
"""
from __future__ import annotations

from dataclasses import replace

import islpy as isl

from .isl_util import map_in
from .loop_expr import LoopExpr
from .tree import Collapse, LoopNode, Node, Root, StmtNode


def replace_node(root: Root, loop_id: int, new: Node | tuple[Node, ...] | None) -> Root:
    """Replace the loop ``loop_id`` by ``new`` (a node, several siblings, or nothing)."""
    def go(kids: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for c in kids:
            if isinstance(c, LoopNode) and c.id == loop_id:
                if new is None:
                    continue
                out.extend(new if isinstance(new, tuple) else (new,))
            elif isinstance(c, LoopNode):
                out.append(c.with_children(go(c.children)))
            else:
                out.append(c)
        return tuple(out)
    return Root(go(root.children))


def map_tree(root: Root, fn) -> Root:
    """Rebuild the tree bottom-up; fn(node) returns a node, a tuple of nodes, or None to drop."""
    def go(kids: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for c in kids:
            if isinstance(c, LoopNode):
                c = c.with_children(go(c.children))
            r = fn(c)
            if r is None:
                continue
            out.extend(r if isinstance(r, tuple) else (r,))
        return tuple(out)
    return Root(go(root.children))


def remove_statements(root: Root, names: set[str]) -> Root:
    """Drop statements (and their expressions in loops); loops left empty disappear."""
    def fn(n: Node):
        if isinstance(n, StmtNode):
            return None if n.statement in names else n
        if not n.children:
            return None
        exprs = tuple((s, e) for s, e in n.exprs if s not in names)
        return replace(n, exprs=exprs)
    return map_tree(root, fn)


def insert_children(root: Root, parent_id: int | None, nodes: tuple[Node, ...], *,
                    index: int | None = None) -> Root:
    """Insert ``nodes`` among the children of loop ``parent_id`` (None: the root)."""
    if parent_id is None:
        kids = list(root.children)
        at = len(kids) if index is None else index
        return Root(tuple(kids[:at]) + nodes + tuple(kids[at:]))

    def fn(n: Node):
        if isinstance(n, LoopNode) and n.id == parent_id:
            kids = list(n.children)
            at = len(kids) if index is None else index
            return n.with_children(tuple(kids[:at]) + nodes + tuple(kids[at:]))
        return n
    return map_tree(root, fn)


def add_exprs(root: Root, additions: dict[int, tuple[tuple[str, str], ...]],
              parts: dict[int, dict[str, tuple[str, ...]]] | None = None, *,
              params: tuple[str, ...] | list[str] | None = None) -> Root:
    """Give loops expressions for statements newly placed below them. A fused loop built from
    its parts (``tree.Collapse``) stays so: a new statement's parts are those in ``parts``
    where given, else (with ``params``, the program's parameters) each part's value recovered
    from the statement's fused value with ``//`` and ``%``, as the code recovers them."""
    def fn(n: Node):
        if isinstance(n, LoopNode) and n.id in additions:
            new = replace(n, exprs=n.exprs + additions[n.id])
            known = (parts or {}).get(n.id, {})
            if n.collapse is None or not n.collapse.applies(n.exprs):
                return new
            if params is not None:
                known = {s: known.get(s) or decoded_parts(n.collapse, e, params)
                         for s, e in additions[n.id]}
            if all(s in known for s, _ in additions[n.id]):
                more = tuple((s, e, known[s]) for s, e in additions[n.id])
                new = replace(new, collapse=replace(n.collapse, parts=n.collapse.parts + more))
            return new
        return n
    return map_tree(root, fn)


def decoded_parts(collapse: Collapse, expr, params: tuple[str, ...] | list[str]
                  ) -> tuple[LoopExpr, ...]:
    """The parts' values of a fused loop whose value is ``expr`` (``S[...] -> [f]``): part
    ``k`` is ``f // stride_k % extent_k + lowest_k``, the strides those of the fusion.

    >>> from polyloop.poly.tree import Collapse
    >>> c = Collapse((), ((0, 2), (1, 3)))
    >>> for p in decoded_parts(c, LoopExpr("{ S[i] -> [(i)] }"), ()):
    ...     print(p)
    { S[i] -> [o0] : -2 + i <= 3o0 <= i }
    { S[i] -> [o0] : (-1 - i + o0) mod 3 = 0 and 0 < o0 <= 3 }
    """
    fused = map_in(params, expr)
    stride = 1
    for _, extent in collapse.ranges:
        stride *= extent
    out = []
    for k, (lo, extent) in enumerate(collapse.ranges):
        stride //= extent
        value = f"floor(f/{stride})" if k == 0 else f"(floor(f/{stride}) mod {extent})"
        decode = isl.Map(f"{{ [f] -> [{value} + {lo}] }}")
        out.append(LoopExpr.of(fused.apply_range(decode)))
    return tuple(out)
