# SPDX-License-Identifier: Apache-2.0
"""``pl.graph.tune``: tune a whole model's kernels, spending trials where its time is.

The optimized graph's kernels are grouped into *tasks*, one per distinct program (kernels of
the same program are one task called several times; a program names its arguments after the
graph's values, so two layers of equal shapes on different values are two tasks today). Each task's first candidate is the
schedule the rules give it (what ``pl.graph.build`` runs untuned), so a tuned model is never
slower than the untuned one. Then a task scheduler gives rounds of trials to the task whose
share of the model's estimated time (calls x best measured seconds) is largest, discounted by
the trials it already had (diminishing returns, as Ansor's scheduler estimates them); each
round updates the estimate. Every candidate goes to ``work_dir/records.sqlite``, which
``pl.graph.build(g, database=work_dir)`` reads; a second run resumes from the records.

>>> import numpy as np, polyloop as pl
>>> from polyloop.graph.tune import extract_tasks
>>> b = pl.graph.GraphBuilder("m"); x = b.input("x", (4, 16)); Op = pl.graph.Op
>>> w = b.constant(np.ones((16, 16), "float32"), "w")
>>> y = b.emit(Op.RELU, b.emit(Op.MATMUL, b.emit(Op.RELU, b.emit(Op.MATMUL, x, w)), w))
>>> [(t.name, t.calls) for t in extract_tasks(b.build(y))]
[('m_k0_matmul', 1), ('m_k1_matmul', 1)]
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import PolyloopError
from ..runtime.records import workload_key
from ..schedule import Schedule
from ..tune import tune as tune_kernel
from .build import kernel_schedule, optimize
from .ir import Graph, KernelCall

log = logging.getLogger("polyloop.tune")

#: trials a round gives one task (fewer when less budget is left)
ROUND = 16


@dataclass(frozen=True, slots=True)
class Task:
    """A distinct kernel program of a model: its rule-chosen schedule and how often it runs."""
    name: str
    schedule: Schedule
    calls: int


@dataclass(slots=True)
class TaskState:
    """What the scheduler knows of a task: trials spent and the best seconds measured."""
    task: Task
    trials: int = 0
    best: float = math.inf

    def priority(self) -> float:
        """Estimated time of the task in the model, discounted by the trials it had."""
        return self.task.calls * self.best / math.sqrt(1 + self.trials / ROUND)


@dataclass(frozen=True, slots=True)
class GraphTuneResult:
    """The tasks, the trials each got, the best seconds each has, and the work directory to
    give ``pl.graph.build(g, database=...)``."""
    work_dir: str
    tasks: tuple[Task, ...]
    trials: tuple[int, ...]
    seconds: tuple[float, ...]
    history: tuple[str, ...] = field(default=())

    @property
    def estimated_seconds(self) -> float:
        """The sum over tasks of calls x best seconds: the kernels' share of a model run."""
        return sum(t.calls * s for t, s in zip(self.tasks, self.seconds) if math.isfinite(s))


def extract_tasks(g: Graph, *, winograd: bool = True) -> list[Task]:
    """The distinct kernel programs of ``g`` after ``pl.graph.optimize``, in order of first
    use, with how many kernel calls run each."""
    order: list[str] = []
    found: dict[str, tuple[str, Schedule]] = {}
    calls: dict[str, int] = {}
    for b in optimize(g, winograd=winograd).bindings:
        if not isinstance(b, KernelCall):
            continue
        sch = kernel_schedule(b)
        key = workload_key(sch.original, "c")
        if key not in found:
            found[key] = (b.kernel.name, sch)
            order.append(key)
        calls[key] = calls.get(key, 0) + 1
    return [Task(found[k][0], found[k][1], calls[k]) for k in order]


def tune(g: Graph, trials: int = 1000, *, work_dir: str, sizes: dict[str, int] | None = None,
         runner: str | Any = "local", seed: int = 0, winograd: bool = True,
         timeout: float = 30.0, repeat: int = 3,
         progress: Callable[[int, int, str], None] | None = None) -> GraphTuneResult:
    """Tune the kernels of ``g`` with ``trials`` candidates in all (at least one per task: the
    rules' schedule), recording to ``work_dir``; then ``pl.graph.build(g,
    database=work_dir)`` runs the best of each. ``sizes`` gives the symbolic sizes to measure
    at (default 1 each, a batch of one); ``runner`` is ``pl.tune``'s (``"local"`` worker
    processes or ``"ray"``); ``progress(done, total, task_name)`` is called after each round.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("m"); x = b.input("x", (4, 16))
    >>> res = pl.graph.tune(b.build(b.emit(pl.graph.Op.RELU, x)), trials=2,
    ...                     work_dir="tune-m")              # doctest: +SKIP
    """
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise PolyloopError(f"pl.graph.tune: trials must be a positive int, got {trials!r}")
    if not isinstance(work_dir, str) or not work_dir:
        raise PolyloopError(f"pl.graph.tune: work_dir must name a directory, got {work_dir!r}")
    states = [TaskState(t) for t in extract_tasks(g, winograd=winograd)]
    options = dict(work_dir=work_dir, runner=runner, seed=seed, timeout=timeout, repeat=repeat)
    spent, history = 0, []
    pending = list(states)          # first, each task's rule schedule is measured
    while spent < trials and states:
        state = pending.pop(0) if pending else max(states, key=TaskState.priority)
        if not math.isfinite(state.best) and state.trials:
            states.remove(state)    # it builds or runs no candidate: nothing to tune
            continue
        count = 1 if not state.trials else min(ROUND, trials - spent)
        res = tune_kernel(state.task.schedule, trials=count, seeds=[state.task.schedule],
                          sizes=_sizes(state.task.schedule, sizes), **options)
        state.trials += count
        spent += count
        if res.seconds is not None and math.isfinite(res.seconds):
            state.best = min(state.best, res.seconds)
        history.append(f"{state.task.name}: {count} trials, best {state.best:.3g} s")
        log.info("%s", history[-1])
        if progress is not None:
            progress(spent, trials, state.task.name)
    return GraphTuneResult(work_dir, tuple(s.task for s in states),
                           tuple(s.trials for s in states), tuple(s.best for s in states),
                           tuple(history))


def _sizes(sch: Schedule, sizes: dict[str, int] | None) -> dict[str, int] | None:
    """The symbolic sizes of a task's program: those given, else 1 each."""
    params = list(sch.original.params)
    if not params:
        return None
    given = sizes or {}
    return {p: int(given.get(p, 1)) for p in params}
