# SPDX-License-Identifier: Apache-2.0
"""ResNet-18's stem at batch 1 (3x224x224 -> conv 64 7x7 stride 2 pad 3 + bias + ReLU ->
max-pool 3x3 stride 2 pad 1 -> 64x56x56): the fused kernel next to the two it replaces, in
the same run.

    python benchmarks/bench_resnet_stem.py [--rounds 15] [--threads 2] [--cold]

- ``fused``: ``ops.conv2d_bias_relu_maxpool_overlap_nchw`` (what ``pl.graph.build`` runs now);
- ``before``: the conv2d recipe on packed weights, writing the 64x112x112 output, then the
  graph's bias + ReLU + max-pool kernel reading it back (what it ran before), called one after
  the other as the executor calls them;
- ``conv alone``: the conv2d recipe without the pooling (the floor the fusion aims at).

Each round times every variant once (the best of a few calls of each), alternating, so that
a noisy machine hits all alike; the medians and the best rounds are printed, with the speed
of ``fused`` relative to ``before`` (> 1: fused faster) and the convolution's GFLOP/s.
``--cold``: 64 MB are read before every timed call, so that each call starts with its
buffers out of the caches, as in a whole model whose weights pass through the caches between
two calls of the stem.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time


def timer(fn, calls: int = 5, flush=None):
    """The best of ``calls`` timed calls of ``fn`` (seconds), after one warm-up call;
    ``flush()`` runs before each timed call when given."""
    fn()
    best = float("inf")
    for _ in range(calls):
        if flush is not None:
            flush()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def variants():
    import numpy as np

    import polyloop as pl
    from polyloop import ops
    from polyloop.graph.lower import lower_kernel
    from polyloop.graph.schedule import default_schedule
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
    w = rng.standard_normal((64, 3, 7, 7), dtype=np.float32)
    b = rng.standard_normal(64, dtype=np.float32)
    packed = ops.pack_conv2d_weight(w, ops.conv2d_channel_block())
    X, P = pl.placeholder(x.shape, name="X"), pl.placeholder(packed.shape, name="P")
    B = pl.placeholder((64, 1, 1), name="B")
    fused = pl.build(ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(
        ops.conv2d_bias_relu_maxpool_overlap_nchw(X, P, B, pad=3, stride=2, out_channels=64)))
    conv = pl.build(ops.schedule_conv2d_nchw(ops.conv2d_nchw_packed(X, P, 64, 3, 2)))
    gb = pl.graph.GraphBuilder("pool")
    r = gb.input("raw", (1, 64, 112, 112))
    y = gb.emit(pl.graph.Op.MAX_POOL2D, gb.emit(pl.graph.Op.RELU, gb.emit(
        pl.graph.Op.ADD, r, gb.constant(b.reshape(64, 1, 1)))), kernel=(3, 3), stride=(2, 2),
        padding=(1, 1))
    # the graph's pooling kernel, compiled alone: its parameters are (raw, bias), then the result
    (kc,) = [k for k in pl.graph.optimize(gb.build(y)).bindings
             if isinstance(k, pl.graph.KernelCall)]
    pool = pl.build(default_schedule(lower_kernel(kc.kernel)))
    raw = np.empty((1, 64, 112, 112), np.float32)
    pooled = np.empty((1, 64, 56, 56), np.float32)
    b3 = b.reshape(64, 1, 1)
    fused(x, packed, b3, pooled)
    conv(x, packed, raw)
    np.testing.assert_allclose(pooled, pool(raw, b3), rtol=1e-4, atol=1e-4)

    def before():
        conv(x, packed, raw)
        pool(raw, b3, pooled)
    return {"fused": lambda: fused(x, packed, b3, pooled), "before": before,
            "conv alone": lambda: conv(x, packed, raw)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cold", action="store_true", help="read 64 MB before each call")
    args = parser.parse_args()
    os.environ["POLYLOOP_NUM_THREADS"] = str(args.threads)
    cases = variants()
    flush = None
    if args.cold:
        import numpy as np
        junk = np.ones(16 << 20, np.float32)
        flush = junk.sum
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for k, fn in cases.items():
            times[k].append(timer(fn, flush=flush))
    flops = 2 * 64 * 112 * 112 * 3 * 7 * 7
    for k, t in times.items():
        med, best = statistics.median(t), min(t)
        print(f"{k:12s} median {1e3 * med:7.3f} ms  best {1e3 * best:7.3f} ms  "
              f"conv {flops / best / 1e9:5.0f} GFLOP/s (best)")
    ratio = statistics.median(times["before"]) / statistics.median(times["fused"])
    best = min(times["before"]) / min(times["fused"])
    print(f"fused vs before: {ratio:.2f}x (medians), {best:.2f}x (best rounds); "
          f"{args.threads} threads{', cold caches' if args.cold else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
