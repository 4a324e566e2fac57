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
from ..ir.loops import LoopKind
from ..ir.traverse import free_vars
from ..ops.knobs import default_lanes
from ..schedule import LoopHandle, Schedule
from ..schedule.sampling import loop_range
from ..schedule.auto import FUSIONS, auto_schedule
from ..schedule.auto_common import handle_of
from ..poly.tree import LoopNode, statements_under
from ..poly.tree import loops as tree_loops

ROW_TILES = 8          # the largest register tile height drawn
VECTORS = (1, 2, 3, 4, 6)
KC = (64, 128, 256, 512)
AUTO_TILES = ("auto", None, 8, 16, 32, 64, 128)
CACHE_SHARES = (0.5, 0.125, 0.25, 1.0)     # of L2, for the cache model's tiles (auto's first)
UNROLLS = (1, 2, 4, 8)


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
    compound: frozenset[str] = frozenset()   # iterators inside a read index that is no iterator
    written: tuple[str | None, ...] = ()     # the iterator per index of the written element
    buffer: str = ""                         # the written buffer


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
    compound = frozenset(v for ld in loads(s.value) for e in ld.indices
                         if not isinstance(e, Var) for v in free_vars(e))
    return BlockShape(block, spatial, reduction, last if last in spatial else None, reads,
                      str(sch.program.buffer(s.buffer).dtype), elementwise, compound,
                      tuple(index_vars), s.buffer)


def vector_choices(sch: Schedule, shape: BlockShape) -> list[str]:
    """The spatial loops that can be a block's vector loop: every operand either ignores the
    loop (its value is broadcast), has it as its last index (contiguous), or is an input
    indexed by it in one dimension (packed so that dimension comes last). The written element's
    last iterator comes first."""
    out = []
    for v in shape.spatial:
        if v in shape.compound:
            continue
        if all(v not in ix or ix[-1] == v or (ix.count(v) == 1 and _is_input(sch, b))
               for b, ix in shape.reads):
            out.append(v)
    if shape.vector in out:
        out.remove(shape.vector)
        out.insert(0, shape.vector)
    return out


def _is_input(sch: Schedule, buffer: str) -> bool:
    return sch.program.buffer(buffer).role.value == "input"


def tileable(sch: Schedule, shape: BlockShape) -> bool:
    """A reduction over a block with a vectorizable spatial loop and another spatial loop."""
    return (bool(shape.reduction) and len(shape.spatial) >= 2
            and bool(vector_choices(sch, shape)))


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
    for block in [b.name for b in sch.blocks()]:
        if not inlinable(sch, block):
            continue
        if sch.sample_categorical([True, False]):
            try:
                sch.compute_inline(block)
            except ScheduleError:
                pass    # a producer read with a shifted window stays a block of its own


def inlinable(sch: Schedule, block: str) -> bool:
    """Whether ``inline_elementwise`` draws a choice for ``block``: an elementwise producer
    that is not an output.

    >>> import polyloop as pl
    >>> A = pl.placeholder((8,), name="A"); T = pl.compute((8,), lambda i: A[i] * 2.0, name="T")
    >>> B = pl.compute((8,), lambda i: T[i] + 1.0, name="B")
    >>> sch = pl.Schedule(B)
    >>> inlinable(sch, "T"), inlinable(sch, "B")
    (True, False)
    """
    outputs = {b.name for b in sch.program.arg_buffers()}
    return (block not in outputs and bool(sch.get_consumers(block))
            and block_shape(sch, block).elementwise)


