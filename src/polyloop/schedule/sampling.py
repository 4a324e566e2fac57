# SPDX-License-Identifier: Apache-2.0
"""Sampling primitives of ``pl.Schedule``: random decisions recorded in the trace.

A space of schedules is a function that calls ordinary primitives with values drawn by
``sample_perfect_tile``, ``sample_categorical`` and ``sample_compute_location``. Each draw is
a step of the trace with its ``decision``; the values it returns remember which step made
them, so a trace replayed with other decisions (``Schedule.from_trace(..., decisions=...)``)
passes the new values on to the primitives that used the old ones. ``Schedule(..., seed=s)``
makes the draws reproducible.

>>> import polyloop as pl
>>> A = pl.placeholder((100,), "float32", name="A")
>>> B = pl.compute((100,), lambda i: A[i] * 2.0, name="B")
>>> sch = pl.Schedule(B, seed=0)
>>> (i,) = sch.get_loops("B")
>>> f = sch.sample_perfect_tile(i, n=2, max_innermost=8)
>>> _ = sch.split(i, factors=f)
>>> f[0] * f[1] >= 100 and f[1] <= 8
True
"""
from __future__ import annotations

import math
import random
from typing import Any, Sequence

from ..errors import ScheduleError
from . import loops
from .core import ScheduleCore
from .trace import BlockHandle, LoopHandle, SampledInt, SampledStr

# split factors tried for a loop whose extent is symbolic
SYMBOLIC_FACTORS = (1, 2, 4, 8, 16, 32, 64)
SCALARS = (int, float, str, bool, type(None))


