# SPDX-License-Identifier: Apache-2.0
"""Spatial locality and the cache model automatic scheduling uses (``pl.auto_schedule``,
``schedule/auto.py``): which loop is best innermost (``locality_score``, ``stride_one``),
whether a band has reuse that only tiling captures (``tiling_pays``), the tile sizes whose data
fits in cache (``tile_sizes``), and loops that walk a convolution window (``is_window_loop``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Sequence

import islpy as isl

from ..ir.expr import Var, free_vars
from ..ir.program import Program
from .access import accesses, domain
from .affine import determined_by, prefix_map, value_range
from .isl_util import map_in
from .tree import LoopNode, statements_under


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


def loop_iterator(program: Program, stmt: str, expr) -> str | None:
    """The iterator of the statement that the loop expression equals (a loop as written),
    or None.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n, n), "float32", name="A")
    >>> prog = pl.to_program(pl.compute((n, n), lambda i, j: A[j, i], name="B"))
    >>> loop_iterator(prog, "B", "{ B[i, j] -> [(j)] }"), loop_iterator(prog, "B", "{ B[i, j] -> [(i + j)] }")
    ('j', None)
    """
    s = program.statement(stmt)
    m = map_in(program.params, expr).intersect_domain(domain(program, s))
    for it in s.iters:
        plain = map_in(program.params, f"{{ {s.name}[{', '.join(s.iters)}] -> [({it})] }}")
        if m.is_equal(plain.intersect_domain(domain(program, s))):
            return it
    return None


def separable(program: Program, stmt: str, iters: Sequence[str]) -> bool:
    """Are the bounds of each of ``iters`` in the statement's domain free of its other
    iterators (a rectangle in those dimensions, not a triangle)?

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n, n), "float32", name="A")
    >>> tri = pl.to_program(pl.compute((n, n), lambda i, j: pl.where(j <= i, A[i, j], 0.0),
    ...                                name="B"))
    >>> separable(tri, "B", ["i", "j"])
    True
    """
    s = program.statement(stmt)
    dom = domain(program, s).coalesce()
    wanted = [s.iters.index(v) for v in iters]
    for bset in dom.get_basic_sets():
        for c in bset.get_constraints():
            used = [k for k in range(len(s.iters)) if c.involves_dims(isl.dim_type.set, k, 1)]
            if any(k in wanted for k in used) and len(used) > 1:
                return False
    return True


def unequal_iterations(program: Program, outer: Sequence[LoopNode], loop: LoopNode) -> bool:
    """Do the iterations of ``loop`` (below the loops ``outer``) run different numbers of
    statement instances: does a bound of an iterator left to the loops inside involve an
    iterator that ``loop`` moves (``for j in range(i, n)`` inside a loop over ``i``, or over
    tiles of ``i``)?

    >>> import polyloop as pl
    >>> @pl.script
    ... def tri(A: pl.Buffer[("n", "n"), "float64"]):
    ...     for i in range(n):
    ...         for j in range(i, n):
    ...             A[i, j] = 0.0
    >>> sch = pl.Schedule(tri)
    >>> top = sch.state.root.children[0]
    >>> unequal_iterations(tri, [], top), unequal_iterations(tri, [top], top.children[0])
    (True, False)
    """
    for stmt in statements_under(loop):
        s = program.statement(stmt)
        before = [lp.expr(stmt) for lp in outer]
        fixed = [k for k, it in enumerate(s.iters)
                 if before and determined_by(program, stmt, before, _plain(s, it))]
        m = map_in(program.params, loop.expr(stmt))
        own = [k for k in range(len(s.iters))
               if k not in fixed and m.involves_dims(isl.dim_type.in_, k, 1)]
        inner = [k for k in range(len(s.iters)) if k not in fixed and k not in own]
        for bset in domain(program, s).coalesce().get_basic_sets():
            for c in bset.get_constraints():
                used = {k for k in range(len(s.iters)) if c.involves_dims(isl.dim_type.set, k, 1)}
                if used & set(own) and used & set(inner):
                    return True
    return False


def indexes_written(program: Program, stmt: str, expr) -> bool:
    """Does an iterator the loop expression moves index the element the statement writes?"""
    s = program.statement(stmt)
    m = map_in(program.params, expr)
    moved = {it for k, it in enumerate(s.iters) if m.involves_dims(isl.dim_type.in_, k, 1)}
    return any(moved & free_vars(ix) for ix in s.indices)


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
    inner: tuple[int, ...] = ()   # per index: how far loops below the band move it (0: none)

    def footprint(self, sizes: Sequence[int]) -> int:
        """Bytes of cache a box of ``sizes`` iterations of the band's loops occupies (with the
        whole range of the loops below it): whole cache lines along the last index (walking a
        column costs a line per element)."""
        inner = self.inner or (0,) * len(self.matrix)
        extents = [1 + sum(abs(c) * (t - 1) for c, t in zip(row, sizes)) + spread
                   for row, spread in zip(self.matrix, inner)]
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
    loops (the loops ``outer`` above it fixed), each with how far the loops below the band move
    its indices (a size parameter counts as ``LARGE_EXTENT``). An access that is not affine
    counts as touching one element per iteration of every band loop it may depend on."""
    stmts = set(statements_under(band[-1]))
    m, nb = len(outer), len(band)
    groups: dict[tuple, AccessGroup] = {}
    for a in accesses(program):
        if a.statement not in stmts:
            continue
        s = program.statement(a.statement)
        exprs = [lp.expr(a.statement) for lp in list(outer) + list(band)]
        free = [it for it in s.iters if not determined_by(program, s.name, exprs, _plain(s, it))]
        # the loops, then the iterators they leave free: one point per statement instance
        sched = prefix_map(program, a.statement, exprs + [_plain(s, it) for it in free])
        rel = sched.reverse().apply_range(a.relation)
        rows = _linear_part(rel, 0, m + nb + len(free)) if a.exact else None
        if rows is None:
            matrix = tuple(tuple(1 if k == d else 0 for k in range(nb)) for d in range(nb))
            inner: tuple[int, ...] = ()
        else:
            matrix = tuple(r[m:m + nb] for r in rows)
            inner = tuple(sum(abs(c) * (_extent(program, s, it) - 1)
                              for c, it in zip(r[m + nb:], free)) for r in rows)
        size = program.buffer(a.buffer).dtype.itemsize
        groups.setdefault((a.buffer, matrix, inner), AccessGroup(a.buffer, size, matrix, inner))
    return list(groups.values())


def _plain(s, it: str) -> str:
    """The loop expression of iterator ``it`` of statement ``s``."""
    return f"{{ {s.name}[{', '.join(s.iters)}] -> [({it})] }}"


def _extent(program: Program, s, it: str) -> int:
    """How many values iterator ``it`` takes, ``LARGE_EXTENT`` at most (and for a size)."""
    lo, hi = value_range(program, s.name, _plain(s, it))
    return LARGE_EXTENT if lo is None or hi is None else min(hi - lo + 1, LARGE_EXTENT)


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
