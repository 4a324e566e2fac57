# SPDX-License-Identifier: Apache-2.0
"""Tuning from the bare computation: ``pl.tune`` on matmul (float32, n^3) or conv2d (3 x 3,
(1, 64, 56, 56) -> 64 channels, padding 1) with no hand schedule, then the tuned kernel timed
next to NumPy (OpenBLAS; matmul only), PyTorch and polyloop's hand schedule
(``polyloop.ops``), all in this one run.

    python benchmarks/bench_tune.py                         # matmul n = 1024, 200 trials
    python benchmarks/bench_tune.py --n 512 --trials 50 --work-dir /tmp/tune-mm
    python benchmarks/bench_tune.py --workload conv2d --trials 100
    python benchmarks/bench_tune.py --trials 0 --work-dir /tmp/tune-mm   # time the recorded best
    python benchmarks/bench_tune.py --workload polybench --trials 20 --size small
    python benchmarks/bench_tune.py --workload polybench --trials 40 --size polybench-medium
    python benchmarks/bench_tune.py --target opencl --n 512 --trials 30   # the GPU space

``--workload polybench`` tunes gemm, 2mm, syrk, jacobi-2d, heat-3d and seidel-2d (the
``@pl.script`` loops of ``tests/polybench_scripts.py``, float64) for ``--trials`` each and
times each tuned kernel next to ``pl.auto_schedule``'s and the loops as written (the default
schedule: gcc -O3 -march=native), with the geometric means; ``--size polybench-medium`` is
PolyBench 4.2's MEDIUM data set.

The tuning records go to ``--work-dir`` (a second run resumes from them). Each time is the
median of ``--repeat`` timings after warm-up; the rows are timed in ``--rounds`` interleaved
rounds and the best median kept (a shared machine's bursts of load then land on no one row).
``it / tuned`` is a row's time divided by the tuned kernel's: > 1 means the tuned kernel is
faster.
With ``--tvm`` (the default for matmul when Apache TVM imports), TVM's MetaSchedule tunes the
same matmul with the same number of trials (``--tvm-trials``) in a process of its own
(``tvm_metaschedule.py``), and its tuned kernel is timed in the rounds with the other rows;
the tuning wall time per trial of both is printed with their ratio. A MetaSchedule failure is
printed and the benchmark goes on without its row.

    python benchmarks/bench_tune.py --n 256 --trials 16          # a tiny run, TVM included
    python benchmarks/bench_tune.py --no-tvm
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import polyloop as pl
from polyloop.ir.shapes import evaluate
from polyloop.ops import (MATMUL_GPU_LADDER, conv2d_nchw, matmul, schedule_conv2d_nchw,
                          schedule_matmul)


def _median_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _matmul(n: int, rng: np.random.Generator):
    """(the computation, its inputs, a check of its output, the reference rows, flops)."""
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    rows = {"NumPy": lambda: a @ b}
    torch = _torch()
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        rows["PyTorch"] = lambda: torch.matmul(ta, tb)
    hand = pl.build(schedule_matmul(matmul(A, B)))
    c = np.empty((n, n), "float32")
    rows["polyloop hand schedule"] = lambda: hand(a, b, c)
    return C, (a, b), a @ b, rows, 2.0 * n ** 3


def _gpu_hand_rows(n: int, target: str, inputs: tuple) -> dict:
    """polyloop's hand-written GPU matmul schedules (``polyloop.ops``), built for ``target``."""
    c = np.empty((n, n), "float32")
    rows = {}
    for step in ("thread_tile", "shared"):
        mod = pl.build(MATMUL_GPU_LADDER[step](n, n, n), target=target)
        rows[f"hand GPU schedule: {step}"] = lambda mod=mod: mod(*inputs, c)
    return rows


def _conv2d(rng: np.random.Generator):
    X = pl.placeholder((1, 64, 56, 56), "float32", name="X")
    W = pl.placeholder((64, 64, 3, 3), "float32", name="W")
    x = rng.standard_normal((1, 64, 56, 56)).astype("float32")
    w = rng.standard_normal((64, 64, 3, 3)).astype("float32")
    hand = pl.build(schedule_conv2d_nchw(conv2d_nchw(X, W, 1)))
    expected = hand(x, w)
    rows = {"polyloop hand schedule": lambda: hand(x, w)}
    torch = _torch()
    if torch is not None:
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        rows["PyTorch"] = lambda: torch.nn.functional.conv2d(tx, tw, padding=1)
        expected = torch.nn.functional.conv2d(tx, tw, padding=1).numpy()
    return conv2d_nchw(X, W, 1), (x, w), expected, rows, 2.0 * 64 * 64 * 9 * 56 * 56