class SamplingPrimitives(ScheduleCore):
    """Primitives that draw decisions (mixed into ``pl.Schedule``)."""

    def _random(self) -> random.Random:
        """The draws' generator (``Schedule(seed=...)``; unseeded for a schedule made
        without ``__init__``)."""
        rng = getattr(self, "_rng", None)
        if rng is None:
            rng = self._rng = random.Random()
        return rng

    def _forced_decision(self) -> Any:
        """The decision forced for the next draw by ``with_decisions`` (None: draw)."""
        forced = getattr(self, "_forced", ())
        ordinal = sum(s.primitive.startswith("sample_") for s in self.trace)
        return forced[ordinal] if ordinal < len(forced) else None

    def sample_perfect_tile(self, loop: LoopHandle, n: int, *, max_innermost: int = 16,
                            decision: Sequence[int | None] | None = None) -> list[int | None]:
        """``n`` split factors for ``loop`` whose product covers its extent, the innermost at
        most ``max_innermost``: ``sch.split(loop, factors=sch.sample_perfect_tile(loop, 3))``.

        A constant extent gets factors whose product is at least the extent, the outermost
        the fewest that cover it; a symbolic one gets ``None`` (inferred) outermost and the
        others from ``SYMBOLIC_FACTORS``. ``decision`` replays given factors (checked).

        >>> import polyloop as pl
        >>> A = pl.placeholder((12,), name="A"); B = pl.compute((12,), lambda i: A[i], name="B")
        >>> sch = pl.Schedule(B)
        >>> sch.sample_perfect_tile(sch.get_loops("B")[0], n=2, decision=[3, 4])
        [3, 4]
        """
        node = self._loop(loop, "sample_perfect_tile")
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            raise ScheduleError(f"sample_perfect_tile({loop.name}): n must be an int >= 2, "
                                f"got {n!r}")
        if not isinstance(max_innermost, int) or max_innermost < 1:
            raise ScheduleError(f"sample_perfect_tile({loop.name}): max_innermost must be a "
                                f"positive int, got {max_innermost!r}")
        lo, hi = loop_range(self, loop)
        extent = None if lo is None or hi is None else hi - lo + 1
        if decision is None:
            decision = self._forced_decision()
            if decision is not None and _tile_problem(decision, n, extent, max_innermost):
                decision = None     # a forced decision for another space: draw instead
        if decision is None:
            decision = _draw_tile(self._random(), n, extent, max_innermost)
        problem = _tile_problem(decision, n, extent, max_innermost)
        if problem:
            raise ScheduleError(f"sample_perfect_tile({loop.name}, n={n}): decision "
                                f"{list(decision)} is invalid: {problem}")
        return self._record_sample("sample_perfect_tile", (loop,),
                                   {"n": n, "max_innermost": max_innermost}, list(decision))

    def sample_categorical(self, candidates: Sequence[Any], probs: Sequence[float] | None = None,
                           *, decision: int | None = None) -> Any:
        """One of ``candidates`` (ints, floats, strings, booleans or None), drawn with the
        weights ``probs`` (uniform by default); the decision is its index.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), name="A"); B = pl.compute((8,), lambda i: A[i], name="B")
        >>> pl.Schedule(B).sample_categorical([4, 8, 16], decision=2)
        16
        """
        cands = list(candidates)
        if not cands or not all(isinstance(c, SCALARS) for c in cands):
            raise ScheduleError(f"sample_categorical: candidates must be a non-empty list of "
                                f"ints, floats, strings, booleans or None; got {cands!r}")
        weights = [1.0] * len(cands) if probs is None else [float(p) for p in probs]
        if len(weights) != len(cands) or min(weights) < 0 or sum(weights) <= 0:
            raise ScheduleError(f"sample_categorical: probs must be {len(cands)} non-negative "
                                f"weights with a positive sum, got {probs!r}")
        if decision is None:
            decision = self._forced_decision()
            if not _index_ok(decision, len(cands)):
                decision = None
        if decision is None:
            decision = self._random().choices(range(len(cands)), weights)[0]
        if not _index_ok(decision, len(cands)):
            raise ScheduleError(f"sample_categorical({cands!r}): decision {decision!r} is "
                                f"invalid: give an index from 0 to {len(cands) - 1}")
        kw: dict[str, Any] = {"candidates": cands}
        if probs is not None:
            kw["probs"] = weights
        value = self._tag(cands[decision], 0)
        # the result is recorded as a drawn value even when it is not an int or a string, so
        # that the printed trace names it (``v3_0 = sch.sample_categorical(...)``)
        drawn = {"sample": len(self.trace), "at": 0, "value": cands[decision]}
        self._record_step("sample_categorical", (), kw, decision, (drawn,))
        return value

    def sample_compute_location(self, block: BlockHandle | str, *,
                                decision: int | None = None) -> LoopHandle | None:
        """A loop of the block's first consumer where ``compute_at(block, loop)`` is legal, or
        None (leave the block where it is); the decision is the loop's position among the
        consumer's loops (-1: None).

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> C = pl.compute((8,), lambda i: B[i] * 2.0, name="C")
        >>> sch = pl.Schedule(C)
        >>> loc = sch.sample_compute_location("B", decision=0)
        >>> sch.compute_at("B", loc)
        """
        name = self._block(block, "sample_compute_location")
        options = self._legal_locations(name)
        if decision is None:
            decision = self._forced_decision()
            if not _location_ok(decision, options):
                decision = None
        if decision is None:
            decision = self._random().choice([-1] + sorted(options))
        if not _location_ok(decision, options):
            raise ScheduleError(f"sample_compute_location({name}): decision {decision!r} is "
                                f"invalid: compute_at is legal at loop positions "
                                f"{sorted(options)} of the consumer (or -1: stay)")
        loc = None if decision == -1 else options[decision]
        self._record_step("sample_compute_location", (BlockHandle(name),), {}, decision, (loc,))
        return loc

    def _legal_locations(self, name: str) -> dict[int, LoopHandle]:
        """Loop position -> loop, for the loops of the first consumer compute_at accepts."""
        consumers = self.get_consumers(name)
        if not consumers:
            return {}
        trace = self.trace
        consumer_loops = self.get_loops(consumers[0])
        self.trace = trace      # looking is not a step
        found = {}
        for pos, loop in enumerate(consumer_loops):
            trial = self.copy()
            try:
                trial.compute_at(name, loop)
            except ScheduleError:
                continue
            found[pos] = loop
        return found

    def _record_sample(self, primitive: str, args: tuple, kwargs: dict[str, Any],
                       values: list[Any]) -> list[Any]:
        tagged = [self._tag(v, k) for k, v in enumerate(values)]
        self._record_step(primitive, args, kwargs, values, tuple(tagged))
        return tagged

    def _record_step(self, primitive: str, args: tuple, kwargs: dict[str, Any], decision: Any,
                     results: tuple) -> None:
        self._record(primitive, args, kwargs | {"decision": decision}, results)

    def _tag(self, value: Any, position: int) -> Any:
        """The value, remembering the step about to draw it (ints and strings only: other
        values are passed to primitives as they are)."""
        step = len(self.trace)
        if isinstance(value, int) and not isinstance(value, bool):
            return SampledInt.make(value, step, position)
        if isinstance(value, str):
            return SampledStr.make(value, step, position)
        return value


