# SPDX-License-Identifier: Apache-2.0
"""The space of GPU schedules (targets ``"opencl"`` and ``"cuda"``), by rules over a program's
blocks like the CPU space (``rules``), drawing GPU decisions instead:

- a reduction block with two spatial loops (``rules.tileable``: matmul, batched matmul,
  convolutions) gets a thread tile: the row loop split into work-groups x work-items x a
  per-item tile, the vector loop likewise, other spatial loops fused onto ``blockIdx.z``, the
  first reduction loop split into steps whose inner loop is unrolled; each work-item keeps its
  ``rows x columns`` tile in private memory (``cache_write "local"``, a drawn choice) with the
  tile's rows unrolled and its columns vectorized; elementwise consumers are applied as the
  tile is written back. Or, another drawn choice, shared tiles: the reduction step loop runs
  around the work-items, and each step copies what it reads of every operand into the
  work-group's shared memory (``cache_read "shared"``, ``compute_at(..., recompute=True)``),
  the copy spread over the work-items, who then accumulate in place;
- every other loop nest has its leading spatial loops (two fused, a drawn choice) spread over
  work-groups of a drawn number of work-items; a nest whose loop carries a dependence stays
  in one work-item (the refusal is caught: the nest is left as it is);
- elementwise producers are inlined (``rules.inline_elementwise``).

Every primitive checks legality, so a drawn schedule computes what the program says.

>>> import polyloop as pl
>>> from polyloop.tune.space import draw
>>> A = pl.placeholder((40, 40), name="A"); B = pl.placeholder((40, 40), name="B")
>>> k = pl.reduce_axis((0, 40), name="k")
>>> C = pl.compute((40, 40), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
>>> "threadIdx.x" in str(draw(pl.to_program(C), gpu_space, seed=0))
True
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.loops import LoopKind
from ..schedule import LoopHandle, Schedule
from . import rules
from .rules import BlockShape

GPU_TARGETS = ("opencl", "cuda")
ITEMS_X = (4, 8, 16, 32, 64)      # work-items of a work-group along the vector loop
ITEMS_Y = (1, 2, 4, 8, 16)        # ... along the row loop
ITEM_TILE = (1, 2, 4)             # elements per work-item along each of them
K_STEPS = (1, 2, 4, 8, 16)        # the unrolled inner part of the first reduction loop
FLAT_ITEMS = (32, 64, 128, 256)   # work-items of a group for the other nests
MAX_ITEMS = 256                   # work-items per group (a limit every device here meets)


def gpu_space(sch: Schedule) -> Schedule:
    """The rule-generated GPU space of ``sch``'s program (see the module docstring).

    >>> import polyloop as pl
    >>> from polyloop.tune.space import draw
    >>> A = pl.placeholder((100,), name="A"); B = pl.compute((100,), lambda i: A[i] + 1.0, name="B")
    >>> "threadIdx.x" in str(draw(pl.to_program(B), gpu_space, seed=0))
    True
    """
    rules.inline_elementwise(sch)
    for shape in [rules.block_shape(sch, b.name) for b in sch.blocks()]:
        # the thread tile's column loop is the written element's last iterator
        if rules.tileable(sch, shape) and shape.vector is not None:
            thread_tile(sch, shape)
    for block in [b.name for b in sch.blocks()]:
        if not any(_bound(sch, loop) for loop in sch.get_loops(block)):
            spread(sch, block)
    return sch


def thread_tile(sch: Schedule, shape: BlockShape) -> None:
    """Work-groups x work-items x a per-item register tile for a reduction block."""
    block, vec = shape.name, shape.vector
    others = [s for s in shape.spatial if s != vec]
    # the spatial loop nearest the vector loop is the likeliest row loop
    row = others[sch.sample_categorical(list(range(len(others))), [1.0] * (len(others) - 1)
                                        + [3.0])]
    tx = sch.sample_categorical(list(ITEMS_X))
    ty = sch.sample_categorical([y for y in ITEMS_Y if tx * y <= MAX_ITEMS])
    ti, tj = sch.sample_categorical(list(ITEM_TILE)), sch.sample_categorical(list(ITEM_TILE))
    kstep = sch.sample_categorical(list(K_STEPS))
    local = sch.sample_categorical([True, False], [3.0, 1.0])
    shared = sch.sample_categorical([False, True])
    # a work-group's shared tiles are filled once per reduction step, so the step loop runs
    # around the work-items, which then accumulate in place (no private tile across steps)
    tile = sch.cache_write(block, "local") if local and not shared else None
    c = sch.get_block(block)
    by_name = {loop.name: loop for loop in sch.get_loops(c)}
    by, iy, ri = sch.split(by_name[row], factors=[None, ty, ti])
    bx, ix, rj = sch.split(by_name[vec], factors=[None, tx, tj])
    ko, ki = sch.split(by_name[shape.reduction[0]], factors=[None, kstep])
    outer = [by_name[s] for s in shape.spatial if s not in (row, vec)]
    rest = [by_name[r] for r in shape.reduction[1:]]
    if shared:
        sch.reorder(*outer, by, bx, ko, iy, ix, ki, *rest, ri, rj)
    else:
        sch.reorder(*outer, by, bx, iy, ix, ko, ki, *rest, ri, rj)
    sch.unroll(ki)
    sch.unroll(ri)
    sch.vectorize(rj)
    if not shared:      # (with shared tiles the initialization is a nest of its own)
        sch.decompose_reduction(c, ko)
    if tile is not None:
        for consumer in sch.get_consumers(tile):      # readers of the written-back tile
            if rules.block_shape(sch, consumer.name).elementwise:
                try:
                    sch.reverse_compute_inline(consumer)
                except ScheduleError:
                    pass    # it reads more than the element: it stays a nest of its own
        sch.reverse_compute_at(tile, ix)
    copies = shared_tiles(sch, shape, ko, ty, tx) if shared else []
    # bound last: each later primitive would check the bound loops again (exact dataflow)
    if outer:
        sch.bind(sch.fuse(*outer) if len(outer) > 1 else outer[0], "blockIdx.z")
    for loop, axis in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (iy, "threadIdx.y"),
                       (ix, "threadIdx.x")):
        sch.bind(loop, axis)
    for copy_y, copy_x in copies:
        if copy_y is not None:
            sch.bind(copy_y, "threadIdx.y")
        sch.bind(copy_x, "threadIdx.x")


def shared_tiles(sch: Schedule, shape: BlockShape, ko: LoopHandle, ty: int, tx: int
                 ) -> list[tuple[LoopHandle | None, LoopHandle]]:
    """Copy what each step ``ko`` of the reduction reads of every operand into the
    work-group's shared memory, once per step (``compute_at(..., recompute=True)``), each
    copy's elements spread over the ``ty x tx`` work-items; returns the loops to bind.
    An operand whose copy a primitive refuses (a region it cannot tile) is read in place."""
    out = []
    for buffer in dict.fromkeys(b for b, _ in shape.reads if b != shape.buffer):
        try:    # on a copy first: a refusal midway must not leave the schedule half changed
            _shared_tile(sch.copy(), shape.name, buffer, ko, ty, tx)
        except ScheduleError:
            continue
        out.append(_shared_tile(sch, shape.name, buffer, ko, ty, tx))
    return out


def _shared_tile(sch: Schedule, block: str, buffer: str, ko: LoopHandle, ty: int, tx: int
                 ) -> tuple[LoopHandle | None, LoopHandle]:
    copy = sch.cache_read(block, buffer, "shared")
    sch.compute_at(copy, ko, recompute=True)
    dims = sch.get_loops(copy)[-sch.program.buffer(buffer).ndim:]    # the copy's own loops
    flat = sch.fuse(*dims) if len(dims) > 1 else dims[0]
    if ty == 1:
        _, copy_x = sch.split(flat, factors=[None, tx])
        return None, copy_x
    _, copy_y, copy_x = sch.split(flat, factors=[None, ty, tx])
    return copy_y, copy_x


def spread(sch: Schedule, block: str) -> None:
    """Spread the leading spatial loops of ``block``'s nest over work-groups and work-items
    (the first two fused, a drawn choice); a nest whose loop carries a dependence is left
    serial (one work-item), as the build would leave it."""
    shape = rules.block_shape(sch, block)
    lead: list[LoopHandle] = []
    for loop in sch.get_loops(block):
        if loop.name not in shape.spatial:
            break
        lead.append(loop)
    if not lead:
        return
    fuse = len(lead) > 1 and sch.sample_categorical([True, False])
    items = sch.sample_categorical(list(FLAT_ITEMS))
    try:    # on a copy first: a refusal midway must not leave the nest half changed
        _spread(sch.copy(), lead, fuse, items)
    except ScheduleError:
        return      # a dependence (or a nest shape) that keeps it in one work-item
    _spread(sch, lead, fuse, items)


def _spread(sch: Schedule, lead: list[LoopHandle], fuse: bool, items: int) -> None:
    outer = sch.fuse(lead[0], lead[1]) if fuse else lead[0]
    groups, threads = sch.split(outer, factors=[None, items])
    sch.bind(groups, "blockIdx.x")
    sch.bind(threads, "threadIdx.x")


def _bound(sch: Schedule, loop: LoopHandle) -> bool:
    node = sch.state.loop(loop.id)
    return node is not None and node.kind is LoopKind.THREAD