def multi_level_tile(sch: Schedule, shape: BlockShape) -> None:
    """Register tiling of a reduction block ("SSRSRS"): spatial loops outermost, then the
    reduction, then a ``rows x vectors x lanes`` tile held in a local buffer (``cache_write
    "local"``, laid out with the vector loop last). The vector loop is drawn among
    ``vector_choices``; an input it indexes in another dimension than the last is packed
    (``transform_layout``) so the loop runs along its last one, and an input it already runs
    along may be packed into panels; packing may happen per panel, by the thread that owns it.
    The vector blocks may run outermost (a thread keeps its panel of a packed operand); the row
    tile and the vectors are unrolled, the lanes vectorized, the outermost loop with several
    iterations parallel; elementwise consumers are applied as the tile is written back."""
    block = shape.name
    vecs = vector_choices(sch, shape)
    vec = vecs[sch.sample_categorical(list(range(len(vecs))), [3.0] + [1.0] * (len(vecs) - 1))
               ] if len(vecs) > 1 else vecs[0]
    lanes = default_lanes(shape.dtype)
    rows = [v for v in shape.spatial if v != vec]
    row = rows[sch.sample_categorical(list(range(len(rows))), _last_heavy(len(rows)))]
    nv = sch.sample_categorical(list(VECTORS))
    packed = _pack_operands(sch, shape, vec, row, nv * lanes)
    tile = sch.cache_write(block, "local")
    _vector_last(sch, shape, vec)
    c = sch.get_block(block)
    by_name = {loop.name: loop for loop in sch.get_loops(c)}
    r0, r1, r2 = sch.split(by_name[row], factors=sch.sample_perfect_tile(
        by_name[row], n=3, max_innermost=ROW_TILES))
    v0, v1, v2 = sch.split(by_name[vec], factors=[None, nv, lanes])
    outer = [by_name[s] for s in shape.spatial if s not in (row, vec)]
    reds = [by_name[r] for r in shape.reduction]
    blocks_first = bool(outer) and sch.sample_categorical([False, True])
    order = [v0, *outer] if blocks_first else [*outer, v0]
    sch.reorder(*order, r0, r1, *reds, r2, v1, v2)
    par = _parallel_loop(sch, order)
    sch.parallel(par)
    sch.unroll(r2)
    sch.unroll(v1)
    sch.vectorize(v2)
    if any(st.block_name == block and st.is_init for st in sch.program.statements):
        sch.decompose_reduction(c, reds[0])
    for consumer in sch.get_consumers(tile):     # readers of the written-back result
        if block_shape(sch, consumer.name).elementwise:
            try:
                sch.reverse_compute_inline(consumer)
            except ScheduleError:
                pass    # it reads more than the element: it stays a nest of its own
    sch.reverse_compute_at(tile, r1)
    # a packed panel made inside the parallel loop of its vector blocks: by the thread using it
    if packed and par.id == v0.id and sch.sample_categorical([True, False]):
        for buffer in packed:
            sch.compute_at(f"{buffer}_packed_in", par)


def separate_nest(sch: Schedule, shape: BlockShape) -> Schedule:
    """Loop fission: give the block loops of its own where it shares them with other blocks
    (a script's ``C[i, j] *= beta`` beside the ``k`` loop of its update), innermost first so
    that the split propagates outwards; a split that breaks a dependence is not made. Returns
    the schedule to go on with (a copy when something was split)."""
    main = [s for s in sch.program.statements if s.block_name == shape.name][-1].name
    changed = True
    while changed:
        changed = False
        for node in reversed(sch.state.stmt_path(main)):
            k = next(i for i, c in enumerate(node.children) if main in statements_under(c))
            others = [i for i, c in enumerate(node.children) if i != k and any(
                sch.program.statement(st).block_name != shape.name
                for st in statements_under(c))]
            for cut in [c for c in (k + 1, k) if others and 0 < c < len(node.children)]:
                trial = sch.copy()
                try:
                    trial.distribute(handle_of(node), cut)
                except ScheduleError:
                    continue
                sch, changed = trial, True
                break
            if changed:
                break
    return sch


