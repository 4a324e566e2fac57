# SPDX-License-Identifier: Apache-2.0
"""``pl.auto_schedule``: a polyhedral (Pluto-style) schedule, written as ordinary primitives.

>>> import polyloop as pl
>>> @pl.script
... def stencil(A: pl.Buffer[("n", "n"), "float64"]):
...     for i in range(1, n):
...         for j in range(1, n):
...             A[i, j] = A[i - 1, j] + A[i, j - 1]
>>> sch = pl.auto_schedule(stencil, tile=None)
>>> print(sch.trace)
sch.skew(l0, l1, factor=1)
sch.reorder(l1, l0)
sch.parallel(l0)

The steps, each an ordinary primitive recorded in ``sch.trace`` and checked by the same
legality test as a hand-written schedule (so the result can be printed, edited and replayed):

1. **Fusion** of neighbouring loop nests (at the top and inside every loop), level by level:
   ``shift`` the second nest by the
   smallest offset (an int or a size expression such as ``K - 1``, computed from the exact
   dependences) that keeps every dependence pointing forward, then ``merge``.
   ``fusion="min"`` keeps the nests as written; ``"max"`` fuses whenever a bounded shift exists
   (locality first); ``"smart"`` fuses only loops of nearly equal extents, without a shift,
   and when the fused outer loop carries no new dependence (parallelism first), except that
   (a) the sweeps (of 1-D or 2-D grids) inside a time loop are fused with shifts, as with
   ``"max"``, so that the time loop and the sweeps form one band that can be tiled in time,
   and (b) a nest whose
   loops have reuse only tiling captures (a matrix product) is not fused with its neighbours.
   With ``"smart"``, **loop fission** (``distribute``) then gives such a nest loops of its own
   when it shares a loop with other statements (the initialisation next to a matrix product),
   so that all its loops form one band.
2. **Band transformation**: for each perfectly nested band, isl's scheduler (validity,
   proximity and coincidence = the dependences the band carries) finds a unimodular change of
   basis; it is applied as ``reverse``/``skew`` steps and one ``reorder``. Supported: every
   transformation whose rows, reordered, form a triangular matrix (interchange, reversal,
   skewing, wavefronts); another one leaves the band as written, with an
   ``AutoScheduleWarning`` that shows the matrix (each step must be legal on its own, and the
   intermediate schedules of a general unimodular decomposition need not be).
3. **Tiling** of permutable bands, with ``split`` and ``reorder``: parallel tile loops
   outermost, and inside a tile the loop with the most stride-1 accesses innermost
   (preferring one that carries nothing, so it can be vectorized). ``tile="auto"`` (the
   default) uses a cache model (``poly.locality``): a band is tiled only when some access
   reuses data that one iteration of its outer loop pushes out of cache (L2, or L1 for a
   column walk; a matrix-vector product is not tiled), with per-loop sizes whose data fits
   half of L2 and that bring the fewest cache lines per iteration. An int tiles every band
   with that size; loops with a constant extent of at most the size are kept whole.
4. **Parallelism**: the outermost loop (tile loop) of a band that carries no dependence is
   made ``parallel``; when there is none, a wavefront (``skew`` + ``reorder``) of the band's
   two outer (tile) loops exposes one, and only then a loop inside the tiles; failing that,
   the bands below are tried (e.g. the space loops inside a time loop), where only loops that
   contain loops are made parallel (a lone loop only when it is long enough).
5. **Vectorization** of innermost loops that walk the written element with stride 1 and carry
   no dependence.

Not done (yet): register tiling (``cache_write`` + ``unroll``, as in ``cli.
schedule_matmul_relu``) for symbolic sizes, and choosing between fusion strategies by
measuring.
"""
from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

from ..errors import PolyloopError, ScheduleError
from ..ir.loops import LoopKind
from ..poly import affine, band_transform, fusion_shifts, locality
from ..poly.tree import LoopNode, loops, statements_under
from . import state as st
from . import verdicts as vd
from .schedule import Schedule
from .trace import LoopHandle

FUSIONS = ("min", "smart", "max")


class AutoScheduleWarning(UserWarning):
    """A choice of isl's scheduler that ``auto_schedule`` could not express as primitives."""
