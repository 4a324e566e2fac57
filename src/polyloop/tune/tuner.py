# SPDX-License-Identifier: Apache-2.0
"""``pl.tune``: search a space of schedules of a program, measure candidates in worker
processes (or on a Ray cluster), keep every record in an SQLite database, return the best.

>>> import polyloop as pl
>>> A = pl.placeholder((64, 64), name="A"); B = pl.placeholder((64, 64), name="B")
>>> k = pl.reduce_axis((0, 64), name="k")
>>> C = pl.compute((64, 64), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
>>> res = pl.tune(C, trials=4)          # doctest: +SKIP
>>> mod = res.build()                   # doctest: +SKIP
"""
from __future__ import annotations

import logging
import random
import tempfile
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..driver import parse_target
from ..errors import PolyloopError
from ..frontend.kernel import LoopKernel
from ..frontend.te import Tensor
from ..ir.program import Program
from ..poly.count import instance_flops, statement_instances
from ..runtime.cuda import device_available
from ..runtime.opencl import platform_available
from ..runtime.records import Database, Record, Status, workload_key
from ..schedule import Schedule
from ..schedule.kernel import schedule_of
from ..schedule.sampling import decisions_of
from ..schedule.trace import Trace
from ..testing.oracle import random_inputs
from .measure import BuildJob, BuildResult, LocalBuilder, LocalRunner, RunResult
from .ray_runner import RayMeasurer
from .result import Progress, TuneResult
from .cost_model import CostModel
from .search import STRATEGIES, Candidate, EvolutionarySearch, RandomSearch
from .rules_gpu import GPU_TARGETS, gpu_space
from .space import SpaceFn, auto_schedule_seed, generated_space

log = logging.getLogger("polyloop.tune")

DEFAULT_SIZE = 128     # the value a size parameter gets when sizes= does not give one
BATCH = 8              # candidates built and measured per round of the search (default)
CONFIRM = (4, 2)       # the fastest candidates timed again at the end, and how many times
RUNNERS = ("local", "ray")
TARGETS = ("c", *GPU_TARGETS)


def tune(obj: Any, target: str = "c", trials: int = 200, *, strategy: str = "evolutionary",
         work_dir: str | None = None, runner: str | Any = "local", seed: int = 0,
         space: SpaceFn | None = None, sizes: dict[str, int] | None = None,
         batch: int | None = None, timeout: float = 30.0, repeat: int = 3, builder: Any = None,
         progress: Callable[[Progress], None] | None = None,
         seeds: Sequence[Schedule] = ()) -> TuneResult:
    """Search ``trials`` schedules of ``obj`` (output tensors, a Program, a ``make_kernel``
    kernel or a Schedule, whose program is tuned) and return the fastest as a ``TuneResult``.

    ``target``: ``"c"``, ``"opencl"`` or ``"cuda"`` (candidates run on this machine's OpenCL or
    CUDA device; refused when it has none). ``space``: a function drawing a schedule with the
    sampling primitives (default: the space generated from the program's blocks, of GPU
    schedules for the GPU targets: ``rules_gpu``). ``strategy``: ``"evolutionary"`` (mutations
    ranked by an XGBoost cost model) or ``"random"``. ``runner``: ``"local"`` (a worker
    process), ``"ray"`` (tasks on the cluster of ``ray.init``, or a local one) or an object with
    ``run(kernel, repeat=None)``; ``timeout`` (seconds) and ``repeat`` (timings per candidate)
    configure the built-in ones. A runner with a ``target`` (``pl.rpc.Runner``: a device's)
    sets the target candidates are built for, e.g. ``"c -mtriple=aarch64-linux-gnu"``. Records go to ``work_dir/records.sqlite``; a workload it knows
    resumes from its best schedules. ``sizes`` binds symbolic sizes for measuring (default 128
    each). Every candidate's outputs are compared with the default schedule's; a mismatch is
    logged as an error and never chosen. ``seeds``: schedules of the same program measured
    first (unless recorded already), e.g. the one a rule chose: the result is never slower.

    >>> import polyloop as pl
    >>> A = pl.placeholder((16,), name="A"); B = pl.compute((16,), lambda i: A[i], name="B")
    >>> pl.tune(B, trials=2).seconds > 0     # doctest: +SKIP
    True
    """
    target = _runner_target(runner, target)
    _check_options(target, trials, strategy, runner)
    db = Database(work_dir if work_dir is not None else tempfile.mkdtemp(prefix="polyloop-tune-"))
    build_, run_ = measurers(runner, builder, timeout, repeat)
    try:
        task = TaskTuner(obj, db, build_, run_, target=target, strategy=strategy, seed=seed,
                         space=space, sizes=sizes, progress=progress, seeds=seeds)
        task.run(trials, batch)
        task.confirm()
    finally:
        close_measurers(build_, run_)
    return task.result()