def _pack_operands(sch: Schedule, shape: BlockShape, vec: str, row: str, width: int
                   ) -> list[str]:
    """Pack the inputs read along ``vec`` into panels of ``width`` elements with ``vec``'s
    dimension last: always those ``vec`` indexes in another dimension, by a draw the first
    one it indexes last (matmul's B). The names of the packed buffers."""
    must = [(b, ix.index(vec)) for b, ix in shape.reads
            if vec in ix and ix[-1] != vec and _is_input(sch, b)]
    may = [(b, len(ix) - 1) for b, ix in shape.reads
           if ix and ix[-1] == vec and row not in ix and _is_input(sch, b)]
    chosen = list(dict(must))
    if may and sch.sample_categorical([True, False]):
        chosen.append(may[0][0])
    at = dict(must + may)
    for buffer in chosen:
        p = at[buffer]
        sch.transform_layout(shape.name, buffer, lambda *x, p=p: (
            x[p] // width, *x[:p], *x[p + 1:], x[p] % width))
    return chosen


def _vector_last(sch: Schedule, shape: BlockShape, vec: str) -> None:
    """Lay the local tile out with the vector loop's dimension last (the lanes of one
    element of the other loops are then contiguous)."""
    if vec == shape.vector:
        return
    p = shape.written.index(vec)
    sch.transform_layout(shape.name, f"{shape.buffer}_local",
                         lambda *x: (*x[:p], *x[p + 1:], x[p]))


def parallel_serial_nests(sch: Schedule) -> None:
    """Each loop nest at the top of the schedule that has no parallel loop and belongs to one
    block (a padding copy beside a tiled block, say) may run its outermost loop with several
    iterations in parallel (a drawn choice; a loop that carries a dependence stays serial)."""
    for node in sch.state.root.children:
        if not isinstance(node, LoopNode) or _has_parallel(node):
            continue
        owners = {sch.program.statement(s).block_name for s in statements_under(node)}
        if len(owners) != 1 or not sch.sample_categorical([True, False]):
            continue
        loops = sch.get_loops(owners.pop())
        try:
            sch.parallel(_parallel_loop(sch, loops[:2]))
        except ScheduleError:
            pass    # it carries a dependence: the nest stays serial


def _has_parallel(node: LoopNode) -> bool:
    return node.kind is LoopKind.PARALLEL or any(
        _has_parallel(c) for c in node.children if isinstance(c, LoopNode))


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
    """``pl.auto_schedule`` with its decisions drawn: the fusion strategy, the tile size (from
    the cache model, one size for every band, or no tiling: with it goes time tiling), the
    share of L2 the cache model's tiles fill (its sizes for smaller or larger tiles: a tile
    loop with fewer iterations than threads is a parallel loop without work) and whether to
    look for parallel loops (no: no wavefront skew either); then the innermost loops unrolled
    by a drawn factor."""
    fusion = sch.sample_categorical(list(FUSIONS), [1.0, 2.0, 1.0])
    tile = sch.sample_categorical(list(AUTO_TILES))
    share = sch.sample_categorical(list(CACHE_SHARES), [2.0, 1.0, 1.0, 1.0])
    parallel = sch.sample_categorical([True, False], [3.0, 1.0])
    out = auto_schedule(sch, fusion=str(fusion), tile=tile, parallel=bool(parallel),
                        cache_share=float(share))
    unroll_innermost(out)
    return out


def unroll_innermost(sch: Schedule) -> None:
    """Unroll every innermost serial loop by one drawn factor (1: not at all); a loop the
    factor does not suit stays as it is."""
    factor = sch.sample_categorical(list(UNROLLS), [3.0] + [1.0] * (len(UNROLLS) - 1))
    if factor == 1:
        return
    for node in [n for n in tree_loops(sch.state.root) if n.kind is LoopKind.SERIAL
                 and not any(isinstance(c, LoopNode) for c in n.children)]:
        try:
            sch.unroll(handle_of(node), int(factor))
        except ScheduleError:
            pass    # e.g. fewer iterations than the factor
