# SPDX-License-Identifier: Apache-2.0
"""PolyBench kernels written with ``@pl.script``: default schedule vs ``pl.auto_schedule`` vs the
same loops as plain C (gcc -O3 -march=native) and gcc's polyhedral optimizer Graphite.

    OMP_NUM_THREADS=2 python benchmarks/bench_polybench.py [--size small|medium|large]
                                                           [--repeat 5] [--only gemm,lu]

The kernels are the loops in ``tests/polybench_scripts.py`` (also checked there against the
reference interpreter at small sizes). "plain -O3" is the default schedule's C (the loops as
written, no pragmas) compiled with ``-O3 -march=native``; "Graphite" is the same source with
``-floop-nest-optimize -floop-parallelize-all -ftree-parallelize-loops=2``. Every result is
compared with the plain -O3 result. Prints times, speed-ups over plain -O3 and over Graphite,
and their geometric means.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import polyloop as pl
from polyloop.codegen import generate_c
from polyloop.lower import lower
from polyloop.runtime import Module, compile_c
from polyloop.runtime.shapes import evaluate

ROOT = Path(__file__).resolve().parent.parent
GRAPHITE = ("-floop-nest-optimize", "-floop-parallelize-all", "-ftree-parallelize-loops=2")

SIZES = {
    "small": {"ni": 200, "nj": 220, "nk": 240, "nl": 210, "m": 390, "n": 400, "tsteps": 20,
              "nx": 200, "ny": 240, "tmax": 20},
    "medium": {"ni": 800, "nj": 900, "nk": 1000, "nl": 1100, "m": 1900, "n": 2000,
               "tsteps": 100, "nx": 1000, "ny": 1200, "tmax": 100},
    "large": {"ni": 1000, "nj": 1100, "nk": 1200, "nl": 1200, "m": 1900, "n": 2000,
              "tsteps": 500, "nx": 1000, "ny": 1200, "tmax": 500},
}
# 3-D and triangular kernels get their own extents (n is the side of the cube / matrix)
OVERRIDES = {"heat_3d": {"n": 120}, "lu": {}, "cholesky": {}}


def load_kernels():
    spec = importlib.util.spec_from_file_location("polybench_scripts",
                                                  ROOT / "tests" / "polybench_scripts.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.KERNELS


def module_for(sch: pl.Schedule, extra_flags: tuple[str, ...] = ()) -> Module:
    kernel = lower(sch.program, sch.state.root)
    source = generate_c(kernel)
    library = compile_c(source, name=kernel.name, extra_flags=extra_flags)
    return Module(library, entry=kernel.name, args=kernel.args, params=kernel.params,
                  source=source, target="c")


def arguments(prog: pl.Program, sizes: dict[str, int], rng: np.random.Generator):
    out = []
    for name in prog.args:
        shape = tuple(evaluate(d, sizes) for d in prog.buffer(name).shape)
        a = rng.random(shape)
        if prog.name in ("lu", "cholesky"):
            a = a @ a.T + shape[0] * np.eye(shape[0])
        out.append(a)
    return out


def timed(mod: Module, args, sizes) -> tuple[float, list[np.ndarray]]:
    work = [a.copy() for a in args]
    t = time.perf_counter()
    mod(*work, **sizes)
    return time.perf_counter() - t, work


def measure(mods: dict[str, Module], args, sizes, repeat: int):
    """Median time of each module over ``repeat`` rounds; the modules take turns within a
    round (the machine is shared: a slow phase hits every variant alike). One warm-up call
    each (compilation, page faults, OpenMP start-up)."""
    samples: dict[str, list[float]] = {key: [] for key in mods}
    results: dict[str, list[np.ndarray]] = {}
    for key, mod in mods.items():
        _, results[key] = timed(mod, args, sizes)
    for _ in range(repeat):
        for key, mod in mods.items():
            samples[key].append(timed(mod, args, sizes)[0])
    return {key: statistics.median(v) for key, v in samples.items()}, results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="")
    opts = ap.parse_args()
    kernels = load_kernels()
    if opts.only:
        kernels = [k for k in kernels if k.name in opts.only.split(",")]
    rng = np.random.default_rng(0)
    print(f"{'kernel':10} {'default':>9} {'auto':>9} {'plain-O3':>9} {'graphite':>9} "
          f"{'auto/O3':>8} {'auto/graph':>10}  equal")
    ratios_o3, ratios_graphite = [], []
    for prog in kernels:
        sizes = {p: v for p, v in {**SIZES[opts.size], **OVERRIDES.get(prog.name, {})}.items()
                 if p in prog.params}
        args = arguments(prog, sizes, rng)
        plain = pl.Schedule(prog)
        mods = {"default": pl.build(plain), "auto": pl.build(pl.auto_schedule(prog)),
                "plain": module_for(plain), "graphite": module_for(plain, GRAPHITE)}
        times, results = measure(mods, args, sizes, opts.repeat)
        equal = all(np.allclose(g, r, rtol=1e-8, atol=1e-8)
                    for key in ("default", "auto", "graphite")
                    for g, r in zip(results[key], results["plain"]))
        r_o3, r_gr = times["plain"] / times["auto"], times["graphite"] / times["auto"]
        ratios_o3.append(r_o3)
        ratios_graphite.append(r_gr)
        print(f"{prog.name:10} {times['default']:9.4f} {times['auto']:9.4f} "
              f"{times['plain']:9.4f} {times['graphite']:9.4f} {r_o3:8.2f} {r_gr:10.2f}  "
              f"{'yes' if equal else 'NO'}", flush=True)

    def geomean(xs: list[float]) -> float:
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
    print(f"geometric mean speed-up of auto_schedule: {geomean(ratios_o3):.2f}x over plain "
          f"-O3, {geomean(ratios_graphite):.2f}x over Graphite")


if __name__ == "__main__":
    sys.exit(main())