def close_measurers(build_: Any, run_: Any) -> None:
    """Stop the worker processes of a builder and a runner (once when they are one)."""
    for m in {id(build_): build_, id(run_): run_}.values():
        getattr(m, "close", lambda: None)()


class TaskTuner:
    """One program's tuning kept between rounds of trials: its inputs and reference outputs,
    its search (with a cost model, which several tasks may share) and its records. ``pl.tune``
    runs one; ``pl.graph.tune`` runs one per distinct kernel of a model, all on one builder
    and runner (``build_``, ``run_``: ``pl.tune``'s measurers). ``auto_seeds``: the
    auto-scheduler's and the plain loops' schedules are measured first too (as ``pl.tune``
    does for the C target when no space is given); ``seeds`` always are."""

    def __init__(self, obj: Any, db: Database, build_: Any, run_: Any, *, target: str = "c",
                 strategy: str = "evolutionary", seed: int = 0, space: SpaceFn | None = None,
                 sizes: dict[str, int] | None = None,
                 progress: Callable[[Progress], None] | None = None,
                 seeds: Sequence[Schedule] = (), model: CostModel | None = None,
                 auto_seeds: bool = True) -> None:
        program = _program(obj)
        self.program, self.target, self.db = program, target, db
        self.key = workload_key(program, target)
        self.sizes = _sizes(program, sizes)
        self.inputs = random_inputs(program, np.random.default_rng(seed), self.sizes)
        self.build_, self.run_ = build_, run_
        rng = random.Random(seed)
        default = gpu_space if target in GPU_TARGETS else generated_space
        self.search = EvolutionarySearch(program, space or default, rng, self.sizes, model) \
            if strategy == "evolutionary" else RandomSearch(program, space or default, rng,
                                                            self.sizes)
        self.progress = progress
        self.first = [Candidate(sch, sch.trace.to_json(), tuple(decisions_of(sch.trace)))
                      for sch in _same_program(program, seeds)]
        if auto_seeds and parse_target(target)[0] == "c" and space is None:
            self.first += _seeds(program)
        self.seed_traces = [c.trace for c in self.first]
        self.loop: _Loop | None = None

    def run(self, trials: int, batch: int | None = None) -> float | None:
        """Measure ``trials`` more candidates (the seeds first); the best seconds so far."""
        self.run_.set_inputs(self.inputs, self.sizes)
        if self.loop is None:
            reference = _reference(self.program, self.target, self.build_, self.run_)
            self.loop = _Loop(self.program, self.key, self.target, self.db, reference,
                              self.build_, self.run_, self.search, self.progress,
                              _flops(self.program, self.sizes))
        done = len(self.loop.history)
        self.loop.run(done + trials, batch or max(1, min(BATCH, trials)), self.first)
        self.first = []
        return self.loop.best[0][0] if self.loop.best else None

    def confirm(self) -> None:
        """Time the fastest candidates of this run and the seeds again, taking turns, so
        that a schedule a busy moment made look slow (the seeds: the untuned decision) gets
        its chance before the best one is chosen (``CONFIRM``)."""
        if self.loop is not None:
            self.loop.confirm(self.seed_traces)

    def result(self) -> TuneResult:
        """The best schedule recorded (this run's or an earlier one's)."""
        return _result(self.program, self.target, self.db, self.key,
                       self.loop.history if self.loop is not None else [])


