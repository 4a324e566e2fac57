# SPDX-License-Identifier: Apache-2.0
"""Measuring candidates away from the tuner's process.

A builder turns (program, trace) jobs into compiled kernels: ``LocalBuilder`` replays and
compiles them in parallel worker processes (``python -m polyloop.tune.worker``: polyloop's own
module, so the user's script is never run again there, see ``workers.py``). A compiled kernel travels between processes as a
spec: the C target's shared library, or the GPU targets' source (and PTX for CUDA) with their
launches, built again on the device of the process that runs it (``OpenCLKernelSpec``,
``CudaKernelSpec``; PyOpenCL's binary cache makes the OpenCL rebuild cheap). A runner runs one
kernel on the tuner's inputs: ``LocalRunner`` keeps one worker process, sends it the inputs
once, and for each kernel gets back the outputs of one call (outputs passed in poisoned with
NaN, so an element left unwritten shows) and the run times. A kernel that crashes or outlives
the time-out kills only the worker, which is started again; the failure is a result like any
other.

>>> from polyloop.tune.measure import LocalRunner
>>> runner = LocalRunner(timeout=10.0)   # doctest: +SKIP
"""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..driver import build
from ..errors import PolyloopError
from ..ir.program import BufferRole, Program
from ..ir.shapes import evaluate
from ..runtime import Module
from ..runtime.compiler import Library
from ..runtime.cuda import CudaModule
from ..runtime.opencl import OpenCLModule
from ..runtime.records import Status
from ..schedule import Schedule
from .workers import WorkerProcess, ready


@dataclass(frozen=True)
class KernelSpec:
    """A compiled kernel, as a worker process can load it again."""
    library: Library
    entry: str
    args: tuple
    params: tuple[str, ...]
    source: str

    def load(self) -> Module:
        return Module(self.library, entry=self.entry, args=self.args, params=self.params,
                      source=self.source)


@dataclass(frozen=True)
class OpenCLKernelSpec:
    """An OpenCL program as a worker process builds it again on its own OpenCL device."""
    source: str
    entry: str
    args: tuple
    params: tuple[str, ...]
    options: tuple[tuple[str, Any], ...]      # the other arguments of OpenCLModule

    def load(self) -> Any:
        return OpenCLModule(self.source, entry=self.entry, args=self.args, params=self.params,
                            **dict(self.options))


@dataclass(frozen=True)
class CudaKernelSpec:
    """A CUDA program (source and PTX), loaded on the CUDA device of the process running it."""
    source: str
    ptx: str
    entry: str
    args: tuple
    params: tuple[str, ...]
    scratch: tuple
    launches: tuple

    def load(self) -> Any:
        return CudaModule(self.source, self.ptx, entry=self.entry, args=self.args,
                          params=self.params, scratch=self.scratch, launches=self.launches)


def spec_of(mod: Any) -> AnyKernel:
    """The spec that rebuilds ``mod`` (a module of ``pl.build``) in another process."""
    target = getattr(mod, "target", "c")
    if target == "opencl":
        return OpenCLKernelSpec(mod.source, mod.entry, mod.args, mod.params,
                                tuple(mod.rebuild_options().items()))
    if target == "cuda":
        return CudaKernelSpec(mod.source, mod.ptx, mod.entry, mod.args, mod.params,
                              mod.scratch, mod.launches)
    return KernelSpec(mod.library, mod.entry, mod.args, mod.params, mod.source)


AnyKernel = KernelSpec | OpenCLKernelSpec | CudaKernelSpec


@dataclass(frozen=True)
class BuildJob:
    program: Program
    trace: str
    target: str = "c"


@dataclass(frozen=True)
class BuildResult:
    kernel: AnyKernel | None
    status: Status = Status.OK
    error: str = ""


@dataclass(frozen=True)
class RunResult:
    status: Status
    times: tuple[float, ...] = ()
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    error: str = ""