TARGETS = ("c",)


def auto_schedule(program: Any, target: str = "c", *, fusion: str = "smart",
                  tile: int | str | None = "auto", parallel: bool = True,
                  vectorize: bool = True) -> Schedule:
    """An automatic schedule for ``program`` (a Program, e.g. from ``@pl.script``, or output
    tensors), as a ``pl.Schedule`` whose trace lists the primitives used (see the module
    docstring). ``tile="auto"`` sizes tiles from a cache model, an int tiles every permutable
    band with that size, ``tile=None`` disables tiling; ``parallel=False`` disables parallel
    loops and wavefronts."""
    if target not in TARGETS:
        raise PolyloopError(f"auto_schedule: unknown target {target!r}; valid targets: "
                            + ", ".join(TARGETS))
    if fusion not in FUSIONS:
        raise PolyloopError(f"auto_schedule: fusion must be one of {', '.join(FUSIONS)}; got "
                            f"{fusion!r}")
    if tile is not None and tile != "auto" and (not isinstance(tile, int)
                                                or isinstance(tile, bool) or tile < 2):
        raise PolyloopError(f"auto_schedule: tile is \"auto\", a size >= 2 or None, got "
                            f"{tile!r}")
    sch = program.copy() if isinstance(program, Schedule) else Schedule(program)
    if fusion != "min":
        sch = _fuse_nests(sch, fusion)
    if fusion == "smart":
        sch = _distribute_deep_nests(sch)
    for top in [c for c in sch.state.root.children if isinstance(c, LoopNode)]:
        sch = _schedule_band(sch, top.id, tile, parallel)
    if vectorize:
        _vectorize(sch)
    return sch


def _handle(node: LoopNode) -> LoopHandle:
    return LoopHandle(node.id, node.name)


def _attempt(sch: Schedule, steps) -> tuple[Schedule, Any] | None:
    """Run ``steps(trial)`` on a copy: (the copy, what steps returned) if every primitive was
    accepted, else None (the schedule is left as it was)."""
    trial = sch.copy()
    try:
        result = steps(trial)
    except ScheduleError:
        return None
    return trial, result


# -- 1. fusion ---------------------------------------------------------------------------------

def _spine(node: LoopNode, last: bool) -> list[LoopNode]:
    out = [node]
    while True:
        kids = out[-1].children
        nxt = kids[-1] if last else kids[0]
        if not isinstance(nxt, LoopNode):
            return out
        out.append(nxt)


def _fuse_nests(sch: Schedule, fusion: str) -> Schedule:
    """Fuse neighbouring nests at the top level, then inside every loop (e.g. the space loops
    inside a time loop)."""
    context = fusion_shifts.parameter_context(sch.program)
    sch = _fuse_children(sch, None, fusion, context)
    for loop_id in [n.id for n in loops(sch.state.root)]:
        if sch.state.loop(loop_id) is not None:
            sch = _fuse_children(sch, loop_id, fusion, context)
    return sch


def _fuse_children(sch: Schedule, parent: int | None, fusion: str, context: Any) -> Schedule:
    k = 0
    while True:
        node = sch.state.loop(parent) if parent is not None else None
        kids = node.children if node is not None else sch.state.root.children
        outer = sch.state.path(parent) if parent is not None else []
        if k + 1 >= len(kids):
            return sch
        a, b = kids[k], kids[k + 1]
        if not (isinstance(a, LoopNode) and isinstance(b, LoopNode)):
            k += 1
            continue
        first, second = _spine(a, last=True), _spine(b, last=False)
        shifts = fusion_shifts.merge_shifts(sch.program, sch.state.deps, outer, first, second,
                                        context)
        plain = fusion == "smart" and not _time_loop(sch, node)
        if plain and (_has_deep_reuse(sch, a) or _has_deep_reuse(sch, b)):
            k += 1      # fusing would keep the nest from becoming a band of its own (tiled)
            continue
        if plain:
            keep = 0
            while keep < len(shifts) and shifts[keep].offset == 0 and \
                    (keep > 0 or shifts[0].exact_zero) and \
                    fusion_shifts.conformable(sch.program, first[keep], second[keep], context):
                keep += 1
            shifts = shifts[:keep]
        merged = _attempt(sch, lambda t: _merge(t, first, second, shifts)) if shifts else None
        if merged is None:
            k += 1
        else:
            sch = merged[0]     # then try the fused nest with the next one


