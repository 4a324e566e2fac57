# SPDX-License-Identifier: Apache-2.0
"""Hand schedules written with polyloop's primitives against NumPy, in one run.

    python benchmarks/bench_schedules.py [--repeat 7]

Prints time, GFLOP/s and the ratio NumPy time / polyloop time (> 1: polyloop is faster).
"""
from __future__ import annotations

import argparse

import numpy as np

import polyloop as pl
from polyloop.bench.peers import time_call


def matmul_schedule(n: int, ti: int = 6, tj: int = 64) -> pl.Schedule:
    """Matmul with a register tile: B packed into tj-wide column panels (transform_layout), a
    ti x tj tile of C accumulated in a loop-local buffer (cache_write "local", which storage
    compaction sizes to the tile so gcc keeps it in registers), ti rows and tj/16 vectors
    unrolled, 16 lanes vectorized, panels in parallel."""
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    sch.transform_layout("C", "B", lambda kk, j: (j // tj, kk, j % tj))
    tile = sch.cache_write("C", "local")
    i, j, kk = sch.get_loops("C")
    i0, i1 = sch.split(i, [None, ti])
    j0, j1, j2 = sch.split(j, [None, tj // 16, 16])
    sch.reorder(j0, i0, kk, i1, j1, j2)
    sch.parallel(j0)
    sch.unroll(i1)
    sch.unroll(j1)
    sch.vectorize(j2)
    sch.decompose_reduction("C", kk)
    sch.reverse_compute_at(tile, i0)
    return sch


def batched_matmul_relu_schedule(b: int = 16, n: int = 128, ti: int = 8, tj: int = 32
                                  ) -> pl.Schedule:
    """Seed 001's batched matmul + ReLU with a register tile: Y accumulated per ti x tj tile in
    a loop-local buffer (cache_write "local"), ReLU inlined into the write-back, batches in
    parallel."""
    A = pl.placeholder((b, n, n), "float32", name="A")
    B = pl.placeholder((b, n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    Y = pl.compute((b, n, n), lambda m, i, j: pl.sum(A[m, i, k] * B[m, k, j], axis=k), name="Y")
    C = pl.compute((b, n, n), lambda m, i, j: pl.maximum(Y[m, i, j], 0.0), name="C")
    sch = pl.Schedule(C)
    tile = sch.cache_write("Y", "local")
    y = sch.get_block("Y")
    m, i, j, kk = sch.get_loops(y)
    i0, i1 = sch.split(i, [None, ti])
    j0, j1, j2 = sch.split(j, [None, tj // 16, 16])
    sch.reorder(m, i0, j0, kk, i1, j1, j2)
    sch.parallel(m)
    sch.unroll(i1)
    sch.unroll(j1)
    sch.vectorize(j2)
    sch.decompose_reduction(y, kk)
    sch.reverse_compute_inline(sch.get_block("C"))
    sch.reverse_compute_at(tile, j0)
    return sch


def report(name: str, flops: float, t_pl: float, t_np: float) -> None:
    print(f"{name:34s} polyloop {t_pl * 1e3:8.2f} ms {flops / t_pl / 1e9:7.1f} GF/s | "
          f"numpy {t_np * 1e3:8.2f} ms {flops / t_np / 1e9:7.1f} GF/s | ratio {t_np / t_pl:5.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = 1024
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    mod = pl.build(matmul_schedule(n))
    mod(a, b, c)
    assert np.allclose(c, a @ b, rtol=1e-4, atol=1e-3), "matmul result differs from NumPy"
    t_pl = time_call(lambda: mod(a, b, c), repeat=args.repeat)
    t_np = time_call(lambda: np.matmul(a, b, out=c), repeat=args.repeat)
    report("matmul 1024^3 (hand schedule)", 2 * n ** 3, t_pl, t_np)

    bb, m = 16, 128
    x = rng.random((bb, m, m), dtype=np.float32)
    y = rng.random((bb, m, m), dtype=np.float32)
    out = np.empty((bb, m, m), np.float32)
    mod2 = pl.build(batched_matmul_relu_schedule(bb, m))
    mod2(x, y, out)
    assert np.allclose(out, np.maximum(x @ y, 0), rtol=1e-4, atol=1e-3), "bmm+relu differs"
    t_pl = time_call(lambda: mod2(x, y, out), repeat=args.repeat * 5)
    t_np = time_call(lambda: np.maximum(x @ y, 0), repeat=args.repeat * 5)
    report("batched matmul+ReLU 16x128^3", 2 * bb * m ** 3, t_pl, t_np)


if __name__ == "__main__":
    main()
