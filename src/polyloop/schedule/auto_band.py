# SPDX-License-Identifier: Apache-2.0
"""Steps 2-4 of ``pl.auto_schedule`` on each perfectly nested band: isl's change of basis as
``reorder``/``skew``/``reverse`` steps, tiling with ``split`` and ``reorder``, and
parallelism (a parallel loop, else a wavefront); see ``schedule/auto.py``."""
from __future__ import annotations

import warnings

from ..errors import ScheduleError
from ..poly import band_transform, locality
from ..poly.tree import LoopNode
from .auto_common import (AutoScheduleWarning, attempt, cache_sizes, constant_extent, handle_of,
                          loop_chain, model_extent)
from .schedule import Schedule


# a band that only a wavefront makes parallel, and that the cache model leaves untiled, is
# tiled by this for the wavefront: one parallel region per diagonal of tiles, each tile's
# iterations in their order (a wavefront of single iterations forks and joins the threads once
# per diagonal of the iteration space: more than the work of a diagonal where there is a loop
# below, as in nussinov, and more than the whole kernel on a loaded machine)
WAVEFRONT_TILE = 32


def schedule_band(sch: Schedule, first_id: int, tile: int | str | None,
                  parallel: bool, in_time: frozenset[int] = frozenset(),
                  cache_share: float = 0.5) -> Schedule:
    """Transform, tile and parallelize the perfectly nested band starting at loop ``first_id``,
    then the bands below it (``parallel``: no loop above is parallel yet). ``in_time``: the
    loops fused to be tiled in time, whose bands are tiled with the sweeps inside whole.
    ``cache_share``: the share of L2 the data of one tile of the cache model's sizes fills."""
    band = loop_chain(sch, first_id)
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
    done = attempt(sch, lambda t: _transform(t, band, transform))
    if done is not None:
        sch, order = done
    else:
        perm = 0
    sizes = None
    outside = len(order)        # loops outside the tiles: all of them until tiling succeeds
    if tile is not None and perm >= 2:
        coincident = list(transform.coincident[:perm])
        sizes = _tile_sizes(sch, order[:perm], tile, coincident,
                            whole_inside=any(n.id in in_time for n in band),
                            cache_share=cache_share)
        if sizes is None and parallel and tile == "auto" and not any(coincident):
            sizes = [WAVEFRONT_TILE] * perm     # only a wavefront makes it parallel: of tiles
    tiled = None
    if sizes is not None:
        tiled = attempt(sch, lambda t: _tile(t, order[:perm], sizes, coincident))
    if tiled is not None:
        sch, (tile_order, outside) = tiled
        order = tile_order + order[perm:]
    else:   # not tiled, or the tiling was refused: the band stays as it is
        outside = len(order)
    if parallel:
        sch, found = _parallelize(sch, order, perm >= 2, nested=depth > 0, outside=outside)
        parallel = not found
    top = sch.state.path(order[-1])[depth]
    for child in [c for c in loop_chain(sch, top.id)[-1].children if isinstance(c, LoopNode)]:
        sch = schedule_band(sch, child.id, tile, parallel, in_time, cache_share)
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
        sch.reorder(*[handle_of(n) for n in cols])
    # innermost first, so that every skew adds an outer loop's original value
    for k in reversed(range(len(picks))):
        r, c = picks[k]
        row, target = t.rows[r], band[c]
        sign = row[c]
        for j in range(k):
            col = picks[j][1]
            if row[col]:
                sch.skew(handle_of(band[col]), handle_of(target), row[col] * sign)
        if sign == -1:
            sch.reverse(handle_of(target))
    final = [band[c] for _, c in sorted(picks)]     # position p holds the loop computing row p
    if [n.id for n in final] != [n.id for n in cols]:
        sch.reorder(*[handle_of(n) for n in final])
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


def _tile(sch: Schedule, ids: list[int], sizes: list[int],
          coincident: list[bool]) -> tuple[list[int], int]:
    """Split the permutable loops ``ids`` by ``sizes`` and move the tile loops outside; loops
    of at most their size stay whole, outermost. Returns the new order of the loops and how
    many of them run outside the tiles."""
    nodes = [sch.state.loop(i) for i in ids]
    small = [n for n, t in zip(nodes, sizes)
             if (x := constant_extent(sch, n)) is not None and x <= t]  # type: ignore[arg-type]
    big = [(n, t, c) for n, t, c in zip(nodes, sizes, coincident) if n not in small]
    if len(big) < 2:
        raise ScheduleError("nothing worth tiling")
    outers, inners = [], []
    for n, t, c in big:
        o, i = sch.split(handle_of(n), [None, t])  # type: ignore[arg-type]
        outers.append(o)
        inners.append((_inner_key(sch, n, c), len(inners), i))  # type: ignore[arg-type]
    # tile loops keep the band's order (parallel first); inside a tile the loop with the best
    # spatial locality runs innermost (where it can be vectorized)
    order = [handle_of(n) for n in small] + outers + [i for _, _, i in sorted(inners)]  # type: ignore[arg-type]
    sch.reorder(*order)
    return [h.id for h in order], len(small) + len(outers)


