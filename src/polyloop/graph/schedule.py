# SPDX-License-Identifier: Apache-2.0
"""Schedules for the kernels of a graph: a general default (parallel outer loop, vectorized
inner loop, elementwise stages inlined, the epilogue computed in the reduction's parallel loop),
or the best schedule of a tuning database when one is given.

Every step is an ordinary schedule primitive, so each is proved legal by polyloop's dependence
analysis; a step it refuses (``ScheduleError``) is skipped and the kernel keeps the rest.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend.te import Tensor
from ..ir.expr import Const, Load, Reduce, ReduceKind, Var, walk
from ..ops.knobs import default_lanes
from ..schedule import Schedule, Trace
from .ir import Op
from .lower import LoweredKernel
from .schedule_reduce import vector_reduction

# A vector loop shorter than this is left scalar (its remainder would dominate).
_MIN_VECTOR = 4
# Columns per parallel panel of a dense layer (4 AVX-512 vectors; a 64-wide row of partial
# sums stays in L1 while the reduction runs).
_PANEL = 64
# A kernel of fewer element operations than this (every stage's points times its reduction
# extents, static sizes) stays on one thread: forking and joining costs microseconds.
SERIAL_WORK = 1 << 16
# A dense layer with at most this many output columns, or with at most this many rows, reads
# its weights as stored (``dense_schedule``): packing them costs a read and a write of every
# weight on each call, more than the product itself at a few rows, and the rows of a narrow
# weight matrix are close enough for the prefetcher.
UNPACKED_COLS = 512
UNPACKED_ROWS = 16
# Vector accumulators of a dense layer's register tile (rows x vectors of columns)
_ACCUMULATORS = 16
# Rows of at most this many elements are reduced and written by one thread, in one loop (a
# longer row's scalar reductions would want vectorizing instead).
SHORT_ROW = 64
# The suffix of a pooling's rows stage (see ``oplib.nn.pool2d``).
ROWS = "_rows"


def stages(results: tuple[Tensor, ...]) -> list[Tensor]:
    """The computed tensors reachable from ``results``, producers first."""
    seen: dict[str, Tensor] = {}
    visiting: set[str] = set()     # the outputs of a tuple reduction read each other

    def visit(t: Tensor) -> None:
        if t.is_placeholder or t.name in seen or t.name in visiting:
            return
        visiting.add(t.name)
        for p in t.inputs:
            visit(p)
        seen[t.name] = t
    for r in results:
        visit(r)
    return list(seen.values())


_REFUSED = object()


def _try(step, *args) -> object:
    """The step's result, or ``_REFUSED`` when the primitive refuses (nothing changed)."""
    try:
        return step(*args)
    except ScheduleError:
        return _REFUSED


def _vector_friendly(t: Tensor) -> bool:
    """Whether a read's last index moves with the last spatial iterator (contiguous lanes)."""
    if not t.iters:
        return False
    last = t.iters[-1]
    for node in walk(t.body):
        if isinstance(node, Load) and node.indices and any(
                isinstance(v, Var) and v.name == last for v in walk(node.indices[-1])):
            return True
    return False


def _extent(t: Tensor, axis: int) -> int | None:
    if not 0 <= axis < t.ndim:      # a scalar has no last axis
        return None
    d = t.shape[axis]
    return d.value if isinstance(d, Const) else None


def work(tensors: list[Tensor]) -> int | None:
    """The element operations of ``tensors`` (points times reduction extents), or None when a
    size is symbolic.

    >>> import polyloop as pl
    >>> a = pl.placeholder((8, 4), "float32", name="a")
    >>> k = pl.reduce_axis((0, 4), name="k")
    >>> work([pl.compute((8,), lambda i: pl.sum(a[i, k], axis=k), name="s")])
    32
    """
    total = 0
    for t in tensors:
        extents = list(t.shape)
        if isinstance(t.body, Reduce):
            extents += list(t.body.extents)
        count = 1
        for d in extents:
            if not isinstance(d, Const):
                return None
            count *= d.value
        total += count
    return total


def _parallel_outer(sch: Schedule, t: Tensor, loops: list, parallel: bool) -> None:
    """Parallelise the outer spatial loops: the two first fused when there are more than two
    (a batch of 1 alone would leave the other cores idle)."""
    if not parallel:
        return
    if t.ndim >= 3:
        fused = _try(sch.fuse, loops[0], loops[1])
        if fused is not _REFUSED:
            _try(sch.parallel, fused)
            return
    _try(sch.parallel, loops[0])


