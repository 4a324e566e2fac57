# SPDX-License-Identifier: Apache-2.0
"""Exact footprints per loop level: for each loop of a scheduled program, how many distinct
elements of each buffer one iteration of its body touches, and how many statement instances
(and so how many flops) it runs, counted by isl for given sizes.

One iteration of a loop means the outer loops and the loop itself at fixed values. With
bounds that a tile does not divide, or a skewed loop, iterations differ; the count is the
larger of two iterations: the first and one in the middle of the range (fixing each loop
value in turn to the middle of what remains; the last is often a partial tile). The accesses
of the scheduled program are used, so a packed operand or a local tile shows up as the buffer
it is.

>>> import polyloop as pl
>>> from polyloop.poly.footprints import loop_footprints
>>> A = pl.placeholder((10, 6), name="A")
>>> B = pl.compute((10, 6), lambda i, j: A[i, j] * 2.0, name="B")
>>> sch = pl.Schedule(B)
>>> [(f.loop, f.elements) for f in loop_footprints(sch.program, sch.state.root, {})]
[('i', {'A': 6, 'B': 6}), ('j', {'A': 1, 'B': 1})]
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from ..ir.program import Program
from .access import accesses, domain
from .count import count_points, instance_flops
from .tree import LoopNode, Root, statement_time_map, statements_under


@dataclass(frozen=True, slots=True)
class LoopFootprint:
    """What one iteration of a loop touches and does (None: too irregular to count)."""
    loop: str
    depth: int
    loop_id: int                         # the loop node's id in the tree
    elements: dict[str, int | None]      # buffer -> distinct elements read or written
    instances: int | None                # statement instances run
    flops: int | None                    # their floating-point operations


def loop_footprints(program: Program, root: Root, sizes: Mapping[str, int],
                    max_loops: int | None = None) -> list[LoopFootprint]:
    """The footprint of one iteration of each loop of the tree ``root`` of ``program``
    (depth first, at most ``max_loops``), with the size parameters fixed to ``sizes`` (a
    parameter missing from ``sizes`` raises KeyError).

    >>> import polyloop as pl
    >>> A = pl.placeholder((8,), name="A")
    >>> sch = pl.Schedule(pl.compute((8,), lambda i: A[i] + 1.0, name="B"))
    >>> loop_footprints(sch.program, sch.state.root, {})[0].flops
    1
    """
    context = _Context(program, sizes)
    out: list[LoopFootprint] = []
    stack: list[tuple[LoopNode, tuple[LoopNode, ...]]] = [
        (c, (c,)) for c in reversed(root.children) if isinstance(c, LoopNode)]
    while stack and (max_loops is None or len(out) < max_loops):
        node, path = stack.pop()
        out.append(context.footprint(node, path))
        stack.extend((c, path + (c,)) for c in reversed(node.children)
                     if isinstance(c, LoopNode))
    return out


def cache_traffic(program: Program, root: Root, sizes: Mapping[str, int],
                  capacities: tuple[int, ...],
                  known: Sequence[LoopFootprint] = ()) -> list[float | None]:
    """Per cache capacity (bytes), an estimate of the bytes the scheduled program brings into
    a cache of that size: each loop nest is walked from the top down to the outermost loops
    whose one iteration touches at most the capacity, and each of those brings its footprint
    once per iteration (a whole nest that fits brings its footprint once). None when a count
    is not possible. ``known``: footprints already counted (``loop_footprints`` for the same
    program, tree and sizes), not counted again.

    >>> import polyloop as pl
    >>> A = pl.placeholder((64, 64), name="A")
    >>> sch = pl.Schedule(pl.compute((64, 64), lambda i, j: A[j, i] + 1.0, name="B"))
    >>> cache_traffic(sch.program, sch.state.root, {}, (1024, 1 << 20))
    [32768.0, 32768.0]
    """
    context = _Context(program, sizes)
    seen: dict[int, LoopFootprint] = {f.loop_id: f for f in known}
    out: list[float | None] = []
    for capacity in capacities:
        total: float | None = 0.0
        for node in [c for c in root.children if isinstance(c, LoopNode)]:
            moved = context.traffic(node, (node,), capacity, seen)
            total = None if moved is None or total is None else total + moved
        out.append(total)
    return out


class _Context:
    """The program's accesses and domains with the sizes fixed, read once."""

    def __init__(self, program: Program, sizes: Mapping[str, int]):
        self.program = program
        self.sizes = {p: int(sizes[p]) for p in program.params}
        self.domains: dict[str, isl.Set] = {}
        self.counts: dict[str, int | None] = {}      # statement -> its instances
        self.relations: dict[str, list[tuple[str, isl.Map]]] = {}
        for a in accesses(program):
            self.relations.setdefault(a.statement, []).append(
                (a.buffer, _fixed(a.relation, self.sizes)))

    def domain(self, stmt: str) -> isl.Set:
        got = self.domains.get(stmt)
        if got is None:
            got = self.domains[stmt] = _fixed(
                domain(self.program, self.program.statement(stmt)), self.sizes)
        return got

    def footprint(self, node: LoopNode, path: tuple[LoopNode, ...]) -> LoopFootprint:
        stmts = statements_under(node)
        times = {s: self._time_map(s, path) for s in stmts}
        prefixes = None
        for m in times.values():
            prefixes = m.range() if prefixes is None else prefixes.union(m.range())
        best: LoopFootprint | None = None
        for point in _sample_points(prefixes):
            fp = self._one_iteration(node, len(path) - 1, stmts, times, point)
            if best is None or _total(fp) > _total(best):
                best = fp
        return best or LoopFootprint(node.name, len(path) - 1, node.id, {}, 0, 0)

    def traffic(self, node: LoopNode, path: tuple[LoopNode, ...], capacity: int,
                seen: dict[int, LoopFootprint]) -> float | None:
        """The bytes brought into a cache of ``capacity`` bytes by the nest of ``node``."""
        if len(path) == 1:
            whole = self.whole(node)
            if whole is not None and whole <= capacity:
                return float(whole)
        fp = seen.get(node.id)
        if fp is None:
            fp = seen[node.id] = self.footprint(node, path)
        nbytes = self.nbytes(fp)
        inner = [c for c in node.children if isinstance(c, LoopNode)]
        if nbytes is not None and (nbytes <= capacity or not inner):
            total = self.instances(statements_under(node))
            if total is None or not fp.instances:
                return None
            return total / fp.instances * nbytes
        moved: float | None = 0.0
        for c in inner:
            m = self.traffic(c, path + (c,), capacity, seen)
            moved = None if m is None or moved is None else moved + m
        return moved

    def whole(self, node: LoopNode) -> int | None:
        """The bytes the whole nest of ``node`` touches."""
        regions: dict[str, isl.Set] = {}
        for s in statements_under(node):
            for buffer, rel in self.relations.get(s, []):
                r = rel.range()
                regions[buffer] = regions[buffer].union(r) if buffer in regions else r
        return self.nbytes(LoopFootprint(node.name, 0, node.id, {
            b: count_points(r) for b, r in regions.items()}, None, None))

    def nbytes(self, fp: LoopFootprint) -> int | None:
        if any(n is None for n in fp.elements.values()):
            return None
        return sum(n * self.program.buffer(b).dtype.itemsize for b, n in fp.elements.items())

    def instances(self, stmts: list[str]) -> int | None:
        total = 0
        for s in stmts:
            if s not in self.counts:
                self.counts[s] = count_points(self.domain(s))
            n = self.counts[s]
            if n is None:
                return None
            total += n
        return total

    def _time_map(self, stmt: str, path: tuple[LoopNode, ...]) -> isl.Map:
        s = self.program.statement(stmt)
        items = tuple(n.expr(stmt) for n in path)
        m = statement_time_map(tuple(self.program.params), stmt, s.iters, items)
        return _fixed(m, self.sizes).intersect_domain(self.domain(stmt))

    def _one_iteration(self, node: LoopNode, depth: int, stmts: list[str],
                       times: dict[str, isl.Map], point: isl.Set) -> LoopFootprint:
        regions: dict[str, isl.Set] = {}
        instances: int | None = 0
        flops: int | None = 0
        for s in stmts:
            inst = times[s].intersect_range(point).domain()
            n = count_points(inst)
            instances = None if n is None or instances is None else instances + n
            f = instance_flops(self.program.statement(s))
            flops = None if n is None or flops is None else flops + n * f
            for buffer, rel in self.relations.get(s, []):
                r = rel.intersect_domain(inst).range()
                regions[buffer] = regions[buffer].union(r) if buffer in regions else r
        elements = {b: count_points(r) for b, r in sorted(regions.items())}
        return LoopFootprint(node.name, depth, node.id, elements, instances, flops)


