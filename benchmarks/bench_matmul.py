# SPDX-License-Identifier: Apache-2.0
"""Matmul (float32) with polyloop's default schedule and with the demo's hand schedule, next to
NumPy, in one run.

    python benchmarks/bench_matmul.py                      # n = 512 and 1024
    python benchmarks/bench_matmul.py --sizes 256 512 --repeat 5 --rounds 3

Rows:
- default schedule: ``pl.build(C)`` with no schedule, one module for every n (``n = pl.var``);
  compared with NumPy's ``a @ b``.
- hand schedule: the schedule ``polyloop demo`` uses (``polyloop.ops.schedule_matmul_relu``) on
  matmul + ReLU, once size-generic (``pl.var``) and once specialized (n a constant); compared
  with NumPy's ``np.maximum(a @ b, 0)``.

Each figure is the median of ``--repeat`` timings after warm-up (``Module.benchmark``; NumPy
timed the same way); with ``--rounds R`` every figure is measured R times, the rounds interleaved
over all rows, and the best median is kept, so that a burst of load from another process on a
shared machine does not land on one row only. GFLOP/s counts 2 n^3. ``vs NumPy`` is NumPy's time
divided by polyloop's: > 1 means polyloop is faster.
"""
from __future__ import annotations

import argparse
import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import polyloop as pl
from polyloop.cli.demo import (format_speed, matmul_relu, numpy_matmul_relu, package_version,
                               time_numpy, usable_cores)
from polyloop.ops import schedule_matmul_relu


@dataclass(slots=True)
class Figure:
    """One measured time: ``measure()`` returns seconds; the best over rounds is kept."""

    measure: Callable[[], float]
    seconds: float = math.inf

    def take(self) -> None:
        self.seconds = min(self.seconds, self.measure())


@dataclass(frozen=True, slots=True)
class Row:
    variant: str
    n: int
    polyloop: Figure
    numpy: Figure


def matmul(n):
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    return pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")


def inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)


def kernel_figure(mod, reference, a, b, *, repeat: int, slow: bool) -> Figure:
    """Check the module against NumPy once, then time it (fewer timings when a call is slow)."""
    out = mod(a, b)
    want = reference(a, b)
    if not np.allclose(out, want, rtol=1e-4, atol=1e-5):
        err = float(np.max(np.abs(out - want)))
        raise SystemExit(f"bench_matmul: wrong result (max abs error {err:.3e}); not timing it")
    if slow:
        return Figure(lambda: mod.benchmark(a, b, out, repeat=min(repeat, 3), warmup=1))
    return Figure(lambda: mod.benchmark(a, b, out, repeat=repeat))


def plan(sizes: list[int], repeat: int) -> list[Row]:
    """Build every module and check its result; nothing is timed yet."""
    rows = []
    default = pl.build(matmul(pl.var("n")))
    generic = pl.build(schedule_matmul_relu(matmul_relu(pl.var("n"))))
    for n in sizes:
        a, b = inputs(n)
        np_mm = Figure(lambda a=a, b=b: time_numpy(np.matmul, (a, b), repeat=repeat))
        np_relu = Figure(lambda a=a, b=b: time_numpy(numpy_matmul_relu, (a, b), repeat=repeat))
        special = pl.build(schedule_matmul_relu(matmul_relu(n)))
        rows += [
            Row("default schedule, n = pl.var", n,
                kernel_figure(default, np.matmul, a, b, repeat=repeat, slow=True), np_mm),
            Row("hand schedule (+ReLU), n = pl.var", n,
                kernel_figure(generic, numpy_matmul_relu, a, b, repeat=repeat, slow=False),
                np_relu),
            Row(f"hand schedule (+ReLU), n = {n} constant", n,
                kernel_figure(special, numpy_matmul_relu, a, b, repeat=repeat, slow=False),
                np_relu),
        ]
    return rows


def measure(rows: list[Row], rounds: int) -> None:
    figures = list({id(f): f for r in rows for f in (r.numpy, r.polyloop)}.values())
    for _ in range(rounds):
        for figure in figures:
            figure.take()


def report(rows: list[Row]) -> str:
    """A Markdown table, one row per polyloop variant and size."""
    width = max(len(r.variant) for r in rows)
    head = (f"| {'polyloop':<{width}} | {'n':>5} | {'polyloop':>10} | {'GFLOP/s':>7} | "
            f"{'NumPy':>9} | {'GFLOP/s':>7} | {'vs NumPy':>8} |")
    lines = [head, "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"]
    for r in rows:
        flops, t, t_np = 2.0 * r.n ** 3, r.polyloop.seconds, r.numpy.seconds
        lines.append(f"| {r.variant:<{width}} | {r.n:>5} | {t * 1e3:>7.2f} ms | "
                     f"{flops / t / 1e9:>7.3g} | {t_np * 1e3:>6.2f} ms | "
                     f"{flops / t_np / 1e9:>7.3g} | {format_speed(t_np / t):>8} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--repeat", type=int, default=10, help="timings per median")
    parser.add_argument("--rounds", type=int, default=1, help="keep the best of this many medians")
    args = parser.parse_args()
    print(f"bench_matmul  {time.strftime('%Y-%m-%d')}  {platform.machine()}, "
          f"{usable_cores()} cores  "
          f"polyloop {package_version('polyloop')}, numpy {np.__version__}  float32; median of "
          f"{args.repeat} timings ({min(args.repeat, 3)} for the default schedule), "
          f"best of {args.rounds} round(s)")
    rows = plan(args.sizes, args.repeat)
    measure(rows, args.rounds)
    print(report(rows))


if __name__ == "__main__":
    main()
