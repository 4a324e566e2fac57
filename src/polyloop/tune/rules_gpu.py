# SPDX-License-Identifier: Apache-2.0
"""The space of GPU schedules (targets ``"opencl"`` and ``"cuda"``), by rules over a program's
blocks like the CPU space (``rules``), drawing GPU decisions instead:

- a reduction block with two spatial loops (``rules.tileable``: matmul, batched matmul,
  convolutions) gets a thread tile: the row loop split into work-groups x work-items x a
  per-item tile, the vector loop likewise, other spatial loops fused onto ``blockIdx.z``, the
  first reduction loop split into steps whose inner loop is unrolled; each work-item keeps its
  ``rows x columns`` tile in private memory (``cache_write "local"``, a drawn choice) with the
  tile's rows unrolled and its columns vectorized; elementwise consumers are applied as the
  tile is written back;
- every other loop nest has its leading spatial loops (two fused, a drawn choice) spread over
  work-groups of a drawn number of work-items; a nest whose loop carries a dependence stays
  in one work-item (the refusal is caught: the nest is left as it is);
- elementwise producers are inlined (``rules.inline_elementwise``).

Every primitive checks legality, so a drawn schedule computes what the program says. Not in
the space yet: copies into a work-group's shared memory (``cache_read "shared"`` at a loop
inside the work-group loops is refused by the dependence check, which does not know the copy
is private to each work-group; the kernel front end's ``add_prefetch`` does this, outside the
schedule's trace).

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
    tile = sch.cache_write(block, "local") if local else None
    c = sch.get_block(block)
    by_name = {loop.name: loop for loop in sch.get_loops(c)}
    by, iy, ri = sch.split(by_name[row], factors=[None, ty, ti])
    bx, ix, rj = sch.split(by_name[vec], factors=[None, tx, tj])
    ko, ki = sch.split(by_name[shape.reduction[0]], factors=[None, kstep])
    outer = [by_name[s] for s in shape.spatial if s not in (row, vec)]
    rest = [by_name[r] for r in shape.reduction[1:]]
    sch.reorder(*outer, by, bx, iy, ix, ko, ki, *rest, ri, rj)
    sch.unroll(ki)
    sch.unroll(ri)
    sch.vectorize(rj)
    sch.decompose_reduction(c, ko)
    if tile is not None:
        for consumer in sch.get_consumers(tile):      # readers of the written-back tile
            if rules.block_shape(sch, consumer.name).elementwise:
                try:
                    sch.reverse_compute_inline(consumer)
                except ScheduleError:
                    pass    # it reads more than the element: it stays a nest of its own
        sch.reverse_compute_at(tile, ix)
    # bound last: each later primitive would check the bound loops again (exact dataflow)
    if outer:
        sch.bind(sch.fuse(*outer) if len(outer) > 1 else outer[0], "blockIdx.z")
    for loop, axis in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (iy, "threadIdx.y"),
                       (ix, "threadIdx.x")):
        sch.bind(loop, axis)


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
