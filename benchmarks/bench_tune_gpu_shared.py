# SPDX-License-Identifier: Apache-2.0
"""Shared-memory tiles in the GPU tuning space, on whatever OpenCL device is there: one
random-search run of ``pl.tune(target="opencl")`` on a matmul, then the best candidate with
shared tiles and the best without them, timed again one after the other, next to NumPy
(timed before OpenCL starts).

    python benchmarks/bench_tune_gpu_shared.py [--n 256] [--trials 24] [--seed 0]

On PoCL (the CPU's OpenCL) this is a sanity check that the shared-tile candidates build, are
verified and run, not a measure of GPU speed: a CPU has no on-chip memory shared by a
work-group, and the barriers cost what they cost on a CPU.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np

import polyloop as pl
from polyloop.runtime.records import Status
from polyloop.schedule.trace import Trace


def matmul(n: int):
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    return pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")


def best(history, shared: bool):
    ok = [r for r in history if r.status is Status.OK
          and any(s["primitive"] == "cache_read" for s in json.loads(r.trace)) == shared]
    return min(ok, key=lambda r: r.seconds) if ok else None


def timed(mod, args, rounds: int = 10) -> float:
    mod(*args)
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        mod(*args)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    opt = ap.parse_args()
    C = matmul(opt.n)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((opt.n, opt.n)).astype("float32")
    b = rng.standard_normal((opt.n, opt.n)).astype("float32")
    c = np.empty((opt.n, opt.n), "float32")
    # NumPy first: timed after PoCL had run, it was 20 to 30 times slower on a 2-core machine
    reference = timed(lambda *_: np.matmul(a, b, out=c), (a, b, c))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        res = pl.tune(C, target="opencl", trials=opt.trials, strategy="random",
                      seed=opt.seed, work_dir=work)
    wall = time.perf_counter() - start
    counts = {s: sum(r.status is s for r in res.history) for s in Status}
    print(f"matmul {opt.n}^3 float32, {opt.trials} trials in {wall:.0f} s: "
          + ", ".join(f"{s.value} {c}" for s, c in counts.items() if c))
    tiled = sum(r.status is Status.OK and
                any(s["primitive"] == "cache_read" for s in json.loads(r.trace))
                for r in res.history)
    print(f"measured candidates with shared tiles: {tiled} of {counts[Status.OK]}")
    flops = 2.0 * opt.n ** 3
    rows = []
    for label, shared in (("best with shared tiles", True), ("best without", False)):
        rec = best(res.history, shared)
        if rec is None:
            print(f"{label}: no candidate measured")
            continue
        sch = pl.Schedule.from_trace(C, Trace.from_json(rec.trace))
        mod = pl.build(sch, target="opencl")
        mod(a, b, c)
        assert np.allclose(c, a @ b, rtol=1e-3, atol=1e-3), label
        rows.append((label, mod))
    times = {"numpy (timed first)": reference}
    times.update((label, timed(fn, (a, b, c))) for label, fn in rows)
    for label, t in times.items():
        print(f"{label:>24}: {t * 1e3:8.3f} ms  {flops / t / 1e9:7.2f} GFLOP/s  "
              f"{reference / t:5.2f}x NumPy")
    if len(times) == 3:
        ratio = times["best without"] / times["best with shared tiles"]
        print(f"shared tiles / without: {ratio:.2f}x (above 1: the shared-tile kernel is faster)")


if __name__ == "__main__":
    main()
