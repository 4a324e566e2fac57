# SPDX-License-Identifier: Apache-2.0
"""Reading the per-nest timers of a module built with ``profile=`` (``codegen/profile.py``):
a table of where the time of the calls so far went, nest by nest.

Top-level nests are timed with the monotonic clock (wall time, outside parallel regions); the
nests inside them with the time-stamp counter, summed over the threads that ran them and
converted to seconds with the counter frequency measured by the same runs (top-level nests
read both clocks). A deeper nest's *time* is its thread time divided by the number of threads
when it runs inside a parallel loop: what it costs in wall time when the threads are balanced.

>>> import numpy as np, polyloop as pl
>>> A = pl.placeholder((64, 64), "float32", name="A")
>>> B = pl.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
>>> C = pl.compute((64, 64), lambda i, j: B[i, j] + A[i, j], name="C")
>>> mod = pl.build(pl.Schedule(C), profile=True)
>>> out = mod(np.ones((64, 64), "float32"))
>>> prof = mod.profile()
>>> [(row.label, row.runs, row.flops) for row in prof.rows]
[('B [i, j]', 1, 4096.0), ('C [i, j]', 1, 4096.0)]
>>> print(prof)  # doctest: +SKIP
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import PolyloopError
from ..util.units import format_time

# Per region and per call of the kernel: (flops, bytes moved), None where not countable.
Counts = Callable[[Mapping[str, int]], list[tuple[float | None, float | None]]]


@dataclass(frozen=True, slots=True)
class ProfileLayout:
    """What the generated counters mean, from the driver: one entry per timed region."""

    labels: tuple[str, ...]
    depths: tuple[int, ...]
    parallel: tuple[bool, ...]          # runs inside a parallel loop (time summed over threads)
    counts: Counts | None = None


@dataclass(frozen=True, slots=True)
class NestProfile:
    """One row: a nest, how often it ran, its seconds over all calls, its share of the calls'
    time, and its flops and bytes over all calls (None: not statically countable)."""

    label: str
    depth: int
    runs: int
    seconds: float
    share: float | None
    flops: float | None
    bytes: float | None
    thread_average: bool

    @property
    def gflops(self) -> float | None:
        return None if self.flops is None or self.seconds <= 0 else self.flops / self.seconds / 1e9

    @property
    def gbs(self) -> float | None:
        return None if self.bytes is None or self.seconds <= 0 else self.bytes / self.seconds / 1e9


@dataclass(frozen=True, slots=True)
class Profile:
    """The profile of a module's calls since it was loaded (or last reset)."""

    entry: str
    calls: int
    rows: tuple[NestProfile, ...]
    tick_hz: float | None
    threads: int
    sizes: Mapping[str, int]

    @property
    def seconds(self) -> float:
        """Wall seconds in the top-level nests, over all calls."""
        return sum(r.seconds for r in self.rows if r.depth == 1)

    def __str__(self) -> str:
        head = (f"profile of {self.entry}: {self.calls} call(s), {format_time(self.seconds)} in its "
                f"nests ({format_time(self.seconds / self.calls) if self.calls else '-'} a call)")
        averaged = any(r.thread_average for r in self.rows)
        extras = [f"{self.threads} OpenMP threads"] if averaged else []
        if self.tick_hz:
            extras.append(f"time-stamp counter {self.tick_hz / 1e9:.2f} GHz")
        if self.sizes:
            extras.append("sizes " + ", ".join(f"{k}={v}" for k, v in self.sizes.items()))
        lines = ["; ".join([head, *extras])]
        cells = [("#", "nest", "runs", "time/call", "share", "GFLOP/s", "GB/s")]
        pending: list[tuple[int, tuple[str, ...]]] = []   # rest rows, printed after the stages
        for k, r in enumerate(self.rows):
            while pending and pending[-1][0] >= r.depth:
                cells.append(pending.pop()[1])
            cells.append(self._cells(str(k), r.depth, r.label, str(r.runs), r.seconds,
                                     r.thread_average, r.share, _rate(r.gflops), _rate(r.gbs)))
            rest = self._rest(k)
            if rest is not None:
                total = self.seconds
                pending.append((r.depth, self._cells(
                    "", r.depth + 1, f"(rest of {k}: around its stages: fork/join, waits, loop "
                    "control)", "", rest, False, rest / total if total > 0 else None, "", "")))
        cells += [row for _, row in reversed(pending)]
        widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
        for row in cells:
            lines.append("  ".join(c.ljust(w) if i == 1 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        if any(r.thread_average for r in self.rows):
            lines.append(f"* inside a parallel loop: thread time / {self.threads} threads")
        lines.append("GB/s counts each distinct element a nest reads from or writes to memory "
                     "once (a lower bound on its traffic); '-': not statically countable")
        return "\n".join(lines)


    def _cells(self, number: str, depth: int, label: str, runs: str, seconds: float,
               averaged: bool, share: float | None, gflops: str, gbs: str) -> tuple[str, ...]:
        per_call = seconds / self.calls if self.calls else 0.0
        return (number, "  " * (depth - 1) + label, runs,
                format_time(per_call) + ("*" if averaged else ""),
                "-" if share is None else f"{share:.1%}", gflops, gbs)

    def _rest(self, k: int) -> float | None:
        """The part of region ``k``'s time its stages do not account for; None when it has
        no stages (the rows after it, one level deeper, up to the next row at its depth)."""
        depth = self.rows[k].depth
        inside = 0.0
        found = False
        for r in self.rows[k + 1:]:
            if r.depth <= depth:
                break
            if r.depth == depth + 1:
                inside += r.seconds
                found = True
        return max(self.rows[k].seconds - inside, 0.0) if found else None




def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def read_counters(cdll: ctypes.CDLL, count: int, *, reset: bool
                  ) -> tuple[list[int], list[int], list[int]]:
    """(ns, ticks, runs) per region from the library's ``pl_profile_read``."""
    try:
        fn = cdll.pl_profile_read
    except AttributeError:
        raise PolyloopError("the compiled library has no profile counters; build with "
                            "pl.build(..., profile=True)") from None
    fn.restype = ctypes.c_int32
    arrays = [(ctypes.c_int64 * count)() for _ in range(3)]
    got = fn(*arrays, ctypes.c_int32(1 if reset else 0))
    if got != count:
        raise PolyloopError(f"the library has {got} profile counters, the module expects {count}")
    return [list(a) for a in arrays]  # type: ignore[return-value]


def openmp_threads(cdll: ctypes.CDLL) -> int:
    """The number of threads a parallel loop of the library runs on."""
    try:
        fn = cdll.omp_get_max_threads
    except AttributeError:
        return 1
    fn.restype = ctypes.c_int
    return int(fn())


def make_profile(entry: str, layout: ProfileLayout, counters: tuple[list[int], ...], *,
                 threads: int, sizes: Mapping[str, int]) -> Profile:
    """Turn raw counters into a Profile (seconds, shares, rates)."""
    ns, ticks, runs = counters
    top = [k for k, d in enumerate(layout.depths) if d == 1]
    wall_ns, top_ticks = sum(ns[k] for k in top), sum(ticks[k] for k in top)
    hz = top_ticks / wall_ns * 1e9 if wall_ns > 0 and top_ticks > 0 else None
    calls = runs[top[0]] if top else 0
    counts = layout.counts(sizes) if layout.counts is not None and calls else None
    total = wall_ns / 1e9
    rows = []
    for k, label in enumerate(layout.labels):
        averaged = layout.parallel[k] and threads > 1
        if layout.depths[k] == 1:
            seconds = ns[k] / 1e9
        else:
            seconds = ticks[k] / hz if hz else 0.0
            if averaged:
                seconds /= threads
        flops, moved = counts[k] if counts is not None else (None, None)
        rows.append(NestProfile(label, layout.depths[k], runs[k], seconds,
                                seconds / total if total > 0 else None,
                                None if flops is None else flops * calls,
                                None if moved is None else moved * calls, averaged))
    return Profile(entry, calls, tuple(rows), hz, threads, dict(sizes))