def build_one(job: BuildJob) -> BuildResult:
    """Replay the trace and compile (in a worker process or a Ray task)."""
    try:
        sch = Schedule.from_trace(job.program, job.trace)
        mod = build(sch, target=job.target)
    except PolyloopError as e:
        return BuildResult(None, Status.BUILD_ERROR, f"{type(e).__name__}: {e}")
    except Exception:   # noqa: BLE001 - a compiler bug must not stop the search
        return BuildResult(None, Status.BUILD_ERROR, traceback.format_exc(limit=4))
    return BuildResult(spec_of(mod))


def run_one(kernel: AnyKernel, inputs: dict[str, np.ndarray], sizes: dict[str, int],
            repeat: int) -> RunResult:
    """One call on poisoned outputs, then the fastest of ``repeat`` timings (none with
    ``repeat=0``) (in a worker process): other processes on the machine only add time, so the
    fastest timing is the one that says most about the schedule."""
    try:
        mod = kernel.load()
        arrays = {k: v.copy() for k, v in inputs.items()}
        outs = {}
        for b in kernel.args:
            if b.role is BufferRole.OUTPUT:
                shape = tuple(int(_eval(d, sizes)) for d in b.shape)
                outs[b.name] = _poisoned(shape, b.dtype.numpy)
        mod(**arrays, **outs, **sizes)
        # copies: the timing calls below update the in-out arrays again
        written = {b.name: (outs | arrays)[b.name].copy() for b in kernel.args
                   if b.role in (BufferRole.OUTPUT, BufferRole.INOUT)}
        # one figure: a slow kernel is called few times (a device's module times its own way)
        fastest = {"stat": "min"} if type(mod) is Module else {}
        times = [mod.benchmark(**arrays, **outs, **sizes, repeat=repeat, warmup=1, **fastest)] \
            if repeat else []
    except Exception:   # noqa: BLE001 - reported as the candidate's failure
        return RunResult(Status.RUN_ERROR, error=traceback.format_exc(limit=4))
    return RunResult(Status.OK, tuple(times), written)


def _eval(d: Any, sizes: dict[str, int]) -> int:
    return evaluate(d, sizes)