def _schedule_matrix(sch: Schedule, t: Tensor, parallel: bool) -> bool:
    """A 2-D reduction read along its columns (dense layers): column panels of ``_PANEL`` in
    parallel, rows inside, the reduction, then the panel's columns as one vector loop."""
    i, j, *reds = sch.get_loops(t.name)
    parts = _try(sch.split, j, [None, _PANEL])
    if parts is _REFUSED:
        return False
    j0, j1 = parts
    if _try(sch.reorder, j0, i, *reds, j1) is _REFUSED:
        return False
    if parallel:
        _try(sch.parallel, j0)
    if _try(sch.decompose_reduction, t.name, reds[0]) is not _REFUSED:
        _try(sch.vectorize, sch.get_loops(t.name)[-1])
    return True


def _schedule_reduction(sch: Schedule, t: Tensor, parallel: bool) -> Schedule:
    """``sch`` with reduction ``t`` scheduled: vectorized over its innermost axes when those
    read contiguously (``schedule_reduce``), else over its outputs when a read's last index
    moves with them; the schedule returned may be a new one."""
    vectors = vector_reduction(sch, t, parallel=parallel)
    if vectors is not None:
        return vectors
    width = _extent(t, t.ndim - 1)
    friendly = _vector_friendly(t) and (width is None or width >= _MIN_VECTOR)
    if t.ndim == 2 and friendly and _schedule_matrix(sch, t, parallel):
        return sch
    _parallel_outer(sch, t, sch.get_loops(t.name), parallel)
    loops = sch.get_loops(t.name)
    n_red = len(t.body.axes) if isinstance(t.body, Reduce) else 0
    spatial = len(loops) - n_red
    if spatial >= 2 and friendly:
        _try(sch.reorder, *loops[spatial:], loops[spatial - 1])
        if _try(sch.decompose_reduction, t.name, sch.get_loops(t.name)[spatial - 1]) \
                is not _REFUSED:
            _try(sch.vectorize, sch.get_loops(t.name)[-1])
    return sch


def _schedule_injective(sch: Schedule, t: Tensor, parallel: bool) -> None:
    loops = sch.get_loops(t.name)
    if not loops:
        return
    if len(loops) > 1:
        _parallel_outer(sch, t, loops, parallel)
        loops = sch.get_loops(t.name)
    width = _extent(t, t.ndim - 1)
    if len(loops) > 1 and (width is None or width >= _MIN_VECTOR):
        _try(sch.vectorize, loops[-1])


def default_schedule(lk: LoweredKernel) -> Schedule:
    """The default schedule of a lowered kernel (see the module docstring)."""
    sch = Schedule(*lk.results, args=[*lk.params, *lk.results], name=lk.kernel.name)
    results = {t.name for t in lk.results}
    all_stages = stages(lk.results)
    kept = []
    for t in all_stages:
        if t.name in results or isinstance(t.body, Reduce) or t.name.endswith(("_pad", ROWS)):
            kept.append(t)
        elif _try(sch.compute_inline, t.name) is _REFUSED:
            kept.append(t)
    size = work(kept)
    parallel = size is None or size >= SERIAL_WORK
    whole = _dense_product(sch, kept, results, parallel) or _row_reductions(sch, kept, parallel)
    if whole is not None:
        return whole
    reductions = [t for t in kept if isinstance(t.body, Reduce)]
    rows = [t for t in kept if t.name.endswith(ROWS) and t.name not in results]
    for t in kept:
        if t in rows:
            continue
        if t in reductions:
            sch = _schedule_reduction(sch, t, parallel)
        elif not (t.name in results and reductions and _epilogue(sch, t, reductions[-1])):
            _schedule_injective(sch, t, parallel)
    for t in rows:
        if not _rows_at_consumer(sch, t, kept):
            _schedule_injective(sch, t, parallel)
    return sch


def _row_reductions(sch: Schedule, kept: list[Tensor], parallel: bool) -> Schedule | None:
    """A kernel of reductions along the last axis of its one result (softmax, layer norm) on
    short rows: each reduction computed inside the result's loop over rows, so that a row is
    reduced and written by one thread in one parallel loop. None when the kernel is not of
    that form, or a step refuses (on a copy of ``sch``)."""
    *reductions, result = kept
    if result.ndim < 2:
        return None
    lead = [str(d) for d in result.shape[:-1]]
    width = _extent(result, result.ndim - 1)
    if not reductions or width is None or width > SHORT_ROW or result.ndim < 2 \
            or isinstance(result.body, Reduce) or any(
                not isinstance(t.body, Reduce) or [str(d) for d in t.shape] != lead
                or [str(e) for e in t.body.extents] != [str(result.shape[-1])]
                for t in reductions):
        return None
    trial = sch.copy()
    _schedule_injective(trial, result, parallel)
    row = trial.get_loops(result.name)[-2]
    for t in reversed(reductions):     # consumers first: each then has all its readers inside
        if _try(trial.compute_at, t.name, row) is _REFUSED:
            return None
    return trial


