# SPDX-License-Identifier: Apache-2.0
"""Register tiling of a contraction nest for ``pl.auto_schedule``: the loops of a reduction
``X[..., i, j] += f(...)`` (a matrix product and its relatives: syrk, symm, the updates of
lu and cholesky, correlation's inner products) become a ``rows x vectors x lanes`` tile of
``X`` held in registers for the whole reduction loop.

The nest keeps its loops as written and gains: ``i`` split by ``rows``, ``j`` (the last
index of ``X``, walked with stride 1 by every operand that depends on it) split into vectors
of the machine's lanes, the reduction loops moved inside the tile loops, the tile's rows and
vectors unrolled and its lanes vectorized; a ``local`` copy of the tile (``cache_write``) is
loaded before the reduction and stored after it. Every step is an ordinary primitive checked
against the dependences; a refusal leaves the nest as it was.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Var, free_vars, loads
from ..poly import locality
from ..poly.tree import LoopNode, StmtNode
from ..util.machine import Machine
from .auto_common import attempt, handle_of, loop_chain
from .schedule import Schedule


@dataclass(frozen=True, slots=True)
class Contraction:
    """A nest the tiling applies to: its statement, band loops (outermost first, by
    iterator), the vector iterator, the row iterator and the reduction iterators."""
    statement: str
    iters: tuple[str, ...]
    vector: str
    row: str
    reduction: tuple[str, ...]
    dtype: str


def contraction(sch: Schedule, top: LoopNode) -> Contraction | None:
    """The contraction the perfect nest at ``top`` computes, or None: one statement, each loop
    a plain iterator, a sum into an element whose last index is a loop that every operand
    either ignores or walks with stride 1, and another loop indexing that element."""
    band = loop_chain(sch, top.id)
    if [type(c) for c in band[-1].children] != [StmtNode]:
        return None
    s = sch.program.statement(band[-1].children[0].statement)  # type: ignore[union-attr]
    if s.reduction is None or s.reduction.value != "sum" or len(band) < 3:
        return None
    iters = tuple(locality.loop_iterator(sch.program, s.name, n.expr(s.name)) for n in band)
    if None in iters or len(set(iters)) != len(iters):
        return None
    index = [e.name if isinstance(e, Var) else None for e in s.indices]
    if not index or index[-1] not in iters:
        return None
    vector = index[-1]
    for ld in loads(s.value):
        used = [k for k, e in enumerate(ld.indices) if vector in free_vars(e)]
        if used and (used != [len(ld.indices) - 1] or not isinstance(ld.indices[-1], Var)):
            return None
    rows = [v for v in index[:-1] if v in iters and v != vector]
    reduction = tuple(v for v in iters if v not in index)   # type: ignore[misc]
    if not rows or not reduction or not locality.separable(sch.program, s.name,
                                                           [rows[-1], vector]):
        return None     # a triangle: its tile's copies are not rectangles (kept untiled)
    return Contraction(s.name, iters, vector, rows[-1], reduction,   # type: ignore[arg-type]
                       str(sch.program.buffer(s.buffer).dtype))


def tile_shape(machine: Machine, dtype: str) -> tuple[int, int, int]:
    """(rows, vectors, lanes) of a register tile: a quarter of the vector registers hold
    neither accumulators nor the operands of one step."""
    lanes = machine.lanes(dtype)
    if machine.registers >= 32:
        return 4, 3, lanes
    return 3, 2, lanes


def register_tile(sch: Schedule, top: LoopNode, c: Contraction,
                  machine: Machine) -> tuple[Schedule, list[int]] | None:
    """The schedule with the contraction at ``top`` register-tiled, and the ids of the loops
    outside the tile (outermost first, candidates for a parallel loop); None when a primitive
    refuses."""
    rows, vectors, lanes = tile_shape(machine, c.dtype)

    written = sch.program.statement(c.statement)

    def steps(t: Schedule) -> list[int]:
        tile = t.cache_write(written.block_name, "local")
        by_iter = dict(zip(c.iters, (handle_of(n) for n in loop_chain(t, top.id))))
        i0, i1 = t.split(by_iter[c.row], factors=[None, rows])
        j0, j1, j2 = t.split(by_iter[c.vector], factors=[None, vectors, lanes])
        outer = [by_iter[v] for v in c.iters if v not in (c.row, c.vector) + c.reduction]
        t.reorder(*outer, i0, j0, *(by_iter[v] for v in c.reduction), i1, j1, j2)
        t.unroll(i1, rows)      # the factor, not "fully": a partial tile's loop unrolls as
        t.unroll(j1, vectors)   # far as the full one's (gcc would unroll it 8 times)
        t.vectorize(j2)
        t.reverse_compute_at(tile, j0)
        for b in t.blocks():        # an update of an argument loads the tile first
            if b.name == f"{written.buffer}_local_in":
                t.compute_at(b, j0)
        return [h.id for h in (*outer, i0, j0)]
    return attempt(sch, steps)
