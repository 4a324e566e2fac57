# SPDX-License-Identifier: Apache-2.0
"""The shape of a perfect loop nest around one statement, as isl sees it (used by tensorize).

With the loops outside the nest fixed (they act as parameters), the nest's iterations form a
set of points; ``nest_shape`` says whether that set is a box (a product of intervals), the
largest trip count of each loop, and for every access of the statement how its index vector
moves when one loop advances by one (the same step everywhere, or ``None``).

>>> import polyloop as pl
>>> n = pl.var("n")
>>> A = pl.placeholder((n, 8), "float32", name="A")
>>> B = pl.compute((n, 8), lambda i, j: A[i, j] * 2.0, name="B")
>>> sch = pl.Schedule(B)
>>> i, j = sch.get_loops("B")
>>> s = nest_shape(sch.program, sch.state.root, i.id, "B")
>>> s.is_box, s.extents, s.deltas[1]
(True, (None, 8), ((1, 0), (0, 1)))
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..ir.expr import loads
from ..ir.program import Program
from .isl_schedule import context
from .isl_util import NotAffine, expr_to_isl, map_, out_dims, params_prefix
from .tree import LoopNode, Root, flat_schedule, loop_position, path_to


@dataclass(frozen=True, slots=True)
class NestShape:
    """``loops``: the nest's loop ids, outermost first. ``extents``: each loop's largest trip
    count (``None``: unbounded, it grows with a size parameter). ``is_box``: every iteration of
    the outer loops runs a product of intervals. ``deltas[a][t]``: the change of access ``a``'s
    index vector (0: the written element, then the loads in ``loads(value)`` order) when loop
    ``t`` advances by one, or ``None`` if it is not the same everywhere (or not affine)."""

    loops: tuple[int, ...]
    extents: tuple[int | None, ...]
    is_box: bool
    deltas: tuple[tuple[tuple[int, ...] | None, ...], ...]


def nest_shape(program: Program, root: Root, loop_id: int, statement: str) -> NestShape:
    """The shape of the nest from loop ``loop_id`` down to ``statement``, which it must enclose
    through a chain of single loops."""
    path = path_to(root, loop_id)
    if path is None:
        raise KeyError(loop_id)
    chain = _chain_below(path[-1])
    positions = [loop_position(root, n.id) for n in chain]
    sched = flat_schedule(program, root)[statement]
    outer = positions[0]
    ctx = context(program)
    times = sched.range().intersect_params(ctx)
    # outer time dimensions -> inner ones: the outer loops become the domain
    nest = isl.Map.from_range(times).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, outer)
    inner = [p - outer for p in positions]
    extents = tuple(_largest_extent(_project(nest, q)) for q in inner)
    is_box = _is_box(nest)
    deltas = tuple(tuple(_delta(rel, sched, p) for p in positions)
                   for rel in _access_relations(program, statement))
    return NestShape(tuple(n.id for n in chain), extents, is_box, deltas)


def _chain_below(top: LoopNode) -> list[LoopNode]:
    out = [top]
    while len(out[-1].children) == 1 and isinstance(out[-1].children[0], LoopNode):
        out.append(out[-1].children[0])
    return out


def _project(nest: isl.Map, q: int) -> isl.Map:
    """outer -> [value of inner dimension q]."""
    return out_dims(nest, q)


def _trip_count(one: isl.Map) -> isl.PwAff:
    return one.dim_max(0).sub(one.dim_min(0)).add_constant_val(isl.Val.one(one.get_ctx()))


def _largest_extent(one: isl.Map) -> int | None:
    if one.is_empty():
        return 0
    top = _trip_count(one).max_val()
    return top.to_python() if top.is_int() else None


def _interval(one: isl.Map) -> isl.Map:
    """outer -> [x] with x between the smallest and the largest value, holes filled."""
    lo = isl.MultiPwAff.from_pw_aff(one.dim_min(0))
    hi = isl.MultiPwAff.from_pw_aff(one.dim_max(0))
    full = isl.Map.universe(one.get_space()).intersect_domain(one.domain())
    return full.lower_bound_multi_pw_aff(lo).upper_bound_multi_pw_aff(hi)


def _is_box(nest: isl.Map) -> bool:
    n = nest.dim(isl.dim_type.out)
    if n == 0:
        return True
    box = _interval(_project(nest, 0))
    for q in range(1, n):
        box = box.flat_range_product(_interval(_project(nest, q)))
    return box.is_equal(nest)


def _access_relations(program: Program, statement: str) -> list[isl.Map | None]:
    stmt = program.statement(statement)
    head = f"{params_prefix(program.params)}{{ {stmt.name}[{', '.join(stmt.iters)}] -> "
    out: list[isl.Map | None] = []
    for ld in [stmt.target] + loads(stmt.value):
        try:
            idx = ", ".join(expr_to_isl(i) for i in ld.indices)
        except NotAffine:
            out.append(None)
            continue
        out.append(map_(f"{head}{ld.buffer}[{idx}] }}"))
    return out


def _delta(access: isl.Map | None, sched: isl.Map, position: int) -> tuple[int, ...] | None:
    """How the accessed index moves when time dimension ``position`` advances by one."""
    if access is None:
        return None
    at_time = sched.reverse().apply_range(access)              # time -> index
    ndim = access.dim(isl.dim_type.out)
    nt = sched.dim(isl.dim_type.out)
    step = _advance(sched.range().get_space(), nt, position)
    pairs = at_time.reverse().apply_range(step.apply_range(at_time))   # index -> next index
    moves = pairs.deltas()
    if moves.is_empty():
        return (0,) * ndim            # the loop never advances: the step is irrelevant
    point = moves.sample_point()
    coords = tuple(point.get_coordinate_val(isl.dim_type.set, d).to_python() for d in range(ndim))
    only = isl.Set.universe(moves.get_space())
    for d, c in enumerate(coords):
        only = only.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(moves.get_ctx(), c))
    return coords if moves.is_subset(only) else None


def _advance(space: isl.Space, n: int, position: int) -> isl.Map:
    """{ [t] -> [t'] : t' = t except t'[position] = t[position] + 1 }"""
    names = [f"t{k}" for k in range(n)]
    after = [f"{v} + 1" if k == position else v for k, v in enumerate(names)]
    params = [space.get_dim_name(isl.dim_type.param, k)
              for k in range(space.dim(isl.dim_type.param))]
    text = f"{params_prefix(params)}{{ [{', '.join(names)}] -> [{', '.join(after)}] }}"
    return map_(text)
