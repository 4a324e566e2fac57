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
stopped it. Timing columns against other engines are added through ``COLUMNS``.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

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


def row(o: Outcome) -> str:
    return "  ".join(f"{cell(o):<{w}}" if w else cell(o) for _, w, cell in COLUMNS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="model names (default: all)")
    ap.add_argument("--route", choices=("torch", "onnx", "both"), default="both")
    ap.add_argument("--size", choices=("full", "ci"), default="full")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
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
            outcomes.append(o)
            print(row(o), flush=True)
    good = sum(o.ok for o in outcomes)
    print(f"{good} of {len(outcomes)} model-routes import, build and match PyTorch")
    return 0 if good == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
