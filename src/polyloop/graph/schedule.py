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
from ..ir.expr import Const, Load, Reduce, Var, walk
from ..schedule import Schedule
from .lower import LoweredKernel

# A vector loop shorter than this is left scalar (its remainder would dominate).
_MIN_VECTOR = 4
# Columns per parallel panel of a dense layer (4 AVX-512 vectors; a 64-wide row of partial
# sums stays in L1 while the reduction runs).
_PANEL = 64


def stages(results: tuple[Tensor, ...]) -> list[Tensor]:
    """The computed tensors reachable from ``results``, producers first."""
    seen: dict[str, Tensor] = {}

    def visit(t: Tensor) -> None:
        if t.is_placeholder or t.name in seen:
            return
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
    last = t.iters[-1]
    for node in walk(t.body):
        if isinstance(node, Load) and node.indices and any(
                isinstance(v, Var) and v.name == last for v in walk(node.indices[-1])):
            return True
    return False


def _extent(t: Tensor, axis: int) -> int | None:
    d = t.shape[axis]
    return d.value if isinstance(d, Const) else None


def _parallel_outer(sch: Schedule, t: Tensor, loops: list) -> None:
    """Parallelise the outer spatial loops: the two first fused when there are more than two
    (a batch of 1 alone would leave the other cores idle)."""
    if t.ndim >= 3:
        fused = _try(sch.fuse, loops[0], loops[1])
        if fused is not _REFUSED:
            _try(sch.parallel, fused)
            return
    _try(sch.parallel, loops[0])


def _schedule_matrix(sch: Schedule, t: Tensor) -> bool:
    """A 2-D reduction read along its columns (dense layers): column panels of ``_PANEL`` in
    parallel, rows inside, the reduction, then the panel's columns as one vector loop."""
    i, j, *reds = sch.get_loops(t.name)
    parts = _try(sch.split, j, [None, _PANEL])
    if parts is _REFUSED:
        return False
    j0, j1 = parts
    if _try(sch.reorder, j0, i, *reds, j1) is _REFUSED:
        return False
    _try(sch.parallel, j0)
    if _try(sch.decompose_reduction, t.name, reds[0]) is not _REFUSED:
        _try(sch.vectorize, sch.get_loops(t.name)[-1])
    return True


def _schedule_reduction(sch: Schedule, t: Tensor) -> None:
    width = _extent(t, t.ndim - 1)
    friendly = _vector_friendly(t) and (width is None or width >= _MIN_VECTOR)
    if t.ndim == 2 and friendly and _schedule_matrix(sch, t):
        return
    _parallel_outer(sch, t, sch.get_loops(t.name))
    loops = sch.get_loops(t.name)
    n_red = len(t.body.axes) if isinstance(t.body, Reduce) else 0
    spatial = len(loops) - n_red
    if spatial >= 2 and friendly:
        _try(sch.reorder, *loops[spatial:], loops[spatial - 1])
        if _try(sch.decompose_reduction, t.name, sch.get_loops(t.name)[spatial - 1]) \
                is not _REFUSED:
            _try(sch.vectorize, sch.get_loops(t.name)[-1])


def _schedule_injective(sch: Schedule, t: Tensor) -> None:
    loops = sch.get_loops(t.name)
    if not loops:
        return
    if len(loops) > 1:
        _parallel_outer(sch, t, loops)
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
        if t.name in results or isinstance(t.body, Reduce) or t.name.endswith("_pad"):
            kept.append(t)
        elif _try(sch.compute_inline, t.name) is _REFUSED:
            kept.append(t)
    reductions = [t for t in kept if isinstance(t.body, Reduce)]
    for t in kept:
        if t in reductions:
            _schedule_reduction(sch, t)
        elif not (t.name in results and reductions and _epilogue(sch, t, reductions[-1])):
            _schedule_injective(sch, t)
    return sch


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
