# SPDX-License-Identifier: Apache-2.0
"""Quantized models: polyloop next to ONNX Runtime on the same QDQ model, and ONNX Runtime's
float32 run of the model before quantization, in the same run.

    python benchmarks/bench_quantized.py                      # a small CNN defined here
    python benchmarks/bench_quantized.py resnet18             # bench_graph.py's ResNet-18
    python benchmarks/bench_quantized.py path/to/model.onnx   # a float32 ONNX model
    python benchmarks/bench_quantized.py --quantizer polyloop # quantized by pl.graph.quantize
    python benchmarks/bench_quantized.py path/to/bert.onnx --dynamic   # quantize_dynamic

The float32 model is quantized by ONNX Runtime's tool (``quantize_static``, QDQ format, uint8
activations, int8 weights, per channel unless ``--per-tensor``) on a few random calibration
batches; polyloop imports the QDQ model (its Conv/MatMul/Gemm layers fold into int8 kernels).
With ``--quantizer polyloop`` polyloop quantizes the float32 model itself
(``pl.graph.quantize`` on the same calibration batches, min-max, the same formulas) and ONNX
Runtime's QDQ model is still timed as the reference. With ``--dynamic`` ONNX Runtime's
``quantize_dynamic`` quantizes the weights of every MatMul (int8, per output column unless
``--per-tensor``), its activations quantized at run time: ``DynamicQuantizeLinear`` and
``MatMulInteger``, standard ONNX operators (a transformer such as BERT, whose int64 token ids
are drawn below 1000).
Each row prints the best median milliseconds of each engine over ``--rounds`` blocks of
``--repeat`` calls, polyloop's speed relative to each
ONNX Runtime run (> 1: polyloop faster), and the largest difference of polyloop's output from
ONNX Runtime's on the QDQ model and from the float32 model's, in units of the output's
quantization step (ONNX Runtime's own QDQ-vs-float32 difference beside it).
Threads: ``--threads`` for every engine (POLYLOOP_NUM_THREADS set before polyloop is
imported). ``--clock cpu`` times by the process's CPU time divided by the threads: on a machine
other processes load, wall time measures the waiting, CPU time what ran (with 1 thread, the
fairest comparison there). Random weights and inputs: the timings, not the accuracy, are the point.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time

import numpy as np


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def small_cnn():
    import torch
    from torch import nn
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(64, 96, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(96 * 8 * 8, 100), nn.ReLU(), nn.Linear(100, 10)).eval(), \
        torch.randn(1, 3, 64, 64)


def resnet18():
    """The ResNet-18 of ``bench_graph.py`` (random weights, batch norms with their default
    statistics), 224 x 224."""
    import torch
    from bench_graph import resnet18 as model
    return model().eval(), torch.randn(1, 3, 224, 224)


def export(name: str, batch: int, folder: str) -> tuple[str, tuple]:
    """A float32 ONNX file of ``name`` and its input shape."""
    if name.endswith(".onnx"):
        import onnx
        m = onnx.load(name)
        dims = [d.dim_value or batch for d in m.graph.input[0].type.tensor_type.shape.dim]
        return name, tuple(dims)
    import torch
    if name not in ("cnn", "resnet18"):
        raise SystemExit(f"unknown model {name!r}: cnn, resnet18 or a float32 .onnx file")
    torch.manual_seed(0)      # the same weights in every run: the quantizers compare
    model, x = small_cnn() if name == "cnn" else resnet18()
    x = x.repeat(batch, *([1] * (x.dim() - 1)))
    path = os.path.join(folder, f"{name}.onnx")
    torch.onnx.export(model, x, path, input_names=["x"], output_names=["y"], opset_version=13,
                      dynamo=False)
    return path, tuple(x.shape)


def sample(shape: tuple, dtype: str, rng) -> np.ndarray:
    """A random input: token ids below 1000 for an integer input, else normal floats."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def calibration(shape: tuple, dtype: str = "float32") -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [sample(shape, dtype, rng) for _ in range(4)]


def input_dtype(path: str) -> str:
    import onnx
    from onnx import helper
    elem = onnx.load(path, load_external_data=False).graph.input[0].type.tensor_type.elem_type
    return str(helper.tensor_dtype_to_np_dtype(elem))


def quantize_dynamically(path: str, folder: str, per_channel: bool) -> str:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    out = os.path.join(folder, "dynamic.onnx")
    quantize_dynamic(path, out, op_types_to_quantize=["MatMul"], per_channel=per_channel,
                     weight_type=QuantType.QInt8)
    return out


