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
ONNX Runtime's time over polyloop's (> 1: polyloop is faster). ``--openvino`` adds OpenVINO
(``pip install openvino``; float32 precision hint, latency mode, the same threads) on the same
ONNX model, ``--compile`` adds ``torch.compile`` (its first call's seconds next to polyloop's
build, then its time per call), and ``--cold`` builds every model with an empty compilation
cache, so that "build s" is a cold build. The last lines give the geometric means.

    python benchmarks/bench_zoo.py --route onnx --time resnet50 efficientnet_b0
    python benchmarks/bench_zoo.py --route onnx --time --openvino --compile --cold --batch 8
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import math
import os
import statistics
import sys
import tempfile
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


def _ratio(o: Outcome, engine: str) -> float | None:
    """The engine's time over polyloop's (> 1: polyloop is faster)."""
    if engine in o.seconds and "call" in o.seconds:
        return o.seconds[engine] / o.seconds["call"]
    return None


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


TIME_COLUMNS = [
    ("polyloop ms", 12, lambda o: _ms(o.seconds.get("call"))),
    ("ORT ms", 9, lambda o: _ms(o.seconds.get("ort"))),
    ("eager ms", 9, lambda o: _ms(o.seconds.get("eager"))),
    ("vs ORT", 7, lambda o: _x(_ratio(o, "ort"))),
]
OPENVINO_COLUMNS = [
    ("OV ms", 9, lambda o: _ms(o.seconds.get("openvino"))),
    ("vs OV", 7, lambda o: _x(_ratio(o, "openvino"))),
]
COMPILE_COLUMNS = [
    ("compile s", 10, lambda o: f"{o.seconds['compile_first']:.1f}"
     if "compile_first" in o.seconds else "-"),
    ("compiled ms", 12, lambda o: _ms(o.seconds.get("compiled"))),
]


def _median_call(f, calls: int) -> float:
    f()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def openvino_engine(model: bytes, arrays: list):
    """OpenVINO's compiled ``model`` (float32 precision, latency mode, THREADS threads) as a
    call on ``arrays``."""
    import openvino as ov
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(model)
        compiled = ov.Core().compile_model(str(path), "CPU", {
            "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": THREADS})
    request = compiled.create_infer_request()
    feed = dict(enumerate(arrays))
    return lambda: request.infer(feed)


def time_engines(o: Outcome, inputs: list, args: argparse.Namespace) -> None:
    """Time polyloop, ONNX Runtime, PyTorch eager (and OpenVINO, torch.compile when asked) on
    ``inputs``, alternating them."""
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
    if args.openvino:
        engines["openvino"] = openvino_engine(model, arrays)
    rounds, calls = args.rounds, args.calls
    with torch.no_grad():
        engines["eager"] = lambda: o.module(*inputs)
        if args.compile:
            compiled = torch.compile(o.module)
            start = time.perf_counter()
            compiled(*inputs)
            o.seconds["compile_first"] = time.perf_counter() - start
            engines["compiled"] = lambda: compiled(*inputs)
        best: dict[str, float] = {}
        for _ in range(rounds):
            for name, f in engines.items():
                t = _median_call(f, calls)
                best[name] = min(best.get(name, t), t)
    o.seconds.update(best)


def row(o: Outcome) -> str:
    return "  ".join(f"{cell(o):<{w}}" if w else cell(o) for _, w, cell in COLUMNS)


def summary(outcomes: list[Outcome]) -> list[str]:
    """The geometric mean and the worst model of each reference's ratio."""
    lines = []
    for engine, label in (("ort", "ONNX Runtime"), ("openvino", "OpenVINO"),
                          ("compiled", "torch.compile"), ("eager", "PyTorch eager")):
        ratios = [(r, o.model) for o in outcomes if (r := _ratio(o, engine)) is not None]
        if ratios:
            mean = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
            worst, name = min(ratios)
            lines.append(f"polyloop vs {label}: geomean {mean:.2f}x over {len(ratios)}, "
                         f"worst {worst:.2f}x ({name})")
    slower = [o.model for o in outcomes
              if "built" in o.seconds and "compile_first" in o.seconds
              and o.seconds["built"] > o.seconds["compile_first"]]
    if any("compile_first" in o.seconds for o in outcomes):
        lines.append("build slower than torch.compile's first call: "
                     + (", ".join(slower) if slower else "none"))
    return lines


def empty_cache() -> tempfile.TemporaryDirectory:
    """Point polyloop's compilation cache, and torch.compile's, at a new empty folder (the
    caller removes it)."""
    from polyloop import config
    folder = tempfile.TemporaryDirectory(prefix="polyloop-cold-")
    config.CONFIG = dataclasses.replace(config.CONFIG, cache_dir=Path(folder.name) / "polyloop")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(folder.name) / "inductor")
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="model names (default: all)")
    ap.add_argument("--route", choices=("torch", "onnx", "both"), default="both")
    ap.add_argument("--size", choices=("full", "ci"), default="full")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--time", action="store_true",
                    help="time polyloop, ONNX Runtime and PyTorch eager")
    ap.add_argument("--openvino", action="store_true",
                    help="with --time: time OpenVINO (float32) on the same ONNX model")
    ap.add_argument("--compile", action="store_true",
                    help="with --time: time torch.compile and its first call")
    ap.add_argument("--cold", action="store_true",
                    help="build every model with an empty compilation cache")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args()
    if (args.openvino or args.compile) and not args.time:
        ap.error("--openvino and --compile time engines: add --time")
    if args.time:
        COLUMNS[-1:-1] = TIME_COLUMNS + (OPENVINO_COLUMNS if args.openvino else []) \
            + (COMPILE_COLUMNS if args.compile else [])
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
            cache = empty_cache() if args.cold else None
            o = run(models[name], route, batches=(args.batch,))
            if args.time and o.ok:
                zm = models[name]
                inputs_of = zm.onnx_inputs if route == "onnx" and zm.onnx_inputs else zm.inputs
                time_engines(o, list(inputs_of(args.batch)), args)
            if cache is not None:
                cache.cleanup()
            outcomes.append(o)
            print(row(o), flush=True)
    print("\n".join(summary(outcomes)))
    good = sum(o.ok for o in outcomes)
    print(f"{good} of {len(outcomes)} model-routes import, build and match PyTorch")
    return 0 if good == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
