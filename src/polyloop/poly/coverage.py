# SPDX-License-Identifier: Apache-2.0
"""Which elements a program writes, and which reads see no write (isl's dataflow).

A temporary has no initial value: a read of an element no earlier instance wrote returns
whatever the memory held. An output whose elements are not all written comes back with
those elements as they were (allocated: uninitialised). Both are decided exactly for affine
accesses; reads under a where() count only where its condition holds. Accesses isl cannot
decide (non-affine indices, conditions on data) are never reported: no false alarm.
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..ir.program import BufferRole, Program
from .access import accesses, buffer_box
from .bounds import guarded_loads
from .isl_util import NotAffine, expr_to_isl, map_, params_prefix, point_values, set_


@dataclass(frozen=True, slots=True)
class UnwrittenRead:
    """A read that may see no write: the statement, the access, one instance."""
    statement: str
    access: str
    buffer: str
    example: dict[str, int]
    element: tuple[int, ...]
    ordinary: bool = True   # also when every size is >= 1 (not only with an empty loop)

    def __str__(self) -> str:
        where = ", ".join(f"{k} = {v}" for k, v in self.example.items())
        return (f"'{self.statement}' reads {self.access} before any statement writes it: with "
                f"{where} it reads {self.buffer}[{', '.join(map(str, self.element))}]")


def unwritten_reads(program: Program, schedule: dict[str, isl.Map],
                    roles: frozenset[BufferRole] = frozenset({BufferRole.TEMP})
                    ) -> list[UnwrittenRead]:
    """Reads of buffers with one of ``roles`` that no write precedes in ``schedule`` order.

    >>> import polyloop as pl
    >>> prog = pl.script('''
    ... def f(A: pl.Buffer[("n",), "float32"], B: pl.Buffer[("n",), "float32"]):
    ...     T = pl.alloc(("n",), "float32")
    ...     for i in range(n - 1):
    ...         B[i] = T[i + 1]
    ...         T[i] = A[i]
    ... ''')
    >>> print(unwritten_reads(prog, pl.Schedule(prog).state.schedule_map())[0])
    'B' reads T[i + 1] before any statement writes it: with n = 2, i = 0 it reads T[1]
    """
    names = {b.name for b in program.buffers if b.role in roles}
    found = []
    for s in program.statements:
        if s.name not in schedule:
            continue
        for load, where in guarded_loads(program, s):
            if load.buffer not in names or where is None or where.is_empty():
                continue
            try:
                idx = ", ".join(expr_to_isl(i) for i in load.indices)
            except NotAffine:
                continue
            read = map_(f"{params_prefix(program.params)}{{ {s.name}[{', '.join(s.iters)}] -> "
                        f"{load.buffer}[{idx}] }}").intersect_domain(where)
            missing = _no_source(program, schedule, read, load.buffer)
            if missing is not None and program.assumptions:   # sizes the caller promises
                missing = missing.intersect_params(
                    set_(program.assumptions).align_params(missing.get_space()))
            if missing is None or missing.is_empty():
                continue
            positive = " and ".join(f"{p} >= 1" for p in program.params) or "true"
            ordinary = missing.intersect_params(
                set_(f"{params_prefix(program.params)}{{ : {positive} }}"))
            if not ordinary.is_empty():
                found.append(_example(s.name, str(load), load.buffer, ordinary, len(s.iters)))
            else:
                found.append(_example(s.name, str(load), load.buffer, missing, len(s.iters),
                                      ordinary=False))
    return found


def _no_source(program: Program, schedule: dict[str, isl.Map], read: isl.Map,
               buffer: str) -> isl.Map | None:
    """The part of ``read`` that no write to ``buffer`` before it (in schedule order) covers.
    Every write counts as writing what it may write: a read is reported only when no write
    can have produced it."""
    writes = [a for a in accesses(program) if a.buffer == buffer and a.is_write
              and a.statement in schedule]
    info = isl.UnionAccessInfo.from_sink(isl.UnionMap.from_map(read))
    if writes:
        must = isl.UnionMap.from_map(writes[0].relation)
        for w in writes[1:]:
            must = must.union(isl.UnionMap.from_map(w.relation))
        info = info.set_must_source(must)
    stmts = {w.statement for w in writes} | {read.get_tuple_name(isl.dim_type.in_)}
    sched = None
    for name in stmts:
        u = isl.UnionMap.from_map(schedule[name])
        sched = u if sched is None else sched.union(u)
    no_source = info.set_schedule_map(sched).compute_flow().get_may_no_source()
    if no_source.is_empty():
        return None
    return isl.Map.from_union_map(no_source)


def _example(statement: str, access: str, buffer: str, rel: isl.Map,
             n_iters: int, ordinary: bool = True) -> UnwrittenRead:
    point = rel.wrap().sample_point()
    nparam = rel.dim(isl.dim_type.param)
    example = {rel.get_dim_name(isl.dim_type.param, k):
               point.get_coordinate_val(isl.dim_type.param, k).to_python()
               for k in range(nparam)}
    values = point_values(point, n_iters + rel.dim(isl.dim_type.out))
    for k in range(n_iters):
        example[rel.get_dim_name(isl.dim_type.in_, k) or f"i{k}"] = values[k]
    return UnwrittenRead(statement, access, buffer, example, tuple(values[n_iters:]), ordinary)


def unwritten_elements(program: Program, buffer: str) -> isl.Set | None:
    """The elements of ``buffer`` that no statement surely writes (for some sizes), or None
    when every element is written. Writes with non-affine indices prove nothing.

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i, j] : 0 <= j <= i < n }", "out[i, j] = a[i, j]",
    ...                      args=[pl.ArrayArg("out", "float32", shape=("n", "n")), ...])
    >>> print(unwritten_elements(knl.program, "out"))
    [n] -> { out[x0, x1] : n >= 0 and x0 >= 0 and x0 < x1 < n }
    """
    box = buffer_box(program, buffer)
    if program.assumptions:
        box = box.intersect_params(set_(program.assumptions))
    for a in accesses(program):
        if a.buffer == buffer and a.is_write and a.exact:
            box = box.subtract(a.relation.range())
    nonneg = " and ".join(f"{p} >= 0" for p in program.params) or "true"
    box = box.intersect_params(set_(f"{params_prefix(program.params)}{{ : {nonneg} }}"))
    return None if box.is_empty() else box


__all__ = ["UnwrittenRead", "unwritten_elements", "unwritten_reads"]
