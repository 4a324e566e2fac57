# SPDX-License-Identifier: Apache-2.0
"""Run the benchmark: build and check each workload, then time polyloop and its references in
interleaved rounds, and collect one record per workload.

Every polyloop result is compared with NumPy before anything is timed (a wrong result stops the
run with BenchFailure). Every time is a median of ``repeat`` timings; each figure is measured in
``rounds`` rounds, each round timing every workload (polyloop and the references one after the
other), and the best median is kept: a burst of load from another process on a shared machine
spoils one round, and polyloop and its references alike. The
machine's limits are measured before and after the workloads; the higher figures are kept.

>>> from polyloop.bench.run import run_benchmarks
>>> from polyloop.bench.workloads import QUICK
>>> records, limits = run_benchmarks(QUICK[:1], repeat=2, peers=("numpy",))  # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import math
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import config
from ..errors import PolyloopError
from . import tvm_ref
from .limits import Limits, measure_limits
from ..runtime import Module
from .peers import NOT_INSTALLED, Peer, aligned_copy, load_torch, load_tvm, time_call
from .workloads import Workload

PEERS = ("torch", "numpy", "tvm")


class BenchFailure(PolyloopError):
    """A polyloop (or reference) result differs from NumPy's: nothing is timed."""


@dataclass(slots=True)
class Record:
    """One measured row; times in seconds (medians), None where not measured."""

    workload: Workload
    polyloop_s: float | None = None
    reference_s: dict[str, float | None] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)   # peer -> why it has no time
    status: str = "ok"                                     # or "schedule not available yet"

    @property
    def rate(self) -> float | None:
        """GFLOP/s or GB/s of polyloop (the workload's unit)."""
        return None if self.polyloop_s is None else self.workload.work / self.polyloop_s / 1e9

    def ratio(self, peer: str) -> float | None:
        """The peer's time over polyloop's (> 1: polyloop is faster)."""
        ref = self.reference_s.get(peer)
        if ref is None or self.polyloop_s is None:
            return None
        return ref / self.polyloop_s

    def fraction(self, limits: Limits | None) -> float | None:
        """Fraction of the measured peak (GFLOP/s) or triad bandwidth (GB/s)."""
        if self.rate is None or limits is None:
            return None
        limit = limits.triad_gbs if self.workload.unit == "GB/s" else limits.peak_gflops
        return self.rate / limit

    def to_json(self) -> dict[str, object]:
        return {"workload": self.workload.group, "key": self.workload.key,
                "shape": self.workload.shape, "polyloop_s": self.polyloop_s,
                "reference_s": {p: self.reference_s.get(p) for p in PEERS},
                "gflops": None if self.rate is None or self.workload.unit != "GFLOP/s"
                else self.rate,
                "gbs": self.rate if self.workload.unit == "GB/s" else None,
                "status": self.status, "notes": self.notes}


@dataclass(slots=True)
class Figure:
    """One implementation of one workload: ``measure()`` gives a median; the best is kept."""

    record: Record
    peer: str | None          # None: polyloop
    measure: Callable[[], float]
    best: float = math.inf

    def take(self) -> None:
        self.best = min(self.best, self.measure())

    def store(self) -> None:
        if self.peer is None:
            self.record.polyloop_s = self.best
        else:
            self.record.reference_s[self.peer] = self.best


def _progress(text: str) -> None:
    print(f"polyloop bench: {text}", file=sys.stderr, flush=True)


def _check(label: str, got: np.ndarray, want: np.ndarray, w: Workload) -> None:
    if got.shape != want.shape or not np.allclose(got, want, rtol=w.rtol, atol=w.atol):
        err = (float(np.max(np.abs(got.astype(np.float64) - want)))
               if got.shape == want.shape else math.nan)
        raise BenchFailure(f"{w.key}: {label} differs from NumPy (max abs error {err:.3e}, "
                           f"tolerance {w.atol:g} + {w.rtol:g} * |numpy|); nothing was timed")


def _kernel_time(mod: Module, args: list[np.ndarray], *, repeat: int, stat: str) -> float:
    if stat == "median":
        return mod.benchmark(*args, repeat=repeat, warmup=2)
    mod.benchmark(*args, repeat=1, warmup=2)
    return min(mod.benchmark(*args, repeat=1, warmup=0) for _ in range(repeat))


def _polyloop_figure(record: Record, inputs: list[np.ndarray], want: np.ndarray, *,
                     repeat: int, stat: str) -> Figure | None:
    w = record.workload
    if w.make is None:
        record.status = "schedule not available yet"
        return None
    mod = w.make()
    out = aligned_copy(np.full(want.shape, np.nan, dtype=np.float32))
    mod(*inputs, out)
    _check("polyloop", out, want, w)
    return Figure(record, None, lambda: _kernel_time(mod, [*inputs, out], repeat=repeat, stat=stat))


def _torch_figure(record: Record, torch: Peer, inputs: list[np.ndarray], want: np.ndarray, *,
                  repeat: int, stat: str) -> Figure | None:
    w = record.workload
    if w.torch is None:
        return None
    t = torch.module
    tensors = [t.from_numpy(a) for a in inputs]
    with t.no_grad():
        _check("PyTorch", w.torch(t, *tensors).numpy(), want, w)

    def measure() -> float:
        with t.no_grad():
            return time_call(lambda: w.torch(t, *tensors), repeat=repeat, stat=stat)
    return Figure(record, "torch", measure)


