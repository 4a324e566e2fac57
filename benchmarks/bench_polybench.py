# SPDX-License-Identifier: Apache-2.0
"""The 30 PolyBench/C 4.2.1 kernels as written, built by polyloop (``pl.auto_schedule``, and
``pl.tune``), against the same C source compiled by gcc -O3 -march=native and by gcc's
polyhedral optimizer Graphite, in one run.

    python benchmarks/bench_polybench.py [--dataset MEDIUM|LARGE] [--threads 1,2]
        [--kernels gemm,lu,fdtd-2d] [--tune 40] [--polybench DIR] [--seconds 2]

The kernels are the Python transcriptions in ``tests/polybench/kernels.py`` (each the C
function's loops statement for statement, checked there at small sizes). The C reference is
PolyBench as distributed (``--polybench``, default ``$POLYBENCH_DIR`` or ``../shared/polybench``
next to the repository), each kernel's ``.c`` file with ``utilities/polybench.c``, compiled
into a shared library: its ``init_array`` makes the inputs of every variant, and every
variant's results are compared with the C kernel's (``ok``: ``rounding`` where only reordered
sums differ: the loops as written, polyloop's default schedule, agree). Every variant is timed the same
way: one call of the kernel function on fresh copies of the inputs (argument checks and copies
outside the timer); the variants take turns within a round, so a slow phase of a shared
machine hits all alike; times are medians over the rounds.

Columns per thread count T: ``O3`` (gcc -O3, one thread), ``graphite`` (Graphite, T threads),
``auto`` and ``tune`` (polyloop, T threads), and speed-ups over O3. ``build`` is the CPU
seconds ``auto_schedule`` plus ``pl.build`` took (compiling included, fresh cache); ``tune s``
the wall seconds of ``pl.tune``. The clock is by default the process's CPU time for one thread
(robust on a shared machine) and wall time for more (CPU time would add the threads up).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import polyloop as pl
from polyloop import config
from polyloop.runtime.openmp import OPENMP_RUNTIME, load_library

sys.path.insert(0, str(Path(__file__).resolve().parent))
import polybench_ref as ref  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from polybench.kernels import KERNELS  # noqa: E402


def default_polybench() -> Path:
    return Path(os.environ.get("POLYBENCH_DIR") or ROOT.parent / "shared" / "polybench")


@dataclasses.dataclass
class Case:
    """One kernel: its script, the C source and the arguments of a polyloop call."""
    fn: object
    program: pl.Program
    src: ref.Source
    pairs: list[tuple[str, ref.Param]]      # (the script's parameter, the C kernel's)

    def named(self, values: dict) -> dict:
        """The keyword arguments of a polyloop call on the C program's ``values``."""
        out = {}
        for py, c in self.pairs:
            if c.kind == "array":
                out[py] = np.ascontiguousarray(values[c.name],
                                               dtype=self.program.buffer(py).dtype.numpy)
            elif c.kind == "scalar" or py in self.program.params:
                out[py] = values[c.name]
        return out


def polyloop_call(mod, named: dict):
    """A timed call of ``mod``'s compiled function: the argument checks a call makes run
    here, outside the timer (the C kernel is called without any either)."""
    arrays, pointers, plan = mod._binder.bind((), named)
    args = mod._args_type(*pointers)
    return lambda: mod._fn(args, plan.params), arrays


def set_threads(threads: int) -> None:
    """Threads of polyloop's parallel loops (in this process and tuning's workers); loading
    the OpenMP runtime through polyloop keeps its choice of how threads wait (the Graphite
    code shares that runtime, and so the choice)."""
    config.CONFIG = dataclasses.replace(config.CONFIG, num_threads=threads)
    os.environ["POLYLOOP_NUM_THREADS"] = str(threads)
    load_library(OPENMP_RUNTIME).omp_set_num_threads(threads)


