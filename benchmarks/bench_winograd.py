# SPDX-License-Identifier: Apache-2.0
"""Winograd F(2x2, 3x3) next to the direct conv2d recipe, in one run: ResNet-18's 3x3
stride-1 convolutions one by one, then the whole model built with and without Winograd.

    python benchmarks/bench_winograd.py                 # the convolutions and the model
    python benchmarks/bench_winograd.py convs --rounds 7
    python benchmarks/bench_winograd.py model --repeat 50

``convs``: for each shape (batch 1, C = K, pad 1), the median milliseconds of the Winograd
recipe (``ops.conv2d_winograd``) and of the direct one on packed weights
(``ops.conv2d_nchw_packed``), with hot weights (the same weights every call) and cold ones
(``--weights`` different weight sets in turn, more than the last-level cache holds for the
deep layers, as in a model), ``speed`` = direct / Winograd (> 1: Winograd faster); and the
error of each against ``torch.nn.functional.conv2d`` in float64 (max abs, and max abs
divided by the largest output). Rounds interleave the two recipes; the best median is kept.

``model``: ResNet-18 (benchmarks/bench_graph.py's, random weights), batch 1, 224x224, built
with ``pl.graph.build(g)`` and ``pl.graph.build(g, winograd=False)``, next to ONNX Runtime in
the same run, in blocks of ``--repeat`` calls per engine interleaved over ``--rounds``: the
best median, the fastest call and the best median CPU time of a call (with ``--threads 1`` a
figure that load from other processes hardly moves); the error of each against PyTorch.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

# ResNet-18's 3x3 stride-1 convolutions at batch 1: (channels, image size)
SHAPES = [(64, 56), (128, 28), (256, 14), (512, 7)]


def _median_ms(call, args_list, repeat: int) -> float:
    times = []
    for i in range(repeat):
        start = time.perf_counter()
        call(*args_list[i % len(args_list)])
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _errors(y, ref) -> str:
    err = float(abs(y - ref).max())
    return f"{err:.1e} ({err / float(abs(ref).max()):.1e})"


def bench_convs(args) -> None:
    import numpy as np
    import torch

    import polyloop as pl
    from polyloop import ops
    rng = np.random.default_rng(0)
    block = ops.conv2d_channel_block()
    print(f"{'shape':14s} {'wino hot':>9s} {'direct':>9s} {'speed':>6s}   {'wino cold':>9s} "
          f"{'direct':>9s} {'speed':>6s}   error vs float64: wino, direct (relative)")
    for c, h in SHAPES:
        x = rng.standard_normal((1, c, h, h), dtype=np.float32)
        ws = [(rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
              for _ in range(args.weights)]
        X = pl.placeholder(x.shape, name="X")
        us = [ops.winograd_weight(w, block) for w in ws]
        ps = [ops.pack_conv2d_weight(w, block) for w in ws]
        U, P = pl.placeholder(us[0].shape, name="U"), pl.placeholder(ps[0].shape, name="P")
        wino = pl.build(ops.schedule_conv2d_winograd(ops.conv2d_winograd(X, U, c)))
        direct = pl.build(ops.schedule_conv2d_nchw(ops.conv2d_nchw_packed(X, P, c)))
        with torch.no_grad():
            ref = torch.nn.functional.conv2d(torch.from_numpy(x).double(),
                                             torch.from_numpy(ws[0]).double(),
                                             padding=1).numpy()
        yw, yd = wino(x, us[0]), direct(x, ps[0])
        errors = f"{_errors(yw, ref)}, {_errors(yd, ref)}"
        best = {key: float("inf") for key in ("wh", "dh", "wc", "dc")}
        for _ in range(args.rounds):
            for key, mod, weights, y in (("w", wino, us, yw), ("d", direct, ps, yd)):
                best[key + "h"] = min(best[key + "h"],
                                      _median_ms(mod, [(x, weights[0], y)], args.repeat))
                best[key + "c"] = min(best[key + "c"],
                                      _median_ms(mod, [(x, u, y) for u in weights], args.repeat))
        print(f"{c:3d}x{h}x{h:<7d} {best['wh']:9.3f} {best['dh']:9.3f} "
              f"{best['dh'] / best['wh']:6.2f}   {best['wc']:9.3f} {best['dc']:9.3f} "
              f"{best['dc'] / best['wc']:6.2f}   {errors}",
              flush=True)


def bench_model(args) -> None:
    import numpy as np
    import torch

    import polyloop as pl
    from bench_graph import onnx_session, resnet18
    torch.manual_seed(0)
    model = resnet18().eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        ref = model(x).numpy()
    g = pl.graph.from_torch(model, (x,))
    xn = x.numpy()
    engines = {"winograd": pl.graph.build(g), "direct": pl.graph.build(g, winograd=False)}
    for name, ex in engines.items():
        print(f"{name:9s} max|err| vs PyTorch {float(abs(ex(xn) - ref).max()):.1e}")
    try:
        sess = onnx_session(model, x, args.threads)
        engines["ONNX Runtime"] = lambda a: sess.run(None, {"x": a})
    except Exception as e:      # not installed, or the exporter refuses the model
        print(f"ONNX Runtime: not measured ({type(e).__name__}: {str(e)[:120]})")
    # blocks of calls per engine, the blocks interleaved: calls interleaved one by one would
    # let one engine's thread pool, still spinning after its call, take the cores from the
    # next engine's
    med: dict[str, float] = {name: float("inf") for name in engines}
    low: dict[str, float] = dict(med)
    cpu: dict[str, float] = dict(med)
    for _ in range(args.rounds):
        for name, fn in engines.items():
            for _ in range(3):
                fn(xn)
            wall, used = [], []
            for _ in range(args.repeat):
                start, start_cpu = time.perf_counter(), time.process_time()
                fn(xn)
                wall.append(time.perf_counter() - start)
                used.append(time.process_time() - start_cpu)
            med[name] = min(med[name], 1e3 * statistics.median(wall))
            low[name] = min(low[name], 1e3 * min(wall))
            cpu[name] = min(cpu[name], 1e3 * statistics.median(used))
    ort, ort_low = med.get("ONNX Runtime", float("nan")), low.get("ONNX Runtime", float("nan"))
    for name, ms in med.items():
        print(f"ResNet-18 batch 1  {name:13s} median {ms:8.3f} ms (ONNX Runtime / this "
              f"{ort / ms:5.2f}x)   fastest {low[name]:8.3f} ms ({ort_low / low[name]:5.2f}x)"
              f"   CPU time {cpu[name]:8.3f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", default=["convs", "model"], help="convs, model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--weights", type=int, default=8,
                        help="weight sets called in turn for the cold-weight figures")
    args = parser.parse_args()
    os.environ["POLYLOOP_NUM_THREADS"] = str(args.threads)
    import torch
    torch.set_num_threads(args.threads)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if "convs" in args.parts:
        bench_convs(args)
    if "model" in args.parts:
        bench_model(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
