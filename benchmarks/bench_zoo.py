# SPDX-License-Identifier: Apache-2.0
"""The model zoo at full size: every model through ``pl.graph.from_torch`` and through its
ONNX export, built with no fallback and checked against PyTorch eager.

    python benchmarks/bench_zoo.py                      # every model, both routes
    python benchmarks/bench_zoo.py resnet50 bert --route torch
    python benchmarks/bench_zoo.py --size ci            # the small models of the tests

Models: torchvision's ResNet-50, ResNeXt-50, MobileNetV2/V3, EfficientNet-B0, ConvNeXt-T,
ViT-B/16, Swin-T, DenseNet-121, SqueezeNet, ShuffleNetV2, RegNetY, GoogLeNet, Inception-v3,
AlexNet, VGG-11 (random weights, 224 x 224; Inception 299); Hugging Face BERT, DistilBERT,
RoBERTa, GPT-2, a Llama-style decoder, ViT, T5 encoder, Whisper encoder (random-init default
configurations, sequence 128). Each row: the stage reached (imported, built, matches), the
error relative to the output's scale, seconds to import and to build, and the error that
stopped it.

``--time`` adds, for every model that matches, milliseconds per call of polyloop, ONNX
Runtime (on the ONNX route's exported model; the torch route exports it for the timing) and
PyTorch eager, all on ``POLYLOOP_NUM_THREADS`` threads (default 2), timed in rounds that
alternate the engines (the median of each round's calls, the best round), and "vs ORT":
ONNX Runtime's time over polyloop's (> 1: polyloop is faster).

    python benchmarks/bench_zoo.py --route onnx --time resnet50 efficientnet_b0
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
# polyloop reads its settings once, at import: every engine runs on the same threads
THREADS = int(os.environ.setdefault("POLYLOOP_NUM_THREADS", "2"))
# PyTorch (imported below, before polyloop) starts the OpenMP runtime that polyloop's kernels
# share, and the runtime reads how its threads wait once, when it starts: without this its
# threads spin while they wait, polyloop's default is that they sleep (see
# polyloop.runtime.openmp). On a machine that other processes share, spinning made the
# polyloop kernels of Inception-v3 2.6 times slower in this process than with no PyTorch in it.
# PyTorch eager runs with sleeping threads too; ONNX Runtime keeps its own thread pool.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from graph.zoo.harness import Outcome, run  # noqa: E402
from graph.zoo.models import zoo  # noqa: E402

# (header, width, cell(outcome) -> str): one entry per column of the table.
COLUMNS = [
    ("model", 20, lambda o: o.model),
    ("route", 6, lambda o: o.route),
    ("stage", 9, lambda o: o.stage),
    ("rel.err", 9, lambda o: "-" if o.rel_error is None else f"{o.rel_error:.1e}"),
    ("import s", 9, lambda o: f"{o.seconds.get('imported', 0):.1f}"),
    ("build s", 8, lambda o: f"{o.seconds['built']:.1f}" if "built" in o.seconds else "-"),
    ("error", 0, lambda o: o.error),
]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


TIME_COLUMNS = [
    ("polyloop ms", 12, lambda o: _ms(o.seconds.get("call"))),
    ("ORT ms", 9, lambda o: _ms(o.seconds.get("ort"))),
    ("eager ms", 9, lambda o: _ms(o.seconds.get("eager"))),
    ("vs ORT", 7, lambda o: f"{o.seconds['ort'] / o.seconds['call']:.2f}x"
     if "ort" in o.seconds and "call" in o.seconds else "-"),
]


def _median_call(f, calls: int) -> float:
    f()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def time_engines(o: Outcome, inputs: list, rounds: int, calls: int) -> None:
    """Time polyloop, ONNX Runtime and PyTorch eager on ``inputs``, alternating them."""
    import onnxruntime as ort
    import torch
    arrays = [t.numpy() for t in inputs]
    model = o.onnx_model
    if model is None:                  # the torch route: export the module for ORT
        buf = io.BytesIO()
        torch.onnx.export(o.module, tuple(inputs), buf, dynamo=False, opset_version=17)
        model = buf.getvalue()
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feed = {i.name: a for i, a in zip(sess.get_inputs(), arrays)}
    torch.set_num_threads(THREADS)
    engines = {"call": lambda: o.executor(*arrays), "ort": lambda: sess.run(None, feed)}
    with torch.no_grad():
        engines["eager"] = lambda: o.module(*inputs)
        best: dict[str, float] = {}
        for _ in range(rounds):
            for name, f in engines.items():
                t = _median_call(f, calls)
                best[name] = min(best.get(name, t), t)
    o.seconds.update(best)


def row(o: Outcome) -> str:
    return "  ".join(f"{cell(o):<{w}}" if w else cell(o) for _, w, cell in COLUMNS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="model names (default: all)")
    ap.add_argument("--route", choices=("torch", "onnx", "both"), default="both")
    ap.add_argument("--size", choices=("full", "ci"), default="full")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--time", action="store_true",
                    help="time polyloop, ONNX Runtime and PyTorch eager")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args()
    if args.time:
        COLUMNS[-1:-1] = TIME_COLUMNS
    warnings.filterwarnings("ignore")
    models = zoo(args.size)
    names = args.models or list(models)
    unknown = [n for n in names if n not in models]
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {', '.join(models)}")
    routes = ("torch", "onnx") if args.route == "both" else (args.route,)
    print("  ".join(f"{h:<{w}}" if w else h for h, w, _ in COLUMNS), flush=True)
    outcomes = []
    for name in names:
        for route in routes:
            o = run(models[name], route, batches=(args.batch,))
            if args.time and o.ok:
                zm = models[name]
                inputs_of = zm.onnx_inputs if route == "onnx" and zm.onnx_inputs else zm.inputs
                time_engines(o, list(inputs_of(args.batch)), args.rounds, args.calls)
            outcomes.append(o)
            print(row(o), flush=True)
    good = sum(o.ok for o in outcomes)
    print(f"{good} of {len(outcomes)} model-routes import, build and match PyTorch")
    return 0 if good == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