def _rows_at_consumer(sch: Schedule, t: Tensor, kept: list[Tensor]) -> bool:
    """Compute a pooling's rows stage inside its consumer, one output row at a time (the row
    then stays in L1), vectorized along the row."""
    consumers = [c for c in kept if any(p.name == t.name for p in c.inputs)]
    if len(consumers) != 1:
        return False
    loops = sch.get_loops(consumers[0].name)
    if len(loops) < 2 or _try(sch.compute_at, t.name, loops[-2]) is _REFUSED:
        return False
    inner = sch.get_loops(t.name)
    width = _extent(t, t.ndim - 1)
    if len(inner) > len(loops) - 1 and (width is None or width >= _MIN_VECTOR):
        _try(sch.vectorize, inner[-1])
    return True


def _epilogue(sch: Schedule, t: Tensor, anchor: Tensor) -> bool:
    """Compute the injective result ``t`` inside the anchor's loops: at the deepest loop
    outside the anchor's reduction that accepts it (its tile is then still in cache)."""
    if t.ndim != anchor.ndim:
        return False
    reds = {v.name for v in anchor.body.axes} if isinstance(anchor.body, Reduce) else set()
    outer = []
    for loop in sch.get_loops(anchor.name):
        if loop.name in reds:
            break
        outer.append(loop)
    for loop in reversed(outer):
        if _try(sch.reverse_compute_at, t.name, loop) is not _REFUSED:
            break
    else:
        return False
    inner = sch.get_loops(t.name)
    width = _extent(t, t.ndim - 1)
    if len(inner) > len(outer) and (width is None or width >= _MIN_VECTOR):
        _try(sch.vectorize, inner[-1])
    return True


def unpacked_dense(rows: int | str, cols: int | str) -> bool:
    """Whether a dense layer of ``rows`` x ``cols`` results (a str: a symbolic size) is
    scheduled by ``dense_schedule`` on its weights as stored rather than by
    ``polyloop.ops.schedule_matmul`` on a packed copy.

    >>> unpacked_dense(64, 100), unpacked_dense(1, 1000), unpacked_dense(128, 3072)
    (True, True, False)
    """
    return (isinstance(cols, int) and cols <= UNPACKED_COLS) or \
        (isinstance(rows, int) and rows <= UNPACKED_ROWS)


def _dense_product(sch: Schedule, kept: list[Tensor], results: set[str],
                   parallel: bool) -> Schedule | None:
    """``dense_schedule`` on a copy of ``sch`` when the kernel is one 2-D sum (a dense layer)
    and at most one elementwise result after it; None when it is not, or a step refuses."""
    product, *rest = kept
    body = product.body
    if len(rest) > 1 or (rest and (rest[0].name not in results or rest[0].ndim != 2)) \
            or product.ndim != 2 or not isinstance(body, Reduce) or len(body.axes) != 1 \
            or body.kind is not ReduceKind.SUM or not _vector_friendly(product):
        return None
    rows = _extent(product, 0)
    cols = _extent(product, 1)
    if not unpacked_dense(rows if rows is not None else "rows", cols or "cols"):
        return None
    trial = sch.copy()
    try:
        dense_schedule(trial, product, rest[0] if rest else None, parallel=parallel)
    except ScheduleError:
        return None
    return trial


