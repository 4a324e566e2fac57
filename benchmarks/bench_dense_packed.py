# SPDX-License-Identifier: Apache-2.0
"""Dense layers on weights packed ahead of time (``polyloop.ops.matmul_packed``) next to the
same recipe copying its weights into panels on every call (``ops.matmul``) and PyTorch, in one
run: BERT-base's four products at 128 tokens.

    python benchmarks/bench_dense_packed.py --threads 2 --repeat 20 --rounds 5

Each result is checked against NumPy first. Each figure is the median of ``--repeat`` calls;
the rounds are interleaved over all rows and implementations and the best median is kept, so a
burst of load from another process does not land on one implementation only. ``copy/packed``
is the copying time over the packed one (> 1: packing once is faster); ``torch/packed`` the
same against ``torch.matmul``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

SHAPES = [(128, 768, 2304), (128, 768, 768), (128, 768, 3072), (128, 3072, 768)]


def median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def row(m: int, k: int, n: int, rng) -> dict:
    import polyloop as pl
    from polyloop import ops
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    packed = ops.pack_matmul_weight(b, ops.matmul_panel_width())
    A = pl.placeholder((m, k), name="A")
    mod_copy = pl.build(ops.schedule_matmul(ops.matmul(A, pl.placeholder((k, n), name="B"))))
    P = pl.placeholder(packed.shape, name="P")
    mod_packed = pl.build(ops.schedule_matmul(ops.matmul_packed(A, P, n)))
    out = np.full((m, n), np.nan, np.float32)
    for mod, w in ((mod_copy, b), (mod_packed, packed)):
        mod(a, w, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3)
    import torch
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return {"copy": lambda: mod_copy(a, b, out), "packed": lambda: mod_packed(a, packed, out),
            "torch": lambda: torch.matmul(ta, tb)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ["POLYLOOP_NUM_THREADS"] = str(args.threads)
    import torch
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    rows = [(shape, row(*shape, rng)) for shape in SHAPES]
    best: dict = {}
    for _ in range(args.rounds):
        for shape, fns in rows:
            for name, fn in fns.items():
                t = median_ms(fn, args.repeat)
                best[shape, name] = min(best.get((shape, name), t), t)
    print(f"{'m x k x n':>18} {'packed ms':>10} {'copy ms':>9} {'torch ms':>9} "
          f"{'copy/packed':>11} {'torch/packed':>12}")
    for shape, _ in rows:
        p, c, t = (best[shape, name] for name in ("packed", "copy", "torch"))
        print(f"{'x'.join(map(str, shape)):>18} {p:10.3f} {c:9.3f} {t:9.3f} {c / p:11.2f} "
              f"{t / p:12.2f}")


if __name__ == "__main__":
    main()
