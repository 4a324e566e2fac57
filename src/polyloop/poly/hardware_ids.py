# SPDX-License-Identifier: Apache-2.0
"""Loops the hardware runs (GPU work-group and work-item loops) in the AST build.

isl does not generate them: the kernel body runs for one value of each, so each becomes a
parameter of the build (``start <= p < start + count`` in the context) whose value fixes the
statements' instances (``statement_domains``). Loops of one axis and start share a parameter
(``HardwareIds``). What the body needs from the parameters is hoisted into one guard
(``hoisted_guard``), and where the ids only give iterators their values the build is given a
lighter context (``lighter_build``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import islpy as isl

from ..ir.expr import Expr
from ..ir.loop_notes import NoteKey
from ..ir.program import Program
from .access import domain
from .affine import prefix_map
from .isl_schedule import context, union_of
from .isl_util import NotAffine, expr_to_isl, params_prefix, set_, solved_dim
from .tree import LoopNode, Root, loops


# the annotation of a loop run by the hardware whose every id is a value of the loop (start +
# id, with the id below the launched count): the loop needs no guard of its own
HARDWARE_ID = (NoteKey.GRID, "exact")


@dataclass(frozen=True, slots=True)
class HardwareLoop:
    """A loop the hardware runs (a work-group or work-item index): every id
    ``0 <= id < count`` of the launch runs the body once with the loop's value ``start + id``
    (``count``: an expression of the size parameters)."""
    start: int
    count: Expr


def hardware_param(loop_id: int) -> str:
    """The AST build parameter that stands for the value of a hardware loop."""
    return f"__hw{loop_id}"


def readable(h: HardwareLoop) -> bool:
    """Can isl read the loop's count (an affine expression of the size parameters)?"""
    try:
        expr_to_isl(h.count)
    except NotAffine:
        return False
    return True


def statement_domains(program: Program, root: Root, hardware: Mapping[int, str]
                      ) -> dict[str, isl.Set]:
    """Each statement's domain, with the loops in ``hardware`` fixed to their parameters."""
    doms = {s.name: domain(program, s) for s in program.statements}
    return _fix_hardware(program, root, hardware, doms) if hardware else doms


def _fix_hardware(program: Program, root: Root, hardware: Mapping[int, str],
                  doms: dict[str, isl.Set]) -> dict[str, isl.Set]:
    """``doms`` with each statement's instances limited to those where every hardware loop
    around it has the value of its parameter (one intersection per statement, with its
    equalities detected: ``i = 16*g + l`` rather than ``i mod 16 = l``, simpler for the
    build)."""
    fixed: dict[str, list[tuple[str, str]]] = {}
    for node in loops(root):
        if node.id in hardware:
            for stmt, text in node.exprs:
                if stmt in doms:
                    fixed.setdefault(stmt, []).append((text, hardware[node.id]))
    out = dict(doms)
    for stmt, pairs in fixed.items():
        names = list(dict.fromkeys(p for _, p in pairs))
        values = ", ".join(f"v{k}" for k in range(len(pairs)))
        cons = " and ".join(f"v{k} = {p}" for k, (_, p) in enumerate(pairs))
        at = set_(f"[{', '.join(names)}] -> {{ [{values}] : {cons} }}")
        m = prefix_map(program, stmt, [t for t, _ in pairs])
        m = m.align_params(at.get_space()).intersect_range(at.align_params(m.get_space()))
        out[stmt] = m.domain().detect_equalities()  # prefix_map is on the domain already
    return out


def hardware_context(program: Program, hardware: Mapping[str, HardwareLoop]) -> isl.Set:
    """What the build knows about the parameters: ``context(program)`` and the range of
    each hardware parameter (``start <= p < start + count``: the ids the launch runs)."""
    ctx = context(program)
    if not hardware:
        return ctx
    cons = " and ".join(f"{h.start} <= {p} < {h.start} + {expr_to_isl(h.count)}"
                        for p, h in hardware.items())
    ranges = set_(f"{params_prefix(list(program.params) + list(hardware))}{{ : {cons} }}")
    return ranges.intersect(ctx.align_params(ranges.get_space()))