def dense_tile(rows: int | None, cols: int | None, lanes: int) -> tuple[int, int]:
    """The register tile of ``dense_schedule`` for ``rows`` x ``cols`` results (None: a
    symbolic size): (rows, vectors of ``lanes`` columns).

    >>> dense_tile(1, 4096, 16), dense_tile(8, 4096, 16), dense_tile(1, 40, 16)
    ((1, 16), (8, 2), (1, 3))
    """
    mr = min(8, rows) if rows is not None else 8
    # one or two rows get panels of 16 accumulators, whose weight rows are read in longer
    # contiguous runs (one row of 9216 x 4096: 19.3 -> 13.6 ms on one thread)
    nr_vectors = _ACCUMULATORS // mr if mr <= 2 else 2
    if cols is not None:
        nr_vectors = max(1, min(nr_vectors, -(-cols // lanes)))
    return mr, nr_vectors


def dense_schedule(sch: Schedule, t: Tensor, epilogue: Tensor | None = None, *,
                   parallel: bool = True, lanes: int | None = None) -> None:
    """Register tiles of a 2-D product ``t[i, j] = sum_k a[i, k] * w[k, j]`` read from ``w`` as
    stored: tiles of up to 8 rows by two vectors, or of one or two rows by 16 / rows vectors
    (of the host's width unless ``lanes`` is given), the reduction inside, the tiles in parallel, and the elementwise
    ``epilogue`` applied as a tile is stored.

    >>> import polyloop as pl
    >>> a = pl.placeholder((3, 40), "float32", name="a")
    >>> w = pl.placeholder((40, 20), "float32", name="w")
    >>> k = pl.reduce_axis((0, 40), name="k")
    >>> t = pl.compute((3, 20), lambda i, j: pl.sum(a[i, k] * w[k, j], axis=k), name="t")
    >>> sch = pl.Schedule(t); dense_schedule(sch, t)
    >>> [loop.name for loop in sch.get_loops("t")][:2]
    ['j_0', 'i_0']
    """
    lanes = default_lanes(str(t.dtype)) if lanes is None else lanes
    rows = _extent(t, 0)
    mr, nr_vectors = dense_tile(rows, _extent(t, 1), lanes)
    tile = sch.cache_write(t.name, "local")
    i, j, k = sch.get_loops(t.name)
    i0, i1 = sch.split(i, factors=[None, mr])
    j0, j1, j2 = sch.split(j, factors=[None, nr_vectors, lanes])
    # the parallel loop: the row tiles when there are several (both threads then read all the
    # weights, from the shared cache), else the column panels
    by_rows = rows is None or rows >= 2 * mr
    outer = i0 if by_rows else j0
    sch.reorder(outer, j0 if by_rows else i0, k, i1, j1, j2)
    if parallel:
        sch.parallel(outer)
    sch.unroll(i1)
    sch.unroll(j1)
    sch.vectorize(j2)
    sch.decompose_reduction(t.name, k)
    if epilogue is not None:
        sch.reverse_compute_inline(sch.get_block(epilogue.name))
    sch.reverse_compute_at(tile, outer)


def call_work(call) -> int | None:
    """The element operations of a graph call (output elements times the products or window
    elements behind each), None for symbolic sizes or a tensor-expression call.

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (1, 6, 1, 1))
    >>> w = b.constant(np.ones((144, 6, 1, 1), "float32"))
    >>> g = b.build(b.emit(pl.graph.Op.CONV2D, x, w, stride=(1, 1), padding=(0, 0),
    ...                    dilation=(1, 1), groups=1))
    >>> call_work(g.bindings[0])
    864
    """
    if call.op is Op.TE:       # a tensor-expression call: its reductions are not known here
        return None
    out = call.outputs[0].type.shape
    dims = list(out)
    name = str(call.op)
    if name == "conv2d":
        dims += list(call.inputs[1].type.shape[1:4])
    elif name in ("matmul", "linear"):
        dims.append(call.inputs[0].type.shape[-1])
    elif "pool" in name:
        inner = call.inputs[0].type.shape[2:]
        dims += list(call.attr("kernel") or ()) if call.attr("kernel") else list(inner)
    elif name in ("softmax", "log_softmax", "layer_norm", "mean", "attention"):
        dims.append(call.inputs[0].type.shape[-1])
    if not all(isinstance(d, int) for d in dims):
        return None
    total = 1
    for d in dims:
        total *= d
    return total


def serial_if_small(sch: Schedule, calls) -> Schedule:
    """``sch`` without its parallel loops when the kernel's calls do fewer than
    ``SERIAL_WORK`` element operations (constant sizes): forking and joining the threads would
    cost more than the work (a squeeze-excitation's convolutions on one pixel). Replays the
    schedule's trace without its ``parallel`` steps; ``sch`` itself when it stays parallel."""
    works = [call_work(c) for c in calls]
    if any(w is None for w in works) or sum(works) >= SERIAL_WORK \
            or not any(s.primitive == "parallel" for s in sch.trace):
        return sch
    steps = tuple(s for s in sch.trace if s.primitive != "parallel")
    return Schedule.from_trace(sch.original, Trace(steps))