def _tvm_figure(record: Record, tvm: Peer, inputs: list[np.ndarray], want: np.ndarray, *,
                repeat: int, threads: int, stat: str) -> Figure | None:
    w = record.workload
    if w.tvm is None:
        return None
    try:
        call, output = tvm_ref.BUILDERS[w.tvm](tvm.module, *inputs, threads=threads)
        call()
    except Exception as e:  # noqa: BLE001 - a TVM failure is reported in the table, not fatal
        record.notes["tvm"] = f"failed ({type(e).__name__})"
        _progress(f"{w.key}: TVM failed, no TVM time: {type(e).__name__}: {str(e)[:200]}")
        return None
    _check("TVM", output(), want, w)
    return Figure(record, "tvm", lambda: time_call(call, repeat=repeat, stat=stat))


def _figures(record: Record, peers: Sequence[str], loaded: dict[str, Peer], *, repeat: int,
             threads: int, stat: str) -> list[Figure]:
    """Build and check every implementation of one workload; nothing is timed yet."""
    w = record.workload
    rng = np.random.default_rng(zlib.crc32(w.key.encode()))
    inputs = [aligned_copy(a) for a in w.inputs(rng)]
    want = w.reference(*inputs)
    figures = [_polyloop_figure(record, inputs, want, repeat=repeat, stat=stat)]
    if "numpy" in peers and w.numpy_timed:
        figures.append(Figure(record, "numpy", lambda: time_call(
            lambda: w.reference(*inputs), repeat=repeat, stat=stat)))
    if "torch" in peers and loaded["torch"].available:
        figures.append(_torch_figure(record, loaded["torch"], inputs, want, repeat=repeat,
                                     stat=stat))
    if "tvm" in peers and loaded["tvm"].available:
        figures.append(_tvm_figure(record, loaded["tvm"], inputs, want, repeat=repeat,
                                   threads=threads, stat=stat))
    for p in PEERS:
        record.reference_s.setdefault(p, None)
        if p not in peers:
            record.notes.setdefault(p, "not run")
        elif p in loaded and not loaded[p].available:
            record.notes.setdefault(p, loaded[p].version)
    return [f for f in figures if f is not None]


def run_benchmarks(workloads: Sequence[Workload], *, repeat: int = 10, rounds: int = 3,
                   peers: Sequence[str] = PEERS, threads: int = 2, quick: bool = False,
                   limits: bool = True, stat: str = "median") -> tuple[list[Record], Limits | None]:
    """Measure ``workloads`` against ``peers`` (any of "torch", "numpy", "tvm"); also the
    machine's limits unless ``limits`` is False. polyloop's kernels, PyTorch, TVM and the limit
    programs run on ``threads`` threads. ``stat="min"`` keeps the least timing instead of the
    median (on a machine shared with other busy processes, the median of a multi-threaded
    kernel measures the scheduler's time slices more than the kernel). Progress lines go to
    stderr."""
    if stat not in ("median", "min"):
        raise PolyloopError(f"stat must be 'median' or 'min', got {stat!r}")
    saved = config.CONFIG
    # polyloop's OpenMP code runs on as many threads as the references.
    config.CONFIG = dataclasses.replace(saved, num_threads=threads)
    try:
        return _run(workloads, repeat=repeat, rounds=rounds, peers=peers, threads=threads,
                    quick=quick, limits=limits, stat=stat)
    finally:
        config.CONFIG = saved


def _run(workloads: Sequence[Workload], *, repeat: int, rounds: int, peers: Sequence[str],
         threads: int, quick: bool, limits: bool, stat: str) -> tuple[list[Record], Limits | None]:
    loaded: dict[str, Peer] = {}
    if "torch" in peers:
        _progress("loading PyTorch")
        loaded["torch"] = load_torch(threads)
    if "tvm" in peers:
        _progress("loading TVM")
        loaded["tvm"] = load_tvm(threads)
    machine = None
    if limits:
        _progress(f"measuring the machine's limits on {threads} threads (FMA peak, triad)")
        machine = measure_limits(threads, quick=quick)
    records, plan = [], []
    for number, w in enumerate(workloads, start=1):
        _progress(f"[{number}/{len(workloads)}] {w.key} {w.shape}: build and check")
        record = Record(w)
        records.append(record)
        plan.append(_figures(record, peers, loaded, repeat=repeat, threads=threads, stat=stat))
    # Each round times every workload, so the rounds of one workload lie a whole round apart:
    # a burst of load from another process spoils one round of a row, not all of them.
    for r in range(rounds):
        for number, (record, figures) in enumerate(zip(records, plan), start=1):
            _progress(f"round {r + 1}/{rounds}: [{number}/{len(records)}] {record.workload.key}")
            for f in figures:
                f.take()
    for figures in plan:
        for f in figures:
            f.store()
    if machine is not None:
        # On a shared machine a burst of load lowers a measurement: measure again after the
        # workloads and keep the higher figure of each limit.
        _progress("measuring the machine's limits again")
        machine = machine.best_of(measure_limits(threads, quick=quick))
    return records, machine


__all__ = ["BenchFailure", "NOT_INSTALLED", "PEERS", "Record", "run_benchmarks"]
