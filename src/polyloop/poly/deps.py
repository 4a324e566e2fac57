# SPDX-License-Identifier: Apache-2.0
"""Exact dependences between statement instances.

Dependences are memory-based and exact: every pair of instances that touch the same element,
at least one of them writing, ordered by a reference schedule. Between two updates of one
reduction through its accumulator the dependence is marked ``reduction``: it may be reordered
(sums are treated as associative) but never run in parallel.
"""
from __future__ import annotations

import enum
import re
from collections import Counter
from dataclasses import dataclass

import islpy as isl

from ..ir.program import Program
from .access import Access, accesses
from .isl_util import point_values


class DepKind(enum.Enum):
    RAW = "RAW"   # flow: write, then read
    WAR = "WAR"   # anti: read, then write
    WAW = "WAW"   # output: write, then write


@dataclass(frozen=True, slots=True, eq=False)
class Dependence:
    kind: DepKind
    source: str
    sink: str
    buffer: str
    relation: isl.Map          # source[...] -> sink[...]
    reduction: bool = False

    @property
    def distance(self) -> tuple[int, ...] | None:
        """The constant distance vector (sink - source) when source and sink are one statement."""
        if self.source != self.sink:
            return None
        d = self.relation.deltas()
        if d.is_empty() or not d.is_singleton():
            return None
        if d.dim(isl.dim_type.param):
            d = d.project_out(isl.dim_type.param, 0, d.dim(isl.dim_type.param))
            if not d.is_singleton():
                return None
        return point_values(d.sample_point(), d.dim(isl.dim_type.set))

    def __str__(self) -> str:
        dist = self.distance
        tail = f" distance {dist}" if dist is not None else ""
        red = " (reduction)" if self.reduction else ""
        return (f"{self.kind.value} {self.source} -> {self.sink} on {self.buffer}{red}{tail}: "
                f"{relation_text(self.relation)}")


_PRIMED = re.compile(r"\b\w+' = ")


def relation_text(relation: isl.Map) -> str:
    """isl's text of a relation with the sink written as a function of the source, as in the
    polyhedral literature: ``{ S[i, j] -> S[i, 1 + j] : ... }`` (isl itself prints
    ``S[i' = i, j' = 1 + j]``)."""
    text = str(relation)
    arrow = text.find("->", text.find("{"))
    close = text.find("]", arrow)
    if text.find("{") < 0 or arrow < 0 or close < 0 or "'" in text[close:]:
        return text     # a primed name is still used in the constraints: keep isl's form
    return text[:arrow] + _PRIMED.sub("", text[arrow:close]) + text[close:]


class Dependences(tuple):
    """A tuple of Dependence with a readable text form."""

    def __str__(self) -> str:
        if not self:
            return "no dependences"
        return "\n".join(str(d) for d in self)

    def between(self, source: str, sink: str) -> list[Dependence]:
        return [d for d in self if d.source == source and d.sink == sink]


def _kind(a: Access, b: Access) -> DepKind:
    if a.is_write and b.is_write:
        return DepKind.WAW
    return DepKind.RAW if a.is_write else DepKind.WAR


def compute(program: Program, schedule: dict[str, isl.Map]) -> Dependences:
    """All dependences of ``program`` when its instances run in the order of ``schedule``.

    ``schedule`` maps each statement name to ``S[i, ...] -> [t0, t1, ...]`` (one common range
    space, lexicographic order).
    """
    acc = accesses(program)
    by_buffer: dict[str, list[Access]] = {}
    for a in acc:
        by_buffer.setdefault(a.buffer, []).append(a)
    found: dict[tuple, isl.Map] = {}
    index = {id(a): k for k, a in enumerate(acc)}
    orders: dict[tuple[str, str], isl.Map] = {}     # one lexicographic order per statement pair
    # the read and the write of an update (``acc[i] += ...``) are one relation: each pair of
    # relations is composed and ordered once, whatever the kinds of its accesses
    ordered: dict[tuple[int, int, str, str], isl.Map | None] = {}
    for buf, group in by_buffer.items():
        for a in group:
            for b in group:
                if not (a.is_write or b.is_write):
                    continue
                pair = (a.statement, b.statement)
                memo = (id(a.relation), id(b.relation)) + pair
                if memo not in ordered:
                    before = orders.get(pair)
                    if before is None:
                        before = orders[pair] = schedule[a.statement].lex_lt_map(
                            schedule[b.statement])
                    got = a.relation.apply_range(b.relation.reverse()).intersect(before)
                    ordered[memo] = None if got.is_empty() else got
                rel = ordered[memo]
                if rel is None:
                    continue
                red = (a.is_accumulator and b.is_accumulator and a.statement == b.statement)
                # one dependence per pair of accesses, so each has its own distance vector
                key = (_kind(a, b), a.statement, b.statement, buf, red, index[id(a)], index[id(b)])
                found[key] = found[key].union(rel).coalesce() if key in found else rel.coalesce()
    deps = [Dependence(k[0], k[1], k[2], k[3], rel, k[4]) for k, rel in found.items()]
    return _in_order(deps, program)


def _in_order(deps: list[Dependence], program: Program) -> Dependences:
    """By source, sink, buffer and kind in program order; dependences that tie on those by
    distance (computed only for them: a delta set each)."""
    order = {s.name: k for k, s in enumerate(program.statements)}

    def primary(d: Dependence) -> tuple:
        return (order[d.source], order[d.sink], d.buffer, d.kind.value)
    ties = Counter(primary(d) for d in deps)
    return Dependences(sorted(deps, key=lambda d: primary(d) + (
        (d.distance or ()) if ties[primary(d)] > 1 else (),)))


def direct(deps: Dependences, program: Program) -> Dependences:
    """Only the dependences no other write sits between (isl set arithmetic on the exact
    relations): a read's last writer (RAW), a write's previous write (WAW), the reads since the
    previous write (WAR). What a person means by "the value flows from S to T"; legality keeps
    using all of them."""
    out: list[Dependence] = []
    for buf in dict.fromkeys(d.buffer for d in deps):
        mine = [d for d in deps if d.buffer == buf]
        waw = _union_of([d for d in mine if d.kind is DepKind.WAW])
        for d in mine:
            if waw is None:
                out.append(d)
                continue
            rel = isl.UnionMap.from_map(d.relation)
            if d.kind is DepKind.RAW:
                between = waw.apply_range(_union_of([x for x in mine if x.kind is DepKind.RAW]))
            elif d.kind is DepKind.WAW:
                between = waw.apply_range(waw)
            else:
                between = _union_of([x for x in mine if x.kind is DepKind.WAR]).apply_range(waw)
            kept = rel.subtract(between)
            if kept.is_empty():
                continue
            m = isl.Map.from_union_map(kept.intersect(isl.UnionMap.from_map(d.relation)))
            out.append(Dependence(d.kind, d.source, d.sink, d.buffer, m.coalesce(), d.reduction))
    return _in_order(out, program)


def _union_of(deps: list[Dependence]) -> isl.UnionMap | None:
    u = None
    for d in deps:
        m = isl.UnionMap.from_map(d.relation)
        u = m if u is None else u.union(m)
    return u
