# SPDX-License-Identifier: Apache-2.0
"""What ``pl.tune`` returns, and what its progress callback receives.

>>> from polyloop.tune.result import Progress
>>> Progress(10, 2e-3, 2e6, 30.0).gflops
1.0
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..driver import build
from ..runtime.records import Record
from ..schedule import Schedule, Trace


@dataclass(frozen=True)
class TuneResult:
    """The fastest schedule found: ``schedule``, its ``trace``, its median run time
    ``seconds``; ``history``: one record per candidate measured by this call."""
    schedule: Schedule
    trace: Trace
    seconds: float
    history: tuple[Record, ...]
    target: str
    database: Path

    def build(self, **options):
        """The module of the best schedule: ``res.build()(a, b)``."""
        return build(self.schedule, target=self.target, **options)

    def __repr__(self) -> str:
        return (f"<TuneResult of {self.schedule.original.name}: {self.seconds * 1e3:.3g} ms, "
                f"{len(self.history)} candidates measured>")


@dataclass(frozen=True)
class Progress:
    """The state of a search after each measured candidate."""
    trials: int
    best_seconds: float | None
    flops: float
    elapsed: float

    @property
    def gflops(self) -> float | None:
        if not self.best_seconds or not self.flops:
            return None
        return self.flops / self.best_seconds / 1e9
