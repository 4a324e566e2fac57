# SPDX-License-Identifier: Apache-2.0
"""What the checks before a call cost on a small kernel (``out = a + 1`` on 256 floats).

    python benchmarks/bench_call_checks.py
    python benchmarks/bench_call_checks.py --n 4096 --rounds 5

Rows, timed in the same run, interleaved over ``--rounds`` rounds (the best round is kept):
- ``raw ctypes``: the compiled function called directly with prepared pointers (no checks);
- ``call``: ``mod(a, out)`` of a module built without assumptions;
- ``call, assumptions``: the same kernel built with ``assumptions="n >= 1 and n mod 4 = 0"``;
- ``first call of a shape``: the same, with the per-shape plan cache emptied before each call
  (size inference, range, byte-count and assumption checks all run).
Microseconds per call, and each row's ratio to ``call``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import polyloop as pl


def per_call(fn, calls: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.n - args.n % 4
    domain, insn = "{ [i] : 0 <= i < n }", "out[i] = a[i] + 1"
    plain = pl.build(pl.make_kernel(domain, insn, name="plain"))
    assumed = pl.build(pl.make_kernel(domain, insn, name="assumed",
                                      assumptions="n >= 1 and n mod 4 = 0"))
    a = np.random.default_rng(0).standard_normal(n).astype("float32")
    out = np.empty_like(a)
    _, pointers, plan = plain._binder.bind((a, out), {})
    raw_args = plain._args_type(*pointers)

    def first_call():
        assumed._binder._plans.clear()
        assumed(a, out)
    rows = {
        "raw ctypes": lambda: plain._fn(raw_args, plan.params),
        "call": lambda: plain(a, out),
        "call, assumptions": lambda: assumed(a, out),
        "first call of a shape": first_call,
    }
    best = {name: float("inf") for name in rows}
    for _ in range(args.rounds):
        for name, fn in rows.items():
            calls = args.calls // 10 if name == "first call of a shape" else args.calls
            best[name] = min(best[name], per_call(fn, calls))
    print(f"out = a + 1, n = {n}: microseconds per call (best of {args.rounds} rounds)")
    for name, seconds in best.items():
        print(f"  {name:24s} {seconds * 1e6:8.2f} us   x{seconds / best['call']:.2f} of call")


if __name__ == "__main__":
    main()
