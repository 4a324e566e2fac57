# SPDX-License-Identifier: Apache-2.0
"""Is a schedule legal? Every dependence must stay lexicographically positive, and a parallel
(or vector, or GPU-bound) loop must carry none. Failures come with a concrete witness."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import islpy as isl

from ..errors import BrokenDependence
from ..ir.program import Program
from .access import accesses
from .deps import Dependence, DepKind
from .tree import statement_time_map


@dataclass(frozen=True, slots=True)
class Violation:
    dependence: Dependence
    witness: isl.Map            # a single source -> sink instance pair (with parameter values)
    program: Program

    def describe(self) -> str:
        """``S(i=3, j=1) reads A[2, 1] written by S(i=2, j=1)``: one concrete broken instance."""
        d = self.dependence
        w = self.witness
        pt = w.wrap().sample_point()
        nin, nout = w.dim(isl.dim_type.in_), w.dim(isl.dim_type.out)
        vals = [pt.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(nin + nout)]
        src = self.program.statement(d.source)
        snk = self.program.statement(d.sink)
        a = _inst(src.name, src.iters, vals[:nin])
        b = _inst(snk.name, snk.iters, vals[nin:])
        elem = _element(self.program, d, src.name, vals[:nin])
        params = {w.get_dim_name(isl.dim_type.param, k):
                  pt.get_coordinate_val(isl.dim_type.param, k).to_python()
                  for k in range(w.dim(isl.dim_type.param))}
        where = (" (with " + ", ".join(f"{k}={v}" for k, v in params.items()) + ")") if params else ""
        verb = {DepKind.RAW: f"{b} reads {elem} written by {a}",
                DepKind.WAR: f"{b} overwrites {elem} read by {a}",
                DepKind.WAW: f"{b} overwrites {elem} written by {a}"}[d.kind]
        return verb + where

    def summary(self) -> str:
        d = self.dependence
        dist = d.distance
        text = f"the {d.kind.value} dependence {d.source} -> {d.sink} on buffer {d.buffer}"
        if dist is not None:
            text += f" (distance {dist})"
        if d.reduction:
            text += " between updates of a reduction"
        return text

    def __str__(self) -> str:
        return f"{self.summary()}; for instance {self.describe()}"

    def evidence(self) -> BrokenDependence:
        """The violation as data, for ``ScheduleError.dependence``."""
        d = self.dependence
        return BrokenDependence(kind=d.kind.value, source=d.source, sink=d.sink, buffer=d.buffer,
                                distance=d.distance, reduction=d.reduction,
                                example=self.describe())


def _inst(name: str, iters: tuple[str, ...], vals: list[int]) -> str:
    return f"{name}(" + ", ".join(f"{i}={v}" for i, v in zip(iters, vals)) + ")"


def _element(program: Program, dep: Dependence, stmt: str, vals: list[int]) -> str:
    for a in accesses(program):
        if a.statement == stmt and a.buffer == dep.buffer:
            rel = a.relation
            for k, v in enumerate(vals):
                rel = rel.fix_val(isl.dim_type.in_, k, v)
            rng = rel.range()
            if rng.is_empty():
                continue
            pt = rng.sample_point()
            idx = [pt.get_coordinate_val(isl.dim_type.set, k).to_python()
                   for k in range(rng.dim(isl.dim_type.set))]
            return f"{dep.buffer}[{', '.join(map(str, idx))}]"
    return dep.buffer


def time_map(program: Program, stmt: str, items: Sequence[int | str]) -> isl.Map:
    """``S[i, ...] -> [t0, t1, ...]`` from a statement's schedule items, outermost first: a
    sequence position (int) or a loop expression (isl map text), as in ``tree.flat_schedule``
    but not restricted to the statement's domain (cheaper to compose with dependences, which
    are). A prefix of the items gives the first dimensions of the flat schedule."""
    s = program.statement(stmt)
    return statement_time_map(tuple(program.params), s.name, tuple(s.iters), tuple(items))


def time_deltas(a: isl.Map, b: isl.Map, d: Dependence) -> isl.Set:
    """Sink time minus source time over the instance pairs of ``d``, with ``a`` and ``b`` the
    (possibly truncated) schedules of its source and sink: one vector per pair.

    Lexicographic order is translation invariant, so every question about the order of the
    two ends (reversed? carried at a loop?) is a question about this one set, which can be
    computed once and shared by all the loops checked against the same schedule prefix."""
    rel = d.relation.align_params(a.get_space()).align_params(b.get_space())
    return rel.apply_domain(a).apply_range(b).deltas()


def lex_negative(deltas: isl.Set, *, or_zero: bool) -> bool:
    """Is some delta lexicographically negative (or zero, with ``or_zero``)?"""
    minus_one = isl.Val.int_from_si(deltas.get_ctx(), -1)
    rest = deltas
    for k in range(deltas.dim(isl.dim_type.set)):
        if not rest.upper_bound_val(isl.dim_type.set, k, minus_one).is_empty():
            return True
        rest = rest.fix_val(isl.dim_type.set, k, 0)
    return or_zero and not rest.is_empty()


def verdicts(deltas: isl.Set, zero: Sequence[bool] = ()) -> tuple[bool, tuple[bool, ...]]:
    """Everything a schedule's time deltas of one dependence say, in one pass over the
    dimensions: is the order broken (some delta lexicographically negative or zero), and, per
    dimension, does a loop there carry the dependence (some pair agrees on the dimensions
    before it and differs at it)? Same answers as ``lex_negative(deltas, or_zero=True)`` and
    ``carries(deltas, p)`` for every ``p``, from one small set.

    ``zero[k]`` says that dimension ``k`` is known to be 0 in every delta (the same sequence
    position at both ends): nothing to ask isl there.

    >>> verdicts(isl.Set("{ [d0, d1] : d0 = 0 and 1 <= d1 <= 3 }"))
    (False, (False, True))
    """
    ctx = deltas.get_ctx()
    minus_one, one = isl.Val.int_from_si(ctx, -1), isl.Val.int_from_si(ctx, 1)
    t = isl.dim_type.set
    n = deltas.dim(t)
    broken = False
    carried: list[bool] = []
    rest = deltas
    for k in range(n):
        if k < len(zero) and zero[k]:
            carried.append(False)
            continue
        if rest.is_empty():
            return broken, tuple(carried) + (False,) * (n - k)
        negative = not rest.upper_bound_val(t, k, minus_one).is_empty()
        broken = broken or negative
        carried.append(negative or not rest.lower_bound_val(t, k, one).is_empty())
        rest = rest.fix_val(t, k, 0)
    return broken or not rest.is_empty(), tuple(carried)


def carries(deltas: isl.Set, position: int) -> bool:
    """Do some pairs agree on the time dimensions before ``position`` and differ at it?"""
    ctx = deltas.get_ctx()
    same = deltas
    for k in range(position):
        same = same.fix_val(isl.dim_type.set, k, 0)
    if same.is_empty():
        return False
    t = isl.dim_type.set
    return not (same.lower_bound_val(t, position, isl.Val.int_from_si(ctx, 1)).is_empty()
                and same.upper_bound_val(t, position, isl.Val.int_from_si(ctx, -1)).is_empty())


def breaks(d: Dependence, items_a: Sequence[int | str], items_b: Sequence[int | str],
           deltas: Callable[[int], isl.Set]) -> bool:
    """Does the schedule (source items ``items_a``, sink items ``items_b``) run some pair of
    ``d`` in the wrong order or at once? ``deltas(m)`` gives the time deltas of the first
    ``m`` schedule dimensions. Where the two ends first sit at different positions of one
    sequence, only the dimensions before it are needed (none, when that is the outermost)."""
    for p, (x, y) in enumerate(zip(items_a, items_b)):
        if isinstance(x, int) and isinstance(y, int) and x != y:
            if p == 0:
                return y < x
            return lex_negative(deltas(p), or_zero=y < x)
    return lex_negative(deltas(len(items_a)), or_zero=True)


def check_order(program: Program, deps: tuple[Dependence, ...],
                schedule: Mapping[str, isl.Map],
                broken: Callable[[int, Dependence], bool] | None = None) -> Violation | None:
    """The first dependence (other than reduction updates) that ``schedule`` reverses or breaks.
    ``broken(k, d)`` decides it for ``d = deps[k]`` (e.g. from cached deltas); ``schedule``
    is then read only to describe a violation."""
    for k, d in enumerate(deps):
        if d.reduction:
            continue
        # ``schedule`` may be computed lazily: read it only when it is needed
        bad = (broken(k, d) if broken is not None
               else lex_negative(time_deltas(schedule[d.source], schedule[d.sink], d),
                                 or_zero=True))
        if bad:
            a, b = schedule[d.source], schedule[d.sink]
            return Violation(d, d.relation.intersect(a.lex_ge_map(b)), program)
    return None


def carried_at(schedule: Mapping[str, isl.Map], d: Dependence, position: int) -> isl.Map:
    """The part of d whose instances agree on schedule dims < position and differ at it."""
    a, b = schedule[d.source], schedule[d.sink]
    n = a.dim(isl.dim_type.out)
    space = isl.Space.alloc(a.get_ctx(), 0, n, n)
    rel = isl.Map.universe(space)
    for k in range(position):
        rel = rel.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    same = rel.equate(isl.dim_type.in_, position, isl.dim_type.out, position)
    differ = rel.subtract(same)
    differ = differ.align_params(a.get_space()).align_params(b.get_space())
    pairs = a.apply_range(differ).apply_range(b.reverse())
    return d.relation.intersect(pairs.align_params(d.relation.get_space()))


def check_parallel(program: Program, deps: tuple[Dependence, ...],
                   schedule: Mapping[str, isl.Map], statements: set[str], position: int,
                   carried: Callable[[int, Dependence], bool] | None = None
                   ) -> Violation | None:
    """The first dependence among ``statements`` carried by the loop at flat ``position``
    (``carried(k, d)`` decides it for ``d = deps[k]``, as ``broken`` for ``check_order``)."""
    for k, d in enumerate(deps):
        if d.source not in statements or d.sink not in statements:
            continue
        bad = (carried(k, d) if carried is not None else
               carries(time_deltas(schedule[d.source], schedule[d.sink], d), position))
        if bad:
            return Violation(d, carried_at(schedule, d, position), program)
    return None


def move_hazard(program: Program, deps: tuple[Dependence, ...], schedule: Mapping[str, isl.Map],
                mover: str, anchor: str, buffer: str, *, later: bool) -> Violation | None:
    """Would re-executing ``mover`` at the time of ``anchor`` (its consumer when ``later``, its
    producer otherwise, linked through ``buffer``) change what it reads or what others see?"""
    link = [d for d in deps if d.kind is DepKind.RAW and d.buffer == buffer
            and ((d.source, d.sink) == ((mover, anchor) if later else (anchor, mover)))]
    if not link:
        return None
    corr = link[0].relation
    for d in link[1:]:
        corr = corr.union(d.relation)
    if not later:
        corr = corr.reverse()     # mover (consumer) -> anchor (producer)
    for d in deps:
        if d.buffer == buffer or d.reduction:
            continue
        if later and d.source == mover and d.sink not in (mover, anchor):
            pairs = d.relation.reverse().apply_range(corr)          # other -> anchor
            hit = pairs.intersect(schedule[d.sink].lex_le_map(schedule[anchor]))
            if not hit.is_empty():
                return Violation(d, d.relation, program)
        if not later and d.sink == mover and d.source not in (mover, anchor):
            pairs = d.relation.apply_range(corr)                      # other -> anchor
            hit = pairs.intersect(schedule[d.source].lex_ge_map(schedule[anchor]))
            if not hit.is_empty():
                return Violation(d, d.relation, program)
    return None
