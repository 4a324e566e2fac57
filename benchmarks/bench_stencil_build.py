# SPDX-License-Identifier: Apache-2.0
"""How long time-tiled PolyBench stencils take to schedule, print and build.

    cd tests && PYTHONPATH=../src:. python ../benchmarks/bench_stencil_build.py
    cd tests && PYTHONPATH=../src:. python ../benchmarks/bench_stencil_build.py \\
        --kernels jacobi_1d --tiles 16,32 --separate 60

For each kernel and tile: ``pl.auto_schedule(kernel, fusion="max", tile=T)``, then ``str`` of
the schedule (isl's AST build without full-tile isolation) and ``pl.build`` (lowering with
isolation, C generation, gcc), in seconds, sizes symbolic. With ``--separate S`` the print is
timed a second time in the same run the way polyloop built it before tiled chains were joined
(one isl band per loop, ``poly.chains`` skipped), given at most S seconds (``-`` where it
needed more), and the ratio of the two is printed.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import polyloop as pl
from polybench_scripts import KERNELS as POLYBENCH   # tests/ on the path, as shown above
from polyloop.poly import astgen

KERNELS = ("jacobi_1d", "jacobi_2d", "heat_3d", "seidel_2d", "fdtd_2d")


def _kernel(name: str):
    return next(k for k in POLYBENCH if k.name == name)


def _separate_print(name: str, tile: int, out) -> None:
    sch = pl.auto_schedule(_kernel(name), fusion="max", tile=tile)
    astgen.join_chains = lambda schedule, root: schedule   # the build before chains joined
    start = time.perf_counter()
    str(sch)
    out.put(time.perf_counter() - start)


def separate_print(name: str, tile: int, limit: float) -> float | None:
    """Seconds to print with one band per loop, in a child process stopped after ``limit``."""
    out: mp.Queue = mp.Queue()
    child = mp.Process(target=_separate_print, args=(name, tile, out))
    child.start()
    child.join(limit)
    if child.is_alive():
        child.terminate()
        child.join()
        return None
    return out.get()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--tiles", default="16,32,64")
    ap.add_argument("--separate", type=float, default=0.0,
                    help="also time the print with one band per loop, for at most this long")
    args = ap.parse_args()
    print(f"{'kernel':10s} {'tile':>4s} {'auto':>6s} {'print':>6s} {'build':>6s}"
          + (f" {'separate':>9s} {'ratio':>6s}" if args.separate else ""))
    for name in args.kernels.split(","):
        for tile in (int(t) for t in args.tiles.split(",")):
            t0 = time.perf_counter()
            sch = pl.auto_schedule(_kernel(name), fusion="max", tile=tile)
            t1 = time.perf_counter()
            str(sch)
            t2 = time.perf_counter()
            pl.build(sch)
            t3 = time.perf_counter()
            row = f"{name:10s} {tile:4d} {t1 - t0:6.2f} {t2 - t1:6.2f} {t3 - t2:6.2f}"
            if args.separate:
                old = separate_print(name, tile, args.separate)
                row += (f" {old:9.2f} {old / (t2 - t1):5.1f}x" if old is not None
                        else f" {'-':>9s} {'-':>6s}")
            print(row, flush=True)


if __name__ == "__main__":
    main()
