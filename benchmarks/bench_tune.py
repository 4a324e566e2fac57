# SPDX-License-Identifier: Apache-2.0
"""Tuning from the bare computation: ``pl.tune`` on matmul (float32, n^3) with no hand
schedule, then the tuned kernel timed next to NumPy (OpenBLAS), PyTorch and polyloop's hand
schedule (``polyloop.ops.schedule_matmul``), all in this one run.

    python benchmarks/bench_tune.py                         # n = 1024, 200 trials
    python benchmarks/bench_tune.py --n 512 --trials 50 --work-dir /tmp/tune-mm

The tuning records go to ``--work-dir`` (a second run resumes from them). Each time is the
median of ``--repeat`` timings after warm-up; the rows are timed in ``--rounds`` interleaved
rounds and the best median kept (a shared machine's bursts of load then land on no one row).
``vs X`` is X's time divided by the tuned kernel's: > 1 means the tuned kernel is faster.
TVM MetaSchedule is not timed: it is not installed next to polyloop (it needs its own
environment).
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time

import numpy as np

import polyloop as pl
from polyloop.ops import matmul, schedule_matmul


def _median_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _references(n: int, a: np.ndarray, b: np.ndarray) -> dict:
    """name -> a function running that implementation once."""
    rows = {"NumPy": lambda: a @ b}
    try:
        import torch
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        rows["PyTorch"] = lambda: torch.matmul(ta, tb)
    except ImportError:
        print("PyTorch not installed: its row is left out")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    hand = pl.build(schedule_matmul(matmul(A, B)))
    c = np.empty((n, n), "float32")
    rows["polyloop hand schedule"] = lambda: hand(a, b, c)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--strategy", default="evolutionary")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    n = args.n
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="bench-tune-")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    print(f"matmul {n}^3 float32 on {os.cpu_count()} cores; tuning {args.trials} trials "
          f"({args.strategy}) into {work_dir}")
    start = time.perf_counter()
    res = pl.tune(C, trials=args.trials, strategy=args.strategy, work_dir=work_dir,
                  timeout=20.0, progress=_printer(args.trials, 2.0 * n ** 3))
    wall = time.perf_counter() - start
    statuses = [r.status.value for r in res.history]
    print(f"tuning: {wall:.0f} s wall, {wall / max(1, len(res.history)):.2f} s per trial; "
          + ", ".join(f"{s} {statuses.count(s)}" for s in sorted(set(statuses))))
    print("best trace:\n" + str(res.trace))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    tuned = res.build()
    c = np.full((n, n), np.nan, "float32")
    tuned(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3 * n ** 0.5)
    rows = {"polyloop tuned": lambda: tuned(a, b, c)} | _references(n, a, b)
    best = {name: float("inf") for name in rows}
    for _ in range(args.rounds):
        for name, fn in rows.items():
            best[name] = min(best[name], _median_time(fn, args.repeat))
    flops = 2.0 * n ** 3
    print(f"\n{'implementation':28} {'ms':>9} {'GFLOP/s':>9} {'tuned vs it':>12}")
    for name, t in best.items():
        print(f"{name:28} {t * 1e3:9.2f} {flops / t / 1e9:9.1f} "
              f"{best[name] / best['polyloop tuned']:11.2f}x")


def _printer(trials: int, flops: float):
    last = [0.0]

    def show(p) -> None:
        if p.trials == trials or time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            best = f"{p.best_seconds * 1e3:.2f} ms ({flops / p.best_seconds / 1e9:.1f} " \
                   "GFLOP/s)" if p.best_seconds else "-"
            print(f"  {p.trials}/{trials} trials, {p.elapsed:.0f} s, best {best}", flush=True)
    return show


if __name__ == "__main__":
    main()
