# SPDX-License-Identifier: Apache-2.0
"""Legality of a schedule state: dependence order, loops that must not carry a dependence,
nesting of loop kinds and GPU launch shapes. The verdicts come from ``verdict_cache``, whose
inheritance functions are re-exported here for the tree edits. ``verify`` raises the
ScheduleError a primitive reports."""
from __future__ import annotations

from collections.abc import Mapping

from ..errors import ScheduleError
from ..ir.loops import LoopKind
from ..ir.program import BufferRole, MemScope
from ..poly import dataflow
from ..poly import deps as deps_mod
from ..poly import launch, legality
from ..poly.tree import LoopNode, loop_position, loops, statements_under
from .state import State, loop_label, shape
from .verdict_cache import (inherit_permutation, inherit_sequence_edit,  # noqa: F401
                            inherit_split, record_first_in_sequence,  # noqa: F401
                            transfer_verdict, verdict)  # noqa: F401

_EXCLUSIVE = (LoopKind.PARALLEL, LoopKind.VECTORIZED, LoopKind.THREAD)


class _LazySchedule(Mapping):
    """The state's flat schedule, computed only if asked for: the legality checks read it
    only to describe a violation (their verdicts come from the cached time deltas)."""

    def __init__(self, state: State, sig: tuple):
        self._state, self._sig = state, sig

    def _get(self) -> dict:
        return self._state._schedule(self._sig)

    def __getitem__(self, stmt: str):
        return self._get()[stmt]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def verify(state: State, primitive: str) -> None:
    """Raise ScheduleError unless every dependence is respected and no parallel loop carries one."""
    v = check_order(state)
    if v is not None:
        raise ScheduleError(f"{primitive} would break {v.summary()}: {v.describe()}, but after "
                            "it the two would run in the opposite order (or at once). "
                            "Dependences must keep their order.", dependence=v.evidence())
    _check_nesting(state, primitive)
    check_launches(state, primitive)
    for n in loops(state.root):
        if n.kind in _EXCLUSIVE:
            bad = check_parallel(state, n)
            if bad is not None:
                raise ScheduleError(f"{primitive} would make {n.kind.value} loop "
                                    f"{loop_label(state, n)} carry "
                                    f"{bad.summary()}: {bad.describe()}",
                                    dependence=bad.evidence())


def _check_nesting(state: State, primitive: str) -> None:
    """A vector loop runs its iterations in lockstep lanes of one thread: no loop inside it may
    start threads (OpenMP forbids a parallel region inside a simd loop; a GPU index cannot vary
    within a lane)."""
    for outer in loops(state.root):
        if outer.kind is not LoopKind.VECTORIZED:
            continue
        for inner in loops(outer):
            if inner is not outer and inner.kind in (LoopKind.PARALLEL, LoopKind.THREAD):
                raise ScheduleError(
                    f"{primitive} would put {inner.kind.value} loop {loop_label(state, inner)} "
                    f"inside vectorized loop {loop_label(state, outer)}, whose iterations run as "
                    "lanes of one "
                    "thread; keep vectorized loops innermost (vectorize the inner loop, or "
                    "reorder before marking loops parallel/vectorized)")


def check_launches(state: State, primitive: str) -> None:
    """Every nest with GPU-bound loops is one a GPU launch can run (``poly.launch``): a
    schedule that is accepted builds."""
    if not any(n.kind is LoopKind.THREAD for n in loops(state.root)):
        return
    problem = launch.shape_problem(state.program, state.root)
    if problem is not None:
        raise ScheduleError(f"{primitive} is refused: {problem.describe()}")


def check_order(state: State) -> legality.Violation | None:
    """The first dependence the state's order breaks (remembered per schedule shape)."""
    memo = state.memo
    assert memo is not None
    sig = shape(state.program, state.root)
    if sig not in memo.order:
        by_stmt = dict(sig)

        def broken(k: int, d: deps_mod.Dependence) -> bool:
            return verdict(state, k, d, by_stmt[d.source], by_stmt[d.sink]).broken
        memo.order[sig] = legality.check_order(state.program, state.deps,
                                               _LazySchedule(state, sig), broken)
    return memo.order[sig]


