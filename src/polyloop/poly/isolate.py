# SPDX-License-Identifier: Apache-2.0
"""Full-tile isolation: full tiles get a loop nest with constant bounds, the rest its own nest.

When a tiled loop's size does not divide the tile (``n = 1000`` in tiles of 6 x 64, or a
symbolic ``n``), isl writes one nest whose tile loops have ``min(...)`` bounds: unrolled loops are
not constant-trip, vector loops need masks, a register tile cannot stay in registers. isl's AST
build option ``isolate`` makes it write the iterations of a set apart; given the set of full
tiles, the full tiles get a nest whose tile loops have constant bounds and the partial tiles keep
the general one (isl's ``separate`` option for the rest: the partial tiles along one loop do
not share a loop with the full ones, e.g. the last row of tiles is a nest of its own).

Policy (``isolate_full_tiles``): a *tile* is a perfect chain of loops of constant largest trip
count that contains an unrolled or vectorized loop (or a loop annotated ``isolate=on``). With isl
we compute the set of values of the loops around the tile for which the tile is the full box
(every loop of the chain runs its largest trip count, and the iterations form a box). The split
is placed at the *isolation loop*: the outermost loop below which fullness no longer changes
(the demo matmul: the row-tile loop ``i_0``, above the reduction loop ``k``, so the whole k loop
and the C tile's init and write-back are duplicated, not just the body of ``k``). Nothing is
isolated when every tile is full or none is, and never around GPU-bound loops (their copies
would become separate launches; a tile inside the work-items is fine).
``sch.annotate(loop, "isolate", "off")`` on a loop of the tile or on the isolation loop turns it
off; ``"on"`` on a serial split loop asks for it. Under a skewed loop (a combination of several
iterators of a statement: the wavefront and the tiles of a time-tiled stencil) nothing is
isolated unless a loop of the tile says ``"on"``: isl's AST build takes minutes cutting such a
band into full and partial tiles. Code size: each isolated loop's subtree is
emitted twice. Only code generation isolates; a printed schedule shows one nest.

>>> import islpy as isl, polyloop as pl
>>> n = pl.var("n")
>>> A = pl.placeholder((n,), "float32", name="A")
>>> B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
>>> sch = pl.Schedule(B)
>>> i0, i1 = sch.split(sch.get_loops("B")[0], factors=[None, 4])
>>> sch.unroll(i1)
>>> from polyloop.poly.isl_schedule import context
>>> plan = isolation_plan(sch.program, sch.state.root, context(sch.program))
>>> list(plan) == [i0.id]     # split at i0; full tiles: the values of i0 below
True
>>> plan[i0.id].is_equal(isl.Set("[n] -> { [t] : 0 <= t and 4t <= n - 4 }"))
True
"""
from __future__ import annotations

from typing import Mapping

import islpy as isl

from ..ir.loop_notes import NoteKey
from ..ir.loops import LoopKind
from ..ir.program import Program
from .affine import prefix_map
from .gpu import statement_paths
from .isl_util import map_in, out_dims
from .tree import LoopNode, Root, loops, path_to, statements_under

ANNOTATION = NoteKey.ISOLATE
_TILE_KINDS = (LoopKind.UNROLLED, LoopKind.VECTORIZED)


def isolate_full_tiles(program: Program, root: Root, schedule: isl.Schedule,
                       context: isl.Set, hardware: Mapping[int, str] | None = None
                       ) -> isl.Schedule:
    """``schedule`` (the isl schedule tree of ``root``, one band under a mark ``L<id>`` per loop)
    with the ``isolate`` option on each isolation loop's band (see the module docstring).
    ``hardware``: loop id -> the build parameter that stands for a loop without a band (a GPU
    index, ``astgen.build_ast``); the full-tile sets say it through that parameter."""
    plan = isolation_plan(program, root, context)
    if not plan:
        return schedule
    if hardware:
        plan = {k: _as_parameters(root, k, full, hardware) for k, full in plan.items()}

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() != isl.schedule_node_type.band or not node.has_parent():
            return node
        parent = node.parent()
        if parent.get_type() != isl.schedule_node_type.mark:
            return node
        full = plan.get(int(parent.mark_get_id().get_name()[1:]))
        if full is None or node.band_n_member() != 1:
            return node
        return node.band_set_ast_build_options(_options(full))
    return schedule.map_schedule_node_bottom_up(visit)


