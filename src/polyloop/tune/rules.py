# SPDX-License-Identifier: Apache-2.0
"""The rules a generated space applies to the blocks of a program. Each rule reads the shape of
a block (its spatial and reduction loops, the buffers it reads), draws its choices with the
sampling primitives and applies ordinary primitives; a primitive that refuses makes the drawn
schedule invalid (the search records it and moves on).

>>> import polyloop as pl
>>> from polyloop.tune.rules import block_shape
>>> A = pl.placeholder((8, 8), name="A"); B = pl.placeholder((8, 8), name="B")
>>> k = pl.reduce_axis((0, 8), name="k")
>>> C = pl.compute((8, 8), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
>>> block_shape(pl.Schedule(C), "C").reduction
('k',)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ScheduleError
from ..intrin import TILES, gemm_intrin, host_kind
from ..intrin.matmul import schedule_matmul
from ..ir.expr import Const, Var, loads
from ..ops.knobs import default_lanes
from ..schedule import LoopHandle, Schedule
from ..schedule.sampling import loop_range
from ..schedule.auto import FUSIONS, auto_schedule

ROW_TILES = 8          # the largest register tile height drawn
VECTORS = (1, 2, 3, 4, 6)
KC = (64, 128, 256, 512)
AUTO_TILES = ("auto", None, 16, 32, 64)


@dataclass(frozen=True, slots=True)
class BlockShape:
    """What the rules need to know of a block: its loops by role and its operands."""
    name: str
    spatial: tuple[str, ...]          # iterators that index the written element, in order
    reduction: tuple[str, ...]
    vector: str | None                # the spatial iterator of the written element's last index
    reads: tuple[tuple[str, tuple[str | None, ...]], ...]   # buffer, iterator per index
    dtype: str
    elementwise: bool                 # no reduction, one statement, writes [iters]


def block_shape(sch: Schedule, block: str) -> BlockShape:
    """The roles of a block's loops (from its main statement)."""
    stmts = [s for s in sch.program.statements if s.block_name == block and not s.is_init]
    s = stmts[-1]
    index_vars = [e.name if isinstance(e, Var) else None for e in s.indices]
    spatial = tuple(v for v in s.iters if v in index_vars)
    reduction = tuple(v for v in s.iters if v not in spatial)
    last = index_vars[-1] if index_vars else None
    reads = tuple((ld.buffer, tuple(e.name if isinstance(e, Var) else None for e in ld.indices))
                  for ld in loads(s.value))
    elementwise = (len(stmts) == 1 and s.reduction is None
                   and tuple(index_vars) == tuple(s.iters))
    return BlockShape(block, spatial, reduction, last if last in spatial else None, reads,
                      str(sch.program.buffer(s.buffer).dtype), elementwise)


def tileable(shape: BlockShape) -> bool:
    """A reduction over a block with a vectorizable spatial loop and another spatial loop."""
    return bool(shape.reduction) and shape.vector is not None and len(shape.spatial) >= 2


def matmul_like(sch: Schedule, shape: BlockShape) -> bool:
    """``C[i, j] += A[i, k] * B[k, j]`` with constant sizes that hold a full register tile."""
    if len(shape.spatial) != 2 or len(shape.reduction) != 1 or len(shape.reads) != 2:
        return False
    (i, j), (k,) = shape.spatial, shape.reduction
    if [r[1] for r in shape.reads] != [(i, k), (k, j)] or shape.dtype != "float32":
        return False
    rows, cols = gemm_intrin().extents[:2]
    dims = [sch.program.buffer(shape.name).shape[0], sch.program.buffer(shape.name).shape[1]]
    return all(isinstance(d, Const) and d.value >= m for d, m in zip(dims, (rows, cols)))


def inline_elementwise(sch: Schedule) -> None:
    """Auto-inline: each elementwise producer that is not an output may be inlined into its
    consumers (a drawn choice)."""
    outputs = {b.name for b in sch.program.arg_buffers()}
    for block in [b.name for b in sch.blocks()]:
        if block in outputs or not sch.get_consumers(block):
            continue
        if not block_shape(sch, block).elementwise:
            continue
        if sch.sample_categorical([True, False]):
            try:
                sch.compute_inline(block)
            except ScheduleError:
                pass    # a producer read with a shifted window stays a block of its own