POLYBENCH = ("gemm", "two_mm", "syrk", "jacobi_2d", "heat_3d", "seidel_2d")
POLYBENCH_SIZES = {
    "small": {"ni": 200, "nj": 220, "nk": 240, "nl": 210, "m": 390, "n": 400, "tsteps": 20},
    "medium": {"ni": 800, "nj": 900, "nk": 1000, "nl": 1100, "m": 1900, "n": 2000,
               "tsteps": 100},
}
CUBE_SIDE = {"small": 40, "medium": 120}     # heat-3d's n
# PolyBench 4.2's MEDIUM data set, per kernel (its sizes differ from kernel to kernel)
POLYBENCH_MEDIUM = {
    "gemm": {"ni": 200, "nj": 220, "nk": 240},
    "two_mm": {"ni": 180, "nj": 190, "nk": 210, "nl": 220},
    "syrk": {"n": 240, "m": 200},
    "jacobi_2d": {"n": 250, "tsteps": 100},
    "heat_3d": {"n": 40, "tsteps": 100},
    "seidel_2d": {"n": 400, "tsteps": 100},
}


def _polybench_sizes(prog, name: str, size: str) -> dict[str, int]:
    if size == "polybench-medium":
        return dict(POLYBENCH_MEDIUM[name])
    sizes = {p: v for p, v in POLYBENCH_SIZES[size].items() if p in prog.params}
    if name == "heat_3d":
        sizes["n"] = CUBE_SIDE[size]
    return sizes


def _polybench(args: argparse.Namespace) -> None:
    spec = importlib.util.spec_from_file_location(
        "polybench_scripts", Path(__file__).resolve().parent.parent / "tests" /
        "polybench_scripts.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    kernels = {k.name: k for k in module.KERNELS}
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="bench-tune-pb-")
    rng = np.random.default_rng(0)
    print(f"PolyBench ({args.size}), {args.trials} trials each, into {work_dir}; gcc -O3: the "
          "loops as written (the default schedule, -O3 -march=native)")
    print(f"{'kernel':10} {'-O3 ms':>9} {'auto ms':>9} {'tuned ms':>9} {'-O3/tuned':>10} "
          f"{'auto/tuned':>10}  tuning s  statuses")
    ratios: dict[str, list[float]] = {"-O3": [], "auto": []}
    for name in args.only.split(",") if args.only else POLYBENCH:
        prog = kernels[name]
        sizes = _polybench_sizes(prog, name, args.size)
        start = time.perf_counter()
        if args.trials:
            res = pl.tune(prog, trials=args.trials, sizes=sizes, work_dir=work_dir,
                          timeout=30.0)
            tuned, statuses = res.build(), [r.status.value for r in res.history]
        else:       # the best schedule recorded in --work-dir
            tuned, statuses = pl.build(prog, database=work_dir), []
        wall = time.perf_counter() - start
        mods = {"-O3": pl.build(prog), "auto": pl.build(pl.auto_schedule(prog)),
                "tuned": tuned}
        arrays = [rng.random(tuple(evaluate(d, sizes) for d in prog.buffer(a).shape))
                  for a in prog.args]
        _same_results(name, mods, arrays, sizes)
        best = {key: float("inf") for key in mods}
        for _ in range(args.rounds):
            for key, mod in mods.items():
                work = [a.copy() for a in arrays]
                best[key] = min(best[key], _median_time(lambda: mod(*work, **sizes),
                                                        args.repeat))
        for key in ratios:
            ratios[key].append(best[key] / best["tuned"])
        counts = ", ".join(f"{s} {statuses.count(s)}" for s in sorted(set(statuses)))
        print(f"{name:10} {best['-O3'] * 1e3:9.2f} {best['auto'] * 1e3:9.2f} "
              f"{best['tuned'] * 1e3:9.2f} {ratios['-O3'][-1]:9.2f}x {ratios['auto'][-1]:9.2f}x"
              f"  {wall:8.0f}  {counts}", flush=True)
    for key, rs in ratios.items():
        geomean = math.exp(sum(math.log(r) for r in rs) / len(rs))
        print(f"geometric mean of {key} time / the tuned time: {geomean:.2f}x")