def isolation_plan(program: Program, root: Root, context: isl.Set) -> dict[int, isl.Set]:
    """Isolation loop id -> the set of full tiles, over the values of the loops from the
    outermost down to the isolation loop (the last dimension)."""
    paths = statement_paths(root)
    plan: dict[int, isl.Set] = {}
    for chain in _tile_chains(program, root, paths, context):
        found = _isolation(program, chain, paths, context)
        if found is None:
            continue
        loop_id, full = found
        plan[loop_id] = plan[loop_id].intersect(full) if loop_id in plan else full
    return plan


def _as_parameters(root: Root, loop_id: int, full: isl.Set, hardware: Mapping[int, str]
                   ) -> isl.Set:
    """The full-tile set of an isolation loop with the dimensions of hardware loops (the
    loops from the outermost down to it) turned into their parameters."""
    path = path_to(root, loop_id)
    assert path is not None and len(path) == full.dim(isl.dim_type.set)
    for k in reversed(range(len(path))):
        name = hardware.get(path[k].id)
        if name is None:
            continue
        at = full.dim(isl.dim_type.param)
        full = full.move_dims(isl.dim_type.param, at, isl.dim_type.set, k, 1)
        full = full.set_dim_name(isl.dim_type.param, at, name)
    return full


def _options(full: isl.Set) -> isl.UnionSet:
    """``{ isolate[[outer] -> [band]] : full; separate[x] }``"""
    outer = full.dim(isl.dim_type.set) - 1
    rel = isl.Map.from_range(full).move_dims(isl.dim_type.in_, 0, isl.dim_type.set, 0, outer)
    iso = rel.wrap().set_tuple_name("isolate")
    rest = isl.UnionSet("{ separate[x] }")
    return isl.UnionSet.from_set(iso).union(rest)


def _off(node: LoopNode) -> bool:
    return dict(node.annotations).get(ANNOTATION) == "off"


def _asks(node: LoopNode) -> bool:
    return node.kind in _TILE_KINDS or dict(node.annotations).get(ANNOTATION) == "on"


def _extent(program: Program, node: LoopNode, paths: dict[str, list[LoopNode]],
            context: isl.Set) -> int | None:
    """The loop's largest trip count once the loops around it are fixed (None: not constant)."""
    top = 0
    for s in statements_under(node):
        path = paths[s]
        k = next(i for i, n in enumerate(path) if n.id == node.id)
        m = prefix_map(program, s, [n.expr(s) for n in path[:k + 1]])
        times = m.range().intersect_params(context)
        one = isl.Map.from_range(times).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, k)
        if one.is_empty():
            continue
        trip = _largest(one.dim_max(0).sub(one.dim_min(0)))
        if trip is None:
            return None
        top = max(top, trip + 1)
    return top


def _tile_chains(program: Program, root: Root, paths: dict[str, list[LoopNode]],
                 context: isl.Set) -> list[list[LoopNode]]:
    """Perfect chains of constant-extent loops holding a loop that asks for isolation."""
    parent: dict[int, LoopNode] = {}
    for n in loops(root):
        for c in n.children:
            if isinstance(c, LoopNode):
                parent[c.id] = n
    extents: dict[int, int | None] = {}

    def constant(n: LoopNode) -> bool:
        if n.id not in extents:
            extents[n.id] = _extent(program, n, paths, context)
        return extents[n.id] is not None and n.collapse is None

    chains, seen = [], set()
    for n in loops(root):
        if not _asks(n) or n.id in seen or not constant(n):
            continue
        chain = [n]
        while (chain[0].id in parent and parent[chain[0].id].children == (chain[0],)
               and constant(parent[chain[0].id])):
            chain.insert(0, parent[chain[0].id])
        while (len(chain[-1].children) == 1 and isinstance(chain[-1].children[0], LoopNode)
               and constant(chain[-1].children[0])):
            chain.append(chain[-1].children[0])
        seen.update(c.id for c in chain)
        if not any(_off(c) for c in chain):
            chains.append(chain)
    return chains


