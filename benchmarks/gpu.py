# SPDX-License-Identifier: Apache-2.0
"""The CUDA schedules of ``polyloop.ops`` on an NVIDIA GPU: each checked against NumPy, then
timed next to the vendor library in the same run.

    python benchmarks/gpu.py [--size 4096] [--repeat 20]

Prints, for seed 001's matmul ladder (float32, TF32 off): milliseconds, GFLOP/s, % of the
device's float32 peak and % of cuBLAS (``torch.matmul`` when PyTorch has CUDA, else CuPy's
``matmul``); for the tensor-core matmul (``ops.matmul_tensorcore``, float16 and bfloat16
inputs, float32 sums): milliseconds, TFLOP/s and % of cuBLAS on the same inputs
(``torch.matmul`` on float16 / bfloat16 tensors); for seed 000's depthwise 3x3 convolution
[1, 256, H, H] (H = 21, 32, 64, 96): microseconds next to cuDNN
(``torch.nn.functional.conv2d``, groups = channels) and the speed-up.
Without a CUDA device it says so, builds every schedule (source and PTX) and measures nothing.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import polyloop as pl
from polyloop import ops
from polyloop.runtime.cuda import device_available, device_properties

DEPTHWISE_SIZES = (21, 32, 64, 96)
DEPTHWISE = {"global": ops.depthwise_conv2d_gpu, "shared tile": ops.depthwise_conv2d_gpu_shared}


def reference_library():
    """(name, matmul(a, b), conv(data, weight), to_device(np), empty(shape), sync) or None."""
    try:
        import torch
        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            conv = torch.nn.functional.conv2d
            return ("torch", torch.matmul,
                    lambda d, w: conv(d, w, padding=1, groups=d.shape[1]),
                    lambda a: torch.from_numpy(a).cuda(),
                    lambda s: torch.empty(s, dtype=torch.float32, device="cuda"),
                    torch.cuda.synchronize)
    except ImportError:
        pass
    try:
        import cupy
        return ("cupy", cupy.matmul, None, cupy.asarray,
                lambda s: cupy.empty(s, dtype=cupy.float32), cupy.cuda.Device().synchronize)
    except ImportError:
        return None


def time_call(fn, sync, repeat: int) -> float:
    """Median seconds of ``fn()`` over ``repeat`` runs after 3 warm-ups."""
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def matmul_rows(size: int, repeat: int, lib, peak: float) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype="float32")
    b = rng.standard_normal((size, size), dtype="float32")
    expected = a @ b
    flops = 2.0 * size ** 3
    base = None
    if lib is not None:
        name, matmul, _, dev, _, sync = lib
        da, db = dev(a), dev(b)
        base = time_call(lambda: matmul(da, db), sync, repeat)
        print(f"{'cuBLAS (' + name + ')':<24} {base * 1e3:9.3f} ms {flops / base / 1e9:9.0f} "
              f"GFLOP/s {100 * flops / base / peak:6.1f} % of peak  100.0 % of cuBLAS")
    for step, schedule in ops.MATMUL_GPU_LADDER.items():
        mod = pl.build(schedule(size, size, size), target="cuda")
        got = mod(a, b)
        error = float(np.max(np.abs(got - expected)) / max(1.0, np.max(np.abs(expected))))
        ok = "ok" if error < 1e-4 else f"WRONG (relative error {error:.2e})"
        if lib is not None:
            da, db, dc = dev(a), dev(b), lib[4]((size, size))
            seconds = mod.benchmark(da, db, dc, repeat=repeat)
        else:
            seconds = mod.benchmark(a, b, repeat=repeat)
        share = f"{100 * base / seconds:6.1f} % of cuBLAS" if base else ""
        print(f"{'polyloop ' + step:<24} {seconds * 1e3:9.3f} ms {flops / seconds / 1e9:9.0f} "
              f"GFLOP/s {100 * flops / seconds / peak:6.1f} % of peak {share}  {ok}")


TENSORCORE_DTYPES = ("float16", "bfloat16")


def tensorcore_rows(size: int, repeat: int) -> None:
    """The tensor-core matmul next to cuBLAS (torch) on the same 16-bit inputs."""
    import ml_dtypes
    rng = np.random.default_rng(2)
    flops = 2.0 * size ** 3
    for dtype in TENSORCORE_DTYPES:
        host = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
        a = rng.standard_normal((size, size), dtype="float32").astype(host)
        b = rng.standard_normal((size, size), dtype="float32").astype(host)
        mod = pl.build(ops.matmul_tensorcore(size, size, size, dtype=dtype), target="cuda")
        expected = a.astype(np.float32) @ b.astype(np.float32)
        got = mod(a, b)
        error = float(np.max(np.abs(got - expected)) / max(1.0, np.max(np.abs(expected))))
        ok = "ok" if error < 1e-4 else f"WRONG (relative error {error:.2e})"
        line = f"tensor cores {dtype}"
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError
        except ImportError:
            seconds = mod.benchmark(a, b, repeat=repeat)
            print(f"{line:<24} {seconds * 1e3:9.3f} ms {flops / seconds / 1e12:7.1f} TFLOP/s "
                  f"(no torch with CUDA: no cuBLAS to compare)  {ok}")
            continue
        tdt = getattr(torch, dtype)
        da = torch.from_numpy(a.astype(np.float32)).to(tdt).cuda()
        db = torch.from_numpy(b.astype(np.float32)).to(tdt).cuda()
        dc = torch.empty((size, size), dtype=torch.float32, device="cuda")
        base = time_call(lambda: torch.matmul(da, db), torch.cuda.synchronize, repeat)
        seconds = mod.benchmark(da, db, dc, repeat=repeat)
        print(f"{'cuBLAS ' + dtype:<24} {base * 1e3:9.3f} ms {flops / base / 1e12:7.1f} TFLOP/s")
        print(f"{line:<24} {seconds * 1e3:9.3f} ms {flops / seconds / 1e12:7.1f} TFLOP/s "
              f"{100 * base / seconds:6.1f} % of cuBLAS  {ok}")


def depthwise_rows(repeat: int, lib) -> None:
    rng = np.random.default_rng(1)
    for h in DEPTHWISE_SIZES:
        data = rng.standard_normal((1, 256, h, h), dtype="float32")
        weight = rng.standard_normal((256, 1, 3, 3), dtype="float32")
        padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
        expected = sum(padded[:, :, r:r + h, s:s + h] * weight[None, :, 0, r, s, None, None]
                       for r in range(3) for s in range(3))
        base = None
        if lib is not None and lib[2] is not None:
            dev, sync = lib[3], lib[5]
            dd, dw, do = dev(data), dev(weight), lib[4]((1, 256, h, h))
            base = time_call(lambda: lib[2](dd, dw), sync, repeat)
        for kind, schedule in DEPTHWISE.items():
            mod = pl.build(schedule(1, 256, h, h), target="cuda")
            ok = "ok" if np.allclose(mod(data, weight), expected, atol=1e-4) else "WRONG"
            line = f"depthwise [1,256,{h},{h}] {kind}"
            if base is not None:
                seconds = mod.benchmark(dd, dw, do, repeat=repeat)
                print(f"{line:<36} polyloop {seconds * 1e6:8.1f} us  cuDNN {base * 1e6:8.1f} us"
                      f"  {base / seconds:5.2f}x  {ok}")
            else:
                seconds = mod.benchmark(data, weight, repeat=repeat)
                print(f"{line:<36} polyloop {seconds * 1e6:8.1f} us  (no cuDNN to compare)  {ok}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    available, why = device_available()
    if not available:
        print(f"{why}\nnothing measured; building every CUDA schedule (source and PTX) instead")
        for step, schedule in ops.MATMUL_GPU_LADDER.items():
            mod = pl.build(schedule(args.size, args.size, args.size), target="cuda")
            print(f"  matmul {step:<12} {len(mod.ptx.splitlines()):6d} lines of PTX")
        for h in DEPTHWISE_SIZES:
            for kind, schedule in DEPTHWISE.items():
                mod = pl.build(schedule(1, 256, h, h), target="cuda")
                print(f"  depthwise H={h:<3} {kind:<12} {len(mod.ptx.splitlines()):6d} lines of PTX")
        for dtype in TENSORCORE_DTYPES:     # symbolic sizes: the fixed ones take long to check
            mod = pl.build(ops.matmul_tensorcore(dtype=dtype), target="cuda")
            print(f"  tensor cores {dtype:<8} {len(mod.ptx.splitlines()):6d} lines of PTX")
        return 0
    props = device_properties()
    print(f"{props.name}: {props.sms} SMs at {props.clock_ghz:.2f} GHz, float32 peak "
          f"{props.fp32_peak / 1e12:.1f} TFLOP/s (compute capability {props.capability})")
    lib = reference_library()
    print(f"matmul {args.size}^3 float32 (TF32 off)")
    matmul_rows(args.size, args.repeat, lib, props.fp32_peak)
    print(f"matmul {args.size}^3 float16 / bfloat16 inputs, float32 sums, tensor cores")
    tensorcore_rows(args.size, args.repeat)
    print("depthwise 3x3, stride 1, SAME padding")
    depthwise_rows(args.repeat, lib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
