# SPDX-License-Identifier: Apache-2.0
"""Whole models in bfloat16: ``pl.graph.build(g, dtype="bfloat16")`` next to polyloop's float32
build, ONNX Runtime (float32), PyTorch under ``torch.autocast("cpu", torch.bfloat16)`` and
OpenVINO's default (bf16 inference where the CPU has AVX-512 BF16 or AMX), in one run.

    python benchmarks/bench_bf16_models.py --threads 2 resnet50 distilbert

Models: torchvision's ResNet-50 (batch 1, 224 x 224) and Hugging Face DistilBERT (batch 1,
sequence 128), random weights (seed 0), exported to ONNX with ``torch.onnx.export`` into a
temporary directory; polyloop, ONNX Runtime and OpenVINO read that file, PyTorch runs the
module itself. Every engine runs on ``--threads`` threads. Each figure is the median of
``--calls`` calls; the rounds alternate the engines and the best round is kept, so a burst of
load from another process does not land on one engine only. ``vs bf16`` is the engine's time
over polyloop's bfloat16 build (> 1: polyloop is faster). ``err`` is the largest absolute
difference from ONNX Runtime's float32 output over the largest absolute value of that output.
OpenVINO (``pip install openvino``) is skipped when it is not installed.

``--layers`` also prints each polyloop kernel's time (the best of the medians of several
``Executor.profile`` runs: the least disturbed by other processes), the float32 and bf16
builds side by side in model order, each bf16 kernel with its product's recipe and shapes.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def resnet50():
    import torch
    from graph.zoo.torchvision_ops import import_torchvision
    make = import_torchvision().models.resnet50
    torch.manual_seed(0)
    return make(weights=None).eval(), torch.randn(1, 3, 224, 224)


def distilbert():
    import torch
    from graph.zoo.torchvision_ops import import_torchvision
    import_torchvision()             # transformers imports torchvision when it is installed
    from transformers import DistilBertConfig, DistilBertModel

    class Hidden(torch.nn.Module):      # the last hidden state alone: one output
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids).last_hidden_state
    torch.manual_seed(0)
    config = DistilBertConfig()
    config._attn_implementation = "eager"     # attention as matrix products in the export
    return Hidden(DistilBertModel(config)).eval(), torch.randint(0, 30000, (1, 128))


MODELS = {"resnet50": resnet50, "distilbert": distilbert}
LABELS = {"float32": "polyloop f32", "bfloat16": "polyloop bf16"}


def export(model, x, path: Path) -> None:
    import torch
    with torch.no_grad():
        torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])


def engines(name: str, threads: int, workdir: Path, builds: dict
            ) -> tuple[dict, np.ndarray, np.ndarray]:
    """Each engine's callable on the model's input, the input, and the float32 reference;
    polyloop's executors go into ``builds`` by dtype."""
    import onnxruntime as ort
    import torch
    import polyloop as pl
    model, x = MODELS[name]()
    path = workdir / f"{name}.onnx"
    export(model, x, path)
    xn = x.numpy()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    runs = {"onnxruntime f32": lambda: sess.run(None, {"x": xn})[0]}
    g = pl.graph.from_onnx(str(path))
    for dtype in ("float32", "bfloat16"):
        t0 = time.perf_counter()
        ex = pl.graph.build(g, dtype=dtype)
        print(f"{name}: polyloop {dtype} built in {time.perf_counter() - t0:.1f} s", flush=True)
        runs[LABELS[dtype]] = (lambda e: lambda: e(xn))(ex)
        builds[dtype] = ex
        if dtype == "bfloat16":
            with contextlib.redirect_stdout(io.StringIO()):     # report() prints it all
                text = ex.report()
            summary = [line for line in text.splitlines()
                       if "bfloat16 products," in line or line.startswith("  float32")]
            print("\n".join(summary), flush=True)

    def torch_bf16():
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x).float().numpy()
    runs["torch bf16 autocast"] = torch_bf16
    try:
        import openvino as ov
    except ImportError:
        print("openvino is not installed: pip install openvino", flush=True)
    else:
        compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": threads})
        precision = compiled.get_property("INFERENCE_PRECISION_HINT")
        runs[f"openvino default ({precision})".replace("<Type: ", "").replace(">", "")] = \
            lambda: compiled({0: xn})[0]
    return runs, xn, sess.run(None, {"x": xn})[0]