def _isolation(program: Program, chain: list[LoopNode], paths: dict[str, list[LoopNode]],
               context: isl.Set) -> tuple[int, isl.Set] | None:
    """(isolation loop id, full-tile set) for a tile, or None when there is nothing to split."""
    full = dom = None
    outer: list[LoopNode] = []
    asked = any(dict(c.annotations).get(ANNOTATION) == "on" for c in chain)
    for s in statements_under(chain[-1]):
        path = paths[s]
        r = next(i for i, n in enumerate(path) if n.id == chain[0].id)
        outer = path[:r]
        if not outer or any(n.collapse is not None for n in outer):
            return None
        if not asked and any(_skewed(program, s, n) for n in path[:r + len(chain)]):
            return None
        m = prefix_map(program, s, [n.expr(s) for n in path[:r + len(chain)]])
        times = m.range().intersect_params(context)
        nest = isl.Map.from_range(times).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, r)
        f = _full_set(nest)
        full = f if full is None else full.intersect(f)
        d = nest.domain()
        dom = d if dom is None else dom.union(d)
    if full is None or dom is None:
        return None
    full = full.intersect(dom).coalesce()
    if full.is_empty() or full.is_equal(dom):
        return None          # no full tile, or no partial one: one nest is right
    r = len(outer)
    for depth in range(1, r + 1):
        cut = full.project_out(isl.dim_type.set, depth, r - depth)
        if cut.insert_dims(isl.dim_type.set, depth, r - depth).intersect(dom).is_equal(full):
            home = outer[depth - 1]
            if _off(home) or any(n.kind is LoopKind.THREAD for n in loops(home)):
                return None     # copies of GPU-bound loops would be separate launches
            return home.id, cut.coalesce()
    return None


def _skewed(program: Program, statement: str, node: LoopNode) -> bool:
    """Does the loop run along a combination of several of the statement's iterators (a skewed
    or wavefront loop, or a tile of one)? Isolating full tiles under such loops (time tiles of
    a stencil) makes isl's AST build cut the domain into pieces for minutes, and the full tiles
    of a skewed band are parallelograms' insides that gain little from constant bounds."""
    value = map_in(program.params, node.expr(statement))
    return sum(value.involves_dims(isl.dim_type.in_, k, 1)
               for k in range(value.dim(isl.dim_type.in_))) > 1


def _full_set(nest: isl.Map) -> isl.Set:
    """Outer values for which the inner iterations are the full box: every inner dimension
    runs its largest trip count and the points fill the product of their intervals."""
    n = nest.dim(isl.dim_type.out)
    full = nest.domain()
    box = None
    for q in range(n):
        one = out_dims(nest, q)
        lo, hi = one.dim_min(0), one.dim_max(0)
        trip = hi.sub(lo)
        top = _largest(trip)
        if top is None:
            return full.subtract(full)
        full = full.intersect(trip.add_constant_val(isl.Val.int_from_si(trip.get_ctx(), -top))
                              .zero_set())
        interval = isl.Map.universe(one.get_space()).intersect_domain(one.domain())
        interval = interval.lower_bound_multi_pw_aff(isl.MultiPwAff.from_pw_aff(lo))
        interval = interval.upper_bound_multi_pw_aff(isl.MultiPwAff.from_pw_aff(hi))
        box = interval if box is None else box.flat_range_product(interval)
    if box is not None:
        full = full.subtract(box.subtract(nest).domain())
    return full


def _largest(value: isl.PwAff) -> int | None:
    """The largest value over the domain and all parameter values, when it is finite (the
    optimum over the integer points of the value's graph; ``PwAff.max_val`` refuses
    quasi-affine pieces)."""
    img = isl.Map.from_pw_aff(value).range()
    if img.is_empty():
        return None
    var = isl.Aff.var_on_domain(isl.LocalSpace.from_space(img.get_space()), isl.dim_type.set, 0)
    top = img.max_val(var)
    return top.to_python() if top.is_int() else None
