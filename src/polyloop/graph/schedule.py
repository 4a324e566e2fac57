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


def _parallel_outer(sch: Schedule, t: Tensor, loops: list) -> object:
    """Parallelise the outer spatial loops (the two first fused when there are more than 2)."""
    if t.ndim >= 3 and _extent(t, 0) is not None and _extent(t, 0) < 8:
        fused = _try(sch.fuse, loops[0], loops[1])
        if fused is not _REFUSED:
            _try(sch.parallel, fused)
            return fused
    _try(sch.parallel, loops[0])
    return loops[0]


def _schedule_reduction(sch: Schedule, t: Tensor) -> object:
    loops = sch.get_loops(t.name)
    outer = _parallel_outer(sch, t, loops)
    loops = sch.get_loops(t.name)
    spatial = len(loops) - len(t.body.axes) if isinstance(t.body, Reduce) else t.ndim
    inner = loops[spatial - 1]
    width = _extent(t, t.ndim - 1)
    if spatial >= 2 and _vector_friendly(t) and (width is None or width >= _MIN_VECTOR):
        reds = loops[spatial:]
        _try(sch.reorder, *reds, inner)
        init = _try(sch.decompose_reduction, t.name, sch.get_loops(t.name)[spatial - 1])
        if init is not _REFUSED:
            _try(sch.vectorize, sch.get_loops(t.name)[-1])
    return outer


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
    """Compute the injective result ``t`` inside the anchor's outer parallel loop."""
    if anchor not in t.inputs or t.ndim != anchor.ndim:
        return False
    loops = sch.get_loops(anchor.name)
    if _try(sch.reverse_compute_at, t.name, loops[0]) is _REFUSED:
        return False
    inner = sch.get_loops(t.name)
    width = _extent(t, t.ndim - 1)
    if len(inner) > 1 and (width is None or width >= _MIN_VECTOR):
        _try(sch.vectorize, inner[-1])
    return True