def _check_options(target: str, trials: int, strategy: str, runner: Any) -> None:
    if strategy not in STRATEGIES:
        raise PolyloopError(f"tune: strategy must be one of {', '.join(STRATEGIES)}, got "
                            f"{strategy!r}")
    if not isinstance(trials, int) or trials < 1:
        raise PolyloopError(f"tune: trials must be a positive int, got {trials!r}")
    if isinstance(runner, str) and runner not in RUNNERS:
        raise PolyloopError(f"tune: runner must be one of {', '.join(RUNNERS)} or a runner "
                            f"object, got {runner!r}")
    if target not in TARGETS and not (isinstance(target, str) and target.startswith("c ")):
        raise PolyloopError(f"tune: target must be one of {', '.join(TARGETS)} (or 'c "
                            f"-mtriple=...' measured by a device's runner), got {target!r}")
    parse_target(target)     # a C target for another machine: its options are valid
    _check_device(target)


def _runner_target(runner: Any, target: str) -> str:
    """The target a runner measures (a device's, ``pl.rpc.Runner``), else ``target``."""
    device = None if isinstance(runner, str) else getattr(runner, "target", None)
    if device is not None:      # one spelling per target: the records are keyed by it
        kind, c_target = parse_target(str(device))
        device = str(c_target) if kind == "c" else str(device)
    if device is None or target == device:
        return target
    if target != "c":
        raise PolyloopError(f"tune: target={target!r}, but the runner measures on a device "
                            f"of target '{device}'; leave target= out")
    return str(device)


def _check_device(target: str) -> None:
    """A GPU target is tuned by running its candidates: refuse at once when nothing here can."""
    if target == "opencl":
        ok, why = platform_available()
        if not ok:
            raise PolyloopError(f"tune: target 'opencl' measures candidates on an OpenCL "
                                f"device, and none can run here: {why}")
    elif target == "cuda":
        ok, why = device_available()
        if not ok:
            raise PolyloopError(f"tune: target 'cuda' measures candidates on a CUDA device, "
                                f"and none can run here ({why}); tune for 'opencl' or 'c', or "
                                "on a machine with an NVIDIA GPU (pl.build(..., "
                                "target='cuda') still compiles here)")


def _program(obj: Any) -> Program:
    if isinstance(obj, Schedule):
        return obj.original
    if isinstance(obj, Program):
        return obj
    if isinstance(obj, LoopKernel):
        return schedule_of(obj).original
    outs = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if outs and all(isinstance(t, Tensor) for t in outs):
        return Schedule(*outs).original
    raise PolyloopError(f"tune() takes output tensors, a Program, a kernel or a Schedule, got "
                        f"{obj!r}")


def _sizes(program: Program, sizes: dict[str, int] | None) -> dict[str, int]:
    sizes = dict(sizes or {})
    unknown = set(sizes) - set(program.params)
    if unknown:
        known = ", ".join(program.params) or "none"
        raise PolyloopError(f"tune: sizes= names {sorted(unknown)}, which are not size "
                            f"parameters of '{program.name}' ({known}); give only those")
    for p in program.params:
        if p not in sizes:
            log.info("size %s = %d for measuring (give sizes= to choose)", p, DEFAULT_SIZE)
            sizes[p] = DEFAULT_SIZE
    return sizes


def _flops(program: Program, sizes: dict[str, int]) -> float:
    total = 0.0
    for s in program.statements:
        n = statement_instances(program, s.name, sizes)
        total += (n or 0) * instance_flops(s)
    return total


