# SPDX-License-Identifier: Apache-2.0
"""Full-tile isolation (``polyloop.poly.isolate``) on the demo matmul + ReLU schedule, at sizes
the 6 x 64 register tile does not divide (500, 1000) and divides (512, 1024), constant and
symbolic, next to NumPy, in one run.

    python benchmarks/bench_isolate.py                          # 500 512 1000 1024
    python benchmarks/bench_isolate.py --sizes 500 --rounds 5 --threads 2

Each row times the same schedule with isolation turned off (``sch.annotate(i_1, "isolate",
"off")``: one nest with min(...) bounds) and on (the default), and NumPy's
``np.maximum(a @ b, 0)``. Times are process CPU seconds per call (the median of 5 batches, the
best over ``--rounds`` interleaved rounds) with one thread everywhere by default: on a machine
shared with other processes, wall-clock timings of multi-threaded kernels are mostly noise.
GFLOP/s counts 2 n^3; ``vs NumPy`` > 1 means polyloop is faster.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time


def _cpu_seconds(fn, reps: int) -> float:
    fn()
    batches = []
    for _ in range(5):
        t = time.process_time()
        for _ in range(reps):
            fn()
        batches.append((time.process_time() - t) / reps)
    return statistics.median(batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 512, 1000, 1024])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    for var in ("POLYLOOP_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)     # before NumPy and polyloop read them
    import numpy as np
    import polyloop as pl
    from polyloop.cli.demo import matmul_relu
    from polyloop.ops import schedule_matmul_relu

    def build(n, isolate: bool):
        sch = schedule_matmul_relu(matmul_relu(n))
        if not isolate:
            sch.annotate(sch.get_loops("C")[3], "isolate", "off")
        return pl.build(sch)

    print(f"{'n':>5} {'size':>9} | {'no isolation':>12} {'isolation':>10} {'NumPy':>8} GFLOP/s"
          f" | {'gain':>5} {'vs NumPy':>8}")
    for n in args.sizes:
        rng = np.random.default_rng(n)
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32) - 0.5
        want = np.maximum(a @ b, 0)
        for symbolic in (False, True):
            mods = [build(pl.var("n") if symbolic else n, iso) for iso in (False, True)]
            d = np.empty((n, n), "float32")
            for m in mods:
                d[:] = np.nan
                m(a, b, d)
                if not np.allclose(d, want, rtol=1e-4, atol=1e-4):
                    raise SystemExit(f"bench_isolate: wrong result at n = {n}; not timing it")
            reps = max(1, int(2e8 / n ** 3))
            calls = [lambda m=m: m(a, b, d) for m in mods]
            calls.append(lambda: np.maximum(a @ b, 0, out=d))
            best = [float("inf")] * 3
            for _ in range(args.rounds):
                for k, fn in enumerate(calls):
                    best[k] = min(best[k], _cpu_seconds(fn, reps))
            gf = [2 * n ** 3 / s / 1e9 for s in best]
            print(f"{n:5d} {'symbolic' if symbolic else 'constant':>9} | {gf[0]:12.1f} "
                  f"{gf[1]:10.1f} {gf[2]:8.1f}         | {best[0] / best[1]:4.2f}x "
                  f"{best[2] / best[1]:7.2f}x", flush=True)


if __name__ == "__main__":
    main()
