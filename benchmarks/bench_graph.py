# SPDX-License-Identifier: Apache-2.0
"""Whole models on the CPU: polyloop's graph executor next to PyTorch eager, torch.compile and
ONNX Runtime, in the same run, with random weights.

    python benchmarks/bench_graph.py                    # all models
    python benchmarks/bench_graph.py cnn --no-compile   # the seed CNN only, without torch.compile
    python benchmarks/bench_graph.py --tvm              # TVM Relax (untuned) as well

Models: the seed CNN (1x28x28 -> conv 32 3x3 -> ReLU -> max-pool 2 -> linear 100 -> ReLU ->
linear 10 -> softmax) at batch 1, 4 and 64; ResNet-18 (defined here) at batch 1, 224x224; a
BERT-base-like encoder layer (seq 128, hidden 768, 12 heads, GELU MLP 3072) at batch 1.
Each row prints the median milliseconds of each engine and polyloop's speed relative to ONNX
Runtime (> 1: polyloop faster). Build times: the import (torch.export), polyloop's cold build
(empty cache) and cached rebuild (median of five), torch.compile's first call. Threads: ``--threads`` for every engine
(POLYLOOP_NUM_THREADS and TVM_NUM_THREADS are set before polyloop and TVM are imported).
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time


def resnet18():
    import torch
    from torch import nn

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def encoder_layer(hidden: int = 768, heads: int = 12, mlp: int = 3072):
    """A BERT-base-like encoder layer (post-norm, GELU), written with F.scaled_dot_product_
    attention so that the legacy ONNX exporter takes it too."""
    import torch
    from torch import nn
    F = nn.functional

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.out = nn.Linear(hidden, hidden)
            self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.fc1, self.fc2 = nn.Linear(hidden, mlp), nn.Linear(mlp, hidden)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, s, 3, heads, hidden // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, hidden)
            x = self.norm1(x + self.out(a))
            return self.norm2(x + self.fc2(F.gelu(self.fc1(x))))
    return Encoder()


def models(names: list[str]):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "graph"))
    from models import SeedCNN
    torch.manual_seed(0)
    if "cnn" in names:
        cnn = SeedCNN().eval()
        for batch in (1, 4, 64):
            yield f"seed CNN, batch {batch}", cnn, torch.randn(batch, 1, 28, 28)
    if "resnet18" in names:
        yield "ResNet-18, batch 1", resnet18().eval(), torch.randn(1, 3, 224, 224)
    if "bert" in names:
        layer = encoder_layer().eval()
        yield "BERT-base encoder layer, seq 128", layer, torch.randn(1, 128, 768)


def median_ms(fn, repeat: int, budget_s: float = 30.0) -> float:
    """The median of ``repeat`` calls after warm-up; fewer (at least three) for an engine so
    slow that ``repeat`` calls would take more than ``budget_s``."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    for _ in range(2 if first < 0.1 else 0):
        fn()
    times = []
    for _ in range(max(3, min(repeat, int(budget_s / max(first, 1e-9))))):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def onnx_session(model, x, threads: int):
    import onnxruntime as ort
    import torch
    f = io.BytesIO()
    torch.onnx.export(model, (x,), f, dynamo=False, input_names=["x"])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(f.getvalue(), opts, providers=["CPUExecutionProvider"])


def run_model(label: str, model, x, args) -> None:
    import numpy as np
    import polyloop as pl
    import torch
    from polyloop import config
    with torch.no_grad():
        ref = model(x).numpy()
    with tempfile.TemporaryDirectory() as cache:
        import dataclasses
        saved = config.CONFIG
        config.CONFIG = dataclasses.replace(saved, cache_dir=__import__("pathlib").Path(cache))
        try:
            start = time.perf_counter()
            g = pl.graph.from_torch(model, (x,))
            imported = time.perf_counter() - start
            start = time.perf_counter()
            ex = pl.graph.build(g, winograd=not args.no_winograd)
            cold = time.perf_counter() - start
            rebuilds = []
            for _ in range(5):     # the cached rebuild: the median of five
                start = time.perf_counter()
                ex = pl.graph.build(g, winograd=not args.no_winograd)
                rebuilds.append(time.perf_counter() - start)
            cached = statistics.median(rebuilds)
            xn = x.numpy()
            err = float(np.abs(ex(xn) - ref).max())
            row = {"polyloop": 1e3 * ex.benchmark(xn, repeat=args.repeat)}
        finally:
            config.CONFIG = saved
    with torch.no_grad():
        row["torch eager"] = median_ms(lambda: model(x), args.repeat)
        compile_s = None
        if not args.no_compile:
            compiled = torch.compile(model)
            start = time.perf_counter()
            compiled(x)
            compile_s = time.perf_counter() - start
            row["torch.compile"] = median_ms(lambda: compiled(x), args.repeat)
    try:
        sess = onnx_session(model, x, args.threads)
        row["ONNX Runtime"] = median_ms(lambda: sess.run(None, {"x": xn}), args.repeat)
    except Exception as e:   # not installed, or the exporter refuses the model
        print(f"ONNX Runtime: not measured ({type(e).__name__}: {str(e)[:120]})")
        row["ONNX Runtime"] = float("nan")
    tvm_s = None
    if args.tvm:
        from relax_ref import relax_runner
        run, out, tvm_s = relax_runner(model, x, args.threads)
        tvm_err = float(np.abs(out - ref).max())
        row["TVM Relax (untuned)"] = median_ms(run, args.repeat)
    cells = "  ".join(f"{k} {v:8.3f} ms" for k, v in row.items())
    ratio = row["ONNX Runtime"] / row["polyloop"]
    print(f"{label:34s} {cells}  polyloop/ORT speed {ratio:5.2f}x  max|err| {err:.1e}")
    extra = f", torch.compile first call {compile_s:.1f} s" if compile_s is not None else ""
    if tvm_s is not None:
        extra += f", TVM Relax build {tvm_s:.1f} s (max|err| {tvm_err:.1e})"
    print(f"{'':34s} polyloop: import {imported:.1f} s, build cold {cold:.1f} s, "
          f"cached {cached:.2f} s{extra}")
    if args.profile:
        ex.profile(xn)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=["cnn", "resnet18", "bert"],
                        help="cnn, resnet18, bert (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--profile", action="store_true", help="polyloop's time per kernel")
    parser.add_argument("--tvm", action="store_true",
                        help="TVM Relax too (the bench extra; untuned: slow on big models)")
    parser.add_argument("--no-winograd", action="store_true",
                        help="build with pl.graph.build(..., winograd=False)")
    args = parser.parse_args()
    os.environ["POLYLOOP_NUM_THREADS"] = str(args.threads)
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    import warnings

    import torch
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    torch.set_num_threads(args.threads)
    for label, model, x in models(args.models):
        run_model(label, model, x, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