def _same_program(program: Program, seeds: Sequence[Schedule]) -> list[Schedule]:
    """The seed schedules, each checked to schedule ``program``."""
    for sch in seeds:
        if not isinstance(sch, Schedule) or workload_key(sch.original, "c") != \
                workload_key(program, "c"):
            raise PolyloopError(f"tune: seeds= takes schedules of the tuned program "
                                f"'{program.name}', got {sch!r}")
    return list(seeds)


def _seeds(program: Program) -> list[Candidate]:
    """The candidates measured first, so that the result is never slower than either:
    ``pl.auto_schedule``'s schedule (as decisions of the generated space when they reproduce
    it) and the default schedule (the loops as written)."""
    out = []
    for sch in (auto_schedule_seed(program), Schedule(program)):
        if sch is not None:
            out.append(Candidate(sch, sch.trace.to_json(), tuple(decisions_of(sch.trace))))
    return out


def measurers(runner: Any, builder: Any, timeout: float, repeat: int) -> tuple[Any, Any]:
    """The builder and runner of ``pl.tune``'s ``runner`` and ``builder`` options."""
    if runner == "ray":
        ray = RayMeasurer(timeout=timeout, repeat=repeat)
        return builder or ray, ray
    run_ = LocalRunner(timeout=timeout, repeat=repeat) if runner == "local" else runner
    return builder or LocalBuilder(), run_


def _reference(program: Program, target: str, build_: Any, run_: Any) -> dict[str, np.ndarray]:
    """The outputs of the default schedule (what every candidate must reproduce)."""
    built = build_.build([BuildJob(program, Trace().to_json(), target)])[0]
    if built.kernel is None:
        raise PolyloopError(f"tune: the default schedule of '{program.name}' does not build: "
                            f"{built.error}")
    ran = run_.run(built.kernel, repeat=0)     # its outputs only: the naive nest is slow
    if ran.status is not Status.OK:
        raise PolyloopError(f"tune: the default schedule of '{program.name}' failed to run "
                            f"({ran.status.value}): {ran.error}")
    return ran.outputs


