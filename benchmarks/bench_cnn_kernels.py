# SPDX-License-Identifier: Apache-2.0
"""The seed CNN's kernels, the new recipes next to the ones they replace, in the same run.

    python benchmarks/bench_cnn_kernels.py [--repeat 20] [--rounds 3]

- conv 1->32 3x3 + bias + ReLU + max-pool 2 on Nx1x28x28: ``ops.conv2d_bias_relu_maxpool_nchw``
  (one kernel) against the conv2d recipe on packed weights followed by the graph's bias + ReLU +
  max-pool kernel (two kernels, the 32x26x26 output written and read back);
- the dense layer 5408 -> 100 + ReLU on 1 and 4 rows: ``ops.dense_split_k`` (the reduction
  split between the threads) against ``graph.schedule.dense_schedule`` (column panels);
- the dense layer 100 -> 10 on 64 rows: ``dense_split_k`` with one slice (rows widened to a
  whole vector) against ``dense_schedule``;
- the dense layer 5408 -> 100 + ReLU on 1 and 4 rows, ``dense_split_k`` on one panel of weights
  padded with zero columns to whole vectors (``columns=100``) against the weights as stored
  (the last vector of each row a masked load);
- conv + bias + ReLU + max-pool + flatten + dense 5408 -> 100 + ReLU on 16, 32 and 64 images:
  ``ops.conv_pool_dense_nchw`` (one kernel, the batch along the vectors) against the fused
  conv + pool recipe followed by ``dense_schedule`` (two kernels).

Median milliseconds per call (``Module.benchmark``); rounds alternate the two so that a noisy
machine hits both alike. Speed > 1: the new recipe is faster. Threads: POLYLOOP_NUM_THREADS.
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np

import polyloop as pl
from polyloop import ops
from polyloop.graph.schedule import dense_schedule
from polyloop.ops.conv_pool_dense import dense_rows
from polyloop.ops.knobs import default_lanes


def conv_pool_pair(batch: int, rng):
    x = rng.standard_normal((batch, 1, 28, 28), dtype=np.float32)
    w = rng.standard_normal((32, 1, 3, 3), dtype=np.float32)
    b = rng.standard_normal(32, dtype=np.float32)
    X, W, B = (pl.placeholder(a.shape, name=n) for a, n in ((x, "X"), (w, "W"), (b, "B")))
    fused = pl.build(ops.schedule_conv2d_bias_relu_maxpool_nchw(
        ops.conv2d_bias_relu_maxpool_nchw(X, W, B)))
    out = np.empty((batch, 32, 13, 13), np.float32)
    packed = ops.pack_conv2d_weight(w, ops.conv2d_channel_block())
    P = pl.placeholder(packed.shape, name="P")
    conv = pl.build(ops.schedule_conv2d_nchw(ops.conv2d_nchw_packed(X, P, 32, 0, 1)))
    raw = np.empty((batch, 32, 26, 26), np.float32)
    gb = pl.graph.GraphBuilder("pool")
    r = gb.input("raw", raw.shape)
    y = gb.emit(pl.graph.Op.MAX_POOL2D, gb.emit(pl.graph.Op.RELU, gb.emit(
        pl.graph.Op.ADD, r, gb.constant(b.reshape(32, 1, 1)))), kernel=(2, 2), stride=(2, 2),
        padding=(0, 0))
    pool = pl.graph.build(gb.build(y))
    return (lambda: fused.benchmark(x, w, b, out),
            lambda: conv.benchmark(x, packed, raw) + pool.benchmark(raw))


def dense_pair(rows: int, depth: int, cols: int, splits: int, rng):
    x = rng.standard_normal((rows, depth), dtype=np.float32)
    w = rng.standard_normal((depth, cols), dtype=np.float32)
    b = rng.standard_normal(cols, dtype=np.float32)
    X, W, B = (pl.placeholder(a.shape, name=n) for a, n in ((x, "x"), (w, "w"), (b, "b")))
    new = pl.build(ops.schedule_dense_split_k(ops.dense_split_k(X, W, B, splits=splits,
                                                                relu=True)))
    k = pl.reduce_axis((0, depth), name="k")
    t = pl.compute((rows, cols), lambda i, j: pl.sum(X[i, k] * W[k, j], axis=k), name="t")
    e = pl.compute((rows, cols), lambda i, j: pl.maximum(t[i, j] + B[j], 0.0), name="e")
    sch = pl.Schedule(e)
    dense_schedule(sch, t, e)
    old = pl.build(sch)
    out = np.empty((rows, cols), np.float32)
    return lambda: new.benchmark(x, w, b, out), lambda: old.benchmark(x, w, b, out)


def padded_pair(rows: int, rng):
    x = rng.standard_normal((rows, 5408), dtype=np.float32)
    w = rng.standard_normal((5408, 100), dtype=np.float32)
    b = rng.standard_normal(100, dtype=np.float32)
    wide = -(-100 // default_lanes()) * default_lanes()
    packed = ops.pack_matmul_weight(w, wide)
    X, W, B = (pl.placeholder(a.shape, name=n) for a, n in ((x, "x"), (w, "w"), (b, "b")))
    P = pl.placeholder(packed.shape, name="p")
    new = pl.build(ops.schedule_dense_split_k(ops.dense_split_k(X, P, B, relu=True,
                                                                columns=100)))
    old = pl.build(ops.schedule_dense_split_k(ops.dense_split_k(X, W, B, relu=True)))
    out = np.empty((rows, 100), np.float32)
    return (lambda: new.benchmark(x=x, p=packed, b=b, dense=out),
            lambda: old.benchmark(x=x, w=w, b=b, dense=out))


def head_pair(batch: int, rng):
    x = rng.standard_normal((batch, 1, 28, 28), dtype=np.float32)
    w = rng.standard_normal((32, 1, 3, 3), dtype=np.float32)
    b = rng.standard_normal(32, dtype=np.float32)
    wd = rng.standard_normal((5408, 100), dtype=np.float32) / 74
    bd = rng.standard_normal(100, dtype=np.float32)
    packed = ops.pack_matmul_weight(wd, dense_rows(batch))
    X, W, B = (pl.placeholder(a.shape, name=n) for a, n in ((x, "X"), (w, "W"), (b, "B")))
    P, BD = pl.placeholder(packed.shape, name="P"), pl.placeholder(bd.shape, name="BD")
    new = pl.build(ops.schedule_conv_pool_dense_nchw(ops.conv_pool_dense_nchw(
        X, W, B, P, BD, columns=100)))
    out = np.empty((batch, 100), np.float32)
    pool = pl.build(ops.schedule_conv2d_bias_relu_maxpool_nchw(
        ops.conv2d_bias_relu_maxpool_nchw(X, W, B)))
    pooled = np.empty((batch, 32, 13, 13), np.float32)
    flat = pl.placeholder((batch, 5408), name="flat")
    WD = pl.placeholder(wd.shape, name="WD")
    k = pl.reduce_axis((0, 5408), name="k")
    t = pl.compute((batch, 100), lambda i, j: pl.sum(flat[i, k] * WD[k, j], axis=k), name="t")
    e = pl.compute((batch, 100), lambda i, j: pl.maximum(t[i, j] + BD[j], 0.0), name="e")
    sch = pl.Schedule(e)
    dense_schedule(sch, t, e)
    dense = pl.build(sch)
    return (lambda: new.benchmark(x, w, b, packed, bd, out),
            lambda: pool.benchmark(x, w, b, pooled)
            + dense.benchmark(flat=pooled.reshape(batch, -1), WD=wd, BD=bd, e=out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="run the cases whose label has this text")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = [(f"conv+relu+pool, batch {n}", *conv_pool_pair(n, rng)) for n in (1, 4, 64)]
    cases += [(f"dense 5408->100, {m} rows", *dense_pair(m, 5408, 100, 2, rng)) for m in (1, 4)]
    cases.append(("dense 100->10, 64 rows", *dense_pair(64, 100, 10, 1, rng)))
    cases += [(f"dense 5408->100 padded, {m} rows", *padded_pair(m, rng)) for m in (1, 4)]
    cases += [(f"conv+pool+dense, batch {n}", *head_pair(n, rng)) for n in (16, 32, 64)]
    for label, new, old in cases:
        if args.only not in label:
            continue
        a, b = [], []
        for _ in range(args.rounds):
            a.append(new())
            b.append(old())
        ms_new, ms_old = 1e3 * statistics.median(a), 1e3 * statistics.median(b)
        print(f"{label:28s} new {ms_new:8.4f} ms  before {ms_old:8.4f} ms  "
              f"speed {ms_old / ms_new:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
