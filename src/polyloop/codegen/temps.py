# SPDX-License-Identifier: Apache-2.0
"""Where temporaries are declared.

A temporary of scope LOCAL (registers, private memory) is private to one iteration of the
innermost loop that encloses all its accesses and is its home loop or encloses it, typically
the loop a stage was computed at: declared in that loop's body, each OpenMP thread or GPU
thread gets its own copy. Every other
temporary lives for the whole function.
"""
from __future__ import annotations

from typing import Iterator

from ..ir.expr import Expr, loads
from ..ir.loops import Block, Call, For, If, Kernel, Node, Region, Store
from ..ir.program import Buffer, MemScope


def local_temp_homes(kernel: Kernel) -> dict[int, list[Buffer]]:
    """LOCAL temporaries by ``id()`` of the loop whose body declares them.

    >>> from polyloop.ir.loops import Block
    >>> local_temp_homes(Kernel("k", (), (), (), Block(())))
    {}
    """
    return temp_homes(kernel)[0]


def temp_homes(kernel: Kernel) -> tuple[dict[int, list[Buffer]], list[Buffer]]:
    """LOCAL temporaries by ``id()`` of the loops whose bodies declare them, and the
    temporaries declared at function scope (all others, and a LOCAL one with accesses outside
    every copy of its home loop: those see the function's declaration, the copies their own).

    When the accesses share no loop because isl's AST generation emitted the schedule's home
    loop as several loops (a parallel loop over the full tiles and a serial remainder, say),
    each copy declares the temporary: one declaration outside would be shared by the threads
    of a parallel copy. An iteration of the home loop lies wholly inside one copy, and no value
    flows between iterations, so the copies need not share it.

    >>> from polyloop.ir.loops import Block
    >>> temp_homes(Kernel("k", (), (), (), Block(())))
    ({}, [])
    """
    local = {b.name: b for b in kernel.temps if b.scope is MemScope.LOCAL}
    paths: dict[str, list[tuple[For, ...]]] = {}
    for path, name in _accesses(kernel.body, ()):
        if name in local:
            paths.setdefault(name, []).append(path)
    homes: dict[int, list[Buffer]] = {}
    function: list[Buffer] = []
    for b in kernel.temps:  # kernel order keeps the declarations deterministic
        loops_, outside = _declaring_loops(b, paths.get(b.name, [])) if b.name in local else \
            ([], True)
        for loop in loops_:
            homes.setdefault(id(loop), []).append(b)
        if outside:
            function.append(b)
    return homes, function


def _declaring_loops(b: Buffer, paths: list[tuple[For, ...]]) -> tuple[list[For], bool]:
    """(loops declaring ``b``, whether the function declares it too)."""
    if not paths:
        return [], True
    common = paths[0]
    for p in paths[1:]:
        common = _common_prefix(common, p)
    if b.home_loops and all(f.var != b.home for f in common):
        # the home loop is not one loop around every access: isl dropped it somewhere, or
        # emitted a loop toward it as several loops
        return _loops_toward_home(b, paths)
    if common:
        return [common[-1]], False
    copies: dict[int, For] = {}
    outside = False
    for p in paths:
        named = [f for f in p if f.var == b.home]
        if b.home is None or len(named) != 1:
            outside = True      # the home loop is not (or not surely) one loop of this path
        else:
            copies[id(named[0])] = named[0]
    return list(copies.values()), outside


def _loops_toward_home(b: Buffer, paths: list[tuple[For, ...]]) -> tuple[list[For], bool]:
    """The loops declaring ``b`` when its home loop is not one loop around every access.

    isl's AST generation drops a loop of one iteration, and may drop it in one copy of a nest
    only (the remainder of a split), and emits a loop as several loops over disjoint ranges (a
    parallel loop over the full tiles and a serial remainder). Accesses whose loops toward the
    home loop part, into different loops or into a loop and its dropped copy, lie in different
    iterations of the home loop (a loop toward the home loop encloses every access of one of
    its iterations): each part declares its own copy, the deepest loop toward the home loop
    they share, so the threads of a parallel part never share one. An access with no loop
    toward the home loop sees the function's copy."""
    towards = [_toward_home(p, b.home_loops) for p in paths]
    declaring: list[For] = []
    _split_toward_home([t for t in towards if t], 0, declaring)
    return declaring, any(not t for t in towards)


def _split_toward_home(towards: list[list[For]], level: int, declaring: list[For]) -> None:
    """Declaring loops for ``towards`` (non-empty lists of loops toward the home loop, the
    same ``level`` first ones in each), appended to ``declaring``: the last shared loop for
    the accesses that go no deeper, and each deeper loop's own for the others."""
    if level and any(len(t) == level for t in towards):
        declaring.append(towards[0][level - 1])
    parts: dict[int, list[list[For]]] = {}
    for t in towards:
        if len(t) > level:
            parts.setdefault(id(t[level]), []).append(t)
    for part in parts.values():
        _split_toward_home(part, level + 1, declaring)


def _toward_home(path: tuple[For, ...], home_loops: tuple[str, ...]) -> list[For]:
    """The loops of ``path`` that are loops down to the home loop: its leading loops named,
    in order, by ``home_loops`` (isl may have dropped some). A loop below them is not one,
    even when a loop of another statement gave it the same name as one of them."""
    found: list[For] = []
    at = 0
    for f in path:
        if f.var not in home_loops[at:]:
            break
        at = home_loops.index(f.var, at) + 1
        found.append(f)
    return found


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
    elif isinstance(node, Call):     # a tensorized nest: its operands are regions of buffers
        for arg in node.args:
            if isinstance(arg, Region):
                yield path, arg.buffer
                exprs.extend(arg.indices)
            else:
                exprs.append(arg)
    for e in exprs:
        for load in loads(e):
            yield path, load.buffer


def _common_prefix(a: tuple[For, ...], b: tuple[For, ...]) -> tuple[For, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] is b[n]:
        n += 1
    return a[:n]
