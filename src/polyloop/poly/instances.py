# SPDX-License-Identifier: Apache-2.0
"""Concrete statement instances for fixed sizes: the points of a domain, the instance pairs of
a dependence, and the schedule's time vector of each instance (what pictures are drawn from)."""
from __future__ import annotations

import islpy as isl

from ..errors import PolyloopError
from ..ir.program import Program
from .deps import Dependence
from .isl_util import params_prefix, set_

DEFAULT_LIMIT = 20_000


def _fixed(program: Program, params: dict[str, int]) -> isl.Set:
    missing = [p for p in program.params if p not in params]
    if missing:
        raise PolyloopError(f"give a value for the size parameter(s) {', '.join(missing)} "
                            f"(params={{...}}) of program '{program.name}'")
    cons = " and ".join(f"{p} = {int(params[p])}" for p in program.params)
    return set_(f"{params_prefix(program.params)}{{ : {cons or '0 = 0'} }}")


def _pairs(m: isl.Map, n_in: int, limit: int, what: str) -> list[tuple[tuple[int, ...], ...]]:
    out: list[tuple[tuple[int, ...], ...]] = []
    wrapped = m.wrap()
    if not wrapped.is_bounded():
        raise PolyloopError(f"{what} is unbounded for the given sizes")

    def visit(p: isl.Point) -> None:
        vals = tuple(p.get_coordinate_val(isl.dim_type.set, k).to_python()
                     for k in range(wrapped.dim(isl.dim_type.set)))
        out.append((vals[:n_in], vals[n_in:]))
        if len(out) > limit:
            raise _TooMany
    try:
        wrapped.foreach_point(visit)
    except _TooMany:
        raise PolyloopError(f"{what} has more than {limit} instance pairs for these sizes; "
                            "draw it with smaller sizes") from None
    out.sort()
    return out


class _TooMany(Exception):
    pass


def dependence_pairs(program: Program, dep: Dependence, params: dict[str, int], *,
                     limit: int = DEFAULT_LIMIT) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(source instance, sink instance) pairs of ``dep`` for the given sizes."""
    m = dep.relation.intersect_params(_fixed(program, params).align_params(
        dep.relation.get_space().params()))
    return _pairs(m, m.dim(isl.dim_type.in_), limit, f"dependence {dep.source} -> {dep.sink}")  # type: ignore[return-value]


def time_vectors(program: Program, schedule: isl.Map, params: dict[str, int], *,
                 limit: int = DEFAULT_LIMIT) -> dict[tuple[int, ...], tuple[int, ...]]:
    """Instance -> its time vector under ``schedule`` (``S[i, ...] -> [t0, t1, ...]``)."""
    fixed = _fixed(program, params).align_params(schedule.get_space().params())
    m = schedule.intersect_params(fixed)
    pairs = _pairs(m, m.dim(isl.dim_type.in_), limit, "the schedule")
    return {a: b for a, b in pairs}
