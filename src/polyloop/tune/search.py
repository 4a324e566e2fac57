# SPDX-License-Identifier: Apache-2.0
"""Search strategies: which candidates of a space to measure next.

``RandomSearch`` draws fresh schedules. ``EvolutionarySearch`` mutates the decisions of the
fastest measured schedules (one decision drawn again per child), ranks the children and a few
fresh draws with the cost model, and proposes the best ranked plus some at random
(exploration).

>>> from polyloop.tune.search import STRATEGIES
>>> STRATEGIES
('evolutionary', 'random')
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from ..ir.program import Program
from ..schedule import Schedule
from ..schedule.sampling import decisions_of
from .cost_model import CostModel
from .features import features
from .space import SpaceFn, try_draw

STRATEGIES = ("evolutionary", "random")
POPULATION = 16        # parents: the fastest schedules measured so far
POOL_FACTOR = 4        # children ranked per candidate measured
EXPLORE = 0.25         # share of each batch proposed without the model
FRESH = 0.2            # share of the children that are fresh draws


@dataclass(frozen=True)
class Candidate:
    """A drawn schedule, its trace as JSON and its decisions."""
    schedule: Schedule
    trace: str
    decisions: tuple[Any, ...]


class RandomSearch:
    """Fresh draws of the space."""

    def __init__(self, program: Program, space: SpaceFn, rng: random.Random,
                 sizes: dict[str, int] | None = None):
        self.program, self.space, self.rng = program, space, rng
        self.sizes = sizes or {}
        self.refused = 0          # draws a primitive refused
        self.last_refusal = ""

    def _draw(self, decisions: Sequence[Any] = ()) -> Candidate | None:
        sch, why = try_draw(self.program, self.space, seed=self.rng.randrange(2**31),
                            decisions=decisions)
        if sch is None:
            self.refused += 1
            self.last_refusal = why
            return None
        return Candidate(sch, sch.trace.to_json(), tuple(decisions_of(sch.trace)))

    def _fresh(self, n: int, seen: set[str], attempts: int) -> list[Candidate]:
        out: list[Candidate] = []
        for _ in range(attempts):
            if len(out) >= n:
                break
            c = self._draw()
            if c is not None and c.trace not in seen:
                seen.add(c.trace)
                out.append(c)
        return out

    def propose(self, n: int, seen: set[str], best: Sequence[tuple[float, str]]
                ) -> list[Candidate]:
        return self._fresh(n, seen, attempts=20 * n)

    def observe(self, candidates: Sequence[Candidate], seconds: Sequence[float | None]) -> None:
        """Learn from measured candidates (nothing to learn for random search)."""


class EvolutionarySearch(RandomSearch):
    """Mutations of the best schedules, ranked by a cost model that retrains as it goes."""

    def __init__(self, program: Program, space: SpaceFn, rng: random.Random,
                 sizes: dict[str, int] | None = None, model: CostModel | None = None):
        super().__init__(program, space, rng, sizes)
        self.model = model or CostModel(rng.randrange(2**31))
        self._features: dict[str, list[float]] = {}   # by trace: ranked, then learned from
        self._group = f"{program.name}@{id(self):x}"   # this search's times, in a shared model

    def _features_of(self, c: Candidate) -> list[float]:
        if c.trace not in self._features:
            self._features[c.trace] = features(c.schedule, self.sizes)
        return self._features[c.trace]

    def _mutant(self, parent: tuple[Any, ...]) -> Candidate | None:
        if not parent:
            return self._draw()
        child = list(parent)
        child[self.rng.randrange(len(child))] = None     # None: drawn again
        return self._draw(child)

    def propose(self, n: int, seen: set[str], best: Sequence[tuple[float, str]]
                ) -> list[Candidate]:
        parents = [tuple(decs) for _, decs in best[:POPULATION]]
        if not parents:
            return self._fresh(n, seen, attempts=20 * n)
        pool: list[Candidate] = []
        for _ in range(POOL_FACTOR * n * 3):
            if len(pool) >= POOL_FACTOR * n:
                break
            fresh = self.rng.random() < FRESH
            c = self._draw() if fresh else self._mutant(self.rng.choice(parents))
            if c is not None and c.trace not in seen and all(c.trace != p.trace for p in pool):
                pool.append(c)
        scores = self.model.predict([self._features_of(c) for c in pool])
        ranked = [c for _, c in sorted(zip(scores, range(len(pool))), key=lambda t: -t[0])]
        ordered = [pool[i] for i in ranked]
        explore = max(1, int(EXPLORE * n)) if n > 1 else 0
        chosen = ordered[:n - explore]
        rest = ordered[n - explore:]
        chosen += self.rng.sample(rest, min(explore, len(rest)))
        for c in chosen:
            seen.add(c.trace)
        return chosen

    def observe(self, candidates: Sequence[Candidate], seconds: Sequence[float | None]) -> None:
        ok = [(self._features_of(c), t) for c, t in zip(candidates, seconds) if t]
        if ok:
            self.model.update([x for x, _ in ok], [t for _, t in ok], group=self._group)
