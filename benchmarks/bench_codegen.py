# SPDX-License-Identifier: Apache-2.0
"""Code-generation time of seed 000's kernels: ``make_kernel`` -> transformations -> OpenCL
source text, in polyloop and, in the same run, in Loo.py.

    python benchmarks/bench_codegen.py                                  # polyloop (+ Loo.py if
                                                                        #   importable here)
    python benchmarks/bench_codegen.py --loopy-python /tmp/loopyenv/bin/python

Loo.py (``loopy==2025.2``) needs ``islpy<2026`` while polyloop may run on islpy 2026, so it is
usually measured in its own virtual environment (``python -m venv /tmp/loopyenv &&
/tmp/loopyenv/bin/pip install loopy==2025.2 "islpy<2026" pyopencl``): this script runs itself
there with ``--only-loopy`` and reads the timings back. Without Loo.py, polyloop's timings are
printed alone with the reason.

Kernels (as in Loo.py's tutorial and PEERS.md):
- double: ``out[i] = 2*a[i]`` split by 128 into g.0/l.0;
- matmul: ``c[i, j] = sum(k, a[i, k]*b[k, j])``, i and j split by 16 into g/l, k split by 16;
- matmul+prefetch: the same with ``add_prefetch`` of a and b into local memory.

Each timing covers everything from ``make_kernel`` to the source text. ``first`` is the first
run in the process (imports done, caches cold); ``median`` is over ``--repeat`` later runs, with
polyloop's isl parse caches cleared before each (Loo.py's caching disabled). The two are
measured in ``--rounds`` alternating rounds and each keeps its best median, so that a burst of
other work on a shared machine does not favour either. Loo.py needs
explicit dtypes and ``add_inames_for_unused_hw_axes`` after prefetching; both are part of its
timed work.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

KERNELS = ("double", "matmul", "matmul+prefetch")


# polyloop -----------------------------------------------------------------------------------

def polyloop_source(kernel: str) -> str:
    import polyloop as pl
    from polyloop.codegen.opencl import generate_opencl
    from polyloop.lower.launches import lower_device
    from polyloop.schedule.kernel import schedule_of
    if kernel == "double":
        knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
        knl = pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")
    else:
        knl = pl.make_kernel("{ [i, j, k] : 0 <= i, j, k < n }",
                             "c[i, j] = sum(k, a[i, k]*b[k, j])")
        knl = pl.split_iname(knl, "i", 16, outer_tag="g.1", inner_tag="l.1")
        knl = pl.split_iname(knl, "j", 16, outer_tag="g.0", inner_tag="l.0")
        knl = pl.split_iname(knl, "k", 16)
        if kernel == "matmul+prefetch":
            knl = pl.add_prefetch(knl, "a", ["i_inner", "k_inner"])
            knl = pl.add_prefetch(knl, "b", ["k_inner", "j_inner"])
    sch = schedule_of(knl)
    return generate_opencl(lower_device(sch.program, sch.state.root))


def clear_polyloop_caches() -> None:
    from polyloop.poly import access, caches
    access._accesses_cached.cache_clear()
    caches.clear_all()      # the schedule maps, isl_util's parsed and printed objects, ...


# Loo.py -------------------------------------------------------------------------------------

def loopy_source(kernel: str) -> str:
    import loopy as lp
    import numpy as np
    target = lp.OpenCLTarget()
    if kernel == "double":
        knl = lp.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]", target=target)
        knl = lp.add_dtypes(knl, {"a": np.float32})
        knl = lp.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")
    else:
        knl = lp.make_kernel("{ [i, j, k] : 0 <= i, j, k < n }",
                             "c[i, j] = sum(k, a[i, k]*b[k, j])", target=target)
        knl = lp.add_dtypes(knl, {"a": np.float32, "b": np.float32})
        knl = lp.split_iname(knl, "i", 16, outer_tag="g.1", inner_tag="l.1")
        knl = lp.split_iname(knl, "j", 16, outer_tag="g.0", inner_tag="l.0")
        knl = lp.split_iname(knl, "k", 16)
        if kernel == "matmul+prefetch":
            knl = lp.add_prefetch(knl, "a", ["i_inner", "k_inner"], default_tag="l.auto")
            knl = lp.add_prefetch(knl, "b", ["k_inner", "j_inner"], default_tag="l.auto")
            knl = lp.add_inames_for_unused_hw_axes(knl)
    return lp.generate_code_v2(knl).device_code()


def _loopy_version() -> str:
    from importlib.metadata import version
    return version("loopy")


# timing -------------------------------------------------------------------------------------

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def measure(make, clear, repeat: int, clock: str = "wall") -> dict[str, dict[str, float]]:
    now = CLOCKS[clock]
    out = {}
    for kernel in KERNELS:
        clear()
        start = now()
        make(kernel)
        first = now() - start
        times = []
        for _ in range(repeat):
            clear()
            start = now()
            make(kernel)
            times.append(now() - start)
        out[kernel] = {"first": first, "median": statistics.median(times)}
    return out


def loopy_timings(python: str | None, repeat: int, clock: str) -> tuple[dict | None, str]:
    """Loo.py's timings (here if importable, else in ``python``), or None and why not."""
    try:
        import loopy as lp
        lp.set_caching_enabled(False)
        return (measure(loopy_source, lambda: None, repeat, clock),
                f"loopy {_loopy_version()} (here)")
    except ImportError:
        pass
    if python is None:
        return None, ("Loo.py is not importable in this environment (loopy==2025.2 needs "
                      "islpy<2026); give --loopy-python PATH of an environment that has it")
    proc = subprocess.run([python, __file__, "--only-loopy", "--repeat", str(repeat),
                           "--clock", clock], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"Loo.py failed in {python}: {proc.stderr.strip().splitlines()[-1:]}"
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["timings"], data["version"]


def best(rounds: list[dict]) -> dict[str, dict[str, float]]:
    """Per kernel: the first-run time of the first round, the lowest median over the rounds
    (the round least disturbed by other work on the machine)."""
    return {k: {"first": rounds[0][k]["first"], "median": min(r[k]["median"] for r in rounds)}
            for k in KERNELS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds (polyloop, then Loo.py); the best median is kept")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall-clock time, or the process's CPU time (steadier on a busy machine)")
    ap.add_argument("--loopy-python", default=None,
                    help="a Python interpreter whose environment has loopy==2025.2")
    ap.add_argument("--only-loopy", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.only_loopy:
        import loopy as lp
        lp.set_caching_enabled(False)
        print(json.dumps({"version": f"loopy {_loopy_version()}",
                          "timings": measure(loopy_source, lambda: None, args.repeat,
                                             args.clock)}))
        return
    import islpy
    import polyloop  # noqa: F401 - the import is not part of the timings
    ours_rounds: list[dict] = []
    theirs_rounds: list[dict] = []
    about = ""
    for _ in range(max(1, args.rounds)):
        ours_rounds.append(measure(polyloop_source, clear_polyloop_caches, args.repeat,
                                   args.clock))
        t, about = loopy_timings(args.loopy_python, args.repeat, args.clock)
        if t is not None:
            theirs_rounds.append(t)
    ours = best(ours_rounds)
    theirs = best(theirs_rounds) if theirs_rounds else None
    print(f"code generation, make_kernel -> OpenCL source (islpy {islpy.__version__} for "
          f"polyloop; {about}); best median of {len(ours_rounds)} interleaved round(s) of "
          f"{args.repeat}, {args.clock} time")
    print(f"{'kernel':<18}{'polyloop first':>16}{'median':>10}{'Loo.py first':>16}"
          f"{'median':>10}{'speed-up':>10}")
    for kernel in KERNELS:
        p = ours[kernel]
        row = f"{kernel:<18}{p['first'] * 1e3:>13.1f} ms{p['median'] * 1e3:>7.1f} ms"
        if theirs is not None:
            t = theirs[kernel]
            row += f"{t['first'] * 1e3:>13.1f} ms{t['median'] * 1e3:>7.1f} ms"
            row += f"{t['median'] / p['median']:>9.1f}x"
        print(row)
    if theirs is None:
        print(f"Loo.py not measured: {about}")


if __name__ == "__main__":
    main()
