# SPDX-License-Identifier: Apache-2.0
"""Building and running candidates as Ray tasks (``pl.tune(..., runner="ray")``).

Uses the cluster of an earlier ``ray.init(address=...)``, or starts a local one. Builds run in
parallel, one task per candidate and no more at once than the cluster has CPUs, each with its
own time-out from its start (a build that outlives it is cancelled and is a failed candidate,
as with the local builder); each run is a task on its own with a time-out (a task that
outlives it is cancelled, a worker that crashes is a failed run). Compiled kernels travel as
their source: a run task compiles it again on its node (gcc's cache makes that free on the
node that built it), so the nodes need no shared file system. The tuning process's settings
(compiler, kernel cache directory) travel with each task.

>>> from polyloop.tune.ray_runner import RayMeasurer   # doctest: +SKIP
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from .. import config
from ..errors import PolyloopError
from ..runtime.compiler import BASE_FLAGS, compile_c
from ..runtime.records import Status
from .measure import BuildJob, BuildResult, KernelSpec, RunResult, build_one, run_one


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PolyloopError("runner='ray' needs Ray: pip install polyloop[tune]") from None
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    return ray


def _build_remote(settings: config.Config, job: BuildJob) -> BuildResult:
    """On the node, with the tuning process's settings (compiler, kernel cache)."""
    config.CONFIG = settings
    return build_one(job)


def _run_remote(settings: config.Config, kernel: KernelSpec, inputs: dict[str, np.ndarray],
                sizes: dict[str, int], repeat: int) -> RunResult:
    """On the node: compile the source again if this node lacks the library, then run."""
    config.CONFIG = settings
    # a GPU kernel's spec holds its source: it is built again wherever it runs
    if isinstance(kernel, KernelSpec) and not kernel.library.path.exists():
        lib = compile_c(kernel.source, name=kernel.entry, extra_flags=_extra(kernel))
        kernel = replace(kernel, library=lib)
    return run_one(kernel, inputs, sizes, repeat)


def _extra(kernel: KernelSpec) -> tuple[str, ...]:
    return tuple(f for f in kernel.library.flags if f not in BASE_FLAGS
                 and f != "-ffast-math")


class RayMeasurer:
    """Builder and runner on a Ray cluster."""

    def __init__(self, timeout: float = 30.0, repeat: int = 5, build_timeout: float = 120.0):
        self.ray = _ray()
        self.timeout, self.repeat, self.build_timeout = timeout, repeat, build_timeout
        self._build = self.ray.remote(num_cpus=1)(_build_remote)
        self._run = self.ray.remote(num_cpus=1, max_retries=0)(_run_remote)
        self._inputs: Any = None
        self._sizes: dict[str, int] = {}

    def set_inputs(self, inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
        self._inputs, self._sizes = self.ray.put(inputs), sizes

    def build(self, jobs: Sequence[BuildJob]) -> list[BuildResult]:
        """Build every job; a task starts as it is submitted (no more in flight than CPUs), so
        its deadline counts from then, and a build that hangs costs one time-out."""
        slots = max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        results: dict[int, BuildResult] = {}
        waiting = list(range(len(jobs)))
        running: dict[Any, tuple[int, float]] = {}     # task -> (job, deadline)
        while waiting or running:
            while waiting and len(running) < slots:
                k = waiting.pop(0)
                ref = self._build.remote(config.CONFIG, jobs[k])
                running[ref] = (k, time.monotonic() + self.build_timeout)
            first = min(deadline for _, deadline in running.values())
            done, _ = self.ray.wait(list(running), num_returns=1,
                                    timeout=max(0.0, first - time.monotonic()))
            for ref in done:
                k, _ = running.pop(ref)
                results[k] = self._result(ref)
            now = time.monotonic()
            for ref in [r for r, (_, deadline) in running.items() if deadline <= now]:
                k, _ = running.pop(ref)
                self.ray.cancel(ref, force=True)
                results[k] = BuildResult(None, Status.TIMEOUT,
                                         f"the build took more than {self.build_timeout:g} s")
        return [results[k] for k in range(len(jobs))]

    def _result(self, ref: Any) -> BuildResult:
        try:
            return self.ray.get(ref)
        except Exception as e:   # noqa: BLE001 - a lost worker is a failed build
            return BuildResult(None, Status.BUILD_ERROR, f"Ray build task failed: {e}")

    def run(self, kernel: KernelSpec, repeat: int | None = None) -> RunResult:
        ref = self._run.remote(config.CONFIG, kernel, self._inputs, self._sizes,
                               self.repeat if repeat is None else repeat)
        done, _ = self.ray.wait([ref], timeout=self.timeout)
        if not done:
            self.ray.cancel(ref, force=True)
            return RunResult(Status.TIMEOUT, error=f"no result after {self.timeout:g} s")
        try:
            return self.ray.get(ref)
        except Exception as e:   # noqa: BLE001 - the kernel crashed the Ray worker
            return RunResult(Status.RUN_ERROR, error=f"the Ray run task failed: {e}")