def _same_results(name: str, mods: dict, arrays: list, sizes: dict) -> None:
    """One call of each module on the same inputs: the results must agree with the loops as
    written (a benchmark of a wrong kernel is worthless)."""
    outs = {}
    for key, mod in mods.items():
        work = [a.copy() for a in arrays]
        mod(*work, **sizes)
        outs[key] = work
    for key, got in outs.items():
        for ref, arr in zip(outs["-O3"], got):
            np.testing.assert_allclose(arr, ref, rtol=1e-9, atol=1e-9,
                                       err_msg=f"{name}: {key} differs from the loops as written")


def _torch():
    try:
        import torch
    except ImportError:
        print("PyTorch not installed: its row is left out")
        return None
    return torch


def _tvm_tune(args: argparse.Namespace, work_dir: str) -> dict:
    """MetaSchedule's run in its own process: its JSON answer, or ``{"error": why}``."""
    script = Path(__file__).resolve().parent / "tvm_metaschedule.py"
    trials = args.tvm_trials or args.trials
    cmd = [sys.executable, str(script), "--n", str(args.n), "--trials", str(trials),
           "--cores", str(os.cpu_count() or 1), "--work-dir", os.path.join(work_dir, "tvm")]
    print(f"TVM MetaSchedule: {trials} trials (its log: {work_dir}/tvm/logs)", flush=True)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.tvm_timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"MetaSchedule did not finish within {args.tvm_timeout:g} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return {"error": f"exit code {done.returncode}: " + " | ".join(tail)}
    return json.loads(lines[-1])


def _tvm_row(result: dict, inputs: tuple, n: int):
    """A function calling MetaSchedule's exported kernel here, or None (then its own time)."""
    if not result.get("library"):
        return None
    # TVM's worker threads spin after each call by default, taking the cores from the rows
    # timed after its row; they sleep at once with a spin count of 0 (read at their start)
    os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "0")
    try:
        import tvm
        lib = tvm.runtime.load_module(result["library"])
        dev = tvm.cpu(0)
        ta, tb = (tvm.runtime.tensor(x, dev) for x in inputs)
        tc = tvm.runtime.tensor(np.empty((n, n), "float32"), dev)
        fn = lib["main"]
        fn(ta, tb, tc)
    except Exception as e:  # noqa: BLE001 - the benchmark goes on with TVM's own figure
        print(f"TVM's tuned library does not load here ({type(e).__name__}: {e}); its row is "
              "the time measured in its own process")
        return None
    return lambda: fn(ta, tb, tc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("matmul", "conv2d", "polybench"), default="matmul")
    ap.add_argument("--target", choices=("c", "opencl", "cuda"), default="c",
                    help="matmul: tune for this target (opencl/cuda: the GPU space, next to "
                         "the hand-written GPU schedules of polyloop.ops)")
    ap.add_argument("--size", choices=[*sorted(POLYBENCH_SIZES), "polybench-medium"],
                    default="small", help="polybench: polybench-medium is PolyBench's MEDIUM "
                                          "data set, per kernel")
    ap.add_argument("--only", default="", help="polybench: kernels to run, e.g. gemm,syrk")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=200, help="0: time the recorded best only")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--strategy", default="evolutionary")
    ap.add_argument("--tvm", action=argparse.BooleanOptionalAction,
                    default=importlib.util.find_spec("tvm") is not None,
                    help="matmul: tune with TVM MetaSchedule too (default: when TVM imports)")
    ap.add_argument("--tvm-trials", type=int, default=0, help="default: --trials")
    ap.add_argument("--tvm-timeout", type=float, default=7200.0,
                    help="seconds MetaSchedule may take in all")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.workload == "polybench":
        _polybench(args)
        return
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="bench-tune-")
    rng = np.random.default_rng(0)
    out, inputs, expected, rows, flops = (_matmul(args.n, rng) if args.workload == "matmul"
                                          else _conv2d(rng))
    if args.target != "c":
        if args.workload != "matmul":
            raise SystemExit("--target opencl/cuda is for --workload matmul")
        rows |= _gpu_hand_rows(args.n, args.target, inputs)
    name = f"matmul {args.n}^3" if args.workload == "matmul" else "conv2d 3x3 (1,64,56,56)->64"
    print(f"{name} float32 on {os.cpu_count()} cores, target {args.target}; {args.trials} "
          f"trials ({args.strategy}) into {work_dir}")
    tuned, per_trial = _tune(args, out, work_dir, flops)
    print("best trace:\n" + str(tuned.schedule.trace))
    got = tuned(*inputs)
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-2)
    rows = {"polyloop tuned": lambda: tuned(*inputs)} | rows
    tvm_seconds = None
    if args.tvm and args.workload == "matmul" and args.target == "c":
        tvm_seconds, tvm_per_trial = _tvm(args, work_dir, inputs, rows)
        if tvm_per_trial and per_trial:
            print(f"tuning wall time per trial: polyloop {per_trial:.2f} s, TVM MetaSchedule "
                  f"{tvm_per_trial:.2f} s (TVM / polyloop: {tvm_per_trial / per_trial:.2f}x)")
    elif args.tvm:
        print("TVM MetaSchedule is run for --workload matmul --target c only")
    _table(args, rows, flops, tvm_seconds)


