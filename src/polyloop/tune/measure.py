# SPDX-License-Identifier: Apache-2.0
"""Measuring candidates away from the tuner's process.

A builder turns (program, trace) jobs into compiled kernels: ``LocalBuilder`` replays and
compiles them in parallel worker processes. A compiled kernel travels between processes as a
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

import multiprocessing as mp
import os
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import config
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
    """One call on poisoned outputs, then the median of ``repeat`` timings (none with
    ``repeat=0``) (in a worker process)."""
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
        # the median of ``repeat`` timings (one figure: a slow kernel is called few times)
        times = [mod.benchmark(**arrays, **outs, **sizes, repeat=repeat, warmup=1)] \
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


def _use_config(settings: config.Config) -> None:
    config.CONFIG = settings


class LocalBuilder:
    """Compile candidates in ``workers`` processes (default: the CPU count). Each candidate
    has ``timeout`` seconds from the moment a worker takes it (isl can take very long on some
    schedules): one that takes longer is a failed candidate (``Status.TIMEOUT``), the workers
    are started again, and the candidates they were building are built again; a slow build
    costs one time-out, never the whole batch's."""

    def __init__(self, workers: int | None = None, timeout: float = 120.0):
        self.workers = workers or os.cpu_count() or 1
        self.timeout = timeout
        self._pool: ProcessPoolExecutor | None = None

    def build(self, jobs: Sequence[BuildJob]) -> list[BuildResult]:
        results: dict[int, BuildResult] = {}
        waiting = list(range(len(jobs)))
        running: dict[Future, tuple[int, float]] = {}     # future -> (job, deadline)
        while waiting or running:
            pool = self._started()
            # no more jobs in flight than workers: each starts as it is submitted
            while waiting and len(running) < self.workers:
                k = waiting.pop(0)
                running[pool.submit(build_one, jobs[k])] = (k, time.monotonic() + self.timeout)
            first = min(deadline for _, deadline in running.values())
            done, _ = wait(running, timeout=max(0.0, first - time.monotonic()),
                           return_when=FIRST_COMPLETED)
            if self._collect(done, running, results):
                waiting[:0] = [k for k, _ in running.values()]    # their worker is gone
                running.clear()
                self._kill()
        return [results[k] for k in range(len(jobs))]

    def _collect(self, done: set, running: dict, results: dict[int, BuildResult]) -> bool:
        """Move the finished and the late builds from ``running`` to ``results``; whether the
        workers must be stopped (a build is late, or a worker died)."""
        stop = False
        for f in done:
            k, _ = running.pop(f)
            try:
                results[k] = f.result()
            except BrokenProcessPool:
                results[k] = BuildResult(None, Status.BUILD_ERROR, "the build worker died")
                stop = True
        now = time.monotonic()
        for f in [f for f, (_, deadline) in running.items() if deadline <= now]:
            k, _ = running.pop(f)
            results[k] = BuildResult(None, Status.TIMEOUT,
                                     f"the build took more than {self.timeout:g} s")
            stop = True
        return stop

    def _started(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # the workers compile with this process's settings (its kernel cache, its compiler)
            self._pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"),
                                             initializer=_use_config, initargs=(config.CONFIG,))
        return self._pool

    def _kill(self) -> None:
        """Stop the workers now (a stuck build never returns to be cancelled)."""
        if self._pool is None:
            return
        # the executor offers no way to stop a running task: end its processes
        for proc in list(getattr(self._pool, "_processes", {}).values()):
            proc.kill()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def _serve(conn: Any, settings: config.Config) -> None:
    """The runner worker: keep the inputs, run kernels on them, answer each request."""
    # the tuner's settings: an OpenCL kernel is built again here, through the same caches
    _use_config(settings)
    inputs: dict[str, np.ndarray] = {}
    sizes: dict[str, int] = {}
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "inputs":
            inputs, sizes = message[1], message[2]
            conn.send(("ok",))
        elif message[0] == "run":
            conn.send(run_one(message[1], inputs, sizes, message[2]))
        else:
            return


class LocalRunner:
    """Run kernels one at a time in a worker process, with a time-out per kernel."""

    def __init__(self, timeout: float = 30.0, repeat: int = 5):
        self.timeout, self.repeat = timeout, repeat
        self._proc: Any = None
        self._conn: Any = None
        self._inputs: tuple[dict, dict] = ({}, {})

    def set_inputs(self, inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
        self._inputs = (inputs, sizes)
        self.close()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, config.CONFIG), daemon=True)
        self._proc.start()
        child.close()
        self._conn.send(("inputs", *self._inputs))
        if not self._conn.poll(120.0):
            raise PolyloopError("the tuning runner's worker process did not start")
        self._conn.recv()

    def run(self, kernel: AnyKernel, repeat: int | None = None) -> RunResult:
        """Outputs and times of ``kernel`` (``repeat=0``: outputs only)."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        try:
            self._conn.send(("run", kernel, self.repeat if repeat is None else repeat))
            if self._conn.poll(self.timeout):
                return self._conn.recv()
            self.close()
            return RunResult(Status.TIMEOUT, error=f"no result after {self.timeout:g} s")
        except (EOFError, OSError, BrokenPipeError):
            code = self._proc.exitcode if self._proc is not None else None
            self.close()
            return RunResult(Status.RUN_ERROR, error=f"the kernel crashed its worker process "
                                                     f"(exit code {code})")

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(5.0)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
