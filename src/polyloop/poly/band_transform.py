# SPDX-License-Identifier: Apache-2.0
"""Band transformations, a question automatic scheduling asks of isl (``pl.auto_schedule``
turns the answers into ordinary schedule primitives in ``schedule/auto.py``).

``band_transform``: for a perfectly nested band of loops, the unimodular change of basis
(interchange, skewing, reversal) that isl's scheduler finds for the dependences the band
carries: permutable (tilable) rows first, parallel (coincident) rows outermost.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import islpy as isl

from ..ir.program import Program
from .affine import prefix_map
from .deps import Dependence
from .fusion_shifts import deps_between
from .isl_util import CTX
from .tree import LoopNode, statements_under

# The isl scheduler's options are global to the context: set them for one call, then restore.
_FUSION_OPTIONS = ("schedule_serialize_sccs", "schedule_whole_component",
                   "schedule_outer_coincidence", "schedule_maximize_band_depth")


@dataclass(frozen=True, slots=True)
class BandTransform:
    """Rows of a unimodular matrix over the band's loops (outermost first), how many leading
    rows form a permutable (tilable) band, and which rows isl found parallel."""
    rows: tuple[tuple[int, ...], ...]
    permutable: int
    coincident: tuple[bool, ...]

    @property
    def is_identity(self) -> bool:
        return all(r[k] == (1 if k == j else 0) for j, r in enumerate(self.rows)
                   for k in range(len(r)))


def band_relation(program: Program, deps: Sequence[Dependence], outer: Sequence[LoopNode],
                  band: Sequence[LoopNode]) -> isl.Map | None:
    """``X[l] -> X[l']``: pairs of band points (values of the band's loops) linked by a
    dependence that the loops above the band do not already carry; None if there are none."""
    stmts = set(statements_under(band[0]))
    loops = list(outer) + list(band)
    m = len(outer)
    rel: isl.Map | None = None
    for d in deps_between(deps, stmts, stmts):
        src = prefix_map(program, d.source, [lp.expr(d.source) for lp in loops])
        snk = prefix_map(program, d.sink, [lp.expr(d.sink) for lp in loops])
        pairs = d.relation.apply_domain(src).apply_range(snk)
        for k in range(m):
            pairs = pairs.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
        pairs = pairs.project_out(isl.dim_type.in_, 0, m).project_out(isl.dim_type.out, 0, m)
        ident = isl.Map.identity(pairs.get_space())
        pairs = pairs.subtract(ident)
        if pairs.is_empty():
            continue
        pairs = pairs.set_tuple_name(isl.dim_type.in_, "X").set_tuple_name(isl.dim_type.out, "X")
        rel = pairs if rel is None else rel.union(pairs)
    return None if rel is None else rel.coalesce()


def band_transform(program: Program, deps: Sequence[Dependence], outer: Sequence[LoopNode],
                   band: Sequence[LoopNode]) -> BandTransform:
    """isl's schedule for the band as a single statement over its loop values, with the
    dependences it carries as validity, proximity and coincidence constraints."""
    d = len(band)
    identity = tuple(tuple(1 if k == j else 0 for k in range(d)) for j in range(d))
    rel = band_relation(program, deps, outer, band)
    if rel is None:     # nothing carried: every loop is parallel, any order is legal
        return BandTransform(identity, d, (True,) * d)
    dom = isl.UnionSet.from_set(rel.domain().union(rel.range()).coalesce())
    um = isl.UnionMap.from_map(rel)
    sc = isl.ScheduleConstraints.on_domain(dom).set_validity(um).set_proximity(um) \
                                .set_coincidence(um)
    schedule = _compute(sc)
    rows, perm, coin = _rows(schedule, d)
    if rows is None or len(rows) != d or abs(_det(rows)) != 1:
        return BandTransform(identity, 0, (False,) * d)
    return BandTransform(tuple(rows), perm, tuple(coin))


def _compute(sc: isl.ScheduleConstraints) -> isl.Schedule:
    saved = {o: getattr(CTX, "get_" + o)() for o in _FUSION_OPTIONS}
    try:
        CTX.set_schedule_outer_coincidence(0)
        CTX.set_schedule_maximize_band_depth(1)
        return sc.compute_schedule()
    finally:
        for o, v in saved.items():
            getattr(CTX, "set_" + o)(v)


def _rows(schedule: isl.Schedule, d: int) -> tuple[list[tuple[int, ...]] | None, int, list[bool]]:
    """Linear parts of the band rows, top-down; the depth of the first band if permutable."""
    rows: list[tuple[int, ...]] = []
    coin: list[bool] = []
    perm = 0
    node = schedule.get_root()
    first = True
    while node.has_children():
        node = node.child(0)
        t = node.get_type()
        if t == isl.schedule_node_type.band:
            mupa = node.band_get_partial_schedule()
            for k in range(node.band_n_member()):
                row = _linear(mupa.get_union_pw_aff(k), d)
                if row is None:
                    return None, 0, []
                rows.append(row)
                coin.append(bool(node.band_member_get_coincident(k)))
            if first and node.band_get_permutable():
                perm = node.band_n_member()
            first = False
        elif t not in (isl.schedule_node_type.leaf, isl.schedule_node_type.mark):
            return None, 0, []
    return rows, perm, coin


def _linear(upa: isl.UnionPwAff, d: int) -> tuple[int, ...] | None:
    pas = []
    upa.foreach_pw_aff(pas.append)
    if len(pas) != 1:
        return None
    pieces = pas[0].get_pieces()
    if len(pieces) != 1:
        return None
    aff = pieces[0][1]
    if aff.dim(isl.dim_type.div):
        return None
    return tuple(aff.get_coefficient_val(isl.dim_type.in_, k).to_python() for k in range(d))


def _det(rows: Sequence[Sequence[int]]) -> int:
    """Integer determinant (fraction-free elimination; bands are small)."""
    m = [list(r) for r in rows]
    n = len(m)
    sign, prev = 1, 1
    for k in range(n - 1):
        if m[k][k] == 0:
            swap = next((i for i in range(k + 1, n) if m[i][k] != 0), None)
            if swap is None:
                return 0
            m[k], m[swap] = m[swap], m[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                m[i][j] = (m[i][j] * m[k][k] - m[i][k] * m[k][j]) // prev
        prev = m[k][k]
    return sign * m[n - 1][n - 1] if n else 1