def quantize(path: str, shape: tuple, folder: str, per_channel: bool) -> str:
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    import onnx
    name = onnx.load(path).graph.input[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: x} for x in calibration(shape)])

        def get_next(self):
            return next(self.it, None)
    out = os.path.join(folder, "qdq.onnx")
    quantize_static(path, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return out


def session(path: str, threads: int, spin: bool = True):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    if not spin:    # idle threads sleep: they take no core from the next engine's run
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def output_step(path: str) -> float:
    """The quantization step of the model's output (the scale of the last DequantizeLinear
    writing it), else 0."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    inits = {i.name: i for i in m.graph.initializer}
    for node in m.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] == m.graph.output[0].name:
            return float(numpy_helper.to_array(inits[node.input[1]]).reshape(-1)[0])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="cnn",
                        help="cnn, resnet18, or a float32 .onnx file")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-tensor", action="store_true")
    parser.add_argument("--dynamic", action="store_true",
                        help="quantize with ONNX Runtime's quantize_dynamic (MatMul weights; "
                        "activations at run time)")
    parser.add_argument("--quantizer", choices=("ort", "polyloop"), default="ort",
                        help="who quantizes the float32 model for polyloop: ONNX Runtime's "
                        "quantize_static (QDQ, imported) or pl.graph.quantize")
    parser.add_argument("--no-spin", action="store_true",
                        help="ONNX Runtime's idle threads sleep instead of spinning")
    parser.add_argument("--label", default="", help="conditions printed with the figures")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time, or the process's CPU time divided by the threads")
    args = parser.parse_args()
    if args.dynamic and args.quantizer == "polyloop":
        raise SystemExit("--dynamic quantizes with ONNX Runtime's tool: leave out --quantizer")
    os.environ["POLYLOOP_NUM_THREADS"] = str(args.threads)
    # PyTorch, imported below, starts the OpenMP runtime polyloop's kernels share: let its
    # threads sleep while they wait, as polyloop asks when it starts the runtime itself
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import polyloop as pl
    with tempfile.TemporaryDirectory() as folder:
        src, shape = export(args.model, args.batch, folder)
        dtype = input_dtype(src)
        qdq = quantize_dynamically(src, folder, not args.per_tensor) if args.dynamic else \
            quantize(src, shape, folder, not args.per_tensor)
        x = sample(shape, dtype, np.random.default_rng(1))
        f32, q8 = (session(p, args.threads, not args.no_spin) for p in (src, qdq))
        t0 = time.perf_counter()
        if args.quantizer == "ort":
            g = pl.graph.from_onnx(qdq)
        else:
            g = pl.graph.quantize(pl.graph.from_onnx(src), calibration(shape),
                                  per_channel=not args.per_tensor)
        quantize_s = time.perf_counter() - t0
        mod = pl.graph.build(g)
        build_s = time.perf_counter() - t0 - quantize_s
        feed_f = {f32.get_inputs()[0].name: x}
        feed_q = {q8.get_inputs()[0].name: x}
        runs = {"polyloop int8": lambda: mod(x), "ORT int8": lambda: q8.run(None, feed_q),
                "ORT float32": lambda: f32.run(None, feed_f)}
        got = mod(x)
        got = got[0] if isinstance(got, (list, tuple)) else got
        ref = q8.run(None, feed_q)[0]
        ref_f = f32.run(None, feed_f)[0]
        # a dynamically quantized model's output is float32 (no step): differences in units
        # of ONNX Runtime's own quantization error instead
        step = output_step(qdq) or float(np.abs(ref - ref_f).max())
        diff = float(np.abs(got - ref).max())
        diff_f = float(np.abs(got - ref_f).max())
        ort_f = float(np.abs(ref - ref_f).max())
        # blocks of calls per engine, the blocks interleaved over rounds (calls interleaved one
        # by one would let one engine's thread pool, still spinning after its call, take the
        # cores from the next engine's); each engine's best median over the rounds
        ms = {k: float("inf") for k in runs}
        for _ in range(args.rounds):
            for k, fn in runs.items():
                for _ in range(3):
                    fn()
                wall = []
                clock = cpu_seconds if args.clock == "cpu" else time.perf_counter
                for _ in range(args.repeat):
                    t = clock()
                    fn()
                    wall.append(clock() - t)
                share = args.threads if args.clock == "cpu" else 1
                ms[k] = min(ms[k], statistics.median(wall) * 1e3 / share)
    how = "dynamically (quantize_dynamic)" if args.dynamic else "statically (QDQ)"
    print(f"{args.model} batch {args.batch}, {args.threads} threads, "
          f"{'per tensor' if args.per_tensor else 'per channel'}, quantized {how} by "
          f"{'ONNX Runtime' if args.quantizer == 'ort' else 'polyloop'}, {args.clock} time "
          f"{args.label}".rstrip())
    unit = "ORT int8-vs-float32 errors" if args.dynamic else "output steps"
    what = "import" if args.quantizer == "ort" else "quantize (calibration included)"
    print(f"  polyloop {what} {quantize_s:.1f} s, build {build_s:.1f} s")
    print(f"  max |polyloop - ORT int8| = {diff:.3g} ({diff / step:.2f} {unit}); "
          f"max |polyloop - float32| = {diff_f:.3g} ({diff_f / step:.2f}; ORT int8: "
          f"{ort_f / step:.2f})")
    for k, v in ms.items():
        print(f"  {k:14s} {v:9.3f} ms")
    print(f"  polyloop vs ORT int8: {ms['ORT int8'] / ms['polyloop int8']:.2f}x; vs ORT float32: "
          f"{ms['ORT float32'] / ms['polyloop int8']:.2f}x (> 1: polyloop faster)")


if __name__ == "__main__":
    main()
