# SPDX-License-Identifier: Apache-2.0
"""The default schedule of a reduction along contiguous memory: partial results in vectors.

A reduction whose innermost axes read consecutive elements (a global pooling over an image's
plane, a layer norm's mean over a row, a softmax's sum over a long row) cannot vectorize over
its outputs, and reduced one element at a time it waits on the latency of each add. Here its
contiguous reduction loops are fused into one, split by ``accumulators x lanes`` and factored
(``rfactor``) into that many partial results, which one vector loop per accumulator updates;
the partials are summed once per output. The partial results live in the output's loop (one
small buffer per thread). The float sum is reassociated: that is the schedule's explicit
choice, as in ``polyloop.ops.softmax``.

>>> import polyloop as pl
>>> x = pl.placeholder((2, 8, 30, 30), "float32", name="x")
>>> ry, rx = pl.reduce_axis((0, 30), name="ry"), pl.reduce_axis((0, 30), name="rx")
>>> s = pl.compute((2, 8), lambda b, c: pl.sum(x[b, c, ry, rx], axis=[ry, rx]), name="s")
>>> contiguous_axes(s)
2
>>> sch = vector_reduction(pl.Schedule(s), s, parallel=True, lanes=8)
>>> [loop.name for loop in sch.get_loops("s_rf")][-3:]
['ry_rx_fused_0', 'ry_rx_fused_1', 'ry_rx_fused_2']
"""
from __future__ import annotations

import math

from ..errors import ScheduleError
from ..frontend.te import Tensor
from ..ir.expr import BinOp, BinOpKind, Const, Load, Reduce, ReduceKind, Var, walk
from ..ops.knobs import default_lanes
from ..schedule import Schedule

# Independent vector accumulators at most (each hides the latency of one add chain); fewer on
# short reductions, where summing the partial results would cost more than they save.
ACCUMULATORS = 4
_KINDS = (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN)


def _uses(e, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in walk(e))


def contiguous_axes(t: Tensor) -> int:
    """How many of ``t``'s innermost reduction axes read consecutive elements of every input
    they index: each such read ends with those axes, in order, over whole rows of its buffer
    (the axes' extents are the buffer's trailing sizes, the outermost one excepted). 0 when
    the innermost axis does not, or ``t`` is no reduction."""
    if not isinstance(t.body, Reduce):
        return 0
    shapes = {p.name: p.shape for p in t.inputs}
    axes = [a.name for a in t.body.axes]
    extents = [str(e) for e in t.body.extents]
    best = 0
    for m in range(1, len(axes) + 1):
        names = axes[-m:]
        for node in walk(t.body.source):
            if not isinstance(node, Load) or not any(_uses(i, n) for i in node.indices
                                                     for n in names):
                continue
            if not _reads_rows(node, names, shapes.get(node.buffer), extents[len(axes) - m:]):
                return best
        best = m
    return best


def _plus_axis(e, name: str, names: list[str]) -> bool:
    """Whether index ``e`` is axis ``name`` plus terms that use none of ``names``."""
    if isinstance(e, Var):
        return e.name == name
    if isinstance(e, BinOp) and e.op is BinOpKind.ADD:
        for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if _plus_axis(a, name, names) and not any(_uses(b, n) for n in names):
                return True
    return False


def _reads_rows(load: Load, names: list[str], shape, extents: list[str]) -> bool:
    """Whether ``load`` ends with the axes ``names`` in order, each plus an offset free of them
    (and reads them nowhere else), over whole rows of its buffer: every axis but the first
    spans its dimension."""
    m = len(names)
    if shape is None or len(load.indices) < m:
        return False
    tail, head = load.indices[-m:], load.indices[:-m]
    return all(_plus_axis(i, n, names) for i, n in zip(tail, names)) \
        and not any(_uses(i, n) for i in head for n in names) \
        and [str(d) for d in shape[len(shape) - m + 1:]] == extents[1:]


def _size(t: Tensor, axes: int) -> int | None:
    count = 1
    for e in t.body.extents[-axes:]:
        if not isinstance(e, Const):
            return None
        count *= e.value
    return count


def vector_reduction(sch: Schedule, t: Tensor, *, parallel: bool,
                     lanes: int | None = None) -> Schedule | None:
    """A copy of ``sch`` with reduction ``t`` as vectors of partial results (see the module
    docstring); None when ``t`` does not read its innermost axes contiguously, reduces fewer
    than two vectors, or a step refuses."""
    axes = contiguous_axes(t)
    if not axes or t.body.kind not in _KINDS or t.ndim == 0:
        return None
    lanes = default_lanes(str(t.dtype)) if lanes is None else lanes
    size = _size(t, axes)
    if size is not None and size < 2 * lanes:
        return None
    # sum of the partials (~ lanes x acc adds) against the chain of adds (~ size / (lanes x acc))
    acc = ACCUMULATORS if size is None else max(1, min(ACCUMULATORS, round(
        math.sqrt(size / (lanes * lanes)))))
    trial = sch.copy()
    try:
        _apply(trial, t, axes, lanes, acc, parallel)
    except ScheduleError:
        return None
    return trial


def _apply(sch: Schedule, t: Tensor, axes: int, lanes: int, acc: int, parallel: bool) -> None:
    red = sch.get_loops(t.name)[-axes:]
    fused = sch.fuse(*red) if axes > 1 else red[0]
    _, part = sch.split(fused, factors=[None, acc * lanes])
    rf = sch.rfactor(part, factor_axis=t.ndim)
    out = sch.get_loops(t.name)[:t.ndim]
    if parallel:
        # a batch of one alone would leave the other threads idle: the output loops fused
        sch.parallel(sch.fuse(*out) if len(out) > 1 else out[0])
    # the partial results inside the output's loops (its last loop is the final reduction)
    sch.compute_at(rf, sch.get_loops(t.name)[-2])
    fresh = sch.get_loops(rf)[-axes:]
    row = sch.fuse(*fresh) if axes > 1 else fresh[0]
    _, k_acc, k_lane = sch.split(row, factors=[None, acc, lanes])
    sch.unroll(k_acc)
    sch.vectorize(k_lane)