def mismatch(reference: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> str:
    """Where ``outputs`` differ from ``reference`` ("" if nowhere). Outputs are passed in
    poisoned with NaN: an element one schedule writes and the other does not differs; sums
    may round differently in another order (tolerance relative to the largest element)."""
    for name, ref in reference.items():
        got = outputs.get(name)
        if got is None or got.shape != ref.shape:
            return f"output {name} is missing or has another shape"
        if ref.dtype.kind == "f":
            finite = np.abs(ref[np.isfinite(ref)])
            scale = float(finite.max()) if finite.size else 0.0
            tol = (1e-3 if ref.dtype == np.float32 else 1e-9) * (scale + 1.0)
            # an element neither writes stays NaN in both (outputs are passed in poisoned)
            bad = ~((np.abs(got - ref) <= tol) | (np.isnan(got) & np.isnan(ref)))
        else:
            bad = got != ref
        if bad.any():
            at = tuple(int(x) for x in np.argwhere(bad)[0])
            return f"{name}{list(at)} is {got[at]}, the default schedule gives {ref[at]}"
    return ""


class _Loop:
    """The measuring loop: propose, build, run, compare, record, learn."""

    def __init__(self, program, key, target, db, reference, build_, run_, search, progress,
                 flops):
        self.program, self.key, self.target, self.db = program, key, target, db
        self.reference, self.build_, self.run_, self.search = reference, build_, run_, search
        self.progress, self.flops = progress, flops
        self.history: list[Record] = []
        self.kernels: dict[str, Any] = {}      # the built kernels of this run, by trace
        self.seen = {r.trace for r in db.records(key)}
        self.best = [(r.seconds, decisions_of(Trace.from_json(r.trace)))
                     for r in db.top(key, 64)]
        if self.best:
            log.info("resuming %s: %d records, best %.3g s", program.name, len(self.seen),
                     self.best[0][0])
        self.start = time.monotonic()

    def run(self, trials: int, batch: int, seeds: list[Candidate] | None = None) -> None:
        """Measure ``trials`` new candidates: first the ``seeds`` the database does not know,
        then those the search proposes, ``batch`` at a time."""
        idle = 0
        seeds = [c for c in seeds or [] if c.trace not in self.seen]
        while len(self.history) < trials and idle < 3:
            n = min(batch, trials - len(self.history))
            # the seeds make a round of their own: the search then starts from their times
            # (mutations of the untuned decision), not from draws made before any is known
            cands, seeds = seeds[:n], seeds[n:]
            self.seen.update(c.trace for c in cands)
            if not cands:
                cands = self.search.propose(n, self.seen, self.best)
            if not cands:
                idle += 1
                log.warning("no new schedule drawn (refused: %d; last: %s)",
                            self.search.refused, self.search.last_refusal)
                continue
            idle = 0
            built = self.build_.build([BuildJob(self.program, c.trace, self.target)
                                       for c in cands])
            times = [self._measure(c, b) for c, b in zip(cands, built)]
            self.search.observe(cands, times)
        if len(self.history) < trials:
            log.warning("the space of %s ran out after %d new schedules", self.program.name,
                        len(self.history))

    def _measure(self, cand: Candidate, built: BuildResult) -> float | None:
        ran = RunResult(built.status, error=built.error)
        if built.kernel is not None:
            ran = self.run_.run(built.kernel)
        status, error = ran.status, ran.error
        if status is Status.OK:
            error = mismatch(self.reference, ran.outputs)
            if error:
                status = Status.MISMATCH
                log.error("WRONG RESULT from a candidate schedule of %s (a polyloop bug; it is "
                          "recorded and never chosen): %s\n%s", self.program.name, error,
                          Trace.from_json(cand.trace))
        elif status is not Status.OK:
            log.info("candidate failed (%s): %s", status.value, error.strip()[-300:])
        rec = Record(self.key, cand.trace, ran.times if status is Status.OK else (),
                     status, error, self.target)
        if status is Status.OK:
            self.kernels[cand.trace] = built.kernel
        self.db.add(rec)
        self.history.append(rec)
        if rec.seconds is not None:
            self.best.append((rec.seconds, list(cand.decisions)))
            self.best.sort(key=lambda t: t[0])
        self._report()
        return rec.seconds

    def confirm(self, seeds: Sequence[str]) -> None:
        """Time again, in turns, the ``CONFIRM[0]`` fastest candidates this run measured and
        the ``seeds`` (traces) among them, ``CONFIRM[1]`` times; each timing is recorded
        (the best record then is the fastest timing of any)."""
        count, times = CONFIRM
        fastest = [t for _, t in sorted((r.seconds, r.trace) for r in self.history
                                        if r.seconds is not None)]
        chosen = list(dict.fromkeys(fastest[:count] + [t for t in seeds if t in self.kernels]))
        if len(chosen) < 2:
            return
        for _ in range(times):
            for trace in chosen:
                ran = self.run_.run(self.kernels[trace])
                if ran.status is Status.OK:
                    self.db.add(Record(self.key, trace, ran.times, Status.OK, "", self.target))
                    decisions = decisions_of(Trace.from_json(trace))
                    self.best.append((min(ran.times), list(decisions)))
        self.best.sort(key=lambda t: t[0])

    def _report(self) -> None:
        if self.progress is None:
            return
        best = self.best[0][0] if self.best else None
        self.progress(Progress(len(self.history), best, self.flops,
                               time.monotonic() - self.start))


def _result(program: Program, target: str, db: Database, key: str,
            history: list[Record]) -> TuneResult:
    best = db.best(key)
    if best is None:
        raise PolyloopError(f"tune: no candidate of '{program.name}' ran successfully "
                            f"({len(history)} tried; see the records in {db.path})")
    sch = Schedule.from_trace(program, best.trace)
    return TuneResult(sch, sch.trace, best.seconds or 0.0, tuple(history), target, db.path)
