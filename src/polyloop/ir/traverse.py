# SPDX-License-Identifier: Apache-2.0
"""Walking and rebuilding expression trees: children, walk, rewrite, substitute, same.

>>> from polyloop.ir.expr import Var
>>> i, j = Var("i"), Var("j")
>>> e = (i + 1) * j
>>> sorted(free_vars(e)), [type(n).__name__ for n in walk(e)][:2]
(['i', 'j'], ['BinOp', 'BinOp'])
>>> print(substitute(e, {"j": i}))
(i + 1) * i
>>> same(e, (i + 1) * j), same(e, (i + 2) * j)
(True, False)
"""
from __future__ import annotations

from dataclasses import fields
from typing import Callable, Iterator

from .nodes import Expr, Load, Var


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(t: type) -> tuple[str, ...]:
    """The field names of an expression class (``dataclasses.fields`` rebuilds its tuple on
    every call; traversals ask for it once per node)."""
    names = _FIELD_NAMES.get(t)
    if names is None:
        names = _FIELD_NAMES[t] = tuple(f.name for f in fields(t))
    return names


def children(e: Expr) -> list[Expr]:
    out: list[Expr] = []
    for name in _field_names(type(e)):
        v = getattr(e, name)
        if isinstance(v, Expr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, Expr))
    return out


def walk(e: Expr) -> Iterator[Expr]:
    """Every node of e, parents before children."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        kids = children(n)
        kids.reverse()
        stack.extend(kids)


def rewrite(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild e bottom-up; fn returns a replacement for a node or None to keep it."""
    def go(n: Expr) -> Expr:
        changes = {}
        names = _field_names(type(n))
        for name in names:
            v = getattr(n, name)
            if isinstance(v, Expr):
                nv = go(v)
                if nv is not v:
                    changes[name] = nv
            elif isinstance(v, tuple) and any(isinstance(x, Expr) for x in v):
                nt = tuple(go(x) if isinstance(x, Expr) else x for x in v)
                if any(a is not b for a, b in zip(nt, v)):
                    changes[name] = nt
        if changes:
            n = type(n)(**{k: changes.get(k, getattr(n, k)) for k in names})
        r = fn(n)
        return n if r is None else r
    return go(e)


def rewrite_topdown(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild e top-down: where fn returns a replacement, it is used as is (not descended)."""
    r = fn(e)
    if r is not None:
        return r
    changes = {}
    names = _field_names(type(e))
    for name in names:
        v = getattr(e, name)
        if isinstance(v, Expr):
            nv = rewrite_topdown(v, fn)
            if nv is not v:
                changes[name] = nv
        elif isinstance(v, tuple) and any(isinstance(x, Expr) for x in v):
            nt = tuple(rewrite_topdown(x, fn) if isinstance(x, Expr) else x for x in v)
            if any(a is not b for a, b in zip(nt, v)):
                changes[name] = nt
    if not changes:
        return e
    return type(e)(**{k: changes.get(k, getattr(e, k)) for k in names})


def substitute(e: Expr, mapping: dict[str, Expr]) -> Expr:
    """Replace variables by name."""
    def fn(n: Expr) -> Expr | None:
        if isinstance(n, Var) and n.name in mapping:
            return mapping[n.name]
        return None
    return rewrite(e, fn)


def free_vars(e: Expr) -> set[str]:
    return {n.name for n in walk(e) if isinstance(n, Var)}


def loads(e: Expr) -> list[Load]:
    return [n for n in walk(e) if isinstance(n, Load)]


def same(a: Expr, b: Expr) -> bool:
    """Structural equality."""
    if type(a) is not type(b):
        return False
    for name in _field_names(type(a)):
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, Expr):
            if not same(x, y):
                return False
        elif isinstance(x, tuple):
            if len(x) != len(y) or not all(
                    same(p, q) if isinstance(p, Expr) else p == q for p, q in zip(x, y)):
                return False
        elif x != y:
            return False
    return True