def _inner_key(sch: Schedule, node: LoopNode, coincident: bool) -> tuple[bool, int]:
    """Sort key of the loops inside a tile (the largest runs innermost): spatial locality,
    and among loops that help it, one that carries nothing (so it can be vectorized)."""
    score = locality.locality_score(sch.program, node)
    return (score > 0 and coincident, score)


def _tile_sizes(sch: Schedule, ids: list[int], tile: int | str, coincident: list[bool], *,
                whole_inside: bool = False, cache_share: float = 0.5) -> list[int] | None:
    """One size per loop of the permutable band ``ids``: ``tile`` when it is an int; with
    ``"auto"``, from the cache model (None: tiling cannot pay, the band has no reuse that its
    loops miss). A band with loops below it is tiled only with ``whole_inside`` (time tiles
    around sweeps kept whole): elsewhere its reuse is along the loops inside, which tiles of
    the band around them do not bring closer."""
    if isinstance(tile, int):
        return [tile] * len(ids)
    nodes = [sch.state.loop(i) for i in ids]
    if not whole_inside and any(isinstance(c, LoopNode) for c in nodes[-1].children):
        return None
    outer = sch.state.path(ids[0])[:-1]
    groups = locality.access_groups(sch.program, outer, nodes)  # type: ignore[arg-type]
    extents = [model_extent(sch, n) for n in nodes]  # type: ignore[arg-type]
    # a tile's data should stay in L2; a column walk loses its cache lines once they leave L1
    l1, l2 = cache_sizes()
    budget = l2 // 2
    if not locality.tiling_pays(groups, extents, budget, l1_bytes=l1 // 2):
        return None
    keys = [_inner_key(sch, n, c) for n, c in zip(nodes, coincident)]  # type: ignore[arg-type]
    innermost = max(range(len(ids)), key=lambda k: (keys[k], -k))
    return list(locality.tile_sizes(groups, extents, int(l2 * cache_share), innermost))


def _parallelize(sch: Schedule, ids: list[int], permutable: bool, *,
                 nested: bool, outside: int) -> tuple[Schedule, bool]:
    """The outermost loop of ``ids`` that carries nothing becomes parallel; failing that, a
    wavefront of the first two (permutable) loops makes the second one parallel; failing
    that, a loop inside the tiles (``ids[outside:]``). Inside a serial loop (``nested``), a
    loop is worth a parallel region only if it contains loops: one pass of a single loop is
    too little work for the threads to meet every iteration."""
    sch, found = parallel_loop(sch, ids[:outside], nested=nested)
    if found:
        return sch, True
    if permutable and len(ids) >= 2:
        def wavefront(t: Schedule) -> None:
            a, b = handle_of(t.state.loop(ids[0])), handle_of(t.state.loop(ids[1]))  # type: ignore[arg-type]
            t.skew(a, b, 1)
            t.reorder(b, a)
            t.parallel(a)
        done = attempt(sch, wavefront)
        if done is not None:
            return done[0], True
    return parallel_loop(sch, ids[outside:], nested=True)


PARALLEL_MIN_ITERATIONS = 1 << 15


def _big_enough(sch: Schedule, node: LoopNode) -> bool:
    """Is a loop without inner loops long enough to pay for starting threads? Sizes unknown
    when scheduling count as long enough only where the loop is all the nest does."""
    extent = constant_extent(sch, node)
    if extent is not None:
        return extent >= PARALLEL_MIN_ITERATIONS
    return len(sch.state.root.children) == 1


def parallel_loop(sch: Schedule, ids: list[int], *, nested: bool) -> tuple[Schedule, bool]:
    """The first loop of ``ids`` made parallel where that is legal and worth it (a loop that
    contains loops; a lone loop only when it is long, and never ``nested`` in a serial one)."""
    for i in ids:
        node = sch.state.loop(i)
        if not any(isinstance(c, LoopNode) for c in node.children) and \
                (nested or not _big_enough(sch, node)):  # type: ignore[arg-type]
            continue
        done = attempt(sch, lambda t: t.parallel(handle_of(node)))  # noqa: B023
        if done is not None:
            return done[0], True
    return sch, False