def _time_loop(sch: Schedule, node: LoopNode | None) -> bool:
    """Is ``node`` a loop that carries a dependence around nests that, fused with shifts into
    one band with it, would have reuse worth tiling (a time loop around stencil sweeps)? Its
    body is fused as with ``fusion="max"``: the way to tile in time."""
    if node is None or any(len(sch.state.path(leaf.id)) > 3 for leaf in loops(node)):
        # sweeps of 3-D grids: time tiles whose data fits L2 are too thin to vectorize well
        return False
    return vd.check_parallel(sch.state, node) is not None and _has_deep_reuse(sch, node)


def _merge(sch: Schedule, first: list[LoopNode], second: list[LoopNode],
           shifts: list[fusion_shifts.Shift]) -> None:
    for a, b, sh in zip(first, second, shifts):
        if sh.offset != 0:
            sch.shift(_handle(b), sh.offset)
        sch.merge(_handle(a), _handle(b))


def _distribute_deep_nests(sch: Schedule) -> Schedule:
    """Loop fission where it makes a deep perfect band: a loop whose body holds, beside other
    statements or loops, a perfect nest that would form a band of at least 3 loops with the
    loops above it (the matmul pattern: an initialisation next to a reduction) is split so
    that nest gets loops of its own (innermost loops first, so that fission propagates up)."""
    changed = True
    while changed:
        changed = False
        for node in reversed(list(loops(sch.state.root))):
            if sch.state.loop(node.id) is None or len(node.children) < 2:
                continue
            depth = len(sch.state.path(node.id))
            for k, child in enumerate(node.children):
                if not isinstance(child, LoopNode) or depth + len(_chain(sch, child.id)) < 3 \
                        or not _nest_pays(sch, child):
                    continue
                cuts = [c for c in (k, k + 1) if 0 < c < len(node.children)]
                done = _attempt(sch, lambda t: _split_out(t, node, cuts))  # noqa: B023
                if done is not None:
                    sch, changed = done[0], True
                    break
            if changed:
                break
    return sch