def rounds(case: Case, variants: dict, values: dict, seconds: float,
           clock=time.perf_counter, stat=statistics.median) -> tuple[dict, dict]:
    """Seconds per variant (``stat`` of the rounds' times by ``clock``), and each variant's
    results (the first round's)."""
    samples: dict[str, list[float]] = {k: [] for k in variants}
    results: dict[str, dict] = {}
    start = time.perf_counter()
    while True:
        for key, kind in variants.items():
            fresh = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}
            if kind[0] == "c":
                t = clock()
                kind[1].call(fresh)
                samples[key].append(clock() - t)
                results.setdefault(key, {p.name: fresh[p.name] for p in case.src.kernel
                                         if p.kind == "array"})
                continue
            run, arrays = polyloop_call(kind[1], case.named(fresh))
            t = clock()
            status = run()
            samples[key].append(clock() - t)
            assert status == 0, f"{key} failed with status {status}"
            by_name = dict(zip((b.name for b in kind[1].args), arrays))
            results.setdefault(key, {c.name: by_name[py] for py, c in case.pairs
                                     if c.kind == "array"})
        n = len(samples["O3"])
        if n >= 50 or (n >= 5 and time.perf_counter() - start > seconds):
            break
    return {k: stat(v) for k, v in samples.items()}, results


def agrees(got: dict, want: dict) -> bool:
    for name, w in want.items():
        g = got[name].astype(w.dtype)
        tol = 1e-3 if w.dtype == np.float32 else 1e-6
        scale = float(np.max(np.abs(w))) if w.size else 1.0
        if not np.allclose(g, w, rtol=tol, atol=tol * max(scale, 1e-30), equal_nan=True):
            return False
    return True


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the C compiler)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def as_written_agrees(case: Case, o3, values: dict) -> bool:
    """Whether polyloop's default schedule (the loops as written, sums in their order) gives
    the C program's results where a schedule does not: then the difference is rounding of
    reordered sums, amplified by the data (gramschmidt's matrix has fewer rows than columns)."""
    _, results = rounds(case, {"O3": ("c", o3), "default": ("pl", pl.build(case.program))},
                        values, 0.0)
    return agrees(results["default"], results["O3"])


def build_auto(case: Case) -> tuple[object, float]:
    """The auto-scheduled module and the CPU seconds ``auto_schedule`` and ``pl.build`` took
    (compiling included): on a shared machine, wall time counts the other processes too."""
    t = cpu_seconds()
    mod = pl.build(pl.auto_schedule(case.program))
    return mod, cpu_seconds() - t


