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
   (a) the sweeps inside a time loop (one that writes the same elements at every step) are
   fused with constant shifts at every level but the innermost, so that the time loop and the
   rows form one band tiled in time while each sweep keeps a clean stride-1 innermost loop
   (vectorized), and (b) a nest whose
   loops have reuse only tiling captures (a matrix product) is not fused with its neighbours.
   With ``"smart"``, **loop fission** (``distribute``) then gives such a nest loops of its own
   when it shares a loop with other statements (the initialisation next to a matrix product),
   so that all its loops form one band.
2. **Register tiling** of a rectangular contraction (``X[.., i, j] += ...`` over a reduction
   loop, ``auto_register``): a ``rows x vectors x lanes`` tile of ``X`` (from the machine's
   vector registers and width, ``util.machine``) is loaded into a local copy, updated over the
   whole reduction and stored back; its outer loop runs in parallel.
3. **Band transformation**: for each perfectly nested band, isl's scheduler (validity,
   proximity and coincidence = the dependences the band carries) finds a unimodular change of
   basis; it is applied as ``reverse``/``skew`` steps and one ``reorder``. Supported: every
   transformation whose rows, reordered, form a triangular matrix (interchange, reversal,
   skewing, wavefronts); another one leaves the band as written, with an
   ``AutoScheduleWarning`` that shows the matrix (each step must be legal on its own, and the
   intermediate schedules of a general unimodular decomposition need not be).
