# SPDX-License-Identifier: Apache-2.0
"""int8 and bfloat16 matrix products next to the machine's peaks and the references, in one
run: polyloop's ``ops.matmul_int8`` / ``matmul_int8_packed`` / ``matmul_bf16``, ONNX Runtime's
``MatMulInteger`` (B as an input, packed per call, and as an initializer, packed once),
PyTorch's quantized linear (``torch.ao``, oneDNN engine: uint8 activations, int8 weights,
requantized uint8 result) and PyTorch's bfloat16 matmul.

    python benchmarks/bench_lowbit.py --threads 2 --size 1024 --repeat 20 --rounds 5

The peaks (16 independent chains of ``vpdpbusd`` / ``vdpbf16ps`` per thread, as ``polyloop
bench`` measures the FP32 FMA peak) are measured before and after the products; the higher
is kept. Every result is checked against NumPy first. Each figure is the median of
``--repeat`` calls; the rounds are interleaved over all rows and implementations and the best
median is kept, so a burst of load from another process does not land on one implementation
only. ``ref/polyloop`` > 1: polyloop is faster. An operation is a multiply or an add
(2 * m * n * k per product).

``--clock cpu`` times by the process's CPU time divided by the threads, peaks included: on a
machine other processes load, wall time measures the waiting, CPU time what ran (it still
counts the spinning of idle threads, so it favours no one).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import numpy as np


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def median_ms(fn, repeat: int, clock: str = "wall", threads: int = 1) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter() if clock == "wall" else cpu_seconds()
        fn()
        t1 = time.perf_counter() if clock == "wall" else cpu_seconds()
        times.append((t1 - t0) / (1 if clock == "wall" else threads))
    return statistics.median(times) * 1e3


def ort_matmul_integer(a: np.ndarray, b: np.ndarray, threads: int, initializer: bool):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
    m, k = a.shape
    n = b.shape[1]
    inputs = [helper.make_tensor_value_info("A", TensorProto.UINT8, [m, k])]
    inits = []
    if initializer:
        inits = [onnx.numpy_helper.from_array(b, "B")]
    else:
        inputs.append(helper.make_tensor_value_info("B", TensorProto.INT8, [k, n]))
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["A", "B"], ["Y"])], "mmi",
                              inputs, [helper.make_tensor_value_info("Y", TensorProto.INT32,
                                                                     [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    feed = {"A": a} if initializer else {"A": a, "B": b}
    np.testing.assert_array_equal(sess.run(None, feed)[0], a.astype(np.int32) @ b.astype(np.int32))
    return lambda: sess.run(None, feed)


def torch_quantized_linear(a: np.ndarray, b: np.ndarray, scale: float):
    """uint8 a (zero point 0, scale 1) times int8 b (scale 1): a uint8 result ``round(acc *
    scale)``, as oneDNN computes it; returns the call and its result."""
    import warnings
    import torch
    # quantized tensors are deprecated in PyTorch 2.13, still the way to reach oneDNN's int8
    warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
    torch.backends.quantized.engine = "onednn"
    lin = torch.ao.nn.quantized.Linear(b.shape[0], b.shape[1], bias_=False)
    w = torch.quantize_per_tensor(torch.from_numpy(b.T.astype(np.float32).copy()), 1.0, 0,
                                  torch.qint8)
    lin.set_weight_bias(w, None)
    lin.scale, lin.zero_point = 1.0 / scale, 0
    x = torch.quantize_per_tensor(torch.from_numpy(a.astype(np.float32)), 1.0, 0, torch.quint8)
    return (lambda: lin(x)), lin(x).int_repr().numpy()


def int8_rows(m: int, n: int, k: int, threads: int, rng) -> dict:
    import polyloop as pl
    from polyloop import ops
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    exact = a.astype(np.int32) @ b.astype(np.int32)
    A = pl.placeholder((m, k), "uint8", name="A")
    copy = pl.build(ops.schedule_matmul_int8(ops.matmul_int8(
        A, pl.placeholder((k, n), "int8", name="B"))))
    packed = ops.pack_int8_weight(b)
    P = pl.placeholder(packed.shape, "int8", name="P")
    prepacked = pl.build(ops.schedule_matmul_int8(ops.matmul_int8_packed(A, P, n)))
    scale = 1.0 / (k * 64)
    requant = pl.build(ops.schedule_matmul_int8(ops.matmul_int8_packed(
        A, P, n, scale=scale, out_dtype="uint8")))
    out = np.full((m, n), -1, np.int32)
    out_q = np.zeros((m, n), np.uint8)
    copy(a, b, out)
    np.testing.assert_array_equal(out, exact)
    out[:] = -1
    prepacked(a, packed, out)
    np.testing.assert_array_equal(out, exact)
    requant(a, packed, out_q)
    torch_call, torch_q = torch_quantized_linear(a, b, scale)
    ref_q = np.clip(np.round(exact.astype(np.float32) * np.float32(scale)), 0, 255)
    np.testing.assert_array_equal(out_q, ref_q.astype(np.uint8))
    assert np.abs(torch_q.astype(int) - out_q).max() <= 1, "torch's requantized result differs"
    return {
        "int8, B per call": {
            "polyloop": lambda: copy(a, b, out),
            "ORT MatMulInteger": ort_matmul_integer(a, b, threads, initializer=False)},
        "int8, B packed once": {
            "polyloop": lambda: prepacked(a, packed, out),
            "ORT MatMulInteger": ort_matmul_integer(a, b, threads, initializer=True)},
        "int8 -> uint8 requantized, B packed once": {
            "polyloop": lambda: requant(a, packed, out_q),
            "torch.ao Linear (oneDNN)": torch_call},
    }


def bf16_rows(m: int, n: int, k: int, rng) -> dict:
    import ml_dtypes
    import torch
    import polyloop as pl
    from polyloop import ops
    bf16 = ml_dtypes.bfloat16
    a = rng.standard_normal((m, k)).astype(bf16)
    b = rng.standard_normal((k, n)).astype(bf16)
    A = pl.placeholder((m, k), "bfloat16", name="A")
    B = pl.placeholder((k, n), "bfloat16", name="B")
    mod = pl.build(ops.schedule_matmul_bf16(ops.matmul_bf16(A, B, out_dtype="bfloat16")))
    out = mod(a, b)
    exact = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), exact, rtol=2e-2, atol=2e-2 * np.sqrt(k))
    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
    return {"bf16 -> bf16": {"polyloop": lambda: mod(a, b, out),
                             "torch.matmul": lambda: torch.matmul(ta, tb)}}


def peaks(threads: int, clock: str) -> dict[str, float]:
    from polyloop.bench.dot_peak import host_has, measure_dot_peak
    found = {}
    for kind, label in (("vnni", "int8"), ("bf16", "bf16")):
        if host_has(kind):
            found[label] = measure_dot_peak(kind, threads, cpu_time=clock == "cpu")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--size", type=int, default=1024, help="m = n = k")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    os.environ["POLYLOOP_NUM_THREADS"] = str(args.threads)
    # PyTorch, imported below, starts the OpenMP runtime polyloop's kernels share: let its
    # threads sleep while they wait, as polyloop asks when it starts the runtime itself
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import torch
    torch.set_num_threads(args.threads)
    size = args.size
    before = peaks(args.threads, args.clock)
    rng = np.random.default_rng(0)
    rows = {**int8_rows(size, size, size, args.threads, rng), **bf16_rows(size, size, size, rng)}
    best: dict = {}
    for _ in range(args.rounds):
        for row, fns in rows.items():
            for name, fn in fns.items():
                t = median_ms(fn, args.repeat, args.clock, args.threads)
                best[row, name] = min(best.get((row, name), t), t)
    after = peaks(args.threads, args.clock)
    peak = {kind: max(before[kind], after.get(kind, 0.0)) for kind in before}
    ops_count = 2.0 * size ** 3
    print(f"{size}^3, {args.threads} threads, {args.clock} time; peaks (GOP/s): "
          + ", ".join(f"{kind} {value:.0f}" for kind, value in peak.items()))
    print(f"{'product':>42} {'implementation':>26} {'ms':>8} {'GOP/s':>7} {'% peak':>7} "
          f"{'ref/polyloop':>12}")
    for row, fns in rows.items():
        mine = best[row, "polyloop"]
        kind = "int8" if row.startswith("int8") else "bf16"
        for name in fns:
            t = best[row, name]
            rate = ops_count / t / 1e6
            share = f"{100 * rate / peak[kind]:6.0f}%" if kind in peak else "      -"
            ratio = f"{t / mine:12.2f}" if name != "polyloop" else ""
            print(f"{row:>42} {name:>26} {t:8.3f} {rate:7.0f} {share} {ratio}")


if __name__ == "__main__":
    main()