def loop_range(sch: ScheduleCore, loop: LoopHandle) -> tuple[int | None, int | None]:
    """The first and last value of a loop when they are constants (else None)."""
    return loops._range(sch.state, sch._loop(loop, "loop_range"))


def with_decisions(sch: ScheduleCore, decisions: Sequence[Any]) -> ScheduleCore:
    """Make the next draws of ``sch`` take ``decisions`` in order (a decision that does not fit
    its draw is ignored and drawn at random): how a search re-runs a space function."""
    sch._forced = tuple(decisions)   # type: ignore[attr-defined]
    return sch


def decisions_of(trace: Any) -> list[Any]:
    """The decisions of a trace's sampling steps, in order."""
    return [dict(s.kwargs)["decision"] for s in trace if s.primitive.startswith("sample_")]


def _draw_tile(rng: random.Random, n: int, extent: int | None, max_innermost: int
               ) -> list[int | None]:
    inner: list[int] = []
    for pos in range(n - 1):
        used = math.prod(inner)
        if extent is None:
            cands = list(SYMBOLIC_FACTORS)
        else:
            cands = sorted({d for d in range(1, extent + 1) if extent % d == 0}
                           | {1 << p for p in range(extent.bit_length())})
            cands = [c for c in cands if c * used <= extent]
        if pos == 0:
            cands = [c for c in cands if c <= max_innermost] or [1]
        inner.append(rng.choice(cands))
    inner.reverse()
    first = None if extent is None else -(-extent // math.prod(inner))
    return [first] + inner


def _tile_problem(decision: Any, n: int, extent: int | None, max_innermost: int) -> str:
    d = list(decision) if isinstance(decision, (list, tuple)) else None
    if d is None or len(d) != n:
        return f"it must be a list of {n} factors"
    inner = d[1:]
    if not all(isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in inner):
        return "every factor but the outermost must be a positive int"
    if inner[-1] > max_innermost:
        return f"the innermost factor {inner[-1]} exceeds max_innermost={max_innermost}"
    if extent is None:
        return "" if d[0] is None else "the outermost factor of a symbolic extent must be None"
    if d[0] != -(-extent // math.prod(inner)):
        return (f"the outermost factor must be {-(-extent // math.prod(inner))}, the fewest "
                f"that cover the extent {extent}")
    return ""


def _index_ok(decision: Any, count: int) -> bool:
    return (isinstance(decision, int) and not isinstance(decision, bool)
            and 0 <= decision < count)


def _location_ok(decision: Any, options: dict[int, LoopHandle]) -> bool:
    return isinstance(decision, int) and not isinstance(decision, bool) and (
        decision == -1 or decision in options)