def _fixed(obj, sizes: Mapping[str, int]):
    """``obj`` (an isl set or map) with its parameters fixed to ``sizes`` and projected out."""
    for name, value in sizes.items():
        k = obj.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            obj = obj.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(obj.get_ctx(), value))
    return obj.project_out(isl.dim_type.param, 0, obj.dim(isl.dim_type.param))


def _sample_points(prefixes: isl.Set | None) -> list[isl.Set]:
    """The first and a middle point of the set of loop values (as one-point sets)."""
    if prefixes is None or prefixes.is_empty():
        return []
    prefixes = prefixes.coalesce()
    out = [prefixes.lexmin()]
    middle = prefixes
    for k in range(middle.dim(isl.dim_type.set)):
        lo, hi = middle.dim_min_val(k), middle.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return out
        mid = (lo.to_python() + hi.to_python()) // 2
        fixed = middle.fix_val(isl.dim_type.set, k, isl.Val.int_from_si(middle.get_ctx(), mid))
        middle = fixed if not fixed.is_empty() else middle.lexmin()
    out.append(middle.lexmin())
    return out


def _total(fp: LoopFootprint) -> int:
    return sum(v for v in fp.elements.values() if v is not None)


__all__ = ["LoopFootprint", "cache_traffic", "loop_footprints"]
