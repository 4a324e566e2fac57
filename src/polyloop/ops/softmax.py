# SPDX-License-Identifier: Apache-2.0
"""Row softmax and its CPU schedule: every row processed while it is in cache.

``softmax(x)[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max_k x[i, k])`` over
the last axis of a 2-D ``x`` (the numerically stable form). Stages: ``softmax_max`` (row
maximum), ``softmax_exp``, ``softmax_sum`` (row sum) and the result ``softmax``, which
multiplies by the reciprocal of the sum (one division per row instead of one per element; the
result may differ from a division by one rounding).

The schedule: rows in parallel, in tasks of ``rows_per_task`` consecutive rows; per row, max,
exp, sum and the normalisation all run in the row's iteration (``compute_at``), the exponentials in a row-local buffer (``cache_write
"local"``: one row per thread, in cache, never written to memory): the row is read from memory
once, by the max pass. The two row reductions are vectorized through ``rfactor`` into
``accumulators`` vectors of ``lanes`` partial maxima / sums (independent chains: the latency of
one max or add does not bound the pass), then a final reduction of the partials: the sum is
reassociated, the schedule's explicit choice. The sum's partials are accumulated in the
exponential's vector loop (``merge`` of the two row loops, ``fuse_sum``): one pass over the
row-local buffer less. The normalisation is vectorized over the whole row (not a split-off
vector), and the result is written with streaming stores (``nontemporal``): the output is not
read again, so its lines are written without first being read (no write-allocate), a third
less memory traffic; the vector loop is peeled at run time until the output row is on a vector
boundary, and the stores are fenced once per task.

Measured on the 2-core AVX-512 host at 4096 x 4096 (interleaved A/B, minima): tasks of 16
rows and the fused sum take 6-7 % off the time of one row per task and separate passes. Two
tried alternatives are slower and not offered: software pipelining across rows (the max pass
of row i + 1 merged chunk by chunk into the exp loop of row i: ``distribute``, ``shift`` and
``merge`` express it) is 8-18 % slower than the plain schedule with one row per task, as its
loads of the next row are demand loads inside the exp loop; with a ``prefetch`` of that row 16
chunks ahead it is 5-13 % faster, about as fast as this schedule. What does help is a
prefetch of the next row's chunk inside the exp loop (``prefetch_next_row``, on by default:
``sch.prefetch("softmax_max_rf", X, j_0, along=<row loop>, locality=2)``): while a chunk's
exponentials are computed, the chunk the max pass of the next row will read at the same index
is fetched; interleaved A/B minima at 4096 x 4096: 7.36 -> 5.54 ms on 2 threads (0.75x),
11.2 -> 8.4 ms on 1 thread (0.75x).

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import softmax, schedule_softmax
>>> X = pl.placeholder((3, 37), name="X")
>>> mod = pl.build(schedule_softmax(softmax(X)))
>>> y = mod(np.zeros((3, 37), "float32"))
>>> round(float(y.sum()), 4), round(float(y[0, 0]) * 37, 4)
(3.0, 1.0)
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import exp
from ..ir.expr import Const
from ..ir.program import BufferRole
from ..schedule import Schedule
from ..schedule.trace import BlockHandle, LoopHandle
from .knobs import check_knobs, default_lanes

STAGES = ("softmax_max", "softmax_exp", "softmax_sum", "softmax")


def softmax(x: Tensor) -> Tensor:
    """Softmax over the last axis of a 2-D tensor ``x``; the result tensor is named ``softmax``.

    >>> import polyloop as pl
    >>> softmax(pl.placeholder((4, 10), name="X"))
    Tensor(softmax: float32[4, 10])
    """
    if not isinstance(x, Tensor) or x.ndim != 2:
        raise ScheduleError(f"softmax: x must be a 2-D tensor, got {x!r}")
    rows, cols = x.shape
    k1 = te.reduce_axis((0, cols), name="k")
    mx = te.compute((rows,), lambda i: te.max(x[i, k1], axis=k1), name=STAGES[0])
    e = te.compute((rows, cols), lambda i, j: exp(x[i, j] - mx[i]), name=STAGES[1])
    k2 = te.reduce_axis((0, cols), name="k")
    total = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name=STAGES[2])
    return te.compute((rows, cols), lambda i, j: e[i, j] * (1.0 / total[i]), name=STAGES[3])


def schedule_softmax(y: Tensor, *, lanes: int | None = None, rfactor: bool = True,
                     accumulators: int = 4, stream: bool = True, rows_per_task: int = 16,
                     fuse_sum: bool = True, prefetch_next_row: bool = True) -> Schedule:
    """The row-in-cache schedule of ``y = softmax(x)`` (see the module docstring).

    ``lanes`` defaults to the host's float32 vector width; ``rfactor=False`` keeps the row
    reductions sequential (scalar, in the original order), as do rows of fewer than
    ``2 * lanes`` columns. ``accumulators``: independent vectors of partial results per row
    reduction (they hide the latency of the max and add chains). ``stream``: the result is
    written with streaming stores (``nontemporal``: it is not read again by the kernel).
    ``rows_per_task``: consecutive rows per iteration of the parallel loop (the streaming
    stores are fenced once per iteration, not once per row). ``fuse_sum``: the row sum's
    partial results are accumulated in the exponential's vector loop (one pass over the row
    instead of two; needs ``rfactor`` and a constant column count). ``prefetch_next_row``:
    in the fused exponential loop, each chunk prefetches the chunk of the next row of the task
    that the max pass will read (``prefetch(..., along=<row loop>)``, locality 2; needs
    ``fuse_sum``).

    >>> import polyloop as pl
    >>> sch = schedule_softmax(softmax(pl.placeholder((8, 40), name="X")), lanes=8)
    >>> [loop.name for loop in sch.get_loops("softmax_max_rf")]
    ['i', 'i', 'k_0', 'k_1', 'k_2']
    """
    if not isinstance(y, Tensor) or y.name != STAGES[3] or y.ndim != 2:
        raise ScheduleError(f"schedule_softmax: expected the result of softmax(x), got {y!r}")
    lanes = default_lanes(str(y.dtype)) if lanes is None else lanes
    check_knobs("schedule_softmax", lanes=lanes, accumulators=accumulators,
                rows_per_task=rows_per_task)
    sch = Schedule(y)
    cols = y.shape[1]
    # A symbolic column count may be 0: then nothing in a row reads the row's max and sum, and
    # compute_at rightly refuses to move them there; each stage then is its own parallel nest.
    in_row = isinstance(cols, Const) and cols.value > 0
    if isinstance(cols, Const) and cols.value < 2 * lanes:
        rfactor = False     # at most one vector of partial results: nothing to gain
    if isinstance(cols, Const):
        # no more accumulators than whole vectors in a row
        accumulators = max(1, min(accumulators, cols.value // (2 * lanes)))
    partials = _partial_reductions(sch, in_row, rfactor, lanes * accumulators)
    i = _row_tasks(sch, y, in_row, rows_per_task, stream)
    if in_row:
        _stages_in_row(sch, i, partials, accumulators, lanes, fuse_sum=fuse_sum,
                       prefetch_next_row=prefetch_next_row)
    else:
        _stages_apart(sch, partials, accumulators, lanes)
    return sch


def _partial_reductions(sch: Schedule, in_row: bool, rfactor: bool,
                        width: int) -> list[BlockHandle]:
    """The exponentials into a row-local buffer (when the stages run in the row's
    iteration), and with ``rfactor`` the row max and sum as ``width`` partial results each:
    returns the blocks of those partial results (max first)."""
    if in_row:
        # exponentials in a row-local buffer: the stage that held them disappears
        sch.compute_inline(sch.cache_write(STAGES[1], "local"))
    partials = []
    if rfactor:
        # rfactor before compute_at: the consumers must not be inside the reduction's nest yet
        for stage in (STAGES[0], STAGES[2]):
            _, k1 = sch.split(sch.get_loops(stage)[-1], factors=[None, width])
            partials.append(sch.rfactor(k1, factor_axis=1))
    return partials


def _row_tasks(sch: Schedule, y: Tensor, in_row: bool, rows_per_task: int,
               stream: bool) -> LoopHandle:
    """The result's rows in parallel tasks of consecutive rows, its stores streamed; returns
    the loop over one row."""
    i, _ = sch.get_loops(STAGES[3])
    task = i
    rows = y.shape[0]
    if isinstance(rows, Const):
        # at least 16 tasks (or one row each) for the threads to share
        rows_per_task = max(1, min(rows_per_task, rows.value // 16))
    if in_row and rows_per_task > 1:
        task, i = sch.split(i, factors=[None, rows_per_task])
    sch.parallel(task)
    if stream:
        sch.annotate(task, "nontemporal", STAGES[3])
    return i


def _stages_in_row(sch: Schedule, i: LoopHandle, partials: list[BlockHandle],
                   accumulators: int, lanes: int, *, fuse_sum: bool,
                   prefetch_next_row: bool) -> None:
    """Every stage in the iteration of row loop ``i``, each row pass vectorized."""
    for block in (STAGES[2], *partials[1:], STAGES[1], STAGES[0], *partials[:1]):
        sch.compute_at(block, i)
    chunk = None
    if fuse_sum and partials:
        chunk = _fuse_exp_and_sum(sch, partials[1], accumulators, lanes)
        partials = partials[:1]
    else:
        # whole rows vectorized (not split): the vector loop peels to an aligned output
        sch.vectorize(sch.get_loops(STAGES[1])[-1])
    sch.vectorize(sch.get_loops(STAGES[3])[-1])
    for block in partials:
        # compute_at gave the block one fresh loop over the row: vectors of
        # ``accumulators x lanes`` columns, each vector into its own accumulator
        _, k_acc, k_lane = sch.split(sch.get_loops(block)[-1],
                                     factors=[None, accumulators, lanes])
        sch.unroll(k_acc)
        sch.vectorize(k_lane)
    if prefetch_next_row and chunk is not None and partials:
        # the max pass of the next row reads chunk k_0 = j_0: fetch it while this row's
        # exponentials (compute-bound) run; the row loop of a task, or the task loop
        sch.prefetch(partials[0], _input_name(sch), chunk,
                     along=i, locality=2)


def _stages_apart(sch: Schedule, partials: list[BlockHandle], accumulators: int,
                  lanes: int) -> None:
    """Each stage its own parallel nest, its inner loop vectorized."""
    for block in (STAGES[1], STAGES[3]):
        sch.vectorize(sch.get_loops(block)[-1])
    for block in (STAGES[0], STAGES[1], STAGES[2], *partials):
        sch.parallel(sch.get_loops(block)[0])
    for block in partials:
        # partial results lane-innermost: the reduction over k_0 outside, the lanes vectorized
        _, _, k1 = sch.get_loops(block)
        k_acc, k_lane = sch.split(k1, factors=[accumulators, lanes])
        sch.unroll(k_acc)
        sch.vectorize(k_lane)


def _fuse_exp_and_sum(sch: Schedule, sum_partials: BlockHandle, accumulators: int,
                      lanes: int) -> LoopHandle:
    """One vector loop per row computes the exponentials and adds them to the sum's partial
    results (``merge`` of the two row loops; the partials' initialisation moved before it).
    Returns the loop over the row's chunks of ``accumulators x lanes`` columns."""
    # compute_at gave each block a loop over its row (one value), then one over the columns:
    # merge the row loops (with the partials' initialisation between them), then the columns
    row = sch.merge(sch.get_loops(STAGES[1])[-2], sch.get_loops(f"{sum_partials.name}_init")[-2])
    row = sch.merge(row, sch.get_loops(sum_partials)[-2])
    sch.decompose_reduction(sum_partials, row)
    cols = sch.merge(sch.get_loops(STAGES[1])[-1], sch.get_loops(sum_partials)[-1])
    _, k_acc, k_lane = sch.split(cols, factors=[None, accumulators, lanes])
    sch.unroll(k_acc)
    sch.vectorize(k_lane)
    return sch.get_loops(STAGES[1])[-3]


def _input_name(sch: Schedule) -> str:
    """The name of the softmax's input buffer (the only input of the program)."""
    return next(b.name for b in sch.program.buffers if b.role is BufferRole.INPUT)