def best_medians(runs: dict, rounds: int, calls: int) -> dict[str, float]:
    """Each engine's best-of-``rounds`` median time in ms, the engines alternated per round."""
    best = {k: float("inf") for k in runs}
    for f in runs.values():
        f()                                 # warm-up
    for _ in range(rounds):
        for k, f in runs.items():
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                f()
                times.append(time.perf_counter() - t0)
            best[k] = min(best[k], statistics.median(times) * 1e3)
    return best


def kernel_times(ex, x: np.ndarray, rounds: int) -> dict[str, float]:
    """Each kernel's best-of-``rounds`` profiled median time in ms, in model order."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        with contextlib.redirect_stdout(io.StringIO()):
            text = ex.profile(x, repeat=5)
        for line in text.splitlines()[1:]:
            parts = line.split()
            if len(parts) == 3 and parts[0] not in ("total", "call,"):
                best[parts[0]] = min(best.get(parts[0], float("inf")), float(parts[1]))
    return best


def describe(ex) -> dict[str, str]:
    """The product each kernel of a build runs: the recipe (or op) and its shapes."""
    import polyloop as pl
    out = {}
    for b in ex.graph.bindings:
        if isinstance(b, pl.graph.KernelCall):
            head = b.kernel.body[0]
            fn = head.attr("fn")
            out[b.kernel.name] = (f"{type(fn).__name__ if fn is not None else head.op} "
                                  f"{head.inputs[0].type.shape} -> "
                                  f"{head.outputs[0].type.shape}")
    return out


def print_layers(builds: dict, x: np.ndarray, rounds: int) -> None:
    times = {dtype: kernel_times(ex, x, rounds) for dtype, ex in builds.items()}
    rows = {dtype: list(t.items()) for dtype, t in times.items()}
    words = describe(builds["bfloat16"])
    print(f"\n{'float32 kernel':<36} {'ms':>7}   {'bfloat16 kernel':<36} {'ms':>7}  product")
    f32, bf16 = rows["float32"], rows["bfloat16"]
    for k in range(max(len(f32), len(bf16))):
        a = f32[k] if k < len(f32) else ("", float("nan"))
        b = bf16[k] if k < len(bf16) else ("", float("nan"))
        print(f"{a[0]:<36} {a[1]:7.3f}   {b[0]:<36} {b[1]:7.3f}  {words.get(b[0], '')}")
    print(f"{'sum':<36} {sum(t for _, t in f32):7.3f}   {'sum':<36} "
          f"{sum(t for _, t in bf16):7.3f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--layers", action="store_true",
                    help="also print each polyloop kernel's time, float32 and bf16 builds")
    args = ap.parse_args()
    # polyloop reads its thread count once, at import
    os.environ["POLYLOOP_NUM_THREADS"] = str(args.threads)
    # PyTorch, imported below, starts the OpenMP runtime polyloop's kernels share: let its
    # threads sleep while they wait, as polyloop asks when it starts the runtime itself
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import torch
    torch.set_num_threads(args.threads)
    flags = open("/proc/cpuinfo").read() if Path("/proc/cpuinfo").exists() else ""
    print(f"threads {args.threads}; AVX-512 BF16: {'avx512_bf16' in flags}; "
          f"AMX: {'amx_bf16' in flags}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            builds: dict = {}
            runs, xn, ref = engines(name, args.threads, Path(tmp), builds)
            scale = float(np.abs(ref).max())
            errors = {k: float(np.abs(np.asarray(f(), np.float32) - ref).max()) / scale
                      for k, f in runs.items()}
            ms = best_medians(runs, args.rounds, args.calls)
            mine = ms["polyloop bf16"]
            print(f"\n{name}  {'engine':<34} {'ms':>8} {'vs bf16':>8} {'err':>9}")
            for k in runs:
                print(f"{'':<{len(name)}}  {k:<34} {ms[k]:8.2f} {ms[k] / mine:8.2f} "
                      f"{errors[k]:9.2e}", flush=True)
            if args.layers:
                print_layers(builds, xn, 2 * args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
