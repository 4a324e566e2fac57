# SPDX-License-Identifier: Apache-2.0
"""Matmul through tensorize (packed panels + AVX-512/AVX2 register-tile micro-kernel) against
NumPy, timed in the same run, interleaved, medians of several rounds.

    python benchmarks/bench_tensorize.py [n ...] [--rounds 7]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import polyloop as pl
from polyloop.intrin import gemm_intrin, host_kind
from polyloop.intrin.matmul import schedule_matmul

CONFIGS = (  # (rows, cols, packed_a, kc)
    (6, 32, False, 256), (14, 32, True, 256), (14, 32, True, 512), (8, 32, True, 256))


def matmul(n: int):
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    return pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="*", type=int, default=[1024])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    isa = host_kind()
    configs = CONFIGS if isa == "avx512" else ((6, 16 if isa == "avx2" else 16, False, 256),)
    for n in args.sizes:
        rng = np.random.default_rng(0)
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        flop = 2.0 * n ** 3
        for rows, cols, packed_a, kc in configs:
            g = gemm_intrin(isa, rows=rows, cols=cols, packed_a=packed_a)
            mod = pl.build(schedule_matmul(pl.Schedule(matmul(n)), "C", g, kc=kc))
            c = mod(a, b)
            err = float(np.abs(c - a @ b).max() / np.abs(a @ b).max())
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(mod.benchmark(a, b, c))
                t0 = time.perf_counter()
                for _ in range(3):
                    a @ b
                theirs.append((time.perf_counter() - t0) / 3)
            tp, tn = statistics.median(ours), statistics.median(theirs)
            print(f"n={n} {g.name} kc={kc}: polyloop {flop / tp / 1e9:6.1f} GFLOP/s, "
                  f"NumPy {flop / tn / 1e9:6.1f} GFLOP/s, speed-up {tn / tp:4.2f}x "
                  f"(rel. error {err:.1e})", flush=True)


if __name__ == "__main__":
    main()
