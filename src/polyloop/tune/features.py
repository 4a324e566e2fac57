# SPDX-License-Identifier: Apache-2.0
"""Features of a scheduled program for the cost model: a fixed-length vector per schedule.

Per loop of the schedule tree (depth first, the first ``MAX_LOOPS``): its depth, the log of
its trip count (exact, from isl's value range; -1 when symbolic), its kind, its unroll factor
and the number of statements below it; then the loop count, the parallel loop count and the
statement count (inlining and caching change it). Vectors of different schedules of one program line up position by position.

>>> import polyloop as pl
>>> from polyloop.tune.features import features
>>> A = pl.placeholder((8, 8), name="A")
>>> B = pl.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
>>> len(features(pl.Schedule(B))) == len(features(pl.Schedule(B)))
True
"""
from __future__ import annotations

import math

from ..ir.loops import LoopKind
from ..poly import affine
from ..poly.tree import LoopNode, Root, statements_under
from ..schedule import Schedule

MAX_LOOPS = 24
KINDS = tuple(LoopKind)
PER_LOOP = 4 + len(KINDS)


def features(sch: Schedule) -> list[float]:
    """The feature vector of ``sch`` (length ``MAX_LOOPS * PER_LOOP + 3``)."""
    rows: list[list[float]] = []
    _walk(sch, sch.state.root, 0, rows)
    flat = [x for row in rows[:MAX_LOOPS] for x in row]
    flat += [0.0] * (MAX_LOOPS * PER_LOOP - len(flat))
    kinds = [n.kind for n in _loops(sch.state.root)]
    return flat + [float(len(rows)), float(kinds.count(LoopKind.PARALLEL)),
                   float(len(sch.program.statements))]


def _loops(node: Root | LoopNode):
    for c in node.children:
        if isinstance(c, LoopNode):
            yield c
            yield from _loops(c)


def _walk(sch: Schedule, node: Root | LoopNode, depth: int, rows: list[list[float]]) -> None:
    for c in node.children:
        if not isinstance(c, LoopNode):
            continue
        rows.append([float(depth), _log_extent(sch, c),
                     float(c.unroll_factor or 0), float(len(statements_under(c)))]
                    + [1.0 if c.kind is k else 0.0 for k in KINDS])
        _walk(sch, c, depth + 1, rows)


def _log_extent(sch: Schedule, node: LoopNode) -> float:
    stmt, expr = node.exprs[0]
    lo, hi = affine.value_range(sch.program, stmt, expr)
    if lo is None or hi is None:
        return -1.0
    return math.log2(hi - lo + 2)