def hoisted_guard(ctx: isl.Set, doms: Mapping[str, isl.Set]
                   ) -> tuple[isl.Set, isl.AstExpr | None]:
    """The build context strengthened by the condition on the parameters under which any
    statement runs (the guard of a work-item past the edge of a partial tile), and that
    condition as an expression, or None where the context implies it. isl then builds the
    body for the work-items that do run, with fewer parameter cases to tell apart (about
    half the time for a tiled matmul); the caller puts the body under the guard."""
    every = union_of(doms)
    if every is None:
        return ctx, None
    runs = every.params().align_params(ctx.get_space())
    ctx = ctx.align_params(runs.get_space())
    if runs.gist(ctx).plain_is_universe():
        return ctx, None
    expr = isl.AstBuild.from_context(ctx).expr_from_set(runs)
    return ctx.intersect(runs), expr


def lighter_build(ctx: isl.Set, doms: Mapping[str, isl.Set], hardware: set[str]
                   ) -> tuple[isl.Set, Mapping[str, isl.Set]]:
    """A cheaper context for the build, and the domains to build with it.

    Each domain is simplified against ``ctx`` (what holds wherever the body runs: the ids'
    ranges and the hoisted guard). Where what is left mentions the hardware parameters only
    in equalities that give statement iterators their values (``i = 16*g + l``: the
    instances of one work-item), the build needs no fact about those parameters: it gets the
    context's facts about the size parameters alone, which makes isl's work several times
    cheaper (a tiled matmul's body: 21 -> 9 million instructions). The code is the same
    under ``ctx``, which holds at run time. Otherwise ``ctx`` and ``doms`` are returned."""
    gisted = {}
    for name, d in doms.items():
        g = d.gist_params(ctx.align_params(d.get_space()))
        if not _hardware_only_in_equalities(g, hardware):
            return ctx, doms
        gisted[name] = g
    positions = [k for k in range(ctx.dim(isl.dim_type.param))
                 if ctx.get_dim_name(isl.dim_type.param, k) in hardware]
    light = ctx
    for k in reversed(positions):   # keep the parameters, forget what is known of them
        light = light.project_out(isl.dim_type.param, k, 1)
    return light.align_params(ctx.get_space()), gisted


def _hardware_only_in_equalities(d: isl.Set, hardware: set[str]) -> bool:
    """Is every constraint of ``d`` that involves a hardware parameter an equality that
    gives one iterator its value (coefficient 1 or -1, no other iterator, no division)?"""
    pieces = d.get_basic_sets()
    if len(pieces) != 1:
        return False
    params = [k for k in range(d.dim(isl.dim_type.param))
              if d.get_dim_name(isl.dim_type.param, k) in hardware]
    if not params:
        return True
    n = d.dim(isl.dim_type.set)
    for c in pieces[0].get_constraints():
        if all(c.get_coefficient_val(isl.dim_type.param, k).is_zero() for k in params):
            continue
        if solved_dim(c, isl.dim_type.set, n) is None:
            return False
    return True


class HardwareIds:
    """The parameters and variables of the hardware loops. Loops of one GPU axis and start
    have one value, so they share one build parameter (fewer parameters, and isl sees that
    their guards are the same); each (name, axis, start) is one variable of the kernel (a
    nest split around a prefetch has one ``i_inner`` in each part: one variable)."""

    def __init__(self, hardware: Mapping[int, HardwareLoop]):
        self.hardware = hardware
        self.params: dict[int, str] = {}            # loop id -> its build parameter
        self.ranges: dict[str, HardwareLoop] = {}   # parameter -> its ids
        self.declared: dict[tuple, int] = {}        # variable key -> its first loop

    def key(self, n: LoopNode) -> tuple:
        """The variable a hardware loop's value is kept in: one per (name, axis, start)."""
        return (n.name, n.thread, self.hardware[n.id].start)

    @classmethod
    def of(cls, root: Root, hardware: Mapping[int, HardwareLoop]) -> "HardwareIds":
        """The parameters and variables of the loops of ``root`` in ``hardware``."""
        ids = cls(hardware)
        first: dict[tuple, str] = {}
        for n in loops(root):
            if n.id in hardware:
                h = hardware[n.id]
                p = first.setdefault((n.thread, h.start), hardware_param(n.id))
                ids.params[n.id] = p
                ids.ranges.setdefault(p, h)       # one axis has one count
                ids.declared.setdefault(ids.key(n), n.id)
        return ids

