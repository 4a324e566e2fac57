# SPDX-License-Identifier: Apache-2.0
"""How well the tuner's cost model ranks schedules, with and without each group of features,
on the measurements a tuning run recorded (``bench_tune.py --work-dir D``).

    python benchmarks/bench_tune.py --workload conv2d --trials 100 --work-dir /tmp/t-conv
    python benchmarks/bench_cost_model.py --workload conv2d --work-dir /tmp/t-conv
    python benchmarks/bench_cost_model.py --workload polybench --size small --work-dir /tmp/t-pb

For every workload of the records, each successful record's schedule is replayed from its
trace and described by ``tune.features.feature_groups``. The XGBoost model of the search
(``tune.cost_model.CostModel``) is trained on some records and ranks the others; the figure is
Spearman's rank correlation between its scores and the measured speeds (1: the model orders
the held-out schedules as the measurements do). Two splits: 5-fold cross-validation, and
"history" (trained on the first half of the records in the order they were measured, ranking
the second half, as the search uses the model). ``loops+strides`` is the feature set without
the isl footprints; ``+footprints`` adds the footprints per loop level, ``+traffic`` the cache
traffic estimated from them, ``all`` both.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import time
from pathlib import Path

import numpy as np

import polyloop as pl
from polyloop.ops import conv2d_nchw
from polyloop.runtime.records import Database, Status, workload_key
from polyloop.tune.cost_model import CostModel
from polyloop.tune.features import feature_groups

POLYBENCH_SIZES = {
    "small": {"ni": 200, "nj": 220, "nk": 240, "nl": 210, "m": 390, "n": 400, "tsteps": 20},
    "medium": {"ni": 800, "nj": 900, "nk": 1000, "nl": 1100, "m": 1900, "n": 2000,
               "tsteps": 100},
}
CUBE_SIDE = {"small": 40, "medium": 120}
SETS = {"loops+strides": ("loops", "strides"),
        "+footprints": ("loops", "strides", "footprints"),
        "+traffic": ("loops", "strides", "traffic"),
        "all": ("loops", "strides", "footprints", "traffic")}
SHUFFLES = 4      # cross-validations with other folds, averaged


def _workloads(args: argparse.Namespace) -> list[tuple[str, pl.Program, dict[str, int]]]:
    if args.workload == "conv2d":
        X = pl.placeholder((1, 64, 56, 56), "float32", name="X")
        W = pl.placeholder((64, 64, 3, 3), "float32", name="W")
        return [("conv2d", pl.to_program(conv2d_nchw(X, W, 1)), {})]
    if args.workload == "matmul":
        n = args.n
        A = pl.placeholder((n, n), "float32", name="A")
        B = pl.placeholder((n, n), "float32", name="B")
        k = pl.reduce_axis((0, n), name="k")
        C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
        return [("matmul", pl.to_program(C), {})]
    spec = importlib.util.spec_from_file_location(
        "polybench_scripts", Path(__file__).resolve().parent.parent / "tests" /
        "polybench_scripts.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    out = []
    for prog in module.KERNELS:
        sizes = {p: v for p, v in POLYBENCH_SIZES[args.size].items() if p in prog.params}
        if prog.name == "heat_3d":
            sizes["n"] = CUBE_SIDE[args.size]
        out.append((prog.name, prog, sizes))
    return out


def _spearman(a: list[float], b: list[float]) -> float:
    ra, rb = (np.argsort(np.argsort(x)).astype(float) for x in (a, b))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _score(xs: list[list[float]], ys: list[float], train: list[int], test: list[int]
           ) -> list[float]:
    model = CostModel(seed=0)
    model.update([xs[i] for i in train], [ys[i] for i in train])
    return model.predict([xs[i] for i in test])


def _evaluate(groups: list[dict[str, list[float]]], seconds: list[float]) -> dict[str, tuple]:
    speed = [-math.log(t) for t in seconds]
    n = len(seconds)
    out = {}
    for name, keys in SETS.items():
        xs = [[x for k in keys for x in g[k]] for g in groups]
        cv = []
        for shuffle in range(SHUFFLES):
            order = np.random.default_rng(shuffle).permutation(n)
            preds, truth = [], []
            for f in range(5):
                test = [int(i) for i in order[f::5]]
                train = [i for i in range(n) if i not in set(test)]
                preds += _score(xs, seconds, train, test)
                truth += [speed[i] for i in test]
            cv.append(_spearman(preds, truth))
        half = list(range(n // 2)), list(range(n // 2, n))
        later = _score(xs, seconds, *half)
        out[name] = (float(np.mean(cv)), _spearman(later, [speed[i] for i in half[1]]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("matmul", "conv2d", "polybench"), default="conv2d")
    ap.add_argument("--size", choices=sorted(POLYBENCH_SIZES), default="small")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--work-dir", action="append", required=True,
                    help="a work directory of records (may be given several times)")
    args = ap.parse_args()
    print(f"{'workload':10} {'records':>7}  {'features':14} {'5-fold':>7} {'history':>8}")
    for name, prog, sizes in _workloads(args):
        key = workload_key(prog, "c")
        recs = [r for d in args.work_dir for r in Database(d).records(key)
                if r.status is Status.OK and r.seconds]
        if len(recs) < 20:
            print(f"{name:10} {len(recs):7}  (too few records to rank)")
            continue
        start = time.perf_counter()
        groups = [feature_groups(pl.Schedule.from_trace(prog, r.trace), sizes) for r in recs]
        took = (time.perf_counter() - start) / len(recs)
        for label, (cv, hist) in _evaluate(groups, [r.seconds for r in recs]).items():
            print(f"{name:10} {len(recs):7}  {label:14} {cv:7.3f} {hist:8.3f}")
        print(f"{'':10} {'':7}  features: {took * 1e3:.0f} ms per schedule", flush=True)


if __name__ == "__main__":
    main()