def _nest_pays(sch: Schedule, node: LoopNode) -> bool:
    """Would the loops around and inside ``node`` (down to its perfect nest's body), as one
    band, have reuse that only tiling captures (see ``locality.tiling_pays``)?"""
    band = sch.state.path(node.id) + _chain(sch, node.id)[1:]
    groups = locality.access_groups(sch.program, [], band)
    extents = [_model_extent(sch, n) for n in band]
    return locality.tiling_pays(groups, extents, cache_sizes()[1] // 2)


def _has_deep_reuse(sch: Schedule, top: LoopNode) -> bool:
    """Does a statement under ``top`` sit in 3 or more loops that, made one band, would need
    tiling to capture their reuse (a matrix product, not a matrix-vector product)?"""
    for leaf in loops(top):
        if any(isinstance(c, LoopNode) for c in leaf.children):
            continue
        band = sch.state.path(leaf.id)
        if len(band) >= 3:
            groups = locality.access_groups(sch.program, [], band)
            extents = [_model_extent(sch, n) for n in band]
            if locality.tiling_pays(groups, extents, cache_sizes()[1] // 2):
                return True
    return False


def _split_out(sch: Schedule, node: LoopNode, cuts: list[int]) -> None:
    """Distribute ``node`` at the child positions ``cuts`` (ascending)."""
    loop = _handle(node)
    for c in reversed(cuts):
        loop, _ = sch.distribute(loop, at=c)


# -- 2-4. bands: transformation, tiling, parallelism ------------------------------------------------

def _chain(sch: Schedule, loop_id: int) -> list[LoopNode]:
    """The perfectly nested loops from ``loop_id`` down."""
    node = sch.state.loop(loop_id)
    assert node is not None
    out = [node]
    while len(out[-1].children) == 1 and isinstance(out[-1].children[0], LoopNode):
        out.append(out[-1].children[0])
    return out


def _schedule_band(sch: Schedule, first_id: int, tile: int | str | None,
                   parallel: bool) -> Schedule:
    """Transform, tile and parallelize the perfectly nested band starting at loop ``first_id``,
    then the bands below it (``parallel``: no loop above is parallel yet)."""
    band = _chain(sch, first_id)
    depth = len(sch.state.path(first_id)) - 1
    transform = band_transform.band_transform(sch.program, sch.state.deps,
                                         sch.state.path(first_id)[:-1], band)
    order = [n.id for n in band]
    perm = min(transform.permutable, len(band))
    if perm == len(band) >= 2:      # any order is legal: parallel rows outermost
        transform = _reordered(transform, sorted(range(perm),
                                                 key=lambda k: not transform.coincident[k]))
        if not isinstance(tile, int):
            transform = _locality_last(sch, band, transform, keep_parallel=parallel)
    done = _attempt(sch, lambda t: _transform(t, band, transform))
    if done is not None:
        sch, order = done
    else:
        perm = 0
    sizes = None
    outside = len(order)        # loops outside the tiles: all of them until tiling succeeds
    if tile is not None and perm >= 2:
        coincident = list(transform.coincident[:perm])
        sizes = _tile_sizes(sch, order[:perm], tile, coincident)
    tiled = None
    if sizes is not None:
        tiled = _attempt(sch, lambda t: _tile(t, order[:perm], sizes, coincident))
    if tiled is not None:
        sch, (tile_order, outside) = tiled
        order = tile_order + order[perm:]
    else:   # not tiled, or the tiling was refused: the band stays as it is
        outside = len(order)
    if parallel:
        sch, found = _parallelize(sch, order, perm >= 2, nested=depth > 0, outside=outside)
        parallel = not found
    top = sch.state.path(order[-1])[depth]
    for child in [c for c in _chain(sch, top.id)[-1].children if isinstance(c, LoopNode)]:
        sch = _schedule_band(sch, child.id, tile, parallel)
    return sch


def _reordered(t: band_transform.BandTransform, keep: list[int]) -> band_transform.BandTransform:
    return band_transform.BandTransform(tuple(t.rows[k] for k in keep), t.permutable,
                                   tuple(t.coincident[k] for k in keep))


def _locality_last(sch: Schedule, band: list[LoopNode], t: band_transform.BandTransform, *,
                   keep_parallel: bool) -> band_transform.BandTransform:
    """In a fully permutable band that isl only permutes, put the loop with the best spatial
    locality (stride-1 accesses) innermost, unless it is the only parallel loop and the band
    still needs one (``keep_parallel``)."""
    if any(sorted(map(abs, r)) != [0] * (len(r) - 1) + [1] for r in t.rows):
        return t
    column = [next(c for c, v in enumerate(r) if v) for r in t.rows]
    scores = [locality.locality_score(sch.program, band[c]) for c in column]
    best = max(range(len(scores)), key=lambda k: (scores[k], k))
    keep = [k for k in range(len(scores)) if k != best] + [best]
    if best == len(scores) - 1 or (keep_parallel and t.coincident[best]
                                   and not t.coincident[keep[0]]):
        return t
    return _reordered(t, keep)


def _transform(sch: Schedule, band: list[LoopNode], t: band_transform.BandTransform) -> list[int]:
    """Apply the unimodular rows to the band: at most one reorder, then ``skew`` and ``reverse``
    steps, then one reorder. Returns the loop ids in their new order (the band as written when
    the rows are not triangular in some order)."""
    ids = [n.id for n in band]
    picks = None if t.is_identity else _triangular_order(t.rows)
    if picks is None:
        if not t.is_identity:
            warnings.warn(AutoScheduleWarning(
                f"auto_schedule: isl's change of basis for the band of loops "
                f"{', '.join(n.name for n in band)} has rows {[list(r) for r in t.rows]}, which "
                "are triangular in no order, so it cannot be applied as reorder/skew/reverse "
                "steps that are each legal; the band is left as written (its tiling and "
                "parallelism are still tried). Apply a transformation by hand if it matters."),
                stacklevel=4)
        return ids
    cols = [band[c] for _, c in picks]      # loop c_k will compute row r_k
    if [n.id for n in cols] != ids:
        sch.reorder(*[_handle(n) for n in cols])
    # innermost first, so that every skew adds an outer loop's original value
    for k in reversed(range(len(picks))):
        r, c = picks[k]
        row, target = t.rows[r], band[c]
        sign = row[c]
        for j in range(k):
            col = picks[j][1]
            if row[col]:
                sch.skew(_handle(band[col]), _handle(target), row[col] * sign)
        if sign == -1:
            sch.reverse(_handle(target))
    final = [band[c] for _, c in sorted(picks)]     # position p holds the loop computing row p
    if [n.id for n in final] != [n.id for n in cols]:
        sch.reorder(*[_handle(n) for n in final])
    return [n.id for n in final]


def _triangular_order(rows: tuple[tuple[int, ...], ...]) -> list[tuple[int, int]] | None:
    """(row, column) pairs such that rows and columns taken in this order form a lower
    triangular matrix with diagonal +-1; None if there is no such order."""
    left_rows, left_cols = set(range(len(rows))), set(range(len(rows)))
    picked: list[tuple[int, int]] = []
    while left_rows:
        found = None
        for r in sorted(left_rows):
            nz = [c for c in sorted(left_cols) if rows[r][c] != 0]
            if len(nz) == 1 and abs(rows[r][nz[0]]) == 1:
                found = (r, nz[0])
                break
        if found is None:
            return None
        picked.append(found)
        left_rows.discard(found[0])
        left_cols.discard(found[1])
    return picked


def _extent(sch: Schedule, node: LoopNode) -> int | None:
    """The loop's constant trip count over all its statements, if it has one."""
    worst = 0
    for s, e in node.exprs:
        lo, hi = affine.value_range(sch.program, s, e)
        if lo is None or hi is None:
            return None
        worst = max(worst, hi - lo + 1)
    return worst


def _model_extent(sch: Schedule, node: LoopNode) -> int | None:
    """The extent the cache model assumes: the constant one, a window loop's (short), or None
    (large)."""
    extent = _extent(sch, node)
    if extent is None and locality.is_window_loop(sch.program, node):
        return locality.WINDOW_EXTENT
    return extent


def _tile(sch: Schedule, ids: list[int], sizes: list[int],
          coincident: list[bool]) -> tuple[list[int], int]:
    """Split the permutable loops ``ids`` by ``sizes`` and move the tile loops outside; loops
    of at most their size stay whole, outermost. Returns the new order of the loops and how
    many of them run outside the tiles."""
    nodes = [sch.state.loop(i) for i in ids]
    small = [n for n, t in zip(nodes, sizes)
             if (x := _extent(sch, n)) is not None and x <= t]  # type: ignore[arg-type]
    big = [(n, t, c) for n, t, c in zip(nodes, sizes, coincident) if n not in small]
    if len(big) < 2:
        raise ScheduleError("nothing worth tiling")
    outers, inners = [], []
    for n, t, c in big:
        o, i = sch.split(_handle(n), [None, t])  # type: ignore[arg-type]
        outers.append(o)
        inners.append((_inner_key(sch, n, c), len(inners), i))  # type: ignore[arg-type]
    # tile loops keep the band's order (parallel first); inside a tile the loop with the best
    # spatial locality runs innermost (where it can be vectorized)
    order = [_handle(n) for n in small] + outers + [i for _, _, i in sorted(inners)]  # type: ignore[arg-type]
    sch.reorder(*order)
    return [h.id for h in order], len(small) + len(outers)


def _inner_key(sch: Schedule, node: LoopNode, coincident: bool) -> tuple[bool, int]:
    """Sort key of the loops inside a tile (the largest runs innermost): spatial locality,
    and among loops that help it, one that carries nothing (so it can be vectorized)."""
    score = locality.locality_score(sch.program, node)
    return (score > 0 and coincident, score)


def _tile_sizes(sch: Schedule, ids: list[int], tile: int | str,
                coincident: list[bool]) -> list[int] | None:
    """One size per loop of the permutable band ``ids``: ``tile`` when it is an int; with
    ``"auto"``, from the cache model (None: tiling cannot pay, the band has no reuse that its
    loops miss)."""
    if isinstance(tile, int):
        return [tile] * len(ids)
    nodes = [sch.state.loop(i) for i in ids]
    outer = sch.state.path(ids[0])[:-1]
    groups = locality.access_groups(sch.program, outer, nodes)  # type: ignore[arg-type]
    extents = [_model_extent(sch, n) for n in nodes]  # type: ignore[arg-type]
    # a tile's data should stay in L2; a column walk loses its cache lines once they leave L1
    l1, l2 = cache_sizes()
    budget = l2 // 2
    if not locality.tiling_pays(groups, extents, budget, l1_bytes=l1 // 2):
        return None
    keys = [_inner_key(sch, n, c) for n, c in zip(nodes, coincident)]  # type: ignore[arg-type]
    innermost = max(range(len(ids)), key=lambda k: (keys[k], -k))
    return list(locality.tile_sizes(groups, extents, budget, innermost))


@functools.lru_cache(maxsize=1)
def cache_sizes() -> tuple[int, int]:
    """(L1 data, L2) bytes per core of this machine, from Linux's sysfs; 32 KiB and 1 MiB
    where it does not say."""
    found = {1: 32 * 1024, 2: 1024 * 1024}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in base.glob("index*") if base.is_dir() else ():
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        if level in found and kind in ("Data", "Unified") and text.rstrip("KM").isdigit():
            found[level] = int(text.rstrip("KM")) * scale
    return found[1], found[2]


def _parallelize(sch: Schedule, ids: list[int], permutable: bool, *,
                 nested: bool, outside: int) -> tuple[Schedule, bool]:
    """The outermost loop of ``ids`` that carries nothing becomes parallel; failing that, a
    wavefront of the first two (permutable) loops makes the second one parallel; failing
    that, a loop inside the tiles (``ids[outside:]``). Inside a serial loop (``nested``), a
    loop is worth a parallel region only if it contains loops: one pass of a single loop is
    too little work for the threads to meet every iteration."""
    sch, found = _parallel_loop(sch, ids[:outside], nested=nested)
    if found:
        return sch, True
    if permutable and len(ids) >= 2:
        def wavefront(t: Schedule) -> None:
            a, b = _handle(t.state.loop(ids[0])), _handle(t.state.loop(ids[1]))  # type: ignore[arg-type]
            t.skew(a, b, 1)
            t.reorder(b, a)
            t.parallel(a)
        done = _attempt(sch, wavefront)
        if done is not None:
            return done[0], True
    return _parallel_loop(sch, ids[outside:], nested=True)


PARALLEL_MIN_ITERATIONS = 1 << 15


def _big_enough(sch: Schedule, node: LoopNode) -> bool:
    """Is a loop without inner loops long enough to pay for starting threads? Sizes unknown
    when scheduling count as long enough only where the loop is all the nest does."""
    extent = _extent(sch, node)
    if extent is not None:
        return extent >= PARALLEL_MIN_ITERATIONS
    return len(sch.state.root.children) == 1


def _parallel_loop(sch: Schedule, ids: list[int], *, nested: bool) -> tuple[Schedule, bool]:
    for i in ids:
        node = sch.state.loop(i)
        if not any(isinstance(c, LoopNode) for c in node.children) and \
                (nested or not _big_enough(sch, node)):  # type: ignore[arg-type]
            continue
        done = _attempt(sch, lambda t: t.parallel(_handle(node)))  # noqa: B023
        if done is not None:
            return done[0], True
    return sch, False


# -- 5. vectorization -------------------------------------------------------------------------------

def _vectorize(sch: Schedule) -> None:
    for node in list(loops(sch.state.root)):
        if node.kind is not LoopKind.SERIAL or any(isinstance(c, LoopNode) for c in node.children):
            continue
        if not all(locality.stride_one(sch.program, s, node.expr(s))
                   for s in statements_under(node)):
            continue
        try:
            sch.vectorize(_handle(node))
        except ScheduleError:
            pass
