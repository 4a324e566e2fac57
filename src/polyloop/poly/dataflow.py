# SPDX-License-Identifier: Apache-2.0
"""Value-based dataflow: which write produced the value each read sees (isl's compute_flow).

Memory-based dependences (``deps.py``) relate every pair of accesses to one element; dataflow
keeps only the last write before each read. It answers two questions the front ends and the
lowering ask: does a buffer's initial content matter (is it read before being written), and
does a value flow between iterations of a loop (can the buffer be private to one iteration)?
"""
from __future__ import annotations

import islpy as isl

from ..ir.program import Program
from .access import accesses


def _union(maps: list[isl.Map]) -> isl.UnionMap | None:
    out = None
    for m in maps:
        u = isl.UnionMap.from_map(m)
        out = u if out is None else out.union(u)
    return out


def flow(program: Program, schedule: dict[str, isl.Map], buffer: str | None = None
         ) -> tuple[isl.UnionMap | None, isl.UnionMap | None]:
    """(source instance -> reading instance, reads with no write before them) for ``buffer``
    (all buffers when None) when statements run in the order of ``schedule``. Reads of a
    buffer some write of which is not exact (non-affine) count as possibly reading either."""
    acc = [a for a in accesses(program) if buffer is None or a.buffer == buffer]
    sink = _union([a.relation for a in acc if not a.is_write])
    if sink is None:
        return None, None
    must = _union([a.relation for a in acc if a.is_write and a.exact])
    may = _union([a.relation for a in acc if a.is_write and not a.exact])
    sched = _union([schedule[s] for s in {a.statement for a in acc} if s in schedule])
    info = isl.UnionAccessInfo.from_sink(sink)
    if must is not None:
        info = info.set_must_source(must)
    if may is not None:
        info = info.set_may_source(may)
    if sched is None:
        return None, sink
    result = info.set_schedule_map(sched).compute_flow()
    return result.get_may_dependence(), result.get_may_no_source()


def reads_initial_values(program: Program, schedule: dict[str, isl.Map]) -> set[str]:
    """Buffers of which some element may be read before the program writes it."""
    _, no_source = flow(program, schedule)
    if no_source is None or no_source.is_empty():
        return set()
    names: set[str] = set()
    no_source.foreach_map(lambda m: names.add(m.get_tuple_name(isl.dim_type.out)))
    return names


def value_flow(program: Program, schedule: dict[str, isl.Map], buffer: str, source: str,
               sink: str) -> isl.Map | None:
    """``source[...] -> sink[...]``: the instance pairs where ``sink`` reads a value of
    ``buffer`` that ``source`` wrote (the last write before the read under ``schedule``), or
    None when there is none. A memory-based RAW dependence keeps every earlier write of the
    element; this keeps the one whose value is read, which is what matters when each group of
    iterations may get its own copy of the buffer. Sizes outside the program's assumptions
    (``n mod 16 = 0``) are left out."""
    return flow_between(program, flow(program, schedule, buffer)[0], source, sink)


def flow_between(program: Program, pairs: isl.UnionMap | None, source: str, sink: str
                 ) -> isl.Map | None:
    """``value_flow`` from the pairs ``flow`` found for one buffer: a caller that asks about
    several statement pairs of one buffer under one schedule computes the flow once."""
    if pairs is None:
        return None
    found: list[isl.Map] = []
    pairs.foreach_map(lambda m: found.append(m) if (
        m.get_tuple_name(isl.dim_type.in_) == source
        and m.get_tuple_name(isl.dim_type.out) == sink) else None)
    if not found:
        return None
    out = found[0]
    for m in found[1:]:
        out = out.union(m)
    if program.assumptions:     # pairs only at sizes the program promises never happen
        context = isl.Set(program.assumptions)
        out = out.intersect_params(context.align_params(out.get_space()))
    out = out.coalesce()
    return None if out.is_empty() else out
