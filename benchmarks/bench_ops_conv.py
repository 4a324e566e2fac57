# SPDX-License-Identifier: Apache-2.0
"""conv2d, depthwise conv2d and row softmax: polyloop's operator schedules (polyloop.ops) next
to PyTorch CPU (2 threads) and NumPy, in one run.

    python benchmarks/bench_ops_conv.py                    # every workload
    python benchmarks/bench_ops_conv.py conv dw --repeat 20 --rounds 5
    python benchmarks/bench_ops_conv.py resnet             # ResNet-18's convolutions

Workloads (float32): conv2d 3x3 pad 1 (1,64,56,56)->64 and (1,256,14,14)->256; depthwise 3x3
SAME [1,256,H,H] for H = 21, 32, 64, 96; softmax over the rows of 4096 x 4096; and ``resnet``:
every other convolution shape of ResNet-18 at batch 1 (the 7x7 stride-2 stem, the 3x3
stride-2 and 1x1 stride-2 downsamples, the 3x3 stride-1 convs of the deep stages).

Each result is checked against NumPy first. Each figure is the median of ``--repeat`` calls;
with ``--rounds R`` the rounds are interleaved over all rows and implementations and the best
median is kept, so a burst of load from another process on a shared machine does not land on
one implementation only. ``vs torch`` is PyTorch's time divided by polyloop's (> 1: polyloop is
faster). GFLOP/s counts 2 multiply-adds per tap; GB/s for softmax counts one read and one write
of the matrix. conv2d's ``polyloop`` runs on weights packed ahead of time
(``conv2d_nchw_packed``, as a model's layers do); ``copying`` is the same recipe copying its
weights into blocks on every call (``conv2d_nchw``); ``default`` (strided rows) is the graph
level's general default schedule, which ran strided convolutions before they had a recipe.
"""
from __future__ import annotations

import argparse
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import polyloop as pl
from polyloop import ops
from polyloop.bench.peers import time_call

# goals: polyloop time must be <= the bound (ms) or reach the rate, measured on the 2-core host
GOALS = {"conv 64x56": "<= 2.4 ms / 1.5", "conv 256x14": "<= 0.89 ms / 0.9",
         "dw 21": "<= 0.047 ms", "dw 32": "<= 0.10 ms", "dw 64": "<= 0.48 ms",
         "dw 96": "<= 1.13 ms", "softmax 4096": ">= 17.9 GB/s"}
RESNET_GOAL = ">= 300 GFLOP/s"

# ResNet-18's other convolution shapes at batch 1: (name, C, H = W, K, kernel, stride)
RESNET = [("stem 7x7/2", 3, 224, 64, 7, 2), ("3x3/2 64x56", 64, 56, 128, 3, 2),
          ("3x3/2 128x28", 128, 28, 256, 3, 2), ("3x3/2 256x14", 256, 14, 512, 3, 2),
          ("1x1/2 64x56", 64, 56, 128, 1, 2), ("1x1/2 128x28", 128, 28, 256, 1, 2),
          ("1x1/2 256x14", 256, 14, 512, 1, 2), ("3x3 128x28", 128, 28, 128, 3, 1),
          ("3x3 512x7", 512, 7, 512, 3, 1)]