def _tune(args: argparse.Namespace, out, work_dir: str, flops: float):
    """The tuned module and the tuning wall time per trial (None with --trials 0)."""
    if not args.trials:
        return pl.build(out, target=args.target, database=work_dir), None
    start = time.perf_counter()
    res = pl.tune(out, target=args.target, trials=args.trials, strategy=args.strategy,
                  work_dir=work_dir,
                  timeout=20.0, progress=_printer(args.trials, flops))
    wall = time.perf_counter() - start
    statuses = [r.status.value for r in res.history]
    per_trial = wall / max(1, len(res.history))
    print(f"tuning: {wall:.0f} s wall, {per_trial:.2f} s per trial; "
          + ", ".join(f"{s} {statuses.count(s)}" for s in sorted(set(statuses))))
    return res.build(), per_trial


def _tvm(args: argparse.Namespace, work_dir: str, inputs: tuple, rows: dict):
    """Tune with MetaSchedule; add its kernel to ``rows`` when it loads here. Returns (its
    time measured in its own process, or None; its tuning wall time per trial, or None)."""
    result = _tvm_tune(args, work_dir)
    if "error" in result:
        print(f"TVM MetaSchedule failed, its row is left out: {result['error']}")
        return None, None
    per_trial = result["tuning_s"] / max(1, result["trials"])
    print(f"TVM MetaSchedule ({result['target']}): {result['tuning_s']:.0f} s wall, "
          f"{per_trial:.2f} s per trial; its kernel {result['seconds'] * 1e3:.2f} ms")
    row = _tvm_row(result, inputs, args.n)
    if row is not None:
        rows["TVM MetaSchedule tuned"] = row
        return None, per_trial
    return result["seconds"], per_trial


def _table(args: argparse.Namespace, rows: dict, flops: float, tvm_seconds: float | None):
    best = {row: float("inf") for row in rows}
    for _ in range(args.rounds):
        for row, fn in rows.items():
            best[row] = min(best[row], _median_time(fn, args.repeat))
    if tvm_seconds is not None:     # timed in MetaSchedule's process, not in these rounds
        best["TVM MetaSchedule tuned (its process)"] = tvm_seconds
    print(f"\n{'implementation':36} {'ms':>9} {'GFLOP/s':>9} {'it / tuned':>11}")
    for row, t in best.items():
        print(f"{row:36} {t * 1e3:9.2f} {flops / t / 1e9:9.1f} "
              f"{best[row] / best['polyloop tuned']:10.2f}x")
    tvm = [t for row, t in best.items() if row.startswith("TVM")]
    if tvm:
        print(f"polyloop tuned / TVM tuned speed: {tvm[0] / best['polyloop tuned']:.2f}x "
              "(goal: >= 3x)")


def _printer(trials: int, flops: float):
    last = [0.0]

    def show(p) -> None:
        if p.trials == trials or time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            best = f"{p.best_seconds * 1e3:.2f} ms ({flops / p.best_seconds / 1e9:.1f} " \
                   "GFLOP/s)" if p.best_seconds else "-"
            print(f"  {p.trials}/{trials} trials, {p.elapsed:.0f} s, best {best}", flush=True)
    return show


if __name__ == "__main__":
    main()