def multi_level_tile(sch: Schedule, shape: BlockShape) -> None:
    """Register tiling of a reduction block: spatial loops outermost, then the reduction, then
    a ``rows x vectors x lanes`` tile held in a local buffer (``cache_write "local"``); the
    operand read along the vector loop may be packed into panels (``transform_layout``), per
    panel by the thread that owns it; the row tile and the vectors unrolled, the lanes
    vectorized, the outermost loop parallel; elementwise consumers applied as the tile is
    written back."""
    block, vec = shape.name, shape.vector
    lanes = default_lanes(shape.dtype)
    row = shape.spatial[:-1][sch.sample_categorical(list(range(len(shape.spatial) - 1)),
                                                    _last_heavy(len(shape.spatial) - 1))]
    nv = sch.sample_categorical(list(VECTORS))
    nr = nv * lanes
    packable = [b for b, ix in shape.reads if ix and ix[-1] == vec and row not in ix
                and sch.program.buffer(b).role.value == "input"]
    packed = packable[0] if packable and sch.sample_categorical([True, False]) else None
    if packed is not None:
        sch.transform_layout(block, packed, lambda *x: (x[-1] // nr, *x[:-1], x[-1] % nr))
    tile = sch.cache_write(block, "local")
    c = sch.get_block(block)
    by_name = {loop.name: loop for loop in sch.get_loops(c)}
    r0, r1, r2 = sch.split(by_name[row], factors=sch.sample_perfect_tile(
        by_name[row], n=3, max_innermost=ROW_TILES))
    v0, v1, v2 = sch.split(by_name[vec], factors=[None, nv, lanes])
    outer = [by_name[s] for s in shape.spatial if s not in (row, vec)]
    reds = [by_name[r] for r in shape.reduction]
    sch.reorder(*outer, v0, r0, r1, *reds, r2, v1, v2)
    par = _parallel_loop(sch, [*outer, v0])
    sch.parallel(par)
    sch.unroll(r2)
    sch.unroll(v1)
    sch.vectorize(v2)
    sch.decompose_reduction(c, reds[0])
    for consumer in sch.get_consumers(tile):     # readers of the written-back result
        if block_shape(sch, consumer.name).elementwise:
            try:
                sch.reverse_compute_inline(consumer)
            except ScheduleError:
                pass    # it reads more than the element: it stays a nest of its own
    sch.reverse_compute_at(tile, r1)
    if packed is not None and sch.sample_categorical([True, False]):
        sch.compute_at(f"{packed}_packed_in", par)


def _parallel_loop(sch: Schedule, candidates: list[LoopHandle]) -> LoopHandle:
    """The outermost loop that has more than one iteration (a batch of one is not parallel
    work); the innermost candidate when none has."""
    for loop in candidates:
        lo, hi = loop_range(sch, loop)
        if lo is None or hi is None or hi > lo:
            return loop
    return candidates[-1]


def _last_heavy(count: int) -> list[float]:
    """Draw weights favouring the spatial loop nearest the vector loop as the row loop."""
    return [1.0] * (count - 1) + [3.0]


def micro_kernel(sch: Schedule, shape: BlockShape) -> None:
    """Tensorize a matmul-like block with one of the built-in gemm micro-kernels."""
    kind = host_kind()
    rows, cols = TILES[kind][sch.sample_categorical(list(range(len(TILES[kind]))))]
    kc = sch.sample_categorical(list(KC))
    k_outer = sch.sample_categorical([False, True])
    schedule_matmul(sch, shape.name, gemm_intrin(kind, rows=rows, cols=cols), kc=kc,
                    k_outer=k_outer)


def polyhedral(sch: Schedule) -> Schedule:
    """``pl.auto_schedule`` with its fusion strategy and tile size drawn."""
    fusion = sch.sample_categorical(list(FUSIONS), [1.0, 2.0, 1.0])
    tile = sch.sample_categorical(list(AUTO_TILES))
    return auto_schedule(sch, fusion=str(fusion), tile=tile)
