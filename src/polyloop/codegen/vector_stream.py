# SPDX-License-Identifier: Apache-2.0
"""Streaming (non-temporal) stores: the ``nontemporal`` loop annotation of the C target.

``sch.annotate(loop, "nontemporal", "Y")`` (several buffers: ``"Y,Z"``) asks that, in the
explicit vector loops at or under ``loop``, whole-vector stores of ``Y`` bypass the caches:
a streaming store writes a full line without reading it first (no write-allocate), which saves
a third of the traffic of an output written once and not read again soon. The stored lines are
not in the cache afterwards, so annotate only outputs that are not read back soon.

A streaming store needs an address on a vector boundary. Where the plan proves the store
aligned (a 64-byte aligned temporary) it streams as it is; elsewhere (an argument array: NumPy
aligns arrays only to 16 bytes) the vector loop is peeled at run time: a head of fewer than
``lanes`` elements (one masked vector on AVX-512, else a scalar loop) until the first streamed
store sits on a boundary, then whole streamed vectors, then the usual remainder. Stores that
cannot stream stay ordinary, with a comment saying why: a loop that is not explicit vector code
(strided, or a body gcc must vectorize), a single constant vector whose alignment is unknown
(vectorize the whole row instead of a split-off vector so that a peel can align it), a
reduction (it reads the line anyway), a second streamed store of another row, an ISA without
streaming stores.

Streaming stores are weakly ordered: an ``sfence`` follows the annotated loop, and in a
parallel loop it ends each iteration, so that every thread fences before the region's closing
barrier and later readers (another thread, the caller) see the data.

>>> from polyloop.ir.loops import For, Store
>>> from polyloop.ir.expr import Var, const
>>> loop = For("i", const(0), const(8), Store("Y", (Var("i"),), const(0.0)),
...            annotations=(("nontemporal", "Y, Z"),))
>>> sorted(nontemporal_buffers(loop))
['Y', 'Z']
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from ..ir.expr import same
from ..ir.loop_notes import NoteKey
from ..ir.loops import For, LoopKind, Store
from ..ir.program import Buffer
from .vector_lib import VecType, VectorLibrary
from .vector_plan import VectorPlan, affine
from .writer import CodeWriter

NONTEMPORAL = NoteKey.NONTEMPORAL


def nontemporal_buffers(loop: For) -> frozenset[str]:
    """The buffers named by ``loop``'s ``nontemporal`` annotation (comma-separated)."""
    names: set[str] = set()
    for key, value in loop.annotations:
        if key == NONTEMPORAL:
            names.update(n.strip() for n in value.split(",") if n.strip())
    return frozenset(names)


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """Which stores of one vector loop stream (by ``id``): ``direct`` ones are proven aligned;
    ``peeled`` ones stream in the loop peeled at run time until ``anchor`` is aligned; ``notes``
    say why the other stores of annotated buffers stay ordinary."""
    direct: frozenset[int] = frozenset()
    peeled: frozenset[int] = frozenset()
    anchor: Store | None = None
    notes: tuple[str, ...] = ()


def plan_streams(stores: list[Store], wanted: frozenset[str], plan: VectorPlan,
                 lib: VectorLibrary, buffers: dict[str, Buffer]) -> StreamPlan:
    """The streaming stores of a vector loop whose stores of ``wanted`` buffers should stream."""
    notes: list[str] = []
    candidates: list[Store] = []
    for s in stores:
        if s.buffer not in wanted:
            continue
        t = VecType(buffers[s.buffer].dtype, plan.lanes)
        if s.reduction is not None:
            notes.append(f"nontemporal {s.buffer}: ordinary store (an update reads the line "
                         "anyway; streaming would only evict it)")
        elif not lib.streams(t):
            notes.append(f"nontemporal {s.buffer}: ordinary store ({lib.isa.name} has no "
                         f"streaming store of {t.bytes}-byte vectors)")
        elif id(s) not in plan.aligned and plan.extent is not None and plan.extent <= plan.lanes:
            notes.append(f"nontemporal {s.buffer}: ordinary store (one vector of unknown "
                         "alignment; vectorize the whole row, not a split-off vector, so that "
                         "the loop can be peeled to a boundary)")
        else:
            candidates.append(s)
    if all(id(s) in plan.aligned for s in candidates):
        return StreamPlan(direct=frozenset(id(s) for s in candidates), notes=tuple(notes))
    anchor = candidates[0]
    peeled = []
    for s in candidates:
        if _same_alignment(anchor, s, plan.lanes):
            peeled.append(id(s))
        else:
            notes.append(f"nontemporal {s.buffer}: ordinary store (its alignment relative to "
                         f"the streamed store of {anchor.buffer} is unknown)")
    return StreamPlan(peeled=frozenset(peeled), anchor=anchor, notes=tuple(notes))


def _same_alignment(a: Store, b: Store, lanes: int) -> bool:
    """Whether ``b`` is ``a``'s element plus a whole number of vectors along the row."""
    if a.buffer != b.buffer or len(a.indices) != len(b.indices):
        return False
    if not all(same(x, y) for x, y in zip(a.indices[:-1], b.indices[:-1])):
        return False
    fa, fb = affine(a.indices[-1]), affine(b.indices[-1])
    if fa is None or fb is None:
        return False
    diff = {k: fb.get(k, 0) - fa.get(k, 0) for k in set(fa) | set(fb)}
    return all(c == 0 for k, c in diff.items() if k is not None) and \
        diff.get(None, 0) % lanes == 0


@dataclass
class _Scope:
    loop: For
    buffers: frozenset[str]
    streamed: set[str] = field(default_factory=set)


class StreamScopes:
    """The annotated loops around the code being printed: which buffers stream there, and
    the fences their streaming stores need."""

    def __init__(self, lib: VectorLibrary) -> None:
        self.lib = lib
        self.scopes: list[_Scope] = []

    def buffers(self) -> frozenset[str]:
        """The buffers whose vector stores stream at the point being printed."""
        return frozenset().union(*(s.buffers for s in self.scopes))

    def streamed(self, buffer: str) -> None:
        """Record that a streaming store of ``buffer`` was written: its scopes need fences."""
        for scope in self.scopes:
            if buffer in scope.buffers:
                scope.streamed.add(buffer)

    @contextmanager
    def around(self, w: CodeWriter, loop: For) -> Iterator[None]:
        """Print ``loop`` inside this context: its annotation is in force while it is printed,
        and the fence (serial loop) or the note that nothing streamed is written after it."""
        buffers = nontemporal_buffers(loop)
        if not buffers:
            yield
            return
        scope = _Scope(loop, buffers)
        self.scopes.append(scope)
        try:
            yield
        finally:
            self.scopes.pop()
        if scope.streamed and loop.kind is not LoopKind.PARALLEL:
            w.statement(self.lib.fence())
        missing = sorted(buffers - scope.streamed)
        if missing:
            w.comment(f"nontemporal {', '.join(missing)}: no streaming store under loop "
                      f"{loop.var} (no whole-vector store in an explicit vector loop; ordinary "
                      "stores)")

    def end_of_iteration(self, w: CodeWriter, loop: For) -> None:
        """Last statement of each iteration of a parallel annotated loop: its fence, inside the
        parallel region, before the barrier that ends it."""
        if loop.kind is not LoopKind.PARALLEL or not self.scopes:
            return
        scope = self.scopes[-1]
        if scope.loop is loop and scope.streamed:
            w.statement(self.lib.fence())