def _carried_key(state: State, node: LoopNode, sig: tuple | None = None) -> tuple:
    """What the verdict of ``check_parallel`` for ``node`` depends on: the loop's position,
    its statements and the shape of their schedules up to it."""
    pos = loop_position(state.root, node.id)
    by_stmt = dict(sig if sig is not None else shape(state.program, state.root))
    return (pos, tuple(sorted((s, by_stmt[s][:pos + 1]) for s in statements_under(node))))


def check_parallel(state: State, node: LoopNode) -> legality.Violation | None:
    """The first dependence the loop ``node`` carries (remembered per statement set, position
    and the shape of the schedule up to that loop)."""
    memo = state.memo
    assert memo is not None
    sig = shape(state.program, state.root)
    pos = loop_position(state.root, node.id)
    stmts = statements_under(node)
    by_stmt = dict(sig)
    copies = own_copies(state, node)
    key = _carried_key(state, node, sig) + (copies,)
    if key not in memo.carried:
        schedule = _LazySchedule(state, sig)
        deps, fresh = _per_copy_deps(state, schedule, sig, copies)

        original = {k: state.deps.index(d) for k, d in enumerate(deps) if k not in fresh}

        def carried(k: int, d: deps_mod.Dependence) -> bool:
            if k in fresh:
                return legality.carries(legality.time_deltas(
                    schedule[d.source], schedule[d.sink], d), pos)
            return bool(verdict(state, original[k], d, by_stmt[d.source], by_stmt[d.sink],
                                pos).carries(pos))
        memo.carried[key] = legality.check_parallel(state.program, deps, schedule, set(stmts),
                                                    pos, carried)
    return memo.carried[key]


def own_copies(state: State, node: LoopNode) -> tuple[str, ...]:
    """The temporaries of which each iteration of ``node`` has its own copy: on a GPU, a
    local-memory temporary is one array per work-group and a private one one per work-item,
    so a loop bound to a work-group index shares neither and a work-item loop shares only the
    local ones (OpenCL's semantics of ``__local`` and private declarations)."""
    if node.kind is not LoopKind.THREAD or node.thread is None:
        return ()
    scopes = ((MemScope.SHARED, MemScope.LOCAL) if node.thread.is_group else (MemScope.LOCAL,))
    return tuple(b.name for b in state.program.buffers
                 if b.role is BufferRole.TEMP and b.scope in scopes)


def _per_copy_deps(state: State, schedule: Mapping, sig: tuple, copies: tuple[str, ...]
                   ) -> tuple[tuple[deps_mod.Dependence, ...], set[int]]:
    """The dependences when each iteration has its own copy of ``copies``: no write or read of
    one copy conflicts with an access of another (no WAW, no WAR), and a read depends only on
    the write whose value it reads (value-based flow, which must stay in one iteration). The
    set holds the positions of the dependences rewritten so (their verdicts are not cached)."""
    if not copies:
        return state.deps, set()
    out: list[deps_mod.Dependence] = []
    fresh: set[int] = set()
    seen: set[tuple[str, str, str, bool]] = set()
    for d in state.deps:
        if d.buffer not in copies:
            out.append(d)
            continue
        if d.kind is not deps_mod.DepKind.RAW or (d.source, d.sink, d.buffer,
                                                   d.reduction) in seen:
            continue
        seen.add((d.source, d.sink, d.buffer, d.reduction))
        key = (sig, d.buffer)     # one flow per buffer and schedule shape, for every loop
        if key not in state.memo.flows:
            state.memo.flows[key] = dataflow.flow(state.program, dict(schedule), d.buffer)[0]
        rel = dataflow.flow_between(state.program, state.memo.flows[key], d.source, d.sink)
        if rel is not None:
            fresh.add(len(out))
            out.append(deps_mod.Dependence(d.kind, d.source, d.sink, d.buffer, rel,
                                           d.reduction))
    return tuple(out), fresh
