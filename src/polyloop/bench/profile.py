# SPDX-License-Identifier: Apache-2.0
"""``polyloop bench --profile``: where the time of each workload goes.

For each workload, in one run:

- a **roofline line**: polyloop's time, the flops, the minimum bytes (inputs read and outputs
  written once; and with write-allocate, outputs read once more), the bound
  ``max(flops / peak, bytes / triad)`` from the limits measured in the same run, and the
  fraction of that bound polyloop achieves (bound time / measured time);
- the **per-nest profile** of polyloop's module built with timers three levels deep
  (``pl.build(..., profile=3)``), and how much the timers cost (instrumented vs plain time);
- when ``perf`` is usable, the **top symbols** of a ``perf record -e cpu-clock`` sample of
  polyloop's kernel and of the reference (PyTorch, else NumPy) run in a loop by this process
  (skipped with the reason otherwise).

>>> from polyloop.bench.profile import perf_status
>>> usable, why = perf_status()
>>> isinstance(usable, bool) and isinstance(why, str)
True
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .. import config
from .limits import Limits, measure_limits
from .peers import load_torch, time_call
from .report import format_time
from .run import BenchFailure
from .workloads import Workload

PROFILE_DEPTH = 3
PERF_SECONDS = 1.5
TOP_SYMBOLS = 8


def _progress(text: str) -> None:
    print(f"polyloop bench --profile: {text}", file=sys.stderr, flush=True)


def perf_status() -> tuple[bool, str]:
    """(usable, why not): ``perf`` is on PATH and may sample this process with cpu-clock."""
    perf = shutil.which("perf")
    if perf is None:
        return False, "perf is not installed (apt-get install linux-perf / linux-tools)"
    with tempfile.TemporaryDirectory(prefix="polyloop-perf-") as tmp:
        try:
            done = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-o",
                                   str(Path(tmp) / "probe.data"), "--", "true"],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"perf could not run: {e}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return False, f"perf record is not permitted here ({last.strip()})"
    return True, ""


def sample_symbols(fn: Callable[[], object], *, seconds: float = PERF_SECONDS,
                   top: int = TOP_SYMBOLS) -> list[tuple[float, str, str]]:
    """Run ``fn`` in a loop for ``seconds`` while ``perf record -e cpu-clock`` samples this
    process; the ``top`` symbols as (percent of samples, symbol, shared object)."""
    with tempfile.TemporaryDirectory(prefix="polyloop-perf-") as tmp:
        data = str(Path(tmp) / "perf.data")
        rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-p",
                                str(os.getpid()), "-o", data], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)   # perf attaches (to the threads that exist now) before the loop
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            fn()
        rec.send_signal(signal.SIGINT)
        try:
            rec.communicate(timeout=60)
            report = subprocess.run(["perf", "report", "--stdio", "-i", data, "--sort",
                                     "sym,dso", "--percent-limit", "0.5"], capture_output=True,
                                    text=True, timeout=120)
        except subprocess.TimeoutExpired as e:
            rec.kill()
            rec.communicate()
            _progress(f"perf did not finish in time ({' '.join(map(str, e.cmd[:2]))}); "
                      "no symbols sampled")
            return []
    return _parse_report(report.stdout, top)


def _parse_report(text: str, top: int) -> list[tuple[float, str, str]]:
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or line.lstrip().startswith("#") or not parts[0].endswith("%"):
            continue
        try:
            percent = float(parts[0].rstrip("%"))
        except ValueError:
            continue
        # "12.34%  [.] symbol name ...  dso"
        rest = parts[1:]
        if rest and rest[0] in ("[.]", "[k]"):
            rest = rest[1:]
        if not rest:
            continue
        rows.append((percent, " ".join(rest[:-1]) or rest[0], rest[-1]))
    return _merge_unresolved(rows)[:top]


def _merge_unresolved(rows: list[tuple[float, str, str]]) -> list[tuple[float, str, str]]:
    """Addresses perf could not name (a stripped library such as libgomp, whose samples are
    mostly its threads waiting at barriers) become one row per library."""
    named = [r for r in rows if not r[1].startswith("0x")]
    unnamed: dict[str, list[float]] = {}
    for p, symbol, dso in rows:
        if symbol.startswith("0x"):
            unnamed.setdefault(dso, []).append(p)
    named += [(sum(ps), f"({len(ps)} unnamed addresses)", dso) for dso, ps in unnamed.items()]
    return sorted(named, key=lambda r: -r[0])


@dataclasses.dataclass(slots=True)
class Roofline:
    """The lower bound on a workload's time from the machine's limits."""

    seconds: float
    flops: float
    min_bytes: float
    write_allocate_bytes: float
    limits: Limits | None

    @property
    def bound_s(self) -> float | None:
        if self.limits is None:
            return None
        return max(self.flops / (self.limits.peak_gflops * 1e9),
                   self.min_bytes / (self.limits.triad_gbs * 1e9))

    def line(self) -> str:
        text = (f"time {format_time(self.seconds)}, {self.flops / 1e9:.4g} GFLOP "
                f"({self.flops / self.seconds / 1e9:.1f} GFLOP/s), min bytes "
                f"{self.min_bytes / 1e6:.2f} MB ({self.write_allocate_bytes / 1e6:.2f} MB with "
                f"write-allocate; {self.min_bytes / self.seconds / 1e9:.1f} GB/s)")
        bound = self.bound_s
        if bound is None:
            return text + "; no bound (limits not measured)"
        which = ("compute" if self.flops / self.limits.peak_gflops  # type: ignore[union-attr]
                 >= self.min_bytes / self.limits.triad_gbs else "memory")  # type: ignore[union-attr]
        return (text + f"; bound {format_time(bound)} ({which}: peak "
                f"{self.limits.peak_gflops:.0f} GFLOP/s, triad "  # type: ignore[union-attr]
                f"{self.limits.triad_gbs:.1f} GB/s) -> {bound / self.seconds:.0%} of the bound")


def _reference(w: Workload, inputs: list[np.ndarray], peers: Sequence[str],
               threads: int) -> tuple[str, Callable[[], object]] | None:
    if "torch" in peers and w.torch is not None:
        torch = load_torch(threads)
        if torch.available:
            t = torch.module
            tensors = [t.from_numpy(a) for a in inputs]

            def call() -> object:
                with t.no_grad():
                    return w.torch(t, *tensors)
            return "PyTorch", call
    if "numpy" in peers and w.numpy_timed:
        return "NumPy", lambda: w.reference(*inputs)
    return None


def profile_workload(w: Workload, *, limits: Limits | None, peers: Sequence[str], repeat: int,
                     threads: int, perf: tuple[bool, str]) -> str:
    """The report of one workload (see the module's docstring)."""
    if w.make is None:
        return f"## {w.key} {w.shape}: schedule not available yet"
    inputs = w.inputs(np.random.default_rng(zlib.crc32(w.key.encode())))
    want = w.reference(*inputs)
    plain, timed = w.make(), w.make(profile=PROFILE_DEPTH)
    out = np.full(want.shape, np.nan, dtype=np.float32)
    for mod, what in ((plain, "polyloop"), (timed, "polyloop (profiled)")):
        out.fill(np.nan)
        mod(*inputs, out)
        if not np.allclose(out, want, rtol=w.rtol, atol=w.atol):
            raise BenchFailure(f"{w.key}: {what} differs from NumPy; nothing was timed")
    reference = _reference(w, inputs, peers, threads)
    seconds = plain.benchmark(*inputs, out, repeat=repeat, warmup=2)
    ref_s = time_call(reference[1], repeat=repeat) if reference is not None else None
    timed.benchmark(*inputs, out, repeat=1, warmup=2)          # warm, then count from zero
    timed.profile(reset=True)
    timed_s = timed.benchmark(*inputs, out, repeat=repeat, warmup=0)
    prof = timed.profile()
    flops = w.work if w.unit == "GFLOP/s" else sum(
        r.flops or 0.0 for r in prof.rows if r.depth == 1) / max(prof.calls, 1)
    moved = sum(a.nbytes for a in inputs) + want.astype(np.float32).nbytes
    roof = Roofline(seconds, flops, moved, moved + want.astype(np.float32).nbytes, limits)
    lines = [f"## {w.key} {w.shape}", "roofline: " + roof.line()]
    if reference is not None and ref_s is not None:
        lines.append(f"reference: {reference[0]} {format_time(ref_s)} "
                     f"({ref_s / seconds:.2f}x polyloop's speed ratio, > 1: polyloop faster; "
                     f"{flops / ref_s / 1e9:.1f} GFLOP/s"
                     + (f", {roof.bound_s / ref_s:.0%} of the bound)" if roof.bound_s else ")"))
    lines += ["", str(prof), f"timers: instrumented {format_time(timed_s)} a call vs plain "
              f"{format_time(seconds)} ({timed_s / seconds - 1:+.1%})"]
    lines += ["", *_perf_lines(perf, plain, inputs, out, reference)]
    return "\n".join(lines)


def _perf_lines(perf: tuple[bool, str], plain, inputs: list[np.ndarray], out: np.ndarray,
                reference: tuple[str, Callable[[], object]] | None) -> list[str]:
    usable, why = perf
    if not usable:
        return [f"perf: skipped: {why}"]
    # the C function in a tight loop, as Module.benchmark calls it (no Python per call)
    targets = [("polyloop", lambda: plain.benchmark(*inputs, out, repeat=1, warmup=0,
                                                    min_time=0.05))]
    if reference is not None:
        targets.append(reference)
    lines = []
    for name, fn in targets:
        rows = sample_symbols(fn)
        lines.append(f"perf record -e cpu-clock, {name} ({PERF_SECONDS:g} s of calls), top "
                     "symbols:")
        lines += [f"  {p:5.1f}%  {sym}  [{dso}]" for p, sym, dso in rows] or ["  (no samples: perf attached too late for so short a run)"]
    return lines


def profile_benchmarks(workloads: Sequence[Workload], *, peers: Sequence[str], repeat: int = 10,
                       threads: int = 2, quick: bool = False, limits: bool = True,
                       perf: bool = True) -> str:
    """The ``--profile`` report of ``workloads``: limits measured first, then each workload.

    >>> from polyloop.bench.workloads import QUICK
    >>> text = profile_benchmarks(QUICK[:1], peers=("numpy",), repeat=2, quick=True,
    ...                           limits=False, perf=False)   # doctest: +SKIP
    """
    saved = config.CONFIG
    config.CONFIG = dataclasses.replace(saved, num_threads=threads)
    try:
        machine = None
        if limits:
            _progress(f"measuring the machine's limits on {threads} threads")
            machine = measure_limits(threads, quick=quick)
        status = perf_status() if perf else (False, "not asked for (--no-perf)")
        parts = [f"machine limits: {machine.describe()}" if machine else
                 "machine limits: not measured (--no-limits)"]
        for number, w in enumerate(workloads, start=1):
            _progress(f"[{number}/{len(workloads)}] {w.key} {w.shape}")
            parts.append(profile_workload(w, limits=machine, peers=peers, repeat=repeat,
                                          threads=threads, perf=status))
        return "\n\n".join(parts)
    finally:
        config.CONFIG = saved