def _poisoned(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    if np.issubdtype(dtype, np.floating):
        return np.full(shape, np.nan, dtype)
    if np.issubdtype(dtype, np.integer):
        return np.full(shape, np.iinfo(dtype).min // 3, dtype)
    return np.zeros(shape, dtype)


# the most seconds a new worker process may take to start (import polyloop) before the time-out
# of its first build begins
STARTUP_SECONDS = 120.0


class LocalBuilder:
    """Compile candidates in ``workers`` processes (default: the CPU count), each a
    ``python -m polyloop.tune.worker`` (``workers.py``: the user's script is not run again).
    Each candidate has ``timeout`` seconds from the moment a worker takes it (isl can take
    very long on some schedules; a new worker's start-up is not counted): one that takes longer is a failed candidate
    (``Status.TIMEOUT``) and its worker is ended and started again; the other workers go on.
    A worker that dies fails its candidate with the reason (``WorkerProcess.death``)."""

    def __init__(self, workers: int | None = None, timeout: float = 120.0):
        self.workers = workers or os.cpu_count() or 1
        self.timeout = timeout
        self._idle: list[WorkerProcess] = []

    def build(self, jobs: Sequence[BuildJob]) -> list[BuildResult]:
        results: dict[int, BuildResult] = {}
        waiting = list(range(len(jobs)))
        busy: dict[WorkerProcess, tuple[int, float]] = {}      # worker -> (job, deadline)
        try:
            while waiting or busy:
                while waiting and (self._idle or len(busy) < self.workers):
                    k = waiting.pop(0)
                    started = self._send(jobs[k])
                    if isinstance(started, BuildResult):
                        results[k] = started
                    else:       # the time-out counts once the worker takes the job
                        busy[started] = (k, time.monotonic() + self.timeout + STARTUP_SECONDS)
                if busy:
                    self._collect(busy, results)
        finally:
            for w in busy:          # interrupted: their answers would come to nobody
                w.kill()
        return [results[k] for k in range(len(jobs))]

    def _send(self, job: BuildJob) -> WorkerProcess | BuildResult:
        """A worker now building ``job``, or the result when it could not be sent."""
        worker = self._idle.pop() if self._idle else None
        try:
            worker = worker or WorkerProcess()
            worker.send(("build", job))
        except (OSError, EOFError) as e:
            if worker is None:
                return BuildResult(None, Status.BUILD_ERROR, "could not start a build worker "
                                   f"process ({type(e).__name__}: {e})")
            error = worker.death("build")
            worker.kill()
            return BuildResult(None, Status.BUILD_ERROR, error)
        except Exception as e:  # noqa: BLE001 - pickling a program can raise anything
            self._idle.append(worker)
            return BuildResult(None, Status.BUILD_ERROR, _unsendable(job, e))
        return worker

    def _collect(self, busy: dict[WorkerProcess, tuple[int, float]],
                 results: dict[int, BuildResult]) -> None:
        """Wait for the first answer or deadline; move what finished (or is late) from
        ``busy`` to ``results``."""
        first = min(deadline for _, deadline in busy.values())
        for w in ready(busy, max(0.0, first - time.monotonic())):
            k, _ = busy.pop(w)
            try:
                answer = w.recv()
                if answer == ("started",):
                    busy[w] = (k, time.monotonic() + self.timeout)
                    continue
                results[k] = answer
                self._idle.append(w)
            except (EOFError, OSError):
                results[k] = BuildResult(None, Status.BUILD_ERROR, w.death("build"))
                w.kill()
        now = time.monotonic()
        for w in [w for w, (_, deadline) in busy.items() if deadline <= now]:
            k, _ = busy.pop(w)
            results[k] = BuildResult(None, Status.TIMEOUT,
                                     f"the build took more than {self.timeout:g} s")
            w.kill()

    def close(self) -> None:
        for w in self._idle:
            w.close()
        self._idle = []


def _unsendable(job: BuildJob, error: Exception) -> str:
    return (f"the program '{job.program.name}' cannot be sent to a build worker process "
            f"({type(error).__name__}: {error}); tuning needs a program made of polyloop's own "
            "objects and of classes a module defines (not the main script): define such classes "
            "in a module the script imports")


class LocalRunner:
    """Run kernels one at a time in a worker process (``workers.py``), with a time-out per
    kernel. A kernel that crashes the worker is a failed candidate whose error says how the
    worker died; the next kernel gets a new worker."""

    def __init__(self, timeout: float = 30.0, repeat: int = 5):
        self.timeout, self.repeat = timeout, repeat
        self._worker: WorkerProcess | None = None
        self._inputs: tuple[dict, dict] = ({}, {})

    def set_inputs(self, inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
        self._inputs = (inputs, sizes)
        self.close()

    def _start(self) -> WorkerProcess:
        worker = WorkerProcess()
        try:
            worker.send(("inputs", *self._inputs))
            if worker.poll(120.0):
                worker.recv()
                return worker
        except (EOFError, OSError):
            pass
        error = worker.death("run")
        worker.kill()
        raise PolyloopError(f"the tuning runner's worker process did not start: {error}")

    def run(self, kernel: AnyKernel, repeat: int | None = None) -> RunResult:
        """Outputs and times of ``kernel`` (``repeat=0``: outputs only)."""
        if self._worker is None or not self._worker.alive():
            self.close()
            self._worker = self._start()
        worker = self._worker
        try:
            worker.send(("run", kernel, self.repeat if repeat is None else repeat))
            if worker.poll(self.timeout):
                return worker.recv()
            self.close()
            return RunResult(Status.TIMEOUT, error=f"no result after {self.timeout:g} s")
        except (EOFError, OSError):
            error = worker.death("run")
            self.close()
            return RunResult(Status.RUN_ERROR, error=f"the kernel crashed its worker process: "
                                                     f"{error}")

    def close(self) -> None:
        if self._worker is not None:
            self._worker.kill()
        self._worker = None
