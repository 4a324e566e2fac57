# SPDX-License-Identifier: Apache-2.0
"""Fusion with shifts, a question automatic scheduling asks of isl (``pl.auto_schedule``
turns the answers into ordinary schedule primitives in ``schedule/auto.py``).

* ``merge_shifts``: can two neighbouring loop nests be fused level by level, and by how much
  must the second be shifted so that every dependence between them still points forward?
  (Pluto-style fusion with shifts; isl's own scheduler does not choose parametric shifts such
  as ``K - 1``, so the shifts are computed here from the exact dependences.)
* ``conformable``: do two loops run over nearly the same values (worth fusing)?
* ``parameter_context``: what the shifts may assume about the sizes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import islpy as isl

from ..ir.program import Program
from .access import domain
from .affine import prefix_map
from .deps import Dependence
from .isl_util import params_prefix, set_
from .tree import LoopNode, statements_under


@dataclass(frozen=True, slots=True)
class Shift:
    """How far the second nest's loop at one level must move: an int, or an affine expression
    of size parameters (``"K - 1"``); ``exact_zero``: every dependence between the nests has
    distance 0 at this level (the merged loop carries nothing new)."""
    offset: int | str
    exact_zero: bool



def deps_between(deps: Sequence[Dependence], sources: set[str],
                  sinks: set[str]) -> list[Dependence]:
    return [d for d in deps if d.source in sources and d.sink in sinks]


def _inside(loop: LoopNode, statement: str) -> bool:
    return any(s == statement for s, _ in loop.exprs)


def merge_shifts(program: Program, deps: Sequence[Dependence], outer: Sequence[LoopNode],
                 first: Sequence[LoopNode], second: Sequence[LoopNode],
                 context: isl.Set) -> list[Shift]:
    """Shifts for fusing the loops ``first[k]`` and ``second[k]`` (the spines of two adjacent
    nests below the loops ``outer``, outermost first), level by level, as long as a bounded
    shift exists.

    A dependence x -> y from the first nest to the second within one iteration of the outer
    loops stays satisfied when, at every fused level, ``first[k](x) <= second[k](y) +
    shift[k]``; the smallest such shift (never negative) is the largest
    ``first[k](x) - second[k](y)`` over those dependences."""
    between = deps_between(deps, set(statements_under(first[0])),
                            set(statements_under(second[0])))
    out: list[Shift] = []
    for la, lb in zip(first, second):
        worst: isl.PwAff | None = None
        all_zero = True
        below_a, below_b = set(statements_under(la)), set(statements_under(lb))
        if any(d.source not in below_a or d.sink not in below_b for d in between):
            # a statement of a dependence sits above this level (between the spine's loops):
            # fusing here could reorder it with the other nest, and no shift of these loops
            # says by how much
            return out
        for d in between:
            if not (_inside(la, d.source) and _inside(lb, d.sink)):
                # an end of the dependence sits above this level of an imperfect nest: no
                # shift of these two loops describes it, so fusion stops above them
                return out
            delta = _level_deltas(program, d, outer, la, lb)
            if delta.is_empty():
                continue
            try:
                lo, hi = delta.dim_min(0), delta.dim_max(0)
            except isl.Error:       # unbounded: no fixed shift lines these loops up
                return out
            all_zero = all_zero and _is_zero(lo, context) and _is_zero(hi, context)
            need = lo.neg()
            worst = need if worst is None else worst.union_max(need)
        offset = _offset_text(worst, context) if worst is not None else 0
        if offset is None:
            return out
        out.append(Shift(offset, all_zero))
    return out


def conformable(program: Program, first: LoopNode, second: LoopNode, context: isl.Set,
                slack: int = 4) -> bool:
    """Do the two loops run over nearly the same values (their first and last values differ
    by constants of at most ``slack``)? Fusing loops of different extents fills the fused loop
    with guards."""
    bounds = []
    for loop in (first, second):
        values = None
        for stmt, _ in loop.exprs:
            img = prefix_map(program, stmt, [loop.expr(stmt)]).range()
            values = img if values is None else values.union(img)
        assert values is not None
        try:
            bounds.append((values.dim_min(0), values.dim_max(0)))
        except isl.Error:
            return False
    for a, b in zip(bounds[0], bounds[1]):
        pieces = a.sub(b).gist_params(context).coalesce().get_pieces()
        if not all(aff.is_cst() and abs(aff.get_constant_val().to_python()) <= slack
                   for _, aff in pieces):
            return False
    return True


def _level_deltas(program: Program, d: Dependence, outer: Sequence[LoopNode], la: LoopNode,
                  lb: LoopNode) -> isl.Set:
    """``{ [lb(y) - la(x)] }`` over the pairs x -> y of ``d`` in the same outer iteration."""
    m = len(outer)
    src = prefix_map(program, d.source, [o.expr(d.source) for o in outer] + [la.expr(d.source)])
    snk = prefix_map(program, d.sink, [o.expr(d.sink) for o in outer] + [lb.expr(d.sink)])
    pairs = d.relation.apply_domain(src).apply_range(snk)
    for k in range(m):
        pairs = pairs.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    return pairs.deltas().project_out(isl.dim_type.set, 0, m)


def _is_zero(pa: isl.PwAff, context: isl.Set) -> bool:
    pieces = pa.gist_params(context).get_pieces()
    return all(aff.is_cst() and aff.get_constant_val().to_python() == 0 for _, aff in pieces)


def _offset_text(pa: isl.PwAff, context: isl.Set) -> int | str | None:
    """An affine upper bound of ``max(pa, 0)`` in the parameters (one of its pieces that
    dominates the others wherever the sizes make sense), as an int or text; None if there is
    none without integer divisions."""
    zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(pa.get_domain_space()))
    full = pa.max(zero).gist_params(context).coalesce()
    for _, aff in sorted(full.get_pieces(), key=lambda p: -p[1].is_cst()):
        if aff.dim(isl.dim_type.div) or any(
                aff.get_coefficient_val(isl.dim_type.in_, k).to_python()
                for k in range(aff.dim(isl.dim_type.in_))):
            continue
        bound = isl.PwAff.from_aff(aff).intersect_domain(full.domain())
        if full.domain().is_subset(full.le_set(bound)):
            return _aff_text(aff)
    return None


def _aff_text(aff: isl.Aff) -> int | str:
    if aff.is_cst():
        return aff.get_constant_val().to_python()
    terms = []
    for k in range(aff.dim(isl.dim_type.param)):
        c = aff.get_coefficient_val(isl.dim_type.param, k).to_python()
        if c:
            name = aff.get_dim_name(isl.dim_type.param, k)
            terms.append(name if c == 1 else f"{c}*{name}")
    c0 = aff.get_constant_val().to_python()
    text = " + ".join(terms).replace("+ -", "- ")
    if c0:
        text += f" + {c0}" if c0 > 0 else f" - {-c0}"
    return text



def parameter_context(program: Program) -> isl.Set:
    """What is known about the sizes: non-negative, the program's assumptions, and that every
    statement runs at least once (shifts only matter for such sizes)."""
    pre = params_prefix(program.params)
    cons = " and ".join(f"{p} >= 0" for p in program.params)
    ctx = set_(f"{pre}{{ : {cons} }}" if cons else "{ : }")
    if program.assumptions:
        ctx = ctx.intersect(set_(program.assumptions))
    for s in program.statements:
        ctx = ctx.intersect(domain(program, s).params())
    return ctx