4. **Tiling** of permutable bands, with ``split`` and ``reorder``: parallel tile loops
   outermost, and inside a tile the loop with the most stride-1 accesses innermost
   (preferring one that carries nothing, so it can be vectorized). ``tile="auto"`` (the
   default) uses a cache model (``poly.locality``, with this machine's L1 and L2): a band is
   tiled only when some access reuses data that one iteration of its outer loop (with the
   whole range of the loops below the band) pushes out of cache (L2, or L1 for a column walk;
   a matrix-vector product is not tiled), with per-loop sizes whose data fits half of L2 and
   that bring the fewest cache lines per iteration; a band with loops below it is tiled only
   in time (around sweeps kept whole). An int tiles every band with that size; loops with a
   constant extent of at most the size are kept whole.
5. **Parallelism**: the outermost loop (tile loop) of a band that carries no dependence is
   made ``parallel``; when there is none, a wavefront (``skew`` + ``reorder``) of the band's
   two outer (tile) loops exposes one (a band that only a wavefront makes parallel is tiled
   by 32 for it when the cache model leaves it whole: the threads then meet once per diagonal
   of tiles, not once per diagonal of iterations), and only then a loop inside the tiles;
   failing that,
   the bands below are tried (e.g. the space loops inside a time loop), where only loops that
   contain loops are made parallel (a lone loop only when it is long enough). A parallel
   loop over a triangle is marked ``balanced`` (its iterations are handed out in chunks), and
   the C target runs a parallel loop on one thread when a call gives it too little work
   (``codegen.parallel``).
6. **Vectorization** of innermost loops that walk the written element with stride 1 and carry
   no dependence.

Not done (yet): register tiling of triangular contractions (syrk, syr2k) and of reductions
into one element (a dot product: its sum is not vectorized), and choosing between fusion
strategies by measuring.
"""
from __future__ import annotations

from typing import Any

from .. import config
from ..errors import PolyloopError, ScheduleError
from ..ir.loops import LoopKind
from ..poly import locality
from ..poly.tree import LoopNode, loops, statements_under
from .auto_band import parallel_loop, schedule_band
from .auto_common import AutoScheduleWarning, handle_of, machine
from .auto_fusion import has_deep_reuse, distribute_deep_nests, fuse_nests
from .auto_register import contraction, register_tile
from .schedule import Schedule

__all__ = ["AutoScheduleWarning", "FUSIONS", "TARGETS", "auto_schedule", "balance"]

FUSIONS = ("min", "smart", "max")
TARGETS = ("c",)


def auto_schedule(program: Any, target: str = "c", *, fusion: str = "smart",
                  tile: int | str | None = "auto", parallel: bool = True,
                  vectorize: bool = True, cache_share: float = 0.5) -> Schedule:
    """An automatic schedule for ``program`` (a Program, e.g. from ``@pl.script``, or output
    tensors), as a ``pl.Schedule`` whose trace lists the primitives used (see the module
    docstring). ``tile="auto"`` sizes tiles from a cache model, an int tiles every permutable
    band with that size, ``tile=None`` disables tiling; ``parallel=False`` disables parallel
    loops and wavefronts (as does running on one thread: ``POLYLOOP_NUM_THREADS=1``).
    ``cache_share`` (with ``tile="auto"``): the share of L2 the data of one tile fills (the
    cache model sizes tiles for it; smaller shares make smaller tiles, ``pl.tune`` draws it).

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n, n), "float32", name="A")
    >>> B = pl.compute((n, n), lambda i, j: A[j, i] + 1.0, name="B")
    >>> print(pl.auto_schedule(B, tile=None).trace)
    sch.parallel(l0)
    sch.vectorize(l1)
    >>> print(pl.auto_schedule(B, tile=32).trace)
    l2, l3 = sch.split(l0, factors=[None, 32])
    l4, l5 = sch.split(l1, factors=[None, 32])
    sch.reorder(l2, l4, l3, l5)
    sch.parallel(l2)
    sch.vectorize(l5)
    """
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
    if isinstance(cache_share, bool) or not isinstance(cache_share, (int, float)) or \
            not 0 < cache_share <= 1:
        raise PolyloopError(f"auto_schedule: cache_share is a share of L2 in (0, 1], got "
                            f"{cache_share!r}")
    sch = program.copy() if isinstance(program, Schedule) else Schedule(program)
    # one thread (POLYLOOP_NUM_THREADS=1, or one core): a parallel loop would only cost
    parallel = parallel and config.CONFIG.threads > 1
    in_time: frozenset[int] = frozenset()
    if fusion != "min":
        sch, in_time = fuse_nests(sch, fusion)
    if fusion == "smart":
        sch = distribute_deep_nests(sch, in_time)
    for top in [c for c in sch.state.root.children if isinstance(c, LoopNode)]:
        tiled = _register_tiled(sch, top, parallel) if tile == "auto" else None
        sch = tiled if tiled is not None else schedule_band(sch, top.id, tile, parallel,
                                                             in_time, cache_share)
    if vectorize:
        _vectorize(sch)
    balance(sch)
    return sch


def balance(sch: Schedule) -> None:
    """Parallel loops over a triangle hand out their iterations in chunks (``balanced``): the
    threads then finish together, and one the system deschedules does not hold up the rest.
    (Also applied to the tuner's schedules: ``tune.space``.)"""
    for node in list(loops(sch.state.root)):
        if node.kind is LoopKind.PARALLEL and locality.unequal_iterations(
                sch.program, sch.state.path(node.id)[:-1], node):
            sch.annotate(handle_of(node), "balanced", "dynamic")


def _register_tiled(sch: Schedule, top: LoopNode, parallel: bool) -> Schedule | None:
    """The nest at ``top`` register-tiled when it is a contraction with reuse that its loops
    as written miss (``auto_register``), its outermost loop with work parallel; None when it is
    no such nest or a primitive refuses."""
    found = contraction(sch, top)
    if found is None or not has_deep_reuse(sch, top):
        return None
    done = register_tile(sch, top, found, machine())
    if done is None:
        return None
    out, outside = done
    if parallel:
        out, _ = parallel_loop(out, outside, nested=False)
    return out


# -- 5. vectorization -------------------------------------------------------------------------------

def _vectorize(sch: Schedule) -> None:
    for node in list(loops(sch.state.root)):
        if node.kind is not LoopKind.SERIAL or any(isinstance(c, LoopNode) for c in node.children):
            continue
        if not all(locality.stride_one(sch.program, s, node.expr(s))
                   for s in statements_under(node)):
            continue
        try:
            sch.vectorize(handle_of(node))
        except ScheduleError:
            pass