def tuned(case: Case, trials: int, sizes: dict, work: Path):
    res = pl.tune(case.program, trials=trials, sizes=sizes, work_dir=str(work / case.fn.__name__))
    return res.build()


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="MEDIUM", choices=["MINI", "SMALL", "MEDIUM", "LARGE"])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--kernels", default="", help="comma-separated names (default: all 30)")
    ap.add_argument("--tune", type=int, default=40, help="pl.tune trials (0: no tuning)")
    ap.add_argument("--seconds", type=float, default=2.0, help="timing budget per kernel")
    ap.add_argument("--polybench", type=Path, default=default_polybench())
    ap.add_argument("--clock", choices=["auto", "wall", "cpu"], default="auto",
                    help="cpu: the process's CPU time (robust on a loaded machine, but with "
                    "several threads it sums them: use it for --threads 1); auto: cpu for "
                    "one thread, wall for more")
    ap.add_argument("--stat", choices=["median", "min"], default="median")
    ap.add_argument("--default", action="store_true",
                    help="also time polyloop's default schedule (the loops as written)")
    opts = ap.parse_args()
    if not (opts.polybench / "utilities" / "polybench.c").is_file():
        print(f"PolyBench/C not found at {opts.polybench}: pass --polybench DIR or set "
              "POLYBENCH_DIR; skipped")
        return
    threads = [int(t) for t in opts.threads.split(",")]
    clocks = {t: time.process_time if opts.clock == "cpu" or (opts.clock == "auto" and t == 1)
              else time.perf_counter for t in threads}
    # PolyBench's names (fdtd-2d, 2mm) or the scripts' (fdtd_2d, k2mm)
    wanted = {("k" + k if k[:1].isdigit() else k).replace("-", "_")
              for k in filter(None, opts.kernels.split(","))}
    unknown = wanted - {f.__name__ for f in KERNELS}
    if unknown:
        ap.error(f"unknown kernels {sorted(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="polybench-"))
    config.CONFIG = dataclasses.replace(config.CONFIG, cache_dir=work / "cache")
    kinds = ", ".join(f"{'CPU' if clocks[t] is time.process_time else 'wall'} time with {t}"
                      for t in threads)
    print(f"PolyBench/C {opts.dataset}, threads {threads}, {os.cpu_count()} CPUs; {opts.stat} "
          f"{kinds}, of interleaved single calls (load average at start: "
          f"{os.getloadavg()[0]:.1f})")
    cols = "".join(f" | {'graph' + str(t):>8} {'auto' + str(t):>8} {'tune' + str(t):>8} "
                   f"{'a/O3':>5} {'t/O3':>5} {'g/O3':>5}" for t in threads)
    if opts.tune:
        print(f"pl.tune: {opts.tune} trials per kernel (once, with {max(threads)} threads), "
              f"records in {work}/<kernel>/")
    print(f"{'kernel':15} {'O3 ms':>9}{cols} | build tune s ok")
    ratios: dict[str, list[float]] = {}
    builds, accepted = [], 0
    for fn in KERNELS:
        if wanted and fn.__name__ not in wanted:
            continue
        src = ref.read(opts.polybench, fn.__name__, opts.dataset)
        program = pl.script(fn)
        names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
        case = Case(fn, program, src, list(zip(names, src.kernel)))
        o3 = ref.Library(opts.polybench, src, opts.dataset, ref.O3, work)
        values = o3.inputs()
        sizes = {py: values[c.name] for py, c in case.pairs if py in program.params}
        try:
            set_threads(max(threads))
            auto, seconds = build_auto(case)
            accepted += 1
        except pl.PolyloopError as e:
            print(f"{fn.__name__:15} refused: {e}")
            continue
        builds.append(seconds)
        autos = {}          # each built for the threads it runs on
        for t in threads:
            set_threads(t)
            autos[t] = auto if t == max(threads) else build_auto(case)[0]
        row, ok = f"{fn.__name__:15}", True
        tune_mod, tune_seconds = None, float("nan")
        for t in threads:
            set_threads(t)
            if opts.tune and tune_mod is None:
                set_threads(max(threads))
                start = time.perf_counter()
                tune_mod = tuned(case, opts.tune, sizes, work)
                tune_seconds = time.perf_counter() - start
                set_threads(t)
            graph = ref.Library(opts.polybench, src, opts.dataset, ref.graphite_flags(t), work)
            variants = {"O3": ("c", o3), "graphite": ("c", graph), "auto": ("pl", autos[t])}
            if tune_mod is not None:
                variants["tune"] = ("pl", tune_mod)
            if opts.default:
                variants["default"] = ("pl", pl.build(program))
            times, results = rounds(case, variants, values, opts.seconds, clocks[t],
                                    {"median": statistics.median, "min": min}[opts.stat])
            ok &= all(agrees(results[k], results["O3"]) for k in results if k != "O3")
            if t == threads[0]:
                row += f" {times['O3'] * 1e3:9.3f}"
            r = {k: times["O3"] / times[k] for k in times}
            for k in ("auto", "tune", "graphite"):
                if k in r:
                    ratios.setdefault(f"{k}{t}", []).append(r[k])
            row += (f" | {times['graphite'] * 1e3:8.3f} {times['auto'] * 1e3:8.3f} "
                    f"{times.get('tune', float('nan')) * 1e3:8.3f} {r['auto']:5.2f} "
                    f"{r.get('tune', float('nan')):5.2f} {r['graphite']:5.2f}")
        extra = f" default/O3 {r['default']:.2f}" if "default" in r else ""
        verdict = "yes" if ok else ("rounding" if as_written_agrees(case, o3, values) else "NO")
        print(f"{row} | {seconds:5.2f} {tune_seconds:6.1f} {verdict}{extra}", flush=True)
    print(f"accepted as written: {accepted} / {accepted + (len(wanted or KERNELS) - accepted)}")
    for key in sorted(ratios):
        xs = ratios[key]
        print(f"{key:10} over gcc -O3: geomean {geomean(xs):.2f}x, worst {min(xs):.2f}x")
    if builds:
        print(f"build time of auto-scheduled kernels: max {max(builds):.2f} s, "
              f"median {statistics.median(builds):.2f} s")


if __name__ == "__main__":
    sys.exit(main())
