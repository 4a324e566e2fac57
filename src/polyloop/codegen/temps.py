# SPDX-License-Identifier: Apache-2.0
"""Where temporaries are declared.

A temporary of scope LOCAL (registers, private memory) is private to one iteration of the
innermost loop that encloses all its accesses, typically the loop a stage was computed at:
declared in that loop's body, each OpenMP thread or GPU thread gets its own copy. Every other
temporary lives for the whole function.
"""
from __future__ import annotations

from typing import Iterator

from ..ir.expr import Expr, loads
from ..ir.loops import Block, For, If, Kernel, Node, Store
from ..ir.program import Buffer, MemScope


def local_temp_homes(kernel: Kernel) -> dict[int, list[Buffer]]:
    """LOCAL temporaries by ``id()`` of the loop whose body declares them.

    >>> from polyloop.ir.loops import Block
    >>> local_temp_homes(Kernel("k", (), (), (), Block(())))
    {}
    """
    local = {b.name: b for b in kernel.temps if b.scope is MemScope.LOCAL}
    paths: dict[str, tuple[For, ...]] = {}
    for path, name in _accesses(kernel.body, ()):
        if name in local:
            paths[name] = _common_prefix(paths[name], path) if name in paths else path
    homes: dict[int, list[Buffer]] = {}
    for b in kernel.temps:  # kernel order keeps the declarations deterministic
        path = paths.get(b.name, ())
        if b.name in local and path:
            homes.setdefault(id(path[-1]), []).append(b)
    return homes


def _accesses(node: Node, path: tuple[For, ...]) -> Iterator[tuple[tuple[For, ...], str]]:
    """(enclosing loops, buffer name) for every buffer a node reads or writes."""
    exprs: list[Expr] = []
    if isinstance(node, For):
        exprs = [node.start, node.stop]
        yield from _accesses(node.body, path + (node,))
    elif isinstance(node, If):
        exprs = [node.cond]
        yield from _accesses(node.then, path)
        if node.otherwise is not None:
            yield from _accesses(node.otherwise, path)
    elif isinstance(node, Block):
        for child in node.body:
            yield from _accesses(child, path)
    elif isinstance(node, Store):
        yield path, node.buffer
        exprs = [node.value, *node.indices]
    for e in exprs:
        for load in loads(e):
            yield path, load.buffer


def _common_prefix(a: tuple[For, ...], b: tuple[For, ...]) -> tuple[For, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] is b[n]:
        n += 1
    return a[:n]
