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
    ``seconds``; ``history``: one record per candidate measured by this call.

    ``pl.tune(B, trials=64)`` returns one; here one is made by hand from a schedule, to show the
    fields and that ``build`` compiles the schedule it holds:

    >>> import numpy as np, polyloop as pl
    >>> from pathlib import Path
    >>> A = pl.placeholder((6,), "float32", name="A")
    >>> B = pl.compute((6,), lambda i: A[i] + 1.0, name="B")
    >>> sch = pl.Schedule(B)
    >>> sch.parallel(sch.get_loops("B")[0])
    >>> res = pl.TuneResult(schedule=sch, trace=sch.trace, seconds=0.002, history=(),
    ...                     target="c", database=Path("tune.sqlite"))
    >>> res
    <TuneResult of B: 2 ms, 0 candidates measured>
    >>> print(res.trace)
    [l0] = sch.get_loops(sch.get_block('B'))
    sch.parallel(l0)
    >>> res.build()(np.arange(6, dtype="float32"))
    array([1., 2., 3., 4., 5., 6.], dtype=float32)
    """
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
