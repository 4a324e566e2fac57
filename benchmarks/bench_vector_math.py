# SPDX-License-Identifier: Apache-2.0
"""Vectorized math in generated C against NumPy, in one run: ``y[j] = f(x[j])`` over 2**20
elements for sin, cos, tan, erf, log, tanh, exp, pow, floor, ceil, round, fmod and isnan
(``where(isnan(x), 0, x)``), float32 and float64.

    python benchmarks/bench_vector_math.py [--n 1048576] [--repeat 15] [--rounds 3]

Three kinds of generated loop per function, timed in alternating rounds (the best median of
each is kept, so that a burst of other work on a shared machine favours none):

- ``scalar``: the loop as written, left to gcc -O3 -march=native (no -ffast-math: gcc calls
  the scalar libm function per element, except where it inlines one, floor for instance);
- ``lanes``: the vectorized loop with every function applied lane by lane in the vector helper
  (what polyloop generates without libmvec);
- ``libmvec``: the vectorized loop calling glibc's libmvec (what polyloop generates where the
  C library has the function; the same as ``lanes`` for floor, ceil, round, fmod and isnan,
  which need no library; exp is polyloop's own polynomial in both).

The printed ratios are NumPy's time over each loop's (above 1: faster than NumPy). One thread.
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import statistics
import time

import numpy as np
import scipy.special

from polyloop.codegen import generate_c
from polyloop.ir.dtypes import DType
from polyloop.ir.elementwise import isnan, where
from polyloop.ir.expr import BinOpKind, Const, UnaryKind, Var, VarKind, binop, unary
from polyloop.ir.loops import For, Kernel, LoopKind, Store
from polyloop.ir.program import Buffer, BufferRole
from polyloop.runtime.compiler import compile_c
from polyloop.util.isa import host_isa

UNARY = {"sin": (UnaryKind.SIN, np.sin), "cos": (UnaryKind.COS, np.cos),
         "tan": (UnaryKind.TAN, np.tan), "erf": (UnaryKind.ERF, scipy.special.erf),
         "log": (UnaryKind.LOG, np.log), "tanh": (UnaryKind.TANH, np.tanh),
         "exp": (UnaryKind.EXP, np.exp), "floor": (UnaryKind.FLOOR, np.floor),
         "ceil": (UnaryKind.CEIL, np.ceil), "round": (UnaryKind.ROUND, np.rint)}
BINARY = {"pow": (BinOpKind.POW, np.power), "fmod": (BinOpKind.FMOD, np.fmod)}
FUNCTIONS = [*UNARY, *BINARY, "isnan"]


def kernel(name: str, dtype: DType, kind: LoopKind) -> Kernel:
    n, j = Var("n", VarKind.PARAM), Var("j")
    X, Y, Z = (Buffer(b, (n,), dtype, BufferRole.OUTPUT if b == "Z" else BufferRole.INPUT)
               for b in "XYZ")
    if name in UNARY:
        value = unary(UNARY[name][0], X[j])
    elif name in BINARY:
        value = binop(BINARY[name][0], X[j], Y[j])
    else:
        value = where(isnan(X[j]), Const(0.0, dtype), X[j])
    body = For("j", Const(0, DType.INT64), n, Store("Z", (j,), value), kind)
    return Kernel(f"bench_{name}", (X, Y, Z), ("n",), (), body)


def numpy_call(name: str, x: np.ndarray, y: np.ndarray, z: np.ndarray):
    if name in UNARY:
        return lambda: UNARY[name][1](x, out=z)
    if name in BINARY:
        return lambda: BINARY[name][1](x, y, out=z)
    return lambda: np.copyto(z, np.where(np.isnan(x), 0, x))


def loop_call(source: str, name: str, x: np.ndarray, y: np.ndarray, z: np.ndarray):
    lib = ctypes.CDLL(str(compile_c(source, name=name).path))
    fn = getattr(lib, f"bench_{name}")
    args = (ctypes.c_void_p * 3)(x.ctypes.data, y.ctypes.data, z.ctypes.data)
    params = (ctypes.c_int64 * 1)(x.size)
    return lambda: fn(args, params)


def median_seconds(call, repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def inputs(name: str, dtype: str, n: int, rng: np.random.Generator):
    x = rng.uniform(-10, 10, n).astype(dtype)
    if name in ("log", "pow"):
        x = np.abs(x) + np.asarray(0.1, dtype)
    if name == "isnan":
        x[::7] = np.nan
    return x, rng.uniform(-3, 3, n).astype(dtype), np.empty(n, dtype)


def measure(name: str, dtype: str, args: argparse.Namespace) -> dict[str, float]:
    d = DType(dtype)
    x, y, z = inputs(name, dtype, args.n, np.random.default_rng(0))
    isa = host_isa()
    sources = {"scalar": generate_c(kernel(name, d, LoopKind.SERIAL), isa=isa),
               "lanes": generate_c(kernel(name, d, LoopKind.VECTORIZED),
                                   isa=dataclasses.replace(isa, glibc=None)),
               "libmvec": generate_c(kernel(name, d, LoopKind.VECTORIZED), isa=isa)}
    calls = {k: loop_call(s, name, x, y, z) for k, s in sources.items()}
    calls["numpy"] = numpy_call(name, x, y, z)
    best = {k: float("inf") for k in calls}
    for _ in range(args.rounds):
        for k, call in calls.items():
            best[k] = min(best[k], median_seconds(call, args.repeat))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=FUNCTIONS)
    args = parser.parse_args()
    isa = host_isa()
    print(f"# {isa.name}, glibc {isa.glibc}; n = {args.n}; ms per call (ratio NumPy/loop)")
    print(f"{'function':10} {'dtype':8} {'numpy':>8} {'scalar':>15} {'lanes':>15} "
          f"{'libmvec':>15}")
    for dtype in ("float32", "float64"):
        for name in args.only:
            t = measure(name, dtype, args)
            cells = [f"{t[k] * 1e3:7.3f} ({t['numpy'] / t[k]:4.1f}x)"
                     for k in ("scalar", "lanes", "libmvec")]
            print(f"{name:10} {dtype:8} {t['numpy'] * 1e3:8.3f} " + " ".join(
                f"{c:>15}" for c in cells))


if __name__ == "__main__":
    main()