def conv_reference(x, w, depthwise, stride=1):
    r = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (r // 2, r // 2), (r // 2, r // 2)))
    win = sliding_window_view(xp, (r, r), axis=(2, 3))[:, :, ::stride, ::stride]
    if depthwise:
        return np.einsum("ncyxrs,crs->ncyx", win, w[:, 0], optimize=True)
    return np.einsum("ncyxrs,kcrs->nkyx", win, w, optimize=True)


def graph_default_conv(x, w, pad, stride):
    """The convolution as the graph level built it before it had a strided recipe: lowered
    through the operator library, with the general default schedule."""
    from polyloop.graph import GraphBuilder, Op
    from polyloop.graph.lower import lower_kernel
    from polyloop.graph.passes import fuse_operators
    from polyloop.graph.schedule import default_schedule
    b = GraphBuilder("conv")
    y = b.emit(Op.CONV2D, b.input("x", x.shape), b.input("w", w.shape), stride=(stride, stride),
               padding=(pad, pad), dilation=(1, 1), groups=1)
    kernel = fuse_operators(b.build(y)).bindings[0].kernel
    return pl.build(default_schedule(lower_kernel(kernel)))


def conv_case(torch, c, hw, k, depthwise, rng, r=3, stride=1):
    x = rng.standard_normal((1, c, hw, hw), dtype=np.float32)
    w = rng.standard_normal((c, 1, r, r) if depthwise else (k, c, r, r), dtype=np.float32)
    X = pl.placeholder(x.shape, "float32", name="X")
    Wt = pl.placeholder(w.shape, "float32", name="Wt")
    expected = conv_reference(x, w, depthwise, stride)
    out = np.empty(expected.shape, np.float32)
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    groups = c if depthwise else 1
    impls = {"torch": lambda: torch.nn.functional.conv2d(xt, wt, padding=r // 2, stride=stride,
                                                         groups=groups)}
    if depthwise:
        mod = pl.build(ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt)))
        impls["polyloop"] = lambda: mod(x, w, out)
    else:
        packed = ops.pack_conv2d_weight(w, ops.conv2d_channel_block())
        P = pl.placeholder(packed.shape, "float32", name="P")
        mod = pl.build(ops.schedule_conv2d_nchw(ops.conv2d_nchw_packed(X, P, k, r // 2, stride)))
        copying = pl.build(ops.schedule_conv2d_nchw(ops.conv2d_nchw(X, Wt, r // 2, stride)))
        copying(x, w, out)
        np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-3)
        impls["polyloop"] = lambda: mod(x, packed, out)
        impls["copying"] = lambda: copying(x, w, out)
        if stride > 1:
            default = graph_default_conv(x, w, r // 2, stride)
            default(x, w, out)
            np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-3)
            impls["default"] = lambda: default(x, w, out)
    out.fill(np.nan)
    impls["polyloop"]()
    np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-3)
    flops = 2.0 * r * r * expected.shape[2] * expected.shape[3] * c * (1 if depthwise else k)
    return impls, flops, "GFLOP/s"


def softmax_case(torch, n, rng):
    x = rng.standard_normal((n, n), dtype=np.float32)
    mod = pl.build(ops.schedule_softmax(ops.softmax(pl.placeholder((n, n), "float32", name="X"))))
    out = np.empty_like(x)
    mod(x, out)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-7)
    xt = torch.from_numpy(x)

    def numpy_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    impls = {"polyloop": lambda: mod(x, out), "torch": lambda: torch.softmax(xt, dim=1),
             "numpy": numpy_softmax}
    return impls, 2.0 * 4 * n * n, "GB/s"


def cases(torch, which, rng):
    table = [("conv", "conv 64x56", lambda: conv_case(torch, 64, 56, 64, False, rng)),
             ("conv", "conv 256x14", lambda: conv_case(torch, 256, 14, 256, False, rng))]
    table += [("dw", f"dw {h}", lambda h=h: conv_case(torch, 256, h, None, True, rng))
              for h in (21, 32, 64, 96)]
    table += [("softmax", "softmax 4096", lambda: softmax_case(torch, 4096, rng))]
    table += [("resnet", name, lambda a=args: conv_case(torch, *a[:3], False, rng, *a[3:]))
              for name, *args in RESNET]
    return [(name, make) for group, name, make in table if not which or group in which]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", choices=["conv", "dw", "softmax", "resnet", []],
                        help="groups to run (default: all)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        raise SystemExit("this benchmark compares with PyTorch: python3 -m pip install "
                         "torch==2.13.0") from None
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    rows = []
    for name, make in cases(torch, args.workloads, rng):
        impls, work, unit = make()
        rows.append((name, impls, work, unit, {k: math.inf for k in impls}))
    for _ in range(args.rounds):
        for _, impls, _, _, best in rows:
            for key, fn in impls.items():
                best[key] = min(best[key], time_call(fn, repeat=args.repeat))
    print(f"{'workload':14} {'polyloop ms':>12} {'torch ms':>10} {'numpy ms':>10} "
          f"{'copying ms':>10} {'default ms':>10} {'polyloop rate':>16} {'vs torch':>9}   goal")
    for name, _, work, unit, best in rows:
        p, t = best["polyloop"], best["torch"]
        extra = " ".join(f"{best[k] * 1e3:10.3f}" if k in best else f"{'-':>10}"
                         for k in ("numpy", "copying", "default"))
        rate = f"{work / p / 1e9:8.1f} {unit}"
        print(f"{name:14} {p * 1e3:12.3f} {t * 1e3:10.3f} {extra} {rate:>16} {t / p:9.2f}   "
              f"{GOALS.get(name, RESNET_GOAL)}")


if __name__ == "__main__":
    main()
