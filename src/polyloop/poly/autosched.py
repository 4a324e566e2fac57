# SPDX-License-Identifier: Apache-2.0
"""The questions automatic scheduling asks of isl (``pl.auto_schedule`` turns the answers into
ordinary schedule primitives in ``schedule/auto.py``).

* ``merge_shifts``: can two neighbouring loop nests be fused level by level, and by how much
  must the second be shifted so that every dependence between them still points forward?
  (Pluto-style fusion with shifts; isl's own scheduler does not choose parametric shifts such
  as ``K - 1``, so the shifts are computed here from the exact dependences.)
* ``band_transform``: for a perfectly nested band of loops, the unimodular change of basis
  (interchange, skewing, reversal) that isl's scheduler finds for the dependences the band
  carries: permutable (tilable) rows first, parallel (coincident) rows outermost.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import islpy as isl

from ..ir.expr import Var, free_vars
from ..ir.program import Program
from .access import accesses, domain
from .affine import prefix_map
from .deps import Dependence
from .isl_util import CTX, map_in, params_prefix, set_
from .tree import LoopNode, statements_under

# The isl scheduler's options are global to the context: set them for one call, then restore.
_FUSION_OPTIONS = ("schedule_serialize_sccs", "schedule_whole_component",
                   "schedule_outer_coincidence", "schedule_maximize_band_depth")


@dataclass(frozen=True, slots=True)
class Shift:
    """How far the second nest's loop at one level must move: an int, or an affine expression
    of size parameters (``"K - 1"``); ``exact_zero``: every dependence between the nests has
    distance 0 at this level (the merged loop carries nothing new)."""
    offset: int | str
    exact_zero: bool


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


def _deps_between(deps: Sequence[Dependence], sources: set[str],
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
    between = _deps_between(deps, set(statements_under(first[0])),
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


# -- band transformations ------------------------------------------------------------------------

def band_relation(program: Program, deps: Sequence[Dependence], outer: Sequence[LoopNode],
                  band: Sequence[LoopNode]) -> isl.Map | None:
    """``X[l] -> X[l']``: pairs of band points (values of the band's loops) linked by a
    dependence that the loops above the band do not already carry; None if there are none."""
    stmts = set(statements_under(band[0]))
    loops = list(outer) + list(band)
    m = len(outer)
    rel: isl.Map | None = None
    for d in _deps_between(deps, stmts, stmts):
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


def stride_one(program: Program, stmt: str, expr: str) -> bool:
    """Does the loop with this expression walk the statement's written element with stride 1
    (its iterator is the last index of the target)?"""
    s = program.statement(stmt)
    m = map_in(program.params, expr)
    used = [it for k, it in enumerate(s.iters) if m.involves_dims(isl.dim_type.in_, k, 1)]
    if len(used) != 1 or not s.indices:
        return False
    last = s.indices[-1]
    if isinstance(last, Var):
        return last.name == used[0]
    return free_vars(last) == {used[0]} and str(last).startswith(used[0])


def locality_score(program: Program, loop: LoopNode) -> int:
    """How much making ``loop`` innermost helps spatial locality: accesses whose last index
    moves with it (stride 1) minus accesses it moves through another index (a large stride)."""
    score = 0
    for stmt, expr in loop.exprs:
        s = program.statement(stmt)
        m = map_in(program.params, expr)
        used = [it for k, it in enumerate(s.iters) if m.involves_dims(isl.dim_type.in_, k, 1)]
        if len(used) != 1:
            continue
        for ld in [s.target] + s.reads():
            for k, ix in enumerate(ld.indices):
                if used[0] in free_vars(ix):
                    score += 1 if k == len(ld.indices) - 1 else -1
    return score


# -- tile sizes from a cache model -----------------------------------------------------------------

# A size parameter of unknown value is assumed this large when judging whether a loop's data
# fits in cache (the case worth optimising: data sets that leave the cache).
LARGE_EXTENT = 2048
CACHE_LINE = 64
TILE_CANDIDATES = (8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True, slots=True)
class AccessGroup:
    """The accesses to one buffer with one linear part over the band's loops (``A[i - 1, j]``
    and ``A[i + 1, j]`` are one group): ``matrix[r][d]`` is how far index ``r`` moves when band
    loop ``d`` advances by one."""
    buffer: str
    itemsize: int
    matrix: tuple[tuple[int, ...], ...]

    def footprint(self, sizes: Sequence[int]) -> int:
        """Bytes of cache a box of ``sizes`` iterations of the band's loops occupies: whole
        cache lines along the last index (walking a column costs a line per element)."""
        extents = [1 + sum(abs(c) * (t - 1) for c, t in zip(row, sizes)) for row in self.matrix]
        out = -(-extents[-1] * self.itemsize // CACHE_LINE) * CACHE_LINE if extents else 1
        for e in extents[:-1]:
            out *= e
        return out

    @property
    def has_reuse(self) -> bool:
        """Do several band iterations touch the same element (the matrix has a kernel)?"""
        return _rank(self.matrix) < len(self.matrix[0]) if self.matrix else True


def access_groups(program: Program, outer: Sequence[LoopNode],
                  band: Sequence[LoopNode]) -> list[AccessGroup]:
    """The access groups of the statements below ``band[-1]``, in the coordinates of the band's
    loops (the loops ``outer`` above it fixed). An access whose instance the loops do not
    determine, or that is not affine, counts as touching one element per iteration of every
    band loop it may depend on."""
    stmts = set(statements_under(band[-1]))
    m, nb = len(outer), len(band)
    groups: dict[tuple[str, tuple[tuple[int, ...], ...]], AccessGroup] = {}
    for a in accesses(program):
        if a.statement not in stmts:
            continue
        loops = list(outer) + list(band)
        sched = prefix_map(program, a.statement, [lp.expr(a.statement) for lp in loops])
        rel = sched.reverse().apply_range(a.relation)
        matrix = _linear_part(rel, m, nb) if a.exact else None
        if matrix is None:
            matrix = tuple(tuple(1 if k == d else 0 for k in range(nb)) for d in range(nb))
        size = program.buffer(a.buffer).dtype.itemsize
        groups.setdefault((a.buffer, matrix), AccessGroup(a.buffer, size, matrix))
    return list(groups.values())


def _linear_part(rel: isl.Map, m: int, nb: int) -> tuple[tuple[int, ...], ...] | None:
    if not rel.is_single_valued():
        return None
    try:
        pma = rel.as_pw_multi_aff()
    except isl.Error:
        return None
    pieces: list[isl.MultiAff] = []
    pma.foreach_piece(lambda _set, ma: pieces.append(ma))
    if not pieces:
        return None
    ma = pieces[0]
    rows = []
    for r in range(ma.dim(isl.dim_type.out)):
        aff = ma.get_aff(r)
        if aff.dim(isl.dim_type.div):
            return None
        rows.append(tuple(aff.get_coefficient_val(isl.dim_type.in_, m + d).to_python()
                          for d in range(nb)))
    return tuple(rows)


def _rank(matrix: Sequence[Sequence[int]]) -> int:
    rows = [[float(v) for v in r] for r in matrix]
    rank, cols = 0, len(rows[0]) if rows else 0
    for c in range(cols):
        pivot = next((r for r in range(rank, len(rows)) if abs(rows[r][c]) > 1e-9), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for r in range(len(rows)):
            if r != rank and abs(rows[r][c]) > 1e-9:
                f = rows[r][c] / rows[rank][c]
                rows[r] = [x - f * y for x, y in zip(rows[r], rows[rank])]
        rank += 1
    return rank


def tiling_pays(groups: Sequence[AccessGroup], extents: Sequence[int | None],
                cache_bytes: int, *, l1_bytes: int | None = None) -> bool:
    """Is there reuse that the loops as they are miss? Some access touches an element at
    several band iterations (a kernel in its matrix), and one iteration of the outermost band
    loop touches more data than ``cache_bytes``, so the data is gone when it is needed again
    (a matrix-vector product keeps its vector in cache without tiling; a matrix product or a
    time-iterated stencil does not). With ``l1_bytes``: also when the innermost loop walks a
    column (a cache line per element, used again by the next outer iteration) and one outer
    iteration overflows that smaller cache."""
    if not any(g.has_reuse for g in groups) or not groups:
        return False
    full = [LARGE_EXTENT if e is None else e for e in extents]
    inner = [1] + full[1:]
    data = sum(g.footprint(inner) for g in groups)
    if data > cache_bytes:
        return True
    return l1_bytes is not None and data > l1_bytes and any(_walks_column(g) for g in groups)


def _walks_column(g: AccessGroup) -> bool:
    last = len(g.matrix[0]) - 1 if g.matrix else -1
    return last >= 0 and g.matrix[-1][last] == 0 and any(r[last] for r in g.matrix[:-1])


def tile_sizes(groups: Sequence[AccessGroup], extents: Sequence[int | None], cache_bytes: int,
               innermost: int | None) -> tuple[int, ...]:
    """Tile sizes for the band's loops: the box whose data fits in ``cache_bytes`` and that
    brings the fewest bytes per iteration (sum of the groups' footprints over the box's
    volume). Ties go to the larger tile along ``innermost`` (the stride-1 loop: longer vector
    loops), then to the larger box. Loops of at most a candidate's size keep their extent."""
    choices = []
    for d, e in enumerate(extents):
        sizes = [t for t in TILE_CANDIDATES if e is None or t < e] or [e]
        if d == innermost:
            sizes = [t for t in sizes if t >= 16] or sizes
        choices.append(sizes)
    best, best_key = None, None
    for sizes in itertools.product(*choices):
        data = sum(g.footprint(sizes) for g in groups)
        if data > cache_bytes:
            continue
        volume = 1
        for t in sizes:
            volume *= t
        key = (round(data / volume, 6), -(sizes[innermost] if innermost is not None else 0),
               -volume)
        if best_key is None or key < best_key:
            best, best_key = sizes, key
    return tuple(best) if best is not None else tuple(min(c) for c in choices)


WINDOW_EXTENT = 8


def is_window_loop(program: Program, loop: LoopNode) -> bool:
    """Does the loop walk a window (a convolution filter): its iterator never indexes the
    written element, and some read indexes it added to another loop's iterator (``X[h + kh]``)?
    Such loops are short in practice, whatever their symbolic size."""
    combined = False
    for stmt, expr in loop.exprs:
        s = program.statement(stmt)
        m = map_in(program.params, expr)
        used = [it for k, it in enumerate(s.iters) if m.involves_dims(isl.dim_type.in_, k, 1)]
        if len(used) != 1:
            return False
        if any(used[0] in free_vars(ix) for ix in s.target.indices):
            return False
        for ld in s.reads():
            combined |= any(used[0] in free_vars(ix) and len(free_vars(ix) & set(s.iters)) > 1
                            for ix in ld.indices)
    return combined
